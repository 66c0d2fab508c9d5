/* Shared internals of the CNN graph executor (cnn.h): graph nodes, the planned net, and the
 * node kernels (pooling, concat, add, batch norm, ReLU, fully connected). */
#ifndef TS_CNN_INTERNAL_H
#define TS_CNN_INTERNAL_H

#include "tessera/cnn.h"

typedef struct cnn_node {
  ts_cnn_op op;
  char name[TS_CNN_NAME_MAX];
  int nin, in[TS_CNN_MAX_INPUTS];
  int c, h, w; /* output per image */
  ts_cnn_conv_params conv;
  ts_cnn_pool_params pool;
  int fc_out;
  float eps;
  float *param[4];
  size_t param_n[4];
} cnn_node;

struct ts_cnn_graph {
  char name[TS_CNN_NAME_MAX];
  cnn_node *nodes;
  int n, cap;
  ts_status err; /* sticky: first builder error */
  char errmsg[512];
};

/* Planned node: `src` is the tensor (node id) holding its value (itself, or the producer it was
 * fused into); `relu` is a ReLU fused into this node. */
typedef struct net_node {
  int src;
  bool fused, relu;
  bool chosen;               /* conv: algo decided */
  bool intact;               /* the tensor's bytes are not reused by a later tensor */
  float *out;                /* arena slice (NULL for the input and fused nodes) */
  size_t numel;              /* N * c * h * w */
  int first, last;           /* lifetime: producing node and last consuming node (execution order) */
  ts_conv_plan *plan;        /* conv */
  ts_conv_desc desc;
  ts_conv_algo algo;
  char why[192];
  int bn;                    /* conv: the BN node folded into it, or -1 */
  float *scale, *shift;      /* standalone BN: per channel */
  double seconds;            /* last forward */
} net_node;

struct ts_cnn_net {
  ts_context *ctx;
  const ts_cnn_graph *g;
  int batch, n;
  net_node *nodes;
  int *convs, nconv;         /* node ids of planned convolutions, in order */
  unsigned char *arena;
  size_t arena_bytes;
  void *ws;
  size_t ws_bytes;
  const float *input;        /* bound during forward */
  ts_cnn_timing timing;
};

/* A net of g for o taken only as far as its convolutions' algorithms (fusion, descriptors, the
 * overrides, and for the others the profile, measuring the shapes it lacks as ts_cnn_net_create
 * does): no weights needed, nothing allocated for a forward. ts_cnn_net_conv_count / _conv_info read
 * the choice; ts_cnn_net_forward must not be called on it; ts_cnn_net_destroy releases it. The conv
 * plan (cnn_plan.c) chooses through it. */
ts_status ts__cnn_net_choose(ts_cnn_net **out, ts_context *ctx, const ts_cnn_graph *g, const ts_cnn_plan_opts *o);

/* Arena layout: offsets for every tensor with numel > 0 from its lifetime (cnn_arena.c). */
ts_status ts__cnn_arena_plan(ts_cnn_net *net, bool reuse, size_t *offsets, size_t *total);
/* Runs one non-conv node (cnn_ops.c). */
ts_status ts__cnn_run_node(ts_cnn_net *net, int id);
/* A node's input tensor data (the caller's input for the input node). */
const float *ts__cnn_data(const ts_cnn_net *net, int id);

#endif
