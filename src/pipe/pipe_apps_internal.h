/* The built-in pipeline apps (pipe.h, "built-in applications"): the app object, each app's entry
 * points, and the small helpers their kernels and references share.
 *
 * Every app file holds three things: the stage kernels (tiled, with an interior fast path and a
 * clamped border path built from one per-pixel expression), the description builder, and the
 * whole-frame reference (plain loops over temporary planes with clamped reads, written apart from
 * the kernels but with each pixel's arithmetic in the same order, so both are bit-identical).
 * Only point functions with no neighbourhood (the synthetic scenes, hashes) are shared by both.
 *
 * Float arithmetic here is plain IEEE single precision: the build uses ISO C mode (no FP
 * contraction into FMA), no fast-math, and no libm calls, so results do not depend on the
 * compiler's vectorization or on the tiling. */
#ifndef TS_PIPE_APPS_INTERNAL_H
#define TS_PIPE_APPS_INTERNAL_H

#include <stdint.h>

#include "tessera/pipe.h"

/* gcc in ISO C mode contracts nothing; clang would fuse a * b + c within an expression where the
 * target has FMA, differently in a kernel and its reference */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { TS__PIPE_EDGE, TS__PIPE_HEAT, TS__PIPE_ISP, TS__PIPE_FLOW, TS__PIPE_LIFE, TS__PIPE_CNN, TS__PIPE_NAPPS };

/* cnn weights: conv1 [8][3][3][3] (out, in, ky, kx), conv2 [8][8][3][3], conv1x1 [4][8] */
#define TS__PIPE_CNN_C0 3
#define TS__PIPE_CNN_C1 8
#define TS__PIPE_CNN_C2 8
#define TS__PIPE_CNN_C3 4

struct ts_pipe_app {
  ts_pipe_desc desc; /* stage params point back at this app */
  int kind;
  int w, h;          /* level-0 domain */
  uint32_t seed;     /* of the synthetic content and the cnn weights */
  float c1w[TS__PIPE_CNN_C1 * TS__PIPE_CNN_C0 * 9], c1b[TS__PIPE_CNN_C1];
  float c2w[TS__PIPE_CNN_C2 * TS__PIPE_CNN_C1 * 9], c2b[TS__PIPE_CNN_C2];
  float c3w[TS__PIPE_CNN_C3 * TS__PIPE_CNN_C2], c3b[TS__PIPE_CNN_C3];
};

/* Builders fill app->desc (stages, inputs, kernels, flops; devices are set by the registry).
 * References: frame `frame`'s last stage into out (contiguous), prev as in ts_pipe_app_reference. */
void ts__pipe_edge_build(ts_pipe_app *app);
void ts__pipe_heat_build(ts_pipe_app *app);
void ts__pipe_isp_build(ts_pipe_app *app);
void ts__pipe_flow_build(ts_pipe_app *app);
void ts__pipe_life_build(ts_pipe_app *app);
void ts__pipe_cnn_build(ts_pipe_app *app);
ts_status ts__pipe_edge_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);
ts_status ts__pipe_heat_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);
ts_status ts__pipe_isp_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);
ts_status ts__pipe_flow_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);
ts_status ts__pipe_life_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);
ts_status ts__pipe_cnn_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);

/* Appends a stage to d; returns its index. */
int ts__pipe_add_stage(ts_pipe_desc *d, const char *name, int level, int channels, ts_pipe_kernel run,
                       const void *params, double flops_per_px);
void ts__pipe_add_input(ts_pipe_desc *d, int stage, int from, int halo);

/* Temporary planes for the references: n floats each, all or none (TS_ERR_OOM). */
ts_status ts__pipe_ref_alloc(float **planes, const int64_t *n, int count);
void ts__pipe_ref_free(float **planes, int count);

/* ---- small shared helpers ------------------------------------------------------------------ */

static inline int ts__pipe_clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* Plane size at level l of a level-0 size n. */
static inline int ts__pipe_lsize(int n, int l) { return (int)(((int64_t)n + (1 << l) - 1) >> l); }

/* Splits the columns [x0, x1) into the border [x0, *ia), the interior [*ia, *ib) and the border
 * [*ib, x1), where the interior is [lo, hi): the columns whose stencil needs no clamping. */
static inline void ts__pipe_split(int x0, int x1, int lo, int hi, int *ia, int *ib) {
  int a = lo > x0 ? lo : x0;
  if (a > x1) a = x1;
  int b = hi < x1 ? hi : x1;
  if (b < a) b = a;
  *ia = a;
  *ib = b;
}

