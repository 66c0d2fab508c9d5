/* tessera LLM activation sparsity (issue 33): skip the weights whose inputs are near zero in
 * single-token decode, from thresholds calibrated on text.
 *
 *   ts_llm_calibrate (text, method, target) ──► ts_llm_thresholds ──► (save / load, JSON artifact)
 *   ts_llm_sparse_create (model, thresholds, router) ──► ts_llm_state_set_sparse ──► ts_llm_eval
 *
 * Two kinds of threshold per layer l (either may be 0: that part stays dense):
 *   act      CATS / SATS: neuron i of the MLP is active iff |act(gate_i)| > act (act = silu for
 *            llama, gelu for gemma3: the GELU-gated MLP h = gelu(gate) up); up is computed only for
 *            active neurons and down only reads their columns (gate stays dense);
 *   in[p]    TEAL: input element j of projection p (q, k, v, o, gate, up, down) is used iff
 *            |x_j| > in[p]; the other columns of W_p are not read.
 * Methods (ts_llm_calibrate): CATS sets every layer's act to the target percentile of |act(gate)|
 * on the calibration tokens; SATS chooses each layer's act to minimise the summed sensitivity
 * proxy E_l(t) = mean over calibration tokens of |D_l (m(t) . h) - D_l h|^2 / |x|^2 (D_l the
 * layer's down projection, h = act(gate) * up, m(t) the mask |act(gate)| > t, x the residual
 * stream entering the MLP, which its output is added to; gemma3, whose MLP output passes its
 * post-FFN norm P before the add, measures the error there: |P(D_l (m(t) . h)) - P(D_l h)|^2 / |x|^2
 * with x the stream after the attention half) subject to the mean of the layers'
 * calibration sparsities being the target, exactly on a grid of 2.5% steps (dynamic programming);
 * TEAL sets in[] by its greedy block-wise allocation to a parameter-weighted target, each step
 * the projection whose next 2.5% adds the least relative output error |W_p (x . (1-m))|^2 / |W_p x|^2
 * per parameter-weighted sparsity gained (the errors of a block's projections summed: TEAL measures
 * the block's output; here each projection's own output, docs/notes/llm-sparsity.md). A router (ts_llm_router) may send a token's layer
 * back to the dense MLP when the gate statistics predict a large error.
 *
 * Sparse decode reads transposed copies of the matrices it skips columns of, re-quantized at
 * ts_llm_sparse_create (Q4_1 for Q4_0 / Q4_1 matrices, Q8_0 for every other type: Q8_0, Q5_0 and
 * the K-quants of Gemma 3's Q4_K_M file): its results are checked against a double-precision
 * evaluation of the same masked computation (tests/test_llm_sparse.c, test_llm_sparse_gemma.c),
 * not against llama.cpp; a state without sparsity keeps llama.cpp's bits. Prefill (batches of more
 * than one token) stays dense. Architectures: llama and gemma3. */
#ifndef TESSERA_LLM_SPARSE_H
#define TESSERA_LLM_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"
#include "tessera/llm.h"
#include "tessera/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_llm_proj {
  TS_LLM_PROJ_Q = 0,
  TS_LLM_PROJ_K,
  TS_LLM_PROJ_V,
  TS_LLM_PROJ_O,
  TS_LLM_PROJ_GATE,
  TS_LLM_PROJ_UP,
  TS_LLM_PROJ_DOWN,
  TS_LLM_NPROJ
} ts_llm_proj;
/* "q", "k", "v", "o", "gate", "up", "down" */
const char *ts_llm_proj_name(ts_llm_proj p);

typedef enum ts_llm_sparse_method {
  TS_LLM_SPARSE_NONE = 0, /* hand-made thresholds */
  TS_LLM_SPARSE_CATS,
  TS_LLM_SPARSE_TEAL,
  TS_LLM_SPARSE_SATS
} ts_llm_sparse_method;
const char *ts_llm_sparse_method_name(ts_llm_sparse_method m); /* "none", "cats", "teal", "sats" */

/* One layer's thresholds (>= 0, finite; 0: dense). */
typedef struct ts_llm_layer_thresholds {
  float act;
  float in[TS_LLM_NPROJ];
} ts_llm_layer_thresholds;

/* A model's identity for thresholds and routers: a hash of its architecture, shapes and weight
 * tensors' names and types (16 hex digits). */
