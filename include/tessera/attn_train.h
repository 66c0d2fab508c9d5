/* tessera attention training: the forward's log-sum-exp and a backward that walks the forward
 * plan's own items (tiles, COMPACT runs, DIAG offsets), skipping exactly what the forward skips.
 *
 *   forward:  S = Q K^T * scale (scale = 1/sqrt(d)), P = softmax over the allowed keys, O = P V
 *   stored:   lse[i] = ln sum_{j allowed} exp(S[i][j])   (-INFINITY for a row with no allowed key)
 *   backward: P[i][j] = exp(S[i][j] - lse[i]) (allowed cells, 0 elsewhere), Dr[i] = dO[i] . O[i],
 *             dP = dO V^T, dS = P o (dP - Dr), dQ = dS K * scale, dK = dS^T Q * scale, dV = P^T dO
 *
 * The backward is FlashAttention-2's: nothing n x n is stored; every item of the forward plan
 * recomputes its S and P from Q, K and lse, and contributes to dQ (rows of its panel: one thread
 * owns them) and to dK / dV (keys shared between panels of different threads: see
 * ts_attn_bwd_reduce). A row with no allowed key gets dQ = 0; a key no row attends gets dK = dV = 0.
 *
 * Any plan made for the mask serves: the backward of "reuse the forward's schedule as is" runs the
 * forward plan; "re-solved for backward" runs a plan made from a schedule solved with the
 * backward's measured costs (same mask, d). lse from one plan is valid for another (it depends on
 * the mask only, up to rounding). */
#ifndef TESSERA_ATTN_TRAIN_H
#define TESSERA_ATTN_TRAIN_H

#include <stdint.h>

#include "tessera/attn.h"
#include "tessera/core.h"
#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Floats of one (batch, head)'s stored scores for this plan: one per computed cell, in the plan's
 * item order (the plan's stats.cells, rounded as the layout needs). */
int64_t ts_attn_score_floats(const ts_attn_plan *plan);

/* Training-mode forward: O exactly as ts_attn_execute / _bf16 computes it (bitwise), plus
 * lse [batch][heads][n] (natural log, scale included), and, when scores is not NULL, every computed
 * cell's raw score S = q . k (before scale and mask) into scores [batch][heads][ts_attn_score_floats]
 * (the "store the scores" activation-memory strategy: the backward then skips recomputing Q K^T).
 * Same errors as the forward; lse NULL is TS_ERR_INVALID_ARG. */
ts_status ts_attn_execute_train(const ts_context *ctx, ts_attn_plan *plan, const float *Q, const float *K,
                                const float *V, float *O, float *lse, float *scores, int64_t batch, int64_t heads,
                                int64_t n, int64_t d);
ts_status ts_attn_execute_train_bf16(const ts_context *ctx, ts_attn_plan *plan, const uint16_t *Q, const uint16_t *K,
                                     const uint16_t *V, float *O, float *lse, float *scores, int64_t batch,
                                     int64_t heads, int64_t n, int64_t d);

/* How dK and dV, which panels of different threads share, are summed. */
typedef enum ts_attn_bwd_reduce {
  TS_ATTN_BWD_AUTO = 0,     /* the measured best (documented in ts_attn_bwd_create's notes) */
  TS_ATTN_BWD_PARTIALS = 1, /* per-thread fp32 partial dK, dV [n][d] of the current head, summed after it */
  TS_ATTN_BWD_ATOMIC = 2,   /* atomic float adds straight into dK, dV */
  TS_ATTN_BWD_REDUCE_COUNT
} ts_attn_bwd_reduce;

/* "auto", "partials", "atomic" and back (TS_ERR_INVALID_ARG naming the text). */
const char *ts_attn_bwd_reduce_name(ts_attn_bwd_reduce r);
ts_status ts_attn_bwd_reduce_parse(const char *name, ts_attn_bwd_reduce *out);

/* A backward executor bound to a forward plan (not owned; it must outlive the executor and keep its
 * ISA setting): workspaces for ctx's thread count (NULL: the plan's), allocated here once, so
 * backward never allocates. One backward at a time per executor; the executor does not use the
 * plan's forward workspaces, so a forward of the same plan may not run at the same time only
 * because both read the plan's static queues (serialize forward and backward of one plan). */
typedef struct ts_attn_bwd ts_attn_bwd;
ts_status ts_attn_bwd_create(ts_attn_bwd **b, const ts_context *ctx, const ts_attn_plan *plan, ts_attn_bwd_reduce reduce);
void ts_attn_bwd_destroy(ts_attn_bwd *b);
/* The reduction it runs (AUTO resolved) and the bytes of its workspaces. */
ts_attn_bwd_reduce ts_attn_bwd_get_reduce(const ts_attn_bwd *b);
size_t ts_attn_bwd_workspace_bytes(const ts_attn_bwd *b);

/* dQ, dK, dV [batch][heads][n][d] from Q, K, V, O, dO [batch][heads][n][d], lse [batch][heads][n]
 * and scores (NULL: recomputed from Q and K; else ts_attn_execute_train's, made with the SAME plan,
 * which the executor's plan must be). The gradients are overwritten (not accumulated) and must not overlap
 * the inputs. TS_ERR_SHAPE when n or d differ from the plan's; TS_ERR_INVALID_ARG for NULLs. */
ts_status ts_attn_backward(const ts_context *ctx, ts_attn_bwd *b, const float *Q, const float *K, const float *V,
                           const float *O, const float *dO, const float *lse, const float *scores, float *dQ,
                           float *dK, float *dV, int64_t batch, int64_t heads, int64_t n, int64_t d);
/* Same with bf16 Q, K, V (uint16 bit patterns), fp32 O, dO, lse and fp32 gradients, fp32 accumulation. */
ts_status ts_attn_backward_bf16(const ts_context *ctx, ts_attn_bwd *b, const uint16_t *Q, const uint16_t *K,
                                const uint16_t *V, const float *O, const float *dO, const float *lse,
                                const float *scores, float *dQ, float *dK, float *dV, int64_t batch, int64_t heads, int64_t n, int64_t d);

/* Reference backward: double accumulation, explicit mask, computes the forward itself (softmax over
 * the allowed keys only), single-threaded, allocates its row buffers per call. For tests. */
ts_status ts_attn_reference_backward(const ts_bitmap *mask, const float *Q, const float *K, const float *V,
                                     const float *dO, float *dQ, float *dK, float *dV, int64_t batch, int64_t heads,
                                     int64_t n, int64_t d);

#ifdef __cplusplus
}
#endif
#endif
