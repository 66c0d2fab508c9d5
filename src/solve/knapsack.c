/* 0/1 and bounded knapsack by dynamic programming over capacities.
 * dp[c] (c = 0..cap) is the best value of the items seen so far within weight c; a bit table
 * keep: [items][cap + 1] records which items improved which cells, for the backward pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "solve/dp_internal.h"

ts_status ts__dp_table_bytes(const char *what, int64_t rows, int64_t cols, size_t elem, size_t *bytes) {
  size_t a, b;
  if (rows < 0 || cols < 0 || !ts_mul_size((size_t)rows, (size_t)cols, &a) || !ts_mul_size(a, elem, &b))
    return ts_error(TS_ERR_OVERFLOW, "%s: a DP table of %lld x %lld cells overflows", what, (long long)rows,
                    (long long)cols);
  if (b > TS_DP_MAX_TABLE_BYTES)
    return ts_error(TS_ERR_OVERFLOW,
                    "%s: DP table of %lld x %lld cells needs %zu bytes, above the %zu-byte limit; use coarser weights",
                    what, (long long)rows, (long long)cols, b, TS_DP_MAX_TABLE_BYTES);
  *bytes = b;
  return TS_OK;
}

ts_status ts__knapsack01_core(const char *what, int n, const int64_t *w, const double *v, int64_t cap, bool *chosen,
                              double *best) {
  if (n < 0) return ts_error(TS_ERR_INVALID_ARG, "%s: %d items", what, n);
  for (int i = 0; i < n; i++) chosen[i] = false;
  /* Only items that can help take part; the capacity shrinks to what they can fill. */
  int *act = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!act) return ts_error(TS_ERR_OOM, "%s: out of memory", what);
  int na = 0;
  int64_t sumw = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > 0 && w[i] <= cap) {
      act[na++] = i;
      sumw = sumw > cap - w[i] ? cap : sumw + w[i];
    }
  int64_t c_eff = sumw < cap ? sumw : cap;
  size_t row_bytes = (size_t)(c_eff / 8 + 1), keep_bytes, dp_bytes;
  ts_status st = ts__dp_table_bytes(what, na, (int64_t)row_bytes, 1, &keep_bytes);
  if (st == TS_OK) st = ts__dp_table_bytes(what, 1, c_eff + 1, sizeof(double), &dp_bytes);
  if (st != TS_OK) {
    free(act);
    return st;
  }
  unsigned char *keep = calloc(keep_bytes ? keep_bytes : 1, 1);
  double *dp = calloc((size_t)c_eff + 1, sizeof(double));
  if (!keep || !dp) {
    free(act), free(keep), free(dp);
    return ts_error(TS_ERR_OOM, "%s: out of memory for a %zu-byte DP table", what, keep_bytes + dp_bytes);
  }
  for (int a = 0; a < na; a++) {
    int i = act[a];
    int64_t wi = w[i];
    unsigned char *row = keep + (size_t)a * row_bytes;
    for (int64_t c = c_eff; c >= wi; c--) {
      double t = dp[c - wi] + v[i];
      if (t > dp[c]) dp[c] = t, row[c >> 3] |= (unsigned char)(1u << (c & 7));
    }
  }
  int64_t c = c_eff;
  double total = 0;
  for (int a = na - 1; a >= 0; a--) {
    const unsigned char *row = keep + (size_t)a * row_bytes;
    if (row[c >> 3] & (1u << (c & 7))) {
      int i = act[a];
      chosen[i] = true;
      total += v[i];
      c -= w[i];
    }
  }
  if (best) *best = total;
  free(act), free(keep), free(dp);
  return TS_OK;
}

