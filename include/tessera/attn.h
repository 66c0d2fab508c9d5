/* tessera attention: tile-aware sparse attention for one mask shared by every batch and head.
 *
 *   O[b][h] = softmax_masked(Q[b][h] K[b][h]^T * scale) V[b][h],  scale = 1/sqrt(d)
 *
 * Q, K, V, O: [batch][heads][n][d] row-major (fp32, or bf16 Q/K/V with fp32 accumulation and fp32 O).
 * The mask is an n x n ts_bitmap (sparse.h): cell (i, j) set = query i may attend key j. The softmax
 * of row i runs over its allowed keys only; a row with no allowed key outputs zeros.
 *
 * Three layers, FFTW style:
 *
 * 1. A SCHEDULE (ts_attn_schedule) is plain data, the decision a scheduler makes and may store as
 *    JSON: a list of row PANELS [r0, r0+nr), each processed by one thread with per-row online-softmax
 *    state (running max m, running sum l, output accumulator [nr][d]); each panel holds an ordered
 *    list of SEGMENTS, rectangles (rows [r0, r0+nr) inside the panel) x (key columns [c0, c0+nc))
 *    with a tile shape br x bc and a kind. A segment is processed tile by tile: its columns cut into
 *    bc-wide column tiles (outer loop), its rows into br-high sub-tiles (inner loop); the last tile
 *    of each is partial. Segment kinds:
 *      MIXED  the mask is applied; sub-tiles with no allowed cell are skipped and sub-tiles whose
 *             cells are all allowed run the unmasked kernel (decided at plan time, never in execute).
 *             This is the block-skip kind (FlexAttention / block-sparse FlashAttention).
 *      FULL   a promise that every cell is allowed: runs unmasked. The plan verifies the promise and
 *             fails (TS_ERR_INVALID_ARG naming the cell) when the mask disagrees.
 *      DENSE  every sub-tile is computed with the mask applied, nothing skipped (dense flash).
 *      COMPACT column compaction: the rows are cut into br-high sub-tiles (from r0); for each, the
 *             key columns of [c0, c0+nc) where the sub-tile still owns an allowed cell are covered
 *             left to right by RUNS of 4 consecutive keys (a run starts at the first such key not
 *             yet covered, moved back to n-4 at the end) -- or, when that computes clearly more
 *             (more than 1.1 x the keys themselves: small windows whose rows meet in scattered
 *             short stretches), listed one key at a time -- and the runs are cut into as few items
 *             of at most max(1, bc/4) runs (bc keys) as possible, spread evenly. So only (lane
 *             rows) x (keys holding an owned cell, or their 4-key runs) is computed, wherever the
 *             cells lie: a column grid instead computes every bc-aligned column tile a cell
 *             touches, and cannot follow a window that shifts by a few keys from one row sub-tile
 *             to the next. The mask is applied; keys of a run outside the segment or already owned
 *             are masked out. n < 4: runs as MIXED.
 *      DIAG   diagonal compaction: the rows are cut into br-high sub-tiles (from r0); for each, the
 *             OFFSETS j - i of the cells (i, j) it still owns in [c0, c0+nc) are listed (ascending)
 *             and cut into as few items of at most bc offsets as possible, spread evenly; an item
 *             computes, for every row i of its sub-tile, the cells (i, i + offset): the cells along
 *             those diagonals, masked where not owned or outside the mask. A sliding window in
 *             raster token order puts every query's keys at the same offsets (window2d k on a g-wide
 *             grid: dy g + dx, |dx|, |dy| <= k/2), so a 16-row sub-tile computes its 16 x k^2 allowed
 *             cells and only the window's edges are masked, where a rectangle of keys over a 4 x 4
 *             token patch computes (k+3)^2 keys per row (k = 7: 2.04 cells per allowed cell). The
 *             kernels hold the head dimension in the SIMD lanes (the rows meet different keys),
 *             reduce 16 dot products at a time and read Q, K and V in place (src/attn/
 *             attn_kern_diag_avx512.c, _avx2.c; bf16 with AVX-512 BF16: Q K^T over bf16 pairs by
 *             vdpbf16ps, P V widening V by unpacks); a computed cell costs about 1.3 of a COMPACT
 *             item's at AVX-512 (fp32).
 *    Ownership: segments of a panel may overlap; an allowed cell belongs to the FIRST segment (in
 *    panel order) that covers it, and later segments mask it out. So a scheduler may list its dense
 *    blocks and then one residue segment over the whole panel: the residue runs only the sub-tiles
 *    that still hold unowned allowed cells. Every allowed cell must be owned by some segment of the
 *    panel holding its row (checked at plan time), and the panels must partition rows [0, n).
 *
 * 2. A PLAN (ts_attn_plan, opaque) binds a schedule to a mask and a head dimension: it classifies
 *    every sub-tile (skip / unmasked / masked), stores the masks of masked sub-tiles in the layout
 *    the kernels read, counts the work, orders panels largest first (for dynamic load balance) and
 *    allocates one workspace per thread. The schedule and mask may be freed after creation.
 *
 * 3. EXECUTE runs a plan on Q/K/V: OpenMP over (batch, head, panel) with dynamic scheduling, or, when
 *    the schedule assigns every panel a thread (ts_attn_schedule.thread, set by the scheduler in
 *    tessera/attn_sched.h), statically: each thread runs its own panels for every (batch, head), then
 *    helps with what is left of the others' (so a thread the OS deschedules on a busy machine does
 *    not hold the rest back; on a quiet one the assignment runs as scheduled). It never allocates.
 *    One execute at a time per plan (the workspaces belong to the plan; see ts_attn_plan's thread
 *    safety).
 *
 * Kernel design (src/attn/): the score tile is computed TRANSPOSED, S^T[j][i], with query rows in
 * the SIMD lanes. The panel's Q is packed once per panel as Q^T [d][nr] (the scale is folded into the
 * exp2 argument, not into Q), K rows are broadcast straight from their [n][d] layout, so no K^T packing
 * is needed per tile and every tile shape reads K/V in place. The online-softmax max/sum over keys is
 * then a lane-wise (vertical) reduction over the bc rows of S^T with no horizontal shuffles; masked
 * sub-tiles apply one 16-bit word per (key, 16 rows) precomputed by the plan (exact zeros, not
 * -inf arithmetic); O[i][:] += P[i][j] V[j][:] broadcasts P from S^T while V rows stream, with O in a
 * per-panel fp32 accumulator [nr][round16(d)]. AVX-512: Q K^T register blocks of 4x4, 2x8 or 1x16
 * (lane vectors x keys), with the key-row offsets as immediates when d = 64; fp32 sub-tiles of 5-8
 * rows run 8-lane ymm FMAs (two per cycle on Zen 4, so half-width rows cost no extra there; on Zen 5
 * a ymm FMA costs a zmm one's slot), and of <= 4 rows (a few global tokens' rows) hold the head
 * dimension in the lanes instead, 4 rows x 4 keys per block with one transposing reduction; P V
 * blocks of 4 rows x 64 columns. AVX2 (8 lanes, 16 registers) and a scalar path run the same plan.
 * bf16 (AVX-512 BF16): Q K^T with vdpbf16ps over (k, k+1) pairs (Q^T packed as pairs, K pairs
 * broadcast as dwords straight from memory), and P V with vdpbf16ps over (key, key+1) pairs: the V
 * tile is packed to pairs once per column tile (shared by the panel's row sub-tiles) and P is rounded
 * to bf16 pairs by the softmax (as bf16 flash attention does); the normalizer sums fp32 P. Without
 * AVX-512 BF16 (or with ts_attn_plan_set_bf16_dot(plan, false)) bf16 inputs are converted to fp32
 * (Q per panel, K/V per column tile) and run the fp32 kernels.
 * Any d >= 1 works (tails masked); d a multiple of 16 needs no tail handling.
 *
 * ISA: ts_isa_active() by default (TESSERA_REF=1 forces the scalar path); ts_attn_plan_set_isa
 * overrides it per plan. Accuracy against a double-precision reference (tests/test_attn.c), as a
 * fraction of max|V|: fp32 and bf16-via-fp32 within 2e-5 (measured 4e-6); the bf16 dot path adds
 * the rounding of P, bounded by 2^-9 (measured 1.1e-3). bf16 results are compared with the reference
 * computed on the same bf16 values.
 *
 * Cost model of the shapes (what the scheduler trades): every computed cell costs 4d flops whatever
 * the mask; masked sub-tiles cost little more than unmasked ones; small tiles pay per-sub-tile
 * overhead (O accumulator reload per column tile, softmax bookkeeping); br <= 8 saves lanes only on
 * CPUs that split zmm FMAs (Zen 4), not on Zen 5. */
