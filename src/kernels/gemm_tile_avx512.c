/* AVX-512 GEMM tile: C[m][n] (+)= alpha * A[m][k] * op(B) with an 8 x 32 register block
 * (16 zmm accumulators = 8 rows x 2 vectors of 16 columns).
 *
 * Why 8 x 32: on Zen 4 a zmm FMA issues once per cycle (two 256-bit pipes, latency 4), so 16
 * independent accumulators hide the latency with room to spare, the per-k-step load traffic (2 B
 * vectors + 8 broadcasts of A for 16 FMAs) stays under the load ports' limit, and 8 / 32 divide
 * the tile sizes attention and convolution use (64, 128, head dims 64/128). Column remainders use
 * masked loads/stores; row remainders use the same kernel instantiated for 1..7 rows. Taller
 * blocks (10, 12, 14 rows x 32) measured 2-2.5x slower with this code: the compiler then spills.
 *
 * B is packed per 32-column panel and KC-long chunk of k into a stack buffer Bp[KC][32] (zero
 * padded past n): that turns the NT case (B stored [n][k]) into the NN case via 16 x 16 in-register
 * transposes, and for NN it removes the cache-set conflicts a large ldb (e.g. 2048 floats = 8 KiB,
 * every row in one L1 set) would cause. Packing is skipped for NN when the tile has a single row
 * block, where it cannot pay off. */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"

#define MR TS__TILE_MR_AVX512
#define NR TS__TILE_NR_AVX512
#define NV (NR / 16)
#define KC TS__TILE_KC

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* mr x (nv vectors) block over kc steps. B rows are ldb apart; the last vector uses `mask`.
 * mode bit 0: accumulate into C. */
ALWAYS_INLINE void ukr(const int mr, const int nv, int kc, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float *C, int64_t ldc, __m512 valpha, int acc,
                       __mmask16 mask) {
  __m512 c[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) c[r][v] = _mm512_setzero_ps();

  const float *a0 = A, *a4 = A + 4 * lda;
  for (int p = 0; p < kc; p++) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
      b[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(mask, B + 16 * v) : _mm512_loadu_ps(B + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      /* rows 0..3 and 4..7 from two bases keep every address a base + (0..3) * lda form */
      const float *ar = r < 4 ? a0 + r * lda : a4 + (r - 4) * lda;
      __m512 a = _mm512_set1_ps(ar[p]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);
    }
    B += ldb;
  }

#pragma GCC unroll 8
  for (int r = 0; r < mr; r++) {
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      float *cp = C + r * ldc + 16 * v;
      __mmask16 mm = v == nv - 1 ? mask : (__mmask16)0xFFFF;
      __m512 o = _mm512_mul_ps(c[r][v], valpha);
      if (acc) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(mm, cp));
      _mm512_mask_storeu_ps(cp, mm, o);
    }
  }
}

/* Row-remainder dispatch to a constant mr so each block keeps its accumulators in registers. */
#define UKR_ROWS(nv_)                                                                    \
  switch (mr) {                                                                          \
    case 8: ukr(8, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    case 7: ukr(7, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    case 6: ukr(6, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    case 5: ukr(5, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    case 4: ukr(4, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    case 3: ukr(3, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    case 2: ukr(2, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;           \
    default: ukr(1, nv_, kc, A, lda, B, ldb, C, ldc, valpha, acc, mask); break;          \
  }

static void block(int mr, int nr, int kc, const float *A, int64_t lda, const float *B, int64_t ldb,
                  float *C, int64_t ldc, __m512 valpha, int acc) {
  if (nr > 16) {
    __mmask16 mask = (__mmask16)((1u << (nr - 16)) - 1u);
    if (nr == 32) mask = 0xFFFF;
    UKR_ROWS(2)
  } else {
    __mmask16 mask = (__mmask16)((1u << nr) - 1u);
    if (nr == 16) mask = 0xFFFF;
    UKR_ROWS(1)
  }
}
_Static_assert(NV == 2, "block() handles 1 or 2 vectors per row");

/* Bp[p][jj] = B[jj][p] for p < kc, jj < nr (B stored [n][k], rows ldb apart); zero for jj >= nr. */
static void pack_bt(int kc, int nr, const float *B, int64_t ldb, float *Bp) {
  for (int p0 = 0; p0 < kc; p0 += 16) {
    int pl = kc - p0 < 16 ? kc - p0 : 16;
    __mmask16 pm = (__mmask16)(pl == 16 ? 0xFFFF : (1u << pl) - 1u);
    for (int j0 = 0; j0 < NR; j0 += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; i++)
        r[i] = j0 + i < nr ? _mm512_maskz_loadu_ps(pm, B + (int64_t)(j0 + i) * ldb + p0)
                           : _mm512_setzero_ps();
      ts__transpose16(r);
      for (int i = 0; i < pl; i++) _mm512_store_ps(Bp + (int64_t)(p0 + i) * NR + j0, r[i]);
    }
  }
}

/* Bp[p][jj] = B[p][jj] for p < kc, jj < nr (B stored [k][n]); zero for jj >= nr. */
static void pack_bn(int kc, int nr, const float *B, int64_t ldb, float *Bp) {
  __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1u);
  __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (1u << (nr - 16)) - 1u);
  for (int p = 0; p < kc; p++) {
    const float *b = B + (int64_t)p * ldb;
    _mm512_store_ps(Bp + p * NR, _mm512_maskz_loadu_ps(m0, b));
    _mm512_store_ps(Bp + p * NR + 16, _mm512_maskz_loadu_ps(m1, b + 16));
  }
}

void ts__gemm_tile_avx512(int m, int n, int k, float alpha, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags) {
  const int trans_b = (flags & TS_TILE_TRANS_B) != 0;
  const __m512 valpha = _mm512_set1_ps(alpha);
  if (m <= 0 || n <= 0) return;
  if (k <= 0) { /* empty sum: C = 0, or unchanged when accumulating */
    if (!(flags & TS_TILE_ACCUMULATE))
      for (int i = 0; i < m; i++) memset(C + (int64_t)i * ldc, 0, (size_t)n * sizeof(float));
    return;
  }
  _Alignas(64) float Bp[KC * NR];
  const int pack = trans_b || m > MR;
  for (int j0 = 0; j0 < n; j0 += NR) {
    const int nr = n - j0 < NR ? n - j0 : NR;
    for (int p0 = 0; p0 < k; p0 += KC) {
      const int kc = k - p0 < KC ? k - p0 : KC;
      const int acc = p0 > 0 || (flags & TS_TILE_ACCUMULATE);
      const float *bp;
      int64_t ldbp;
      if (trans_b) {
        pack_bt(kc, nr, B + (int64_t)j0 * ldb + p0, ldb, Bp);
        bp = Bp, ldbp = NR;
      } else if (pack) {
        pack_bn(kc, nr, B + (int64_t)p0 * ldb + j0, ldb, Bp);
        bp = Bp, ldbp = NR;
      } else {
        bp = B + (int64_t)p0 * ldb + j0, ldbp = ldb;
      }
      for (int i0 = 0; i0 < m; i0 += MR) {
        const int mr = m - i0 < MR ? m - i0 : MR;
        block(mr, nr, kc, A + (int64_t)i0 * lda + p0, lda, bp, ldbp, C + (int64_t)i0 * ldc + j0,
              ldc, valpha, acc);
      }
    }
  }
}
