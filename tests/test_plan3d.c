/* plan3d: the 1F1B simulation against its closed form and hand-traced cases, the partitioners
 * against each other (DP == brute force exactly; greedy never better than the optimum, within the
 * memory caps), the inputs' error messages, plan JSON round trips, estimates and the search. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/plan3d.h"
#include "tessera/plot.h"
#include "tst.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void test_sim_uniform(void) {
  /* uniform stages, no transfers: (m + S - 1) (f + b), also for m < S */
  int Ss[] = {1, 2, 3, 4, 7, 16}, ms[] = {1, 2, 3, 5, 8, 32};
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) {
      int S = Ss[i], m = ms[j];
      double f[16], b[16];
      for (int s = 0; s < S; s++) f[s] = 1.5, b[s] = 3.25;
      double t = 0;
      ts_p3_event *ev = malloc((size_t)2 * S * m * sizeof *ev);
      CHECK_OK(ts_p3_simulate_1f1b(S, m, f, b, NULL, &t, ev));
      double want = (m + S - 1) * (1.5 + 3.25);
      CHECK(fabs(t - want) < 1e-9 * want, "S %d m %d: makespan %.6f, (m+S-1)(f+b) = %.6f", S, m, t, want);
      /* every stage runs m forwards and m backwards, never overlapping, F(i) before B(i) */
      for (int s = 0; s < S; s++) {
        int nf = 0, nb = 0;
        for (int k = 0; k < 2 * m; k++) {
          const ts_p3_event *e = &ev[(size_t)2 * m * s + k];
          e->backward ? nb++ : nf++;
          if (k) CHECK(e->start >= ev[(size_t)2 * m * s + k - 1].end - 1e-12, "stage %d op %d overlaps", s, k);
        }
        CHECK(nf == m && nb == m, "stage %d: %d forwards, %d backwards of %d", s, nf, nb, m);
      }
      free(ev);
    }
}

static void test_sim_transfers(void) {
  /* S = 2, m = 1: f0, send, f1, b1, send back, b0 */
  double f[2] = {1, 2}, b[2] = {3, 4}, c[1] = {0.5}, t;
  CHECK_OK(ts_p3_simulate_1f1b(2, 1, f, b, c, &t, NULL));
  CHECK(fabs(t - (1 + 0.5 + 2 + 4 + 0.5 + 3)) < 1e-12, "S2 m1 with transfers: %g", t);
  /* S = 2, m = 2 traced by hand: s0 F0 [0,1] F1 [1,2]; s1 F0 [1.5,3.5] B0 [3.5,7.5] F1 [7.5,9.5] B1 [9.5,13.5];
   * s0 B0 needs 7.5 + .5 = 8 -> [8,11]; B1 needs 13.5 + .5 = 14 -> [14,17] */
  CHECK_OK(ts_p3_simulate_1f1b(2, 2, f, b, c, &t, NULL));
  CHECK(fabs(t - 17) < 1e-12, "S2 m2 with transfers: %g, traced 17", t);
  CHECK_STATUS(ts_p3_simulate_1f1b(0, 1, f, b, c, &t, NULL), TS_ERR_INVALID_ARG);
}

static void test_allreduce(void) {
  ts_p3_link l = {10e9, 5e-6, 0, 0};
  CHECK(ts_p3_allreduce_time(1e9, 1, l, 1) == 0, "one rank: no time");
  double t = ts_p3_allreduce_time(1e9, 4, l, 2);
  double want = 2.0 * 3 / 4 * 1e9 * 2 / 10e9 + 6 * 5e-6;
  CHECK(fabs(t - want) < 1e-15, "ring 4, shared by 2: %g vs %g", t, want);
  /* the link's own all-reduce figures replace the point-to-point ones */
  ts_p3_link la = {10e9, 5e-6, 4e9, 20e-6};
  t = ts_p3_allreduce_time(1e9, 4, la, 2);
  want = 2.0 * 3 / 4 * 1e9 * 2 / 4e9 + 6 * 20e-6;
  CHECK(fabs(t - want) < 1e-15, "ring 4 on all-reduce figures: %g vs %g", t, want);
}

