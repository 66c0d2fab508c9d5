/* tessera plan3d: data / tensor / pipeline parallelism and layer partition for Transformer training
 * on heterogeneous GPU clusters (FASOP).
 *   plan3d search    every configuration of a model on a cluster -> the fastest plans, Megatron-LM's
 *                    default for comparison, and under --budget the Pareto front over sub-clusters
 *   plan3d estimate  prices one configuration you give (dp, pp, mbs, tp, split, node order)
 *   plan3d explain   a plan file: per-stage table, and its simulated 1F1B schedule as an SVG Gantt
 *   plan3d emit      a plan file -> Megatron-LM / DeepSpeed / torchrun launch files */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/json_internal.h"
#include "plan3d/plan3d_internal.h"
#include "tessera/plan3d.h"

#define CMD "plan3d"
#define GIB (1024.0 * 1024.0 * 1024.0)

int ts__cmd_plan3d_emit(int argc, char **argv);

static void usage(void) {
  printf("usage: tessera plan3d search   --model M.json --cluster C.json --profile P.json [--top K] [--budget USD_PER_HOUR]\n"
         "                                [--partitioner greedy|dp|brute] [--uniform-tp] [--max-orders N]\n"
         "                                [--dp N] [--pp N] [--mbs N] [--out PLAN.json] [--gantt F.svg] [--pareto-svg F.svg] [--json]\n"
         "       tessera plan3d estimate --model M.json --cluster C.json --profile P.json --dp N --mbs N [--pp N]\n"
         "                                [--tp N | --tp TYPE=N,...] [--split A,B,...] [--order TYPE,TYPE,...]\n"
         "                                [--partitioner P] [--out PLAN.json] [--gantt F.svg] [--json]\n"
         "       tessera plan3d explain  PLAN.json [--svg F.svg] [--json]\n"
         "       tessera plan3d emit     PLAN.json --out DIR [--only megatron,deepspeed,torchrun]\n"
         "                                [--gpus-per-node TYPE=N,...] [--json]\n\n"
         "Chooses data (dp), tensor (tp, per GPU type) and pipeline (pp) parallel degrees, the micro-batch size,\n"
         "the order of the nodes and an uneven split of the layers over the stages, for training a Transformer\n"
         "on a cluster of mixed GPU types (FASOP, HPDC'24). Each configuration is split by the partitioner,\n"
         "priced with a 1F1B pipeline simulation, alpha-beta ring all-reduces over shared links and activation\n"
         "transfers over the slowest link, and rejected (with the reason) when a stage does not fit in memory.\n"
         "Formats of M, C, P and plans: docs/FORMATS.md, \"plan3d\".\n\n"
         "  --top K            plans listed (10)               --budget X  also search sub-clusters priced <= X $/hour\n"
         "  --partitioner P    greedy (FASOP, default) | dp (exact) | brute (exact, small inputs)\n"
         "  --uniform-tp       one TP degree for every stage (default: one per GPU type)\n"
         "  --max-orders N     node orders tried per cluster (64): all distinct ones when there are no more\n"
         "  --dp/--pp/--mbs N  fix a degree                    --split A,B  layers per stage (estimate)\n"
         "  --order T,T,...    node types in GPU order, one name per node (estimate; default: file order)\n"
         "  --out FILE         the best plan as JSON           --gantt F   its simulated schedule (SVG)\n"
         "  --pareto-svg F     the Pareto front (with --budget)  --json    JSON report\n"
         "emit writes Megatron-LM arguments (Megatron-Core >= 0.13 layout of the split), a DeepSpeed config with\n"
         "an explicit partition list and torchrun.sh; engines run one TP degree: plan with --uniform-tp for them.\n");
}

static ts_status read_text(const char *path, char **out) {
  size_t n;
  return ts_read_file(path, out, &n);
}

typedef struct inputs {
  ts_p3_model m;
  ts_p3_cluster c;
  ts_p3_profile *p;
} inputs;

static ts_status load_inputs(const char *mf, const char *cf, const char *pf, inputs *in) {
  memset(in, 0, sizeof *in);
  char *t = NULL;
  TS_TRY(read_text(mf, &t));
  ts_status s = ts_p3_model_from_json(t, mf, &in->m);
  free(t);
  if (s != TS_OK) return s;
  TS_TRY(read_text(cf, &t));
  s = ts_p3_cluster_from_json(t, cf, &in->c);
  free(t);
  if (s != TS_OK) return s;
  TS_TRY(read_text(pf, &t));
  s = ts_p3_profile_from_json(t, pf, &in->p);
  free(t);
  return s;
}

