// The hybrid room's device probe (scripts/gpu-check.sh): measures the curves of the device model
// on a real GPU and prints them as the "hybrid-device" JSON (docs/FORMATS.md), measured: true:
//   h2d, d2h  cudaMemcpy from and to pageable host memory (what a map task's buffers are), 4 KiB..1 GiB
//   gemm      a 64x64-tiled FP32 GEMM on CUDA cores, square sizes 64..8192 (FLOPs = 2 n^3)
//   scan      a streaming kernel reading every byte once (16-byte loads), 4 KiB..1 GiB
//   launch_s  an empty kernel's launch-to-completion time
// Each point is the median of 7 timings after one warm-up (CUDA events; copies timed with the wall
// clock around a synchronous cudaMemcpy). The per-job kernel factors (scan_factor, gemm_factor) are
// not measured here: tessera has no CUDA kernels for the jobs yet, so they stay the datasheet model's
// (the output says so in "source").
//
//   hybrid_probe > device.json && tessera hybrid device --store device.json
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "hybrid_probe: %s: %s\n", #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

__global__ void empty_kernel() {}

__global__ void scan_kernel(const uint4 *p, size_t n, unsigned *out) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = p[i];
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads
}

// C = A B, n x n row-major, 64x64 tiles, 16x16 threads with 4x4 outputs each.
__global__ void sgemm_kernel(const float *A, const float *B, float *C, int n) {
  __shared__ float As[64][17], Bs[16][65];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < n; k0 += 16) {
    for (int i = ty * 16 + tx; i < 64 * 16; i += 256) {
      int r = i / 16, c = i % 16;
      As[r][c] = (row0 + r < n && k0 + c < n) ? A[(size_t)(row0 + r) * n + k0 + c] : 0.f;
      int br = i / 64, bc = i % 64;
      Bs[br][bc] = (k0 + br < n && col0 + bc < n) ? B[(size_t)(k0 + br) * n + col0 + bc] : 0.f;
    }
    __syncthreads();
    for (int k = 0; k < 16; k++)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += As[ty * 4 + i][k] * Bs[k][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < n && c < n) C[(size_t)r * n + c] = acc[i][j];
    }
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
static double time_events(F f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < 7; r++) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return median(t);
}

template <class F>
static double time_wall(F f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < 7; r++) {
    auto a = std::chrono::steady_clock::now();
    f();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  return median(t);
}

static void print_curve(const char *name, const std::vector<std::pair<double, double>> &c, bool last) {
  std::printf("  \"%s\": [", name);
  for (size_t i = 0; i < c.size(); i++) std::printf("%s[%.6g, %.6g]", i ? ", " : "", c[i].first, c[i].second);
  std::printf("]%s\n", last ? "" : ",");
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t maxb = (size_t)1 << 30;
  char *host = (char *)std::malloc(maxb);
  if (!host) {
    std::fprintf(stderr, "hybrid_probe: no host memory\n");
    return 1;
  }
  for (size_t i = 0; i < maxb; i += 4096) host[i] = (char)i;
  char *dev;
  unsigned *sink;
  CK(cudaMalloc(&dev, maxb));
  CK(cudaMalloc(&sink, sizeof(unsigned)));
  std::vector<std::pair<double, double>> h2d, d2h, scan, gemm;
  for (size_t b = 4096; b <= maxb; b *= 8) {
    h2d.push_back({(double)b, time_wall([&] { CK(cudaMemcpy(dev, host, b, cudaMemcpyHostToDevice)); })});
    d2h.push_back({(double)b, time_wall([&] { CK(cudaMemcpy(host, dev, b, cudaMemcpyDeviceToHost)); })});
    scan.push_back({(double)b, time_events([&] {
                      size_t n = b / 16;
                      int blocks = (int)std::min<size_t>((n + 255) / 256, (size_t)prop.multiProcessorCount * 32);
                      scan_kernel<<<blocks, 256>>>((const uint4 *)dev, n, sink);
                    })});
  }
  double launch = time_events([] { empty_kernel<<<1, 1>>>(); });
  float *A, *B, *C;
  const int nmax = 8192;
  CK(cudaMalloc(&A, (size_t)nmax * nmax * sizeof(float)));
  CK(cudaMalloc(&B, (size_t)nmax * nmax * sizeof(float)));
  CK(cudaMalloc(&C, (size_t)nmax * nmax * sizeof(float)));
  CK(cudaMemset(A, 0, (size_t)nmax * nmax * sizeof(float)));
  CK(cudaMemset(B, 0, (size_t)nmax * nmax * sizeof(float)));
  for (int n = 64; n <= nmax; n *= 2) {
    dim3 grid((n + 63) / 64, (n + 63) / 64), block(16, 16);
    gemm.push_back({2.0 * n * n * (double)n, time_events([&] { sgemm_kernel<<<grid, block>>>(A, B, C, n); })});
  }
  CK(cudaGetLastError());
  std::printf("{\n  \"name\": \"%s\",\n", prop.name);
  std::printf("  \"source\": \"measured by bench/cuda/hybrid_probe.cu (pageable cudaMemcpy, FP32 CUDA-core GEMM, "
              "streaming scan); scan_factor and gemm_factor from the datasheet model\",\n");
  std::printf("  \"measured\": true,\n  \"launch_s\": %.6g,\n", launch);
  print_curve("h2d", h2d, false);
  print_curve("d2h", d2h, false);
  print_curve("gemm", gemm, false);
  print_curve("scan", scan, false);
  std::printf("  \"scan_factor\": {\"wordcount\": 200, \"grep\": 4},\n  \"gemm_factor\": {\"kmeans\": 2, \"gemm\": 1}\n}\n");
  CK(cudaFree(A));
  CK(cudaFree(B));
  CK(cudaFree(C));
  CK(cudaFree(dev));
  CK(cudaFree(sink));
  std::free(host);
  return 0;
}
