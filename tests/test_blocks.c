/* Dense-block extraction: every nonzero covered exactly once (brute force over a dense grid),
 * disjoint rectangles, densities >= rho, residue = exactly the uncovered nonzeros, the dp
 * optimal against enumeration of every row cut on tiny instances, summaries, bad inputs. */
#include "tessera/reorder.h"
#include "tst.h"

/* rows x cols pattern with each cell on with probability p (plus the cells of `dense` boxes). */
static ts_csr random_pattern(int64_t rows, int64_t cols, double p, uint64_t seed) {
  uint8_t *d = calloc((size_t)(rows * cols) + 1, 1);
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int64_t k = 0; k < rows * cols; k++) d[k] = ts_rng_uniform(&r) < p;
  ts_csr m = {0};
  ts_status s = ts_csr_from_dense_u8(d, rows, cols, &m);
  if (s != TS_OK) fprintf(stderr, "random_pattern: %s\n", ts_last_error());
  free(d);
  return m;
}

/* Dense boxes (r0, c0, h, w) on a noise background of density p. */
static ts_csr boxes_pattern(int64_t rows, int64_t cols, const int *box, int nbox, double p, uint64_t seed) {
  uint8_t *d = calloc((size_t)(rows * cols) + 1, 1);
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int64_t k = 0; k < rows * cols; k++) d[k] = ts_rng_uniform(&r) < p;
  for (int b = 0; b < nbox; b++)
    for (int i = box[4 * b]; i < box[4 * b] + box[4 * b + 2]; i++)
      for (int j = box[4 * b + 1]; j < box[4 * b + 1] + box[4 * b + 3]; j++) d[i * cols + j] = 1;
  ts_csr m = {0};
  ts_csr_from_dense_u8(d, rows, cols, &m);
  free(d);
  return m;
}

