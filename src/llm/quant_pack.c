/* Packing of block-type rows into the layout of the packed kernels (quant_internal.h): a pure
 * regrouping of the file's bytes, so a packed row holds exactly the values of its file row and the
 * same number of bytes (a decode step reads as much as from the file layout). */
#include <string.h>

#include "llm/quant_internal.h"

static void pack_row(uint32_t type, const uint8_t *src, uint8_t *dst, int64_t nb) {
  switch (type) {
    case TS_QT_Q4_0: {
      const ts__blk_q4_0 *b = (const void *)src;
      uint8_t *d = dst, *qs = dst + 2 * nb;
      for (int64_t k = 0; k < nb; k++) {
        memcpy(qs + 16 * k, b[k].qs, 16);
        memcpy(d + 2 * k, &b[k].d, 2);
      }
      return;
    }
    case TS_QT_Q4_1: {
      const ts__blk_q4_1 *b = (const void *)src;
      uint8_t *d = dst, *m = dst + 2 * nb, *qs = dst + 4 * nb;
      for (int64_t k = 0; k < nb; k++) {
        memcpy(qs + 16 * k, b[k].qs, 16);
        memcpy(d + 2 * k, &b[k].d, 2);
        memcpy(m + 2 * k, &b[k].m, 2);
      }
      return;
    }
    case TS_QT_Q8_0: {
      const ts__blk_q8_0 *b = (const void *)src;
      uint8_t *d = dst, *u = dst + 2 * nb;
      for (int64_t k = 0; k < nb; k++) {
        for (int i = 0; i < 32; i++) u[32 * k + i] = (uint8_t)b[k].q[i] ^ 0x80;
        memcpy(d + 2 * k, &b[k].d, 2);
      }
      return;
    }
    default: return;
  }
}

void ts__pack_rows(uint32_t type, const void *src, void *dst, int64_t rows, int64_t cols) {
  size_t rb;
  if (ts_qtype_row_bytes(type, cols, &rb) != TS_OK) return;
  for (int64_t r = 0; r < rows; r++)
    pack_row(type, (const uint8_t *)src + (size_t)r * rb, (uint8_t *)dst + (size_t)r * rb, cols / TS_QK);
}

void ts__unpack_row(uint32_t type, const void *src, void *dst, int64_t cols) {
  const int64_t nb = cols / TS_QK;
  const uint8_t *p = src;
  switch (type) {
    case TS_QT_Q4_0: {
      ts__blk_q4_0 *b = dst;
      for (int64_t k = 0; k < nb; k++) {
        memcpy(b[k].qs, p + 2 * nb + 16 * k, 16);
        memcpy(&b[k].d, p + 2 * k, 2);
      }
      return;
    }
    case TS_QT_Q4_1: {
      ts__blk_q4_1 *b = dst;
      for (int64_t k = 0; k < nb; k++) {
        memcpy(b[k].qs, p + 4 * nb + 16 * k, 16);
        memcpy(&b[k].d, p + 2 * k, 2);
        memcpy(&b[k].m, p + 2 * nb + 2 * k, 2);
      }
      return;
    }
    case TS_QT_Q8_0: {
      ts__blk_q8_0 *b = dst;
      for (int64_t k = 0; k < nb; k++) {
        for (int i = 0; i < 32; i++) b[k].q[i] = (int8_t)(p[2 * nb + 32 * k + i] ^ 0x80);
        memcpy(&b[k].d, p + 2 * k, 2);
      }
      return;
    }
    default: return;
  }
}
