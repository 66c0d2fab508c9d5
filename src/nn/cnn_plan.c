/* The conv plan (cnn.h): the algorithm each convolution of a graph gets, chosen as ts_cnn_net_create
 * chooses (ts__cnn_net_choose) and kept in the artifact store, kind "conv-plan", through the
 * store's get(): a stored plan for this key whose layers are the graph's and whose profile stamp
 * is today's is used; a stale one (another stamp, opts.replan) is made again silently; a corrupt or
 * foreign one is moved aside and made again.
 *
 * Payload (docs/FORMATS.md, "Convolution plans"; also ts_cnn_conv_plan_to_json):
 *   {"format": "tessera-conv-plan", "model", "batch", "threads", "key", "profile_stamp",
 *    "layers": [{"name", "node", "desc": {"n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w",
 *                "pad_top", "pad_bottom", "pad_left", "pad_right", "dilation_h", "dilation_w",
 *                "groups", "relu"}, "bn_folded", "algo", "why"}]}
 * profile_stamp hashes the conv profile's entries for the layers when the choice was made. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"
#include "nn/cnn_internal.h"

#define FORMAT_NAME "tessera-conv-plan"
enum { WHY_CAP = 256, PATH_CAP = 4400 };
static const ts__artifact_kind KIND = {"conv-plan", TS_CNN_CONV_PLAN_VERSION};

typedef struct plan_layer {
  char name[TS_CNN_NAME_MAX];
  int node;
  ts_conv_desc desc;
  ts_conv_algo algo;
  bool bn_folded;
  char why[WHY_CAP];
} plan_layer;

struct ts_cnn_conv_plan {
  char model[TS_CNN_NAME_MAX];
  int batch, threads;
  char key[17], stamp[17];
  char path[PATH_CAP];
  bool cached;
  int n;
  plan_layer *layers;
};

void ts_cnn_conv_plan_destroy(ts_cnn_conv_plan *p) {
  if (!p) return;
  free(p->layers);
  free(p);
}

int ts_cnn_conv_plan_count(const ts_cnn_conv_plan *p) { return p ? p->n : 0; }
bool ts_cnn_conv_plan_cached(const ts_cnn_conv_plan *p) { return p && p->cached; }
const char *ts_cnn_conv_plan_path(const ts_cnn_conv_plan *p) { return p ? p->path : ""; }
const char *ts_cnn_conv_plan_key(const ts_cnn_conv_plan *p) { return p ? p->key : ""; }

ts_status ts_cnn_conv_plan_layer(const ts_cnn_conv_plan *p, int i, ts_cnn_conv_info *out) {
  if (!p || !out || i < 0 || i >= p->n)
    return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_conv_plan_layer: index %d out of range (%d layers)", i, p ? p->n : 0);
  const plan_layer *l = &p->layers[i];
  memset(out, 0, sizeof *out);
  out->name = l->name, out->node = l->node, out->desc = l->desc, out->algo = l->algo, out->why = l->why;
  out->bn_folded = l->bn_folded, out->flops = ts_conv_flops(&l->desc);
  return TS_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------- */

#define F(x) {#x, offsetof(ts_conv_desc, x)}
static const struct {
  const char *name;
  size_t off;
} DESC_INTS[] = {F(n),        F(c),          F(h),        F(w),         F(k),          F(r),
                 F(s),        F(stride_h),   F(stride_w), F(pad_top),   F(pad_bottom), F(pad_left),
                 F(pad_right), F(dilation_h), F(dilation_w), F(groups)};
#undef F
enum { NDESC = sizeof DESC_INTS / sizeof DESC_INTS[0] };

/* Field by field: a descriptor's padding bytes are not part of its value. */
static bool desc_same(const ts_conv_desc *a, const ts_conv_desc *b) {
  for (int f = 0; f < NDESC; f++)
    if (*(const int *)((const char *)a + DESC_INTS[f].off) != *(const int *)((const char *)b + DESC_INTS[f].off))
      return false;
  return a->relu == b->relu;
}

static cJSON *desc_to_cjson(const ts_conv_desc *d) {
  cJSON *j = cJSON_CreateObject();
  bool ok = j != NULL;
  for (int f = 0; ok && f < NDESC; f++)
    ok = cJSON_AddNumberToObject(j, DESC_INTS[f].name, *(const int *)((const char *)d + DESC_INTS[f].off)) != NULL;
  if (ok) ok = cJSON_AddBoolToObject(j, "relu", d->relu) != NULL;
  if (!ok) cJSON_Delete(j), j = NULL;
  return j;
}

