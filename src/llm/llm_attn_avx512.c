/* AVX-512 attention work item (llm_attn.c has the definition and the reference; the two agree bit
 * for bit). In llama.cpp's two dot orders (cpu_order.h):
 *   batches (dot_f16_many), up to 4 consecutive tokens of one query head at once (batch_rows):
 *     scores, 16 keys per vector (lanes = keys) from K^T rows: the per-key dot runs over 16 lanes of
 *       dimensions, so there are 16 partial sums, one per dimension lane l, each taking dimensions
 *       l, l+16, .. in one fma chain, and the 16 are summed with sum16's tree;
 *     softmax: vector exp per 16 keys, a double sum of sum16 per group;
 *     output, 16 dimensions per vector (lanes = dimensions): the dot over keys has 16 key lanes, so
 *       again 16 partial sums (one per key lane) with keys l, l+16, ..., summed with sum16's tree;
 *     the lanes are computed one after another in the tree's order (as in decode, below), so only
 *     a few partial sums per row are live, and each converted K^T vector and V row slice feeds the
 *     4 rows' fmas: 1.25 loads per fma instead of 2 (a broadcast of q or P and a K or V vector per
 *     fma, one row at a time), prefill at 2048 tokens 1.17-1.21x (docs/notes/BENCHMARKS.md);
 *   decode (dot_f16_one: per 64 elements four chains, then (a0+a2)+(a1+a3)), the query heads that
 *     share a KV head (up to 4 rows at once) together: each converted K^T row piece (16 keys) and V
 *     row slice (16 dimensions) serves every row; the dimension lanes (scores) and key lanes
 *     (output) are walked in the order of sum16's tree, (l, l+8) pairs then + 4 apart, so that only
 *     ~3 partial sums per row are live (all 16 lanes' sums at once spilled). */
#include <immintrin.h>

#include "kernels/simd_avx512.h" /* ts__mask16 */
#include "llm/llm_avx512.h"
#include "llm/llm_internal.h"

#define HD_MAX 256

/* 16 fp16 values to fp32, unmasked: a V row slice, or 16 keys' values of one dimension (a K^T row
 * piece; a block of 16 keys is always whole in the cache, kcap being a multiple of 16, each lane is
 * one key's own sum, and the keys past the valid ones are never stored, whatever their lanes
 * hold). A plain load folds into vcvtph2ps's memory operand (one fewer uop per conversion than a
 * masked load and a register conversion: hot decode items of 1 / 2 rows ~18% / 4-6% faster, 3 rows
 * the same; bench/bench_llm_att.c) */
static inline __m512 ld16h(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

static void softmax_row(float *s, int valid) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < valid; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, ts__mask16(valid - j), s + j));
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  double sum = 0;
  for (int j = 0; j < valid; j += 16) {
    const __mmask16 mk = ts__mask16(valid - j);
    const __m512 e = _mm512_maskz_mov_ps(mk, ts__vexpf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vm)));
    _mm512_storeu_ps(s + j, e); /* zeros past valid (the scratch is padded) */
    sum += (double)ts__sum16v(e);
  }
  const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
  for (int j = 0; j < valid; j += 16)
    _mm512_storeu_ps(s + j, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(s + j), inv),
                                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
}

/* ---- decode (dot_f16_one), R <= 4 rows sharing a KV head -------------------------------- */

#define AI static inline __attribute__((always_inline))
#define RMAX 4
/* K blocks prefetched ahead, into L2 (T1) like the V rows: on a Zen 4 host T0's burst of 32 lines
 * held the L1's miss buffers (decode at 512 + 128 tokens 1.01-1.12x faster, 4 of 4 pairs; 4 blocks
 * ahead measured the same as 2) */
#define PF_KBLK 2

/* Lane l's a_r = (p0+p2)+(p1+p3) of a 16-key block B ([hd][16]), p_c = the chain over 64-dim
 * chunks cc of q_r[i] B[i] (i = cc + 16c + l). The asm pins a_r here: gcc otherwise moved a whole
 * block's loads and products ahead of the sums and spilled them. */
