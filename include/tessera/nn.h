/* tessera nn: model graphs built from the kernels, attention and sparse rooms. For now: the
 * attention "backend" every transformer model plugs in (one plan built once for the model's token
 * count, with an optional token permutation), token masks over a 2-D grid given by pattern specs,
 * and a Vision Transformer (DeiT-S, ViT-B/16, or any configuration) forward pass in fp32.
 *
 * Conventions: activations are row-major fp32, one row per token; linear weights are stored
 * [in][out] so every linear layer is ts_sgemm(NO_TRANS, NO_TRANS); everything a forward needs is
 * allocated when the model is created for a batch size and a token count: forward allocates nothing.
 *
 * Token order. Every layer of a ViT except attention is token-wise, and the classifier reads the
 * MEAN over tokens. So a backend that wants the tokens in another order (perm[new] = old grid
 * token) costs nothing at run time: the patch unfolding writes token t from grid cell perm[t]
 * (with that cell's position embedding), the whole network runs in the permuted order, and the
 * mean pool is order-independent, so nothing is un-permuted. (Gathering Q/K/V and scattering O
 * around each attention call instead would move 4 n d floats per layer and head for nothing.) */
#ifndef TESSERA_NN_H
#define TESSERA_NN_H

#include <stdint.h>

#include "tessera/attn.h"
#include "tessera/attn_sched.h"
#include "tessera/core.h"
#include "tessera/kernels.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- token masks over an h x w grid ------------------------------------------------------ */

/* Fills the grid into a pattern spec that names no size: `window2d:k=13` -> `window2d:h=H,w=W,k=13`
 * (inserted right after the innermost kind, so wrappers keep their keys: `permute:swin:win=7,seed=3`
 * -> `permute:swin:h=H,w=W,win=7,seed=3`). A spec that already has h= or w= is copied unchanged;
 * "dense" stays "dense". TS_ERR_INVALID_ARG when the result does not fit cap or spec is empty. */
ts_status ts_nn_spec_for_grid(const char *spec, int64_t h, int64_t w, char *out, size_t cap);

/* The attention mask of n = h*w grid tokens (token = y*w + x), in GRID order. */
typedef struct ts_nn_token_mask {
  int64_t h, w, n;
  bool dense;     /* "dense": every cell allowed; csr is empty (a 16,384-token CSR would be 1 GiB) */
  ts_csr csr;     /* n x n (when !dense) */
  int64_t nnz;    /* n*n when dense */
  double density; /* nnz / n^2 */
} ts_nn_token_mask;

/* From a spec (filled by ts_nn_spec_for_grid, then ts_pattern_generate). A pattern that is not
 * n x n for n = h*w (e.g. keep:) is TS_ERR_SHAPE; a permute: wrapper is undone (the mask is
 * stored in grid order). out is zeroed on error. A plain struct the caller owns, so it is filled
 * through the LAST argument (like every function that fills one: ARCHITECTURE.md, "API shape")
 * and its contents released with ts_nn_token_mask_free. */
ts_status ts_nn_token_mask_create(const char *spec, int64_t h, int64_t w, ts_nn_token_mask *out);
void ts_nn_token_mask_free(ts_nn_token_mask *m);

/* ---- attention backends ------------------------------------------------------------------ */

typedef enum ts_nn_attn_kind {
  TS_NN_ATTN_REFERENCE = 0, /* ts_attn_reference (double accumulation, one thread): for tests */
  TS_NN_ATTN_DENSE_FLASH,   /* ts_attn_schedule_dense, tile opts.tile (64 x 64), mask applied */
  TS_NN_ATTN_FIXED,         /* ts_attn_schedule_blockskip, tile opts.tile, original token order */
  TS_NN_ATTN_SCHEDULED,     /* reorder -> ts_blocks_extract -> tiles and panel threads by the
                               attention scheduler (ts_attn_schedule_solve, attn_sched.h: ILP or
                               greedy, default cost model), tokens permuted; or, with solver = -1,
                               each block's cheapest tile (ts_attn_choose_tiles) ->
                               ts_attn_schedule_from_blocks, panels run dynamically */
  TS_NN_ATTN_CUSTOM,        /* a caller-made schedule (+ permutation): ts_nn_attn_create_custom */
  TS_NN_ATTN_KIND_COUNT
} ts_nn_attn_kind;