static cJSON *plan_to_cjson(const ts_cnn_conv_plan *p) {
  cJSON *j = cJSON_CreateObject(), *arr = NULL;
  bool ok = j && cJSON_AddStringToObject(j, "format", FORMAT_NAME) && cJSON_AddStringToObject(j, "model", p->model) &&
            cJSON_AddNumberToObject(j, "batch", p->batch) && cJSON_AddNumberToObject(j, "threads", p->threads) &&
            cJSON_AddStringToObject(j, "key", p->key) && cJSON_AddStringToObject(j, "profile_stamp", p->stamp) &&
            (arr = cJSON_AddArrayToObject(j, "layers"));
  for (int i = 0; ok && i < p->n; i++) {
    const plan_layer *l = &p->layers[i];
    cJSON *o = cJSON_CreateObject(), *d = desc_to_cjson(&l->desc);
    ok = o && d && cJSON_AddItemToArray(arr, o);
    if (!ok) {
      cJSON_Delete(o), cJSON_Delete(d);
      break;
    }
    ok = cJSON_AddStringToObject(o, "name", l->name) && cJSON_AddNumberToObject(o, "node", l->node) &&
         cJSON_AddItemToObject(o, "desc", d);
    if (!ok) cJSON_Delete(d);
    ok = ok && cJSON_AddBoolToObject(o, "bn_folded", l->bn_folded) &&
         cJSON_AddStringToObject(o, "algo", ts_conv_algo_name(l->algo)) && cJSON_AddStringToObject(o, "why", l->why);
  }
  if (!ok) cJSON_Delete(j), j = NULL;
  return j;
}

/* A failed lookup or check (missing key, wrong type, bad value) as TS_ERR_FORMAT naming where it
 * was ("" at the top level, else "layers[3]", "layers[3].desc"). */
static ts_status at(ts_status s, const char *what, const char *where) {
  if (s == TS_OK || s == TS_ERR_OOM) return s;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", ts_last_error());
  return ts_error(TS_ERR_FORMAT, "%s: %s%s%s", what, where, *where ? ": " : "", msg);
}

/* An integer field in [lo, hi]. */
static ts_status get_int(const cJSON *j, const char *key, int lo, int hi, const char *what, const char *where, int *out) {
  int64_t v;
  TS_TRY(at(ts__json_get_int(j, key, &v), what, where));
  if (v < lo || v > hi) {
    ts_error(TS_ERR_INVALID_ARG, "key '%s': %lld out of range [%d, %d]", key, (long long)v, lo, hi);
    return at(TS_ERR_INVALID_ARG, what, where);
  }
  *out = (int)v;
  return TS_OK;
}

/* A string field copied into buf[cap] (too long: an error, never cut); hex16: 16 hex digits. */
static ts_status get_str(const cJSON *j, const char *key, char *buf, size_t cap, bool hex16, const char *what,
                         const char *where) {
  const char *v;
  TS_TRY(at(ts__json_get_string(j, key, &v), what, where));
  const size_t n = strlen(v);
  if (n >= cap) ts_error(TS_ERR_INVALID_ARG, "key '%s': longer than %zu bytes", key, cap - 1);
  else if (hex16 && (n != 16 || strspn(v, "0123456789abcdef") != 16))
    ts_error(TS_ERR_INVALID_ARG, "key '%s': expected 16 hex digits, found '%s'", key, v);
  else {
    memcpy(buf, v, n + 1);
    return TS_OK;
  }
  return at(TS_ERR_INVALID_ARG, what, where);
}

