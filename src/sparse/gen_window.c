/* Local-attention token patterns: window1d (band + global tokens), window2d / dilated2d (NAT
 * neighbourhoods), swin (plain and shifted windows), vitdet (windows + global tokens).
 * Every 2-D pattern here is a Kronecker product of two 1-D axis patterns (a key is in the window
 * iff its row and its column are, each on its own axis), so each is built from an h x h and a
 * w x w axis pattern in O(nnz), rows filled in parallel. */
#include <string.h>

#include "gen_internal.h"

ts_status ts__gen_band(int64_t n, int64_t half, ts_csr *out) {
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t lo = i - half < 0 ? 0 : i - half, hi = half >= n - 1 - i ? n - 1 : i + half;
    nnz += hi - lo + 1;
  }
  TS_TRY(ts_csr_alloc(out, n, n, nnz, false));
  int64_t p = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t lo = i - half < 0 ? 0 : i - half, hi = half >= n - 1 - i ? n - 1 : i + half;
    for (int64_t j = lo; j <= hi; j++) out->col[p++] = (int32_t)j;
    out->rowptr[i + 1] = p;
  }
  return TS_OK;
}

/* NAT axis pattern on L positions, window k (odd), dilation d: position c sees the positions of
 * its residue class c % d, a k-window in that subsequence shifted to stay inside it. */
static ts_status axis_nat(int64_t L, int64_t k, int64_t d, ts_csr *out) {
  int64_t nnz = 0;
  for (int64_t c = 0; c < L; c++) {
    int64_t len = (L - c % d + d - 1) / d;
    nnz += k < len ? k : len;
  }
  TS_TRY(ts_csr_alloc(out, L, L, nnz, false));
  int64_t p = 0;
  for (int64_t c = 0; c < L; c++) {
    int64_t r = c % d, len = (L - r + d - 1) / d, size = k < len ? k : len, s = c / d - k / 2;
    if (s > len - size) s = len - size;
    if (s < 0) s = 0;
    for (int64_t t = 0; t < size; t++) out->col[p++] = (int32_t)(r + d * (s + t));
    out->rowptr[c + 1] = p;
  }
  return TS_OK;
}

/* Axis partition into groups [0, s), [s, s+win), [s+win, s+2win), ... clipped to L (s = 0:
 * plain windows from 0): positions see exactly their own group. */
static ts_status axis_groups(int64_t L, int64_t win, int64_t s, ts_csr *out) {
  int64_t nnz = 0;
  for (int pass = 0; pass < 2; pass++) {
    int64_t p = 0;
    for (int64_t c = 0; c < L; c++) {
      int64_t g = (c + win - s) / win, a = (g - 1) * win + s, b = g * win + s;
      if (a < 0) a = 0;
      if (b > L) b = L;
      if (pass == 1) {
        for (int64_t j = a; j < b; j++) out->col[p++] = (int32_t)j;
        out->rowptr[c + 1] = p;
      }
      nnz += b - a;
    }
    if (pass == 0) TS_TRY(ts_csr_alloc(out, L, L, nnz, false));
  }
  return TS_OK;
}

ts_status ts__gen_kron(const ts_csr *a, const ts_csr *b, ts_csr *out) {
  int64_t ha = a->rows, wb = b->rows, n = ha * wb;
  int64_t nnz = 0;
  for (int64_t y = 0; y < ha; y++) nnz += (a->rowptr[y + 1] - a->rowptr[y]) * b->nnz;
  TS_TRY(ts_csr_alloc(out, n, n, nnz, false));
  for (int64_t y = 0; y < ha; y++)
    for (int64_t x = 0; x < wb; x++) {
      int64_t r = y * wb + x;
      out->rowptr[r + 1] = out->rowptr[r] + (a->rowptr[y + 1] - a->rowptr[y]) * (b->rowptr[x + 1] - b->rowptr[x]);
    }
#pragma omp parallel for schedule(static) num_threads(ts__gen_threads())
  for (int64_t r = 0; r < n; r++) {
    int64_t y = r / wb, x = r % wb, p = out->rowptr[r];
    for (int64_t ka = a->rowptr[y]; ka < a->rowptr[y + 1]; ka++) {
      int64_t base = (int64_t)a->col[ka] * wb;
      for (int64_t kb = b->rowptr[x]; kb < b->rowptr[x + 1]; kb++) out->col[p++] = (int32_t)(base + b->col[kb]);
    }
  }
  return TS_OK;
}

ts_status ts__gen_add_global(const ts_csr *in, int64_t g, ts_csr *out) {
  int64_t n = in->rows, nnz = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i < g) {
      nnz += n;
      continue;
    }
    nnz += g;
    for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++) nnz += in->col[k] >= g;
  }
  TS_TRY(ts_csr_alloc(out, n, n, nnz, false));
  int64_t p = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t lim = i < g ? n : g;
    for (int64_t j = 0; j < lim; j++) out->col[p++] = (int32_t)j;
    if (i >= g)
      for (int64_t k = in->rowptr[i]; k < in->rowptr[i + 1]; k++)
        if (in->col[k] >= g) out->col[p++] = in->col[k];
    out->rowptr[i + 1] = p;
  }
  return TS_OK;
}

/* h, w >= 1 and h*w within the index limit. */
static ts_status grid_keys(const gen_args *a, int64_t *h, int64_t *w, int64_t *n) {
  TS_TRY(ts__gen_int_range(a, "h", 1, INT64_MAX, h));
  TS_TRY(ts__gen_int_range(a, "w", 1, INT64_MAX, w));
  TS_TRY(ts__gen_mul(a, *h, *w, "h*w", n));
  return ts__gen_index_limit(a, *n, "h*w");
}

