/* tessera vit bench: a ViT (DeiT-S or ViT-B/16, random weights) end to end with three attention
 * backends on one sparse pattern over the patch grid -- dense flash (mask applied), fixed-tile
 * block skip in the original token order, and the tile-scheduled plan (reorder + blocks + tile
 * choice) -- reporting end-to-end and attention time, the attention share, speedups next to their
 * Amdahl bound, plan time and the logits' agreement with the dense-flash model.
 *
 * Timing (issue 32): the three backends' forwards are timed by the measure engine (ts_measure_run)
 * in interleaved rounds after a warm-up round, and each forward's own split (its wall time and its
 * attention calls, ts_nn_vit_last_timing) is kept per round. Everything but attention (patch
 * embedding, LayerNorm, QKV and output projections, MLP, head) is the same work for every backend,
 * so it is counted once per round for all three (run_models) and a backend's end-to-end time is
 * that plus its own attention time. Taken per backend instead, the same work read 412 ms in the
 * dense-flash forwards and 223 ms in the scheduled ones on a busy machine (`make demo`, 2026-12-07),
 * and the report showed an end-to-end speedup of 4.14x beside an Amdahl bound of 2.35x. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "cli.h"
#include "cmd_vit.h"
#include "tessera/attn_profile.h"
#include "tessera/nn.h"

#define CMD "vit"

static void usage_top(void) {
  printf("usage: tessera vit bench [options]         (tessera vit bench --help)\n"
         "       tessera vit train-bench [options]   (tessera vit train-bench --help)\n\n"
         "Vision Transformer end to end with dense-flash, fixed-tile and tile-scheduled sparse attention:\n"
         "inference (bench) and one training step, forward + backward + SGD (train-bench).\n");
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
         "scheduled backend; the Amdahl bound 1 / (1 - share) of the end-to-end speedup over dense flash\n"
         "(share: dense flash's attention share; the speedup with attention at zero cost); the scheduled\n"
         "plan's build time; and the max |logit difference| against the dense-flash model.\n\n"
         "Timing: one warm-up round, then --repeats rounds of one forward per backend (the order reversed\n"
         "every other round), by the measure engine. The part of a forward outside attention (patch\n"
         "embedding, LayerNorm, projections, MLP, head) is the same work for every backend, so it is\n"
         "counted once per round for all three (the middle of the three forwards' times outside\n"
         "attention), and a backend's end-to-end time is that shared time plus its own attention time.\n"
         "The end-to-end speedup over dense flash is therefore below its Amdahl bound in every round, and\n"
         "so are its median and quartiles.\n"
         "Times are medians over the rounds, ratios medians of the per-round (paired) ratios, each with\n"
         "its quartiles [q25, q75] (JSON: *_q25, *_q75; for ratios also *_ci95, the median's 95%%\n"
         "interval). JSON also has each backend's whole forward as timed (forward_ms_*) and its own time\n"
         "outside attention (nonattn_ms_*), and the CPUs' worth of time other processes took during the\n"
         "rounds (other_cpus).\n\n"
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
         "                    128x64 by attention-only timing (median of 3 interleaved rounds after a\n"
         "                    warm-up; 64x64's time is reported too)\n"
         "  --repeats N       timed rounds after the warm-up round (3, at most 64); one round = one forward\n"
         "                    per backend (JSON also has the minima over the rounds: min_ms_*, min_attn_ms_*)\n"
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

#define MAX_ROUNDS VIT_MAX_ROUNDS
#define WARMUP 1      /* untimed rounds first */

enum { DENSE = VIT_DENSE, FIXED = VIT_FIXED, SCHED = VIT_SCHED, NB = VIT_NB };
const char *const vit_backend_names[VIT_NB] = {"dense_flash", "fixed", "scheduled"};

typedef vit_fig fig;

vit_fig vit_time_fig(double *v, int n) { /* sorts v */
  ts_summary s;
  ts_summarize(v, n, &s);
  return (fig){s.median, s.q1, s.q3, s.min, NAN, NAN};
}

vit_fig vit_ratio_fig(double *r, int n) { /* sorts r */
  fig f = {.min = NAN};
  ts_ratio_ci(r, n, &f.med, &f.lo, &f.hi);
  f.q25 = ts_quantile(r, n, 0.25), f.q75 = ts_quantile(r, n, 0.75);
  return f;
}

