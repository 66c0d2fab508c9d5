/* Provenance records (where and when something was measured or planned) and the one hash for
 * cache keys (tessera/measure.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/artifact_internal.h"

/* ---- provenance ------------------------------------------------------------------------- */

static void copy(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

void ts_provenance_here(ts_provenance *p, ts_isa isa, int threads) {
  memset(p, 0, sizeof *p);
  copy(p->cpu_model, sizeof p->cpu_model, ts_cpu()->model);
  copy(p->kernels, sizeof p->kernels, ts_isa_name(isa));
  p->threads = threads;
  const time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm)) strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  copy(p->tessera_version, sizeof p->tessera_version, ts_version());
}

static bool differ(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool differ(char *why, size_t cap, const char *fmt, ...) {
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return false;
}

bool ts_provenance_matches(const ts_provenance *made, const ts_provenance *here, unsigned flags, char *why, size_t cap) {
  if (why && cap) why[0] = 0;
  if (!made || !here) return differ(why, cap, "no provenance");
  if (strcmp(made->cpu_model, here->cpu_model))
    return differ(why, cap, "cpu_model '%s' != this machine's '%s'", made->cpu_model, here->cpu_model);
  if (strcmp(made->kernels, here->kernels))
    return differ(why, cap, "kernels %s != active %s", made->kernels, here->kernels);
  if ((flags & TS_PROV_THREADS) && made->threads != here->threads)
    return differ(why, cap, "threads %d != %d", made->threads, here->threads);
  if ((flags & TS_PROV_VERSION) && strcmp(made->tessera_version, here->tessera_version))
    return differ(why, cap, "tessera version %s != %s", made->tessera_version, here->tessera_version);
  if ((flags & TS_PROV_PROFILE) && strcmp(made->profile, here->profile))
    return differ(why, cap, "machine profile '%s' != '%s'", made->profile, here->profile);
  return true;
}

cJSON *ts__provenance_json(const ts_provenance *p) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  const bool ok = cJSON_AddStringToObject(j, "cpu_model", p->cpu_model) && cJSON_AddStringToObject(j, "kernels", p->kernels) &&
                  cJSON_AddNumberToObject(j, "threads", p->threads) && cJSON_AddStringToObject(j, "date", p->date) &&
                  cJSON_AddStringToObject(j, "tessera_version", p->tessera_version) &&
                  cJSON_AddStringToObject(j, "clock", p->clock) && cJSON_AddStringToObject(j, "profile", p->profile);
  if (!ok) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

static ts_status get_str(const cJSON *j, const char *what, const char *name, char *dst, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
  if (!v) return TS_OK;
  if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= cap)
    return ts_error(TS_ERR_FORMAT, "%s: provenance field '%s' is not a string of at most %zu bytes", what, name, cap - 1);
  memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
  return TS_OK;
}

ts_status ts__provenance_parse(const cJSON *j, const char *what, ts_provenance *p) {
  memset(p, 0, sizeof *p);
  if (!what) what = "provenance";
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "%s: provenance is not a JSON object", what);
  TS_TRY(get_str(j, what, "cpu_model", p->cpu_model, sizeof p->cpu_model));
  TS_TRY(get_str(j, what, "kernels", p->kernels, sizeof p->kernels));
  TS_TRY(get_str(j, what, "date", p->date, sizeof p->date));
  TS_TRY(get_str(j, what, "tessera_version", p->tessera_version, sizeof p->tessera_version));
  TS_TRY(get_str(j, what, "clock", p->clock, sizeof p->clock));
  TS_TRY(get_str(j, what, "profile", p->profile, sizeof p->profile));
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "threads");
  if (t) {
    if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble <= 1 << 20) || t->valuedouble != (int)t->valuedouble)
      return ts_error(TS_ERR_FORMAT, "%s: provenance field 'threads' is not an integer in [0, 2^20]", what);
    p->threads = (int)t->valuedouble;
  }
  return TS_OK;
}

