/* "isp": a camera pipeline from a Bayer mosaic to a sharpened RGB frame.
 *
 *   stage     level  channels  input (halo)
 *   bayer     0      1         -             RGGB mosaic of the colour scene, black level 1/16, noise
 *   wb        0      1         bayer (0)     (raw - black) x gain of the pixel's CFA position, >= 0
 *   demosaic  0      3         wb (1)        bilinear; mirrored at the border so neighbours keep
 *                                            their CFA colour (every read stays within x +- 1)
 *   ccm       0      3         demosaic (0)  3x3 colour matrix, clipped to [0, 1]
 *   tone      0      3         ccm (0)       v (1 + A) / (v + A): a gamma-like rational curve
 *   sharpen   0      3         tone (1)      unsharp mask against the 3x3 binomial blur, [0, 1]
 *
 * CFA positions come from absolute coordinates: (y & 1, x & 1) = (0,0) R, (0,1) Gr, (1,0) Gb, (1,1) B. */
#include "pipe/pipe_apps_internal.h"

#define BLACK (256.0f / 4096) /* the raw black level */
#define TONE_A 0.25f
#define SHARP 0.75f

/* raw = (256 + scene * k[colour] + noise) / 4096: the colours' sensitivities differ, which the white
 * balance gains (k_G / k_colour, scaled so white reaches about 1) undo */
static const int raw_k[3] = {6, 12, 8};
static const float wb_gain[4] = {2.6f, 1.3f, 1.3f, 1.95f}; /* R, Gr, Gb, B */
static const float ccm_m[3][3] = {{1.6f, -0.4f, -0.2f}, {-0.3f, 1.5f, -0.2f}, {-0.1f, -0.5f, 1.6f}};

static inline float raw_px(const ts__pipe_scene *s, int x, int y) {
  int rgb[3];
  ts__pipe_scene_rgb(s, x, y, rgb);
  int c = (y & 1) + (x & 1); /* 0 R, 1 G, 2 B */
  int noise = (int)(ts__pipe_hash((uint32_t)x, (uint32_t)y, s->seed ^ 0x15b0u) & 15) - 8;
  return (float)(256 + rgb[c] * raw_k[c] + noise) * (1.0f / 4096);
}

static inline float clamp01(float v) { return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); }

/* ---- kernels --------------------------------------------------------------------------------- */

static void k_bayer(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                    const void *params) {
  const ts_pipe_app *a = params;
  ts__pipe_scene s;
  ts__pipe_scene_init(&s, a->w, a->h, frame, a->seed);
  for (int y = r.y0; y < r.y1; y++) {
    float *o = ts__pipe_out_row(out, 0, y);
    for (int x = r.x0; x < r.x1; x++) o[x] = raw_px(&s, x, y);
  }
}

static void k_wb(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                 const void *params) {
  for (int y = r.y0; y < r.y1; y++) {
    const float *p = ts__pipe_in_row(in[0], 0, y);
    float *o = ts__pipe_out_row(out, 0, y);
    float ge = wb_gain[2 * (y & 1)], go = wb_gain[2 * (y & 1) + 1]; /* even and odd columns */
    for (int x = r.x0; x < r.x1; x++) {
      float v = (p[x] - BLACK) * ((x & 1) ? go : ge);
      o[x] = v > 0.0f ? v : 0.0f;
    }
  }
}

/* Bilinear demosaic of one pixel: c centre, (w, e, n, s) its 4-neighbours, (nw, ne, sw, se) its
 * diagonals; rgb written to o0/o1/o2. */
static inline void demosaic_px(int py, int px, float c, float w, float e, float n, float s, float nw, float ne,
                               float sw, float se, float *o0, float *o1, float *o2) {
  float hor = (w + e) * 0.5f, ver = (n + s) * 0.5f;
  float cross = ((n + s) + (w + e)) * 0.25f, diag = ((nw + ne) + (sw + se)) * 0.25f;
  /* selects only (no branches), so the interior loop vectorizes */
  *o0 = py ? (px ? diag : ver) : (px ? hor : c);
  *o1 = py ? (px ? cross : c) : (px ? c : cross);
  *o2 = py ? (px ? c : hor) : (px ? ver : diag);
}

/* the mirrored neighbour: x - 1 (or x + 1 at the left edge), clamped for a 1-wide plane */
static inline int left_of(int x, int n) { return x >= 1 ? x - 1 : (x + 1 < n ? x + 1 : n - 1); }
static inline int right_of(int x, int n) { return x + 1 <= n - 1 ? x + 1 : (x >= 1 ? x - 1 : 0); }

