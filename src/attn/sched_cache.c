/* Attention plans on disk: a schedule plus the permutation that made its mask, keyed by the one key
 * hash (ts_hash_*) of the permuted mask, the permutation and the machine, kept in the artifact store
 * (kinds "attn-plan" and the index "attn-plan-src"), and the "run on the original token order" helper (gather Q/K/V rows by the permutation, execute, scatter O back). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "attn/sched_internal.h"
#include "io/json_internal.h"
#include "tessera/hwinfo.h"
#include "core/artifact_internal.h"
#include "tessera/attn_sched.h"

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

/* The planner's version, salted into both keys and the plans' artifact version: a plan cached by
 * an earlier scheduler is made again (3: the ILP's exact compact-pass model, 128-key compact items,
 * the calibration's residue pricing; 4: the guard times the plans on the schedule's threads with
 * the deployment's heads). */
#define PLANNER_VERSION 4
#define STR_(x) #x
#define STR(x) STR_(x)
#define PLANNER_SALT "tessera-attn-plan-" STR(PLANNER_VERSION)
#define SOURCE_SALT "tessera-attn-plan-source-" STR(PLANNER_VERSION)

/* Plans and the index from a request's source key to its plan's key, in the artifact store. */
static const ts__artifact_kind plan_kind = {"attn-plan", PLANNER_VERSION};
static const ts__artifact_kind index_kind = {"attn-plan-src", PLANNER_VERSION};

/* The request's and the machine's part of both keys (after the mask). */
static void hash_desc(ts_hash *h, const ts_attn_plan_desc *d, bool solver) {
  ts_hash_i64(h, d->n), ts_hash_i64(h, d->heads), ts_hash_i64(h, d->d);
  ts_hash_str(h, d->dtype), ts_hash_str(h, d->reorder);
  if (solver) ts_hash_str(h, d->solver);
  ts_hash_str(h, d->options), ts_hash_str(h, d->cpu_model), ts_hash_str(h, d->kernels);
  ts_hash_i64(h, d->threads);
}

ts_status ts_attn_plan_key(const ts_csr *m, const int32_t *perm, const ts_attn_plan_desc *d, char key[17]) {
  if (!m || !d || !key) return ts_error(TS_ERR_INVALID_ARG, "attn plan key: NULL argument");
  TS_TRY(ts_csr_validate(m));
  if (m->rows != m->cols || m->rows != d->n)
    return ts_error(TS_ERR_SHAPE, "attn plan key: mask is %lld x %lld, desc n = %lld", (long long)m->rows, (long long)m->cols,
                    (long long)d->n);
  if (perm) TS_TRY(ts_perm_validate(perm, m->rows));
  ts_hash h;
  ts_hash_init(&h, PLANNER_SALT);
  ts_hash_i64(&h, m->rows);
  ts_hash_bytes(&h, m->rowptr, (size_t)(m->rows + 1) * sizeof *m->rowptr);
  ts_hash_bytes(&h, m->col, (size_t)m->nnz * sizeof *m->col);
  if (perm) ts_hash_bytes(&h, perm, (size_t)m->rows * sizeof *perm);
  else ts_hash_str(&h, "identity");
  hash_desc(&h, d, false);
  ts_hash_hex(&h, key);
  return TS_OK;
}

ts_status ts_attn_plan_source_key(const ts_csr *m, const char *options, const ts_attn_plan_desc *d, char key[17]) {
  if (!m || !d || !key) return ts_error(TS_ERR_INVALID_ARG, "attn plan source key: NULL argument");
  TS_TRY(ts_csr_validate(m));
  ts_hash h;
  ts_hash_init(&h, SOURCE_SALT);
  ts_hash_i64(&h, m->rows), ts_hash_i64(&h, m->cols);
  ts_hash_bytes(&h, m->rowptr, (size_t)(m->rows + 1) * sizeof *m->rowptr);
  ts_hash_bytes(&h, m->col, (size_t)m->nnz * sizeof *m->col);
  ts_hash_str(&h, options);
  hash_desc(&h, d, true);
  ts_hash_hex(&h, key);
  return TS_OK;
}

