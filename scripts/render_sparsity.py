#!/usr/bin/env python3
"""Renders an LLM activation-sparsity sweep (`tessera llm eval --json` and `tessera llm bench --json`
over the same threshold files) into three SVG charts and a Markdown page.

  scripts/render_sparsity.py DIR [--svg-dir D] [--md FILE] [--skip-levels 0.10,..] [--own-levels 0.3,..]

DIR holds eval.json (perplexity, KL to the dense model, top-1 agreement and measured sparsity of each
configuration over a text), bench.json (decode tok/s of each configuration against the dense model,
speedup with its 95% interval, the byte-count bound) and optionally meta.json (date, commit, machine,
command; printed in titles and on the page). Either of eval.json and bench.json may be missing: what
the other allows is drawn and the page says what is not. A configuration of one file is matched to
one of the other by its thresholds path and its router's tau (absent without a router).

Written: D/sparsity-ppl.svg (perplexity, log scale, against the fraction of the layers' weight bytes
skipped per token, one line per method over its threshold-only configurations, router
configurations as open markers, the dense model as a dashed line; a second panel against each
method's own sparsity measure: act_sparsity for cats and sats, in_sparsity for teal),
D/sparsity-tps.svg (decode tok/s against weight bytes skipped with 95% intervals, the dense model
and the byte-count bound dense tok/s x dense bytes / configuration bytes), D/sparsity-pareto.svg
(perplexity against decode tok/s, the Pareto front of each series as a step line) and FILE: a row
per configuration, a Pareto check of the router configurations against the threshold-only front of
their method, and the methods' perplexities interpolated at matched sparsity. D defaults to DIR,
FILE to DIR/sparsity.md. Plain SVG written here (no matplotlib).

Exit status: 0 written, 2 bad usage, a missing DIR, neither eval.json nor bench.json in it, or a
file that is not valid JSON."""
import argparse
import html
import json
import math
import os
import textwrap
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_results import BadInput, fmt, get, load_json as _load_json, md_escape, num, text  # noqa: E402

METHOD_ORDER = ["cats", "teal", "sats"]
COLOR = {"cats": "#1565c0", "teal": "#00897b", "sats": "#c62828"}
OTHER_COLORS = ["#6a1b9a", "#ef6c00", "#5d4037", "#ad1457"]
DENSE_COLOR = "#424242"
GRID = "#e0e0e0"
SKIP_LEVELS = [0.10, 0.15, 0.20, 0.25, 0.30]
OWN_LEVELS = [0.3, 0.4, 0.5, 0.6, 0.7]


# ---- reading JSON defensively (render_results.py's readers) -------------------------------------

def load_json(path, what, required=True):
    """render_results.load_json, or None for a file that is absent and not required."""
    if not required and not os.path.exists(path):
        return None
    return _load_json(path, what)


# ---- configurations ------------------------------------------------------------------------------

class Config:
    """One configuration of the sweep: its entry in eval.json and/or in bench.json."""

    def __init__(self, thresholds, tau, ev=None, be=None):
        self.thresholds, self.tau, self.ev, self.be = thresholds, tau, ev, be

    def any(self, key):
        """A string field from either file (eval's first)."""
        return text(self.ev, key) or text(self.be, key)

    @property
    def method(self):
        return self.any("method") or "?"

    @property
    def router(self):
        return self.any("router")

    @property
    def target(self):
        v = num(self.ev, "target")
        return v if v is not None else num(self.be, "target")

    def stat(self, key, prefer="eval"):
        """A number from the preferred file, else from the other."""
        a, b = (self.ev, self.be) if prefer == "eval" else (self.be, self.ev)
        v = num(a, key)
        return v if v is not None else num(b, key)

    def own(self, src):
        """The method's own sparsity measure in src (an eval or bench entry)."""
        return num(src, "in_sparsity" if self.method == "teal" else "act_sparsity")

    @property
    def name(self):
        return os.path.basename(self.thresholds) if self.thresholds else "?"

    @property
    def label(self):
        return self.name + (" + router τ %s" % fmt_tau(self.tau) if self.router else "")


def fmt_tau(t):
    return "%g" % t if t is not None else "?"


def config_key(e):
    tau = num(e, "tau")
    return (text(e, "thresholds") or "?", None if tau is None else round(tau, 9))


def configs_of(d, what, notes):
    if d is None:
        return []
    cs = get(d, "configs")
    if cs is None:
        notes.append("%s has no `configs` list: it holds the dense model only." % what)
        return []
    if not isinstance(cs, list):
        raise BadInput("%s: `configs` is a JSON %s, not a list" % (what, type(cs).__name__))
    out = [e for e in cs if isinstance(e, dict)]
    if len(out) != len(cs):
        notes.append("%s: %d entries of `configs` are not objects and were ignored." % (what, len(cs) - len(out)))
    return out


def match(evs, bes):
    """Configs in eval order, then bench-only ones; a key seen twice in a file is matched by order."""
    out, index = [], {}
    for e in evs:
        k = config_key(e)
        c = Config(k[0], k[1], ev=e)
        index.setdefault(k, []).append(c)
        out.append(c)
    for e in bes:
        k = config_key(e)
        free = [c for c in index.get(k, []) if c.be is None]
        if free:
            free[0].be = e
        else:
            out.append(Config(k[0], k[1], be=e))
    return out


