/* Unstructured group convolution: the partition kernel (every ISA variant) against its scalar
 * reference, the executor and every baseline against the dense masked reference, on odd shapes
 * (rows below/at/above the 6-row block, K below/above the 256-row pass, columns below/at/above the
 * 64-column tile), 1x1 and 3x3, stride 1 and 2, batch 2, outputs poisoned with NaN.
 *
 * Tolerances. Each output is a sum of L = (union channels) x taps products in fp32 (kernels) or
 * whatever order oneDNN picks; with u = 2^-24 the rounding error of any summation order is below
 * (L + 2) u S, S = sum |w| |x| over the terms (the classic bound gamma_L). The checks use exactly
 * that bound per output (S computed in double), which is tight enough to catch a wrong index or a
 * missing term (an error of order |w||x| ~ 0.1-1) by orders of magnitude. */
#include "gconv/gconv_base.h"
#include "gconv/gconv_internal.h"
#include "tessera/gconv.h"
#include "tst.h"
#include "tst_dispatch.h"

/* Each SIMD kernel vs the reference: rows x K over scattered B rows, columns [j0, j1) of rows of
 * width 300; everything outside [j0, j1) must stay NaN. */
static void test_kernel(void) {
  const int rows_list[] = {1, 2, 5, 6, 7, 13, 32};
  const int64_t k_list[] = {0, 1, 3, 256, 300};
  const int64_t cols[][2] = {{0, 1}, {0, 17}, {3, 69}, {0, 64}, {10, 300}};
  const int W = 300, NB = 40;
  float *b = ts_malloc(sizeof(float) * NB * (W + 16));
  float *wd = ts_malloc(sizeof(float) * 32 * 300), *wp = ts_malloc(sizeof(float) * 32 * 300);
  float *c = tst_alloc_guarded(32 * W), *r = ts_malloc(sizeof(float) * 32 * W);
  int32_t off[300];
  tst_fill_uniform(b, (size_t)NB * (W + 16), 3, -1, 1);
  tst_fill_uniform(wd, 32 * 300, 4, -1, 1);
  ts_rng g;
  ts_rng_seed(&g, 5);
  for (int k = 0; k < 300; k++) off[k] = (int32_t)(ts_rng_below(&g, NB) * (W + 16));
  TST_EACH_VARIANT(&ts__gconv_dispatch, vi, ts__gconv_kern_variant, kv)
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
      for (size_t ki = 0; ki < sizeof k_list / sizeof k_list[0]; ki++)
        for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
          const int rows = rows_list[ri];
          const int64_t K = k_list[ki], j0 = cols[ci][0], j1 = cols[ci][1];
          ts_gconv_pack_weights(rows, K, wd, 300, wp);
          float *crow[32], *rrow[32];
          for (int i = 0; i < rows; i++) crow[i] = c + i * W, rrow[i] = r + i * W;
          tst_poison(c, 32 * W);
          kv->fn(rows, K, wp, b, off, crow, j0, j1);
          ts_gconv_kernel_ref(rows, K, wp, b, off, rrow, j0, j1);
          bool ok = tst_guard_ok(c, 32 * W);
          double worst = 0;
          for (int i = 0; i < rows; i++)
            for (int64_t j = 0; j < W; j++) {
              const float v = c[i * W + j];
              if (j < j0 || j >= j1) {
                ok &= isnan(v);
                continue;
              }
              double s = 0;
              for (int64_t k = 0; k < K; k++) s += fabs((double)wd[i * 300 + k] * b[off[k] + j]);
              double e = fabs((double)v - r[i * W + j]), tol = (K + 2) * ldexp(1, -24) * s;
              ok &= e <= tol;
              if (e > worst) worst = e;
            }
          CHECK(ok, "kernel %s rows=%d K=%lld cols [%lld,%lld): max err %g (or wrote outside)",
                ts__level_name(ts__gconv_dispatch.variants[vi].level), rows,
                (long long)K, (long long)j0, (long long)j1, worst);
        }
  ts_free(b), ts_free(wd), ts_free(wp), ts_free(c), ts_free(r);
  CHECK(ts_gconv_row_blocks(8, NULL) == 2 && ts_gconv_row_blocks(6, NULL) == 1 && ts_gconv_row_blocks(13, NULL) == 3,
        "row blocks");
  int h[8];
  ts_gconv_row_blocks(7, h);
  CHECK(h[0] == 4 && h[1] == 3, "7 rows -> 4 + 3");
  CHECK_STATUS(ts_gconv_kernel_run(-1, 1, NULL, NULL, NULL, NULL, 0, 1), TS_ERR_INVALID_ARG);
}

