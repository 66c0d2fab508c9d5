/* AVX-512 kernels of DIAGONAL items (attn.h, TS_ATTN_SEG_DIAG): rows i of a sub-tile against keys
 * i + offs[t], the cells along nd diagonals of the mask. On a sliding window in raster order every
 * query sees its keys at the same offsets (window2d k = 7 on a 64-wide grid: 7 runs of 7 offsets
 * dy*64 + dx), so a sub-tile computes almost only allowed cells, where a rectangle of keys for a row
 * block computes the block's whole key union (a 4 x 4 token patch reaches 10 x 10 keys, 2.04 cells
 * per allowed cell).
 *
 * The keys differ from row to row, so the rows cannot share K in SIMD lanes the way the tile kernels
 * broadcast one key over 16 query lanes. Here the head dimension is in the lanes, and the offsets
 * are taken in runs of consecutive values (a window's dx), where row r at offset u and row r + 1 at
 * offset u - 1 meet the same key:
 *   Q K^T: 4 rows x 4 offsets of a run = 16 dot products accumulated in 16 zmm over d from 4 Q rows
 *          and the 7 K rows they share (read in place, [n][d]); a transposing reduction (16
 *          vectors -> one vector of 16 sums: 22 shuffles, 8 blends and 15 adds) leaves offset t's 4
 *          rows in 128-bit lane t, stored into S^T[t][i..i+3] (the layout the shared softmax kernel
 *          reads, rows in its lanes). A run's 4 offsets go over all row blocks of the sub-tile in
 *          turn, so their K rows stay in L1. Blocks at the mask's edges (keys outside [0, n), rows
 *          past br) take a general path over 16 clamped rows; blocks without an allowed cell are
 *          skipped.
 *   P V:   O[i][:] += P[t][i] V[i + offs[t]][:] for 4 rows x 64 columns in 16 zmm, P broadcast; each
 *          V row of a run is loaded once for the (up to 4) rows it serves; 4-row runs without an
 *          allowed cell are skipped.
 * bf16 inputs are widened on load (a shift), fp32 accumulation; on the bf16 dot path (CPUs with
 * AVX-512 BF16) the interior Q K^T blocks take bf16 pairs by vdpbf16ps instead (qk_block_run_dot,
 * compiled only into ts__attn_avx512_qk_diag_dot by attn_kern_diag_bf16_avx512.c, which includes this
 * file with TS_DIAG_BF16 and the BF16 flag; this file itself is built without it, CMakeLists.txt).
 * Contracts: attn_internal.h. */
#include "attn/attn_avx512_inl.h"

/* 16 fp32 from a [.][d] array of fp32 (bf == false) or bf16 (bf == true) at element idx, lanes m. */
static inline __attribute__((always_inline)) __m512 ld16(const void *base, bool bf, int64_t idx, __mmask16 m) {
  if (bf) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)base + idx);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return _mm512_maskz_loadu_ps(m, (const float *)base + idx);
}

/* Whether rows i .. i+3 (i a multiple of 4) hold an allowed cell at any offset of [t0, t1): the
 * item's mask words [nd][nv] (NULL: unmasked, always). */
static inline bool block_any(const uint16_t *mask, int nv, int i, int t0, int t1) {
  if (!mask) return true;
  unsigned x = 0;
  for (int t = t0; t < t1; t++) x |= mask[t * nv + i / 16];
  return (x >> (i % 16)) & 0xF;
}

/* 4 rows x 4 offsets: qr[r] Q rows, kr[4r + t] K rows (all inside [0, n)); S^T[t][i0 + r] for t < T. */
static inline __attribute__((always_inline)) void qk_block(const void *q, const void *k, bool bf, int64_t d,
                                                           const int64_t qr[4], const int64_t kr[16], int T, float *st,
                                                           int64_t lds) {
  __m512 acc[16];
  UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 m = ts__mask16(d - c);
    __m512 qv[4];
    UNROLL for (int r = 0; r < 4; r++) qv[r] = ld16(q, bf, qr[r] * d + c, m);
    UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_fmadd_ps(qv[x / 4], ld16(k, bf, kr[x] * d + c, m), acc[x]);
  }
  const __m512 s = reduce16(acc);
  store_lanes4(st, lds, s, T);
}

