/* ILP model building and checking: variables with bounds and kinds, sparse rows, objective,
 * warm start, and tessera's own feasibility check (used on every solution CBC returns). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solve/ilp_internal.h"

ts_status ts_ilp_create(ts_ilp **out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_create: out is NULL");
  *out = calloc(1, sizeof **out);
  if (!*out) return ts_error(TS_ERR_OOM, "ts_ilp_create: out of memory");
  return TS_OK;
}

void ts_ilp_destroy(ts_ilp *m) {
  if (!m) return;
  for (int j = 0; j < m->nvars; j++) free(m->var_name[j]);
  for (int r = 0; r < m->nrows; r++) free(m->row_name[r]);
  free(m->kind), free(m->lo), free(m->hi), free(m->obj), free(m->var_name);
  free(m->row_start), free(m->cmp), free(m->rhs), free(m->row_name), free(m->col), free(m->val);
  free(m->warm);
  free(m);
}

int ts_ilp_num_vars(const ts_ilp *m) { return m ? m->nvars : 0; }
int ts_ilp_num_rows(const ts_ilp *m) { return m ? m->nrows : 0; }
void ts_ilp_set_maximize(ts_ilp *m, bool maximize) {
  if (m) m->maximize = maximize;
}

const char *ts__ilp_var_name(const ts_ilp *m, int j, char *buf, size_t cap) {
  if (m->var_name[j]) return m->var_name[j];
  snprintf(buf, cap, "x%d", j);
  return buf;
}

const char *ts__ilp_row_name(const ts_ilp *m, int r, char *buf, size_t cap) {
  if (m->row_name[r]) return m->row_name[r];
  snprintf(buf, cap, "r%d", r);
  return buf;
}

/* realloc of *p to cap elements of `size` bytes; leaves *p untouched on failure. */
static bool grow(void **p, size_t cap, size_t size) {
  size_t bytes;
  if (!ts_mul_size(cap, size, &bytes)) return false;
  void *q = realloc(*p, bytes ? bytes : 1);
  if (!q) return false;
  *p = q;
  return true;
}

static ts_status reserve_vars(ts_ilp *m) {
  if (m->nvars < m->cap_vars) return TS_OK;
  if (m->cap_vars >= (1 << 30)) return ts_error(TS_ERR_OVERFLOW, "ILP: more than 2^30 variables");
  int cap = m->cap_vars ? 2 * m->cap_vars : 64;
  if (!grow((void **)&m->kind, cap, sizeof *m->kind) || !grow((void **)&m->lo, cap, sizeof(double)) ||
      !grow((void **)&m->hi, cap, sizeof(double)) || !grow((void **)&m->obj, cap, sizeof(double)) ||
      !grow((void **)&m->var_name, cap, sizeof(char *)))
    return ts_error(TS_ERR_OOM, "ILP: out of memory adding variable %d", m->nvars);
  m->cap_vars = cap;
  return TS_OK;
}

ts_status ts_ilp_add_var(ts_ilp *m, ts_ilp_var_kind kind, const char *name, double lo, double hi, double obj,
                         int *index) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_add_var: model is NULL");
  const char *nm = name ? name : "(unnamed)";
  if (kind != TS_ILP_BINARY && kind != TS_ILP_INTEGER && kind != TS_ILP_CONTINUOUS)
    return ts_error(TS_ERR_INVALID_ARG, "ILP variable '%s': unknown kind %d", nm, (int)kind);
  if (!isfinite(obj)) return ts_error(TS_ERR_INVALID_ARG, "ILP variable '%s': objective coefficient %g", nm, obj);
  if (kind == TS_ILP_BINARY) {
    lo = 0, hi = 1;
  } else {
    if (isnan(lo) || isnan(hi) || lo == INFINITY || hi == -INFINITY)
      return ts_error(TS_ERR_INVALID_ARG, "ILP variable '%s': bounds [%g, %g]", nm, lo, hi);
    if (kind == TS_ILP_INTEGER) {
      if (isfinite(lo)) lo = ceil(lo - TS__ILP_INT_TOL);
      if (isfinite(hi)) hi = floor(hi + TS__ILP_INT_TOL);
    }
    if (lo > hi)
      return ts_error(TS_ERR_INVALID_ARG, "ILP variable '%s': lower bound %g above upper bound %g%s", nm, lo, hi,
                      kind == TS_ILP_INTEGER ? " (after rounding to integers)" : "");
  }
  TS_TRY(reserve_vars(m));
  char *copy = NULL;
  if (name && !(copy = strdup(name))) return ts_error(TS_ERR_OOM, "ILP: out of memory copying a name");
  int j = m->nvars++;
  m->kind[j] = kind, m->lo[j] = lo, m->hi[j] = hi, m->obj[j] = obj, m->var_name[j] = copy;
  if (index) *index = j;
  return TS_OK;
}

