/* Sparse formats: CSR validation, conversions (CSR/COO/bitmap/dense/tensor/BSR) against dense
 * brute force on edge shapes (0, 1, 63, 64, 65, odd), block statistics, transpose, symmetrize,
 * permutations, popcount kernels (dispatched vs reference), and .npy/.mtx/permutation files. */
#include <unistd.h>

#include "tessera/io.h"
#include "tessera/sparse.h"
#include "sparse/format_internal.h"
#include "tst.h"
#include "tst_dispatch.h"

/* Random dense 0/1 matrix with about `pct` percent ones (fixed seed). */
static uint8_t *rand_dense(int64_t rows, int64_t cols, int pct, uint64_t seed) {
  uint8_t *d = malloc((size_t)(rows * cols) + 1);
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int64_t i = 0; i < rows * cols; i++) d[i] = ts_rng_below(&r, 100) < (uint64_t)pct;
  return d;
}

/* Dense bytes of a CSR (rows*cols), via the brute-force membership test (not the converters). */
static uint8_t *dense_of(const ts_csr *m) {
  uint8_t *d = calloc((size_t)(m->rows * m->cols) + 1, 1);
  for (int64_t i = 0; i < m->rows; i++)
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) d[i * m->cols + m->col[k]] = 1;
  return d;
}

static void test_validate(void) {
  int64_t rp[4] = {0, 2, 2, 4};
  int32_t col[4] = {0, 3, 1, 2};
  ts_csr m = {3, 4, 4, rp, col, NULL};
  CHECK_OK(ts_csr_validate(&m));
  col[1] = 4;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "row 0: column 4 at position 1 is out of range [0, 4)");
  col[1] = 0;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "is not greater than the previous column 0");
  col[1] = 3;
  col[2] = 2, col[3] = 1;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "row 2: column 1 at position 3");
  col[2] = 1, col[3] = 2;
  rp[0] = 1;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "rowptr[0] = 1");
  rp[0] = 0, rp[2] = 1;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "must be non-decreasing");
  rp[2] = 2, rp[3] = 3;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "rowptr[3] = 3, expected nnz = 4");
  rp[3] = 4;
  m.cols = (int64_t)INT32_MAX + 1;
  CHECK_STATUS(ts_csr_validate(&m), TS_ERR_FORMAT);
  m.cols = 4;
  m.col = NULL;
  CHECK_ERR_CONTAINS(ts_csr_validate(&m), "col is NULL");
  CHECK_STATUS(ts_csr_validate(NULL), TS_ERR_INVALID_ARG);
  ts_csr z;
  CHECK_OK(ts_csr_alloc(&z, 0, 0, 0, false));
  CHECK_OK(ts_csr_validate(&z));
  ts_csr_free(&z);
  CHECK_STATUS(ts_csr_alloc(&z, -1, 3, 0, false), TS_ERR_SHAPE);
  CHECK(z.rowptr == NULL, "zeroed on error");
}

static const int64_t shapes[][2] = {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {1, 64}, {7, 63}, {64, 64}, {65, 65}, {33, 130}, {130, 17}};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

