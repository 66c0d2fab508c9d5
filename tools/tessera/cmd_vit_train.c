/* tessera vit train-bench: one training step (forward + backward + SGD) of a whole ViT with the three
 * attention backends of `vit bench` (dense flash with the mask, fixed-tile block skip -- 64x64 by
 * default -- and the tile-scheduled plan), timed in interleaved rounds by the measure engine. Per
 * backend: the step time, its attention time (training forward + backward), the attention share,
 * the activation arena's measured high-water mark beside its bound, and the per-layer memory
 * strategies (all RECOMPUTE, one forced by --strategy, or chosen under --mem-budget by the planner,
 * ts_nn_vit_plan_memory, for each backend). The sparse backends' step speedup over dense flash is
 * reported next to its Amdahl bound 1 / (1 - share), share = dense flash's attention share in the
 * same round. Unlike `vit bench`, the part outside attention is not shared between the backends:
 * with a budget their strategies (and so their re-made forwards) differ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_report.h"
#include "cmd_vit.h"

#define CMD "vit"

static void usage(void) {
  printf("usage: tessera vit train-bench --model deit-s|vit-b16|tiny --res R --pattern SPEC [--batch B]\n"
         "                               [--mem-budget BYTES | --strategy S] [--lr LR] [--repeats N]\n"
         "                               [--warmup N] [--dump DIR] [--dump-backend K] [--threads N] [--json]\n"
         "                               [vit bench's backend options]\n\n"
         "One training step of the whole model (fp32, random weights and images, labels b %% classes; no\n"
         "class token: mean-pool head): forward, cross-entropy, backward (LayerNorm, exact GELU, linear\n"
         "layers through oneDNN, attention through each backend's backward), SGD. Backends: dense flash\n"
         "(mask applied), fixed tiles with block skip (64x64 unless --fixed-tile) and the scheduled plan.\n"
         "Per backend: step time, attention time (forward + backward) and share, forward / backward / SGD\n"
         "time, peak activation memory MEASURED (the arena's high-water mark) beside its bound, and the\n"
         "strategy of each layer; the speedup of each sparse backend over dense flash next to the Amdahl\n"
         "bound 1 / (1 - dense flash's attention share) of the same round; the process's peak RSS.\n\n"
         "  --model M         deit-s, vit-b16 or tiny (64 wide, 2 heads, depth 2: quick checks)\n"
         "  --res R           image side, a multiple of 16\n"
         "  --pattern SPEC    attention mask over the token grid (h, w filled in): window2d:k=13, ...\n"
         "  --batch B         images per step (1)\n"
         "  --mem-budget B    bytes of activation memory (suffix K, M, G: 2^10, 2^20, 2^30): the planner\n"
         "                    times one block per strategy (cached) and picks each layer's by knapsack\n"
         "  --strategy S      every layer recompute (default), store_scores or checkpoint\n"
         "  --lr LR           SGD learning rate (0.001)\n"
         "  --repeats N       timed rounds (3, at most %d); a round = one step per backend, interleaved\n"
         "  --warmup N        untimed rounds first (1)\n"
         "  --dump DIR        first, one step with --dump-backend (scheduled) written as .npy files for\n"
         "                    bench/peers/vit_train_torch.py (weights before and after, gradients, images,\n"
         "                    labels, mask, token order, meta.json)\n"
         "  --threads N       threads\n"
         "  --json            print the report as JSON\n"
         "vit bench's options for the backends: --depth, --reorder, --extract, --density, --solver,\n"
         "--solve-time, --cost, --profile-level, --calibrate, --no-cache, --fixed-tile (tessera vit bench --help).\n",
         VIT_MAX_ROUNDS);
}

typedef struct targs {
  vit_args v;
  cli_common_opts co;
  int64_t budget;       /* 0: none */
  int strategy;         /* -1: none given */
  double lr;
  long warmup;
  const char *dump;
  int dump_backend;
} targs;

/* "123", "4K", "1.5G" -> bytes. */
static bool parse_bytes(const char *v, int64_t *out) {
  char *end;
  double x = strtod(v, &end);
  double mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
  else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
  else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
  if (end == v || *end || !(x >= 0) || x * mul > 9e18) return false;
  *out = (int64_t)(x * mul);
  return true;
}