/* "reference", "dense_flash", "fixed", "scheduled", "custom" and back. */
const char *ts_nn_attn_kind_name(ts_nn_attn_kind k);
ts_status ts_nn_attn_kind_parse(const char *name, ts_nn_attn_kind *out);

typedef struct ts_nn_attn_opts {
  ts_nn_attn_kind kind;
  ts_attn_tile tile;          /* dense_flash and fixed (64 x 64) */
  ts_reorder_opts reorder;    /* scheduled: method auto (tile 64); the grid is filled from the mask */
  ts_blocks_opts blocks;      /* scheduled: ts_blocks_opts_default */
  const ts_attn_tile *menu;   /* scheduled: tiles to choose from (NULL: ts_attn_default_menu) */
  int nmenu;
  ts_attn_blocks_opts sched;  /* scheduled: ts_attn_blocks_opts_default */
  int solver;                 /* scheduled: a ts_attn_solver (TS_ATTN_SOLVER_ILP), balancing the panels
                                 over the plan's threads; -1: no scheduler (cheapest tile per block) */
  double solve_time_limit;    /* scheduled, ILP: elapsed seconds (1.0) */
  int32_t heights[4];         /* scheduled with a solver: compact pass row heights (8, 16, 32) */
  int nheights;               /*   (0: blocks and a MIXED residue only) */
  bool calibrate;             /* scheduled with a solver: measure on this mask (ts_attn_sched_opts.calibrate_d
                                 = d: the cost families before solving, the guard after) (false) */
  int64_t heads;              /* scheduled with calibrate: heads per execute of the guard's timings (0 or
                                 1: one head; ts_attn_sched_opts.calibrate_heads) */
  ts_attn_cost_fn cost;       /* scheduled: the block cost (NULL: ts_attn_cost_default, with cost_user
                                 ignored); e.g. ts_attn_cost_profiled with a ts_attn_cost_model */
  void *cost_user;
  const char *cost_tag;       /* scheduled: text naming the cost model for the plan cache's key (e.g. the
                                 profile's level and date; NULL: ""); a cost without a tag is not cached */
  bool cache;                 /* scheduled: look the plan up in, and store it to, the attention plan
                                 cache (ts_attn_plan_cache_find/_store, keyed by the mask, d, every
                                 option above, the threads and the machine) (false) */
} ts_nn_attn_opts;

void ts_nn_attn_opts_default(ts_nn_attn_opts *o, ts_nn_attn_kind kind);

/* Holds the plan for (mask, head dimension d), the mask in the backend's token order and the
 * permutation. Opaque.
 * Thread safety: one ts_nn_attn_run at a time per backend (it executes the backend's attention
 * plan, whose workspaces it owns: ts_attn_plan), so ViT models sharing one backend must not
 * forward at the same time; different backends run concurrently. ts_nn_attn_get_info only reads.
 * The REFERENCE kind holds no plan and is re-entrant. */
typedef struct ts_nn_attn ts_nn_attn;

/* Builds the backend kind o->kind (not CUSTOM) for mask and head dimension d. ctx: the thread
 * count of the plan's workspaces (NULL: default). Errors from the reorder / extraction / schedule
 * / plan steps are passed on with their detail. */
ts_status ts_nn_attn_create(ts_nn_attn **a, const ts_context *ctx, const ts_nn_token_mask *mask, int64_t d,
                            const ts_nn_attn_opts *o);
/* The plug-in point for any other schedule source (a profile-driven scheduler, a cached plan from
 * ts_attn_plan_load, which returns exactly this perm + schedule pair): a schedule made for the mask
 * seen through perm (perm[new] = old grid token; NULL = identity), i.e. for
 * mask'(i, j) = mask(perm[i], perm[j]). Validated by the plan (every allowed cell must be owned). */
ts_status ts_nn_attn_create_custom(ts_nn_attn **a, const ts_context *ctx, const ts_nn_token_mask *mask,
                                   const int32_t *perm, const ts_attn_schedule *s, int64_t d);
void ts_nn_attn_destroy(ts_nn_attn *a);