def methods_in(cfgs):
    ms = {c.method for c in cfgs if c.method not in ("none", "?")}
    return [m for m in METHOD_ORDER if m in ms] + sorted(ms - set(METHOD_ORDER))


def color_of(m):
    if m in COLOR:
        return COLOR[m]
    return OTHER_COLORS[sum(map(ord, m)) % len(OTHER_COLORS)]


# ---- formatting ------------------------------------------------------------------------------------


def pct(v, digits=1):
    return "—" if v is None else "%.*f%%" % (digits, 100 * v)


def machine_str(m):
    if m is None:
        return None
    if isinstance(m, dict):
        parts = [str(v) for k, v in m.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
        return ", ".join(parts[:6]) if parts else None
    return str(m)


def meta_line(meta):
    """'date · commit · machine' from meta.json, or ''."""
    if not meta:
        return ""
    c = get(meta, "commit")
    if isinstance(c, dict):
        c = text(c, "commit")
    parts = [text(meta, "date"), ("commit " + c) if isinstance(c, str) else None, machine_str(get(meta, "machine"))]
    return " · ".join(p for p in parts if p)


# ---- interpolation and fronts --------------------------------------------------------------------------

def curve(points):
    """(x, y) points sorted by x, ys averaged where x repeats."""
    acc = {}
    for x, y in points:
        if x is not None and y is not None:
            acc.setdefault(x, []).append(y)
    return [(x, sum(ys) / len(ys)) for x, ys in sorted(acc.items())]


def interp(pts, x):
    """Linear interpolation in sorted pts at x; None outside their range (or for no points)."""
    if not pts or x < pts[0][0] - 1e-12 or x > pts[-1][0] + 1e-12:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 - 1e-12 <= x <= x1 + 1e-12:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[0][1]  # a single point at x


def pareto(points):
    """The points (tps, ppl, ...) that no other point dominates (higher-or-equal tok/s and lower-or-
    equal ppl, one strictly), sorted by tok/s: their ppl rises with tok/s."""
    front = []
    for p in points:
        if not any(q[0] >= p[0] and q[1] <= p[1] and (q[0] > p[0] or q[1] < p[1]) for q in points):
            if not any(q[0] == p[0] and q[1] == p[1] for q in front):
                front.append(p)
    return sorted(front, key=lambda p: (p[0], p[1]))


def dominated_by(r, pts):
    for s in pts:
        if s[0] >= r[0] and s[1] <= r[1] and (s[0] > r[0] or s[1] < r[1]):
            return s
    return None


def improves(r, front):
    """Whether r = (tps, ppl) lies strictly better than the front interpolated linearly between its
    points: a point of that polyline has tok/s <= r's and ppl >= r's, one strictly."""
    if not front:
        return False
    t, p = r[0], r[1]
    for q in front:
        if q[0] <= t and q[1] >= p and (q[0] < t or q[1] > p):
            return True
    f = interp([(q[0], q[1]) for q in front], t)
    if f is not None and f > p:
        return True
    by_p = sorted(((q[1], q[0]) for q in front))
    for (p0, t0), (p1, t1) in zip(by_p, by_p[1:]):
        if p0 <= p <= p1:
            g = max(t0, t1) if p1 == p0 else t0 + (t1 - t0) * (p - p0) / (p1 - p0)
            if g < t:
                return True
    return False


# ---- SVG -----------------------------------------------------------------------------------------------

def nice_step(span, n):
    raw = span / max(n, 1)
    if raw <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * e >= raw:
            return m * e
    return 10 * e


def lin_ticks(lo, hi, n=5):
    st = nice_step(hi - lo, n)
    t, out = math.ceil(lo / st - 1e-9) * st, []
    while t <= hi + st * 1e-9:
        out.append(round(t, 12))
        t += st
    return out, st


def log_ticks(lo, hi):
    if hi / lo <= 12:
        ts, _ = lin_ticks(lo, hi, 5)
        ts = [t for t in ts if t > 0]
        if len(ts) >= 3:
            return ts
    out = []
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** k
            if lo <= v <= hi:
                out.append(v)
    return out if len(out) >= 2 else [lo, hi]


def tick_label(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    s = ("%.3f" % v).rstrip("0").rstrip(".")
    return s


class Axes:
    """A plot area at (x0, y0) of w x h pixels over data ranges [xlo, xhi] x [ylo, yhi]."""

    def __init__(self, o, x0, y0, w, h, xr, yr, ylog=False, xpct=False):
        self.o, self.x0, self.y0, self.w, self.h = o, x0, y0, w, h
        self.xlo, self.xhi = xr
        self.ylo, self.yhi = yr
        self.ylog, self.xpct = ylog, xpct
        self.boxes = []  # (x0, y0, x1, y1) of the point labels placed, to keep them apart

    def X(self, v):
        return self.x0 + (v - self.xlo) / (self.xhi - self.xlo) * self.w

    def Y(self, v):
        if self.ylog:
            f = (math.log(v) - math.log(self.ylo)) / (math.log(self.yhi) - math.log(self.ylo))
        else:
            f = (v - self.ylo) / (self.yhi - self.ylo)
        return self.y0 + self.h - f * self.h

    def frame(self, xlabel, ylabel, title=None):
        o, e = self.o, html.escape
        xt, _ = lin_ticks(self.xlo, self.xhi, 5 if self.w < 400 else 8)
        yt = log_ticks(self.ylo, self.yhi) if self.ylog else lin_ticks(self.ylo, self.yhi, 6)[0]
        for v in xt:
            x = self.X(v)
            o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>' % (x, self.y0, x, self.y0 + self.h, GRID))
            lab = ("%g%%" % round(100 * v, 6)) if self.xpct else tick_label(v)
            o.append('<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>' % (x, self.y0 + self.h + 15, lab))
        for v in yt:
            y = self.Y(v)
            o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>' % (self.x0, y, self.x0 + self.w, y, GRID))
            o.append('<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>' % (self.x0 - 5, y + 4, tick_label(v)))
        o.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>' % (self.x0, self.y0, self.w, self.h))
        o.append('<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>' % (self.x0 + self.w / 2, self.y0 + self.h + 33, e(xlabel)))
        cy = self.y0 + self.h / 2
        o.append('<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>' % (
            self.x0 - 44, cy, self.x0 - 44, cy, e(ylabel)))
        if title:
            o.append('<text x="%.1f" y="%.1f" font-weight="bold">%s</text>' % (self.x0, self.y0 - 8, e(title)))

    def clip_id(self):
        cid = "c%d" % len(self.o)
        self.o.append('<clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath>' % (
            cid, self.x0, self.y0, self.w, self.h))
        return cid

    def hline(self, y, color, dash="6,4", width=1.5, label=None):
        if not (self.ylo <= y <= self.yhi):
            return
        yy = self.Y(y)
        self.o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>' % (
            self.x0, yy, self.x0 + self.w, yy, color, width, ' stroke-dasharray="%s"' % dash if dash else ""))
        if label:
            self.o.append('<text x="%.1f" y="%.1f" text-anchor="end" fill="%s" font-size="10">%s</text>' % (
                self.x0 + self.w - 4, yy - 4, color, html.escape(label)))

    def polyline(self, pts, color, dash=None, width=1.8, opacity=1.0):
        if len(pts) < 2:
            return
        s = " ".join("%.1f,%.1f" % (self.X(x), self.Y(y)) for x, y in pts)
        self.o.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="%.1f"%s%s/>' % (
            s, color, width, ' stroke-dasharray="%s"' % dash if dash else "", ' stroke-opacity="%.2f"' % opacity if opacity < 1 else ""))

    def marker(self, x, y, color, kind="o", label=None, tip=None):
        self.o.append(marker_svg(self.X(x), self.Y(y), color, kind, tip))
        if label:
            self.label(self.X(x), self.Y(y), label)

    def label(self, px, py, s):
        """A small label beside the point (px, py) where it overlaps no earlier label, else none."""
        w, h = 6.0 * len(s), 10.0
        for dx, dy in ((6, -6), (6, 12), (-6 - w, -6), (-6 - w, 12), (6, 3), (-6 - w, 3)):
            b = (px + dx, py + dy - h + 1, px + dx + w, py + dy + 2)
            if not any(b[0] < c[2] and c[0] < b[2] and b[1] < c[3] and c[1] < b[3] for c in self.boxes):
                self.boxes.append(b)
                self.o.append('<text x="%.1f" y="%.1f" font-size="10" fill="#555">%s</text>' % (px + dx, py + dy, html.escape(s)))
                return

    def errbar(self, x, lo, hi, color):
        X, y0, y1 = self.X(x), self.Y(lo), self.Y(hi)
        self.o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>' % (X, y0, X, y1, color))
        for yy in (y0, y1):
            self.o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>' % (X - 4, yy, X + 4, yy, color))