static void test_conversions(void) {
  for (int s = 0; s < NSHAPES; s++) {
    int64_t R = shapes[s][0], C = shapes[s][1];
    for (int pct = 0; pct <= 100; pct += 25) {
      uint8_t *d = rand_dense(R, C, pct, (uint64_t)(s * 1000 + pct));
      ts_csr a, b;
      CHECK_OK(ts_csr_from_dense_u8(d, R, C, &a));
      CHECK_OK(ts_csr_validate(&a));
      uint8_t *back = dense_of(&a);
      CHECK(memcmp(back, d, (size_t)(R * C)) == 0, "dense->csr %lldx%lld pct %d", (long long)R, (long long)C, pct);
      free(back);
      /* csr -> dense into a poisoned buffer with guard bytes */
      uint8_t *out = malloc((size_t)(R * C) + 16);
      memset(out, 0xAB, (size_t)(R * C) + 16);
      CHECK_OK(ts_csr_to_dense_u8(&a, out));
      CHECK(memcmp(out, d, (size_t)(R * C)) == 0, "csr->dense");
      bool guard = true;
      for (int g = 0; g < 16; g++) guard &= out[R * C + g] == 0xAB;
      CHECK(guard, "csr->dense guard bytes");
      /* coo */
      ts_coo coo;
      CHECK_OK(ts_csr_to_coo(&a, &coo));
      CHECK(coo.nnz == a.nnz, "coo nnz");
      CHECK_OK(ts_coo_to_csr(&coo, &b));
      CHECK(ts_csr_equal(&a, &b), "csr->coo->csr %lldx%lld", (long long)R, (long long)C);
      ts_csr_free(&b);
      /* bitmap (also via coo) */
      ts_bitmap bm, bm2;
      CHECK_OK(ts_csr_to_bitmap(&a, &bm));
      CHECK(ts_bitmap_count(&bm) == a.nnz, "bitmap count");
      bool ok = true;
      for (int64_t i = 0; i < R; i++) {
        int64_t rc = 0;
        for (int64_t j = 0; j < C; j++) {
          ok &= ts_bitmap_get(&bm, i, j) == (d[i * C + j] != 0);
          rc += d[i * C + j];
        }
        ok &= ts_bitmap_row_count(&bm, i) == rc;
      }
      CHECK(ok, "bitmap cells and row counts %lldx%lld", (long long)R, (long long)C);
      CHECK_OK(ts_bitmap_to_csr(&bm, &b));
      CHECK(ts_csr_equal(&a, &b), "csr->bitmap->csr");
      ts_csr_free(&b);
      CHECK_OK(ts_coo_to_bitmap(&coo, &bm2));
      CHECK(bm2.stride == bm.stride && memcmp(bm.bits, bm2.bits, (size_t)(R * bm.stride) * 8) == 0, "coo->bitmap");
      ts_bitmap_free(&bm2);
      ts_coo coo2;
      CHECK_OK(ts_bitmap_to_coo(&bm, &coo2));
      CHECK(coo2.nnz == coo.nnz && (coo.nnz == 0 || (memcmp(coo.row, coo2.row, (size_t)coo.nnz * 4) == 0 &&
                                                     memcmp(coo.col, coo2.col, (size_t)coo.nnz * 4) == 0)),
            "bitmap->coo row-major");
      ts_coo_free(&coo2);
      uint8_t *bd = malloc((size_t)(R * C) + 1);
      CHECK_OK(ts_bitmap_to_dense_u8(&bm, bd));
      CHECK(memcmp(bd, d, (size_t)(R * C)) == 0, "bitmap->dense");
      CHECK_OK(ts_bitmap_from_dense_u8(d, R, C, &bm2));
      CHECK(memcmp(bm.bits, bm2.bits, (size_t)(R * bm.stride) * 8) == 0, "dense->bitmap");
      ts_bitmap_free(&bm2);
      free(bd);
      ts_bitmap_free(&bm);
      ts_coo_free(&coo);
      ts_csr_free(&a);
      free(out);
      free(d);
    }
  }
  /* COO in any order with duplicates: merged, values summed. */
  int32_t r[6] = {2, 0, 2, 1, 0, 2}, c[6] = {1, 3, 0, 2, 3, 1};
  float v[6] = {1, 2, 3, 4, 5, 6};
  ts_coo coo = {3, 4, 6, r, c, v};
  ts_csr m;
  CHECK_OK(ts_coo_to_csr(&coo, &m));
  CHECK(m.nnz == 4 && m.rowptr[1] == 1 && m.rowptr[2] == 2 && m.rowptr[3] == 4, "merged rowptr");
  CHECK(m.col[0] == 3 && m.val[0] == 7 && m.col[1] == 2 && m.val[1] == 4, "row 0/1");
  CHECK(m.col[2] == 0 && m.val[2] == 3 && m.col[3] == 1 && m.val[3] == 7, "row 2 sorted, dup summed");
  ts_csr_free(&m);
  c[0] = 4;
  CHECK_ERR_CONTAINS(ts_coo_to_csr(&coo, &m), "entry 0 = (2, 4) is outside 3 x 4");
  /* a bitmap with stray padding bits does not produce out-of-range columns */
  ts_bitmap bm;
  CHECK_OK(ts_bitmap_alloc(&bm, 2, 70));
  bm.bits[1] |= (uint64_t)1 << 10; /* column 74: padding */
  ts_bitmap_set(&bm, 1, 69, true);
  CHECK_OK(ts_bitmap_to_csr(&bm, &m));
  CHECK(m.nnz == 1 && m.col[0] == 69, "padding ignored");
  ts_csr_free(&m);
  ts_bitmap_free(&bm);
}

