/* tessera solvers: an ILP/MIP builder over COIN-OR CBC, knapsack and integer-partition dynamic
 * programs, a genetic-algorithm engine with an NSGA-II mode, and Pareto-set helpers.
 * Planners use them to decide (tile configurations, partition sizes, device schedules); every
 * solver returns the best solution it knows together with how good it is known to be. */
#ifndef TESSERA_SOLVE_H
#define TESSERA_SOLVE_H

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== ILP / MIP (COIN-OR CBC) ================================================================
 * Build a model (variables, sparse rows, objective), then solve it as many times as you like
 * (the model is kept by tessera and handed to a fresh CBC model on every solve, so it may be
 * changed between solves). Solves are serialized process-wide because CBC's driver keeps static
 * state; use the `threads` option for parallelism inside one solve.
 *
 * Infinite bounds are written as -INFINITY / INFINITY. Row coefficients and the right-hand side
 * must be finite; duplicate variable indices in one row are summed and zero coefficients dropped. */

/* Thread safety: a model belongs to one thread at a time (building and ts_ilp_solve write it;
 * check, eval and the counts only read). Different models may be built and solved on different
 * threads at once; their CBC solves then take turns (the process-wide lock above). */
typedef struct ts_ilp ts_ilp;

typedef enum ts_ilp_var_kind { TS_ILP_BINARY = 0, TS_ILP_INTEGER, TS_ILP_CONTINUOUS } ts_ilp_var_kind;
typedef enum ts_ilp_cmp { TS_ILP_LE = 0, TS_ILP_GE, TS_ILP_EQ } ts_ilp_cmp; /* row: sum a_j x_j (<=,>=,==) b */

typedef enum ts_ilp_status {
  TS_ILP_OPTIMAL = 0,         /* proven optimal (within the requested relative gap) */
  TS_ILP_FEASIBLE,            /* a verified solution, optimality not proven (time limit, or warm start kept) */
  TS_ILP_INFEASIBLE,          /* proven infeasible */
  TS_ILP_NO_SOLUTION,         /* time limit hit before any solution was found */
  TS_ILP_UNBOUNDED,           /* the objective can improve without limit */
  TS_ILP_ERROR                /* the solver failed or returned a solution that does not check out */
} ts_ilp_status;

typedef struct ts_ilp_options {
  double time_limit; /* wall-clock (elapsed) seconds for the whole solve; <= 0: none */
  double rel_gap;    /* stop when |best - bound| <= rel_gap * |best|; 0 (default): prove optimality */
  int threads;       /* CBC branch-and-bound threads; default 1 (no extra threads) */
  int log_level;     /* CBC's own log on stdout: 0 (default) quiet, 1 summary, up to 4 */
  bool progress;     /* a ts_progress line on stderr while solving (elapsed vs time limit) */
} ts_ilp_options;

typedef struct ts_ilp_result {
  ts_ilp_status status;
  int nvars;
  double *x;             /* [nvars] best known solution (integers exactly integral), NULL if none */
  double objective;      /* objective of x recomputed by tessera; NAN if no solution */
  double bound;          /* best bound CBC proved (same sense as the objective); NAN if unknown */
  double seconds;        /* wall time of the solve */
  bool from_warm_start;  /* x is the caller's warm start (CBC found nothing better or failed) */
  bool warm_start_used;  /* a warm start was set, checked feasible and handed to CBC */
  int64_t nodes;         /* branch-and-bound nodes CBC explored */
} ts_ilp_result;

ts_status ts_ilp_create(ts_ilp **out);
void ts_ilp_destroy(ts_ilp *m);

/* Adds a variable and returns its index in *index (may be NULL). `name` may be NULL ("x<index>");
 * it is used in error messages only. Binaries have bounds [0,1] (lo/hi ignored). Integer and
 * continuous variables need lo <= hi, neither NaN (integers: the bounds are rounded inward). */
ts_status ts_ilp_add_var(ts_ilp *m, ts_ilp_var_kind kind, const char *name, double lo, double hi, double obj,
                         int *index);
ts_status ts_ilp_add_binary(ts_ilp *m, const char *name, double obj, int *index);
ts_status ts_ilp_add_integer(ts_ilp *m, const char *name, double lo, double hi, double obj, int *index);
ts_status ts_ilp_add_continuous(ts_ilp *m, const char *name, double lo, double hi, double obj, int *index);
int ts_ilp_num_vars(const ts_ilp *m);
int ts_ilp_num_rows(const ts_ilp *m);

/* Objective: sum obj_j x_j, minimized unless ts_ilp_set_maximize(m, true). */
ts_status ts_ilp_set_obj(ts_ilp *m, int var, double coef);
void ts_ilp_set_maximize(ts_ilp *m, bool maximize);