ts_status ts_attn_plan_cache_path(const char key[17], char *buf, size_t cap) {
  if (!key || !buf) return ts_error(TS_ERR_INVALID_ARG, "attn plan cache path: NULL argument");
  return ts_artifact_path(plan_kind.name, key, buf, cap);
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

/* The provenance a plan records: this machine, the desc's kernels and threads, the machine profile. */
static void plan_provenance(const ts_attn_plan_desc *d, ts_provenance *p) {
  ts_provenance_here(p, ts_isa_active(), d->threads);
  copy_str(p->cpu_model, sizeof p->cpu_model, d->cpu_model);
  copy_str(p->kernels, sizeof p->kernels, d->kernels);
  ts_hwinfo_profile_key_here(0, p->profile);
}

/* The plan document (docs/FORMATS.md, "attention plan"); NULL on OOM (error set). */
static cJSON *plan_doc(const char key[17], const ts_attn_plan_desc *d, const int32_t *perm, const ts_attn_schedule *s,
                       const ts_attn_sched_info *info, const ts_provenance *prov) {
  cJSON *j = cJSON_CreateObject(), *sj = ts__attn_schedule_to_cjson(s), *dj = desc_json(d), *vj = ts__provenance_json(prov);
  cJSON *pj = perm ? cJSON_CreateIntArray(perm, (int)s->n) : cJSON_CreateNull(); /* int32_t is int; n < 2^31 */
  if (!j || !sj || !dj || !pj || !vj) {
    cJSON_Delete(j), cJSON_Delete(sj), cJSON_Delete(dj), cJSON_Delete(pj), cJSON_Delete(vj);
    ts_error(TS_ERR_OOM, "attn plan save: cannot build the JSON document");
    return NULL;
  }
  cJSON_AddStringToObject(j, "format", "tessera-attn-plan");
  cJSON_AddNumberToObject(j, "version", 1);
  cJSON_AddStringToObject(j, "key", key);
  cJSON_AddItemToObject(j, "desc", dj);
  cJSON_AddItemToObject(j, "provenance", vj);
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
  return j;
}

static ts_status check_save(const char *key, const ts_attn_plan_desc *d, const ts_attn_schedule *s) {
  if (!key || !d || !s) return ts_error(TS_ERR_INVALID_ARG, "attn plan save: NULL argument");
  TS_TRY(ts_attn_schedule_validate(s));
  if (s->n != d->n)
    return ts_error(TS_ERR_SHAPE, "attn plan save: schedule n = %lld, desc n = %lld", (long long)s->n, (long long)d->n);
  return TS_OK;
}

ts_status ts_attn_plan_save(const char *path, const char key[17], const ts_attn_plan_desc *d, const int32_t *perm,
                            const ts_attn_schedule *s, const ts_attn_sched_info *info) {
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "attn plan save: NULL path");
  TS_TRY(check_save(key, d, s));
  ts_provenance prov;
  plan_provenance(d, &prov);
  cJSON *j = plan_doc(key, d, perm, s, info, &prov);
  if (!j) return TS_ERR_OOM;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  ts_status st = TS_OK;
  if (slash && slash != dir) {
    *slash = 0;
    st = ts_mkdirs(dir);
  }
  if (st == TS_OK) st = ts__json_write_file(path, j);
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
  const cJSON *pv = cJSON_GetObjectItemCaseSensitive(j, "provenance"); /* optional (plans before it) */
  ts_provenance prov;
  if (pv) TS_TRY(ts__provenance_parse(pv, path, &prov));
  TS_TRY(ts__attn_schedule_from_cjson(cJSON_GetObjectItemCaseSensitive(j, "schedule"), s));
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
  TS_TRY(ts__json_read_file(path, &j));
  ts_status st = ts__attn_plan_parse(j, path, expect_key, d, perm, s);
  cJSON_Delete(j);
  return st;
}

ts_status ts_attn_plan_cache_find(const char src[17], char key[17], ts_attn_plan_desc *d, int32_t **perm,
                                  ts_attn_schedule *s) {
  if (!src || !key || !perm || !s) return ts_error(TS_ERR_INVALID_ARG, "attn plan cache: NULL argument");
  *perm = NULL;
  memset(s, 0, sizeof *s);
  cJSON *ij = NULL, *pj = NULL;
  TS_TRY(ts__artifact_load(&index_kind, src, &ij, NULL));
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(ij, "key");
  bool ok = cJSON_IsString(k) && strlen(k->valuestring) == 16;
  for (size_t i = 0; ok && i < 16; i++)
    ok = (k->valuestring[i] >= '0' && k->valuestring[i] <= '9') || (k->valuestring[i] >= 'a' && k->valuestring[i] <= 'f');
  if (ok) memcpy(key, k->valuestring, 17);
  cJSON_Delete(ij);
  if (!ok) {
    ts__artifact_reject(&index_kind, src, "its key is not 16 hex digits");
    return ts_error(TS_ERR_FORMAT, "attn plan cache: the entry of request %s holds no 16-digit key", src);
  }
  TS_TRY(ts__artifact_load(&plan_kind, key, &pj, NULL));
  ts_attn_plan_desc fd;
  ts_status st = ts__attn_plan_parse(pj, key, key, &fd, perm, s);
  cJSON_Delete(pj);
  if (st != TS_OK) {
    if (st != TS_ERR_OOM) ts__artifact_reject(&plan_kind, key, ts_last_error());
    return st;
  }
  if (strcmp(fd.source, src) != 0) {
    ts_free(*perm);
    *perm = NULL;
    ts_attn_schedule_free(s);
    return ts_error(TS_ERR_INVALID_ARG, "attn plan cache: plan %s was made for request %s, not %s", key,
                    fd.source[0] ? fd.source : "(none recorded)", src);
  }
  if (d) *d = fd;
  return TS_OK;
}

ts_status ts_attn_plan_cache_store(const char src[17], const char key[17], const ts_attn_plan_desc *d, const int32_t *perm,
                                   const ts_attn_schedule *s, const ts_attn_sched_info *info) {
  if (!src) return ts_error(TS_ERR_INVALID_ARG, "attn plan cache: NULL argument");
  TS_TRY(check_save(key, d, s));
  ts_attn_plan_desc dd = *d;
  copy_str(dd.source, sizeof dd.source, src);
  ts_provenance prov;
  plan_provenance(&dd, &prov);
  cJSON *j = plan_doc(key, &dd, perm, s, info, &prov), *ij = cJSON_CreateObject();
  ts_status st = j && ij && cJSON_AddStringToObject(ij, "key", key) ? TS_OK : ts_error(TS_ERR_OOM, "attn plan cache: out of memory");
  if (st == TS_OK) st = ts__artifact_store(&plan_kind, key, j, &prov);
  if (st == TS_OK) st = ts__artifact_store(&index_kind, src, ij, &prov);
  cJSON_Delete(j), cJSON_Delete(ij);
  return st;
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
