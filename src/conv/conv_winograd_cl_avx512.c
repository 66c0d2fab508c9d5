/* AVX-512 Winograd F(m x m, 3 x 3), channel-lane schedule: 16 channels per vector instead of the
 * 16 tiles of one tile row that conv_winograd_avx512.c puts in the lanes, which run on mostly
 * empty vectors when tile rows are short (4 of 16 lanes at 14^2, F(4,3)). The default schedule
 * (ts__wino_setup_avx512: every F(4,3) layer, F(2,3) below 96 tiles per tile row); forced by a
 * plan's internal options (ts__conv_plan_opts: clane, clane-private or clane-shared).
 *
 * Blocks of whole tile rows over the batch, either private to a thread (V and M of a block in its
 * L2, no barriers; when U is small enough to be re-read per block from L3 and there are at least
 * two blocks per thread) or shared by all threads (as large as CL_BLOCK_BYTES allows, U streamed
 * once per block, a barrier after each phase). The phases of a block:
 *   input   task (tile row R, block of 16 channels cb): the A input rows the tile row reads are
 *           copied zero-padded into a per-thread staging buffer [16][wpv] and transposed (16 x 16
 *           in registers) to [A][wp][16]; each tile's A x A points (one vector = 16 channels)
 *           then go through B^T d B lane-wise into V [A*A][T][cgp] (T tiles in the block; a tile's
 *           channels contiguous, zero past cg);
 *   gemm    task (xi, panel of 64 output channels): M[xi] [T][kgp] = V[xi] [T][cg] x U[xi] [cg][kgp]
 *           with register tiles of MR = 6 tiles (broadcasts of V) x NV = 4 vectors of 16 output
 *           channels (loads of U): 24 accumulators, 10 loads per 24 FMAs. U is packed by panels,
 *           [A*A][kgp/64][cg][64] (the last panel narrower), so a panel is one sequential stream
 *           (at batch 1 U comes from memory: it is 4x (F(4,3)) or 1.8x (F(2,3)) the weights);
 *           the reduction runs in chunks of CL_KC channels whose panel rows (32 KiB) stay in L1
 *           while every 6-tile block of the tiles uses them;
 *   output  task (tile row R, block of 16 output channels kb): A^T M A + bias (+ ReLU) lane-wise
 *           for the tile row's tiles into a per-thread buffer [m][obl][16], then 16 x 16
 *           transposes give each channel's output row segment for a masked contiguous store.
 * Lanes past cg and kg are zeros that are never stored; no load reads outside the input. */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "kernels/simd_avx512.h" /* ts__transpose16 */
#include "conv/conv_internal.h"
#include "conv/conv_wino_avx512_inl.h"

/* CL_PRIV_BYTES: V + M of a thread's private block, 5/8 of the core's L2 (640 KiB where L2 is the
 * 1 MiB per core it was tuned on); CL_PRIV_U_BYTES: largest U that every thread may re-read per
 * block (from L3); CL_BLOCK_BYTES: V + M of a shared block. */
enum { CL_MR = 6, CL_NV = 4, CL_KC = 128, CL_PF = 48 };
#define CL_PRIV_BYTES (ts__conv_l2_bytes() / 8 * 5)
#define CL_PRIV_U_BYTES ((size_t)4 << 20)
#define CL_BLOCK_BYTES ((size_t)8 << 20)

static size_t al64(size_t b) { return (b + 63) / 64 * 64; }

/* Floats of one thread's buffer: the input phase's staging rows [16][wpv] and packed rows
 * [A][wpv][16], or the output phase's [m][obl][16] (the phases never overlap in a thread). */
static size_t thread_floats(const ts__wino_geom *g) {
  const size_t in = (size_t)16 * g->wpv + (size_t)g->A * g->wpv * 16, out = (size_t)g->M * g->obl * 16;
  return in > out ? in : out;
}

