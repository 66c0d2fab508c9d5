/* "flow": Lucas-Kanade optical flow on a 3-level pyramid, refined down the levels (a DAG with
 * skip connections: each refine stage reads the coarser flow and the pyramid level it works at).
 *
 *   stage    level  channels  inputs (halo)
 *   src      0      2         -                        ch 0: frame f, ch 1: frame f - 1
 *   down1    1      2         src (0)                  2x2 average
 *   down2    2      2         down1 (0)                2x2 average
 *   lk2      2      2         down2 (2)                (u, v): Lucas-Kanade, det ~ 0 -> (0, 0)
 *   refine1  1      2         lk2 (0), down1 (2)       LK pulled towards 2 x the coarser flow
 *   refine0  0      2         refine1 (0), src (2)     the same at full resolution
 *
 * The structure tensor sums Horn-Schunck cube derivatives over the 4 x 4 cells (2 x 2 pixels x
 * 2 frames each) that tile a pixel's 5 x 5 neighbourhood, so the window is centred and the halo
 * is 2. Per cell: S = I1 + I0 and D = I1 - I0 at its corners a b / c d,
 *   Ix = ((Sb - Sa) + (Sd - Sc)) / 4, Iy = ((Sc - Sa) + (Sd - Sb)) / 4, It = ((Da + Db) + (Dc + Dd)) / 4,
 * accumulated from 0 in cell order (rows, then columns). Flows are in the level's pixels, clipped
 * to +-MAXF. The refine stages minimize sum (Ix u + Iy v + It)^2 + LAM |(u, v) - 2 (uc, vc)|^2,
 * whose matrix is positive definite, so the coarser estimate carries through flat regions. */
#include "pipe/pipe_apps_internal.h"

#define MAXF 16.0f
#define LAM 1e-3f
#define CHUNK 64

/* The scene: a product of two moving triangle waves (motion (2, 1) pixels a frame), a disc moving
 * by (1, 2), texture moving with the waves; intensity 0 .. ~0.78. */
static inline float scene(const ts__pipe_scene *s, int x, int y) {
  int fm = s->fm;
  int v = ts__pipe_tri(x - 2 * fm, 64) * ts__pipe_tri(y - fm, 64);
  if (ts__pipe_in_disc(x, y, s->cx[0], s->cy[0], s->r, s->w, s->h)) v += 512;
  /* texture coordinates modulo 2^21 and 2^20: they move on when the frame number wraps */
  v += (int)(ts__pipe_hash((uint32_t)(x - 2 * fm) & 0x1fffffu, (uint32_t)(y - fm) & 0xfffffu, s->seed) & 63);
  return (float)v * (1.0f / 2048);
}

static inline float clampf(float v) { return v < -MAXF ? -MAXF : (v > MAXF ? MAXF : v); }

/* ---- kernels --------------------------------------------------------------------------------- */

static void k_src(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                  const void *params) {
  const ts_pipe_app *a = params;
  ts__pipe_scene s1, s0;
  ts__pipe_scene_init(&s1, a->w, a->h, frame, a->seed);
  ts__pipe_scene_init(&s0, a->w, a->h, frame - 1, a->seed);
  for (int y = r.y0; y < r.y1; y++) {
    float *o1 = ts__pipe_out_row(out, 0, y), *o0 = ts__pipe_out_row(out, 1, y);
    for (int x = r.x0; x < r.x1; x++) {
      o1[x] = scene(&s1, x, y);
      o0[x] = scene(&s0, x, y);
    }
  }
}

static inline float avg4(float a, float b, float c, float d) { return ((a + b) + (c + d)) * 0.25f; }

/* 2x2 average of the finer input: output x reads 2x and 2x + 1 (clamped) */
static void k_down(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                   const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 0, w / 2, &ia, &ib);
  for (int c = 0; c < 2; c++)
    for (int y = r.y0; y < r.y1; y++) {
      const float *p0 = ts__pipe_in_row(b, c, 2 * y), *p1 = ts__pipe_in_row(b, c, 2 * y + 1);
      float *o = ts__pipe_out_row(out, c, y);
      int x = r.x0;
#define CL(v) ts__pipe_clampi(v, 0, w - 1)
      for (; x < ia; x++) o[x] = avg4(p0[CL(2 * x)], p0[CL(2 * x + 1)], p1[CL(2 * x)], p1[CL(2 * x + 1)]);
      for (; x < ib; x++) o[x] = avg4(p0[2 * x], p0[2 * x + 1], p1[2 * x], p1[2 * x + 1]);
      for (; x < r.x1; x++) o[x] = avg4(p0[CL(2 * x)], p0[CL(2 * x + 1)], p1[CL(2 * x)], p1[CL(2 * x + 1)]);
    }
}

