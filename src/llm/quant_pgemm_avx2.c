/* AVX2 (+FMA, F16C) GEMM on packed block rows (layout in quant_internal.h: groups of 8 rows in two
 * halves of 4; per step of 4 blocks the scales, then each block's rows side by side), the same
 * packed bytes the AVX-512 kernels read, against Q8 activations in llama.cpp's order
 * (cpu_order.h), so every output equals the scalar reference dot of the file row bit for bit:
 * y[t][r] = hsum8 over blocks of fma(d_w d_x, lane) (+ Q4_1's sum of m_w s_x, block after block).
 *
 * The integer part of a block dot is exact in any order; only the fp32 accumulation is fixed per
 * row and lane, so a vector may hold the lanes of any rows and tokens as long as each lane sees its
 * own row's fmas block after block (a 4-row prototype checked 745,652 rows of SmolLM2 bit for bit
 * this way, docs/notes/avx2-llm-gap.md):
 *   Q4_0 / Q4_1: one 32-byte load is a row pair's block (16 nibble bytes of rows 2p | 2p + 1), so
 *     lo = q & 15 against the token's elements 0..15 broadcast to both 128-bit lanes (maddubs,
 *     madd by ones: no saturation, 2 x 15 x 127 < 32767) gives int32 [row a lanes 0-3 | row b lanes
 *     0-3] and hi = q >> 4 against elements 16..31 [.. 4-7 | .. 4-7]: two accumulators per row pair
 *     and token, regrouped only at the end. Q4_0's -8 is taken off in int32 (8 x the activation's
 *     group sums, gsum from ts__prep_packed_avx2).
 *   Q8_0: one 32-byte load is a row's block (u = q ^ 0x80); |q| x sign(x, q) as in quant_avx2.c
 *     (maddubs cannot take u: 2 x 255 x 127 saturates; 2 x 128 x 127 does not, and activations are
 *     never -128) gives the row's 8 lanes in order, one accumulator per row and token.
 * Scales: a row pair's d of the step's 4 blocks are adjacent ([row][block], 16 bytes): one
 * vcvtph2ps gives [row a blocks 0-3 | row b blocks 0-3], times the token's [d_x 0-3 | d_x 0-3]
 * (exact: two fp16 values); block h's scale is one in-lane vpermilps (Q8_0: each row's half spread
 * to both lanes once per step). Q4_1's m_w s_x of 4 row pairs or tokens are transposed in-lane
 * once per step, so one add per block advances 8 rows' (row-token) sums.
 * Tiles: decode (T = 1) is one group (8 rows, 4 row pairs: 8 independent fma chains) x 1 token,
 * reading the group strictly in address order (one ascending stream per thread, as the AVX-512
 * decode tile); prefill walks L1d-sized chunks of groups with every token inside and runs tiles of
 * PRE_RP row pairs x up to 4 / PRE_RP tokens, which share each block's loaded and unpacked quants
 * and converted scales.
 * Measured 2026-12-07 on an AMD EPYC (Zen 3 class, 2 vCPUs, AVX2 + FMA + F16C, no AVX-512) in quiet
 * minutes, bench_quant, the one-row dots of quant_avx2.c on the file rows -> these kernels: decode,
 * 1 thread, in cache Q4_1 576x1536 / 1536x576 11.6 / 10.2 -> 26.1 / 23.1 GB/s, Q8_0 24.6 / 22.7 ->
 * 33.7 / 32.6; streaming Q4_1 10.3 / 9.3 -> 14.2 / 14.4, Q8_0 49152x576 11.8 -> 16.7; 2 threads
 * streaming Q4_1 13.9 / 12.3 -> 22.4 / 22.1, Q8_0 49152x576 28.8 -> 32.7 (of 40.7 GB/s read);
 * prefill of 64 tokens, 1 thread, Q4_1 36 / 33 -> 92 / 83 GFLOP/s, Q8_0 47 / 40 -> 72 / 68. With
 * other processes busy (so within ~10%): the 8-row decode tile was 7-10% faster than two 4-row
 * tiles per group; the tail steps' scales by one pshufb instead of a copy through the stack (a
 * store-forwarding stall per row pair) took Q4_1 1536x576 (4 + 2 blocks of 4) from 15.8 to 20.4
 * GB/s; 2 rows x 4 tokens and 4 rows x 2 tokens for prefill measured the same (Q8_0 ~5% for 2 x 4,
 * kept). */
#include <immintrin.h>

#include "llm/quant_internal.h"

