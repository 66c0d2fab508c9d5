/* tessera attn: tile-aware sparse attention from the command line.
 *   attn plan   mask -> reorder -> dense blocks -> scheduler (greedy | ILP) -> plan JSON, cached under
 *               <cache>/plans/<key>.json (a cached plan is loaded instead of solved again)
 *   attn bench  the same planning, then every baseline and both schedules timed in one process on
 *               the same random Q/K/V (fixed seed), error checked against the reference. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_reorder.h"
#include "harness.h"
#include "tessera/attn_profile.h"
#include "tessera/attn_sched.h"

#define CMD "attn"

static void usage(void) {
  printf("usage: tessera attn plan  (--pattern SPEC | --mask FILE) --heads H --head-dim D [--reorder M]\n"
         "                          [--solver ilp|greedy] [--time-limit S] [--dtype f32|bf16] [--out plan.json]\n"
         "                          [--cost analytic|profile] [--profile-level L] [--no-cache] [--threads N] [--json]\n"
         "       tessera attn bench (--pattern SPEC | --mask FILE) --heads H --head-dim D [--dtype f32|bf16]\n"
         "                          [--reorder M] [--batch B] [--threads N] [--repeats R] [--solver ...]\n"
         "                          [--cost analytic|profile] [--profile-level L] [--json]\n\n"
         "plan: reorders the mask (--reorder, default auto: the candidate with the fewest non-empty 64 x 64\n"
         "tiles), covers it with dense blocks, and schedules them: a tile per block piece from the menu\n"
         "(8..128 x 16..128) and a thread per row panel, minimizing the predicted thread makespan (greedy:\n"
         "cheapest tiles + LPT; ilp: CBC from the greedy start under --time-limit, default 2 s). The plan\n"
         "(schedule + permutation perm[new] = old) goes to <cache>/plans/<key>.json and to --out.\n"
         "bench: times dense flash (64 x 64), fixed-tile block skip at every menu tile on the original and\n"
         "on the reordered mask, and the greedy and ILP schedules (median of --repeats after warm-up), and\n"
         "checks the ILP result (in the original token order) against the reference on batch 0, heads 0-1.\n\n"
         "  --pattern SPEC     generated mask, e.g. permute:window2d:h=64,w=64,k=13 ('tessera pattern --help')\n"
         "  --mask FILE        mask file (.npy or .mtx, square)\n"
         "  --heads H          heads (1..4096)          --head-dim D   head dimension (1..4096)\n"
         "  --reorder M        none|rcm|hc|ic|metis|morton|hilbert|auto (auto)\n"
         "  --solver S         ilp|greedy (ilp)         --time-limit S ILP seconds (2)\n"
         "  --dtype T          f32|bf16 (f32)           --batch B      batch (1)\n"
         "  --repeats R        timed runs (5)           --threads N    threads (and the P the schedule balances)\n"
         "  --cost C           the scheduler's block cost: analytic (the formula ts_attn_cost_default, default)\n"
         "                     or profile (this machine's measured tile timings for the head dim and dtype:\n"
         "                     measured once, with progress on stderr, then read from\n"
         "                     <cache>/attn_profile_<level>_d<D>_<dtype>.json)\n"
         "  --profile-level L  quick|standard|full (standard): the profile's grid; quick < 1 s, standard 20-60 s,\n"
         "                     full several minutes (measured once per level, head dim and dtype)\n"
         "  --out FILE         plan: also write the plan JSON here\n"
         "  --no-cache         plan: neither read nor write the plan cache\n"
         "  --json             print the report as JSON\n"
         "also accepted: the reordering/blocks options of 'tessera blocks' (--density, --extract, --grid, ...)\n");
}

typedef struct args {
  rcli_args r;
  bool bench, no_cache;
  long heads, d, batch, repeats;
  ts_attn_solver solver;
  double time_limit;
  bool bf16;
  bool profile;                 /* --cost profile */
  ts_attn_profile_level level;  /* --profile-level */
  const char *out;
  cli_common_opts co;
} args;

