/* Decode variants compared inside one process: each round runs a prefill and --gen greedy decode
 * steps under every variant in turn (rotating which goes first), on the same state, so that the
 * host's slow and fast spells fall on all of them alike; the summary gives each variant's median
 * time per decoded token (sampling included, as in `tessera llm bench`) and its ratio to the first
 * variant. On the shared VMs this resolves 1-2% differences that alternating whole `llm bench`
 * processes (bench/llm_bench_alternate.sh) leaves inside the noise (docs/notes/BENCHMARKS.md,
 * issue 7).
 *
 * A variant is NAME:KEY=VALUE[,KEY=VALUE] (keys left out: side=off, wpf=auto):
 *   side=on|off       decode's side prefetches (each next phase's first weights and the next
 *                     layer's KV cache, walked into L2 by the matmul tiles, ts__pfq; the runtime's
 *                     default is off, ts_llm_model's side)
 *   wpf=auto|BYTES    how far ahead the decode kernels prefetch their weights (auto: the distance
 *                     the runtime measured for this team when the state was created)
 *
 *   bench_llm_ab --model FILE [--threads 2] [--prompt-len 128] [--gen 128] [--rounds 16] VARIANT...
 *   e.g. bench_llm_ab --model $M off:side=off on:side=on pf0_off:side=off,wpf=0 pf0_on:side=on,wpf=0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "tessera/measure.h"

#define MAXV 8

typedef struct variant {
  char name[32];
  int side; /* 0 off (the runtime's default), 1 on */
  int wpf;  /* -1 auto (measured), else bytes */
} variant;

static bool parse_variant(const char *arg, variant *v) {
  const char *colon = strchr(arg, ':');
  if (!colon || colon == arg || colon - arg >= (long)sizeof v->name) return false;
  memcpy(v->name, arg, (size_t)(colon - arg));
  v->name[colon - arg] = 0;
  v->side = 0;
  v->wpf = -1;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", colon + 1);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (!strcmp(tok, "side=on")) v->side = 1;
    else if (!strcmp(tok, "side=off")) v->side = 0;
    else if (!strcmp(tok, "wpf=auto")) v->wpf = -1;
    else if (!strncmp(tok, "wpf=", 4)) {
      char *end;
      const long b = strtol(tok + 4, &end, 10);
      if (*end || b < 0 || b > (1 << 20)) return false;
      v->wpf = (int)b;
    } else if (*tok) return false;
  }
  return true;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_llm_ab --model FILE [--threads 2] [--prompt-len 128] [--gen 128] [--rounds 16] "
                  "NAME:side=on|off[,wpf=auto|BYTES] ... (2..%d variants)\n", MAXV);
  return 2;
}

int main(int argc, char **argv) {
  const char *model = NULL;
  int threads = 2, plen = 128, gen = 128, rounds = 16, nv = 0;
  variant v[MAXV];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--prompt-len") && i + 1 < argc) plen = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gen") && i + 1 < argc) gen = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (argv[i][0] != '-' && nv < MAXV && parse_variant(argv[i], &v[nv])) nv++;
    else {
      fprintf(stderr, "bench_llm_ab: cannot use argument '%s'\n", argv[i]);
      return usage();
    }
  }
  if (!model || nv < 2 || threads < 1 || threads > 256 || plen < 1 || plen > 8192 || gen < 2 || gen > 8192 ||
      rounds < 2 || rounds > 10000)
    return usage();
  ts_llm_model *m = NULL;
  ts_context *ctx = NULL;
  ts_llm_state *st = NULL;
  if (ts_llm_model_load(&m, model) != TS_OK || ts_context_create(&ctx, threads) != TS_OK ||
      ts_llm_state_create(&st, m, ctx, plen + gen + 1, plen < 512 ? plen : 512) != TS_OK) {
    fprintf(stderr, "bench_llm_ab: %s\n", ts_last_error());
    ts_llm_state_destroy(st);
    ts_context_destroy(ctx);
    ts_llm_model_destroy(m);
    return 1;
  }
  ts_llm_wpf_report wr;
  ts_llm_model_weight_prefetch(m, &wr);
  const int measured = wr.bytes;
  const ts_llm_config *c = ts_llm_model_config(m);
  float *logits = malloc((size_t)c->n_vocab * sizeof *logits);
  int32_t *toks = malloc((size_t)plen * sizeof *toks);
  double *t[MAXV];
  bool ok = logits && toks;
  for (int k = 0; k < nv; k++) ok = (t[k] = calloc((size_t)rounds, sizeof(double))) != NULL && ok;
  if (!ok) {
    fprintf(stderr, "bench_llm_ab: out of memory\n");
    return 1;
  }
  ts_rng rng;
  ts_rng_seed(&rng, 7);
  for (int i = 0; i < plen; i++) toks[i] = 100 + (int32_t)ts_rng_below(&rng, (uint64_t)(c->n_vocab - 100));
  printf("%s, %d threads, prompt %d, %d decode steps per run, %d rounds (one untimed first), weights prefetched %d B "
         "ahead where measured\n", model, ts_context_threads(ctx), plen, gen, rounds, measured);
  for (int r = 0; r <= rounds; r++) {
    for (int i = 0; i < nv; i++) {
      const int k = (r + i) % nv; /* who goes first rotates */
      ts_llm_model_set_weight_prefetch(m, v[k].wpf < 0 ? measured : v[k].wpf);
      __atomic_store_n(&m->side, v[k].side, __ATOMIC_RELAXED);
      ts_status s = ts_llm_eval(st, toks, plen, 0, TS_LLM_LOGITS_LAST, logits);
      const double t0 = ts_now();
      for (int g = 0; g < gen && s == TS_OK; g++) {
        const int32_t tok = ts_llm_sample(logits, c->n_vocab, 0, 0, NULL);
        s = ts_llm_eval(st, &tok, 1, plen + g, TS_LLM_LOGITS_LAST, logits);
      }
      if (s != TS_OK) {
        fprintf(stderr, "bench_llm_ab: %s\n", ts_last_error());
        return 1;
      }
      if (r > 0) t[k][r - 1] = (ts_now() - t0) / gen;
    }
    fprintf(stderr, "\rround %d/%d", r, rounds);
  }
  fprintf(stderr, "\n");
  printf("%-12s %10s %21s %9s %8s\n", "variant", "us/token", "(p25-p75)", "tok/s", "ratio");
  double base = 0;
  for (int k = 0; k < nv; k++) {
    qsort(t[k], (size_t)rounds, sizeof(double), ts_cmp_double);
    const double med = t[k][rounds / 2];
    if (k == 0) base = med;
    printf("%-12s %10.1f (%8.1f-%8.1f) %9.1f %7.3fx\n", v[k].name, med * 1e6, t[k][rounds / 4] * 1e6,
           t[k][3 * rounds / 4] * 1e6, 1.0 / med, base / med);
    free(t[k]);
  }
  free(logits);
  free(toks);
  ts_llm_state_destroy(st);
  ts_context_destroy(ctx);
  ts_llm_model_destroy(m);
  return 0;
}
