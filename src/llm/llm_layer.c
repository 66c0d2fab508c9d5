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
#include "tessera/llm_sparse.h"

/* ts__wmat_gemm with Q4_K's token groups (ts__qbatch.gfrom, gn: llama.cpp's matmul holds tokens
 * gfrom.. of the batch, gn of them; 0, 0: all) */
static void wmat_gemm_g(const ts__wmat *w, int64_t r0, int64_t r1, const float *xf, int64_t ldx, const ts__actb *xb,
                        int T, float *y, int64_t ldy, int gfrom, int gn) {
  if (r1 <= r0) return;
  ts__qbatch qb = {xb->n, T, xb->q, xb->d, xb->sum, xb->s, xb->gsum, T == 1 ? xb->pf : NULL, xb->kq, xb->kd, xb->kbs, gfrom, gn};
  if (w->npiece) {
    int p = ts__wmat_piece(w, r0);
    /* the work splits keep r0 on a group of its piece (else: the file rows) */
    if ((r0 - w->cut[p]) % TS__PACK_ROWS == 0) {
      for (int64_t a = r0; a < r1; p++) {
        const int64_t b = w->cut[p + 1] < r1 ? w->cut[p + 1] : r1;
        if (b > a) w->pgemm(w->at[p] + (size_t)(a - w->cut[p]) * w->row_bytes, w->row_bytes, b - a, &qb, y + a, ldy);
        a = b; /* cut[p + 1] >= a: an empty piece leaves it */
      }
      return;
    }
  }
  ts__quant_gemm_with(ts__quant(), w->type, w->data + (size_t)r0 * w->row_bytes, w->row_bytes, r1 - r0, w->cols, xf,
                      ldx, &qb, T, y + r0, ldy);
}

void ts__wmat_gemm(const ts__wmat *w, int64_t r0, int64_t r1, const float *xf, int64_t ldx, const ts__actb *xb,
                   int T, float *y, int64_t ldy) {
  wmat_gemm_g(w, r0, r1, xf, ldx, xb, T, y, ldy, 0, 0);
}

/* The activations of tokens from.. of a batch (b cut for width n). */
static ts__actb actb_from(const ts__actb *b, int64_t n, int from) {
  const size_t nb = (size_t)(n / TS_QK), f = (size_t)from;
  ts__actb a = {n, b->q + f * (size_t)n, b->d + f * nb, b->s + f * nb, b->sum + f * nb, b->gsum + f * nb * 8, b->pf,
                b->kq ? b->kq + f * (size_t)n : NULL, b->kd ? b->kd + f * (size_t)(n / TS_QKK) : NULL,
                b->kbs ? b->kbs + f * (size_t)(n / 16) : NULL};
  return a;
}

/* Decode with side prefetches on (ts_llm_model's side; off by default): the first bytes of this
 * thread's share of a later weight phase go in front of its side prefetch queue, so that the phase
 * does not start at memory latency. Where the tiles prefetch their own weights (wpf > 0) the end of
 * one phase's prefetches already runs into the next one's piece (a thread's pieces lie back to back
 * in decode's order). */
#ifndef HEAD_BYTES
#define HEAD_BYTES 16384
#endif
static void queue_head(ts_llm_state *s, int tid, const ts__wmat *w, int64_t r0, int64_t r1) {
  if (!w->npiece || r1 <= r0 || !s->tb[tid].pf.side) return;
  const int p = ts__wmat_piece(w, r0);
  const int64_t e = w->cut[p + 1] < r1 ? w->cut[p + 1] : r1;
  const int64_t bytes = (e - r0) * (int64_t)w->row_bytes;
  ts__pfq_add(&s->tb[tid].pf, w->at[p] + (size_t)(r0 - w->cut[p]) * w->row_bytes, bytes < HEAD_BYTES ? bytes : HEAD_BYTES,
              0, 1, 1);
}

/* The rows of a phase, cut into units of work (ts__share): `unit` rows, a multiple of `align`,
 * about UNIT_BYTES of weights (the stealing thread's last unit ends at most that far behind; the
 * owner claims its own units in runs, so the claims' locked operations stay rare). */
