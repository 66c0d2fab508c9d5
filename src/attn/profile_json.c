/* Attention profile <-> JSON (layout in attn_profile.h) and its file. The reader validates every
 * field and names the bad one; a missing key is a malformed file (TS_ERR_FORMAT) too. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "core/artifact_internal.h"
#include "io/json_internal.h"

#define FORMAT_NAME "tessera-attn-profile"

static cJSON *int_array(const int32_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]))) return cJSON_Delete(a), NULL;
  return a;
}

cJSON *ts__attn_profile_to_cjson(const ts_attn_profile *p) {
  if (!p || !p->seconds || !p->overhead) return NULL;
  cJSON *j = cJSON_CreateObject(), *prov = ts__provenance_json(&p->prov);
  if (!j || !prov) return cJSON_Delete(j), cJSON_Delete(prov), NULL;
  bool ok = cJSON_AddStringToObject(j, "format", FORMAT_NAME) && cJSON_AddNumberToObject(j, "version", p->version) &&
            cJSON_AddItemToObject(j, "provenance", prov);
  if (!ok) return cJSON_Delete(prov), cJSON_Delete(j), NULL;
  ok = cJSON_AddStringToObject(j, "level", p->level) && (p->pass == TS_ATTN_PASS_FORWARD ||
                                                          cJSON_AddStringToObject(j, "pass", ts_attn_pass_name(p->pass))) &&
       cJSON_AddNumberToObject(j, "d", (double)p->d) &&
       cJSON_AddStringToObject(j, "dtype", ts_dtype_name(p->dtype)) && cJSON_AddNumberToObject(j, "warmup", p->warmup) &&
       cJSON_AddNumberToObject(j, "repeats", p->repeats) && cJSON_AddNumberToObject(j, "passes", p->passes) &&
       cJSON_AddNumberToObject(j, "min_time_s", p->min_time_s) && cJSON_AddNumberToObject(j, "measure_s", p->measure_s);
  cJSON *sizes = ok ? int_array(p->sizes, p->nsizes) : NULL;
  ok = ok && sizes && cJSON_AddItemToObject(j, "sizes", sizes);
  cJSON *dens = ok ? cJSON_CreateDoubleArray(p->densities, p->ndens) : NULL;
  ok = ok && dens && cJSON_AddItemToObject(j, "densities", dens);
  cJSON *menu = ok ? cJSON_CreateArray() : NULL;
  ok = ok && menu && cJSON_AddItemToObject(j, "menu", menu);
  for (int t = 0; ok && t < p->nmenu; t++) {
    int32_t bb[2] = {p->menu[t].br, p->menu[t].bc};
    cJSON *pair = int_array(bb, 2);
    ok = pair && cJSON_AddItemToArray(menu, pair);
  }
  cJSON *sec = ok ? cJSON_CreateArray() : NULL;
  ok = ok && sec && cJSON_AddItemToObject(j, "seconds", sec);
  for (int t = 0; ok && t < p->nmenu; t++) {
    cJSON *at = cJSON_CreateArray();
    ok = at && cJSON_AddItemToArray(sec, at);
    for (int d = 0; ok && d < p->ndens; d++) {
      cJSON *ad = cJSON_CreateArray();
      ok = ad && cJSON_AddItemToArray(at, ad);
      for (int r = 0; ok && r < p->nsizes; r++) {
        cJSON *ar = cJSON_CreateDoubleArray(ts_attn_profile_at(p, t, d, r, 0), p->nsizes);
        ok = ar && cJSON_AddItemToArray(ad, ar);
      }
    }
  }
  cJSON *ov = ok ? cJSON_CreateArray() : NULL;
  ok = ok && ov && cJSON_AddItemToObject(j, "overhead_s", ov);
  for (int r = 0; ok && r < p->nsizes; r++) {
    cJSON *ar = cJSON_CreateDoubleArray(p->overhead + (size_t)r * p->nsizes, p->nsizes);
    ok = ar && cJSON_AddItemToArray(ov, ar);
  }
  if (!ok) return cJSON_Delete(j), NULL;
  return j;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* A lookup error (missing key, wrong type) becomes TS_ERR_FORMAT with the io.h message. */
