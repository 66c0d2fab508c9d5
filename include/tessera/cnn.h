/* tessera cnn: a graph executor for convolutional networks (fp32 inference) and a model zoo
 * (VGG16, ResNet-50/101/152, Inception-v4), built on the convolution plans of conv.h.
 *
 * Flow:  graph (nodes with per-image shapes and parameters, built in topological order)
 *        -> net (ts_cnn_net_create: batch size fixed, batch norm folded into the convolution it
 *           follows, ReLU fused into the convolution / add / fully connected layer it follows,
 *           one algorithm chosen per convolution, every plan, weight transform, activation
 *           buffer and workspace allocated) -> ts_cnn_net_forward (many times, allocates nothing).
 *
 * Tensors: every node has one output, [N][C][H][W] fp32 in NCHW (fully connected layers give
 * [N][out][1][1]). NCHW is the only layout between nodes: the fast convolution algorithms
 * transform their inputs anyway (Winograd into tile matrices, the direct kernel into a padded
 * copy, the GEMM paths into lowered panels), and oneDNN's measured times include its own NCHW
 * reorders in the same way, so a blocked inter-node layout would only save those reorders. The
 * layout field is there so a later room (INT8, blocked layouts) can add one per tensor.
 *
 * Memory: activations live in one arena; a tensor's bytes are reused by tensors whose lifetimes
 * (producer .. last consumer) do not overlap (opts.reuse_memory), so after a forward only tensors
 * still live at the end (and, without reuse, all of them) can be read with ts_cnn_net_tensor.
 *
 * Graph building uses a sticky error: every builder call returns the new node's id (>= 0), or -1
 * once any call has failed; ts_cnn_graph_status returns the first error with its message. */
#ifndef TESSERA_CNN_H
#define TESSERA_CNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/conv.h"
#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_cnn_op {
  TS_CNN_INPUT = 0,
  TS_CNN_CONV,    /* ts_conv plan; optional bias */
  TS_CNN_BN,      /* y = (x - mean) / sqrt(var + eps) * gamma + beta per channel */
  TS_CNN_RELU,
  TS_CNN_MAXPOOL, /* padding counts as -inf */
  TS_CNN_AVGPOOL, /* count_include_pad chooses the divisor at the border */
  TS_CNN_GAP,     /* global average pool -> [N][C][1][1] */
  TS_CNN_CONCAT,  /* along channels */
  TS_CNN_ADD,     /* elementwise sum of two tensors of one shape (residual connection) */
  TS_CNN_FC,      /* flattens C*H*W; y = W x + b, W [out][in] (ts_sgemm) */
  TS_CNN_OP_COUNT
} ts_cnn_op;

typedef enum ts_cnn_layout { TS_CNN_NCHW = 0 } ts_cnn_layout;

#define TS_CNN_MAX_INPUTS 8
#define TS_CNN_NAME_MAX 64

const char *ts_cnn_op_name(ts_cnn_op op); /* "input", "conv", "bn", "relu", "maxpool", ... */

typedef struct ts_cnn_conv_params {
  int k, r, s;                                  /* output channels, kernel height, width */
  int stride_h, stride_w;
  int pad_top, pad_bottom, pad_left, pad_right;
  int dilation_h, dilation_w;
  int groups;
  bool bias;
} ts_cnn_conv_params;
/* k outputs, r x s kernel, one stride, symmetric padding pad_h (rows) / pad_w (columns), no bias. */
ts_cnn_conv_params ts_cnn_conv_params_make(int k, int r, int s, int stride, int pad_h, int pad_w);

typedef struct ts_cnn_pool_params {
  int kh, kw, stride_h, stride_w, pad_h, pad_w;
  bool count_include_pad; /* average pooling: divide by kh*kw (true) or by the in-range taps */
} ts_cnn_pool_params;
ts_cnn_pool_params ts_cnn_pool_params_make(int k, int stride, int pad);