/* Brute-force check of a cover: returns the number of failed checks. */
static int check_cover(const ts_csr *m, const ts_blocks_opts *o, const ts_blocks *b, const char *what) {
  int fails = tst_failed;
  int64_t R = m->rows, C = m->cols;
  int32_t *owner = malloc((size_t)(R * C + 1) * sizeof *owner);
  uint8_t *res = calloc((size_t)(R * C) + 1, 1);
  for (int64_t k = 0; k < R * C; k++) owner[k] = -1;
  CHECK(b->rows == R && b->cols == C && b->nnz == m->nnz, "%s: shape fields", what);
  bool overlap = false, inside = true, sorted = true;
  int64_t cells = 0, bnnz = 0;
  for (int64_t k = 0; k < b->nblocks; k++) {
    const ts_block *x = &b->blocks[k];
    if (k && (x->row0 < b->blocks[k - 1].row0 || (x->row0 == b->blocks[k - 1].row0 && x->col0 <= b->blocks[k - 1].col0)))
      sorted = false;
    if (x->row0 < 0 || x->col0 < 0 || x->rows < 1 || x->cols < 1 || x->row0 + x->rows > R || x->col0 + x->cols > C) {
      inside = false;
      continue;
    }
    int64_t nz = 0;
    for (int64_t i = x->row0; i < x->row0 + x->rows; i++)
      for (int64_t j = x->col0; j < x->col0 + x->cols; j++) {
        if (owner[i * C + j] >= 0) overlap = true;
        owner[i * C + j] = (int32_t)k;
        nz += ts_csr_has(m, i, j);
      }
    int64_t area = (int64_t)x->rows * x->cols;
    CHECK(nz == x->nnz, "%s: block %lld says %lld nonzeros, holds %lld", what, (long long)k, (long long)x->nnz, (long long)nz);
    CHECK((double)nz >= o->rho * (double)area - 1e-9, "%s: block %lld density %g < rho %g", what, (long long)k,
          (double)nz / (double)area, o->rho);
    if (o->method == TS_EXTRACT_GREEDY)
      CHECK(nz >= o->min_nnz && x->rows <= o->max_rows && x->cols <= o->max_cols, "%s: block %lld size/min_nnz", what,
            (long long)k);
    else
      CHECK(x->rows <= o->max_group && o->rho * ((double)area + o->block_cost) <= (double)nz + 1e-9,
            "%s: dp block %lld breaks the rule", what, (long long)k);
    cells += area, bnnz += nz;
  }
  CHECK(inside, "%s: a block lies outside the pattern", what);
  CHECK(!overlap, "%s: blocks overlap", what);
  CHECK(sorted, "%s: blocks not sorted by (row0, col0)", what);
  CHECK(ts_csr_validate(&b->residue) == TS_OK && b->residue.rows == R && b->residue.cols == C, "%s: residue shape: %s",
        what, ts_last_error());
  for (int64_t i = 0; i < b->residue.rows && b->residue.rowptr; i++)
    for (int64_t k = b->residue.rowptr[i]; k < b->residue.rowptr[i + 1]; k++) res[i * C + b->residue.col[k]] = 1;
  int64_t bad = 0;
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) {
      bool nz = ts_csr_has(m, i, j), covered = owner[i * C + j] >= 0;
      /* exactly once: a nonzero is in a block xor in the residue; the residue holds nothing else */
      if (res[i * C + j] != (nz && !covered)) bad++;
    }
  CHECK(bad == 0, "%s: %lld cells where residue != (nonzero and in no block)", what, (long long)bad);
  CHECK(bnnz + b->residue.nnz == m->nnz, "%s: %lld in blocks + %lld residue != %lld", what, (long long)bnnz,
        (long long)b->residue.nnz, (long long)m->nnz);
  CHECK(b->block_cells == cells && b->block_nnz == bnnz, "%s: totals", what);
  double obj = (double)cells + (double)b->nblocks * o->block_cost + (double)b->residue.nnz / o->rho;
  CHECK(fabs(obj - b->objective) <= 1e-9 * (1 + obj), "%s: objective %g, expected %g", what, b->objective, obj);
  ts_blocks_summary su;
  ts_blocks_summarize(b, &su);
  int64_t hs = 0;
  for (int k = 0; k < 10; k++) hs += su.density_hist[k];
  CHECK(hs == b->nblocks && su.nblocks == b->nblocks, "%s: histogram sums to %lld, %lld blocks", what, (long long)hs,
        (long long)b->nblocks);
  if (m->nnz)
    CHECK(fabs(su.fill_ratio - (double)(cells + b->residue.nnz) / (double)m->nnz) < 1e-12 &&
              fabs(su.coverage - (double)bnnz / (double)m->nnz) < 1e-12,
          "%s: fill %g coverage %g", what, su.fill_ratio, su.coverage);
  free(owner), free(res);
  return tst_failed - fails;
}

static void run_and_check(const ts_csr *m, const ts_blocks_opts *o, const char *what) {
  ts_blocks b;
  memset(&b, 0x5A, sizeof b); /* poisoned: must be fully written */
  ts_status s = ts_blocks_extract(m, o, &b);
  CHECK(s == TS_OK, "%s: %s", what, ts_last_error());
  if (s == TS_OK) check_cover(m, o, &b, what);
  ts_blocks_free(&b);
}

static void test_cover_random(void) {
  const int64_t shapes[][2] = {{1, 1}, {1, 9}, {7, 1}, {13, 17}, {40, 33}, {64, 64}, {65, 31}};
  const double dens[] = {0.02, 0.2, 0.5, 0.9};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t di = 0; di < 4; di++)
      for (int meth = 0; meth < 2; meth++) {
        ts_csr m = random_pattern(shapes[si][0], shapes[si][1], dens[di], 100 + si * 7 + di);
        ts_blocks_opts o;
        ts_blocks_opts_default(&o);
        o.method = (ts_extract_method)meth;
        o.min_nnz = 1 + (int64_t)(si % 4);
        o.max_rows = si % 2 ? 8 : 1024, o.max_cols = si % 3 ? 1024 : 5;
        o.rho = 0.5 + 0.1 * (double)(di % 4);
        o.max_group = si % 2 ? 4 : 32;
        o.block_cost = (double)(di * 3);
        char what[128];
        snprintf(what, sizeof what, "%s %lldx%lld p=%.2f", ts_extract_method_name(o.method), (long long)m.rows,
                 (long long)m.cols, dens[di]);
        run_and_check(&m, &o, what);
        ts_csr_free(&m);
      }
}

