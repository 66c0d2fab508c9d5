/* Activation sparsity (tessera/llm_sparse.h): the AXPY kernels of every level against a double
 * reference; single-token decode with CATS-style activation thresholds, TEAL-style input thresholds
 * and a router against a double-precision evaluation of the same masked computation on a tiny
 * model; the skipped fractions counted; the thresholds and router files (round trip, every bad
 * input named). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_sparse_internal.h"
#include "test_llm_sparse_ref.h"
#include "test_llm_tiny.h"
#include "tst_dispatch.h"

/* ---- kernels ---------------------------------------------------------------------------------- */

/* Each variant's AXPY over random rows of a random transposed matrix against the double sum. fp32
 * accumulation of n products per element (plus the Q4_1 bias, formed in fp32 from 4 terms): each
 * partial sum rounds once per step, so |err| <= (n + 8) 2^-24 sum_k |c_k w_kr| (the standard
 * bound for recursive summation, with slack for the bias and the c d product's rounding). */
static void check_axpy(uint32_t type) {
  const int n_in = 300, nblk = 7, n_out = 32 * nblk;
  const size_t bsz = type == TS_QT_Q4_1 ? 20 : 34, stride = bsz * nblk;
  uint8_t *W = malloc((size_t)n_in * stride);
  float *row = malloc((size_t)n_out * sizeof(float));
  ts_rng r;
  ts_rng_seed(&r, 5 + type);
  for (int j = 0; j < n_in; j++) {
    for (int i = 0; i < n_out; i++) row[i] = (float)(ts_rng_uniform(&r) * 2 - 1) * (1 + j % 5);
    ts__quantize_ref(type, row, W + (size_t)j * stride, n_out);
  }
  int32_t idx[300];
  float c[300];
  for (int ns = 0; ns <= 150; ns = ns ? ns * 3 + 1 : 1) { /* 0, 1, 4, 13, 40, 121 selected */
    int k = 0;
    for (int j = 0; j < n_in && k < ns; j++)
      if (ts_rng_uniform(&r) < 0.6) idx[k] = j, c[k++] = (float)(ts_rng_uniform(&r) * 4 - 2);
    double ref[224], mag[224];
    for (int i = 0; i < n_out; i++) ref[i] = 0.25 * i, mag[i] = fabs(0.25 * i);
    for (int q = 0; q < k; q++) {
      ts__dequant_ref(type, W + (size_t)idx[q] * stride, row, n_out);
      for (int i = 0; i < n_out; i++) ref[i] += (double)c[q] * row[i], mag[i] += fabs((double)c[q] * row[i]);
    }
    for (int v = 0; v < ts__sparse_dispatch.count; v++) {
      const ts__sparse_kern *kt = v == 0 ? ts__sparse_dispatch.variants[0].table : tst_variant(&ts__sparse_dispatch, v);
      if (!kt) continue;
      float *y = tst_alloc_guarded((size_t)n_out);
      for (int i = 0; i < n_out; i++) y[i] = 0.25f * (float)i;
      ts__sparse_axpy(kt, type)(W, stride, nblk, idx, c, k, y);
      double worst = 0;
      for (int i = 0; i < n_out; i++) {
        const double e = fabs(y[i] - ref[i]) / ((k + 8) * 0x1p-24 * mag[i] + 1e-30);
        if (!(e <= worst)) worst = e != e ? INFINITY : e;
      }
      CHECK(worst <= 1 && tst_guard_ok(y, (size_t)n_out), "%s axpy %s, %d rows: error %.3g of the bound",
            ts_qtype_name(type), ts__level_name(ts__sparse_dispatch.variants[v].level), k, worst);
      ts_free(y);
    }
  }
  free(W);
  free(row);
}

/* The indexed row dots (up rows of the active neurons) of every variant against the double dot of
 * the same quantized values: the integer block sums are exact, each row's fp32 sum of nb block
 * terms (plus Q4_1's m s terms) rounds nb + 2 times: |err| <= (2 nb + 4) 2^-24 sum |terms|. Q5_0
 * (Gemma 3's up) also equals the quant table's row dot, which the dense decode runs, bit for bit. */
