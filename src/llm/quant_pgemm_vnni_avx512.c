/* AVX-512 VNNI GEMM on packed block rows (layout in quant_internal.h: groups of 8 rows in two
 * halves of 4, read front to back: per step of 4 blocks the scales, then each block's rows side by
 * side) against Q8 activations, in llama.cpp's order (cpu_order.h), so every output equals the
 * scalar reference dot bit for bit:
 * y[t][r] = hsum8 over blocks of fma(d_w d_x, lane) (+ Q4_1's sum of m_w s_x, block after block).
 *
 * A decode tile is one group (8 rows, its two halves side by side: two independent fma chains) x
 * 1 token. The integer part of a block dot is exact in any order; only the fp32 accumulation is
 * fixed per row and lane, so a vector holds the 8 lanes of 2 or 4 rows for one block and the
 * accumulators advance block by block:
 *   Q4_0 / Q4_1: a half's block is 64 bytes, the 16 nibble bytes of rows 0..3 (128-bit lane k =
 *     row k); lo = q & 15 are elements 0..15, hi = q >> 4 elements 16..31, so vpdpbusd against the
 *     token's elements 0..15 (16..31) broadcast to every 128-bit lane gives in int32 lane 4k + g the
 *     exact sum of elements 4g..4g+3 (16+4g..) of row k: ggml's lanes g and 4+g, in two
 *     accumulators. Q4_0's -8 enters as the dot's starting value (-8 x the activation's group sums).
 *   Q8_0: a half's block is 128 bytes, rows 0|1 then 2|3 (256 bits each, the int8 values + 128,
 *     unsigned for vpdpbusd), so int32 lane 8i + g holds lane g of row 2p + i; -128 x the group
 *     sums is the starting value.
 * Scales: per 4 blocks a half's 16 fp16 scales ([row k][block h], lane 4k + h) are converted and
 * multiplied by the token's d_x (exact: two fp16 values), and block h's per-lane scales are one
 * in-lane permute (Q8_0: the rows' halves are spread to 256-bit halves once per 4 blocks). Q4_1's
 * m_w s_x (exact) is added per row, block after block, in lane 4k of a third accumulator.
 * Compared with the first layout (each row contiguous, 4 rows transposed in registers, scales
 * transposed per 16 blocks) this is ~1.5x the rate per core (docs/notes/BENCHMARKS.md, issue 7).
 * Decode (T = 1) streams all groups, every byte in address order: one linear stream per thread,
 * which the hardware prefetchers follow (with software prefetches where they were measured to
 * help: see wpf below); prefill walks L1d-sized chunks of groups (ts__pgemm_chunk_bytes) with every token inside, so a
 * chunk is read from memory once and from L1/L2 by the other tokens, in tiles of one half (4 rows)
 * x up to 4 tokens (tile_tok): a block's quants are loaded and unpacked once for the 4 tokens
 * (prefill 1.06-1.16x over 1-token tiles, docs/notes/BENCHMARKS.md). */
#include <immintrin.h>

#include "llm/quant_internal.h"

#define AI static inline __attribute__((always_inline))

enum { K_Q8_0 = 0, K_Q4_0 = 1, K_Q4_1 = 2 };

/* Software prefetch of the weights in decode: a run-time distance (bytes ahead of the tile being
 * read; 0 none), the side queue's wpf, which the LLM runtime measures per machine, team and model
 * (ts__llm_tune_wpf, llm_stream.c) because the right answer differs by machine:
 *  - Zen 4 (32 MB L3 per CCD; the model streams from memory): none. A tile reads its group front
 *    to back and a thread's share of every matrix is one ascending stream, which the hardware
 *    prefetchers alone read at the memory's rate; a plain read loop lost a quarter of its rate with
 *    T1 prefetches 16 KB ahead (they take the miss buffers the hardware prefetchers use), and decode
 *    with 512 B or 1 KB ahead was no faster (docs/notes/BENCHMARKS.md, issue 7).
 *  - a Xeon VM with a large shared L3 (the 97 MB model mostly L3-resident): the hardware prefetchers
 *    fall behind once the kernels' arithmetic is interleaved with the loads, and one core's L3
 *    rate is bounded by its outstanding misses; T1 prefetches 16 KB ahead took two-thread decode
 *    from ~225 to ~410 tok/s (docs/notes/BENCHMARKS.md, issue 7).
 * A thread's pieces of all matrices lie back to back in decode's order (ts__llm_layout), so the
 * prefetches at the end of one phase run into the next phase's first weights. */
