/* The greedy's and the ILP's attention schedules timed side by side (tessera/attn_sched.h): the
 * evidence for "the ILP beats greedy". Per case the mask is generated, put in attention's token
 * order (ts_attn_reorder, auto) and cut into dense blocks (ts_blocks_extract, defaults), as
 * `tessera attn plan` does; the scheduler then runs with the measured profile cost model (cached
 * profile for d, fp32), calibrated on the mask ONCE (the ILP's solve), and the greedy solves under
 * those very family scales, so the two differ only in the solver:
 *   greedy-raw, ilp-raw: the solvers' own schedules (guard off);
 *   greedy, ilp:         the same after the guard (what `attn plan` returns by default).
 * The plans then run in --rounds interleaved rounds (each plan once per round, in turn), batch 1,
 * --heads heads; per plan the median time over the rounds, and per pair (greedy-raw / ilp-raw,
 * greedy / ilp) the median of the per-round ratios with its quartiles and the share of rounds
 * the ILP's plan was faster: a loaded machine moves the times of a round together, so the ratios
 * stay steady while the times do not. --cpu-clock (with --threads 1): each call timed by the
 * thread's CPU clock. Outputs of all four plans are compared with each other (max abs diff).
 *
 *   bench_attn_sched [--cases SPEC;SPEC] [--threads N] [--heads H] [--d D] [--rounds R] [--cpu-clock]
 *                    [--time-limit S] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "harness_attn.h"
#include "tessera/attn_profile.h"
#include "tessera/attn_sched.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#define DEFAULT_CASES                                                                                        \
  "window2d:h=64,w=64,k=7;window2d:h=64,w=64,k=13;swin:h=56,w=56,win=7,shift=1;vitdet:h=64,w=64,win=14,global=4"
#define NPLANS 4
#define MAX_ROUNDS 1000

static const char *const plan_names[NPLANS] = {"greedy-raw", "ilp-raw", "greedy", "ilp"};

typedef struct cfg {
  int threads, heads, d, rounds;
  bool cpu_clock, json;
  double time_limit;
  ts_attn_cost_model *model;
} cfg;


/* "fixed" for a block-skip fallback, else the pass kind's name. */
static const char *fallback_name(int kind) {
  return kind == TS_ATTN_SEG_MIXED ? "fixed" : ts_attn_seg_kind_name((ts_attn_seg_kind)kind);
}

/* The reordered mask (perm_csr, bitmap) and its blocks, as `tessera attn plan` makes them. */
static ts_status prepare(const char *spec, ts_csr *pm, ts_bitmap *bp, ts_blocks *blk, char *method, size_t cap) {
  ts_reorder_method used = TS_REORDER_NONE;
  ts_status s = ts_bench_attn_mask(spec, TS_REORDER_AUTO, pm, bp, &used);
  if (s == TS_OK) snprintf(method, cap, "%s", ts_reorder_method_name(used));
  ts_blocks_opts bo;
  ts_blocks_opts_default(&bo);
  if (s == TS_OK) s = ts_blocks_extract(pm, &bo, blk);
  return s;
}

