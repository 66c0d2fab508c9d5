/* The pipeline runtime: frames of (stage, tile) tasks with dependence counters, a pool of pthread
 * workers over the ready queues, termination by an outstanding-work counter (no barrier), lazy or
 * eager copies between two device arenas, and the granularity controller between frames.
 *
 * A frame lives in a slot (its tile grids, counters and planes); `inflight` frames run at once,
 * plus one slot for an iterative pipeline (its first stage reads the previous frame's last plane
 * while the frame itself writes its own). The worker that completes frame f starts the frames
 * that f's completion lets in (under a mutex taken once per frame, never per task).
 *
 * Dependences: task (f, s, t) waits on the number of producer tiles its input spans touch
 * (ts_pipe_input_span); the producer that completes decrements each consumer it touches (found by
 * binary search over the consumer's tiles with the same span function, so the two sides count the
 * same relation) and pushes those that reach zero. Feedback crosses frames: frame f's last-stage
 * tile may complete before frame f+1 is set up, so it marks itself done, and either it (seeing
 * f+1 published) or f+1's setup (seeing it done) delivers its decrements, whichever wins an
 * exchange on its `delivered` flag: exactly once, with no lock between them (the seq_cst store
 * then load on both sides means at least one of the two sees the other). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipe/pipe_internal.h"
#include "tessera/hwinfo.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* Task times on the time-stamp counter (a few ns; clock_gettime took a fifth of a fine-grained run
 * on a VM), converted to seconds at the end of the run against the wall clock; ns elsewhere. */
static inline uint64_t ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return (uint64_t)(ts_now() * 1e9);
#endif
}

#define MAXS TS_PIPE_MAX_STAGES

typedef struct grid {
  int tw, th, nx, ny, y0, y1, w, h; /* tiles of tw x th over columns [0, w), rows [y0, y1) */
  int64_t base, n;                  /* first task index in the frame, tiles */
} grid;

typedef struct slot {
  _Atomic int64_t ready_frame; /* the frame set up in this slot (-1 while setting up) */
  int64_t frame;
  int gidx, tile_w, tile_h;
  grid g[MAXS];
  int64_t ntasks, cap, lastcap;
  _Atomic int32_t *cnt;      /* [ntasks] dependence counters */
  _Atomic uint8_t *cstate;   /* [ntasks] 0: in its home arena only, 1: being copied, 2: in both */
  _Atomic uint8_t *done;     /* [tiles of the last stage] (feedback) */
  _Atomic uint8_t *delivered;
  _Atomic int64_t left;      /* tasks not complete */
  float *plane[2][MAXS];     /* [arena][stage] */
  double t0;
  /* Consumer ranges per edge (stage s, input i), per producer tile column and row: the consumer
   * tiles [x[2 tx], x[2 tx + 1]] x [y[2 ty], y[2 ty + 1]] read producer tile (tx, ty). Made when the
   * frame is set up (a feedback edge's producer is the previous frame's last stage), so a completing
   * task finds its consumers without a search. */
  int *ex[MAXS][TS_PIPE_MAX_IN], *ey[MAXS][TS_PIPE_MAX_IN];
  int *etab;
  int64_t etab_cap;
  /* The tasks ready when the frame is set up (sources; their tiles in raster order), handed out in
   * that order by a cursor (frame + 1) << 32 | next, 0 while the slot is being set up: a worker out
   * of work takes the oldest frame's next source, so frames are swept in waves, oldest first,
   * instead of every frame's sources piled at once into one deque. */
  uint64_t *src;
  int64_t srccap;
  _Atomic int64_t nsrc;
  _Atomic uint64_t cursor;
} slot;

struct run;

typedef struct worker {
  struct run *R;
  int id, dev;
  pthread_t th;
  ts__deque dq;
  ts__locked inbox;
  ts_pipe_worker_stats st;
  ts_rng rng;
  ts_pipe_event *ev;
  int64_t nev, evcap, evdrop;
  uint64_t *batch;
  int nbatch, batchcap;
  int rr; /* round robin over the other device's workers */
  int64_t pend_frame, pend; /* completed tasks of pend_frame not yet counted off its `left` */
  uint64_t busy_ticks, idle_ticks;
  _Alignas(64) _Atomic int hungry; /* looking for work: a releasing worker hands it tasks */
} worker;

