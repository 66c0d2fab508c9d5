/* Scalar-level measurement loops for the machine profile: SSE2 is the x86-64 baseline that code
 * compiled without ISA flags (the reference kernels) can reach, so it is the "peak" of that level.
 * This file gets no ISA flags. */
#include <emmintrin.h>

#include "core/hwinfo_impl.h"

/* xmm14 = b, xmm15 = c, xmm0..13 the chains (all 16 registers). No FMA instruction here: a = a*b
 * then a += c, 2 flops per lane; 14 chains cover mul+add latency (6-8 cycles) x 2 ports with room. */
#define MUL(i) "mulps %%xmm14, %%xmm" #i "\n\t"
#define ADDC(i) "addps %%xmm15, %%xmm" #i "\n\t"
#define INIT(i) "movaps %%xmm15, %%xmm" #i "\n\t"
#define ADD(i, j) "addps %%xmm" #j ", %%xmm" #i "\n\t"

double ts__fma_loop_sse2(int64_t iters) {
  float out[4] __attribute__((aligned(16)));
  const float b = 0.999999f, c = 1e-6f; /* fixed point c / (1 - b) = 1 */
  if (iters <= 0) return 0.0;
  __asm__ volatile(
      "movss %[b], %%xmm14\n\t"
      "shufps $0, %%xmm14, %%xmm14\n\t"
      "movss %[c], %%xmm15\n\t"
      "shufps $0, %%xmm15, %%xmm15\n\t"
      INIT(0) INIT(1) INIT(2) INIT(3) INIT(4) INIT(5) INIT(6) INIT(7) INIT(8) INIT(9) INIT(10) INIT(11) INIT(12) INIT(13)
      ".p2align 5\n"
      "1:\n\t"
      MUL(0) MUL(1) MUL(2) MUL(3) MUL(4) MUL(5) MUL(6) MUL(7) MUL(8) MUL(9) MUL(10) MUL(11) MUL(12) MUL(13)
      ADDC(0) ADDC(1) ADDC(2) ADDC(3) ADDC(4) ADDC(5) ADDC(6) ADDC(7) ADDC(8) ADDC(9) ADDC(10) ADDC(11) ADDC(12) ADDC(13)
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      ADD(0, 1) ADD(2, 3) ADD(4, 5) ADD(6, 7) ADD(8, 9) ADD(10, 11) ADD(12, 13)
      ADD(0, 2) ADD(4, 6) ADD(8, 10) ADD(0, 4) ADD(8, 12) ADD(0, 8)
      "movups %%xmm0, (%[out])\n\t"
      : [n] "+r"(iters)
      : [b] "m"(b), [c] "m"(c), [out] "r"(out)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
  return (double)out[0] + out[1] + out[2] + out[3];
}

float ts__read_sum_sse2(const float *p, size_t n) {
  __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (size_t i = 0; i < n; i += 32) { /* TS__READ_BLOCK is a multiple of 32 */
    s0 = _mm_add_ps(s0, _mm_load_ps(p + i));
    s1 = _mm_add_ps(s1, _mm_load_ps(p + i + 4));
    s2 = _mm_add_ps(s2, _mm_load_ps(p + i + 8));
    s3 = _mm_add_ps(s3, _mm_load_ps(p + i + 12));
    s4 = _mm_add_ps(s4, _mm_load_ps(p + i + 16));
    s5 = _mm_add_ps(s5, _mm_load_ps(p + i + 20));
    s6 = _mm_add_ps(s6, _mm_load_ps(p + i + 24));
    s7 = _mm_add_ps(s7, _mm_load_ps(p + i + 28));
  }
  s0 = _mm_add_ps(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)),
                  _mm_add_ps(_mm_add_ps(s4, s5), _mm_add_ps(s6, s7)));
  float out[4];
  _mm_storeu_ps(out, s0);
  return out[0] + out[1] + out[2] + out[3];
}