def marker_svg(x, y, color, kind, tip=None):
    t = "<title>%s</title>" % html.escape(tip) if tip else ""
    if kind == "o":  # filled circle: a threshold-only configuration
        return '<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="white" stroke-width="0.8">%s</circle>' % (x, y, color, t)
    if kind == "s":  # open square: a router configuration
        return '<rect x="%.1f" y="%.1f" width="8" height="8" fill="white" stroke="%s" stroke-width="1.8">%s</rect>' % (x - 4, y - 4, color, t)
    # filled diamond: the dense model
    return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s">%s</polygon>' % (
        x, y - 6, x + 6, y, x, y + 6, x - 6, y, color, t)


def legend(o, items, x, y, width):
    """items: (label, color, marker kind or None, dash or None or 'solid'); laid out in rows."""
    cx, cy = x, y
    for label, color, kind, dash in items:
        w = 34 + 6.3 * len(label) + 16
        if cx + w > x + width and cx > x:
            cx, cy = x, cy + 18
        if dash:
            o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.8"%s/>' % (
                cx, cy, cx + 26, cy, color, "" if dash == "solid" else ' stroke-dasharray="%s"' % dash))
        if kind:
            o.append(marker_svg(cx + 13, cy, color, kind))
        o.append('<text x="%.1f" y="%.1f">%s</text>' % (cx + 32, cy + 4, html.escape(label)))
        cx += w
    return cy


def wrap(s, px, size):
    """s cut into lines of at most px pixels at font size size (an estimate: 0.6 em a character)."""
    return textwrap.wrap(s, max(20, int(px / (0.6 * size)))) or [""]


def svg_open(W, title, subtitles):
    """The SVG's opening (its size set by svg_write), a wrapped title and grey subtitle lines; returns the
    list of elements and the y below them."""
    e = html.escape
    o = ["", '<rect width="100%" height="100%" fill="white"/>']
    y = 20
    for ln in wrap(title, W - 20, 14):
        o.append('<text x="10" y="%d" font-size="14" font-weight="bold">%s</text>' % (y, e(ln)))
        y += 18
    for sub in subtitles:
        for ln in wrap(sub, W - 20, 12) if sub else []:
            o.append('<text x="10" y="%d" fill="#555">%s</text>' % (y - 2, e(ln)))
            y += 15
    return o, y


