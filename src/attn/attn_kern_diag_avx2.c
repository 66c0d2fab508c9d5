/* AVX2 kernels of DIAGONAL items (attn.h, TS_ATTN_SEG_DIAG): the AVX-512 file's structure
 * (attn_kern_diag_avx512.c) with 8 lanes and 16 ymm registers.
 *   Q K^T: 2 rows x 4 offsets of a run of consecutive offsets = 8 dot products in 8 ymm over d
 *          (chunks of 8); the 5 K rows they share are loaded one at a time, each used by the (row,
 *          offset) pairs that meet it; a transposing reduction (hadd) leaves offset u's 2 rows in
 *          lanes 2u, 2u + 1, stored into S^T[u][i..i+1]. Blocks at the mask's edges take a path
 *          over 8 clamped rows; blocks without an allowed cell are skipped.
 *   P V:   O[i][:] += P[t][i] V[i + offs[t]][:] for 4 rows x 16 columns in 8 ymm, P broadcast; each
 *          V row of a run is loaded once for the rows it serves.
 * bf16 inputs are widened on load (a shift), fp32 accumulation. Contracts: attn_internal.h. */
#include <immintrin.h>

#include "attn/attn_internal.h"

#define UNROLL _Pragma("GCC unroll 16")
#define PIN(x) __asm__("" : "+x"(x)) /* keeps a shared vector in its register (see attn_avx512_inl.h) */

static inline __m256i lanes8(int64_t count) { /* first min(count, 8) lanes on (count >= 0) */
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(count > 8 ? 8 : count)), idx);
}

/* 8 fp32 from a [.][d] array of fp32 (bf == false) or bf16 at element idx: the first cnt (lanes
 * past it 0; cnt >= 8: all 8). */
static inline __attribute__((always_inline)) __m256 ld8(const void *base, bool bf, int64_t idx, int64_t cnt) {
  if (bf) {
    __m128i h;
    if (cnt >= 8) {
      h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + idx));
    } else { /* a tail, element by element (bf16 has no masked load) */
      uint16_t t[8] = {0};
      for (int64_t x = 0; x < cnt; x++) t[x] = ((const uint16_t *)base)[idx + x];
      h = _mm_loadu_si128((const __m128i *)t);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  return cnt >= 8 ? _mm256_loadu_ps((const float *)base + idx) : _mm256_maskload_ps((const float *)base + idx, lanes8(cnt));
}

/* Rows i, i+1 (i even) hold an allowed cell at an offset of [t0, t1) (mask NULL: always). */
static inline bool pair_any(const uint16_t *mask, int nv, int i, int t0, int t1) {
  if (!mask) return true;
  unsigned x = 0;
  for (int t = t0; t < t1; t++) x |= mask[t * nv + i / 16];
  return (x >> (i % 16)) & 3;
}

/* One ymm of the 8 sums: lane j = sum of the lanes of v[j]. */
static inline __attribute__((always_inline)) __m256 reduce8(const __m256 v[8]) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3); /* [v0..v3 | v0..v3] halves */
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Stores lanes 2u, 2u+1 (rows 0, 1 of offset u) to st[u][0..1] for u < T (and row 1 only if two). */
static inline __attribute__((always_inline)) void store_pairs(__m256 s, int T, float *st, int64_t lds) {
  float t[8];
  _mm256_storeu_ps(t, s);
  for (int u = 0; u < T; u++) st[u * lds] = t[2 * u], st[u * lds + 1] = t[2 * u + 1];
}

