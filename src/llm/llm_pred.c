/* Activation predictors (tessera/llm_pred.h): the predictor object, what decode builds from W_gate
 * (sign and magnitude bits, per-row values), and the decode phase that replaces the dense gate and
 * up of a layer: thread t predicts its own neurons (the dense split of gate and up), reads gate's
 * rows of those predicted active, up's rows of those whose gate is positive, and writes
 * h = relu(gate) up for every one of its neurons (0 for the rest); after a barrier down runs over
 * the nonzero h from its neuron-major copy (llm_sparse.c's phase C). No barrier is added to dense
 * decode's count, and no thread reads another's predictions. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_pred_internal.h"

const char *ts_llm_pred_kind_name(ts_llm_pred_kind k) {
  switch (k) {
    case TS_LLM_PRED_NONE: return "none";
    case TS_LLM_PRED_SIGNBIT: return "signbit";
    case TS_LLM_PRED_GRASP: return "grasp";
    case TS_LLM_PRED_LEARNED: return "learned";
    case TS_LLM_PRED_ORACLE: return "oracle";
  }
  return "?";
}

ts_status ts_llm_pred_kind_parse(const char *s, ts_llm_pred_kind *out) {
  for (int k = TS_LLM_PRED_NONE; k <= TS_LLM_PRED_ORACLE; k++)
    if (s && !strcmp(s, ts_llm_pred_kind_name((ts_llm_pred_kind)k))) {
      *out = (ts_llm_pred_kind)k;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "predictor \"%.32s\" is not one of none, signbit, grasp, learned, oracle", s ? s : "(null)");
}

ts_status ts_llm_predictor_create(ts_llm_predictor **out, const ts_llm_model *m, ts_llm_pred_kind kind) {
  if (!out || !m) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_predictor_create: NULL argument");
  *out = NULL;
  const ts_llm_config *c = ts_llm_model_config(m);
  if (c->ffn_act != TS_LLM_ACT_RELU)
    return ts_error(TS_ERR_UNSUPPORTED, "predictor %s needs a ReLU-gated model; %s is %s-gated (its zeros are not exact)",
                    ts_llm_pred_kind_name(kind), c->name[0] ? c->name : c->arch, ts_llm_act_name(c->ffn_act));
  if (kind == TS_LLM_PRED_NONE || kind > TS_LLM_PRED_ORACLE)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_predictor_create: no predictor kind %d", (int)kind);
  if (c->d_model > 64 * TS__PRED_MAXW)
    return ts_error(TS_ERR_UNSUPPORTED, "predictors take d_model up to %d (the model has %d)", 64 * TS__PRED_MAXW, c->d_model);
  TS_TRY(ts__predictor_alloc(out, c->n_layer, c->d_model, c->n_ff, kind));
  ts_llm_model_key(m, (*out)->info.model_key);
  snprintf((*out)->info.model_name, sizeof (*out)->info.model_name, "%s", c->name);
  return TS_OK;
}

ts_status ts__predictor_alloc(ts_llm_predictor **out, int n_layer, int d, int n_ff, ts_llm_pred_kind kind) {
  *out = NULL;
  ts_llm_predictor *p = ts_calloc(1, sizeof *p);
  if (!p) return ts_error(TS_ERR_OOM, "predictor: out of memory");
  p->n_layer = n_layer, p->d = d, p->n_ff = n_ff;
  p->layer = ts_calloc((size_t)n_layer, sizeof *p->layer);
  if (!p->layer) {
    ts_free(p);
    return ts_error(TS_ERR_OOM, "predictor: out of memory");
  }
  for (int l = 0; l < n_layer; l++) p->layer[l].alpha = 1.0f, p->layer[l].k = 3.0f;
  p->info.kind = kind;
  *out = p;
  return TS_OK;
}

void ts_llm_predictor_destroy(ts_llm_predictor *p) {
  if (!p) return;
  if (p->mlp)
    for (int l = 0; l < p->n_layer; l++) ts__pmlp_free(&p->mlp[l]);
  ts_free(p->mlp);
  ts_free(p->layer);
  ts_free(p);
}

int ts_llm_predictor_n_layer(const ts_llm_predictor *p) { return p->n_layer; }
ts_llm_pred_layer *ts_llm_predictor_layer(ts_llm_predictor *p, int l) { return l >= 0 && l < p->n_layer ? &p->layer[l] : NULL; }
const ts_llm_pred_layer *ts_llm_predictor_layer_const(const ts_llm_predictor *p, int l) {
  return l >= 0 && l < p->n_layer ? &p->layer[l] : NULL;
}
ts_llm_pred_info *ts_llm_predictor_info(ts_llm_predictor *p) { return &p->info; }
const ts_llm_pred_info *ts_llm_predictor_info_const(const ts_llm_predictor *p) { return &p->info; }

ts_status ts_llm_predictor_set_alpha(ts_llm_predictor *p, float alpha) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_predictor_set_alpha: NULL predictor");
  if (p->info.kind != TS_LLM_PRED_SIGNBIT) return ts_error(TS_ERR_INVALID_ARG, "alpha is the sign-bit predictor's knob, not %s's", ts_llm_pred_kind_name(p->info.kind));
  if (!(alpha >= TS_LLM_PRED_ALPHA_MIN && alpha <= TS_LLM_PRED_ALPHA_MAX))
    return ts_error(TS_ERR_INVALID_ARG, "alpha %g is outside [%g, %g]", (double)alpha, (double)TS_LLM_PRED_ALPHA_MIN, (double)TS_LLM_PRED_ALPHA_MAX);
  for (int l = 0; l < p->n_layer; l++) p->layer[l].alpha = alpha;
  p->info.false_skip = 0;
  return TS_OK;
}

uint64_t ts_llm_predictor_bytes(const ts_llm_predictor *p, const ts_llm_model *m) {
  (void)m;
  const uint64_t nw = (uint64_t)(p->d + 63) / 64, n = (uint64_t)p->n_ff, L = (uint64_t)p->n_layer;
  switch (p->info.kind) {
    case TS_LLM_PRED_SIGNBIT: return L * n * nw * 8;
    case TS_LLM_PRED_GRASP: return L * n * (2 * nw * 8 + 3 * sizeof(float)); /* + the outliers' columns, counted as read */
    case TS_LLM_PRED_LEARNED: {
      uint64_t b = 0;
      for (int l = 0; p->mlp && l < p->n_layer; l++) b += ts__pmlp_bytes(&p->mlp[l]);
      return b;
    }
    default: return 0;
  }
}

