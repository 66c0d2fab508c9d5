/* Where two-thread LLM decode loses against its kernels' stream, one ingredient at a time. Every
 * pass multiplies each matrix a decode step multiplies (per layer k, v, q, wo, gate, up, down, then
 * the output projection) with one token, each thread its own piece of the packed layout back to back
 * (as ts_llm_model_stream_gbs), and adds decode's other ingredients:
 *
 *   stream     the kernels alone, no synchronization
 *   barriers   + decode's 4 barriers per layer (after q|k|v, wo, up and down)
 *   claims     + wo and down in ~16 KB units claimed through the work sharing decode uses
 *              (ts__share_next: own units in runs, then stealing the other's)
 *   xchg       barriers + wo's and down's int8 inputs quantized half by each thread into shared
 *              buffers before the barrier and read whole after it (decode's s->aact / s->hact)
 *   xchg+pf    the same, every line of the shared input prefetched (T0) right after the barrier
 *   gap        barriers + --gap us per layer on both threads where decode attends, in compute that
 *              moves no memory
 *   gap+pf     the same wait spent prefetching the thread's wo piece into L2 (T1)
 *
 * Each round runs every mode (rotated order, one untimed pass first, best of 3 passes), after
 * measuring where the two threads sit (ts_hwinfo_xfer_ns); the summary gives each mode's median
 * GB/s of weights per placement (one CCD / two CCDs on an EPYC VM, see bench_llm_placement.c).
 *
 * The kernels prefetch their own weights as decode's do (--weight-prefetch auto: the distance the
 * runtime measures for the model and 2 threads, ts__llm_tune_wpf; or BYTES, 0 none).
 *
 *   bench_llm_phases --model FILE [--rounds 60] [--gap 6] [--sleep-ms 500] [--weight-prefetch auto|BYTES]
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/llm_internal.h"
#include "tessera/measure.h"
#include "tessera/hwinfo.h"

enum { M_STREAM, M_BARRIERS, M_CLAIMS, M_XCHG, M_XCHGPF, M_GAP, M_GAPPF, NMODE };
static const char *const mode_name[NMODE] = {"stream", "barriers", "claims", "xchg", "xchg+pf", "gap", "gap+pf"};

typedef struct act {
  int64_t n;
  float *x;
  ts__actb a;
} act;

static bool act_init(act *a, int64_t n, uint64_t seed) {
  const int64_t nb = n / TS_QK;
  a->n = n;
  a->x = ts_malloc((size_t)n * sizeof(float));
  a->a = (ts__actb){n, ts_malloc((size_t)n), ts_malloc((size_t)nb * sizeof(float)), ts_malloc((size_t)nb * sizeof(float)),
                    ts_malloc((size_t)nb * sizeof(int32_t)), ts_malloc((size_t)nb * 8 * sizeof(int32_t)), NULL,
                    NULL, NULL, NULL};
  if (!a->x || !a->a.q || !a->a.d || !a->a.s || !a->a.sum || !a->a.gsum) return false;
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int64_t e = 0; e < n; e++) a->x[e] = (float)ts_rng_normal(&r);
  const ts__quant_table *qt = ts__quant();
  qt->act_quantize(n, a->x, a->a.q, a->a.d, a->a.sum, a->a.s);
  if (qt->prep_packed) qt->prep_packed(n, 1, a->a.q, a->a.gsum);
  return true;
}

static void busy_us(double us, const char *pf, size_t pf_bytes) {
  const double t0 = ts_now();
  size_t o = 0;
  while ((ts_now() - t0) * 1e6 < us) {
    for (int k = 0; k < 4 && o < pf_bytes; k++, o += 64) _mm_prefetch(pf + o, _MM_HINT_T1);
    _mm_pause();
  }
}

int main(int argc, char **argv) {
  const char *model = NULL;
  int rounds = 60, sleep_ms = 500, wpf = -1;
  double gap = 6;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gap") && i + 1 < argc) gap = atof(argv[++i]);
    else if (!strcmp(argv[i], "--sleep-ms") && i + 1 < argc) sleep_ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--weight-prefetch") && i + 1 < argc) {
      i++;
      wpf = !strcmp(argv[i], "auto") ? -1 : atoi(argv[i]);
      if (wpf < -1 || wpf > (1 << 20)) wpf = -2;
    } else {
      fprintf(stderr, "usage: bench_llm_phases --model FILE [--rounds 60] [--gap 6] [--sleep-ms 500] [--weight-prefetch auto|BYTES]\n");
      return 2;
    }
  }
  if (!model || rounds < 1 || rounds > 100000 || gap < 0 || gap > 1000 || sleep_ms < 0 || sleep_ms > 60000 || wpf < -1) {
    fprintf(stderr, "bench_llm_phases: --model is required; --rounds 1..100000, --gap 0..1000, --sleep-ms 0..60000, "
                    "--weight-prefetch auto or 0..1048576\n");
    return 2;
  }
  ts_llm_model *m = NULL;
  if (ts_llm_model_load(&m, model) != TS_OK) {
    fprintf(stderr, "bench_llm_phases: %s\n", ts_last_error());
    return 1;
  }
  const ts_llm_config *c = &m->cfg;
  const int nl = c->n_layer, nm = 7 * nl + 1;
  if (m->output.npiece != 2 || !ts__quant()->prep_packed || c->d_model % TS_QK || c->n_ff % TS_QK ||
      (int64_t)c->n_head * c->head_dim != c->d_model) {
    fprintf(stderr, "bench_llm_phases: needs the packed AVX-512 kernels, a model laid out for 2 threads "
                    "(TESSERA_THREADS=2) and d_model = n_head x head_dim, both multiples of 32\n");
    ts_llm_model_destroy(m);
    return 1;
  }
  if (wpf < 0) ts__llm_tune_wpf(m, 2, TS__WPF_MIN_BYTES);
  else ts_llm_model_set_weight_prefetch(m, wpf);
  wpf = m->wpf > 0 ? m->wpf : 0;
  const ts__wmat **w = malloc((size_t)nm * sizeof *w);
  double *t[NMODE];
  int *two = calloc((size_t)rounds, sizeof *two);
  float *y = ts_malloc((size_t)c->n_vocab * sizeof *y);
  act in[2], ex[2]; /* inputs of width d_model / n_ff, and the exchanged ones (wo, down) */
  bool ok = w && two && y;
  for (int md = 0; md < NMODE; md++) ok = (t[md] = calloc((size_t)rounds, sizeof(double))) != NULL && ok;
  ok = ok && act_init(&in[0], c->d_model, 1) && act_init(&in[1], c->n_ff, 2) && act_init(&ex[0], c->d_model, 3) &&
       act_init(&ex[1], c->n_ff, 4);
  if (!ok) {
    fprintf(stderr, "bench_llm_phases: out of memory\n");
    return 1;
  }
  int k = 0;
  double bytes = 0;
  for (int l = 0; l < nl; l++) {
    const ts__llm_layer *L = &m->layers[l];
    const ts__wmat *lw[] = {&L->wk, &L->wv, &L->wq, &L->wo, &L->gate, &L->up, &L->down};
    for (int i = 0; i < 7; i++) w[k++] = lw[i];
  }
  w[k] = &m->output;
  for (int i = 0; i < nm; i++) bytes += (double)w[i]->rows * (double)w[i]->row_bytes;
  ts__barrier bar;
  ts__barrier_init(&bar, 2);
  ts__share *share = ts_calloc(2, sizeof *share);
  printf("%d rounds, 2 threads, %.2f MB of weights per pass, gap %.1f us per layer, weights prefetched %d B ahead\n%-6s %-8s",
         rounds, bytes / 1e6, gap, wpf, "round", "xfer ns");
  for (int md = 0; md < NMODE; md++) printf(" %9s", mode_name[md]);
  printf("\n");
  for (int r = -1; r < rounds; r++) { /* round -1: warm-up */
    if (sleep_ms) usleep((useconds_t)sleep_ms * 1000u);
    double xf = 0;
    if (ts_hwinfo_xfer_ns(&xf) != TS_OK) xf = 0, ts_error_clear();
    for (int mi = 0; mi < NMODE; mi++) {
      const int md = (mi + (r > 0 ? r : 0)) % NMODE; /* rotated: the first mode after the sleep runs colder */
      double best = 1e30;
      for (int rep = -1; rep < 3; rep++) {
        const double t0 = ts_now();
#pragma omp parallel num_threads(2)
        {
          const int tid = omp_get_thread_num();
          ts__pfq q; /* the kernels' own weight prefetches (no side queue) */
          ts__pfq_init(&q, wpf);
          for (int i = 0; i < nm; i++) {
            const int p = i % 7, last = i == nm - 1; /* p: k v q wo gate up down */
            const act *a = w[i]->cols == c->d_model ? &in[0] : &in[1];
            if ((md == M_XCHG || md == M_XCHGPF || md == M_CLAIMS) && (p == 3 || p == 6)) a = &ex[p == 3 ? 0 : 1];
            ts__actb ab = a->a;
            ab.pf = &q;
            if (md == M_XCHGPF && (p == 3 || p == 6)) {
              const int64_t nb = a->n / TS_QK;
              for (int64_t o = 0; o < a->n; o += 64) _mm_prefetch((const char *)a->a.q + o, _MM_HINT_T0);
              for (int64_t o = 0; o < nb; o += 16) {
                _mm_prefetch((const char *)(a->a.d + o), _MM_HINT_T0);
                _mm_prefetch((const char *)(a->a.s + o), _MM_HINT_T0);
                _mm_prefetch((const char *)(a->a.sum + o), _MM_HINT_T0);
              }
            }
            if (md == M_CLAIMS && (p == 3 || p == 6)) { /* decode's units: ts__grid_d, claimed */
              const ts__grid g = ts__grid_d(w[i]);
              ts__share_begin(share, tid, 2, (g.n + g.unit - 1) / g.unit);
              int64_t u, cnt = 1;
              while ((u = ts__share_next(share, tid, 2, &cnt)) >= 0) {
                const int64_t r0 = u * g.unit, r1 = r0 + cnt * g.unit < g.n ? r0 + cnt * g.unit : g.n;
                ts__wmat_gemm(w[i], r0, r1, a->x, a->n, &ab, 1, y, w[i]->rows);
              }
            } else
              ts__wmat_gemm(w[i], w[i]->cut[tid], w[i]->cut[tid + 1], a->x, a->n, &ab, 1, y, w[i]->rows);
            if (last || md == M_STREAM) continue;
            if (p == 2 && (md == M_GAP || md == M_GAPPF)) { /* attention's place */
              const ts__wmat *wo = w[i + 1];
              busy_us(gap, (const char *)wo->at[tid], md == M_GAPPF ? (size_t)(wo->cut[tid + 1] - wo->cut[tid]) * wo->row_bytes : 0);
            }
            if ((md == M_XCHG || md == M_XCHGPF || md == M_CLAIMS) && (p == 2 || p == 5)) { /* this thread's half of wo's / down's input */
              act *e = &ex[p == 2 ? 0 : 1];
              int64_t e0, e1;
              ts__split(e->n, tid, 2, TS_QK, &e0, &e1);
              ts__actb_quant_part(&e->a, e->x, e0, e1);
            }
            if (p == 2 || p == 3 || p == 5 || p == 6) ts__barrier_wait(&bar, NULL);
          }
        }
        const double dt = ts_now() - t0;
        if (rep >= 0 && dt < best) best = dt;
      }
      if (r >= 0) t[md][r] = best;
    }
    if (r < 0) continue;
    two[r] = ts_hwinfo_xfer_shared(xf);
    printf("%-6d %-8.0f", r, xf);
    for (int md = 0; md < NMODE; md++) printf(" %9.1f", bytes / t[md][r] * 1e-9);
    printf("\n");
    fflush(stdout);
  }
  printf("\nmedian GB/s of weights (rounds)\n%-10s %6s", "placement", "rounds");
  for (int md = 0; md < NMODE; md++) printf(" %9s", mode_name[md]);
  printf("\n");
  double *v = malloc((size_t)rounds * sizeof *v);
  for (int pl = 1; pl >= -1 && v; pl -= 2) {
    int n = 0;
    for (int r = 0; r < rounds; r++) n += two[r] == pl;
    printf("%-10s %6d", pl == 1 ? "one CCD" : "two CCDs", n);
    for (int md = 0; md < NMODE && n; md++) {
      int q = 0;
      for (int r = 0; r < rounds; r++)
        if (two[r] == pl) v[q++] = t[md][r];
      printf(" %9.1f", bytes / ts_median(v, q) * 1e-9);
    }
    printf("\n");
  }
  free(v);
  for (int j = 0; j < 2; j++) {
    act *as[2] = {&in[j], &ex[j]};
    for (int z = 0; z < 2; z++)
      ts_free(as[z]->x), ts_free(as[z]->a.q), ts_free(as[z]->a.d), ts_free(as[z]->a.s), ts_free(as[z]->a.sum),
          ts_free(as[z]->a.gsum);
  }
  for (int md = 0; md < NMODE; md++) free(t[md]);
  ts_free(share), ts_free(y);
  free(w), free(two);
  ts_llm_model_destroy(m);
  return 0;
}
