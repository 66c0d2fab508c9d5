/* Unstructured group convolution planning: knapsack sizes, greedy and ILP assignment, reorder
 * candidates, plan JSON round trip and cache, the profiler (quick level) and its cost model, model
 * layer tables. Cost models here are the analytic formula (deterministic) except in the profile
 * test; no timing is asserted. */
#include <unistd.h>

#include "gconv/gconv_internal.h"
#include "tessera/gconv.h"
#include "tessera/io.h"
#include "tst.h"

/* A short ILP limit for the tests whose checks hold whatever the ILP finds in it (valid plans, no
 * worse than the greedy start, cache round trips); the tests that check what the ILP finds use
 * ilp_opts, whose limit the small ILPs here never reach, so no check depends on the machine's speed. */
static ts_gconv_plan_opts fast_opts(void) {
  ts_gconv_plan_opts o;
  ts_gconv_plan_opts_default(&o);
  o.time_limit = 0.3;
  return o;
}
static ts_gconv_plan_opts ilp_opts(void) {
  ts_gconv_plan_opts o;
  ts_gconv_plan_opts_default(&o);
  o.time_limit = 60;
  return o;
}

/* Group-shared connectivity: every partition should stay inside one group (union = cin/groups). */
static void test_shared(const ts_gconv_cost *m) {
  ts_gconv_layer l = {1, 64, 32, 14, 14, 1, 1};
  ts_csr conn;
  CHECK_OK(ts_pattern_generate("condense:cin=64,cout=32,groups=4,seed=3", &conn, NULL));
  ts_gconv_plan_opts o = ilp_opts();
  ts_gconv_plan p;
  CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &p));
  bool inside = true;
  int32_t rows = 0;
  for (int32_t i = 0; i < p.nparts; i++) inside &= p.parts[i].nunion == 16, rows += p.parts[i].nrows;
  CHECK(inside && rows == 32, "condense: %d partitions, each one group's 16 inputs", p.nparts);
  CHECK(p.pred_ms < p.dense_pred_ms, "predicted %.4f ms < dense %.4f ms", p.pred_ms, p.dense_pred_ms);
  CHECK(p.ncand == 4 && p.cand[0].method == TS_REORDER_NONE && p.best_none == 0, "candidates none, rcm, hc, ic");
  ts_gconv_plan_free(&p);
  ts_csr_free(&conn);
}

/* Permuted group structure: without reordering the greedy chunks mix groups; the ILP must lower
 * the cost from that start, and a reordering must find the groups again. */
static void test_permuted(const ts_gconv_cost *m) {
  ts_gconv_layer l = {1, 96, 48, 14, 14, 1, 1};
  ts_csr conn;
  CHECK_OK(ts_pattern_generate("permconn:condense:cin=96,cout=48,groups=6,seed=2,seed=5", &conn, NULL));
  ts_gconv_plan_opts o = ilp_opts();
  o.methods[0] = TS_REORDER_NONE, o.nmethods = 1;
  ts_gconv_plan none;
  CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &none));
  const ts_gconv_candidate *c = &none.cand[0];
  /* the knapsack's sizes dealt in channel order mix the groups; the ILP re-deals them (and must
   * end below the segment cut of that order, the other greedy start) */
  CHECK(c->ilp_ran && c->ilp_solves > 0 && c->ilp_improved > 0 && c->pred_ms < c->knapsack_pred_ms * 0.7 &&
            c->pred_ms <= c->greedy_pred_ms,
        "ILP improves the unordered greedy: knapsack %.4f, segment %.4f -> %.4f ms (%d of %d solves)",
        c->knapsack_pred_ms, c->segment_pred_ms, c->pred_ms, c->ilp_improved, c->ilp_solves);
  CHECK_OK(ts_gconv_plan_validate(&none, &conn));
  o.methods[1] = TS_REORDER_HC, o.methods[2] = TS_REORDER_IC, o.methods[3] = TS_REORDER_RCM, o.nmethods = 4;
  ts_gconv_plan p;
  CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &p));
  CHECK(p.method != TS_REORDER_NONE && p.pred_ms < c->greedy_pred_ms * 0.8, "a reordering wins: %s %.4f ms vs %.4f",
        ts_reorder_method_name(p.method), p.pred_ms, c->greedy_pred_ms);
  CHECK(p.none_nparts > 0 && ts_gconv_plan_validate(&p, &conn) == TS_OK, "plan keeps the none partitions");
  /* greedy solver: no ILP anywhere */
  o.solver = TS_GCONV_SOLVER_GREEDY;
  ts_gconv_plan g;
  CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &g));
  bool noilp = true;
  for (int i = 0; i < g.ncand; i++) noilp &= !g.cand[i].ilp_ran && g.cand[i].pred_ms == g.cand[i].greedy_pred_ms;
  CHECK(noilp && g.pred_ms >= p.pred_ms - 1e-12, "greedy only: %.4f >= ilp %.4f", g.pred_ms, p.pred_ms);
  ts_gconv_plan_free(&g);
  ts_gconv_plan_free(&p);
  ts_gconv_plan_free(&none);
  ts_csr_free(&conn);
}

