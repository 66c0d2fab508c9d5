/* Activation sparsity on gemma3 (tessera/llm_sparse.h), on a tiny synthetic Gemma 3 with the real
 * 270M file's weight types (test_llm_tiny.h's writer: q, k, gate, up Q5_0; v Q5_0 / Q8_0 and down
 * Q6_K / Q4_K alternating by layer; o Q4_K; the tied embedding Q8_0; QK-norm, post-norms, GELU gate,
 * a 7-position sliding window on layer 0): d 192 (no K-quant fits it, as 640 in the real model),
 * 4 heads of 64 and n_ff 256 (the K-quant matrices' rows).
 *
 *   copies    every transposed copy (Q8_0, re-quantized from Q5_0, Q8_0, Q4_K, Q6_K) within the
 *             re-quantization bound of the file's weights (RQ8 below);
 *   decode    CATS, TEAL and an always-dense router, 1 and 3 threads: the logits against the double
 *             forward of the same masked computation (the gemma3 path of test_llm_tiny.h's
 *             reference with the copies, masks and roundings of the sparse paths), at the tolerance
 *             test_llm.c holds the dense gemma3 path to against the same reference (5e-2 of the
 *             largest logit: the reference rounds every matmul input as the runtime does, but its
 *             double sums flip an int8 or fp16 rounding now and then, which later layers carry);
 *             and the last layer's sparse MLP against its double reference from the runtime's own
 *             input with a derived bound (mlp_check);
 *   zero      a threshold just above 0 on the last layer (every neuron active through the sparse
 *             path) against the dense path: the same input, the same h bit for bit, the MLP
 *             output within the re-quantization bound (all_active);
 * each at the process's kernel level and again, in a child process, at each lower one (scalar,
 * AVX2); the calibration of every method on the tiny model, and SATS's gemma3 proxy against its
 * definition recomputed here (test_llm_sparse_gemma_cal.c). The real model, when present
 * (TESSERA_GEMMA3 or bench/peers/.venv-llm/gemma3.gguf), gets the zero and mlp checks on its last
 * layer; absent, that part is skipped and says so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/llm_internal.h"
#include "llm/llm_sparse_internal.h"
#include "test_llm_sparse_ref.h"
#include "tst_dispatch.h"

#define U 0x1p-24 /* fp32's unit roundoff */
/* A Q8_0 copy's value against the weight it re-quantized: |q fp16(d) - w| <= d / 2 (rounding) +
 * 127 |fp16(d) - d| (the scale's fp16 rounding, <= 2^-11 d) <= 0.5625 d, d <= fp16(d) (1 + 2^-11) */
#define RQ8 0.563

static const int32_t kSeq[] = {5, 77, 200, 3, 150, 260, 261, 9, 44, 100, 101, 102, 255, 7, 8, 30};
#define NSEQ (int)(sizeof kSeq / sizeof kSeq[0])

enum { MODE_CATS, MODE_TEAL, MODE_ROUTED };

/* ---- the double forward of the masked computation ----------------------------------------------- */

/* y = W x, x rounded as the runtime's matmul reads it: Q8 blocks (tiny_mv), Q8_K for the K-quants */
static void mv_as(const ts_gguf *g, const char *name, const double *W, int64_t rows, int64_t cols, const double *x,
                  double *y) {
  const ts_gguf_tensor *t = NULL;
  ts_gguf_find_tensor(g, name, &t);
  if (!t || !ts__qt_kquant(t->type)) {
    tiny_mv(W, rows, cols, x, y);
    return;
  }
  float f[2048] = {0}, kd[8];
  int8_t kq[2048];
  int16_t kbs[128];
  double xr[2048];
  for (int64_t j = 0; j < cols; j++) f[j] = (float)x[j];
  ts__act_quantize_k_ref(cols, f, kq, kd, kbs);
  for (int64_t j = 0; j < cols; j++) xr[j] = (double)kq[j] * kd[j / 256];
  for (int64_t r = 0; r < rows; r++) {
    double s = 0;
    for (int64_t j = 0; j < cols; j++) s += W[r * cols + j] * xr[j];
    y[r] = s;
  }
}

/* The forward of kSeq one token at a time with sp's sparse paths: thresholds chosen per layer at
 * quantile q of the reference's own values, in gaps (written into sp->th). *act_frac: the fraction of
 * MLP neurons the masks dropped. */
