/* Attention plans on disk: a schedule plus the permutation that made its mask, keyed by an FNV-1a
 * 64 hash of the permuted mask, the permutation and the machine, and the "run on the original
 * token order" helper (gather Q/K/V rows by the permutation, execute, scatter O back). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_internal.h"
#include "tessera/attn_sched.h"
#include "tessera/io.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* FNV-1a over 8-byte words (each word multiplied in, then the high half folded down so every
 * input bit reaches the low bits), bytes for the tail: 8x fewer multiplies than byte-wise FNV-1a,
 * so the mask of a 4096-token window2d (2.8 MB of CSR) hashes in well under a millisecond. */
static uint64_t fnv(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * FNV_PRIME;
    h ^= h >> 32;
  }
  for (; i < len; i++) h = (h ^ p[i]) * FNV_PRIME;
  return h;
}
static uint64_t fnv_i64(uint64_t h, int64_t v) { return fnv(h, &v, sizeof v); }
static uint64_t fnv_str(uint64_t h, const char *s) { return fnv(h, s, strlen(s) + 1); }

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

void ts_attn_plan_desc_init(ts_attn_plan_desc *d, int64_t n, int64_t heads, int64_t hd, int threads) {
  memset(d, 0, sizeof *d);
  d->n = n, d->heads = heads, d->d = hd, d->threads = threads;
  copy_str(d->dtype, sizeof d->dtype, "f32");
  copy_str(d->reorder, sizeof d->reorder, "none");
  copy_str(d->solver, sizeof d->solver, "greedy");
  copy_str(d->cpu_model, sizeof d->cpu_model, ts_cpu()->model);
  copy_str(d->kernels, sizeof d->kernels, ts_isa_name(ts_isa_active()));
}

/* The planner's version, salted into both keys: a plan cached by an earlier scheduler is made
 * again (3: the ILP's exact compact-pass model, 128-key compact items, the calibration's residue
 * pricing; 4: the guard times the plans on the schedule's threads with the deployment's heads). */
#define PLANNER_SALT "tessera-attn-plan-4"
#define SOURCE_SALT "tessera-attn-plan-source-4"

ts_status ts_attn_plan_key(const ts_csr *m, const int32_t *perm, const ts_attn_plan_desc *d, char key[17]) {
  if (!m || !d || !key) return ts_error(TS_ERR_INVALID_ARG, "attn plan key: NULL argument");
  TS_TRY(ts_csr_validate(m));
  if (m->rows != m->cols || m->rows != d->n)
    return ts_error(TS_ERR_SHAPE, "attn plan key: mask is %lld x %lld, desc n = %lld", (long long)m->rows, (long long)m->cols,
                    (long long)d->n);
  if (perm) TS_TRY(ts_perm_validate(perm, m->rows));
  uint64_t h = fnv_str(FNV_OFFSET, PLANNER_SALT);
  h = fnv_i64(h, m->rows);
  h = fnv(h, m->rowptr, (size_t)(m->rows + 1) * sizeof *m->rowptr);
  h = fnv(h, m->col, (size_t)m->nnz * sizeof *m->col);
  if (perm) h = fnv(h, perm, (size_t)m->rows * sizeof *perm);
  else h = fnv_str(h, "identity");
  h = fnv_i64(fnv_i64(fnv_i64(h, d->n), d->heads), d->d);
  h = fnv_str(fnv_str(fnv_str(fnv_str(fnv_str(h, d->dtype), d->reorder), d->options), d->cpu_model), d->kernels);
  h = fnv_i64(h, d->threads);
  snprintf(key, 17, "%016llx", (unsigned long long)h);
  return TS_OK;
}