/* Adds the row sum_k coefs[k] * x[vars[k]] (cmp) rhs; returns its index in *row (may be NULL).
 * nnz == 0 is allowed (then the row is a check on rhs alone). */
ts_status ts_ilp_add_row(ts_ilp *m, const char *name, int nnz, const int *vars, const double *coefs, ts_ilp_cmp cmp,
                         double rhs, int *row);

/* A row built term by term (grows as needed; zero-initialize it): push terms, then
 * ts_ilp_row_add adds the row to the model and empties the builder for the next one, keeping its
 * memory. Free it with ts_ilp_row_free. */
typedef struct ts_ilp_row {
  int *vars;
  double *coefs;
  int n, cap;
} ts_ilp_row;
ts_status ts_ilp_row_push(ts_ilp_row *r, int var, double coef);
ts_status ts_ilp_row_add(ts_ilp *m, ts_ilp_row *r, ts_ilp_cmp cmp, double rhs);
void ts_ilp_row_free(ts_ilp_row *r);

/* A full solution vector [nvars] to start from (copied). It is checked at solve time: when
 * feasible it is given to CBC as its MIP start and is the fallback result; when not, it is
 * ignored (result.warm_start_used = false). x == NULL clears it. */
ts_status ts_ilp_set_warm_start(ts_ilp *m, const double *x, int n);

/* Checks a full assignment against bounds, integrality and rows (tolerance 1e-6 relative to the
 * row's magnitude). *feasible false with a ts_error-style detail in *why (may be NULL). */
ts_status ts_ilp_check(const ts_ilp *m, const double *x, int n, bool *feasible, char *why, size_t why_cap);
/* Objective of a full assignment. */
double ts_ilp_eval(const ts_ilp *m, const double *x);

void ts_ilp_options_default(ts_ilp_options *o);
/* Solves; `opt` may be NULL (defaults). Returns TS_OK exactly when result->x holds a verified
 * solution (OPTIMAL or FEASIBLE). Otherwise: TS_ERR_INFEASIBLE (INFEASIBLE), TS_ERR_TIMEOUT
 * (NO_SOLUTION), TS_ERR_SOLVER (UNBOUNDED or ERROR, with detail), TS_ERR_INVALID_ARG for bad
 * options. The result is always initialized; free it with ts_ilp_result_free. */
ts_status ts_ilp_solve(ts_ilp *m, const ts_ilp_options *opt, ts_ilp_result *result);
void ts_ilp_result_free(ts_ilp_result *r);
const char *ts_ilp_status_name(ts_ilp_status s); /* "optimal", "feasible", ... */

/* ==== Knapsack and partition dynamic programs ================================================
 * Weights and sizes are non-negative integers; the DP tables hold about items x (capacity + 1)
 * cells. Tables over TS_DP_MAX_TABLE_BYTES (or sizes whose product overflows) are refused with
 * TS_ERR_OVERFLOW naming the sizes: scale the weights down (e.g. to coarser units) instead. */

#define TS_DP_MAX_TABLE_BYTES ((size_t)1 << 30)

/* 0/1 knapsack: maximize sum values[i] x_i subject to sum weights[i] x_i <= capacity.
 * chosen[n] (may be NULL) gets the selection, *best_value (may be NULL) its value. Items with
 * value <= 0 are never chosen. */
ts_status ts_knapsack_01(int n, const int64_t *weights, const double *values, int64_t capacity, bool *chosen,
                         double *best_value);

/* Bounded knapsack: item i may be taken 0..counts[i] times. take[n] (may be NULL) gets the
 * multiplicities. Solved as 0/1 over binary-split copies (1, 2, 4, ..., rest). */
ts_status ts_knapsack_bounded(int n, const int64_t *weights, const double *values, const int64_t *counts,
                              int64_t capacity, int64_t *take, double *best_value);

/* Multiple-choice knapsack: classes k = 0..nclasses-1 own the options
 * class_start[k] .. class_start[k+1]-1 (weights[], values[] indexed by option). Pick exactly one
 * option per class so that the total weight <= capacity, minimizing (maximize = false) or
 * maximizing the total value. choice[nclasses] (may be NULL) gets the chosen option indices
 * (global, i.e. in class_start[k]..). No feasible pick: TS_ERR_INFEASIBLE. */
ts_status ts_knapsack_mc(int nclasses, const int *class_start, const int64_t *weights, const double *values,
                         int64_t capacity, bool maximize, int *choice, double *best_value);