/* Dense random connectivity: neighbourhood ILPs with ~400 channel classes of ~30 members each
 * (past the per-member linking rows' size cap: the aggregated form); the ILP may find nothing,
 * but whatever it keeps must be a valid plan no worse than its greedy start. */
static void test_dense_random(void) {
  /* a load-bound model (a tile costs (8 + rows) K): large partitions pay off even at 2x the
   * union, so the neighbourhoods hold 2 x 32 members (the analytic model, FMA-bound, would
   * choose single rows here) */
  ts_gconv_profile pr;
  memset(&pr, 0, sizeof pr);
  pr.nrows = 2, pr.nk = 2, pr.rows[0] = 1, pr.rows[1] = 32, pr.ks[0] = 8, pr.ks[1] = 512;
  double sec[2 * 2 * 4];
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 2; k++)
      for (int v = 0; v < 4; v++) sec[(r * 2 + k) * 4 + v] = (8.0 + pr.rows[r]) * pr.ks[k] * (v + 1) * 1e-11;
  pr.seconds = sec;
  ts_gconv_cost *m;
  CHECK_OK(ts_gconv_cost_create(&m, &pr));
  ts_gconv_layer l = {1, 400, 64, 7, 7, 1, 1};
  ts_csr conn;
  CHECK_OK(ts_pattern_generate("randconn:cin=400,cout=64,density=0.5,seed=4", &conn, NULL));
  ts_gconv_plan_opts o = fast_opts();
  o.methods[0] = TS_REORDER_NONE, o.nmethods = 1;
  ts_gconv_plan p;
  CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &p));
  const ts_gconv_candidate *c = &p.cand[0];
  CHECK(c->ilp_ran && c->ilp_solves > 0 && c->pred_ms <= c->greedy_pred_ms * (1 + 1e-12),
        "dense random: %d partitions, %d ILP solves, %.4f <= greedy %.4f ms", p.nparts, c->ilp_solves, c->pred_ms,
        c->greedy_pred_ms);
  CHECK(p.nparts <= 4, "dense random: large partitions (%d)", p.nparts);
  CHECK_OK(ts_gconv_plan_validate(&p, &conn));
  ts_gconv_plan_free(&p);
  ts_csr_free(&conn);
  ts_gconv_cost_destroy(m);
}

static void test_knapsack(const ts_gconv_cost *m) {
  ts_gconv_layer l = {1, 50, 37, 7, 7, 1, 1};
  ts_csr conn;
  CHECK_OK(ts_pattern_generate("randconn:cin=50,cout=37,density=0.25,seed=9", &conn, NULL));
  ts__gconv_rowbits rb;
  CHECK_OK(ts__gconv_rowbits_make(&conn, &rb));
  int32_t order[37], sizes[37], np = 0;
  ts_perm_identity(order, 37);
  for (int maxr = 1; maxr <= 32; maxr *= 2) {
    CHECK_OK(ts__gconv_knapsack_sizes(&l, &rb, order, m, maxr, sizes, &np));
    int32_t sum = 0;
    bool ok = true;
    for (int32_t i = 0; i < np; i++) sum += sizes[i], ok &= sizes[i] >= 1 && sizes[i] <= maxr && (i == 0 || sizes[i] <= sizes[i - 1]);
    CHECK(ok && sum == 37, "knapsack max %d: %d parts summing to %d", maxr, np, sum);
  }
  ts__gconv_rowbits_free(&rb);
  ts_csr_free(&conn);
}

