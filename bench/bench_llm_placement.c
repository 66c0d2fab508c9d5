/* LLM decode against the read bandwidth, grouped by where the two threads sit. On an EPYC VM the
 * host moves the vCPUs between one CCD (a cache line passes between the threads in tens of ns; two
 * threads read ~33-35 GB/s through the CCD's link) and two (~150 ns; 55-65 GB/s), minute by minute,
 * so a decode figure means little without the placement it ran under. Each round: the line
 * transfer time (ts_hwinfo_xfer_ns), the kernels' stream rate over the weights
 * (ts_llm_model_stream_gbs), `tokens` greedy decode steps after a 128-token prompt (GB/s = bytes
 * per token x tok/s, bytes = weights + the KV cache attended), the transfer time again, then the
 * read test of all threads (ts_hwinfo_read_gbs, 0.2 s). A round counts as "one cache" or "two
 * caches" when both transfers say so (ts_hwinfo_xfer_shared); the summary gives each
 * group's medians and decode GB/s as a % of the same round's read test.
 *
 *   bench_llm_placement --model FILE [--rounds 100] [--tokens 64] [--threads 2] [--quiet]
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/core.h"
#include "tessera/hwinfo.h"
#include "tessera/llm.h"
#include "tessera/measure.h"

typedef struct round {
  double x0, x1, read, stream, tps, gbs;
} round_t;

/* median of field f (offset in doubles) over the rounds with sel[i] */
static double median(const round_t *r, const bool *sel, int n, size_t f, double *tmp) {
  int k = 0;
  for (int i = 0; i < n; i++)
    if (sel[i]) tmp[k++] = ((const double *)&r[i])[f];
  if (k == 0) return 0;
  return ts_median(tmp, k);
}