#define AI static inline __attribute__((always_inline))

enum { K_Q8_0 = 0, K_Q4_0 = 1, K_Q4_1 = 2 };

/* Prefill tile: row pairs (x 4 / PRE_RP tokens; 8 accumulators either way; 1 or 2, see above). */
#ifndef PRE_RP
#define PRE_RP 1
#endif
#define PRE_TT (4 / PRE_RP)
/* Weight prefetches as in quant_pgemm_vnni_avx512.c: decode's distance is the qbatch's measured wpf
 * (T1, spread over the tile's steps), prefill's first pass over a chunk fetches 16 KB ahead. */
#define PF_PREFILL 16384
#define PF_HINT _MM_HINT_T1
#define PF_SIDE_LINES 8

/* bytes of a block of one row (a step of 4 blocks of a group of 8 rows is 32 of them) */
AI size_t bsz(int kind) { return kind == K_Q8_0 ? 34 : kind == K_Q4_0 ? 18 : 20; }

/* fp16 values of nbj (1..4) blocks of 2 rows stored [row][block] -> fp32 [row a: block 0..3 | row b:
 * block 0..3] (lanes h >= nbj zero). The 16-byte load stays inside the step for nbj < 4 too: the
 * scales are followed by the step's quants. */
AI __m256 ld_pair(const uint8_t *p, int nbj) {
  const __m128i v = _mm_loadu_si128((const __m128i *)p);
  if (nbj == 4) return _mm256_cvtph_ps(v);
  const char z = (char)0x80, a = (char)(2 * nbj); /* pshufb: row b's bytes from 2 nbj on */
  __m128i ix;
  if (nbj == 1) ix = _mm_setr_epi8(0, 1, z, z, z, z, z, z, a, (char)(a + 1), z, z, z, z, z, z);
  else if (nbj == 2) ix = _mm_setr_epi8(0, 1, 2, 3, z, z, z, z, a, (char)(a + 1), (char)(a + 2), (char)(a + 3), z, z, z, z);
  else
    ix = _mm_setr_epi8(0, 1, 2, 3, 4, 5, z, z, a, (char)(a + 1), (char)(a + 2), (char)(a + 3), (char)(a + 4), (char)(a + 5), z,
                       z);
  return _mm256_cvtph_ps(_mm_shuffle_epi8(v, ix));
}

/* a token's fp32 values of nbj blocks in both 128-bit lanes (lanes h >= nbj zero; nothing read past
 * the array) */
AI __m256 bcast4(const float *p, int nbj) {
  static const int32_t mk[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
  const __m128 v = nbj == 4 ? _mm_loadu_ps(p) : _mm_maskload_ps(p, _mm_loadu_si128((const __m128i *)(mk + 4 - nbj)));
  return _mm256_set_m128(v, v);
}

AI __m256i bcast128(const void *p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)); }

/* element h of each 128-bit lane in all four of its lanes (h a constant after unrolling) */
AI __m256 lane_h(__m256 v, int h) {
  switch (h) {
    case 0: return _mm256_permute_ps(v, 0x00);
    case 1: return _mm256_permute_ps(v, 0x55);
    case 2: return _mm256_permute_ps(v, 0xAA);
    default: return _mm256_permute_ps(v, 0xFF);
  }
}

/* in-lane 4 x 4 transpose: o[h] lane 4s + x = v[x] lane 4s + h */
AI void tr4(const __m256 *v, __m256 *o) {
  const __m256 a = _mm256_unpacklo_ps(v[0], v[1]), b = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 c = _mm256_unpacklo_ps(v[2], v[3]), d = _mm256_unpackhi_ps(v[2], v[3]);
  o[0] = _mm256_shuffle_ps(a, c, 0x44);
  o[1] = _mm256_shuffle_ps(a, c, 0xEE);
  o[2] = _mm256_shuffle_ps(b, d, 0x44);
  o[3] = _mm256_shuffle_ps(b, d, 0xEE);
}

/* Where a row pair p (0..3: rows 2p, 2p + 1 of the group, half p / 2) keeps its d scales in a step
 * of nbj blocks (Q4_1's m follow all d, 16 nbj bytes on). */
AI size_t pair_sc(int p, int nbj) { return (size_t)(8 * nbj * (p / 2) + 4 * nbj * (p % 2)); }