/* Prefill: each chunk's first pass prefetches the group 16 KB ahead into L2 (T1: a T0 prefetch
 * holds one of the L1's few miss buffers until its line arrives; the kernel is compute-bound
 * there and the other tokens' passes read the chunk from L1/L2). */
#define PF_PREFILL 16384
#define PF_HINT _MM_HINT_T1
/* Side lines prefetched per tile from the qbatch's queue (while the tile's weights stream in) */
#ifndef PF_SIDE_LINES
#define PF_SIDE_LINES 8
#endif

/* fp16 scales of nbj (1..4) blocks of 4 rows, [row k][block h] (rows 2 nbj bytes apart) -> fp32
 * lane 4k + h (lanes h >= nbj zero) */
AI __m512 ld_scales(const uint8_t *p, int nbj) {
  if (nbj == 4) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
  const __mmask8 m = (__mmask8)((1u << nbj) - 1u);
  const __m128i a = _mm_unpacklo_epi64(_mm_maskz_loadu_epi16(m, p), _mm_maskz_loadu_epi16(m, p + 2 * nbj));
  const __m128i b = _mm_unpacklo_epi64(_mm_maskz_loadu_epi16(m, p + 4 * nbj), _mm_maskz_loadu_epi16(m, p + 6 * nbj));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}

/* the token's values of nbj blocks in every 128-bit lane (lanes h >= nbj zero) */
AI __m512 bcast4(const float *p, int nbj) {
  if (nbj == 4) return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  return _mm512_broadcast_f32x4(_mm_maskz_loadu_ps((__mmask8)((1u << nbj) - 1u), p));
}

/* element h of every 128-bit lane, in all four of its lanes (h a constant after unrolling) */
AI __m512 lane_h(__m512 v, int h) {
  switch (h) {
    case 0: return _mm512_permute_ps(v, 0x00);
    case 1: return _mm512_permute_ps(v, 0x55);
    case 2: return _mm512_permute_ps(v, 0xAA);
    default: return _mm512_permute_ps(v, 0xFF);
  }
}

AI __m512i bcast128(const void *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }
AI __m512i bcast256(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }

/* bytes of a block of one row (so a step of 4 blocks of a group of 8 rows is 32 of them) */
AI size_t bsz(int kind) { return kind == K_Q8_0 ? 34 : kind == K_Q4_0 ? 18 : 20; }

/* Blocks 4j .. 4j + nbj - 1 of ng halves (i0, i0 + 1, ..) of the group of 8 rows at g against TT
 * tokens (token u's arrays at q + u n, dx + u nb, sx + u nb, gs + 8 u nb), ng x TT <= 4: decode runs
 * both halves x 1 token, prefill one half x up to 4 tokens. Step j starts at g + 32 j bsz: the d
 * scales of half i at + 8 nbj i (Q4_1's m after all d, at + 16 nbj + 8 nbj i), then block h of
 * half i at + SC + h (8 rows' quants) + i (4 rows' quants). Half i and token u accumulate into
 * a[3 (i TT + u) ..]:
 * Q4: a0 / a1 lanes 4k + g = row k's ggml lane g / 4 + g, a2 lane 4k = row k's sum of m_w s_x;
 * Q8_0: a0 / a1 lanes 8i + g = lane g of row i / 2 + i.
 * Each accumulator is one chain of fmas, block after block (the order is fixed, so every output's
 * bits are those of one half x one token). Two halves side by side give the core two independent
 * chains and share the token's broadcasts (decode); several tokens share each block's loaded and
 * unpacked quants and converted scales (prefill). */
