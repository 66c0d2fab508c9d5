/* The pipeline's CUDA executor: its task graph, its device code on the CPU, and the GPU run.
 *
 *   (1) graph: ts__pd_graph_build on random pipelines (1..6 stages over levels 0..3, 0..3 inputs
 *       with halos 0..3, feedback inputs, domains 1..40 a side, tiles 1..24 (half of them 1..6),
 *       1..3 frames) against a brute force written apart: every consumer tile's counter = the
 *       producer tiles (of all the producer's tiles) whose rectangle meets the input span, and
 *       every producer's consumer list = exactly the consumers that counted it, as often as they
 *       counted it; the tasks per frame equal the CPU runtime's (ts_pipe_run's tasks_expected).
 *   (2) emulation: ts__pd_run (the host code of ts_pipe_cuda_run) on the CPU back end of
 *       pipe_emu.cpp (blocks = threads, a block's threads = fibers) for heat, life and edge at
 *       1x1, 13x7 and 64x40 with several tiles, queues (global; sharded with stealing), frames per
 *       launch, block counts and sizes, 3 frames each, then 150 random configurations (jitter,
 *       negative frame numbers, feedback0), planes poisoned with NaN: every frame reaches the sink
 *       once and in order, bit-identical to ts_pipe_app_reference chained over the frames; every
 *       task ran exactly once; every queue slot pushed was popped; the outstanding and per-frame
 *       counters reached 0 (termination by the counter). A tampered graph (a task released
 *       early; a counter that never reaches 0) must show as wrong output and as a stall error.
 *   (3) GPU: the same checks through ts_pipe_cuda_run, plus larger frames, where a device exists;
 *       otherwise "SKIPPED (part): no CUDA device" and the API must say so (TS_ERR_UNSUPPORTED). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/pipe_cuda_internal.h"
#include "tessera/pipe_cuda.h"
#include "tst.h"

/* pipe_emu.cpp */
void ts__pd_emu_ops(ts__pd_ops *ops, int blocks, int threads, int group, uint64_t jitter_seed);

/* ---- (1) the graph against brute force ---------------------------------------------------- */

static void k_zero(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                   const void *params) {
  for (int c = 0; c < out->c; c++)
    for (int y = r.y0; y < r.y1; y++)
      for (int x = r.x0; x < r.x1; x++) out->data[c * out->plane + y * out->row + x] = 0.0f;
}

static int rnd(ts_rng *r, int lo, int hi) { return lo + (int)ts_rng_below(r, (uint64_t)(hi - lo + 1)); }

static void random_desc(ts_rng *r, ts_pipe_desc *d) {
  memset(d, 0, sizeof *d);
  d->name = "random";
  d->width = rnd(r, 1, 40);
  d->height = rnd(r, 1, 40);
  d->nstages = rnd(r, 1, 6);
  for (int s = 0; s < d->nstages; s++) {
    ts_pipe_stage *st = &d->stage[s];
    st->name = "s";
    st->channels = rnd(r, 1, 2);
    st->run = k_zero;
    st->level = s == 0 ? rnd(r, 0, 2) : d->stage[rnd(r, 0, s - 1)].level + rnd(r, -1, 1);
    if (st->level < 0) st->level = 0;
    if (st->level > 3) st->level = 3;
    int want = s == 0 ? 0 : rnd(r, 0, 3);
    for (int k = 0; k < want; k++) {
      int j = rnd(r, 0, s - 1), dl = d->stage[j].level - st->level;
      if (dl < -1 || dl > 1) continue;
      st->in[st->nin].from = j;
      st->in[st->nin].halo = rnd(r, 0, 3);
      st->nin++;
    }
  }
  /* feedback inputs, from the last stage: readers within one level of it */
  int ll = d->stage[d->nstages - 1].level;
  for (int s = 0; s < d->nstages; s++) {
    ts_pipe_stage *st = &d->stage[s];
    int dl = st->level - ll;
    if (st->nin < TS_PIPE_MAX_IN && dl >= -1 && dl <= 1 && rnd(r, 0, 2) == 0) {
      st->in[st->nin].from = TS_PIPE_FEEDBACK;
      st->in[st->nin].halo = rnd(r, 0, 3);
      st->nin++;
    }
  }
}

