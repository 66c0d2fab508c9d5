/* Shapes shared by the pipeline's CUDA host code (C), its device executor (pipe_exec.cuh, CUDA C++)
 * and the executor's CPU emulation (tests/cuda/pipe_emu.cpp).
 *
 * A GRAPH is F frames of a pipeline flattened into tasks: task id = f * per_frame + base[s] + t
 * (frame f of the launch, stage s, tile t of stage s's grid, row-major). Tile grids follow the CPU
 * runtime (pipe_run.c): the tile at level l is max(1, tile >> l) on each axis, tiles cut from
 * (0, 0), the last ones clipped. Dependences: consumer task (f, s, t) waits on every producer tile
 * its input spans touch (ts_pipe_input_span, once per input, so a stage read twice counts twice);
 * a FEEDBACK input of frame f >= 1 waits on frame f-1's last stage, frame 0's on nothing (its input
 * is the launch's `prev` plane, or none). cnt0[i] = task i's producer count; its consumers are
 * cons[off[i] .. off[i+1]) (ascending ids, duplicates as counted). */
#ifndef TS_CUDA_PIPE_INTERNAL_H
#define TS_CUDA_PIPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifndef __cplusplus /* the device code and its emulation need only the plain structs below */
#include "tessera/pipe.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define TS__PD_MAXS 16 /* = TS_PIPE_MAX_STAGES */

/* One task: the frame (launch-relative), stage and output rectangle [x0, x1) x [y0, y1) in the
 * stage's own coordinates. */
typedef struct ts__pd_task {
  int32_t frame, stage, x0, y0, x1, y1;
} ts__pd_task;

typedef struct ts__pd_grid {
  int32_t tw, th, nx, ny, w, h; /* tiles of tw x th over the w x h plane */
  int32_t base, n;              /* first task index within a frame, tiles */
} ts__pd_grid;

typedef struct ts__pd_graph {
  int32_t nstages, frames;
  int32_t per_frame; /* tasks of one frame */
  int32_t n;         /* frames * per_frame */
  ts__pd_grid g[TS__PD_MAXS];
  ts__pd_task *task; /* [n] */
  int32_t *cnt0;     /* [n] */
  int64_t *off;      /* [n + 1] */
  int32_t *cons;     /* [off[n]] */
  int32_t nready;    /* tasks with cnt0 == 0 */
} ts__pd_graph;

#ifndef __cplusplus
/* Flattens `frames` frames of d with a tile_w x tile_h level-0 tile (both >= 1). Errors:
 * TS_ERR_INVALID_ARG (more than 2^31 - 1 tasks or consumer edges per task list), TS_ERR_OOM.
 * ts__pd_graph_free on success only (a failure leaves nothing to free). */
ts_status ts__pd_graph_build(const ts_pipe_desc *d, int frames, int tile_w, int tile_h, ts__pd_graph *g);
void ts__pd_graph_free(ts__pd_graph *g);
#endif

/* ---- the executor's device state ------------------------------------------------------------ */

/* A queue: a write-once array of `cap` task slots (cap = the launch's task count: each task is
 * pushed exactly once, so a queue can never fill and no slot is reused), `tail` = slots reserved
 * by pushers, `head` = slots claimed by poppers, on separate 128-byte lines. A slot holds -1 until
 * its pusher stores the task id. */
typedef struct ts__pd_queue {
  int32_t head;
  int32_t pad0[31];
  int32_t tail;
  int32_t pad1[31];
} ts__pd_queue;

/* Per-block counters, written by the block's thread 0 when it exits. */
typedef struct ts__pd_bstat {
  int64_t tasks, steals, steal_attempts, contended;
  int64_t busy_ns, idle_ns;
} ts__pd_bstat;

enum { TS__PD_HEAT = 1, TS__PD_LIFE = 2, TS__PD_EDGE = 3 };
enum { TS__PD_Q_GLOBAL = 0, TS__PD_Q_SHARDED = 1 };
#define TS__PD_FROM_FEEDBACK (-1) /* = TS_PIPE_FEEDBACK */
#define TS__PD_FROM_NONE (-2)     /* a source stage */
#define TS__PD_BATCH 64           /* sharded pushes: ready consumers gathered per batch */

/* Everything a launch reads, by value (device pointers). Planes: frame f's plane of stage s at
 * planes + f * fstride + poff[s], [c][h][w] contiguous (w = pw[s], h = ph[s], c = pc[s]). */
