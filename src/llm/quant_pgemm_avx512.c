/* AVX-512 VNNI GEMM on packed block rows (layout in quant_internal.h) against Q8 activations, in
 * llama.cpp's order (cpu_order.h), so every output equals the scalar reference dot bit for bit:
 * y[t][r] = hsum8 over blocks of fma(d_w d_x, lane) (+ Q4_1's sum of m_w s_x).
 *
 * A tile is 4 rows x 1 token; its vectors hold the 8 lanes of each of the 4 rows:
 *   Q4_0 / Q4_1: 16 nibble bytes of one block from each row fill the four 128-bit lanes;
 *     lo = q & 15 are elements 0..15 and hi = q >> 4 elements 16..31, so vpdpbusd against the
 *     token's elements 0..15 (resp. 16..31) broadcast to every 128-bit lane gives in int32 lane
 *     4k + g the exact sum of elements 4g..4g+3 (resp. 16+4g..) of row k: ggml's lanes g and 4+g.
 *     The rows are read 64 bytes (4 blocks) at a time and regrouped with a 4x4 transpose of
 *     128-bit lanes. Q4_0's -8 is taken off per lane in int32 (8 x the activation's group sums).
 *   Q8_0: a block of a row is 32 bytes, so a vector holds rows k, k+1 (lanes 8i + g); the stored
 *     bytes are q + 128 (unsigned for vpdpbusd) and 128 x the group sums come off per lane.
 * Scales: per 16 blocks the four rows' fp16 scales are converted, multiplied by the token's d_x
 * (exact: two fp16 values), transposed to [block][row], and each block's vector of per-lane
 * scales is one permute. Q4_1's m_w s_x (exact) is added per row block after block in fp32.
 * Decode (T = 1) streams all rows; prefill walks ~32 KiB chunks of rows with every token inside,
 * so a chunk is read from memory once and from L1/L2 by the other tokens. */
#include <immintrin.h>

#include "llm/quant_internal.h"

#define AI static inline __attribute__((always_inline))

enum { K_Q8_0 = 0, K_Q4_0 = 1, K_Q4_1 = 2 };

/* Software prefetch distance in bytes of weights ahead of the tile being read: streaming from
 * memory, the hardware prefetchers alone left the Q8_0 vocabulary projection far below the
 * bandwidth (measured on Zen 4; ~8-16 KB ahead gave the best rates). */
#ifndef PF_BYTES
#define PF_BYTES 16384
#endif

AI __mmask16 mask16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }
AI __mmask64 mask64(int64_t n) { return n >= 64 ? ~(__mmask64)0 : n <= 0 ? 0 : (((__mmask64)1 << n) - 1); }

/* a 64-byte load, masked only when the row ends inside it */
AI __m512i ld64(const void *p, int64_t bytes) {
  return bytes >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(mask64(bytes), p);
}

