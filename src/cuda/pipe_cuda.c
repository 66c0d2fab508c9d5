/* Host side of the pipeline's CUDA executor (include/tessera/pipe_cuda.h): options, the batch
 * loop (graph upload, queue seeding, launch, outputs to the sink, the feedback plane carried to the
 * next launch) and the report, written once over a back end (ts__pd_ops) so the CPU emulation in
 * the tests runs this same code; the CUDA back end at the end.
 *
 * Device memory, one set per run (frames per launch B = min(inflight, frames), N = B x tasks per
 * frame, Q queues, K blocks):
 *   planes   [B][stages' planes] floats (every plane of every frame of the launch: no reuse, so no
 *            frame waits for another's planes, only for its dependences)
 *   prev     the last stage's plane: feedback0, then each launch's last frame (copied device to
 *            device after the launch: the next launch's frame 0 overwrites the planes it reads)
 *   graph    task [N], off [N + 1], cons [edges], cnt [N]
 *   queues   Q queue heads/tails, slots [Q][N]
 *   counts   outstanding, error, runs [N], frame_left [B], frame_t0/t1 [B], bstat [K] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/pipe_cuda_internal.h"
#include "pipe/pipe_apps_internal.h"
#include "tessera/pipe_cuda.h"

#define DEFAULT_TW 64
#define DEFAULT_TH 16

static const char *const dev_app_names[] = {"edge", "heat", "life", NULL};

const char *const *ts_pipe_cuda_app_names(void) { return dev_app_names; }

/* device buffers of one run */
typedef struct dev_bufs {
  float *planes, *prev;
  ts__pd_task *task;
  int64_t *off;
  int32_t *cons, *cnt, *slots, *outstanding, *runs, *frame_left, *error;
  ts__pd_queue *q;
  uint64_t *frame_t0, *frame_t1;
  ts__pd_bstat *bstat;
} dev_bufs;

static ts_status op_fail(const ts__pd_ops *ops, int e, const char *what) {
  return ts_error(TS_ERR_INTERNAL, "pipe cuda (%s): %s: %s", ops->name, what, ops->errstr(e, ops->ctx));
}

static ts_status dalloc(const ts__pd_ops *ops, void **p, size_t bytes, const char *what) {
  *p = NULL;
  int e = ops->alloc(p, bytes ? bytes : 1, ops->ctx);
  if (e) {
    *p = NULL;
    return ts_error(TS_ERR_OOM, "pipe cuda (%s): %zu bytes for %s: %s", ops->name, bytes, what,
                    ops->errstr(e, ops->ctx));
  }
  return TS_OK;
}

#define OP(call, what)                             \
  do {                                             \
    int op__e = (call);                            \
    if (op__e) return op_fail(ops, op__e, (what)); \
  } while (0)

static void dev_free(const ts__pd_ops *ops, dev_bufs *d) {
  void *all[] = {d->planes, d->prev, d->task, d->off, d->cons, d->cnt, d->slots, d->outstanding,
                 d->runs, d->frame_left, d->error, d->q, d->frame_t0, d->frame_t1, d->bstat};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) ops->release(all[i], ops->ctx);
  memset(d, 0, sizeof *d);
}