static void check_gdot(uint32_t type) {
  const int rows = 100, cols = 576, nb = cols / 32;
  size_t rb;
  ts_qtype_row_bytes(type, cols, &rb);
  uint8_t *W = malloc((size_t)rows * rb);
  float row[576], x[576], wv[576];
  ts_rng r;
  ts_rng_seed(&r, 17 + type);
  for (int j = 0; j < rows; j++) {
    for (int i = 0; i < cols; i++) row[i] = (float)(ts_rng_uniform(&r) * 2 - 1) * (1 + j % 3);
    ts__quantize_ref(type, row, W + (size_t)j * rb, cols);
  }
  for (int i = 0; i < cols; i++) x[i] = (float)(ts_rng_uniform(&r) * 6 - 3);
  int8_t q[576];
  float d[18], sx[18];
  int32_t sum[18];
  ts__act_quantize_ref(cols, x, q, d, sum, sx);
  const ts_quant_act xq = {.n = cols, .q = q, .d = d, .sum = sum, .s = sx};
  int32_t idx[100];
  int n = 0;
  for (int j = 0; j < rows; j++)
    if (ts_rng_uniform(&r) < 0.45) idx[n++] = j; /* not a multiple of 8: the tail runs too */
  double ref[100], mag[100];
  for (int k = 0; k < n; k++) {
    ts__dequant_ref(type, W + (size_t)idx[k] * rb, wv, cols);
    double s = 0, m = 0;
    for (int i = 0; i < cols; i++) {
      const double xv = (double)q[i] * d[i / 32];
      s += (double)wv[i] * xv, m += fabs((double)wv[i] * xv);
    }
    if (type == TS_QT_Q4_1) /* the m term uses s = fp16(d sum), not d sum */
      for (int b = 0; b < nb; b++) {
        const ts__blk_q4_1 *bl = (const ts__blk_q4_1 *)(W + (size_t)idx[k] * rb) + b;
        const double mm = ts_f16_to_f32(bl->m);
        s += mm * ((double)sx[b] - (double)d[b] * sum[b]);
        m += fabs(mm * sx[b]);
      }
    ref[k] = s, mag[k] = m;
  }
  for (int v = 0; v < ts__sparse_dispatch.count; v++) {
    const ts__sparse_kern *kt = v == 0 ? ts__sparse_dispatch.variants[0].table : tst_variant(&ts__sparse_dispatch, v);
    if (!kt) continue;
    float out[100];
    ts__sparse_gdot(kt, type)(W, rb, idx, n, &xq, out);
    double worst = 0;
    for (int k = 0; k < n; k++) {
      const double e = fabs(out[k] - ref[k]) / ((2 * nb + 4) * 0x1p-24 * mag[k] + 1e-30);
      if (!(e <= worst)) worst = e != e ? INFINITY : e;
    }
    CHECK(worst <= 1, "%s gdot %s, %d rows: error %.3g of the bound", ts_qtype_name(type),
          ts__level_name(ts__sparse_dispatch.variants[v].level), n, worst);
    if (type == TS_QT_Q5_0) /* the dense decode's up values: the quant table's Q5_0 row dot, bit for bit */
      for (int k = 0; k < n; k++) {
        const float want = ts__dot_q5_0_ref(cols, W + (size_t)idx[k] * rb, NULL, &xq);
        CHECK(!memcmp(&out[k], &want, sizeof want), "q5_0 gdot %s row %d: %.9g, the row dot %.9g",
              ts__level_name(ts__sparse_dispatch.variants[v].level), idx[k], (double)out[k], (double)want);
      }
  }
  free(W);
}

/* ---- decode against the masked reference --------------------------------------------------------- */

static const int32_t kSeq[] = {5, 77, 200, 3, 150, 260, 261, 9, 44, 100, 101, 102, 255, 7, 8, 30};
#define NSEQ (int)(sizeof kSeq / sizeof kSeq[0])

enum { MODE_CATS, MODE_TEAL, MODE_ROUTED };

/* The double-precision forward of kSeq's tokens one at a time (as decode runs them) with the sparse
 * paths of sp: thresholds are chosen here per layer (written into sp->th) at quantile q of the
 * reference's own values, in gaps. *act_frac: the fraction of MLP neurons the masks dropped. */