/* What the rounds measured. */
typedef struct run_result {
  fig e2e[NB];         /* shared non-attention + the backend's attention, ms */
  fig attn[NB];        /* the backend's attention calls in one forward, ms */
  fig forward[NB];     /* the whole forward as the engine timed it, ms (diagnostic) */
  fig own_nonattn[NB]; /* that forward less its attention, ms (diagnostic: the spread sharing removes) */
  fig nonattn;         /* the shared non-attention time, ms */
  fig sp_dense, sp_fixed; /* end-to-end speedup of scheduled over dense flash / fixed */
  fig at_dense, at_fixed; /* attention speedup of scheduled over dense flash / fixed */
  fig amdahl;          /* 1 / (1 - share) of dense flash: the end-to-end speedup with attention at zero cost */
  int rounds;
  double other_cpus;   /* CPUs' worth of other processes' time during the rounds, < 0: unknown */
} run_result;

/* A candidate of the measure engine: one forward with backend a. The forward's own split
 * (ts_nn_vit_last_timing: wall time, attention calls) is kept per call, the warm-up's first, so
 * that each timed round gives every backend's attention time and the rest of its forward. */
typedef struct fwd_arg {
  ts_nn_vit *m;
  ts_nn_attn *a;
  const float *img;
  float *logits;                                     /* the last forward's output */
  double tot[WARMUP + MAX_ROUNDS], att[WARMUP + MAX_ROUNDS]; /* ms, per call */
  int calls;
} fwd_arg;

static ts_status fwd_call(void *p) {
  fwd_arg *f = p;
  TS_TRY(ts_nn_vit_set_attn(f->m, f->a));
  TS_TRY(ts_nn_vit_forward(f->m, f->img, f->logits));
  if (f->calls < WARMUP + MAX_ROUNDS) {
    ts_nn_vit_timing t;
    ts_nn_vit_last_timing(f->m, &t);
    f->tot[f->calls] = t.total_s * 1e3, f->att[f->calls] = t.attn_s * 1e3;
  }
  f->calls++;
  return TS_OK;
}

/* The middle one of three. */
static double mid3(double a, double b, double c) { return fmax(fmin(a, b), fmin(fmax(a, b), c)); }

/* WARMUP round(s), then `repeats` rounds of one forward per backend by the measure engine
 * (interleaved, the order reversed every other round, so that load drifting over the run and the
 * cost of going first fall on every backend alike). The non-attention part of a forward is the
 * same work for every backend (the scheduled backend only gathers the patches in its token order),
 * so a round's non-attention time is taken once for all: the middle of its three forwards' (one
 * disturbed forward does not move it), and backend k's end-to-end time in that round is it plus
 * k's attention time. The end-to-end speedup of a round is then below that round's Amdahl bound
 * 1 / (1 - share): the report can no longer show a speedup above its bound because one backend's
 * MLPs happened to run in a slow spell. Figures are
 * medians over the rounds, ratios medians of per-round (paired) ratios. logits[k]: backend k's last
 * output. */
