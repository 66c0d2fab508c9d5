/* The artifact store (tessera/artifact.h): <cache>/<kind>/<key>.json envelopes, versioned kinds,
 * corrupt files moved aside, atomic writes, a size bound, and get() = load / accept / compute /
 * check / store for the rooms. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/artifact_internal.h"

#define NAME_MAX_LEN 64

static bool valid_name(const char *s) {
  if (!s || !*s || *s == '.') return false;
  size_t n = 0;
  for (const char *p = s; *p; p++, n++) {
    const char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')) return false;
  }
  return n <= NAME_MAX_LEN;
}

static ts_status check_names(const char *kind, const char *key) {
  if (!valid_name(kind))
    return ts_error(TS_ERR_INVALID_ARG, "artifact kind '%s' is not a name of [a-z0-9_.-] up to %d characters",
                    kind ? kind : "(null)", NAME_MAX_LEN);
  if (key && !valid_name(key))
    return ts_error(TS_ERR_INVALID_ARG, "artifact key '%s' is not a name of [a-z0-9_.-] up to %d characters", key,
                    NAME_MAX_LEN);
  return TS_OK;
}

static ts_status kind_dir(const char *kind, char *buf, size_t cap) {
  char dir[4096];
  TS_TRY(ts_cache_dir(dir, sizeof dir));
  const int n = snprintf(buf, cap, "%s/%s", dir, kind);
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_OVERFLOW, "artifact: cache path longer than %zu bytes", cap);
  return TS_OK;
}

ts_status ts_artifact_path(const char *kind, const char *key, char *buf, size_t cap) {
  if (!buf || !cap) return ts_error(TS_ERR_INVALID_ARG, "ts_artifact_path: NULL buffer");
  TS_TRY(check_names(kind, key));
  if (!key) return ts_error(TS_ERR_INVALID_ARG, "ts_artifact_path: NULL key");
  char dir[4200];
  TS_TRY(kind_dir(kind, dir, sizeof dir));
  const int n = snprintf(buf, cap, "%s/%s.json", dir, key);
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_OVERFLOW, "artifact: path longer than %zu bytes", cap);
  return TS_OK;
}

static void move_aside(const char *path, const char *why) {
  char bad[4500];
  if (snprintf(bad, sizeof bad, "%s.bad", path) >= (int)sizeof bad) return;
  if (rename(path, bad) == 0)
    fprintf(stderr, "tessera: %s is not a usable artifact (%s); moved aside to %s and made again\n", path, why, bad);
  else
    fprintf(stderr, "tessera: %s is not a usable artifact (%s) and could not be moved aside: %s\n", path, why,
            strerror(errno));
}

/* Reads and checks the envelope of path; *env gets the whole parsed file on success. version_out -1
 * when the file is not a readable envelope. TS_ERR_NOT_FOUND when the file does not exist. */
static ts_status read_envelope(const char *path, const char *kind, const char *key, cJSON **env, int *version_out,
                               ts_provenance *prov) {
  *env = NULL;
  if (version_out) *version_out = -1;
  char *text = NULL;
  size_t len = 0;
  ts_status s = ts_read_file(path, &text, &len);
  if (s != TS_OK) return s;
  errno = 0;
  cJSON *j = cJSON_ParseWithLength(text, len);
  const int err = errno;
  free(text);
  if (!j && err == ENOMEM) return ts_error(TS_ERR_OOM, "%s: out of memory reading the artifact", path); /* not the text */
  if (!j) return ts_error(TS_ERR_FORMAT, "not valid JSON");
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "artifact"), *v = cJSON_GetObjectItemCaseSensitive(j, "version");
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "key"), *p = cJSON_GetObjectItemCaseSensitive(j, "provenance");
  s = TS_OK;
  if (!cJSON_IsString(a) || !cJSON_IsNumber(v) || !cJSON_IsString(k) || !cJSON_GetObjectItemCaseSensitive(j, "data"))
    s = ts_error(TS_ERR_FORMAT, "not a tessera artifact (expected artifact, version, key, data)");
  else if (kind && strcmp(a->valuestring, kind))
    s = ts_error(TS_ERR_FORMAT, "an artifact of kind '%s', expected '%s'", a->valuestring, kind);
  else if (key && strcmp(k->valuestring, key))
    s = ts_error(TS_ERR_FORMAT, "the artifact of key '%s', expected '%s'", k->valuestring, key);
  else if (!(v->valuedouble >= 0 && v->valuedouble <= 1e9) || v->valuedouble != (int)v->valuedouble)
    s = ts_error(TS_ERR_FORMAT, "version is not a non-negative integer");
  ts_provenance pv;
  if (s == TS_OK) s = p ? ts__provenance_parse(p, path, &pv) : (memset(&pv, 0, sizeof pv), TS_OK);
  if (s != TS_OK) {
    cJSON_Delete(j);
    return s;
  }
  if (version_out) *version_out = (int)v->valuedouble;
  if (prov) *prov = pv;
  *env = j;
  return TS_OK;
}

