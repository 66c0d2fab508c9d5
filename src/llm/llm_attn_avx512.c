/* AVX-512 attention work item (llm_attn.c has the definition and the reference; the two agree bit
 * for bit). One query row at a time:
 *   scores, 16 keys per vector (lanes = keys) from K^T rows: llama.cpp's per-key dot order is over
 *     16 lanes of dimensions, so there are 16 accumulators, one per dimension lane l, each taking
 *     dimensions l, l+16, .. in its order (dot_f16_many: one fma chain; dot_f16_one: four chains
 *     per 64 dimensions, then (a0+a2)+(a1+a3)), and the 16 are summed with sum16's tree;
 *   softmax: vector exp per 16 keys, a double sum of sum16 per group;
 *   output, 16 dimensions per vector (lanes = dimensions): the dot over keys has 16 key lanes, so
 *     again 16 accumulators (one per key lane) with keys l, l+16, ... (many) or four chains per
 *     64 keys (one), summed with sum16's tree. */
#include <immintrin.h>

#include "llm/llm_avx512.h"
#include "llm/llm_internal.h"

#define HD_MAX 256

static inline __m512 ld16h(const uint16_t *p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
static inline __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u); }

/* s[j0..j0+16) (masked to nk keys) = dot(q, K[j]) * scale */
static void scores16(int hd, const float *q, const uint16_t *KT, int64_t ldk, int j0, int nk, int one, float scale,
                     float *s) {
  const __mmask16 mk = mask16(nk - j0);
  __m512 a[16];
  if (!one) {
    for (int l = 0; l < 16; l++) a[l] = _mm512_setzero_ps();
    for (int c = 0; c < hd; c += 16)
      for (int l = 0; l < 16; l++)
        a[l] = _mm512_fmadd_ps(_mm512_set1_ps(q[c + l]), ld16h(KT + (size_t)(c + l) * (size_t)ldk + j0, mk), a[l]);
  } else {
    for (int l = 0; l < 16; l++) {
      __m512 p[4];
      for (int j = 0; j < 4; j++) p[j] = _mm512_setzero_ps();
      for (int c = 0; c < hd; c += 64)
        for (int j = 0; j < 4; j++) {
          const int i = c + 16 * j + l;
          p[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[i]), ld16h(KT + (size_t)i * (size_t)ldk + j0, mk), p[j]);
        }
      a[l] = _mm512_add_ps(_mm512_add_ps(p[0], p[2]), _mm512_add_ps(p[1], p[3]));
    }
  }
  _mm512_mask_storeu_ps(s + j0, mk, _mm512_mul_ps(ts__sum16x(a), _mm512_set1_ps(scale)));
}

static void softmax_row(float *s, int valid) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < valid; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, mask16(valid - j), s + j));
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  double sum = 0;
  for (int j = 0; j < valid; j += 16) {
    const __mmask16 mk = mask16(valid - j);
    const __m512 e = _mm512_maskz_mov_ps(mk, ts__vexpf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vm)));
    _mm512_storeu_ps(s + j, e); /* zeros past valid (the scratch is padded) */
    sum += (double)ts__sum16v(e);
  }
  const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
  for (int j = 0; j < valid; j += 16)
    _mm512_storeu_ps(s + j, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(s + j), inv),
                                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
}

/* out[i0..i0+16) = sum over keys j < valid of P[j] V[j][i] (P zero-padded to a multiple of 16) */
static void pv16(int valid, int one, const float *P, const uint16_t *V, int hd, int i0, float *out) {
  __m512 a[16];
  if (!one) {
    for (int l = 0; l < 16; l++) a[l] = _mm512_setzero_ps();
    for (int c = 0; c < valid; c += 16)
      for (int l = 0; l < 16 && c + l < valid; l++)
        a[l] = _mm512_fmadd_ps(_mm512_set1_ps(P[c + l]), ld16h(V + (size_t)(c + l) * (size_t)hd + i0, 0xFFFF), a[l]);
  } else {
    for (int l = 0; l < 16; l++) {
      __m512 p[4];
      for (int j = 0; j < 4; j++) p[j] = _mm512_setzero_ps();
      for (int c = 0; c < valid; c += 64)
        for (int j = 0; j < 4; j++) {
          const int k = c + 16 * j + l;
          if (k < valid) p[j] = _mm512_fmadd_ps(_mm512_set1_ps(P[k]), ld16h(V + (size_t)k * (size_t)hd + i0, 0xFFFF), p[j]);
        }
      a[l] = _mm512_add_ps(_mm512_add_ps(p[0], p[2]), _mm512_add_ps(p[1], p[3]));
    }
  }
  _mm512_storeu_ps(out + i0, ts__sum16x(a));
}

void ts__att_item_avx512(const ts__att_item *it) {
  const int hd = it->hd, m = it->m;
  if (hd % 64 || hd > HD_MAX || m < 1 || m > TS__ATT_ROWS) {
    ts__att_item_ref(it);
    return;
  }
  _Alignas(64) float qs[TS__ATT_ROWS][HD_MAX];
  int valid[TS__ATT_ROWS], vmax = 0;
  for (int r = 0; r < m; r++) {
    valid[r] = it->p0 + r * it->dp + 1;
    vmax = valid[r] > vmax ? valid[r] : vmax;
    for (int i = 0; i < hd; i += 16)
      _mm512_store_ps(qs[r] + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(it->q + (size_t)r * (size_t)it->ldq + i),
                                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  /* rows inside the key and dimension loops: a block of K^T (16 keys x hd) and a slice of V
   * (16 dimensions of every key) are read once from memory for all rows */
  for (int j0 = 0; j0 < vmax; j0 += 16)
    for (int r = 0; r < m; r++)
      if (j0 < valid[r])
        scores16(hd, qs[r], it->KT, it->ldk, j0, valid[r], it->one, it->scale, it->S + (size_t)r * (size_t)it->lds);
  for (int r = 0; r < m; r++) softmax_row(it->S + (size_t)r * (size_t)it->lds, valid[r]);
  for (int i0 = 0; i0 < hd; i0 += 16)
    for (int r = 0; r < m; r++)
      pv16(valid[r], it->one, it->S + (size_t)r * (size_t)it->lds, it->V, hd, i0, it->out + (size_t)r * (size_t)it->ldo);
}