AI void sc_lane(int R, int many, const int hd, const float (*q)[HD_MAX], const uint16_t *B, int l,
                __m512 *a) {
  if (many) { /* dot_f16_many: one chain over dimensions l, l + 16, .. */
    for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
    for (int i = l; i < hd; i += 16) {
      const __m512 kv = ld16h(B + 16 * i);
      for (int r = 0; r < R; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][i]), kv, a[r]);
    }
    for (int r = 0; r < R; r++) __asm__ volatile("" : "+v"(a[r])::"memory");
    return;
  }
  if (hd == 64) { /* one product per chain: p0 and p1 are exact (fp16 x fp16 in fp32), so p0 + p2
                  * rounds once like fma(q0, K0, p2); p2 (p3) from fma onto +0 as the chain makes it */
    const __m512 z = _mm512_setzero_ps();
    const __m512 k0 = ld16h(B + 16 * l), k1 = ld16h(B + 16 * (16 + l)), k2 = ld16h(B + 16 * (32 + l)),
                 k3 = ld16h(B + 16 * (48 + l));
    for (int r = 0; r < R; r++) {
      const __m512 s02 = _mm512_fmadd_ps(_mm512_set1_ps(q[r][l]), k0, _mm512_fmadd_ps(_mm512_set1_ps(q[r][32 + l]), k2, z));
      const __m512 s13 = _mm512_fmadd_ps(_mm512_set1_ps(q[r][16 + l]), k1, _mm512_fmadd_ps(_mm512_set1_ps(q[r][48 + l]), k3, z));
      a[r] = _mm512_add_ps(s02, s13);
      __asm__ volatile("" : "+v"(a[r])::"memory");
    }
    return;
  }
  __m512 p[RMAX][4];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < 4; c++) p[r][c] = _mm512_setzero_ps();
  for (int cc = 0; cc < hd; cc += 64)
    for (int c = 0; c < 4; c++) {
      const int i = cc + 16 * c + l;
      const __m512 kv = ld16h(B + 16 * i);
      for (int r = 0; r < R; r++) p[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][i]), kv, p[r][c]);
    }
  for (int r = 0; r < R; r++) {
    a[r] = _mm512_add_ps(_mm512_add_ps(p[r][0], p[r][2]), _mm512_add_ps(p[r][1], p[r][3]));
    __asm__ volatile("" : "+v"(a[r])::"memory");
  }
}

/* sum16's first two levels for lane g < 4: (a_g + a_(g+8)) + (a_(g+4) + a_(g+12)) */
AI void sc_quad(int R, int many, const int hd, const float (*q)[HD_MAX], const uint16_t *B, int g,
                __m512 *u) {
  __m512 a0[RMAX], a1[RMAX], a2[RMAX], a3[RMAX];
  sc_lane(R, many, hd, q, B, g, a0);
  sc_lane(R, many, hd, q, B, g + 8, a1);
  sc_lane(R, many, hd, q, B, g + 4, a2);
  sc_lane(R, many, hd, q, B, g + 12, a3);
  for (int r = 0; r < R; r++) u[r] = _mm512_add_ps(_mm512_add_ps(a0[r], a1[r]), _mm512_add_ps(a2[r], a3[r]));
}

/* S_r[keys of block B] = dot_f16_one (dot_f16_many when `many`)(q_r, K[key]) * scale; all 16 keys
 * computed (ld16h), those under mk (the rows' widest) stored, row r's under mks[r] */
AI void sc_block(int R, int many, const int hd, const float (*q)[HD_MAX], const uint16_t *B, __mmask16 mk,
                 const __mmask16 *mks, float scale, float *S, int64_t lds) {
  __m512 u0[RMAX], u1[RMAX], u2[RMAX], u3[RMAX];
  sc_quad(R, many, hd, q, B, 0, u0);
  sc_quad(R, many, hd, q, B, 2, u2);
  for (int r = 0; r < R; r++) u0[r] = _mm512_add_ps(u0[r], u2[r]);
  sc_quad(R, many, hd, q, B, 1, u1);
  sc_quad(R, many, hd, q, B, 3, u3);
  for (int r = 0; r < R; r++)
    _mm512_mask_storeu_ps(S + (size_t)r * (size_t)lds, mks ? mks[r] : mk,
                          _mm512_mul_ps(_mm512_add_ps(u0[r], _mm512_add_ps(u1[r], u3[r])), _mm512_set1_ps(scale)));
}

