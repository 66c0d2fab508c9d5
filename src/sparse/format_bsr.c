/* Block sparse rows: CSR -> BSR (per-block bitmaps, optional dense values), BSR -> CSR, and the
 * block counts of a tiling without building the BSR. */
#include <stdlib.h>
#include <string.h>

#include "format_internal.h"

void ts_bsr_free(ts_bsr *m) {
  if (!m) return;
  ts_free(m->rowptr);
  ts_free(m->col);
  ts_free(m->mask);
  ts_free(m->val);
  memset(m, 0, sizeof *m);
}

int64_t ts_bsr_block_nnz(const ts_bsr *m, int64_t k) {
  int64_t words = (int64_t)m->br * m->mask_stride;
  return ts_popcount_words(m->mask + k * words, words);
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Distinct block columns touched by rows [r0, r1) in increasing order, into list; returns the
 * count. mark[bcols] holds the stamp of the last block row that touched each block column. */
static int64_t block_row_cols(const ts_csr *in, int64_t r0, int64_t r1, int32_t bc, int64_t bcols, int64_t *mark,
                              int64_t stamp, int32_t *list) {
  int64_t m = 0;
  for (int64_t k = in->rowptr[r0]; k < in->rowptr[r1]; k++) {
    int64_t bj = in->col[k] / bc;
    if (mark[bj] != stamp) {
      mark[bj] = stamp;
      if (list) list[m] = (int32_t)bj;
      m++;
    }
  }
  if (list && m > 1) {
    /* A dense block row is cheaper to sort by scanning the marks than by comparisons. */
    if (m * 16 >= bcols) {
      int64_t t = 0;
      for (int64_t bj = 0; bj < bcols; bj++)
        if (mark[bj] == stamp) list[t++] = (int32_t)bj;
    } else {
      qsort(list, (size_t)m, sizeof *list, cmp_i32);
    }
  }
  return m;
}

ts_status ts_csr_to_bsr(const ts_csr *in, int32_t br, int32_t bc, ts_bsr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "csr to bsr: out is NULL");
  TS_TRY(ts_csr_validate(in));
  if (br < 1 || bc < 1) return ts_error(TS_ERR_INVALID_ARG, "csr to bsr: block shape %d x %d must be >= 1 x 1", br, bc);
  int64_t brows = (in->rows + br - 1) / br, bcols = (in->cols + bc - 1) / bc;
  int64_t ms = (bc + 63) / 64, bwords = (int64_t)br * ms, bcells = (int64_t)br * bc;
  int64_t *mark = ts__sp_alloc(bcols, sizeof(int64_t), "csr to bsr");
  int64_t *slot = mark ? ts__sp_alloc(bcols, sizeof(int64_t), "csr to bsr") : NULL;
  int32_t *list = slot ? ts__sp_alloc(bcols, sizeof(int32_t), "csr to bsr") : NULL;
  out->rowptr = list ? ts__sp_alloc(brows + 1, sizeof(int64_t), "bsr rowptr") : NULL;
  ts_status s = out->rowptr ? TS_OK : TS_ERR_OOM;
  if (s == TS_OK) {
    for (int64_t bj = 0; bj < bcols; bj++) mark[bj] = -1;
    out->rowptr[0] = 0;
    for (int64_t bi = 0; bi < brows; bi++) {
      int64_t r0 = bi * br, r1 = r0 + br < in->rows ? r0 + br : in->rows;
      out->rowptr[bi + 1] = out->rowptr[bi] + block_row_cols(in, r0, r1, bc, bcols, mark, bi, NULL);
    }
    int64_t nb = out->rowptr[brows];
    if (nb > 0 && (bwords > INT64_MAX / nb || bcells > INT64_MAX / nb)) {
      s = ts_error(TS_ERR_OVERFLOW, "csr to bsr: %lld blocks of %d x %d overflow", (long long)nb, br, bc);
    } else {
      out->col = ts__sp_alloc(nb, sizeof(int32_t), "bsr block columns");
      out->mask = out->col ? ts__sp_alloc(nb * bwords, sizeof(uint64_t), "bsr masks") : NULL;
      out->val = (out->mask && in->val) ? ts__sp_alloc(nb * bcells, sizeof(float), "bsr values") : NULL;
      if (!out->mask || (in->val && !out->val)) s = TS_ERR_OOM;
    }
    if (s == TS_OK) {
      memset(out->mask, 0, (size_t)(nb * bwords) * sizeof(uint64_t));
      if (out->val) memset(out->val, 0, (size_t)(nb * bcells) * sizeof(float));
      for (int64_t bj = 0; bj < bcols; bj++) mark[bj] = -1;
      for (int64_t bi = 0; bi < brows; bi++) {
        int64_t r0 = bi * br, r1 = r0 + br < in->rows ? r0 + br : in->rows, base = out->rowptr[bi];
        int64_t m = block_row_cols(in, r0, r1, bc, bcols, mark, bi, list);
        for (int64_t t = 0; t < m; t++) {
          out->col[base + t] = list[t];
          slot[list[t]] = base + t;
        }
        for (int64_t r = r0; r < r1; r++)
          for (int64_t k = in->rowptr[r]; k < in->rowptr[r + 1]; k++) {
            int64_t c = in->col[k], b = slot[c / bc], lc = c % bc;
            out->mask[b * bwords + (r - r0) * ms + lc / 64] |= (uint64_t)1 << (lc % 64);
            if (out->val) out->val[b * bcells + (r - r0) * bc + lc] = in->val[k];
          }
      }
      out->rows = in->rows;
      out->cols = in->cols;
      out->br = br;
      out->bc = bc;
      out->brows = brows;
      out->bcols = bcols;
      out->nblocks = nb;
      out->nnz = in->nnz;
      out->mask_stride = ms;
    }
  }
  ts_free(list);
  ts_free(slot);
  ts_free(mark);
  if (s != TS_OK) ts_bsr_free(out);
  return s;
}

