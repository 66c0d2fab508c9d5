/* Internal layout of the nn models (shared by the model's creation and its forward pass). */
#ifndef TS_NN_INTERNAL_H
#define TS_NN_INTERNAL_H

#include <cjson/cJSON.h>

#include "tessera/attn_train.h"
#include "tessera/nn.h"

/* An attention backend (nn_attn.c; its training side in nn_attn_train.c). */
struct ts_nn_attn {
  ts_nn_attn_kind kind;
  int64_t n, d;
  int32_t *perm;       /* [n] perm[new] = old grid token, or NULL (identity) */
  ts_bitmap mask;      /* n x n in the backend's token order */
  ts_attn_plan *plan;  /* NULL for the reference */
  ts_attn_bwd *bwd;    /* the backward executor bound to plan (training; made on first need) */
  void (*bwd_free)(ts_attn_bwd *); /* its destructor, set with it: a backend used for inference only
                                      never links the training code */
  ts_nn_attn_info info;
};

/* The training step's activation arena: one allocation used as two stacks, `lo` growing up from
 * the start (the blocks' kept activations) and `hi` growing down from the end (working buffers and
 * re-made activations); peak is the high-water mark of lo + hi. Pieces are 64-byte aligned. */
typedef struct ts__arena {
  char *base;
  int64_t cap, lo, hi, peak;
} ts__arena;

/* One transformer block's parameters; linear weights [in][out]. */
typedef struct ts__vit_layer {
  float *ln1_g, *ln1_b; /* [dim] */
  float *wqkv, *bqkv;   /* [dim][3 dim], [3 dim]: columns q | k | v, each head-major (head h: h*hd..) */
  float *wo, *bo;       /* [dim][dim], [dim] */
  float *ln2_g, *ln2_b; /* [dim] */
  float *w1, *b1;       /* [dim][mlp], [mlp] */
  float *w2, *b2;       /* [mlp][dim], [dim] */
} ts__vit_layer;

struct ts_nn_vit {
  ts_nn_vit_config cfg;
  ts_context *ctx;
  int64_t batch, gh, gw, n, hd, pdim; /* pdim = in_chans * patch^2 */
  float *weights;                     /* one arena for every parameter */
  float *w_pe, *b_pe, *pos;           /* [pdim][dim] (pdim ordered c, ky, kx), [dim], [n][dim] grid order */
  ts__vit_layer *layers;              /* [depth] */
  float *lnf_g, *lnf_b;               /* [dim] */
  float *w_head, *b_head;             /* [dim][classes], [classes] */
  float *acts;                        /* one arena for every activation */
  float *x;                           /* [B*n][dim] residual stream */
  float *h;                           /* [B*n][dim] LayerNorm output, then the unpacked attention output */
  float *qkv;                         /* [B*n][3 dim] QKV GEMM output; reused as O [B][heads][n][hd] */
  float *q, *k, *v;                   /* [B][heads][n][hd] */
  float *big;                         /* [B*n][max(mlp, pdim)]: unfolded patches, then the MLP hidden */
  float *pooled;                      /* [B][dim] */
  ts_nn_attn *attn;                   /* not owned */
  const int32_t *perm;                /* the backend's token order (NULL: grid order) */
  ts_nn_vit_timing timing;
  int64_t nweights;                   /* floats in the weight arena (padding included) */
  /* training (vit_train.c): NULL / zero until the first training call */
  float *grads;                       /* [nweights]: the gradient of weights[i] at grads[i] */
  ts_nn_mem_strategy *strategy;       /* [depth] */
  struct ts__vit_saved *saved;        /* [depth] the kept activations of each block in the step */
  float **xs;                         /* [depth + 1] the residual stream between blocks (arena) */
  int64_t *lo_mark;                   /* [depth] the arena's low end before block l's pieces */
  ts__arena arena;
};

/* ---- shared by the forward (vit_forward.c) and training (vit_train*.c) -------------------- */

int ts__vit_threads(const ts_nn_vit *m);
/* patches [B*n][pdim] of images in the model's token order (perm). */
void ts__vit_unfold(const ts_nn_vit *m, const float *img, float *patches);
/* x[r] (ld) += bias (+ pos[grid cell of r] when pos) over the B*n rows of cols. */
/* Mean over the tokens of h [B*n][dim] into pooled [B][dim] (summed in double), then logits
 * [B][classes] = b_head + pooled W_head: the head of the forward and of the training step. */
ts_status ts__vit_pool_head(const ts_nn_vit *m, const float *h, float *pooled, float *logits);
void ts__vit_add_rows(const ts_nn_vit *m, float *x, int64_t ld, int64_t cols, const float *bias, const float *pos);
/* qkv [B*n][3 dim] (+ bias) -> q, k, v [B][heads][n][hd]. */
void ts__vit_pack_qkv(const ts_nn_vit *m, const float *qkv, const float *bqkv, float *q, float *k, float *v);
/* O [B][heads][n][hd] -> out [B*n][dim], and back (pack_heads). */
void ts__vit_unpack_o(const ts_nn_vit *m, const float *O, float *out);
void ts__vit_pack_heads(const ts_nn_vit *m, const float *in, float *O);
/* x [B*n][cols] += bias, then GELU (erf) in place. */
ts_status ts__vit_bias_gelu(const ts_nn_vit *m, float *x, int64_t cols, const float *bias);

/* ---- training pieces (vit_train_ops.c) ---------------------------------------------------- */

/* Arena pieces of `floats` floats from the low or the high end; NULL (TS_ERR_INTERNAL set) when the
 * reservation is too small -- the bound says how much a step needs, so that is a bug. */