static void sparse_reference(const ts_llm_model *m, ts_llm_sparse *sp, int mode, double q, double *logits,
                             double *act_frac) {
  const ts_gguf *g = ts_llm_model_gguf(m);
  const ts_llm_config *c = ts_llm_model_config(m);
  const int d = c->d_model, hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, ff = c->n_ff, nv = c->n_vocab, n = NSEQ;
  int64_t rr, cc;
  double *E = tiny_deq(g, "token_embd.weight", &rr, &cc);
  double *O = c->tied_output ? E : tiny_deq(g, "output.weight", &rr, &cc);
  double *on = tiny_deq(g, "output_norm.weight", &rr, &cc);
  double *x = malloc((size_t)n * d * sizeof *x), *hn = malloc((size_t)n * d * sizeof *hn);
  double *q_ = malloc((size_t)n * nh * hd * sizeof *q_), *k = malloc((size_t)n * nkv * hd * sizeof *k);
  double *v = malloc((size_t)n * nkv * hd * sizeof *v), *att = malloc((size_t)n * nh * hd * sizeof *att);
  double *a = malloc((size_t)n * ff * sizeof *a), *u = malloc((size_t)n * ff * sizeof *u), *o1 = malloc((size_t)d * sizeof *o1);
  double *sc = malloc((size_t)n * sizeof *sc), *h = malloc((size_t)n * ff * sizeof *h);
  int64_t dropped = 0, total = 0;
  for (int t = 0; t < n; t++)
    for (int i = 0; i < d; i++) x[t * d + i] = E[(size_t)kSeq[t] * d + i];
  for (int l = 0; l < c->n_layer; l++) {
    char nm[64];
#define W(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), tiny_deq(g, nm, &rr, &cc))
    double *an = W("attn_norm.weight"), *fn = W("ffn_norm.weight"), *wq = W("attn_q.weight"), *wk = W("attn_k.weight");
    double *wv = W("attn_v.weight"), *wo = W("attn_output.weight"), *wg = W("ffn_gate.weight"), *wu = W("ffn_up.weight");
#undef W
    ts_llm_layer_thresholds *th = &sp->th[l];
    const ts__tmat *tm = &sp->tm[(size_t)l * TS_LLM_NPROJ];
    for (int t = 0; t < n; t++) tiny_rms(x + t * d, an, d, c->rms_eps, hn + t * d);
    if (mode == MODE_TEAL) th->in[0] = th->in[1] = th->in[2] = gap_threshold(hn, n * d, q);
    for (int t = 0; t < n; t++) {
      if (mode == MODE_TEAL) {
        sp_mv(&tm[TS_LLM_PROJ_Q], hn + t * d, th->in[0], q_ + t * nh * hd);
        sp_mv(&tm[TS_LLM_PROJ_K], hn + t * d, th->in[1], k + t * nkv * hd);
        sp_mv(&tm[TS_LLM_PROJ_V], hn + t * d, th->in[2], v + t * nkv * hd);
      } else {
        tiny_mv(wq, nh * hd, d, hn + t * d, q_ + t * nh * hd);
        tiny_mv(wk, nkv * hd, d, hn + t * d, k + t * nkv * hd);
        tiny_mv(wv, nkv * hd, d, hn + t * d, v + t * nkv * hd);
      }
      for (int hh = 0; hh < nh + nkv; hh++) {
        double *p = hh < nh ? q_ + (t * nh + hh) * hd : k + (t * nkv + hh - nh) * hd;
        float thf = (float)t, tsc = powf(c->rope_base, -2.0f / (float)c->n_rot);
        for (int i = 0; i < c->n_rot / 2; i++, thf *= tsc) {
          double ang = thf, a0 = p[2 * i], b0 = p[2 * i + 1];
          p[2 * i] = a0 * cos(ang) - b0 * sin(ang);
          p[2 * i + 1] = a0 * sin(ang) + b0 * cos(ang);
        }
        for (int i = 0; i < hd; i++) p[i] = tiny_r16(p[i]);
      }
      for (int i = 0; i < nkv * hd; i++) v[t * nkv * hd + i] = tiny_r16(v[t * nkv * hd + i]);
      for (int hh = 0; hh < nh; hh++) { /* attention of token t over 0..t */
        int kh = hh / (nh / nkv);
        double mx = -INFINITY, z = 0;
        for (int j = 0; j <= t; j++) {
          double s = 0;
          for (int i = 0; i < hd; i++) s += q_[(t * nh + hh) * hd + i] * k[(j * nkv + kh) * hd + i];
          sc[j] = s / sqrt((double)hd);
          mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = 0; j <= t; j++) z += sc[j] = exp(sc[j] - mx);
        for (int i = 0; i < hd; i++) {
          double s = 0;
          for (int j = 0; j <= t; j++) s += tiny_r16(sc[j] / z) * v[(j * nkv + kh) * hd + i];
          att[t * nh * hd + hh * hd + i] = s;
        }
      }
    }
    if (mode == MODE_TEAL) th->in[TS_LLM_PROJ_O] = gap_threshold(att, n * nh * hd, q);
    for (int t = 0; t < n; t++) {
      if (mode == MODE_TEAL) sp_mv(&tm[TS_LLM_PROJ_O], att + t * nh * hd, th->in[TS_LLM_PROJ_O], o1);
      else tiny_mv(wo, d, nh * hd, att + t * nh * hd, o1);
      for (int i = 0; i < d; i++) x[t * d + i] += o1[i];
      tiny_rms(x + t * d, fn, d, c->rms_eps, hn + t * d);
    }
    if (mode == MODE_TEAL) th->in[TS_LLM_PROJ_GATE] = th->in[TS_LLM_PROJ_UP] = gap_threshold(hn, n * d, q);
    for (int t = 0; t < n; t++) {
      if (mode == MODE_TEAL) {
        sp_mv(&tm[TS_LLM_PROJ_GATE], hn + t * d, th->in[TS_LLM_PROJ_GATE], a + t * ff);
        sp_mv(&tm[TS_LLM_PROJ_UP], hn + t * d, th->in[TS_LLM_PROJ_UP], u + t * ff);
      } else {
        tiny_mv(wg, ff, d, hn + t * d, a + t * ff);
        tiny_mv(wu, ff, d, hn + t * d, u + t * ff);
      }
      for (int i = 0; i < ff; i++) a[t * ff + i] = a[t * ff + i] / (1 + exp(-a[t * ff + i]));
    }
    double tact = -1; /* the activation mask's threshold (-1: none) */
    if (mode == MODE_CATS) tact = th->act = gap_threshold(a, n * ff, q);
    for (int t = 0; t < n * ff; t++) {
      const bool on1 = tact < 0 || fabs(a[t]) > tact;
      h[t] = on1 ? a[t] * u[t] : 0;
      dropped += !on1, total++;
    }
    if (mode == MODE_TEAL) th->in[TS_LLM_PROJ_DOWN] = gap_threshold(h, n * ff, q);
    for (int t = 0; t < n; t++) {
      sp_mv(&tm[TS_LLM_PROJ_DOWN], h + t * ff, mode == MODE_TEAL ? th->in[TS_LLM_PROJ_DOWN] : 0, o1);
      for (int i = 0; i < d; i++) x[t * d + i] += o1[i];
    }
    free(an), free(fn), free(wq), free(wk), free(wv), free(wo), free(wg), free(wu);
  }
  for (int t = 0; t < n; t++) {
    tiny_rms(x + t * d, on, d, c->rms_eps, hn);
    tiny_mv(O, nv, d, hn, logits + (size_t)t * nv);
  }
  *act_frac = total ? (double)dropped / (double)total : 0;
  if (!c->tied_output) free(O);
  free(E), free(on), free(x), free(hn), free(q_), free(k), free(v), free(att), free(a), free(u), free(o1), free(sc), free(h);
}

