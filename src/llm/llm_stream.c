/* The rate at which this build's matvec kernels stream a model's weights (ts_llm_model_stream_gbs):
 * every matrix a decode step multiplies (q, k, v, o, gate, up, down of each layer, the output
 * projection), once, one token, with the decode step's kernels (packed where the ISA has them) but
 * none of its attention, norms, activation quantization or phase barriers: each thread takes its
 * row share of every matrix back to back in one parallel region. Decode GB/s divided by this, in
 * the same process and minute, says what the runtime loses around its kernels; hwinfo's read test
 * says what the memory system gives a plain sum. The same passes, at several distances of the
 * kernels' own weight prefetch, choose that distance for decode (ts__llm_tune_wpf). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"

#define MAX_WIDTHS 4

typedef struct width_act {
  int64_t n;
  float *x;
  ts__actb a;
} width_act;

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* gbs[c] = median GB/s of `passes` passes with the kernels prefetching wpf[c] bytes ahead, c <
 * nc, the candidates' passes interleaved (one warm-up pass first) */
static ts_status stream_at(const ts_llm_model *m, int nt, const int *wpf, int nc, int passes, double *gbs) {
  for (int k = 0; k < nc; k++) gbs[k] = 0;
  const ts_llm_config *c = &m->cfg;
  const int nl = c->n_layer, nm = 7 * nl + 1;
  const ts__wmat **w = malloc((size_t)nm * sizeof *w);
  int *wi = malloc((size_t)nm * sizeof *wi);
  double *t = malloc((size_t)passes * (size_t)nc * sizeof *t);
  width_act wa[MAX_WIDTHS];
  memset(wa, 0, sizeof wa);
  int nw = 0;
  ts_status st = w && wi && t ? TS_OK : ts_error(TS_ERR_OOM, "ts_llm_model_stream_gbs: out of memory");
  int64_t rmax = 0;
  double bytes = 0;
  if (st == TS_OK) {
    int k = 0;
    for (int l = 0; l < nl; l++) { /* decode's order (the packed layout's) */
      const ts__llm_layer *L = &m->layers[l];
      const ts__wmat *lw[] = {&L->wk, &L->wv, &L->wq, &L->wo, &L->gate, &L->up, &L->down};
      for (int i = 0; i < 7; i++) w[k++] = lw[i];
    }
    w[k] = &m->output;
  }
  const ts__quant_table *qt = ts__quant();
  for (int i = 0; i < nm && st == TS_OK; i++) { /* one quantized activation per distinct width */
    int j = 0;
    while (j < nw && wa[j].n != w[i]->cols) j++;
    if (j == nw) {
      if (nw == MAX_WIDTHS) {
        st = ts_error(TS_ERR_UNSUPPORTED, "ts_llm_model_stream_gbs: more than %d matrix widths", MAX_WIDTHS);
        break;
      }
      const int64_t n = w[i]->cols, nb = n / TS_QK > 0 ? n / TS_QK : 1;
      width_act *a = &wa[nw++];
      a->n = n;
      a->x = ts_malloc((size_t)n * sizeof *a->x);
      a->a = (ts__actb){n, ts_malloc((size_t)n), ts_malloc((size_t)nb * sizeof(float)), ts_malloc((size_t)nb * sizeof(float)),
                        ts_malloc((size_t)nb * sizeof(int32_t)), ts_malloc((size_t)nb * 8 * sizeof(int32_t)), NULL};
      if (!a->x || !a->a.q || !a->a.d || !a->a.s || !a->a.sum || !a->a.gsum) {
        st = ts_error(TS_ERR_OOM, "ts_llm_model_stream_gbs: out of memory");
        break;
      }
      ts_rng r;
      ts_rng_seed(&r, (uint64_t)n);
      for (int64_t e = 0; e < n; e++) a->x[e] = (float)ts_rng_normal(&r);
      if (n % TS_QK == 0) {
        qt->act_quantize(n, a->x, a->a.q, a->a.d, a->a.sum, a->a.s);
        if (qt->prep_packed) qt->prep_packed(n, 1, a->a.q, a->a.gsum);
      }
    }
    wi[i] = j;
    rmax = w[i]->rows > rmax ? w[i]->rows : rmax;
    bytes += (double)w[i]->rows * (double)w[i]->row_bytes;
  }
  float *y = st == TS_OK ? ts_malloc((size_t)rmax * sizeof *y) : NULL;
  if (st == TS_OK && !y) st = ts_error(TS_ERR_OOM, "ts_llm_model_stream_gbs: out of memory");
  for (int p = -1; p < passes && st == TS_OK; p++) /* pass -1: warm-up */
    for (int k = 0; k < nc; k++) {
      if (p < 0 && k > 0) break;
      const double t0 = ts_now();
#pragma omp parallel num_threads(nt)
      {
        const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
        ts__pfq q; /* no side prefetches; the kernels' own at wpf[k] */
        ts__pfq_init(&q, wpf[k]);
        for (int i = 0; i < nm; i++) { /* the thread's piece of each (its stream), or an even share */
          int64_t r0, r1;
          if (w[i]->npiece == nth) r0 = w[i]->cut[tid], r1 = w[i]->cut[tid + 1];
          else ts__split(w[i]->rows, tid, nth, TS__PACK_ROWS, &r0, &r1);
          const width_act *a = &wa[wi[i]];
          ts__actb ab = a->a;
          ab.pf = &q;
          ts__wmat_gemm(w[i], r0, r1, a->x, a->n, &ab, 1, y, w[i]->rows);
        }
      }
      if (p >= 0) t[(size_t)k * (size_t)passes + (size_t)p] = ts_now() - t0;
    }
  for (int k = 0; k < nc && st == TS_OK; k++) {
    double *tk = t + (size_t)k * (size_t)passes;
    qsort(tk, (size_t)passes, sizeof *tk, cmp_dbl);
    const double med = passes % 2 ? tk[passes / 2] : 0.5 * (tk[passes / 2 - 1] + tk[passes / 2]);
    gbs[k] = med > 0 ? bytes / med * 1e-9 : 0;
  }
  for (int j = 0; j < nw; j++) {
    ts_free(wa[j].x), ts_free(wa[j].a.q), ts_free(wa[j].a.d), ts_free(wa[j].a.s), ts_free(wa[j].a.sum), ts_free(wa[j].a.gsum);
  }
  ts_free(y);
  free(w), free(wi), free(t);
  return st;
}

