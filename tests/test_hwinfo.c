/* Machine profile and benchmark harness: JSON save/load round trip, malformed profiles rejected
 * with the field named, cache matching, a short measurement's sanity (no timing thresholds: only
 * signs and the 1-thread <= all-thread invariant), and the harness's statistics and reports. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/artifact_internal.h"
#include "harness.h"
#include "tessera/artifact.h"
#include "tessera/hwinfo.h"
#include "tst.h"

static char g_dir[1200]; /* this test's own cache dir, so parallel CLI tests never race with it */

static ts_machine_profile sample_profile(void) {
  ts_machine_profile p;
  memset(&p, 0, sizeof p);
  snprintf(p.cpu_model, sizeof p.cpu_model, "%s", ts_cpu()->model);
  snprintf(p.vendor, sizeof p.vendor, "%s", ts_cpu()->vendor);
  snprintf(p.isa, sizeof p.isa, "sse4.2 avx avx2 fma");
  snprintf(p.kernels, sizeof p.kernels, "%s", ts_isa_name(ts_isa_active()));
  snprintf(p.peak_isa, sizeof p.peak_isa, "avx2");
  p.threads = 3;
  p.peak_gflops_fp32_1t = 112.34567890123;
  p.peak_gflops_fp32 = 224.1;
  p.bandwidth_gbs = 47.25;
  p.bandwidth_gbs_1t = 0.1 + 0.2; /* needs 17 digits: cJSON prints 0.3 */
  p.l1d_bytes = 32768;
  p.l2_bytes = 1 << 20;
  p.l3_bytes = (int64_t)5 << 40;
  snprintf(p.date, sizeof p.date, "2024-05-01T12:34:56Z");
  snprintf(p.host, sizeof p.host, "testhost");
  p.version = TS_HWINFO_VERSION;
  p.load_avg = 0.25;
  p.cpus_online = 4;
  p.xfer_ns = 26.5;
  p.other_cpus = 0.125;
  return p;
}

/* cJSON prints a double with 15 significant digits when that reads back within DBL_EPSILON
 * relative, so a round trip may move the last bit: compare rates to 4 ulps. */
static bool near(double x, double y) { return fabs(x - y) <= 4 * 2.220446049250313e-16 * fmax(fabs(x), fabs(y)); }

static bool same_profile(const ts_machine_profile *a, const ts_machine_profile *b) {
  return !strcmp(a->cpu_model, b->cpu_model) && !strcmp(a->vendor, b->vendor) && !strcmp(a->isa, b->isa) &&
         !strcmp(a->kernels, b->kernels) && !strcmp(a->peak_isa, b->peak_isa) && a->threads == b->threads &&
         near(a->peak_gflops_fp32_1t, b->peak_gflops_fp32_1t) && near(a->peak_gflops_fp32, b->peak_gflops_fp32) &&
         near(a->bandwidth_gbs, b->bandwidth_gbs) && near(a->bandwidth_gbs_1t, b->bandwidth_gbs_1t) &&
         a->l1d_bytes == b->l1d_bytes && a->l2_bytes == b->l2_bytes && a->l3_bytes == b->l3_bytes &&
         !strcmp(a->date, b->date) && !strcmp(a->host, b->host) && a->version == b->version &&
         a->load_avg == b->load_avg && a->cpus_online == b->cpus_online && near(a->xfer_ns, b->xfer_ns) &&
         near(a->other_cpus, b->other_cpus);
}

