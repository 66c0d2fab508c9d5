/* Calibration of the activation predictors (tessera/llm_pred.h): the dense model's normalized MLP
 * inputs and gate signs on calibration windows (an observer on the dense forward pass), each
 * predictor's score for every (token, neuron), and each layer's knob at the false-skip budget.
 *
 * A score is larger where the neuron is more surely zero, and a neuron is predicted zero iff its
 * score exceeds the layer's knob theta: signbit n_neg / n_pos (theta = alpha), grasp
 * -est / (|x| rms(w_i)) (theta = tau), learned -logit (theta = -tau). The knob is the smallest
 * score value at which at most F of the active (token, neuron) pairs score above it. The learned
 * predictor trains on the first 3/4 of the tokens and sets its knob on the last quarter (its own
 * training tokens would understate its false skips); the training-free ones use every token. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_pred_internal.h"

struct ts_llm_pred_calib {
  const ts_llm_model *m;
  int n_layer, d, n;
  int64_t T, cap, pos;
  float *X;   /* [n_layer][cap][d] */
  uint8_t *Y; /* [n_layer][cap][n] gate > 0 */
  char text[128];
};

ts_llm_pred_opts ts_llm_pred_opts_default(void) {
  return (ts_llm_pred_opts){.window = 512, .max_tokens = 8192, .k = 3.0f, .hidden = 64, .epochs = 8};
}

static void observe(void *arg, ts_llm_state *s, int l, int point, int T) {
  ts_llm_pred_calib *c = arg;
  const ts_llm_config *cf = &s->m->cfg;
  int64_t Tp = T;
  if (c->pos + Tp > c->cap) Tp = c->cap - c->pos;
  if (Tp <= 0) return;
  if (point == TS__CAP_X_FFN) {
    float *X = c->X + ((size_t)l * (size_t)c->cap + (size_t)c->pos) * (size_t)c->d;
    for (int64_t t = 0; t < Tp; t++)
      s->ops->rmsnorm(c->d, s->x + (size_t)t * (size_t)c->d, s->m->layers[l].ffn_norm, cf->rms_eps, X + (size_t)t * (size_t)c->d);
  } else if (point == TS__CAP_GATE_UP) {
    uint8_t *Y = c->Y + ((size_t)l * (size_t)c->cap + (size_t)c->pos) * (size_t)c->n;
    for (size_t i = 0; i < (size_t)Tp * (size_t)c->n; i++) Y[i] = s->ffg[i] > 0.0f;
  }
}

void ts_llm_pred_calib_destroy(ts_llm_pred_calib *c) {
  if (!c) return;
  ts_free(c->X);
  ts_free(c->Y);
  ts_free(c);
}

