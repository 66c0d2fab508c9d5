/* Plans <-> JSON (docs/FORMATS.md "gconv plan"), the plan cache (artifact "gconv-plan", key = the
 * plan key in hex: <cache>/gconv-plan/<key>.json) and ts_gconv_plan_get. The reader validates every field; partitions are re-checked against the
 * connectivity by ts_gconv_plan_get before a cached plan is used. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "gconv/gconv_internal.h"
#include "io/json_internal.h"
#include "tessera/hwinfo.h"

#define FORMAT_NAME "tessera-gconv-plan"
#define PLAN_VERSION 2 /* 2: in an artifact envelope, keys hashed with ts_hash */
static const ts__artifact_kind PLAN_KIND = {"gconv-plan", PLAN_VERSION};

static cJSON *ints(const int32_t *v, int32_t n) {
  cJSON *a = cJSON_CreateArray();
  for (int32_t i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]))) return cJSON_Delete(a), NULL;
  return a;
}

static bool add_parts(cJSON *j, const char *key, const ts_gconv_part *parts, int32_t n) {
  cJSON *a = cJSON_AddArrayToObject(j, key);
  for (int32_t p = 0; a && p < n; p++) {
    cJSON *o = cJSON_CreateObject(), *r = NULL, *in = NULL;
    if (!o || !cJSON_AddItemToArray(a, o)) return cJSON_Delete(o), false;
    /* an item cJSON_AddItemToObject cannot attach (its key not allocated) stays the caller's */
    if (!(r = ints(parts[p].rows, parts[p].nrows)) || !cJSON_AddItemToObject(o, "rows", r)) return cJSON_Delete(r), false;
    if (!(in = ints(parts[p].in, parts[p].nunion)) || !cJSON_AddItemToObject(o, "in", in)) return cJSON_Delete(in), false;
  }
  return a != NULL;
}

static void hex(char *buf, uint64_t v) { snprintf(buf, 17, "%016" PRIx64, v); }

ts_status ts__gconv_plan_to_cjson(const ts_gconv_plan *p, cJSON **out) {
  *out = NULL;
  cJSON *j = cJSON_CreateObject(), *ly = NULL, *cands = NULL;
  char h1[17], h2[17];
  hex(h1, p->conn_hash), hex(h2, p->key);
  const ts_gconv_layer *l = &p->layer;
  /* every cJSON_Add* gives NULL when out of memory: ok collects them, so a document missing a
   * field is never returned (nor saved) */
  bool ok = j && cJSON_AddStringToObject(j, "format", FORMAT_NAME) && cJSON_AddNumberToObject(j, "version", PLAN_VERSION) &&
            (ly = cJSON_AddObjectToObject(j, "layer"));
  ok = ok && cJSON_AddNumberToObject(ly, "n", l->n) && cJSON_AddNumberToObject(ly, "cin", l->cin);
  ok = ok && cJSON_AddNumberToObject(ly, "cout", l->cout) && cJSON_AddNumberToObject(ly, "h", l->h);
  ok = ok && cJSON_AddNumberToObject(ly, "w", l->w) && cJSON_AddNumberToObject(ly, "ksize", l->ksize);
  ok = ok && cJSON_AddNumberToObject(ly, "stride", l->stride);
  ok = ok && cJSON_AddNumberToObject(j, "nnz", (double)p->nnz);
  ok = ok && cJSON_AddStringToObject(j, "conn_hash", h1);
  ok = ok && cJSON_AddStringToObject(j, "key", h2);
  ok = ok && cJSON_AddStringToObject(j, "method", ts_reorder_method_name(p->method));
  ok = ok && cJSON_AddStringToObject(j, "solver", ts_gconv_solver_name(p->solver));
  ok = ok && cJSON_AddNumberToObject(j, "pred_ms", p->pred_ms);
  ok = ok && cJSON_AddNumberToObject(j, "dense_pred_ms", p->dense_pred_ms);
  ok = ok && cJSON_AddNumberToObject(j, "plan_ms", p->plan_ms);
  ok = ok && cJSON_AddStringToObject(j, "cost_source", p->cost_source);
  ok = ok && cJSON_AddStringToObject(j, "cpu_model", p->cpu_model);
  ok = ok && (cands = cJSON_AddArrayToObject(j, "candidates"));
  for (int i = 0; ok && i < p->ncand; i++) {
    const ts_gconv_candidate *c = &p->cand[i];
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(cands, o)) {
      cJSON_Delete(o);
      ok = false;
      break;
    }
    ok = cJSON_AddStringToObject(o, "method", ts_reorder_method_name(c->method));
    ok = ok && cJSON_AddNumberToObject(o, "reorder_ms", c->reorder_ms) && cJSON_AddNumberToObject(o, "knapsack_ms", c->knapsack_ms);
    ok = ok && cJSON_AddNumberToObject(o, "greedy_ms", c->greedy_ms) && cJSON_AddNumberToObject(o, "ilp_ms", c->ilp_ms);
    ok = ok && cJSON_AddNumberToObject(o, "knapsack_pred_ms", c->knapsack_pred_ms);
    ok = ok && cJSON_AddNumberToObject(o, "segment_pred_ms", c->segment_pred_ms);
    ok = ok && cJSON_AddStringToObject(o, "start", c->segment_won ? "segment" : "knapsack");
    ok = ok && cJSON_AddNumberToObject(o, "greedy_pred_ms", c->greedy_pred_ms) && cJSON_AddNumberToObject(o, "pred_ms", c->pred_ms);
    ok = ok && cJSON_AddNumberToObject(o, "nparts", c->nparts) && cJSON_AddBoolToObject(o, "ilp_ran", c->ilp_ran);
    ok = ok && cJSON_AddNumberToObject(o, "ilp_solves", c->ilp_solves) && cJSON_AddNumberToObject(o, "ilp_improved", c->ilp_improved);
    ok = ok && cJSON_AddBoolToObject(o, "ilp_timeout", c->ilp_timeout);
  }
  ok = ok && add_parts(j, "parts", p->parts, p->nparts);
  if (ok && p->none_nparts) ok = add_parts(j, "none_parts", p->none_parts, p->none_nparts);
  if (!ok) return cJSON_Delete(j), ts_error(TS_ERR_OOM, "gconv plan json: out of memory");
  *out = j;
  return TS_OK;
}