static void test_roundtrip(void) {
  ts_machine_profile p = sample_profile(), q;
  char path[1400];
  snprintf(path, sizeof path, "%s/rt.json", g_dir);
  CHECK_OK(ts_hwinfo_save(&p, path));
  memset(&q, 0x5a, sizeof q);
  CHECK_OK(ts_hwinfo_load(path, &q));
  CHECK(same_profile(&p, &q), "explicit path round trip differs (1t %.17g vs %.17g)", p.peak_gflops_fp32_1t,
        q.peak_gflops_fp32_1t);

  /* an explicit path other than the store's holds the bare profile (an export) */
  cJSON *bare = NULL;
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ts_read_file(path, &text, &len));
  bare = text ? cJSON_Parse(text) : NULL;
  CHECK(bare && cJSON_GetObjectItemCaseSensitive(bare, "peak_gflops_fp32") &&
            !cJSON_GetObjectItemCaseSensitive(bare, "artifact"), "explicit path: a bare profile");
  cJSON_Delete(bare), free(text);

  /* NULL path: the artifact store, <TESSERA_CACHE>/machine/t<threads>.json, an envelope whose
   * provenance names the profile's key; ts_hwinfo_load(NULL) reads the default thread count's */
  p.threads = ts_default_threads();
  CHECK_OK(ts_hwinfo_save(&p, NULL));
  char def[1400], want[64];
  CHECK_OK(ts_hwinfo_default_path(def, sizeof def));
  snprintf(want, sizeof want, "/machine/t%d.json", ts_default_threads());
  CHECK(strstr(def, g_dir) == def && strstr(def, want), "default path '%s'", def);
  CHECK(access(def, R_OK) == 0, "default file exists");
  memset(&q, 0, sizeof q);
  CHECK_OK(ts_hwinfo_load(NULL, &q));
  CHECK(same_profile(&p, &q), "default path round trip differs");
  char key[17], key2[17];
  CHECK_OK(ts_hwinfo_profile_key(&p, key));
  CHECK_OK(ts_hwinfo_profile_key(&q, key2));
  CHECK(strlen(key) == 16 && !strcmp(key, key2), "profile key survives the round trip (%s, %s)", key, key2);
  char *data = NULL;
  ts_provenance pv;
  char kbuf[24];
  snprintf(kbuf, sizeof kbuf, "t%d", ts_default_threads());
  CHECK_OK(ts_artifact_load("machine", TS_HWINFO_VERSION, kbuf, &data, &pv));
  CHECK(data && strstr(data, "peak_gflops_fp32") && !strcmp(pv.profile, key) && pv.threads == p.threads &&
            !strcmp(pv.cpu_model, p.cpu_model) && !strcmp(pv.date, p.date),
        "store envelope: provenance profile '%s' (want %s), threads %d", pv.profile, key, pv.threads);
  free(data);
  ts_machine_profile k2 = q;
  k2.bandwidth_gbs *= 1.01;
  CHECK_OK(ts_hwinfo_profile_key(&k2, key2));
  CHECK(strcmp(key, key2) != 0, "another figure, another key");
  CHECK_STATUS(ts_hwinfo_profile_key(NULL, key), TS_ERR_INVALID_ARG);
  p.threads = 3;

  /* the JSON carries the isa as an array and the provenance */
  cJSON *j = ts__hwinfo_to_cjson(&p);
  CHECK(j != NULL, "to_json");
  const cJSON *isa = cJSON_GetObjectItemCaseSensitive(j, "isa");
  CHECK(cJSON_IsArray(isa) && cJSON_GetArraySize(isa) == 4 && !strcmp(cJSON_GetArrayItem(isa, 2)->valuestring, "avx2"),
        "isa array");
  CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "tessera_version")), "tessera_version");
  ts_machine_profile r;
  CHECK_OK(ts__hwinfo_from_cjson(j, &r));
  CHECK(same_profile(&p, &r), "from_cjson(to_cjson) differs");
  cJSON_Delete(j);
  /* the public form: a malloc'd string */
  char *js = NULL;
  CHECK_OK(ts_hwinfo_to_json(&p, &js));
  memset(&r, 0, sizeof r);
  CHECK_OK(ts_hwinfo_from_json(js, &r));
  CHECK(same_profile(&p, &r), "from_json(to_json) differs");
  free(js);
  CHECK_STATUS(ts_hwinfo_from_json("{\"threads\": ", &r), TS_ERR_FORMAT);
  unlink(path);
}

/* Writes the sample profile's JSON after `edit` changed it, loads it, expects `code` and `needle`. */
static void expect_bad(const char *what, void (*edit)(cJSON *), ts_status code, const char *needle) {
  ts_machine_profile p = sample_profile(), q;
  cJSON *j = ts__hwinfo_to_cjson(&p);
  edit(j);
  char *text = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  char path[1400];
  snprintf(path, sizeof path, "%s/bad.json", g_dir);
  CHECK_OK(ts_write_file_atomic(path, text, strlen(text)));
  free(text);
  memset(&q, 0x77, sizeof q);
  ts_machine_profile before = q;
  ts_status s = ts_hwinfo_load(path, &q);
  CHECK(s == code && strstr(ts_last_error(), needle) && strstr(ts_last_error(), "bad.json"),
        "%s: got %s '%s', expected %s mentioning '%s'", what, ts_strerror(s), ts_last_error(), ts_strerror(code), needle);
  CHECK(memcmp(&q, &before, sizeof q) == 0, "%s: output changed on failure", what);
  unlink(path);
}

