/* ts_reorder: option checks, dense/empty item detection, method dispatch, `auto`, and the
 * assembly of the final permutations (dense items first, the method's order, empty items last). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

static const char *const method_names[TS_REORDER_METHOD_COUNT] = {"none",  "rcm",    "hc",      "ic",     "metis",
                                                                  "morton", "hilbert", "raster", "auto"};

const char *ts_reorder_method_name(ts_reorder_method m) {
  return (m >= 0 && m < TS_REORDER_METHOD_COUNT) ? method_names[m] : "?";
}

ts_status ts_reorder_method_parse(const char *name, ts_reorder_method *out) {
  for (int i = 0; i < TS_REORDER_METHOD_COUNT; i++)
    if (name && strcmp(name, method_names[i]) == 0) {
      *out = (ts_reorder_method)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG,
                  "unknown reordering method '%s' (expected none, rcm, hc, ic, metis, morton, hilbert, raster or auto)",
                  name ? name : "(null)");
}

void ts_reorder_opts_default(ts_reorder_opts *o) {
  memset(o, 0, sizeof *o);
  o->method = TS_REORDER_NONE;
  o->mode = TS_REORDER_MODE_AUTO;
  o->cluster_size = 8;
  o->tau = 0.6;
  o->quotient = 1;
  o->part_size = 32;
  o->refine_window = 64;
  o->dense_frac = 0.25;
  o->tile = 16;
  o->seed = 1;
}

static ts_status check_opts(const ts_csr *m, const ts_reorder_opts *o, bool *symmetric) {
  if (o->method < 0 || o->method >= TS_REORDER_METHOD_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "reorder: method %d out of range", (int)o->method);
  if (o->cluster_size < 1) return ts_error(TS_ERR_INVALID_ARG, "reorder: cluster_size must be >= 1, got %d", o->cluster_size);
  if (!(o->tau > 0 && o->tau <= 1)) return ts_error(TS_ERR_INVALID_ARG, "reorder: tau must be in (0, 1], got %g", o->tau);
  if (o->quotient < 1) return ts_error(TS_ERR_INVALID_ARG, "reorder: quotient must be >= 1, got %d", o->quotient);
  if (o->distance != TS_REORDER_JACCARD && o->distance != TS_REORDER_HAMMING)
    return ts_error(TS_ERR_INVALID_ARG, "reorder: distance %d out of range (jaccard or hamming)", (int)o->distance);
  if (o->refine_window < 0)
    return ts_error(TS_ERR_INVALID_ARG, "reorder: refine_window must be >= 0, got %d", o->refine_window);
  if (o->part_size < 1) return ts_error(TS_ERR_INVALID_ARG, "reorder: part_size must be >= 1, got %d", o->part_size);
  if (!(o->dense_frac >= 0 && o->dense_frac <= 1))
    return ts_error(TS_ERR_INVALID_ARG, "reorder: dense_frac must be in [0, 1], got %g", o->dense_frac);
  if (o->tile < 1) return ts_error(TS_ERR_INVALID_ARG, "reorder: tile must be >= 1, got %d", o->tile);
  if (o->grid_h < 0 || o->grid_w < 0)
    return ts_error(TS_ERR_INVALID_ARG, "reorder: grid %lldx%lld has a negative side", (long long)o->grid_h,
                    (long long)o->grid_w);
  switch (o->mode) {
    case TS_REORDER_MODE_AUTO: *symmetric = m->rows == m->cols; break;
    case TS_REORDER_MODE_SYMMETRIC:
      if (m->rows != m->cols)
        return ts_error(TS_ERR_INVALID_ARG,
                        "reorder: symmetric mode needs a square pattern, got %lld x %lld (use the rectangular mode)",
                        (long long)m->rows, (long long)m->cols);
      *symmetric = true;
      break;
    case TS_REORDER_MODE_RECTANGULAR: *symmetric = false; break;
    default: return ts_error(TS_ERR_INVALID_ARG, "reorder: mode %d out of range", (int)o->mode);
  }
  return TS_OK;
}

/* Median of deg[0..n) with values in [0, maxv] by counting (O(n + maxv)). */
static ts_status median_of(const int64_t *deg, int64_t n, int64_t maxv, int64_t *med) {
  *med = 0;
  if (n == 0) return TS_OK;
  int64_t *hist = calloc((size_t)maxv + 1, sizeof *hist);
  if (!hist) return ts_error(TS_ERR_OOM, "reorder: degree histogram of %lld entries", (long long)maxv + 1);
  for (int64_t i = 0; i < n; i++) hist[deg[i]]++;
  int64_t seen = 0, half = (n - 1) / 2;
  for (int64_t v = 0; v <= maxv; v++) {
    seen += hist[v];
    if (seen > half) {
      *med = v;
      break;
    }
  }
  free(hist);
  return TS_OK;
}

