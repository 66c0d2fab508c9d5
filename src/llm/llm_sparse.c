/* Activation-sparse decode (tessera/llm_sparse.h): the transposed copies (sparse_internal.h), the
 * state's scratch and counts, and the decode steps that replace the dense ones where a layer has
 * thresholds. Thread t of the team computes the same output rows as in dense decode (q by query
 * heads, k and v by KV heads, wo and down by d-row parts, gate and up by neurons) except for up
 * under an activation threshold, whose active neurons are split evenly between the threads. Every
 * thread builds the whole selection of an input itself (a pass over 576..1536 values), so the
 * selections need no barrier and no thread reads another's list. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_pred_internal.h"
#include "llm/llm_sparse_internal.h"

/* ---- the transposed copies ------------------------------------------------------------------ */

/* The output-row cuts of projection p for a team of nt (the dense decode's splits). */
static void proj_cuts(const ts_llm_model *m, int p, int nt, int64_t *cut) {
  const ts_llm_config *c = &m->cfg;
  for (int t = 0; t <= nt; t++) {
    int64_t lo = 0, hi = 0;
    if (t == nt) {
      cut[t] = ts__proj_mat(m, 0, p)->rows;
      continue;
    }
    switch (p) {
      case TS_LLM_PROJ_Q: lo = (int64_t)ts__qkv_part_of(c, t, nt).h0 * c->head_dim; break;
      case TS_LLM_PROJ_K:
      case TS_LLM_PROJ_V: lo = (int64_t)ts__qkv_part_of(c, t, nt).k0 * c->head_dim; break;
      case TS_LLM_PROJ_GATE:
      case TS_LLM_PROJ_UP: ts__ff_part(c, t, nt, &lo, &hi); break;
      default: ts__split(c->d_model, t, nt, 32, &lo, &hi); break;
    }
    cut[t] = lo;
  }
}

static uint32_t tmat_type(uint32_t file_type) {
  return file_type == TS_QT_Q4_0 || file_type == TS_QT_Q4_1 ? TS_QT_Q4_1 : TS_QT_Q8_0;
}

/* W^T of w, quantized along the outputs in blocks of 32, in the pieces of cut (nt + 1 entries,
 * multiples of 32); buf: 32 x n_in floats of scratch. 32 rows at a time are dequantized and each
 * input's 32 values quantized into one block, so the scratch is 32 rows, not a whole fp32 W^T
 * (16 MB for Gemma 3's gate); the time is the same (Gemma 3's seven projections, 106.5 MB of
 * copies: 1.8-2.3 s either way, 2 threads, 2026-12-07). */
static ts_status tmat_build(ts__tmat *t, const ts__wmat *w, const int64_t *cut, int nt, float *buf) {
  memset(t, 0, sizeof *t);
  t->type = tmat_type(w->type);
  t->n_in = w->cols;
  t->n_out = w->rows;
  t->bsz = t->type == TS_QT_Q4_1 ? sizeof(ts__blk_q4_1) : sizeof(ts__blk_q8_0);
  t->npiece = nt;
  for (int p = 0; p <= nt; p++) t->cut[p] = cut[p];
  size_t total = 0;
  for (int p = 0; p < nt; p++) {
    t->seg[p] = (size_t)((cut[p + 1] - cut[p]) / 32) * t->bsz;
    total += t->seg[p] * (size_t)t->n_in;
  }
  uint8_t *mem = ts_malloc_huge(total ? total : 64);
  if (!mem) return ts_error(TS_ERR_OOM, "out of memory for the transposed copy of %s (%.1f MiB)", w->name, total / 1048576.0);
  t->bytes = total;
  const int64_t n = w->cols;
  size_t off = 0;
  for (int p = 0; p < nt; p++) {
    t->at[p] = mem + off;
    for (int64_t r0 = cut[p]; r0 < cut[p + 1]; r0 += 32) {
      for (int i = 0; i < 32; i++) ts__dequant_ref(w->type, w->data + (size_t)(r0 + i) * w->row_bytes, buf + (size_t)i * (size_t)n, n);
      uint8_t *dst = t->at[p] + (size_t)((r0 - cut[p]) / 32) * t->bsz;
      for (int64_t j = 0; j < n; j++) {
        float v[32];
        for (int i = 0; i < 32; i++) v[i] = buf[(size_t)i * (size_t)n + (size_t)j];
        ts__quantize_ref(t->type, v, dst + (size_t)j * t->seg[p], 32);
      }
    }
    off += t->seg[p] * (size_t)t->n_in;
  }
  return TS_OK;
}

