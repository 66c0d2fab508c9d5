/* tessera vit bench: a ViT (DeiT-S or ViT-B/16, random weights) end to end with three attention
 * backends on one sparse pattern over the patch grid -- dense flash (mask applied), fixed-tile
 * block skip in the original token order, and the tile-scheduled plan (reorder + blocks + tile
 * choice) -- reporting end-to-end and attention time, the attention share, speedups next to their
 * Amdahl bound, plan time and the logits' agreement with the dense-flash model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "cli.h"
#include "tessera/attn_profile.h"
#include "tessera/nn.h"

#define CMD "vit"

static void usage_top(void) {
  printf("usage: tessera vit bench [options]   (tessera vit bench --help)\n\n"
         "Vision Transformer end to end with dense-flash, fixed-tile and tile-scheduled sparse attention.\n");
}

static void usage_bench(void) {
  printf("usage: tessera vit bench --model deit-s|vit-b16 --res R --pattern SPEC [--batch B] [--depth L]\n"
         "                         [--reorder M] [--extract greedy|dp] [--density RHO] [--fixed-tile BRxBC]\n"
         "                         [--solver ilp|greedy|none] [--solve-time S] [--cost profile|analytic]\n"
         "                         [--profile-level L] [--calibrate on|off] [--no-cache] [--repeats N]\n"
         "                         [--threads N] [--json]\n\n"
         "Runs the model (fp32, random weights, seed 1; no class token: mean-pool head) on random images\n"
         "with three attention backends over the same mask and reports, for each, the end-to-end time,\n"
         "the time spent in attention and its share; the end-to-end and attention speedups of the\n"
         "scheduled backend; the Amdahl bound 1 / ((1 - share) + share / s_attn) of the end-to-end\n"
         "speedup over dense flash (share: dense flash's attention share, s_attn: attention speedup);\n"
         "the scheduled plan's build time; and the max |logit difference| against the dense-flash model.\n\n"
         "  --model M         deit-s (384 wide, 6 heads, mlp 1536) or vit-b16 (768, 12, 3072); patch 16\n"
         "  --res R           image side, a multiple of 16 in [16, 4096] (224 -> 14x14 tokens, 2048 -> 128x128)\n"
         "  --pattern SPEC    attention mask over the token grid; h and w are filled in:\n"
         "                    window2d:k=13, swin:win=7,shift=1, vitdet:win=14,global=4, dense, ...\n"
         "  --batch B         images per forward (1)\n"
         "  --depth L         transformer blocks (default: the model's 12; fewer for quick runs)\n"
         "  --reorder M       scheduled backend's token order: auto (default), none, rcm, hc, ic, metis,\n"
         "                    morton, hilbert, raster\n"
         "  --extract X       dense-block extraction: greedy (default) or dp\n"
         "  --density RHO     minimum block density in (0, 1] (0.6)\n"
         "  --solver S        scheduled backend's tile and panel-thread choice: ilp (default; attention\n"
         "                    scheduler, CBC, keeps greedy when not better), greedy (cheapest tiles, LPT\n"
         "                    threads), none (cheapest tile per block, panels run dynamically)\n"
         "  --solve-time S    ILP time limit in seconds (1)\n"
         "  --cost C          scheduler's block cost: profile (default: the measured tile profile for the head\n"
         "                    dim, as 'tessera attn plan' uses; measured once, then cached) or analytic\n"
         "  --profile-level L quick|standard|full (standard)\n"
         "  --calibrate on|off measure the cost families and guard the schedule against fixed tiles on this\n"
         "                    mask while planning (on)\n"
         "  --no-cache        plan anew: neither read nor write the attention plan cache (the scheduled\n"
         "                    plan is cached by default; the report says whether it came from the cache)\n"
         "  --fixed-tile T    the fixed backend's tile BRxBC; default: the fastest of 16x32, 32x32, 64x64 and\n"
         "                    128x64 by attention-only timing (64x64's time is reported too)\n"
         "  --repeats N       timed forwards per backend after one warm-up (3), interleaved across the\n"
         "                    backends (one round = one forward each); medians are reported\n"
         "                    (JSON also has the minima: min_ms_*, min_attn_ms_*)\n"
         "  --threads N       threads\n"
         "  --json            print the report as JSON\n");
}

static bool parse_tile(const char *v, ts_attn_tile *t) {
  int br, bc;
  char x;
  if (sscanf(v, "%d%c%d", &br, &x, &bc) != 3 || (x != 'x' && x != 'X')) return false;
  if (br < 1 || br > TS_ATTN_TILE_MAX || bc < 1 || bc > TS_ATTN_TILE_MAX) return false;
  *t = (ts_attn_tile){br, bc};
  return true;
}

typedef struct run_result {
  double ms, attn_ms;         /* medians over the repeats */
  double min_ms, min_attn_ms; /* minima (less disturbed by other load on a shared machine) */
} run_result;

