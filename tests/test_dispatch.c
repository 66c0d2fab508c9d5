/* The one ISA dispatcher (core/dispatch.h): the resolver on a made-up room of every level (the best
 * variant at or below a level that this CPU runs, exact levels, the list), and every room's active
 * variant under TESSERA_REF=1 and TESSERA_ISA=scalar|avx2|avx512, each in a child process (the cap
 * is read once per process): the level the room resolved must be the best of its variants that
 * this CPU runs within the cap, and the public level functions (ts_kernels_isa, ts_quant_isa,
 * ts_gconv_kernel_isa) must agree. */
#include <unistd.h>

#include "attn/attn_internal.h"
#include "conv/conv_internal.h"
#include "gconv/gconv_internal.h"
#include "llm/llm_internal.h"
#include "sparse/format_internal.h"
#include "tessera/kernels.h"
#include "tst.h"
#include "tst_dispatch.h"

/* kernels/kernels_internal.h's (its ts__rmsnorm_fn is not the LLM room's) */
extern ts__dispatch ts__kernels_dispatch;


static const int kTables[TS__LV_COUNT] = {0, 1, 2, 3, 4, 5, 6};
static const ts__variant kAll[] = {{TS__LV_SCALAR, &kTables[0]},           {TS__LV_AVX2, &kTables[1]},
                                   {TS__LV_AVX512, &kTables[2]},           {TS__LV_AVX512_VNNI, &kTables[3]},
                                   {TS__LV_AVX512_VNNI_GFNI, &kTables[4]}, {TS__LV_AVX512_BF16, &kTables[5]},
                                   {TS__LV_AVX512_VPOPCNTDQ, &kTables[6]}};

/* The expected pick, from the CPU's features directly: the last variant at or below cap whose
 * features the CPU has. */
static bool cpu_has(ts__level lv) {
  const ts_cpu_features *f = ts_cpu();
  const bool base2 = f->avx2 && f->fma && f->f16c && f->os_avx;
  const bool base512 = base2 && f->os_avx512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
  switch (lv) {
    case TS__LV_SCALAR: return true;
    case TS__LV_AVX2: return base2;
    case TS__LV_AVX512: return base512;
    case TS__LV_AVX512_VNNI: return base512 && f->avx512vnni;
    case TS__LV_AVX512_VNNI_GFNI: return base512 && f->avx512vnni && f->gfni;
    case TS__LV_AVX512_BF16: return base512 && f->avx512bf16;
    case TS__LV_AVX512_VPOPCNTDQ: return base512 && f->avx512vpopcntdq;
    default: return false;
  }
}

static ts__level expected(const ts__dispatch *d, ts__level cap) {
  ts__level best = d->variants[0].level;
  for (int i = 1; i < d->count; i++)
    if (d->variants[i].level <= cap && cpu_has(d->variants[i].level)) best = d->variants[i].level;
  return best;
}

static void test_resolver(void) {
  ts__dispatch room = TS__DISPATCH("made-up", kAll);
  for (int lv = 0; lv < TS__LV_COUNT; lv++) {
    CHECK(ts__level_supported((ts__level)lv) == cpu_has((ts__level)lv), "%s supported: dispatcher and cpuid disagree",
          ts__level_name((ts__level)lv));
    ts__level got = (ts__level)-1;
    const int *t = ts__dispatch_for(&room, (ts__level)lv, &got);
    CHECK(got == expected(&room, (ts__level)lv) && t == &kTables[got], "for(%s) gave %s",
          ts__level_name((ts__level)lv), ts__level_name(got));
    CHECK((got == (ts__level)lv) == cpu_has((ts__level)lv), "for(%s): got its own level exactly when the CPU has it",
          ts__level_name((ts__level)lv));
    const int *e = ts__dispatch_exact(&room, (ts__level)lv);
    CHECK(cpu_has((ts__level)lv) ? e == &kTables[lv] : e == NULL, "exact(%s)", ts__level_name((ts__level)lv));
    const ts__variant *l[TS__LV_COUNT];
    int n = ts__dispatch_list(&room, (ts__level)lv, l, TS__LV_COUNT), want = 0;
    for (int k = 0; k <= lv; k++) want += cpu_has((ts__level)k);
    bool ok = n == want && n > 0 && l[0]->level == got && l[n - 1]->level == TS__LV_SCALAR;
    for (int k = 1; k < n; k++) ok &= l[k]->level < l[k - 1]->level;
    CHECK(ok, "list(%s): %d variants, %d expected, highest first", ts__level_name((ts__level)lv), n, want);
  }
  /* a room without a level between: an AVX-512 BF16 request falls to the plain AVX-512 variant or lower */
  static const ts__variant some[] = {{TS__LV_SCALAR, &kTables[0]}, {TS__LV_AVX512, &kTables[2]}};
  ts__dispatch two = TS__DISPATCH("two", some);
  ts__level got;
  ts__dispatch_for(&two, TS__LV_AVX512_BF16, &got);
  CHECK(got == (cpu_has(TS__LV_AVX512) ? TS__LV_AVX512 : TS__LV_SCALAR), "bf16 request in a room without it: %s",
        ts__level_name(got));
  CHECK(ts__dispatch_exact(&two, TS__LV_AVX2) == NULL, "no variant registered at avx2");
  CHECK(ts__level_top(TS_ISA_SCALAR) == TS__LV_SCALAR && ts__level_top(TS_ISA_AVX2) == TS__LV_AVX2 &&
            ts__level_top(TS_ISA_AVX512) == TS__LV_COUNT - 1,
        "family tops");
  for (int lv = 0; lv < TS__LV_COUNT; lv++)
    CHECK(ts__level_isa((ts__level)lv) == (lv == 0 ? TS_ISA_SCALAR : lv == 1 ? TS_ISA_AVX2 : TS_ISA_AVX512) &&
              strcmp(ts__level_name((ts__level)lv), "unknown") != 0,
          "level %d's family and name", lv);
  CHECK(ts__level_cap() == ts__level_top(ts_isa_active()), "cap follows ts_isa_active");
}