ts_status ts_ilp_add_binary(ts_ilp *m, const char *name, double obj, int *index) {
  return ts_ilp_add_var(m, TS_ILP_BINARY, name, 0, 1, obj, index);
}
ts_status ts_ilp_add_integer(ts_ilp *m, const char *name, double lo, double hi, double obj, int *index) {
  return ts_ilp_add_var(m, TS_ILP_INTEGER, name, lo, hi, obj, index);
}
ts_status ts_ilp_add_continuous(ts_ilp *m, const char *name, double lo, double hi, double obj, int *index) {
  return ts_ilp_add_var(m, TS_ILP_CONTINUOUS, name, lo, hi, obj, index);
}

ts_status ts_ilp_set_obj(ts_ilp *m, int var, double coef) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_set_obj: model is NULL");
  if (var < 0 || var >= m->nvars)
    return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_set_obj: variable index %d out of range [0, %d)", var, m->nvars);
  char b[32];
  if (!isfinite(coef))
    return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_set_obj: coefficient %g for variable '%s'", coef,
                    ts__ilp_var_name(m, var, b, sizeof b));
  m->obj[var] = coef;
  return TS_OK;
}

typedef struct entry {
  int col;
  double val;
} entry;

static int cmp_entry(const void *a, const void *b) {
  int x = ((const entry *)a)->col, y = ((const entry *)b)->col;
  return (x > y) - (x < y);
}

ts_status ts_ilp_add_row(ts_ilp *m, const char *name, int nnz, const int *vars, const double *coefs, ts_ilp_cmp cmp,
                         double rhs, int *row) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_add_row: model is NULL");
  const char *nm = name ? name : "(unnamed)";
  if (nnz < 0 || (nnz > 0 && (!vars || !coefs)))
    return ts_error(TS_ERR_INVALID_ARG, "ILP row '%s': %d entries with vars=%p coefs=%p", nm, nnz, (const void *)vars,
                    (const void *)coefs);
  if (cmp != TS_ILP_LE && cmp != TS_ILP_GE && cmp != TS_ILP_EQ)
    return ts_error(TS_ERR_INVALID_ARG, "ILP row '%s': unknown comparison %d", nm, (int)cmp);
  if (!isfinite(rhs)) return ts_error(TS_ERR_INVALID_ARG, "ILP row '%s': right-hand side %g", nm, rhs);
  for (int k = 0; k < nnz; k++) {
    if (vars[k] < 0 || vars[k] >= m->nvars)
      return ts_error(TS_ERR_INVALID_ARG, "ILP row '%s': entry %d names variable %d, model has %d", nm, k, vars[k],
                      m->nvars);
    if (!isfinite(coefs[k]))
      return ts_error(TS_ERR_INVALID_ARG, "ILP row '%s': coefficient %g for variable %d", nm, coefs[k], vars[k]);
  }
  if (m->nrows >= (1 << 30)) return ts_error(TS_ERR_OVERFLOW, "ILP: more than 2^30 rows");
  if (m->nrows + 1 >= m->cap_rows) {
    int cap = m->cap_rows ? 2 * m->cap_rows : 64;
    if (!grow((void **)&m->row_start, (size_t)cap + 1, sizeof(int64_t)) ||
        !grow((void **)&m->cmp, cap, sizeof(ts_ilp_cmp)) || !grow((void **)&m->rhs, cap, sizeof(double)) ||
        !grow((void **)&m->row_name, cap, sizeof(char *)))
      return ts_error(TS_ERR_OOM, "ILP: out of memory adding row '%s'", nm);
    if (m->cap_rows == 0) m->row_start[0] = 0;
    m->cap_rows = cap;
  }
  if (m->nnz + nnz > m->cap_nnz) {
    int64_t cap = m->cap_nnz ? 2 * m->cap_nnz : 256;
    while (cap < m->nnz + nnz) cap *= 2;
    if (!grow((void **)&m->col, (size_t)cap, sizeof(int)) || !grow((void **)&m->val, (size_t)cap, sizeof(double)))
      return ts_error(TS_ERR_OOM, "ILP: out of memory adding row '%s' (%d entries)", nm, nnz);
    m->cap_nnz = cap;
  }
  entry *e = malloc(sizeof(entry) * (size_t)(nnz ? nnz : 1));
  char *copy = NULL;
  if (!e || (name && !(copy = strdup(name)))) {
    free(e);
    return ts_error(TS_ERR_OOM, "ILP: out of memory adding row '%s'", nm);
  }
  for (int k = 0; k < nnz; k++) e[k].col = vars[k], e[k].val = coefs[k];
  qsort(e, (size_t)nnz, sizeof *e, cmp_entry);
  /* Sum duplicates, drop zeros: CBC's matrix must not hold repeated (row, col) entries. */
  int64_t at = m->nnz;
  for (int k = 0; k < nnz;) {
    int c = e[k].col;
    double s = 0;
    for (; k < nnz && e[k].col == c; k++) s += e[k].val;
    if (s != 0) m->col[at] = c, m->val[at] = s, at++;
  }
  free(e);
  int r = m->nrows++;
  m->nnz = at;
  m->row_start[r + 1] = at;
  m->cmp[r] = cmp, m->rhs[r] = rhs, m->row_name[r] = copy;
  if (row) *row = r;
  return TS_OK;
}

