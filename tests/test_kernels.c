/* Kernels: every ISA variant (reference, AVX2, AVX-512; a variant the CPU lacks is skipped) of
 * the GEMM tile, row softmax, activations, exp, LayerNorm and RMSNorm against double-precision
 * answers, plus ts_sgemm (oneDNN and the reference), argument checks and dispatch.
 *
 * Tolerances (u = 2^-24, the fp32 unit roundoff):
 *  - GEMM: |C - C_exact| <= (K + 4) u (|alpha| sum_p |a_ip b_pj| + |beta c_ij| (or |c_ij| when
 *    accumulating)): the standard bound gamma_K for any summation order, plus the alpha/beta
 *    scaling and the final rounding. The expected value is summed in double here.
 *  - softmax: relative (16 + n/8 + |x_i - max|) u per element: exp (<= 4u), the rounding of
 *    x_i - max (relative |x_i - max| u after exp), the vector sum (<= (n/8 + 8) u for two
 *    chains of >= 8 lanes), the reciprocal and the product; plus 2e-45 absolute for denormals.
 *  - exp / tanh / silu / gelu: relative (C + |a|) u + atol where a is the argument fed to exp
 *    (its rounding becomes relative error |a| u); C per function is given in act_tol() and is
 *    what the sweeps support with margin; atol covers the denormal range.
 *  - LayerNorm / RMSNorm: K u ((mean|x| + |x_j - mean|) rstd |g_j| + |b_j|), K = n/8 + 16: the
 *    fp32 sums of the mean and variance (each <= (n/8 + 8) u relative) and the output rounding. */
#include <float.h>
#include <unistd.h>

#include "kernels/kernels_internal.h"
#include "tessera/kernels.h"
#include "tst.h"
#include "tst_dispatch.h"


static const double U = 1.0 / 16777216.0; /* 2^-24 */
static const int EDGE[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65};
#define NEDGE ((int)(sizeof EDGE / sizeof EDGE[0]))

static int g_nvar;
static const ts__kernel_table *g_var[3];

/* The reference and every variant this CPU runs (those it lacks are said to be skipped). */
static void pick_variants(void) {
  g_var[g_nvar++] = ts__kernels_dispatch.variants[0].table;
  TST_EACH_VARIANT(&ts__kernels_dispatch, i, ts__kernel_table, t) g_var[g_nvar++] = t;
}

/* ---- GEMM tile ------------------------------------------------------------------------- */

/* One tile case for one variant: A [m][lda], B [k][ldb] or [n][ldb], C [m][ldc] with NaN
 * padding between rows (must stay NaN) and guard bytes after the last row. */
static void tile_case(const ts__kernel_table *kt, int m, int n, int k, unsigned flags, float alpha,
                      uint64_t seed) {
  const int tb = (flags & TS_TILE_TRANS_B) != 0, acc = (flags & TS_TILE_ACCUMULATE) != 0;
  const int64_t lda = k + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
  const int64_t brows = tb ? n : k;
  float *A = malloc(sizeof(float) * (size_t)(m * lda + 1));
  float *B = malloc(sizeof(float) * (size_t)(brows * ldb + 1));
  const size_t cn = (size_t)((m - 1) * ldc + n);
  float *C = tst_alloc_guarded(cn), *C0 = malloc(sizeof(float) * cn);
  tst_fill_uniform(A, (size_t)(m * lda + 1), seed, -1.0f, 1.0f);
  tst_fill_uniform(B, (size_t)(brows * ldb + 1), seed + 1, -1.0f, 1.0f);
  tst_poison(C, cn);
  if (acc)
    for (int i = 0; i < m; i++) tst_fill_uniform(C + i * ldc, (size_t)n, seed + 2 + (uint64_t)i, -2.0f, 2.0f);
  memcpy(C0, C, sizeof(float) * cn);
  kt->gemm_tile(m, n, k, alpha, A, lda, B, ldb, C, ldc, flags);
  double worst = 0;
  int bad_pad = 0, wi = 0, wj = 0;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++) {
      double s = 0, sa = 0;
      for (int p = 0; p < k; p++) {
        double a = A[i * lda + p], b = tb ? B[j * ldb + p] : B[p * ldb + j];
        s += a * b, sa += fabs(a * b);
      }
      double c0 = acc ? C0[i * ldc + j] : 0.0;
      double want = alpha * s + c0;
      double tol = (k + 4) * U * (fabs(alpha) * sa + fabs(c0)) + 1e-30;
      double got = C[i * ldc + j], r = fabs(got - want) / tol;
      if (!(r <= worst)) worst = isnan(r) ? INFINITY : r, wi = i, wj = j;
    }
    if (i + 1 < m)
      for (int64_t j = n; j < ldc; j++) bad_pad |= !isnan(C[i * ldc + j]);
  }
  CHECK(worst <= 1.0, "tile %s m=%d n=%d k=%d flags=%u alpha=%g: err/tol %.3g at (%d,%d)",
        ts_isa_name(kt->isa), m, n, k, flags, (double)alpha, worst, wi, wj);
  CHECK(!bad_pad, "tile %s m=%d n=%d k=%d: wrote into the row padding", ts_isa_name(kt->isa), m, n, k);
  CHECK(tst_guard_ok(C, cn), "tile %s m=%d n=%d k=%d: guard bytes", ts_isa_name(kt->isa), m, n, k);
  free(A), free(B), free(C0), ts_free(C);
}