static int parse(int argc, char **argv, args *A) {
  memset(A, 0, sizeof *A);
  rcli_defaults(&A->r, TS_REORDER_AUTO, 64);
  A->batch = 1, A->repeats = 5, A->time_limit = 2.0, A->solver = TS_ATTN_SOLVER_ILP;
  A->level = TS_ATTN_PROFILE_STANDARD;
  int i = 1;
  if (argc < 2) return cli_usage_error(CMD, "expected a sub-command: plan or bench (see --help)");
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    A->co.help = true;
    return CLI_OK;
  }
  if (strcmp(argv[1], "bench") == 0) A->bench = true;
  else if (strcmp(argv[1], "plan") != 0) return cli_usage_error(CMD, "unknown sub-command '%s' (plan, bench)", argv[1]);
  for (i = 2; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &A->co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *o = argv[i], *v;
    if (strcmp(o, "--mask") == 0) {
      if (!(A->r.in = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(o, "--reorder") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_reorder_method_parse(v, &A->r.ro.method) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
      A->r.method_given = true;
    } else if (strcmp(o, "--heads") == 0 || strcmp(o, "--head-dim") == 0 || strcmp(o, "--batch") == 0 ||
               strcmp(o, "--repeats") == 0) {
      long *dst = o[2] == 'h' ? (o[6] == 's' ? &A->heads : &A->d) : o[2] == 'b' ? &A->batch : &A->repeats;
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, o, v, 1, o[2] == 'r' ? 100000 : 4096, dst))
        return CLI_USAGE;
    } else if (strcmp(o, "--solver") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_attn_solver_parse(v, &A->solver) != TS_OK) return cli_usage_error(CMD, "--solver expects ilp or greedy, got '%s'", v);
    } else if (strcmp(o, "--time-limit") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_double(CMD, o, v, 1e-3, 3600, &A->time_limit)) return CLI_USAGE;
    } else if (strcmp(o, "--dtype") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "f32") != 0 && strcmp(v, "bf16") != 0) return cli_usage_error(CMD, "--dtype expects f32 or bf16, got '%s'", v);
      A->bf16 = v[0] == 'b';
    } else if (strcmp(o, "--out") == 0 || strcmp(o, "-o") == 0) {
      if (!(A->out = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(o, "--cost") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "analytic") != 0 && strcmp(v, "profile") != 0)
        return cli_usage_error(CMD, "--cost expects analytic or profile, got '%s'", v);
      A->profile = v[0] == 'p';
    } else if (strcmp(o, "--profile-level") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_attn_profile_level_parse(v, &A->level) != TS_OK)
        return cli_usage_error(CMD, "--profile-level expects quick, standard or full, got '%s'", v);
    } else if (strcmp(o, "--no-cache") == 0) {
      A->no_cache = true;
    } else {
      int r2 = rcli_option(CMD, argc, argv, &i, &A->r);
      if (r2 < 0) return CLI_USAGE;
      if (r2 == 0) return cli_usage_error(CMD, "unknown argument '%s'", o);
    }
  }
  if (A->co.help) return CLI_OK;
  if (!A->r.in == !A->r.spec) return cli_usage_error(CMD, "give exactly one of --pattern SPEC and --mask FILE");
  if (A->heads < 1 || A->d < 1) return cli_usage_error(CMD, "--heads and --head-dim are required");
  if (A->out && A->bench) return cli_usage_error(CMD, "--out belongs to 'attn plan'");
  return CLI_OK;
}

/* Everything planning produces. */
typedef struct planned {
  rcli_input in;
  int32_t *perm;           /* [n] perm[new] = old */
  ts_reorder_stats rst;
  ts_csr pm;               /* permuted mask */
  ts_bitmap bo, bp;        /* original and permuted bitmaps */
  ts_blocks blk;
  ts_attn_schedule greedy, ilp;
  ts_attn_sched_info gi, ii;
  double reorder_ms, blocks_ms, solve_ms, greedy_ms;
  int threads, d;
  /* --cost profile: the model made from the profile, where the profile lives, whether this run
   * measured it, its date (part of the plan key: a re-measured profile is another cost model) */
  ts_attn_cost_model *model;
  char profile_path[4200], profile_date[32];
  bool profile_measured;
  double profile_ms;
} planned;

static void planned_free(planned *P) {
  rcli_input_free(&P->in);
  free(P->perm);
  ts_csr_free(&P->pm);
  ts_bitmap_free(&P->bo), ts_bitmap_free(&P->bp);
  ts_blocks_free(&P->blk);
  ts_attn_schedule_free(&P->greedy), ts_attn_schedule_free(&P->ilp);
  ts_attn_cost_model_destroy(P->model);
}

static ts_attn_sched_opts sched_opts(const args *A, const planned *P, ts_attn_solver solver) {
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.solver = solver;
  o.threads = P->threads;
  o.time_limit = A->time_limit;
  o.cost_user = (void *)&P->d;
  if (P->model) o.cost = ts_attn_cost_profiled, o.cost_user = P->model;
  return o;
}

/* --cost profile: the cached profile for this head dim and dtype (measured now when missing or
 * stale; the default menu, which is also the scheduler's) and its cost model. */