ts_status ts_ilp_row_push(ts_ilp_row *r, int var, double coef) {
  if (!r) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_row_push: row is NULL");
  if (r->n == r->cap) {
    if (r->cap >= (1 << 29)) return ts_error(TS_ERR_OVERFLOW, "ILP row builder: more than 2^30 entries");
    int cap = r->cap ? 2 * r->cap : 64;
    /* each block is stored as soon as it is grown, so ts_ilp_row_free releases the right one */
    if (!grow((void **)&r->vars, (size_t)cap, sizeof(int)) || !grow((void **)&r->coefs, (size_t)cap, sizeof(double)))
      return ts_error(TS_ERR_OOM, "ILP row builder: out of memory for %d entries", cap);
    r->cap = cap;
  }
  r->vars[r->n] = var, r->coefs[r->n++] = coef;
  return TS_OK;
}

ts_status ts_ilp_row_add(ts_ilp *m, ts_ilp_row *r, ts_ilp_cmp cmp, double rhs) {
  if (!r) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_row_add: row is NULL");
  ts_status s = ts_ilp_add_row(m, NULL, r->n, r->vars, r->coefs, cmp, rhs, NULL);
  r->n = 0;
  return s;
}

void ts_ilp_row_free(ts_ilp_row *r) {
  if (!r) return;
  free(r->vars);
  free(r->coefs);
  memset(r, 0, sizeof *r);
}

ts_status ts_ilp_set_warm_start(ts_ilp *m, const double *x, int n) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_set_warm_start: model is NULL");
  if (!x) {
    free(m->warm), m->warm = NULL, m->warm_n = 0;
    return TS_OK;
  }
  if (n != m->nvars)
    return ts_error(TS_ERR_INVALID_ARG, "ILP warm start: %d values for a model with %d variables", n, m->nvars);
  for (int j = 0; j < n; j++)
    if (!isfinite(x[j])) return ts_error(TS_ERR_INVALID_ARG, "ILP warm start: value %g for variable %d", x[j], j);
  double *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!w) return ts_error(TS_ERR_OOM, "ILP warm start: out of memory");
  memcpy(w, x, sizeof(double) * (size_t)n);
  free(m->warm);
  m->warm = w, m->warm_n = n;
  return TS_OK;
}

