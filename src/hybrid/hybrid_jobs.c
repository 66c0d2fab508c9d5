/* The four MapReduce jobs: input layout in blocks, the map kernels (CPU), the host feed of a
 * device-fed task (the reduction: hybrid_reduce.c; the word table: hybrid_words.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid/hybrid_internal.h"
#include "io/json_internal.h"
#include "tessera/kernels.h"

#define MAX_BATCHES 8

struct ts_hybrid_job {
  ts_hybrid_job_kind kind;
  int nblocks, rounds;
  char input[1024];
  char pattern[128];
  int repeat;
  /* text */
  char *text;      /* the file */
  size_t flen, len; /* the file's length; the text's (the file repeated) */
  size_t *off; /* nblocks + 1 */
  /* generated: kmeans points / gemm records */
  int64_t n;   /* points or records */
  int d, k;    /* kmeans dims and clusters; gemm in (d) and out (k) */
  uint64_t seed;
  int batches[MAX_BATCHES], nbatches;
  int64_t *first; /* nblocks + 1: first point/record of each block */
  float *W;       /* gemm weights d x k */
  double *centers; /* kmeans mixture centres k x d */
};

static const char *k_names[TS_HYBRID_NJOBS] = {"wordcount", "grep", "kmeans", "gemm"};

const char *ts_hybrid_job_name(ts_hybrid_job_kind k) { return (unsigned)k < TS_HYBRID_NJOBS ? k_names[k] : "?"; }

ts_status ts_hybrid_job_parse(const char *name, ts_hybrid_job_kind *k) {
  for (int i = 0; i < TS_HYBRID_NJOBS; i++)
    if (name && strcmp(name, k_names[i]) == 0) {
      *k = (ts_hybrid_job_kind)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "unknown job '%s' (wordcount, grep, kmeans, gemm)", name ? name : "");
}

int ts_hybrid_job_blocks(const ts_hybrid_job *j) { return j->nblocks; }
int ts_hybrid_job_rounds(const ts_hybrid_job *j) { return j->rounds; }
ts_hybrid_job_kind ts_hybrid_job_kind_of(const ts_hybrid_job *j) { return j->kind; }

/* ---- generated data: a counter-based generator, so any block is made alone ----------------- */

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static double unif(uint64_t h) { return ((h >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static double gauss(uint64_t a, uint64_t b) { return sqrt(-2 * log(unif(a))) * cos(6.283185307179586 * unif(b)); }

static void kmeans_point(const ts_hybrid_job *j, int64_t p, float *x) {
  uint64_t h = mix64(j->seed ^ mix64((uint64_t)p));
  int c = (int)(h % (uint64_t)j->k);
  for (int t = 0; t < j->d; t++) {
    uint64_t a = mix64(h + 2 * (uint64_t)t + 1), b = mix64(h + 2 * (uint64_t)t + 2);
    x[t] = (float)(j->centers[(size_t)c * j->d + t] + gauss(a, b));
  }
}

static void gemm_record(const ts_hybrid_job *j, int64_t r, float *x) {
  uint64_t h = mix64(j->seed * 31 + mix64((uint64_t)r));
  for (int t = 0; t < j->d; t++) x[t] = (float)(2 * unif(mix64(h + (uint64_t)t)) - 1);
}

const float *ts__hybrid_gemm_layout(const ts_hybrid_job *j, int b, int *in, int *out, int64_t *r0, int64_t *r1) {
  *in = j->d;
  *out = j->k;
  *r0 = j->first[b];
  *r1 = j->first[b + 1];
  return j->W;
}
void ts__hybrid_gemm_record(const ts_hybrid_job *j, int64_t r, float *x) { gemm_record(j, r, x); }

/* ---- opening ------------------------------------------------------------------------------- */

static ts_status parse_gen(const char *spec, ts_hybrid_job *j) {
  if (strncmp(spec, "gen:", 4) != 0)
    return ts_error(TS_ERR_INVALID_ARG, "%s input must be 'gen:...' (got '%s')", ts_hybrid_job_name(j->kind), spec);
  j->seed = 1;
  j->nbatches = 0;
  if (j->kind == TS_HYBRID_KMEANS) {
    j->n = 1000000, j->d = 16, j->k = 8;
  } else {
    j->n = 65536, j->d = 1024, j->k = 1024;
  }
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec + 4);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) return ts_error(TS_ERR_INVALID_ARG, "input '%s': '%s' is not key=value", spec, tok);
    *eq = 0;
    const char *key = tok, *val = eq + 1;
    char *end;
    if (strcmp(key, "batches") == 0 && j->kind == TS_HYBRID_GEMM) {
      const char *p = val;
      while (*p) {
        if (j->nbatches == MAX_BATCHES) return ts_error(TS_ERR_INVALID_ARG, "input '%s': at most %d batches", spec, MAX_BATCHES);
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1 << 20 || (*end && *end != '/'))
          return ts_error(TS_ERR_INVALID_ARG, "input '%s': batches must be sizes 1..2^20 separated by '/'", spec);
        j->batches[j->nbatches++] = (int)v;
        p = *end ? end + 1 : end;
      }
      continue;
    }
    long long v = strtoll(val, &end, 10);
    if (end == val || *end || v < 1) return ts_error(TS_ERR_INVALID_ARG, "input '%s': %s must be a positive integer", spec, key);
    bool km = j->kind == TS_HYBRID_KMEANS;
    if (strcmp(key, "seed") == 0) j->seed = (uint64_t)v;
    else if (km && strcmp(key, "points") == 0 && v <= (1ll << 34)) j->n = v;
    else if (km && strcmp(key, "d") == 0 && v <= 1024) j->d = (int)v;
    else if (km && strcmp(key, "k") == 0 && v <= 1024) j->k = (int)v;
    else if (!km && strcmp(key, "records") == 0 && v <= (1ll << 30)) j->n = v;
    else if (!km && strcmp(key, "in") == 0 && v <= 16384) j->d = (int)v;
    else if (!km && strcmp(key, "out") == 0 && v <= 16384) j->k = (int)v;
    else return ts_error(TS_ERR_INVALID_ARG, "input '%s': unknown key '%s' or value out of range", spec, key);
  }
  if (j->nbatches == 0) j->batches[j->nbatches++] = 1024;
  return TS_OK;
}

