/* The shared measure/artifact core: statistics, the timing engine's bookkeeping (never its
 * figures: no test asserts on time), provenance, keys and the artifact store. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/artifact_internal.h"
#include "tessera/artifact.h"
#include "tessera/measure.h"
#include "tst.h"

static void test_stats(void) {
  double v[] = {5, 1, 4, 2, 3};
  CHECK(ts_median(v, 5) == 3, "median of 1..5");
  double w[] = {4, 1, 3, 2};
  CHECK(ts_median(w, 4) == 2.5, "median of 1..4 averages the middle two");
  double q[] = {0, 10, 20, 30, 40};
  CHECK(ts_quantile(q, 5, 0.25) == 10 && ts_quantile(q, 5, 0.125) == 5, "quantiles interpolate");
  ts_summary s;
  double x[] = {3, 1, 2, 4};
  ts_summarize(x, 4, &s);
  CHECK(s.n == 4 && s.min == 1 && s.max == 4 && s.median == 2.5 && s.mean == 2.5 && s.q1 == 1.75 && s.q3 == 3.25,
        "summary %d %g %g %g %g %g %g", s.n, s.min, s.q1, s.median, s.q3, s.max, s.mean);
  ts_summarize(NULL, 0, &s);
  CHECK(s.n == 0 && isnan(s.median), "an empty summary is NaN");
  double nan_first[] = {NAN, 2, 1};
  qsort(nan_first, 3, sizeof(double), ts_cmp_double);
  CHECK(nan_first[0] == 1 && nan_first[1] == 2 && isnan(nan_first[2]), "NaN sorts last");

  /* 20 pairs: P(B(20, 1/2) <= 5) = 0.0207 <= 0.025 < P(B <= 6) = 0.0577, so k = 6: [r6, r15] */
  double r[20], med, lo, hi;
  for (int i = 0; i < 20; i++) r[i] = 20 - i; /* 1..20 reversed */
  ts_ratio_ci(r, 20, &med, &lo, &hi);
  CHECK(med == 10.5 && lo == 6 && hi == 15, "ratio CI of 1..20: %g [%g, %g]", med, lo, hi);
  double r3[] = {1.2, 0.9, 1.0};
  ts_ratio_ci(r3, 3, &med, &lo, &hi);
  CHECK(med == 1.0 && lo == 0.9 && hi == 1.2, "under 6 pairs the CI is [min, max]");
}

typedef struct counter {
  int calls, fail_at;
  volatile double sink;
} counter;

static ts_status count_call(void *arg) {
  counter *c = arg;
  c->calls++;
  for (int i = 0; i < 200; i++) c->sink += i;
  if (c->fail_at && c->calls == c->fail_at) return ts_error(TS_ERR_INTERNAL, "candidate failed on call %d", c->calls);
  return TS_OK;
}

static int g_before;
static void before(void *arg) { (*(int *)arg)++; }

static void test_engine(void) {
  counter a = {0}, b = {0}, f = {.fail_at = 4};
  ts_measure_fn fn[3] = {count_call, count_call, count_call};
  void *arg[3] = {&a, &b, &f};
  ts_measure_opts o = ts_measure_opts_default();
  o.warmup = 2, o.rounds = 7, o.min_time_s = 0, o.before = before, o.before_arg = &g_before;
  ts_measure_result res[3];
  ts_measure_info info;
  CHECK_OK(ts_measure_run(3, fn, arg, &o, res, &info));
  CHECK(info.rounds == 7, "rounds %d", info.rounds);
  CHECK(a.calls == 9 && b.calls == 9, "2 warm-up + 7 timed calls each: %d %d", a.calls, b.calls);
  CHECK(res[0].status == TS_OK && res[0].s.n == 7 && res[1].s.n == 7, "samples %d %d", res[0].s.n, res[1].s.n);
  CHECK(res[2].status == TS_ERR_INTERNAL && res[2].s.n == 1 && f.calls == 4,
        "the failing candidate keeps the sample before its failure: status %d n %d calls %d", res[2].status, res[2].s.n,
        f.calls);
  CHECK(g_before == 7 + 7 + 2, "before() ran before every timed call: %d", g_before);
  CHECK(res[0].ratio == 1 && res[0].ratio_lo == 1 && res[0].ratio_hi == 1, "the baseline's ratio to itself is 1");
  CHECK(res[1].ratio > 0 && res[1].ratio_lo <= res[1].ratio && res[1].ratio <= res[1].ratio_hi, "ratio inside its CI");
  CHECK(res[0].s.min <= res[0].s.q1 && res[0].s.q1 <= res[0].s.median && res[0].s.median <= res[0].s.q3 &&
            res[0].s.q3 <= res[0].s.max,
        "ordered summary");

  /* all fail: the candidate's error comes back */
  counter g = {.fail_at = 1};
  ts_measure_result r1;
  CHECK_ERR_CONTAINS(ts_measure_one(count_call, &g, &o, &r1), "candidate failed on call 1");

  /* min_sample_s: a sample is a batch of calls; thread clock */
  counter h = {0};
  o = ts_measure_opts_default();
  o.clock = TS_CLOCK_THREAD_CPU, o.warmup = 0, o.rounds = 3, o.min_time_s = 0, o.min_sample_s = 1e-4;
  CHECK_OK(ts_measure_one(count_call, &h, &o, &r1));
  CHECK(r1.s.n == 3 && h.calls >= 3, "batched samples: n %d calls %d", r1.s.n, h.calls);

  /* pruning only touches prunable candidates */
  counter p0 = {0}, p1 = {0};
  ts_measure_fn pf[2] = {count_call, count_call};
  void *pa[2] = {&p0, &p1};
  bool prunable[2] = {false, false};
  o = ts_measure_opts_default();
  o.rounds = 2, o.min_time_s = 0, o.prune = 1e-9, o.prunable = prunable;
  ts_measure_result pr[2];
  CHECK_OK(ts_measure_run(2, pf, pa, &o, pr, NULL));
  CHECK(!pr[0].pruned && !pr[1].pruned && pr[0].s.n == 2 && pr[1].s.n == 2, "nothing prunable, nothing pruned");

  o = ts_measure_opts_default();
  o.rounds = 0;
  CHECK_STATUS(ts_measure_one(count_call, &h, &o, &r1), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_measure_run(0, fn, arg, NULL, res, NULL), TS_ERR_INVALID_ARG);
}

