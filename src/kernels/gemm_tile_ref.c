/* Scalar reference GEMM tile and sgemm: plain loops accumulating in double, so the optimized
 * variants can be checked against an answer whose own rounding error is negligible (one final
 * rounding to float). */
#include <omp.h>
#include <string.h>

#include "kernels/kernels_internal.h"

void ts__gemm_tile_ref(int m, int n, int k, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags) {
  const int trans_b = (flags & TS_TILE_TRANS_B) != 0, acc = (flags & TS_TILE_ACCUMULATE) != 0;
  for (int i = 0; i < m; i++) {
    const float *a = A + (int64_t)i * lda;
    float *c = C + (int64_t)i * ldc;
    for (int j = 0; j < n; j++) {
      double s = 0;
      if (trans_b) {
        const float *b = B + (int64_t)j * ldb;
        for (int p = 0; p < k; p++) s += (double)a[p] * b[p];
      } else {
        for (int p = 0; p < k; p++) s += (double)a[p] * B[(int64_t)p * ldb + j];
      }
      s *= alpha;
      if (acc) s += c[j];
      c[j] = (float)s;
    }
  }
}

void ts__sgemm_ref(int nthreads, ts_trans transA, ts_trans transB, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc) {
  /* op(A)[i][p] = transA ? A[p][i] : A[i][p]; op(B)[p][j] = transB ? B[j][p] : B[p][j]. */
  const int64_t sai = transA ? 1 : lda, sap = transA ? lda : 1;
  const int64_t sbp = transB ? 1 : ldb, sbj = transB ? ldb : 1;
#pragma omp parallel for num_threads(nthreads) schedule(static) if (nthreads > 1 && M > 1)
  for (int64_t i = 0; i < M; i++) {
    float *c = C + i * ldc;
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      if (alpha != 0.0f)
        for (int64_t p = 0; p < K; p++) s += (double)A[i * sai + p * sap] * B[p * sbp + j * sbj];
      s *= alpha;
      /* beta == 0: C is output only (BLAS convention), never read */
      if (beta != 0.0f) s += (double)beta * c[j];
      c[j] = (float)s;
    }
  }
}
