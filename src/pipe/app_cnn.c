/* "cnn": a small convolutional network with fixed weights (made from the app's seed at create).
 *
 *   stage    level  channels  input (halo)
 *   src      0      3         -            the colour scene / 256
 *   conv1    0      8         src (1)      3x3, 3 -> 8, bias, ReLU
 *   pool1    1      8         conv1 (0)    2x2 max
 *   conv2    1      8         pool1 (1)    3x3, 8 -> 8, bias, ReLU
 *   pool2    2      8         conv2 (0)    2x2 max
 *   conv1x1  2      4         pool2 (0)    1x1, 8 -> 4, bias
 *
 * Padding is clamp-to-edge (the kernel contract's rule), not zeros. Each output is its bias plus
 * the taps in the order (input channel, ky, kx), one rounding per add. */
#include "pipe/pipe_apps_internal.h"

#define CHUNK 64
#define MAXC 8

static inline float relu(float v) { return v > 0.0f ? v : 0.0f; }
static inline float max2(float a, float b) { return a > b ? a : b; }

static void k_src(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                  const void *params) {
  const ts_pipe_app *a = params;
  ts__pipe_scene s;
  ts__pipe_scene_init(&s, a->w, a->h, frame, a->seed);
  for (int y = r.y0; y < r.y1; y++) {
    float *o0 = ts__pipe_out_row(out, 0, y), *o1 = ts__pipe_out_row(out, 1, y), *o2 = ts__pipe_out_row(out, 2, y);
    for (int x = r.x0; x < r.x1; x++) {
      int rgb[3];
      ts__pipe_scene_rgb(&s, x, y, rgb);
      o0[x] = (float)rgb[0] * (1.0f / 256);
      o1[x] = (float)rgb[1] * (1.0f / 256);
      o2[x] = (float)rgb[2] * (1.0f / 256);
    }
  }
}

/* 3x3 convolution + bias + ReLU over r: W [cout][cin][3][3], B [cout]. Border pixels one at a time
 * with clamped columns; the interior in chunks of CHUNK pixels, tap by tap over the chunk so the
 * inner loops run along contiguous rows. */
static void conv3x3(const ts_pipe_buf *b, const ts_pipe_buf *out, ts_pipe_rect r, int cin, int cout, const float *W,
                    const float *B) {
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  float acc[MAXC][CHUNK];
  for (int y = r.y0; y < r.y1; y++) {
    const float *q[MAXC][3];
    for (int ic = 0; ic < cin; ic++)
      for (int ky = 0; ky < 3; ky++) q[ic][ky] = ts__pipe_in_row(b, ic, y + ky - 1);
    for (int x = r.x0; x < r.x1; x++) {
      if (x == ia && ia < ib) x = ib; /* the interior goes below */
      if (x >= r.x1) break;
      int col[3] = {ts__pipe_clampi(x - 1, 0, w - 1), x, ts__pipe_clampi(x + 1, 0, w - 1)};
      for (int oc = 0; oc < cout; oc++) {
        float a = B[oc];
        const float *wo = W + (int64_t)oc * cin * 9;
        for (int ic = 0; ic < cin; ic++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) a = a + wo[(ic * 3 + ky) * 3 + kx] * q[ic][ky][col[kx]];
        ts__pipe_out_row(out, oc, y)[x] = relu(a);
      }
    }
    for (int xs = ia; xs < ib; xs += CHUNK) {
      int n = ib - xs < CHUNK ? ib - xs : CHUNK;
      for (int oc = 0; oc < cout; oc++)
        for (int k = 0; k < n; k++) acc[oc][k] = B[oc];
      for (int ic = 0; ic < cin; ic++)
        for (int ky = 0; ky < 3; ky++)
          for (int kx = 0; kx < 3; kx++) {
            const float *src = q[ic][ky] + xs + kx - 1;
            for (int oc = 0; oc < cout; oc++) {
              float wv = W[((int64_t)(oc * cin + ic) * 3 + ky) * 3 + kx];
              float *ac = acc[oc];
              for (int k = 0; k < n; k++) ac[k] = ac[k] + wv * src[k];
            }
          }
      for (int oc = 0; oc < cout; oc++) {
        float *o = ts__pipe_out_row(out, oc, y) + xs;
        for (int k = 0; k < n; k++) o[k] = relu(acc[oc][k]);
      }
    }
  }
}

