/* The rate at which this build's matvec kernels stream a model's weights (ts_llm_model_stream_gbs):
 * every matrix a decode step multiplies (q, k, v, o, gate, up, down of each layer, the output
 * projection), once, one token, with the decode step's kernels (packed where the ISA has them) but
 * none of its attention, norms, activation quantization or phase barriers: each thread takes its
 * row share of every matrix back to back in one parallel region. Decode GB/s divided by this, in
 * the same process and minute, says what the runtime loses around its kernels; hwinfo's read test
 * says what the memory system gives a plain sum. The same passes, at several distances of the
 * kernels' own weight prefetch, choose that distance for decode (ts__llm_tune_wpf), kept in the
 * artifact store (kind "llm-wpf") so the next process on this machine reads it instead. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "llm/llm_internal.h"

#define MAX_WIDTHS 4

typedef struct width_act {
  int64_t n;
  float *x;
  ts__actb a;
} width_act;

/* One pass over the weights with the kernels prefetching `wpf` bytes ahead: a candidate of the
 * timing engine. */
typedef struct stream_pass {
  const ts__wmat *const *w;
  const int *wi;
  const width_act *wa;
  float *y;
  int nm, nt, wpf;
} stream_pass;

static ts_status one_pass(void *arg) {
  const stream_pass *sp = arg;
  const ts__wmat *const *w = sp->w;
#pragma omp parallel num_threads(sp->nt)
  {
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
    ts__pfq q; /* no side prefetches; the kernels' own at wpf */
    ts__pfq_init(&q, sp->wpf);
    for (int i = 0; i < sp->nm; i++) { /* the thread's piece of each (its stream), or an even share */
      int64_t r0, r1;
      if (w[i]->npiece == nth) r0 = w[i]->cut[tid], r1 = w[i]->cut[tid + 1];
      else ts__split(w[i]->rows, tid, nth, TS__PACK_ROWS, &r0, &r1);
      const width_act *a = &sp->wa[sp->wi[i]];
      ts__actb ab = a->a;
      ab.pf = &q;
      ts__wmat_gemm(w[i], r0, r1, a->x, a->n, &ab, 1, sp->y, w[i]->rows);
    }
  }
  return TS_OK;
}

/* gbs[c] = median GB/s of `passes` passes with the kernels prefetching wpf[c] bytes ahead, c <
 * nc: ts_measure_run on the wall clock, one warm-up round, `passes` rounds interleaved */
