/* Internals of the pipeline runtime: ready queues, frame slots, the granularity controller. */
#ifndef TS_PIPE_INTERNAL_H
#define TS_PIPE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "tessera/pipe.h"

/* A task: frame (run-relative, 32 bits) | stage (5 bits) | tile (27 bits). 0 is never a task
 * (frame numbers start at 1 inside a task word), so 0 means "none". */
typedef uint64_t ts__pipe_task;
#define TS__PIPE_TILE_BITS 27
#define TS__PIPE_MAX_TILES (1 << TS__PIPE_TILE_BITS)
static inline ts__pipe_task ts__pipe_task_make(int64_t f, int s, int64_t t) {
  return ((uint64_t)(f + 1) << 32) | ((uint64_t)s << TS__PIPE_TILE_BITS) | (uint64_t)t;
}
static inline int64_t ts__pipe_task_frame(ts__pipe_task k) { return (int64_t)(k >> 32) - 1; }
static inline int ts__pipe_task_stage(ts__pipe_task k) { return (int)((k >> TS__PIPE_TILE_BITS) & 31); }
static inline int64_t ts__pipe_task_tile(ts__pipe_task k) { return (int64_t)(k & (TS__PIPE_MAX_TILES - 1)); }

/* ---- ready queues (pipe_queue.c) ------------------------------------------------------------ */

/* Chase-Lev work-stealing deque (growable; old arrays retired until the run ends). */
typedef struct ts__cl_array {
  int64_t cap; /* power of two */
  struct ts__cl_array *prev;
  _Atomic uint64_t buf[];
} ts__cl_array;
typedef struct ts__deque {
  _Alignas(64) _Atomic int64_t top;
  _Alignas(64) _Atomic int64_t bottom;
  _Atomic(ts__cl_array *) arr;
} ts__deque;
ts_status ts__deque_init(ts__deque *q, int64_t cap);
void ts__deque_free(ts__deque *q);
ts_status ts__deque_push(ts__deque *q, uint64_t x);          /* owner only */
uint64_t ts__deque_take(ts__deque *q, int64_t *races);       /* owner only; 0 when empty */
uint64_t ts__deque_steal(ts__deque *q, int64_t *races);      /* anyone; 0 when empty or lost */

/* A LIFO stack behind a mutex (the "locked" queue, and the sharded mode's inboxes). */
typedef struct ts__locked {
  _Alignas(64) pthread_mutex_t mu;
  uint64_t *v;
  int64_t n, cap;
  _Atomic int64_t size; /* n, readable without the lock (a hint for idle workers) */
} ts__locked;
ts_status ts__locked_init(ts__locked *q, int64_t cap);
void ts__locked_free(ts__locked *q);
ts_status ts__locked_push(ts__locked *q, const uint64_t *x, int n, int64_t *contended);
uint64_t ts__locked_pop(ts__locked *q, int64_t *contended);

/* Bounded lock-free MPMC ring (sequence numbers per cell). */
typedef struct ts__mpmc_cell {
  _Atomic int64_t seq;
  _Atomic uint64_t val;
} ts__mpmc_cell;
typedef struct ts__mpmc {
  ts__mpmc_cell *cell;
  int64_t mask;
  _Alignas(64) _Atomic int64_t head; /* next to pop */
  _Alignas(64) _Atomic int64_t tail; /* next to push */
} ts__mpmc;
ts_status ts__mpmc_init(ts__mpmc *q, int64_t cap);
void ts__mpmc_free(ts__mpmc *q);
bool ts__mpmc_push(ts__mpmc *q, uint64_t x, int64_t *retries); /* false when full */
uint64_t ts__mpmc_pop(ts__mpmc *q, int64_t *retries);          /* 0 when empty */

/* ---- granularity (pipe_gran.c) ---------------------------------------------------------------- */

#define TS__GRAN_MAXC 64
typedef struct ts__gran {
  int ncand;
  int cw[TS__GRAN_MAXC], ch[TS__GRAN_MAXC]; /* candidate tiles, level 0 */
  int gw, gh;                               /* the ladder: gw widths x gh heights, index = iw * gh + ih */
  double cost[TS__GRAN_MAXC];               /* measured seconds per frame (0: unmeasured) */
  int nmeas[TS__GRAN_MAXC];                 /* measurement windows taken */
  int cur, best;                            /* index running now, best measured */
  int start;                                /* the model's pick */
  int nobs;                                 /* frames observed (the run's first is not used) */
  double win_s;                             /* current window: seconds and frames of `cur` observed */
  int win_n;
  int inflight;                             /* a window holds a multiple of this many frames */
  int64_t frames;                           /* in the run: probes may take a quarter of them */
  int64_t probe_frames;                     /* frames run with a candidate other than the best */
  int last_win;                             /* frames the last window took */
  double settled_cost;                      /* the best's cost when the probes ended (0: probing) */
  double overhead_s;                        /* per-task runtime cost the model used */
} ts__gran;

/* What the model starts from. */
typedef struct ts__gran_model {
  double o;         /* per-task runtime cost, seconds */
  double c;         /* seconds of work per level-0 pixel, all stages */
  double bytes_px;  /* bytes of the stages' planes per level-0 pixel */
  double l2, l3;    /* private L2 and shared L3 bytes */
  int threads, inflight;
  bool feedback;    /* frames depend on each other (no parallelism across frames) */
  int64_t frames;   /* frames in the run */
} ts__gran_model;

/* The ladder for a W x H domain and the model's start; start_w/h > 0: start there instead. */
void ts__gran_init(ts__gran *g, int W, int H, const ts__gran_model *m, int start_w, int start_h);
/* A frame that ran with candidate `idx` took `s` seconds per frame (completion interval). */
void ts__gran_observe(ts__gran *g, int idx, double s);
/* The candidate the next frame should run with. */
int ts__gran_next(ts__gran *g);
/* The smallest tile area of the ladder (sizes the bounded queues). */
void ts__gran_min_tile(const ts__gran *g, int *w, int *h);

/* ---- the offline tuner's artifact payload (pipe_tune.c; fuzzed) ------------------------------ */

typedef struct cJSON cJSON;
/* {"best": i, "candidates": [{"tile_w", "tile_h", "median_s" (null: pruned)}]} and back; the reader
 * names the first bad field (TS_ERR_FORMAT). to_cjson: NULL when out of memory. */
ts_status ts__pipe_tune_from_cjson(const cJSON *data, ts_pipe_tune_result *out);
cJSON *ts__pipe_tune_to_cjson(const ts_pipe_tune_result *r);

#endif
