/* The per-thread steps of one eval batch: embedding, the attention and MLP halves of a block, and
 * the output projection. Each runs on every thread of the team with its own share (rows of a
 * matrix, heads, tokens); the caller (llm_forward.c) puts a barrier between dependent steps.
 *
 * Shapes for T tokens: x[T][d]; qkv[T][(n_head + 2 n_kv) hd] (q heads, then k, then v);
 * att[T][n_head hd]; ffg/ffu[T][n_ff]; tmp[T][d]. */
#include <math.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "tessera/kernels.h"

void ts__wmat_gemm(const ts__wmat *w, int64_t r0, int64_t r1, const float *xf, int64_t ldx, const ts__actb *xb,
                   int T, float *y, int64_t ldy) {
  if (r1 <= r0) return;
  ts__qbatch qb = {xb->n, T, xb->q, xb->d, xb->sum, xb->s, xb->gsum};
  if (w->packed) {
    w->pgemm(w->packed + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0, &qb, y + r0, ldy);
    return;
  }
  ts__quant_gemm_with(ts__quant(), w->type, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0, w->cols, xf,
                      ldx, &qb, T, y + r0, ldy);
}

/* The activations of tokens from.. of a batch (b cut for width n). */
static ts__actb actb_from(const ts__actb *b, int64_t n, int from) {
  const size_t nb = (size_t)(n / TS_QK), f = (size_t)from;
  ts__actb a = {n, b->q + f * (size_t)n, b->d + f * nb, b->s + f * nb, b->sum + f * nb, b->gsum + f * nb * 8};
  return a;
}

/* RMSNorm with the arithmetic of llama.cpp's CPU backend, so that the int8 activation quantization
 * downstream sees the same floats (a 1-ulp change of one input flips a rounding now and then, and
 * greedy generations drift apart from there): the sum of the fp32 squares in double, mean =
 * fp32(sum / n), scale = 1 / sqrtf(mean + eps) in fp32, y = fp32(fp32(x scale) w). The sum uses 4
 * double accumulators (a different double order than a sequential sum: the fp32 mean changes only
 * if the exact value lies within ~1e-13 relative of an fp32 rounding boundary). */
static void rmsnorm_rows(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *w, float eps, float *y,
                         int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    double a[4] = {0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; k++) a[k] += (double)(xr[j + k] * xr[j + k]);
    for (; j < n; j++) a[0] += (double)(xr[j] * xr[j]);
    const float mean = (float)((a[0] + a[1] + (a[2] + a[3])) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (j = 0; j < n; j++) {
      const float t = xr[j] * scale;
      yr[j] = t * w[j];
    }
  }
}

/* act (and xn when norm != NULL) <- rms(src[t]) * norm (or src itself) for t in [t0, t1), width n. */
static void prep(ts_llm_state *s, int tid, const float *src, int64_t lds, const float *norm, int64_t n, int t0, int t1,
                 const float **xf, int64_t *ldx) {
  ts__tbuf *b = &s->tb[tid];
  const ts__quant_table *qt = ts__quant();
  const int64_t nb = n / TS_QK;
  b->act.n = n;
  const float *xs = src;
  int64_t ld = lds;
  if (norm) {
    rmsnorm_rows(t1 - t0, n, src + (size_t)t0 * (size_t)lds, lds, norm, s->m->cfg.rms_eps,
                 b->xn + (size_t)t0 * (size_t)s->wmax, s->wmax);
    xs = b->xn;
    ld = s->wmax;
  }
  if (n % TS_QK == 0) {
    for (int t = t0; t < t1; t++)
      qt->act_quantize(n, xs + (size_t)t * (size_t)ld, b->act.q + (size_t)t * (size_t)n, b->act.d + (size_t)t * (size_t)nb,
                       b->act.sum + (size_t)t * (size_t)nb, b->act.s + (size_t)t * (size_t)nb);
    if (qt->prep_packed && t1 > t0) {
      const ts__actb a = actb_from(&b->act, n, t0);
      qt->prep_packed(n, t1 - t0, a.q, a.gsum);
    }
  }
  *xf = xs;
  *ldx = ld;
}

void ts__step_embed(ts_llm_state *s, int tid, const int32_t *tokens, int T) {
  const ts__wmat *e = &s->m->tok_embd;
  int64_t t0, t1;
  ts__split(T, tid, s->nrun, 1, &t0, &t1);
  for (int64_t t = t0; t < t1; t++)
    ts__dequant_ref(e->type, e->data + (size_t)tokens[t] * e->row_bytes, s->x + (size_t)t * (size_t)e->cols, e->cols);
}

static void rope_row(const ts_llm_state *s, float *v, int p) {
  const ts_llm_config *c = &s->m->cfg;
  s->ops->rope(v, s->rope + (size_t)p * (size_t)(c->n_rot / 2) * 2, c->n_rot, c->rope == TS_LLM_ROPE_NEOX);
}

/* Norm, Q/K/V for this thread's heads (units of hd rows: n_head q, n_kv k, n_kv v), RoPE on its q
 * and k heads, its k and v heads into the cache at positions pos..pos+T-1. */
