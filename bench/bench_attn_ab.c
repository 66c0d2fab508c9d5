/* Plans of one mask side by side: each plan file (from `tessera attn plan --out`, or any schedule
 * in the plan format; each in its own token order, on the same random Q, K, V) runs once per round,
 * the order rotating from round to round, for --rounds rounds after a warm-up. Reports per plan the
 * median time, its work ratio, the effective GFLOP/s on the mask's nonzeros (4 d per allowed cell)
 * and % of the hwinfo peak, and the median [quartiles] of the per-round ratio against the first
 * plan (> 1: faster than the first). On a shared machine only such in-process ratios are steady.
 *
 *   bench_attn_ab --pattern SPEC --plans A.json,B.json[,...] [--heads H] [--threads N] [--rounds R]
 *                 [--dtype f32|bf16] [--json]
 *
 * A plan given as A.json@fixed:16x16 runs the block-skip fixed tile 16 x 16 on A's token order (the
 * fixed_best_reordered baseline of `attn bench`), so A.json@fixed:16x16,A.json measures a plan
 * against it round by round. A trailing @nowarm runs the plan with key warming off
 * (ts_attn_plan_set_warm).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_attn.h"

#define D 64
#define MAX_PLANS 8

int main(int argc, char **argv) {
  int threads = 2, rounds = 21, np = 0;
  long H = 8;
  bool json = false, bf16 = false;
  const char *spec = NULL, *paths[MAX_PLANS];
  char *plist = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--pattern") && i + 1 < argc) spec = argv[++i];
    else if (!strcmp(argv[i], "--plans") && i + 1 < argc) plist = argv[++i];
    else if (!strcmp(argv[i], "--heads") && i + 1 < argc) H = atol(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "f32") && strcmp(v, "bf16")) return fprintf(stderr, "bench_attn_ab: --dtype f32|bf16\n"), 2;
      bf16 = v[0] == 'b';
    } else if (!strcmp(argv[i], "--json")) json = true;
    else return fprintf(stderr, "bench_attn_ab: unknown option %s\n", argv[i]), 2;
  }
  for (char *p = plist ? strtok(plist, ",") : NULL; p && np < MAX_PLANS; p = strtok(NULL, ",")) paths[np++] = p;
  if (!spec || np < 1 || H < 1 || H > 64 || threads < 1 || threads > 256 || rounds < 3 || rounds > 1000)
    return fprintf(stderr, "usage: bench_attn_ab --pattern SPEC --plans A.json,B.json[,...] (at most %d) [--heads 1..64] "
                           "[--threads N] [--rounds 3..1000] [--dtype f32|bf16] [--json]\n", MAX_PLANS), 2;
  ts_context *ctx = NULL;
  ts_attn_plan *plan[MAX_PLANS] = {0};
  int64_t n = 0;
  ts_status st = ts_context_create(&ctx, threads);
  for (int p = 0; p < np && st == TS_OK; p++) {
    char path[4096];
    snprintf(path, sizeof path, "%s", paths[p]);
    const size_t len = strlen(path), sl = strlen("@nowarm");
    const bool nowarm = len > sl && !strcmp(path + len - sl, "@nowarm");
    if (nowarm) path[len - sl] = '\0';
    st = ts_bench_attn_load_plan(path, ctx, spec, D, &plan[p], &n);
    if (st == TS_OK && nowarm) ts_attn_plan_set_warm(plan[p], false);
  }
  if (st != TS_OK) return fprintf(stderr, "bench_attn_ab: %s\n", ts_last_error()), 1;
  ts_machine_profile prof;
  const bool have_prof = ts_bench_profile(&prof) == TS_OK;
  ts_bench_attn_io io;
  double *t = malloc((size_t)(np * rounds) * sizeof *t), *r = malloc((size_t)rounds * sizeof *r);
  st = ts_bench_attn_io_make(&io, H, n, D, bf16);
  if (st != TS_OK || !t || !r) return fprintf(stderr, "bench_attn_ab: out of memory\n"), 1;
  for (int p = 0; p < np && st == TS_OK; p++) st = ts_bench_attn_io_run(ctx, plan[p], &io, H, NULL); /* warm-up */
  for (int i = 0; i < rounds && st == TS_OK; i++)
    for (int j = 0; j < np && st == TS_OK; j++) {
      const int p = (i + j) % np; /* rotate which plan goes first */
      const double t0 = ts_clock_now(TS_CLOCK_WALL);
      st = ts_bench_attn_io_run(ctx, plan[p], &io, H, NULL);
      t[p * rounds + i] = ts_clock_now(TS_CLOCK_WALL) - t0;
    }
  if (st != TS_OK) return fprintf(stderr, "bench_attn_ab: %s\n", ts_last_error()), 1;
  cJSON *rows = json ? cJSON_CreateArray() : NULL;
  if (!json)
    printf("%s, d %d, %ld heads, %s, %d threads, %d rounds; ratio = first plan / this plan per round\n", spec, D, H,
           bf16 ? "bf16" : "f32", threads, rounds);
  for (int p = 0; p < np; p++) {
    ts_attn_stats S;
    ts_attn_plan_stats(plan[p], &S);
    for (int i = 0; i < rounds; i++) r[i] = t[i] / t[p * rounds + i];
    qsort(r, (size_t)rounds, sizeof *r, ts_cmp_double);
    qsort(t + p * rounds, (size_t)rounds, sizeof *t, ts_cmp_double);
    const double ms = t[p * rounds + rounds / 2] * 1e3, gf = 4.0 * D * (double)S.nnz * (double)H / (ms * 1e6);
    const double pct = have_prof ? ts_bench_pct_peak_flops(&prof, gf) : NAN;
    if (json) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddStringToObject(j, "plan", paths[p]);
      cJSON_AddStringToObject(j, "pattern", spec);
      cJSON_AddStringToObject(j, "dtype", bf16 ? "bf16" : "f32");
      cJSON_AddNumberToObject(j, "heads", (double)H);
      cJSON_AddNumberToObject(j, "threads", threads);
      cJSON_AddNumberToObject(j, "ms", ms);
      cJSON_AddNumberToObject(j, "work_ratio", S.work_ratio);
      cJSON_AddNumberToObject(j, "gflops_effective", gf);
      if (isfinite(pct)) cJSON_AddNumberToObject(j, "pct_peak", pct);
      cJSON_AddNumberToObject(j, "ratio_q25", r[rounds / 4]);
      cJSON_AddNumberToObject(j, "ratio_median", r[rounds / 2]);
      cJSON_AddNumberToObject(j, "ratio_q75", r[3 * rounds / 4]);
      cJSON_AddItemToArray(rows, j);
    } else {
      printf("  %-40s %8.3f ms  work %.2f  %7.1f GFLOP/s (%4.1f%%)  first/this %.3f [%.3f, %.3f]\n", paths[p], ms,
             S.work_ratio, gf, pct, r[rounds / 2], r[rounds / 4], r[3 * rounds / 4]);
    }
  }
  if (json) {
    ts_bench_print_json(rows);
  }
  cJSON_Delete(rows);
  for (int p = 0; p < np; p++) ts_attn_plan_destroy(plan[p]);
  ts_context_destroy(ctx);
  ts_bench_attn_io_free(&io);
  free(t), free(r);
  return 0;
}
