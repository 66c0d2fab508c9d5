/* "edge": synthetic grey frame -> 5x5 Gaussian blur -> Sobel (magnitude, direction bin) ->
 * non-maximum suppression -> hysteresis-style threshold (weak pixels kept next to strong ones).
 *
 *   stage   level  channels  input (halo)
 *   src     0      1         -
 *   blur    0      1         src (2)
 *   sobel   0      2         blur (1)      ch 0: |gx| + |gy|, ch 1: direction bin 0..3 as a float
 *   nms     0      1         sobel (1)
 *   thresh  0      1         nms (1)       1.0 edge, 0.0 not */
#include <math.h>

#include "pipe/pipe_apps_internal.h"

#define TAN22 0.41421356f /* tan(22.5 deg): the direction bins' edges */
#define HI 0.4f           /* strong edge */
#define LO 0.15f          /* weak edge: kept when an 8-neighbour is strong */

/* ---- the synthetic frame: a ramp, two discs and a bar moving with the frame, texture ---------- */

static inline int grey(const ts__pipe_scene *s, int x, int y) {
  int v = ts__pipe_tri(x + 2 * y + 3 * s->fm, 512) >> 2; /* 0..64 */
  if (ts__pipe_in_disc(x, y, s->cx[0], s->cy[0], s->r, s->w, s->h)) v += 120;
  if (ts__pipe_in_disc(x, y, s->cx[1], s->cy[1], s->r, s->w, s->h)) v += 80;
  int dx = x - s->cx[2], dy = y - s->cy[2]; /* a bar about 2r x r on the torus */
  if (dx < 0) dx = -dx;
  if (dy < 0) dy = -dy;
  if (dx > s->w - dx) dx = s->w - dx;
  if (dy > s->h - dy) dy = s->h - dy;
  if (dx <= s->r && 2 * dy <= s->r) v += 100;
  v += (int)(ts__pipe_hash((uint32_t)x, (uint32_t)y, s->seed) & 15);
  return v > 255 ? 255 : v;
}

/* ---- kernels --------------------------------------------------------------------------------- */

/* a column clamped to the input plane (w: its width, in scope) */
#define CL(v) ts__pipe_clampi(v, 0, w - 1)

static void k_src(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                  const void *params) {
  const ts_pipe_app *a = params;
  ts__pipe_scene s;
  ts__pipe_scene_init(&s, a->w, a->h, frame, a->seed);
  for (int y = r.y0; y < r.y1; y++) {
    float *o = ts__pipe_out_row(out, 0, y);
    for (int x = r.x0; x < r.x1; x++) o[x] = (float)grey(&s, x, y) * (1.0f / 256);
  }
}

/* binomial [1 4 6 4 1] / 16 along a row, then the same down the five row sums */
static inline float blur_row(const float *q, int a, int b, int c, int d, int e) {
  return (((0.0625f * q[a] + 0.25f * q[b]) + 0.375f * q[c]) + 0.25f * q[d]) + 0.0625f * q[e];
}
static inline float blur_px(const float *const *p, int a, int b, int c, int d, int e) {
  return (((0.0625f * blur_row(p[0], a, b, c, d, e) + 0.25f * blur_row(p[1], a, b, c, d, e)) +
           0.375f * blur_row(p[2], a, b, c, d, e)) +
          0.25f * blur_row(p[3], a, b, c, d, e)) +
         0.0625f * blur_row(p[4], a, b, c, d, e);
}

static void k_blur(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                   const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 2, w - 2, &ia, &ib);
  for (int y = r.y0; y < r.y1; y++) {
    const float *p[5];
    for (int k = 0; k < 5; k++) p[k] = ts__pipe_in_row(b, 0, y + k - 2);
    float *o = ts__pipe_out_row(out, 0, y);
    int x = r.x0;
    for (; x < ia; x++) o[x] = blur_px(p, CL(x - 2), CL(x - 1), x, CL(x + 1), CL(x + 2));
    for (; x < ib; x++) o[x] = blur_px(p, x - 2, x - 1, x, x + 1, x + 2);
    for (; x < r.x1; x++) o[x] = blur_px(p, CL(x - 2), CL(x - 1), x, CL(x + 1), CL(x + 2));
  }
}

