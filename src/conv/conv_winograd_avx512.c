/* AVX-512 Winograd transforms, 16 tiles per vector (one tile per lane): inputs are gathered with
 * per-lane bounds masks (zero padding for free), the transforms are FMAs with broadcast matrix
 * entries, outputs are scattered with masks that clip at the output edge. The scalar versions in
 * conv_winograd.c compute the same sums per tile. */
#include <immintrin.h>

#include "conv/conv_internal.h"

enum { AM = 6 };

/* Lane l: tile t0 + j0 + l -> image n, tile row/column origin (in output coordinates). */
static void lanes(const ts__wino_args *a, int j0, int cnt, int *n, int *y0, int *x0) {
  const int per_img = a->th * a->tw;
  for (int l = 0; l < 16; l++) {
    const int t = a->t0 + j0 + (l < cnt ? l : 0);
    n[l] = t / per_img, y0[l] = ((t % per_img) / a->tw) * a->M, x0[l] = (t % a->tw) * a->M;
  }
}

void ts__wino_input_avx512(const ts__wino_args *a, int c, int j0, int cnt) {
  int n[16], y0[16], x0[16], base[16];
  lanes(a, j0, cnt, n, y0, x0);
  const int cabs = a->g * a->cg + c, A = a->A;
  for (int l = 0; l < 16; l++)
    base[l] = ((n[l] * a->C + cabs) * a->H + (y0[l] - a->pad_top)) * a->W + (x0[l] - a->pad_left);
  const __m512i vb = _mm512_loadu_si512(base);
  const __m512i vy = _mm512_sub_epi32(_mm512_loadu_si512(y0), _mm512_set1_epi32(a->pad_top));
  const __m512i vx = _mm512_sub_epi32(_mm512_loadu_si512(x0), _mm512_set1_epi32(a->pad_left));
  const __mmask16 live = (__mmask16)((1u << cnt) - 1u);
  __mmask16 rok[AM], cok[AM];
  for (int i = 0; i < A; i++) {
    const __m512i yi = _mm512_add_epi32(vy, _mm512_set1_epi32(i)), xi = _mm512_add_epi32(vx, _mm512_set1_epi32(i));
    rok[i] = _mm512_cmpge_epi32_mask(yi, _mm512_setzero_si512()) & _mm512_cmplt_epi32_mask(yi, _mm512_set1_epi32(a->H));
    cok[i] = _mm512_cmpge_epi32_mask(xi, _mm512_setzero_si512()) & _mm512_cmplt_epi32_mask(xi, _mm512_set1_epi32(a->W));
  }
  __m512 d[AM][AM], u[AM][AM];
  for (int i = 0; i < A; i++)
    for (int j = 0; j < A; j++) {
      const __m512i idx = _mm512_add_epi32(vb, _mm512_set1_epi32(i * a->W + j));
      d[i][j] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live & rok[i] & cok[j], idx, a->in, 4);
    }
  for (int i = 0; i < A; i++) /* u = B^T d */
    for (int j = 0; j < A; j++) {
      __m512 s = _mm512_setzero_ps();
      for (int l = 0; l < A; l++) {
        const float b = a->BT[i * AM + l];
        if (b != 0.0f) s = _mm512_fmadd_ps(_mm512_set1_ps(b), d[l][j], s);
      }
      u[i][j] = s;
    }
  const size_t vs = (size_t)a->cg * a->nb;
  float *v = a->V + (size_t)c * a->nb + j0;
  for (int i = 0; i < A; i++) /* v = u B */
    for (int j = 0; j < A; j++) {
      __m512 s = _mm512_setzero_ps();
      for (int l = 0; l < A; l++) {
        const float b = a->BT[j * AM + l];
        if (b != 0.0f) s = _mm512_fmadd_ps(_mm512_set1_ps(b), u[i][l], s);
      }
      _mm512_mask_storeu_ps(v + (size_t)(i * A + j) * vs, live, s);
    }
}

void ts__wino_output_avx512(const ts__wino_args *a, int k, int j0, int cnt) {
  int n[16], y0[16], x0[16], base[16];
  lanes(a, j0, cnt, n, y0, x0);
  const int kk = a->g * a->kg + k, A = a->A, M = a->M;
  for (int l = 0; l < 16; l++) base[l] = ((n[l] * a->K + kk) * a->P + y0[l]) * a->Q + x0[l];
  const __m512i vb = _mm512_loadu_si512(base), vy = _mm512_loadu_si512(y0), vx = _mm512_loadu_si512(x0);
  const __mmask16 live = (__mmask16)((1u << cnt) - 1u);
  const size_t ms = (size_t)a->kg * a->nb;
  const float *mm = a->Mb + (size_t)k * a->nb + j0;
  __m512 t[AM][AM], u[4][AM];
  for (int i = 0; i < A * A; i++) t[i / A][i % A] = _mm512_maskz_loadu_ps(live, mm + (size_t)i * ms);
  for (int i = 0; i < M; i++) /* u = A^T t */
    for (int j = 0; j < A; j++) {
      __m512 s = _mm512_setzero_ps();
      for (int l = 0; l < A; l++) {
        const float c = a->AT[i * AM + l];
        if (c != 0.0f) s = _mm512_fmadd_ps(_mm512_set1_ps(c), t[l][j], s);
      }
      u[i][j] = s;
    }
  const __m512 bias = _mm512_set1_ps(a->bias[kk]);
  for (int i = 0; i < M; i++) {
    const __mmask16 rok = live & _mm512_cmplt_epi32_mask(_mm512_add_epi32(vy, _mm512_set1_epi32(i)), _mm512_set1_epi32(a->P));
    for (int j = 0; j < M; j++) { /* y = u A + bias */
      const __mmask16 ok =
          rok & _mm512_cmplt_epi32_mask(_mm512_add_epi32(vx, _mm512_set1_epi32(j)), _mm512_set1_epi32(a->Q));
      __m512 s = bias;
      for (int l = 0; l < A; l++) {
        const float c = a->AT[j * AM + l];
        if (c != 0.0f) s = _mm512_fmadd_ps(_mm512_set1_ps(c), u[i][l], s);
      }
      if (a->relu) s = _mm512_max_ps(_mm512_setzero_ps(), s); /* NaN stays NaN */
      _mm512_mask_i32scatter_ps(a->out, ok, _mm512_add_epi32(vb, _mm512_set1_epi32(i * a->Q + j)), s, 4);
    }
  }
}
