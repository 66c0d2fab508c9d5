/* plan3d plans as JSON (docs/FORMATS.md, "plan3d plan"): self-contained (model, node type names),
 * read back with a consistency check that names the first field that fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"
#include "plan3d/plan3d_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define PLAN_VERSION 1

static cJSON *pair(int a, int b) {
  int v[2] = {a, b};
  return cJSON_CreateIntArray(v, 2);
}

static bool add_num(cJSON *o, const char *k, double v) { return cJSON_AddNumberToObject(o, k, v) != NULL; }

cJSON *ts__p3_plan_cjson(const ts_p3_plan *p) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  bool ok = add_num(j, "plan3d", PLAN_VERSION);
  cJSON *md = ts__p3_model_cjson(&p->model);
  ok = ok && md && cJSON_AddItemToObject(j, "model", md);
  if (!ok) cJSON_Delete(md);
  ok = ok && cJSON_AddStringToObject(j, "cluster", p->cluster);
  cJSON *types = cJSON_AddArrayToObject(j, "node_types");
  ok = ok && types;
  for (int k = 0; ok && k < p->ntypes; k++) {
    cJSON *t = cJSON_CreateObject();
    ok = t && cJSON_AddItemToArray(types, t) && cJSON_AddStringToObject(t, "name", p->type_name[k]) &&
         cJSON_AddStringToObject(t, "gpu", p->gpu_name[k]) && add_num(t, "gpus_per_node", p->gpus_per_node[k]);
  }
  cJSON *order = cJSON_AddArrayToObject(j, "node_order");
  ok = ok && order;
  for (int n = 0; ok && n < p->nnodes; n++) ok = cJSON_AddItemToArray(order, cJSON_CreateString(p->type_name[p->node_order[n]]));
  ok = ok && add_num(j, "dp", p->dp) && add_num(j, "pp", p->pp) && add_num(j, "mbs", p->mbs) &&
       add_num(j, "micro_batches", p->micro_batches) && add_num(j, "global_batch", p->global_batch) &&
       cJSON_AddBoolToObject(j, "uniform_tp", p->uniform_tp) && cJSON_AddBoolToObject(j, "uniform_split", p->uniform_split) &&
       cJSON_AddStringToObject(j, "partitioner", ts_p3_partitioner_name(p->partitioner));
  cJSON *stages = cJSON_AddArrayToObject(j, "stages");
  ok = ok && stages;
  for (int s = 0; ok && s < p->pp; s++) {
    const ts_p3_stage *q = &p->stages[s];
    cJSON *o = cJSON_CreateObject();
    ok = o && cJSON_AddItemToArray(stages, o) && cJSON_AddStringToObject(o, "node_type", p->type_name[q->type]) &&
         cJSON_AddStringToObject(o, "gpu", p->gpu_name[q->type]) && cJSON_AddBoolToObject(o, "mixed", q->mixed) &&
         add_num(o, "tp", q->tp) && cJSON_AddItemToObject(o, "gpus", pair(q->first_gpu, q->ngpus)) &&
         cJSON_AddItemToObject(o, "layers", pair(q->first_layer, q->nlayers)) &&
         cJSON_AddBoolToObject(o, "embedding", q->embedding) && cJSON_AddBoolToObject(o, "head", q->head) &&
         add_num(o, "fwd_ms", q->fwd * 1e3) && add_num(o, "bwd_ms", q->bwd * 1e3) && add_num(o, "send_ms", q->send * 1e3) &&
         add_num(o, "allreduce_ms", q->allreduce * 1e3) && add_num(o, "update_ms", q->update * 1e3) &&
         add_num(o, "params", q->params) && add_num(o, "mem_gib", q->mem / GIB) && add_num(o, "mem_limit_gib", q->mem_limit / GIB);
  }
  cJSON *e = cJSON_AddObjectToObject(j, "estimate");
  ok = ok && e && add_num(e, "step_ms", p->step * 1e3) && add_num(e, "pipeline_ms", p->pipeline * 1e3) &&
       add_num(e, "dp_allreduce_ms", p->dp_allreduce * 1e3) && add_num(e, "embed_allreduce_ms", p->embed_allreduce * 1e3) &&
       add_num(e, "update_ms", p->update * 1e3) && add_num(e, "usd_per_hour", p->usd_per_hour) &&
       add_num(e, "usd_per_step", p->usd_per_step);
  if (!ok) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

ts_status ts_p3_plan_to_json(const ts_p3_plan *plan, char **json) {
  if (!plan || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_plan_to_json: NULL argument");
  return ts__json_out(ts__p3_plan_cjson(plan), "plan3d plan", json);
}

static ts_status get_pair(const cJSON *o, const char *what, const char *path, const char *key, int *a, int *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)) ||
      !cJSON_IsNumber(cJSON_GetArrayItem(v, 1)))
    return ts_error(TS_ERR_FORMAT, "%s: %s.%s must be [first, count]", what, path, key);
  double x = cJSON_GetArrayItem(v, 0)->valuedouble, y = cJSON_GetArrayItem(v, 1)->valuedouble;
  if (!(x >= 0 && y >= 1 && x < 1e9 && y < 1e9 && x == floor(x) && y == floor(y)))
    return ts_error(TS_ERR_FORMAT, "%s: %s.%s = [%g, %g]: expected integers first >= 0, count >= 1", what, path, key, x, y);
  *a = (int)x, *b = (int)y;
  return TS_OK;
}

static ts_status ms(const cJSON *o, const char *what, const char *path, const char *key, double *out) {
  double v = 0;
  TS_TRY(ts__p3_num(o, what, path, key, true, 0, &v));
  *out = v / 1e3; /* division: 1e-3 is not a binary fraction, so multiplying drifts in the last bit */
  return TS_OK;
}