/* Bytes of V and M for rows tile rows (one block). */
static size_t block_bytes(const ts__wino_geom *g, int rows) {
  const size_t aa = (size_t)g->A * g->A, t = (size_t)rows * g->tw;
  return al64(aa * t * g->cgp * sizeof(float)) + al64(aa * t * g->kgp * sizeof(float));
}

void ts__wino_cl_setup(ts__wino_geom *g) {
  const size_t aa = (size_t)g->A * g->A, ubytes = aa * g->cg * g->kgp * sizeof(float);
  g->upw = 16 * CL_NV; /* U's panels, one register tile wide (conv_winograd.c packs them) */
  g->cgp = (g->cg + 15) / 16 * 16;
  g->wp = g->tw * g->M + g->A - g->M;
  g->wpv = (g->wp + 15) / 16 * 16;
  g->obl = (g->tw * g->M + 15) / 16 * 16;
  const int rows = g->N * g->th;
  const size_t per_row = aa * g->tw * (size_t)(g->cgp + g->kgp) * sizeof(float);
  /* private blocks: V and M of a block in the thread's L2, U (read again per block) in L3 */
  int rpb = (int)(CL_PRIV_BYTES / per_row);
  if (rpb < 1) rpb = 1;
  int nblk = (rows + rpb - 1) / rpb;
  nblk = (nblk + g->threads - 1) / g->threads * g->threads; /* whole rounds of blocks over the threads */
  if (g->clpriv < 0) g->clpriv = ubytes <= CL_PRIV_U_BYTES && nblk >= 2 * g->threads;
  else if (g->clpriv) nblk = rows; /* forced (tests): one tile row per block */
  if (g->clpriv) {
    g->rpb = (rows + nblk - 1) / nblk;
  } else { /* shared blocks: as large as CL_BLOCK_BYTES allows, U streamed once per block */
    g->rpb = (int)(CL_BLOCK_BYTES / per_row);
    if (g->rpb < 1) g->rpb = 1;
    if (g->rpb > rows) g->rpb = rows;
  }
  g->workspace = (g->clpriv ? (size_t)g->threads : 1) * block_bytes(g, g->rpb) +
                 (size_t)g->threads * al64(thread_floats(g) * sizeof(float));
}

/* ---- input: tile row R, channels [16 cb, 16 cb + 16) of group grp -> V[xi][t0 + tx][16 cb ..] -- */

static inline __attribute__((always_inline)) void input_impl(const ts__wino_geom *g, int grp, const float *in, int R,
                                                              int cb, float *buf, float *V, size_t xs, int t0,
                                                              const int A, const int m) {
  const int n = R / g->th, ty = R % g->th, W = g->W, wp = g->wp, wpv = g->wpv, pl = g->pad_left;
  const int c0 = cb * 16, nc = g->cg - c0 < 16 ? g->cg - c0 : 16;
  const float *x = in + ((size_t)n * g->C + (size_t)grp * g->cg + c0) * g->H * W;
  float *stage = buf, *rows = buf + (size_t)16 * wpv; /* [16][wpv], [A][wpv][16] */
  for (int i = 0; i < 16; i++) { /* the zero margins (and absent channels) once per task */
    float *s = stage + (size_t)i * wpv;
    if (i >= nc) {
      memset(s, 0, (size_t)wpv * sizeof(float));
    } else {
      memset(s, 0, (size_t)pl * sizeof(float));
      memset(s + pl + W, 0, (size_t)(wpv - pl - W) * sizeof(float));
    }
  }
  for (int l = 0; l < A; l++) {
    const int y = ty * m - g->pad_top + l;
    float *dst = rows + (size_t)l * wpv * 16;
    if (y < 0 || y >= g->H) {
      memset(dst, 0, (size_t)wp * 16 * sizeof(float));
      continue;
    }
    for (int i = 0; i < nc; i++) memcpy(stage + (size_t)i * wpv + pl, x + ((size_t)i * g->H + y) * W, (size_t)W * sizeof(float));
    for (int j0 = 0; j0 < wp; j0 += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; i++) r[i] = _mm512_load_ps(stage + (size_t)i * wpv + j0);
      ts__transpose16(r);
      const int nj = wp - j0 < 16 ? wp - j0 : 16;
      for (int j = 0; j < nj; j++) _mm512_store_ps(dst + (size_t)(j0 + j) * 16, r[j]);
    }
  }
  const float(*BT)[AM] = A == 6 ? BT4 : BT2;
  for (int tx = 0; tx < g->tw; tx++) {
    __m512 t[AM][AM];
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) { /* B^T along the columns of the tile */
      __m512 col[AM];
      for (int l = 0; l < A; l++) col[l] = _mm512_load_ps(rows + ((size_t)l * wpv + tx * m + j) * 16);
#pragma GCC unroll 6
      for (int i = 0; i < A; i++) t[i][j] = comb(BT[i], col, A);
    }
    float *v = V + (size_t)(t0 + tx) * g->cgp + c0;
