/* Bitmap masks: [rows][stride] 64-bit words, padding bits zero. Popcounts dispatch to
 * AVX-512 VPOPCNTDQ; conversions to and from CSR, COO and dense bytes. */
#include <string.h>

#include "format_internal.h"

ts_status ts_bitmap_alloc(ts_bitmap *b, int64_t rows, int64_t cols) {
  if (!b) return ts_error(TS_ERR_INVALID_ARG, "ts_bitmap_alloc: b is NULL");
  memset(b, 0, sizeof *b);
  if (rows < 0 || cols < 0 || rows > INT32_MAX || cols > INT32_MAX)
    return ts_error(TS_ERR_SHAPE, "bitmap: shape %lld x %lld is outside [0, %d]", (long long)rows, (long long)cols,
                    INT32_MAX);
  int64_t stride = (cols + 63) / 64;
  if (stride > 0 && rows > INT64_MAX / stride)
    return ts_error(TS_ERR_OVERFLOW, "bitmap: %lld x %lld words overflow", (long long)rows, (long long)stride);
  uint64_t *bits = ts__sp_alloc(rows * stride, sizeof(uint64_t), "bitmap");
  if (!bits) return TS_ERR_OOM;
  memset(bits, 0, (size_t)(rows * stride) * sizeof(uint64_t));
  b->rows = rows;
  b->cols = cols;
  b->stride = stride;
  b->bits = bits;
  return TS_OK;
}

void ts_bitmap_free(ts_bitmap *b) {
  if (!b) return;
  ts_free(b->bits);
  memset(b, 0, sizeof *b);
}

/* SWAR popcount: the portable reference (this file gets no ISA flags). */
int64_t ts_popcount_words_ref(const uint64_t *w, int64_t n) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = w[i];
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    total += (int64_t)((x * 0x0101010101010101ull) >> 56);
  }
  return total;
}

static const ts__popcount_variant g_ref = {ts_popcount_words_ref}, g_avx512 = {ts__popcount_words_avx512};
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX512_VPOPCNTDQ, &g_avx512}};
ts__dispatch ts__popcount_dispatch = TS__DISPATCH("popcount", g_variants);

int64_t ts_popcount_words(const uint64_t *w, int64_t n) {
  return ((const ts__popcount_variant *)ts__dispatch_table(&ts__popcount_dispatch))->fn(w, n);
}

int64_t ts_bitmap_row_count(const ts_bitmap *b, int64_t i) { return ts_popcount_words(ts_bitmap_row(b, i), b->stride); }

void ts_bitmap_row_counts(const ts_bitmap *b, int64_t *counts) {
  for (int64_t i = 0; i < b->rows; i++) counts[i] = ts_bitmap_row_count(b, i);
}

int64_t ts_bitmap_count(const ts_bitmap *b) { return ts_popcount_words(b->bits, b->rows * b->stride); }

static ts_status check_bitmap(const ts_bitmap *b, const char *who) {
  if (!b) return ts_error(TS_ERR_INVALID_ARG, "%s: bitmap is NULL", who);
  if (b->rows < 0 || b->cols < 0 || b->rows > INT32_MAX || b->cols > INT32_MAX || b->stride != (b->cols + 63) / 64 ||
      (b->rows * b->stride > 0 && !b->bits))
    return ts_error(TS_ERR_FORMAT, "%s: bitmap header is inconsistent (%lld x %lld, stride %lld)", who,
                    (long long)b->rows, (long long)b->cols, (long long)b->stride);
  return TS_OK;
}

ts_status ts_csr_to_bitmap(const ts_csr *in, ts_bitmap *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_csr_validate(in));
  TS_TRY(ts_bitmap_alloc(out, in->rows, in->cols));
  for (int64_t i = 0; i < in->rows; i++) {
    uint64_t *w = ts_bitmap_row(out, i);
    for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++) w[in->col[k] >> 6] |= (uint64_t)1 << (in->col[k] & 63);
  }
  return TS_OK;
}