ts_status ts_attn_plan_source_key(const ts_csr *m, const char *options, const ts_attn_plan_desc *d, char key[17]) {
  if (!m || !d || !key) return ts_error(TS_ERR_INVALID_ARG, "attn plan source key: NULL argument");
  TS_TRY(ts_csr_validate(m));
  uint64_t h = fnv_str(FNV_OFFSET, SOURCE_SALT);
  h = fnv_i64(fnv_i64(h, m->rows), m->cols);
  h = fnv(h, m->rowptr, (size_t)(m->rows + 1) * sizeof *m->rowptr);
  h = fnv(h, m->col, (size_t)m->nnz * sizeof *m->col);
  h = fnv_str(h, options ? options : "");
  h = fnv_i64(fnv_i64(fnv_i64(h, d->n), d->heads), d->d);
  h = fnv_str(fnv_str(fnv_str(fnv_str(fnv_str(fnv_str(h, d->dtype), d->reorder), d->solver), d->options), d->cpu_model),
              d->kernels);
  h = fnv_i64(h, d->threads);
  snprintf(key, 17, "%016llx", (unsigned long long)h);
  return TS_OK;
}

ts_status ts_attn_plan_cache_path(const char key[17], char *buf, size_t cap) {
  char dir[4096];
  TS_TRY(ts_cache_dir(dir, sizeof dir));
  if ((size_t)snprintf(buf, cap, "%s/plans/%s.json", dir, key) >= cap)
    return ts_error(TS_ERR_OVERFLOW, "attn plan: cache path longer than %zu bytes", cap);
  return TS_OK;
}

static cJSON *desc_json(const ts_attn_plan_desc *d) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON_AddNumberToObject(j, "n", (double)d->n);
  cJSON_AddNumberToObject(j, "heads", (double)d->heads);
  cJSON_AddNumberToObject(j, "d", (double)d->d);
  cJSON_AddStringToObject(j, "dtype", d->dtype);
  cJSON_AddStringToObject(j, "reorder", d->reorder);
  cJSON_AddStringToObject(j, "solver", d->solver);
  cJSON_AddStringToObject(j, "options", d->options);
  cJSON_AddStringToObject(j, "cpu_model", d->cpu_model);
  cJSON_AddStringToObject(j, "kernels", d->kernels);
  cJSON_AddNumberToObject(j, "threads", d->threads);
  cJSON_AddStringToObject(j, "source_key", d->source);
  return j;
}

ts_status ts_attn_plan_save(const char *path, const char key[17], const ts_attn_plan_desc *d, const int32_t *perm,
                            const ts_attn_schedule *s, const ts_attn_sched_info *info) {
  if (!path || !key || !d || !s) return ts_error(TS_ERR_INVALID_ARG, "attn plan save: NULL argument");
  TS_TRY(ts_attn_schedule_validate(s));
  if (s->n != d->n)
    return ts_error(TS_ERR_SHAPE, "attn plan save: schedule n = %lld, desc n = %lld", (long long)s->n, (long long)d->n);
  cJSON *j = cJSON_CreateObject(), *sj = ts_attn_schedule_to_json(s), *dj = desc_json(d), *pj = NULL;
  if (perm) {
    pj = cJSON_CreateArray();
    for (int64_t i = 0; pj && i < s->n; i++) {
      cJSON *v = cJSON_CreateNumber(perm[i]);
      if (!v) {
        cJSON_Delete(pj);
        pj = NULL;
      } else {
        cJSON_AddItemToArray(pj, v);
      }
    }
  } else {
    pj = cJSON_CreateNull();
  }
  if (!j || !sj || !dj || !pj) {
    cJSON_Delete(j), cJSON_Delete(sj), cJSON_Delete(dj), cJSON_Delete(pj);
    return ts_error(TS_ERR_OOM, "attn plan save: cannot build the JSON document");
  }
  cJSON_AddStringToObject(j, "format", "tessera-attn-plan");
  cJSON_AddNumberToObject(j, "version", 1);
  cJSON_AddStringToObject(j, "key", key);
  cJSON_AddItemToObject(j, "desc", dj);
  cJSON_AddItemToObject(j, "perm", pj);
  if (info) {
    cJSON *pr = cJSON_AddObjectToObject(j, "predicted");
    if (pr) {
      cJSON_AddStringToObject(pr, "solver", ts_attn_solver_name(info->solver));
      cJSON_AddNumberToObject(pr, "makespan", info->makespan);
      cJSON_AddNumberToObject(pr, "greedy_makespan", info->greedy_makespan);
      cJSON_AddNumberToObject(pr, "lower_bound", info->lower_bound);
      cJSON_AddNumberToObject(pr, "total", info->total);
      cJSON_AddStringToObject(pr, "ilp_status", info->ilp_run ? ts_ilp_status_name(info->ilp_status) : "not run");
    }
  }
  cJSON_AddItemToObject(j, "schedule", sj);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  ts_status st = TS_OK;
  if (slash && slash != dir) {
    *slash = 0;
    st = ts_mkdirs(dir);
  }
  if (st == TS_OK) st = ts_json_write_file(path, j);
  cJSON_Delete(j);
  return st;
}

