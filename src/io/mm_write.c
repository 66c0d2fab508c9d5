/* Matrix Market coordinate writer: validates the whole matrix first (so a bad matrix writes
 * nothing), then streams banner, size line and 1-based entries. Reals use %.17g, which reads
 * back to the same double; integers are written without a fraction. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "io/io_internal.h"

static ts_status validate(const ts_mm_matrix *m, const char *name) {
  if ((unsigned)m->field > TS_MM_INTEGER || (unsigned)m->symmetry > TS_MM_SYMMETRIC)
    return ts_error(TS_ERR_INVALID_ARG, "%s: bad field (%d) or symmetry (%d)", name, (int)m->field, (int)m->symmetry);
  if (m->rows < 0 || m->cols < 0 || m->nnz < 0)
    return ts_error(TS_ERR_INVALID_ARG, "%s: negative size %lld x %lld, nnz %lld", name, (long long)m->rows,
                    (long long)m->cols, (long long)m->nnz);
  if (m->symmetry == TS_MM_SYMMETRIC && m->rows != m->cols)
    return ts_error(TS_ERR_SHAPE, "%s: symmetric matrix must be square, is %lld x %lld", name, (long long)m->rows,
                    (long long)m->cols);
  if (m->nnz && (!m->row || !m->col || (m->field != TS_MM_PATTERN && !m->val)))
    return ts_error(TS_ERR_INVALID_ARG, "%s: %lld entries but the %s array is NULL", name, (long long)m->nnz,
                    !m->row ? "row" : !m->col ? "col" : "val");
  for (int64_t k = 0; k < m->nnz; k++) {
    int64_t r = m->row[k], c = m->col[k];
    if (r < 0 || r >= m->rows || c < 0 || c >= m->cols)
      return ts_error(TS_ERR_INVALID_ARG, "%s: entry %lld at (%lld, %lld) is outside the %lld x %lld matrix", name,
                      (long long)k, (long long)r, (long long)c, (long long)m->rows, (long long)m->cols);
    if (m->symmetry == TS_MM_SYMMETRIC && r < c)
      return ts_error(TS_ERR_INVALID_ARG,
                      "%s: entry %lld at (%lld, %lld) is above the diagonal; symmetric matrices store the lower triangle",
                      name, (long long)k, (long long)r, (long long)c);
    if (m->field == TS_MM_INTEGER) {
      double v = m->val[k];
      if (!(v == floor(v) && fabs(v) <= (double)TS_MM_INT_MAX))
        return ts_error(TS_ERR_INVALID_ARG, "%s: entry %lld value %.17g is not an integer within +-2^53 (field is integer)",
                        name, (long long)k, v);
    }
  }
  return TS_OK;
}

ts_status ts__mm_write_stream(FILE *f, const ts_mm_matrix *m, const char *name) {
  TS_TRY(validate(m, name));
  static const char *fields[] = {"pattern", "real", "integer"};
  static const char *syms[] = {"general", "symmetric"};
  fprintf(f, "%%%%MatrixMarket matrix coordinate %s %s\n", fields[m->field], syms[m->symmetry]);
  fprintf(f, "%lld %lld %lld\n", (long long)m->rows, (long long)m->cols, (long long)m->nnz);
  for (int64_t k = 0; k < m->nnz; k++) {
    long long r = (long long)m->row[k] + 1, c = (long long)m->col[k] + 1;
    if (m->field == TS_MM_PATTERN) fprintf(f, "%lld %lld\n", r, c);
    else if (m->field == TS_MM_REAL) fprintf(f, "%lld %lld %.17g\n", r, c, m->val[k]);
    else fprintf(f, "%lld %lld %lld\n", r, c, (long long)m->val[k]);
  }
  if (ferror(f)) return ts_error(TS_ERR_IO, "%s: write failed: %s", name, strerror(errno));
  return TS_OK;
}

ts_status ts_mm_write(const char *path, const ts_mm_matrix *m) {
  if (!path || !m) return ts_error(TS_ERR_INVALID_ARG, "ts_mm_write: %s is NULL", path ? "matrix" : "path");
  TS_TRY(validate(m, path)); /* before creating the temporary file */
  ts__atomic_file af;
  TS_TRY(ts__atomic_open(&af, path));
  ts_status s = ts__mm_write_stream(af.f, m, path);
  if (s != TS_OK) {
    ts__atomic_abort(&af);
    return s;
  }
  return ts__atomic_commit(&af);
}