static uint64_t rng_state = 12345;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void test_partitioners(void) {
  int n = 0, greedy_ok = 0;
  double worst = 0;
  for (int it = 0; it < 200; it++) {
    int S = 1 + (int)(urand() * 5), L = S + (int)(urand() * 10);
    int m = 1 + (int)(urand() * 16);
    double cost[6 * 16], fixed[6];
    int cap[6];
    bool capped = urand() < 0.4;
    for (int s = 0; s < S; s++) {
      double speed = 0.5 + 2 * urand();
      fixed[s] = urand() * 2;
      for (int l = 0; l < L; l++) cost[s * L + l] = speed * (0.5 + urand());
      cap[s] = capped ? 1 + (int)(urand() * L) : L;
    }
    int room = 0;
    for (int s = 0; s < S; s++) room += cap[s];
    int cb[6], cd[6], cg[6];
    double jb, jd, jg;
    ts_status sb = ts_p3_partition(TS_P3_BRUTE, S, L, cost, fixed, capped ? cap : NULL, m, cb, &jb);
    ts_status sd = ts_p3_partition(TS_P3_DP, S, L, cost, fixed, capped ? cap : NULL, m, cd, &jd);
    ts_status sg = ts_p3_partition(TS_P3_GREEDY, S, L, cost, fixed, capped ? cap : NULL, m, cg, &jg);
    if (room < L) {
      CHECK(sb == TS_ERR_INFEASIBLE && sd == TS_ERR_INFEASIBLE && sg == TS_ERR_INFEASIBLE,
            "instance %d: %d of %d layers fit, statuses %d %d %d", it, room, L, sb, sd, sg);
      continue;
    }
    CHECK(sb == TS_OK && sd == TS_OK && sg == TS_OK, "instance %d: %s", it, ts_last_error());
    if (sb != TS_OK || sd != TS_OK || sg != TS_OK) continue;
    n++;
    CHECK(fabs(jb - jd) <= 1e-9 * jb, "instance %d (S %d L %d m %d): dp %.9g != brute %.9g", it, S, L, m, jd, jb);
    CHECK(jg >= jd * (1 - 1e-12), "instance %d: greedy %.9g below the optimum %.9g", it, jg, jd);
    int sum = 0;
    bool caps = true;
    for (int s = 0; s < S; s++) sum += cg[s], caps &= cg[s] >= 1 && cg[s] <= cap[s];
    CHECK(sum == L && caps, "instance %d: greedy split breaks the layer count or the caps", it);
    double gap = jg / jd - 1;
    if (gap > worst) worst = gap;
    greedy_ok += gap <= 0.02;
    if (gap > 0.02) {
      printf("  greedy %.2f%% above the optimum: S %d L %d m %d%s\n", 100 * gap, S, L, m, capped ? " capped" : "");
      for (int s = 0; s < S; s++) printf("   stage %d cap %d fixed %.3f greedy %d dp %d costs", s, cap[s], fixed[s], cg[s], cd[s]);
      for (int s = 0; s < S; s++) { printf("\n   "); for (int l = 0; l < L; l++) printf(" %.2f", cost[s*L+l]); }
      printf("\n");
    }
  }
  CHECK(n >= 100, "only %d feasible random instances", n);
  printf("partitioners: %d random instances, DP == brute force on all; greedy within 2%% of the optimum on %d, worst "
         "%.2f%%\n",
         n, greedy_ok, 100 * worst);
  /* bad arguments */
  double c1[2] = {1, 1}, f1[2] = {0, 0};
  int out[2];
  CHECK_STATUS(ts_p3_partition(TS_P3_GREEDY, 3, 2, c1, f1, NULL, 1, out, NULL), TS_ERR_INVALID_ARG);
  double bad[2] = {1, NAN};
  CHECK_STATUS(ts_p3_partition(TS_P3_DP, 1, 2, bad, f1, NULL, 1, out, NULL), TS_ERR_INVALID_ARG);
}