ts_status ts__artifact_load(const ts__artifact_kind *kd, const char *key, cJSON **data, ts_provenance *prov) {
  if (!kd || !data) return ts_error(TS_ERR_INVALID_ARG, "artifact load: NULL argument");
  *data = NULL;
  char path[4400];
  TS_TRY(ts_artifact_path(kd->name, key, path, sizeof path));
  cJSON *env;
  int version;
  ts_status s = read_envelope(path, kd->name, key, &env, &version, prov);
  if (s == TS_ERR_NOT_FOUND) return ts_error(TS_ERR_NOT_FOUND, "no %s artifact '%s'", kd->name, key);
  if (s != TS_OK) {
    if (s == TS_ERR_OOM) return s;
    move_aside(path, ts_last_error());
    return ts_error(TS_ERR_NOT_FOUND, "no usable %s artifact '%s'", kd->name, key);
  }
  if (version != kd->version) {
    cJSON_Delete(env);
    return ts_error(TS_ERR_NOT_FOUND, "%s artifact '%s' has format version %d, this build reads %d", kd->name, key,
                    version, kd->version);
  }
  *data = cJSON_DetachItemFromObjectCaseSensitive(env, "data");
  cJSON_Delete(env);
  return TS_OK;
}

void ts__artifact_reject(const ts__artifact_kind *kd, const char *key, const char *why) {
  char path[4400];
  if (ts_artifact_path(kd->name, key, path, sizeof path) == TS_OK) move_aside(path, why && *why ? why : "rejected");
}

ts_status ts__artifact_store(const ts__artifact_kind *kd, const char *key, const cJSON *data, const ts_provenance *prov) {
  if (!kd || !data) return ts_error(TS_ERR_INVALID_ARG, "artifact store: NULL argument");
  char path[4400], dir[4200];
  TS_TRY(ts_artifact_path(kd->name, key, path, sizeof path));
  TS_TRY(kind_dir(kd->name, dir, sizeof dir));
  TS_TRY(ts_mkdirs(dir));
  ts_provenance here;
  if (!prov) ts_provenance_here(&here, ts_isa_active(), 0), prov = &here;
  cJSON *env = cJSON_CreateObject(), *pj = ts__provenance_json(prov), *dj = cJSON_Duplicate(data, 1);
  bool ok = env && pj && dj && cJSON_AddStringToObject(env, "artifact", kd->name) &&
            cJSON_AddNumberToObject(env, "version", kd->version) && cJSON_AddStringToObject(env, "key", key);
  if (ok && (ok = cJSON_AddItemToObject(env, "provenance", pj))) pj = NULL; /* not added (its key's copy failed): ours */
  if (ok && (ok = cJSON_AddItemToObject(env, "data", dj))) dj = NULL;
  char *text = ok ? ts__json_print(env, true) : NULL;
  cJSON_Delete(env), cJSON_Delete(pj), cJSON_Delete(dj);
  if (!text) return ts_error(TS_ERR_OOM, "artifact store: out of memory printing %s '%s'", kd->name, key);
  const size_t len = strlen(text);
  ts_status s = ts_write_file_atomic(path, text, len);
  cJSON_free(text);
  TS_TRY(s);
  int removed;
  if (ts_artifact_trim(ts_cache_limit(), &removed) != TS_OK) ts_error_clear(); /* a full cache is not an error */
  return TS_OK;
}

