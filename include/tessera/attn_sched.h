/* tessera attention scheduler and plan cache: picks, for every dense block of a (reordered) mask,
 * a tile or the panel's compact pass, a compact row height per row panel and a thread per panel,
 * minimizing the predicted thread makespan, and stores the result -- schedule + permutation -- as a
 * plan file keyed by the mask and the machine.
 *
 * Model. ts_attn_schedule_from_blocks fixes the row panels from the block rectangles alone, so the
 * panels are known before any choice is made. A block cut by panel boundaries becomes one PIECE per
 * panel (the scheduler's unit). Piece i of panel p(i) either runs STANDALONE as its own segment with
 * a menu tile t (cost c[i][t], any ts_attn_cost_fn), or is MERGED into the panel's COMPACT pass (a
 * TS_ATTN_SEG_COMPACT segment after the standalone ones, over everything they leave: the merged
 * pieces and the residue cells no block covers). A panel runs at most one compact pass, of one row
 * height h from a short list (8, 16, 32 rows; items of 128 keys). That is the coupling: the pass cuts
 * the panel into h-high row sub-tiles and, per sub-tile, runs the union of all its merged cells as
 * one list of 4-key runs, so merged pieces share items (the Q lanes, the online-softmax state and
 * the O reload of every item) only when they use the same h, and a panel with residue cells must
 * open a pass anyway. Costs: g[i][h] = piece i merged at height h, o[p][h] = the pass of panel p at
 * height h without merged pieces (its residue; 0 when it has none), base[p] a constant. Panel load
 * L_p = base_p + sum_{standalone i} c[i][t_i] + [pass open at h] (o[p][h] + sum_{merged i} g[i][h]);
 * thread load = sum of its panels' loads (times batch*heads, a common factor); makespan = largest.
 *
 * GREEDY (per block, myopic): a panel with residue opens its pass at the residue's cheapest height;
 * then each piece in turn takes the cheapest of its standalone tiles and merging at the panel's open
 * height (or, when none is open, opening the cheapest height for itself alone, paying o[p][h]);
 * panels to threads by LPT (largest load first, each to the least loaded thread).
 *
 * ILP (COIN-OR CBC through ts_ilp_*), minimizing M + eps * (total cost):
 *   x[i,c] in {0,1}  piece i takes candidate c (its k_tiles cheapest tiles, then "merged at h" for
 *                    every height);                       sum_c x[i,c] = 1
 *   y[p,h] in {0,1}  panel p's pass runs at height h;     sum_h y[p,h] <= 1 (= 1 with residue)
 *                    x[i, merged h] <= y[p(i),h]
 *   a[p,q] in {0,1}  panel p on thread q;                 sum_q a[p,q] = 1
 *   w[p,q] >= 0      load of panel p on thread q:         w[p,q] >= L_p(x,y) - U_p (1 - a[p,q])
 *                    (big-M linearization of L_p * a[p,q]; U_p bounds L_p)
 *   sum_p w[p,q] <= M for every thread q;  P * M >= sum_p L_p (valid, tightens the relaxation)
 *   symmetry: threads are identical, so panels sorted by decreasing best load may use only threads
 *   0..rank (relabelling threads by first use makes any assignment satisfy it).
 * AGGREGATION. Given y, each piece's best choice is independent (its cheapest tile or merging at
 * its panel's height), and a cheaper panel never raises the makespan, so some optimum runs every
 * panel in its BEST CONFIGURATION (the y row of least load, every piece at its best choice under
 * it). The aggregated model fixes those and keeps only a[p,q] and M (exact P||Cmax on the panels);
 * its optimum is the full model's (makespan and total). It is solved first; the full model's x/y
 * variables (when they fit max_tile_vars) are solved only when the aggregate is not proven or
 * opts.full_model asks. Early stop: a solution within rel_gap of the lower bound
 * max(sum_p best L_p / P, max_p best L_p) is accepted without search (LPT on the best
 * configurations often is), and CBC stops at rel_gap. Every solve starts from the best solution
 * known (warm start), runs under the elapsed-time limit (all stages together), and the ILP's answer
 * is kept only when it is verified and not worse than greedy (smaller makespan, or equal makespan
 * and smaller total); otherwise the greedy schedule is returned (info says which). One thread:
 * the best configurations are optimal (makespan = total) and no solver runs.
 *
 * THE ILP ON A MASK (ts_attn_schedule_solve with compact heights) prices the passes EXACTLY
 * instead of by g and o: the costs above are linear per piece (g is a piece's marginal against an
 * otherwise merged pass), but merged pieces share the keys and 4-key runs of their row sub-tiles,
 * so a piece's real cost depends on which others merge -- a covering problem. Per panel and height
 * the ILP solves that covering model (src/attn/sched_cover.c: fixed pieces by dominance, the free
 * ones in components, enumerated or by CBC, under half of time_limit, most promising first), takes
 * each panel's best height (or no pass), then balances the panels over the threads (LPT, then the
 * aggregated model above). The greedy's schedule is priced by the same exact model
 * (info.greedy_makespan; its own linear figure in greedy_makespan_linear), is the warm start of
 * every model, and is returned when the ILP's is not better. */