static void test_json_and_cache(const ts_gconv_cost *m) {
  ts_gconv_layer l = {2, 24, 20, 6, 6, 3, 1};
  ts_csr conn;
  CHECK_OK(ts_pattern_generate("permconn:unstructconv:cin=24,cout=20,keep=0.25,groups=4,corr=0.9,seed=4", &conn, NULL));
  ts_gconv_plan_opts o = fast_opts();
  ts_gconv_plan p, q, c1, c2;
  CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &p));
  char path[1100];
  tst_tmp_path(path, sizeof path, "gconv_plan_test.json");
  CHECK_OK(ts_gconv_plan_save(&p, path));
  CHECK_OK(ts_gconv_plan_load(path, &q));
  bool same = q.nparts == p.nparts && q.key == p.key && q.conn_hash == p.conn_hash && q.method == p.method &&
              memcmp(&q.layer, &p.layer, sizeof p.layer) == 0 && q.ncand == p.ncand && q.none_nparts == p.none_nparts;
  for (int32_t i = 0; same && i < p.nparts; i++)
    same = q.parts[i].nrows == p.parts[i].nrows && q.parts[i].nunion == p.parts[i].nunion &&
           memcmp(q.parts[i].rows, p.parts[i].rows, (size_t)p.parts[i].nrows * 4) == 0 &&
           memcmp(q.parts[i].in, p.parts[i].in, (size_t)p.parts[i].nunion * 4) == 0;
  CHECK(same && ts_gconv_plan_validate(&q, &conn) == TS_OK, "plan JSON round trip");
  ts_gconv_plan_free(&q);
  /* the public in-memory form: a malloc'd string */
  char *text = NULL;
  CHECK_OK(ts_gconv_plan_to_json(&p, &text));
  CHECK_OK(ts_gconv_plan_from_json(text, &q));
  CHECK(q.nparts == p.nparts && q.key == p.key && ts_gconv_plan_validate(&q, &conn) == TS_OK, "plan string round trip");
  ts_gconv_plan_free(&q);
  free(text);
  CHECK_ERR_CONTAINS(ts_gconv_plan_from_json("{\"format\"", &q), "gconv plan: invalid JSON");
  /* malformed files name the field */
  cJSON *j;
  CHECK_OK(ts__gconv_plan_to_cjson(&p, &j));
  cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "layer"), "ksize", cJSON_CreateNumber(2));
  CHECK_ERR_CONTAINS(ts__gconv_plan_from_cjson(j, "t.json", &q), "gconv plan field 'layer'");
  cJSON_ReplaceItemInObject(j, "method", cJSON_CreateString("zigzag"));
  cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "layer"), "ksize", cJSON_CreateNumber(3));
  CHECK_ERR_CONTAINS(ts__gconv_plan_from_cjson(j, "t.json", &q), "gconv plan field 'method'");
  cJSON_ReplaceItemInObject(j, "method", cJSON_CreateString("hc"));
  cJSON *parts = cJSON_GetObjectItem(j, "parts");
  cJSON_ReplaceItemInObject(cJSON_GetArrayItem(parts, 0), "in", cJSON_CreateString("x"));
  CHECK_ERR_CONTAINS(ts__gconv_plan_from_cjson(j, "t.json", &q), "partition without an 'in' array");
  cJSON_Delete(j);
  /* a candidate's counts must be integers an int holds (the fuzzer's 7.8e84 was a float-to-int overflow) */
  CHECK_OK(ts__gconv_plan_to_cjson(&p, &j));
  cJSON *cand0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "candidates"), 0);
  CHECK(cand0 != NULL, "the plan lists its candidates");
  if (cand0) {
    cJSON_DeleteItemFromObject(cand0, "nparts");
    cJSON_AddNumberToObject(cand0, "nparts", 7.8e84);
    CHECK_ERR_CONTAINS(ts__gconv_plan_from_cjson(j, "t.json", &q), "gconv plan field 'nparts'");
  }
  cJSON_Delete(j);
  CHECK_STATUS(ts_gconv_plan_load("/nonexistent/gconv.json", &q), TS_ERR_NOT_FOUND);
  /* cache: the second get is served from the file */
  char cpath[1200];
  CHECK_OK(ts_gconv_plan_cache_path(ts_gconv_plan_key(&l, &conn, m, &o), cpath, sizeof cpath));
  remove(cpath);
  bool cached = true;
  CHECK_OK(ts_gconv_plan_get(&l, &conn, m, &o, &c1, &cached));
  bool cached2 = false;
  CHECK_OK(ts_gconv_plan_get(&l, &conn, m, &o, &c2, &cached2));
  CHECK(!cached && cached2 && c1.key == c2.key && c1.nparts == c2.nparts, "plan cache (%d, %d)", cached, cached2);
  CHECK(strstr(cpath, "/gconv-plan/") != NULL, "plans are gconv-plan artifacts: %s", cpath);
  /* a corrupt stored plan is moved aside and planned again, never fatal */
  ts_gconv_plan_free(&c2);
  CHECK_OK(ts_write_file_atomic(cpath, "{\"artifact\": \"gconv-plan\"", 26));
  CHECK_OK(ts_gconv_plan_get(&l, &conn, m, &o, &c2, &cached2));
  char bpath[1300];
  snprintf(bpath, sizeof bpath, "%s.bad", cpath);
  CHECK(!cached2 && c2.key == c1.key && access(bpath, F_OK) == 0, "corrupt plan re-made (%d), moved aside", cached2);
  remove(bpath);
  o.max_rows = 8;
  CHECK(ts_gconv_plan_key(&l, &conn, m, &o) != c1.key, "options change the key");
  ts_gconv_plan_free(&c1), ts_gconv_plan_free(&c2), ts_gconv_plan_free(&p);
  o = fast_opts();
  o.methods[1] = TS_REORDER_MORTON;
  CHECK_ERR_CONTAINS(ts_gconv_plan_make(&l, &conn, m, &o, &p), "'morton' does not apply to a connectivity");
  o = fast_opts();
  o.time_limit = 0;
  CHECK_ERR_CONTAINS(ts_gconv_plan_make(&l, &conn, m, &o, &p), "time_limit must be in (0, 3600]");
  ts_csr_free(&conn);
}