static ts_status check_opts(const ts_pipe_opts *o) {
  if (o->frames < 1 || o->frames > (1LL << 30))
    return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: frames %lld (1..2^30)", (long long)o->frames);
  if (o->threads < 0) return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: threads %d (>= 0: the blocks' cap)", o->threads);
  if (o->inflight < 1 || o->inflight > 16)
    return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: inflight %d (1..16)", o->inflight);
  if ((unsigned)o->gran > TS_PIPE_GRAN_AUTO) return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: gran %d", (int)o->gran);
  if (o->tile_w < 0 || o->tile_h < 0)
    return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: tile %dx%d", o->tile_w, o->tile_h);
  if (o->gran == TS_PIPE_GRAN_FIXED && (o->tile_w < 1 || o->tile_h < 1))
    return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: fixed granularity needs tile_w, tile_h >= 1 (got %dx%d)", o->tile_w,
                    o->tile_h);
  if (o->queue == TS_PIPE_Q_LOCKED)
    return ts_error(TS_ERR_UNSUPPORTED,
                    "pipe cuda: queue 'locked' (the device runs 'mpmc': one global queue, or "
                    "'sharded': a queue per block group with stealing)");
  if ((unsigned)o->queue > TS_PIPE_Q_MPMC) return ts_error(TS_ERR_INVALID_ARG, "pipe cuda: queue %d", (int)o->queue);
  if (o->copy != TS_PIPE_COPY_NONE)
    return ts_error(TS_ERR_UNSUPPORTED, "pipe cuda: copy '%s' (one device arena: copy none)",
                    (unsigned)o->copy <= TS_PIPE_COPY_EAGER ? ts_pipe_copy_name(o->copy) : "?");
  if (o->row1 > o->row0)
    return ts_error(TS_ERR_UNSUPPORTED, "pipe cuda: a row range (rows [%d, %d))", o->row0, o->row1);
  return TS_OK;
}

static int app_code(int kind) {
  switch (kind) {
    case TS__PIPE_HEAT: return TS__PD_HEAT;
    case TS__PIPE_LIFE: return TS__PD_LIFE;
    case TS__PIPE_EDGE: return TS__PD_EDGE;
    default: return 0;
  }
}

/* Uploads graph g's task, off and cons arrays (cnt per launch). */
static ts_status upload_graph(const ts__pd_ops *ops, dev_bufs *d, const ts__pd_graph *g) {
  OP(ops->h2d(d->task, g->task, (size_t)g->n * sizeof *g->task, ops->ctx), "graph tasks");
  OP(ops->h2d(d->off, g->off, (size_t)(g->n + 1) * sizeof *g->off, ops->ctx), "graph offsets");
  if (g->off[g->n] > 0)
    OP(ops->h2d(d->cons, g->cons, (size_t)g->off[g->n] * sizeof *g->cons, ops->ctx), "graph consumers");
  return TS_OK;
}

/* Counters, queues (the ready tasks, dealt round robin over the queues) and accounting of one
 * launch of g. scratch: at least g->n ints. */
static ts_status seed_launch(const ts__pd_ops *ops, dev_bufs *d, const ts__pd_graph *g, int nq, int blocks,
                             ts__pd_queue *hq, int32_t *scratch) {
  size_t n = (size_t)g->n;
  OP(ops->h2d(d->cnt, g->cnt0, n * sizeof(int32_t), ops->ctx), "counters");
  OP(ops->fill(d->slots, 0xff, (size_t)nq * n * sizeof(int32_t), ops->ctx), "queue slots");
  memset(hq, 0, (size_t)nq * sizeof *hq);
  for (int k = 0; k < nq; k++) {
    int32_t m = 0;
    for (int32_t i = 0, r = 0; i < g->n; i++)
      if (g->cnt0[i] == 0 && r++ % nq == k) scratch[m++] = i;
    hq[k].tail = m;
    if (m) OP(ops->h2d(d->slots + (size_t)k * n, scratch, (size_t)m * sizeof(int32_t), ops->ctx), "ready tasks");
  }
  OP(ops->h2d(d->q, hq, (size_t)nq * sizeof *hq, ops->ctx), "queues");
  int32_t two[2] = {g->n, 0};
  OP(ops->h2d(d->outstanding, &two[0], sizeof(int32_t), ops->ctx), "outstanding");
  OP(ops->h2d(d->error, &two[1], sizeof(int32_t), ops->ctx), "error flag");
  OP(ops->fill(d->runs, 0, n * sizeof(int32_t), ops->ctx), "run counts");
  for (int32_t f = 0; f < g->frames; f++) scratch[f] = g->per_frame;
  OP(ops->h2d(d->frame_left, scratch, (size_t)g->frames * sizeof(int32_t), ops->ctx), "frame counters");
  OP(ops->fill(d->frame_t0, 0xff, (size_t)g->frames * sizeof(uint64_t), ops->ctx), "frame times");
  OP(ops->fill(d->frame_t1, 0, (size_t)g->frames * sizeof(uint64_t), ops->ctx), "frame times");
  OP(ops->fill(d->bstat, 0, (size_t)blocks * sizeof(ts__pd_bstat), ops->ctx), "block counters");
  return TS_OK;
}