/* ---- reading ------------------------------------------------------------------------------------ */

static ts_status bad(const char *name, const char *field, const char *why) {
  return ts_error(TS_ERR_FORMAT, "%s: gconv plan field '%s': %s", name, field, why);
}

static ts_status get_int(const char *name, const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *v) {
  if (ts__json_get_int(o, key, v) != TS_OK || *v < lo || *v > hi) {
    char why[96];
    snprintf(why, sizeof why, "missing or not an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    return bad(name, key, why);
  }
  return TS_OK;
}

static double num_or(const cJSON *o, const char *key, double def) {
  double v;
  return ts__json_get_number(o, key, &v) == TS_OK ? v : def;
}

/* An optional integer field in [0, INT32_MAX] (0 when absent). */
static ts_status count_or_zero(const char *name, const cJSON *o, const char *key, int32_t *out) {
  double v;
  *out = 0;
  if (ts__json_get_number(o, key, &v) != TS_OK) return TS_OK;
  if (!(v >= 0 && v <= (double)INT32_MAX) || v != floor(v)) return bad(name, key, "not an integer in [0, 2^31)");
  *out = (int32_t)v;
  return TS_OK;
}

/* Integer array of length <= cap into dst (ascending when `sorted`). */
static ts_status get_ints(const char *name, const char *field, const cJSON *a, int32_t *dst, int64_t cap, int64_t hi,
                          int32_t *n) {
  if (!cJSON_IsArray(a)) return bad(name, field, "not an array");
  int64_t len = cJSON_GetArraySize(a), i = 0;
  if (len > cap) return bad(name, field, "more entries than the layer has channels");
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (double)hi || e->valuedouble != (int32_t)e->valuedouble)
      return bad(name, field, "entries must be channel indices of the layer");
    dst[i++] = (int32_t)e->valuedouble;
  }
  *n = (int32_t)len;
  return TS_OK;
}

static ts_status read_parts(const char *name, const char *key, const cJSON *j, const ts_gconv_layer *l,
                            ts_gconv_part **parts, int32_t **rows_buf, int32_t **in_buf, int32_t *nparts) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > l->cout)
    return bad(name, key, "needs 1 to cout partitions");
  int32_t np = cJSON_GetArraySize(a);
  int64_t tot_in = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(e, "in");
    if (!cJSON_IsArray(in)) return bad(name, key, "a partition without an 'in' array");
    tot_in += cJSON_GetArraySize(in);
  }
  *parts = ts_calloc((size_t)np, sizeof(ts_gconv_part));
  *rows_buf = ts_malloc((size_t)l->cout * sizeof(int32_t));
  *in_buf = ts_malloc((size_t)(tot_in ? tot_in : 1) * sizeof(int32_t));
  if (!*parts || !*rows_buf || !*in_buf) return ts_error(TS_ERR_OOM, "%s: out of memory", name);
  int64_t rused = 0, iused = 0;
  int32_t p = 0;
  cJSON_ArrayForEach(e, a) {
    ts_gconv_part *P = &(*parts)[p++];
    P->rows = *rows_buf + rused, P->in = *in_buf + iused;
    TS_TRY(get_ints(name, "parts.rows", cJSON_GetObjectItemCaseSensitive(e, "rows"), P->rows, l->cout - rused, l->cout,
                    &P->nrows));
    TS_TRY(get_ints(name, "parts.in", cJSON_GetObjectItemCaseSensitive(e, "in"), P->in, l->cin, l->cin, &P->nunion));
    rused += P->nrows, iused += P->nunion;
  }
  *nparts = np;
  return TS_OK;
}

