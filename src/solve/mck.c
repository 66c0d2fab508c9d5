/* Multiple-choice knapsack: exactly one option per class, total weight within capacity,
 * total value minimized or maximized.
 * f_k[c] (c = 0..cap) is the best value of classes 0..k-1 with total weight <= c (or
 * infeasible); f_{k+1}[c] = best over options j of class k with w_j <= c of f_k[c - w_j] + v_j.
 * pick: [classes][cap + 1] int32 holds the winning option (offset within its class) per cell. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "solve/dp_internal.h"

ts_status ts_knapsack_mc(int nclasses, const int *class_start, const int64_t *weights, const double *values,
                         int64_t capacity, bool maximize, int *choice, double *best_value) {
  const char *what = "multiple-choice knapsack";
  if (nclasses < 0 || !class_start || (nclasses > 0 && (!weights || !values)))
    return ts_error(TS_ERR_INVALID_ARG, "%s: %d classes with class_start=%p weights=%p values=%p", what, nclasses,
                    (const void *)class_start, (const void *)weights, (const void *)values);
  if (capacity < 0 || capacity == INT64_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "%s: capacity %lld", what, (long long)capacity);
  if (class_start[0] != 0)
    return ts_error(TS_ERR_INVALID_ARG, "%s: class_start[0] = %d, must be 0", what, class_start[0]);
  int64_t sum_max = 0; /* capacity beyond the sum of the heaviest usable options is never needed */
  for (int k = 0; k < nclasses; k++) {
    if (class_start[k + 1] <= class_start[k])
      return ts_error(TS_ERR_INVALID_ARG, "%s: class %d has no options (class_start %d..%d)", what, k, class_start[k],
                      class_start[k + 1]);
    int64_t wmax = 0;
    for (int j = class_start[k]; j < class_start[k + 1]; j++) {
      if (weights[j] < 0)
        return ts_error(TS_ERR_INVALID_ARG, "%s: option %d (class %d) has negative weight %lld", what, j, k,
                        (long long)weights[j]);
      if (!isfinite(values[j]))
        return ts_error(TS_ERR_INVALID_ARG, "%s: option %d (class %d) has value %g", what, j, k, values[j]);
      if (weights[j] <= capacity && weights[j] > wmax) wmax = weights[j];
    }
    sum_max = sum_max > capacity - wmax ? capacity : sum_max + wmax;
  }
  int64_t cap = sum_max < capacity ? sum_max : capacity;
  size_t pick_bytes, row_bytes;
  TS_TRY(ts__dp_table_bytes(what, nclasses, cap + 1, sizeof(int32_t), &pick_bytes));
  TS_TRY(ts__dp_table_bytes(what, 2, cap + 1, sizeof(double), &row_bytes));
  int32_t *pick = malloc(pick_bytes ? pick_bytes : 1);
  double *f = malloc(sizeof(double) * (size_t)(cap + 1)), *g = malloc(sizeof(double) * (size_t)(cap + 1));
  if (!pick || !f || !g) {
    free(pick), free(f), free(g);
    return ts_error(TS_ERR_OOM, "%s: out of memory for a %zu-byte DP table", what, pick_bytes + row_bytes);
  }
  /* Values are maximized internally (sign flipped for minimization); -INFINITY is infeasible. */
  double sgn = maximize ? 1.0 : -1.0;
  for (int64_t c = 0; c <= cap; c++) f[c] = 0;
  for (int k = 0; k < nclasses; k++) {
    int32_t *row = pick + (size_t)k * (size_t)(cap + 1);
    int j0 = class_start[k], j1 = class_start[k + 1];
    for (int64_t c = 0; c <= cap; c++) {
      double bestv = -INFINITY;
      int32_t bj = -1;
      for (int j = j0; j < j1; j++) {
        if (weights[j] > c || f[c - weights[j]] == -INFINITY) continue;
        double t = f[c - weights[j]] + sgn * values[j];
        if (t > bestv) bestv = t, bj = (int32_t)(j - j0);
      }
      g[c] = bestv, row[c] = bj;
    }
    double *tmp = f;
    f = g, g = tmp;
  }
  ts_status st = TS_OK;
  if (f[cap] == -INFINITY) {
    st = ts_error(TS_ERR_INFEASIBLE, "%s: no choice of one option per class fits capacity %lld (%d classes)", what,
                  (long long)capacity, nclasses);
  } else {
    int64_t c = cap;
    double total = 0;
    for (int k = nclasses - 1; k >= 0; k--) {
      int j = class_start[k] + pick[(size_t)k * (size_t)(cap + 1) + (size_t)c];
      if (choice) choice[k] = j;
      total += values[j];
      c -= weights[j];
    }
    if (best_value) *best_value = total;
  }
  free(pick), free(f), free(g);
  return st;
}