AI void blocks4(int kind, int nbj, int ng, int TT, const uint8_t *g, int i0, int64_t n, int64_t nb, int64_t j,
                const int8_t *q, const float *dx, const float *sx, const int32_t *gs, __m512 *a, __m256 *m8) {
  const uint8_t *sb = g + (size_t)j * 32 * bsz(kind);
  const size_t SC = (size_t)(kind == K_Q4_1 ? 32 : 16) * (size_t)nbj;
  const int64_t b0 = 4 * j;
  __m512 S[4], M[4];
#pragma GCC unroll 2
  for (int i = 0; i < ng; i++) {
    const __m512 W = ld_scales(sb + 8 * nbj * (i0 + i), nbj);
#pragma GCC unroll 4
    for (int u = 0; u < TT; u++) S[i * TT + u] = _mm512_mul_ps(W, bcast4(dx + u * nb + b0, nbj));
  }
  if (kind == K_Q8_0) {
    __m512 S01[4], S23[4];
#pragma GCC unroll 4
    for (int x = 0; x < ng * TT; x++) {
      S01[x] = _mm512_shuffle_f32x4(S[x], S[x], 0x50);
      S23[x] = _mm512_shuffle_f32x4(S[x], S[x], 0xFA);
    }
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++) {
      if (h >= nbj) break;
      const int64_t b = b0 + h;
#pragma GCC unroll 2
      for (int i = 0; i < ng; i++) {
        const uint8_t *Q = sb + SC + 128 * (i0 + i);
        const __m512i w01 = _mm512_loadu_si512(Q + 256 * h), w23 = _mm512_loadu_si512(Q + 256 * h + 64);
#pragma GCC unroll 4
        for (int u = 0; u < TT; u++) {
          const int x = i * TT + u;
          const __m512i xv = bcast256(q + u * n + 32 * b);
          const __m512i c = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bcast256(gs + 8 * (u * nb + b)), 7));
          a[3 * x] = _mm512_fmadd_ps(lane_h(S01[x], h), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c, w01, xv)), a[3 * x]);
          a[3 * x + 1] = _mm512_fmadd_ps(lane_h(S23[x], h), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c, w23, xv)), a[3 * x + 1]);
        }
      }
    }
    return;
  }
  const __m512i lom = _mm512_set1_epi8(0x0F);
#ifdef TS_PGEMM_GFNI
  /* the high nibble of every byte as one affine map over GF(2): output bit i = input bit i + 4 */
  const __m512i hin = _mm512_set1_epi64(0x1020408000000000LL);
#endif
  if (kind == K_Q4_1) {
#pragma GCC unroll 2
    for (int i = 0; i < ng; i++) {
      const __m512 W = ld_scales(sb + 16 * nbj + 8 * nbj * (i0 + i), nbj);
#pragma GCC unroll 4
      for (int u = 0; u < TT; u++) M[i * TT + u] = _mm512_mul_ps(W, bcast4(sx + u * nb + b0, nbj));
    }
    if (m8) /* decode (both halves, one token): block h's m_w s_x of the 8 rows in one vector, lane r =
             * row r (half r / 4's lane 4 (r % 4) + h), added to the rows' running sums block after
             * block: 4 two-source permutes and 4 8-lane adds per step instead of 6 permutes and 8
             * 16-lane adds */
#pragma GCC unroll 4
      for (int h = 0; h < 4; h++) {
        if (h >= nbj) break;
        const __m512i ix = _mm512_setr_epi32(h, 4 + h, 8 + h, 12 + h, 16 + h, 20 + h, 24 + h, 28 + h, 0, 0, 0, 0, 0, 0, 0, 0);
        *m8 = _mm256_add_ps(*m8, _mm512_castps512_ps256(_mm512_permutex2var_ps(M[0], ix, M[1])));
      }
  }
#pragma GCC unroll 4
  for (int h = 0; h < 4; h++) {
    if (h >= nbj) break;
    const int64_t b = b0 + h;
#pragma GCC unroll 2
    for (int i = 0; i < ng; i++) {
      const __m512i v = _mm512_loadu_si512(sb + SC + 128 * h + 64 * (i0 + i));
#ifdef TS_PGEMM_GFNI
      const __m512i lo = _mm512_and_si512(v, lom), hi = _mm512_gf2p8affine_epi64_epi8(v, hin, 0);
#else
      const __m512i lo = _mm512_and_si512(v, lom), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lom);
#endif
#pragma GCC unroll 4
      for (int u = 0; u < TT; u++) {
        const int x = i * TT + u;
        __m512i c0 = _mm512_setzero_si512(), c1 = c0;
        if (kind == K_Q4_0) {
          c0 = _mm512_sub_epi32(c0, _mm512_slli_epi32(bcast128(gs + 8 * (u * nb + b)), 3));
          c1 = _mm512_sub_epi32(c1, _mm512_slli_epi32(bcast128(gs + 8 * (u * nb + b) + 4), 3));
        }
        const __m512i pl = _mm512_dpbusd_epi32(c0, lo, bcast128(q + u * n + 32 * b));
        const __m512i ph = _mm512_dpbusd_epi32(c1, hi, bcast128(q + u * n + 32 * b + 16));
        const __m512 sc = lane_h(S[x], h);
        a[3 * x] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(pl), a[3 * x]);
        a[3 * x + 1] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(ph), a[3 * x + 1]);
        if (kind == K_Q4_1 && !m8) a[3 * x + 2] = _mm512_add_ps(a[3 * x + 2], h == 0 ? M[x] : lane_h(M[x], h));
      }
    }
  }
}

/* one group's accumulators -> y[k] (k < nr): hsum8 per row, ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)),
 * row k's result in lane 4k (rows nr..3 are the group's zero padding) */
