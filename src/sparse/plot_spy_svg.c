/* Spy pictures as SVG (same layout as the PNG: titles, framed heat maps with index ticks, a
 * legend), the heat map coarsened to at most svg_cells cells a side, colors quantized to 32
 * steps of the ramp, runs of equal color in a grid row merged, and all runs of one color in one
 * path in integer cell units (~15 bytes a run), so even a noisy 128x128 map stays near 250 KB
 * a panel and typical ones far below. Also the by-extension writer. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sparse/plot_internal.h"

#define INK 0x202020u
#define GRAY 0x606060u
#define FRAME 0x404040u
#define QLEVELS 32
#define FONT 13.0          /* label font size, px */
#define CHAR_W (0.62 * FONT) /* monospace advance estimate used to fit text */

/* Cuts text to at most maxw px (estimated) with "..". */
static void svg_fit_text(ts_svg *s, double x, double y, double size, uint32_t c, const char *text, double maxw) {
  if (!text || !*text) return;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", text);
  size_t maxc = (size_t)(maxw / (0.62 * size));
  if (maxc < 3) maxc = 3;
  if (strlen(buf) > maxc) strcpy(buf + maxc - 2, "..");
  ts_svg_text(s, x, y, size, 's', c, buf);
}

/* 0 for an empty cell, else the ramp step 1..QLEVELS of sqrt(density) (never 0: a nonzero
 * cell never turns white). */
static uint8_t quant_level(float d) {
  if (!(d > 0)) return 0;
  long q = lround(sqrt((double)d) * QLEVELS);
  return (uint8_t)(q < 1 ? 1 : q > QLEVELS ? QLEVELS : q);
}

/* The heat map in cell units: one <path> per quantized color, one "M x y h len v1 h-len z" per
 * run of equal cells in a grid row, inside a group scaled to the plot area. Cells are drawn
 * equally sized; the real ones differ by at most one entry a side (see ts_spy_density). */
static ts_status svg_heat(ts_svg *s, const ts_spy_panel *p, int32_t cells, double x0, double y0, double pw,
                          double ph, int32_t *gh_out, int32_t *gw_out) {
  const ts_csr *m = p->m;
  int32_t gh = (int32_t)(m->rows < cells ? m->rows : cells), gw = (int32_t)(m->cols < cells ? m->cols : cells);
  *gh_out = gh;
  *gw_out = gw;
  float *d = malloc((size_t)gh * (size_t)gw * sizeof *d);
  uint8_t *q = malloc((size_t)gw);
  ts__strbuf runs[QLEVELS + 1];
  memset(runs, 0, sizeof runs);
  ts_status st = TS_OK;
  if (!d || !q) st = ts_error(TS_ERR_OOM, "spy: cannot allocate a %dx%d density grid", (int)gh, (int)gw);
  if (st == TS_OK) st = ts_spy_density(m, p->row_perm, p->col_perm, gh, gw, d);
  for (int32_t y = 0; st == TS_OK && y < gh; y++) {
    for (int32_t x = 0; x < gw; x++) q[x] = quant_level(d[(size_t)y * (size_t)gw + (size_t)x]);
    for (int32_t x = 0; x < gw;) {
      int32_t e = x + 1;
      while (e < gw && q[e] == q[x]) e++;
      if (q[x]) ts__strbuf_printf(&runs[q[x]], "M%d %dh%dv1h-%dz", (int)x, (int)y, (int)(e - x), (int)(e - x));
      x = e;
    }
  }
  if (st == TS_OK) {
    ts_svg_group_begin(s, x0, y0, pw / gw, ph / gh);
    for (int l = 1; l <= QLEVELS; l++) {
      if (runs[l].failed) st = ts_error(TS_ERR_OOM, "spy: out of memory building the SVG heat map");
      if (runs[l].len) ts_svg_path(s, runs[l].s, ts_plot_colormap((double)l / QLEVELS));
    }
    ts_svg_group_end(s);
  }
  for (int l = 0; l <= QLEVELS; l++) ts__strbuf_free(&runs[l]);
  free(d);
  free(q);
  return st;
}