static void test_structured(void) {
  /* exact boxes on an empty background: greedy finds exactly them */
  const int box[] = {0, 0, 8, 8, 10, 20, 6, 10, 30, 3, 5, 5};
  ts_csr m = boxes_pattern(40, 40, box, 3, 0.0, 1);
  ts_blocks_opts o;
  ts_blocks_opts_default(&o);
  ts_blocks b;
  CHECK_OK(ts_blocks_extract(&m, &o, &b));
  CHECK(b.nblocks == 3 && b.residue.nnz == 0, "boxes: %lld blocks, residue %lld", (long long)b.nblocks,
        (long long)b.residue.nnz);
  for (int k = 0; k < 3 && b.nblocks == 3; k++)
    CHECK(b.blocks[k].row0 == box[4 * k] && b.blocks[k].col0 == box[4 * k + 1] && b.blocks[k].rows == box[4 * k + 2] &&
              b.blocks[k].cols == box[4 * k + 3],
          "boxes: block %d is (%d,%d %dx%d)", k, b.blocks[k].row0, b.blocks[k].col0, b.blocks[k].rows, b.blocks[k].cols);
  check_cover(&m, &o, &b, "boxes greedy");
  ts_blocks_free(&b);
  /* dp on the same: all nonzeros in blocks (block_cost small against 25+ nonzeros) */
  o.method = TS_EXTRACT_DP;
  CHECK_OK(ts_blocks_extract(&m, &o, &b));
  CHECK(b.residue.nnz == 0, "boxes dp: residue %lld", (long long)b.residue.nnz);
  check_cover(&m, &o, &b, "boxes dp");
  ts_blocks_free(&b);
  ts_csr_free(&m);
  /* boxes on noise, both methods */
  m = boxes_pattern(96, 80, box, 3, 0.05, 2);
  for (int meth = 0; meth < 2; meth++) {
    o.method = (ts_extract_method)meth;
    run_and_check(&m, &o, meth ? "boxes+noise dp" : "boxes+noise greedy");
  }
  ts_csr_free(&m);
  /* a full matrix cut by max_rows x max_cols: full tiles, no residue */
  m = random_pattern(33, 47, 1.0, 3);
  ts_blocks_opts_default(&o);
  o.max_rows = 8, o.max_cols = 16;
  CHECK_OK(ts_blocks_extract(&m, &o, &b));
  CHECK(b.residue.nnz == 0 && b.block_cells == 33 * 47, "full: residue %lld, cells %lld", (long long)b.residue.nnz,
        (long long)b.block_cells);
  for (int64_t k = 0; k < b.nblocks; k++)
    CHECK(b.blocks[k].nnz == (int64_t)b.blocks[k].rows * b.blocks[k].cols, "full: block %lld not full", (long long)k);
  ts_blocks_free(&b);
  ts_csr_free(&m);
  /* generator patterns, reordered first: a window/global mask becomes mostly blocks */
  ts_csr g, pg;
  ts_pattern_info info;
  CHECK_OK(ts_pattern_generate("permute:vitdet:h=16,w=16,win=4,global=2,seed=3", &g, &info));
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = TS_REORDER_IC;
  int32_t *perm = malloc((size_t)g.rows * sizeof *perm);
  CHECK_OK(ts_reorder(&g, &ro, perm, NULL, NULL));
  CHECK_OK(ts_csr_permute(&g, perm, perm, &pg));
  for (int meth = 0; meth < 2; meth++) {
    ts_blocks_opts_default(&o);
    o.method = (ts_extract_method)meth;
    CHECK_OK(ts_blocks_extract(&pg, &o, &b));
    check_cover(&pg, &o, &b, meth ? "vitdet ic dp" : "vitdet ic greedy");
    ts_blocks_summary su;
    ts_blocks_summarize(&b, &su);
    /* 4x4 windows of 16 tokens + 2 global rows/columns: windows and global bands are dense */
    CHECK(su.coverage >= 0.95, "vitdet ic %s: coverage %.3f", ts_extract_method_name(o.method), su.coverage);
    ts_blocks_free(&b);
  }
  free(perm);
  ts_csr_free(&g), ts_csr_free(&pg);
  ts_pattern_info_free(&info);
}