#ifndef UNIT_BYTES
#define UNIT_BYTES 16384
#endif
static ts__grid grid_of(int64_t n, int64_t align, size_t bytes_per_row) {
  int64_t k = (int64_t)(UNIT_BYTES / ((size_t)align * (bytes_per_row ? bytes_per_row : 1)));
  ts__grid g = {n, align * (k > 1 ? k : 1)};
  return g;
}
static int64_t grid_units(ts__grid g) { return (g.n + g.unit - 1) / g.unit; }
/* thread tid's home rows [r0, r1) */
static void home(const ts_llm_state *s, int tid, ts__grid g, int64_t *r0, int64_t *r1) {
  ts__split(g.n, tid, s->nrun, g.unit, r0, r1);
}
/* the d-row matrices (wo, down), the vocabulary */
ts__grid ts__grid_d(const ts__wmat *w) { return grid_of(w->rows, 16, w->row_bytes); }
/* batches: gate's n_ff rows, then up's, stacked (decode splits by neurons: ts__ff_part) */
static ts__grid grid_ff(const ts_llm_model *m) {
  const ts__llm_layer *L = &m->layers[0];
  return grid_of(2 * m->cfg.n_ff, 16, L->gate.row_bytes > L->up.row_bytes ? L->gate.row_bytes : L->up.row_bytes);
}
ts__grid ts__grid_vocab(const ts_llm_model *m) { return grid_of(m->cfg.n_vocab, 64, m->output.row_bytes); }
/* the stacked q | k | v rows ((n_head + 2 n_kv) hd): multiples of 16 (RoPE pairs stay inside), whole
 * heads for NEOX RoPE (pairs half a head apart) */
ts__grid ts__grid_qkv(const ts_llm_model *m) {
  const ts_llm_config *c = &m->cfg;
  const int64_t hd = c->head_dim, units = c->n_head + 2 * c->n_head_kv;
  const int64_t align = c->rope == TS_LLM_ROPE_NEOX || hd % 16 ? hd : 16;
  return grid_of(units * hd, align, m->layers[0].wq.row_bytes);
}
ts__qkv_part ts__qkv_part_of(const ts_llm_config *c, int t, int nt) {
  const int nh = c->n_head, G = c->n_head / c->n_head_kv;
  ts__qkv_part p;
  p.h0 = (int)((int64_t)nh * t / nt);
  p.h1 = (int)((int64_t)nh * (t + 1) / nt);
  p.k0 = (p.h0 + G - 1) / G; /* the groups whose first head is in [h0, h1) */
  p.k1 = (p.h1 + G - 1) / G;
  p.n0 = p.h0 / G;
  p.n1 = p.h1 > p.h0 ? (p.h1 - 1) / G + 1 : p.n0;
  return p;
}

void ts__ff_part(const ts_llm_config *c, int t, int nt, int64_t *f0, int64_t *f1) {
  ts__split(c->n_ff, t, nt, TS_QK, f0, f1);
}

void ts__actb_quant_part(ts__actb *a, const float *x, int64_t e0, int64_t e1) {
  if (e1 <= e0) return;
  const ts__quant_table *qt = ts__quant();
  const int64_t b0 = e0 / TS_QK;
  qt->act_quantize(e1 - e0, x + e0, a->q + e0, a->d + b0, a->sum + b0, a->s + b0);
  if (qt->prep_packed) qt->prep_packed(e1 - e0, 1, a->q + e0, a->gsum + 8 * b0);
}

/* The phase's units this thread takes, a run [a, b) at a time: ts__share_begin once, then while
 * (next_unit(..)) work on [*a, *b). */
static bool next_unit(ts_llm_state *s, int tid, ts__grid g, int64_t *a, int64_t *b) {
  int64_t count = 1;
  const int64_t u = ts__share_next(s->share, tid, s->nrun, &count);
  if (u < 0) return false;
  *a = u * g.unit;
  *b = *a + count * g.unit < g.n ? *a + count * g.unit : g.n;
  return true;
}
static void begin_units(ts_llm_state *s, int tid, ts__grid g) { ts__share_begin(s->share, tid, s->nrun, grid_units(g)); }