static void g3_reference(const ts_llm_model *m, ts_llm_sparse *sp, int mode, double q, double *logits, double *act_frac) {
  const ts_gguf *g = ts_llm_model_gguf(m);
  const ts_llm_config *c = ts_llm_model_config(m);
  const int d = c->d_model, hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, ff = c->n_ff, nv = c->n_vocab, n = NSEQ;
  int64_t rr, cc;
  double *E = tiny_deq(g, "token_embd.weight", &rr, &cc), *on = tiny_deq(g, "output_norm.weight", &rr, &cc);
  double *x = malloc((size_t)n * d * sizeof *x), *hn = malloc((size_t)n * d * sizeof *hn);
  double *qv = malloc((size_t)n * nh * hd * sizeof *qv), *k = malloc((size_t)n * nkv * hd * sizeof *k);
  double *v = malloc((size_t)n * nkv * hd * sizeof *v), *att = malloc((size_t)n * nh * hd * sizeof *att);
  double *a = malloc((size_t)n * ff * sizeof *a), *u = malloc((size_t)n * ff * sizeof *u), *o1 = malloc((size_t)d * sizeof *o1);
  double *sc = malloc((size_t)n * sizeof *sc), *h = malloc((size_t)n * ff * sizeof *h);
  int64_t dropped = 0, total = 0;
  for (int t = 0; t < n; t++)
    for (int i = 0; i < d; i++) x[t * d + i] = E[(size_t)kSeq[t] * d + i] * sqrt((double)d);
  for (int l = 0; l < c->n_layer; l++) {
    char nm[64];
#define W(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), tiny_deq(g, nm, &rr, &cc))
#define NM(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
    double *an = W("attn_norm.weight"), *fn = W("ffn_norm.weight"), *wq = W("attn_q.weight"), *wk = W("attn_k.weight");
    double *wv = W("attn_v.weight"), *wo = W("attn_output.weight"), *wg = W("ffn_gate.weight"), *wu = W("ffn_up.weight");
    double *qn = W("attn_q_norm.weight"), *kn = W("attn_k_norm.weight"), *pa = W("post_attention_norm.weight");
    double *pf = W("post_ffw_norm.weight");
    ts_llm_layer_thresholds *th = &sp->th[l];
    const ts__tmat *tm = &sp->tm[(size_t)l * TS_LLM_NPROJ];
    const bool teal = mode == MODE_TEAL, local = c->n_swa > 0 && l % 2 == 0;
    const float base = local ? c->rope_base_swa : c->rope_base;
    for (int t = 0; t < n; t++) tiny_rms(x + t * d, an, d, c->rms_eps, hn + t * d);
    if (teal) th->in[0] = th->in[1] = th->in[2] = gap_threshold(hn, n * d, q);
    for (int t = 0; t < n; t++) {
      if (teal) {
        sp_mv(&tm[TS_LLM_PROJ_Q], hn + t * d, th->in[0], qv + t * nh * hd);
        sp_mv(&tm[TS_LLM_PROJ_K], hn + t * d, th->in[1], k + t * nkv * hd);
        sp_mv(&tm[TS_LLM_PROJ_V], hn + t * d, th->in[2], v + t * nkv * hd);
      } else {
        mv_as(g, NM("attn_q.weight"), wq, nh * hd, d, hn + t * d, qv + t * nh * hd);
        mv_as(g, NM("attn_k.weight"), wk, nkv * hd, d, hn + t * d, k + t * nkv * hd);
        mv_as(g, NM("attn_v.weight"), wv, nkv * hd, d, hn + t * d, v + t * nkv * hd);
      }
      for (int hh = 0; hh < nh + nkv; hh++) { /* QK-norm, NEOX RoPE, q times 1/sqrt(hd), fp16 */
        double *p = hh < nh ? qv + (t * nh + hh) * hd : k + (t * nkv + hh - nh) * hd;
        tiny_rms(p, hh < nh ? qn : kn, hd, c->rms_eps, p);
        float thf = (float)t, tsc = powf(base, -2.0f / (float)c->n_rot);
        const int half = c->n_rot / 2;
        for (int i = 0; i < half; i++, thf *= tsc) {
          const double ang = thf, a0 = p[i], b0 = p[i + half];
          p[i] = a0 * cos(ang) - b0 * sin(ang);
          p[i + half] = a0 * sin(ang) + b0 * cos(ang);
        }
        for (int i = 0; i < hd; i++) p[i] = tiny_r16(hh < nh ? p[i] / sqrt((double)hd) : p[i]);
      }
      for (int i = 0; i < nkv * hd; i++) v[t * nkv * hd + i] = tiny_r16(v[t * nkv * hd + i]);
      for (int hh = 0; hh < nh; hh++) { /* token t over its window */
        const int kh = hh / (nh / nkv), j0 = local && t + 1 > c->n_swa ? t + 1 - c->n_swa : 0;
        double mx = -INFINITY, z = 0;
        for (int j = j0; j <= t; j++) {
          double s = 0;
          for (int i = 0; i < hd; i++) s += qv[(t * nh + hh) * hd + i] * k[(j * nkv + kh) * hd + i];
          sc[j] = s;
          mx = s > mx ? s : mx;
        }
        for (int j = j0; j <= t; j++) z += sc[j] = exp(sc[j] - mx);
        for (int i = 0; i < hd; i++) {
          double s = 0;
          for (int j = j0; j <= t; j++) s += tiny_r16(sc[j] / z) * v[(j * nkv + kh) * hd + i];
          att[t * nh * hd + hh * hd + i] = s;
        }
      }
    }
    if (teal) th->in[TS_LLM_PROJ_O] = gap_threshold(att, n * nh * hd, q);
    for (int t = 0; t < n; t++) {
      if (teal) sp_mv(&tm[TS_LLM_PROJ_O], att + t * nh * hd, th->in[TS_LLM_PROJ_O], o1);
      else mv_as(g, NM("attn_output.weight"), wo, d, nh * hd, att + t * nh * hd, o1);
      tiny_rms(o1, pa, d, c->rms_eps, o1);
      for (int i = 0; i < d; i++) x[t * d + i] += o1[i];
      tiny_rms(x + t * d, fn, d, c->rms_eps, hn + t * d);
    }
    if (teal) th->in[TS_LLM_PROJ_GATE] = th->in[TS_LLM_PROJ_UP] = gap_threshold(hn, n * d, q);
    for (int t = 0; t < n; t++) {
      if (teal) {
        sp_mv(&tm[TS_LLM_PROJ_GATE], hn + t * d, th->in[TS_LLM_PROJ_GATE], a + t * ff);
        sp_mv(&tm[TS_LLM_PROJ_UP], hn + t * d, th->in[TS_LLM_PROJ_UP], u + t * ff);
      } else {
        tiny_mv(wg, ff, d, hn + t * d, a + t * ff);
        tiny_mv(wu, ff, d, hn + t * d, u + t * ff);
      }
      for (int i = 0; i < ff; i++) a[t * ff + i] = tiny_gelu(a[t * ff + i]);
    }
    const double tact = mode == MODE_CATS ? (th->act = gap_threshold(a, n * ff, q)) : -1; /* -1: no mask */
    for (int t = 0; t < n * ff; t++) {
      const bool on1 = tact < 0 || fabs(a[t]) > tact;
      h[t] = on1 ? a[t] * u[t] : 0;
      dropped += !on1, total++;
    }
    if (teal) th->in[TS_LLM_PROJ_DOWN] = gap_threshold(h, n * ff, q);
    for (int t = 0; t < n; t++) { /* down from its copy, h unrounded (fp32 in the runtime), then the post-norm */
      sp_mv(&tm[TS_LLM_PROJ_DOWN], h + t * ff, teal ? th->in[TS_LLM_PROJ_DOWN] : 0, o1);
      tiny_rms(o1, pf, d, c->rms_eps, o1);
      for (int i = 0; i < d; i++) x[t * d + i] += o1[i];
    }
#undef W
#undef NM
    free(an), free(fn), free(wq), free(wk), free(wv), free(wo), free(wg), free(wu), free(qn), free(kn), free(pa), free(pf);
  }
  for (int t = 0; t < n; t++) {
    tiny_rms(x + t * d, on, d, c->rms_eps, hn);
    tiny_mv(E, nv, d, hn, logits + (size_t)t * nv);
  }
  *act_frac = total ? (double)dropped / (double)total : 0;
  free(E), free(on), free(x), free(hn), free(qv), free(k), free(v), free(att), free(a), free(u), free(o1), free(sc), free(h);
}