typedef struct ts_nn_attn_info {
  ts_nn_attn_kind kind;
  int64_t n, d;
  const int32_t *perm;          /* [n] perm[new] = old grid token, or NULL (identity); owned by the backend */
  double plan_ms;               /* everything create did: reorder + extract + tile choice + plan */
  double reorder_ms, extract_ms;
  ts_reorder_method reorder;    /* scheduled: the method that made perm (auto: the winner) */
  int64_t nblocks;              /* scheduled: dense blocks extracted */
  ts_attn_tile tile;            /* dense_flash / fixed: the tile */
  int solver;                   /* scheduled: the ts_attn_solver that made the schedule, -1 none */
  bool ilp_improved;            /* scheduled: the ILP beat the greedy schedule */
  double sched_ms;              /* scheduled: scheduler wall time (part of plan_ms) */
  double predicted_makespan;    /* scheduled with a solver: predicted cost units of the busiest thread */
  bool cached;                  /* scheduled: the schedule came from the plan cache (plan_ms is the load) */
  int64_t merged, compact_panels; /* scheduled with a solver: pieces merged into compact passes, panels with one */
  ts_attn_stats stats;          /* of the plan (zeroed for reference) */
} ts_nn_attn_info;
void ts_nn_attn_get_info(const ts_nn_attn *a, ts_nn_attn_info *info);

/* O = attention(Q, K, V) with the backend's mask; Q, K, V, O: [batch][heads][n][d], tokens in
 * the backend's order (token t is grid token perm[t]). ctx NULL: the plan's threads. */
ts_status ts_nn_attn_run(ts_nn_attn *a, const ts_context *ctx, const float *Q, const float *K, const float *V,
                         float *O, int64_t batch, int64_t heads);

/* ---- attention backends in training ------------------------------------------------------
 * The forward keeps the per-row log-sum-exp (and, optionally, every computed cell's raw score) and
 * the backward gives dQ, dK, dV (tessera/attn_train.h has the formulas). The REFERENCE kind runs
 * ts_attn_reference / ts_attn_reference_backward (lse computed beside it in double; it stores no
 * scores); every other kind runs its plan's ts_attn_execute_train and a ts_attn_bwd executor bound to
 * the plan (its reduction: TS_ATTN_BWD_AUTO), created by ts_nn_attn_train_prepare or on the first
 * backward. Q, K, V, O, dO, dQ, dK, dV: [batch][heads][n][d] in the backend's token order;
 * lse: [batch][heads][n]; scores: [batch][heads][ts_nn_attn_score_floats]. Thread safety: as
 * ts_nn_attn_run (one call at a time per backend; the reference kind is re-entrant). */

/* Floats of one (batch, head)'s stored scores (ts_attn_score_floats of the plan; 0 for the
 * reference kind, which has nothing to store). */
int64_t ts_nn_attn_score_floats(const ts_nn_attn *a);
/* Creates the backward executor for ctx's threads (NULL: the plan's) once; the reference kind
 * needs none. Allocates; called by ts_nn_attn_backward when it was not called before. */
ts_status ts_nn_attn_train_prepare(ts_nn_attn *a, const ts_context *ctx);
/* O as ts_nn_attn_run computes it, plus lse (not NULL) and, when scores is not NULL and the kind
 * stores them, the raw scores (the STORE_SCORES strategy; ignored by the reference kind). */
ts_status ts_nn_attn_run_train(ts_nn_attn *a, const ts_context *ctx, const float *Q, const float *K, const float *V,
                               float *O, float *lse, float *scores, int64_t batch, int64_t heads);
/* dQ, dK, dV (overwritten; must not overlap the inputs) from the forward's Q, K, V, O, lse and
 * scores (NULL: recomputed; else ts_nn_attn_run_train's from this backend). */
ts_status ts_nn_attn_backward(ts_nn_attn *a, const ts_context *ctx, const float *Q, const float *K, const float *V,
                              const float *O, const float *dO, const float *lse, const float *scores, float *dQ,
                              float *dK, float *dV, int64_t batch, int64_t heads);

/* ---- Vision Transformer -------------------------------------------------------------------
 * images [B][in_chans][img_h][img_w] -> patch embedding (P x P patches, stride P, one GEMM over
 * the unfolded patches [B*n][in_chans*P*P], + bias + position embedding [n][dim]) -> depth x
 * { x += proj(MHSA(LN1(x))); x += fc2(GELU(fc1(LN2(x)))) } -> LN -> mean over tokens -> head.
 * NO class token: the sparse patterns are defined over the h x w patch grid, and a class token
 * would be one extra global row/column outside that grid; a global-average-pool head (as in
 * many high-resolution ViTs and DeiT/ViT variants with GAP) keeps every token on the grid.
 * GELU is the exact (erf) form, as in timm's ViT. Weights: N(0, init_std^2) (linear, patch and
 * position), biases N(0, init_std^2), LayerNorm gamma 1 + N(0, init_std^2), beta N(0, init_std^2),
 * from ts_rng with the config's seed (deterministic for a given config). */