static void test_tensor(void) {
  /* f32 with NaN and -0 in a transposed (strided) view: nonzero = 1, NaN counts, -0 does not. */
  float f[6] = {0.0f, -0.0f, NAN, 1.5f, 0.0f, -2.0f}; /* 2 x 3 */
  ts_tensor t;
  int64_t shape[2] = {2, 3};
  CHECK_OK(ts_tensor_wrap(&t, TS_F32, 2, shape, f));
  ts_csr m;
  CHECK_OK(ts_csr_from_tensor(&t, &m));
  CHECK(m.nnz == 3 && ts_csr_has(&m, 0, 2) && ts_csr_has(&m, 1, 0) && ts_csr_has(&m, 1, 2) && !ts_csr_has(&m, 0, 1),
        "f32 nonzeros");
  ts_csr_free(&m);
  t.shape[0] = 3, t.shape[1] = 2, t.strides[0] = 1, t.strides[1] = 3; /* the transpose */
  CHECK_OK(ts_csr_from_tensor(&t, &m));
  CHECK(m.rows == 3 && m.nnz == 3 && ts_csr_has(&m, 2, 0) && ts_csr_has(&m, 0, 1) && ts_csr_has(&m, 2, 1), "strided");
  ts_csr_free(&m);
  uint16_t h[4] = {0x8000, 0x3c00, 0x0000, 0x7e00}; /* -0, 1, 0, NaN */
  int64_t s22[2] = {2, 2};
  CHECK_OK(ts_tensor_wrap(&t, TS_F16, 2, s22, h));
  CHECK_OK(ts_csr_from_tensor(&t, &m));
  CHECK(m.nnz == 2 && ts_csr_has(&m, 0, 1) && ts_csr_has(&m, 1, 1), "f16");
  ts_csr_free(&m);
  int64_t iv[4] = {0, (int64_t)1 << 40, 0, -1};
  CHECK_OK(ts_tensor_wrap(&t, TS_I64, 2, s22, iv));
  CHECK_OK(ts_csr_from_tensor(&t, &m));
  CHECK(m.nnz == 2 && ts_csr_has(&m, 0, 1) && ts_csr_has(&m, 1, 1), "i64");
  ts_tensor t3;
  int64_t s3[3] = {2, 3, 4};
  CHECK_OK(ts_tensor_wrap(&t3, TS_U8, 3, s3, f));
  ts_csr bad;
  CHECK_ERR_CONTAINS(ts_csr_from_tensor(&t3, &bad), "must be a 2-D array, got 3-D shape (2, 3, 4)");
  ts_tensor dt;
  CHECK_OK(ts_csr_to_tensor(&m, TS_BOOL, &dt));
  const uint8_t *db = dt.data;
  CHECK(dt.ndim == 2 && dt.dtype == TS_BOOL && db[0] == 0 && db[1] == 1 && db[2] == 0 && db[3] == 1, "to tensor");
  ts_tensor_free(&dt);
  CHECK_STATUS(ts_csr_to_tensor(&m, TS_F32, &dt), TS_ERR_DTYPE);
  ts_csr_free(&m);
}

/* Value stored at (i, j) of a (which must hold it). */
static float csr_val(const ts_csr *a, int64_t i, int64_t j) {
  for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++)
    if (a->col[k] == j) return a->val[k];
  return NAN;
}

