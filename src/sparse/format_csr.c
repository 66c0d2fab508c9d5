/* CSR patterns: allocation, validation, comparison, transpose, symmetrize, permutations.
 * Everything is O(nnz + rows + cols) with counting passes (no comparison sorts), which keeps a
 * 43M-nonzero attention mask within a fraction of a second per operation. */
#include <stdint.h>
#include <string.h>

#include "format_internal.h"

void *ts__sp_alloc(int64_t count, size_t elem, const char *what) {
  size_t bytes;
  if (count < 0 || !ts_mul_size((size_t)count, elem, &bytes)) {
    ts_error(TS_ERR_OVERFLOW, "%s: %lld elements of %zu bytes overflow", what, (long long)count, elem);
    return NULL;
  }
  void *p = ts_malloc(bytes);
  if (!p) ts_error(TS_ERR_OOM, "%s: cannot allocate %zu bytes", what, bytes);
  return p;
}

uint64_t ts__mix64(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void ts_csr_free(ts_csr *m) {
  if (!m) return;
  ts_free(m->rowptr);
  ts_free(m->col);
  ts_free(m->val);
  memset(m, 0, sizeof *m);
}

ts_status ts_csr_alloc(ts_csr *m, int64_t rows, int64_t cols, int64_t nnz, bool with_values) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_csr_alloc: m is NULL");
  memset(m, 0, sizeof *m);
  if (rows < 0 || cols < 0 || rows > INT32_MAX || cols > INT32_MAX)
    return ts_error(TS_ERR_SHAPE, "csr: shape %lld x %lld is outside [0, %d]", (long long)rows, (long long)cols,
                    INT32_MAX);
  if (nnz < 0) return ts_error(TS_ERR_SHAPE, "csr: negative nnz %lld", (long long)nnz);
  m->rowptr = ts__sp_alloc(rows + 1, sizeof(int64_t), "csr rowptr");
  m->col = m->rowptr ? ts__sp_alloc(nnz, sizeof(int32_t), "csr columns") : NULL;
  m->val = (m->col && with_values) ? ts__sp_alloc(nnz, sizeof(float), "csr values") : NULL;
  if (!m->rowptr || !m->col || (with_values && !m->val)) {
    ts_csr_free(m);
    return TS_ERR_OOM; /* the detail names the array and the size */
  }
  memset(m->rowptr, 0, (size_t)(rows + 1) * sizeof(int64_t));
  m->rows = rows;
  m->cols = cols;
  m->nnz = nnz;
  return TS_OK;
}

ts_status ts__csr_check_header(const ts_csr *m, const char *who) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "%s: pattern is NULL", who);
  if (m->rows < 0 || m->cols < 0 || m->rows > INT32_MAX || m->cols > INT32_MAX)
    return ts_error(TS_ERR_FORMAT, "%s: shape %lld x %lld is outside [0, %d]", who, (long long)m->rows,
                    (long long)m->cols, INT32_MAX);
  if (m->nnz < 0) return ts_error(TS_ERR_FORMAT, "%s: negative nnz %lld", who, (long long)m->nnz);
  if (!m->rowptr) return ts_error(TS_ERR_FORMAT, "%s: rowptr is NULL", who);
  if (m->nnz > 0 && !m->col) return ts_error(TS_ERR_FORMAT, "%s: col is NULL with nnz %lld", who, (long long)m->nnz);
  return TS_OK;
}

ts_status ts_csr_validate(const ts_csr *m) {
  TS_TRY(ts__csr_check_header(m, "csr"));
  if (m->rowptr[0] != 0) return ts_error(TS_ERR_FORMAT, "csr: rowptr[0] = %lld, expected 0", (long long)m->rowptr[0]);
  for (int64_t i = 0; i < m->rows; i++) {
    int64_t a = m->rowptr[i], b = m->rowptr[i + 1];
    if (b < a || b > m->nnz)
      return ts_error(TS_ERR_FORMAT, "csr: rowptr[%lld] = %lld after rowptr[%lld] = %lld (nnz %lld): must be non-decreasing and <= nnz",
                      (long long)(i + 1), (long long)b, (long long)i, (long long)a, (long long)m->nnz);
    int64_t prev = -1;
    for (int64_t k = a; k < b; k++) {
      int64_t c = m->col[k];
      if (c < 0 || c >= m->cols)
        return ts_error(TS_ERR_FORMAT, "csr: row %lld: column %lld at position %lld is out of range [0, %lld)",
                        (long long)i, (long long)c, (long long)k, (long long)m->cols);
      if (c <= prev)
        return ts_error(TS_ERR_FORMAT,
                        "csr: row %lld: column %lld at position %lld is not greater than the previous column %lld "
                        "(columns must be sorted and unique)",
                        (long long)i, (long long)c, (long long)k, (long long)prev);
      prev = c;
    }
  }
  if (m->rowptr[m->rows] != m->nnz)
    return ts_error(TS_ERR_FORMAT, "csr: rowptr[%lld] = %lld, expected nnz = %lld", (long long)m->rows,
                    (long long)m->rowptr[m->rows], (long long)m->nnz);
  return TS_OK;
}