/* dense[i] = deg[i] >= frac * limit && deg[i] > 4 * median(deg). */
static ts_status mark_dense(const int64_t *deg, int64_t n, int64_t limit, double frac, uint8_t *dense, int64_t *count) {
  *count = 0;
  memset(dense, 0, (size_t)n);
  if (frac <= 0 || n == 0) return TS_OK;
  int64_t med;
  TS_TRY(median_of(deg, n, limit, &med));
  double thr = frac * (double)limit;
  for (int64_t i = 0; i < n; i++)
    if ((double)deg[i] >= thr && deg[i] > 4 * med) {
      dense[i] = 1;
      (*count)++;
    }
  return TS_OK;
}

static const ts__ro_fn method_fns[TS_REORDER_METHOD_COUNT] = {
    [TS_REORDER_RCM] = ts__ro_rcm,     [TS_REORDER_HC] = ts__ro_hc,         [TS_REORDER_IC] = ts__ro_ic,
    [TS_REORDER_METIS] = ts__ro_metis, [TS_REORDER_MORTON] = ts__ro_morton, [TS_REORDER_HILBERT] = ts__ro_hilbert, [TS_REORDER_RASTER] = ts__ro_raster,
};

/* perm = items with dense[] (index order), then order[0..nord), then the rest (index order). */
static void assemble(int64_t n, const uint8_t *dense, const uint8_t *active, const int32_t *order, int64_t nord,
                     int32_t *perm) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (dense[i]) perm[k++] = (int32_t)i;
  for (int64_t i = 0; i < nord; i++) perm[k++] = order[i];
  for (int64_t i = 0; i < n; i++)
    if (!dense[i] && !active[i]) perm[k++] = (int32_t)i;
}

