/* AVX-512 Winograd F(m x m, 3 x 3): transforms of 16 consecutive tiles of one tile row per vector
 * (lane l = tile tx0 + l), without gathers or scatters, the element-wise stage as register-tiled
 * GEMMs, and the two schedules that run them.
 * Transforms:
 *   input  the tile row's A input rows are read as contiguous vectors (16 tiles cover 16 m
 *          columns, plus one vector for the A - m columns of overlap); the vertical 1-D
 *          transform B^T runs on those raw row vectors (it does not care about columns), then
 *          each transformed row is split into its A column phases (phase j, lane l = column
 *          m l + j: two-source permutes) and the horizontal transform runs lane-wise;
 *   output the vertical A^T on the A*A matrices' rows, the horizontal A^T lane-wise, then the m
 *          column phases of each output row are interleaved back into contiguous vectors and
 *          stored with a mask at the right edge.
 * m = 2 (F(2,3), A = 4) or m = 4 (F(4,3), A = 6). Partial vectors at the image border go through
 * a zeroed stack buffer, so no load ever touches memory outside the input.
 * Element-wise stage, per matrix xi: M[k][t] = sum_c U[c][k] V[c][t], register tile Mr output
 * channels (broadcast U entries; U packed in blocks of 16 channels [k / 16][c][16], so a tile
 * streams it contiguously) x NV vectors of 16 tiles (V loads):
 * (Mr, NV) = (8, 3), (8, 2) or (16, 1): 24, 16 or 16 accumulators, at most 17 loads per 16 FMAs.
 * Schedules (ts__wino_setup_avx512), besides the channel-lane one of conv_winograd_cl_avx512.c
 * (the default but for F(2,3) on rows of 96+ tiles):
 *   staged  blocks of whole tile rows over the batch (about 512 tiles): every thread transforms a
 *           share of the block's inputs into V [A*A][cg][ld], then the A*A GEMMs run split over
 *           (xi, 64-channel slices), then the output transforms; U is read once per block. For
 *           small images and wide layers (few tiles, U of megabytes).
 *   fused   per thread, one chunk of up to 48 tiles of a tile row at a time: its V [A*A][cg][ldb]
 *           (kept in L2), then per k block of kb channels the A*A GEMMs into M [A*A][kb][ldb] and
 *           the output transform; no barriers, V and M never leave the core's caches, U is
 *           re-read per chunk (from L2/L3). For large images with U up to a few MB. */
#include <assert.h>
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd_avx512.h" /* ts__transpose16 */
#include "conv/conv_internal.h"
#include "conv/conv_wino_avx512_inl.h"

enum { NVMAX = 5 };

/* 16 floats of row xr starting at column col (zero outside [0, W)). */
static inline __m512 load_cols(const float *xr, int col, int W) {
  if (col >= 0 && col + 16 <= W) return _mm512_loadu_ps(xr + col);
  const int lo = col < 0 ? -col : 0, hi = W - col < 16 ? W - col : 16;
  if (hi <= lo) return _mm512_setzero_ps();
  float buf[16] __attribute__((aligned(64))) = {0};
  memcpy(buf + lo, xr + col + lo, (size_t)(hi - lo) * sizeof(float));
  return _mm512_load_ps(buf);
}

/* Phase j of m-strided columns: ph[j] lane l = element m l + j of the concatenation v[0..m]. */
static inline void phases(const __m512 *v, __m512 *ph, const int m, const int A) {
  if (m == 4) {
    for (int p = 0; p < 4; p++) {
      /* lanes 0..7 from v0|v1 (elements 4l + p), lanes 8..15 from v2|v3 */
      const __m512i idx = _mm512_setr_epi32(p, 4 + p, 8 + p, 12 + p, 16 + p, 20 + p, 24 + p, 28 + p, p, 4 + p, 8 + p,
                                            12 + p, 16 + p, 20 + p, 24 + p, 28 + p);
      ph[p] = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(v[0], idx, v[1]), _mm512_permutex2var_ps(v[2], idx, v[3]));
    }
  } else {
    for (int p = 0; p < 2; p++) {
      const __m512i idx = _mm512_setr_epi32(p, 2 + p, 4 + p, 6 + p, 8 + p, 10 + p, 12 + p, 14 + p, 16 + p, 18 + p,
                                            20 + p, 22 + p, 24 + p, 26 + p, 28 + p, 30 + p);
      ph[p] = _mm512_permutex2var_ps(v[0], idx, v[1]);
    }
  }
  /* phases m..A-1: phase j - m shifted by one tile, the last lane from the vector after the group */
  for (int j = m; j < A; j++) {
    const int e = 16 + j - m;
    const __m512i idx = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, e);
    ph[j] = _mm512_permutex2var_ps(ph[j - m], idx, v[m]);
  }
}

