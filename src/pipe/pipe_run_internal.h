/* The pipeline runtime's state, shared by the executor (pipe_run.c: frames, tasks, workers) and
 * its set-up (pipe_setup.c: options, regions, allocation, the report). */
#ifndef TS_PIPE_RUN_INTERNAL_H
#define TS_PIPE_RUN_INTERNAL_H

#include "pipe/pipe_internal.h"

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

/* Sets frame f up in its slot (under start_mu, or before the workers start) and pushes its ready
 * tasks through W. */
ts_status ts__pipe_start_frame(worker *W, int64_t f);
/* A worker's loop until the run is done or has failed (arg: the worker). */
void *ts__pipe_worker_main(void *arg);
/* Records the run's first error (the others stop at their next look). */
void ts__pipe_fail(run *R, ts_status s);

#endif
