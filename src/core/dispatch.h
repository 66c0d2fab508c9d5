/* One ISA dispatcher for every room (internal; docs/ARCHITECTURE.md, "Dispatch").
 *
 * A room lists its kernel variants as {level, table} pairs, the scalar reference first and the
 * others in increasing level, and declares one ts__dispatch over them:
 *
 *   static const ts__variant variants[] = {{TS__LV_SCALAR, &ref}, {TS__LV_AVX2, &avx2},
 *                                          {TS__LV_AVX512_VNNI, &vnni}};
 *   ts__dispatch ts__room_dispatch = TS__DISPATCH("room", variants);
 *   const room_table *ts__room(void) { return ts__dispatch_table(&ts__room_dispatch); }
 *
 * The active variant is resolved once per room (an atomic pointer; resolving twice gives the same
 * answer): the highest-listed variant whose level this CPU supports and that is at or below the cap
 * ts__level_cap() (TESSERA_ISA=scalar|avx2|avx512 and TESSERA_REF=1 through ts_isa_active()).
 * Tests and benchmarks ask for a level explicitly (ts__dispatch_for, ts__dispatch_exact), which
 * ignores the environment's cap but never returns a variant the CPU cannot run. */
#ifndef TS_CORE_DISPATCH_H
#define TS_CORE_DISPATCH_H

#include <stdatomic.h>
#include <stdbool.h>

#include "tessera/core.h"

/* Kernel levels: an ISA family (scalar, AVX2 + FMA + F16C, AVX-512 F/BW/VL/DQ + FMA + F16C) and,
 * inside AVX-512, the extensions some kernels need on top of the base. The extensions are not
 * nested on real CPUs (Ice Lake: VNNI + GFNI, no BF16; Cooper Lake: VNNI + BF16, no GFNI), so a
 * level is "supported" by its own feature test (ts__level_supported), and the order below only
 * ranks one room's variants: the resolver takes the last listed variant that is supported. */
typedef enum ts__level {
  TS__LV_SCALAR = 0,
  TS__LV_AVX2,
  TS__LV_AVX512,
  TS__LV_AVX512_VNNI,      /* + AVX512_VNNI (vpdpbusd) */
  TS__LV_AVX512_VNNI_GFNI, /* + AVX512_VNNI + GFNI (EVEX vgf2p8affineqb) */
  TS__LV_AVX512_BF16,      /* + AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16) */
  TS__LV_AVX512_VPOPCNTDQ, /* + AVX512_VPOPCNTDQ */
  TS__LV_COUNT
} ts__level;

typedef struct ts__variant {
  ts__level level;
  const void *table; /* the room's table (a struct of function pointers, or a struct holding one) */
} ts__variant;

typedef struct ts__dispatch {
  const char *room;              /* for messages: "kernels", "quant", ... */
  const ts__variant *variants;   /* variants[0] is the scalar reference; levels increasing */
  int count;
  _Atomic(const ts__variant *) active; /* NULL until the first ts__dispatch_table / _level */
} ts__dispatch;

#define TS__DISPATCH(name, arr) {(name), (arr), (int)(sizeof(arr) / sizeof((arr)[0])), NULL}

/* The active variant's table and level (resolved on first use, then one atomic load). */
const void *ts__dispatch_table(ts__dispatch *d);
ts__level ts__dispatch_level(ts__dispatch *d);

/* The best variant at or below `want` that this CPU runs (the environment's cap is not applied);
 * its level goes to *got when got is not NULL: *got != want says the CPU (or the room) lacks
 * `want`. Never NULL: the scalar reference runs everywhere. */
const void *ts__dispatch_for(const ts__dispatch *d, ts__level want, ts__level *got);
/* The variant registered at exactly `lv`, or NULL when the room has none there or this CPU lacks
 * it: a test comparing level lv with the reference skips (and says so) on NULL. */
const void *ts__dispatch_exact(const ts__dispatch *d, ts__level lv);
/* The variants this CPU runs at or below `cap`, highest first, into out[0..max); returns how many. */
int ts__dispatch_list(const ts__dispatch *d, ts__level cap, const ts__variant **out, int max);

/* Whether this CPU (with OS support for the registers) has every feature of level lv. */
bool ts__level_supported(ts__level lv);
/* The cap from the environment: ts__level_top(ts_isa_active()). */
ts__level ts__level_cap(void);
/* The highest level of an ISA family (AVX512: every AVX-512 extension level), and a level's family. */
ts__level ts__level_top(ts_isa isa);
ts_isa ts__level_isa(ts__level lv);
/* "scalar", "avx2", "avx512", "avx512_vnni", "avx512_vnni_gfni", "avx512_bf16", "avx512_vpopcntdq" */
const char *ts__level_name(ts__level lv);

#endif