static const char *MODEL = "{\"model\": \"tiny\", \"layers\": 8, \"hidden\": 256, \"heads\": 4, \"seq\": 128, "
                           "\"vocab\": 4096, \"global_batch\": 16, \"activation_bytes\": 4}";
static const char *CLUSTER =
    "{\"cluster\": \"two-speed\", \"node_types\": ["
    "{\"name\": \"fastnode\", \"gpu\": \"fast\", \"gpus_per_node\": 2, \"count\": 2, \"memory_gib\": 8,"
    " \"intra_node\": {\"bandwidth_gbs\": 100, \"latency_us\": 5}, \"inter_node\": {\"bandwidth_gbs\": 10, \"latency_us\": 20},"
    " \"price_per_hour\": 4},"
    "{\"name\": \"slownode\", \"gpu\": \"slow\", \"gpus_per_node\": 2, \"count\": 2, \"memory_gib\": 4,"
    " \"intra_node\": {\"bandwidth_gbs\": 20, \"latency_us\": 5}, \"inter_node\": {\"bandwidth_gbs\": 5, \"latency_us\": 20},"
    " \"price_per_hour\": 1}]}";

static ts_p3_profile *tiny_profile(void) {
  ts_p3_profile *p = NULL;
  if (ts_p3_profile_create(&p) != TS_OK) return NULL;
  const char *g[2] = {"fast", "slow"};
  for (int k = 0; k < 2; k++)
    for (int tp = 1; tp <= 2; tp *= 2)
      for (int mbs = 1; mbs <= 4; mbs *= 2) {
        double x = (k ? 3.0 : 1.0) * mbs / tp * 1e-3;
        ts_p3_cost e = {0.1 * x, 0.2 * x}, l = {x, 2 * x}, h = {0.5 * x, x};
        if (ts_p3_profile_add(p, g[k], tp, mbs, e, l, h, NULL, 0, 1e-9) != TS_OK) {
          ts_p3_profile_destroy(p);
          return NULL;
        }
      }
  return p;
}

