/* tessera attn bench: the planning of `attn plan`, then every baseline and both schedules timed in
 * one process on the same random Q/K/V (fixed seed), in interleaved rounds, and the error checked
 * against the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_report.h"
#include "cmd_attn.h"
#include "tessera/hwinfo.h"
#include "tessera/measure.h"


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

static void run_fn(void *p);
static ts_status run_measured(void *p) {
  run_fn(p);
  return TS_OK;
}

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

/* Plans s on mask, times it; ms < 0 on failure (status returned). stats (may be NULL): the plan's. */
static ts_status time_schedule(const args *A, const ts_context *ctx, const ts_attn_schedule *s, const ts_bitmap *mask,
                               const tensors *T, bool permuted, double *ms, double *work_ratio, double *create_ms,
                               ts_attn_stats *stats) {
  ts_attn_plan *pl;
  double t0 = ts_now();
  TS_TRY(ts_attn_plan_create(&pl, ctx, s, mask, T->d));
  ts_attn_plan_set_warm(pl, A->warm);
  if (create_ms) *create_ms = (ts_now() - t0) * 1e3;
  ts_attn_stats st;
  ts_attn_plan_stats(pl, &st);
  *work_ratio = st.work_ratio;
  if (stats) *stats = st;
  run_arg ra = {ctx, pl, T, permuted, A->bf16};
  ts_status stt = TS_OK;
  /* one thread: its CPU time per call (--cpu-clock), else the wall clock; median of --repeats after
   * a warm-up */
  ts_measure_opts mo = ts_measure_opts_default();
  mo.clock = A->cpu_clock ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL;
  mo.warmup = 1, mo.rounds = mo.max_rounds = (int)A->repeats, mo.min_time_s = 0;
  ts_measure_result mr;
  stt = ts_measure_one(run_measured, &ra, &mo, &mr);
  *ms = mr.s.median * 1e3;
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

/* Paired rounds: schedules a (the ILP's) and b (the best fixed tile on the same order) planned on
 * mask, then `rounds` rounds of one execute each, the order alternating, after one warm-up each;
 * q[0..2] = quartile 1, median, quartile 3 of the per-round ratio t_b / t_a. Within a round a
 * shared machine's drift hits both alike, where the fastest-of-rounds figures above can each come
 * from a different minute. */
#define PAIRED_ROUNDS 21
static ts_status paired_ratio(const args *A, const ts_context *ctx, const ts_attn_schedule *a, const ts_attn_schedule *b,
                              const ts_bitmap *mask, const tensors *T, double q[3]) {
  ts_attn_plan *pl[2] = {NULL, NULL};
  ts_status st = ts_attn_plan_create(&pl[0], ctx, a, mask, T->d);
  if (st == TS_OK) st = ts_attn_plan_create(&pl[1], ctx, b, mask, T->d);
  run_arg ra[2] = {{ctx, pl[0], T, true, A->bf16}, {ctx, pl[1], T, true, A->bf16}};
  for (int k = 0; k < 2 && st == TS_OK; k++) ts_attn_plan_set_warm(pl[k], A->warm);
  if (st == TS_OK) {
    ts_measure_fn fn[2] = {run_measured, run_measured};
    void *arg[2] = {&ra[0], &ra[1]};
    ts_measure_opts mo = ts_measure_opts_default();
    mo.clock = A->cpu_clock ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL;
    mo.warmup = 1, mo.rounds = mo.max_rounds = PAIRED_ROUNDS, mo.min_time_s = 0, mo.alternate = true;
    ts_measure_result mr[2];
    st = ts_measure_run(2, fn, arg, &mo, mr, NULL);
    q[0] = mr[1].ratio_q1, q[1] = mr[1].ratio, q[2] = mr[1].ratio_q3;
  }
  ts_attn_plan_destroy(pl[0]);
  ts_attn_plan_destroy(pl[1]);
  return st;
}

/* Max |O_ilp - O_ref| over batch 0, heads [0, hs), in the original token order; *rel: over max |V|. */
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

/* What `attn bench` measured, from the timed rounds to the report. */
typedef struct bench_res {
  method dense, fb, f64, fbr, gr, il; /* fb / fbr: the fastest fixed tile in the original / reordered order */
  double create_ms;                   /* the ilp plan's ts_attn_plan_create, round 0 */
  ts_attn_stats ist;                  /* the ilp plan's work counters */
  double pq[3];                       /* ilp against fixed_best_reordered, paired per round */
  int64_t hs;                         /* heads the error is checked on */
  double err, rel;
  ts_pattern_metrics mb, ma;          /* 64-tiles before and after the reordering */
} bench_res;

/* The pattern, its costs and order, and both schedules: the --solver's and the greedy's under the
 * very same costs. CLI_OK or the exit code. */
static int bench_schedules(args *A, planned *P) {
  int rc = attn_cli_load_mask(A, P);
  if (rc == CLI_OK) rc = attn_cli_cost_setup(A, P);
  if (rc == CLI_OK) rc = attn_cli_prepare(A, P);
  if (rc != CLI_OK) return rc;
  ts_status s;
  ts_attn_sched_opts o = attn_cli_sched_opts(A, P, A->solver);
  double t0 = ts_now();
  if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->ilp, &P->ii)) != TS_OK) return cli_fail(CMD, s);
  P->solve_ms = (ts_now() - t0) * 1e3;
  /* greedy under the very same costs: the calibration's scales, not a second measurement */
  o = attn_cli_sched_opts(A, P, TS_ATTN_SOLVER_GREEDY);
  o.family_given = true;
  memcpy(o.family_scale, P->ii.calib_scale, sizeof o.family_scale);
  t0 = ts_now();
  if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->greedy, &P->gi)) != TS_OK) return cli_fail(CMD, s);
  P->greedy_ms = (ts_now() - t0) * 1e3;
  return CLI_OK;
}