static ts_status run_models(ts_nn_vit *m, ts_nn_attn *const *be, const float *img, float *const *logits, int repeats,
                            run_result *r) {
  const char *const *names = vit_backend_names;
  fwd_arg fa[NB];
  ts_measure_fn fn[NB];
  void *arg[NB];
  for (int k = 0; k < NB; k++) {
    fa[k] = (fwd_arg){.m = m, .a = be[k], .img = img, .logits = logits[k]};
    fn[k] = fwd_call, arg[k] = &fa[k];
  }
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = WARMUP, mo.rounds = mo.max_rounds = repeats, mo.min_time_s = 0, mo.alternate = true;
  ts_measure_result mr[NB];
  ts_measure_info info;
  TS_TRY(ts_measure_run(NB, fn, arg, &mo, mr, &info));
  for (int k = 0; k < NB; k++) /* one backend failing leaves nothing to compare it with */
    if (mr[k].status != TS_OK) return ts_error(mr[k].status, "vit bench: the %s forward failed", names[k]);
  const int n = info.rounds;
  for (int k = 0; k < NB; k++)
    if (fa[k].calls != WARMUP + n) /* every backend ran in every round (none failed) */
      return ts_error(TS_ERR_INTERNAL, "vit bench: %s ran %d forwards in %d rounds", names[k], fa[k].calls, WARMUP + n);
  double e2e[NB][MAX_ROUNDS], att[NB][MAX_ROUNDS], own[NB][MAX_ROUNDS], shared[MAX_ROUNDS];
  double sp_d[MAX_ROUNDS], sp_f[MAX_ROUNDS], at_d[MAX_ROUNDS], at_f[MAX_ROUNDS], amd[MAX_ROUNDS];
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < NB; k++) att[k][i] = fa[k].att[WARMUP + i], own[k][i] = fa[k].tot[WARMUP + i] - att[k][i];
    shared[i] = mid3(own[DENSE][i], own[FIXED][i], own[SCHED][i]);
    for (int k = 0; k < NB; k++) e2e[k][i] = shared[i] + att[k][i];
    sp_d[i] = bench_ratio(e2e[DENSE][i], e2e[SCHED][i]), sp_f[i] = bench_ratio(e2e[FIXED][i], e2e[SCHED][i]);
    at_d[i] = bench_ratio(att[DENSE][i], att[SCHED][i]), at_f[i] = bench_ratio(att[FIXED][i], att[SCHED][i]);
    const double share = bench_ratio(att[DENSE][i], e2e[DENSE][i]);
    /* >= sp_d[i] in every round (the scheduled attention takes >= 0 ms), so the quantiles of the
     * speedup never exceed the bound's; NaN when nothing but attention was timed */
    amd[i] = bench_ratio(1.0, 1 - share);
  }
  for (int k = 0; k < NB; k++) {
    r->e2e[k] = vit_time_fig(e2e[k], n), r->attn[k] = vit_time_fig(att[k], n);
    r->own_nonattn[k] = vit_time_fig(own[k], n);
    r->forward[k] = (fig){mr[k].s.median * 1e3, mr[k].s.q1 * 1e3, mr[k].s.q3 * 1e3, mr[k].s.min * 1e3, NAN, NAN};
  }
  r->nonattn = vit_time_fig(shared, n);
  r->sp_dense = vit_ratio_fig(sp_d, n), r->sp_fixed = vit_ratio_fig(sp_f, n);
  r->at_dense = vit_ratio_fig(at_d, n), r->at_fixed = vit_ratio_fig(at_f, n);
  r->amdahl = vit_ratio_fig(amd, n);
  r->rounds = n, r->other_cpus = info.other_cpus;
  return TS_OK;
}

/* A candidate of the measure engine: one attention call of backend a on random Q/K/V. */
typedef struct attn_arg {
  ts_nn_attn *a;
  const ts_context *ctx;
  const float *qkv;
  float *o;
  int64_t batch, heads, per;
} attn_arg;

static ts_status attn_call(void *p) {
  const attn_arg *x = p;
  return ts_nn_attn_run(x->a, x->ctx, x->qkv, x->qkv + x->per, x->qkv + 2 * x->per, x->o, x->batch, x->heads);
}

void vit_args_default(vit_args *b) {
  memset(b, 0, sizeof *b);
  b->batch = 1, b->repeats = 3, b->profile = true, b->level = TS_ATTN_PROFILE_STANDARD;
  ts_nn_attn_opts_default(&b->sched, TS_NN_ATTN_SCHEDULED);
  b->sched.calibrate = true, b->sched.cache = true; /* as `attn plan`: measured on the mask, cached */
}

void vit_args_free(vit_args *b) {
  ts_attn_cost_model_destroy(b->cost_model);
  b->cost_model = NULL;
}

/* --cost profile: the cached tile profile for head dim hd (measured when missing) as the scheduled
 * backend's cost, tagged with its level and date for the plan cache. */