static void del_peak(cJSON *j) { cJSON_DeleteItemFromObject(j, "peak_gflops_fp32"); }
static void del_model(cJSON *j) { cJSON_DeleteItemFromObject(j, "cpu_model"); }
static void threads_str(cJSON *j) { cJSON_ReplaceItemInObject(j, "threads", cJSON_CreateString("2")); }
static void threads_zero(cJSON *j) { cJSON_ReplaceItemInObject(j, "threads", cJSON_CreateNumber(0)); }
static void l1_frac(cJSON *j) { cJSON_ReplaceItemInObject(j, "l1d_bytes", cJSON_CreateNumber(1.5)); }
static void l3_neg(cJSON *j) { cJSON_ReplaceItemInObject(j, "l3_bytes", cJSON_CreateNumber(-1)); }
static void bw_neg(cJSON *j) { cJSON_ReplaceItemInObject(j, "bandwidth_gbs", cJSON_CreateNumber(-3)); }
static void bw1_zero(cJSON *j) { cJSON_ReplaceItemInObject(j, "bandwidth_gbs_1t", cJSON_CreateNumber(0)); }
static void isa_str(cJSON *j) { cJSON_ReplaceItemInObject(j, "isa", cJSON_CreateString("avx2 fma")); }
static void isa_num(cJSON *j) { cJSON_AddItemToArray(cJSON_GetObjectItem(j, "isa"), cJSON_CreateNumber(7)); }
static void model_long(cJSON *j) {
  char s[101];
  memset(s, 'x', 100);
  s[100] = 0;
  cJSON_ReplaceItemInObject(j, "cpu_model", cJSON_CreateString(s));
}
static void date_empty(cJSON *j) { cJSON_ReplaceItemInObject(j, "date", cJSON_CreateString("")); }
static void kernels_arr(cJSON *j) { cJSON_ReplaceItemInObject(j, "kernels", cJSON_CreateArray()); }
static void version_new(cJSON *j) { cJSON_ReplaceItemInObject(j, "version", cJSON_CreateNumber(99)); }
static void version_del(cJSON *j) { cJSON_DeleteItemFromObject(j, "version"); }
static void format_bad(cJSON *j) { cJSON_ReplaceItemInObject(j, "format", cJSON_CreateString("npy")); }

static void write_text(const char *path, const char *text) { CHECK_OK(ts_write_file_atomic(path, text, strlen(text))); }