static ts_status as_format(ts_status s, const char *where) {
  if (s == TS_OK) return s;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", ts_last_error());
  return ts_error(TS_ERR_FORMAT, "attn profile%s%s: %s", where[0] ? " " : "", where, msg);
}

static ts_status get_str(const cJSON *j, const char *where, const char *key, char *dst, size_t cap) {
  const char *s;
  TS_TRY(as_format(ts__json_get_string(j, key, &s), where));
  if (strlen(s) >= cap)
    return ts_error(TS_ERR_FORMAT, "attn profile: key '%s': string of %zu bytes is longer than %zu", key, strlen(s), cap - 1);
  snprintf(dst, cap, "%s", s);
  return TS_OK;
}

static ts_status get_int(const cJSON *j, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  TS_TRY(as_format(ts__json_get_int(j, key, out), ""));
  if (*out < lo || *out > hi)
    return ts_error(TS_ERR_FORMAT, "attn profile: key '%s': %lld is not in [%lld, %lld]", key, (long long)*out,
                    (long long)lo, (long long)hi);
  return TS_OK;
}

/* An array of 1..max items under key. */
static ts_status get_array(const cJSON *j, const char *key, int max, const cJSON **arr, int *n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!a) return ts_error(TS_ERR_FORMAT, "attn profile: missing key '%s'", key);
  int len = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
  if (len < 1 || len > max)
    return ts_error(TS_ERR_FORMAT, "attn profile: key '%s': expected an array of 1 to %d items", key, max);
  *arr = a, *n = len;
  return TS_OK;
}

static ts_status read_grid(const cJSON *j, ts_attn_profile *q) {
  const cJSON *a = NULL;
  int n = 0;
  TS_TRY(get_array(j, "sizes", TS_ATTN_PROFILE_MAX_SIZES, &a, &n));
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_GetArrayItem(a, i);
    double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (x != floor(x) || x < 1 || x > TS_ATTN_PROFILE_MAX_SIDE || (i > 0 && x <= q->sizes[i - 1]))
      return ts_error(TS_ERR_FORMAT, "attn profile: sizes[%d]: expected an integer in [1, %d] above the previous one", i,
                      TS_ATTN_PROFILE_MAX_SIDE);
    q->sizes[i] = (int32_t)x;
  }
  q->nsizes = n;
  TS_TRY(get_array(j, "densities", TS_ATTN_PROFILE_MAX_DENS, &a, &n));
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_GetArrayItem(a, i);
    double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(x > 0 && x <= 1) || (i > 0 && x <= q->densities[i - 1]))
      return ts_error(TS_ERR_FORMAT, "attn profile: densities[%d]: expected a number in (0, 1] above the previous one", i);
    q->densities[i] = x;
  }
  q->ndens = n;
  TS_TRY(get_array(j, "menu", TS_ATTN_PROFILE_MAX_MENU, &a, &n));
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_GetArrayItem(a, i);
    const cJSON *x = cJSON_GetArrayItem(v, 0), *y = cJSON_GetArrayItem(v, 1);
    bool ok = cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2 && cJSON_IsNumber(x) && cJSON_IsNumber(y) &&
              x->valuedouble == floor(x->valuedouble) && y->valuedouble == floor(y->valuedouble) && x->valuedouble >= 1 &&
              y->valuedouble >= 1 && x->valuedouble <= TS_ATTN_TILE_MAX && y->valuedouble <= TS_ATTN_TILE_MAX;
    if (!ok) return ts_error(TS_ERR_FORMAT, "attn profile: menu[%d]: expected [br, bc] in [1, %d]", i, TS_ATTN_TILE_MAX);
    q->menu[i] = (ts_attn_tile){(int32_t)x->valuedouble, (int32_t)y->valuedouble};
  }
  q->nmenu = n;
  return TS_OK;
}

