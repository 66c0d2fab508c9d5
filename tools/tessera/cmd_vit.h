/* Shared between cmd_vit.c (`vit bench`: options, the three attention backends, figures) and
 * cmd_vit_train.c (`vit train-bench`). */
#ifndef TS_CMD_VIT_H
#define TS_CMD_VIT_H

#include <cjson/cJSON.h>

#include "cli.h"
#include "tessera/attn_profile.h"
#include "tessera/nn.h"

#define VIT_MAX_ROUNDS 64 /* --repeats at most */

enum { VIT_DENSE, VIT_FIXED, VIT_SCHED, VIT_NB }; /* the backends, in the order of be[] */
extern const char *const vit_backend_names[VIT_NB];

/* The options both verbs take (model, resolution, pattern, batch, depth, repeats, the fixed tile and
 * the scheduled backend's planning) and what setting up the scheduled backend's cost made. */
typedef struct vit_args {
  const char *model, *pattern;
  long res, batch, depth, repeats;
  bool fixed_given;
  ts_attn_tile fixed;
  ts_nn_attn_opts sched;
  bool profile;                 /* --cost profile */
  ts_attn_profile_level level;
  ts_attn_cost_model *cost_model;
  char cost_tag[64];
  double profile_ms;
} vit_args;

/* Defaults: batch 1, 3 repeats, measured profile cost, scheduled backend calibrated and cached. */
void vit_args_default(vit_args *b);
/* Consumes argv[*i] (and its value) when it is one of vit_args' options: 1 consumed, 0 not one of
 * them, -1 bad value (message printed). cmd: the command name for messages. */
int vit_parse_opt(const char *cmd, int argc, char **argv, int *i, vit_args *b);
/* The configuration (preset b->model at b->res, b->depth) and the token mask of b->pattern; a usage
 * message and CLI_USAGE when one is missing or bad, CLI_OK otherwise. models: the names accepted
 * (e.g. "deit-s, vit-b16"; each must be a preset). */
int vit_model_setup(const char *cmd, const char *verb, vit_args *b, const char *models, ts_nn_vit_config *cfg,
                    ts_nn_token_mask *mask);
/* The three backends for the mask (be[VIT_DENSE], be[VIT_FIXED], be[VIT_SCHED]): dense flash, fixed
 * (b->fixed when given, else the fastest of four tiles by attention-only timing; *fixed64_ms its
 * 64x64 time, NAN when not measured) and scheduled (with the cost of --cost). */
ts_status vit_backends_create(vit_args *b, ts_context *ctx, const ts_nn_token_mask *mask, int64_t heads, int64_t hd,
                              ts_nn_attn *be[VIT_NB], double *fixed64_ms);
void vit_args_free(vit_args *b);
/* n floats uniform in [-1, 1) from seed 3: the images both verbs run on. */
void vit_fill_images(float *img, size_t n);

/* A figure over the timed rounds: the median and quartiles of its per-round values (ms for times,
 * x for ratios), the fastest round (times), and for a ratio the distribution-free 95% interval of
 * its median (ts_ratio_ci). */
typedef struct vit_fig {
  double med, q25, q75, min, lo, hi;
} vit_fig;
vit_fig vit_time_fig(double *v, int n);  /* sorts v */
vit_fig vit_ratio_fig(double *r, int n); /* sorts r */
/* o[name] = the median, o[name_q25], o[name_q75], and for a ratio o[name_ci95] = [lo, hi]. */
void vit_add_fig(cJSON *o, const char *name, const vit_fig *f, bool ratio);

/* --dump DIR of train-bench (cmd_vit_dump.c): one step (lr) of model m (configuration cfg, batch)
 * with backend a (named `backend`) on img / labels, written as .npy files for the PyTorch peer. */
ts_status vit_train_dump(const char *dir, ts_nn_vit *m, const ts_nn_vit_config *cfg, int64_t batch, ts_nn_attn *a,
                         const char *backend, const ts_nn_token_mask *mask, const float *img, const int32_t *labels,
                         float lr);

/* `tessera vit train-bench` (cmd_vit_train.c). */
int vit_train_bench(int argc, char **argv);

#endif
