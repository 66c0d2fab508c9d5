/* tessera attention profiler and cost model: measured time of one block (rows x cols of the mask,
 * full or mixed) run with each tile of a menu, and a model interpolating that table, so the tile
 * chooser (ts_attn_choose_tiles) and the schedulers decide from this machine's timings instead of
 * the analytic placeholder (ts_attn_cost_default).
 *
 * Method (one table entry): a schedule with one panel holding ONE segment, the block at rows
 * [0, rows) x columns [0, cols) of an n x n mask, n = max(rows, cols) (when cols > rows, a second
 * panel [rows, n) with no segment completes the row partition), a plan for it (1 thread), and
 * ts_attn_execute (batch = heads = 1) on Q/K/V that stay in cache: warm-up calls, then the MEDIAN
 * of timed calls. Calls are timed by the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID; the
 * one-thread execute runs on it) unless wall_clock is set: on a shared machine a call preempted by
 * other processes then still reads its own run time, not the queueing (a core shared with a busy
 * SMT sibling still slows it). The figure is the whole execute call in seconds, so it includes the
 * per-panel work (Q packing, O normalization) and the call overhead, like a block in a real
 * schedule pays a share of them. Densities: 1 = a FULL segment; p < 1 = a MIXED segment over a
 * uniformly random mask with exactly round(p * rows * cols) allowed cells (one mask per shape and
 * density, shared by every tile, seeded). The same schedule with NO segment (empty mask) is timed
 * per shape too: overhead_s, the part of an entry that is the call and the panels, not the
 * block's work.
 *
 * Table layout: seconds[tile][density][row size][col size], overhead_s[row size][col size], the
 * same size grid on both axes. Kept in the artifact store (artifact.h: attn-profile/<level>-d<d>-
 * <dtype>-<kernels>) with a provenance record (measure.h: cpu_model and kernels
 * (ts_isa_name(ts_isa_active())) as the machine profile (hwinfo.h) records them, threads (always
 * 1), date, tessera version, clock) and d, dtype, level, the grid, densities and menu. A cached
 * profile is reused only when all of these match the request on this machine; otherwise
 * ts_attn_profile_get measures again and overwrites it. */
#ifndef TESSERA_ATTN_PROFILE_H
#define TESSERA_ATTN_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/attn.h"
#include "tessera/core.h"
#include "tessera/measure.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_ATTN_PROFILE_VERSION 2 /* 2: provenance is a ts_provenance record (clock inside it) */
#define TS_ATTN_PROFILE_MAX_SIZES 32
#define TS_ATTN_PROFILE_MAX_DENS 8
#define TS_ATTN_PROFILE_MAX_MENU 64
#define TS_ATTN_PROFILE_MAX_SIDE 4096
#define TS_ATTN_PROFILE_MAX_PASSES 15

/* Default grids, timing and cost of each level (default menu, d = 64, fp32, Zen 4). Every level
 * makes `passes` whole passes over the grid; in a pass an entry is the median of its timed calls,
 * and the table keeps the median of an entry's passes (a burst of load hits one pass, not all).
 *   quick     sizes {16, 64}, densities {0.75, 1}, 1 pass of 1 warm-up + 1 timed call: well under
 *             1 s (tests)
 *   standard  sizes {8,16,32,48,64,96,128,192,256}, densities {0.6, 0.8, 1}, 3 passes of 1 warm-up
 *             + >= 3 calls and >= 1 ms: 14,823 timings, >= 15 s of timed calls; measured 51 s
 *             on a 2-core VM shared by other jobs (load average 10)
 *   full      sizes {8,12,16,24,32,48,64,96,128,160,192,256}, densities {0.6,0.7,0.8,0.9,1},
 *             3 passes of 2 warm-ups + >= 5 calls and >= 2 ms: 43,632 timings, >= 90 s of timed
 *             calls alone, so several minutes (over 10 on a loaded 2-core VM) */
typedef enum ts_attn_profile_level {
  TS_ATTN_PROFILE_QUICK = 0,
  TS_ATTN_PROFILE_STANDARD,
  TS_ATTN_PROFILE_FULL,
  TS_ATTN_PROFILE_LEVEL_COUNT
} ts_attn_profile_level;

