/* Thresholds and routers (tessera/llm_sparse.h): the objects, the model key they are made for, and
 * their JSON files ("llm-thresholds" and "llm-router", version 1; docs/FORMATS.md). A file is
 * checked whole before anything is returned: every layer once, every threshold finite and >= 0,
 * the model key and layer count of the model it is loaded for; errors name the field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"
#include "llm/llm_internal.h"
#include "llm/llm_sparse_internal.h"

#define TH_KIND "llm-thresholds"
#define RT_KIND "llm-router"
#define VERSION 1

const char *ts_llm_proj_name(ts_llm_proj p) {
  static const char *const n[TS_LLM_NPROJ] = {"q", "k", "v", "o", "gate", "up", "down"};
  return (unsigned)p < TS_LLM_NPROJ ? n[p] : "?";
}

const char *ts_llm_sparse_method_name(ts_llm_sparse_method m) {
  static const char *const n[] = {"none", "cats", "teal", "sats"};
  return (unsigned)m <= TS_LLM_SPARSE_SATS ? n[m] : "?";
}

static int method_of(const char *s) {
  for (int m = 0; m <= TS_LLM_SPARSE_SATS; m++)
    if (strcmp(s, ts_llm_sparse_method_name((ts_llm_sparse_method)m)) == 0) return m;
  return -1;
}

void ts_llm_model_key(const ts_llm_model *m, char out[17]) {
  ts_hash h;
  ts_hash_init(&h, "llm-model-v1");
  const ts_llm_config *c = &m->cfg;
  ts_hash_str(&h, c->arch);
  ts_hash_i64(&h, c->n_layer), ts_hash_i64(&h, c->d_model), ts_hash_i64(&h, c->n_ff);
  ts_hash_i64(&h, c->n_head), ts_hash_i64(&h, c->n_head_kv), ts_hash_i64(&h, c->head_dim);
  ts_hash_i64(&h, c->n_vocab);
  for (int l = 0; l < c->n_layer; l++)
    for (int p = 0; p < TS_LLM_NPROJ; p++) {
      const ts__wmat *w = ts__proj_mat(m, l, p);
      ts_hash_i64(&h, w->type), ts_hash_i64(&h, w->rows), ts_hash_i64(&h, w->cols);
      /* a few weight bytes: two quantizations of one architecture differ */
      ts_hash_bytes(&h, w->data, w->row_bytes < 64 ? w->row_bytes : 64);
    }
  ts_hash_i64(&h, (int64_t)m->weight_bytes);
  ts_hash_hex(&h, out);
}

/* ---- thresholds ------------------------------------------------------------------------------ */

ts_status ts_llm_thresholds_create(ts_llm_thresholds **out, const ts_llm_model *m) {
  if (!out || !m) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_thresholds_create: NULL argument");
  *out = NULL;
  const int n = m->cfg.n_layer;
  ts_llm_thresholds *t = ts_calloc(1, sizeof *t);
  if (t) {
    t->layer = ts_calloc((size_t)n, sizeof *t->layer);
    t->sparsity = ts_calloc((size_t)n, sizeof(double));
    t->proxy = ts_calloc((size_t)n, sizeof(double));
  }
  if (!t || !t->layer || !t->sparsity || !t->proxy) {
    ts_llm_thresholds_destroy(t);
    return ts_error(TS_ERR_OOM, "ts_llm_thresholds_create: out of memory");
  }
  t->n_layer = n;
  ts_llm_model_key(m, t->info.model_key);
  snprintf(t->info.model_name, sizeof t->info.model_name, "%s", m->cfg.name);
  *out = t;
  return TS_OK;
}

void ts_llm_thresholds_destroy(ts_llm_thresholds *t) {
  if (!t) return;
  ts_free(t->layer);
  ts_free(t->sparsity);
  ts_free(t->proxy);
  ts_free(t);
}