/* Row y (clamped to the plane) of channel ch of a kernel's input. */
static inline const float *ts__pipe_in_row(const ts_pipe_buf *b, int ch, int y) {
  return b->data + (int64_t)ch * b->plane + (int64_t)ts__pipe_clampi(y, 0, b->h - 1) * b->row;
}
/* Row y of channel ch of a kernel's output (y inside the plane). */
static inline float *ts__pipe_out_row(const ts_pipe_buf *b, int ch, int y) {
  return b->data + (int64_t)ch * b->plane + (int64_t)y * b->row;
}

/* Reference read: contiguous plane p [h][w], clamp-to-edge. */
static inline float ts__pipe_at(const float *p, int w, int h, int x, int y) {
  return p[(int64_t)ts__pipe_clampi(y, 0, h - 1) * w + ts__pipe_clampi(x, 0, w - 1)];
}

/* An integer hash of three words (lowbias32-style finalizer): the synthetic content's texture. */
static inline uint32_t ts__pipe_hash(uint32_t x, uint32_t y, uint32_t z) {
  uint32_t h = (x * 0x8da6b343u) ^ (y * 0xd8163841u) ^ (z * 0xcb1ab31fu);
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

/* The frame number reduced into [0, 2^20): patterns of a power-of-two period up to 2^20 move with
 * it without a jump where it wraps. */
static inline int ts__pipe_fmod(int64_t f) {
  int64_t r = f % (1 << 20);
  return (int)(r < 0 ? r + (1 << 20) : r);
}

/* A triangle wave of period p (a power of two): 0 .. p/2 .. 0. */
static inline int ts__pipe_tri(int t, int p) {
  int v = (int)((unsigned)t & (unsigned)(p - 1));
  return v < p / 2 ? v : p - v;
}

/* Inside a disc of radius r at (cx, cy) on a w x h torus (shapes wrap as they move). */
static inline int ts__pipe_in_disc(int x, int y, int cx, int cy, int r, int w, int h) {
  int dx = x - cx, dy = y - cy;
  if (dx < 0) dx = -dx;
  if (dy < 0) dy = -dy;
  if (dx > w - dx) dx = w - dx;
  if (dy > h - dy) dy = h - dy;
  if (dx > r || dy > r) return 0;
  return dx * dx + dy * dy <= r * r;
}

/* Up to three moving discs of a frame's synthetic scene: centres on the torus, one radius. */
typedef struct ts__pipe_scene {
  int w, h, fm, r;
  int cx[3], cy[3];
  uint32_t seed;
} ts__pipe_scene;

static inline void ts__pipe_scene_init(ts__pipe_scene *s, int w, int h, int64_t frame, uint32_t seed) {
  s->w = w;
  s->h = h;
  s->fm = ts__pipe_fmod(frame);
  s->seed = seed;
  int m = w < h ? w : h;
  s->r = m / 6 > 1 ? m / 6 : 1;
  int64_t fw = frame % w, fh = frame % h; /* the frame modulo the torus: continuous across 0 */
  if (fw < 0) fw += w;
  if (fh < 0) fh += h;
  for (int k = 0; k < 3; k++) { /* disc k moves by (k + 1, 2 - k) pixels a frame */
    s->cx[k] = (int)(((int64_t)w * (k + 1) / 4 + fw * (k + 1)) % w);
    s->cy[k] = (int)(((int64_t)h * (2 * k + 1) / 6 + fh * (2 - k)) % h);
  }
}

/* The colour scene (isp, cnn): smooth ramps, three coloured discs, a little texture; 0..255. */
static inline void ts__pipe_scene_rgb(const ts__pipe_scene *s, int x, int y, int rgb[3]) {
  int fm = s->fm;
  int r = 32 + (ts__pipe_tri(2 * x + 5 * fm, 512) >> 2);
  int g = 32 + (ts__pipe_tri(3 * y + 2 * fm, 512) >> 2);
  int b = 32 + (ts__pipe_tri(x + y + 7 * fm, 512) >> 2);
  if (ts__pipe_in_disc(x, y, s->cx[0], s->cy[0], s->r, s->w, s->h)) r += 128;
  if (ts__pipe_in_disc(x, y, s->cx[1], s->cy[1], s->r, s->w, s->h)) g += 128;
  if (ts__pipe_in_disc(x, y, s->cx[2], s->cy[2], s->r, s->w, s->h)) b += 100, r += 40;
  uint32_t t = ts__pipe_hash((uint32_t)x, (uint32_t)y, s->seed);
  r += (int)(t & 15);
  g += (int)((t >> 4) & 15);
  b += (int)((t >> 8) & 15);
  rgb[0] = r > 255 ? 255 : r;
  rgb[1] = g > 255 ? 255 : g;
  rgb[2] = b > 255 ? 255 : b;
}

#endif
