/* Attention backward (tessera/attn_train.h) beside its forward on one plan (a plan file from
 * `tessera attn plan --out`, or `FILE@fixed:BRxBC` for a fixed tile on the plan's order): per round,
 * in rotating order, one call each of the forward (ts_attn_execute), the training forward (lse, and
 * with --scores the stored scores), the backward with PARTIALS and with ATOMIC reductions (and with
 * --scores the PARTIALS backward reading the stored scores). Reports median ms, GFLOP/s on the mask's
 * nonzeros (forward 4d flops per allowed cell, backward 10d: S recomputed 2d, dP 2d, dQ, dK, dV 2d
 * each; 8d with stored scores) and on computed cells, and per-round median [quartiles] of backward /
 * forward and partials / atomic. Wall clock (ts_now), or with --cpu-clock (one thread only) the
 * thread's CPU time, which a busy machine's other processes disturb less.
 *
 *   bench_attn_bwd --plan FILE --pattern SPEC [--heads 8] [--threads 2] [--rounds 11] [--dtype f32|bf16]
 *                  [--scores] [--cpu-clock] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_attn.h"
#include "tessera/attn_train.h"

#define D 64
enum { FWD, TRAIN, BWD_P, BWD_A, BWD_S, NK };
static const char *const g_names[NK] = {"forward", "forward_train", "backward_partials", "backward_atomic",
                                        "backward_partials_scores"};

typedef struct env {
  const ts_context *ctx;
  ts_attn_plan *pl;
  ts_attn_bwd *b[2];
  const ts_bench_attn_io *io;
  int64_t H;
  float *O, *lse, *sc, *dO, *g[3];
} env;

static ts_status call(env *e, int k) {
  const ts_bench_attn_io *io = e->io;
  const int64_t n = io->n, H = e->H;
  switch (k) {
    case FWD: return ts_bench_attn_io_run(e->ctx, e->pl, io, H, e->O);
    case TRAIN:
      return io->qb ? ts_attn_execute_train_bf16(e->ctx, e->pl, io->qb, io->kb, io->vb, e->O, e->lse, e->sc, 1, H, n, D)
                    : ts_attn_execute_train(e->ctx, e->pl, io->q, io->k, io->v, e->O, e->lse, e->sc, 1, H, n, D);
    default: {
      ts_attn_bwd *b = e->b[k == BWD_A];
      const float *sc = k == BWD_S ? e->sc : NULL;
      return io->qb ? ts_attn_backward_bf16(e->ctx, b, io->qb, io->kb, io->vb, e->O, e->dO, e->lse, sc, e->g[0], e->g[1], e->g[2],
                                            1, H, n, D)
                    : ts_attn_backward(e->ctx, b, io->q, io->k, io->v, e->O, e->dO, e->lse, sc, e->g[0], e->g[1], e->g[2], 1, H,
                                       n, D);
    }
  }
}

static double med(double *x, int r) {
  qsort(x, (size_t)r, sizeof *x, ts_cmp_double);
  return x[r / 2];
}

int main(int argc, char **argv) {
  int threads = 2, rounds = 11, heads = 8;
  bool json = false, bf16 = false, scores = false, cpu = false;
  const char *plan_path = NULL, *spec = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plan") && i + 1 < argc) plan_path = argv[++i];
    else if (!strcmp(argv[i], "--pattern") && i + 1 < argc) spec = argv[++i];
    else if (!strcmp(argv[i], "--heads") && i + 1 < argc) heads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) bf16 = !strcmp(argv[++i], "bf16");
    else if (!strcmp(argv[i], "--scores")) scores = true;
    else if (!strcmp(argv[i], "--cpu-clock")) cpu = true;
    else if (!strcmp(argv[i], "--json")) json = true;
    else return fprintf(stderr, "bench_attn_bwd: unknown option %s\n", argv[i]), 2;
  }
  if (!plan_path || !spec || threads < 1 || threads > 256 || rounds < 3 || rounds > 1000 || heads < 1 || heads > 64 || (cpu && threads != 1))
    return fprintf(stderr, "usage: bench_attn_bwd --plan FILE --pattern SPEC [--heads 1..64] [--threads N] [--rounds 3..1000] "
                           "[--dtype f32|bf16] [--scores] [--cpu-clock (with --threads 1)] [--json]\n"), 2;
  ts_context *ctx = NULL;
  env e = {.H = heads};
  int64_t n = 0;
  ts_status st = ts_context_create(&ctx, threads);
  if (st == TS_OK) st = ts_bench_attn_load_plan(plan_path, ctx, spec, D, &e.pl, &n);
  if (st != TS_OK) return fprintf(stderr, "bench_attn_bwd: %s\n", ts_last_error()), 1;
  e.ctx = ctx;
  ts_bench_attn_io io;
  st = ts_bench_attn_io_make(&io, heads, n, D, bf16);
  e.io = &io;
  const size_t ne = (size_t)heads * (size_t)n * D;
  e.O = ts_malloc(ne * 4), e.dO = ts_malloc(ne * 4), e.lse = ts_malloc((size_t)(heads * n) * 4);
  for (int x = 0; x < 3; x++) e.g[x] = ts_malloc(ne * 4);
  if (scores) e.sc = ts_malloc((size_t)(ts_attn_score_floats(e.pl) * heads) * 4);
  float *ref[3] = {ts_malloc(ne * 4), ts_malloc(ne * 4), ts_malloc(ne * 4)};
  double *t[NK], *r_ratio = malloc((size_t)rounds * sizeof(double)), *r_pa = malloc((size_t)rounds * sizeof(double));
  for (int k = 0; k < NK; k++) t[k] = malloc((size_t)rounds * sizeof(double));
  if (st == TS_OK) st = ts_attn_bwd_create(&e.b[0], ctx, e.pl, TS_ATTN_BWD_PARTIALS);
  if (st == TS_OK) st = ts_attn_bwd_create(&e.b[1], ctx, e.pl, TS_ATTN_BWD_ATOMIC);
  if (st != TS_OK || !e.O || !e.dO || !e.lse || !e.g[0] || !e.g[1] || !e.g[2] || (scores && !e.sc) || !ref[0] || !ref[1] ||
      !ref[2] || !r_ratio || !r_pa || !t[NK - 1])
    return fprintf(stderr, "bench_attn_bwd: %s\n", st != TS_OK ? ts_last_error() : "out of memory"), 1;
  for (size_t x = 0; x < ne; x++) e.dO[x] = (float)sin(0.37 * (double)x) * 0.5f;
  const int nk = scores ? NK : BWD_S;
  /* warm-up, and partials against atomic (sums in another order: close, not bitwise) */
  for (int k = 0; k < nk && st == TS_OK; k++) {
    st = call(&e, k);
    if (k == BWD_P)
      for (int x = 0; x < 3; x++) memcpy(ref[x], e.g[x], ne * 4);
  }
  double diff = 0, mag = 0;
  for (int x = 0; x < 3 && st == TS_OK; x++)
    for (size_t i = 0; i < ne; i++) diff = fmax(diff, fabs((double)ref[x][i] - e.g[x][i])), mag = fmax(mag, fabs((double)ref[x][i]));
  for (int i = 0; i < rounds && st == TS_OK; i++)
    for (int j = 0; j < nk && st == TS_OK; j++) {
      const int k = (i + j) % nk;
      const double t0 = cpu ? ts_clock_now(TS_CLOCK_THREAD_CPU) : ts_now();
      st = call(&e, k);
      t[k][i] = (cpu ? ts_clock_now(TS_CLOCK_THREAD_CPU) : ts_now()) - t0;
    }
  if (st != TS_OK) return fprintf(stderr, "bench_attn_bwd: %s\n", ts_last_error()), 1;
  ts_attn_stats S;
  ts_attn_plan_stats(e.pl, &S);
  for (int i = 0; i < rounds; i++) r_ratio[i] = t[BWD_P][i] / t[FWD][i], r_pa[i] = t[BWD_P][i] / t[BWD_A][i];
  qsort(r_ratio, (size_t)rounds, sizeof *r_ratio, ts_cmp_double);
  qsort(r_pa, (size_t)rounds, sizeof *r_pa, ts_cmp_double);
  cJSON *j = json ? cJSON_CreateObject() : NULL;
  if (j) {
    cJSON_AddStringToObject(j, "pattern", spec);
    cJSON_AddStringToObject(j, "plan", plan_path);
    cJSON_AddStringToObject(j, "dtype", bf16 ? "bf16" : "f32");
    cJSON_AddNumberToObject(j, "heads", heads);
    cJSON_AddNumberToObject(j, "threads", threads);
    cJSON_AddNumberToObject(j, "nnz", (double)S.nnz);
    cJSON_AddNumberToObject(j, "cells", (double)S.cells);
  } else {
    printf("%s, plan %s, n %lld, d %d, %d heads, %s, %d threads, %d rounds; nnz %lld, cells %lld (%.2f per allowed cell)\n",
           spec, plan_path, (long long)n, D, heads, bf16 ? "bf16" : "f32", threads, rounds, (long long)S.nnz,
           (long long)S.cells, S.work_ratio);
  }
  for (int k = 0; k < nk; k++) {
    const double per = k <= TRAIN ? 4.0 : k == BWD_S ? 8.0 : 10.0, m = med(t[k], rounds);
    const double gn = per * D * (double)S.nnz * heads / m / 1e9, gc = per * D * (double)S.cells * heads / m / 1e9;
    if (j) {
      cJSON *o = cJSON_AddObjectToObject(j, g_names[k]);
      cJSON_AddNumberToObject(o, "median_ms", m * 1e3);
      cJSON_AddNumberToObject(o, "gflops_nnz", gn);
      cJSON_AddNumberToObject(o, "gflops_cells", gc);
    } else {
      printf("  %-26s %9.3f ms  %7.2f GFLOP/s on nonzeros  %7.2f on computed cells\n", g_names[k], m * 1e3, gn, gc);
    }
  }
  if (j) {
    cJSON_AddNumberToObject(j, "bwd_over_fwd_median", r_ratio[rounds / 2]);
    cJSON_AddNumberToObject(j, "partials_over_atomic_median", r_pa[rounds / 2]);
    cJSON_AddNumberToObject(j, "partials_atomic_max_diff_rel", diff / fmax(mag, 1e-30));
    ts_bench_print_json(j);
    cJSON_Delete(j);
  } else {
    printf("  backward (partials) / forward per round: %.3f [%.3f, %.3f]\n", r_ratio[rounds / 2], r_ratio[rounds / 4],
           r_ratio[3 * rounds / 4]);
    printf("  partials / atomic per round:              %.3f [%.3f, %.3f]\n", r_pa[rounds / 2], r_pa[rounds / 4],
           r_pa[3 * rounds / 4]);
    printf("  max |partials - atomic| / max |grad| = %.3g\n", diff / fmax(mag, 1e-30));
  }
  ts_attn_bwd_destroy(e.b[0]), ts_attn_bwd_destroy(e.b[1]);
  ts_attn_plan_destroy(e.pl);
  ts_context_destroy(ctx);
  ts_bench_attn_io_free(&io);
  ts_free(e.O), ts_free(e.dO), ts_free(e.lse), ts_free(e.sc);
  for (int x = 0; x < 3; x++) ts_free(e.g[x]), ts_free(ref[x]);
  for (int k = 0; k < NK; k++) free(t[k]);
  free(r_ratio), free(r_pa);
  return 0;
}