static ts_status get_str(const cJSON *o, const char *k, char *dst, size_t cap, const char *path) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsString(v)) return ts_error(TS_ERR_FORMAT, "attn plan %s: desc.%s is missing or not a string", path, k);
  copy_str(dst, cap, v->valuestring);
  return TS_OK;
}

static ts_status get_num(const cJSON *o, const char *k, double lo, double hi, int64_t *out, const char *path) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) || v->valuedouble != floor(v->valuedouble))
    return ts_error(TS_ERR_FORMAT, "attn plan %s: %s is missing or not an integer in [%g, %g]", path, k, lo, hi);
  *out = (int64_t)v->valuedouble;
  return TS_OK;
}

static ts_status parse_plan(const cJSON *j, const char *path, const char *expect_key, ts_attn_plan_desc *d, int32_t **perm,
                            ts_attn_schedule *s) {
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "attn plan %s: not a JSON object", path);
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format"), *k = cJSON_GetObjectItemCaseSensitive(j, "key");
  if (!cJSON_IsString(f) || strcmp(f->valuestring, "tessera-attn-plan") != 0)
    return ts_error(TS_ERR_FORMAT, "attn plan %s: format is not \"tessera-attn-plan\"", path);
  if (!cJSON_IsString(k)) return ts_error(TS_ERR_FORMAT, "attn plan %s: key is missing", path);
  if (expect_key && strcmp(k->valuestring, expect_key) != 0)
    return ts_error(TS_ERR_INVALID_ARG, "attn plan %s: key mismatch: the file holds %s, expected %s", path, k->valuestring,
                    expect_key);
  const cJSON *dj = cJSON_GetObjectItemCaseSensitive(j, "desc");
  if (!cJSON_IsObject(dj)) return ts_error(TS_ERR_FORMAT, "attn plan %s: desc is missing", path);
  int64_t thr = 0;
  TS_TRY(get_num(dj, "n", 1, INT32_MAX, &d->n, path));
  TS_TRY(get_num(dj, "heads", 0, INT32_MAX, &d->heads, path));
  TS_TRY(get_num(dj, "d", 1, 4096, &d->d, path));
  TS_TRY(get_num(dj, "threads", 0, TS_ATTN_THREAD_MAX, &thr, path));
  d->threads = (int)thr;
  TS_TRY(get_str(dj, "dtype", d->dtype, sizeof d->dtype, path));
  TS_TRY(get_str(dj, "reorder", d->reorder, sizeof d->reorder, path));
  TS_TRY(get_str(dj, "solver", d->solver, sizeof d->solver, path));
  TS_TRY(get_str(dj, "options", d->options, sizeof d->options, path));
  TS_TRY(get_str(dj, "cpu_model", d->cpu_model, sizeof d->cpu_model, path));
  TS_TRY(get_str(dj, "kernels", d->kernels, sizeof d->kernels, path));
  const cJSON *sk = cJSON_GetObjectItemCaseSensitive(dj, "source_key"); /* optional: "" when absent */
  copy_str(d->source, sizeof d->source, cJSON_IsString(sk) ? sk->valuestring : "");
  TS_TRY(ts_attn_schedule_from_json(cJSON_GetObjectItemCaseSensitive(j, "schedule"), s));
  if (s->n != d->n)
    return ts_error(TS_ERR_FORMAT, "attn plan %s: schedule n = %lld but desc n = %lld", path, (long long)s->n, (long long)d->n);
  const cJSON *pj = cJSON_GetObjectItemCaseSensitive(j, "perm");
  if (!pj || cJSON_IsNull(pj)) return TS_OK;
  if (!cJSON_IsArray(pj) || cJSON_GetArraySize(pj) != d->n)
    return ts_error(TS_ERR_FORMAT, "attn plan %s: perm is not null or an array of %lld entries", path, (long long)d->n);
  if (!(*perm = ts_malloc((size_t)d->n * sizeof **perm)))
    return ts_error(TS_ERR_OOM, "attn plan %s: cannot allocate the permutation", path);
  int64_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, pj) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || !(v->valuedouble >= 0 && v->valuedouble < (double)d->n))
      return ts_error(TS_ERR_FORMAT, "attn plan %s: perm[%lld] is not an integer in [0, %lld)", path, (long long)i, (long long)d->n);
    (*perm)[i++] = (int32_t)v->valuedouble;
  }
  return ts_perm_validate(*perm, d->n);
}