static int g_log[8], g_nlog;
static ts_status log_call(void *arg) {
  if (g_nlog < 8) g_log[g_nlog++] = *(int *)arg;
  return TS_OK;
}

static void test_alternate(void) {
  int id[2] = {0, 1};
  ts_measure_fn fn[2] = {log_call, log_call};
  void *arg[2] = {&id[0], &id[1]};
  ts_measure_opts o = ts_measure_opts_default();
  o.warmup = 0, o.rounds = o.max_rounds = 3, o.min_time_s = 0, o.alternate = true;
  ts_measure_result r[2];
  CHECK_OK(ts_measure_run(2, fn, arg, &o, r, NULL));
  CHECK(g_nlog == 6 && g_log[0] == 0 && g_log[1] == 1 && g_log[2] == 1 && g_log[3] == 0 && g_log[4] == 0 && g_log[5] == 1,
        "alternating order: %d calls", g_nlog);
  CHECK(r[1].ratio_q1 <= r[1].ratio && r[1].ratio <= r[1].ratio_q3, "ratio quartiles around the median");
}

static void test_provenance(void) {
  ts_provenance a, b;
  ts_provenance_here(&a, TS_ISA_SCALAR, 2);
  CHECK(!strcmp(a.kernels, "scalar") && a.threads == 2 && strlen(a.date) == 20 && !strcmp(a.tessera_version, ts_version()),
        "here: %s %d %s %s", a.kernels, a.threads, a.date, a.tessera_version);
  b = a;
  char why[128];
  CHECK(ts_provenance_matches(&a, &b, TS_PROV_THREADS | TS_PROV_VERSION | TS_PROV_PROFILE, why, sizeof why), "%s", why);
  b.threads = 3;
  CHECK(ts_provenance_matches(&a, &b, 0, why, sizeof why), "threads not compared without the flag");
  CHECK(!ts_provenance_matches(&a, &b, TS_PROV_THREADS, why, sizeof why) && strstr(why, "threads"), "%s", why);
  b = a;
  snprintf(b.kernels, sizeof b.kernels, "avx512");
  CHECK(!ts_provenance_matches(&a, &b, 0, why, sizeof why) && strstr(why, "kernels"), "%s", why);

  snprintf(a.clock, sizeof a.clock, "thread_cpu");
  snprintf(a.profile, sizeof a.profile, "0123456789abcdef");
  char *js = NULL;
  CHECK_OK(ts_provenance_to_json(&a, &js));
  CHECK_OK(ts_provenance_from_json(js, &b));
  CHECK(js && !memcmp(&a, &b, sizeof a), "provenance round-trips through JSON: %s", js ? js : "");
  free(js);
  CHECK_OK(ts_provenance_from_json("{}", &b));
  CHECK(b.cpu_model[0] == 0 && b.threads == 0, "absent fields are empty");
  CHECK_STATUS(ts_provenance_from_json("{\"threads\": -1}", &b), TS_ERR_FORMAT);
  CHECK_STATUS(ts_provenance_from_json("{\"kernels\": 7}", &b), TS_ERR_FORMAT);
  CHECK_STATUS(ts_provenance_from_json("{\"kernels\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", &b), TS_ERR_FORMAT);
  CHECK_STATUS(ts_provenance_from_json("[1", &b), TS_ERR_FORMAT);
}