#ifndef TESSERA_ATTN_SCHED_H
#define TESSERA_ATTN_SCHED_H

#include <stdint.h>

#include "tessera/attn.h"
#include "tessera/attn_profile.h"
#include "tessera/solve.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_attn_solver { TS_ATTN_SOLVER_GREEDY = 0, TS_ATTN_SOLVER_ILP = 1 } ts_attn_solver;
/* "greedy", "ilp" and back (TS_ERR_INVALID_ARG naming the text). */
const char *ts_attn_solver_name(ts_attn_solver s);
ts_status ts_attn_solver_parse(const char *name, ts_attn_solver *out);

typedef struct ts_attn_sched_opts {
  ts_attn_solver solver;       /* ilp */
  int threads;                 /* P, the threads to balance over, 1..TS_ATTN_THREAD_MAX (0: ts_default_threads()) */
  const ts_attn_tile *menu;    /* tile menu (NULL: ts_attn_default_menu) */
  int nmenu;
  ts_attn_cost_fn cost;        /* NULL: ts_attn_cost_default */
  void *cost_user;             /* passed to cost (for the default: const int *d, NULL = 64) */
  ts_attn_blocks_opts blocks;  /* panel rows and residue tile (ts_attn_blocks_opts_default) */
  double time_limit;           /* ILP elapsed seconds (2.0); must be > 0 */
  int k_tiles;                 /* ILP candidates per piece: its k cheapest menu tiles (3) */
  int64_t max_tile_vars;       /* ILP: more x variables than this -> tiles fixed (aggregation) (2000) */
  double tie_break;            /* objective weight of the total cost relative to M (1e-4) */
  double rel_gap;              /* ILP: accept a solution within this fraction of the lower bound /
                                  of CBC's bound (0.002); 0 = prove optimality */
  bool full_model;             /* ILP: solve the full model even when the aggregated one is proven
                                  optimal (false; for tests and comparison) */
  /* Compact passes (ts_attn_schedule_solve): row heights to choose from (nheights 0 = none: the
   * residue runs as a MIXED segment with blocks.residue, every piece standalone) and the keys per
   * item (compact_bc, 128: a 16-row sub-tile of window2d k = 7 computes ~100 keys, so one item
   * instead of two, 5% faster; k = 13 2-3%, swin and vitdet the same). Default heights {8, 16, 32}. */
  int32_t heights[4];
  int nheights;
  int32_t compact_bc;
  /* MEASUREMENTS on this very mask (ts_attn_schedule_solve; calibrate_d 0 = none, the default),
   * 1 thread, batch = heads = 1, head dim calibrate_d, calibrate_dtype, plans timed side by side in
   * 5 interleaved rounds, each keeping its fastest call (thread CPU time):
   * CALIBRATION: before solving, the pure configurations -- every piece standalone at its cheapest
   * tile (residue in a pass of heights[0]), and everything merged into passes of each height --
   * are timed, and every cost of a family is multiplied by measured / predicted of its
   * configuration. So the solver compares the families in this machine's seconds on this workload
   * (memory traffic, call overheads and lane use the block model misses), while the model still
   * ranks the tiles and pieces inside a family. Skipped when family_given (family_scale is used).
   * GUARD (guard, on by default): after solving, the schedule is timed against the pure compact
   * configurations (every piece merged into passes of one height, each height) and the block-skip
   * schedules (ts_attn_schedule_blockskip) of the 3 menu tiles the cost model ranks cheapest on
   * the mask, and -- where the mask's 16-row DIAG passes compute fewer cells at 1.3 compact cells
   * each than 1.25 x its 16-row compact passes (sliding windows in the natural order) -- DIAG
   * passes of 16 rows over the schedule's panels, and the blocks on block-aligned panels (panels
   * cut where a block starts or ends, each block's part one tile segment of 64 rows whose column
   * tile spans the block, up to TS_ATTN_TILE_MAX keys; a compact pass takes the rest; windows
   * contiguous in the token order then run in full-width sub-tiles over all their keys at once);
   * when one of them is more than 3% faster it replaces the schedule (info.fallback, fallback_kind
   * MIXED, COMPACT or DIAG, info.block_panels; it runs dynamically, without a thread assignment). Where DIAG passes are predicted to beat the compact
   * passes outright (1.3 x their cells below the compact cells), they are timed against the
   * greedy's schedule before the ILP's coverage stage, and when faster the stage is skipped
   * (info.diag_first): it would refine compact passes that the guard then replaces. The guard runs calibrate_heads heads per
   * execute (at most 8, and at most 16384 / n; default 1), on one thread by its CPU clock (steady
   * on a shared machine). More heads let the heads' traffic through the caches count as in a
   * multi-head call (one head's 4 arrays stay in L2/L3 from call to call); measured with the
   * deployment's heads (4 at 64^2 tokens) the guarded ILP and greedy schedules still ended within
   * +-4% of each other while planning took 2-4x longer, so the tools keep the default
   * (docs/notes/BENCHMARKS.md). Timings compare plans by the median of their ratios within
   * a round (7 rounds); a near tie (the best alternative faster, but by less than 3%) is timed
   * again, that alternative alone against the schedule over 21 rounds, and decided on the second
   * reading (info.guard_retimed). Costs planning time: 1 + nheights plans and 8 one-head one-thread executes
   * each, then 4 + nheights plans (one more with block-aligned panels, one more with DIAG passes) and
   * 8 executes each. */
  int64_t calibrate_d;
  ts_dtype calibrate_dtype;
  int64_t calibrate_heads; /* heads per execute of the guard's timings (1) */
  ts_attn_pass calibrate_pass; /* what the calibration and the guard time (forward; attn_profile.h): backward or
                                  train re-solve a schedule for the training step's attention */
  bool guard;
  /* The family scales to apply without calibrating (all 1 by default): e.g. an earlier solve's
   * info.calib_scale, so two solves compare under the same costs (family_given true). */
  bool family_given;
  double family_scale[5];
} ts_attn_sched_opts;
void ts_attn_sched_opts_default(ts_attn_sched_opts *o);

