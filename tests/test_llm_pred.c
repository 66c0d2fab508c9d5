/* Activation predictors for ReLU-gated models (tessera/llm_pred.h, issue 39): the ReLU model's dense
 * forward against the double-precision reference, the predictors' kernels against their scalar
 * forms (exact: integer counts, then the same fp32 combination), x's codes, calibration meeting its
 * false-skip budget, the predictor files, decode with predictors against the oracle and its
 * measured confusion, and the errors (SiLU models, alpha out of range, bad files). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/pred_internal.h"
#include "test_llm_tiny.h"
#include "tessera/llm_pred.h"
#include "tst.h"
#include "tst_dispatch.h"

static ts_llm_model *load_tiny(const tiny_cfg *c, const char *file) { return tiny_load(c, file); }

static tiny_cfg relu_cfg(void) {
  tiny_cfg c = tiny_default(TS_QT_Q8_0);
  c.relu = true;
  c.d = 128, c.ff = 192, c.n_head = 4, c.n_kv = 2, c.hd = 32; /* multiples of 32: sparse decode */
  return c;
}

#define NSEQ 24
static const int32_t kSeq[NSEQ] = {0, 270, 40, 201, 77, 5, 99, 260, 261, 123, 200, 3, 88, 17, 45, 279, 150, 9, 33, 222, 101, 64, 12, 7};

/* Dense decode of the ReLU model against the reference (tiny_reference's relu path), with the
 * same bound as test_llm.c's quantized models: 5% of the largest logit (the int8 activations and
 * the Q8_0 weights' rounding through two layers; derived there). */
static void check_dense(ts_llm_model *m) {
  const int nv = ts_llm_model_config(m)->n_vocab;
  CHECK(ts_llm_model_config(m)->ffn_act == TS_LLM_ACT_RELU, "the tiny model reads as %s-gated", ts_llm_act_name(ts_llm_model_config(m)->ffn_act));
  double *ref = malloc((size_t)NSEQ * nv * sizeof *ref);
  float *got = malloc((size_t)NSEQ * nv * sizeof *got);
  tiny_qact = true;
  tiny_reference(m, kSeq, NSEQ, ref);
  double scale = 0, err = 0;
  for (size_t i = 0; i < (size_t)NSEQ * nv; i++) scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, ctx, 32, 1));
  for (int t = 0; t < NSEQ && s; t++) CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, got + (size_t)t * nv));
  for (size_t i = 0; i < (size_t)NSEQ * nv; i++) err = fmax(err, fabs(got[i] - ref[i]));
  CHECK(err <= 5e-2 * scale, "relu decode vs reference: max error %.3g, scale %.3g", err, scale);
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
  free(ref), free(got);
}

/* Kernels: every variant the CPU has equals the reference exactly (counts are integers; Grasp's
 * estimate is the same fp32 combination of them). */
static void check_kernels(void) {
  ts_rng r;
  ts_rng_seed(&r, 5);
  const int nws[4] = {1, 6, 9, 13};
  for (int q = 0; q < 4; q++) {
    const int nw = nws[q], n = 37, d = 64 * nw - 5;
    uint64_t *sw = malloc((size_t)n * nw * 8), *bw = malloc((size_t)n * nw * 8);
    float *u0 = malloc(n * sizeof *u0), *u1 = malloc(n * sizeof *u1), *x = malloc((size_t)d * sizeof *x);
    float oval[1024];
    int32_t oidx[1024];
    for (int i = 0; i < n * nw; i++) sw[i] = ts_rng_next(&r), bw[i] = ts_rng_next(&r);
    for (int i = 0; i < n; i++) u0[i] = 0.01f + (float)ts_rng_uniform(&r), u1[i] = u0[i] * 2;
    for (int j = 0; j < d; j++) x[j] = (float)ts_rng_normal(&r) * (j % 17 == 0 ? 8.0f : 1.0f); /* a few outliers */
    ts__pred_x px;
    const int no = ts__pred_codes(x, d, 3.0f, true, &px, oidx, oval);
    /* codes: the sign bits, the groups and the outliers partition the d elements */
    int tot = no;
    for (int a = 0; a < TS__PRED_G; a++) tot += px.gn[a];
    CHECK(tot == d, "nw %d: groups %d + %d + %d and %d outliers make %d of %d", nw, px.gn[0], px.gn[1], px.gn[2], no, tot, d);
    CHECK(no > 0 && px.gv[0] <= px.gv[1] && px.gv[1] <= px.gv[2], "nw %d: %d outliers, group means %g %g %g", nw, no, (double)px.gv[0],
          (double)px.gv[1], (double)px.gv[2]);
    for (int j = 0; j < d; j++) {
      const bool neg = (px.sx[j >> 6] >> (j & 63)) & 1;
      if (neg != (x[j] < 0)) {
        CHECK(0, "nw %d: sign bit %d is %d for %g", nw, j, neg, (double)x[j]);
        break;
      }
    }
    for (int j = d; j < 64 * nw; j++) /* bits past d stay 0 in x's masks: a row's padding counts nothing */
      CHECK(!((px.sx[j >> 6] >> (j & 63)) & 1) && !((px.gm[0][j >> 6] | px.gm[1][j >> 6] | px.gm[2][j >> 6]) >> (j & 63) & 1),
            "nw %d: padding bit %d set", nw, j);
    int32_t ref_neg[64], neg[64];
    float ref_est[64], est[64];
    ts__signbit_ref(sw, nw, px.sx, n, ref_neg);
    ts__grasp_ref(sw, bw, nw, &px, n, u0, u1, ref_est);
    TST_EACH_VARIANT(&ts__pred_dispatch, v, ts__pred_kern, k) {
      k->signs(sw, nw, px.sx, n, neg);
      k->grasp(sw, bw, nw, &px, n, u0, u1, est);
      CHECK(!memcmp(neg, ref_neg, n * sizeof *neg), "nw %d variant %d: sign counts differ", nw, v);
      CHECK(!memcmp(est, ref_est, n * sizeof *est), "nw %d variant %d: grasp estimates differ", nw, v);
    }
    free(sw), free(bw), free(u0), free(u1), free(x);
  }
}