static inline __attribute__((always_inline)) void input_impl(const ts__wino_geom *a, int grp, int c, int R, int tx0,
                                                              int cnt, float *dst, size_t xs, const float *in,
                                                              const int A, const int m) {
  const int n = R / a->th, ty = R % a->th, nv = m + 1, W = a->W;
  const float *x = in + ((size_t)n * a->C + (size_t)grp * a->cg + c) * a->H * W;
  const int y0 = ty * m - a->pad_top, x0 = tx0 * m - a->pad_left;
  __m512 tmp[AM][NVMAX];
  for (int v = 0; v < nv; v++) { /* vertical transform of the raw rows */
    __m512 rv[AM];
    for (int l = 0; l < A; l++) {
      const int y = y0 + l;
      rv[l] = y >= 0 && y < a->H ? load_cols(x + (size_t)y * W, x0 + 16 * v, W) : _mm512_setzero_ps();
    }
#pragma GCC unroll 6
    for (int i = 0; i < A; i++) tmp[i][v] = comb(A == 6 ? BT4[i] : BT2[i], rv, A);
  }
  const __mmask16 live = lanes_below(cnt);
  for (int i = 0; i < A; i++) { /* horizontal transform per column phase */
    __m512 ph[AM];
    phases(tmp[i], ph, m, A);
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) _mm512_mask_storeu_ps(dst + (size_t)(i * A + j) * xs, live, comb(A == 6 ? BT4[j] : BT2[j], ph, A));
  }
}

/* Input channel c of group grp, tiles (R, tx0 .. tx0 + cnt - 1), cnt <= 16 -> dst[xi * xs + lane]. */
static void input16(const ts__wino_geom *a, int grp, int c, int R, int tx0, int cnt, float *dst, size_t xs,
                    const float *in) {
  if (a->A == 6) input_impl(a, grp, c, R, tx0, cnt, dst, xs, in, 6, 4);
  else input_impl(a, grp, c, R, tx0, cnt, dst, xs, in, 4, 2);
}

/* q[v] lane e = o[e % m][m v + e / m]: the m column phases interleaved into m vectors. */
static inline void interleave(const __m512 *o, __m512 *q, const int m) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  if (m == 2) {
    q[0] = _mm512_permutex2var_ps(o[0], lo, o[1]);
    q[1] = _mm512_permutex2var_ps(o[0], hi, o[1]);
    return;
  }
  /* pairs (o0, o1) and (o2, o3) per tile, then pairs of pairs as 64-bit elements */
  const __m512d a_lo = _mm512_castps_pd(_mm512_permutex2var_ps(o[0], lo, o[1]));
  const __m512d a_hi = _mm512_castps_pd(_mm512_permutex2var_ps(o[0], hi, o[1]));
  const __m512d b_lo = _mm512_castps_pd(_mm512_permutex2var_ps(o[2], lo, o[3]));
  const __m512d b_hi = _mm512_castps_pd(_mm512_permutex2var_ps(o[2], hi, o[3]));
  const __m512i p0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), p1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  q[0] = _mm512_castpd_ps(_mm512_permutex2var_pd(a_lo, p0, b_lo));
  q[1] = _mm512_castpd_ps(_mm512_permutex2var_pd(a_lo, p1, b_lo));
  q[2] = _mm512_castpd_ps(_mm512_permutex2var_pd(a_hi, p0, b_hi));
  q[3] = _mm512_castpd_ps(_mm512_permutex2var_pd(a_hi, p1, b_hi));
}