/* One concrete method (not auto). */
static ts_status run_method(const ts_csr *m, const ts_reorder_opts *o, ts_reorder_method method, bool symmetric,
                            int32_t *row_perm, int32_t *col_perm, ts_reorder_stats *st) {
  int64_t R = m->rows, C = m->cols;
  st->method = method;
  st->symmetric = symmetric;
  if (method == TS_REORDER_NONE) {
    ts_perm_identity(row_perm, R);
    if (col_perm) ts_perm_identity(col_perm, C);
    return TS_OK;
  }
  ts_status s = TS_OK;
  int64_t *rdeg = calloc((size_t)R + 1, sizeof *rdeg), *cdeg = calloc((size_t)C + 1, sizeof *cdeg);
  int64_t *radeg = calloc((size_t)R + 1, sizeof *radeg), *cadeg = calloc((size_t)C + 1, sizeof *cadeg);
  uint8_t *rdense = malloc((size_t)R + 1), *cdense = malloc((size_t)C + 1);
  uint8_t *ract = calloc((size_t)R + 1, 1), *cact = calloc((size_t)C + 1, 1);
  int32_t *rord = malloc(((size_t)R + 1) * sizeof *rord), *cord = malloc(((size_t)C + 1) * sizeof *cord);
  if (!rdeg || !cdeg || !radeg || !cadeg || !rdense || !cdense || !ract || !cact || !rord || !cord) {
    s = ts_error(TS_ERR_OOM, "reorder: work arrays for a %lld x %lld pattern", (long long)R, (long long)C);
    goto done;
  }
  for (int64_t i = 0; i < R; i++) {
    rdeg[i] = m->rowptr[i + 1] - m->rowptr[i];
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) cdeg[m->col[k]]++;
  }
  int64_t nrd, ncd;
  if (symmetric) { /* a token is dense when its row or its column is */
    for (int64_t i = 0; i < R; i++) rdeg[i] = rdeg[i] > cdeg[i] ? rdeg[i] : cdeg[i];
    s = mark_dense(rdeg, R, R, o->dense_frac, rdense, &nrd);
    if (s != TS_OK) goto done;
    memcpy(cdense, rdense, (size_t)R);
    ncd = nrd;
  } else {
    s = mark_dense(rdeg, R, C, o->dense_frac, rdense, &nrd);
    if (s == TS_OK) s = mark_dense(cdeg, C, R, o->dense_frac, cdense, &ncd);
    if (s != TS_OK) goto done;
  }
  /* active degree: nonzeros between non-dense items (off-diagonal in symmetric mode) */
  for (int64_t i = 0; i < R; i++)
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int32_t j = m->col[k];
      if (rdense[i] || cdense[j] || (symmetric && i == j)) continue;
      radeg[i]++;
      cadeg[j]++;
    }
  ts__ro_problem p = {.m = m, .o = o, .symmetric = symmetric, .row_active = ract, .col_active = cact};
  for (int64_t i = 0; i < R; i++) {
    ract[i] = !rdense[i] && (radeg[i] > 0 || (symmetric && cadeg[i] > 0));
    p.nrow_active += ract[i];
  }
  if (symmetric) {
    p.col_active = ract;
    p.ncol_active = p.nrow_active;
  } else {
    for (int64_t j = 0; j < C; j++) {
      cact[j] = !cdense[j] && cadeg[j] > 0;
      p.ncol_active += cact[j];
    }
  }
  st->dense_rows = nrd;
  st->dense_cols = ncd;
  st->empty_rows = R - nrd - p.nrow_active;
  st->empty_cols = C - ncd - p.ncol_active;
  s = method_fns[method](&p, rord, symmetric ? NULL : cord, &st->groups, &st->col_groups);
  if (s != TS_OK) goto done;
  assemble(R, rdense, ract, rord, p.nrow_active, row_perm);
  if (!symmetric) assemble(C, cdense, cact, cord, p.ncol_active, col_perm);
  if (method == TS_REORDER_HC || method == TS_REORDER_IC) {
    s = ts__refine_local(m, symmetric, row_perm, nrd, nrd + p.nrow_active, col_perm, ncd, ncd + p.ncol_active, o->tile,
                         o->refine_window);
    if (s != TS_OK) goto done;
  }
  if (symmetric && col_perm) memcpy(col_perm, row_perm, (size_t)R * sizeof *row_perm);
  /* a method bug must never escape as a silently wrong permutation */
  ts_status v = ts_perm_validate(row_perm, R);
  if (v == TS_OK && col_perm) v = ts_perm_validate(col_perm, C);
  if (v == TS_ERR_OOM) { /* the check itself could not run: out of memory, not a method bug */
    s = v;
  } else if (v != TS_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", ts_last_error()); /* ts_error rewrites the buffer it points to */
    s = ts_error(TS_ERR_INTERNAL, "reorder: %s produced an invalid permutation (%s)", ts_reorder_method_name(method), why);
  }
done:
  free(rdeg), free(cdeg), free(radeg), free(cadeg), free(rdense), free(cdense), free(ract), free(cact);
  free(rord), free(cord);
  return s;
}

