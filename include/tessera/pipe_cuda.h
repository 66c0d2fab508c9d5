/* tessera pipe on an NVIDIA GPU: the pipeline runtime of pipe.h as one persistent CUDA kernel.
 *
 * The host flattens a batch of frames of an app's pipeline into a task graph (tasks = (frame,
 * stage, tile) with the CPU runtime's tile grids, dependence counters and consumer lists from
 * ts_pipe_input_span, feedback edges from frame f-1's last stage to frame f's FEEDBACK readers) and
 * uploads it; one launch then runs the whole batch: persistent thread blocks (as many as fit on
 * the device at once) pop ready tasks from device-side queues, compute the tile with all their
 * threads, and release the consumers whose counters reach zero. The launch ends when an
 * outstanding-work counter reaches zero (HiWayLib's end-of-pipeline detection; no grid barrier).
 *
 * Queues (ts_pipe_opts.queue):
 *   TS_PIPE_Q_MPMC     one global queue, every ready task pushed on its own
 *   TS_PIPE_Q_SHARDED  one queue per group of blocks (HiWayLib's contention relief): a block pushes
 *                      the consumers a task makes ready as one batch to its group's queue, pops
 *                      from it, and steals single tasks from the other groups' queues when empty
 *   TS_PIPE_Q_LOCKED   TS_ERR_UNSUPPORTED (no locks on the device)
 *
 * Options as in pipe.h, with these meanings here: `inflight` frames make one launch (their planes
 * are all resident; frames overlap within the launch as far as their dependences allow; the next
 * launch starts when the previous one ended); the tile is tile_w x tile_h when given (FIXED or
 * AUTO with a start), else 64 x 16 (no online granularity on the device); `threads` > 0 caps the
 * persistent blocks (0: as many as the device keeps resident); `sink` gets every frame in order
 * after its launch, on the calling thread; `poison` fills the planes with NaN before each launch;
 * feedback0 is the first frame's FEEDBACK input. Not supported (TS_ERR_UNSUPPORTED): copy other
 * than NONE, a row range, LOCKED. timeline and stress_seed are ignored.
 *
 * Device apps: "heat", "life" (the feedback stencils) and "edge"; any other app is
 * TS_ERR_UNSUPPORTED. Results are bit-identical to ts_pipe_app_reference (the device kernels use
 * the C kernels' arithmetic in the same order, compiled without FMA contraction).
 *
 * Without a usable device every run returns TS_ERR_UNSUPPORTED with "no CUDA device" in
 * ts_last_error(). CUDA errors are TS_ERR_INTERNAL (TS_ERR_OOM for allocations); a launch in which
 * no block finds work for 20 s while tasks remain outstanding stops and returns TS_ERR_INTERNAL
 * (a lost dependence: a bug), rather than hanging the device. */
#ifndef TESSERA_PIPE_CUDA_H
#define TESSERA_PIPE_CUDA_H

#include <stdbool.h>

#include "tessera/pipe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when a CUDA device can be used. */
bool ts_pipe_cuda_available(void);

/* Runs built-in app `app` over width x height for o->frames frames (o NULL: the defaults of
 * ts_pipe_opts_default). *rep (may be NULL) gets the report (ts_pipe_report_free): threads = the
 * persistent blocks, worker[b] = block b's counters (tasks, steals, CAS retries as contended,
 * busy/idle from the device's timer), frame_s = each frame's first task start to last task end. */
ts_status ts_pipe_cuda_run(const char *app, int width, int height, const ts_pipe_opts *o, ts_pipe_report **rep);

/* Names of the apps with device kernels, NULL-terminated. */
const char *const *ts_pipe_cuda_app_names(void);

#ifdef __cplusplus
}
#endif
#endif
