#!/usr/bin/env python3
"""Renders the activation-predictor sweep (scripts/relu_pred_sweep.sh) into OUT/relu-pred.md and
OUT/speed-quality.svg: the model's natural sparsity and perplexity beside its SiLU twin, each
predictor's calibration (false-skip rate and skipping efficiency per layer group), Grasp against
the sign-bit rule at equal false-skip rates, quality on held-out text with the measured confusion,
and decode speed against dense and the oracle with the predictor's own cost.

  scripts/render_relu_pred.py OUT_DIR
"""
import json, math, os, sys


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def label(c):
    if c.get("predictor") == "oracle":
        return "oracle"
    return "%s @ %.3g" % (c["predictor"], c["false_skip_budget"])


def groups(n):
    return [(l, min(l + 1, n - 1)) for l in range(0, n, 2)]


def svg_speed_quality(path, ev, be, dense_ppl):
    if not be:
        return False
    pts = []
    sp = {label(c): c for c in be["configs"]}
    for c in ev["configs"]:
        b = sp.get(label(c))
        if b:
            pts.append((c["predictor"], b["speedup"], 100 * (c["ppl"] / dense_ppl - 1), label(c)))
    if not pts:
        return False
    W, H, x0, y0, pw, ph = 640, 420, 70, 40, 420, 320
    xs = [p[1] for p in pts] + [1.0]
    ys = [p[2] for p in pts] + [0.0]
    xl, xh = min(xs) * 0.95, max(xs) * 1.05
    yl, yh = min(ys + [0]) - 0.5, max(ys) * 1.1 + 0.5
    X = lambda v: x0 + pw * (v - xl) / (xh - xl)
    Y = lambda v: y0 + ph * (1 - (v - yl) / (yh - yl))
    col = {"signbit": "#1f77b4", "grasp": "#d62728", "learned": "#2ca02c", "oracle": "#000000"}
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="20" font-size="13">decode speedup over dense (x) against perplexity increase on Hamlet (y)</text>',
         '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (x0, y0, pw, ph)]
    for t in range(6):
        v = xl + (xh - xl) * t / 5
        o.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%.2f</text>' % (X(v), y0 + ph + 14, v))
        v = yl + (yh - yl) * t / 5
        o.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%.1f%%</text>' % (x0 - 4, Y(v) + 3, v))
    o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="4"/>' % (X(1), y0, X(1), y0 + ph))
    o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999" stroke-dasharray="4"/>' % (x0, Y(0), x0 + pw, Y(0)))
    for k, x, y, lab in pts:
        o.append('<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>' % (X(x), Y(y), col.get(k, "#555")))
        o.append('<text x="%.1f" y="%.1f" font-size="9">%s</text>' % (X(x) + 5, Y(y) - 4, lab))
    for i, k in enumerate(["signbit", "grasp", "learned", "oracle"]):
        o.append('<circle cx="%d" cy="%d" r="4" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>' %
                 (x0 + pw + 20, y0 + 10 + 18 * i, col[k], x0 + pw + 30, y0 + 14 + 18 * i, k))
    o.append("</svg>")
    open(path, "w").write("\n".join(o))
    return True