/* The pass a timing measures: the forward (ts_attn_execute), the backward alone (ts_attn_backward
 * after an untimed ts_attn_execute_train gave it O and lse; tessera/attn_train.h) or a training
 * step's attention (forward with lse, then backward). The backward walks the forward plan's items
 * but costs ~2.5x per cell and weighs tile shapes differently (dK/dV partials per key, dQ per row),
 * so a schedule solved with forward costs need not be the best for the backward: profiles,
 * calibration and guard may time either. */
typedef enum ts_attn_pass { TS_ATTN_PASS_FORWARD = 0, TS_ATTN_PASS_BACKWARD, TS_ATTN_PASS_TRAIN, TS_ATTN_PASS_COUNT } ts_attn_pass;
/* "forward", "backward", "train" and back (TS_ERR_INVALID_ARG listing the names). */
const char *ts_attn_pass_name(ts_attn_pass p);
ts_status ts_attn_pass_parse(const char *name, ts_attn_pass *out);

/* "quick", "standard", "full" and back (TS_ERR_INVALID_ARG listing the names). */
const char *ts_attn_profile_level_name(ts_attn_profile_level l);
ts_status ts_attn_profile_level_parse(const char *name, ts_attn_profile_level *out);

typedef struct ts_attn_profile_opts {
  ts_attn_profile_level level; /* standard */
  int64_t d;                   /* head dimension, 1..4096 (64) */
  ts_dtype dtype;              /* TS_F32 or TS_BF16 (f32) */
  /* Overrides of the level's grid (NULL/0: the level's): sizes ascending in [1, 4096], densities
   * ascending in (0, 1], menu tiles in [1, TS_ATTN_TILE_MAX]^2 (NULL: ts_attn_default_menu). */
  const int32_t *sizes;
  int nsizes;
  const double *densities;
  int ndens;
  const ts_attn_tile *menu;
  int nmenu;
  int warmup, repeats, passes; /* < 0 / <= 0 / <= 0: the level's (passes <= 15) */
  double min_time_s;           /* < 0: the level's */
  uint64_t seed;               /* random masks of the mixed entries (1) */
  bool wall_clock;             /* time by the wall clock instead of thread CPU time (false) */
  bool progress;               /* ts_progress on stderr (true) */
  ts_attn_pass pass;           /* what each entry times (forward) */
} ts_attn_profile_opts;

ts_attn_profile_opts ts_attn_profile_opts_default(void);

typedef struct ts_attn_profile {
  int version;            /* TS_ATTN_PROFILE_VERSION */
  /* where and when (measure.h): cpu_model, kernels (ts_isa_name(ts_isa_active())), threads of the
   * timed executes (1), date, tessera_version, clock ("thread_cpu" or "wall"), machine profile key */
  ts_provenance prov;
  char level[16];
  ts_attn_pass pass;      /* "pass" in the JSON (absent: forward, as every profile before it) */
  int64_t d;
  ts_dtype dtype;
  int warmup, repeats, passes;
  double min_time_s;
  double measure_s;       /* wall time of the whole measurement */
  /* grid */
  int nsizes, ndens, nmenu;
  int32_t sizes[TS_ATTN_PROFILE_MAX_SIZES];
  double densities[TS_ATTN_PROFILE_MAX_DENS];
  ts_attn_tile menu[TS_ATTN_PROFILE_MAX_MENU];
  double *seconds;        /* [nmenu][ndens][nsizes][nsizes] (ts_malloc'd) */
  double *overhead;       /* [nsizes][nsizes]: the empty schedule (ts_malloc'd) */
} ts_attn_profile;

/* A profile with the resolved grid of o (NULL: defaults), this machine's provenance, and
 * zeroed seconds and overhead tables for the caller (or the measurement) to fill. Errors: TS_ERR_INVALID_ARG naming the
 * option and value, TS_ERR_DTYPE for a dtype other than f32/bf16. Free with ts_attn_profile_free. */
ts_status ts_attn_profile_init(ts_attn_profile *p, const ts_attn_profile_opts *o);
void ts_attn_profile_free(ts_attn_profile *p);
/* &seconds[tile][dens][ri][ci] (indices unchecked). */
double *ts_attn_profile_at(const ts_attn_profile *p, int tile, int dens, int ri, int ci);