/* 4 consecutive rows x 4 consecutive offsets (a chunk of a run of consecutive offsets), every key
 * inside [0, n): row r of offset u meets key k0 + r + u, so the 16 dot products read 7 K rows (the
 * diagonal shares them), from one base with constant displacements when d is a constant. Stores
 * offsets u < T only (the run may end inside the chunk). */
static inline __attribute__((always_inline)) void qk_block_run(const void *q, const void *k, bool bf, int64_t d,
                                                               int64_t qrow, int64_t k0, int T, float *st, int64_t lds) {
  const int64_t es = bf ? 2 : 4;
  const char *qp = (const char *)q + qrow * d * es, *kp = (const char *)k + k0 * d * es;
  __m512 acc[16];
  UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_setzero_ps();
  _Pragma("GCC unroll 4") for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 m = ts__mask16(d - c);
    __m512 qv[4], kv[7];
    UNROLL for (int r = 0; r < 4; r++) qv[r] = ld16(qp + (r * d + c) * es, bf, 0, m);
    UNROLL for (int x = 0; x < 7; x++) {
      kv[x] = ld16(kp + (x * d + c) * es, bf, 0, m);
      PIN(kv[x]);
    }
    UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_fmadd_ps(qv[x / 4], kv[x / 4 + x % 4], acc[x]);
  }
  const __m512 s = reduce16(acc); /* 128-bit lane u: offset u's 4 rows */
  store_lanes4(st, lds, s, T);
}

#ifdef TS_DIAG_BF16 /* attn_kern_diag_bf16_avx512.c: this file again, built with AVX-512 BF16 */
/* The same block from bf16 rows with vdpbf16ps (the bf16 dot path, CPUs with AVX-512 BF16): 32
 * elements of the head dimension per vector as 16 pairs, so a block takes half the multiply-adds and
 * no widening (a widened bf16 load is a load, a zero extension and a shift). Lane p of an
 * accumulator sums pairs p of every step; the reduction adds all 16 lanes as before. */
static inline __attribute__((always_inline)) void qk_block_run_dot(const uint16_t *q, const uint16_t *k, int64_t d,
                                                                   int64_t qrow, int64_t k0, int T, float *st,
                                                                   int64_t lds) {
  const uint16_t *qp = q + qrow * d, *kp = k + k0 * d;
  __m512 acc[16];
  UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_setzero_ps();
  _Pragma("GCC unroll 2") for (int64_t c = 0; c < d; c += 32) {
    const __mmask32 m = d - c >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << (d - c)) - 1;
    __m512bh qv[4], kv[7];
    UNROLL for (int r = 0; r < 4; r++) qv[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, qp + r * d + c);
    UNROLL for (int x = 0; x < 7; x++) {
      kv[x] = (__m512bh)_mm512_maskz_loadu_epi16(m, kp + x * d + c);
      PIN(kv[x]);
    }
    UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_dpbf16_ps(acc[x], qv[x / 4], kv[x / 4 + x % 4]);
  }
  const __m512 s = reduce16(acc);
  store_lanes4(st, lds, s, T);
}

#endif

/* Offsets in runs of consecutive values (a window's dx), each cut into chunks of 4; for a chunk all
 * row blocks of the sub-tile in turn, so its K rows (16 + 6) stay in L1 from block to block.
 * dot (bf16 only): interior blocks by vdpbf16ps (qk_block_run_dot); edge blocks widen as always. */