/* Q4 blocks b0 .. b0 + nbj - 1 (step at sb) of RP row pairs p0.. of a group against TT tokens
 * (token u's arrays at q + u n, dx / sx + u nb, gs + 8 u nb), RP TT <= 4. Pair i and token u are
 * x = i TT + u: acc[2x] = [row a lanes 0-3 | row b lanes 0-3], acc[2x + 1] lanes 4-7; Q4_1's sums
 * of m_w s_x in *sm, lane 4s + x = row 2 (p0 + i) + s. */
AI void q4_step(int kind, int nbj, int RP, int TT, const uint8_t *sb, int p0, int64_t n, int64_t nb, int64_t b0,
                const int8_t *q, const float *dx, const float *sx, const int32_t *gs, __m256 *acc, __m256 *sm) {
  const size_t SC = (size_t)(kind == K_Q4_1 ? 32 : 16) * (size_t)nbj;
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 S[4];
#pragma GCC unroll 4
  for (int i = 0; i < RP; i++) {
    const __m256 D = ld_pair(sb + pair_sc(p0 + i, nbj), nbj);
#pragma GCC unroll 4
    for (int u = 0; u < TT; u++) S[i * TT + u] = _mm256_mul_ps(D, bcast4(dx + u * nb + b0, nbj));
  }
  if (kind == K_Q4_1) { /* the 4 blocks' m_w s_x of (up to) 4 pairs / tokens, one vector per block */
    __m256 M[4], B[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) M[x] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < RP; i++) {
      const __m256 W = ld_pair(sb + 16 * nbj + pair_sc(p0 + i, nbj), nbj);
#pragma GCC unroll 4
      for (int u = 0; u < TT; u++) M[i * TT + u] = _mm256_mul_ps(W, bcast4(sx + u * nb + b0, nbj));
    }
    tr4(M, B);
#pragma GCC unroll 4
    for (int h = 0; h < nbj; h++) *sm = _mm256_add_ps(*sm, B[h]);
  }
#pragma GCC unroll 4
  for (int h = 0; h < 4; h++) {
    if (h >= nbj) break;
    const int64_t b = b0 + h;
#pragma GCC unroll 4
    for (int i = 0; i < RP; i++) {
      const int p = p0 + i;
      const __m256i v = _mm256_loadu_si256((const __m256i *)(sb + SC + 128 * h + 64 * (p / 2) + 32 * (p % 2)));
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
      for (int u = 0; u < TT; u++) {
        const int x = i * TT + u;
        const int8_t *qb = q + u * n + 32 * b;
        __m256i il = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, bcast128(qb)), ones);
        __m256i ih = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, bcast128(qb + 16)), ones);
        if (kind == K_Q4_0) {
          il = _mm256_sub_epi32(il, _mm256_slli_epi32(bcast128(gs + 8 * (u * nb + b)), 3));
          ih = _mm256_sub_epi32(ih, _mm256_slli_epi32(bcast128(gs + 8 * (u * nb + b) + 4), 3));
        }
        const __m256 s = lane_h(S[x], h);
        acc[2 * x] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(il), acc[2 * x]);
        acc[2 * x + 1] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(ih), acc[2 * x + 1]);
      }
    }
  }
}

/* Q8_0 blocks b0 .. b0 + nbj - 1 of the 2 RP rows of pairs p0.. against TT tokens, RP TT <= 4: row
 * k (0 .. 2 RP - 1 of the tile) and token u in acc[k TT + u], lane g = the row's lane g. */
AI void q8_step(int nbj, int RP, int TT, const uint8_t *sb, int p0, int64_t n, int64_t nb, int64_t b0, const int8_t *q,
                const float *dx, __m256 *acc) {
  const size_t SC = 16 * (size_t)nbj;
  const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
  __m256 S[8];
#pragma GCC unroll 4
  for (int i = 0; i < RP; i++) {
    const __m256 D = ld_pair(sb + pair_sc(p0 + i, nbj), nbj);
#pragma GCC unroll 4
    for (int u = 0; u < TT; u++) {
      const __m256 s = _mm256_mul_ps(D, bcast4(dx + u * nb + b0, nbj));
      S[2 * i * TT + u] = _mm256_permute2f128_ps(s, s, 0x00);
      S[(2 * i + 1) * TT + u] = _mm256_permute2f128_ps(s, s, 0x11);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < 4; h++) {
    if (h >= nbj) break;
    const int64_t b = b0 + h;
#pragma GCC unroll 8
    for (int k = 0; k < 2 * RP; k++) {
      const int r = 2 * p0 + k; /* row of the group */
      const uint8_t *wr = sb + SC + 256 * h + 128 * (r / 4) + 32 * (r % 4);
      const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wr), flip);
      const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 4
      for (int u = 0; u < TT; u++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(q + u * n + 32 * b));
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, w)), ones);
        acc[k * TT + u] = _mm256_fmadd_ps(lane_h(S[k * TT + u], h), _mm256_cvtepi32_ps(p), acc[k * TT + u]);
      }
    }
  }
}