/* The text is the file repeated `repeat` times, never materialized: a block's bytes are copied out
 * of the file with wrap-around when its task reads them (a map task reads its split). */
static char vchar(const ts_hybrid_job *j, size_t o) { return j->text[o % j->flen]; }

static void vcopy(const ts_hybrid_job *j, size_t o, size_t n, char *dst) {
  while (n > 0) {
    size_t at = o % j->flen, c = j->flen - at < n ? j->flen - at : n;
    memcpy(dst, j->text + at, c);
    dst += c, o += c, n -= c;
  }
}

static ts_status open_text(ts_hybrid_job *j) {
  char *data = NULL;
  size_t len = 0;
  ts_status rs = ts_read_file(j->input, &data, &len);
  if (rs != TS_OK) { /* a missing input is an I/O error here, as every other failure to read it */
    char why[512];
    snprintf(why, sizeof why, "%s", ts_last_error());
    return ts_error(TS_ERR_IO, "%s", why);
  }
  if (len == 0) {
    free(data);
    return ts_error(TS_ERR_FORMAT, "%s: empty input", j->input);
  }
  if (len > ((size_t)1 << 40) / (size_t)j->repeat) {
    free(data);
    return ts_error(TS_ERR_OVERFLOW, "%s x %d: more than 1 TiB", j->input, j->repeat);
  }
  j->text = data;
  j->flen = len;
  len *= (size_t)j->repeat;
  j->len = len;
  if (j->nblocks <= 0) j->nblocks = (int)((len + (2u << 20) - 1) / (2u << 20));
  if ((size_t)j->nblocks > len) j->nblocks = (int)len;
  j->off = malloc(((size_t)j->nblocks + 1) * sizeof *j->off);
  if (!j->off) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  j->off[0] = 0;
  for (int b = 1; b < j->nblocks; b++) {
    size_t o = (size_t)((double)len * b / j->nblocks);
    if (o < j->off[b - 1]) o = j->off[b - 1];
    while (o > 0 && o < len && vchar(j, o - 1) != '\n') o++; /* start after a line end */
    j->off[b] = o;
  }
  j->off[j->nblocks] = len;
  return TS_OK;
}