typedef struct cons {
  int s, i;
} cons;

typedef struct run {
  const ts_pipe_desc *d;
  ts_pipe_opts o;
  int S, last, nslots, nthreads, ndev;
  bool feedback;
  int w[MAXS], h[MAXS], ry0[MAXS], ry1[MAXS];
  int ncons[MAXS];
  cons con[MAXS][MAXS * TS_PIPE_MAX_IN];
  int nfb;
  cons fb[MAXS * TS_PIPE_MAX_IN];
  slot *slots;
  worker *wk;
  ts__locked lq[2];
  ts__mpmc mq[2];
  pthread_mutex_t start_mu;
  int64_t next_frame;
  uint8_t *completed;
  _Atomic int64_t outstanding;
  _Atomic int64_t src_lo; /* the oldest frame whose sources may not all be taken */
  _Atomic int done, failed;
  ts_status fail_status;
  char fail_msg[256];
  ts__gran gran;
  double t_start, last_completion;
  uint64_t tick0;
  _Atomic int64_t copy_bytes, copies;
  ts_pipe_report *rep;
} run;

/* ---- grids and dependences ----------------------------------------------------------------- */

static ts_pipe_rect tile_rect(const grid *g, int64_t t) {
  int tx = (int)(t % g->nx), ty = (int)(t / g->nx);
  ts_pipe_rect r;
  r.x0 = tx * g->tw;
  r.x1 = r.x0 + g->tw < g->w ? r.x0 + g->tw : g->w;
  r.y0 = g->y0 + ty * g->th;
  r.y1 = r.y0 + g->th < g->y1 ? r.y0 + g->th : g->y1;
  return r;
}

/* Producer tiles of pg (level plvl) that consumer rect r (level clvl) reads through halo. */
static void producer_range(const grid *pg, int plvl, int clvl, int halo, ts_pipe_rect r, int *ax, int *bx, int *ay,
                           int *by) {
  int xlo, xhi, ylo, yhi;
  ts_pipe_input_span(clvl, plvl, halo, pg->w, r.x0, r.x1, &xlo, &xhi);
  ts_pipe_input_span(clvl, plvl, halo, pg->h, r.y0, r.y1, &ylo, &yhi);
  *ax = xlo / pg->tw;
  *bx = xhi / pg->tw;
  *ay = ylo < pg->y0 ? 0 : (ylo - pg->y0) / pg->th;
  *by = yhi >= pg->y1 ? pg->ny - 1 : (yhi - pg->y0) / pg->th;
  if (*bx > pg->nx - 1) *bx = pg->nx - 1;
}

/* In one dimension: consumer tiles i (covering [o + i*t, min(lim, o + (i+1)*t))) whose input span
 * touches producer pixels [p0, p1): [*a, *b], empty when *a > *b. Both bounds by binary search on
 * the span of whole tiles (monotone in i), the relation producer_range counts. */
static void consumer_range(int ntiles, int t, int o, int lim, int clvl, int plvl, int halo, int n_in, int p0, int p1,
                           int *a, int *b) {
  int lo = 0, hi = ntiles; /* first i with span(i).hi >= p0 */
  while (lo < hi) {
    int m = (lo + hi) / 2, sl, sh;
    int c0 = o + m * t, c1 = c0 + t < lim ? c0 + t : lim;
    ts_pipe_input_span(clvl, plvl, halo, n_in, c0, c1, &sl, &sh);
    if (sh >= p0) hi = m;
    else lo = m + 1;
  }
  *a = lo;
  lo = -1;
  hi = ntiles - 1; /* last i with span(i).lo <= p1 - 1 */
  while (lo < hi) {
    int m = (lo + hi + 1) / 2, sl, sh;
    int c0 = o + m * t, c1 = c0 + t < lim ? c0 + t : lim;
    ts_pipe_input_span(clvl, plvl, halo, n_in, c0, c1, &sl, &sh);
    if (sl <= p1 - 1) lo = m;
    else hi = m - 1;
  }
  *b = lo;
}

/* ---- pushing and popping ------------------------------------------------------------------- */

