/* tessera kernels: dense fp32 GEMM (oneDNN), the register-blocked GEMM tile used inside fused
 * kernels, row softmax, activations, LayerNorm and RMSNorm.
 *
 * All matrices are row-major fp32 with a leading dimension (elements between consecutive rows),
 * so every call also works on a sub-block of a larger matrix.
 *
 * Dispatch: each family has a scalar reference and AVX2 / AVX-512 variants; the variant is chosen
 * once per process from ts_isa_active() (TESSERA_REF=1 forces the references, TESSERA_ISA caps the
 * level). ts_kernels_isa() says which level is in use.
 *
 * Threads: ts_sgemm uses the context's thread count. Every other call here is single-threaded on
 * purpose: they are building blocks that fused kernels call from inside their own parallel loops. */
#ifndef TESSERA_KERNELS_H
#define TESSERA_KERNELS_H

#include <stdint.h>

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ISA level the kernel tables were resolved to (same as ts_isa_active()). */
ts_isa ts_kernels_isa(void);

/* ---- dense GEMM ------------------------------------------------------------------------ */

typedef enum ts_trans { TS_NO_TRANS = 0, TS_TRANS = 1 } ts_trans;

/* C[M][N] = alpha * op(A)[M][K] * op(B)[K][N] + beta * C, row-major (BLAS semantics).
 * op(A) = A (stored M x K, lda >= K) or A^T (stored K x M, lda >= M); likewise B (K x N, ldb >= N,
 * or N x K, ldb >= K); ldc >= N. Leading dimensions must be >= 1.
 * beta == 0 overwrites C without reading it (NaN/garbage in C does not propagate).
 * K == 0 or alpha == 0 gives C = beta * C (C = 0 when beta == 0); M == 0 or N == 0 does nothing.
 * Runs oneDNN's dnnl_sgemm with ctx's thread count (ctx NULL: ts_default_threads()): oneDNN
 * runs on OpenMP here, so the calling thread's omp_set_num_threads value is set for the call and
 * restored after (inside an active parallel region oneDNN runs on the calling thread alone).
 * Under TESSERA_REF=1 (or TESSERA_ISA=scalar): a double-accumulating reference, parallel over rows.
 * Errors: TS_ERR_INVALID_ARG for a negative size, a too-small leading dimension, a bad trans
 * value or a NULL matrix that would be read; TS_ERR_OVERFLOW when an index would overflow;
 * TS_ERR_INTERNAL if oneDNN reports failure. */
ts_status ts_sgemm(ts_context *ctx, ts_trans transA, ts_trans transB, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc);

/* ---- GEMM tile (building block of fused kernels) -------------------------------------- */

/* Flags for ts_gemm_tile (or them together). */
enum {
  TS_TILE_OVERWRITE = 0,  /* C = alpha * A * op(B)        (C is never read)            */
  TS_TILE_ACCUMULATE = 1, /* C = alpha * A * op(B) + C                                 */
  TS_TILE_TRANS_B = 2,    /* op(B) = B^T with B stored [n][k] (ldb >= k), as Q*K^T uses */
};

/* C[m][n] (+)= alpha * A[m][k] * op(B); A: [m][k] with lda >= k; B: [k][n] with ldb >= n, or with
 * TS_TILE_TRANS_B [n][k] with ldb >= k; C: [m][n] with ldc >= n. Any m, n, k >= 0 (k == 0 gives
 * C = 0, or leaves C as it is when accumulating). Meant for in-cache tiles (tens to a few hundred
 * rows/cols); it loops a register-blocked micro-kernel (AVX-512: 8 rows x 32 columns, AVX2: 6 x 16)
 * over the tile with masked column edges, packing each B panel (k chunk of 256 x the block width,
 * transposed for TS_TILE_TRANS_B) into a stack buffer (32 KiB for AVX-512, 16 KiB for AVX2): no
 * heap memory, no workspace to pass, single-threaded, reentrant (call it from each thread of a
 * parallel loop). C is written, never read, without TS_TILE_ACCUMULATE (NaN there does not
 * propagate); alpha == 0 still multiplies (0 * inf or NaN in A/B gives NaN, unlike ts_sgemm).
 * A and B must not overlap C.
 * Errors: TS_ERR_INVALID_ARG for negative sizes, small leading dimensions, NULL pointers that would
 * be read or written, unknown flag bits, or m/n/k above 2^30. */
ts_status ts_gemm_tile(int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags);