static void test_malformed(void) {
  expect_bad("missing peak", del_peak, TS_ERR_FORMAT, "'peak_gflops_fp32' is missing");
  expect_bad("missing cpu_model", del_model, TS_ERR_FORMAT, "'cpu_model' is missing");
  expect_bad("threads string", threads_str, TS_ERR_FORMAT, "'threads' must be a number");
  expect_bad("threads zero", threads_zero, TS_ERR_FORMAT, "'threads'");
  expect_bad("l1d fraction", l1_frac, TS_ERR_FORMAT, "'l1d_bytes'");
  expect_bad("l3 negative", l3_neg, TS_ERR_FORMAT, "'l3_bytes'");
  expect_bad("bandwidth negative", bw_neg, TS_ERR_FORMAT, "'bandwidth_gbs'");
  expect_bad("bandwidth 1t zero", bw1_zero, TS_ERR_FORMAT, "'bandwidth_gbs_1t'");
  expect_bad("isa string", isa_str, TS_ERR_FORMAT, "'isa' must be an array");
  expect_bad("isa number", isa_num, TS_ERR_FORMAT, "'isa' element 4");
  expect_bad("cpu_model too long", model_long, TS_ERR_FORMAT, "'cpu_model' is longer");
  expect_bad("date empty", date_empty, TS_ERR_FORMAT, "'date' is empty");
  expect_bad("kernels array", kernels_arr, TS_ERR_FORMAT, "'kernels' must be a string");
  expect_bad("newer version", version_new, TS_ERR_UNSUPPORTED, "'version'");
  expect_bad("missing version", version_del, TS_ERR_FORMAT, "'version' is missing");
  expect_bad("other format", format_bad, TS_ERR_FORMAT, "'format'");

  ts_machine_profile q;
  char path[1400];
  snprintf(path, sizeof path, "%s/bad.json", g_dir);
  const char *texts[] = {"", "{", "{\"version\": 1,", "[1, 2]", "null", "{\"peak_gflops_fp32\": 1e999}"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    write_text(path, texts[i]);
    CHECK_STATUS(ts_hwinfo_load(path, &q), TS_ERR_FORMAT);
  }
  write_text(path, "{ \"version\": 1, \"cpu_model\": 3 }");
  CHECK_ERR_CONTAINS(ts_hwinfo_load(path, &q), "'cpu_model' must be a string");
  unlink(path);
  snprintf(path, sizeof path, "%s/does-not-exist.json", g_dir);
  CHECK_STATUS(ts_hwinfo_load(path, &q), TS_ERR_NOT_FOUND);
  CHECK_STATUS(ts_hwinfo_load(path, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_hwinfo_save(NULL, path), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_hwinfo_save(&q, "/nonexistent-dir/x/machine.json"), TS_ERR_IO);
}

static void test_cache_sizes(void) {
  int64_t l1, l2, l3;
  ts_hwinfo_cache_sizes(&l1, &l2, &l3);
  CHECK(l1 > 0 && l2 >= 0 && l3 >= 0, "cache sizes %lld %lld %lld", (long long)l1, (long long)l2, (long long)l3);
  CHECK(l2 == 0 || l2 >= l1, "l2 %lld >= l1 %lld", (long long)l2, (long long)l1);
  ts_hwinfo_cache_sizes(NULL, NULL, NULL); /* any pointer may be NULL */
  /* a block sized by the caches: the reference machine (its cache = ref_size) gets ref_value exactly,
   * others in proportion, clamped; unknown sizes give ref_value */
  CHECK(ts_hwinfo_cache_scaled(1, l1, 32768, 1, 1 << 30) == 32768, "reference machine keeps its value");
  CHECK(ts_hwinfo_cache_scaled(1, 2 * l1, 32768, 1, 1 << 30) == 16384, "half the reference cache, half the value");
  CHECK(ts_hwinfo_cache_scaled(1, l1 / 4, 32768, 1, 65536) == 65536, "clamped to hi");
  CHECK(ts_hwinfo_cache_scaled(1, 4 * l1, 32768, 16384, 65536) == 16384, "clamped to lo");
  CHECK(ts_hwinfo_cache_scaled(7, 1 << 20, 1234, 1, 1 << 30) == 1234, "unknown level: the reference value");
  CHECK(ts_hwinfo_cache_scaled(3, l3, 99, 1, 1 << 30) == 99, "L3 reference");
}

static void test_measure(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_hwinfo_opts o = ts_hwinfo_opts_default();
  o.duration_s = 0.02;
  o.runs = 1;
  o.bw_bytes = (size_t)8 << 20;
  o.progress = false;
  ts_machine_profile p;
  CHECK_OK(ts_hwinfo_measure_opts(ctx, &o, &p));
  CHECK(p.peak_gflops_fp32_1t > 0 && p.peak_gflops_fp32 > 0, "peaks %g %g", p.peak_gflops_fp32_1t, p.peak_gflops_fp32);
  CHECK(p.bandwidth_gbs_1t > 0 && p.bandwidth_gbs > 0, "bandwidth %g %g", p.bandwidth_gbs_1t, p.bandwidth_gbs);
  CHECK(p.peak_gflops_fp32_1t <= p.peak_gflops_fp32 * 1.1, "1t %g vs all %g", p.peak_gflops_fp32_1t, p.peak_gflops_fp32);
  CHECK(p.bandwidth_gbs_1t <= p.bandwidth_gbs * 1.1, "bw 1t %g vs all %g", p.bandwidth_gbs_1t, p.bandwidth_gbs);
  CHECK(p.l1d_bytes > 0, "l1d %lld", (long long)p.l1d_bytes);
  CHECK(p.threads == 2 && p.version == TS_HWINFO_VERSION, "threads %d version %d", p.threads, p.version);
  CHECK(!strcmp(p.kernels, ts_isa_name(ts_isa_active())) && p.peak_isa[0] && p.isa[0] && p.date[0] && p.cpu_model[0],
        "provenance kernels '%s' peak_isa '%s' date '%s'", p.kernels, p.peak_isa, p.date);
  CHECK(strlen(p.date) == 20 && p.date[10] == 'T' && p.date[19] == 'Z', "ISO date '%s'", p.date);
  CHECK(ts_hwinfo_matches(&p, 2) && !ts_hwinfo_matches(&p, 3), "matches by thread count");
  /* other processes' share: unknown for a measurement this short (under 0.5 s), else 0..CPUs */
  CHECK(p.other_cpus == -1 || (p.other_cpus >= 0 && p.other_cpus <= p.cpus_online + 0.5), "other_cpus %g", p.other_cpus);

  /* the profile survives its own JSON */
  char path[1400];
  snprintf(path, sizeof path, "%s/measured.json", g_dir);
  ts_machine_profile q;
  CHECK_OK(ts_hwinfo_save(&p, path));
  CHECK_OK(ts_hwinfo_load(path, &q));
  CHECK(same_profile(&p, &q), "measured profile round trip");
  unlink(path);

  /* the building blocks, each ISA this CPU has; bad arguments rejected */
  for (int isa = TS_ISA_SCALAR; isa <= (int)ts_isa_supported(); isa++) {
    double g = 0;
    CHECK_OK(ts_hwinfo_peak_gflops((ts_isa)isa, 1, 0.01, 1, &g));
    CHECK(g > 0, "%s peak %g", ts_isa_name((ts_isa)isa), g);
  }
  double g, b = 0;
  CHECK_STATUS(ts_hwinfo_peak_gflops(TS_ISA_AVX2, 0, 0.01, 1, &g), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_hwinfo_peak_gflops(TS_ISA_AVX2, 1, 0, 1, &g), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_hwinfo_read_gbs(2, (size_t)4 << 20, 0.0, 2, &b));
  CHECK(b > 0, "read %g GB/s", b);
  CHECK_STATUS(ts_hwinfo_read_gbs(1, 1 << 20, 0, 0, &b), TS_ERR_INVALID_ARG);
  /* thread-to-thread transfer: a time on two CPUs (a busy machine may stall a partner: a clear
   * status then, never a hang; how long it took is not asserted), UNSUPPORTED on one */
  double x = -1;
  CHECK_STATUS(ts_hwinfo_xfer_ns(NULL), TS_ERR_INVALID_ARG);
  ts_status xs = ts_hwinfo_xfer_ns(&x);
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) CHECK_STATUS(xs, TS_ERR_UNSUPPORTED);
  else if (xs == TS_OK) CHECK(x > 0 && x < 1e6, "line transfer %g ns", x);
  else CHECK(xs == TS_ERR_TIMEOUT || xs == TS_ERR_UNSUPPORTED, "xfer status %s", ts_strerror(xs));
  CHECK(ts_hwinfo_xfer_shared(26) == 1 && ts_hwinfo_xfer_shared(150) == -1 && ts_hwinfo_xfer_shared(80) == 0 &&
            ts_hwinfo_xfer_shared(0) == 0,
        "xfer classes");
  o.runs = 0;
  CHECK_STATUS(ts_hwinfo_measure_opts(ctx, &o, &p), TS_ERR_INVALID_ARG);
  o.runs = 1;
  o.duration_s = NAN;
  CHECK_STATUS(ts_hwinfo_measure_opts(ctx, &o, &p), TS_ERR_INVALID_ARG);
  ts_context_destroy(ctx);
}

