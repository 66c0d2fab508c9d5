/* Pattern generators: every kind against an independent brute-force definition on small cases
 * (NATTEN's window-start formula for window2d/dilated2d, Swin's roll + region-label mask for
 * swin shift=1), exact nnz and row counts, symmetry, determinism by seed and independence from
 * the thread count, keep/permute composition through base_index, every bad-spec message, and
 * the big cases (no timing asserts). */
#include <math.h>

#include "tessera/sparse.h"
#include "tst.h"

typedef bool (*cell_fn)(int64_t i, int64_t j, const int64_t *p);

/* The pattern equals the predicate on every cell, and is valid CSR. */
static bool matches(const ts_csr *m, cell_fn f, const int64_t *p) {
  if (ts_csr_validate(m) != TS_OK) return false;
  for (int64_t i = 0; i < m->rows; i++)
    for (int64_t j = 0; j < m->cols; j++)
      if (ts_csr_has(m, i, j) != f(i, j, p)) return false;
  return true;
}

static bool all_rows(const ts_csr *m, int64_t count) {
  for (int64_t i = 0; i < m->rows; i++)
    if (m->rowptr[i + 1] - m->rowptr[i] != count) return false;
  return true;
}

static ts_status gen(const char *spec, ts_csr *m, ts_pattern_info *info) { return ts_pattern_generate(spec, m, info); }

/* ---- window1d --------------------------------------------------------------------------- */

static bool ref_window1d(int64_t i, int64_t j, const int64_t *p) { /* p: n, w, g */
  return (i > j ? i - j : j - i) <= p[1] / 2 || i < p[2] || j < p[2];
}

