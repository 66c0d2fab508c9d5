/* Calibration of activation-sparsity thresholds (tessera/llm_sparse.h): the statistics of the dense
 * model on a text that CATS, TEAL, SATS and the router's probe are made from.
 *
 * Pass 1 evaluates every window of the text densely (prefill) and keeps, per layer, histograms of
 * five magnitudes: |act(gate)| (the activation mask; act = silu, gemma3: gelu), the inputs of
 * q|k|v, of o, of gate|up and of down (|h|, h = act(gate) up). A histogram bin is the top 18 bits of
 * the float's magnitude (its exponent and 10 mantissa bits: bins 0.1% wide, no logarithms), so a
 * quantile is read to 0.1%. The thresholds, the router and the SATS curves: llm_calib_fit.c.
 * Pass 2 evaluates the first proxy_tokens tokens again and measures, at the grid of thresholds
 * t_k (the quantiles k / 40 of each magnitude, k = 0..TS__LV - 1, sparsity 0..95%), per token:
 *   SATS: e_k = |D (h . [|a| <= t_k])|^2 (the MLP-output error of dropping the neurons under
 *         t_k) relative to |x|^2 (the residual stream the MLP's output is added to), averaged over
 *         the tokens: E_l(k) = mean_tokens e_k / |x|^2. gemma3 adds P(D h) to the stream, P the
 *         post-FFN RMSNorm (times its weight), so there e_k = |P(D (h . [|a| > t_k])) - P(D h)|^2,
 *         the error where it lands, and x is the stream after the attention half (x + P_attn(wo
 *         att)), which P(D h) is added to;
 *   TEAL: for each projection p, |W_p (x . [|x| <= t_k])|^2 and |W_p x|^2 with x its input;
 *   the router's features at every level (f1, f2, f3 of tessera/llm_sparse.h) and its target, the
 *   token's e_k / |x|^2.
 * Every sum adds the dropped columns bucket by bucket (x_j W[:, j] into one error vector), so a
 * token costs one pass over each matrix, whatever the number of levels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_calib_internal.h"


static inline uint32_t bin_of(float v) {
  uint32_t b;
  v = fabsf(v);
  memcpy(&b, &v, 4);
  return b >> 13;
}
static inline float bin_lo(uint32_t i) {
  const uint32_t b = i << 13;
  float v;
  memcpy(&v, &b, 4);
  return v;
}

static uint32_t *hist_of(ts_llm_calib *c, int l, int st) { return c->hist + ((size_t)l * NST + st) * NBIN; }

float ts__calib_quantile(const ts_llm_calib *c, int l, int st, double q) {
  const uint32_t *h = c->hist + ((size_t)l * NST + st) * NBIN;
  const double n = c->hn[(size_t)l * NST + st], want = q * n;
  if (want <= 0) return 0;
  double acc = 0;
  for (uint32_t i = 0; i < NBIN - 1; i++) {
    if (acc + h[i] >= want) { /* inside bin i: linear in value */
      const double f = h[i] ? (want - acc) / h[i] : 0;
      return (float)(bin_lo(i) + f * (bin_lo(i + 1) - bin_lo(i)));
    }
    acc += h[i];
  }
  return INFINITY;
}

/* ---- the observer ------------------------------------------------------------------------ */

static void count(ts_llm_calib *c, int l, int st, const float *v, int64_t n) {
  uint32_t *h = hist_of(c, l, st);
  for (int64_t i = 0; i < n; i++) h[bin_of(v[i])]++;
  c->hn[(size_t)l * NST + st] += (double)n;
}

/* wt <- W^T [cols][rows] in fp32 */
static void transpose_of(const ts__wmat *w, float *wt, float *row) {
  for (int64_t r = 0; r < w->rows; r++) {
    ts__dequant_ref(w->type, w->data + (size_t)r * w->row_bytes, row, w->cols);
    for (int64_t j = 0; j < w->cols; j++) wt[(size_t)j * (size_t)w->rows + (size_t)r] = row[j];
  }
}

static inline double sq(const float *v, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)v[i] * v[i];
  return s;
}

