/* AVX2 direct convolution with output channels in the vector lanes: conv_direct_oc_avx512.c's
 * scheme (see there) sized for 16 ymm registers.
 *
 * Register tile: OCV <= 2 vectors of 8 output channels x QT <= 6 consecutive output columns of
 * one output row: acc[OCV][QT], 12 accumulators + 2 weight vectors + 1 broadcast = 15 registers.
 * Per (input channel c, tap r, s): 2 weight loads and QT input broadcasts feed 12 FMAs (8 loads
 * per 12 FMAs; Zen 3 issues 3 loads and 2 FMAs a cycle). The input is the padded,
 * stride-phase-split copy of conv_internal.h, so the QT inputs of one tap are consecutive floats
 * for every stride; the taps are one loop over precomputed offsets; R x 1 kernels at stride 1 run
 * the flattened output plane in full tiles. A block's packed weights ([cg][R][S][16], 16 output
 * channels: 72 KiB for 3x3 over 128 channels) stay in L2 while a thread walks its output rows,
 * and each input value loaded serves 16 output channels (the column-lane kernel of
 * conv_direct_tmpl.h shares it between 4, and streamed the input planes from L3 K/4 times).
 * Epilogue: bias and ReLU on the accumulators (lanes = channels), an 8 x 8 transpose per vector,
 * then each channel's QT outputs as plain stores. */
#include <immintrin.h>

#include "conv/conv_avx2_inl.h"
#include "conv/conv_internal.h"

/* PF_CHANNELS: the input rows of channel c + 4 are prefetched while channel c runs (~50 cycles
 * of FMAs per channel for a 3x3 kernel; an L3 hit takes about as long). Without it the first FMA
 * after each broadcast took a fifth of the kernel's samples (perf, 3x3/2 over 128 channels at
 * 56^2, 2026-12-07, this EPYC): the tile's input rows are R x stride short segments of as many
 * channel planes, a pattern the hardware prefetchers do not follow. */
enum { OCV_MAX = 2, QT_MAX = 6, PF_CHANNELS = 4 };

/* Output channels k0 .. k0 + 7 of a tile (lanes of acc[j], column q0 + j): bias, ReLU, transpose,
 * QT outputs per channel. Called with constant indices, so the accumulators stay in registers
 * (a loop over them here made GCC keep them in memory across the whole reduction). */
