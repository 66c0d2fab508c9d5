/* Channel connectivity of group convolutions (rows = output channels, cols = input channels):
 * `condense` (CondenseNet learned groups: each output group shares its own random input set),
 * `unstructconv` (each output channel keeps m inputs, a corr fraction of them drawn from its
 * latent group's preferred set), `groupconv` (a standard block-diagonal grouped convolution),
 * `blockconn` (bo x bi blocks, each output block on a fixed number of random input blocks) and
 * the `permconn` wrapper (independent random row and column relabelling of any connectivity). */
#include <math.h>
#include <string.h>

#include "gen_internal.h"

/* sel[0..m): a sorted uniform m-subset of [0, n), via a partial Fisher-Yates on pool (scratch
 * [n]) and a mark scan (mark: zeroed scratch [n], left zeroed). */
static void random_subset(ts_rng *r, int64_t n, int64_t m, int32_t *pool, uint8_t *mark, int32_t *sel) {
  ts_perm_identity(pool, n);
  for (int64_t t = 0; t < m; t++) {
    int64_t j = t + (int64_t)ts_rng_below(r, (uint64_t)(n - t));
    int32_t v = pool[j];
    pool[j] = pool[t];
    pool[t] = v;
    mark[v] = 1;
  }
  int64_t p = 0;
  for (int64_t c = 0; c < n && p < m; c++)
    if (mark[c]) {
      sel[p++] = (int32_t)c;
      mark[c] = 0;
    }
}

static ts_status conn_shape(const gen_args *a, int64_t *cin, int64_t *cout) {
  TS_TRY(ts__gen_int_range(a, "cin", 1, INT32_MAX, cin));
  return ts__gen_int_range(a, "cout", 1, INT32_MAX, cout);
}

/* Scratch for the subset draws: pool [n] int32 and mark [n] bytes. */
static ts_status scratch(int64_t n, int32_t **pool, uint8_t **mark) {
  *pool = ts__sp_alloc(n, sizeof(int32_t), "connectivity");
  *mark = *pool ? ts__sp_alloc(n, 1, "connectivity") : NULL;
  if (!*mark) {
    ts_free(*pool);
    *pool = NULL;
    return TS_ERR_OOM;
  }
  memset(*mark, 0, (size_t)n);
  return TS_OK;
}

static bool given(const gen_args *a, const char *key) {
  for (int i = 0; i < GEN_MAX_KEYS && a->kind->keys[i].name; i++)
    if (strcmp(a->kind->keys[i].name, key) == 0) return a->given[i];
  return false;
}

static ts_status run_condense(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                              ts_pattern_info *info) {
  int64_t cin, cout, g;
  TS_TRY(conn_shape(a, &cin, &cout));
  TS_TRY(ts__gen_int_range(a, "groups", 1, cin < cout ? cin : cout, &g));
  if (cin % g || cout % g)
    return ts_error(TS_ERR_INVALID_ARG, "condense: cin=%lld and cout=%lld must both be divisible by groups=%lld",
                    (long long)cin, (long long)cout, (long long)g);
  int64_t m = cin / g, per = cout / g;
  if (given(a, "keep")) { /* keep: inputs per group other than cin/groups (condense factor != groups) */
    double keep;
    TS_TRY(ts__gen_num_range(a, "keep", 0, 1, &keep));
    m = (int64_t)round(keep * (double)cin);
    if (m < 1)
      return ts_error(TS_ERR_INVALID_ARG, "condense: keep=%g keeps round(%g*%lld) = 0 inputs per group", keep, keep,
                      (long long)cin);
  }
  TS_TRY(ts_csr_alloc(out, cout, cin, cout * m, false));
  int32_t *pool;
  uint8_t *mark;
  ts_status s = scratch(cin, &pool, &mark);
  if (s != TS_OK) {
    ts_csr_free(out);
    return s;
  }
  uint64_t seed = (uint64_t)ts__gen_int(a, "seed");
  for (int64_t grp = 0; grp < g; grp++) {
    ts_rng r;
    ts_rng_seed(&r, ts__mix64(seed, (uint64_t)grp));
    int32_t *first = out->col + grp * per * m;
    random_subset(&r, cin, m, pool, mark, first);
    for (int64_t o = 1; o < per; o++) memcpy(first + o * m, first, (size_t)m * sizeof(int32_t));
  }
  for (int64_t o = 0; o < cout; o++) out->rowptr[o + 1] = (o + 1) * m;
  ts_free(pool);
  ts_free(mark);
  return TS_OK;
}

/* Removes value v from a swap-remove pool (items[0..*n), pos[v] = index or -1). */
static void pool_remove(int32_t *items, int32_t *pos, int64_t *n, int32_t v) {
  int32_t i = pos[v];
  if (i < 0) return;
  int32_t last = items[--*n];
  items[i] = last;
  pos[last] = i;
  pos[v] = -1;
}

