/* AVX2 Winograd F(m x m, 3 x 3), channels in the lanes: the schedule of conv_winograd_cl_avx512.c
 * with 8-lane vectors and register tiles for 16 ymm registers (m = 2: F(2,3), A = 4; m = 4:
 * F(4,3), A = 6; the same folded transform constants, conv_wino_consts.h).
 *
 * Blocks of whole tile rows over the batch, private to a thread (its V and M in its L2, no
 * barriers; when U is small enough to be re-read per block and there are at least two blocks per
 * thread) or shared by all threads (U streamed once per block, a barrier after each phase):
 *   input   task (tile row R, block of 8 channels cb): the A input rows the tile row reads are
 *           copied zero-padded into a per-thread staging buffer [8][wpv] and transposed (8 x 8 in
 *           registers) to [A][wp][8]; each tile's A x A points (one vector = 8 channels) go
 *           through B^T d B lane-wise into V [A*A][T][cgp] (cgp = cg rounded up to 8, zeros past cg);
 *   gemm    task (xi, panel of 16 output channels): M[xi] [T][kgp] = V[xi] [T][cg] x U[xi] [cg][kgp]
 *           with register tiles of MR = 6 tiles (broadcasts of V) x NV = 2 vectors of 8 output
 *           channels (loads of U): 12 accumulators + 2 U vectors + 1 broadcast of the 16 ymm,
 *           8 loads per 12 FMAs (Zen 3 issues 3 loads and 2 FMAs a cycle). U is packed by panels,
 *           [A*A][kgp/16][cg][16] (the last panel 8 wide when kgp % 16 = 8), so a panel is one
 *           sequential stream; the reduction runs in chunks of KC channels whose panel rows stay in
 *           L1 (half of it) while every tile block of the block uses them; the T tiles are cut into
 *           equal tile blocks of at most MR (14 tiles: 5 + 5 + 4, not 6 + 6 + 2), since a 2-tile
 *           block has only 4 accumulators for FMA chains of latency 4;
 *   output  task (tile row R, block of 8 output channels kb): A^T M A + bias (+ ReLU) lane-wise
 *           into a per-thread buffer [m][obl][8], then 8 x 8 transposes give each channel's output
 *           row segment for a contiguous store (plain stores: ts__conv_store_first).
 * Cache sizes come from this machine (ts_hwinfo_cache_scaled), with the values of the 1 MiB-L2
 * machine the AVX-512 schedule was tuned on as reference. Lanes past cg and kg are zeros that are
 * never stored; no load reads outside the input. */
#include <assert.h>
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "conv/conv_avx2_inl.h"
#include "conv/conv_internal.h"
#include "conv/conv_wino_consts.h"
#include "tessera/hwinfo.h"

enum { MR = 6, NV = 2, PW = 8 * NV, PF = 48 };
#define AI static inline __attribute__((always_inline))

/* V + M of a private block: 5/8 of L2 (as on AVX-512; 320 KiB at this EPYC's 512 KiB); the largest
 * U a thread may re-read per block: 4 L2 (the AVX-512 fused schedule's bound); V + M of a shared
 * block: 8 MiB on a 32 MiB L3; U rows per reduction chunk: half of L1d (256 rows of 64 B at 32 KiB). */
static size_t priv_bytes(void) { return (size_t)ts_hwinfo_cache_scaled(2, 1 << 20, 640 << 10, 64 << 10, 16 << 20); }
static size_t priv_u_bytes(void) { return (size_t)ts_hwinfo_cache_scaled(2, 1 << 20, 4 << 20, 256 << 10, 64 << 20); }
static size_t shared_bytes(void) { return (size_t)ts_hwinfo_cache_scaled(3, 32 << 20, 8 << 20, 1 << 20, 64 << 20); }
static int kc_rows(void) { return (int)ts_hwinfo_cache_scaled(1, 32 << 10, 256, 64, 2048); }

static size_t al64(size_t b) { return (b + 63) / 64 * 64; }
static int up8(int n) { return (n + 7) / 8 * 8; }

/* ---- 8-lane helpers ------------------------------------------------------------------------- */