/* The rows of wo, down or the output projection a thread takes for T tokens, a run [a, b) at a
 * time: begin_rows once, then while (next_rows(..)). Batches take work-shared units; decode takes
 * its home rows in one run, as its other phases do: with the two threads on two CCDs every claim of
 * a unit found the slot's cache line on the other CCD (~170 ns; thread 0 spent 1.4 us per wo call
 * and 1.75 per down call claiming, ~8 claims each, against 0.4 on one CCD), more than the balance
 * the stealing bought: without claims two-CCD decode ran 4.5% faster, one CCD the same
 * (docs/notes/BENCHMARKS.md, issue 7). A partner descheduled for long is the adaptive team's business
 * (llm_team.c). */
typedef struct rows_it {
  int T;
  bool done;
} rows_it;
static rows_it begin_rows(ts_llm_state *s, int tid, ts__grid g, int T) {
  if (T > 1) begin_units(s, tid, g);
  return (rows_it){T, false};
}
static bool next_rows(ts_llm_state *s, int tid, ts__grid g, rows_it *it, int64_t *a, int64_t *b) {
  if (it->T > 1) return next_unit(s, tid, g, a, b);
  if (it->done) return false;
  it->done = true;
  home(s, tid, g, a, b);
  return *b > *a;
}

/* the head of the thread's q|k|v rows of layer l in decode (its first matrix piece: k, or q when
 * it owns no KV head) */