typedef struct run_state {
  const ts__pd_ops *ops;
  ts_pipe_opts o;
  const ts_pipe_app *app;
  const ts_pipe_desc *d;
  int tw, th, blocks, nq, B;
  bool feedback;
  ts__pd_graph g[2]; /* full launches, the last shorter one */
  dev_bufs dv;
  ts__pd_exec E;
  ts__pd_queue *hq;
  int32_t *scratch;
  float *hout;
  ts__pd_bstat *hb;
  uint64_t *ht0, *ht1;
  ts_pipe_report *rep;
  ts__pd_check *chk;
} run_state;

/* One launch of graph g (frames [f0, f0 + g->frames) of the run). */
static ts_status one_launch(run_state *R, const ts__pd_graph *g, int64_t f0) {
  const ts__pd_ops *ops = R->ops;
  dev_bufs *d = &R->dv;
  const ts_pipe_desc *dd = R->d;
  int last = dd->nstages - 1;
  TS_TRY(seed_launch(ops, d, g, R->nq, R->blocks, R->hq, R->scratch));
  if (R->o.poison)
    OP(ops->fill(d->planes, 0xff, (size_t)R->B * (size_t)R->E.fstride * sizeof(float), ops->ctx), "poison");
  ts__pd_exec E = R->E;
  E.ntasks = g->n;
  E.per_frame = g->per_frame;
  E.frames = g->frames;
  E.frame0 = R->o.frame0 + f0;
  E.prev = f0 > 0 || R->o.feedback0 ? d->prev : NULL;
  OP(ops->launch(&E, R->blocks, ops->threads, ops->ctx), "launch");
  int32_t err = 0, left = 0;
  OP(ops->d2h(&err, d->error, sizeof err, ops->ctx), "error flag");
  OP(ops->d2h(&left, d->outstanding, sizeof left, ops->ctx), "outstanding");
  if (err || left != 0)
    return ts_error(TS_ERR_INTERNAL, "pipe cuda (%s): frames %lld..%lld stalled with %d of %d tasks outstanding",
                    ops->name, (long long)(R->o.frame0 + f0), (long long)(R->o.frame0 + f0 + g->frames - 1), left,
                    g->n);

  /* counters for the report (and the tests) */
  OP(ops->d2h(R->hb, d->bstat, (size_t)R->blocks * sizeof *R->hb, ops->ctx), "block counters");
  OP(ops->d2h(R->ht0, d->frame_t0, (size_t)g->frames * sizeof *R->ht0, ops->ctx), "frame times");
  OP(ops->d2h(R->ht1, d->frame_t1, (size_t)g->frames * sizeof *R->ht1, ops->ctx), "frame times");
  ts_pipe_report *rep = R->rep;
  for (int b = 0; b < R->blocks; b++) {
    ts_pipe_worker_stats *w = &rep->worker[b];
    w->tasks += R->hb[b].tasks;
    w->steals += R->hb[b].steals;
    w->steal_attempts += R->hb[b].steal_attempts;
    w->contended += R->hb[b].contended;
    w->busy_s += (double)R->hb[b].busy_ns * 1e-9;
    w->idle_s += (double)R->hb[b].idle_ns * 1e-9;
    rep->tasks += R->hb[b].tasks;
  }
  for (int32_t f = 0; f < g->frames; f++) {
    rep->frame_tile_w[f0 + f] = R->tw;
    rep->frame_tile_h[f0 + f] = R->th;
    rep->frame_tasks[f0 + f] = g->per_frame;
    rep->frame_s[f0 + f] = R->ht1[f] >= R->ht0[f] ? (double)(R->ht1[f] - R->ht0[f]) * 1e-9 : 0;
  }
  if (R->chk) {
    ts__pd_check *c = R->chk;
    c->launches++;
    c->tasks += g->n;
    c->outstanding_left += left;
    OP(ops->d2h(R->scratch, d->runs, (size_t)g->n * sizeof(int32_t), ops->ctx), "run counts");
    for (int32_t i = 0; i < g->n; i++) c->runs_bad += R->scratch[i] != 1;
    OP(ops->d2h(R->scratch, d->frame_left, (size_t)g->frames * sizeof(int32_t), ops->ctx), "frame counters");
    for (int32_t f = 0; f < g->frames; f++) c->frames_left += R->scratch[f] != 0;
    OP(ops->d2h(R->hq, d->q, (size_t)R->nq * sizeof *R->hq, ops->ctx), "queues");
    for (int k = 0; k < R->nq; k++) c->pushed += R->hq[k].tail, c->popped += R->hq[k].head;
    c->initial += g->nready;
    for (int b = 0; b < R->blocks; b++) c->steals += R->hb[b].steals;
  }

  /* outputs in order, and the feedback plane for the next launch */
  int w = R->E.pw[last], h = R->E.ph[last], ch = R->E.pc[last];
  size_t lastn = (size_t)w * h * ch;
  for (int32_t f = 0; f < g->frames; f++) {
    const float *src = d->planes + f * R->E.fstride + R->E.poff[last];
    if (R->o.sink) {
      OP(ops->d2h(R->hout, src, lastn * sizeof(float), ops->ctx), "output plane");
      ts_pipe_buf b = {R->hout, w, h, ch, w, (int64_t)w * h};
      R->o.sink(R->o.frame0 + f0 + f, &b, R->o.sink_user);
    }
    if (f == g->frames - 1 && R->feedback)
      OP(ops->d2d(d->prev, src, lastn * sizeof(float), ops->ctx), "feedback plane");
  }
  return TS_OK;
}