/* Rounds: every method is timed once per round (median of --repeats) and keeps its fastest
 * round, so a burst of load on a shared machine hits one method's round, not its figure. Round 0
 * times every menu tile; later rounds only the 3 fastest of each order. */
static ts_status bench_rounds(const args *A, const planned *P, const ts_context *ctx, const tensors *T, bench_res *B) {
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu);
  B->dense = (method){"dense_flash", INFINITY, 0, 64, 64}, B->fb = (method){"fixed_best", INFINITY, 0, 0, 0};
  B->f64 = (method){"fixed_64", 0, 0, 64, 64}, B->fbr = (method){"fixed_best_reordered", INFINITY, 0, 0, 0};
  B->gr = (method){"greedy", INFINITY, 0, 0, 0}, B->il = (method){"ilp", INFINITY, 0, 0, 0};
  method fam[2][TS_ATTN_PROFILE_MAX_MENU]; /* fixed tiles: [0] original order, [1] reordered */
  ts_attn_schedule sch;
  ts_status s = TS_OK;
  for (int round = 0; round < A->rounds && s == TS_OK; round++) {
    double ms = INFINITY, work = 0;
    if ((s = ts_attn_schedule_dense(&sch, T->n, 64, 64)) == TS_OK) {
      s = time_schedule(A, ctx, &sch, &P->bo, T, false, &ms, &work, NULL, NULL);
      ts_attn_schedule_free(&sch);
      B->dense.ms = ms < B->dense.ms ? ms : B->dense.ms, B->dense.work = work;
    }
    for (int pass = 0; pass < 2 && s == TS_OK; pass++) /* 0: original order, 1: reordered */
      for (int t = 0; t < nmenu && s == TS_OK; t++) {
        method *m = &fam[pass][t];
        if (round == 0) *m = (method){pass ? "fixed_best_reordered" : "fixed_best", INFINITY, 0, menu[t].br, menu[t].bc};
        int faster = 0;
        for (int u = 0; round > 0 && u < nmenu; u++) faster += fam[pass][u].ms < m->ms;
        if (round > 0 && faster >= 3 && !(pass == 0 && menu[t].br == 64 && menu[t].bc == 64)) continue;
        if ((s = ts_attn_schedule_blockskip(&sch, T->n, menu[t].br, menu[t].bc)) != TS_OK) break;
        s = time_schedule(A, ctx, &sch, pass ? &P->bp : &P->bo, T, pass == 1, &ms, &m->work, NULL, NULL);
        ts_attn_schedule_free(&sch);
        m->ms = ms < m->ms ? ms : m->ms;
      }
    if (s == TS_OK) s = time_schedule(A, ctx, &P->greedy, &P->bp, T, true, &ms, &B->gr.work, NULL, NULL);
    B->gr.ms = ms < B->gr.ms ? ms : B->gr.ms;
    if (s == TS_OK) s = time_schedule(A, ctx, &P->ilp, &P->bp, T, true, &ms, &B->il.work, round ? NULL : &B->create_ms, &B->ist);
    B->il.ms = ms < B->il.ms ? ms : B->il.ms;
  }
  for (int t = 0; t < nmenu && s == TS_OK; t++) {
    if (fam[0][t].ms < B->fb.ms) B->fb = fam[0][t];
    if (fam[1][t].ms < B->fbr.ms) B->fbr = fam[1][t];
    if (menu[t].br == 64 && menu[t].bc == 64) B->f64.ms = fam[0][t].ms, B->f64.work = fam[0][t].work;
  }
  return s;
}