static ts_status kron_axes(ts_status (*make)(int64_t, int64_t, int64_t, ts_csr *), int64_t h, int64_t w, int64_t p1,
                           int64_t p2, ts_csr *out) {
  ts_csr ay, ax;
  memset(&ax, 0, sizeof ax);
  ts_status s = make(h, p1, p2, &ay);
  if (s == TS_OK) s = make(w, p1, p2, &ax);
  if (s == TS_OK) s = ts__gen_kron(&ay, &ax, out);
  ts_csr_free(&ay);
  ts_csr_free(&ax);
  return s;
}

static void grid_info(ts_pattern_info *info, int64_t h, int64_t w, bool symmetric) {
  info->n = info->base_n = h * w;
  info->grid_h = h;
  info->grid_w = w;
  info->symmetric = symmetric;
}

static ts_status run_window1d(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                              ts_pattern_info *info) {
  int64_t n, w, g;
  TS_TRY(ts__gen_int_range(a, "n", 1, INT64_MAX, &n));
  TS_TRY(ts__gen_index_limit(a, n, "n"));
  TS_TRY(ts__gen_int_range(a, "w", 0, INT64_MAX, &w));
  TS_TRY(ts__gen_int_range(a, "global", 0, n, &g));
  ts_csr band;
  TS_TRY(ts__gen_band(n, w / 2, &band));
  ts_status s = TS_OK;
  if (g > 0) {
    s = ts__gen_add_global(&band, g, out);
    ts_csr_free(&band);
  } else {
    *out = band;
  }
  info->n = info->base_n = n;
  info->symmetric = true;
  return s;
}

static ts_status run_nat(const gen_args *a, int64_t d, ts_csr *out, ts_pattern_info *info) {
  int64_t h, w, n, k;
  TS_TRY(grid_keys(a, &h, &w, &n));
  TS_TRY(ts__gen_int_range(a, "k", 1, INT32_MAX, &k));
  if (k % 2 == 0) return ts_error(TS_ERR_INVALID_ARG, "%s: k must be odd, got %lld", a->kind->name, (long long)k);
  TS_TRY(kron_axes(axis_nat, h, w, k, d, out));
  grid_info(info, h, w, false);
  return TS_OK;
}

static ts_status run_window2d(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                              ts_pattern_info *info) {
  return run_nat(a, 1, out, info);
}

static ts_status run_dilated2d(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                               ts_pattern_info *info) {
  int64_t d;
  TS_TRY(ts__gen_int_range(a, "d", 1, INT32_MAX, &d));
  return run_nat(a, d, out, info);
}

static ts_status run_swin(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                          ts_pattern_info *info) {
  int64_t h, w, n, win, shift;
  TS_TRY(grid_keys(a, &h, &w, &n));
  TS_TRY(ts__gen_int_range(a, "win", 1, INT32_MAX, &win));
  TS_TRY(ts__gen_int_range(a, "shift", 0, 1, &shift));
  int64_t m = h < w ? h : w;
  if (m <= win) { /* Swin: a window covering the smaller side is not shifted */
    win = m;
    shift = 0;
  }
  TS_TRY(kron_axes(axis_groups, h, w, win, shift ? win / 2 : 0, out));
  grid_info(info, h, w, true);
  return TS_OK;
}

static ts_status run_vitdet(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                            ts_pattern_info *info) {
  int64_t h, w, n, win, g;
  TS_TRY(grid_keys(a, &h, &w, &n));
  TS_TRY(ts__gen_int_range(a, "win", 1, INT32_MAX, &win));
  TS_TRY(ts__gen_int_range(a, "global", 0, n, &g));
  ts_csr base;
  TS_TRY(kron_axes(axis_groups, h, w, win, 0, &base));
  ts_status s = TS_OK;
  if (g > 0) {
    s = ts__gen_add_global(&base, g, out);
    ts_csr_free(&base);
  } else {
    *out = base;
  }
  grid_info(info, h, w, true);
  return s;
}

#define REQ_INT(k) {k, GK_INT, true, 0}
#define OPT_INT(k, d) {k, GK_INT, false, d}

const gen_kind ts__gen_window1d = {"window1d", false, run_window1d,
                                   "1-D band |i-j| <= w/2 (w/2 rounds down); first `global` tokens global",
                                   {REQ_INT("n"), REQ_INT("w"), OPT_INT("global", 0)}};
const gen_kind ts__gen_window2d = {"window2d", false, run_window2d,
                                   "k x k neighbourhood (k odd) on an h x w grid, NAT border clamping",
                                   {REQ_INT("h"), REQ_INT("w"), REQ_INT("k")}};
const gen_kind ts__gen_dilated2d = {"dilated2d", false, run_dilated2d,
                                    "NAT dilated k x k neighbourhood, dilation d",
                                    {REQ_INT("h"), REQ_INT("w"), REQ_INT("k"), REQ_INT("d")}};
const gen_kind ts__gen_swin = {"swin", false, run_swin,
                               "Swin windows; shift=1: shifted windows, cyclic-shift mask",
                               {REQ_INT("h"), REQ_INT("w"), REQ_INT("win"), OPT_INT("shift", 0)}};
const gen_kind ts__gen_vitdet = {"vitdet", false, run_vitdet,
                                 "win x win windows (partial at borders) + first `global` tokens global",
                                 {REQ_INT("h"), REQ_INT("w"), REQ_INT("win"), OPT_INT("global", 0)}};