/* A stage's grid, computed here from the rule (tile >> level, at least 1). */
typedef struct bgrid {
  int tw, th, nx, ny, w, h, base;
} bgrid;

typedef struct edge {
  int32_t p, c;
} edge;

static int edge_cmp(const void *a, const void *b) {
  const edge *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? -1 : 1;
  return (x->c > y->c) - (x->c < y->c);
}

static void check_graph(const ts_pipe_desc *d, int frames, int tw, int th, const char *what) {
  ts__pd_graph g;
  ts_status st = ts__pd_graph_build(d, frames, tw, th, &g);
  CHECK(st == TS_OK, "%s: build: %s", what, ts_last_error());
  if (st != TS_OK) return;
  bgrid bg[TS_PIPE_MAX_STAGES];
  int per = 0;
  for (int s = 0; s < d->nstages; s++) {
    int lv = d->stage[s].level;
    bg[s].tw = tw >> lv > 0 ? tw >> lv : 1;
    bg[s].th = th >> lv > 0 ? th >> lv : 1;
    ts_pipe_stage_size(d, s, &bg[s].w, &bg[s].h);
    bg[s].nx = (bg[s].w + bg[s].tw - 1) / bg[s].tw;
    bg[s].ny = (bg[s].h + bg[s].th - 1) / bg[s].th;
    bg[s].base = per;
    per += bg[s].nx * bg[s].ny;
  }
  CHECK(g.per_frame == per && g.n == per * frames, "%s: %d tasks per frame, brute force %d", what, g.per_frame, per);
  if (g.per_frame != per) {
    ts__pd_graph_free(&g);
    return;
  }
  int64_t cap = 1024, ne = 0, cnt_bad = 0, rect_bad = 0;
  edge *E = malloc((size_t)cap * sizeof *E);
  int last = d->nstages - 1;
  for (int f = 0; f < frames; f++)
    for (int s = 0; s < d->nstages; s++)
      for (int t = 0; t < bg[s].nx * bg[s].ny; t++) {
        int32_t c = f * per + bg[s].base + t;
        int x0 = (t % bg[s].nx) * bg[s].tw, y0 = (t / bg[s].nx) * bg[s].th;
        int x1 = x0 + bg[s].tw < bg[s].w ? x0 + bg[s].tw : bg[s].w,
            y1 = y0 + bg[s].th < bg[s].h ? y0 + bg[s].th : bg[s].h;
        const ts__pd_task *k = &g.task[c];
        rect_bad += k->frame != f || k->stage != s || k->x0 != x0 || k->y0 != y0 || k->x1 != x1 || k->y1 != y1;
        int32_t count = 0;
        for (int i = 0; i < d->stage[s].nin; i++) {
          int j = d->stage[s].in[i].from, pf = f;
          if (j == TS_PIPE_FEEDBACK) {
            if (f == 0) continue;
            j = last, pf = f - 1;
          }
          int xlo, xhi, ylo, yhi;
          ts_pipe_input_span(d->stage[s].level, d->stage[j].level, d->stage[s].in[i].halo, bg[j].w, x0, x1, &xlo, &xhi);
          ts_pipe_input_span(d->stage[s].level, d->stage[j].level, d->stage[s].in[i].halo, bg[j].h, y0, y1, &ylo, &yhi);
          for (int pt = 0; pt < bg[j].nx * bg[j].ny; pt++) {
            int px0 = (pt % bg[j].nx) * bg[j].tw, py0 = (pt / bg[j].nx) * bg[j].th;
            int px1 = px0 + bg[j].tw, py1 = py0 + bg[j].th; /* clipping cannot matter: spans are inside */
            if (px0 > xhi || px1 <= xlo || py0 > yhi || py1 <= ylo) continue;
            count++;
            if (ne == cap) E = realloc(E, (size_t)(cap *= 2) * sizeof *E);
            E[ne].p = pf * per + bg[j].base + pt;
            E[ne].c = c;
            ne++;
          }
        }
        cnt_bad += g.cnt0[c] != count;
      }
  CHECK(rect_bad == 0, "%s: %lld task records differ from the grid", what, (long long)rect_bad);
  CHECK(cnt_bad == 0, "%s: %lld counters differ from brute force", what, (long long)cnt_bad);
  qsort(E, (size_t)ne, sizeof *E, edge_cmp);
  int64_t edge_bad = g.off[g.n] != ne, k = 0;
  for (int32_t p = 0; p < g.n && !edge_bad; p++)
    for (int64_t e = g.off[p]; e < g.off[p + 1]; e++, k++)
      if (k >= ne || E[k].p != p || E[k].c != g.cons[e]) edge_bad++;
  CHECK(edge_bad == 0, "%s: consumer lists differ from brute force (%lld edges, brute force %lld)", what,
        (long long)g.off[g.n], (long long)ne);
  int64_t ready = 0;
  for (int32_t i = 0; i < g.n; i++) ready += g.cnt0[i] == 0;
  CHECK(ready == g.nready && ready > 0, "%s: %lld ready tasks, graph says %d", what, (long long)ready, g.nready);
  free(E);
  ts__pd_graph_free(&g);
}