static ts_status run_all(run_state *R) {
  const ts__pd_ops *ops = R->ops;
  const ts_pipe_desc *d = R->d;
  dev_bufs *dv = &R->dv;
  int last = d->nstages - 1;
  int64_t frames = R->o.frames;
  R->B = (int)(frames < R->o.inflight ? frames : R->o.inflight);
  TS_TRY(ts__pd_graph_build(d, R->B, R->tw, R->th, &R->g[0]));
  int tail = (int)(frames % R->B);
  if (tail) TS_TRY(ts__pd_graph_build(d, tail, R->tw, R->th, &R->g[1]));
  if (ops->tamper)
    for (int i = 0; i < (tail ? 2 : 1); i++) {
      ops->tamper(&R->g[i], ops->tamper_user);
      R->g[i].nready = 0;
      for (int32_t k = 0; k < R->g[i].n; k++) R->g[i].nready += R->g[i].cnt0[k] == 0;
    }
  const ts__pd_graph *g = &R->g[0];
  size_t n = (size_t)g->n;

  /* the executor's fixed part */
  ts__pd_exec *E = &R->E;
  memset(E, 0, sizeof *E);
  E->nstages = d->nstages;
  E->qmode = R->o.queue == TS_PIPE_Q_SHARDED ? TS__PD_Q_SHARDED : TS__PD_Q_GLOBAL;
  E->nq = R->nq;
  E->stall_ns = ops->stall_ns;
  E->app = app_code(R->app->kind);
  E->w = R->app->w;
  E->h = R->app->h;
  E->seed = R->app->seed;
  int64_t fs = 0;
  for (int s = 0; s < d->nstages; s++) {
    const ts_pipe_stage *st = &d->stage[s];
    E->from[s] = st->nin ? st->in[0].from : TS__PD_FROM_NONE;
    ts_pipe_stage_size(d, s, &E->pw[s], &E->ph[s]);
    E->pc[s] = st->channels;
    E->poff[s] = fs;
    fs += (int64_t)E->pw[s] * E->ph[s] * st->channels;
  }
  E->fstride = fs;
  size_t lastn = (size_t)E->pw[last] * E->ph[last] * E->pc[last];

  /* device memory */
  TS_TRY(dalloc(ops, (void **)&dv->planes, (size_t)R->B * (size_t)fs * sizeof(float), "planes"));
  if (R->feedback || R->o.feedback0) TS_TRY(dalloc(ops, (void **)&dv->prev, lastn * sizeof(float), "feedback plane"));
  TS_TRY(dalloc(ops, (void **)&dv->task, n * sizeof *dv->task, "graph tasks"));
  TS_TRY(dalloc(ops, (void **)&dv->off, (n + 1) * sizeof *dv->off, "graph offsets"));
  TS_TRY(dalloc(ops, (void **)&dv->cons, (size_t)g->off[n] * sizeof *dv->cons, "graph consumers"));
  TS_TRY(dalloc(ops, (void **)&dv->cnt, n * sizeof *dv->cnt, "counters"));
  TS_TRY(dalloc(ops, (void **)&dv->q, (size_t)R->nq * sizeof *dv->q, "queues"));
  TS_TRY(dalloc(ops, (void **)&dv->slots, (size_t)R->nq * n * sizeof *dv->slots, "queue slots"));
  TS_TRY(dalloc(ops, (void **)&dv->outstanding, sizeof(int32_t), "outstanding"));
  TS_TRY(dalloc(ops, (void **)&dv->error, sizeof(int32_t), "error flag"));
  TS_TRY(dalloc(ops, (void **)&dv->runs, n * sizeof(int32_t), "run counts"));
  TS_TRY(dalloc(ops, (void **)&dv->frame_left, (size_t)R->B * sizeof(int32_t), "frame counters"));
  TS_TRY(dalloc(ops, (void **)&dv->frame_t0, (size_t)R->B * sizeof(uint64_t), "frame times"));
  TS_TRY(dalloc(ops, (void **)&dv->frame_t1, (size_t)R->B * sizeof(uint64_t), "frame times"));
  TS_TRY(dalloc(ops, (void **)&dv->bstat, (size_t)R->blocks * sizeof(ts__pd_bstat), "block counters"));
  E->task = dv->task;
  E->off = dv->off;
  E->cons = dv->cons;
  E->cnt = dv->cnt;
  E->q = dv->q;
  E->slots = dv->slots;
  E->outstanding = dv->outstanding;
  E->runs = dv->runs;
  E->frame_left = dv->frame_left;
  E->frame_t0 = dv->frame_t0;
  E->frame_t1 = dv->frame_t1;
  E->bstat = dv->bstat;
  E->error = dv->error;
  E->planes = dv->planes;
  if (R->o.feedback0) {
    const ts_pipe_buf *b = R->o.feedback0;
    for (int c = 0; c < E->pc[last]; c++)
      for (int y = 0; y < E->ph[last]; y++)
        OP(ops->h2d(dv->prev + ((size_t)c * E->ph[last] + y) * E->pw[last], b->data + c * b->plane + y * b->row,
                    (size_t)E->pw[last] * sizeof(float), ops->ctx),
           "feedback0");
  }

  /* host scratch */
  size_t sn = n > (size_t)R->B ? n : (size_t)R->B;
  R->hq = malloc((size_t)R->nq * sizeof *R->hq);
  R->scratch = malloc(sn * sizeof *R->scratch);
  R->hout = malloc(lastn * sizeof *R->hout);
  R->hb = malloc((size_t)R->blocks * sizeof *R->hb);
  R->ht0 = malloc((size_t)R->B * sizeof *R->ht0);
  R->ht1 = malloc((size_t)R->B * sizeof *R->ht1);
  if (!R->hq || !R->scratch || !R->hout || !R->hb || !R->ht0 || !R->ht1)
    return ts_error(TS_ERR_OOM, "pipe cuda: host buffers for %zu tasks", n);

  const ts__pd_graph *up = NULL;
  for (int64_t f0 = 0; f0 < frames; f0 += R->B) {
    const ts__pd_graph *gg = frames - f0 >= R->B ? &R->g[0] : &R->g[1];
    if (gg != up) {
      TS_TRY(upload_graph(ops, dv, gg));
      up = gg;
    }
    TS_TRY(one_launch(R, gg, f0));
  }
  return TS_OK;
}