static ts_status run_unstructconv(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                                  ts_pattern_info *info) {
  int64_t cin, cout, g;
  double keep, corr;
  TS_TRY(conn_shape(a, &cin, &cout));
  TS_TRY(ts__gen_num_range(a, "keep", 0, 1, &keep));
  TS_TRY(ts__gen_int_range(a, "groups", 1, cout, &g));
  TS_TRY(ts__gen_num_range(a, "corr", 0, 1, &corr));
  int64_t m = (int64_t)round(keep * (double)cin);
  if (m < 1)
    return ts_error(TS_ERR_INVALID_ARG, "unstructconv: keep=%g keeps round(%g*%lld) = 0 inputs per output channel",
                    keep, keep, (long long)cin);
  TS_TRY(ts_csr_alloc(out, cout, cin, cout * m, false));
  /* pref: [g][m] preferred sets; all/pa and pref pools with position maps; mark for sorting. */
  int32_t *pref = ts__sp_alloc(g * m, sizeof(int32_t), "unstructconv");
  int32_t *all = pref ? ts__sp_alloc(4 * cin, sizeof(int32_t), "unstructconv") : NULL;
  uint8_t *mark = all ? ts__sp_alloc(cin, 1, "unstructconv") : NULL;
  if (!mark) {
    ts_free(pref);
    ts_free(all);
    ts_csr_free(out);
    return TS_ERR_OOM;
  }
  int32_t *pos_all = all + cin, *pp = all + 2 * cin, *pos_pp = all + 3 * cin;
  memset(mark, 0, (size_t)cin);
  uint64_t seed = (uint64_t)ts__gen_int(a, "seed");
  for (int64_t grp = 0; grp < g; grp++) {
    ts_rng r;
    ts_rng_seed(&r, ts__mix64(seed, (uint64_t)grp));
    random_subset(&r, cin, m, all, mark, pref + grp * m);
  }
  uint64_t row_seed = ts__mix64(seed, (uint64_t)g + 1);
  for (int64_t o = 0; o < cout; o++) {
    const int32_t *gp = pref + (o * g / cout) * m;
    int64_t na = cin, np = m;
    for (int64_t c = 0; c < cin; c++) all[c] = pos_all[c] = (int32_t)c, pos_pp[c] = -1;
    for (int64_t t = 0; t < m; t++) pp[t] = gp[t], pos_pp[gp[t]] = (int32_t)t;
    ts_rng r;
    ts_rng_seed(&r, ts__mix64(row_seed, (uint64_t)o));
    for (int64_t t = 0; t < m; t++) {
      int32_t v;
      if (np > 0 && ts_rng_uniform(&r) < corr) v = pp[ts_rng_below(&r, (uint64_t)np)];
      else v = all[ts_rng_below(&r, (uint64_t)na)];
      pool_remove(all, pos_all, &na, v);
      pool_remove(pp, pos_pp, &np, v);
      mark[v] = 1;
    }
    int32_t *dst = out->col + o * m;
    int64_t p = 0;
    for (int64_t c = 0; c < cin; c++)
      if (mark[c]) {
        dst[p++] = (int32_t)c;
        mark[c] = 0;
      }
    out->rowptr[o + 1] = (o + 1) * m;
  }
  ts_free(pref);
  ts_free(all);
  ts_free(mark);
  return TS_OK;
}

static ts_status run_groupconv(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                               ts_pattern_info *info) {
  int64_t cin, cout, g;
  TS_TRY(conn_shape(a, &cin, &cout));
  TS_TRY(ts__gen_int_range(a, "groups", 1, cin < cout ? cin : cout, &g));
  if (cin % g || cout % g)
    return ts_error(TS_ERR_INVALID_ARG, "groupconv: cin=%lld and cout=%lld must both be divisible by groups=%lld",
                    (long long)cin, (long long)cout, (long long)g);
  int64_t m = cin / g, per = cout / g;
  TS_TRY(ts_csr_alloc(out, cout, cin, cout * m, false));
  for (int64_t o = 0; o < cout; o++) {
    for (int64_t t = 0; t < m; t++) out->col[o * m + t] = (int32_t)((o / per) * m + t);
    out->rowptr[o + 1] = (o + 1) * m;
  }
  return TS_OK;
}

/* Block rows of bo output channels (the last may be partial) each connect to exactly
 * round(density * nbc) of the nbc = ceil(cin / bi) input blocks of bi channels, drawn uniformly
 * per block row; at least one. */