/* Integer partition: choose a multiset of parts from sizes[0..m) (each size >= 1, any number
 * of times) summing exactly to total, minimizing sum costs[part]; at most max_parts parts when
 * max_parts > 0. counts[m] (may be NULL) gets how often each size is used, *best_cost (may be
 * NULL) the total cost. No such multiset: TS_ERR_INFEASIBLE. Ties prefer fewer parts. */
ts_status ts_partition_min_cost(int64_t total, int m, const int64_t *sizes, const double *costs, int64_t max_parts,
                                int64_t *counts, double *best_cost);

/* ==== Pareto sets (all objectives minimized) ================================================= */

/* f: [n][m]. rank[n] gets the non-domination front of every point (0 = non-dominated);
 * *nfronts (may be NULL) the number of fronts. Equal points do not dominate each other. */
ts_status ts_pareto_rank(const double *f, int n, int m, int *rank, int *nfronts);
/* Indices (ascending) of the non-dominated points of f: [n][m] into idx[n]; count in *count. */
ts_status ts_pareto_front(const double *f, int n, int m, int *idx, int *count);
/* Crowding distance of the points members[0..count) of one front (INFINITY at the extremes). */
ts_status ts_pareto_crowding(const double *f, int n, int m, const int *members, int count, double *dist);
/* Area dominated by the points f: [n][2] and bounded by the reference point ref[2]; points
 * that do not strictly dominate ref contribute nothing. */
ts_status ts_hypervolume_2d(const double *f, int n, const double ref[2], double *hv);

/* ==== Genetic algorithm / NSGA-II ============================================================
 * Genome: ngenes values, gene g in [lo[g], hi[g]], integral where integer[g] (integer == NULL:
 * all continuous); or, with permutation = true, a permutation of 0..ngenes-1 (lo/hi/integer
 * unused). The callback writes nobj objectives (all minimized; NaN counts as +INFINITY) and
 * returns TS_OK, or an error that stops the run and is returned. With threads > 1 the callback
 * is called concurrently and must be thread-safe; results stay deterministic for a given seed. */

typedef ts_status (*ts_ga_eval_fn)(const double *genes, int ngenes, double *objectives, void *user);

typedef struct ts_ga_problem {
  int ngenes;
  int nobj;               /* >= 1; > 1 needs nsga2 */
  const double *lo, *hi;  /* [ngenes] */
  const bool *integer;    /* [ngenes] or NULL */
  bool permutation;
  ts_ga_eval_fn eval;
  void *user;
} ts_ga_problem;

typedef enum ts_ga_crossover {
  TS_GA_CROSS_UNIFORM = 0, /* each gene from either parent */
  TS_GA_CROSS_ONE_POINT,   /* prefix from one parent, suffix from the other */
  TS_GA_CROSS_SBX          /* simulated binary crossover, each gene with probability 1/2 (integers rounded) */
} ts_ga_crossover;         /* permutation genomes always use order crossover (OX1) */

typedef struct ts_ga_options {
  int population;         /* even, >= 4; default 100 */
  int generations;        /* default 100 */
  int tournament;         /* tournament size >= 2; default 2 */
  ts_ga_crossover crossover; /* default SBX */
  double crossover_prob;  /* per pair; default 0.9 */
  double mutation_prob;   /* per gene; <= 0: 1/ngenes (default) */
  double eta_c, eta_m;    /* SBX and polynomial-mutation distribution indices; default 15, 20 */
  int elite;              /* single-objective only: best individuals copied unchanged; default 2 */
  bool nsga2;             /* NSGA-II: non-dominated sorting + crowding, (mu+lambda) survival */
  uint64_t seed;
  int threads;            /* concurrent evaluations; default 1 */
  double time_limit;      /* elapsed seconds; <= 0: none (stops after a whole generation) */
  const double *initial;  /* n_initial genomes [n_initial][ngenes] put in the first population */
  int n_initial;
  bool progress;          /* ts_progress over generations on stderr */
} ts_ga_options;

typedef struct ts_ga_result {
  int n;            /* solutions returned */
  int ngenes, nobj;
  double *x;        /* [n][ngenes] */
  double *f;        /* [n][nobj] */
  int generations;  /* generations completed */
  int64_t evaluations;
  double seconds;
} ts_ga_result;

void ts_ga_options_default(ts_ga_options *o);
/* Single-objective: the final population sorted best first (x[0] is the best ever found).
 * NSGA-II: the final non-dominated front, duplicates removed, sorted by objective 0. */
ts_status ts_ga_run(const ts_ga_problem *p, const ts_ga_options *o, ts_ga_result *r);
void ts_ga_result_free(ts_ga_result *r);

#ifdef __cplusplus
}
#endif
#endif
