/* The reduction of the jobs' map results, in block order (the Spark driver reduces the same way, so
 * both engines give byte-identical outputs), and kmeans' centroid files. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid/hybrid_internal.h"

struct ts_hybrid_reducer {
  ts_hybrid_job_kind kind;
  int k, d; /* kmeans clusters and dimensions */
  ts__wc_map wc;
  int64_t n;
  double sum;
  double *ksum;
  int64_t *kcnt;
};

ts_status ts_hybrid_reducer_create(const ts_hybrid_job *job, ts_hybrid_reducer **out) {
  ts_hybrid_reducer *r = calloc(1, sizeof *r);
  if (!r) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  r->kind = ts_hybrid_job_kind_of(job);
  ts__hybrid_job_kd(job, &r->k, &r->d);
  if (r->kind == TS_HYBRID_KMEANS) {
    r->ksum = calloc((size_t)r->k * r->d, sizeof *r->ksum);
    r->kcnt = calloc((size_t)r->k, sizeof *r->kcnt);
    if (!r->ksum || !r->kcnt) {
      ts_hybrid_reducer_destroy(r);
      return ts_error(TS_ERR_OOM, "hybrid: out of memory");
    }
  }
  *out = r;
  return TS_OK;
}

void ts_hybrid_reducer_destroy(ts_hybrid_reducer *r) {
  if (!r) return;
  ts__wc_free(&r->wc);
  free(r->ksum);
  free(r->kcnt);
  free(r);
}

static ts_status bad_result(const ts_hybrid_reducer *r, const char *why) {
  return ts_error(TS_ERR_FORMAT, "%s map result: %s", ts_hybrid_job_name(r->kind), why);
}

ts_status ts_hybrid_reducer_add(ts_hybrid_reducer *r, const char *text, size_t n) {
  char *copy = malloc(n + 1);
  if (!copy) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  memcpy(copy, text, n);
  copy[n] = 0;
  ts_status s = TS_OK;
  char *end;
  if (r->kind == TS_HYBRID_WORDCOUNT) {
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line && s == TS_OK; line = strtok_r(NULL, "\n", &save)) {
      char *tab = strrchr(line, '\t');
      if (!tab || tab == line) {
        s = bad_result(r, "a line is not 'word<TAB>count'");
        break;
      }
      long long c = strtoll(tab + 1, &end, 10);
      if (*end || c < 1) s = bad_result(r, "a count is not a positive integer");
      else s = ts__wc_add_owned(&r->wc, line, (size_t)(tab - line), c);
    }
  } else if (r->kind == TS_HYBRID_GREP) {
    if (strncmp(copy, "matches\t", 8) != 0) s = bad_result(r, "expected 'matches<TAB>N'");
    else {
      long long c = strtoll(copy + 8, &end, 10);
      if (end == copy + 8 || (*end && *end != '\n') || c < 0) s = bad_result(r, "bad match count");
      else r->n += c;
    }
  } else if (r->kind == TS_HYBRID_GEMM) {
    if (strncmp(copy, "gemm\t", 5) != 0) s = bad_result(r, "expected 'gemm<TAB>N<TAB>SUM'");
    else {
      long long c = strtoll(copy + 5, &end, 10);
      double v = *end == '\t' ? strtod(end + 1, &end) : NAN;
      if (c < 0 || !isfinite(v) || (*end && *end != '\n')) s = bad_result(r, "bad record count or sum");
      else r->n += c, r->sum += v;
    }
  } else {
    char *p = copy;
    long k = strtol(p, &end, 10), d = end != p ? strtol(end, &end, 10) : -1;
    if (k != r->k || d != r->d) s = bad_result(r, "header 'k d' does not match the job");
    p = end;
    double *sum = s == TS_OK ? malloc((size_t)k * d * sizeof *sum) : NULL;
    int64_t *cnt = s == TS_OK ? malloc((size_t)k * sizeof *cnt) : NULL;
    if (s == TS_OK && (!sum || !cnt)) s = ts_error(TS_ERR_OOM, "hybrid: out of memory");
    for (long c = 0; s == TS_OK && c < k; c++) {
      long long v = strtoll(p, &end, 10);
      if (end == p || v < 0) s = bad_result(r, "bad cluster count");
      cnt[c] = v;
      p = end;
      for (long t = 0; s == TS_OK && t < d; t++) {
        double x = strtod(p, &end);
        if (end == p || !isfinite(x)) s = bad_result(r, "bad coordinate sum");
        sum[c * d + t] = x;
        p = end;
      }
    }
    while (s == TS_OK && *p) {
      if (!isspace((unsigned char)*p)) s = bad_result(r, "trailing text");
      p++;
    }
    if (s == TS_OK) /* all parsed first: a bad result changes nothing */
      for (long c = 0; c < k; c++) {
        r->kcnt[c] += cnt[c];
        for (long t = 0; t < d; t++) r->ksum[c * d + t] += sum[c * d + t];
      }
    free(sum);
    free(cnt);
  }
  free(copy);
  return s;
}

