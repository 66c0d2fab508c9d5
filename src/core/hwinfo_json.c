/* Machine profile <-> JSON, and the profile in the artifact store (kind "machine", key "t<threads>":
 * <cache>/machine/t<N>.json). Readers validate every field and name the bad one; ts_hwinfo_get
 * serves a stored profile that still describes this machine and measures otherwise. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/artifact_internal.h"
#include "tessera/hwinfo.h"

#define FORMAT_NAME "tessera machine profile"

/* The profile's kind: its format version is the profile's (a profile of another version is
 * re-measured, never misread). */
static const ts__artifact_kind k_machine = {"machine", TS_HWINFO_VERSION};

static int resolve_threads(int threads) { return threads > 0 ? threads : ts_default_threads(); }

static void profile_key(int threads, char key[24]) { snprintf(key, 24, "t%d", resolve_threads(threads)); }

ts_status ts_hwinfo_path_threads(int threads, char *buf, size_t cap) {
  char key[24];
  profile_key(threads, key);
  return ts_artifact_path(k_machine.name, key, buf, cap);
}

ts_status ts_hwinfo_default_path(char *buf, size_t cap) { return ts_hwinfo_path_threads(0, buf, cap); }

/* The profile's provenance as the store records it: what it was measured on and with. */
static void profile_provenance(const ts_machine_profile *p, ts_provenance *pv) {
  memset(pv, 0, sizeof *pv);
  snprintf(pv->cpu_model, sizeof pv->cpu_model, "%s", p->cpu_model);
  snprintf(pv->kernels, sizeof pv->kernels, "%s", p->kernels);
  pv->threads = p->threads;
  snprintf(pv->date, sizeof pv->date, "%s", p->date);
  snprintf(pv->tessera_version, sizeof pv->tessera_version, "%s", ts_version());
  snprintf(pv->clock, sizeof pv->clock, "%s", ts_clock_name(TS_CLOCK_WALL));
  char key[17];
  if (ts_hwinfo_profile_key(p, key) == TS_OK) memcpy(pv->profile, key, sizeof key);
}

bool ts_hwinfo_matches(const ts_machine_profile *p, int threads) {
  if (!p || p->version != TS_HWINFO_VERSION) return false;
  ts_provenance made, here;
  profile_provenance(p, &made);
  ts_provenance_here(&here, ts_isa_active(), resolve_threads(threads));
  return ts_provenance_matches(&made, &here, TS_PROV_THREADS, NULL, 0);
}

void ts_hwinfo_profile_key_here(int threads, char key[17]) {
  char path[4400];
  ts_machine_profile mp;
  key[0] = 0;
  if (ts_hwinfo_path_threads(threads > 0 ? threads : ts_default_threads(), path, sizeof path) != TS_OK ||
      ts_hwinfo_load(path, &mp) != TS_OK || !ts_hwinfo_matches(&mp, threads) || ts_hwinfo_profile_key(&mp, key) != TS_OK)
    key[0] = 0;
  ts_error_clear();
}

ts_status ts_hwinfo_profile_key(const ts_machine_profile *p, char key[17]) {
  if (!p || !key) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_profile_key: NULL argument");
  ts_hash h;
  ts_hash_init(&h, "machine-profile-v1");
  const char *strs[] = {p->cpu_model, p->vendor, p->isa, p->kernels, p->peak_isa, p->date, p->host};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) ts_hash_str(&h, strs[i]);
  const int64_t ints[] = {p->version, p->threads, p->l1d_bytes, p->l2_bytes, p->l3_bytes};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) ts_hash_i64(&h, ints[i]);
  const double figs[] = {p->peak_gflops_fp32_1t, p->peak_gflops_fp32, p->bandwidth_gbs_1t, p->bandwidth_gbs};
  for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) { /* 12 digits: a JSON round trip may move the last bit */
    char f[40];
    snprintf(f, sizeof f, "%.12g", figs[i]);
    ts_hash_str(&h, f);
  }
  ts_hash_hex(&h, key);
  return TS_OK;
}

