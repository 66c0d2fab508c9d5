/* Calibration of activation-sparsity thresholds (tessera/llm_sparse.h): CATS, TEAL and SATS from
 * statistics of the dense model on a text, and the router's probe.
 *
 * Pass 1 evaluates every window of the text densely (prefill) and keeps, per layer, histograms of
 * five magnitudes: |silu(gate)| (the activation mask), the inputs of q|k|v, of o, of gate|up and of
 * down (|h|, h = silu(gate) up). A histogram bin is the top 18 bits of the float's magnitude (its
 * exponent and 10 mantissa bits: bins 0.1% wide, no logarithms), so a quantile is read to 0.1%.
 * Pass 2 evaluates the first proxy_tokens tokens again and measures, at the grid of thresholds
 * t_k (the quantiles k / 40 of each magnitude, k = 0..TS__LV - 1, sparsity 0..95%), per token:
 *   SATS: e_k = |D (h . [|a| <= t_k])|^2 (the MLP-output error of dropping the neurons under
 *         t_k) relative to |x|^2 (the residual stream the MLP's output is added to), averaged over
 *         the tokens: E_l(k) = mean_tokens e_k / |x|^2;
 *   TEAL: for each projection p, |W_p (x . [|x| <= t_k])|^2 and |W_p x|^2 with x its input;
 *   the router's features at every level (f1, f2, f3 of tessera/llm_sparse.h) and e_k / |D h|^2.
 * Every sum adds the dropped columns bucket by bucket (x_j W[:, j] into one error vector), so a
 * token costs one pass over each matrix, whatever the number of levels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_sparse_internal.h"
#include "tessera/plot.h"

#define TS__LV 39       /* threshold levels: sparsity k / 40, k = 0..38 */
#define NBIN (1 << 18)  /* histogram bins: |v|'s float bits >> 13 */
enum { ST_ACT = 0, ST_ATTN, ST_O, ST_FFN, ST_DOWN, NST };

struct ts_llm_calib {
  int n_layer, d, ff, nq;
  int64_t tokens, proxy;            /* tokens of pass 1, of pass 2 */
  uint32_t *hist;                   /* [n_layer][NST][NBIN] */
  double *hn;                       /* [n_layer][NST] values counted */
  float *grid;                      /* [n_layer][NST][TS__LV] thresholds t_k */
  double *sats_err, *sats_base;     /* [n_layer][TS__LV], [n_layer] */
  double *teal_err, *teal_base;     /* [n_layer][NPROJ][TS__LV], [n_layer][NPROJ] */
  float *rs;                        /* router samples [proxy][n_layer][TS__LV][4]: f1 f2 f3 rel_err */
  int64_t rs_n;                     /* tokens sampled */
  double wparam[TS_LLM_NPROJ];      /* parameters per projection (TEAL's weights) */
  char text[128];
  char model_key[17], model_name[96];
  /* pass 2 scratch */
  int pass;
  bool teal;
  float *wt;                        /* a transposed fp32 matrix [n_in][n_out] */
  float *xn, *ev, *ev2, *hbuf, *abuf;
  double *xsq;                      /* [window] |x|^2 of the residual stream entering the MLP */
  int64_t pos;                      /* first token of the current window (pass 2) */
  ts_llm_model *m;
};

ts_status ts__calib_curves_svg(const ts_llm_calib *c, const ts_llm_thresholds *t, const char *path);

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

