/* Reference convolution: the definition in conv.h as direct loops, accumulating in double. It is
 * the oracle the tests compare every other algorithm against; parallel over (n, k) only. */
#include "conv/conv_internal.h"

static ts_status ref_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  (void)ws;
  const ts_conv_desc *d = &pl->d;
  const int P = pl->p, Q = pl->q, cg = pl->cg, kg = pl->kg, nk = d->n * d->k;
#pragma omp parallel for num_threads(pl->threads) schedule(dynamic)
  for (int nkk = 0; nkk < nk; nkk++) {
    const int n = nkk / d->k, k = nkk % d->k, c0 = (k / kg) * cg;
    for (int p = 0; p < P; p++)
      for (int q = 0; q < Q; q++) {
        double acc = pl->bias[k];
        for (int c = 0; c < cg; c++) {
          const float *x = in + ((size_t)n * d->c + c0 + c) * d->h * d->w;
          const float *w = pl->weights + ((size_t)k * cg + c) * d->r * d->s;
          for (int r = 0; r < d->r; r++) {
            const int ih = p * d->stride_h - d->pad_top + r * d->dilation_h;
            if (ih < 0 || ih >= d->h) continue;
            for (int s = 0; s < d->s; s++) {
              const int iw = q * d->stride_w - d->pad_left + s * d->dilation_w;
              if (iw < 0 || iw >= d->w) continue;
              acc += (double)x[(size_t)ih * d->w + iw] * w[r * d->s + s];
            }
          }
        }
        if (d->relu && acc < 0) acc = 0;
        out[(((size_t)n * d->k + k) * P + p) * Q + q] = (float)acc;
      }
  }
  return TS_OK;
}

const ts__conv_algo_ops ts__conv_ops_reference = {NULL, NULL, NULL, ref_execute, NULL};