static int parse(int argc, char **argv, targs *t) {
  for (int i = 1; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &t->co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *a = argv[i], *v;
    if (strcmp(a, "--mem-budget") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (!parse_bytes(v, &t->budget) || t->budget < 1)
        return cli_usage_error(CMD, "--mem-budget '%s' is not a positive byte count (suffix K, M or G)", v);
    } else if (strcmp(a, "--strategy") == 0) {
      ts_nn_mem_strategy s;
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_nn_mem_strategy_parse(v, &s) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
      t->strategy = (int)s;
    } else if (strcmp(a, "--lr") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_double(CMD, a, v, 0, 1e3, &t->lr)) return CLI_USAGE;
    } else if (strcmp(a, "--warmup") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, a, v, 0, 16, &t->warmup)) return CLI_USAGE;
    } else if (strcmp(a, "--dump") == 0) {
      if (!(t->dump = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(a, "--dump-backend") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      t->dump_backend = -1;
      for (int k = 0; k < VIT_NB; k++)
        if (strcmp(v, vit_backend_names[k]) == 0) t->dump_backend = k;
      if (t->dump_backend < 0) return cli_usage_error(CMD, "--dump-backend '%s' (dense_flash, fixed, scheduled)", v);
    } else {
      r = vit_parse_opt(CMD, argc, argv, &i, &t->v);
      if (r < 0) return CLI_USAGE;
      if (r == 0) return cli_usage_error(CMD, "unknown argument '%s'", a);
    }
  }
  if (t->budget && t->strategy >= 0) return cli_usage_error(CMD, "train-bench: --mem-budget and --strategy exclude each other");
  return CLI_OK;
}

/* A candidate of the measure engine: one step with backend k and its strategies; each call's own
 * figures are kept (the warm-up's first). */
typedef struct step_arg {
  ts_nn_vit *m;
  ts_nn_attn *a;
  const ts_nn_mem_strategy *s;
  const float *img;
  const int32_t *labels;
  float lr;
  ts_progress *prog;            /* shared by the backends: steps done of all */
  int *done;
  ts_nn_vit_train_stats st[16 + VIT_MAX_ROUNDS];
  int calls;
} step_arg;

static ts_status step_call(void *p) {
  step_arg *x = p;
  ts_nn_vit_train_stats st;
  TS_TRY(ts_nn_vit_set_attn(x->m, x->a));
  TS_TRY(ts_nn_vit_train_set_strategies(x->m, x->s));
  TS_TRY(ts_nn_vit_train_step(x->m, x->img, x->labels, x->lr, &st));
  if (x->calls < 16 + VIT_MAX_ROUNDS) x->st[x->calls] = st;
  x->calls++;
  ts_progress_update(x->prog, ++*x->done);
  return TS_OK;
}

typedef struct result {
  vit_fig step[VIT_NB], attn[VIT_NB], fwd[VIT_NB], bwd[VIT_NB], share[VIT_NB];
  vit_fig speedup[VIT_NB], attn_speedup[VIT_NB], amdahl;
  ts_nn_vit_train_stats last[VIT_NB];
  int64_t peak[VIT_NB];
  int rounds;
  double other_cpus;
} result;

