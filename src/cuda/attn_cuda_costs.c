/* The GPU's measured chunk costs (ts_attn_cuda_costs) as JSON with provenance: to/from cJSON
 * (validating every field), file save and load, their artifact (kind "attn-cuda-costs", key
 * d<D>-<f32|bf16>; the envelope's provenance is the host's). Plain C with no CUDA call, so the
 * JSON fuzz harness links it too; the cache-or-measure lookup is in attn_cuda.c. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "core/artifact_internal.h"
#include "cuda/attn_cuda_internal.h"
#include "io/json_internal.h"
#include "tessera/hwinfo.h"
#include "tessera/attn_cuda.h"

#define FORMAT_NAME "tessera cuda attention costs"
#define FORMAT_VERSION 1

static const char *const class_names[4] = {"16x64", "32x32", "32x64", "64x64"};

const ts__artifact_kind ts__cuda_costs_kind = {"attn-cuda-costs", FORMAT_VERSION};

ts_status ts__cuda_costs_key(int64_t d, bool bf16, char *key, size_t cap) {
  int n = snprintf(key, cap, "d%lld-%s", (long long)d, bf16 ? "bf16" : "f32");
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_INVALID_ARG, "cuda costs key is too long");
  return TS_OK;
}

void ts__cuda_costs_provenance(const ts_attn_cuda_costs *c, ts_provenance *p) {
  ts_provenance_here(p, ts_isa_active(), 0); /* the host; the device is in the payload */
  snprintf(p->date, sizeof p->date, "%s", c->date);
  ts_hwinfo_profile_key_here(0, p->profile);
}

ts_status ts_attn_cuda_costs_path(int64_t d, bool bf16, char *buf, size_t cap) {
  if (!buf || cap == 0) return ts_error(TS_ERR_INVALID_ARG, "cuda costs path: NULL or empty buffer");
  char key[64];
  TS_TRY(ts__cuda_costs_key(d, bf16, key, sizeof key));
  return ts_artifact_path(ts__cuda_costs_kind.name, key, buf, cap);
}

static cJSON *num_array(const double *v) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; a && k < 4; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[k]));
  return a;
}

cJSON *ts__cuda_costs_to_json(const ts_attn_cuda_costs *c) {
  if (!c) return NULL;
  cJSON *j = cJSON_CreateObject(), *names = cJSON_CreateArray();
  if (!j || !names) {
    cJSON_Delete(j), cJSON_Delete(names);
    return NULL;
  }
  for (int k = 0; k < 4; k++) cJSON_AddItemToArray(names, cJSON_CreateString(class_names[k]));
  cJSON_AddStringToObject(j, "format", FORMAT_NAME);
  cJSON_AddNumberToObject(j, "version", FORMAT_VERSION);
  cJSON_AddStringToObject(j, "tessera_version", ts_version());
  cJSON_AddStringToObject(j, "device", c->device);
  cJSON_AddStringToObject(j, "date", c->date);
  cJSON_AddNumberToObject(j, "d", (double)c->d);
  cJSON_AddStringToObject(j, "dtype", c->bf16 ? "bf16" : "f32");
  cJSON_AddBoolToObject(j, "measured", c->measured);
  cJSON_AddItemToObject(j, "classes", names);
  cJSON_AddItemToObject(j, "unit_ns", num_array(c->unit_ns));
  cJSON_AddItemToObject(j, "chunk_ns", num_array(c->chunk_ns));
  return j;
}

ts_status ts_attn_cuda_costs_save(const ts_attn_cuda_costs *c, const char *path) {
  if (!c || !path) return ts_error(TS_ERR_INVALID_ARG, "cuda costs save: NULL argument");
  cJSON *j = ts__cuda_costs_to_json(c);
  if (!j) return ts_error(TS_ERR_OOM, "cuda costs save: out of memory");
  ts_status st = ts__json_write_file(path, j);
  cJSON_Delete(j);
  return st;
}

/* key: an array of exactly 4 finite numbers >= 0. */
static ts_status get_costs(const cJSON *j, const char *path, const char *key, double *out) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!a) return ts_error(TS_ERR_FORMAT, "%s: missing '%s'", path, key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 4)
    return ts_error(TS_ERR_FORMAT, "%s: '%s' must be an array of 4 numbers (one per chunk shape)", path, key);
  for (int k = 0; k < 4; k++) {
    const cJSON *x = cJSON_GetArrayItem(a, k);
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0 || x->valuedouble > 1e9)
      return ts_error(TS_ERR_FORMAT, "%s: '%s'[%d] must be a number of ns in [0, 1e9]", path, key, k);
    out[k] = x->valuedouble;
  }
  return TS_OK;
}

