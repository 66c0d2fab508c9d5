/* The thread team of one eval call: the state's worker pool, a sense-counting spin barrier and
 * the work splits. One run of the pool spans a whole eval (every layer of every phase), so the
 * per-phase cost is this barrier (~0.1-0.5 us on 2 cores) rather than a fork/join, and the per-call
 * cost is the pool's hand-over (a few us while its workers spin; an OpenMP fork under
 * OMP_WAIT_POLICY=passive woke a sleeping vCPU on every decode token, ~100 us). */
#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "llm/llm_internal.h"

void ts__barrier_init(ts__barrier *b, int n) {
  atomic_init(&b->count, 0);
  atomic_init(&b->phase, 0);
  atomic_init(&b->sleepers, 0);
  b->n = n;
}

/* Spin up to this long before sleeping on a futex. Phases of a decode step last 10-100 us, and
 * the threads' shares of a phase end within a few microseconds of each other on a quiet machine,
 * so a waiter spins through normal imbalance without paying a futex wake-up; but on a loaded
 * machine the other thread may be descheduled for a whole time slice, and spinning then keeps
 * the CPU from the very thread being waited for. Measured (SmolLM2 decode, 2 threads, 2 cores with
 * one other busy process): 30 us gave 70-75 tok/s where 300 us gave 18-50, and the same ~230-270
 * tok/s when the other process paused. */
#define SPIN_SECONDS 30e-6

static void futex_wait(atomic_int *addr, int val) {
  syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake_all(atomic_int *addr) { syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0); }

/* One turn of a bounded spin: a pause (or one side prefetch from pf, keeping memory busy for the
 * next phase), and false once `limit` seconds have passed (the clock is read every 256 turns). */
typedef struct spin {
  int i;
  double t0;
} spin;
static bool spin_on(spin *sp, double limit, ts__pfq *pf) {
  if (pf && pf->i < pf->n) ts__pfq_pump(pf, 1);
  else _mm_pause();
  if ((++sp->i & 255) == 0) {
    const double t = ts_now();
    if (sp->t0 == 0) sp->t0 = t;
    else if (t - sp->t0 > limit) return false;
  }
  return true;
}

/* Until *word != val: spin for `limit` seconds, then sleep on the futex. *sleepers is raised before
 * the word is re-checked and the writer stores the word before it reads *sleepers (both seq_cst),
 * so either the sleeper sees the new value or the writer sees the sleeper; FUTEX_WAIT returns at
 * once when the word has already moved on. Returns the new value. */
static int wait_change(atomic_int *word, int val, atomic_int *sleepers, double limit, ts__pfq *pf) {
  spin sp = {0, 0};
  int v;
  while ((v = atomic_load_explicit(word, memory_order_acquire)) == val)
    if (!spin_on(&sp, limit, pf)) break;
  if (v != val) return v;
  atomic_fetch_add_explicit(sleepers, 1, memory_order_seq_cst);
  while ((v = atomic_load_explicit(word, memory_order_seq_cst)) == val) futex_wait(word, val);
  atomic_fetch_sub_explicit(sleepers, 1, memory_order_seq_cst);
  return v;
}

void ts__barrier_wait(ts__barrier *b, ts__pfq *pf) {
  if (b->n <= 1) return;
  int ph = atomic_load_explicit(&b->phase, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == b->n - 1) {
    atomic_store_explicit(&b->count, 0, memory_order_relaxed);
    atomic_store_explicit(&b->phase, ph + 1, memory_order_seq_cst);
    if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst)) futex_wake_all(&b->phase);
    return;
  }
  wait_change(&b->phase, ph, &b->sleepers, SPIN_SECONDS, pf);
}

void ts__flag_init(ts__flag *f) {
  atomic_init(&f->seq, 0);
  atomic_init(&f->sleepers, 0);
}

void ts__flag_set(ts__flag *f, int v) {
  atomic_store_explicit(&f->seq, v, memory_order_seq_cst);
  if (atomic_load_explicit(&f->sleepers, memory_order_seq_cst)) futex_wake_all(&f->seq);
}

void ts__flag_wait(ts__flag *f, int v, ts__pfq *pf) {
  int cur = atomic_load_explicit(&f->seq, memory_order_acquire);
  while (cur != v) cur = wait_change(&f->seq, cur, &f->sleepers, SPIN_SECONDS, pf);
}

void ts__split(int64_t n, int t, int nt, int64_t align, int64_t *lo, int64_t *hi) {
  if (align < 1) align = 1;
  int64_t units = (n + align - 1) / align;
  int64_t a = units * t / nt, b = units * (t + 1) / nt;
  *lo = a * align < n ? a * align : n;
  *hi = b * align < n ? b * align : n;
}

void ts__share_begin(ts__share *sh, int tid, int nt, int64_t units) {
  const uint64_t a = (uint64_t)(units * tid / nt), b = (uint64_t)(units * (tid + 1) / nt);
  atomic_store_explicit(&sh[tid].se, a << 32 | b, memory_order_release);
}

/* Takes units of slot v: the owner a run from the front, a thief one unit from the back; returns
 * the first unit (-1 when the slot is empty) and the run's length in *count. */
#ifndef SHARE_DIV
#define SHARE_DIV 4
#endif
static int64_t take(ts__share *v, int thief, int64_t *count) {
  uint64_t se = atomic_load_explicit(&v->se, memory_order_acquire);
  for (;;) {
    const uint64_t a = se >> 32, b = se & 0xFFFFFFFFu;
    if (a >= b) return -1;
    uint64_t c = thief ? 1 : (b - a) / SHARE_DIV;
    if (c < 1) c = 1;
    const uint64_t nse = thief ? a << 32 | (b - 1) : (a + c) << 32 | b;
    if (atomic_compare_exchange_weak_explicit(&v->se, &se, nse, memory_order_acq_rel, memory_order_acquire)) {
      *count = (int64_t)c;
      return (int64_t)(thief ? b - 1 : a);
    }
  }
}