def footer(o, notes, x, y, W):
    """Grey notes from y down, wrapped; returns the y below them."""
    for n in notes:
        for ln in wrap(n, W - x - 10, 11):
            o.append('<text x="%d" y="%d" fill="#555" font-size="11">%s</text>' % (x, y, html.escape(ln)))
            y += 14
    return y


def svg_write(o, path, W, H):
    o[0] = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" '
            'font-size="12">' % (W, H, W, H))
    o.append("</svg>")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(o) + "\n")
    os.replace(path + ".tmp", path)


def yrange(vals, log=False, pad=0.06):
    vals = [v for v in vals if v is not None and (v > 0 or not log)]
    if not vals:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if log:
        if hi / lo < 1.02:
            lo, hi = lo / 1.01, hi * 1.01
        r = math.log(hi / lo)
        return lo * math.exp(-pad * r), hi * math.exp(pad * r)
    if hi - lo < 1e-9 * max(1.0, abs(hi)):
        lo, hi = lo - max(0.5, abs(lo) * 0.05), hi + max(0.5, abs(hi) * 0.05)
    r = hi - lo
    return lo - pad * r, hi + pad * r


def xrange_frac(vals):
    """0 .. a nice upper end (at most 1) covering the fractions vals."""
    hi = max([v for v in vals if v is not None] + [0.05])
    st = 0.05 if hi <= 0.5 else 0.1
    return 0.0, min(1.0, math.ceil(hi * 1.05 / st - 1e-9) * st)


# ---- the charts ----------------------------------------------------------------------------------------

def chart_ppl(cfgs, ev, title_sub, path):
    """Perplexity against weight bytes skipped (left) and against each method's own sparsity (right)."""
    dense_ppl = num(ev, "dense", "ppl")
    pts = [c for c in cfgs if (num(c.ev, "ppl") or 0) > 0 and c.method not in ("none", "?")]
    if dense_ppl is not None and dense_ppl <= 0:
        dense_ppl = None
    if not pts:
        return False
    W = 1000
    o, top = svg_open(W, "Perplexity against sparsity — %s" % (text(ev, "model") or "?"), [
        "eval: text %s, windows of %s tokens, %s scored tokens, %s threads" % (
            text(ev, "text") or "?", fmt(num(ev, "ctx"), digits=0), fmt(num(ev, "scored"), digits=0), fmt(num(ev, "threads"), digits=0)),
        title_sub])
    top += 26
    ys = [num(c.ev, "ppl") for c in pts] + [dense_ppl]
    yr = yrange(ys, log=True)
    a1 = Axes(o, 70, top, 520, 340, xrange_frac([num(c.ev, "weight_skip") for c in pts]), yr, ylog=True, xpct=True)
    a2 = Axes(o, 680, top, 300, 340, xrange_frac([c.own(c.ev) for c in pts]), yr, ylog=True, xpct=True)
    a1.frame("weight bytes of the layers skipped per token (measured)", "perplexity (log scale)", "against weight bytes skipped")
    a2.frame("own sparsity (cats, sats: MLP act.; teal: inputs)", "perplexity (log scale)", "against each method's own sparsity")
    leg = []
    for ax, xf in ((a1, lambda c: num(c.ev, "weight_skip")), (a2, lambda c: c.own(c.ev))):
        cid = ax.clip_id()
        o.append('<g clip-path="url(#%s)">' % cid)
        if dense_ppl is not None:
            ax.hline(dense_ppl, DENSE_COLOR, label="dense %.3f" % dense_ppl)
        for m in methods_in(pts):
            col = color_of(m)
            st = [c for c in pts if c.method == m and not c.router and xf(c) is not None]
            line = curve([(xf(c), num(c.ev, "ppl")) for c in st])
            ax.polyline(line, col)
            for c in st:
                ax.marker(xf(c), num(c.ev, "ppl"), col, "o", tip="%s: ppl %.3f" % (c.label, num(c.ev, "ppl")))
            for c in pts:
                if c.method == m and c.router and xf(c) is not None:
                    ax.marker(xf(c), num(c.ev, "ppl"), col, "s", tip="%s: ppl %.3f" % (c.label, num(c.ev, "ppl")))
        o.append("</g>")
    for m in methods_in(pts):
        if any(c.method == m and not c.router for c in pts):
            leg.append((m, color_of(m), "o", "solid"))
        if any(c.method == m and c.router for c in pts):
            leg.append(("%s + router (not in the line)" % m, color_of(m), "s", None))
    if dense_ppl is not None:
        leg.append(("dense model", DENSE_COLOR, None, "6,4"))
    y = legend(o, leg, 70, top + 398, 900)
    H = footer(o, ["Lines join each method's threshold-only configurations in order of x; open squares are router configurations. "
                   "Hover a marker for its configuration."], 70, y + 30, W) + 4
    svg_write(o, path, W, H)
    return True