static void test_gemm_tile(void) {
  const int ks[] = {1, 3, 16, 17, 33, 64, 65};
  const float alphas[] = {1.0f, -0.5f, 2.5f};
  uint64_t seed = 100;
  for (int v = 0; v < g_nvar; v++)
    for (unsigned flags = 0; flags < 4; flags++)
      for (int a = 0; a < NEDGE; a++)
        for (int b = 0; b < NEDGE; b++) {
          int k = ks[(a + b + flags) % 7];
          tile_case(g_var[v], EDGE[a], EDGE[b], k, flags, alphas[(a + 2 * b) % 3], seed++);
        }
  /* k past one KC chunk (256), large tiles, k = 0, alpha = 0 */
  const int big[][3] = {{9, 33, 257}, {17, 40, 513}, {64, 64, 256}, {128, 128, 64}, {40, 100, 300}, {3, 5, 0}, {16, 32, 0}};
  for (int v = 0; v < g_nvar; v++)
    for (unsigned flags = 0; flags < 4; flags++) {
      for (size_t c = 0; c < sizeof big / sizeof big[0]; c++)
        tile_case(g_var[v], big[c][0], big[c][1], big[c][2], flags, 0.75f, seed++);
      tile_case(g_var[v], 17, 33, 20, flags, 0.0f, seed++);
    }
}

static void test_gemm_tile_api(void) {
  float a[64] = {0}, b[64] = {0}, c[64];
  for (int i = 0; i < 64; i++) a[i] = (float)(i % 5), b[i] = (float)(i % 3) - 1.0f;
  /* 4x3 times 3x4 via the public entry, NT too: compare to the reference table */
  float r[16];
  for (unsigned f = 0; f < 4; f++) {
    for (int i = 0; i < 16; i++) c[i] = r[i] = 1.0f;
    CHECK_OK(ts_gemm_tile(4, 4, 3, 1.0f, a, 3, b, (f & TS_TILE_TRANS_B) ? 3 : 4, c, 4, f));
    ts__kernels_for(TS_ISA_SCALAR)->gemm_tile(4, 4, 3, 1.0f, a, 3, b, (f & TS_TILE_TRANS_B) ? 3 : 4, r, 4, f);
    CHECK(tst_max_abs_diff(c, r, 16) == 0.0, "ts_gemm_tile flags %u exact on small integers", f);
  }
  CHECK_STATUS(ts_gemm_tile(-1, 4, 3, 1.0f, a, 3, b, 4, c, 4, 0), TS_ERR_INVALID_ARG);
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, a, 2, b, 4, c, 4, 0), "lda=2");
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, a, 3, b, 3, c, 4, 0), "ldb=3");
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, a, 3, b, 2, c, 4, TS_TILE_TRANS_B), "ldb=2");
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, a, 3, b, 4, c, 3, 0), "ldc=3");
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, a, 3, b, 4, c, 4, 8), "flag");
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, NULL, 3, b, 4, c, 4, 0), "A is NULL");
  CHECK_ERR_CONTAINS(ts_gemm_tile(4, 4, 3, 1.0f, a, 3, b, 4, NULL, 4, 0), "C is NULL");
  CHECK_ERR_CONTAINS(ts_gemm_tile((int64_t)1 << 31, 4, 3, 1.0f, a, 3, b, 4, c, 4, 0), "2^30");
  CHECK_OK(ts_gemm_tile(0, 4, 3, 1.0f, NULL, 3, NULL, 4, NULL, 4, 0)); /* empty: nothing touched */
}