static void test_inputs(void) {
  ts_p3_model m;
  CHECK_OK(ts_p3_model_from_json(MODEL, "m.json", &m));
  CHECK(m.ffn == 1024 && m.layer_params == 4.0 * 256 * 256 + 2.0 * 256 * 1024 + 9 * 256 + 1024,
        "derived ffn %d, layer params %g", m.ffn, m.layer_params);
  CHECK_ERR_CONTAINS(ts_p3_model_from_json("{\"model\": \"x\", \"layers\": 0}", "m.json", &m), "'layers'");
  CHECK_ERR_CONTAINS(ts_p3_model_from_json("{\"model\": \"x\", \"layers\": 4, \"hidden\": 10", "m.json", &m), "m.json: invalid JSON");
  CHECK_ERR_CONTAINS(ts_p3_model_from_json("{\"model\": \"x\", \"layers\": 4}", "m.json", &m), "'hidden' is missing");
  ts_p3_cluster c;
  CHECK_OK(ts_p3_cluster_from_json(CLUSTER, "c.json", &c));
  CHECK(c.ntypes == 2 && c.types[1].inter.bandwidth == 5e9 && c.types[0].memory == 8 * GIB && c.types[1].inter.ar_bandwidth == 0,
        "cluster fields");
  char *arc = strdup(CLUSTER);
  char *ins = strstr(arc, "\"inter_node\": {\"bandwidth_gbs\": 5, \"latency_us\": 20}");
  CHECK(ins != NULL, "slow inter_node in the test cluster");
  if (ins) {
    char buf[2048];
    size_t pre = (size_t)(ins - arc);
    snprintf(buf, sizeof buf, "%.*s\"inter_node\": {\"bandwidth_gbs\": 5, \"latency_us\": 20, \"allreduce\": "
             "{\"bandwidth_gbs\": 2.5, \"latency_us\": 40}}%s",
             (int)pre, arc, ins + strlen("\"inter_node\": {\"bandwidth_gbs\": 5, \"latency_us\": 20}"));
    CHECK_OK(ts_p3_cluster_from_json(buf, "c.json", &c));
    CHECK(c.types[1].inter.ar_bandwidth == 2.5e9 && fabs(c.types[1].inter.ar_latency - 40e-6) < 1e-18,
          "inter_node.allreduce read: %g, %g", c.types[1].inter.ar_bandwidth, c.types[1].inter.ar_latency);
    char *neg = strstr(buf, "\"bandwidth_gbs\": 2.5");
    memcpy(neg, "\"bandwidth_gbs\":-2.5", 20);
    CHECK_ERR_CONTAINS(ts_p3_cluster_from_json(buf, "c.json", &c), "node_types[1].inter_node.allreduce.bandwidth_gbs");
  }
  free(arc);
  char *bad = strdup(CLUSTER);
  char *at = strstr(bad, "\"bandwidth_gbs\": 10,");
  memcpy(at, "\"bandwidth_gbs\":-10,", 20);
  CHECK_ERR_CONTAINS(ts_p3_cluster_from_json(bad, "c.json", &c), "node_types[0].inter_node.bandwidth_gbs must be");
  free(bad);
  ts_p3_profile *p = NULL;
  CHECK_ERR_CONTAINS(ts_p3_profile_from_json("{\"entries\": [{\"gpu\": \"a\", \"tp\": 1, \"mbs\": 1}]}", "p.json", &p),
                     "entries[0].layer is missing");
  CHECK_ERR_CONTAINS(ts_p3_profile_from_json("{\"entries\": [{\"gpu\": \"a\", \"tp\": 1, \"mbs\": 1, \"layer\": "
                                             "{\"fwd_ms\": \"x\", \"bwd_ms\": 1}}]}",
                                             "p.json", &p),
                     "fwd_ms");
  CHECK(p == NULL, "no profile on failure");
  CHECK_OK(ts_p3_profile_from_json("{\"entries\": [{\"gpu\": \"a\", \"tp\": 2, \"mbs\": 1, \"layers\": [{\"fwd_ms\": 1, "
                                   "\"bwd_ms\": 2}, {\"fwd_ms\": 3, \"bwd_ms\": 4}]}, {\"gpu\": \"a\", \"tp\": 1, \"mbs\": 1, "
                                   "\"layer\": {\"fwd_ms\": 1, \"bwd_ms\": 2}}]}",
                                   "p.json", &p));
  int tps[4], n = 0;
  CHECK_OK(ts_p3_profile_tps(p, "a", tps, 4, &n));
  CHECK(n == 2 && tps[0] == 1 && tps[1] == 2, "tps listed ascending: %d (%d, %d)", n, tps[0], tps[1]);
  ts_p3_profile_destroy(p);
}

