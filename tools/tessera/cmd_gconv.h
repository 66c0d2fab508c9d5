/* What the `tessera gconv` sub-commands share (defined in cmd_gconv.c): the options, the layer
 * list (a model's group-convolution layers, or one layer from --conn FILE / --gen SPEC), the cost
 * model, and the bench (cmd_gconv_bench.c). */
#ifndef TS_CMD_GCONV_H
#define TS_CMD_GCONV_H

#include "cli.h"
#include "tessera/gconv.h"

#define GCLI_CMD "gconv"

typedef enum gcli_sub { GCLI_PLAN = 0, GCLI_BENCH, GCLI_EXPORT } gcli_sub;

typedef struct gcli_args {
  gcli_sub sub;
  const char *model, *conn, *gen; /* exactly one */
  const char *out;                /* plan: plan JSON; export: directory */
  const char *torch;              /* bench: torch timings JSON (bench/peers/gconv_torch.py) */
  const char *weights;            /* bench with --conn/--gen: weights .npy (else seeded random) */
  const char *json_out;           /* bench: also write the JSON report to this file */
  ts_gconv_conn_opts conn_opts;   /* --connectivity, --condense, --corr, --density, --seed */
  long batch, hw, ksize, stride, groups, repeats;
  long first, last;               /* --layers A-B (model layer indices, inclusive); last -1: all */
  double min_time;                /* bench: seconds per method and layer, at least */
  ts_gconv_plan_opts po;          /* --reorder, --solver, --time-limit, --max-rows */
  bool analytic;                  /* --cost analytic */
  ts_gconv_profile_level level;   /* --profile-level */
  bool no_cache, no_check;
  cli_common_opts co;
} gcli_args;

/* One layer of the run: its shape, the group count the grouped baselines use, the connectivity. */
typedef struct gcli_layer {
  char name[64];
  char spec[320];       /* generator spec, or the file */
  ts_gconv_layer l;
  int groups;
  bool learned;         /* the connectivity option applied (else a standard grouped conv) */
  ts_csr conn;
  float *w;             /* weights from --weights [cout][cin][k][k] (ts_malloc'd), or NULL: random */
} gcli_layer;

/* The layers of the run (generated / loaded): CLI_OK or the exit code (message printed). */
int gcli_layers(const gcli_args *a, gcli_layer **out, int *count);
void gcli_layers_free(gcli_layer *l, int count);

/* The cost model the options ask for (profile: measured once with progress, then cached). */
typedef struct gcli_cost {
  ts_gconv_cost *m;
  char path[4200];
  bool measured;
  double ms;
} gcli_cost;
int gcli_cost_setup(const gcli_args *a, gcli_cost *c);
void gcli_cost_json(cJSON *j, const gcli_args *a, const gcli_cost *c);

/* ts_gconv_plan_get (or plan_make with --no-cache): CLI_OK or the exit code. */
ts_status gcli_plan(const gcli_args *a, const gcli_layer *ly, const gcli_cost *c, ts_gconv_plan *p, bool *cached);

int gcli_bench(const gcli_args *a);

#endif