static inline __attribute__((always_inline)) void output_impl(const ts__wino_geom *a, int grp, int k, int R, int tx0,
                                                               int cnt, const float *mm, size_t xs, float *out,
                                                               const int A, const int m) {
  const int n = R / a->th, ty = R % a->th, kk = grp * a->kg + k;
  const __mmask16 live = lanes_below(cnt);
  __m512 s[4][AM];
  for (int j = 0; j < A; j++) { /* vertical A^T on column j of the A x A matrices */
    __m512 t[AM];
    for (int l = 0; l < A; l++) t[l] = _mm512_maskz_loadu_ps(live, mm + (size_t)(l * A + j) * xs);
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) s[i][j] = comb(A == 6 ? AT4[i] : AT2[i], t, A);
  }
  const __m512 bias = _mm512_set1_ps(a->bias[kk]);
  float *o = out + ((size_t)n * a->K + kk) * a->P * a->Q;
  for (int i = 0; i < m; i++) {
    const int y = ty * m + i;
    if (y >= a->P) break;
    __m512 oj[4], q[4];
    for (int j = 0; j < m; j++) {
      __m512 v = _mm512_add_ps(comb(A == 6 ? AT4[j] : AT2[j], s[i], A), bias);
      oj[j] = a->relu ? _mm512_max_ps(_mm512_setzero_ps(), v) : v; /* NaN stays NaN */
    }
    interleave(oj, q, m);
    for (int v = 0; v < m; v++) {
      const int col = tx0 * m + 16 * v;
      if (col >= a->Q) break;
      _mm512_mask_storeu_ps(o + (size_t)y * a->Q + col, lanes_below(a->Q - col), q[v]);
    }
  }
}

/* Output channel k of group grp from mm[xi * xs + lane], tiles (R, tx0 .. tx0 + cnt - 1). */
static void output16(const ts__wino_geom *a, int grp, int k, int R, int tx0, int cnt, const float *mm, size_t xs,
                     float *out) {
  if (a->A == 6) output_impl(a, grp, k, R, tx0, cnt, mm, xs, out, 6, 4);
  else output_impl(a, grp, k, R, tx0, cnt, mm, xs, out, 4, 2);
}

/* ---- element-wise stage --------------------------------------------------------------------- */