def main():
    d = sys.argv[1]
    meta, cal, ev, be = load(d, "meta.json"), load(d, "calibrate.json"), load(d, "eval.json"), load(d, "bench.json")
    pr, ps = load(d, "ppl-relu.json"), load(d, "ppl-silu.json")
    L = []
    w = L.append
    w("# ReLU-model activation predictors: %s" % (meta or {}).get("model", "?"))
    w("")
    if meta:
        w("%s, commit %s, %s. Command: `%s`." % (meta["date"], meta["commit"], meta["machine"], meta["command"]))
        w("")
    if pr:
        w("## The model")
        w("")
        line = "Perplexity on Hamlet (held out; llama.cpp's second-half rule): ReLU %.2f" % pr["ppl"]
        if ps:
            line += ", its SiLU twin (same recipe, no activation penalty) %.2f (ReLU %+.1f%%)" % (ps["ppl"], 100 * (pr["ppl"] / ps["ppl"] - 1))
        w(line + ".")
        w("")
    orc = next((c for c in ev["configs"] if c.get("predictor") == "oracle"), None) if ev else None
    if orc:
        la = orc["layer_act_sparsity"]
        w("Natural activation sparsity (zeros of relu(gate)) per layer on Hamlet, decode: " +
          ", ".join("%d: %.1f%%" % (i, 100 * v) for i, v in enumerate(la)) + "; mean %.1f%%." % (100 * orc["act_sparsity"]))
        w("")
    if cal:
        w("## Calibration (%d tokens of King Lear + The Tempest; collection %.0f s)" % (cal["tokens"], cal["collect_seconds"]))
        w("")
        n = len(cal["predictors"][0]["layer_false_skip"])
        gs = groups(n)
        w("| predictor | budget | false-skip (mean) | efficiency (mean) | " + " | ".join("eff. layers %d-%d" % g for g in gs) + " | bytes/token | s |")
        w("|---|---:|---:|---:|" + "---:|" * len(gs) + "---:|---:|")
        for p in cal["predictors"]:
            fs, ef = p["layer_false_skip"], p["layer_efficiency"]
            w("| %s | %.3g | %.4f | %.3f | %s | %.0f | %.1f |" % (
                p["predictor"], p["false_skip_budget"], sum(fs) / n, sum(ef) / n,
                " | ".join("%.3f" % ((ef[a] + ef[b]) / 2) for a, b in gs), p["bytes_per_token"], p["seconds"]))
        w("")
        cv = {c["predictor"]: c for c in cal["curves"]}
        if "grasp" in cv and "signbit" in cv:
            fsg = cv["grasp"]["false_skip"]
            w("Grasp over sign-bit at equal false-skip rate (calibration tokens, efficiency ratio per layer group; target >= 1.10):")
            w("")
            w("| false-skip | " + " | ".join("layers %d-%d" % g for g in gs) + " |")
            w("|---:|" + "---:|" * len(gs))
            for k, f in enumerate(fsg):
                if f < 0.002 or f > 0.1:
                    continue
                row = []
                for a, b in gs:
                    eg = (cv["grasp"]["layer_efficiency"][a][k] + cv["grasp"]["layer_efficiency"][b][k]) / 2
                    es = (cv["signbit"]["layer_efficiency"][a][k] + cv["signbit"]["layer_efficiency"][b][k]) / 2
                    row.append("%.2f (%.3f / %.3f)" % (eg / es if es > 0 else float("inf"), eg, es))
                w("| %.3g | %s |" % (f, " | ".join(row)))
            w("")
        w("![efficiency against false-skip rate](curves.svg)")
        w("")
    if ev:
        dp = ev["dense"]["ppl"]
        w("## Quality on Hamlet (%d windows of %d, %d predictions scored; each predictor in lockstep with the dense model)" %
          (ev["windows"], ev["ctx"], ev["scored"]))
        w("")
        w("Dense perplexity %.3f." % dp)
        w("")
        w("| predictor | ppl | vs dense | KL | top-1 | zeros | predicted active | false-skip | missed-skip | efficiency | predictor MB/token |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in ev["configs"]:
            if c.get("predictor") == "oracle":
                w("| oracle | %.3f | %+.2f%% | %.5f | %.4f | %.4f | %.4f | 0 | 0 | 1 | 0 |" % (
                    c["ppl"], 100 * (c["ppl"] / dp - 1), c["kl"], c["top1"], c["act_sparsity"], 1 - c["act_sparsity"]))
                continue
            w("| %s | %.3f | %+.2f%% | %.5f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.3f |" % (
                label(c), c["ppl"], 100 * (c["ppl"] / dp - 1), c["kl"], c["top1"], c.get("actual_zero", 0), c.get("pred_active", 0),
                c.get("false_skip", 0), c.get("missed_skip", 0), c.get("efficiency", 0), c.get("pred_bytes_per_token", 0) / 1e6))
        w("")
    if be:
        w("## Decode speed (%d tokens after a %d-token prompt, %d interleaved rounds, %d threads; other processes: %.2f CPUs)" %
          (be["gen"], be["prompt_len"], be["rounds"], be["threads"], be.get("other_cpus", 0)))
        w("")
        w("Dense %.1f tok/s; its MLP %.1f us per token (thread 0)." % (be["dense"]["decode_tps"], 1e6 * be["dense"].get("mlp_seconds_per_token", 0)))
        w("")
        orc_b = next((c for c in be["configs"] if c.get("predictor") == "oracle"), None)
        w("| predictor | tok/s | speedup [95% CI] | of oracle | byte bound | of bound | predictor us/token | of dense MLP |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        for c in be["configs"]:
            oo = c["speedup"] / orc_b["speedup"] if orc_b else float("nan")
            w("| %s | %.1f | %.3f [%.3f, %.3f] | %.2f | %.3f | %.1f%% | %.1f | %.1f%% |" % (
                label(c), c["decode_tps"], c["speedup"], c["speedup_lo"], c["speedup_hi"], oo, c["byte_bound"], 100 * c["of_bound"],
                1e6 * c.get("pred_seconds_per_token", 0), 100 * c.get("pred_of_dense_mlp", 0)))
        w("")
        if ev and svg_speed_quality(os.path.join(d, "speed-quality.svg"), ev, be, ev["dense"]["ppl"]):
            w("![speed against quality](speed-quality.svg)")
            w("")
    open(os.path.join(d, "relu-pred.md"), "w").write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