int ts_llm_thresholds_n_layer(const ts_llm_thresholds *t) { return t->n_layer; }
ts_llm_layer_thresholds *ts_llm_thresholds_layer(ts_llm_thresholds *t, int l) {
  return l >= 0 && l < t->n_layer ? &t->layer[l] : NULL;
}
const ts_llm_layer_thresholds *ts_llm_thresholds_layer_const(const ts_llm_thresholds *t, int l) {
  return l >= 0 && l < t->n_layer ? &t->layer[l] : NULL;
}
ts_llm_thresholds_info *ts_llm_thresholds_info_of(ts_llm_thresholds *t) { return &t->info; }
const ts_llm_thresholds_info *ts_llm_thresholds_info_const(const ts_llm_thresholds *t) { return &t->info; }
double *ts_llm_thresholds_layer_sparsity(ts_llm_thresholds *t) { return t->sparsity; }
double *ts_llm_thresholds_layer_proxy(ts_llm_thresholds *t) { return t->proxy; }

static cJSON *thresholds_cjson(const ts_llm_thresholds *t) {
  const ts_llm_thresholds_info *i = &t->info;
  cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray();
  if (!j || !layers) {
    cJSON_Delete(j);
    cJSON_Delete(layers);
    return NULL;
  }
  cJSON_AddStringToObject(j, "kind", TH_KIND);
  cJSON_AddNumberToObject(j, "version", VERSION);
  cJSON_AddStringToObject(j, "method", ts_llm_sparse_method_name(i->method));
  cJSON_AddNumberToObject(j, "target", i->target);
  cJSON_AddNumberToObject(j, "calibrated", i->calibrated);
  cJSON_AddNumberToObject(j, "tokens", (double)i->tokens);
  cJSON_AddStringToObject(j, "text", i->text);
  cJSON_AddStringToObject(j, "model_key", i->model_key);
  cJSON_AddStringToObject(j, "model_name", i->model_name);
  cJSON_AddNumberToObject(j, "n_layer", t->n_layer);
  cJSON_AddItemToObject(j, "provenance", ts__provenance_json(&i->prov));
  for (int l = 0; l < t->n_layer; l++) {
    cJSON *o = cJSON_CreateObject();
    if (!o) break;
    cJSON_AddNumberToObject(o, "layer", l);
    cJSON_AddNumberToObject(o, "act", t->layer[l].act);
    for (int p = 0; p < TS_LLM_NPROJ; p++) cJSON_AddNumberToObject(o, ts_llm_proj_name((ts_llm_proj)p), t->layer[l].in[p]);
    cJSON_AddNumberToObject(o, "sparsity", t->sparsity[l]);
    cJSON_AddNumberToObject(o, "proxy", t->proxy[l]);
    cJSON_AddItemToArray(layers, o);
  }
  cJSON_AddItemToObject(j, "layers", layers);
  return j;
}