static void test_window1d(void) {
  const int64_t cases[][3] = {{1, 0, 0}, {8, 2, 1}, {8, 3, 0}, {17, 6, 3}, {10, 100, 0}, {9, 4, 9}, {33, 0, 2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char spec[128];
    snprintf(spec, sizeof spec, "window1d:n=%lld,w=%lld,global=%lld", (long long)cases[c][0], (long long)cases[c][1],
             (long long)cases[c][2]);
    ts_csr m;
    ts_pattern_info info;
    CHECK_OK(gen(spec, &m, &info));
    CHECK(matches(&m, ref_window1d, cases[c]), "%s", spec);
    CHECK(info.symmetric && ts_csr_is_symmetric(&m) && info.n == cases[c][0] && info.grid_h == 0, "%s info", spec);
    CHECK(strcmp(info.kind, "window1d") == 0 && info.nnz == m.nnz && !info.base_index, "%s kind", spec);
    ts_csr_free(&m);
    ts_pattern_info_free(&info);
  }
  ts_csr m;
  CHECK_OK(gen("window1d:n=4096,w=64", &m, NULL)); /* default global=0: rows of 65 inside */
  CHECK(m.rowptr[2049] - m.rowptr[2048] == 65 && m.rowptr[1] == 33, "window1d row counts");
  ts_csr_free(&m);
}

/* ---- window2d / dilated2d (NATTEN's window-start formula as the reference) ---------------- */

static int64_t natten_start(int64_t index, int64_t length, int64_t k, int64_t d) {
  int64_t nb = k / 2;
  if (d <= 1) {
    int64_t s = index - nb > 0 ? index - nb : 0;
    if (index + nb >= length) s += length - index - nb - 1;
    return s;
  }
  int64_t ni = index - nb * d;
  if (ni < 0) return index % d;
  if (index + nb * d >= length) {
    int64_t imodd = index % d, a = (length / d) * d, b = length - a;
    if (imodd < b) return length - b + imodd - 2 * nb * d;
    return a + imodd - k * d;
  }
  return ni;
}

static bool in_natten(int64_t q, int64_t key, int64_t L, int64_t k, int64_t d) {
  int64_t s = natten_start(q, L, k, d);
  return key >= s && key <= s + (k - 1) * d && (key - s) % d == 0;
}

static bool ref_nat(int64_t i, int64_t j, const int64_t *p) { /* p: h, w, k, d */
  int64_t w = p[1];
  return in_natten(i / w, j / w, p[0], p[2], p[3]) && in_natten(i % w, j % w, w, p[2], p[3]);
}

static void test_window2d(void) {
  const int64_t cases[][4] = {{3, 3, 3, 1}, {5, 7, 3, 1}, {9, 6, 5, 1}, {13, 13, 13, 1}, {8, 8, 1, 1},
                              {12, 10, 3, 2}, {15, 14, 3, 3}, {10, 11, 5, 2}, {7, 9, 3, 2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t *p = cases[c];
    char spec[128];
    if (p[3] == 1) snprintf(spec, sizeof spec, "window2d:h=%lld,w=%lld,k=%lld", (long long)p[0], (long long)p[1], (long long)p[2]);
    else snprintf(spec, sizeof spec, "dilated2d:h=%lld,w=%lld,k=%lld,d=%lld", (long long)p[0], (long long)p[1],
                  (long long)p[2], (long long)p[3]);
    ts_csr m;
    ts_pattern_info info;
    CHECK_OK(gen(spec, &m, &info));
    CHECK(m.rows == p[0] * p[1] && all_rows(&m, p[2] * p[2]), "%s: every query has k*k keys", spec);
    CHECK(matches(&m, ref_nat, p), "%s == NATTEN windows", spec);
    CHECK(info.grid_h == p[0] && info.grid_w == p[1] && info.n == p[0] * p[1] && !info.symmetric, "%s info", spec);
    int64_t y, x;
    CHECK(ts_pattern_token_coords(&info, p[1] + 1, &y, &x) && y == 1 && x == 1, "coords");
    ts_csr_free(&m);
    ts_pattern_info_free(&info);
  }
  /* grids smaller than the window: the whole axis (min(k, L) per axis) */
  ts_csr m;
  CHECK_OK(gen("window2d:h=2,w=9,k=5", &m, NULL));
  CHECK(all_rows(&m, 2 * 5), "h < k");
  ts_csr_free(&m);
  CHECK_OK(gen("dilated2d:h=5,w=5,k=3,d=2", &m, NULL)); /* residues: 3 and 2 positions */
  CHECK(m.rowptr[1] - m.rowptr[0] == 9 && m.rowptr[7] - m.rowptr[6] == 4, "dilated residue classes shorter than k");
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t k = m.rowptr[i]; k < m.rowptr[i + 1]; k++)
      CHECK((i / 5 - m.col[k] / 5) % 2 == 0 && (i % 5 - m.col[k] % 5) % 2 == 0, "same residue");
  ts_csr_free(&m);
  CHECK_OK(gen("window2d:h=64,w=64,k=13", &m, NULL));
  CHECK(m.nnz == 4096 * 169, "64x64 k=13 nnz %lld", (long long)m.nnz);
  ts_csr_free(&m);
}

/* ---- swin (Swin's own procedure: pad, roll by -s, label regions, partition) -------------- */

static int64_t swin_label(int64_t c, int64_t Lp, int64_t win, int64_t s) {
  return c < Lp - win ? 0 : c < Lp - s ? 1 : 2;
}

static bool ref_swin(int64_t i, int64_t j, const int64_t *p) { /* p: h, w, win, shift */
  int64_t h = p[0], w = p[1], win = p[2], s = 0;
  int64_t m = h < w ? h : w;
  if (m <= win) win = m;
  else if (p[3]) s = win / 2;
  int64_t hp = (h + win - 1) / win * win, wp = (w + win - 1) / win * win;
  /* rolled (padded) coordinates of the two tokens */
  int64_t yi = ((i / w - s) % hp + hp) % hp, xi = ((i % w - s) % wp + wp) % wp;
  int64_t yj = ((j / w - s) % hp + hp) % hp, xj = ((j % w - s) % wp + wp) % wp;
  if (yi / win != yj / win || xi / win != xj / win) return false;
  if (!s) return true;
  return swin_label(yi, hp, win, s) == swin_label(yj, hp, win, s) && swin_label(xi, wp, win, s) == swin_label(xj, wp, win, s);
}

static void test_swin(void) {
  const int64_t cases[][4] = {{8, 8, 4, 0}, {8, 8, 4, 1},  {14, 14, 7, 1}, {12, 8, 4, 1}, {10, 13, 4, 1},
                              {9, 9, 3, 1}, {10, 7, 4, 0}, {7, 7, 7, 1},   {5, 9, 6, 1},  {16, 12, 5, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t *p = cases[c];
    char spec[128];
    snprintf(spec, sizeof spec, "swin:h=%lld,w=%lld,win=%lld,shift=%lld", (long long)p[0], (long long)p[1],
             (long long)p[2], (long long)p[3]);
    ts_csr m;
    ts_pattern_info info;
    CHECK_OK(gen(spec, &m, &info));
    CHECK(matches(&m, ref_swin, p), "%s == Swin roll + region mask", spec);
    CHECK(info.symmetric && ts_csr_is_symmetric(&m), "%s symmetric", spec);
    ts_csr_free(&m);
    ts_pattern_info_free(&info);
  }
  /* shift=0 is block diagonal in window order: relabel tokens window by window */
  ts_csr m, o;
  CHECK_OK(gen("swin:h=56,w=56,win=7", &m, NULL));
  int32_t perm[56 * 56];
  int64_t t = 0;
  for (int wy = 0; wy < 8; wy++)
    for (int wx = 0; wx < 8; wx++)
      for (int y = 0; y < 7; y++)
        for (int x = 0; x < 7; x++) perm[t++] = (int32_t)((wy * 7 + y) * 56 + wx * 7 + x);
  CHECK_OK(ts_csr_permute(&m, perm, perm, &o));
  bool ok = m.nnz == 56 * 56 * 49;
  for (int64_t i = 0; i < o.rows; i++) {
    ok &= o.rowptr[i + 1] - o.rowptr[i] == 49;
    for (int64_t k = o.rowptr[i]; k < o.rowptr[i + 1]; k++) ok &= o.col[k] == (i / 49) * 49 + (k - o.rowptr[i]);
  }
  CHECK(ok, "swin shift=0 is block diagonal (49-token blocks) in window order");
  ts_csr_free(&o);
  ts_csr_free(&m);
  /* shifted windows at 56x56 win 7: groups per axis 3, 7x7 ..., 4 -> row counts in {3,4,7}^2 */
  CHECK_OK(gen("swin:h=56,w=56,win=7,shift=1", &m, NULL));
  CHECK(m.rowptr[1] - m.rowptr[0] == 9 && m.rowptr[56 * 10 + 11] - m.rowptr[56 * 10 + 10] == 49, "shifted counts");
  ts_csr_free(&m);
}

static bool ref_vitdet(int64_t i, int64_t j, const int64_t *p) { /* p: h, w, win, g */
  int64_t w = p[1], win = p[2];
  if (i < p[3] || j < p[3]) return true;
  return (i / w) / win == (j / w) / win && (i % w) / win == (j % w) / win;
}

static void test_vitdet(void) {
  const int64_t cases[][4] = {{8, 8, 4, 0}, {10, 9, 4, 3}, {14, 14, 14, 1}, {5, 5, 7, 0}, {6, 11, 3, 66}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t *p = cases[c];
    char spec[128];
    snprintf(spec, sizeof spec, "vitdet:h=%lld,w=%lld,win=%lld,global=%lld", (long long)p[0], (long long)p[1],
             (long long)p[2], (long long)p[3]);
    ts_csr m;
    ts_pattern_info info;
    CHECK_OK(gen(spec, &m, &info));
    CHECK(matches(&m, ref_vitdet, p), "%s", spec);
    CHECK(info.symmetric && ts_csr_is_symmetric(&m) && info.grid_h == p[0], "%s symmetric", spec);
    ts_csr_free(&m);
    ts_pattern_info_free(&info);
  }
}

/* ---- random patterns --------------------------------------------------------------------- */

static void test_random(void) {
  const struct { int64_t n; double d; } cases[] = {{1, 1.0}, {1, 0.0}, {7, 0.3}, {64, 0.05}, {100, 1.0}, {100, 0.0}, {333, 0.5}, {257, 0.999}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char spec[128];
    snprintf(spec, sizeof spec, "random:n=%lld,density=%g,seed=5", (long long)cases[c].n, cases[c].d);
    ts_csr m, m2;
    CHECK_OK(gen(spec, &m, NULL));
    CHECK_OK(ts_csr_validate(&m));
    int64_t want = (int64_t)round(cases[c].d * (double)(cases[c].n * cases[c].n));
    CHECK(m.nnz == want, "%s: nnz %lld, want %lld", spec, (long long)m.nnz, (long long)want);
    CHECK_OK(gen(spec, &m2, NULL));
    CHECK(ts_csr_equal(&m, &m2), "%s deterministic", spec);
    ts_csr_free(&m2);
    ts_csr_free(&m);
  }
  ts_csr a, b;
  CHECK_OK(gen("random:n=200,density=0.1,seed=1", &a, NULL));
  CHECK_OK(gen("random:n=200,density=0.1", &b, NULL));
  CHECK(ts_csr_equal(&a, &b), "seed defaults to 1");
  ts_csr_free(&b);
  CHECK_OK(gen("random:n=200,density=0.1,seed=2", &b, NULL));
  CHECK(!ts_csr_equal(&a, &b), "another seed, another pattern");
  ts_csr_free(&b);
  ts_csr_free(&a);
  /* Uniformity over K-subsets: each of the 64 cells of an 8x8 pattern with K = 16 is set with
   * probability 1/4; over 4000 seeds a cell count is Binomial(4000, 1/4): sd 27.4, bound 6 sd. */
  int counts[64] = {0};
  int rows0[9] = {0};
  for (int s = 0; s < 4000; s++) {
    char spec[64];
    snprintf(spec, sizeof spec, "random:n=8,density=0.25,seed=%d", s + 100);
    CHECK_OK(gen(spec, &a, NULL));
    for (int64_t i = 0; i < 8; i++)
      for (int64_t k = a.rowptr[i]; k < a.rowptr[i + 1]; k++) counts[i * 8 + a.col[k]]++;
    rows0[a.rowptr[1]]++;
    ts_csr_free(&a);
  }
  int worst = 0;
  for (int c = 0; c < 64; c++) worst = abs(counts[c] - 1000) > worst ? abs(counts[c] - 1000) : worst;
  CHECK(worst < 165, "cell frequencies within 6 sd of 1000 (worst deviation %d)", worst);
  /* row 0 count ~ Hypergeometric(64, 16, 8): P(2) = 0.3047 -> 1219 of 4000, sd 29 */
  CHECK(abs(rows0[2] - 1219) < 175, "row-count distribution: %d of 4000 rows with 2 (expect ~1219)", rows0[2]);
  /* the thread count does not change the pattern */
  setenv("TESSERA_THREADS", "1", 1);
  CHECK_OK(gen("random:n=3000,density=0.02,seed=9", &a, NULL));
  setenv("TESSERA_THREADS", "3", 1);
  CHECK_OK(gen("random:n=3000,density=0.02,seed=9", &b, NULL));
  unsetenv("TESSERA_THREADS");
  CHECK(ts_csr_equal(&a, &b) && a.nnz == 180000, "independent of threads");
  ts_csr_free(&a);
  ts_csr_free(&b);
  /* sparse rows take the sort path, very wide rows the draw-and-dedupe path */
  CHECK_OK(gen("random:n=100000,density=0.00001,seed=4", &a, NULL));
  CHECK(a.nnz == 100000 && ts_csr_validate(&a) == TS_OK, "sparse rows");
  ts_csr_free(&a);
  CHECK_OK(gen("randconn:cin=40000000,cout=3,density=0.0000005,seed=4", &a, NULL));
  CHECK(a.rows == 3 && a.cols == 40000000 && a.nnz == 60 && ts_csr_validate(&a) == TS_OK, "wide rows: nnz %lld",
        (long long)a.nnz);
  ts_csr_free(&a);
}

static void test_blockrandom(void) {
  const struct { int64_t n, b; double d; } cases[] = {{64, 8, 0.3}, {100, 8, 0.2}, {37, 5, 0.5}, {10, 32, 1.0}, {50, 7, 0.0}, {30, 1, 0.1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char spec[128];
    snprintf(spec, sizeof spec, "blockrandom:n=%lld,b=%lld,density=%g,seed=3", (long long)cases[c].n, (long long)cases[c].b,
             cases[c].d);
    ts_csr m, m2;
    CHECK_OK(gen(spec, &m, NULL));
    CHECK_OK(ts_csr_validate(&m));
    int64_t n = cases[c].n, b = cases[c].b, nnz = 0, on = 0, nb = (n + b - 1) / b;
    bool ok = true;
    for (int64_t bi = 0; bi < nb; bi++)
      for (int64_t bj = 0; bj < nb; bj++) {
        bool first = ts_csr_has(&m, bi * b, bj * b);
        int64_t cells = 0;
        for (int64_t i = bi * b; i < n && i < (bi + 1) * b; i++)
          for (int64_t j = bj * b; j < n && j < (bj + 1) * b; j++) ok &= ts_csr_has(&m, i, j) == first, cells++;
        nnz += first ? cells : 0;
        on += first;
      }
    CHECK(ok && nnz == m.nnz, "%s: whole blocks only", spec);
    if (cases[c].d == 1.0) CHECK(on == nb * nb, "all blocks");
    if (cases[c].d == 0.0) CHECK(on == 0, "no blocks");
    CHECK_OK(gen(spec, &m2, NULL));
    CHECK(ts_csr_equal(&m, &m2), "%s deterministic", spec);
    ts_csr_free(&m2);
    ts_csr_free(&m);
  }
  /* Bernoulli rate: 256 x 256 blocks at 0.1 -> 6554 on, sd 77 */
  ts_csr m;
  CHECK_OK(gen("blockrandom:n=1024,b=4,density=0.1,seed=8", &m, NULL));
  CHECK(fabs((double)m.nnz / 16.0 - 6553.6) < 6 * 77, "block rate %lld blocks", (long long)(m.nnz / 16));
  ts_csr_free(&m);
}

/* ---- connectivity ------------------------------------------------------------------------ */

static bool rows_equal(const ts_csr *m, int64_t a, int64_t b) {
  int64_t la = m->rowptr[a + 1] - m->rowptr[a];
  return la == m->rowptr[b + 1] - m->rowptr[b] &&
         memcmp(m->col + m->rowptr[a], m->col + m->rowptr[b], (size_t)la * sizeof(int32_t)) == 0;
}

static void test_connectivity(void) {
  ts_csr m, m2;
  ts_pattern_info info;
  CHECK_OK(gen("condense:cin=256,cout=128,groups=4,seed=1", &m, &info));
  CHECK(m.rows == 128 && m.cols == 256 && all_rows(&m, 64) && ts_csr_validate(&m) == TS_OK, "condense shape/rows");
  CHECK(info.n == 0 && info.grid_h == 0 && !ts_pattern_token_coords(&info, 0, NULL, NULL), "connectivity info");
  bool same = true, differ = false;
  for (int64_t o = 0; o < 128; o++) same &= rows_equal(&m, o, (o / 32) * 32);
  for (int g = 1; g < 4; g++) differ |= !rows_equal(&m, 0, g * 32);
  CHECK(same && differ, "condense: a group shares one input set, groups differ");
  CHECK_OK(gen("condense:cin=256,cout=128,groups=4", &m2, NULL));
  CHECK(ts_csr_equal(&m, &m2), "condense seed default");
  ts_csr_free(&m2);
  ts_csr_free(&m);
  ts_pattern_info_free(&info);

  for (double corr = 0; corr <= 1.0; corr += 0.5) {
    char spec[128];
    snprintf(spec, sizeof spec, "unstructconv:cin=256,cout=96,keep=0.25,groups=3,corr=%g,seed=2", corr);
    CHECK_OK(gen(spec, &m, NULL));
    CHECK(m.rows == 96 && m.cols == 256 && all_rows(&m, 64) && ts_csr_validate(&m) == TS_OK, "%s rows", spec);
    /* overlap between channels of one latent group grows with corr */
    int64_t shared = 0;
    for (int64_t o = 1; o < 32; o++)
      for (int64_t k = m.rowptr[o]; k < m.rowptr[o + 1]; k++) shared += ts_csr_has(&m, 0, m.col[k]);
    double frac = (double)shared / (31.0 * 64.0);
    if (corr == 1.0) {
      bool eq = true;
      for (int64_t o = 0; o < 96; o++) eq &= rows_equal(&m, o, (o / 32) * 32);
      CHECK(eq, "corr=1: a latent group's channels all take its preferred set");
    } else if (corr == 0.0) {
      CHECK(frac > 0.15 && frac < 0.35, "corr=0: overlap %.3f near keep=0.25", frac);
    } else {
      CHECK(frac > 0.4 && frac < 0.75, "corr=0.5: overlap %.3f", frac);
    }
    CHECK_OK(gen(spec, &m2, NULL));
    CHECK(ts_csr_equal(&m, &m2), "deterministic");
    ts_csr_free(&m2);
    ts_csr_free(&m);
  }
  CHECK_OK(gen("unstructconv:cin=10,cout=7,keep=1,groups=7,corr=0.5", &m, NULL));
  CHECK(all_rows(&m, 10), "keep=1 is dense");
  ts_csr_free(&m);
  CHECK_OK(gen("randconn:cin=100,cout=30,density=0.33,seed=4", &m, NULL));
  CHECK(m.rows == 30 && m.cols == 100 && m.nnz == 990 && ts_csr_validate(&m) == TS_OK, "randconn");
  ts_csr_free(&m);
}

/* groupconv, blockconn, condense keep=, permconn (the unstructured group convolution suite). */
static void test_connectivity_blocks(void) {
  ts_csr m, m2;
  ts_pattern_info info;
  CHECK_OK(gen("groupconv:cin=12,cout=8,groups=4", &m, NULL));
  bool diag = m.rows == 8 && m.cols == 12 && all_rows(&m, 3) && ts_csr_validate(&m) == TS_OK;
  for (int64_t o = 0; o < 8; o++)
    for (int64_t k = m.rowptr[o]; k < m.rowptr[o + 1]; k++) diag &= m.col[k] / 3 == o / 2;
  CHECK(diag, "groupconv is block diagonal");
  ts_csr_free(&m);
  /* 10 outputs in blocks of 4 (4, 4, 2); 23 inputs in blocks of 5 (last block 3 wide): 2 of 5 */
  CHECK_OK(gen("blockconn:cin=23,cout=10,bo=4,bi=5,density=0.4,seed=3", &m, NULL));
  CHECK(m.rows == 10 && m.cols == 23 && ts_csr_validate(&m) == TS_OK, "blockconn shape");
  bool ok = true;
  for (int64_t o = 0; o < 10; o++) {
    ok &= rows_equal(&m, o, (o / 4) * 4);
    int64_t len = m.rowptr[o + 1] - m.rowptr[o];
    ok &= len == 10 || len == 8; /* two 5-wide blocks, or one of them the 3-wide last block */
    for (int64_t k = m.rowptr[o]; k < m.rowptr[o + 1]; k++) /* whole input blocks only */
      ok &= ts_csr_has(&m, o, (m.col[k] / 5) * 5) && (m.col[k] / 5 == 4 || ts_csr_has(&m, o, (m.col[k] / 5) * 5 + 4));
  }
  CHECK(ok, "blockconn: whole blocks, one input set per output block");
  CHECK_OK(gen("blockconn:cin=23,cout=10,bo=4,bi=5,density=0.01", &m2, NULL));
  CHECK(m2.rowptr[1] >= 3 && m2.rowptr[1] <= 5, "blockconn: at least one block per row");
  ts_csr_free(&m2);
  /* permconn: same row and column multisets of degrees, a relabelling of rows and columns */
  CHECK_OK(gen("permconn:blockconn:cin=23,cout=10,bo=4,bi=5,density=0.4,seed=3,seed=9", &m2, &info));
  CHECK(m2.rows == 10 && m2.cols == 23 && m2.nnz == m.nnz && ts_csr_validate(&m2) == TS_OK &&
            strcmp(info.kind, "permconn:blockconn") == 0,
        "permconn shape (%s)", info.kind);
  int64_t deg_a[23] = {0}, deg_b[23] = {0}, ra = 0, rb = 0;
  for (int64_t k = 0; k < m.nnz; k++) deg_a[m.col[k]]++, deg_b[m2.col[k]]++;
  for (int64_t c = 0; c < 23; c++) ra += deg_a[c] * deg_a[c], rb += deg_b[c] * deg_b[c];
  CHECK(ra == rb && !ts_csr_equal(&m, &m2), "permconn relabels");
  ts_pattern_info_free(&info);
  ts_csr_free(&m2);
  ts_csr_free(&m);
  CHECK_OK(gen("condense:cin=64,cout=16,groups=4,keep=0.125,seed=2", &m, NULL));
  CHECK(all_rows(&m, 8) && rows_equal(&m, 0, 3) && ts_csr_validate(&m) == TS_OK, "condense keep=1/8");
  ts_csr_free(&m);
}

/* ---- wrappers ---------------------------------------------------------------------------- */

/* out(i, j) == base(bi[i], bi[j]) for every cell: the wrapper chain is a relabelled induced
 * sub-pattern of the base pattern. */
static bool is_relabelled(const ts_csr *out, const ts_pattern_info *info, const ts_csr *base) {
  for (int64_t i = 0; i < out->rows; i++)
    for (int64_t j = 0; j < out->cols; j++) {
      int64_t bi = info->base_index ? info->base_index[i] : i, bj = info->base_index ? info->base_index[j] : j;
      if (ts_csr_has(out, i, j) != ts_csr_has(base, bi, bj)) return false;
    }
  return true;
}

static void test_wrappers(void) {
  ts_csr base, m, m2;
  ts_pattern_info info;
  CHECK_OK(gen("window2d:h=12,w=10,k=5", &base, NULL));
  /* permute: a symmetric permutation of the inner pattern, base_index = the permutation */
  CHECK_OK(gen("permute:window2d:h=12,w=10,k=5,seed=7", &m, &info));
  CHECK(info.base_index && ts_perm_validate(info.base_index, 120) == TS_OK, "permute keeps a permutation");
  CHECK_OK(ts_csr_permute(&base, info.base_index, info.base_index, &m2));
  CHECK(ts_csr_equal(&m, &m2) && is_relabelled(&m, &info, &base), "permute == P A P^T");
  CHECK(strcmp(info.kind, "permute:window2d") == 0 && info.grid_h == 12 && info.grid_w == 10 && info.n == 120, "info");
  int64_t y, x, b = info.base_index[5];
  CHECK(ts_pattern_token_coords(&info, 5, &y, &x) && y == b / 10 && x == b % 10, "coords through the permutation");
  ts_csr_free(&m2);
  int identity = 0;
  for (int i = 0; i < 120; i++) identity += info.base_index[i] == i;
  CHECK(identity < 10, "locality destroyed (%d fixed points)", identity);
  ts_pattern_info_free(&info);
  CHECK_OK(gen("permute:window2d:h=12,w=10,k=5,seed=7", &m2, NULL));
  CHECK(ts_csr_equal(&m, &m2), "permute deterministic");
  ts_csr_free(&m2);
  CHECK_OK(gen("permute:window2d:h=12,w=10,k=5,seed=8", &m2, NULL));
  CHECK(!ts_csr_equal(&m, &m2), "permute seed matters");
  ts_csr_free(&m2);
  ts_csr_free(&m);

  /* keep: round(ratio*n) sorted tokens, induced pattern */
  CHECK_OK(gen("keep:window2d:h=12,w=10,k=5,ratio=0.49,seed=3", &m, &info));
  CHECK(m.rows == 59 && m.cols == 59 && info.n == 59 && info.base_n == 120, "keep count round(0.49*120) = 59");
  bool sorted = true;
  for (int i = 1; i < 59; i++) sorted &= info.base_index[i] > info.base_index[i - 1];
  CHECK(sorted && is_relabelled(&m, &info, &base), "keep: sorted kept tokens, induced sub-pattern");
  CHECK(info.grid_h == 12 && strcmp(info.kind, "keep:window2d") == 0, "keep keeps the grid");
  ts_pattern_info_free(&info);
  ts_csr_free(&m);

  CHECK_OK(gen("keep:window1d:n=5,w=2,ratio=0.5", &m, &info));
  CHECK(m.rows == 3 && info.n == 3, "round(2.5) = 3 tokens kept (halves away from zero)");
  ts_pattern_info_free(&info);
  ts_csr_free(&m);

  /* nested chains compose base_index */
  const char *chains[] = {"permute:keep:window2d:h=12,w=10,k=5,ratio=0.6,seed=2,seed=9",
                          "keep:permute:window2d:h=12,w=10,k=5,seed=4,ratio=0.3",
                          "permute:permute:keep:window2d:h=12,w=10,k=5,ratio=0.9,seed=1,seed=2,seed=3"};
  for (int c = 0; c < 3; c++) {
    CHECK_OK(gen(chains[c], &m, &info));
    CHECK(is_relabelled(&m, &info, &base) && ts_csr_validate(&m) == TS_OK, "%s", chains[c]);
    ts_pattern_info_free(&info);
    ts_csr_free(&m);
  }
  ts_csr_free(&base);
  /* keys bubble up: random keeps seed=3, permute gets seed=7 */
  CHECK_OK(gen("random:n=64,density=0.1,seed=3", &base, NULL));
  CHECK_OK(gen("permute:random:n=64,density=0.1,seed=3,seed=7", &m, &info));
  CHECK(is_relabelled(&m, &info, &base), "seed=3 went to random");
  CHECK_OK(gen("permute:random:n=64,density=0.1,seed=3", &m2, NULL));
  CHECK(!ts_csr_equal(&m, &m2), "second seed went to permute");
  ts_csr_free(&m2);
  ts_pattern_info_free(&info);
  ts_csr_free(&m);
  ts_csr_free(&base);
  /* symmetric inner stays symmetric */
  CHECK_OK(gen("permute:swin:h=14,w=14,win=7,shift=1,seed=3", &m, &info));
  CHECK(info.symmetric && ts_csr_is_symmetric(&m), "permuted swin symmetric");
  ts_pattern_info_free(&info);
  ts_csr_free(&m);
  CHECK_OK(gen("keep:vitdet:h=8,w=8,win=4,global=2,ratio=0.5", &m, &info));
  CHECK(info.symmetric && ts_csr_is_symmetric(&m) && m.rows == 32, "kept vitdet symmetric");
  ts_pattern_info_free(&info);
  ts_csr_free(&m);
}

/* ---- bad specs --------------------------------------------------------------------------- */

static void test_bad_specs(void) {
  static const struct { const char *spec, *msg; } bad[] = {
      {"window2d:h=8,w=8,k=3,q=1", "window2d: unknown key 'q'"},
      {"window2d:h=8,w=8,k=4", "window2d: k must be odd, got 4"},
      {"window2d:w=8,k=3", "window2d: missing key h"},
      {"random:n=5000000000,density=0.1", "random: n*n overflows"},
      {"random:n=3000000000,density=0", "random: n = 3000000000 exceeds the int32 index limit"},
      {"window2d:h=100000,w=100000,k=3", "window2d: h*w = 10000000000 exceeds the int32 index limit"},
      {"window2d:h=10000000000,w=10000000000,k=3", "window2d: h*w overflows"},
      {"foo:n=3", "unknown pattern kind 'foo'"},
      {"", "pattern spec has no kind"},
      {":n=3", "pattern spec has no kind"},
      {"window2d:h=8,w=8,k=abc", "window2d: bad value 'abc' for k (expected an integer)"},
      {"window2d:h=8,w=8,k=3.5", "bad value '3.5' for k"},
      {"window2d:h=8,w=8,k=", "bad value '' for k"},
      {"random:n=8,density=1.5", "random: density must be in [0, 1], got 1.5"},
      {"random:n=8,density=nan", "bad value 'nan' for density"},
      {"random:n=8,density=-0.1", "density must be in [0, 1]"},
      {"window2d:h=8,h=9,w=8,k=3", "window2d: duplicate key 'h'"},
      {"window2d:h=8,w=8,k", "window2d: expected key=value, got 'k'"},
      {"window2d:h=8,,w=8,k=3", "window2d: empty key=value pair"},
      {"window2d:h=8,w=8,k=3,", "window2d: empty key=value pair"},
      {"window2d:h=8,w=8,=3", "expected key=value, got '=3'"},
      {"window2d:h=8,w=8,k=3,seed=1", "window2d: unknown key 'seed' (window2d takes h, w, k)"},
      {"window2d:h=-3,w=8,k=3", "window2d: h must be >= 1, got -3"},
      {"window2d:h=0,w=8,k=3", "h must be >= 1, got 0"},
      {"dilated2d:h=8,w=8,k=3", "dilated2d: missing key d"},
      {"dilated2d:h=8,w=8,k=3,d=0", "dilated2d: d must be in [1, 2147483647], got 0"},
      {"permute:", "permute: missing inner spec"},
      {"permute", "permute: missing inner spec"},
      {"permute:window2d:h=4,seed=7,w=4,k=3", "permute: unknown key 'w' (a key of window2d"},
      {"permute:window2d:h=4,w=4,k=3,seed=1,seed=2", "permute: duplicate key 'seed'"},
      {"permute:window2d:h=4,w=4,k=3,q=2", "permute: unknown key 'q'"},
      {"permute:bogus:x=1", "unknown pattern kind 'bogus'"},
      {"permute:window2d:h=4,w=4", "window2d: missing key k"},
      {"keep:window2d:h=4,w=4,k=3", "keep: missing key ratio"},
      {"keep:window2d:h=4,w=4,k=3,ratio=0.01", "keep: ratio=0.01 keeps round(0.01*16) = 0 tokens"},
      {"keep:window2d:h=4,w=4,k=3,ratio=1.5", "keep: ratio must be in [0, 1], got 1.5"},
      {"permute:condense:cin=8,cout=4,groups=2", "permute: inner pattern condense is 4 x 8, not a square token pattern"},
      {"keep:randconn:cin=8,cout=8,density=0.5,ratio=0.5", "not a square token pattern"},
      {"condense:cin=10,cout=8,groups=4", "condense: cin=10 and cout=8 must both be divisible by groups=4"},
      {"condense:cin=8,cout=8,groups=9", "condense: groups must be in [1, 8], got 9"},
      {"unstructconv:cin=64,cout=8,keep=0.001,groups=2,corr=0.5", "keeps round(0.001*64) = 0 inputs"},
      {"unstructconv:cin=64,cout=8,keep=0.5,groups=2,corr=2", "unstructconv: corr must be in [0, 1], got 2"},
      {"unstructconv:cin=64,cout=8,keep=0.5,groups=2", "unstructconv: missing key corr"},
      {"randconn:cin=3000000000,cout=2,density=0.1", "randconn: cin = 3000000000 exceeds the int32 index limit"},
      {"groupconv:cin=10,cout=8,groups=4", "groupconv: cin=10 and cout=8 must both be divisible by groups=4"},
      {"blockconn:cin=10,cout=8,bo=9,bi=2,density=0.5", "blockconn: bo must be in [1, 8], got 9"},
      {"blockconn:cin=10,cout=8,bo=2,bi=2,density=1.5", "blockconn: density must be in [0, 1], got 1.5"},
      {"permconn:window1d:n=8,w=2", "permconn: inner pattern window1d is a token pattern"},
      {"condense:cin=64,cout=8,groups=2,keep=0.001", "condense: keep=0.001 keeps round(0.001*64) = 0 inputs"},
      {"window1d:n=8,w=2,global=9", "window1d: global must be in [0, 8], got 9"},
      {"window1d:n=8,w=-1", "window1d: w must be >= 0, got -1"},
      {"swin:h=8,w=8,win=4,shift=2", "swin: shift must be in [0, 1], got 2"},
      {"swin:h=8,w=8,win=0", "swin: win must be in [1, 2147483647], got 0"},
      {"vitdet:h=4,w=4,win=2,global=17", "vitdet: global must be in [0, 16], got 17"},
      {"blockrandom:n=8,b=0,density=0.5", "blockrandom: b must be >= 1, got 0"},
      {"window2d:h=99999999999999999999,w=8,k=3", "bad value '99999999999999999999' for h"},
      {"permute:permute:permute:permute:permute:permute:permute:permute:window1d:n=4,w=1",
       "pattern spec nests more than 8 generators"},
      {"WINDOW2D:h=8,w=8,k=3", "unknown pattern kind 'WINDOW2D'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_csr m;
    ts_pattern_info info;
    memset(&m, 0x5A, sizeof m);
    memset(&info, 0x5A, sizeof info);
    ts_error_clear();
    ts_status s = ts_pattern_generate(bad[i].spec, &m, &info);
    CHECK(s == TS_ERR_INVALID_ARG || s == TS_ERR_OVERFLOW, "'%s' -> %s", bad[i].spec, ts_strerror(s));
    CHECK(strstr(ts_last_error(), bad[i].msg) != NULL, "'%s': got \"%s\", expected \"%s\"", bad[i].spec, ts_last_error(),
          bad[i].msg);
    CHECK(m.rowptr == NULL && m.col == NULL && info.base_index == NULL, "'%s': outputs zeroed", bad[i].spec);
  }
  CHECK_STATUS(ts_pattern_generate(NULL, NULL, NULL), TS_ERR_INVALID_ARG);
  /* the deepest allowed nesting works */
  ts_csr m;
  CHECK_OK(gen("permute:permute:permute:permute:permute:permute:permute:window1d:n=4,w=1", &m, NULL));
  ts_csr_free(&m);
  const char *help = ts_pattern_spec_help();
  const char *kinds[] = {"window1d:", "window2d:", "dilated2d:", "swin:", "vitdet:", "random:", "blockrandom:",
                         "keep:SPEC", "permute:SPEC", "condense:", "unstructconv:", "randconn:", "[,seed=1]",
                         "groupconv:", "blockconn:", "permconn:SPEC"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) CHECK(strstr(help, kinds[i]) != NULL, "help lists %s", kinds[i]);
}

/* The big cases: 43M-nonzero random mask and a 65,536-token window2d (times printed only).
 * Sanitizer builds (unoptimized, instrumented: ~10x slower) use density 0.0025 (10.7M nonzeros)
 * at the same n to stay well inside the test time budget. */
#ifdef TS_SANITIZE
#define BIG_SPEC "random:n=65536,density=0.0025,seed=1"
#define BIG_NNZ 10737418
#else
#define BIG_SPEC "random:n=65536,density=0.01,seed=1"
#define BIG_NNZ 42949673
#endif
static void test_big(void) {
  ts_csr m;
  double t0 = ts_now();
  CHECK_OK(gen(BIG_SPEC, &m, NULL));
  double t1 = ts_now();
  CHECK(m.nnz == BIG_NNZ && m.rowptr[65536] == m.nnz, "%s nnz %lld", BIG_SPEC, (long long)m.nnz);
  bool ok = true;
  for (int64_t i = 0; i < m.rows; i += 997)
    for (int64_t k = m.rowptr[i] + 1; k < m.rowptr[i + 1]; k++) ok &= m.col[k] > m.col[k - 1];
  CHECK(ok && m.col[m.nnz - 1] < 65536, "rows sorted");
  ts_csr_free(&m);
  double t2 = ts_now();
  CHECK_OK(gen("window2d:h=256,w=256,k=13", &m, NULL));
  double t3 = ts_now();
  CHECK(m.nnz == 65536ll * 169 && all_rows(&m, 169), "window2d 256x256 k=13");
  ts_csr_free(&m);
  printf("big cases: %s (%d nnz) %.2f s, window2d 256x256 k=13 %.2f s\n", BIG_SPEC, BIG_NNZ, t1 - t0, t3 - t2);
}

int main(void) {
  test_window1d();
  test_window2d();
  test_swin();
  test_vitdet();
  test_random();
  test_blockrandom();
  test_connectivity();
  test_connectivity_blocks();
  test_wrappers();
  test_bad_specs();
  test_big();
  return tst_finish();
}