static void test_hash(void) {
  ts_hash a, b;
  char ka[17], kb[17];
  ts_hash_init(&a, "salt");
  ts_hash_init(&b, "salt");
  CHECK(a.h == b.h, "deterministic");
  ts_hash_str(&a, "ab"), ts_hash_str(&a, "c");
  ts_hash_str(&b, "a"), ts_hash_str(&b, "bc");
  CHECK(a.h != b.h, "string boundaries count");
  ts_hash_hex(&a, ka), ts_hash_hex(&b, kb);
  CHECK(strlen(ka) == 16 && strcmp(ka, kb), "hex keys %s %s", ka, kb);
  /* the value is part of the cache's format: a change re-plans every cached attention plan */
  ts_hash_init(&a, NULL);
  ts_hash_i64(&a, 42);
  ts_hash_str(&a, "x");
  ts_hash_hex(&a, ka);
  CHECK(!strcmp(ka, "83fcbca9208c43b1"), "key %s (the attention plan cache's keys since 2026-10)", ka);
  ts_hash_init(&b, NULL);
  ts_hash_i64(&b, 42);
  ts_hash_str(&b, "x");
  CHECK(a.h == b.h, "same inputs, same key");
}

/* ---- the artifact store ---------------------------------------------------------------- */

typedef struct job {
  int computes, accepts;
  double value;
  bool reject_stale;
} job;

static ts_status job_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  job *j = ctx;
  j->accepts++;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, "value");
  if (!cJSON_IsNumber(v)) return ts_error(TS_ERR_FORMAT, "value is not a number");
  if (j->reject_stale) return ts_error(TS_ERR_NOT_FOUND, "stale");
  (void)prov;
  j->value = v->valuedouble;
  return TS_OK;
}

static ts_status job_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  job *j = ctx;
  j->computes++;
  j->value = 42;
  ts_provenance_here(prov, ts_isa_active(), 1);
  *data = cJSON_CreateObject();
  if (!*data || !cJSON_AddNumberToObject(*data, "value", 42)) return ts_error(TS_ERR_OOM, "oom");
  return TS_OK;
}

