/* COO storage and the CSR <-> COO / dense bytes / tensor conversions. */
#include <stdio.h>
#include <string.h>

#include "format_internal.h"

ts_status ts_coo_alloc(ts_coo *m, int64_t rows, int64_t cols, int64_t nnz, bool with_values) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_coo_alloc: m is NULL");
  memset(m, 0, sizeof *m);
  if (rows < 0 || cols < 0 || rows > INT32_MAX || cols > INT32_MAX || nnz < 0)
    return ts_error(TS_ERR_SHAPE, "coo: shape %lld x %lld with %lld entries is invalid", (long long)rows,
                    (long long)cols, (long long)nnz);
  m->row = ts__sp_alloc(nnz, sizeof(int32_t), "coo rows");
  m->col = m->row ? ts__sp_alloc(nnz, sizeof(int32_t), "coo columns") : NULL;
  m->val = (m->col && with_values) ? ts__sp_alloc(nnz, sizeof(float), "coo values") : NULL;
  if (!m->row || !m->col || (with_values && !m->val)) {
    ts_coo_free(m);
    return TS_ERR_OOM;
  }
  m->rows = rows;
  m->cols = cols;
  m->nnz = nnz;
  return TS_OK;
}

void ts_coo_free(ts_coo *m) {
  if (!m) return;
  ts_free(m->row);
  ts_free(m->col);
  ts_free(m->val);
  memset(m, 0, sizeof *m);
}

ts_status ts_csr_to_coo(const ts_csr *in, ts_coo *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_csr_validate(in));
  TS_TRY(ts_coo_alloc(out, in->rows, in->cols, in->nnz, in->val != NULL));
  for (int64_t i = 0; i < in->rows; i++)
    for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++) out->row[k] = (int32_t)i;
  if (in->nnz) memcpy(out->col, in->col, (size_t)in->nnz * sizeof(int32_t));
  if (in->val && in->nnz) memcpy(out->val, in->val, (size_t)in->nnz * sizeof(float));
  return TS_OK;
}

/* Two stable counting passes (by column, then by row) give row-major order with sorted columns;
 * duplicates are then adjacent and merged. */
ts_status ts_coo_to_csr(const ts_coo *in, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!in) return ts_error(TS_ERR_INVALID_ARG, "coo to csr: coo is NULL");
  if (in->rows < 0 || in->cols < 0 || in->rows > INT32_MAX || in->cols > INT32_MAX || in->nnz < 0 ||
      (in->nnz > 0 && (!in->row || !in->col)))
    return ts_error(TS_ERR_FORMAT, "coo to csr: bad header (%lld x %lld, %lld entries)", (long long)in->rows,
                    (long long)in->cols, (long long)in->nnz);
  for (int64_t k = 0; k < in->nnz; k++)
    if (in->row[k] < 0 || in->row[k] >= in->rows || in->col[k] < 0 || in->col[k] >= in->cols)
      return ts_error(TS_ERR_FORMAT, "coo to csr: entry %lld = (%d, %d) is outside %lld x %lld", (long long)k,
                      in->row[k], in->col[k], (long long)in->rows, (long long)in->cols);
  int64_t n = in->nnz;
  int64_t *cptr = ts__sp_alloc(in->cols + 1, sizeof(int64_t), "coo to csr");
  int64_t *rptr = cptr ? ts__sp_alloc(in->rows + 1, sizeof(int64_t), "coo to csr") : NULL;
  int64_t *by_col = rptr ? ts__sp_alloc(n, sizeof(int64_t), "coo to csr") : NULL;
  int64_t *by_row = by_col ? ts__sp_alloc(n, sizeof(int64_t), "coo to csr") : NULL;
  ts_status s = by_row ? TS_OK : TS_ERR_OOM;
  if (s == TS_OK) {
    memset(cptr, 0, (size_t)(in->cols + 1) * sizeof(int64_t));
    memset(rptr, 0, (size_t)(in->rows + 1) * sizeof(int64_t));
    for (int64_t k = 0; k < n; k++) cptr[in->col[k] + 1]++, rptr[in->row[k] + 1]++;
    for (int64_t c = 0; c < in->cols; c++) cptr[c + 1] += cptr[c];
    for (int64_t r = 0; r < in->rows; r++) rptr[r + 1] += rptr[r];
    for (int64_t k = 0; k < n; k++) by_col[cptr[in->col[k]]++] = k;
    for (int64_t t = 0; t < n; t++) by_row[rptr[in->row[by_col[t]]]++] = by_col[t];
    /* rptr[r] now holds the end of row r; count the distinct columns. */
    int64_t uniq = 0;
    for (int64_t t = 0; t < n; t++)
      if (t == 0 || in->row[by_row[t]] != in->row[by_row[t - 1]] || in->col[by_row[t]] != in->col[by_row[t - 1]]) uniq++;
    s = ts_csr_alloc(out, in->rows, in->cols, uniq, in->val != NULL);
    if (s == TS_OK) {
      int64_t p = -1;
      for (int64_t t = 0; t < n; t++) {
        int64_t k = by_row[t];
        bool dup = t > 0 && in->row[k] == in->row[by_row[t - 1]] && in->col[k] == in->col[by_row[t - 1]];
        if (!dup) {
          p++;
          out->col[p] = in->col[k];
          out->rowptr[in->row[k] + 1]++;
          if (in->val) out->val[p] = 0;
        }
        if (in->val) out->val[p] += in->val[k];
      }
      for (int64_t r = 0; r < in->rows; r++) out->rowptr[r + 1] += out->rowptr[r];
    }
  }
  ts_free(by_row);
  ts_free(by_col);
  ts_free(rptr);
  ts_free(cptr);
  return s;
}