static int cost_setup(const args *A, planned *P) {
  if (!A->profile) return CLI_OK;
  ts_attn_profile_opts po = ts_attn_profile_opts_default();
  po.level = A->level, po.d = A->d, po.dtype = A->bf16 ? TS_BF16 : TS_F32;
  ts_attn_profile prof;
  memset(&prof, 0, sizeof prof);
  double t0 = ts_now();
  ts_status s = ts_attn_profile_default_path(&po, P->profile_path, sizeof P->profile_path);
  if (s == TS_OK) s = ts_attn_profile_get(&po, P->profile_path, &prof, &P->profile_measured);
  if (s != TS_OK) return cli_fail(CMD, s);
  snprintf(P->profile_date, sizeof P->profile_date, "%s", prof.date);
  s = ts_attn_cost_model_create(&prof, &P->model);
  ts_attn_profile_free(&prof);
  P->profile_ms = (ts_now() - t0) * 1e3;
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

/* JSON fields naming the cost model. */
static void cost_json(cJSON *j, const args *A, const planned *P) {
  cJSON_AddStringToObject(j, "cost", A->profile ? "profile" : "analytic");
  if (!A->profile) return;
  cJSON_AddStringToObject(j, "profile_level", ts_attn_profile_level_name(A->level));
  cJSON_AddStringToObject(j, "profile_path", P->profile_path);
  cJSON_AddStringToObject(j, "profile_date", P->profile_date);
  cJSON_AddBoolToObject(j, "profile_measured", P->profile_measured);
  cJSON_AddNumberToObject(j, "profile_ms", P->profile_ms);
}

/* Load, reorder, permute, extract blocks (no scheduling yet). CLI_OK or the exit code. */
static int load_mask(args *A, planned *P) {
  int rc = rcli_load(CMD, &A->r, &P->in);
  if (rc != CLI_OK) return rc;
  if (P->in.m.rows != P->in.m.cols) return cli_usage_error(CMD, "the mask must be square, got %lld x %lld",
                                                          (long long)P->in.m.rows, (long long)P->in.m.cols);
  return CLI_OK;
}

/* Reorder, permute, extract blocks (the mask is loaded). */
static int prepare(args *A, planned *P) {
  int rc;
  int32_t *cp = NULL;
  double t0 = ts_now();
  rc = rcli_reorder(CMD, &A->r, &P->in, &P->perm, &cp, &P->rst);
  free(cp);
  P->reorder_ms = (ts_now() - t0) * 1e3;
  if (rc != CLI_OK) return rc;
  if (!P->rst.symmetric) return cli_usage_error(CMD, "the reordering must be symmetric (one permutation for queries and keys)");
  ts_status s;
  t0 = ts_now();
  if ((s = ts_csr_permute(&P->in.m, P->perm, P->perm, &P->pm)) != TS_OK || (s = ts_csr_to_bitmap(&P->in.m, &P->bo)) != TS_OK ||
      (s = ts_csr_to_bitmap(&P->pm, &P->bp)) != TS_OK || (s = ts_blocks_extract(&P->pm, &A->r.bo, &P->blk)) != TS_OK)
    return cli_fail(CMD, s);
  P->blocks_ms = (ts_now() - t0) * 1e3;
  return CLI_OK;
}

static void options_text(const args *A, const planned *P, char *buf, size_t cap);

static void desc_of(const args *A, const planned *P, ts_attn_solver solver, ts_attn_plan_desc *d) {
  char opts[1024];
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 of the knobs: the desc's options digest */
  options_text(A, P, opts, sizeof opts);
  for (const char *c = opts; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  ts_attn_plan_desc_init(d, P->in.m.rows, A->heads, A->d, P->threads);
  snprintf(d->dtype, sizeof d->dtype, "%s", A->bf16 ? "bf16" : "f32");
  snprintf(d->reorder, sizeof d->reorder, "%s", ts_reorder_method_name(P->rst.method));
  snprintf(d->solver, sizeof d->solver, "%s", ts_attn_solver_name(solver));
  snprintf(d->options, sizeof d->options, "%016llx", (unsigned long long)h);
}

static void info_json(cJSON *j, const ts_attn_sched_info *g, const ts_attn_sched_info *x) {
  cJSON_AddStringToObject(j, "solver_used", ts_attn_solver_name(x->solver));
  cJSON_AddNumberToObject(j, "blocks", (double)x->nblocks);
  cJSON_AddNumberToObject(j, "pieces", (double)x->npieces);
  cJSON_AddNumberToObject(j, "panels", (double)x->npanels);
  cJSON_AddNumberToObject(j, "predicted_greedy", g->makespan);
  cJSON_AddNumberToObject(j, "predicted_ilp", x->makespan);
  cJSON_AddNumberToObject(j, "predicted_lower_bound", x->lower_bound);
  cJSON_AddStringToObject(j, "ilp_status", x->ilp_run ? ts_ilp_status_name(x->ilp_status) : "not run");
  if (x->ilp_run && isfinite(x->ilp_gap)) cJSON_AddNumberToObject(j, "ilp_gap", x->ilp_gap);
  else cJSON_AddNullToObject(j, "ilp_gap");
  cJSON_AddNumberToObject(j, "ilp_seconds", x->ilp_seconds);
  cJSON_AddBoolToObject(j, "ilp_tiles_fixed", x->tiles_fixed);
  cJSON_AddNumberToObject(j, "ilp_vars", x->ilp_vars);
}

/* The knobs that shape a plan besides the desc, as text for the source key and (hashed) the desc's
 * options digest, so both keys see them; the cost model is one (a profile by its level and date). */
static void options_text(const args *A, const planned *P, char *buf, size_t cap) {
  const ts_reorder_opts *r = &A->r.ro;
  const ts_blocks_opts *b = &A->r.bo;
  snprintf(buf, cap, "mode=%d cs=%d dist=%d tau=%.17g q=%d rw=%d ps=%d grid=%lldx%lld gp=%d df=%.17g tile=%d seed=%llu "
           "ex=%d rho=%.17g mn=%lld mr=%d mc=%d mg=%d bcst=%.17g solver=%s tl=%.17g",
           (int)r->mode, r->cluster_size, (int)r->distance, r->tau, r->quotient, r->refine_window, r->part_size,
           (long long)r->grid_h, (long long)r->grid_w, r->grid_pos != NULL, r->dense_frac, r->tile,
           (unsigned long long)r->seed, (int)b->method, b->rho, (long long)b->min_nnz, b->max_rows, b->max_cols,
           b->max_group, b->block_cost, ts_attn_solver_name(A->solver), A->solver == TS_ATTN_SOLVER_ILP ? A->time_limit : 0.0);
  size_t len = strlen(buf);
  if (A->profile)
    snprintf(buf + len, cap - len, " cost=profile level=%s date=%s", ts_attn_profile_level_name(A->level), P->profile_date);
  else
    snprintf(buf + len, cap - len, " cost=analytic");
}

/* Cache lookup through the source index: loads plans/<key>.json and accepts it only when its key
 * recomputed from the stored permutation applied to this mask matches. true on a hit. */
static bool cache_lookup(const args *A, planned *P, const char *src_path, const ts_attn_plan_desc *want, char key[17],
                         char *path, size_t cap) {
  char *txt = NULL;
  size_t len = 0;
  if (ts_read_file(src_path, &txt, &len) != TS_OK) return false;
  bool ok = len >= 16;
  if (ok) memcpy(key, txt, 16), key[16] = 0;
  free(txt);
  ts_attn_plan_desc fd;
  int32_t *perm = NULL;
  if (!ok || ts_attn_plan_cache_path(key, path, cap) != TS_OK || ts_attn_plan_load(path, key, &fd, &perm, &P->ilp) != TS_OK)
    return false;
  ts_attn_plan_desc d = *want;
  snprintf(d.reorder, sizeof d.reorder, "%s", fd.reorder);
  char k2[17];
  ok = perm && ts_csr_permute(&P->in.m, perm, perm, &P->pm) == TS_OK && ts_attn_plan_key(&P->pm, perm, &d, k2) == TS_OK &&
       strcmp(k2, key) == 0;
  if (ok) {
    P->perm = malloc((size_t)P->in.m.rows * sizeof *P->perm);
    ok = P->perm != NULL;
    if (ok) memcpy(P->perm, perm, (size_t)P->in.m.rows * sizeof *perm);
    ts_reorder_method_parse(fd.reorder, &P->rst.method);
  }
  ts_free(perm);
  if (!ok) {
    fprintf(stderr, "tessera attn: ignoring the cached plan %s: it does not match this request\n", path);
    ts_attn_schedule_free(&P->ilp);
    ts_csr_free(&P->pm);
  }
  return ok;
}

static int cmd_plan(args *A, planned *P) {
  int rc = load_mask(A, P);
  if (rc == CLI_OK) rc = cost_setup(A, P);
  if (rc != CLI_OK) return rc;
  ts_attn_plan_desc desc;
  char key[17], src[17], path[4200], src_path[4200], opts[1024];
  ts_status s;
  bool cached = false;
  double t0 = ts_now(), load_ms = 0;
  if (!A->no_cache) {
    desc_of(A, P, A->solver, &desc);
    snprintf(desc.reorder, sizeof desc.reorder, "%s", ts_reorder_method_name(A->r.ro.method)); /* requested */
    options_text(A, P, opts, sizeof opts);
    if ((s = ts_attn_plan_source_key(&P->in.m, opts, &desc, src)) != TS_OK || (s = ts_attn_plan_cache_path(src, path, sizeof path)) != TS_OK)
      return cli_fail(CMD, s);
    char *dot = strrchr(path, '/');
    snprintf(src_path, sizeof src_path, "%.*s/src-%s.key", dot ? (int)(dot - path) : 0, path, src);
    cached = cache_lookup(A, P, src_path, &desc, key, path, sizeof path);
    load_ms = (ts_now() - t0) * 1e3;
  }
  if (cached) {
    desc_of(A, P, A->solver, &desc);
  } else {
    if ((rc = prepare(A, P)) != CLI_OK) return rc;
    desc_of(A, P, A->solver, &desc);
    if ((s = ts_attn_plan_key(&P->pm, P->perm, &desc, key)) != TS_OK || (s = ts_attn_plan_cache_path(key, path, sizeof path)) != TS_OK)
      return cli_fail(CMD, s);
    ts_attn_sched_opts o = sched_opts(A, P, A->solver);
    t0 = ts_now();
    if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->ilp, &P->ii)) != TS_OK) return cli_fail(CMD, s);
    P->solve_ms = (ts_now() - t0) * 1e3;
    if (!A->no_cache && ((s = ts_attn_plan_save(path, key, &desc, P->perm, &P->ilp, &P->ii)) != TS_OK ||
                         (s = ts_write_file_atomic(src_path, key, 16)) != TS_OK))
      return cli_fail(CMD, s);
  }
  if (A->out && (s = ts_attn_plan_save(A->out, key, &desc, P->perm, &P->ilp, cached ? NULL : &P->ii)) != TS_OK)
    return cli_fail(CMD, s);
  if (A->co.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "key", key);
    cJSON_AddStringToObject(j, "pattern", P->in.name);
    cJSON_AddNumberToObject(j, "n", (double)P->in.m.rows);
    cJSON_AddNumberToObject(j, "nnz", (double)P->in.m.nnz);
    cJSON_AddStringToObject(j, "reorder", desc.reorder);
    cJSON_AddBoolToObject(j, "cached", cached);
    cJSON_AddNumberToObject(j, "load_ms", load_ms);
    cJSON_AddNumberToObject(j, "reorder_ms", P->reorder_ms);
    cJSON_AddNumberToObject(j, "blocks_ms", P->blocks_ms);
    cJSON_AddNumberToObject(j, "solve_ms", P->solve_ms);
    cJSON_AddNumberToObject(j, "plan_ms", P->reorder_ms + P->blocks_ms + P->solve_ms);
    cJSON_AddNumberToObject(j, "threads", P->threads);
    cost_json(j, A, P);
    if (!cached) info_json(j, &P->ii, &P->ii);
    cJSON_AddStringToObject(j, "cache_path", A->no_cache ? "" : path);
    if (A->out) cJSON_AddStringToObject(j, "out", A->out);
    cli_print_json(j);
  } else {
    printf("pattern    %s (n = %lld, nnz = %lld)\n", P->in.name, (long long)P->in.m.rows, (long long)P->in.m.nnz);
    if (A->profile)
      printf("cost       profile %s (%s, %s)\n", ts_attn_profile_level_name(A->level), P->profile_path,
             P->profile_measured ? "measured now" : "cached");
    else
      printf("cost       analytic\n");
    if (cached) {
      printf("reorder    %s (from the cached plan)\nplan       cached %s (found and checked in %.2f ms)\n", desc.reorder, path,
             load_ms);
    } else {
      printf("reorder    %s (%.1f ms)\nblocks     %lld (%.1f ms)\n", desc.reorder, P->reorder_ms, (long long)P->blk.nblocks,
             P->blocks_ms);
      printf("schedule   %s: %lld panels, %lld pieces, %d threads, predicted makespan %.4g (greedy %.4g, bound %.4g)\n",
             ts_attn_solver_name(P->ii.solver), (long long)P->ii.npanels, (long long)P->ii.npieces, P->threads,
             P->ii.makespan, P->ii.greedy_makespan, P->ii.lower_bound);
      if (P->ii.ilp_run)
        printf("ilp        %s, gap %.3g, %.2f s%s\n", ts_ilp_status_name(P->ii.ilp_status), P->ii.ilp_gap, P->ii.ilp_seconds,
               P->ii.tiles_fixed ? ", tiles fixed (aggregated)" : "");
      printf("solve      %.1f ms\n", P->solve_ms);
      if (!A->no_cache) printf("cached     %s\n", path);
    }
    if (A->out) printf("wrote      %s\n", A->out);
  }
  return CLI_OK;
}