typedef struct ts_nn_vit_config {
  int64_t dim, heads, depth, mlp;   /* embedding width, heads (dim % heads == 0), blocks, MLP width */
  int64_t patch, in_chans, classes;
  int64_t img_h, img_w;             /* multiples of patch */
  float ln_eps;                     /* 1e-6 (timm's ViT) */
  float init_std;                   /* 0.02 */
  uint64_t seed;                    /* 1 */
} ts_nn_vit_config;

/* "deit-s" (384, 6 heads, depth 12, mlp 1536), "vit-b16" (768, 12, 12, 3072), both patch 16,
 * 3 channels, 1000 classes, res x res images; "tiny" (64, 2 heads, depth 2, mlp 128, patch 16,
 * 10 classes) for tests. TS_ERR_INVALID_ARG naming the model or the resolution. */
ts_status ts_nn_vit_config_preset(const char *name, int64_t res, ts_nn_vit_config *out);
/* Every field in range: sizes >= 1, dim % heads == 0, img_h/img_w positive multiples of patch,
 * tokens <= 2^20, ln_eps >= 0, init_std >= 0. TS_ERR_INVALID_ARG naming the field and value. */
ts_status ts_nn_vit_config_validate(const ts_nn_vit_config *c);

typedef struct ts_nn_vit ts_nn_vit;

/* Weights and every activation buffer for `batch` images. ctx (kept, must outlive the model):
 * the thread count of the GEMMs and token-wise loops (NULL: default). No attention backend yet.
 * Thread safety: one ts_nn_vit_forward at a time per model (it writes the model's activation
 * buffers and last timing), and not while its backend runs for anything else (ts_nn_attn); set_attn
 * not during a forward. shape, last_timing and flops only read. Different models forward
 * concurrently when they do not share a backend. */
ts_status ts_nn_vit_create(ts_nn_vit **m, ts_context *ctx, const ts_nn_vit_config *cfg, int64_t batch);
void ts_nn_vit_destroy(ts_nn_vit *m);
/* Grid h x w (img / patch), tokens n = h*w, head dimension dim / heads. */
void ts_nn_vit_shape(const ts_nn_vit *m, int64_t *grid_h, int64_t *grid_w, int64_t *n, int64_t *head_dim);
/* Uses backend a (not owned; it must outlive its use) for every attention layer; it must have been
 * built for n tokens and head dimension dim/heads (TS_ERR_SHAPE otherwise). Replacing the backend
 * is all it takes to change the attention: the next forward follows its token order. */
ts_status ts_nn_vit_set_attn(ts_nn_vit *m, ts_nn_attn *a);

/* logits [batch][classes] from images [batch][in_chans][img_h][img_w]. TS_ERR_INVALID_ARG
 * without a backend. Allocates nothing. */
ts_status ts_nn_vit_forward(ts_nn_vit *m, const float *images, float *logits);

/* Wall time of the last forward and of its attention calls (ts_nn_attn_run, summed over layers). */
typedef struct ts_nn_vit_timing {
  double total_s, attn_s;
} ts_nn_vit_timing;
void ts_nn_vit_last_timing(const ts_nn_vit *m, ts_nn_vit_timing *t);

/* Floating-point operations of one forward (2 per multiply-add): GEMMs, and attention as
 * 4 d per allowed cell per head (nnz given; n*n for dense). */
double ts_nn_vit_flops(const ts_nn_vit *m, int64_t mask_nnz);