static void describe_plan(const ts_p3_plan *p, char *buf, size_t cap) {
  /* "tp 2,2,1 | split 5,4,3" compactly */
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "tp ");
  for (int s = 0; s < p->pp && o < cap; s++) {
    if (s && p->stages[s].tp == p->stages[s - 1].tp && p->uniform_tp) continue;
    o += (size_t)snprintf(buf + o, cap - o, "%s%d", s ? "," : "", p->stages[s].tp);
  }
  if (o < cap) o += (size_t)snprintf(buf + o, cap - o, "  split ");
  for (int s = 0; s < p->pp && o < cap; s++) o += (size_t)snprintf(buf + o, cap - o, "%s%d", s ? "," : "", p->stages[s].nlayers);
}

static void describe_order(const ts_p3_plan *p, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = 0;
  for (int n = 0; n < p->nnodes && o < cap;) {
    int k = p->node_order[n], r = 0;
    while (n < p->nnodes && p->node_order[n] == k) n++, r++;
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? " " : "", p->type_name[k]);
    if (r > 1 && o < cap) o += (size_t)snprintf(buf + o, cap - o, "x%d", r);
  }
}

static void print_plan_row(int rank, const ts_p3_plan *p) {
  char d[512], o[256];
  describe_plan(p, d, sizeof d);
  describe_order(p, o, sizeof o);
  printf("%4d  %9.1f  %8.4f  %3d %3d %4d %4d  %-26s  %s\n", rank, p->step * 1e3, p->usd_per_step, p->dp, p->pp, p->mbs,
         p->micro_batches, o, d);
}

static cJSON *plan_cjson(const ts_p3_plan *p) { return ts__p3_plan_cjson(p); }

static int write_plan(const ts_p3_plan *p, const char *path) {
  cJSON *j = ts__p3_plan_cjson(p);
  ts_status s = j ? ts__json_write_file(path, j) : ts_error(TS_ERR_OOM, "out of memory writing the plan");
  cJSON_Delete(j);
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

/* "--tp 2" or "--tp A100=2,A10=1" into tp[type]. */
static bool parse_tp(const char *v, const ts_p3_cluster *c, int *tp) {
  if (!strchr(v, '=')) {
    long t;
    if (!cli_parse_int(CMD, "--tp", v, 1, 1024, &t)) return false;
    for (int k = 0; k < c->ntypes; k++) tp[k] = (int)t;
    return true;
  }
  char buf[512];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(it, '=');
    if (!eq) return cli_usage_error(CMD, "--tp: '%s' is not TYPE=N", it), false;
    *eq = 0;
    int k = -1;
    for (int i = 0; i < c->ntypes; i++)
      if (!strcmp(c->types[i].name, it) || !strcmp(c->types[i].gpu, it)) k = i;
    if (k < 0) return cli_usage_error(CMD, "--tp: no node type or gpu named '%s' in cluster '%s'", it, c->name), false;
    long t;
    if (!cli_parse_int(CMD, "--tp", eq + 1, 1, 1024, &t)) return false;
    tp[k] = (int)t;
  }
  return true;
}

static bool parse_list(const char *opt, const char *v, int *out, int cap, int *n) {
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", v);
  *n = 0;
  for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
    if (*n == cap) return cli_usage_error(CMD, "%s: more than %d values", opt, cap), false;
    long x;
    if (!cli_parse_int(CMD, opt, it, 1, 1000000, &x)) return false;
    out[(*n)++] = (int)x;
  }
  if (!*n) return cli_usage_error(CMD, "%s: empty list", opt), false;
  return true;
}

static bool parse_order(const char *v, const ts_p3_cluster *c, int *order, int *n) {
  char buf[8192];
  snprintf(buf, sizeof buf, "%s", v);
  *n = 0;
  for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
    if (*n == TS_P3_MAX_NODES) return cli_usage_error(CMD, "--order: more than %d nodes", TS_P3_MAX_NODES), false;
    int k = -1;
    for (int i = 0; i < c->ntypes; i++)
      if (!strcmp(c->types[i].name, it)) k = i;
    if (k < 0) return cli_usage_error(CMD, "--order: no node type named '%s' in cluster '%s'", it, c->name), false;
    order[(*n)++] = k;
  }
  return true;
}

