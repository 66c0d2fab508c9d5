/* Variable-tile schedules from rectangular blocks (one tile shape per block), the rule-based tile
 * chooser and its analytic default cost. The ILP scheduler replaces the chooser later; the schedule
 * shape stays the same. */
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"

static const ts_attn_tile default_menu[20] = {
    {8, 16},  {8, 32},  {8, 64},  {8, 128},  {16, 16},  {16, 32},  {16, 64},  {16, 128},  {32, 16},  {32, 32},
    {32, 64}, {32, 128}, {64, 16}, {64, 32}, {64, 64}, {64, 128}, {128, 16}, {128, 32}, {128, 64}, {128, 128}};

int ts_attn_default_menu(const ts_attn_tile **menu) {
  if (menu) *menu = default_menu;
  return 20;
}

ts_attn_blocks_opts ts_attn_blocks_opts_default(void) {
  ts_attn_blocks_opts o = {.panel_rows = 128, .residue = {16, 32}, .align = 32};
  return o;
}

/* Lanes a sub-tile of r rows costs in Q K^T and the softmax: a multiple of 16 (zmm). Sub-tiles of
 * up to 8 rows run 8-lane ymm FMAs, but a ymm FMA takes an FMA slot like a zmm one on Zen 5 (and
 * Intel cores with two 512-bit FMA units); only Zen 4, which splits a zmm FMA in two, ran them at
 * half the price (this model's assumption before: it then chose 8-row passes that measured 20-40%
 * slower than 16-row ones on Zen 5). The measured profile (attn_profile.h) needs no assumption. */
static int64_t lane_rows(int64_t r) { return r <= 0 ? 0 : (r + 15) / 16 * 16; }

/* Work of one block as the kernels do it: Q K^T over the occupied lanes, P V, the softmax (about
 * 8 vector ops per 16 cells), the O accumulator rescale/reload per column tile, and a fixed cost
 * per sub-tile (calls, pointers, mask words), all in FMA-lane units. */
double ts_attn_cost_default(const ts_block *b, ts_attn_tile t, void *user) {
  double d = user ? (double)*(const int *)user : 64.0;
  if (!b || t.br < 1 || t.bc < 1) return 1e300;
  int64_t full_r = b->rows / t.br, rem_r = b->rows % t.br;
  int64_t nsub_r = full_r + (rem_r > 0), nsub_c = (b->cols + t.bc - 1) / t.bc;
  double rows16 = (double)full_r * (double)lane_rows(t.br) + (double)lane_rows(rem_r);
  double qk = rows16 * b->cols * d, pv = (double)b->rows * b->cols * d, sm = rows16 * b->cols * 8.0;
  double orw = (double)nsub_c * b->rows * d * 2.0, fixed = (double)nsub_r * nsub_c * 400.0;
  return qk + pv + sm + orw + fixed;
}

