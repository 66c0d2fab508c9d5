/* The per-layer selection table (conv.h): measured per-algorithm times keyed by the layer
 * descriptor, kept in the artifact store, and the choice of the fastest algorithm.
 *
 * Artifact "conv-profile", key "<kernels>-t<threads>" (<cache>/conv-profile/<key>.json, provenance
 * in the envelope: cpu model, kernels, threads, date, version); its data:
 *   {"format": "tessera-conv-profile", "onednn": "3.1.1",
 *    "entries": {"<key>": {"date", "load_avg", "ms": {"<algorithm>": median ms, ...},
 *                          "pruned": ["<algorithm>", ...]}, ...}}
 * A profile opened at an explicit path is that object with "version" and "provenance" added.
 * Only measured algorithms appear under "ms"; a pruned one's time is its fastest warm-up call. */
#include <cjson/cJSON.h>
#include <dnnl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "core/artifact_internal.h"
#include "io/json_internal.h"

#define FORMAT_NAME "tessera-conv-profile"
enum { KEY_CAP = 96 };
static const ts__artifact_kind KIND = {"conv-profile", TS_CONV_PROFILE_VERSION};

typedef struct prof_item {
  char key[KEY_CAP];
  ts_conv_profile_entry e;
} prof_item;

struct ts_conv_profile {
  char path[4400];
  char key[40];  /* the artifact's key; "" for a profile at an explicit path */
  ts_provenance here;
  prof_item *items;
  int n, cap;
};

void ts_conv_desc_key(const ts_conv_desc *d, char *buf, size_t cap) {
  snprintf(buf, cap, "n%d-c%d-h%d-w%d-k%d-r%d-s%d-st%dx%d-p%d.%d.%d.%d-d%dx%d-g%d", d->n, d->c, d->h, d->w, d->k, d->r,
           d->s, d->stride_h, d->stride_w, d->pad_top, d->pad_bottom, d->pad_left, d->pad_right, d->dilation_h,
           d->dilation_w, d->groups);
}

/* A new slot at the end (NULL on OOM). */
static prof_item *append(ts_conv_profile *p) {
  if (p->n == p->cap) {
    const int cap = p->cap ? 2 * p->cap : 64;
    prof_item *ni = realloc(p->items, (size_t)cap * sizeof *ni);
    if (!ni) return NULL;
    p->items = ni, p->cap = cap;
  }
  return &p->items[p->n++];
}

static ts_status fmt_err(const char *path, const char *what) {
  return ts_error(TS_ERR_FORMAT, "%s: conv profile: %s", path, what);
}

/* Reads one entry object into e (every algorithm name known, every time a positive number). */
static ts_status read_entry(const char *path, const char *key, const cJSON *j, ts_conv_profile_entry *e) {
  char what[256];
  for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) e->ms[a] = NAN, e->pruned[a] = false;
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "ms"), *date = cJSON_GetObjectItemCaseSensitive(j, "date");
  const cJSON *load = cJSON_GetObjectItemCaseSensitive(j, "load_avg"), *pr = cJSON_GetObjectItemCaseSensitive(j, "pruned");
  if (!cJSON_IsObject(j) || !cJSON_IsObject(ms) || !cJSON_IsString(date) || !cJSON_IsNumber(load) ||
      (pr && !cJSON_IsArray(pr))) {
    snprintf(what, sizeof what, "entry '%s': expected {\"date\": string, \"load_avg\": number, \"ms\": {...}}", key);
    return fmt_err(path, what);
  }
  snprintf(e->date, sizeof e->date, "%s", date->valuestring);
  e->load_avg = load->valuedouble;
  const cJSON *it;
  cJSON_ArrayForEach(it, ms) {
    ts_conv_algo a;
    if (ts_conv_algo_parse(it->string, &a) != TS_OK || !strcmp(it->string, "winograd")) {
      snprintf(what, sizeof what, "entry '%s': unknown algorithm '%s'", key, it->string);
      return fmt_err(path, what);
    }
    if (!cJSON_IsNumber(it) || !(it->valuedouble > 0) || !isfinite(it->valuedouble)) {
      snprintf(what, sizeof what, "entry '%s': ms.%s: expected a positive number", key, it->string);
      return fmt_err(path, what);
    }
    e->ms[a] = it->valuedouble;
  }
  cJSON_ArrayForEach(it, pr) {
    ts_conv_algo a;
    if (!cJSON_IsString(it) || ts_conv_algo_parse(it->valuestring, &a) != TS_OK) {
      snprintf(what, sizeof what, "entry '%s': pruned: expected algorithm names", key);
      return fmt_err(path, what);
    }
    e->pruned[a] = true;
  }
  return TS_OK;
}

