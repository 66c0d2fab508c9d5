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
  /* --pass backward|train: dO (original and permuted order, random), lse, the gradients */
  float *dO, *dOp, *lse, *dQ, *dK, *dV;
} tensors;

typedef struct run_arg {
  const ts_context *ctx;
  ts_attn_plan *pl;
  const tensors *T;
  bool permuted, bf16;
  ts_attn_pass pass;
  ts_attn_bwd *bwd; /* backward and train */
} run_arg;

/* The training forward (O and lse) of the arg's plan. */
static ts_status run_train_fwd(const run_arg *r) {
  const tensors *T = r->T;
  if (r->bf16)
    return ts_attn_execute_train_bf16(r->ctx, r->pl, r->permuted ? T->Q16p : T->Q16, r->permuted ? T->K16p : T->K16,
                                      r->permuted ? T->V16p : T->V16, T->O, T->lse, NULL, T->b, T->h, T->n, T->d);
  return ts_attn_execute_train(r->ctx, r->pl, r->permuted ? T->Qp : T->Q, r->permuted ? T->Kp : T->K,
                               r->permuted ? T->Vp : T->V, T->O, T->lse, NULL, T->b, T->h, T->n, T->d);
}

static ts_status run_bwd(const run_arg *r) {
  const tensors *T = r->T;
  const float *dO = r->permuted ? T->dOp : T->dO;
  if (r->bf16)
    return ts_attn_backward_bf16(r->ctx, r->bwd, r->permuted ? T->Q16p : T->Q16, r->permuted ? T->K16p : T->K16,
                                 r->permuted ? T->V16p : T->V16, T->O, dO, T->lse, NULL, T->dQ, T->dK, T->dV, T->b, T->h,
                                 T->n, T->d);
  return ts_attn_backward(r->ctx, r->bwd, r->permuted ? T->Qp : T->Q, r->permuted ? T->Kp : T->K, r->permuted ? T->Vp : T->V,
                          T->O, dO, T->lse, NULL, T->dQ, T->dK, T->dV, T->b, T->h, T->n, T->d);
}

/* One call of the arg's pass (a timed candidate). */
static ts_status run_measured(void *p) {
  run_arg *r = p;
  const tensors *T = r->T;
  if (r->pass == TS_ATTN_PASS_BACKWARD) return run_bwd(r);
  if (r->pass == TS_ATTN_PASS_TRAIN) {
    TS_TRY(run_train_fwd(r));
    return run_bwd(r);
  }
  if (r->bf16)
    return ts_attn_execute_bf16(r->ctx, r->pl, r->permuted ? T->Q16p : T->Q16, r->permuted ? T->K16p : T->K16,
                                r->permuted ? T->V16p : T->V16, T->O, T->b, T->h, T->n, T->d);
  return ts_attn_execute(r->ctx, r->pl, r->permuted ? T->Qp : T->Q, r->permuted ? T->Kp : T->K, r->permuted ? T->Vp : T->V,
                         T->O, T->b, T->h, T->n, T->d);
}

/* The arg of plan pl in pass `pass`; for the backward passes its executor, and (backward alone) O and
 * lse from one untimed training forward. Release with arg_done. */
static ts_status arg_init(run_arg *r, const ts_context *ctx, ts_attn_plan *pl, const tensors *T, bool permuted, bool bf16,
                          ts_attn_pass pass) {
  *r = (run_arg){ctx, pl, T, permuted, bf16, pass, NULL};
  if (pass == TS_ATTN_PASS_FORWARD) return TS_OK;
  TS_TRY(ts_attn_bwd_create(&r->bwd, ctx, pl, TS_ATTN_BWD_AUTO));
  ts_status s = run_train_fwd(r);
  if (s != TS_OK) ts_attn_bwd_destroy(r->bwd), r->bwd = NULL;
  return s;
}

static void arg_done(run_arg *r) {
  ts_attn_bwd_destroy(r->bwd);
  r->bwd = NULL;
}