ts_status ts__attn_plan_parse(const cJSON *j, const char *name, const char *expect_key, ts_attn_plan_desc *d, int32_t **perm,
                              ts_attn_schedule *s) {
  *perm = NULL;
  memset(s, 0, sizeof *s);
  ts_attn_plan_desc dd;
  memset(&dd, 0, sizeof dd);
  ts_status st = parse_plan(j, name, expect_key, &dd, perm, s);
  if (st != TS_OK) {
    ts_free(*perm);
    *perm = NULL;
    ts_attn_schedule_free(s);
    return st;
  }
  if (d) *d = dd;
  return TS_OK;
}

ts_status ts_attn_plan_load(const char *path, const char *expect_key, ts_attn_plan_desc *d, int32_t **perm, ts_attn_schedule *s) {
  if (!path || !perm || !s) return ts_error(TS_ERR_INVALID_ARG, "attn plan load: NULL argument");
  *perm = NULL;
  memset(s, 0, sizeof *s);
  FILE *fp = fopen(path, "rb");
  if (!fp) return ts_error(TS_ERR_NOT_FOUND, "attn plan %s: no such plan file", path);
  fclose(fp);
  cJSON *j = NULL;
  TS_TRY(ts_json_read_file(path, &j));
  ts_status st = ts__attn_plan_parse(j, path, expect_key, d, perm, s);
  cJSON_Delete(j);
  return st;
}

/* <cache>/plans/src-<source key>.key */
static ts_status index_path(const char src[17], char *buf, size_t cap) {
  char dir[4096];
  TS_TRY(ts_cache_dir(dir, sizeof dir));
  if ((size_t)snprintf(buf, cap, "%s/plans/src-%s.key", dir, src) >= cap)
    return ts_error(TS_ERR_OVERFLOW, "attn plan: cache path longer than %zu bytes", cap);
  return TS_OK;
}

ts_status ts_attn_plan_cache_find(const char src[17], char key[17], ts_attn_plan_desc *d, int32_t **perm,
                                  ts_attn_schedule *s) {
  if (!src || !key || !perm || !s) return ts_error(TS_ERR_INVALID_ARG, "attn plan cache: NULL argument");
  *perm = NULL;
  memset(s, 0, sizeof *s);
  char ipath[4200], path[4200], *txt = NULL;
  size_t len = 0;
  TS_TRY(index_path(src, ipath, sizeof ipath));
  if (ts_read_file(ipath, &txt, &len) != TS_OK) return ts_error(TS_ERR_NOT_FOUND, "attn plan cache: no entry %s", ipath);
  bool ok = len >= 16;
  for (size_t i = 0; ok && i < 16; i++) ok = (txt[i] >= '0' && txt[i] <= '9') || (txt[i] >= 'a' && txt[i] <= 'f');
  if (ok) memcpy(key, txt, 16), key[16] = 0;
  free(txt);
  if (!ok) return ts_error(TS_ERR_FORMAT, "attn plan cache %s: not a 16-digit key", ipath);
  TS_TRY(ts_attn_plan_cache_path(key, path, sizeof path));
  ts_attn_plan_desc fd;
  TS_TRY(ts_attn_plan_load(path, key, &fd, perm, s));
  if (strcmp(fd.source, src) != 0) {
    ts_free(*perm);
    *perm = NULL;
    ts_attn_schedule_free(s);
    return ts_error(TS_ERR_INVALID_ARG, "attn plan cache %s: the plan was made for request %s, not %s", path,
                    fd.source[0] ? fd.source : "(none recorded)", src);
  }
  if (d) *d = fd;
  return TS_OK;
}

