// Device building blocks shared by the fixed-tile and variable-tile attention kernels.
//
// One thread block (128 threads = 4 warps) owns G query rows of one (batch, head): their Q rows
// (pre-multiplied by scale * log2(e), so scores come out in exp2 units), the running max m, sum l
// and the O accumulator [G][d] sit in shared memory for the whole walk. Each chunk (at most
// RB x CB cells, attn_cuda_internal.h) runs:
//   scores:  S[i][j] = Q[i0+i] . K[j] on a 16 x 8 thread grid, thread (ty, tx) owning rows
//            ty + 16a and columns tx + 8b (a < RB/16, b < CB/8); masked cells become -inf.
//   softmax: a warp per row: m' = max(m, max_j S), P = exp2(S - m') (masked cells exactly 0),
//            alpha = exp2(m - m'), l = l * alpha + sum_j P.
//   pv:      O[i0+i][c] = O * alpha[i] + sum_j P[i][j] V[j][c], thread (ty, tx) owning rows
//            ty + 16a and columns c0 + tx + 8b of each 64-column slice.
// All on CUDA cores in fp32; bf16 inputs are widened when they are loaded to shared memory.
// D = 64 makes the head dimension a compile-time constant; D = 0 reads it at run time.
// vartile_block / fixed_block at the end are the whole walk of one block; the kernels in
// attn_vartile.cu / attn_fixed.cu only pick the block's unit and head, and tests/cuda/
// emu_kernels.cpp runs the same functions on 128 CPU fibers (TS_CUDA_EMULATE) to test them
// where there is no GPU.
#ifndef TS_CUDA_ATTN_TILE_CUH
#define TS_CUDA_ATTN_TILE_CUH

#ifndef TS_CUDA_EMULATE  // tests/cuda/emu_kernels.cpp runs this file on CPU fibers
#include <cuda_runtime.h>
#endif
#include <math.h>
#include <stdint.h>

#include "cuda/attn_cuda_internal.h"

#ifdef __CUDACC__
#define TS_UNROLL _Pragma("unroll")
#define TS_UNROLL_2 _Pragma("unroll 2")
#define TS_UNROLL_4 _Pragma("unroll 4")
#else  // the CPU emulation's compiler has no use for them
#define TS_UNROLL
#define TS_UNROLL_2
#define TS_UNROLL_4
#endif