static void print_stages(const ts_p3_plan *p) {
  printf("stage  node type        gpu      tp  gpus        layers   fwd ms   bwd ms  send ms  allred ms  mem GiB / limit\n");
  for (int s = 0; s < p->pp; s++) {
    const ts_p3_stage *q = &p->stages[s];
    char g[32], l[32];
    snprintf(g, sizeof g, "%d-%d", q->first_gpu, q->first_gpu + q->ngpus - 1);
    snprintf(l, sizeof l, "%d-%d", q->first_layer, q->first_layer + q->nlayers - 1);
    printf("%5d  %-15s  %-7s %3d  %-10s  %-7s %8.2f %8.2f %8.3f %10.2f  %6.2f / %.1f%s%s%s\n", s, p->type_name[q->type],
           p->gpu_name[q->type], q->tp, g, l, q->fwd * 1e3, q->bwd * 1e3, q->send * 1e3, q->allreduce * 1e3, q->mem / GIB,
           q->mem_limit / GIB, q->mixed ? "  mixed" : "", q->embedding ? "  +embedding" : "", q->head ? "  +head" : "");
  }
  printf("step %.2f ms = pipeline %.2f + data-parallel all-reduce %.2f + embedding all-reduce %.2f + optimizer %.2f "
         "(overlaps counted once); $%.2f/hour, $%.5f/step\n",
         p->step * 1e3, p->pipeline * 1e3, p->dp_allreduce * 1e3, p->embed_allreduce * 1e3, p->update * 1e3,
         p->usd_per_hour, p->usd_per_step);
}

/* The options search and estimate share: the three input files, --out, --gantt, --partitioner.
 * 1: argv[*i] (and its value) consumed; 0: not one of them; -1: bad usage (message printed). */
typedef struct file_opts {
  const char *model, *cluster, *profile, *out, *gantt;
  ts_p3_partitioner partitioner;
} file_opts;

static int file_opt(int argc, char **argv, int *i, file_opts *f) {
  const char *a = argv[*i];
  const char **slot = !strcmp(a, "--model")     ? &f->model
                      : !strcmp(a, "--cluster") ? &f->cluster
                      : !strcmp(a, "--profile") ? &f->profile
                      : !strcmp(a, "--out")     ? &f->out
                      : !strcmp(a, "--gantt")   ? &f->gantt
                                                : NULL;
  bool part = !strcmp(a, "--partitioner");
  if (!slot && !part) return 0;
  const char *val = cli_value(CMD, argc, argv, i);
  if (!val) return -1;
  if (slot) *slot = val;
  else if (ts_p3_partitioner_parse(val, &f->partitioner) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error()), -1;
  return 1;
}