static inline void sobel_px(const float *p0, const float *p1, const float *p2, int xm, int xc, int xp, float *mag,
                            float *dir) {
  float gx = ((p0[xp] + 2.0f * p1[xp]) + p2[xp]) - ((p0[xm] + 2.0f * p1[xm]) + p2[xm]);
  float gy = ((p2[xm] + 2.0f * p2[xc]) + p2[xp]) - ((p0[xm] + 2.0f * p0[xc]) + p0[xp]);
  float ax = fabsf(gx), ay = fabsf(gy);
  /* plain selects (no branches) so the interior loop vectorizes */
  int same = (gx > 0.0f) == (gy > 0.0f);
  float d = same ? 1.0f : 3.0f;
  d = ax <= TAN22 * ay ? 2.0f : d;
  d = ay <= TAN22 * ax ? 0.0f : d;
  *mag = ax + ay;
  *dir = d;
}

static void k_sobel(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                    const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  for (int y = r.y0; y < r.y1; y++) {
    const float *p0 = ts__pipe_in_row(b, 0, y - 1), *p1 = ts__pipe_in_row(b, 0, y), *p2 = ts__pipe_in_row(b, 0, y + 1);
    float *om = ts__pipe_out_row(out, 0, y), *od = ts__pipe_out_row(out, 1, y);
    int x = r.x0;
    for (; x < ia; x++) sobel_px(p0, p1, p2, CL(x - 1), x, CL(x + 1), &om[x], &od[x]);
    for (; x < ib; x++) sobel_px(p0, p1, p2, x - 1, x, x + 1, &om[x], &od[x]);
    for (; x < r.x1; x++) sobel_px(p0, p1, p2, CL(x - 1), x, CL(x + 1), &om[x], &od[x]);
  }
}

/* keep the magnitude where it is a maximum across the edge (along the gradient's direction bin) */
static inline float nms_px(const float *q0, const float *q1, const float *q2, float d, int xm, int xc, int xp) {
  /* every candidate loaded, then selected: no branches, so the interior loop vectorizes */
  float m = q1[xc], w = q1[xm], e = q1[xp], nw = q0[xm], n = q0[xc], ne = q0[xp], sw = q2[xm], s = q2[xc], se = q2[xp];
  float n1 = d == 0.0f ? w : (d == 1.0f ? nw : (d == 2.0f ? n : ne));
  float n2 = d == 0.0f ? e : (d == 1.0f ? se : (d == 2.0f ? s : sw));
  return ((m >= n1) & (m >= n2)) ? m : 0.0f;
}

static void k_nms(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                  const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  for (int y = r.y0; y < r.y1; y++) {
    const float *q0 = ts__pipe_in_row(b, 0, y - 1), *q1 = ts__pipe_in_row(b, 0, y), *q2 = ts__pipe_in_row(b, 0, y + 1);
    const float *dr = ts__pipe_in_row(b, 1, y);
    float *o = ts__pipe_out_row(out, 0, y);
    int x = r.x0;
    for (; x < ia; x++) o[x] = nms_px(q0, q1, q2, dr[x], CL(x - 1), x, CL(x + 1));
    for (; x < ib; x++) o[x] = nms_px(q0, q1, q2, dr[x], x - 1, x, x + 1);
    for (; x < r.x1; x++) o[x] = nms_px(q0, q1, q2, dr[x], CL(x - 1), x, CL(x + 1));
  }
}

static inline float fmaxf_(float a, float b) { return a > b ? a : b; }

static inline float thr_px(const float *t0, const float *t1, const float *t2, int xm, int xc, int xp) {
  float c = t1[xc];
  float nb = fmaxf_(fmaxf_(fmaxf_(t0[xm], t0[xc]), fmaxf_(t0[xp], t1[xm])),
                    fmaxf_(fmaxf_(t1[xp], t2[xm]), fmaxf_(t2[xc], t2[xp])));
  return (c >= HI || (c >= LO && nb >= HI)) ? 1.0f : 0.0f;
}

static void k_thresh(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                     const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  for (int y = r.y0; y < r.y1; y++) {
    const float *t0 = ts__pipe_in_row(b, 0, y - 1), *t1 = ts__pipe_in_row(b, 0, y), *t2 = ts__pipe_in_row(b, 0, y + 1);
    float *o = ts__pipe_out_row(out, 0, y);
    int x = r.x0;
    for (; x < ia; x++) o[x] = thr_px(t0, t1, t2, CL(x - 1), x, CL(x + 1));
    for (; x < ib; x++) o[x] = thr_px(t0, t1, t2, x - 1, x, x + 1);
    for (; x < r.x1; x++) o[x] = thr_px(t0, t1, t2, CL(x - 1), x, CL(x + 1));
  }
}
#undef CL

