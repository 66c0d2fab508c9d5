/* Orders of a 2-D token grid: the space-filling curves Morton (Z-order, interleaved coordinate
 * bits) and Hilbert, and the grid's row-major (raster) order. Any h x w grid: both curves are laid over the smallest power-of-two square that
 * holds the grid and the cells outside it are skipped (so a non-power-of-two grid gets the
 * curve's order restricted to it; the Hilbert order then has a few longer jumps at the borders,
 * the Z-order its usual ones). Tokens sort by curve index, ties by token index. O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

/* Spreads the low 32 bits of v to the even bit positions. */
static uint64_t spread(uint64_t v) {
  v &= 0xffffffffull;
  v = (v | (v << 16)) & 0x0000ffff0000ffffull;
  v = (v | (v << 8)) & 0x00ff00ff00ff00ffull;
  v = (v | (v << 4)) & 0x0f0f0f0f0f0f0f0full;
  v = (v | (v << 2)) & 0x3333333333333333ull;
  v = (v | (v << 1)) & 0x5555555555555555ull;
  return v;
}

static uint64_t morton_key(uint64_t side, uint64_t y, uint64_t x) {
  (void)side;
  return (spread(y) << 1) | spread(x);
}

/* Distance along the Hilbert curve of a side x side square (side a power of two): walk the
 * quadrant levels from the top; in each, the quadrant contributes its rank (0..3) times the
 * cells of one quadrant, then the coordinates are reflected/transposed into that quadrant's
 * frame so the sub-curve starts at the local origin. */
static uint64_t hilbert_key(uint64_t side, uint64_t y, uint64_t x) {
  uint64_t d = 0;
  for (uint64_t s = side >> 1; s > 0; s >>= 1) {
    uint64_t rx = (x & s) ? 1 : 0, ry = (y & s) ? 1 : 0;
    d += s * s * ((3 * rx) ^ ry);
    if (ry == 0) {
      if (rx == 1) {
        x = side - 1 - x;
        y = side - 1 - y;
      }
      uint64_t t = x;
      x = y, y = t;
    }
  }
  return d;
}

/* Row-major: rows of the grid in turn (side >= w). */
static uint64_t raster_key(uint64_t side, uint64_t y, uint64_t x) { return y * side + x; }

typedef struct keyed {
  uint64_t key;
  int32_t tok;
} keyed;

static int cmp_keyed(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->tok > y->tok) - (x->tok < y->tok);
}

typedef enum curve { CURVE_MORTON, CURVE_HILBERT, CURVE_RASTER } curve;

static ts_status curve_order(const ts__ro_problem *p, curve cv, int32_t *row_order, int64_t *groups) {
  const char *name = cv == CURVE_HILBERT ? "hilbert" : cv == CURVE_RASTER ? "raster" : "morton";
  const ts_reorder_opts *o = p->o;
  int64_t n = p->m->rows, h = o->grid_h, w = o->grid_w;
  *groups = 0;
  if (!p->symmetric)
    return ts_error(TS_ERR_INVALID_ARG, "%s: orders the tokens of a square pattern (symmetric mode), got %lld x %lld",
                    name, (long long)p->m->rows, (long long)p->m->cols);
  if (h <= 0 || w <= 0)
    return ts_error(TS_ERR_INVALID_ARG,
                    "%s: the pattern has no 2-D token grid (set grid_h and grid_w, e.g. --grid HxW, or use a "
                    "--pattern with a grid)",
                    name);
  if (h > INT32_MAX || w > INT32_MAX || h * w > INT32_MAX)
    return ts_error(TS_ERR_OVERFLOW, "%s: grid %lldx%lld has more than INT32_MAX cells", name, (long long)h,
                    (long long)w);
  if (!o->grid_pos && n != h * w)
    return ts_error(TS_ERR_INVALID_ARG,
                    "%s: the pattern has %lld tokens but the %lldx%lld grid has %lld cells (give token positions)",
                    name, (long long)n, (long long)h, (long long)w, (long long)(h * w));
  uint64_t side = 1;
  while (side < (uint64_t)h || side < (uint64_t)w) side <<= 1;
  keyed *kv = malloc(((size_t)p->nrow_active + 1) * sizeof *kv);
  if (!kv) return ts_error(TS_ERR_OOM, "%s: keys for %lld tokens", name, (long long)p->nrow_active);
  int64_t nk = 0, k = 0;
  for (int64_t t = 0; t < n; t++) {
    if (!p->row_active[t]) continue;
    int64_t cell = o->grid_pos ? o->grid_pos[t] : t;
    if (cell >= h * w) {
      free(kv);
      return ts_error(TS_ERR_INVALID_ARG, "%s: token %lld sits at cell %lld, outside the %lldx%lld grid", name,
                      (long long)t, (long long)cell, (long long)h, (long long)w);
    }
    if (cell < 0) { /* not on the grid: first */
      row_order[k++] = (int32_t)t;
      continue;
    }
    uint64_t y = (uint64_t)(cell / w), x = (uint64_t)(cell % w);
    const uint64_t key = cv == CURVE_HILBERT ? hilbert_key(side, y, x) : cv == CURVE_RASTER ? raster_key(side, y, x)
                                                                                            : morton_key(side, y, x);
    kv[nk++] = (keyed){key, (int32_t)t};
  }
  qsort(kv, (size_t)nk, sizeof *kv, cmp_keyed);
  for (int64_t i = 0; i < nk; i++) row_order[k++] = kv[i].tok;
  free(kv);
  return TS_OK;
}

ts_status ts__ro_morton(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                        int64_t *col_groups) {
  (void)col_order, (void)col_groups;
  return curve_order(p, CURVE_MORTON, row_order, groups);
}

ts_status ts__ro_hilbert(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                         int64_t *col_groups) {
  (void)col_order, (void)col_groups;
  return curve_order(p, CURVE_HILBERT, row_order, groups);
}

ts_status ts__ro_raster(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                        int64_t *col_groups) {
  (void)col_order, (void)col_groups;
  return curve_order(p, CURVE_RASTER, row_order, groups);
}
