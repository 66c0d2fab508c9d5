/* gconv profile <-> JSON file (layout in tessera/gconv.h, format in docs/FORMATS.md). The reader
 * validates every field and names the bad one. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gconv/gconv_internal.h"
#include "tessera/io.h"

#define FORMAT_NAME "tessera-gconv-profile"

static cJSON *int_array(const int32_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]))) return cJSON_Delete(a), NULL;
  return a;
}

ts_status ts_gconv_profile_save(const ts_gconv_profile *p, const char *path) {
  if (!p || !p->seconds || !path) return ts_error(TS_ERR_INVALID_ARG, "gconv profile save: NULL argument");
  cJSON *j = cJSON_CreateObject(), *prov = cJSON_CreateObject();
  bool ok = j && prov && cJSON_AddStringToObject(j, "format", FORMAT_NAME) &&
            cJSON_AddNumberToObject(j, "version", p->version) && cJSON_AddItemToObject(j, "provenance", prov);
  if (!ok) cJSON_Delete(prov);
  ok = ok && cJSON_AddStringToObject(prov, "cpu_model", p->cpu_model) &&
       cJSON_AddStringToObject(prov, "kernels", p->kernels) && cJSON_AddNumberToObject(prov, "threads", p->threads) &&
       cJSON_AddStringToObject(prov, "date", p->date) &&
       cJSON_AddStringToObject(prov, "tessera_version", p->tessera_version) &&
       cJSON_AddStringToObject(j, "level", p->level) && cJSON_AddStringToObject(j, "clock", p->clock) &&
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
  ts_status s = ok ? ts_json_write_file(path, j) : ts_error(TS_ERR_OOM, "gconv profile save: out of memory");
  cJSON_Delete(j);
  return s;
}

static ts_status fmt(const char *path, const char *field, const char *why) {
  return ts_error(TS_ERR_FORMAT, "%s: gconv profile field '%s': %s", path, field, why);
}

static ts_status get_str(const char *path, const cJSON *o, const char *key, char *dst, size_t cap) {
  const char *v;
  if (ts_json_get_string(o, key, &v) != TS_OK) return fmt(path, key, "missing or not a string");
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

ts_status ts__gconv_profile_from_json(const cJSON *j, const char *path, ts_gconv_profile *out) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(j)) return fmt(path, "(top)", "not a JSON object");
  ts_gconv_profile p;
  memset(&p, 0, sizeof p);
  const char *format;
  double v;
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(j, "provenance");
  ts_status s = TS_OK;
  if (ts_json_get_string(j, "format", &format) != TS_OK || strcmp(format, FORMAT_NAME) != 0)
    s = fmt(path, "format", "not " FORMAT_NAME);
  if (s == TS_OK && (ts_json_get_number(j, "version", &v) != TS_OK || !(v >= 1) || v != floor(v)))
    s = fmt(path, "version", "missing or not a positive integer");
  if (s == TS_OK && v > TS_GCONV_PROFILE_VERSION)
    s = ts_error(TS_ERR_UNSUPPORTED, "%s: gconv profile version %g is newer than %d", path, v, TS_GCONV_PROFILE_VERSION);
  if (s == TS_OK) p.version = (int)v;
  if (s == TS_OK && !cJSON_IsObject(prov)) s = fmt(path, "provenance", "missing or not an object");
  if (s == TS_OK) s = get_str(path, prov, "cpu_model", p.cpu_model, sizeof p.cpu_model);
  if (s == TS_OK) s = get_str(path, prov, "kernels", p.kernels, sizeof p.kernels);
  if (s == TS_OK) s = get_str(path, prov, "date", p.date, sizeof p.date);
  if (s == TS_OK) s = get_str(path, prov, "tessera_version", p.tessera_version, sizeof p.tessera_version);
  if (s == TS_OK) s = get_str(path, j, "level", p.level, sizeof p.level);
  if (s == TS_OK) s = get_str(path, j, "clock", p.clock, sizeof p.clock);
  if (s == TS_OK && ts_json_get_number(prov, "threads", &v) == TS_OK) {
    if (!(v >= 0 && v <= 65536) || v != floor(v)) s = fmt(path, "provenance.threads", "not an integer in [0, 65536]");
    else p.threads = (int)v;
  }
  if (s == TS_OK && ts_json_get_number(j, "passes", &v) == TS_OK) {
    if (!(v >= 0 && v <= 1e6) || v != floor(v)) s = fmt(path, "passes", "not an integer in [0, 1e6]");
    else p.passes = (int)v;
  }
  if (s == TS_OK && ts_json_get_number(j, "min_time_s", &v) == TS_OK) p.min_time_s = v;
  if (s == TS_OK && ts_json_get_number(j, "measure_s", &v) == TS_OK) p.measure_s = v;
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

ts_status ts_gconv_profile_load(const char *path, ts_gconv_profile *out) {
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv profile load: NULL argument");
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return ts_error(TS_ERR_NOT_FOUND, "%s: no gconv profile there", path);
  fclose(f);
  cJSON *j;
  TS_TRY(ts_json_read_file(path, &j));
  ts_status s = ts__gconv_profile_from_json(j, path, out);
  cJSON_Delete(j);
  return s;
}