/* Padding bits past cols would become out-of-range columns: mask them off when reading. */
static inline uint64_t row_word(const ts_bitmap *b, const uint64_t *w, int64_t k) {
  uint64_t x = w[k];
  if (k == b->stride - 1 && (b->cols & 63)) x &= ((uint64_t)1 << (b->cols & 63)) - 1;
  return x;
}

ts_status ts_bitmap_to_csr(const ts_bitmap *in, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(check_bitmap(in, "bitmap to csr"));
  int64_t nnz = 0;
  for (int64_t i = 0; i < in->rows; i++) {
    const uint64_t *w = ts_bitmap_row(in, i);
    for (int64_t k = 0; k < in->stride; k++) nnz += __builtin_popcountll(row_word(in, w, k));
  }
  TS_TRY(ts_csr_alloc(out, in->rows, in->cols, nnz, false));
  int64_t p = 0;
  for (int64_t i = 0; i < in->rows; i++) {
    const uint64_t *w = ts_bitmap_row(in, i);
    for (int64_t k = 0; k < in->stride; k++)
      for (uint64_t x = row_word(in, w, k); x; x &= x - 1) out->col[p++] = (int32_t)(k * 64 + __builtin_ctzll(x));
    out->rowptr[i + 1] = p;
  }
  return TS_OK;
}

ts_status ts_coo_to_bitmap(const ts_coo *in, ts_bitmap *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!in) return ts_error(TS_ERR_INVALID_ARG, "coo to bitmap: coo is NULL");
  if (in->nnz < 0 || (in->nnz > 0 && (!in->row || !in->col)))
    return ts_error(TS_ERR_FORMAT, "coo to bitmap: nnz %lld with missing arrays", (long long)in->nnz);
  TS_TRY(ts_bitmap_alloc(out, in->rows, in->cols));
  for (int64_t k = 0; k < in->nnz; k++) {
    int64_t i = in->row[k], j = in->col[k];
    if (i < 0 || i >= in->rows || j < 0 || j >= in->cols) {
      ts_bitmap_free(out);
      return ts_error(TS_ERR_FORMAT, "coo to bitmap: entry %lld = (%lld, %lld) is outside %lld x %lld", (long long)k,
                      (long long)i, (long long)j, (long long)in->rows, (long long)in->cols);
    }
    ts_bitmap_set(out, i, j, true);
  }
  return TS_OK;
}

ts_status ts_bitmap_to_coo(const ts_bitmap *in, ts_coo *out) {
  if (out) memset(out, 0, sizeof *out);
  ts_csr c;
  TS_TRY(ts_bitmap_to_csr(in, &c));
  ts_status s = ts_csr_to_coo(&c, out);
  ts_csr_free(&c);
  return s;
}

ts_status ts_bitmap_to_dense_u8(const ts_bitmap *in, uint8_t *dense) {
  TS_TRY(check_bitmap(in, "bitmap to dense"));
  if (in->rows * in->cols > 0 && !dense) return ts_error(TS_ERR_INVALID_ARG, "bitmap to dense: output is NULL");
  for (int64_t i = 0; i < in->rows; i++) {
    const uint64_t *w = ts_bitmap_row(in, i);
    uint8_t *d = dense + i * in->cols;
    for (int64_t j = 0; j < in->cols; j++) d[j] = (uint8_t)((w[j >> 6] >> (j & 63)) & 1u);
  }
  return TS_OK;
}

ts_status ts_bitmap_from_dense_u8(const uint8_t *dense, int64_t rows, int64_t cols, ts_bitmap *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(ts_bitmap_alloc(out, rows, cols));
  if (rows * cols > 0 && !dense) {
    ts_bitmap_free(out);
    return ts_error(TS_ERR_INVALID_ARG, "dense to bitmap: input is NULL");
  }
  for (int64_t i = 0; i < rows; i++) {
    uint64_t *w = ts_bitmap_row(out, i);
    const uint8_t *d = dense + i * cols;
    for (int64_t j = 0; j < cols; j++)
      if (d[j]) w[j >> 6] |= (uint64_t)1 << (j & 63);
  }
  return TS_OK;
}