static ts_status run(step_arg *sa, int warmup, int repeats, result *r) {
  ts_measure_fn fn[VIT_NB];
  void *arg[VIT_NB];
  ts_progress prog;
  int done = 0;
  ts_progress_begin(&prog, "train-bench steps", VIT_NB * (warmup + repeats));
  for (int k = 0; k < VIT_NB; k++) fn[k] = step_call, arg[k] = &sa[k], sa[k].prog = &prog, sa[k].done = &done;
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = warmup, mo.rounds = mo.max_rounds = repeats, mo.min_time_s = 0, mo.alternate = true;
  ts_measure_result mr[VIT_NB];
  ts_measure_info info;
  ts_status st = ts_measure_run(VIT_NB, fn, arg, &mo, mr, &info);
  ts_progress_end(&prog);
  TS_TRY(st);
  for (int k = 0; k < VIT_NB; k++)
    if (mr[k].status != TS_OK) return ts_error(mr[k].status, "train-bench: the %s step failed", vit_backend_names[k]);
  const int n = info.rounds;
  double v[5][VIT_NB][VIT_MAX_ROUNDS], sp[VIT_NB][VIT_MAX_ROUNDS], asp[VIT_NB][VIT_MAX_ROUNDS], amd[VIT_MAX_ROUNDS];
  for (int k = 0; k < VIT_NB; k++) {
    r->peak[k] = 0;
    for (int i = 0; i < sa[k].calls && i < 16 + VIT_MAX_ROUNDS; i++)
      r->peak[k] = sa[k].st[i].peak_bytes > r->peak[k] ? sa[k].st[i].peak_bytes : r->peak[k];
    r->last[k] = sa[k].st[warmup + n - 1];
  }
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < VIT_NB; k++) {
      const ts_nn_vit_train_stats *s = &sa[k].st[warmup + i];
      v[0][k][i] = s->total_s * 1e3, v[1][k][i] = (s->attn_fwd_s + s->attn_bwd_s) * 1e3;
      v[2][k][i] = s->forward_s * 1e3, v[3][k][i] = s->backward_s * 1e3, v[4][k][i] = v[1][k][i] / v[0][k][i];
    }
    for (int k = 0; k < VIT_NB; k++)
      sp[k][i] = bench_ratio(v[0][VIT_DENSE][i], v[0][k][i]), asp[k][i] = bench_ratio(v[1][VIT_DENSE][i], v[1][k][i]);
    amd[i] = bench_ratio(1.0, 1 - v[4][VIT_DENSE][i]);
  }
  for (int k = 0; k < VIT_NB; k++) {
    r->step[k] = vit_time_fig(v[0][k], n), r->attn[k] = vit_time_fig(v[1][k], n);
    r->fwd[k] = vit_time_fig(v[2][k], n), r->bwd[k] = vit_time_fig(v[3][k], n), r->share[k] = vit_time_fig(v[4][k], n);
    r->speedup[k] = vit_ratio_fig(sp[k], n), r->attn_speedup[k] = vit_ratio_fig(asp[k], n);
  }
  r->amdahl = vit_ratio_fig(amd, n);
  r->rounds = n, r->other_cpus = info.other_cpus;
  return TS_OK;
}

/* "12 recompute" / "8 recompute, 4 checkpoint". */
static const char *strategy_summary(char *buf, size_t cap, const ts_nn_mem_strategy *s, int64_t depth) {
  int count[TS_NN_MEM_COUNT] = {0};
  for (int64_t l = 0; l < depth; l++) count[s[l]]++;
  size_t len = 0;
  buf[0] = 0;
  for (int k = 0; k < TS_NN_MEM_COUNT; k++)
    if (count[k] && len < cap)
      len += (size_t)snprintf(buf + len, cap - len, "%s%d %s", len ? ", " : "", count[k], ts_nn_mem_strategy_name(k));
  return buf;
}

static int64_t peak_rss(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss * 1024 : -1; /* Linux: KiB */
}

