/* tessera pipe: a runtime for multi-stage stencil pipelines over 2-D frames, after GOPipe (PACT'20:
 * the runtime, not the programmer, picks the task granularity, and schedules tasks of that size
 * dynamically while honouring halo and inter-stage dependences) and HiWayLib (ASPLOS'19: end-of-
 * pipeline detection by an outstanding-work counter, contention-relieved queues, lazy copies
 * between device arenas).
 *
 * A pipeline is a DAG of stages over a W x H domain. Each stage writes one plane of `channels`
 * float planes at a resolution level (level l: ceil(W / 2^l) x ceil(H / 2^l)) and reads up to
 * TS_PIPE_MAX_IN inputs: earlier stages (same level, one level finer: 2x2 downsampling, or one level
 * coarser: nearest upsampling) or, with TS_PIPE_FEEDBACK, the previous frame's last stage (an
 * iterative stencil: frame f+1 starts from frame f's result). A task is (frame, stage, tile); a
 * tile's task waits on a dependence counter of the producer tiles its input rectangle touches, and
 * the producer that brings it to zero makes it ready. Frames stream through: up to `inflight`
 * frames run at once, each with its own granularity.
 *
 * Kernel contract (what makes any tiling give bit-identical results): a kernel computes its output
 * over the rectangle r (its own coordinates) only, and reads input i only within r mapped to the
 * input's level and widened by the input's halo:
 *   same level   x -> [x - halo, x + halo]
 *   input finer  x -> [2x - halo, 2x + 1 + halo]       (downsampling)
 *   input coarser x -> [floor(x/2) - halo, floor(x/2) + halo]  (upsampling)
 * with coordinates clamped to the input plane (clamp-to-edge), and the same for y. Its result for
 * a pixel depends on that pixel's inputs only, never on r.
 *
 * Thread safety: descriptions and apps are immutable and may be shared; ts_pipe_run may run on
 * several threads at once with distinct options and reports (each run has its own workers). */
#ifndef TESSERA_PIPE_H
#define TESSERA_PIPE_H

#include "tessera/core.h"
#include "tessera/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_PIPE_MAX_STAGES 16
#define TS_PIPE_MAX_IN 4
#define TS_PIPE_MAX_LEVEL 6
#define TS_PIPE_FEEDBACK (-1) /* an input that is the previous frame's last stage (NULL on the first) */

/* A plane of `c` channels: element (ch, y, x) at data[ch * plane + y * row + x]. */
typedef struct ts_pipe_buf {
  float *data;
  int w, h, c;
  int64_t row, plane; /* elements between rows, between channels */
} ts_pipe_buf;

/* [x0, x1) x [y0, y1) */
typedef struct ts_pipe_rect {
  int x0, y0, x1, y1;
} ts_pipe_rect;

/* Computes out over r for frame `frame`. in[i] is input i as declared (NULL for a FEEDBACK input
 * on the run's first frame when the run has no initial state: the kernel then makes one). */
typedef void (*ts_pipe_kernel)(const ts_pipe_buf *const *in, const ts_pipe_buf *out, ts_pipe_rect r, int64_t frame,
                               const void *params);

typedef struct ts_pipe_input {
  int from; /* a stage index below this one's, or TS_PIPE_FEEDBACK */
  int halo; /* extra input pixels read on each side, in the input's coordinates (>= 0) */
} ts_pipe_input;

typedef struct ts_pipe_stage {
  const char *name;
  int level;    /* resolution level, 0..TS_PIPE_MAX_LEVEL; within 1 of each input's */
  int channels; /* output channels, >= 1 */
  int nin;      /* inputs, 0..TS_PIPE_MAX_IN (0: a source, which generates the frame) */
  ts_pipe_input in[TS_PIPE_MAX_IN];
  ts_pipe_kernel run;
  const void *params;
  double flops_per_px; /* arithmetic per output pixel, for reports (0: unknown) */
  int device;          /* 0 or 1: the arena the stage runs on when a run has two (ts_pipe_opts.copy) */
} ts_pipe_stage;