/* ---- one layer's MLP from the runtime's own input --------------------------------------------- */

/* The quantized input the runtime's gate and up read (prep: rms(x2) ffn_norm, the active quant
 * table's Q8 blocks; the Q8_K form for K-quant matrices) as doubles, and xn itself. */
static void mlp_input(const ts_llm_state *s, int l, float *xn, double *x8, double *xk) {
  const ts_llm_config *c = &s->m->cfg;
  const int64_t d = c->d_model;
  int8_t q[8192];
  float dq[256], sx[256], kd[32];
  int32_t sm[256];
  int16_t kbs[512];
  s->ops->rmsnorm(d, s->x2, s->m->layers[l].ffn_norm, c->rms_eps, xn);
  ts__quant()->act_quantize(d, xn, q, dq, sm, sx);
  for (int64_t j = 0; j < d; j++) x8[j] = (double)q[j] * dq[j / 32];
  if (d % 256) return;
  ts__act_quantize_k_ref(d, xn, q, kd, kbs);
  for (int64_t j = 0; j < d; j++) xk[j] = (double)q[j] * kd[j / 256];
}

/* Neuron i's gate or up as the runtime forms it, in double, and its error bound: the file's row
 * against the quantized input (exact block sums; the runtime's fp32 sum of nb block terms, a
 * scale product each and 3 levels of the final lane sum: (nb + 9) 2^-24 sum |terms|), or, under a
 * TEAL threshold t, the copy's column sum over |xn_j| > t (the AXPY's (k + 8) 2^-24 sum |c w|). */