/* seconds[tile][dens][row][col], every entry a positive finite number. */
static ts_status read_table(const cJSON *j, ts_attn_profile *q) {
  const cJSON *sec = cJSON_GetObjectItemCaseSensitive(j, "seconds");
  if (!sec) return ts_error(TS_ERR_FORMAT, "attn profile: missing key 'seconds'");
  const int dims[4] = {q->nmenu, q->ndens, q->nsizes, q->nsizes};
  int idx[4] = {0};
  char path[96];
  for (int t = 0; t < dims[0]; t++)
    for (int d = 0; d < dims[1]; d++)
      for (int r = 0; r < dims[2]; r++)
        for (int c = 0; c < dims[3]; c++) {
          idx[0] = t, idx[1] = d, idx[2] = r, idx[3] = c;
          const cJSON *v = sec;
          int len = snprintf(path, sizeof path, "seconds");
          for (int k = 0; k < 4; k++) {
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != dims[k])
              return ts_error(TS_ERR_FORMAT, "attn profile: %s: expected an array of %d items (%s)", path, dims[k],
                              k == 0 ? "one per menu tile" : k == 1 ? "one per density" : "one per size");
            v = cJSON_GetArrayItem(v, idx[k]);
            len += snprintf(path + len, sizeof path - (size_t)len, "[%d]", idx[k]);
          }
          if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
            return ts_error(TS_ERR_FORMAT, "attn profile: %s: expected a positive number of seconds", path);
          *ts_attn_profile_at(q, t, d, r, c) = v->valuedouble;
        }
  return TS_OK;
}

/* overhead_s[row][col], every entry a finite number >= 0. */
static ts_status read_overhead(const cJSON *j, ts_attn_profile *q) {
  const cJSON *ov = cJSON_GetObjectItemCaseSensitive(j, "overhead_s");
  int ns = q->nsizes;
  if (!ov) return ts_error(TS_ERR_FORMAT, "attn profile: missing key 'overhead_s'");
  if (!cJSON_IsArray(ov) || cJSON_GetArraySize(ov) != ns)
    return ts_error(TS_ERR_FORMAT, "attn profile: overhead_s: expected an array of %d items (one per size)", ns);
  for (int r = 0; r < ns; r++) {
    const cJSON *row = cJSON_GetArrayItem(ov, r);
    if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != ns)
      return ts_error(TS_ERR_FORMAT, "attn profile: overhead_s[%d]: expected an array of %d items (one per size)", r, ns);
    for (int c = 0; c < ns; c++) {
      const cJSON *v = cJSON_GetArrayItem(row, c);
      if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !isfinite(v->valuedouble))
        return ts_error(TS_ERR_FORMAT, "attn profile: overhead_s[%d][%d]: expected a number of seconds >= 0", r, c);
      q->overhead[(size_t)r * ns + c] = v->valuedouble;
    }
  }
  return TS_OK;
}

