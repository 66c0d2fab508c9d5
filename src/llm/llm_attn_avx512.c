/* AVX-512 attention work item (see llm_attn.c for the definition): scores 16 keys per vector from
 * K^T rows (one 32-byte fp16 load per head dimension, shared by the item's query rows), the
 * dispatched row softmax, probabilities rounded to fp16, then O += p_j V[j] with one position's 64
 * values in four vectors shared by up to 4 query rows. */
#include <immintrin.h>

#include "llm/llm_internal.h"
#include "tessera/kernels.h"

#define AI static inline __attribute__((always_inline))
#define HD_MAX 256

AI __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }
AI __m512 round16(__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

/* S[r][j0..j0+16) for R rows */
AI void scores(const int R, int hd, float (*qs)[HD_MAX], const uint16_t *KT, int64_t ldk, int j0, int nk, float scale,
               float *S) {
  const __mmask16 mk = mask16(nk - j0);
  __m512 acc[TS__ATT_ROWS];
  for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
  for (int i = 0; i < hd; i++) {
    const __m512 kv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, KT + (size_t)i * (size_t)ldk + (size_t)j0));
    for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(qs[r][i]), kv, acc[r]);
  }
  const __m512 vs = _mm512_set1_ps(scale);
  for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(S + (size_t)r * (size_t)ldk + j0, mk, _mm512_mul_ps(acc[r], vs));
}

/* out[r][i0..i0+64) = sum_j S[r][j] V[j][i0..] for R <= 4 rows */
AI void pv(const int R, int nk, const float *S, int64_t ldk, const uint16_t *V, int hd, int i0, float *out, int64_t ldo) {
  __m512 o[4][4];
  for (int r = 0; r < R; r++)
    for (int v = 0; v < 4; v++) o[r][v] = _mm512_setzero_ps();
  for (int j = 0; j < nk; j++) {
    const uint16_t *vr = V + (size_t)j * (size_t)hd + i0;
    __m512 vv[4];
    for (int v = 0; v < 4; v++) vv[v] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + 16 * v)));
    for (int r = 0; r < R; r++) {
      const __m512 p = _mm512_set1_ps(S[(size_t)r * (size_t)ldk + j]);
      for (int v = 0; v < 4; v++) o[r][v] = _mm512_fmadd_ps(p, vv[v], o[r][v]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int v = 0; v < 4; v++) _mm512_storeu_ps(out + (size_t)r * (size_t)ldo + i0 + 16 * v, o[r][v]);
}

void ts__att_item_avx512(int m, int hd, int p0, float scale, const float *q, int64_t ldq, const uint16_t *KT,
                         int64_t ldk, const uint16_t *V, float *S, float *out, int64_t ldo) {
  if (hd % 64 || hd > HD_MAX || m < 1 || m > TS__ATT_ROWS) {
    ts__att_item_ref(m, hd, p0, scale, q, ldq, KT, ldk, V, S, out, ldo);
    return;
  }
  const int nk = p0 + m;
  _Alignas(64) float qs[TS__ATT_ROWS][HD_MAX];
  for (int r = 0; r < m; r++)
    for (int i = 0; i < hd; i += 16) _mm512_store_ps(&qs[r][i], round16(_mm512_loadu_ps(q + (size_t)r * (size_t)ldq + i)));
  for (int j0 = 0; j0 < nk; j0 += 16) {
    switch (m) {
      case 1: scores(1, hd, qs, KT, ldk, j0, nk, scale, S); break;
      case 2: scores(2, hd, qs, KT, ldk, j0, nk, scale, S); break;
      case 3: scores(3, hd, qs, KT, ldk, j0, nk, scale, S); break;
      case 4: scores(4, hd, qs, KT, ldk, j0, nk, scale, S); break;
      case 5: scores(5, hd, qs, KT, ldk, j0, nk, scale, S); break;
      case 6: scores(6, hd, qs, KT, ldk, j0, nk, scale, S); break;
      case 7: scores(7, hd, qs, KT, ldk, j0, nk, scale, S); break;
      default: scores(8, hd, qs, KT, ldk, j0, nk, scale, S); break;
    }
  }
  for (int r = 0; r < m; r++) {
    float *s = S + (size_t)r * (size_t)ldk;
    const int valid = p0 + r + 1;
    ts_softmax_rows(1, valid, s, ldk, s, ldk);
    for (int j = 0; j < nk; j += 16) {
      const __mmask16 mk = mask16(nk - j);
      /* lanes at or past `valid` become 0: the row's causal mask */
      const __mmask16 keep = mk & mask16(valid - j > 0 ? valid - j : 0);
      _mm512_mask_storeu_ps(s + j, mk, round16(_mm512_maskz_loadu_ps(keep, s + j)));
    }
  }
  for (int r0 = 0; r0 < m; r0 += 4) {
    const int R = m - r0 < 4 ? m - r0 : 4;
    /* keys past the group's last row have P = 0: stop there */
    const int nkr = p0 + r0 + R;
    for (int i0 = 0; i0 < hd; i0 += 64) {
      const float *Sr = S + (size_t)r0 * (size_t)ldk;
      float *o = out + (size_t)r0 * (size_t)ldo;
      switch (R) {
        case 1: pv(1, nkr, Sr, ldk, V, hd, i0, o, ldo); break;
        case 2: pv(2, nkr, Sr, ldk, V, hd, i0, o, ldo); break;
        case 3: pv(3, nkr, Sr, ldk, V, hd, i0, o, ldo); break;
        default: pv(4, nkr, Sr, ldk, V, hd, i0, o, ldo); break;
      }
    }
  }
}
