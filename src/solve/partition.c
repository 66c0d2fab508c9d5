/* Integer partition into allowed part sizes with minimal total cost (e.g. splitting Cout
 * channels into groups of measured sizes).
 * Unlimited parts: g[s] = min over sizes j (sizes[j] <= s) of g[s - sizes[j]] + costs[j],
 *   one pick per amount s = 0..total.
 * At most P parts: h_p[s] = cheapest way to write s as exactly p parts; the answer is the best
 *   h_p[total] over p = 0..P (fewest parts on ties); pick: [P][total + 1] int32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "solve/dp_internal.h"

/* (cost, parts) strictly better than (bc, bp): lower cost, or the same cost with fewer parts.
 * "Same" allows a relative 1e-12 so that sums taken in different orders tie. */
static bool better(double c, int64_t p, double bc, int64_t bp) {
  if (bc == INFINITY) return c < INFINITY;
  double eps = 1e-12 * (fabs(c) + fabs(bc));
  if (c < bc - eps) return true;
  return c <= bc + eps && p < bp;
}

static ts_status unlimited(int64_t total, int m, const int64_t *sizes, const double *costs, int64_t *counts,
                           double *best_cost) {
  const char *what = "integer partition";
  size_t b1, b2;
  TS_TRY(ts__dp_table_bytes(what, 1, total + 1, sizeof(int32_t) + sizeof(int64_t), &b1));
  TS_TRY(ts__dp_table_bytes(what, 1, total + 1, sizeof(double), &b2));
  double *g = malloc(sizeof(double) * (size_t)(total + 1));
  int64_t *np = malloc(sizeof(int64_t) * (size_t)(total + 1));
  int32_t *pick = malloc(sizeof(int32_t) * (size_t)(total + 1));
  if (!g || !np || !pick) {
    free(g), free(np), free(pick);
    return ts_error(TS_ERR_OOM, "%s: out of memory (total %lld)", what, (long long)total);
  }
  g[0] = 0, np[0] = 0, pick[0] = -1;
  for (int64_t s = 1; s <= total; s++) {
    g[s] = INFINITY, np[s] = INT64_MAX, pick[s] = -1;
    for (int j = 0; j < m; j++) {
      if (sizes[j] > s || g[s - sizes[j]] == INFINITY) continue;
      double c = g[s - sizes[j]] + costs[j];
      if (better(c, np[s - sizes[j]] + 1, g[s], np[s])) g[s] = c, np[s] = np[s - sizes[j]] + 1, pick[s] = j;
    }
  }
  ts_status st = TS_OK;
  if (g[total] == INFINITY) {
    st = ts_error(TS_ERR_INFEASIBLE, "%s: %lld cannot be written as a sum of the %d allowed sizes", what,
                  (long long)total, m);
  } else {
    if (counts)
      for (int64_t s = total; s > 0; s -= sizes[pick[s]]) counts[pick[s]]++;
    if (best_cost) *best_cost = g[total];
  }
  free(g), free(np), free(pick);
  return st;
}

static ts_status limited(int64_t total, int m, const int64_t *sizes, const double *costs, int64_t pmax,
                         int64_t *counts, double *best_cost) {
  const char *what = "integer partition";
  size_t bytes, b2;
  TS_TRY(ts__dp_table_bytes(what, pmax, total + 1, sizeof(int32_t), &bytes));
  TS_TRY(ts__dp_table_bytes(what, 2, total + 1, sizeof(double), &b2));
  int32_t *pick = malloc(bytes ? bytes : 1);
  double *h = malloc(sizeof(double) * (size_t)(total + 1)), *hn = malloc(sizeof(double) * (size_t)(total + 1));
  if (!pick || !h || !hn) {
    free(pick), free(h), free(hn);
    return ts_error(TS_ERR_OOM, "%s: out of memory for a %zu-byte DP table", what, bytes + b2);
  }
  for (int64_t s = 0; s <= total; s++) h[s] = s == 0 ? 0 : INFINITY;
  double bc = total == 0 ? 0 : INFINITY;
  int64_t bp = 0;
  for (int64_t p = 1; p <= pmax; p++) {
    int32_t *row = pick + (size_t)(p - 1) * (size_t)(total + 1);
    for (int64_t s = 0; s <= total; s++) {
      double best = INFINITY;
      int32_t bj = -1;
      for (int j = 0; j < m; j++) {
        if (sizes[j] > s || h[s - sizes[j]] == INFINITY) continue;
        double c = h[s - sizes[j]] + costs[j];
        if (c < best) best = c, bj = j;
      }
      hn[s] = best, row[s] = bj;
    }
    double *t = h;
    h = hn, hn = t;
    if (better(h[total], p, bc, bp)) bc = h[total], bp = p;
  }
  ts_status st = TS_OK;
  if (bc == INFINITY) {
    st = ts_error(TS_ERR_INFEASIBLE, "%s: %lld cannot be written as at most %lld parts of the %d allowed sizes", what,
                  (long long)total, (long long)pmax, m);
  } else {
    int64_t s = total;
    for (int64_t p = bp; p >= 1; p--) {
      int j = pick[(size_t)(p - 1) * (size_t)(total + 1) + (size_t)s];
      if (counts) counts[j]++;
      s -= sizes[j];
    }
    if (best_cost) *best_cost = bc;
  }
  free(pick), free(h), free(hn);
  return st;
}

ts_status ts_partition_min_cost(int64_t total, int m, const int64_t *sizes, const double *costs, int64_t max_parts,
                                int64_t *counts, double *best_cost) {
  const char *what = "integer partition";
  if (total < 0 || total == INT64_MAX) return ts_error(TS_ERR_INVALID_ARG, "%s: total %lld", what, (long long)total);
  if (m < 0 || (m > 0 && (!sizes || !costs)))
    return ts_error(TS_ERR_INVALID_ARG, "%s: %d sizes with sizes=%p costs=%p", what, m, (const void *)sizes,
                    (const void *)costs);
  int64_t smin = INT64_MAX;
  for (int j = 0; j < m; j++) {
    if (sizes[j] < 1)
      return ts_error(TS_ERR_INVALID_ARG, "%s: size %d is %lld, must be >= 1", what, j, (long long)sizes[j]);
    if (!isfinite(costs[j])) return ts_error(TS_ERR_INVALID_ARG, "%s: cost of size %d is %g", what, j, costs[j]);
    if (sizes[j] < smin) smin = sizes[j];
  }
  if (counts)
    for (int j = 0; j < m; j++) counts[j] = 0;
  if (total == 0) {
    if (best_cost) *best_cost = 0;
    return TS_OK;
  }
  if (m == 0) return ts_error(TS_ERR_INFEASIBLE, "%s: no allowed sizes to make %lld", what, (long long)total);
  /* More than total / smin parts never fit, so a larger limit is no limit. */
  if (max_parts > 0 && max_parts < total / smin) return limited(total, m, sizes, costs, max_parts, counts, best_cost);
  return unlimited(total, m, sizes, costs, counts, best_cost);
}
