/* bench_plan3d: FASOP's paper-scale figures, simulated (issue 36, deliverable 5): GPT-2 1.5B on 32
 * mixed GPUs (1 p4d.24xlarge: 8 A100 + 6 g5.12xlarge: 24 A10G; inputs from bench/plan3d/make_inputs.py).
 *
 *   1. partitioner speed at 32 stages x 48 layers: greedy vs the exact DP (pruned bottleneck DP),
 *      timed interleaved by the core's measure engine; brute force where finite;
 *   2. greedy's quality: its J against the DP optimum on every configuration the search prices
 *      (hundreds of real instances) and on random instances;
 *   3. whole searches with each partitioner (wall time, best plan), and the best plan against
 *      Megatron-LM's default (one TP degree, even split);
 *   4. the cluster Pareto front (step time vs $ per step) over sub-clusters of a pool, under a price
 *      limit, drawn as SVG.
 *
 * usage: bench_plan3d [--inputs DIR] [--out DIR] [--json] [--budget USD_PER_HOUR] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"
#include "plan3d/plan3d_estimate.h"
#include "tessera/measure.h"
#include "tessera/plan3d.h"

typedef struct part_job {
  ts_p3_partitioner method;
  int S, L, m;
  const double *cost, *fixed;
  const int *cap;
  int *counts;
} part_job;

static ts_status run_part(void *a) {
  part_job *j = a;
  return ts_p3_partition(j->method, j->S, j->L, j->cost, j->fixed, j->cap, j->m, j->counts, NULL);
}

static ts_status load(const char *dir, const char *cluster, ts_p3_model *m, ts_p3_cluster *c, ts_p3_profile **p) {
  char path[1024];
  char *t;
  size_t n;
  snprintf(path, sizeof path, "%s/gpt2-xl.model.json", dir);
  TS_TRY(ts_read_file(path, &t, &n));
  ts_status s = ts_p3_model_from_json(t, path, m);
  free(t);
  TS_TRY(s);
  snprintf(path, sizeof path, "%s/%s", dir, cluster);
  TS_TRY(ts_read_file(path, &t, &n));
  s = ts_p3_cluster_from_json(t, path, c);
  free(t);
  TS_TRY(s);
  snprintf(path, sizeof path, "%s/gpt2-xl-a100-a10g.profile.json", dir);
  TS_TRY(ts_read_file(path, &t, &n));
  s = ts_p3_profile_from_json(t, path, p);
  free(t);
  return s;
}

static double J_of(int S, int L, int m, const double *cost, const double *fixed, const int *counts) {
  double mx = 0, sum = 0;
  int a = 0;
  for (int s = 0; s < S; s++) {
    double t = fixed[s];
    for (int l = a; l < a + counts[s]; l++) t += cost[(size_t)s * L + l];
    a += counts[s];
    sum += t;
    if (t > mx) mx = t;
  }
  return (m - 1) * mx + sum;
}

typedef struct gap_stats {
  int n, within2;
  double worst, sum;
  double t_greedy, t_dp; /* summed seconds of single calls */
} gap_stats;

static void gap_add(gap_stats *g, double jg, double jd, double tg, double td) {
  double gap = jg / jd - 1;
  g->n++;
  g->within2 += gap <= 0.02;
  if (gap > g->worst) g->worst = gap;
  g->sum += gap;
  g->t_greedy += tg, g->t_dp += td;
}

/* Every configuration of the 32-GPU search (node orders x TP per type x dp x micro-batch) as a
 * partition instance: greedy vs DP on the planner's own cost matrices. */