/* ---- ViT training ---------------------------------------------------------------------------
 * One step: forward (keeping what the backward needs), cross-entropy on integer labels (mean over
 * the batch), backward of the whole model, SGD (p -= lr * grad for every parameter; the gradients
 * stay readable through ts_nn_vit_param_get). Linear layers' backward through ts_sgemm (dX = dY W^T,
 * dW = X^T dY, db = column sums), LayerNorm and exact-GELU backward row-wise, attention through the
 * backend (ts_nn_attn_backward), the patch embedding's gradients scattered back to grid cells when
 * the backend permutes the tokens.
 *
 * Activation memory. Every activation of a step lives in one arena owned by the model: the blocks'
 * kept activations stack up from one end during the forward and come off in reverse during the
 * backward; the working buffers (shared by the forward and the backward, which never need them at
 * once) and a CHECKPOINT block's re-made activations take the other end. What a block keeps from its
 * forward to its backward is its memory strategy:
 *   RECOMPUTE     FlashAttention style: Q, K, V, O and the attention's log-sum-exp (the backward
 *                 recomputes the scores), the residual stream, LayerNorm statistics, the MLP's
 *                 pre-activation. LayerNorm outputs and GELU outputs are recomputed (cheap, row-wise).
 *   STORE_SCORES  also the attention's raw scores (one float per computed cell): the backward skips Q K^T.
 *   CHECKPOINT    only the block's output (the next block's input); its forward runs again (up to the
 *                 MLP's pre-activation) at the start of its backward.
 * The arena's high-water mark is measured in every step (ts_nn_vit_train_stats.peak_bytes); the
 * bound of ts_nn_vit_train_mem is what the arena reserves and what the planner keeps under a budget. */
typedef enum ts_nn_mem_strategy {
  TS_NN_MEM_RECOMPUTE = 0,
  TS_NN_MEM_STORE_SCORES,
  TS_NN_MEM_CHECKPOINT,
  TS_NN_MEM_COUNT
} ts_nn_mem_strategy;

/* "recompute", "store_scores", "checkpoint" and back (TS_ERR_INVALID_ARG naming the text). */
const char *ts_nn_mem_strategy_name(ts_nn_mem_strategy s);
ts_status ts_nn_mem_strategy_parse(const char *name, ts_nn_mem_strategy *out);

/* Arena bytes of a step with the model's current backend (computed from the shapes; the step
 * measures the real high-water mark). */
typedef struct ts_nn_vit_mem {
  int64_t fixed;                  /* held whatever the strategies: the stem's output, the head's activations */
  int64_t scratch;                /* the working buffers (forward and backward) */
  int64_t layer[TS_NN_MEM_COUNT]; /* what one block keeps from its forward to its backward, per strategy */
  int64_t remat;                  /* a CHECKPOINT block's activations, made again on top during its backward */
} ts_nn_vit_mem;
/* TS_ERR_INVALID_ARG without a backend. */
ts_status ts_nn_vit_train_mem(const ts_nn_vit *m, ts_nn_vit_mem *out);
/* The arena bound for per-layer strategies s[depth]: fixed + scratch + sum of the layers' bytes,
 * + remat when any layer is CHECKPOINT. The step's measured peak never exceeds it. */
int64_t ts_nn_vit_train_bound(const ts_nn_vit_mem *mm, const ts_nn_mem_strategy *s, int64_t depth);

/* Per-layer strategies s[depth] (NULL: all RECOMPUTE, the default). Allocates the gradients (once)
 * and grows the arena to the bound with the current backend (allocation happens here and in the
 * first step after a backend that needs more; never otherwise). TS_ERR_INVALID_ARG for an unknown
 * strategy or without a backend. */
ts_status ts_nn_vit_train_set_strategies(ts_nn_vit *m, const ts_nn_mem_strategy *s);
/* The strategies in force into s[depth]. */
void ts_nn_vit_train_get_strategies(const ts_nn_vit *m, ts_nn_mem_strategy *s);

typedef struct ts_nn_vit_train_stats {
  double loss;                   /* mean cross-entropy of the step's forward */
  double total_s, forward_s, backward_s, sgd_s; /* wall time */
  double attn_fwd_s, attn_bwd_s; /* attention calls: forward (CHECKPOINT re-runs included) and backward */
  double remat_s;                /* CHECKPOINT blocks' forward re-runs (part of backward_s) */
  int64_t peak_bytes;            /* the activation arena's high-water mark in this step (measured) */
  int64_t bound_bytes;           /* ts_nn_vit_train_bound of the strategies in force */
  int64_t arena_bytes;           /* the arena's size */
} ts_nn_vit_train_stats;