/* The error curve of y = W x for one input x[0..n_in) with levels by |key_j| against the grid g
 * (key = x for TEAL, |act(gate)| for SATS): err[k] += |W (x . [|key| <= g_k])|^2 for k >= 1, and
 * returns |W x|^2, W x left in ev (n_out). Optionally per-level values of |e|^2 into lv[k] and the
 * dropped part W (x . [|key| <= g_k]) itself into snap[k][n_out]. */
static double curve(const float *wt, int64_t n_in, int64_t n_out, const float *x, const float *key, const float *g,
                    double *err, double *lv, float *snap, float *ev, int32_t *order, uint8_t *lvl) {
  /* each input's level: the first k with |key| <= g_k (TS__LV: above every level) */
  int64_t cntk[TS__LV + 1] = {0};
  for (int64_t j = 0; j < n_in; j++) {
    const float a = fabsf(key[j]);
    int lo = 1, hi = TS__LV; /* g_0 = 0: level 0 drops nothing */
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (a <= g[mid]) hi = mid;
      else lo = mid + 1;
    }
    lvl[j] = (uint8_t)lo;
    cntk[lo]++;
  }
  int64_t start[TS__LV + 2] = {0};
  for (int k = 1; k <= TS__LV + 1; k++) start[k] = start[k - 1] + cntk[k - 1];
  int64_t fill[TS__LV + 1];
  memcpy(fill, start, sizeof fill);
  for (int64_t j = 0; j < n_in; j++) order[fill[lvl[j]]++] = (int32_t)j;
  memset(ev, 0, (size_t)n_out * sizeof *ev);
  int64_t at = 0;
#define ADD_UNTIL(end)                                                      \
  for (; at < (end); at++) {                                                \
    const int32_t j = order[at];                                            \
    const float xj = x[j];                                                  \
    const float *w = wt + (size_t)j * (size_t)n_out;                        \
    for (int64_t i = 0; i < n_out; i++) ev[i] += xj * w[i];                 \
  }
  for (int k = 1; k < TS__LV; k++) { /* the inputs first dropped at level k, then the error there */
    ADD_UNTIL(start[k + 1])
    const double e = sq(ev, n_out);
    err[k] += e;
    if (lv) lv[k] = e;
    if (snap) memcpy(snap + (size_t)k * (size_t)n_out, ev, (size_t)n_out * sizeof *ev);
  }
  ADD_UNTIL(n_in) /* the inputs never dropped */
#undef ADD_UNTIL
  return sq(ev, n_out); /* every input added: W x */
}

typedef struct cap_ctx {
  ts_llm_calib *c;
  int32_t *order;
  uint8_t *lvl;
  float *row;
} cap_ctx;

static void teal_proj(ts_llm_calib *c, cap_ctx *x, int l, int p, const float *in, int T, int st, int64_t ld) {
  const ts__wmat *w = ts__proj_mat(c->m, l, p);
  transpose_of(w, c->wt, x->row);
  const float *g = c->grid + ((size_t)l * NST + st) * TS__LV;
  double *err = c->teal_err + ((size_t)l * TS_LLM_NPROJ + p) * TS__LV;
  for (int t = 0; t < T; t++)
    c->teal_base[(size_t)l * TS_LLM_NPROJ + p] +=
        curve(c->wt, w->cols, w->rows, in + (size_t)t * ld, in + (size_t)t * ld, g, err, NULL, NULL, c->ev, x->order, x->lvl);
}

/* gemma3's post-norm P(y) = rms(y) w in double */
static void post_norm(const float *y, const float *w, int64_t n, double eps, double *out) {
  const double k = 1.0 / sqrt(sq(y, n) / (double)n + eps);
  for (int64_t i = 0; i < n; i++) out[i] = y[i] * k * w[i];
}

/* gemma3's SATS errors lv[k] = |P(y - snap_k) - P(y)|^2 for k >= 1, y = D h (in ev), P the
 * post-FFN norm (w) */
