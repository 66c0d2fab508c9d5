/* The forward pass's element-wise kernels in llama.cpp's orders (RoPE, SwiGLU, RMSNorm: scalar
 * references; SwiGLU has one per build class, cpu_order.h) and the per-ISA table of the non-matmul
 * kernels (ts__llm_ops). */
#include <math.h>
#include <pthread.h>

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

void ts__swiglu_ref8(int64_t n, float *g, const float *u) {
  const int64_t nv = n & ~(int64_t)7;
  for (int64_t i = 0; i < nv; i++) g[i] = ts__vsilu8(g[i]) * u[i];
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

/* ggml's GELU table (llm_internal.h, ts__geglu_ref): entry h = fp16(gelu(fp32 of fp16 h)) with
 * gelu(x) = (1 + tanhf((sqrt(2/pi) x) t)) (0.5 x), t = fma(x, 0.044715 x, 1): the expression as
 * llama-cpp-python 0.3.36's gcc build of ggml_cpu_init computes it (its disassembly on the AVX2
 * machine, 2026-12-07: 0.044715 x x + 1 contracted into one fma, the other products rounded),
 * with the C library's tanhf as it calls it. Filled once per process. */
static uint16_t g_gelu[1 << 16];
static pthread_once_t g_gelu_once = PTHREAD_ONCE_INIT;

static void gelu_init(void) {
  for (int h = 0; h < (1 << 16); h++) {
    const float x = ts_f16_to_f32((uint16_t)h);
    const float t = fmaf(x, 0.044715f * x, 1.0f);
    const float u = (0.79788456080286535587989211986876f * x) * t;
    const float y = (1.0f + tanhf(u)) * (0.5f * x);
    g_gelu[h] = ts_f32_to_f16(y);
  }
}

void ts__geglu_ref(int64_t n, float *g, const float *u) {
  pthread_once(&g_gelu_once, gelu_init);
  for (int64_t i = 0; i < n; i++) {
    const float x = g[i];
    if (x <= -10.0f) g[i] = 0.0f;
    else if (x >= 10.0f) g[i] = x * u[i];
    else g[i] = ts_f16_to_f32(g_gelu[ts_f32_to_f16(x)]) * u[i];
  }
}

void ts__gelu_ref(int64_t n, float *g) {
  pthread_once(&g_gelu_once, gelu_init);
  for (int64_t i = 0; i < n; i++) {
    const float x = g[i];
    if (x <= -10.0f) g[i] = 0.0f;
    else if (x < 10.0f) g[i] = ts_f16_to_f32(g_gelu[ts_f32_to_f16(x)]);
  }
}

/* Each set names the scalar forms of its order (the tests' reference). The scalar level follows
 * llama.cpp's AVX-512 order, as tessera always has: its logits equal those of llama.cpp on
 * AVX-512 machines wherever it runs (slowly). */
static const ts__llm_ops g_ref = {ts__att_item_ref, ts__rope_ref, ts__swiglu_ref, ts__rmsnorm_ref, ts__f16_ref, &g_ref, 16};
static const ts__llm_ops g_ref8 = {ts__att_item_ref8, ts__rope_ref, ts__swiglu_ref8, ts__rmsnorm_ref, ts__f16_ref, &g_ref8, 8};
static const ts__llm_ops g_avx2 = {ts__att_item_avx2, ts__rope_avx2, ts__swiglu_avx2, ts__rmsnorm_avx2, ts__f16_avx2, &g_ref8, 8};
static const ts__llm_ops g_avx512 = {ts__att_item_avx512, ts__rope_avx512, ts__swiglu_avx512, ts__rmsnorm_avx512,
                                     ts__f16_avx512, &g_ref, 16};
/* AVX2 (+FMA, F16C) follows llama.cpp's AVX2 build, AVX-512 (F/BW/VL/DQ) its AVX-512 build: on
 * each machine the order llama.cpp built for it runs, and TESSERA_ISA=avx2 on an AVX-512 machine
 * gives the bits of llama.cpp built with AVX-512 off. */
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX2, &g_avx2}, {TS__LV_AVX512, &g_avx512}};
ts__dispatch ts__llm_ops_dispatch = TS__DISPATCH("llm_ops", g_variants);

const ts__llm_ops *ts__llm_ops_active(void) { return ts__dispatch_table(&ts__llm_ops_dispatch); }