static void test_get(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 1));
  /* a matching cached profile is served as is (its odd peak proves nothing was measured) */
  ts_machine_profile p = sample_profile(), q;
  p.threads = 1;
  p.peak_gflops_fp32 = 12345;
  CHECK(ts_hwinfo_matches(&p, 1), "sample matches");
  char p1[1400];
  CHECK_OK(ts_hwinfo_path_threads(1, p1, sizeof p1));
  CHECK_OK(ts_hwinfo_save(&p, p1));
  CHECK_OK(ts_hwinfo_get(ctx, &q));
  CHECK(same_profile(&p, &q), "cached profile served");
  /* each thread count has its own artifact (machine/t<N>.json), so a profile for another count
   * never replaces the default one */
  char def0[1400], p3[1400];
  CHECK_OK(ts_hwinfo_default_path(def0, sizeof def0));
  CHECK_OK(ts_hwinfo_path_threads(0, p3, sizeof p3));
  CHECK(strcmp(p3, def0) == 0, "threads 0: default path '%s'", p3);
  CHECK_OK(ts_hwinfo_path_threads(ts_default_threads(), p3, sizeof p3));
  CHECK(strcmp(p3, def0) == 0, "default threads: default path '%s'", p3);
  CHECK_OK(ts_hwinfo_path_threads(ts_default_threads() + 1, p3, sizeof p3));
  char want[64];
  snprintf(want, sizeof want, "/machine/t%d.json", ts_default_threads() + 1);
  CHECK(strstr(p3, g_dir) == p3 && strstr(p3, want), "other thread count: '%s'", p3);
  CHECK((strcmp(p1, def0) == 0) == (ts_default_threads() == 1), "1-thread path '%s'", p1);

  ts_machine_profile m = p;
  snprintf(m.cpu_model, sizeof m.cpu_model, "Another CPU");
  CHECK(!ts_hwinfo_matches(&m, 1), "cpu model mismatch");
  m = p;
  snprintf(m.kernels, sizeof m.kernels, "%s", ts_isa_active() == TS_ISA_SCALAR ? "avx2" : "scalar");
  CHECK(!ts_hwinfo_matches(&m, 1), "kernel level mismatch");
  m = p;
  m.version = TS_HWINFO_VERSION - 1;
  CHECK(!ts_hwinfo_matches(&m, 1), "old version mismatch");
  CHECK(!ts_hwinfo_matches(NULL, 1), "NULL");

  /* a corrupt cache is moved aside, re-measured and replaced (a full measurement: ~3 s) */
  write_text(p1, "{ corrupt");
  setenv("TESSERA_QUIET", "1", 1);
  CHECK_OK(ts_hwinfo_get(ctx, &q));
  CHECK(q.threads == 1 && q.peak_gflops_fp32 > 0 && q.peak_gflops_fp32 != 12345, "re-measured (%g)", q.peak_gflops_fp32);
  ts_machine_profile r;
  CHECK_OK(ts_hwinfo_load(p1, &r));
  CHECK(same_profile(&q, &r), "re-measured profile saved");
  char bad[1500];
  snprintf(bad, sizeof bad, "%s.bad", p1);
  CHECK(access(bad, R_OK) == 0, "the corrupt file was moved aside to %s", bad);
  ts_context_destroy(ctx);
}