static ts_status stream_at(const ts_llm_model *m, int nt, const int *wpf, int nc, int passes, double *gbs) {
  for (int k = 0; k < nc; k++) gbs[k] = 0;
  const ts_llm_config *c = &m->cfg;
  const int nl = c->n_layer, nm = 7 * nl + 1;
  const ts__wmat **w = malloc((size_t)nm * sizeof *w);
  int *wi = malloc((size_t)nm * sizeof *wi);
  stream_pass *sp = malloc((size_t)nc * sizeof *sp);
  ts_measure_fn *fn = malloc((size_t)nc * sizeof *fn);
  void **args = malloc((size_t)nc * sizeof *args);
  ts_measure_result *res = malloc((size_t)nc * sizeof *res);
  width_act wa[MAX_WIDTHS];
  memset(wa, 0, sizeof wa);
  int nw = 0;
  ts_status st = w && wi && sp && fn && args && res ? TS_OK : ts_error(TS_ERR_OOM, "ts_llm_model_stream_gbs: out of memory");
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
      const bool kform = n % TS_QKK == 0; /* the K-quants' Q8_K form */
      a->a = (ts__actb){n, ts_malloc((size_t)n), ts_malloc((size_t)nb * sizeof(float)), ts_malloc((size_t)nb * sizeof(float)),
                        ts_malloc((size_t)nb * sizeof(int32_t)), ts_malloc((size_t)nb * 8 * sizeof(int32_t)), NULL,
                        kform ? ts_malloc((size_t)n) : NULL, kform ? ts_malloc((size_t)(n / TS_QKK) * sizeof(float)) : NULL,
                        kform ? ts_malloc((size_t)(n / 16) * sizeof(int16_t)) : NULL};
      if (!a->x || !a->a.q || !a->a.d || !a->a.s || !a->a.sum || !a->a.gsum || (kform && (!a->a.kq || !a->a.kd || !a->a.kbs))) {
        st = ts_error(TS_ERR_OOM, "ts_llm_model_stream_gbs: out of memory");
        break;
      }
      ts_rng r;
      ts_rng_seed(&r, (uint64_t)n);
      for (int64_t e = 0; e < n; e++) a->x[e] = (float)ts_rng_normal(&r);
      if (n % TS_QK == 0) {
        qt->act_quantize(n, a->x, a->a.q, a->a.d, a->a.sum, a->a.s);
        if (qt->prep_packed) qt->prep_packed(n, 1, a->a.q, a->a.gsum);
        if (a->a.kq) qt->act_quantize_k(n, a->x, a->a.kq, a->a.kd, a->a.kbs);
      }
    }
    wi[i] = j;
    rmax = w[i]->rows > rmax ? w[i]->rows : rmax;
    bytes += (double)w[i]->rows * (double)w[i]->row_bytes;
  }
  float *y = st == TS_OK ? ts_malloc((size_t)rmax * sizeof *y) : NULL;
  if (st == TS_OK && !y) st = ts_error(TS_ERR_OOM, "ts_llm_model_stream_gbs: out of memory");
  if (st == TS_OK) {
    for (int k = 0; k < nc; k++) {
      sp[k] = (stream_pass){w, wi, wa, y, nm, nt, wpf[k]};
      fn[k] = one_pass, args[k] = &sp[k];
    }
    ts_measure_opts o = ts_measure_opts_default();
    o.warmup = 1, o.rounds = o.max_rounds = passes, o.min_time_s = 0;
    st = ts_measure_run(nc, fn, args, &o, res, NULL);
  }
  for (int k = 0; k < nc && st == TS_OK; k++) {
    const double med = res[k].s.median;
    gbs[k] = med > 0 ? bytes / med * 1e-9 : 0;
  }
  for (int j = 0; j < nw; j++) {
    ts_free(wa[j].x), ts_free(wa[j].a.q), ts_free(wa[j].a.d), ts_free(wa[j].a.s), ts_free(wa[j].a.sum), ts_free(wa[j].a.gsum);
    ts_free(wa[j].a.kq), ts_free(wa[j].a.kd), ts_free(wa[j].a.kbs);
  }
  ts_free(y);
  free(w), free(wi), free(sp), free(fn), free(args), free(res);
  return st;
}

ts_status ts_llm_model_stream_gbs(const ts_llm_model *m, const ts_context *ctx, int passes, double *gbs) {
  if (!m || !gbs) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_stream_gbs: NULL argument");
  if (passes < 1 || passes > 1000) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_stream_gbs: passes = %d (1..1000)", passes);
  const int nt = ctx ? ts_context_threads(ctx) : ts_default_threads();
  const int cur = __atomic_load_n(&m->wpf, __ATOMIC_RELAXED), wpf = cur > 0 ? cur : 0; /* decode's setting */
  /* Under the model's lock: a state created meanwhile on another thread may lay the packed copy
   * out again (when no other state uses it), and this pass reads that layout. The lock is not
   * the model's value: taking it behind the const pointer modifies nothing a reader sees. */
  pthread_mutex_t *lock = &((ts_llm_model *)m)->lock;
  pthread_mutex_lock(lock);
  const ts_status s = stream_at(m, nt, &wpf, 1, passes, gbs);
  pthread_mutex_unlock(lock);
  return s;
}

/* Candidate distances, and the rule: the largest within 2% of the best median (a decode step pauses
 * between phases, at barriers and in attention, and what a longer distance has in flight then
 * carries into the next phase: on the Xeon VM 4 KB and 16 KB once streamed alike, 30.2 and 29.6 GB/s,
 * while decode ran 384 and 413 tok/s), none unless the best beats none by 3% (on Zen 4 none was
 * right; docs/notes/BENCHMARKS.md, issue 7). */