static inline __attribute__((always_inline)) void qk_diag_impl(const void *q, const void *k, bool bf, bool dot, int64_t d,
                                                               int64_t n, int64_t row0, const int32_t *offs, int nd,
                                                               int br, const uint16_t *mask, float *st, int64_t lds) {
  const int nv = (br + 15) / 16;
  (void)dot;
  for (int ta = 0, tb; ta < nd; ta = tb) {
    tb = ts__attn_run_end(offs, nd, ta);
    for (int t0 = ta; t0 < tb; t0 += 4) {
      const int T = tb - t0 < 4 ? tb - t0 : 4;
      for (int i = 0; i < br; i += 4) {
        const int64_t qrow = row0 + i, k0 = qrow + offs[t0];
        float *s = st + (int64_t)t0 * lds + i;
        if (!block_any(mask, nv, i, t0, t0 + T)) continue; /* nothing allowed: the softmax masks it all */
        if (i + 4 <= br && k0 >= 0 && k0 + 6 < n) {
#ifdef TS_DIAG_BF16
          if (dot) qk_block_run_dot(q, k, d, qrow, k0, T, s, lds);
          else
#endif
            qk_block_run(q, k, bf, d, qrow, k0, T, s, lds);
          continue;
        }
        int64_t qr[4], kr[16]; /* rows past br: scratch lanes; keys outside [0, n): masked cells, read clamped */
        UNROLL for (int r = 0; r < 4; r++) qr[r] = row0 + (i + r < br ? i + r : br - 1);
        UNROLL for (int x = 0; x < 16; x++) kr[x] = ts__attn_clamp_row(qr[x / 4] + offs[t0 + (x % 4 < T ? x % 4 : T - 1)], n);
        qk_block(q, k, bf, d, qr, kr, T, s, lds);
      }
    }
  }
}

#ifndef TS_DIAG_BF16
void ts__attn_avx512_qk_diag(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                             int64_t n, int64_t row0, const int32_t *offs, int nd, int br,
                             const uint16_t *mask, float *st, int64_t lds) {
  if (q32 && d == 64) qk_diag_impl(q32, k32, false, false, 64, n, row0, offs, nd, br, mask, st, lds); /* constant displacements */
  else if (q32) qk_diag_impl(q32, k32, false, false, d, n, row0, offs, nd, br, mask, st, lds);
  else if (d == 64) qk_diag_impl(q16, k16, true, false, 64, n, row0, offs, nd, br, mask, st, lds);
  else qk_diag_impl(q16, k16, true, false, d, n, row0, offs, nd, br, mask, st, lds);
}

#else
void ts__attn_avx512_qk_diag_dot(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                                 int64_t n, int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask,
                                 float *st, int64_t lds) {
  (void)q32, (void)k32;
  if (d == 64) qk_diag_impl(q16, k16, true, true, 64, n, row0, offs, nd, br, mask, st, lds);
  else qk_diag_impl(q16, k16, true, true, d, n, row0, offs, nd, br, mask, st, lds);
}
#endif

#ifndef TS_DIAG_BF16 /* P V: in the base file only */

/* An item's offsets as runs of consecutive values, found once for all its row blocks: run x is
 * offsets [t0[x], t0[x + 1]); any[x][w] = the rows of 16-row group w with an allowed cell in it. */
typedef struct diag_runs {
  int n;
  int16_t t0[TS_ATTN_TILE_MAX + 1];
  uint16_t any[TS_ATTN_TILE_MAX][16];
} diag_runs;

static void runs_make(const int32_t *offs, int nd, const uint16_t *mask, int nv, diag_runs *R) {
  R->n = 0;
  for (int ta = 0, tb; ta < nd; ta = tb) {
    tb = ts__attn_run_end(offs, nd, ta);
    for (int w = 0; w < nv; w++) {
      unsigned x = mask ? 0 : 0xFFFF;
      for (int t = ta; mask && t < tb; t++) x |= mask[t * nv + w];
      R->any[R->n][w] = (uint16_t)x;
    }
    R->t0[R->n++] = (int16_t)ta;
  }
  R->t0[R->n] = (int16_t)nd;
}

/* bf16 V at d = 64 (pv_block's perm): a V row's 64 values in two 64-byte loads, each widened by
 * two unpacks against zero (vpunpck{l,h}wd: a bf16 in the high half of a dword is its fp32 value)
 * instead of four half loads, zero extensions and shifts. The unpacks leave 32 columns in the
 * order (0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31), so the accumulators hold O in that
 * order: O rows are permuted on load (vpermt2ps) and back on store. */