/* A profile measured under load is re-measured once the machine is quiet, and merged by max. */
static void test_refresh(void) {
  ts_machine_profile p = sample_profile();
  /* what other processes took during the measurement decides, when known */
  p.cpus_online = 2;
  p.load_avg = 0.1, p.other_cpus = 1.0; /* a job started a few seconds before: the load average lags */
  CHECK(ts_hwinfo_busy(&p) && ts_hwinfo_should_refresh(&p, 0.1, 2), "others took 1 of 2 CPUs: busy, refresh");
  p.load_avg = 3.0, p.other_cpus = 0.2; /* a job that had just ended */
  CHECK(!ts_hwinfo_busy(&p) && !ts_hwinfo_should_refresh(&p, 0.1, 2), "others took 0.2 of 2 CPUs: quiet");
  /* unknown: the load average when the measurement began */
  p.other_cpus = -1;
  p.load_avg = 3.0, p.cpus_online = 2; /* busy when measured */
  CHECK(ts_hwinfo_busy(&p), "load 3 on 2 CPUs is busy");
  CHECK(ts_hwinfo_should_refresh(&p, 0.1, 2), "busy then, quiet now: refresh");
  CHECK(!ts_hwinfo_should_refresh(&p, 1.9, 2), "busy then, busy now: keep");
  p.load_avg = 0.9;
  CHECK(!ts_hwinfo_should_refresh(&p, 0.1, 2), "load 0.9 on 2 CPUs is not busy");
  p.load_avg = -1;
  CHECK(!ts_hwinfo_should_refresh(&p, 0.0, 2), "unknown load never refreshes");
  p.load_avg = 3.0, p.cpus_online = 0;
  CHECK(!ts_hwinfo_should_refresh(&p, 0.0, 2), "unknown CPU count never refreshes");
  CHECK(!ts_hwinfo_should_refresh(NULL, 0.0, 2), "NULL");
  p.cpus_online = 2;
  CHECK(!ts_hwinfo_should_refresh(&p, -1, 2), "unknown load now");

  /* older file without the fields: unknown load */
  cJSON *j = ts__hwinfo_to_cjson(&p);
  cJSON_DeleteItemFromObject(j, "load_avg");
  cJSON_DeleteItemFromObject(j, "cpus_online");
  cJSON_DeleteItemFromObject(j, "xfer_ns");
  cJSON_DeleteItemFromObject(j, "other_cpus");
  ts_machine_profile q;
  CHECK_OK(ts__hwinfo_from_cjson(j, &q));
  CHECK(q.other_cpus < 0, "absent other_cpus reads as unknown (%g)", q.other_cpus);
  cJSON_AddNumberToObject(j, "other_cpus", -0.5);
  CHECK_STATUS(ts__hwinfo_from_cjson(j, &q), TS_ERR_FORMAT);
  cJSON_DeleteItemFromObject(j, "other_cpus");
  CHECK(q.load_avg < 0 && q.cpus_online == 0, "absent load fields read as unknown (%g, %d)", q.load_avg, q.cpus_online);
  CHECK(q.xfer_ns == 0, "absent xfer_ns reads as unknown (%g)", q.xfer_ns);
  cJSON_AddNumberToObject(j, "xfer_ns", -3);
  CHECK_STATUS(ts__hwinfo_from_cjson(j, &q), TS_ERR_FORMAT);
  cJSON_Delete(j);

  ts_machine_profile a = sample_profile(), b = sample_profile();
  b.peak_gflops_fp32 = 300, b.peak_gflops_fp32_1t = 100, b.bandwidth_gbs = 10, b.bandwidth_gbs_1t = 20;
  b.xfer_ns = 150;
  snprintf(b.peak_isa, sizeof b.peak_isa, "avx512");
  snprintf(b.date, sizeof b.date, "2020-01-01T00:00:00Z");
  ts_hwinfo_merge_max(&a, &b);
  CHECK(a.peak_gflops_fp32 == 300 && !strcmp(a.peak_isa, "avx512"), "higher all-thread peak and its loop kept");
  CHECK(a.peak_gflops_fp32_1t == 112.34567890123 && a.bandwidth_gbs == 47.25 && a.bandwidth_gbs_1t == 20,
        "per-figure max");
  CHECK(!strcmp(a.date, "2024-05-01T12:34:56Z"), "provenance stays the newer measurement's");
  CHECK(a.xfer_ns == 26.5, "the kept all-thread bandwidth keeps its placement (%g)", a.xfer_ns);
  b.bandwidth_gbs = 60;
  ts_hwinfo_merge_max(&a, &b);
  CHECK(a.bandwidth_gbs == 60 && a.xfer_ns == 150, "a higher all-thread bandwidth brings its placement (%g)", a.xfer_ns);
}

