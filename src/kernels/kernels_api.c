/* Public entry points of the row kernels and the GEMM tile: argument checks with messages that
 * name the argument and its value, then one call through the dispatch table; the room's variants
 * are registered here with the core dispatcher (core/dispatch.h). */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

#define TS__TABLE(sfx, level)                                                                                 \
  {                                                                                                           \
    level, ts__gemm_tile_##sfx, ts__softmax_rows_##sfx, ts__act_rows_##sfx, ts__vexp_##sfx,                  \
        ts__layernorm_rows_##sfx, ts__rmsnorm_rows_##sfx                                                      \
  }
static const ts__kernel_table g_ref = TS__TABLE(ref, TS_ISA_SCALAR), g_avx2 = TS__TABLE(avx2, TS_ISA_AVX2),
                              g_avx512 = TS__TABLE(avx512, TS_ISA_AVX512);
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX2, &g_avx2}, {TS__LV_AVX512, &g_avx512}};
ts__dispatch ts__kernels_dispatch = TS__DISPATCH("kernels", g_variants);

const ts__kernel_table *ts__kernels(void) { return ts__dispatch_table(&ts__kernels_dispatch); }

const ts__kernel_table *ts__kernels_for(ts_isa isa) {
  return ts__dispatch_for(&ts__kernels_dispatch, ts__level_top(isa), NULL);
}

ts_isa ts_kernels_isa(void) { return ts__kernels()->isa; }

/* rows x n strided block: sizes >= 0, ld >= n (and >= 1), pointers present when touched. */
static ts_status check_rows(const char *fn, int64_t rows, int64_t n, const float *x, int64_t ldx,
                            const float *y, int64_t ldy) {
  if (rows < 0 || n < 0) return ts_error(TS_ERR_INVALID_ARG, "%s: negative size rows=%lld n=%lld", fn, (long long)rows, (long long)n);
  if (ldx < n || ldx < 1) return ts_error(TS_ERR_INVALID_ARG, "%s: ldx=%lld is smaller than n=%lld (or < 1)", fn, (long long)ldx, (long long)n);
  if (ldy < n || ldy < 1) return ts_error(TS_ERR_INVALID_ARG, "%s: ldy=%lld is smaller than n=%lld (or < 1)", fn, (long long)ldy, (long long)n);
  if (rows > 0 && n > 0 && (!x || !y)) return ts_error(TS_ERR_INVALID_ARG, "%s: %s is NULL", fn, !x ? "x" : "y");
  if (x == y && ldx != ldy && rows > 1)
    return ts_error(TS_ERR_INVALID_ARG, "%s: in place (y == x) needs ldy == ldx (got %lld, %lld)", fn, (long long)ldy, (long long)ldx);
  int64_t span;
  if (rows > 0 && __builtin_mul_overflow(rows - 1, ldx > ldy ? ldx : ldy, &span))
    return ts_error(TS_ERR_OVERFLOW, "%s: rows=%lld with leading dimension %lld overflows", fn, (long long)rows, (long long)(ldx > ldy ? ldx : ldy));
  return TS_OK;
}

ts_status ts_softmax_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, float *y, int64_t ldy) {
  TS_TRY(check_rows("ts_softmax_rows", rows, n, x, ldx, y, ldy));
  if (rows && n) ts__kernels()->softmax_rows(rows, n, x, ldx, y, ldy);
  return TS_OK;
}

static const char *const g_act_names[TS_ACT_COUNT] = {"none", "relu", "silu", "gelu_tanh", "gelu_erf", "tanh"};

const char *ts_act_name(ts_act act) {
  return (act >= 0 && act < TS_ACT_COUNT) ? g_act_names[act] : "unknown";
}