static void fail(run *R, ts_status s) {
  int expect = 0;
  if (atomic_compare_exchange_strong(&R->failed, &expect, 1)) {
    R->fail_status = s;
    snprintf(R->fail_msg, sizeof R->fail_msg, "%s", ts_last_error());
  }
}

static int task_dev(const run *R, ts__pipe_task k) {
  return R->ndev > 1 ? R->d->stage[ts__pipe_task_stage(k)].device : 0;
}

static void flush_batch(worker *W) {
  run *R = W->R;
  int n = W->nbatch;
  W->nbatch = 0;
  if (n == 0) return;
  if (R->o.queue == TS_PIPE_Q_SHARDED) {
    /* a hungry worker of the same device gets half of several released tasks straight into its
       inbox, one locked push, instead of stealing them one CAS at a time */
    int keep = n, give = 0;
    worker *H = NULL;
    if (n >= 2 && R->ndev == 1)
      for (int j = 0; j < R->nthreads; j++)
        if (&R->wk[j] != W && atomic_load_explicit(&R->wk[j].hungry, memory_order_relaxed)) {
          H = &R->wk[j];
          give = n / 2;
          keep = n - give;
          break;
        }
    if (H) {
      atomic_store_explicit(&H->hungry, 0, memory_order_relaxed);
      ts_status s = ts__locked_push(&H->inbox, W->batch + keep, give, &W->st.contended);
      if (s != TS_OK) fail(R, s);
      W->st.handoffs += give;
    }
    for (int i = 0; i < keep; i++) {
      uint64_t k = W->batch[i];
      int dev = task_dev(R, k);
      ts_status s;
      if (dev == W->dev) {
        s = ts__deque_push(&W->dq, k);
      } else { /* another device's worker: its inbox, round robin */
        int nd = 0, cand[256];
        for (int j = 0; j < R->nthreads && nd < 256; j++)
          if (R->wk[j].dev == dev) cand[nd++] = j;
        worker *T = &R->wk[cand[W->rr++ % nd]];
        s = ts__locked_push(&T->inbox, &W->batch[i], 1, &W->st.contended);
      }
      if (s != TS_OK) fail(R, s);
    }
    return;
  }
  for (int i = 0; i < n; i++) {
    uint64_t k = W->batch[i];
    int dev = task_dev(R, k);
    ts_status s = TS_OK;
    if (R->o.queue == TS_PIPE_Q_LOCKED) s = ts__locked_push(&R->lq[dev], &W->batch[i], 1, &W->st.contended);
    else
      while (!ts__mpmc_push(&R->mq[dev], k, &W->st.contended)) sched_yield(); /* sized for every task: never full */
    if (s != TS_OK) fail(R, s);
  }
}

static void batch_add(worker *W, ts__pipe_task k) {
  if (W->nbatch == W->batchcap) {
    int c = W->batchcap ? 2 * W->batchcap : 256;
    uint64_t *b = realloc(W->batch, (size_t)c * sizeof *b);
    if (!b) {
      flush_batch(W);
      if (W->nbatch == W->batchcap) {
        fail(W->R, ts_error(TS_ERR_OOM, "pipe: task batch"));
        return;
      }
    } else {
      W->batch = b;
      W->batchcap = c;
    }
  }
  W->batch[W->nbatch++] = k;
}

static uint64_t take_source(worker *W);

static uint64_t pop(worker *W) {
  run *R = W->R;
  uint64_t k;
  if (R->o.queue == TS_PIPE_Q_LOCKED) {
    if ((k = ts__locked_pop(&R->lq[W->dev], &W->st.contended))) return k;
    return take_source(W);
  }
  if (R->o.queue == TS_PIPE_Q_MPMC) {
    if ((k = ts__mpmc_pop(&R->mq[W->dev], &W->st.contended))) return k;
    return take_source(W);
  }
  if ((k = ts__deque_take(&W->dq, &W->st.contended))) return k;
  if ((k = ts__locked_pop(&W->inbox, &W->st.contended))) return k;
  if ((k = take_source(W))) return k;
  int n = R->nthreads;
  int v0 = (int)ts_rng_below(&W->rng, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    worker *V = &R->wk[(v0 + i) % n];
    if (V == W || V->dev != W->dev) continue;
    W->st.steal_attempts++;
    if ((k = ts__deque_steal(&V->dq, &W->st.contended))) {
      W->st.steals++;
      return k;
    }
  }
  return 0;
}