/* The entries of an artifact's data (prov: the envelope's) or of a file at an explicit path (its
 * own "version" and "provenance"); measured elsewhere: left empty, *stale set. */
static ts_status from_json(ts_conv_profile *p, const cJSON *j, const ts_provenance *prov, const char *path, bool *stale) {
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format"), *ent = cJSON_GetObjectItemCaseSensitive(j, "entries");
  ts_provenance own;
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT_NAME)) return fmt_err(path, "expected \"format\": \"" FORMAT_NAME "\"");
  if (!cJSON_IsObject(ent)) return fmt_err(path, "expected an \"entries\" object");
  if (!prov) {
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "version");
    if (!cJSON_IsNumber(ver)) return fmt_err(path, "expected a version");
    TS_TRY(ts__provenance_parse(cJSON_GetObjectItemCaseSensitive(j, "provenance"), path, &own));
    if (ver->valueint != TS_CONV_PROFILE_VERSION) own.kernels[0] = 0; /* another format: stale */
    prov = &own;
  }
  if (!ts_provenance_matches(prov, &p->here, TS_PROV_THREADS, NULL, 0)) {
    if (stale) *stale = true; /* measured elsewhere: start empty, replaced on save */
    return TS_OK;
  }
  ts_status s = TS_OK;
  const cJSON *it;
  cJSON_ArrayForEach(it, ent) {
    ts_conv_profile_entry e;
    if ((s = read_entry(path, it->string, it, &e)) != TS_OK) break;
    if (strlen(it->string) >= KEY_CAP) {
      s = fmt_err(path, "an entry key is too long");
      break;
    }
    prof_item *slot = append(p);
    if (!slot) {
      s = ts_error(TS_ERR_OOM, "conv profile: out of memory");
      break;
    }
    snprintf(slot->key, KEY_CAP, "%s", it->string);
    slot->e = e;
  }
  if (s != TS_OK) p->n = 0;
  return s;
}

ts_status ts__conv_profile_from_json(ts_conv_profile *p, const cJSON *j, const char *path, bool *stale) {
  return from_json(p, j, NULL, path, stale);
}

static ts_status load(ts_conv_profile *p, bool *stale) {
  cJSON *j = NULL;
  if (!p->key[0]) { /* an explicit path */
    FILE *f = fopen(p->path, "rb");
    if (!f) return TS_OK; /* no file yet: empty profile */
    fclose(f);
    TS_TRY(ts__json_read_file(p->path, &j));
    const ts_status s = from_json(p, j, NULL, p->path, stale);
    cJSON_Delete(j);
    return s;
  }
  ts_provenance prov;
  ts_status s = ts__artifact_load(&KIND, p->key, &j, &prov);
  if (s != TS_OK) return s == TS_ERR_NOT_FOUND ? (ts_error_clear(), TS_OK) : s;
  s = from_json(p, j, &prov, p->path, stale);
  cJSON_Delete(j);
  if (s != TS_OK && s != TS_ERR_OOM) { /* a payload this reader rejects: moved aside, measured again */
    ts__artifact_reject(&KIND, p->key, ts_last_error());
    ts_error_clear();
    s = TS_OK;
  }
  return s;
}

