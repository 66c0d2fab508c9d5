/* The termination stress test (HiWayLib's end-of-pipeline detection, checked): randomized runs of
 * a counting pipeline under injected delays and worker stalls; every (frame, stage, pixel) result
 * must be computed exactly once, every frame delivered once, and the output must equal a
 * sequential whole-plane run. */
#include <stdlib.h>
#include <string.h>

#include "pipe/pipe_internal.h"

#define NS 5
#define MOD 4093

typedef struct probe {
  _Atomic uint32_t *visits[NS]; /* [frames][h][w] per stage */
  int64_t frame0, frames;
  int w[NS], h[NS];
  int stage;
} probe;

typedef struct probe_params {
  probe *p;
  int stage;
} probe_params;

static int clampi(int v, int n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }
static float at(const ts_pipe_buf *b, int x, int y) { return b->data[(int64_t)clampi(y, b->h) * b->row + clampi(x, b->w)]; }
static float modf_(float v) { return (float)((int)v % MOD); }

static void count(const void *params, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame) {
  const probe_params *pp = params;
  probe *p = pp->p;
  if (!p) return;
  int s = pp->stage;
  _Atomic uint32_t *v = p->visits[s] + (frame - p->frame0) * (int64_t)out->w * out->h;
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++) atomic_fetch_add_explicit(&v[(int64_t)y * out->w + x], 1, memory_order_relaxed);
}

static void k_source(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame, const void *pa) {
  (void)in;
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++) out->data[(int64_t)y * out->row + x] = (float)((x * 7 + y * 13 + frame * 5) % 97);
  count(pa, out, r, frame);
}

static void k_box(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame, const void *pa) {
  const ts_pipe_buf *a = in[0];
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++) {
      float s = 0;
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) s += at(a, x + dx, y + dy);
      out->data[(int64_t)y * out->row + x] = modf_(s);
    }
  count(pa, out, r, frame);
}

static void k_down(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame, const void *pa) {
  const ts_pipe_buf *a = in[0];
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++)
      out->data[(int64_t)y * out->row + x] =
          at(a, 2 * x, 2 * y) + at(a, 2 * x + 1, 2 * y) + at(a, 2 * x, 2 * y + 1) + at(a, 2 * x + 1, 2 * y + 1) + 1;
  count(pa, out, r, frame);
}

static void k_up(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame, const void *pa) {
  const ts_pipe_buf *c = in[0], *f = in[1];
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++) {
      float s = 0;
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) s += at(c, x / 2 + dx, y / 2 + dy);
      out->data[(int64_t)y * out->row + x] = modf_(s + at(f, x, y));
    }
  count(pa, out, r, frame);
}

static void k_mix(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame, const void *pa) {
  const ts_pipe_buf *a = in[0], *prev = in[1];
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++) {
      float s = at(a, x - 2, y) + at(a, x + 2, y) + at(a, x, y - 2) + at(a, x, y + 2);
      if (prev) s += 3 * at(prev, x + 1, y) + at(prev, x, y - 1);
      out->data[(int64_t)y * out->row + x] = modf_(s);
    }
  count(pa, out, r, frame);
}

/* The counting pipeline over w x h: source -> 3x3 box -> 2x2 down -> up + skip -> mix with the
 * previous frame. params[s] must outlive the description. */