/* ---- bench ------------------------------------------------------------------------------------ */

typedef struct tensors {
  int64_t b, h, n, d;
  float *Q, *K, *V, *O;        /* original order */
  float *Qp, *Kp, *Vp;         /* permuted order */
  uint16_t *Q16, *K16, *V16, *Q16p, *K16p, *V16p;
} tensors;

typedef struct run_arg {
  const ts_context *ctx;
  ts_attn_plan *pl;
  const tensors *T;
  bool permuted, bf16;
} run_arg;

static void run_fn(void *p) {
  run_arg *r = p;
  const tensors *T = r->T;
  if (r->bf16)
    ts_attn_execute_bf16(r->ctx, r->pl, r->permuted ? T->Q16p : T->Q16, r->permuted ? T->K16p : T->K16,
                         r->permuted ? T->V16p : T->V16, T->O, T->b, T->h, T->n, T->d);
  else
    ts_attn_execute(r->ctx, r->pl, r->permuted ? T->Qp : T->Q, r->permuted ? T->Kp : T->K, r->permuted ? T->Vp : T->V, T->O,
                    T->b, T->h, T->n, T->d);
}

/* Plans s on mask, times it; ms < 0 on failure (status returned). */
static ts_status time_schedule(const args *A, const ts_context *ctx, const ts_attn_schedule *s, const ts_bitmap *mask,
                               const tensors *T, bool permuted, double *ms, double *work_ratio, double *create_ms) {
  ts_attn_plan *pl;
  double t0 = ts_now();
  TS_TRY(ts_attn_plan_create(&pl, ctx, s, mask, T->d));
  if (create_ms) *create_ms = (ts_now() - t0) * 1e3;
  ts_attn_stats st;
  ts_attn_plan_stats(pl, &st);
  *work_ratio = st.work_ratio;
  run_arg ra = {ctx, pl, T, permuted, A->bf16};
  ts_bench_opts bo = ts_bench_opts_default();
  bo.warmup = 1, bo.repeats = (int)A->repeats, bo.min_time_s = 0;
  ts_bench_result br;
  ts_status stt = ts_bench_run(&bo, run_fn, &ra, &br);
  *ms = br.median_s * 1e3;
  ts_attn_plan_destroy(pl);
  return stt;
}