/* ---- row softmax ----------------------------------------------------------------------- */

/* For each of `rows` rows of length n: y = exp(x - max(x)) / sum(exp(x - max(x))).
 * x: [rows][ldx], y: [rows][ldy], ldx, ldy >= n. In place when y == x and ldy == ldx; otherwise x
 * and y must not overlap. A row whose entries are all -inf ("fully masked") gives all zeros, not
 * NaN; -inf entries in other rows give exactly 0. NaN or +inf in a row makes that row NaN.
 * rows == 0 or n == 0 does nothing. Vector variants: relative error per element <=
 * (16 + n/8 + |x_i - max|) u, u = 2^-24 (exp, the rounding of x_i - max, the fp32 sum). */
ts_status ts_softmax_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, float *y, int64_t ldy);

/* ---- activations ----------------------------------------------------------------------- */

typedef enum ts_act {
  TS_ACT_NONE = 0,  /* y = x (copy; nothing when in place)                                  */
  TS_ACT_RELU,      /* y = max(x, 0); NaN stays NaN                                         */
  TS_ACT_SILU,      /* y = x * sigmoid(x) = x / (1 + exp(-x))                               */
  TS_ACT_GELU_TANH, /* tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
                       evaluated as x / (1 + exp(-2u)) (the same function, no cancellation) */
  TS_ACT_GELU_ERF,  /* exact form: 0.5 x (1 + erf(x / sqrt(2))) = 0.5 x erfc(-x / sqrt(2))   */
  TS_ACT_TANH,      /* y = tanh(x)                                                           */
  TS_ACT_COUNT
} ts_act;

/* Name ("relu", "silu", "gelu_tanh", "gelu_erf", "tanh", "none") and its parse. */
const char *ts_act_name(ts_act act);
ts_status ts_act_parse(const char *name, ts_act *out);

/* Elementwise activation over `rows` rows of n elements; x: [rows][ldx], y: [rows][ldy],
 * ldx, ldy >= n; in place when y == x and ldy == ldx. ts_activation(TS_ACT_x, -inf) gives the
 * limit (0 for silu/gelu, -1 for tanh), +inf gives +inf (+1 for tanh), NaN gives NaN.
 * Error bounds of the vector variants against double precision, u = 2^-24, checked over dense
 * sweeps in tests/test_kernels.c (the worst measured error in brackets):
 *   tanh       6u |y|                                    [2u]
 *   silu       8u |y|                                    [4.2u]
 *   gelu_tanh  (10 + 3|a|) u |y|, a = 2 sqrt(2/pi)(x + 0.044715 x^3)  [8.3u + ...]
 *   gelu_erf   (12 + x^2/2) u |y|                        [7.8u near 0]
 * plus (2 + |x|) 2^-149 absolute where the result is denormal. The |a| and x^2 terms are the
 * rounding of the exponent argument: they only matter where the output is tiny (x < -3).
 * relu and none are exact. */
ts_status ts_activation(ts_act act, int64_t rows, int64_t n, const float *x, int64_t ldx, float *y,
                        int64_t ldy);

/* y[i] = exp(x[i]) for n contiguous elements (y == x allowed). Vector variants: relative error
 * <= 4u = 2^-22 where the result is a normal float (measured worst 2u); results below FLT_MIN
 * (x < -87.34) come out as gradual denormals (absolute error <= 2^-149), below x = -103.98 as 0;
 * x > 88.72 gives +inf; NaN gives NaN. */
ts_status ts_vexp(int64_t n, const float *x, float *y);

/* ---- normalization over rows ----------------------------------------------------------- */

/* LayerNorm over each row of n: y = (x - mean) / sqrt(var + eps) * gamma + beta, with the biased
 * variance (divide by n). gamma/beta: [n], either may be NULL (= 1 / = 0). eps >= 0 and finite.
 * Rows in place when y == x and ldy == ldx. Vector variants use two passes (mean, then centred
 * sum of squares) so large offsets do not cancel; tolerance vs reference in the tests. */
ts_status ts_layernorm_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *gamma,
                            const float *beta, float eps, float *y, int64_t ldy);

/* RMSNorm over each row of n: y = x / sqrt(mean(x^2) + eps) * gamma; gamma: [n] or NULL (= 1). */
ts_status ts_rmsnorm_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *gamma,
                          float eps, float *y, int64_t ldy);

#ifdef __cplusplus
}
#endif
#endif
