/* The rate at which this build's matvec kernels stream a model's weights (ts_llm_model_stream_gbs):
 * every matrix a decode step multiplies (q, k, v, o, gate, up, down of each layer, the output
 * projection), once, one token, with the decode step's kernels (packed where the ISA has them) but
 * none of its attention, norms, activation quantization or phase barriers: each thread takes its
 * row share of every matrix back to back in one parallel region. Decode GB/s divided by this, in
 * the same process and minute, says what the runtime loses around its kernels; hwinfo's read test
 * says what the memory system gives a plain sum. */
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

ts_status ts_llm_model_stream_gbs(const ts_llm_model *m, const ts_context *ctx, int passes, double *gbs) {
  if (!m || !gbs) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_stream_gbs: NULL argument");
  if (passes < 1 || passes > 1000) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_stream_gbs: passes = %d (1..1000)", passes);
  *gbs = 0;
  const ts_llm_config *c = &m->cfg;
  const int nl = c->n_layer, nm = 7 * nl + 1;
  const ts__wmat **w = malloc((size_t)nm * sizeof *w);
  int *wi = malloc((size_t)nm * sizeof *wi);
  double *t = malloc((size_t)passes * sizeof *t);
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
  const int nt = ctx ? ts_context_threads(ctx) : ts_default_threads();
  for (int p = -1; p < passes && st == TS_OK; p++) { /* pass -1: warm-up */
    const double t0 = ts_now();
#pragma omp parallel num_threads(nt)
    {
      const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
      for (int i = 0; i < nm; i++) { /* the thread's piece of each (its stream), or an even share */
        int64_t r0, r1;
        if (w[i]->npiece == nth) r0 = w[i]->cut[tid], r1 = w[i]->cut[tid + 1];
        else ts__split(w[i]->rows, tid, nth, TS__PACK_ROWS, &r0, &r1);
        const width_act *a = &wa[wi[i]];
        ts__wmat_gemm(w[i], r0, r1, a->x, a->n, &a->a, 1, y, w[i]->rows);
      }
    }
    if (p >= 0) t[p] = ts_now() - t0;
  }
  if (st == TS_OK) {
    qsort(t, (size_t)passes, sizeof *t, cmp_dbl);
    const double med = passes % 2 ? t[passes / 2] : 0.5 * (t[passes / 2 - 1] + t[passes / 2]);
    *gbs = med > 0 ? bytes / med * 1e-9 : 0;
  }
  for (int j = 0; j < nw; j++) {
    ts_free(wa[j].x), ts_free(wa[j].a.q), ts_free(wa[j].a.d), ts_free(wa[j].a.s), ts_free(wa[j].a.sum), ts_free(wa[j].a.gsum);
  }
  ts_free(y);
  free(w), free(wi), free(t);
  return st;
}
