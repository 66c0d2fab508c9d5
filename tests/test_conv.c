/* Convolution algorithms against a double-precision oracle over a matrix of shapes (odd sizes,
 * strides 1/2, symmetric and asymmetric padding, dilation, groups, 1x1 .. 7x7 and 1x7/7x1 kernels,
 * channel counts off the vector width, batch 1 and 2, bias and fused ReLU), plus the error paths.
 *
 * Tolerances (u = 2^-24, L = C/groups * R * S + 1 terms per output, A = sum |x||w| + |bias|):
 *   reference                         |y - y*| <= 2 u A           (double sum, one final rounding)
 *   direct, im2col, kn2row, implicit,
 *   depthwise                         |y - y*| <= (L + 2) u A     (worst-case fp32 summation bound
 *                                                                  gamma_L for any order/blocking)
 *   winograd_f2, winograd_f4, fft     max|y - y*| <= (c + L) u max(A)   norm-wise: the transforms mix
 *                                     all inputs of a tile, so one output's error scales with the
 *                                     tile's magnitudes, not with its own A. L u max(A) covers the
 *                                     summation over channels in the GEMMs; c u max(A) the rounding in
 *                                     the transforms, amplified by their entries. Measured worst
 *                                     max|err| / (u max A) over this matrix (printed): F(2,3) 1.9,
 *                                     F(4,3) 12.6 (AVX-512, every schedule; 1.8 / 11.3 with the
 *                                     scalar transforms; points 0, 1, -1, 1/2, -2; 22 with
 *                                     0, +-1, +-2), FFT 2.3 (FFTW's error grows like log2(F) u;
 *                                     F <= 32 here); for comparison direct 3.2, im2col 2.4. c is ~4x
 *                                     the measurement: F(2,3) 8, F(4,3) 48, fft 8. (2026-12-07, AMD
 *                                     EPYC, with the wide-row case 24 in the matrix: F(4,3) 14.7 with
 *                                     the AVX2 channel-lane kernels, 17.8 scalar, F(2,3) 1.8; still
 *                                     under a third of c.) So F(2,3) is about
 *                                     as accurate as direct summation and F(4,3) ~4-7x less (~1e-6
 *                                     relative to max A for fp32, fine for inference).
 * Every kernel level of the room that this CPU runs (ts__conv_dispatch: scalar, avx2, avx512; a
 * level it lacks is reported as skipped) is compared against the oracle in this process, plans
 * made with the level's table through the internal options (ts__conv_plan_opts.kern), each with
 * its default Winograd schedule and then every schedule the level has forced (AVX-512: fused,
 * staged, clane-private, clane-shared; AVX2: clane-private, clane-shared). The test then re-runs
 * itself under TESSERA_ISA=avx2 and =scalar: the room must resolve the capped level, its plans
 * run it, and the default plans there pass the same checks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conv/conv_internal.h"
#include "tessera/conv.h"
#include "tst.h"
#include "tst_dispatch.h"

typedef struct tcase {
  int n, c, h, w, k, r, s, sh, sw, pt, pb, pl, pr, dh, dw, g, relu, bias;
} tcase;

static const tcase cases[] = {
    /* n  c   h   w   k  r  s sh sw pt pb pl pr dh dw  g relu bias */
    {1, 3, 1, 1, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0},       /* 1x1 image */
    {2, 3, 5, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},      /* batch 2, odd sizes, relu+bias */
    {1, 17, 13, 13, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 1},   /* stride 2 */
    {1, 33, 14, 14, 16, 3, 3, 1, 1, 0, 2, 1, 0, 1, 1, 1, 0, 0},   /* asymmetric padding */
    {2, 16, 7, 7, 17, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1},     /* 5x5 */
    {1, 8, 28, 28, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, 0, 1},     /* 7x7 stride 2 (stem) */
    {1, 17, 13, 14, 9, 1, 7, 1, 1, 0, 0, 3, 3, 1, 1, 1, 1, 1},    /* 1x7 */
    {1, 17, 14, 13, 9, 7, 1, 1, 1, 3, 3, 0, 0, 1, 1, 1, 0, 1},    /* 7x1 */
    {1, 16, 13, 13, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 0, 1},   /* dilation 2 */
    {1, 5, 13, 13, 7, 3, 3, 1, 1, 1, 2, 2, 1, 1, 2, 1, 1, 0},     /* dilation 1x2, asymmetric pad */
    {2, 8, 14, 14, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1},     /* groups 2 */
    {1, 16, 7, 7, 20, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 4, 0, 1},     /* groups 4, stride 2x1 */
    {1, 33, 28, 28, 17, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 1},   /* 1x1 */
    {2, 17, 14, 14, 33, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 1},   /* 1x1 stride 2 */
    {3, 34, 9, 11, 20, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, 1, 1},   /* 1x1 batch 3, groups 2: batch-merged GEMM */
    {1, 32, 13, 13, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32, 1, 1},  /* depthwise */
    {2, 17, 14, 14, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 17, 0, 1},  /* depthwise stride 2 */
    {1, 16, 28, 28, 16, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 16, 0, 0},  /* depthwise 5x5 */
    {1, 3, 5, 5, 4, 3, 3, 1, 1, 2, 0, 0, 2, 1, 1, 1, 1, 0},       /* corner padding only */
    {1, 64, 14, 14, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},   /* wider reduction */
    {1, 3, 48, 48, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},     /* > 512 Winograd tiles */
    {1, 4, 30, 40, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* several FFT tiles */
    {1, 33, 9, 9, 5, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1},      /* direct: several channel blocks */
    {1, 24, 15, 15, 24, 3, 3, 2, 2, 2, 1, 2, 1, 2, 2, 24, 1, 1},  /* depthwise, dilated, strided */
    {1, 2, 6, 150, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},    /* wide rows: 33..47-tile Winograd chunks */
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static ts_conv_desc desc_of(const tcase *t) {
  ts_conv_desc d = ts_conv_desc_make(t->n, t->c, t->h, t->w, t->k, t->r, t->s);
  d.stride_h = t->sh, d.stride_w = t->sw;
  d.pad_top = t->pt, d.pad_bottom = t->pb, d.pad_left = t->pl, d.pad_right = t->pr;
  d.dilation_h = t->dh, d.dilation_w = t->dw;
  d.groups = t->g;
  d.relu = t->relu;
  return d;
}

/* Oracle: y* in double and A = sum |x||w| + |bias| per output. */
static void oracle(const ts_conv_desc *d, int P, int Q, const float *x, const float *w, const float *b, double *y,
                   double *A) {
  const int cg = d->c / d->groups, kg = d->k / d->groups;
  for (int n = 0; n < d->n; n++)
    for (int k = 0; k < d->k; k++)
      for (int p = 0; p < P; p++)
        for (int q = 0; q < Q; q++) {
          double acc = b ? b[k] : 0, abs = b ? fabs(b[k]) : 0;
          for (int c = 0; c < cg; c++)
            for (int r = 0; r < d->r; r++)
              for (int s = 0; s < d->s; s++) {
                const int ih = p * d->stride_h - d->pad_top + r * d->dilation_h;
                const int iw = q * d->stride_w - d->pad_left + s * d->dilation_w;
                if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w) continue;
                const double xv = x[(((size_t)n * d->c + (k / kg) * cg + c) * d->h + ih) * d->w + iw];
                const double wv = w[(((size_t)k * cg + c) * d->r + r) * d->s + s];
                acc += xv * wv, abs += fabs(xv * wv);
              }
          const size_t i = (((size_t)n * d->k + k) * P + p) * Q + q;
          y[i] = d->relu && acc < 0 ? 0 : acc;
          A[i] = abs;
        }
}