/* One warm-up forward per backend, then `repeats` rounds of one timed forward per backend,
 * interleaved (dense_flash, fixed, scheduled, dense_flash, ...) so that load from other processes
 * drifting over the run hits every backend alike. logits[k]: backend k's last output. */
static ts_status run_models(ts_nn_vit *m, ts_nn_attn *const *be, const float *img, float *const *logits, int repeats,
                            run_result *r) {
  double tot[3][64], att[3][64];
  for (int k = 0; k < 3; k++) {
    TS_TRY(ts_nn_vit_set_attn(m, be[k]));
    TS_TRY(ts_nn_vit_forward(m, img, logits[k]));
  }
  for (int rep = 0; rep < repeats; rep++)
    for (int k = 0; k < 3; k++) {
      TS_TRY(ts_nn_vit_set_attn(m, be[k]));
      TS_TRY(ts_nn_vit_forward(m, img, logits[k]));
      ts_nn_vit_timing t;
      ts_nn_vit_last_timing(m, &t);
      tot[k][rep] = t.total_s * 1e3;
      att[k][rep] = t.attn_s * 1e3;
    }
  for (int k = 0; k < 3; k++) {
    r[k].ms = ts_median(tot[k], repeats); /* sorts tot and att */
    r[k].attn_ms = ts_median(att[k], repeats);
    r[k].min_ms = tot[k][0];
    r[k].min_attn_ms = att[k][0];
  }
  return TS_OK;
}

/* Attention-only time of one call (median of 3 after a warm-up) on random Q/K/V. */
static ts_status time_attn(ts_nn_attn *a, const ts_context *ctx, const float *qkv, float *o, int64_t batch,
                           int64_t heads, int64_t per, double *ms) {
  double t[3];
  TS_TRY(ts_nn_attn_run(a, ctx, qkv, qkv + per, qkv + 2 * per, o, batch, heads));
  for (int k = 0; k < 3; k++) {
    double t0 = ts_now();
    TS_TRY(ts_nn_attn_run(a, ctx, qkv, qkv + per, qkv + 2 * per, o, batch, heads));
    t[k] = (ts_now() - t0) * 1e3;
  }
  *ms = ts_median(t, 3);
  return TS_OK;
}

typedef struct bench_args {
  const char *model, *pattern;
  long res, batch, depth, repeats;
  bool fixed_given;
  ts_attn_tile fixed;
  ts_nn_attn_opts sched;
  bool profile;                 /* --cost profile */
  ts_attn_profile_level level;
  ts_attn_cost_model *cost_model;
  char cost_tag[64];
  double profile_ms;
} bench_args;

/* --cost profile: the cached tile profile for head dim hd (measured when missing) as the scheduled
 * backend's cost, tagged with its level and date for the plan cache. */
static ts_status cost_setup(bench_args *b, int64_t hd) {
  if (!b->profile) return TS_OK;
  ts_attn_profile_opts po = ts_attn_profile_opts_default();
  po.level = b->level, po.d = hd, po.dtype = TS_F32;
  ts_attn_profile prof;
  memset(&prof, 0, sizeof prof);
  double t0 = ts_now();
  ts_status s = ts_attn_profile_get(&po, NULL, &prof, NULL);
  if (s == TS_OK) s = ts_attn_cost_model_create(&b->cost_model, &prof);
  if (s == TS_OK) {
    snprintf(b->cost_tag, sizeof b->cost_tag, "profile-%s-%s", ts_attn_profile_level_name(b->level), prof.prov.date);
    b->sched.cost = ts_attn_cost_profiled, b->sched.cost_user = b->cost_model, b->sched.cost_tag = b->cost_tag;
  }
  ts_attn_profile_free(&prof);
  b->profile_ms = (ts_now() - t0) * 1e3;
  return s;
}