/* One cell's derivatives added to the tensor sums: corners a b / c d of frame f (1) and f - 1 (0). */
static inline void cell(float a1, float b1, float c1, float d1, float a0, float b0, float c0, float d0, float *xx,
                        float *xy, float *yy, float *xt, float *yt) {
  float sa = a1 + a0, sb = b1 + b0, sc = c1 + c0, sd = d1 + d0;
  float da = a1 - a0, db = b1 - b0, dc = c1 - c0, dd = d1 - d0;
  float ix = ((sb - sa) + (sd - sc)) * 0.25f;
  float iy = ((sc - sa) + (sd - sb)) * 0.25f;
  float it = ((da + db) + (dc + dd)) * 0.25f;
  *xx = *xx + ix * ix;
  *xy = *xy + ix * iy;
  *yy = *yy + iy * iy;
  *xt = *xt + ix * it;
  *yt = *yt + iy * it;
}

/* Tensor sums t[5][CHUNK] (xx, xy, yy, xt, yt) of the n pixels from column xs on the row whose
 * 5 rows of the two frames are q1[0..4], q0[0..4]. interior: no column clamping needed. */
static void tensor_sums(const float *const *q1, const float *const *q0, int w, int xs, int n, int interior,
                        float t[5][CHUNK]) {
  for (int k = 0; k < n; k++) t[0][k] = t[1][k] = t[2][k] = t[3][k] = t[4][k] = 0.0f;
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++) {
      const float *a1 = q1[j], *c1 = q1[j + 1], *a0 = q0[j], *c0 = q0[j + 1];
      if (interior) {
        int l = xs - 2 + i, rr = l + 1;
        for (int k = 0; k < n; k++)
          cell(a1[l + k], a1[rr + k], c1[l + k], c1[rr + k], a0[l + k], a0[rr + k], c0[l + k], c0[rr + k], &t[0][k],
               &t[1][k], &t[2][k], &t[3][k], &t[4][k]);
      } else {
        for (int k = 0; k < n; k++) {
          int l = ts__pipe_clampi(xs + k - 2 + i, 0, w - 1), rr = ts__pipe_clampi(xs + k - 1 + i, 0, w - 1);
          cell(a1[l], a1[rr], c1[l], c1[rr], a0[l], a0[rr], c0[l], c0[rr], &t[0][k], &t[1][k], &t[2][k], &t[3][k],
               &t[4][k]);
        }
      }
    }
}

static inline void lk_solve(float xx, float xy, float yy, float xt, float yt, float *u, float *v) {
  float det = xx * yy - xy * xy, tr = xx + yy;
  float nu = xy * yt - yy * xt, nv = xy * xt - xx * yt;
  if (det > 1e-4f * tr * tr + 1e-12f) { /* well conditioned; else the aperture problem: no flow */
    *u = clampf(nu / det);
    *v = clampf(nv / det);
  } else {
    *u = 0.0f;
    *v = 0.0f;
  }
}

static inline void refine_solve(float xx, float xy, float yy, float xt, float yt, float u0, float v0, float *u,
                                float *v) {
  float a = xx + LAM, d = yy + LAM;
  float ru = LAM * u0 - xt, rv = LAM * v0 - yt;
  float det = a * d - xy * xy;
  if (det > 1e-12f) {
    *u = clampf((d * ru - xy * rv) / det);
    *v = clampf((a * rv - xy * ru) / det);
  } else {
    *u = clampf(u0);
    *v = clampf(v0);
  }
}

/* LK at the pixels of r: pyr = the level's 2-channel plane, coarse = the coarser flow (NULL: plain
 * LK). Rows of the output are done in chunks of CHUNK columns: tensor sums, then the solve. */