static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static void test_artifacts(void) {
  char tmpl[] = "/tmp/tessera-artifact-XXXXXX";
  if (!mkdtemp(tmpl)) {
    CHECK(0, "mkdtemp failed");
    return;
  }
  setenv("TESSERA_CACHE", tmpl, 1);

  const ts__artifact_ops ops = {{"test-kind", 3}, job_accept, job_compute, NULL};
  job j = {0};
  bool computed;
  CHECK_OK(ts__artifact_get(&ops, "k1", &j, &computed));
  CHECK(computed && j.computes == 1 && j.accepts == 0 && j.value == 42, "first get computes");
  j.value = 0;
  CHECK_OK(ts__artifact_get(&ops, "k1", &j, &computed));
  CHECK(!computed && j.computes == 1 && j.accepts == 1 && j.value == 42, "second get reads the store");

  char path[4400], *data = NULL;
  CHECK_OK(ts_artifact_path("test-kind", "k1", path, sizeof path));
  CHECK(strstr(path, "/test-kind/k1.json") != NULL, "%s", path);
  ts_provenance pv;
  CHECK_OK(ts_artifact_load("test-kind", 3, "k1", &data, &pv));
  CHECK(data && !strcmp(data, "{\"value\":42}") && pv.threads == 1, "payload %s", data ? data : "");
  free(data), data = NULL;
  CHECK_STATUS(ts_artifact_load("test-kind", 4, "k1", &data, NULL), TS_ERR_NOT_FOUND);
  CHECK(exists(path), "another version's file stays");

  /* a stale artifact is re-made silently */
  j.reject_stale = true;
  CHECK_OK(ts__artifact_get(&ops, "k1", &j, &computed));
  CHECK(computed && j.computes == 2, "stale: re-made");
  j.reject_stale = false;

  /* corrupt and foreign files are moved aside and re-made */
  char bad[4500];
  snprintf(bad, sizeof bad, "%s.bad", path);
  CHECK_OK(ts_write_file_atomic(path, "{\"artifact\": \"test-kind\", \"vers", 30));
  CHECK_OK(ts__artifact_get(&ops, "k1", &j, &computed));
  CHECK(computed && j.computes == 3 && exists(bad), "truncated file moved aside");
  unlink(bad);
  const char *foreign = "{\"artifact\":\"other\",\"version\":3,\"key\":\"k1\",\"data\":{\"value\":1}}";
  CHECK_OK(ts_write_file_atomic(path, foreign, strlen(foreign)));
  CHECK_STATUS(ts_artifact_load("test-kind", 3, "k1", &data, NULL), TS_ERR_NOT_FOUND);
  CHECK(exists(bad) && !exists(path), "foreign kind moved aside");
  unlink(bad);
  const char *wrong = "{\"artifact\":\"test-kind\",\"version\":3,\"key\":\"k1\",\"data\":{\"value\":\"x\"}}";
  CHECK_OK(ts_write_file_atomic(path, wrong, strlen(wrong)));
  CHECK_OK(ts__artifact_get(&ops, "k1", &j, &computed));
  CHECK(computed && exists(bad) && j.value == 42, "a payload the reader rejects is moved aside");

  /* measured figures come back as the same doubles (cJSON alone prints 15 digits whenever they
   * come within a relative DBL_EPSILON, 0.0047814162731586911 as ...86902), in objects and arrays */
  {
    const double figs[] = {0.0047814162731586911, 0.1, 1.0 / 3.0, 6.02214076e23, -2.5e-310, 12345.678901234567};
    const int nf = (int)(sizeof figs / sizeof figs[0]);
    cJSON *d = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(d, "a");
    for (int i = 0; i < nf; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(figs[i]));
    cJSON_AddNumberToObject(d, "x", figs[0]);
    CHECK_OK(ts__artifact_store(&ops.kind, "exact", d, NULL));
    cJSON_Delete(d);
    char *text = NULL;
    CHECK_OK(ts_artifact_load("test-kind", 3, "exact", &text, NULL));
    cJSON *back = text ? cJSON_Parse(text) : NULL;
    const cJSON *ba = cJSON_GetObjectItemCaseSensitive(back, "a"), *bx = cJSON_GetObjectItemCaseSensitive(back, "x");
    int same = cJSON_IsNumber(bx) && bx->valuedouble == figs[0];
    for (int i = 0; i < nf; i++) same += cJSON_IsNumber(cJSON_GetArrayItem(ba, i)) && cJSON_GetArrayItem(ba, i)->valuedouble == figs[i];
    CHECK(same == nf + 1, "%d of %d numbers read back as the stored doubles: %s", same, nf + 1, text ? text : "");
    cJSON_Delete(back);
    free(text);
  }

  /* names */
  CHECK_STATUS(ts_artifact_path("../etc", "k", path, sizeof path), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_artifact_path("kind", "a/b", path, sizeof path), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_artifact_store("kind", 1, "k", "{not json", NULL), TS_ERR_FORMAT);

  /* list, trim, clear */
  CHECK_OK(ts_artifact_store("other-kind", 1, "a", "[1,2,3]", NULL));
  CHECK_OK(ts_artifact_store("other-kind", 1, "b", "{\"x\": \"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"}", NULL));
  ts_artifact_entry *e = NULL;
  int n = 0;
  CHECK_OK(ts_artifact_list(NULL, &e, &n));
  CHECK(n == 5, "listed %d (k1, k1.bad, exact, a, b)", n);
  int nbad = 0, v1 = 0;
  for (int i = 0; i < n; i++) nbad += e[i].bad, v1 += e[i].version == 1;
  CHECK(nbad == 1 && v1 == 2 && !strcmp(e[0].kind, "other-kind") && !strcmp(e[0].key, "a"), "entries");
  free(e);
  CHECK_OK(ts_artifact_list("test-kind", &e, &n));
  CHECK(n == 3, "kind filter: %d", n);
  free(e);
  int removed = 0;
  CHECK_OK(ts_artifact_trim(0, &removed));
  CHECK(removed == 4, "trim to 0 keeps only the newest file: removed %d", removed);
  CHECK_OK(ts_artifact_store("other-kind", 1, "a", "[1]", NULL));
  CHECK_OK(ts_artifact_clear("other-kind", &removed));
  CHECK_OK(ts_artifact_list(NULL, &e, &n));
  CHECK(n == 0, "trim left other-kind's b alone, clear by kind removed it and a: %d left", n);
  free(e);
  CHECK_OK(ts_artifact_clear(NULL, &removed));
  CHECK_OK(ts_artifact_list(NULL, &e, &n));
  CHECK(n == 0, "clear all: %d left", n);
  free(e);
  rmdir(tmpl);
}

int main(void) {
  test_stats();
  test_engine();
  test_alternate();
  test_provenance();
  test_hash();
  test_artifacts();
  return tst_finish();
}