/* Picks the fixed backend: the given tile, or the fastest of the menu by attention-only time.
 * *fixed64_ms: attention-only time of 64x64 (NAN when not measured). */
static ts_status make_fixed(const bench_args *b, ts_context *ctx, const ts_nn_token_mask *mask, int64_t heads,
                            int64_t hd, ts_nn_attn **out, double *fixed64_ms) {
  ts_nn_attn_opts o;
  ts_nn_attn_opts_default(&o, TS_NN_ATTN_FIXED);
  *fixed64_ms = NAN;
  if (b->fixed_given) {
    o.tile = b->fixed;
    return ts_nn_attn_create(out, ctx, mask, hd, &o);
  }
  static const ts_attn_tile menu[] = {{16, 32}, {32, 32}, {64, 64}, {128, 64}};
  int64_t per = b->batch * heads * mask->n * hd;
  float *qkv = ts_malloc((size_t)per * 3 * sizeof(float)), *o_buf = ts_malloc((size_t)per * sizeof(float));
  ts_status s = qkv && o_buf ? TS_OK : TS_ERR_OOM;
  if (s == TS_OK) {
    ts_rng r;
    ts_rng_seed(&r, 7);
    for (int64_t i = 0; i < 3 * per; i++) qkv[i] = (float)ts_rng_uniform(&r) * 2 - 1;
  }
  double best = INFINITY;
  *out = NULL;
  for (size_t k = 0; s == TS_OK && k < sizeof menu / sizeof menu[0]; k++) {
    ts_nn_attn *a = NULL;
    double ms;
    o.tile = menu[k];
    s = ts_nn_attn_create(&a, ctx, mask, hd, &o);
    if (s == TS_OK) s = time_attn(a, ctx, qkv, o_buf, b->batch, heads, per, &ms);
    if (s == TS_OK && menu[k].br == 64 && menu[k].bc == 64) *fixed64_ms = ms;
    if (s == TS_OK && ms < best) {
      best = ms;
      ts_nn_attn_destroy(*out);
      *out = a;
    } else {
      ts_nn_attn_destroy(a);
    }
  }
  ts_free(qkv);
  ts_free(o_buf);
  if (s != TS_OK) {
    ts_nn_attn_destroy(*out);
    *out = NULL;
  }
  return s;
}

static int parse_bench(int argc, char **argv, bench_args *b, cli_common_opts *co) {
  for (int i = 1; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *a = argv[i], *v;
    if (strcmp(a, "--model") == 0) {
      if (!(b->model = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(a, "--pattern") == 0) {
      if (!(b->pattern = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(a, "--res") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, a, v, 16, 4096, &b->res)) return CLI_USAGE;
    } else if (strcmp(a, "--batch") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, a, v, 1, 1024, &b->batch)) return CLI_USAGE;
    } else if (strcmp(a, "--depth") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, a, v, 1, 64, &b->depth)) return CLI_USAGE;
    } else if (strcmp(a, "--repeats") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, a, v, 1, 64, &b->repeats)) return CLI_USAGE;
    } else if (strcmp(a, "--reorder") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_reorder_method_parse(v, &b->sched.reorder.method) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
    } else if (strcmp(a, "--extract") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_extract_method_parse(v, &b->sched.blocks.method) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
    } else if (strcmp(a, "--density") == 0) {
      double d;
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_double(CMD, a, v, 1e-6, 1, &d)) return CLI_USAGE;
      b->sched.blocks.rho = d;
    } else if (strcmp(a, "--solver") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      ts_attn_solver sv;
      if (strcmp(v, "none") == 0) b->sched.solver = -1;
      else if (ts_attn_solver_parse(v, &sv) == TS_OK) b->sched.solver = (int)sv;
      else return cli_usage_error(CMD, "--solver '%s' is not ilp, greedy or none", v);
    } else if (strcmp(a, "--solve-time") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_double(CMD, a, v, 1e-3, 3600, &b->sched.solve_time_limit))
        return CLI_USAGE;
    } else if (strcmp(a, "--cost") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "analytic") != 0 && strcmp(v, "profile") != 0)
        return cli_usage_error(CMD, "--cost expects analytic or profile, got '%s'", v);
      b->profile = v[0] == 'p';
    } else if (strcmp(a, "--profile-level") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_attn_profile_level_parse(v, &b->level) != TS_OK)
        return cli_usage_error(CMD, "--profile-level expects quick, standard or full, got '%s'", v);
    } else if (strcmp(a, "--calibrate") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) return cli_usage_error(CMD, "--calibrate expects on or off, got '%s'", v);
      b->sched.calibrate = v[1] == 'n';
    } else if (strcmp(a, "--no-cache") == 0) {
      b->sched.cache = false;
    } else if (strcmp(a, "--fixed-tile") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (!parse_tile(v, &b->fixed))
        return cli_usage_error(CMD, "--fixed-tile '%s' is not BRxBC with sides in [1, %d]", v, TS_ATTN_TILE_MAX);
      b->fixed_given = true;
    } else {
      return cli_usage_error(CMD, "unknown argument '%s'", a);
    }
  }
  return CLI_OK;
}