static int bench_alloc(const args *A, const planned *P, tensors *T) {
  memset(T, 0, sizeof *T);
  T->b = A->batch, T->h = A->heads, T->n = P->in.m.rows, T->d = A->d;
  size_t tot = (size_t)(T->b * T->h * T->n * T->d);
  T->Q = ts_malloc(tot * 4), T->K = ts_malloc(tot * 4), T->V = ts_malloc(tot * 4), T->O = ts_malloc(tot * 4);
  T->Qp = ts_malloc(tot * 4), T->Kp = ts_malloc(tot * 4), T->Vp = ts_malloc(tot * 4);
  if (!T->Q || !T->K || !T->V || !T->O || !T->Qp || !T->Kp || !T->Vp) return cli_fail(CMD, TS_ERR_OOM);
  ts_rng r;
  ts_rng_seed(&r, 20260402);
  for (size_t i = 0; i < tot; i++) T->Q[i] = ts_rng_normal(&r), T->K[i] = ts_rng_normal(&r), T->V[i] = ts_rng_normal(&r);
  if (A->bf16) { /* round the fp32 copies too, so the reference sees the same values */
    T->Q16 = ts_malloc(tot * 2), T->K16 = ts_malloc(tot * 2), T->V16 = ts_malloc(tot * 2);
    T->Q16p = ts_malloc(tot * 2), T->K16p = ts_malloc(tot * 2), T->V16p = ts_malloc(tot * 2);
    if (!T->Q16 || !T->K16 || !T->V16 || !T->Q16p || !T->K16p || !T->V16p) return cli_fail(CMD, TS_ERR_OOM);
    ts_f32_to_bf16_array(T->Q, T->Q16, tot), ts_f32_to_bf16_array(T->K, T->K16, tot), ts_f32_to_bf16_array(T->V, T->V16, tot);
    for (size_t i = 0; i < tot; i++) {
      uint32_t u[3] = {(uint32_t)T->Q16[i] << 16, (uint32_t)T->K16[i] << 16, (uint32_t)T->V16[i] << 16};
      memcpy(&T->Q[i], &u[0], 4), memcpy(&T->K[i], &u[1], 4), memcpy(&T->V[i], &u[2], 4);
    }
  }
  for (int64_t h = 0; h < T->b * T->h; h++)
    for (int64_t i = 0; i < T->n; i++) {
      size_t dst = (size_t)((h * T->n + i) * T->d), src = (size_t)((h * T->n + P->perm[i]) * T->d);
      memcpy(T->Qp + dst, T->Q + src, (size_t)T->d * 4), memcpy(T->Kp + dst, T->K + src, (size_t)T->d * 4);
      memcpy(T->Vp + dst, T->V + src, (size_t)T->d * 4);
      if (A->bf16) {
        memcpy(T->Q16p + dst, T->Q16 + src, (size_t)T->d * 2), memcpy(T->K16p + dst, T->K16 + src, (size_t)T->d * 2);
        memcpy(T->V16p + dst, T->V16 + src, (size_t)T->d * 2);
      }
    }
  return CLI_OK;
}

