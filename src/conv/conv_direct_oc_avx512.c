/* AVX-512 direct convolution with output channels in the vector lanes (the direct algorithm's
 * kernel on AVX-512; AVX2 and scalar keep the column-vectorized kernels of conv_direct_tmpl.h).
 *
 * Register tile: OCV vectors of 16 output channels x QT consecutive output columns of one output
 * row (QT <= 14): acc[OCV][QT]. Per (input channel c, r, s): OCV weight vectors are loaded once
 * and QT input values are broadcast, feeding OCV * QT FMAs (28 for 2 x 14, 2 + 14 loads). The
 * input is the padded, stride-phase-split copy of conv_internal.h, so the QT inputs of one tap
 * are consecutive floats for every stride: broadcasts at immediate offsets. The taps (r, s) are
 * one loop over precomputed offsets (an R x 1 or 1 x S kernel runs R or S iterations of the same
 * body, not R loops of one). For R x 1 kernels at stride 1 the padded rows are exactly Q floats
 * long, so the output plane is one flat row of P*Q positions cut into full 14-column tiles
 * (Inception's 7x1 at 17x17: 289 = 20 x 14 + 9 instead of 17 = 9 + 8 per row). Input channels are
 * the outer reduction loop; the packed weights of a 32-channel block (cg * R * S * 128 bytes)
 * stay in L2 while a thread walks the output rows, and the input rows of a tile are reused by
 * every tap that touches them.
 * Epilogue: bias and ReLU on the accumulators (lanes = channels), then each 16 x QT block is
 * transposed in registers so that every channel's QT outputs are one masked contiguous store.
 *
 * Packed weights (conv_direct.c): blocks of 32 output channels [cg][R][S][32], channels past the
 * group's last one zero; a block with at most 16 channels runs one vector wide. */
#include <immintrin.h>

#include "kernels/simd_avx512.h" /* ts__transpose16 */
#include "conv/conv_internal.h"

static inline __attribute__((always_inline)) void tile(const ts__dconv_args *a, int p, int q0, const int OCV,
                                                        const int QT) {
  const ts_conv_desc *d = a->d;
  const ts__conv_pad_geom *g = a->g;
  const int R = d->r, S = d->s;
  const size_t rowlen = (size_t)g->sw * g->wrow;
  __m512 acc[2][14];
  for (int o = 0; o < OCV; o++)
    for (int j = 0; j < QT; j++) acc[o][j] = _mm512_setzero_ps();
  const float *w = a->w;
  const int *toff = a->toff, taps = R * S;
  for (int c = 0; c < a->cg; c++) {
    const float *xc = a->x + (size_t)c * g->plane + (size_t)p * d->stride_h * rowlen + q0;
    for (int t = 0; t < taps; t++, w += TS__CONV_KB_AVX512) { /* taps (r, s) as one loop: R x 1 and 1 x S too */
      const float *xs = xc + toff[t];
      __m512 wv[2];
      for (int o = 0; o < OCV; o++) wv[o] = _mm512_loadu_ps(w + 16 * o);
      for (int j = 0; j < QT; j++) {
        const __m512 b = _mm512_set1_ps(xs[j]);
        for (int o = 0; o < OCV; o++) acc[o][j] = _mm512_fmadd_ps(b, wv[o], acc[o][j]);
      }
    }
  }
  const __mmask16 cols = (__mmask16)((1u << QT) - 1u);
  const size_t pq = (size_t)a->p * a->q;
  for (int o = 0; o < OCV; o++) {
    const int k0 = 16 * o;
    if (k0 >= a->kvalid) break;
    const __mmask16 kl = a->kvalid - k0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (a->kvalid - k0)) - 1u);
    const __m512 bias = _mm512_maskz_loadu_ps(kl, a->bias + k0);
    __m512 t[16];
    for (int j = 0; j < 16; j++) {
      if (j < QT) {
        const __m512 v = _mm512_add_ps(acc[o][j], bias);
        t[j] = d->relu ? _mm512_max_ps(_mm512_setzero_ps(), v) : v; /* NaN stays NaN */
      } else {
        t[j] = _mm512_setzero_ps();
      }
    }
    ts__transpose16(t);
    float *out = a->out + (size_t)k0 * pq + (size_t)p * a->q + q0;
    for (int i = 0; i < 16 && k0 + i < a->kvalid; i++) _mm512_mask_storeu_ps(out + (size_t)i * pq, cols, t[i]);
  }
}

typedef void (*tile_fn)(const ts__dconv_args *, int, int);
#define TILE_FN(OCV, QT) \
  static void tile_##OCV##_##QT(const ts__dconv_args *a, int p, int q0) { tile(a, p, q0, OCV, QT); }
#define TILE_FNS(OCV)                                                                                              \
  TILE_FN(OCV, 1) TILE_FN(OCV, 2) TILE_FN(OCV, 3) TILE_FN(OCV, 4) TILE_FN(OCV, 5) TILE_FN(OCV, 6) TILE_FN(OCV, 7) \
  TILE_FN(OCV, 8) TILE_FN(OCV, 9) TILE_FN(OCV, 10) TILE_FN(OCV, 11) TILE_FN(OCV, 12) TILE_FN(OCV, 13) TILE_FN(OCV, 14)
TILE_FNS(1)
TILE_FNS(2)
#define TILE_ROW(OCV)                                                                                           \
  {tile_##OCV##_1, tile_##OCV##_2,  tile_##OCV##_3,  tile_##OCV##_4,  tile_##OCV##_5,  tile_##OCV##_6,  tile_##OCV##_7, \
   tile_##OCV##_8, tile_##OCV##_9, tile_##OCV##_10, tile_##OCV##_11, tile_##OCV##_12, tile_##OCV##_13, tile_##OCV##_14}
static const tile_fn tiles[2][14] = {TILE_ROW(1), TILE_ROW(2)};

/* Columns [q0, q1) of output row p (row 0 of a flat layout) in near-equal tiles of <= 14. */
static void segments(const ts__dconv_args *a, int p, int q0, int q1) {
  const int n = q1 - q0, segs = (n + 13) / 14, per = (n + segs - 1) / segs;
  const tile_fn *fn = tiles[a->kvalid > 16 ? 1 : 0];
  for (int q = q0; q < q1; q += per) fn[(q1 - q < per ? q1 - q : per) - 1](a, p, q);
}

void ts__dconv_rows_avx512(const ts__dconv_args *a, int p0, int p1) {
  for (int p = p0; p < p1; p++) segments(a, p, 0, a->q);
}

void ts__dconv_flat_avx512(const ts__dconv_args *a, int j0, int j1) { segments(a, 0, j0, j1); }
