/* GEMM-based convolutions over ts_sgemm (oneDNN): im2col, kn2row and implicit GEMM (with the 1x1
 * fast path). Shapes per image n and group g (cg = C/groups, kg = K/groups, CRS = cg*R*S):
 *   im2col    col [CRS][P*Q];     out_g [kg][P*Q] = W_g [kg][CRS] x col
 *   kn2row    T [kg][H*W] = W_rs [kg][cg] x X_g [cg][H*W] per tap (r, s); out_g += shift(T)
 *   implicit  1x1 pad 0: out_g = W_g [kg][cg] x X_g (strided input gathered to [cg][P*Q] first);
 *             otherwise panels col [CRS][NB] of NB output positions lowered per thread on the fly */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "tessera/kernels.h"

/* One row (c, r, s) of the lowered matrix for output positions [j0, j0 + nb) of image plane x:
 * output row by output row, zeros where the tap falls in the padding, a copy (memcpy at stride 1)
 * of the in-range columns [qa, qb) otherwise. */
void ts__conv_lower_row(const ts_conv_desc *d, int Q, const float *x, int r, int s, int j0, int nb, float *dst) {
  const int off = s * d->dilation_w - d->pad_left, sw = d->stride_w;
  /* q in [qa, qb) <=> 0 <= q*sw + off < W */
  int qa = off >= 0 ? 0 : (-off + sw - 1) / sw, qb = d->w - off <= 0 ? 0 : (d->w - off + sw - 1) / sw;
  if (qb > Q) qb = Q;
  if (qa > qb) qa = qb;
  int p = j0 / Q, q = j0 % Q;
  for (int j = 0; j < nb; p++, q = 0) {
    const int run = Q - q < nb - j ? Q - q : nb - j, ih = p * d->stride_h - d->pad_top + r * d->dilation_h;
    float *o = dst + j; /* o[t - q] for output columns t in [q, q + run) */
    if (ih < 0 || ih >= d->h) {
      memset(o, 0, (size_t)run * sizeof(float));
    } else {
      const float *xr = x + (size_t)ih * d->w; /* column t reads xr[t*sw + off] */
      const int a = qa > q ? qa : q, b = qb < q + run ? qb : q + run;
      for (int t = q; t < a && t < q + run; t++) o[t - q] = 0.0f;
      if (sw == 1 && b > a) memcpy(o + (a - q), xr + a + off, (size_t)(b - a) * sizeof(float));
      else
        for (int t = a; t < b; t++) o[t - q] = xr[(size_t)t * sw + off];
      for (int t = b > a ? b : a; t < q + run; t++) o[t - q] = 0.0f;
    }
    j += run;
  }
}

/* ---- im2col ---------------------------------------------------------------------------------- */

static ts_status im2col_init(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  pl->workspace = ts__conv_align((size_t)pl->cg * d->r * d->s * pl->p * pl->q * sizeof(float));
  return TS_OK;
}

static ts_status im2col_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const ts_conv_desc *d = &pl->d;
  const int rs = d->r * d->s, crs = pl->cg * rs, pq = pl->p * pl->q;
  float *col = (float *)ws;
  for (int n = 0; n < d->n; n++)
    for (int g = 0; g < d->groups; g++) {
      const float *x = in + ((size_t)n * d->c + (size_t)g * pl->cg) * d->h * d->w;
#pragma omp parallel for num_threads(pl->threads) schedule(static)
      for (int row = 0; row < crs; row++) {
        const int c = row / rs, r = (row % rs) / d->s, s = row % d->s;
        ts__conv_lower_row(d, pl->q, x + (size_t)c * d->h * d->w, r, s, 0, pq, col + (size_t)row * pq);
      }
      float *o = out + ((size_t)n * d->k + (size_t)g * pl->kg) * pq;
      TS_TRY(ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, pl->kg, pq, crs, 1.0f, pl->weights + (size_t)g * pl->kg * crs,
                      crs, col, pq, 0.0f, o, pq));