/* Child: every room against the cap it was started under (argv[2]); returns the failures. */
static int child(const char *capname) {
  const ts_isa cap = !strcmp(capname, "scalar") ? TS_ISA_SCALAR : !strcmp(capname, "avx2") ? TS_ISA_AVX2 : TS_ISA_AVX512;
  const ts__level top = ts__level_top(cap);
  ts__dispatch *rooms[] = {&ts__kernels_dispatch, &ts__quant_dispatch, &ts__llm_ops_dispatch,
                           &ts__gconv_dispatch,   &ts__attn_dispatch,  &ts__popcount_dispatch,
                           &ts__conv_dispatch};
  int bad = 0;
  if (ts_isa_active() != (cap < ts_isa_supported() ? cap : ts_isa_supported())) {
    fprintf(stderr, "ts_isa_active %s under cap %s\n", ts_isa_name(ts_isa_active()), capname);
    bad++;
  }
  for (size_t i = 0; i < sizeof rooms / sizeof rooms[0]; i++) {
    const ts__level lv = ts__dispatch_level(rooms[i]), want = expected(rooms[i], top);
    if (lv != want || ts__level_isa(lv) > cap) {
      fprintf(stderr, "room %s resolved %s under cap %s, expected %s\n", rooms[i]->room, ts__level_name(lv), capname,
              ts__level_name(want));
      bad++;
    }
  }
  if (ts_kernels_isa() != ts__level_isa(expected(&ts__kernels_dispatch, top))) bad++, fprintf(stderr, "ts_kernels_isa\n");
  if (ts_quant_isa() != ts__level_isa(expected(&ts__quant_dispatch, top))) bad++, fprintf(stderr, "ts_quant_isa\n");
  if (ts_gconv_kernel_isa() != ts__level_isa(expected(&ts__gconv_dispatch, top))) bad++, fprintf(stderr, "ts_gconv_kernel_isa\n");
  /* an attention plan runs its family's best variant; a new plan's family is ts_isa_active() */
  if (ts__attn_kern_for(ts_isa_active()) != ts__dispatch_table(&ts__attn_dispatch)) bad++, fprintf(stderr, "attn plan table\n");
  /* the dispatched entries run (and whatever oneDNN level ts_sgemm caps to) */
  float a[4] = {1, 2, 3, 4}, c[4], y[4];
  if (ts_sgemm(NULL, TS_NO_TRANS, TS_NO_TRANS, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2) != TS_OK || c[0] != 7.0f || c[3] != 22.0f)
    bad++, fprintf(stderr, "ts_sgemm\n");
  if (ts_softmax_rows(1, 4, a, 4, y, 4) != TS_OK || !(y[3] > y[0])) bad++, fprintf(stderr, "ts_softmax_rows\n");
  return bad > 100 ? 100 : bad;
}

/* This program as a child under one environment setting, checking the cap capname; its exit code
 * (-1: did not run). */
static int run_child(const char *envset, const char *capname) {
  char *args[] = {(char *)"--child", (char *)capname, NULL};
  return tst_run_capped(envset, args);
}

static void test_environment(void) {
  static const struct {
    const char *env, *cap;
  } runs[] = {{"TESSERA_REF=1", "scalar"},     {"TESSERA_ISA=scalar", "scalar"}, {"TESSERA_ISA=avx2", "avx2"},
              {"TESSERA_ISA=avx512", "avx512"}, {"TESSERA_REF=0", "avx512"}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    int rc = run_child(runs[i].env, runs[i].cap);
    CHECK(rc == 0, "%s: %d rooms or entry points off (child's stderr above; -1: it did not run)", runs[i].env, rc);
  }
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--child")) return child(argv[2]);
  test_resolver();
  test_environment();
  return tst_finish();
}
