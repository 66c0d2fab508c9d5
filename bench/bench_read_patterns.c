/* How one core's read rate depends on the access pattern and on software prefetches: the facts
 * behind the packed LLM weight layout (src/llm/quant_internal.h) and its decode without weight
 * prefetches (quant_pgemm_vnni_avx512.c, its run-time weight prefetch). One thread reads a 256 MB buffer (transparent huge
 * pages where allowed, as the runtime's packed weights) once per pass; best and median of the
 * passes in GB/s, and % of the machine profile's one-thread read bandwidth.
 *
 *   linear            one ascending stream, the hardware prefetchers alone
 *   linear+T1 16K     the same with a T1 prefetch 16 KB ahead of every line (the old decode)
 *   linear+T1 4K      ... 4 KB ahead
 *   linear+T0 16K     ... a T0 prefetch 16 KB ahead
 *   2 streams         two streams interleaved line by line, `gap` bytes apart (the old decode tile:
 *                     two groups of 4 Q4_1 rows of 1536 columns, 3840 B each), then the next pair
 *   2 streams+T1 16K  the same with T1 prefetches 16 KB ahead
 *   pieces N          pieces of N bytes in a scattered order: every piece starts a new stream, as
 *                     every matrix share of a decode phase does (16 KB .. 1 MB)
 *   compute N ...     linear with N dependent-free fma rounds per 256 B (N = 6: ~40 GB/s of
 *                     arithmetic when the data is in L2, about a Q4_1 decode kernel's rate),
 *                     without and with T1 prefetches
 *
 *   bench_read_patterns [--passes 5] [--gap 3840] [--json]
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tessera/core.h"

#define AVX512 __attribute__((target("avx512f,fma"), noinline))

static volatile float g_sink;

/* linear read of n bytes, 256 B per step; hint 0 none, 1 T1, 2 T0 at `dist` bytes ahead; `work`
 * rounds of 4 independent fmas per step */
