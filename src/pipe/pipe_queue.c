/* The runtime's ready queues: a Chase-Lev work-stealing deque per worker (the sharded mode, after
 * Le, Pop, Cohen and Zappa Nardelli's C11 formulation, with the fences folded into seq_cst
 * operations so ThreadSanitizer sees every ordering), a mutex-protected LIFO stack, and a bounded
 * lock-free MPMC ring with a sequence number per cell (Vyukov's design). Tasks are nonzero words. */
#include <stdlib.h>
#include <string.h>

#include "pipe/pipe_internal.h"

/* ---- Chase-Lev deque ---- */

static ts__cl_array *cl_new(int64_t cap) {
  ts__cl_array *a = malloc(sizeof *a + (size_t)cap * sizeof(_Atomic uint64_t));
  if (!a) return NULL;
  a->cap = cap;
  a->prev = NULL;
  for (int64_t i = 0; i < cap; i++) atomic_init(&a->buf[i], 0);
  return a;
}

ts_status ts__deque_init(ts__deque *q, int64_t cap) {
  int64_t c = 64;
  while (c < cap) c *= 2;
  ts__cl_array *a = cl_new(c);
  if (!a) return ts_error(TS_ERR_OOM, "pipe: deque of %lld tasks", (long long)c);
  atomic_init(&q->top, 0);
  atomic_init(&q->bottom, 0);
  atomic_init(&q->arr, a);
  return TS_OK;
}

void ts__deque_free(ts__deque *q) {
  ts__cl_array *a = atomic_load(&q->arr);
  while (a) {
    ts__cl_array *p = a->prev;
    free(a);
    a = p;
  }
  atomic_store(&q->arr, NULL);
}

ts_status ts__deque_push(ts__deque *q, uint64_t x) {
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed);
  int64_t t = atomic_load_explicit(&q->top, memory_order_acquire);
  ts__cl_array *a = atomic_load_explicit(&q->arr, memory_order_relaxed);
  if (b - t > a->cap - 1) { /* full: double, keep the old array for thieves still reading it */
    ts__cl_array *n = cl_new(a->cap * 2);
    if (!n) return ts_error(TS_ERR_OOM, "pipe: growing a deque to %lld tasks", (long long)(a->cap * 2));
    for (int64_t i = t; i < b; i++)
      atomic_store_explicit(&n->buf[i & (n->cap - 1)],
                            atomic_load_explicit(&a->buf[i & (a->cap - 1)], memory_order_relaxed), memory_order_relaxed);
    n->prev = a;
    atomic_store_explicit(&q->arr, n, memory_order_release);
    a = n;
  }
  atomic_store_explicit(&a->buf[b & (a->cap - 1)], x, memory_order_relaxed);
  atomic_store_explicit(&q->bottom, b + 1, memory_order_release);
  return TS_OK;
}

uint64_t ts__deque_take(ts__deque *q, int64_t *races) {
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_relaxed) - 1;
  ts__cl_array *a = atomic_load_explicit(&q->arr, memory_order_relaxed);
  atomic_store_explicit(&q->bottom, b, memory_order_seq_cst);
  int64_t t = atomic_load_explicit(&q->top, memory_order_seq_cst);
  uint64_t x = 0;
  if (t <= b) {
    x = atomic_load_explicit(&a->buf[b & (a->cap - 1)], memory_order_relaxed);
    if (t == b) { /* the last one: race the thieves for it */
      if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed)) {
        x = 0;
        (*races)++;
      }
      atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
    }
  } else {
    atomic_store_explicit(&q->bottom, b + 1, memory_order_relaxed);
  }
  return x;
}

uint64_t ts__deque_steal(ts__deque *q, int64_t *races) {
  int64_t t = atomic_load_explicit(&q->top, memory_order_seq_cst);
  int64_t b = atomic_load_explicit(&q->bottom, memory_order_seq_cst);
  if (t >= b) return 0;
  ts__cl_array *a = atomic_load_explicit(&q->arr, memory_order_acquire);
  uint64_t x = atomic_load_explicit(&a->buf[t & (a->cap - 1)], memory_order_relaxed);
  if (!atomic_compare_exchange_strong_explicit(&q->top, &t, t + 1, memory_order_seq_cst, memory_order_relaxed)) {
    (*races)++;
    return 0;
  }
  return x;
}

