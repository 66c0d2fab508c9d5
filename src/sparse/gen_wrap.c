/* Wrappers over an inner token pattern: `keep` (DynamicViT-style random token pruning, induced
 * sub-pattern) and `permute` (random symmetric relabelling). Both compose info->base_index so
 * the base grid coordinates of every token stay known. */
#include <math.h>
#include <string.h>

#include "gen_internal.h"

static ts_status need_square(const gen_args *a, const ts_csr *in, const ts_pattern_info *ii) {
  if (in->rows != in->cols || ii->n != in->rows)
    return ts_error(TS_ERR_INVALID_ARG, "%s: inner pattern %s is %lld x %lld, not a square token pattern",
                    a->kind->name, ii->kind, (long long)in->rows, (long long)in->cols);
  return TS_OK;
}

/* info = inner info with base_index[i] = inner base index of inner token sel[i] (n' entries). */
static ts_status compose_info(const ts_pattern_info *ii, const int32_t *sel, int64_t n, ts_pattern_info *info) {
  *info = *ii;
  info->base_index = ts__sp_alloc(n, sizeof(int32_t), "pattern info");
  if (!info->base_index) return TS_ERR_OOM;
  for (int64_t i = 0; i < n; i++) info->base_index[i] = ii->base_index ? ii->base_index[sel[i]] : sel[i];
  info->n = n;
  return TS_OK;
}

static ts_status run_permute(const gen_args *a, const ts_csr *in, ts_pattern_info *ii, ts_csr *out,
                             ts_pattern_info *info) {
  TS_TRY(need_square(a, in, ii));
  int64_t n = in->rows;
  int32_t *perm = ts__sp_alloc(n, sizeof(int32_t), "permute");
  if (!perm) return TS_ERR_OOM;
  ts_perm_random(perm, n, ts__mix64((uint64_t)ts__gen_int(a, "seed"), 0x9e37));
  ts_status s = ts_csr_permute(in, perm, perm, out);
  if (s == TS_OK) s = compose_info(ii, perm, n, info);
  ts_free(perm);
  return s;
}

static ts_status run_keep(const gen_args *a, const ts_csr *in, ts_pattern_info *ii, ts_csr *out,
                          ts_pattern_info *info) {
  double ratio;
  TS_TRY(need_square(a, in, ii));
  TS_TRY(ts__gen_num_range(a, "ratio", 0, 1, &ratio));
  int64_t n = in->rows, m = (int64_t)round(ratio * (double)n);
  if (m < 1)
    return ts_error(TS_ERR_INVALID_ARG, "keep: ratio=%g keeps round(%g*%lld) = 0 tokens", ratio, ratio, (long long)n);
  /* newidx[old] = new index or -1; kept[new] = old, sorted. */
  int32_t *newidx = ts__sp_alloc(n, sizeof(int32_t), "keep");
  int32_t *kept = newidx ? ts__sp_alloc(m, sizeof(int32_t), "keep") : NULL;
  if (!kept) {
    ts_free(newidx);
    return TS_ERR_OOM;
  }
  /* Floyd's sampling of m of n, marks in newidx (0 = dropped, 1 = kept). */
  ts_rng r;
  ts_rng_seed(&r, ts__mix64((uint64_t)ts__gen_int(a, "seed"), 0x4b45));
  memset(newidx, 0, (size_t)n * sizeof(int32_t));
  for (int64_t j = n - m; j < n; j++) {
    int64_t t = (int64_t)ts_rng_below(&r, (uint64_t)j + 1);
    newidx[newidx[t] ? j : t] = 1;
  }
  int64_t p = 0, nnz = 0;
  for (int64_t i = 0; i < n; i++) {
    if (newidx[i]) {
      kept[p] = (int32_t)i;
      newidx[i] = (int32_t)p++;
    } else {
      newidx[i] = -1;
    }
  }
  for (int64_t t = 0; t < m; t++)
    for (int64_t k = in->rowptr[kept[t]]; k < in->rowptr[kept[t] + 1]; k++) nnz += newidx[in->col[k]] >= 0;
  ts_status s = ts_csr_alloc(out, m, m, nnz, false);
  if (s == TS_OK) {
    int64_t q = 0;
    for (int64_t t = 0; t < m; t++) {
      for (int64_t k = in->rowptr[kept[t]]; k < in->rowptr[kept[t] + 1]; k++)
        if (newidx[in->col[k]] >= 0) out->col[q++] = newidx[in->col[k]];
      out->rowptr[t + 1] = q;
    }
    s = compose_info(ii, kept, m, info);
  }
  ts_free(kept);
  ts_free(newidx);
  return s;
}

#define SEED {"seed", GK_INT, false, 1}

const gen_kind ts__gen_keep = {"keep", true, run_keep,
                               "keep round(ratio*n) random tokens (sorted): induced n' x n' pattern",
                               {{"ratio", GK_NUM, true, 0}, SEED}};
const gen_kind ts__gen_permute = {"permute", true, run_permute,
                                  "random symmetric relabelling: out(i,j) = in(p[i], p[j])",
                                  {SEED}};