static ts_status parse(const cJSON *j, const char *path, ts_attn_cuda_costs *c) {
  memset(c, 0, sizeof *c);
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "%s: expected a JSON object", path);
  const char *s;
  ts_status st = ts__json_get_string(j, "format", &s);
  if (st != TS_OK || strcmp(s, FORMAT_NAME) != 0)
    return ts_error(TS_ERR_FORMAT, "%s: 'format' must be \"%s\"", path, FORMAT_NAME);
  int64_t v;
  if (ts__json_get_int(j, "version", &v) != TS_OK || v < 1)
    return ts_error(TS_ERR_FORMAT, "%s: 'version' must be a positive integer", path);
  if (v > FORMAT_VERSION)
    return ts_error(TS_ERR_UNSUPPORTED, "%s: version %lld is newer than this tessera reads (%d)", path, (long long)v, FORMAT_VERSION);
  if (ts__json_get_string(j, "device", &s) != TS_OK || strlen(s) >= sizeof c->device)
    return ts_error(TS_ERR_FORMAT, "%s: 'device' must be a string of at most %zu characters", path, sizeof c->device - 1);
  snprintf(c->device, sizeof c->device, "%s", s);
  if (ts__json_get_string(j, "date", &s) != TS_OK || strlen(s) >= sizeof c->date)
    return ts_error(TS_ERR_FORMAT, "%s: 'date' must be a string of at most %zu characters", path, sizeof c->date - 1);
  snprintf(c->date, sizeof c->date, "%s", s);
  if (ts__json_get_int(j, "d", &v) != TS_OK || v < 1 || v > 256)
    return ts_error(TS_ERR_FORMAT, "%s: 'd' must be an integer in [1, 256]", path);
  c->d = v;
  if (ts__json_get_string(j, "dtype", &s) != TS_OK || (strcmp(s, "f32") != 0 && strcmp(s, "bf16") != 0))
    return ts_error(TS_ERR_FORMAT, "%s: 'dtype' must be \"f32\" or \"bf16\"", path);
  c->bf16 = strcmp(s, "bf16") == 0;
  if (ts__json_get_bool(j, "measured", &c->measured) != TS_OK)
    return ts_error(TS_ERR_FORMAT, "%s: 'measured' must be true or false", path);
  const cJSON *names = cJSON_GetObjectItemCaseSensitive(j, "classes");
  if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) != 4)
    return ts_error(TS_ERR_FORMAT, "%s: 'classes' must list the 4 chunk shapes", path);
  for (int k = 0; k < 4; k++) {
    const cJSON *x = cJSON_GetArrayItem(names, k);
    if (!cJSON_IsString(x) || strcmp(x->valuestring, class_names[k]) != 0)
      return ts_error(TS_ERR_FORMAT, "%s: 'classes'[%d] must be \"%s\" (another build's chunk shapes)", path, k, class_names[k]);
  }
  TS_TRY(get_costs(j, path, "unit_ns", c->unit_ns));
  return get_costs(j, path, "chunk_ns", c->chunk_ns);
}

ts_status ts__cuda_costs_from_json(const cJSON *j, const char *name, ts_attn_cuda_costs *c) {
  if (!j || !c) return ts_error(TS_ERR_INVALID_ARG, "cuda costs: NULL argument");
  ts_attn_cuda_costs tmp;
  ts_status st = parse(j, name ? name : "cuda costs", &tmp);
  if (st == TS_OK) *c = tmp;
  return st;
}

ts_status ts_attn_cuda_costs_load(const char *path, ts_attn_cuda_costs *c) {
  if (!path || !c) return ts_error(TS_ERR_INVALID_ARG, "cuda costs load: NULL argument");
  cJSON *j;
  TS_TRY(ts__json_read_file(path, &j));
  ts_attn_cuda_costs tmp;
  memset(&tmp, 0, sizeof tmp);
  ts_status st = parse(j, path, &tmp);
  cJSON_Delete(j);
  if (st == TS_OK) *c = tmp;
  return st;
}
