/* CPU feature detection (cpuid + xgetbv) and the ISA level the dispatch tables use. */
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/core.h"

static ts_cpu_features g_cpu;
static ts_isa g_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static void trim(char *s) {
  char *p = s;
  while (*p == ' ') p++;
  memmove(s, p, strlen(p) + 1);
  size_t n = strlen(s);
  while (n && s[n - 1] == ' ') s[--n] = 0;
}

static ts_isa supported_level(const ts_cpu_features *f) {
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->fma && f->f16c) return TS_ISA_AVX512;
  if (f->avx2 && f->fma && f->f16c) return TS_ISA_AVX2;
  return TS_ISA_SCALAR;
}

static void detect(void) {
  ts_cpu_features *f = &g_cpu;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  unsigned maxleaf = a;
  memcpy(f->vendor + 0, &b, 4);
  memcpy(f->vendor + 4, &d, 4);
  memcpy(f->vendor + 8, &c, 4);
  f->vendor[12] = 0;

  __get_cpuid(1, &a, &b, &c, &d);
  f->sse42 = c & (1u << 20);
  f->fma = c & (1u << 12);
  f->f16c = c & (1u << 29);
  bool osxsave = c & (1u << 27);
  bool avx = c & (1u << 28);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  f->os_avx = (xcr0 & 0x6) == 0x6;
  f->os_avx512 = f->os_avx && (xcr0 & 0xe0) == 0xe0;
  f->avx = avx && f->os_avx;
  if (!f->os_avx) f->fma = f->f16c = false;

  if (maxleaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = f->os_avx && (b & (1u << 5));
    f->gfni = c & (1u << 8);
    if (f->os_avx512) {
      f->avx512f = b & (1u << 16);
      f->avx512dq = b & (1u << 17);
      f->avx512cd = b & (1u << 28);
      f->avx512bw = b & (1u << 30);
      f->avx512vl = b & (1u << 31);
      f->avx512vnni = c & (1u << 11);
      f->avx512vpopcntdq = c & (1u << 14);
      unsigned a1, b1, c1, d1;
      __cpuid_count(7, 1, a1, b1, c1, d1);
      f->avx512bf16 = a1 & (1u << 5);
    }
  }

  __get_cpuid(0x80000000, &a, &b, &c, &d);
  if (a >= 0x80000004) {
    unsigned regs[12];
    for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    memcpy(f->model, regs, 48);
    f->model[48] = 0;
    trim(f->model);
  } else {
    strcpy(f->model, "unknown");
  }

  ts_isa act = supported_level(f);
  const char *cap = getenv("TESSERA_ISA");
  if (cap && *cap) {
    ts_isa want = strcmp(cap, "scalar") == 0 ? TS_ISA_SCALAR : strcmp(cap, "avx2") == 0 ? TS_ISA_AVX2 : TS_ISA_AVX512;
    if (want < act) act = want;
  }
  const char *ref = getenv("TESSERA_REF");
  if (ref && *ref && strcmp(ref, "0") != 0) act = TS_ISA_SCALAR;
  g_active = act;
}

const ts_cpu_features *ts_cpu(void) {
  pthread_once(&g_once, detect);
  return &g_cpu;
}

ts_isa ts_isa_supported(void) { return supported_level(ts_cpu()); }

ts_isa ts_isa_active(void) {
  pthread_once(&g_once, detect);
  return g_active;
}

const char *ts_isa_name(ts_isa isa) {
  switch (isa) {
    case TS_ISA_AVX512: return "avx512";
    case TS_ISA_AVX2: return "avx2";
    default: return "scalar";
  }
}

int ts_cpu_isa_list(const char **names, int max) {
  const ts_cpu_features *f = ts_cpu();
  const struct { bool on; const char *name; } all[] = {
      {f->sse42, "sse4.2"},         {f->avx, "avx"},           {f->avx2, "avx2"},
      {f->fma, "fma"},              {f->f16c, "f16c"},         {f->avx512f, "avx512f"},
      {f->avx512bw, "avx512bw"},    {f->avx512vl, "avx512vl"}, {f->avx512dq, "avx512dq"},
      {f->avx512cd, "avx512cd"},    {f->avx512vnni, "avx512vnni"},
      {f->avx512bf16, "avx512bf16"}, {f->avx512vpopcntdq, "avx512vpopcntdq"}, {f->gfni, "gfni"},
  };
  int n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i].on && n < max) names[n++] = all[i].name;
  return n;
}