static ts_status cost_setup(vit_args *b, int64_t hd) {
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

/* Picks the fixed backend: the given tile, or the fastest of the menu by attention-only time (the
 * median of 3 rounds of the measure engine after a warm-up round, the menu interleaved in each).
 * *fixed64_ms: attention-only time of 64x64 (NAN when not measured). */
static ts_status make_fixed(const vit_args *b, ts_context *ctx, const ts_nn_token_mask *mask, int64_t heads,
                            int64_t hd, ts_nn_attn **out, double *fixed64_ms) {
  ts_nn_attn_opts o;
  ts_nn_attn_opts_default(&o, TS_NN_ATTN_FIXED);
  *fixed64_ms = NAN;
  *out = NULL;
  if (b->fixed_given) {
    o.tile = b->fixed;
    return ts_nn_attn_create(out, ctx, mask, hd, &o);
  }
  enum { NM = 4 };
  static const ts_attn_tile menu[NM] = {{16, 32}, {32, 32}, {64, 64}, {128, 64}};
  int64_t per = b->batch * heads * mask->n * hd;
  float *qkv = ts_malloc((size_t)per * 3 * sizeof(float)), *o_buf = ts_malloc((size_t)per * sizeof(float));
  ts_status s = qkv && o_buf ? TS_OK : ts_error(TS_ERR_OOM, "vit bench: Q/K/V and O for the tile choice");
  if (s == TS_OK) {
    ts_rng r;
    ts_rng_seed(&r, 7);
    for (int64_t i = 0; i < 3 * per; i++) qkv[i] = (float)ts_rng_uniform(&r) * 2 - 1;
  }
  ts_nn_attn *cand[NM] = {NULL};
  attn_arg aa[NM];
  ts_measure_fn fn[NM];
  void *arg[NM];
  for (int k = 0; s == TS_OK && k < NM; k++) {
    o.tile = menu[k];
    s = ts_nn_attn_create(&cand[k], ctx, mask, hd, &o);
    aa[k] = (attn_arg){cand[k], ctx, qkv, o_buf, b->batch, heads, per};
    fn[k] = attn_call, arg[k] = &aa[k];
  }
  ts_measure_result mr[NM];
  if (s == TS_OK) {
    ts_measure_opts mo = ts_measure_opts_default();
    mo.warmup = 1, mo.rounds = mo.max_rounds = 3, mo.min_time_s = 0, mo.alternate = true;
    s = ts_measure_run(NM, fn, arg, &mo, mr, NULL);
  }
  int best = -1;
  for (int k = 0; s == TS_OK && k < NM; k++) {
    if (mr[k].status != TS_OK) {
      s = ts_error(mr[k].status, "vit bench: attention with the fixed tile %dx%d failed", menu[k].br, menu[k].bc);
      break;
    }
    if (menu[k].br == 64 && menu[k].bc == 64) *fixed64_ms = mr[k].s.median * 1e3;
    if (best < 0 || mr[k].s.median < mr[best].s.median) best = k;
  }
  if (s == TS_OK) *out = cand[best], cand[best] = NULL;
  for (int k = 0; k < NM; k++) ts_nn_attn_destroy(cand[k]);
  ts_free(qkv);
  ts_free(o_buf);
  return s;
}

/* A bad value: the usage message, -1. */
#define BAD(...) (cli_usage_error(cmd, __VA_ARGS__), -1)

int vit_parse_opt(const char *cmd, int argc, char **argv, int *ip, vit_args *b) {
  int i = *ip;
  const char *a = argv[i], *v;
  if (strcmp(a, "--model") == 0) {
    if (!(b->model = cli_value(cmd, argc, argv, &i))) return -1;
  } else if (strcmp(a, "--pattern") == 0) {
    if (!(b->pattern = cli_value(cmd, argc, argv, &i))) return -1;
  } else if (strcmp(a, "--res") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_parse_int(cmd, a, v, 16, 4096, &b->res)) return -1;
  } else if (strcmp(a, "--batch") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_parse_int(cmd, a, v, 1, 1024, &b->batch)) return -1;
  } else if (strcmp(a, "--depth") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_parse_int(cmd, a, v, 1, 64, &b->depth)) return -1;
  } else if (strcmp(a, "--repeats") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_parse_int(cmd, a, v, 1, MAX_ROUNDS, &b->repeats))
      return -1;
  } else if (strcmp(a, "--reorder") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    if (ts_reorder_method_parse(v, &b->sched.reorder.method) != TS_OK) return BAD("%s", ts_last_error());
  } else if (strcmp(a, "--extract") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    if (ts_extract_method_parse(v, &b->sched.blocks.method) != TS_OK) return BAD("%s", ts_last_error());
  } else if (strcmp(a, "--density") == 0) {
    double d;
    if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_parse_double(cmd, a, v, 1e-6, 1, &d)) return -1;
    b->sched.blocks.rho = d;
  } else if (strcmp(a, "--solver") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    ts_attn_solver sv;
    if (strcmp(v, "none") == 0) b->sched.solver = -1;
    else if (ts_attn_solver_parse(v, &sv) == TS_OK) b->sched.solver = (int)sv;
    else return BAD("--solver '%s' is not ilp, greedy or none", v);
  } else if (strcmp(a, "--solve-time") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_parse_double(cmd, a, v, 1e-3, 3600, &b->sched.solve_time_limit))
      return -1;
  } else if (strcmp(a, "--cost") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    if (strcmp(v, "analytic") != 0 && strcmp(v, "profile") != 0)
      return BAD("--cost expects analytic or profile, got '%s'", v);
    b->profile = v[0] == 'p';
  } else if (strcmp(a, "--profile-level") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    if (ts_attn_profile_level_parse(v, &b->level) != TS_OK)
      return BAD("--profile-level expects quick, standard or full, got '%s'", v);
  } else if (strcmp(a, "--calibrate") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) return BAD("--calibrate expects on or off, got '%s'", v);
    b->sched.calibrate = v[1] == 'n';
  } else if (strcmp(a, "--no-cache") == 0) {
    b->sched.cache = false;
  } else if (strcmp(a, "--fixed-tile") == 0) {
    if (!(v = cli_value(cmd, argc, argv, &i))) return -1;
    if (!parse_tile(v, &b->fixed))
      return BAD("--fixed-tile '%s' is not BRxBC with sides in [1, %d]", v, TS_ATTN_TILE_MAX);
    b->fixed_given = true;
  } else {
    return 0;
  }
  *ip = i;
  return 1;
}
#undef BAD