ts_status ts_hybrid_reducer_next_round(ts_hybrid_reducer *r, double *cent) {
  if (r->kind != TS_HYBRID_KMEANS) return TS_OK;
  for (int c = 0; c < r->k; c++) {
    for (int t = 0; t < r->d; t++) {
      if (r->kcnt[c] > 0) cent[(size_t)c * r->d + t] = r->ksum[(size_t)c * r->d + t] / (double)r->kcnt[c];
      r->ksum[(size_t)c * r->d + t] = 0;
    }
    r->kcnt[c] = 0;
  }
  return TS_OK;
}

static ts_status centroids_text(const double *c, int k, int d, char **out, size_t *len) {
  size_t cap = 32 + (size_t)k * d * 26;
  char *s = malloc(cap);
  if (!s) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  size_t q = (size_t)snprintf(s, cap, "%d %d\n", k, d);
  for (int i = 0; i < k; i++) {
    for (int t = 0; t < d; t++) q += (size_t)snprintf(s + q, cap - q, t ? " %.17g" : "%.17g", c[(size_t)i * d + t]);
    q += (size_t)snprintf(s + q, cap - q, "\n");
  }
  *out = s;
  *len = q;
  return TS_OK;
}

ts_status ts_hybrid_reducer_result(ts_hybrid_reducer *r, const double *cent, char **out, size_t *len) {
  if (r->kind == TS_HYBRID_WORDCOUNT) return ts__wc_emit(&r->wc, out, len);
  if (r->kind == TS_HYBRID_KMEANS) return centroids_text(cent, r->k, r->d, out, len);
  char *s = malloc(80);
  if (!s) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  if (r->kind == TS_HYBRID_GREP) *len = (size_t)snprintf(s, 80, "matches\t%lld\n", (long long)r->n);
  else *len = (size_t)snprintf(s, 80, "gemm\t%lld\t%.17g\n", (long long)r->n, r->sum);
  *out = s;
  return TS_OK;
}

ts_status ts_hybrid_centroids_write(const char *path, const double *c, int k, int d) {
  char *s;
  size_t n;
  TS_TRY(centroids_text(c, k, d, &s, &n));
  ts_status st = ts_write_file_atomic(path, s, n);
  free(s);
  return st;
}

ts_status ts_hybrid_centroids_read(const char *path, int k, int d, double *c) {
  char *s;
  size_t n;
  TS_TRY(ts_read_file(path, &s, &n));
  char *p = s, *end;
  long kk = strtol(p, &end, 10), dd = end != p ? strtol(end, &end, 10) : -1;
  ts_status st = TS_OK;
  if (kk != k || dd != d) st = ts_error(TS_ERR_FORMAT, "%s: header is not '%d %d'", path, k, d);
  p = end;
  for (long i = 0; st == TS_OK && i < (long)k * d; i++) {
    c[i] = strtod(p, &end);
    if (end == p || !isfinite(c[i])) st = ts_error(TS_ERR_FORMAT, "%s: value %ld is not a finite number", path, i);
    p = end;
  }
  free(s);
  return st;
}

ts_status ts__hybrid_centroids_load(const ts_hybrid_job *job, const char *path, double **c) {
  int k, d;
  ts__hybrid_job_kd(job, &k, &d);
  double *v = malloc((size_t)k * d * sizeof *v);
  if (!v) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  ts_status s = ts_hybrid_centroids_read(path, k, d, v);
  if (s != TS_OK) {
    free(v);
    return s;
  }
  *c = v;
  return TS_OK;
}
