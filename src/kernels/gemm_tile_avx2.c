/* AVX2 + FMA GEMM tile: C[m][n] (+)= alpha * A[m][k] * op(B) with a 6 x 16 register block
 * (12 ymm accumulators = 6 rows x 2 vectors of 8 columns; with 2 B vectors and 1 broadcast that is
 * 15 of the 16 ymm registers). Two FMA pipes with latency 4 need >= 8 independent chains: 12 give
 * slack. Same structure as the AVX-512 file: B is packed per 16-column panel and KC-long chunk of
 * k into a zero-padded stack buffer Bp[KC][16] (8 x 8 in-register transposes for the NT case), so
 * the micro-kernel always loads full vectors; column remainders only mask the C loads/stores. */
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "kernels/simd_avx2.h" /* ts__mask8 */

#define MR TS__TILE_MR_AVX2
#define NR TS__TILE_NR_AVX2
#define KC TS__TILE_KC

#define ALWAYS_INLINE static inline __attribute__((always_inline))


/* mr x 16 block over kc steps from packed Bp[kc][16]; the C columns valid are given by m0, m1. */
ALWAYS_INLINE void ukr(const int mr, int kc, const float *A, int64_t lda, const float *Bp, float *C,
                       int64_t ldc, __m256 valpha, int acc, int full, __m256i m0, __m256i m1) {
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) c0[r] = c1[r] = _mm256_setzero_ps();
  const float *a0 = A, *a3 = A + 3 * lda;
  for (int p = 0; p < kc; p++) {
    __m256 b0 = _mm256_load_ps(Bp), b1 = _mm256_load_ps(Bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      const float *ar = r < 3 ? a0 + r * lda : a3 + (r - 3) * lda;
      __m256 a = _mm256_broadcast_ss(ar + p);
      c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
    }
    Bp += NR;
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    float *cp = C + r * ldc;
    __m256 o0 = _mm256_mul_ps(c0[r], valpha), o1 = _mm256_mul_ps(c1[r], valpha);
    if (full) {
      if (acc) o0 = _mm256_add_ps(o0, _mm256_loadu_ps(cp)), o1 = _mm256_add_ps(o1, _mm256_loadu_ps(cp + 8));
      _mm256_storeu_ps(cp, o0);
      _mm256_storeu_ps(cp + 8, o1);
    } else {
      if (acc) {
        o0 = _mm256_add_ps(o0, _mm256_maskload_ps(cp, m0));
        o1 = _mm256_add_ps(o1, _mm256_maskload_ps(cp + 8, m1));
      }
      _mm256_maskstore_ps(cp, m0, o0);
      _mm256_maskstore_ps(cp + 8, m1, o1);
    }
  }
}

static void block(int mr, int nr, int kc, const float *A, int64_t lda, const float *Bp, float *C,
                  int64_t ldc, __m256 valpha, int acc) {
  const int full = nr == NR;
  const __m256i m0 = ts__mask8(nr), m1 = ts__mask8(nr - 8);
  switch (mr) {
    case 6: ukr(6, kc, A, lda, Bp, C, ldc, valpha, acc, full, m0, m1); break;
    case 5: ukr(5, kc, A, lda, Bp, C, ldc, valpha, acc, full, m0, m1); break;
    case 4: ukr(4, kc, A, lda, Bp, C, ldc, valpha, acc, full, m0, m1); break;
    case 3: ukr(3, kc, A, lda, Bp, C, ldc, valpha, acc, full, m0, m1); break;
    case 2: ukr(2, kc, A, lda, Bp, C, ldc, valpha, acc, full, m0, m1); break;
    default: ukr(1, kc, A, lda, Bp, C, ldc, valpha, acc, full, m0, m1); break;
  }
}

/* In-place 8 x 8 transpose of r[0..7]. */
static inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  /* per 128-bit lane: u[4q+s] = column (4L + s) of rows 4q..4q+3 */
  for (int i = 0; i < 8; i += 4) {
    u[i + 0] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int s = 0; s < 4; s++) {
    r[s] = _mm256_permute2f128_ps(u[s], u[4 + s], 0x20);
    r[s + 4] = _mm256_permute2f128_ps(u[s], u[4 + s], 0x31);
  }
}

/* Bp[p][jj] = B[jj][p] (B stored [n][k]) for p < kc, jj < nr; zero for jj >= nr. */
static void pack_bt(int kc, int nr, const float *B, int64_t ldb, float *Bp) {
  int p0 = 0;
  for (; p0 + 8 <= kc; p0 += 8)
    for (int j0 = 0; j0 < NR; j0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; i++)
        r[i] = j0 + i < nr ? _mm256_loadu_ps(B + (int64_t)(j0 + i) * ldb + p0) : _mm256_setzero_ps();
      transpose8(r);
      for (int i = 0; i < 8; i++) _mm256_store_ps(Bp + (int64_t)(p0 + i) * NR + j0, r[i]);
    }
  for (; p0 < kc; p0++)
    for (int jj = 0; jj < NR; jj++) Bp[p0 * NR + jj] = jj < nr ? B[(int64_t)jj * ldb + p0] : 0.0f;
}

/* Bp[p][jj] = B[p][jj] (B stored [k][n]) for p < kc, jj < nr; zero for jj >= nr. */
static void pack_bn(int kc, int nr, const float *B, int64_t ldb, float *Bp) {
  const __m256i m0 = ts__mask8(nr), m1 = ts__mask8(nr - 8);
  for (int p = 0; p < kc; p++) {
    const float *b = B + (int64_t)p * ldb;
    if (nr == NR) {
      _mm256_store_ps(Bp + p * NR, _mm256_loadu_ps(b));
      _mm256_store_ps(Bp + p * NR + 8, _mm256_loadu_ps(b + 8));
    } else {
      _mm256_store_ps(Bp + p * NR, _mm256_maskload_ps(b, m0));
      _mm256_store_ps(Bp + p * NR + 8, _mm256_maskload_ps(b + 8, m1));
    }
  }
}

void ts__gemm_tile_avx2(int m, int n, int k, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags) {
  const int trans_b = (flags & TS_TILE_TRANS_B) != 0;
  const __m256 valpha = _mm256_set1_ps(alpha);
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!(flags & TS_TILE_ACCUMULATE))
      for (int i = 0; i < m; i++) memset(C + (int64_t)i * ldc, 0, (size_t)n * sizeof(float));
    return;
  }
  _Alignas(32) float Bp[KC * NR];
  for (int j0 = 0; j0 < n; j0 += NR) {
    const int nr = n - j0 < NR ? n - j0 : NR;
    for (int p0 = 0; p0 < k; p0 += KC) {
      const int kc = k - p0 < KC ? k - p0 : KC;
      const int acc = p0 > 0 || (flags & TS_TILE_ACCUMULATE);
      if (trans_b)
        pack_bt(kc, nr, B + (int64_t)j0 * ldb + p0, ldb, Bp);
      else
        pack_bn(kc, nr, B + (int64_t)p0 * ldb + j0, ldb, Bp);
      for (int i0 = 0; i0 < m; i0 += MR) {
        const int mr = m - i0 < MR ? m - i0 : MR;
        block(mr, nr, kc, A + (int64_t)i0 * lda + p0, lda, Bp, C + (int64_t)i0 * ldc + j0, ldc, valpha,
              acc);
      }
    }
  }
}