static void check_decode(uint32_t wtype, int mode, const char *file) {
  tiny_cfg cf = tiny_default(wtype);
  cf.d = 192, cf.ff = 256, cf.n_head = 3, cf.n_kv = 1, cf.hd = 64;
  char path[2048];
  tst_tmp_path(path, sizeof path, file);
  tiny_write(&cf, path);
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (!m) return;
  const ts_llm_config *c = ts_llm_model_config(m);
  const int nv = c->n_vocab;
  ts_llm_thresholds *th = NULL;
  ts_llm_router *rt = NULL;
  CHECK_OK(ts_llm_thresholds_create(&th, m));
  for (int l = 0; l < c->n_layer; l++) { /* placeholders: which copies to make (values set below) */
    ts_llm_layer_thresholds *lt = ts_llm_thresholds_layer(th, l);
    if (mode == MODE_TEAL)
      for (int p = 0; p < TS_LLM_NPROJ; p++) lt->in[p] = 1;
    else lt->act = mode == MODE_ROUTED ? 1e30f : 1;
  }
  if (mode == MODE_ROUTED) { /* a router that always predicts an error of 1 > tau: every MLP dense */
    CHECK_OK(ts_llm_router_create(&rt, m));
    for (int l = 0; l < c->n_layer; l++) ts_llm_router_weights(rt, l)[0] = 1;
    ts_llm_router_set_tau(rt, 0.5);
  }
  for (int threads = 1; threads <= 3; threads += 2) {
    ts_context *ctx;
    CHECK_OK(ts_context_create(&ctx, threads));
    ts_llm_sparse *sp = NULL;
    CHECK_OK(ts_llm_sparse_create(&sp, m, th, rt, ctx));
    if (!sp) {
      ts_context_destroy(ctx);
      continue;
    }
    double *ref = malloc((size_t)NSEQ * nv * sizeof *ref), frac;
    tiny_qact = true;
    sparse_reference(m, sp, mode, 0.5, ref, &frac);
    double scale = 0;
    for (size_t i = 0; i < (size_t)NSEQ * nv; i++) scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    ts_llm_state *s = NULL;
    CHECK_OK(ts_llm_state_create(&s, m, ctx, 32, 4));
    CHECK_OK(ts_llm_state_set_sparse(s, sp));
    float *lg = tst_alloc_guarded((size_t)NSEQ * nv);
    tst_poison(lg, (size_t)NSEQ * nv);
    for (int t = 0; t < NSEQ && s; t++) CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, lg + (size_t)t * nv));
    double worst = 0;
    for (size_t i = 0; i < (size_t)NSEQ * nv; i++) {
      const double e = fabs(lg[i] - ref[i]) / (5e-2 * scale);
      if (!(e <= worst)) worst = e != e ? INFINITY : e;
    }
    const char *mn = mode == MODE_CATS ? "cats" : mode == MODE_TEAL ? "teal" : "routed";
    CHECK(worst <= 1 && tst_guard_ok(lg, (size_t)NSEQ * nv), "%s %s threads=%d: sparse decode vs masked reference error %.3g of 5e-2 x %.3g",
          ts_qtype_name(wtype), mn, threads, worst, scale);
    ts_llm_sparse_stats st;
    ts_llm_state_sparse_stats(s, &st);
    CHECK(st.tokens == NSEQ, "%s: %lld tokens counted", mn, (long long)st.tokens);
    /* a neuron whose |silu(gate)| lies within fp32 rounding of the threshold may fall on the other
     * side in the runtime: up to 2 of the 2 x 16 x 256 decisions */
    if (mode == MODE_CATS)
      CHECK(fabs(st.act_sparsity - frac) <= 2.5 / (2.0 * NSEQ * c->n_ff) && frac > 0.3 && frac < 0.7 && st.weight_skip > 0.1,
            "cats: measured act sparsity %.4f vs the reference's masks %.4f, weights skipped %.3f", st.act_sparsity, frac, st.weight_skip);
    if (mode == MODE_TEAL) CHECK(st.in_sparsity > 0.3 && st.in_sparsity < 0.7, "teal: input sparsity %.3f", st.in_sparsity);
    if (mode == MODE_ROUTED)
      CHECK(st.routed_dense == 1 && st.act_sparsity == 0, "routed: %.3f routed dense, act sparsity %.3f", st.routed_dense, st.act_sparsity);
    CHECK(st.bytes_per_token < st.dense_bytes_per_token || mode == MODE_ROUTED, "%s: %.0f bytes per token, dense %.0f", mn,
          st.bytes_per_token, st.dense_bytes_per_token);
    /* back to dense: llama.cpp's path again (the same logits as a fresh dense state) */
    CHECK_OK(ts_llm_state_set_sparse(s, NULL));
    float *a1 = tst_alloc_guarded((size_t)nv), *a2 = tst_alloc_guarded((size_t)nv);
    ts_llm_state *s2 = NULL;
    CHECK_OK(ts_llm_state_create(&s2, m, ctx, 32, 4));
    for (int t = 0; t < 3 && s2; t++) {
      CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, a1));
      CHECK_OK(ts_llm_eval(s2, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, a2));
    }
    CHECK(!memcmp(a1, a2, (size_t)nv * sizeof *a1), "%s: a state set back to dense differs from a dense state", mn);
    ts_free(a1), ts_free(a2), ts_free(lg), free(ref);
    ts_llm_state_destroy(s2);
    ts_llm_state_destroy(s);
    ts_llm_sparse_destroy(sp);
    ts_context_destroy(ctx);
  }
  ts_llm_router_destroy(rt);
  ts_llm_thresholds_destroy(th);
  ts_llm_model_destroy(m);
}

