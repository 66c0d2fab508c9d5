/* Machine profile <-> JSON, and machine.json in the cache directory. Readers validate every field
 * and name the bad one; writers go through ts_write_file_atomic. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/hwinfo.h"

#define FORMAT_NAME "tessera machine profile"

ts_status ts_hwinfo_default_path(char *buf, size_t cap) {
  char dir[4096];
  TS_TRY(ts_cache_dir(dir, sizeof dir));
  int n = snprintf(buf, cap, "%s/machine.json", dir);
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_INVALID_ARG, "machine profile path is too long");
  return TS_OK;
}

ts_status ts_hwinfo_path_threads(int threads, char *buf, size_t cap) {
  if (threads <= 0 || threads == ts_default_threads()) return ts_hwinfo_default_path(buf, cap);
  char dir[4096];
  TS_TRY(ts_cache_dir(dir, sizeof dir));
  int n = snprintf(buf, cap, "%s/machine_t%d.json", dir, threads);
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_INVALID_ARG, "machine profile path is too long");
  return TS_OK;
}

cJSON *ts_hwinfo_to_json(const ts_machine_profile *p) {
  if (!p) return NULL;
  cJSON *j = cJSON_CreateObject(), *isa = cJSON_CreateArray();
  if (!j || !isa) {
    cJSON_Delete(j);
    cJSON_Delete(isa);
    return NULL;
  }
  /* "isa" is stored space-separated in the struct and as an array of names in JSON */
  char buf[sizeof p->isa];
  snprintf(buf, sizeof buf, "%s", p->isa);
  char *save = NULL;
  for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
    cJSON_AddItemToArray(isa, cJSON_CreateString(tok));
  bool ok = cJSON_AddStringToObject(j, "format", FORMAT_NAME) && cJSON_AddNumberToObject(j, "version", p->version) &&
            cJSON_AddStringToObject(j, "tessera_version", ts_version()) &&
            cJSON_AddStringToObject(j, "cpu_model", p->cpu_model) && cJSON_AddStringToObject(j, "vendor", p->vendor);
  cJSON_AddItemToObject(j, "isa", isa);
  ok = ok && cJSON_AddStringToObject(j, "kernels", p->kernels) && cJSON_AddStringToObject(j, "peak_isa", p->peak_isa) &&
       cJSON_AddNumberToObject(j, "threads", p->threads) &&
       cJSON_AddNumberToObject(j, "peak_gflops_fp32_1t", p->peak_gflops_fp32_1t) &&
       cJSON_AddNumberToObject(j, "peak_gflops_fp32", p->peak_gflops_fp32) &&
       cJSON_AddNumberToObject(j, "bandwidth_gbs_1t", p->bandwidth_gbs_1t) &&
       cJSON_AddNumberToObject(j, "bandwidth_gbs", p->bandwidth_gbs) &&
       cJSON_AddNumberToObject(j, "l1d_bytes", (double)p->l1d_bytes) &&
       cJSON_AddNumberToObject(j, "l2_bytes", (double)p->l2_bytes) &&
       cJSON_AddNumberToObject(j, "l3_bytes", (double)p->l3_bytes) && cJSON_AddStringToObject(j, "date", p->date) &&
       cJSON_AddStringToObject(j, "host", p->host) && cJSON_AddNumberToObject(j, "load_avg", p->load_avg) &&
       cJSON_AddNumberToObject(j, "cpus_online", p->cpus_online) &&
       (p->xfer_ns <= 0 || cJSON_AddNumberToObject(j, "xfer_ns", p->xfer_ns)) &&
       (p->other_cpus < 0 || cJSON_AddNumberToObject(j, "other_cpus", p->other_cpus));
  if (!ok) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

/* ---- reading ------------------------------------------------------------------------------ */

static ts_status get_str(const cJSON *j, const char *key, bool required, char *dst, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!v) {
    if (!required) return TS_OK;
    return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' is missing", key);
  }
  if (!cJSON_IsString(v) || !v->valuestring)
    return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' must be a string", key);
  if (strlen(v->valuestring) >= cap)
    return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' is longer than %zu characters", key, cap - 1);
  if (required && !v->valuestring[0]) return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' is empty", key);
  memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
  return TS_OK;
}

/* A finite number in [lo, hi]; integral when `integer`. */
static ts_status get_num(const cJSON *j, const char *key, double lo, double hi, bool integer, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!v) return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' is missing", key);
  if (!cJSON_IsNumber(v)) return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' must be a number", key);
  double x = v->valuedouble;
  if (!isfinite(x) || x < lo || x > hi || (integer && x != floor(x)))
    return ts_error(TS_ERR_FORMAT, "machine profile: field '%s' = %g is not %s in [%g, %g]", key, x,
                    integer ? "an integer" : "a number", lo, hi);
  *out = x;
  return TS_OK;
}

static ts_status get_isa(const cJSON *j, char *dst, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "isa");
  if (!v) return ts_error(TS_ERR_FORMAT, "machine profile: field 'isa' is missing");
  if (!cJSON_IsArray(v)) return ts_error(TS_ERR_FORMAT, "machine profile: field 'isa' must be an array of names");
  size_t used = 0;
  dst[0] = 0;
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    if (!cJSON_IsString(e) || !e->valuestring || !e->valuestring[0] || strchr(e->valuestring, ' '))
      return ts_error(TS_ERR_FORMAT, "machine profile: field 'isa' element %d is not an extension name", i);
    int w = snprintf(dst + used, cap - used, "%s%s", used ? " " : "", e->valuestring);
    if (w < 0 || (size_t)w >= cap - used)
      return ts_error(TS_ERR_FORMAT, "machine profile: field 'isa' is longer than %zu characters", cap - 1);
    used += (size_t)w;
  }
  return TS_OK;
}