/* BSR against brute force for many block shapes (smaller/equal/larger than the matrix, bc > 64). */
static void test_bsr(void) {
  const int32_t blocks[][2] = {{1, 1}, {3, 5}, {4, 4}, {8, 64}, {32, 32}, {5, 70}, {64, 130}, {200, 200}};
  for (int s = 0; s < NSHAPES; s++) {
    int64_t R = shapes[s][0], C = shapes[s][1];
    uint8_t *d = rand_dense(R, C, 12, (uint64_t)(77 + s));
    ts_csr a;
    CHECK_OK(ts_csr_from_dense_u8(d, R, C, &a));
    a.val = malloc((size_t)a.nnz * sizeof(float) + 4);
    for (int64_t k = 0; k < a.nnz; k++) a.val[k] = (float)(k + 1);
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
      int32_t br = blocks[b][0], bc = blocks[b][1];
      ts_bsr x;
      CHECK_OK(ts_csr_to_bsr(&a, br, bc, &x));
      /* brute force: blocks with any set cell, and every cell of every stored block */
      int64_t nb = 0, nfull = 0, cells = 0;
      bool ok = x.brows == (R + br - 1) / br && x.bcols == (C + bc - 1) / bc && x.nnz == a.nnz;
      for (int64_t bi = 0; bi < x.brows; bi++)
        for (int64_t bj = 0; bj < x.bcols; bj++) {
          int64_t on = 0, in = 0;
          for (int64_t r = bi * br; r < R && r < (bi + 1) * br; r++)
            for (int64_t c = bj * bc; c < C && c < (bj + 1) * bc; c++) on += d[r * C + c], in++;
          if (!on) continue;
          nb++;
          cells += in;
          nfull += on == in;
          int64_t k = x.rowptr[bi];
          while (k < x.rowptr[bi + 1] && x.col[k] != bj) k++;
          ok &= k < x.rowptr[bi + 1];
          if (k >= x.rowptr[bi + 1]) continue;
          ok &= ts_bsr_block_nnz(&x, k) == on;
          for (int64_t lr = 0; lr < br; lr++)
            for (int64_t lc = 0; lc < bc; lc++) {
              int64_t r = bi * br + lr, c = bj * bc + lc;
              bool cell = r < R && c < C && d[r * C + c];
              bool bit = (x.mask[(k * br + lr) * x.mask_stride + lc / 64] >> (lc % 64)) & 1u;
              ok &= bit == cell;
              ok &= x.val[(k * br + lr) * bc + lc] == (cell ? csr_val(&a, r, c) : 0.0f);
            }
        }
      ok &= x.nblocks == nb;
      for (int64_t bi = 0; bi < x.brows; bi++)
        for (int64_t k = x.rowptr[bi] + 1; k < x.rowptr[bi + 1]; k++) ok &= x.col[k] > x.col[k - 1];
      CHECK(ok, "bsr %lldx%lld in %dx%d: %lld blocks, brute force %lld", (long long)R, (long long)C, br, bc,
            (long long)x.nblocks, (long long)nb);
      ts_block_stats st;
      CHECK_OK(ts_csr_block_stats(&a, br, bc, &st));
      CHECK(st.nblocks == nb && st.nfull == nfull && st.cells == cells && st.nnz == a.nnz, "block stats %dx%d", br, bc);
      ts_csr back;
      CHECK_OK(ts_bsr_to_csr(&x, &back));
      CHECK(ts_csr_equal(&a, &back) && back.val, "csr->bsr->csr with values %lldx%lld in %dx%d", (long long)R,
            (long long)C, br, bc);
      ts_csr_free(&back);
      ts_bsr_free(&x);
    }
    ts_bsr x;
    CHECK_ERR_CONTAINS(ts_csr_to_bsr(&a, 0, 4, &x), "block shape 0 x 4");
    ts_csr_free(&a);
    free(d);
  }
}