ts_status ts_csr_to_dense_u8(const ts_csr *in, uint8_t *dense) {
  TS_TRY(ts_csr_validate(in));
  if (in->rows * in->cols > 0 && !dense) return ts_error(TS_ERR_INVALID_ARG, "csr to dense: output is NULL");
  memset(dense, 0, (size_t)(in->rows * in->cols));
  for (int64_t i = 0; i < in->rows; i++)
    for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++) dense[i * in->cols + in->col[k]] = 1;
  return TS_OK;
}

/* Generic dense source: cell (i, j) of a rows x cols array read through is_nz. */
typedef bool (*nz_fn)(const void *base, int64_t offset);

static bool nz_u8(const void *b, int64_t o) { return ((const uint8_t *)b)[o] != 0; }
static bool nz_i32(const void *b, int64_t o) { return ((const int32_t *)b)[o] != 0; }
static bool nz_i64(const void *b, int64_t o) { return ((const int64_t *)b)[o] != 0; }
static bool nz_f32(const void *b, int64_t o) { return ((const float *)b)[o] != 0.0f || ((const float *)b)[o] != ((const float *)b)[o]; }
static bool nz_f64(const void *b, int64_t o) { return ((const double *)b)[o] != 0.0 || ((const double *)b)[o] != ((const double *)b)[o]; }
/* f16 / bf16: any bit other than the sign means nonzero (NaN and inf included). */
static bool nz_h16(const void *b, int64_t o) { return (((const uint16_t *)b)[o] & 0x7fffu) != 0; }

static ts_status csr_from_strided(const void *base, nz_fn nz, int64_t rows, int64_t cols, int64_t s0, int64_t s1,
                                  ts_csr *out) {
  int64_t nnz = 0;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) nnz += nz(base, i * s0 + j * s1);
  TS_TRY(ts_csr_alloc(out, rows, cols, nnz, false));
  int64_t p = 0;
  for (int64_t i = 0; i < rows; i++) {
    for (int64_t j = 0; j < cols; j++)
      if (nz(base, i * s0 + j * s1)) out->col[p++] = (int32_t)j;
    out->rowptr[i + 1] = p;
  }
  return TS_OK;
}

ts_status ts_csr_from_dense_u8(const uint8_t *dense, int64_t rows, int64_t cols, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (rows < 0 || cols < 0 || rows > INT32_MAX || cols > INT32_MAX)
    return ts_error(TS_ERR_SHAPE, "dense to csr: shape %lld x %lld is outside [0, %d]", (long long)rows,
                    (long long)cols, INT32_MAX);
  if (rows * cols > 0 && !dense) return ts_error(TS_ERR_INVALID_ARG, "dense to csr: input is NULL");
  return csr_from_strided(dense, nz_u8, rows, cols, cols, 1, out);
}

ts_status ts_csr_from_tensor(const ts_tensor *t, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!t) return ts_error(TS_ERR_INVALID_ARG, "pattern tensor is NULL");
  if (t->ndim != 2) {
    char shape[160];
    int n = 0;
    shape[0] = 0;
    for (int d = 0; d < t->ndim && d < TS_MAX_DIMS && n < 120; d++)
      n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    return ts_error(TS_ERR_SHAPE, "a pattern must be a 2-D array, got %d-D shape (%s)", t->ndim, shape);
  }
  int64_t rows = t->shape[0], cols = t->shape[1];
  if (rows < 0 || cols < 0 || rows > INT32_MAX || cols > INT32_MAX)
    return ts_error(TS_ERR_SHAPE, "pattern shape %lld x %lld is outside [0, %d]", (long long)rows, (long long)cols,
                    INT32_MAX);
  if (rows * cols > 0 && !t->data) return ts_error(TS_ERR_INVALID_ARG, "pattern tensor has no data");
  nz_fn nz;
  switch (t->dtype) {
    case TS_BOOL:
    case TS_U8:
    case TS_I8: nz = nz_u8; break;
    case TS_I32: nz = nz_i32; break;
    case TS_I64: nz = nz_i64; break;
    case TS_F32: nz = nz_f32; break;
    case TS_F64: nz = nz_f64; break;
    case TS_F16:
    case TS_BF16: nz = nz_h16; break;
    default: return ts_error(TS_ERR_DTYPE, "pattern tensor has unsupported dtype %d", (int)t->dtype);
  }
  return csr_from_strided(t->data, nz, rows, cols, t->strides[0], t->strides[1], out);
}

ts_status ts_csr_to_tensor(const ts_csr *in, ts_dtype dtype, ts_tensor *out) {
  if (out) memset(out, 0, sizeof *out);
  if (dtype != TS_BOOL && dtype != TS_U8)
    return ts_error(TS_ERR_DTYPE, "csr to tensor: dtype must be bool or u8, got %s", ts_dtype_name(dtype));
  TS_TRY(ts_csr_validate(in));
  int64_t shape[2] = {in->rows, in->cols};
  TS_TRY(ts_tensor_alloc(out, dtype, 2, shape));
  ts_status s = ts_csr_to_dense_u8(in, out->data);
  if (s != TS_OK) ts_tensor_free(out);
  return s;
}