static void bench_free(tensors *T) {
  ts_free(T->Q), ts_free(T->K), ts_free(T->V), ts_free(T->O), ts_free(T->Qp), ts_free(T->Kp), ts_free(T->Vp);
  ts_free(T->Q16), ts_free(T->K16), ts_free(T->V16), ts_free(T->Q16p), ts_free(T->K16p), ts_free(T->V16p);
}

/* Max |O_ilp - O_ref| over batch 0, heads [0, hs), in the original token order. */
static ts_status check_error(const args *A, const ts_context *ctx, const planned *P, const tensors *T, int64_t hs, double *err,
                             double *rel) {
  ts_attn_plan *pl;
  TS_TRY(ts_attn_plan_create(&pl, ctx, &P->ilp, &P->bp, T->d));
  run_arg ra = {ctx, pl, T, true, A->bf16};
  run_fn(&ra); /* O (permuted order) for every batch and head */
  ts_attn_plan_destroy(pl);
  size_t hsz = (size_t)(T->n * T->d), tot = (size_t)hs * hsz;
  float *ref = ts_malloc(tot * 4), *got = ts_malloc(tot * 4);
  ts_status s = ref && got ? TS_OK : ts_error(TS_ERR_OOM, "attn bench: reference buffers");
  if (s == TS_OK) s = ts_attn_reference(&P->bo, T->Q, T->K, T->V, ref, 1, hs, T->n, T->d);
  double e = 0, vmax = 0;
  for (int64_t h = 0; s == TS_OK && h < hs; h++)
    for (int64_t i = 0; i < T->n; i++) /* scatter: permuted row i is original row perm[i] */
      memcpy(got + h * hsz + (size_t)P->perm[i] * T->d, T->O + h * hsz + (size_t)i * T->d, (size_t)T->d * 4);
  for (size_t i = 0; s == TS_OK && i < tot; i++) {
    double x = fabs((double)got[i] - ref[i]);
    e = (x > e || isnan(x)) ? (isnan(x) ? INFINITY : x) : e;
    vmax = fabs(T->V[i]) > vmax ? fabs(T->V[i]) : vmax;
  }
  *err = e, *rel = vmax > 0 ? e / vmax : e;
  ts_free(ref), ts_free(got);
  return s;
}

typedef struct method {
  const char *name;
  double ms, work;
  int br, bc;
} method;