int64_t ts__share_next(ts__share *sh, int tid, int nt, int64_t *count) {
  int64_t u = take(&sh[tid], 0, count);
  for (int k = 1; u < 0 && k < nt; k++) u = take(&sh[(tid + k) % nt], 1, count);
  return u;
}

/* ---- worker pool ---------------------------------------------------------------------------- */

#include <pthread.h>
#include <stdlib.h>

struct ts__pool {
  _Alignas(64) atomic_int gen;  /* the run's generation: bumped by ts__pool_run (futex word) */
  atomic_int sleepers;          /* workers asleep on gen */
  _Alignas(64) atomic_int done; /* workers past the current run (futex word) */
  atomic_int done_sleeper;      /* the caller asleep on done (0 or 1) */
  _Alignas(64) ts__pool_fn fn;  /* the run (written before gen is bumped) */
  void *arg;
  int nrun, stop, n;
  struct worker {
    ts__pool *p;
    int tid;
    pthread_t th;
  } * w;
};

static void *worker_main(void *a) {
  struct worker *w = a;
  ts__pool *p = w->p;
  int seen = 0;
  for (;;) {
    seen = wait_change(&p->gen, seen, &p->sleepers, TS__POOL_SPIN, NULL);
    if (p->stop) return NULL;
    if (w->tid < p->nrun) p->fn(p->arg, w->tid, p->nrun);
    atomic_fetch_add_explicit(&p->done, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->done_sleeper, memory_order_seq_cst)) futex_wake_all(&p->done);
  }
}

/* until every worker is past the run: each step waits (spin, then futex) for the count last seen
 * to move on */
static void wait_done(ts__pool *p) {
  int d;
  while ((d = atomic_load_explicit(&p->done, memory_order_acquire)) != p->n)
    wait_change(&p->done, d, &p->done_sleeper, SPIN_SECONDS, NULL);
}

ts__pool *ts__pool_create(int workers, int *started) {
  *started = 0;
  ts__pool *p = workers > 0 ? ts_calloc(1, sizeof *p) : NULL;
  if (!p) return NULL;
  p->w = calloc((size_t)workers, sizeof *p->w);
  if (!p->w) {
    ts_free(p);
    return NULL;
  }
  atomic_init(&p->gen, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->done, 0);
  atomic_init(&p->done_sleeper, 0);
  for (int i = 0; i < workers; i++) {
    p->w[i].p = p;
    p->w[i].tid = i + 1;
    if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0) break;
    p->n++;
  }
  if (p->n == 0) {
    free(p->w);
    ts_free(p);
    return NULL;
  }
  *started = p->n;
  return p;
}

void ts__pool_run(ts__pool *p, ts__pool_fn fn, void *arg, int nrun) {
  p->fn = fn;
  p->arg = arg;
  p->nrun = nrun;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed); /* every worker is past the last run */
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst)) futex_wake_all(&p->gen);
  fn(arg, 0, nrun);
  /* the workers end within a phase of the caller (the run's last barrier); a descheduled one may
   * take a time slice: then sleep */
  wait_done(p);
}

void ts__pool_destroy(ts__pool *p) {
  if (!p) return;
  p->stop = 1;
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);
  futex_wake_all(&p->gen);
  for (int i = 0; i < p->n; i++) pthread_join(p->w[i].th, NULL);
  free(p->w);
  ts_free(p);
}

/* ---- adaptive decode team ------------------------------------------------------------------ */

#define EW 0.3 /* weight of the newest step in the running averages */

static double ew(double avg, double x) { return avg > 0 ? (1 - EW) * avg + EW * x : x; }

int ts__team_size(const ts__team_ctl *c, int nt) {
  if (nt <= 1) return 1;
  return (c->solo != c->probe) ? 1 : nt; /* solo, or a probe of solo from the team */
}

void ts__team_update(ts__team_ctl *c, int nt, int used, double seconds, double wait_share) {
  if (nt <= 1 || !(seconds > 0)) return;
  if (used > 1) { /* a full-team step */
    if (c->probe) { /* probe from solo: take the team back when it beat the solo average */
      c->probe = 0;
      c->since = 0;
      if (seconds < c->t_solo && wait_share < TS__TEAM_WAIT_SOLO) {
        c->solo = 0;
        c->t_team = seconds;
        c->wait_ew = wait_share;
      }
      return;
    }
    c->t_team = ew(c->t_team, seconds);
    c->wait_ew = ew(c->wait_ew, wait_share);
    c->since++;
    if (c->wait_ew > TS__TEAM_WAIT_SOLO && c->since >= 2) c->probe = 1; /* try one thread next */
    return;
  }
  /* a one-thread step */
  if (c->probe) { /* probe from the team: go solo when it beat the team's average */
    c->probe = 0;
    c->since = 0;
    if (seconds < c->t_team) {
      c->solo = 1;
      c->t_solo = seconds;
    } else { /* the waits were not worth leaving for: stay, and probe again after 16 steps at the earliest */
      c->wait_ew = 0;
      c->since = 2 - 16;
    }
    return;
  }
  c->t_solo = ew(c->t_solo, seconds);
  if (++c->since >= TS__TEAM_PROBE_EVERY) c->probe = 1;
}