/* ---- frames -------------------------------------------------------------------------------- */

static slot *slot_of(run *R, int64_t f) { return &R->slots[f % R->nslots]; }

static ts_pipe_buf plane_buf(const run *R, const slot *S, int arena, int s) {
  ts_pipe_buf b;
  b.data = S->plane[arena][s];
  b.w = R->w[s];
  b.h = R->h[s];
  b.c = R->d->stage[s].channels;
  b.row = b.w;
  b.plane = (int64_t)b.w * b.h;
  return b;
}

static ts_status grow(void **p, int64_t n, size_t elem) {
  void *q = realloc(*p, (size_t)n * elem);
  if (!q) return ts_error(TS_ERR_OOM, "pipe: %lld task records", (long long)n);
  *p = q;
  return TS_OK;
}

/* The consumer-range tables of every edge into frame slot S (P: the previous frame's slot). */
static ts_status edge_tables(run *R, slot *S, slot *P) {
  const ts_pipe_desc *d = R->d;
  int64_t need = 0;
  for (int s = 0; s < R->S; s++)
    for (int i = 0; i < d->stage[s].nin; i++) {
      int from = d->stage[s].in[i].from;
      const grid *pg = from == TS_PIPE_FEEDBACK ? (P ? &P->g[R->last] : NULL) : &S->g[from];
      if (pg) need += 2 * ((int64_t)pg->nx + pg->ny);
    }
  if (need > S->etab_cap) {
    TS_TRY(grow((void **)&S->etab, need, sizeof *S->etab));
    S->etab_cap = need;
  }
  int *t = S->etab;
  for (int s = 0; s < R->S; s++)
    for (int i = 0; i < d->stage[s].nin; i++) {
      int from = d->stage[s].in[i].from;
      const grid *pg = from == TS_PIPE_FEEDBACK ? (P ? &P->g[R->last] : NULL) : &S->g[from];
      S->ex[s][i] = S->ey[s][i] = NULL;
      if (!pg) continue;
      int plvl = d->stage[from == TS_PIPE_FEEDBACK ? R->last : from].level, clvl = d->stage[s].level;
      int halo = d->stage[s].in[i].halo;
      const grid *cg = &S->g[s];
      S->ex[s][i] = t;
      for (int tx = 0; tx < pg->nx; tx++, t += 2) {
        int p0 = tx * pg->tw, p1 = p0 + pg->tw < pg->w ? p0 + pg->tw : pg->w;
        consumer_range(cg->nx, cg->tw, 0, cg->w, clvl, plvl, halo, pg->w, p0, p1, &t[0], &t[1]);
      }
      S->ey[s][i] = t;
      for (int ty = 0; ty < pg->ny; ty++, t += 2) {
        int p0 = pg->y0 + ty * pg->th, p1 = p0 + pg->th < pg->y1 ? p0 + pg->th : pg->y1;
        consumer_range(cg->ny, cg->th, cg->y0, cg->y1, clvl, plvl, halo, pg->h, p0, p1, &t[0], &t[1]);
      }
    }
  return TS_OK;
}

/* Counts the consumers of producer tile (tx, ty) down through the edge table (s, i) of slot C. */
static void release(worker *W, slot *C, int64_t f, int cs, int ci, int tx, int ty) {
  const grid *cg = &C->g[cs];
  if (cg->n == 0) return;
  const int *xr = C->ex[cs][ci] + 2 * tx, *yr = C->ey[cs][ci] + 2 * ty;
  for (int y = yr[0]; y <= yr[1]; y++)
    for (int x = xr[0]; x <= xr[1]; x++) {
      int64_t t = (int64_t)y * cg->nx + x;
      if (atomic_fetch_sub_explicit(&C->cnt[cg->base + t], 1, memory_order_acq_rel) == 1)
        batch_add(W, ts__pipe_task_make(f, cs, t));
    }
}

/* Frame f-1's last-stage tile p is done and frame f is set up: count its consumers down. */
static void deliver_feedback(worker *W, int64_t f, int64_t p) {
  run *R = W->R;
  slot *P = slot_of(R, f - 1), *C = slot_of(R, f);
  const grid *pg = &P->g[R->last];
  int tx = (int)(p % pg->nx), ty = (int)(p / pg->nx);
  for (int k = 0; k < R->nfb; k++) release(W, C, f, R->fb[k].s, R->fb[k].i, tx, ty);
}


