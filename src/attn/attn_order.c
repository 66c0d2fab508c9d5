/* The token order attention runs in (tessera/attn_sched.h, ts_attn_reorder): reorder's `auto`
 * judges an order by its non-empty tile x tile tiles, the count a fixed-tile kernel cares about;
 * the scheduled executor mostly runs COMPACT passes, whose work is, per 16-row sub-tile, the rows
 * times the keys their union reaches (4-key runs or single keys, ts__attn_compact_rl). So the
 * attention auto tries the same candidates and keeps the order whose 16-row compact pass computes
 * the fewest cells. Example: window2d 64 x 64, k = 7: the row-major order has the fewest 64 x 64
 * tiles, but a 16-row sub-tile there is one strip of 16 tokens (union 7 x 22 keys, 3.1 cells per
 * allowed cell) where Morton's is a 4 x 4 patch (10 x 10 keys, 1.9).
 * With a token grid the clustering orders (hc, ic: 25-490 ms at 4096 tokens, most of the planning
 * time) are left out: on the benchmark's 13 grid workloads and their permute: versions one of
 * none / morton / hilbert / rcm always scored within 0.5% of them (swin, vitdet: rcm 1.402 and
 * 1.136 cells per allowed cell against hc 1.407 and 1.130), and the schedules made on the rcm
 * order ran as fast as those on hc (vitdet 1.24 vs 1.30 ms, swin 0.270 vs 0.271 ms, one head, one
 * thread). Without a grid they are the only local orders, and run.
 * DIAG passes (attn.h) compute, per 16-row sub-tile, the rows times the distinct offsets j - i of
 * its cells: on a sliding window in the natural order about the allowed cells (window2d k = 7:
 * 1.21 cells per allowed cell with NAT's clamped edge windows, against Morton's 1.89 for COMPACT),
 * but each costs TS__ATTN_DIAG_COST compact cells. An order's score is the smaller of its compact
 * cells and its diag cells at that price, so auto keeps the natural order where diagonals win and
 * the scheduler's guard then times the DIAG passes against its schedule (AVX-512 only:
 * ts__attn_diag_enabled). With a grid, `raster` (the grid's row-major order) is a candidate too:
 * it gives a relabelled (permute:) sliding window its natural order, and so its diagonals, back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_internal.h"

/* Rows per sub-tile of the scoring pass: the lane width, the height the scheduler picks most. */
#define SCORE_ROWS 16