float *ts__arena_lo(ts__arena *a, int64_t floats);
float *ts__arena_hi(ts__arena *a, int64_t floats);
/* Bytes an arena piece of `floats` takes (64-byte rounding). */
int64_t ts__arena_bytes(int64_t floats);

/* LayerNorm of the R rows of D in x into y with the row statistics kept (mean, rstd = 1/sqrt(var +
 * eps), accumulated in double); ln_apply recomputes y from them (bitwise the forward's y). */
void ts__ln_fwd(const ts_nn_vit *m, int64_t R, const float *x, const float *g, const float *b, float *y, float *mean,
                float *rstd);
void ts__ln_apply(const ts_nn_vit *m, int64_t R, const float *x, const float *mean, const float *rstd, const float *g,
                  const float *b, float *y);
/* LayerNorm backward: dx (+)= d/dx of y given dy (accumulate: added to dx, else written);
 * dg, db = sums over the rows of dy * xhat and dy (written). */
void ts__ln_bwd(const ts_nn_vit *m, int64_t R, const float *x, const float *mean, const float *rstd, const float *g,
                const float *dy, float *dx, bool accumulate, float *dg, float *db);
/* out[j] = sum over the R rows of x[r][j] (ld = cols), accumulated in double. */
void ts__colsum(const ts_nn_vit *m, int64_t R, int64_t cols, const float *x, float *out);
/* du = du * GELU'(u) over R x cols, with g = GELU(u) (erf form): GELU'(u) = Phi(u) + u phi(u). */
ts_status ts__gelu_bwd(const ts_nn_vit *m, int64_t R, int64_t cols, const float *u, const float *g, float *du);
/* Linear layer backward for Y[R][O] = X[R][I] W[I][O] + b: dW = X^T dY, db = colsum dY (when db),
 * and dX = dY W^T (when dX; accumulated into dX when acc). */
ts_status ts__linear_bwd(ts_nn_vit *m, int64_t R, int64_t I, int64_t O, const float *X, const float *W,
                         const float *dY, float *dX, bool acc, float *dW, float *db);

/* ---- one block's training forward and backward (vit_backward.c) --------------------------- */

/* What a block keeps between its forward and its backward (all in the arena). */
typedef struct ts__vit_saved {
  float *mean1, *rstd1;  /* [R] LayerNorm 1 statistics of the block input */
  float *q, *k, *v, *o;  /* [B][heads][n][hd] */
  float *lse;            /* [B][heads][n] */
  float *scores;         /* [B][heads][score floats] (STORE_SCORES) or NULL */
  float *xmid;           /* [R][dim] residual after attention */
  float *mean2, *rstd2;  /* [R] LayerNorm 2 statistics */
  float *u;              /* [R][mlp] fc1 output (+ bias), before GELU */
} ts__vit_saved;

/* The working buffers (the arena's high end, shared by forward and backward). */
typedef struct ts__vit_work {
  float *dx, *dt, *h;        /* [R][dim] */
  float *g, *du;             /* [R][max(mlp, pdim)] */
  float *dq, *dk, *dv, *dob; /* [B][heads][n][hd] */
  float *dqkv;               /* [R][3 dim] */
} ts__vit_work;

/* Floats of a block's saved set (scores when store_scores) and of the working buffers. */
int64_t ts__vit_saved_bytes(const ts_nn_vit *m, bool store_scores);
int64_t ts__vit_work_bytes(const ts_nn_vit *m);
/* Carves the saved set from the low (hi = false) or high end. NULL pieces: TS_ERR_INTERNAL. */
ts_status ts__vit_saved_alloc(ts_nn_vit *m, bool hi, bool store_scores, ts__vit_saved *sv);
ts_status ts__vit_work_alloc(ts_nn_vit *m, ts__vit_work *w);

/* Training timings of a step, accumulated by the blocks. */
typedef struct ts__vit_clock {
  double attn_fwd, attn_bwd, remat;
} ts__vit_clock;

/* Block L's training forward from x_in: fills sv; x_out = the block output (NULL: stop after the
 * MLP's pre-activation, as a CHECKPOINT block's re-run does). */
ts_status ts__vit_block_fwd(ts_nn_vit *m, const ts__vit_layer *L, const float *x_in, ts__vit_saved *sv,
                            const ts__vit_work *w, float *x_out, ts__vit_clock *ck);
/* Block L's backward: w->dx holds dLoss/dx_out on entry and dLoss/dx_in on return; the layer's
 * gradients are written at gl (its parameters' places in the gradient arena). */
ts_status ts__vit_block_bwd(ts_nn_vit *m, const ts__vit_layer *L, ts__vit_layer *gl, const float *x_in,
                            const ts__vit_saved *sv, const ts__vit_work *w, ts__vit_clock *ck);
/* Gradients, per-layer arrays, and an arena of at least max(the bound of the strategies in force,
 * extra) bytes (vit_train.c). */
ts_status ts__vit_train_reserve(ts_nn_vit *m, int64_t extra);
/* gl = the gradient arena's view of layer L (same offsets). */
void ts__vit_grad_layer(const ts_nn_vit *m, const ts__vit_layer *L, ts__vit_layer *gl);

/* The "vit-train-mem" artifact's payload (vit_mem_plan.c, docs/FORMATS.md): {"time_s": [recompute,
 * store_scores, checkpoint] (positive seconds), "rounds": N}. from_cjson: TS_ERR_FORMAT naming the
 * field, t untouched on error; to_cjson: NULL on OOM. Shared with the JSON fuzz harness. */
ts_status ts__vit_mem_from_cjson(const cJSON *data, double t[TS_NN_MEM_COUNT]);
cJSON *ts__vit_mem_to_cjson(const double t[TS_NN_MEM_COUNT], int rounds);

#endif