static void lk_rect(const ts_pipe_buf *pyr, const ts_pipe_buf *coarse, const ts_pipe_buf *out, ts_pipe_rect r) {
  int w = pyr->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 2, w - 2, &ia, &ib);
  float t[5][CHUNK];
  for (int y = r.y0; y < r.y1; y++) {
    const float *q1[5], *q0[5];
    for (int k = 0; k < 5; k++) {
      q1[k] = ts__pipe_in_row(pyr, 0, y + k - 2);
      q0[k] = ts__pipe_in_row(pyr, 1, y + k - 2);
    }
    const float *cu = NULL, *cv = NULL;
    if (coarse) {
      cu = ts__pipe_in_row(coarse, 0, y >> 1);
      cv = ts__pipe_in_row(coarse, 1, y >> 1);
    }
    float *ou = ts__pipe_out_row(out, 0, y), *ov = ts__pipe_out_row(out, 1, y);
    /* segments: [x0, ia) border, [ia, ib) interior, [ib, x1) border */
    int seg[4] = {r.x0, ia, ib, r.x1};
    for (int sgm = 0; sgm < 3; sgm++)
      for (int xs = seg[sgm]; xs < seg[sgm + 1]; xs += CHUNK) {
        int n = seg[sgm + 1] - xs < CHUNK ? seg[sgm + 1] - xs : CHUNK;
        tensor_sums(q1, q0, w, xs, n, sgm == 1, t);
        if (coarse) {
          int cw = coarse->w;
          for (int k = 0; k < n; k++) {
            int xc = ts__pipe_clampi((xs + k) >> 1, 0, cw - 1);
            refine_solve(t[0][k], t[1][k], t[2][k], t[3][k], t[4][k], 2.0f * cu[xc], 2.0f * cv[xc], &ou[xs + k],
                         &ov[xs + k]);
          }
        } else {
          for (int k = 0; k < n; k++)
            lk_solve(t[0][k], t[1][k], t[2][k], t[3][k], t[4][k], &ou[xs + k], &ov[xs + k]);
        }
      }
  }
}

static void k_lk(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                 const void *params) {
  lk_rect(in[0], NULL, out, r);
}

static void k_refine(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                     const void *params) {
  lk_rect(in[1], in[0], out, r);
}

void ts__pipe_flow_build(ts_pipe_app *app) {
  ts_pipe_desc *d = &app->desc;
  /* arithmetic per pixel: the generator's integer ops x 2 frames; down 2 x (3 add + mul); LK
   * 16 cells x (8 S/D + 12 derivatives + 10 tensor) + 20 for the solve (with the clip); refine
   * the same cells + 24 (prior, solve, clip) */
  int s0 = ts__pipe_add_stage(d, "src", 0, 2, k_src, app, 80);
  int s1 = ts__pipe_add_stage(d, "down1", 1, 2, k_down, app, 8);
  ts__pipe_add_input(d, s1, s0, 0);
  int s2 = ts__pipe_add_stage(d, "down2", 2, 2, k_down, app, 8);
  ts__pipe_add_input(d, s2, s1, 0);
  int s3 = ts__pipe_add_stage(d, "lk2", 2, 2, k_lk, app, 500);
  ts__pipe_add_input(d, s3, s2, 2);
  int s4 = ts__pipe_add_stage(d, "refine1", 1, 2, k_refine, app, 504);
  ts__pipe_add_input(d, s4, s3, 0);
  ts__pipe_add_input(d, s4, s1, 2);
  int s5 = ts__pipe_add_stage(d, "refine0", 0, 2, k_refine, app, 504);
  ts__pipe_add_input(d, s5, s4, 0);
  ts__pipe_add_input(d, s5, s0, 2);
}

/* ---- the reference ---------------------------------------------------------------------------- */

/* 2x2 average of src [2][hs][ws] into dst [2][hd][wd] */
static void ref_down(const float *src, int ws, int hs, float *dst, int wd, int hd) {
  for (int c = 0; c < 2; c++) {
    const float *p = src + (int64_t)c * ws * hs;
    for (int y = 0; y < hd; y++)
      for (int x = 0; x < wd; x++)
        dst[(int64_t)c * wd * hd + (int64_t)y * wd + x] =
            ((ts__pipe_at(p, ws, hs, 2 * x, 2 * y) + ts__pipe_at(p, ws, hs, 2 * x + 1, 2 * y)) +
             (ts__pipe_at(p, ws, hs, 2 * x, 2 * y + 1) + ts__pipe_at(p, ws, hs, 2 * x + 1, 2 * y + 1))) *
            0.25f;
  }
}

