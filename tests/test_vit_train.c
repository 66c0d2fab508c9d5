/* ViT training step: gradients of every parameter tensor against central finite differences of the
 * loss computed by the double-precision naive forward (tests/vit_naive.h), the fast attention
 * backends' gradients against the reference backend's, the memory strategies against each other,
 * a masked pattern under permuted tokens, the SGD update, the memory planner under a budget, and bad
 * inputs. Model: the "tiny" preset (dim 64, 2 heads, depth 2, mlp 128, 10 classes) with init_std 0.2
 * (attention scores O(1), so the mask matters), 4x4 and 8x8 token grids, batch 2.
 *
 * Tolerances (all derived from fp32 rounding, u = 2^-24 = 6e-8; the worst measured figure is printed):
 *  - finite differences: the loss of float parameters perturbed by +-h (h = 1e-3; the difference of
 *    the stored floats is the divisor) through the double forward, so the quotient's own error is its
 *    truncation h^2 |L'''| / 6 ~ 2e-6 for |L'''| ~ 10. tessera's fp32 gradient carries rounding of
 *    about K u per GEMM chain (K <= 768 = pdim: 5e-5 relative) through two blocks: we allow
 *    1e-3 x the tensor's max |gradient| + 1e-5.
 *  - backends against the reference backend: both run the same fp32 GEMMs; the attention forward
 *    and backward kernels differ from the double references by a few u x the reduction length (the
 *    forward measured 4e-6 relative in tests/test_vit.c): we allow 2e-4 x the tensor's max |gradient|.
 *  - CHECKPOINT against RECOMPUTE: bitwise with the reference backend (its forward and backward are
 *    single-threaded and deterministic, and every GEMM and row loop is run again on the same inputs
 *    with the same threads), so the re-made activations are the stored ones; STORE_SCORES against
 *    RECOMPUTE with the plan backends: the backward reads the forward's scores instead of computing
 *    Q K^T again (a different summation order at most): 1e-4 x the max |gradient|. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "tessera/nn.h"
#include "tst.h"
#include "vit_naive.h"

enum { B = 2 };

typedef struct fixture {
  ts_context *ctx;
  ts_nn_vit *m;
  ts_nn_token_mask mask;
  uint8_t *u8; /* grid-order mask for the naive forward (NULL: dense) */
  float *img;
  int32_t labels[B];
  int64_t n, hd;
} fixture;

static void fixture_make(fixture *f, int64_t res, const char *spec, int threads) {
  memset(f, 0, sizeof *f);
  CHECK_OK(ts_context_create(&f->ctx, threads));
  ts_nn_vit_config c;
  CHECK_OK(ts_nn_vit_config_preset("tiny", res, &c));
  c.init_std = 0.2f;
  c.seed = 5;
  CHECK_OK(ts_nn_vit_create(&f->m, f->ctx, &c, B));
  int64_t gh, gw;
  ts_nn_vit_shape(f->m, &gh, &gw, &f->n, &f->hd);
  CHECK_OK(ts_nn_token_mask_create(spec, gh, gw, &f->mask));
  if (!f->mask.dense) {
    f->u8 = malloc((size_t)(f->n * f->n));
    CHECK_OK(ts_csr_to_dense_u8(&f->mask.csr, f->u8));
  }
  size_t nimg = (size_t)(B * 3 * res * res);
  f->img = malloc(nimg * sizeof *f->img);
  tst_fill_uniform(f->img, nimg, 77 + (uint64_t)res, -1, 1);
  f->labels[0] = 3, f->labels[1] = 8;
}

static void fixture_free(fixture *f) {
  ts_nn_vit_destroy(f->m);
  ts_nn_token_mask_free(&f->mask);
  ts_context_destroy(f->ctx);
  free(f->u8), free(f->img);
}