/* One step of either kind (nbj constant). */
AI void step(int kind, int nbj, int RP, int TT, const uint8_t *g, int64_t j, int p0, int64_t n, int64_t nb,
             const int8_t *q, const float *dx, const float *sx, const int32_t *gs, __m256 *acc, __m256 *sm) {
  const uint8_t *sb = g + (size_t)j * 32 * bsz(kind);
  if (kind == K_Q8_0) q8_step(nbj, RP, TT, sb, p0, n, nb, 4 * j, q, dx, acc);
  else q4_step(kind, nbj, RP, TT, sb, p0, n, nb, 4 * j, q, dx, sx, gs, acc, sm);
}

/* The accumulators of a tile -> y: t[x] = [row a: lane g + lane g+4, g = 0..3 | row b: ..] of pair
 * i and token u (x = i TT + u); hsum8 = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) by one transpose, lane
 * 4s + x = row 2 (p0 + i) + s (+ Q4_1's sm, same lanes); rows of the group from nr on are padding. */
AI void finish(int kind, int RP, int TT, const __m256 *acc, __m256 sm, int p0, int nr, float *y, int64_t ldy) {
  __m256 t[4], c[4];
#pragma GCC unroll 4
  for (int x = 0; x < 4; x++) t[x] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < RP; i++)
#pragma GCC unroll 4
    for (int u = 0; u < TT; u++) {
      const int x = i * TT + u;
      if (kind == K_Q8_0) {
        const __m256 a = acc[2 * i * TT + u], b = acc[(2 * i + 1) * TT + u];
        t[x] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
      } else {
        t[x] = _mm256_add_ps(acc[2 * x], acc[2 * x + 1]);
      }
    }
  tr4(t, c);
  __m256 r = _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3]));
  if (kind == K_Q4_1) r = _mm256_add_ps(r, sm);
  float o[8];
  _mm256_storeu_ps(o, r);
#pragma GCC unroll 4
  for (int i = 0; i < RP; i++)
#pragma GCC unroll 4
    for (int u = 0; u < TT; u++)
      for (int s = 0; s < 2; s++) {
        const int row = 2 * (p0 + i) + s;
        if (row < nr) y[(size_t)u * (size_t)ldy + (size_t)row] = o[4 * s + i * TT + u];
      }
}

/* y[u][row] (row < nr of the group at g, rows 2 p0 .. 2 (p0 + RP) - 1; u < TT) = the rows . token u.
 * Decode (RP = 4, TT = 1) prefetches the group pf bytes ahead, its lines spread over the steps (a
 * burst of ~20-45 prefetches stalls once the core's miss buffers are full), and pumps the side queue. */
AI void tile(int kind, int RP, int TT, const uint8_t *g, size_t gb, int p0, int nr, int64_t n, int64_t nb,
             const int8_t *q, const float *dx, const float *sx, const int32_t *gs, float *y, int64_t ldy, int pf,
             ts__pfq *side) {
  const int64_t steps = nb / 4, lines = (int64_t)((gb + 63) / 64);
  const int64_t per = steps > 0 ? (lines + steps - 1) / steps : lines;
  const char *pw = (const char *)g + pf;
  if (pf && per == lines)
    for (int64_t o = 0; o < lines; o++) _mm_prefetch(pw + 64 * o, PF_HINT);
  if (side) ts__pfq_pump(side, PF_SIDE_LINES);
  __m256 acc[8], sm = _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; 4 * j + 4 <= nb; j++) {
    if (pf && per < lines)
      for (int64_t o = j * per; o < (j + 1) * per && o < lines; o++) _mm_prefetch(pw + 64 * o, PF_HINT);
    step(kind, 4, RP, TT, g, j, p0, n, nb, q, dx, sx, gs, acc, &sm);
  }
  switch (nb - 4 * j) { /* the last 1..3 blocks (constant counts: unrolled like the rest) */
    case 1: step(kind, 1, RP, TT, g, j, p0, n, nb, q, dx, sx, gs, acc, &sm); break;
    case 2: step(kind, 2, RP, TT, g, j, p0, n, nb, q, dx, sx, gs, acc, &sm); break;
    case 3: step(kind, 3, RP, TT, g, j, p0, n, nb, q, dx, sx, gs, acc, &sm); break;
    default: break;
  }
  finish(kind, RP, TT, acc, sm, p0, nr, y, ldy);
}

