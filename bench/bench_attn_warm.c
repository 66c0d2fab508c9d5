/* Key warming (ts_attn_plan_set_warm, src/attn/attn_exec.c) on and off, side by side: one plan
 * (a plan file from `tessera attn plan --out`), run with warming off and on in alternating order
 * for --rounds rounds, per head count of --heads. Few heads keep Q, K, V and O in L3 between
 * calls; many heads (4 MB each at n = 4096, d = 64) stream them from memory, as a model's layers
 * do. Reports per head count the median times and the median [quartiles] of the per-round ratio
 * off / on (> 1: warming faster), and checks that both settings give the same output bit for bit.
 *
 *   bench_attn_warm --plan FILE --pattern SPEC [--heads 2,8,...] [--threads N] [--rounds R]
 *                   [--dtype f32|bf16] [--cpu-clock] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "harness_attn.h"

#define D 64
#define MAX_HEADS 16

int main(int argc, char **argv) {
  int threads = 2, rounds = 21, nh = 0;
  long heads[MAX_HEADS];
  bool cpu = false, json = false, bf16 = false;
  const char *plan_path = NULL, *spec = NULL, *hl = "2,8";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plan") && i + 1 < argc) plan_path = argv[++i];
    else if (!strcmp(argv[i], "--pattern") && i + 1 < argc) spec = argv[++i];
    else if (!strcmp(argv[i], "--heads") && i + 1 < argc) hl = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpu-clock")) cpu = true;
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "f32") && strcmp(v, "bf16")) return fprintf(stderr, "bench_attn_warm: --dtype f32|bf16\n"), 2;
      bf16 = v[0] == 'b';
    }
    else if (!strcmp(argv[i], "--json")) json = true;
    else return fprintf(stderr, "bench_attn_warm: unknown option %s\n", argv[i]), 2;
  }
  for (const char *p = hl; *p && nh < MAX_HEADS;) {
    char *e;
    heads[nh] = strtol(p, &e, 10);
    if (e == p || heads[nh] < 1 || heads[nh] > 64) return fprintf(stderr, "bench_attn_warm: --heads 1..64, comma-separated\n"), 2;
    nh++;
    p = *e == ',' ? e + 1 : e;
  }
  if (!plan_path || !spec || threads < 1 || threads > 256 || rounds < 3 || rounds > 1000 || (cpu && threads != 1))
    return fprintf(stderr, "usage: bench_attn_warm --plan FILE --pattern SPEC [--heads 2,8] [--threads N] [--rounds 3..1000] "
                           "[--cpu-clock (with --threads 1)] [--json]\n"), 2;
  ts_context *ctx = NULL;
  ts_attn_plan *plan = NULL;
  int64_t n = 0;
  ts_status st = ts_context_create(&ctx, threads);
  if (st == TS_OK) st = ts_bench_attn_load_plan(plan_path, ctx, spec, D, &plan, &n);
  if (st != TS_OK) return fprintf(stderr, "bench_attn_warm: %s\n", ts_last_error()), 1;
  long hmax = 0;
  for (int k = 0; k < nh; k++) hmax = heads[k] > hmax ? heads[k] : hmax;
  const size_t ne = (size_t)hmax * (size_t)n * D;
  ts_bench_attn_io io;
  float *O[2] = {ts_malloc(ne * 4), ts_malloc(ne * 4)};
  double *t[2] = {malloc((size_t)rounds * sizeof(double)), malloc((size_t)rounds * sizeof(double))};
  double *r = malloc((size_t)rounds * sizeof(double));
  st = ts_bench_attn_io_make(&io, hmax, n, D, bf16);
  if (st != TS_OK || !O[0] || !O[1] || !t[0] || !t[1] || !r) return fprintf(stderr, "bench_attn_warm: out of memory\n"), 1;
  cJSON *rows = json ? cJSON_CreateArray() : NULL;
  if (!json) printf("%s, plan %s, d %d, %s, %d threads, %d rounds, %s clock; ratio = off / on per round\n", spec, plan_path, D,
                    bf16 ? "bf16" : "f32", threads, rounds, cpu ? "thread CPU" : "wall");
  for (int k = 0; k < nh && st == TS_OK; k++) {
    const long H = heads[k];
    for (int w = 0; w < 2 && st == TS_OK; w++) { /* warm-up, and the outputs */
      ts_attn_plan_set_warm(plan, w == 1);
      st = ts_bench_attn_io_run(ctx, plan, &io, H, O[w]);
    }
    const bool same = st == TS_OK && memcmp(O[0], O[1], (size_t)H * (size_t)n * D * sizeof(float)) == 0;
    for (int i = 0; i < rounds && st == TS_OK; i++)
      for (int j = 0; j < 2 && st == TS_OK; j++) {
        const int w = (i + j) & 1; /* alternate which setting goes first */
        ts_attn_plan_set_warm(plan, w == 1);
        const double t0 = ts_clock_now(cpu ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL);
        st = ts_bench_attn_io_run(ctx, plan, &io, H, O[w]);
        t[w][i] = ts_clock_now(cpu ? TS_CLOCK_THREAD_CPU : TS_CLOCK_WALL) - t0;
      }
    if (st != TS_OK) break;
    for (int i = 0; i < rounds; i++) r[i] = t[0][i] / t[1][i];
    qsort(r, (size_t)rounds, sizeof *r, ts_cmp_double);
    qsort(t[0], (size_t)rounds, sizeof(double), ts_cmp_double);
    qsort(t[1], (size_t)rounds, sizeof(double), ts_cmp_double);
    const double mb = (bf16 ? 2.5 : 4.0) * (double)H * (double)n * D * sizeof(float) / 1048576.0; /* Q K V (+ fp32 O) */
    if (json) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddStringToObject(j, "pattern", spec);
      cJSON_AddStringToObject(j, "dtype", bf16 ? "bf16" : "f32");
      cJSON_AddNumberToObject(j, "heads", (double)H);
      cJSON_AddNumberToObject(j, "threads", threads);
      cJSON_AddNumberToObject(j, "qkvo_mib", mb);
      cJSON_AddNumberToObject(j, "off_ms", t[0][rounds / 2] * 1e3);
      cJSON_AddNumberToObject(j, "on_ms", t[1][rounds / 2] * 1e3);
      cJSON_AddNumberToObject(j, "ratio_q25", r[rounds / 4]);
      cJSON_AddNumberToObject(j, "ratio_median", r[rounds / 2]);
      cJSON_AddNumberToObject(j, "ratio_q75", r[3 * rounds / 4]);
      cJSON_AddBoolToObject(j, "same_output", same);
      cJSON_AddItemToArray(rows, j);
    } else {
      printf("  %2ld heads (Q K V O %5.1f MiB): off %8.3f ms  on %8.3f ms  off/on %.3f [%.3f, %.3f]  outputs %s\n", H, mb,
             t[0][rounds / 2] * 1e3, t[1][rounds / 2] * 1e3, r[rounds / 2], r[rounds / 4], r[3 * rounds / 4],
             same ? "identical" : "DIFFER");
    }
    if (!same) st = ts_error(TS_ERR_INTERNAL, "bench_attn_warm: outputs with and without warming differ");
  }
  if (json && st == TS_OK) {
    ts_bench_print_json(rows);
  }
  cJSON_Delete(rows);
  ts_attn_plan_destroy(plan);
  ts_context_destroy(ctx);
  ts_bench_attn_io_free(&io);
  ts_free(O[0]), ts_free(O[1]);
  free(t[0]), free(t[1]), free(r);
  if (st != TS_OK) return fprintf(stderr, "bench_attn_warm: %s\n", ts_last_error()), 1;
  return 0;
}