/* Thread safety: building (the builders below, ts_cnn_param, ts_cnn_graph_init_random) needs the
 * graph to itself. Once built it is only read: by the const functions, which may run on any
 * number of threads at once, and by the nets made from it (ts_cnn_net_create, and every
 * ts_cnn_net_forward reads its fully connected weights), so no parameter may change while a net
 * made from it exists. Create nets one at a time: creating one may time convolutions and write the
 * context's conv profile artifact. */
typedef struct ts_cnn_graph ts_cnn_graph;

ts_status ts_cnn_graph_create(ts_cnn_graph **g, const char *name);
void ts_cnn_graph_destroy(ts_cnn_graph *g);
ts_status ts_cnn_graph_status(const ts_cnn_graph *g);
const char *ts_cnn_graph_name(const ts_cnn_graph *g);
int ts_cnn_graph_size(const ts_cnn_graph *g);

/* Builders (name NULL: "<op><id>"; names must be unique, at most TS_CNN_NAME_MAX - 1 bytes).
 * The graph's output is its last node. */
int ts_cnn_input(ts_cnn_graph *g, int c, int h, int w);
int ts_cnn_conv(ts_cnn_graph *g, const char *name, int x, const ts_cnn_conv_params *p);
int ts_cnn_bn(ts_cnn_graph *g, const char *name, int x, float eps);
int ts_cnn_relu(ts_cnn_graph *g, const char *name, int x);
int ts_cnn_pool(ts_cnn_graph *g, const char *name, int x, ts_cnn_op kind, const ts_cnn_pool_params *p);
int ts_cnn_gap(ts_cnn_graph *g, const char *name, int x);
int ts_cnn_concat(ts_cnn_graph *g, const char *name, int n, const int *xs);
int ts_cnn_add(ts_cnn_graph *g, const char *name, int a, int b);
int ts_cnn_fc(ts_cnn_graph *g, const char *name, int x, int out);

typedef struct ts_cnn_node_info {
  ts_cnn_op op;
  const char *name;
  int ninputs;
  const int *inputs;
  int c, h, w;            /* output shape per image */
  ts_cnn_layout layout;
  ts_cnn_conv_params conv;
  ts_cnn_pool_params pool;
  int fc_out;
  float eps;
  double flops;           /* per image: conv 2*K*P*Q*C/g*R*S, fc 2*in*out, 0 otherwise */
} ts_cnn_node_info;
ts_status ts_cnn_graph_node(const ts_cnn_graph *g, int id, ts_cnn_node_info *out);
/* id of the node called name, or -1. */
int ts_cnn_graph_find(const ts_cnn_graph *g, const char *name);

/* Parameters, allocated on first access (zeros) or by init_random:
 *   conv  0: weights [K][C/g][R][S], 1: bias [K] (when the conv has one)
 *   bn    0: gamma, 1: beta, 2: running mean, 3: running variance, each [C]
 *   fc    0: weights [out][in], 1: bias [out]
 * TS_ERR_INVALID_ARG for another node kind or index. */
ts_status ts_cnn_param(ts_cnn_graph *g, int id, int which, float **data, size_t *count);
/* Random parameters from a fixed seed: conv/fc weights uniform in +-sqrt(6 / fan_in) (He: keeps
 * the activations' scale through ReLU layers), biases and BN beta/mean uniform in +-0.1, BN gamma
 * in [0.4, 0.9) (damps the growth through residual sums), variance in [0.5, 1.5). */
ts_status ts_cnn_graph_init_random(ts_cnn_graph *g, uint64_t seed);

/* Model zoo: "vgg16", "resnet50", "resnet101", "resnet152", "inception-v4". res 0: the model's
 * own input size (224; 299 for inception-v4); else any size the model's layers allow. Parameters
 * are not allocated (init_random or ts_cnn_param). */
ts_status ts_cnn_model_create(ts_cnn_graph **g, const char *name, int res);
const char *ts_cnn_model_list(void); /* "vgg16, resnet50, resnet101, resnet152, inception-v4" */