/* Sets frame f up in its slot (under start_mu, or before the workers start) and pushes its ready
 * tasks through W. */
static ts_status start_frame(worker *W, int64_t f) {
  run *R = W->R;
  const ts_pipe_desc *d = R->d;
  slot *S = slot_of(R, f);
  atomic_store(&S->ready_frame, -1);
  atomic_store(&S->cursor, 0); /* before the sources change: a stale taker's CAS fails */
  S->frame = f;
  if (R->o.gran == TS_PIPE_GRAN_AUTO) {
    S->gidx = ts__gran_next(&R->gran);
    S->tile_w = R->gran.cw[S->gidx];
    S->tile_h = R->gran.ch[S->gidx];
  } else {
    S->gidx = -1;
    S->tile_w = R->o.tile_w;
    S->tile_h = R->o.tile_h;
  }
  int64_t n = 0;
  for (int s = 0; s < R->S; s++) {
    grid *g = &S->g[s];
    int lv = d->stage[s].level;
    g->tw = S->tile_w >> lv > 0 ? S->tile_w >> lv : 1;
    g->th = S->tile_h >> lv > 0 ? S->tile_h >> lv : 1;
    g->w = R->w[s];
    g->h = R->h[s];
    g->y0 = R->ry0[s];
    g->y1 = R->ry1[s];
    g->nx = (g->w + g->tw - 1) / g->tw;
    g->ny = g->y1 > g->y0 ? (g->y1 - g->y0 + g->th - 1) / g->th : 0;
    g->base = n;
    g->n = (int64_t)g->nx * g->ny;
    if (g->n >= TS__PIPE_MAX_TILES)
      return ts_error(TS_ERR_INVALID_ARG, "pipe %s: stage %d would have %lld tiles (tile %dx%d; at most %d)",
                      d->name ? d->name : "", s, (long long)g->n, g->tw, g->th, TS__PIPE_MAX_TILES - 1);
    n += g->n;
  }
  S->ntasks = n;
  if (n > S->cap) {
    TS_TRY(grow((void **)&S->cnt, n, sizeof *S->cnt));
    TS_TRY(grow((void **)&S->cstate, n, sizeof *S->cstate));
    S->cap = n;
  }
  int64_t nl = S->g[R->last].n;
  if (nl > S->lastcap) {
    TS_TRY(grow((void **)&S->done, nl, sizeof *S->done));
    TS_TRY(grow((void **)&S->delivered, nl, sizeof *S->delivered));
    S->lastcap = nl;
  }
  for (int64_t i = 0; i < nl; i++) {
    atomic_init(&S->done[i], 0);
    atomic_init(&S->delivered[i], 0);
  }
  TS_TRY(edge_tables(R, S, f > 0 ? slot_of(R, f - 1) : NULL));
  if (R->o.poison)
    for (int a = 0; a < R->ndev; a++)
      for (int s = 0; s < R->S; s++) {
        size_t m = (size_t)R->w[s] * R->h[s] * d->stage[s].channels;
        for (size_t i = 0; i < m; i++) S->plane[a][s][i] = NAN;
      }
  /* counters; tasks with none are ready: the frame's sources */
  slot *P = f > 0 ? slot_of(R, f - 1) : NULL;
  int64_t nsrc = 0;
  for (int s = 0; s < R->S; s++) {
    const ts_pipe_stage *st = &d->stage[s];
    const grid *g = &S->g[s];
    for (int64_t t = 0; t < g->n; t++) {
      ts_pipe_rect r = tile_rect(g, t);
      int64_t c = 0;
      for (int i = 0; i < st->nin; i++) {
        const grid *pg;
        int from = st->in[i].from;
        if (from == TS_PIPE_FEEDBACK) {
          if (!P) continue; /* the first frame's feedback is the caller's (or none): no tiles */
          pg = &P->g[R->last];
          from = R->last;
        } else {
          pg = &S->g[from];
        }
        if (pg->n == 0) continue;
        int ax, bx, ay, by;
        producer_range(pg, d->stage[from].level, st->level, st->in[i].halo, r, &ax, &bx, &ay, &by);
        if (bx >= ax && by >= ay) c += (int64_t)(bx - ax + 1) * (by - ay + 1);
      }
      atomic_init(&S->cnt[g->base + t], (int32_t)c);
      atomic_init(&S->cstate[g->base + t], 0);
      if (c == 0) {
        if (nsrc == S->srccap) {
          int64_t cap = S->srccap ? 2 * S->srccap : 1024;
          TS_TRY(grow((void **)&S->src, cap, sizeof *S->src));
          S->srccap = cap;
        }
        S->src[nsrc++] = ts__pipe_task_make(f, s, t);
      }
    }
  }
  atomic_store_explicit(&S->nsrc, nsrc, memory_order_relaxed);
  atomic_store(&S->left, n);
  S->t0 = ts_now() - R->t_start;
  atomic_store(&S->ready_frame, f); /* published: frame f-1's last tiles now deliver themselves */
  atomic_store_explicit(&S->cursor, (uint64_t)(f + 1) << 32, memory_order_release);
  if (R->feedback && P && R->nfb > 0) {
    int64_t np = P->g[R->last].n;
    for (int64_t p = 0; p < np; p++)
      if (atomic_load(&P->done[p]) && atomic_exchange(&P->delivered[p], 1) == 0) deliver_feedback(W, f, p);
  }
  flush_batch(W);
  return TS_OK;
}