static void add_backend(cJSON *j, const char *name, const run_result *r) {
  char k[64];
  snprintf(k, sizeof k, "ms_%s", name);
  cJSON_AddNumberToObject(j, k, r->ms);
  snprintf(k, sizeof k, "attn_ms_%s", name);
  cJSON_AddNumberToObject(j, k, r->attn_ms);
  snprintf(k, sizeof k, "attn_share_%s", name);
  cJSON_AddNumberToObject(j, k, r->attn_ms / r->ms);
  snprintf(k, sizeof k, "min_ms_%s", name);
  cJSON_AddNumberToObject(j, k, r->min_ms);
  snprintf(k, sizeof k, "min_attn_ms_%s", name);
  cJSON_AddNumberToObject(j, k, r->min_attn_ms);
}

static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= m)) m = d; /* NaN wins */
  }
  return m;
}

static int bench(int argc, char **argv) {
  cli_common_opts co = {0};
  bench_args b = {.res = 0, .batch = 1, .depth = 0, .repeats = 3, .profile = true, .level = TS_ATTN_PROFILE_STANDARD};
  ts_nn_attn_opts_default(&b.sched, TS_NN_ATTN_SCHEDULED);
  b.sched.calibrate = true, b.sched.cache = true; /* as `attn plan`: measured on the mask, cached */
  int rc = parse_bench(argc, argv, &b, &co);
  if (rc != CLI_OK) return rc;
  if (co.help) {
    usage_bench();
    return CLI_OK;
  }
  if (!b.model) return cli_usage_error(CMD, "bench: --model is required (deit-s, vit-b16)");
  if (!b.res) return cli_usage_error(CMD, "bench: --res is required");
  if (!b.pattern) return cli_usage_error(CMD, "bench: --pattern is required");
  if (strcmp(b.model, "deit-s") != 0 && strcmp(b.model, "vit-b16") != 0)
    return cli_usage_error(CMD, "bench: unknown model '%s' (deit-s, vit-b16)", b.model);
  ts_nn_vit_config cfg;
  if (ts_nn_vit_config_preset(b.model, b.res, &cfg) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
  if (b.depth) cfg.depth = b.depth;
  ts_nn_token_mask mask;
  int64_t gh = cfg.img_h / cfg.patch, gw = cfg.img_w / cfg.patch, hd = cfg.dim / cfg.heads;
  if (ts_nn_token_mask_create(b.pattern, gh, gw, &mask) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());

  ts_context *ctx = NULL;
  ts_nn_vit *m = NULL;
  ts_nn_attn *be[3] = {NULL, NULL, NULL}; /* dense_flash, fixed, scheduled */
  float *img = NULL, *logits[3] = {NULL, NULL, NULL};
  double fixed64_ms = NAN;
  ts_status s = ts_context_create(&ctx, co.threads);
  if (s == TS_OK) s = ts_nn_vit_create(&m, ctx, &cfg, b.batch);
  size_t nimg = (size_t)(b.batch * cfg.in_chans * cfg.img_h * cfg.img_w), nl = (size_t)(b.batch * cfg.classes);
  if (s == TS_OK) {
    img = malloc(nimg * sizeof *img);
    for (int k = 0; k < 3; k++) logits[k] = malloc(nl * sizeof(float));
    if (!img || !logits[0] || !logits[1] || !logits[2]) s = ts_error(TS_ERR_OOM, "images and logits");
  }
  if (s == TS_OK) {
    ts_rng r;
    ts_rng_seed(&r, 3);
    for (size_t i = 0; i < nimg; i++) img[i] = (float)ts_rng_uniform(&r) * 2 - 1;
    ts_nn_attn_opts o;
    ts_nn_attn_opts_default(&o, TS_NN_ATTN_DENSE_FLASH);
    s = ts_nn_attn_create(&be[0], ctx, &mask, hd, &o);
  }
  if (s == TS_OK) s = make_fixed(&b, ctx, &mask, cfg.heads, hd, &be[1], &fixed64_ms);
  if (s == TS_OK) s = cost_setup(&b, hd);
  if (s == TS_OK) s = ts_nn_attn_create(&be[2], ctx, &mask, hd, &b.sched);
  run_result rr[3];
  if (s == TS_OK) s = run_models(m, be, img, logits, (int)b.repeats, rr);
  if (s != TS_OK) {
    rc = cli_fail(CMD, s);
    goto done;
  }
  ts_nn_attn_info fi, si;
  ts_nn_attn_get_info(be[1], &fi);
  ts_nn_attn_get_info(be[2], &si);
  double share = rr[0].attn_ms / rr[0].ms, s_attn = rr[0].attn_ms / rr[2].attn_ms;
  double amdahl = 1.0 / ((1 - share) + share / s_attn);
  double err = max_diff(logits[2], logits[0], nl), err_fixed = max_diff(logits[1], logits[0], nl);
  double scale = 0;
  for (size_t i = 0; i < nl; i++) scale = fmax(scale, fabs((double)logits[0][i]));
  const char *names[3] = {"dense_flash", "fixed", "scheduled"};
  char tile[32];
  snprintf(tile, sizeof tile, "%dx%d", fi.tile.br, fi.tile.bc);
  if (co.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", b.model);
    cJSON_AddNumberToObject(j, "res", (double)b.res);
    cJSON_AddNumberToObject(j, "tokens", (double)mask.n);
    cJSON_AddStringToObject(j, "pattern", b.pattern);
    cJSON_AddNumberToObject(j, "density", mask.density);
    cJSON_AddNumberToObject(j, "batch", (double)b.batch);
    cJSON_AddNumberToObject(j, "depth", (double)cfg.depth);
    cJSON_AddNumberToObject(j, "threads", ts_context_threads(ctx));
    for (int k = 0; k < 3; k++) add_backend(j, names[k], &rr[k]);
    cJSON_AddNumberToObject(j, "speedup_vs_dense_flash", rr[0].ms / rr[2].ms);
    cJSON_AddNumberToObject(j, "speedup_vs_fixed", rr[1].ms / rr[2].ms);
    cJSON_AddNumberToObject(j, "attn_speedup_vs_dense_flash", s_attn);
    cJSON_AddNumberToObject(j, "attn_speedup_vs_fixed", rr[1].attn_ms / rr[2].attn_ms);
    cJSON_AddNumberToObject(j, "amdahl_bound", amdahl);
    cJSON_AddNumberToObject(j, "plan_ms", si.plan_ms);
    cJSON_AddBoolToObject(j, "plan_cached", si.cached);
    cJSON_AddStringToObject(j, "cost", b.profile ? "profile" : "analytic");
    if (b.profile) cJSON_AddStringToObject(j, "cost_tag", b.cost_tag);
    cJSON_AddNumberToObject(j, "profile_ms", b.profile_ms);
    cJSON_AddNumberToObject(j, "reorder_ms", si.reorder_ms);
    if (si.cached) cJSON_AddNullToObject(j, "reorder"); /* a cached plan records its permutation, not how it was made */
    else cJSON_AddStringToObject(j, "reorder", ts_reorder_method_name(si.reorder));
    cJSON_AddStringToObject(j, "solver", si.solver < 0 ? "none" : ts_attn_solver_name((ts_attn_solver)si.solver));
    cJSON_AddBoolToObject(j, "ilp_improved", si.ilp_improved);
    cJSON_AddNumberToObject(j, "sched_ms", si.sched_ms);
    if (si.cached) cJSON_AddNullToObject(j, "blocks");
    else cJSON_AddNumberToObject(j, "blocks", (double)si.nblocks);
    cJSON_AddNumberToObject(j, "work_ratio_scheduled", si.stats.work_ratio);
    cJSON_AddNumberToObject(j, "work_ratio_fixed", fi.stats.work_ratio);
    cJSON_AddStringToObject(j, "fixed_tile", tile);
    bench_json_num(j, "attn_call_ms_fixed64", fixed64_ms);
    cJSON_AddNumberToObject(j, "max_abs_err", err);
    cJSON_AddNumberToObject(j, "max_abs_err_fixed", err_fixed);
    cJSON_AddNumberToObject(j, "logit_scale", scale);
    cJSON_AddNumberToObject(j, "gflop_dense", ts_nn_vit_flops(m, mask.n * mask.n) * 1e-9);
    cJSON_AddNumberToObject(j, "gflop_sparse", ts_nn_vit_flops(m, mask.nnz) * 1e-9);
    cli_print_json(j);
  } else {
    printf("%s  res %ld (%lld x %lld = %lld tokens)  pattern %s (density %.4f)  batch %ld  depth %lld  threads %d\n",
           b.model, b.res, (long long)gh, (long long)gw, (long long)mask.n, b.pattern, mask.density, b.batch,
           (long long)cfg.depth, ts_context_threads(ctx));
    printf("%-12s %12s %12s %8s %10s\n", "backend", "e2e ms", "attn ms", "share", "work/nnz");
    const ts_nn_attn_info *inf[3] = {NULL, &fi, &si};
    for (int k = 0; k < 3; k++)
      printf("%-12s %12.2f %12.2f %7.1f%% %10.2f\n", names[k], rr[k].ms, rr[k].attn_ms, 100 * rr[k].attn_ms / rr[k].ms,
             inf[k] ? inf[k]->stats.work_ratio : (double)mask.n * mask.n / (double)mask.nnz);
    printf("fixed tile %s%s; ", tile, b.fixed_given ? " (given)" : " (fastest of 16x32, 32x32, 64x64, 128x64)");
    if (si.cached) /* the cache holds the permutation and the schedule, not how they were made */
      printf("scheduled: plan from the plan cache, loaded in %.1f ms\n", si.plan_ms);
    else
      printf("scheduled: reorder %s, %lld blocks, solver %s%s, plan %.1f ms\n", ts_reorder_method_name(si.reorder),
             (long long)si.nblocks, si.solver < 0 ? "none" : ts_attn_solver_name((ts_attn_solver)si.solver),
             si.ilp_improved ? " (improved on greedy)" : "", si.plan_ms);
    printf("scheduled vs dense_flash: end-to-end %.2fx (Amdahl bound %.2fx from share %.1f%% and attention %.2fx)\n",
           rr[0].ms / rr[2].ms, amdahl, 100 * share, s_attn);
    printf("scheduled vs fixed:       end-to-end %.2fx, attention %.2fx\n", rr[1].ms / rr[2].ms,
           rr[1].attn_ms / rr[2].attn_ms);
    printf("max |logit - dense_flash logit|: scheduled %.3g, fixed %.3g (max |logit| %.3g)\n", err, err_fixed, scale);
  }
  rc = CLI_OK;
done:
  for (int k = 0; k < 3; k++) {
    ts_nn_attn_destroy(be[k]);
    free(logits[k]);
  }
  free(img);
  ts_nn_vit_destroy(m);
  ts_context_destroy(ctx);
  ts_nn_token_mask_free(&mask);
  ts_attn_cost_model_destroy(b.cost_model);
  return rc;
}

int cmd_vit(int argc, char **argv) {
  if (argc < 2) return cli_usage_error(CMD, "missing verb (bench)"); /* one line on stderr, as every command */
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage_top();
    return CLI_OK;
  }
  if (strcmp(argv[1], "bench") == 0) return bench(argc - 1, argv + 1);
  return cli_usage_error(CMD, "unknown verb '%s' (bench)", argv[1]);
}
