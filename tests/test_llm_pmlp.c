/* The learned activation predictor (src/llm/pred_mlp.h): every inference variant against the
 * double-accumulating reference on edge shapes with a derived bound; training on a learnable
 * synthetic problem measured on tokens it never saw; determinism for a seed; the class weight's
 * default and its effect on recall; every bad argument and injected allocation failure. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/pred_mlp.h"
#include "tst_dispatch.h"

/* ---- inference kernels ------------------------------------------------------------------------ */

static void fill_normal(float *x, size_t len, ts_rng *rng, float sd) {
  for (size_t k = 0; k < len; k++) x[k] = sd * ts_rng_normal(rng);
}

static ts__pmlp random_pmlp(int d, int r, int n, ts_rng *rng) {
  ts__pmlp p = {.d = d, .r = r, .n = n};
  p.w1 = malloc((size_t)r * d * sizeof(float));
  p.b1 = malloc((size_t)r * sizeof(float));
  p.w2 = malloc((size_t)n * r * sizeof(float));
  p.b2 = malloc((size_t)n * sizeof(float));
  fill_normal(p.w1, (size_t)r * d, rng, sqrtf(2.0f / d));
  fill_normal(p.b1, (size_t)r, rng, 0.3f);
  fill_normal(p.w2, (size_t)n * r, rng, sqrtf(2.0f / r));
  fill_normal(p.b2, (size_t)n, rng, 0.5f);
  return p;
}
static void free_random(ts__pmlp *p) {
  free(p->w1), free(p->b1), free(p->w2), free(p->b2);
}

/* Bound on |variant - reference| per logit. Unit roundoff u = 2^-24. A hidden value is an fp32 sum
 * of d products and a bias in some order (FMA chains per lane, then a hadd tree), against the
 * reference's double sum rounded once: |err_h_j| <= e_j = 2 (d + 2) u S1_j with
 * S1_j = |b1_j| + sum_k |W1_jk x_k| (ReLU does not increase it). A logit adds r products of the
 * hidden values: the error carried from h, sum_j |W2_ij| e_j, plus its own summation error
 * 2 (r + 2) u (|b2_i| + sum_j |W2_ij| (|h_j| + e_j)). */
static void logit_bounds(const ts__pmlp *p, const float *x, const float *h_ref, double *bound) {
  const double u = 0x1p-24;
  double *e = malloc((size_t)p->r * sizeof(double));
  for (int j = 0; j < p->r; j++) {
    double s = fabs(p->b1[j]);
    for (int k = 0; k < p->d; k++) s += fabs((double)p->w1[(size_t)j * p->d + k] * x[k]);
    e[j] = 2.0 * (p->d + 2) * u * s;
  }
  for (int i = 0; i < p->n; i++) {
    double carried = 0, s = fabs(p->b2[i]);
    for (int j = 0; j < p->r; j++) {
      const double w = fabs(p->w2[(size_t)i * p->r + j]);
      carried += w * e[j];
      s += w * (fabs(h_ref[j]) + e[j]);
    }
    bound[i] = carried + 2.0 * (p->r + 2) * u * s;
  }
  free(e);
}