static ts_status open_gen(ts_hybrid_job *j) {
  TS_TRY(parse_gen(j->input, j));
  if (j->nblocks <= 0) j->nblocks = 32;
  if (j->nblocks > j->n) j->nblocks = (int)j->n;
  j->first = malloc(((size_t)j->nblocks + 1) * sizeof *j->first);
  if (!j->first) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  if (j->kind == TS_HYBRID_KMEANS) {
    for (int b = 0; b <= j->nblocks; b++) j->first[b] = j->n * b / j->nblocks;
    j->centers = malloc((size_t)j->k * j->d * sizeof *j->centers);
    if (!j->centers) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
    for (int i = 0; i < j->k * j->d; i++) j->centers[i] = 20 * unif(mix64(j->seed * 977 + (uint64_t)i)) - 10;
  } else {
    /* phases: the blocks in nbatches equal runs, run p of batch size batches[p]; records scaled */
    int64_t total = 0;
    for (int b = 0; b < j->nblocks; b++) total += j->batches[(int64_t)b * j->nbatches / j->nblocks];
    j->first[0] = 0;
    for (int b = 0; b < j->nblocks; b++) {
      double share = (double)j->batches[(int64_t)b * j->nbatches / j->nblocks] / (double)total;
      int64_t cnt = (int64_t)llround(share * (double)j->n);
      if (cnt < 1) cnt = 1;
      j->first[b + 1] = j->first[b] + cnt;
    }
    j->n = j->first[j->nblocks];
    j->W = ts_malloc((size_t)j->d * j->k * sizeof *j->W);
    if (!j->W) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
    float sc = (float)(1.0 / sqrt((double)j->d));
    for (int64_t i = 0; i < (int64_t)j->d * j->k; i++) j->W[i] = sc * (float)(2 * unif(mix64(j->seed * 131 + (uint64_t)i)) - 1);
  }
  return TS_OK;
}

ts_status ts_hybrid_job_open(const ts_hybrid_job_opts *o, ts_hybrid_job **out) {
  *out = NULL;
  if (!o || !o->input) return ts_error(TS_ERR_INVALID_ARG, "hybrid: a job needs an input");
  if ((unsigned)o->kind >= TS_HYBRID_NJOBS) return ts_error(TS_ERR_INVALID_ARG, "hybrid: bad job kind");
  if (o->blocks < 0 || o->blocks > 100000) return ts_error(TS_ERR_INVALID_ARG, "hybrid: blocks %d out of 0..100000", o->blocks);
  if (o->rounds < 0 || o->rounds > 64) return ts_error(TS_ERR_INVALID_ARG, "hybrid: rounds %d out of 0..64", o->rounds);
  if (strlen(o->input) >= 1024) return ts_error(TS_ERR_INVALID_ARG, "hybrid: input name too long");
  ts_hybrid_job *j = calloc(1, sizeof *j);
  if (!j) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  j->kind = o->kind;
  j->nblocks = o->blocks;
  j->rounds = o->kind == TS_HYBRID_KMEANS ? (o->rounds ? o->rounds : 5) : 1;
  j->repeat = o->repeat > 1 ? o->repeat : 1;
  snprintf(j->input, sizeof j->input, "%s", o->input);
  const char *pat = o->pattern && *o->pattern ? o->pattern : "love";
  if (strlen(pat) >= sizeof j->pattern || strchr(pat, '\n')) {
    free(j);
    return ts_error(TS_ERR_INVALID_ARG, "grep pattern must be one line under %zu bytes", sizeof j->pattern);
  }
  snprintf(j->pattern, sizeof j->pattern, "%s", pat);
  ts_status s = (j->kind == TS_HYBRID_WORDCOUNT || j->kind == TS_HYBRID_GREP) ? open_text(j) : open_gen(j);
  if (s != TS_OK) {
    ts_hybrid_job_close(j);
    return s;
  }
  *out = j;
  return TS_OK;
}

void ts_hybrid_job_close(ts_hybrid_job *j) {
  if (!j) return;
  free(j->text);
  free(j->off);
  free(j->first);
  ts_free(j->W);
  free(j->centers);
  free(j);
}

ts_status ts__hybrid_job_to_json(const ts_hybrid_job *j, char **json) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  cJSON_AddStringToObject(o, "job", ts_hybrid_job_name(j->kind));
  cJSON_AddStringToObject(o, "input", j->input);
  cJSON_AddNumberToObject(o, "blocks", j->nblocks);
  cJSON_AddNumberToObject(o, "rounds", j->rounds);
  cJSON_AddNumberToObject(o, "repeat", j->repeat);
  cJSON_AddStringToObject(o, "pattern", j->pattern);
  return ts__json_out(o, "hybrid job", json);
}

