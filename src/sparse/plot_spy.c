/* Spy pictures as PNG: panels side by side, each a framed density heat map with its title
 * lines above and index ticks (0, middle, end) on the left and bottom, then one legend row
 * (white = empty, the ramp with density ticks) and a note saying how many entries a cell holds.
 *
 * Layout, top to bottom (fs = font scale, 2 for plots of 320+ px, else 1):
 *   pad | heading | title | subtitle | plot (ph) | ticks + labels | pad | legend bar + ticks | note | pad */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/plot_internal.h"

#define INK 0x202020u
#define GRAY 0x606060u
#define FRAME 0x404040u

const double ts__spy_tick_d[TS__SPY_TICKS] = {0.01, 0.1, 0.5, 1.0};
const char *const ts__spy_tick_label[TS__SPY_TICKS] = {"0.01", "0.1", "0.5", "1"};

ts_status ts__spy_check(const ts_spy_panel *panels, int npanels, const ts_spy_options *opts, ts__spy_layout *lay) {
  if (!panels || npanels < 1 || npanels > TS_SPY_MAX_PANELS)
    return ts_error(TS_ERR_INVALID_ARG, "spy: %d panels given, expected 1..%d", panels ? npanels : 0,
                    TS_SPY_MAX_PANELS);
  lay->size = opts && opts->size ? opts->size : 512;
  lay->svg_cells = opts && opts->svg_cells ? opts->svg_cells : 128;
  if (lay->size < 16 || lay->size > 4096)
    return ts_error(TS_ERR_INVALID_ARG, "spy: size %d outside 16..4096 pixels", (int)lay->size);
  if (lay->svg_cells < 1 || lay->svg_cells > 4096)
    return ts_error(TS_ERR_INVALID_ARG, "spy: svg_cells %d outside 1..4096", (int)lay->svg_cells);
  for (int i = 0; i < npanels; i++) {
    const ts_csr *m = panels[i].m;
    if (!m) return ts_error(TS_ERR_INVALID_ARG, "spy: panel %d has no pattern", i);
    if (m->rows < 1 || m->cols < 1)
      return ts_error(TS_ERR_INVALID_ARG, "spy: panel %d pattern is %lldx%lld, nothing to draw", i,
                      (long long)m->rows, (long long)m->cols);
    int64_t longest = m->rows > m->cols ? m->rows : m->cols;
    /* the longest side gets `size` pixels, the other keeps the aspect ratio (at least 1) */
    int64_t pw = (lay->size * m->cols + longest / 2) / longest, ph = (lay->size * m->rows + longest / 2) / longest;
    lay->pw[i] = (int32_t)(pw < 1 ? 1 : pw);
    lay->ph[i] = (int32_t)(ph < 1 ? 1 : ph);
  }
  return TS_OK;
}

void ts__spy_note(int64_t rows, int64_t cols, int32_t gh, int32_t gw, char *buf, size_t cap) {
  if (rows == gh && cols == gw) {
    snprintf(buf, cap, "one cell per entry: dark = nonzero, white = zero");
    return;
  }
  char a[32], b[32];
  if (rows % gh == 0) snprintf(a, sizeof a, "%lld", (long long)(rows / gh));
  else snprintf(a, sizeof a, "~%.1f", (double)rows / gh);
  if (cols % gw == 0) snprintf(b, sizeof b, "%lld", (long long)(cols / gw));
  else snprintf(b, sizeof b, "~%.1f", (double)cols / gw);
  snprintf(buf, cap, "color = nonzero fraction of each cell of %sx%s entries (sqrt scale)", a, b);
}

/* Draws text no wider than maxw: at `scale`, else at scale 1, else cut with "..". */
static void fit_text(ts_image *img, int32_t x, int32_t y, const char *text, int scale, int32_t maxw, uint32_t c) {
  if (!text || !*text) return;
  if (ts_text_width(text, scale) > maxw) scale = 1;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", text);
  size_t n = strlen(buf);
  while (n > 2 && ts_text_width(buf, scale) > maxw) {
    buf[n - 3] = '.';
    buf[n - 2] = '.';
    buf[--n] = '\0';
  }
  ts_image_text(img, x, y, buf, scale, c);
}

static int32_t imax(int32_t a, int32_t b) { return a > b ? a : b; }