static void frame_complete(worker *W, int64_t f) {
  run *R = W->R;
  slot *S = slot_of(R, f);
  double now = ts_now() - R->t_start;
  ts_pipe_report *rep = R->rep;
  rep->frame_tile_w[f] = S->tile_w;
  rep->frame_tile_h[f] = S->tile_h;
  rep->frame_s[f] = now - S->t0;
  rep->frame_tasks[f] = S->ntasks;
  if (R->o.sink) {
    ts_pipe_buf b = plane_buf(R, S, R->ndev > 1 ? R->d->stage[R->last].device : 0, R->last);
    R->o.sink(R->o.frame0 + f, &b, R->o.sink_user);
  }
  pthread_mutex_lock(&R->start_mu);
  R->completed[f] = 1;
  if (R->o.gran == TS_PIPE_GRAN_AUTO) {
    double t = ts_now() - R->t_start;
    ts__gran_observe(&R->gran, S->gidx, t - R->last_completion);
    R->last_completion = t;
  }
  while (R->next_frame < R->o.frames && !atomic_load(&R->failed) &&
         (R->next_frame < R->o.inflight || R->completed[R->next_frame - R->o.inflight])) {
    ts_status s = start_frame(W, R->next_frame);
    if (s != TS_OK) {
      fail(R, s);
      break;
    }
    R->next_frame++;
  }
  pthread_mutex_unlock(&R->start_mu);
  if (atomic_fetch_sub(&R->outstanding, 1) == 1) atomic_store(&R->done, 1);
}

/* ---- running a task ------------------------------------------------------------------------ */

/* The oldest frame's next source (0: none left in the frames in flight). */
static uint64_t take_source(worker *W) {
  run *R = W->R;
  int64_t lo = atomic_load_explicit(&R->src_lo, memory_order_acquire);
  for (int64_t f = lo; f < lo + R->nslots && f < R->o.frames; f++) {
    slot *S = slot_of(R, f);
    for (;;) {
      uint64_t c = atomic_load_explicit(&S->cursor, memory_order_acquire);
      int64_t cf = (int64_t)(c >> 32) - 1; /* the frame the slot hands out (-1: being set up) */
      int64_t i = (int64_t)(c & 0xffffffffu);
      if (cf < f) break; /* frame f is not set up yet (or its slot is being set up) */
      if (cf > f || i >= atomic_load_explicit(&S->nsrc, memory_order_relaxed)) { /* f's sources are all taken */
        if (f == lo) { /* exhausted: later takers start at the next frame */
          int64_t e = lo;
          atomic_compare_exchange_strong(&R->src_lo, &e, lo + 1);
          lo++;
        }
        break;
      }
      /* a successful CAS means the slot was not set up again since c was read (that zeroes the
         cursor first), and it cannot be until this task completes: src[i] is this frame's */
      if (atomic_compare_exchange_weak_explicit(&S->cursor, &c, c + 1, memory_order_acq_rel, memory_order_relaxed))
        return S->src[i];
      W->st.contended++;
    }
  }
  return 0;
}