int vit_model_setup(const char *cmd, const char *verb, vit_args *b, const char *models, ts_nn_vit_config *cfg,
                    ts_nn_token_mask *mask) {
  if (!b->model) return cli_usage_error(cmd, "%s: --model is required (%s)", verb, models);
  if (!b->res) return cli_usage_error(cmd, "%s: --res is required", verb);
  if (!b->pattern) return cli_usage_error(cmd, "%s: --pattern is required", verb);
  /* models: "a, b, c": the model must be one of its names */
  bool known = false;
  for (const char *p = models; *p && !known;) {
    size_t len = strcspn(p, ",");
    known = strlen(b->model) == len && strncmp(p, b->model, len) == 0;
    p += len;
    p += strspn(p, ", ");
  }
  if (!known) return cli_usage_error(cmd, "%s: unknown model '%s' (%s)", verb, b->model, models);
  if (ts_nn_vit_config_preset(b->model, b->res, cfg) != TS_OK) return cli_usage_error(cmd, "%s", ts_last_error());
  if (b->depth) cfg->depth = b->depth;
  if (ts_nn_token_mask_create(b->pattern, cfg->img_h / cfg->patch, cfg->img_w / cfg->patch, mask) != TS_OK)
    return cli_usage_error(cmd, "%s", ts_last_error());
  return CLI_OK;
}

ts_status vit_backends_create(vit_args *b, ts_context *ctx, const ts_nn_token_mask *mask, int64_t heads, int64_t hd,
                              ts_nn_attn *be[VIT_NB], double *fixed64_ms) {
  for (int k = 0; k < VIT_NB; k++) be[k] = NULL;
  *fixed64_ms = NAN;
  ts_nn_attn_opts o;
  ts_nn_attn_opts_default(&o, TS_NN_ATTN_DENSE_FLASH);
  ts_status s = ts_nn_attn_create(&be[VIT_DENSE], ctx, mask, hd, &o);
  if (s == TS_OK) s = make_fixed(b, ctx, mask, heads, hd, &be[VIT_FIXED], fixed64_ms);
  if (s == TS_OK) s = cost_setup(b, hd);
  if (s == TS_OK) s = ts_nn_attn_create(&be[VIT_SCHED], ctx, mask, hd, &b->sched);
  return s;
}

void vit_fill_images(float *img, size_t n) {
  ts_rng r;
  ts_rng_seed(&r, 3);
  for (size_t i = 0; i < n; i++) img[i] = (float)ts_rng_uniform(&r) * 2 - 1;
}

