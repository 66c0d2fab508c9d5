/* The forward pass's element-wise kernels in llama.cpp's order (RoPE, SwiGLU, RMSNorm: scalar
 * references)
 * and the per-ISA table of the non-matmul kernels (ts__llm_ops). */
#include <math.h>

#include "llm/cpu_order.h"
#include "llm/llm_internal.h"

void ts__rope_ref(float *v, const float *cs, int n_rot, int neox) {
  const int half = n_rot / 2, stride = neox ? half : 1, step = neox ? 1 : 2;
  for (int i = 0; i < half; i++) {
    float *a = v + i * step, *b = a + stride;
    const float x0 = *a, x1 = *b, c = cs[2 * i], s = cs[2 * i + 1];
    *a = fmaf(x0, c, -(x1 * s));
    *b = fmaf(x0, s, x1 * c);
  }
}

void ts__swiglu_ref(int64_t n, float *g, const float *u) {
  const int64_t nv = n & ~(int64_t)15;
  for (int64_t i = 0; i < nv; i++) g[i] = ts__vsilu(g[i]) * u[i];
  for (int64_t i = nv; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ts__rmsnorm_ref(int64_t n, const float *x, const float *w, float eps, float *y) {
  double a[16] = {0}, t[8], u[4];
  for (int64_t j = 0; j < n; j++) a[j % 16] += (double)(x[j] * x[j]);
  for (int i = 0; i < 8; i++) t[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; i++) u[i] = t[i] + t[i + 4];
  const float mean = (float)(((u[0] + u[2]) + (u[1] + u[3])) / (double)n);
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int64_t j = 0; j < n; j++) {
    const float v = x[j] * scale;
    y[j] = v * w[j];
  }
}

void ts__f16_ref(int64_t n, const float *x, uint16_t *y) { ts_f32_to_f16_array(x, y, (size_t)n); }

static const ts__llm_ops g_ref = {ts__att_item_ref, ts__rope_ref, ts__swiglu_ref, ts__rmsnorm_ref, ts__f16_ref};
static const ts__llm_ops g_avx512 = {ts__att_item_avx512, ts__rope_avx512, ts__swiglu_avx512, ts__rmsnorm_avx512,
                                     ts__f16_avx512};
/* The AVX-512 ops run where the quant kernels run AVX-512 (VNNI: llm_ops_avx512.c itself needs only
 * F/BW/VL/DQ, but a CPU without VNNI keeps the whole forward pass at the AVX2 matmuls and scalar
 * ops, as it always has); no AVX2 ops. */
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX512_VNNI, &g_avx512}};
ts__dispatch ts__llm_ops_dispatch = TS__DISPATCH("llm_ops", g_variants);

const ts__llm_ops *ts__llm_ops_active(void) { return ts__dispatch_table(&ts__llm_ops_dispatch); }