int main(int argc, char **argv) {
  const char *model = NULL;
  int rounds = 100, tokens = 64, threads = 2;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quiet")) quiet = true;
    else {
      fprintf(stderr, "usage: bench_llm_placement --model FILE [--rounds 100] [--tokens 64] [--threads 2] [--quiet]\n");
      return 2;
    }
  }
  if (!model || rounds < 1 || rounds > 100000 || tokens < 1 || tokens > 1024 || threads < 2 || threads > 1024) {
    fprintf(stderr, "bench_llm_placement: --model is required; --rounds 1..100000, --tokens 1..1024, --threads >= 2\n");
    return 2;
  }
  ts_llm_model *m = NULL;
  ts_context *ctx = NULL;
  ts_llm_state *s = NULL;
  const int prompt = 128, n_ctx = prompt + tokens;
  ts_status st = ts_llm_model_load(&m, model);
  if (st == TS_OK) st = ts_context_create(&ctx, threads);
  if (st == TS_OK) st = ts_llm_state_create(&s, m, ctx, n_ctx, prompt);
  round_t *r = calloc((size_t)rounds, sizeof *r);
  bool *one = calloc((size_t)rounds, 1), *two = calloc((size_t)rounds, 1);
  double *tmp = malloc((size_t)rounds * sizeof *tmp);
  float *logits = NULL;
  if (st == TS_OK) {
    logits = malloc((size_t)ts_llm_model_config(m)->n_vocab * sizeof *logits);
    if (!r || !one || !two || !tmp || !logits) st = ts_error(TS_ERR_OOM, "out of memory");
  }
  if (st != TS_OK) {
    fprintf(stderr, "bench_llm_placement: %s\n", ts_last_error());
    return 1;
  }
  ts_llm_state_set_adaptive(s, false); /* every step on the whole team: the placement is the variable */
  const ts_llm_config *c = ts_llm_model_config(m);
  int32_t toks[128];
  for (int i = 0; i < prompt; i++) toks[i] = (int32_t)((100 + 7 * i) % c->n_vocab);
  const double wbytes = (double)ts_llm_model_weight_bytes(m), kvpos = (double)ts_llm_model_kv_bytes_per_pos(m);
  const double bpt = wbytes + kvpos * (prompt + (tokens + 1) / 2.0);
  if (!quiet)
    printf("%d rounds of %d decode steps after a %d-token prompt, %d threads, %.2f MB per token\n"
           "%5s %9s %7s %7s %8s %7s %6s\n",
           rounds, tokens, prompt, threads, bpt / 1e6, "round", "xfer ns", "read", "stream", "tok/s", "GB/s", "%read");
  for (int k = 0; k < rounds && st == TS_OK; k++) {
    round_t *q = &r[k];
    if (ts_hwinfo_xfer_ns(&q->x0) != TS_OK) q->x0 = 0, ts_error_clear();
    if (ts_llm_model_stream_gbs(m, ctx, 3, &q->stream) != TS_OK) q->stream = 0, ts_error_clear();
    st = ts_llm_eval(s, toks, prompt, 0, TS_LLM_LOGITS_LAST, logits);
    ts_llm_state_timing_reset(s);
    const double t0 = ts_now();
    for (int g = 0; g < tokens && st == TS_OK; g++) {
      int32_t tok = ts_llm_sample(logits, c->n_vocab, 0, 0, NULL);
      st = ts_llm_eval(s, &tok, 1, prompt + g, TS_LLM_LOGITS_LAST, logits);
    }
    const double t = ts_now() - t0;
    if (ts_hwinfo_xfer_ns(&q->x1) != TS_OK) q->x1 = 0, ts_error_clear();
    if (ts_hwinfo_read_gbs(threads, 0, 0.2, 2, &q->read) != TS_OK) q->read = 0, ts_error_clear();
    q->tps = tokens / t;
    q->gbs = bpt * q->tps * 1e-9;
    one[k] = ts_hwinfo_xfer_shared(q->x0) > 0 && ts_hwinfo_xfer_shared(q->x1) > 0;
    two[k] = ts_hwinfo_xfer_shared(q->x0) < 0 && ts_hwinfo_xfer_shared(q->x1) < 0;
    if (!quiet)
      printf("%5d %4.0f/%-4.0f %7.1f %7.1f %8.1f %7.1f %5.1f%%\n", k, q->x0, q->x1, q->read, q->stream, q->tps, q->gbs,
             q->read > 0 ? 100 * q->gbs / q->read : 0.0);
  }
  if (st != TS_OK) {
    fprintf(stderr, "bench_llm_placement: %s\n", ts_last_error());
    return 1;
  }
  /* % of read per round, then its median per group */
  round_t *pct = calloc((size_t)rounds, sizeof *pct);
  for (int k = 0; pct && k < rounds; k++) pct[k].gbs = r[k].read > 0 ? 100 * r[k].gbs / r[k].read : 0;
  printf("\n%-11s %6s %9s %7s %7s %8s %7s %6s\n", "placement", "rounds", "xfer ns", "read", "stream", "tok/s", "GB/s",
         "%read");
  const char *names[2] = {"one cache", "two caches"};
  const bool *sels[2] = {one, two};
  for (int gi = 0; gi < 2; gi++) {
    int n = 0;
    for (int k = 0; k < rounds; k++) n += sels[gi][k];
    const size_t fx = offsetof(round_t, x0) / sizeof(double), fr = offsetof(round_t, read) / sizeof(double),
                 fs = offsetof(round_t, stream) / sizeof(double), ft = offsetof(round_t, tps) / sizeof(double),
                 fg = offsetof(round_t, gbs) / sizeof(double);
    if (n == 0) {
      printf("%-11s %6d\n", names[gi], 0);
      continue;
    }
    printf("%-11s %6d %9.0f %7.1f %7.1f %8.1f %7.1f %5.1f%%\n", names[gi], n, median(r, sels[gi], rounds, fx, tmp),
           median(r, sels[gi], rounds, fr, tmp), median(r, sels[gi], rounds, fs, tmp), median(r, sels[gi], rounds, ft, tmp),
           median(r, sels[gi], rounds, fg, tmp), pct ? median(pct, sels[gi], rounds, fg, tmp) : 0.0);
  }
  free(pct);
  free(r), free(one), free(two), free(tmp), free(logits);
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
  ts_llm_model_destroy(m);
  return 0;
}