typedef struct ts_attn_sched_info {
  ts_attn_solver solver;       /* what made the returned schedule */
  int threads;
  int64_t npanels, npieces, nblocks;
  double makespan, total;      /* predicted, of the returned schedule (cost units) */
  double greedy_makespan, greedy_total;
  double lower_bound;          /* max(sum of cheapest panel loads / P, largest cheapest panel load) */
  bool ilp_run;                /* the ILP was attempted */
  ts_ilp_status ilp_status;
  bool ilp_improved;           /* the ILP answer was kept (better than greedy) */
  bool tiles_fixed;            /* aggregation: x/y variables dropped, panels in their best configuration */
  bool ilp_skipped;            /* no search needed: a solution within rel_gap of the lower bound */
  int64_t merged, compact_panels; /* pieces merged into compact passes, panels running one (returned schedule) */
  bool calibrated;
  double calib_scale[5];       /* measured / predicted: [0] standalone tiles, [1 + h] passes of heights[h] */
  double calib_ms;             /* time spent calibrating (part of ms) */
  bool guarded;                /* the guard ran */
  double guard_schedule_s, guard_fixed_s; /* its measurements: the solved schedule, the fastest fixed tile */
  double guard_fallback_s;     /* the measurement of what replaced it (fallback), else 0 */
  double guard_diag_s;         /* its measurement of the 16-row DIAG passes, 0 when their cells ruled them out */
  double guard_blocks_s;       /* its measurement of the blocks on block-aligned panels (0: not built) */
  bool guard_retimed;          /* the best alternative was faster than the schedule but within the guard's margin, so
                                  the two were timed again over more rounds; guard_schedule_s and that alternative's
                                  measurement are the second reading, the others their first reading's ratio to the
                                  schedule times its second reading */
  bool block_panels;           /* the guard replaced the schedule by the blocks on block-aligned panels: panels cut
                                  where blocks start and end, each block's part one tile segment of 64 rows whose
                                  column tile spans the block (fallback {64, TS_ATTN_TILE_MAX}, kind MIXED) */
  bool diag_first;             /* DIAG passes, predicted to beat the compact passes outright, were timed against the
                                  greedy's schedule before the ILP's coverage stage and ran faster, so the stage was
                                  skipped (the greedy's schedule went to the guard, which then kept the faster) */
  ts_attn_tile fallback;       /* what replaced the solved schedule ({0, 0}: nothing): a fixed tile
                                  (fallback_kind MIXED: block skip) or a pass (COMPACT or DIAG: every panel
                                  one pass of fallback.br rows, items of fallback.bc keys or offsets); the makespan and
                                  total above describe the solved schedule */
  int fallback_kind;
  double guard_ms;             /* time spent in the guard (part of ms) */
  int64_t greedy_merged, greedy_compact_panels;
  double ilp_makespan;         /* makespan of the ILP's solution (NAN if none) */
  double ilp_gap;              /* (objective - bound) / objective of the ILP (NAN if unknown) */
  double ilp_seconds;
  int64_t ilp_nodes;
  int ilp_vars, ilp_rows;
  double ms;                   /* scheduler wall time (costs, model, solve) */
  /* The ILP's coverage stage (ts_attn_schedule_solve with compact heights): greedy_makespan and
   * greedy_total are then the greedy's solution priced by the same exact model as the ILP's,
   * greedy_makespan_linear its own (marginal) prediction. Counted over every panel and height:
   * pieces fixed merged by dominance and free ones, components enumerated and solved by CBC (with
   * their variables, seconds and unproven stops), components left at the warm start when the
   * time was up, and (panel, height) models not solved because a lower bound showed that height
   * cannot beat a better one. */
  bool cover_run;
  double greedy_makespan_linear;
  int64_t cover_fixed, cover_free, cover_enum, cover_cbc, cover_cbc_vars, cover_cbc_unproven, cover_timeouts, cover_pruned;
  double cover_cbc_seconds, cover_ms;
} ts_attn_sched_info;