ts_status ts_attn_choose_tiles(const ts_block *blocks, int64_t nblocks, const ts_attn_tile *menu, int nmenu,
                               ts_attn_cost_fn cost, void *user, ts_attn_tile *out) {
  if (nblocks < 0 || (nblocks > 0 && (!blocks || !out)))
    return ts_error(TS_ERR_INVALID_ARG, "attn choose tiles: NULL blocks/out or negative count %lld", (long long)nblocks);
  if (nmenu < 1 || !menu) return ts_error(TS_ERR_INVALID_ARG, "attn choose tiles: empty tile menu");
  for (int t = 0; t < nmenu; t++)
    if (menu[t].br < 1 || menu[t].br > TS_ATTN_TILE_MAX || menu[t].bc < 1 || menu[t].bc > TS_ATTN_TILE_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "attn choose tiles: menu tile %d is %d x %d, not in [1, %d]^2", t, menu[t].br,
                      menu[t].bc, TS_ATTN_TILE_MAX);
  if (!cost) cost = ts_attn_cost_default;
  for (int64_t b = 0; b < nblocks; b++) {
    int best = 0;
    double bc = cost(&blocks[b], menu[0], user);
    for (int t = 1; t < nmenu; t++) {
      double c = cost(&blocks[b], menu[t], user);
      if (c < bc) bc = c, best = t;
    }
    out[b] = menu[best];
  }
  return TS_OK;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Count of sorted values < v (lower bound). */
static int64_t count_below(const int64_t *a, int64_t n, int64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Panel cuts: from p0, the cut among block edges (align 1) or multiples of align in [p0 + H/2,
 * p0 + H] (and p0 + H itself) that splits the fewest blocks, the largest such cut on ties. cuts:
 * [npanels + 1]. H is a multiple of align (rounded up by the caller). */
static ts_status choose_cuts(int64_t n, const ts_block *bl, int64_t nb, int64_t H, int64_t align, int64_t **cuts_out,
                             int64_t *np_out) {
  int64_t *starts = malloc((size_t)(nb + 1) * sizeof *starts), *ends = malloc((size_t)(nb + 1) * sizeof *ends);
  /* every cut advances by at least max(1, H/2) rows, except the last */
  int64_t cap = n / (H / 2 > 1 ? H / 2 : 1) + 2;
  int64_t *cand = malloc((size_t)(2 * nb + 2) * sizeof *cand), *cuts = malloc((size_t)cap * sizeof *cuts);
  if (!starts || !ends || !cand || !cuts) {
    free(starts), free(ends), free(cand), free(cuts);
    return ts_error(TS_ERR_OOM, "attn blocks: cannot allocate panel cut arrays");
  }
  int64_t nc = 0;
  for (int64_t b = 0; b < nb; b++) {
    starts[b] = bl[b].row0;
    ends[b] = (int64_t)bl[b].row0 + bl[b].rows;
    cand[nc++] = starts[b];
    cand[nc++] = ends[b];
  }
  qsort(starts, (size_t)nb, sizeof *starts, cmp_i64);
  qsort(ends, (size_t)nb, sizeof *ends, cmp_i64);
  qsort(cand, (size_t)nc, sizeof *cand, cmp_i64);
  int64_t np = 0, p0 = 0;
  cuts[0] = 0;
  while (p0 < n) {
    int64_t hi = p0 + H < n ? p0 + H : n, lo = p0 + (H / 2 > 1 ? H / 2 : 1);
    /* crossing(c) = blocks with start < c < end = #(start < c) - #(end <= c) */
    int64_t best = hi, bestx = count_below(starts, nb, hi) - count_below(ends, nb, hi + 1);
    if (align > 1) { /* multiples of align in [lo, hi) */
      for (int64_t c = (lo + align - 1) / align * align; c < hi; c += align) {
        int64_t x = count_below(starts, nb, c) - count_below(ends, nb, c + 1);
        if (x < bestx || (x == bestx && c > best)) best = c, bestx = x;
      }
    }
    for (int64_t k = count_below(cand, nc, lo); align <= 1 && k < nc && cand[k] < hi; k++) {
      int64_t c = cand[k], x = count_below(starts, nb, c) - count_below(ends, nb, c + 1);
      if (x < bestx || (x == bestx && c > best)) best = c, bestx = x;
    }
    cuts[++np] = best;
    p0 = best;
  }
  free(starts), free(ends), free(cand);
  *cuts_out = cuts;
  *np_out = np;
  return TS_OK;
}

/* Column span [*c0, *c1) of the panel's allowed cells no block covers; *c1 = 0 when none. */
static void residue_span(const ts_bitmap *mask, int64_t p0, int64_t p1, const ts_block *bl, const int64_t *ids, int64_t nids,
                         uint64_t *row, int64_t *c0, int64_t *c1) {
  int64_t W = (mask->cols + 63) / 64, lo = INT64_MAX, hi = 0;
  for (int64_t i = p0; i < p1; i++) {
    memcpy(row, mask->bits + i * mask->stride, (size_t)W * sizeof *row);
    for (int64_t x = 0; x < nids; x++) {
      int64_t b = ids[x];
      if (i < bl[b].row0 || i >= (int64_t)bl[b].row0 + bl[b].rows) continue;
      int64_t j0 = bl[b].col0, j1 = j0 + bl[b].cols;
      for (int64_t w = j0 >> 6; w <= (j1 - 1) >> 6; w++) {
        uint64_t m = ~(uint64_t)0;
        if (j0 > w * 64) m &= ~(uint64_t)0 << (j0 - w * 64);
        if (j1 < w * 64 + 64) m &= ~(uint64_t)0 >> (w * 64 + 64 - j1);
        row[w] &= ~m;
      }
    }
    for (int64_t w = 0; w < W; w++)
      if (row[w]) {
        int64_t first = w * 64 + __builtin_ctzll(row[w]);
        if (first < lo) lo = first;
        break;
      }
    for (int64_t w = W - 1; w >= 0; w--)
      if (row[w]) {
        int64_t last = w * 64 + 63 - __builtin_clzll(row[w]);
        if (last + 1 > hi) hi = last + 1;
        break;
      }
  }
  *c0 = hi > 0 ? lo : 0;
  *c1 = hi;
}

static ts_status check_blocks(int64_t n, const ts_block *bl, const ts_attn_tile *tiles, int64_t nb, const ts_bitmap *mask,
                              const ts_attn_blocks_opts *o) {
  if (n < 1 || n > INT32_MAX) return ts_error(TS_ERR_INVALID_ARG, "attn blocks: n = %lld is not in [1, 2^31)", (long long)n);
  if (nb < 0 || (nb > 0 && (!bl || !tiles)))
    return ts_error(TS_ERR_INVALID_ARG, "attn blocks: NULL blocks/tiles or negative count %lld", (long long)nb);
  for (int64_t b = 0; b < nb; b++) {
    const ts_block *x = &bl[b];
    if (x->rows < 1 || x->cols < 1 || x->row0 < 0 || x->col0 < 0 || (int64_t)x->row0 + x->rows > n || (int64_t)x->col0 + x->cols > n)
      return ts_error(TS_ERR_INVALID_ARG, "attn blocks: block %lld (rows %d+%d, cols %d+%d) is empty or outside [0, %lld)^2",
                      (long long)b, x->row0, x->rows, x->col0, x->cols, (long long)n);
    if (tiles[b].br < 1 || tiles[b].br > TS_ATTN_TILE_MAX || tiles[b].bc < 1 || tiles[b].bc > TS_ATTN_TILE_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "attn blocks: tile of block %lld is %d x %d, not in [1, %d]^2", (long long)b,
                      tiles[b].br, tiles[b].bc, TS_ATTN_TILE_MAX);
  }
  if (o->panel_rows < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn blocks: panel_rows = %d must be >= 1", o->panel_rows);
  if (o->align < 1 || o->align > TS_ATTN_TILE_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn blocks: align = %d is not in [1, %d]", o->align, TS_ATTN_TILE_MAX);
  if (o->residue.br < 1 || o->residue.br > TS_ATTN_TILE_MAX || o->residue.bc < 1 || o->residue.bc > TS_ATTN_TILE_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn blocks: residue tile %d x %d is not in [1, %d]^2", o->residue.br, o->residue.bc,
                    TS_ATTN_TILE_MAX);
  if (mask && (!mask->bits || mask->rows != n || mask->cols != n || mask->stride < (n + 63) / 64))
    return ts_error(TS_ERR_SHAPE, "attn blocks: mask is %lld x %lld, expected %lld x %lld", (long long)mask->rows,
                    (long long)mask->cols, (long long)n, (long long)n);
  return TS_OK;
}

ts_status ts_attn_schedule_from_blocks(ts_attn_schedule *s, int64_t n, const ts_block *bl, const ts_attn_tile *tiles,
                                       int64_t nb, const ts_bitmap *mask, const ts_attn_blocks_opts *opts) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn blocks: NULL schedule");
  memset(s, 0, sizeof *s);
  ts_attn_blocks_opts o = opts ? *opts : ts_attn_blocks_opts_default();
  TS_TRY(check_blocks(n, bl, tiles, nb, mask, &o));
  int64_t *cuts = NULL, np = 0;
  const int64_t H = ((int64_t)o.panel_rows + o.align - 1) / o.align * o.align;
  TS_TRY(choose_cuts(n, bl, nb, H, o.align, &cuts, &np));
  int64_t *rc = malloc((size_t)np * 2 * sizeof *rc); /* residue span per panel */
  int64_t *ids = malloc((size_t)(nb ? nb : 1) * sizeof *ids); /* blocks meeting the panel */
  uint64_t *row = mask ? malloc((size_t)((n + 63) / 64) * sizeof *row) : NULL;
  ts_status st = TS_OK;
  if (!rc || !ids || (mask && !row)) st = ts_error(TS_ERR_OOM, "attn blocks: cannot allocate residue arrays");
  int64_t nsegs = 0;
  for (int64_t p = 0; p < np && st == TS_OK; p++) {
    int64_t nids = 0;
    for (int64_t b = 0; b < nb; b++)
      if (bl[b].row0 < cuts[p + 1] && (int64_t)bl[b].row0 + bl[b].rows > cuts[p]) ids[nids++] = b;
    nsegs += nids;
    if (mask) residue_span(mask, cuts[p], cuts[p + 1], bl, ids, nids, row, &rc[2 * p], &rc[2 * p + 1]);
    else rc[2 * p] = 0, rc[2 * p + 1] = n;
    nsegs += rc[2 * p + 1] > rc[2 * p];
  }
  if (st == TS_OK) st = ts_attn_schedule_alloc(s, n, np, nsegs);
  int64_t k = 0;
  for (int64_t p = 0; p < np && st == TS_OK; p++) {
    int64_t p0 = cuts[p], p1 = cuts[p + 1];
    s->panels[p] = (ts_attn_panel){.r0 = (int32_t)p0, .nr = (int32_t)(p1 - p0), .seg0 = k, .nseg = 0};
    for (int64_t b = 0; b < nb; b++) {
      int64_t r0 = bl[b].row0 > p0 ? bl[b].row0 : p0, r1 = (int64_t)bl[b].row0 + bl[b].rows < p1 ? (int64_t)bl[b].row0 + bl[b].rows : p1;
      if (r0 >= r1) continue;
      s->segs[k++] = (ts_attn_segment){.r0 = (int32_t)r0, .nr = (int32_t)(r1 - r0), .c0 = bl[b].col0, .nc = bl[b].cols,
                                       .br = tiles[b].br, .bc = tiles[b].bc, .kind = TS_ATTN_SEG_MIXED};
    }
    if (rc[2 * p + 1] > rc[2 * p])
      s->segs[k++] = (ts_attn_segment){.r0 = (int32_t)p0, .nr = (int32_t)(p1 - p0), .c0 = (int32_t)rc[2 * p],
                                       .nc = (int32_t)(rc[2 * p + 1] - rc[2 * p]), .br = o.residue.br, .bc = o.residue.bc,
                                       .kind = TS_ATTN_SEG_MIXED};
    s->panels[p].nseg = k - s->panels[p].seg0;
  }
  free(cuts);
  free(rc);
  free(ids);
  free(row);
  if (st != TS_OK) ts_attn_schedule_free(s);
  return st;
}
