/* plan3d inputs: the model, cluster and profile documents (docs/FORMATS.md, "plan3d"), every
 * error naming the document, the field path and the value found. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"
#include "plan3d/plan3d_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* "path.key", or "'key'" at the top level */
static const char *fname(const char *path, const char *key, char *buf, size_t cap) {
  if (path && *path) snprintf(buf, cap, "%s.%s", path, key);
  else snprintf(buf, cap, "'%s'", key);
  return buf;
}

static ts_status field_err(ts_status s, const char *what, const char *path, const char *key) {
  char f[128];
  if (s == TS_ERR_NOT_FOUND) return ts_error(s, "%s: %s is missing", what, fname(path, key, f, sizeof f));
  ts_error_prefix("%s: %s: ", what, fname(path, key, f, sizeof f));
  return s;
}

ts_status ts__p3_num(const cJSON *o, const char *what, const char *path, const char *key, bool required, double lo,
                     double *out) {
  if (!required && !cJSON_GetObjectItemCaseSensitive(o, key)) return TS_OK;
  double v;
  ts_status s = ts__json_get_number(o, key, &v);
  if (s != TS_OK) return field_err(s, what, path, key);
  char f[128];
  if (!isfinite(v) || v < lo)
    return ts_error(TS_ERR_FORMAT, "%s: %s must be a number >= %g, found %g", what, fname(path, key, f, sizeof f), lo, v);
  *out = v;
  return TS_OK;
}

ts_status ts__p3_int(const cJSON *o, const char *what, const char *path, const char *key, bool required, int64_t lo,
                     int64_t hi, int *out) {
  if (!required && !cJSON_GetObjectItemCaseSensitive(o, key)) return TS_OK;
  int64_t v;
  ts_status s = ts__json_get_int(o, key, &v);
  if (s != TS_OK) return field_err(s, what, path, key);
  char f[128];
  if (v < lo || v > hi)
    return ts_error(TS_ERR_FORMAT, "%s: %s must be an integer in [%lld, %lld], found %lld", what,
                    fname(path, key, f, sizeof f), (long long)lo, (long long)hi, (long long)v);
  *out = (int)v;
  return TS_OK;
}

ts_status ts__p3_str(const cJSON *o, const char *what, const char *path, const char *key, bool required, char *out,
                     size_t cap) {
  if (!required && !cJSON_GetObjectItemCaseSensitive(o, key)) return TS_OK;
  const char *v;
  ts_status s = ts__json_get_string(o, key, &v);
  if (s != TS_OK) return field_err(s, what, path, key);
  size_t n = strlen(v);
  char f[128];
  if (n == 0 || n >= cap)
    return ts_error(TS_ERR_FORMAT, "%s: %s must be a name of 1 to %zu bytes, found %zu bytes", what,
                    fname(path, key, f, sizeof f), cap - 1, n);
  memcpy(out, v, n + 1);
  return TS_OK;
}

ts_status ts__p3_bool(const cJSON *o, const char *what, const char *path, const char *key, bool *out) {
  if (!cJSON_GetObjectItemCaseSensitive(o, key)) return TS_OK;
  ts_status s = ts__json_get_bool(o, key, out);
  return s == TS_OK ? TS_OK : field_err(s, what, path, key);
}

static ts_status need_object(const cJSON *j, const char *what, const char *path) {
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "%s: %s must be a JSON object", what, *path ? path : "the document");
  return TS_OK;
}

/* ---- model --------------------------------------------------------------------------------- */

void ts_p3_model_derive(ts_p3_model *m) {
  double h = m->hidden, f = m->ffn > 0 ? m->ffn : 4.0 * m->hidden;
  if (m->ffn <= 0) m->ffn = 4 * m->hidden;
  /* GPT-2: token and position embeddings; per layer two LayerNorms (2h each), QKV (3h^2 + 3h),
   * the output projection (h^2 + h), the MLP (h f + f, f h + h); the final LayerNorm. */
  if (m->embed_params <= 0) m->embed_params = (double)m->vocab * h + (double)m->seq * h;
  if (m->layer_params <= 0) m->layer_params = 4.0 * h * h + 2.0 * h * f + 9.0 * h + f;
  if (m->head_params <= 0) m->head_params = 2.0 * h + (m->tied_embedding ? 0.0 : (double)m->vocab * h);
}