#ifndef TESSERA_ATTN_H
#define TESSERA_ATTN_H

#include <stdint.h>

#include "tessera/core.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest tile side (br or bc) a schedule may ask for. */
#define TS_ATTN_TILE_MAX 256

typedef enum ts_attn_seg_kind {
  TS_ATTN_SEG_MIXED = 0,
  TS_ATTN_SEG_FULL = 1,
  TS_ATTN_SEG_DENSE = 2,
  TS_ATTN_SEG_COMPACT = 3,
  TS_ATTN_SEG_DIAG = 4,
  TS_ATTN_SEG_KIND_COUNT
} ts_attn_seg_kind;

/* "mixed", "full", "dense", "compact", "diag" and back (TS_ERR_INVALID_ARG naming the text). */
const char *ts_attn_seg_kind_name(ts_attn_seg_kind k);
ts_status ts_attn_seg_kind_parse(const char *name, ts_attn_seg_kind *out);

/* Query rows [r0, r0+nr) (absolute, inside the owning panel) x key columns [c0, c0+nc), cut into
 * br x bc tiles; kind is a ts_attn_seg_kind. */
typedef struct ts_attn_segment {
  int32_t r0, nr;
  int32_t c0, nc;
  int32_t br, bc;
  int32_t kind;
} ts_attn_segment;