void ts_llm_sparse_destroy(ts_llm_sparse *sp) {
  if (!sp) return;
  if (sp->tm) {
    for (int i = 0; i < sp->n_layer * TS_LLM_NPROJ; i++)
      if (sp->tm[i].npiece) ts_free(sp->tm[i].at[0]);
    ts_free(sp->tm);
  }
  ts_free(sp->th);
  if (sp->pr) ts__pred_free(sp->pr);
  ts_free(sp->dnorm);
  ts_free(sp->rw);
  ts_free(sp);
}

uint64_t ts_llm_sparse_bytes(const ts_llm_sparse *sp) {
  uint64_t b = 0;
  for (int i = 0; sp && i < sp->n_layer * TS_LLM_NPROJ; i++) b += sp->tm[i].bytes;
  return b;
}

static bool layer_mlp(const ts_llm_layer_thresholds *t) {
  return t->act > 0 || t->in[TS_LLM_PROJ_GATE] > 0 || t->in[TS_LLM_PROJ_UP] > 0 || t->in[TS_LLM_PROJ_DOWN] > 0;
}

ts_status ts_llm_sparse_create(ts_llm_sparse **out, const ts_llm_model *m, const ts_llm_thresholds *t,
                               const ts_llm_router *r, const ts_context *ctx) {
  if (!out || !m || !t) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_sparse_create: NULL argument");
  *out = NULL;
  const ts_llm_config *c = &m->cfg;
  char key[17];
  ts_llm_model_key(m, key);
  const ts_llm_thresholds_info *ti = ts_llm_thresholds_info_const(t);
  if (ts_llm_thresholds_n_layer(t) != c->n_layer || strcmp(ti->model_key, key) != 0)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_sparse_create: thresholds made for model %s with %d layers, not this one (%s, %d layers)",
                    ti->model_key, ts_llm_thresholds_n_layer(t), key, c->n_layer);
  if (r && ts__router_n_layer(r) != c->n_layer)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_sparse_create: router made for %d layers, the model has %d", ts__router_n_layer(r), c->n_layer);
  if (c->d_model % 32 || c->n_ff % 32 || c->head_dim % 32)
    return ts_error(TS_ERR_SHAPE, "ts_llm_sparse_create: sparse decode needs d_model, n_ff and head_dim in multiples of 32 (%d, %d, %d)",
                    c->d_model, c->n_ff, c->head_dim);
  int nt = ctx ? ts_context_threads(ctx) : ts_default_threads();
  if (nt < 1) nt = 1;
  if (nt > TS__TMAT_MAXP) nt = TS__TMAT_MAXP;
  ts_llm_sparse *sp = ts_calloc(1, sizeof *sp);
  if (!sp) return ts_error(TS_ERR_OOM, "ts_llm_sparse_create: out of memory");
  sp->m = m;
  sp->n_layer = c->n_layer;
  sp->nt = nt;
  sp->tm = ts_calloc((size_t)c->n_layer * TS_LLM_NPROJ, sizeof *sp->tm);
  sp->th = ts_calloc((size_t)c->n_layer, sizeof *sp->th);
  sp->dnorm = ts_calloc((size_t)c->n_layer * (size_t)c->n_ff, sizeof *sp->dnorm);
  const int64_t wmax = c->n_ff > c->d_model ? c->n_ff : c->d_model;
  const int64_t nbig = (int64_t)c->n_head * c->head_dim > wmax ? (int64_t)c->n_head * c->head_dim : wmax;
  float *buf = ts_malloc(32 * (size_t)nbig * sizeof(float)), *row = buf; /* 32 rows of the widest input */
  ts_status st = sp->tm && sp->th && sp->dnorm && buf ? TS_OK : ts_error(TS_ERR_OOM, "ts_llm_sparse_create: out of memory");
  if (st == TS_OK && r) {
    sp->rw = ts_malloc((size_t)c->n_layer * TS_LLM_ROUTER_NF * sizeof(double));
    if (!sp->rw) st = ts_error(TS_ERR_OOM, "ts_llm_sparse_create: out of memory");
    for (int l = 0; st == TS_OK && l < c->n_layer; l++)
      memcpy(sp->rw + (size_t)l * TS_LLM_ROUTER_NF, ts__router_weights_const(r, l), TS_LLM_ROUTER_NF * sizeof(double));
    sp->tau = ts_llm_router_tau(r);
  }
  for (int l = 0; st == TS_OK && l < c->n_layer; l++) {
    const ts_llm_layer_thresholds *lt = ts_llm_thresholds_layer_const(t, l);
    sp->th[l] = *lt;
    bool need[TS_LLM_NPROJ] = {false};
    for (int p = 0; p < TS_LLM_NPROJ; p++) need[p] = lt->in[p] > 0;
    if (layer_mlp(lt)) need[TS_LLM_PROJ_DOWN] = true; /* the sparse MLP's down reads the active columns */
    if (lt->act > 0) need[TS_LLM_PROJ_UP] = false;    /* up: the file's rows of the active neurons */
    for (int p = 0; p < TS_LLM_NPROJ && st == TS_OK; p++) {
      if (!need[p]) continue;
      int64_t cut[TS__TMAT_MAXP + 1];
      proj_cuts(m, p, nt, cut);
      st = tmat_build(&sp->tm[(size_t)l * TS_LLM_NPROJ + p], ts__proj_mat(m, l, p), cut, nt, buf);
      if (st == TS_OK) sp->any = true;
    }
    /* |D[:, i]|^2 of down's columns (the router's feature weights) */
    if (st == TS_OK && r) {
      const ts__wmat *D = ts__proj_mat(m, l, TS_LLM_PROJ_DOWN);
      float *dn = sp->dnorm + (size_t)l * (size_t)c->n_ff;
      for (int64_t o = 0; o < D->rows; o++) {
        ts__dequant_ref(D->type, D->data + (size_t)o * D->row_bytes, row, D->cols);
        for (int64_t i = 0; i < D->cols; i++) dn[i] += row[i] * row[i];
      }
    }
  }
  ts_free(buf);
  if (st != TS_OK) {
    ts_llm_sparse_destroy(sp);
    return st;
  }
  *out = sp;
  return TS_OK;
}