ts_status ts__hybrid_job_from_file(const char *path, ts_hybrid_job **job) {
  cJSON *o = NULL;
  TS_TRY(ts__json_read_file(path, &o));
  const char *name = NULL, *input = NULL, *pattern = NULL;
  int64_t blocks = 0, rounds = 0, repeat = 1;
  ts_hybrid_job_opts jo = {0};
  ts_status s = ts__json_get_string(o, "job", &name);
  if (s == TS_OK) s = ts_hybrid_job_parse(name, &jo.kind);
  if (s == TS_OK) s = ts__json_get_string(o, "input", &input);
  if (s == TS_OK) s = ts__json_get_string(o, "pattern", &pattern);
  if (s == TS_OK) s = ts__json_get_int(o, "blocks", &blocks);
  if (s == TS_OK) s = ts__json_get_int(o, "rounds", &rounds);
  if (s == TS_OK) s = ts__json_get_int(o, "repeat", &repeat);
  if (s == TS_OK && (blocks < 1 || blocks > 100000 || rounds < 1 || rounds > 64 || repeat < 1 || repeat > 100000))
    s = ts_error(TS_ERR_FORMAT, "%s: blocks, rounds or repeat out of range", path);
  if (s == TS_OK) {
    jo.input = input;
    jo.blocks = (int)blocks;
    jo.rounds = (int)rounds;
    jo.repeat = (int)repeat;
    jo.pattern = pattern;
    s = ts_hybrid_job_open(&jo, job);
  }
  cJSON_Delete(o);
  return s;
}

/* ---- cost ---------------------------------------------------------------------------------- */

ts_hybrid_work ts_hybrid_job_work(const ts_hybrid_job *j, int b) {
  ts_hybrid_work w = {0};
  if (b < 0 || b >= j->nblocks) return w;
  if (j->kind == TS_HYBRID_WORDCOUNT || j->kind == TS_HYBRID_GREP) {
    double bytes = (double)(j->off[b + 1] - j->off[b]);
    w.units = bytes;
    w.bytes_in = bytes;
    w.scan_bytes = bytes;
    w.bytes_out = j->kind == TS_HYBRID_GREP ? 8 : bytes / 4; /* the block's (word, count) table */
  } else if (j->kind == TS_HYBRID_KMEANS) {
    double n = (double)(j->first[b + 1] - j->first[b]);
    w.flops = 3.0 * n * j->k * j->d;
    w.units = w.flops;
    w.bytes_in = n * j->d * 4;
    w.bytes_out = (double)j->k * (j->d + 1) * 8;
  } else {
    double n = (double)(j->first[b + 1] - j->first[b]);
    w.flops = 2.0 * n * j->d * j->k;
    w.units = w.flops;
    w.bytes_in = n * j->d * 4;
    w.bytes_out = n * 8; /* a reduced value per record */
  }
  return w;
}

/* ---- map kernels --------------------------------------------------------------------------- */

/* A word byte lower-cased, or 0 for a separator (ASCII letters, digits and the apostrophe). */
static inline char word_byte(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return (char)(c + 32);
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'') return (char)c;
  return 0;
}

/* Words: maximal runs of ASCII letters, digits and apostrophes, lower-cased. The lower-cased words
 * are written to one buffer (the map's keys point into it). */
static ts_status map_wordcount(const char *t, size_t n, char **out, size_t *len) {
  ts__wc_map m = {0};
  char *low = malloc(n + 1);
  if (!low) return ts_error(TS_ERR_OOM, "wordcount: out of memory");
  ts_status s = TS_OK;
  size_t i = 0, q = 0;
  while (i < n && s == TS_OK) {
    while (i < n && !word_byte((unsigned char)t[i])) i++;
    size_t b = q;
    char c;
    while (i < n && (c = word_byte((unsigned char)t[i])) != 0) low[q++] = c, i++;
    if (q > b && q - b < 1u << 20) s = ts__wc_add(&m, low + b, q - b, 1);
  }
  if (s == TS_OK) s = ts__wc_emit(&m, out, len);
  ts__wc_free(&m);
  free(low);
  return s;
}