static void queue_qkv_head(ts_llm_state *s, int tid, int l) {
  const int hd = s->m->cfg.head_dim;
  const ts__llm_layer *L = &s->m->layers[l];
  const ts__qkv_part p = ts__qkv_part_of(&s->m->cfg, tid, s->nrun);
  if (p.k1 > p.k0) queue_head(s, tid, &L->wk, (int64_t)p.k0 * hd, (int64_t)p.k1 * hd);
  else queue_head(s, tid, &L->wq, (int64_t)p.h0 * hd, (int64_t)p.h1 * hd);
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
    for (int t = t0; t < t1; t++)
      s->ops->rmsnorm(n, src + (size_t)t * (size_t)lds, norm, s->m->cfg.rms_eps, b->xn + (size_t)t * (size_t)s->wmax);
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

/* The Q8_K form of xs[t] (width n) for t in [t0, t1) into the thread's act, for K-quant weights
 * (prep gives the Q8 form; the K-quants read this one). */
static void prep_k(ts_llm_state *s, int tid, const float *xs, int64_t ld, int64_t n, int t0, int t1) {
  ts__actb *a = &s->tb[tid].act;
  if (!a->kq || n % TS_QKK) return;
  const ts__quant_table *qt = ts__quant();
  for (int t = t0; t < t1; t++)
    qt->act_quantize_k(n, xs + (size_t)t * (size_t)ld, a->kq + (size_t)t * (size_t)n, a->kd + (size_t)t * (size_t)(n / TS_QKK),
                       a->kbs + (size_t)t * (size_t)(n / 16));
}

static bool kq3(const ts__wmat *a, const ts__wmat *b, const ts__wmat *c) {
  return ts__qt_kquant(a->type) || ts__qt_kquant(b->type) || (c && ts__qt_kquant(c->type));
}

/* gemma3: the residual stream after a post-norm, xr[t] = rms(tmp[t]) * w + base[t] (llama.cpp's
 * ggml_add of the normed output and the stream) for every token of the batch, formed by each thread
 * itself into its own xr (so no barrier separates it from the step that reads it); thread tid also
 * writes its share of the tokens into dst, the stream the phase after next starts from. Neither
 * base nor tmp is written in the phase that calls this (x and x2 alternate: llm_internal.h). */
static const float *gemma_resid(ts_llm_state *s, int tid, const float *base, const float *w, float *dst, int T) {
  const int64_t d = s->m->cfg.d_model;
  float *xr = s->tb[tid].xr;
  for (int t = 0; t < T; t++) {
    float *y = xr + (size_t)t * (size_t)d;
    const float *b = base + (size_t)t * (size_t)d;
    s->ops->rmsnorm(d, s->tmp + (size_t)t * (size_t)d, w, s->m->cfg.rms_eps, y);
    for (int64_t e = 0; e < d; e++) y[e] += b[e];
  }
  int64_t t0, t1;
  ts__split(T, tid, s->nrun, 1, &t0, &t1);
  if (t1 > t0) memcpy(dst + (size_t)t0 * (size_t)d, xr + (size_t)t0 * (size_t)d, (size_t)(t1 - t0) * (size_t)d * sizeof(float));
  return xr;
}

/* The stream a layer's attention half starts from: x (the embedding, layer 0 and llama), or for
 * gemma3 x2 + the previous layer's normed MLP output (written back into x for the next half). */
static const float *layer_input(ts_llm_state *s, int tid, int l, int T) {
  if (s->m->arch != TS__ARCH_GEMMA3 || l == 0) return s->x;
  return gemma_resid(s, tid, s->x2, s->m->layers[l - 1].post_ffn_norm, s->x, T);
}

/* gemma3's QK-norm of one head (RMSNorm over head_dim with the layer's weight, in place), before
 * RoPE, as llama.cpp's graph has it */
static void qk_norm(ts_llm_state *s, float *v, const float *w) {
  if (w) s->ops->rmsnorm(s->m->cfg.head_dim, v, w, s->m->cfg.rms_eps, v);
}

/* gemma3: q times f_attention_scale after RoPE (the scores are then not scaled) */
static void q_scale(const ts_llm_state *s, float *v) {
  const float k = s->m->q_scale;
  if (k == 0) return;
  for (int i = 0; i < s->m->cfg.head_dim; i++) v[i] *= k;
}

/* the layer's RoPE table: the local layers' own base (gemma3) */
static const float *rope_of(const ts_llm_state *s, int l) { return s->m->layers[l].swa ? s->rope_swa : s->rope; }

void ts__step_embed(ts_llm_state *s, int tid, const int32_t *tokens, int T) {
  const ts__wmat *e = &s->m->tok_embd;
  int64_t t0, t1;
  ts__split(T, tid, s->nrun, 1, &t0, &t1);
  for (int64_t t = t0; t < t1; t++) {
    float *x = s->x + (size_t)t * (size_t)e->cols;
    ts__dequant_ref(e->type, e->data + (size_t)tokens[t] * e->row_bytes, x, e->cols);
    if (s->m->arch == TS__ARCH_GEMMA3) /* llama.cpp's ggml_scale of the inputs by sqrtf(n_embd) */
      for (int64_t i = 0; i < e->cols; i++) x[i] *= s->m->embd_scale;
  }
}

/* Q/K/V rows [r0, r1) of the stacked q | k | v rows for T tokens, RoPE on the q and k rows among
 * them, the k and v rows into the cache at positions pos..pos+T-1. */
static void qkv_rows(ts_llm_state *s, int tid, int l, int T, int pos, const float *xf, int64_t ldx, int64_t r0,
                     int64_t r1) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv;
  const ts__wmat *w[3] = {&L->wq, &L->wk, &L->wv};
  const int64_t first[4] = {0, nh * hd, (nh + nkv) * hd, (nh + 2 * nkv) * hd};
  for (int k = 0; k < 3; k++) {
    int64_t a = r0 > first[k] ? r0 : first[k], b = r1 < first[k + 1] ? r1 : first[k + 1];
    if (a >= b) continue;
    ts__wmat_gemm(w[k], a - first[k], b - first[k], xf, ldx, &s->tb[tid].act, T, s->qkv + first[k], s->ldq);
  }
  const int neox = c->rope == TS_LLM_ROPE_NEOX;
  const float *rope = rope_of(s, l);
  for (int t = 0; t < T; t++) {
    float *row = s->qkv + (size_t)t * (size_t)s->ldq;
    const float *cs = rope + (size_t)(pos + t) * (size_t)(c->n_rot / 2) * 2;
    for (int64_t a = r0; a < r1;) { /* one head's piece [a, b) at a time */
      const int64_t u = a / hd, i0 = a % hd, b = (u + 1) * hd < r1 ? (u + 1) * hd : r1, i1 = i0 + (b - a);
      float *v = row + u * hd;
      const bool whole = i0 == 0 && i1 == hd; /* always for gemma3 (NEOX: units of whole heads, ts__grid_qkv) */
      if (u < nh + nkv && whole) qk_norm(s, v, u < nh ? L->q_norm : L->k_norm);
      if (u < nh + nkv && i0 < c->n_rot) /* dims [i0, min(i1, n_rot)): whole heads under NEOX */
        s->ops->rope(v + i0, cs + i0, (int)((i1 < c->n_rot ? i1 : c->n_rot) - i0), neox);
      if (u < nh && whole) q_scale(s, v);
      if (u >= nh) { /* into the cache */
        const int kh = (int)(u < nh + nkv ? u - nh : u - nh - nkv);
        ts__kv_store(s, l, kh, pos + t, u < nh + nkv ? v : NULL, u < nh + nkv ? NULL : v, (int)i0, (int)i1);
      }
      a = b;
    }
  }
}