static void test_graph(void) {
  ts_rng r;
  ts_rng_seed(&r, 0x9a9b);
  for (int it = 0; it < 300; it++) {
    ts_pipe_desc d;
    random_desc(&r, &d);
    int small = it % 2 == 0; /* half with tiles of a few pixels: many tiles, long consumer lists */
    int frames = rnd(&r, 1, 3), tw = rnd(&r, 1, small ? 6 : 24), th = rnd(&r, 1, small ? 6 : 24);
    char what[96];
    snprintf(what, sizeof what, "graph #%d (%dx%d, %d stages, tile %dx%d, %d frames)", it, d.width, d.height, d.nstages,
             tw, th, frames);
    check_graph(&d, frames, tw, th, what);
    if (it % 10 == 0) { /* the CPU runtime's grid at the same tile */
      ts_pipe_opts o = ts_pipe_opts_default();
      o.threads = 1;
      o.frames = frames;
      o.inflight = 1;
      o.gran = TS_PIPE_GRAN_FIXED;
      o.tile_w = tw;
      o.tile_h = th;
      ts_pipe_report *rep = NULL;
      ts__pd_graph g;
      CHECK_OK(ts_pipe_run(&d, &o, &rep));
      CHECK_OK(ts__pd_graph_build(&d, frames, tw, th, &g));
      if (rep)
        CHECK(rep->tasks_expected == g.n, "%s: CPU runtime %lld tasks, graph %d", what, (long long)rep->tasks_expected,
              g.n);
      ts_pipe_report_free(rep);
      ts__pd_graph_free(&g);
    }
  }
  /* the apps' own pipelines */
  const char *apps[] = {"heat", "life", "edge", "flow", "isp", "cnn"};
  for (int a = 0; a < 6; a++) {
    ts_pipe_app *app;
    CHECK_OK(ts_pipe_app_create(apps[a], 37, 21, &app));
    char what[64];
    snprintf(what, sizeof what, "graph %s 37x21", apps[a]);
    check_graph(ts_pipe_app_desc(app), 3, 8, 4, what);
    ts_pipe_app_destroy(app);
  }
}

/* ---- (2)/(3) runs against the reference ------------------------------------------------------ */

typedef struct sink_state {
  int64_t frame0, frames, next;
  size_t n;          /* floats per frame */
  float *got;        /* [frames][n] */
  int64_t bad_order; /* frames delivered out of order or twice */
} sink_state;

static void sink(int64_t frame, const ts_pipe_buf *out, void *user) {
  sink_state *s = user;
  int64_t f = frame - s->frame0;
  if (f != s->next || f < 0 || f >= s->frames) {
    s->bad_order++;
    return;
  }
  s->next++;
  size_t n = (size_t)out->w * out->h;
  for (int c = 0; c < out->c; c++)
    memcpy(s->got + (size_t)f * s->n + c * n, out->data + c * out->plane, n * sizeof(float));
}

typedef struct rcase {
  const char *app;
  int w, h, tw, th; /* tw 0: the default tile */
  ts_pipe_queue q;
  int inflight, blocks, threads, group;
  uint64_t jitter;
  int64_t frame0;
  bool feedback0;
  int frames;
} rcase;

