/* The pipeline runtime: every app under every queue, arena mode, granularity (fixed 1x1 up to the
 * whole frame, and auto) and number of frames in flight gives its reference's output bit for bit
 * with every plane NaN-poisoned first (a missed dependence reads NaN); row shares (the MPI variant's
 * split) stitch to the whole; the termination stress test loses and duplicates nothing; bad
 * descriptions and options are refused with a message; the report's JSON and SVG are written; the
 * offline tuner keeps its result in the artifact store. No timing is asserted. */
#include <stdatomic.h>

#include "tessera/pipe.h"
#include "tst.h"

typedef struct frames_out {
  float *out; /* [frames][n] */
  size_t n;
  int64_t frame0, frames;
  _Atomic int calls[64];
} frames_out;

static void sink(int64_t frame, const ts_pipe_buf *b, void *user) {
  frames_out *fo = user;
  int64_t f = frame - fo->frame0;
  if (f < 0 || f >= fo->frames) return;
  atomic_fetch_add(&fo->calls[f], 1);
  float *o = fo->out + (size_t)f * fo->n;
  for (int c = 0; c < b->c; c++)
    for (int y = 0; y < b->h; y++)
      memcpy(o + ((size_t)c * b->h + y) * b->w, b->data + c * b->plane + (int64_t)y * b->row, (size_t)b->w * sizeof(float));
}

static size_t last_size(const ts_pipe_desc *d) {
  int w, h;
  ts_pipe_stage_size(d, d->nstages - 1, &w, &h);
  return (size_t)w * h * (size_t)d->stage[d->nstages - 1].channels;
}

/* The reference for frames 0..frames-1 of app into ref ([frames][n]). */
static ts_status reference(const ts_pipe_app *app, int64_t frames, size_t n, float *ref) {
  for (int64_t f = 0; f < frames; f++) TS_TRY(ts_pipe_app_reference(app, f, f ? ref + (size_t)(f - 1) * n : NULL, ref + (size_t)f * n));
  return TS_OK;
}

static bool feedback_app(const ts_pipe_desc *d) {
  for (int s = 0; s < d->nstages; s++)
    for (int i = 0; i < d->stage[s].nin; i++)
      if (d->stage[s].in[i].from == TS_PIPE_FEEDBACK) return true;
  return false;
}

static void test_apps_exact(void) {
#if defined(TS_TSAN)
  const int sizes[][2] = {{1, 1}, {7, 5}, {45, 29}, {45, 29}};
#else
  const int sizes[][2] = {{1, 1}, {7, 5}, {45, 29}, {96, 64}};
#endif
  const int tiles[][2] = {{1, 1}, {3, 2}, {8, 8}, {32, 4}, {1000, 1000}};
  const int64_t frames = 3;
  int runs = 0;
  for (const char *const *nm = ts_pipe_app_names(); *nm; nm++)
    for (int si = 0; si < 4; si++) {
      ts_pipe_app *app;
      CHECK_OK(ts_pipe_app_create(*nm, sizes[si][0], sizes[si][1], &app));
      if (!app) continue;
      const ts_pipe_desc *d = ts_pipe_app_desc(app);
      size_t n = last_size(d);
      float *ref = malloc(frames * n * sizeof(float));
      frames_out fo = {malloc(frames * n * sizeof(float)), n, 0, frames, {0}};
      CHECK_OK(reference(app, frames, n, ref));
      for (int q = 0; q < 3; q++)
        for (int cp = 0; cp < 3; cp++)
          for (int ti = 0; ti <= 5; ti++) {
            /* a spread of the combinations, not the whole product (the stress test covers more) */
            if ((q + cp + ti + si) % 2) continue;
            ts_pipe_opts o = ts_pipe_opts_default();
            o.frames = frames;
            o.threads = cp ? 2 + (ti % 2) : 1 + (ti % 3);
            o.queue = (ts_pipe_queue)q;
            o.copy = (ts_pipe_copy)cp;
            o.inflight = 1 + ((q + ti) % 3);
            if (ti == 5) {
              o.gran = TS_PIPE_GRAN_AUTO;
            } else {
              o.gran = TS_PIPE_GRAN_FIXED;
              o.tile_w = tiles[ti][0];
              o.tile_h = tiles[ti][1];
            }
            o.poison = true;
            o.sink = sink;
            o.sink_user = &fo;
            for (int f = 0; f < frames; f++) atomic_store(&fo.calls[f], 0);
            memset(fo.out, 0xff, frames * n * sizeof(float));
            ts_pipe_report *rep = NULL;
            ts_status s = ts_pipe_run(d, &o, &rep);
            CHECK(s == TS_OK, "%s %dx%d q %d copy %d tile %d: %s", *nm, sizes[si][0], sizes[si][1], q, cp, ti,
                  ts_last_error());
            if (s != TS_OK) continue;
            runs++;
            bool once = true;
            for (int f = 0; f < frames; f++) once &= atomic_load(&fo.calls[f]) == 1;
            CHECK(once, "%s: a frame was not delivered exactly once", *nm);
            CHECK(memcmp(ref, fo.out, frames * n * sizeof(float)) == 0,
                  "%s %dx%d queue %s copy %s tile %s%dx%d inflight %d threads %d: output differs from the reference", *nm,
                  sizes[si][0], sizes[si][1], ts_pipe_queue_name(o.queue), ts_pipe_copy_name(o.copy),
                  o.gran == TS_PIPE_GRAN_AUTO ? "auto " : "", o.tile_w, o.tile_h, o.inflight, o.threads);
            CHECK(rep->tasks == rep->tasks_expected, "%s: %lld tasks run, %lld expected", *nm, (long long)rep->tasks,
                  (long long)rep->tasks_expected);
            if (cp == TS_PIPE_COPY_EAGER) CHECK(rep->copies == rep->tasks, "eager: every tile copied once");
            if (cp == TS_PIPE_COPY_LAZY) CHECK(rep->copies <= rep->tasks, "lazy: at most every tile copied");
            ts_pipe_report_free(rep);
          }
      free(ref);
      free(fo.out);
      ts_pipe_app_destroy(app);
    }
  printf("apps: %d runs bit-identical to the references\n", runs);
}