void ts__step_qkv(ts_llm_state *s, int tid, int l, int T, int pos) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv;
  const float *xf;
  int64_t ldx;
  prep(s, tid, s->x, c->d_model, L->attn_norm, c->d_model, 0, T, &xf, &ldx);
  int64_t u0, u1;
  ts__split(nh + 2 * nkv, tid, s->nrun, 1, &u0, &u1);
  const ts__wmat *w[3] = {&L->wq, &L->wk, &L->wv};
  const int64_t first[4] = {0, nh, nh + nkv, nh + 2 * nkv};
  for (int k = 0; k < 3; k++) {
    int64_t a = u0 > first[k] ? u0 : first[k], b = u1 < first[k + 1] ? u1 : first[k + 1];
    if (a >= b) continue;
    ts__wmat_gemm(w[k], (a - first[k]) * hd, (b - first[k]) * hd, xf, ldx, &s->tb[tid].act, T,
                  s->qkv + first[k] * hd, s->ldq);
  }
  for (int t = 0; t < T; t++) {
    float *row = s->qkv + (size_t)t * (size_t)s->ldq;
    for (int64_t u = u0; u < u1; u++) {
      float *v = row + u * hd;
      if (u < nh + nkv) rope_row(s, v, pos + t);
      if (u < nh) continue;
      int kh = (int)(u < nh + nkv ? u - nh : u - nh - nkv);
      const size_t base = (((size_t)l * (size_t)nkv + (size_t)kh) * (size_t)hd) * (size_t)s->n_ctx;
      if (u < nh + nkv) /* K^T: dim i of position p at [i][p] */
        for (int i = 0; i < hd; i++) s->kc[base + (size_t)i * (size_t)s->n_ctx + (size_t)(pos + t)] = ts_f32_to_f16(v[i]);
      else /* V: position p's values contiguous */
        ts_f32_to_f16_array(v, s->vc + base + (size_t)(pos + t) * (size_t)hd, (size_t)hd);
    }
  }
}

/* x[t][rows of this thread] += (W src[t])[rows]: the output projection of attention or the MLP's
 * down projection (src width n, unnormalized). */
static void proj_residual(ts_llm_state *s, int tid, const ts__wmat *w, const float *src, int64_t lds, int T) {
  const int64_t d = s->m->cfg.d_model;
  const float *xf;
  int64_t ldx, r0, r1;
  prep(s, tid, src, lds, NULL, w->cols, 0, T, &xf, &ldx);
  ts__split(d, tid, s->nrun, 16, &r0, &r1);
  ts__wmat_gemm(w, r0, r1, xf, ldx, &s->tb[tid].act, T, s->tmp, d);
  for (int t = 0; t < T; t++) {
    float *x = s->x + (size_t)t * (size_t)d, *y = s->tmp + (size_t)t * (size_t)d;
    for (int64_t r = r0; r < r1; r++) x[r] += y[r];
  }
}

void ts__step_wo(ts_llm_state *s, int tid, int l, int T) {
  const ts_llm_config *c = &s->m->cfg;
  proj_residual(s, tid, &s->m->layers[l].wo, s->att, (int64_t)c->n_head * c->head_dim, T);
}

/* Norm, gate and up for this thread's neurons, h = silu(gate) * up into ffg. */
void ts__step_gate_up(ts_llm_state *s, int tid, int l, int T) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const int64_t ff = c->n_ff;
  const float *xf;
  int64_t ldx, n0, n1;
  prep(s, tid, s->x, c->d_model, L->ffn_norm, c->d_model, 0, T, &xf, &ldx);
  ts__split(ff, tid, s->nrun, 16, &n0, &n1);
  if (n1 <= n0) return;
  ts__wmat_gemm(&L->gate, n0, n1, xf, ldx, &s->tb[tid].act, T, s->ffg, ff);
  ts__wmat_gemm(&L->up, n0, n1, xf, ldx, &s->tb[tid].act, T, s->ffu, ff);
  for (int t = 0; t < T; t++) {
    float *g = s->ffg + (size_t)t * (size_t)ff, *u = s->ffu + (size_t)t * (size_t)ff;
    s->ops->swiglu(n1 - n0, g + n0, u + n0);
  }
}

void ts__step_down(ts_llm_state *s, int tid, int l, int T) {
  proj_residual(s, tid, &s->m->layers[l].down, s->ffg, s->m->cfg.n_ff, T);
}

/* logits[t - from][vocab rows of this thread] for tokens [from, T). */
void ts__step_output(ts_llm_state *s, int tid, int T, int from, float *logits) {
  const ts_llm_config *c = &s->m->cfg;
  const float *xf;
  int64_t ldx, r0, r1;
  prep(s, tid, s->x, c->d_model, s->m->output_norm, c->d_model, from, T, &xf, &ldx);
  ts__split(c->n_vocab, tid, s->nrun, 64, &r0, &r1);
  const ts__actb sub = actb_from(&s->tb[tid].act, c->d_model, from);
  ts__wmat_gemm(&s->m->output, r0, r1, xf + (size_t)from * (size_t)ldx, ldx, &sub, T - from, logits, c->n_vocab);
}