ts_status ts_llm_thresholds_to_json(const ts_llm_thresholds *t, char **json) {
  if (!t || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_thresholds_to_json: NULL argument");
  return ts__json_out(thresholds_cjson(t), "thresholds", json);
}

static ts_status threshold_field(const cJSON *o, const char *key, const char *what, int l, float *out) {
  double v;
  ts_status st = ts__json_get_number(o, key, &v);
  if (st != TS_OK) {
    char why[256]; /* the detail is rewritten by ts_error: copied first */
    snprintf(why, sizeof why, "%s", ts_last_error());
    return ts_error(st, "%s: layer %d: %s", what, l, why);
  }
  if (!isfinite(v) || v < 0 || v > 3.4e38)
    return ts_error(TS_ERR_FORMAT, "%s: layer %d: threshold '%s' = %g is not a finite value >= 0", what, l, key, v);
  *out = (float)v;
  return TS_OK;
}

/* Checks the kind, version and model of a file's object (what: the file's name in messages). */
static ts_status check_head(const cJSON *j, const char *kind, const char *what, const ts_llm_model *m, int64_t *n_layer,
                            const char **key) {
  const char *k;
  int64_t v;
  if (ts__json_get_string(j, "kind", &k) != TS_OK || strcmp(k, kind) != 0)
    return ts_error(TS_ERR_FORMAT, "%s: not a %s file (field 'kind')", what, kind);
  if (ts__json_get_int(j, "version", &v) != TS_OK || v != VERSION)
    return ts_error(TS_ERR_FORMAT, "%s: %s version %lld, this build reads version %d", what, kind, (long long)v, VERSION);
  if (ts__json_get_int(j, "n_layer", n_layer) != TS_OK || *n_layer < 1 || *n_layer > 100000)
    return ts_error(TS_ERR_FORMAT, "%s: field 'n_layer' missing or out of range", what);
  if (ts__json_get_string(j, "model_key", key) != TS_OK || strlen(*key) != 16)
    return ts_error(TS_ERR_FORMAT, "%s: field 'model_key' missing or not 16 hex digits", what);
  if (m) {
    char mk[17];
    ts_llm_model_key(m, mk);
    if (strcmp(mk, *key) != 0 || *n_layer != m->cfg.n_layer)
      return ts_error(TS_ERR_INVALID_ARG, "%s: made for another model (key %s, %lld layers), not %s (key %s, %d layers)", what,
                      *key, (long long)*n_layer, m->cfg.name[0] ? m->cfg.name : "this model", mk, m->cfg.n_layer);
  }
  return TS_OK;
}

static ts_status thresholds_parse(const cJSON *j, const char *what, const ts_llm_model *m, ts_llm_thresholds **out) {
  int64_t nl;
  const char *key, *meth = "none", *s;
  TS_TRY(check_head(j, TH_KIND, what, m, &nl, &key));
  if (ts__json_get_string(j, "method", &meth) != TS_OK || method_of(meth) < 0)
    return ts_error(TS_ERR_FORMAT, "%s: field 'method' missing or not one of none, cats, teal, sats", what);
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
  if (!cJSON_IsArray(layers)) return ts_error(TS_ERR_FORMAT, "%s: field 'layers' missing or not an array", what);
  ts_llm_thresholds *t = ts_calloc(1, sizeof *t);
  if (t) {
    t->n_layer = (int)nl;
    t->layer = ts_calloc((size_t)nl, sizeof *t->layer);
    t->sparsity = ts_calloc((size_t)nl, sizeof(double));
    t->proxy = ts_calloc((size_t)nl, sizeof(double));
  }
  char *seen = ts_calloc((size_t)nl, 1);
  ts_status st = t && t->layer && t->sparsity && t->proxy && seen ? TS_OK : ts_error(TS_ERR_OOM, "%s: out of memory", what);
  const cJSON *o;
  cJSON_ArrayForEach(o, layers) {
    if (st != TS_OK) break;
    int64_t l;
    if (ts__json_get_int(o, "layer", &l) != TS_OK || l < 0 || l >= nl) {
      st = ts_error(TS_ERR_FORMAT, "%s: a layer entry without a 'layer' index in 0..%lld", what, (long long)nl - 1);
      break;
    }
    if (seen[l]++) {
      st = ts_error(TS_ERR_FORMAT, "%s: layer %lld appears twice", what, (long long)l);
      break;
    }
    ts_llm_layer_thresholds *lt = &t->layer[l];
    st = threshold_field(o, "act", what, (int)l, &lt->act);
    for (int p = 0; p < TS_LLM_NPROJ && st == TS_OK; p++) st = threshold_field(o, ts_llm_proj_name((ts_llm_proj)p), what, (int)l, &lt->in[p]);
    /* informational figures: a value that is not finite (JSON cannot write it back) is refused */
    double v;
    if (st == TS_OK && ts__json_get_number(o, "sparsity", &v) == TS_OK) {
      if (!isfinite(v)) st = ts_error(TS_ERR_FORMAT, "%s: layer %lld: sparsity is not finite", what, (long long)l);
      t->sparsity[l] = v;
    }
    if (st == TS_OK && ts__json_get_number(o, "proxy", &v) == TS_OK) {
      if (!isfinite(v)) st = ts_error(TS_ERR_FORMAT, "%s: layer %lld: proxy is not finite", what, (long long)l);
      t->proxy[l] = v;
    }
  }
  for (int64_t l = 0; st == TS_OK && l < nl; l++)
    if (!seen[l]) st = ts_error(TS_ERR_FORMAT, "%s: layer %lld is missing", what, (long long)l);
  ts_free(seen);
  if (st == TS_OK) {
    ts_llm_thresholds_info *i = &t->info;
    i->method = (ts_llm_sparse_method)method_of(meth);
    snprintf(i->model_key, sizeof i->model_key, "%s", key);
    if (ts__json_get_string(j, "model_name", &s) == TS_OK) snprintf(i->model_name, sizeof i->model_name, "%s", s);
    if (ts__json_get_string(j, "text", &s) == TS_OK) snprintf(i->text, sizeof i->text, "%s", s);
    double v;
    if (ts__json_get_number(j, "target", &v) == TS_OK) i->target = v;
    if (ts__json_get_number(j, "calibrated", &v) == TS_OK) i->calibrated = v;
    if (ts__json_get_number(j, "tokens", &v) == TS_OK) i->tokens = (int64_t)v;
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(j, "provenance");
    if (pv) st = ts__provenance_parse(pv, what, &i->prov);
  }
  if (st != TS_OK) {
    ts_llm_thresholds_destroy(t);
    return st;
  }
  *out = t;
  return TS_OK;
}

ts_status ts_llm_thresholds_from_json(ts_llm_thresholds **out, const char *json, const ts_llm_model *m) {
  if (!out || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_thresholds_from_json: NULL argument");
  *out = NULL;
  cJSON *j;
  TS_TRY(ts__json_from_string(json, "thresholds", &j));
  ts_status st = thresholds_parse(j, "thresholds", m, out);
  cJSON_Delete(j);
  return st;
}

ts_status ts_llm_thresholds_save(const ts_llm_thresholds *t, const char *path) {
  if (!t || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_thresholds_save: NULL argument");
  cJSON *j = thresholds_cjson(t);
  if (!j) return ts_error(TS_ERR_OOM, "ts_llm_thresholds_save: out of memory");
  ts_status st = ts__json_write_file(path, j);
  cJSON_Delete(j);
  return st;
}

ts_status ts_llm_thresholds_load(ts_llm_thresholds **out, const char *path, const ts_llm_model *m) {
  if (!out || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_thresholds_load: NULL argument");
  *out = NULL;
  cJSON *j;
  TS_TRY(ts__json_read_file(path, &j));
  ts_status st = thresholds_parse(j, path, m, out);
  cJSON_Delete(j);
  return st;
}

/* ---- router ---------------------------------------------------------------------------------- */

ts_status ts_llm_router_create(ts_llm_router **out, const ts_llm_model *m) {
  if (!out || !m) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_create: NULL argument");
  *out = NULL;
  ts_llm_router *r = ts_calloc(1, sizeof *r);
  if (r) r->w = ts_calloc((size_t)m->cfg.n_layer * TS_LLM_ROUTER_NF, sizeof(double));
  if (!r || !r->w) {
    ts_llm_router_destroy(r);
    return ts_error(TS_ERR_OOM, "ts_llm_router_create: out of memory");
  }
  r->n_layer = m->cfg.n_layer;
  r->tau = INFINITY;
  ts_llm_model_key(m, r->model_key);
  *out = r;
  return TS_OK;
}

void ts_llm_router_destroy(ts_llm_router *r) {
  if (!r) return;
  ts_free(r->w);
  ts_free(r);
}

int ts__router_n_layer(const ts_llm_router *r) { return r->n_layer; }
const double *ts__router_weights_const(const ts_llm_router *r, int l) { return r->w + (size_t)l * TS_LLM_ROUTER_NF; }
double *ts_llm_router_weights(ts_llm_router *r, int l) {
  return l >= 0 && l < r->n_layer ? r->w + (size_t)l * TS_LLM_ROUTER_NF : NULL;
}
double ts_llm_router_tau(const ts_llm_router *r) { return r->tau; }
void ts_llm_router_set_tau(ts_llm_router *r, double tau) { r->tau = tau; }

static cJSON *router_cjson(const ts_llm_router *r) {
  cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray();
  if (!j || !layers) {
    cJSON_Delete(j);
    cJSON_Delete(layers);
    return NULL;
  }
  cJSON_AddStringToObject(j, "kind", RT_KIND);
  cJSON_AddNumberToObject(j, "version", VERSION);
  cJSON_AddStringToObject(j, "model_key", r->model_key);
  cJSON_AddNumberToObject(j, "n_layer", r->n_layer);
  if (isfinite(r->tau)) cJSON_AddNumberToObject(j, "tau", r->tau);
  else cJSON_AddStringToObject(j, "tau", "inf");
  for (int l = 0; l < r->n_layer; l++) {
    cJSON *a = cJSON_CreateDoubleArray(r->w + (size_t)l * TS_LLM_ROUTER_NF, TS_LLM_ROUTER_NF);
    if (a) cJSON_AddItemToArray(layers, a);
  }
  cJSON_AddItemToObject(j, "weights", layers);
  return j;
}

ts_status ts_llm_router_to_json(const ts_llm_router *r, char **json) {
  if (!r || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_to_json: NULL argument");
  return ts__json_out(router_cjson(r), "router", json);
}

static ts_status router_parse(const cJSON *j, const char *what, const ts_llm_model *m, ts_llm_router **out) {
  int64_t nl;
  const char *key;
  TS_TRY(check_head(j, RT_KIND, what, m, &nl, &key));
  double tau = INFINITY;
  const cJSON *tj = cJSON_GetObjectItemCaseSensitive(j, "tau");
  if (cJSON_IsNumber(tj) && isfinite(tj->valuedouble)) tau = tj->valuedouble;
  else if (!(cJSON_IsString(tj) && strcmp(tj->valuestring, "inf") == 0))
    return ts_error(TS_ERR_FORMAT, "%s: field 'tau' missing or not a finite number or \"inf\"", what);
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(j, "weights");
  if (!cJSON_IsArray(ws) || cJSON_GetArraySize(ws) != nl)
    return ts_error(TS_ERR_FORMAT, "%s: field 'weights' is not an array of %lld layers", what, (long long)nl);
  ts_llm_router *r = ts_calloc(1, sizeof *r);
  if (r) r->w = ts_calloc((size_t)nl * TS_LLM_ROUTER_NF, sizeof(double));
  if (!r || !r->w) {
    ts_llm_router_destroy(r);
    return ts_error(TS_ERR_OOM, "%s: out of memory", what);
  }
  r->n_layer = (int)nl;
  r->tau = tau;
  snprintf(r->model_key, sizeof r->model_key, "%s", key);
  int l = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, ws) {
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != TS_LLM_ROUTER_NF) {
      ts_llm_router_destroy(r);
      return ts_error(TS_ERR_FORMAT, "%s: weights of layer %d: not an array of %d numbers", what, l, TS_LLM_ROUTER_NF);
    }
    int k = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
      if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        ts_llm_router_destroy(r);
        return ts_error(TS_ERR_FORMAT, "%s: weights of layer %d: entry %d is not a finite number", what, l, k);
      }
      r->w[(size_t)l * TS_LLM_ROUTER_NF + k++] = v->valuedouble;
    }
    l++;
  }
  *out = r;
  return TS_OK;
}

ts_status ts_llm_router_from_json(ts_llm_router **out, const char *json, const ts_llm_model *m) {
  if (!out || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_from_json: NULL argument");
  *out = NULL;
  cJSON *j;
  TS_TRY(ts__json_from_string(json, "router", &j));
  ts_status st = router_parse(j, "router", m, out);
  cJSON_Delete(j);
  return st;
}

ts_status ts_llm_router_save(const ts_llm_router *r, const char *path) {
  if (!r || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_save: NULL argument");
  cJSON *j = router_cjson(r);
  if (!j) return ts_error(TS_ERR_OOM, "ts_llm_router_save: out of memory");
  ts_status st = ts__json_write_file(path, j);
  cJSON_Delete(j);
  return st;
}

ts_status ts_llm_router_load(ts_llm_router **out, const char *path, const ts_llm_model *m) {
  if (!out || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_load: NULL argument");
  *out = NULL;
  cJSON *j;
  TS_TRY(ts__json_read_file(path, &j));
  ts_status st = router_parse(j, path, m, out);
  cJSON_Delete(j);
  return st;
}