static ts_nn_attn *backend(fixture *f, ts_nn_attn_kind kind, ts_reorder_method reorder) {
  ts_nn_attn_opts o;
  ts_nn_attn_opts_default(&o, kind);
  if (kind == TS_NN_ATTN_FIXED) o.tile = (ts_attn_tile){16, 16};
  o.reorder.method = reorder;
  o.reorder.tile = 4;
  o.blocks.min_nnz = 2;
  o.solver = TS_ATTN_SOLVER_GREEDY;
  ts_nn_attn *a = NULL;
  CHECK_OK(ts_nn_attn_create(&a, f->ctx, &f->mask, f->hd, &o));
  return a;
}

/* Mean cross-entropy of the naive double forward. */
static double naive_loss(fixture *f) {
  const int64_t C = f->m->cfg.classes;
  double z[B * 64];
  naive_forward(f->m, f->img, f->u8, z);
  double s = 0;
  for (int b = 0; b < B; b++) {
    double mx = -INFINITY, se = 0;
    for (int64_t c = 0; c < C; c++) mx = fmax(mx, z[b * C + c]);
    for (int64_t c = 0; c < C; c++) se += exp(z[b * C + c] - mx);
    s += mx + log(se) - z[b * C + f->labels[b]];
  }
  return s / B;
}

/* A copy of every gradient (the gradient arena), for comparing steps. */
static float *grads_copy(const ts_nn_vit *m) {
  float *g = malloc((size_t)m->nweights * sizeof *g);
  memcpy(g, m->grads, (size_t)m->nweights * sizeof *g);
  return g;
}

/* Worst |a - b| / max|b| over the parameter tensors (0 when equal); fails tensors above tol. */
static double compare_grads(const ts_nn_vit *m, const float *a, const float *b, double tol, const char *what) {
  double worst = 0;
  for (int i = 0; i < ts_nn_vit_param_count(m); i++) {
    ts_nn_vit_param p;
    CHECK_OK(ts_nn_vit_param_get(m, i, &p));
    const int64_t off = p.value - m->weights;
    double mx = 0, d = 0;
    for (int64_t k = 0; k < p.count; k++) {
      mx = fmax(mx, fabs(b[off + k]));
      double e = fabs((double)a[off + k] - b[off + k]);
      if (!(e <= d)) d = e; /* NaN wins */
    }
    double rel = mx > 0 ? d / mx : d;
    CHECK(rel <= tol, "%s: %s differs by %g (max |grad| %g, relative %g > %g)", what, p.name, d, mx, rel, tol);
    if (!(rel <= worst)) worst = rel;
  }
  return worst;
}

static void test_names(void) {
  ts_nn_mem_strategy s;
  for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
    CHECK_OK(ts_nn_mem_strategy_parse(ts_nn_mem_strategy_name((ts_nn_mem_strategy)k), &s));
    CHECK(s == (ts_nn_mem_strategy)k, "round trip %d", k);
  }
  CHECK_ERR_CONTAINS(ts_nn_mem_strategy_parse("flash", &s), "flash");
  CHECK_STATUS(ts_nn_mem_strategy_parse(NULL, &s), TS_ERR_INVALID_ARG);
  CHECK(strcmp(ts_nn_mem_strategy_name((ts_nn_mem_strategy)7), "?") == 0, "unknown name");
}

/* Every tensor's gradient against central differences of the naive loss, on 3 random entries and
 * the entry of the largest gradient. */