/* ---- the state's scratch -------------------------------------------------------------------- */

void ts__sparse_ws_free(ts_llm_state *s) {
  ts__sparse_ws *w = s->spw;
  if (!w) return;
  ts_free(w->mem);
  ts_free(w);
  s->spw = NULL;
}

ts_status ts_llm_state_set_sparse(ts_llm_state *s, const ts_llm_sparse *sp) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_state_set_sparse: NULL state");
  if (sp && sp->m != s->m) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_state_set_sparse: made for another model");
  if (sp && s->nt > TS__TMAT_MAXP)
    return ts_error(TS_ERR_UNSUPPORTED, "ts_llm_state_set_sparse: a team of %d threads (sparse decode runs up to %d)", s->nt, TS__TMAT_MAXP);
  if (sp && !s->spw) {
    const ts_llm_config *c = &s->m->cfg;
    ts__sparse_ws *w = ts_calloc(1, sizeof *w);
    if (!w) return ts_error(TS_ERR_OOM, "ts_llm_state_set_sparse: out of memory");
    const size_t per = (size_t)s->wmax, nl = (size_t)c->n_layer;
    w->per = per;
    w->cnt_per = nl * TS__SP_NCNT;
    /* per thread: idx, coef, y (wmax each), counts; shared: h */
    const size_t pb = ts__pred_scratch_bytes(c);
    const size_t bytes = (size_t)s->nt * (per * (sizeof(int32_t) + 2 * sizeof(float)) + w->cnt_per * sizeof(double) + pb + 64) +
                         (size_t)c->n_ff * sizeof(float) + 64 * (size_t)(4 * s->nt + 2);
    w->mem = ts_calloc(bytes, 1);
    if (!w->mem) {
      ts_free(w);
      return ts_error(TS_ERR_OOM, "ts_llm_state_set_sparse: out of memory");
    }
    uint8_t *p = w->mem;
#define CARVE(ptr, n, type)                      \
  do {                                           \
    ptr = (type *)p;                             \
    p += ((n) * sizeof(type) + 63) & ~(size_t)63; \
  } while (0)
    for (int t = 0; t < s->nt && t < TS__TMAT_MAXP; t++) {
      CARVE(w->idx[t], per, int32_t);
      CARVE(w->coef[t], per, float);
      CARVE(w->y[t], per, float);
      CARVE(w->cnt[t], w->cnt_per, double);
      CARVE(w->pred[t], pb, uint8_t);
    }
    CARVE(w->h, (size_t)c->n_ff, float);
#undef CARVE
    s->spw = w;
  }
  s->sp = sp;
  return TS_OK;
}

