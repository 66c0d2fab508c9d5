/* The ILP model as tessera keeps it (shared by ilp_model.c and ilp_cbc.c).
 * Rows are stored CSR: row r owns entries row_start[r] .. row_start[r+1]-1 of col[]/val[],
 * with distinct, ascending column indices and no zero coefficients. */
#ifndef TS_SOLVE_ILP_INTERNAL_H
#define TS_SOLVE_ILP_INTERNAL_H

#include "tessera/solve.h"

struct ts_ilp {
  int nvars, cap_vars;
  ts_ilp_var_kind *kind; /* [nvars] */
  double *lo, *hi, *obj; /* [nvars]; integer bounds are integral (or infinite) */
  char **var_name;       /* [nvars], NULL entries mean "x<index>" */

  int nrows, cap_rows;
  int64_t *row_start;    /* [nrows + 1] */
  ts_ilp_cmp *cmp;       /* [nrows] */
  double *rhs;           /* [nrows] */
  char **row_name;       /* [nrows], NULL entries mean "r<index>" */
  int64_t nnz, cap_nnz;
  int *col;              /* [nnz] */
  double *val;           /* [nnz] */

  bool maximize;
  double *warm;          /* [warm_n] or NULL */
  int warm_n;
};

/* Feasibility tolerances: bounds and rows are checked to TS__ILP_TOL times (1 + magnitude),
 * integrality to TS__ILP_INT_TOL absolute. CBC's own primal tolerance is 1e-7 (scaled), so a
 * genuine CBC solution passes with a margin. */
#define TS__ILP_TOL 1e-6
#define TS__ILP_INT_TOL 1e-6

/* Name of variable j / row r for messages ("x12" when unnamed). */
const char *ts__ilp_var_name(const ts_ilp *m, int j, char *buf, size_t cap);
const char *ts__ilp_row_name(const ts_ilp *m, int r, char *buf, size_t cap);
static inline bool ts__ilp_is_int(const ts_ilp *m, int j) { return m->kind[j] != TS_ILP_CONTINUOUS; }
/* Rounds near-integral integer variables and clamps near-bound values into their bounds, in place. */
void ts__ilp_snap(const ts_ilp *m, double *x);
/* True when x (nvars values) satisfies bounds, integrality and rows; else writes why. */
bool ts__ilp_feasible(const ts_ilp *m, const double *x, char *why, size_t cap);

/* ts_ilp_solve in two steps around the solver (ilp_cbc.c), internal so that tests can hand the
 * second outcomes CBC rarely gives (no solution, a corrupted one):
 * ts__ilp_warm: the model's warm start, snapped, when it has one that satisfies the model (*out
 *   malloc'd), else *out = NULL.
 * ts__ilp_verdict: the result of a solve from what the solver reported (cb; cb->x malloc'd or NULL)
 *   and the warm start (from ts__ilp_warm, or NULL); takes both over. Never trusts cb->x blindly:
 *   snaps it and checks every bound, integer and row. Its solution when it checks out and the warm
 *   start is no better; else the warm start (FEASIBLE, from_warm_start); else the reason there is
 *   none: TS_ERR_SOLVER (a solution that does not check out, unbounded, no verdict),
 *   TS_ERR_INFEASIBLE, TS_ERR_TIMEOUT (time_limit names the limit). res as ts_ilp_solve sets it up
 *   (zeroed, status TS_ILP_ERROR, nvars, warm_start_used); t0: ts_now() when the solve began. */
typedef struct ts__ilp_outcome {
  double *x; /* [nvars] copy of the solver's best solution or NULL */
  bool optimal, infeasible, unbounded, time_hit, abandoned;
  double bound;
  int64_t nodes;
} ts__ilp_outcome;
ts_status ts__ilp_warm(const ts_ilp *m, double **out);
ts_status ts__ilp_verdict(const ts_ilp *m, ts__ilp_outcome *cb, double *warm, double time_limit, double t0, ts_ilp_result *res);

#endif