/* Which algorithms must accept a descriptor (independent of the library's own checks). */
static int expect_supported(const ts_conv_desc *d, ts_conv_algo a) {
  switch (a) {
    case TS_CONV_KN2ROW:
    case TS_CONV_FFT: return d->stride_h == 1 && d->stride_w == 1;
    case TS_CONV_WINOGRAD_F2:
    case TS_CONV_WINOGRAD_F4:
      return d->r == 3 && d->s == 3 && d->stride_h == 1 && d->stride_w == 1 && d->dilation_h == 1 && d->dilation_w == 1;
    case TS_CONV_DEPTHWISE: return d->groups == d->c && d->k == d->c;
    default: return 1;
  }
}

static const double norm_c[TS_CONV_ALGO_COUNT] = {[TS_CONV_WINOGRAD_F2] = 8, [TS_CONV_WINOGRAD_F4] = 48, [TS_CONV_FFT] = 8};
static double worst_ratio[TS_CONV_ALGO_COUNT]; /* measured max|err| / (u max A), per algorithm */

/* One case: data and oracle once, then every algorithm in `algos` (bit mask), its plans made with
 * po (NULL: the defaults; else a kernel level and maybe a forced Winograd schedule, named in the
 * messages). */
static void run_case(const tcase *t, int ci, unsigned algos, ts_context *ctx, const ts__conv_plan_opts *po) {
  const ts_conv_desc d = desc_of(t);
  int P = 0, Q = 0;
  CHECK_OK(ts_conv_output_dims(&d, &P, &Q));
  const size_t nx = (size_t)d.n * d.c * d.h * d.w, nw = (size_t)d.k * (d.c / d.groups) * d.r * d.s,
               ny = (size_t)d.n * d.k * P * Q;
  float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *b = malloc(d.k * sizeof(float));
  float *y = tst_alloc_guarded(ny);
  double *yr = malloc(ny * sizeof(double)), *A = malloc(ny * sizeof(double));
  tst_fill_uniform(x, nx, 1000 + ci, -1, 1);
  tst_fill_uniform(w, nw, 2000 + ci, -1, 1);
  tst_fill_uniform(b, d.k, 3000 + ci, -1, 1);
  oracle(&d, P, Q, x, w, t->bias ? b : NULL, yr, A);
  double maxA = 0;
  for (size_t i = 0; i < ny; i++) maxA = fmax(maxA, A[i]);
  const double u = ldexp(1.0, -24), L = (double)(d.c / d.groups) * d.r * d.s + 1;
  for (int ai = 0; ai < TS_CONV_ALGO_COUNT; ai++) {
    if (!(algos >> ai & 1u)) continue;
    const ts_conv_algo algo = (ts_conv_algo)ai;
    char tagged[96];
    snprintf(tagged, sizeof tagged, "%s (%s, %s)", ts_conv_algo_name(algo),
             po && po->kern ? ts_isa_name(po->kern->isa) : "active", po ? ts__conv_wino_schedule_name(po->wino_schedule) : "");
    const char *an = po ? tagged : ts_conv_algo_name(algo);
    ts_conv_plan *pl = NULL;
    if (!expect_supported(&d, algo)) {
      if (po) continue; /* the rejection is checked by the default run */
      CHECK_STATUS(ts_conv_supported(&d, algo), TS_ERR_UNSUPPORTED);
      CHECK_STATUS(ts_conv_plan_create(&pl, ctx, &d, algo), TS_ERR_UNSUPPORTED);
      CHECK(strstr(ts_last_error(), an) == ts_last_error(), "case %d: error should start with '%s': %s", ci, an,
            ts_last_error());
      CHECK(pl == NULL, "case %d %s: plan left set on failure", ci, an);
      continue;
    }
    CHECK_OK(ts_conv_supported(&d, algo));
    CHECK_OK(ts__conv_plan_create_opts(&pl, ctx, &d, algo, po));
    if (!pl) continue;
    CHECK_OK(ts_conv_plan_set_weights(pl, w, t->bias ? b : NULL));
    const size_t wsz = ts_conv_plan_workspace_size(pl), wsf = (wsz + sizeof(float) - 1) / sizeof(float);
    float *ws = wsz ? tst_alloc_guarded(wsf) : NULL;
    for (int rep = 0; rep < 2; rep++) { /* twice: a plan executes many times */
      tst_poison(y, ny);
      if (ws) tst_poison(ws, wsf); /* garbage workspace must not leak into the result */
      CHECK_OK(ts_conv_execute(pl, x, y, ws));
      CHECK(tst_guard_ok(y, ny), "case %d %s: wrote past the output", ci, an);
      CHECK(!ws || tst_guard_ok(ws, wsf), "case %d %s: wrote past the workspace (%zu bytes)", ci, an, wsz);
      double maxerr = 0;
      size_t bad = ny;
      for (size_t i = 0; i < ny; i++) {
        const double e = fabs((double)y[i] - yr[i]);
        const double tol = algo == TS_CONV_REFERENCE ? 2 * u * A[i] + 1e-30
                           : norm_c[algo] > 0        ? (norm_c[algo] + L) * u * maxA
                                                     : (L + 2) * u * A[i] + 1e-30;
        if (!(e <= tol) && bad == ny) bad = i;
        if (e > maxerr || e != e) maxerr = e;
      }
      if (maxA > 0 && maxerr / (u * maxA) > worst_ratio[algo]) worst_ratio[algo] = maxerr / (u * maxA);
      if (getenv("CONV_DEBUG") && rep == 0)
        fprintf(stderr, "case %2d %-12s L = %5.0f  max|err| = %.3g u max(A)\n", ci, an, L, maxerr / (u * maxA));
      CHECK(bad == ny, "case %d %s: output %zu = %.9g, expected %.9g (A = %.3g, L = %.0f; max err %.3g)", ci, an,
            bad, bad < ny ? y[bad] : 0.0f, bad < ny ? yr[bad] : 0.0, bad < ny ? A[bad] : 0.0, L, maxerr);
    }
    ts_free(ws);
    ts_conv_plan_destroy(pl);
  }
  free(x), free(w), free(b), free(yr), free(A);
  ts_free(y);
}