ts_status ts_conv_profile_open(ts_conv_profile **out, const ts_context *ctx, const char *path, bool *stale) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_profile_open: NULL profile pointer");
  *out = NULL;
  if (stale) *stale = false;
  ts_conv_profile *p = calloc(1, sizeof *p);
  if (!p) return ts_error(TS_ERR_OOM, "ts_conv_profile_open: out of memory");
  ts_provenance_here(&p->here, ts_isa_active(), ctx ? ts_context_threads(ctx) : ts_default_threads());
  snprintf(p->here.clock, sizeof p->here.clock, "%s", ts_clock_name(TS_CLOCK_WALL));
  ts_status s = TS_OK;
  if (path) {
    snprintf(p->path, sizeof p->path, "%s", path);
  } else {
    snprintf(p->key, sizeof p->key, "%s-t%d", p->here.kernels, p->here.threads);
    s = ts_artifact_path(KIND.name, p->key, p->path, sizeof p->path);
  }
  if (s == TS_OK) s = load(p, stale);
  if (s != TS_OK) {
    ts_conv_profile_destroy(p);
    return s;
  }
  *out = p;
  return TS_OK;
}

void ts_conv_profile_destroy(ts_conv_profile *p) {
  if (!p) return;
  free(p->items);
  free(p);
}

const char *ts_conv_profile_path(const ts_conv_profile *p) { return p ? p->path : ""; }
int ts_conv_profile_size(const ts_conv_profile *p) { return p ? p->n : 0; }

static prof_item *find(const ts_conv_profile *p, const ts_conv_desc *d) {
  char key[KEY_CAP];
  ts_conv_desc_key(d, key, sizeof key);
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->items[i].key, key)) return &p->items[i];
  return NULL;
}

bool ts_conv_profile_get(const ts_conv_profile *p, const ts_conv_desc *d, ts_conv_profile_entry *e) {
  const prof_item *it = p && d ? find(p, d) : NULL;
  if (it && e) *e = it->e;
  return it != NULL;
}

ts_status ts_conv_profile_put(ts_conv_profile *p, const ts_conv_desc *d, const ts_conv_profile_entry *e) {
  if (!p || !d || !e) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_profile_put: NULL argument");
  prof_item *it = find(p, d);
  if (!it) {
    if (!(it = append(p))) return ts_error(TS_ERR_OOM, "conv profile: out of memory");
    ts_conv_desc_key(d, it->key, sizeof it->key);
  }
  it->e = *e;
  return TS_OK;
}

ts_status ts_conv_profile_save(const ts_conv_profile *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_profile_save: NULL profile");
  ts_provenance prov = p->here, now;
  ts_provenance_here(&now, ts_isa_active(), 0);
  memcpy(prov.date, now.date, sizeof prov.date); /* dated now */
  cJSON *j = cJSON_CreateObject(), *ent = cJSON_AddObjectToObject(j, "entries");
  char dn[32];
  const dnnl_version_t *v = dnnl_version();
  snprintf(dn, sizeof dn, "%d.%d.%d", v->major, v->minor, v->patch);
  bool ok = j && ent && cJSON_AddStringToObject(j, "format", FORMAT_NAME) && cJSON_AddStringToObject(j, "onednn", dn);
  for (int i = 0; ok && i < p->n; i++) {
    const ts_conv_profile_entry *e = &p->items[i].e;
    cJSON *o = cJSON_AddObjectToObject(ent, p->items[i].key), *ms = o ? cJSON_AddObjectToObject(o, "ms") : NULL;
    cJSON *pr = o ? cJSON_AddArrayToObject(o, "pruned") : NULL;
    ok = ms && pr && cJSON_AddStringToObject(o, "date", e->date) && cJSON_AddNumberToObject(o, "load_avg", e->load_avg);
    for (int a = 0; ok && a < TS_CONV_ALGO_COUNT; a++) {
      if (isnan(e->ms[a])) continue;
      ok = cJSON_AddNumberToObject(ms, ts_conv_algo_name((ts_conv_algo)a), e->ms[a]) != NULL;
      if (ok && e->pruned[a]) ok = cJSON_AddItemToArray(pr, cJSON_CreateString(ts_conv_algo_name((ts_conv_algo)a)));
    }
  }
  cJSON *pj = ok && !p->key[0] ? ts__provenance_json(&prov) : NULL;
  if (pj) cJSON_AddItemToObject(j, "provenance", pj);
  if (ok && !p->key[0]) ok = pj && cJSON_AddNumberToObject(j, "version", TS_CONV_PROFILE_VERSION);
  ts_status s = !ok                 ? ts_error(TS_ERR_OOM, "conv profile: out of memory for JSON")
                : p->key[0] ? ts__artifact_store(&KIND, p->key, j, &prov)
                                    : ts__json_write_file(p->path, j);
  cJSON_Delete(j);
  return s;
}