ts_status ts__pd_run(const ts__pd_ops *ops, const char *app, int width, int height, const ts_pipe_opts *opts,
                     ts_pipe_report **out, ts__pd_check *chk) {
  if (out) *out = NULL;
  ts_pipe_opts o = opts ? *opts : ts_pipe_opts_default();
  TS_TRY(check_opts(&o));
  ts_pipe_app *a = NULL;
  TS_TRY(ts_pipe_app_create(app, width, height, &a));
  if (!app_code(a->kind)) {
    ts_pipe_app_destroy(a);
    return ts_error(TS_ERR_UNSUPPORTED, "pipe cuda: app '%s' has no device kernels (edge, heat or life)", app);
  }
  const ts_pipe_desc *d = ts_pipe_app_desc(a);
  int last = d->nstages - 1;
  bool feedback = false;
  for (int s = 0; s < d->nstages; s++)
    for (int i = 0; i < d->stage[s].nin; i++) feedback |= d->stage[s].in[i].from == TS_PIPE_FEEDBACK;
  if (o.feedback0) {
    const ts_pipe_buf *b = o.feedback0;
    int w, h;
    ts_pipe_stage_size(d, last, &w, &h);
    if (!b->data || b->w != w || b->h != h || b->c != d->stage[last].channels || b->row < b->w ||
        b->plane < b->row * (int64_t)b->h) {
      ts_pipe_app_destroy(a);
      return ts_error(TS_ERR_SHAPE, "pipe cuda: feedback0 is %dx%dx%d, the last stage %dx%dx%d", b->w, b->h, b->c, w, h,
                      d->stage[last].channels);
    }
  }

  run_state *R = calloc(1, sizeof *R);
  ts_pipe_report *rep = calloc(1, sizeof *rep);
  ts_status st = TS_OK;
  if (!R || !rep) {
    free(R);
    free(rep);
    ts_pipe_app_destroy(a);
    return ts_error(TS_ERR_OOM, "pipe cuda: run state");
  }
  R->ops = ops;
  R->o = o;
  R->app = a;
  R->d = d;
  R->feedback = feedback;
  R->chk = chk;
  R->rep = rep;
  R->tw = o.tile_w > 0 && o.tile_h > 0 ? o.tile_w : DEFAULT_TW;
  R->th = o.tile_w > 0 && o.tile_h > 0 ? o.tile_h : DEFAULT_TH;
  R->blocks = o.threads > 0 && o.threads < ops->blocks ? o.threads : ops->blocks;
  if (o.queue == TS_PIPE_Q_SHARDED) {
    int grp = ops->group > 0 ? ops->group : 1;
    R->nq = (R->blocks + grp - 1) / grp;
    if (R->nq > 64) R->nq = 64;
  } else {
    R->nq = 1;
  }
  rep->frame_tile_w = calloc((size_t)o.frames, sizeof(int));
  rep->frame_tile_h = calloc((size_t)o.frames, sizeof(int));
  rep->frame_s = calloc((size_t)o.frames, sizeof(double));
  rep->frame_tasks = calloc((size_t)o.frames, sizeof(int64_t));
  rep->worker = calloc((size_t)R->blocks, sizeof *rep->worker);
  double t0 = ts_now();
  if (!rep->frame_tile_w || !rep->frame_tile_h || !rep->frame_s || !rep->frame_tasks || !rep->worker)
    st = ts_error(TS_ERR_OOM, "pipe cuda: report for %lld frames", (long long)o.frames);
  else
    st = run_all(R);
  double wall = ts_now() - t0;

  if (st == TS_OK) {
    double flops_px = 0;
    for (int s = 0; s < d->nstages; s++) flops_px += d->stage[s].flops_per_px / (double)(1 << (2 * d->stage[s].level));
    snprintf(rep->app, sizeof rep->app, "%s", d->name);
    rep->width = width;
    rep->height = height;
    rep->threads = R->blocks;
    rep->nstages = d->nstages;
    rep->frames = o.frames;
    rep->queue = o.queue;
    rep->copy = TS_PIPE_COPY_NONE;
    rep->gran = TS_PIPE_GRAN_FIXED;
    rep->wall_s = wall;
    rep->mpix_per_s = (double)width * height * (double)o.frames / wall / 1e6;
    rep->gflops = flops_px * (double)width * height * (double)o.frames / wall / 1e9;
    rep->tasks_expected = (int64_t)R->g[0].per_frame * o.frames;
  }
  dev_free(ops, &R->dv);
  ts__pd_graph_free(&R->g[0]);
  ts__pd_graph_free(&R->g[1]);
  free(R->hq);
  free(R->scratch);
  free(R->hout);
  free(R->hb);
  free(R->ht0);
  free(R->ht1);
  free(R);
  ts_pipe_app_destroy(a);
  if (st != TS_OK || !out)
    ts_pipe_report_free(rep);
  else
    *out = rep;
  return st;
}

