/* Shared between cmd_conv.c (options, `layers`, `plan`) and cmd_conv_bench.c (`bench`). */
#ifndef TS_CMD_CONV_H
#define TS_CMD_CONV_H

#include "cli.h"
#include "tessera/cnn.h"

#define CONV_CMD "conv"

typedef struct conv_args {
  cli_common_opts co;
  const char *sub;       /* bench | layers | plan */
  const char *model;
  long batch, res, repeats, e2e_repeats;
  double min_time_ms;    /* --min-time: timed ms per contender and layer, at least (50) */
  int algo;              /* TS_CNN_AUTO or a ts_conv_algo */
  const char *overrides; /* --override PATTERN=ALGO,... */
  const char *torch;     /* --torch FILE (bench/peers/conv_torch.py output) */
  bool no_baselines, no_e2e, reprofile;
  bool replan;           /* --replan: plan: choose again instead of reading the stored plan */
} conv_args;

/* A model's graph, with random weights (seed 1) when `weights`, and its conv layers as planned for
 * the batch. */
typedef struct conv_model {
  ts_cnn_graph *g;
  ts_cnn_conv_info *layers;
  int nlayers;
} conv_model;
ts_status conv_model_load(const conv_args *a, bool weights, conv_model *m);
void conv_model_free(conv_model *m);
ts_cnn_plan_opts conv_plan_opts(const conv_args *a);

int conv_bench(const conv_args *a, ts_context *ctx);

#endif