static void report_json(const targs *t, const ts_nn_vit_config *cfg, const ts_nn_token_mask *mask, ts_context *ctx,
                        ts_nn_attn *const *be, ts_nn_mem_strategy *const *strat, const ts_nn_mem_plan_info *plan,
                        const result *r) {
  cJSON *j = cJSON_CreateObject();
  char k[96];
  cJSON_AddStringToObject(j, "model", t->v.model);
  cJSON_AddNumberToObject(j, "res", (double)t->v.res);
  cJSON_AddNumberToObject(j, "tokens", (double)mask->n);
  cJSON_AddStringToObject(j, "pattern", t->v.pattern);
  cJSON_AddNumberToObject(j, "density", mask->density);
  cJSON_AddNumberToObject(j, "batch", (double)t->v.batch);
  cJSON_AddNumberToObject(j, "depth", (double)cfg->depth);
  cJSON_AddNumberToObject(j, "threads", ts_context_threads(ctx));
  cJSON_AddNumberToObject(j, "rounds", r->rounds);
  cJSON_AddNumberToObject(j, "warmup_rounds", (double)t->warmup);
  cJSON_AddNumberToObject(j, "lr", t->lr);
  bench_json_num(j, "mem_budget", t->budget ? (double)t->budget : NAN);
  bench_json_num(j, "other_cpus", r->other_cpus >= 0 ? r->other_cpus : NAN);
  for (int b = 0; b < VIT_NB; b++) {
    const char *nm = vit_backend_names[b];
    const ts_nn_vit_train_stats *s = &r->last[b];
    snprintf(k, sizeof k, "step_ms_%s", nm), vit_add_fig(j, k, &r->step[b], false);
    snprintf(k, sizeof k, "min_step_ms_%s", nm), cJSON_AddNumberToObject(j, k, r->step[b].min);
    snprintf(k, sizeof k, "attn_ms_%s", nm), vit_add_fig(j, k, &r->attn[b], false);
    snprintf(k, sizeof k, "attn_share_%s", nm), vit_add_fig(j, k, &r->share[b], false);
    snprintf(k, sizeof k, "forward_ms_%s", nm), vit_add_fig(j, k, &r->fwd[b], false);
    snprintf(k, sizeof k, "backward_ms_%s", nm), vit_add_fig(j, k, &r->bwd[b], false);
    snprintf(k, sizeof k, "attn_fwd_ms_%s", nm), cJSON_AddNumberToObject(j, k, s->attn_fwd_s * 1e3);
    snprintf(k, sizeof k, "attn_bwd_ms_%s", nm), cJSON_AddNumberToObject(j, k, s->attn_bwd_s * 1e3);
    snprintf(k, sizeof k, "remat_ms_%s", nm), cJSON_AddNumberToObject(j, k, s->remat_s * 1e3);
    snprintf(k, sizeof k, "sgd_ms_%s", nm), cJSON_AddNumberToObject(j, k, s->sgd_s * 1e3);
    snprintf(k, sizeof k, "loss_%s", nm), bench_json_num(j, k, s->loss);
    snprintf(k, sizeof k, "peak_activation_bytes_%s", nm), cJSON_AddNumberToObject(j, k, (double)r->peak[b]);
    snprintf(k, sizeof k, "bound_bytes_%s", nm), cJSON_AddNumberToObject(j, k, (double)s->bound_bytes);
    snprintf(k, sizeof k, "strategies_%s", nm);
    cJSON *arr = cJSON_AddArrayToObject(j, k);
    for (int64_t l = 0; l < cfg->depth; l++) cJSON_AddItemToArray(arr, cJSON_CreateString(ts_nn_mem_strategy_name(strat[b][l])));
    if (t->budget) {
      snprintf(k, sizeof k, "plan_%s", nm);
      cJSON *p = cJSON_AddObjectToObject(j, k), *ts = cJSON_AddArrayToObject(p, "block_time_s");
      for (int q = 0; q < TS_NN_MEM_COUNT; q++) cJSON_AddItemToArray(ts, cJSON_CreateNumber(plan[b].time_s[q]));
      cJSON_AddNumberToObject(p, "predicted_s", plan[b].predicted_s);
      cJSON_AddNumberToObject(p, "bound_bytes", (double)plan[b].bound);
      cJSON_AddBoolToObject(p, "cached", plan[b].cached);
      cJSON_AddNumberToObject(p, "ms", plan[b].ms);
    }
    if (b != VIT_DENSE) {
      snprintf(k, sizeof k, "speedup_vs_dense_flash_%s", nm), vit_add_fig(j, k, &r->speedup[b], true);
      snprintf(k, sizeof k, "attn_speedup_vs_dense_flash_%s", nm), vit_add_fig(j, k, &r->attn_speedup[b], true);
      snprintf(k, sizeof k, "amdahl_fraction_%s", nm), bench_json_num(j, k, r->speedup[b].med / r->amdahl.med);
    }
  }
  vit_add_fig(j, "amdahl_bound", &r->amdahl, true);
  ts_nn_attn_info fi, si;
  ts_nn_attn_get_info(be[VIT_FIXED], &fi), ts_nn_attn_get_info(be[VIT_SCHED], &si);
  snprintf(k, sizeof k, "%dx%d", fi.tile.br, fi.tile.bc);
  cJSON_AddStringToObject(j, "fixed_tile", k);
  cJSON_AddNumberToObject(j, "work_ratio_fixed", fi.stats.work_ratio);
  cJSON_AddNumberToObject(j, "work_ratio_scheduled", si.stats.work_ratio);
  cJSON_AddNumberToObject(j, "plan_ms", si.plan_ms);
  cJSON_AddBoolToObject(j, "plan_cached", si.cached);
  cJSON_AddStringToObject(j, "cost", t->v.profile ? "profile" : "analytic");
  bench_json_num(j, "peak_rss_bytes", (double)peak_rss());
  cli_print_json(j);
}

