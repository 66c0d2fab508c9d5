/* Backward micro-kernels, AVX2 + FMA (8 lanes, 16 registers: dK / dV blocks of 4 keys x up to 24
 * columns, 12 accumulators; d = 64 as 24 + 24 + 16, which ran 2-4% faster per backward than
 * 4 x 16 blocks on window2d k = 13). The body is shared with AVX-512 in attn_bwd_body.h. */
#include "attn/attn_internal.h"
#include "kernels/simd_avx2.h"

/* All-ones lanes where bit `lane` of the 8-bit value b is set. */
static inline __attribute__((always_inline)) vmask bits8(unsigned b) {
  const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), sel), sel));
}
#define BWD_LANES(mk, v) bits8(((unsigned)(mk)[(v) / 2] >> (8 * ((v) & 1))) & 0xFFu)
#define BWD_CV 3

#include "attn/attn_bwd_body.h"

const ts__attn_bwd_kern ts__attn_bwd_kern_avx2 = {.pds = bwd_pds, .kv = bwd_kv, .kv_diag = bwd_kv_diag};