static void svg_axes(ts_svg *s, const ts_csr *m, double x0, double y0, double pw, double ph) {
  for (int q = 0; q <= 4; q++) {
    double fy = y0 + ph * q / 4, fx = x0 + pw * q / 4;
    ts_svg_line(s, x0 - 5, fy, x0, fy, FRAME, 1);
    ts_svg_line(s, fx, y0 + ph, fx, y0 + ph + 5, FRAME, 1);
  }
  char hi[24], mid[24];
  snprintf(hi, sizeof hi, "%lld", (long long)m->rows);
  snprintf(mid, sizeof mid, "%lld", (long long)(m->rows / 2));
  ts_svg_text(s, x0 - 8, y0 + FONT * 0.75, FONT, 'e', GRAY, "0");
  ts_svg_text(s, x0 - 8, y0 + ph, FONT, 'e', GRAY, hi);
  if (ph >= 4 * FONT) ts_svg_text(s, x0 - 8, y0 + ph / 2 + FONT * 0.35, FONT, 'e', GRAY, mid);
  snprintf(hi, sizeof hi, "%lld", (long long)m->cols);
  snprintf(mid, sizeof mid, "%lld", (long long)(m->cols / 2));
  double yb = y0 + ph + 7 + FONT;
  ts_svg_text(s, x0, yb, FONT, 's', GRAY, "0");
  double whi = strlen(hi) * CHAR_W;
  if (pw >= whi + 2 * CHAR_W) ts_svg_text(s, x0 + pw, yb, FONT, 'e', GRAY, hi);
  if (pw >= 4 * whi + 4 * CHAR_W) ts_svg_text(s, x0 + pw / 2, yb, FONT, 'm', GRAY, mid);
}

static void svg_legend(ts_svg *s, const ts_spy_panel *p0, int32_t gh, int32_t gw, double x, double y, double maxw) {
  double bh = 12, gap = 8;
  ts_svg_frame(s, x + 0.5, y + 0.5, bh - 1, bh - 1, FRAME, 1);
  x += bh + gap / 2;
  ts_svg_text(s, x, y + bh - 2, FONT, 's', INK, "empty");
  x += 5 * CHAR_W + 2 * gap;
  double bw = 256;
  for (int i = 0; i < QLEVELS; i++)
    ts_svg_rect(s, x + bw * i / QLEVELS, y, bw / QLEVELS, bh, ts_plot_colormap((i + 1.0) / QLEVELS));
  ts_svg_frame(s, x - 0.5, y - 0.5, bw + 1, bh + 1, FRAME, 1);
  ts_svg_text(s, x + bw + gap, y + bh - 2, FONT, 's', INK, "full");
  for (int k = 0; k < TS__SPY_TICKS; k++) {
    double tx = x + sqrt(ts__spy_tick_d[k]) * bw;
    ts_svg_line(s, tx, y + bh, tx, y + bh + 4, FRAME, 1);
    ts_svg_text(s, tx, y + bh + 6 + FONT * 0.8, FONT, 'm', GRAY, ts__spy_tick_label[k]);
  }
  char note[256];
  ts__spy_note(p0->m->rows, p0->m->cols, gh, gw, note, sizeof note);
  svg_fit_text(s, 16, y + bh + 6 + FONT * 2.2, FONT, GRAY, note, maxw - 16);
}