/* Heat map of one panel into the plot area at (x0, y0). */
static ts_status draw_heat(ts_image *img, const ts_spy_panel *p, int32_t x0, int32_t y0, int32_t pw, int32_t ph) {
  const ts_csr *m = p->m;
  int32_t gh = (int32_t)(m->rows < ph ? m->rows : ph), gw = (int32_t)(m->cols < pw ? m->cols : pw);
  float *d = malloc((size_t)gh * (size_t)gw * sizeof *d);
  uint32_t *xcell = malloc((size_t)pw * sizeof *xcell);
  if (!d || !xcell) {
    free(d);
    free(xcell);
    return ts_error(TS_ERR_OOM, "spy: cannot allocate a %dx%d density grid", (int)gh, (int)gw);
  }
  ts_status st = ts_spy_density(m, p->row_perm, p->col_perm, gh, gw, d);
  if (st == TS_OK) {
    for (int32_t px = 0; px < pw; px++) xcell[px] = (uint32_t)((int64_t)px * gw / pw);
    for (int32_t py = 0; py < ph; py++) {
      const float *drow = d + (size_t)((int64_t)py * gh / ph) * (size_t)gw;
      uint8_t *o = img->rgb + ((size_t)(y0 + py) * (size_t)img->w + (size_t)x0) * 3;
      for (int32_t px = 0; px < pw; px++, o += 3) {
        uint32_t c = ts_spy_color(drow[xcell[px]]);
        o[0] = (uint8_t)(c >> 16);
        o[1] = (uint8_t)(c >> 8);
        o[2] = (uint8_t)c;
      }
    }
  }
  free(d);
  free(xcell);
  return st;
}

/* Tick marks at the quarters, labels at 0, middle and end (the middle one only if it fits). */
static void draw_axes(ts_image *img, const ts_csr *m, int32_t x0, int32_t y0, int32_t pw, int32_t ph, int fs) {
  int32_t tl = 3 * fs, ch = 7 * fs;
  for (int q = 0; q <= 4; q++) {
    ts_image_fill_rect(img, x0 - 1 - tl, y0 + (int32_t)((int64_t)ph * q / 4) - (q == 4), tl, 1, FRAME);
    ts_image_fill_rect(img, x0 + (int32_t)((int64_t)pw * q / 4) - (q == 4), y0 + ph + 1, 1, tl, FRAME);
  }
  char lo[24] = "0", mid[24], hi[24];
  /* y axis: right-aligned left of the ticks */
  int32_t xr = x0 - 2 - tl - 2 * fs;
  snprintf(hi, sizeof hi, "%lld", (long long)m->rows);
  snprintf(mid, sizeof mid, "%lld", (long long)(m->rows / 2));
  ts_image_text(img, xr - ts_text_width(lo, fs), y0, lo, fs, GRAY);
  ts_image_text(img, xr - ts_text_width(hi, fs), y0 + ph - ch, hi, fs, GRAY);
  if (ph >= 4 * ch) ts_image_text(img, xr - ts_text_width(mid, fs), y0 + ph / 2 - ch / 2, mid, fs, GRAY);
  /* x axis: under the ticks */
  int32_t yb = y0 + ph + 2 + tl + fs;
  snprintf(hi, sizeof hi, "%lld", (long long)m->cols);
  snprintf(mid, sizeof mid, "%lld", (long long)(m->cols / 2));
  int32_t whi = ts_text_width(hi, fs), wmid = ts_text_width(mid, fs);
  ts_image_text(img, x0, yb, lo, fs, GRAY);
  if (pw >= whi + ts_text_width(lo, fs) + 2 * fs) ts_image_text(img, x0 + pw - whi, yb, hi, fs, GRAY);
  if (pw >= 2 * (whi + wmid) + 8 * fs) ts_image_text(img, x0 + pw / 2 - wmid / 2, yb, mid, fs, GRAY);
}

/* Legend at (x, y): [white swatch] empty  [ramp with density ticks]  full, then the note line. */
static void draw_legend(ts_image *img, const ts_spy_panel *p0, int32_t gh, int32_t gw, int32_t x, int32_t y, int fs,
                        int32_t maxw) {
  int32_t bh = 10 * fs, sw = bh, gap = 6 * fs;
  ts_image_frame(img, x, y, sw, bh, FRAME);
  x += sw + gap / 2;
  x += ts_image_text(img, x, y + (bh - 7 * fs) / 2, "empty", fs, INK) + gap * 2;
  int32_t bw = 128 * fs;
  if (x + bw + gap + ts_text_width("full", fs) > maxw) bw = imax(32, maxw - x - gap - ts_text_width("full", fs));
  for (int32_t i = 0; i < bw; i++) ts_image_fill_rect(img, x + i, y, 1, bh, ts_plot_colormap((i + 0.5) / bw));
  ts_image_frame(img, x - 1, y - 1, bw + 2, bh + 2, FRAME);
  ts_image_text(img, x + bw + gap, y + (bh - 7 * fs) / 2, "full", fs, INK);
  for (int k = 0; k < TS__SPY_TICKS; k++) {
    int32_t tx = x + (int32_t)lround(sqrt(ts__spy_tick_d[k]) * bw) - (k == TS__SPY_TICKS - 1);
    ts_image_fill_rect(img, tx, y + bh + 1, 1, 3 * fs, FRAME);
    int32_t w = ts_text_width(ts__spy_tick_label[k], fs);
    ts_image_text(img, tx - w / 2, y + bh + 2 + 3 * fs, ts__spy_tick_label[k], fs, GRAY);
  }
  char note[256];
  ts__spy_note(p0->m->rows, p0->m->cols, gh, gw, note, sizeof note);
  fit_text(img, 0 + 8 * fs, y + bh + 4 + 3 * fs + 10 * fs, note, fs, maxw - 8 * fs, GRAY);
}