/* Key lane l's a[s][r] of out_r[i0 + 16 s ..+16) (NS slices of 16 dimensions, s < NS) over keys
 * k < valid[r] (valid NULL: all rows vmax; vmin <= every valid[r]): dot_f16_one's four chains j
 * (keys 16 j + l, + 64, ..) summed (p0+p2)+(p1+p3), or dot_f16_many's one chain (keys l, l + 16,
 * ..; NS 1), each V row slice loaded once for the R rows and each probability once for the NS
 * slices */
AI void pv_lane(int R, int NS, int many, const int *valid, int vmin, int vmax, const float *P, int64_t lds,
                const uint16_t *V, int hd, int i0, int l, __m512 (*a)[RMAX]) {
  if (many) {
    for (int r = 0; r < R; r++) a[0][r] = _mm512_setzero_ps();
    int k = l;
    for (; k < vmin; k += 16) { /* every row's keys */
      const __m512 v = ld16h(V + (size_t)k * (size_t)hd + i0);
      for (int r = 0; r < R; r++) a[0][r] = _mm512_fmadd_ps(_mm512_set1_ps(P[(size_t)r * (size_t)lds + k]), v, a[0][r]);
    }
    for (; k < vmax; k += 16) { /* the last keys of the later rows */
      const __m512 v = ld16h(V + (size_t)k * (size_t)hd + i0);
      for (int r = 0; r < R; r++)
        if (k < valid[r]) a[0][r] = _mm512_fmadd_ps(_mm512_set1_ps(P[(size_t)r * (size_t)lds + k]), v, a[0][r]);
    }
    for (int r = 0; r < R; r++) __asm__ volatile("" : "+v"(a[0][r])::"memory");
    return;
  }
  /* the four chains advance side by side, 4 R NS independent fmas per step (one chain after the
   * other and one slice at a time, the output pass ran ~4% and 3-15% slower) */
  __m512 p[2][RMAX][4];
  for (int s = 0; s < NS; s++)
    for (int r = 0; r < R; r++)
      for (int j = 0; j < 4; j++) p[s][r][j] = _mm512_setzero_ps();
  /* key k into chain j of every row and slice */
#define PV_STEP(k, j)                                                                          \
  do {                                                                                         \
    __m512 v[2];                                                                               \
    for (int s = 0; s < NS; s++) v[s] = ld16h(V + (size_t)(k) * (size_t)hd + i0 + 16 * s);     \
    for (int r = 0; r < R; r++) {                                                              \
      const __m512 pk = _mm512_set1_ps(P[(size_t)r * (size_t)lds + (k)]);                      \
      for (int s = 0; s < NS; s++) p[s][r][j] = _mm512_fmadd_ps(pk, v[s], p[s][r][j]);         \
    }                                                                                          \
  } while (0)
  int k0 = l;
  for (; k0 + 48 < vmax; k0 += 64) /* keys k0 + 16 j of every chain j */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) PV_STEP(k0 + 16 * j, j);
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) { /* the last keys: the first chains' only (j stays a constant: p in registers) */
    if (k0 + 16 * j >= vmax) break;
    PV_STEP(k0 + 16 * j, j);
  }
#undef PV_STEP
  for (int s = 0; s < NS; s++)
    for (int r = 0; r < R; r++)
      a[s][r] = _mm512_add_ps(_mm512_add_ps(p[s][r][0], p[s][r][2]), _mm512_add_ps(p[s][r][1], p[s][r][3]));
}