static void gemma_sats(ts_llm_calib *c, const float *w, double eps, double *lv) {
  const int64_t d = c->d;
  double *py = c->pscr, *pk = py + d;
  float *yk = (float *)(pk + d);
  post_norm(c->ev, w, d, eps, py);
  for (int k = 1; k < TS__LV; k++) {
    const float *e = c->snap + (size_t)k * (size_t)d;
    for (int64_t i = 0; i < d; i++) yk[i] = c->ev[i] - e[i];
    post_norm(yk, w, d, eps, pk);
    double s = 0;
    for (int64_t i = 0; i < d; i++) s += (pk[i] - py[i]) * (pk[i] - py[i]);
    lv[k] = s;
  }
}

/* The stream that layer l's step at `point` starts from, for T tokens: llama's x itself; gemma3's
 * after the post-norm and residual add of the step before (llm_layer.c's gemma_resid, the same
 * floats): before attention x2 + P_ffn(l-1)(tmp) (layer 0: x), before the MLP x + P_attn(l)(tmp). */
static const float *stream_at(ts_llm_calib *c, ts_llm_state *s, int l, int point, int T) {
  if (!c->gemma || (point == TS__CAP_X_ATTN && l == 0)) return s->x;
  const ts_llm_config *cf = &s->m->cfg;
  const int64_t d = cf->d_model;
  const float *base = point == TS__CAP_X_ATTN ? s->x2 : s->x;
  const float *w = point == TS__CAP_X_ATTN ? s->m->layers[l - 1].post_ffn_norm : s->m->layers[l].post_attn_norm;
  for (int t = 0; t < T; t++) {
    float *r = c->rbuf + (size_t)t * (size_t)d;
    s->ops->rmsnorm(d, s->tmp + (size_t)t * (size_t)d, w, cf->rms_eps, r);
    for (int64_t e = 0; e < d; e++) r[e] += base[(size_t)t * (size_t)d + (size_t)e];
  }
  return c->rbuf;
}

