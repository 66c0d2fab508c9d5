/* tessera attention scheduler and plan cache: picks a tile for every dense block of a (reordered)
 * mask and a thread for every row panel, minimizing the predicted thread makespan, and stores the
 * result -- schedule + permutation -- as a plan file keyed by the mask and the machine.
 *
 * Model. ts_attn_schedule_from_blocks fixes the row panels from the block rectangles alone (not from
 * the tiles), so the panels are known before any tile is chosen. A block cut by panel boundaries
 * becomes one PIECE per panel (the scheduler's unit: pieces of one block may get different tiles).
 * Piece i in panel p(i) run with menu tile t costs c[i][t] (any ts_attn_cost_fn: the analytic
 * ts_attn_cost_default or a measured one); each panel also has a fixed BASE cost, its residue
 * segment (cost of the residue-tile sub-tiles that hold residue cells, each priced by the same cost
 * function). Panel load L_p = base_p + sum_{i in p} c[i][t_i]; thread load = sum of its panels'
 * loads (times batch*heads, a common factor); makespan = largest thread load.
 *
 * GREEDY: every piece its cheapest tile, panels to threads by LPT (largest load first, each to the
 * least loaded thread, lowest index on ties).
 *
 * ILP (COIN-OR CBC through ts_ilp_*), minimizing M + eps * (total cost):
 *   x[i,t] in {0,1}  piece i uses candidate tile t;   sum_t x[i,t] = 1
 *   a[p,q] in {0,1}  panel p on thread q;             sum_q a[p,q] = 1
 *   y[p,q] >= 0      load of panel p on thread q:     y[p,q] >= L_p(x) - U_p (1 - a[p,q])
 *                    (big-M linearization of L_p * a[p,q]; U_p = base_p + sum_i max_t c[i][t] bounds L_p)
 *   sum_p y[p,q] <= M for every thread q;  P * M >= sum_p L_p(x) (valid, tightens the relaxation)
 *   symmetry: threads are identical, so panels sorted by decreasing cheapest load may use only
 *   threads 0..rank (relabelling threads by first use makes any assignment satisfy it).
 * Candidates per piece: its k_tiles cheapest menu tiles. AGGREGATION: when the x variables would
 * exceed max_tile_vars, every piece is fixed to its cheapest tile and the model drops x and y:
 *   sum_p L_p a[p,q] <= M  (exact P||Cmax on the panels)
 * This loses nothing for a separable cost: L_p only grows when a piece leaves its cheapest tile, so
 * cheapest tiles are optimal for every assignment -- the x variables matter only for cost functions
 * the scheduler is given per piece, never across pieces. In fact any x with a non-cheapest tile
 * only raises some L_p, so the aggregated optimum IS the full model's optimum (makespan and total):
 * the x variables are the paper's formulation kept for generality (a future coupling across pieces,
 * e.g. a cap on distinct tiles per panel, would live there). The full model's big-M rows make a
 * weak relaxation, so when it is used the aggregated model is solved first (in up to half the time
 * limit); if that is proven optimal it is the answer (info.tiles_fixed), else its assignment, when
 * better than LPT, becomes the full model's start. Every solve starts
 * from the best solution known (warm start), runs under the elapsed-time limit (both stages
 * together), and the ILP's answer is kept only when it is verified and not worse than greedy
 * (smaller makespan, or equal makespan and smaller total); otherwise the greedy schedule is
 * returned (info says which). One thread: greedy is optimal (makespan = total), the ILP is skipped. */
#ifndef TESSERA_ATTN_SCHED_H
#define TESSERA_ATTN_SCHED_H

#include <stdint.h>

#include "tessera/attn.h"
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
  bool full_model;             /* ILP: solve the full model even when the aggregated one is proven
                                  optimal (false; for tests and comparison) */
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
  bool tiles_fixed;            /* aggregation: x variables dropped, tiles at their cheapest */
  double ilp_makespan;         /* makespan of the ILP's solution (NAN if none) */
  double ilp_gap;              /* (objective - bound) / objective of the ILP (NAN if unknown) */
  double ilp_seconds;
  int64_t ilp_nodes;
  int ilp_vars, ilp_rows;
  double ms;                   /* scheduler wall time (costs, model, solve) */
} ts_attn_sched_info;

/* ---- the abstract problem (what the two solvers see; exposed for tests and other planners) -- */

typedef struct ts_attn_sched_problem {
  int64_t npanels, npieces;
  int ntiles;
  const int64_t *piece_panel;  /* [npieces] panel of each piece, in [0, npanels) */
  const double *cost;          /* [npieces][ntiles] cost of piece i with tile t (finite, >= 0) */
  const double *base;          /* [npanels] fixed cost of each panel (NULL: zeros) */
} ts_attn_sched_problem;

/* Solves the problem for opts->threads threads with opts->solver (menu, cost, blocks unused).
 * tile[npieces] gets each piece's tile index, thread[npanels] each panel's thread. */
ts_status ts_attn_sched_problem_solve(const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o, int *tile,
                                      int32_t *thread, ts_attn_sched_info *info);

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
} ts_attn_plan_desc;

/* Fills cpu_model, kernels (this machine) and the given fields; dtype "f32", reorder "none". */
void ts_attn_plan_desc_init(ts_attn_plan_desc *d, int64_t n, int64_t heads, int64_t hd, int threads);

/* Key: 16 lower-case hex digits + NUL, FNV-1a 64 over the PERMUTED mask's CSR (n, row pointers,
 * columns), the permutation (perm[new] = old; NULL = identity), and the desc fields n, heads, d,
 * dtype, reorder, options, cpu_model, kernels, threads. */
ts_status ts_attn_plan_key(const ts_csr *permuted_mask, const int32_t *perm, const ts_attn_plan_desc *d,
                           char key[17]);
/* Lookup key of a plan REQUEST, computable before reordering: FNV-1a 64 over the ORIGINAL mask's
 * CSR, `options` (any text fixing the reordering/extraction/solver knobs) and every desc field,
 * with desc.reorder the REQUESTED method (e.g. "auto") and desc.solver. The CLI keeps an index
 * <cache>/plans/src-<source key>.key holding the plan key, so a repeated request skips the
 * reordering; the plan found is still validated by recomputing its key from the stored
 * permutation applied to the mask. */
ts_status ts_attn_plan_source_key(const ts_csr *mask, const char *options, const ts_attn_plan_desc *d, char key[17]);
/* <ts_cache_dir()>/plans/<key>.json into buf. */
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
 * original order; a model that keeps activations in the permuted order avoids it). perm NULL:
 * plain execute. fp32 only. */
ts_status ts_attn_execute_original(const ts_context *ctx, ts_attn_plan *plan, const int32_t *perm, const float *Q,
                                   const float *K, const float *V, float *O, int64_t batch, int64_t heads, int64_t n,
                                   int64_t d);

#ifdef __cplusplus
}
#endif
#endif