/* ---- the abstract problem (what the two solvers see; exposed for tests and other planners) -- */

typedef struct ts_attn_sched_problem {
  int64_t npanels, npieces;
  int ntiles;
  const int64_t *piece_panel;  /* [npieces] panel of each piece, in [0, npanels) */
  const double *cost;          /* [npieces][ntiles] cost of piece i with tile t (finite, >= 0) */
  const double *base;          /* [npanels] fixed cost of each panel (NULL: zeros) */
  /* The compact option (nheights = 0: none; then every field below is ignored). */
  int nheights;
  const double *merge;         /* [npieces][nheights] g: piece i merged into its panel's pass at height h */
  const double *open;          /* [npanels][nheights] o: panel p's pass at height h alone (NULL: zeros) */
  const unsigned char *must_open; /* [npanels] nonzero: the panel's pass must run (residue) (NULL: none) */
} ts_attn_sched_problem;

/* Solves the problem for opts->threads threads with opts->solver (menu, cost, blocks, heights
 * unused). tile[npieces] gets each piece's choice: a tile index t < ntiles (standalone) or
 * ntiles + h (merged at height index h); height[npanels] (may be NULL when nheights = 0) each
 * panel's pass height index or -1 (none); thread[npanels] each panel's thread. */
ts_status ts_attn_sched_problem_solve(const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o, int *tile,
                                      int *height, int32_t *thread, ts_attn_sched_info *info);

