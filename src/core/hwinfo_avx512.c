/* AVX-512 measurement loops for the machine profile (compiled with the AVX-512 flags; called only
 * when ts_cpu() reports AVX-512F with OS support). */
#include <immintrin.h>

#include "core/hwinfo_impl.h"

/* zmm16 = b, zmm17 = c, zmm0..15 the chains: 16 independent FMAs per iteration cover latency (4)
 * x throughput (2/cycle on cores with two 512-bit FMA ports; 1/cycle on Zen 4's split pipes). */
#define FMA(i) "vfmadd213ps %%zmm17, %%zmm16, %%zmm" #i "\n\t"
#define INIT(i) "vmovaps %%zmm17, %%zmm" #i "\n\t"
#define ADD(i, j) "vaddps %%zmm" #j ", %%zmm" #i ", %%zmm" #i "\n\t"

double ts__fma_loop_avx512(int64_t iters) {
  float out[16] __attribute__((aligned(64)));
  const float b = 0.999999f, c = 1e-6f; /* fixed point c / (1 - b) = 1: no overflow, no denormals */
  if (iters <= 0) return 0.0;
  __asm__ volatile(
      "vbroadcastss %[b], %%zmm16\n\t"
      "vbroadcastss %[c], %%zmm17\n\t"
      INIT(0) INIT(1) INIT(2) INIT(3) INIT(4) INIT(5) INIT(6) INIT(7)
      INIT(8) INIT(9) INIT(10) INIT(11) INIT(12) INIT(13) INIT(14) INIT(15)
      ".p2align 5\n"
      "1:\n\t"
      FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7)
      FMA(8) FMA(9) FMA(10) FMA(11) FMA(12) FMA(13) FMA(14) FMA(15)
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      ADD(0, 1) ADD(2, 3) ADD(4, 5) ADD(6, 7) ADD(8, 9) ADD(10, 11) ADD(12, 13) ADD(14, 15)
      ADD(0, 2) ADD(4, 6) ADD(8, 10) ADD(12, 14) ADD(0, 4) ADD(8, 12) ADD(0, 8)
      "vmovups %%zmm0, (%[out])\n\t"
      "vzeroupper\n\t"
      : [n] "+r"(iters)
      : [b] "m"(b), [c] "m"(c), [out] "r"(out)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc", "memory");
  double s = 0;
  for (int i = 0; i < 16; i++) s += out[i];
  return s;
}

float ts__read_sum_avx512(const float *p, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (size_t i = 0; i < n; i += TS__READ_BLOCK) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
    s4 = _mm512_add_ps(s4, _mm512_load_ps(p + i + 64));
    s5 = _mm512_add_ps(s5, _mm512_load_ps(p + i + 80));
    s6 = _mm512_add_ps(s6, _mm512_load_ps(p + i + 96));
    s7 = _mm512_add_ps(s7, _mm512_load_ps(p + i + 112));
  }
  s0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
                     _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7)));
  return _mm512_reduce_add_ps(s0);
}