static int cmd_search(int argc, char **argv) {
  const char *psvg = NULL;
  ts_p3_search_opts o;
  ts_p3_search_opts_default(&o);
  file_opts f = {.partitioner = o.partitioner};
  cli_common_opts co = {0};
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c == 0) c = file_opt(argc, argv, &i, &f);
    if (c < 0) return CLI_USAGE;
    if (c > 0) continue;
    const char *a = argv[i];
    long v;
    double d;
    if (!strcmp(a, "--pareto-svg")) {
      if (!(psvg = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (!strcmp(a, "--top") || !strcmp(a, "--max-orders") || !strcmp(a, "--dp") || !strcmp(a, "--pp") ||
               !strcmp(a, "--mbs")) {
      const char *val = cli_value(CMD, argc, argv, &i);
      if (!val || !cli_parse_int(CMD, a, val, 1, 1000000, &v)) return CLI_USAGE;
      if (!strcmp(a, "--top")) o.top = (int)v;
      else if (!strcmp(a, "--max-orders")) o.max_orders = (int)v;
      else if (!strcmp(a, "--dp")) o.dp = (int)v;
      else if (!strcmp(a, "--pp")) o.pp = (int)v;
      else o.mbs = (int)v;
    } else if (!strcmp(a, "--budget")) {
      const char *val = cli_value(CMD, argc, argv, &i);
      if (!val || !cli_parse_double(CMD, a, val, 1e-9, 1e12, &d)) return CLI_USAGE;
      o.budget_per_hour = d;
    } else if (!strcmp(a, "--uniform-tp")) {
      o.per_type_tp = false;
    } else {
      return cli_usage_error(CMD, "search: unknown option '%s' (see tessera plan3d --help)", a);
    }
  }
  if (co.help) return usage(), CLI_OK;
  const char *mf = f.model, *cf = f.cluster, *pf = f.profile, *out = f.out, *gantt = f.gantt;
  o.partitioner = f.partitioner;
  if (!mf || !cf || !pf) return cli_usage_error(CMD, "search needs --model, --cluster and --profile");
  if (psvg && o.budget_per_hour <= 0) return cli_usage_error(CMD, "--pareto-svg needs --budget (the front is over sub-clusters)");
  inputs in;
  ts_status s = load_inputs(mf, cf, pf, &in);
  if (s != TS_OK) {
    ts_p3_profile_destroy(in.p);
    return cli_fail(CMD, s);
  }
  o.progress = true;
  ts_p3_search_result r;
  s = ts_p3_search(&in.m, &in.c, in.p, &o, &r);
  ts_p3_profile_destroy(in.p);
  if (s != TS_OK) return cli_fail(CMD, s);
  int rc = CLI_OK;
  if (out) rc = write_plan(&r.plans[0], out);
  if (rc == CLI_OK && gantt && (s = ts_p3_plan_gantt_svg(&r.plans[0], gantt)) != TS_OK) rc = cli_fail(CMD, s);
  if (rc == CLI_OK && psvg && (s = ts_p3_pareto_svg(r.pareto, r.npareto, r.has_baseline ? &r.baseline : NULL, psvg)) != TS_OK)
    rc = cli_fail(CMD, s);
  /* the baseline runs on the whole cluster: compared with the best plan there */
  double ratio = r.has_baseline && r.has_full ? r.baseline.step / r.full_best.step : NAN;
  if (rc == CLI_OK && co.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON *sr = cJSON_AddObjectToObject(j, "search");
    cJSON_AddStringToObject(sr, "model", in.m.name);
    cJSON_AddStringToObject(sr, "cluster", in.c.name);
    cJSON_AddStringToObject(sr, "partitioner", ts_p3_partitioner_name(o.partitioner));
    cJSON_AddBoolToObject(sr, "per_type_tp", o.per_type_tp);
    cJSON_AddNumberToObject(sr, "budget_per_hour", o.budget_per_hour);
    cJSON_AddNumberToObject(sr, "compositions", (double)r.compositions);
    cJSON_AddNumberToObject(sr, "evaluated", (double)r.evaluated);
    cJSON_AddNumberToObject(sr, "rejected_memory", (double)r.rejected_memory);
    cJSON_AddNumberToObject(sr, "rejected_other", (double)r.rejected_other);
    cJSON_AddNumberToObject(sr, "seconds", r.seconds);
    cJSON *pl = cJSON_AddArrayToObject(j, "plans");
    for (int i = 0; i < r.nplans; i++) cJSON_AddItemToArray(pl, plan_cjson(&r.plans[i]));
    if (r.has_baseline) cJSON_AddItemToObject(j, "baseline", plan_cjson(&r.baseline));
    if (r.has_baseline && r.has_full) cJSON_AddNumberToObject(j, "speedup_vs_baseline", ratio);
    if (o.budget_per_hour > 0 && r.has_full) cJSON_AddItemToObject(j, "best_full_cluster", plan_cjson(&r.full_best));
    if (o.budget_per_hour > 0) {
      cJSON *pa = cJSON_AddArrayToObject(j, "pareto");
      for (int i = 0; i < r.npareto; i++) cJSON_AddItemToArray(pa, plan_cjson(&r.pareto[i]));
    }
    cli_print_json(j);
  } else if (rc == CLI_OK) {
    printf("plan3d search: %s on %s, partitioner %s, %s TP; %lld configurations priced over %lld cluster(s) in %.3f s "
           "(%lld out of memory, %lld infeasible otherwise)\n\n",
           in.m.name, in.c.name, ts_p3_partitioner_name(o.partitioner), o.per_type_tp ? "per-type" : "uniform",
           (long long)r.evaluated, (long long)r.compositions, r.seconds, (long long)r.rejected_memory,
           (long long)r.rejected_other);
    printf("rank   step ms    $/step   dp  pp  mbs    m         node order                  tp / layers per stage\n");
    for (int i = 0; i < r.nplans; i++) print_plan_row(i + 1, &r.plans[i]);
    if (r.has_baseline) {
      printf("\nMegatron-LM default (one TP degree, even split, file node order):\n");
      print_plan_row(0, &r.baseline);
      if (r.has_full) printf("best plan on the whole cluster vs Megatron-LM default: %.3fx\n", ratio);
      else printf("(the whole cluster is over the price limit: not searched, no ratio)\n");
    } else {
      printf("\nMegatron-LM default: no configuration with an even split fits\n");
    }
    if (o.budget_per_hour > 0) {
      printf("\nPareto front (step time vs $ per step) over %lld sub-clusters within $%.2f/hour:\n", (long long)r.compositions,
             o.budget_per_hour);
      printf("   step ms    $/step   $/hour  nodes\n");
      for (int i = 0; i < r.npareto; i++) {
        char ord[256];
        describe_order(&r.pareto[i], ord, sizeof ord);
        printf("%9.1f  %8.4f  %7.2f  %s\n", r.pareto[i].step * 1e3, r.pareto[i].usd_per_step, r.pareto[i].usd_per_hour, ord);
      }
    }
    printf("\nbest plan:\n");
    print_stages(&r.plans[0]);
    if (out) printf("plan written to %s\n", out);
    if (gantt) printf("schedule drawn to %s\n", gantt);
    if (psvg) printf("Pareto front drawn to %s\n", psvg);
  }
  ts_p3_search_result_free(&r);
  return rc;
}

static int cmd_estimate(int argc, char **argv) {
  const char *tps = NULL, *splits = NULL, *orders = NULL;
  ts_p3_config cfg;
  memset(&cfg, 0, sizeof cfg);
  file_opts f = {.partitioner = TS_P3_GREEDY};
  cli_common_opts co = {0};
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c == 0) c = file_opt(argc, argv, &i, &f);
    if (c < 0) return CLI_USAGE;
    if (c > 0) continue;
    const char *a = argv[i];
    long v;
    if (!strcmp(a, "--dp") || !strcmp(a, "--pp") || !strcmp(a, "--mbs")) {
      const char *val = cli_value(CMD, argc, argv, &i);
      if (!val || !cli_parse_int(CMD, a, val, 1, 1000000, &v)) return CLI_USAGE;
      if (!strcmp(a, "--dp")) cfg.dp = (int)v;
      else if (!strcmp(a, "--pp")) cfg.pp = (int)v;
      else cfg.mbs = (int)v;
    } else if (!strcmp(a, "--tp") || !strcmp(a, "--split") || !strcmp(a, "--order")) {
      const char *val = cli_value(CMD, argc, argv, &i);
      if (!val) return CLI_USAGE;
      if (!strcmp(a, "--tp")) tps = val;
      else if (!strcmp(a, "--split")) splits = val;
      else orders = val;
    } else {
      return cli_usage_error(CMD, "estimate: unknown option '%s' (see tessera plan3d --help)", a);
    }
  }
  if (co.help) return usage(), CLI_OK;
  const char *mf = f.model, *cf = f.cluster, *pf = f.profile, *out = f.out, *gantt = f.gantt;
  cfg.partitioner = f.partitioner;
  if (!mf || !cf || !pf) return cli_usage_error(CMD, "estimate needs --model, --cluster and --profile");
  if (!cfg.dp || !cfg.mbs) return cli_usage_error(CMD, "estimate needs --dp and --mbs");
  inputs in;
  ts_status s = load_inputs(mf, cf, pf, &in);
  if (s != TS_OK) {
    ts_p3_profile_destroy(in.p);
    return cli_fail(CMD, s);
  }
  int split[TS_P3_MAX_STAGES], nsplit = 0, order[TS_P3_MAX_NODES], norder = 0;
  bool ok = (!tps || parse_tp(tps, &in.c, cfg.tp)) && (!splits || parse_list("--split", splits, split, TS_P3_MAX_STAGES, &nsplit)) &&
            (!orders || parse_order(orders, &in.c, order, &norder));
  if (!ok) {
    ts_p3_profile_destroy(in.p);
    return CLI_USAGE;
  }
  if (splits) {
    if (cfg.pp && cfg.pp != nsplit) {
      ts_p3_profile_destroy(in.p);
      return cli_usage_error(CMD, "--split lists %d stages, --pp says %d", nsplit, cfg.pp);
    }
    cfg.pp = nsplit;
    cfg.split = split;
  }
  if (orders) cfg.order = order, cfg.norder = norder;
  ts_p3_plan *plan = malloc(sizeof *plan);
  if (!plan) {
    ts_p3_profile_destroy(in.p);
    return cli_fail(CMD, ts_error(TS_ERR_OOM, "out of memory"));
  }
  s = ts_p3_estimate(&in.m, &in.c, in.p, &cfg, plan);
  ts_p3_profile_destroy(in.p);
  int rc = s == TS_OK ? CLI_OK : cli_fail(CMD, s);
  if (rc == CLI_OK && out) rc = write_plan(plan, out);
  if (rc == CLI_OK && gantt && (s = ts_p3_plan_gantt_svg(plan, gantt)) != TS_OK) rc = cli_fail(CMD, s);
  if (rc == CLI_OK) {
    if (co.json) {
      cli_print_json(plan_cjson(plan));
    } else {
      char ord[512];
      describe_order(plan, ord, sizeof ord);
      printf("plan3d estimate: %s on %s (%s): dp %d, pp %d, micro-batch %d x %d\n", in.m.name, in.c.name, ord, plan->dp,
             plan->pp, plan->mbs, plan->micro_batches);
      print_stages(plan);
    }
  }
  free(plan);
  return rc;
}

