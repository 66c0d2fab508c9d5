/* Quant variants and public API: argument checks, the per-ISA tables (registered with the core
 * dispatcher, core/dispatch.h), activation layout, and the OpenMP matvec y = W x. */
#include <string.h>

#include "llm/quant_internal.h"

#define TS__QTABLE(sfx, level, prep, g8, g40, g41)                                              \
  {                                                                                              \
    level, ts__act_quantize_##sfx, ts__dot_f32_##sfx, ts__dot_f16_##sfx, ts__dot_bf16_##sfx,    \
        ts__dot_q8_0_##sfx, ts__dot_q4_0_##sfx, ts__dot_q4_1_##sfx, ts__dot_q5_0_##sfx,          \
        ts__dot_q4_k_##sfx, ts__dot_q6_k_##sfx, ts__dot_q4_k4_##sfx, ts__dot_q6_k_t_##sfx,         \
        ts__act_quantize_k_ref, prep,                                                            \
        g8, g40, g41                                                                             \
  }

/* The scalar level batches through the loop over its dots (ts__quant_gemm_with) on the file's rows;
 * AVX2 and AVX-512 have packed-row GEMM kernels on the same packed layout (quant_pgemm_avx2.c,
 * quant_pgemm_vnni_avx512.c). */
static const ts__quant_table g_ref = TS__QTABLE(ref, TS_ISA_SCALAR, NULL, NULL, NULL, NULL),
                             g_avx2 = TS__QTABLE(avx2, TS_ISA_AVX2, ts__prep_packed_avx2, ts__pgemm_q8_0_avx2,
                                                 ts__pgemm_q4_0_avx2, ts__pgemm_q4_1_avx2),
                             g_avx512 = TS__QTABLE(avx512, TS_ISA_AVX512, ts__prep_packed_avx512, ts__pgemm_q8_0_avx512,
                                                   ts__pgemm_q4_0_avx512, ts__pgemm_q4_1_avx512),
                             /* with GFNI (Ice Lake, Zen 4 and later): the Q4 kernels take their high
                              * nibbles in one instruction */
                             g_avx512_gfni = TS__QTABLE(avx512, TS_ISA_AVX512, ts__prep_packed_avx512, ts__pgemm_q8_0_avx512,
                                                        ts__pgemm_q4_0_avx512_gfni, ts__pgemm_q4_1_avx512_gfni);
/* The AVX-512 kernels need AVX-512 VNNI (vpdpbusd) on top of the level's F/BW/VL/DQ: without it
 * (Skylake-SP) the block types run at the AVX2 level. */
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref},
                                         {TS__LV_AVX2, &g_avx2},
                                         {TS__LV_AVX512_VNNI, &g_avx512},
                                         {TS__LV_AVX512_VNNI_GFNI, &g_avx512_gfni}};
ts__dispatch ts__quant_dispatch = TS__DISPATCH("quant", g_variants);

const ts__quant_table *ts__quant(void) { return ts__dispatch_table(&ts__quant_dispatch); }

const ts__quant_table *ts__quant_for(ts_isa isa) { return ts__dispatch_for(&ts__quant_dispatch, ts__level_top(isa), NULL); }

ts_isa ts_quant_isa(void) { return ts__quant()->isa; }

ts__pgemm_fn ts__quant_pgemm_fn(const ts__quant_table *t, uint32_t type) {
  switch (type) {
    case TS_QT_Q8_0: return t->pgemm_q8_0;
    case TS_QT_Q4_0: return t->pgemm_q4_0;
    case TS_QT_Q4_1: return t->pgemm_q4_1;
    default: return NULL;
  }
}

ts__dot_fn ts__quant_dot_fn(const ts__quant_table *t, uint32_t type) {
  switch (type) {
    case TS_QT_F32: return t->dot_f32;
    case TS_QT_F16: return t->dot_f16;
    case TS_QT_BF16: return t->dot_bf16;
    case TS_QT_Q8_0: return t->dot_q8_0;
    case TS_QT_Q4_0: return t->dot_q4_0;
    case TS_QT_Q4_1: return t->dot_q4_1;
    case TS_QT_Q5_0: return t->dot_q5_0;
    case TS_QT_Q4_K: return t->dot_q4_k;
    case TS_QT_Q6_K: return t->dot_q6_k;
    default: return NULL;
  }
}

static bool is_block(uint32_t type) { return ts__qt_block(type); }

/* Kernels exist for the type and n fits its blocks; row bytes out. */
static ts_status check_row(const char *fn, uint32_t type, int64_t n, size_t *row_bytes) {
  if (!ts_qtype_has_kernels(type))
    return ts_error(TS_ERR_DTYPE, "%s: no kernels for tensor type %s (id %u); supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q4_k, q6_k",
                    fn, ts_qtype_name(type), type);
  ts_status s = ts_qtype_row_bytes(type, n, row_bytes);
  if (s != TS_OK) ts_error_prefix("%s: ", fn);
  return s;
}