/* Measures the table (init + `passes` passes timing every entry, on one thread of the caller;
 * ts_progress on stderr when o->progress). */
ts_status ts_attn_profile_measure(const ts_attn_profile_opts *o, ts_attn_profile *out);

/* The artifact's path: <cache>/attn-profile/<level>-d<d>-<dtype>-<kernels>[-<pass>].json (the pass
 * named unless forward) */
ts_status ts_attn_profile_default_path(const ts_attn_profile_opts *o, char *buf, size_t cap);

/* JSON: {"format":"tessera-attn-profile","version":2,"provenance":{cpu_model,kernels,threads,date,
 * tessera_version,clock,profile},"level","pass" (optional, forward when absent),"d","dtype","warmup","repeats","passes","min_time_s",
 * "measure_s","sizes":[..],"densities":[..],"menu":[[br,bc],..],
 * "seconds":[tile][dens][row size][col size],"overhead_s":[row size][col size]}. from_json
 * validates everything (TS_ERR_FORMAT naming the field, e.g. "seconds[3][1][0][2]: expected a
 * positive number"; TS_ERR_UNSUPPORTED for a newer version; TS_ERR_FORMAT too for text that is
 * not JSON; *p zeroed first, empty on error). to_json: a malloc'd NUL-terminated string (*json;
 * the caller free()s it), TS_ERR_OOM on allocation failure. Measured figures are kept to 9
 * significant digits, so a saved table reloads bit for bit. */
ts_status ts_attn_profile_to_json(const ts_attn_profile *p, char **json);
ts_status ts_attn_profile_from_json(const char *json, ts_attn_profile *p);
/* Atomic write; load reports TS_ERR_NOT_FOUND for a missing file, else the from_json errors
 * prefixed with the path. */
ts_status ts_attn_profile_save(const ts_attn_profile *p, const char *path);
ts_status ts_attn_profile_load(const char *path, ts_attn_profile *p);

/* True when p was measured on this machine (cpu model, kernel level, 1 thread, format version,
 * tessera version) for exactly the request o (d, dtype, level, clock, resolved grid, densities,
 * menu).
 * why (may be NULL): the first mismatch, e.g. "d 64 != requested 128". */
bool ts_attn_profile_matches(const ts_attn_profile *p, const ts_attn_profile_opts *o, char *why, size_t cap);
/* The cached profile when it matches, else measures and saves it: path NULL: the artifact store
 * (ts__artifact_get: a corrupt file is moved aside); else the profile JSON file at path (a
 * malformed one is reported on stderr and replaced). A failed save is reported on stderr and does
 * not fail the call. *measured (may be NULL) says which happened. */
ts_status ts_attn_profile_get(const ts_attn_profile_opts *o, const char *path, ts_attn_profile *out, bool *measured);

/* ---- cost model ----------------------------------------------------------------------------- */

/* Prediction for a block of rows x cols with nnz allowed cells and a tile of the profile's menu:
 *  - per density level, bilinear in (log rows, log cols) between the four surrounding grid
 *    entries; exact at grid points, and monotone between them when the table is;
 *  - beyond the largest size S along an axis, proportional extrapolation: t(x) = t(S) * x / S
 *    (the number of sub-tiles grows as x / b along an axis whose tile side b <= S); below the
 *    smallest size s: t(x) = o + (t(s) - o) * x / s, o the interpolated overhead_s (the call and
 *    panel cost stays, the block's work shrinks; the work part is at least 5% of t(s));
 *  - across densities, linear in nnz / (rows * cols) between the levels; clamped to the lowest
 *    level below it (a MIXED segment computes every non-empty sub-tile whatever its density) and
 *    to the highest above it. nnz = rows * cols with a density-1 level reads that (FULL) level. */
typedef struct ts_attn_cost_model ts_attn_cost_model;

/* Copies what it needs from p (p may be freed). TS_ERR_INVALID_ARG for an empty profile.
 * Thread safety: immutable after create; predict, overhead, residue, menu and
 * ts_attn_cost_profiled only read it and may run on any number of threads at once. */