/* ---- net: a graph planned for a batch size ---------------------------------------------- */

#define TS_CNN_AUTO (-1)

typedef struct ts_cnn_plan_opts {
  int batch;                /* images per forward (1) */
  int algo;                 /* TS_CNN_AUTO (per-layer selection) or a ts_conv_algo used for every
                               convolution it applies to (selection for the others) */
  const char *overrides;    /* "PATTERN=ALGO,..." per layer, PATTERN a shell glob over layer names
                               (fnmatch), applied after `algo`; the first matching pattern wins.
                               An algorithm that does not apply to a layer it names is an error. */
  unsigned candidates;      /* algorithms the selection may choose (bit mask; 0: all but reference) */
  ts_conv_profile *profile; /* selection table; NULL: the context's cached profile
                               (ts_conv_profile_open), saved after measuring */
  bool measure_missing;     /* measure layer shapes the profile lacks (true); false: they are
                               TS_ERR_NOT_FOUND */
  ts_conv_time_opts time;   /* measurement options */
  bool fold_bn, fuse_relu;  /* true, true */
  bool reuse_memory;        /* true */
  bool progress;            /* progress bar while measuring (true) */
  bool replan;              /* ts_cnn_conv_plan_create: choose again instead of reading the stored
                               plan, and replace it (false); ts_cnn_net_create ignores it */
} ts_cnn_plan_opts;
ts_cnn_plan_opts ts_cnn_plan_opts_default(void);

typedef struct ts_cnn_net ts_cnn_net;
/* The graph must have parameters (init_random or set). The context and graph must outlive the
 * net (fully connected weights are read from the graph).
 * Thread safety: one ts_cnn_net_forward at a time per net (it writes the net's activation arena,
 * its workspaces and its timings); ts_cnn_net_tensor, _last_timing and _node_seconds read what a
 * forward writes and must not run during one; the other const functions read only what create
 * made and may run at any time. Different nets (even of one graph) forward concurrently. */
ts_status ts_cnn_net_create(ts_cnn_net **net, ts_context *ctx, const ts_cnn_graph *g, const ts_cnn_plan_opts *o);
void ts_cnn_net_destroy(ts_cnn_net *net);
/* in [N][C][H][W] of the input node, out [N][numel of the last node per image]. */
ts_status ts_cnn_net_forward(ts_cnn_net *net, const float *in, float *out);
size_t ts_cnn_net_input_numel(const ts_cnn_net *net);  /* N*C*H*W */
size_t ts_cnn_net_output_numel(const ts_cnn_net *net); /* N * per-image output */
size_t ts_cnn_net_arena_bytes(const ts_cnn_net *net);  /* activations */
size_t ts_cnn_net_workspace_bytes(const ts_cnn_net *net);
/* A node's output after the last forward, or NULL when its memory has been reused since (or the
 * node was fused away: BN/ReLU folded into their producer give the producer's tensor). */
const float *ts_cnn_net_tensor(const ts_cnn_net *net, int node);

typedef struct ts_cnn_conv_info {
  const char *name;    /* the graph node's name */
  int node;
  ts_conv_desc desc;   /* as planned: batch, fused ReLU */
  ts_conv_algo algo;
  const char *why;     /* "fastest of 6 measured: ...", "--algo direct", "override conv1=im2col" */
  bool bn_folded;
  double flops;        /* per forward (whole batch) */
} ts_cnn_conv_info;
int ts_cnn_net_conv_count(const ts_cnn_net *net);
/* The convolution layers a net would plan for opts (batch, BN folding, ReLU fusion), without
 * planning anything: algo is unset and why is "". Fills up to cap entries of out and returns the
 * count (or -1 with the error set). */
int ts_cnn_conv_layers(const ts_cnn_graph *g, const ts_cnn_plan_opts *o, ts_cnn_conv_info *out, int cap);
ts_status ts_cnn_net_conv_info(const ts_cnn_net *net, int i, ts_cnn_conv_info *out);