/* Layer buffers: random connectivity from a spec, weights, input. */
typedef struct fixture {
  ts_gconv_layer l;
  ts_csr conn;
  float *w, *x, *ref, *y;
  size_t nout;
  double *bound; /* per output: (L + 2) u sum |w||x| */
} fixture;

static bool fixture_make(fixture *f, ts_gconv_layer l, const char *spec) {
  memset(f, 0, sizeof *f);
  f->l = l;
  if (ts_pattern_generate(spec, &f->conn, NULL) != TS_OK) return false;
  int ho, wo;
  ts_gconv_layer_out(&l, &ho, &wo);
  const int taps = l.ksize * l.ksize;
  const size_t nw = (size_t)l.cout * l.cin * taps, nx = (size_t)l.n * l.cin * l.h * l.w;
  f->nout = (size_t)l.n * l.cout * ho * wo;
  f->w = ts_malloc(nw * sizeof(float)), f->x = ts_malloc(nx * sizeof(float));
  f->ref = ts_malloc(f->nout * sizeof(float)), f->y = tst_alloc_guarded(f->nout);
  f->bound = ts_malloc(f->nout * sizeof(double));
  tst_fill_uniform(f->w, nw, 11, -1, 1);
  tst_fill_uniform(f->x, nx, 12, -1, 1);
  /* the bound needs |w| and |x|: the reference of the absolute values, in double */
  float *aw = ts_malloc(nw * sizeof(float)), *ax = ts_malloc(nx * sizeof(float)), *ay = ts_malloc(f->nout * sizeof(float));
  for (size_t i = 0; i < nw; i++) aw[i] = fabsf(f->w[i]);
  for (size_t i = 0; i < nx; i++) ax[i] = fabsf(f->x[i]);
  bool ok = ts_gconv_reference(&l, &f->conn, f->w, f->x, f->ref) == TS_OK &&
            ts_gconv_reference(&l, &f->conn, aw, ax, ay) == TS_OK;
  /* L <= cin * taps terms (zero-weight union padding adds exact zeros) */
  for (size_t i = 0; i < f->nout; i++) f->bound[i] = ((double)l.cin * taps + 2) * ldexp(1, -24) * ay[i] * 1.0001;
  ts_free(aw), ts_free(ax), ts_free(ay);
  return ok;
}

static void fixture_free(fixture *f) {
  ts_csr_free(&f->conn);
  ts_free(f->w), ts_free(f->x), ts_free(f->ref), ts_free(f->y), ts_free(f->bound);
}

static bool matches_ref(const fixture *f, double *worst) {
  bool ok = tst_guard_ok(f->y, f->nout);
  *worst = 0;
  for (size_t i = 0; i < f->nout; i++) {
    double e = fabs((double)f->y[i] - f->ref[i]);
    if (!(e <= f->bound[i])) ok = false;
    if (!(e <= *worst)) *worst = e;
  }
  return ok;
}

/* Partitions of odd sizes in a scrambled order, each union = its rows' inputs plus one extra
 * unconnected channel (must get weight 0). */
