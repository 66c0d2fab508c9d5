// The pipeline executor's kernel: one persistent grid per launch running pipe_exec.cuh's block
// loop. Compiled with --fmad=false (cmake/pipe_cuda.cmake): the stage kernels must round like the
// C kernels, which are built in ISO C mode without FP contraction.
#include "cuda/pipe_exec.cuh"

namespace {

constexpr int kMaxThreads = 256;

__global__ void __launch_bounds__(kMaxThreads) pipe_kernel(const __grid_constant__ ts__pd_exec E) {
  __shared__ int32_t task;
  ts_pd::block_main(&E, &task);
}

}  // namespace

extern "C" int ts__pd_cuda_grid(int threads, int *blocks) {
  int dev = 0, sms = 0, per = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, pipe_kernel, threads, 0);
  if (e != cudaSuccess) return (int)e;
  *blocks = sms * (per > 0 ? per : 1);
  return 0;
}

extern "C" int ts__pd_cuda_launch(const ts__pd_exec *E, int blocks, int threads) {
  if (threads < 1 || threads > kMaxThreads || blocks < 1) return (int)cudaErrorInvalidValue;
  pipe_kernel<<<blocks, threads>>>(*E);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return (int)e;
}