/* out_r[i0 + 16 s ..+16) (s < NS) = the key lanes of pv_lane summed in sum16's order */
AI void pv_slice(int R, int NS, int many, const int *valid, int vmin, int vmax, const float *P, int64_t lds,
                 const uint16_t *V, int hd, int i0, float *out, int64_t ldo) {
  static const int kL[8] = {0, 4, 2, 6, 1, 5, 3, 7}; /* (l, l+8) pairs: t0 + t4 = u0, t2 + t6 = u2, .. */
  __m512 u[2][RMAX][4], w02[2][RMAX];
#pragma GCC unroll 8
  for (int li = 0; li < 8; li++) {
    __m512 t[2][RMAX];
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
      __m512 a[2][RMAX];
      pv_lane(R, NS, many, valid, vmin, vmax, P, lds, V, hd, i0, kL[li] + 8 * half, a);
      for (int s = 0; s < NS; s++)
        for (int r = 0; r < R; r++) t[s][r] = half ? _mm512_add_ps(t[s][r], a[s][r]) : a[s][r];
    }
    for (int s = 0; s < NS; s++)
      for (int r = 0; r < R; r++)
        u[s][r][kL[li] & 3] = kL[li] < 4 ? t[s][r] : _mm512_add_ps(u[s][r][kL[li] & 3], t[s][r]);
    if (li == 3)
      for (int s = 0; s < NS; s++)
        for (int r = 0; r < R; r++) w02[s][r] = _mm512_add_ps(u[s][r][0], u[s][r][2]);
  }
  for (int s = 0; s < NS; s++)
    for (int r = 0; r < R; r++)
      _mm512_storeu_ps(out + (size_t)r * (size_t)ldo + i0 + 16 * s,
                       _mm512_add_ps(w02[s][r], _mm512_add_ps(u[s][r][1], u[s][r][3])));
}

/* R rows (q fp16-rounded in qs) at one position: scores, softmax, output */
AI void decode_rows(int R, const int hd, const ts__att_item *it, const float (*qs)[HD_MAX], float *S, float *out) {
  const int valid = it->p0 + 1;
  for (int j0 = 0; j0 < valid; j0 += 16) {
    /* K a few blocks ahead and this block's V rows (read by the output pass): the cache was last
     * read a token ago, and the side prefetches of the matmuls (llm_layer.c) do not hold all of it */
    const char *kn = (const char *)(it->KT + (size_t)(j0 + 16 * PF_KBLK) * (size_t)hd), *vb = (const char *)(it->V + (size_t)j0 * (size_t)hd);
    if (j0 + 16 * PF_KBLK < valid)
      for (int o = 0; o < 32 * hd; o += 64) _mm_prefetch(kn + o, _MM_HINT_T1);
    const int vbytes = valid - j0 < 16 ? (valid - j0) * 2 * hd : 32 * hd; /* the block's V rows */
    for (int o = 0; o < vbytes; o += 64) _mm_prefetch(vb + o, _MM_HINT_T1);
    sc_block(R, 0, hd, qs, it->KT + (size_t)j0 * (size_t)hd, ts__mask16(valid - j0), NULL, it->scale, S + j0, it->lds);
  }
  for (int r = 0; r < R; r++) softmax_row(S + (size_t)r * (size_t)it->lds, valid);
  /* two 16-dimension slices at a time up to 3 rows (each probability broadcast once for both; 4
   * rows x 2 slices would not fit the registers) */
  if (R <= 3)
    for (int i0 = 0; i0 < hd; i0 += 32) pv_slice(R, 2, 0, NULL, valid, valid, S, it->lds, it->V, hd, i0, out, it->ldo);
  else
    for (int i0 = 0; i0 < hd; i0 += 16) pv_slice(R, 1, 0, NULL, valid, valid, S, it->lds, it->V, hd, i0, out, it->ldo);
}

/* ---- batches (dot_f16_many), R <= 4 consecutive tokens of one query head ------------------ */

/* R rows (q fp16-rounded in qs, row r seeing valid[r] keys) of a batch item: each K^T vector and
 * V row slice serves all R rows (one load for R fmas instead of one per fma) */