/* ---- the decode steps ------------------------------------------------------------------------ */

static inline double *cnt(ts_llm_state *s, int tid, int l) { return ts__sp_cnt(s, tid, l); }

/* idx/coef <- the inputs j of x[0..n) with |x_j| > t */
static int select_in(const float *x, int64_t n, float t, int32_t *idx, float *coef) {
  int k = 0;
  for (int64_t j = 0; j < n; j++)
    if (fabsf(x[j]) > t) idx[k] = (int32_t)j, coef[k++] = x[j];
  return k;
}

bool ts__sparse_rows(ts_llm_state *s, int tid, int l, int p, int64_t r0, int64_t r1, const float *x, float *y) {
  const ts_llm_sparse *sp = s->sp;
  if (!sp || r1 <= r0) return false;
  const float t = sp->th[l].in[p];
  const ts__tmat *tm = &sp->tm[(size_t)l * TS_LLM_NPROJ + p];
  if (!(t > 0) || !tm->npiece) return false;
  ts__sparse_ws *w = s->spw;
  const int k = select_in(x, tm->n_in, t, w->idx[tid], w->coef[tid]);
  memset(y + r0, 0, (size_t)(r1 - r0) * sizeof(float));
  ts__tmat_axpy(ts__sparse_kern_active(), tm, r0, r1, w->idx[tid], w->coef[tid], k, y + r0);
  double *ct = cnt(s, tid, l);
  const double rows = (double)(r1 - r0);
  ct[TS__SP_SEL + p] += k * rows;
  ct[TS__SP_TOT + p] += (double)tm->n_in * rows;
  ct[TS__SP_BYTES + p] += k * rows / 32 * (double)tm->bsz;
  return true;
}

int ts__sparse_mlp_kind(const ts_llm_state *s, int l) {
  const ts_llm_sparse *sp = s->sp;
  if (!sp) return 0;
  if (sp->pr) return 3;
  const ts_llm_layer_thresholds *t = &sp->th[l];
  if (t->act > 0 || sp->rw) return 2;
  return layer_mlp(t) ? 1 : 0;
}
bool ts__sparse_mlp_needs(const ts_llm_state *s, int l) { return ts__sparse_mlp_kind(s, l) != 0; }

/* gate (or up) rows [f0, f1) of layer l from the thread's normalized input */
static void ff_rows(ts_llm_state *s, int tid, int l, int p, int64_t f0, int64_t f1, const float *xf, int64_t ldx,
                    float *y) {
  const ts__wmat *w = ts__proj_mat(s->m, l, p);
  if (ts__sparse_rows(s, tid, l, p, f0, f1, xf, y)) return;
  ts__wmat_gemm(w, f0, f1, xf, ldx, &s->tb[tid].act, 1, y, s->m->cfg.n_ff);
  double *ct = cnt(s, tid, l);
  ct[TS__SP_BYTES + p] += (double)(f1 - f0) * (double)w->row_bytes;
}

