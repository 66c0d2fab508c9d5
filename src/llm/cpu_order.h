/* The fp32 operation orders of llama.cpp's CPU backend (ggml, AVX-512 build), written out in scalar
 * form: the references of the kernels that reproduce them. Matching them bit for bit is what makes
 * tessera's logits equal llama.cpp's and its greedy generations identical (a one-ulp difference
 * anywhere flips an int8 activation rounding now and then, and generations drift apart from there).
 * Each order was confirmed against tensors dumped from llama-cpp-python 0.3.36 (see
 * bench/peers/llm_llamacpp.py and docs/notes/BENCHMARKS.md); the constants of exp are ggml's published
 * polynomial (numbers, not code).
 *
 *   hsum8     block-type row dot (Q4_0 / Q4_1 / Q8_0 x Q8 activations): 8 fp32 lanes, lane g holding
 *             the exact integer sum of elements 4g..4g+3 of each block, accumulated block after block
 *             with one fma by d_w d_x; then ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) (+ the Q4_1 offset
 *             sum m_w s_x, added block after block in fp32)
 *   sum16     a 16-lane fp32 vector summed as gcc's _mm512_reduce_add_ps does:
 *             t_i = v_i + v_(i+8); u_i = t_i + t_(i+4); (u0+u2) + (u1+u3)
 *   dot_f16_one   fp16 x fp16 dot of one query (decode: ggml_vec_dot_f16): per 64-element step four
 *             16-lane accumulators (elements 16j+l into accumulator j, lane l), fma; then
 *             (a0+a2)+(a1+a3) lane-wise, sum16; a tail below 64 in double
 *   dot_f16_many  the same dot inside a batch of >= 2 queries (prefill: llamafile's tinyBLAS): one
 *             16-lane accumulator, element i into lane i % 16 in order, fma; then sum16 (n % 16 == 0;
 *             otherwise llama.cpp falls back to dot_f16_one)
 *   vexpf     exp by ggml's AVX-512 routine: range reduction by 2^n, degree-5 polynomial, scalef;
 *             0 below -103.97, inf above 88.38 (|n| > 192)
 *
 * llama.cpp built for AVX2 (+FMA, F16C; no AVX-512) keeps the block-type row dots (hsum8: its
 * AVX-512 build runs the same 256-bit code for them) and RMSNorm, and differs in the rest, with
 * 8-lane vectors (confirmed against llama-cpp-python 0.3.36 built with AVX-512 off, see
 * tests/test_llm_model.c):
 *   dot_f16_one8  per 32-element step four 8-lane accumulators (element 8j+l into accumulator j,
 *             lane l), fma; then (a0+a2)+(a1+a3) lane-wise and hadd8; a tail below 32 in double
 *   hadd8     an 8-lane vector summed as _mm_hadd_ps twice does: t_i = v_i + v_(i+4);
 *             (t0+t1) + (t2+t3)
 *   dot_f16_many8  tinyBLAS with 8-lane vectors: one accumulator, element i into lane i % 8, fma;
 *             then hsum8 (n % 8 == 0; otherwise dot_f16_one8)
 *   softmax   exp per 8 keys, each group's hsum8 added to a double
 *   vexpf8    exp by ggml's AVX2 routine: the same reduction and polynomial without its last
 *             "+ 1", then k (1 + j) as fma(j, k, k) with k = 2^n built in the exponent bits; for
 *             |n| > 126 two scale factors s1, s2 (0 or inf past |n| > 192)
 *   silu, swiglu  with vexpf8 in groups of 8 (the C library's expf for the last n % 8)
 */
#ifndef TS_LLM_CPU_ORDER_H
#define TS_LLM_CPU_ORDER_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ts__hsum8(const float a[8]) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static inline float ts__sum16(const float v[16]) {
  float t[8], u[4];
  for (int i = 0; i < 8; i++) t[i] = v[i] + v[i + 8];
  for (int i = 0; i < 4; i++) u[i] = t[i] + t[i + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

/* One lane of ggml's AVX-512 exp (fmaf is exact in every build; the AVX-512 form is the same
 * operations on 16 lanes). */
static inline float ts__vexpf(float x) {
  const float r = 0x1.8p23f;
  const float z = fmaf(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                       fmaf(0x1.ffffecp-1f, b, 1.0f));
  if (n != n) return n;
  if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  return ldexpf(j, (int)n); /* scalef: j 2^n, n integral here */
}

/* silu(x) = x / (1 + exp(-x)) with the vector exp (ggml_v_silu). */
static inline float ts__vsilu(float x) { return x / (1.0f + ts__vexpf(0.0f - x)); }

static inline float ts__hadd8(const float v[8]) {
  float t[4];
  for (int i = 0; i < 4; i++) t[i] = v[i] + v[i + 4];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

static inline float ts__f32_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* One lane of ggml's AVX2 exp (vexpf8 above). */
static inline float ts__vexpf8(float x) {
  const float r = 0x1.8p23f;
  const float z = fmaf(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
  uint32_t zb;
  memcpy(&zb, &z, 4);
  const uint32_t e = zb << 23;
  const float k = ts__f32_bits(e + 0x3f800000u);
  const float u = b * b;
  const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                       0x1.ffffecp-1f * b);
  if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k); /* NaN too */
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = ts__f32_bits(g + 0x7f000000u), s2 = ts__f32_bits(e - g);
  if (fabsf(n) > 192.0f) return s1 * s1;
  return fmaf(s2, j, s2) * s1;
}

/* silu with the AVX2 vector exp. */
static inline float ts__vsilu8(float x) { return x / (1.0f + ts__vexpf8(0.0f - x)); }

#endif