static inline __attribute__((always_inline)) void ld_v64_perm(const uint16_t *p, __m512 vv[4]) {
  const __m512i z = _mm512_setzero_si512(), w0 = _mm512_loadu_si512(p), w1 = _mm512_loadu_si512(p + 32);
  vv[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, w0));
  vv[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, w0));
  vv[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, w1));
  vv[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, w1));
}
/* 32 columns a (0-15), b (16-31) in natural order <-> (lo, hi) in the unpacks' order */
static inline __attribute__((always_inline)) void perm_in(__m512 a, __m512 b, __m512 *lo, __m512 *hi) {
  *lo = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27), b);
  *hi = _mm512_permutex2var_ps(a, _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31), b);
}
static inline __attribute__((always_inline)) void perm_out(__m512 lo, __m512 hi, __m512 *a, __m512 *b) {
  *a = _mm512_permutex2var_ps(lo, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23), hi);
  *b = _mm512_permutex2var_ps(lo, _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31), hi);
}

/* RR rows (1..4) x the columns [e0, e0 + 64) of the head dimension (lane masks cm[4]); perm: bf16 V
 * at d = 64, e0 = 0 (ld_v64_perm). */
static inline __attribute__((always_inline)) void pv_block(const float *pt, int64_t lds, const void *v, bool bf, bool perm,
                                                           int64_t d, int64_t n, int64_t row0, const int32_t *offs,
                                                           const diag_runs *R, int RR, int i0, int64_t e0,
                                                           const __mmask16 cm[4], float *o, int64_t ldo,
                                                           const float *alpha) {
  __m512 acc[4][4];
  UNROLL for (int r = 0; r < 4; r++) { /* alpha NULL: a fresh item, O starts at zero (not read) */
    if (r >= RR) break;
    if (!alpha) {
      UNROLL for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
      continue;
    }
    const __m512 a = _mm512_set1_ps(alpha[r]);
    UNROLL for (int c = 0; c < 4; c++) acc[r][c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(cm[c], o + r * ldo + e0 + 16 * c), a);
    if (perm) {
      perm_in(acc[r][0], acc[r][1], &acc[r][0], &acc[r][1]);
      perm_in(acc[r][2], acc[r][3], &acc[r][2], &acc[r][3]);
    }
  }
  const int64_t es = bf ? 2 : 4;
  for (int x = 0; x < R->n; x++) { /* runs of consecutive offsets */
    const int ta = R->t0[x], tb = R->t0[x + 1], L = tb - ta;
    const int64_t v0 = row0 + offs[ta];
    if (RR == 4 && !((R->any[x][i0 / 16] >> (i0 % 16)) & 0xF)) continue; /* the 4 rows have no cell in this run */
    if (RR == 4 && L >= 3 && v0 >= 0 && v0 + L + 3 <= n) {
      /* V row v0 + s serves row r at offset ta + s - r: loaded once for the (up to 4) rows it serves;
       * rows 0..s for s < 3 (head), all 4 for 3 <= s < L, rows s - L + 1..3 for the last 3 */
      const char *vp = (const char *)v + (v0 * d + e0) * es;
      const float *p = pt + (int64_t)ta * lds;
#define PV_ROW(S, R)                                                                                                   \
  {                                                                                                                   \
    const __m512 pb = _mm512_set1_ps(p[(int64_t)((S) - (R)) * lds + (R)]);                                            \
    UNROLL for (int c = 0; c < 4; c++) acc[R][c] = _mm512_fmadd_ps(pb, vv[c], acc[R][c]);                            \
  }
      __m512 vv[4];
      UNROLL for (int s2 = 0; s2 < 3; s2++) {
        if (perm) ld_v64_perm((const uint16_t *)vp + s2 * d, vv);
        else UNROLL for (int c = 0; c < 4; c++) vv[c] = ld16(vp + (s2 * d + 16 * c) * es, bf, 0, cm[c]);
        UNROLL for (int c = 0; c < 4; c++) PIN(vv[c]);
        UNROLL for (int r = 0; r <= s2; r++) PV_ROW(s2, r)
      }
      for (int s2 = 3; s2 < L; s2++) {
        if (perm) ld_v64_perm((const uint16_t *)vp + s2 * d, vv);
        else UNROLL for (int c = 0; c < 4; c++) vv[c] = ld16(vp + (s2 * d + 16 * c) * es, bf, 0, cm[c]);
        UNROLL for (int c = 0; c < 4; c++) PIN(vv[c]);
        UNROLL for (int r = 0; r < 4; r++) PV_ROW(s2, r)
      }
      UNROLL for (int j = 0; j < 3; j++) {
        if (perm) ld_v64_perm((const uint16_t *)vp + (L + j) * d, vv);
        else UNROLL for (int c = 0; c < 4; c++) vv[c] = ld16(vp + ((L + j) * d + 16 * c) * es, bf, 0, cm[c]);
        UNROLL for (int c = 0; c < 4; c++) PIN(vv[c]);
        UNROLL for (int r = j + 1; r < 4; r++) PV_ROW(L + j, r)
      }
#undef PV_ROW
      continue;
    }
    for (int t = ta; t < tb; t++) {
      const float *p = pt + (int64_t)t * lds;
      if (RR == 4 && _mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(p), _mm_setzero_ps())) == 0) continue; /* all 0 */
      UNROLL for (int r = 0; r < 4; r++) {
        if (r >= RR) break;
        const __m512 pb = _mm512_set1_ps(p[r]);
        const int64_t key = ts__attn_clamp_row(row0 + r + offs[t], n) * d + e0; /* outside [0, n): P = 0 */
        __m512 vv[4];
        if (perm) ld_v64_perm((const uint16_t *)v + key, vv);
        else UNROLL for (int c = 0; c < 4; c++) vv[c] = ld16(v, bf, key + 16 * c, cm[c]);
        UNROLL for (int c = 0; c < 4; c++) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
      }
    }
  }
  UNROLL for (int r = 0; r < 4; r++) {
    if (r >= RR) break;
    if (perm) {
      perm_out(acc[r][0], acc[r][1], &acc[r][0], &acc[r][1]);
      perm_out(acc[r][2], acc[r][3], &acc[r][2], &acc[r][3]);
    }
    UNROLL for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(o + r * ldo + e0 + 16 * c, cm[c], acc[r][c]);
  }
}

