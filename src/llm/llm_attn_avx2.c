/* AVX2 (+FMA, F16C) attention work item in the orders of llama.cpp's AVX2 build (llm_attn.c has the
 * definition and the reference ts__att_item_ref8; the two agree bit for bit, tests/test_llm.c).
 * Up to RMAX rows at once (query heads sharing a KV head in decode, consecutive tokens in a batch),
 * so that each converted K^T vector and V row slice serves all of them:
 *   scores, 8 keys per vector (lanes = keys, from a K^T row piece): key j's dot over dimensions has
 *     8 dimension lanes l; each lane's partial sum is built as llama.cpp builds it and the 8 are
 *     summed in its tree, lane after lane in the tree's order (only ~3 partial sums live per row):
 *       single-token batch (dot_f16_one8): lane l = (p0+p2)+(p1+p3), p_c the fma chain over
 *         dimensions 32 cc + 8 c + l; then t_g = a_g + a_(g+4), (t0+t1)+(t2+t3) (hadd8);
 *       batch (tinyBLAS, dot_f16_many8): lane l = one fma chain over dimensions l, l+8, ..; then
 *         (t0+t2)+(t1+t3) (hsum8);
 *   softmax: the AVX2 exp per 8 keys, a double sum of hsum8 per group;
 *   output, 8 dimensions per vector (lanes = dimensions, from V rows): the dot over keys has 8 key
 *     lanes l (key k in lane k % 8), built and summed the same two ways (keys past a row's last
 *     one have probability 0 in llama.cpp's padded range and are left out).
 * The decode cost is small beside the matmuls (~0.2 ms of a 7-9 ms SmolLM2 token at 200 keys), so
 * the kernel favours plain loops over register tricks. */
#include <immintrin.h>
#include <math.h>

#include "llm/llm_avx2.h"
#include "llm/llm_internal.h"

#define HD_MAX 256
#define RMAX 4
#define AI static inline __attribute__((always_inline))