/* ---- schedules from blocks ------------------------------------------------------------------ */

/* blk: ts_blocks_extract's output on the (reordered) n x n pattern whose bitmap is mask. Builds
 * the panels with ts_attn_schedule_from_blocks(opts->blocks), then chooses tiles and threads as
 * above. out gets the schedule with its static thread assignment; info (may be NULL) the figures.
 * Errors: TS_ERR_INVALID_ARG for bad options or blocks; TS_ERR_SHAPE for a mask of another size. */
ts_status ts_attn_schedule_solve(const ts_blocks *blk, const ts_bitmap *mask, const ts_attn_sched_opts *o,
                                 ts_attn_schedule *out, ts_attn_sched_info *info);

/* Predicted makespan and total of any schedule under a cost function for P threads: each segment
 * is priced as a block (its rectangle, nnz = allowed cells inside), panels to threads by the
 * schedule's thread array when complete, else by LPT. For comparing fixed-tile schedules. */
ts_status ts_attn_schedule_predict(const ts_attn_schedule *s, const ts_bitmap *mask, ts_attn_cost_fn cost, void *user,
                                   int threads, double *makespan, double *total);

/* ---- the token order ------------------------------------------------------------------------ */

/* A symmetric reordering of the n x n mask (perm[new] = old) for attention: o->method as ts_reorder
 * runs it (mode forced symmetric), except TS_REORDER_AUTO, which tries none, raster, morton, hilbert
 * and rcm with a token grid (o->grid_h > 0), none, rcm, hc and ic without, and keeps the order whose 16-row COMPACT pass
 * computes the fewest cells (ts_attn_order_cells; ties: the earlier candidate), a 16-row DIAG pass
 * counting 1.3 cells per cell where that is fewer (ts_attn_order_diag_cells, src/attn/attn_order.c) -- the work of the
 * scheduled executor, where reorder's own auto counts the non-empty tiles a fixed-tile kernel runs.
 * st (may be NULL) gets the winner's ts_reorder stats, its method, and per candidate m
 * auto_tiles[m] = its cells (-1: not tried), auto_ms[m] = its time; st->ms the whole call. */
ts_status ts_attn_reorder(const ts_csr *mask, const ts_reorder_opts *o, int32_t *perm, ts_reorder_stats *st);
/* Cells a COMPACT pass of h-row sub-tiles computes over the mask in the order perm (NULL:
 * identity): per sub-tile, its rows times the keys its union reaches (4-key runs or single keys). */
ts_status ts_attn_order_cells(const ts_csr *mask, const int32_t *perm, int32_t h, int64_t *cells);
/* Cells a DIAG pass of h-row sub-tiles computes over the mask in the order perm (NULL: identity):
 * per sub-tile, its rows times the distinct offsets j - i of its cells. */
ts_status ts_attn_order_diag_cells(const ts_csr *mask, const int32_t *perm, int32_t h, int64_t *cells);

/* ---- plans: schedule + permutation, cached as JSON ------------------------------------------ */

/* What a plan is valid for (part of the key). Strings are truncated to fit. */
typedef struct ts_attn_plan_desc {
  int64_t n, heads, d;
  char dtype[8];        /* "f32" or "bf16" */
  char reorder[16];     /* ts_reorder_method_name of the method that made perm ("none" if none) */
  char solver[16];      /* informational: "greedy" / "ilp" (not in the key; put it in options) */
  char options[17];     /* caller's digest of every further knob that shaped the schedule (block
                           extraction, solver and its settings), e.g. 16 hex digits; "" if none */
  char cpu_model[64];   /* machine profile: ts_cpu()->model */
  char kernels[16];     /* ts_isa_name(ts_isa_active()) */
  int threads;          /* threads the schedule balances */
  char source[17];      /* the source key of the request that made it (ts_attn_plan_cache_store), or "";
                           not part of the plan key */
} ts_attn_plan_desc;

/* Fills cpu_model, kernels (this machine) and the given fields; dtype "f32", reorder "none". */
void ts_attn_plan_desc_init(ts_attn_plan_desc *d, int64_t n, int64_t heads, int64_t hd, int threads);

