/* tessera attn: tile-aware sparse attention from the command line.
 *   attn plan   mask -> reorder -> dense blocks -> scheduler (greedy | ILP) -> plan JSON, cached under
 *               <cache>/attn-plan/<key>.json (a cached plan is loaded instead of solved again)
 *   attn bench  the same planning, then every baseline and both schedules timed in one process on
 *               the same random Q/K/V (fixed seed), error checked against the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_attn.h"

static void usage(void) {
  printf("usage: tessera attn plan  (--pattern SPEC | --mask FILE) --heads H --head-dim D [--reorder M]\n"
         "                          [--solver ilp|greedy] [--time-limit S] [--dtype f32|bf16] [--out plan.json]\n"
         "                          [--cost analytic|profile] [--profile-level L] [--compact H,..|none]\n"
         "                          [--calibrate on|off] [--guard on|off] [--pass P] [--no-cache] [--threads N] [--json]\n"
         "       tessera attn bench (--pattern SPEC | --mask FILE) --heads H --head-dim D [--dtype f32|bf16]\n"
         "                          [--reorder M] [--batch B] [--threads N] [--repeats R] [--rounds R] [--cpu-clock]\n"
         "                          [--solver ...]\n"
         "                          [--cost analytic|profile] [--profile-level L] [--compact H,..|none]\n"
         "                          [--calibrate on|off] [--guard on|off] [--pass P] [--warm on|off] [--json]\n\n"
         "plan: reorders the mask (--reorder, default auto: the candidate whose 16-row compact passes compute\n"
         "the fewest cells), covers it with dense blocks, and schedules them: per block piece a tile from the\n"
         "menu (8..128 x 16..128) or the panel's compact pass, and a thread per row panel, minimizing the\n"
         "predicted thread makespan (greedy: each piece priced alone + LPT; ilp: the exact model of the\n"
         "keys the compact passes compute, per panel by CBC from the greedy start, then panels to threads,\n"
         "under --time-limit, default 2 s). The plan\n"
         "(schedule + permutation perm[new] = old) goes to <cache>/attn-plan/<key>.json and to --out.\n"
         "bench: times dense flash (64 x 64), fixed-tile block skip at every menu tile on the original and\n"
         "on the reordered mask, and the greedy and ILP schedules (median of --repeats after warm-up, the\n"
         "fastest of --rounds interleaved rounds), and checks the ILP result (in the original token order)\n"
         "against the reference on batch 0, heads 0-1. Then the ILP schedule and the best reordered fixed\n"
         "tile alternate for 21 more rounds of one execute each: the median [quartiles] of their per-round\n"
         "ratio (`paired`, speedup_vs_fixed_best_reordered_paired) is the steadier reading on a shared machine.\n\n"
         "  --pattern SPEC     generated mask, e.g. permute:window2d:h=64,w=64,k=13 ('tessera pattern --help')\n"
         "  --mask FILE        mask file (.npy or .mtx, square)\n"
         "  --heads H          heads (1..4096)          --head-dim D   head dimension (1..4096)\n"
         "  --reorder M        none|rcm|hc|ic|metis|morton|hilbert|raster|auto (auto)\n"
         "  --solver S         ilp|greedy (ilp)         --time-limit S ILP seconds (2)\n"
         "  --dtype T          f32|bf16 (f32)           --batch B      batch (1)\n"
         "  --repeats R        timed runs (5)           --threads N    threads (and the P the schedule balances)\n"
         "  --rounds R         bench: rounds over all methods, each keeping its fastest round (3)\n"
         "  --cpu-clock        bench with --threads 1: time each call by the thread's CPU clock (steadier on a\n"
         "                     shared machine: a preempted call still reads its own run time)\n"
         "  --cost C           the scheduler's block cost: profile (default: this machine's measured tile\n"
         "                     timings for the head dim and dtype, measured once with progress on stderr,\n"
         "                     then read from <cache>/attn-profile/<level>-d<D>-<dtype>-<isa>.json) or analytic\n"
         "                     (the formula ts_attn_cost_default: no measurement)\n"
         "  --profile-level L  quick|standard|full (standard): the profile's grid; quick < 1 s, standard 20-60 s,\n"
         "                     full several minutes (measured once per level, head dim and dtype)\n"
         "  --out FILE         plan: also write the plan JSON here\n"
         "  --calibrate on|off time the pure configurations of this mask (all blocks standalone, everything\n"
         "                     in compact passes of each height; 1 thread, 1 head) and scale each family's\n"
         "                     costs to the measured time before solving, then time the schedule against\n"
         "                     the pure compact passes, the 3 fixed tiles the model ranks first, 16-row DIAG\n"
         "                     passes (sliding windows in the natural order) and the blocks on block-aligned\n"
         "                     panels, and keep whichever is more than 3%% faster (on)\n"
         "  --guard on|off     with --calibrate on: the measured comparison after solving (off: the solved\n"
         "                     schedule as it is, e.g. to time the greedy's and the ILP's own choices) (on)\n"
         "  --compact H,..     row heights the compact passes may use (8,16,32), or none: every block runs\n"
         "                     as its own segment and the residue with a 16 x 32 block-skip tile\n"
         "  --warm on|off      bench: load each panel's new K/V rows and its Q rows before it runs (on; off:\n"
         "                     to compare; the results are bit-identical)\n"
         "  --pass P           forward|backward|train (forward): what the profile (--cost profile), the\n"
         "                     calibration, the guard and bench time: the attention's forward, its backward\n"
         "                     (tessera/attn_train.h), or both (a training step's attention). With backward\n"
         "                     or train, plan solves the schedule for that pass ('re-solved for backward'),\n"
         "                     and bench also times the forward-solved schedule in that pass ('reuse as is'),\n"
         "                     the ILP plan's forward (the backward / forward ratio) and checks dQ, dK, dV\n"
         "  --no-cache         plan: neither read nor write the plan cache\n"
         "  --json             print the report as JSON\n"
         "also accepted: the reordering/blocks options of 'tessera blocks' (--density, --extract, --grid, ...)\n");
}


/* "8,16,32" or "none" into A->heights. */
static bool parse_heights(const char *v, args *A) {
  A->nheights = 0;
  if (strcmp(v, "none") == 0) return true;
  for (const char *p = v; *p;) {
    char *end;
    long h = strtol(p, &end, 10);
    if (end == p || h < 1 || h > TS_ATTN_TILE_MAX || A->nheights == 4 || (*end && *end != ',')) return false;
    A->heights[A->nheights++] = (int32_t)h;
    p = *end ? end + 1 : end;
  }
  return A->nheights > 0;
}