static void test_estimate(void) {
  ts_p3_model m;
  ts_p3_cluster c;
  CHECK_OK(ts_p3_model_from_json(MODEL, "m", &m));
  CHECK_OK(ts_p3_cluster_from_json(CLUSTER, "c", &c));
  ts_p3_profile *p = tiny_profile();
  CHECK(p != NULL, "profile");
  if (!p) return;
  ts_p3_plan *plan = malloc(sizeof *plan), *back = malloc(sizeof *back);
  /* 8 GPUs, dp 2, tp 1 -> 4 stages; a given split */
  int split[4] = {3, 3, 1, 1};
  ts_p3_config cfg = {.dp = 2, .mbs = 2, .split = split};
  CHECK_OK(ts_p3_estimate(&m, &c, p, &cfg, plan));
  CHECK(plan->pp == 4 && plan->micro_batches == 4 && plan->stages[2].nlayers == 1 && plan->stages[3].head,
        "pp %d m %d", plan->pp, plan->micro_batches);
  /* stage 0 on the fast type: 3 layers of (1 + 2) ms x mbs 2 plus the embedding */
  CHECK(fabs(plan->stages[0].fwd - (3 * 2e-3 + 0.2e-3)) < 1e-12, "stage 0 forward %g", plan->stages[0].fwd);
  CHECK(plan->stages[2].type == 1 && fabs(plan->stages[2].fwd - 6e-3) < 1e-12, "stage 2 on the slow type: %g",
        plan->stages[2].fwd);
  CHECK(plan->step >= plan->pipeline && plan->pipeline > 0, "step %g pipeline %g", plan->step, plan->pipeline);
  CHECK(fabs(plan->usd_per_hour - 10) < 1e-12, "price %g", plan->usd_per_hour);
  /* JSON round trip */
  char *j1 = NULL, *j2 = NULL;
  CHECK_OK(ts_p3_plan_to_json(plan, &j1));
  CHECK_OK(ts_p3_plan_from_json(j1, "plan", back));
  /* times travel as milliseconds: equal to the last bits' rounding; a second round trip is exact */
  CHECK(back->pp == plan->pp && fabs(back->step - plan->step) <= 1e-15 * plan->step &&
            fabs(back->stages[3].bwd - plan->stages[3].bwd) <= 1e-15 * plan->stages[3].bwd &&
            back->stages[2].type == 1 && back->stages[3].nlayers == 1 && back->model.layer_params == plan->model.layer_params,
        "plan fields after a JSON round trip");
  CHECK_OK(ts_p3_plan_to_json(back, &j2));
  ts_p3_plan *again = malloc(sizeof *again);
  char *j3 = NULL;
  CHECK_OK(ts_p3_plan_from_json(j2, "plan", again));
  CHECK_OK(ts_p3_plan_to_json(again, &j3));
  CHECK(j2 && j3 && !strcmp(j2, j3), "plan JSON differs after a second round trip:\n%s\n%s", j2, j3);
  free(j3), free(again);
  /* an inconsistent plan names the field */
  char *bad = j1 ? strdup(j1) : NULL;
  char *at = bad ? strstr(bad, "\"gpus\":[2,2]") : NULL;
  CHECK(at != NULL, "stage 1 gpus in the JSON");
  if (at) {
    memcpy(at, "\"gpus\":[3,2]", 12);
    CHECK_ERR_CONTAINS(ts_p3_plan_from_json(bad, "plan.json", back), "stages[1].gpus");
  }
  free(bad), free(j1), free(j2);
  /* the partitioner instead of a split: no worse than the given split */
  double given = plan->step;
  cfg.split = NULL;
  CHECK_OK(ts_p3_estimate(&m, &c, p, &cfg, plan));
  CHECK(plan->step <= given * 1.0001, "partitioned %g worse than a hand split %g", plan->step, given);
  /* a missing TP degree in the table */
  cfg.tp[0] = cfg.tp[1] = 4;
  cfg.dp = 1;
  ts_p3_cluster c4 = c;
  c4.types[0].gpus_per_node = c4.types[1].gpus_per_node = 4;
  CHECK_ERR_CONTAINS(ts_p3_estimate(&m, &c4, p, &cfg, plan), "no entry for gpu 'fast' (node type 'fastnode') at tp 4");
  /* a TP group across nodes; dp x tp not dividing the GPUs */
  cfg.tp[0] = cfg.tp[1] = 2;
  cfg.dp = 3;
  CHECK_STATUS(ts_p3_estimate(&m, &c, p, &cfg, plan), TS_ERR_INFEASIBLE);
  /* out of memory: a huge model */
  ts_p3_model big = m;
  big.hidden = 16384, big.heads = 128, big.ffn = 4 * 16384, big.embed_params = big.layer_params = big.head_params = 0;
  ts_p3_model_derive(&big);
  cfg.dp = 1, cfg.tp[0] = cfg.tp[1] = 1;
  CHECK_ERR_CONTAINS(ts_p3_estimate(&big, &c, p, &cfg, plan), "out of memory");
  free(plan), free(back);
  ts_p3_profile_destroy(p);
}