/* ---- harness -------------------------------------------------------------------------------- */

typedef struct spin_arg { int calls; volatile double acc; } spin_arg;
static void spin(void *argp) {
  spin_arg *a = argp;
  a->calls++;
  for (int i = 0; i < 2000 + 500 * (a->calls % 5); i++) a->acc = a->acc + 1.0; /* uneven durations */
}

static void test_harness(void) {
  ts_bench_opts d = ts_bench_opts_default();
  CHECK(d.warmup == 2 && d.repeats == 10 && d.min_time_s == 0.2 && !d.flush_cache, "defaults");

  spin_arg a = {0, 0};
  ts_bench_result r;
  ts_bench_opts o = {.warmup = 3, .repeats = 7, .min_time_s = 0, .flush_cache = false};
  CHECK_OK(ts_bench_run(&o, spin, &a, &r));
  CHECK(r.repeats == 7 && a.calls == 10, "repeats %d calls %d", r.repeats, a.calls);
  CHECK(r.min_s > 0 && r.min_s <= r.median_s && r.median_s <= r.max_s, "min %g median %g max %g", r.min_s, r.median_s,
        r.max_s);
  CHECK(r.min_s <= r.mean_s && r.mean_s <= r.max_s, "mean %g", r.mean_s);
  CHECK(r.min_s <= r.q1_s && r.q1_s <= r.median_s && r.median_s <= r.q3_s && r.q3_s <= r.max_s, "quartiles %g %g",
        r.q1_s, r.q3_s);

  /* min_time asks for more repeats, capped */
  a.calls = 0;
  o = (ts_bench_opts){.warmup = 0, .repeats = 5, .min_time_s = 3600, .flush_cache = false};
  CHECK_OK(ts_bench_run(&o, spin, &a, &r));
  CHECK(r.repeats == TS_BENCH_MAX_EXTRA && a.calls == TS_BENCH_MAX_EXTRA, "capped repeats %d", r.repeats);
  a.calls = 0;
  o.repeats = TS_BENCH_MAX_EXTRA + 20;
  o.min_time_s = 0;
  CHECK_OK(ts_bench_run(&o, spin, &a, &r));
  CHECK(r.repeats == TS_BENCH_MAX_EXTRA + 20 && a.calls == r.repeats, "explicit repeats above the cap %d", r.repeats);
  a.calls = 0;
  o = (ts_bench_opts){.warmup = 1, .repeats = 3, .min_time_s = 0, .flush_cache = true};
  CHECK_OK(ts_bench_run(&o, spin, &a, &r));
  CHECK(r.repeats == 3 && a.calls == 4, "flushed repeats %d calls %d", r.repeats, a.calls);
  CHECK_OK(ts_bench_run(NULL, spin, &a, &r)); /* defaults */
  CHECK(r.repeats >= 10, "default repeats %d", r.repeats);

  o.repeats = 0;
  CHECK_STATUS(ts_bench_run(&o, spin, &a, &r), TS_ERR_INVALID_ARG);
  o.repeats = 3;
  o.warmup = -1;
  CHECK_STATUS(ts_bench_run(&o, spin, &a, &r), TS_ERR_INVALID_ARG);
  o.warmup = 0;
  o.min_time_s = -1;
  CHECK_STATUS(ts_bench_run(&o, spin, &a, &r), TS_ERR_INVALID_ARG);
  o.min_time_s = 0;
  CHECK_STATUS(ts_bench_run(&o, NULL, &a, &r), TS_ERR_INVALID_ARG);
}