/* ---- the CUDA back end ------------------------------------------------------------------------ */

static int cu_alloc(void **p, size_t bytes, void *ctx) { return (int)cudaMalloc(p, bytes); }
static void cu_release(void *p, void *ctx) { (void)cudaFree(p); }
static int cu_h2d(void *dst, const void *src, size_t n, void *ctx) {
  return (int)cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
}
static int cu_d2h(void *dst, const void *src, size_t n, void *ctx) {
  return (int)cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost);
}
static int cu_d2d(void *dst, const void *src, size_t n, void *ctx) {
  return (int)cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice);
}
static int cu_fill(void *dst, int byte, size_t n, void *ctx) { return (int)cudaMemset(dst, byte, n); }
static int cu_launch(const ts__pd_exec *E, int blocks, int threads, void *ctx) {
  return ts__pd_cuda_launch(E, blocks, threads);
}
static const char *cu_errstr(int e, void *ctx) { return cudaGetErrorString((cudaError_t)e); }

bool ts_pipe_cuda_available(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess && count > 0;
}

ts_status ts_pipe_cuda_run(const char *app, int width, int height, const ts_pipe_opts *o, ts_pipe_report **rep) {
  if (rep) *rep = NULL;
  /* the arguments first, so a bad request says so on any machine */
  ts_pipe_opts oo = o ? *o : ts_pipe_opts_default();
  TS_TRY(check_opts(&oo));
  ts_pipe_app *a = NULL;
  TS_TRY(ts_pipe_app_create(app, width, height, &a));
  int code = app_code(a->kind);
  ts_pipe_app_destroy(a);
  if (!code) return ts_error(TS_ERR_UNSUPPORTED, "pipe cuda: app '%s' has no device kernels (edge, heat or life)", app);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ts_error(TS_ERR_UNSUPPORTED, "pipe cuda: no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
  }
  if (count < 1) return ts_error(TS_ERR_UNSUPPORTED, "pipe cuda: no CUDA device (cudaGetDeviceCount found 0 devices)");
  ts__pd_ops ops = {.name = "cuda",
                    .alloc = cu_alloc,
                    .release = cu_release,
                    .h2d = cu_h2d,
                    .d2h = cu_d2h,
                    .d2d = cu_d2d,
                    .fill = cu_fill,
                    .launch = cu_launch,
                    .errstr = cu_errstr,
                    .threads = 256,
                    .group = 8,
                    .stall_ns = 20000000000LL};
  int ge = ts__pd_cuda_grid(ops.threads, &ops.blocks);
  if (ge)
    return ts_error(TS_ERR_INTERNAL, "pipe cuda: occupancy of the executor: %s", cudaGetErrorString((cudaError_t)ge));
  return ts__pd_run(&ops, app, width, height, &oo, rep, NULL);
}