ts_status ts_hwinfo_from_json(const cJSON *j, ts_machine_profile *p) {
  if (!j || !p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_from_json: NULL argument");
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "machine profile: top level must be a JSON object");
  ts_machine_profile q;
  memset(&q, 0, sizeof q);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
  if (fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT_NAME) != 0))
    return ts_error(TS_ERR_FORMAT, "machine profile: field 'format' must be \"%s\"", FORMAT_NAME);
  double d;
  TS_TRY(get_num(j, "version", 1, 1e6, true, &d));
  if (d > TS_HWINFO_VERSION)
    return ts_error(TS_ERR_UNSUPPORTED, "machine profile: field 'version' = %g is newer than this tessera reads (%d)", d,
                    TS_HWINFO_VERSION);
  q.version = (int)d;
  TS_TRY(get_str(j, "cpu_model", true, q.cpu_model, sizeof q.cpu_model));
  TS_TRY(get_str(j, "vendor", false, q.vendor, sizeof q.vendor));
  TS_TRY(get_isa(j, q.isa, sizeof q.isa));
  TS_TRY(get_str(j, "kernels", true, q.kernels, sizeof q.kernels));
  TS_TRY(get_str(j, "peak_isa", false, q.peak_isa, sizeof q.peak_isa));
  TS_TRY(get_num(j, "threads", 1, 4096, true, &d));
  q.threads = (int)d;
  /* rates: positive and below anything a CPU can do (1e9 GFLOP/s, 1e7 GB/s) */
  TS_TRY(get_num(j, "peak_gflops_fp32_1t", 1e-9, 1e9, false, &q.peak_gflops_fp32_1t));
  TS_TRY(get_num(j, "peak_gflops_fp32", 1e-9, 1e9, false, &q.peak_gflops_fp32));
  TS_TRY(get_num(j, "bandwidth_gbs_1t", 1e-9, 1e7, false, &q.bandwidth_gbs_1t));
  TS_TRY(get_num(j, "bandwidth_gbs", 1e-9, 1e7, false, &q.bandwidth_gbs));
  const char *sizes[3] = {"l1d_bytes", "l2_bytes", "l3_bytes"};
  int64_t *dst[3] = {&q.l1d_bytes, &q.l2_bytes, &q.l3_bytes};
  for (int i = 0; i < 3; i++) {
    TS_TRY(get_num(j, sizes[i], 0, 0x1p50, true, &d));
    *dst[i] = (int64_t)d;
  }
  TS_TRY(get_str(j, "date", true, q.date, sizeof q.date));
  TS_TRY(get_str(j, "host", false, q.host, sizeof q.host));
  /* provenance of the measurement's conditions; absent in older files (unknown = never refreshed) */
  q.load_avg = -1;
  if (cJSON_GetObjectItemCaseSensitive(j, "load_avg")) TS_TRY(get_num(j, "load_avg", -1, 1e6, false, &q.load_avg));
  if (cJSON_GetObjectItemCaseSensitive(j, "cpus_online")) {
    TS_TRY(get_num(j, "cpus_online", 0, 1e6, true, &d));
    q.cpus_online = (int)d;
  }
  q.xfer_ns = 0; /* absent before 2026-12-04 and for one thread */
  if (cJSON_GetObjectItemCaseSensitive(j, "xfer_ns")) TS_TRY(get_num(j, "xfer_ns", 0, 1e9, false, &q.xfer_ns));
  q.other_cpus = -1; /* absent before 2026-12-05 */
  if (cJSON_GetObjectItemCaseSensitive(j, "other_cpus")) TS_TRY(get_num(j, "other_cpus", 0, 1e6, false, &q.other_cpus));
  *p = q;
  return TS_OK;
}

/* ---- files -------------------------------------------------------------------------------- */

ts_status ts_hwinfo_save(const ts_machine_profile *p, const char *path) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_save: profile is NULL");
  char def[4200];
  if (!path) {
    TS_TRY(ts_hwinfo_default_path(def, sizeof def));
    path = def;
  }
  cJSON *j = ts_hwinfo_to_json(p);
  char *text = j ? cJSON_Print(j) : NULL;
  cJSON_Delete(j);
  if (!text) return ts_error(TS_ERR_OOM, "out of memory serializing the machine profile");
  size_t len = strlen(text);
  text[len] = '\n'; /* replaces the NUL: the file ends with a newline */
  ts_status s = ts_write_file_atomic(path, text, len + 1);
  free(text);
  return s;
}

ts_status ts_hwinfo_load(const char *path, ts_machine_profile *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_load: profile is NULL");
  char def[4200];
  if (!path) {
    TS_TRY(ts_hwinfo_default_path(def, sizeof def));
    path = def;
  }
  char *data;
  size_t len;
  TS_TRY(ts_read_file(path, &data, &len));
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(data, len, &end, false);
  if (!j) {
    size_t at = end && end >= data && end <= data + len ? (size_t)(end - data) : 0;
    free(data);
    return ts_error(TS_ERR_FORMAT, "'%s' is not valid JSON (near byte %zu)", path, at);
  }
  free(data);
  ts_status s = ts_hwinfo_from_json(j, p);
  cJSON_Delete(j);
  if (s != TS_OK) ts_error_prefix("'%s': ", path);
  return s;
}