/* Batches: norm, then the thread's units of the stacked q | k | v rows (qkv_rows). */
void ts__step_qkv(ts_llm_state *s, int tid, int l, int T, int pos) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const ts__grid g = ts__grid_qkv(s->m);
  const float *xf;
  int64_t ldx, a, b;
  begin_units(s, tid, g);
  prep(s, tid, layer_input(s, tid, l, T), c->d_model, L->attn_norm, c->d_model, 0, T, &xf, &ldx);
  if (kq3(&L->wq, &L->wk, &L->wv)) prep_k(s, tid, xf, ldx, c->d_model, 0, T);
  while (next_unit(s, tid, g, &a, &b)) qkv_rows(s, tid, l, T, pos, xf, ldx, a, b);
}

/* Decode: norm; the k and v rows of the thread's own KV heads (roped, stored, then published on
 * its flag), its q rows (roped); a wait for the KV head it shares with the thread before it, if
 * any; its attention heads, their output quantized into s->aact for wo. One barrier per layer
 * fewer than a q|k|v phase and an attention phase (the flag's wait is usually over before it
 * starts: the owner computes its k and v rows first). */
double ts__step_qkv_att(ts_llm_state *s, int tid, int l, int pos) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const int64_t hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv;
  const ts__qkv_part p = ts__qkv_part_of(c, tid, s->nrun);
  int64_t d0, d1; /* next weights: wo, after attention */
  home(s, tid, ts__grid_d(&L->wo), &d0, &d1);
  queue_head(s, tid, &L->wo, d0, d1);
  const float *xf;
  int64_t ldx;
  prep(s, tid, layer_input(s, tid, l, 1), c->d_model, L->attn_norm, c->d_model, 0, 1, &xf, &ldx);
  if (kq3(&L->wq, &L->wk, &L->wv)) prep_k(s, tid, xf, ldx, c->d_model, 0, 1);
  const ts__actb *xb = &s->tb[tid].act;
  float *q = s->qkv, *k = q + nh * hd, *v = k + nkv * hd;
  const float *cs = rope_of(s, l) + (size_t)pos * (size_t)(c->n_rot / 2) * 2;
  const int neox = c->rope == TS_LLM_ROPE_NEOX;
  const int stamp = (int)((s->kvgen * (unsigned)c->n_layer + (unsigned)l + 1u) & 0x7fffffffu);
  if (p.k1 > p.k0) {
    if (!ts__sparse_rows(s, tid, l, TS_LLM_PROJ_K, p.k0 * hd, p.k1 * hd, xf, k))
      ts__wmat_gemm(&L->wk, p.k0 * hd, p.k1 * hd, xf, ldx, xb, 1, k, s->ldq);
    if (!ts__sparse_rows(s, tid, l, TS_LLM_PROJ_V, p.k0 * hd, p.k1 * hd, xf, v))
      ts__wmat_gemm(&L->wv, p.k0 * hd, p.k1 * hd, xf, ldx, xb, 1, v, s->ldq);
    for (int kh = p.k0; kh < p.k1; kh++) {
      qk_norm(s, k + kh * hd, L->k_norm);
      s->ops->rope(k + kh * hd, cs, c->n_rot, neox);
      ts__kv_store(s, l, kh, pos, k + kh * hd, v + kh * hd, 0, (int)hd);
    }
    if (s->nrun > 1) ts__flag_set(&s->kvf[tid], stamp);
  }
  if (!ts__sparse_rows(s, tid, l, TS_LLM_PROJ_Q, p.h0 * hd, p.h1 * hd, xf, q))
    ts__wmat_gemm(&L->wq, p.h0 * hd, p.h1 * hd, xf, ldx, xb, 1, q, s->ldq);
  for (int h = p.h0; h < p.h1; h++) {
    qk_norm(s, q + h * hd, L->q_norm);
    s->ops->rope(q + h * hd, cs, c->n_rot, neox);
    q_scale(s, q + h * hd);
  }
  const double t0 = tid == 0 ? ts_now() : 0;
  if (p.n0 < p.k0) { /* KV head n0: the thread whose heads hold its first query head computed it */
    int o = tid - 1;
    while (o > 0 && ts__qkv_part_of(c, o, s->nrun).h0 > p.n0 * (int)(nh / nkv)) o--;
    ts__flag_wait(&s->kvf[o], stamp, &s->tb[tid].pf);
  }
  ts__att_decode(s, l, pos, tid);
  if (hd % TS_QK == 0) ts__actb_quant_part(&s->aact, s->att, p.h0 * hd, p.h1 * hd); /* wo's input (ts__step_wo) */
  return tid == 0 ? ts_now() - t0 : 0;
}