ts_status ts_quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
  size_t rb;
  TS_TRY(check_row("ts_quant_dequantize_row", type, n, &rb));
  if (n && (!src || !dst)) return ts_error(TS_ERR_INVALID_ARG, "ts_quant_dequantize_row: NULL buffer");
  ts__dequant_ref(type, src, dst, n);
  return TS_OK;
}

ts_status ts_quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
  size_t rb;
  TS_TRY(check_row("ts_quant_quantize_row", type, n, &rb));
  if (n && (!src || !dst)) return ts_error(TS_ERR_INVALID_ARG, "ts_quant_quantize_row: NULL buffer");
  ts__quantize_ref(type, src, dst, n);
  return TS_OK;
}

/* ---- activation -------------------------------------------------------------------------- */

/* Layout in caller memory, from mem rounded up to 4 bytes (the extra 4 bytes in the size pay for
 * that): d[nb] float, sum[nb] int32, s[nb] float, q[n] int8; when n % 256 == 0 then kd[n/256]
 * float, kbs[n/16] int16, kq[n] int8 (q[n] and the K part keep 4-byte alignment: n % 32 == 0). */
static size_t act_k_bytes(int64_t n) { return n % TS_QKK ? 0 : (size_t)(n / TS_QKK) * 4 + (size_t)(n / 16) * 2 + (size_t)n; }

size_t ts_quant_act_bytes(int64_t n) {
  if (n <= 0 || n % TS_QK || n > INT64_MAX / 4) return 0;
  return (size_t)(n / TS_QK) * 12 + (size_t)n + 4 + act_k_bytes(n);
}

ts_status ts_quant_act_init(ts_quant_act *a, int64_t n, void *mem, size_t bytes) {
  if (!a || !mem) return ts_error(TS_ERR_INVALID_ARG, "ts_quant_act_init: NULL argument");
  if (n <= 0 || n % TS_QK)
    return ts_error(TS_ERR_SHAPE, "ts_quant_act_init: length %lld is not a positive multiple of %d", (long long)n,
                    TS_QK);
  size_t need = ts_quant_act_bytes(n);
  if (bytes < need)
    return ts_error(TS_ERR_INVALID_ARG, "ts_quant_act_init: %zu bytes given, %zu needed for %lld values", bytes,
                    need, (long long)n);
  uintptr_t p = ((uintptr_t)mem + 3) & ~(uintptr_t)3; /* the +4 in the size pays for this */
  size_t nb = (size_t)(n / TS_QK);
  a->n = n;
  a->d = (float *)p;
  a->sum = (int32_t *)(p + 4 * nb);
  a->s = (float *)(p + 8 * nb);
  a->q = (int8_t *)(p + 12 * nb);
  a->kq = NULL;
  a->kd = NULL;
  a->kbs = NULL;
  if (n % TS_QKK == 0) {
    const uintptr_t k = p + 12 * nb + (size_t)n;
    a->kd = (float *)k;
    a->kbs = (int16_t *)(k + 4 * (size_t)(n / TS_QKK));
    a->kq = (int8_t *)(k + 4 * (size_t)(n / TS_QKK) + 2 * (size_t)(n / 16));
  }
  return TS_OK;
}

ts_status ts_quant_act_quantize(ts_quant_act *a, const float *x) {
  if (!a || !x || !a->q || !a->d || !a->sum || !a->s)
    return ts_error(TS_ERR_INVALID_ARG, "ts_quant_act_quantize: NULL argument");
  if (a->n <= 0 || a->n % TS_QK)
    return ts_error(TS_ERR_SHAPE, "ts_quant_act_quantize: length %lld is not a positive multiple of %d",
                    (long long)a->n, TS_QK);
  ts__quant()->act_quantize(a->n, x, a->q, a->d, a->sum, a->s);
  if (a->n % TS_QKK == 0 && a->kq && a->kd && a->kbs) ts__quant()->act_quantize_k(a->n, x, a->kq, a->kd, a->kbs);
  return TS_OK;
}

/* ---- dot and matvec ---------------------------------------------------------------------- */

static ts_status check_inputs(const char *fn, uint32_t type, int64_t n, const float *x, const ts_quant_act *xq) {
  if (is_block(type)) {
    if (!xq || !xq->q || !xq->d || !xq->sum || !xq->s)
      return ts_error(TS_ERR_INVALID_ARG, "%s: %s needs the quantized activation (xq)", fn, ts_qtype_name(type));
    if (ts__qt_kquant(type) && (!xq->kq || !xq->kd || !xq->kbs))
      return ts_error(TS_ERR_INVALID_ARG, "%s: %s needs the activation's Q8_K form (xq->kq, kd, kbs)", fn,
                      ts_qtype_name(type));
    if (xq->n != n)
      return ts_error(TS_ERR_SHAPE, "%s: activation has %lld values, the row %lld", fn, (long long)xq->n,
                      (long long)n);
  } else if (!x && n) {
    return ts_error(TS_ERR_INVALID_ARG, "%s: %s needs x", fn, ts_qtype_name(type));
  }
  return TS_OK;
}