/* Logits of NSEQ decode steps with sparse object sp (NULL: dense). */
static void decode(ts_llm_model *m, ts_context *ctx, const ts_llm_sparse *sp, float *out, ts_llm_sparse_stats *ss) {
  const int nv = ts_llm_model_config(m)->n_vocab;
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, ctx, 32, 1));
  if (!s) return;
  CHECK_OK(ts_llm_state_set_sparse(s, sp));
  for (int t = 0; t < NSEQ; t++) CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, out + (size_t)t * nv));
  if (ss) ts_llm_state_sparse_stats(s, ss);
  ts_llm_state_destroy(s);
}

static void check_predictors(ts_llm_model *m) {
  const int nv = ts_llm_model_config(m)->n_vocab, L = ts_llm_model_config(m)->n_layer;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  /* calibration tokens: a seeded random sequence, 8 windows of 32 */
  enum { NT = 256 };
  int32_t *tok = malloc(NT * sizeof *tok);
  ts_rng r;
  ts_rng_seed(&r, 9);
  for (int i = 0; i < NT; i++) tok[i] = 3 + (int32_t)ts_rng_below(&r, (uint64_t)(nv - 3));
  ts_llm_state *st = NULL;
  CHECK_OK(ts_llm_state_create(&st, m, ctx, 32, 32));
  ts_llm_pred_opts po = ts_llm_pred_opts_default();
  po.window = 32, po.max_tokens = NT, po.hidden = 16, po.epochs = 3;
  ts_llm_pred_calib *cal = NULL;
  CHECK_OK(ts_llm_pred_collect(&cal, st, tok, NT, &po));
  const double F = 0.05;
  const ts_llm_pred_kind kinds[3] = {TS_LLM_PRED_SIGNBIT, TS_LLM_PRED_GRASP, TS_LLM_PRED_LEARNED};
  float *oracle = malloc((size_t)NSEQ * nv * sizeof *oracle), *got = malloc((size_t)NSEQ * nv * sizeof *got);
  ts_llm_predictor *orp = NULL;
  CHECK_OK(ts_llm_pred_calibrate(cal, TS_LLM_PRED_ORACLE, F, &po, &orp));
  ts_llm_sparse *osp = NULL;
  CHECK_OK(ts_llm_sparse_create_pred(&osp, m, orp, true, ctx));
  decode(m, ctx, osp, oracle, NULL);
  /* the oracle against dense: only down's re-quantized copy differs (its step is Q8_0's along
   * the outputs: within the dense path's own bound of 5% of the largest logit) */
  float *dense = malloc((size_t)NSEQ * nv * sizeof *dense);
  decode(m, ctx, NULL, dense, NULL);
  double scale = 0;
  for (size_t i = 0; i < (size_t)NSEQ * nv; i++) scale = fmax(scale, fabs(dense[i]));
  CHECK(tst_max_abs_diff(oracle, dense, (size_t)NSEQ * nv) <= 5e-2 * scale, "oracle vs dense differ by %.3g (scale %.3g)",
        tst_max_abs_diff(oracle, dense, (size_t)NSEQ * nv), scale);
  for (int ki = 0; ki < 3; ki++) {
    ts_llm_predictor *p = NULL;
    CHECK_OK(ts_llm_pred_calibrate(cal, kinds[ki], F, &po, &p));
    if (!p) continue;
    const char *kn = ts_llm_pred_kind_name(kinds[ki]);
    for (int l = 0; l < L; l++) {
      const ts_llm_pred_layer *y = ts_llm_predictor_layer_const(p, l);
      /* the knob's false-skip rate on the calibration tokens is within the budget (signbit's alpha
       * may be clamped to its range: then at most the budget too, or lower) */
      CHECK(y->false_skip <= F + 1e-12 && y->efficiency >= 0 && y->efficiency <= 1 && y->zero_share > 0.2 && y->zero_share < 0.8,
            "%s layer %d: false-skip %.4f (budget %.2f), efficiency %.3f, zeros %.3f", kn, l, y->false_skip, F, y->efficiency, y->zero_share);
    }
    /* several budgets at once (one training, one pass of scores) give the same knobs as one */
    const double two[2] = {0.01, F};
    ts_llm_predictor *ps[2] = {NULL, NULL};
    double ceff[8 * 2];
    CHECK_OK(ts_llm_pred_calibrate_set(cal, kinds[ki], two, 2, &po, ps, two, 2, ceff));
    for (int l = 0; ps[1] && l < L && l < 8; l++) {
      const ts_llm_pred_layer *a = ts_llm_predictor_layer_const(p, l), *b = ts_llm_predictor_layer_const(ps[1], l);
      CHECK(a->alpha == b->alpha && a->tau == b->tau && a->efficiency == b->efficiency, "%s layer %d: the set's knob differs from one budget's", kn, l);
      CHECK(ceff[l * 2 + 1] == a->efficiency || kinds[ki] == TS_LLM_PRED_SIGNBIT, "%s layer %d: the set's curve %.4f vs %.4f", kn, l, ceff[l * 2 + 1], a->efficiency);
    }
    ts_llm_predictor_destroy(ps[0]), ts_llm_predictor_destroy(ps[1]);
    /* the curve at the budget gives the calibrated efficiency */
    double eff[2 * 8];
    const double fs[1] = {F};
    CHECK_OK(ts_llm_pred_curve(cal, p, fs, 1, eff));
    for (int l = 0; l < L && l < 8; l++)
      CHECK(fabs(eff[l] - ts_llm_predictor_layer_const(p, l)->efficiency) < 1e-12 || kinds[ki] == TS_LLM_PRED_SIGNBIT,
            "%s layer %d: curve %.4f vs calibration %.4f", kn, l, eff[l], ts_llm_predictor_layer_const(p, l)->efficiency);
    /* file round trip */
    char path[2048];
    tst_tmp_path(path, sizeof path, "pred.gguf");
    CHECK_OK(ts_llm_predictor_save(p, path));
    ts_llm_predictor *q = NULL;
    CHECK_OK(ts_llm_predictor_load(&q, path, m));
    if (q) {
      for (int l = 0; l < L; l++) {
        const ts_llm_pred_layer *a = ts_llm_predictor_layer_const(p, l), *b = ts_llm_predictor_layer_const(q, l);
        CHECK(a->alpha == b->alpha && a->tau == b->tau && a->k == b->k && a->false_skip == b->false_skip, "%s layer %d: knobs differ after the file", kn, l);
      }
      CHECK(ts_llm_predictor_bytes(p, m) == ts_llm_predictor_bytes(q, m), "%s: predictor bytes differ after the file", kn);
    }
    /* decode with the predictor, measured: the measured false-skip rate on these (other) tokens is
     * a rate, and with every neuron predicted active the output is the oracle's */
    ts_llm_sparse *sp = NULL;
    CHECK_OK(ts_llm_sparse_create_pred(&sp, m, q ? q : p, true, ctx));
    ts_llm_sparse_stats ss;
    decode(m, ctx, sp, got, &ss);
    CHECK(ss.measured && ss.false_skip >= 0 && ss.false_skip < 0.5 && ss.efficiency >= 0 && ss.efficiency <= 1 && ss.actual_zero > 0.2 &&
              ss.pred_active > 0 && ss.pred_active <= 1,
          "%s decode: false-skip %.3f, efficiency %.3f, zeros %.3f, predicted active %.3f", kn, ss.false_skip, ss.efficiency,
          ss.actual_zero, ss.pred_active);
    CHECK(fabs(ss.act_sparsity - ss.actual_zero) <= ss.false_skip + 1e-9,
          "%s decode: down skipped %.4f of the neurons, zeros %.4f, false skips %.4f", kn, ss.act_sparsity, ss.actual_zero, ss.false_skip);
    ts_llm_sparse_destroy(sp);
    ts_llm_predictor_destroy(q);
    ts_llm_predictor_destroy(p);
  }
  /* a knob that predicts nothing zero: every neuron's gate is read, the output is the oracle's up
   * to the gate's summation order (the indexed row dot against the packed tile): a ReLU that
   * flips at |gate| ~ 1e-6 moves the logits by far less than the bound */
  ts_llm_predictor *all = NULL;
  CHECK_OK(ts_llm_predictor_create(&all, m, TS_LLM_PRED_SIGNBIT));
  CHECK_OK(ts_llm_predictor_set_alpha(all, TS_LLM_PRED_ALPHA_MAX));
  ts_llm_sparse *sp = NULL;
  CHECK_OK(ts_llm_sparse_create_pred(&sp, m, all, true, ctx));
  ts_llm_sparse_stats ss;
  decode(m, ctx, sp, got, &ss);
  CHECK(ss.false_skip == 0 && ss.efficiency < 0.05, "alpha max: false-skip %.4f, efficiency %.4f", ss.false_skip, ss.efficiency);
  CHECK(tst_max_abs_diff(got, oracle, (size_t)NSEQ * nv) <= 1e-3 * (1 + scale), "alpha max vs oracle differ by %.3g",
        tst_max_abs_diff(got, oracle, (size_t)NSEQ * nv));
  ts_llm_sparse_destroy(sp);
  /* errors */
  CHECK_STATUS(ts_llm_predictor_set_alpha(all, 0.01f), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_llm_predictor_set_alpha(all, NAN), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_llm_predictor_set_alpha(all, 11.0f), TS_ERR_INVALID_ARG);
  ts_llm_predictor *bad = NULL;
  CHECK_STATUS(ts_llm_pred_calibrate(cal, TS_LLM_PRED_SIGNBIT, 0.0, &po, &bad), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_llm_pred_calibrate(cal, TS_LLM_PRED_SIGNBIT, 1.0, &po, &bad), TS_ERR_INVALID_ARG);
  /* files: a model is not a predictor; a cut file; another model's predictor */
  char path[2048], model_path[2048];
  tst_tmp_path(model_path, sizeof model_path, "pred_relu.gguf");
  ts_llm_predictor *q = NULL;
  CHECK_STATUS(ts_llm_predictor_load(&q, model_path, m), TS_ERR_FORMAT);
  CHECK(strstr(ts_last_error(), "predictor.format") != NULL, "a model read as a predictor: %s", ts_last_error());
  tst_tmp_path(path, sizeof path, "pred_all.gguf");
  CHECK_OK(ts_llm_predictor_save(all, path));
  char *img = NULL;
  size_t len = 0;
  CHECK_OK(ts_read_file(path, &img, &len));
  if (img) {
    for (size_t cut = 8; cut < len; cut += len / 7 + 1) {
      CHECK_OK(ts_write_file_atomic(path, img, cut));
      CHECK(ts_llm_predictor_load(&q, path, m) != TS_OK && q == NULL && ts_last_error()[0], "a predictor file cut at %zu bytes loaded", cut);
    }
    free(img);
  }
  tiny_cfg sc = tiny_default(TS_QT_Q8_0);
  ts_llm_model *silu = load_tiny(&sc, "pred_silu.gguf");
  if (silu) {
    CHECK_STATUS(ts_llm_predictor_create(&q, silu, TS_LLM_PRED_SIGNBIT), TS_ERR_UNSUPPORTED);
    CHECK(strstr(ts_last_error(), "ReLU") != NULL, "silu model: %s", ts_last_error());
    CHECK_STATUS(ts_llm_sparse_create_pred(&sp, silu, all, false, ctx), TS_ERR_UNSUPPORTED);
    ts_llm_state *ss2 = NULL;
    CHECK_OK(ts_llm_state_create(&ss2, silu, ctx, 32, 32));
    ts_llm_pred_calib *c2 = NULL;
    if (ss2) CHECK_STATUS(ts_llm_pred_collect(&c2, ss2, tok, NT, &po), TS_ERR_UNSUPPORTED);
    ts_llm_state_destroy(ss2);
    ts_llm_model_destroy(silu);
  }
  ts_llm_predictor_destroy(all);
  ts_llm_sparse_destroy(osp);
  ts_llm_predictor_destroy(orp);
  ts_llm_pred_calib_destroy(cal);
  ts_llm_state_destroy(st);
  ts_context_destroy(ctx);
  free(tok), free(oracle), free(got), free(dense);
}

int main(void) {
  check_kernels();
  tiny_cfg c = relu_cfg();
  ts_llm_model *m = load_tiny(&c, "pred_relu.gguf");
  if (m) {
    check_dense(m);
    check_predictors(m);
  }
  ts_llm_model_destroy(m);
  return tst_finish();
}
