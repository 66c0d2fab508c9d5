/* AVX2 + FMA measurement loops for the machine profile (compiled with the AVX2 flags; called only
 * when ts_cpu() reports AVX2 and FMA with OS support). */
#include <immintrin.h>

#include "core/hwinfo_impl.h"

/* ymm12 = b, ymm13 = c, ymm0..11 the chains (16 ymm registers in all): 12 independent FMAs cover
 * latency 4-5 x 2 FMA ports. */
#define FMA(i) "vfmadd213ps %%ymm13, %%ymm12, %%ymm" #i "\n\t"
#define INIT(i) "vmovaps %%ymm13, %%ymm" #i "\n\t"
#define ADD(i, j) "vaddps %%ymm" #j ", %%ymm" #i ", %%ymm" #i "\n\t"

double ts__fma_loop_avx2(int64_t iters) {
  float out[8] __attribute__((aligned(32)));
  const float b = 0.999999f, c = 1e-6f; /* fixed point c / (1 - b) = 1 */
  if (iters <= 0) return 0.0;
  __asm__ volatile(
      "vbroadcastss %[b], %%ymm12\n\t"
      "vbroadcastss %[c], %%ymm13\n\t"
      INIT(0) INIT(1) INIT(2) INIT(3) INIT(4) INIT(5) INIT(6) INIT(7) INIT(8) INIT(9) INIT(10) INIT(11)
      ".p2align 5\n"
      "1:\n\t"
      FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7) FMA(8) FMA(9) FMA(10) FMA(11)
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      ADD(0, 1) ADD(2, 3) ADD(4, 5) ADD(6, 7) ADD(8, 9) ADD(10, 11)
      ADD(0, 2) ADD(4, 6) ADD(8, 10) ADD(0, 4) ADD(0, 8)
      "vmovups %%ymm0, (%[out])\n\t"
      "vzeroupper\n\t"
      : [n] "+r"(iters)
      : [b] "m"(b), [c] "m"(c), [out] "r"(out)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "cc", "memory");
  double s = 0;
  for (int i = 0; i < 8; i++) s += out[i];
  return s;
}

float ts__read_sum_avx2(const float *p, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (size_t i = 0; i < n; i += TS__READ_BLOCK) {
    /* 128 floats per block: two 32-byte loads per accumulator */
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
    s4 = _mm256_add_ps(s4, _mm256_load_ps(p + i + 32));
    s5 = _mm256_add_ps(s5, _mm256_load_ps(p + i + 40));
    s6 = _mm256_add_ps(s6, _mm256_load_ps(p + i + 48));
    s7 = _mm256_add_ps(s7, _mm256_load_ps(p + i + 56));
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i + 64));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 72));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 80));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 88));
    s4 = _mm256_add_ps(s4, _mm256_load_ps(p + i + 96));
    s5 = _mm256_add_ps(s5, _mm256_load_ps(p + i + 104));
    s6 = _mm256_add_ps(s6, _mm256_load_ps(p + i + 112));
    s7 = _mm256_add_ps(s7, _mm256_load_ps(p + i + 120));
  }
  s0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                     _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7)));
  float out[8];
  _mm256_storeu_ps(out, s0);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