static int cmd_bench(args *A, planned *P, const ts_context *ctx) {
  int rc = load_mask(A, P);
  if (rc == CLI_OK) rc = cost_setup(A, P);
  if (rc == CLI_OK) rc = prepare(A, P);
  if (rc != CLI_OK) return rc;
  ts_status s;
  double t0 = ts_now();
  ts_attn_sched_opts o = sched_opts(A, P, TS_ATTN_SOLVER_GREEDY);
  if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->greedy, &P->gi)) != TS_OK) return cli_fail(CMD, s);
  P->greedy_ms = (ts_now() - t0) * 1e3;
  o = sched_opts(A, P, A->solver);
  t0 = ts_now();
  if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->ilp, &P->ii)) != TS_OK) return cli_fail(CMD, s);
  P->solve_ms = (ts_now() - t0) * 1e3;
  tensors T;
  if ((rc = bench_alloc(A, P, &T)) != CLI_OK) {
    bench_free(&T);
    return rc;
  }
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu);
  method dense = {"dense_flash", 0, 0, 64, 64}, fb = {"fixed_best", INFINITY, 0, 0, 0}, f64 = {"fixed_64", 0, 0, 64, 64};
  method fbr = {"fixed_best_reordered", INFINITY, 0, 0, 0}, gr = {"greedy", 0, 0, 0, 0}, il = {"ilp", 0, 0, 0, 0};
  double create_ms = 0;
  ts_attn_schedule sch;
  if ((s = ts_attn_schedule_dense(&sch, T.n, 64, 64)) == TS_OK) {
    s = time_schedule(A, ctx, &sch, &P->bo, &T, false, &dense.ms, &dense.work, NULL);
    ts_attn_schedule_free(&sch);
  }
  for (int pass = 0; pass < 2 && s == TS_OK; pass++) /* 0: original order, 1: reordered */
    for (int t = 0; t < nmenu && s == TS_OK; t++) {
      method m = {pass ? "fixed_best_reordered" : "fixed_best", 0, 0, menu[t].br, menu[t].bc};
      if ((s = ts_attn_schedule_blockskip(&sch, T.n, menu[t].br, menu[t].bc)) != TS_OK) break;
      s = time_schedule(A, ctx, &sch, pass ? &P->bp : &P->bo, &T, pass == 1, &m.ms, &m.work, NULL);
      ts_attn_schedule_free(&sch);
      method *best = pass ? &fbr : &fb;
      if (s == TS_OK && m.ms < best->ms) *best = m;
      if (!pass && menu[t].br == 64 && menu[t].bc == 64) f64.ms = m.ms, f64.work = m.work;
    }
  if (s == TS_OK) s = time_schedule(A, ctx, &P->greedy, &P->bp, &T, true, &gr.ms, &gr.work, NULL);
  if (s == TS_OK) s = time_schedule(A, ctx, &P->ilp, &P->bp, &T, true, &il.ms, &il.work, &create_ms);
  int64_t hs = A->heads < 2 ? A->heads : 2;
  double err = NAN, rel = NAN;
  if (s == TS_OK) s = check_error(A, ctx, P, &T, hs, &err, &rel);
  ts_pattern_metrics mb, ma;
  if (s == TS_OK) s = ts_pattern_metrics_compute(&P->in.m, NULL, NULL, 64, &mb);
  if (s == TS_OK) s = ts_pattern_metrics_compute(&P->pm, NULL, NULL, 64, &ma);
  bench_free(&T);
  if (s != TS_OK) return cli_fail(CMD, s);
  ts_machine_profile prof;
  bool have_prof = ts_bench_profile(&prof) == TS_OK;
  const double nnz = (double)P->in.m.nnz, n = (double)P->in.m.rows;
  double flops = 4.0 * (double)A->d * nnz * (double)A->heads * (double)A->batch;
  double gflops = flops / (il.ms * 1e-3) / 1e9, pct = have_prof ? ts_bench_pct_peak_flops(&prof, gflops) : NAN;
  double plan_ms = P->reorder_ms + P->blocks_ms + P->solve_ms;
  const method *all[] = {&dense, &fb, &f64, &fbr, &gr, &il};
  if (A->co.json) {
    cJSON *j = cJSON_CreateObject(), *w = cJSON_CreateObject(), *parts = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "pattern", P->in.name);
    cJSON_AddNumberToObject(j, "n", n);
    cJSON_AddNumberToObject(j, "nnz", nnz);
    cJSON_AddNumberToObject(j, "density", nnz / (n * n));
    cJSON_AddNumberToObject(j, "heads", (double)A->heads);
    cJSON_AddNumberToObject(j, "head_dim", (double)A->d);
    cJSON_AddNumberToObject(j, "batch", (double)A->batch);
    cJSON_AddStringToObject(j, "dtype", A->bf16 ? "bf16" : "f32");
    cJSON_AddNumberToObject(j, "threads", P->threads);
    cJSON_AddNumberToObject(j, "repeats", (double)A->repeats);
    cJSON_AddStringToObject(j, "reorder", ts_reorder_method_name(P->rst.method));
    cost_json(j, A, P);
    cJSON_AddNumberToObject(j, "tiles_empty", (double)ma.tiles_empty);
    cJSON_AddNumberToObject(j, "tiles_mixed", (double)ma.tiles_mixed);
    cJSON_AddNumberToObject(j, "tiles_full", (double)ma.tiles_full);
    cJSON_AddNumberToObject(j, "tiles_empty_before", (double)mb.tiles_empty);
    cJSON_AddNumberToObject(j, "tiles_mixed_before", (double)mb.tiles_mixed);
    cJSON_AddNumberToObject(j, "tiles_full_before", (double)mb.tiles_full);
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
      cJSON_AddNumberToObject(j, all[k]->name, all[k]->ms);
      cJSON_AddNumberToObject(w, all[k]->name, all[k]->work);
    }
    char tb[32];
    snprintf(tb, sizeof tb, "%dx%d", fb.br, fb.bc);
    cJSON_AddStringToObject(j, "fixed_best_tile", tb);
    snprintf(tb, sizeof tb, "%dx%d", fbr.br, fbr.bc);
    cJSON_AddStringToObject(j, "fixed_best_reordered_tile", tb);
    cJSON_AddNumberToObject(j, "speedup_vs_fixed_best", fb.ms / il.ms);
    cJSON_AddNumberToObject(j, "speedup_vs_fixed_64", f64.ms / il.ms);
    cJSON_AddNumberToObject(j, "speedup_vs_fixed_best_reordered", fbr.ms / il.ms);
    cJSON_AddNumberToObject(j, "speedup_vs_dense_flash", dense.ms / il.ms);
    cJSON_AddItemToObject(j, "work_ratio", w);
    cJSON_AddNumberToObject(j, "plan_ms", plan_ms);
    cJSON_AddNumberToObject(parts, "reorder_ms", P->reorder_ms);
    cJSON_AddNumberToObject(parts, "blocks_ms", P->blocks_ms);
    cJSON_AddNumberToObject(parts, "solve_ms", P->solve_ms);
    cJSON_AddNumberToObject(parts, "greedy_solve_ms", P->greedy_ms);
    cJSON_AddNumberToObject(parts, "plan_create_ms", create_ms);
    cJSON_AddItemToObject(j, "plan_parts", parts);
    info_json(j, &P->gi, &P->ii);
    cJSON_AddNumberToObject(j, "max_abs_err", err);
    cJSON_AddNumberToObject(j, "max_rel_err", rel);
    char sub[64];
    snprintf(sub, sizeof sub, "batch 0, heads 0-%lld (original token order)", (long long)hs - 1);
    cJSON_AddStringToObject(j, "err_subset", sub);
    cJSON_AddNumberToObject(j, "gflops_effective", gflops);
    if (isfinite(pct)) cJSON_AddNumberToObject(j, "pct_peak", pct);
    else cJSON_AddNullToObject(j, "pct_peak");
    cli_print_json(j);
  } else {
    printf("pattern  %s: n = %lld, density %.4f; %s reorder; %lld x %lld x %lld (batch x heads x d) %s, %d threads\n",
           P->in.name, (long long)n, nnz / (n * n), ts_reorder_method_name(P->rst.method), (long long)A->batch,
           (long long)A->heads, (long long)A->d, A->bf16 ? "bf16" : "f32", P->threads);
    if (A->profile)
      printf("cost     profile %s (%s)\n", ts_attn_profile_level_name(A->level), P->profile_path);
    else
      printf("cost     analytic\n");
    printf("tiles64  before: %lld empty %lld mixed %lld full; after: %lld empty %lld mixed %lld full\n",
           (long long)mb.tiles_empty, (long long)mb.tiles_mixed, (long long)mb.tiles_full, (long long)ma.tiles_empty,
           (long long)ma.tiles_mixed, (long long)ma.tiles_full);
    printf("%-22s %8s %10s %10s %10s\n", "method", "tile", "ms", "vs ilp", "work");
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
      char tb[16] = "varied";
      if (all[k]->br) snprintf(tb, sizeof tb, "%dx%d", all[k]->br, all[k]->bc);
      printf("%-22s %8s %10.3f %9.2fx %10.3f\n", all[k]->name, tb, all[k]->ms, all[k]->ms / il.ms, all[k]->work);
    }
    printf("plan     %.1f ms (reorder %.1f, blocks %.1f, %s solve %.1f); predicted makespan greedy %.4g, ilp %.4g (%s)\n",
           plan_ms, P->reorder_ms, P->blocks_ms, ts_attn_solver_name(A->solver), P->solve_ms, P->gi.makespan, P->ii.makespan,
           P->ii.ilp_run ? ts_ilp_status_name(P->ii.ilp_status) : "ilp not run");
    printf("ilp      %.2f GFLOP/s effective (%.1f%% of peak), max |err| %.3g (%.3g of max|V|) on batch 0, heads 0-%lld\n",
           gflops, pct, err, rel, (long long)hs - 1);
  }
  return CLI_OK;
}

int cmd_attn(int argc, char **argv) {
  args A;
  int rc = parse(argc, argv, &A);
  if (rc != CLI_OK) return rc;
  if (A.co.help) {
    usage();
    return CLI_OK;
  }
  if (A.co.threads > 0) {
    char t[16];
    snprintf(t, sizeof t, "%d", A.co.threads);
    setenv("TESSERA_THREADS", t, 1);
    omp_set_num_threads(A.co.threads);
  }
  ts_context *ctx = NULL;
  ts_status s = ts_context_create(&ctx, A.co.threads);
  if (s != TS_OK) return cli_fail(CMD, s);
  planned P;
  memset(&P, 0, sizeof P);
  P.threads = ts_context_threads(ctx);
  P.d = (int)A.d;
  rc = A.bench ? cmd_bench(&A, &P, ctx) : cmd_plan(&A, &P);
  planned_free(&P);
  ts_context_destroy(ctx);
  return rc;
}
