/* AVX-512 VNNI GEMM on packed block rows (layout in quant_internal.h) against Q8 activations:
 * y[t][r] = dot(row r, token t) over tiles of NR <= 4 rows x NT <= 4 tokens. Decode is NT = 1.
 *
 * Q4_0 / Q4_1: one 64-byte load holds the nibbles of 4 blocks (16 bytes each, one per 128-bit
 * lane); lo = q & 15 are elements 0..15 and hi = q >> 4 elements 16..31 of each lane's block,
 * matched by the token's `quad` arrangement (the same 4 blocks' elements 0..15, then 16..31), so
 * p = dpbusd(dpbusd(0, lo, xlo), hi, xhi) has in int32 lane i the exact integer sum of 8 products of
 * block i / 4 (nibbles are unsigned 0..15, activations signed: no saturation). Q8_0: one load is 2
 * blocks of unsigned u = q + 128 against the natural activation order, lane i in block i / 8.
 * Per 16 blocks (a "superblock") the fp16 weight scales are converted at once and multiplied by the
 * token's 16 activation scales; each group takes its lanes' scales with one permute and one FMA.
 * The offsets are a second, short pass per (row, token) over the superblocks:
 *   Q4_1: + sum_b m_w[b] s_x[b]      Q4_0: - 8 sum_b d_w[b] d_x[b] sum_x[b]
 *   Q8_0: - 128 sum_b d_w[b] d_x[b] sum_x[b]   (the +128 of u; ds = d_x sum_x)
 * The integer block sums equal the reference's; only the fp32 order differs. A partial last group
 * or superblock is read with masked loads (zeros); the activation arrays are zero past the end.
 * Rows are walked in chunks of ~32 KiB of weights with every token tile inside, so a chunk stays in
 * L1/L2 while the tokens' activations stream from L2. */
#include <immintrin.h>

#include "llm/quant_internal.h"

#define AI static inline __attribute__((always_inline))

enum { K_Q8_0 = 0, K_Q4_0 = 1, K_Q4_1 = 2 };

/* Software prefetch distance in bytes of weights (the tile's rows this far ahead, a line at a
 * time): streaming from memory, the hardware prefetchers alone left the 4-row Q8_0 tiles at
 * 6 GB/s on one Zen 4 core where ~8 KB ahead gives 18-32 GB/s (49152 x 576, measured noisy). */
#ifndef PF_BYTES
#define PF_BYTES 16384
#endif

AI __mmask16 mask16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }
AI __mmask64 mask64(int64_t n) { return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1); }

/* a 64-byte load, masked only when the row ends inside it (a masked load of full rows measured far
 * slower on Zen 4 when streaming from memory) */
AI __m512i ld64(const void *p, int64_t bytes) {
  return bytes >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(mask64(bytes), p);
}

AI __m512 ld_h16(const uint16_t *p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

/* where the weights start in a packed row (after the scales) */
AI size_t qoff(int kind, int64_t nb) { return (size_t)(kind == K_Q4_1 ? 4 : 2) * (size_t)nb; }

AI void tile(int kind, const uint8_t *w, size_t rb, int64_t n, const ts__qbatch *x, int t0, float *y, int64_t ldy,
             const int NR, const int NT) {
  const int64_t nb = n / 32, ng = (nb + 3) / 4;
  const size_t qo = qoff(kind, nb);
  for (size_t o = 0; o < (size_t)NR * rb; o += 64) _mm_prefetch((const char *)w + PF_BYTES + o, _MM_HINT_T1);
  __m512 acc[4][4];
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
  const __m512i z = _mm512_setzero_si512(), lomask = _mm512_set1_epi8(0x0F);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t sb = 0; sb < nb; sb += 16) {
    const __mmask16 mk = mask16(nb - sb);
    __m512 sc[4][4];
    for (int r = 0; r < NR; r++) {
      const __m512 dw = ld_h16((const uint16_t *)(w + (size_t)r * rb) + sb, mk);
      for (int t = 0; t < NT; t++)
        sc[r][t] = _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(mk, x->d + (size_t)(t0 + t) * (size_t)nb + sb));
    }
    if (kind == K_Q8_0) {
      const int64_t nbs = nb - sb < 16 ? nb - sb : 16, npair = (nbs + 1) / 2; /* the last pair may be half */
      for (int64_t j = 0; j < npair; j++) {
        const int64_t kb = sb + 2 * j;
        const int64_t nbytes = (nb - kb) * 32;
        const __m512i idx = _mm512_add_epi32(_mm512_srli_epi32(lane, 3), _mm512_set1_epi32((int)(2 * j)));
        __m512i wv[4];
        for (int r = 0; r < NR; r++) wv[r] = ld64(w + (size_t)r * rb + qo + (size_t)kb * 32, nbytes);
        for (int t = 0; t < NT; t++) {
          const __m512i xv = ld64(x->q + (size_t)(t0 + t) * (size_t)n + (size_t)kb * 32, nbytes);
          for (int r = 0; r < NR; r++) {
            const __m512i p = _mm512_dpbusd_epi32(z, wv[r], xv);
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, sc[r][t]), acc[r][t]);
          }
        }
      }
    } else {
      for (int64_t g = sb / 4; g < ng && g < sb / 4 + 4; g++) {
        const int64_t kb = 4 * g;
        const int64_t nbytes = (nb - kb) * 16;
        const __m512i idx = _mm512_add_epi32(_mm512_srli_epi32(lane, 2), _mm512_set1_epi32((int)(kb - sb)));
        __m512i lo[4], hi[4];
        for (int r = 0; r < NR; r++) {
          const __m512i v = ld64(w + (size_t)r * rb + qo + (size_t)kb * 16, nbytes);
          lo[r] = _mm512_and_si512(v, lomask);
          hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lomask);
        }
        for (int t = 0; t < NT; t++) {
          const int8_t *xq = x->quad + ((size_t)(t0 + t) * (size_t)ng + (size_t)g) * 128;
          const __m512i xl = _mm512_loadu_si512(xq), xh = _mm512_loadu_si512(xq + 64);
          for (int r = 0; r < NR; r++) {
            const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, lo[r], xl), hi[r], xh);
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, sc[r][t]), acc[r][t]);
          }
        }
      }
    }
  }
  /* offsets: Q4_1 m_w . s_x; Q4_0 / Q8_0 -c d_w . (d_x sum_x) */
  const float c = kind == K_Q4_1 ? 1.0f : kind == K_Q4_0 ? -8.0f : -128.0f;
  const size_t moff = kind == K_Q4_1 ? 2 * (size_t)nb : 0;
  const float *xs = kind == K_Q4_1 ? x->s : x->ds;
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < NT; t++) {
      __m512 m = _mm512_setzero_ps();
      const uint16_t *mw = (const uint16_t *)(w + (size_t)r * rb + moff);
      const float *xt = xs + (size_t)(t0 + t) * (size_t)nb;
      for (int64_t sb = 0; sb < nb; sb += 16) {
        const __mmask16 mk = mask16(nb - sb);
        m = _mm512_fmadd_ps(ld_h16(mw + sb, mk), _mm512_maskz_loadu_ps(mk, xt + sb), m);
      }
      y[(size_t)(t0 + t) * (size_t)ldy + (size_t)r] = _mm512_reduce_add_ps(acc[r][t]) + c * _mm512_reduce_add_ps(m);
    }
}