static void k_demosaic(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                       const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, h = b->h, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  for (int y = r.y0; y < r.y1; y++) {
    const float *pn = ts__pipe_in_row(b, 0, left_of(y, h)), *pc = ts__pipe_in_row(b, 0, y);
    const float *ps = ts__pipe_in_row(b, 0, right_of(y, h));
    float *o0 = ts__pipe_out_row(out, 0, y), *o1 = ts__pipe_out_row(out, 1, y), *o2 = ts__pipe_out_row(out, 2, y);
    int py = y & 1, x = r.x0;
    for (; x < ia; x++) {
      int l = left_of(x, w), rr = right_of(x, w);
      demosaic_px(py, x & 1, pc[x], pc[l], pc[rr], pn[x], ps[x], pn[l], pn[rr], ps[l], ps[rr], &o0[x], &o1[x], &o2[x]);
    }
#define DM(xx, yp, px)                                                                                      \
  demosaic_px(yp, px, pc[xx], pc[(xx) - 1], pc[(xx) + 1], pn[xx], ps[xx], pn[(xx) - 1], pn[(xx) + 1], ps[(xx) - 1], \
              ps[(xx) + 1], &o0[xx], &o1[xx], &o2[xx])
    /* the interior in column pairs (even, odd), each call with a constant CFA position */
    if (x < ib && (x & 1)) DM(x, py, 1), x++;
    if (py)
      for (; x + 1 < ib; x += 2) DM(x, 1, 0), DM(x + 1, 1, 1);
    else
      for (; x + 1 < ib; x += 2) DM(x, 0, 0), DM(x + 1, 0, 1);
    if (x < ib) DM(x, py, 0), x++;
#undef DM
    for (; x < r.x1; x++) {
      int l = left_of(x, w), rr = right_of(x, w);
      demosaic_px(py, x & 1, pc[x], pc[l], pc[rr], pn[x], ps[x], pn[l], pn[rr], ps[l], ps[rr], &o0[x], &o1[x], &o2[x]);
    }
  }
}

static void k_ccm(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                  const void *params) {
  for (int y = r.y0; y < r.y1; y++) {
    const float *pr = ts__pipe_in_row(in[0], 0, y), *pg = ts__pipe_in_row(in[0], 1, y);
    const float *pb = ts__pipe_in_row(in[0], 2, y);
    for (int c = 0; c < 3; c++) {
      float *o = ts__pipe_out_row(out, c, y);
      float m0 = ccm_m[c][0], m1 = ccm_m[c][1], m2 = ccm_m[c][2];
      for (int x = r.x0; x < r.x1; x++) o[x] = clamp01((m0 * pr[x] + m1 * pg[x]) + m2 * pb[x]);
    }
  }
}

static inline float tone(float v) { return (v * (1.0f + TONE_A)) / (v + TONE_A); }

static void k_tone(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                   const void *params) {
  for (int c = 0; c < 3; c++)
    for (int y = r.y0; y < r.y1; y++) {
      const float *p = ts__pipe_in_row(in[0], c, y);
      float *o = ts__pipe_out_row(out, c, y);
      for (int x = r.x0; x < r.x1; x++) o[x] = tone(p[x]);
    }
}

/* c + SHARP (c - blur), blur = [1 2 1]^T [1 2 1] / 16 */
static inline float sharpen_px(const float *q0, const float *q1, const float *q2, int xm, int xc, int xp) {
  float r0 = (q0[xm] + 2.0f * q0[xc]) + q0[xp];
  float r1 = (q1[xm] + 2.0f * q1[xc]) + q1[xp];
  float r2 = (q2[xm] + 2.0f * q2[xc]) + q2[xp];
  float blur = ((r0 + 2.0f * r1) + r2) * 0.0625f;
  float c = q1[xc];
  return clamp01(c + SHARP * (c - blur));
}

static void k_sharpen(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                      const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  for (int c = 0; c < 3; c++)
    for (int y = r.y0; y < r.y1; y++) {
      const float *q0 = ts__pipe_in_row(b, c, y - 1), *q1 = ts__pipe_in_row(b, c, y), *q2 = ts__pipe_in_row(b, c, y + 1);
      float *o = ts__pipe_out_row(out, c, y);
      int x = r.x0;
#define CL(v) ts__pipe_clampi(v, 0, w - 1)
      for (; x < ia; x++) o[x] = sharpen_px(q0, q1, q2, CL(x - 1), x, CL(x + 1));
      for (; x < ib; x++) o[x] = sharpen_px(q0, q1, q2, x - 1, x, x + 1);
      for (; x < r.x1; x++) o[x] = sharpen_px(q0, q1, q2, CL(x - 1), x, CL(x + 1));
#undef CL
    }
}