static void observe(void *arg, ts_llm_state *s, int l, int point, int T) {
  cap_ctx *x = arg;
  ts_llm_calib *c = x->c;
  const ts_llm_config *cf = &s->m->cfg;
  const ts__llm_layer *L = &s->m->layers[l];
  const int64_t d = cf->d_model, ff = cf->n_ff, nq = (int64_t)cf->n_head * cf->head_dim;
  int64_t Tp = T; /* pass 2: only the tokens inside the proxy budget */
  if (c->pass == 2 && c->pos + Tp > c->proxy) Tp = c->proxy - c->pos;
  if (c->pass == 2 && Tp <= 0) return;
  switch (point) {
    case TS__CAP_X_ATTN:
    case TS__CAP_X_FFN: {
      const float *nw = point == TS__CAP_X_ATTN ? L->attn_norm : L->ffn_norm;
      const float *xs = stream_at(c, s, l, point, T);
      for (int t = 0; t < T; t++) s->ops->rmsnorm(d, xs + (size_t)t * d, nw, cf->rms_eps, c->xn + (size_t)t * d);
      const int st = point == TS__CAP_X_ATTN ? ST_ATTN : ST_FFN;
      if (point == TS__CAP_X_FFN)
        for (int t = 0; t < T; t++) c->xsq[t] = sq(xs + (size_t)t * d, d);
      if (c->pass == 1) count(c, l, st, c->xn, (int64_t)T * d);
      else if (c->teal) {
        const int p0 = point == TS__CAP_X_ATTN ? TS_LLM_PROJ_Q : TS_LLM_PROJ_GATE, p1 = point == TS__CAP_X_ATTN ? TS_LLM_PROJ_V : TS_LLM_PROJ_UP;
        for (int p = p0; p <= p1; p++) teal_proj(c, x, l, p, c->xn, (int)Tp, st, d);
      }
      break;
    }
    case TS__CAP_ATT:
      if (c->pass == 1) count(c, l, ST_O, s->att, (int64_t)T * nq);
      else if (c->teal) teal_proj(c, x, l, TS_LLM_PROJ_O, s->att, (int)Tp, ST_O, nq);
      break;
    case TS__CAP_GATE_UP: {
      if (c->gemma) { /* the runtime's GELU (its fp16 table), then h = a u: GEGLU's floats */
        memcpy(c->abuf, s->ffg, (size_t)T * (size_t)ff * sizeof *c->abuf);
        ts__gelu_ref((int64_t)T * ff, c->abuf);
      }
      for (int64_t i = 0; i < (int64_t)T * ff; i++) {
        const float g = s->ffg[i];
        if (!c->gemma) c->abuf[i] = c->relu ? (g > 0.0f ? g : 0.0f) : g / (1.0f + expf(-g));
        c->hbuf[i] = c->abuf[i] * s->ffu[i];
      }
      if (c->pass == 1) {
        count(c, l, ST_ACT, c->abuf, (int64_t)T * ff);
        count(c, l, ST_DOWN, c->hbuf, (int64_t)T * ff);
        break;
      }
      transpose_of(&L->down, c->wt, x->row); /* D^T [ff][d] */
      const float *ga = c->grid + ((size_t)l * NST + ST_ACT) * TS__LV;
      const float *dn = NULL;
      float *dnb = c->ev2; /* |D[:, i]|^2 */
      for (int64_t i = 0; i < ff; i++) dnb[i] = (float)sq(c->wt + (size_t)i * d, d);
      dn = dnb;
      double lv[TS__LV];
      for (int64_t t = 0; t < Tp; t++) {
        const float *a = c->abuf + (size_t)t * ff, *h = c->hbuf + (size_t)t * ff;
        double scratch[TS__LV] = {0};
        curve(c->wt, ff, d, h, a, ga, scratch, lv, c->gemma ? c->snap : NULL, c->ev, x->order, x->lvl);
        if (c->gemma) gemma_sats(c, L->post_ffn_norm, cf->rms_eps, lv);
        const double base = c->xsq[t]; /* the proxy's scale: the residual stream the error is added to */
        for (int k = 1; k < TS__LV && base > 0; k++) c->sats_err[(size_t)l * TS__LV + k] += lv[k] / base;
        c->sats_base[l] += 1; /* E_l(k): the mean over tokens of e_k / |x|^2 */
        /* the router's features at every level */
        double wa = 0, ma = 0;
        for (int64_t i = 0; i < ff; i++) wa += (double)a[i] * a[i] * dn[i], ma += (double)a[i] * a[i];
        double wcum[TS__LV] = {0}, mcum[TS__LV] = {0}, ncum[TS__LV] = {0};
        for (int64_t i = 0; i < ff; i++) {
          const int k = x->lvl[i]; /* dropped at levels >= k */
          if (k < TS__LV) wcum[k] += (double)a[i] * a[i] * dn[i], mcum[k] += (double)a[i] * a[i], ncum[k] += 1;
        }
        for (int k = 1; k < TS__LV; k++) wcum[k] += wcum[k - 1], mcum[k] += mcum[k - 1], ncum[k] += ncum[k - 1];
        float *r = c->rs + (((size_t)(c->pos + t) * c->n_layer + l) * TS__LV) * 4;
        for (int k = 0; k < TS__LV; k++) {
          r[4 * k + 0] = wa > 0 ? (float)(wcum[k] / wa) : 0;
          r[4 * k + 1] = ma > 0 ? (float)(mcum[k] / ma) : 0;
          r[4 * k + 2] = (float)(ncum[k] / (double)ff);
          r[4 * k + 3] = k == 0 || base <= 0 ? 0 : (float)(lv[k] / base);
        }
      }
      if (c->teal) teal_proj(c, x, l, TS_LLM_PROJ_DOWN, c->hbuf, (int)Tp, ST_DOWN, ff);
      break;
    }
    default: break;
  }
}

/* ---- collection ------------------------------------------------------------------------- */

ts_llm_calib_opts ts_llm_calib_opts_default(void) {
  ts_llm_calib_opts o;
  memset(&o, 0, sizeof o);
  o.method = TS_LLM_SPARSE_SATS;
  o.target = 0.5;
  o.window = 512;
  o.proxy_tokens = 2048;
  return o;
}