ts_status ts__p3_model_parse(const cJSON *j, const char *what, ts_p3_model *m) {
  memset(m, 0, sizeof *m);
  m->bytes_per_param = 16;
  m->activation_bytes = 2;
  m->tied_embedding = true;
  TS_TRY(need_object(j, what, ""));
  TS_TRY(ts__p3_str(j, what, "", "model", true, m->name, sizeof m->name));
  TS_TRY(ts__p3_int(j, what, "", "layers", true, 1, 100000, &m->layers));
  TS_TRY(ts__p3_int(j, what, "", "hidden", true, 1, 1 << 20, &m->hidden));
  TS_TRY(ts__p3_int(j, what, "", "heads", true, 1, 1 << 16, &m->heads));
  TS_TRY(ts__p3_int(j, what, "", "seq", true, 1, 1 << 24, &m->seq));
  TS_TRY(ts__p3_int(j, what, "", "vocab", true, 1, 1 << 26, &m->vocab));
  TS_TRY(ts__p3_int(j, what, "", "ffn", false, 1, 1 << 22, &m->ffn));
  TS_TRY(ts__p3_int(j, what, "", "global_batch", true, 1, 1 << 24, &m->global_batch));
  TS_TRY(ts__p3_num(j, what, "", "bytes_per_param", false, 0, &m->bytes_per_param));
  TS_TRY(ts__p3_int(j, what, "", "activation_bytes", false, 1, 16, &m->activation_bytes));
  TS_TRY(ts__p3_bool(j, what, "", "recompute", &m->recompute));
  TS_TRY(ts__p3_bool(j, what, "", "tied_embedding", &m->tied_embedding));
  TS_TRY(ts__p3_num(j, what, "", "embed_params", false, 0, &m->embed_params));
  TS_TRY(ts__p3_num(j, what, "", "layer_params", false, 0, &m->layer_params));
  TS_TRY(ts__p3_num(j, what, "", "head_params", false, 0, &m->head_params));
  if (m->hidden % m->heads)
    return ts_error(TS_ERR_FORMAT, "%s: 'hidden' (%d) must be a multiple of 'heads' (%d)", what, m->hidden, m->heads);
  ts_p3_model_derive(m);
  return TS_OK;
}

static ts_status model_parse_cb(const cJSON *j, void *obj) {
  void **a = obj;
  return ts__p3_model_parse(j, a[1], a[0]);
}

ts_status ts_p3_model_from_json(const char *json, const char *what, ts_p3_model *m) {
  if (!json || !m) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_model_from_json: NULL argument");
  if (!what) what = "model";
  void *a[2] = {m, (void *)what};
  return ts__json_in(json, what, model_parse_cb, a);
}

cJSON *ts__p3_model_cjson(const ts_p3_model *m) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  bool ok = cJSON_AddStringToObject(j, "model", m->name) && cJSON_AddNumberToObject(j, "layers", m->layers) &&
            cJSON_AddNumberToObject(j, "hidden", m->hidden) && cJSON_AddNumberToObject(j, "heads", m->heads) &&
            cJSON_AddNumberToObject(j, "seq", m->seq) && cJSON_AddNumberToObject(j, "vocab", m->vocab) &&
            cJSON_AddNumberToObject(j, "ffn", m->ffn) && cJSON_AddNumberToObject(j, "global_batch", m->global_batch) &&
            cJSON_AddNumberToObject(j, "bytes_per_param", m->bytes_per_param) &&
            cJSON_AddNumberToObject(j, "activation_bytes", m->activation_bytes) &&
            cJSON_AddBoolToObject(j, "recompute", m->recompute) &&
            cJSON_AddBoolToObject(j, "tied_embedding", m->tied_embedding) &&
            cJSON_AddNumberToObject(j, "embed_params", m->embed_params) &&
            cJSON_AddNumberToObject(j, "layer_params", m->layer_params) &&
            cJSON_AddNumberToObject(j, "head_params", m->head_params);
  if (!ok) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