static int cmd_explain(int argc, char **argv) {
  const char *file = NULL, *svg = NULL;
  cli_common_opts co = {0};
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c < 0) return CLI_USAGE;
    if (c > 0) continue;
    if (!strcmp(argv[i], "--svg")) {
      if (!(svg = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (argv[i][0] == '-' || file) {
      return cli_usage_error(CMD, "explain: unexpected argument '%s'", argv[i]);
    } else {
      file = argv[i];
    }
  }
  if (co.help) return usage(), CLI_OK;
  if (!file) return cli_usage_error(CMD, "explain needs a plan file");
  char *t = NULL;
  ts_status s = read_text(file, &t);
  ts_p3_plan *p = malloc(sizeof *p);
  if (s == TS_OK && !p) s = ts_error(TS_ERR_OOM, "out of memory");
  if (s == TS_OK) s = ts_p3_plan_from_json(t, file, p);
  free(t);
  if (s != TS_OK) {
    free(p);
    return cli_fail(CMD, s);
  }
  /* the schedule again from the plan's own stage times: it must give the plan's pipeline time */
  double fwd[TS_P3_MAX_STAGES], bwd[TS_P3_MAX_STAGES], p2p[TS_P3_MAX_STAGES], span = 0;
  for (int i = 0; i < p->pp; i++) fwd[i] = p->stages[i].fwd, bwd[i] = p->stages[i].bwd, p2p[i] = p->stages[i].send;
  s = ts_p3_simulate_1f1b(p->pp, p->micro_batches, fwd, bwd, p->pp > 1 ? p2p : NULL, &span, NULL);
  int rc = s == TS_OK ? CLI_OK : cli_fail(CMD, s);
  if (rc == CLI_OK && svg && (s = ts_p3_plan_gantt_svg(p, svg)) != TS_OK) rc = cli_fail(CMD, s);
  if (rc == CLI_OK) {
    double dev = p->pipeline > 0 ? fabs(span - p->pipeline) / p->pipeline : 0;
    if (co.json) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddItemToObject(j, "plan", plan_cjson(p));
      cJSON_AddNumberToObject(j, "simulated_pipeline_ms", span * 1e3);
      cJSON_AddBoolToObject(j, "consistent", dev < 1e-6);
      cli_print_json(j);
    } else {
      char ord[512];
      describe_order(p, ord, sizeof ord);
      printf("%s on %s (%s): dp %d, pp %d, micro-batch %d x %d, partitioner %s\n", p->model.name, p->cluster, ord, p->dp,
             p->pp, p->mbs, p->micro_batches, ts_p3_partitioner_name(p->partitioner));
      print_stages(p);
      printf("1F1B simulated again from the stage times: %.3f ms (%s the plan's pipeline time)\n", span * 1e3,
             dev < 1e-6 ? "equals" : "DIFFERS from");
      if (svg) printf("schedule drawn to %s\n", svg);
    }
    if (dev >= 1e-6) rc = cli_fail(CMD, ts_error(TS_ERR_FORMAT, "%s: pipeline_ms %.6f does not match its stages (%.6f)", file,
                                                 p->pipeline * 1e3, span * 1e3));
  }
  free(p);
  return rc;
}

int cmd_plan3d(int argc, char **argv) {
  if (argc < 2) return cli_usage_error(CMD, "missing subcommand (search, estimate, explain, emit; --help)");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(), CLI_OK;
  const char *sub = argv[1];
  if (!strcmp(sub, "search")) return cmd_search(argc, argv);
  if (!strcmp(sub, "estimate")) return cmd_estimate(argc, argv);
  if (!strcmp(sub, "explain")) return cmd_explain(argc, argv);
  if (!strcmp(sub, "emit")) return ts__cmd_plan3d_emit(argc - 1, argv + 1);
  return cli_usage_error(CMD, "unknown subcommand '%s' (search, estimate, explain, emit)", sub);
}