static ts_status run_blockconn(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                               ts_pattern_info *info) {
  int64_t cin, cout, bo, bi;
  double density;
  TS_TRY(conn_shape(a, &cin, &cout));
  TS_TRY(ts__gen_int_range(a, "bo", 1, cout, &bo));
  TS_TRY(ts__gen_int_range(a, "bi", 1, cin, &bi));
  TS_TRY(ts__gen_num_range(a, "density", 0, 1, &density));
  int64_t nbr = (cout + bo - 1) / bo, nbc = (cin + bi - 1) / bi, kb = (int64_t)round(density * (double)nbc);
  if (kb < 1) kb = 1;
  int32_t *sel = ts__sp_alloc(nbr * kb, sizeof(int32_t), "blockconn"), *pool;
  uint8_t *mark;
  if (!sel) return TS_ERR_OOM;
  ts_status s = scratch(nbc, &pool, &mark);
  if (s != TS_OK) {
    ts_free(sel);
    return s;
  }
  uint64_t seed = (uint64_t)ts__gen_int(a, "seed");
  int64_t per_row = 0; /* columns per row of block row b: kb blocks, minus the short last block */
  int64_t *width = ts__sp_alloc(nbr, sizeof(int64_t), "blockconn");
  if (!width) s = TS_ERR_OOM;
  int64_t nnz = 0;
  for (int64_t b = 0; s == TS_OK && b < nbr; b++) {
    ts_rng r;
    ts_rng_seed(&r, ts__mix64(seed, (uint64_t)b));
    random_subset(&r, nbc, kb, pool, mark, sel + b * kb);
    per_row = kb * bi - (sel[b * kb + kb - 1] == nbc - 1 ? nbc * bi - cin : 0);
    width[b] = per_row;
    nnz += per_row * ((b + 1) * bo <= cout ? bo : cout - b * bo);
  }
  if (s == TS_OK) s = ts_csr_alloc(out, cout, cin, nnz, false);
  if (s == TS_OK) {
    for (int64_t o = 0; o < cout; o++) {
      int64_t b = o / bo, p = out->rowptr[o];
      for (int64_t t = 0; t < kb; t++)
        for (int64_t c = (int64_t)sel[b * kb + t] * bi; c < (sel[b * kb + t] + 1) * bi && c < cin; c++)
          out->col[p++] = (int32_t)c;
      out->rowptr[o + 1] = out->rowptr[o] + width[b];
    }
  }
  ts_free(width);
  ts_free(sel);
  ts_free(pool);
  ts_free(mark);
  return s;
}

/* out(i, j) = in(rp[i], cp[j]) with independent random rp, cp: hides any structure of the
 * channel order, as a trained model's arbitrary channel numbering does. */
static ts_status run_permconn(const gen_args *a, const ts_csr *in, ts_pattern_info *ii, ts_csr *out,
                              ts_pattern_info *info) {
  if (ii->n != 0)
    return ts_error(TS_ERR_INVALID_ARG, "permconn: inner pattern %s is a token pattern (use permute:)", ii->kind);
  int32_t *rp = ts__sp_alloc(in->rows + in->cols, sizeof(int32_t), "permconn");
  if (!rp) return TS_ERR_OOM;
  uint64_t seed = (uint64_t)ts__gen_int(a, "seed");
  ts_perm_random(rp, in->rows, ts__mix64(seed, 0x524f57));
  ts_perm_random(rp + in->rows, in->cols, ts__mix64(seed, 0x434f4c));
  ts_status s = ts_csr_permute(in, rp, rp + in->rows, out);
  ts_free(rp);
  return s;
}

#define REQ_INT(k) {k, GK_INT, true, 0}
#define REQ_NUM(k) {k, GK_NUM, true, 0}
#define SEED {"seed", GK_INT, false, 1}

const gen_kind ts__gen_condense = {
    "condense", false, run_condense,
    "cout x cin; each of `groups` output groups uses round(keep*cin) random inputs (keep=0: cin/groups)",
    {REQ_INT("cin"), REQ_INT("cout"), REQ_INT("groups"), SEED, {"keep", GK_NUM, false, 0}}};
const gen_kind ts__gen_unstructconv = {
    "unstructconv", false, run_unstructconv,
    "cout x cin; round(keep*cin) inputs per output, a corr share from its group's preferred set",
    {REQ_INT("cin"), REQ_INT("cout"), REQ_NUM("keep"), REQ_INT("groups"), REQ_NUM("corr"), SEED}};
const gen_kind ts__gen_groupconv = {"groupconv", false, run_groupconv,
                                    "cout x cin block diagonal: output group g uses inputs [g*cin/groups, (g+1)*cin/groups)",
                                    {REQ_INT("cin"), REQ_INT("cout"), REQ_INT("groups")}};
const gen_kind ts__gen_blockconn = {
    "blockconn", false, run_blockconn,
    "cout x cin; each bo-row block on max(1, round(density*ceil(cin/bi))) random bi-column blocks",
    {REQ_INT("cin"), REQ_INT("cout"), REQ_INT("bo"), REQ_INT("bi"), REQ_NUM("density"), SEED}};
const gen_kind ts__gen_permconn = {"permconn", true, run_permconn,
                                   "connectivity with independent random row and column orders",
                                   {SEED}};