static double ff_ref(const ts_llm_state *s, int l, int p, int64_t i, const float *xn, const double *x8, const double *xk,
                     double *err) {
  const ts_llm_sparse *sp = s->sp;
  const int64_t d = s->m->cfg.d_model;
  const float t = sp->th[l].in[p];
  const ts__tmat *tm = &sp->tm[(size_t)l * TS_LLM_NPROJ + p];
  double y = 0, mag = 0;
  if (t > 0 && tm->npiece) {
    int k = 0;
    for (int64_t j = 0; j < d; j++)
      if (fabsf(xn[j]) > t) {
        const double w = tm_at(tm, i, j);
        y += xn[j] * w, mag += fabs(xn[j] * w), k++;
      }
    *err = (k + 8) * U * mag;
    return y;
  }
  const ts__wmat *W = ts__proj_mat(s->m, l, p);
  float w[8192];
  ts__dequant_ref(W->type, W->data + (size_t)i * W->row_bytes, w, d);
  const double *xr = ts__qt_kquant(W->type) ? xk : x8;
  for (int64_t j = 0; j < d; j++) y += w[j] * xr[j], mag += fabs(w[j] * xr[j]);
  *err = (double)(d / 32 + 9) * U * mag;
  return y;
}

/* Layer l's sparse MLP of the token just decoded against its double reference from the runtime's
 * input x2: a = gelu(gate) (|a_rt - a_ref| <= 1.13 (2 dg + 2^-10 (|g| + dg)) + 2^-10 |a| + 1e-7:
 * gelu's slope is below 1.13, its input and output are fp16-rounded, so a gate within dg may land
 * an fp16 step away); h = a u over the runtime's mask (|a_rt| > act, or all when `all`) with
 * |h_rt - a_rt u_ref| <= |a_rt| du + 2^-24 |h|; the MLP output D' (h . mask) (D' the copy, mask
 * also |h_rt| > in[down]) within sum |D'| dh + (k + 8) 2^-24 sum (|h| + dh) |D'| of the runtime's
 * tmp (gemma3's MLP output before its post-norm). Returns the worst error / bound. */
static double mlp_check(const ts_llm_state *s, int l, bool all, const char *what) {
  const ts_llm_config *c = &s->m->cfg;
  const ts_llm_sparse *sp = s->sp;
  const int64_t d = c->d_model, ff = c->n_ff;
  const int kind = ts__sparse_mlp_kind(s, l);
  float *xn = malloc((size_t)d * sizeof *xn);
  double *x8 = malloc((size_t)d * sizeof *x8), *xk = malloc((size_t)d * sizeof *xk);
  double *h = calloc((size_t)ff, sizeof *h), *dh = calloc((size_t)ff, sizeof *dh);
  bool *on = calloc((size_t)ff, sizeof *on);
  mlp_input(s, l, xn, x8, xk);
  double wa = 0, wh = 0, wy = 0;
  for (int64_t i = 0; i < ff; i++) {
    double dg, du;
    const double g = ff_ref(s, l, TS_LLM_PROJ_GATE, i, xn, x8, xk, &dg);
    const float art = s->ffg[i];
    const double aref = tiny_gelu(g), ba = 1.13 * (2 * dg + 0x1p-10 * (fabs(g) + dg)) + 0x1p-10 * fabs(aref) + 1e-7;
    wa = fmax(wa, fabs(art - aref) / ba);
    on[i] = kind == 1 || all || fabsf(art) > sp->th[l].act;
    if (!on[i]) continue;
    const double u = ff_ref(s, l, TS_LLM_PROJ_UP, i, xn, x8, xk, &du);
    h[i] = art * u;
    dh[i] = fabs(art) * du + U * fabs(h[i]) + 1e-30;
    const float hrt = s->spw->h[i];
    wh = fmax(wh, fabs(hrt - h[i]) / dh[i]);
    on[i] = fabsf(hrt) > sp->th[l].in[TS_LLM_PROJ_DOWN];
  }
  const ts__tmat *D = &sp->tm[(size_t)l * TS_LLM_NPROJ + TS_LLM_PROJ_DOWN];
  int k = 0;
  for (int64_t i = 0; i < ff; i++) k += on[i];
  for (int64_t r = 0; r < d; r++) {
    double y = 0, b = 0, mag = 0;
    for (int64_t i = 0; i < ff; i++) {
      if (!on[i]) continue;
      const double w = tm_at(D, r, i);
      y += h[i] * w, b += fabs(w) * dh[i], mag += (fabs(h[i]) + dh[i]) * fabs(w);
    }
    b += (k + 8) * U * mag + 1e-30;
    const double e = fabs(s->tmp[r] - y) / b;
    if (!(e <= wy)) wy = e != e ? INFINITY : e;
  }
  CHECK(wa <= 1 && wh <= 1 && wy <= 1, "%s layer %d: gelu(gate) %.3g, h %.3g, MLP output %.3g of their bounds (%d neurons)", what, l,
        wa, wh, wy, k);
  free(xn), free(x8), free(xk), free(h), free(dh), free(on);
  return fmax(wa, fmax(wh, wy));
}