/* Runs c on ops (NULL: the GPU through ts_pipe_cuda_run) and checks it. */
static void check_run(const rcase *c, const ts__pd_ops *ops) {
  char what[192];
  snprintf(what, sizeof what, "%s %s %dx%d tile %dx%d %s inflight %d, %d blocks x %d, frames %lld..%lld%s%s",
           ops ? "emulated" : "GPU", c->app, c->w, c->h, c->tw, c->th, c->q == TS_PIPE_Q_SHARDED ? "sharded" : "global",
           c->inflight, c->blocks, c->threads, (long long)c->frame0, (long long)(c->frame0 + c->frames - 1),
           c->jitter ? " jitter" : "", c->feedback0 ? " feedback0" : "");
  ts_pipe_app *app;
  CHECK_OK(ts_pipe_app_create(c->app, c->w, c->h, &app));
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  int last = d->nstages - 1, lw, lh;
  ts_pipe_stage_size(d, last, &lw, &lh);
  size_t n = (size_t)lw * lh * d->stage[last].channels;
  int frames = c->frames;

  /* the reference, chained; feedback0 (when asked) is the reference of a frame before frame0 */
  float *init = malloc(n * sizeof(float)), *ref = malloc((size_t)frames * n * sizeof(float));
  if (c->feedback0) CHECK_OK(ts_pipe_app_reference(app, c->frame0 - 7, NULL, init));
  for (int f = 0; f < frames; f++) {
    const float *prev = f > 0 ? ref + (size_t)(f - 1) * n : (c->feedback0 ? init : NULL);
    CHECK_OK(ts_pipe_app_reference(app, c->frame0 + f, prev, ref + (size_t)f * n));
  }

  sink_state ss = {c->frame0, frames, 0, n, malloc((size_t)frames * n * sizeof(float)), 0};
  for (size_t i = 0; i < (size_t)frames * n; i++) ss.got[i] = -1.0f;
  ts_pipe_buf fb0 = {init, lw, lh, d->stage[last].channels, lw, (int64_t)lw * lh};
  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = frames;
  o.frame0 = c->frame0;
  o.inflight = c->inflight;
  o.queue = c->q;
  o.gran = c->tw ? TS_PIPE_GRAN_FIXED : TS_PIPE_GRAN_AUTO;
  o.tile_w = c->tw;
  o.tile_h = c->th;
  o.threads = c->blocks;
  o.poison = true;
  o.sink = sink;
  o.sink_user = &ss;
  o.feedback0 = c->feedback0 ? &fb0 : NULL;
  ts_pipe_report *rep = NULL;
  ts__pd_check chk;
  memset(&chk, 0, sizeof chk);
  ts_status st =
      ops ? ts__pd_run(ops, c->app, c->w, c->h, &o, &rep, &chk) : ts_pipe_cuda_run(c->app, c->w, c->h, &o, &rep);
  CHECK(st == TS_OK, "%s: %s: %s", what, ts_strerror(st), ts_last_error());
  if (st == TS_OK) {
    CHECK(ss.next == frames && ss.bad_order == 0, "%s: %lld of %d frames reached the sink in order (%lld out of order)",
          what, (long long)ss.next, frames, (long long)ss.bad_order);
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < (size_t)frames * n; i++)
      if (memcmp(&ss.got[i], &ref[i], sizeof(float)) != 0) {
        if (first < 0) first = (int64_t)i;
        bad++;
      }
    CHECK(bad == 0, "%s: %lld values differ from the reference (first: frame %lld index %lld: %.9g, reference %.9g)",
          what, (long long)bad, first >= 0 ? (long long)(first / (int64_t)n) : -1LL,
          first >= 0 ? (long long)(first % (int64_t)n) : -1LL, first >= 0 ? ss.got[first] : 0.0,
          first >= 0 ? ref[first] : 0.0);
    CHECK(rep && rep->tasks == rep->tasks_expected && rep->frames == frames,
          "%s: report: %lld tasks run, %lld expected, %lld frames", what, rep ? (long long)rep->tasks : -1LL,
          rep ? (long long)rep->tasks_expected : -1LL, rep ? (long long)rep->frames : -1LL);
    if (ops) {
      CHECK(chk.runs_bad == 0, "%s: %lld tasks did not run exactly once", what, (long long)chk.runs_bad);
      CHECK(chk.tasks == rep->tasks_expected && chk.pushed == chk.tasks && chk.popped == chk.tasks,
            "%s: %lld tasks, %lld pushed (the host's %lld included), %lld popped", what, (long long)chk.tasks,
            (long long)chk.pushed, (long long)chk.initial, (long long)chk.popped);
      CHECK(chk.outstanding_left == 0 && chk.frames_left == 0, "%s: outstanding %lld, frames not counted down %lld",
            what, (long long)chk.outstanding_left, (long long)chk.frames_left);
    }
  }
  ts_pipe_report_free(rep);
  free(ss.got);
  free(init);
  free(ref);
  ts_pipe_app_destroy(app);
}