namespace ts_cuda {

constexpr int kThreads = TS__CUDA_THREADS;
constexpr float kM0 = -3.0e38f;  // initial running max: finite, so exp2(m - m') is never inf - inf

template <typename T> __device__ __forceinline__ float load_elem(const T *p);
template <> __device__ __forceinline__ float load_elem<float>(const float *p) { return __ldg(p); }
template <> __device__ __forceinline__ float load_elem<uint16_t>(const uint16_t *p) {
  return __uint_as_float(static_cast<unsigned>(__ldg(p)) << 16);
}

struct Smem {
  float *q, *k, *v, *s, *o, *m, *l, *a;
  int ldq, ldk, lds, ldo;
};

// The layout ts__cuda_smem_bytes counts: Q [g][d+1], K [CB][d+1], V [CB][d] + 64, S [RB][CB+1],
// O [g][d+8], m [g], l [g], alpha [RB].
template <int RB, int CB>
__device__ __forceinline__ Smem carve(float *base, int g, int d) {
  Smem s;
  s.ldq = d + 1, s.ldk = d + 1, s.lds = CB + 1, s.ldo = d + 8;
  s.q = base;
  s.k = s.q + g * s.ldq;
  s.v = s.k + CB * s.ldk;
  s.s = s.v + CB * d + 64;
  s.o = s.s + RB * s.lds;
  s.m = s.o + g * s.ldo;
  s.l = s.m + g;
  s.a = s.l + g;
  return s;
}

// Q rows [r0, r0+rows) of this head into s.q (rows up to g zero-filled), O = 0, m = M0, l = 0.
template <typename T>
__device__ __forceinline__ void load_q(const Smem &s, const T *Q, int r0, int rows, int g, int d, float c) {
  for (int idx = threadIdx.x; idx < g * d; idx += kThreads) {
    int i = idx / d, k = idx - i * d;
    s.q[i * s.ldq + k] = i < rows ? load_elem(Q + (int64_t)(r0 + i) * d + k) * c : 0.0f;
    s.o[i * s.ldo + k] = 0.0f;
  }
  for (int i = threadIdx.x; i < g; i += kThreads) {
    s.m[i] = kM0;
    s.l[i] = 0.0f;
  }
}

// K and V rows [j0, j0+nc) into s.k / s.v (cols != NULL: rows cols[j0 .. j0+nc), a gather plan's
// key list); rows nc..CB zero-filled so every score computed is finite.
template <int CB, typename T>
__device__ __forceinline__ void load_kv(const Smem &s, const T *K, const T *V, const int32_t *__restrict__ cols, int j0,
                                        int nc, int d) {
  for (int idx = threadIdx.x; idx < CB * d; idx += kThreads) {
    int j = idx / d, k = idx - j * d;
    bool in = j < nc;
    const int key = cols ? (in ? cols[j0 + j] : 0) : j0 + (in ? j : 0);
    int64_t at = (int64_t)key * d + k;
    s.k[j * s.ldk + k] = in ? load_elem(K + at) : 0.0f;
    s.v[j * d + k] = in ? load_elem(V + at) : 0.0f;
  }
}

template <int RB, int CB, int D>
__device__ __forceinline__ void scores(const Smem &s, const ts__cuda_chunk &ch, const uint16_t *__restrict__ mbits,
                                       int g, int d) {
  constexpr int TM = RB / 16, TN = CB / 8;
  const int dd = D ? D : d;
  const int tx = threadIdx.x & 7, ty = threadIdx.x >> 3;
  const float *qr[TM];
TS_UNROLL
  for (int a = 0; a < TM; a++) qr[a] = s.q + min(ch.i0 + ty + 16 * a, g - 1) * s.ldq;  // clamped: rows past nr are dropped
  const float *kr = s.k + tx * s.ldk;
  float acc[TM][TN];
TS_UNROLL
  for (int a = 0; a < TM; a++)
TS_UNROLL
    for (int b = 0; b < TN; b++) acc[a][b] = 0.0f;
TS_UNROLL_4
  for (int k = 0; k < dd; k++) {
    float qv[TM], kv[TN];
TS_UNROLL
    for (int a = 0; a < TM; a++) qv[a] = qr[a][k];
TS_UNROLL
    for (int b = 0; b < TN; b++) kv[b] = kr[b * 8 * s.ldk + k];
TS_UNROLL
    for (int a = 0; a < TM; a++)
TS_UNROLL
      for (int b = 0; b < TN; b++) acc[a][b] = fmaf(qv[a], kv[b], acc[a][b]);
  }
TS_UNROLL
  for (int a = 0; a < TM; a++) {
    const int i = ty + 16 * a;
    if (i >= ch.nr) continue;
    const int r = ch.ro + i;
TS_UNROLL
    for (int b = 0; b < TN; b++) {
      const int j = tx + 8 * b;
      if (j >= ch.nc) continue;
      bool allowed = true;
      if (ch.moff >= 0) allowed = (mbits[ch.moff + (int64_t)j * ch.nv + (r >> 4)] >> (r & 15)) & 1u;
      s.s[i * s.lds + j] = allowed ? acc[a][b] : -INFINITY;
    }
  }
}

template <int RB, int CB>
__device__ __forceinline__ void softmax(const Smem &s, const ts__cuda_chunk &ch) {
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = w; i < ch.nr; i += kThreads / 32) {  // warp-uniform loop: full-mask shuffles are safe
    float *row = s.s + i * s.lds;
    float mx = -INFINITY;
    for (int j = lane; j < ch.nc; j += 32) mx = fmaxf(mx, row[j]);
TS_UNROLL
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    const float mo = s.m[ch.i0 + i], mn = fmaxf(mo, mx);
    float sum = 0.0f;
    for (int j = lane; j < ch.nc; j += 32) {
      float p = exp2f(row[j] - mn);  // -inf (masked) -> exactly 0
      row[j] = p;
      sum += p;
    }
TS_UNROLL
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
      const float al = exp2f(mo - mn);
      s.l[ch.i0 + i] = s.l[ch.i0 + i] * al + sum;
      s.m[ch.i0 + i] = mn;
      s.a[i] = al;
    }
  }
}