static ts_status bsr_check(const ts_bsr *m) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "bsr: NULL");
  if (m->rows < 0 || m->cols < 0 || m->rows > INT32_MAX || m->cols > INT32_MAX || m->br < 1 || m->bc < 1 ||
      m->brows != (m->rows + m->br - 1) / m->br || m->bcols != (m->cols + m->bc - 1) / m->bc ||
      m->mask_stride != (m->bc + 63) / 64 || m->nblocks < 0 || !m->rowptr || (m->nblocks > 0 && (!m->col || !m->mask)))
    return ts_error(TS_ERR_FORMAT, "bsr: inconsistent header (%lld x %lld in %d x %d blocks)", (long long)m->rows,
                    (long long)m->cols, m->br, m->bc);
  if (m->rowptr[0] != 0 || m->rowptr[m->brows] != m->nblocks)
    return ts_error(TS_ERR_FORMAT, "bsr: rowptr does not span the %lld blocks", (long long)m->nblocks);
  for (int64_t bi = 0; bi < m->brows; bi++) {
    if (m->rowptr[bi + 1] < m->rowptr[bi] || m->rowptr[bi + 1] > m->nblocks)
      return ts_error(TS_ERR_FORMAT, "bsr: rowptr[%lld] = %lld is not monotone", (long long)(bi + 1),
                      (long long)m->rowptr[bi + 1]);
    for (int64_t k = m->rowptr[bi]; k < m->rowptr[bi + 1]; k++)
      if (m->col[k] < 0 || m->col[k] >= m->bcols || (k > m->rowptr[bi] && m->col[k] <= m->col[k - 1]))
        return ts_error(TS_ERR_FORMAT, "bsr: block row %lld: block column %d at %lld is out of range or unsorted",
                        (long long)bi, m->col[k], (long long)k);
  }
  return TS_OK;
}

ts_status ts_bsr_to_csr(const ts_bsr *in, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(bsr_check(in));
  int64_t ms = in->mask_stride, bwords = (int64_t)in->br * ms, bcells = (int64_t)in->br * in->bc;
  /* Bits past bc or past the matrix edge are ignored, so a stray bit cannot make a bad column. */
  for (int pass = 0; pass < 2; pass++) {
    int64_t p = 0;
    for (int64_t r = 0; r < in->rows; r++) {
      int64_t bi = r / in->br, lr = r % in->br;
      for (int64_t k = in->rowptr[bi]; k < in->rowptr[bi + 1]; k++) {
        const uint64_t *w = in->mask + k * bwords + lr * ms;
        int64_t c0 = (int64_t)in->col[k] * in->bc;
        for (int64_t q = 0; q < ms; q++)
          for (uint64_t x = w[q]; x; x &= x - 1) {
            int64_t lc = q * 64 + __builtin_ctzll(x);
            if (lc >= in->bc || c0 + lc >= in->cols) continue;
            if (pass == 1) {
              out->col[p] = (int32_t)(c0 + lc);
              if (out->val) out->val[p] = in->val[k * bcells + lr * in->bc + lc];
            }
            p++;
          }
      }
      if (pass == 1) out->rowptr[r + 1] = p;
    }
    if (pass == 0) TS_TRY(ts_csr_alloc(out, in->rows, in->cols, p, in->val != NULL));
  }
  return TS_OK;
}

ts_status ts_csr_block_stats(const ts_csr *m, int32_t br, int32_t bc, ts_block_stats *st) {
  if (st) memset(st, 0, sizeof *st);
  if (!st) return ts_error(TS_ERR_INVALID_ARG, "block stats: st is NULL");
  TS_TRY(ts_csr_validate(m));
  if (br < 1 || bc < 1) return ts_error(TS_ERR_INVALID_ARG, "block stats: block shape %d x %d must be >= 1 x 1", br, bc);
  int64_t brows = (m->rows + br - 1) / br, bcols = (m->cols + bc - 1) / bc;
  int64_t *cnt = ts__sp_alloc(bcols, sizeof(int64_t), "block stats");
  int32_t *touched = cnt ? ts__sp_alloc(bcols, sizeof(int32_t), "block stats") : NULL;
  if (!touched) {
    ts_free(cnt);
    return TS_ERR_OOM;
  }
  memset(cnt, 0, (size_t)bcols * sizeof(int64_t));
  for (int64_t bi = 0; bi < brows; bi++) {
    int64_t r0 = bi * br, r1 = r0 + br < m->rows ? r0 + br : m->rows, nt = 0;
    for (int64_t k = m->rowptr[r0]; k < m->rowptr[r1]; k++) {
      int64_t bj = m->col[k] / bc;
      if (cnt[bj]++ == 0) touched[nt++] = (int32_t)bj;
    }
    for (int64_t t = 0; t < nt; t++) {
      int64_t bj = touched[t], c0 = bj * bc, c1 = c0 + bc < m->cols ? c0 + bc : m->cols;
      int64_t cells = (r1 - r0) * (c1 - c0);
      st->nblocks++;
      st->cells += cells;
      if (cnt[bj] == cells) st->nfull++;
      cnt[bj] = 0;
    }
  }
  st->nnz = m->nnz;
  st->fill = st->cells ? (double)st->nnz / (double)st->cells : 1.0;
  ts_free(touched);
  ts_free(cnt);
  return TS_OK;
}