static int64_t total_steals;

static void test_emulation(void) {
  static const int sizes[3][2] = {{1, 1}, {13, 7}, {64, 40}};
  static const int tiles[4][2] = {{0, 0}, {5, 3}, {16, 8}, {1, 1}};
  static const char *const apps[3] = {"heat", "life", "edge"};
  int k = 0;
  for (int a = 0; a < 3; a++)
    for (int si = 0; si < 3; si++)
      for (int ti = 0; ti < 4; ti++) {
        if (ti == 3 && si == 2) continue; /* 1x1 tiles at 64x40: 38k tasks of one pixel, slow on fibers */
        rcase c = {.app = apps[a], .w = sizes[si][0], .h = sizes[si][1], .tw = tiles[ti][0], .th = tiles[ti][1],
                   .q = (k & 1) ? TS_PIPE_Q_SHARDED : TS_PIPE_Q_MPMC, .inflight = 1 + k % 3, .blocks = 4,
                   .threads = 32, .group = 1 + (k >> 1) % 2, .jitter = (k % 4 == 3) ? 0x51u + (uint64_t)k : 0,
                   .frame0 = k % 5 == 2 ? 11 : 0, .frames = 3};
        if (k % 7 == 5) c.blocks = 1, c.threads = 48; /* one block: tasks strictly one after another */
        if (k % 7 == 6) c.blocks = 7, c.threads = 1;  /* one thread per block: no striding */
        if (k % 11 == 4 && strcmp(c.app, "edge") != 0) c.feedback0 = true;
        ts__pd_ops ops;
        ts__pd_emu_ops(&ops, c.blocks, c.threads, c.group, c.jitter);
        check_run(&c, &ops);
        k++;
      }
  /* contention: many blocks, sharded with one block per queue (stealing everywhere) and global */
  for (int q = 0; q < 2; q++) {
    rcase c = {.app = "heat", .w = 64, .h = 40, .tw = 8, .th = 4, .q = q ? TS_PIPE_Q_SHARDED : TS_PIPE_Q_MPMC,
               .inflight = 3, .blocks = 8, .threads = 16, .group = 1, .jitter = 0x77, .frames = 6};
    ts__pd_ops ops;
    ts__pd_emu_ops(&ops, c.blocks, c.threads, c.group, c.jitter);
    check_run(&c, &ops);
  }
  printf("emulation: %d runs\n", k + 2);
}

/* Random configurations, jitter in most: sizes, tiles, queues, frames per launch, blocks, block
 * sizes (1 thread up to 64), queue groups, frame numbers (negative, and across the scenes' 2^20
 * wrap), feedback0. Tiles are kept to a few hundred per stage so the fibers stay fast. */
static void test_random_runs(void) {
  static const char *const apps[3] = {"heat", "life", "edge"};
  static const int threads[5] = {1, 7, 32, 33, 64};
  static const int64_t frame0s[4] = {0, -3, 41, (1 << 20) - 2};
  ts_rng r;
  ts_rng_seed(&r, 0x5eed);
  for (int it = 0; it < 150; it++) {
    rcase c;
    memset(&c, 0, sizeof c);
    c.app = apps[rnd(&r, 0, 2)];
    c.w = rnd(&r, 1, 64);
    c.h = rnd(&r, 1, 40);
    if (rnd(&r, 0, 4)) {
      c.tw = rnd(&r, 1, 20);
      c.th = rnd(&r, 1, 12);
      while ((int64_t)((c.w + c.tw - 1) / c.tw) * ((c.h + c.th - 1) / c.th) > 300) c.tw++, c.th++;
    }
    c.q = rnd(&r, 0, 1) ? TS_PIPE_Q_SHARDED : TS_PIPE_Q_MPMC;
    c.inflight = rnd(&r, 1, 4);
    c.blocks = rnd(&r, 1, 8);
    c.threads = threads[rnd(&r, 0, 4)];
    c.group = rnd(&r, 1, 3);
    c.jitter = rnd(&r, 0, 3) ? ts_rng_next(&r) | 1 : 0;
    c.frame0 = frame0s[rnd(&r, 0, 3)];
    c.feedback0 = strcmp(c.app, "edge") != 0 && rnd(&r, 0, 3) == 0;
    c.frames = rnd(&r, 1, 5);
    ts__pd_ops ops;
    ts__pd_emu_ops(&ops, c.blocks, c.threads, c.group, c.jitter);
    check_run(&c, &ops);
  }
}