typedef struct ts_pipe_desc {
  const char *name;
  int width, height; /* level 0 */
  int nstages;
  ts_pipe_stage stage[TS_PIPE_MAX_STAGES];
} ts_pipe_desc;

/* Checks a description: sizes, levels, inputs (earlier stages or feedback; a feedback input needs
 * the last stage at the same level and channel count the reader expects), halos, kernels. */
ts_status ts_pipe_desc_check(const ts_pipe_desc *d);
/* The plane of stage s: its width, height (level-scaled) and channels. */
void ts_pipe_stage_size(const ts_pipe_desc *d, int s, int *w, int *h);

/* Rows (or columns) [*lo, *hi] (inclusive, clipped to the input's n_in) that outputs [a, b)
 * of a stage at level `lvl` read from an input at level `lvl_in` with halo `halo`: the kernel
 * contract above in one dimension. The runtime's dependences, the peers' `depend` clauses and the
 * MPI variant's ghost zones all come from this one function. */
void ts_pipe_input_span(int lvl, int lvl_in, int halo, int n_in, int a, int b, int *lo, int *hi);

/* ---- the built-in applications (GOPipe's kinds) -------------------------------------------- */

/* "edge"  blur -> Sobel gradient -> non-maximum suppression -> threshold (image pipeline)
 * "heat"  heat diffusion: 4 Jacobi sweeps per frame, fed back frame to frame
 * "isp"   camera ISP: Bayer mosaic -> black level / white balance -> demosaic -> colour matrix ->
 *         tone curve -> sharpen
 * "flow"  optical flow on a 3-level pyramid (Lucas-Kanade at the top, refined down the levels)
 * "life"  Conway's game of life, 4 generations per frame, fed back
 * "cnn"   conv3x3 -> ReLU -> maxpool -> conv3x3 -> ReLU -> maxpool -> conv1x1 (fixed weights) */
typedef struct ts_pipe_app ts_pipe_app;

/* Names of the built-in apps, NULL-terminated. */
const char *const *ts_pipe_app_names(void);
/* Makes app `name` over a width x height domain (each >= 1). TS_ERR_NOT_FOUND for a bad name. */
ts_status ts_pipe_app_create(const char *name, int width, int height, ts_pipe_app **app);
void ts_pipe_app_destroy(ts_pipe_app *app);
/* The app's pipeline (owned by the app). */
const ts_pipe_desc *ts_pipe_app_desc(const ts_pipe_app *app);
/* The app's reference: frame `frame`'s last-stage output computed whole-frame, stage by stage,
 * by code written apart from the stage kernels. prev: the previous frame's output for a feedback
 * app (NULL on the first frame, or for a non-feedback app); out: the last stage's plane (w x h x c,
 * contiguous: row = w, plane = w * h). Bit-identical to any run of the pipeline. */
ts_status ts_pipe_app_reference(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);

/* ---- running ------------------------------------------------------------------------------ */

typedef enum ts_pipe_queue {
  TS_PIPE_Q_SHARDED = 0, /* a work-stealing deque per worker (owner pushes and pops without
                            contention, thieves take one task each), plus a per-worker inbox */
  TS_PIPE_Q_LOCKED,      /* one queue behind one mutex */
  TS_PIPE_Q_MPMC         /* one bounded lock-free multi-producer multi-consumer ring */
} ts_pipe_queue;

typedef enum ts_pipe_copy {
  TS_PIPE_COPY_NONE = 0, /* one arena: every worker reads every plane */
  TS_PIPE_COPY_LAZY,     /* two arenas (workers split into devices 0 and 1, stages pinned to their
                            device): a tile moves to the other arena when a consumer there first
                            touches it */
  TS_PIPE_COPY_EAGER     /* two arenas: every tile is copied to the other arena when produced */
} ts_pipe_copy;

typedef enum ts_pipe_gran {
  TS_PIPE_GRAN_FIXED = 0, /* tile_w x tile_h throughout */
  TS_PIPE_GRAN_AUTO       /* chosen online: a start from the cost model, then adjusted from measured
                             frame and task times, frame by frame */
} ts_pipe_gran;