def chart_tps(cfgs, be, title_sub, path):
    dense = num(be, "dense", "decode_tps")
    pts = [c for c in cfgs if c.be is not None and num(c.be, "decode_tps") is not None
           and num(c.be, "weight_skip") is not None and c.method not in ("none", "?")]
    if not pts or dense is None:
        return False
    W = 900
    o, top = svg_open(W, "Decode tok/s against weight bytes skipped — %s" % (text(be, "model") or "?"), [
        "bench: prompt %s tokens, %s generated, %s interleaved rounds, %s threads" % (
            fmt(num(be, "prompt_len"), digits=0), fmt(num(be, "gen"), digits=0), fmt(num(be, "rounds"), digits=0),
            fmt(num(be, "threads"), digits=0)), title_sub])
    top += 12

    def ci(c):
        lo, hi = num(c.be, "speedup_lo"), num(c.be, "speedup_hi")
        return (lo * dense, hi * dense) if lo is not None and hi is not None else (None, None)
    bound = curve([(0.0, dense)] + [(num(c.be, "weight_skip"), dense * num(c.be, "byte_bound")) for c in pts
                                    if num(c.be, "byte_bound") is not None])
    ys = [dense] + [num(c.be, "decode_tps") for c in pts] + [v for c in pts for v in ci(c)] + [y for _, y in bound]
    ax = Axes(o, 80, top, 620, 360, xrange_frac([num(c.be, "weight_skip") for c in pts]), yrange(ys), xpct=True)
    ax.frame("weight bytes of the layers skipped per token (measured in the bench run)", "decode tok/s")
    o.append('<g clip-path="url(#%s)">' % ax.clip_id())
    ax.hline(dense, DENSE_COLOR, dash=None, width=1.2, label="dense %.1f tok/s" % dense)
    ax.polyline(bound, "#757575", dash="6,4", width=1.5)
    for m in methods_in(pts):
        col = color_of(m)
        st = [c for c in pts if c.method == m and not c.router]
        ax.polyline(curve([(num(c.be, "weight_skip"), num(c.be, "decode_tps")) for c in st]), col)
        for c in [c for c in pts if c.method == m]:
            lo, hi = ci(c)
            if lo is not None:
                ax.errbar(num(c.be, "weight_skip"), lo, hi, col)
            sp = num(c.be, "speedup")
            ax.marker(num(c.be, "weight_skip"), num(c.be, "decode_tps"), col, "s" if c.router else "o",
                      tip="%s: %.1f tok/s, speedup %s" % (c.label, num(c.be, "decode_tps"), fmt(sp, "×", 3)))
    o.append("</g>")
    leg = []
    for m in methods_in(pts):
        if any(c.method == m and not c.router for c in pts):
            leg.append((m, color_of(m), "o", "solid"))
        if any(c.method == m and c.router for c in pts):
            leg.append(("%s + router" % m, color_of(m), "s", None))
    leg += [("dense model", DENSE_COLOR, None, "solid"), ("byte-count bound", "#757575", None, "6,4")]
    for i, it in enumerate(leg):  # one item a row in the right margin
        legend(o, [it], 715, top + 16 + 20 * i, 180)
    H = footer(o, ["Error bars: the 95% interval of the speedup × dense tok/s. Byte-count bound: dense tok/s × dense bytes ÷ "
                   "configuration bytes per token, what reading fewer bytes alone could give.",
                   "Lines join each method's threshold-only configurations; open squares are router configurations."],
               80, top + 360 + 56, W) + 4
    svg_write(o, path, W, H)
    return True


def chart_pareto(cfgs, ev, be, title_sub, path):
    dense = (num(be, "dense", "decode_tps"), num(ev, "dense", "ppl"))
    if (dense[1] or 0) <= 0:
        dense = (dense[0], None)
    pts = [c for c in cfgs if (num(c.ev, "ppl") or 0) > 0 and num(c.be, "decode_tps") is not None and c.method not in ("none", "?")]
    if not pts:
        return False
    W = 900
    o, top = svg_open(W, "Quality against throughput — %s: perplexity (eval) against decode tok/s (bench)" % (text(ev, "model") or "?"),
                      [title_sub])
    top += 12
    xs = [num(c.be, "decode_tps") for c in pts] + ([dense[0]] if None not in dense else [])
    ys = [num(c.ev, "ppl") for c in pts] + ([dense[1]] if None not in dense else [])
    ax = Axes(o, 80, top, 600, 400, yrange(xs, pad=0.08), yrange(ys, log=True, pad=0.08), ylog=True)
    ax.frame("decode tok/s (bench.json; right is faster)", "perplexity (log scale; down is better)")
    o.append('<g clip-path="url(#%s)">' % ax.clip_id())
    leg = []
    for m in methods_in(pts):
        col = color_of(m)
        for routed in (False, True):
            ser = [c for c in pts if c.method == m and bool(c.router) == routed]
            if not ser:
                continue
            p = [(num(c.be, "decode_tps"), num(c.ev, "ppl"), c) for c in ser]
            fr = pareto(p + ([(dense[0], dense[1], None)] if not routed and None not in dense else []))
            steps = []
            for i, q in enumerate(fr):
                if i:
                    steps.append((fr[i - 1][0], q[1]))
                steps.append((q[0], q[1]))
            ax.polyline(steps, col, dash="5,3" if routed else None, width=1.4, opacity=0.8)
            for t, y, c in p:
                lab = "τ %s" % fmt_tau(c.tau) if routed else (("%g" % c.target) if c.target is not None else None)
                ax.marker(t, y, col, "s" if routed else "o", label=lab, tip="%s: %.1f tok/s, ppl %.3f" % (c.label, t, y))
            leg.append(("%s router (tau)" % m if routed else "%s static (target)" % m, col, "s" if routed else "o",
                        "5,3" if routed else "solid"))
    if None not in dense:
        ax.marker(dense[0], dense[1], DENSE_COLOR, "d", label="dense", tip="dense: %.1f tok/s, ppl %.3f" % dense)
        leg.append(("dense model", DENSE_COLOR, "d", None))
    o.append("</g>")
    for i, it in enumerate(leg):
        legend(o, [it], 700, top + 16 + 20 * i, 200)
    H = footer(o, ["Step lines: the Pareto front of each series (lower perplexity and higher tok/s are better); the threshold-only "
                   "fronts include the dense model as their zero-sparsity end. Labels: target sparsity of threshold-only points, "
                   "tau of router points (a label that would overlap another is left out; hover a marker)."],
               80, top + 400 + 56, W) + 4
    svg_write(o, path, W, H)
    return True