/* s = sum_l c[l] * v[l] (c a row of the constant matrices: folded at compile time). */
AI __m256 comb(const float *c, const __m256 *v, const int n) {
  __m256 s = _mm256_setzero_ps();
  int first = 1;
#pragma GCC unroll 6
  for (int l = 0; l < n; l++) {
    if (c[l] == 0.0f) continue;
    if (first) s = c[l] == 1.0f ? v[l] : c[l] == -1.0f ? _mm256_sub_ps(_mm256_setzero_ps(), v[l]) : _mm256_mul_ps(_mm256_set1_ps(c[l]), v[l]);
    else s = c[l] == 1.0f ? _mm256_add_ps(s, v[l]) : c[l] == -1.0f ? _mm256_sub_ps(s, v[l]) : _mm256_fmadd_ps(_mm256_set1_ps(c[l]), v[l], s);
    first = 0;
  }
  return s;
}

/* ---- setup ---------------------------------------------------------------------------------- */

/* Floats of one thread's buffer: the input phase's staging rows [8][wpv] and packed rows
 * [A][wpv][8], or the output phase's [m][obl][8] (the phases never overlap in a thread). */
static size_t thread_floats(const ts__wino_geom *g) {
  const size_t in = (size_t)8 * g->wpv + (size_t)g->A * g->wpv * 8, out = (size_t)g->M * g->obl * 8;
  return in > out ? in : out;
}

/* Bytes of V and M for rows tile rows (one block). */
static size_t block_bytes(const ts__wino_geom *g, int rows) {
  const size_t aa = (size_t)g->A * g->A, t = (size_t)rows * g->tw;
  return al64(aa * t * g->cgp * sizeof(float)) + al64(aa * t * g->kgp * sizeof(float));
}

void ts__wino_setup_avx2(ts__wino_geom *g) {
  for (int i = 0; i < g->A; i++) /* the plan's matrices are the constants folded in here */
    for (int j = 0; j < g->A; j++) {
      assert(g->BT[i * AM + j] == (g->A == 6 ? BT4 : BT2)[i][j]);
      assert(i >= g->M || g->AT[i * AM + j] == (g->A == 6 ? AT4 : AT2)[i][j]);
    }
  const size_t aa = (size_t)g->A * g->A, ubytes = aa * g->cg * g->kgp * sizeof(float);
  g->sched = TS__WINO_CLANE, g->upw = PW;
  g->clpriv = g->force == TS__WINO_SCHED_CLANE_PRIVATE ? 1 : g->force == TS__WINO_SCHED_CLANE_SHARED ? 0 : -1;
  g->cgp = up8(g->cg);
  g->wp = g->tw * g->M + g->A - g->M;
  g->wpv = up8(g->wp);
  g->obl = up8(g->tw * g->M);
  const int rows = g->N * g->th;
  const size_t per_row = aa * g->tw * (size_t)(g->cgp + g->kgp) * sizeof(float);
  int rpb = (int)(priv_bytes() / per_row);
  if (rpb < 1) rpb = 1;
  int nblk = (rows + rpb - 1) / rpb;
  nblk = (nblk + g->threads - 1) / g->threads * g->threads; /* whole rounds of blocks over the threads */
  if (g->clpriv < 0) g->clpriv = ubytes <= priv_u_bytes() && nblk >= 2 * g->threads;
  else if (g->clpriv) nblk = rows; /* forced (tests): one tile row per block */
  if (g->clpriv) {
    g->rpb = (rows + nblk - 1) / nblk;
  } else {
    g->rpb = (int)(shared_bytes() / per_row);
    if (g->rpb < 1) g->rpb = 1;
    if (g->rpb > rows) g->rpb = rows;
  }
  g->workspace = (g->clpriv ? (size_t)g->threads : 1) * block_bytes(g, g->rpb) +
                 (size_t)g->threads * al64(thread_floats(g) * sizeof(float));
}

/* ---- input: tile row R, channels [8 cb, 8 cb + 8) of group grp -> V[xi][t0 + tx][8 cb ..] ----- */