static ts_status layer_from_cjson(const cJSON *j, int i, int batch, const char *what, plan_layer *l) {
  char where[48];
  snprintf(where, sizeof where, "layers[%d]", i);
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "%s: layers[%d]: expected an object", what, i);
  TS_TRY(get_str(j, "name", l->name, sizeof l->name, false, what, where));
  TS_TRY(get_int(j, "node", 1, 1 << 30, what, where, &l->node));
  TS_TRY(at(ts__json_get_bool(j, "bn_folded", &l->bn_folded), what, where));
  TS_TRY(get_str(j, "why", l->why, sizeof l->why, false, what, where));
  const char *algo;
  TS_TRY(at(ts__json_get_string(j, "algo", &algo), what, where));
  if (ts_conv_algo_parse(algo, &l->algo) != TS_OK) return ts_error_prefix("key 'algo': "), at(TS_ERR_FORMAT, what, where);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "desc");
  snprintf(where, sizeof where, "layers[%d].desc", i);
  if (!cJSON_IsObject(d)) return ts_error(TS_ERR_FORMAT, "%s: layers[%d].desc: expected an object", what, i);
  for (int f = 0; f < NDESC; f++)
    TS_TRY(get_int(d, DESC_INTS[f].name, 0, 1 << 30, what, where, (int *)((char *)&l->desc + DESC_INTS[f].off)));
  TS_TRY(at(ts__json_get_bool(d, "relu", &l->desc.relu), what, where));
  if (l->desc.n != batch)
    return ts_error(TS_ERR_FORMAT, "%s: layers[%d].desc.n = %d, the plan's batch is %d", what, i, l->desc.n, batch);
  snprintf(where, sizeof where, "layers[%d]", i);
  return at(ts_conv_supported(&l->desc, l->algo), what, where); /* validates the descriptor too */
}

/* j into *p (its layers allocated here; on failure none are kept). */
static ts_status plan_from_cjson(const cJSON *j, const char *what, ts_cnn_conv_plan *p) {
  char fmt[32];
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "%s: expected an object", what);
  TS_TRY(get_str(j, "format", fmt, sizeof fmt, false, what, ""));
  if (strcmp(fmt, FORMAT_NAME)) return ts_error(TS_ERR_FORMAT, "%s: format '%s', expected '" FORMAT_NAME "'", what, fmt);
  TS_TRY(get_str(j, "model", p->model, sizeof p->model, false, what, ""));
  TS_TRY(get_int(j, "batch", 1, 4096, what, "", &p->batch));
  TS_TRY(get_int(j, "threads", 1, 1 << 16, what, "", &p->threads));
  TS_TRY(get_str(j, "key", p->key, sizeof p->key, true, what, ""));
  TS_TRY(get_str(j, "profile_stamp", p->stamp, sizeof p->stamp, true, what, ""));
  const cJSON *ls = cJSON_GetObjectItemCaseSensitive(j, "layers");
  if (!cJSON_IsArray(ls)) return ts_error(TS_ERR_FORMAT, "%s: expected a \"layers\" array", what);
  const int n = cJSON_GetArraySize(ls);
  plan_layer *layers = calloc((size_t)(n ? n : 1), sizeof *layers);
  if (!layers) return ts_error(TS_ERR_OOM, "%s: out of memory for %d layers", what, n);
  ts_status s = TS_OK;
  int i = 0;
  const cJSON *l;
  cJSON_ArrayForEach(l, ls) {
    if ((s = layer_from_cjson(l, i, p->batch, what, &layers[i])) != TS_OK) break;
    i++;
  }
  if (s != TS_OK) {
    free(layers);
    return s;
  }
  p->layers = layers, p->n = n;
  return TS_OK;
}

ts_status ts_cnn_conv_plan_to_json(const ts_cnn_conv_plan *p, char **json) {
  if (!p || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_conv_plan_to_json: NULL argument");
  *json = NULL;
  return ts__json_out(plan_to_cjson(p), "conv plan", json);
}

static ts_status plan_parse(const cJSON *j, void *obj) { return plan_from_cjson(j, "conv plan", obj); }

ts_status ts_cnn_conv_plan_from_json(ts_cnn_conv_plan **out, const char *json) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_conv_plan_from_json: NULL plan pointer");
  *out = NULL;
  ts_cnn_conv_plan *p = calloc(1, sizeof *p);
  if (!p) return ts_error(TS_ERR_OOM, "ts_cnn_conv_plan_from_json: out of memory");
  const ts_status s = ts__json_in(json, "conv plan", plan_parse, p);
  if (s != TS_OK) {
    ts_cnn_conv_plan_destroy(p);
    return s;
  }
  *out = p;
  return TS_OK;
}

/* ---- the store: key, profile stamp, get()'s callbacks ------------------------------------------ */

static void hash_desc(ts_hash *h, const ts_conv_desc *d) {
  for (int f = 0; f < NDESC; f++) ts_hash_i64(h, *(const int *)((const char *)d + DESC_INTS[f].off));
  ts_hash_i64(h, d->relu);
}