/* The dense state s0 and the sparse state s1 (layer l alone thresholded, act just above 0: every
 * neuron with a != 0 through the sparse path) after the same tokens: the same x2 (earlier layers
 * are dense in both), the same h bit for bit (gdot_q5_0 is the dense row dot), and the MLP outputs
 * apart by at most the re-quantization: sum_i RQ8 d'_ri |h_i| (down's Q8_0 copy) + sum_i |D_ri|
 * 0.501 |kd_i| (the dense path's Q8_K rounding of h, kd its super-block's step) + both fp32 sums. */
static void all_active(const ts_llm_state *s0, const ts_llm_state *s1, int l, const char *what) {
  const ts_llm_config *c = &s0->m->cfg;
  const int64_t d = c->d_model, ff = c->n_ff;
  CHECK(!memcmp(s0->x2, s1->x2, (size_t)d * sizeof(float)), "%s: the last MLP's input differs from the dense state's", what);
  int hdiff = 0;
  for (int64_t i = 0; i < ff; i++) {
    const float hs = fabsf(s1->ffg[i]) > s1->sp->th[l].act ? s1->spw->h[i] : 0.0f;
    hdiff += hs != s0->ffg[i];
  }
  CHECK(hdiff == 0, "%s: %d of %lld h values differ from the dense path's", what, hdiff, (long long)ff);
  const ts__wmat *Dw = ts__proj_mat(s0->m, l, TS_LLM_PROJ_DOWN);
  const ts__tmat *D = &s1->sp->tm[(size_t)l * TS_LLM_NPROJ + TS_LLM_PROJ_DOWN];
  float *h = malloc((size_t)ff * sizeof *h), *w = malloc((size_t)ff * sizeof *w), kd[64], dq[256], sx[256];
  int8_t *q = malloc((size_t)ff);
  int16_t kbs[1024];
  int32_t sm[256];
  double *hr = malloc((size_t)ff * sizeof *hr), *step = malloc((size_t)ff * sizeof *step);
  memcpy(h, s0->ffg, (size_t)ff * sizeof *h);
  if (ts__qt_kquant(Dw->type)) {
    ts__act_quantize_k_ref(ff, h, q, kd, kbs);
    for (int64_t i = 0; i < ff; i++) hr[i] = (double)q[i] * kd[i / 256], step[i] = 0.501 * fabs(kd[i / 256]);
  } else {
    ts__quant()->act_quantize(ff, h, q, dq, sm, sx);
    for (int64_t i = 0; i < ff; i++) hr[i] = (double)q[i] * dq[i / 32], step[i] = 0.501 * dq[i / 32];
  }
  double worst = 0, dmax = 0;
  for (int64_t r = 0; r < d; r++) {
    ts__dequant_ref(Dw->type, Dw->data + (size_t)r * Dw->row_bytes, w, ff);
    double b = 0, ms = 0, md = 0;
    for (int64_t i = 0; i < ff; i++) {
      int p = 0;
      while (r >= D->cut[p + 1]) p++;
      const ts__blk_q8_0 *blk = (const ts__blk_q8_0 *)(D->at[p] + (size_t)i * D->seg[p] + (size_t)((r - D->cut[p]) / 32) * D->bsz);
      b += RQ8 * ts_f16_to_f32(blk->d) * fabs(h[i]) + fabs(w[i]) * step[i];
      ms += fabs(tm_at(D, r, i) * h[i]), md += fabs(w[i] * hr[i]);
    }
    b += (ff + 8) * U * ms + (ff / 32 + 9) * U * md + 1e-30;
    const double e = fabs((double)s1->tmp[r] - s0->tmp[r]);
    dmax = fmax(dmax, e);
    if (!(e / b <= worst)) worst = e != e ? INFINITY : e / b;
  }
  CHECK(worst <= 1, "%s: sparse MLP output with every neuron active vs dense: %.3g of the re-quantization bound (max diff %.3g)", what,
        worst, dmax);
  free(h), free(w), free(q), free(hr), free(step);
}

