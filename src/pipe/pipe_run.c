/* The pipeline runtime's executor: frames of (stage, tile) tasks with dependence counters, a pool
 * of pthread workers over the ready queues, termination by an outstanding-work counter (no
 * barrier), lazy or eager copies between two device arenas, and the granularity controller between
 * frames (set-up, options and the report: pipe_setup.c).
 *
 * A frame lives in a slot (its tile grids, counters and planes); `inflight` frames run at once,
 * plus one slot for an iterative pipeline (its first stage reads the previous frame's last plane
 * while the frame itself writes its own). The worker that completes frame f starts the frames
 * that f's completion lets in (under a mutex taken once per frame, never per task).
 *
 * Dependences: task (f, s, t) waits on the number of producer tiles its input spans touch
 * (ts_pipe_input_span); the producer that completes decrements each consumer it touches (from the
 * frame's edge tables, made with the same span function by a search over the consumer's tiles, so
 * the two sides count the same relation) and pushes those that reach zero. Feedback crosses frames:
 * frame f's last-stage tile may complete before frame f+1 is set up, so it marks itself done, and
 * either it (seeing f+1 published) or f+1's setup (seeing it done) delivers its decrements,
 * whichever wins an exchange on its `delivered` flag: exactly once, with no lock between them (the
 * seq_cst store then load on both sides means at least one of the two sees the other). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipe/pipe_run_internal.h"

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

void ts__pipe_fail(run *R, ts_status s) {
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
      if (s != TS_OK) ts__pipe_fail(R, s);
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
      if (s != TS_OK) ts__pipe_fail(R, s);
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
    if (s != TS_OK) ts__pipe_fail(R, s);
  }
}

static void batch_add(worker *W, ts__pipe_task k) {
  if (W->nbatch == W->batchcap) {
    int c = W->batchcap ? 2 * W->batchcap : 256;
    uint64_t *b = realloc(W->batch, (size_t)c * sizeof *b);
    if (!b) {
      flush_batch(W);
      if (W->nbatch == W->batchcap) {
        ts__pipe_fail(W->R, ts_error(TS_ERR_OOM, "pipe: task batch"));
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


ts_status ts__pipe_start_frame(worker *W, int64_t f) {
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
    ts_status s = ts__pipe_start_frame(W, R->next_frame);
    if (s != TS_OK) {
      ts__pipe_fail(R, s);
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
  uint64_t t0 = ts_ticks();
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
  uint64_t t1 = ts_ticks();
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

void *ts__pipe_worker_main(void *arg) {
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
        idle0 = ts_ticks(), idle = true;
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
      W->idle_ticks += ts_ticks() - idle0;
      idle = false;
      atomic_store_explicit(&W->hungry, 0, memory_order_relaxed);
    }
    spins = 0;
    run_task(W, k);
  }
  if (idle) W->idle_ticks += ts_ticks() - idle0;
  flush_done(W);
  return NULL;
}