void ts_conv_trial_entry(const ts_conv_trial *t, ts_conv_profile_entry *e) {
  memset(e, 0, sizeof *e);
  for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) {
    ts_conv_trial_info in;
    ts_conv_trial_info_at(t, a, &in);
    e->ms[a] = in.ran ? in.ms : NAN;
    e->pruned[a] = in.ran && in.pruned;
  }
  ts_provenance now;
  ts_provenance_here(&now, ts_isa_active(), 0);
  memcpy(e->date, now.date, sizeof e->date);
  double la;
  e->load_avg = getloadavg(&la, 1) == 1 ? la : -1;
}

ts_status ts_conv_profile_measure(ts_conv_profile *p, ts_context *ctx, const ts_conv_desc *d, unsigned algos,
                                  const ts_conv_time_opts *opts, ts_conv_profile_entry *e) {
  ts_conv_trial *t = NULL;
  TS_TRY(ts_conv_trial_create(&t, ctx, d, algos, opts));
  ts_status s = ts_conv_trial_run(t);
  ts_conv_profile_entry en;
  if (s == TS_OK) {
    ts_conv_trial_entry(t, &en);
    if (p) s = ts_conv_profile_put(p, d, &en);
    if (e) *e = en;
  }
  ts_conv_trial_destroy(t);
  return s;
}

ts_status ts_conv_choose(const ts_conv_profile_entry *e, const ts_conv_desc *d, unsigned algos, ts_conv_algo *out,
                         char *why, size_t cap) {
  if (!e || !d || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_choose: NULL argument");
  if (!algos) algos = (1u << TS_CONV_ALGO_COUNT) - 1;
  int best = -1, second = -1, n = 0;
  for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) {
    if (!(algos >> a & 1u) || isnan(e->ms[a]) || ts_conv_supported(d, (ts_conv_algo)a) != TS_OK) continue;
    n++;
    if (best < 0 || e->ms[a] < e->ms[best]) second = best, best = a;
    else if (second < 0 || e->ms[a] < e->ms[second]) second = a;
  }
  ts_error_clear();
  if (best < 0) return ts_error(TS_ERR_NOT_FOUND, "conv: no measured algorithm applies to this layer");
  *out = (ts_conv_algo)best;
  if (why && cap) {
    if (second < 0)
      snprintf(why, cap, "the only measured algorithm that applies: %s %.3f ms", ts_conv_algo_name(*out), e->ms[best]);
    else
      snprintf(why, cap, "fastest of %d measured: %s %.3f ms, next %s %.3f ms (%.2fx)", n, ts_conv_algo_name(*out),
               e->ms[best], ts_conv_algo_name((ts_conv_algo)second), e->ms[second], e->ms[second] / e->ms[best]);
  }
  return TS_OK;
}