/* acc[2u + r] = Q row qr[r] . K row kr[2u + r] over d. full: d a multiple of 8. */
static inline __attribute__((always_inline)) __m256 qk_pairs(const void *q, const void *k, bool bf, int64_t d,
                                                             const int64_t qr[2], const int64_t kr[8], bool shared) {
  __m256 acc[8];
  UNROLL for (int x = 0; x < 8; x++) acc[x] = _mm256_setzero_ps();
  for (int64_t c = 0; c < d; c += 8) {
    const int64_t cnt = d - c;
    __m256 q0 = ld8(q, bf, qr[0] * d + c, cnt), q1 = ld8(q, bf, qr[1] * d + c, cnt);
    PIN(q0);
    PIN(q1);
    if (shared) { /* row r at offset u meets key kr[0] + r + u: 5 rows, each loaded once */
      UNROLL for (int s = 0; s < 5; s++) {
        __m256 kv = ld8(k, bf, (kr[0] + s) * d + c, cnt);
        PIN(kv);
        if (s < 4) acc[2 * s] = _mm256_fmadd_ps(q0, kv, acc[2 * s]);             /* r = 0, u = s */
        if (s >= 1) acc[2 * (s - 1) + 1] = _mm256_fmadd_ps(q1, kv, acc[2 * (s - 1) + 1]); /* r = 1, u = s - 1 */
      }
    } else {
      UNROLL for (int x = 0; x < 8; x++) acc[x] = _mm256_fmadd_ps(x & 1 ? q1 : q0, ld8(k, bf, kr[x] * d + c, cnt), acc[x]);
    }
  }
  return reduce8(acc);
}

static inline __attribute__((always_inline)) void qk_diag_impl(const void *q, const void *k, bool bf, int64_t d,
                                                               int64_t n, int64_t row0, const int32_t *offs, int nd,
                                                               int br, const uint16_t *mask, float *st, int64_t lds) {
  const int nv = (br + 15) / 16;
  for (int ta = 0, tb; ta < nd; ta = tb) {
    tb = ts__attn_run_end(offs, nd, ta);
    for (int t0 = ta; t0 < tb; t0 += 4) {
      const int T = tb - t0 < 4 ? tb - t0 : 4;
      for (int i = 0; i < br; i += 2) {
        if (!pair_any(mask, nv, i, t0, t0 + T)) continue; /* nothing allowed: the softmax masks it all */
        const int64_t qrow = row0 + i, k0 = qrow + offs[t0];
        int64_t qr[2], kr[8];
        const bool fast = i + 2 <= br && k0 >= 0 && k0 + 4 < n;
        qr[0] = qrow, qr[1] = row0 + (i + 1 < br ? i + 1 : br - 1);
        UNROLL for (int x = 0; x < 8; x++) /* x = 2u + r; offsets past the run: scratch, not stored */
          kr[x] = fast ? k0 + x / 2 + (x & 1) : ts__attn_clamp_row(qr[x & 1] + offs[t0 + (x / 2 < T ? x / 2 : T - 1)], n);
        const __m256 s = fast ? qk_pairs(q, k, bf, d, qr, kr, true) : qk_pairs(q, k, bf, d, qr, kr, false);
        float *dst = st + (int64_t)t0 * lds + i;
        if (i + 1 < br) {
          store_pairs(s, T, dst, lds);
        } else { /* the last row alone: lane 2u */
          float t[8];
          _mm256_storeu_ps(t, s);
          for (int u = 0; u < T; u++) dst[u * lds] = t[2 * u];
        }
      }
    }
  }
}

void ts__attn_avx2_qk_diag(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                           int64_t n, int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask,
                           float *st, int64_t lds) {
  if (q32) qk_diag_impl(q32, k32, false, d, n, row0, offs, nd, br, mask, st, lds);
  else qk_diag_impl(q16, k16, true, d, n, row0, offs, nd, br, mask, st, lds);
}