#define TILE_CASE(nr, ntk) \
  case (nr) * 8 + (ntk): tile(kind, w, rb, n, x, t0, y, ldy, nr, ntk); break;

AI void tile_any(int kind, const uint8_t *w, size_t rb, int64_t n, const ts__qbatch *x, int t0, float *y, int64_t ldy,
                 int nr, int ntk) {
  switch (nr * 8 + ntk) {
    TILE_CASE(4, 1) TILE_CASE(3, 1)
    TILE_CASE(2, 4) TILE_CASE(2, 3) TILE_CASE(2, 2) TILE_CASE(2, 1)
    TILE_CASE(1, 4) TILE_CASE(1, 3) TILE_CASE(1, 2) TILE_CASE(1, 1)
    default: break;
  }
}



#define NRDEC 4
#define CHUNK_BYTES (32 * 1024)

AI void pgemm(int kind, const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  const uint8_t *base = P;
  /* tokens in tiles of 4 when there are many; decode (T = 1) streams rows 4 at a time */
  int64_t chunk = (int64_t)(CHUNK_BYTES / rb) & ~(int64_t)3;
  if (chunk < 4) chunk = 4;
  if (x->T == 1) chunk = rows;
  const int nr_max = x->T >= 2 ? 2 : NRDEC; /* 4 rows x 1 token in decode, else 2 rows x up to 4 tokens */
  for (int64_t c0 = 0; c0 < rows; c0 += chunk) {
    const int64_t c1 = c0 + chunk < rows ? c0 + chunk : rows;
    for (int t0 = 0; t0 < x->T; t0 += 4) {
      const int ntk = x->T - t0 < 4 ? x->T - t0 : 4;
      for (int64_t r = c0; r < c1; r += nr_max) {
        const int nr = c1 - r < nr_max ? (int)(c1 - r) : nr_max;
        tile_any(kind, base + (size_t)r * rb, rb, x->n, x, t0, y + r, ldy, nr, ntk);
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

/* quad: per group of 4 blocks, [elements 0..15 of each block | elements 16..31 of each], from the
 * natural order (a 64-byte load = 2 blocks = 128-bit lanes lo0 hi0 lo1 hi1); ds = d * sum. */
void ts__prep_packed_avx512(int64_t n, int T, const int8_t *q, const float *d, const int32_t *sum, int8_t *quad,
                            float *ds) {
  const int64_t nb = n / 32, ng = (nb + 3) / 4;
  for (int t = 0; t < T; t++) {
    const int8_t *qt = q + (size_t)t * (size_t)n;
    int8_t *o = quad + (size_t)t * (size_t)ng * 128;
    for (int64_t g = 0; g < ng; g++) {
      const int64_t left = n - 128 * g; /* bytes of this group present */
      const __m512i a = _mm512_maskz_loadu_epi8(mask64(left), qt + 128 * g);
      const __m512i b = _mm512_maskz_loadu_epi8(mask64(left - 64 > 0 ? left - 64 : 0), qt + 128 * g + 64);
      _mm512_storeu_si512(o + 128 * g, _mm512_shuffle_i64x2(a, b, 0x88));
      _mm512_storeu_si512(o + 128 * g + 64, _mm512_shuffle_i64x2(a, b, 0xDD));
    }
    const float *dt = d + (size_t)t * (size_t)nb;
    const int32_t *st = sum + (size_t)t * (size_t)nb;
    float *ot = ds + (size_t)t * (size_t)nb;
    for (int64_t k = 0; k < nb; k += 16) {
      const __mmask16 mk = mask16(nb - k);
      _mm512_mask_storeu_ps(ot + k, mk,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, dt + k),
                                          _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(mk, st + k))));
    }
  }
}