/* Rows [r0, r0+nr); its segments are segs[seg0 .. seg0+nseg) of the schedule, in processing order. */
typedef struct ts_attn_panel {
  int32_t r0, nr;
  int64_t seg0, nseg;
} ts_attn_panel;

typedef struct ts_attn_schedule {
  int64_t n;             /* tokens (mask is n x n) */
  int64_t npanels;
  ts_attn_panel *panels; /* [npanels] */
  int64_t nsegs;
  ts_attn_segment *segs; /* [nsegs] */
  /* Optional static panel -> thread assignment: NULL (all dynamic, the default) or [npanels]
   * ts_malloc'd entries in [-1, TS_ATTN_THREAD_MAX), -1 = dynamic. When EVERY panel has a thread
   * t >= 0, execute runs statically: thread t (mod the threads execute gets) runs its panels, in
   * schedule order, for every (batch, head) in turn, then takes units still waiting in the other
   * threads' lists; otherwise the whole schedule runs dynamically.
   * A separate array (not a panel field) so panels built as {r0, nr, seg0, nseg} stay dynamic. */
  int32_t *thread;
} ts_attn_schedule;

#define TS_ATTN_THREAD_MAX 4096

/* Zeroed arrays of npanels panels and nsegs segments for the caller to fill (ts_malloc'd). */
ts_status ts_attn_schedule_alloc(ts_attn_schedule *s, int64_t n, int64_t npanels, int64_t nsegs);
void ts_attn_schedule_free(ts_attn_schedule *s);
/* Sets (copies) the static thread of every panel, thread[npanels]; NULL clears it (dynamic).
 * TS_ERR_INVALID_ARG naming the panel for an entry outside [-1, TS_ATTN_THREAD_MAX). */
ts_status ts_attn_schedule_set_threads(ts_attn_schedule *s, const int32_t *thread);
/* Structural checks that need no mask: 1 <= n <= INT32_MAX; panels partition [0, n) (any order);
 * every segment range is inside the schedule, its rows inside its panel, its columns inside [0, n),
 * nr, nc >= 1, 1 <= br, bc <= TS_ATTN_TILE_MAX, a known kind, thread entries (when set) in
 * [-1, TS_ATTN_THREAD_MAX). TS_ERR_INVALID_ARG naming the panel,
 * segment and field ("attn schedule: panel 3 segment 1: bc = 0 is not in [1, 256]"). */
ts_status ts_attn_schedule_validate(const ts_attn_schedule *s);

/* ---- baseline and block schedules ------------------------------------------------------------ */

/* Dense flash attention: panels of br rows, one DENSE segment over all n columns with tile br x bc
 * (every tile computed and masked). */
ts_status ts_attn_schedule_dense(ts_attn_schedule *s, int64_t n, int32_t br, int32_t bc);
/* Fixed-tile block skip: panels of br rows, one MIXED segment over all n columns (empty tiles
 * skipped, full tiles unmasked, the rest masked). */
ts_status ts_attn_schedule_blockskip(ts_attn_schedule *s, int64_t n, int32_t br, int32_t bc);

typedef struct ts_attn_tile {
  int32_t br, bc;
} ts_attn_tile;