ts_status ts_spy_render_svg(const ts_spy_panel *panels, int npanels, const ts_spy_options *opts, char **svg,
                            size_t *len) {
  if (!svg || !len) return ts_error(TS_ERR_INVALID_ARG, "ts_spy_render_svg: NULL output");
  *svg = NULL;
  *len = 0;
  ts__spy_layout lay;
  TS_TRY(ts__spy_check(panels, npanels, opts, &lay));
  const char *heading = opts ? opts->heading : NULL;
  bool titles = false, subs = false;
  double maxph = 0, pad = 16, line = 18, labw = 0;
  for (int i = 0; i < npanels; i++) {
    titles |= panels[i].title && *panels[i].title;
    subs |= panels[i].subtitle && *panels[i].subtitle;
    if (lay.ph[i] > maxph) maxph = lay.ph[i];
    char num[24];
    double w = snprintf(num, sizeof num, "%lld", (long long)panels[i].m->rows) * CHAR_W;
    if (w > labw) labw = w;
  }
  double left = labw + 12, width = pad, x0s[TS_SPY_MAX_PANELS], blockw[TS_SPY_MAX_PANELS];
  for (int i = 0; i < npanels; i++) {
    /* a narrow plot (tall pattern) still gets room for its titles, up to 64 characters */
    size_t tl = panels[i].title ? strlen(panels[i].title) : 0, sl = panels[i].subtitle ? strlen(panels[i].subtitle) : 0;
    double tw = fmax(0.62 * 14 * (double)(tl < 64 ? tl : 64), 0.62 * 12.5 * (double)(sl < 64 ? sl : 64));
    blockw[i] = fmax(left + lay.pw[i], tw);
    x0s[i] = width + left;
    width += blockw[i] + pad;
  }
  if (width < 2 * pad + 420) width = 2 * pad + 420; /* the legend's width */
  double y0 = pad + (heading && *heading ? line + 6 : 0) + (titles ? line : 0) + (subs ? line : 0) + 6;
  double ylegend = y0 + maxph + 12 + FONT + pad;
  double height = ylegend + 12 + 6 + FONT * 2.6 + pad;
  ts_svg *s;
  TS_TRY(ts_svg_create(&s, width, height));
  ts_svg_rect(s, 0, 0, width, height, 0xFFFFFF);
  if (heading && *heading) svg_fit_text(s, pad, pad + 14, 15, INK, heading, width - 2 * pad);
  ts_status st = TS_OK;
  int32_t gh0 = 1, gw0 = 1;
  for (int i = 0; i < npanels && st == TS_OK; i++) {
    const ts_spy_panel *p = &panels[i];
    double x0 = x0s[i], ty = y0 - 6 - (subs ? line : 0) - (titles ? line : 0) + 13;
    if (titles) svg_fit_text(s, x0 - left, ty, 14, INK, p->title, blockw[i]);
    if (subs) svg_fit_text(s, x0 - left, ty + (titles ? line : 0), 12.5, GRAY, p->subtitle, blockw[i]);
    int32_t gh, gw;
    st = svg_heat(s, p, lay.svg_cells, x0, y0, lay.pw[i], lay.ph[i], &gh, &gw);
    if (i == 0) {
      gh0 = gh;
      gw0 = gw;
    }
    ts_svg_frame(s, x0 - 0.5, y0 - 0.5, lay.pw[i] + 1, lay.ph[i] + 1, FRAME, 1);
    svg_axes(s, p->m, x0, y0, lay.pw[i], lay.ph[i]);
  }
  if (st == TS_OK) {
    svg_legend(s, &panels[0], gh0, gw0, pad, ylegend, width - pad);
    st = ts_svg_finish(s, svg, len);
  }
  ts_svg_destroy(s);
  return st;
}

ts_status ts_plot_format_from_path(const char *path, ts_plot_format *fmt) {
  if (!path || !fmt) return ts_error(TS_ERR_INVALID_ARG, "ts_plot_format_from_path: NULL argument");
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  if (!dot || (slash && dot < slash) || dot[1] == '\0')
    return ts_error(TS_ERR_UNSUPPORTED, "%s: no image extension (use .png or .svg)", path);
  if (strcasecmp(dot, ".png") == 0) *fmt = TS_PLOT_PNG;
  else if (strcasecmp(dot, ".svg") == 0) *fmt = TS_PLOT_SVG;
  else return ts_error(TS_ERR_UNSUPPORTED, "%s: unknown image extension '%s' (use .png or .svg)", path, dot);
  return TS_OK;
}

ts_status ts_spy_write(const char *path, const ts_spy_panel *panels, int npanels, const ts_spy_options *opts) {
  ts_plot_format fmt;
  TS_TRY(ts_plot_format_from_path(path, &fmt));
  if (fmt == TS_PLOT_PNG) {
    ts_image img;
    TS_TRY(ts_spy_render(panels, npanels, opts, &img));
    ts_status st = ts_png_write(path, &img);
    ts_image_free(&img);
    return st;
  }
  char *text;
  size_t len;
  TS_TRY(ts_spy_render_svg(panels, npanels, opts, &text, &len));
  ts_status st = ts_write_file_atomic(path, text, len);
  free(text);
  if (st != TS_OK) ts_error_prefix("writing SVG %s: ", path);
  return st;
}