/* auto: the cheap candidates (none, rcm, hc, ic, and morton/hilbert/raster when a grid is given);
 * keeps the fewest non-empty tiles, ties going to the earlier candidate. */
static ts_status run_auto(const ts_csr *m, const ts_reorder_opts *o, bool symmetric, int32_t *row_perm,
                          int32_t *col_perm, ts_reorder_stats *st) {
  static const ts_reorder_method cand[] = {TS_REORDER_NONE, TS_REORDER_RCM,    TS_REORDER_HC,
                                           TS_REORDER_IC,   TS_REORDER_MORTON, TS_REORDER_HILBERT,
                                           TS_REORDER_RASTER};
  int64_t R = m->rows, C = m->cols, best = -1;
  int32_t *rp = malloc(((size_t)R + 1) * sizeof *rp), *cp = malloc(((size_t)C + 1) * sizeof *cp);
  ts_status s = TS_OK;
  if (!rp || !cp) {
    s = ts_error(TS_ERR_OOM, "reorder auto: permutations of %lld + %lld", (long long)R, (long long)C);
    goto done;
  }
  for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++) {
    ts_reorder_method meth = cand[c];
    if ((meth == TS_REORDER_MORTON || meth == TS_REORDER_HILBERT || meth == TS_REORDER_RASTER) && (o->grid_h == 0 || !symmetric))
      continue;
    ts_reorder_stats cst = {0};
    double t0 = ts_now();
    s = run_method(m, o, meth, symmetric, rp, cp, &cst);
    if (s != TS_OK) {
      ts_error_prefix("reorder auto (candidate %s): ", ts_reorder_method_name(meth));
      goto done;
    }
    int64_t tiles;
    s = ts__tiles_nonempty(m, rp, symmetric ? rp : cp, o->tile, &tiles);
    if (s != TS_OK) goto done;
    st->auto_tiles[meth] = tiles;
    st->auto_ms[meth] = 1e3 * (ts_now() - t0);
    if (best < 0 || tiles < best) {
      best = tiles;
      memcpy(row_perm, rp, (size_t)R * sizeof *rp);
      if (col_perm) memcpy(col_perm, symmetric ? rp : cp, (size_t)C * sizeof *cp);
      ts_reorder_stats keep = *st;
      *st = cst;
      memcpy(st->auto_tiles, keep.auto_tiles, sizeof st->auto_tiles);
      memcpy(st->auto_ms, keep.auto_ms, sizeof st->auto_ms);
    }
  }
done:
  free(rp), free(cp);
  return s;
}

ts_status ts_reorder(const ts_csr *m, const ts_reorder_opts *o, int32_t *row_perm, int32_t *col_perm,
                     ts_reorder_stats *st) {
  double t0 = ts_now();
  ts_reorder_stats local;
  if (!st) st = &local;
  memset(st, 0, sizeof *st);
  for (int i = 0; i < TS_REORDER_METHOD_COUNT; i++) st->auto_tiles[i] = -1, st->auto_ms[i] = -1;
  if (!m || !o || !row_perm) return ts_error(TS_ERR_INVALID_ARG, "reorder: pattern, options and row_perm are required");
  TS_TRY(ts_csr_validate(m));
  bool symmetric = false;
  TS_TRY(check_opts(m, o, &symmetric));
  if (!symmetric && !col_perm)
    return ts_error(TS_ERR_INVALID_ARG, "reorder: col_perm is required in rectangular mode (%lld x %lld)",
                    (long long)m->rows, (long long)m->cols);
  ts_status s = o->method == TS_REORDER_AUTO ? run_auto(m, o, symmetric, row_perm, col_perm, st)
                                             : run_method(m, o, o->method, symmetric, row_perm, col_perm, st);
  st->ms = 1e3 * (ts_now() - t0);
  return s;
}