static void test_api_errors(ts_context *ctx) {
  ts_conv_algo a;
  for (int i = 0; i < TS_CONV_ALGO_COUNT; i++) {
    CHECK_OK(ts_conv_algo_parse(ts_conv_algo_name((ts_conv_algo)i), &a));
    CHECK(a == (ts_conv_algo)i, "round trip of %s", ts_conv_algo_name((ts_conv_algo)i));
  }
  CHECK_OK(ts_conv_algo_parse("winograd", &a));
  CHECK(a == TS_CONV_WINOGRAD_F4, "winograd alias");
  CHECK_STATUS(ts_conv_algo_parse("winogrand", &a), TS_ERR_NOT_FOUND);
  /* the internal Winograd schedule option: names round trip, bad values are refused */
  for (int s = 0; s < TS__WINO_SCHED_COUNT; s++) {
    int got = -1;
    CHECK_OK(ts__conv_wino_schedule_parse(ts__conv_wino_schedule_name(s), &got));
    CHECK(got == s, "Winograd schedule %s round trip", ts__conv_wino_schedule_name(s));
  }
  int sched;
  CHECK_ERR_CONTAINS(ts__conv_wino_schedule_parse("tiles", &sched), "unknown Winograd schedule 'tiles'");
  ts_conv_plan *bad = NULL;
  const ts_conv_desc w3 = ts_conv_desc_make(1, 8, 10, 10, 8, 3, 3);
  const ts__conv_plan_opts out_of_range = {.wino_schedule = TS__WINO_SCHED_COUNT};
  CHECK_STATUS(ts__conv_plan_create_opts(&bad, ctx, &w3, TS_CONV_WINOGRAD_F4, &out_of_range), TS_ERR_INVALID_ARG);
  CHECK(bad == NULL, "no plan for a bad option");

  ts_conv_desc d = ts_conv_desc_make(1, 8, 10, 10, 8, 5, 5);
  CHECK_ERR_CONTAINS(ts_conv_supported(&d, TS_CONV_WINOGRAD_F2),
                     "winograd_f2: needs a 3x3 kernel with stride 1 and dilation 1, got 5x5");
  d = ts_conv_desc_make(1, 8, 10, 10, 8, 3, 3);
  ts_conv_desc_set_geometry(&d, 2, 1, 1);
  CHECK_ERR_CONTAINS(ts_conv_supported(&d, TS_CONV_KN2ROW), "kn2row: needs stride 1, got stride 2x2");
  CHECK_ERR_CONTAINS(ts_conv_supported(&d, TS_CONV_FFT), "fft: needs stride 1");
  CHECK_ERR_CONTAINS(ts_conv_supported(&d, TS_CONV_DEPTHWISE), "depthwise: needs groups == c == k");
  d.groups = 3;
  CHECK_STATUS(ts_conv_supported(&d, TS_CONV_DIRECT), TS_ERR_SHAPE);
  d.groups = 1, d.r = 13;
  CHECK_ERR_CONTAINS(ts_conv_output_dims(&d, NULL, NULL), "exceeds the padded input");
  d.r = 3, d.n = 0;
  CHECK_ERR_CONTAINS(ts_conv_output_dims(&d, NULL, NULL), "n = 0");
  d.n = 1, d.pad_left = -1;
  CHECK_ERR_CONTAINS(ts_conv_output_dims(&d, NULL, NULL), "pad_left = -1");
  d.pad_left = 1;
  CHECK(ts_conv_flops(&d) == 2.0 * 8 * 5 * 5 * 8 * 9, "flops %g", ts_conv_flops(&d));
  CHECK_STATUS(ts_conv_supported(&d, TS_CONV_ALGO_COUNT), TS_ERR_INVALID_ARG);

  ts_conv_plan *pl = NULL;
  CHECK_STATUS(ts_conv_plan_create(NULL, ctx, &d, TS_CONV_DIRECT), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_conv_plan_create(&pl, ctx, &d, TS_CONV_DIRECT));
  float x[8 * 100] = {0}, y[8 * 25], w[8 * 8 * 9] = {0};
  unsigned char *ws = ts_malloc(ts_conv_plan_workspace_size(pl) + 64);
  CHECK_ERR_CONTAINS(ts_conv_execute(pl, x, y, ws), "weights not set");
  CHECK_OK(ts_conv_plan_set_weights(pl, w, NULL));
  CHECK(ts_conv_plan_workspace_size(pl) > 0, "direct needs a workspace");
  CHECK_ERR_CONTAINS(ts_conv_execute(pl, x, y, NULL), "needs a workspace");
  CHECK_ERR_CONTAINS(ts_conv_execute(pl, x, y, ws + 4), "aligned");
  CHECK_STATUS(ts_conv_execute(pl, NULL, y, ws), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_conv_plan_set_weights(pl, NULL, NULL), TS_ERR_INVALID_ARG);
  CHECK(ts_conv_plan_algo(pl) == TS_CONV_DIRECT, "plan algo");
  CHECK_OK(ts_conv_execute(pl, x, y, ws));
  CHECK(y[0] == 0.0f && y[8 * 25 - 1] == 0.0f, "zero weights give zero output");
  ts_free(ws);
  ts_conv_plan_destroy(pl);
  ts_conv_plan_destroy(NULL);
}