static void test_kernels(void) {
  static const int shapes[][3] = {{1, 1, 1},  {7, 5, 9},    {8, 8, 8},     {33, 17, 70},
                                  {64, 64, 64}, {384, 64, 1536}, {385, 67, 129}, {2048, 64, 300}};
  ts_rng rng;
  ts_rng_seed(&rng, 11);
  double worst_all = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int d = shapes[s][0], r = shapes[s][1], n = shapes[s][2];
    ts__pmlp p = random_pmlp(d, r, n, &rng);
    float *x = malloc((size_t)d * sizeof(float));
    fill_normal(x, (size_t)d, &rng, 1.0f);
    float *ref = tst_alloc_guarded((size_t)n), *h_ref = tst_alloc_guarded((size_t)r);
    float *got = tst_alloc_guarded((size_t)n), *h = tst_alloc_guarded((size_t)r);
    double *bound = malloc((size_t)n * sizeof(double));
    tst_poison(ref, (size_t)n), tst_poison(h_ref, (size_t)r);
    ts__pmlp_logits_ref(&p, x, ref, h_ref);
    logit_bounds(&p, x, h_ref, bound);
    CHECK(tst_guard_ok(ref, (size_t)n) && tst_guard_ok(h_ref, (size_t)r), "ref guard bytes, shape %d/%d/%d", d, r, n);
    CHECK(ts__pmlp_bytes(&p) == ((size_t)r * d + r + (size_t)n * r + n) * 4, "bytes %zu", ts__pmlp_bytes(&p));
    TST_EACH_VARIANT(&ts__pmlp_dispatch, v, ts__pmlp_kern, k) {
      tst_poison(got, (size_t)n), tst_poison(h, (size_t)r);
      k->logits(&p, x, got, h);
      double worst = 0; /* max err / bound */
      int at = 0;
      for (int i = 0; i < n; i++) {
        const double q = fabs((double)got[i] - ref[i]) / bound[i];
        if (!(q <= worst)) worst = q, at = i;
      }
      worst_all = worst > worst_all ? worst : worst_all;
      CHECK(worst <= 1.0, "%s d=%d r=%d n=%d: logit %d err %.3g > bound %.3g (max err/bound %.3g)",
            ts__level_name(ts__pmlp_dispatch.variants[v].level), d, r, n, at, fabs((double)got[at] - ref[at]),
            bound[at], worst);
      CHECK(tst_guard_ok(got, (size_t)n) && tst_guard_ok(h, (size_t)r), "guard bytes after the %s variant",
            ts__level_name(ts__pmlp_dispatch.variants[v].level));
    }
    /* the dispatched form is one of the variants, bit for bit */
    tst_poison(got, (size_t)n), tst_poison(h, (size_t)r);
    ts__pmlp_logits(&p, x, got, h);
    bool same = !memcmp(got, ref, (size_t)n * sizeof(float));
    const ts__pmlp_kern *avx2 = ts__dispatch_exact(&ts__pmlp_dispatch, TS__LV_AVX2);
    if (avx2 && !same) {
      float *alt = malloc((size_t)n * sizeof(float));
      avx2->logits(&p, x, alt, h);
      same = !memcmp(got, alt, (size_t)n * sizeof(float));
      free(alt);
    }
    CHECK(same, "dispatched logits (%s) equal neither the reference nor the AVX2 form, d=%d r=%d n=%d",
          ts__level_name(ts__dispatch_level(&ts__pmlp_dispatch)), d, r, n);
    free(bound), ts_free(ref), ts_free(h_ref), ts_free(got), ts_free(h), free(x);
    free_random(&p);
  }
  printf("pmlp logits: largest |variant - reference| / bound over %zu shapes: %.3g\n",
         sizeof shapes / sizeof shapes[0], worst_all);
}

/* ---- training ---------------------------------------------------------------------------------- */

/* X [N][d] ~ N(0, 1); Y[t][i] = [w_i . x_t > c_i] with w_i ~ N(0, 1) and offsets c_i (0: half the
 * labels active; larger: fewer) */
typedef struct problem {
  int64_t N;
  int d, n;
  float *X, *w, *c;
  uint8_t *Y;
} problem;

static problem make_problem(int64_t N, int d, int n, float c_sd, float c_mean, uint64_t seed) {
  problem P = {.N = N, .d = d, .n = n};
  P.X = malloc((size_t)N * d * sizeof(float));
  P.w = malloc((size_t)n * d * sizeof(float));
  P.c = malloc((size_t)n * sizeof(float));
  P.Y = malloc((size_t)N * n);
  ts_rng rng;
  ts_rng_seed(&rng, seed);
  fill_normal(P.w, (size_t)n * d, &rng, 1.0f);
  for (int i = 0; i < n; i++) P.c[i] = c_mean + c_sd * ts_rng_normal(&rng);
  fill_normal(P.X, (size_t)N * d, &rng, 1.0f);
  for (int64_t t = 0; t < N; t++)
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (int k = 0; k < d; k++) s += (double)P.w[(size_t)i * d + k] * P.X[(size_t)t * d + k];
      P.Y[(size_t)t * n + i] = s > P.c[i] * sqrt((double)d);
    }
  return P;
}
static void free_problem(problem *P) {
  free(P->X), free(P->w), free(P->c), free(P->Y);
}

/* accuracy and recall of the actives at logit > 0 on every token of P */
static void measure(const ts__pmlp *m, const problem *P, double *acc, double *recall) {
  float *z = malloc((size_t)P->n * sizeof(float)), *h = malloc((size_t)m->r * sizeof(float));
  int64_t ok = 0, tp = 0, pos = 0;
  for (int64_t t = 0; t < P->N; t++) {
    ts__pmlp_logits(m, P->X + (size_t)t * P->d, z, h);
    for (int i = 0; i < P->n; i++) {
      const int y = P->Y[(size_t)t * P->n + i], on = z[i] > 0;
      ok += y == on, pos += y, tp += y & on;
    }
  }
  *acc = (double)ok / (double)(P->N * P->n);
  *recall = pos ? (double)tp / (double)pos : 1;
  free(z), free(h);
}