/* The A input rows of tile row R for 8 channels, zero-padded, as rows [A][wp][8]. */
static void input_rows(const ts__wino_geom *g, int grp, const float *in, int R, int c0, float *buf, const int A,
                       const int m) {
  const int n = R / g->th, ty = R % g->th, W = g->W, wp = g->wp, wpv = g->wpv, pl = g->pad_left;
  const int nc = g->cg - c0 < 8 ? g->cg - c0 : 8;
  const float *x = in + ((size_t)n * g->C + (size_t)grp * g->cg + c0) * g->H * W;
  float *stage = buf, *rows = buf + (size_t)8 * wpv;
  for (int i = 0; i < 8; i++) { /* the zero margins (and absent channels) once per task */
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
    float *dst = rows + (size_t)l * wpv * 8;
    if (y < 0 || y >= g->H) {
      memset(dst, 0, (size_t)wp * 8 * sizeof(float));
      continue;
    }
    for (int i = 0; i < nc; i++) memcpy(stage + (size_t)i * wpv + pl, x + ((size_t)i * g->H + y) * W, (size_t)W * sizeof(float));
    for (int j0 = 0; j0 < wp; j0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; i++) r[i] = _mm256_load_ps(stage + (size_t)i * wpv + j0);
      ts__conv_transpose8(r);
      const int nj = wp - j0 < 8 ? wp - j0 : 8;
      for (int j = 0; j < nj; j++) _mm256_store_ps(dst + (size_t)(j0 + j) * 8, r[j]);
    }
  }
}

AI void input_impl(const ts__wino_geom *g, int grp, const float *in, int R, int cb, float *buf, float *V, size_t xs,
                   int t0, const int A, const int m) {
  const int c0 = cb * 8;
  input_rows(g, grp, in, R, c0, buf, A, m);
  const float *rows = buf + (size_t)8 * g->wpv;
  const size_t rs = (size_t)g->wpv * 8;
  const float(*BT)[AM] = A == 6 ? BT4 : BT2;
  for (int tx = 0; tx < g->tw; tx++) {
    __m256 t[AM][AM];
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) { /* B^T along the columns of the tile */
      __m256 col[AM];
      for (int l = 0; l < A; l++) col[l] = _mm256_load_ps(rows + l * rs + (size_t)(tx * m + j) * 8);
#pragma GCC unroll 6
      for (int i = 0; i < A; i++) t[i][j] = comb(BT[i], col, A);
    }
    float *v = V + (size_t)(t0 + tx) * g->cgp + c0;
#pragma GCC unroll 6
    for (int i = 0; i < A; i++)
#pragma GCC unroll 6
      for (int j = 0; j < A; j++) _mm256_store_ps(v + (size_t)(i * A + j) * xs, comb(BT[j], t[i], A));
  }
}

static void cl_input(const ts__wino_geom *g, int grp, const float *in, int R, int cb, float *buf, float *V, size_t xs,
                     int t0) {
  if (g->A == 6) input_impl(g, grp, in, R, cb, buf, V, xs, t0, 6, 4);
  else input_impl(g, grp, in, R, cb, buf, V, xs, t0, 4, 2);
}

/* ---- gemm: M [mr tiles][nv*8 channels] (+)= V [mr][c0..c1) x U panel [c0..c1)[nv*8] ------------ */

/* One row c of the reduction: NV loads of U, mr broadcasts of V, mr * nv FMAs. */
AI void gemm_row(__m256 acc[MR][NV], const float *U, size_t ldu, const float *V, size_t ldv, int c, const int mr,
                 const int nv) {
  __m256 u[NV];
#pragma GCC unroll 2
  for (int j = 0; j < nv; j++) u[j] = _mm256_load_ps(U + (size_t)c * ldu + 8 * j);
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++) {
    const __m256 b = _mm256_broadcast_ss(V + i * ldv + c);
#pragma GCC unroll 2
    for (int j = 0; j < nv; j++) acc[i][j] = _mm256_fmadd_ps(b, u[j], acc[i][j]);
  }
}