/* Steals happen: a sharded run whose ready tasks all start in one queue (one frame, a source
 * stage) must take some from other queues. */
static void test_stealing(void) {
  ts__pd_ops ops;
  ts__pd_emu_ops(&ops, 4, 8, 1, 0x99);
  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = 2;
  o.queue = TS_PIPE_Q_SHARDED;
  o.gran = TS_PIPE_GRAN_FIXED;
  o.tile_w = 4;
  o.tile_h = 4;
  ts_pipe_report *rep = NULL;
  ts__pd_check chk;
  memset(&chk, 0, sizeof chk);
  CHECK_OK(ts__pd_run(&ops, "edge", 48, 32, &o, &rep, &chk));
  if (rep) {
    int64_t steals = 0, att = 0;
    for (int b = 0; b < rep->threads; b++) steals += rep->worker[b].steals, att += rep->worker[b].steal_attempts;
    CHECK(steals == chk.steals && att >= steals, "stealing: report %lld steals, launches %lld", (long long)steals,
          (long long)chk.steals);
    total_steals = steals;
    printf("sharded edge 48x32, 4 blocks, 4 queues: %lld tasks, %lld steals of %lld attempts\n", (long long)rep->tasks,
           (long long)steals, (long long)att);
  }
  ts_pipe_report_free(rep);
}

/* The checks above must see a broken dependence: a task released before its producers (its
 * counter zeroed: it reads NaN-poisoned planes, with one block strictly before them) gives wrong
 * output, and a counter that never reaches zero stops the launch by the stall limit with an error
 * instead of hanging. */
static void tamper_early(ts__pd_graph *g, void *user) {
  (void)user;
  for (int32_t i = 0; i < g->n; i++)
    if (g->task[i].stage == 2 &&
        g->cnt0[i] > 0) { /* the first tile of the third stage: queued behind the first stage only */
      g->cnt0[i] = 0;
      return;
    }
}

static void tamper_never(ts__pd_graph *g, void *user) {
  (void)user;
  g->cnt0[g->n - 1]++; /* the last frame's last tile */
}

static void test_tamper(void) {
  ts__pd_ops ops;
  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = 2;
  o.gran = TS_PIPE_GRAN_FIXED;
  o.tile_w = 8;
  o.tile_h = 4;
  o.queue = TS_PIPE_Q_MPMC;
  o.poison = true;
  ts_pipe_app *app;
  CHECK_OK(ts_pipe_app_create("heat", 32, 16, &app));
  float ref[32 * 16], r0[32 * 16];
  CHECK_OK(ts_pipe_app_reference(app, 0, NULL, r0));
  CHECK_OK(ts_pipe_app_reference(app, 1, r0, ref));
  sink_state ss = {0, 2, 0, 32 * 16, malloc(2 * 32 * 16 * sizeof(float)), 0};
  o.sink = sink;
  o.sink_user = &ss;
  ts__pd_emu_ops(&ops, 1, 8, 1, 0);
  ops.tamper = tamper_early;
  CHECK_OK(ts__pd_run(&ops, "heat", 32, 16, &o, NULL, NULL));
  int64_t bad = 0;
  for (int i = 0; i < 32 * 16; i++) bad += memcmp(&ss.got[32 * 16 + i], &ref[i], sizeof(float)) != 0;
  CHECK(bad > 0, "a task released before its producers went unnoticed");
  printf("tampered: a task released early: %lld of %d values wrong\n", (long long)bad, 32 * 16);

  ts__pd_emu_ops(&ops, 3, 8, 1, 0);
  ops.tamper = tamper_never;
  ops.stall_ns = 200000000; /* 0.2 s */
  ss.next = 0;
  double t0 = ts_now();
  CHECK_ERR_CONTAINS(ts__pd_run(&ops, "heat", 32, 16, &o, NULL, NULL), "stalled");
  printf("tampered: a counter that never reaches 0: stopped after %.2f s: %s\n", ts_now() - t0, ts_last_error());
  free(ss.got);
  ts_pipe_app_destroy(app);
}