static inline float silu(float g) { return g / (1.0f + expf(-g)); }

/* Phase A: norm (gemma3: after the attention half's post-norm and residual), gate rows of the
 * thread's neurons, a = silu(gate) (gemma3: gelu(gate), the dense GEGLU's table) into s->ffg;
 * without an activation threshold also up and h = a up into s->ffu (kind 1). */
void ts__sparse_mlp_a(ts_llm_state *s, int tid, int l) {
  const ts_llm_config *c = &s->m->cfg;
  const float *xf;
  int64_t ldx, f0, f1;
  ts__sparse_prep(s, tid, l, &xf, &ldx);
  ts__ff_part(c, tid, s->nrun, &f0, &f1);
  if (f1 <= f0) return;
  ff_rows(s, tid, l, TS_LLM_PROJ_GATE, f0, f1, xf, ldx, s->ffg);
  if (s->m->cfg.ffn_act == TS_LLM_ACT_GELU) ts__gelu_ref(f1 - f0, s->ffg + f0);
  else if (s->m->cfg.ffn_act == TS_LLM_ACT_RELU)
    for (int64_t i = f0; i < f1; i++) s->ffg[i] = s->ffg[i] > 0.0f ? s->ffg[i] : 0.0f;
  else
    for (int64_t i = f0; i < f1; i++) s->ffg[i] = silu(s->ffg[i]);
  if (ts__sparse_mlp_kind(s, l) == 1) {
    ff_rows(s, tid, l, TS_LLM_PROJ_UP, f0, f1, xf, ldx, s->ffu);
    for (int64_t i = f0; i < f1; i++) s->spw->h[i] = s->ffg[i] * s->ffu[i];
  }
}

/* The router's decision for layer l from a = silu(gate) (gemma3: gelu(gate); all neurons) and the
 * mask |a| > t: true sends the token's MLP dense. Every thread computes it from the same values in
 * the same order. */
static bool route_dense(const ts_llm_sparse *sp, int l, const float *a, int64_t n, float t) {
  if (!sp->rw) return false;
  const float *dn = sp->dnorm + (size_t)l * (size_t)n;
  double wa = 0, wd = 0, ma = 0, md = 0;
  int64_t nd = 0;
  for (int64_t i = 0; i < n; i++) {
    const double a2 = (double)a[i] * a[i], e = a2 * dn[i];
    wa += e, ma += a2;
    if (!(fabsf(a[i]) > t)) wd += e, md += a2, nd++;
  }
  const double f[TS_LLM_ROUTER_NF] = {1, wa > 0 ? wd / wa : 0, ma > 0 ? md / ma : 0, (double)nd / (double)n};
  const double *w = sp->rw + (size_t)l * TS_LLM_ROUTER_NF;
  double pred = 0;
  for (int k = 0; k < TS_LLM_ROUTER_NF; k++) pred += w[k] * f[k];
  return pred > sp->tau;
}

/* Phase B (kind 2): the active neurons (|a| > act, or all when routed dense) into the thread's idx
 * list (every thread the whole list), up's file rows of the thread's even share of them (the
 * indexed row dot of Q8_0, Q4_1 and Q5_0; other types the quant table's row dot, K-quants from the
 * activation's Q8_K form), h = a up into s->spw->h. */
