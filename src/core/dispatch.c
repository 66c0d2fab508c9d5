/* The one ISA dispatcher (core/dispatch.h): levels from ts_cpu(), the cap from ts_isa_active(). */
#include "core/dispatch.h"

bool ts__level_supported(ts__level lv) {
  const ts_cpu_features *f = ts_cpu();
  const ts_isa sup = ts_isa_supported();
  switch (lv) {
    case TS__LV_SCALAR: return true;
    case TS__LV_AVX2: return sup >= TS_ISA_AVX2;
    case TS__LV_AVX512: return sup >= TS_ISA_AVX512;
    case TS__LV_AVX512_VNNI: return sup >= TS_ISA_AVX512 && f->avx512vnni;
    case TS__LV_AVX512_VNNI_GFNI: return sup >= TS_ISA_AVX512 && f->avx512vnni && f->gfni;
    case TS__LV_AVX512_BF16: return sup >= TS_ISA_AVX512 && f->avx512bf16;
    case TS__LV_AVX512_VPOPCNTDQ: return sup >= TS_ISA_AVX512 && f->avx512vpopcntdq;
    default: return false;
  }
}

ts__level ts__level_top(ts_isa isa) {
  return isa >= TS_ISA_AVX512 ? (ts__level)(TS__LV_COUNT - 1) : isa == TS_ISA_AVX2 ? TS__LV_AVX2 : TS__LV_SCALAR;
}

ts_isa ts__level_isa(ts__level lv) {
  return lv >= TS__LV_AVX512 ? TS_ISA_AVX512 : lv == TS__LV_AVX2 ? TS_ISA_AVX2 : TS_ISA_SCALAR;
}

ts__level ts__level_cap(void) { return ts__level_top(ts_isa_active()); }

const char *ts__level_name(ts__level lv) {
  static const char *const names[TS__LV_COUNT] = {"scalar",           "avx2",        "avx512",          "avx512_vnni",
                                                  "avx512_vnni_gfni", "avx512_bf16", "avx512_vpopcntdq"};
  return lv >= 0 && lv < TS__LV_COUNT ? names[lv] : "unknown";
}

/* The last listed variant at or below cap that the CPU runs; the reference when none. */
static const ts__variant *pick(const ts__dispatch *d, ts__level cap) {
  for (int i = d->count - 1; i > 0; i--)
    if (d->variants[i].level <= cap && ts__level_supported(d->variants[i].level)) return &d->variants[i];
  return &d->variants[0];
}

static const ts__variant *active(ts__dispatch *d) {
  const ts__variant *v = atomic_load_explicit(&d->active, memory_order_acquire);
  if (!v) { /* a race resolves twice to the same variant */
    v = pick(d, ts__level_cap());
    atomic_store_explicit(&d->active, v, memory_order_release);
  }
  return v;
}

const void *ts__dispatch_table(ts__dispatch *d) { return active(d)->table; }

ts__level ts__dispatch_level(ts__dispatch *d) { return active(d)->level; }

const void *ts__dispatch_for(const ts__dispatch *d, ts__level want, ts__level *got) {
  const ts__variant *v = pick(d, want);
  if (got) *got = v->level;
  return v->table;
}

const void *ts__dispatch_exact(const ts__dispatch *d, ts__level lv) {
  for (int i = 0; i < d->count; i++)
    if (d->variants[i].level == lv) return ts__level_supported(lv) ? d->variants[i].table : NULL;
  return NULL;
}

int ts__dispatch_list(const ts__dispatch *d, ts__level cap, const ts__variant **out, int max) {
  int n = 0;
  for (int i = d->count - 1; i >= 0 && n < max; i--)
    if (d->variants[i].level <= cap && ts__level_supported(d->variants[i].level)) out[n++] = &d->variants[i];
  return n;
}