/* ---- the checks --------------------------------------------------------------------------------- */

/* Every projection's copy (TEAL thresholds on all seven) against the file's weights: Q8_0, cut at
 * the team's rows, each value within RQ8 of its block's step of the weight it re-quantized. */
static void check_copies(ts_llm_model *m) {
  const ts_llm_config *c = ts_llm_model_config(m);
  ts_llm_thresholds *th = NULL;
  CHECK_OK(ts_llm_thresholds_create(&th, m));
  for (int l = 0; th && l < c->n_layer; l++)
    for (int p = 0; p < TS_LLM_NPROJ; p++) ts_llm_thresholds_layer(th, l)->in[p] = 1;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 3));
  ts_llm_sparse *sp = NULL;
  CHECK_OK(ts_llm_sparse_create(&sp, m, th, NULL, ctx));
  uint64_t want = 0;
  for (int l = 0; sp && l < c->n_layer; l++)
    for (int p = 0; p < TS_LLM_NPROJ; p++) {
      const ts__wmat *W = ts__proj_mat(m, l, p);
      const ts__tmat *t = &sp->tm[(size_t)l * TS_LLM_NPROJ + p];
      want += (uint64_t)(W->rows / 32) * (uint64_t)W->cols * sizeof(ts__blk_q8_0);
      CHECK(t->type == TS_QT_Q8_0 && t->npiece == 3 && t->n_in == W->cols && t->n_out == W->rows, "%s: copy %s, %d pieces",
            W->name, ts_qtype_name(t->type), t->npiece);
      if (t->type != TS_QT_Q8_0 || t->n_in != W->cols) continue;
      float *w = malloc((size_t)W->cols * sizeof *w);
      double worst = 0;
      for (int64_t r = 0; r < W->rows; r++) {
        ts__dequant_ref(W->type, W->data + (size_t)r * W->row_bytes, w, W->cols);
        int q = 0;
        while (r >= t->cut[q + 1]) q++;
        for (int64_t j = 0; j < W->cols; j++) {
          const ts__blk_q8_0 *b = (const ts__blk_q8_0 *)(t->at[q] + (size_t)j * t->seg[q] + (size_t)((r - t->cut[q]) / 32) * t->bsz);
          const double e = fabs(tm_at(t, r, j) - w[j]) / (RQ8 * ts_f16_to_f32(b->d) + 1e-30);
          if (!(e <= worst)) worst = e != e ? INFINITY : e;
        }
      }
      CHECK(worst <= 1, "%s (%s): the copy is %.3g of the re-quantization bound from the file", W->name, ts_qtype_name(W->type), worst);
      free(w);
    }
  CHECK(ts_llm_sparse_bytes(sp) == want, "copies: %llu bytes, expected %llu", (unsigned long long)ts_llm_sparse_bytes(sp),
        (unsigned long long)want);
  ts_llm_sparse_destroy(sp);
  ts_llm_thresholds_destroy(th);
  ts_context_destroy(ctx);
}