ts_status ts_p3_model_to_json(const ts_p3_model *m, char **json) {
  if (!m || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_model_to_json: NULL argument");
  return ts__json_out(ts__p3_model_cjson(m), "plan3d model", json);
}

/* ---- cluster ------------------------------------------------------------------------------- */

static ts_status parse_link(const cJSON *nt, const char *what, const char *path, const char *key, ts_p3_link *l) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(nt, key);
  char p[96];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!o) return ts_error(TS_ERR_NOT_FOUND, "%s: %s is missing", what, p);
  TS_TRY(need_object(o, what, p));
  double bw = 0, lat = 0;
  TS_TRY(ts__p3_num(o, what, p, "bandwidth_gbs", true, 0, &bw));
  if (!(bw > 0)) return ts_error(TS_ERR_FORMAT, "%s: %s.bandwidth_gbs must be > 0, found %g", what, p, bw);
  TS_TRY(ts__p3_num(o, what, p, "latency_us", true, 0, &lat));
  l->bandwidth = bw * 1e9;
  l->latency = lat * 1e-6;
  l->ar_bandwidth = l->ar_latency = 0;
  const cJSON *ar = cJSON_GetObjectItemCaseSensitive(o, "allreduce");
  if (ar) { /* optional: the hop as all-reduces measured it */
    char pa[112];
    snprintf(pa, sizeof pa, "%s.allreduce", p);
    TS_TRY(need_object(ar, what, pa));
    double abw = 0, alat = 0;
    TS_TRY(ts__p3_num(ar, what, pa, "bandwidth_gbs", true, 0, &abw));
    if (!(abw > 0)) return ts_error(TS_ERR_FORMAT, "%s: %s.bandwidth_gbs must be > 0, found %g", what, pa, abw);
    TS_TRY(ts__p3_num(ar, what, pa, "latency_us", true, 0, &alat));
    l->ar_bandwidth = abw * 1e9, l->ar_latency = alat * 1e-6;
  }
  return TS_OK;
}

static ts_status cluster_parse(const cJSON *j, void *obj) {
  void **a = obj;
  ts_p3_cluster *c = a[0];
  const char *what = a[1];
  memset(c, 0, sizeof *c);
  TS_TRY(need_object(j, what, ""));
  TS_TRY(ts__p3_str(j, what, "", "cluster", true, c->name, sizeof c->name));
  const cJSON *nts = cJSON_GetObjectItemCaseSensitive(j, "node_types");
  if (!cJSON_IsArray(nts) || cJSON_GetArraySize(nts) < 1)
    return ts_error(TS_ERR_FORMAT, "%s: 'node_types' must be a non-empty array", what);
  int n = cJSON_GetArraySize(nts);
  if (n > TS_P3_MAX_TYPES)
    return ts_error(TS_ERR_FORMAT, "%s: 'node_types' lists %d types, at most %d are supported", what, n, TS_P3_MAX_TYPES);
  int nodes = 0, i = 0;
  const cJSON *nt;
  cJSON_ArrayForEach(nt, nts) {
    char p[48];
    snprintf(p, sizeof p, "node_types[%d]", i);
    ts_p3_node_type *t = &c->types[i];
    TS_TRY(need_object(nt, what, p));
    TS_TRY(ts__p3_str(nt, what, p, "name", true, t->name, sizeof t->name));
    TS_TRY(ts__p3_str(nt, what, p, "gpu", true, t->gpu, sizeof t->gpu));
    TS_TRY(ts__p3_int(nt, what, p, "gpus_per_node", true, 1, 1024, &t->gpus_per_node));
    TS_TRY(ts__p3_int(nt, what, p, "count", true, 0, TS_P3_MAX_NODES, &t->count));
    double gib = 0;
    TS_TRY(ts__p3_num(nt, what, p, "memory_gib", true, 0, &gib));
    if (!(gib > 0)) return ts_error(TS_ERR_FORMAT, "%s: %s.memory_gib must be > 0, found %g", what, p, gib);
    t->memory = gib * GIB;
    TS_TRY(parse_link(nt, what, p, "intra_node", &t->intra));
    TS_TRY(parse_link(nt, what, p, "inter_node", &t->inter));
    TS_TRY(ts__p3_num(nt, what, p, "price_per_hour", false, 0, &t->price_per_hour));
    for (int k = 0; k < i; k++)
      if (!strcmp(c->types[k].name, t->name))
        return ts_error(TS_ERR_FORMAT, "%s: %s.name '%s' repeats node_types[%d]", what, p, t->name, k);
    nodes += t->count;
    i++;
  }
  c->ntypes = n;
  if (nodes < 1) return ts_error(TS_ERR_FORMAT, "%s: the node types' counts add up to no node", what);
  if (nodes > TS_P3_MAX_NODES)
    return ts_error(TS_ERR_FORMAT, "%s: %d nodes, at most %d are supported", what, nodes, TS_P3_MAX_NODES);
  return TS_OK;
}

