/* Shared by the attention scheduler files: the working state of one ts_attn_sched_problem_solve
 * (sched.c) and the two CBC models (sched_ilp.c). Formulation: tessera/attn_sched.h. */
#ifndef TS_ATTN_SCHED_INTERNAL_H
#define TS_ATTN_SCHED_INTERNAL_H

#include "attn/attn_internal.h"
#include "tessera/attn_sched.h"

/* A piece's choice c: c < ntiles a standalone tile, ntiles + h merged at height index h. */
typedef struct ts__sched {
  const ts_attn_sched_problem *pb;
  int P, k, nh;          /* threads, standalone candidates per piece, compact heights */
  int *cand;             /* [npieces][k] standalone tile indices, cheapest first (ties: menu order) */
  int64_t *pstart;       /* [npanels + 1] panel p's pieces are plist[pstart[p] .. pstart[p+1]) */
  int64_t *plist;
  int *best_h;           /* [npanels] best configuration: pass height index, or -1 (no pass) */
  double *lbest;         /* [npanels] its load */
  double *umax;          /* [npanels] an upper bound of any load of the panel */
  int64_t *rank, *pos;   /* panels by decreasing lbest, and the inverse */
} ts__sched;

static inline double ts__sched_base(const ts_attn_sched_problem *pb, int64_t p) { return pb->base ? pb->base[p] : 0.0; }
static inline double ts__sched_open(const ts_attn_sched_problem *pb, int64_t p, int h) {
  return pb->open ? pb->open[p * pb->nheights + h] : 0.0;
}
static inline bool ts__sched_must(const ts_attn_sched_problem *pb, int64_t p) {
  return pb->nheights > 0 && pb->must_open && pb->must_open[p];
}
/* Cost of choice c of piece i. */
static inline double ts__sched_choice(const ts_attn_sched_problem *pb, int64_t i, int c) {
  return c < pb->ntiles ? pb->cost[i * pb->ntiles + c] : pb->merge[i * pb->nheights + (c - pb->ntiles)];
}

/* Load of panel p in configuration h (-1: no pass), every piece at its best choice under it;
 * choice (may be NULL) gets those choices, indexed by piece. */
double ts__sched_config(const ts__sched *S, int64_t p, int h, int *choice);

/* The aggregated model (panels in their best configurations; a[p,q], M) and the full model (x, y,
 * a, w, M), each warm-started from (tile, height, thread) and writing its verified solution there
 * on TS_OK (info gets status, gap, seconds, nodes, vars, rows). o->time_limit applies. */
ts_status ts__sched_ilp_aggregated(const ts__sched *S, const ts_attn_sched_opts *o, double scale, int *tile, int *height,
                                   int32_t *thread, ts_attn_sched_info *info);
ts_status ts__sched_ilp_full(const ts__sched *S, const ts_attn_sched_opts *o, double scale, int *tile, int *height,
                             int32_t *thread, ts_attn_sched_info *info);

/* ---- building schedules from choices (sched_blocks.c) and calibration (sched_calib.c) -------- */

typedef struct ts__sched_build {
  const ts_attn_schedule *s;   /* panels from the blocks: piece segments first, then maybe a residue */
  const ts_bitmap *mask;
  const int64_t *segof;        /* [npieces] the segment of s of each piece, increasing */
  int64_t npieces;
  const ts_attn_tile *menu;
  int nmenu;
  const ts_attn_sched_opts *o;
  double diag_ratio;           /* ts__attn_diag_ratio of mask (set when the guard will run) */
  const ts_block *blocks;      /* the blocks the pieces were cut from (the guard's block-aligned panels) */
  int64_t nblocks;
} ts__sched_build;

/* The schedule of a solution: without compact heights (o->nheights 0) s with the pieces' tiles;
 * else per panel its standalone pieces in order, then (height[p] >= 0) one COMPACT segment over the
 * panel and all columns, tile heights[height[p]] x compact_bc, owning every cell left. */
ts_status ts__sched_build_schedule(const ts__sched_build *B, const int *choice, const int *height, ts_attn_schedule *out);
/* scale[0] (standalone tiles) and scale[1 + h] (passes of height h): measured / predicted of the
 * pure configurations of pb (costs as built for B). */
ts_status ts__sched_calibrate(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                              double *scale);
/* Times the solved schedule s against the pure compact configurations of pb and the block-skip
 * schedules of the menu tiles the cost model ranks cheapest on B->mask, and replaces s by the
 * fastest of them when it is measured faster by a margin (info: guarded, guard_schedule_s,
 * guard_fixed_s, fallback, fallback_kind). */
ts_status ts__sched_guard(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                          ts_attn_schedule *s, ts_attn_sched_info *info);
/* Before the ILP's coverage stage: where 16-row DIAG passes are predicted to beat the compact passes
 * outright (B->diag_ratio below 1), times
 * them against the greedy's schedule s as the guard would; *wins: they ran faster by the guard's
 * margin, so the stage, which refines compact passes the guard will then replace, can be skipped
 * (window2d k = 7 at 64^2: 0.7 s of its 1.0 s planning). */
ts_status ts__sched_diag_first(const ts__sched_build *B, const ts_attn_sched_opts *o, const ts_attn_schedule *s, bool *wins);

/* ---- the ILP's exact model of compact passes (sched_cover.c) -------------------------------- */

/* Panel P (pieces[0 .. npc): its block pieces in ownership order, c[k] their standalone costs)
 * with a pass of hh rows (scale: the passes' family scale), from the warm start warm[k] (merged or
 * not; its load *warm_load): *lower = a lower bound of the panel's load; merged[k] / *load = the
 * warm start with the pieces the model fixes merged (never worse), or with `solve` the exact
 * model's optimum (components enumerated or solved by CBC, which stops at `deadline`, ts_now()
 * seconds). info gets the cover_* counters. */