/* ---- sgemm ----------------------------------------------------------------------------- */

typedef void (*sgemm_fn)(ts_context *ctx, int variant, ts_trans ta, ts_trans tb, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc);

static void sgemm_case(ts_context *ctx, int use_ref, ts_trans ta, ts_trans tb, int M, int N, int K, float alpha,
                       float beta, uint64_t seed) {
  const int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
  const int64_t arows = ta ? K : M, brows = tb ? N : K;
  float *A = malloc(sizeof(float) * (size_t)(arows * lda + 1)), *B = malloc(sizeof(float) * (size_t)(brows * ldb + 1));
  const size_t cn = (size_t)((M - 1) * ldc + N);
  float *C = tst_alloc_guarded(cn), *C0 = malloc(sizeof(float) * cn);
  tst_fill_uniform(A, (size_t)(arows * lda + 1), seed, -1.0f, 1.0f);
  tst_fill_uniform(B, (size_t)(brows * ldb + 1), seed + 1, -1.0f, 1.0f);
  tst_fill_uniform(C, cn, seed + 2, -1.0f, 1.0f);
  if (beta == 0.0f) tst_poison(C, cn); /* must be overwritten, not scaled */
  memcpy(C0, C, sizeof(float) * cn);
  if (use_ref)
    ts__sgemm_ref(ts_context_threads(ctx), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    CHECK_OK(ts_sgemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
  double worst = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0, sa = 0;
      for (int p = 0; p < K; p++) {
        double a = ta ? A[p * lda + i] : A[i * lda + p], b = tb ? B[j * ldb + p] : B[p * ldb + j];
        s += a * b, sa += fabs(a * b);
      }
      double c0 = beta == 0.0f ? 0.0 : (double)beta * C0[i * ldc + j];
      double want = alpha * s + c0, tol = (K + 4) * U * (fabs(alpha) * sa + fabs(c0)) + 1e-30;
      double r = fabs(C[i * ldc + j] - want) / tol;
      if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
    }
  CHECK(worst <= 1.0, "sgemm %s ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: err/tol %.3g", use_ref ? "ref" : "api",
        ta, tb, M, N, K, (double)alpha, (double)beta, worst);
  CHECK(tst_guard_ok(C, cn), "sgemm guard M=%d N=%d K=%d", M, N, K);
  free(A), free(B), free(C0), ts_free(C);
}

static void test_sgemm(void) {
  ts_context *ctx1, *ctx2;
  CHECK_OK(ts_context_create(&ctx1, 1));
  CHECK_OK(ts_context_create(&ctx2, 2));
  const int shapes[][3] = {{1, 1, 1}, {7, 3, 17}, {33, 65, 16}, {64, 64, 64}, {100, 37, 129}, {17, 1, 300}, {5, 8, 0}};
  const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.0f, 0.25f}, {0.0f, 2.0f}, {0.0f, 0.0f}};
  uint64_t seed = 7000;
  for (int use_ref = 0; use_ref < 2; use_ref++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 4; t++)
        for (size_t c = 0; c < sizeof ab / sizeof ab[0]; c++)
          sgemm_case((s + c) % 2 ? ctx2 : ctx1, use_ref, (ts_trans)(t & 1), (ts_trans)(t >> 1), shapes[s][0], shapes[s][1],
                     shapes[s][2], ab[c][0], ab[c][1], seed++);
  sgemm_case(NULL, 0, TS_NO_TRANS, TS_TRANS, 48, 40, 24, 1.0f, 0.0f, seed++); /* NULL ctx: default threads */

  float a[16] = {0}, b[16] = {0}, c[16] = {0};
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, -1, 2, 2, 1, a, 2, b, 2, 0, c, 2), "negative size");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, 3, 2, 4, 1, a, 3, b, 2, 0, c, 2), "lda=3");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_TRANS, TS_NO_TRANS, 3, 2, 4, 1, a, 2, b, 2, 0, c, 2), "lda=2");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_TRANS, 3, 2, 4, 1, a, 4, b, 3, 0, c, 2), "ldb=3");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, 3, 2, 4, 1, a, 4, b, 1, 0, c, 2), "ldb=1");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, 3, 2, 4, 1, a, 4, b, 2, 0, c, 1), "ldc=1");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, (ts_trans)5, TS_NO_TRANS, 3, 2, 4, 1, a, 4, b, 2, 0, c, 2), "transA=5");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, 3, 2, 4, 1, NULL, 4, b, 2, 0, c, 2), "A is NULL");
  CHECK_ERR_CONTAINS(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, 3, 2, 4, 1, a, 4, b, 2, 0, NULL, 2), "C is NULL");
  CHECK_OK(ts_sgemm(ctx1, TS_NO_TRANS, TS_NO_TRANS, 0, 2, 4, 1, NULL, 4, NULL, 2, 0, NULL, 2));
  ts_context_destroy(ctx1);
  ts_context_destroy(ctx2);
}

