// Fixed-tile block-skip flash attention (the baseline): one thread block per (query tile, head,
// batch). The host lists each query tile's non-skipped key tiles in order (from the CPU plan of a
// block-skip or dense schedule: unmasked tiles have moff < 0, masked ones their bits); the block
// walks them, cutting each br x bc tile into chunks of the compiled shape (32x32 for tiles up to
// 32 x 32, else 64x64) with K/V loaded once per column chunk.
#include "cuda/attn_tile.cuh"

namespace ts_cuda {

template <int RB, int CB, int D, typename T>
__global__ void __launch_bounds__(kThreads)
    fixed_kernel(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, float *__restrict__ O,
                 int n, int d, int heads, const ts__cuda_unit *__restrict__ units,
                 const ts__cuda_chunk *__restrict__ tiles, const uint16_t *__restrict__ mbits, int g, float c) {
  extern __shared__ float4 smem_raw[];
  const ts__cuda_unit u = units[blockIdx.x];
  const int64_t off = ((int64_t)blockIdx.z * heads + blockIdx.y) * n * (D ? D : d);
  fixed_block<RB, CB, D, T>(reinterpret_cast<float *>(smem_raw), Q + off, K + off, V + off, O + off, d,
                            u, tiles, mbits, g, c);
}

template <int RB, int CB, int D, typename T>
static cudaError_t launch(const ts__cuda_dev *dv, const void *Q, const void *K, const void *V, float *O, int64_t batch,
                          int64_t heads, cudaStream_t stream) {
  const ts__cuda_class_run &run = dv->cls[dv->cls_fixed];
  if (run.nu == 0) return cudaSuccess;
  const size_t smem = ts__cuda_smem_bytes(run.g, RB, CB, dv->d);
  auto kern = fixed_kernel<RB, CB, D, T>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  const float c = 1.4426950408889634f / sqrtf((float)dv->d);
  dim3 grid((unsigned)run.nu, (unsigned)heads, (unsigned)batch);
  kern<<<grid, kThreads, smem, stream>>>(static_cast<const T *>(Q), static_cast<const T *>(K),
                                         static_cast<const T *>(V), O, (int)dv->n, (int)dv->d, (int)heads,
                                         dv->units + run.u0, dv->chunks, dv->mbits, run.g, c);
  return cudaGetLastError();
}

template <int D, typename T>
static cudaError_t launch_cls(const ts__cuda_dev *dv, const void *Q, const void *K, const void *V, float *O,
                              int64_t batch, int64_t heads, cudaStream_t st) {
  if (dv->cls_fixed == 1) return launch<32, 32, D, T>(dv, Q, K, V, O, batch, heads, st);
  return launch<64, 64, D, T>(dv, Q, K, V, O, batch, heads, st);
}

}  // namespace ts_cuda

extern "C" int ts__cuda_launch_fixed(const ts__cuda_dev *dv, int bf16, const void *Q, const void *K, const void *V,
                                     float *O, int64_t batch, int64_t heads, void *stream) {
  using namespace ts_cuda;
  if (dv->cls_fixed != 1 && dv->cls_fixed != 3) return (int)cudaErrorInvalidValue;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (dv->d == 64)
    return bf16 ? launch_cls<64, uint16_t>(dv, Q, K, V, O, batch, heads, st)
                : launch_cls<64, float>(dv, Q, K, V, O, batch, heads, st);
  return bf16 ? launch_cls<0, uint16_t>(dv, Q, K, V, O, batch, heads, st)
              : launch_cls<0, float>(dv, Q, K, V, O, batch, heads, st);
}
