/* AVX-512 partition kernel: rows x 64-column tiles of C = W[rows][K] * B[K][cols], B row k being
 * b + off[k] (gathered input channels and taps, read in place: no gather copy, no packing).
 *
 * Register block: up to 6 rows x 4 zmm (64 columns) = 24 accumulators, 4 B vectors and one
 * broadcast: 29 of the 32 zmm registers. Per k step that is 4 B loads + 6 broadcasts for 24 FMAs,
 * FMA-bound on Zen 4 (one zmm FMA and two loads per cycle). A row block of mb rows needs 4 + mb
 * loads for 4*mb FMAs, so partitions are split into near-equal blocks (8 -> 4 + 4, not 6 + 2).
 * Unlike a GEMM, B is not packed: the B rows are scattered over the input (one input channel or
 * tap each), and a 64-column tile of KC rows (64 KiB) is re-read by every row block of the
 * partition from L1/L2. Columns past the tile's end are masked (loads never touch them). */
#include <immintrin.h>

#include "gconv/gconv_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE void ukr(const int mr, const int nv, int64_t kc, const float *w, const float *b, const int32_t *off,
                       float *const *c, int64_t j, __mmask16 mask, int acc) {
  __m512 a[TS_GCONV_MR][4];
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
      a[r][v] = !acc ? _mm512_setzero_ps()
                     : v == nv - 1 ? _mm512_maskz_loadu_ps(mask, c[r] + j + 16 * v) : _mm512_loadu_ps(c[r] + j + 16 * v);
  }
  for (int64_t k = 0; k < kc; k++) {
    const float *bk = b + off[k] + j;
    __m512 bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) bv[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(mask, bk + 16 * v) : _mm512_loadu_ps(bk + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m512 x = _mm512_set1_ps(w[k * mr + r]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) a[r][v] = _mm512_fmadd_ps(x, bv[v], a[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      if (v == nv - 1) _mm512_mask_storeu_ps(c[r] + j + 16 * v, mask, a[r][v]);
      else _mm512_storeu_ps(c[r] + j + 16 * v, a[r][v]);
    }
  }
}

#define UKR_NV(mr_)                                                   \
  switch (nv) {                                                       \
    case 4: ukr(mr_, 4, kc, w, b, off, c, j, mask, acc); break;       \
    case 3: ukr(mr_, 3, kc, w, b, off, c, j, mask, acc); break;       \
    case 2: ukr(mr_, 2, kc, w, b, off, c, j, mask, acc); break;       \
    default: ukr(mr_, 1, kc, w, b, off, c, j, mask, acc); break;      \
  }

static void block(int mr, int nv, int64_t kc, const float *w, const float *b, const int32_t *off, float *const *c,
                  int64_t j, __mmask16 mask, int acc) {
  switch (mr) {
    case 6: UKR_NV(6) break;
    case 5: UKR_NV(5) break;
    case 4: UKR_NV(4) break;
    case 3: UKR_NV(3) break;
    case 2: UKR_NV(2) break;
    default: UKR_NV(1) break;
  }
}

void ts__gconv_kern_avx512(int rows, int64_t K, const float *wp, const float *b, const int32_t *off, float *const *c,
                           int64_t j0, int64_t j1) {
  const int nb = (rows + TS_GCONV_MR - 1) / TS_GCONV_MR, base = nb ? rows / nb : 0, extra = nb ? rows % nb : 0;
  for (int64_t j = j0; j < j1; j += TS_GCONV_NR) {
    const int width = j1 - j < TS_GCONV_NR ? (int)(j1 - j) : TS_GCONV_NR, nv = (width + 15) / 16;
    const int last = width - 16 * (nv - 1);
    const __mmask16 mask = (__mmask16)(last >= 16 ? 0xFFFF : (1u << last) - 1u);
    if (K == 0) {
      for (int r = 0; r < rows; r++)
        for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(c[r] + j + 16 * v, v == nv - 1 ? mask : 0xFFFF, _mm512_setzero_ps());
      continue;
    }
    for (int64_t k0 = 0; k0 < K; k0 += TS_GCONV_KC) {
      const int64_t kc = K - k0 < TS_GCONV_KC ? K - k0 : TS_GCONV_KC;
      int r0 = 0;
      for (int bi = 0; bi < nb; bi++) {
        const int mb = base + (bi < extra);
        block(mb, nv, kc, wp + (int64_t)r0 * K + k0 * mb, b, off + k0, c + r0, j, mask, k0 > 0);
        r0 += mb;
      }
    }
  }
}