/* the magnitude under which a fraction q of the counted values lies (0: none) */
static float quantile_of(const ts_llm_calib *c, int l, int st, double q) {
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
 * (key = x for TEAL, |silu(gate)| for SATS): err[k] += |W (x . [|key| <= g_k])|^2 for k >= 1, and
 * returns |W x|^2. ev: n_out scratch. Optionally per-level values of |e|^2 into lv[k]. */
static double curve(const float *wt, int64_t n_in, int64_t n_out, const float *x, const float *key, const float *g,
                    double *err, double *lv, float *ev, int32_t *order, uint8_t *lvl) {
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
        curve(c->wt, w->cols, w->rows, in + (size_t)t * ld, in + (size_t)t * ld, g, err, NULL, c->ev, x->order, x->lvl);
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
      for (int t = 0; t < T; t++) s->ops->rmsnorm(d, s->x + (size_t)t * d, nw, cf->rms_eps, c->xn + (size_t)t * d);
      const int st = point == TS__CAP_X_ATTN ? ST_ATTN : ST_FFN;
      if (point == TS__CAP_X_FFN)
        for (int t = 0; t < T; t++) c->xsq[t] = sq(s->x + (size_t)t * d, d);
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
      for (int64_t i = 0; i < (int64_t)T * ff; i++) {
        const float g = s->ffg[i];
        c->abuf[i] = g / (1.0f + expf(-g));
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
        curve(c->wt, ff, d, h, a, ga, scratch, lv, c->ev, x->order, x->lvl);
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
  ts_free(c->xsq);
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
  if (m->arch != TS__ARCH_LLAMA)
    return ts_error(TS_ERR_UNSUPPORTED, "ts_llm_calib_collect: activation sparsity runs the llama architecture only, not %s", cf->arch);
  ts_llm_calib *c = ts_calloc(1, sizeof *c);
  if (!c) return ts_error(TS_ERR_OOM, "ts_llm_calib_collect: out of memory");
  c->m = m;
  c->n_layer = cf->n_layer, c->d = cf->d_model, c->ff = cf->n_ff, c->nq = cf->n_head * cf->head_dim;
  c->teal = o->method == TS_LLM_SPARSE_TEAL;
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
  cap_ctx x = {c, ts_malloc(wmax * sizeof(int32_t)), ts_malloc(wmax), ts_malloc(wmax * sizeof(float))};
  ts_status st = TS_OK;
  if (!c->hist || !c->hn || !c->grid || !c->sats_err || !c->sats_base || !c->teal_err || !c->teal_base || !c->rs || !c->wt ||
      !c->xn || !c->xsq || !c->ev || !c->ev2 || !c->hbuf || !c->abuf || !x.order || !x.lvl || !x.row)
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
        for (int k = 0; k < TS__LV; k++) c->grid[((size_t)l * NST + q) * TS__LV + k] = k ? quantile_of(c, l, q, k / 40.0) : 0;
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

/* ---- the methods ------------------------------------------------------------------------ */

static double sats_curve(const ts_llm_calib *c, int l, int k) {
  return k == 0 || c->sats_base[l] <= 0 ? 0 : c->sats_err[(size_t)l * TS__LV + k] / c->sats_base[l];
}
static double teal_curve(const ts_llm_calib *c, int l, int p, int k) {
  const double b = c->teal_base[(size_t)l * TS_LLM_NPROJ + p];
  return k == 0 || b <= 0 ? 0 : c->teal_err[((size_t)l * TS_LLM_NPROJ + p) * TS__LV + k] / b;
}
static int stat_of(int p) {
  return p <= TS_LLM_PROJ_V ? ST_ATTN : p == TS_LLM_PROJ_O ? ST_O : p == TS_LLM_PROJ_DOWN ? ST_DOWN : ST_FFN;
}

/* SATS: levels k_l minimising sum_l E_l(k_l) subject to sum_l k_l = K (the target's level sum),
 * exactly on the grid by dynamic programming over layers. */
static ts_status sats_levels(const ts_llm_calib *c, double target, int *lev) {
  const int L = c->n_layer, K = (int)lround(target * 40.0 * L), KM = (TS__LV - 1) * L;
  if (K > KM) return ts_error(TS_ERR_INVALID_ARG, "SATS: target %.3f above the grid's 95%%", target);
  double *f = ts_malloc((size_t)(L + 1) * (size_t)(KM + 1) * sizeof *f);
  int *arg = ts_malloc((size_t)L * (size_t)(KM + 1) * sizeof *arg);
  if (!f || !arg) {
    ts_free(f), ts_free(arg);
    return ts_error(TS_ERR_OOM, "SATS: out of memory");
  }
  for (int s = 0; s <= KM; s++) f[s] = s == 0 ? 0 : INFINITY;
  for (int l = 0; l < L; l++)
    for (int s = 0; s <= KM; s++) {
      double best = INFINITY;
      int bk = 0;
      for (int k = 0; k < TS__LV && k <= s; k++) {
        const double v = f[(size_t)l * (KM + 1) + s - k] + sats_curve(c, l, k);
        if (v < best) best = v, bk = k;
      }
      f[(size_t)(l + 1) * (KM + 1) + s] = best;
      arg[(size_t)l * (KM + 1) + s] = bk;
    }
  for (int l = L - 1, s = K; l >= 0; l--) {
    lev[l] = arg[(size_t)l * (KM + 1) + s];
    s -= lev[l];
  }
  ts_free(f), ts_free(arg);
  return TS_OK;
}

ts_status ts_llm_calibrate(const ts_llm_calib *c, const ts_llm_calib_opts *o, ts_llm_thresholds **out) {
  if (!c || !o || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: NULL argument");
  *out = NULL;
  if (!(o->target > 0 && o->target < 0.95))
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: target sparsity %g outside (0, 0.95)", o->target);
  if (o->method == TS_LLM_SPARSE_TEAL && !c->teal)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: TEAL needs statistics collected with method TEAL (its error curves)");
  if (o->method != TS_LLM_SPARSE_CATS && o->method != TS_LLM_SPARSE_TEAL && o->method != TS_LLM_SPARSE_SATS)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: method %d is not cats, teal or sats", (int)o->method);
  ts_llm_thresholds *t = NULL;
  TS_TRY(ts_llm_thresholds_create(&t, c->m));
  const int L = c->n_layer;
  double mean = 0;
  ts_status st = TS_OK;
  if (o->method == TS_LLM_SPARSE_CATS) {
    for (int l = 0; l < L; l++) {
      t->layer[l].act = quantile_of(c, l, ST_ACT, o->target);
      t->sparsity[l] = o->target;
      const double kf = o->target * 40;
      const int k = (int)floor(kf);
      t->proxy[l] = k + 1 < TS__LV ? sats_curve(c, l, k) + (kf - k) * (sats_curve(c, l, k + 1) - sats_curve(c, l, k)) : sats_curve(c, l, k);
      mean += o->target;
    }
  } else if (o->method == TS_LLM_SPARSE_SATS) {
    int *lev = ts_malloc((size_t)L * sizeof *lev);
    st = lev ? sats_levels(c, o->target, lev) : ts_error(TS_ERR_OOM, "SATS: out of memory");
    for (int l = 0; st == TS_OK && l < L; l++) {
      t->layer[l].act = c->grid[((size_t)l * NST + ST_ACT) * TS__LV + lev[l]];
      t->sparsity[l] = lev[l] / 40.0;
      t->proxy[l] = sats_curve(c, l, lev[l]);
      mean += t->sparsity[l];
    }
    ts_free(lev);
  } else { /* TEAL: per block, the step with the least added error per parameter-weighted sparsity */
    double wsum = 0;
    for (int p = 0; p < TS_LLM_NPROJ; p++) wsum += c->wparam[p];
    for (int l = 0; l < L; l++) {
      int k[TS_LLM_NPROJ] = {0};
      double s = 0;
      while (s < o->target - 1e-12) {
        int bp = -1;
        double best = INFINITY;
        for (int p = 0; p < TS_LLM_NPROJ; p++) {
          if (k[p] + 1 >= TS__LV) continue;
          const double de = teal_curve(c, l, p, k[p] + 1) - teal_curve(c, l, p, k[p]);
          const double ds = c->wparam[p] / wsum / 40.0;
          if (de / ds < best) best = de / ds, bp = p;
        }
        if (bp < 0) break;
        k[bp]++;
        s += c->wparam[bp] / wsum / 40.0;
      }
      double e = 0;
      for (int p = 0; p < TS_LLM_NPROJ; p++) {
        t->layer[l].in[p] = c->grid[((size_t)l * NST + stat_of(p)) * TS__LV + k[p]];
        e += teal_curve(c, l, p, k[p]);
      }
      t->sparsity[l] = s;
      t->proxy[l] = e;
      mean += s;
    }
  }
  if (st != TS_OK) {
    ts_llm_thresholds_destroy(t);
    return st;
  }
  ts_llm_thresholds_info *i = &t->info;
  i->method = o->method;
  i->target = o->target;
  i->calibrated = mean / L;
  i->tokens = c->tokens;
  snprintf(i->text, sizeof i->text, "%s", c->text);
  ts_provenance_here(&i->prov, ts_isa_active(), 0);
  if (o->curves_svg && o->method == TS_LLM_SPARSE_SATS) st = ts__calib_curves_svg(c, t, o->curves_svg);
  if (st != TS_OK) {
    ts_llm_thresholds_destroy(t);
    return st;
  }
  *out = t;
  return TS_OK;
}

/* ---- the router ------------------------------------------------------------------------- */

/* Solves the 4 x 4 system A w = b (Gaussian elimination with partial pivoting, a ridge 1e-9 on
 * the diagonal); false when singular. */
static bool solve4(double A[4][4], double b[4], double w[4]) {
  for (int i = 0; i < 4; i++) A[i][i] += 1e-9;
  for (int col = 0; col < 4; col++) {
    int piv = col;
    for (int r = col + 1; r < 4; r++)
      if (fabs(A[r][col]) > fabs(A[piv][col])) piv = r;
    if (fabs(A[piv][col]) < 1e-300) return false;
    for (int k = 0; k < 4; k++) {
      const double tmp = A[col][k];
      A[col][k] = A[piv][k], A[piv][k] = tmp;
    }
    const double tb = b[col];
    b[col] = b[piv], b[piv] = tb;
    for (int r = col + 1; r < 4; r++) {
      const double f = A[r][col] / A[col][col];
      for (int k = col; k < 4; k++) A[r][k] -= f * A[col][k];
      b[r] -= f * b[col];
    }
  }
  for (int r = 3; r >= 0; r--) {
    double s = b[r];
    for (int k = r + 1; k < 4; k++) s -= A[r][k] * w[k];
    w[r] = s / A[r][r];
  }
  return true;
}

/* the grid level of threshold t in layer l's activation grid (nearest) */
static int level_of(const ts_llm_calib *c, int l, float t) {
  const float *g = c->grid + ((size_t)l * NST + ST_ACT) * TS__LV;
  int best = 0;
  for (int k = 1; k < TS__LV; k++)
    if (fabsf(g[k] - t) < fabsf(g[best] - t)) best = k;
  return best;
}

ts_status ts_llm_router_train(const ts_llm_calib *c, const ts_llm_thresholds *t, ts_llm_router **out) {
  if (!c || !t || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_train: NULL argument");
  *out = NULL;
  if (t->n_layer != c->n_layer) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_train: thresholds of %d layers, statistics of %d", t->n_layer, c->n_layer);
  ts_llm_router *r = NULL;
  TS_TRY(ts_llm_router_create(&r, c->m));
  for (int l = 0; l < c->n_layer; l++) {
    const int k = level_of(c, l, t->layer[l].act);
    double A[4][4] = {{0}}, b[4] = {0}, w[4] = {0};
    for (int64_t i = 0; i < c->rs_n; i++) {
      const float *s = c->rs + (((size_t)i * c->n_layer + l) * TS__LV + k) * 4;
      const double f[4] = {1, s[0], s[1], s[2]};
      for (int a = 0; a < 4; a++) {
        for (int e = 0; e < 4; e++) A[a][e] += f[a] * f[e];
        b[a] += f[a] * s[3];
      }
    }
    if (!solve4(A, b, w)) memset(w, 0, sizeof w);
    memcpy(ts_llm_router_weights(r, l), w, sizeof w);
  }
  *out = r;
  return TS_OK;
}

/* ---- the SATS curves as a picture --------------------------------------------------------- */

/* One chart: per layer its proxy E_l (log scale) against the calibration sparsity of the grid
 * levels, coloured by depth, and the level SATS chose for it marked. */
ts_status ts__calib_curves_svg(const ts_llm_calib *c, const ts_llm_thresholds *t, const char *path) {
  const double W = 860, H = 520, x0 = 70, y0 = 64, pw = 600, ph = 400;
  double lo = INFINITY, hi = 0;
  for (int l = 0; l < c->n_layer; l++)
    for (int k = 1; k < TS__LV; k++) {
      const double e = sats_curve(c, l, k);
      if (e > 0) lo = e < lo ? e : lo, hi = e > hi ? e : hi;
    }
  if (!(hi > 0)) return TS_OK; /* nothing measured */
  lo = pow(10, floor(log10(lo))), hi = pow(10, ceil(log10(hi)));
  ts_svg *g;
  TS_TRY(ts_svg_create(&g, W, H));
  ts_svg_rect(g, 0, 0, W, H, 0xFFFFFF);
  char buf[160];
  snprintf(buf, sizeof buf, "SATS proxy per layer: %s, %lld calibration tokens, target %.0f%%", c->model_name,
           (long long)c->tokens, t->info.target * 100);
  ts_svg_text(g, 14, 22, 13, 's', 0x000000, buf);
  ts_svg_frame(g, x0, y0, pw, ph, 0x000000, 1);
#define PX(s) (x0 + pw * (s) / 0.95)
#define PY(e) (y0 + ph * (1 - (log10(e) - log10(lo)) / (log10(hi) - log10(lo))))
  for (double dec = lo; dec <= hi * 1.0001; dec *= 10) {
    ts_svg_line(g, x0 - 4, PY(dec), x0, PY(dec), 0x000000, 1);
    snprintf(buf, sizeof buf, "%g", dec);
    ts_svg_text(g, x0 - 6, PY(dec) + 4, 11, 'e', 0x000000, buf);
  }
  for (int s = 0; s <= 90; s += 10) {
    ts_svg_line(g, PX(s / 100.0), y0 + ph, PX(s / 100.0), y0 + ph + 4, 0x000000, 1);
    snprintf(buf, sizeof buf, "%d%%", s);
    ts_svg_text(g, PX(s / 100.0), y0 + ph + 16, 11, 'm', 0x000000, buf);
  }
  ts_svg_text(g, x0 + pw / 2, H - 8, 12, 'm', 0x000000, "neurons skipped on the calibration text (|silu(gate)| <= t)");
  ts_svg_text(g, 14, y0 - 14, 12, 's', 0x000000, "E_l = mean over tokens of |D(m.h) - Dh|^2 / |x|^2 (log scale)");
  for (int l = 0; l < c->n_layer; l++) {
    const uint32_t col = ts_plot_colormap(0.15 + 0.8 * l / (c->n_layer > 1 ? c->n_layer - 1 : 1));
    for (int k = 2; k < TS__LV; k++) {
      const double e0 = sats_curve(c, l, k - 1), e1 = sats_curve(c, l, k);
      if (e0 > 0 && e1 > 0) ts_svg_line(g, PX((k - 1) / 40.0), PY(e0), PX(k / 40.0), PY(e1), col, 1.2);
    }
    const double s = t->sparsity[l], e = t->proxy[l];
    if (e > 0) {
      snprintf(buf, sizeof buf, "M%.1f %.1fh6v6h-6z", PX(s) - 3, PY(e) - 3);
      ts_svg_path(g, buf, col);
    }
  }
  for (int l = 0; l < c->n_layer; l += (c->n_layer + 5) / 6) { /* legend: layer colours */
    const double y = y0 + 14 + 16.0 * l / ((c->n_layer + 5) / 6);
    ts_svg_line(g, x0 + pw + 12, y, x0 + pw + 32, y, ts_plot_colormap(0.15 + 0.8 * l / (c->n_layer > 1 ? c->n_layer - 1 : 1)), 2);
    snprintf(buf, sizeof buf, "layer %d", l);
    ts_svg_text(g, x0 + pw + 36, y + 4, 11, 's', 0x000000, buf);
  }
  ts_svg_text(g, x0 + pw + 12, y0 + ph - 4, 11, 's', 0x000000, "squares: SATS's levels");
#undef PX
#undef PY
  ts_status st = ts_svg_write(g, path);
  ts_svg_destroy(g);
  return st;
}