static void k_conv1(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                    const void *params) {
  const ts_pipe_app *a = params;
  conv3x3(in[0], out, r, TS__PIPE_CNN_C0, TS__PIPE_CNN_C1, a->c1w, a->c1b);
}

static void k_conv2(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                    const void *params) {
  const ts_pipe_app *a = params;
  conv3x3(in[0], out, r, TS__PIPE_CNN_C1, TS__PIPE_CNN_C2, a->c2w, a->c2b);
}

/* 2x2 max of the finer input (output x reads 2x and 2x + 1, clamped) */
static void k_pool(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                   const void *params) {
  const ts_pipe_buf *b = in[0];
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 0, w / 2, &ia, &ib);
  for (int c = 0; c < out->c; c++)
    for (int y = r.y0; y < r.y1; y++) {
      const float *p0 = ts__pipe_in_row(b, c, 2 * y), *p1 = ts__pipe_in_row(b, c, 2 * y + 1);
      float *o = ts__pipe_out_row(out, c, y);
      int x = r.x0;
#define CL(v) ts__pipe_clampi(v, 0, w - 1)
#define POOL(xa, xb) max2(max2(p0[xa], p0[xb]), max2(p1[xa], p1[xb]))
      for (; x < ia; x++) o[x] = POOL(CL(2 * x), CL(2 * x + 1));
      for (; x < ib; x++) o[x] = POOL(2 * x, 2 * x + 1);
      for (; x < r.x1; x++) o[x] = POOL(CL(2 * x), CL(2 * x + 1));
#undef POOL
#undef CL
    }
}

static void k_conv1x1(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                      const void *params) {
  const ts_pipe_app *a = params;
  for (int y = r.y0; y < r.y1; y++) {
    const float *q[TS__PIPE_CNN_C2];
    for (int ic = 0; ic < TS__PIPE_CNN_C2; ic++) q[ic] = ts__pipe_in_row(in[0], ic, y);
    for (int oc = 0; oc < TS__PIPE_CNN_C3; oc++) {
      float *o = ts__pipe_out_row(out, oc, y);
      const float *wo = a->c3w + oc * TS__PIPE_CNN_C2;
      float bias = a->c3b[oc];
      for (int x = r.x0; x < r.x1; x++) {
        float v = bias;
        for (int ic = 0; ic < TS__PIPE_CNN_C2; ic++) v = v + wo[ic] * q[ic][x];
        o[x] = v;
      }
    }
  }
}

void ts__pipe_cnn_build(ts_pipe_app *app) {
  ts_pipe_desc *d = &app->desc;
  /* arithmetic per pixel: the generator's integer ops + 3 muls; conv3x3 cout x (cin x 9) x
   * (mul + add) + cout ReLU compares; pool 3 compares a channel; conv1x1 4 x 8 x (mul + add) */
  int s0 = ts__pipe_add_stage(d, "src", 0, 3, k_src, app, 80);
  int s1 = ts__pipe_add_stage(d, "conv1", 0, 8, k_conv1, app, 8 * 27 * 2 + 8);
  ts__pipe_add_input(d, s1, s0, 1);
  int s2 = ts__pipe_add_stage(d, "pool1", 1, 8, k_pool, app, 24);
  ts__pipe_add_input(d, s2, s1, 0);
  int s3 = ts__pipe_add_stage(d, "conv2", 1, 8, k_conv2, app, 8 * 72 * 2 + 8);
  ts__pipe_add_input(d, s3, s2, 1);
  int s4 = ts__pipe_add_stage(d, "pool2", 2, 8, k_pool, app, 24);
  ts__pipe_add_input(d, s4, s3, 0);
  int s5 = ts__pipe_add_stage(d, "conv1x1", 2, 4, k_conv1x1, app, 64);
  ts__pipe_add_input(d, s5, s4, 0);
}

