// Runs the pipeline's device executor (src/cuda/pipe_exec.cuh: block_main, its queues, counters
// and stage kernels) on the CPU: every persistent block is a std::thread, so the blocks' atomics
// on the queues, dependence counters and the outstanding counter race for real; the threads of a
// block are fibers (ucontext) on that block's OS thread, switched round robin at __syncthreads, so
// the thread-to-pixel striding, the shared-memory broadcast and the barriers are the device code's
// own. CUDA atomics (relaxed) map to relaxed __atomic builtins, __threadfence to a seq_cst fence,
// volatile queue loads/stores to relaxed atomic ones: the fence pattern of the device code is what
// orders the plane data here too (in the C++ model, with no extra ordering from the mapping).
//
// Optional jitter (a seed): random yields and short sleeps where pipe_exec.cuh marks
// TS_PD_JITTER (after a pop, before a release, between a push's reservation and its stores), so
// the blocks interleave in many orders on a two-core machine.
//
// Memory is host memory: the back end's alloc/copy/fill are malloc/memcpy/memset.
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include <chrono>
#include <new>
#include <thread>
#include <vector>

#define TS_PIPE_EMULATE 1
#define __device__
#define __forceinline__ inline

namespace {
struct emu_dim {
  unsigned x;
};
}  // namespace
static thread_local emu_dim threadIdx, blockIdx;
static emu_dim blockDim, gridDim;

static void __syncthreads();
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline int atomicSub(int *p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
static inline int atomicCAS(int *p, int cmp, int v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return cmp;  // the old value, as CUDA's
}
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) {
  unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
static inline int32_t ts_pd_load(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void ts_pd_store(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline uint64_t ts_pd_now() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
static inline void ts_pd_pause(unsigned) { sched_yield(); }
static void emu_jitter(int where);
#define TS_PD_LD(p) (*(p))
#define TS_PD_JITTER(where) emu_jitter(where)

#include "cuda/pipe_exec.cuh"

namespace {

#ifdef TS_SANITIZE
constexpr size_t kStack = 64 * 1024;  // ASan clears a whole stack's shadow on every switch: keep it small
#else
constexpr size_t kStack = 128 * 1024;
#endif

// The fibers of one block (on its own OS thread).
struct block_fibers {
  ucontext_t sched;
  std::vector<ucontext_t> ctx;
  std::vector<char> stacks;
  std::vector<char> done;
  int n = 0, cur = 0;
  int bar_count = 0, bar_gen = 0;
  const ts__pd_exec *E = nullptr;
  int32_t sh_task = 0;  // the block's shared memory
  uint64_t rng = 0;     // jitter (0: none)
};
thread_local block_fibers *F;

// Switches straight to the next unfinished fiber.
void yield() {
  int old = F->cur, next = old;
  do next = (next + 1) % F->n;
  while (F->done[next] && next != old);
  if (next == old) return;
  F->cur = next;
  threadIdx.x = (unsigned)next;
  swapcontext(&F->ctx[old], &F->ctx[next]);
}

}  // namespace

static void __syncthreads() {  // generation counter: the barrier is reusable at once
  const int g = F->bar_gen;
  if (++F->bar_count == F->n) {
    F->bar_count = 0;
    ++F->bar_gen;
    return;
  }
  while (F->bar_gen == g) yield();
}

namespace {

void fiber_main() {
  ts_pd::block_main(F->E, &F->sh_task);
  F->done[F->cur] = 1;  // returns to F->sched (uc_link)
}

void run_block(const ts__pd_exec *E, int b, int threads, uint64_t jitter_seed, int *fail) {
  block_fibers *fb = new (std::nothrow) block_fibers();
  if (!fb) {
    __atomic_store_n(fail, 1, __ATOMIC_RELAXED);
    return;
  }
  try {
    fb->ctx.resize((size_t)threads);
    fb->stacks.resize(kStack * (size_t)threads);
    fb->done.assign((size_t)threads, 0);
  } catch (...) {
    delete fb;
    __atomic_store_n(fail, 1, __ATOMIC_RELAXED);
    return;
  }
  fb->n = threads;
  fb->E = E;
  fb->rng = jitter_seed ? jitter_seed * 0x9e3779b97f4a7c15ull + (uint64_t)b + 1 : 0;
  F = fb;
  blockIdx.x = (unsigned)b;
  for (int t = 0; t < threads; t++) {
    getcontext(&fb->ctx[t]);
    fb->ctx[t].uc_stack.ss_sp = fb->stacks.data() + (size_t)t * kStack;
    fb->ctx[t].uc_stack.ss_size = kStack;
    fb->ctx[t].uc_link = &fb->sched;
    makecontext(&fb->ctx[t], fiber_main, 0);
  }
  // Fibers yield to each other; a finished fiber returns here and the next unfinished one resumes.
  for (int t = 0; t < threads; t++)
    while (!fb->done[t]) {
      fb->cur = t;
      threadIdx.x = (unsigned)t;
      swapcontext(&fb->sched, &fb->ctx[t]);
    }
  F = nullptr;
  delete fb;
}

struct emu_ctx {
  uint64_t jitter_seed;
};

int emu_alloc(void **p, size_t bytes, void *) {
  *p = malloc(bytes);
  return *p ? 0 : 1;
}
void emu_release(void *p, void *) { free(p); }
int emu_copy(void *dst, const void *src, size_t n, void *) {
  memcpy(dst, src, n);
  return 0;
}
int emu_fill(void *dst, int byte, size_t n, void *) {
  memset(dst, byte, n);
  return 0;
}
int emu_launch(const ts__pd_exec *E, int blocks, int threads, void *ctx) {
  const emu_ctx *c = static_cast<const emu_ctx *>(ctx);
  gridDim.x = (unsigned)blocks;
  blockDim.x = (unsigned)threads;
  int fail = 0;
  std::vector<std::thread> th;
  try {
    th.reserve((size_t)blocks);
    for (int b = 0; b < blocks; b++) th.emplace_back(run_block, E, b, threads, c->jitter_seed, &fail);
  } catch (...) {
    fail = 2;  // the started blocks still drain the launch
  }
  for (auto &t : th) t.join();
  return fail;
}
const char *emu_errstr(int e, void *) {
  return e == 1 ? "out of memory for a block's fibers" : e == 2 ? "cannot start a block's thread" : "error";
}

}  // namespace

static void emu_jitter(int where) {
  if (!F || !F->rng) return;
  uint64_t x = F->rng;  // xorshift64
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  F->rng = x;
  if ((x & 3) == 0) sched_yield();
  if ((x & 63) == (uint64_t)where) {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, nullptr);
  }
}

// A back end running launches as above: blocks x threads, `group` blocks per sharded queue,
// jitter_seed 0: no jitter. The context lives until the next call (tests are single-threaded).
extern "C" void ts__pd_emu_ops(ts__pd_ops *ops, int blocks, int threads, int group, uint64_t jitter_seed) {
  static emu_ctx ctx;
  ctx.jitter_seed = jitter_seed;
  memset(ops, 0, sizeof *ops);
  ops->name = "emulation";
  ops->ctx = &ctx;
  ops->alloc = emu_alloc;
  ops->release = emu_release;
  ops->h2d = emu_copy;
  ops->d2h = emu_copy;
  ops->d2d = emu_copy;
  ops->fill = emu_fill;
  ops->launch = emu_launch;
  ops->errstr = emu_errstr;
  ops->blocks = blocks;
  ops->threads = threads;
  ops->group = group;
  ops->stall_ns = 20000000000LL;
}