/* ts_conv_time_rounds (over the core's engine): a failing contender reads NaN and does not fail
 * the call, a much slower prunable one is pruned with its warm-up time, a baseline never is; every
 * contender failing is the call's error. No time is asserted beyond "slow is slower". */
static int g_calls[4];
static ts_status spin(int i, double s) {
  g_calls[i]++;
  const double t0 = ts_now();
  while (ts_now() - t0 < s) {
  }
  return TS_OK;
}
static ts_status fast_fn(void *a) { (void)a; return spin(0, 2e-4); }
static ts_status slow_fn(void *a) { (void)a; return spin(1, 2e-2); }
static ts_status slow_base_fn(void *a) { (void)a; return spin(2, 2e-2); }
static ts_status fail_fn(void *a) {
  (void)a;
  g_calls[3]++;
  return ts_error(TS_ERR_UNSUPPORTED, "contender fails");
}

static void test_time_rounds(void) {
  const ts_conv_timed_fn fn[4] = {fast_fn, slow_fn, slow_base_fn, fail_fn};
  const bool prunable[4] = {true, true, false, true};
  double ms[4];
  bool pruned[4];
  ts_conv_time_opts o = ts_conv_time_opts_default();
  o.repeats = 3, o.min_time_s = 0, o.max_rounds = 3;
  memset(g_calls, 0, sizeof g_calls);
  CHECK_OK(ts_conv_time_rounds(4, fn, NULL, prunable, &o, ms, pruned));
  CHECK(ms[0] > 0 && !pruned[0] && g_calls[0] == 5, "fast: %g ms, pruned %d, %d calls", ms[0], pruned[0], g_calls[0]);
  CHECK(pruned[1] && ms[1] > ms[0] && g_calls[1] == 2, "slow prunable: pruned %d, %g ms, %d calls", pruned[1], ms[1],
        g_calls[1]);
  CHECK(!pruned[2] && ms[2] > ms[0] && g_calls[2] == 5, "baseline never pruned: %d, %d calls", pruned[2], g_calls[2]);
  CHECK(isnan(ms[3]) && !pruned[3] && g_calls[3] == 1, "failing: %g, %d calls", ms[3], g_calls[3]);
  const ts_conv_timed_fn bad[2] = {fail_fn, fail_fn};
  CHECK_ERR_CONTAINS(ts_conv_time_rounds(2, bad, NULL, NULL, &o, ms, NULL), "contender fails");
  o.max_rounds = 2;
  CHECK_STATUS(ts_conv_time_rounds(1, fn, NULL, NULL, &o, ms, NULL), TS_ERR_INVALID_ARG);
}