ts_status ts_llm_pred_collect(ts_llm_pred_calib **out, ts_llm_state *s, const int32_t *tokens, size_t n,
                              const ts_llm_pred_opts *o) {
  if (!out || !s || !tokens || !o) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_pred_collect: NULL argument");
  *out = NULL;
  ts_llm_model *m = s->m;
  const ts_llm_config *cf = &m->cfg;
  if (cf->ffn_act != TS_LLM_ACT_RELU)
    return ts_error(TS_ERR_UNSUPPORTED, "predictor calibration needs a ReLU-gated model; %s is %s-gated", cf->name[0] ? cf->name : cf->arch,
                    ts_llm_act_name(cf->ffn_act));
  const int win = o->window;
  if (win < 2 || win > s->n_ctx || win > s->n_batch)
    return ts_error(TS_ERR_INVALID_ARG, "calibration window %d must be in 2..min(context %d, batch %d)", win, s->n_ctx, s->n_batch);
  if (n < (size_t)win) return ts_error(TS_ERR_INVALID_ARG, "calibration text has %zu tokens, less than one window of %d", n, win);
  if (o->max_tokens < win) return ts_error(TS_ERR_INVALID_ARG, "max_tokens %lld is below one window (%d)", (long long)o->max_tokens, win);
  const size_t nwin_all = n / (size_t)win;
  size_t nwin = (size_t)(o->max_tokens / win);
  if (nwin > nwin_all) nwin = nwin_all;
  ts_llm_pred_calib *c = ts_calloc(1, sizeof *c);
  if (!c) return ts_error(TS_ERR_OOM, "predictor calibration: out of memory");
  c->m = m, c->n_layer = cf->n_layer, c->d = cf->d_model, c->n = cf->n_ff;
  c->cap = (int64_t)(nwin * (size_t)win);
  snprintf(c->text, sizeof c->text, "%s", o->text_name ? o->text_name : "");
  c->X = ts_malloc((size_t)c->n_layer * (size_t)c->cap * (size_t)c->d * sizeof(float));
  c->Y = ts_malloc((size_t)c->n_layer * (size_t)c->cap * (size_t)c->n);
  int32_t *buf = ts_malloc((size_t)win * sizeof *buf);
  ts_status st = c->X && c->Y && buf ? TS_OK : ts_error(TS_ERR_OOM, "predictor calibration: out of memory for %lld tokens", (long long)c->cap);
  const ts_llm_sparse *keep = s->sp;
  s->sp = NULL; /* the dense model */
  s->cap = observe, s->cap_ctx = c;
  const int32_t bos = ts_llm_vocab_add_bos(m->vocab) ? ts_llm_vocab_bos(m->vocab) : -1;
  ts_progress pg;
  if (o->progress) ts_progress_begin(&pg, "predictor calibration (tokens)", c->cap);
  for (size_t w = 0; w < nwin && st == TS_OK; w++) {
    memcpy(buf, tokens + w * (size_t)win, (size_t)win * sizeof *buf);
    if (bos >= 0) buf[0] = bos;
    st = ts_llm_eval(s, buf, win, 0, TS_LLM_LOGITS_NONE, NULL); /* position 0: from an empty cache */
    c->pos += win;
    if (o->progress) ts_progress_update(&pg, c->pos);
  }
  if (o->progress) ts_progress_end(&pg);
  s->cap = NULL, s->cap_ctx = NULL;
  s->sp = keep;
  ts_free(buf);
  c->T = c->pos;
  if (st != TS_OK) {
    ts_llm_pred_calib_destroy(c);
    return st;
  }
  *out = c;
  return TS_OK;
}

/* ---- scores -------------------------------------------------------------------------------- */

/* W_gate of layer l dequantized [n][d] */
static ts_status gate_rows(const ts_llm_model *m, int l, float **out) {
  const ts__wmat *G = &m->layers[l].gate;
  float *W = ts_malloc((size_t)G->rows * (size_t)G->cols * sizeof(float));
  if (!W) return ts_error(TS_ERR_OOM, "predictor calibration: out of memory");
  for (int64_t i = 0; i < G->rows; i++) ts__dequant_ref(G->type, G->data + (size_t)i * G->row_bytes, W + (size_t)i * (size_t)G->cols, G->cols);
  *out = W;
  return TS_OK;
}