static void test_search(void) {
  ts_p3_model m;
  ts_p3_cluster c;
  CHECK_OK(ts_p3_model_from_json(MODEL, "m", &m));
  CHECK_OK(ts_p3_cluster_from_json(CLUSTER, "c", &c));
  ts_p3_profile *p = tiny_profile();
  if (!p) return;
  ts_p3_search_opts o;
  ts_p3_search_opts_default(&o);
  o.top = 5;
  ts_p3_search_result r;
  CHECK_OK(ts_p3_search(&m, &c, p, &o, &r));
  CHECK(r.nplans >= 1 && r.evaluated > r.nplans, "plans %d of %lld", r.nplans, (long long)r.evaluated);
  for (int i = 1; i < r.nplans; i++) CHECK(r.plans[i].step >= r.plans[i - 1].step, "plans sorted by step");
  CHECK(r.has_baseline && r.plans[0].step <= r.baseline.step * (1 + 1e-12), "best %g vs baseline %g", r.plans[0].step,
        r.baseline.step);
  /* every plan re-estimated from its own configuration gives its own step time */
  for (int i = 0; i < r.nplans; i++) {
    const ts_p3_plan *q = &r.plans[i];
    int split[TS_P3_MAX_STAGES];
    for (int s = 0; s < q->pp; s++) split[s] = q->stages[s].nlayers;
    ts_p3_config cfg = {.dp = q->dp, .pp = q->pp, .mbs = q->mbs, .split = split, .order = q->node_order, .norder = q->nnodes};
    for (int s = 0; s < q->pp; s++) cfg.tp[q->stages[s].type] = q->stages[s].tp;
    ts_p3_plan *e = malloc(sizeof *e);
    CHECK_OK(ts_p3_estimate(&m, &c, p, &cfg, e));
    CHECK(fabs(e->step - q->step) <= 1e-12 * q->step, "plan %d: re-estimated %g vs %g", i, e->step, q->step);
    free(e);
  }
  /* the Gantt chart of the best plan */
  char path[2048];
  tst_tmp_path(path, sizeof path, "plan3d-gantt.svg");
  CHECK_OK(ts_p3_plan_gantt_svg(&r.plans[0], path));
  char *svg = NULL;
  size_t len = 0;
  CHECK_OK(ts_read_file(path, &svg, &len));
  CHECK(svg && strstr(svg, "<svg") && strstr(svg, "</svg>"), "an SVG document");
  free(svg);
  remove(path);
  ts_p3_search_result_free(&r);
  /* under a price limit: sub-clusters and a Pareto front sorted by step with falling cost */
  o.budget_per_hour = 6;
  CHECK_OK(ts_p3_search(&m, &c, p, &o, &r));
  CHECK(r.compositions > 1 && r.npareto >= 1, "compositions %lld, front %d", (long long)r.compositions, r.npareto);
  for (int i = 0; i < r.npareto; i++) CHECK(r.pareto[i].usd_per_hour <= 6 + 1e-9, "over budget");
  for (int i = 1; i < r.npareto; i++)
    CHECK(r.pareto[i].step >= r.pareto[i - 1].step && r.pareto[i].usd_per_step <= r.pareto[i - 1].usd_per_step,
          "front not monotone at %d", i);
  ts_p3_search_result_free(&r);
  /* a model that fits nowhere */
  ts_p3_model big = m;
  big.hidden = 16384, big.heads = 128, big.ffn = 4 * 16384, big.embed_params = big.layer_params = big.head_params = 0;
  ts_p3_model_derive(&big);
  o.budget_per_hour = 0;
  CHECK_ERR_CONTAINS(ts_p3_search(&big, &c, p, &o, &r), "no plan fits: out of memory");
  /* a cluster whose GPU type has no profile */
  ts_p3_cluster c2 = c;
  snprintf(c2.types[1].gpu, sizeof c2.types[1].gpu, "%s", "mystery");
  CHECK_ERR_CONTAINS(ts_p3_search(&m, &c2, p, &o, &r), "no entry for gpu 'mystery'");
  ts_p3_profile_destroy(p);
}

int main(void) {
  test_sim_uniform();
  test_sim_transfers();
  test_allreduce();
  test_partitioners();
  test_inputs();
  test_estimate();
  test_search();
  return tst_finish();
}
