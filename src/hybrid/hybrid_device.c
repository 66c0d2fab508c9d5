/* The accelerator model: service-time curves (JSON, the "hybrid-device" artifact, or the compiled-in
 * datasheet default) and the modelled device's three FIFO engines with an optional co-tenant. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "hybrid/hybrid_internal.h"
#include "io/json_internal.h"
#include "tessera/artifact.h"

const ts__artifact_kind ts__hybrid_device_kind = {"hybrid-device", 1};

double ts_hybrid_curve_eval(const ts_hybrid_curve *c, double x) {
  if (c->n <= 0) return 0;
  if (x <= c->x[0]) return c->y[0];
  int n = c->n;
  if (x >= c->x[n - 1]) return c->y[n - 1] * (x / c->x[n - 1]); /* constant throughput beyond */
  int i = 1;
  while (i < n - 1 && x > c->x[i]) i++;
  double lx0 = log(c->x[i - 1]), lx1 = log(c->x[i]);
  double ly0 = log(c->y[i - 1]), ly1 = log(c->y[i]);
  double t = (log(x) - lx0) / (lx1 - lx0);
  return exp(ly0 + t * (ly1 - ly0));
}

/* A curve from "latency + size / rate" at sizes 2^12 .. 2^36 (every 4 binary orders). */
static void curve_affine(ts_hybrid_curve *c, double x0, double lat, double rate) {
  c->n = 0;
  for (double x = x0; c->n < 10; x *= 16) {
    c->x[c->n] = x;
    c->y[c->n] = lat + x / rate;
    c->n++;
  }
}

void ts_hybrid_device_default(ts_hybrid_device_model *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "NVIDIA H100 PCIe (datasheet model)");
  snprintf(m->source, sizeof m->source,
           "datasheet-derived, not measured: PCIe Gen5 x16 from pageable host memory 25/22 GB/s + 10 us; "
           "FP32 (CUDA cores) 51.2 TFLOP/s peak, 70%% at large sizes; HBM2e 2.0 TB/s, 80%% streamed; launch 5 us");
  m->measured = false;
  curve_affine(&m->h2d, 4096, 10e-6, 25e9);
  curve_affine(&m->d2h, 4096, 10e-6, 22e9);
  curve_affine(&m->scan, 4096, 2e-6, 1.6e12);
  /* GEMM efficiency rises with size: small products are latency-bound */
  static const double gx[] = {1e6, 1e8, 1e9, 1e10, 1e11, 1e12};
  static const double gy[] = {8e-6, 2.5e-5, 8e-5, 4.0e-4, 3.0e-3, 2.8e-2};
  m->gemm.n = 6;
  for (int i = 0; i < 6; i++) m->gemm.x[i] = gx[i], m->gemm.y[i] = gy[i];
  m->launch_s = 5e-6;
  /* kernel work per unit: wordcount tokenizes and updates a hash table with atomics (taken as 200
   * streamed bytes per input byte: ~8 GB/s); grep is a streaming compare (4 bytes per byte);
   * kmeans' distance kernel runs at half the GEMM rate; gemm is the GEMM curve itself */
  m->scan_factor[TS_HYBRID_WORDCOUNT] = 200;
  m->scan_factor[TS_HYBRID_GREP] = 4;
  m->gemm_factor[TS_HYBRID_KMEANS] = 2;
  m->gemm_factor[TS_HYBRID_GEMM] = 1;
}