static void flush_done(worker *W) {
  if (W->pend == 0) return;
  int64_t f = W->pend_frame, n = W->pend;
  W->pend = 0;
  if (atomic_fetch_sub_explicit(&slot_of(W->R, f)->left, n, memory_order_acq_rel) == n) frame_complete(W, f);
}

static void copy_tile(run *R, slot *P, int s, int64_t p, int from, int to) {
  const grid *g = &P->g[s];
  ts_pipe_rect r = tile_rect(g, p);
  int c = R->d->stage[s].channels;
  size_t rowb = (size_t)(r.x1 - r.x0) * sizeof(float);
  for (int ch = 0; ch < c; ch++)
    for (int y = r.y0; y < r.y1; y++) {
      size_t off = ((size_t)ch * R->h[s] + y) * R->w[s] + r.x0;
      memcpy(P->plane[to][s] + off, P->plane[from][s] + off, rowb);
    }
  atomic_fetch_add_explicit(&R->copy_bytes, (int64_t)(rowb * (size_t)(r.y1 - r.y0) * (size_t)c), memory_order_relaxed);
  atomic_fetch_add_explicit(&R->copies, 1, memory_order_relaxed);
}

/* Lazy copy: the producer tiles of stage j in slot P that rect r reads, brought to arena `dev`. */
static void bring(run *R, slot *P, int j, int clvl, int halo, ts_pipe_rect r, int dev) {
  int home = R->d->stage[j].device;
  if (home == dev) return;
  const grid *pg = &P->g[j];
  if (pg->n == 0) return;
  int ax, bx, ay, by;
  producer_range(pg, R->d->stage[j].level, clvl, halo, r, &ax, &bx, &ay, &by);
  for (int ty = ay; ty <= by; ty++)
    for (int tx = ax; tx <= bx; tx++) {
      int64_t p = (int64_t)ty * pg->nx + tx;
      _Atomic uint8_t *st = &P->cstate[pg->base + p];
      if (atomic_load_explicit(st, memory_order_acquire) == 2) continue;
      uint8_t expect = 0;
      if (atomic_compare_exchange_strong(st, &expect, 1)) {
        copy_tile(R, P, j, p, home, dev);
        atomic_store_explicit(st, 2, memory_order_release);
      } else {
        while (atomic_load_explicit(st, memory_order_acquire) != 2) sched_yield();
      }
    }
}

static void stress(worker *W) {
  uint64_t r = ts_rng_next(&W->rng);
  if ((r & 7) == 0) { /* a short delay: 0..20 us of spinning */
    double until = ts_now() + (double)((r >> 8) % 20000) * 1e-9;
    while (ts_now() < until) {
    }
  } else if ((r & 255) == 1) { /* a stall of the whole worker: 0.1..1 ms asleep */
    struct timespec ts = {0, (long)(100000 + (r >> 16) % 900000)};
    nanosleep(&ts, NULL);
  } else if ((r & 15) == 2) {
    sched_yield();
  }
}