static void plan_key(const ts_cnn_graph *g, const ts_cnn_plan_opts *o, const ts_cnn_conv_info *ls, int n, int threads,
                     char key[17]) {
  ts_hash h;
  ts_hash_init(&h, KIND.name);
  ts_hash_i64(&h, KIND.version), ts_hash_i64(&h, threads), ts_hash_i64(&h, o->algo), ts_hash_i64(&h, o->candidates);
  ts_hash_i64(&h, o->fold_bn), ts_hash_i64(&h, o->fuse_relu);
  ts_hash_str(&h, ts_cpu()->model), ts_hash_str(&h, ts_isa_name(ts_isa_active()));
  ts_hash_str(&h, o->overrides), ts_hash_str(&h, ts_cnn_graph_name(g));
  for (int i = 0; i < n; i++) ts_hash_str(&h, ls[i].name), hash_desc(&h, &ls[i].desc);
  ts_hash_hex(&h, key);
}

/* The profile's entries for the layers: a plan is made again when they change. */
static void profile_stamp(const ts_conv_profile *prof, const ts_cnn_conv_info *ls, int n, char out[17]) {
  ts_hash h;
  ts_hash_init(&h, "conv-plan-profile");
  for (int i = 0; i < n; i++) {
    ts_conv_profile_entry e;
    if (!ts_conv_profile_get(prof, &ls[i].desc, &e)) {
      ts_hash_i64(&h, -1);
      continue;
    }
    for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) /* every NaN alike: "not measured" has no one bit pattern */
      ts_hash_f64(&h, isnan(e.ms[a]) ? -1.0 : e.ms[a]), ts_hash_i64(&h, e.pruned[a]);
  }
  ts_hash_hex(&h, out);
}

typedef struct plan_get {
  ts_context *ctx;
  const ts_cnn_graph *g;
  const ts_cnn_plan_opts *o;    /* profile set */
  const ts_cnn_conv_info *ls;   /* the graph's convolution layers as planned */
  ts_cnn_conv_plan *p;          /* key, stamp, model, batch, threads set; layers filled by accept or compute */
} plan_get;

/* A stored plan is used when it is this key's, for these layers, made with today's profile stamp. */
static ts_status plan_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  plan_get *g = ctx;
  (void)prov; /* the key holds the CPU, kernels and threads */
  if (g->o->replan) return ts_error(TS_ERR_NOT_FOUND, "conv plan: replan asked");
  ts_cnn_conv_plan q;
  memset(&q, 0, sizeof q);
  TS_TRY(plan_from_cjson(data, "stored conv plan", &q));
  ts_status s = TS_OK;
  if (strcmp(q.key, g->p->key) || strcmp(q.model, g->p->model) || q.batch != g->p->batch || q.threads != g->p->threads ||
      q.n != g->p->n)
    s = ts_error(TS_ERR_FORMAT, "stored conv plan: made for another graph, batch or thread count");
  for (int i = 0; s == TS_OK && i < q.n; i++)
    if (strcmp(q.layers[i].name, g->ls[i].name) || q.layers[i].node != g->ls[i].node ||
        !desc_same(&q.layers[i].desc, &g->ls[i].desc))
      s = ts_error(TS_ERR_FORMAT, "stored conv plan: layer %d is not '%s' as planned", i, g->ls[i].name);
  if (s == TS_OK && strcmp(q.stamp, g->p->stamp))
    s = ts_error(TS_ERR_NOT_FOUND, "stored conv plan: made with other profile entries"); /* stale: made again */
  if (s != TS_OK) {
    free(q.layers);
    return s;
  }
  g->p->layers = q.layers;
  return TS_OK;
}