static inline __attribute__((always_inline)) void gemm_tile(const float *U, const float *V, int ldv, float *M, int ldm,
                                                             int cg, int kend, int k, int t, const int MR, const int NV) {
  __m512 acc[16][3];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NV; j++) acc[i][j] = _mm512_setzero_ps();
  const float *u = U + (size_t)(k / 16) * cg * 16 + k % 16, *v = V + t;
  for (int c = 0; c < cg; c++, u += 16, v += ldv) {
    __m512 x[3];
    for (int j = 0; j < NV; j++) x[j] = _mm512_loadu_ps(v + 16 * j);
    for (int i = 0; i < MR; i++) {
      const __m512 w = _mm512_set1_ps(u[i]);
      for (int j = 0; j < NV; j++) acc[i][j] = _mm512_fmadd_ps(w, x[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR && k + i < kend; i++)
    for (int j = 0; j < NV; j++) _mm512_storeu_ps(M + (size_t)i * ldm + t + 16 * j, acc[i][j]);
}

/* M[k - k0][t] for k in [k0, k1), t in [0, nt): U packed [k / 16][cg][16], V [cg][ldv] (rows
 * readable up to nt rounded up to 16), M rows of ldm. */
static void gemm(const float *U, const float *V, int ldv, float *M, int ldm, int cg, int k0, int k1, int nt) {
  const int full = nt / 48 * 48, rest = (nt - full + 15) / 16;
  for (int k = k0; k < k1; k += rest == 1 && !full ? 16 : 8) {
    float *mk = M + (size_t)(k - k0) * ldm;
    for (int t = 0; t < full; t += 48) gemm_tile(U, V, ldv, mk, ldm, cg, k1, k, t, 8, 3);
    if (rest == 3) gemm_tile(U, V, ldv, mk, ldm, cg, k1, k, full, 8, 3);
    else if (rest == 2) gemm_tile(U, V, ldv, mk, ldm, cg, k1, k, full, 8, 2);
    else if (rest == 1 && full) gemm_tile(U, V, ldv, mk, ldm, cg, k1, k, full, 8, 1);
    else if (rest == 1) gemm_tile(U, V, ldv, mk, ldm, cg, k1, k, full, 16, 1);
  }
}

/* Lanes = 16 output channels for layers with few tiles (nt < 96), where 16-tile vectors would be
 * mostly empty: acc[j] (j < NT tiles, broadcast V entries) accumulates the 16 channels of
 * U's block (one vector load per input channel), then the 16 x NT block is transposed in registers
 * into M's rows. NT = 12..16 tiles per block keeps 12+ independent accumulators. */
static void gemm_klanes(const float *U, const float *V, int ldv, float *M, int ldm, int cg, int k0, int k1, int nt) {
  const int nblk = (nt + 15) / 16, per = (nt + nblk - 1) / nblk;
  for (int k = k0; k < k1; k += 16) {
    const float *ub = U + (size_t)(k / 16) * cg * 16;
    for (int t0 = 0; t0 < nt; t0 += per) {
      const int n = nt - t0 < per ? nt - t0 : per;
      __m512 acc[16];
      for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
      const float *v = V + t0;
      for (int c = 0; c < cg; c++, v += ldv) {
        const __m512 u = _mm512_loadu_ps(ub + (size_t)c * 16);
        for (int j = 0; j < 16; j++)
          if (j < n) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(v[j]), u, acc[j]);
      }
      /* acc[j] lane i = M[k + i][t0 + j]; rows with k + i < k1 are stored */
      ts__transpose16(acc);
      const __mmask16 cols = lanes_below(n);
      for (int i = 0; i < 16 && k + i < k1; i++) _mm512_mask_storeu_ps(M + (size_t)(k + i - k0) * ldm + t0, cols, acc[i]);
    }
  }
}

/* ---- schedules ------------------------------------------------------------------------------ */

/* The channel-lane schedule (conv_winograd_cl_avx512.c) is the default: measured on every 3x3
 * layer of VGG16, ResNet-101 and Inception-v4 it was faster than these two tile-lane schedules
 * (1.2-3x where the tile rows are short, 1.1-1.25x on 56-224 wide F(4,3) layers), except F(2,3)
 * on the widest rows (224: fused 12.7 vs 13.8 ms), hence CLANE_TW_F2 (docs/notes/BENCHMARKS.md, issue 6). */
enum { STAGED_TILES = 512, FUSED_CHUNK = 48, FUSED_M_BYTES = 160 << 10, KSLICE = 64, CLANE_TW_F2 = 96 };

static size_t al64(size_t b) { return (b + 63) / 64 * 64; }

void ts__wino_setup_avx512(ts__wino_geom *g) {
  for (int i = 0; i < g->A; i++) /* the plan's matrices are the constants folded in here */
    for (int j = 0; j < g->A; j++) {
      assert(g->BT[i * AM + j] == (g->A == 6 ? BT4 : BT2)[i][j]);
      assert(i >= g->M || g->AT[i * AM + j] == (g->A == 6 ? AT4 : AT2)[i][j]);
    }
  const size_t aa = (size_t)g->A * g->A, ubytes = aa * g->cg * g->kgp * sizeof(float);
  /* a schedule forced by the plan's options (ts__conv_plan_opts: experiments, tests) */
  const int force = g->force;
  g->clpriv = force == TS__WINO_SCHED_CLANE_PRIVATE ? 1 : force == TS__WINO_SCHED_CLANE_SHARED ? 0 : -1;
  if (force == TS__WINO_SCHED_FUSED) g->sched = TS__WINO_FUSED;
  else if (force == TS__WINO_SCHED_STAGED) g->sched = TS__WINO_STAGED;
  else if (force == TS__WINO_SCHED_CLANE || g->clpriv >= 0) g->sched = TS__WINO_CLANE;
  else
    g->sched = g->A == 6 || g->tw < CLANE_TW_F2 ? TS__WINO_CLANE
               : ubytes <= 4 * ts__conv_l2_bytes() ? TS__WINO_FUSED /* U up to 4x L2: 4 MiB on a 1 MiB L2 */
                                                   : TS__WINO_STAGED;
  g->upw = 16; /* U's panels of 16 channels (conv_winograd.c packs them); the clane setup widens them */
  if (g->sched == TS__WINO_CLANE) {
    ts__wino_cl_setup(g);
  } else if (g->sched == TS__WINO_FUSED) {
    g->nck = (g->tw + FUSED_CHUNK - 1) / FUSED_CHUNK;
    const int per = (g->tw + g->nck - 1) / g->nck;
    g->ldb = (per + 15) / 16 * 16;
    if (g->ldb > FUSED_CHUNK) g->ldb = FUSED_CHUNK;
    g->nck = (g->tw + g->ldb - 1) / g->ldb;
    g->kb = (int)(FUSED_M_BYTES / (aa * g->ldb * sizeof(float))) / 16 * 16;
    if (g->kb < 16) g->kb = 16;
    if (g->kb > g->kg) g->kb = g->kg;
    g->workspace = (size_t)g->threads * (al64(aa * g->cg * g->ldb * sizeof(float)) + al64(aa * g->kb * g->ldb * sizeof(float)));
  } else {
    const int rows = g->N * g->th;
    g->rpb = STAGED_TILES / g->tw < 1 ? 1 : STAGED_TILES / g->tw;
    if (g->rpb > rows) g->rpb = rows;
    g->ld = (g->rpb * g->tw + 15) / 16 * 16;
    g->workspace = al64(aa * g->cg * g->ld * sizeof(float)) + al64(aa * g->kg * g->ld * sizeof(float));
  }
}

static void staged(const ts__wino_geom *a, int grp, const float *in, float *out, unsigned char *ws) {
  const int aa = a->A * a->A, cg = a->cg, kg = a->kg, tw = a->tw, ng = (tw + 15) / 16, ld = a->ld;
  const int rows_all = a->N * a->th, nks = (kg + KSLICE - 1) / KSLICE;
  float *V = (float *)ws, *Mb = (float *)(ws + al64((size_t)aa * cg * ld * sizeof(float)));
  const float *U = a->U + (size_t)grp * aa * cg * a->kgp;
  for (int r0 = 0; r0 < rows_all; r0 += a->rpb) {
    const int rows = rows_all - r0 < a->rpb ? rows_all - r0 : a->rpb, nb = rows * tw;
#pragma omp parallel num_threads(a->threads)
    {
#pragma omp for schedule(static) collapse(3)
      for (int c = 0; c < cg; c++)
        for (int row = 0; row < rows; row++)
          for (int gi = 0; gi < ng; gi++)
            input16(a, grp, c, r0 + row, 16 * gi, tw - 16 * gi < 16 ? tw - 16 * gi : 16,
                    V + (size_t)c * ld + (size_t)row * tw + 16 * gi, (size_t)cg * ld, in);
#pragma omp for schedule(dynamic) collapse(2)
      for (int xi = 0; xi < aa; xi++)
        for (int ks = 0; ks < nks; ks++) {
          const int k0 = ks * KSLICE, k1 = k0 + KSLICE < kg ? k0 + KSLICE : kg;
          (nb < 96 ? gemm_klanes : gemm)(U + (size_t)xi * cg * a->kgp, V + (size_t)xi * cg * ld, ld,
                                         Mb + ((size_t)xi * kg + k0) * ld, ld, cg, k0, k1, nb);
        }
#pragma omp for schedule(static) collapse(3)
      for (int k = 0; k < kg; k++)
        for (int row = 0; row < rows; row++)
          for (int gi = 0; gi < ng; gi++)
            output16(a, grp, k, r0 + row, 16 * gi, tw - 16 * gi < 16 ? tw - 16 * gi : 16,
                     Mb + (size_t)k * ld + (size_t)row * tw + 16 * gi, (size_t)kg * ld, out);
    }
  }
}

/* The input rows channel c's transforms of tiles (R, tx0 .. tx0 + cnt - 1) will read: they are
 * a few hundred bytes in each of A rows of one plane, a pattern the hardware prefetchers do not
 * follow from one channel plane to the next. */
static void prefetch_rows(const ts__wino_geom *a, int grp, int c, int R, int tx0, int cnt, const float *in) {
  const int n = R / a->th, ty = R % a->th, W = a->W;
  const float *x = in + ((size_t)n * a->C + (size_t)grp * a->cg + c) * a->H * W;
  int x0 = tx0 * a->M - a->pad_left, x1 = (tx0 + cnt) * a->M - a->pad_left + a->A - a->M;
  if (x0 < 0) x0 = 0;
  if (x1 > W) x1 = W;
  for (int l = 0; l < a->A; l++) {
    const int y = ty * a->M - a->pad_top + l;
    if (y < 0 || y >= a->H) continue;
    for (int col = x0; col < x1; col += 16) _mm_prefetch((const char *)(x + (size_t)y * W + col), _MM_HINT_T0);
  }
}

/* The same for the output rows channel k's tiles (R, tx0 ..) will write (prefetch for writing). */
static void prefetch_out(const ts__wino_geom *a, int grp, int k, int R, int tx0, int cnt, float *out) {
  const int n = R / a->th, ty = R % a->th, Q = a->Q;
  float *o = out + ((size_t)n * a->K + (size_t)grp * a->kg + k) * a->P * Q;
  const int x0 = tx0 * a->M, x1 = (tx0 + cnt) * a->M < Q ? (tx0 + cnt) * a->M : Q;
  for (int i = 0; i < a->M && ty * a->M + i < a->P; i++)
    for (int col = x0; col < x1; col += 16) _mm_prefetch((const char *)(o + (size_t)(ty * a->M + i) * Q + col), _MM_HINT_ET0);
}

static void fused(const ts__wino_geom *a, int grp, const float *in, float *out, unsigned char *ws) {
  const int aa = a->A * a->A, cg = a->cg, kg = a->kg, ldb = a->ldb, kb = a->kb;
  const int tasks = a->N * a->th * a->nck;
  const size_t vbytes = al64((size_t)aa * cg * ldb * sizeof(float)), slice = vbytes + al64((size_t)aa * kb * ldb * sizeof(float));
  const float *U = a->U + (size_t)grp * aa * cg * a->kgp;
#pragma omp parallel num_threads(a->threads)
  {
    float *V = (float *)(ws + (size_t)omp_get_thread_num() * slice), *Mb = (float *)((unsigned char *)V + vbytes);
#pragma omp for schedule(dynamic)
    for (int t = 0; t < tasks; t++) {
      const int R = t / a->nck, tx0 = (t % a->nck) * ldb, cnt = a->tw - tx0 < ldb ? a->tw - tx0 : ldb;
      for (int c = 0; c < cg; c++) {
        if (c + 1 < cg) prefetch_rows(a, grp, c + 1, R, tx0, cnt, in);
        for (int j = 0; j < cnt; j += 16)
          input16(a, grp, c, R, tx0 + j, cnt - j < 16 ? cnt - j : 16, V + (size_t)c * ldb + j, (size_t)cg * ldb, in);
      }
      for (int k0 = 0; k0 < kg; k0 += kb) {
        const int k1 = k0 + kb < kg ? k0 + kb : kg;
        for (int xi = 0; xi < aa; xi++)
          gemm(U + (size_t)xi * cg * a->kgp, V + (size_t)xi * cg * ldb, ldb, Mb + (size_t)xi * kb * ldb, ldb, cg,
               k0, k1, cnt);
        for (int k = k0; k < k1; k++) {
          if (k + 1 < kg) prefetch_out(a, grp, k + 1, R, tx0, cnt, out);
          for (int j = 0; j < cnt; j += 16)
            output16(a, grp, k, R, tx0 + j, cnt - j < 16 ? cnt - j : 16, Mb + (size_t)(k - k0) * ldb + j,
                     (size_t)kb * ldb, out);
        }
      }
    }
  }
}

ts_status ts__wino_execute_avx512(const ts__wino_geom *g, const float *in, float *out, unsigned char *ws) {
  for (int grp = 0; grp < g->groups; grp++) {
    if (g->sched == TS__WINO_CLANE) ts__wino_cl_group(g, grp, in, out, ws);
    else if (g->sched == TS__WINO_FUSED) fused(g, grp, in, out, ws);
    else staged(g, grp, in, out, ws);
  }
  return TS_OK;
}