ts_status ts_csr_copy(const ts_csr *in, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_csr_validate(in));
  TS_TRY(ts_csr_alloc(out, in->rows, in->cols, in->nnz, in->val != NULL));
  memcpy(out->rowptr, in->rowptr, (size_t)(in->rows + 1) * sizeof(int64_t));
  if (in->nnz) memcpy(out->col, in->col, (size_t)in->nnz * sizeof(int32_t));
  if (in->val && in->nnz) memcpy(out->val, in->val, (size_t)in->nnz * sizeof(float));
  return TS_OK;
}

bool ts_csr_equal(const ts_csr *a, const ts_csr *b) {
  if (!a || !b || a->rows != b->rows || a->cols != b->cols || a->nnz != b->nnz) return false;
  if (!a->rowptr || !b->rowptr || (a->nnz && (!a->col || !b->col))) return a->rowptr == b->rowptr && a->nnz == 0;
  if (memcmp(a->rowptr, b->rowptr, (size_t)(a->rows + 1) * sizeof(int64_t)) != 0) return false;
  if (a->nnz && memcmp(a->col, b->col, (size_t)a->nnz * sizeof(int32_t)) != 0) return false;
  if (a->val && b->val)
    for (int64_t k = 0; k < a->nnz; k++)
      if (a->val[k] != b->val[k]) return false;
  return true;
}

bool ts_csr_has(const ts_csr *m, int64_t i, int64_t j) {
  if (!m || i < 0 || i >= m->rows || j < 0 || j >= m->cols) return false;
  int64_t lo = m->rowptr[i], hi = m->rowptr[i + 1];
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (m->col[mid] < j) lo = mid + 1;
    else hi = mid;
  }
  return lo < m->rowptr[i + 1] && m->col[lo] == j;
}

ts_status ts_csr_transpose(const ts_csr *in, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_csr_validate(in));
  TS_TRY(ts_csr_alloc(out, in->cols, in->rows, in->nnz, in->val != NULL));
  int64_t *next = ts__sp_alloc(in->cols + 1, sizeof(int64_t), "transpose");
  if (!next) {
    ts_csr_free(out);
    return TS_ERR_OOM;
  }
  int64_t *rp = out->rowptr;
  for (int64_t k = 0; k < in->nnz; k++) rp[in->col[k] + 1]++;
  for (int64_t c = 0; c < in->cols; c++) rp[c + 1] += rp[c];
  memcpy(next, rp, (size_t)(in->cols + 1) * sizeof(int64_t));
  /* Rows are visited in order, so each transposed row receives its columns sorted. */
  for (int64_t i = 0; i < in->rows; i++)
    for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++) {
      int64_t p = next[in->col[k]]++;
      out->col[p] = (int32_t)i;
      if (in->val) out->val[p] = in->val[k];
    }
  ts_free(next);
  return TS_OK;
}

/* Two-pointer union of sorted rows a[0..na) and b[0..nb) into dst (NULL = count only). */
static int64_t merge_union(const int32_t *a, int64_t na, const int32_t *b, int64_t nb, int32_t *dst) {
  int64_t i = 0, j = 0, n = 0;
  while (i < na || j < nb) {
    int32_t v;
    if (j >= nb || (i < na && a[i] < b[j])) v = a[i++];
    else if (i >= na || b[j] < a[i]) v = b[j++];
    else {
      v = a[i++];
      j++;
    }
    if (dst) dst[n] = v;
    n++;
  }
  return n;
}

ts_status ts_csr_symmetrize(const ts_csr *in, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_csr_validate(in));
  if (in->rows != in->cols)
    return ts_error(TS_ERR_SHAPE, "symmetrize: pattern is %lld x %lld, not square", (long long)in->rows,
                    (long long)in->cols);
  ts_csr t;
  TS_TRY(ts_csr_transpose(in, &t));
  int64_t n = in->rows, total = 0;
  int64_t *cnt = ts__sp_alloc(n + 1, sizeof(int64_t), "symmetrize");
  if (!cnt) {
    ts_csr_free(&t);
    return TS_ERR_OOM;
  }
  cnt[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = in->rowptr[i], b = t.rowptr[i];
    total += merge_union(in->col + a, in->rowptr[i + 1] - a, t.col + b, t.rowptr[i + 1] - b, NULL);
    cnt[i + 1] = total;
  }
  ts_status s = ts_csr_alloc(out, n, n, total, false);
  if (s == TS_OK) {
    memcpy(out->rowptr, cnt, (size_t)(n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
      int64_t a = in->rowptr[i], b = t.rowptr[i];
      merge_union(in->col + a, in->rowptr[i + 1] - a, t.col + b, t.rowptr[i + 1] - b, out->col + cnt[i]);
    }
  }
  ts_free(cnt);
  ts_csr_free(&t);
  return s;
}

