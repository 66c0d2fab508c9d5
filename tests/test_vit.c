/* ViT end to end: pattern specs filled from the grid, token masks, configurations, and the forward
 * pass. The model with the `reference` attention backend is checked against a double-precision
 * naive forward written here from the parameters (unfold, embeddings, LayerNorm, masked softmax
 * attention, GELU, mean pool, head); every fast backend (dense_flash, fixed at two tiles,
 * scheduled with several reorderings, and a custom schedule under a random token permutation) is
 * checked against the reference backend, on 4x4 and 8x8 token grids, batch 2, patterns window2d,
 * swin (shifted), vitdet with global tokens, and dense.
 *
 * Tolerances. Both sides of the backend comparison run the same fp32 GEMMs; they differ only in
 * the attention kernels, which are within 2e-5 max|V| of a double reference (attn.h; measured
 * 4e-6), so each layer's attention output differs by ~1e-6 relative, carried through two blocks
 * with O(1) gain: we allow 2e-5 * max(1, max|logit|) (measured 3.3e-7). Against the double naive
 * forward, the fp32 GEMMs add rounding of about K u (K <= 768 = 3*16*16, u = 6e-8), i.e. up to a
 * few 1e-5 relative in the worst case: we allow 1e-4 * max(1, max|logit|) (measured 4.8e-7).
 * init_std is 0.2 so attention scores are O(1) and the mask visibly changes the logits. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "tessera/nn.h"
#include "tst.h"
#include "vit_naive.h"

static void test_spec(void) {
  char b[128];
  CHECK_OK(ts_nn_spec_for_grid("window2d:k=13", 4, 5, b, sizeof b));
  CHECK(strcmp(b, "window2d:h=4,w=5,k=13") == 0, "%s", b);
  CHECK_OK(ts_nn_spec_for_grid("swin:win=7,shift=1", 14, 14, b, sizeof b));
  CHECK(strcmp(b, "swin:h=14,w=14,win=7,shift=1") == 0, "%s", b);
  CHECK_OK(ts_nn_spec_for_grid("permute:vitdet:win=14,global=4,seed=3", 32, 32, b, sizeof b));
  CHECK(strcmp(b, "permute:vitdet:h=32,w=32,win=14,global=4,seed=3") == 0, "%s", b);
  CHECK_OK(ts_nn_spec_for_grid("window2d:h=3,w=3,k=3", 8, 8, b, sizeof b));
  CHECK(strcmp(b, "window2d:h=3,w=3,k=3") == 0, "%s", b);
  CHECK_OK(ts_nn_spec_for_grid("dense", 8, 8, b, sizeof b));
  CHECK(strcmp(b, "dense") == 0, "%s", b);
  CHECK_OK(ts_nn_spec_for_grid("window2d:", 2, 3, b, sizeof b));
  CHECK(strcmp(b, "window2d:h=2,w=3") == 0, "%s", b);
  CHECK_OK(ts_nn_spec_for_grid("vitdet", 2, 3, b, sizeof b));
  CHECK(strcmp(b, "vitdet:h=2,w=3") == 0, "%s", b);
  CHECK_STATUS(ts_nn_spec_for_grid("", 2, 3, b, sizeof b), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_spec_for_grid("window2d:k=13", 2, 3, b, 8), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_nn_spec_for_grid("window2d:k=13", 0, 3, b, sizeof b), TS_ERR_INVALID_ARG);
}

static void test_mask(void) {
  ts_nn_token_mask m, p;
  CHECK_OK(ts_nn_token_mask_create("window2d:k=3", 4, 4, &m));
  CHECK(m.n == 16 && !m.dense && m.nnz == 16 * 9 && fabs(m.density - 9.0 / 16) < 1e-12, "nnz %lld", (long long)m.nnz);
  /* permute: is undone, so the mask is the same grid-order pattern */
  CHECK_OK(ts_nn_token_mask_create("permute:window2d:k=3,seed=5", 4, 4, &p));
  CHECK(ts_csr_equal(&m.csr, &p.csr), "permute: not undone");
  ts_nn_token_mask_free(&p);
  ts_nn_token_mask_free(&m);
  CHECK_OK(ts_nn_token_mask_create("dense", 3, 5, &m));
  CHECK(m.dense && m.n == 15 && m.nnz == 225 && m.density == 1.0, "dense");
  ts_nn_token_mask_free(&m);
  CHECK_STATUS(ts_nn_token_mask_create("keep:window2d:k=3,ratio=0.5", 4, 4, &m), TS_ERR_SHAPE);
  CHECK(m.n == 0 && m.csr.rowptr == NULL, "zeroed on error");
  CHECK_ERR_CONTAINS(ts_nn_token_mask_create("window2d:k=4", 4, 4, &m), "odd");
  CHECK_ERR_CONTAINS(ts_nn_token_mask_create("nosuch:k=4", 4, 4, &m), "nosuch");
  CHECK_STATUS(ts_nn_token_mask_create("window2d:k=3", 0, 4, &m), TS_ERR_INVALID_ARG);
}