/* ---- what decode builds from W_gate ---------------------------------------------------------- */

void ts__pred_row_codes(const float *w, int64_t d, uint64_t *sw, uint64_t *bw, float *u0, float *u1, float *rho, float *scratch) {
  const int nw = (int)((d + 63) / 64);
  memset(sw, 0, (size_t)nw * sizeof *sw);
  double ss = 0;
  for (int64_t j = 0; j < d; j++) {
    if (signbit(w[j])) sw[j >> 6] |= (uint64_t)1 << (j & 63);
    scratch[j] = fabsf(w[j]);
    ss += (double)w[j] * w[j];
  }
  if (!bw) return;
  *rho = (float)sqrt(ss / (double)d);
  qsort(scratch, (size_t)d, sizeof *scratch, ts_cmp_float);
  const float med = scratch[d / 2];
  memset(bw, 0, (size_t)nw * sizeof *bw);
  double s0 = 0, s1 = 0;
  int64_t n0 = 0, n1 = 0;
  for (int64_t j = 0; j < d; j++) {
    const float a = fabsf(w[j]);
    if (a > med) bw[j >> 6] |= (uint64_t)1 << (j & 63), s1 += a, n1++;
    else s0 += a, n0++;
  }
  *u0 = n0 ? (float)(s0 / (double)n0) : 0.0f;
  *u1 = n1 ? (float)(s1 / (double)n1) : *u0;
}

void ts__pred_free(ts__pred *pr) {
  if (!pr) return;
  if (pr->mlp)
    for (int l = 0; l < pr->nlayer; l++) ts__pmlp_free(&pr->mlp[l]);
  ts_free(pr->mlp);
  ts_free(pr->knob);
  ts_free(pr->L);
  ts_free(pr->mem);
  ts_free(pr);
}

