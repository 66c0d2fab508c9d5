/* gconv profile <-> JSON (layout in tessera/gconv.h, format in docs/FORMATS.md): in the artifact
 * store (kind "gconv-profile", key "<level>-<kernels>", provenance in the envelope) or, at any other
 * path, a file with its own "provenance". The reader validates every field and names the bad one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "gconv/gconv_internal.h"
#include "io/json_internal.h"

#define FORMAT_NAME "tessera-gconv-profile"
static const ts__artifact_kind KIND = {TS__GCONV_PROFILE_KIND, TS_GCONV_PROFILE_VERSION};

static cJSON *int_array(const int32_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]))) return cJSON_Delete(a), NULL;
  return a;
}

void ts__gconv_profile_prov(const ts_gconv_profile *p, ts_provenance *pv) {
  memset(pv, 0, sizeof *pv);
  snprintf(pv->cpu_model, sizeof pv->cpu_model, "%s", p->cpu_model);
  snprintf(pv->kernels, sizeof pv->kernels, "%s", p->kernels);
  snprintf(pv->date, sizeof pv->date, "%s", p->date);
  snprintf(pv->tessera_version, sizeof pv->tessera_version, "%s", p->tessera_version);
  snprintf(pv->clock, sizeof pv->clock, "%s", p->clock);
  pv->threads = p->threads;
}

ts_status ts__gconv_profile_to_json(const ts_gconv_profile *p, bool with_prov, cJSON **out) {
  *out = NULL;
  if (!p || !p->seconds) return ts_error(TS_ERR_INVALID_ARG, "gconv profile save: NULL argument");
  ts_provenance pv;
  ts__gconv_profile_prov(p, &pv);
  cJSON *j = cJSON_CreateObject(), *prov = with_prov ? ts__provenance_json(&pv) : NULL;
  bool ok = j && (prov || !with_prov) && cJSON_AddStringToObject(j, "format", FORMAT_NAME) &&
            cJSON_AddNumberToObject(j, "version", p->version);
  if (prov && (!ok || !cJSON_AddItemToObject(j, "provenance", prov))) cJSON_Delete(prov), ok = false;
  ok = ok && cJSON_AddStringToObject(j, "level", p->level) && cJSON_AddStringToObject(j, "clock", p->clock) &&
       cJSON_AddNumberToObject(j, "passes", p->passes) && cJSON_AddNumberToObject(j, "min_time_s", p->min_time_s) &&
       cJSON_AddNumberToObject(j, "measure_s", p->measure_s) && cJSON_AddNumberToObject(j, "tile_columns", TS_GCONV_NR);
  cJSON *rows = ok ? int_array(p->rows, p->nrows) : NULL, *ks = NULL, *sec = NULL;
  ok = ok && rows && cJSON_AddItemToObject(j, "rows", rows);
  ks = ok ? int_array(p->ks, p->nk) : NULL;
  ok = ok && ks && cJSON_AddItemToObject(j, "ks", ks);
  sec = ok ? cJSON_CreateArray() : NULL;
  ok = ok && sec && cJSON_AddItemToObject(j, "seconds", sec);
  for (int r = 0; ok && r < p->nrows; r++) {
    cJSON *ar = cJSON_CreateArray();
    ok = ar && cJSON_AddItemToArray(sec, ar);
    for (int k = 0; ok && k < p->nk; k++) {
      cJSON *v = cJSON_CreateDoubleArray(p->seconds + ((size_t)r * p->nk + k) * 4, 4);
      ok = v && cJSON_AddItemToArray(ar, v);
    }
  }
  if (!ok) return cJSON_Delete(j), ts_error(TS_ERR_OOM, "gconv profile save: out of memory");
  *out = j;
  return TS_OK;
}

/* The store's key of a profile at `level` measured with `kernels`: "<level>-<kernels>". */
static void store_key(const char *level, const char *kernels, char *key, size_t cap) {
  snprintf(key, cap, "%s-%s", level, kernels);
}

/* path names the store's file of that key (or is NULL). */
static bool in_store(const char *path, const char *key) {
  char def[4400];
  if (!path) return true;
  if (ts_artifact_path(KIND.name, key, def, sizeof def) != TS_OK) return ts_error_clear(), false;
  return strcmp(path, def) == 0;
}