ts_status ts_llm_model_stream_gbs(const ts_llm_model *m, const ts_context *ctx, int passes, double *gbs) {
  if (!m || !gbs) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_stream_gbs: NULL argument");
  if (passes < 1 || passes > 1000) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_stream_gbs: passes = %d (1..1000)", passes);
  const int nt = ctx ? ts_context_threads(ctx) : ts_default_threads();
  const int cur = __atomic_load_n(&m->wpf, __ATOMIC_RELAXED), wpf = cur > 0 ? cur : 0; /* decode's setting */
  return stream_at(m, nt, &wpf, 1, passes, gbs);
}

/* Candidate distances, and the rule: the largest within 2% of the best median (a decode step pauses
 * between phases, at barriers and in attention, and what a longer distance has in flight then
 * carries into the next phase: on the Xeon VM 4 KB and 16 KB once streamed alike, 30.2 and 29.6 GB/s,
 * while decode ran 384 and 413 tok/s), none unless the best beats none by 3% (on Zen 4 none was
 * right; docs/BENCHMARKS.md, issue 7). */
static const int k_wpf[TS_LLM_WPF_CANDIDATES] = {0, 2048, 4096, 16384, 32768};
#define WPF_ROUNDS 5

void ts__llm_tune_wpf(ts_llm_model *m, int nt, uint64_t min_bytes) {
  ts_llm_wpf_report r;
  memset(&r, 0, sizeof r);
  r.team = nt;
  for (int c = 0; c < TS_LLM_WPF_CANDIDATES; c++) r.candidates[c] = k_wpf[c];
  int choice = 0;
  if (m->weight_bytes >= min_bytes && m->layout_nt > 0) { /* packed kernels only: they prefetch */
    if (stream_at(m, nt, k_wpf, TS_LLM_WPF_CANDIDATES, WPF_ROUNDS, r.gbs) == TS_OK) {
      r.measured = 1;
      double best = 0;
      for (int c = 0; c < TS_LLM_WPF_CANDIDATES; c++) best = r.gbs[c] > best ? r.gbs[c] : best;
      if (best > 1.03 * r.gbs[0])
        for (int c = 0; c < TS_LLM_WPF_CANDIDATES; c++)
          if (r.gbs[c] >= 0.98 * best) choice = k_wpf[c];
    } else {
      ts_error_clear();
    }
  }
  r.bytes = choice;
  m->wpf_rep = r;
  __atomic_store_n(&m->wpf, choice, __ATOMIC_RELAXED);
}
