// Runs the CUDA kernels' block walks (src/cuda/attn_tile.cuh: vartile_block, fixed_block) on the
// CPU: the 128 threads of a block are fibers (ucontext) on one OS thread, switched round robin at
// every __syncthreads and warp shuffle, so the device code itself (thread mapping, shared-memory
// layout, barriers, shuffles, mask addressing) is executed, not a re-implementation of it. Slow
// (a context switch per thread per barrier): for the small problems of test_attn_cuda only.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <new>
#include <vector>

#define TS_CUDA_EMULATE 1
#define __device__
#define __forceinline__ inline

namespace {
struct emu_idx {
  unsigned x;
};
}  // namespace
static emu_idx threadIdx;

static void __syncthreads();
static float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
static inline float __ldg(const float *p) { return *p; }
static inline uint16_t __ldg(const uint16_t *p) { return *p; }
static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
using std::min;

#include "cuda/attn_tile.cuh"

extern "C" {
#include "cuda/attn_cuda_internal.h"
}

namespace {

constexpr int kN = ts_cuda::kThreads;
constexpr size_t kStack = 256 * 1024;

struct fibers {
  ucontext_t sched, ctx[kN];
  std::vector<char> stacks;
  bool done[kN];
  int cur = 0;
  // barriers: block-wide and per warp; generation counters make them reusable
  int bar_count = 0, bar_gen = 0;
  int warp_count[kN / 32] = {0}, warp_gen[kN / 32] = {0};
  float slots[2][kN];  // shuffles alternate between two sets, so one barrier per shuffle suffices
  int parity[kN];
};
fibers *F;

// Switches straight to the next unfinished fiber (one context switch per yield).
void yield() {
  int old = F->cur, next = old;
  do next = (next + 1) % kN;
  while (F->done[next] && next != old);
  if (next == old) return;
  F->cur = next;
  threadIdx.x = (unsigned)next;
  swapcontext(&F->ctx[old], &F->ctx[next]);
}

void wait_group(int *count, int *gen, int n) {
  int g = *gen;
  if (++*count == n) {
    *count = 0;
    ++*gen;
    return;
  }
  while (*gen == g) yield();
}

}  // namespace

static void __syncthreads() { wait_group(&F->bar_count, &F->bar_gen, kN); }

static float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  // A lane can only write this set again after the next shuffle's barrier, which every lane of
  // the warp reaches only after reading this one.
  const int t = (int)threadIdx.x, w = t / 32, p = F->parity[t];
  F->parity[t] ^= 1;
  F->slots[p][t] = v;
  wait_group(&F->warp_count[w], &F->warp_gen[w], 32);
  return F->slots[p][(t & ~31) | ((t & 31) ^ lane_mask)];
}

namespace {

struct job {
  const ts__cuda_flat *f;
  int fixed, cls, bf16;
  const void *Q, *K, *V;
  float *O;
  int64_t bh;      // batch * heads
  float *ws;       // split parts' slots: bh * nparts * TS__CUDA_SLOT(d) floats
  float *smem;
  int g;
  float c;
};
job J;

template <int RB, int CB, int D, typename T>
void walk() {  // every fiber runs every block of the class, in the same order
  const ts__cuda_class_run &run = J.f->cls[J.cls];
  const int64_t n = J.f->n, d = J.f->d;
  for (int64_t h = 0; h < J.bh; h++)
    for (int64_t ui = run.u0; ui < run.u0 + run.nu; ui++) {
      const int64_t off = h * n * d;
      const T *Q = static_cast<const T *>(J.Q) + off, *K = static_cast<const T *>(J.K) + off,
              *V = static_cast<const T *>(J.V) + off;
      if (J.fixed)
        ts_cuda::fixed_block<RB, CB, D, T>(J.smem, Q, K, V, J.O + off, (int)d, J.f->units[ui], J.f->chunks, J.f->mbits,
                                           J.g, J.c);
      else {
        const ts__cuda_unit &u = J.f->units[ui];
        float *slot = u.part >= 0 ? J.ws + (h * J.f->nparts + u.part) * TS__CUDA_SLOT(d) : nullptr;
        ts_cuda::vartile_block<RB, CB, D, T>(J.smem, Q, K, V, J.O + off, (int)d, u, J.f->chunks, J.f->mbits,
                                             J.f->cols, slot, J.g, J.c);
      }
      __syncthreads();  // the next block reuses the shared memory
    }
}

template <int D, typename T>
void walk_cls() {
  switch (J.cls) {
    case 0: walk<16, 64, D, T>(); break;
    case 1: walk<32, 32, D, T>(); break;
    case 2: walk<32, 64, D, T>(); break;
    default: walk<64, 64, D, T>(); break;
  }
}

void fiber_main() {
  if (J.f->d == 64) J.bf16 ? walk_cls<64, uint16_t>() : walk_cls<64, float>();
  else J.bf16 ? walk_cls<0, uint16_t>() : walk_cls<0, float>();
  F->done[F->cur] = true;
}

}  // namespace