static void report_text(const targs *t, const ts_nn_vit_config *cfg, const ts_nn_token_mask *mask, ts_context *ctx,
                        ts_nn_mem_strategy *const *strat, const ts_nn_mem_plan_info *plan, const result *r) {
  printf("%s  res %ld (%lld tokens)  pattern %s (density %.4f)  batch %ld  depth %lld  threads %d  lr %g\n",
         t->v.model, t->v.res, (long long)mask->n, t->v.pattern, mask->density, t->v.batch, (long long)cfg->depth,
         ts_context_threads(ctx), t->lr);
  printf("%-12s %10s %-20s %10s %6s %9s %9s %10s %10s  %s\n", "backend", "step ms", "[q25, q75]", "attn ms", "share",
         "fwd ms", "bwd ms", "peak MiB", "bound MiB", "strategies");
  for (int b = 0; b < VIT_NB; b++) {
    char q[48], st[96];
    snprintf(q, sizeof q, "[%.1f, %.1f]", r->step[b].q25, r->step[b].q75);
    printf("%-12s %10.1f %-20s %10.1f %5.1f%% %9.1f %9.1f %10.1f %10.1f  %s\n", vit_backend_names[b], r->step[b].med, q,
           r->attn[b].med, 100 * r->share[b].med, r->fwd[b].med, r->bwd[b].med, r->peak[b] / 1048576.0,
           r->last[b].bound_bytes / 1048576.0, strategy_summary(st, sizeof st, strat[b], cfg->depth));
    if (t->budget)
      printf("%-12s   planner: block %.1f / %.1f / %.1f ms (recompute / store_scores / checkpoint)%s\n", "",
             plan[b].time_s[0] * 1e3, plan[b].time_s[1] * 1e3, plan[b].time_s[2] * 1e3, plan[b].cached ? ", cached" : "");
  }
  printf("Amdahl bound of the step vs dense_flash: %.2fx (its attention share %.1f%%)\n", r->amdahl.med,
         100 * r->share[VIT_DENSE].med);
  for (int b = 1; b < VIT_NB; b++)
    printf("%-9s vs dense_flash: step %.2fx [%.2f, %.2f] = %.0f%% of the bound, attention %.2fx\n", vit_backend_names[b],
           r->speedup[b].med, r->speedup[b].q25, r->speedup[b].q75, 100 * r->speedup[b].med / r->amdahl.med,
           r->attn_speedup[b].med);
  printf("%d interleaved rounds after %ld warm-up", r->rounds, t->warmup);
  if (r->other_cpus >= 0) printf("; other processes took %.2f CPUs", r->other_cpus);
  printf("; peak RSS of the process %.1f MiB\n", peak_rss() / 1048576.0);
}