int ts__p3_full_order(const ts_p3_cluster *c, int order[TS_P3_MAX_NODES]) {
  int n = 0;
  for (int k = 0; k < c->ntypes; k++)
    for (int i = 0; i < c->types[k].count && n < TS_P3_MAX_NODES; i++) order[n++] = k;
  return n;
}

ts_status ts_p3_cluster_from_json(const char *json, const char *what, ts_p3_cluster *c) {
  if (!json || !c) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_cluster_from_json: NULL argument");
  if (!what) what = "cluster";
  void *a[2] = {c, (void *)what};
  return ts__json_in(json, what, cluster_parse, a);
}

/* ---- profile ------------------------------------------------------------------------------- */

ts_status ts_p3_profile_create(ts_p3_profile **p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_profile_create: NULL argument");
  *p = calloc(1, sizeof **p);
  return *p ? TS_OK : ts_error(TS_ERR_OOM, "out of memory for a plan3d profile");
}

void ts_p3_profile_destroy(ts_p3_profile *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) free(p->e[i].layers);
  free(p->e);
  free(p);
}

static bool cost_ok(ts_p3_cost c) { return isfinite(c.fwd) && isfinite(c.bwd) && c.fwd >= 0 && c.bwd >= 0; }

ts_status ts_p3_profile_add(ts_p3_profile *p, const char *gpu, int tp, int mbs, ts_p3_cost embed, ts_p3_cost layer,
                            ts_p3_cost head, const ts_p3_cost *layers, int nlayers, double update_per_param) {
  if (!p || !gpu) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_profile_add: NULL argument");
  if (!*gpu || strlen(gpu) >= TS_P3_NAME) return ts_error(TS_ERR_INVALID_ARG, "profile: bad gpu name '%s'", gpu);
  if (tp < 1 || mbs < 1) return ts_error(TS_ERR_INVALID_ARG, "profile: gpu '%s': tp %d, mbs %d must be >= 1", gpu, tp, mbs);
  if (!cost_ok(embed) || !cost_ok(layer) || !cost_ok(head) || !(update_per_param >= 0 && isfinite(update_per_param)))
    return ts_error(TS_ERR_INVALID_ARG, "profile: gpu '%s' tp %d mbs %d: times must be finite and >= 0", gpu, tp, mbs);
  if (layers && nlayers < 1) return ts_error(TS_ERR_INVALID_ARG, "profile: per-layer list of %d layers", nlayers);
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->e[i].gpu, gpu) && p->e[i].tp == tp && p->e[i].mbs == mbs)
      return ts_error(TS_ERR_INVALID_ARG, "profile: gpu '%s' tp %d mbs %d is listed twice", gpu, tp, mbs);
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 8;
    p3_entry *e = realloc(p->e, (size_t)cap * sizeof *e);
    if (!e) return ts_error(TS_ERR_OOM, "out of memory for profile entries");
    p->e = e, p->cap = cap;
  }
  p3_entry *e = &p->e[p->n];
  memset(e, 0, sizeof *e);
  snprintf(e->gpu, sizeof e->gpu, "%s", gpu);
  e->tp = tp, e->mbs = mbs, e->embed = embed, e->layer = layer, e->head = head;
  e->update_per_param = update_per_param;
  if (layers) {
    for (int l = 0; l < nlayers; l++)
      if (!cost_ok(layers[l])) return ts_error(TS_ERR_INVALID_ARG, "profile: gpu '%s': layer %d time is bad", gpu, l);
    e->layers = malloc((size_t)nlayers * sizeof *e->layers);
    if (!e->layers) return ts_error(TS_ERR_OOM, "out of memory for per-layer costs");
    memcpy(e->layers, layers, (size_t)nlayers * sizeof *layers);
    e->nlayers = nlayers;
  }
  p->n++;
  return TS_OK;
}