void ts__sparse_mlp_b(ts_llm_state *s, int tid, int l) {
  const ts_llm_config *c = &s->m->cfg;
  const ts_llm_sparse *sp = s->sp;
  ts__sparse_ws *w = s->spw;
  const int64_t n = c->n_ff;
  const float t = sp->th[l].act;
  const bool dense = route_dense(sp, l, s->ffg, n, t);
  int32_t *idx = w->idx[tid];
  int k = 0;
  for (int64_t i = 0; i < n; i++)
    if (dense || fabsf(s->ffg[i]) > t) idx[k++] = (int32_t)i;
  w->nact[tid] = k;
  int64_t a0, a1;
  ts__split(k, tid, s->nrun, 1, &a0, &a1);
  const ts__wmat *U = &s->m->layers[l].up;
  const ts__actb *xb = &s->tb[tid].act;
  const ts_quant_act xq = {.n = c->d_model, .q = xb->q, .d = xb->d, .sum = xb->sum, .s = xb->s, .kq = xb->kq, .kd = xb->kd, .kbs = xb->kbs};
  const ts__gdot_fn gdot = ts__sparse_gdot(ts__sparse_kern_active(), U->type);
  float *u = w->coef[tid]; /* up of the share (coef is free until phase C) */
  const uint8_t *ud = U->data;
  if (gdot) gdot(ud, U->row_bytes, idx + a0, (int)(a1 - a0), &xq, u);
  else {
    const ts__dot_fn dot = ts__quant_dot_fn(ts__quant(), U->type);
    for (int64_t j = a0; j < a1; j++) u[j - a0] = dot(U->cols, ud + (size_t)idx[j] * U->row_bytes, s->tb[tid].xn, &xq);
  }
  for (int64_t j = a0; j < a1; j++) w->h[idx[j]] = s->ffg[idx[j]] * u[j - a0];
  double *ct = cnt(s, tid, l);
  ct[TS__SP_BYTES + TS_LLM_PROJ_UP] += (double)(a1 - a0) * (double)U->row_bytes;
  if (tid == 0) {
    ct[TS__SP_ACT] += (double)k;
    ct[TS__SP_ACT_TOT] += (double)n;
    ct[TS__SP_ROUTED] += dense ? 1 : 0;
  }
}

/* Phase C: down over the active neurons (kind 2: the thread's list; kind 1: |h| > in[down]) into
 * the thread's d rows, added to the residual (gemma3: into tmp, which the next layer's first step,
 * or the output's, post-norms and adds to x2: llm_layer.c's gemma_resid, as after the dense down). */
void ts__sparse_mlp_c(ts_llm_state *s, int tid, int l) {
  const ts_llm_config *c = &s->m->cfg;
  const ts_llm_sparse *sp = s->sp;
  ts__sparse_ws *w = s->spw;
  const ts__tmat *D = &sp->tm[(size_t)l * TS_LLM_NPROJ + TS_LLM_PROJ_DOWN];
  int32_t *idx = w->idx[tid];
  float *coef = w->coef[tid];
  const float td = sp->th[l].in[TS_LLM_PROJ_DOWN];
  int k = 0;
  if (ts__sparse_mlp_kind(s, l) == 2) {
    for (int j = 0; j < w->nact[tid]; j++) {
      const float h = w->h[idx[j]];
      if (fabsf(h) > td) idx[k] = idx[j], coef[k++] = h;
    }
  } else {
    k = select_in(w->h, c->n_ff, td, idx, coef);
  }
  int64_t r0, r1;
  ts__split(c->d_model, tid, s->nrun, 32, &r0, &r1);
  if (r1 <= r0) return;
  const bool gemma = s->m->arch == TS__ARCH_GEMMA3;
  float *y = gemma ? s->tmp + r0 : w->y[tid];
  memset(y, 0, (size_t)(r1 - r0) * sizeof(float));
  ts__tmat_axpy(ts__sparse_kern_active(), D, r0, r1, idx, coef, k, y);
  for (int64_t r = r0; r < r1 && !gemma; r++) s->x[r] += y[r - r0];
  double *ct = cnt(s, tid, l);
  const double rows = (double)(r1 - r0);
  ct[TS__SP_SEL + TS_LLM_PROJ_DOWN] += k * rows;
  ct[TS__SP_TOT + TS_LLM_PROJ_DOWN] += (double)c->n_ff * rows;
  ct[TS__SP_BYTES + TS_LLM_PROJ_DOWN] += k * rows / 32 * (double)D->bsz;
}