/* x[t][rows] += (W src[t])[rows] for the thread's units of rows: the output projection of attention
 * or the MLP's down projection (src width n, unnormalized; quantized here, or already in *pre). */
static void proj_residual(ts_llm_state *s, int tid, const ts__wmat *w, const float *src, int64_t lds, int T,
                          const ts__actb *pre, int gfrom) {
  const int64_t d = s->m->cfg.d_model;
  const ts__grid g = ts__grid_d(w);
  const float *xf = src;
  int64_t ldx = lds, r0, r1;
  rows_it it = begin_rows(s, tid, g, T);
  if (ts__qt_kquant(w->type)) pre = NULL; /* the shared decode activations have no Q8_K form */
  if (!pre) prep(s, tid, src, lds, NULL, w->cols, 0, T, &xf, &ldx);
  if (!pre && ts__qt_kquant(w->type)) prep_k(s, tid, xf, ldx, w->cols, 0, T);
  const ts__actb *xb = pre ? pre : &s->tb[tid].act;
  const bool add = s->m->arch != TS__ARCH_GEMMA3; /* gemma3 norms tmp first (gemma_resid) */
  while (next_rows(s, tid, g, &it, &r0, &r1)) {
    wmat_gemm_g(w, r0, r1, xf, ldx, xb, T, s->tmp, d, gfrom, T - gfrom);
    for (int t = 0; t < T && add; t++) {
      float *x = s->x + (size_t)t * (size_t)d, *y = s->tmp + (size_t)t * (size_t)d;
      for (int64_t r = r0; r < r1; r++) x[r] += y[r];
    }
  }
}