/* ---- softmax --------------------------------------------------------------------------- */

static void test_softmax(void) {
  const int ns[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 100, 1000};
  const int rows = 4;
  for (int v = 0; v < g_nvar; v++)
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++)
      for (int inplace = 0; inplace < 2; inplace++) {
        const int n = ns[t];
        const int64_t ldx = n + 3, ldy = inplace ? ldx : n + 5;
        const size_t xn = (size_t)((rows - 1) * ldx + n), yn = (size_t)((rows - 1) * ldy + n);
        float *x = tst_alloc_guarded(xn), *x0 = malloc(sizeof(float) * xn), *ref = malloc(sizeof(float) * xn);
        float *y = inplace ? x : tst_alloc_guarded(yn);
        tst_fill_uniform(x, xn, 500 + (uint64_t)n, -6.0f, 6.0f);
        for (int j = 0; j < n; j++) x[ldx + j] = -INFINITY;                   /* row 1: fully masked */
        for (int j = 0; j < n; j += 3) x[2 * ldx + j] = -INFINITY;            /* row 2: partly masked */
        if (n > 1) x[3 * ldx] = 60.0f, x[3 * ldx + 1] = -60.0f;               /* row 3: wide range */
        memcpy(x0, x, sizeof(float) * xn);
        if (!inplace) tst_poison(y, yn);
        ts__kernels_for(TS_ISA_SCALAR)->softmax_rows(rows, n, x0, ldx, ref, ldx);
        g_var[v]->softmax_rows(rows, n, x, ldx, y, ldy);
        double worst = 0, worst_sum = 0;
        int masked_ok = 1, zeros_ok = 1;
        for (int r = 0; r < rows; r++) {
          double mx = -INFINITY, sum = 0, maxd = 0;
          for (int j = 0; j < n; j++) mx = fmax(mx, x0[r * ldx + j]);
          const int masked = mx == -INFINITY; /* row 1, and row 2 when n == 1 */
          for (int j = 0; j < n; j++) {
            double got = y[r * ldy + j], want = ref[r * ldx + j];
            if (masked) { masked_ok &= got == 0.0; continue; }
            if (x0[r * ldx + j] == -INFINITY) zeros_ok &= got == 0.0;
            double d = fabs(x0[r * ldx + j] - mx);
            if (isfinite(d) && d > maxd) maxd = d;
            double tol = (16.0 + n / 8.0 + (isfinite(d) ? d : 0.0)) * U * fabs(want) + 2e-45;
            double q = fabs(got - want) / tol;
            if (!(q <= worst)) worst = isnan(q) ? INFINITY : q;
            sum += got;
          }
          if (!masked) {
            double q = fabs(sum - 1.0) / ((32.0 + n / 4.0 + maxd) * U);
            if (!(q <= worst_sum)) worst_sum = isnan(q) ? INFINITY : q;
          }
        }
        CHECK(worst <= 1.0, "softmax %s n=%d inplace=%d: err/tol %.3g", ts_isa_name(g_var[v]->isa), n, inplace, worst);
        CHECK(worst_sum <= 1.0, "softmax %s n=%d: row sums off by %.3g tol", ts_isa_name(g_var[v]->isa), n, worst_sum);
        CHECK(masked_ok, "softmax %s n=%d: fully masked row must be zeros", ts_isa_name(g_var[v]->isa), n);
        CHECK(zeros_ok, "softmax %s n=%d: -inf entries must give exactly 0", ts_isa_name(g_var[v]->isa), n);
        CHECK(tst_guard_ok(x, xn) && (inplace || tst_guard_ok(y, yn)), "softmax guard n=%d", n);
        if (!inplace) ts_free(y);
        ts_free(x), free(x0), free(ref);
      }
  /* NaN makes its row NaN, even when everything else is -inf; so does +inf */
  for (int v = 0; v < g_nvar; v++) {
    float x[9] = {1.0f, NAN, 2.0f, -INFINITY, NAN, -INFINITY, 1.0f, INFINITY, -INFINITY}, y[9];
    g_var[v]->softmax_rows(3, 3, x, 3, y, 3);
    int all_nan = 1;
    for (int j = 0; j < 9; j++) all_nan &= isnan(y[j]) != 0;
    CHECK(all_nan, "softmax %s: NaN rows", ts_isa_name(g_var[v]->isa));
  }
  float x[8] = {0};
  CHECK_ERR_CONTAINS(ts_softmax_rows(2, 4, x, 3, x, 3), "ldx=3");
  CHECK_ERR_CONTAINS(ts_softmax_rows(1, 3, x, 3, x + 1, 2), "ldy=2");
  CHECK_ERR_CONTAINS(ts_softmax_rows(2, 2, x, 2, x, 3), "in place");
  CHECK_ERR_CONTAINS(ts_softmax_rows(-1, 2, x, 2, x, 2), "negative");
  CHECK_ERR_CONTAINS(ts_softmax_rows(1, 2, NULL, 2, x, 2), "x is NULL");
  CHECK_OK(ts_softmax_rows(0, 2, NULL, 2, NULL, 2));
}