static const int k_wpf[TS_LLM_WPF_CANDIDATES] = {0, 2048, 4096, 16384, 32768};
#define WPF_ROUNDS 5

static int wpf_choose(const double *gbs) {
  double best = 0;
  int choice = 0;
  for (int c = 0; c < TS_LLM_WPF_CANDIDATES; c++) best = gbs[c] > best ? gbs[c] : best;
  if (best > 1.03 * gbs[0])
    for (int c = 0; c < TS_LLM_WPF_CANDIDATES; c++)
      if (gbs[c] >= 0.98 * best) choice = k_wpf[c];
  return choice;
}

/* ---- the measured distance as an artifact ("llm-wpf"): one per model weights, team, cpu and
 * kernels, so a second process loading the same model on the same machine reads the choice ---- */

static const ts__artifact_kind k_llm_wpf = {"llm-wpf", 1};

/* The key: the weights' identity (each streamed matrix's name, type, shape and row bytes, in
 * decode's order; not their values), the team, the cpu, the kernels and the candidates. */
static void wpf_key(const ts_llm_model *m, int nt, char key[17]) {
  ts_hash h;
  ts_hash_init(&h, "llm-wpf-v1");
  for (int l = 0; l <= m->cfg.n_layer; l++) {
    const ts__llm_layer *L = l < m->cfg.n_layer ? &m->layers[l] : NULL;
    const ts__wmat *lw[] = {L ? &L->wk : &m->output, L ? &L->wv : NULL, L ? &L->wq : NULL, L ? &L->wo : NULL,
                            L ? &L->gate : NULL, L ? &L->up : NULL, L ? &L->down : NULL};
    for (int i = 0; i < 7 && lw[i]; i++) {
      ts_hash_str(&h, lw[i]->name);
      ts_hash_i64(&h, lw[i]->type), ts_hash_i64(&h, lw[i]->rows), ts_hash_i64(&h, lw[i]->cols);
      ts_hash_i64(&h, (int64_t)lw[i]->row_bytes);
    }
  }
  ts_hash_i64(&h, (int64_t)m->weight_bytes);
  ts_hash_i64(&h, nt), ts_hash_i64(&h, m->layout_nt);
  ts_hash_str(&h, ts_cpu()->model);
  ts_hash_str(&h, ts_isa_name(ts__quant()->isa));
  ts_hash_bytes(&h, k_wpf, sizeof k_wpf);
  ts_hash_hex(&h, key);
}

typedef struct wpf_ctx {
  const ts_llm_model *m;
  int nt;
  ts_llm_wpf_report *r;
} wpf_ctx;

static ts_status wpf_accept(void *arg, const cJSON *data, const ts_provenance *prov) {
  wpf_ctx *c = arg;
  ts_provenance here;
  ts_provenance_here(&here, ts__quant()->isa, c->nt);
  if (!ts_provenance_matches(prov, &here, TS_PROV_THREADS, NULL, 0))
    return ts_error(TS_ERR_NOT_FOUND, "llm-wpf: made on another machine");
  const cJSON *team = cJSON_GetObjectItemCaseSensitive(data, "team");
  const cJSON *cands = cJSON_GetObjectItemCaseSensitive(data, "candidates");
  if (!cJSON_IsNumber(team) || team->valuedouble != c->nt || !cJSON_IsArray(cands) ||
      cJSON_GetArraySize(cands) != TS_LLM_WPF_CANDIDATES)
    return ts_error(TS_ERR_FORMAT, "llm-wpf: expected team %d and %d candidates", c->nt, TS_LLM_WPF_CANDIDATES);
  double gbs[TS_LLM_WPF_CANDIDATES];
  for (int i = 0; i < TS_LLM_WPF_CANDIDATES; i++) {
    const cJSON *e = cJSON_GetArrayItem(cands, i);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes"), *g = cJSON_GetObjectItemCaseSensitive(e, "stream_gbs");
    if (!cJSON_IsNumber(b) || b->valuedouble != k_wpf[i] || !cJSON_IsNumber(g) || !(g->valuedouble > 0 && g->valuedouble < 1e7))
      return ts_error(TS_ERR_FORMAT, "llm-wpf: candidate %d is not {bytes: %d, stream_gbs > 0}", i, k_wpf[i]);
    gbs[i] = g->valuedouble;
  }
  /* the choice is remade from the figures by this build's rule (the stored one is for readers) */
  for (int i = 0; i < TS_LLM_WPF_CANDIDATES; i++) c->r->gbs[i] = gbs[i];
  c->r->bytes = wpf_choose(gbs);
  c->r->measured = 1, c->r->cached = 1;
  return TS_OK;
}