void ts__ilp_snap(const ts_ilp *m, double *x) {
  for (int j = 0; j < m->nvars; j++) {
    double v = x[j];
    if (ts__ilp_is_int(m, j) && fabs(v - nearbyint(v)) <= TS__ILP_INT_TOL) v = nearbyint(v);
    if (v < m->lo[j] && m->lo[j] - v <= TS__ILP_TOL * (1 + fabs(m->lo[j]))) v = m->lo[j];
    if (v > m->hi[j] && v - m->hi[j] <= TS__ILP_TOL * (1 + fabs(m->hi[j]))) v = m->hi[j];
    x[j] = v;
  }
}

bool ts__ilp_feasible(const ts_ilp *m, const double *x, char *why, size_t cap) {
  char b[32];
  char dummy[1];
  if (!why) why = dummy, cap = sizeof dummy;
  for (int j = 0; j < m->nvars; j++) {
    double v = x[j];
    if (!isfinite(v)) {
      snprintf(why, cap, "variable '%s' = %g", ts__ilp_var_name(m, j, b, sizeof b), v);
      return false;
    }
    if (v < m->lo[j] - TS__ILP_TOL * (1 + fabs(m->lo[j])) || v > m->hi[j] + TS__ILP_TOL * (1 + fabs(m->hi[j]))) {
      snprintf(why, cap, "variable '%s' = %.9g outside its bounds [%g, %g]", ts__ilp_var_name(m, j, b, sizeof b), v,
               m->lo[j], m->hi[j]);
      return false;
    }
    if (ts__ilp_is_int(m, j) && fabs(v - nearbyint(v)) > TS__ILP_INT_TOL) {
      snprintf(why, cap, "integer variable '%s' = %.9g is fractional", ts__ilp_var_name(m, j, b, sizeof b), v);
      return false;
    }
  }
  for (int r = 0; r < m->nrows; r++) {
    double act = 0, mag = fabs(m->rhs[r]);
    for (int64_t k = m->row_start[r]; k < m->row_start[r + 1]; k++) {
      double t = m->val[k] * x[m->col[k]];
      act += t;
      mag += fabs(t);
    }
    double tol = TS__ILP_TOL * (1 + mag), b0 = m->rhs[r];
    bool ok = m->cmp[r] == TS_ILP_LE   ? act <= b0 + tol
              : m->cmp[r] == TS_ILP_GE ? act >= b0 - tol
                                       : fabs(act - b0) <= tol;
    if (!ok) {
      static const char *ops[] = {"<=", ">=", "=="};
      snprintf(why, cap, "row '%s': activity %.9g violates %s %.9g", ts__ilp_row_name(m, r, b, sizeof b), act,
               ops[m->cmp[r]], b0);
      return false;
    }
  }
  return true;
}

ts_status ts_ilp_check(const ts_ilp *m, const double *x, int n, bool *feasible, char *why, size_t why_cap) {
  if (!m || !x || !feasible) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_check: NULL argument");
  if (n != m->nvars)
    return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_check: %d values for a model with %d variables", n, m->nvars);
  if (why && why_cap) why[0] = 0;
  *feasible = ts__ilp_feasible(m, x, why, why_cap);
  return TS_OK;
}

double ts_ilp_eval(const ts_ilp *m, const double *x) {
  double s = 0;
  for (int j = 0; m && x && j < m->nvars; j++) s += m->obj[j] * x[j];
  return s;
}

void ts_ilp_options_default(ts_ilp_options *o) {
  memset(o, 0, sizeof *o);
  o->threads = 1;
}

void ts_ilp_result_free(ts_ilp_result *r) {
  if (!r) return;
  free(r->x);
  r->x = NULL;
}

const char *ts_ilp_status_name(ts_ilp_status s) {
  switch (s) {
    case TS_ILP_OPTIMAL: return "optimal";
    case TS_ILP_FEASIBLE: return "feasible";
    case TS_ILP_INFEASIBLE: return "infeasible";
    case TS_ILP_NO_SOLUTION: return "no solution (time limit)";
    case TS_ILP_UNBOUNDED: return "unbounded";
    case TS_ILP_ERROR: return "error";
  }
  return "unknown";
}
