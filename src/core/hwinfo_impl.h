/* Internal to the machine profile: the per-ISA measurement loops (hwinfo_avx512.c, hwinfo_avx2.c,
 * hwinfo_sse2.c), each compiled with its own flags and called only when the CPU has that ISA. */
#ifndef TS_CORE_HWINFO_IMPL_H
#define TS_CORE_HWINFO_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* FMA loops: `iters` iterations of independent register-resident chains a = a*b + c, written in
 * inline asm so no optimization level can fold, hoist or spill them. They return a checksum of the
 * accumulators (keeps the work observable). Flops per iteration (one FMA = 2 flops):
 *   AVX-512: 16 zmm chains x 16 lanes x 2    AVX2: 12 ymm chains x 8 lanes x 2
 *   SSE2 (no FMA instruction at the scalar level): 14 xmm chains x 4 lanes x (mulps + addps). */
#define TS__FMA_FLOPS_AVX512 512.0
#define TS__FMA_FLOPS_AVX2 192.0
#define TS__FMA_FLOPS_SSE2 112.0
double ts__fma_loop_avx512(int64_t iters);
double ts__fma_loop_avx2(int64_t iters);
double ts__fma_loop_sse2(int64_t iters);

/* Read loops: sum of p[0..n) with the widest loads of their ISA and 8 accumulators (so add latency
 * never limits). p is 64-byte aligned and n a multiple of TS__READ_BLOCK floats. */
#define TS__READ_BLOCK 128
float ts__read_sum_avx512(const float *p, size_t n);
float ts__read_sum_avx2(const float *p, size_t n);
float ts__read_sum_sse2(const float *p, size_t n);

#endif
