/* plan3d's cost model inside the room: a node order laid out as GPUs, stages carved from it, and
 * the scratch one pricing uses (allocated once per search, reused for every candidate). */
#ifndef TS_PLAN3D_ESTIMATE_H
#define TS_PLAN3D_ESTIMATE_H

#include "plan3d/plan3d_internal.h"

#define P3_MAX_GPUS 65536

typedef struct p3_ctx {
  const ts_p3_model *m;
  const ts_p3_cluster *c;
  const ts_p3_profile *p;
  int nnodes, order[TS_P3_MAX_NODES], node_counts[TS_P3_MAX_TYPES];
  int ngpus;
  int *gpu_node, *gpu_type; /* [ngpus] */
} p3_ctx;

typedef struct p3_stage_layout {
  int first_gpu, ngpus, tp;
  unsigned types; /* bit k: the stage has GPUs of node type k */
} p3_stage_layout;

typedef struct p3_scratch {
  double *cost, *lf, *lb; /* [MAX_STAGES][L]: fwd + bwd, fwd, bwd of each layer on each stage */
  ts_p3_event *events;    /* [MAX_STAGES][2 max_m] */
  int max_m;
  double ef[TS_P3_MAX_STAGES], eb[TS_P3_MAX_STAGES], upd[TS_P3_MAX_STAGES], p2p[TS_P3_MAX_STAGES];
  double fixed[TS_P3_MAX_STAGES], limit[TS_P3_MAX_STAGES], mem[TS_P3_MAX_STAGES], params[TS_P3_MAX_STAGES];
  double fwd[TS_P3_MAX_STAGES], bwd[TS_P3_MAX_STAGES], ar[TS_P3_MAX_STAGES], update[TS_P3_MAX_STAGES];
  int cap[TS_P3_MAX_STAGES], counts[TS_P3_MAX_STAGES], first_layer[TS_P3_MAX_STAGES];
} p3_scratch;

ts_status ts__p3_check_inputs(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p);
ts_status ts__p3_ctx_init(p3_ctx *x, const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p,
                          const int *order, int norder);
void ts__p3_ctx_free(p3_ctx *x);
/* Stages of dp x tp[type] GPUs carved in order; TS_ERR_INFEASIBLE with the reason in why. */
ts_status ts__p3_layout(const p3_ctx *x, int dp, const int *tp, p3_stage_layout *st, int *pp, char *why, size_t cap);
/* Prices a layout (split == NULL: partitioned by `method`) into *plan. Not OK: the reason in why
 * (TS_ERR_INFEASIBLE: cannot run, out of memory among them; TS_ERR_NOT_FOUND: a profile entry
 * is missing). w must hold max_m >= the micro-batch count. */
ts_status ts__p3_price(const p3_ctx *x, int dp, const p3_stage_layout *ls, int pp, int mbs, const int *split,
                       ts_p3_partitioner method, p3_scratch *w, ts_p3_plan *plan, char *why, size_t cap);
ts_status ts__p3_scratch_init(p3_scratch *w, int L, int max_m);
void ts__p3_scratch_free(p3_scratch *w);

#endif