/* Plans s on mask, times it; ms < 0 on failure (status returned). stats (may be NULL): the plan's. */
static ts_status time_schedule_pass(const args *A, const ts_context *ctx, const ts_attn_schedule *s, const ts_bitmap *mask,
                                    const tensors *T, bool permuted, ts_attn_pass pass, double *ms, double *work_ratio,
                                    double *create_ms, ts_attn_stats *stats) {
  ts_attn_plan *pl;
  double t0 = ts_now();
  TS_TRY(ts_attn_plan_create(&pl, ctx, s, mask, T->d));
  ts_attn_plan_set_warm(pl, A->warm);
  if (create_ms) *create_ms = (ts_now() - t0) * 1e3;
  ts_attn_stats st;
  ts_attn_plan_stats(pl, &st);
  *work_ratio = st.work_ratio;
  if (stats) *stats = st;
  run_arg ra;
  ts_status stt = arg_init(&ra, ctx, pl, T, permuted, A->bf16, pass);
  if (stt != TS_OK) {
    ts_attn_plan_destroy(pl);
    return stt;
  }
  /* one thread: its CPU time per call (--cpu-clock), else the wall clock; median of --repeats after
   * a warm-up */
  ts_measure_opts mo = ts_measure_opts_default();
  mo.clock = A->cpu_clock ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL;
  mo.warmup = 1, mo.rounds = mo.max_rounds = (int)A->repeats, mo.min_time_s = 0;
  ts_measure_result mr;
  stt = ts_measure_one(run_measured, &ra, &mo, &mr);
  if (stt == TS_OK) stt = mr.status;
  *ms = mr.s.median * 1e3;
  arg_done(&ra);
  ts_attn_plan_destroy(pl);
  return stt;
}

/* time_schedule_pass in the bench's pass (--pass). */
static ts_status time_schedule(const args *A, const ts_context *ctx, const ts_attn_schedule *s, const ts_bitmap *mask,
                               const tensors *T, bool permuted, double *ms, double *work_ratio, double *create_ms,
                               ts_attn_stats *stats) {
  return time_schedule_pass(A, ctx, s, mask, T, permuted, A->pass, ms, work_ratio, create_ms, stats);
}

static int bench_alloc(const args *A, const planned *P, tensors *T) {
  memset(T, 0, sizeof *T);
  T->b = A->batch, T->h = A->heads, T->n = P->in.m.rows, T->d = A->d;
  size_t tot = (size_t)(T->b * T->h * T->n * T->d);
  T->Q = ts_malloc(tot * 4), T->K = ts_malloc(tot * 4), T->V = ts_malloc(tot * 4), T->O = ts_malloc(tot * 4);
  T->Qp = ts_malloc(tot * 4), T->Kp = ts_malloc(tot * 4), T->Vp = ts_malloc(tot * 4);
  if (!T->Q || !T->K || !T->V || !T->O || !T->Qp || !T->Kp || !T->Vp) return cli_fail(CMD, TS_ERR_OOM);
  if (A->pass != TS_ATTN_PASS_FORWARD) {
    T->dO = ts_malloc(tot * 4), T->dOp = ts_malloc(tot * 4), T->lse = ts_malloc(tot / (size_t)T->d * 4);
    T->dQ = ts_malloc(tot * 4), T->dK = ts_malloc(tot * 4), T->dV = ts_malloc(tot * 4);
    if (!T->dO || !T->dOp || !T->lse || !T->dQ || !T->dK || !T->dV) return cli_fail(CMD, TS_ERR_OOM);
    ts_rng g;
    ts_rng_seed(&g, 20261207);
    for (size_t i = 0; i < tot; i++) T->dO[i] = ts_rng_normal(&g);
  }
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
      if (T->dO) memcpy(T->dOp + dst, T->dO + src, (size_t)T->d * 4);
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
  ts_free(T->dO), ts_free(T->dOp), ts_free(T->lse), ts_free(T->dQ), ts_free(T->dK), ts_free(T->dV);
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
  run_arg ra[2] = {{0}, {0}};
  for (int k = 0; k < 2 && st == TS_OK; k++) ts_attn_plan_set_warm(pl[k], A->warm);
  for (int k = 0; k < 2 && st == TS_OK; k++) st = arg_init(&ra[k], ctx, pl[k], T, true, A->bf16, A->pass);
  if (st == TS_OK) {
    ts_measure_fn fn[2] = {run_measured, run_measured};
    void *arg[2] = {&ra[0], &ra[1]};
    ts_measure_opts mo = ts_measure_opts_default();
    mo.clock = A->cpu_clock ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL;
    mo.warmup = 1, mo.rounds = mo.max_rounds = PAIRED_ROUNDS, mo.min_time_s = 0, mo.alternate = true;
    ts_measure_result mr[2];
    st = ts_measure_run(2, fn, arg, &mo, mr, NULL);
    for (int k = 0; k < 2 && st == TS_OK; k++) st = mr[k].status;
    q[0] = mr[1].ratio_q1, q[1] = mr[1].ratio, q[2] = mr[1].ratio_q3;
  }
  arg_done(&ra[0]), arg_done(&ra[1]);
  ts_attn_plan_destroy(pl[0]);
  ts_attn_plan_destroy(pl[1]);
  return st;
}