#pragma omp parallel for num_threads(pl->threads) schedule(static)
      for (int k = 0; k < pl->kg; k++)
        ts__conv_epilogue(o + (size_t)k * pq, 1, pq, pq, pl->bias + g * pl->kg + k, d->relu);
    }
  return TS_OK;
}

const ts__conv_algo_ops ts__conv_ops_im2col = {NULL, im2col_init, NULL, im2col_execute, NULL};

/* ---- kn2row ---------------------------------------------------------------------------------- */

static ts_status kn2row_check(const ts_conv_desc *d) {
  if (d->stride_h != 1 || d->stride_w != 1)
    return ts_error(TS_ERR_UNSUPPORTED, "kn2row: needs stride 1, got stride %dx%d", d->stride_h, d->stride_w);
  return TS_OK;
}

typedef struct kn2row_state {
  float *wk; /* [groups][R*S][kg][cg] */
} kn2row_state;

static ts_status kn2row_init(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  kn2row_state *st = calloc(1, sizeof *st);
  if (!st) return ts_error(TS_ERR_OOM, "kn2row: out of memory");
  pl->state = st;
  pl->state_bytes = (size_t)d->k * pl->cg * d->r * d->s * sizeof(float);
  st->wk = ts_malloc(pl->state_bytes);
  if (!st->wk) return ts_error(TS_ERR_OOM, "kn2row: out of memory for the packed weights");
  pl->workspace = ts__conv_align((size_t)pl->kg * d->h * d->w * sizeof(float));
  return TS_OK;
}

static ts_status kn2row_weights(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  kn2row_state *st = pl->state;
  const int rs = d->r * d->s;
  for (int g = 0; g < d->groups; g++)
    for (int t = 0; t < rs; t++)
      for (int k = 0; k < pl->kg; k++)
        for (int c = 0; c < pl->cg; c++)
          st->wk[(((size_t)g * rs + t) * pl->kg + k) * pl->cg + c] =
              pl->weights[(((size_t)g * pl->kg + k) * pl->cg + c) * rs + t];
  return TS_OK;
}

static ts_status kn2row_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const ts_conv_desc *d = &pl->d;
  const kn2row_state *st = pl->state;
  const int rs = d->r * d->s, P = pl->p, Q = pl->q, hw = d->h * d->w;
  const size_t pq = (size_t)P * Q;
  float *T = (float *)ws;
  for (int n = 0; n < d->n; n++)
    for (int g = 0; g < d->groups; g++) {
      const float *x = in + ((size_t)n * d->c + (size_t)g * pl->cg) * hw;
      float *o = out + ((size_t)n * d->k + (size_t)g * pl->kg) * pq;
      memset(o, 0, (size_t)pl->kg * pq * sizeof(float));
      for (int t = 0; t < rs; t++) {
        const int r = t / d->s, s = t % d->s;
        /* output (p, q) reads input (p - pad_top + r*dh, q - pad_left + s*dw): the valid box */
        const int dy = r * d->dilation_h - d->pad_top, dx = s * d->dilation_w - d->pad_left;
        const int p0 = dy < 0 ? -dy : 0, p1 = d->h - dy < P ? d->h - dy : P;
        const int q0 = dx < 0 ? -dx : 0, q1 = d->w - dx < Q ? d->w - dx : Q;
        if (p0 >= p1 || q0 >= q1) continue;
        TS_TRY(ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, pl->kg, hw, pl->cg, 1.0f,
                        st->wk + ((size_t)g * rs + t) * pl->kg * pl->cg, pl->cg, x, hw, 0.0f, T, hw));
#pragma omp parallel for num_threads(pl->threads) schedule(static)
        for (int k = 0; k < pl->kg; k++)
          for (int p = p0; p < p1; p++) {
            float *orow = o + k * pq + (size_t)p * Q;
            const float *trow = T + (size_t)k * hw + (size_t)(p + dy) * d->w + dx;
            for (int q = q0; q < q1; q++) orow[q] += trow[q];
          }
      }
