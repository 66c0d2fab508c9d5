/* AVX-512 level of the Q5_0 and K-quant row dots: llama.cpp's AVX-512 build runs the same 256-bit
 * code for them (ggml's x86 ggml_vec_dot_q5_0_q8_0 and ggml_vec_dot_q6_K_q8_K have no AVX-512
 * branch; its repacked Q4_K gemv is AVX2 only and its AVX-512 gemm keeps the per-output fma of
 * quant_internal.h), so a row dot is 256 bits wide by definition and this level runs the AVX2
 * kernels (as quant_avx512.c does for Q4_0). */
#include "llm/quant_internal.h"

float ts__dot_q5_0_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q5_0_avx2(n, row, x, xq);
}
float ts__dot_q4_k_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q4_k_avx2(n, row, x, xq);
}
float ts__dot_q6_k_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q6_k_avx2(n, row, x, xq);
}
float ts__dot_q4_k4_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q4_k4_avx2(n, row, x, xq);
}
float ts__dot_q6_k_t_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q6_k_t_avx2(n, row, x, xq);
}