static void test_config(void) {
  ts_nn_vit_config c;
  CHECK_OK(ts_nn_vit_config_preset("deit-s", 224, &c));
  CHECK(c.dim == 384 && c.heads == 6 && c.depth == 12 && c.mlp == 1536 && c.classes == 1000 && c.img_h == 224, "deit-s");
  CHECK_OK(ts_nn_vit_config_preset("vit-b16", 2048, &c));
  CHECK(c.dim == 768 && c.heads == 12 && c.mlp == 3072 && c.img_w == 2048, "vit-b16");
  CHECK_ERR_CONTAINS(ts_nn_vit_config_preset("resnet", 224, &c), "resnet");
  CHECK_ERR_CONTAINS(ts_nn_vit_config_preset("deit-s", 200, &c), "200");
  CHECK_OK(ts_nn_vit_config_preset("tiny", 64, &c));
  c.heads = 3;
  CHECK_ERR_CONTAINS(ts_nn_vit_config_validate(&c), "heads");
  c.heads = 2, c.img_w = 72;
  CHECK_ERR_CONTAINS(ts_nn_vit_config_validate(&c), "patch");
  c.img_w = 64, c.depth = 0;
  CHECK_ERR_CONTAINS(ts_nn_vit_config_validate(&c), "depth");
  ts_nn_vit *m = (ts_nn_vit *)1;
  CHECK_STATUS(ts_nn_vit_create(&m, NULL, &c, 1), TS_ERR_INVALID_ARG);
  CHECK(m == NULL, "handle cleared on error");
}

/* ---- backends against the reference --------------------------------------------------------- */

static double max_abs(const float *x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
  return m;
}

/* Runs the forward with backend a into logits (poisoned first, guard checked). */
static void forward_with(ts_nn_vit *m, ts_nn_attn *a, const float *img, float *logits, size_t nl, const char *what) {
  CHECK_OK(ts_nn_vit_set_attn(m, a));
  tst_poison(logits, nl);
  CHECK_OK(ts_nn_vit_forward(m, img, logits));
  CHECK(tst_guard_ok(logits, nl), "%s: guard bytes after the logits overwritten", what);
  ts_nn_vit_timing t;
  ts_nn_vit_last_timing(m, &t);
  CHECK(t.total_s > 0 && t.attn_s >= 0 && t.attn_s <= t.total_s, "%s: timing %g %g", what, t.total_s, t.attn_s);
}

