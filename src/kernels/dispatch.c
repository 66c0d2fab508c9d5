/* Kernel dispatch: one table per ISA level; the active one is picked once (pthread_once) from
 * ts_isa_active(), which already folds in TESSERA_REF=1 and the TESSERA_ISA cap. */
#include <pthread.h>

#include "kernels/kernels_internal.h"

#define TS__TABLE(sfx, level)                                                                      \
  {                                                                                                \
    level, ts__gemm_tile_##sfx, ts__softmax_rows_##sfx, ts__act_rows_##sfx, ts__vexp_##sfx,       \
        ts__layernorm_rows_##sfx, ts__rmsnorm_rows_##sfx                                           \
  }

static const ts__kernel_table g_tables[3] = {
    TS__TABLE(ref, TS_ISA_SCALAR),
    TS__TABLE(avx2, TS_ISA_AVX2),
    TS__TABLE(avx512, TS_ISA_AVX512),
};

static const ts__kernel_table *g_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void resolve(void) {
  ts_isa isa = ts_isa_active();
  if (isa < TS_ISA_SCALAR || isa > TS_ISA_AVX512) isa = TS_ISA_SCALAR;
  g_active = &g_tables[isa];
}

const ts__kernel_table *ts__kernels(void) {
  pthread_once(&g_once, resolve);
  return g_active;
}

const ts__kernel_table *ts__kernels_for(ts_isa isa) {
  if (isa < TS_ISA_SCALAR || isa > TS_ISA_AVX512) isa = TS_ISA_SCALAR;
  return &g_tables[isa];
}

ts_isa ts_kernels_isa(void) { return ts__kernels()->isa; }