AI void finish(int kind, const __m512 *a, int nr, float *y) {
  __m512 t;
  if (kind == K_Q8_0) { /* a_i + a_(i+4) into lanes 0-3 / 8-11 of each pair, then rows 0..3 in 128-bit lanes */
    const __m512 t0 = _mm512_add_ps(a[0], _mm512_shuffle_f32x4(a[0], a[0], 0xB1));
    const __m512 t1 = _mm512_add_ps(a[1], _mm512_shuffle_f32x4(a[1], a[1], 0xB1));
    t = _mm512_shuffle_f32x4(t0, t1, 0x88);
  } else {
    t = _mm512_add_ps(a[0], a[1]); /* lane 4k + g: a_g + a_(g+4) of row k */
  }
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
  if (kind == K_Q4_1) t = _mm512_add_ps(t, a[2]);
  const __m128 r = _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), t));
  _mm_mask_storeu_ps(y, (__mmask8)((1u << nr) - 1u), r);
}

/* y[k] (k < nr) = row k of the group of 8 rows at w (gb bytes) . token; the weights pf bytes
 * ahead prefetched (0: none) */
AI void tile(int kind, const uint8_t *w, size_t gb, int nr, int64_t nb, const int8_t *q, const float *dx,
             const float *sx, const int32_t *gs, float *y, int pf, ts__pfq *side) {
  /* the group pf bytes ahead, its lines spread over the steps of 4 blocks (per lines each; all at
   * once when there is no whole step): one burst of ~20-45 prefetches stalls when the core's miss
   * buffers are full */
  const int64_t steps = nb / 4, lines = (int64_t)((gb + 63) / 64);
  const int64_t per = steps > 0 ? (lines + steps - 1) / steps : lines;
  const char *pw = (const char *)w + pf;
  if (pf && per == lines)
    for (int64_t o = 0; o < lines; o++) _mm_prefetch(pw + 64 * o, PF_HINT);
  if (side) ts__pfq_pump(side, PF_SIDE_LINES);
  __m512 a[6];
#pragma GCC unroll 6
  for (int i = 0; i < 6; i++) a[i] = _mm512_setzero_ps();
  __m256 m8 = _mm256_setzero_ps(), *m8p = kind == K_Q4_1 ? &m8 : NULL; /* Q4_1: the rows' sums of m_w s_x */
  int64_t j = 0;
  for (; 4 * j + 4 <= nb; j++) {
    if (pf && per < lines)
      for (int64_t o = j * per; o < (j + 1) * per && o < lines; o++) _mm_prefetch(pw + 64 * o, PF_HINT);
    blocks4(kind, 4, 2, 1, w, 0, 0, nb, j, q, dx, sx, gs, a, m8p);
  }
  switch (nb - 4 * j) { /* the last 1..3 blocks (constant counts: unrolled like the rest) */
    case 1: blocks4(kind, 1, 2, 1, w, 0, 0, nb, j, q, dx, sx, gs, a, m8p); break;
    case 2: blocks4(kind, 2, 2, 1, w, 0, 0, nb, j, q, dx, sx, gs, a, m8p); break;
    case 3: blocks4(kind, 3, 2, 1, w, 0, 0, nb, j, q, dx, sx, gs, a, m8p); break;
    default: break;
  }
  if (kind == K_Q4_1) { /* row k of half i to lane 4k of that half's a2, as finish adds it */
    const __m512 m = _mm512_castps256_ps512(m8);
    a[2] = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0), m);
    a[5] = _mm512_permutexvar_ps(_mm512_setr_epi32(4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0), m);
  }
  finish(kind, a, nr < 4 ? nr : 4, y);
  if (nr > 4) finish(kind, a + 3, nr - 4, y + 4);
}

/* y[u][k] (k < nr) = row k of half i0 of the group at w . token u, for TT (1..4) tokens (y rows ldy
 * apart) */
AI void tile_tok(int kind, int TT, const uint8_t *w, int i0, int nr, int64_t n, int64_t nb, const int8_t *q, const float *dx,
                 const float *sx, const int32_t *gs, float *y, int64_t ldy) {
  __m512 a[12];
#pragma GCC unroll 12
  for (int i = 0; i < 3 * TT; i++) a[i] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; 4 * j + 4 <= nb; j++) blocks4(kind, 4, 1, TT, w, i0, n, nb, j, q, dx, sx, gs, a, NULL);
  switch (nb - 4 * j) {
    case 1: blocks4(kind, 1, 1, TT, w, i0, n, nb, j, q, dx, sx, gs, a, NULL); break;
    case 2: blocks4(kind, 2, 1, TT, w, i0, n, nb, j, q, dx, sx, gs, a, NULL); break;
    case 3: blocks4(kind, 3, 1, TT, w, i0, n, nb, j, q, dx, sx, gs, a, NULL); break;
    default: break;
  }