static ts_status plan_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  plan_get *g = ctx;
  ts_cnn_conv_plan *p = g->p;
  ts_conv_profile *prof = g->o->profile;
  const int before = ts_conv_profile_size(prof);
  ts_cnn_net *net = NULL;
  TS_TRY(ts__cnn_net_choose(&net, g->ctx, g->g, g->o));
  if (ts_conv_profile_size(prof) != before && ts_conv_profile_save(prof) != TS_OK) { /* its stamp is the plan's */
    fprintf(stderr, "tessera: could not save the conv profile: %s\n", ts_last_error());
    ts_error_clear();
  }
  ts_status s = ts_cnn_net_conv_count(net) == p->n ? TS_OK
                : ts_error(TS_ERR_INTERNAL, "conv plan: %d convolutions chosen, %d planned", ts_cnn_net_conv_count(net), p->n);
  if (s == TS_OK && !(p->layers = calloc((size_t)(p->n ? p->n : 1), sizeof *p->layers)))
    s = ts_error(TS_ERR_OOM, "conv plan: out of memory");
  for (int i = 0; s == TS_OK && i < p->n; i++) {
    ts_cnn_conv_info ci;
    s = ts_cnn_net_conv_info(net, i, &ci);
    plan_layer *l = &p->layers[i];
    snprintf(l->name, sizeof l->name, "%s", ci.name), snprintf(l->why, sizeof l->why, "%s", ci.why);
    l->node = ci.node, l->desc = ci.desc, l->algo = ci.algo, l->bn_folded = ci.bn_folded;
  }
  ts_cnn_net_destroy(net);
  if (s != TS_OK) {
    free(p->layers), p->layers = NULL;
    return s;
  }
  profile_stamp(prof, g->ls, p->n, p->stamp); /* after the shapes it measured */
  ts_provenance_here(prov, ts_isa_active(), p->threads);
  ts_hwinfo_profile_key_here(p->threads, prov->profile);
  if (!(*data = plan_to_cjson(p))) { /* chosen, just not kept */
    fprintf(stderr, "tessera: could not store the conv plan: out of memory\n");
    ts_error_clear();
  }
  return TS_OK;
}

static ts_status plan_check(void *ctx, const cJSON *data) {
  (void)ctx;
  ts_cnn_conv_plan q;
  memset(&q, 0, sizeof q);
  TS_TRY(plan_from_cjson(data, "conv plan", &q));
  free(q.layers);
  return TS_OK;
}

ts_status ts_cnn_conv_plan_create(ts_cnn_conv_plan **out, ts_context *ctx, const ts_cnn_graph *g,
                                  const ts_cnn_plan_opts *opts) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_conv_plan_create: NULL plan pointer");
  *out = NULL;
  TS_TRY(ts_cnn_graph_status(g));
  ts_cnn_plan_opts o = opts ? *opts : ts_cnn_plan_opts_default();
  if (o.batch < 1 || o.batch > 4096) return ts_error(TS_ERR_INVALID_ARG, "cnn: batch = %d out of range [1, 4096]", o.batch);
  const int n = ts_cnn_conv_layers(g, &o, NULL, 0);
  if (n < 0) return TS_ERR_OOM; /* the graph is valid: out of memory, message set */
  ts_cnn_conv_info *ls = calloc((size_t)(n ? n : 1), sizeof *ls);
  ts_cnn_conv_plan *p = calloc(1, sizeof *p);
  ts_conv_profile *own = NULL;
  ts_status s = ls && p ? TS_OK : ts_error(TS_ERR_OOM, "ts_cnn_conv_plan_create: out of memory");
  if (s == TS_OK && ts_cnn_conv_layers(g, &o, ls, n) != n) s = ts_error(TS_ERR_OOM, "ts_cnn_conv_plan_create: out of memory");
  if (s == TS_OK && !o.profile && (s = ts_conv_profile_open(&own, ctx, NULL, NULL)) == TS_OK) o.profile = own;
  if (s == TS_OK) {
    snprintf(p->model, sizeof p->model, "%s", ts_cnn_graph_name(g));
    p->batch = o.batch, p->threads = ctx ? ts_context_threads(ctx) : ts_default_threads(), p->n = n;
    plan_key(g, &o, ls, n, p->threads, p->key);
    if (ts_artifact_path(KIND.name, p->key, p->path, sizeof p->path) != TS_OK) ts_error_clear(), p->path[0] = 0;
    profile_stamp(o.profile, ls, n, p->stamp);
    plan_get pg = {ctx, g, &o, ls, p};
    const ts__artifact_ops ops = {KIND, plan_accept, plan_compute, plan_check};
    bool computed = false;
    s = ts__artifact_get(&ops, p->key, &pg, &computed);
    p->cached = !computed;
  }
  free(ls);
  ts_conv_profile_destroy(own);
  if (s != TS_OK) {
    ts_cnn_conv_plan_destroy(p);
    return s;
  }
  *out = p;
  return TS_OK;
}