ts_status ts_act_parse(const char *name, ts_act *out) {
  if (!name || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_act_parse: NULL argument");
  for (int a = 0; a < TS_ACT_COUNT; a++)
    if (strcmp(name, g_act_names[a]) == 0) {
      *out = (ts_act)a;
      return TS_OK;
    }
  return ts_error(TS_ERR_NOT_FOUND, "unknown activation '%s' (expected none, relu, silu, gelu_tanh, gelu_erf or tanh)", name);
}

ts_status ts_activation(ts_act act, int64_t rows, int64_t n, const float *x, int64_t ldx, float *y, int64_t ldy) {
  if ((int)act < 0 || act >= TS_ACT_COUNT) return ts_error(TS_ERR_INVALID_ARG, "ts_activation: unknown activation %d", (int)act);
  TS_TRY(check_rows("ts_activation", rows, n, x, ldx, y, ldy));
  if (rows && n) ts__kernels()->act_rows(act, rows, n, x, ldx, y, ldy);
  return TS_OK;
}

ts_status ts_vexp(int64_t n, const float *x, float *y) {
  TS_TRY(check_rows("ts_vexp", 1, n, x, n > 0 ? n : 1, y, n > 0 ? n : 1));
  if (n) ts__kernels()->vexp(n, x, y);
  return TS_OK;
}

static ts_status check_eps(const char *fn, float eps) {
  if (!(eps >= 0.0f) || isinf(eps)) return ts_error(TS_ERR_INVALID_ARG, "%s: eps=%g must be finite and >= 0", fn, (double)eps);
  return TS_OK;
}

ts_status ts_layernorm_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *gamma,
                            const float *beta, float eps, float *y, int64_t ldy) {
  TS_TRY(check_rows("ts_layernorm_rows", rows, n, x, ldx, y, ldy));
  TS_TRY(check_eps("ts_layernorm_rows", eps));
  if (rows && n) ts__kernels()->layernorm_rows(rows, n, x, ldx, gamma, beta, eps, y, ldy);
  return TS_OK;
}

ts_status ts_rmsnorm_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *gamma,
                          float eps, float *y, int64_t ldy) {
  TS_TRY(check_rows("ts_rmsnorm_rows", rows, n, x, ldx, y, ldy));
  TS_TRY(check_eps("ts_rmsnorm_rows", eps));
  if (rows && n) ts__kernels()->rmsnorm_rows(rows, n, x, ldx, gamma, eps, y, ldy);
  return TS_OK;
}

ts_status ts_gemm_tile(int64_t m, int64_t n, int64_t k, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float *C, int64_t ldc, unsigned flags) {
  const char *fn = "ts_gemm_tile";
  if (flags & ~(unsigned)(TS_TILE_ACCUMULATE | TS_TILE_TRANS_B))
    return ts_error(TS_ERR_INVALID_ARG, "%s: unknown flag bits 0x%x", fn, flags);
  if (m < 0 || n < 0 || k < 0) return ts_error(TS_ERR_INVALID_ARG, "%s: negative size m=%lld n=%lld k=%lld", fn, (long long)m, (long long)n, (long long)k);
  /* the tile loops count in int: keep every index (and index + block) far from INT32_MAX */
  const int64_t lim = (int64_t)1 << 30;
  if (m > lim || n > lim || k > lim)
    return ts_error(TS_ERR_INVALID_ARG, "%s: m=%lld n=%lld k=%lld exceed the tile limit 2^30", fn, (long long)m, (long long)n, (long long)k);
  const int trans_b = (flags & TS_TILE_TRANS_B) != 0;
  const int64_t bcols = trans_b ? k : n;
  if (lda < k || lda < 1) return ts_error(TS_ERR_INVALID_ARG, "%s: lda=%lld is smaller than k=%lld (or < 1)", fn, (long long)lda, (long long)k);
  if (ldb < bcols || ldb < 1)
    return ts_error(TS_ERR_INVALID_ARG, "%s: ldb=%lld is smaller than %s=%lld (or < 1)", fn, (long long)ldb, trans_b ? "k (B is [n][k])" : "n", (long long)bcols);
  if (ldc < n || ldc < 1) return ts_error(TS_ERR_INVALID_ARG, "%s: ldc=%lld is smaller than n=%lld (or < 1)", fn, (long long)ldc, (long long)n);
  if (m == 0 || n == 0) return TS_OK;
  if (!C) return ts_error(TS_ERR_INVALID_ARG, "%s: C is NULL", fn);
  if (k > 0 && (!A || !B)) return ts_error(TS_ERR_INVALID_ARG, "%s: %s is NULL", fn, !A ? "A" : "B");
  ts__kernels()->gemm_tile((int)m, (int)n, (int)k, alpha, A, lda, B, ldb, C, ldc, flags);
  return TS_OK;
}