static int parse(int argc, char **argv, args *A) {
  memset(A, 0, sizeof *A);
  rcli_defaults(&A->r, TS_REORDER_AUTO, 64);
  A->batch = 1, A->repeats = 5, A->rounds = 3, A->time_limit = 2.0, A->solver = TS_ATTN_SOLVER_ILP;
  A->level = TS_ATTN_PROFILE_STANDARD;
  A->profile = true; /* the measured model by default (docs/ARCHITECTURE.md, "attention cost model") */
  A->heights[0] = 8, A->heights[1] = 16, A->heights[2] = 32, A->nheights = 3;
  A->calibrate = true;
  A->guard = true;
  A->warm = true;
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
    } else if (strcmp(o, "--rounds") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_parse_int(CMD, o, v, 1, 100, &A->rounds)) return CLI_USAGE;
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
    } else if (strcmp(o, "--calibrate") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) return cli_usage_error(CMD, "--calibrate expects on or off, got '%s'", v);
      A->calibrate = v[1] == 'n';
    } else if (strcmp(o, "--guard") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) return cli_usage_error(CMD, "--guard expects on or off, got '%s'", v);
      A->guard = v[1] == 'n';
    } else if (strcmp(o, "--warm") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) return cli_usage_error(CMD, "--warm expects on or off, got '%s'", v);
      A->warm = v[1] == 'n';
      A->warm_given = true;
    } else if (strcmp(o, "--compact") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (!parse_heights(v, A)) return cli_usage_error(CMD, "--compact expects up to 4 row heights in 1..256 like 8,16,32, or none; got '%s'", v);
    } else if (strcmp(o, "--pass") == 0) {
      if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
      if (ts_attn_pass_parse(v, &A->pass) != TS_OK)
        return cli_usage_error(CMD, "--pass expects forward, backward or train, got '%s'", v);
    } else if (strcmp(o, "--no-cache") == 0) {
      A->no_cache = true;
    } else if (strcmp(o, "--cpu-clock") == 0) {
      A->cpu_clock = true;
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
  if (A->warm_given && !A->bench) return cli_usage_error(CMD, "--warm belongs to 'attn bench'");
  if (A->cpu_clock && (!A->bench || A->co.threads != 1))
    return cli_usage_error(CMD, "--cpu-clock belongs to 'attn bench' with --threads 1");
  return CLI_OK;
}