static void test_profile(void) {
  ts_gconv_profile p, q;
  CHECK_OK(ts_gconv_profile_measure(TS_GCONV_PROFILE_QUICK, false, &p));
  bool pos = p.nrows == 4 && p.nk == 3;
  for (int i = 0; i < p.nrows * p.nk * 4; i++) pos &= p.seconds[i] > 0 && isfinite(p.seconds[i]);
  CHECK(pos && strcmp(p.level, "quick") == 0 && p.cpu_model[0] && p.date[0], "quick profile measured");
  char path[1100];
  tst_tmp_path(path, sizeof path, "gconv_profile_test.json");
  CHECK_OK(ts_gconv_profile_save(&p, path));
  CHECK_OK(ts_gconv_profile_load(path, &q));
  bool same = q.nrows == p.nrows && q.nk == p.nk && strcmp(q.date, p.date) == 0;
  for (int i = 0; same && i < p.nrows * p.nk * 4; i++) same = fabs(q.seconds[i] - p.seconds[i]) <= 1e-15 * p.seconds[i];
  CHECK(same, "profile JSON round trip");
  ts_gconv_cost *m;
  CHECK_OK(ts_gconv_cost_create(&m, &q));
  ts_gconv_layer l = {1, 64, 64, 14, 14, 1, 1};
  double a = ts_gconv_cost_part(m, &l, 6, 16), b = ts_gconv_cost_part(m, &l, 6, 48), c = ts_gconv_cost_part(m, &l, 40, 16);
  CHECK(a > 0 && b > a && c > a && isfinite(c), "cost grows with union and rows: %g %g %g", a, b, c);
  CHECK(strncmp(ts_gconv_cost_source(m), "profile quick ", 14) == 0, "source '%s'", ts_gconv_cost_source(m));
  ts_gconv_cost_destroy(m);
  ts_gconv_profile_free(&q);
  /* get: reuses a matching file, re-measures a foreign one */
  bool measured = true;
  CHECK_OK(ts_gconv_profile_get(TS_GCONV_PROFILE_QUICK, path, false, &q, &measured));
  CHECK(!measured, "matching profile reused");
  ts_gconv_profile_free(&q);
  snprintf(p.cpu_model, sizeof p.cpu_model, "some other CPU");
  CHECK_OK(ts_gconv_profile_save(&p, path));
  CHECK_OK(ts_gconv_profile_get(TS_GCONV_PROFILE_QUICK, path, false, &q, &measured));
  CHECK(measured, "foreign profile re-measured");
  ts_gconv_profile_free(&q);
  /* the store: <cache>/gconv-profile/quick-<kernels>.json, measured once, then reused; a foreign one
   * (another CPU) re-measured */
  char spath[4400];
  CHECK_OK(ts_gconv_profile_default_path(TS_GCONV_PROFILE_QUICK, spath, sizeof spath));
  CHECK(strstr(spath, "/gconv-profile/quick-") != NULL, "store path %s", spath);
  remove(spath);
  CHECK_OK(ts_gconv_profile_get(TS_GCONV_PROFILE_QUICK, NULL, false, &q, &measured));
  CHECK(measured && strcmp(q.clock, "thread_cpu") == 0 && q.threads == 1, "stored profile measured");
  ts_gconv_profile_free(&q);
  CHECK_OK(ts_gconv_profile_get(TS_GCONV_PROFILE_QUICK, NULL, false, &q, &measured));
  CHECK(!measured && strcmp(q.date, "") != 0, "stored profile reused");
  ts_gconv_profile_free(&q);
  CHECK_OK(ts_gconv_profile_load(spath, &q)); /* the store's file through the path API */
  ts_gconv_profile_free(&q);
  CHECK_OK(ts_gconv_profile_save(&p, spath)); /* p claims another CPU */
  CHECK_OK(ts_gconv_profile_get(TS_GCONV_PROFILE_QUICK, spath, false, &q, &measured));
  CHECK(measured && strcmp(q.cpu_model, "some other CPU") != 0, "foreign stored profile re-measured");
  ts_gconv_profile_free(&q);
  ts_gconv_profile_free(&p);
  /* malformed */
  const char *bad = "{\"format\":\"tessera-gconv-profile\",\"version\":1,\"provenance\":{\"cpu_model\":\"x\","
                    "\"kernels\":\"avx2\",\"date\":\"d\",\"tessera_version\":\"v\"},\"level\":\"quick\",\"clock\":\"c\","
                    "\"rows\":[4,1],\"ks\":[8],\"seconds\":[]}";
  CHECK_OK(ts_write_file_atomic(path, bad, strlen(bad)));
  CHECK_ERR_CONTAINS(ts_gconv_profile_load(path, &q), "gconv profile field 'rows'");
}