ts_status ts_attn_order_cells(const ts_csr *mask, const int32_t *perm, int32_t h, int64_t *cells) {
  if (!mask || !cells || mask->rows != mask->cols || h < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn order: a square mask, an output and a height >= 1 are required");
  *cells = 0;
  const int64_t n = mask->rows, W = (n + 63) / 64;
  int32_t *inv = perm ? malloc((size_t)(n ? n : 1) * sizeof *inv) : NULL;
  uint64_t *u = calloc((size_t)(W ? W : 1), sizeof *u);
  if ((perm && !inv) || !u) {
    free(inv), free(u);
    return ts_error(TS_ERR_OOM, "attn order: cannot allocate %lld words", (long long)W);
  }
  if (perm)
    for (int64_t i = 0; i < n; i++) inv[perm[i]] = (int32_t)i;
  for (int64_t i0 = 0; i0 < n; i0 += h) { /* new rows [i0, i0+h): original rows perm[i], columns inv[j] */
    const int64_t i1 = i0 + h < n ? i0 + h : n;
    memset(u, 0, (size_t)W * sizeof *u);
    for (int64_t i = i0; i < i1; i++) {
      const int64_t r = perm ? perm[i] : i;
      for (int64_t x = mask->rowptr[r]; x < mask->rowptr[r + 1]; x++) {
        const int64_t j = perm ? inv[mask->col[x]] : mask->col[x];
        u[j >> 6] |= (uint64_t)1 << (j & 63);
      }
    }
    *cells += (i1 - i0) * ts__attn_compact_keys(u, 0, n);
  }
  free(inv), free(u);
  return TS_OK;
}

/* Offsets o = j - i of one row's cells, at bit o + n - 1 of d ([ceil((2n - 1) / 64)] words). */
static inline void mark_offset(uint64_t *d, int64_t n, int64_t i, int64_t j) {
  const int64_t x = j - i + n - 1;
  d[x >> 6] |= (uint64_t)1 << (x & 63);
}

static int64_t popcount_words(const uint64_t *d, int64_t w) {
  int64_t c = 0;
  for (int64_t x = 0; x < w; x++) c += __builtin_popcountll(d[x]);
  return c;
}

ts_status ts_attn_order_diag_cells(const ts_csr *mask, const int32_t *perm, int32_t h, int64_t *cells) {
  if (!mask || !cells || mask->rows != mask->cols || h < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn order: a square mask, an output and a height >= 1 are required");
  *cells = 0;
  const int64_t n = mask->rows, DW = (2 * n - 1 + 63) / 64;
  int32_t *inv = perm ? malloc((size_t)(n ? n : 1) * sizeof *inv) : NULL;
  uint64_t *d = calloc((size_t)(DW > 0 ? DW : 1), sizeof *d);
  if ((perm && !inv) || !d) {
    free(inv), free(d);
    return ts_error(TS_ERR_OOM, "attn order: cannot allocate %lld words", (long long)DW);
  }
  if (perm)
    for (int64_t i = 0; i < n; i++) inv[perm[i]] = (int32_t)i;
  for (int64_t i0 = 0; i0 < n; i0 += h) {
    const int64_t i1 = i0 + h < n ? i0 + h : n;
    memset(d, 0, (size_t)DW * sizeof *d);
    for (int64_t i = i0; i < i1; i++) {
      const int64_t r = perm ? perm[i] : i;
      for (int64_t x = mask->rowptr[r]; x < mask->rowptr[r + 1]; x++) mark_offset(d, n, i, perm ? inv[mask->col[x]] : mask->col[x]);
    }
    *cells += (i1 - i0) * popcount_words(d, DW);
  }
  free(inv), free(d);
  return TS_OK;
}

ts_status ts__attn_pass_cells(const ts_bitmap *mask, int32_t h, int64_t *compact, int64_t *diag) {
  const int64_t n = mask->rows, W = (n + 63) / 64, DW = (2 * n - 1 + 63) / 64;
  uint64_t *u = calloc((size_t)(W + DW + 1), sizeof *u), *d = u + W;
  if (!u) return ts_error(TS_ERR_OOM, "attn order: cannot allocate %lld words", (long long)(W + DW));
  *compact = *diag = 0;
  for (int64_t i0 = 0; i0 < n; i0 += h) {
    const int64_t i1 = i0 + h < n ? i0 + h : n;
    memset(u, 0, (size_t)(W + DW) * sizeof *u);
    for (int64_t i = i0; i < i1; i++) {
      const uint64_t *row = ts_bitmap_row(mask, i);
      for (int64_t w = 0; w < W; w++) {
        u[w] |= row[w];
        for (uint64_t x = row[w]; x; x &= x - 1) mark_offset(d, n, i, w * 64 + __builtin_ctzll(x));
      }
    }
    *compact += (i1 - i0) * ts__attn_compact_keys(u, 0, n);
    *diag += (i1 - i0) * popcount_words(d, DW);
  }
  free(u);
  return TS_OK;
}

ts_status ts__attn_diag_ratio(const ts_bitmap *mask, double *ratio) {
  *ratio = INFINITY;
  if (!ts__attn_diag_enabled()) return TS_OK;
  int64_t cc = 0, dc = 0;
  TS_TRY(ts__attn_pass_cells(mask, 16, &cc, &dc));
  if (cc > 0) *ratio = (double)dc * TS__ATTN_DIAG_COST / (double)cc;
  return TS_OK;
}

ts_status ts_attn_reorder(const ts_csr *mask, const ts_reorder_opts *o, int32_t *perm, ts_reorder_stats *st) {
  if (!mask || !o || !perm || mask->rows != mask->cols)
    return ts_error(TS_ERR_INVALID_ARG, "attn reorder: a square mask, options and a permutation are required");
  ts_reorder_opts ro = *o;
  ro.mode = TS_REORDER_MODE_SYMMETRIC;
  ts_reorder_stats local;
  if (!st) st = &local;
  if (o->method != TS_REORDER_AUTO) return ts_reorder(mask, &ro, perm, NULL, st);
  static const ts_reorder_method cand[] = {TS_REORDER_NONE, TS_REORDER_RASTER, TS_REORDER_MORTON, TS_REORDER_HILBERT,
                                           TS_REORDER_RCM,  TS_REORDER_HC,     TS_REORDER_IC};
  const int64_t n = mask->rows;
  const double t0 = ts_now();
  int64_t best = -1, cells[TS_REORDER_METHOD_COUNT];
  double ms[TS_REORDER_METHOD_COUNT];
  for (int m = 0; m < TS_REORDER_METHOD_COUNT; m++) cells[m] = -1, ms[m] = -1;
  int32_t *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  if (!p) return ts_error(TS_ERR_OOM, "attn reorder: cannot allocate a permutation of %lld", (long long)n);
  ts_status s = TS_OK;
  for (size_t c = 0; c < sizeof cand / sizeof cand[0] && s == TS_OK; c++) {
    const bool grid = o->grid_h > 0;
    if ((cand[c] == TS_REORDER_MORTON || cand[c] == TS_REORDER_HILBERT || cand[c] == TS_REORDER_RASTER) && !grid) continue;
    if ((cand[c] == TS_REORDER_HC || cand[c] == TS_REORDER_IC) && grid) continue; /* see the file comment */
    ts_reorder_stats cst;
    const double t1 = ts_now();
    ro.method = cand[c];
    s = ts_reorder(mask, &ro, p, NULL, &cst);
    int64_t dc = 0;
    if (s == TS_OK) s = ts_attn_order_cells(mask, p, SCORE_ROWS, &cells[cand[c]]);
    if (s == TS_OK && ts__attn_diag_enabled()) s = ts_attn_order_diag_cells(mask, p, SCORE_ROWS, &dc);
    else dc = INT64_MAX / 2;
    if (s == TS_OK && (double)dc * TS__ATTN_DIAG_COST < (double)cells[cand[c]]) /* DIAG passes compute less here */
      cells[cand[c]] = (int64_t)ceil((double)dc * TS__ATTN_DIAG_COST);
    if (s != TS_OK) {
      ts_error_prefix("attn reorder (candidate %s): ", ts_reorder_method_name(cand[c]));
      break;
    }
    ms[cand[c]] = 1e3 * (ts_now() - t1);
    if (best < 0 || cells[cand[c]] < best) { /* ties: the earlier (cheaper) candidate */
      best = cells[cand[c]];
      memcpy(perm, p, (size_t)n * sizeof *p);
      *st = cst;
    }
  }
  free(p);
  if (s != TS_OK) return s;
  memcpy(st->auto_tiles, cells, sizeof cells);
  memcpy(st->auto_ms, ms, sizeof ms);
  st->ms = 1e3 * (ts_now() - t0);
  return TS_OK;
}