# ---- the page ------------------------------------------------------------------------------------------

def table_rows(cfgs, both):
    out = ["| thresholds | method | target | router (τ) | act sparsity | in sparsity | weight bytes skipped | MB/token | "
           "byte bound | tok/s | speedup [95% CI] | % of bound | ppl | KL | top-1 |",
           "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for c in cfgs:
        rt = "—"
        if c.router:
            rd = c.stat("routed_dense")
            rt = "τ %s%s" % (fmt_tau(c.tau), ", %s to dense" % pct(rd) if rd is not None else "")
        b = c.stat("bytes_per_token", "bench")
        sp, lo, hi = num(c.be, "speedup"), num(c.be, "speedup_lo"), num(c.be, "speedup_hi")
        spc = "—" if sp is None else "%.3f×%s" % (sp, " [%.3f, %.3f]" % (lo, hi) if lo is not None and hi is not None else "")
        ob = num(c.be, "of_bound")
        top1 = num(c.ev, "top1")
        out.append("| %s |" % " | ".join(md_escape(x) for x in [
            c.name + ("" if not both or c.ev is not None else " (bench only)") + ("" if not both or c.be is not None else " (eval only)"),
            c.method, fmt(c.target, digits=2), rt, pct(c.stat("act_sparsity")), pct(c.stat("in_sparsity")),
            pct(c.stat("weight_skip")), fmt(b / 1e6 if b is not None else None, digits=2),
            fmt(c.stat("byte_bound", "bench"), "×", 3), fmt(num(c.be, "decode_tps"), digits=1), spc,
            pct(ob, 0), fmt(num(c.ev, "ppl"), digits=3), fmt(num(c.ev, "kl"), digits=4), pct(top1)]))
    return out


def pareto_check(cfgs, ev, be):
    out = ["## Pareto check", ""]
    dense = (num(be, "dense", "decode_tps"), num(ev, "dense", "ppl"))
    both = [c for c in cfgs if num(c.ev, "ppl") is not None and num(c.be, "decode_tps") is not None]
    routed = [c for c in both if c.router]
    if ev is None or be is None:
        return out + ["Not done: it needs both eval.json (perplexity) and bench.json (tok/s).", ""]
    if not routed:
        return out + ["No router configuration has both a perplexity and a tok/s: nothing to check.", ""]
    out += ["Each router configuration, at (bench tok/s, eval perplexity), against the front of its method's threshold-only "
            "configurations%s, interpolated linearly between the front's points. A router point counts when no static point "
            "dominates it (tok/s ≥ and ppl ≤, one strictly) and it lies strictly beyond the interpolated front: lower "
            "perplexity at equal-or-higher tok/s, or higher tok/s at equal-or-lower perplexity. \"Robust\" repeats the test "
            "with the router point's tok/s at the low end of its 95%% interval (dense tok/s × speedup_lo); the static points keep "
            "their medians." % (" plus the dense model (their zero-sparsity end)" if None not in dense else ""), ""]
    detail = ["| router configuration | method | τ | tok/s | ppl | static front ppl at this tok/s | verdict |",
              "|---|---|---:|---:|---:|---:|---|"]
    for m in methods_in(routed):
        rs = [c for c in routed if c.method == m]
        static = [(num(c.be, "decode_tps"), num(c.ev, "ppl"), c.label) for c in both if c.method == m and not c.router]
        if None not in dense:
            static.append((dense[0], dense[1], "dense"))
        if not static:
            out.append("- **%s router**: no static %s configuration to compare with." % (m, m))
            continue
        fr = pareto(static)
        nd = imp = rob = nrob = 0
        for c in rs:
            r = (num(c.be, "decode_tps"), num(c.ev, "ppl"))
            f = interp([(q[0], q[1]) for q in fr], r[0])
            d = dominated_by(r, static)
            if d is not None:
                v = "dominated by %s (%.1f tok/s, ppl %.3f)" % (d[2], d[0], d[1])
            else:
                nd += 1
                if improves(r, fr):
                    imp += 1
                    v = "**improves on the front**"
                    lo = num(c.be, "speedup_lo")
                    if lo is not None and dense[0] is not None:
                        nrob += 1
                        rl = (lo * dense[0], r[1])
                        if dominated_by(rl, static) is None and improves(rl, fr):
                            rob += 1
                            v += " (robust)"
                        else:
                            v += " (not at the low end of its interval)"
                else:
                    v = "not dominated, not beyond the front (a trade-off outside or on it)"
            gap = " (%+.1f%%)" % (100 * (r[1] / f - 1)) if f is not None else ""
            detail.append("| %s |" % " | ".join(md_escape(x) for x in [
                c.name, m, fmt_tau(c.tau), fmt(r[0], digits=1), fmt(r[1], digits=3),
                (fmt(f, digits=3) + gap) if f is not None else "outside the front's tok/s range", v]))
        out.append("- **%s router (τ)**: %d of %d points improve on the static %s front (%d not dominated by any static point)%s." % (
            m, imp, len(rs), m, nd, "; %d of the %d with a 95%% interval also at its low end" % (rob, nrob) if nrob else ""))
    return out + [""] + (detail + [""] if len(detail) > 2 else [])


def matched(cfgs, levels, xf, xname, caveat):
    ms = methods_in([c for c in cfgs if c.ev is not None and not c.router])
    curves = {}
    for m in ms:
        curves[m] = curve([(xf(c), num(c.ev, "ppl")) for c in cfgs if c.ev is not None and not c.router and c.method == m])
    out = ["| %s | %s | lowest | gaps to the lowest |" % (xname, " | ".join("%s ppl" % m for m in ms)),
           "|---:|%s---|---|" % ("---:|" * len(ms))]
    for lv in levels:
        vals = {m: interp(curves[m], lv) for m in ms}
        have = {m: v for m, v in vals.items() if v is not None}
        if not have:
            best, gaps = "— (no method measured here)", "—"
        else:
            b = min(have, key=have.get)
            best = b if len(have) > 1 else "%s (only method in range)" % b
            gaps = ", ".join("%s +%.1f%%" % (m, 100 * (have[m] / have[b] - 1)) for m in ms if m in have and m != b) or "—"
        out.append("| %s |" % " | ".join([pct(lv, 0)] + [fmt(vals[m], digits=3) for m in ms] + [best, gaps]))
    rng = "; ".join("%s %s–%s" % (m, pct(curves[m][0][0]), pct(curves[m][-1][0])) for m in ms if curves[m])
    return out + ["", "Measured ranges: %s. %s" % (rng or "none", caveat), ""]


def render(d, svg_dir, md_path, skip_levels, own_levels):
    notes = []
    ev = load_json(os.path.join(d, "eval.json"), "eval", required=False)
    be = load_json(os.path.join(d, "bench.json"), "bench", required=False)
    if ev is None and be is None:
        raise BadInput("%s holds neither eval.json nor bench.json" % d)
    meta = load_json(os.path.join(d, "meta.json"), "meta", required=False)
    cfgs = match(configs_of(ev, "eval.json", notes), configs_of(be, "bench.json", notes))
    msub = meta_line(meta)
    os.makedirs(svg_dir, exist_ok=True)
    md_dir = os.path.dirname(os.path.abspath(md_path))
    if md_dir:
        os.makedirs(md_dir, exist_ok=True)
    charts, missing = [], []
    for name, what, draw in [
            ("sparsity-ppl.svg", "Perplexity against sparsity",
             (lambda p: chart_ppl(cfgs, ev, msub, p)) if ev is not None else None),
            ("sparsity-tps.svg", "Decode tok/s against weight bytes skipped",
             (lambda p: chart_tps(cfgs, be, msub, p)) if be is not None else None),
            ("sparsity-pareto.svg", "Perplexity against decode tok/s",
             (lambda p: chart_pareto(cfgs, ev, be, msub, p)) if ev is not None and be is not None else None)]:
        p = os.path.join(svg_dir, name)
        if draw is not None and draw(p):
            charts.append((what, os.path.relpath(p, md_dir)))
        else:
            missing.append("%s (`%s`): not drawn, %s." % (what, name, "no configuration with the numbers it needs"
                                                        if draw is not None else "it needs %s" % (
                                                            "eval.json" if name == "sparsity-ppl.svg" else "bench.json"
                                                            if name == "sparsity-tps.svg" else "both eval.json and bench.json")))

    out = ["# LLM activation sparsity sweep", ""]
    if meta:
        for k in ("date", "commit", "machine", "command"):
            v = get(meta, k)
            if isinstance(v, dict) and k == "commit":
                v = text(v, "commit")
            v = machine_str(v) if k == "machine" else v
            if v is not None:
                out.append("- %s: %s" % (k.capitalize(), ("`%s`" % v) if k in ("commit", "command") else md_escape(v)))
    else:
        out.append("- No meta.json: date, commit and machine unknown.")
    if ev is not None:
        out.append("- Quality (eval.json): model %s, text %s, windows of %s tokens × %s, %s scored tokens, %s threads; dense "
                   "perplexity **%s**." % (text(ev, "model") or "?", text(ev, "text") or "?", fmt(num(ev, "ctx"), digits=0),
                                          fmt(num(ev, "windows"), digits=0), fmt(num(ev, "scored"), digits=0),
                                          fmt(num(ev, "threads"), digits=0), fmt(num(ev, "dense", "ppl"), digits=3)))
    else:
        out.append("- **No eval.json**: no perplexity, KL or top-1; the perplexity chart, the Pareto chart and the checks below "
                   "are missing.")
    if be is not None:
        oc = num(be, "other_cpus")
        out.append("- Speed (bench.json): model %s, prompt %s tokens, %s generated, %s interleaved rounds, %s threads%s; dense "
                   "**%s tok/s**, %s MB/token." % (text(be, "model") or "?", fmt(num(be, "prompt_len"), digits=0),
                                                  fmt(num(be, "gen"), digits=0), fmt(num(be, "rounds"), digits=0),
                                                  fmt(num(be, "threads"), digits=0),
                                                  ", other CPUs busy: %s" % fmt(oc, digits=2) if oc is not None else "",
                                                  fmt(num(be, "dense", "decode_tps"), digits=1),
                                                  fmt((num(be, "dense", "bytes_per_token") or 0) / 1e6 or None, digits=2)))
    else:
        out.append("- **No bench.json**: no speedups; the tok/s chart, the Pareto chart and the Pareto check are missing.")
    if ev is not None and be is not None and text(ev, "model") != text(be, "model"):
        out.append("- **Warning**: eval.json is of model %s, bench.json of %s." % (text(ev, "model"), text(be, "model")))
    for n in notes:
        out.append("- Note: %s" % n)
    only_e = [c.label for c in cfgs if c.be is None]
    only_b = [c.label for c in cfgs if c.ev is None]
    if ev is not None and be is not None:
        if only_e:
            out.append("- In eval.json only (no tok/s): %s." % ", ".join(only_e))
        if only_b:
            out.append("- In bench.json only (no perplexity): %s." % ", ".join(only_b))
    diff = [c.label for c in cfgs if num(c.ev, "weight_skip") is not None and num(c.be, "weight_skip") is not None
            and abs(num(c.ev, "weight_skip") - num(c.be, "weight_skip")) > 0.02]
    if diff:
        out.append("- Weight bytes skipped differ by more than 2 points between the eval text and the bench prompt for: %s." % ", ".join(diff))
    out.append("")
    for what, rel in charts:
        out.append("![%s](%s)" % (what, rel))
        out.append("")
    for mline in missing:
        out.append("- %s" % mline)
    if missing:
        out.append("")
    out += ["## Configurations", ""]
    if cfgs:
        out += table_rows(cfgs, ev is not None and be is not None)
        out += ["", "Sparsity columns are measured over the eval text where eval.json has the configuration, else over the "
                "bench prompt; MB/token and the byte bound (dense bytes ÷ configuration bytes per token) come from the bench run "
                "where it has the configuration; % of bound is the speedup ÷ that bound. act sparsity: MLP neurons skipped; in "
                "sparsity: projection input columns skipped (parameter-weighted); top-1: agreement with the dense model's next token.", ""]
    else:
        out += ["No configurations.", ""]
    if be is not None or ev is not None:
        out += pareto_check(cfgs, ev, be)
    out += ["## SATS vs CATS vs TEAL at matched sparsity", ""]
    if ev is None:
        out += ["Not done: it needs eval.json (perplexity).", ""]
    else:
        out += ["Perplexity of each method's threshold-only configurations interpolated linearly in x, only inside the range the "
                "method measured (— outside it); gaps are each other method's perplexity over the lowest's.", "",
                "### At matched weight bytes skipped", ""]
        out += matched(cfgs, skip_levels, lambda c: num(c.ev, "weight_skip"), "weight bytes skipped",
                       "This is the comparison that matters for speed: equal skipped bytes mean about equal bytes read per token.")
        out += ["### At matched own sparsity", ""]
        out += matched(cfgs, own_levels, lambda c: c.own(c.ev), "own sparsity",
                       "Own sparsity is act_sparsity (MLP neurons skipped) for cats and sats but in_sparsity (input columns "
                       "skipped, over all seven projections) for teal: the measures differ, so equal own sparsity is not equal "
                       "work saved.")
    out.append("Rendered by `scripts/render_sparsity.py %s`." % rel_to_root(d))
    out.append("")
    with open(md_path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    os.replace(md_path + ".tmp", md_path)
    return [os.path.join(svg_dir, os.path.basename(r)) for _, r in charts]


def rel_to_root(p):
    """p relative to the repository's root where it is inside it, else as given."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = os.path.relpath(os.path.abspath(p), root)
    return p if r.startswith("..") else r


def levels_arg(s):
    try:
        v = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of fractions" % s)
    if not v or any(not (0 <= x <= 1) for x in v):
        raise argparse.ArgumentTypeError("levels are fractions in [0, 1]")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="folder with eval.json and/or bench.json (and optionally meta.json)")
    ap.add_argument("--svg-dir", default=None, help="folder of the charts (default DIR)")
    ap.add_argument("--md", default=None, help="page to write (default DIR/sparsity.md)")
    ap.add_argument("--skip-levels", type=levels_arg, default=SKIP_LEVELS,
                    help="weight-skip fractions to compare the methods at (default 0.10,0.15,0.20,0.25,0.30)")
    ap.add_argument("--own-levels", type=levels_arg, default=OWN_LEVELS,
                    help="own-sparsity fractions to compare the methods at (default 0.3,0.4,0.5,0.6,0.7)")
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        print("render_sparsity: %s is not a folder" % a.dir, file=sys.stderr)
        return 2
    svg = a.svg_dir or a.dir
    md = a.md or os.path.join(a.dir, "sparsity.md")
    try:
        written = render(a.dir, svg, md, a.skip_levels, a.own_levels)
    except BadInput as e:
        print("render_sparsity: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("render_sparsity: cannot write the page or its charts: %s" % e, file=sys.stderr)
        return 2
    print("render_sparsity: wrote %s%s" % (md, "".join(" " + w for w in written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