ts_status ts_spy_render(const ts_spy_panel *panels, int npanels, const ts_spy_options *opts, ts_image *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_spy_render: out is NULL");
  out->w = out->h = 0;
  out->rgb = NULL;
  ts__spy_layout lay;
  TS_TRY(ts__spy_check(panels, npanels, opts, &lay));
  int fs = lay.size >= 320 ? 2 : 1;
  int32_t pad = 8 * fs, line = 10 * fs, tl = 3 * fs;
  const char *heading = opts ? opts->heading : NULL;
  bool titles = false, subs = false;
  int32_t maxph = 0, labw = 0;
  for (int i = 0; i < npanels; i++) {
    titles |= panels[i].title && *panels[i].title;
    subs |= panels[i].subtitle && *panels[i].subtitle;
    maxph = imax(maxph, lay.ph[i]);
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)panels[i].m->rows);
    labw = imax(labw, ts_text_width(num, fs));
  }
  int32_t left = labw + tl + 4 * fs; /* room for the y labels and ticks left of each plot */
  int32_t width = pad, x0s[TS_SPY_MAX_PANELS], blockw[TS_SPY_MAX_PANELS];
  for (int i = 0; i < npanels; i++) {
    /* a narrow plot (tall pattern) still gets room for its titles, up to 64 characters */
    int32_t tw = imax(ts_text_width(panels[i].title, fs), ts_text_width(panels[i].subtitle, fs));
    blockw[i] = imax(left + lay.pw[i], tw < 64 * 6 * fs ? tw : 64 * 6 * fs);
    x0s[i] = width + left;
    width += blockw[i] + pad;
  }
  width = imax(width, imax(pad * 2 + (128 + 40) * fs + ts_text_width("empty  full", fs), 160 * fs));
  int32_t y0 = pad + (heading && *heading ? line + 4 * fs : 0) + (titles ? line : 0) + (subs ? line : 0) + 2 * fs;
  int32_t ylegend = y0 + maxph + 2 + tl + fs + line + pad;
  int32_t height = ylegend + 10 * fs + 4 + 3 * fs + 10 * fs + line + pad;
  TS_TRY(ts_image_alloc(out, width, height, 0xFFFFFF));

  if (heading && *heading) fit_text(out, pad, pad, heading, fs, width - 2 * pad, INK);
  ts_status st = TS_OK;
  for (int i = 0; i < npanels && st == TS_OK; i++) {
    const ts_spy_panel *p = &panels[i];
    int32_t x0 = x0s[i], ty = y0 - 2 * fs - (titles ? line : 0) - (subs ? line : 0);
    if (titles) fit_text(out, x0 - left, ty, p->title, fs, blockw[i], INK);
    if (subs) fit_text(out, x0 - left, ty + (titles ? line : 0), p->subtitle, fs, blockw[i], GRAY);
    st = draw_heat(out, p, x0, y0, lay.pw[i], lay.ph[i]);
    ts_image_frame(out, x0 - 1, y0 - 1, lay.pw[i] + 2, lay.ph[i] + 2, FRAME);
    draw_axes(out, p->m, x0, y0, lay.pw[i], lay.ph[i], fs);
  }
  if (st != TS_OK) {
    ts_image_free(out);
    return st;
  }
  int32_t gh = (int32_t)(panels[0].m->rows < lay.ph[0] ? panels[0].m->rows : lay.ph[0]);
  int32_t gw = (int32_t)(panels[0].m->cols < lay.pw[0] ? panels[0].m->cols : lay.pw[0]);
  draw_legend(out, &panels[0], gh, gw, pad, ylegend, fs, width - pad);
  return TS_OK;
}