ts_status ts_attn_cost_model_create(ts_attn_cost_model **m, const ts_attn_profile *p);
void ts_attn_cost_model_destroy(ts_attn_cost_model *m);
/* Seconds for the block. TS_ERR_NOT_FOUND when t is not in the menu; TS_ERR_INVALID_ARG for
 * rows, cols < 1 or nnz outside [0, rows * cols]. */
ts_status ts_attn_cost_model_predict(const ts_attn_cost_model *m, int64_t rows, int64_t cols, int64_t nnz,
                                     ts_attn_tile t, double *seconds);
/* The empty schedule's time for a rows x cols block (same interpolation, no tile, no density). */
ts_status ts_attn_cost_model_overhead(const ts_attn_cost_model *m, int64_t rows, int64_t cols, double *seconds);
/* ts_attn_cost_fn for ts_attn_choose_tiles and the schedulers: user = the model. Returns the
 * block's own work in seconds, what it adds inside a schedule: predict - overhead (at least 5% of
 * predict), so costs of many blocks add up without counting the call overhead once per block. The
 * tile ranking is the same as predict's (the overhead does not depend on the tile). 1e300 (never
 * chosen) for a tile not in the menu or an invalid block. */
double ts_attn_cost_profiled(const ts_block *b, ts_attn_tile t, void *model);
/* The menu the model knows (valid while m lives). */
int ts_attn_cost_model_menu(const ts_attn_cost_model *m, const ts_attn_tile **menu);

/* Residue (or any MIXED segment over sparse cells): the segment rows [r0, r0+nr) x columns
 * [c0, c0+nc) of `cells` (e.g. ts_blocks.residue) cut into t.br x t.bc sub-tiles; every sub-tile
 * holding an allowed cell is priced as one masked sub-tile, i.e. the block work
 * (ts_attn_cost_profiled) of a t.br x t.bc block at the profile's lowest density; empty sub-tiles
 * are free (skipped). *nonempty (may be NULL) receives their count. */
ts_status ts_attn_cost_model_residue(const ts_attn_cost_model *m, const ts_csr *cells, int64_t r0, int64_t nr,
                                     int64_t c0, int64_t nc, ts_attn_tile t, double *seconds, int64_t *nonempty);

/* ---- model error ---------------------------------------------------------------------------- */

typedef struct ts_attn_measure_opts {
  int64_t d;           /* 64 */
  ts_dtype dtype;      /* f32 */
  int warmup, repeats; /* 1, 5 */
  double min_time_s;   /* 2e-3: keep timing an entry until this much time is spent */
  bool wall_clock;     /* false: thread CPU time, as the profile */
  bool progress;       /* true */
} ts_attn_measure_opts;
ts_attn_measure_opts ts_attn_measure_opts_default(void);

/* seconds[b] = measured time of block b alone with tiles[b], by the profile's method (a single
 * MIXED segment, as ts_attn_schedule_from_blocks runs blocks) on the block's own cells of mask
 * (n x n; the block's rectangle is copied to the origin). */
ts_status ts_attn_blocks_measure(const ts_attn_measure_opts *o, const ts_bitmap *mask, const ts_block *blocks,
                                 const ts_attn_tile *tiles, int64_t nblocks, double *seconds);

typedef struct ts_attn_model_error {
  int64_t n;                  /* blocks compared */
  double scale;               /* factor applied to the predictions (1 unless fitted) */
  double median_rel, p90_rel; /* |pred - meas| / meas */
  double mean_rel, max_rel;
  double pearson;             /* correlation of predicted and measured seconds (0 when undefined) */
  double pearson_log;         /* the same on log seconds */
  double sum_measured, sum_predicted; /* seconds (predictions scaled) */
} ts_attn_model_error;

/* Error statistics of predicted[i] against measured[i] (> 0). fit_scale: predictions are first
 * multiplied by median(measured / predicted), for models in arbitrary units (ts_attn_cost_default). */
ts_status ts_attn_model_error_compute(const double *measured, const double *predicted, int64_t n, bool fit_scale,
                                      ts_attn_model_error *out);

#ifdef __cplusplus
}
#endif
#endif