void ts_llm_model_key(const ts_llm_model *m, char out[17]);

/* ---- thresholds: data plus what made them --------------------------------------------------- */

typedef struct ts_llm_thresholds_info {
  ts_llm_sparse_method method;
  double target;       /* the sparsity asked for (0..1) */
  double calibrated;   /* the mean sparsity they gave on the calibration tokens */
  int64_t tokens;      /* calibration tokens */
  char text[128];      /* the calibration text's name */
  char model_key[17];  /* ts_llm_model_key of the model */
  char model_name[96];
  ts_provenance prov;
} ts_llm_thresholds_info;

/* Thread safety: a thresholds object is plain data; const functions may run on many threads. */
typedef struct ts_llm_thresholds ts_llm_thresholds;
/* n_layer layers, every threshold 0 (dense), info zeroed but model_key/name of m. */
ts_status ts_llm_thresholds_create(ts_llm_thresholds **out, const ts_llm_model *m);
void ts_llm_thresholds_destroy(ts_llm_thresholds *t);
int ts_llm_thresholds_n_layer(const ts_llm_thresholds *t);
ts_llm_layer_thresholds *ts_llm_thresholds_layer(ts_llm_thresholds *t, int l);
const ts_llm_layer_thresholds *ts_llm_thresholds_layer_const(const ts_llm_thresholds *t, int l);
ts_llm_thresholds_info *ts_llm_thresholds_info_of(ts_llm_thresholds *t);
const ts_llm_thresholds_info *ts_llm_thresholds_info_const(const ts_llm_thresholds *t);
/* Per-layer calibration detail kept in the file (may be NULL): the layer's calibration sparsity
 * and proxy at its threshold. */
double *ts_llm_thresholds_layer_sparsity(ts_llm_thresholds *t);
double *ts_llm_thresholds_layer_proxy(ts_llm_thresholds *t);
/* JSON text (the artifact "llm-thresholds" v1: docs/FORMATS.md) and back. from_json checks the
 * format, every layer present once, thresholds finite and >= 0; with m, also that it was made for
 * m (model key and layer count): each failure names the field. */
ts_status ts_llm_thresholds_to_json(const ts_llm_thresholds *t, char **json);
ts_status ts_llm_thresholds_from_json(ts_llm_thresholds **out, const char *json, const ts_llm_model *m);
/* To a file atomically (a temporary renamed), from a file (errors name the path). */
ts_status ts_llm_thresholds_save(const ts_llm_thresholds *t, const char *path);
ts_status ts_llm_thresholds_load(ts_llm_thresholds **out, const char *path, const ts_llm_model *m);

/* ---- router ------------------------------------------------------------------------------- */

/* Per layer a linear probe over the gate statistics of the token (f0 = 1, f1 = the share of
 * sum_i a_i^2 |D_:,i|^2 that the mask drops, f2 = the share of sum_i a_i^2 it drops, f3 = the
 * fraction of neurons dropped; a = act(gate)) predicting the token's SATS proxy (the relative error
 * of the sparse MLP's output); the layer runs dense for the token when the prediction exceeds `tau`. Trained by least
 * squares on calibration tokens (ts_llm_router_train). */
#define TS_LLM_ROUTER_NF 4
typedef struct ts_llm_router ts_llm_router;
ts_status ts_llm_router_create(ts_llm_router **out, const ts_llm_model *m);
void ts_llm_router_destroy(ts_llm_router *r);
double *ts_llm_router_weights(ts_llm_router *r, int l); /* [TS_LLM_ROUTER_NF] */
double ts_llm_router_tau(const ts_llm_router *r);
void ts_llm_router_set_tau(ts_llm_router *r, double tau);
ts_status ts_llm_router_to_json(const ts_llm_router *r, char **json);
ts_status ts_llm_router_from_json(ts_llm_router **out, const char *json, const ts_llm_model *m);
ts_status ts_llm_router_save(const ts_llm_router *r, const char *path);
ts_status ts_llm_router_load(ts_llm_router **out, const char *path, const ts_llm_model *m);

/* ---- calibration -------------------------------------------------------------------------- */