static ts_gconv_part *odd_parts(const ts_csr *conn, int32_t *np, int32_t **rows_buf, int32_t **in_buf) {
  const int64_t cout = conn->rows, cin = conn->cols;
  ts_gconv_part *P = ts_calloc((size_t)cout, sizeof *P);
  *rows_buf = ts_malloc((size_t)cout * sizeof(int32_t));
  *in_buf = ts_malloc((size_t)(cout * cin + 1) * sizeof(int32_t));
  uint8_t *mark = ts_calloc((size_t)cin, 1);
  for (int64_t i = 0; i < cout; i++) (*rows_buf)[i] = (int32_t)((i * 7 + 3) % cout); /* 7 coprime to cout in tests */
  const int sizes[] = {1, 7, 3, 6, 13, 2, 5};
  int64_t at = 0, ip = 0;
  int32_t n = 0;
  for (int t = 0; at < cout; t++) {
    int s = sizes[t % 7];
    if (s > cout - at) s = (int)(cout - at);
    P[n].nrows = s;
    P[n].rows = *rows_buf + at;
    for (int i = 0; i < s; i++)
      for (int64_t q = conn->rowptr[P[n].rows[i]]; q < conn->rowptr[P[n].rows[i] + 1]; q++) mark[conn->col[q]] = 1;
    mark[(t * 5) % cin] = 1;
    P[n].in = *in_buf + ip;
    for (int64_t c = 0; c < cin; c++)
      if (mark[c]) (*in_buf)[ip++] = (int32_t)c, mark[c] = 0;
    P[n].nunion = (int32_t)(*in_buf + ip - P[n].in);
    at += s, n++;
  }
  ts_free(mark);
  *np = n;
  return P;
}

static const struct {
  ts_gconv_layer l;
  const char *spec;
} cases[] = {
    {{2, 13, 11, 5, 7, 1, 1}, "randconn:cin=13,cout=11,density=0.3,seed=2"},
    {{1, 40, 30, 9, 9, 1, 1}, "unstructconv:cin=40,cout=30,keep=0.25,groups=3,corr=0.8,seed=3"},
    {{2, 9, 10, 6, 5, 3, 1}, "randconn:cin=9,cout=10,density=0.4,seed=4"},
    {{1, 12, 8, 7, 9, 3, 2}, "condense:cin=12,cout=8,groups=4,seed=5"},
    {{1, 10, 9, 8, 6, 1, 2}, "randconn:cin=10,cout=9,density=0.5,seed=6"},
    {{1, 16, 16, 1, 1, 3, 1}, "groupconv:cin=16,cout=16,groups=4"},
    {{1, 20, 12, 3, 80, 3, 1}, "randconn:cin=20,cout=12,density=0.25,seed=7"},
};

static void test_exec(ts_context *ctx) {
  ts_gconv_cost *m;
  CHECK_OK(ts_gconv_cost_analytic(&m));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fixture f;
    CHECK(fixture_make(&f, cases[i].l, cases[i].spec), "fixture %s: %s", cases[i].spec, ts_last_error());
    /* the planner's partitions */
    ts_gconv_plan_opts po;
    ts_gconv_plan_opts_default(&po);
    po.time_limit = 0.2;
    ts_gconv_plan plan;
    CHECK_OK(ts_gconv_plan_make(&f.l, &f.conn, m, &po, &plan));
    CHECK_OK(ts_gconv_plan_validate(&plan, &f.conn));
    ts_gconv_exec *e = NULL;
    CHECK_OK(ts_gconv_exec_create(&e, ctx, &f.l, &f.conn, plan.parts, plan.nparts, f.w));
    double worst = 0;
    for (int rep = 0; rep < 2 && e; rep++) { /* twice: execute keeps no state */
      tst_poison(f.y, f.nout);
      CHECK_OK(ts_gconv_execute(e, f.x, f.y));
      CHECK(matches_ref(&f, &worst), "%s planned (%d parts): max err %g", cases[i].spec, plan.nparts, worst);
    }
    ts_gconv_exec_destroy(e);
    /* scrambled odd partitions with extra unconnected inputs */
    int32_t np, *rb, *ib;
    ts_gconv_part *P = odd_parts(&f.conn, &np, &rb, &ib);
    e = NULL;
    CHECK_OK(ts_gconv_exec_create(&e, ctx, &f.l, &f.conn, P, np, f.w));
    tst_poison(f.y, f.nout);
    if (e) CHECK_OK(ts_gconv_execute(e, f.x, f.y));
    CHECK(e && matches_ref(&f, &worst), "%s odd partitions: max err %g", cases[i].spec, worst);
    ts_gconv_exec_destroy(e);
    ts_free(P), ts_free(rb), ts_free(ib);
    /* baselines */
    for (int k = 0; k < TS_GCONV_BASE_COUNT; k++) {
      int groups = k == TS_GCONV_BASE_DEPLOY || k == TS_GCONV_BASE_ONEDNN_GROUPED ? (f.l.cout % 2 ? 1 : 2) : 1;
      ts_gconv_base *b = NULL;
      CHECK_OK(ts_gconv_base_create(&b, ctx, (ts_gconv_base_kind)k, &f.l, &f.conn, f.w, groups));
      tst_poison(f.y, f.nout);
      if (b) CHECK_OK(ts_gconv_base_run(b, f.x, f.y));
      /* oneDNN may use Winograd-free direct kernels with any order: same gamma bound */
      CHECK(b && matches_ref(&f, &worst), "%s baseline %s: max err %g", cases[i].spec, ts_gconv_base_name(k), worst);
      ts_gconv_base_destroy(b);
    }
    ts_gconv_plan_free(&plan);
    fixture_free(&f);
  }
  ts_gconv_cost_destroy(m);
}