static void test_finite_differences(void) {
  fixture f;
  fixture_make(&f, 64, "window2d:k=3", 2);
  ts_nn_attn *a = backend(&f, TS_NN_ATTN_REFERENCE, TS_REORDER_NONE);
  CHECK_OK(ts_nn_vit_set_attn(f.m, a));
  ts_nn_vit_train_stats st;
  CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
  const double L0 = naive_loss(&f);
  CHECK(fabs(st.loss - L0) <= 1e-5 * fmax(1, fabs(L0)), "loss %.9g, naive %.9g", st.loss, L0);
  CHECK(st.peak_bytes > 0 && st.peak_bytes <= st.bound_bytes && st.bound_bytes <= st.arena_bytes,
        "peak %lld bound %lld arena %lld", (long long)st.peak_bytes, (long long)st.bound_bytes, (long long)st.arena_bytes);
  CHECK(st.total_s > 0 && st.attn_fwd_s > 0 && st.attn_bwd_s > 0 && st.remat_s == 0, "timings");
  ts_rng r;
  ts_rng_seed(&r, 21);
  double worst = 0;
  int checked = 0;
  for (int i = 0; i < ts_nn_vit_param_count(f.m); i++) {
    ts_nn_vit_param p;
    CHECK_OK(ts_nn_vit_param_get(f.m, i, &p));
    double gmax = 0;
    int64_t kmax = 0;
    for (int64_t k = 0; k < p.count; k++)
      if (fabs(p.grad[k]) > gmax) gmax = fabs(p.grad[k]), kmax = k;
    CHECK(gmax > 0, "%s: gradient is all zero", p.name);
    for (int e = 0; e < 4; e++) {
      int64_t k = e == 0 ? kmax : (int64_t)ts_rng_below(&r, (uint64_t)p.count);
      const float v = p.value[k], h = 1e-3f;
      p.value[k] = v + h;
      const double lp = naive_loss(&f), dp = (double)p.value[k];
      p.value[k] = v - h;
      const double lm = naive_loss(&f), dm = (double)p.value[k];
      p.value[k] = v;
      const double fd = (lp - lm) / (dp - dm), err = fabs(fd - p.grad[k]), tol = 1e-3 * gmax + 1e-5;
      CHECK(err <= tol, "%s[%lld]: gradient %.8g, finite difference %.8g (error %g > %g)", p.name, (long long)k,
            (double)p.grad[k], fd, err, tol);
      worst = fmax(worst, err / (gmax + 1e-2));
      checked++;
    }
  }
  printf("finite differences: %d entries of %d tensors, worst error %.3g x (max |grad| + 0.01)\n", checked,
         ts_nn_vit_param_count(f.m), worst);
  ts_nn_attn_destroy(a);
  fixture_free(&f);
}

/* Fast backends (and permuted tokens) against the reference backend; memory strategies against each
 * other. */