ts_status ts_attn_plan_cache_store(const char src[17], const char key[17], const ts_attn_plan_desc *d, const int32_t *perm,
                                   const ts_attn_schedule *s, const ts_attn_sched_info *info) {
  if (!src || !key || !d) return ts_error(TS_ERR_INVALID_ARG, "attn plan cache: NULL argument");
  char ipath[4200], path[4200];
  ts_attn_plan_desc dd = *d;
  copy_str(dd.source, sizeof dd.source, src);
  TS_TRY(index_path(src, ipath, sizeof ipath));
  TS_TRY(ts_attn_plan_cache_path(key, path, sizeof path));
  TS_TRY(ts_attn_plan_save(path, key, &dd, perm, s, info));
  return ts_write_file_atomic(ipath, key, 16);
}

ts_status ts_attn_execute_original(const ts_context *ctx, ts_attn_plan *plan, const int32_t *perm, const float *Q,
                                   const float *K, const float *V, float *O, int64_t batch, int64_t heads, int64_t n,
                                   int64_t d) {
  if (!perm) return ts_attn_execute(ctx, plan, Q, K, V, O, batch, heads, n, d);
  if (batch < 0 || heads < 0 || n < 1 || d < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn execute original: batch %lld, heads %lld, n %lld, d %lld", (long long)batch,
                    (long long)heads, (long long)n, (long long)d);
  TS_TRY(ts_perm_validate(perm, n));
  size_t bh, tot, bytes;
  if (!ts_mul_size((size_t)batch, (size_t)heads, &bh) || !ts_mul_size(bh, (size_t)(n * d), &tot) ||
      !ts_mul_size(tot, 4 * sizeof(float), &bytes))
    return ts_error(TS_ERR_OVERFLOW, "attn execute original: tensors overflow");
  if (tot == 0) return ts_attn_execute(ctx, plan, Q, K, V, O, batch, heads, n, d);
  if (!Q || !K || !V || !O) return ts_error(TS_ERR_INVALID_ARG, "attn execute original: NULL Q, K, V or O");
  float *buf = ts_malloc(tot * 4 * sizeof *buf);
  if (!buf) return ts_error(TS_ERR_OOM, "attn execute original: cannot allocate 4 x %zu floats", tot);
  float *q = buf, *k = buf + tot, *v = buf + 2 * tot, *o = buf + 3 * tot;
  const size_t row = (size_t)d * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < (int64_t)bh; h++) {
    int64_t off = h * n * d;
    for (int64_t i = 0; i < n; i++) {
      int64_t src = off + (int64_t)perm[i] * d, dst = off + i * d;
      memcpy(q + dst, Q + src, row);
      memcpy(k + dst, K + src, row);
      memcpy(v + dst, V + src, row);
    }
  }
  ts_status st = ts_attn_execute(ctx, plan, q, k, v, o, batch, heads, n, d);
  if (st == TS_OK) {
#pragma omp parallel for schedule(static)
    for (int64_t h = 0; h < (int64_t)bh; h++) {
      int64_t off = h * n * d;
      for (int64_t i = 0; i < n; i++) memcpy(O + off + (int64_t)perm[i] * d, o + off + i * d, row);
    }
  }
  ts_free(buf);
  return st;
}