/* ---- exp and activations ---------------------------------------------------------------- */

/* Tolerance (C + g(x)) u |y| + 3e-45 of each function (see top); act == TS_ACT_COUNT is exp.
 * g(x) is the relative error that rounding the exp argument a(x) brings: none for exp and SiLU
 * (a = x, exact), about 3 |a| for tanh-GELU (a = 2u(x) takes three roundings), about 1.5 x^2 for
 * erf-GELU (a = -x^2/2 + P, with z = -x/sqrt(2) rounded once). C is the measured worst error
 * of each function (TS_TEST_VERBOSE=1 prints it) rounded up with margin. The absolute part
 * (2 + |x|) 2^-149 covers outputs in the denormal range. */
static double act_tol(int act, double x, double y) {
  double c = 0, g = 0;
  switch (act) {
    case TS_ACT_COUNT: c = 4; break;
    case TS_ACT_SILU: c = 8; break;
    case TS_ACT_GELU_TANH: c = 10, g = 3 * fabs(1.5957691216057308 * x * (1 + 0.044715 * x * x)); break;
    case TS_ACT_GELU_ERF: c = 12, g = 0.5 * x * x; break;
    case TS_ACT_TANH: c = 6; break;
    default: break; /* relu, none: exact */
  }
  double t = (c + g) * U * fabs(y);
  if (!(t >= 0)) t = 0; /* g is inf at x = +-inf, where y is 0 or inf */
  /* denormal results: an exp factor in the denormal range carries an absolute error of about
   * 2^-150 that the product with x scales */
  return t + (2.0 + fmin(fabs(x), 1e4)) * 0x1p-149;
}

