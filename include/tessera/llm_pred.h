/* tessera activation predictors for ReLU-gated LLMs (issue 39): guess, before reading W_gate,
 * which neurons of the MLP h = relu(W_gate x) * (W_up x) are zero for this token, and read gate and
 * up rows only for the others; down then skips every actual zero (its neuron-major copy).
 *
 *   ts_llm_pred_collect (text) ──► ts_llm_pred_calib ──► ts_llm_pred_calibrate (kind, false-skip
 *   budget) ──► ts_llm_predictor ──► (save / load) ──► ts_llm_sparse_create_pred ──► decode
 *
 * Kinds (x = the token's normalized MLP input, w_i = row i of W_gate):
 *   signbit  SparseInfer (DATE'25): n_neg = popcount(sign(w_i) XOR sign(x)), n_pos = d - n_neg;
 *            predicted zero iff n_neg > alpha * n_pos. 1 bit per weight, built at load.
 *   grasp    Grasp (DAC'25, as read in docs/notes/relu-predictors.md): x's elements |x_j| > mean +
 *            k std of |x| (outliers) are multiplied exactly (from a transposed copy of W_gate); the
 *            rest fall into three magnitude groups (sigma bins) with their mean magnitudes, the
 *            weights carry a sign bit and a magnitude bit (above the row's median |w|) with the
 *            row's two mean magnitudes; predicted zero iff the estimate of w_i . x is below
 *            -tau |x| rms(w_i). The sign-bit rule is its one-group, no-outlier case.
 *   learned  PowerInfer / Deja Vu style: a 2-layer MLP per layer (d -> 64 -> n_ff) trained here on
 *            the calibration tokens; predicted zero iff its logit < tau.
 *   oracle   the exact gate: every gate row is read, up and down only for the positive ones (the
 *            upper bound of skipping up and down; no false skips).
 * Calibration picks each layer's knob (alpha, tau) so that the share of active neurons predicted
 * zero (the false-skip rate) on the calibration tokens is the budget. Only ReLU-gated models
 * (tessera.ffn_activation = "relu"): others get TS_ERR_UNSUPPORTED. */
#ifndef TESSERA_LLM_PRED_H
#define TESSERA_LLM_PRED_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/core.h"
#include "tessera/llm.h"
#include "tessera/llm_sparse.h"
#include "tessera/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_llm_pred_kind {
  TS_LLM_PRED_NONE = 0,
  TS_LLM_PRED_SIGNBIT,
  TS_LLM_PRED_GRASP,
  TS_LLM_PRED_LEARNED,
  TS_LLM_PRED_ORACLE
} ts_llm_pred_kind;
const char *ts_llm_pred_kind_name(ts_llm_pred_kind k); /* "none", "signbit", "grasp", "learned", "oracle" */
/* TS_ERR_INVALID_ARG naming the accepted words. */
ts_status ts_llm_pred_kind_parse(const char *s, ts_llm_pred_kind *out);

#define TS_LLM_PRED_ALPHA_MIN 0.1f /* alpha's accepted range (SparseInfer ships 1.00 and 1.03) */
#define TS_LLM_PRED_ALPHA_MAX 10.0f

typedef struct ts_llm_pred_layer {
  float alpha;       /* signbit */
  float tau;         /* grasp, learned */
  float k;           /* grasp: outlier cut in std of |x| (default 3) */
  double false_skip; /* on the calibration tokens at this knob */
  double efficiency; /* correctly skipped / actual zeros, on the calibration tokens */
  double zero_share; /* actual zeros / neurons, on the calibration tokens */
} ts_llm_pred_layer;

typedef struct ts_llm_pred_info {
  ts_llm_pred_kind kind;
  double false_skip;   /* the budget calibrated for (0: hand-set knobs) */
  int64_t tokens;      /* calibration tokens */
  char text[128];
  char model_key[17];
  char model_name[96];
  ts_provenance prov;
} ts_llm_pred_info;

/* Thread safety: plain data; const functions may run on many threads. */
typedef struct ts_llm_predictor ts_llm_predictor;
/* Every layer alpha 1, tau 0, k 3; TS_ERR_UNSUPPORTED unless m is ReLU-gated; learned needs its
 * weights from ts_llm_pred_calibrate or a file. */