/* One step on images [batch][in_chans][img_h][img_w] with labels[batch] in [0, classes); lr >= 0
 * (0: gradients only). st may be NULL. Errors: TS_ERR_INVALID_ARG for NULLs, a label out of range
 * (naming it), a negative or non-finite lr, no backend. Thread safety: as ts_nn_vit_forward. */
ts_status ts_nn_vit_train_step(ts_nn_vit *m, const float *images, const int32_t *labels, float lr,
                               ts_nn_vit_train_stats *st);

/* The parameter tensors, in the order of the weight arena: patch_embed.weight [pdim][dim],
 * patch_embed.bias, pos_embed [n][dim] (grid order), blocks.L.{norm1.weight, norm1.bias,
 * attn.qkv.weight [dim][3 dim], attn.qkv.bias, attn.proj.weight [dim][dim], attn.proj.bias,
 * norm2.weight, norm2.bias, mlp.fc1.weight [dim][mlp], mlp.fc1.bias, mlp.fc2.weight [mlp][dim],
 * mlp.fc2.bias}, norm.weight, norm.bias, head.weight [dim][classes], head.bias. Linear weights are
 * [in][out] (the transpose of torch.nn.Linear's). */
typedef struct ts_nn_vit_param {
  char name[40];
  float *value;      /* the model's weights (a caller may change them between steps) */
  const float *grad; /* the last step's gradient, same shape; NULL before the first training call */
  int ndim;          /* 1 or 2 */
  int64_t shape[2];
  int64_t count;
} ts_nn_vit_param;
int ts_nn_vit_param_count(const ts_nn_vit *m);
/* TS_ERR_INVALID_ARG for i out of [0, count). */
ts_status ts_nn_vit_param_get(const ts_nn_vit *m, int i, ts_nn_vit_param *out);

/* The memory planner: one strategy per layer minimizing the step's time under a budget on the
 * arena bound. Each strategy's time is one block's training forward + backward with the model's
 * backend, MEASURED by the measure engine (interleaved rounds after a warm-up; every block of a ViT
 * has the same shape, so one block per strategy stands for all), and kept in the artifact store
 * (kind "vit-train-mem", keyed by the block shape, batch, backend kind and plan statistics,
 * threads, kernels and CPU); its bytes are the block's kept bytes. The choice is a multiple-choice
 * knapsack (ts_knapsack_mc) over the layers: with RECOMPUTE / STORE_SCORES only under
 * budget - fixed - scratch, and with CHECKPOINT allowed under that less remat; the faster feasible
 * answer wins. Bytes are counted in units of 1/16384 of the budget, rounded up (never over it);
 * then single layers move to faster strategies while the exact bound stays within the budget. */
typedef struct ts_nn_mem_plan_opts {
  int64_t budget;       /* bytes (>= 1) */
  int rounds;           /* timed rounds per strategy after one warm-up (3) */
  bool cache;           /* look the timings up in, and store them to, the artifact store (true) */
  const double *times;  /* [TS_NN_MEM_COUNT] given block times in seconds instead of measuring (NULL) */
} ts_nn_mem_plan_opts;
void ts_nn_mem_plan_opts_default(ts_nn_mem_plan_opts *o, int64_t budget);

typedef struct ts_nn_mem_plan_info {
  double time_s[TS_NN_MEM_COUNT]; /* one block's forward + backward per strategy (median), s */
  ts_nn_vit_mem mem;
  int64_t bound;                  /* ts_nn_vit_train_bound of the choice (<= budget) */
  double predicted_s;             /* sum over the layers of the chosen strategies' block times */
  int count[TS_NN_MEM_COUNT];     /* layers per strategy */
  bool cached;                    /* the timings came from the artifact store */
  double ms;                      /* planning wall time */
} ts_nn_mem_plan_info;

/* Chooses out[depth] for the model's backend (it does not set them: ts_nn_vit_train_set_strategies).
 * Measuring runs block 0's training forward and backward (its gradients are overwritten; the
 * weights are not changed). TS_ERR_INFEASIBLE when even every layer CHECKPOINT does not fit,
 * naming the bytes it needs; TS_ERR_INVALID_ARG for NULLs, a budget < 1, no backend. info may be NULL. */
ts_status ts_nn_vit_plan_memory(ts_nn_vit *m, const ts_nn_mem_plan_opts *o, ts_nn_mem_strategy *out,
                                ts_nn_mem_plan_info *info);

#ifdef __cplusplus
}
#endif
#endif