typedef struct ts_attn_blocks_opts {
  int32_t panel_rows;    /* most rows per panel (default 128) */
  ts_attn_tile residue;  /* tile of the residue segments (default 16 x 32) */
  int32_t align;         /* panel boundaries at multiples of align rows (default 32; 1: at any block edge):
                            a compact pass cuts its panel into sub-tiles from the panel's first row, and
                            on a space-filling-curve order a sub-tile aligned to 16 or 32 rows is a square
                            patch of tokens whose windows overlap most (window2d k = 13, Hilbert order:
                            1.51 cells per allowed cell with cuts at block edges, 1.42 aligned) */
} ts_attn_blocks_opts;
ts_attn_blocks_opts ts_attn_blocks_opts_default(void);

/* Variable-tile schedule from rectangular blocks (ts_block from reorder.h, e.g. ts_blocks_extract's
 * output; only the rectangle is read, nnz is ignored): block b runs with tiles[b]. Panel boundaries are chosen among
 * block edges, or among multiples of opts.align when it is > 1 (at most panel_rows apart, cutting as
 * few blocks as possible); a block crossing a boundary is
 * split into one segment per panel. Each panel lists its blocks (in the given order, which is the
 * ownership order where blocks overlap) and then residue segments that catch every allowed cell no
 * block covers. mask (n x n) may be NULL: then each panel gets one residue segment over all columns
 * (the plan still skips its empty sub-tiles); with the mask the residue segments are narrowed to the
 * column span of the residue cells and omitted where there are none. Blocks must lie inside
 * [0, n)^2 with nr, nc >= 1; tiles must be in [1, TS_ATTN_TILE_MAX]. opts NULL: defaults. */
ts_status ts_attn_schedule_from_blocks(ts_attn_schedule *s, int64_t n, const ts_block *blocks,
                                       const ts_attn_tile *tiles, int64_t nblocks, const ts_bitmap *mask,
                                       const ts_attn_blocks_opts *opts);

/* Predicted cost of running block b with tile t (any unit; lower is better). */
typedef double (*ts_attn_cost_fn)(const ts_block *b, ts_attn_tile t, void *user);
/* The analytic model: per sub-tile, Q K^T and softmax work over the lanes used (a multiple of 16),
 * P V work, the O reload per column tile and a fixed per-sub-tile overhead. user: NULL (d = 64) or
 * a const int* giving the head dimension. The measured profile (attn_profile.h) is the scheduler's
 * default; this one needs no measurement (tests, --cost analytic). */
double ts_attn_cost_default(const ts_block *b, ts_attn_tile t, void *user);
/* out[b] = the menu tile of least cost for block b (first one on ties). cost NULL: the default. */
ts_status ts_attn_choose_tiles(const ts_block *blocks, int64_t nblocks, const ts_attn_tile *menu,
                               int nmenu, ts_attn_cost_fn cost, void *user, ts_attn_tile *out);
/* The default menu: br in {8,16,32,64,128} x bc in {16,32,64,128} (20 tiles, br-major). */
int ts_attn_default_menu(const ts_attn_tile **menu);

/* ---- JSON ------------------------------------------------------------------------------------ */

/* {"n": N, "panels": [{"r0":..,"nr":..,"segs":[[r0,nr,c0,nc,br,bc,"kind"],...]}, ...]}, plus
 * "thread": T in every panel when the schedule has a thread assignment, as a malloc'd
 * NUL-terminated string (*json; the caller free()s it). TS_ERR_OOM on allocation failure. */
ts_status ts_attn_schedule_to_json(const ts_attn_schedule *s, char **json);
/* Parses and validates into *s (zeroed first; empty on error): TS_ERR_FORMAT for text that is
 * not JSON or a malformed document (naming the field), then the ts_attn_schedule_validate errors. */
ts_status ts_attn_schedule_from_json(const char *json, ts_attn_schedule *s);

/* ---- plan ------------------------------------------------------------------------------------ */

/* Thread safety: create, the setters (set_isa, set_bf16_dot, set_warm) and destroy need the plan
 * to themselves. ONE EXECUTE AT A TIME PER PLAN: an execute writes the plan's per-thread
 * workspaces and resets its static queues' counters, so two concurrent ts_attn_execute /
 * _execute_bf16 / ts_attn_execute_original calls on one plan race (serialize them, or make one
 * plan per caller thread). Different plans execute concurrently, even plans made from one shared
 * schedule and mask (read only; tests/test_concurrency.c). ts_attn_plan_stats and
 * ts_attn_plan_isa only read and may run beside anything but the setters and destroy. */
