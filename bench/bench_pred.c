/* The activation predictors' kernels (src/llm/pred_kern*.c), hot in cache, one thread: ns per
 * neuron and the predictor's bits streamed per second, for the shapes of the ReLU test model (d 384,
 * 1536 neurons) and SmolLM2-135M (d 576, 1536), every variant this CPU has against the scalar
 * form, interleaved. Grasp adds x's codes (ts__pred_codes) per token, timed with it.
 *
 *   bench_pred [--rounds N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/pred_internal.h"
#include "tessera/core.h"
#include "tessera/measure.h"

typedef struct job {
  const ts__pred_kern *k;
  bool grasp;
  int nw, d;
  int64_t n;
  uint64_t *sw, *bw;
  float *x, *u0, *u1, *est, *oval;
  int32_t *neg, *oidx;
  ts__pred_x px;
} job;

static ts_status run(void *arg) {
  job *j = arg;
  if (j->grasp) {
    ts__pred_codes(j->x, j->d, 3.0f, true, &j->px, j->oidx, j->oval);
    j->k->grasp(j->sw, j->bw, j->nw, &j->px, j->n, j->u0, j->u1, j->est);
  } else {
    ts__pred_codes(j->x, j->d, 0, false, &j->px, NULL, NULL);
    j->k->signs(j->sw, j->nw, j->px.sx, j->n, j->neg);
  }
  return TS_OK;
}

int main(int argc, char **argv) {
  int rounds = 30;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[++i]);
  const int ds[2] = {384, 576};
  const int64_t n = 1536;
  ts_rng r;
  ts_rng_seed(&r, 3);
  printf("predictor kernels, one thread, hot: %lld neurons\n", (long long)n);
  printf("%-8s %5s %-18s %10s %10s %10s\n", "kind", "d", "variant", "us/call", "ns/neuron", "GB/s bits");
  for (int di = 0; di < 2; di++) {
    const int d = ds[di], nw = (d + 63) / 64;
    job base = {.nw = nw, .d = d, .n = n};
    base.sw = malloc((size_t)n * nw * 8), base.bw = malloc((size_t)n * nw * 8);
    base.x = malloc((size_t)d * 4), base.u0 = malloc(n * 4), base.u1 = malloc(n * 4), base.est = malloc(n * 4), base.oval = malloc((size_t)d * 4);
    base.neg = malloc(n * 4), base.oidx = malloc((size_t)d * 4);
    for (int64_t i = 0; i < n * nw; i++) base.sw[i] = ts_rng_next(&r), base.bw[i] = ts_rng_next(&r);
    for (int j = 0; j < d; j++) base.x[j] = ts_rng_normal(&r);
    for (int64_t i = 0; i < n; i++) base.u0[i] = 0.01f, base.u1[i] = 0.03f;
    for (int g = 0; g < 2; g++) {
      job jobs[8];
      const char *names[8];
      ts_measure_fn fn[8];
      void *args[8];
      int nj = 0;
      for (int v = 0; v < ts__pred_dispatch.count && nj < 8; v++) {
        if (!ts__level_supported(ts__pred_dispatch.variants[v].level)) continue;
        jobs[nj] = base;
        jobs[nj].grasp = g;
        jobs[nj].k = ts__pred_dispatch.variants[v].table;
        names[nj] = ts__level_name(ts__pred_dispatch.variants[v].level);
        fn[nj] = run, args[nj] = &jobs[nj];
        nj++;
      }
      ts_measure_opts mo = ts_measure_opts_default();
      mo.rounds = rounds;
      mo.min_sample_s = 2e-4;
      mo.alternate = true;
      ts_measure_result res[8];
      if (ts_measure_run(nj, fn, args, &mo, res, NULL) != TS_OK) {
        fprintf(stderr, "bench_pred: %s\n", ts_last_error());
        return 1;
      }
      const double bytes = (double)n * nw * 8 * (g ? 2 : 1);
      for (int v = 0; v < nj; v++)
        printf("%-8s %5d %-18s %10.2f %10.2f %10.2f\n", g ? "grasp" : "signbit", d, names[v], 1e6 * res[v].s.median,
               1e9 * res[v].s.median / (double)n, bytes / res[v].s.median / 1e9);
    }
    free(base.sw), free(base.bw), free(base.x), free(base.u0), free(base.u1), free(base.est), free(base.oval), free(base.neg), free(base.oidx);
  }
  return 0;
}