static ts_status map_grep(const char *t, size_t n, const char *pat, char **out, size_t *len) {
  size_t pl = strlen(pat);
  int64_t hits = 0;
  size_t i = 0;
  while (i < n) {
    const char *nl = memchr(t + i, '\n', n - i);
    size_t e = nl ? (size_t)(nl - t) : n;
    if (pl == 0 || (e - i >= pl && memmem(t + i, e - i, pat, pl))) hits++;
    i = e + 1;
  }
  char *s = malloc(48);
  if (!s) return ts_error(TS_ERR_OOM, "grep: out of memory");
  *len = (size_t)snprintf(s, 48, "matches\t%lld\n", (long long)hits);
  *out = s;
  return TS_OK;
}

static ts_status map_kmeans(const ts_hybrid_job *j, int64_t p0, int64_t p1, const double *cent, char **out,
                            size_t *len) {
  int k = j->k, d = j->d;
  double *sum = calloc((size_t)k * d, sizeof *sum);
  int64_t *cnt = calloc((size_t)k, sizeof *cnt);
  float *x = malloc((size_t)d * sizeof *x);
  size_t cap = (size_t)k * (24 + (size_t)d * 26) + 32;
  char *s = malloc(cap);
  if (!sum || !cnt || !x || !s) {
    free(sum), free(cnt), free(x), free(s);
    return ts_error(TS_ERR_OOM, "kmeans: out of memory");
  }
  for (int64_t p = p0; p < p1; p++) {
    kmeans_point(j, p, x);
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c < k; c++) {
      const double *m = cent + (size_t)c * d;
      double dist = 0;
      for (int t = 0; t < d; t++) {
        double u = x[t] - m[t];
        dist += u * u;
      }
      if (dist < bd) bd = dist, best = c;
    }
    cnt[best]++;
    for (int t = 0; t < d; t++) sum[(size_t)best * d + t] += x[t];
  }
  size_t q = (size_t)snprintf(s, cap, "%d %d\n", k, d);
  for (int c = 0; c < k; c++) {
    q += (size_t)snprintf(s + q, cap - q, "%lld", (long long)cnt[c]);
    for (int t = 0; t < d; t++) q += (size_t)snprintf(s + q, cap - q, " %.17g", sum[(size_t)c * d + t]);
    q += (size_t)snprintf(s + q, cap - q, "\n");
  }
  free(sum), free(cnt), free(x);
  *out = s;
  *len = q;
  return TS_OK;
}

/* y = relu(x W) per record; the record's value is the sum of its outputs; the block's result is
 * the record count and the sum of the records' values in record order (double). */
static ts_status map_gemm(const ts_hybrid_job *j, int64_t r0, int64_t r1, char **out, size_t *len) {
  const int64_t chunk = 256;
  float *X = ts_malloc((size_t)chunk * j->d * sizeof *X), *Y = ts_malloc((size_t)chunk * j->k * sizeof *Y);
  ts_context *ctx = NULL;
  ts_status s = (X && Y) ? ts_context_create(&ctx, 1) : ts_error(TS_ERR_OOM, "gemm: out of memory");
  double total = 0;
  for (int64_t r = r0; s == TS_OK && r < r1; r += chunk) {
    int64_t m = r1 - r < chunk ? r1 - r : chunk;
    for (int64_t i = 0; i < m; i++) gemm_record(j, r + i, X + i * j->d);
    s = ts_sgemm(ctx, TS_NO_TRANS, TS_NO_TRANS, m, j->k, j->d, 1.0f, X, j->d, j->W, j->k, 0.0f, Y, j->k);
    for (int64_t i = 0; s == TS_OK && i < m; i++) {
      double v = 0;
      for (int c = 0; c < j->k; c++) v += Y[i * j->k + c] > 0 ? Y[i * j->k + c] : 0;
      total += v;
    }
  }
  ts_context_destroy(ctx);
  ts_free(X);
  ts_free(Y);
  if (s != TS_OK) return s;
  char *o = malloc(64);
  if (!o) return ts_error(TS_ERR_OOM, "gemm: out of memory");
  *len = (size_t)snprintf(o, 64, "gemm\t%lld\t%.17g\n", (long long)(r1 - r0), total);
  *out = o;
  return TS_OK;
}