static ts_status run_case(const cfg *c, const char *spec, cJSON *rows) {
  ts_csr pm = {0};
  ts_bitmap bp = {0};
  ts_blocks blk = {0};
  char method[32] = "";
  ts_status s = prepare(spec, &pm, &bp, &blk, method, sizeof method);
  ts_attn_schedule sch[NPLANS];
  ts_attn_sched_info inf[NPLANS];
  ts_attn_plan *plan[NPLANS] = {0};
  memset(sch, 0, sizeof sch);
  double solve_ms[NPLANS] = {0};
  ts_context *ctx = NULL;
  const int64_t n = pm.rows, H = c->heads, d = c->d;
  size_t tot = (size_t)H * (size_t)n * (size_t)d;
  float *Q = NULL, *K = NULL, *V = NULL, *O[NPLANS] = {0};
  double *t = NULL;
  /* ilp-raw first: its solve calibrates; the others reuse its scales */
  static const int solve_order[NPLANS] = {1, 0, 2, 3};
  for (int x = 0; x < NPLANS && s == TS_OK; x++) {
    const int p = solve_order[x];
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    o.solver = p % 2 ? TS_ATTN_SOLVER_ILP : TS_ATTN_SOLVER_GREEDY;
    o.threads = c->threads;
    o.time_limit = c->time_limit;
    o.cost = ts_attn_cost_profiled, o.cost_user = c->model;
    o.calibrate_d = d;
    o.guard = p >= 2;
    if (p != 1) {
      o.family_given = true;
      memcpy(o.family_scale, inf[1].calib_scale, sizeof o.family_scale);
    }
    double t0 = ts_now();
    s = ts_attn_schedule_solve(&blk, &bp, &o, &sch[p], &inf[p]);
    solve_ms[p] = (ts_now() - t0) * 1e3;
  }
  if (s == TS_OK) s = ts_context_create(&ctx, c->threads);
  for (int p = 0; p < NPLANS && s == TS_OK; p++) s = ts_attn_plan_create(&plan[p], ctx, &sch[p], &bp, d);
  if (s == TS_OK) {
    Q = ts_malloc(tot * sizeof *Q), K = ts_malloc(tot * sizeof *K), V = ts_malloc(tot * sizeof *V);
    for (int p = 0; p < NPLANS; p++) O[p] = ts_malloc(tot * sizeof *O[p]);
    t = malloc((size_t)(NPLANS * c->rounds) * sizeof *t);
    bool ok = Q && K && V && t;
    for (int p = 0; p < NPLANS; p++) ok = ok && O[p];
    if (!ok) s = ts_error(TS_ERR_OOM, "bench_attn_sched: tensors of %zu floats", tot);
  }
  if (s == TS_OK) {
    ts_rng r;
    ts_rng_seed(&r, 1);
    for (size_t i = 0; i < tot; i++) Q[i] = (float)ts_rng_normal(&r), K[i] = (float)ts_rng_normal(&r), V[i] = (float)ts_rng_normal(&r);
  }
  for (int p = 0; p < NPLANS && s == TS_OK; p++) s = ts_attn_execute(ctx, plan[p], Q, K, V, O[p], 1, H, n, d); /* warm-up */
  for (int r = 0; r < c->rounds && s == TS_OK; r++)
    for (int p = 0; p < NPLANS && s == TS_OK; p++) {
      double t0 = ts_clock_now(c->cpu_clock ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL);
      s = ts_attn_execute(ctx, plan[p], Q, K, V, O[p], 1, H, n, d);
      t[p * c->rounds + r] = ts_clock_now(c->cpu_clock ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL) - t0;
    }
  if (s == TS_OK) {
    double diff = 0, med[NPLANS], ratio[2][3], faster[2] = {0, 0}, *rv = malloc((size_t)c->rounds * sizeof *rv), *tv = malloc((size_t)c->rounds * sizeof *tv);
    if (!rv || !tv) s = ts_error(TS_ERR_OOM, "bench_attn_sched: ratios");
    for (size_t i = 0; s == TS_OK && i < tot; i++)
      for (int p = 1; p < NPLANS; p++) diff = fmax(diff, fabs((double)O[p][i] - O[0][i]));
    for (int p = 0; p < NPLANS && s == TS_OK; p++) {
      memcpy(tv, t + p * c->rounds, (size_t)c->rounds * sizeof *tv);
      med[p] = ts_quantile(tv, c->rounds, 0.5);
    }
    for (int k = 0; k < 2 && s == TS_OK; k++) { /* greedy / ilp per round: k 0 raw, 1 guarded */
      for (int r = 0; r < c->rounds; r++) {
        rv[r] = t[(2 * k) * c->rounds + r] / t[(2 * k + 1) * c->rounds + r];
        faster[k] += rv[r] > 1.0;
      }
      ratio[k][0] = ts_quantile(rv, c->rounds, 0.25), ratio[k][1] = ts_quantile(rv, c->rounds, 0.5), ratio[k][2] = ts_quantile(rv, c->rounds, 0.75);
    }
    if (s == TS_OK) {
      const double flops = 4.0 * (double)d * (double)pm.nnz * (double)H;
      if (rows) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "pattern", spec);
        cJSON_AddStringToObject(j, "reorder", method);
        cJSON_AddNumberToObject(j, "n", (double)n);
        cJSON_AddNumberToObject(j, "threads", c->threads);
        cJSON_AddNumberToObject(j, "heads", (double)H);
        cJSON_AddNumberToObject(j, "rounds", c->rounds);
        cJSON_AddStringToObject(j, "clock", c->cpu_clock ? "thread_cpu" : "wall");
        for (int p = 0; p < NPLANS; p++) {
          cJSON *x = cJSON_AddObjectToObject(j, plan_names[p]);
          ts_attn_stats st;
          ts_attn_plan_stats(plan[p], &st);
          cJSON_AddNumberToObject(x, "ms", med[p] * 1e3);
          cJSON_AddNumberToObject(x, "gflops_effective", flops / med[p] / 1e9);
          cJSON_AddNumberToObject(x, "work_ratio", st.work_ratio);
          cJSON_AddNumberToObject(x, "predicted_makespan", inf[p].makespan);
          cJSON_AddNumberToObject(x, "merged_pieces", (double)inf[p].merged);
          cJSON_AddNumberToObject(x, "solve_ms", solve_ms[p]);
          if (inf[p].fallback.br > 0) {
            char fb[48];
            snprintf(fb, sizeof fb, "%s %dx%d", fallback_name(inf[p].fallback_kind), inf[p].fallback.br,
                     inf[p].fallback.bc);
            cJSON_AddStringToObject(x, "fallback", fb);
          } else {
            cJSON_AddNullToObject(x, "fallback");
          }
        }
        cJSON_AddNumberToObject(j, "predicted_greedy_exact", inf[1].greedy_makespan);
        cJSON_AddNumberToObject(j, "pieces", (double)inf[1].npieces);
        for (int k = 0; k < 2; k++) {
          cJSON *x = cJSON_AddObjectToObject(j, k ? "greedy_over_ilp" : "greedy_over_ilp_raw");
          cJSON_AddNumberToObject(x, "q25", ratio[k][0]);
          cJSON_AddNumberToObject(x, "median", ratio[k][1]);
          cJSON_AddNumberToObject(x, "q75", ratio[k][2]);
          cJSON_AddNumberToObject(x, "ilp_faster_share", faster[k] / c->rounds);
        }
        cJSON_AddNumberToObject(j, "max_abs_diff", diff);
        cJSON_AddItemToArray(rows, j);
      } else {
        printf("%s (%s, %lld pieces, %d threads, %lld heads, %d rounds, %s clock)\n", spec, method, (long long)inf[1].npieces,
               c->threads, (long long)H, c->rounds, c->cpu_clock ? "thread CPU" : "wall");
        for (int p = 0; p < NPLANS; p++)
          printf("  %-10s %8.3f ms  %6.1f GFLOP/s eff.  predicted %.4g  merged %lld  solve %.0f ms%s%s\n", plan_names[p], med[p] * 1e3,
                 flops / med[p] / 1e9, inf[p].makespan, (long long)inf[p].merged, solve_ms[p], inf[p].fallback.br > 0 ? "  guard: " : "",
                 inf[p].fallback.br > 0 ? fallback_name(inf[p].fallback_kind) : "");
        printf("  greedy/ilp per round: raw %.3f (q25 %.3f, q75 %.3f; ilp faster in %.0f%%), guarded %.3f (q25 %.3f, q75 %.3f; "
               "%.0f%%); greedy's plan priced by the ILP's model %.4g; outputs agree within %.1e\n",
               ratio[0][1], ratio[0][0], ratio[0][2], 100 * faster[0] / c->rounds, ratio[1][1], ratio[1][0], ratio[1][2],
               100 * faster[1] / c->rounds, inf[1].greedy_makespan, diff);
      }
    }
    free(rv), free(tv);
  }
  for (int p = 0; p < NPLANS; p++) ts_attn_plan_destroy(plan[p]), ts_attn_schedule_free(&sch[p]), ts_free(O[p]);
  ts_free(Q), ts_free(K), ts_free(V), free(t);
  ts_context_destroy(ctx);
  ts_blocks_free(&blk);
  ts_bitmap_free(&bp);
  ts_csr_free(&pm);
  return s;
}

