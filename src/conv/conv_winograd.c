/* Winograd convolution F(m x m, 3 x 3), m = 2 or 4, tile size a = m + 2 (Lavin & Gray 2016):
 *   Y = A^T [ (G g G^T) (.) (B^T d B) ] A   per a x a input tile d (stride m) and 3x3 kernel g.
 * The transform matrices are built at plan time (in double) by the Toom-Cook construction from
 * interpolation points a_0..a_{a-2} plus infinity, with M(x) = prod (x - a_j), f_j = prod_{l!=j} (a_j - a_l):
 *   A^T[i][j] = a_j^i (last column: [i == m-1]),   G[j][k] = a_j^k / f_j (last row: [k == 2]),
 *   B^T[j][.] = coefficients of M(x) / (x - a_j) (last row: coefficients of M(x)).
 * Points: F(2,3) {0, 1, -1}; F(4,3) {0, 1, -1, 1/2, -2} (the mixed set Barabasz et al. 2020 found
 * most accurate). Measured on tests/test_conv.c's shapes, worst max|err| / (u max A): 11-13 for
 * this set, 22 for the usual {0, +-1, +-2}, 34 for {0, +-1, +-1/2} (scalar transforms).
 * Data flow per group and block of up to TILE_BLOCK tiles (T tiles over the batch):
 *   V [a*a][cg][T] = B^T d B;   M[xi] [kg][T] = U[xi] [kg][cg] x V[xi]  (a*a ts_sgemm calls);
 *   out = A^T M A (+ bias, ReLU), clipped at the output edge. U [groups][a*a][kg][cg] is made once.
 * That is the scalar level's path; a level whose table has wino_setup (conv_kern.c: AVX2,
 * conv_winograd_cl_avx2.c; AVX-512, conv_winograd_*avx512.c) runs its own schedules on U packed in
 * the panels its setup chose (ts__wino_geom.upw). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "tessera/hwinfo.h"
#include "tessera/kernels.h"

static size_t g_l2 = (size_t)1 << 20;
static pthread_once_t g_l2_once = PTHREAD_ONCE_INIT;
static void read_l2(void) {
  int64_t l2 = 0;
  ts_hwinfo_cache_sizes(NULL, &l2, NULL);
  if (l2 > 0) g_l2 = (size_t)l2;
}
size_t ts__conv_l2_bytes(void) {
  pthread_once(&g_l2_once, read_l2);
  return g_l2;
}

enum { TILE_BLOCK = 512, AMAX = 6 };

typedef struct wino_state {
  const ts__conv_kern *k; /* the plan's kernel table */
  int m, a, th, tw, rows, rpb, tb; /* tiles th x tw per image; rows = N * th tile rows, rpb per block */
  float BT[AMAX][AMAX], G[AMAX][3], AT[4][AMAX];
  int kgp;      /* kg rounded up to the table's wino_kalign */
  int upw;      /* U's panel width (ts__wino_geom.upw): 1 on the scalar path */
  float *U;     /* [groups][a*a][kgp / upw][cg][upw] (last panel kgp % upw wide): [groups][a*a][kg][cg]
                   on the scalar path */
  ts__wino_geom geom; /* the vector levels' schedule */
} wino_state;

static ts_status wino_check(const ts_conv_desc *d, const char *name) {
  if (d->r != 3 || d->s != 3 || d->stride_h != 1 || d->stride_w != 1 || d->dilation_h != 1 || d->dilation_w != 1)
    return ts_error(TS_ERR_UNSUPPORTED,
                    "%s: needs a 3x3 kernel with stride 1 and dilation 1, got %dx%d (stride %dx%d, dilation %dx%d)",
                    name, d->r, d->s, d->stride_h, d->stride_w, d->dilation_h, d->dilation_w);
  return TS_OK;
}
static ts_status wino_check_f2(const ts_conv_desc *d) { return wino_check(d, "winograd_f2"); }
static ts_status wino_check_f4(const ts_conv_desc *d) { return wino_check(d, "winograd_f4"); }