void ts_llm_calib_destroy(ts_llm_calib *c) {
  if (!c) return;
  ts_free(c->hist), ts_free(c->hn), ts_free(c->grid), ts_free(c->sats_err), ts_free(c->sats_base), ts_free(c->teal_err);
  ts_free(c->teal_base), ts_free(c->rs), ts_free(c->wt), ts_free(c->xn), ts_free(c->ev), ts_free(c->ev2), ts_free(c->hbuf), ts_free(c->abuf);
  ts_free(c->xsq), ts_free(c->rbuf), ts_free(c->snap), ts_free(c->pscr);
  ts_free(c);
}

/* Runs the windows of tokens[0..n) (each from an empty cache, the first token BOS when the
 * vocabulary adds one) with the observer, up to `limit` tokens. */
static ts_status run_windows(ts_llm_state *s, ts_llm_calib *c, const int32_t *tokens, size_t n, int win, int64_t limit,
                             bool progress, const char *what) {
  ts_llm_model *m = s->m;
  const int32_t bos = ts_llm_vocab_add_bos(m->vocab) ? ts_llm_vocab_bos(m->vocab) : -1;
  const size_t nw = n / (size_t)win;
  int32_t *buf = ts_malloc((size_t)win * sizeof *buf);
  if (!buf) return ts_error(TS_ERR_OOM, "calibration: out of memory");
  ts_status st = TS_OK;
  c->pos = 0;
  const double t0 = ts_now();
  for (size_t w = 0; w < nw && c->pos < limit && st == TS_OK; w++) {
    memcpy(buf, tokens + w * (size_t)win, (size_t)win * sizeof *buf);
    if (bos >= 0) buf[0] = bos;
    st = ts_llm_eval(s, buf, win, 0, TS_LLM_LOGITS_NONE, NULL);
    c->pos += win;
    if (progress) {
      const int64_t lim = limit < (int64_t)(nw * (size_t)win) ? limit : (int64_t)(nw * (size_t)win);
      fprintf(stderr, "\r%s: %lld / %lld tokens, %.0f s", what, (long long)(c->pos < lim ? c->pos : lim), (long long)lim, ts_now() - t0);
      fflush(stderr);
    }
  }
  if (progress) fputc('\n', stderr);
  ts_free(buf);
  return st;
}