static void test_backends(int64_t res, const char *spec) {
  fixture f;
  fixture_make(&f, res, spec, 2);
  ts_nn_attn *ref = backend(&f, TS_NN_ATTN_REFERENCE, TS_REORDER_NONE);
  CHECK_OK(ts_nn_vit_set_attn(f.m, ref));
  ts_nn_vit_train_stats st;
  CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
  float *g_ref = grads_copy(f.m);
  const double loss_ref = st.loss;
  const int64_t L = f.m->cfg.depth;
  ts_nn_mem_strategy s[2];

  /* reference: CHECKPOINT and STORE_SCORES (nothing to store) give bitwise the same gradients */
  for (int k = 1; k < TS_NN_MEM_COUNT; k++) {
    for (int64_t l = 0; l < L; l++) s[l] = (ts_nn_mem_strategy)k;
    CHECK_OK(ts_nn_vit_train_set_strategies(f.m, s));
    CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
    CHECK(memcmp(g_ref, f.m->grads, (size_t)f.m->nweights * sizeof(float)) == 0, "%s: reference %s not bitwise", spec,
          ts_nn_mem_strategy_name(k));
    CHECK(st.loss == loss_ref, "loss %.9g vs %.9g", st.loss, loss_ref);
    CHECK(st.peak_bytes <= st.bound_bytes, "peak %lld > bound %lld", (long long)st.peak_bytes, (long long)st.bound_bytes);
    if (k == TS_NN_MEM_CHECKPOINT) CHECK(st.remat_s > 0, "no re-made forward timed");
  }
  CHECK_OK(ts_nn_vit_train_set_strategies(f.m, NULL));

  struct {
    ts_nn_attn_kind kind;
    ts_reorder_method reorder;
    const char *name;
  } cases[] = {{TS_NN_ATTN_DENSE_FLASH, TS_REORDER_NONE, "dense_flash"},
               {TS_NN_ATTN_FIXED, TS_REORDER_NONE, "fixed 16x16"},
               {TS_NN_ATTN_SCHEDULED, TS_REORDER_HILBERT, "scheduled hilbert"},
               {TS_NN_ATTN_SCHEDULED, TS_REORDER_AUTO, "scheduled auto"}};
  double worst = 0, worst_ss = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_nn_attn *a = backend(&f, cases[c].kind, cases[c].reorder);
    if (!a) continue;
    ts_nn_attn_info info;
    ts_nn_attn_get_info(a, &info);
    if (cases[c].reorder == TS_REORDER_HILBERT && !f.mask.dense) CHECK(info.perm != NULL, "hilbert: identity order");
    CHECK_OK(ts_nn_vit_set_attn(f.m, a));
    char what[96];
    snprintf(what, sizeof what, "%s, %s", cases[c].name, spec);
    for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
      for (int64_t l = 0; l < L; l++) s[l] = (ts_nn_mem_strategy)k;
      CHECK_OK(ts_nn_vit_train_set_strategies(f.m, s));
      CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
      CHECK(fabs(st.loss - loss_ref) <= 1e-5 * fmax(1, loss_ref), "%s: loss %.9g vs %.9g", what, st.loss, loss_ref);
      CHECK(st.peak_bytes <= st.bound_bytes, "%s: peak %lld > bound %lld", what, (long long)st.peak_bytes,
            (long long)st.bound_bytes);
      worst = fmax(worst, compare_grads(f.m, f.m->grads, g_ref, 2e-4, what));
      if (k == TS_NN_MEM_RECOMPUTE) {
        float *g_rec = grads_copy(f.m);
        for (int64_t l = 0; l < L; l++) s[l] = TS_NN_MEM_STORE_SCORES;
        CHECK_OK(ts_nn_vit_train_set_strategies(f.m, s));
        CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
        worst_ss = fmax(worst_ss, compare_grads(f.m, f.m->grads, g_rec, 1e-4, what));
        free(g_rec);
      }
    }
    /* mixed: one layer checkpointed, one storing scores */
    s[0] = TS_NN_MEM_CHECKPOINT, s[1] = TS_NN_MEM_STORE_SCORES;
    CHECK_OK(ts_nn_vit_train_set_strategies(f.m, s));
    CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
    worst = fmax(worst, compare_grads(f.m, f.m->grads, g_ref, 2e-4, what));
    CHECK_OK(ts_nn_vit_train_set_strategies(f.m, NULL));
    CHECK_OK(ts_nn_vit_set_attn(f.m, ref));
    ts_nn_attn_destroy(a);
  }

  /* custom: a random token order and a block-skip schedule of the permuted mask */
  int32_t *perm = malloc((size_t)f.n * sizeof *perm);
  ts_perm_random(perm, f.n, 99);
  ts_attn_schedule sch;
  CHECK_OK(ts_attn_schedule_blockskip(&sch, f.n, 8, 16));
  ts_nn_attn *cu = NULL;
  CHECK_OK(ts_nn_attn_create_custom(&cu, f.ctx, &f.mask, perm, &sch, f.hd));
  if (cu) {
    CHECK_OK(ts_nn_vit_set_attn(f.m, cu));
    CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
    worst = fmax(worst, compare_grads(f.m, f.m->grads, g_ref, 2e-4, "custom permuted"));
    ts_nn_attn_destroy(cu);
  }
  ts_attn_schedule_free(&sch);
  free(perm);
  printf("%s res %lld: backends vs reference: worst %.3g x max|grad|; store_scores vs recompute %.3g\n", spec,
         (long long)res, worst, worst_ss);
  free(g_ref);
  ts_nn_attn_destroy(ref);
  fixture_free(&f);
}