cJSON *ts__hwinfo_to_cjson(const ts_machine_profile *p) {
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
  bool ok = true; /* an allocation failing anywhere gives NULL, never a profile missing a name or field */
  for (char *tok = strtok_r(buf, " ", &save); ok && tok; tok = strtok_r(NULL, " ", &save)) {
    cJSON *name = cJSON_CreateString(tok);
    ok = name && cJSON_AddItemToArray(isa, name);
  }
  ok = ok && cJSON_AddStringToObject(j, "format", FORMAT_NAME) && cJSON_AddNumberToObject(j, "version", p->version) &&
       cJSON_AddStringToObject(j, "tessera_version", ts_version()) &&
       cJSON_AddStringToObject(j, "cpu_model", p->cpu_model) && cJSON_AddStringToObject(j, "vendor", p->vendor);
  if (ok && !cJSON_AddItemToObject(j, "isa", isa)) ok = false; /* not attached: still ours to delete */
  else if (ok) isa = NULL;
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
    cJSON_Delete(isa);
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

ts_status ts__hwinfo_from_cjson(const cJSON *j, ts_machine_profile *p) {
  if (!j || !p) return ts_error(TS_ERR_INVALID_ARG, "ts__hwinfo_from_cjson: NULL argument");
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

/* ---- files ------------------------------------------------------------------------------ */

/* The store's envelope around p (as ts__artifact_store writes it) or the bare profile. */
static bool is_store_path(const ts_machine_profile *p, const char *path, char key[24]) {
  profile_key(p->threads, key);
  char store[4400];
  if (!path) return true;
  if (ts_artifact_path(k_machine.name, key, store, sizeof store) != TS_OK) {
    ts_error_clear();
    return false;
  }
  return strcmp(path, store) == 0;
}

ts_status ts_hwinfo_to_json(const ts_machine_profile *p, char **json) {
  if (!p || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_to_json: NULL argument");
  return ts__json_out(ts__hwinfo_to_cjson(p), "machine profile", json);
}

static ts_status profile_parse(const cJSON *j, void *p) { return ts__hwinfo_from_cjson(j, p); }

ts_status ts_hwinfo_from_json(const char *json, ts_machine_profile *p) {
  if (!json || !p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_from_json: NULL argument");
  return ts__json_in(json, "machine profile", profile_parse, p);
}

ts_status ts_hwinfo_save(const ts_machine_profile *p, const char *path) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_save: profile is NULL");
  cJSON *j = ts__hwinfo_to_cjson(p);
  if (!j) return ts_error(TS_ERR_OOM, "out of memory serializing the machine profile");
  char key[24];
  ts_status s;
  if (is_store_path(p, path, key)) { /* the store: an artifact envelope, atomic, size-bounded */
    ts_provenance pv;
    profile_provenance(p, &pv);
    s = ts__artifact_store(&k_machine, key, j, &pv);
    cJSON_Delete(j);
    return s;
  }
  char *text = ts__json_print(j, true);
  cJSON_Delete(j);
  if (!text) return ts_error(TS_ERR_OOM, "out of memory serializing the machine profile");
  size_t len = strlen(text);
  text[len] = '\n'; /* replaces the NUL: the file ends with a newline */
  s = ts_write_file_atomic(path, text, len + 1);
  cJSON_free(text); /* cJSON's allocator (the hooks, when set) */
  return s;
}

/* The profile object of j: j itself, or the payload of a "machine" artifact envelope. */
static ts_status unwrap(const cJSON *j, const cJSON **prof) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "artifact");
  *prof = j;
  if (!a) return TS_OK;
  if (!cJSON_IsString(a) || strcmp(a->valuestring, k_machine.name) != 0)
    return ts_error(TS_ERR_FORMAT, "machine profile: an artifact of another kind (expected \"%s\")", k_machine.name);
  *prof = cJSON_GetObjectItemCaseSensitive(j, "data");
  if (!*prof) return ts_error(TS_ERR_FORMAT, "machine profile: the artifact has no \"data\"");
  return TS_OK;
}

ts_status ts_hwinfo_load(const char *path, ts_machine_profile *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_load: profile is NULL");
  char def[4400];
  if (!path) {
    TS_TRY(ts_hwinfo_default_path(def, sizeof def));
    path = def;
  }
  char *data;
  size_t len;
  TS_TRY(ts_read_file(path, &data, &len));
  const char *end = NULL;
  errno = 0;
  cJSON *j = cJSON_ParseWithLengthOpts(data, len, &end, false);
  if (!j && errno == ENOMEM) { /* an allocation failed (malloc and the allocator hooks set ENOMEM), not the text */
    free(data);
    return ts_error(TS_ERR_OOM, "out of memory reading the machine profile '%s'", path);
  }
  if (!j) {
    size_t at = end && end >= data && end <= data + len ? (size_t)(end - data) : 0;
    free(data);
    return ts_error(TS_ERR_FORMAT, "'%s' is not valid JSON (near byte %zu)", path, at);
  }
  free(data);
  const cJSON *prof;
  ts_status s = unwrap(j, &prof);
  if (s == TS_OK) s = ts__hwinfo_from_cjson(prof, p);
  cJSON_Delete(j);
  if (s != TS_OK) ts_error_prefix("'%s': ", path);
  return s;
}

/* ---- ts_hwinfo_get: the store's get() ----------------------------------------------------- */

typedef struct get_ctx {
  const ts_context *ctx;
  ts_machine_profile *out;
  ts_machine_profile stale; /* a matching profile measured busy, merged into the new one */
  bool have_stale;
} get_ctx;

static ts_status get_accept(void *arg, const cJSON *data, const ts_provenance *prov) {
  (void)prov; /* the profile carries its own provenance fields, checked by ts_hwinfo_matches */
  get_ctx *g = arg;
  ts_machine_profile p;
  TS_TRY(ts__hwinfo_from_cjson(data, &p));
  const int threads = ts_context_threads(g->ctx);
  if (p.threads != threads) return ts_error(TS_ERR_FORMAT, "a profile for %d threads under key t%d", p.threads, threads);
  if (!ts_hwinfo_matches(&p, threads)) return ts_error(TS_ERR_NOT_FOUND, "measured on another machine or level");
  const int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  const double now = ts_hwinfo_load_now();
  if (!ts_hwinfo_should_refresh(&p, now, cpus)) {
    *g->out = p;
    return TS_OK;
  }
  if (!getenv("TESSERA_QUIET") || strcmp(getenv("TESSERA_QUIET"), "1") != 0)
    fprintf(stderr, "tessera: the machine profile was measured at load average %.1f on %d CPUs; re-measuring now "
            "that the load is %.1f\n", p.load_avg, p.cpus_online, now);
  g->stale = p, g->have_stale = true;
  return ts_error(TS_ERR_NOT_FOUND, "measured on a busy machine");
}

static ts_status get_compute(void *arg, cJSON **data, ts_provenance *prov) {
  get_ctx *g = arg;
  ts_machine_profile p;
  TS_TRY(ts_hwinfo_measure(g->ctx, &p));
  if (g->have_stale) ts_hwinfo_merge_max(&p, &g->stale);
  *g->out = p;
  *data = ts__hwinfo_to_cjson(&p);
  if (!*data) return ts_error(TS_ERR_OOM, "out of memory serializing the machine profile");
  profile_provenance(&p, prov);
  return TS_OK;
}

static ts_status get_check(void *arg, const cJSON *data) {
  (void)arg;
  ts_machine_profile p;
  return ts__hwinfo_from_cjson(data, &p);
}

ts_status ts_hwinfo_get(const ts_context *ctx, ts_machine_profile *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_get: profile is NULL");
  const ts__artifact_ops ops = {k_machine, get_accept, get_compute, get_check};
  get_ctx g = {.ctx = ctx, .out = p};
  char key[24];
  profile_key(ts_context_threads(ctx), key);
  return ts__artifact_get(&ops, key, &g, NULL);
}