typedef struct ts_llm_calib_opts {
  ts_llm_sparse_method method; /* CATS, TEAL or SATS */
  double target;               /* mean sparsity, 0 < target < 1 */
  int window;                  /* tokens per evaluated window (default 512) */
  int64_t proxy_tokens;        /* tokens of the exact SATS / TEAL error curves (default 4096) */
  const char *text_name;       /* recorded in the thresholds */
  bool progress;               /* progress on stderr */
  const char *curves_svg;      /* SATS: the per-layer proxy curves drawn here (NULL: none) */
} ts_llm_calib_opts;
ts_llm_calib_opts ts_llm_calib_opts_default(void);

/* Calibration statistics of a model on a token sequence (windows of opts.window tokens evaluated
 * densely from an empty cache): per layer histograms of |act(gate)| and of every projection's
 * input, and exact error curves on the first proxy_tokens tokens. Reusable for several methods and
 * targets. TS_ERR_INVALID_ARG when the text is shorter than one window. */
typedef struct ts_llm_calib ts_llm_calib;
ts_status ts_llm_calib_collect(ts_llm_calib **out, ts_llm_state *s, const int32_t *tokens, size_t n,
                               const ts_llm_calib_opts *o);
void ts_llm_calib_destroy(ts_llm_calib *c);
/* Thresholds of o->method at o->target from collected statistics. */
ts_status ts_llm_calibrate(const ts_llm_calib *c, const ts_llm_calib_opts *o, ts_llm_thresholds **out);
/* A router trained on the collected tokens for thresholds t (tau 0: set it with set_tau). */
ts_status ts_llm_router_train(const ts_llm_calib *c, const ts_llm_thresholds *t, ts_llm_router **out);

/* ---- sparse decode ------------------------------------------------------------------------ */

/* Thread safety: immutable after create; any number of states (of its model) may use it at once.
 * It must outlive them and must not outlive its model. */
typedef struct ts_llm_sparse ts_llm_sparse;
/* The transposed copies the thresholds need (only the projections some layer thresholds), cut for
 * a decode team of ctx's threads (any team runs it). r may be NULL (no routing). Copies t and r. */
ts_status ts_llm_sparse_create(ts_llm_sparse **out, const ts_llm_model *m, const ts_llm_thresholds *t,
                               const ts_llm_router *r, const ts_context *ctx);
void ts_llm_sparse_destroy(ts_llm_sparse *sp);
/* Bytes of the transposed copies. */
uint64_t ts_llm_sparse_bytes(const ts_llm_sparse *sp);
/* Decode of s uses sp from the next eval (NULL: dense again). sp must be made for s's model. */
ts_status ts_llm_state_set_sparse(ts_llm_state *s, const ts_llm_sparse *sp);

/* What the sparse decode skipped since the state's creation or ts_llm_state_timing_reset. */
typedef struct ts_llm_sparse_stats {
  int64_t tokens;        /* single-token evals counted */
  double act_sparsity;   /* mean over layers and tokens of the fraction of MLP neurons skipped */
  double in_sparsity;    /* parameter-weighted fraction of the 7 projections' input columns skipped */
  double weight_skip;    /* fraction of the layers' weight bytes (dense file layout) not read */
  double bytes_per_token;/* weight bytes read per token (layers, output projection, embedding row) */
  double dense_bytes_per_token;
  double routed_dense;   /* fraction of (token, layer) MLPs the router sent to the dense path */
  int n_layer;
  double layer_act[256]; /* per layer (first 256) */
  /* activation predictors (tessera/llm_pred.h; 0 without one) */
  double pred_active;    /* neurons predicted active / neurons: their gate and up rows were read */
  double pred_bytes_per_token; /* what the predictor itself read (included in bytes_per_token) */
  double pred_seconds_per_token; /* thread 0's time in the prediction per token (its share of neurons) */
  bool measured;         /* the confusion below was measured (ts_llm_sparse_create_pred's measure) */
  double actual_zero;    /* zeros of relu(gate) / neurons */
  double false_skip;     /* active neurons predicted zero / active neurons */
  double missed_skip;    /* zeros predicted active / zeros */
  double efficiency;     /* zeros predicted zero / zeros: skipping efficiency (1 - missed_skip) */
  double layer_false_skip[256], layer_efficiency[256], layer_zero[256];
} ts_llm_sparse_stats;
void ts_llm_state_sparse_stats(const ts_llm_state *s, ts_llm_sparse_stats *out);

#ifdef __cplusplus
}
#endif
#endif