typedef struct ts_attn_plan ts_attn_plan;

/* mask: n x n (rows == cols == s->n). d: head dimension in [1, 4096]. Workspaces for ctx's thread
 * count (NULL: default threads). Errors: the schedule's validation errors; TS_ERR_SHAPE for a mask
 * of the wrong size; TS_ERR_INVALID_ARG for a FULL segment over a masked cell or an allowed cell no
 * segment owns ("... allowed cell (row 17, col 40) is not covered by panel 2's segments"). */
ts_status ts_attn_plan_create(ts_attn_plan **plan, const ts_context *ctx, const ts_attn_schedule *s,
                              const ts_bitmap *mask, int64_t d);
void ts_attn_plan_destroy(ts_attn_plan *plan);

/* Work counts of a plan. A sub-tile is the unit the kernel runs (at most br x bc cells). */
typedef struct ts_attn_stats {
  int64_t nnz;           /* allowed cells of the mask */
  int64_t cells;         /* cells the kernels compute (sum of computed sub-tile areas) */
  int64_t tiles_full;    /* sub-tiles run unmasked */
  int64_t tiles_masked;  /* sub-tiles run with the mask */
  int64_t tiles_skipped; /* sub-tiles of MIXED segments skipped (nothing owned) */
  int64_t tiles_keyed;   /* COMPACT sub-tiles (items) that list their keys one by one (part of full + masked) */
  int64_t tiles_diag;    /* DIAG items (part of full + masked); their cells count rows x offsets, of which the
                            AVX-512 kernels skip the 4 x 4 (Q K^T) and 4-row (P V) blocks with no allowed cell */
  int64_t pv_cells;      /* cells P V multiplies on AVX-512: cells, less the (4 rows x key) blocks of COMPACT
                            items whose P is all 0 (skipped; the AVX2 and scalar kernels run them) */
  int64_t panels, segments;
  double work_ratio;     /* cells / nnz (0 when nnz = 0) */
} ts_attn_stats;
void ts_attn_plan_stats(const ts_attn_plan *plan, ts_attn_stats *st);

/* Kernel level the plan runs (ts_isa_active() at creation). set_isa overrides it; TS_ERR_UNSUPPORTED
 * when this CPU lacks the level. bf16 uses AVX-512 BF16 dot products when the level is AVX-512 and
 * the CPU has them; set_bf16_dot(plan, false) forces the conversion path (for tests and comparison). */
ts_isa ts_attn_plan_isa(const ts_attn_plan *plan);
ts_status ts_attn_plan_set_isa(ts_attn_plan *plan, ts_isa isa);
void ts_attn_plan_set_bf16_dot(ts_attn_plan *plan, bool on);
/* Key warming (on by default; fp32 inputs): before a panel's items run, one load per cache line of
 * its Q rows and of the K and V rows of keys its thread's previous panel did not read, so the
 * misses of arrays that live in DRAM overlap (src/attn/attn_exec.c). Off: for comparison; results
 * are the same either way. */
void ts_attn_plan_set_warm(ts_attn_plan *plan, bool on);

/* ---- execute --------------------------------------------------------------------------------- */

/* Q, K, V, O: [batch][heads][n][d] contiguous; n and d must match the plan. O must not overlap the
 * inputs. Threads: min(ctx's count, the plan's), ctx NULL = the plan's. batch or heads 0: nothing.
 * A schedule with a complete static thread assignment runs it (see ts_attn_schedule.thread). */
ts_status ts_attn_execute(const ts_context *ctx, ts_attn_plan *plan, const float *Q, const float *K,
                          const float *V, float *O, int64_t batch, int64_t heads, int64_t n, int64_t d);
/* Same with bf16 Q, K, V (uint16 bit patterns, ts_f32_to_bf16), fp32 accumulation and fp32 O. */
ts_status ts_attn_execute_bf16(const ts_context *ctx, ts_attn_plan *plan, const uint16_t *Q,
                               const uint16_t *K, const uint16_t *V, float *O, int64_t batch,
                               int64_t heads, int64_t n, int64_t d);

/* Reference: double accumulation, explicit mask, softmax over allowed keys only, zero rows where
 * none is allowed. Single-threaded; for tests and small checks (allocates its row buffers per
 * call; re-entrant). */
ts_status ts_attn_reference(const ts_bitmap *mask, const float *Q, const float *K, const float *V,
                            float *O, int64_t batch, int64_t heads, int64_t n, int64_t d);

#ifdef __cplusplus
}
#endif
#endif