ts_status ts_quant_dot(uint32_t type, const void *row, int64_t n, const float *x, const ts_quant_act *xq,
                       float *out) {
  size_t rb;
  TS_TRY(check_row("ts_quant_dot", type, n, &rb));
  if (!out || (n && !row)) return ts_error(TS_ERR_INVALID_ARG, "ts_quant_dot: NULL argument");
  if (n == 0) {
    *out = 0;
    return TS_OK;
  }
  TS_TRY(check_inputs("ts_quant_dot", type, n, x, xq));
  *out = ts__quant_dot_fn(ts__quant(), type)(n, row, x, xq);
  return TS_OK;
}

/* Below this many weight bytes the fork/join costs more than a second thread saves. */
#define TS__MATVEC_PAR_BYTES (64 * 1024)

ts_status ts_quant_matvec_act(const ts_context *ctx, uint32_t type, const void *W, int64_t rows, int64_t cols,
                              const float *x, const ts_quant_act *xq, float *y) {
  size_t rb, total;
  TS_TRY(check_row("ts_quant_matvec", type, cols, &rb));
  if (rows < 0) return ts_error(TS_ERR_SHAPE, "ts_quant_matvec: negative row count %lld", (long long)rows);
  if (!ts_mul_size(rb, (size_t)rows, &total))
    return ts_error(TS_ERR_OVERFLOW, "ts_quant_matvec: %lld x %lld matrix overflows size_t", (long long)rows,
                    (long long)cols);
  if (rows == 0) return TS_OK;
  if (!y || (total && !W)) return ts_error(TS_ERR_INVALID_ARG, "ts_quant_matvec: NULL argument");
  if (cols == 0) { /* empty rows: y = 0 */
    memset(y, 0, (size_t)rows * sizeof *y);
    return TS_OK;
  }
  TS_TRY(check_inputs("ts_quant_matvec", type, cols, x, xq));
  int nt = ctx ? ts_context_threads(ctx) : ts_default_threads();
  ts__quant_matvec_with(ts__quant(), nt, type, W, rows, cols, x, xq, y);
  return TS_OK;
}

void ts__quant_matvec_with(const ts__quant_table *t, int nt, uint32_t type, const void *W, int64_t rows,
                           int64_t cols, const float *x, const ts_quant_act *xq, float *y) {
  ts__dot_fn f = ts__quant_dot_fn(t, type);
  const uint8_t *w = W;
  size_t rb;
  ts_qtype_row_bytes(type, cols, &rb);
  if (nt < 1 || rb * (size_t)rows < TS__MATVEC_PAR_BYTES) nt = 1;
  if ((int64_t)nt > rows) nt = (int)rows;
  /* contiguous row ranges per thread: each streams its own part of W */
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; r++) y[r] = f(cols, w + (size_t)r * rb, x, xq);
}

/* Activations up to this many values are quantized on the stack. */
#define TS__ACT_STACK 4096

ts_status ts_quant_matvec(const ts_context *ctx, uint32_t type, const void *W, int64_t rows, int64_t cols,
                          const float *x, float *y) {
  if (!is_block(type)) return ts_quant_matvec_act(ctx, type, W, rows, cols, x, NULL, y);
  size_t rb;
  TS_TRY(check_row("ts_quant_matvec", type, cols, &rb));
  if (cols == 0 || rows <= 0) return ts_quant_matvec_act(ctx, type, W, rows, cols, x, NULL, y);
  if (!x) return ts_error(TS_ERR_INVALID_ARG, "ts_quant_matvec: NULL x");
  _Alignas(64) unsigned char stack[TS__ACT_STACK / TS_QK * 12 + TS__ACT_STACK + 4 + TS__ACT_STACK / TS_QKK * 4 +
                                   TS__ACT_STACK / 16 * 2 + TS__ACT_STACK];
  size_t need = ts_quant_act_bytes(cols);
  void *mem = need <= sizeof stack ? (void *)stack : ts_malloc(need);
  if (!mem) return TS_ERR_OOM;
  ts_quant_act a;
  ts_status s = ts_quant_act_init(&a, cols, mem, need);
  if (s == TS_OK) s = ts_quant_act_quantize(&a, x);
  if (s == TS_OK) s = ts_quant_matvec_act(ctx, type, W, rows, cols, x, &a, y);
  if (mem != stack) ts_free(mem);
  return s;
}