static void run_task(worker *W, ts__pipe_task k) {
  run *R = W->R;
  const ts_pipe_desc *d = R->d;
  int64_t f = ts__pipe_task_frame(k), t = ts__pipe_task_tile(k);
  int s = ts__pipe_task_stage(k);
  slot *S = slot_of(R, f);
  const ts_pipe_stage *st = &d->stage[s];
  const grid *g = &S->g[s];
  ts_pipe_rect r = tile_rect(g, t);
  int dev = R->ndev > 1 ? st->device : 0;
  if (R->o.stress_seed) stress(W);
  uint64_t t0 = ticks();
  ts_pipe_buf ib[TS_PIPE_MAX_IN];
  const ts_pipe_buf *in[TS_PIPE_MAX_IN];
  for (int i = 0; i < st->nin; i++) {
    int from = st->in[i].from;
    if (from == TS_PIPE_FEEDBACK) {
      if (f == 0) {
        in[i] = R->o.feedback0;
        continue;
      }
      slot *P = slot_of(R, f - 1);
      if (R->o.copy == TS_PIPE_COPY_LAZY) bring(R, P, R->last, st->level, st->in[i].halo, r, dev);
      ib[i] = plane_buf(R, P, dev, R->last);
    } else {
      if (R->o.copy == TS_PIPE_COPY_LAZY) bring(R, S, from, st->level, st->in[i].halo, r, dev);
      ib[i] = plane_buf(R, S, dev, from);
    }
    in[i] = &ib[i];
  }
  ts_pipe_buf ob = plane_buf(R, S, dev, s);
  st->run(in, &ob, r, R->o.frame0 + f, st->params);
  if (R->o.copy == TS_PIPE_COPY_EAGER) {
    copy_tile(R, S, s, t, dev, 1 - dev);
    atomic_store_explicit(&S->cstate[g->base + t], 2, memory_order_release);
  }
  uint64_t t1 = ticks();
  W->busy_ticks += t1 - t0;
  W->st.tasks++;
  if (R->o.timeline) {
    if (W->nev < W->evcap) {
      ts_pipe_event *e = &W->ev[W->nev++];
      e->worker = W->id;
      e->stage = s;
      e->frame = f;
      e->t0 = (double)(t0 - R->tick0); /* ticks until the report converts them */
      e->t1 = (double)(t1 - R->tick0);
    } else {
      W->evdrop++;
    }
  }
  /* release the consumers in this frame */
  {
    int tx = (int)(t % g->nx), ty = (int)(t / g->nx);
    for (int k2 = 0; k2 < R->ncons[s]; k2++) release(W, S, f, R->con[s][k2].s, R->con[s][k2].i, tx, ty);
  }
  /* and the next frame's, across the feedback edge */
  if (s == R->last && R->feedback && R->nfb > 0 && f + 1 < R->o.frames) {
    atomic_store(&S->done[t], 1);
    slot *N = slot_of(R, f + 1);
    if (atomic_load(&N->ready_frame) == f + 1 && atomic_exchange(&S->delivered[t], 1) == 0)
      deliver_feedback(W, f + 1, t);
  }
  flush_batch(W);
  /* count the task off its frame: batched per worker (one shared counter per frame would take a
     contended atomic per task), flushed when the worker turns to another frame, every 32 tasks,
     and before it goes idle */
  if (f != W->pend_frame) flush_done(W);
  W->pend_frame = f;
  if (++W->pend >= 32) flush_done(W);
}

static void *worker_main(void *arg) {
  worker *W = arg;
  run *R = W->R;
  int spins = 0;
  uint64_t idle0 = 0;
  bool idle = false;
  while (!atomic_load_explicit(&R->done, memory_order_acquire) && !atomic_load(&R->failed)) {
    uint64_t k = pop(W);
    if (!k) {
      flush_done(W);
      if (!idle) {
        idle0 = ticks(), idle = true;
        if (R->o.queue == TS_PIPE_Q_SHARDED) atomic_store_explicit(&W->hungry, 1, memory_order_relaxed);
      }
      /* spin (a released task arrives within microseconds), yield only when it lasts: a worker
         sharing its core with another (more workers than cores) must let it run */
      if (++spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield();
      }
      continue;
    }
    if (idle) {
      W->idle_ticks += ticks() - idle0;
      idle = false;
      atomic_store_explicit(&W->hungry, 0, memory_order_relaxed);
    }
    spins = 0;
    run_task(W, k);
  }
  if (idle) W->idle_ticks += ticks() - idle0;
  flush_done(W);
  return NULL;
}

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
  R->tick0 = ticks();
  for (R->next_frame = 0; R->next_frame < o.frames && R->next_frame < o.inflight; R->next_frame++)
    if ((st = start_frame(&R->wk[0], R->next_frame)) != TS_OK) goto done;
  int started = 0;
  for (int i = 1; i < R->nthreads; i++) {
    if (pthread_create(&R->wk[i].th, NULL, worker_main, &R->wk[i]) != 0) {
      fail(R, ts_error(TS_ERR_INTERNAL, "pipe: cannot start worker %d", i));
      break;
    }
    started = i;
  }
  worker_main(&R->wk[0]);
  for (int i = 1; i <= started; i++) pthread_join(R->wk[i].th, NULL);
  double wall = ts_now() - R->t_start;
  uint64_t dt = ticks() - R->tick0;
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