ts_status ts_gconv_profile_save(const ts_gconv_profile *p, const char *path) {
  if (!p || !p->seconds || !path) return ts_error(TS_ERR_INVALID_ARG, "gconv profile save: NULL argument");
  char key[64];
  store_key(p->level, p->kernels, key, sizeof key);
  const bool store = in_store(path, key);
  cJSON *j;
  TS_TRY(ts__gconv_profile_to_json(p, !store, &j));
  ts_provenance pv;
  ts__gconv_profile_prov(p, &pv);
  ts_status s = store ? ts__artifact_store(&KIND, key, j, &pv) : ts__json_write_file(path, j);
  cJSON_Delete(j);
  return s;
}

static ts_status fmt(const char *path, const char *field, const char *why) {
  return ts_error(TS_ERR_FORMAT, "%s: gconv profile field '%s': %s", path, field, why);
}

static ts_status get_str(const char *path, const cJSON *o, const char *key, char *dst, size_t cap) {
  const char *v;
  if (ts__json_get_string(o, key, &v) != TS_OK) return fmt(path, key, "missing or not a string");
  if (strlen(v) >= cap) return fmt(path, key, "too long");
  snprintf(dst, cap, "%s", v);
  return TS_OK;
}

/* Ascending positive integers, 1..max entries, each <= hi. */
static ts_status get_grid(const char *path, const cJSON *j, const char *key, int32_t *dst, int *n, int64_t hi) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!cJSON_IsArray(a)) return fmt(path, key, "missing or not an array");
  int len = cJSON_GetArraySize(a);
  if (len < 1 || len > TS_GCONV_PROFILE_MAX) return fmt(path, key, "needs 1 to 32 entries");
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 || e->valuedouble > (double)hi ||
        (i > 0 && e->valuedouble <= dst[i - 1]))
      return fmt(path, key, "entries must be ascending integers in range");
    dst[i++] = (int32_t)e->valuedouble;
  }
  *n = len;
  return TS_OK;
}