static ts_status parse_cost(const cJSON *o, const char *what, const char *path, const char *key, bool required,
                            ts_p3_cost *c) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  char p[96];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!v) {
    if (required) return ts_error(TS_ERR_NOT_FOUND, "%s: %s is missing", what, p);
    return TS_OK;
  }
  TS_TRY(need_object(v, what, p));
  double f = 0, b = 0;
  TS_TRY(ts__p3_num(v, what, p, "fwd_ms", true, 0, &f));
  TS_TRY(ts__p3_num(v, what, p, "bwd_ms", true, 0, &b));
  c->fwd = f * 1e-3, c->bwd = b * 1e-3;
  return TS_OK;
}

static ts_status profile_parse(const cJSON *j, void *obj) {
  void **a = obj;
  ts_p3_profile *p = a[0];
  const char *what = a[1];
  TS_TRY(need_object(j, what, ""));
  const cJSON *es = cJSON_GetObjectItemCaseSensitive(j, "entries");
  if (!cJSON_IsArray(es) || cJSON_GetArraySize(es) < 1)
    return ts_error(TS_ERR_FORMAT, "%s: 'entries' must be a non-empty array", what);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, es) {
    char path[48];
    snprintf(path, sizeof path, "entries[%d]", i++);
    TS_TRY(need_object(e, what, path));
    char gpu[TS_P3_NAME];
    int tp = 0, mbs = 0;
    TS_TRY(ts__p3_str(e, what, path, "gpu", true, gpu, sizeof gpu));
    TS_TRY(ts__p3_int(e, what, path, "tp", true, 1, 1024, &tp));
    TS_TRY(ts__p3_int(e, what, path, "mbs", true, 1, 1 << 20, &mbs));
    ts_p3_cost embed = {0, 0}, layer = {0, 0}, head = {0, 0};
    TS_TRY(parse_cost(e, what, path, "embed", false, &embed));
    TS_TRY(parse_cost(e, what, path, "head", false, &head));
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(e, "layers");
    TS_TRY(parse_cost(e, what, path, "layer", ls == NULL, &layer));
    double upd = 0;
    TS_TRY(ts__p3_num(e, what, path, "update_ms_per_mparam", false, 0, &upd));
    ts_p3_cost *per = NULL;
    int nl = 0;
    if (ls) {
      if (!cJSON_IsArray(ls) || cJSON_GetArraySize(ls) < 1)
        return ts_error(TS_ERR_FORMAT, "%s: %s.layers must be a non-empty array of {fwd_ms, bwd_ms}", what, path);
      nl = cJSON_GetArraySize(ls);
      per = calloc((size_t)nl, sizeof *per);
      if (!per) return ts_error(TS_ERR_OOM, "out of memory for %d layer costs", nl);
      for (int l = 0; l < nl; l++) {
        char lp[64];
        snprintf(lp, sizeof lp, "layers[%d]", l);
        const cJSON *lo = cJSON_GetArrayItem(ls, l);
        ts_status s = TS_OK;
        if (!cJSON_IsObject(lo)) s = ts_error(TS_ERR_FORMAT, "%s: %s.%s must be an object {fwd_ms, bwd_ms}", what, path, lp);
        double f = 0, b = 0;
        char pp2[112];
        snprintf(pp2, sizeof pp2, "%s.%s", path, lp);
        if (s == TS_OK) s = ts__p3_num(lo, what, pp2, "fwd_ms", true, 0, &f);
        if (s == TS_OK) s = ts__p3_num(lo, what, pp2, "bwd_ms", true, 0, &b);
        if (s != TS_OK) {
          free(per);
          return s;
        }
        per[l].fwd = f * 1e-3, per[l].bwd = b * 1e-3;
      }
      if (!cJSON_GetObjectItemCaseSensitive(e, "layer")) layer = per[0];
    }
    ts_status s = ts_p3_profile_add(p, gpu, tp, mbs, embed, layer, head, per, nl, upd * 1e-3 / 1e6);
    free(per);
    if (s != TS_OK) {
      ts_error_prefix("%s: %s: ", what, path);
      return s;
    }
  }
  return TS_OK;
}