static void test_model(int64_t res, const char *spec, int threads, double *worst_backend, double *worst_naive) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, threads));
  ts_nn_vit_config c;
  CHECK_OK(ts_nn_vit_config_preset("tiny", res, &c));
  c.init_std = 0.2f;
  c.seed = 11;
  const int64_t B = 2;
  ts_nn_vit *m = NULL;
  CHECK_OK(ts_nn_vit_create(&m, ctx, &c, B));
  if (!m) return;
  int64_t gh, gw, n, hd;
  ts_nn_vit_shape(m, &gh, &gw, &n, &hd);
  CHECK(gh == res / 16 && gw == res / 16 && n == gh * gw && hd == 32, "shape");
  size_t nimg = (size_t)(B * 3 * res * res), nl = (size_t)(B * c.classes);
  float *img = malloc(nimg * sizeof *img), *ref = tst_alloc_guarded(nl), *out = tst_alloc_guarded(nl);
  tst_fill_uniform(img, nimg, 1234 + (uint64_t)res, -1, 1);
  CHECK_STATUS(ts_nn_vit_forward(m, img, out), TS_ERR_INVALID_ARG); /* no backend yet */

  ts_nn_token_mask mask;
  CHECK_OK(ts_nn_token_mask_create(spec, gh, gw, &mask));
  ts_nn_attn_opts o;
  ts_nn_attn_opts_default(&o, TS_NN_ATTN_REFERENCE);
  ts_nn_attn *a = NULL;
  CHECK_OK(ts_nn_attn_create(&a, ctx, &mask, hd, &o));
  forward_with(m, a, img, ref, nl, "reference");
  ts_nn_attn_destroy(a);
  double scale = fmax(1.0, max_abs(ref, nl));

  /* the reference backend against the naive double forward (grid order) */
  uint8_t *u8 = NULL;
  if (!mask.dense) {
    u8 = malloc((size_t)(n * n));
    CHECK_OK(ts_csr_to_dense_u8(&mask.csr, u8));
  }
  double *nv = malloc(nl * sizeof *nv);
  naive_forward(m, img, u8, nv);
  double e = 0;
  for (size_t i = 0; i < nl; i++) {
    double d = fabs(nv[i] - ref[i]);
    if (!(d <= e)) e = d; /* NaN wins */
  }
  CHECK(e <= 1e-4 * scale, "%s res %lld: reference model vs naive double: %g (scale %g)", spec, (long long)res, e, scale);
  *worst_naive = fmax(*worst_naive, e / scale);
  /* the logits depend on the batch item (a wiring check) */
  CHECK(tst_max_abs_diff(ref, ref + c.classes, (size_t)c.classes) > 1e-3, "batch items give the same logits");

  struct {
    ts_nn_attn_kind kind;
    ts_attn_tile tile;
    ts_reorder_method reorder;
    int solver;
    const char *name;
  } cases[] = {
      {TS_NN_ATTN_DENSE_FLASH, {64, 64}, TS_REORDER_NONE, -1, "dense_flash 64x64"},
      {TS_NN_ATTN_DENSE_FLASH, {8, 16}, TS_REORDER_NONE, -1, "dense_flash 8x16"},
      {TS_NN_ATTN_FIXED, {64, 64}, TS_REORDER_NONE, -1, "fixed 64x64"},
      {TS_NN_ATTN_FIXED, {16, 16}, TS_REORDER_NONE, -1, "fixed 16x16"},
      {TS_NN_ATTN_SCHEDULED, {0, 0}, TS_REORDER_AUTO, TS_ATTN_SOLVER_ILP, "scheduled auto ilp"},
      {TS_NN_ATTN_SCHEDULED, {0, 0}, TS_REORDER_NONE, TS_ATTN_SOLVER_GREEDY, "scheduled none greedy"},
      {TS_NN_ATTN_SCHEDULED, {0, 0}, TS_REORDER_RCM, -1, "scheduled rcm no solver"},
      {TS_NN_ATTN_SCHEDULED, {0, 0}, TS_REORDER_HILBERT, TS_ATTN_SOLVER_ILP, "scheduled hilbert ilp"},
      {TS_NN_ATTN_SCHEDULED, {0, 0}, TS_REORDER_HILBERT, -1, "scheduled hilbert no solver"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ts_nn_attn_opts_default(&o, cases[k].kind);
    if (cases[k].tile.br) o.tile = cases[k].tile;
    o.reorder.method = cases[k].reorder;
    o.reorder.tile = 4; /* small grids: judge orders by small tiles */
    o.blocks.min_nnz = 2;
    if (cases[k].kind == TS_NN_ATTN_SCHEDULED) o.solver = cases[k].solver;
    o.solve_time_limit = 0.05;
    a = NULL;
    CHECK_OK(ts_nn_attn_create(&a, ctx, &mask, hd, &o));
    if (!a) continue;
    ts_nn_attn_info info;
    ts_nn_attn_get_info(a, &info);
    CHECK(info.kind == cases[k].kind && info.n == n && info.d == hd && info.plan_ms >= 0 && info.stats.nnz == mask.nnz,
          "%s: info", cases[k].name);
    if (cases[k].reorder == TS_REORDER_HILBERT && !mask.dense) CHECK(info.perm != NULL, "hilbert gave the identity");
    if (cases[k].kind == TS_NN_ATTN_SCHEDULED)
      CHECK((cases[k].solver < 0) == (info.solver < 0), "%s: solver %d", cases[k].name, info.solver);
    else
      CHECK(info.solver == -1, "%s: solver %d", cases[k].name, info.solver);
    forward_with(m, a, img, out, nl, cases[k].name);
    double d = tst_max_abs_diff(out, ref, nl);
    CHECK(d <= 2e-5 * scale, "%s, %s res %lld: logits differ from the reference backend by %g (scale %g)",
          cases[k].name, spec, (long long)res, d, scale);
    *worst_backend = fmax(*worst_backend, d / scale);
    ts_nn_attn_destroy(a);
  }

  /* custom: a random token order and a block-skip schedule of the permuted mask */
  int32_t *perm = malloc((size_t)n * sizeof *perm);
  ts_perm_random(perm, n, 99);
  ts_attn_schedule s;
  CHECK_OK(ts_attn_schedule_blockskip(&s, n, 16, 32));
  a = NULL;
  CHECK_OK(ts_nn_attn_create_custom(&a, ctx, &mask, perm, &s, hd));
  if (a) {
    forward_with(m, a, img, out, nl, "custom permuted");
    double d = tst_max_abs_diff(out, ref, nl);
    CHECK(d <= 2e-5 * scale, "custom permuted, %s res %lld: %g", spec, (long long)res, d);
    *worst_backend = fmax(*worst_backend, d / scale);
    ts_nn_attn_destroy(a);
  }
  perm[0] = perm[1];
  CHECK_ERR_CONTAINS(ts_nn_attn_create_custom(&a, ctx, &mask, perm, &s, hd), "perm");
  ts_attn_schedule_free(&s);
  free(perm);

  /* a backend for another token count or head dimension does not fit */
  ts_nn_token_mask other;
  CHECK_OK(ts_nn_token_mask_create("dense", gh + 1, gw, &other));
  ts_nn_attn_opts_default(&o, TS_NN_ATTN_FIXED);
  CHECK_OK(ts_nn_attn_create(&a, ctx, &other, hd, &o));
  CHECK_STATUS(ts_nn_vit_set_attn(m, a), TS_ERR_SHAPE);
  ts_nn_attn_destroy(a);
  CHECK_OK(ts_nn_attn_create(&a, ctx, &mask, hd + 1, &o));
  CHECK_STATUS(ts_nn_vit_set_attn(m, a), TS_ERR_SHAPE);
  ts_nn_attn_destroy(a);
  ts_nn_token_mask_free(&other);
  o.kind = TS_NN_ATTN_CUSTOM;
  CHECK_STATUS(ts_nn_attn_create(&a, ctx, &mask, hd, &o), TS_ERR_INVALID_ARG);
  CHECK(a == NULL, "handle cleared on error");

  free(nv), free(u8), free(img);
  ts_free(ref), ts_free(out);
  ts_nn_token_mask_free(&mask);
  ts_nn_vit_destroy(m);
  ts_context_destroy(ctx);
}

