/* Random patterns: `random` and `randconn` (exactly K distinct cells, uniform over all K-sets)
 * and `blockrandom` (Bernoulli blocks).
 *
 * Exact sampling in O(K + rows): the row counts of a uniform K-subset of a rows x cols grid are
 * multivariate hypergeometric, drawn row by row as count_i ~ Hypergeometric(population = cells
 * left, successes = K left, draws = cols); the columns of each row are then a uniform count_i-
 * subset of cols (Floyd's algorithm). Each row has its own RNG stream, so rows are filled in
 * parallel and the result does not depend on the thread count. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* Below this relative weight the hypergeometric tails are cut (mass lost < 1e-14). */
#define HG_CUTOFF 1e-17

/* Successes in `draws` draws without replacement from N items of which K are successes, by
 * inversion from the mode: weights relative to the mode's are summed walking down then up, and
 * the same walk in the same order picks the sample, so both passes see identical rounding. */
static int64_t hypergeom(ts_rng *r, int64_t N, int64_t K, int64_t draws) {
  int64_t lo = draws - (N - K) > 0 ? draws - (N - K) : 0, hi = draws < K ? draws : K;
  if (lo >= hi) return lo;
  long double mm = floorl((long double)(draws + 1) * (long double)(K + 1) / (long double)(N + 2));
  int64_t m = mm < (long double)lo ? lo : mm > (long double)hi ? hi : (int64_t)mm;
  double fN = (double)N, fK = (double)K, fd = (double)draws;
  double target = 0;
  for (int pass = 0; pass < 2; pass++) {
    double acc = 1.0, w = 1.0;
    int64_t last = m; /* the value whose weight was added last */
    if (pass == 1 && acc > target) return m;
    for (int64_t k = m; k > lo; k--) { /* w(k-1) = w(k) * k (N-K-draws+k) / ((K-k+1)(draws-k+1)) */
      double fk = (double)k;
      w *= fk * (fN - fK - fd + fk) / ((fK - fk + 1.0) * (fd - fk + 1.0));
      acc += w;
      last = k - 1;
      if (pass == 1 && acc > target) return last;
      if (w < HG_CUTOFF) break;
    }
    w = 1.0;
    for (int64_t k = m; k < hi; k++) { /* w(k+1) = w(k) (K-k)(draws-k) / ((k+1)(N-K-draws+k+1)) */
      double fk = (double)k;
      w *= (fK - fk) * (fd - fk) / ((fk + 1.0) * (fN - fK - fd + fk + 1.0));
      acc += w;
      last = k + 1;
      if (pass == 1 && acc > target) return last;
      if (w < HG_CUTOFF) break;
    }
    if (pass == 1) return last; /* only when rounding put target at the very total */
    target = ts_rng_uniform(r) * acc;
  }
  return m;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Largest column count that gets a per-thread bitmap (2 MiB) for Floyd's membership tests. */
#define BITMAP_COLS_MAX (1ll << 24)

/* Uniform in [0, n) for n <= 2^32 by Lemire's multiply-shift with rejection (unbiased, and
 * without the two 64-bit divisions of ts_rng_below on the hot path). */
static inline uint64_t below32(ts_rng *r, uint64_t n) {
  uint64_t m = (ts_rng_next(r) >> 32) * n;
  if ((uint32_t)m < n) {
    uint32_t t = (uint32_t)(-(uint32_t)n) % (uint32_t)n;
    while ((uint32_t)m < t) m = (ts_rng_next(r) >> 32) * n;
  }
  return m >> 32;
}

/* Appends the set bits of the words bits[0..nw) as column indices to dst (exactly k of them),
 * clearing the words. At ~1% density a word is zero about half the time, so a branch per word
 * mispredicts constantly: the first two bits of each word are written unconditionally (a write
 * past the current end is overwritten by the next real one; the p + 2 <= k guard keeps them
 * inside the row) and only words with 3+ bits loop. */
static void extract_bits(uint64_t *bits, int64_t nw, int64_t k, int32_t *dst) {
  const uint64_t top = (uint64_t)1 << 63;
  int64_t p = 0;
  for (int64_t q = 0; q < nw; q++) {
    uint64_t x = bits[q];
    bits[q] = 0;
    int32_t base = (int32_t)(q * 64);
    if (p + 2 <= k) {
      uint64_t x1 = x & (x - 1);
      dst[p] = base + __builtin_ctzll(x | top);
      dst[p + (x != 0)] = base + __builtin_ctzll(x1 | top);
      p += (x != 0) + (x1 != 0);
      x = x1 & (x1 - 1);
    }
    for (; x; x &= x - 1) dst[p++] = base + __builtin_ctzll(x);
  }
}

/* dst[0..k): a sorted uniform k-subset of [0, cols). bits: zeroed scratch of cols bits (or NULL
 * when cols > BITMAP_COLS_MAX); left zeroed. */
static void sample_row(ts_rng *r, int64_t cols, int64_t k, uint64_t *bits, int32_t *dst) {
  if (k == cols) {
    for (int64_t j = 0; j < cols; j++) dst[j] = (int32_t)j;
    return;
  }
  if (bits) {
    /* Floyd: for j = cols-k .. cols-1, take t uniform in [0, j], or j itself if t is taken. */
    int64_t nw = (cols + 63) / 64;
    bool scan = nw <= 8 * k;
    int64_t p = 0;
    for (int64_t j = cols - k; j < cols; j++) {
      int64_t t = (int64_t)below32(r, (uint64_t)j + 1);
      if ((bits[t >> 6] >> (t & 63)) & 1u) t = j;
      bits[t >> 6] |= (uint64_t)1 << (t & 63);
      if (!scan) dst[p++] = (int32_t)t;
    }
    if (scan) {
      extract_bits(bits, nw, k, dst);
    } else {
      qsort(dst, (size_t)k, sizeof *dst, cmp_i32);
      for (int64_t t = 0; t < k; t++) bits[dst[t] >> 6] = 0;
    }
    return;
  }
  /* Very wide rows: draw with replacement until k distinct (a uniform k-set), in batches of the
   * number still missing, sorting and dropping repeats after each batch. */
  int64_t have = 0;
  while (have < k) {
    for (int64_t t = have; t < k; t++) dst[t] = (int32_t)ts_rng_below(r, (uint64_t)cols);
    qsort(dst, (size_t)k, sizeof *dst, cmp_i32);
    have = 0;
    for (int64_t t = 0; t < k; t++)
      if (t == 0 || dst[t] != dst[have - 1]) dst[have++] = dst[t];
  }
}

ts_status ts__gen_random_exact(int64_t rows, int64_t cols, int64_t k, uint64_t seed, ts_csr *out) {
  TS_TRY(ts_csr_alloc(out, rows, cols, k, false));
  ts_rng rc;
  ts_rng_seed(&rc, ts__mix64(seed, 0));
  int64_t left = k;
  for (int64_t i = 0; i < rows; i++) {
    int64_t c = hypergeom(&rc, (rows - i) * cols, left, cols);
    left -= c;
    out->rowptr[i + 1] = out->rowptr[i] + c;
  }
  uint64_t row_seed = ts__mix64(seed, 1);
  int failed = 0;
#pragma omp parallel num_threads(ts__gen_threads())
  {
    uint64_t *bits = NULL;
    if (cols <= BITMAP_COLS_MAX && !(bits = ts_calloc((size_t)((cols + 63) / 64), sizeof *bits))) {
#pragma omp atomic write
      failed = 1;
    }
    /* Every thread must reach the worksharing loop, or none: agree on `failed` first. */
#pragma omp barrier
    int f;
#pragma omp atomic read
    f = failed;
    if (!f) {
#pragma omp for schedule(dynamic, 256)
      for (int64_t i = 0; i < rows; i++) {
        int64_t a = out->rowptr[i], c = out->rowptr[i + 1] - a;
        if (c == 0) continue;
        ts_rng r;
        ts_rng_seed(&r, ts__mix64(row_seed, (uint64_t)i));
        sample_row(&r, cols, c, bits, out->col + a);
      }
    }
    ts_free(bits);
  }
  if (failed) {
    ts_csr_free(out);
    return ts_error(TS_ERR_OOM, "random pattern: cannot allocate the per-thread column bitmaps");
  }
  return TS_OK;
}

/* round(density * cells), within [0, cells]. */
static int64_t exact_count(double density, int64_t cells) {
  double v = round(density * (double)cells);
  if (v <= 0) return 0;
  if (v >= (double)cells) return cells;
  return (int64_t)v;
}

static ts_status run_random(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                            ts_pattern_info *info) {
  int64_t n, cells;
  double density;
  TS_TRY(ts__gen_int_range(a, "n", 1, INT64_MAX, &n));
  TS_TRY(ts__gen_mul(a, n, n, "n*n", &cells));
  TS_TRY(ts__gen_index_limit(a, n, "n"));
  TS_TRY(ts__gen_num_range(a, "density", 0, 1, &density));
  TS_TRY(ts__gen_random_exact(n, n, exact_count(density, cells), (uint64_t)ts__gen_int(a, "seed"), out));
  info->n = info->base_n = n;
  return TS_OK;
}

static ts_status run_randconn(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                              ts_pattern_info *info) {
  int64_t cin, cout, cells;
  double density;
  TS_TRY(ts__gen_int_range(a, "cin", 1, INT64_MAX, &cin));
  TS_TRY(ts__gen_int_range(a, "cout", 1, INT64_MAX, &cout));
  TS_TRY(ts__gen_mul(a, cin, cout, "cin*cout", &cells));
  TS_TRY(ts__gen_index_limit(a, cin, "cin"));
  TS_TRY(ts__gen_index_limit(a, cout, "cout"));
  TS_TRY(ts__gen_num_range(a, "density", 0, 1, &density));
  return ts__gen_random_exact(cout, cin, exact_count(density, cells), (uint64_t)ts__gen_int(a, "seed"), out);
}

/* Next "on" index >= cur of a Bernoulli(p) sequence by geometric skipping; returns limit or more
 * when there is none before limit. lp = log1p(-p), 0 < p < 1. */
static int64_t next_on(ts_rng *r, double lp, int64_t cur, int64_t limit) {
  double u = 1.0 - ts_rng_uniform(r); /* (0, 1] */
  double skip = floor(log(u) / lp);
  if (!(skip < (double)(limit - cur))) return limit;
  return cur + (int64_t)skip;
}

/* On block columns of block row bi into list (NULL: count only); returns how many. */
static int64_t block_row(uint64_t seed, int64_t bi, int64_t nb, double p, int32_t *list) {
  if (p <= 0) return 0;
  if (p >= 1) {
    if (list)
      for (int64_t j = 0; j < nb; j++) list[j] = (int32_t)j;
    return nb;
  }
  ts_rng r;
  ts_rng_seed(&r, ts__mix64(seed, (uint64_t)bi));
  double lp = log1p(-p);
  int64_t m = 0;
  for (int64_t j = next_on(&r, lp, 0, nb); j < nb; j = next_on(&r, lp, j + 1, nb)) {
    if (list) list[m] = (int32_t)j;
    m++;
  }
  return m;
}

static ts_status run_blockrandom(const gen_args *a, const ts_csr *inner, ts_pattern_info *ii, ts_csr *out,
                                 ts_pattern_info *info) {
  int64_t n, b;
  double p;
  TS_TRY(ts__gen_int_range(a, "n", 1, INT64_MAX, &n));
  TS_TRY(ts__gen_index_limit(a, n, "n"));
  TS_TRY(ts__gen_int_range(a, "b", 1, INT64_MAX, &b));
  TS_TRY(ts__gen_num_range(a, "density", 0, 1, &p));
  uint64_t seed = (uint64_t)ts__gen_int(a, "seed");
  int64_t nb = (n + b - 1) / b;
  /* width[bi]: set columns of each row of block row bi (the last block may be partial). Both
   * passes regenerate block row bi from its own RNG stream, in parallel. */
  int64_t *width = ts__sp_alloc(nb, sizeof(int64_t), "blockrandom");
  int nt = ts__gen_threads();
  int32_t *lists = width ? ts__sp_alloc(nb * (int64_t)nt, sizeof(int32_t), "blockrandom") : NULL;
  if (!lists) {
    ts_free(width);
    return TS_ERR_OOM;
  }
  int64_t nnz = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : nnz) num_threads(nt)
  for (int64_t bi = 0; bi < nb; bi++) {
    int32_t *list = lists + nb * omp_get_thread_num();
    int64_t m = block_row(seed, bi, nb, p, list);
    width[bi] = m * b;
    if (m > 0 && list[m - 1] == nb - 1) width[bi] -= nb * b - n;
    nnz += width[bi] * ((bi + 1) * b <= n ? b : n - bi * b);
  }
  ts_status s = ts_csr_alloc(out, n, n, nnz, false);
  if (s == TS_OK) {
    for (int64_t i = 0; i < n; i++) out->rowptr[i + 1] = out->rowptr[i] + width[i / b];
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt)
    for (int64_t bi = 0; bi < nb; bi++) {
      int32_t *list = lists + nb * omp_get_thread_num();
      int64_t m = block_row(seed, bi, nb, p, list), r0 = bi * b, r1 = r0 + b < n ? r0 + b : n;
      for (int64_t r = r0; r < r1; r++) {
        int32_t *dst = out->col + out->rowptr[r];
        for (int64_t t = 0; t < m; t++) {
          int64_t c0 = (int64_t)list[t] * b, c1 = c0 + b < n ? c0 + b : n;
          for (int64_t c = c0; c < c1; c++) *dst++ = (int32_t)c;
        }
      }
    }
  }
  ts_free(lists);
  ts_free(width);
  info->n = info->base_n = n;
  return s;
}

#define REQ_INT(k) {k, GK_INT, true, 0}
#define REQ_NUM(k) {k, GK_NUM, true, 0}
#define SEED {"seed", GK_INT, false, 1}

const gen_kind ts__gen_random = {"random", false, run_random,
                                 "exactly round(density*n*n) distinct cells, uniformly random",
                                 {REQ_INT("n"), REQ_NUM("density"), SEED}};
const gen_kind ts__gen_blockrandom = {"blockrandom", false, run_blockrandom,
                                      "each b x b block on with probability density (Bernoulli)",
                                      {REQ_INT("n"), REQ_INT("b"), REQ_NUM("density"), SEED}};
const gen_kind ts__gen_randconn = {"randconn", false, run_randconn,
                                   "cout x cin, exactly round(density*cin*cout) random connections",
                                   {REQ_INT("cin"), REQ_INT("cout"), REQ_NUM("density"), SEED}};