AI void batch_rows(int R, const int hd, const ts__att_item *it, const float (*qs)[HD_MAX], const int *valid, float *S,
                   float *out) {
  int vmax = 0, vmin = valid[0];
  for (int r = 0; r < R; r++) {
    vmax = valid[r] > vmax ? valid[r] : vmax;
    vmin = valid[r] < vmin ? valid[r] : vmin;
  }
  for (int j0 = 0; j0 < vmax; j0 += 16) {
    __mmask16 mks[RMAX];
    for (int r = 0; r < R; r++) mks[r] = ts__mask16(valid[r] - j0);
    sc_block(R, 1, hd, qs, it->KT + (size_t)j0 * (size_t)hd, ts__mask16(vmax - j0), mks, it->scale, S + j0, it->lds);
  }
  for (int r = 0; r < R; r++) softmax_row(S + (size_t)r * (size_t)it->lds, valid[r]);
  for (int i0 = 0; i0 < hd; i0 += 16) pv_slice(R, 1, 1, valid, vmin, vmax, S, it->lds, it->V, hd, i0, out, it->ldo);
}

#define BATCH_R(HD)                                                                   \
  switch (R) {                                                                        \
    case 1: batch_rows(1, HD, it, qs + r0, valid + r0, S, out); break;                \
    case 2: batch_rows(2, HD, it, qs + r0, valid + r0, S, out); break;                \
    case 3: batch_rows(3, HD, it, qs + r0, valid + r0, S, out); break;                \
    default: batch_rows(4, HD, it, qs + r0, valid + r0, S, out); break;               \
  }

#define DECODE_R(HD)                                                 \
  switch (R) {                                                       \
    case 1: decode_rows(1, HD, it, qs + r0, S, out); break;          \
    case 2: decode_rows(2, HD, it, qs + r0, S, out); break;          \
    case 3: decode_rows(3, HD, it, qs + r0, S, out); break;          \
    default: decode_rows(4, HD, it, qs + r0, S, out); break;         \
  }

static void decode_item(const ts__att_item *it, const float (*qs)[HD_MAX]) {
  for (int r0 = 0; r0 < it->m; r0 += RMAX) {
    const int R = it->m - r0 < RMAX ? it->m - r0 : RMAX;
    float *S = it->S + (size_t)r0 * (size_t)it->lds, *out = it->out + (size_t)r0 * (size_t)it->ldo;
    if (it->hd == 64) DECODE_R(64)
    else if (it->hd == 128) DECODE_R(128)
    else if (it->hd == 192) DECODE_R(192)
    else DECODE_R(256)
  }
}

void ts__att_item_avx512(const ts__att_item *it) {
  const int hd = it->hd, m = it->m;
  /* a sliding window that leaves out keys of some row (gemma3's local layers past n_swa positions):
   * the reference (the AVX2 item handles it in place; this one could not be run on an AVX-512
   * machine when windows came in) */
  const bool cut = it->win > 0 && it->p0 + (m - 1) * it->dp + 1 > it->win;
  if (hd % 64 || hd > HD_MAX || m < 1 || m > TS__ATT_ROWS || cut) {
    ts__att_item_ref(it);
    return;
  }
  _Alignas(64) float qs[TS__ATT_ROWS][HD_MAX];
  int valid[TS__ATT_ROWS];
  for (int r = 0; r < m; r++) {
    valid[r] = it->p0 + r * it->dp + 1;
    for (int i = 0; i < hd; i += 16)
      _mm512_store_ps(qs[r] + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(it->q + (size_t)r * (size_t)it->ldq + i),
                                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  if (it->one) { /* single-token batches: one position (dp 0) in decode */
    if (it->dp == 0) decode_item(it, (const float(*)[HD_MAX])qs);
    else ts__att_item_ref(it);
    return;
  }
  for (int r0 = 0; r0 < m; r0 += RMAX) {
    const int R = m - r0 < RMAX ? m - r0 : RMAX;
    float *S = it->S + (size_t)r0 * (size_t)it->lds, *out = it->out + (size_t)r0 * (size_t)it->ldo;
    if (hd == 64) BATCH_R(64)
    else if (hd == 128) BATCH_R(128)
    else if (hd == 192) BATCH_R(192)
    else BATCH_R(256)
  }
}