void ts__pipe_edge_build(ts_pipe_app *app) {
  ts_pipe_desc *d = &app->desc;
  /* arithmetic per pixel: the generator's integer ops (ramp, three shape tests, hash); blur
   * 5 x (5 mul + 4 add) + 5 mul + 4 add; Sobel 2 x (2 mul + 5 add), an add, 2 mul + 4 compares;
   * nms 3 + 2 compares; thresh 7 max + 3 compares */
  int s0 = ts__pipe_add_stage(d, "src", 0, 1, k_src, app, 55);
  int s1 = ts__pipe_add_stage(d, "blur", 0, 1, k_blur, app, 54);
  ts__pipe_add_input(d, s1, s0, 2);
  int s2 = ts__pipe_add_stage(d, "sobel", 0, 2, k_sobel, app, 21);
  ts__pipe_add_input(d, s2, s1, 1);
  int s3 = ts__pipe_add_stage(d, "nms", 0, 1, k_nms, app, 5);
  ts__pipe_add_input(d, s3, s2, 1);
  int s4 = ts__pipe_add_stage(d, "thresh", 0, 1, k_thresh, app, 10);
  ts__pipe_add_input(d, s4, s3, 1);
}

/* ---- the reference: whole planes, clamped reads --------------------------------------------- */

ts_status ts__pipe_edge_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  int w = app->w, h = app->h;
  int64_t n = (int64_t)w * h;
  float *pl[3];
  int64_t sz[3] = {n, n, 2 * n};
  ts_status st = ts__pipe_ref_alloc(pl, sz, 3);
  if (st != TS_OK) return st;
  float *src = pl[0], *blur = pl[1], *mag = pl[2], *dir = pl[2] + n, *nms = pl[0]; /* nms reuses src */
  ts__pipe_scene s;
  ts__pipe_scene_init(&s, w, h, frame, app->seed);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) src[(int64_t)y * w + x] = (float)grey(&s, x, y) * (1.0f / 256);

  static const float g5[5] = {0.0625f, 0.25f, 0.375f, 0.25f, 0.0625f};
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      float acc = 0;
      for (int ky = 0; ky < 5; ky++) {
        float rs = g5[0] * ts__pipe_at(src, w, h, x - 2, y + ky - 2);
        for (int kx = 1; kx < 5; kx++) rs = rs + g5[kx] * ts__pipe_at(src, w, h, x + kx - 2, y + ky - 2);
        acc = ky == 0 ? g5[0] * rs : acc + g5[ky] * rs;
      }
      blur[(int64_t)y * w + x] = acc;
    }

  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      float v[3][3]; /* [dy][dx] */
      for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++) v[j][i] = ts__pipe_at(blur, w, h, x + i - 1, y + j - 1);
      float gx = ((v[0][2] + 2.0f * v[1][2]) + v[2][2]) - ((v[0][0] + 2.0f * v[1][0]) + v[2][0]);
      float gy = ((v[2][0] + 2.0f * v[2][1]) + v[2][2]) - ((v[0][0] + 2.0f * v[0][1]) + v[0][2]);
      float ax = fabsf(gx), ay = fabsf(gy);
      float dbin;
      if (ay <= TAN22 * ax) dbin = 0.0f;
      else if (ax <= TAN22 * ay) dbin = 2.0f;
      else dbin = (gx > 0.0f) == (gy > 0.0f) ? 1.0f : 3.0f;
      mag[(int64_t)y * w + x] = ax + ay;
      dir[(int64_t)y * w + x] = dbin;
    }

  /* neighbours across the edge for direction bins 0..3: (dx, dy) and its opposite */
  static const int nx[4] = {-1, -1, 0, 1}, ny[4] = {0, -1, -1, -1};
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      int k = (int)dir[(int64_t)y * w + x];
      float m = mag[(int64_t)y * w + x];
      float n1 = ts__pipe_at(mag, w, h, x + nx[k], y + ny[k]);
      float n2 = ts__pipe_at(mag, w, h, x - nx[k], y - ny[k]);
      nms[(int64_t)y * w + x] = (m >= n1 && m >= n2) ? m : 0.0f;
    }

  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      float c = nms[(int64_t)y * w + x];
      int strong_nb = 0;
      for (int j = -1; j <= 1; j++)
        for (int i = -1; i <= 1; i++)
          if ((i || j) && ts__pipe_at(nms, w, h, x + i, y + j) >= HI) strong_nb = 1;
      out[(int64_t)y * w + x] = (c >= HI || (c >= LO && strong_nb)) ? 1.0f : 0.0f;
    }
  ts__pipe_ref_free(pl, 3);
  (void)prev;
  return TS_OK;
}