/* Scores of tokens [t0, t1) of layer l into S[(t - t0) * n + i]. */
static ts_status layer_scores(const ts_llm_pred_calib *c, ts_llm_pred_kind kind, int l, float k, const ts__pmlp *mlp,
                              int64_t t0, int64_t t1, float *S) {
  const int d = c->d, n = c->n, nw = (d + 63) / 64;
  const ts__pred_kern *pk = ts__pred_kern_active();
  float *W = NULL;
  TS_TRY(gate_rows(c->m, l, &W));
  uint64_t *sw = ts_malloc((size_t)n * (size_t)nw * 2 * sizeof(uint64_t));
  float *u = ts_malloc(((size_t)3 * (size_t)n + 2 * (size_t)d + 512) * sizeof(float));
  ts__pred_x *px = ts_malloc(sizeof *px);
  int32_t *oidx = ts_malloc((size_t)d * sizeof *oidx), *neg = ts_malloc((size_t)n * sizeof *neg);
  ts_status st = sw && u && px && oidx && neg ? TS_OK : ts_error(TS_ERR_OOM, "predictor calibration: out of memory");
  if (st == TS_OK) {
    uint64_t *bw = sw + (size_t)n * (size_t)nw;
    float *u0 = u, *u1 = u + n, *rho = u + 2 * n, *oval = u + 3 * n, *scr = oval + d;
    for (int i = 0; i < n; i++)
      ts__pred_row_codes(W + (size_t)i * (size_t)d, d, sw + (size_t)i * (size_t)nw, bw + (size_t)i * (size_t)nw, &u0[i], &u1[i], &rho[i], scr);
    for (int64_t t = t0; t < t1; t++) {
      const float *x = c->X + ((size_t)l * (size_t)c->cap + (size_t)t) * (size_t)d;
      float *s = S + (size_t)(t - t0) * (size_t)n;
      if (kind == TS_LLM_PRED_SIGNBIT) {
        ts__pred_codes(x, d, 0, false, px, NULL, NULL);
        pk->signs(sw, nw, px->sx, n, neg);
        for (int i = 0; i < n; i++) s[i] = d - neg[i] > 0 ? (float)neg[i] / (float)(d - neg[i]) : FLT_MAX;
      } else if (kind == TS_LLM_PRED_GRASP) {
        const int no = ts__pred_codes(x, d, k, true, px, oidx, oval);
        pk->grasp(sw, bw, nw, px, n, u0, u1, s);
        double xx = 0;
        for (int j = 0; j < d; j++) xx += (double)x[j] * x[j];
        const float xn = (float)sqrt(xx);
        for (int i = 0; i < n; i++) {
          float e = s[i];
          for (int q = 0; q < no; q++) e += oval[q] * W[(size_t)i * (size_t)d + (size_t)oidx[q]];
          const float sc = xn * rho[i];
          s[i] = sc > 0 ? -e / sc : 0.0f;
        }
      } else { /* learned */
        ts__pmlp_logits(mlp, x, s, scr);
        for (int i = 0; i < n; i++) s[i] = -s[i];
      }
    }
  }
  ts_free(W), ts_free(sw), ts_free(u), ts_free(px), ts_free(oidx), ts_free(neg);
  return st;
}

/* Split S's scores into the actives' and the zeros', each sorted ascending. */
static ts_status split_sorted(const ts_llm_pred_calib *c, int l, int64_t t0, int64_t t1, const float *S, float **act,
                              int64_t *na, float **zero, int64_t *nz) {
  const size_t tot = (size_t)(t1 - t0) * (size_t)c->n;
  const uint8_t *Y = c->Y + ((size_t)l * (size_t)c->cap + (size_t)t0) * (size_t)c->n;
  int64_t a = 0;
  for (size_t i = 0; i < tot; i++) a += Y[i] != 0;
  float *A = ts_malloc(((size_t)a + 1) * sizeof *A), *Z = ts_malloc((tot - (size_t)a + 1) * sizeof *Z);
  if (!A || !Z) {
    ts_free(A), ts_free(Z);
    return ts_error(TS_ERR_OOM, "predictor calibration: out of memory");
  }
  int64_t ia = 0, iz = 0;
  for (size_t i = 0; i < tot; i++) {
    if (Y[i]) A[ia++] = S[i];
    else Z[iz++] = S[i];
  }
  qsort(A, (size_t)ia, sizeof *A, ts_cmp_float);
  qsort(Z, (size_t)iz, sizeof *Z, ts_cmp_float);
  *act = A, *na = ia, *zero = Z, *nz = iz;
  return TS_OK;
}

/* The knob for false-skip rate F: the smallest listed score with at most F * na actives above it. */
static float knob_at(const float *A, int64_t na, double F) {
  if (na == 0) return -FLT_MAX;
  int64_t i = (int64_t)ceil((1.0 - F) * (double)na) - 1;
  if (i < 0) i = 0;
  if (i >= na) i = na - 1;
  return A[i];
}
/* How many of v[0..n) (ascending) exceed th. */
static int64_t above(const float *v, int64_t n, float th) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (v[mid] > th) hi = mid;
    else lo = mid + 1;
  }
  return n - lo;
}