static inline __attribute__((always_inline)) void store_vec(const ts__dconv_args *a, int p, int q0, const __m256 *acc,
                                                             int k0, const int QT) {
  const int nk = a->kvalid - k0 < 8 ? a->kvalid - k0 : 8;
  if (nk <= 0) return;
  const size_t pq = (size_t)a->p * a->q;
  const __m256 bias = nk == 8 ? _mm256_loadu_ps(a->bias + k0)
                              : _mm256_maskload_ps(a->bias + k0, _mm256_cmpgt_epi32(_mm256_set1_epi32(nk),
                                                                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
  __m256 t[8];
#pragma GCC unroll 8
  for (int j = 0; j < 8; j++) {
    if (j < QT) {
      const __m256 v = _mm256_add_ps(acc[j], bias);
      t[j] = a->d->relu ? _mm256_max_ps(_mm256_setzero_ps(), v) : v; /* NaN stays NaN */
    } else {
      t[j] = _mm256_setzero_ps();
    }
  }
  ts__conv_transpose8(t);
  float *out = a->out + (size_t)k0 * pq + (size_t)p * a->q + q0;
  for (int i = 0; i < nk; i++) ts__conv_store_first(out + (size_t)i * pq, t[i], QT);
}

static inline __attribute__((always_inline)) void tile(const ts__dconv_args *a, int p, int q0, const int OCV,
                                                        const int QT) {
  const ts_conv_desc *d = a->d;
  const ts__conv_pad_geom *g = a->g;
  const size_t rowlen = (size_t)g->sw * g->wrow;
  __m256 acc[OCV_MAX][QT_MAX];
#pragma GCC unroll 2
  for (int o = 0; o < OCV; o++)
#pragma GCC unroll 6
    for (int j = 0; j < QT; j++) acc[o][j] = _mm256_setzero_ps();
  const float *w = a->w;
  const int *toff = a->toff, taps = d->r * d->s;
  const size_t rstep = (size_t)d->dilation_h * rowlen, pdist = (size_t)PF_CHANNELS * g->plane;
  const int R = d->r, sw = g->sw, span = QT + d->s * d->dilation_w / sw;
  for (int c = 0; c < a->cg; c++) {
    const float *xc = a->x + (size_t)c * g->plane + (size_t)p * d->stride_h * rowlen + q0;
    for (int r = 0; r < R; r++) /* the first and last line of each input row segment PF_CHANNELS ahead */
      for (int ph = 0; ph < sw; ph++) {
        const float *x = xc + pdist + r * rstep + (size_t)ph * g->wrow;
        _mm_prefetch((const char *)x, _MM_HINT_T0);
        _mm_prefetch((const char *)(x + span), _MM_HINT_T0);
      }
    for (int t = 0; t < taps; t++, w += TS__CONV_KB_OC_AVX2) {
      const float *xs = xc + toff[t];
      __m256 wv[OCV_MAX];
#pragma GCC unroll 2
      for (int o = 0; o < OCV; o++) wv[o] = _mm256_loadu_ps(w + 8 * o);
#pragma GCC unroll 6
      for (int j = 0; j < QT; j++) {
        const __m256 b = _mm256_broadcast_ss(xs + j);
#pragma GCC unroll 2
        for (int o = 0; o < OCV; o++) acc[o][j] = _mm256_fmadd_ps(b, wv[o], acc[o][j]);
      }
    }
  }
  store_vec(a, p, q0, acc[0], 0, QT);
  if (OCV > 1) store_vec(a, p, q0, acc[1], 8, QT);
}

typedef void (*tile_fn)(const ts__dconv_args *, int, int);
#define TILE_FN(OCV, QT) \
  static void tile_##OCV##_##QT(const ts__dconv_args *a, int p, int q0) { tile(a, p, q0, OCV, QT); }
#define TILE_FNS(OCV) TILE_FN(OCV, 1) TILE_FN(OCV, 2) TILE_FN(OCV, 3) TILE_FN(OCV, 4) TILE_FN(OCV, 5) TILE_FN(OCV, 6)
TILE_FNS(1)
TILE_FNS(2)
#define TILE_ROW(OCV) {tile_##OCV##_1, tile_##OCV##_2, tile_##OCV##_3, tile_##OCV##_4, tile_##OCV##_5, tile_##OCV##_6}
static const tile_fn tiles[OCV_MAX][QT_MAX] = {TILE_ROW(1), TILE_ROW(2)};

/* Columns [q0, q1) of output row p (row 0 of a flat layout) in tiles of <= QT_MAX whose widths
 * differ by at most one (73 columns: 8 x 6 + 5 x 5, not 12 x 6 + 1, whose last tile would run
 * latency-bound on 2 accumulators). */
static void segments(const ts__dconv_args *a, int p, int q0, int q1) {
  const int n = q1 - q0, segs = (n + QT_MAX - 1) / QT_MAX, base = n / segs, extra = n % segs;
  const tile_fn *fn = tiles[a->kvalid > 8 ? 1 : 0];
  for (int s = 0, q = q0; s < segs; s++) {
    const int w = base + (s < extra);
    fn[w - 1](a, p, q);
    q += w;
  }
}

void ts__dconv_rows_avx2(const ts__dconv_args *a, int p0, int p1) {
  for (int p = p0; p < p1; p++) segments(a, p, 0, a->q);
}

void ts__dconv_flat_avx2(const ts__dconv_args *a, int j0, int j1) { segments(a, 0, j0, j1); }