static void test_transpose_symmetrize(void) {
  for (int s = 0; s < NSHAPES; s++) {
    int64_t R = shapes[s][0], C = shapes[s][1];
    uint8_t *d = rand_dense(R, C, 20, (uint64_t)(300 + s));
    ts_csr a, t;
    CHECK_OK(ts_csr_from_dense_u8(d, R, C, &a));
    a.val = malloc((size_t)a.nnz * sizeof(float) + 4);
    for (int64_t k = 0; k < a.nnz; k++) a.val[k] = (float)k;
    CHECK_OK(ts_csr_transpose(&a, &t));
    CHECK_OK(ts_csr_validate(&t));
    bool ok = t.rows == C && t.cols == R && t.nnz == a.nnz;
    for (int64_t i = 0; ok && i < R; i++)
      for (int64_t k = a.rowptr[i]; k < a.rowptr[i + 1]; k++) {
        int64_t j = a.col[k], q = t.rowptr[j];
        while (q < t.rowptr[j + 1] && t.col[q] != i) q++;
        ok &= q < t.rowptr[j + 1] && t.val[q] == a.val[k];
      }
    CHECK(ok, "transpose %lldx%lld", (long long)R, (long long)C);
    ts_csr_free(&t);
    if (R == C) {
      ts_csr sy;
      CHECK_OK(ts_csr_symmetrize(&a, &sy));
      bool ok2 = sy.val == NULL;
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) ok2 &= ts_csr_has(&sy, i, j) == (d[i * C + j] || d[j * C + i]);
      CHECK(ok2 && ts_csr_is_symmetric(&sy), "symmetrize %lld", (long long)R);
      CHECK(R < 2 || !ts_csr_is_symmetric(&a), "random pattern is not symmetric");
      ts_csr_free(&sy);
    } else {
      ts_csr sy;
      CHECK_ERR_CONTAINS(ts_csr_symmetrize(&a, &sy), "not square");
    }
    ts_csr_free(&a);
    free(d);
  }
}

static void test_perm(void) {
  int32_t p[8], inv[8];
  ts_perm_random(p, 8, 5);
  CHECK_OK(ts_perm_validate(p, 8));
  int32_t q[8];
  ts_perm_random(q, 8, 5);
  CHECK(memcmp(p, q, sizeof p) == 0, "deterministic");
  CHECK_OK(ts_perm_inverse(p, 8, inv));
  bool ok = true;
  for (int i = 0; i < 8; i++) ok &= inv[p[i]] == i && p[inv[i]] == i;
  CHECK(ok, "inverse");
  int32_t bad[4] = {0, 2, 9, 1};
  CHECK_ERR_CONTAINS(ts_perm_validate(bad, 4), "perm[2] = 9 is out of range [0, 4)");
  int32_t rep[4] = {3, 2, 3, 1};
  CHECK_ERR_CONTAINS(ts_perm_validate(rep, 4), "perm[2] = 3 repeats perm[0]");
  int32_t neg[2] = {-1, 0};
  CHECK_ERR_CONTAINS(ts_perm_validate(neg, 2), "perm[0] = -1");
  CHECK_OK(ts_perm_validate(NULL, 0));

  /* permutation application vs brute force: rows only, cols only, both, symmetric */
  for (int s = 0; s < NSHAPES; s++) {
    int64_t R = shapes[s][0], C = shapes[s][1];
    uint8_t *d = rand_dense(R, C, 30, (uint64_t)(500 + s));
    ts_csr a, o;
    CHECK_OK(ts_csr_from_dense_u8(d, R, C, &a));
    a.val = malloc((size_t)a.nnz * sizeof(float) + 4);
    for (int64_t k = 0; k < a.nnz; k++) a.val[k] = (float)(k * 3 + 1);
    int32_t *rp = malloc((size_t)R * 4 + 4), *cp = malloc((size_t)C * 4 + 4);
    ts_perm_random(rp, R, 11);
    ts_perm_random(cp, C, 12);
    for (int mode = 0; mode < 4; mode++) {
      const int32_t *pr = (mode & 1) ? rp : NULL, *pc = (mode & 2) ? cp : NULL;
      CHECK_OK(ts_csr_permute(&a, pr, pc, &o));
      CHECK_OK(ts_csr_validate(&o));
      bool ok2 = o.nnz == a.nnz;
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
          int64_t oi = pr ? pr[i] : i, oj = pc ? pc[j] : j;
          ok2 &= ts_csr_has(&o, i, j) == (d[oi * C + oj] != 0);
        }
      /* values follow their entries */
      for (int64_t i = 0; i < R; i++)
        for (int64_t k = o.rowptr[i]; k < o.rowptr[i + 1]; k++) {
          int64_t oi = pr ? pr[i] : i, oj = pc ? pc[o.col[k]] : o.col[k], pos = a.rowptr[oi];
          while (a.col[pos] != oj) pos++;
          ok2 &= o.val[k] == a.val[pos];
        }
      CHECK(ok2, "permute %lldx%lld mode %d", (long long)R, (long long)C, mode);
      ts_csr_free(&o);
    }
    if (R == C && R > 1) {
      CHECK_OK(ts_csr_permute(&a, rp, rp, &o));
      bool ok3 = true;
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) ok3 &= ts_csr_has(&o, i, j) == (d[rp[i] * C + rp[j]] != 0);
      CHECK(ok3, "symmetric permutation");
      ts_csr_free(&o);
    }
    if (R > 1) {
      rp[0] = rp[1];
      CHECK_ERR_CONTAINS(ts_csr_permute(&a, rp, NULL, &o), "row permutation: perm[");
      CHECK(o.rowptr == NULL, "out zeroed on error");
    }
    free(rp);
    free(cp);
    ts_csr_free(&a);
    free(d);
  }
}