ts_status ts__gconv_profile_parse(const cJSON *j, const ts_provenance *env, const char *path, ts_gconv_profile *out) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(j)) return fmt(path, "(top)", "not a JSON object");
  ts_gconv_profile p;
  memset(&p, 0, sizeof p);
  const char *format;
  double v;
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(j, "provenance");
  ts_status s = TS_OK;
  if (ts__json_get_string(j, "format", &format) != TS_OK || strcmp(format, FORMAT_NAME) != 0)
    s = fmt(path, "format", "not " FORMAT_NAME);
  if (s == TS_OK && (ts__json_get_number(j, "version", &v) != TS_OK || !(v >= 1) || v != floor(v)))
    s = fmt(path, "version", "missing or not a positive integer");
  if (s == TS_OK && v > TS_GCONV_PROFILE_VERSION)
    s = ts_error(TS_ERR_UNSUPPORTED, "%s: gconv profile version %g is newer than %d", path, v, TS_GCONV_PROFILE_VERSION);
  if (s == TS_OK) p.version = (int)v;
  ts_provenance pv;
  if (s == TS_OK && !env && !cJSON_IsObject(prov)) s = fmt(path, "provenance", "missing or not an object");
  if (s == TS_OK && !env) s = ts__provenance_parse(prov, path, &pv), env = &pv;
  if (s == TS_OK && (strlen(env->kernels) >= sizeof p.kernels || !env->cpu_model[0] || !env->kernels[0]))
    s = fmt(path, "provenance", "needs cpu_model and kernels (up to 15 characters)");
  if (s == TS_OK) {
    memcpy(p.cpu_model, env->cpu_model, sizeof p.cpu_model);
    memcpy(p.kernels, env->kernels, strlen(env->kernels) + 1); /* length checked above */
    memcpy(p.date, env->date, sizeof p.date);
    memcpy(p.tessera_version, env->tessera_version, sizeof p.tessera_version);
    p.threads = env->threads;
  }
  if (s == TS_OK) s = get_str(path, j, "level", p.level, sizeof p.level);
  if (s == TS_OK) s = get_str(path, j, "clock", p.clock, sizeof p.clock);
  if (s == TS_OK && ts__json_get_number(j, "passes", &v) == TS_OK) {
    if (!(v >= 0 && v <= 1e6) || v != floor(v)) s = fmt(path, "passes", "not an integer in [0, 1e6]");
    else p.passes = (int)v;
  }
  if (s == TS_OK && ts__json_get_number(j, "min_time_s", &v) == TS_OK) p.min_time_s = v;
  if (s == TS_OK && ts__json_get_number(j, "measure_s", &v) == TS_OK) p.measure_s = v;
  if (s == TS_OK) s = get_grid(path, j, "rows", p.rows, &p.nrows, 4096);
  if (s == TS_OK) s = get_grid(path, j, "ks", p.ks, &p.nk, INT32_MAX);
  const cJSON *sec = cJSON_GetObjectItemCaseSensitive(j, "seconds");
  if (s == TS_OK && (!cJSON_IsArray(sec) || cJSON_GetArraySize(sec) != p.nrows))
    s = fmt(path, "seconds", "needs one array per entry of rows");
  if (s == TS_OK && !(p.seconds = ts_calloc((size_t)p.nrows * p.nk * 4, sizeof(double)))) s = TS_ERR_OOM;
  for (int r = 0; s == TS_OK && r < p.nrows; r++) {
    const cJSON *ar = cJSON_GetArrayItem(sec, r);
    if (!cJSON_IsArray(ar) || cJSON_GetArraySize(ar) != p.nk) {
      s = fmt(path, "seconds", "needs one array per entry of ks in every row");
      break;
    }
    for (int k = 0; s == TS_OK && k < p.nk; k++) {
      const cJSON *vv = cJSON_GetArrayItem(ar, k);
      if (!cJSON_IsArray(vv) || cJSON_GetArraySize(vv) != 4) {
        s = fmt(path, "seconds", "needs 4 vector-count entries per (rows, ks)");
        break;
      }
      for (int q = 0; q < 4; q++) {
        const cJSON *e = cJSON_GetArrayItem(vv, q);
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0) || !isfinite(e->valuedouble)) {
          s = fmt(path, "seconds", "entries must be positive finite numbers");
          break;
        }
        p.seconds[((size_t)r * p.nk + k) * 4 + q] = e->valuedouble;
      }
    }
  }
  if (s != TS_OK) {
    ts_gconv_profile_free(&p);
    return s == TS_ERR_OOM ? ts_error(TS_ERR_OOM, "%s: out of memory", path) : s;
  }
  *out = p;
  return TS_OK;
}

ts_status ts__gconv_profile_from_json(const cJSON *j, const char *path, ts_gconv_profile *out) {
  return ts__gconv_profile_parse(j, NULL, path, out);
}

static ts_status load_key(const char *key, ts_gconv_profile *out) {
  memset(out, 0, sizeof *out);
  cJSON *j;
  ts_provenance pv;
  TS_TRY(ts__artifact_load(&KIND, key, &j, &pv));
  ts_status s = ts__gconv_profile_parse(j, &pv, "stored gconv profile", out);
  cJSON_Delete(j);
  if (s != TS_OK && s != TS_ERR_OOM && s != TS_ERR_UNSUPPORTED) { /* unreadable: moved aside, made again */
    ts__artifact_reject(&KIND, key, ts_last_error());
    s = ts_error(TS_ERR_NOT_FOUND, "no usable gconv profile '%s'", key);
  }
  return s;
}

ts_status ts_gconv_profile_load(const char *path, ts_gconv_profile *out) {
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv profile load: NULL argument");
  memset(out, 0, sizeof *out);
  const char *base = strrchr(path, '/'), *dot = base ? strrchr(base, '.') : NULL;
  char key[72];
  if (base && dot && dot - base - 1 < (int)sizeof key && !strcmp(dot, ".json")) {
    snprintf(key, sizeof key, "%.*s", (int)(dot - base - 1), base + 1);
    if (in_store(path, key)) return load_key(key, out);
  }
  FILE *f = fopen(path, "rb");
  if (!f) return ts_error(TS_ERR_NOT_FOUND, "%s: no gconv profile there", path);
  fclose(f);
  cJSON *j;
  TS_TRY(ts__json_read_file(path, &j));
  ts_status s = ts__gconv_profile_from_json(j, path, out);
  cJSON_Delete(j);
  return s;
}