#pragma omp parallel for num_threads(pl->threads) schedule(static)
      for (int k = 0; k < pl->kg; k++) ts__conv_epilogue(o + k * pq, 1, pq, pq, pl->bias + g * pl->kg + k, d->relu);
    }
  return TS_OK;
}

static void kn2row_destroy(ts_conv_plan *pl) {
  kn2row_state *st = pl->state;
  if (!st) return;
  ts_free(st->wk);
  free(st);
  pl->state = NULL;
}

const ts__conv_algo_ops ts__conv_ops_kn2row = {kn2row_check, kn2row_init, kn2row_weights, kn2row_execute,
                                               kn2row_destroy};

/* ---- implicit GEMM --------------------------------------------------------------------------- */

enum { IMPLICIT_NB = 128 }; /* output positions per panel: col [CRS][128] stays within L2 for CRS <= 2048 */

static int is_pointwise(const ts_conv_desc *d) {
  return d->r == 1 && d->s == 1 && !d->pad_top && !d->pad_bottom && !d->pad_left && !d->pad_right;
}

/* 1x1 over a batch of small images: the images' columns side by side, [cg][n pq], one GEMM with n
 * times the columns instead of n thin ones (N = 289 per image for Inception-v4's 17^2 layers),
 * then scattered back to NCHW. Batch 4, 1024 -> 384 / 192 at 17^2, 2 threads: 7-9% faster than
 * a GEMM per image, 4/4 interleaved pairs each (docs/notes/BENCHMARKS.md, issue 6). Above MERGE_PQ
 * columns per image the GEMMs are wide already and the copies would only add traffic. */
enum { MERGE_PQ = 1024 };

static int merged_pointwise(const ts_conv_plan *pl) {
  return is_pointwise(&pl->d) && pl->d.n > 1 && pl->p * pl->q < MERGE_PQ;
}

static ts_status implicit_init(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  if (merged_pointwise(pl))
    pl->workspace = ts__conv_align((size_t)pl->cg * d->n * pl->p * pl->q * sizeof(float)) +
                    ts__conv_align((size_t)pl->kg * d->n * pl->p * pl->q * sizeof(float));
  else if (is_pointwise(d))
    pl->workspace = (d->stride_h == 1 && d->stride_w == 1)
                        ? 0
                        : ts__conv_align((size_t)pl->cg * pl->p * pl->q * sizeof(float));
  else
    pl->workspace = (size_t)pl->threads * ts__conv_align((size_t)pl->cg * d->r * d->s * IMPLICIT_NB * sizeof(float));
  return TS_OK;
}

static ts_status implicit_pointwise(const ts_conv_plan *pl, const float *in, float *out, float *ws) {
  const ts_conv_desc *d = &pl->d;
  const int pq = pl->p * pl->q, hw = d->h * d->w;
  const int strided = d->stride_h != 1 || d->stride_w != 1;
  for (int n = 0; n < d->n; n++)
    for (int g = 0; g < d->groups; g++) {
      const float *x = in + ((size_t)n * d->c + (size_t)g * pl->cg) * hw;
      if (strided) {
#pragma omp parallel for num_threads(pl->threads) schedule(static)
        for (int c = 0; c < pl->cg; c++) ts__conv_lower_row(d, pl->q, x + (size_t)c * hw, 0, 0, 0, pq, ws + (size_t)c * pq);
        x = ws;
      }
      float *o = out + ((size_t)n * d->k + (size_t)g * pl->kg) * pq;
      TS_TRY(ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, pl->kg, pq, pl->cg, 1.0f,
                      pl->weights + (size_t)g * pl->kg * pl->cg, pl->cg, x, pq, 0.0f, o, pq));
#pragma omp parallel for num_threads(pl->threads) schedule(static)
      for (int k = 0; k < pl->kg; k++)
        ts__conv_epilogue(o + (size_t)k * pq, 1, pq, pq, pl->bias + g * pl->kg + k, d->relu);
    }
  return TS_OK;
}