static void test_reports(void) {
  ts_machine_profile p = sample_profile();
  p.peak_gflops_fp32 = 400;
  p.bandwidth_gbs = 50;
  CHECK(fabs(ts_bench_pct_peak_flops(&p, 100) - 25) < 1e-12, "pct flops");
  CHECK(fabs(ts_bench_pct_peak_bw(&p, 40) - 80) < 1e-12, "pct bw");
  CHECK(isnan(ts_bench_pct_peak_flops(NULL, 1)) && isnan(ts_bench_pct_peak_bw(NULL, 1)), "no profile -> NAN");

  /* 1 ms per call, 2e8 flops -> 200 GFLOP/s = 50% of 400; 2e7 bytes -> 20 GB/s = 40% of 50 */
  ts_bench_result r = {.min_s = 0.9e-3, .median_s = 1e-3, .max_s = 1.5e-3, .mean_s = 1.1e-3, .repeats = 9};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ts_bench_print_header(f);
  ts_bench_print_row(f, "gemm 2048", &r, 2e8, 2e7, &p);
  ts_bench_print_row(f, "flops only", &r, 2e8, 0, &p);
  ts_bench_print_row(f, "no profile", &r, 2e8, 0, NULL);
  fclose(f);
  CHECK(strstr(buf, "GFLOP/s") && strstr(buf, "%peak") && strstr(buf, "%bw"), "header:\n%s", buf);
  CHECK(strstr(buf, "gemm 2048") && strstr(buf, "200.00") && strstr(buf, "50.0%") && strstr(buf, "20.00") &&
            strstr(buf, "40.0%") && strstr(buf, "1.000") && strstr(buf, "0.900") && strstr(buf, "1.500"),
        "row:\n%s", buf);
  /* rows align: every line has the same length up to the GFLOP/s column */
  char *l2 = strchr(buf, '\n') + 1, *l3 = strchr(l2, '\n') + 1, *l4 = strchr(l3, '\n') + 1;
  CHECK(strchr(l2, '\n') - l2 > strchr(l3, '\n') - l3, "flops-only row is shorter (no GB/s)");
  CHECK(strstr(l4, "200.00") && strstr(l4, " -"), "no profile prints '-':\n%s", l4);
  free(buf);

  cJSON *j = ts_bench_result_json(&r, 2e8, 0, &p);
  CHECK(j != NULL, "json");
  const char *keys[] = {"median_ms", "min_ms", "max_ms", "repeats", "gflops", "pct_peak", "gbs", "pct_bandwidth"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    CHECK(cJSON_GetObjectItemCaseSensitive(j, keys[i]) != NULL, "field %s", keys[i]);
  CHECK(fabs(cJSON_GetObjectItem(j, "median_ms")->valuedouble - 1) < 1e-12, "median_ms");
  CHECK(fabs(cJSON_GetObjectItem(j, "gflops")->valuedouble - 200) < 1e-9, "gflops");
  CHECK(fabs(cJSON_GetObjectItem(j, "pct_peak")->valuedouble - 50) < 1e-9, "pct_peak");
  CHECK(cJSON_GetObjectItem(j, "repeats")->valueint == 9, "repeats");
  CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "gbs")) && cJSON_IsNull(cJSON_GetObjectItem(j, "pct_bandwidth")),
        "no bytes -> null");
  cJSON_Delete(j);
}

int main(void) {
  char base[1024];
  if (ts_cache_dir(base, sizeof base) != TS_OK) snprintf(base, sizeof base, "/tmp");
  snprintf(g_dir, sizeof g_dir, "%s/test_hwinfo", base);
  setenv("TESSERA_CACHE", g_dir, 1);
  if (ts_mkdirs(g_dir) != TS_OK) {
    fprintf(stderr, "cannot create %s: %s\n", g_dir, ts_last_error());
    return 1;
  }
  test_roundtrip();
  test_malformed();
  test_cache_sizes();
  test_reports();
  test_harness();
  test_measure();
  test_get();
  test_refresh();
  return tst_finish();
}