static ts_status real_instances(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p, gap_stats *g) {
  int order[TS_P3_MAX_NODES];
  int n = ts__p3_full_order(c, order);
  p3_scratch w;
  TS_TRY(ts__p3_scratch_init(&w, m->layers, m->global_batch));
  ts_p3_plan *plan = malloc(sizeof *plan);
  int cd[TS_P3_MAX_STAGES], cg[TS_P3_MAX_STAGES];
  /* two node orders: A100 first and A100 last */
  for (int rot = 0; rot < 2; rot++) {
    if (rot) {
      int t = order[0];
      memmove(order, order + 1, (size_t)(n - 1) * sizeof *order);
      order[n - 1] = t;
    }
    p3_ctx x;
    ts_status st = ts__p3_ctx_init(&x, m, c, p, order, n);
    if (st != TS_OK) break;
    int tps[3] = {1, 2, 4};
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) {
        int tp[TS_P3_MAX_TYPES] = {tps[a], tps[b]};
        for (int dp = 1; dp <= 32; dp *= 2) {
          p3_stage_layout ls[TS_P3_MAX_STAGES];
          int pp;
          char why[320];
          if (ts__p3_layout(&x, dp, tp, ls, &pp, why, sizeof why) != TS_OK || pp < 2 || pp > m->layers) continue;
          for (int mbs = 1; mbs <= 8; mbs *= 2) {
            if (m->global_batch % (dp * mbs)) continue;
            if (ts__p3_price(&x, dp, ls, pp, mbs, NULL, TS_P3_GREEDY, &w, plan, why, sizeof why) != TS_OK) continue;
            int mm = m->global_batch / (dp * mbs);
            double t0 = ts_now();
            if (ts_p3_partition(TS_P3_GREEDY, pp, m->layers, w.cost, w.fixed, w.cap, mm, cg, NULL) != TS_OK) continue;
            double t1 = ts_now();
            if (ts_p3_partition(TS_P3_DP, pp, m->layers, w.cost, w.fixed, w.cap, mm, cd, NULL) != TS_OK) continue;
            double t2 = ts_now();
            gap_add(g, J_of(pp, m->layers, mm, w.cost, w.fixed, cg), J_of(pp, m->layers, mm, w.cost, w.fixed, cd), t1 - t0,
                    t2 - t1);
          }
        }
      }
    ts__p3_ctx_free(&x);
  }
  free(plan);
  ts__p3_scratch_free(&w);
  return TS_OK;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* Random instances: 2..16 stages of two speeds (a fast and a slow GPU type in runs, as a mixed
 * cluster gives), 8..48 layers, m in [1, 4 S], a third of them with memory caps. */
static void random_instances(int count, gap_stats *g) {
  for (int it = 0; it < count; it++) {
    int S = 2 + (int)(urand() * 15), L = S + (int)(urand() * (49 - S));
    int m = 1 + (int)(urand() * 4 * S);
    double *cost = malloc((size_t)S * L * sizeof *cost), fixed[TS_P3_MAX_STAGES];
    int cap[TS_P3_MAX_STAGES], cd[TS_P3_MAX_STAGES], cg[TS_P3_MAX_STAGES];
    int split = (int)(urand() * S);
    bool capped = urand() < 0.33;
    int room = 0;
    for (int s = 0; s < S; s++) {
      double speed = s < split ? 1.0 : 2.0 + urand();
      fixed[s] = urand() * 0.3 * speed;
      for (int l = 0; l < L; l++) cost[(size_t)s * L + l] = speed * (0.9 + 0.2 * urand());
      cap[s] = capped ? 1 + (int)(urand() * 2.0 * L / S) : L;
      room += cap[s];
    }
    if (room >= L) {
      double t0 = ts_now();
      ts_status a = ts_p3_partition(TS_P3_GREEDY, S, L, cost, fixed, cap, m, cg, NULL);
      double t1 = ts_now();
      ts_status b = ts_p3_partition(TS_P3_DP, S, L, cost, fixed, cap, m, cd, NULL);
      double t2 = ts_now();
      if (a == TS_OK && b == TS_OK) gap_add(g, J_of(S, L, m, cost, fixed, cg), J_of(S, L, m, cost, fixed, cd), t1 - t0, t2 - t1);
    }
    free(cost);
  }
}

static void print_plan(const char *label, const ts_p3_plan *p) {
  printf("  %-34s %9.1f ms  $%.4f/step  dp %d pp %d mbs %d  tp", label, p->step * 1e3, p->usd_per_step, p->dp, p->pp, p->mbs);
  for (int s = 0; s < p->pp; s++)
    if (s == 0 || p->stages[s].tp != p->stages[s - 1].tp) printf("%s%d", s ? "," : " ", p->stages[s].tp);
  printf("  split");
  for (int s = 0; s < p->pp; s++) printf("%s%d", s ? "," : " ", p->stages[s].nlayers);
  printf("\n");
}