/* ---- the reference ---------------------------------------------------------------------------- */

static void ref_conv3x3(const float *in, int w, int h, int cin, int cout, const float *W, const float *B, float *out) {
  int64_t n = (int64_t)w * h;
  for (int oc = 0; oc < cout; oc++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        float a = B[oc];
        for (int ic = 0; ic < cin; ic++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++)
              a = a + W[((oc * cin + ic) * 3 + ky) * 3 + kx] * ts__pipe_at(in + ic * n, w, h, x + kx - 1, y + ky - 1);
        out[oc * n + (int64_t)y * w + x] = a > 0.0f ? a : 0.0f;
      }
}

static void ref_pool(const float *in, int ws, int hs, int c, float *out, int wd, int hd) {
  for (int ch = 0; ch < c; ch++) {
    const float *p = in + (int64_t)ch * ws * hs;
    for (int y = 0; y < hd; y++)
      for (int x = 0; x < wd; x++) {
        float a = ts__pipe_at(p, ws, hs, 2 * x, 2 * y), b = ts__pipe_at(p, ws, hs, 2 * x + 1, 2 * y);
        float cc = ts__pipe_at(p, ws, hs, 2 * x, 2 * y + 1), d = ts__pipe_at(p, ws, hs, 2 * x + 1, 2 * y + 1);
        float top = a > b ? a : b, bot = cc > d ? cc : d;
        out[(int64_t)ch * wd * hd + (int64_t)y * wd + x] = top > bot ? top : bot;
      }
  }
}

ts_status ts__pipe_cnn_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  int w0 = app->w, h0 = app->h;
  int w1 = ts__pipe_lsize(w0, 1), h1 = ts__pipe_lsize(h0, 1), w2 = ts__pipe_lsize(w0, 2), h2 = ts__pipe_lsize(h0, 2);
  int64_t n0 = (int64_t)w0 * h0, n1 = (int64_t)w1 * h1, n2 = (int64_t)w2 * h2;
  float *pl[5];
  int64_t sz[5] = {3 * n0, 8 * n0, 8 * n1, 8 * n1, 8 * n2};
  ts_status st = ts__pipe_ref_alloc(pl, sz, 5);
  if (st != TS_OK) return st;
  float *src = pl[0], *c1 = pl[1], *p1 = pl[2], *c2 = pl[3], *p2 = pl[4];
  ts__pipe_scene s;
  ts__pipe_scene_init(&s, w0, h0, frame, app->seed);
  for (int y = 0; y < h0; y++)
    for (int x = 0; x < w0; x++) {
      int rgb[3];
      ts__pipe_scene_rgb(&s, x, y, rgb);
      for (int c = 0; c < 3; c++) src[c * n0 + (int64_t)y * w0 + x] = (float)rgb[c] * (1.0f / 256);
    }
  ref_conv3x3(src, w0, h0, TS__PIPE_CNN_C0, TS__PIPE_CNN_C1, app->c1w, app->c1b, c1);
  ref_pool(c1, w0, h0, TS__PIPE_CNN_C1, p1, w1, h1);
  ref_conv3x3(p1, w1, h1, TS__PIPE_CNN_C1, TS__PIPE_CNN_C2, app->c2w, app->c2b, c2);
  ref_pool(c2, w1, h1, TS__PIPE_CNN_C2, p2, w2, h2);
  for (int oc = 0; oc < TS__PIPE_CNN_C3; oc++)
    for (int64_t i = 0; i < n2; i++) {
      float v = app->c3b[oc];
      for (int ic = 0; ic < TS__PIPE_CNN_C2; ic++) v = v + app->c3w[oc * TS__PIPE_CNN_C2 + ic] * p2[ic * n2 + i];
      out[oc * n2 + i] = v;
    }
  ts__pipe_ref_free(pl, 5);
  (void)prev;
  return TS_OK;
}