/* Dense sweep plus special values; act == TS_ACT_COUNT means ts_vexp. */
static void sweep_case(const ts__kernel_table *kt, int act, double lo, double hi, double step) {
  size_t n = (size_t)((hi - lo) / step) + 1;
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e-30f, -1e-30f, 88.0f, -88.0f, 100.0f, -100.0f,
                           1e4f, -1e4f, 1e20f, -1e20f, FLT_MAX, -FLT_MAX, 0.625f, -0.625f, 0.62499994f, 3e-39f};
  const size_t ns = sizeof special / sizeof special[0];
  float *x = malloc(sizeof(float) * (n + ns)), *y = tst_alloc_guarded(n + ns), *r = malloc(sizeof(float) * (n + ns));
  for (size_t i = 0; i < n; i++) x[i] = (float)(lo + step * (double)i);
  memcpy(x + n, special, sizeof special);
  n += ns;
  tst_poison(y, n);
  const ts__kernel_table *ref = ts__kernels_for(TS_ISA_SCALAR);
  if (act == TS_ACT_COUNT) {
    kt->vexp((int64_t)n, x, y), ref->vexp((int64_t)n, x, r);
  } else {
    kt->act_rows((ts_act)act, 1, (int64_t)n, x, (int64_t)n, y, (int64_t)n);
    ref->act_rows((ts_act)act, 1, (int64_t)n, x, (int64_t)n, r, (int64_t)n);
  }
  double worst = 0, at = 0;
  for (size_t i = 0; i < n; i++) {
    double q;
    if (isnan(r[i]))
      q = isnan(y[i]) ? 0 : INFINITY;
    else if (isinf(r[i]))
      q = y[i] == r[i] ? 0 : INFINITY;
    else
      q = fabs((double)y[i] - r[i]) / act_tol(act, x[i], r[i]);
    if (!(q <= worst)) worst = isnan(q) ? INFINITY : q, at = x[i];
  }
  const char *name = act == TS_ACT_COUNT ? "exp" : ts_act_name((ts_act)act);
  CHECK(worst <= 1.0, "%s %s over [%g, %g]: err/tol %.3g at x=%.9g", ts_isa_name(kt->isa), name, lo, hi, worst, at);
  CHECK(tst_guard_ok(y, n), "%s %s guard", ts_isa_name(kt->isa), name);
  if (getenv("TS_TEST_VERBOSE")) printf("%-7s %-10s worst err/tol %.3f at x=%.9g\n", ts_isa_name(kt->isa), name, worst, at);
  free(x), free(r), ts_free(y);
}

static void test_activations(void) {
  for (int v = 0; v < g_nvar; v++) {
    sweep_case(g_var[v], TS_ACT_COUNT, -110.0, 89.0, 1.0 / 512); /* exp, incl. denormal results */
    sweep_case(g_var[v], TS_ACT_COUNT, -1.0, 1.0, 1.0 / 65536);
    for (int a = TS_ACT_RELU; a < TS_ACT_COUNT; a++) {
      sweep_case(g_var[v], a, -20.0, 20.0, 1.0 / 1024);
      sweep_case(g_var[v], a, -1.0, 1.0, 1.0 / 65536);
    }
    /* strided rows, in place and out of place, every tail length */
    for (int a = TS_ACT_NONE; a < TS_ACT_COUNT; a++)
      for (int n = 1; n <= 40; n += 3) {
        const int rows = 3;
        const int64_t ldx = n + 2, ldy = n + 5;
        const size_t xn = (size_t)((rows - 1) * ldx + n), yn = (size_t)((rows - 1) * ldy + n);
        float *x = tst_alloc_guarded(xn), *y = tst_alloc_guarded(yn), *r = malloc(sizeof(float) * yn);
        tst_fill_uniform(x, xn, 900 + (uint64_t)n, -5.0f, 5.0f);
        tst_poison(y, yn);
        memcpy(r, y, sizeof(float) * yn);
        ts__kernels_for(TS_ISA_SCALAR)->act_rows((ts_act)a, rows, n, x, ldx, r, ldy);
        g_var[v]->act_rows((ts_act)a, rows, n, x, ldx, y, ldy);
        int ok = 1;
        for (size_t i = 0; i < yn; i++) {
          if (isnan(r[i])) { ok &= isnan(y[i]) != 0; continue; } /* padding stays NaN */
          ok &= fabs((double)y[i] - r[i]) <= act_tol(a, 5.0, r[i]);
        }
        g_var[v]->act_rows((ts_act)a, rows, n, x, ldx, x, ldx); /* in place */
        for (int i = 0; i < rows; i++)
          for (int j = 0; j < n; j++) ok &= fabs((double)x[i * ldx + j] - r[i * ldy + j]) <= act_tol(a, 5.0, r[i * ldy + j]);
        CHECK(ok && tst_guard_ok(x, xn) && tst_guard_ok(y, yn), "%s %s strided n=%d", ts_isa_name(g_var[v]->isa),
              ts_act_name((ts_act)a), n);
        ts_free(x), ts_free(y), free(r);
      }
  }
  ts_act act;
  CHECK_OK(ts_act_parse("gelu_erf", &act));
  CHECK(act == TS_ACT_GELU_ERF && strcmp(ts_act_name(act), "gelu_erf") == 0, "act names");
  CHECK_STATUS(ts_act_parse("swish", &act), TS_ERR_NOT_FOUND);
  float x[4] = {0};
  CHECK_ERR_CONTAINS(ts_activation((ts_act)42, 1, 4, x, 4, x, 4), "unknown activation");
  CHECK_ERR_CONTAINS(ts_activation(TS_ACT_RELU, 1, 4, x, 3, x, 3), "ldx=3");
  CHECK_ERR_CONTAINS(ts_vexp(-2, x, x), "negative");
  CHECK_OK(ts_vexp(4, x, x));
  CHECK(x[0] == 1.0f && x[3] == 1.0f, "exp(0) = 1");
}