static int parse_bench(int argc, char **argv, vit_args *b, cli_common_opts *co) {
  for (int i = 1; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    r = vit_parse_opt(CMD, argc, argv, &i, b);
    if (r < 0) return CLI_USAGE;
    if (r == 0) return cli_usage_error(CMD, "unknown argument '%s'", argv[i]);
  }
  return CLI_OK;
}

/* o[name] = the figure's median, o[name_q25], o[name_q75] its quartiles, and for a ratio
 * o[name_ci95] = [lo, hi] (null where a figure is missing). */
void vit_add_fig(cJSON *o, const char *name, const vit_fig *f, bool ratio) {
  char k[80];
  bench_json_num(o, name, f->med);
  snprintf(k, sizeof k, "%s_q25", name);
  bench_json_num(o, k, f->q25);
  snprintf(k, sizeof k, "%s_q75", name);
  bench_json_num(o, k, f->q75);
  if (!ratio) return;
  snprintf(k, sizeof k, "%s_ci95", name);
  cJSON *ci = cJSON_AddArrayToObject(o, k);
  cJSON_AddItemToArray(ci, isfinite(f->lo) ? cJSON_CreateNumber(f->lo) : cJSON_CreateNull());
  cJSON_AddItemToArray(ci, isfinite(f->hi) ? cJSON_CreateNumber(f->hi) : cJSON_CreateNull());
}

static void add_backend(cJSON *j, const char *name, const run_result *r, int b) {
  char k[64];
  snprintf(k, sizeof k, "ms_%s", name);
  vit_add_fig(j, k, &r->e2e[b], false);
  snprintf(k, sizeof k, "attn_ms_%s", name);
  vit_add_fig(j, k, &r->attn[b], false);
  snprintf(k, sizeof k, "attn_share_%s", name);
  cJSON_AddNumberToObject(j, k, r->attn[b].med / r->e2e[b].med);
  snprintf(k, sizeof k, "min_ms_%s", name);
  cJSON_AddNumberToObject(j, k, r->e2e[b].min);
  snprintf(k, sizeof k, "min_attn_ms_%s", name);
  cJSON_AddNumberToObject(j, k, r->attn[b].min);
  snprintf(k, sizeof k, "forward_ms_%s", name);
  vit_add_fig(j, k, &r->forward[b], false);
  snprintf(k, sizeof k, "nonattn_ms_%s", name);
  vit_add_fig(j, k, &r->own_nonattn[b], false);
}