/* Cost of rows [i, j) as one dp group, straight from the definition. */
static double group_cost(const ts_csr *m, int64_t i, int64_t j, double rho, double beta) {
  int64_t C = m->cols, h = j - i;
  int64_t *cnt = calloc((size_t)C + 1, sizeof *cnt);
  for (int64_t r = i; r < j; r++)
    for (int64_t k = m->rowptr[r]; k < m->rowptr[r + 1]; k++) cnt[m->col[k]]++;
  double cost = 0;
  for (int64_t c = 0; c < C;) {
    if (!cnt[c]) {
      c++;
      continue;
    }
    int64_t len = 0, nz = 0;
    while (c < C && cnt[c]) nz += cnt[c++], len++;
    double blockc = (double)h * (double)len + beta;
    cost += rho * blockc <= (double)nz ? blockc : (double)nz / rho;
  }
  free(cnt);
  return cost;
}

static void test_dp_optimal(void) {
  int cases = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    int64_t R = 1 + (int64_t)(seed % 9), C = 3 + (int64_t)(seed * 7 % 11);
    ts_csr m = random_pattern(R, C, 0.15 + 0.1 * (double)(seed % 7), seed * 31);
    const double rhos[] = {0.5, 0.6, 1.0}, betas[] = {0, 3, 16};
    for (int v = 0; v < 3; v++) {
      ts_blocks_opts o;
      ts_blocks_opts_default(&o);
      o.method = TS_EXTRACT_DP;
      o.rho = rhos[(seed + (uint64_t)v) % 3];
      o.block_cost = betas[v];
      o.max_group = v == 1 ? 3 : 32;
      /* every cut of R rows into groups of <= max_group rows: 2^(R-1) compositions */
      double best = -1;
      for (uint64_t cut = 0; cut < (1ull << (R - 1)); cut++) {
        double tot = 0;
        int64_t start = 0;
        bool ok = true;
        for (int64_t r = 1; r <= R; r++)
          if (r == R || (cut >> (r - 1) & 1)) {
            if (r - start > o.max_group) ok = false;
            tot += group_cost(&m, start, r, o.rho, o.block_cost);
            start = r;
          }
        if (ok && (best < 0 || tot < best)) best = tot;
      }
      ts_blocks b;
      CHECK_OK(ts_blocks_extract(&m, &o, &b));
      CHECK(fabs(b.objective - best) <= 1e-9 * (1 + best), "dp seed %llu (%lldx%lld rho %g beta %g L %d): %.12g, brute force %.12g",
            (unsigned long long)seed, (long long)R, (long long)C, o.rho, o.block_cost, o.max_group, b.objective, best);
      check_cover(&m, &o, &b, "dp tiny");
      ts_blocks_free(&b);
      cases++;
    }
    ts_csr_free(&m);
  }
  CHECK(cases == 120, "dp cases %d", cases);
}