/* After the rounds: the paired ratio against the best reordered fixed tile, the error against the
 * reference, and the tile counts before and after the reordering. */
static ts_status bench_checks(const args *A, const planned *P, const ts_context *ctx, const tensors *T, bench_res *B) {
  ts_status s = TS_OK;
  ts_attn_schedule sch;
  B->pq[0] = B->pq[1] = B->pq[2] = NAN;
  if (B->fbr.br > 0 && (s = ts_attn_schedule_blockskip(&sch, T->n, B->fbr.br, B->fbr.bc)) == TS_OK) {
    s = paired_ratio(A, ctx, &P->ilp, &sch, &P->bp, T, B->pq);
    ts_attn_schedule_free(&sch);
  }
  B->hs = A->heads < 2 ? A->heads : 2;
  B->err = B->rel = NAN;
  if (s == TS_OK) s = check_error(A, ctx, P, T, B->hs, &B->err, &B->rel);
  if (s == TS_OK) s = ts_pattern_metrics_compute(&P->in.m, NULL, NULL, 64, &B->mb);
  if (s == TS_OK) s = ts_pattern_metrics_compute(&P->pm, NULL, NULL, 64, &B->ma);
  return s;
}

static void bench_json(const args *A, const planned *P, const bench_res *B, double gflops, double pct) {
  const method *all[] = {&B->dense, &B->fb, &B->f64, &B->fbr, &B->gr, &B->il};
  const double nnz = (double)P->in.m.nnz, n = (double)P->in.m.rows, il_ms = B->il.ms;
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
  cJSON_AddNumberToObject(j, "rounds", (double)A->rounds);
  cJSON_AddStringToObject(j, "clock", A->cpu_clock ? "thread_cpu" : "wall");
  cJSON_AddStringToObject(j, "reorder", ts_reorder_method_name(P->rst.method));
  cJSON_AddBoolToObject(j, "warm", A->warm);
  attn_cli_cost_json(j, A, P);
  cJSON_AddNumberToObject(j, "tiles_empty", (double)B->ma.tiles_empty);
  cJSON_AddNumberToObject(j, "tiles_mixed", (double)B->ma.tiles_mixed);
  cJSON_AddNumberToObject(j, "tiles_full", (double)B->ma.tiles_full);
  cJSON_AddNumberToObject(j, "tiles_empty_before", (double)B->mb.tiles_empty);
  cJSON_AddNumberToObject(j, "tiles_mixed_before", (double)B->mb.tiles_mixed);
  cJSON_AddNumberToObject(j, "tiles_full_before", (double)B->mb.tiles_full);
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
    cJSON_AddNumberToObject(j, all[k]->name, all[k]->ms);
    cJSON_AddNumberToObject(w, all[k]->name, all[k]->work);
  }
  char tb[32];
  snprintf(tb, sizeof tb, "%dx%d", B->fb.br, B->fb.bc);
  cJSON_AddStringToObject(j, "fixed_best_tile", tb);
  snprintf(tb, sizeof tb, "%dx%d", B->fbr.br, B->fbr.bc);
  cJSON_AddStringToObject(j, "fixed_best_reordered_tile", tb);
  cJSON_AddNumberToObject(j, "speedup_vs_fixed_best", B->fb.ms / il_ms);
  cJSON_AddNumberToObject(j, "speedup_vs_fixed_64", B->f64.ms / il_ms);
  cJSON_AddNumberToObject(j, "speedup_vs_fixed_best_reordered", B->fbr.ms / il_ms);
  cJSON *pj = cJSON_AddObjectToObject(j, "speedup_vs_fixed_best_reordered_paired");
  cJSON_AddNumberToObject(pj, "rounds", PAIRED_ROUNDS);
  cJSON_AddNumberToObject(pj, "q25", B->pq[0]);
  cJSON_AddNumberToObject(pj, "median", B->pq[1]);
  cJSON_AddNumberToObject(pj, "q75", B->pq[2]);
  cJSON_AddNumberToObject(j, "speedup_vs_dense_flash", B->dense.ms / il_ms);
  cJSON_AddItemToObject(j, "work_ratio", w);
  /* the ilp plan: P V work after the COMPACT skip lists, and sub-tiles whose keys are listed one by one */
  cJSON_AddNumberToObject(j, "pv_work_ratio_ilp", B->ist.nnz ? (double)B->ist.pv_cells / (double)B->ist.nnz : 0.0);
  cJSON_AddNumberToObject(j, "tiles_keyed_ilp", (double)B->ist.tiles_keyed);
  cJSON_AddNumberToObject(j, "plan_ms", P->reorder_ms + P->blocks_ms + P->solve_ms);
  cJSON_AddNumberToObject(parts, "reorder_ms", P->reorder_ms);
  cJSON_AddNumberToObject(parts, "blocks_ms", P->blocks_ms);
  cJSON_AddNumberToObject(parts, "solve_ms", P->solve_ms);
  cJSON_AddNumberToObject(parts, "greedy_solve_ms", P->greedy_ms);
  cJSON_AddNumberToObject(parts, "plan_create_ms", B->create_ms);
  cJSON_AddItemToObject(j, "plan_parts", parts);
  attn_cli_info_json(j, &P->gi, &P->ii);
  char hb[128];
  attn_cli_compact_heights(&P->greedy, hb, sizeof hb);
  cJSON_AddStringToObject(j, "greedy_compact_heights", hb);
  attn_cli_compact_heights(&P->ilp, hb, sizeof hb);
  cJSON_AddStringToObject(j, "ilp_compact_heights", hb);
  cJSON_AddNumberToObject(j, "max_abs_err", B->err);
  cJSON_AddNumberToObject(j, "max_rel_err", B->rel);
  char sub[64];
  snprintf(sub, sizeof sub, "batch 0, heads 0-%lld (original token order)", (long long)B->hs - 1);
  cJSON_AddStringToObject(j, "err_subset", sub);
  cJSON_AddNumberToObject(j, "gflops_effective", gflops);
  bench_json_num(j, "pct_peak", pct);
  cli_print_json(j);
}

