/* Calibration of activation sparsity on gemma3 (tessera/llm_sparse.h, src/llm/llm_calib.c), on the
 * tiny Gemma 3 of test_llm_sparse_ref.h (the real 270M file's weight types):
 *   - every method (CATS, SATS, TEAL) calibrates to its target, and the thresholds decode at about
 *     that sparsity on the calibration text (as test_llm_sparse.c checks for llama);
 *   - SATS's gemma3 proxy is its definition (llm_calib.c's header): recomputed here from the dense
 *     model's own floats taken at the MLP of every layer of the proxy windows (the stream after the
 *     attention half x2, gate and up), E_l(k) = mean over tokens of |P(D (h . [|a| > t_k])) -
 *     P(D h)|^2 / |x2|^2 with a = gelu(gate) (the runtime's table), h = a up, D the file's down
 *     in double and P the layer's post-FFN RMSNorm, at several levels k of the calibration's own
 *     grid t_k (10% of the neurons dropped and up); the calibration sums D's columns in fp32 (256
 *     terms: each output within 256 2^-24 ~ 1.5e-5 of its magnitude, and the dropped part's norm
 *     is >= ~5% of |D h| at these levels), so e_k agrees to ~1e-4 relative at worst: the tolerance
 *     is 1e-3 (measured 2026-12-07: 8e-6 at most);
 *   - and a router trains on it (finite weights). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_calib_internal.h"
#include "test_llm_sparse_ref.h"

#define N 384  /* calibration tokens */
#define WIN 64 /* window */
#define PROXY 128

/* the dense model's floats at every layer's MLP (TS__CAP_GATE_UP) of the first PROXY tokens */
typedef struct grab {
  int d, ff, n_layer, pos;
  float *x2, *g, *u; /* [n_layer][PROXY][d], [n_layer][PROXY][ff] x2 */
} grab;

static void grab_cap(void *arg, ts_llm_state *s, int l, int point, int T) {
  grab *G = arg;
  if (point != TS__CAP_GATE_UP || G->pos + T > PROXY) return;
  const size_t at = (size_t)l * PROXY + (size_t)G->pos;
  memcpy(G->x2 + at * G->d, s->x2, (size_t)T * G->d * sizeof(float));
  memcpy(G->g + at * G->ff, s->ffg, (size_t)T * G->ff * sizeof(float));
  memcpy(G->u + at * G->ff, s->ffu, (size_t)T * G->ff * sizeof(float));
}

static void post(const double *y, const float *w, int n, double eps, double *out) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += y[i] * y[i];
  const double k = 1 / sqrt(ss / n + eps);
  for (int i = 0; i < n; i++) out[i] = y[i] * k * w[i];
}

/* SATS's E_l(k) recomputed from the grabbed floats against the calibration's */
static void check_proxy(ts_llm_model *m, const ts_llm_calib *cal, const grab *G) {
  const ts_llm_config *c = ts_llm_model_config(m);
  const int d = c->d_model, ff = c->n_ff;
  double *D = malloc((size_t)d * ff * sizeof *D), *y = malloc((size_t)d * sizeof *y), *yk = malloc((size_t)d * sizeof *yk);
  double *py = malloc((size_t)d * sizeof *py), *pk = malloc((size_t)d * sizeof *pk);
  float *row = malloc((size_t)ff * sizeof *row), *a = malloc((size_t)ff * sizeof *a);
  for (int l = 0; l < c->n_layer; l++) {
    const ts__llm_layer *L = &m->layers[l];
    for (int r = 0; r < d; r++) {
      ts__dequant_ref(L->down.type, L->down.data + (size_t)r * L->down.row_bytes, row, ff);
      for (int i = 0; i < ff; i++) D[(size_t)r * ff + i] = row[i];
    }
    for (int k = 4; k < TS__LV; k += 8) {
      const float t = cal->grid[((size_t)l * NST + ST_ACT) * TS__LV + k];
      double E = 0;
      for (int tok = 0; tok < PROXY; tok++) {
        const size_t at = (size_t)l * PROXY + (size_t)tok;
        memcpy(a, G->g + at * ff, (size_t)ff * sizeof *a);
        ts__gelu_ref(ff, a);
        const float *u = G->u + at * ff, *x2 = G->x2 + at * d;
        for (int r = 0; r < d; r++) {
          double s = 0, sk = 0;
          for (int i = 0; i < ff; i++) {
            const double v = D[(size_t)r * ff + i] * (double)(a[i] * u[i]);
            s += v;
            if (fabsf(a[i]) > t) sk += v;
          }
          y[r] = s, yk[r] = sk;
        }
        post(y, L->post_ffn_norm, d, c->rms_eps, py);
        post(yk, L->post_ffn_norm, d, c->rms_eps, pk);
        double e = 0, xx = 0;
        for (int r = 0; r < d; r++) e += (pk[r] - py[r]) * (pk[r] - py[r]), xx += (double)x2[r] * x2[r];
        E += e / xx;
      }
      E /= PROXY;
      const double got = cal->sats_err[(size_t)l * TS__LV + k] / cal->sats_base[l];
      CHECK(fabs(got - E) <= 1e-3 * E && E > 0, "gemma3 SATS proxy layer %d level %d (t %.4g): calibration %.6g, recomputed %.6g", l, k,
            (double)t, got, E);
    }
  }
  free(D), free(y), free(yk), free(py), free(pk), free(row), free(a);
}