static ts_status check_items(const char *what, int n, const int64_t *weights, const double *values, int64_t capacity) {
  if (n < 0 || (n > 0 && (!weights || !values)))
    return ts_error(TS_ERR_INVALID_ARG, "%s: %d items with weights=%p values=%p", what, n, (const void *)weights,
                    (const void *)values);
  if (capacity < 0 || capacity == INT64_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "%s: capacity %lld", what, (long long)capacity);
  for (int i = 0; i < n; i++) {
    if (weights[i] < 0)
      return ts_error(TS_ERR_INVALID_ARG, "%s: item %d has negative weight %lld", what, i, (long long)weights[i]);
    if (!isfinite(values[i])) return ts_error(TS_ERR_INVALID_ARG, "%s: item %d has value %g", what, i, values[i]);
  }
  return TS_OK;
}

ts_status ts_knapsack_01(int n, const int64_t *weights, const double *values, int64_t capacity, bool *chosen,
                         double *best_value) {
  const char *what = "0/1 knapsack";
  TS_TRY(check_items(what, n, weights, values, capacity));
  bool *ch = chosen ? chosen : malloc(sizeof(bool) * (size_t)(n ? n : 1));
  if (!ch) return ts_error(TS_ERR_OOM, "%s: out of memory", what);
  ts_status st = ts__knapsack01_core(what, n, weights, values, capacity, ch, best_value);
  if (!chosen) free(ch);
  return st;
}

ts_status ts_knapsack_bounded(int n, const int64_t *weights, const double *values, const int64_t *counts,
                              int64_t capacity, int64_t *take, double *best_value) {
  const char *what = "bounded knapsack";
  TS_TRY(check_items(what, n, weights, values, capacity));
  if (n > 0 && !counts) return ts_error(TS_ERR_INVALID_ARG, "%s: counts is NULL", what);
  for (int i = 0; i < n; i++)
    if (counts[i] < 0) return ts_error(TS_ERR_INVALID_ARG, "%s: item %d has count %lld", what, i, (long long)counts[i]);
  /* Binary splitting: copies of 1, 2, 4, ..., rest units let the 0/1 DP express any count
   * 0..k with log2(k) items. At most 63 pieces per item. */
  size_t cap_pieces = (size_t)(n ? n : 1) * 64;
  int64_t *pw = malloc(sizeof(int64_t) * cap_pieces), *pm = malloc(sizeof(int64_t) * cap_pieces);
  double *pv = malloc(sizeof(double) * cap_pieces);
  int *pi = malloc(sizeof(int) * cap_pieces);
  bool *pc = malloc(sizeof(bool) * cap_pieces);
  int64_t *tk = take ? take : malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  ts_status st = TS_OK;
  if (!pw || !pm || !pv || !pi || !pc || !tk) {
    st = ts_error(TS_ERR_OOM, "%s: out of memory", what);
    goto done;
  }
  int np = 0;
  double zero_weight_value = 0;
  for (int i = 0; i < n; i++) {
    tk[i] = 0;
    if (values[i] <= 0 || counts[i] == 0) continue;
    if (weights[i] == 0) { /* free items: take them all */
      tk[i] = counts[i];
      zero_weight_value += values[i] * (double)counts[i];
      continue;
    }
    int64_t k = counts[i] < capacity / weights[i] ? counts[i] : capacity / weights[i];
    for (int64_t part = 1; k > 0;) {
      int64_t mult = part < k ? part : k;
      pw[np] = mult * weights[i], pv[np] = (double)mult * values[i], pm[np] = mult, pi[np] = i, np++;
      k -= mult;
      part = part > k - part ? k : 2 * part; /* doubling capped by what is left: never overflows */
    }
  }
  double best = 0;
  st = ts__knapsack01_core(what, np, pw, pv, capacity, pc, &best);
  if (st != TS_OK) goto done;
  double total = zero_weight_value;
  for (int p = 0; p < np; p++)
    if (pc[p]) tk[pi[p]] += pm[p];
  for (int i = 0; i < n; i++)
    if (weights[i] > 0) total += values[i] * (double)tk[i];
  if (best_value) *best_value = total;
done:
  free(pw), free(pm), free(pv), free(pi), free(pc);
  if (!take) free(tk);
  return st;
}