static void test_bad_input(ts_context *ctx) {
  ts_gconv_layer l = {1, 8, 4, 4, 4, 3, 1};
  CHECK_OK(ts_gconv_layer_check(&l));
  l.ksize = 2;
  CHECK_ERR_CONTAINS(ts_gconv_layer_check(&l), "ksize must be 1 or 3, got 2");
  l.ksize = 5;
  CHECK_ERR_CONTAINS(ts_gconv_layer_check(&l), "ksize must be in [1, 3], got 5");
  l.ksize = 1, l.stride = 0;
  CHECK_ERR_CONTAINS(ts_gconv_layer_check(&l), "stride must be in [1, 4], got 0");
  l.stride = 1;
  ts_csr conn;
  CHECK_OK(ts_pattern_generate("randconn:cin=8,cout=4,density=0.5", &conn, NULL));
  ts_gconv_layer l2 = {1, 9, 4, 4, 4, 1, 1};
  CHECK_ERR_CONTAINS(ts_gconv_conn_check(&l2, &conn), "connectivity is 4 x 8, the layer needs cout x cin = 4 x 9");
  float w[4 * 8];
  memset(w, 0, sizeof w);
  int32_t rows[4] = {0, 1, 2, 2}, in[8] = {0, 1, 2, 3, 4, 5, 6, 7}, in_bad[2] = {3, 1};
  ts_gconv_part p[2] = {{2, 8, rows, in}, {2, 8, rows + 2, in}};
  ts_gconv_exec *e;
  CHECK_ERR_CONTAINS(ts_gconv_exec_create(&e, ctx, &l, &conn, p, 2, w), "output channel 2 is in partitions 1 and 1");
  rows[3] = 3;
  p[1].nunion = 2, p[1].in = in_bad;
  CHECK_ERR_CONTAINS(ts_gconv_exec_create(&e, ctx, &l, &conn, p, 2, w), "input 1 at position 1 is out of range or not increasing");
  p[1].in = in + 7, p[1].nunion = 1;
  CHECK_ERR_CONTAINS(ts_gconv_exec_create(&e, ctx, &l, &conn, p, 2, w), "partition 1 lacks input");
  p[1].nrows = 1, p[1].in = in, p[1].nunion = 8;
  CHECK_ERR_CONTAINS(ts_gconv_exec_create(&e, ctx, &l, &conn, p, 2, w), "output channel 3 is in no partition");
  CHECK_ERR_CONTAINS(ts_gconv_base_create(NULL, ctx, TS_GCONV_BASE_DEPLOY, &l, &conn, w, 3), "NULL output");
  ts_gconv_base *b;
  CHECK_ERR_CONTAINS(ts_gconv_base_create(&b, ctx, TS_GCONV_BASE_DEPLOY, &l, &conn, w, 3), "groups=3 does not divide cout=4");
  ts_csr_free(&conn);
}

int main(void) {
  ts_context *ctx;
  if (ts_context_create(&ctx, 2) != TS_OK) return 1;
  test_kernel();
  test_exec(ctx);
  test_bad_input(ctx);
  ts_context_destroy(ctx);
  return tst_finish();
}