typedef struct ts_pipe_opts {
  int threads;           /* workers (0: ts_default_threads()) */
  int64_t frames;        /* frames to run (>= 1) */
  int64_t frame0;        /* number of the first frame (kernels see frame0 .. frame0 + frames - 1) */
  int inflight;          /* frames in flight at once (default 2; 1: frame after frame) */
  ts_pipe_gran gran;
  int tile_w, tile_h;    /* FIXED: the tile in level-0 pixels (a stage at level l uses tile >> l,
                            at least 1); AUTO: the starting tile (0: from the model) */
  ts_pipe_queue queue;
  ts_pipe_copy copy;
  int row0, row1;        /* row1 > row0: compute only rows [row0, row1) of the last stage, and of
                            each other stage only what those need (the MPI variant's share) */
  const ts_pipe_buf *feedback0; /* the FEEDBACK input of the first frame (NULL: none); read only
                                   where rows need it */
  void (*sink)(int64_t frame, const ts_pipe_buf *out, void *user); /* each frame's last-stage plane,
                            once, when the frame completes (on a worker; frames may complete out of
                            order when inflight > 1) */
  void *sink_user;
  bool timeline;         /* record every task (worker, stage, frame, start, end) for the SVG */
  bool poison;           /* fill each plane with NaN before its frame (tests: a kernel that reads
                            outside its contract, or a missed dependence, shows as NaN) */
  uint64_t stress_seed;  /* > 0: random delays before tasks and stalls of whole workers, from this
                            seed (the termination stress test) */
} ts_pipe_opts;

/* threads 0, frames 1, frame0 0, inflight 2, AUTO, sharded, no copy, all rows. */
ts_pipe_opts ts_pipe_opts_default(void);

typedef struct ts_pipe_worker_stats {
  int64_t tasks;       /* tasks run */
  double busy_s;       /* in kernels (and lazy copies) */
  double idle_s;       /* looking for work and finding none */
  int64_t steals, steal_attempts; /* sharded: tasks taken from others, tries */
  int64_t handoffs;    /* sharded: released tasks this worker gave a hungry worker's inbox */
  int64_t contended;   /* locked: acquisitions that found the lock held; mpmc: CAS retries;
                          sharded: deque CAS races lost */
} ts_pipe_worker_stats;

typedef struct ts_pipe_event {
  int32_t worker, stage;
  int64_t frame;
  double t0, t1; /* seconds since the run started */
} ts_pipe_event;

typedef struct ts_pipe_report {
  char app[48];
  int width, height, threads, nstages;
  int64_t frames;
  ts_pipe_queue queue;
  ts_pipe_copy copy;
  ts_pipe_gran gran;
  double wall_s;              /* the whole run */
  double mpix_per_s;          /* level-0 pixels x frames / wall */
  double gflops;              /* from the stages' flops_per_px (0 when unknown) */
  int64_t tasks;              /* tasks run, all workers */
  int64_t tasks_expected;     /* tasks the frames' tile grids hold (equal when nothing was lost) */
  int64_t copy_bytes;         /* bytes moved between arenas */
  int64_t copies;             /* tile copies */
  double overhead_s;          /* per-task runtime overhead the model started from */
  int *frame_tile_w, *frame_tile_h; /* [frames]: the granularity each frame ran with */
  double *frame_s;            /* [frames]: each frame's time from its start to its completion */
  int64_t *frame_tasks;       /* [frames] */
  ts_pipe_worker_stats *worker; /* [threads] */
  ts_pipe_event *events;      /* [nevents] when timeline */
  int64_t nevents, events_dropped;
} ts_pipe_report;

/* Runs d for o->frames frames. *rep (may be NULL) gets the report (ts_pipe_report_free). Errors:
 * a description ts_pipe_desc_check rejects, bad options (TS_ERR_INVALID_ARG naming the field),
 * TS_ERR_OOM. */
