/* "heat": explicit 2-D heat diffusion, four Jacobi sweeps per frame, fed back frame to frame.
 *
 *   stage    level  channels  input (halo)
 *   sweep0   0      1         FEEDBACK (1)   the previous frame's sweep3; on a run's first frame
 *                                            (NULL) the initial field: hot 8x8 blocks
 *   sweep1   0      1         sweep0 (1)
 *   sweep2   0      1         sweep1 (1)
 *   sweep3   0      1         sweep2 (1)
 *
 * A sweep: u' = u + K ((uN + uS) + (uW + uE) - 4u), clamp-to-edge (an insulated border), then
 * three fixed square sources hold their temperatures (later sources win where they overlap). */
#include "pipe/pipe_apps_internal.h"

#define K 0.2f /* diffusion number: stable below 0.25 */

typedef struct sources {
  int cx[3], cy[3], rs;
  float val[3];
} sources;

static void sources_init(sources *s, int w, int h) {
  int m = w < h ? w : h;
  s->rs = m / 16;
  s->cx[0] = w / 4, s->cy[0] = h / 3, s->val[0] = 1.0f;
  s->cx[1] = 3 * w / 4, s->cy[1] = 2 * h / 3, s->val[1] = 0.8f;
  s->cx[2] = w / 2, s->cy[2] = h / 2, s->val[2] = 0.0f;
}

/* the initial field: about one 8x8 block in eight is hot */
static inline float initial(uint32_t seed, int x, int y) {
  return (ts__pipe_hash((uint32_t)(x >> 3), (uint32_t)(y >> 3), seed) & 7) == 0 ? 1.0f : 0.0f;
}

static inline float sweep_px(float c, float n, float s, float w, float e) {
  return c + K * (((n + s) + (w + e)) - 4.0f * c);
}

/* sources held over row y, columns [x0, x1) */
static void hold_sources(const sources *s, float *o, int y, int x0, int x1) {
  for (int k = 0; k < 3; k++) {
    if (y < s->cy[k] - s->rs || y > s->cy[k] + s->rs) continue;
    int a = s->cx[k] - s->rs > x0 ? s->cx[k] - s->rs : x0;
    int b = s->cx[k] + s->rs + 1 < x1 ? s->cx[k] + s->rs + 1 : x1;
    for (int x = a; x < b; x++) o[x] = s->val[k];
  }
}

static void k_sweep(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                    const void *params) {
  const ts_pipe_app *app = params;
  sources src;
  sources_init(&src, app->w, app->h);
  const ts_pipe_buf *b = in[0];
  if (!b) { /* the run's first frame: sweep the initial field, made where it is read */
    int w = out->w, h = out->h;
    for (int y = r.y0; y < r.y1; y++) {
      float *o = ts__pipe_out_row(out, 0, y);
      int ym = ts__pipe_clampi(y - 1, 0, h - 1), yp = ts__pipe_clampi(y + 1, 0, h - 1);
      for (int x = r.x0; x < r.x1; x++) {
        int xm = ts__pipe_clampi(x - 1, 0, w - 1), xp = ts__pipe_clampi(x + 1, 0, w - 1);
        o[x] = sweep_px(initial(app->seed, x, y), initial(app->seed, x, ym), initial(app->seed, x, yp),
                        initial(app->seed, xm, y), initial(app->seed, xp, y));
      }
      hold_sources(&src, o, y, r.x0, r.x1);
    }
    return;
  }
  int w = b->w, ia, ib;
  ts__pipe_split(r.x0, r.x1, 1, w - 1, &ia, &ib);
  for (int y = r.y0; y < r.y1; y++) {
    const float *p0 = ts__pipe_in_row(b, 0, y - 1), *p1 = ts__pipe_in_row(b, 0, y), *p2 = ts__pipe_in_row(b, 0, y + 1);
    float *o = ts__pipe_out_row(out, 0, y);
    int x = r.x0;
#define CL(v) ts__pipe_clampi(v, 0, w - 1)
    for (; x < ia; x++) o[x] = sweep_px(p1[x], p0[x], p2[x], p1[CL(x - 1)], p1[CL(x + 1)]);
    for (; x < ib; x++) o[x] = sweep_px(p1[x], p0[x], p2[x], p1[x - 1], p1[x + 1]);
    for (; x < r.x1; x++) o[x] = sweep_px(p1[x], p0[x], p2[x], p1[CL(x - 1)], p1[CL(x + 1)]);
#undef CL
    hold_sources(&src, o, y, r.x0, r.x1);
  }
}

void ts__pipe_heat_build(ts_pipe_app *app) {
  ts_pipe_desc *d = &app->desc;
  static const char *const names[4] = {"sweep0", "sweep1", "sweep2", "sweep3"};
  /* flops: 5 adds/subs, 2 muls (the sources are per-row integer tests) */
  for (int s = 0; s < 4; s++) {
    int k = ts__pipe_add_stage(d, names[s], 0, 1, k_sweep, app, 7);
    ts__pipe_add_input(d, k, s == 0 ? TS_PIPE_FEEDBACK : s - 1, 1);
  }
}

ts_status ts__pipe_heat_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  int w = app->w, h = app->h;
  int64_t n = (int64_t)w * h;
  float *pl[2];
  int64_t sz[2] = {n, n};
  ts_status st = ts__pipe_ref_alloc(pl, sz, 2);
  if (st != TS_OK) return st;
  sources src;
  sources_init(&src, w, h);
  float *u = pl[0], *v = pl[1];
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      u[(int64_t)y * w + x] = prev ? prev[(int64_t)y * w + x] : initial(app->seed, x, y);
  for (int sweep = 0; sweep < 4; sweep++) {
    float *dst = sweep == 3 ? out : v;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        float c = ts__pipe_at(u, w, h, x, y);
        float val = c + K * (((ts__pipe_at(u, w, h, x, y - 1) + ts__pipe_at(u, w, h, x, y + 1)) +
                              (ts__pipe_at(u, w, h, x - 1, y) + ts__pipe_at(u, w, h, x + 1, y))) -
                             4.0f * c);
        for (int k = 0; k < 3; k++)
          if (x >= src.cx[k] - src.rs && x <= src.cx[k] + src.rs && y >= src.cy[k] - src.rs &&
              y <= src.cy[k] + src.rs)
            val = src.val[k];
        dst[(int64_t)y * w + x] = val;
      }
    float *t = u;
    u = v;
    v = t;
  }
  ts__pipe_ref_free(pl, 2);
  (void)frame;
  return TS_OK;
}