/* Prefill tiles of PRE_RP row pairs x TT tokens over the groups of rows [c0, c1) (a chunk) for tokens
 * t0 .. t0 + TT - 1. */
AI void pre_tiles(int kind, int TT, const uint8_t *base, size_t rb, int64_t c0, int64_t c1, const ts__qbatch *x, int t0,
                  float *y, int64_t ldy) {
  const int64_t n = x->n, nb = n / 32;
  const int8_t *q = x->q + (size_t)t0 * (size_t)n;
  const float *dx = x->d + (size_t)t0 * (size_t)nb, *sx = x->s + (size_t)t0 * (size_t)nb;
  const int32_t *gs = x->gsum + (size_t)t0 * (size_t)nb * 8;
  for (int64_t r = c0; r < c1; r += 8) {
    const uint8_t *w = base + (size_t)r * rb;
    if (t0 == 0) /* the first pass reads the chunk from memory: the group PF_PREFILL ahead */
      for (size_t o = 0; o < 8 * rb; o += 64) _mm_prefetch((const char *)w + PF_PREFILL + o, PF_HINT);
    const int nr = c1 - r < 8 ? (int)(c1 - r) : 8;
    for (int p0 = 0; 2 * p0 < nr; p0 += PRE_RP)
      tile(kind, PRE_RP, TT, w, 8 * rb, p0, nr, n, nb, q, dx, sx, gs, y + (size_t)t0 * (size_t)ldy + r, ldy, 0, NULL);
  }
}

AI void pgemm(int kind, const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  const uint8_t *base = P;
  const int64_t n = x->n, nb = n / 32;
  const size_t gb = 8 * rb; /* bytes per group */
  if (x->T == 1) { /* decode: one group x 1 token per tile, the groups in address order */
    const int pf = x->pf && x->pf->wpf > 0 ? x->pf->wpf : 0;
    for (int64_t r = 0; r < rows; r += 8)
      tile(kind, 4, 1, base + (size_t)r * rb, gb, 0, rows - r < 8 ? (int)(rows - r) : 8, n, nb, x->q, x->d, x->s, x->gsum,
           y + r, ldy, pf, x->pf);
    return;
  }
  int64_t chunk = (int64_t)((size_t)ts__pgemm_chunk_bytes() / gb) * 8;
  if (chunk < 8) chunk = 8;
  for (int64_t c0 = 0; c0 < rows; c0 += chunk) {
    const int64_t c1 = c0 + chunk < rows ? c0 + chunk : rows;
    for (int t0 = 0; t0 < x->T; t0 += PRE_TT) {
      switch (x->T - t0 < PRE_TT ? x->T - t0 : PRE_TT) {
#if PRE_TT == 4
        case 4: pre_tiles(kind, 4, base, rb, c0, c1, x, t0, y, ldy); break;
        case 3: pre_tiles(kind, 3, base, rb, c0, c1, x, t0, y, ldy); break;
#endif
        case 2: pre_tiles(kind, 2, base, rb, c0, c1, x, t0, y, ldy); break;
        default: pre_tiles(kind, 1, base, rb, c0, c1, x, t0, y, ldy); break;
      }
    }
  }
}

void ts__pgemm_q8_0_avx2(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q8_0, P, rb, rows, x, y, ldy);
}
void ts__pgemm_q4_0_avx2(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q4_0, P, rb, rows, x, y, ldy);
}
void ts__pgemm_q4_1_avx2(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q4_1, P, rb, rows, x, y, ldy);
}

/* gsum[t][b][g] = sum of elements 4g..4g+3 of block b (maddubs of ones, madd by ones: the 8 lanes of
 * one block in order), the qbatch contract of quant_internal.h. */
void ts__prep_packed_avx2(int64_t n, int T, const int8_t *q, int32_t *gsum) {
  const __m256i o8 = _mm256_set1_epi8(1), o16 = _mm256_set1_epi16(1);
  const int64_t nb = n / 32;
  for (int64_t i = 0; i < (int64_t)T * nb; i++) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 32 * i));
    _mm256_storeu_si256((__m256i *)(gsum + 8 * i), _mm256_madd_epi16(_mm256_maddubs_epi16(o8, v), o16));
  }
}