/* Max |X_ilp - X_ref| / max |X_ref| over batch 0, heads [0, hs), in the original token order, of
 * the nx arrays got[] (the plan's, permuted order) against ref[]; the largest over the arrays. */
static double max_rel(const planned *P, const tensors *T, int64_t hs, float *const *got, float *const *ref, int nx,
                      float *scratch) {
  const size_t hsz = (size_t)(T->n * T->d), tot = (size_t)hs * hsz;
  double worst = 0;
  for (int x = 0; x < nx; x++) {
    for (int64_t h = 0; h < hs; h++)
      for (int64_t i = 0; i < T->n; i++) /* scatter: permuted row i is original row perm[i] */
        memcpy(scratch + h * hsz + (size_t)P->perm[i] * T->d, got[x] + h * hsz + (size_t)i * T->d, (size_t)T->d * 4);
    double e = 0, mx = 0;
    for (size_t i = 0; i < tot; i++) {
      double v = fabs((double)scratch[i] - ref[x][i]);
      e = (v > e || isnan(v)) ? (isnan(v) ? INFINITY : v) : e;
      mx = fabs(ref[x][i]) > mx ? fabs(ref[x][i]) : mx;
    }
    e = mx > 0 ? e / mx : e;
    worst = e > worst || isnan(e) ? e : worst;
  }
  return worst;
}

/* The ILP plan's result against the reference on batch 0, heads [0, hs), in the original token
 * order. Forward: *err = max |O - O_ref|, *rel = that over max |V|. Backward passes: *err = *rel =
 * the largest of max |G - G_ref| / max |G_ref| over G = dQ, dK, dV. */