void ts_hybrid_device_times(const ts_hybrid_device_model *m, ts_hybrid_job_kind job, const ts_hybrid_work *w,
                            double t[3]) {
  t[0] = w->bytes_in > 0 ? ts_hybrid_curve_eval(&m->h2d, w->bytes_in) : 0;
  t[2] = w->bytes_out > 0 ? ts_hybrid_curve_eval(&m->d2h, w->bytes_out) : 0;
  double k = m->launch_s;
  if (w->scan_bytes > 0 && m->scan_factor[job] > 0) k += ts_hybrid_curve_eval(&m->scan, w->scan_bytes * m->scan_factor[job]);
  if (w->flops > 0 && m->gemm_factor[job] > 0) k += ts_hybrid_curve_eval(&m->gemm, w->flops * m->gemm_factor[job]);
  t[1] = k;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static ts_status curve_from(const cJSON *o, const char *key, ts_hybrid_curve *c) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsArray(a)) return ts_error(TS_ERR_FORMAT, "hybrid device: '%s' must be an array of [size, seconds]", key);
  int n = cJSON_GetArraySize(a);
  if (n < 1 || n > TS_HYBRID_CURVE_MAX)
    return ts_error(TS_ERR_FORMAT, "hybrid device: '%s' has %d points (1..%d)", key, n, TS_HYBRID_CURVE_MAX);
  c->n = n;
  for (int i = 0; i < n; i++) {
    const cJSON *p = cJSON_GetArrayItem(a, i);
    const cJSON *x = cJSON_GetArrayItem(p, 0), *y = cJSON_GetArrayItem(p, 1);
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(x) || !cJSON_IsNumber(y))
      return ts_error(TS_ERR_FORMAT, "hybrid device: '%s'[%d] must be [size, seconds]", key, i);
    double xv = x->valuedouble, yv = y->valuedouble;
    if (!(xv > 0 && xv < 1e30) || !(yv > 0 && yv < 1e6))
      return ts_error(TS_ERR_FORMAT, "hybrid device: '%s'[%d] = [%g, %g]: sizes and seconds must be positive and finite",
                      key, i, xv, yv);
    if (i > 0 && !(xv > c->x[i - 1]))
      return ts_error(TS_ERR_FORMAT, "hybrid device: '%s' sizes must increase (point %d)", key, i);
    c->x[i] = xv;
    c->y[i] = yv;
  }
  return TS_OK;
}

static ts_status factors_from(const cJSON *o, const char *key, double *f) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!a) return TS_OK;
  if (!cJSON_IsObject(a)) return ts_error(TS_ERR_FORMAT, "hybrid device: '%s' must be an object of job: factor", key);
  for (const cJSON *e = a->child; e; e = e->next) {
    ts_hybrid_job_kind k;
    if (ts_hybrid_job_parse(e->string, &k) != TS_OK)
      return ts_error(TS_ERR_FORMAT, "hybrid device: '%s' names an unknown job '%s'", key, e->string);
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble < 1e9))
      return ts_error(TS_ERR_FORMAT, "hybrid device: '%s'.%s must be a number in [0, 1e9)", key, e->string);
    f[k] = e->valuedouble;
  }
  return TS_OK;
}

static ts_status model_from_cjson(const cJSON *j, ts_hybrid_device_model *m) {
  memset(m, 0, sizeof *m);
  const char *name = NULL, *source = "";
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "hybrid device: expected a JSON object");
  TS_TRY(ts__json_get_string(j, "name", &name));
  if (cJSON_GetObjectItemCaseSensitive(j, "source")) TS_TRY(ts__json_get_string(j, "source", &source));
  if (strlen(name) >= sizeof m->name || strlen(source) >= sizeof m->source)
    return ts_error(TS_ERR_FORMAT, "hybrid device: name or source too long");
  snprintf(m->name, sizeof m->name, "%s", name);
  snprintf(m->source, sizeof m->source, "%s", source);
  TS_TRY(ts__json_get_bool(j, "measured", &m->measured));
  TS_TRY(ts__json_get_number(j, "launch_s", &m->launch_s));
  if (!(m->launch_s >= 0 && m->launch_s < 1)) return ts_error(TS_ERR_FORMAT, "hybrid device: launch_s out of [0, 1)");
  TS_TRY(curve_from(j, "h2d", &m->h2d));
  TS_TRY(curve_from(j, "d2h", &m->d2h));
  TS_TRY(curve_from(j, "gemm", &m->gemm));
  TS_TRY(curve_from(j, "scan", &m->scan));
  TS_TRY(factors_from(j, "scan_factor", m->scan_factor));
  TS_TRY(factors_from(j, "gemm_factor", m->gemm_factor));
  return TS_OK;
}

ts_status ts_hybrid_device_from_json(const char *json, ts_hybrid_device_model *m) {
  cJSON *j = NULL;
  TS_TRY(ts__json_read_mem(json, strlen(json), "hybrid device", &j));
  ts_status s = model_from_cjson(j, m);
  cJSON_Delete(j);
  return s;
}

static cJSON *curve_json(const ts_hybrid_curve *c) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < c->n; i++) {
    double p[2] = {c->x[i], c->y[i]};
    cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(p, 2));
  }
  return a;
}

