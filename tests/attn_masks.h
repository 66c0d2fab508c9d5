/* What the attention tests build by hand: masks (n x n bitmaps, ts_calloc'd: free with mk_free) --
 * a band with global rows/columns, a 2-D sliding window, a random pattern -- and single-segment
 * pass schedules. */
#ifndef TS_TEST_ATTN_MASKS_H
#define TS_TEST_ATTN_MASKS_H

#include <stdlib.h>

#include "tessera/attn.h"
#include "tessera/core.h"
#include "tessera/sparse.h"
#include "tst.h"

static inline ts_bitmap mk_alloc(int64_t n) {
  ts_bitmap b = {.rows = n, .cols = n, .stride = (n + 63) / 64};
  b.bits = ts_calloc((size_t)(n * b.stride), sizeof(uint64_t));
  return b;
}
static inline void mk_free(ts_bitmap *b) { ts_free(b->bits); }
static inline void mk_set(ts_bitmap *b, int64_t i, int64_t j) {
  b->bits[i * b->stride + (j >> 6)] |= (uint64_t)1 << (j & 63);
}

/* |i - j| <= w, plus the first `global` rows and columns. */
static inline ts_bitmap mask_band(int64_t n, int64_t w, int64_t global) {
  ts_bitmap b = mk_alloc(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (llabs(i - j) <= w || i < global || j < global) mk_set(&b, i, j);
  return b;
}

/* A k x k window on an h x w grid, tokens in raster order. */
static inline ts_bitmap mask_window2d(int64_t h, int64_t w, int64_t k) {
  ts_bitmap b = mk_alloc(h * w);
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      for (int64_t y2 = 0; y2 < h; y2++)
        for (int64_t x2 = 0; x2 < w; x2++)
          if (llabs(y - y2) <= k / 2 && llabs(x - x2) <= k / 2) mk_set(&b, y * w + x, y2 * w + x2);
  return b;
}

/* Each cell allowed with probability density (ts_rng, seed). */
static inline ts_bitmap mask_random(int64_t n, double density, uint64_t seed) {
  ts_bitmap b = mk_alloc(n);
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (ts_rng_uniform(&r) < density) mk_set(&b, i, j);
  return b;
}

/* Panels of P rows, each one segment of the given kind over all columns with tile br x bc. */
static inline void pass_schedule(ts_attn_schedule *s, int64_t n, int32_t P, int32_t br, int32_t bc, int32_t kind) {
  int64_t np = (n + P - 1) / P;
  CHECK_OK(ts_attn_schedule_alloc(s, n, np, np));
  for (int64_t p = 0; p < np; p++) {
    int32_t r0 = (int32_t)(p * P), nr = (int32_t)(n - r0 < P ? n - r0 : P);
    s->panels[p] = (ts_attn_panel){r0, nr, p, 1};
    s->segs[p] = (ts_attn_segment){r0, nr, 0, (int32_t)n, br, bc, kind};
  }
}

#endif
