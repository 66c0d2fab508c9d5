/* Internal layout of the nn models (shared by the model's creation and its forward pass). */
#ifndef TS_NN_INTERNAL_H
#define TS_NN_INTERNAL_H

#include "tessera/nn.h"

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
};

#endif
