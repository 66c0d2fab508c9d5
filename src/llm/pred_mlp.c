/* Training of the learned activation predictor (pred_mlp.h) and its scalar inference reference.
 *
 * One minibatch step, B tokens (rows idx[0..B) of X and Y), everything row-major:
 *   Xb [B][d] (gathered)  ->  H = relu(Xb W1^T + b1) [B][r]  ->  Z = H W2^T + b2 [B][n]
 *   G = dL/dZ [B][n] (in place of Z)   gW2 = G^T H [n][r]   gb2 = colsum G
 *   dH = (G W2) * [H > 0] [B][r]       gW1 = dH^T Xb [r][d]  gb1 = colsum dH
 * The four products go through ts_sgemm (oneDNN); the per-element loss gradient is one pass over
 * G, and Adam one pass over the parameters, which live in one block (w1 | b1 | w2 | b2) so that the
 * gradient and both moments are single vectors of the same layout.
 *
 * Loss per element, z the logit and y in {0, 1}: w_y (softplus(z) - y z), w_1 = pos_weight,
 * w_0 = 1, softplus(z) = max(z, 0) + log1p(exp(-|z|)) (no overflow for any z); its derivative
 * w_y (sigmoid(z) - y). Summed over neurons, averaged over the batch's tokens (the scale Adam
 * sees; the reported losses are per element). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "llm/pred_mlp.h"
#include "tessera/kernels.h"

#define PMLP_MAX_DIM (1 << 20) /* d, n, r: far above any layer, small enough that products fit */

ts__pmlp_opts ts__pmlp_opts_default(void) {
  return (ts__pmlp_opts){.r = 64, .epochs = 8, .batch = 256, .lr = 1e-3f, .pos_weight = 0, .seed = 1,
                         .progress = false, .threads = 1};
}

void ts__pmlp_free(ts__pmlp *p) {
  if (!p) return;
  ts_free(p->w1); /* one block: w1 | b1 | w2 | b2 */
  memset(p, 0, sizeof *p);
}

size_t ts__pmlp_bytes(const ts__pmlp *p) {
  return ((size_t)p->r * (size_t)p->d + (size_t)p->r + (size_t)p->n * (size_t)p->r + (size_t)p->n) * sizeof(float);
}

/* ---- inference: reference and dispatch -------------------------------------------------------- */

void ts__pmlp_logits_ref(const ts__pmlp *p, const float *x, float *logits, float *scratch) {
  const int d = p->d, r = p->r, n = p->n;
  for (int j = 0; j < r; j++) {
    const float *w = p->w1 + (size_t)j * d;
    double s = p->b1[j];
    for (int k = 0; k < d; k++) s += (double)w[k] * x[k];
    scratch[j] = s > 0 ? (float)s : 0.0f;
  }
  for (int i = 0; i < n; i++) {
    const float *w = p->w2 + (size_t)i * r;
    double s = p->b2[i];
    for (int j = 0; j < r; j++) s += (double)w[j] * scratch[j];
    logits[i] = (float)s;
  }
}

static const ts__pmlp_kern g_ref = {ts__pmlp_logits_ref};
static const ts__pmlp_kern g_avx2 = {ts__pmlp_logits_avx2};
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX2, &g_avx2}};
ts__dispatch ts__pmlp_dispatch = TS__DISPATCH("llm_pmlp", g_variants);

void ts__pmlp_logits(const ts__pmlp *p, const float *x, float *logits, float *scratch) {
  const ts__pmlp_kern *k = ts__dispatch_table(&ts__pmlp_dispatch);
  k->logits(p, x, logits, scratch);
}

/* ---- training --------------------------------------------------------------------------------- */

typedef struct trainer {
  ts__pmlp *m;
  ts_context *ctx;
  const float *X;
  const uint8_t *Y;
  int d, r, n, B;
  float pw;
  float *g, *gw1, *gb1, *gw2, *gb2; /* gradient, same layout as the weights */
  float *xb, *h, *z, *dh;           /* [B][d], [B][r], [B][n], [B][r] */
} trainer;