/* ---- conv plan: the per-layer choice, kept in the artifact store ------------------------------
 * The algorithm every convolution of a graph gets for opts -- the choice ts_cnn_net_create makes
 * (overrides, opts.algo, else the fastest in the conv profile, measuring the shapes it lacks), made
 * without the graph's weights -- kept as the artifact conv-plan/<key> (tessera/artifact.h,
 * docs/FORMATS.md "Convolution plans"), so the same layers, options and machine are answered
 * without planning again. Key: the one key hash (ts_hash) of the graph's name, its convolution
 * layers as planned (names, descriptors with batch and fused ReLU), opts' algo, candidates,
 * overrides, fold_bn and fuse_relu, the context's thread count, the kernel level, the CPU model and
 * the planner's version. A stored plan is used while the conv profile's entries for its layers hash
 * as they did when it was made (its profile stamp): a profile measured again (`tessera conv bench`)
 * or another profile makes it again, as does opts.replan. A corrupt or foreign stored plan is moved
 * aside (<file>.bad, a note on stderr) and made again, never fatal; a plan that cannot be stored is
 * reported on stderr and is not an error. Provenance: this machine, the context's threads, the key
 * of the stored machine profile of that thread count.
 *
 * Profile: opts.profile, or (NULL) the context's cached one (ts_conv_profile_open). When shapes were
 * measured into it (opts.measure_missing), the profile is saved -- the caller's too -- so the
 * stored plan's stamp is what the next create reads; a failed save is reported on stderr.
 *
 * Thread safety: immutable after create: every const call may run on any number of threads at
 * once. Create plans one at a time (a create may measure into the profile and write it). */
#define TS_CNN_CONV_PLAN_VERSION 2
typedef struct ts_cnn_conv_plan ts_cnn_conv_plan;
/* The context gives the thread count (it need not outlive the plan); the graph needs no weights. */
ts_status ts_cnn_conv_plan_create(ts_cnn_conv_plan **p, ts_context *ctx, const ts_cnn_graph *g,
                                  const ts_cnn_plan_opts *opts);
void ts_cnn_conv_plan_destroy(ts_cnn_conv_plan *p);
int ts_cnn_conv_plan_count(const ts_cnn_conv_plan *p); /* convolution layers, in graph order */
/* Layer i's choice: name, node, desc (as planned), algo, why, bn_folded, flops; name and why point
 * into the plan. */
ts_status ts_cnn_conv_plan_layer(const ts_cnn_conv_plan *p, int i, ts_cnn_conv_info *out);
bool ts_cnn_conv_plan_cached(const ts_cnn_conv_plan *p);      /* read from the store, not chosen now */
const char *ts_cnn_conv_plan_path(const ts_cnn_conv_plan *p); /* <cache>/conv-plan/<key>.json ("" from JSON) */
const char *ts_cnn_conv_plan_key(const ts_cnn_conv_plan *p);  /* 16 hex digits */
/* The plan as JSON (the artifact's payload, docs/FORMATS.md) and back; a plan read from JSON has
 * cached false and path "". from_json validates every field (a layer's algorithm must apply to its
 * descriptor) and names the first wrong one (TS_ERR_FORMAT). */
ts_status ts_cnn_conv_plan_to_json(const ts_cnn_conv_plan *p, char **json);
ts_status ts_cnn_conv_plan_from_json(ts_cnn_conv_plan **p, const char *json);

/* Seconds of the last forward: in total, in convolutions, and per graph node (0 for fused ones). */
typedef struct ts_cnn_timing {
  double total_s, conv_s;
} ts_cnn_timing;
void ts_cnn_net_last_timing(const ts_cnn_net *net, ts_cnn_timing *t);
double ts_cnn_net_node_seconds(const ts_cnn_net *net, int node);

#ifdef __cplusplus
}
#endif
#endif