/* Key: 16 lower-case hex digits + NUL, the key hash (measure.h ts_hash_*) of the PERMUTED mask's CSR (n, row pointers,
 * columns), the permutation (perm[new] = old; NULL = identity), and the desc fields n, heads, d,
 * dtype, reorder, options, cpu_model, kernels, threads. */
ts_status ts_attn_plan_key(const ts_csr *permuted_mask, const int32_t *perm, const ts_attn_plan_desc *d,
                           char key[17]);
/* Lookup key of a plan REQUEST, computable before reordering: the key hash of the ORIGINAL mask's
 * CSR, `options` (any text fixing the reordering/extraction/solver knobs) and every desc field,
 * with desc.reorder the REQUESTED method (e.g. "auto") and desc.solver. The CLI keeps an index
 * (artifact attn-plan-src/<source key>) holding the plan key, so a repeated request skips the
 * reordering (ts_attn_plan_cache_find / _store below). */
ts_status ts_attn_plan_source_key(const ts_csr *mask, const char *options, const ts_attn_plan_desc *d, char key[17]);
/* The plan cache by request, in the artifact store (artifact.h): attn-plan-src/<source key> holds
 * the plan key, the plan is attn-plan/<key> and records the source key it was stored for
 * (desc.source) and a provenance with the machine profile's key. find
 * accepts a plan only when that record equals src, so a stale or tampered index entry is refused
 * (TS_ERR_INVALID_ARG) without rebuilding the permuted mask; TS_ERR_NOT_FOUND when there is no
 * entry (or only a corrupt one, moved aside). The check costs one source-key hash of the mask (a word-wise FNV-1a, < 1 ms for 3 MB of
 * CSR) plus reading the plan; the schedule is validated again when a plan is made from it (every
 * allowed cell owned). store writes the plan (desc.source = src) then the index, atomically. */
ts_status ts_attn_plan_cache_find(const char src[17], char key[17], ts_attn_plan_desc *d, int32_t **perm,
                                  ts_attn_schedule *s);
ts_status ts_attn_plan_cache_store(const char src[17], const char key[17], const ts_attn_plan_desc *d, const int32_t *perm,
                                   const ts_attn_schedule *s, const ts_attn_sched_info *info);
/* The plan's artifact path, <ts_cache_dir()>/attn-plan/<key>.json, into buf. */
ts_status ts_attn_plan_cache_path(const char key[17], char *buf, size_t cap);

/* Writes {"format": "tessera-attn-plan", "version": 1, "key", "desc": {...}, "perm": [...] or null,
 * "predicted": {...}, "schedule": {...}} atomically (directories created). info may be NULL. */
ts_status ts_attn_plan_save(const char *path, const char key[17], const ts_attn_plan_desc *d, const int32_t *perm,
                            const ts_attn_schedule *s, const ts_attn_sched_info *info);
/* Reads a plan file. expect_key non-NULL: TS_ERR_NOT_FOUND when the file is missing,
 * TS_ERR_INVALID_ARG ("... key mismatch ...") when its key differs. The schedule and the
 * permutation are validated (n must agree). *perm is ts_malloc'd or NULL (identity); d may be NULL. */
ts_status ts_attn_plan_load(const char *path, const char *expect_key, ts_attn_plan_desc *d, int32_t **perm,
                            ts_attn_schedule *s);

/* Runs a plan made for the permuted mask on tensors in ORIGINAL token order: gathers Q, K, V rows
 * (row i of the permuted problem is original row perm[i]) into temporaries, executes, and scatters
 * O back (O[perm[i]] = O'[i]). So the result equals attention over the original mask. Allocates
 * 4 x batch x heads x n x d floats for the call (the gather/scatter is the price of running on the
 * original order; a model that keeps activations in the permuted order avoids it: the one execute
 * that allocates, ARCHITECTURE.md "API shape"). perm NULL: plain execute. fp32 only. One call at a
 * time per plan, as ts_attn_execute. */
ts_status ts_attn_execute_original(const ts_context *ctx, ts_attn_plan *plan, const int32_t *perm, const float *Q,
                                   const float *K, const float *V, float *O, int64_t batch, int64_t heads, int64_t n,
                                   int64_t d);

#ifdef __cplusplus
}
#endif
#endif