static void probe_desc(ts_pipe_desc *d, int w, int h, probe_params *params) {
  memset(d, 0, sizeof *d);
  d->name = "probe";
  d->width = w;
  d->height = h;
  d->nstages = NS;
  ts_pipe_stage *s = d->stage;
  s[0] = (ts_pipe_stage){.name = "source", .level = 0, .channels = 1, .nin = 0, .run = k_source, .device = 0};
  s[1] = (ts_pipe_stage){.name = "box", .level = 0, .channels = 1, .nin = 1, .in = {{0, 1}}, .run = k_box, .device = 0};
  s[2] = (ts_pipe_stage){.name = "down", .level = 1, .channels = 1, .nin = 1, .in = {{1, 0}}, .run = k_down, .device = 1};
  s[3] = (ts_pipe_stage){
      .name = "up", .level = 0, .channels = 1, .nin = 2, .in = {{2, 1}, {1, 0}}, .run = k_up, .device = 0};
  s[4] = (ts_pipe_stage){.name = "mix",
                         .level = 0,
                         .channels = 1,
                         .nin = 2,
                         .in = {{3, 2}, {TS_PIPE_FEEDBACK, 1}},
                         .run = k_mix,
                         .device = 1};
  for (int i = 0; i < NS; i++) {
    params[i].stage = i;
    s[i].params = &params[i];
    s[i].flops_per_px = 9;
  }
}

typedef struct sinkbuf {
  float *out; /* [frames][h][w] */
  int *calls; /* [frames] */
  int64_t frame0;
  int w, h;
} sinkbuf;

static void sink(int64_t frame, const ts_pipe_buf *b, void *user) {
  sinkbuf *sb = user;
  int64_t f = frame - sb->frame0;
  __atomic_fetch_add(&sb->calls[f], 1, __ATOMIC_RELAXED);
  for (int y = 0; y < b->h; y++) memcpy(sb->out + (f * sb->h + y) * sb->w, b->data + (int64_t)y * b->row, (size_t)b->w * 4);
}

/* Sequential: each stage over its whole plane, frame after frame. ref: [frames][h][w]. */
static ts_status sequential(const ts_pipe_desc *d, int64_t frame0, int64_t frames, float *ref) {
  float *pl[NS] = {0};
  ts_pipe_buf b[NS];
  ts_status st = TS_OK;
  for (int s = 0; s < NS; s++) {
    int w, h;
    ts_pipe_stage_size(d, s, &w, &h);
    b[s] = (ts_pipe_buf){NULL, w, h, 1, w, (int64_t)w * h};
    if (!(pl[s] = malloc((size_t)w * h * sizeof(float)))) st = ts_error(TS_ERR_OOM, "pipe stress: planes");
    b[s].data = pl[s];
  }
  ts_pipe_buf prev = b[NS - 1];
  float *prevdata = malloc((size_t)prev.w * prev.h * sizeof(float));
  if (!prevdata) st = ts_error(TS_ERR_OOM, "pipe stress: planes");
  prev.data = prevdata;
  for (int64_t f = 0; st == TS_OK && f < frames; f++) {
    for (int s = 0; s < NS; s++) {
      const ts_pipe_buf *in[TS_PIPE_MAX_IN];
      for (int i = 0; i < d->stage[s].nin; i++) {
        int j = d->stage[s].in[i].from;
        in[i] = j == TS_PIPE_FEEDBACK ? (f == 0 ? NULL : &prev) : &b[j];
      }
      ts_pipe_rect r = {0, 0, b[s].w, b[s].h};
      d->stage[s].run(in, &b[s], r, frame0 + f, d->stage[s].params);
    }
    size_t n = (size_t)prev.w * prev.h;
    memcpy(prevdata, pl[NS - 1], n * sizeof(float));
    memcpy(ref + (size_t)f * n, pl[NS - 1], n * sizeof(float));
  }
  for (int s = 0; s < NS; s++) free(pl[s]);
  free(prevdata);
  return st;
}