/* ---- files ------------------------------------------------------------------------------------ */

static void check_files(void) {
  tiny_cfg cf = tiny_default(TS_QT_Q8_0), cf2 = cf;
  cf2.seed = 99;
  char p1[2048], p2[2048], tp[2048];
  tst_tmp_path(p1, sizeof p1, "sp_a.gguf");
  tst_tmp_path(p2, sizeof p2, "sp_b.gguf");
  tst_tmp_path(tp, sizeof tp, "sp_th.json");
  tiny_write(&cf, p1);
  tiny_write(&cf2, p2);
  ts_llm_model *m = NULL, *m2 = NULL;
  CHECK_OK(ts_llm_model_load(&m, p1));
  CHECK_OK(ts_llm_model_load(&m2, p2));
  if (!m || !m2) return;
  ts_llm_thresholds *t = NULL, *back = NULL;
  CHECK_OK(ts_llm_thresholds_create(&t, m));
  ts_llm_thresholds_info_of(t)->method = TS_LLM_SPARSE_SATS;
  ts_llm_thresholds_info_of(t)->target = 0.5;
  ts_llm_thresholds_layer(t, 1)->act = 0.125f;
  ts_llm_thresholds_layer(t, 0)->in[TS_LLM_PROJ_DOWN] = 0.5f;
  CHECK_OK(ts_llm_thresholds_save(t, tp));
  CHECK_OK(ts_llm_thresholds_load(&back, tp, m));
  CHECK(back && ts_llm_thresholds_layer_const(back, 1)->act == 0.125f &&
            ts_llm_thresholds_layer_const(back, 0)->in[TS_LLM_PROJ_DOWN] == 0.5f &&
            ts_llm_thresholds_info_const(back)->method == TS_LLM_SPARSE_SATS,
        "thresholds round trip");
  ts_llm_thresholds_destroy(back);
  CHECK_ERR_CONTAINS(ts_llm_thresholds_load(&back, tp, m2), "made for another model");
  char *js = NULL;
  CHECK_OK(ts_llm_thresholds_to_json(t, &js));
  const struct {
    const char *from, *to, *needle;
  } bad[] = {
      {"\"act\":0.125", "\"act\":\"nan\"", "layer 1"},
      {"\"layer\":1", "\"layer\":0", "appears twice"},
      {"\"kind\":\"llm-thresholds\"", "\"kind\":\"llm-router\"", "not a llm-thresholds file"},
      {"\"method\":\"sats\"", "\"method\":\"magic\"", "method"},
  };
  for (size_t i = 0; js && i < sizeof bad / sizeof bad[0]; i++) {
    char *s = strstr(js, bad[i].from) ? malloc(strlen(js) + 64) : NULL;
    CHECK(s != NULL, "case %zu: '%s' not in the JSON", i, bad[i].from);
    if (!s) continue;
    const char *at = strstr(js, bad[i].from);
    sprintf(s, "%.*s%s%s", (int)(at - js), js, bad[i].to, at + strlen(bad[i].from));
    CHECK_ERR_CONTAINS(ts_llm_thresholds_from_json(&back, s, m), bad[i].needle);
    CHECK(back == NULL, "case %zu: an object returned with the error", i);
    free(s);
  }
  /* a negative threshold, and a missing layer */
  ts_llm_thresholds_layer(t, 1)->act = -1;
  char *neg = NULL;
  CHECK_OK(ts_llm_thresholds_to_json(t, &neg));
  CHECK_ERR_CONTAINS(ts_llm_thresholds_from_json(&back, neg, m), "not a finite value >= 0");
  free(neg);
  free(js);
  CHECK_ERR_CONTAINS(ts_llm_thresholds_from_json(&back, "{\"kind\":\"llm-thresholds\",\"version\":1,\"method\":\"cats\",\"n_layer\":2,"
                                                         "\"model_key\":\"0123456789abcdef\",\"layers\":[{\"layer\":0,\"act\":0,\"q\":0,"
                                                         "\"k\":0,\"v\":0,\"o\":0,\"gate\":0,\"up\":0,\"down\":0}]}", NULL),
                     "layer 1 is missing");
  ts_llm_thresholds_layer(t, 1)->act = 0.1f;
  /* thresholds of another model are refused by sparse_create too */
  ts_llm_sparse *sp = NULL;
  CHECK_ERR_CONTAINS(ts_llm_sparse_create(&sp, m2, t, NULL, NULL), "not this one");
  /* router round trip and errors */
  ts_llm_router *r = NULL, *rb = NULL;
  CHECK_OK(ts_llm_router_create(&r, m));
  ts_llm_router_weights(r, 1)[2] = -0.75;
  ts_llm_router_set_tau(r, 0.125);
  CHECK_OK(ts_llm_router_save(r, tp));
  CHECK_OK(ts_llm_router_load(&rb, tp, m));
  CHECK(rb && ts_llm_router_weights(rb, 1)[2] == -0.75 && ts_llm_router_tau(rb) == 0.125, "router round trip");
  ts_llm_router_destroy(rb);
  CHECK_ERR_CONTAINS(ts_llm_router_load(&rb, tp, m2), "made for another model");
  CHECK_ERR_CONTAINS(ts_llm_thresholds_load(&back, tp, m), "not a llm-thresholds file");
  ts_llm_router_destroy(r);
  ts_llm_thresholds_destroy(t);
  ts_llm_model_destroy(m);
  ts_llm_model_destroy(m2);
}