/* p_new = p - lr * grad (fp32, as computed) for every parameter; a second step from the same
 * weights gives the same gradients (determinism with the reference backend). */
static void test_sgd(void) {
  fixture f;
  fixture_make(&f, 64, "dense", 1);
  ts_nn_attn *a = backend(&f, TS_NN_ATTN_REFERENCE, TS_REORDER_NONE);
  CHECK_OK(ts_nn_vit_set_attn(f.m, a));
  float *w0 = malloc((size_t)f.m->nweights * sizeof *w0);
  memcpy(w0, f.m->weights, (size_t)f.m->nweights * sizeof *w0);
  ts_nn_vit_train_stats s1, s2;
  const float lr = 0.05f;
  CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, lr, &s1));
  int bad = 0;
  for (int i = 0; i < ts_nn_vit_param_count(f.m); i++) {
    ts_nn_vit_param p;
    CHECK_OK(ts_nn_vit_param_get(f.m, i, &p));
    const float *old = w0 + (p.value - f.m->weights);
    for (int64_t k = 0; k < p.count; k++) bad += p.value[k] != old[k] - lr * p.grad[k];
  }
  CHECK(bad == 0, "%d parameters are not p - lr g", bad);
  /* the loss goes down after a small step */
  CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &s2));
  CHECK(s2.loss < s1.loss, "loss %.6g -> %.6g after one SGD step", s1.loss, s2.loss);
  float *g1 = grads_copy(f.m);
  CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &s2));
  CHECK(memcmp(g1, f.m->grads, (size_t)f.m->nweights * sizeof(float)) == 0, "two steps differ");
  free(g1), free(w0);
  ts_nn_attn_destroy(a);
  fixture_free(&f);
}