static void test_popcount(void) {
  uint64_t w[41];
  ts_rng r;
  ts_rng_seed(&r, 9);
  for (int i = 0; i < 41; i++) w[i] = ts_rng_next(&r) & ts_rng_next(&r);
  w[3] = ~0ull, w[4] = 0;
  TST_EACH_VARIANT(&ts__popcount_dispatch, v, ts__popcount_variant, t) {
    bool ok = true;
    for (int n = 0; n <= 41; n++) ok &= t->fn(w, n) == ts_popcount_words_ref(w, n);
    /* unaligned start: the kernel uses unaligned and masked loads */
    for (int n = 0; n <= 40; n++) ok &= t->fn(w + 1, n) == ts_popcount_words_ref(w + 1, n);
    CHECK(ok, "popcount kernel (%s) == reference", ts__level_name(ts__popcount_dispatch.variants[v].level));
  }
  bool ok = true; /* the dispatched entry */
  for (int n = 0; n <= 41; n++) ok &= ts_popcount_words(w, n) == ts_popcount_words_ref(w, n);
  CHECK(ok, "ts_popcount_words (%s) == reference", ts__level_name(ts__dispatch_level(&ts__popcount_dispatch)));
  int64_t ref = 0;
  for (int i = 0; i < 41; i++)
    for (int b = 0; b < 64; b++) ref += (w[i] >> b) & 1u;
  CHECK(ts_popcount_words_ref(w, 41) == ref, "reference vs bit loop");
}