void ts__sparse_count_token(ts_llm_state *s) {
  if (s->spw && s->sp) s->spw->tokens++;
}

void ts_llm_state_sparse_stats(const ts_llm_state *s, ts_llm_sparse_stats *o) {
  memset(o, 0, sizeof *o);
  const ts_llm_model *m = s->m;
  const ts_llm_config *c = &m->cfg;
  o->n_layer = c->n_layer;
  o->dense_bytes_per_token = (double)m->weight_bytes;
  o->bytes_per_token = o->dense_bytes_per_token;
  const ts__sparse_ws *w = s->spw;
  const ts_llm_sparse *sp = s->sp;
  if (!w || !sp || !w->tokens) return;
  o->tokens = w->tokens;
  const double T = (double)w->tokens;
  double layer_dense = 0, layer_read = 0, in_num = 0, in_den = 0, act = 0, routed = 0;
  double pbytes = 0, ptime = 0, pact = 0, fs_sum = 0, act_sum = 0, cs_sum = 0, zero_sum = 0;
  for (int l = 0; l < c->n_layer; l++) {
    double sum[TS__SP_NCNT] = {0};
    for (int t = 0; t < s->nt; t++)
      for (int k = 0; k < TS__SP_NCNT; k++) sum[k] += w->cnt[t][(size_t)l * TS__SP_NCNT + k];
    const int kind = ts__sparse_mlp_kind(s, l);
    for (int p = 0; p < TS_LLM_NPROJ; p++) {
      const ts__wmat *W = ts__proj_mat(m, l, p);
      const double dense = (double)W->rows * (double)W->row_bytes;
      const bool mlp = p >= TS_LLM_PROJ_GATE;
      const bool handled = mlp ? kind != 0 : (sp->th[l].in[p] > 0 && sp->tm[(size_t)l * TS_LLM_NPROJ + p].npiece);
      layer_dense += dense;
      layer_read += handled ? sum[TS__SP_BYTES + p] / T : dense;
      /* input sparsity, weighted by the matrix's parameters */
      const double frac = sum[TS__SP_TOT + p] > 0 ? 1 - sum[TS__SP_SEL + p] / sum[TS__SP_TOT + p] : 0;
      in_num += frac * (double)W->rows * (double)W->cols;
      in_den += (double)W->rows * (double)W->cols;
    }
    layer_read += sum[TS__SP_PBYTES] / T;
    pbytes += sum[TS__SP_PBYTES] / T;
    ptime += w->cnt[0][(size_t)l * TS__SP_NCNT + TS__SP_PTIME] / T;
    if (kind == 3 && sum[TS__SP_ACT_TOT] > 0) {
      const double tot = sum[TS__SP_ACT_TOT], act_m = sum[TS__SP_M_ACT], zero_m = tot - act_m;
      pact += sum[TS__SP_PACT] / tot;
      if (sp->pr->measure) {
        const double fs = act_m > 0 ? sum[TS__SP_M_FS] / act_m : 0, ef = zero_m > 0 ? sum[TS__SP_M_CS] / zero_m : 1;
        fs_sum += sum[TS__SP_M_FS], act_sum += act_m, cs_sum += sum[TS__SP_M_CS], zero_sum += zero_m;
        if (l < 256) o->layer_false_skip[l] = fs, o->layer_efficiency[l] = ef, o->layer_zero[l] = zero_m / tot;
      }
    }
    const double la = sum[TS__SP_ACT_TOT] > 0 ? 1 - sum[TS__SP_ACT] / sum[TS__SP_ACT_TOT] : 0;
    if (l < 256) o->layer_act[l] = la;
    act += la;
    routed += sum[TS__SP_ROUTED] / T;
  }
  o->act_sparsity = act / c->n_layer;
  o->in_sparsity = in_den > 0 ? in_num / in_den : 0;
  o->weight_skip = layer_dense > 0 ? 1 - layer_read / layer_dense : 0;
  o->bytes_per_token = o->dense_bytes_per_token - layer_dense + layer_read;
  o->routed_dense = routed / c->n_layer;
  if (sp->pr) {
    o->pred_active = pact / c->n_layer;
    o->pred_bytes_per_token = pbytes;
    o->pred_seconds_per_token = ptime;
    o->measured = sp->pr->measure;
    if (o->measured) {
      const double tot = act_sum + zero_sum;
      o->actual_zero = tot > 0 ? zero_sum / tot : 0;
      o->false_skip = act_sum > 0 ? fs_sum / act_sum : 0;
      o->efficiency = zero_sum > 0 ? cs_sum / zero_sum : 1;
      o->missed_skip = 1 - o->efficiency;
    }
  }
}