#pragma GCC unroll 4
  for (int u = 0; u < TT; u++) finish(kind, a + 3 * u, nr, y + (size_t)u * (size_t)ldy);
}

AI void pgemm(int kind, const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  const uint8_t *base = P;
  const int64_t n = x->n, nb = n / 32;
  const size_t gb = 8 * rb; /* bytes per group */
  int64_t chunk = x->T > 1 ? (int64_t)((size_t)ts__pgemm_chunk_bytes() / gb) * 8 : rows;
  if (chunk < 8) chunk = 8;
  if (x->T == 1) chunk = rows;
  for (int64_t c0 = 0; c0 < rows; c0 += chunk) {
    const int64_t c1 = c0 + chunk < rows ? c0 + chunk : rows;
    if (x->T > 1) { /* prefill: tiles of one half x up to 4 tokens, the chunk's groups for each block of tokens */
      for (int t0 = 0; t0 < x->T; t0 += 4) {
        const int TT = x->T - t0 < 4 ? x->T - t0 : 4;
        const int8_t *q = x->q + (size_t)t0 * (size_t)n;
        const float *dx = x->d + (size_t)t0 * (size_t)nb, *sx = x->s + (size_t)t0 * (size_t)nb;
        const int32_t *gs = x->gsum + (size_t)t0 * (size_t)nb * 8;
        for (int64_t r = c0; r < c1; r += 8) {
          const uint8_t *w = base + (size_t)r * rb;
          if (t0 == 0) /* the first pass reads the chunk from memory: the group PF_PREFILL ahead */
            for (size_t o = 0; o < gb; o += 64) _mm_prefetch((const char *)w + PF_PREFILL + o, PF_HINT);
          for (int i0 = 0; i0 < 2 && r + 4 * i0 < c1; i0++) {
            const int nr = c1 - r - 4 * i0 < 4 ? (int)(c1 - r - 4 * i0) : 4;
            float *yr = y + (size_t)t0 * (size_t)ldy + r + 4 * i0;
            switch (TT) {
              case 4: tile_tok(kind, 4, w, i0, nr, n, nb, q, dx, sx, gs, yr, ldy); break;
              case 3: tile_tok(kind, 3, w, i0, nr, n, nb, q, dx, sx, gs, yr, ldy); break;
              case 2: tile_tok(kind, 2, w, i0, nr, n, nb, q, dx, sx, gs, yr, ldy); break;
              default: tile_tok(kind, 1, w, i0, nr, n, nb, q, dx, sx, gs, yr, ldy); break;
            }
          }
        }
      }
      continue;
    }
    const int pfd = x->pf && x->pf->wpf > 0 ? x->pf->wpf : 0;
    for (int t = 0; t < x->T; t++) { /* decode: T = 1 */
      const int8_t *q = x->q + (size_t)t * (size_t)n;
      const float *dx = x->d + (size_t)t * (size_t)nb, *sx = x->s + (size_t)t * (size_t)nb;
      const int32_t *gs = x->gsum + (size_t)t * (size_t)nb * 8;
      for (int64_t r = c0; r < c1; r += 8)
        tile(kind, base + (size_t)r * rb, gb, c1 - r < 8 ? (int)(c1 - r) : 8, nb, q, dx, sx, gs,
             y + (size_t)t * (size_t)ldy + r, t == 0 ? pfd : 0, t == 0 ? x->pf : NULL);
    }
  }
}

#ifdef TS_PGEMM_GFNI /* quant_pgemm_gfni_avx512.c: the Q4 kernels again, high nibbles by GFNI */
void ts__pgemm_q4_0_avx512_gfni(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q4_0, P, rb, rows, x, y, ldy);
}
void ts__pgemm_q4_1_avx512_gfni(const void *P, size_t rb, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy) {
  pgemm(K_Q4_1, P, rb, rows, x, y, ldy);
}
#else
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
      const __m512i s = _mm512_dpbusd_epi32(z, ones, bytes >= 64 ? _mm512_loadu_si512(qt + 32 * b)
                                                                 : _mm512_maskz_loadu_epi8(((__mmask64)1 << bytes) - 1, qt + 32 * b));
      _mm512_mask_storeu_epi32(g + 8 * b, bytes >= 64 ? (__mmask16)0xFFFF : (__mmask16)0x00FF, s);
    }
  }
}
#endif