int main(void) {
  ts_llm_model *m = tiny_g3("spg_calib.gguf");
  if (!m) return tst_finish();
  int32_t tok[N];
  ts_rng r;
  ts_rng_seed(&r, 3);
  const ts_llm_config *c = ts_llm_model_config(m);
  for (int i = 0; i < N; i++) tok[i] = (int32_t)ts_rng_below(&r, (uint64_t)c->n_vocab);
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, ctx, WIN, WIN));
  if (!s) return tst_finish();
  /* the dense floats at every layer's MLP over the proxy windows (from an empty cache each, as calibration runs them) */
  grab G = {c->d_model, c->n_ff, c->n_layer, 0, NULL, NULL, NULL};
  G.x2 = malloc((size_t)c->n_layer * PROXY * G.d * sizeof(float));
  G.g = malloc((size_t)c->n_layer * PROXY * G.ff * sizeof(float));
  G.u = malloc((size_t)c->n_layer * PROXY * G.ff * sizeof(float));
  s->cap = grab_cap;
  s->cap_ctx = &G;
  for (G.pos = 0; G.pos < PROXY; G.pos += WIN) CHECK_OK(ts_llm_eval(s, tok + G.pos, WIN, 0, TS_LLM_LOGITS_NONE, NULL));
  s->cap = NULL;
  s->cap_ctx = NULL;
  ts_llm_calib_opts o = ts_llm_calib_opts_default();
  o.window = WIN;
  o.proxy_tokens = PROXY;
  o.method = TS_LLM_SPARSE_TEAL; /* with TEAL's curves: every method can be made from it */
  ts_llm_calib *cal = NULL;
  CHECK_ERR_CONTAINS(ts_llm_calib_collect(&cal, s, tok, (size_t)WIN - 1, &o), "shorter than one window");
  CHECK_OK(ts_llm_calib_collect(&cal, s, tok, (size_t)N, &o));
  if (cal) check_proxy(m, cal, &G);
  const ts_llm_sparse_method meth[3] = {TS_LLM_SPARSE_CATS, TS_LLM_SPARSE_SATS, TS_LLM_SPARSE_TEAL};
  for (int mi = 0; mi < 3 && cal; mi++) {
    o.method = meth[mi];
    o.target = 0.5;
    const char *mn = ts_llm_sparse_method_name(meth[mi]);
    ts_llm_thresholds *t = NULL;
    CHECK_OK(ts_llm_calibrate(cal, &o, &t));
    if (!t) continue;
    const ts_llm_thresholds_info *ti = ts_llm_thresholds_info_const(t);
    CHECK(fabs(ti->calibrated - 0.5) < 0.03 && ti->tokens == N / WIN * WIN, "gemma3 %s: calibrated %.3f on %lld tokens", mn,
          ti->calibrated, (long long)ti->tokens);
    for (int l = 0; l < c->n_layer; l++) {
      const double pr = ts_llm_thresholds_layer_proxy(t)[l], sl = ts_llm_thresholds_layer_sparsity(t)[l] * 40;
      CHECK(isfinite(pr) && pr >= 0, "gemma3 %s layer %d: proxy %g", mn, l, pr);
      if (meth[mi] == TS_LLM_SPARSE_SATS) CHECK(fabs(sl - round(sl)) < 1e-9, "gemma3 sats layer %d: sparsity %.4f off the grid", l, sl / 40);
    }
    ts_llm_router *rt = NULL;
    if (meth[mi] != TS_LLM_SPARSE_TEAL) {
      CHECK_OK(ts_llm_router_train(cal, t, &rt));
      for (int l = 0; rt && l < c->n_layer; l++)
        for (int k = 0; k < TS_LLM_ROUTER_NF; k++) CHECK(isfinite(ts_llm_router_weights(rt, l)[k]), "gemma3 router weight not finite");
    }
    ts_llm_sparse *sp = NULL;
    CHECK_OK(ts_llm_sparse_create(&sp, m, t, NULL, ctx));
    CHECK_OK(ts_llm_state_set_sparse(s, sp));
    ts_llm_state_timing_reset(s);
    for (int w = 0; w + WIN <= N && sp; w += WIN)
      for (int p = 0; p < WIN; p++) CHECK_OK(ts_llm_eval(s, &tok[w + p], 1, p, TS_LLM_LOGITS_NONE, NULL));
    ts_llm_sparse_stats st;
    ts_llm_state_sparse_stats(s, &st);
    const double got = meth[mi] == TS_LLM_SPARSE_TEAL ? st.in_sparsity : st.act_sparsity;
    CHECK(fabs(got - 0.5) < 0.03 + (meth[mi] == TS_LLM_SPARSE_TEAL ? 0.05 : 0), "gemma3 %s: measured sparsity %.3f on the calibration text",
          mn, got);
    CHECK_OK(ts_llm_state_set_sparse(s, NULL));
    ts_llm_sparse_destroy(sp);
    ts_llm_router_destroy(rt);
    ts_llm_thresholds_destroy(t);
  }
  free(G.x2), free(G.g), free(G.u);
  ts_llm_calib_destroy(cal);
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
  ts_llm_model_destroy(m);
  return tst_finish();
}