ts_status ts__gconv_plan_from_cjson(const cJSON *j, const char *name, ts_gconv_plan *out) {
  memset(out, 0, sizeof *out);
  const char *str;
  if (ts__json_get_string(j, "format", &str) != TS_OK || strcmp(str, FORMAT_NAME) != 0)
    return bad(name, "format", "not " FORMAT_NAME);
  int64_t v;
  TS_TRY(get_int(name, j, "version", 1, PLAN_VERSION, &v));
  const cJSON *ly = cJSON_GetObjectItemCaseSensitive(j, "layer");
  if (!cJSON_IsObject(ly)) return bad(name, "layer", "missing or not an object");
  ts_gconv_plan p;
  memset(&p, 0, sizeof p);
  int64_t f[7];
  const char *keys[7] = {"n", "cin", "cout", "h", "w", "ksize", "stride"};
  for (int i = 0; i < 7; i++) TS_TRY(get_int(name, ly, keys[i], 1, 1 << 24, &f[i]));
  p.layer = (ts_gconv_layer){(int)f[0], (int)f[1], (int)f[2], (int)f[3], (int)f[4], (int)f[5], (int)f[6]};
  if (ts_gconv_layer_check(&p.layer) != TS_OK) return bad(name, "layer", ts_last_error());
  TS_TRY(get_int(name, j, "nnz", 0, (int64_t)p.layer.cin * p.layer.cout, &p.nnz));
  const char *ch, *kh;
  if (ts__json_get_string(j, "conn_hash", &ch) != TS_OK || sscanf(ch, "%" SCNx64, &p.conn_hash) != 1)
    return bad(name, "conn_hash", "missing or not hex");
  if (ts__json_get_string(j, "key", &kh) != TS_OK || sscanf(kh, "%" SCNx64, &p.key) != 1) return bad(name, "key", "missing or not hex");
  if (ts__json_get_string(j, "method", &str) != TS_OK || ts_reorder_method_parse(str, &p.method) != TS_OK)
    return bad(name, "method", "not a reorder method name");
  if (ts__json_get_string(j, "solver", &str) != TS_OK || ts_gconv_solver_parse(str, &p.solver) != TS_OK)
    return bad(name, "solver", "not ilp or greedy");
  p.pred_ms = num_or(j, "pred_ms", 0), p.dense_pred_ms = num_or(j, "dense_pred_ms", 0), p.plan_ms = num_or(j, "plan_ms", 0);
  if (ts__json_get_string(j, "cost_source", &str) == TS_OK) snprintf(p.cost_source, sizeof p.cost_source, "%s", str);
  if (ts__json_get_string(j, "cpu_model", &str) == TS_OK) snprintf(p.cpu_model, sizeof p.cpu_model, "%s", str);
  p.best_none = -1;
  const cJSON *cands = cJSON_GetObjectItemCaseSensitive(j, "candidates"), *e;
  cJSON_ArrayForEach(e, cands) {
    if (p.ncand == TS_GCONV_MAX_CANDIDATES) break;
    ts_gconv_candidate *c = &p.cand[p.ncand];
    if (ts__json_get_string(e, "method", &str) != TS_OK || ts_reorder_method_parse(str, &c->method) != TS_OK)
      return bad(name, "candidates.method", "not a reorder method name");
    if (c->method == TS_REORDER_NONE) p.best_none = p.ncand;
    c->reorder_ms = num_or(e, "reorder_ms", 0), c->knapsack_ms = num_or(e, "knapsack_ms", 0);
    c->greedy_ms = num_or(e, "greedy_ms", 0), c->ilp_ms = num_or(e, "ilp_ms", 0);
    c->greedy_pred_ms = num_or(e, "greedy_pred_ms", 0), c->pred_ms = num_or(e, "pred_ms", 0);
    c->knapsack_pred_ms = num_or(e, "knapsack_pred_ms", 0), c->segment_pred_ms = num_or(e, "segment_pred_ms", 0);
    c->segment_won = ts__json_get_string(e, "start", &str) == TS_OK && strcmp(str, "segment") == 0;
    TS_TRY(count_or_zero(name, e, "nparts", &c->nparts));
    TS_TRY(count_or_zero(name, e, "ilp_solves", &c->ilp_solves));
    TS_TRY(count_or_zero(name, e, "ilp_improved", &c->ilp_improved));
    bool b;
    if (ts__json_get_bool(e, "ilp_ran", &b) == TS_OK) c->ilp_ran = b;
    if (ts__json_get_bool(e, "ilp_timeout", &b) == TS_OK) c->ilp_timeout = b;
    p.ncand++;
  }
  ts_status s = read_parts(name, "parts", j, &p.layer, &p.parts, &p.rows_buf, &p.in_buf, &p.nparts);
  if (s == TS_OK && cJSON_GetObjectItemCaseSensitive(j, "none_parts"))
    s = read_parts(name, "none_parts", j, &p.layer, &p.none_parts, &p.none_rows_buf, &p.none_in_buf, &p.none_nparts);
  if (s != TS_OK) {
    ts_gconv_plan_free(&p);
    return s;
  }
  *out = p;
  return TS_OK;
}