static void test_planner(void) {
  fixture f;
  fixture_make(&f, 64, "window2d:k=3", 2);
  ts_nn_attn *a = backend(&f, TS_NN_ATTN_FIXED, TS_REORDER_NONE);
  CHECK_OK(ts_nn_vit_set_attn(f.m, a));
  const int64_t L = f.m->cfg.depth;
  ts_nn_vit_mem mm;
  CHECK_OK(ts_nn_vit_train_mem(f.m, &mm));
  CHECK(mm.layer[TS_NN_MEM_STORE_SCORES] > mm.layer[TS_NN_MEM_RECOMPUTE] &&
            mm.layer[TS_NN_MEM_RECOMPUTE] > mm.layer[TS_NN_MEM_CHECKPOINT] && mm.remat > 0 && mm.fixed > 0,
        "layer bytes %lld %lld %lld", (long long)mm.layer[0], (long long)mm.layer[1], (long long)mm.layer[2]);
  ts_nn_mem_strategy all[2], out[2];
  for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
    for (int64_t l = 0; l < L; l++) all[l] = (ts_nn_mem_strategy)k;
    int64_t bound = ts_nn_vit_train_bound(&mm, all, L);
    CHECK(bound == mm.fixed + mm.scratch + L * mm.layer[k] + (k == TS_NN_MEM_CHECKPOINT ? mm.remat : 0), "bound %d", k);
  }
  for (int64_t l = 0; l < L; l++) all[l] = TS_NN_MEM_CHECKPOINT;
  const int64_t need_ck = ts_nn_vit_train_bound(&mm, all, L);
  for (int64_t l = 0; l < L; l++) all[l] = TS_NN_MEM_RECOMPUTE;
  const int64_t need_rec = ts_nn_vit_train_bound(&mm, all, L);
  for (int64_t l = 0; l < L; l++) all[l] = TS_NN_MEM_STORE_SCORES;
  const int64_t need_ss = ts_nn_vit_train_bound(&mm, all, L);

  /* given times: store_scores fastest, checkpoint slowest */
  const double times[TS_NN_MEM_COUNT] = {1.0, 0.8, 1.5};
  ts_nn_mem_plan_opts o;
  ts_nn_mem_plan_opts_default(&o, need_ss);
  o.times = times;
  ts_nn_mem_plan_info info;
  CHECK_OK(ts_nn_vit_plan_memory(f.m, &o, out, &info));
  CHECK(info.count[TS_NN_MEM_STORE_SCORES] == L && info.bound <= need_ss, "roomy budget: %d store_scores",
        info.count[TS_NN_MEM_STORE_SCORES]);
  /* each budget: the choice's bound and the measured peak stay under it, and nothing faster fits */
  const int64_t budgets[] = {need_ss - 1, need_rec, need_rec - 1, (need_rec + need_ck) / 2, need_ck};
  for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
    o.budget = budgets[b];
    CHECK_OK(ts_nn_vit_plan_memory(f.m, &o, out, &info));
    CHECK(info.bound <= o.budget && info.bound == ts_nn_vit_train_bound(&mm, out, L), "budget %lld: bound %lld",
          (long long)o.budget, (long long)info.bound);
    double t = 0;
    for (int64_t l = 0; l < L; l++) t += times[out[l]];
    CHECK(fabs(t - info.predicted_s) < 1e-12, "predicted %g, sum %g", info.predicted_s, t);
    if (o.budget < need_rec) CHECK(info.count[TS_NN_MEM_CHECKPOINT] > 0, "budget %lld: no checkpoint", (long long)o.budget);
    if (o.budget == need_rec) CHECK(info.count[TS_NN_MEM_CHECKPOINT] == 0, "budget %lld: checkpoint", (long long)o.budget);
    CHECK_OK(ts_nn_vit_train_set_strategies(f.m, out));
    ts_nn_vit_train_stats st;
    CHECK_OK(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st));
    CHECK(st.peak_bytes <= o.budget && st.peak_bytes <= st.bound_bytes, "budget %lld: measured peak %lld (bound %lld)",
          (long long)o.budget, (long long)st.peak_bytes, (long long)st.bound_bytes);
  }
  /* below what every layer CHECKPOINT needs: a clear error; a budget of 0: invalid */
  o.budget = need_ck - 1;
  CHECK_STATUS(ts_nn_vit_plan_memory(f.m, &o, out, &info), TS_ERR_INFEASIBLE);
  CHECK(strstr(ts_last_error(), "CHECKPOINT") != NULL, "%s", ts_last_error());
  o.budget = 0;
  CHECK_STATUS(ts_nn_vit_plan_memory(f.m, &o, out, &info), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_vit_plan_memory(f.m, NULL, out, &info), TS_ERR_INVALID_ARG);
  /* measured (no store: the test cache is shared), then through the artifact store twice */
  ts_nn_mem_plan_opts_default(&o, need_rec);
  o.rounds = 1, o.cache = false;
  CHECK_OK(ts_nn_vit_plan_memory(f.m, &o, out, &info));
  CHECK(info.time_s[0] > 0 && info.time_s[1] > 0 && info.time_s[2] > 0 && !info.cached && info.bound <= need_rec,
        "measured %g %g %g", info.time_s[0], info.time_s[1], info.time_s[2]);
  o.cache = true;
  CHECK_OK(ts_nn_vit_plan_memory(f.m, &o, out, &info));
  ts_nn_mem_plan_info again;
  CHECK_OK(ts_nn_vit_plan_memory(f.m, &o, out, &again));
  CHECK(again.cached && memcmp(again.time_s, info.time_s, sizeof info.time_s) == 0, "second plan not from the store");
  ts_nn_attn_destroy(a);
  fixture_free(&f);
}

