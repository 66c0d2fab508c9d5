/* Pattern metrics under row/column permutations, without materializing the permuted pattern:
 * bandwidth, profile and the empty / mixed / full counts of a T x T tile grid, in one pass over
 * the CSR (rows visited in their new order, columns mapped through the inverse permutation).
 * Tile counting: for each band of T new rows, count nonzeros per tile column in a scratch array
 * and remember which tiles were touched; O(nnz + rows + cols) time, O(cols / T) scratch. */
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

typedef struct view {
  const int32_t *rp;   /* new row -> old row, NULL = identity */
  int32_t *cinv;       /* old col -> new col, NULL = identity */
} view;

static ts_status view_open(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, view *v) {
  v->rp = row_perm;
  v->cinv = NULL;
  if (row_perm) TS_TRY(ts_perm_validate(row_perm, m->rows));
  if (col_perm) {
    TS_TRY(ts_perm_validate(col_perm, m->cols));
    v->cinv = malloc(((size_t)m->cols + 1) * sizeof *v->cinv);
    if (!v->cinv) return ts_error(TS_ERR_OOM, "metrics: inverse permutation of %lld", (long long)m->cols);
    TS_TRY(ts_perm_inverse(col_perm, m->cols, v->cinv));
  }
  return TS_OK;
}

/* Tile counts; nonempty only when full == NULL. */
static ts_status count_tiles(const ts_csr *m, const view *v, int32_t T, int64_t *nonempty, int64_t *full) {
  int64_t R = m->rows, C = m->cols, tc = (C + T - 1) / T;
  int64_t *cnt = calloc((size_t)tc + 1, sizeof *cnt);
  int32_t *touched = malloc(((size_t)tc + 1) * sizeof *touched);
  if (!cnt || !touched) {
    free(cnt), free(touched);
    return ts_error(TS_ERR_OOM, "metrics: tile counters for %lld tile columns", (long long)tc);
  }
  int64_t ne = 0, nf = 0;
  for (int64_t r0 = 0; r0 < R; r0 += T) {
    int64_t r1 = r0 + T < R ? r0 + T : R, nt = 0;
    for (int64_t r = r0; r < r1; r++) {
      int64_t i = v->rp ? v->rp[r] : r;
      for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
        int64_t c = v->cinv ? v->cinv[m->col[k]] : m->col[k];
        int64_t t = c / T;
        if (cnt[t]++ == 0) touched[nt++] = (int32_t)t;
      }
    }
    ne += nt;
    for (int64_t a = 0; a < nt; a++) {
      int64_t t = touched[a], c0 = t * T, c1 = c0 + T < C ? c0 + T : C;
      if (full && cnt[t] == (r1 - r0) * (c1 - c0)) nf++;
      cnt[t] = 0;
    }
  }
  free(cnt), free(touched);
  *nonempty = ne;
  if (full) *full = nf;
  return TS_OK;
}

static ts_status check(const ts_csr *m, int32_t tile) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "metrics: pattern is NULL");
  if (tile < 1) return ts_error(TS_ERR_INVALID_ARG, "metrics: tile must be >= 1, got %d", tile);
  return ts_csr_validate(m);
}

ts_status ts_pattern_tiles_nonempty(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, int32_t tile,
                                    int64_t *nonempty) {
  *nonempty = 0;
  TS_TRY(check(m, tile));
  return ts__tiles_nonempty(m, row_perm, col_perm, tile, nonempty);
}

ts_status ts__tiles_nonempty(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, int32_t tile,
                             int64_t *nonempty) {
  *nonempty = 0;
  view v;
  ts_status s = view_open(m, row_perm, col_perm, &v);
  if (s == TS_OK) s = count_tiles(m, &v, tile, nonempty, NULL);
  free(v.cinv);
  return s;
}

ts_status ts_pattern_metrics_compute(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, int32_t tile,
                                     ts_pattern_metrics *out) {
  memset(out, 0, sizeof *out);
  TS_TRY(check(m, tile));
  view v;
  ts_status s = view_open(m, row_perm, col_perm, &v);
  if (s != TS_OK) {
    free(v.cinv);
    return s;
  }
  int64_t R = m->rows, C = m->cols, bw = 0, prof = 0;
  for (int64_t r = 0; r < R; r++) {
    int64_t i = v.rp ? v.rp[r] : r, lo = INT64_MAX;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int64_t c = v.cinv ? v.cinv[m->col[k]] : m->col[k];
      int64_t d = c > r ? c - r : r - c;
      if (d > bw) bw = d;
      if (c < lo) lo = c;
    }
    if (lo != INT64_MAX && lo < r) prof += r - lo;
  }
  int64_t ne = 0, nf = 0;
  s = count_tiles(m, &v, tile, &ne, &nf);
  free(v.cinv);
  if (s != TS_OK) return s;
  int64_t tiles = ((R + tile - 1) / tile) * ((C + tile - 1) / tile);
  *out = (ts_pattern_metrics){.rows = R, .cols = C, .nnz = m->nnz, .bandwidth = bw, .profile = prof, .tile = tile,
                              .tiles_empty = tiles - ne, .tiles_mixed = ne - nf, .tiles_full = nf};
  return TS_OK;
}