ts_status ts__pmlp_copy(ts__pmlp *dst, const ts__pmlp *src) {
  *dst = *src;
  const size_t nf = (size_t)src->r * (size_t)src->d + (size_t)src->r + (size_t)src->n * (size_t)src->r + (size_t)src->n;
  float *mem = malloc(nf * sizeof(float)); /* ts__pmlp_free frees w1 with free() */
  if (!mem) {
    memset(dst, 0, sizeof *dst);
    return ts_error(TS_ERR_OOM, "predictor: out of memory");
  }
  memcpy(mem, src->w1, nf * sizeof(float)); /* one allocation laid out w1 | b1 | w2 | b2 */
  dst->w1 = mem, dst->b1 = mem + (size_t)src->r * (size_t)src->d, dst->w2 = dst->b1 + src->r;
  dst->b2 = dst->w2 + (size_t)src->n * (size_t)src->r;
  return TS_OK;
}

ts_status ts__pred_init(ts__pred *pr, const ts_llm_model *m, const ts_llm_predictor *p, bool measure) {
  const ts_llm_config *c = &m->cfg;
  const int64_t d = c->d_model, n = c->n_ff;
  const int nw = (int)((d + 63) / 64);
  const ts_llm_pred_kind kind = p->info.kind;
  pr->kind = kind, pr->nw = nw, pr->measure = measure, pr->nlayer = c->n_layer;
  pr->knob = ts_malloc((size_t)c->n_layer * sizeof *pr->knob);
  pr->L = ts_calloc((size_t)c->n_layer, sizeof *pr->L);
  if (!pr->knob || !pr->L) return ts_error(TS_ERR_OOM, "predictor: out of memory");
  memcpy(pr->knob, p->layer, (size_t)c->n_layer * sizeof *pr->knob);
  if (kind == TS_LLM_PRED_LEARNED) {
    if (!p->mlp) return ts_error(TS_ERR_INVALID_ARG, "the learned predictor has no weights (calibrate or load one)");
    pr->mlp = ts_calloc((size_t)c->n_layer, sizeof *pr->mlp);
    if (!pr->mlp) return ts_error(TS_ERR_OOM, "predictor: out of memory");
    for (int l = 0; l < c->n_layer; l++) {
      if (p->mlp[l].d != d || p->mlp[l].n != n) return ts_error(TS_ERR_SHAPE, "learned predictor layer %d is %d -> %d, the model's MLP %lld -> %lld", l, p->mlp[l].d, p->mlp[l].n, (long long)d, (long long)n);
      TS_TRY(ts__pmlp_copy(&pr->mlp[l], &p->mlp[l]));
    }
    pr->bytes_per_token = ts_llm_predictor_bytes(p, m);
    return TS_OK;
  }
  const bool grasp = kind == TS_LLM_PRED_GRASP;
  const size_t bits = (size_t)n * (size_t)nw * sizeof(uint64_t), per = bits * (grasp ? 2 : 1) + (grasp ? 3 * (size_t)n * sizeof(float) : 0);
  pr->mem = ts_malloc_huge(per * (size_t)c->n_layer + 64);
  float *row = ts_malloc(2 * (size_t)d * sizeof(float));
  if (!pr->mem || !row) {
    ts_free(row);
    return ts_error(TS_ERR_OOM, "predictor: out of memory for the gate's bits (%.1f MiB)", per * (double)c->n_layer / 1048576.0);
  }
  uint8_t *q = pr->mem;
  for (int l = 0; l < c->n_layer; l++) {
    ts__pred_layer *P = &pr->L[l];
    P->sw = (uint64_t *)q, q += bits;
    if (grasp) {
      P->bw = (uint64_t *)q, q += bits;
      P->u0 = (float *)q, q += (size_t)n * sizeof(float);
      P->u1 = (float *)q, q += (size_t)n * sizeof(float);
      P->rho = (float *)q, q += (size_t)n * sizeof(float);
    }
    const ts__wmat *G = &m->layers[l].gate;
    for (int64_t i = 0; i < n; i++) {
      ts__dequant_ref(G->type, G->data + (size_t)i * G->row_bytes, row, d);
      ts__pred_row_codes(row, d, P->sw + (size_t)i * (size_t)nw, grasp ? P->bw + (size_t)i * (size_t)nw : NULL,
                         grasp ? &P->u0[i] : NULL, grasp ? &P->u1[i] : NULL, grasp ? &P->rho[i] : NULL, row + d);
    }
  }
  ts_free(row);
  pr->bytes_per_token = ts_llm_predictor_bytes(p, m);
  return TS_OK;
}