/* H = relu(Xb W1^T + b1), Z = H W2^T + b2 for rows idx[0..nb); Xb gathered. */
static ts_status forward(trainer *t, const int64_t *idx, int nb) {
  const int d = t->d, r = t->r, n = t->n;
  const ts__pmlp *m = t->m;
  for (int b = 0; b < nb; b++) memcpy(t->xb + (size_t)b * d, t->X + (size_t)idx[b] * d, (size_t)d * sizeof(float));
  TS_TRY(ts_sgemm(t->ctx, TS_NO_TRANS, TS_TRANS, nb, r, d, 1.0f, t->xb, d, m->w1, d, 0.0f, t->h, r));
  for (int b = 0; b < nb; b++) {
    float *hb = t->h + (size_t)b * r;
    for (int j = 0; j < r; j++) {
      const float v = hb[j] + m->b1[j];
      hb[j] = v > 0 ? v : 0.0f;
    }
  }
  TS_TRY(ts_sgemm(t->ctx, TS_NO_TRANS, TS_TRANS, nb, n, r, 1.0f, t->h, r, m->w2, r, 0.0f, t->z, n));
  for (int b = 0; b < nb; b++) {
    float *zb = t->z + (size_t)b * n;
    for (int i = 0; i < n; i++) zb[i] += m->b2[i];
  }
  return TS_OK;
}

/* Z (logits) -> G = scale * w_y (sigmoid(z) - y), in place. */
static void loss_grad(trainer *t, const int64_t *idx, int nb, float scale) {
  const int n = t->n;
  const float wp = t->pw * scale;
  for (int b = 0; b < nb; b++) {
    float *zb = t->z + (size_t)b * n;
    const uint8_t *yb = t->Y + (size_t)idx[b] * n;
    for (int i = 0; i < n; i++) {
      const float z = zb[i], e = expf(-fabsf(z));
      const float s = (z >= 0 ? 1.0f : e) / (1.0f + e);
      zb[i] = yb[i] ? wp * (s - 1.0f) : scale * s;
    }
  }
}

/* Gradients of the batch whose G is in z and activations in xb, h. */
static ts_status backward(trainer *t, int nb) {
  const int d = t->d, r = t->r, n = t->n;
  TS_TRY(ts_sgemm(t->ctx, TS_TRANS, TS_NO_TRANS, n, r, nb, 1.0f, t->z, n, t->h, r, 0.0f, t->gw2, r));
  memset(t->gb2, 0, (size_t)n * sizeof(float));
  for (int b = 0; b < nb; b++) {
    const float *gz = t->z + (size_t)b * n;
    for (int i = 0; i < n; i++) t->gb2[i] += gz[i];
  }
  TS_TRY(ts_sgemm(t->ctx, TS_NO_TRANS, TS_NO_TRANS, nb, r, n, 1.0f, t->z, n, t->m->w2, r, 0.0f, t->dh, r));
  memset(t->gb1, 0, (size_t)r * sizeof(float));
  for (int b = 0; b < nb; b++) {
    float *db = t->dh + (size_t)b * r;
    const float *hb = t->h + (size_t)b * r;
    for (int j = 0; j < r; j++) {
      db[j] = hb[j] > 0 ? db[j] : 0.0f;
      t->gb1[j] += db[j];
    }
  }
  return ts_sgemm(t->ctx, TS_TRANS, TS_NO_TRANS, r, d, nb, 1.0f, t->dh, r, t->xb, d, 0.0f, t->gw1, d);
}

/* Adam (Kingma & Ba) with bias correction folded into the step size; step counts from 1. */
static void adam(float *restrict p, const float *restrict g, float *restrict mo, float *restrict ve, size_t np,
                 float lr, int64_t step) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  const double c1 = 1 - pow(b1, (double)step), c2 = 1 - pow(b2, (double)step);
  const float a = (float)(lr * sqrt(c2) / c1), e = (float)(eps * sqrt(c2));
  for (size_t k = 0; k < np; k++) {
    mo[k] = b1 * mo[k] + (1 - b1) * g[k];
    ve[k] = b2 * ve[k] + (1 - b2) * g[k] * g[k];
    p[k] -= a * mo[k] / (sqrtf(ve[k]) + e);
  }
}