static void test_edges_and_errors(void) {
  ts_blocks_opts o;
  ts_blocks_opts_default(&o);
  CHECK(o.method == TS_EXTRACT_GREEDY && o.rho == 0.6 && o.min_nnz == 4 && o.max_rows == 1024 && o.max_group == 32 &&
            o.block_cost == 16,
        "defaults");
  ts_extract_method em;
  CHECK(ts_extract_method_parse("dp", &em) == TS_OK && em == TS_EXTRACT_DP, "parse dp");
  CHECK(strcmp(ts_extract_method_name(TS_EXTRACT_GREEDY), "greedy") == 0, "name greedy");
  CHECK_ERR_CONTAINS(ts_extract_method_parse("grid", &em), "unknown block extraction 'grid'");
  /* empty patterns */
  for (int meth = 0; meth < 2; meth++) {
    ts_csr z = random_pattern(5, 6, 0.0, 1), zz = random_pattern(0, 0, 0.0, 1);
    o.method = (ts_extract_method)meth;
    run_and_check(&z, &o, "all-zero");
    run_and_check(&zz, &o, "0x0");
    ts_csr_free(&z), ts_csr_free(&zz);
  }
  /* one nonzero: residue with min_nnz 4, a 1x1 block with min_nnz 1 */
  ts_csr one = random_pattern(1, 1, 1.0, 1);
  ts_blocks b;
  ts_blocks_opts_default(&o);
  CHECK_OK(ts_blocks_extract(&one, &o, &b));
  CHECK(b.nblocks == 0 && b.residue.nnz == 1, "1x1 min_nnz 4: %lld blocks", (long long)b.nblocks);
  ts_blocks_free(&b);
  o.min_nnz = 1;
  CHECK_OK(ts_blocks_extract(&one, &o, &b));
  CHECK(b.nblocks == 1 && b.residue.nnz == 0, "1x1 min_nnz 1: %lld blocks", (long long)b.nblocks);
  ts_blocks_free(&b);
  /* bad options: clear errors, output zeroed */
  const struct {
    const char *field;
    ts_blocks_opts o;
  } bad[] = {
      {"rho", {.method = TS_EXTRACT_GREEDY, .rho = 0, .min_nnz = 1, .max_rows = 1, .max_cols = 1, .max_group = 1}},
      {"rho", {.method = TS_EXTRACT_GREEDY, .rho = 1.5, .min_nnz = 1, .max_rows = 1, .max_cols = 1, .max_group = 1}},
      {"min_nnz", {.method = TS_EXTRACT_GREEDY, .rho = 0.6, .min_nnz = 0, .max_rows = 1, .max_cols = 1, .max_group = 1}},
      {"max block", {.method = TS_EXTRACT_GREEDY, .rho = 0.6, .min_nnz = 1, .max_rows = 0, .max_cols = 1, .max_group = 1}},
      {"max_group", {.method = TS_EXTRACT_DP, .rho = 0.6, .min_nnz = 1, .max_rows = 1, .max_cols = 1, .max_group = 2000}},
      {"block_cost", {.method = TS_EXTRACT_DP, .rho = 0.6, .min_nnz = 1, .max_rows = 1, .max_cols = 1, .max_group = 4, .block_cost = -1}},
      {"method", {.method = (ts_extract_method)7, .rho = 0.6, .min_nnz = 1, .max_rows = 1, .max_cols = 1, .max_group = 1}},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    memset(&b, 0x5A, sizeof b);
    CHECK_ERR_CONTAINS(ts_blocks_extract(&one, &bad[k].o, &b), bad[k].field);
    CHECK(b.blocks == NULL && b.nblocks == 0 && b.residue.col == NULL, "bad %s: output not zeroed", bad[k].field);
  }
  /* malformed CSR: unsorted columns */
  int64_t rp[] = {0, 2};
  int32_t cols[] = {3, 1};
  ts_csr badm = {.rows = 1, .cols = 4, .nnz = 2, .rowptr = rp, .col = cols};
  CHECK_STATUS(ts_blocks_extract(&badm, &o, &b), TS_ERR_FORMAT);
  CHECK_STATUS(ts_blocks_extract(NULL, &o, &b), TS_ERR_INVALID_ARG);
  ts_csr_free(&one);
}

int main(void) {
  test_cover_random();
  test_structured();
  test_dp_optimal();
  test_edges_and_errors();
  return tst_finish();
}