// Same contract as ts__cuda_launch_fixed / _vartile, on host arrays; bh = batch * heads.
// Returns 0, or -1 when memory runs out.
extern "C" int ts__cuda_emulate(const ts__cuda_flat *f, int fixed, int cls_fixed, int bf16, const void *Q,
                                const void *K, const void *V, float *O, int64_t bh) {
  fibers *fb = new (std::nothrow) fibers();
  if (!fb) return -1;
  fb->stacks.resize(kStack * kN);
  F = fb;
  const float c = 1.4426950408889634f / sqrtf((float)f->d);
  std::vector<float> ws((size_t)(bh * f->nparts * TS__CUDA_SLOT(f->d)) + 1, NAN);  // NaN: unwritten slots show up
  for (int cl = 0; cl < TS__CUDA_NCLASS; cl++) {
    if (fixed && cl != cls_fixed) continue;
    if (f->cls[cl].nu == 0) continue;
    const size_t bytes = ts__cuda_smem_bytes(f->cls[cl].g, ts__cuda_class_rb[cl], ts__cuda_class_cb[cl], f->d);
    std::vector<float> smem(bytes / sizeof(float) + 1, NAN);  // NaN: reads of unwritten shared memory show up
    J = job{f, fixed, cl, bf16, Q, K, V, O, bh, ws.data(), smem.data(), f->cls[cl].g, c};
    for (int t = 0; t < kN; t++) {
      fb->parity[t] = 0;
      getcontext(&fb->ctx[t]);
      fb->ctx[t].uc_stack.ss_sp = fb->stacks.data() + (size_t)t * kStack;
      fb->ctx[t].uc_stack.ss_size = kStack;
      fb->ctx[t].uc_link = &fb->sched;
      makecontext(&fb->ctx[t], fiber_main, 0);
      fb->done[t] = false;
    }
    // Fibers yield to each other; a finished fiber returns here (uc_link) and the next one resumes.
    for (int t = 0; t < kN; t++)
      while (!fb->done[t]) {
        fb->cur = t;
        threadIdx.x = (unsigned)t;
        swapcontext(&fb->sched, &fb->ctx[t]);
      }
  }
  delete fb;
  F = nullptr;
  // combine_kernel's loop (one thread suffices: no barriers) with the device code's combine_elem
  const int64_t d = f->d, slot = TS__CUDA_SLOT(d);
  for (int64_t h = 0; h < bh; h++)
    for (int64_t sp = 0; sp < f->nsplits; sp++) {
      const ts__cuda_split &s = f->splits[sp];
      for (int64_t idx = 0; idx < (int64_t)s.rows * d; idx++) {
        const int i = (int)(idx / d), k = (int)(idx % d);
        O[h * f->n * d + (int64_t)(s.r0 + i) * d + k] =
            ts_cuda::combine_elem(ws.data() + h * f->nparts * slot, slot, s.p0, s.np, i, k, (int)d);
      }
    }
  return 0;
}
