/* "life": Conway's game of life on 0/1 floats, four generations per frame, fed back.
 *
 *   stage  level  channels  input (halo)
 *   gen0   0      1         FEEDBACK (1)   the previous frame's gen3; on a run's first frame (NULL)
 *                                          a board from a hash of the coordinates (3/8 alive)
 *   gen1   0      1         gen0 (1)
 *   gen2   0      1         gen1 (1)
 *   gen3   0      1         gen2 (1)
 *
 * Clamp-to-edge at the border (the kernel contract's rule): a border cell's outside neighbours are
 * the edge cells again, so it may count a cell (itself included) twice. Counts are small integers,
 * exact in any order. */
#include "pipe/pipe_apps_internal.h"

static inline float initial(uint32_t seed, int x, int y) {
  return (ts__pipe_hash((uint32_t)x, (uint32_t)y, seed ^ 0x11feu) & 7) < 3 ? 1.0f : 0.0f;
}

/* c centre; the 8 neighbours in the order NW N NE W E SW S SE */
static inline float life_px(float c, float nw, float n, float ne, float w, float e, float sw, float s, float se) {
  float cnt = ((((((nw + n) + ne) + w) + e) + sw) + s) + se;
  return (cnt == 3.0f || (cnt == 2.0f && c != 0.0f)) ? 1.0f : 0.0f;
}

static void k_gen(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                  const void *params) {
  const ts_pipe_app *app = params;
  const ts_pipe_buf *b = in[0];
  if (!b) { /* the run's first frame: the initial board, made where it is read */
    int w = out->w, h = out->h;
    uint32_t sd = app->seed;
    for (int y = r.y0; y < r.y1; y++) {
      float *o = ts__pipe_out_row(out, 0, y);
      int ym = ts__pipe_clampi(y - 1, 0, h - 1), yp = ts__pipe_clampi(y + 1, 0, h - 1);
      for (int x = r.x0; x < r.x1; x++) {
        int xm = ts__pipe_clampi(x - 1, 0, w - 1), xp = ts__pipe_clampi(x + 1, 0, w - 1);
        o[x] = life_px(initial(sd, x, y), initial(sd, xm, ym), initial(sd, x, ym), initial(sd, xp, ym),
                       initial(sd, xm, y), initial(sd, xp, y), initial(sd, xm, yp), initial(sd, x, yp),
                       initial(sd, xp, yp));
      }
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
#define GEN(xm, xp) life_px(p1[x], p0[xm], p0[x], p0[xp], p1[xm], p1[xp], p2[xm], p2[x], p2[xp])
    for (; x < ia; x++) o[x] = GEN(CL(x - 1), CL(x + 1));
    for (; x < ib; x++) o[x] = GEN(x - 1, x + 1);
    for (; x < r.x1; x++) o[x] = GEN(CL(x - 1), CL(x + 1));
#undef GEN
#undef CL
  }
}

void ts__pipe_life_build(ts_pipe_app *app) {
  ts_pipe_desc *d = &app->desc;
  static const char *const names[4] = {"gen0", "gen1", "gen2", "gen3"};
  /* flops: 7 adds, 3 compares */
  for (int s = 0; s < 4; s++) {
    int k = ts__pipe_add_stage(d, names[s], 0, 1, k_gen, app, 10);
    ts__pipe_add_input(d, k, s == 0 ? TS_PIPE_FEEDBACK : s - 1, 1);
  }
}

ts_status ts__pipe_life_ref(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  int w = app->w, h = app->h;
  int64_t n = (int64_t)w * h;
  float *pl[2];
  int64_t sz[2] = {n, n};
  ts_status st = ts__pipe_ref_alloc(pl, sz, 2);
  if (st != TS_OK) return st;
  float *u = pl[0], *v = pl[1];
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) u[(int64_t)y * w + x] = prev ? prev[(int64_t)y * w + x] : initial(app->seed, x, y);
  for (int g = 0; g < 4; g++) {
    float *dst = g == 3 ? out : v;
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        float cnt = 0.0f;
        int first = 1;
        for (int j = -1; j <= 1; j++)
          for (int i = -1; i <= 1; i++) {
            if (!i && !j) continue;
            float q = ts__pipe_at(u, w, h, x + i, y + j);
            cnt = first ? q : cnt + q;
            first = 0;
          }
        float c = u[(int64_t)y * w + x];
        dst[(int64_t)y * w + x] = (cnt == 3.0f || (cnt == 2.0f && c != 0.0f)) ? 1.0f : 0.0f;
      }
    float *t = u;
    u = v;
    v = t;
  }
  ts__pipe_ref_free(pl, 2);
  (void)frame;
  return TS_OK;
}