void ts__pipe_isp_build(ts_pipe_app *app) {
  ts_pipe_desc *d = &app->desc;
  /* arithmetic per pixel: the generator's integer ops (scene, noise hash); wb sub, mul, max;
   * demosaic 6 adds, 4 muls; ccm 3 x (3 mul + 2 add + 2 compares); tone 3 x (add, mul, div);
   * sharpen 3 x (9 + 4 blur, 3 unsharp, 2 clip) */
  int s0 = ts__pipe_add_stage(d, "bayer", 0, 1, k_bayer, app, 90);
  int s1 = ts__pipe_add_stage(d, "wb", 0, 1, k_wb, app, 3);
  ts__pipe_add_input(d, s1, s0, 0);
  int s2 = ts__pipe_add_stage(d, "demosaic", 0, 3, k_demosaic, app, 10);
  ts__pipe_add_input(d, s2, s1, 1);
  int s3 = ts__pipe_add_stage(d, "ccm", 0, 3, k_ccm, app, 21);
  ts__pipe_add_input(d, s3, s2, 0);
  int s4 = ts__pipe_add_stage(d, "tone", 0, 3, k_tone, app, 9);
  ts__pipe_add_input(d, s4, s3, 0);
  int s5 = ts__pipe_add_stage(d, "sharpen", 0, 3, k_sharpen, app, 54);
  ts__pipe_add_input(d, s5, s4, 1);
}

/* ---- the reference ---------------------------------------------------------------------------- */

ts_status ts__pipe_isp_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  int w = app->w, h = app->h;
  int64_t n = (int64_t)w * h;
  float *pl[3];
  int64_t sz[3] = {n, 3 * n, 3 * n};
  ts_status st = ts__pipe_ref_alloc(pl, sz, 3);
  if (st != TS_OK) return st;
  float *raw = pl[0], *rgb = pl[1], *tmp = pl[2];
  ts__pipe_scene s;
  ts__pipe_scene_init(&s, w, h, frame, app->seed);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) raw[(int64_t)y * w + x] = raw_px(&s, x, y);

  for (int y = 0; y < h; y++) /* white balance in place */
    for (int x = 0; x < w; x++) {
      float v = (raw[(int64_t)y * w + x] - BLACK) * wb_gain[2 * (y & 1) + (x & 1)];
      raw[(int64_t)y * w + x] = v > 0.0f ? v : 0.0f;
    }

  for (int y = 0; y < h; y++) {
    int yn = y >= 1 ? y - 1 : ts__pipe_clampi(y + 1, 0, h - 1);
    int ys = y + 1 <= h - 1 ? y + 1 : ts__pipe_clampi(y - 1, 0, h - 1);
    for (int x = 0; x < w; x++) {
      int xw = x >= 1 ? x - 1 : ts__pipe_clampi(x + 1, 0, w - 1);
      int xe = x + 1 <= w - 1 ? x + 1 : ts__pipe_clampi(x - 1, 0, w - 1);
#define RAW(xx, yy) raw[(int64_t)(yy) * w + (xx)]
      float c = RAW(x, y);
      float hor = (RAW(xw, y) + RAW(xe, y)) * 0.5f, ver = (RAW(x, yn) + RAW(x, ys)) * 0.5f;
      float cross = ((RAW(x, yn) + RAW(x, ys)) + (RAW(xw, y) + RAW(xe, y))) * 0.25f;
      float diag = ((RAW(xw, yn) + RAW(xe, yn)) + (RAW(xw, ys) + RAW(xe, ys))) * 0.25f;
#undef RAW
      float v[3];
      switch (2 * (y & 1) + (x & 1)) {
      case 0: v[0] = c, v[1] = cross, v[2] = diag; break;   /* R */
      case 1: v[0] = hor, v[1] = c, v[2] = ver; break;      /* Gr: R left/right, B above/below */
      case 2: v[0] = ver, v[1] = c, v[2] = hor; break;      /* Gb: R above/below, B left/right */
      default: v[0] = diag, v[1] = cross, v[2] = c; break;  /* B */
      }
      for (int k = 0; k < 3; k++) rgb[k * n + (int64_t)y * w + x] = v[k];
    }
  }

  for (int64_t i = 0; i < n; i++) /* colour matrix, then the tone curve */
    for (int c = 0; c < 3; c++) {
      float v = ccm_m[c][0] * rgb[i];
      v = v + ccm_m[c][1] * rgb[n + i];
      v = v + ccm_m[c][2] * rgb[2 * n + i];
      v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
      tmp[c * n + i] = (v * (1.0f + TONE_A)) / (v + TONE_A);
    }

  for (int c = 0; c < 3; c++) {
    const float *t = tmp + c * n;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        float rs[3];
        for (int j = 0; j < 3; j++)
          rs[j] = (ts__pipe_at(t, w, h, x - 1, y + j - 1) + 2.0f * ts__pipe_at(t, w, h, x, y + j - 1)) +
                  ts__pipe_at(t, w, h, x + 1, y + j - 1);
        float blur = ((rs[0] + 2.0f * rs[1]) + rs[2]) * 0.0625f;
        float cv = t[(int64_t)y * w + x];
        float v = cv + SHARP * (cv - blur);
        out[c * n + (int64_t)y * w + x] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
      }
  }
  ts__pipe_ref_free(pl, 3);
  (void)prev;
  return TS_OK;
}