/* poly *= (x - root); poly has `deg + 1` coefficients in increasing powers. */
static void poly_mul_root(double *poly, int deg, double root) {
  for (int t = deg + 1; t >= 0; t--) poly[t] = (t ? poly[t - 1] : 0.0) - root * (t <= deg ? poly[t] : 0.0);
}

static void wino_matrices(wino_state *st) {
  static const double pts2[] = {0, 1, -1}, pts4[] = {0, 1, -1, 0.5, -2};
  const double *pt = st->m == 2 ? pts2 : pts4;
  const int a = st->a, m = st->m, nf = a - 1;
  memset(st->BT, 0, sizeof st->BT), memset(st->G, 0, sizeof st->G), memset(st->AT, 0, sizeof st->AT);
  for (int j = 0; j < nf; j++) {
    double f = 1, poly[AMAX + 1] = {1};
    int deg = 0;
    for (int l = 0; l < nf; l++)
      if (l != j) f *= pt[j] - pt[l], poly_mul_root(poly, deg++, pt[l]);
    for (int t = 0; t < a; t++) st->BT[j][t] = (float)(t <= deg ? poly[t] : 0.0);
    double pw = 1;
    for (int k = 0; k < 3; k++, pw *= pt[j]) st->G[j][k] = (float)(pw / f);
    pw = 1;
    for (int i = 0; i < m; i++, pw *= pt[j]) st->AT[i][j] = (float)pw;
  }
  double poly[AMAX + 1] = {1};
  for (int l = 0; l < nf; l++) poly_mul_root(poly, l, pt[l]);
  for (int t = 0; t < a; t++) st->BT[nf][t] = (float)poly[t];
  st->G[nf][2] = 1.0f;
  st->AT[m - 1][nf] = 1.0f;
}

static ts_status wino_init(ts_conv_plan *pl, int m) {
  const ts_conv_desc *d = &pl->d;
  wino_state *st = calloc(1, sizeof *st);
  if (!st) return ts_error(TS_ERR_OOM, "winograd: out of memory");
  pl->state = st;
  st->m = m, st->a = m + 2;
  st->k = pl->kern;
  wino_matrices(st);
  st->th = (pl->p + m - 1) / m, st->tw = (pl->q + m - 1) / m;
  st->rows = d->n * st->th;
  st->rpb = TILE_BLOCK / st->tw < 1 ? 1 : TILE_BLOCK / st->tw; /* whole tile rows, about TILE_BLOCK tiles */
  if (st->rpb > st->rows) st->rpb = st->rows;
  st->tb = st->rpb * st->tw;
  const size_t aa = (size_t)st->a * st->a;
  st->kgp = (pl->kg + st->k->wino_kalign - 1) / st->k->wino_kalign * st->k->wino_kalign;
  st->upw = 1;
  pl->state_bytes = aa * d->groups * st->kgp * pl->cg * sizeof(float);
  st->U = ts_malloc(pl->state_bytes);
  if (!st->U) return ts_error(TS_ERR_OOM, "winograd: out of memory for the transformed weights");
  pl->workspace = ts__conv_align(aa * pl->cg * st->tb * sizeof(float)) + ts__conv_align(aa * pl->kg * st->tb * sizeof(float));
  if (st->k->wino_setup) {
    ts__wino_geom *g = &st->geom;
    *g = (ts__wino_geom){.BT = &st->BT[0][0], .AT = &st->AT[0][0], .A = st->a, .M = m, .N = d->n, .C = d->c,
                         .H = d->h, .W = d->w, .P = pl->p, .Q = pl->q, .K = d->k, .pad_top = d->pad_top,
                         .pad_left = d->pad_left, .th = st->th, .tw = st->tw, .cg = pl->cg, .kg = pl->kg,
                         .groups = d->groups, .threads = pl->threads, .kgp = st->kgp, .U = st->U, .bias = pl->bias,
                         .relu = d->relu, .force = pl->opts.wino_schedule};
    st->k->wino_setup(g);
    st->upw = g->upw;
    pl->workspace = g->workspace;
  }
  return TS_OK;
}
static ts_status wino_init_f2(ts_conv_plan *pl) { return wino_init(pl, 2); }
static ts_status wino_init_f4(ts_conv_plan *pl) { return wino_init(pl, 4); }