void ts__step_wo(ts_llm_state *s, int tid, int l, int T) {
  const ts_llm_config *c = &s->m->cfg;
  if (T == 1) { /* next: gate's rows of the thread's neurons */
    int64_t f0, f1;
    ts__ff_part(c, tid, s->nrun, &f0, &f1);
    queue_head(s, tid, &s->m->layers[l].gate, f0, f1);
  }
  if (T == 1 && s->sp) { /* input-sparse wo (TEAL): the thread's d rows from the selected heads' values */
    int64_t r0, r1;
    ts__split(c->d_model, tid, s->nrun, 32, &r0, &r1);
    if (ts__sparse_rows(s, tid, l, TS_LLM_PROJ_O, r0, r1, s->att, s->tmp)) {
      if (s->m->arch != TS__ARCH_GEMMA3) /* gemma3 norms tmp first (gemma_resid), as proj_residual */
        for (int64_t r = r0; r < r1; r++) s->x[r] += s->tmp[r];
      return;
    }
  }
  ts__actb a = s->aact; /* decode: attention's output quantized by head (ts__step_qkv_att) */
  a.pf = &s->tb[tid].pf;
  proj_residual(s, tid, &s->m->layers[l].wo, s->att, (int64_t)c->n_head * c->head_dim, T,
                T == 1 && c->head_dim % TS_QK == 0 ? &a : NULL, 0);
}

/* Batches: norm, then the thread's units of the stacked gate | up rows into ffg / ffu (SwiGLU
 * follows: ts__step_swiglu). Decode: norm, then gate's and up's rows of the thread's neurons
 * (ts__ff_part: one ascending stream in the layout), h = silu(gate) up for them into ffg, and h
 * quantized into the shared s->hact, so that after the barrier down reads the other threads' parts
 * of h as int8 blocks (~1.1 bytes per neuron) rather than their gate or up values (8 bytes per
 * neuron across the threads' caches, and each thread's own quantization of all of h). Elementwise
 * and per block: the same bits as forming h whole. With side prefetches on (off by default: they
 * cost decode 3-9% on the Xeon VM, see ts_llm_model's side) the next layer's KV cache for this
 * thread's attention heads is queued here, for the gate, up and down matmuls to prefetch on the
 * side; off, attention's own prefetches fetch it (no slower at 1024 and 2000 positions). */
void ts__step_gate_up(ts_llm_state *s, int tid, int l, int T, int pos) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const int64_t ff = c->n_ff;
  const ts__grid g = grid_ff(s->m);
  const float *xf;
  int64_t ldx, a, b;
  if (T == 1) { /* next: down; behind it the next layer's KV cache (what is left queued is stale) */
    int64_t r0, r1;
    ts__pfq_reset(&s->tb[tid].pf);
    if (l + 1 < c->n_layer && s->tb[tid].pf.side) ts__att_queue_kv(s, tid, l + 1, pos);
    home(s, tid, ts__grid_d(&L->down), &r0, &r1);
    queue_head(s, tid, &L->down, r0, r1);
  }
  /* gemma3: the stream after the attention half, x + post(attention), also kept in x2 */
  const float *src = s->m->arch == TS__ARCH_GEMMA3 ? gemma_resid(s, tid, s->x, L->post_attn_norm, s->x2, T) : s->x;
  prep(s, tid, src, c->d_model, L->ffn_norm, c->d_model, 0, T, &xf, &ldx);
  if (kq3(&L->gate, &L->up, NULL)) prep_k(s, tid, xf, ldx, c->d_model, 0, T);
  if (T == 1) {
    int64_t f0, f1;
    ts__ff_part(c, tid, s->nrun, &f0, &f1);
    if (f1 <= f0) return;
    ts__wmat_gemm(&L->gate, f0, f1, xf, ldx, &s->tb[tid].act, 1, s->ffg, ff);
    ts__wmat_gemm(&L->up, f0, f1, xf, ldx, &s->tb[tid].act, 1, s->ffu, ff);
    ts__glu(s, f1 - f0, s->ffg + f0, s->ffu + f0);
    if (ff % TS_QK == 0) ts__actb_quant_part(&s->hact, s->ffg, f0, f1);
    return;
  }
  begin_units(s, tid, g); /* (only where the units are taken: a slot left full would be stolen from
                           * in the next phase) */
  while (next_unit(s, tid, g, &a, &b)) {
    if (a < ff) ts__wmat_gemm(&L->gate, a, b < ff ? b : ff, xf, ldx, &s->tb[tid].act, T, s->ffg, ff);
    if (b > ff) ts__wmat_gemm(&L->up, (a > ff ? a : ff) - ff, b - ff, xf, ldx, &s->tb[tid].act, T, s->ffu, ff);
  }
}