typedef struct val_stats {
  double loss;                       /* weighted BCE summed */
  int64_t tp, fn, correct, skip, ne; /* at logit > 0; ne elements */
} val_stats;

static ts_status evaluate(trainer *t, const int64_t *idx, int64_t nv, val_stats *vs) {
  memset(vs, 0, sizeof *vs);
  const int n = t->n;
  for (int64_t b0 = 0; b0 < nv; b0 += t->B) {
    const int nb = (int)(nv - b0 < t->B ? nv - b0 : t->B);
    TS_TRY(forward(t, idx + b0, nb));
    for (int b = 0; b < nb; b++) {
      const float *zb = t->z + (size_t)b * n;
      const uint8_t *yb = t->Y + (size_t)idx[b0 + b] * n;
      double l = 0;
      for (int i = 0; i < n; i++) {
        const float z = zb[i];
        const int y = yb[i] != 0, on = z > 0;
        const float sp = (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z)));
        l += y ? t->pw * (sp - z) : sp;
        vs->tp += y & on;
        vs->fn += y & !on;
        vs->correct += y == on;
        vs->skip += !on;
      }
      vs->loss += l;
    }
  }
  vs->ne = nv * n;
  return TS_OK;
}

static ts_status check_args(ts__pmlp *out, const float *X, const uint8_t *Y, int64_t N, int d, int n,
                            const ts__pmlp_opts *o) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "pmlp train: out is NULL");
  if (!X || !Y) return ts_error(TS_ERR_INVALID_ARG, "pmlp train: %s is NULL", !X ? "X" : "Y");
  if (N < 1) return ts_error(TS_ERR_INVALID_ARG, "pmlp train: N = %lld tokens (need >= 1)", (long long)N);
  if (d < 1 || d > PMLP_MAX_DIM || n < 1 || n > PMLP_MAX_DIM)
    return ts_error(TS_ERR_INVALID_ARG, "pmlp train: d = %d, n = %d (each must be in 1..%d)", d, n, PMLP_MAX_DIM);
  if (o->r < 1 || o->r > PMLP_MAX_DIM)
    return ts_error(TS_ERR_INVALID_ARG, "pmlp train: hidden width r = %d (must be in 1..%d)", o->r, PMLP_MAX_DIM);
  if (o->epochs < 1) return ts_error(TS_ERR_INVALID_ARG, "pmlp train: epochs = %d (need >= 1)", o->epochs);
  if (o->batch < 1 || o->batch > (1 << 20))
    return ts_error(TS_ERR_INVALID_ARG, "pmlp train: batch = %d (must be in 1..%d)", o->batch, 1 << 20);
  if (!(o->lr > 0) || !isfinite(o->lr))
    return ts_error(TS_ERR_INVALID_ARG, "pmlp train: lr = %g (must be finite and > 0)", (double)o->lr);
  if (!(o->pos_weight >= 0) || !isfinite(o->pos_weight))
    return ts_error(TS_ERR_INVALID_ARG, "pmlp train: pos_weight = %g (must be finite and >= 0; 0 = from the data)",
                    (double)o->pos_weight);
  size_t nx, ny;
  if (!ts_mul_size((size_t)N, (size_t)d, &nx) || !ts_mul_size((size_t)N, (size_t)n, &ny) ||
      !ts_mul_size(nx, sizeof(float), &nx))
    return ts_error(TS_ERR_OVERFLOW, "pmlp train: N = %lld tokens of d = %d, n = %d overflow a size", (long long)N, d, n);
  for (size_t k = 0; k < (size_t)N * (size_t)d; k++)
    if (!isfinite(X[k]))
      return ts_error(TS_ERR_INVALID_ARG, "pmlp train: X[%lld][%d] = %g is not finite", (long long)(k / (size_t)d),
                      (int)(k % (size_t)d), (double)X[k]);
  return TS_OK;
}