/* ---- locked stack ---- */

ts_status ts__locked_init(ts__locked *q, int64_t cap) {
  if (cap < 64) cap = 64;
  q->v = malloc((size_t)cap * sizeof *q->v);
  if (!q->v) return ts_error(TS_ERR_OOM, "pipe: queue of %lld tasks", (long long)cap);
  q->n = 0;
  q->cap = cap;
  atomic_init(&q->size, 0);
  pthread_mutex_init(&q->mu, NULL);
  return TS_OK;
}

void ts__locked_free(ts__locked *q) {
  if (!q->v) return;
  pthread_mutex_destroy(&q->mu);
  free(q->v);
  q->v = NULL;
}

static void lock_counted(pthread_mutex_t *mu, int64_t *contended) {
  if (pthread_mutex_trylock(mu) != 0) {
    (*contended)++;
    pthread_mutex_lock(mu);
  }
}

ts_status ts__locked_push(ts__locked *q, const uint64_t *x, int n, int64_t *contended) {
  lock_counted(&q->mu, contended);
  if (q->n + n > q->cap) {
    int64_t c = q->cap;
    while (c < q->n + n) c *= 2;
    uint64_t *v = realloc(q->v, (size_t)c * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&q->mu);
      return ts_error(TS_ERR_OOM, "pipe: growing a queue to %lld tasks", (long long)c);
    }
    q->v = v;
    q->cap = c;
  }
  memcpy(q->v + q->n, x, (size_t)n * sizeof *x);
  q->n += n;
  atomic_store_explicit(&q->size, q->n, memory_order_relaxed);
  pthread_mutex_unlock(&q->mu);
  return TS_OK;
}

uint64_t ts__locked_pop(ts__locked *q, int64_t *contended) {
  if (atomic_load_explicit(&q->size, memory_order_relaxed) == 0) return 0;
  lock_counted(&q->mu, contended);
  uint64_t x = 0;
  if (q->n > 0) {
    x = q->v[--q->n];
    atomic_store_explicit(&q->size, q->n, memory_order_relaxed);
  }
  pthread_mutex_unlock(&q->mu);
  return x;
}

/* ---- bounded MPMC ring ---- */

ts_status ts__mpmc_init(ts__mpmc *q, int64_t cap) {
  int64_t c = 64;
  while (c < cap) c *= 2;
  q->cell = malloc((size_t)c * sizeof *q->cell);
  if (!q->cell) return ts_error(TS_ERR_OOM, "pipe: MPMC ring of %lld tasks", (long long)c);
  for (int64_t i = 0; i < c; i++) {
    atomic_init(&q->cell[i].seq, i);
    atomic_init(&q->cell[i].val, 0);
  }
  q->mask = c - 1;
  atomic_init(&q->head, 0);
  atomic_init(&q->tail, 0);
  return TS_OK;
}

void ts__mpmc_free(ts__mpmc *q) {
  free(q->cell);
  q->cell = NULL;
}

bool ts__mpmc_push(ts__mpmc *q, uint64_t x, int64_t *retries) {
  int64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
  for (;;) {
    ts__mpmc_cell *c = &q->cell[pos & q->mask];
    int64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    int64_t dif = seq - pos;
    if (dif == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_relaxed, memory_order_relaxed)) {
        atomic_store_explicit(&c->val, x, memory_order_relaxed);
        atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
        return true;
      }
      (*retries)++; /* pos reloaded by the failed CAS */
    } else if (dif < 0) {
      return false; /* full */
    } else {
      pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    }
  }
}

uint64_t ts__mpmc_pop(ts__mpmc *q, int64_t *retries) {
  int64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
  for (;;) {
    ts__mpmc_cell *c = &q->cell[pos & q->mask];
    int64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    int64_t dif = seq - (pos + 1);
    if (dif == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed, memory_order_relaxed)) {
        uint64_t x = atomic_load_explicit(&c->val, memory_order_relaxed);
        atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
        return x;
      }
      (*retries)++;
    } else if (dif < 0) {
      return 0; /* empty */
    } else {
      pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    }
  }
}