ts_status ts_p3_profile_from_json(const char *json, const char *what, ts_p3_profile **out) {
  if (!json || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_profile_from_json: NULL argument");
  if (!what) what = "profile";
  *out = NULL;
  ts_p3_profile *p;
  TS_TRY(ts_p3_profile_create(&p));
  void *a[2] = {p, (void *)what};
  ts_status s = ts__json_in(json, what, profile_parse, a);
  if (s != TS_OK) {
    ts_p3_profile_destroy(p);
    return s;
  }
  *out = p;
  return TS_OK;
}

ts_status ts_p3_profile_tps(const ts_p3_profile *p, const char *gpu, int *tps, int cap, int *n) {
  if (!p || !gpu || !n || (cap > 0 && !tps)) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_profile_tps: NULL argument");
  int k = 0;
  for (int i = 0; i < p->n; i++) {
    if (strcmp(p->e[i].gpu, gpu)) continue;
    bool seen = false;
    for (int j = 0; j < k && j < cap; j++) seen |= tps[j] == p->e[i].tp;
    if (seen) continue;
    if (k < cap) {
      int j = k;
      while (j > 0 && tps[j - 1] > p->e[i].tp) tps[j] = tps[j - 1], j--;
      tps[j] = p->e[i].tp;
    }
    k++;
  }
  *n = k < cap ? k : cap;
  return TS_OK;
}

const p3_entry *ts__p3_lookup(const ts_p3_profile *p, const char *gpu, int tp, int mbs, double *scale) {
  const p3_entry *best = NULL;
  for (int i = 0; i < p->n; i++) {
    const p3_entry *e = &p->e[i];
    if (e->tp != tp || strcmp(e->gpu, gpu)) continue;
    /* nearest mbs; on a tie the larger (its per-sample time is the better-amortized measurement) */
    if (!best || abs(e->mbs - mbs) < abs(best->mbs - mbs) || (abs(e->mbs - mbs) == abs(best->mbs - mbs) && e->mbs > best->mbs))
      best = e;
  }
  if (best && scale) *scale = (double)mbs / best->mbs;
  return best;
}

ts_p3_cost ts__p3_layer_cost(const p3_entry *e, int l) {
  if (e->layers && l < e->nlayers) return e->layers[l];
  return e->layer;
}

double ts__p3_stage_memory(const ts_p3_model *m, int nlayers, bool embedding, bool head, int pp, int tp, int mbs,
                           int inflight, double *params_out) {
  double h = m->hidden, s = m->seq, b = mbs, a = m->heads, f = m->ffn, t = tp;
  double params = nlayers * m->layer_params;
  if (embedding) params += m->embed_params;
  if (head) params += m->head_params + (m->tied_embedding && pp > 1 ? (double)m->vocab * h : 0);
  params /= t;
  /* Activations kept per layer and micro-batch (Korthikanti et al. 2022, tensor parallel without
   * sequence parallelism, 2-byte elements): s b (10 h + 8 h / t + 4 f / t) + 5 a s^2 b / t, the
   * MLP's 16 h / t of the paper written 4 f / t for a width-f MLP; scaled to activation_bytes.
   * With recomputation a layer keeps its input (2 s b h) and one layer is live in full. */
  double per_layer = (s * b * (10 * h + 8 * h / t + 4 * f / t) + 5 * a * s * s * b / t) * m->activation_bytes / 2.0;
  double kept = m->recompute ? 2.0 * s * b * h * m->activation_bytes / 2.0 : per_layer;
  double act = nlayers * kept * inflight + (m->recompute && nlayers ? per_layer : 0);
  /* the head's logits in fp32 for the loss (one micro-batch at a time) */
  if (head) act += s * b * (double)m->vocab * 4.0 / t;
  if (params_out) *params_out = params;
  return params * m->bytes_per_param + act;
}