static void check_decode(ts_llm_model *m, int mode) {
  const ts_llm_config *c = ts_llm_model_config(m);
  const int nv = c->n_vocab, last = c->n_layer - 1;
  const char *mn = mode == MODE_CATS ? "cats" : mode == MODE_TEAL ? "teal" : "routed";
  ts_llm_thresholds *th = NULL;
  ts_llm_router *rt = NULL;
  CHECK_OK(ts_llm_thresholds_create(&th, m));
  for (int l = 0; th && l < c->n_layer; l++) { /* placeholders: which copies to make (values set by the reference) */
    ts_llm_layer_thresholds *lt = ts_llm_thresholds_layer(th, l);
    if (mode == MODE_TEAL)
      for (int p = 0; p < TS_LLM_NPROJ; p++) lt->in[p] = 1;
    else lt->act = mode == MODE_ROUTED ? 1e30f : 1;
  }
  if (mode == MODE_ROUTED) { /* predicts an error of 1 > tau for every token: every MLP dense, through the copies */
    CHECK_OK(ts_llm_router_create(&rt, m));
    for (int l = 0; rt && l < c->n_layer; l++) ts_llm_router_weights(rt, l)[0] = 1;
    ts_llm_router_set_tau(rt, 0.5);
  }
  for (int threads = 1; threads <= 3; threads += 2) {
    ts_context *ctx;
    CHECK_OK(ts_context_create(&ctx, threads));
    ts_llm_sparse *sp = NULL;
    CHECK_OK(ts_llm_sparse_create(&sp, m, th, rt, ctx));
    ts_llm_state *s = NULL;
    if (sp) CHECK_OK(ts_llm_state_create(&s, m, ctx, 32, 4));
    if (s) CHECK_OK(ts_llm_state_set_sparse(s, sp));
    double *ref = malloc((size_t)NSEQ * nv * sizeof *ref), frac = 0, scale = 0;
    float *lg = tst_alloc_guarded((size_t)NSEQ * nv);
    if (s) {
      tiny_qact = true;
      g3_reference(m, sp, mode, 0.5, ref, &frac);
      for (size_t i = 0; i < (size_t)NSEQ * nv; i++) scale = fmax(scale, fabs(ref[i]));
      tst_poison(lg, (size_t)NSEQ * nv);
      for (int t = 0; t < NSEQ; t++) CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, lg + (size_t)t * nv));
      double worst = 0;
      for (size_t i = 0; i < (size_t)NSEQ * nv; i++) {
        const double e = fabs(lg[i] - ref[i]) / (5e-2 * scale);
        if (!(e <= worst)) worst = e != e ? INFINITY : e;
      }
      char what[96];
      snprintf(what, sizeof what, "gemma3 %s threads=%d level %s", mn, threads, ts_isa_name(ts_isa_active()));
      CHECK(worst <= 1 && tst_guard_ok(lg, (size_t)NSEQ * nv), "%s: sparse decode vs masked reference error %.3g of 5e-2 x %.3g", what,
            worst, scale);
      mlp_check(s, last, mode == MODE_ROUTED, what);
      ts_llm_sparse_stats st;
      ts_llm_state_sparse_stats(s, &st);
      CHECK(st.tokens == NSEQ, "%s: %lld tokens counted", what, (long long)st.tokens);
      /* a neuron within fp32 rounding of the threshold may fall on the other side: 2 of 2 x 16 x 256 */
      if (mode == MODE_CATS)
        CHECK(fabs(st.act_sparsity - frac) <= 2.5 / (2.0 * NSEQ * c->n_ff) && frac > 0.3 && frac < 0.7, "%s: act sparsity %.4f, the reference's %.4f",
              what, st.act_sparsity, frac);
      if (mode == MODE_TEAL) CHECK(st.in_sparsity > 0.3 && st.in_sparsity < 0.7, "%s: input sparsity %.3f", what, st.in_sparsity);
      if (mode == MODE_ROUTED) CHECK(st.routed_dense == 1 && st.act_sparsity == 0, "%s: routed %.3f", what, st.routed_dense);
      /* back to dense: the same logits as a fresh dense state */
      CHECK_OK(ts_llm_state_set_sparse(s, NULL));
      ts_llm_state *s2 = NULL;
      CHECK_OK(ts_llm_state_create(&s2, m, ctx, 32, 4));
      float *a1 = malloc((size_t)nv * sizeof *a1), *a2 = malloc((size_t)nv * sizeof *a2);
      for (int t = 0; t < 3 && s2; t++) {
        CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, a1));
        CHECK_OK(ts_llm_eval(s2, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, a2));
      }
      CHECK(s2 && !memcmp(a1, a2, (size_t)nv * sizeof *a1), "%s: a state set back to dense differs from a dense state", what);
      free(a1), free(a2);
      ts_llm_state_destroy(s2);
    }
    ts_free(lg), free(ref);
    ts_llm_state_destroy(s);
    ts_llm_sparse_destroy(sp);
    ts_context_destroy(ctx);
  }
  ts_llm_router_destroy(rt);
  ts_llm_thresholds_destroy(th);
}

static int cmpf(const void *a, const void *b) {
  const float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
  return (x > y) - (x < y);
}

/* Layer `last` alone thresholded just above 0 against the dense model over the tokens (all_active,
 * mlp_check), then at the median |a| of the last token's activations there (mlp_check: half the
 * neurons masked). */