template <int RB, int D>
__device__ __forceinline__ void pv(const Smem &s, const ts__cuda_chunk &ch, int d) {
  constexpr int TM = RB / 16;
  const int dd = D ? D : d;
  const int tx = threadIdx.x & 7, ty = threadIdx.x >> 3;
  for (int c0 = 0; c0 < dd; c0 += 64) {
    float acc[TM][8];
TS_UNROLL
    for (int a = 0; a < TM; a++) {
      const int i = ty + 16 * a;
TS_UNROLL
      for (int b = 0; b < 8; b++) {
        const int c = c0 + tx + 8 * b;
        acc[a][b] = (i < ch.nr && c < dd) ? s.o[(ch.i0 + i) * s.ldo + c] * s.a[i] : 0.0f;
      }
    }
    const float *vr = s.v + c0 + tx;
TS_UNROLL_2
    for (int j = 0; j < ch.nc; j++) {
      float p[TM], v[8];
TS_UNROLL
      for (int a = 0; a < TM; a++) p[a] = s.s[(ty + 16 * a) * s.lds + j];
TS_UNROLL
      for (int b = 0; b < 8; b++) v[b] = vr[j * dd + 8 * b];  // past d (generic d): the 64 spare floats
TS_UNROLL
      for (int a = 0; a < TM; a++)
TS_UNROLL
        for (int b = 0; b < 8; b++) acc[a][b] = fmaf(p[a], v[b], acc[a][b]);
    }
TS_UNROLL
    for (int a = 0; a < TM; a++) {
      const int i = ty + 16 * a;
      if (i >= ch.nr) continue;
TS_UNROLL
      for (int b = 0; b < 8; b++) {
        const int c = c0 + tx + 8 * b;
        if (c < dd) s.o[(ch.i0 + i) * s.ldo + c] = acc[a][b];
      }
    }
  }
}

// One chunk: scores, softmax, P V, with the barriers between them (K/V already loaded and synced).
template <int RB, int CB, int D>
__device__ __forceinline__ void run_chunk(const Smem &s, const ts__cuda_chunk &ch, const uint16_t *__restrict__ mbits,
                                          int g, int d) {
  scores<RB, CB, D>(s, ch, mbits, g, d);
  __syncthreads();
  softmax<RB, CB>(s, ch);
  __syncthreads();
  pv<RB, D>(s, ch, d);
  __syncthreads();
}

// O rows [r0, r0+rows) = accumulator / l; rows with no allowed key (l = 0) are zeros.
__device__ __forceinline__ void store_o(const Smem &s, float *O, int r0, int rows, int d) {
  for (int idx = threadIdx.x; idx < rows * d; idx += kThreads) {
    int i = idx / d, k = idx - i * d;
    const float l = s.l[i];
    O[(int64_t)(r0 + i) * d + k] = l > 0.0f ? s.o[i * s.ldo + k] / l : 0.0f;
  }
}

// A split part's slot (attn_cuda_internal.h, TS__CUDA_SLOT): O [GMAX][d], then m [GMAX], l [GMAX].
constexpr int kSlotRows = TS__CUDA_GMAX;

// A split part's unnormalized accumulator, running max and sum into its slot.
__device__ __forceinline__ void store_part(const Smem &s, float *slot, int rows, int d) {
  for (int idx = threadIdx.x; idx < rows * d; idx += kThreads) {
    int i = idx / d, k = idx - i * d;
    slot[i * d + k] = s.o[i * s.ldo + k];
  }
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    slot[kSlotRows * d + i] = s.m[i];
    slot[kSlotRows * d + kSlotRows + i] = s.l[i];
  }
}

