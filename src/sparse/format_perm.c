/* Permutations (perm[new] = old): validation, inverse, identity, uniformly random. */
#include <string.h>

#include "format_internal.h"

ts_status ts_perm_validate(const int32_t *perm, int64_t n) {
  if (n < 0 || n > INT32_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "perm: length %lld is outside [0, %d]", (long long)n, INT32_MAX);
  if (n > 0 && !perm) return ts_error(TS_ERR_INVALID_ARG, "perm: NULL array of length %lld", (long long)n);
  /* first[v] = 1 + position where v was seen: lets the error name both positions. */
  int32_t *first = ts__sp_alloc(n, sizeof(int32_t), "perm validate");
  if (!first) return TS_ERR_OOM;
  memset(first, 0, (size_t)n * sizeof(int32_t));
  ts_status s = TS_OK;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = perm[i];
    if (v < 0 || v >= n) {
      s = ts_error(TS_ERR_INVALID_ARG, "perm[%lld] = %lld is out of range [0, %lld)", (long long)i, (long long)v,
                   (long long)n);
      break;
    }
    if (first[v]) {
      s = ts_error(TS_ERR_INVALID_ARG, "perm[%lld] = %lld repeats perm[%lld] (not a permutation)", (long long)i,
                   (long long)v, (long long)(first[v] - 1));
      break;
    }
    first[v] = (int32_t)(i + 1);
  }
  ts_free(first);
  return s;
}

ts_status ts_perm_inverse(const int32_t *perm, int64_t n, int32_t *inv) {
  TS_TRY(ts_perm_validate(perm, n));
  if (n > 0 && !inv) return ts_error(TS_ERR_INVALID_ARG, "perm inverse: output is NULL");
  for (int64_t i = 0; i < n; i++) inv[perm[i]] = (int32_t)i;
  return TS_OK;
}

void ts_perm_identity(int32_t *perm, int64_t n) {
  for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
}

void ts_perm_random(int32_t *perm, int64_t n, uint64_t seed) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  ts_perm_identity(perm, n);
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)ts_rng_below(&r, (uint64_t)i + 1);
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}