ts_status ts_provenance_to_json(const ts_provenance *p, char **json) {
  if (!p || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_provenance_to_json: NULL argument");
  return ts__json_out(ts__provenance_json(p), "ts_provenance_to_json", json);
}

static ts_status prov_parse(const cJSON *j, void *p) { return ts__provenance_parse(j, "provenance", p); }

ts_status ts_provenance_from_json(const char *json, ts_provenance *p) {
  if (!json || !p) return ts_error(TS_ERR_INVALID_ARG, "ts_provenance_from_json: NULL argument");
  return ts__json_in(json, "provenance", prov_parse, p);
}

/* ---- public JSON strings ------------------------------------------------------------------ */

/* numbers whose 15-digit form reads back as another double become raw 17-digit text */
static bool exact_numbers(cJSON *j) {
  for (cJSON *c = j ? j->child : NULL, *next; c; c = next) {
    next = c->next;
    if (cJSON_IsArray(c) || cJSON_IsObject(c)) {
      if (!exact_numbers(c)) return false;
      continue;
    }
    if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble)) continue;
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", c->valuedouble);
    if (strtod(buf, NULL) == c->valuedouble) continue;
    snprintf(buf, sizeof buf, "%.17g", c->valuedouble);
    cJSON *raw = cJSON_CreateRaw(buf);
    if (!raw) return false;
    if (cJSON_IsObject(j) ? !cJSON_ReplaceItemInObjectCaseSensitive(j, c->string, raw) /* keeps the key */
                          : !cJSON_ReplaceItemViaPointer(j, c, raw)) {
      cJSON_Delete(raw);
      return false;
    }
  }
  return true;
}

char *ts__json_print(const cJSON *j, bool formatted) {
  cJSON *d = j ? cJSON_Duplicate(j, 1) : NULL;
  char *text = d && exact_numbers(d) ? (formatted ? cJSON_Print(d) : cJSON_PrintUnformatted(d)) : NULL;
  cJSON_Delete(d);
  return text;
}

ts_status ts__json_to_string(const cJSON *j, const char *what, char **out) {
  *out = NULL;
  char *text = ts__json_print(j, false); /* cJSON's allocator (the hooks, when set) */
  const size_t n = text ? strlen(text) + 1 : 0;
  char *s = text ? malloc(n) : NULL; /* the caller's to free(): plain malloc memory */
  if (s) memcpy(s, text, n);
  cJSON_free(text);
  if (!s) return ts_error(TS_ERR_OOM, "%s: out of memory formatting JSON", what);
  *out = s;
  return TS_OK;
}

ts_status ts__json_out(cJSON *j, const char *what, char **out) {
  const ts_status s = ts__json_to_string(j, what, out);
  cJSON_Delete(j);
  return s;
}

ts_status ts__json_in(const char *json, const char *what, ts_status (*parse)(const cJSON *j, void *obj), void *obj) {
  cJSON *j = NULL;
  TS_TRY(ts__json_from_string(json, what, &j));
  const ts_status s = parse(j, obj);
  cJSON_Delete(j);
  return s;
}

ts_status ts__json_from_string(const char *json, const char *what, cJSON **out) {
  *out = NULL;
  if (!json) return ts_error(TS_ERR_INVALID_ARG, "%s: JSON text is NULL", what);
  const char *end = NULL;
  errno = 0;
  cJSON *j = cJSON_ParseWithOpts(json, &end, 1);
  if (!j && errno == ENOMEM) /* an allocation failed (malloc and the allocator hooks set ENOMEM), not the text */
    return ts_error(TS_ERR_OOM, "%s: out of memory parsing JSON", what);
  if (!j) {
    const size_t len = strlen(json);
    const size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : len;
    return ts_error(TS_ERR_FORMAT, "%s: invalid JSON at byte %zu", what, off);
  }
  *out = j;
  return TS_OK;
}

/* ---- keys ------------------------------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

void ts_hash_init(ts_hash *h, const char *salt) {
  h->h = FNV_OFFSET;
  if (salt) ts_hash_str(h, salt);
}

/* 8x fewer multiplies than byte-wise FNV-1a: the mask of a 4096-token window2d (2.8 MB of CSR)
 * hashes in well under a millisecond. */
void ts_hash_bytes(ts_hash *hs, const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = hs->h;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * FNV_PRIME;
    h ^= h >> 32;
  }
  for (; i < len; i++) h = (h ^ p[i]) * FNV_PRIME;
  hs->h = h;
}

void ts_hash_i64(ts_hash *h, int64_t v) { ts_hash_bytes(h, &v, sizeof v); }
void ts_hash_f64(ts_hash *h, double v) { ts_hash_bytes(h, &v, sizeof v); }
void ts_hash_str(ts_hash *h, const char *s) {
  if (!s) s = "";
  ts_hash_bytes(h, s, strlen(s) + 1); /* the NUL too: ("ab","c") and ("a","bc") differ */
}

void ts_hash_hex(const ts_hash *h, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)h->h); }