static void test_api(void) {
  ts_pipe_opts o = ts_pipe_opts_default();
  CHECK_STATUS(ts_pipe_cuda_run("isp", 16, 16, &o, NULL), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_pipe_cuda_run("nope", 16, 16, &o, NULL), TS_ERR_NOT_FOUND);
  o.queue = TS_PIPE_Q_LOCKED;
  CHECK_STATUS(ts_pipe_cuda_run("heat", 16, 16, &o, NULL), TS_ERR_UNSUPPORTED);
  o = ts_pipe_opts_default();
  o.copy = TS_PIPE_COPY_LAZY;
  CHECK_STATUS(ts_pipe_cuda_run("heat", 16, 16, &o, NULL), TS_ERR_UNSUPPORTED);
  o = ts_pipe_opts_default();
  o.frames = 0;
  CHECK_STATUS(ts_pipe_cuda_run("heat", 16, 16, &o, NULL), TS_ERR_INVALID_ARG);
  o = ts_pipe_opts_default();
  o.gran = TS_PIPE_GRAN_FIXED; /* without a tile */
  CHECK_STATUS(ts_pipe_cuda_run("life", 16, 16, &o, NULL), TS_ERR_INVALID_ARG);
  const char *const *names = ts_pipe_cuda_app_names();
  int n = 0;
  while (names[n]) n++;
  CHECK(n == 3, "%d device apps", n);
}

static void test_gpu(void) {
  if (!ts_pipe_cuda_available()) {
    ts_pipe_opts o = ts_pipe_opts_default();
    CHECK_ERR_CONTAINS(ts_pipe_cuda_run("heat", 16, 16, &o, NULL), "no CUDA device");
    tst_skip_part("no CUDA device: the GPU part");
    return;
  }
  static const char *const apps[3] = {"heat", "life", "edge"};
  static const int sizes[4][2] = {{1, 1}, {13, 7}, {64, 40}, {1024, 768}};
  static const int tiles[3][2] = {{0, 0}, {5, 3}, {32, 8}};
  int k = 0;
  for (int a = 0; a < 3; a++)
    for (int si = 0; si < 4; si++)
      for (int ti = 0; ti < 3; ti++)
        for (int q = 0; q < 2; q++, k++) {
          rcase c = {.app = apps[a], .w = sizes[si][0], .h = sizes[si][1], .tw = tiles[ti][0], .th = tiles[ti][1],
                     .q = q ? TS_PIPE_Q_SHARDED : TS_PIPE_Q_MPMC, .inflight = 1 + k % 4,
                     .frame0 = k % 5 == 2 ? 11 : 0, .feedback0 = k % 7 == 3 && a < 2, .frames = si == 3 ? 8 : 3};
          check_run(&c, NULL);
        }
  /* a report from a larger run */
  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = 16;
  o.inflight = 4;
  ts_pipe_report *rep = NULL;
  CHECK_OK(ts_pipe_cuda_run("heat", 4096, 4096, &o, &rep));
  if (rep)
    printf("GPU heat 4096x4096 x16, tile 64x16, %d blocks: %.1f Mpx/s, %lld tasks\n", rep->threads, rep->mpix_per_s,
           (long long)rep->tasks);
  ts_pipe_report_free(rep);
  printf("GPU: %d runs\n", k);
}

int main(void) {
  double t0 = ts_now();
  test_graph();
  double t1 = ts_now();
  test_api();
  test_emulation();
  test_random_runs();
  test_stealing();
  test_tamper();
  double t2 = ts_now();
  test_gpu();
  printf("graph %.2f s, emulation %.2f s, GPU part %.2f s\n", t1 - t0, t2 - t1, ts_now() - t2);
  (void)total_steals;
  return tst_finish();
}