/* A predictor runs where thresholds would: the sparse object is made with down's neuron-major copy
 * (and, for Grasp's outliers, gate's transposed copy) and the predictor attached; the thresholds
 * that asked for those copies are cleared again (phase C then takes every nonzero h). The oracle
 * is the activation threshold just above 0 on relu(gate): every gate row, up and down for the
 * positive ones (kind 2). */
ts_status ts_llm_sparse_create_pred(ts_llm_sparse **out, const ts_llm_model *m, const ts_llm_predictor *p, bool measure,
                                    const ts_context *ctx) {
  if (!out || !m || !p) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_sparse_create_pred: NULL argument");
  *out = NULL;
  const ts_llm_config *c = &m->cfg;
  if (c->ffn_act != TS_LLM_ACT_RELU)
    return ts_error(TS_ERR_UNSUPPORTED, "activation predictors need a ReLU-gated model; %s is %s-gated", c->name[0] ? c->name : c->arch,
                    ts_llm_act_name(c->ffn_act));
  const ts_llm_pred_info *pi = ts_llm_predictor_info_const(p);
  char key[17];
  ts_llm_model_key(m, key);
  if (ts_llm_predictor_n_layer(p) != c->n_layer || strcmp(pi->model_key, key) != 0)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_sparse_create_pred: predictor made for model %s with %d layers, not this one (%s, %d layers)",
                    pi->model_key, ts_llm_predictor_n_layer(p), key, c->n_layer);
  ts_llm_thresholds *t = NULL;
  TS_TRY(ts_llm_thresholds_create(&t, m));
  const bool oracle = pi->kind == TS_LLM_PRED_ORACLE;
  for (int l = 0; l < c->n_layer; l++) {
    ts_llm_layer_thresholds *lt = ts_llm_thresholds_layer(t, l);
    if (oracle) lt->act = FLT_MIN;
    else {
      lt->in[TS_LLM_PROJ_DOWN] = FLT_MIN;
      if (pi->kind == TS_LLM_PRED_GRASP) lt->in[TS_LLM_PROJ_GATE] = FLT_MIN;
    }
  }
  ts_llm_sparse *sp = NULL;
  ts_status st = ts_llm_sparse_create(&sp, m, t, NULL, ctx);
  ts_llm_thresholds_destroy(t);
  if (st != TS_OK) return st;
  if (!oracle) {
    for (int l = 0; l < c->n_layer; l++) sp->th[l].in[TS_LLM_PROJ_DOWN] = sp->th[l].in[TS_LLM_PROJ_GATE] = 0;
    sp->pr = ts_calloc(1, sizeof *sp->pr);
    st = sp->pr ? ts__pred_init(sp->pr, m, p, measure) : ts_error(TS_ERR_OOM, "ts_llm_sparse_create_pred: out of memory");
    if (st != TS_OK) {
      ts_llm_sparse_destroy(sp);
      return st;
    }
  }
  *out = sp;
  return TS_OK;
}

void ts__sparse_stats_reset(ts_llm_state *s) {
  ts__sparse_ws *w = s->spw;
  if (!w) return;
  for (int t = 0; t < s->nt && t < TS__TMAT_MAXP; t++) memset(w->cnt[t], 0, w->cnt_per * sizeof(double));
  w->tokens = 0;
}