AI void gemm_tile(const float *U, size_t ldu, const float *V, size_t ldv, float *M, size_t ldm, int c0, int c1, int pf,
                  const int mr, const int nv) {
  __m256 acc[MR][NV];
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
    for (int j = 0; j < nv; j++) acc[i][j] = c0 ? _mm256_load_ps(M + i * ldm + 8 * j) : _mm256_setzero_ps();
  if (pf) { /* the first tile block of a chunk streams U from L3 or memory: fetch PF rows ahead */
    for (int c = c0; c < c1; c++) {
      _mm_prefetch((const char *)(U + (size_t)(c + PF) * ldu), _MM_HINT_T0);
      gemm_row(acc, U, ldu, V, ldv, c, mr, nv);
    }
  } else {
    for (int c = c0; c < c1; c++) gemm_row(acc, U, ldu, V, ldv, c, mr, nv);
  }
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
    for (int j = 0; j < nv; j++) _mm256_store_ps(M + i * ldm + 8 * j, acc[i][j]);
}

typedef void (*tile_fn)(const float *, size_t, const float *, size_t, float *, size_t, int, int, int);
#define TILE_FN(MR_, NV_)                                                                                   \
  static void tile_##MR_##_##NV_(const float *U, size_t lu, const float *V, size_t lv, float *M, size_t lm, int c0, \
                                 int c1, int pf) {                                                           \
    gemm_tile(U, lu, V, lv, M, lm, c0, c1, pf, MR_, NV_);                                                   \
  }
#define TILE_FNS(MR_) TILE_FN(MR_, 1) TILE_FN(MR_, 2)
TILE_FNS(1)
TILE_FNS(2)
TILE_FNS(3)
TILE_FNS(4)
TILE_FNS(5)
TILE_FNS(6)
#define TILE_ROW(MR_) {tile_##MR_##_1, tile_##MR_##_2}
static const tile_fn tiles[MR][NV] = {TILE_ROW(1), TILE_ROW(2), TILE_ROW(3), TILE_ROW(4), TILE_ROW(5), TILE_ROW(6)};

/* M[xi][t][k0 .. k0 + 8 nv) for every tile t < T (k0 a panel's first channel). */
static void cl_gemm(const ts__wino_geom *g, const float *Uxi, const float *Vxi, float *Mxi, int T, int k0, int kc) {
  const int nv = (g->kgp - k0) / 8 < NV ? (g->kgp - k0) / 8 : NV, nb = (T + MR - 1) / MR, per = (T + nb - 1) / nb;
  const size_t ldu = (size_t)8 * nv;
  const float *u = Uxi + (size_t)k0 * g->cg;
  for (int c0 = 0; c0 < g->cg; c0 += kc) /* the panel's kc rows of U stay in L1 over the tiles */
    for (int t = 0; t < T; t += per) {
      const int mr = T - t < per ? T - t : per;
      tiles[mr - 1][nv - 1](u, ldu, Vxi + (size_t)t * g->cgp, (size_t)g->cgp, Mxi + (size_t)t * g->kgp + k0,
                            (size_t)g->kgp, c0, g->cg - c0 < kc ? g->cg : c0 + kc, t == 0);
    }
}

/* ---- output: tile row R, output channels [8 kb, 8 kb + 8) of group grp ------------------------ */