/* Per-neuron active counts over the training tokens idx[0..nt) into cnt[n]; returns the total. */
static int64_t count_active(const uint8_t *Y, const int64_t *idx, int64_t nt, int n, int64_t *cnt) {
  int64_t tot = 0;
  for (int64_t t = 0; t < nt; t++) {
    const uint8_t *y = Y + (size_t)idx[t] * n;
    for (int i = 0; i < n; i++) cnt[i] += y[i] != 0;
  }
  for (int i = 0; i < n; i++) tot += cnt[i];
  return tot;
}

static void shuffle(int64_t *a, int64_t len, ts_rng *rng) {
  for (int64_t i = len - 1; i > 0; i--) {
    const int64_t j = (int64_t)ts_rng_below(rng, (uint64_t)i + 1), x = a[i];
    a[i] = a[j], a[j] = x;
  }
}

ts_status ts__pmlp_train(ts__pmlp *out, const float *X, const uint8_t *Y, int64_t N, int d, int n,
                         const ts__pmlp_opts *opts) {
  const ts__pmlp_opts o = opts ? *opts : ts__pmlp_opts_default();
  if (out) memset(out, 0, sizeof *out);
  TS_TRY(check_args(out, X, Y, N, d, n, &o));
  const int r = o.r;
  /* parameters: w1 [r][d] | b1 [r] | w2 [n][r] | b2 [n] (each product below is bounded by 2^40) */
  const size_t np = (size_t)r * d + (size_t)r + (size_t)n * r + (size_t)n;
  const int64_t nv = N >= 20 ? N / 20 : 0, nt = N - nv;
  const int B = (int)(o.batch < nt ? o.batch : nt);

  ts_status s = TS_OK;
  trainer t = {.m = out, .X = X, .Y = Y, .d = d, .r = r, .n = n, .B = B};
  float *par = NULL, *mo = NULL, *ve = NULL, *buf = NULL;
  int64_t *perm = NULL, *cnt = NULL;
  size_t nbuf = 0;
  if (!ts_add_size((size_t)d + 2 * (size_t)r, (size_t)n, &nbuf) || !ts_mul_size(nbuf, (size_t)B, &nbuf) ||
      nbuf > SIZE_MAX / 8 || np > SIZE_MAX / 16) {
    s = ts_error(TS_ERR_OVERFLOW, "batch buffers of %d x (%d + 2 x %d + %d) floats overflow", B, d, r, n);
    goto done;
  }
  par = ts_malloc(np * sizeof(float));
  t.g = ts_malloc(np * sizeof(float));
  mo = ts_calloc(np, sizeof(float));
  ve = ts_calloc(np, sizeof(float));
  buf = ts_malloc(nbuf * sizeof(float));
  perm = ts_malloc((size_t)N * sizeof(int64_t));
  cnt = ts_calloc((size_t)n, sizeof(int64_t));
  if (!par || !t.g || !mo || !ve || !buf || !perm || !cnt) {
    s = ts_error(TS_ERR_OOM, "out of memory for %zu parameters (x4) and %zu batch floats", np, nbuf);
    goto done;
  }
  s = ts_context_create(&t.ctx, o.threads > 0 ? o.threads : 0);
  if (s != TS_OK) goto done;
  out->d = d, out->r = r, out->n = n;
  out->w1 = par, out->b1 = par + (size_t)r * d, out->w2 = out->b1 + r, out->b2 = out->w2 + (size_t)n * r;
  t.gw1 = t.g, t.gb1 = t.g + (size_t)r * d, t.gw2 = t.gb1 + r, t.gb2 = t.gw2 + (size_t)n * r;
  t.xb = buf, t.h = t.xb + (size_t)B * d, t.z = t.h + (size_t)B * r, t.dh = t.z + (size_t)B * n;

  ts_rng rng;
  ts_rng_seed(&rng, o.seed);
  /* held-out tokens: perm[0..nv), training tokens: perm[nv..N) */
  for (int64_t k = 0; k < N; k++) perm[k] = k;
  shuffle(perm, N, &rng);
  int64_t *const tr = perm + nv;

  /* pos_weight from the class balance; b2 at the weighted prior's log-odds (the best constant
   * predictor of each neuron under the weighted loss), so training starts from the base rates. */
  const int64_t act = count_active(Y, tr, nt, n, cnt), tot = nt * (int64_t)n;
  float pw = o.pos_weight;
  if (pw == 0) {
    pw = act ? (float)((double)(tot - act) / (double)act) : 10.0f;
    pw = pw < 1 ? 1 : pw > 10 ? 10 : pw;
  }
  t.pw = out->pos_weight = pw;
  /* He init: N(0, 2 / fan_in) */
  const float s1 = sqrtf(2.0f / (float)d), s2 = sqrtf(2.0f / (float)r);
  for (size_t k = 0; k < (size_t)r * d; k++) out->w1[k] = s1 * ts_rng_normal(&rng);
  for (int j = 0; j < r; j++) out->b1[j] = 0;
  for (size_t k = 0; k < (size_t)n * r; k++) out->w2[k] = s2 * ts_rng_normal(&rng);
  for (int i = 0; i < n; i++) {
    double p = ((double)cnt[i] + 0.5) / ((double)nt + 1.0);
    out->b2[i] = (float)log(pw * p / (1 - p));
  }

  const int64_t steps = (nt + B - 1) / B;
  int64_t step = 0;
  out->n_val = nv;
  out->val_loss = out->val_recall = out->val_acc = out->val_skip = -1;
  for (int ep = 0; ep < o.epochs && s == TS_OK; ep++) {
    char label[48];
    snprintf(label, sizeof label, "pmlp epoch %d/%d", ep + 1, o.epochs);
    ts_progress pg;
    if (o.progress) ts_progress_begin(&pg, label, steps);
    shuffle(tr, nt, &rng);
    for (int64_t b0 = 0; b0 < nt && s == TS_OK; b0 += B) {
      const int nb = (int)(nt - b0 < B ? nt - b0 : B);
      s = forward(&t, tr + b0, nb);
      if (s == TS_OK) loss_grad(&t, tr + b0, nb, 1.0f / (float)nb);
      if (s == TS_OK) s = backward(&t, nb);
      if (s == TS_OK) adam(par, t.g, mo, ve, np, o.lr, ++step);
      if (o.progress) ts_progress_update(&pg, b0 / B + 1);
    }
    if (o.progress) ts_progress_end(&pg);
    if (s != TS_OK || nv == 0) continue;
    val_stats vs;
    s = evaluate(&t, perm, nv, &vs);
    if (s != TS_OK) continue;
    out->val_loss = (float)(vs.loss / (double)vs.ne);
    out->val_recall = vs.tp + vs.fn ? (float)((double)vs.tp / (double)(vs.tp + vs.fn)) : 1.0f;
    out->val_acc = (float)((double)vs.correct / (double)vs.ne);
    out->val_skip = (float)((double)vs.skip / (double)vs.ne);
    if (o.progress && !pg.quiet)
      fprintf(stderr, "pmlp epoch %d/%d: held-out %lld tokens: loss %.4f recall %.4f accuracy %.4f skip %.3f\n",
              ep + 1, o.epochs, (long long)nv, (double)out->val_loss, (double)out->val_recall,
              (double)out->val_acc, (double)out->val_skip);
  }

done:
  if (s != TS_OK) {
    ts_error_prefix("pmlp train: ");
    if (out && out->w1 == par) par = NULL; /* freed below through out */
    ts__pmlp_free(out);
    ts_free(par);
  }
  if (t.ctx) ts_context_destroy(t.ctx);
  ts_free(t.g);
  ts_free(mo);
  ts_free(ve);
  ts_free(buf);
  ts_free(perm);
  ts_free(cnt);
  return s;
}