ts_status ts_hybrid_device_to_json(const ts_hybrid_device_model *m, char **json) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return ts_error(TS_ERR_OOM, "hybrid device: out of memory");
  cJSON_AddStringToObject(j, "name", m->name);
  cJSON_AddStringToObject(j, "source", m->source);
  cJSON_AddBoolToObject(j, "measured", m->measured);
  cJSON_AddNumberToObject(j, "launch_s", m->launch_s);
  cJSON_AddItemToObject(j, "h2d", curve_json(&m->h2d));
  cJSON_AddItemToObject(j, "d2h", curve_json(&m->d2h));
  cJSON_AddItemToObject(j, "gemm", curve_json(&m->gemm));
  cJSON_AddItemToObject(j, "scan", curve_json(&m->scan));
  cJSON *sf = cJSON_AddObjectToObject(j, "scan_factor"), *gf = cJSON_AddObjectToObject(j, "gemm_factor");
  for (int k = 0; k < TS_HYBRID_NJOBS; k++) {
    if (m->scan_factor[k] > 0) cJSON_AddNumberToObject(sf, ts_hybrid_job_name(k), m->scan_factor[k]);
    if (m->gemm_factor[k] > 0) cJSON_AddNumberToObject(gf, ts_hybrid_job_name(k), m->gemm_factor[k]);
  }
  return ts__json_out(j, "hybrid device", json);
}

ts_status ts_hybrid_device_load(const char *path, ts_hybrid_device_model *m) {
  if (path) {
    cJSON *j = NULL;
    TS_TRY(ts__json_read_file(path, &j));
    ts_status s = model_from_cjson(j, m);
    cJSON_Delete(j);
    if (s != TS_OK) return ts_error(s, "%s: %s", path, ts_last_error());
    return TS_OK;
  }
  ts_artifact_entry *e = NULL;
  int n = 0;
  if (ts_artifact_list(ts__hybrid_device_kind.name, &e, &n) == TS_OK) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (!e[i].bad && e[i].version == ts__hybrid_device_kind.version && (best < 0 || e[i].mtime > e[best].mtime)) best = i;
    if (best >= 0) {
      cJSON *data = NULL;
      ts_provenance prov;
      if (ts__artifact_load(&ts__hybrid_device_kind, e[best].key, &data, &prov) == TS_OK) {
        ts_status s = model_from_cjson(data, m);
        cJSON_Delete(data);
        if (s == TS_OK) {
          free(e);
          return TS_OK;
        }
        ts__artifact_reject(&ts__hybrid_device_kind, e[best].key, ts_last_error());
      }
    }
  }
  free(e);
  ts_hybrid_device_default(m);
  return TS_OK;
}

ts_status ts_hybrid_tenant_parse(const char *spec, ts_hybrid_tenant *t, int *n) {
  *n = 0;
  if (!spec || !*spec) return TS_OK;
  const char *p = spec;
  while (*p) {
    if (*n == TS_HYBRID_MAX_TENANT)
      return ts_error(TS_ERR_INVALID_ARG, "--tenant: at most %d intervals", TS_HYBRID_MAX_TENANT);
    char *end;
    double a = strtod(p, &end);
    if (end == p || *end != ':') goto bad;
    p = end + 1;
    double b = strtod(p, &end);
    if (end == p || *end != ':') goto bad;
    p = end + 1;
    double s = strtod(p, &end);
    if (end == p || (*end && *end != ',')) goto bad;
    if (!(a >= 0 && b > a && b < 1e6 && s >= 0 && s < 1))
      return ts_error(TS_ERR_INVALID_ARG, "--tenant '%s': need 0 <= T0 < T1 and 0 <= SHARE < 1", spec);
    t[*n] = (ts_hybrid_tenant){a, b, s};
    (*n)++;
    p = *end ? end + 1 : end;
  }
  return TS_OK;
bad:
  return ts_error(TS_ERR_INVALID_ARG, "--tenant '%s': expected T0:T1:SHARE[,T0:T1:SHARE...]", spec);
}

/* ---- the modelled device ------------------------------------------------------------------- */

struct ts_hybrid_devq {
  pthread_mutex_t mu;
  double epoch;
  ts_hybrid_tenant ten[TS_HYBRID_MAX_TENANT];
  int nten;
  double free_at[3];
  double *ks, *ke, *done; /* kernel intervals; completion times (for the queue length) */
  int n, cap;
};

ts_status ts_hybrid_devq_create(ts_hybrid_devq **out, const ts_hybrid_tenant *tenant, int ntenant, double epoch) {
  if (ntenant < 0 || ntenant > TS_HYBRID_MAX_TENANT) return ts_error(TS_ERR_INVALID_ARG, "hybrid: bad tenant count");
  ts_hybrid_devq *q = calloc(1, sizeof *q);
  if (!q) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  pthread_mutex_init(&q->mu, NULL);
  q->epoch = epoch;
  for (int i = 0; i < ntenant; i++) q->ten[i] = tenant[i];
  q->nten = ntenant;
  for (int i = 0; i < 3; i++) q->free_at[i] = epoch;
  *out = q;
  return TS_OK;
}