bool ts_csr_is_symmetric(const ts_csr *m) {
  if (!m || m->rows != m->cols || ts_csr_validate(m) != TS_OK) return false;
  ts_csr t;
  if (ts_csr_transpose(m, &t) != TS_OK) return false;
  bool eq = m->nnz == t.nnz && memcmp(m->rowptr, t.rowptr, (size_t)(m->rows + 1) * sizeof(int64_t)) == 0 &&
            (m->nnz == 0 || memcmp(m->col, t.col, (size_t)m->nnz * sizeof(int32_t)) == 0);
  ts_csr_free(&t);
  return eq;
}

/* Row permutation only: row i of out is row row_perm[i] of in (columns stay sorted). */
static ts_status permute_rows(const ts_csr *in, const int32_t *rp, ts_csr *out) {
  TS_TRY(ts_csr_alloc(out, in->rows, in->cols, in->nnz, in->val != NULL));
  for (int64_t i = 0; i < in->rows; i++) {
    int64_t r = rp[i];
    out->rowptr[i + 1] = out->rowptr[i] + (in->rowptr[r + 1] - in->rowptr[r]);
  }
  for (int64_t i = 0; i < in->rows; i++) {
    int64_t r = rp[i], len = in->rowptr[r + 1] - in->rowptr[r];
    memcpy(out->col + out->rowptr[i], in->col + in->rowptr[r], (size_t)len * sizeof(int32_t));
    if (in->val) memcpy(out->val + out->rowptr[i], in->val + in->rowptr[r], (size_t)len * sizeof(float));
  }
  return TS_OK;
}

ts_status ts_csr_permute(const ts_csr *in, const int32_t *row_perm, const int32_t *col_perm, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_csr_validate(in));
  if (row_perm) {
    ts_status s = ts_perm_validate(row_perm, in->rows);
    if (s != TS_OK) {
      ts_error_prefix("permute: row permutation: ");
      return s;
    }
  }
  if (col_perm) {
    ts_status s = ts_perm_validate(col_perm, in->cols);
    if (s != TS_OK) {
      ts_error_prefix("permute: column permutation: ");
      return s;
    }
  }
  if (!col_perm) {
    if (row_perm) return permute_rows(in, row_perm, out);
    return ts_csr_copy(in, out);
  }
  /* Columns: walk the new columns j in increasing order, and for each append j to every row that
   * holds the old column col_perm[j] (found through the transpose), so rows come out sorted. */
  ts_csr t;
  TS_TRY(ts_csr_transpose(in, &t));
  int32_t *inv_row = NULL;
  int64_t *next = NULL;
  ts_status s = TS_OK;
  if (row_perm) {
    inv_row = ts__sp_alloc(in->rows, sizeof(int32_t), "permute");
    if (!inv_row) s = TS_ERR_OOM;
    else s = ts_perm_inverse(row_perm, in->rows, inv_row);
  }
  if (s == TS_OK) s = ts_csr_alloc(out, in->rows, in->cols, in->nnz, in->val != NULL);
  if (s == TS_OK && !(next = ts__sp_alloc(in->rows + 1, sizeof(int64_t), "permute"))) s = TS_ERR_OOM;
  if (s == TS_OK) {
    for (int64_t i = 0; i < in->rows; i++) {
      int64_t r = row_perm ? row_perm[i] : i;
      out->rowptr[i + 1] = out->rowptr[i] + (in->rowptr[r + 1] - in->rowptr[r]);
    }
    memcpy(next, out->rowptr, (size_t)(in->rows + 1) * sizeof(int64_t));
    for (int64_t j = 0; j < in->cols; j++) {
      int64_t c = col_perm[j];
      for (int64_t k = t.rowptr[c]; k < t.rowptr[c + 1]; k++) {
        int64_t i = inv_row ? inv_row[t.col[k]] : t.col[k];
        int64_t p = next[i]++;
        out->col[p] = (int32_t)j;
        if (t.val) out->val[p] = t.val[k];
      }
    }
  } else {
    ts_csr_free(out);
  }
  ts_free(next);
  ts_free(inv_row);
  ts_csr_free(&t);
  return s;
}