ts_status ts_gconv_plan_to_json(const ts_gconv_plan *p, char **json) {
  if (!p || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_gconv_plan_to_json: NULL argument");
  *json = NULL;
  cJSON *j;
  TS_TRY(ts__gconv_plan_to_cjson(p, &j));
  return ts__json_out(j, "gconv plan", json);
}

static ts_status plan_parse(const cJSON *j, void *out) { return ts__gconv_plan_from_cjson(j, "gconv plan", out); }

ts_status ts_gconv_plan_from_json(const char *json, ts_gconv_plan *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_gconv_plan_from_json: NULL plan");
  memset(out, 0, sizeof *out);
  return ts__json_in(json, "gconv plan", plan_parse, out);
}

ts_status ts_gconv_plan_save(const ts_gconv_plan *p, const char *path) {
  cJSON *j;
  TS_TRY(ts__gconv_plan_to_cjson(p, &j));
  ts_status s = ts__json_write_file(path, j);
  cJSON_Delete(j);
  return s;
}

ts_status ts_gconv_plan_load(const char *path, ts_gconv_plan *out) {
  memset(out, 0, sizeof *out);
  cJSON *j;
  TS_TRY(ts__json_read_file(path, &j));
  ts_status s = ts__gconv_plan_from_cjson(j, path, out);
  cJSON_Delete(j);
  return s;
}

ts_status ts_gconv_plan_cache_path(uint64_t key, char *buf, size_t cap) {
  char k[17];
  hex(k, key);
  return ts_artifact_path(PLAN_KIND.name, k, buf, cap);
}

typedef struct plan_get {
  const ts_gconv_layer *l;
  const ts_csr *conn;
  const ts_gconv_cost *m;
  const ts_gconv_plan_opts *o;
  uint64_t key;
  ts_gconv_plan *out;
} plan_get;

/* A stored plan is used when it is the plan of this key, layer and connectivity and valid for it;
 * anything else under this key is corrupt or foreign (moved aside). */
static ts_status plan_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  plan_get *g = ctx;
  (void)prov;
  TS_TRY(ts__gconv_plan_from_cjson(data, "cached gconv plan", g->out));
  ts_status s = TS_OK;
  if (g->out->key != g->key || g->out->conn_hash != ts_gconv_conn_hash(g->conn) ||
      memcmp(&g->out->layer, g->l, sizeof *g->l) != 0)
    s = ts_error(TS_ERR_FORMAT, "cached gconv plan: made for another layer or connectivity");
  else
    s = ts_gconv_plan_validate(g->out, g->conn);
  if (s != TS_OK) ts_gconv_plan_free(g->out);
  return s;
}

static ts_status plan_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  plan_get *g = ctx;
  TS_TRY(ts_gconv_plan_make(g->l, g->conn, g->m, g->o, g->out));
  ts_provenance_here(prov, ts_gconv_kernel_isa(), 0);
  ts_hwinfo_profile_key_here(0, prov->profile);
  if (ts__gconv_plan_to_cjson(g->out, data) != TS_OK) { /* planned, just not kept */
    fprintf(stderr, "tessera: could not cache the gconv plan: %s\n", ts_last_error());
    ts_error_clear();
    *data = NULL;
  }
  return TS_OK;
}

ts_status ts_gconv_plan_get(const ts_gconv_layer *l, const ts_csr *conn, const ts_gconv_cost *m,
                            const ts_gconv_plan_opts *o, ts_gconv_plan *out, bool *cached) {
  if (cached) *cached = false;
  TS_TRY(ts_gconv_conn_check(l, conn));
  plan_get g = {l, conn, m, o, ts_gconv_plan_key(l, conn, m, o), out};
  char key[17];
  hex(key, g.key);
  const ts__artifact_ops ops = {PLAN_KIND, plan_accept, plan_compute, NULL};
  bool computed = false;
  TS_TRY(ts__artifact_get(&ops, key, &g, &computed));
  if (cached) *cached = !computed;
  return TS_OK;
}