size_t ts__pred_scratch_bytes(const ts_llm_config *c) {
  /* ts__pred_x, outlier indices and values [d], the measured gate and the learned hidden [n_ff + 256] */
  return ((sizeof(ts__pred_x) + 63) & ~(size_t)63) + 2 * (size_t)c->d_model * 4 + ((size_t)c->n_ff + 256) * 4 +
         (size_t)c->n_ff + 256;
}

/* ---- decode ------------------------------------------------------------------------------------ */

void ts__pred_mlp_a(ts_llm_state *s, int tid, int l) {
  const ts_llm_config *c = &s->m->cfg;
  const ts_llm_sparse *sp = s->sp;
  const ts__pred *pr = sp->pr;
  ts__sparse_ws *w = s->spw;
  const float *xf;
  int64_t ldx, f0, f1;
  ts__sparse_prep(s, tid, l, &xf, &ldx);
  ts__ff_part(c, tid, s->nrun, &f0, &f1);
  if (f1 <= f0) return;
  const int64_t d = c->d_model, n = f1 - f0;
  const int nw = pr->nw;
  const ts_llm_pred_layer *K = &pr->knob[l];
  const ts__pred_layer *P = &pr->L[l];
  const ts__pred_kern *pk = ts__pred_kern_active();
  uint8_t *scr = w->pred[tid];
  ts__pred_x *px = (ts__pred_x *)scr;
  int32_t *oidx = (int32_t *)(scr + ((sizeof(ts__pred_x) + 63) & ~(size_t)63));
  float *oval = (float *)(oidx + d), *gm = oval + d; /* gm: the measured gate [n_ff], or the learned hidden */
  uint8_t *flag = (uint8_t *)(gm + c->n_ff + 256);    /* measure: predicted active, [n_ff] (kept zeroed) */
  int32_t *idx = w->idx[tid];
  float *sc = w->coef[tid], *y = w->y[tid];
  double *ct = ts__sp_cnt(s, tid, l);
  int k = 0;
  double pbytes = 0;
  const double tp0 = tid == 0 ? ts_now() : 0;
  switch (pr->kind) {
    case TS_LLM_PRED_SIGNBIT: {
      ts__pred_codes(xf, d, 0, false, px, NULL, NULL);
      int32_t *neg = (int32_t *)sc;
      pk->signs(P->sw + (size_t)f0 * (size_t)nw, nw, px->sx, n, neg);
      /* n_neg > alpha n_pos  <=>  n_neg > alpha d / (1 + alpha): one integer bound per layer (in
       * double, so the count comparison is exact), and a branchless list (about half the
       * neurons pass: a branch per neuron mispredicts half the time) */
      const int32_t T = (int32_t)floor((double)K->alpha * (double)d / (1.0 + (double)K->alpha) + 1e-3); /* + 1e-3: a
       * calibrated alpha is a float ratio n0 / (d - n0), whose bound must come back as n0, not n0 - 1 */
      for (int64_t i = 0; i < n; i++) {
        idx[k] = (int32_t)(f0 + i);
        k += neg[i] <= T;
      }
      pbytes = (double)n * (double)nw * 8;
      break;
    }
    case TS_LLM_PRED_GRASP: {
      const int no = ts__pred_codes(xf, d, K->k, true, px, oidx, oval);
      pk->grasp(P->sw + (size_t)f0 * (size_t)nw, P->bw + (size_t)f0 * (size_t)nw, nw, px, n, P->u0 + f0, P->u1 + f0, sc);
      const ts__tmat *Gt = &sp->tm[(size_t)l * TS_LLM_NPROJ + TS_LLM_PROJ_GATE];
      memset(y, 0, (size_t)n * sizeof *y);
      ts__tmat_axpy(ts__sparse_kern_active(), Gt, f0, f1, oidx, oval, no, y);
      double xx = 0;
      for (int64_t j = 0; j < d; j++) xx += (double)xf[j] * xf[j];
      const float xn = (float)sqrt(xx), tau = K->tau;
      for (int64_t i = 0; i < n; i++) {
        idx[k] = (int32_t)(f0 + i);
        k += !(sc[i] + y[i] < -tau * xn * P->rho[f0 + i]);
      }
      pbytes = (double)n * (2.0 * nw * 8 + 3 * sizeof(float)) + (double)no * (double)n / 32 * (double)Gt->bsz;
      break;
    }
    case TS_LLM_PRED_LEARNED: {
      const ts__pmlp *M = &pr->mlp[l];
      ts__pmlp part = *M; /* the thread's logits only: rows [f0, f1) of W2 */
      part.w2 = M->w2 + (size_t)f0 * (size_t)M->r, part.b2 = M->b2 + f0, part.n = (int)n;
      ts__pmlp_logits(&part, xf, sc, gm);
      for (int64_t i = 0; i < n; i++) {
        idx[k] = (int32_t)(f0 + i);
        k += !(sc[i] < K->tau);
      }
      pbytes = (double)ts__pmlp_bytes(&part);
      break;
    }
    default: break;
  }
  if (tid == 0) ct[TS__SP_PTIME] += ts_now() - tp0;
  if (pr->measure)
    for (int j = 0; j < k; j++) flag[idx[j] - f0] = 1;
  ct[TS__SP_PACT] += (double)k;
  ct[TS__SP_PBYTES] += pbytes;
  /* gate rows of the predicted active, then up rows of the positive ones */
  const ts__llm_layer *L = &s->m->layers[l];
  const ts__actb *xb = &s->tb[tid].act;
  const ts_quant_act xq = {.n = c->d_model, .q = xb->q, .d = xb->d, .sum = xb->sum, .s = xb->s, .kq = xb->kq, .kd = xb->kd, .kbs = xb->kbs};
  const ts__sparse_kern *sk = ts__sparse_kern_active();
  const ts__wmat *mats[2] = {&L->gate, &L->up};
  float *outs[2] = {sc, y};
  int cnts[2] = {k, 0};
  for (int q = 0; q < 2; q++) {
    const ts__wmat *W = mats[q];
    const ts__gdot_fn gdot = ts__sparse_gdot(sk, W->type);
    if (gdot) gdot(W->data, W->row_bytes, idx, cnts[q], &xq, outs[q]);
    else {
      const ts__dot_fn dot = ts__quant_dot_fn(ts__quant(), W->type);
      for (int j = 0; j < cnts[q]; j++) outs[q][j] = dot(W->cols, W->data + (size_t)idx[j] * W->row_bytes, s->tb[tid].xn, &xq);
    }
    ct[TS__SP_BYTES + (q ? TS_LLM_PROJ_UP : TS_LLM_PROJ_GATE)] += (double)cnts[q] * (double)W->row_bytes;
    if (q == 0) { /* keep the positive gates */
      int k2 = 0;
      for (int j = 0; j < k; j++) {
        idx[k2] = idx[j], sc[k2] = sc[j];
        k2 += sc[j] > 0.0f;
      }
      cnts[1] = k2;
    }
  }
  float *h = w->h;
  memset(h + f0, 0, (size_t)n * sizeof *h);
  for (int j = 0; j < cnts[1]; j++) h[idx[j]] = sc[j] * y[j];
  ct[TS__SP_ACT] += (double)cnts[1];
  ct[TS__SP_ACT_TOT] += (double)n;
  if (pr->measure) { /* every gate row: how many active neurons were dropped, how many zeros skipped */
    ts__wmat_gemm(&L->gate, f0, f1, xf, ldx, &s->tb[tid].act, 1, gm - f0, c->n_ff);
    int64_t act = 0, fs = 0, cs = 0;
    for (int64_t i = f0; i < f1; i++) {
      const bool on = flag[i - f0];
      if (gm[i - f0] > 0.0f) act++, fs += !on;
      else cs += !on;
    }
    memset(flag, 0, (size_t)n);
    ct[TS__SP_M_ACT] += (double)act;
    ct[TS__SP_M_FS] += (double)fs;
    ct[TS__SP_M_CS] += (double)cs;
  }
}
