/* Activation predictors' objects (tessera/llm_pred.h) as decode (llm_pred.c), calibration
 * (llm_pred_cal.c) and the files (llm_pred_io.c) see them. */
#ifndef TS_LLM_PRED_INTERNAL_OBJ_H
#define TS_LLM_PRED_INTERNAL_OBJ_H

#include "llm/llm_sparse_internal.h"
#include "llm/pred_internal.h"
#include "llm/pred_mlp.h"
#include "tessera/gguf.h"
#include "tessera/llm_pred.h"

struct ts_llm_predictor {
  int n_layer, d, n_ff;
  ts_llm_pred_layer *layer;
  ts__pmlp *mlp; /* learned: [n_layer] */
  ts_llm_pred_info info;
};

/* An empty predictor of the given shapes (knobs as ts_llm_predictor_create's), no model check. */
ts_status ts__predictor_alloc(ts_llm_predictor **out, int n_layer, int d, int n_ff, ts_llm_pred_kind kind);
/* A predictor from an opened container (llm_pred_io.c); m NULL: the file's own shapes are taken
 * (within 1..4096 layers, d <= 8192, n_ff <= 1 << 18) and no model key is checked (the fuzzer). */
ts_status ts__predictor_from_gguf(const ts_gguf *g, const char *path, const ts_llm_model *m, ts_llm_predictor **out);

/* What decode reads for one layer (built from the model at ts_llm_sparse_create_pred). */
typedef struct ts__pred_layer {
  uint64_t *sw, *bw; /* [n_ff][nw] sign bits, magnitude bits (grasp) of W_gate */
  float *u0, *u1;    /* [n_ff] grasp: the row's mean |w| below / above its median */
  float *rho;        /* [n_ff] grasp: rms of the row */
} ts__pred_layer;

typedef struct ts__pred {
  ts_llm_pred_kind kind;
  int nw, nlayer;
  bool measure;
  ts_llm_pred_layer *knob; /* [n_layer] */
  ts__pred_layer *L;       /* [n_layer] */
  ts__pmlp *mlp;           /* learned: [n_layer] (copies) */
  void *mem;
  uint64_t bytes_per_token;
} ts__pred;

/* Fills a zeroed pr for predictor p on model m: copies the knobs (and learned weights) and builds
 * the bits of W_gate's rows (dequantized one at a time). */
ts_status ts__pred_init(ts__pred *pr, const ts_llm_model *m, const ts_llm_predictor *p, bool measure);
void ts__pred_free(ts__pred *pr);
/* Row i's sign bits (1 = negative), magnitude bits (|w| above the median |w|) and the two mean
 * magnitudes and rms of a dequantized row w[d]. */
void ts__pred_row_codes(const float *w, int64_t d, uint64_t *sw, uint64_t *bw, float *u0, float *u1, float *rho, float *scratch);
/* The score of neuron i for kind (larger: more surely zero; predicted zero iff score > knob):
 * signbit n_neg / max(n_pos, 1); grasp -est / (|x| rho); learned -logit. */

/* dst = a copy of src's weights (one block, as ts__pmlp_free expects). */
ts_status ts__pmlp_copy(ts__pmlp *dst, const ts__pmlp *src);

/* Decode's phase for a predictor layer (llm_forward.c: then a barrier and ts__sparse_mlp_c). */
void ts__pred_mlp_a(ts_llm_state *s, int tid, int l);

#endif