/* Row shares: the last stage's rows split in three runs (each computing only what its rows need,
 * from the previous frame's whole output for a feedback app) stitch to the whole frame. */
static void test_rows(void) {
  for (const char *const *nm = ts_pipe_app_names(); *nm; nm++) {
    ts_pipe_app *app;
    CHECK_OK(ts_pipe_app_create(*nm, 40, 37, &app));
    if (!app) continue;
    const ts_pipe_desc *d = ts_pipe_app_desc(app);
    bool fb = feedback_app(d);
    int lw, lh;
    ts_pipe_stage_size(d, d->nstages - 1, &lw, &lh);
    int C = d->stage[d->nstages - 1].channels;
    size_t n = last_size(d);
    float *ref = malloc(2 * n * sizeof(float)), *got = malloc(n * sizeof(float));
    CHECK_OK(reference(app, 2, n, ref));
    /* frame 1 from frame 0's output (feedback) in three shares */
    ts_pipe_buf prev = {ref, lw, lh, C, lw, (int64_t)lw * lh};
    frames_out fo = {malloc(n * sizeof(float)), n, 1, 1, {0}};
    memset(got, 0, n * sizeof(float));
    int cut[4] = {0, lh / 3, lh / 3 + (lh > 2 ? 1 : 0), lh};
    for (int k = 0; k < 3; k++) {
      if (cut[k + 1] <= cut[k]) continue;
      ts_pipe_opts o = ts_pipe_opts_default();
      o.frames = 1;
      o.frame0 = 1;
      o.threads = 2;
      o.gran = TS_PIPE_GRAN_FIXED;
      o.tile_w = 7;
      o.tile_h = 3;
      o.row0 = cut[k];
      o.row1 = cut[k + 1];
      o.feedback0 = fb ? &prev : NULL;
      o.poison = true;
      o.sink = sink;
      o.sink_user = &fo;
      CHECK_OK(ts_pipe_run(d, &o, NULL));
      for (int c = 0; c < C; c++)
        for (int y = cut[k]; y < cut[k + 1]; y++)
          memcpy(got + ((size_t)c * lh + y) * lw, fo.out + ((size_t)c * lh + y) * lw, (size_t)lw * sizeof(float));
    }
    CHECK(memcmp(got, ref + n, n * sizeof(float)) == 0, "%s: three row shares differ from the whole frame", *nm);
    free(ref);
    free(got);
    free(fo.out);
    ts_pipe_app_destroy(app);
  }
}

static void test_stress(void) {
  ts_pipe_stress_result r;
#if defined(TS_TSAN) || defined(TS_SANITIZE)
  int64_t runs = 200; /* ~10x slower under the sanitizers */
#else
  int64_t runs = 600;
#endif
  CHECK_OK(ts_pipe_stress(runs, 7, 4, NULL, NULL, &r));
  CHECK(r.runs == runs, "stress: %lld of %lld runs", (long long)r.runs, (long long)runs);
  CHECK(r.lost == 0 && r.duplicated == 0, "stress: %lld lost, %lld duplicated of %lld", (long long)r.lost,
        (long long)r.duplicated, (long long)r.pixels);
  CHECK(r.frames_bad == 0 && r.mismatched == 0 && r.failed_runs == 0, "stress: %lld frames bad, %lld runs mismatched, %lld failed",
        (long long)r.frames_bad, (long long)r.mismatched, (long long)r.failed_runs);
  printf("stress: %lld runs, %lld tasks, %lld results, nothing lost or duplicated\n", (long long)r.runs,
         (long long)r.tasks, (long long)r.pixels);
}

static void k_nop(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame, const void *p) {
  (void)in, (void)out, (void)r, (void)frame, (void)p;
}