/* Every kernel level of the room (ts__conv_dispatch) this CPU runs, the scalar reference
 * included, against the oracle: the algorithms whose kernels come from the table, with the
 * level's default schedule and each Winograd schedule it has forced through the plans' options
 * (no environment variable): AVX-512 tile-lane fused / staged and channel-lane private / shared,
 * AVX2 channel-lane private / shared. A level the CPU lacks is reported as skipped. */
static void test_levels(ts_context *ctx) {
  const unsigned kernel_algos = 1u << TS_CONV_DIRECT | 1u << TS_CONV_DEPTHWISE | 1u << TS_CONV_WINOGRAD_F2 |
                                1u << TS_CONV_WINOGRAD_F4;
  const unsigned wino = 1u << TS_CONV_WINOGRAD_F2 | 1u << TS_CONV_WINOGRAD_F4;
  const int scheds[] = {TS__WINO_SCHED_FUSED, TS__WINO_SCHED_STAGED, TS__WINO_SCHED_CLANE_PRIVATE,
                        TS__WINO_SCHED_CLANE_SHARED};
  const ts__conv_plan_opts ref = {TS__WINO_SCHED_AUTO, ts__conv_dispatch.variants[0].table};
  for (int i = 0; i < NCASES; i++) run_case(&cases[i], i, kernel_algos, ctx, &ref);
  TST_EACH_VARIANT(&ts__conv_dispatch, v, ts__conv_kern, k) {
    const ts__conv_plan_opts po = {TS__WINO_SCHED_AUTO, k};
    for (int i = 0; i < NCASES; i++) run_case(&cases[i], i, kernel_algos, ctx, &po);
    for (int s = k->isa == TS_ISA_AVX512 ? 0 : 2; s < 4; s++) {
      const ts__conv_plan_opts ps = {scheds[s], k};
      for (int i = 0; i < NCASES; i++) run_case(&cases[i], i, wino, ctx, &ps);
    }
  }
}