static void test_files(void) {
  char p1[1200], p2[1200], p3[1200];
  tst_tmp_path(p1, sizeof p1, "spa_fmt.npy");
  tst_tmp_path(p2, sizeof p2, "spa_fmt.mtx");
  tst_tmp_path(p3, sizeof p3, "spa_fmt_perm.npy");
  uint8_t *d = rand_dense(37, 70, 15, 4242);
  ts_csr a, b;
  CHECK_OK(ts_csr_from_dense_u8(d, 37, 70, &a));
  CHECK_OK(ts_pattern_save(p1, &a));
  CHECK_OK(ts_pattern_load(p1, &b));
  CHECK(ts_csr_equal(&a, &b), "npy round trip");
  ts_csr_free(&b);
  CHECK_OK(ts_pattern_save(p2, &a));
  CHECK_OK(ts_pattern_load(p2, &b));
  CHECK(ts_csr_equal(&a, &b), "mtx round trip");
  ts_csr_free(&b);
  /* .npy of another dtype (f64): nonzero = 1 */
  double f[6] = {0, 0.5, 0, -1, 0, 0};
  ts_tensor t;
  int64_t sh[2] = {2, 3};
  CHECK_OK(ts_tensor_wrap(&t, TS_F64, 2, sh, f));
  CHECK_OK(ts_npy_write(p1, &t));
  CHECK_OK(ts_pattern_read_npy(p1, &b));
  CHECK(b.rows == 2 && b.cols == 3 && b.nnz == 2 && ts_csr_has(&b, 0, 1) && ts_csr_has(&b, 1, 0), "f64 npy");
  ts_csr_free(&b);
  int64_t sh1 = 6;
  CHECK_OK(ts_tensor_wrap(&t, TS_F64, 1, &sh1, f));
  CHECK_OK(ts_npy_write(p1, &t));
  CHECK_ERR_CONTAINS(ts_pattern_load(p1, &b), "must be a 2-D array, got 1-D");
  CHECK(strstr(ts_last_error(), "spa_fmt.npy") != NULL, "error names the file: %s", ts_last_error());
  /* Matrix Market: real symmetric with an explicit zero and a duplicate -> expanded pattern */
  const char *mm = "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 2.0\n3 1 1.5\n3 2 0.0\n3 1 1.0\n";
  CHECK_OK(ts_write_file_atomic(p2, mm, strlen(mm)));
  CHECK_OK(ts_pattern_load(p2, &b));
  CHECK(b.nnz == 3 && ts_csr_has(&b, 0, 0) && ts_csr_has(&b, 2, 0) && ts_csr_has(&b, 0, 2) && !ts_csr_has(&b, 2, 1),
        "mtx symmetric expanded, zero dropped, duplicate merged (nnz %lld)", (long long)b.nnz);
  ts_csr_free(&b);
  CHECK_ERR_CONTAINS(ts_pattern_load("/tmp/x.csv", &b), "unknown pattern file type");
  CHECK_STATUS(ts_pattern_save("/tmp/x.txt", &a), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(ts_pattern_load("/nonexistent/dir/x.npy", &b), "/nonexistent/dir/x.npy");
  /* permutations */
  int32_t p[9], *q = NULL;
  int64_t n = 0;
  ts_perm_random(p, 9, 3);
  CHECK_OK(ts_perm_write_npy(p3, p, 9));
  CHECK_OK(ts_perm_read_npy(p3, &q, &n));
  CHECK(n == 9 && q && memcmp(p, q, sizeof p) == 0, "perm round trip");
  ts_free(q);
  int64_t p64[4] = {2, 0, 3, 1};
  int64_t s4 = 4;
  CHECK_OK(ts_tensor_wrap(&t, TS_I64, 1, &s4, p64));
  CHECK_OK(ts_npy_write(p3, &t));
  CHECK_OK(ts_perm_read_npy(p3, &q, &n));
  CHECK(n == 4 && q[0] == 2 && q[3] == 1, "int64 perm");
  ts_free(q);
  p64[3] = 2;
  CHECK_OK(ts_npy_write(p3, &t));
  CHECK_ERR_CONTAINS(ts_perm_read_npy(p3, &q, &n), "perm[3] = 2 repeats perm[0]");
  CHECK(q == NULL && n == 0, "outputs cleared on error");
  p64[3] = 7;
  CHECK_OK(ts_npy_write(p3, &t));
  CHECK_ERR_CONTAINS(ts_perm_read_npy(p3, &q, &n), "perm[3] = 7 is out of range");
  CHECK_OK(ts_tensor_wrap(&t, TS_F64, 1, &s4, f));
  CHECK_OK(ts_npy_write(p3, &t));
  CHECK_ERR_CONTAINS(ts_perm_read_npy(p3, &q, &n), "must be int32 or int64, got f64");
  int32_t badp[3] = {0, 0, 1};
  CHECK_ERR_CONTAINS(ts_perm_write_npy(p3, badp, 3), "repeats");
  unlink(p1);
  unlink(p2);
  unlink(p3);
  ts_csr_free(&a);
  free(d);
}

int main(void) {
  test_validate();
  test_conversions();
  test_tensor();
  test_bsr();
  test_transpose_symmetrize();
  test_perm();
  test_popcount();
  test_files();
  return tst_finish();
}
