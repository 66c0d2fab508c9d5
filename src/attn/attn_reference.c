/* Reference attention: explicit mask, double accumulation, softmax over allowed keys only. The
 * yardstick every kernel is tested against; O(batch * heads * nnz * d), single-threaded. */
#include <math.h>
#include <stdlib.h>

#include "tessera/attn.h"

ts_status ts_attn_reference(const ts_bitmap *mask, const float *Q, const float *K, const float *V, float *O, int64_t batch,
                            int64_t heads, int64_t n, int64_t d) {
  if (!mask || !mask->bits) return ts_error(TS_ERR_INVALID_ARG, "attn reference: NULL mask");
  if (mask->rows != n || mask->cols != n || mask->stride < (n + 63) / 64)
    return ts_error(TS_ERR_SHAPE, "attn reference: mask is %lld x %lld, expected %lld x %lld", (long long)mask->rows,
                    (long long)mask->cols, (long long)n, (long long)n);
  if (batch < 0 || heads < 0 || n < 1 || d < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn reference: bad shape batch %lld heads %lld n %lld d %lld", (long long)batch,
                    (long long)heads, (long long)n, (long long)d);
  size_t tot;
  if (!ts_mul_size((size_t)batch, (size_t)heads, &tot) || !ts_mul_size(tot, (size_t)n, &tot) || !ts_mul_size(tot, (size_t)d, &tot))
    return ts_error(TS_ERR_OVERFLOW, "attn reference: tensor size overflows");
  if (tot == 0) return TS_OK;
  if (!Q || !K || !V || !O) return ts_error(TS_ERR_INVALID_ARG, "attn reference: NULL Q, K, V or O");
  double *s = malloc((size_t)n * sizeof *s), *acc = malloc((size_t)d * sizeof *acc);
  if (!s || !acc) {
    free(s);
    free(acc);
    return ts_error(TS_ERR_OOM, "attn reference: cannot allocate %lld scores", (long long)n);
  }
  const double scale = 1.0 / sqrt((double)d);
  for (int64_t h = 0; h < batch * heads; h++) {
    const float *q = Q + h * n * d, *k = K + h * n * d, *v = V + h * n * d;
    float *o = O + h * n * d;
    for (int64_t i = 0; i < n; i++) {
      const uint64_t *row = mask->bits + i * mask->stride;
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; j++) {
        if (!((row[j >> 6] >> (j & 63)) & 1)) continue;
        double dot = 0;
        for (int64_t x = 0; x < d; x++) dot += (double)q[i * d + x] * (double)k[j * d + x];
        s[j] = dot * scale;
        if (s[j] > mx) mx = s[j];
      }
      for (int64_t x = 0; x < d; x++) acc[x] = 0;
      double sum = 0;
      for (int64_t j = 0; j < n; j++) {
        if (!((row[j >> 6] >> (j & 63)) & 1)) continue;
        double p = exp(s[j] - mx);
        sum += p;
        for (int64_t x = 0; x < d; x++) acc[x] += p * (double)v[j * d + x];
      }
      for (int64_t x = 0; x < d; x++) o[i * d + x] = sum > 0 ? (float)(acc[x] / sum) : 0.0f;
    }
  }
  free(s);
  free(acc);
  return TS_OK;
}
