/* Packing of block-type rows into the layout of the packed kernels (quant_internal.h): groups of
 * 8 rows, a pure regrouping of the file's bytes (a group holds exactly the values of its 8 file rows
 * in 8 x row_bytes; only a last group of 1-7 rows is padded with zero rows), so a decode step reads
 * as much as from the file layout. */
#include <string.h>

#include "llm/quant_internal.h"
#include "tessera/hwinfo.h"

/* bytes of a block in the file, and where its scale(s) and quants sit inside it */
static size_t blk_bytes(uint32_t type) {
  return type == TS_QT_Q4_1 ? sizeof(ts__blk_q4_1) : type == TS_QT_Q4_0 ? sizeof(ts__blk_q4_0) : sizeof(ts__blk_q8_0);
}

/* Offsets inside a packed group of nb blocks for block b of row k (0..7): the fp16 d (and Q4_1's
 * m), the quants (16 nibble bytes, or 32 biased bytes for Q8_0). Step j (blocks 4j..) starts at
 * 32 j block bytes; row k is row kk = k % 4 of half i = k / 4. */
typedef struct slot { size_t d, m, q; } slot;
static slot where(uint32_t type, int64_t nb, int64_t b, int k) {
  const int64_t j = b / 4, h = b % 4, nbj = nb - 4 * j < 4 ? nb - 4 * j : 4;
  const size_t base = (size_t)j * 32 * blk_bytes(type), i = (size_t)(k / 4), kk = (size_t)(k % 4);
  const size_t sc = (size_t)(8 * nbj) * i + (size_t)(2 * (nbj * (int64_t)kk + h));
  const size_t SC = (size_t)(type == TS_QT_Q4_1 ? 32 : 16) * (size_t)nbj;
  slot s = {base + sc, base + 16 * (size_t)nbj + sc, 0};
  if (type == TS_QT_Q8_0) s.q = base + SC + 256 * (size_t)h + 128 * i + 32 * kk;
  else s.q = base + SC + 128 * (size_t)h + 64 * i + 16 * kk;
  return s;
}

size_t ts__pack_bytes(uint32_t type, int64_t rows, int64_t cols) {
  size_t rb;
  if (ts_qtype_row_bytes(type, cols, &rb) != TS_OK) return 0;
  return rb * (size_t)((rows + TS__PACK_ROWS - 1) / TS__PACK_ROWS * TS__PACK_ROWS);
}

void ts__pack_rows(uint32_t type, const void *src, void *dst, int64_t rows, int64_t cols) {
  size_t rb;
  if (ts_qtype_row_bytes(type, cols, &rb) != TS_OK) return;
  if (type != TS_QT_Q8_0 && type != TS_QT_Q4_0 && type != TS_QT_Q4_1) return;
  const int64_t nb = cols / TS_QK;
  const size_t bs = blk_bytes(type);
  memset(dst, 0, ts__pack_bytes(type, rows, cols)); /* the padding rows */
  for (int64_t r = 0; r < rows; r++) {
    uint8_t *g = (uint8_t *)dst + (size_t)(r / 8 * 8) * rb;
    const uint8_t *row = (const uint8_t *)src + (size_t)r * rb;
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t *blk = row + (size_t)b * bs;
      const slot s = where(type, nb, b, (int)(r % 8));
      memcpy(g + s.d, blk, 2);
      if (type == TS_QT_Q4_1) memcpy(g + s.m, blk + 2, 2);
      if (type == TS_QT_Q8_0)
        for (int i = 0; i < 32; i++) g[s.q + (size_t)i] = blk[2 + i] ^ 0x80;
      else memcpy(g + s.q, blk + bs - 16, 16);
    }
  }
}

void ts__unpack_row(uint32_t type, const void *P, int64_t r, void *dst, int64_t cols) {
  size_t rb;
  if (ts_qtype_row_bytes(type, cols, &rb) != TS_OK) return;
  if (type != TS_QT_Q8_0 && type != TS_QT_Q4_0 && type != TS_QT_Q4_1) return;
  const int64_t nb = cols / TS_QK;
  const size_t bs = blk_bytes(type);
  const uint8_t *g = (const uint8_t *)P + (size_t)(r / 8 * 8) * rb;
  for (int64_t b = 0; b < nb; b++) {
    uint8_t *blk = (uint8_t *)dst + (size_t)b * bs;
    const slot s = where(type, nb, b, (int)(r % 8));
    memcpy(blk, g + s.d, 2);
    if (type == TS_QT_Q4_1) memcpy(blk + 2, g + s.m, 2);
    if (type == TS_QT_Q8_0)
      for (int i = 0; i < 32; i++) blk[2 + i] = g[s.q + (size_t)i] ^ 0x80;
    else memcpy(blk + bs - 16, g + s.q, 16);
  }
}

/* Prefill's chunk: what L1d holds. 32 KiB on the machine it was tuned on (a Zen 4 VM, 32 KiB of
 * L1d per core); scaled by this machine's L1d (48 KiB on a Golden Cove Xeon), 32 KiB when unknown.
 * Read once per process. Results do not depend on it (each output is one tile's, whatever the
 * chunk). */
int64_t ts__pgemm_chunk_bytes(void) {
  static int64_t cached; /* 0: not read yet */
  int64_t b = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (b) return b;
  b = ts_hwinfo_cache_scaled(1, 32 * 1024, 32 * 1024, 8 * 1024, 1024 * 1024);
  __atomic_store_n(&cached, b, __ATOMIC_RELAXED);
  return b;
}