/* ---- LayerNorm / RMSNorm ---------------------------------------------------------------- */

static void test_norms(void) {
  const int ns[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 100, 1000};
  const int rows = 3;
  for (int v = 0; v < g_nvar; v++)
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++)
      for (int mode = 0; mode < 4; mode++) { /* bit 0: offset data + in place; bit 1: NULL gamma/beta */
        const int n = ns[t], inplace = mode & 1, noaff = (mode & 2) != 0;
        const int64_t ldx = n + 1, ldy = inplace ? ldx : n + 6;
        const size_t xn = (size_t)((rows - 1) * ldx + n), yn = (size_t)((rows - 1) * ldy + n);
        float *x = tst_alloc_guarded(xn), *x0 = malloc(sizeof(float) * xn), *g = malloc(sizeof(float) * (size_t)n),
              *b = malloc(sizeof(float) * (size_t)n), *ref = malloc(sizeof(float) * xn);
        tst_fill_uniform(x, xn, 3000 + (uint64_t)n, -2.0f, 3.0f);
        if (inplace)
          for (size_t i = 0; i < xn; i++) x[i] += 1000.0f; /* large common offset */
        tst_fill_uniform(g, (size_t)n, 17, 0.5f, 1.5f);
        tst_fill_uniform(b, (size_t)n, 18, -1.0f, 1.0f);
        const float *gg = noaff ? NULL : g, *bb = noaff ? NULL : b;
        memcpy(x0, x, sizeof(float) * xn);
        for (int which = 0; which < 2; which++) { /* 0: LayerNorm, 1: RMSNorm */
          memcpy(x, x0, sizeof(float) * xn);
          float *y = inplace ? x : tst_alloc_guarded(yn);
          if (!inplace) tst_poison(y, yn);
          const ts__kernel_table *rk = ts__kernels_for(TS_ISA_SCALAR);
          if (which == 0) {
            rk->layernorm_rows(rows, n, x0, ldx, gg, bb, 1e-5f, ref, ldx);
            g_var[v]->layernorm_rows(rows, n, x, ldx, gg, bb, 1e-5f, y, ldy);
          } else {
            rk->rmsnorm_rows(rows, n, x0, ldx, gg, 1e-5f, ref, ldx);
            g_var[v]->rmsnorm_rows(rows, n, x, ldx, gg, 1e-5f, y, ldy);
          }
          double worst = 0;
          const double K = n / 8.0 + 16.0;
          for (int r = 0; r < rows; r++) {
            const float *xr = x0 + r * ldx;
            double mean = 0, mabs = 0, var = 0, ms = 0;
            for (int j = 0; j < n; j++) mean += xr[j], mabs += fabs(xr[j]), ms += (double)xr[j] * xr[j];
            mean /= n, mabs /= n, ms /= n;
            for (int j = 0; j < n; j++) var += (xr[j] - mean) * (xr[j] - mean);
            var /= n;
            for (int j = 0; j < n; j++) {
              double gj = gg ? fabs(gg[j]) : 1.0, bj = bb ? fabs(bb[j]) : 0.0, tol;
              if (which == 0)
                tol = K * U * ((mabs + fabs(xr[j] - mean)) / sqrt(var + 1e-5) * gj + bj) + 1e-30;
              else
                tol = K * U * fabs(xr[j]) / sqrt(ms + 1e-5) * gj + 1e-30;
              double q = fabs((double)y[r * ldy + j] - ref[r * ldx + j]) / tol;
              if (!(q <= worst)) worst = isnan(q) ? INFINITY : q;
            }
          }
          CHECK(worst <= 1.0, "%s %s n=%d mode=%d: err/tol %.3g", ts_isa_name(g_var[v]->isa), which ? "rmsnorm" : "layernorm",
                n, mode, worst);
          CHECK(tst_guard_ok(x, xn) && (inplace || tst_guard_ok(y, yn)), "norm guard n=%d", n);
          if (!inplace) ts_free(y);
        }
        ts_free(x), free(x0), free(g), free(b), free(ref);
      }
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK_ERR_CONTAINS(ts_layernorm_rows(1, 8, x, 8, NULL, NULL, -1.0f, x, 8), "eps");
  CHECK_ERR_CONTAINS(ts_rmsnorm_rows(1, 8, x, 8, NULL, NAN, x, 8), "eps");
  CHECK_ERR_CONTAINS(ts_layernorm_rows(1, 8, x, 8, NULL, NULL, 1e-5f, NULL, 8), "y is NULL");
  CHECK_OK(ts_layernorm_rows(1, 8, x, 8, NULL, NULL, 0.0f, x, 8));
  double s = 0;
  for (int j = 0; j < 8; j++) s += x[j];
  CHECK(fabs(s) < 1e-5 && fabs(x[7] - 1.5275252f) < 1e-5, "layernorm values (%g, %g)", s, (double)x[7]);
}