static void test_train(void) {
  const int d = 32, n = 64;
  problem P = make_problem(4096, d, n, 0, 0, 21), T = make_problem(2048, d, n, 0, 0, 21);
  /* the same w (same seed, drawn first), new tokens for T: regenerate T's X and labels */
  {
    ts_rng rng;
    ts_rng_seed(&rng, 99);
    fill_normal(T.X, (size_t)T.N * d, &rng, 1.0f);
    for (int64_t t = 0; t < T.N; t++)
      for (int i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < d; k++) s += (double)T.w[(size_t)i * d + k] * T.X[(size_t)t * d + k];
        T.Y[(size_t)t * n + i] = s > 0;
      }
  }
  /* the defaults' 8 epochs of 256-token batches are 128 Adam steps here, too few for this small
   * set (accuracy about 0.71); 64-token batches at lr 1e-2 reach about 0.95 */
  ts__pmlp_opts o = ts__pmlp_opts_default();
  o.seed = 7, o.batch = 64, o.lr = 1e-2f;
  ts__pmlp m = {0}, m2 = {0};
  const double t0 = ts_now();
  CHECK_OK(ts__pmlp_train(&m, P.X, P.Y, P.N, d, n, &o));
  const double dt = ts_now() - t0;
  if (m.w1) {
    double acc, rec;
    measure(&m, &T, &acc, &rec);
    printf("pmlp synthetic d=%d n=%d N=%lld r=%d, %d epochs (%.2fs): unseen tokens accuracy %.4f recall %.4f; "
           "held-out %lld: loss %.4f accuracy %.4f recall %.4f, pos_weight %.3f\n",
           d, n, (long long)P.N, m.r, o.epochs, dt, acc, rec, (long long)m.n_val, (double)m.val_loss,
           (double)m.val_acc, (double)m.val_recall, (double)m.pos_weight);
    CHECK(acc >= 0.9, "accuracy on unseen tokens %.4f < 0.9", acc);
    CHECK(m.n_val == P.N / 20 && m.val_acc >= 0.9f, "held-out (%lld tokens) accuracy %.4f < 0.9", (long long)m.n_val,
          (double)m.val_acc);
    CHECK(fabsf(m.pos_weight - 1.0f) < 0.1f, "balanced labels: pos_weight %.3f, expected about 1", (double)m.pos_weight);
    /* deterministic for a seed */
    CHECK_OK(ts__pmlp_train(&m2, P.X, P.Y, P.N, d, n, &o));
    CHECK(m2.w1 && !memcmp(m.w1, m2.w1, ts__pmlp_bytes(&m)), "two trainings with seed %llu differ",
          (unsigned long long)o.seed);
  }
  ts__pmlp_free(&m), ts__pmlp_free(&m2);
  CHECK(m.w1 == NULL && m.n == 0, "ts__pmlp_free zeroes the struct");
  ts__pmlp_free(&m); /* twice: nothing to do */
  free_problem(&P), free_problem(&T);

  /* sparse labels (about 16% active): the default pos_weight is the training tokens' n_zero /
   * n_active, and weighting the actives raises their recall over the unweighted loss */
  problem S = make_problem(4096, d, n, 0.3f, 1.0f, 33);
  int64_t act = 0;
  for (size_t k = 0; k < (size_t)S.N * n; k++) act += S.Y[k];
  const double ratio = (double)((int64_t)S.N * n - act) / (double)act;
  ts__pmlp mw = {0}, mu = {0};
  o.epochs = 4;
  CHECK_OK(ts__pmlp_train(&mw, S.X, S.Y, S.N, d, n, &o));
  o.pos_weight = 1;
  CHECK_OK(ts__pmlp_train(&mu, S.X, S.Y, S.N, d, n, &o));
  if (mw.w1 && mu.w1) {
    const double want = ratio > 10 ? 10 : ratio;
    CHECK(fabs(mw.pos_weight - want) < 0.05 * want, "default pos_weight %.3f, data ratio %.3f", (double)mw.pos_weight,
          ratio);
    CHECK(mu.pos_weight == 1.0f, "explicit pos_weight 1 used as %.3f", (double)mu.pos_weight);
    printf("pmlp sparse labels (%.1f%% active): pos_weight %.2f recall %.4f skip %.3f; pos_weight 1 recall %.4f "
           "skip %.3f\n",
           100.0 * act / ((double)S.N * n), (double)mw.pos_weight, (double)mw.val_recall, (double)mw.val_skip,
           (double)mu.val_recall, (double)mu.val_skip);
    CHECK(mw.val_recall > mu.val_recall, "weighted recall %.4f <= unweighted %.4f", (double)mw.val_recall,
          (double)mu.val_recall);
  }
  ts__pmlp_free(&mw), ts__pmlp_free(&mu);
  free_problem(&S);
}