/* Child under TESSERA_ISA=cap: the room resolves the best level it has at or below the cap, and
 * a plan made without options runs that level's table. */
static void check_cap(const char *cap) {
  const ts__level top = !strcmp(cap, "scalar") ? TS__LV_SCALAR : !strcmp(cap, "avx2") ? TS__LV_AVX2 : TS__LV_AVX512;
  ts__level want = TS__LV_SCALAR;
  for (int i = 0; i < ts__conv_dispatch.count; i++)
    if (ts__conv_dispatch.variants[i].level <= top && ts__level_supported(ts__conv_dispatch.variants[i].level))
      want = ts__conv_dispatch.variants[i].level;
  CHECK(ts__dispatch_level(&ts__conv_dispatch) == want, "TESSERA_ISA=%s: conv resolved %s, expected %s", cap,
        ts__level_name(ts__dispatch_level(&ts__conv_dispatch)), ts__level_name(want));
  const ts_conv_desc d = ts_conv_desc_make(1, 8, 6, 6, 8, 3, 3);
  ts_conv_plan *pl = NULL;
  CHECK_OK(ts_conv_plan_create(&pl, NULL, &d, TS_CONV_WINOGRAD_F4));
  CHECK(pl && pl->kern == ts__dispatch_table(&ts__conv_dispatch), "TESSERA_ISA=%s: a plan runs another level", cap);
  ts_conv_plan_destroy(pl);
}