// Output element (row i of the group, column c) of a split group from the slots p0 .. p0+np-1 of
// one (batch, head): O = sum_p O_p 2^(m_p - M) / sum_p l_p 2^(m_p - M), M = max_p m_p; 0 when no
// part saw an allowed key (every l_p = 0).
__device__ __forceinline__ float combine_elem(const float *ws, int64_t slot, int p0, int np, int i, int c, int d) {
  float M = kM0;
  for (int p = 0; p < np; p++) M = fmaxf(M, ws[(int64_t)(p0 + p) * slot + kSlotRows * d + i]);
  float L = 0.0f, acc = 0.0f;
  for (int p = 0; p < np; p++) {
    const float *sl = ws + (int64_t)(p0 + p) * slot;
    const float w = exp2f(sl[kSlotRows * d + i] - M);
    L = fmaf(sl[kSlotRows * d + kSlotRows + i], w, L);
    acc = fmaf(sl[i * d + c], w, acc);
  }
  return L > 0.0f ? acc / L : 0.0f;
}

// The walk of one variable-tile block: Q, K, V, O already offset to the block's (batch, head);
// chunks of the unit in order, K/V reloaded only when a chunk's key range changes (cols: a gather
// plan's key lists, else NULL). slot != NULL: a split part, whose partial goes there instead of O.
template <int RB, int CB, int D, typename T>
__device__ __forceinline__ void vartile_block(float *smem, const T *__restrict__ Q, const T *__restrict__ K,
                                              const T *__restrict__ V, float *__restrict__ O, int d,
                                              const ts__cuda_unit &u, const ts__cuda_chunk *__restrict__ chunks,
                                              const uint16_t *__restrict__ mbits, const int32_t *__restrict__ cols,
                                              float *__restrict__ slot, int g, float c) {
  const int dd = D ? D : d;
  const Smem s = carve<RB, CB>(smem, g, dd);
  load_q(s, Q, u.r0, u.rows, g, dd, c);
  int kv_j0 = -1, kv_nc = 0;
  for (int q = 0; q < u.nchunks; q++) {
    const ts__cuda_chunk ch = chunks[u.c0 + q];
    if (ch.j0 != kv_j0 || ch.nc != kv_nc) {  // block-uniform: every thread reads the same chunk
      load_kv<CB>(s, K, V, cols, ch.j0, ch.nc, dd);  // the previous chunk ended with a barrier
      kv_j0 = ch.j0, kv_nc = ch.nc;
    }
    __syncthreads();
    run_chunk<RB, CB, D>(s, ch, mbits, g, dd);
  }
  __syncthreads();
  if (slot)
    store_part(s, slot, u.rows, dd);
  else
    store_o(s, O, u.r0, u.rows, dd);
}

// The walk of one fixed-tile block: the query tile's key tiles in order, each cut into RB x CB
// chunks (column chunks outer, so K/V are loaded once per column chunk).
template <int RB, int CB, int D, typename T>
__device__ __forceinline__ void fixed_block(float *smem, const T *__restrict__ Q, const T *__restrict__ K,
                                            const T *__restrict__ V, float *__restrict__ O, int d,
                                            const ts__cuda_unit &u, const ts__cuda_chunk *__restrict__ tiles,
                                            const uint16_t *__restrict__ mbits, int g, float c) {
  const int dd = D ? D : d;
  const Smem s = carve<RB, CB>(smem, g, dd);
  load_q(s, Q, u.r0, u.rows, g, dd, c);
  for (int q = 0; q < u.nchunks; q++) {
    const ts__cuda_chunk t = tiles[u.c0 + q];
    for (int jj = 0; jj < t.nc; jj += CB) {
      const int nc = min(CB, t.nc - jj);
      load_kv<CB>(s, K, V, nullptr, t.j0 + jj, nc, dd);  // the previous chunk ended with a barrier
      __syncthreads();
      for (int ii = 0; ii < t.nr; ii += RB) {
        ts__cuda_chunk ch;
        ch.i0 = t.i0 + ii, ch.nr = min(RB, t.nr - ii), ch.j0 = t.j0 + jj, ch.nc = nc;
        ch.nv = t.nv, ch.ro = t.ro + ii, ch.moff = t.moff < 0 ? -1 : t.moff + (int64_t)jj * t.nv;
        run_chunk<RB, CB, D>(s, ch, mbits, g, dd);
      }
    }
  }
  __syncthreads();
  store_o(s, O, u.r0, u.rows, dd);
}

}  // namespace ts_cuda

#endif
