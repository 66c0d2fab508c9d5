/* The pipeline runtime's set-up: options checked, the rows each stage must compute, the model's
 * inputs, slots, planes and queues allocated, the first frames started, the workers run (the
 * executor: pipe_run.c), and the report assembled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe/pipe_run_internal.h"
#include "tessera/hwinfo.h"

/* ---- set-up -------------------------------------------------------------------------------- */

/* Rows each stage must compute so the last stage's rows [row0, row1) can be: back from the last
 * stage through the input spans (a stage nobody reads gets none). */
static void regions(run *R) {
  const ts_pipe_desc *d = R->d;
  for (int s = 0; s < R->S; s++) {
    R->ry0[s] = 0;
    R->ry1[s] = R->h[s];
  }
  if (R->o.row1 <= R->o.row0) return;
  for (int s = 0; s < R->S; s++) R->ry0[s] = R->ry1[s] = -1;
  R->ry0[R->last] = R->o.row0;
  R->ry1[R->last] = R->o.row1;
  for (int s = R->last; s >= 0; s--) {
    if (R->ry0[s] < 0) { /* unread */
      R->ry0[s] = R->ry1[s] = 0;
      continue;
    }
    const ts_pipe_stage *st = &d->stage[s];
    for (int i = 0; i < st->nin; i++) {
      int j = st->in[i].from;
      if (j == TS_PIPE_FEEDBACK) continue;
      int lo, hi;
      ts_pipe_input_span(st->level, d->stage[j].level, st->in[i].halo, R->h[j], R->ry0[s], R->ry1[s], &lo, &hi);
      if (R->ry0[j] < 0) {
        R->ry0[j] = lo;
        R->ry1[j] = hi + 1;
      } else {
        if (lo < R->ry0[j]) R->ry0[j] = lo;
        if (hi + 1 > R->ry1[j]) R->ry1[j] = hi + 1;
      }
    }
  }
}

/* Seconds per task of the runtime's own work: a push, a pop and a counter decrement, timed. */
static double task_overhead(void) {
  ts__deque q;
  if (ts__deque_init(&q, 1024) != TS_OK) return 1e-6;
  _Atomic int32_t c = 1 << 30;
  int64_t races = 0;
  const int n = 20000;
  double t0 = ts_now();
  for (int i = 0; i < n; i++) {
    ts__deque_push(&q, (uint64_t)i + 1);
    atomic_fetch_sub_explicit(&c, 1, memory_order_acq_rel);
    (void)ts__deque_take(&q, &races);
  }
  double o = (ts_now() - t0) / n;
  ts__deque_free(&q);
  return o;
}

static ts_status check_opts(const ts_pipe_desc *d, const ts_pipe_opts *o, bool feedback) {
  if (o->frames < 1 || o->frames > (1LL << 30))
    return ts_error(TS_ERR_INVALID_ARG, "pipe: frames %lld (1..2^30)", (long long)o->frames);
  if (o->threads < 0 || o->threads > 256) return ts_error(TS_ERR_INVALID_ARG, "pipe: threads %d (0..256)", o->threads);
  if (o->inflight < 1 || o->inflight > 16) return ts_error(TS_ERR_INVALID_ARG, "pipe: inflight %d (1..16)", o->inflight);
  if ((unsigned)o->queue > TS_PIPE_Q_MPMC) return ts_error(TS_ERR_INVALID_ARG, "pipe: queue %d", (int)o->queue);
  if ((unsigned)o->copy > TS_PIPE_COPY_EAGER) return ts_error(TS_ERR_INVALID_ARG, "pipe: copy %d", (int)o->copy);
  if ((unsigned)o->gran > TS_PIPE_GRAN_AUTO) return ts_error(TS_ERR_INVALID_ARG, "pipe: gran %d", (int)o->gran);
  if (o->gran == TS_PIPE_GRAN_FIXED && (o->tile_w < 1 || o->tile_h < 1))
    return ts_error(TS_ERR_INVALID_ARG, "pipe: fixed granularity needs tile_w, tile_h >= 1 (got %dx%d)", o->tile_w,
                    o->tile_h);
  if (o->tile_w < 0 || o->tile_h < 0) return ts_error(TS_ERR_INVALID_ARG, "pipe: tile %dx%d", o->tile_w, o->tile_h);
  int w, h;
  ts_pipe_stage_size(d, d->nstages - 1, &w, &h);
  if (o->row1 > o->row0) {
    if (o->row0 < 0 || o->row1 > h)
      return ts_error(TS_ERR_INVALID_ARG, "pipe: rows [%d, %d) outside the last stage's 0..%d", o->row0, o->row1, h);
    if (feedback && o->frames > 1)
      return ts_error(TS_ERR_INVALID_ARG,
                      "pipe: rows with a feedback pipeline need frames = 1 (a neighbour's rows feed the next frame: "
                      "exchange them between runs)");
  }
  if (o->feedback0) {
    const ts_pipe_buf *b = o->feedback0;
    if (!b->data || b->w != w || b->h != h || b->c != d->stage[d->nstages - 1].channels || b->row < b->w ||
        b->plane < b->row * (int64_t)b->h)
      return ts_error(TS_ERR_SHAPE, "pipe: feedback0 is %dx%dx%d, the last stage %dx%dx%d", b->w, b->h, b->c, w, h,
                      d->stage[d->nstages - 1].channels);
  }
  return TS_OK;
}

