/* A learned activation predictor for ReLU-gated MLPs (PowerInfer / Deja Vu): per layer, a small
 * two-layer MLP over the layer's normalized FFN input x [d] that predicts which of the n = n_ff
 * neurons are active (W_gate[i] . x > 0):
 *
 *   logits = W2 relu(W1 x + b1) + b2        W1: [r][d], b1: [r], W2: [n][r], b2: [n]
 *
 * neuron i predicted active when logits[i] > a threshold (0 is the trained decision boundary).
 * Trained here in C on calibration tokens: minibatch Adam on weighted binary cross-entropy (the
 * active class weighted by pos_weight: a false skip drops a neuron's contribution, a false keep
 * only costs its work), He init from a seeded ts_rng, a fresh shuffle per epoch, 5% of the tokens
 * held out for validation loss / recall per epoch. The batch products go through ts_sgemm.
 *
 * Inference reads (r d + r + n r + n) * 4 bytes per token (ts__pmlp_bytes): d = 2048, r = 64,
 * n = 8192 is 2.6 MB, against 2 n d (gate, up) weights the prediction is meant to skip. */
#ifndef TS_LLM_PRED_MLP_H
#define TS_LLM_PRED_MLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "tessera/core.h"

typedef struct ts__pmlp {
  int d, r, n;
  float *w1; /* [r][d] */
  float *b1; /* [r] */
  float *w2; /* [n][r] */
  float *b2; /* [n] */
  /* How training ended (0 / -1 when not trained or no tokens were held out: N < 20): on the
   * held-out tokens at logit > 0, the weighted BCE per element, the fraction of active
   * neurons predicted active (recall), the fraction of all labels predicted right (accuracy),
   * and the fraction predicted inactive (the work a threshold of 0 would skip). */
  int64_t n_val;
  float val_loss, val_recall, val_acc, val_skip;
  float pos_weight; /* the BCE weight of the active class used */
} ts__pmlp;

typedef struct ts__pmlp_opts {
  int r;            /* hidden width (default 64) */
  int epochs;       /* default 8 */
  int batch;        /* default 256 */
  float lr;         /* Adam, default 1e-3 */
  float pos_weight; /* BCE weight of the active class; 0 (default): n_zero / n_active of the training
                       tokens, clamped to [1, 10] (recall of actives matters more: a false skip
                       drops a neuron) */
  uint64_t seed;    /* init, held-out split and shuffles (default 1): equal seeds, equal weights */
  bool progress;    /* ts_progress and a line per epoch on stderr (default false) */
  int threads;      /* ts_sgemm threads (default 1; <= 0: ts_default_threads()). Results are
                       deterministic for a given seed and thread count */
} ts__pmlp_opts;

ts__pmlp_opts ts__pmlp_opts_default(void);

/* Trains a predictor on N tokens: X [N][d] fp32, Y [N][n] with 1 = active, 0 = inactive (any
 * nonzero byte counts as 1). *out is overwritten (free with ts__pmlp_free; zeroed on error).
 * Memory: the weights, Adam's two moments, and batch buffers of batch x (d + 2 r + n) floats; no
 * N x n array beyond Y. Errors: TS_ERR_INVALID_ARG (NULL pointers, sizes or options out of range,
 * non-finite X), TS_ERR_OVERFLOW, TS_ERR_OOM. */
ts_status ts__pmlp_train(ts__pmlp *out, const float *X, const uint8_t *Y, int64_t N, int d, int n,
                         const ts__pmlp_opts *o);
/* Frees the weights and zeroes *p (NULL or zeroed: nothing to do). */
void ts__pmlp_free(ts__pmlp *p);

/* logits[n] for one input x [d]; scratch [r] (the hidden activations). The scalar reference
 * accumulates in double; the AVX2 (+FMA) form in fp32, 8 rows at a time. ts__pmlp_logits uses the
 * variant the room's dispatch resolved (TESSERA_ISA / TESSERA_REF cap it). */
void ts__pmlp_logits_ref(const ts__pmlp *p, const float *x, float *logits, float *scratch);
void ts__pmlp_logits_avx2(const ts__pmlp *p, const float *x, float *logits, float *scratch);
void ts__pmlp_logits(const ts__pmlp *p, const float *x, float *logits, float *scratch);
/* Weight bytes read per token: (r d + r + n r + n) * sizeof(float). */
size_t ts__pmlp_bytes(const ts__pmlp *p);

typedef void (*ts__pmlp_logits_fn)(const ts__pmlp *p, const float *x, float *logits, float *scratch);
typedef struct ts__pmlp_kern {
  ts__pmlp_logits_fn logits;
} ts__pmlp_kern;
extern ts__dispatch ts__pmlp_dispatch; /* {scalar: ref, avx2: avx2} */

#endif