/* Batches: h = silu(gate) * up into ffg for the thread's tokens (a barrier after gate | up, and one
 * after this). */
void ts__reglu(int64_t n, float *g, const float *u) {
  for (int64_t i = 0; i < n; i++) g[i] = g[i] > 0.0f ? g[i] * u[i] : 0.0f;
}

void ts__glu(const ts_llm_state *s, int64_t n, float *g, const float *u) {
  switch (s->m->cfg.ffn_act) {
    case TS_LLM_ACT_GELU: ts__geglu_ref(n, g, u); break;
    case TS_LLM_ACT_RELU: ts__reglu(n, g, u); break;
    default: s->ops->swiglu(n, g, u); break;
  }
}

void ts__step_swiglu(ts_llm_state *s, int tid, int T) {
  const int64_t ff = s->m->cfg.n_ff;
  int64_t t0, t1;
  ts__split(T, tid, s->nrun, 1, &t0, &t1);
  for (int64_t t = t0; t < t1; t++) ts__glu(s, ff, s->ffg + (size_t)t * (size_t)ff, s->ffu + (size_t)t * (size_t)ff);
}

void ts__step_down(ts_llm_state *s, int tid, int l, int T) {
  if (T == 1) { /* next: the next layer's q|k|v, or the output projection */
    if (l + 1 < s->m->cfg.n_layer) queue_qkv_head(s, tid, l + 1);
    else {
      int64_t r0, r1;
      home(s, tid, ts__grid_vocab(s->m), &r0, &r1);
      queue_head(s, tid, &s->m->output, r0, r1);
    }
  }
  const int64_t ff = s->m->cfg.n_ff;
  if (T == 1) { /* decode: h in ffg and, quantized, in hact (ts__step_gate_up) */
    ts__actb h = s->hact;
    h.pf = &s->tb[tid].pf;
    proj_residual(s, tid, &s->m->layers[l].down, s->ffg, ff, T, ff % TS_QK == 0 ? &h : NULL, 0);
    return;
  }
  /* llama.cpp's last layer runs its MLP for the tokens whose logits it outputs only (from..): their
   * Q4_K groups of 4 count from there (the others' results are never read) */
  const bool last = l == s->m->cfg.n_layer - 1 && s->out_from < T;
  proj_residual(s, tid, &s->m->layers[l].down, s->ffg, ff, T, NULL, last ? s->out_from : 0);
}

/* logits[t - from][vocab rows of this thread's units] for tokens [from, T). */
void ts__step_output(ts_llm_state *s, int tid, int T, int from, float *logits) {
  const ts_llm_config *c = &s->m->cfg;
  const ts__grid g = ts__grid_vocab(s->m);
  const float *xf;
  int64_t ldx, r0, r1;
  rows_it it = begin_rows(s, tid, g, T);
  prep(s, tid, layer_input(s, tid, c->n_layer, T), c->d_model, s->m->output_norm, c->d_model, from, T, &xf, &ldx);
  if (ts__qt_kquant(s->m->output.type)) prep_k(s, tid, xf, ldx, c->d_model, from, T);
  const ts__actb sub = actb_from(&s->tb[tid].act, c->d_model, from);
  while (next_rows(s, tid, g, &it, &r0, &r1))
    ts__wmat_gemm(&s->m->output, r0, r1, xf + (size_t)from * (size_t)ldx, ldx, &sub, T - from, logits, c->n_vocab);
}

void ts__sparse_prep(ts_llm_state *s, int tid, int l, const float **xf, int64_t *ldx) {
  const int64_t d = s->m->cfg.d_model;
  const ts__llm_layer *L = &s->m->layers[l];
  const float *src = s->m->arch == TS__ARCH_GEMMA3 ? gemma_resid(s, tid, s->x, L->post_attn_norm, s->x2, 1) : s->x;
  prep(s, tid, src, d, L->ffn_norm, d, 0, 1, xf, ldx);
  if (kq3(&L->gate, &L->up, NULL)) prep_k(s, tid, *xf, *ldx, d, 0, 1);
}