AI __m512 ld_h16(const uint8_t *p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

/* where the quants start in a packed row (after the scales) */
AI size_t qoff(int kind, int64_t nb) { return (size_t)(kind == K_Q4_1 ? 4 : 2) * (size_t)nb; }

/* [a0 b0 c0 d0], [a1 b1 c1 d1], ... (128-bit lanes) of four vectors [a0 a1 a2 a3], ... */
AI void transpose128(__m512i r0, __m512i r1, __m512i r2, __m512i r3, __m512i out[4]) {
  const __m512i a0 = _mm512_shuffle_i64x2(r0, r1, 0x44), a1 = _mm512_shuffle_i64x2(r0, r1, 0xEE);
  const __m512i a2 = _mm512_shuffle_i64x2(r2, r3, 0x44), a3 = _mm512_shuffle_i64x2(r2, r3, 0xEE);
  out[0] = _mm512_shuffle_i64x2(a0, a2, 0x88);
  out[1] = _mm512_shuffle_i64x2(a0, a2, 0xDD);
  out[2] = _mm512_shuffle_i64x2(a1, a3, 0x88);
  out[3] = _mm512_shuffle_i64x2(a1, a3, 0xDD);
}

/* 16 values of 4 rows -> u[j % 4] lane group j / 4 = [row0, row1, row2, row3] of value j */
AI void transpose4x16(__m512 v0, __m512 v1, __m512 v2, __m512 v3, __m512 u[4]) {
  const __m512 t0 = _mm512_unpacklo_ps(v0, v1), t1 = _mm512_unpackhi_ps(v0, v1);
  const __m512 t2 = _mm512_unpacklo_ps(v2, v3), t3 = _mm512_unpackhi_ps(v2, v3);
  u[0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
  u[1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
  u[2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
  u[3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
}

/* y[k] (k < nr) = row k . token, rows w + k rb (rows past nr repeat row 0: computed, not stored) */
/* Side lines prefetched per tile from the qbatch's queue (while the tile's weights stream in) */
#define PF_SIDE_LINES 8

AI void tile(int kind, const uint8_t *w, size_t rb, int nr, int64_t n, const int8_t *q, const float *dx,
             const float *sx, const int32_t *gs, float *y, int64_t ldy, int pf, ts__pfq *side) {
  const int64_t nb = n / 32;
  const size_t qo = qoff(kind, nb);
  if (pf)
    for (size_t o = 0; o < 4 * rb; o += 64) _mm_prefetch((const char *)w + PF_BYTES + o, _MM_HINT_T0);
  if (side) ts__pfq_pump(side, PF_SIDE_LINES);
  const uint8_t *row[4];
  for (int k = 0; k < 4; k++) row[k] = w + (size_t)(k < nr ? k : 0) * rb;
  const __m512i z = _mm512_setzero_si512(), lom = _mm512_set1_epi8(0x0F);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lane4 = _mm512_srli_epi32(lane, 2), lane8 = _mm512_srli_epi32(lane, 3);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m128 summ = _mm_setzero_ps();
  for (int64_t sb = 0; sb < nb; sb += 16) {
    const __mmask16 mk = mask16(nb - sb);
    const int64_t nbs = nb - sb < 16 ? nb - sb : 16;
    const __m512 xd = _mm512_maskz_loadu_ps(mk, dx + sb);
    __m512 dd[4];
    transpose4x16(_mm512_mul_ps(ld_h16(row[0] + 2 * sb, mk), xd), _mm512_mul_ps(ld_h16(row[1] + 2 * sb, mk), xd),
                  _mm512_mul_ps(ld_h16(row[2] + 2 * sb, mk), xd), _mm512_mul_ps(ld_h16(row[3] + 2 * sb, mk), xd), dd);
    /* Q4_1: m_w s_x of [block j % 4][lane group j / 4 = block's 4 rows], read back per block */
    _Alignas(64) float mbuf[4][16];
    if (kind == K_Q4_1) {
      const __m512 xs = _mm512_maskz_loadu_ps(mk, sx + sb);
      const size_t mo = 2 * (size_t)nb + 2 * (size_t)sb;
      __m512 mm[4];
      transpose4x16(_mm512_mul_ps(ld_h16(row[0] + mo, mk), xs), _mm512_mul_ps(ld_h16(row[1] + mo, mk), xs),
                    _mm512_mul_ps(ld_h16(row[2] + mo, mk), xs), _mm512_mul_ps(ld_h16(row[3] + mo, mk), xs), mm);
      for (int u = 0; u < 4; u++) _mm512_store_ps(mbuf[u], mm[u]);
    }
    if (kind == K_Q8_0) {
      for (int64_t j = 0; j < nbs; j += 2) { /* two blocks per step: 64 bytes of each row */
        const int64_t b = sb + j, bytes = (nb - b) * 32;
        const __m512i r0 = ld64(row[0] + qo + 32 * b, bytes), r1 = ld64(row[1] + qo + 32 * b, bytes);
        const __m512i r2 = ld64(row[2] + qo + 32 * b, bytes), r3 = ld64(row[3] + qo + 32 * b, bytes);
        /* lanes 0-7 row 2i, 8-15 row 2i+1: element 4 (jj / 4) + row of dd[jj % 4] (jj / 4 = j / 4 here) */
        const __m512i i01 = _mm512_add_epi32(lane8, _mm512_set1_epi32((int)(4 * (j >> 2))));
        const __m512i i23 = _mm512_add_epi32(i01, _mm512_set1_epi32(2));
        for (int h = 0; h < 2 && j + h < nbs; h++) {
          const int64_t bb = b + h, jj = j + h;
          /* [row block bb | next row block bb] (immediates: literal in each branch) */
          const __m512i v01 = h ? _mm512_shuffle_i64x2(r0, r1, 0xEE) : _mm512_shuffle_i64x2(r0, r1, 0x44);
          const __m512i v23 = h ? _mm512_shuffle_i64x2(r2, r3, 0xEE) : _mm512_shuffle_i64x2(r2, r3, 0x44);
          const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(q + 32 * bb)));
          const __m512i c = _mm512_slli_epi32(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(gs + 8 * bb))), 7);
          const __m512i p01 = _mm512_sub_epi32(_mm512_dpbusd_epi32(z, v01, xv), c);
          const __m512i p23 = _mm512_sub_epi32(_mm512_dpbusd_epi32(z, v23, xv), c);
          const __m512 s01 = _mm512_permutexvar_ps(i01, dd[jj & 3]), s23 = _mm512_permutexvar_ps(i23, dd[jj & 3]);
          acc0 = _mm512_fmadd_ps(s01, _mm512_cvtepi32_ps(p01), acc0);
          acc1 = _mm512_fmadd_ps(s23, _mm512_cvtepi32_ps(p23), acc1);
        }
      }
    } else {
      for (int64_t j = 0; j < nbs; j += 4) { /* four blocks per step: 64 bytes of each row */
        const int64_t b = sb + j, bytes = (nb - b) * 16;
        const __m512i ik = _mm512_add_epi32(lane4, _mm512_set1_epi32((int)j));
        __m512i v[4];
        transpose128(ld64(row[0] + qo + 16 * b, bytes), ld64(row[1] + qo + 16 * b, bytes),
                     ld64(row[2] + qo + 16 * b, bytes), ld64(row[3] + qo + 16 * b, bytes), v);
        for (int h = 0; h < 4 && j + h < nbs; h++) {
          const int64_t bb = b + h, jj = j + h;
          const __m512i lo = _mm512_and_si512(v[h], lom), hi = _mm512_and_si512(_mm512_srli_epi16(v[h], 4), lom);
          const __m512i xl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(q + 32 * bb)));
          const __m512i xh = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(q + 32 * bb + 16)));
          __m512i pl = _mm512_dpbusd_epi32(z, lo, xl), ph = _mm512_dpbusd_epi32(z, hi, xh);
          if (kind == K_Q4_0) {
            pl = _mm512_sub_epi32(pl, _mm512_slli_epi32(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(gs + 8 * bb))), 3));
            ph = _mm512_sub_epi32(ph, _mm512_slli_epi32(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(gs + 8 * bb + 4))), 3));
          }
          /* lane 4k + g: row k = element 4 (jj / 4) + k of dd[jj % 4] (jj / 4 = j / 4: fixed per step) */
          const __m512 s = _mm512_permutexvar_ps(ik, dd[h]);
          acc0 = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(pl), acc0);
          acc1 = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(ph), acc1);
          if (kind == K_Q4_1) summ = _mm_add_ps(summ, _mm_load_ps(&mbuf[h][4 * (jj >> 2)]));
        }
      }
    }
  }
  /* hsum8 per row: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) */
  __m512 t;
  if (kind == K_Q8_0) {
    /* acc0 = [row0 a0..a7 | row1 a0..a7], acc1 = rows 2, 3: a_i + a_(i+4) into lanes 0-3 / 8-11 */
    const __m512 t0 = _mm512_add_ps(acc0, _mm512_shuffle_f32x4(acc0, acc0, 0xB1));
    const __m512 t1 = _mm512_add_ps(acc1, _mm512_shuffle_f32x4(acc1, acc1, 0xB1));
    t = _mm512_shuffle_f32x4(t0, t1, 0x88); /* row k's a_g + a_(g+4) in lanes 4k + g */
  } else {
    t = _mm512_add_ps(acc0, acc1); /* lane 4k + g: a_g + a_(g+4) of row k */
  }
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E)); /* lane 4k: (a0+a4) + (a2+a6), 4k+1: (a1+a5) + (a3+a7) */
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
  _Alignas(64) float o[16];
  _mm512_store_ps(o, t);
  float sm[4];
  _mm_storeu_ps(sm, summ);
  for (int k = 0; k < nr; k++) y[(size_t)k * (size_t)ldy] = kind == K_Q4_1 ? o[4 * k] + sm[k] : o[4 * k];
}