static void bench_text(const args *A, const planned *P, const bench_res *B, double gflops, double pct) {
  const method *all[] = {&B->dense, &B->fb, &B->f64, &B->fbr, &B->gr, &B->il};
  const double nnz = (double)P->in.m.nnz, n = (double)P->in.m.rows;
  const ts_attn_sched_info *ii = &P->ii;
  printf("pattern  %s: n = %lld, density %.4f; %s reorder; %lld x %lld x %lld (batch x heads x d) %s, %d threads\n",
         P->in.name, (long long)n, nnz / (n * n), ts_reorder_method_name(P->rst.method), (long long)A->batch,
         (long long)A->heads, (long long)A->d, A->bf16 ? "bf16" : "f32", P->threads);
  if (A->profile)
    printf("cost     profile %s (%s)\n", ts_attn_profile_level_name(A->level), P->profile_path);
  else
    printf("cost     analytic\n");
  printf("tiles64  before: %lld empty %lld mixed %lld full; after: %lld empty %lld mixed %lld full\n",
         (long long)B->mb.tiles_empty, (long long)B->mb.tiles_mixed, (long long)B->mb.tiles_full, (long long)B->ma.tiles_empty,
         (long long)B->ma.tiles_mixed, (long long)B->ma.tiles_full);
  printf("%-22s %8s %10s %10s %10s\n", "method", "tile", "ms", "vs ilp", "work");
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
    char tb[16] = "varied";
    if (all[k]->br) snprintf(tb, sizeof tb, "%dx%d", all[k]->br, all[k]->bc);
    printf("%-22s %8s %10.3f %9.2fx %10.3f\n", all[k]->name, tb, all[k]->ms, all[k]->ms / B->il.ms, all[k]->work);
  }
  printf("plan     %.1f ms (reorder %.1f, blocks %.1f, %s solve %.1f); predicted makespan greedy %.4g, ilp %.4g (%s)\n",
         P->reorder_ms + P->blocks_ms + P->solve_ms, P->reorder_ms, P->blocks_ms, ts_attn_solver_name(A->solver), P->solve_ms,
         P->gi.makespan, ii->makespan,
         ii->ilp_run ? ts_ilp_status_name(ii->ilp_status) : ii->diag_first ? "ilp not run: diag passes won first" : "ilp not run");
  if (ii->guarded && ii->fallback.br > 0)
    printf("guard    the solved schedule (%.3f ms, 1 head, 1 thread) was replaced by %s %dx%d (%.3f ms%s)\n",
           ii->guard_schedule_s * 1e3,
           ii->block_panels                          ? "block-aligned panels, tiles"
           : ii->fallback_kind == TS_ATTN_SEG_COMPACT ? "compact passes"
           : ii->fallback_kind == TS_ATTN_SEG_DIAG    ? "diag passes"
                                                      : "fixed tiles",
           ii->fallback.br, ii->fallback.bc, ii->guard_fallback_s * 1e3, ii->guard_retimed ? "; a near tie, timed again" : "");
  else if (ii->guarded)
    printf("guard    kept the solved schedule (%.3f ms against %.3f for the best fixed tile; 1 head, 1 thread%s)\n",
           ii->guard_schedule_s * 1e3, ii->guard_fixed_s * 1e3, ii->guard_retimed ? "; a near tie, timed again" : "");
  printf("paired   ilp vs fixed_best_reordered (%dx%d), %d rounds of one execute each: %.2fx [%.2f, %.2f]\n", B->fbr.br,
         B->fbr.bc, PAIRED_ROUNDS, B->pq[1], B->pq[0], B->pq[2]);
  printf("ilp      %.2f GFLOP/s effective (%.1f%% of peak), max |err| %.3g (%.3g of max|V|) on batch 0, heads 0-%lld\n",
         gflops, pct, B->err, B->rel, (long long)B->hs - 1);
}

