/* ts_sgemm: argument checks, then oneDNN's dnnl_sgemm (or the double-accumulating reference when
 * the kernel tables resolved to the scalar level: TESSERA_REF=1 or TESSERA_ISA=scalar).
 *
 * Threads: this oneDNN build uses the OpenMP runtime (DNNL_CPU_RUNTIME == OMP), and dnnl_sgemm
 * takes its thread count from omp_get_max_threads() of the calling thread. So we set the calling
 * thread's OpenMP nthreads ICV to the context's count with omp_set_num_threads() for the call and
 * restore the previous value after: the ICV is per thread (per task), so other threads' settings
 * are not disturbed. Called from inside an active OpenMP parallel region, oneDNN runs the GEMM on
 * the calling thread (it does not nest), whatever the context says.
 * TESSERA_ISA=avx2 caps oneDNN's own JIT dispatch too (ts__dnnl_cap: dnnl_set_max_cpu_isa before
 * the first oneDNN call of every user in the library, ts_sgemm and the conv and gconv baselines;
 * oneDNN honours it only before it has generated any kernel, and DNNL_MAX_CPU_ISA still applies),
 * so the peer is capped as tessera is. */
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "kernels/kernels_internal.h"

static pthread_once_t g_dnnl_cap_once = PTHREAD_ONCE_INIT;
static void dnnl_cap(void) {
  if (ts_kernels_isa() == TS_ISA_AVX2 && ts_isa_supported() > TS_ISA_AVX2) (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
}

void ts__dnnl_cap(void) { pthread_once(&g_dnnl_cap_once, dnnl_cap); }

static ts_status check_ld(const char *what, int64_t ld, int64_t need, const char *shape) {
  int64_t min = need > 1 ? need : 1;
  if (ld < min)
    return ts_error(TS_ERR_INVALID_ARG, "ts_sgemm: %s=%lld is too small: the matrix is stored %s, so it must be >= %lld",
                    what, (long long)ld, shape, (long long)min);
  return TS_OK;
}

/* C = beta * C for the cases with no product term (K == 0 or alpha == 0); beta == 0 writes 0. */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *c = C + i * ldc;
    if (beta == 0.0f)
      memset(c, 0, (size_t)N * sizeof(float));
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; j++) c[j] *= beta;
  }
}

ts_status ts_sgemm(ts_context *ctx, ts_trans transA, ts_trans transB, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc) {
  if (transA != TS_NO_TRANS && transA != TS_TRANS)
    return ts_error(TS_ERR_INVALID_ARG, "ts_sgemm: transA=%d is neither TS_NO_TRANS nor TS_TRANS", (int)transA);
  if (transB != TS_NO_TRANS && transB != TS_TRANS)
    return ts_error(TS_ERR_INVALID_ARG, "ts_sgemm: transB=%d is neither TS_NO_TRANS nor TS_TRANS", (int)transB);
  if (M < 0 || N < 0 || K < 0)
    return ts_error(TS_ERR_INVALID_ARG, "ts_sgemm: negative size M=%lld N=%lld K=%lld", (long long)M, (long long)N, (long long)K);
  TS_TRY(check_ld("lda", lda, transA ? M : K, transA ? "K x M (transposed)" : "M x K"));
  TS_TRY(check_ld("ldb", ldb, transB ? K : N, transB ? "N x K (transposed)" : "K x N"));
  TS_TRY(check_ld("ldc", ldc, N, "M x N"));
  if (M == 0 || N == 0) return TS_OK;
  if (!C) return ts_error(TS_ERR_INVALID_ARG, "ts_sgemm: C is NULL");
  /* the farthest element touched must be addressable: (rows - 1) * ld + cols */
  int64_t span;
  if (__builtin_mul_overflow(M - 1, ldc, &span) || __builtin_mul_overflow(transA ? K : M, lda, &span) ||
      __builtin_mul_overflow(transB ? N : K, ldb, &span))
    return ts_error(TS_ERR_OVERFLOW, "ts_sgemm: M=%lld N=%lld K=%lld with lda=%lld ldb=%lld ldc=%lld overflows an index",
                    (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb, (long long)ldc);
  if (K == 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    return TS_OK;
  }
  if (!A || !B) return ts_error(TS_ERR_INVALID_ARG, "ts_sgemm: %s is NULL", !A ? "A" : "B");

  const int nthreads = ts_context_threads(ctx);
  if (ts__kernels()->isa == TS_ISA_SCALAR) {
    ts__sgemm_ref(nthreads, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return TS_OK;
  }
  ts__dnnl_cap();
  const int prev = omp_get_max_threads();
  omp_set_num_threads(nthreads);
  dnnl_status_t st = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                beta, C, ldc);
  omp_set_num_threads(prev);
  if (st != dnnl_success)
    return ts_error(TS_ERR_INTERNAL, "ts_sgemm: dnnl_sgemm(M=%lld N=%lld K=%lld) failed with oneDNN status %d",
                    (long long)M, (long long)N, (long long)K, (int)st);
  return TS_OK;
}
