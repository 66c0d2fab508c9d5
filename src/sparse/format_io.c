/* Patterns and permutations in files: .npy (dense 2-D, nonzero = 1; permutations 1-D int) and
 * Matrix Market coordinate files, on top of the io room's readers and writers. */
#include <string.h>
#include <strings.h>

#include "format_internal.h"
#include "tessera/io.h"

ts_status ts_pattern_read_npy(const char *path, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "pattern read: NULL argument");
  ts_tensor t;
  TS_TRY(ts_npy_read(path, &t));
  ts_status s = ts_csr_from_tensor(&t, out);
  ts_tensor_free(&t);
  if (s != TS_OK) ts_error_prefix("%s: ", path);
  return s;
}

ts_status ts_pattern_write_npy(const char *path, const ts_csr *m) {
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "pattern write: path is NULL");
  ts_tensor t;
  TS_TRY(ts_csr_to_tensor(m, TS_BOOL, &t));
  ts_status s = ts_npy_write(path, &t);
  ts_tensor_free(&t);
  return s;
}

ts_status ts_pattern_read_mtx(const char *path, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "pattern read: NULL argument");
  ts_mm_matrix mm;
  TS_TRY(ts_mm_read(path, true, &mm));
  ts_status s = TS_OK;
  if (mm.rows > INT32_MAX || mm.cols > INT32_MAX)
    s = ts_error(TS_ERR_SHAPE, "%s: %lld x %lld exceeds the int32 index limit", path, (long long)mm.rows,
                 (long long)mm.cols);
  ts_coo coo;
  memset(&coo, 0, sizeof coo);
  if (s == TS_OK) s = ts_coo_alloc(&coo, mm.rows, mm.cols, mm.nnz, false);
  if (s == TS_OK) {
    int64_t n = 0;
    for (int64_t k = 0; k < mm.nnz; k++) {
      if (mm.val && mm.val[k] == 0.0) continue; /* an explicit zero is not part of the pattern */
      coo.row[n] = (int32_t)mm.row[k];
      coo.col[n] = (int32_t)mm.col[k];
      n++;
    }
    coo.nnz = n;
    s = ts_coo_to_csr(&coo, out);
    if (s != TS_OK) ts_error_prefix("%s: ", path);
  }
  ts_coo_free(&coo);
  ts_mm_free(&mm);
  return s;
}

ts_status ts_pattern_write_mtx(const char *path, const ts_csr *m) {
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "pattern write: path is NULL");
  TS_TRY(ts_csr_validate(m));
  ts_mm_matrix mm;
  memset(&mm, 0, sizeof mm);
  mm.rows = m->rows;
  mm.cols = m->cols;
  mm.nnz = m->nnz;
  mm.field = TS_MM_PATTERN;
  mm.symmetry = TS_MM_GENERAL;
  mm.row = ts__sp_alloc(m->nnz, sizeof(int64_t), "mtx rows");
  mm.col = mm.row ? ts__sp_alloc(m->nnz, sizeof(int64_t), "mtx columns") : NULL;
  ts_status s = mm.col ? TS_OK : TS_ERR_OOM;
  if (s == TS_OK) {
    for (int64_t i = 0; i < m->rows; i++)
      for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
        mm.row[k] = i;
        mm.col[k] = m->col[k];
      }
    s = ts_mm_write(path, &mm);
  }
  ts_free(mm.row);
  ts_free(mm.col);
  return s;
}

/* 'n' for .npy, 'm' for .mtx, 0 otherwise. */
static char pattern_ext(const char *path) {
  const char *dot = path ? strrchr(path, '.') : NULL;
  if (!dot || strchr(dot, '/')) return 0;
  if (strcasecmp(dot, ".npy") == 0) return 'n';
  if (strcasecmp(dot, ".mtx") == 0) return 'm';
  return 0;
}

ts_status ts_pattern_load(const char *path, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  switch (pattern_ext(path)) {
    case 'n': return ts_pattern_read_npy(path, out);
    case 'm': return ts_pattern_read_mtx(path, out);
    default:
      return ts_error(TS_ERR_UNSUPPORTED, "%s: unknown pattern file type (expected a .npy or .mtx file)",
                      path ? path : "(null)");
  }
}

ts_status ts_pattern_save(const char *path, const ts_csr *m) {
  switch (pattern_ext(path)) {
    case 'n': return ts_pattern_write_npy(path, m);
    case 'm': return ts_pattern_write_mtx(path, m);
    default:
      return ts_error(TS_ERR_UNSUPPORTED, "%s: unknown pattern file type (expected a .npy or .mtx file)",
                      path ? path : "(null)");
  }
}

ts_status ts_perm_write_npy(const char *path, const int32_t *perm, int64_t n) {
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "perm write: path is NULL");
  TS_TRY(ts_perm_validate(perm, n));
  ts_tensor t;
  int32_t dummy = 0;
  TS_TRY(ts_tensor_wrap(&t, TS_I32, 1, &n, n ? (void *)perm : (void *)&dummy));
  return ts_npy_write(path, &t);
}

ts_status ts_perm_read_npy(const char *path, int32_t **perm, int64_t *n) {
  if (!path || !perm || !n) return ts_error(TS_ERR_INVALID_ARG, "perm read: NULL argument");
  *perm = NULL;
  *n = 0;
  ts_tensor t;
  TS_TRY(ts_npy_read(path, &t));
  ts_status s = TS_OK;
  if (t.ndim != 1)
    s = ts_error(TS_ERR_SHAPE, "%s: a permutation must be a 1-D array, got %d-D", path, t.ndim);
  else if (t.dtype != TS_I32 && t.dtype != TS_I64)
    s = ts_error(TS_ERR_DTYPE, "%s: a permutation must be int32 or int64, got %s", path, ts_dtype_name(t.dtype));
  else if (t.shape[0] > INT32_MAX)
    s = ts_error(TS_ERR_SHAPE, "%s: permutation length %lld exceeds %d", path, (long long)t.shape[0], INT32_MAX);
  int64_t len = s == TS_OK ? t.shape[0] : 0;
  int32_t *p = s == TS_OK ? ts__sp_alloc(len, sizeof(int32_t), "perm read") : NULL;
  if (s == TS_OK && !p) s = TS_ERR_OOM;
  for (int64_t i = 0; s == TS_OK && i < len; i++) {
    int64_t v = t.dtype == TS_I32 ? ((const int32_t *)t.data)[i] : ((const int64_t *)t.data)[i];
    if (v < 0 || v >= len)
      s = ts_error(TS_ERR_INVALID_ARG, "%s: perm[%lld] = %lld is out of range [0, %lld)", path, (long long)i,
                   (long long)v, (long long)len);
    else p[i] = (int32_t)v;
  }
  if (s == TS_OK && (s = ts_perm_validate(p, len)) != TS_OK) ts_error_prefix("%s: ", path);
  ts_tensor_free(&t);
  if (s != TS_OK) {
    ts_free(p);
    return s;
  }
  *perm = p;
  *n = len;
  return TS_OK;
}