static ts_status check_error(const args *A, const ts_context *ctx, const planned *P, const tensors *T, int64_t hs, double *err,
                             double *rel) {
  ts_attn_plan *pl;
  TS_TRY(ts_attn_plan_create(&pl, ctx, &P->ilp, &P->bp, T->d));
  run_arg ra;
  ts_status s = arg_init(&ra, ctx, pl, T, true, A->bf16, A->pass);
  if (s == TS_OK) s = run_measured(&ra); /* O or the gradients (permuted order) for every batch and head */
  arg_done(&ra);
  ts_attn_plan_destroy(pl);
  TS_TRY(s);
  const size_t hsz = (size_t)(T->n * T->d), tot = (size_t)hs * hsz;
  const int nx = A->pass == TS_ATTN_PASS_FORWARD ? 1 : 3;
  float *ref[3] = {NULL, NULL, NULL}, *scratch = ts_malloc(tot * 4);
  for (int x = 0; x < nx; x++) ref[x] = ts_malloc(tot * 4);
  s = scratch && ref[0] && (nx == 1 || (ref[1] && ref[2])) ? TS_OK : ts_error(TS_ERR_OOM, "attn bench: reference buffers");
  if (s == TS_OK && nx == 1) {
    s = ts_attn_reference(&P->bo, T->Q, T->K, T->V, ref[0], 1, hs, T->n, T->d);
    if (s == TS_OK) {
      float *got[1] = {T->O};
      double vmax = 0;
      for (size_t i = 0; i < tot; i++) vmax = fabs(T->V[i]) > vmax ? fabs(T->V[i]) : vmax;
      double omax = 0;
      for (size_t i = 0; i < tot; i++) omax = fabs(ref[0][i]) > omax ? fabs(ref[0][i]) : omax;
      double e = max_rel(P, T, hs, got, ref, 1, scratch) * (omax > 0 ? omax : 1.0); /* back to absolute */
      *err = e, *rel = vmax > 0 ? e / vmax : e;
    }
  } else if (s == TS_OK) {
    s = ts_attn_reference_backward(&P->bo, T->Q, T->K, T->V, T->dO, ref[0], ref[1], ref[2], 1, hs, T->n, T->d);
    float *got[3] = {T->dQ, T->dK, T->dV};
    if (s == TS_OK) *err = *rel = max_rel(P, T, hs, got, ref, 3, scratch);
  }
  for (int x = 0; x < 3; x++) ts_free(ref[x]);
  ts_free(scratch);
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
  method reuse;                       /* --pass backward|train: the forward-solved ILP schedule in that pass */
  double il_fwd_ms;                   /* --pass backward|train: the ILP plan's forward (ts_attn_execute) */
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
  if (A->pass == TS_ATTN_PASS_FORWARD) return CLI_OK;
  /* "reuse as is": the schedule `attn plan` makes without --pass (forward profile and calibration),
   * from the same order and blocks */
  args F = *A;
  F.pass = TS_ATTN_PASS_FORWARD;
  planned G = *P; /* shares the mask, order and blocks; only its cost model is its own */
  G.model = NULL;
  rc = attn_cli_cost_setup(&F, &G);
  if (rc == CLI_OK) {
    o = attn_cli_sched_opts(&F, &G, A->solver);
    if ((s = ts_attn_schedule_solve(&P->blk, &P->bp, &o, &P->ilp_fwd, &P->fi)) != TS_OK) rc = cli_fail(CMD, s);
  }
  ts_attn_cost_model_destroy(G.model);
  return rc;
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
  B->reuse = (method){"ilp_forward_schedule", INFINITY, 0, 0, 0}, B->il_fwd_ms = INFINITY;
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
    if (A->pass == TS_ATTN_PASS_FORWARD) continue;
    if (s == TS_OK) s = time_schedule(A, ctx, &P->ilp_fwd, &P->bp, T, true, &ms, &B->reuse.work, NULL, NULL);
    B->reuse.ms = ms < B->reuse.ms ? ms : B->reuse.ms;
    if (s == TS_OK) s = time_schedule_pass(A, ctx, &P->ilp, &P->bp, T, true, TS_ATTN_PASS_FORWARD, &ms, &work, NULL, NULL);
    B->il_fwd_ms = ms < B->il_fwd_ms ? ms : B->il_fwd_ms;
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
  cJSON_AddStringToObject(j, "pass", ts_attn_pass_name(A->pass));
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
  if (A->pass != TS_ATTN_PASS_FORWARD) { /* re-solved for this pass against the forward's schedule reused as is */
    cJSON_AddNumberToObject(j, B->reuse.name, B->reuse.ms);
    cJSON_AddNumberToObject(w, B->reuse.name, B->reuse.work);
    cJSON_AddNumberToObject(j, "speedup_vs_forward_schedule", B->reuse.ms / il_ms);
    cJSON_AddNumberToObject(j, "forward_ms_ilp", B->il_fwd_ms);
    cJSON_AddNumberToObject(j, "pass_forward_ratio_ilp", il_ms / B->il_fwd_ms);
  }
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
  char sub[128];
  snprintf(sub, sizeof sub, "batch 0, heads 0-%lld (original token order)%s", (long long)B->hs - 1,
           A->pass == TS_ATTN_PASS_FORWARD ? "" : "; max over dQ, dK, dV of max |err| / max |reference|");
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
  if (A->pass != TS_ATTN_PASS_FORWARD)
    printf("%-22s %8s %10.3f %9.2fx %10.3f\n%s   ilp %.3f ms %s, %.3f ms forward: ratio %.2f\n", B->reuse.name, "varied",
           B->reuse.ms, B->reuse.ms / B->il.ms, B->reuse.work, ts_attn_pass_name(A->pass), B->il.ms,
           ts_attn_pass_name(A->pass), B->il_fwd_ms, B->il.ms / B->il_fwd_ms);
  printf("paired   ilp vs fixed_best_reordered (%dx%d), %d rounds of one execute each: %.2fx [%.2f, %.2f]\n", B->fbr.br,
         B->fbr.bc, PAIRED_ROUNDS, B->pq[1], B->pq[0], B->pq[2]);
  if (A->pass == TS_ATTN_PASS_FORWARD)
    printf("ilp      %.2f GFLOP/s effective (%.1f%% of peak), max |err| %.3g (%.3g of max|V|) on batch 0, heads 0-%lld\n",
           gflops, pct, B->err, B->rel, (long long)B->hs - 1);
  else
    printf("ilp      %.2f GFLOP/s effective (%.1f%% of peak; %s: %dd flops per allowed cell), max |err| of dQ, dK, dV "
           "%.3g of their max on batch 0, heads 0-%lld\n",
           gflops, pct, ts_attn_pass_name(A->pass), A->pass == TS_ATTN_PASS_BACKWARD ? 10 : 14, B->rel, (long long)B->hs - 1);
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
  /* per allowed cell: forward Q K^T + P V = 4d; backward recomputes Q K^T and computes dP = dO V^T,
   * dQ, dK, dV = 10d; a training step both, 14d */
  const double per = A->pass == TS_ATTN_PASS_FORWARD ? 4.0 : A->pass == TS_ATTN_PASS_BACKWARD ? 10.0 : 14.0;
  double flops = per * (double)A->d * (double)P->in.m.nnz * (double)A->heads * (double)A->batch;
  double gflops = flops / (B.il.ms * 1e-3) / 1e9, pct = have_prof ? (prof.peak_gflops_fp32 > 0 ? 100.0 * gflops / prof.peak_gflops_fp32 : NAN) : NAN;
  if (A->co.json) bench_json(A, P, &B, gflops, pct);
  else bench_text(A, P, &B, gflops, pct);
  return CLI_OK;
}