ts_status ts__artifact_get(const ts__artifact_ops *ops, const char *key, void *ctx, bool *computed) {
  if (!ops || !ops->accept || !ops->compute) return ts_error(TS_ERR_INVALID_ARG, "artifact get: incomplete ops");
  if (computed) *computed = false;
  cJSON *data = NULL;
  ts_provenance prov;
  ts_status s = ts__artifact_load(&ops->kind, key, &data, &prov);
  if (s == TS_OK) {
    s = ops->accept(ctx, data, &prov);
    cJSON_Delete(data), data = NULL;
    if (s == TS_OK) return TS_OK;
    if (s == TS_ERR_OOM) return s;
    if (s != TS_ERR_NOT_FOUND) ts__artifact_reject(&ops->kind, key, ts_last_error());
  } else if (s != TS_ERR_NOT_FOUND) {
    return s;
  }
  ts_error_clear();
  memset(&prov, 0, sizeof prov);
  TS_TRY(ops->compute(ctx, &data, &prov));
  if (computed) *computed = true;
  if (!data) return TS_OK; /* nothing to keep (e.g. a measurement that was too short to trust) */
  if (ops->check && ops->check(ctx, data) != TS_OK) {
    fprintf(stderr, "tessera: a computed %s artifact failed its own reader (%s); not stored\n", ops->kind.name,
            ts_last_error());
    cJSON_Delete(data);
    ts_error_clear();
    return TS_OK;
  }
  if (ts__artifact_store(&ops->kind, key, data, &prov) != TS_OK) {
    fprintf(stderr, "tessera: could not store the %s artifact '%s': %s\n", ops->kind.name, key, ts_last_error());
    ts_error_clear();
  }
  cJSON_Delete(data);
  return TS_OK;
}

/* ---- the public string API -------------------------------------------------------------- */

ts_status ts_artifact_load(const char *kind, int version, const char *key, char **data_json, ts_provenance *prov) {
  if (!data_json) return ts_error(TS_ERR_INVALID_ARG, "ts_artifact_load: NULL output");
  *data_json = NULL;
  const ts__artifact_kind kd = {kind, version};
  cJSON *d;
  TS_TRY(ts__artifact_load(&kd, key, &d, prov));
  const ts_status s = ts__json_to_string(d, "ts_artifact_load", data_json); /* plain malloc: free() */
  cJSON_Delete(d);
  return s;
}

ts_status ts_artifact_store(const char *kind, int version, const char *key, const char *data_json,
                            const ts_provenance *prov) {
  if (!data_json) return ts_error(TS_ERR_INVALID_ARG, "ts_artifact_store: NULL payload");
  if (version < 0) return ts_error(TS_ERR_INVALID_ARG, "ts_artifact_store: version %d < 0", version);
  cJSON *d = cJSON_Parse(data_json);
  if (!d) return ts_error(TS_ERR_FORMAT, "ts_artifact_store: the payload of %s '%s' is not valid JSON", kind, key);
  const ts__artifact_kind kd = {kind, version};
  const ts_status s = ts__artifact_store(&kd, key, d, prov);
  cJSON_Delete(d);
  return s;
}

/* ---- listing, clearing, the size bound -------------------------------------------------- */

int64_t ts_cache_limit(void) {
  const char *e = getenv("TESSERA_CACHE_MAX_MB");
  if (e && *e) {
    char *end;
    const long long mb = strtoll(e, &end, 10);
    if (!*end && mb > 0 && mb < (1LL << 30)) return (int64_t)mb << 20;
  }
  return (int64_t)512 << 20;
}

typedef struct file_ent {
  char kind[NAME_MAX_LEN + 1], name[NAME_MAX_LEN + 16];
  int64_t bytes;
  double mtime;
} file_ent;