static void test_models(void) {
  ts_gconv_model_layer *t;
  int n;
  CHECK_OK(ts_gconv_model_layers("condensenet", 1, &t, &n));
  CHECK(n == 72 && t[0].layer.cin == 16 && t[0].layer.cout == 32 && t[0].layer.h == 112 && t[0].lgc && t[1].layer.ksize == 3 &&
            t[70].layer.cin == 1936 && t[70].layer.cout == 512 && t[70].layer.h == 7 && !t[71].learned,
        "condensenet table (%d layers)", n);
  ts_gconv_conn_opts co;
  ts_gconv_conn_opts_default(&co);
  char spec[256];
  bool ok = true;
  for (ts_gconv_connectivity mode = 0; mode < TS_GCONV_CONN_COUNT; mode++) {
    co.mode = mode;
    for (int i = 0; i < n; i += 37) {
      ts_csr c;
      ok &= ts_gconv_model_conn_spec(&t[i], i, &co, spec, sizeof spec) == TS_OK &&
            ts_pattern_generate(spec, &c, NULL) == TS_OK && c.rows == t[i].layer.cout && c.cols == t[i].layer.cin;
      if (t[i].lgc && mode != TS_GCONV_CONN_BLOCK) ok &= c.nnz == (int64_t)t[i].layer.cout * t[i].layer.cin / 4;
      ts_csr_free(&c);
    }
  }
  CHECK(ok, "condensenet specs generate (last: %s)", spec);
  co.condense = 3;
  co.mode = TS_GCONV_CONN_UNSTRUCTURED;
  CHECK_ERR_CONTAINS(ts_gconv_model_conn_spec(&t[0], 0, &co, spec, sizeof spec), "condense factor must be 1, 2, 4 or 8");
  ts_free(t);
  for (int g = 3; g <= 8; g += 5) {
    CHECK_OK(ts_gconv_model_layers(g == 3 ? "shufflenet-g3" : "shufflenet-g8", 2, &t, &n));
    bool div = n == 31;
    for (int i = 0; i < n; i++) div &= t[i].layer.cin % g == 0 && t[i].layer.cout % g == 0 && t[i].layer.n == 2;
    CHECK(div, "shufflenet-g%d: %d layers, channels divisible by g", g, n);
    ts_free(t);
  }
  CHECK_ERR_CONTAINS(ts_gconv_model_layers("resnet", 1, &t, &n), "is not one of condensenet, shufflenet-g3");
  ts_gconv_connectivity cc;
  CHECK_ERR_CONTAINS(ts_gconv_connectivity_parse("dense", &cc), "'dense' is not one of");
}