static void check_zero(ts_llm_model *m, const int32_t *tok, int n, int threads, const char *what) {
  const ts_llm_config *c = ts_llm_model_config(m);
  const int last = c->n_layer - 1;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, threads));
  ts_llm_thresholds *th = NULL;
  CHECK_OK(ts_llm_thresholds_create(&th, m));
  ts_llm_thresholds_layer(th, last)->act = 1e-30f;
  ts_llm_sparse *sp = NULL;
  CHECK_OK(ts_llm_sparse_create(&sp, m, th, NULL, ctx));
  ts_llm_state *s0 = NULL, *s1 = NULL;
  CHECK_OK(ts_llm_state_create(&s0, m, ctx, n + 1, 1));
  CHECK_OK(ts_llm_state_create(&s1, m, ctx, n + 1, 1));
  if (s1 && sp) CHECK_OK(ts_llm_state_set_sparse(s1, sp));
  for (int t = 0; t < n && s0 && s1 && sp; t++) {
    CHECK_OK(ts_llm_eval(s0, &tok[t], 1, t, TS_LLM_LOGITS_NONE, NULL));
    CHECK_OK(ts_llm_eval(s1, &tok[t], 1, t, TS_LLM_LOGITS_NONE, NULL));
  }
  ts_llm_sparse *sp2 = NULL;
  ts_llm_state *s2 = NULL;
  if (s0 && s1 && sp) {
    all_active(s0, s1, last, what);
    mlp_check(s1, last, false, what);
    float *a = malloc((size_t)c->n_ff * sizeof *a);
    memcpy(a, s1->ffg, (size_t)c->n_ff * sizeof *a);
    qsort(a, (size_t)c->n_ff, sizeof *a, cmpf);
    ts_llm_thresholds_layer(th, last)->act = fabsf(a[c->n_ff / 2]);
    free(a);
    CHECK_OK(ts_llm_sparse_create(&sp2, m, th, NULL, ctx));
    CHECK_OK(ts_llm_state_create(&s2, m, ctx, n + 1, 1));
    if (s2 && sp2) CHECK_OK(ts_llm_state_set_sparse(s2, sp2));
    for (int t = 0; t < n && s2 && sp2; t++) CHECK_OK(ts_llm_eval(s2, &tok[t], 1, t, TS_LLM_LOGITS_NONE, NULL));
    if (s2 && sp2) mlp_check(s2, last, false, what);
  }
  ts_llm_state_destroy(s2);
  ts_llm_sparse_destroy(sp2);
  ts_llm_state_destroy(s0);
  ts_llm_state_destroy(s1);
  ts_llm_sparse_destroy(sp);
  ts_llm_thresholds_destroy(th);
  ts_context_destroy(ctx);
}

static void decode_checks(void) {
  ts_llm_model *m = tiny_g3("spg_decode.gguf");
  if (!m) return;
  check_decode(m, MODE_CATS);
  check_decode(m, MODE_TEAL);
  check_decode(m, MODE_ROUTED);
  for (int threads = 1; threads <= 3; threads += 2) {
    char what[64];
    snprintf(what, sizeof what, "gemma3 zero threads=%d level %s", threads, ts_isa_name(ts_isa_active()));
    check_zero(m, kSeq, NSEQ, threads, what);
  }
  ts_llm_model_destroy(m);
}

/* ---- the real model ----------------------------------------------------------------------------- */

static const char *real_model(void) {
  const char *e = getenv("TESSERA_GEMMA3");
  if (e && *e) return access(e, R_OK) == 0 ? e : NULL;
  static char p[2048];
  const char *f = __FILE__, *end = strstr(f, "/tests/test_llm_sparse_gemma.c");
  snprintf(p, sizeof p, "%.*s/bench/peers/.venv-llm/gemma3.gguf", end ? (int)(end - f) : 1, end ? f : ".");
  return access(p, R_OK) == 0 ? p : NULL;
}

/* The zero and mlp checks on the real Gemma 3 270M's last layer (Q5_0 gate / up of 640, its down
 * of 2048), 8 tokens of a prompt, 2 threads. */
static void real_checks(void) {
  const char *path = real_model();
  if (!path) {
    tst_skip_part("gemma3 sparse: the real Gemma 3 270M GGUF not found (TESSERA_GEMMA3 or bench/peers/.venv-llm/gemma3.gguf)");
    return;
  }
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (!m) return;
  int32_t tok[32];
  size_t n = 0;
  const char *text = "The capital of France is Paris, and the capital of";
  CHECK_OK(ts_llm_tokenize(ts_llm_model_vocab(m), text, strlen(text), true, false, tok, 32, &n));
  if (n > 8) n = 8;
  check_zero(m, tok, (int)n, 2, "gemma3 270M zero");
  ts_llm_model_destroy(m);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--decode")) { /* a child at a capped kernel level */
    decode_checks();
    return tst_finish();
  }
  ts_llm_model *m = tiny_g3("spg_copies.gguf");
  if (m) check_copies(m);
  ts_llm_model_destroy(m);
  decode_checks();
  /* the lower kernel levels, each in a child (the cap is read once per process) */
  const struct {
    ts_isa isa;
    const char *env;
  } lv[] = {{TS_ISA_SCALAR, "TESSERA_ISA=scalar"}, {TS_ISA_AVX2, "TESSERA_ISA=avx2"}};
  for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++) {
    if (lv[i].isa >= ts_isa_active()) continue; /* this process ran it (or the CPU lacks it) */
    char *args[] = {(char *)"--decode", NULL};
    const int rc = tst_run_capped(lv[i].env, args);
    CHECK(rc == 0, "%s: the decode checks failed in the child (exit %d; its messages above)", lv[i].env, rc);
  }
  real_checks();
  return tst_finish();
}