static void planned_free(planned *P) {
  rcli_input_free(&P->in);
  free(P->perm);
  ts_csr_free(&P->pm);
  ts_bitmap_free(&P->bo), ts_bitmap_free(&P->bp);
  ts_blocks_free(&P->blk);
  ts_attn_schedule_free(&P->greedy), ts_attn_schedule_free(&P->ilp), ts_attn_schedule_free(&P->ilp_fwd);
  ts_attn_cost_model_destroy(P->model);
}

ts_attn_sched_opts attn_cli_sched_opts(const args *A, const planned *P, ts_attn_solver solver) {
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.solver = solver;
  o.threads = P->threads;
  o.time_limit = A->time_limit;
  o.cost_user = (void *)&P->d;
  o.nheights = A->nheights;
  o.calibrate_d = A->calibrate ? A->d : 0;
  o.calibrate_dtype = A->bf16 ? TS_BF16 : TS_F32;
  o.guard = A->guard;
  o.calibrate_pass = A->pass;
  memcpy(o.heights, A->heights, sizeof o.heights);
  if (P->model) o.cost = ts_attn_cost_profiled, o.cost_user = P->model;
  return o;
}

/* --cost profile: the cached profile for this head dim and dtype (measured now when missing or
 * stale; the default menu, which is also the scheduler's) and its cost model. */