int main(int argc, char **argv) {
  const char *dir = "bench/plan3d", *out = NULL;
  bool json = false;
  double budget = 80;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--inputs") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = atof(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json = true;
    else {
      fprintf(stderr, "usage: bench_plan3d [--inputs DIR] [--out DIR] [--budget USD_PER_HOUR] [--json]\n");
      return 2;
    }
  }
  ts_p3_model m;
  ts_p3_cluster c, pool;
  ts_p3_profile *p = NULL, *p2 = NULL;
  ts_status s = load(dir, "aws-1xp4d-6xg5.cluster.json", &m, &c, &p);
  if (s == TS_OK) s = load(dir, "aws-pool.cluster.json", &m, &pool, &p2);
  if (s != TS_OK) {
    fprintf(stderr, "bench_plan3d: %s: %s\n", ts_strerror(s), ts_last_error());
    return 1;
  }
  if (out) mkdir(out, 0755);
  ts_provenance prov;
  ts_provenance_here(&prov, ts_isa_active(), 1);
  printf("bench_plan3d: %s, %s (%s)\n\n", m.name, c.name, prov.cpu_model);

  /* 1. one 32-stage x 48-layer instance: the 32 GPUs as 32 stages (tp 1, dp 1), micro-batch 1 */
  int order[TS_P3_MAX_NODES];
  int n = ts__p3_full_order(&c, order);
  p3_ctx x;
  p3_scratch w;
  ts_p3_plan *plan = malloc(sizeof *plan);
  s = ts__p3_ctx_init(&x, &m, &c, p, order, n);
  if (s == TS_OK) s = ts__p3_scratch_init(&w, m.layers, m.global_batch);
  int tp1[TS_P3_MAX_TYPES] = {1, 1}, pp = 0;
  p3_stage_layout ls[TS_P3_MAX_STAGES];
  char why[320];
  if (s == TS_OK && ts__p3_layout(&x, 1, tp1, ls, &pp, why, sizeof why) != TS_OK) s = ts_error(TS_ERR_INTERNAL, "%s", why);
  if (s == TS_OK && ts__p3_price(&x, 1, ls, pp, 1, NULL, TS_P3_GREEDY, &w, plan, why, sizeof why) != TS_OK)
    s = ts_error(TS_ERR_INTERNAL, "%s", why);
  if (s != TS_OK) {
    fprintf(stderr, "bench_plan3d: %s\n", ts_last_error());
    return 1;
  }
  int mm = m.global_batch;
  int cg[TS_P3_MAX_STAGES], cd[TS_P3_MAX_STAGES];
  part_job jg = {TS_P3_GREEDY, pp, m.layers, mm, w.cost, w.fixed, w.cap, cg};
  part_job jd = {TS_P3_DP, pp, m.layers, mm, w.cost, w.fixed, w.cap, cd};
  ts_measure_fn fns[2] = {run_part, run_part};
  void *args[2] = {&jd, &jg};
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = 1, mo.rounds = 5, mo.min_time_s = 1.0, mo.max_rounds = 50;
  ts_measure_result mr[2];
  ts_measure_info mi;
  s = ts_measure_run(2, fns, args, &mo, mr, &mi);
  double Jg = J_of(pp, m.layers, mm, w.cost, w.fixed, cg), Jd = J_of(pp, m.layers, mm, w.cost, w.fixed, cd);
  /* the DP without its bound: one timed call (about a second) */
  int uc[TS_P3_MAX_STAGES];
  double tu0 = ts_now();
  ts_status su = ts__p3_partition_dp_unpruned(pp, m.layers, w.cost, w.fixed, w.cap, mm, uc, NULL);
  double tu = ts_now() - tu0;
  double Ju = su == TS_OK ? J_of(pp, m.layers, mm, w.cost, w.fixed, uc) : NAN;
  int bc[TS_P3_MAX_STAGES];
  ts_status sb = ts_p3_partition(TS_P3_BRUTE, pp, m.layers, w.cost, w.fixed, w.cap, mm, bc, NULL);
  printf("1. partitioner, %d stages x %d layers, %d micro-batches (interleaved, %d rounds):\n", pp, m.layers, mm, mi.rounds);
  printf("   dp (exact)   median %10.3f ms  J %.6f s\n", mr[0].s.median * 1e3, Jd);
  printf("   greedy       median %10.3f ms  J %.6f s (%+.3f%%)\n", mr[1].s.median * 1e3, Jg, 100 * (Jg / Jd - 1));
  printf("   greedy is %.0fx faster than dp [95%% CI %.0f, %.0f]\n", 1 / mr[1].ratio, 1 / mr[1].ratio_hi, 1 / mr[1].ratio_lo);
  printf("   dp without its bound (every candidate bottleneck, one call): %.1f ms, J %.6f s: greedy %.0fx faster\n",
         tu * 1e3, Ju, tu / mr[1].s.median);
  printf("   brute force: %s\n\n", sb == TS_OK ? "finished" : "refused (over 1e8 splits: C(47, 31) = 1.5e12)");
  ts__p3_ctx_free(&x);

  /* 2. quality on the planner's real instances and on random ones */
  gap_stats gr = {0}, gq = {0};
  real_instances(&m, &c, p, &gr);
  random_instances(300, &gq);
  printf("2. greedy vs the DP optimum of J:\n");
  printf("   the 32-GPU search's own instances: %d, within 2%%: %d, worst %.3f%%, mean %.4f%%; time greedy %.1f ms vs dp "
         "%.1f ms in all (%.0fx)\n",
         gr.n, gr.within2, 100 * gr.worst, 100 * gr.sum / (gr.n ? gr.n : 1), gr.t_greedy * 1e3, gr.t_dp * 1e3,
         gr.t_dp / gr.t_greedy);
  printf("   random instances (2-16 stages, 8-48 layers): %d, within 2%%: %d, worst %.3f%%, mean %.4f%%\n\n", gq.n, gq.within2,
         100 * gq.worst, 100 * gq.sum / (gq.n ? gq.n : 1));

  /* 3. whole searches */
  ts_p3_search_opts so;
  ts_p3_search_opts_default(&so);
  so.top = 3;
  ts_p3_search_result rg, rd;
  so.partitioner = TS_P3_GREEDY;
  ts_status s1 = ts_p3_search(&m, &c, p, &so, &rg);
  so.partitioner = TS_P3_DP;
  ts_status s2 = ts_p3_search(&m, &c, p, &so, &rd);
  if (s1 != TS_OK || s2 != TS_OK) {
    fprintf(stderr, "bench_plan3d: search: %s\n", ts_last_error());
    return 1;
  }
  so.partitioner = TS_P3_GREEDY;
  so.per_type_tp = false;
  ts_p3_search_result ru;
  ts_status s3 = ts_p3_search(&m, &c, p, &so, &ru);
  printf("3. whole search on %s: %lld configurations (%lld out of memory)\n", c.name, (long long)rg.evaluated,
         (long long)rg.rejected_memory);
  printf("   greedy %.3f s, dp %.3f s (%.1fx)\n", rg.seconds, rd.seconds, rd.seconds / rg.seconds);
  print_plan("best (greedy, per-type TP):", &rg.plans[0]);
  print_plan("best (dp, per-type TP):", &rd.plans[0]);
  if (s3 == TS_OK) print_plan("best (greedy, one TP degree):", &ru.plans[0]);
  if (rg.has_baseline) {
    print_plan("Megatron-LM default:", &rg.baseline);
    printf("   best plan vs Megatron-LM default: %.3fx (FASOP reports up to 1.37x)\n\n", rg.baseline.step / rg.plans[0].step);
  }
  if (out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/best-plan-gantt.svg", out);
    ts_p3_plan_gantt_svg(&rg.plans[0], path);
    snprintf(path, sizeof path, "%s/megatron-default-gantt.svg", out);
    if (rg.has_baseline) ts_p3_plan_gantt_svg(&rg.baseline, path);
  }

  /* 4. Pareto front over sub-clusters of the pool */
  ts_p3_search_opts po;
  ts_p3_search_opts_default(&po);
  po.top = 1;
  po.budget_per_hour = budget;
  ts_p3_search_result rp;
  ts_status s4 = ts_p3_search(&m, &pool, p2, &po, &rp);
  if (s4 == TS_OK) {
    printf("4. Pareto front over %lld sub-clusters of %s within $%.0f/hour (%.3f s):\n", (long long)rp.compositions,
           pool.name, budget, rp.seconds);
    for (int i = 0; i < rp.npareto; i++) {
      char lab[96];
      snprintf(lab, sizeof lab, "%dx p4d + %dx g5 ($%.2f/h):", rp.pareto[i].node_counts[0], rp.pareto[i].node_counts[1],
               rp.pareto[i].usd_per_hour);
      print_plan(lab, &rp.pareto[i]);
    }
    if (out) {
      char path[1024];
      snprintf(path, sizeof path, "%s/pareto.svg", out);
      ts_p3_pareto_svg(rp.pareto, rp.npareto, rp.has_baseline ? &rp.baseline : NULL, path);
    }
  }
  if (json || out) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "provenance", ts__provenance_json(&prov));
    cJSON *a = cJSON_AddObjectToObject(j, "partitioner_32x48");
    cJSON_AddNumberToObject(a, "stages", pp);
    cJSON_AddNumberToObject(a, "layers", m.layers);
    cJSON_AddNumberToObject(a, "micro_batches", mm);
    cJSON_AddNumberToObject(a, "dp_ms", mr[0].s.median * 1e3);
    cJSON_AddNumberToObject(a, "greedy_ms", mr[1].s.median * 1e3);
    cJSON_AddNumberToObject(a, "speedup", 1 / mr[1].ratio);
    cJSON_AddNumberToObject(a, "speedup_ci_lo", 1 / mr[1].ratio_hi);
    cJSON_AddNumberToObject(a, "speedup_ci_hi", 1 / mr[1].ratio_lo);
    cJSON_AddNumberToObject(a, "greedy_gap_pct", 100 * (Jg / Jd - 1));
    cJSON_AddNumberToObject(a, "dp_unpruned_ms", tu * 1e3);
    cJSON_AddNumberToObject(a, "speedup_vs_unpruned", tu / mr[1].s.median);
    cJSON_AddBoolToObject(a, "brute_finite", sb == TS_OK);
    cJSON *q = cJSON_AddObjectToObject(j, "greedy_quality");
    cJSON_AddNumberToObject(q, "search_instances", gr.n);
    cJSON_AddNumberToObject(q, "search_within_2pct", gr.within2);
    cJSON_AddNumberToObject(q, "search_worst_pct", 100 * gr.worst);
    cJSON_AddNumberToObject(q, "search_dp_over_greedy_time", gr.t_dp / gr.t_greedy);
    cJSON_AddNumberToObject(q, "random_instances", gq.n);
    cJSON_AddNumberToObject(q, "random_within_2pct", gq.within2);
    cJSON_AddNumberToObject(q, "random_worst_pct", 100 * gq.worst);
    cJSON *sr = cJSON_AddObjectToObject(j, "search");
    cJSON_AddNumberToObject(sr, "configurations", (double)rg.evaluated);
    cJSON_AddNumberToObject(sr, "greedy_s", rg.seconds);
    cJSON_AddNumberToObject(sr, "dp_s", rd.seconds);
    cJSON_AddNumberToObject(sr, "best_step_ms", rg.plans[0].step * 1e3);
    cJSON_AddNumberToObject(sr, "best_dp_step_ms", rd.plans[0].step * 1e3);
    if (s3 == TS_OK) cJSON_AddNumberToObject(sr, "best_uniform_tp_step_ms", ru.plans[0].step * 1e3);
    if (rg.has_baseline) {
      cJSON_AddNumberToObject(sr, "megatron_step_ms", rg.baseline.step * 1e3);
      cJSON_AddNumberToObject(sr, "speedup_vs_megatron", rg.baseline.step / rg.plans[0].step);
    }
    cJSON_AddItemToObject(sr, "best_plan", ts__p3_plan_cjson(&rg.plans[0]));
    if (s4 == TS_OK) {
      cJSON *pa = cJSON_AddArrayToObject(j, "pareto");
      for (int i = 0; i < rp.npareto; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "p4d", rp.pareto[i].node_counts[0]);
        cJSON_AddNumberToObject(e, "g5", rp.pareto[i].node_counts[1]);
        cJSON_AddNumberToObject(e, "usd_per_hour", rp.pareto[i].usd_per_hour);
        cJSON_AddNumberToObject(e, "step_ms", rp.pareto[i].step * 1e3);
        cJSON_AddNumberToObject(e, "usd_per_step", rp.pareto[i].usd_per_step);
        cJSON_AddItemToArray(pa, e);
      }
    }
    if (out) {
      char path[1024];
      snprintf(path, sizeof path, "%s/bench_plan3d.json", out);
      ts__json_write_file(path, j);
    }
    if (json) {
      char *t = cJSON_Print(j);
      printf("%s\n", t);
      free(t);
    }
    cJSON_Delete(j);
  }
  ts_p3_search_result_free(&rg), ts_p3_search_result_free(&rd);
  if (s3 == TS_OK) ts_p3_search_result_free(&ru);
  if (s4 == TS_OK) ts_p3_search_result_free(&rp);
  ts__p3_scratch_free(&w);
  free(plan);
  ts_p3_profile_destroy(p), ts_p3_profile_destroy(p2);
  return 0;
}