/* RR rows (1..4) x the columns [e0, e0 + 16): O rows += P x V rows, by runs of consecutive offsets. */
static inline __attribute__((always_inline)) void pv_block(const float *pt, int64_t lds, const void *v, bool bf,
                                                           int64_t d, int64_t n, int64_t row0, const int32_t *offs,
                                                           int nd, int RR, int64_t e0, float *o, int64_t ldo,
                                                           const float *alpha) {
  const int64_t c0 = d - e0, c1 = d - e0 - 8 > 0 ? d - e0 - 8 : 0;
  const __m256i m0 = lanes8(c0), m1 = lanes8(c1);
  __m256 acc[4][2];
  UNROLL for (int r = 0; r < 4; r++) { /* alpha NULL: a fresh item, O starts at zero (not read) */
    if (r >= RR) break;
    if (!alpha) {
      acc[r][0] = acc[r][1] = _mm256_setzero_ps();
      continue;
    }
    const __m256 a = _mm256_set1_ps(alpha[r]);
    acc[r][0] = _mm256_mul_ps(_mm256_maskload_ps(o + r * ldo + e0, m0), a);
    acc[r][1] = _mm256_mul_ps(_mm256_maskload_ps(o + r * ldo + e0 + 8, m1), a);
  }
  for (int ta = 0, tb; ta < nd; ta = tb) {
    tb = ts__attn_run_end(offs, nd, ta);
    const int L = tb - ta;
    const int64_t v0 = row0 + offs[ta];
    if (RR == 4 && v0 >= 0 && v0 + L + 3 <= n) { /* V row v0 + s serves row r at offset ta + s - r */
      const float *p = pt + (int64_t)ta * lds;
      for (int s = 0; s < L + 3; s++) {
        __m256 w0 = ld8(v, bf, (v0 + s) * d + e0, c0), w1 = ld8(v, bf, (v0 + s) * d + e0 + 8, c1);
        PIN(w0);
        PIN(w1);
        UNROLL for (int r = 0; r < 4; r++) {
          const int u = s - r;
          if (u < 0 || u >= L) continue;
          const __m256 pb = _mm256_broadcast_ss(p + (int64_t)u * lds + r);
          acc[r][0] = _mm256_fmadd_ps(pb, w0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(pb, w1, acc[r][1]);
        }
      }
      continue;
    }
    for (int t = ta; t < tb; t++) {
      const float *p = pt + (int64_t)t * lds;
      UNROLL for (int r = 0; r < 4; r++) {
        if (r >= RR) break;
        const __m256 pb = _mm256_broadcast_ss(p + r);
        const int64_t key = ts__attn_clamp_row(row0 + r + offs[t], n) * d + e0; /* outside [0, n): P = 0 */
        acc[r][0] = _mm256_fmadd_ps(pb, ld8(v, bf, key, c0), acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(pb, ld8(v, bf, key + 8, c1), acc[r][1]);
      }
    }
  }
  UNROLL for (int r = 0; r < 4; r++) {
    if (r >= RR) break;
    _mm256_maskstore_ps(o + r * ldo + e0, m0, acc[r][0]);
    _mm256_maskstore_ps(o + r * ldo + e0 + 8, m1, acc[r][1]);
  }
}

static inline __attribute__((always_inline)) void pv_diag_impl(const float *pt, int64_t lds, const void *v, bool bf,
                                                               int64_t d, int64_t n, int64_t row0, const int32_t *offs,
                                                               int nd, int br, float *o, int64_t ldo,
                                                               const float *alpha) {
  for (int64_t e0 = 0; e0 < d; e0 += 16) {
    int i = 0;
    for (; i + 4 <= br; i += 4)
      pv_block(pt + i, lds, v, bf, d, n, row0 + i, offs, nd, 4, e0, o + (int64_t)i * ldo, ldo, alpha ? alpha + i : NULL);
    const float *pi = pt + i, *ai = alpha ? alpha + i : NULL;
    float *oi = o + (int64_t)i * ldo;
    switch (br - i) {
      case 3: pv_block(pi, lds, v, bf, d, n, row0 + i, offs, nd, 3, e0, oi, ldo, ai); break;
      case 2: pv_block(pi, lds, v, bf, d, n, row0 + i, offs, nd, 2, e0, oi, ldo, ai); break;
      case 1: pv_block(pi, lds, v, bf, d, n, row0 + i, offs, nd, 1, e0, oi, ldo, ai); break;
      default: break;
    }
  }
}

void ts__attn_avx2_pv_diag(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n,
                           int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask, float *o,
                           int64_t ldo, const float *alpha) {
  (void)mask; /* P = 0 where masked: the runs are computed whole */
  if (v32) pv_diag_impl(pt, lds, v32, false, d, n, row0, offs, nd, br, o, ldo, alpha);
  else pv_diag_impl(pt, lds, v16, true, d, n, row0, offs, nd, br, o, ldo, alpha);
}