int main(int argc, char **argv) {
  /* Hundreds of short parallel regions: with OpenMP's default spin-waiting this program takes 4x
   * longer on a loaded machine (measured 12.6 s vs 3.6 s), so it re-executes itself with passive
   * waiting unless the caller chose a policy. */
  if (!getenv("OMP_WAIT_POLICY")) {
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
      self[len] = 0;
      setenv("OMP_WAIT_POLICY", "passive", 1);
      execv(self, argv);
    }
  }
  /* child mode: only the ISA-dispatched algorithms, under the TESSERA_ISA the parent set */
  const int isa_child = argc > 2 && !strcmp(argv[1], "--isa-child");
  ts_context *ctx = NULL;
  CHECK_OK(ts_context_create(&ctx, 2));
  if (!isa_child) test_api_errors(ctx), test_time_rounds();
  const unsigned wino = 1u << TS_CONV_WINOGRAD_F2 | 1u << TS_CONV_WINOGRAD_F4;
  const unsigned algos =
      isa_child ? (1u << TS_CONV_DIRECT | 1u << TS_CONV_DEPTHWISE | wino) : (1u << TS_CONV_ALGO_COUNT) - 1;
  for (int i = 0; i < NCASES; i++) run_case(&cases[i], i, algos, ctx, NULL);
  if (isa_child) check_cap(argv[2]);
  else test_levels(ctx);
  if (!isa_child) {
    for (int a = 0; a < TS_CONV_ALGO_COUNT; a++)
      printf("%-12s worst max|err| = %.3g u max(A)%s\n", ts_conv_algo_name((ts_conv_algo)a), worst_ratio[a],
             norm_c[a] > 0 ? " (norm-wise bound (c + L) u max(A))" : "");
    const char *isas[] = {"avx2", "scalar"};
    for (int i = 0; i < 2; i++) {
      if (i == 0 && ts_isa_supported() < TS_ISA_AVX2) continue;
      char cmd[4200], self[4096];
      const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
      if (len > 0) {
        self[len] = 0;
        snprintf(cmd, sizeof cmd, "TESSERA_ISA=%s '%s' --isa-child %s > /dev/null", isas[i], self, isas[i]);
        const int rc = system(cmd);
        CHECK(rc == 0, "direct/depthwise/Winograd under TESSERA_ISA=%s failed (rc %d)", isas[i], rc);
      }
    }
  }
  ts_context_destroy(ctx);
  return tst_finish();
}