ts_status ts__attn_profile_from_cjson(const cJSON *j, ts_attn_profile *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "attn profile: NULL profile");
  memset(p, 0, sizeof *p);
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "attn profile: expected a JSON object");
  ts_attn_profile q = {0};
  char fmt[64], dtype[16];
  TS_TRY(get_str(j, "", "format", fmt, sizeof fmt));
  if (strcmp(fmt, FORMAT_NAME)) return ts_error(TS_ERR_FORMAT, "attn profile: key 'format': '%s' is not '%s'", fmt, FORMAT_NAME);
  int64_t v;
  TS_TRY(get_int(j, "version", 1, 1 << 30, &v));
  if (v > TS_ATTN_PROFILE_VERSION)
    return ts_error(TS_ERR_UNSUPPORTED, "attn profile: version %lld is newer than this tessera's %d", (long long)v,
                    TS_ATTN_PROFILE_VERSION);
  q.version = (int)v;
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(j, "provenance");
  if (!cJSON_IsObject(prov)) return ts_error(TS_ERR_FORMAT, "attn profile: key 'provenance': expected an object");
  TS_TRY(ts__provenance_parse(prov, "attn profile", &q.prov));
  if (!q.prov.cpu_model[0] || !q.prov.kernels[0])
    return ts_error(TS_ERR_FORMAT, "attn profile: provenance: 'cpu_model' and 'kernels' must be non-empty strings");
  if (q.prov.threads < 1) return ts_error(TS_ERR_FORMAT, "attn profile: provenance 'threads': %d is not >= 1", q.prov.threads);
  TS_TRY(get_str(j, "", "level", q.level, sizeof q.level));
  ts_attn_profile_level lvl;
  if (ts_attn_profile_level_parse(q.level, &lvl) != TS_OK)
    return ts_error(TS_ERR_FORMAT, "attn profile: key 'level': '%s' is not quick, standard or full", q.level);
  if (cJSON_GetObjectItemCaseSensitive(j, "pass")) { /* absent: a forward profile */
    char pass[16];
    TS_TRY(get_str(j, "", "pass", pass, sizeof pass));
    if (ts_attn_pass_parse(pass, &q.pass) != TS_OK)
      return ts_error(TS_ERR_FORMAT, "attn profile: key 'pass': '%s' is not forward, backward or train", pass);
  }
  TS_TRY(get_int(j, "d", 1, 4096, &q.d));
  TS_TRY(get_str(j, "", "dtype", dtype, sizeof dtype));
  if (ts_dtype_parse(dtype, &q.dtype) != TS_OK || (q.dtype != TS_F32 && q.dtype != TS_BF16))
    return ts_error(TS_ERR_FORMAT, "attn profile: key 'dtype': '%s' is not f32 or bf16", dtype);
  TS_TRY(get_int(j, "warmup", 0, 1 << 20, &v));
  q.warmup = (int)v;
  TS_TRY(get_int(j, "repeats", 1, 1 << 20, &v));
  q.repeats = (int)v;
  TS_TRY(get_int(j, "passes", 1, TS_ATTN_PROFILE_MAX_PASSES, &v));
  q.passes = (int)v;
  TS_TRY(as_format(ts__json_get_number(j, "min_time_s", &q.min_time_s), ""));
  TS_TRY(as_format(ts__json_get_number(j, "measure_s", &q.measure_s), ""));
  if (!q.prov.clock[0]) /* version 1: the clock beside the provenance */
    TS_TRY(get_str(j, "", "clock", q.prov.clock, sizeof q.prov.clock));
  if (strcmp(q.prov.clock, "wall") && strcmp(q.prov.clock, "thread_cpu"))
    return ts_error(TS_ERR_FORMAT, "attn profile: key 'clock': '%s' is not thread_cpu or wall", q.prov.clock);
  TS_TRY(read_grid(j, &q));
  q.seconds = ts_calloc((size_t)q.nmenu * q.ndens * q.nsizes * q.nsizes, sizeof(double));
  q.overhead = ts_calloc((size_t)q.nsizes * q.nsizes, sizeof(double));
  ts_status s = q.seconds && q.overhead ? TS_OK : ts_error(TS_ERR_OOM, "attn profile: cannot allocate the table");
  if (s == TS_OK) s = read_table(j, &q);
  if (s == TS_OK) s = read_overhead(j, &q);
  if (s != TS_OK) {
    ts_attn_profile_free(&q);
    return s;
  }
  *p = q;
  return TS_OK;
}

ts_status ts_attn_profile_to_json(const ts_attn_profile *p, char **json) {
  if (!p || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_attn_profile_to_json: NULL argument");
  return ts__json_out(ts__attn_profile_to_cjson(p), "attn profile", json);
}

static ts_status profile_parse(const cJSON *j, void *p) { return ts__attn_profile_from_cjson(j, p); }

ts_status ts_attn_profile_from_json(const char *json, ts_attn_profile *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "attn profile: NULL profile");
  memset(p, 0, sizeof *p);
  return ts__json_in(json, "attn profile", profile_parse, p);
}

ts_status ts_attn_profile_save(const ts_attn_profile *p, const char *path) {
  if (!p || !path) return ts_error(TS_ERR_INVALID_ARG, "attn profile save: NULL %s", p ? "path" : "profile");
  cJSON *j = ts__attn_profile_to_cjson(p);
  if (!j) return ts_error(TS_ERR_OOM, "attn profile save: cannot build the JSON for '%s'", path);
  ts_status s = ts__json_write_file(path, j);
  cJSON_Delete(j);
  return s;
}

ts_status ts_attn_profile_load(const char *path, ts_attn_profile *p) {
  if (!p || !path) return ts_error(TS_ERR_INVALID_ARG, "attn profile load: NULL %s", p ? "path" : "profile");
  memset(p, 0, sizeof *p);
  cJSON *j;
  TS_TRY(ts__json_read_file(path, &j));
  ts_status s = ts__attn_profile_from_cjson(j, p);
  cJSON_Delete(j);
  if (s != TS_OK) ts_error_prefix("%s: ", path);
  return s;
}