#pragma GCC unroll 6
    for (int i = 0; i < A; i++)
#pragma GCC unroll 6
      for (int j = 0; j < A; j++) _mm512_store_ps(v + (size_t)(i * A + j) * xs, comb(BT[j], t[i], A));
  }
}

static void cl_input(const ts__wino_geom *g, int grp, const float *in, int R, int cb, float *buf, float *V, size_t xs,
                     int t0) {
  if (g->A == 6) input_impl(g, grp, in, R, cb, buf, V, xs, t0, 6, 4);
  else input_impl(g, grp, in, R, cb, buf, V, xs, t0, 4, 2);
}

/* ---- gemm: M [MR tiles][NV*16 channels] = V [MR][cg] x U panel [cg][NV*16] ---------------------- */

static inline __attribute__((always_inline)) void gemm_tile(const float *U, size_t ldu, const float *V, size_t ldv,
                                                             float *M, size_t ldm, int c0, int c1, int pf,
                                                             const int MR, const int NV) {
  __m512 acc[CL_MR][CL_NV];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NV; j++) acc[i][j] = c0 ? _mm512_load_ps(M + i * ldm + 16 * j) : _mm512_setzero_ps();
  for (int c = c0; c < c1; c++) {
    __m512 u[CL_NV];
    for (int j = 0; j < NV; j++) u[j] = _mm512_load_ps(U + (size_t)c * ldu + 16 * j);
    if (pf) /* the first pass over a chunk streams U from memory: fetch CL_PF rows ahead */
      for (int j = 0; j < NV; j++) _mm_prefetch((const char *)(U + (size_t)(c + CL_PF) * ldu + 16 * j), _MM_HINT_T0);
    for (int i = 0; i < MR; i++) {
      const __m512 b = _mm512_set1_ps(V[i * ldv + c]);
      for (int j = 0; j < NV; j++) acc[i][j] = _mm512_fmadd_ps(b, u[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NV; j++) _mm512_store_ps(M + i * ldm + 16 * j, acc[i][j]);
}

typedef void (*tile_fn)(const float *, size_t, const float *, size_t, float *, size_t, int, int, int);
#define TILE_FN(MR, NV)                                                                                    \
  static void tile_##MR##_##NV(const float *U, size_t ub, const float *V, size_t lv, float *M, size_t lm, int c0, \
                               int c1, int pf) {                                                            \
    gemm_tile(U, ub, V, lv, M, lm, c0, c1, pf, MR, NV);                                                    \
  }
#define TILE_FNS(MR) TILE_FN(MR, 1) TILE_FN(MR, 2) TILE_FN(MR, 3) TILE_FN(MR, 4)
TILE_FNS(1)
TILE_FNS(2)
TILE_FNS(3)
TILE_FNS(4)
TILE_FNS(5)
TILE_FNS(6)
#define TILE_ROW(MR) {tile_##MR##_1, tile_##MR##_2, tile_##MR##_3, tile_##MR##_4}
static const tile_fn tiles[CL_MR][CL_NV] = {TILE_ROW(1), TILE_ROW(2), TILE_ROW(3), TILE_ROW(4), TILE_ROW(5), TILE_ROW(6)};

/* M[xi][t][k0 .. k0 + 16 nv) for every tile t < T. */
static void cl_gemm(const ts__wino_geom *g, const float *Uxi, const float *Vxi, float *Mxi, int T, int k0) {
  const int nv = (g->kgp - k0) / 16 < CL_NV ? (g->kgp - k0) / 16 : CL_NV;
  const size_t ldu = (size_t)16 * nv;
  const float *u = Uxi + (size_t)k0 * g->cg;
  for (int c0 = 0; c0 < g->cg; c0 += CL_KC) /* the panel's CL_KC rows of U stay in L1 over the tiles */
    for (int t = 0; t < T; t += CL_MR) {
      const int mr = T - t < CL_MR ? T - t : CL_MR;
      tiles[mr - 1][nv - 1](u, ldu, Vxi + (size_t)t * g->cgp, (size_t)g->cgp, Mxi + (size_t)t * g->kgp + k0,
                            (size_t)g->kgp, c0, g->cg - c0 < CL_KC ? g->cg : c0 + CL_KC, t == 0);
    }
}

/* ---- output: tile row R, output channels [16 kb, 16 kb + 16) of group grp ------------------------ */

static inline __attribute__((always_inline)) void output_impl(const ts__wino_geom *g, int grp, int R, int kb,
                                                               const float *M, size_t xs, int t0, float *buf,
                                                               float *out, const int A, const int m) {
  const int n = R / g->th, ty = R % g->th, k0 = kb * 16, nk = g->kg - k0 < 16 ? g->kg - k0 : 16;
  const int P = g->P, Q = g->Q, obl = g->obl;
  const __m512 bias = _mm512_maskz_loadu_ps(lanes_below(nk), g->bias + (size_t)grp * g->kg + k0);
  const float(*AT)[AM] = A == 6 ? AT4 : AT2;
  for (int tx = 0; tx < g->tw; tx++) {
    const float *mm = M + (size_t)(t0 + tx) * g->kgp + k0;
    __m512 s[4][AM];
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) { /* A^T along the columns */
      __m512 col[AM];
      for (int l = 0; l < A; l++) col[l] = _mm512_load_ps(mm + (size_t)(l * A + j) * xs);
#pragma GCC unroll 4
      for (int i = 0; i < m; i++) s[i][j] = comb(AT[i], col, A);
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
      for (int j = 0; j < m; j++) {
        __m512 v = _mm512_add_ps(comb(AT[j], s[i], A), bias);
        if (g->relu) v = _mm512_max_ps(_mm512_setzero_ps(), v); /* NaN stays NaN */
        _mm512_store_ps(buf + ((size_t)i * obl + tx * m + j) * 16, v);
      }
  }
  float *o = out + ((size_t)n * g->K + (size_t)grp * g->kg + k0) * P * Q;
  for (int i = 0; i < m; i++) {
    const int y = ty * m + i;
    if (y >= P) break;
    for (int x0 = 0; x0 < Q; x0 += 16) { /* obl >= Q rounded up to 16: the loads stay in the buffer */
      __m512 r[16];
      for (int j = 0; j < 16; j++) r[j] = _mm512_load_ps(buf + ((size_t)i * obl + x0 + j) * 16);
      ts__transpose16(r);
      const __mmask16 cols = lanes_below(Q - x0);
      for (int kk = 0; kk < nk; kk++) _mm512_mask_storeu_ps(o + ((size_t)kk * P + y) * Q + x0, cols, r[kk]);
    }
  }
}

static void cl_output(const ts__wino_geom *g, int grp, int R, int kb, const float *M, size_t xs, int t0, float *buf,
                      float *out) {
  if (g->A == 6) output_impl(g, grp, R, kb, M, xs, t0, buf, out, 6, 4);
  else output_impl(g, grp, R, kb, M, xs, t0, buf, out, 4, 2);
}

/* ---- one group ------------------------------------------------------------------------------ */

/* Tile rows [r0, r0 + rows) as one block: the three phases over [lo, hi) of each phase's tasks,
 * so that a thread can run a whole block alone or its share of a shared one. */
typedef struct cl_block {
  const ts__wino_geom *g;
  int grp, r0, rows, T;
  const float *in, *U;
  float *V, *M, *out;
} cl_block;

static void block_input(const cl_block *b, int task, float *buf) {
  const int ncb = b->g->cgp / 16, row = task / ncb;
  cl_input(b->g, b->grp, b->in, b->r0 + row, task % ncb, buf, b->V, (size_t)b->T * b->g->cgp, row * b->g->tw);
}

static void block_gemm(const cl_block *b, int task) {
  const ts__wino_geom *g = b->g;
  const int nkp = (g->kgp + 16 * CL_NV - 1) / (16 * CL_NV), xi = task / nkp;
  cl_gemm(g, b->U + (size_t)xi * g->cg * g->kgp, b->V + (size_t)xi * b->T * g->cgp, b->M + (size_t)xi * b->T * g->kgp,
          b->T, task % nkp * 16 * CL_NV);
}

static void block_output(const cl_block *b, int task, float *buf) {
  const int nkb = (b->g->kg + 15) / 16, row = task / nkb;
  cl_output(b->g, b->grp, b->r0 + row, task % nkb, b->M, (size_t)b->T * b->g->kgp, row * b->g->tw, buf, b->out);
}

void ts__wino_cl_group(const ts__wino_geom *g, int grp, const float *in, float *out, unsigned char *ws) {
  const int rows_all = g->N * g->th, nblk = (rows_all + g->rpb - 1) / g->rpb;
  const int ntin = g->cgp / 16, ntg = g->A * g->A * ((g->kgp + 16 * CL_NV - 1) / (16 * CL_NV)), ntout = (g->kg + 15) / 16;
  const size_t bbytes = block_bytes(g, g->rpb), vbytes = al64((size_t)g->A * g->A * g->rpb * g->tw * g->cgp * sizeof(float));
  const size_t tbytes = al64(thread_floats(g) * sizeof(float));
  unsigned char *tb = ws + (g->clpriv ? (size_t)g->threads : 1) * bbytes;
  cl_block b0 = {g, grp, 0, 0, 0, in, g->U + (size_t)grp * g->A * g->A * g->cg * g->kgp, NULL, NULL, out};
#pragma omp parallel num_threads(g->threads)
  {
    const int tid = omp_get_thread_num();
    float *buf = (float *)(tb + (size_t)tid * tbytes);
    cl_block b = b0;
    if (g->clpriv) { /* whole blocks per thread, no barriers */
      b.V = (float *)(ws + (size_t)tid * bbytes), b.M = (float *)(ws + (size_t)tid * bbytes + vbytes);
#pragma omp for schedule(dynamic)
      for (int k = 0; k < nblk; k++) {
        b.r0 = k * g->rpb, b.rows = rows_all - b.r0 < g->rpb ? rows_all - b.r0 : g->rpb, b.T = b.rows * g->tw;
        for (int t = 0; t < b.rows * ntin; t++) block_input(&b, t, buf);
        for (int t = 0; t < ntg; t++) block_gemm(&b, t);
        for (int t = 0; t < b.rows * ntout; t++) block_output(&b, t, buf);
      }
    } else { /* every block shared by the threads, a barrier after each phase */
      b.V = (float *)ws, b.M = (float *)(ws + vbytes);
      for (int k = 0; k < nblk; k++) {
        b.r0 = k * g->rpb, b.rows = rows_all - b.r0 < g->rpb ? rows_all - b.r0 : g->rpb, b.T = b.rows * g->tw;
#pragma omp for schedule(static)
        for (int t = 0; t < b.rows * ntin; t++) block_input(&b, t, buf);
#pragma omp for schedule(dynamic)
        for (int t = 0; t < ntg; t++) block_gemm(&b, t);
#pragma omp for schedule(static)
        for (int t = 0; t < b.rows * ntout; t++) block_output(&b, t, buf);
      }
    }
  }
}
