/* Internal entry points of the quant kernels: one unchecked function per ISA, and the dispatch
 * table the public wrappers (quant_dispatch.c) call through. Arguments are assumed valid: n a
 * positive multiple of 32 for block types, any n >= 0 for float types, pointers non-NULL where
 * read/written. Tests call each variant directly; *_avx2 /
 * *_avx512 functions may only run when ts_isa_supported() reports that level. */
#ifndef TS_LLM_QUANT_INTERNAL_H
#define TS_LLM_QUANT_INTERNAL_H

#include <stdint.h>

#include "tessera/quant.h"

/* Block structs as stored in the file (packed by construction: only 1- and 2-byte members). */
typedef struct ts__blk_q8_0 { uint16_t d; int8_t q[32]; } ts__blk_q8_0;
typedef struct ts__blk_q4_0 { uint16_t d; uint8_t qs[16]; } ts__blk_q4_0;
typedef struct ts__blk_q4_1 { uint16_t d, m; uint8_t qs[16]; } ts__blk_q4_1;
_Static_assert(sizeof(ts__blk_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(ts__blk_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(ts__blk_q4_1) == 20, "q4_1 block");

/* dot(row of n elements, activation): float types read x, block types read xq. */
typedef float (*ts__dot_fn)(int64_t n, const void *row, const float *x, const ts_quant_act *xq);
typedef void (*ts__actq_fn)(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum);

typedef struct ts__quant_table {
  ts_isa isa;
  ts__actq_fn act_quantize;
  ts__dot_fn dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0, dot_q4_1;
} ts__quant_table;

#define TS__QUANT_DECLARE(sfx)                                                                  \
  void ts__act_quantize_##sfx(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum);   \
  float ts__dot_f32_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);  \
  float ts__dot_f16_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);  \
  float ts__dot_bf16_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq); \
  float ts__dot_q8_0_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq); \
  float ts__dot_q4_0_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq); \
  float ts__dot_q4_1_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);

/* Scalar references: exact integer block sums, per-block terms accumulated in double; float types
 * accumulate in double. The reference activation quantizer is the definition of the format. */
TS__QUANT_DECLARE(ref)
TS__QUANT_DECLARE(avx2)
TS__QUANT_DECLARE(avx512)

/* The active table (resolved once from ts_isa_active()) and the table of a given level. */
const ts__quant_table *ts__quant(void);
const ts__quant_table *ts__quant_for(ts_isa isa);

/* y = W x with table t's dot for `type` over nt threads (one thread below 64 KiB of W); arguments
 * already validated (ts_quant_matvec_act). Benchmarks call it with each table. */
void ts__quant_matvec_with(const ts__quant_table *t, int nt, uint32_t type, const void *W, int64_t rows,
                           int64_t cols, const float *x, const ts_quant_act *xq, float *y);

/* Reference dequantize / quantize of n elements (n a multiple of the block size). */
void ts__dequant_ref(uint32_t type, const void *src, float *dst, int64_t n);
void ts__quantize_ref(uint32_t type, const float *src, void *dst, int64_t n);

#endif
