/* The ViT forward in double precision, written naively from the model's parameters (grid token
 * order): the yardstick of tests/test_vit.c (the forward) and tests/test_vit_train.c (the loss whose
 * finite differences check the training step's gradients). */
#ifndef TESTS_VIT_NAIVE_H
#define TESTS_VIT_NAIVE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "nn/nn_internal.h"

static void ln_d(const double *x, int64_t D, const float *g, const float *b, double eps, double *y) {
  double mu = 0, var = 0;
  for (int64_t j = 0; j < D; j++) mu += x[j];
  mu /= D;
  for (int64_t j = 0; j < D; j++) var += (x[j] - mu) * (x[j] - mu);
  var /= D;
  for (int64_t j = 0; j < D; j++) y[j] = (x[j] - mu) / sqrt(var + eps) * g[j] + b[j];
}

/* y[R][O] = x[R][I] W[I][O] + bias */
static void lin_d(const double *x, int64_t R, int64_t I, int64_t O, const float *W, const float *bias, double *y) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t o = 0; o < O; o++) {
      double s = bias[o];
      for (int64_t i = 0; i < I; i++) s += x[r * I + i] * W[i * O + o];
      y[r * O + o] = s;
    }
}

/* logits [B][classes] of the model's parameters, grid token order, mask u8 [n][n] (NULL: dense). */
static void naive_forward(const ts_nn_vit *m, const float *img, const uint8_t *mask, double *logits) {
  const ts_nn_vit_config *c = &m->cfg;
  int64_t B = m->batch, n = m->n, D = c->dim, M = c->mlp, P = c->patch, hd = m->hd, R = B * n;
  double *x = calloc((size_t)(R * D), sizeof *x), *h = calloc((size_t)(R * D), sizeof *h);
  double *qkv = calloc((size_t)(R * 3 * D), sizeof *qkv), *a = calloc((size_t)(R * D), sizeof *a);
  double *mid = calloc((size_t)(R * M), sizeof *mid), *pt = calloc((size_t)(R * m->pdim), sizeof *pt);
  double *y = calloc((size_t)(R * (D > M ? D : M)), sizeof *y), *sc = calloc((size_t)n, sizeof *sc);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < n; t++)
      for (int64_t ch = 0; ch < c->in_chans; ch++)
        for (int64_t ky = 0; ky < P; ky++)
          for (int64_t kx = 0; kx < P; kx++)
            pt[(b * n + t) * m->pdim + (ch * P + ky) * P + kx] =
                img[((b * c->in_chans + ch) * c->img_h + (t / m->gw) * P + ky) * c->img_w + (t % m->gw) * P + kx];
  lin_d(pt, R, m->pdim, D, m->w_pe, m->b_pe, x);
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < D; j++) x[r * D + j] += m->pos[(r % n) * D + j];
  for (int64_t l = 0; l < c->depth; l++) {
    const ts__vit_layer *L = &m->layers[l];
    for (int64_t r = 0; r < R; r++) ln_d(x + r * D, D, L->ln1_g, L->ln1_b, c->ln_eps, h + r * D);
    lin_d(h, R, D, 3 * D, L->wqkv, L->bqkv, qkv);
    for (int64_t b = 0; b < B; b++)
      for (int64_t hh = 0; hh < c->heads; hh++)
        for (int64_t i = 0; i < n; i++) {
          const double *q = qkv + (b * n + i) * 3 * D + hh * hd;
          double mx = -INFINITY, sum = 0;
          for (int64_t j = 0; j < n; j++) {
            if (mask && !mask[i * n + j]) continue;
            const double *k = qkv + (b * n + j) * 3 * D + D + hh * hd;
            double s = 0;
            for (int64_t e = 0; e < hd; e++) s += q[e] * k[e];
            sc[j] = s / sqrt((double)hd);
            if (sc[j] > mx) mx = sc[j];
          }
          double *o = a + (b * n + i) * D + hh * hd;
          for (int64_t e = 0; e < hd; e++) o[e] = 0;
          for (int64_t j = 0; j < n; j++) {
            if (mask && !mask[i * n + j]) continue;
            double p = exp(sc[j] - mx);
            sum += p;
            const double *v = qkv + (b * n + j) * 3 * D + 2 * D + hh * hd;
            for (int64_t e = 0; e < hd; e++) o[e] += p * v[e];
          }
          for (int64_t e = 0; e < hd; e++) o[e] = sum > 0 ? o[e] / sum : 0;
        }
    lin_d(a, R, D, D, L->wo, L->bo, y);
    for (int64_t i = 0; i < R * D; i++) x[i] += y[i];
    for (int64_t r = 0; r < R; r++) ln_d(x + r * D, D, L->ln2_g, L->ln2_b, c->ln_eps, h + r * D);
    lin_d(h, R, D, M, L->w1, L->b1, mid);
    for (int64_t i = 0; i < R * M; i++) mid[i] = 0.5 * mid[i] * erfc(-mid[i] / sqrt(2.0));
    lin_d(mid, R, M, D, L->w2, L->b2, y);
    for (int64_t i = 0; i < R * D; i++) x[i] += y[i];
  }
  for (int64_t r = 0; r < R; r++) ln_d(x + r * D, D, m->lnf_g, m->lnf_b, c->ln_eps, h + r * D);
  for (int64_t b = 0; b < B; b++) {
    double *pool = a; /* scratch [D] */
    for (int64_t j = 0; j < D; j++) {
      pool[j] = 0;
      for (int64_t t = 0; t < n; t++) pool[j] += h[(b * n + t) * D + j];
      pool[j] /= n;
    }
    lin_d(pool, 1, D, c->classes, m->w_head, m->b_head, logits + b * c->classes);
  }
  free(x), free(h), free(qkv), free(a), free(mid), free(pt), free(y), free(sc);
}

#endif