/* The mask matters: window2d and dense logits differ (so the comparisons above can fail). */
static void test_mask_matters(void) {
  ts_nn_vit_config c;
  CHECK_OK(ts_nn_vit_config_preset("tiny", 128, &c));
  c.init_std = 0.2f;
  ts_nn_vit *m = NULL;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 1));
  CHECK_OK(ts_nn_vit_create(&m, ctx, &c, 1));
  if (!m) return;
  float img[3 * 128 * 128], l1[10], l2[10];
  tst_fill_uniform(img, sizeof img / sizeof img[0], 5, -1, 1);
  const char *specs[2] = {"window2d:k=3", "dense"};
  float *outs[2] = {l1, l2};
  for (int k = 0; k < 2; k++) {
    ts_nn_token_mask mask;
    ts_nn_attn *a = NULL;
    CHECK_OK(ts_nn_token_mask_create(specs[k], 8, 8, &mask));
    CHECK_OK(ts_nn_attn_create(&a, ctx, &mask, 32, NULL));
    CHECK_OK(ts_nn_vit_set_attn(m, a));
    CHECK_OK(ts_nn_vit_forward(m, img, outs[k]));
    ts_nn_attn_destroy(a);
    ts_nn_token_mask_free(&mask);
  }
  CHECK(tst_max_abs_diff(l1, l2, 10) > 1e-3, "window2d and dense logits agree: the mask has no effect");
  /* 64 tokens, patch rows 768, dim 64, depth 2, mlp 128, 10 classes, 2 heads of 32 */
  double gemm = 2.0 * 64 * 768 * 64 + 2 * 2.0 * 64 * (3 * 4096 + 4096 + 2 * 64 * 128) + 2.0 * 64 * 10;
  CHECK(fabs(ts_nn_vit_flops(m, 576) - (gemm + 2 * 2 * 4.0 * 32 * 576)) < 1, "flops %g", ts_nn_vit_flops(m, 576));
  ts_nn_vit_destroy(m);
  ts_context_destroy(ctx);
}

int main(void) {
  test_spec();
  test_mask();
  test_config();
  double wb = 0, wn = 0;
  /* Mostly one thread: with OpenMP's default spin-waiting, the idle team members of many tiny
   * parallel regions steal the CPU on a loaded machine (seconds); one run uses 2 threads for the
   * parallel paths (row loops, plan panels). Library calls that use the default count get 1. */
  setenv("TESSERA_THREADS", "1", 1);
  omp_set_num_threads(1);
  const struct {
    int64_t res;
    const char *spec;
    int threads;
  } runs[] = {{64, "window2d:k=3", 1},  {64, "swin:win=2,shift=1", 1},    {64, "dense", 1},
              {128, "window2d:k=3", 2}, {128, "swin:win=4,shift=1", 1},    {128, "vitdet:win=4,global=2", 1},
              {128, "dense", 1},        {128, "permute:window2d:k=5,seed=4", 1}};
  for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++)
    test_model(runs[k].res, runs[k].spec, runs[k].threads, &wb, &wn);
  test_mask_matters();
  printf("worst relative logit error: fast backends vs reference %.3g, reference model vs naive double %.3g\n", wb, wn);
  return tst_finish();
}