static bool ends_with(const char *s, const char *suf) {
  const size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Every artifact file (<key>.json, <key>.json.bad) under the kinds' folders (kind NULL: all). */
static ts_status scan(const char *kind, file_ent **out, int *nout) {
  *out = NULL, *nout = 0;
  char root[4096];
  TS_TRY(ts_cache_dir(root, sizeof root));
  DIR *d = opendir(root);
  if (!d) return ts_error(TS_ERR_IO, "cannot list '%s': %s", root, strerror(errno));
  file_ent *v = NULL;
  int n = 0, cap = 0;
  ts_status s = TS_OK;
  struct dirent *e;
  while (s == TS_OK && (e = readdir(d))) {
    if (!valid_name(e->d_name) || (kind && strcmp(e->d_name, kind))) continue;
    char sub[4400];
    if (snprintf(sub, sizeof sub, "%s/%s", root, e->d_name) >= (int)sizeof sub) continue;
    struct stat st;
    if (stat(sub, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    DIR *dk = opendir(sub);
    if (!dk) continue;
    struct dirent *f;
    while ((f = readdir(dk))) {
      if (f->d_name[0] == '.' || !(ends_with(f->d_name, ".json") || ends_with(f->d_name, ".json.bad"))) continue;
      if (strlen(f->d_name) >= sizeof v->name) continue;
      char fp[4800];
      if (snprintf(fp, sizeof fp, "%s/%s", sub, f->d_name) >= (int)sizeof fp) continue;
      if (stat(fp, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (n == cap) {
        const int nc = cap ? 2 * cap : 64;
        file_ent *nv = realloc(v, (size_t)nc * sizeof *nv);
        if (!nv) {
          s = ts_error(TS_ERR_OOM, "artifact: out of memory listing '%s'", root);
          break;
        }
        v = nv, cap = nc;
      }
      file_ent *fe = &v[n++];
      memcpy(fe->kind, e->d_name, strlen(e->d_name) + 1); /* a valid name: <= 64 characters */
      memcpy(fe->name, f->d_name, strlen(f->d_name) + 1); /* checked above */
      fe->bytes = (int64_t)st.st_size;
      fe->mtime = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
    }
    closedir(dk);
  }
  closedir(d);
  if (s != TS_OK) {
    free(v);
    return s;
  }
  *out = v, *nout = n;
  return TS_OK;
}

static int cmp_name(const void *a, const void *b) {
  const ts_artifact_entry *x = a, *y = b;
  const int c = strcmp(x->kind, y->kind);
  return c ? c : strcmp(x->key, y->key);
}

ts_status ts_artifact_list(const char *kind, ts_artifact_entry **entries, int *n) {
  if (!entries || !n) return ts_error(TS_ERR_INVALID_ARG, "ts_artifact_list: NULL output");
  *entries = NULL, *n = 0;
  if (kind) TS_TRY(check_names(kind, NULL));
  file_ent *f;
  int nf;
  TS_TRY(scan(kind, &f, &nf));
  ts_artifact_entry *v = calloc(nf ? (size_t)nf : 1, sizeof *v);
  if (!v) {
    free(f);
    return ts_error(TS_ERR_OOM, "ts_artifact_list: out of memory");
  }
  char root[4096];
  ts_status s = ts_cache_dir(root, sizeof root);
  for (int i = 0; s == TS_OK && i < nf; i++) {
    ts_artifact_entry *a = &v[i];
    snprintf(a->kind, sizeof a->kind, "%s", f[i].kind);
    const size_t kl = strlen(f[i].name) - (ends_with(f[i].name, ".bad") ? strlen(".json.bad") : strlen(".json"));
    snprintf(a->key, sizeof a->key, "%.*s", (int)kl, f[i].name);
    a->bytes = f[i].bytes, a->mtime = f[i].mtime;
    a->bad = ends_with(f[i].name, ".bad");
    a->version = -1;
    if (a->bad) continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s/%s", root, f[i].kind, f[i].name);
    cJSON *env;
    if (read_envelope(path, a->kind, a->key, &env, &a->version, &a->prov) == TS_OK) cJSON_Delete(env);
    else a->bad = true, ts_error_clear();
  }
  free(f);
  if (s != TS_OK) {
    free(v);
    return s;
  }
  qsort(v, (size_t)nf, sizeof *v, cmp_name);
  *entries = v, *n = nf;
  return TS_OK;
}

ts_status ts_artifact_clear(const char *kind, int *removed) {
  if (removed) *removed = 0;
  if (kind) TS_TRY(check_names(kind, NULL));
  file_ent *f;
  int nf;
  TS_TRY(scan(kind, &f, &nf));
  char root[4096];
  ts_status s = ts_cache_dir(root, sizeof root);
  int r = 0;
  for (int i = 0; s == TS_OK && i < nf; i++) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s/%s", root, f[i].kind, f[i].name);
    if (unlink(path) == 0) r++;
    else if (errno != ENOENT) s = ts_error(TS_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
  }
  for (int i = 0; i < nf; i++) { /* empty kind folders go too (rmdir fails on a non-empty one) */
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/%s", root, f[i].kind);
    (void)rmdir(sub);
  }
  free(f);
  if (removed) *removed = r;
  return s;
}

static int cmp_mtime(const void *a, const void *b) {
  const file_ent *x = a, *y = b;
  return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

ts_status ts_artifact_trim(int64_t limit, int *removed) {
  if (removed) *removed = 0;
  file_ent *f;
  int nf;
  TS_TRY(scan(NULL, &f, &nf));
  int64_t total = 0;
  for (int i = 0; i < nf; i++) total += f[i].bytes;
  ts_status s = TS_OK;
  if (total > limit) {
    qsort(f, (size_t)nf, sizeof *f, cmp_mtime);
    char root[4096];
    s = ts_cache_dir(root, sizeof root);
    /* the newest file always stays: the artifact just written is never its own victim */
    for (int i = 0; s == TS_OK && i + 1 < nf && total > limit; i++) {
      char path[4400];
      snprintf(path, sizeof path, "%s/%s/%s", root, f[i].kind, f[i].name);
      if (unlink(path) == 0) {
        total -= f[i].bytes;
        if (removed) (*removed)++;
      }
    }
  }
  free(f);
  return s;
}