static ts_status wpf_compute(void *arg, cJSON **data, ts_provenance *prov) {
  wpf_ctx *c = arg;
  *data = NULL;
  if (stream_at(c->m, c->nt, k_wpf, TS_LLM_WPF_CANDIDATES, WPF_ROUNDS, c->r->gbs) != TS_OK) {
    ts_error_clear(); /* performance only: decode runs without, nothing is stored */
    memset(c->r->gbs, 0, sizeof c->r->gbs);
    return TS_OK;
  }
  c->r->measured = 1, c->r->cached = 0;
  c->r->bytes = wpf_choose(c->r->gbs);
  cJSON *d = cJSON_CreateObject(), *cands = cJSON_AddArrayToObject(d, "candidates");
  bool ok = d && cands && cJSON_AddNumberToObject(d, "bytes", c->r->bytes) && cJSON_AddNumberToObject(d, "team", c->nt);
  for (int i = 0; ok && i < TS_LLM_WPF_CANDIDATES; i++) {
    cJSON *e = cJSON_CreateObject();
    ok = e && cJSON_AddItemToArray(cands, e) && cJSON_AddNumberToObject(e, "bytes", k_wpf[i]) &&
         cJSON_AddNumberToObject(e, "stream_gbs", c->r->gbs[i]);
  }
  if (!ok) {
    cJSON_Delete(d);
    return TS_OK; /* kept in memory only */
  }
  ts_provenance_here(prov, ts__quant()->isa, c->nt);
  snprintf(prov->clock, sizeof prov->clock, "%s", ts_clock_name(TS_CLOCK_WALL));
  *data = d;
  return TS_OK;
}

static ts_status wpf_check(void *arg, const cJSON *data) {
  wpf_ctx *c = arg;
  ts_llm_wpf_report r = *c->r;
  wpf_ctx cc = {c->m, c->nt, &r};
  ts_provenance here;
  ts_provenance_here(&here, ts__quant()->isa, c->nt);
  return wpf_accept(&cc, data, &here);
}

void ts__llm_tune_wpf(ts_llm_model *m, int nt, uint64_t min_bytes) {
  ts_llm_wpf_report r;
  memset(&r, 0, sizeof r);
  r.team = nt;
  for (int c = 0; c < TS_LLM_WPF_CANDIDATES; c++) r.candidates[c] = k_wpf[c];
  if (m->weight_bytes >= min_bytes && m->layout_nt > 0) { /* packed kernels only: they prefetch */
    char key[17];
    wpf_key(m, nt, key);
    wpf_ctx c = {m, nt, &r};
    const ts__artifact_ops ops = {k_llm_wpf, wpf_accept, wpf_compute, wpf_check};
    cJSON *data = NULL;
    ts_provenance prov;
    if (m->wpf_fresh) { /* asked for (ts_llm_model_set_weight_prefetch(m, -1)): measure, replace */
      if (wpf_compute(&c, &data, &prov) == TS_OK && data && ts__artifact_store(&k_llm_wpf, key, data, &prov) != TS_OK)
        ts_error_clear(); /* a read-only cache: the choice still holds for this process */
      cJSON_Delete(data);
      m->wpf_fresh = false;
    } else if (ts__artifact_get(&ops, key, &c, NULL) != TS_OK) {
      ts_error_clear(); /* no cache directory: measure for this process only */
      if (wpf_compute(&c, &data, &prov) != TS_OK) ts_error_clear();
      cJSON_Delete(data);
    }
  }
  if (!r.measured) r.bytes = 0;
  m->wpf_rep = r;
  __atomic_store_n(&m->wpf, r.bytes, __ATOMIC_RELAXED);
}