ts_status ts_llm_pred_calibrate(const ts_llm_pred_calib *c, ts_llm_pred_kind kind, double false_skip,
                                const ts_llm_pred_opts *o, ts_llm_predictor **out) {
  return ts_llm_pred_calibrate_set(c, kind, &false_skip, 1, o, out, NULL, 0, NULL);
}

/* One pass per layer for every budget (and the curve): the learned predictor trains once, the
 * scores are computed and sorted once. */
ts_status ts_llm_pred_calibrate_set(const ts_llm_pred_calib *c, ts_llm_pred_kind kind, const double *fs, int nf,
                                    const ts_llm_pred_opts *o, ts_llm_predictor **out, const double *curve_fs, int ncf,
                                    double *curve_eff) {
  if (!c || !o || !out || !fs || nf < 1 || (ncf > 0 && (!curve_fs || !curve_eff)))
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_pred_calibrate: NULL argument");
  for (int f = 0; f < nf; f++) out[f] = NULL;
  for (int f = 0; f < nf; f++)
    if (!(fs[f] > 0 && fs[f] < 1)) return ts_error(TS_ERR_INVALID_ARG, "false-skip budget %g is outside (0, 1)", fs[f]);
  if (kind != TS_LLM_PRED_SIGNBIT && kind != TS_LLM_PRED_GRASP && kind != TS_LLM_PRED_LEARNED && kind != TS_LLM_PRED_ORACLE)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_pred_calibrate: kind %s has no knob", ts_llm_pred_kind_name(kind));
  if (!(o->k > 0 && o->k < 100)) return ts_error(TS_ERR_INVALID_ARG, "grasp's outlier cut k = %g is outside (0, 100)", (double)o->k);
  if (o->hidden < 1 || o->hidden > 256) return ts_error(TS_ERR_INVALID_ARG, "learned predictor width %d is outside 1..256", o->hidden);
  ts_status st = TS_OK;
  for (int f = 0; f < nf && st == TS_OK; f++) {
    st = ts_llm_predictor_create(&out[f], c->m, kind);
    if (st != TS_OK) break;
    ts_llm_predictor *p = out[f];
    p->info.false_skip = kind == TS_LLM_PRED_ORACLE ? 0 : fs[f];
    p->info.tokens = c->T;
    snprintf(p->info.text, sizeof p->info.text, "%s", c->text);
    ts_provenance_here(&p->info.prov, ts_isa_active(), 0);
    if (kind == TS_LLM_PRED_LEARNED) {
      p->mlp = ts_calloc((size_t)c->n_layer, sizeof *p->mlp);
      if (!p->mlp) st = ts_error(TS_ERR_OOM, "predictor calibration: out of memory");
    }
  }
  if (kind == TS_LLM_PRED_ORACLE) {
    for (int i = 0; i < c->n_layer * ncf; i++) curve_eff[i] = 1;
    if (st == TS_OK) return TS_OK;
  }
  const int64_t split = kind == TS_LLM_PRED_LEARNED ? c->T * 3 / 4 : 0, t0 = split, t1 = c->T;
  float *S = st == TS_OK ? ts_malloc((size_t)(t1 - t0) * (size_t)c->n * sizeof *S) : NULL;
  if (!S && st == TS_OK) st = ts_error(TS_ERR_OOM, "predictor calibration: out of memory for the scores");
  ts_progress pg;
  const bool prog = o->progress && st == TS_OK;
  if (prog) ts_progress_begin(&pg, kind == TS_LLM_PRED_LEARNED ? "training and calibrating (layers)" : "calibrating (layers)", c->n_layer);
  for (int l = 0; l < c->n_layer && st == TS_OK; l++) {
    ts__pmlp *mlp = kind == TS_LLM_PRED_LEARNED ? &out[0]->mlp[l] : NULL;
    if (mlp) {
      ts__pmlp_opts mo = ts__pmlp_opts_default();
      mo.r = o->hidden, mo.epochs = o->epochs, mo.seed = 1 + (uint64_t)l, mo.threads = 0;
      st = ts__pmlp_train(mlp, c->X + (size_t)l * (size_t)c->cap * (size_t)c->d, c->Y + (size_t)l * (size_t)c->cap * (size_t)c->n, split,
                          c->d, c->n, &mo);
      for (int f = 1; f < nf && st == TS_OK; f++) st = ts__pmlp_copy(&out[f]->mlp[l], mlp);
      if (st != TS_OK) break;
    }
    st = layer_scores(c, kind, l, o->k, mlp, t0, t1, S);
    float *A = NULL, *Z = NULL;
    int64_t na = 0, nz = 0;
    if (st == TS_OK) st = split_sorted(c, l, t0, t1, S, &A, &na, &Z, &nz);
    if (st != TS_OK) break;
    for (int f = 0; f < nf; f++) {
      ts_llm_pred_layer *L = &out[f]->layer[l];
      L->k = o->k;
      float th = knob_at(A, na, fs[f]);
      if (kind == TS_LLM_PRED_SIGNBIT) th = th < TS_LLM_PRED_ALPHA_MIN ? TS_LLM_PRED_ALPHA_MIN : th > TS_LLM_PRED_ALPHA_MAX ? TS_LLM_PRED_ALPHA_MAX : th;
      if (kind == TS_LLM_PRED_SIGNBIT) L->alpha = th;
      else L->tau = kind == TS_LLM_PRED_LEARNED ? -th : th;
      L->false_skip = na ? (double)above(A, na, th) / (double)na : 0;
      L->efficiency = nz ? (double)above(Z, nz, th) / (double)nz : 1;
      L->zero_share = (double)nz / (double)(na + nz);
    }
    for (int k = 0; k < ncf; k++) {
      const float th = knob_at(A, na, curve_fs[k]);
      curve_eff[(size_t)l * (size_t)ncf + (size_t)k] = nz ? (double)above(Z, nz, th) / (double)nz : 1;
    }
    ts_free(A), ts_free(Z);
    if (prog) ts_progress_update(&pg, l + 1);
  }
  if (prog) ts_progress_end(&pg);
  ts_free(S);
  if (st != TS_OK)
    for (int f = 0; f < nf; f++) ts_llm_predictor_destroy(out[f]), out[f] = NULL;
  return st;
}