static void test_errors(void) {
  ts_pipe_desc d;
  memset(&d, 0, sizeof d);
  d.name = "bad";
  d.width = 8, d.height = 8, d.nstages = 2;
  d.stage[0] = (ts_pipe_stage){.name = "a", .level = 0, .channels = 1, .run = k_nop};
  d.stage[1] = (ts_pipe_stage){.name = "b", .level = 0, .channels = 1, .nin = 1, .in = {{0, 1}}, .run = k_nop};
  CHECK_OK(ts_pipe_desc_check(&d));
  ts_pipe_desc e = d;
  e.stage[1].in[0].from = 1;
  CHECK_ERR_CONTAINS(ts_pipe_desc_check(&e), "from 1");
  e = d;
  e.stage[1].level = 2;
  CHECK_ERR_CONTAINS(ts_pipe_desc_check(&e), "differ by more than one");
  e = d;
  e.stage[1].run = NULL;
  CHECK_ERR_CONTAINS(ts_pipe_desc_check(&e), "no kernel");
  e = d;
  e.width = 0;
  CHECK_ERR_CONTAINS(ts_pipe_desc_check(&e), "domain 0x8");
  e = d;
  e.stage[1].in[0].halo = -1;
  CHECK_ERR_CONTAINS(ts_pipe_desc_check(&e), "halo -1");
  e = d;
  e.nstages = 0;
  CHECK_ERR_CONTAINS(ts_pipe_run(&e, NULL, NULL), "0 stages");

  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = 0;
  CHECK_ERR_CONTAINS(ts_pipe_run(&d, &o, NULL), "frames 0");
  o = ts_pipe_opts_default();
  o.gran = TS_PIPE_GRAN_FIXED;
  CHECK_ERR_CONTAINS(ts_pipe_run(&d, &o, NULL), "tile_w, tile_h >= 1");
  o = ts_pipe_opts_default();
  o.copy = TS_PIPE_COPY_LAZY;
  o.threads = 1;
  CHECK_ERR_CONTAINS(ts_pipe_run(&d, &o, NULL), "at least 2 threads");
  o = ts_pipe_opts_default();
  o.row0 = 3, o.row1 = 99;
  CHECK_ERR_CONTAINS(ts_pipe_run(&d, &o, NULL), "rows [3, 99)");
  o = ts_pipe_opts_default();
  o.inflight = 0;
  CHECK_ERR_CONTAINS(ts_pipe_run(&d, &o, NULL), "inflight 0");
  ts_pipe_queue q;
  ts_pipe_copy c;
  CHECK_ERR_CONTAINS(ts_pipe_queue_parse("fifo", &q), "fifo");
  CHECK_ERR_CONTAINS(ts_pipe_copy_parse("never", &c), "never");
  ts_pipe_app *app = NULL;
  CHECK_STATUS(ts_pipe_app_create("nosuch", 8, 8, &app), TS_ERR_NOT_FOUND);
  CHECK_STATUS(ts_pipe_app_create("edge", 0, 8, &app), TS_ERR_INVALID_ARG);
}

static void test_report_and_tune(void) {
  ts_pipe_app *app;
  CHECK_OK(ts_pipe_app_create("edge", 64, 48, &app));
  if (!app) return;
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = 6;
  o.threads = 2;
  o.timeline = true;
  ts_pipe_report *rep = NULL;
  CHECK_OK(ts_pipe_run(d, &o, &rep));
  if (rep) {
    CHECK(rep->nevents == rep->tasks, "timeline: %lld events for %lld tasks", (long long)rep->nevents, (long long)rep->tasks);
    char *js = NULL;
    CHECK_OK(ts_pipe_report_json(rep, &js));
    CHECK(js && strstr(js, "\"granularity_over_frames\"") && strstr(js, "\"workers\""), "report JSON: %s", js ? js : "");
    free(js);
    char path[2048];
    tst_tmp_path(path, sizeof path, "pipe-timeline.svg");
    CHECK_OK(ts_pipe_report_svg(rep, d, path));
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "timeline SVG written");
    if (f) fclose(f);
    for (int64_t i = 0; i < rep->frames; i++)
      CHECK(rep->frame_tile_w[i] >= 1 && rep->frame_tile_h[i] >= 1, "frame %lld has a tile", (long long)i);
    ts_pipe_report_free(rep);
  }
  /* the tuner: measured once, then read back from the store with the same answer */
  o.timeline = false;
  o.frames = 2;
  ts_pipe_tune_result a, b;
  CHECK_OK(ts_pipe_tune(d, &o, true, false, &a));
  CHECK_OK(ts_pipe_tune(d, &o, false, false, &b));
  CHECK(!a.cached && b.cached, "tune: measured (%d), then from the store (%d)", a.cached, b.cached);
  CHECK(a.n == b.n && a.best == b.best && a.n >= 1, "tune: the stored result reads back (%d/%d, best %d/%d)", a.n, b.n,
        a.best, b.best);
  int tw[64], th[64];
  int n = ts_pipe_ladder(64, 48, tw, th, 64);
  CHECK(n == a.n && tw[0] == 32 && th[0] == 2 && tw[n - 1] == 64 && th[n - 1] == 48, "ladder of %d for 64x48", n);
  ts_pipe_app_destroy(app);
}

int main(void) {
  test_errors();
  test_apps_exact();
  test_rows();
  test_stress();
  test_report_and_tune();
  return tst_finish();
}