void ts_hybrid_devq_destroy(ts_hybrid_devq *q) {
  if (!q) return;
  pthread_mutex_destroy(&q->mu);
  free(q->ks);
  free(q->ke);
  free(q->done);
  free(q);
}

/* The co-tenant's share at relative time t. */
static double tenant_share(const ts_hybrid_tenant *ten, int n, double t) {
  double s = 0;
  for (int i = 0; i < n; i++)
    if (t >= ten[i].t0 && t < ten[i].t1) s += ten[i].share;
  return s < 0.99 ? s : 0.99;
}

double ts__hybrid_kernel_end(const ts_hybrid_tenant *ten, int n, double epoch, double start, double work) {
  /* the kernel progresses at rate 1 - share(t); integrate across the tenant's interval edges */
  double t = start - epoch, left = work;
  for (int guard = 0; guard < 4 * TS_HYBRID_MAX_TENANT + 4; guard++) {
    double next = INFINITY;
    for (int i = 0; i < n; i++) {
      if (ten[i].t0 > t && ten[i].t0 < next) next = ten[i].t0;
      if (ten[i].t1 > t && ten[i].t1 < next) next = ten[i].t1;
    }
    double rate = 1 - tenant_share(ten, n, t);
    if (t + left / rate <= next) return epoch + t + left / rate;
    left -= (next - t) * rate;
    t = next;
  }
  return epoch + t + left;
}

double ts_hybrid_devq_submit(ts_hybrid_devq *q, double now, const double t[3], double *served) {
  pthread_mutex_lock(&q->mu);
  double a0 = now > q->free_at[0] ? now : q->free_at[0];
  double a1 = a0 + t[0];
  q->free_at[0] = a1;
  double b0 = a1 > q->free_at[1] ? a1 : q->free_at[1];
  double b1 = ts__hybrid_kernel_end(q->ten, q->nten, q->epoch, b0, t[1]);
  q->free_at[1] = b1;
  double c0 = b1 > q->free_at[2] ? b1 : q->free_at[2];
  double c1 = c0 + t[2];
  q->free_at[2] = c1;
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 256;
    double *ks = realloc(q->ks, cap * sizeof *ks);
    if (ks) q->ks = ks;
    double *ke = realloc(q->ke, cap * sizeof *ke);
    if (ke) q->ke = ke;
    double *dn = realloc(q->done, cap * sizeof *dn);
    if (dn) q->done = dn;
    if (ks && ke && dn) q->cap = cap;
  }
  if (q->n < q->cap) {
    q->ks[q->n] = b0;
    q->ke[q->n] = b1;
    q->done[q->n] = c1;
    q->n++;
  }
  pthread_mutex_unlock(&q->mu);
  if (served) *served = b1 - b0;
  return c1;
}

void ts_hybrid_devq_monitor(ts_hybrid_devq *q, double now, double window, double *busy, double *own_out, int *queued) {
  pthread_mutex_lock(&q->mu);
  double w0 = now - window, own = 0;
  int qn = 0;
  for (int i = q->n - 1; i >= 0; i--) {
    double s = q->ks[i] > w0 ? q->ks[i] : w0, e = q->ke[i] < now ? q->ke[i] : now;
    if (e > s) own += (e - s) * (1 - tenant_share(q->ten, q->nten, 0.5 * (s + e) - q->epoch));
    if (q->done[i] > now) qn++;
    if (q->done[i] < w0 && i < q->n - 64) break; /* engines are FIFO: older tasks ended before */
  }
  /* time-sliced: while a co-tenant is active it takes its share whether or not this job runs */
  double ten = 0;
  const int steps = 16;
  for (int i = 0; i < steps; i++) ten += tenant_share(q->ten, q->nten, w0 + (i + 0.5) * window / steps - q->epoch);
  pthread_mutex_unlock(&q->mu);
  own /= window;
  ten /= steps;
  *own_out = own < 1 ? own : 1;
  *busy = own + ten < 1 ? own + ten : 1;
  *queued = qn;
}

int ts_hybrid_devq_kernels(ts_hybrid_devq *q, const double **start, const double **end) {
  *start = q->ks;
  *end = q->ke;
  return q->n;
}