/* ---- dispatch --------------------------------------------------------------------------- */

/* Re-runs this program with an environment setting and the --isa-only flag; returns the ISA
 * level the child resolved (its exit code), or -1. */
static int child_isa(const char *envset) {
  char *args[] = {(char *)"--isa-only", NULL};
  return tst_run_capped(envset, args);
}

static void test_dispatch(void) {
  CHECK(ts_kernels_isa() == ts_isa_active(), "table follows ts_isa_active");
  CHECK(ts__kernels() == ts__kernels_for(ts_isa_active()), "same table");
  ts_isa sup = ts_isa_supported();
  int r = child_isa("TESSERA_REF=1");
  CHECK(r == TS_ISA_SCALAR, "TESSERA_REF=1 -> scalar tables (child said %d)", r);
  r = child_isa("TESSERA_ISA=avx2");
  CHECK(r == (sup < TS_ISA_AVX2 ? (int)sup : TS_ISA_AVX2), "TESSERA_ISA=avx2 caps (child said %d)", r);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--isa-only") == 0) {
    /* child of test_dispatch: also exercise sgemm through whichever path was resolved */
    float a[4] = {1, 2, 3, 4}, c[4];
    if (ts_sgemm(NULL, TS_NO_TRANS, TS_NO_TRANS, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2) != TS_OK || c[0] != 7.0f || c[3] != 22.0f)
      return 100;
    return (int)ts_kernels_isa();
  }
  ts_isa_active(); /* detect the CPU before asking what it supports */
  pick_variants();
  test_gemm_tile();
  test_gemm_tile_api();
  test_sgemm();
  test_softmax();
  test_activations();
  test_norms();
  test_dispatch();
  return tst_finish();
}