int main(int argc, char **argv) {
  cfg c = {.threads = 2, .heads = 8, .d = 64, .rounds = 41, .time_limit = 2.0};
  const char *cases = DEFAULT_CASES;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--cases") && a + 1 < argc) cases = argv[++a];
    else if (!strcmp(argv[a], "--threads") && a + 1 < argc) c.threads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--heads") && a + 1 < argc) c.heads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--d") && a + 1 < argc) c.d = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--rounds") && a + 1 < argc) c.rounds = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--time-limit") && a + 1 < argc) c.time_limit = atof(argv[++a]);
    else if (!strcmp(argv[a], "--cpu-clock")) c.cpu_clock = true;
    else if (!strcmp(argv[a], "--json")) c.json = true;
    else {
      fprintf(stderr, "usage: %s [--cases SPEC;SPEC] [--threads N] [--heads H] [--d D] [--rounds R] [--cpu-clock] "
                      "[--time-limit S] [--json]\n", argv[0]);
      return 2;
    }
  }
  if (c.threads < 1 || c.threads > 256 || c.heads < 1 || c.heads > 256 || c.d < 1 || c.d > 4096 || c.rounds < 3 ||
      c.rounds > MAX_ROUNDS || !(c.time_limit > 0) || (c.cpu_clock && c.threads != 1)) {
    fprintf(stderr, "%s: threads 1..256, heads 1..256, d 1..4096, rounds 3..%d, time limit > 0; --cpu-clock needs --threads 1\n",
            argv[0], MAX_ROUNDS);
    return 2;
  }
  ts_attn_profile_opts po = ts_attn_profile_opts_default();
  po.d = c.d;
  char path[4096];
  ts_attn_profile prof;
  memset(&prof, 0, sizeof prof);
  bool measured = false;
  ts_status s = ts_attn_profile_default_path(&po, path, sizeof path);
  if (s == TS_OK) s = ts_attn_profile_get(&po, path, &prof, &measured);
  if (s == TS_OK) s = ts_attn_cost_model_create(&c.model, &prof);
  ts_attn_profile_free(&prof);
  if (s != TS_OK) {
    fprintf(stderr, "bench_attn_sched: %s\n", ts_last_error());
    return 1;
  }
  cJSON *rows = c.json ? cJSON_CreateArray() : NULL;
  char *list = strdup(cases);
  int rc = 0;
  for (char *save = NULL, *spec = strtok_r(list, ";", &save); spec && rc == 0; spec = strtok_r(NULL, ";", &save))
    if (run_case(&c, spec, rows) != TS_OK) {
      fprintf(stderr, "bench_attn_sched: %s: %s\n", spec, ts_last_error());
      rc = 1;
    }
  free(list);
  if (rows) {
    ts_bench_print_json(rows);
    cJSON_Delete(rows);
  }
  ts_attn_cost_model_destroy(c.model);
  return rc;
}