ts_status ts__sched_cover_panel(const ts_bitmap *mask, const ts_attn_panel *P, const ts_attn_segment *pieces, int64_t npc,
                                const double *c, int32_t hh, const ts_attn_sched_opts *o, ts_attn_cost_fn cost, double scale,
                                const unsigned char *warm, bool solve, double deadline, unsigned char *merged, double *load,
                                double *warm_load, double *lower, ts_attn_sched_info *info);
/* The ILP over the blocks' schedule B (pb: its problem with costs scaled by scale[]): every panel
 * at every height (and without a pass) by ts__sched_cover_panel, the best per panel, then panels to
 * threads (LPT and the aggregated ILP). choice/height/thread: in, the greedy's solution (warm
 * start, and compared under the same exact model); out, the better of the two (info: solver,
 * makespans, cover counters). */
ts_status ts__sched_cover_solve(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                                const double *scale, int *choice, int *height, int32_t *thread, ts_attn_sched_info *info);

/* The exact model's price (unscaled) of the passes of hh rows of every panel of B with the pieces
 * merged[i] set merged (NULL: none: the residue alone). */
ts_status ts__sched_cover_price(const ts__sched_build *B, int32_t hh, const unsigned char *merged, double *cost);

/* ---- DIAG passes (attn_order.c) ------------------------------------------------------------- */

/* Price of one computed cell of a DIAG pass in cells of a COMPACT pass. The DIAG kernels reduce 16
 * dot products at a time across the SIMD lanes (22 shuffles, 8 blends and 15 adds per 64 FMAs at
 * d = 64) where the COMPACT ones broadcast keys over query lanes. One head, one thread (L2-resident),
 * bench_attn_ab, 2026-12-03: window2d k = 7 on 64 x 64, 16-row DIAG passes 0.481 ms for 1.21 cells
 * per allowed cell against 0.564 ms for the Morton-order COMPACT plan's 1.89 (1.33 per cell);
 * k = 13, 1.473 ms for 1.23 against 1.332 ms for Hilbert's 1.41 (1.27). */
#define TS__ATTN_DIAG_COST 1.3

/* Whether DIAG passes are worth considering on this machine: at AVX-512 only. The AVX2 kernels (8
 * lanes, hadd reductions) ran 0.85-0.87x the AVX2 compact plan on window2d k = 7 (Morton order; one
 * head one thread and 8 heads two threads, 2026-12-03), so below AVX-512 neither auto's order score
 * nor the guard counts them (a natural order chosen for them would leave the compact passes on a
 * worse order). */
static inline bool ts__attn_diag_enabled(void) { return ts_isa_active() == TS_ISA_AVX512; }

/* Cells of h-row COMPACT passes (ts__attn_compact_keys per sub-tile) and of h-row DIAG passes (the
 * distinct offsets per sub-tile) over the whole mask. */
ts_status ts__attn_pass_cells(const ts_bitmap *mask, int32_t h, int64_t *compact, int64_t *diag);
/* The mask's 16-row DIAG passes priced against its 16-row compact passes: TS__ATTN_DIAG_COST x their
 * cells / the compact cells (below 1: DIAG predicted to win); INFINITY where DIAG passes are not
 * enabled (ts__attn_diag_enabled) or the mask is empty. */
ts_status ts__attn_diag_ratio(const ts_bitmap *mask, double *ratio);

/* ---- compact pricing (sched_compact.c) ---------------------------------------------------- */

/* Keys a COMPACT row sub-tile computes for the set bits of the bit row u over [c0, c1) (zero
 * outside): 4 x the 4-key runs covering them, or -- when the plan lists the keys one by one
 * (ts__attn_compact_rl) -- the keys, priced 1.1 each. */
int64_t ts__attn_compact_keys(const uint64_t *u, int64_t c0, int64_t c1);
/* Set cells of rows [r0, r0+nr) x cols [c0, c0+nc) of a row-major bit array (W words per row),
 * cleared too when `clear`. */
int64_t ts__attn_rect_count(uint64_t *bits, int64_t W, int64_t r0, int64_t nr, int64_t c0, int64_t nc, bool clear);
/* Price of COMPACT segment g of panel P over the cells still in R (panel-relative rows, W words;
 * taken: cleared); u: [W] scratch. */
double ts__attn_price_compact_segment(uint64_t *R, int64_t W, const ts_attn_panel *P, const ts_attn_segment *g,
                                      ts_attn_cost_fn cost, void *user, uint64_t *u);
/* Panel P's pass at each of o->heights (items of o->compact_bc keys) with every cell merged:
 * merge[k][h] = the share of pieces[k] (block pieces in ownership order), open[h] = the share of
 * the residue (cells no piece owns; *residue_cells of them). */
ts_status ts__attn_price_compact(const ts_bitmap *mask, const ts_attn_panel *P, const ts_attn_segment *pieces, int64_t npieces,
                                 const ts_attn_sched_opts *o, ts_attn_cost_fn cost, double *merge, double *open,
                                 int64_t *residue_cells);

/* The plan document (ts_attn_plan_load's parser) from parsed JSON; `name` labels the errors. On
 * failure nothing is left allocated (*perm NULL, *s empty). For ts_attn_plan_load and the fuzzer. */
struct cJSON;
ts_status ts__attn_plan_parse(const struct cJSON *j, const char *name, const char *expect_key, ts_attn_plan_desc *d,
                              int32_t **perm, ts_attn_schedule *s);

#endif