static ts_status implicit_pointwise_merged(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const ts_conv_desc *d = &pl->d;
  const int pq = pl->p * pl->q, hw = d->h * d->w, nb = d->n;
  const int strided = d->stride_h != 1 || d->stride_w != 1;
  const size_t npq = (size_t)nb * pq;
  float *X = (float *)ws, *Y = (float *)(ws + ts__conv_align((size_t)pl->cg * npq * sizeof(float)));
  for (int g = 0; g < d->groups; g++) {
#pragma omp parallel for collapse(2) num_threads(pl->threads) schedule(static)
    for (int c = 0; c < pl->cg; c++)
      for (int n = 0; n < nb; n++) {
        const float *x = in + ((size_t)n * d->c + (size_t)g * pl->cg + c) * hw;
        float *dst = X + (size_t)c * npq + (size_t)n * pq;
        if (strided) ts__conv_lower_row(d, pl->q, x, 0, 0, 0, pq, dst);
        else memcpy(dst, x, (size_t)pq * sizeof(float));
      }
    TS_TRY(ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, pl->kg, (int64_t)npq, pl->cg, 1.0f,
                    pl->weights + (size_t)g * pl->kg * pl->cg, pl->cg, X, (int64_t)npq, 0.0f, Y, (int64_t)npq));
#pragma omp parallel for collapse(2) num_threads(pl->threads) schedule(static)
    for (int n = 0; n < nb; n++)
      for (int k = 0; k < pl->kg; k++) {
        float *o = out + ((size_t)n * d->k + (size_t)g * pl->kg + k) * pq;
        memcpy(o, Y + (size_t)k * npq + (size_t)n * pq, (size_t)pq * sizeof(float));
        ts__conv_epilogue(o, 1, pq, pq, pl->bias + g * pl->kg + k, d->relu);
      }
  }
  return TS_OK;
}

static ts_status implicit_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const ts_conv_desc *d = &pl->d;
  if (merged_pointwise(pl)) return implicit_pointwise_merged(pl, in, out, ws);
  if (is_pointwise(d)) return implicit_pointwise(pl, in, out, (float *)ws);
  const int rs = d->r * d->s, crs = pl->cg * rs, pq = pl->p * pl->q, hw = d->h * d->w;
  const int panels = (pq + IMPLICIT_NB - 1) / IMPLICIT_NB, tasks = d->n * d->groups * panels;
  const size_t slice = ts__conv_align((size_t)crs * IMPLICIT_NB * sizeof(float));
  int failed = 0;
#pragma omp parallel for num_threads(pl->threads) schedule(dynamic)
  for (int t = 0; t < tasks; t++) {
    const int n = t / (d->groups * panels), g = (t / panels) % d->groups, j0 = (t % panels) * IMPLICIT_NB;
    const int nb = pq - j0 < IMPLICIT_NB ? pq - j0 : IMPLICIT_NB;
    float *col = (float *)(ws + (size_t)omp_get_thread_num() * slice);
    const float *x = in + ((size_t)n * d->c + (size_t)g * pl->cg) * hw;
    for (int row = 0; row < crs; row++)
      ts__conv_lower_row(d, pl->q, x + (size_t)(row / rs) * hw, (row % rs) / d->s, row % d->s, j0, nb, col + (size_t)row * nb);
    float *o = out + ((size_t)n * d->k + (size_t)g * pl->kg) * pq + j0;
    /* inside this parallel region ts_sgemm runs on the calling thread alone */
    if (ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, pl->kg, nb, crs, 1.0f, pl->weights + (size_t)g * pl->kg * crs,
                 crs, col, nb, 0.0f, o, pq) != TS_OK) {
#pragma omp atomic write
      failed = 1;
    }
    ts__conv_epilogue(o, pl->kg, nb, pq, pl->bias + g * pl->kg, d->relu);
  }
  if (failed) return ts_error(TS_ERR_INTERNAL, "implicit: ts_sgemm failed on a panel");
  return TS_OK;
}

const ts__conv_algo_ops ts__conv_ops_implicit = {NULL, implicit_init, NULL, implicit_execute, NULL};