/* ---- calibration ------------------------------------------------------------------------------ */

/* Calibrates the wide tiny model on a random token text and decodes the same text with the
 * thresholds: each method's measured sparsity lands near its target (the thresholds come from the
 * prefill's activations, decode's differ by rounding: +-0.03), SATS's layers sit on the 2.5% grid
 * with the mean on the target, TEAL's parameter-weighted input sparsity is near the target, and a
 * text shorter than a window is an error naming it. */
static void check_calibration(void) {
  tiny_cfg cf = tiny_default(TS_QT_Q8_0);
  cf.d = 192, cf.ff = 256, cf.n_head = 3, cf.n_kv = 1, cf.hd = 64;
  char path[2048];
  tst_tmp_path(path, sizeof path, "sp_calib.gguf");
  tiny_write(&cf, path);
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (!m) return;
  const int N = 384, W = 64;
  int32_t *tok = malloc((size_t)N * sizeof *tok);
  ts_rng r;
  ts_rng_seed(&r, 3);
  const int nv = ts_llm_model_config(m)->n_vocab;
  for (int i = 0; i < N; i++) tok[i] = (int32_t)ts_rng_below(&r, (uint64_t)nv);
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, ctx, W, W));
  ts_llm_calib_opts o = ts_llm_calib_opts_default();
  o.window = W;
  o.proxy_tokens = 128;
  o.method = TS_LLM_SPARSE_TEAL; /* with TEAL's curves: every method can be made from it */
  ts_llm_calib *cal = NULL;
  CHECK_ERR_CONTAINS(ts_llm_calib_collect(&cal, s, tok, (size_t)W - 1, &o), "shorter than one window");
  CHECK_OK(ts_llm_calib_collect(&cal, s, tok, (size_t)N, &o));
  const ts_llm_sparse_method meth[3] = {TS_LLM_SPARSE_CATS, TS_LLM_SPARSE_SATS, TS_LLM_SPARSE_TEAL};
  for (int mi = 0; mi < 3 && cal; mi++) {
    o.method = meth[mi];
    o.target = 0.5;
    ts_llm_thresholds *t = NULL;
    CHECK_OK(ts_llm_calibrate(cal, &o, &t));
    if (!t) continue;
    const ts_llm_thresholds_info *ti = ts_llm_thresholds_info_const(t);
    CHECK(fabs(ti->calibrated - 0.5) < 0.03 && ti->tokens == N / W * W, "%s: calibrated %.3f on %lld tokens",
          ts_llm_sparse_method_name(meth[mi]), ti->calibrated, (long long)ti->tokens);
    if (meth[mi] == TS_LLM_SPARSE_SATS)
      for (int l = 0; l < 2; l++) {
        const double sl = ts_llm_thresholds_layer_sparsity(t)[l] * 40;
        CHECK(fabs(sl - round(sl)) < 1e-9, "sats layer %d: sparsity %.4f off the grid", l, sl / 40);
      }
    ts_llm_router *rt = NULL;
    if (meth[mi] != TS_LLM_SPARSE_TEAL) {
      CHECK_OK(ts_llm_router_train(cal, t, &rt));
      for (int l = 0; rt && l < 2; l++)
        for (int k = 0; k < TS_LLM_ROUTER_NF; k++) CHECK(isfinite(ts_llm_router_weights(rt, l)[k]), "router weight not finite");
    }
    ts_llm_sparse *sp = NULL;
    CHECK_OK(ts_llm_sparse_create(&sp, m, t, NULL, ctx));
    CHECK_OK(ts_llm_state_set_sparse(s, sp));
    ts_llm_state_timing_reset(s);
    for (int w = 0; w + W <= N && sp; w += W)
      for (int p = 0; p < W; p++) CHECK_OK(ts_llm_eval(s, &tok[w + p], 1, p, TS_LLM_LOGITS_NONE, NULL));
    ts_llm_sparse_stats st;
    ts_llm_state_sparse_stats(s, &st);
    const double got = meth[mi] == TS_LLM_SPARSE_TEAL ? st.in_sparsity : st.act_sparsity;
    CHECK(fabs(got - 0.5) < 0.03 + (meth[mi] == TS_LLM_SPARSE_TEAL ? 0.05 : 0), "%s: measured sparsity %.3f on the calibration text",
          ts_llm_sparse_method_name(meth[mi]), got);
    CHECK_OK(ts_llm_state_set_sparse(s, NULL));
    ts_llm_sparse_destroy(sp);
    ts_llm_router_destroy(rt);
    ts_llm_thresholds_destroy(t);
  }
  o.method = TS_LLM_SPARSE_CATS;
  o.target = 1.5;
  ts_llm_thresholds *bad = NULL;
  CHECK_ERR_CONTAINS(ts_llm_calibrate(cal, &o, &bad), "outside");
  ts_llm_calib_destroy(cal);
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
  free(tok);
  ts_llm_model_destroy(m);
}

int main(void) {
  check_calibration();
  check_axpy(TS_QT_Q4_1);
  check_axpy(TS_QT_Q8_0);
  check_gdot(TS_QT_Q4_1);
  check_gdot(TS_QT_Q8_0);
  check_gdot(TS_QT_Q5_0);
  check_decode(TS_QT_Q4_1, MODE_CATS, "sp_cats_q41.gguf");
  check_decode(TS_QT_Q8_0, MODE_CATS, "sp_cats_q80.gguf");
  check_decode(TS_QT_Q4_1, MODE_TEAL, "sp_teal_q41.gguf");
  check_decode(TS_QT_Q4_1, MODE_ROUTED, "sp_routed_q41.gguf");
  check_files();
  return tst_finish();
}