static void run_free(run *R) {
  if (R->slots) {
    for (int i = 0; i < R->nslots; i++) {
      slot *S = &R->slots[i];
      free(S->cnt);
      free(S->cstate);
      free(S->done);
      free(S->delivered);
      free(S->etab);
      free(S->src);
      for (int a = 0; a < 2; a++)
        for (int s = 0; s < MAXS; s++) ts_free(S->plane[a][s]);
    }
    free(R->slots);
  }
  if (R->wk) {
    for (int i = 0; i < R->nthreads; i++) {
      ts__deque_free(&R->wk[i].dq);
      ts__locked_free(&R->wk[i].inbox);
      free(R->wk[i].ev);
      free(R->wk[i].batch);
    }
    free(R->wk);
  }
  for (int i = 0; i < 2; i++) {
    ts__locked_free(&R->lq[i]);
    ts__mpmc_free(&R->mq[i]);
  }
  free(R->completed);
}

void ts_pipe_report_free(ts_pipe_report *rep) {
  if (!rep) return;
  free(rep->frame_tile_w);
  free(rep->frame_tile_h);
  free(rep->frame_s);
  free(rep->frame_tasks);
  free(rep->worker);
  free(rep->events);
  free(rep);
}

static int64_t tasks_at(const run *R, int tw, int th) {
  int64_t n = 0;
  for (int s = 0; s < R->S; s++) {
    int lv = R->d->stage[s].level;
    int a = tw >> lv > 0 ? tw >> lv : 1, b = th >> lv > 0 ? th >> lv : 1;
    int rows = R->ry1[s] - R->ry0[s];
    n += (int64_t)((R->w[s] + a - 1) / a) * ((rows + b - 1) / b);
  }
  return n;
}