/* ---- bad arguments, allocation failures ------------------------------------------------------- */

static int g_fail_at, g_calls; /* allocator hook: the g_fail_at-th allocation fails */
static void *fail_alloc(void *user, size_t bytes, size_t align) {
  (void)user;
  return g_calls++ == g_fail_at ? NULL : aligned_alloc(align, bytes);
}
static void fail_free(void *user, void *p) {
  (void)user;
  free(p);
}

static void test_errors(void) {
  const int d = 4, n = 3;
  float X[8 * 4];
  uint8_t Y[8 * 3];
  for (int k = 0; k < 32; k++) X[k] = (float)(k % 7) - 3;
  for (int k = 0; k < 24; k++) Y[k] = (uint8_t)(k % 2);
  ts__pmlp m;
  const ts__pmlp_opts def = ts__pmlp_opts_default();
  ts__pmlp_opts o = def;
  CHECK_ERR_CONTAINS(ts__pmlp_train(NULL, X, Y, 8, d, n, &o), "out is NULL");
  memset(&m, 0x5A, sizeof m);
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, NULL, Y, 8, d, n, &o), "X is NULL");
  CHECK(m.w1 == NULL && m.d == 0, "out zeroed after an error");
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, NULL, 8, d, n, &o), "Y is NULL");
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 0, d, n, &o), "N = 0");
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, -5, d, n, &o), "N = -5");
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, 0, n, &o), "d = 0");
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, -1, &o), "n = -1");
  CHECK_STATUS(ts__pmlp_train(&m, X, Y, INT64_MAX / 4, 1 << 20, 1 << 20, &o), TS_ERR_OVERFLOW);
  o.r = 0;
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), "r = 0");
  o = def, o.epochs = 0;
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), "epochs = 0");
  o = def, o.batch = 0;
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), "batch = 0");
  o = def, o.lr = 0;
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), "lr = 0");
  o = def, o.lr = NAN;
  CHECK_STATUS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), TS_ERR_INVALID_ARG);
  o = def, o.pos_weight = -1;
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), "pos_weight = -1");
  o = def, o.pos_weight = INFINITY;
  CHECK_STATUS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), TS_ERR_INVALID_ARG);
  o = def;
  X[2 * 4 + 3] = NAN;
  CHECK_ERR_CONTAINS(ts__pmlp_train(&m, X, Y, 8, d, n, &o), "X[2][3]");
  X[2 * 4 + 3] = 1;
  CHECK(m.w1 == NULL, "no weights after errors");

  /* tiny but valid: N below 20 holds nothing out; NULL opts are the defaults */
  CHECK_OK(ts__pmlp_train(&m, X, Y, 8, d, n, NULL));
  CHECK(m.w1 && m.n_val == 0 && m.val_loss == -1 && m.r == 64, "N = 8: n_val %lld, val_loss %g, r %d",
        (long long)m.n_val, (double)m.val_loss, m.r);
  ts__pmlp_free(&m);

  /* each allocation failing in turn: TS_ERR_OOM (or another clean error), nothing leaked (ASan) */
  const ts_allocator fa = {fail_alloc, fail_free, NULL};
  int oom = 0, ok_after = 0;
  for (g_fail_at = 0; g_fail_at < 16; g_fail_at++) {
    g_calls = 0;
    ts_set_allocator(&fa);
    const ts_status s = ts__pmlp_train(&m, X, Y, 8, d, n, &o);
    ts_set_allocator(NULL);
    if (s == TS_OK) {
      ok_after = g_calls <= g_fail_at; /* ran out of allocations to fail */
      ts__pmlp_free(&m);
      if (ok_after) break;
      continue;
    }
    oom += s == TS_ERR_OOM;
    CHECK(s == TS_ERR_OOM && m.w1 == NULL, "allocation %d failing: %s (%s)", g_fail_at, ts_strerror(s), ts_last_error());
  }
  CHECK(oom >= 7 && ok_after, "%d allocation failures reported, training with no failure reached: %d", oom, ok_after);
}

int main(void) {
  test_kernels();
  test_errors();
  test_train();
  return tst_finish();
}