int attn_cli_cost_setup(const args *A, planned *P) {
  if (!A->profile) return CLI_OK;
  ts_attn_profile_opts po = ts_attn_profile_opts_default();
  po.level = A->level, po.d = A->d, po.dtype = A->bf16 ? TS_BF16 : TS_F32, po.pass = A->pass;
  ts_attn_profile prof;
  memset(&prof, 0, sizeof prof);
  double t0 = ts_now();
  ts_status s = ts_attn_profile_default_path(&po, P->profile_path, sizeof P->profile_path);
  if (s == TS_OK) s = ts_attn_profile_get(&po, NULL, &prof, &P->profile_measured); /* the artifact at profile_path */
  if (s != TS_OK) return cli_fail(CMD, s);
  snprintf(P->profile_date, sizeof P->profile_date, "%s", prof.prov.date);
  s = ts_attn_cost_model_create(&P->model, &prof);
  ts_attn_profile_free(&prof);
  P->profile_ms = (ts_now() - t0) * 1e3;
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

/* JSON fields naming the cost model. */
void attn_cli_cost_json(cJSON *j, const args *A, const planned *P) {
  cJSON_AddStringToObject(j, "cost", A->profile ? "profile" : "analytic");
  if (!A->profile) return;
  cJSON_AddStringToObject(j, "profile_level", ts_attn_profile_level_name(A->level));
  cJSON_AddStringToObject(j, "profile_path", P->profile_path);
  cJSON_AddStringToObject(j, "profile_date", P->profile_date);
  cJSON_AddBoolToObject(j, "profile_measured", P->profile_measured);
  cJSON_AddNumberToObject(j, "profile_ms", P->profile_ms);
}

/* Load, reorder, permute, extract blocks (no scheduling yet). CLI_OK or the exit code. */
int attn_cli_load_mask(args *A, planned *P) {
  int rc = rcli_load(CMD, &A->r, &P->in);
  if (rc != CLI_OK) return rc;
  if (P->in.m.rows != P->in.m.cols) return cli_usage_error(CMD, "the mask must be square, got %lld x %lld",
                                                          (long long)P->in.m.rows, (long long)P->in.m.cols);
  return CLI_OK;
}

/* Reorder, permute, extract blocks (the mask is loaded). */
int attn_cli_prepare(args *A, planned *P) {
  ts_status s;
  double t0 = ts_now();
  if (!(P->perm = malloc(((size_t)P->in.m.rows + 1) * sizeof *P->perm)))
    return cli_fail(CMD, ts_error(TS_ERR_OOM, "a permutation of %lld", (long long)P->in.m.rows));
  /* attention's own auto: the order whose compact passes compute least (ts_attn_reorder) */
  s = ts_attn_reorder(&P->in.m, &A->r.ro, P->perm, &P->rst);
  P->reorder_ms = (ts_now() - t0) * 1e3;
  if (s == TS_ERR_INVALID_ARG) return cli_usage_error(CMD, "%s", ts_last_error()); /* e.g. morton without a grid */
  if (s != TS_OK) return cli_fail(CMD, s);
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

void attn_cli_info_json(cJSON *j, const ts_attn_sched_info *g, const ts_attn_sched_info *x) {
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
  cJSON_AddBoolToObject(j, "ilp_skipped", x->ilp_skipped);
  if (x->cover_run) { /* the ILP's exact coverage stage; the greedy's solution priced by the same model */
    cJSON_AddNumberToObject(j, "predicted_greedy_exact", x->greedy_makespan);
    cJSON *c = cJSON_AddObjectToObject(j, "cover");
    if (c) {
      cJSON_AddNumberToObject(c, "ms", x->cover_ms);
      cJSON_AddNumberToObject(c, "pieces_fixed", (double)x->cover_fixed);
      cJSON_AddNumberToObject(c, "pieces_free", (double)x->cover_free);
      cJSON_AddNumberToObject(c, "components_enumerated", (double)x->cover_enum);
      cJSON_AddNumberToObject(c, "components_cbc", (double)x->cover_cbc);
      cJSON_AddNumberToObject(c, "cbc_vars", (double)x->cover_cbc_vars);
      cJSON_AddNumberToObject(c, "cbc_seconds", x->cover_cbc_seconds);
      cJSON_AddNumberToObject(c, "cbc_unproven", (double)x->cover_cbc_unproven);
      cJSON_AddNumberToObject(c, "timeouts", (double)x->cover_timeouts);
      cJSON_AddNumberToObject(c, "heights_pruned", (double)x->cover_pruned);
    }
  }
  cJSON_AddBoolToObject(j, "calibrated", x->calibrated);
  if (x->calibrated) {
    cJSON *cs = cJSON_AddArrayToObject(j, "calib_scale");
    for (int h = 0; cs && h < 5; h++) cJSON_AddItemToArray(cs, cJSON_CreateNumber(x->calib_scale[h]));
    cJSON_AddNumberToObject(j, "calib_ms", x->calib_ms);
  }
  cJSON_AddBoolToObject(j, "diag_first", x->diag_first);
  cJSON_AddBoolToObject(j, "guarded", x->guarded);
  if (x->guarded) {
    cJSON_AddNumberToObject(j, "guard_schedule_ms", x->guard_schedule_s * 1e3);
    cJSON_AddNumberToObject(j, "guard_fixed_ms", x->guard_fixed_s * 1e3);
    if (x->guard_diag_s > 0) cJSON_AddNumberToObject(j, "guard_diag_ms", x->guard_diag_s * 1e3);
    else cJSON_AddNullToObject(j, "guard_diag_ms");
    if (x->guard_blocks_s > 0) cJSON_AddNumberToObject(j, "guard_blocks_ms", x->guard_blocks_s * 1e3);
    else cJSON_AddNullToObject(j, "guard_blocks_ms");
    cJSON_AddBoolToObject(j, "block_panels", x->block_panels);
    cJSON_AddBoolToObject(j, "guard_retimed", x->guard_retimed);
    cJSON_AddNumberToObject(j, "guard_ms", x->guard_ms);
    if (x->fallback.br > 0) { /* "fixed 16x16" (block skip) or "compact 16x64" (every panel one pass) */
      char tb[48];
      const ts_attn_seg_kind fk = (ts_attn_seg_kind)x->fallback_kind;
      const char *kind = fk == TS_ATTN_SEG_MIXED ? "fixed" : ts_attn_seg_kind_name(fk);
      snprintf(tb, sizeof tb, "%s %dx%d", kind, x->fallback.br, x->fallback.bc);
      cJSON_AddStringToObject(j, "fallback", tb);
      cJSON_AddNumberToObject(j, "guard_fallback_ms", x->guard_fallback_s * 1e3);
    } else {
      cJSON_AddNullToObject(j, "fallback");
    }
  }
  cJSON_AddNumberToObject(j, "merged_pieces", (double)x->merged);
  cJSON_AddNumberToObject(j, "compact_panels", (double)x->compact_panels);
  cJSON_AddNumberToObject(j, "greedy_merged_pieces", (double)g->merged);
  cJSON_AddNumberToObject(j, "greedy_compact_panels", (double)g->compact_panels);
}

/* "8:12 16:28" -- panels running a compact pass of each row height ("none" when no panel does). */
void attn_cli_compact_heights(const ts_attn_schedule *s, char *buf, size_t cap) {
  int32_t h[8];
  int64_t cnt[8];
  int nh = 0;
  for (int64_t k = 0; k < s->nsegs; k++) {
    if (s->segs[k].kind != TS_ATTN_SEG_COMPACT) continue;
    int x = 0;
    while (x < nh && h[x] != s->segs[k].br) x++;
    if (x == nh && nh < 8) h[nh] = s->segs[k].br, cnt[nh++] = 0;
    if (x < nh) cnt[x]++;
  }
  size_t len = 0;
  buf[0] = 0;
  for (int x = 0; x < nh && len < cap; x++) len += (size_t)snprintf(buf + len, cap - len, "%s%d:%lld", x ? " " : "", h[x], (long long)cnt[x]);
  if (!nh) snprintf(buf, cap, "none");
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
  len += (size_t)snprintf(buf + len, cap - len, " calibrate=%d guard=%d order=attn compact=", A->calibrate, A->guard);
  for (int h = 0; h < A->nheights && len < cap; h++) len += (size_t)snprintf(buf + len, cap - len, "%s%d", h ? "," : "", A->heights[h]);
  if (A->pass != TS_ATTN_PASS_FORWARD && len < cap) /* (forward plans keep their keys from before passes) */
    len += (size_t)snprintf(buf + len, cap - len, " pass=%s", ts_attn_pass_name(A->pass));
  if (A->profile)
    snprintf(buf + len, cap - len, " cost=profile level=%s date=%s", ts_attn_profile_level_name(A->level), P->profile_date);
  else
    snprintf(buf + len, cap - len, " cost=analytic");
}

/* Cache lookup by the request's source key (ts_attn_plan_cache_find: the plan must record that
 * key). true on a hit; a refused entry is reported on stderr. */
static bool cache_lookup(planned *P, const char src[17], char key[17], char *path, size_t cap) {
  ts_attn_plan_desc fd;
  int32_t *perm = NULL;
  ts_status st = ts_attn_plan_cache_find(src, key, &fd, &perm, &P->ilp);
  if (st == TS_ERR_NOT_FOUND) return false;
  bool ok = st == TS_OK && perm && ts_attn_plan_cache_path(key, path, cap) == TS_OK;
  if (ok && (P->perm = malloc((size_t)P->in.m.rows * sizeof *P->perm)))
    memcpy(P->perm, perm, (size_t)P->in.m.rows * sizeof *perm);
  ok = ok && P->perm;
  if (ok) ts_reorder_method_parse(fd.reorder, &P->rst.method);
  ts_free(perm);
  if (!ok) {
    fprintf(stderr, "tessera attn: ignoring the cached plan: it does not match this request (%s)\n",
            st == TS_OK ? "no permutation" : ts_last_error());
    ts_attn_schedule_free(&P->ilp);
  }
  return ok;
}

static int cmd_plan(args *A, planned *P) {
  int rc = attn_cli_load_mask(A, P);
  if (rc == CLI_OK) rc = attn_cli_cost_setup(A, P);
  if (rc != CLI_OK) return rc;
  ts_attn_plan_desc desc;
  char key[17], src[17], path[4200], opts[1024];
  ts_status s;
  bool cached = false;
  double t0 = ts_now(), load_ms = 0;
  if (!A->no_cache) {
    desc_of(A, P, A->solver, &desc);
    snprintf(desc.reorder, sizeof desc.reorder, "%s", ts_reorder_method_name(A->r.ro.method)); /* requested */
    options_text(A, P, opts, sizeof opts);
    if ((s = ts_attn_plan_source_key(&P->in.m, opts, &desc, src)) != TS_OK) return cli_fail(CMD, s);
    cached = cache_lookup(P, src, key, path, sizeof path);
    load_ms = (ts_now() - t0) * 1e3;
  }
  if (cached) {
    desc_of(A, P, A->solver, &desc);
  } else {
    if ((rc = attn_cli_prepare(A, P)) != CLI_OK) return rc;
    desc_of(A, P, A->solver, &desc);
    if ((s = ts_attn_plan_key(&P->pm, P->perm, &desc, key)) != TS_OK || (s = ts_attn_plan_cache_path(key, path, sizeof path)) != TS_OK)
      return cli_fail(CMD, s);
    ts_attn_sched_opts o = attn_cli_sched_opts(A, P, A->solver);
    t0 = ts_now();
    if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->ilp, &P->ii)) != TS_OK) return cli_fail(CMD, s);
    P->solve_ms = (ts_now() - t0) * 1e3;
    if (!A->no_cache && (s = ts_attn_plan_cache_store(src, key, &desc, P->perm, &P->ilp, &P->ii)) != TS_OK)
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
    attn_cli_cost_json(j, A, P);
    if (!cached) attn_cli_info_json(j, &P->ii, &P->ii);
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
      if (P->ii.cover_run)
        printf("cover      exact compact-pass model: %lld components enumerated, %lld by CBC (%.2f s, %lld unproven), "
               "%lld left at the warm start, %lld heights skipped by the bound; %.0f ms\n",
               (long long)P->ii.cover_enum, (long long)P->ii.cover_cbc, P->ii.cover_cbc_seconds, (long long)P->ii.cover_cbc_unproven,
               (long long)P->ii.cover_timeouts, (long long)P->ii.cover_pruned, P->ii.cover_ms);
      if (P->ii.diag_first)
        printf("diag       16-row DIAG passes ran faster than the greedy's schedule before the ILP's coverage stage: "
               "stage skipped\n");
      if (P->ii.guarded) {
        const int fk = P->ii.fallback_kind;
        const char *kind = P->ii.block_panels        ? "block-aligned panels, tiles"
                           : fk == TS_ATTN_SEG_MIXED ? "fixed tiles"
                           : fk == TS_ATTN_SEG_DIAG  ? "diag passes"
                                                     : "compact passes";
        char tb[48] = "";
        if (P->ii.fallback.br > 0) snprintf(tb, sizeof tb, "%s %dx%d", kind, P->ii.fallback.br, P->ii.fallback.bc);
        printf("guard      %s%s (solved schedule %.3f ms, best fixed tile %.3f ms",
               P->ii.fallback.br > 0 ? "replaced by " : "kept the solved schedule", tb, P->ii.guard_schedule_s * 1e3,
               P->ii.guard_fixed_s * 1e3);
        if (P->ii.guard_diag_s > 0) printf(", diag passes %.3f ms", P->ii.guard_diag_s * 1e3);
        if (P->ii.guard_blocks_s > 0) printf(", block-aligned panels %.3f ms", P->ii.guard_blocks_s * 1e3);
        printf("; 1 head, 1 thread%s)\n", P->ii.guard_retimed ? "; a near tie, timed again" : "");
      }
      printf("solve      %.1f ms\n", P->solve_ms);
      if (!A->no_cache) printf("cached     %s\n", path);
    }
    if (A->out) printf("wrote      %s\n", A->out);
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
  cli_apply_threads(A.co.threads);
  ts_context *ctx = NULL;
  ts_status s = ts_context_create(&ctx, A.co.threads);
  if (s != TS_OK) return cli_fail(CMD, s);
  planned P;
  memset(&P, 0, sizeof P);
  P.threads = ts_context_threads(ctx);
  P.d = (int)A.d;
  rc = A.bench ? attn_cli_bench(&A, &P, ctx) : cmd_plan(&A, &P);
  planned_free(&P);
  ts_context_destroy(ctx);
  return rc;
}
