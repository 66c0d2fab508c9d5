/* Density grids for spy pictures: the nonzero fraction of each cell of a gh x gw grid laid over
 * a (possibly permuted) CSR pattern. One pass over the nonzeros with two lookup tables (old row
 * -> grid row, old column -> grid column), so permutations cost nothing extra and the permuted
 * matrix is never built. */
#include <stdlib.h>
#include <string.h>

#include "sparse/plot_internal.h"

/* map[old] = grid cell of the index's new position (new = inv[old] or old), cnt[cell] += 1. */
static ts_status build_map(const char *side, int64_t n, int32_t g, const int32_t *perm, int32_t *map, int64_t *cnt) {
  memset(cnt, 0, (size_t)g * sizeof *cnt);
  if (perm) {
    /* perm[new] = old: mark each old index once, so a repeated one is caught */
    for (int64_t i = 0; i < n; i++) map[i] = -1;
    for (int64_t nw = 0; nw < n; nw++) {
      int32_t old = perm[nw];
      if (old < 0 || old >= n)
        return ts_error(TS_ERR_INVALID_ARG, "%s permutation: perm[%lld] = %d outside 0..%lld", side, (long long)nw,
                        (int)old, (long long)n - 1);
      if (map[old] >= 0)
        return ts_error(TS_ERR_INVALID_ARG, "%s permutation: index %d appears twice (second at perm[%lld])", side,
                        (int)old, (long long)nw);
      map[old] = (int32_t)(nw * g / n);
    }
  } else {
    for (int64_t i = 0; i < n; i++) map[i] = (int32_t)(i * g / n);
  }
  for (int64_t i = 0; i < n; i++) cnt[map[i]]++;
  return TS_OK;
}

ts_status ts_spy_density(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, int32_t gh, int32_t gw,
                         float *density) {
  if (!m || !density) return ts_error(TS_ERR_INVALID_ARG, "ts_spy_density: NULL argument");
  if (m->rows < 1 || m->cols < 1 || m->nnz < 0 || !m->rowptr || (m->nnz > 0 && !m->col))
    return ts_error(TS_ERR_INVALID_ARG, "ts_spy_density: pattern %lldx%lld with nnz %lld is empty or incomplete",
                    (long long)m->rows, (long long)m->cols, (long long)m->nnz);
  if (m->rows > INT32_MAX || m->cols > INT32_MAX)
    return ts_error(TS_ERR_UNSUPPORTED, "ts_spy_density: pattern %lldx%lld exceeds int32 indices",
                    (long long)m->rows, (long long)m->cols);
  if (gh < 1 || gw < 1 || gh > m->rows || gw > m->cols)
    return ts_error(TS_ERR_INVALID_ARG, "ts_spy_density: grid %dx%d must be within 1..%lld x 1..%lld", (int)gh,
                    (int)gw, (long long)m->rows, (long long)m->cols);
  if (m->rowptr[0] != 0 || m->rowptr[m->rows] != m->nnz)
    return ts_error(TS_ERR_FORMAT, "ts_spy_density: rowptr[0] = %lld and rowptr[%lld] = %lld, expected 0 and nnz %lld",
                    (long long)m->rowptr[0], (long long)m->rows, (long long)m->rowptr[m->rows], (long long)m->nnz);

  int32_t *rmap = malloc((size_t)m->rows * sizeof *rmap), *cmap = malloc((size_t)m->cols * sizeof *cmap);
  int64_t *rcnt = malloc((size_t)gh * sizeof *rcnt), *ccnt = malloc((size_t)gw * sizeof *ccnt);
  uint64_t *cnt = calloc((size_t)gh * (size_t)gw, sizeof *cnt);
  ts_status st = TS_OK;
  if (!rmap || !cmap || !rcnt || !ccnt || !cnt) {
    st = ts_error(TS_ERR_OOM, "ts_spy_density: cannot allocate a %dx%d grid for a %lldx%lld pattern", (int)gh, (int)gw,
                  (long long)m->rows, (long long)m->cols);
    goto done;
  }
  if ((st = build_map("row", m->rows, gh, row_perm, rmap, rcnt)) != TS_OK) goto done;
  if ((st = build_map("column", m->cols, gw, col_perm, cmap, ccnt)) != TS_OK) goto done;

  for (int64_t r = 0; r < m->rows; r++) {
    int64_t b = m->rowptr[r], e = m->rowptr[r + 1];
    if (b > e || e > m->nnz) {
      st = ts_error(TS_ERR_FORMAT, "ts_spy_density: rowptr[%lld..%lld] = %lld..%lld is not monotone within nnz %lld",
                    (long long)r, (long long)r + 1, (long long)b, (long long)e, (long long)m->nnz);
      goto done;
    }
    uint64_t *row = cnt + (size_t)rmap[r] * (size_t)gw;
    for (int64_t k = b; k < e; k++) {
      int32_t c = m->col[k];
      if (c < 0 || c >= m->cols) {
        st = ts_error(TS_ERR_FORMAT, "ts_spy_density: row %lld has column %d outside 0..%lld", (long long)r, (int)c,
                      (long long)m->cols - 1);
        goto done;
      }
      row[cmap[c]]++;
    }
  }
  /* Duplicate columns (invalid CSR) could push a count above the cell's area: clamp to 1. */
  for (int32_t y = 0; y < gh; y++)
    for (int32_t x = 0; x < gw; x++) {
      double area = (double)rcnt[y] * (double)ccnt[x];
      double d = (double)cnt[(size_t)y * (size_t)gw + (size_t)x] / area;
      density[(size_t)y * (size_t)gw + (size_t)x] = (float)(d > 1 ? 1 : d);
    }
done:
  free(rmap);
  free(cmap);
  free(rcnt);
  free(ccnt);
  free(cnt);
  return st;
}