ts_status ts_pipe_run(const ts_pipe_desc *d, const ts_pipe_opts *opts, ts_pipe_report **out) {
  if (out) *out = NULL;
  TS_TRY(ts_pipe_desc_check(d));
  ts_pipe_opts o = opts ? *opts : ts_pipe_opts_default();
  bool feedback = false;
  for (int s = 0; s < d->nstages; s++)
    for (int i = 0; i < d->stage[s].nin; i++) feedback |= d->stage[s].in[i].from == TS_PIPE_FEEDBACK;
  TS_TRY(check_opts(d, &o, feedback));
  if (o.threads == 0) o.threads = ts_default_threads();
  if (o.copy != TS_PIPE_COPY_NONE && o.threads < 2)
    return ts_error(TS_ERR_INVALID_ARG, "pipe: two arenas (copy %s) need at least 2 threads", ts_pipe_copy_name(o.copy));

  run *R = calloc(1, sizeof *R);
  ts_pipe_report *rep = calloc(1, sizeof *rep);
  if (!R || !rep) {
    free(R);
    free(rep);
    return ts_error(TS_ERR_OOM, "pipe: run state");
  }
  ts_status st = TS_OK;
  R->d = d;
  R->o = o;
  R->rep = rep;
  R->S = d->nstages;
  R->last = d->nstages - 1;
  R->feedback = feedback;
  R->nthreads = o.threads;
  R->ndev = o.copy != TS_PIPE_COPY_NONE ? 2 : 1;
  R->nslots = o.inflight + (feedback ? 1 : 0);
  for (int s = 0; s < R->S; s++) ts_pipe_stage_size(d, s, &R->w[s], &R->h[s]);
  for (int s = 0; s < R->S; s++)
    for (int i = 0; i < d->stage[s].nin; i++) {
      int j = d->stage[s].in[i].from;
      cons c = {s, i};
      if (j == TS_PIPE_FEEDBACK) R->fb[R->nfb++] = c;
      else R->con[j][R->ncons[j]++] = c;
    }
  regions(R);
  pthread_mutex_init(&R->start_mu, NULL);

  /* granularity: the model's inputs, and the finest tile any frame may use */
  double bytes_px = 0, flops_px = 0;
  for (int s = 0; s < R->S; s++) {
    double scale = 1.0 / (double)(1 << (2 * d->stage[s].level));
    bytes_px += 4.0 * d->stage[s].channels * scale;
    flops_px += d->stage[s].flops_per_px * scale;
  }
  rep->overhead_s = task_overhead();
  int minw = o.tile_w, minh = o.tile_h;
  if (o.gran == TS_PIPE_GRAN_AUTO) {
    int64_t l2b = 0, l3b = 0;
    ts_hwinfo_cache_sizes(NULL, &l2b, &l3b);
    /* seconds per level-0 pixel: the flops at 1 GFLOP/s per worker (a stencil's typical rate);
       the measured frames take over from the first window on */
    ts__gran_model m = {rep->overhead_s, flops_px > 0 ? flops_px / 1e9 : 1e-8, bytes_px,
                        l2b > 0 ? (double)l2b : 512.0 * 1024, l3b > 0 ? (double)l3b : 8.0 * 1024 * 1024,
                        o.threads, o.inflight, feedback, o.frames};
    ts__gran_init(&R->gran, d->width, d->height, &m, o.tile_w, o.tile_h);
    ts__gran_min_tile(&R->gran, &minw, &minh);
  }
  int64_t maxtasks = tasks_at(R, minw, minh);

  R->slots = calloc((size_t)R->nslots, sizeof *R->slots);
  R->wk = calloc((size_t)R->nthreads, sizeof *R->wk);
  R->completed = calloc((size_t)o.frames, 1);
  rep->frame_tile_w = calloc((size_t)o.frames, sizeof(int));
  rep->frame_tile_h = calloc((size_t)o.frames, sizeof(int));
  rep->frame_s = calloc((size_t)o.frames, sizeof(double));
  rep->frame_tasks = calloc((size_t)o.frames, sizeof(int64_t));
  rep->worker = calloc((size_t)R->nthreads, sizeof *rep->worker);
  if (!R->slots || !R->wk || !R->completed || !rep->frame_tile_w || !rep->frame_tile_h || !rep->frame_s ||
      !rep->frame_tasks || !rep->worker) {
    st = ts_error(TS_ERR_OOM, "pipe: run state for %lld frames", (long long)o.frames);
    goto done;
  }
  for (int i = 0; i < R->nslots; i++) {
    atomic_init(&R->slots[i].ready_frame, -1);
    atomic_init(&R->slots[i].cursor, 0);
    atomic_init(&R->slots[i].nsrc, 0);
    atomic_init(&R->slots[i].left, 0);
    for (int a = 0; a < R->ndev; a++)
      for (int s = 0; s < R->S; s++) {
        size_t n;
        if (!ts_mul_size((size_t)R->w[s] * R->h[s], (size_t)d->stage[s].channels * sizeof(float), &n) ||
            !(R->slots[i].plane[a][s] = ts_malloc(n))) {
          st = ts_error(TS_ERR_OOM, "pipe %s: plane of stage %d (%dx%dx%d)", d->name ? d->name : "", s, R->w[s],
                        R->h[s], d->stage[s].channels);
          goto done;
        }
      }
  }
  int64_t qcap = maxtasks * R->nslots + 64;
  for (int i = 0; i < R->ndev; i++) {
    if (o.queue == TS_PIPE_Q_LOCKED && (st = ts__locked_init(&R->lq[i], 1024)) != TS_OK) goto done;
    if (o.queue == TS_PIPE_Q_MPMC && (st = ts__mpmc_init(&R->mq[i], qcap)) != TS_OK) goto done;
  }
  ts_rng seed;
  ts_rng_seed(&seed, o.stress_seed ? o.stress_seed : 0x5eed);
  for (int i = 0; i < R->nthreads; i++) {
    worker *W = &R->wk[i];
    W->R = R;
    W->id = i;
    W->dev = R->ndev > 1 ? i % 2 : 0;
    W->pend_frame = -1;
    atomic_init(&W->hungry, 0);
    ts_rng_seed(&W->rng, ts_rng_next(&seed));
    if ((st = ts__deque_init(&W->dq, 1024)) != TS_OK || (st = ts__locked_init(&W->inbox, 64)) != TS_OK) goto done;
    if (o.timeline) {
      W->evcap = (1 << 20) / R->nthreads;
      if (!(W->ev = malloc((size_t)W->evcap * sizeof *W->ev))) {
        st = ts_error(TS_ERR_OOM, "pipe: timeline");
        goto done;
      }
    }
  }
  atomic_init(&R->outstanding, o.frames);
  atomic_init(&R->src_lo, 0);

  /* the first frames, pushed through worker 0 before any worker runs */
  R->t_start = ts_now();
  R->tick0 = ts_ticks();
  for (R->next_frame = 0; R->next_frame < o.frames && R->next_frame < o.inflight; R->next_frame++)
    if ((st = ts__pipe_start_frame(&R->wk[0], R->next_frame)) != TS_OK) goto done;
  int started = 0;
  for (int i = 1; i < R->nthreads; i++) {
    if (pthread_create(&R->wk[i].th, NULL, ts__pipe_worker_main, &R->wk[i]) != 0) {
      ts__pipe_fail(R, ts_error(TS_ERR_INTERNAL, "pipe: cannot start worker %d", i));
      break;
    }
    started = i;
  }
  ts__pipe_worker_main(&R->wk[0]);
  for (int i = 1; i <= started; i++) pthread_join(R->wk[i].th, NULL);
  double wall = ts_now() - R->t_start;
  uint64_t dt = ts_ticks() - R->tick0;
  double tick_s = dt > 0 ? wall / (double)dt : 0;
  if (atomic_load(&R->failed)) {
    st = ts_error(R->fail_status, "%s", R->fail_msg);
    goto done;
  }

  /* the report */
  snprintf(rep->app, sizeof rep->app, "%s", d->name ? d->name : "");
  rep->width = d->width;
  rep->height = d->height;
  rep->threads = R->nthreads;
  rep->nstages = R->S;
  rep->frames = o.frames;
  rep->queue = o.queue;
  rep->copy = o.copy;
  rep->gran = o.gran;
  rep->wall_s = wall;
  rep->mpix_per_s = (double)d->width * d->height * (double)o.frames / wall / 1e6;
  rep->gflops = flops_px * (double)d->width * d->height * (double)o.frames / wall / 1e9;
  rep->copy_bytes = atomic_load(&R->copy_bytes);
  rep->copies = atomic_load(&R->copies);
  int64_t nev = 0;
  for (int i = 0; i < R->nthreads; i++) {
    R->wk[i].st.busy_s = (double)R->wk[i].busy_ticks * tick_s;
    R->wk[i].st.idle_s = (double)R->wk[i].idle_ticks * tick_s;
    rep->worker[i] = R->wk[i].st;
    rep->tasks += R->wk[i].st.tasks;
    nev += R->wk[i].nev;
    rep->events_dropped += R->wk[i].evdrop;
  }
  for (int64_t f = 0; f < o.frames; f++) rep->tasks_expected += rep->frame_tasks[f];
  if (o.timeline && nev > 0) {
    rep->events = malloc((size_t)nev * sizeof *rep->events);
    if (!rep->events) {
      st = ts_error(TS_ERR_OOM, "pipe: timeline of %lld tasks", (long long)nev);
      goto done;
    }
    for (int i = 0; i < R->nthreads; i++) {
      memcpy(rep->events + rep->nevents, R->wk[i].ev, (size_t)R->wk[i].nev * sizeof *rep->events);
      rep->nevents += R->wk[i].nev;
    }
    for (int64_t e = 0; e < rep->nevents; e++) rep->events[e].t0 *= tick_s, rep->events[e].t1 *= tick_s;
  }
done:
  pthread_mutex_destroy(&R->start_mu);
  run_free(R);
  free(R);
  if (st != TS_OK || !out) ts_pipe_report_free(rep);
  else *out = rep;
  return st;
}