int vit_train_bench(int argc, char **argv) {
  targs t = {.strategy = -1, .lr = 1e-3, .warmup = 1, .dump_backend = VIT_SCHED};
  vit_args_default(&t.v);
  t.v.fixed_given = true, t.v.fixed = (ts_attn_tile){64, 64};
  int rc = parse(argc, argv, &t);
  if (rc != CLI_OK) return rc;
  if (t.co.help) {
    usage();
    return CLI_OK;
  }
  ts_nn_vit_config cfg;
  ts_nn_token_mask mask;
  if ((rc = vit_model_setup(CMD, "train-bench", &t.v, "deit-s, vit-b16, tiny", &cfg, &mask)) != CLI_OK) return rc;
  const int64_t hd = cfg.dim / cfg.heads, B = t.v.batch, L = cfg.depth;
  ts_context *ctx = NULL;
  ts_nn_vit *m = NULL;
  ts_nn_attn *be[VIT_NB] = {NULL};
  ts_nn_mem_strategy *strat[VIT_NB] = {NULL};
  ts_nn_mem_plan_info plan[VIT_NB];
  step_arg *sa = calloc(VIT_NB, sizeof *sa);
  size_t nimg = (size_t)(B * cfg.in_chans * cfg.img_h * cfg.img_w);
  float *img = malloc(nimg * sizeof *img);
  int32_t *labels = malloc((size_t)B * sizeof *labels);
  double fixed64_ms;
  memset(plan, 0, sizeof plan);
  ts_status s = sa && img && labels ? TS_OK : ts_error(TS_ERR_OOM, "train-bench: images and labels");
  for (int k = 0; s == TS_OK && k < VIT_NB; k++)
    if (!(strat[k] = malloc((size_t)L * sizeof **strat))) s = ts_error(TS_ERR_OOM, "train-bench: strategies");
  if (s == TS_OK) s = ts_context_create(&ctx, t.co.threads);
  if (s == TS_OK) s = ts_nn_vit_create(&m, ctx, &cfg, B);
  if (s == TS_OK) {
    vit_fill_images(img, nimg);
    for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)(b % cfg.classes);
    s = vit_backends_create(&t.v, ctx, &mask, cfg.heads, hd, be, &fixed64_ms);
  }
  ts_progress prog;
  if (t.budget) ts_progress_begin(&prog, "planning memory", VIT_NB);
  for (int k = 0; s == TS_OK && k < VIT_NB; k++) {
    for (int64_t l = 0; l < L; l++) strat[k][l] = t.strategy >= 0 ? (ts_nn_mem_strategy)t.strategy : TS_NN_MEM_RECOMPUTE;
    s = ts_nn_vit_set_attn(m, be[k]);
    if (s == TS_OK && t.budget) {
      ts_nn_mem_plan_opts po;
      ts_nn_mem_plan_opts_default(&po, t.budget);
      s = ts_nn_vit_plan_memory(m, &po, strat[k], &plan[k]);
      ts_progress_update(&prog, k + 1);
    }
    if (s == TS_OK) s = ts_nn_vit_train_set_strategies(m, strat[k]); /* reserves the arena for the largest */
  }
  if (t.budget) ts_progress_end(&prog);
  if (s == TS_OK && t.dump) {
    ts_nn_vit_set_attn(m, be[t.dump_backend]);
    ts_nn_vit_train_set_strategies(m, strat[t.dump_backend]);
    s = vit_train_dump(t.dump, m, &cfg, B, be[t.dump_backend], vit_backend_names[t.dump_backend], &mask, img, labels,
                       (float)t.lr);
  }
  for (int k = 0; k < VIT_NB && sa; k++)
    sa[k] = (step_arg){.m = m, .a = be[k], .s = strat[k], .img = img, .labels = labels, .lr = (float)t.lr};
  result r;
  memset(&r, 0, sizeof r);
  if (s == TS_OK) s = run(sa, (int)t.warmup, (int)t.v.repeats, &r);
  if (s != TS_OK) {
    rc = cli_fail(CMD, s);
  } else {
    if (t.co.json) report_json(&t, &cfg, &mask, ctx, be, strat, plan, &r);
    else report_text(&t, &cfg, &mask, ctx, strat, plan, &r);
    rc = CLI_OK;
  }
  for (int k = 0; k < VIT_NB; k++) ts_nn_attn_destroy(be[k]), free(strat[k]);
  ts_nn_vit_destroy(m);
  ts_context_destroy(ctx);
  ts_nn_token_mask_free(&mask);
  vit_args_free(&t.v);
  free(sa), free(img), free(labels);
  return rc;
}
