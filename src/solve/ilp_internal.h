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

/* Test seam: 1 drops CBC's solution, 2 corrupts it (moves variable 0 outside its bounds),
 * so tests can reach the warm-start fallback and the TS_ERR_SOLVER check. Always 0 in use. */
extern int ts__ilp_fault;

#endif
