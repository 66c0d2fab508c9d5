/* plan3d internals shared by its files: the profile's entries and lookups, a stage's memory, the
 * model's JSON both ways, and the JSON field readers that name the document and the field path in
 * every error. (The GPU layout and pricing live in plan3d_estimate.h.) */
#ifndef TS_PLAN3D_INTERNAL_H
#define TS_PLAN3D_INTERNAL_H

#include <cjson/cJSON.h>

#include "tessera/plan3d.h"

typedef struct p3_entry {
  char gpu[TS_P3_NAME];
  int tp, mbs;
  ts_p3_cost embed, layer, head;
  ts_p3_cost *layers; /* [nlayers] or NULL */
  int nlayers;
  double update_per_param;
} p3_entry;

struct ts_p3_profile {
  int n, cap;
  p3_entry *e;
};

/* The entry for (gpu, tp) whose mbs is nearest to `mbs` (exact when listed): *scale gets
 * mbs / entry.mbs, the linear scaling applied to its times. NULL when (gpu, tp) has none. */
const p3_entry *ts__p3_lookup(const ts_p3_profile *p, const char *gpu, int tp, int mbs, double *scale);
/* Cost of transformer layer l from an entry (the per-layer override when present). */
ts_p3_cost ts__p3_layer_cost(const p3_entry *e, int l);

/* Per-GPU bytes of a stage holding `nlayers` layers (plus embedding / head) with tp, mbs and
 * `inflight` micro-batches of activations; *params (may be NULL) the parameters per GPU. */
double ts__p3_stage_memory(const ts_p3_model *m, int nlayers, bool embedding, bool head, int pp, int tp, int mbs,
                           int inflight, double *params);

/* JSON field readers: `path` names the field in messages ("node_types[1].inter_node"), `what` the
 * document. required == false: a missing key leaves *out unchanged. */
ts_status ts__p3_num(const cJSON *o, const char *what, const char *path, const char *key, bool required, double lo,
                     double *out);
ts_status ts__p3_int(const cJSON *o, const char *what, const char *path, const char *key, bool required, int64_t lo,
                     int64_t hi, int *out);
ts_status ts__p3_str(const cJSON *o, const char *what, const char *path, const char *key, bool required, char *out,
                     size_t cap);
ts_status ts__p3_bool(const cJSON *o, const char *what, const char *path, const char *key, bool *out);
/* The exact DP without its lower-bound pruning: every candidate bottleneck gets its O(S L^2) DP.
 * The textbook form (AMP's inter-stage DP has this shape); bench_plan3d's slow reference. */
ts_status ts__p3_partition_dp_unpruned(int S, int L, const double *cost, const double *fixed, const int *max_layers, int m,
                                       int *counts, double *objective);
cJSON *ts__p3_model_cjson(const ts_p3_model *m);
/* The plan's JSON object (ts_p3_plan_to_json's tree; NULL on OOM), for writers that embed plans. */
cJSON *ts__p3_plan_cjson(const ts_p3_plan *p);
/* Every node of the cluster, types in file order: the node order when none is given. The count. */
int ts__p3_full_order(const ts_p3_cluster *c, int order[TS_P3_MAX_NODES]);
ts_status ts__p3_model_parse(const cJSON *j, const char *what, ts_p3_model *m);

#endif
