/* Internal entry points of the kernels room: one unchecked function per family and ISA, and the
 * dispatch table that the public wrappers (kernels_api.c, sgemm.c) call through.
 *
 * The public functions validate their arguments and then call these; the internal ones assume
 * valid arguments (sizes >= 0, leading dimensions >= row length, non-NULL where read/written).
 * Tests call each variant directly; an *_avx2 / *_avx512 function may only run when
 * ts_isa_supported() reports that level (it is compiled with that ISA's flags). */
#ifndef TS_KERNELS_INTERNAL_H
#define TS_KERNELS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "tessera/kernels.h"

/* ---- per-family signatures ------------------------------------------------------------- */

/* C[m][n] (+)= alpha * A[m][k] * op(B); flags: TS_TILE_ACCUMULATE | TS_TILE_TRANS_B. */
typedef void (*ts__gemm_tile_fn)(int m, int n, int k, float alpha, const float *A, int64_t lda,
                                 const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags);
typedef void (*ts__softmax_fn)(int64_t rows, int64_t n, const float *x, int64_t ldx, float *y,
                               int64_t ldy);
typedef void (*ts__act_fn)(ts_act act, int64_t rows, int64_t n, const float *x, int64_t ldx, float *y,
                           int64_t ldy);
typedef void (*ts__vexp_fn)(int64_t n, const float *x, float *y);
typedef void (*ts__layernorm_fn)(int64_t rows, int64_t n, const float *x, int64_t ldx,
                                 const float *gamma, const float *beta, float eps, float *y,
                                 int64_t ldy);
typedef void (*ts__rmsnorm_fn)(int64_t rows, int64_t n, const float *x, int64_t ldx,
                               const float *gamma, float eps, float *y, int64_t ldy);

#define TS__DECLARE_VARIANT(sfx)                                                                  \
  void ts__gemm_tile_##sfx(int m, int n, int k, float alpha, const float *A, int64_t lda,         \
                           const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags);  \
  void ts__softmax_rows_##sfx(int64_t rows, int64_t n, const float *x, int64_t ldx, float *y,     \
                              int64_t ldy);                                                       \
  void ts__act_rows_##sfx(ts_act act, int64_t rows, int64_t n, const float *x, int64_t ldx,       \
                          float *y, int64_t ldy);                                                 \
  void ts__vexp_##sfx(int64_t n, const float *x, float *y);                                       \
  void ts__layernorm_rows_##sfx(int64_t rows, int64_t n, const float *x, int64_t ldx,             \
                                const float *gamma, const float *beta, float eps, float *y,       \
                                int64_t ldy);                                                     \
  void ts__rmsnorm_rows_##sfx(int64_t rows, int64_t n, const float *x, int64_t ldx,               \
                              const float *gamma, float eps, float *y, int64_t ldy);

/* Scalar references (double accumulation, libm functions): always compiled, also the
 * TESSERA_REF=1 / scalar-ISA path. */
TS__DECLARE_VARIANT(ref)
/* AVX2 + FMA (8 lanes) and AVX-512 (16 lanes). */
TS__DECLARE_VARIANT(avx2)
TS__DECLARE_VARIANT(avx512)

/* Reference sgemm: row-major BLAS semantics, double accumulation, rows split over nthreads. */
void ts__sgemm_ref(int nthreads, ts_trans transA, ts_trans transB, int64_t M, int64_t N, int64_t K,
                   float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc);

/* ---- dispatch -------------------------------------------------------------------------- */

typedef struct ts__kernel_table {
  ts_isa isa;
  ts__gemm_tile_fn gemm_tile;
  ts__softmax_fn softmax_rows;
  ts__act_fn act_rows;
  ts__vexp_fn vexp;
  ts__layernorm_fn layernorm_rows;
  ts__rmsnorm_fn rmsnorm_rows;
} ts__kernel_table;

/* The room's variants (scalar, AVX2, AVX-512) in the core dispatcher (kernels_api.c). */
extern ts__dispatch ts__kernels_dispatch;
/* The active table (TESSERA_ISA / TESSERA_REF apply), and the best table of an ISA family that
 * this CPU runs (for tests and benches). */
const ts__kernel_table *ts__kernels(void);
const ts__kernel_table *ts__kernels_for(ts_isa isa);

/* Register block of each tile micro-kernel (rows x columns), for benches and docs. */
#define TS__TILE_MR_AVX512 8
#define TS__TILE_NR_AVX512 32
#define TS__TILE_MR_AVX2 6
#define TS__TILE_NR_AVX2 16
/* k is processed in chunks of this many: the packed B panel (KC x NR floats, 32 KiB for AVX-512,
 * 16 KiB for AVX2) lives on the stack and in L1/L2 while every row block of the tile streams past
 * it. On Zen 4, 256 measured as fast as or faster than 128 (in-cache tiles and 2048^3 blocking). */
#define TS__TILE_KC 256

/* Caps oneDNN at AVX2 when the kernels room runs AVX2 on a CPU with more (TESSERA_ISA=avx2), once
 * per process: every oneDNN user calls it before its first oneDNN call (sgemm.c). */
void ts__dnnl_cap(void);

#endif
