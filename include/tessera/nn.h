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

#ifdef __cplusplus
}
#endif
#endif