ts_status ts_llm_pred_curve(const ts_llm_pred_calib *c, const ts_llm_predictor *p, const double *fs, int nf, double *eff) {
  if (!c || !p || !fs || !eff || nf < 1) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_pred_curve: bad argument");
  const ts_llm_pred_kind kind = p->info.kind;
  if (kind == TS_LLM_PRED_ORACLE) {
    for (int i = 0; i < c->n_layer * nf; i++) eff[i] = 1;
    return TS_OK;
  }
  if (kind == TS_LLM_PRED_LEARNED && !p->mlp) return ts_error(TS_ERR_INVALID_ARG, "the learned predictor has no weights");
  const int64_t t0 = kind == TS_LLM_PRED_LEARNED ? c->T * 3 / 4 : 0, t1 = c->T;
  float *S = ts_malloc((size_t)(t1 - t0) * (size_t)c->n * sizeof *S);
  if (!S) return ts_error(TS_ERR_OOM, "predictor curve: out of memory");
  ts_status st = TS_OK;
  for (int l = 0; l < c->n_layer && st == TS_OK; l++) {
    st = layer_scores(c, kind, l, p->layer[l].k, p->mlp ? &p->mlp[l] : NULL, t0, t1, S);
    float *A = NULL, *Z = NULL;
    int64_t na = 0, nz = 0;
    if (st == TS_OK) st = split_sorted(c, l, t0, t1, S, &A, &na, &Z, &nz);
    if (st != TS_OK) break;
    for (int k = 0; k < nf; k++) {
      const float th = knob_at(A, na, fs[k]);
      eff[(size_t)l * (size_t)nf + (size_t)k] = nz ? (double)above(Z, nz, th) / (double)nz : 1;
    }
    ts_free(A), ts_free(Z);
  }
  ts_free(S);
  return st;
}