static inline __attribute__((always_inline)) void pv_diag_impl(const float *pt, int64_t lds, const void *v, bool bf,
                                                               int64_t d, int64_t n, int64_t row0, const int32_t *offs,
                                                               int nd, int br, const uint16_t *mask, float *o,
                                                               int64_t ldo, const float *alpha) {
  diag_runs R;
  runs_make(offs, nd, mask, (br + 15) / 16, &R);
  const bool perm = bf && d == 64;
  for (int64_t e0 = 0; e0 < d; e0 += 64) {
    __mmask16 cm[4];
    for (int c = 0; c < 4; c++) cm[c] = e0 + 16 * c < d ? ts__mask16(d - e0 - 16 * c) : 0;
    int i = 0;
    for (; i + 4 <= br; i += 4)
      pv_block(pt + i, lds, v, bf, perm, d, n, row0 + i, offs, &R, 4, i, e0, cm, o + (int64_t)i * ldo, ldo, alpha ? alpha + i : NULL);
    const float *pi = pt + i, *ai = alpha ? alpha + i : NULL;
    float *oi = o + (int64_t)i * ldo;
    switch (br - i) { /* the last rows: never skipped (a partial group) */
      case 3: pv_block(pi, lds, v, bf, perm, d, n, row0 + i, offs, &R, 3, i, e0, cm, oi, ldo, ai); break;
      case 2: pv_block(pi, lds, v, bf, perm, d, n, row0 + i, offs, &R, 2, i, e0, cm, oi, ldo, ai); break;
      case 1: pv_block(pi, lds, v, bf, perm, d, n, row0 + i, offs, &R, 1, i, e0, cm, oi, ldo, ai); break;
      default: break;
    }
  }
}

void ts__attn_avx512_pv_diag(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n,
                             int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask, float *o,
                             int64_t ldo, const float *alpha) {
  if (v32 && d == 64) pv_diag_impl(pt, lds, v32, false, 64, n, row0, offs, nd, br, mask, o, ldo, alpha);
  else if (v32) pv_diag_impl(pt, lds, v32, false, d, n, row0, offs, nd, br, mask, o, ldo, alpha);
  else if (d == 64) pv_diag_impl(pt, lds, v16, true, 64, n, row0, offs, nd, br, mask, o, ldo, alpha);
  else pv_diag_impl(pt, lds, v16, true, d, n, row0, offs, nd, br, mask, o, ldo, alpha);
}
#endif /* !TS_DIAG_BF16 */