static ts_status plan_parse(const cJSON *j, void *obj) {
  void **a = obj;
  ts_p3_plan *p = a[0];
  const char *what = a[1];
  memset(p, 0, sizeof *p);
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "%s: a plan must be a JSON object", what);
  int version = 0;
  TS_TRY(ts__p3_int(j, what, "", "plan3d", true, 1, 1000, &version));
  if (version != PLAN_VERSION)
    return ts_error(TS_ERR_FORMAT, "%s: plan format version %d, this tessera reads %d", what, version, PLAN_VERSION);
  const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "model");
  if (!md) return ts_error(TS_ERR_NOT_FOUND, "%s: 'model' is missing", what);
  TS_TRY(ts__p3_model_parse(md, what, &p->model));
  TS_TRY(ts__p3_str(j, what, "", "cluster", true, p->cluster, sizeof p->cluster));
  const cJSON *types = cJSON_GetObjectItemCaseSensitive(j, "node_types");
  if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) < 1 || cJSON_GetArraySize(types) > TS_P3_MAX_TYPES)
    return ts_error(TS_ERR_FORMAT, "%s: 'node_types' must be an array of 1 to %d {name, gpu, gpus_per_node}", what,
                    TS_P3_MAX_TYPES);
  p->ntypes = cJSON_GetArraySize(types);
  for (int k = 0; k < p->ntypes; k++) {
    char path[32];
    snprintf(path, sizeof path, "node_types[%d]", k);
    const cJSON *t = cJSON_GetArrayItem(types, k);
    if (!cJSON_IsObject(t)) return ts_error(TS_ERR_FORMAT, "%s: %s must be an object", what, path);
    TS_TRY(ts__p3_str(t, what, path, "name", true, p->type_name[k], TS_P3_NAME));
    TS_TRY(ts__p3_str(t, what, path, "gpu", true, p->gpu_name[k], TS_P3_NAME));
    TS_TRY(ts__p3_int(t, what, path, "gpus_per_node", true, 1, 1024, &p->gpus_per_node[k]));
  }
  const cJSON *order = cJSON_GetObjectItemCaseSensitive(j, "node_order");
  if (!cJSON_IsArray(order) || cJSON_GetArraySize(order) < 1 || cJSON_GetArraySize(order) > TS_P3_MAX_NODES)
    return ts_error(TS_ERR_FORMAT, "%s: 'node_order' must be an array of 1 to %d node type names", what, TS_P3_MAX_NODES);
  p->nnodes = cJSON_GetArraySize(order);
  for (int n = 0; n < p->nnodes; n++) {
    const cJSON *v = cJSON_GetArrayItem(order, n);
    int k = -1;
    for (int t = 0; cJSON_IsString(v) && t < p->ntypes; t++)
      if (!strcmp(v->valuestring, p->type_name[t])) k = t;
    if (k < 0) return ts_error(TS_ERR_FORMAT, "%s: node_order[%d] is not one of the node_types' names", what, n);
    p->node_order[n] = k;
    p->node_counts[k]++;
  }
  TS_TRY(ts__p3_int(j, what, "", "dp", true, 1, 1 << 20, &p->dp));
  TS_TRY(ts__p3_int(j, what, "", "pp", true, 1, TS_P3_MAX_STAGES, &p->pp));
  TS_TRY(ts__p3_int(j, what, "", "mbs", true, 1, 1 << 24, &p->mbs));
  TS_TRY(ts__p3_int(j, what, "", "micro_batches", true, 1, 1 << 24, &p->micro_batches));
  TS_TRY(ts__p3_int(j, what, "", "global_batch", true, 1, 1 << 24, &p->global_batch));
  TS_TRY(ts__p3_bool(j, what, "", "uniform_tp", &p->uniform_tp));
  TS_TRY(ts__p3_bool(j, what, "", "uniform_split", &p->uniform_split));
  char part[16] = "greedy";
  TS_TRY(ts__p3_str(j, what, "", "partitioner", false, part, sizeof part));
  if (ts_p3_partitioner_parse(part, &p->partitioner) != TS_OK) {
    ts_error_prefix("%s: 'partitioner': ", what);
    return TS_ERR_FORMAT;
  }
  if ((int64_t)p->dp * p->mbs * p->micro_batches != p->global_batch)
    return ts_error(TS_ERR_FORMAT, "%s: dp %d x mbs %d x micro_batches %d is not the global_batch %d", what, p->dp, p->mbs,
                    p->micro_batches, p->global_batch);
  if (p->global_batch != p->model.global_batch)
    return ts_error(TS_ERR_FORMAT, "%s: global_batch %d differs from the model's %d", what, p->global_batch,
                    p->model.global_batch);
  const cJSON *stages = cJSON_GetObjectItemCaseSensitive(j, "stages");
  if (!cJSON_IsArray(stages) || cJSON_GetArraySize(stages) != p->pp)
    return ts_error(TS_ERR_FORMAT, "%s: 'stages' must be an array of pp = %d stages", what, p->pp);
  int next_gpu = 0, next_layer = 0;
  for (int s = 0; s < p->pp; s++) {
    char path[32];
    snprintf(path, sizeof path, "stages[%d]", s);
    const cJSON *o = cJSON_GetArrayItem(stages, s);
    ts_p3_stage *q = &p->stages[s];
    if (!cJSON_IsObject(o)) return ts_error(TS_ERR_FORMAT, "%s: %s must be an object", what, path);
    char tn[TS_P3_NAME];
    TS_TRY(ts__p3_str(o, what, path, "node_type", true, tn, sizeof tn));
    q->type = -1;
    for (int t = 0; t < p->ntypes; t++)
      if (!strcmp(tn, p->type_name[t])) q->type = t;
    if (q->type < 0) return ts_error(TS_ERR_FORMAT, "%s: %s.node_type '%s' is not in node_types", what, path, tn);
    TS_TRY(ts__p3_bool(o, what, path, "mixed", &q->mixed));
    TS_TRY(ts__p3_int(o, what, path, "tp", true, 1, 1024, &q->tp));
    TS_TRY(get_pair(o, what, path, "gpus", &q->first_gpu, &q->ngpus));
    TS_TRY(get_pair(o, what, path, "layers", &q->first_layer, &q->nlayers));
    TS_TRY(ts__p3_bool(o, what, path, "embedding", &q->embedding));
    TS_TRY(ts__p3_bool(o, what, path, "head", &q->head));
    TS_TRY(ms(o, what, path, "fwd_ms", &q->fwd));
    TS_TRY(ms(o, what, path, "bwd_ms", &q->bwd));
    TS_TRY(ms(o, what, path, "send_ms", &q->send));
    TS_TRY(ms(o, what, path, "allreduce_ms", &q->allreduce));
    TS_TRY(ms(o, what, path, "update_ms", &q->update));
    TS_TRY(ts__p3_num(o, what, path, "params", true, 0, &q->params));
    double g = 0;
    TS_TRY(ts__p3_num(o, what, path, "mem_gib", true, 0, &g));
    q->mem = g * GIB;
    TS_TRY(ts__p3_num(o, what, path, "mem_limit_gib", true, 0, &g));
    q->mem_limit = g * GIB;
    if (q->first_gpu != next_gpu || q->ngpus != p->dp * q->tp)
      return ts_error(TS_ERR_FORMAT, "%s: %s.gpus = [%d, %d]: expected [%d, dp %d x tp %d]", what, path, q->first_gpu,
                      q->ngpus, next_gpu, p->dp, q->tp);
    if (q->first_layer != next_layer)
      return ts_error(TS_ERR_FORMAT, "%s: %s.layers starts at %d, expected %d (stages cover the layers in order)", what,
                      path, q->first_layer, next_layer);
    if (q->embedding != (s == 0) || q->head != (s == p->pp - 1))
      return ts_error(TS_ERR_FORMAT, "%s: %s: the embedding belongs to the first stage and the head to the last", what,
                      path);
    next_gpu += q->ngpus, next_layer += q->nlayers;
  }
  int64_t ngpus = 0;
  for (int n = 0; n < p->nnodes; n++) ngpus += p->gpus_per_node[p->node_order[n]];
  if (next_gpu != ngpus)
    return ts_error(TS_ERR_FORMAT, "%s: the stages use %d GPUs, the node order has %lld", what, next_gpu, (long long)ngpus);
  if (next_layer != p->model.layers)
    return ts_error(TS_ERR_FORMAT, "%s: the stages cover %d layers, the model has %d", what, next_layer, p->model.layers);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "estimate");
  if (!cJSON_IsObject(e)) return ts_error(TS_ERR_FORMAT, "%s: 'estimate' must be an object", what);
  TS_TRY(ms(e, what, "estimate", "step_ms", &p->step));
  TS_TRY(ms(e, what, "estimate", "pipeline_ms", &p->pipeline));
  TS_TRY(ms(e, what, "estimate", "dp_allreduce_ms", &p->dp_allreduce));
  TS_TRY(ms(e, what, "estimate", "embed_allreduce_ms", &p->embed_allreduce));
  TS_TRY(ms(e, what, "estimate", "update_ms", &p->update));
  TS_TRY(ts__p3_num(e, what, "estimate", "usd_per_hour", true, 0, &p->usd_per_hour));
  TS_TRY(ts__p3_num(e, what, "estimate", "usd_per_step", true, 0, &p->usd_per_step));
  return TS_OK;
}

ts_status ts_p3_plan_from_json(const char *json, const char *what, ts_p3_plan *plan) {
  if (!json || !plan) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_plan_from_json: NULL argument");
  if (!what) what = "plan";
  void *a[2] = {plan, (void *)what};
  ts_status s = ts__json_in(json, what, plan_parse, a);
  if (s != TS_OK) memset(plan, 0, sizeof *plan);
  return s;
}