static inline __m256 tail_mask(int n) { /* lanes < n */
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* keys [kb, lo) before the row's sliding window: P = 0 (llm_internal.h, ts__att_item.win) */
static void softmax_row(float *s, int kb, int lo, int valid) {
  for (int j = kb; j < lo; j++) s[j] = -INFINITY;
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int j = kb;
  for (; j + 8 <= valid; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
  float lanes[8], m = -INFINITY;
  _mm256_storeu_ps(lanes, mx);
  for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
  for (; j < valid; j++) m = s[j] > m ? s[j] : m;
  const __m256 vm = _mm256_set1_ps(m);
  double sum = 0;
  for (j = kb; j < valid; j += 8) { /* the scratch is padded: lanes past valid are read, then zeroed */
    __m256 e = ts__vexpf8v(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    if (valid - j < 8) e = _mm256_and_ps(e, tail_mask(valid - j));
    if (j < lo) e = _mm256_andnot_ps(tail_mask(lo - j), e); /* exp(-inf) is 0 too; this says so */
    _mm256_storeu_ps(s + j, e);
    sum += (double)ts__hsum8v(e);
  }
  const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
  for (j = kb; j < valid; j += 8)
    _mm256_storeu_ps(s + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(s + j), inv),
                                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
}

/* ---- scores of 8 keys (B: their K^T piece, dimension i at B + 16 i) -------------------------- */

/* p_r = the fma chain over dimensions i0, i0 + step, .. < hd of q_r[i] K[i] */
AI void chain(int R, int hd, const float (*q)[HD_MAX], const uint16_t *B, int i0, int step, __m256 *p) {
  for (int r = 0; r < R; r++) p[r] = _mm256_setzero_ps();
  for (int i = i0; i < hd; i += step) {
    const __m256 k = ts__ld8h(B + 16 * i);
    for (int r = 0; r < R; r++) p[r] = _mm256_fmadd_ps(_mm256_set1_ps(q[r][i]), k, p[r]);
  }
}

/* dimension lane l's partial sum: (p0+p2)+(p1+p3) (one), or the one chain (many) */
AI void sc_lane(int R, int one, int hd, const float (*q)[HD_MAX], const uint16_t *B, int l, __m256 *a) {
  if (!one) {
    chain(R, hd, q, B, l, 8, a);
    return;
  }
  __m256 x[RMAX], y[RMAX], z[RMAX];
  chain(R, hd, q, B, l, 32, x);
  chain(R, hd, q, B, l + 16, 32, y);
  for (int r = 0; r < R; r++) x[r] = _mm256_add_ps(x[r], y[r]);
  chain(R, hd, q, B, l + 8, 32, y);
  chain(R, hd, q, B, l + 24, 32, z);
  for (int r = 0; r < R; r++) a[r] = _mm256_add_ps(x[r], _mm256_add_ps(y[r], z[r]));
}

/* t_g = a_g + a_(g+4) */
AI void sc_pair(int R, int one, int hd, const float (*q)[HD_MAX], const uint16_t *B, int g, __m256 *t) {
  __m256 b[RMAX];
  sc_lane(R, one, hd, q, B, g, t);
  sc_lane(R, one, hd, q, B, g + 4, b);
  for (int r = 0; r < R; r++) t[r] = _mm256_add_ps(t[r], b[r]);
}

/* S_r[8 keys] = the dot's tree (one: (t0+t1)+(t2+t3); many: (t0+t2)+(t1+t3)) times scale; all 8
 * lanes stored (the scratch is padded; lanes past a row's keys are masked by its softmax) */
AI void sc_block(int R, int one, int hd, const float (*q)[HD_MAX], const uint16_t *B, float scale, float *S, int64_t lds) {
  __m256 u[RMAX], v[RMAX], w[RMAX];
  sc_pair(R, one, hd, q, B, 0, u);
  sc_pair(R, one, hd, q, B, one ? 1 : 2, v);
  for (int r = 0; r < R; r++) u[r] = _mm256_add_ps(u[r], v[r]);
  sc_pair(R, one, hd, q, B, one ? 2 : 1, v);
  sc_pair(R, one, hd, q, B, 3, w);
  for (int r = 0; r < R; r++)
    _mm256_storeu_ps(S + (size_t)r * (size_t)lds, _mm256_mul_ps(_mm256_add_ps(u[r], _mm256_add_ps(v[r], w[r])), _mm256_set1_ps(scale)));
}

/* ---- output: 8 dimensions i0.. of R rows ---------------------------------------------------- */

/* key lane l's partial sum over keys k = l (mod 8) below each row's valid count: one chain (many),
 * or (one; every row the same valid) four chains, key k in chain (k / 8) % 4, as (p0+p2)+(p1+p3) */
AI void pv_lane(int R, int one, int kb, const int *valid, int vmin, int vmax, const float *P, int64_t lds,
                const uint16_t *V, int hd, int i0, int l, __m256 *a) {
  if (!one) {
    for (int r = 0; r < R; r++) a[r] = _mm256_setzero_ps();
    int k = kb + l;
    for (; k < vmin; k += 8) {
      const __m256 v = ts__ld8h(V + (size_t)k * (size_t)hd + i0);
      for (int r = 0; r < R; r++) a[r] = _mm256_fmadd_ps(_mm256_set1_ps(P[(size_t)r * (size_t)lds + k]), v, a[r]);
    }
    for (; k < vmax; k += 8) {
      const __m256 v = ts__ld8h(V + (size_t)k * (size_t)hd + i0);
      for (int r = 0; r < R; r++)
        if (k < valid[r]) a[r] = _mm256_fmadd_ps(_mm256_set1_ps(P[(size_t)r * (size_t)lds + k]), v, a[r]);
    }
    return;
  }
  __m256 p[4][RMAX];
  for (int c = 0; c < 4; c++)
    for (int r = 0; r < R; r++) p[c][r] = _mm256_setzero_ps();
  for (int k0 = kb + l; k0 < vmax; k0 += 32)
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      const int k = k0 + 8 * c;
      if (k >= vmax) break;
      const __m256 v = ts__ld8h(V + (size_t)k * (size_t)hd + i0);
      for (int r = 0; r < R; r++) p[c][r] = _mm256_fmadd_ps(_mm256_set1_ps(P[(size_t)r * (size_t)lds + k]), v, p[c][r]);
    }
  for (int r = 0; r < R; r++) a[r] = _mm256_add_ps(_mm256_add_ps(p[0][r], p[2][r]), _mm256_add_ps(p[1][r], p[3][r]));
}

AI void pv_pair(int R, int one, int kb, const int *valid, int vmin, int vmax, const float *P, int64_t lds,
                const uint16_t *V, int hd, int i0, int g, __m256 *t) {
  __m256 b[RMAX];
  pv_lane(R, one, kb, valid, vmin, vmax, P, lds, V, hd, i0, g, t);
  pv_lane(R, one, kb, valid, vmin, vmax, P, lds, V, hd, i0, g + 4, b);
  for (int r = 0; r < R; r++) t[r] = _mm256_add_ps(t[r], b[r]);
}

AI void pv_slice(int R, int one, int kb, const int *valid, int vmin, int vmax, const float *P, int64_t lds,
                 const uint16_t *V, int hd, int i0, float *out, int64_t ldo) {
  __m256 u[RMAX], v[RMAX], w[RMAX];
  pv_pair(R, one, kb, valid, vmin, vmax, P, lds, V, hd, i0, 0, u);
  pv_pair(R, one, kb, valid, vmin, vmax, P, lds, V, hd, i0, one ? 1 : 2, v);
  for (int r = 0; r < R; r++) u[r] = _mm256_add_ps(u[r], v[r]);
  pv_pair(R, one, kb, valid, vmin, vmax, P, lds, V, hd, i0, one ? 2 : 1, v);
  pv_pair(R, one, kb, valid, vmin, vmax, P, lds, V, hd, i0, 3, w);
  for (int r = 0; r < R; r++)
    _mm256_storeu_ps(out + (size_t)r * (size_t)ldo + i0, _mm256_add_ps(u[r], _mm256_add_ps(v[r], w[r])));
}

/* ---- R rows: scores, softmax, output --------------------------------------------------------- */

AI void rows(int R, int one, const ts__att_item *it, const float (*qs)[HD_MAX], const int *valid, const int *lo, float *S,
            float *out) {
  const int hd = it->hd;
  int vmax = 0, vmin = valid[0], kb = lo[0];
  for (int r = 0; r < R; r++) {
    vmax = valid[r] > vmax ? valid[r] : vmax;
    vmin = valid[r] < vmin ? valid[r] : vmin;
    kb = lo[r] < kb ? lo[r] : kb;
  }
  kb &= ~63; /* the rows' first key, at a 64-key boundary (llm_internal.h, ts__att_item.win) */
  for (int j0 = kb; j0 < vmax; j0 += 8) {
    if (one && (j0 & 15) == 0 && j0 + 32 < vmax) /* the K block after next, into L2 (decode reads the
                                                  * cache once per token) */
      for (int o = 0; o < 32 * hd; o += 64) _mm_prefetch((const char *)(it->KT + (size_t)(j0 + 32) * (size_t)hd) + o, _MM_HINT_T1);
    sc_block(R, one, hd, qs, it->KT + ts__kidx(hd, 0, j0), it->scale, S + j0, it->lds);
  }
  for (int r = 0; r < R; r++) softmax_row(S + (size_t)r * (size_t)it->lds, kb, lo[r], valid[r]);
  for (int i0 = 0; i0 < hd; i0 += 8) pv_slice(R, one, kb, valid, vmin, vmax, S, it->lds, it->V, hd, i0, out, it->ldo);
}

#define ROWS(ONE)                                                                \
  switch (R) {                                                                   \
    case 1: rows(1, ONE, it, qs + r0, valid + r0, lo + r0, S, out); break;       \
    case 2: rows(2, ONE, it, qs + r0, valid + r0, lo + r0, S, out); break;       \
    case 3: rows(3, ONE, it, qs + r0, valid + r0, lo + r0, S, out); break;       \
    default: rows(4, ONE, it, qs + r0, valid + r0, lo + r0, S, out); break;      \
  }

void ts__att_item_avx2(const ts__att_item *it) {
  const int hd = it->hd, m = it->m;
  /* single-token batches at several positions (dp 1) never occur in decode: the reference */
  if (hd % 32 || hd > HD_MAX || m < 1 || m > TS__ATT_ROWS || (it->one && it->dp != 0)) {
    ts__att_item_ref8(it);
    return;
  }
  _Alignas(32) float qs[TS__ATT_ROWS][HD_MAX];
  int valid[TS__ATT_ROWS], lo[TS__ATT_ROWS];
  for (int r = 0; r < m; r++) {
    valid[r] = it->p0 + r * it->dp + 1;
    lo[r] = it->win > 0 && valid[r] > it->win ? valid[r] - it->win : 0;
    for (int i = 0; i < hd; i += 8)
      _mm256_store_ps(qs[r] + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(it->q + (size_t)r * (size_t)it->ldq + i),
                                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  for (int r0 = 0; r0 < m; r0 += RMAX) {
    const int R = m - r0 < RMAX ? m - r0 : RMAX;
    float *S = it->S + (size_t)r0 * (size_t)it->lds, *out = it->out + (size_t)r0 * (size_t)it->ldo;
    if (it->one) ROWS(1)
    else ROWS(0)
  }
}