ts_status ts_llm_calib_collect(ts_llm_calib **out, ts_llm_state *s, const int32_t *tokens, size_t n,
                               const ts_llm_calib_opts *o) {
  if (!out || !s || !tokens || !o) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calib_collect: NULL argument");
  *out = NULL;
  const int win = o->window > 0 ? o->window : 512;
  if (win < 2 || win > s->n_ctx || win > s->n_batch)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calib_collect: window %d must be 2..the state's context (%d) and batch (%d)", win, s->n_ctx, s->n_batch);
  if (n < (size_t)win)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calib_collect: the text has %zu tokens, shorter than one window of %d", n, win);
  ts_llm_model *m = s->m;
  const ts_llm_config *cf = &m->cfg;
  ts_llm_calib *c = ts_calloc(1, sizeof *c);
  if (!c) return ts_error(TS_ERR_OOM, "ts_llm_calib_collect: out of memory");
  c->m = m;
  c->n_layer = cf->n_layer, c->d = cf->d_model, c->ff = cf->n_ff, c->nq = cf->n_head * cf->head_dim;
  c->teal = o->method == TS_LLM_SPARSE_TEAL;
  c->gemma = m->arch == TS__ARCH_GEMMA3;
  c->relu = m->cfg.ffn_act == TS_LLM_ACT_RELU;
  int64_t proxy = o->proxy_tokens > 0 ? o->proxy_tokens : 2048;
  proxy = (proxy + win - 1) / win * win;
  if ((size_t)proxy > n / (size_t)win * (size_t)win) proxy = (int64_t)(n / (size_t)win * (size_t)win);
  c->proxy = proxy;
  const size_t L = (size_t)c->n_layer, T = (size_t)win, wmax = (size_t)(c->ff > c->d ? c->ff : c->d) > (size_t)c->nq ? (size_t)(c->ff > c->d ? c->ff : c->d) : (size_t)c->nq;
  c->hist = ts_calloc(L * NST * NBIN, sizeof *c->hist);
  c->hn = ts_calloc(L * NST, sizeof *c->hn);
  c->grid = ts_calloc(L * NST * TS__LV, sizeof *c->grid);
  c->sats_err = ts_calloc(L * TS__LV, sizeof(double));
  c->sats_base = ts_calloc(L, sizeof(double));
  c->teal_err = ts_calloc(L * TS_LLM_NPROJ * TS__LV, sizeof(double));
  c->teal_base = ts_calloc(L * TS_LLM_NPROJ, sizeof(double));
  c->rs = ts_calloc((size_t)proxy * L * TS__LV * 4, sizeof(float));
  c->wt = ts_malloc(wmax * wmax * sizeof(float));
  c->xn = ts_malloc(T * wmax * sizeof(float));
  c->ev = ts_malloc(wmax * sizeof(float));
  c->ev2 = ts_malloc(wmax * sizeof(float));
  c->hbuf = ts_malloc(T * (size_t)c->ff * sizeof(float));
  c->abuf = ts_malloc(T * (size_t)c->ff * sizeof(float));
  c->xsq = ts_malloc(T * sizeof(double));
  if (c->gemma) {
    c->rbuf = ts_malloc(T * (size_t)c->d * sizeof(float));
    c->snap = ts_malloc((size_t)TS__LV * (size_t)c->d * sizeof(float));
    c->pscr = ts_malloc(3 * (size_t)c->d * sizeof(double));
  }
  cap_ctx x = {c, ts_malloc(wmax * sizeof(int32_t)), ts_malloc(wmax), ts_malloc(wmax * sizeof(float))};
  ts_status st = TS_OK;
  if (!c->hist || !c->hn || !c->grid || !c->sats_err || !c->sats_base || !c->teal_err || !c->teal_base || !c->rs || !c->wt ||
      !c->xn || !c->xsq || !c->ev || !c->ev2 || !c->hbuf || !c->abuf || !x.order || !x.lvl || !x.row || (c->gemma && (!c->rbuf || !c->snap || !c->pscr)))
    st = ts_error(TS_ERR_OOM, "ts_llm_calib_collect: out of memory");
  const struct ts_llm_sparse *sp = s->sp;
  s->sp = NULL; /* calibration observes the dense model */
  s->cap = observe;
  s->cap_ctx = &x;
  if (st == TS_OK) {
    c->pass = 1;
    st = run_windows(s, c, tokens, n, win, INT64_MAX, o->progress, "calibration, pass 1 (statistics)");
    c->tokens = c->pos;
  }
  if (st == TS_OK) { /* the grid: quantiles k / 40 of each magnitude */
    for (int l = 0; l < c->n_layer; l++)
      for (int q = 0; q < NST; q++)
        for (int k = 0; k < TS__LV; k++) c->grid[((size_t)l * NST + q) * TS__LV + k] = k ? ts__calib_quantile(c, l, q, k / 40.0) : 0;
    c->pass = 2;
    st = run_windows(s, c, tokens, n, win, proxy, o->progress, "calibration, pass 2 (error curves)");
    c->rs_n = proxy;
  }
  s->cap = NULL;
  s->cap_ctx = NULL;
  s->sp = sp;
  ts_free(x.order), ts_free(x.lvl), ts_free(x.row);
  if (st != TS_OK) {
    ts_llm_calib_destroy(c);
    return st;
  }
  for (int p = 0; p < TS_LLM_NPROJ; p++) c->wparam[p] = (double)ts__proj_mat(m, 0, p)->rows * (double)ts__proj_mat(m, 0, p)->cols;
  snprintf(c->text, sizeof c->text, "%s", o->text_name ? o->text_name : "");
  ts_llm_model_key(m, c->model_key);
  snprintf(c->model_name, sizeof c->model_name, "%s", cf->name);
  *out = c;
  return TS_OK;
}