AI void output_impl(const ts__wino_geom *g, int grp, int R, int kb, const float *M, size_t xs, int t0, float *buf,
                    float *out, const int A, const int m) {
  const int n = R / g->th, ty = R % g->th, k0 = kb * 8, nk = g->kg - k0 < 8 ? g->kg - k0 : 8;
  const int P = g->P, Q = g->Q, obl = g->obl;
  const __m256i kmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 bias = _mm256_maskload_ps(g->bias + (size_t)grp * g->kg + k0, kmask);
  const float(*AT)[AM] = A == 6 ? AT4 : AT2;
  for (int tx = 0; tx < g->tw; tx++) {
    const float *mm = M + (size_t)(t0 + tx) * g->kgp + k0;
    __m256 s[4][AM];
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) { /* A^T along the columns */
      __m256 col[AM];
      for (int l = 0; l < A; l++) col[l] = _mm256_load_ps(mm + (size_t)(l * A + j) * xs);
#pragma GCC unroll 4
      for (int i = 0; i < m; i++) s[i][j] = comb(AT[i], col, A);
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
      for (int j = 0; j < m; j++) {
        __m256 v = _mm256_add_ps(comb(AT[j], s[i], A), bias);
        if (g->relu) v = _mm256_max_ps(_mm256_setzero_ps(), v); /* NaN stays NaN */
        _mm256_store_ps(buf + ((size_t)i * obl + tx * m + j) * 8, v);
      }
  }
  float *o = out + ((size_t)n * g->K + (size_t)grp * g->kg + k0) * P * Q;
  for (int i = 0; i < m; i++) {
    const int y = ty * m + i;
    if (y >= P) break;
    for (int x0 = 0; x0 < Q; x0 += 8) { /* obl >= Q rounded up to 8: the loads stay in the buffer */
      __m256 r[8];
      for (int j = 0; j < 8; j++) r[j] = _mm256_load_ps(buf + ((size_t)i * obl + x0 + j) * 8);
      ts__conv_transpose8(r);
      float *dst = o + (size_t)y * Q + x0;
      const int nq = Q - x0 < 8 ? Q - x0 : 8;
      for (int kk = 0; kk < nk; kk++) ts__conv_store_first(dst + (size_t)kk * P * Q, r[kk], nq);
    }
  }
}

static void cl_output(const ts__wino_geom *g, int grp, int R, int kb, const float *M, size_t xs, int t0, float *buf,
                      float *out) {
  if (g->A == 6) output_impl(g, grp, R, kb, M, xs, t0, buf, out, 6, 4);
  else output_impl(g, grp, R, kb, M, xs, t0, buf, out, 4, 2);
}

/* ---- one group ------------------------------------------------------------------------------ */

/* Tile rows [r0, r0 + rows) as one block: the three phases over the tasks of each, so that a
 * thread can run a whole block alone or its share of a shared one. */
typedef struct cl_block {
  const ts__wino_geom *g;
  int grp, r0, rows, T, kc;
  const float *in, *U;
  float *V, *M, *out;
} cl_block;

static void block_input(const cl_block *b, int task, float *buf) {
  const int ncb = b->g->cgp / 8, row = task / ncb;
  cl_input(b->g, b->grp, b->in, b->r0 + row, task % ncb, buf, b->V, (size_t)b->T * b->g->cgp, row * b->g->tw);
}

static void block_gemm(const cl_block *b, int task) {
  const ts__wino_geom *g = b->g;
  const int nkp = (g->kgp + PW - 1) / PW, xi = task / nkp;
  cl_gemm(g, b->U + (size_t)xi * g->cg * g->kgp, b->V + (size_t)xi * b->T * g->cgp, b->M + (size_t)xi * b->T * g->kgp,
          b->T, task % nkp * PW, b->kc);
}

static void block_output(const cl_block *b, int task, float *buf) {
  const int nkb = (b->g->kg + 7) / 8, row = task / nkb;
  cl_output(b->g, b->grp, b->r0 + row, task % nkb, b->M, (size_t)b->T * b->g->kgp, row * b->g->tw, buf, b->out);
}

static void cl_group(const ts__wino_geom *g, int grp, const float *in, float *out, unsigned char *ws) {
  const int rows_all = g->N * g->th, nblk = (rows_all + g->rpb - 1) / g->rpb;
  const int ntin = g->cgp / 8, ntg = g->A * g->A * ((g->kgp + PW - 1) / PW), ntout = (g->kg + 7) / 8;
  const size_t bbytes = block_bytes(g, g->rpb), vbytes = al64((size_t)g->A * g->A * g->rpb * g->tw * g->cgp * sizeof(float));
  const size_t tbytes = al64(thread_floats(g) * sizeof(float));
  unsigned char *tb = ws + (g->clpriv ? (size_t)g->threads : 1) * bbytes;
  cl_block b0 = {g, grp, 0, 0, 0, kc_rows(), in, g->U + (size_t)grp * g->A * g->A * g->cg * g->kgp, NULL, NULL, out};
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

ts_status ts__wino_execute_avx2(const ts__wino_geom *g, const float *in, float *out, unsigned char *ws) {
  for (int grp = 0; grp < g->groups; grp++) cl_group(g, grp, in, out, ws);
  return TS_OK;
}