/* "[q25, q75]" of a time in buf. */
static const char *quartiles(char *buf, size_t cap, const fig *f) {
  snprintf(buf, cap, "[%.2f, %.2f]", f->q25, f->q75);
  return buf;
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
  vit_args b;
  vit_args_default(&b);
  int rc = parse_bench(argc, argv, &b, &co);
  if (rc != CLI_OK) return rc;
  if (co.help) {
    usage_bench();
    return CLI_OK;
  }
  ts_nn_vit_config cfg;
  ts_nn_token_mask mask;
  if ((rc = vit_model_setup(CMD, "bench", &b, "deit-s, vit-b16", &cfg, &mask)) != CLI_OK) return rc;
  int64_t gh = cfg.img_h / cfg.patch, gw = cfg.img_w / cfg.patch, hd = cfg.dim / cfg.heads;

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
    vit_fill_images(img, nimg);
    s = vit_backends_create(&b, ctx, &mask, cfg.heads, hd, be, &fixed64_ms);
  }
  run_result rr = {.rounds = 0};
  if (s == TS_OK) s = run_models(m, be, img, logits, (int)b.repeats, &rr);
  if (s != TS_OK) {
    rc = cli_fail(CMD, s);
    goto done;
  }
  ts_nn_attn_info fi, si;
  ts_nn_attn_get_info(be[1], &fi);
  ts_nn_attn_get_info(be[2], &si);
  double share = rr.attn[DENSE].med / rr.e2e[DENSE].med; /* the table's; the bound is the rounds' median */
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
    cJSON_AddNumberToObject(j, "rounds", rr.rounds);
    cJSON_AddNumberToObject(j, "warmup_rounds", WARMUP);
    bench_json_num(j, "other_cpus", rr.other_cpus >= 0 ? rr.other_cpus : NAN);
    vit_add_fig(j, "nonattn_ms", &rr.nonattn, false);
    for (int k = 0; k < NB; k++) add_backend(j, names[k], &rr, k);
    vit_add_fig(j, "speedup_vs_dense_flash", &rr.sp_dense, true);
    vit_add_fig(j, "speedup_vs_fixed", &rr.sp_fixed, true);
    vit_add_fig(j, "attn_speedup_vs_dense_flash", &rr.at_dense, true);
    vit_add_fig(j, "attn_speedup_vs_fixed", &rr.at_fixed, true);
    vit_add_fig(j, "amdahl_bound", &rr.amdahl, true);
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
    printf("%-12s %10s %-22s %10s %-22s %7s %10s\n", "backend", "e2e ms", "[q25, q75]", "attn ms", "[q25, q75]",
           "share", "work/nnz");
    const ts_nn_attn_info *inf[3] = {NULL, &fi, &si};
    for (int k = 0; k < NB; k++) {
      char qe[48], qa[48];
      printf("%-12s %10.2f %-22s %10.2f %-22s %6.1f%% %10.2f\n", names[k], rr.e2e[k].med,
             quartiles(qe, sizeof qe, &rr.e2e[k]), rr.attn[k].med, quartiles(qa, sizeof qa, &rr.attn[k]),
             100 * rr.attn[k].med / rr.e2e[k].med,
             inf[k] ? inf[k]->stats.work_ratio : (double)mask.n * mask.n / (double)mask.nnz);
    }
    printf("non-attention %.2f ms [%.2f, %.2f]: the same work in every backend, counted once per round (their\n"
           "forwards read %.2f, %.2f, %.2f ms outside attention); e2e = it + the backend's attention.\n"
           "%d interleaved rounds after %d warm-up",
           rr.nonattn.med, rr.nonattn.q25, rr.nonattn.q75, rr.own_nonattn[DENSE].med, rr.own_nonattn[FIXED].med,
           rr.own_nonattn[SCHED].med, rr.rounds, WARMUP);
    if (rr.other_cpus >= 0) printf("; other processes took %.2f CPUs", rr.other_cpus);
    printf("\n");
    printf("fixed tile %s%s; ", tile, b.fixed_given ? " (given)" : " (fastest of 16x32, 32x32, 64x64, 128x64)");
    if (si.cached) /* the cache holds the permutation and the schedule, not how they were made */
      printf("scheduled: plan from the plan cache, loaded in %.1f ms\n", si.plan_ms);
    else
      printf("scheduled: reorder %s, %lld blocks, solver %s%s, plan %.1f ms\n", ts_reorder_method_name(si.reorder),
             (long long)si.nblocks, si.solver < 0 ? "none" : ts_attn_solver_name((ts_attn_solver)si.solver),
             si.ilp_improved ? " (improved on greedy)" : "", si.plan_ms);
    printf("scheduled vs dense_flash: end-to-end %.2fx [%.2f, %.2f], attention %.2fx [%.2f, %.2f]\n", rr.sp_dense.med,
           rr.sp_dense.q25, rr.sp_dense.q75, rr.at_dense.med, rr.at_dense.q25, rr.at_dense.q75);
    printf("  Amdahl bound %.2fx: attention at zero cost, its share of dense flash's forward being %.1f%%\n", rr.amdahl.med,
           100 * share);
    printf("scheduled vs fixed:       end-to-end %.2fx [%.2f, %.2f], attention %.2fx [%.2f, %.2f]\n", rr.sp_fixed.med,
           rr.sp_fixed.q25, rr.sp_fixed.q75, rr.at_fixed.med, rr.at_fixed.q25, rr.at_fixed.q75);
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
  vit_args_free(&b);
  return rc;
}

int cmd_vit(int argc, char **argv) {
  if (argc < 2) return cli_usage_error(CMD, "missing verb (bench, train-bench)"); /* one line on stderr, as every command */
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage_top();
    return CLI_OK;
  }
  if (strcmp(argv[1], "bench") == 0) return bench(argc - 1, argv + 1);
  if (strcmp(argv[1], "train-bench") == 0) return vit_train_bench(argc - 1, argv + 1);
  return cli_usage_error(CMD, "unknown verb '%s' (bench, train-bench)", argv[1]);
}