static ts_status wino_weights(ts_conv_plan *pl) {
  const ts_conv_desc *d = &pl->d;
  wino_state *st = pl->state;
  const int a = st->a, aa = a * a;
  memset(st->U, 0, pl->state_bytes); /* the packed rows past kg stay zero */
  for (int k = 0; k < d->k; k++)
    for (int c = 0; c < pl->cg; c++) {
      const float *g = pl->weights + ((size_t)k * pl->cg + c) * 9;
      double tmp[AMAX][3];
      for (int i = 0; i < a; i++)
        for (int l = 0; l < 3; l++) tmp[i][l] = st->G[i][0] * (double)g[l] + st->G[i][1] * (double)g[3 + l] + st->G[i][2] * (double)g[6 + l];
      const int grp = k / pl->kg, kl = k % pl->kg;
      for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
          const size_t xi = (size_t)grp * aa + i * a + j;
          const int kp = kl / st->upw * st->upw, pw = st->kgp - kp < st->upw ? st->kgp - kp : st->upw; /* panel */
          const size_t at = (xi * st->kgp + kp) * pl->cg + (size_t)c * pw + kl - kp;
          st->U[at] = (float)(tmp[i][0] * st->G[j][0] + tmp[i][1] * st->G[j][1] + tmp[i][2] * st->G[j][2]);
        }
    }
  return TS_OK;
}

/* V[xi][c][t] = (B^T d B)[xi] for one tile d read from plane x (zero outside). A is 4 or 6. */
static inline __attribute__((always_inline)) void input_tile(const wino_state *st, const ts_conv_desc *d,
                                                              const float *x, int y0, int x0, float *v, size_t vstride,
                                                              const int A) {
  float t[AMAX][AMAX], u[AMAX][AMAX];
  for (int i = 0; i < A; i++)
    for (int j = 0; j < A; j++) {
      const int ih = y0 + i, iw = x0 + j;
      t[i][j] = (ih >= 0 && ih < d->h && iw >= 0 && iw < d->w) ? x[(size_t)ih * d->w + iw] : 0.0f;
    }
  for (int i = 0; i < A; i++)
    for (int j = 0; j < A; j++) {
      float s = 0;
      for (int l = 0; l < A; l++) s += st->BT[i][l] * t[l][j];
      u[i][j] = s;
    }
  for (int i = 0; i < A; i++)
    for (int j = 0; j < A; j++) {
      float s = 0;
      for (int l = 0; l < A; l++) s += u[i][l] * st->BT[j][l];
      v[(size_t)(i * A + j) * vstride] = s;
    }
}

/* out tile = A^T M A from M[xi][k][t] (stride mstride between xi), clipped to P x Q. */
static inline __attribute__((always_inline)) void output_tile(const wino_state *st, const float *mm, size_t mstride,
                                                               float *o, int P, int Q, int y0, int x0, float bias,
                                                               int relu, const int A, const int M) {
  float t[AMAX][AMAX], u[4][AMAX];
  for (int i = 0; i < A * A; i++) t[i / A][i % A] = mm[(size_t)i * mstride];
  for (int i = 0; i < M; i++)
    for (int j = 0; j < A; j++) {
      float s = 0;
      for (int l = 0; l < A; l++) s += st->AT[i][l] * t[l][j];
      u[i][j] = s;
    }
  for (int i = 0; i < M && y0 + i < P; i++)
    for (int j = 0; j < M && x0 + j < Q; j++) {
      float s = bias;
      for (int l = 0; l < A; l++) s += u[i][l] * st->AT[j][l];
      o[(size_t)(y0 + i) * Q + x0 + j] = relu && s < 0.0f ? 0.0f : s;
    }
}