typedef struct ts__pd_exec {
  /* the graph */
  int32_t ntasks, per_frame, frames, nstages;
  const ts__pd_task *task;
  const int64_t *off;
  const int32_t *cons;
  int32_t *cnt; /* [ntasks], from cnt0 */
  /* queues: nq of them; queue k's slots at slots + k * ntasks */
  int32_t qmode, nq;
  ts__pd_queue *q;
  int32_t *slots;
  /* termination and accounting */
  int32_t *outstanding;          /* tasks not complete; 0 ends the launch */
  int32_t *runs;                 /* [ntasks] times each task ran (1 each, checked by the tests) */
  int32_t *frame_left;           /* [frames] tasks of the frame not complete */
  uint64_t *frame_t0, *frame_t1; /* [frames] first task start, last task end (device timer, ns) */
  ts__pd_bstat *bstat;           /* [blocks] */
  int32_t *error;                /* 1: stalled (no work found for stall_ns while tasks were outstanding) */
  int64_t stall_ns;
  /* the app */
  int32_t app, w, h; /* level-0 domain */
  uint32_t seed;
  int64_t frame0;            /* frame number of the launch's frame 0 */
  int32_t from[TS__PD_MAXS]; /* each stage's (single) input: a stage, TS_PIPE_FEEDBACK or FROM_NONE */
  float *planes;
  int64_t fstride, poff[TS__PD_MAXS];
  int32_t pw[TS__PD_MAXS], ph[TS__PD_MAXS], pc[TS__PD_MAXS];
  const float *prev; /* frame 0's FEEDBACK input (last-stage plane), NULL: the app's initial state */
} ts__pd_exec;

/* ---- back ends: the real device (pipe_cuda.c) or the CPU emulation (tests) ---------------- */

/* Memory and launch operations on "device" memory; each returns 0 or a back-end error code
 * (errstr names it). launch runs one persistent kernel of `blocks` x `threads` over E and waits. */
typedef struct ts__pd_ops {
  const char *name;
  void *ctx;
  int (*alloc)(void **p, size_t bytes, void *ctx);
  void (*release)(void *p, void *ctx);
  int (*h2d)(void *dst, const void *src, size_t bytes, void *ctx);
  int (*d2h)(void *dst, const void *src, size_t bytes, void *ctx);
  int (*d2d)(void *dst, const void *src, size_t bytes, void *ctx);
  int (*fill)(void *dst, int byte, size_t bytes, void *ctx);
  int (*launch)(const ts__pd_exec *E, int blocks, int threads, void *ctx);
  const char *(*errstr)(int e, void *ctx);
  int blocks;  /* persistent blocks the back end keeps resident (opts.threads > 0 caps it) */
  int threads; /* threads per block */
  int group;   /* blocks per queue in sharded runs (at most 64 queues) */
  int64_t stall_ns;
  /* tests: called on each graph after it is built (a broken dependence must show) */
  void (*tamper)(ts__pd_graph *g, void *user);
  void *tamper_user;
} ts__pd_ops;

/* What the tests check after each launch (may be NULL in ts__pd_run). */
typedef struct ts__pd_check {
  int64_t launches, tasks;  /* launches made, tasks they held */
  int64_t runs_bad;         /* tasks that did not run exactly once */
  int64_t outstanding_left; /* sum of the outstanding counters after the launches */
  int64_t frames_left;      /* frames whose frame_left did not reach 0 */
  int64_t pushed, popped;   /* sum over queues and launches of tail, head */
  int64_t initial;          /* tasks ready at launch (pushed by the host) */
  int64_t steals;
} ts__pd_check;

#ifndef __cplusplus
/* ts_pipe_cuda_run on a back end; chk (may be NULL) gets the launches' counts. */
ts_status ts__pd_run(const ts__pd_ops *ops, const char *app, int width, int height, const ts_pipe_opts *o,
                     ts_pipe_report **rep, ts__pd_check *chk);
#endif

/* pipe_cuda.cu: the kernel launch and the persistent grid's size (0 on success, else a
 * cudaError_t). */
int ts__pd_cuda_launch(const ts__pd_exec *E, int blocks, int threads);
int ts__pd_cuda_grid(int threads, int *blocks);

#ifdef __cplusplus
}
#endif
#endif