int attn_cli_bench(args *A, planned *P, const ts_context *ctx) {
  int rc = bench_schedules(A, P);
  if (rc != CLI_OK) return rc;
  tensors T;
  if ((rc = bench_alloc(A, P, &T)) != CLI_OK) {
    bench_free(&T);
    return rc;
  }
  bench_res B;
  memset(&B, 0, sizeof B);
  ts_status s = bench_rounds(A, P, ctx, &T, &B);
  if (s == TS_OK) s = bench_checks(A, P, ctx, &T, &B);
  bench_free(&T);
  if (s != TS_OK) return cli_fail(CMD, s);
  ts_machine_profile prof;
  bool have_prof = ts_hwinfo_get(ctx, &prof) == TS_OK; /* the profile for this run's threads */
  double flops = 4.0 * (double)A->d * (double)P->in.m.nnz * (double)A->heads * (double)A->batch;
  double gflops = flops / (B.il.ms * 1e-3) / 1e9, pct = have_prof ? (prof.peak_gflops_fp32 > 0 ? 100.0 * gflops / prof.peak_gflops_fp32 : NAN) : NAN;
  if (A->co.json) bench_json(A, P, &B, gflops, pct);
  else bench_text(A, P, &B, gflops, pct);
  return CLI_OK;
}
