/* Shared by the CPU and CUDA attention tests: a stand-in block extractor, so those tests do not
 * depend on the real one (ts_blocks_extract, tested on its own in test_blocks.c). */
#ifndef ATTN_TEST_BLOCKS_H
#define ATTN_TEST_BLOCKS_H

#include "tessera/reorder.h"
#include "tessera/sparse.h"

/* Runs of g x g tiles at least half full along each tile row become blocks; at most cap. */
static inline int64_t attn_test_blocks(const ts_bitmap *m, int32_t g, ts_block *out, int64_t cap) {
  int64_t n = m->rows, nb = 0, nt = (n + g - 1) / g;
  for (int64_t ti = 0; ti < nt; ti++) {
    int64_t start = -1;
    for (int64_t tj = 0; tj <= nt; tj++) {
      int on = 0;
      if (tj < nt) {
        int64_t cnt = 0, area = 0;
        for (int64_t i = ti * g; i < n && i < (ti + 1) * g; i++)
          for (int64_t j = tj * g; j < n && j < (tj + 1) * g; j++) cnt += ts_bitmap_get(m, i, j), area++;
        on = 2 * cnt >= area;
      }
      if (on && start < 0) start = tj;
      if (!on && start >= 0 && nb < cap) {
        int64_t r0 = ti * g, c0 = start * g, r1 = (ti + 1) * g < n ? (ti + 1) * g : n, c1 = tj * g < n ? tj * g : n;
        out[nb++] = (ts_block){.row0 = (int32_t)r0, .col0 = (int32_t)c0, .rows = (int32_t)(r1 - r0),
                               .cols = (int32_t)(c1 - c0)};
        start = -1;
      }
    }
  }
  return nb;
}

#endif