#define CHUNK_BYTES (32 * 1024)

AI void pgemm(int kind, const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  const uint8_t *base = P;
  const int64_t n = x->n, nb = n / 32;
  int64_t chunk = (int64_t)(CHUNK_BYTES / rb) & ~(int64_t)3;
  if (chunk < 4) chunk = 4;
  if (x->T == 1) chunk = rows;
  for (int64_t c0 = 0; c0 < rows; c0 += chunk) {
    const int64_t c1 = c0 + chunk < rows ? c0 + chunk : rows;
    for (int t = 0; t < x->T; t++) {
      const int8_t *q = x->q + (size_t)t * (size_t)n;
      const float *dx = x->d + (size_t)t * (size_t)nb, *sx = x->s + (size_t)t * (size_t)nb;
      const int32_t *gs = x->gsum + (size_t)t * (size_t)nb * 8;
      for (int64_t r = c0; r < c1; r += 4) {
        const int nr = c1 - r < 4 ? (int)(c1 - r) : 4;
        tile(kind, base + (size_t)r * rb, rb, nr, n, q, dx, sx, gs, y + (size_t)t * (size_t)ldy + r, 1, t == 0,
             t == 0 ? x->pf : NULL);
      }
    }
  }
}

void ts__pgemm_q8_0_avx512(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q8_0, P, rb, rows, x, y, ldy);
}
void ts__pgemm_q4_0_avx512(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q4_0, P, rb, rows, x, y, ldy);
}
void ts__pgemm_q4_1_avx512(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q4_1, P, rb, rows, x, y, ldy);
}

/* gsum[t][b][g] = sum of elements 4g..4g+3 of block b (vpdpbusd of ones against two blocks). */
void ts__prep_packed_avx512(int64_t n, int T, const int8_t *q, int32_t *gsum) {
  const __m512i ones = _mm512_set1_epi8(1), z = _mm512_setzero_si512();
  const int64_t nb = n / 32;
  for (int t = 0; t < T; t++) {
    const int8_t *qt = q + (size_t)t * (size_t)n;
    int32_t *g = gsum + (size_t)t * (size_t)nb * 8;
    for (int64_t b = 0; b < nb; b += 2) {
      const int64_t bytes = (nb - b) * 32;
      const __m512i s = _mm512_dpbusd_epi32(z, ones, ld64(qt + 32 * b, bytes));
      _mm512_mask_storeu_epi32(g + 8 * b, mask16((nb - b) * 8), s);
    }
  }
}