static ts_status wino_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const ts_conv_desc *d = &pl->d;
  const wino_state *st = pl->state;
  if (st->k->wino_execute) return st->k->wino_execute(&st->geom, in, out, ws);
  const int a = st->a, aa = a * a, m = st->m, cg = pl->cg, kg = pl->kg, tw = st->tw;
  const size_t pq = (size_t)pl->p * pl->q;
  float *V = (float *)ws, *Mb = (float *)(ws + ts__conv_align((size_t)aa * cg * st->tb * sizeof(float)));
  for (int g = 0; g < d->groups; g++)
    for (int r0 = 0; r0 < st->rows; r0 += st->rpb) {
      const int rows = st->rows - r0 < st->rpb ? st->rows - r0 : st->rpb, nb = rows * tw;
      /* V layout [xi][c][nb] */
#pragma omp parallel for num_threads(pl->threads) schedule(static) collapse(2)
      for (int c = 0; c < cg; c++)
        for (int j = 0; j < nb; j++) {
          const int R = r0 + j / tw, n = R / st->th, ty = R % st->th, tx = j % tw;
          const float *x = in + ((size_t)n * d->c + (size_t)g * cg + c) * d->h * d->w;
          float *v = V + (size_t)c * nb + j;
          const size_t vs = (size_t)cg * nb;
          if (a == 4) input_tile(st, d, x, ty * m - d->pad_top, tx * m - d->pad_left, v, vs, 4);
          else input_tile(st, d, x, ty * m - d->pad_top, tx * m - d->pad_left, v, vs, 6);
        }
      /* the a*a GEMMs in parallel, each on one thread (ts_sgemm inside a parallel region): they
       * are small (kg x nb x cg) and many, so this beats splitting each one over the threads */
      int failed = 0;
#pragma omp parallel for num_threads(pl->threads) schedule(dynamic)
      for (int xi = 0; xi < aa; xi++)
        if (ts_sgemm(pl->ctx, TS_NO_TRANS, TS_NO_TRANS, kg, nb, cg, 1.0f, st->U + ((size_t)g * aa + xi) * kg * cg, cg,
                     V + (size_t)xi * cg * nb, nb, 0.0f, Mb + (size_t)xi * kg * nb, nb) != TS_OK) {
#pragma omp atomic write
          failed = 1;
        }
      if (failed) return ts_error(TS_ERR_INTERNAL, "winograd: ts_sgemm failed");
#pragma omp parallel for num_threads(pl->threads) schedule(static) collapse(2)
      for (int k = 0; k < kg; k++)
        for (int j = 0; j < nb; j++) {
          const int R = r0 + j / tw, n = R / st->th, ty = R % st->th, tx = j % tw;
          const int kk = g * kg + k;
          float *o = out + ((size_t)n * d->k + kk) * pq;
          const float *mm = Mb + (size_t)k * nb + j;
          const size_t ms = (size_t)kg * nb;
          if (a == 4) output_tile(st, mm, ms, o, pl->p, pl->q, ty * m, tx * m, pl->bias[kk], d->relu, 4, 2);
          else output_tile(st, mm, ms, o, pl->p, pl->q, ty * m, tx * m, pl->bias[kk], d->relu, 6, 4);
        }
    }
  return TS_OK;
}

static void wino_destroy(ts_conv_plan *pl) {
  wino_state *st = pl->state;
  if (!st) return;
  ts_free(st->U);
  free(st);
  pl->state = NULL;
}

const ts__conv_algo_ops ts__conv_ops_winograd_f2 = {wino_check_f2, wino_init_f2, wino_weights, wino_execute, wino_destroy};
const ts__conv_algo_ops ts__conv_ops_winograd_f4 = {wino_check_f4, wino_init_f4, wino_weights, wino_execute, wino_destroy};