ts_status ts_pipe_run(const ts_pipe_desc *d, const ts_pipe_opts *o, ts_pipe_report **rep);
void ts_pipe_report_free(ts_pipe_report *rep);

/* The report as JSON (malloc'd, free()): the figures above, the granularity over the frames, per
 * worker counters. */
ts_status ts_pipe_report_json(const ts_pipe_report *rep, char **json);
/* A timeline of the tasks per worker (colour = stage) as SVG at path (needs timeline). */
ts_status ts_pipe_report_svg(const ts_pipe_report *rep, const ts_pipe_desc *d, const char *path);

/* ---- offline granularity: the best fixed tile, found exhaustively --------------------------- */

#define TS_PIPE_TUNE_MAX 64

/* The ladder of candidate tiles for a width x height domain (widths 32, 64, ... and heights 2, 4,
 * ..., each doubling, capped at the domain): what AUTO moves on and ts_pipe_tune searches. Writes up
 * to cap entries and returns their count. */
int ts_pipe_ladder(int width, int height, int *tile_w, int *tile_h, int cap);

typedef struct ts_pipe_tune_entry {
  int tile_w, tile_h;
  double median_s; /* seconds per run of the options' frames (NaN when pruned) */
  bool pruned;     /* dropped after warm-up: over 1.5x the fastest */
} ts_pipe_tune_entry;

typedef struct ts_pipe_tune_result {
  int n, best; /* entries, the fastest */
  ts_pipe_tune_entry e[TS_PIPE_TUNE_MAX];
  bool cached; /* read from the artifact store, not measured now */
  ts_provenance prov;
} ts_pipe_tune_result;

/* Every ladder tile as a FIXED run of o's frames (o's threads, inflight, queue, copy), timed in
 * interleaved rounds by the measure engine; the fastest is the offline best. Kept in the artifact
 * store (kind "pipe-gran", keyed by the pipeline's shape, its size and those options; made again on
 * another machine or kernel level) and read from it unless `fresh` (then measured and replaced).
 * progress: a line on stderr. */
ts_status ts_pipe_tune(const ts_pipe_desc *d, const ts_pipe_opts *o, bool fresh, bool progress, ts_pipe_tune_result *out);

/* ---- the termination stress test ------------------------------------------------------------ */

/* Randomized runs of a counting pipeline (five stages over three levels with a feedback edge; each
 * kernel counts its visits per frame, stage and pixel): random domains (1..48 a side), frames,
 * frames in flight, workers (1..max_threads), queues, arenas, granularities (fixed 1x1 up, or
 * auto), with random delays and worker stalls injected (ts_pipe_opts.stress_seed). Each run is
 * checked: every (frame, stage, pixel) computed exactly once, every frame delivered to the sink
 * exactly once, and the output equal to a sequential whole-plane run. */
typedef struct ts_pipe_stress_result {
  int64_t runs, tasks, pixels;   /* runs made, tasks and (frame, stage, pixel) results checked */
  int64_t lost, duplicated;      /* results never computed, computed more than once */
  int64_t frames_bad;            /* frames not delivered exactly once */
  int64_t mismatched;            /* runs whose output differs from the sequential run */
  int64_t failed_runs;           /* runs that returned an error */
  double wall_s;
} ts_pipe_stress_result;

/* progress (may be NULL) is called after each run. */
ts_status ts_pipe_stress(int64_t runs, uint64_t seed, int max_threads, void (*progress)(int64_t done, void *user),
                         void *user, ts_pipe_stress_result *out);

/* Names: "sharded"/"locked"/"mpmc", "none"/"lazy"/"eager", "fixed"/"auto"; parse returns
 * TS_ERR_INVALID_ARG for an unknown name. */
const char *ts_pipe_queue_name(ts_pipe_queue q);
const char *ts_pipe_copy_name(ts_pipe_copy c);
ts_status ts_pipe_queue_parse(const char *s, ts_pipe_queue *q);
ts_status ts_pipe_copy_parse(const char *s, ts_pipe_copy *c);

#ifdef __cplusplus
}
#endif
#endif