/* LK over pyr [2][h][w] into flow [2][h][w]; coarse [2][hc][wc] (NULL: plain LK) */
static void ref_lk(const float *pyr, int w, int h, const float *coarse, int wc, int hc, float *flow) {
  int64_t n = (int64_t)w * h;
  const float *f1 = pyr, *f0 = pyr + n;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      float s[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f}; /* xx xy yy xt yt */
      for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) {
          int xl = x - 2 + i, yt = y - 2 + j;
          float S[4], D[4]; /* corners: top-left, top-right, bottom-left, bottom-right */
          for (int k = 0; k < 4; k++) {
            float v1 = ts__pipe_at(f1, w, h, xl + (k & 1), yt + (k >> 1));
            float v0 = ts__pipe_at(f0, w, h, xl + (k & 1), yt + (k >> 1));
            S[k] = v1 + v0;
            D[k] = v1 - v0;
          }
          float ix = ((S[1] - S[0]) + (S[3] - S[2])) * 0.25f;
          float iy = ((S[2] - S[0]) + (S[3] - S[1])) * 0.25f;
          float it = ((D[0] + D[1]) + (D[2] + D[3])) * 0.25f;
          s[0] = s[0] + ix * ix;
          s[1] = s[1] + ix * iy;
          s[2] = s[2] + iy * iy;
          s[3] = s[3] + ix * it;
          s[4] = s[4] + iy * it;
        }
      float u, v;
      if (!coarse) {
        float det = s[0] * s[2] - s[1] * s[1], tr = s[0] + s[2];
        if (det > 1e-4f * tr * tr + 1e-12f) {
          u = (s[1] * s[4] - s[2] * s[3]) / det;
          v = (s[1] * s[3] - s[0] * s[4]) / det;
        } else {
          u = v = 0.0f;
        }
      } else {
        float u0 = 2.0f * ts__pipe_at(coarse, wc, hc, x >> 1, y >> 1);
        float v0 = 2.0f * ts__pipe_at(coarse + (int64_t)wc * hc, wc, hc, x >> 1, y >> 1);
        float a = s[0] + LAM, d = s[2] + LAM;
        float ru = LAM * u0 - s[3], rv = LAM * v0 - s[4];
        float det = a * d - s[1] * s[1];
        if (det > 1e-12f) {
          u = (d * ru - s[1] * rv) / det;
          v = (a * rv - s[1] * ru) / det;
        } else {
          u = u0;
          v = v0;
        }
      }
      flow[(int64_t)y * w + x] = clampf(u);
      flow[n + (int64_t)y * w + x] = clampf(v);
    }
}

ts_status ts__pipe_flow_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  int w0 = app->w, h0 = app->h;
  int w1 = ts__pipe_lsize(w0, 1), h1 = ts__pipe_lsize(h0, 1), w2 = ts__pipe_lsize(w0, 2), h2 = ts__pipe_lsize(h0, 2);
  int64_t n0 = (int64_t)w0 * h0, n1 = (int64_t)w1 * h1, n2 = (int64_t)w2 * h2;
  float *pl[5];
  int64_t sz[5] = {2 * n0, 2 * n1, 2 * n2, 2 * n2, 2 * n1};
  ts_status st = ts__pipe_ref_alloc(pl, sz, 5);
  if (st != TS_OK) return st;
  float *src = pl[0], *p1 = pl[1], *p2 = pl[2], *fl2 = pl[3], *fl1 = pl[4];
  ts__pipe_scene s1, s0;
  ts__pipe_scene_init(&s1, w0, h0, frame, app->seed);
  ts__pipe_scene_init(&s0, w0, h0, frame - 1, app->seed);
  for (int y = 0; y < h0; y++)
    for (int x = 0; x < w0; x++) {
      src[(int64_t)y * w0 + x] = scene(&s1, x, y);
      src[n0 + (int64_t)y * w0 + x] = scene(&s0, x, y);
    }
  ref_down(src, w0, h0, p1, w1, h1);
  ref_down(p1, w1, h1, p2, w2, h2);
  ref_lk(p2, w2, h2, NULL, 0, 0, fl2);
  ref_lk(p1, w1, h1, fl2, w2, h2, fl1);
  ref_lk(src, w0, h0, fl1, w1, h1, out);
  ts__pipe_ref_free(pl, 5);
  (void)prev;
  return TS_OK;
}
