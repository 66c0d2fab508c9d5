// Variable-tile sparse attention: one thread block per (unit, head, batch), a unit being one panel
// of the schedule (or a row group of a panel taller than the shared-memory budget). The block walks
// the unit's chunks, flattened on the host from the CPU plan's classification (skipped sub-tiles
// are absent, unmasked ones have moff < 0), reloading K/V only when a chunk's key range changes.
// The kernel is compiled for four chunk shapes; every panel runs with the shape of its tallest
// sub-tile (the host groups the units by shape and this file launches one grid per shape). Gather
// plans run here too: their chunks list their keys (dv->cols), and their split groups' parts write
// partials that combine_kernel merges after the last grid.
#include "cuda/attn_tile.cuh"

namespace ts_cuda {

template <int RB, int CB, int D, typename T>
__global__ void __launch_bounds__(kThreads)
    vartile_kernel(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, float *__restrict__ O,
                   int n, int d, int heads, const ts__cuda_unit *__restrict__ units,
                   const ts__cuda_chunk *__restrict__ chunks, const uint16_t *__restrict__ mbits,
                   const int32_t *__restrict__ cols, float *__restrict__ ws, int64_t nparts, int g, float c) {
  extern __shared__ float4 smem_raw[];
  const ts__cuda_unit u = units[blockIdx.x];
  const int dd = D ? D : d;
  const int64_t bh = (int64_t)blockIdx.z * heads + blockIdx.y, off = bh * n * dd;
  float *slot = u.part >= 0 ? ws + (bh * nparts + u.part) * TS__CUDA_SLOT(dd) : nullptr;
  vartile_block<RB, CB, D, T>(reinterpret_cast<float *>(smem_raw), Q + off, K + off, V + off, O + off, d,
                              u, chunks, mbits, cols, slot, g, c);
}

// Merges each split group's parts into O: one block per (split, head, batch).
__global__ void __launch_bounds__(kThreads)
    combine_kernel(const ts__cuda_split *__restrict__ splits, const float *__restrict__ ws, float *__restrict__ O,
                   int n, int d, int heads, int64_t nparts) {
  const ts__cuda_split sp = splits[blockIdx.x];
  const int64_t bh = (int64_t)blockIdx.z * heads + blockIdx.y;
  const float *w = ws + bh * nparts * TS__CUDA_SLOT(d);
  float *o = O + bh * n * d;
  for (int idx = threadIdx.x; idx < sp.rows * d; idx += kThreads) {
    const int i = idx / d, k = idx - i * d;
    o[(int64_t)(sp.r0 + i) * d + k] = combine_elem(w, TS__CUDA_SLOT(d), sp.p0, sp.np, i, k, d);
  }
}

template <int RB, int CB, int D, typename T>
static cudaError_t launch(const ts__cuda_dev *dv, const ts__cuda_class_run &run, const void *Q, const void *K,
                          const void *V, float *O, int64_t batch, int64_t heads, cudaStream_t stream) {
  if (run.nu == 0) return cudaSuccess;
  const size_t smem = ts__cuda_smem_bytes(run.g, RB, CB, dv->d);
  auto kern = vartile_kernel<RB, CB, D, T>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  const float c = 1.4426950408889634f / sqrtf((float)dv->d);
  dim3 grid((unsigned)run.nu, (unsigned)heads, (unsigned)batch);
  kern<<<grid, kThreads, smem, stream>>>(static_cast<const T *>(Q), static_cast<const T *>(K),
                                         static_cast<const T *>(V), O, (int)dv->n, (int)dv->d, (int)heads,
                                         dv->units + run.u0, dv->chunks, dv->mbits, dv->cols, dv->ws, dv->nparts,
                                         run.g, c);
  return cudaGetLastError();
}

template <int D, typename T>
static cudaError_t launch_all(const ts__cuda_dev *dv, const void *Q, const void *K, const void *V, float *O,
                              int64_t batch, int64_t heads, cudaStream_t st) {
  static_assert(TS__CUDA_NCLASS == 4, "one launch per compiled chunk shape");
  cudaError_t e;
  if ((e = launch<16, 64, D, T>(dv, dv->cls[0], Q, K, V, O, batch, heads, st)) != cudaSuccess) return e;
  if ((e = launch<32, 32, D, T>(dv, dv->cls[1], Q, K, V, O, batch, heads, st)) != cudaSuccess) return e;
  if ((e = launch<32, 64, D, T>(dv, dv->cls[2], Q, K, V, O, batch, heads, st)) != cudaSuccess) return e;
  return launch<64, 64, D, T>(dv, dv->cls[3], Q, K, V, O, batch, heads, st);
}

}  // namespace ts_cuda

extern "C" int ts__cuda_launch_vartile(const ts__cuda_dev *dv, int bf16, const void *Q, const void *K, const void *V,
                                       float *O, int64_t batch, int64_t heads, void *stream) {
  using namespace ts_cuda;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  if (dv->d == 64)
    e = bf16 ? launch_all<64, uint16_t>(dv, Q, K, V, O, batch, heads, st)
             : launch_all<64, float>(dv, Q, K, V, O, batch, heads, st);
  else
    e = bf16 ? launch_all<0, uint16_t>(dv, Q, K, V, O, batch, heads, st)
             : launch_all<0, float>(dv, Q, K, V, O, batch, heads, st);
  if (e != cudaSuccess || dv->nsplits == 0) return e;
  dim3 grid((unsigned)dv->nsplits, (unsigned)heads, (unsigned)batch);
  combine_kernel<<<grid, kThreads, 0, st>>>(dv->splits, dv->ws, O, (int)dv->n, (int)dv->d, (int)heads, dv->nparts);
  return cudaGetLastError();
}