static void test_bad_inputs(void) {
  fixture f;
  fixture_make(&f, 64, "dense", 1);
  ts_nn_vit_train_stats st;
  ts_nn_mem_strategy s[2] = {TS_NN_MEM_RECOMPUTE, (ts_nn_mem_strategy)9};
  ts_nn_vit_mem mm;
  CHECK_STATUS(ts_nn_vit_train_step(f.m, f.img, f.labels, 0.0f, &st), TS_ERR_INVALID_ARG); /* no backend */
  CHECK_STATUS(ts_nn_vit_train_mem(f.m, &mm), TS_ERR_INVALID_ARG);
  ts_nn_attn *a = backend(&f, TS_NN_ATTN_DENSE_FLASH, TS_REORDER_NONE);
  CHECK_OK(ts_nn_vit_set_attn(f.m, a));
  CHECK_STATUS(ts_nn_vit_train_step(NULL, f.img, f.labels, 0.0f, &st), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_vit_train_step(f.m, NULL, f.labels, 0.0f, &st), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_vit_train_step(f.m, f.img, NULL, 0.0f, &st), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_vit_train_step(f.m, f.img, f.labels, -1.0f, &st), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_vit_train_step(f.m, f.img, f.labels, NAN, &st), TS_ERR_INVALID_ARG);
  int32_t bad[B] = {0, 10};
  CHECK_ERR_CONTAINS(ts_nn_vit_train_step(f.m, f.img, bad, 0.0f, &st), "label[1] = 10");
  bad[1] = -1;
  CHECK_ERR_CONTAINS(ts_nn_vit_train_step(f.m, f.img, bad, 0.0f, &st), "label[1] = -1");
  CHECK(f.m->grads == NULL, "bad input allocated the gradients");
  CHECK_ERR_CONTAINS(ts_nn_vit_train_set_strategies(f.m, s), "layer 1");
  CHECK_STATUS(ts_nn_vit_train_set_strategies(NULL, NULL), TS_ERR_INVALID_ARG);
  ts_nn_vit_param p;
  CHECK_STATUS(ts_nn_vit_param_get(f.m, -1, &p), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_vit_param_get(f.m, ts_nn_vit_param_count(f.m), &p), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_nn_vit_param_get(f.m, 0, &p));
  CHECK(strcmp(p.name, "patch_embed.weight") == 0 && p.grad == NULL && p.ndim == 2 && p.shape[0] == 768 &&
            p.shape[1] == 64,
        "param 0: %s", p.name);
  CHECK_OK(ts_nn_vit_param_get(f.m, 3 + 12 + 2, &p));
  CHECK(strcmp(p.name, "blocks.1.attn.qkv.weight") == 0 && p.shape[1] == 192, "%s", p.name);
  CHECK_OK(ts_nn_vit_param_get(f.m, ts_nn_vit_param_count(f.m) - 1, &p));
  CHECK(strcmp(p.name, "head.bias") == 0 && p.ndim == 1 && p.count == 10, "%s", p.name);
  int64_t total = 0;
  for (int i = 0; i < ts_nn_vit_param_count(f.m); i++) {
    CHECK_OK(ts_nn_vit_param_get(f.m, i, &p));
    total += p.count;
  }
  CHECK(total <= f.m->nweights && total > f.m->nweights * 9 / 10, "params %lld of %lld", (long long)total,
        (long long)f.m->nweights);
  /* backend entry points */
  CHECK_STATUS(ts_nn_attn_run_train(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_attn_run_train(a, NULL, f.img, f.img, f.img, f.img, NULL, NULL, 1, 1), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_attn_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1),
               TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_attn_train_prepare(NULL, NULL), TS_ERR_INVALID_ARG);
  CHECK(ts_nn_attn_score_floats(a) > 0 && ts_nn_attn_score_floats(NULL) == 0, "score floats");
  ts_nn_attn_destroy(a);
  fixture_free(&f);
}

int main(void) {
  test_names();
  test_bad_inputs();
  test_finite_differences();
  test_sgd();
  test_backends(64, "window2d:k=3");
  test_backends(128, "window2d:k=5");
  test_backends(64, "dense");
  test_planner();
  return tst_finish();
}