ts_status ts_llm_predictor_create(ts_llm_predictor **out, const ts_llm_model *m, ts_llm_pred_kind kind);
void ts_llm_predictor_destroy(ts_llm_predictor *p);
int ts_llm_predictor_n_layer(const ts_llm_predictor *p);
ts_llm_pred_layer *ts_llm_predictor_layer(ts_llm_predictor *p, int l);
const ts_llm_pred_layer *ts_llm_predictor_layer_const(const ts_llm_predictor *p, int l);
ts_llm_pred_info *ts_llm_predictor_info(ts_llm_predictor *p);
const ts_llm_pred_info *ts_llm_predictor_info_const(const ts_llm_predictor *p);
/* Sets every layer's alpha (TS_ERR_INVALID_ARG outside [ALPHA_MIN, ALPHA_MAX] or not signbit). */
ts_status ts_llm_predictor_set_alpha(ts_llm_predictor *p, float alpha);
/* Bytes the predictor reads per token (its bits, per-row values, learned weights). */
uint64_t ts_llm_predictor_bytes(const ts_llm_predictor *p, const ts_llm_model *m);
/* To / from a file (the artifact "llm-predictor" v1, a GGUF container: docs/FORMATS.md), checked
 * against m (model key, layers, shapes); errors name the path and the field. */
ts_status ts_llm_predictor_save(const ts_llm_predictor *p, const char *path);
ts_status ts_llm_predictor_load(ts_llm_predictor **out, const char *path, const ts_llm_model *m);

/* ---- calibration -------------------------------------------------------------------------- */

typedef struct ts_llm_pred_opts {
  int window;          /* tokens per evaluated window (default 512) */
  int64_t max_tokens;  /* tokens collected (default 8192) */
  float k;             /* grasp's outlier cut (default 3) */
  int hidden;          /* learned: hidden width (default 64) */
  int epochs;          /* learned (default 8) */
  const char *text_name;
  bool progress;
} ts_llm_pred_opts;
ts_llm_pred_opts ts_llm_pred_opts_default(void);

/* The dense model's normalized MLP inputs and gate signs on windows of tokens (each from an empty
 * cache, BOS first), per layer. */
typedef struct ts_llm_pred_calib ts_llm_pred_calib;
ts_status ts_llm_pred_collect(ts_llm_pred_calib **out, ts_llm_state *s, const int32_t *tokens, size_t n,
                              const ts_llm_pred_opts *o);
void ts_llm_pred_calib_destroy(ts_llm_pred_calib *c);
/* The predictor of `kind` whose per-layer knob gives false-skip rate `false_skip` (0 < F < 1) on
 * the collected tokens (signbit, grasp, learned; oracle needs none). */
ts_status ts_llm_pred_calibrate(const ts_llm_pred_calib *c, ts_llm_pred_kind kind, double false_skip,
                                const ts_llm_pred_opts *o, ts_llm_predictor **out);

/* The same for nf budgets at once, into out[0..nf) (the learned predictor trained once, every score
 * computed once); with ncf > 0 also the curve of ts_llm_pred_curve at curve_fs[0..ncf) into
 * curve_eff[l * ncf + k]. */
ts_status ts_llm_pred_calibrate_set(const ts_llm_pred_calib *c, ts_llm_pred_kind kind, const double *fs, int nf,
                                    const ts_llm_pred_opts *o, ts_llm_predictor **out, const double *curve_fs, int ncf,
                                    double *curve_eff);

/* Skipping efficiency against false-skip rate of predictor p's score on the collected tokens, per
 * layer: for each of nf rates fs[k], eff[l * nf + k] = the share of actual zeros predicted zero
 * when the knob gives false-skip rate fs[k]. */
ts_status ts_llm_pred_curve(const ts_llm_pred_calib *c, const ts_llm_predictor *p, const double *fs, int nf,
                            double *eff);

/* ---- decode ------------------------------------------------------------------------------- */

/* A sparse-decode object that runs predictor p in every layer (copies what it needs: sign and
 * magnitude bits of W_gate, Grasp's transposed W_gate for the outliers, the learned weights, the
 * neuron-major copy of down). measure: also computes every gate row to count the predictor's
 * confusion (ts_llm_sparse_stats.false_skip, ...), for evaluation; the output is unchanged by it. */
ts_status ts_llm_sparse_create_pred(ts_llm_sparse **out, const ts_llm_model *m, const ts_llm_predictor *p,
                                    bool measure, const ts_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