AVX512 static float linear(const char *p, size_t n, int hint, size_t dist, int work) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const __m512 m = _mm512_set1_ps(0.999f);
  for (size_t i = 0; i + 256 <= n; i += 256) {
    if (hint == 1)
      for (int k = 0; k < 4; k++) _mm_prefetch(p + i + dist + 64 * k, _MM_HINT_T1);
    if (hint == 2)
      for (int k = 0; k < 4; k++) _mm_prefetch(p + i + dist + 64 * k, _MM_HINT_T0);
    __m512 x0 = _mm512_load_ps(p + i), x1 = _mm512_load_ps(p + i + 64), x2 = _mm512_load_ps(p + i + 128),
           x3 = _mm512_load_ps(p + i + 192);
    for (int w = 0; w < work; w++) {
      x0 = _mm512_fmadd_ps(x0, m, x1);
      x1 = _mm512_fmadd_ps(x1, m, x2);
      x2 = _mm512_fmadd_ps(x2, m, x3);
      x3 = _mm512_fmadd_ps(x3, m, x0);
    }
    a0 = _mm512_add_ps(a0, x0), a1 = _mm512_add_ps(a1, x1), a2 = _mm512_add_ps(a2, x2), a3 = _mm512_add_ps(a3, x3);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* two streams `gap` bytes apart read line by line in turn, then the next pair of gap-byte pieces */
AVX512 static float pairs(const char *p, size_t n, size_t gap, int hint) {
  __m512 a = _mm512_setzero_ps(), b = a;
  for (size_t t = 0; t + 2 * gap <= n; t += 2 * gap)
    for (size_t o = 0; o + 64 <= gap; o += 64) {
      if (hint) {
        _mm_prefetch(p + t + o + 16384, _MM_HINT_T1);
        _mm_prefetch(p + t + gap + o + 16384, _MM_HINT_T1);
      }
      a = _mm512_add_ps(a, _mm512_load_ps(p + t + o));
      b = _mm512_add_ps(b, _mm512_load_ps(p + t + gap + o));
    }
  return _mm512_reduce_add_ps(_mm512_add_ps(a, b));
}

/* pieces of `piece` bytes (n / piece a power of two), piece k at (k x an odd stride) mod count: each
 * one a new stream starting far from the last */
static float pieces(const char *p, size_t n, size_t piece) {
  const size_t cnt = n / piece, stride = (cnt / 2 + 12345) | 1;
  float s = 0;
  for (size_t k = 0; k < cnt; k++) s += linear(p + (k * stride % cnt) * piece, piece, 0, 0, 0);
  return s;
}

typedef struct pat {
  const char *name;
  int kind; /* 0 linear, 1 pairs, 2 pieces of dist bytes */
  int hint;
  size_t dist;
  int work;
} pat;

int main(int argc, char **argv) {
  int passes = 5;
  size_t gap = 3840;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gap") && i + 1 < argc) gap = (size_t)atol(argv[++i]) / 64 * 64;
    else if (!strcmp(argv[i], "--json")) json = true;
    else {
      fprintf(stderr, "usage: bench_read_patterns [--passes 5] [--gap 3840] [--json]\n");
      return 2;
    }
  }
  if (passes < 1 || passes > 100 || gap < 64 || gap > ((size_t)1 << 24)) {
    fprintf(stderr, "bench_read_patterns: --passes 1..100, --gap 64..16M bytes\n");
    return 2;
  }
  if (!__builtin_cpu_supports("avx512f")) {
    fprintf(stderr, "bench_read_patterns: needs AVX-512 (the decode kernels it stands for do)\n");
    return 1;
  }
  const size_t bytes = (size_t)256 << 20, slack = (size_t)1 << 16; /* prefetches run past the end */
  char *p = ts_malloc_huge(bytes + slack);
  if (!p) {
    fprintf(stderr, "bench_read_patterns: %s\n", ts_last_error());
    return 1;
  }
  memset(p, 0x3f, bytes + slack); /* floats of 0.75: no denormals in the fma rounds */
  ts_machine_profile prof;
  const bool have = ts_bench_profile(&prof) == TS_OK;
  const double bw1 = have ? prof.bandwidth_gbs_1t : 0;
  const pat pats[] = {
      {"linear", 0, 0, 0, 0},           {"linear+T1 16K", 0, 1, 16384, 0}, {"linear+T1 4K", 0, 1, 4096, 0},
      {"linear+T0 16K", 0, 2, 16384, 0}, {"2 streams", 1, 0, 0, 0},         {"2 streams+T1 16K", 1, 1, 0, 0},
      {"pieces 16K", 2, 0, 16384, 0},  {"pieces 64K", 2, 0, 65536, 0},   {"pieces 256K", 2, 0, 262144, 0},
      {"pieces 1M", 2, 0, 1 << 20, 0},
      {"compute 6", 0, 0, 0, 6},        {"compute 6+T1 16K", 0, 1, 16384, 6}, {"compute 6+T1 2K", 0, 1, 2048, 6},
  };
  const int np = (int)(sizeof pats / sizeof pats[0]);
  if (!json)
    printf("one thread, 256 MB, %d passes; 2-stream gap %zu B; profile read bandwidth 1 thread %.1f GB/s\n"
           "%-18s %8s %8s %7s\n",
           passes, gap, bw1, "pattern", "best", "median", "%bw");
  else
    printf("[\n");
  double *g = malloc((size_t)passes * sizeof *g);
  for (int k = 0; k < np && g; k++) {
    const pat *q = &pats[k];
    for (int r = 0; r < passes; r++) {
      const double t0 = ts_now();
      g_sink = q->kind == 2 ? pieces(p, bytes, q->dist)
               : q->kind  ? pairs(p, bytes, gap, q->hint)
                          : linear(p, bytes, q->hint, q->dist, q->work);
      const double t = ts_now() - t0;
      g[r] = (double)bytes / (t > 1e-9 ? t : 1e-9) * 1e-9;
    }
    qsort(g, (size_t)passes, sizeof *g, ts_cmp_double);
    const double best = g[passes - 1], med = g[passes / 2];
    if (json)
      printf("  {\"pattern\": \"%s\", \"best_gbs\": %.3f, \"median_gbs\": %.3f, \"pct_bandwidth_1t\": %.2f}%s\n", q->name,
             best, med, bw1 > 0 ? 100 * best / bw1 : 0.0, k + 1 < np ? "," : "");
    else
      printf("%-18s %8.1f %8.1f %6.1f%%\n", q->name, best, med, bw1 > 0 ? 100 * best / bw1 : 0.0);
  }
  if (json) printf("]\n");
  free(g);
  ts_free(p);
  return 0;
}