/* Connectivity and weight files: round trip, and every bad file a clear error naming it. */
static void test_files(void) {
  char path[1200], wpath[1200];
  tst_tmp_path(path, sizeof path, "gconv_conn_test.npy");
  tst_tmp_path(wpath, sizeof wpath, "gconv_w_test.npy");
  float v[3 * 4] = {1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1};
  ts_tensor t;
  int64_t shape[4] = {3, 4, 1, 1};
  CHECK_OK(ts_tensor_wrap(&t, TS_F32, 2, shape, v));
  CHECK_OK(ts_npy_write(path, &t));
  ts_csr c;
  CHECK_OK(ts_gconv_conn_load(path, &c));
  CHECK(c.rows == 3 && c.cols == 4 && c.nnz == 5 && c.col[0] == 0 && c.col[1] == 3 && c.col[2] == 1 && c.col[4] == 3, "0/1 float .npy: %lld x %lld, %lld", (long long)c.rows, (long long)c.cols, (long long)c.nnz);
  const ts_gconv_layer l = {1, 4, 3, 5, 5, 1, 1};
  CHECK_OK(ts_gconv_conn_check(&l, &c));
  ts_csr_free(&c);
  v[6] = 0.5f; /* a weight, not a connection */
  CHECK_OK(ts_npy_write(path, &t));
  CHECK_ERR_CONTAINS(ts_gconv_conn_load(path, &c), "entry (1, 2) is 0.5");
  v[6] = NAN;
  CHECK_OK(ts_npy_write(path, &t));
  CHECK_ERR_CONTAINS(ts_gconv_conn_load(path, &c), "gconv_conn_test.npy: connectivity entry (1, 2) is nan");
  int64_t empty[2] = {0, 4};
  CHECK_OK(ts_tensor_wrap(&t, TS_F32, 2, empty, v));
  CHECK_OK(ts_npy_write(path, &t));
  CHECK_ERR_CONTAINS(ts_gconv_conn_load(path, &c), "connectivity is 0 x 4");
  CHECK_OK(ts_tensor_wrap(&t, TS_F32, 1, shape, v));
  CHECK_OK(ts_npy_write(path, &t));
  CHECK_ERR_CONTAINS(ts_gconv_conn_load(path, &c), "must be a 2-D array");
  CHECK_ERR_CONTAINS(ts_gconv_conn_load("/nonexistent/conn.npy", &c), "/nonexistent/conn.npy");
  /* weights: (cout, cin, 1, 1) and (cout, cin) for 1x1; a 3x3 layer needs (cout, cin, 3, 3) */
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = (float)i - 5.5f;
  for (int nd = 2; nd <= 4; nd += 2) {
    CHECK_OK(ts_tensor_wrap(&t, TS_F32, nd, shape, w));
    CHECK_OK(ts_npy_write(wpath, &t));
    float *got = NULL;
    CHECK_OK(ts_gconv_weights_load(wpath, &l, &got));
    CHECK(got && got[0] == -5.5f && got[11] == 5.5f, "weights (%d-D) read back", nd);
    ts_free(got);
  }
  ts_gconv_layer l3 = l;
  l3.ksize = 3;
  float *got = NULL;
  CHECK_ERR_CONTAINS(ts_gconv_weights_load(wpath, &l3, &got), "weights of shape (3, 4, 1, 1); the layer needs (cout, cin, k, k) = (3, 4, 3, 3)");
  CHECK(got == NULL, "no weights on error");
  w[4] = INFINITY;
  CHECK_OK(ts_npy_write(wpath, &t));
  CHECK_ERR_CONTAINS(ts_gconv_weights_load(wpath, &l, &got), "weight 4 is not finite");
  int32_t iw[12] = {0};
  CHECK_OK(ts_tensor_wrap(&t, TS_I32, 4, shape, iw));
  CHECK_OK(ts_npy_write(wpath, &t));
  CHECK_ERR_CONTAINS(ts_gconv_weights_load(wpath, &l, &got), "weights must be float32");
  remove(path);
  remove(wpath);
}

int main(void) {
  ts_gconv_cost *m;
  if (ts_gconv_cost_analytic(&m) != TS_OK) return 1;
  test_shared(m);
  test_permuted(m);
  test_knapsack(m);
  test_dense_random();
  test_json_and_cache(m);
  ts_gconv_cost_destroy(m);
  test_profile();
  test_models();
  test_files();
  return tst_finish();
}