ts_status ts__hybrid_cpu_part(const ts_hybrid_job *j, int b, double frac, const double *cent, char **out, size_t *len) {
  if (b < 0 || b >= j->nblocks) return ts_error(TS_ERR_INVALID_ARG, "block %d out of 0..%d", b, j->nblocks - 1);
  if (!(frac >= 0 && frac <= 1)) frac = 1;
  if (j->kind == TS_HYBRID_WORDCOUNT || j->kind == TS_HYBRID_GREP) {
    size_t o0 = j->off[b], o1 = j->off[b + 1];
    size_t e = o0 + (size_t)((double)(o1 - o0) * frac);
    while (e < o1 && e > o0 && vchar(j, e - 1) != '\n') e++;
    if (frac >= 1) e = o1;
    char *buf = malloc(e - o0 + 1);
    if (!buf) return ts_error(TS_ERR_OOM, "hybrid: %zu bytes for block %d", e - o0, b);
    vcopy(j, o0, e - o0, buf);
    ts_status s = j->kind == TS_HYBRID_WORDCOUNT ? map_wordcount(buf, e - o0, out, len)
                                                 : map_grep(buf, e - o0, j->pattern, out, len);
    free(buf);
    return s;
  }
  int64_t p0 = j->first[b], p1 = j->first[b + 1];
  int64_t e = frac >= 1 ? p1 : p0 + (int64_t)((double)(p1 - p0) * frac);
  if (j->kind == TS_HYBRID_KMEANS) {
    if (!cent) return ts_error(TS_ERR_INVALID_ARG, "kmeans: no centroids");
    return map_kmeans(j, p0, e, cent, out, len);
  }
  return map_gemm(j, p0, e, out, len);
}

ts_status ts_hybrid_job_map(const ts_hybrid_job *j, int b, const double *cent, char **out, size_t *len) {
  return ts__hybrid_cpu_part(j, b, 1.0, cent, out, len);
}

uint64_t ts__hybrid_feed_part(const ts_hybrid_job *j, int b, double f0, double f1) {
  if (b < 0 || b >= j->nblocks) return 0;
  uint64_t h = 0;
  if (j->kind == TS_HYBRID_WORDCOUNT || j->kind == TS_HYBRID_GREP) {
    size_t o0 = j->off[b], n = j->off[b + 1] - o0;
    size_t a = (size_t)((double)n * f0), e = (size_t)((double)n * f1);
    if (e <= a) return 0;
    char *buf = malloc(e - a);
    if (!buf) return 0;
    vcopy(j, o0 + a, e - a, buf);
    for (size_t i = 0; i < e - a; i += 4096) h += (uint8_t)buf[i];
    free(buf);
    return h;
  }
  int d = j->d;
  int64_t p0 = j->first[b], n = j->first[b + 1] - p0;
  int64_t a = p0 + (int64_t)((double)n * f0), e = p0 + (int64_t)((double)n * f1);
  float *x = malloc((size_t)d * sizeof *x * 256);
  if (!x) return 0;
  for (int64_t p = a; p < e; p += 256) {
    int64_t m = e - p < 256 ? e - p : 256;
    for (int64_t i = 0; i < m; i++) {
      if (j->kind == TS_HYBRID_KMEANS) kmeans_point(j, p + i, x + i * d);
      else gemm_record(j, p + i, x + i * d);
    }
    uint32_t u;
    memcpy(&u, x, sizeof u);
    h += u;
  }
  free(x);
  return h;
}

uint64_t ts_hybrid_job_feed(const ts_hybrid_job *j, int b) { return ts__hybrid_feed_part(j, b, 0, 1); }

ts_status ts_hybrid_job_centroids0(const ts_hybrid_job *j, double **c, int *k, int *d) {
  if (j->kind != TS_HYBRID_KMEANS) return ts_error(TS_ERR_INVALID_ARG, "centroids: not a kmeans job");
  double *v = malloc((size_t)j->k * j->d * sizeof *v);
  float *x = malloc((size_t)j->d * sizeof *x);
  if (!v || !x) {
    free(v), free(x);
    return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  }
  /* points spread over the input (a deterministic stand-in for random initial centres) */
  for (int i = 0; i < j->k; i++) {
    kmeans_point(j, (int64_t)((double)j->n * (i + 0.5) / j->k), x);
    for (int t = 0; t < j->d; t++) v[(size_t)i * j->d + t] = x[t];
  }
  free(x);
  *c = v;
  *k = j->k;
  *d = j->d;
  return TS_OK;
}

void ts__hybrid_job_kd(const ts_hybrid_job *j, int *k, int *d) {
  *k = j->k;
  *d = j->d;
}