ts_status ts_pipe_stress(int64_t runs, uint64_t seed, int max_threads, void (*progress)(int64_t, void *), void *user,
                         ts_pipe_stress_result *out) {
  if (!out || runs < 0 || max_threads < 1 || max_threads > 64)
    return ts_error(TS_ERR_INVALID_ARG, "ts_pipe_stress: runs %lld, max_threads %d (1..64)", (long long)runs, max_threads);
  memset(out, 0, sizeof *out);
  ts_rng rng;
  ts_rng_seed(&rng, seed);
  double t0 = ts_now();
  for (int64_t run = 0; run < runs; run++) {
    int w = 1 + (int)ts_rng_below(&rng, 48), h = 1 + (int)ts_rng_below(&rng, 48);
    ts_pipe_opts o = ts_pipe_opts_default();
    o.frames = 1 + (int64_t)ts_rng_below(&rng, 6);
    o.frame0 = (int64_t)ts_rng_below(&rng, 100);
    o.inflight = 1 + (int)ts_rng_below(&rng, 3);
    o.threads = 1 + (int)ts_rng_below(&rng, (uint64_t)max_threads);
    o.queue = (ts_pipe_queue)ts_rng_below(&rng, 3);
    o.copy = o.threads >= 2 ? (ts_pipe_copy)ts_rng_below(&rng, 3) : TS_PIPE_COPY_NONE;
    if (ts_rng_below(&rng, 4) == 0) {
      o.gran = TS_PIPE_GRAN_AUTO;
    } else {
      o.gran = TS_PIPE_GRAN_FIXED;
      o.tile_w = 1 + (int)ts_rng_below(&rng, 20);
      o.tile_h = 1 + (int)ts_rng_below(&rng, 20);
    }
    o.poison = ts_rng_below(&rng, 2) == 0;
    o.stress_seed = ts_rng_next(&rng) | 1;

    probe pr;
    memset(&pr, 0, sizeof pr);
    probe_params params[NS];
    ts_pipe_desc d;
    probe_desc(&d, w, h, params);
    for (int s = 0; s < NS; s++) params[s].p = NULL; /* the sequential run counts nothing */
    int lw, lh;
    ts_pipe_stage_size(&d, NS - 1, &lw, &lh);
    size_t n = (size_t)lw * lh * (size_t)o.frames;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    int *calls = calloc((size_t)o.frames, sizeof(int));
    bool ok = ref && got && calls;
    for (int s = 0; s < NS && ok; s++) {
      ts_pipe_stage_size(&d, s, &pr.w[s], &pr.h[s]);
      pr.visits[s] = calloc((size_t)pr.w[s] * pr.h[s] * (size_t)o.frames, sizeof(_Atomic uint32_t));
      ok = pr.visits[s] != NULL;
    }
    ts_status st = ok ? sequential(&d, o.frame0, o.frames, ref) : ts_error(TS_ERR_OOM, "pipe stress: run %lld", (long long)run);
    if (st == TS_OK) {
      pr.frame0 = o.frame0;
      pr.frames = o.frames;
      for (int s = 0; s < NS; s++) params[s].p = &pr;
      sinkbuf sb = {got, calls, o.frame0, lw, lh};
      o.sink = sink;
      o.sink_user = &sb;
      ts_pipe_report *rep = NULL;
      ts_status rs = ts_pipe_run(&d, &o, &rep);
      if (rs != TS_OK) {
        out->failed_runs++;
      } else {
        out->tasks += rep->tasks;
        for (int s = 0; s < NS; s++) {
          size_t m = (size_t)pr.w[s] * pr.h[s] * (size_t)o.frames;
          for (size_t i = 0; i < m; i++) {
            uint32_t v = atomic_load(&pr.visits[s][i]);
            out->lost += v == 0;
            out->duplicated += v > 1;
          }
          out->pixels += (int64_t)m;
        }
        for (int64_t f = 0; f < o.frames; f++) out->frames_bad += calls[f] != 1;
        if (memcmp(ref, got, n * sizeof(float)) != 0) out->mismatched++;
      }
      ts_pipe_report_free(rep);
    }
    free(ref);
    free(got);
    free(calls);
    for (int s = 0; s < NS; s++) free(pr.visits[s]);
    if (st != TS_OK) return st;
    out->runs++;
    if (progress) progress(run + 1, user);
  }
  out->wall_s = ts_now() - t0;
  return TS_OK;
}
