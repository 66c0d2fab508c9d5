/* Attention benchmarks' common input: a generated mask in the token order the scheduler uses. */
#ifndef TS_BENCH_HARNESS_ATTN_H
#define TS_BENCH_HARNESS_ATTN_H

#include "tessera/attn.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

/* The mask of pattern `spec` reordered by ts_attn_reorder with `method` (TS_REORDER_AUTO:
 * attention's own choice; a token grid from the generator is passed on), as CSR (*pm) and bitmap
 * (*bp); *used (may be NULL) gets the method that ran. */
ts_status ts_bench_attn_mask(const char *spec, ts_reorder_method method, ts_csr *pm, ts_bitmap *bp,
                             ts_reorder_method *used);

/* The plan file `path` (ts_attn_plan_load, e.g. from `tessera attn plan --out`) made for the mask of
 * pattern `spec`, created for head dimension d on the mask seen through the plan's permutation;
 * *n (may be NULL) gets the token count. `path@fixed:BRxBC`: instead of the plan's schedule, the
 * block-skip fixed tile BR x BC on the same permuted mask (the plan's fixed_best_reordered). */
ts_status ts_bench_attn_load_plan(const char *path, const ts_context *ctx, const char *spec, int64_t d, ts_attn_plan **plan,
                                  int64_t *n);

/* Random inputs for plan timings: Q, K, V [heads][n][d] drawn N(0, 1) (seed 3), with their bf16
 * copies when asked (qb/kb/vb, else NULL), and an output O. */
typedef struct ts_bench_attn_io {
  int64_t heads, n, d;
  float *q, *k, *v, *o;
  uint16_t *qb, *kb, *vb;
} ts_bench_attn_io;
ts_status ts_bench_attn_io_make(ts_bench_attn_io *io, int64_t heads, int64_t n, int64_t d, bool bf16);
void ts_bench_attn_io_free(ts_bench_attn_io *io);
/* One execute of plan over the first `heads` heads of io (batch 1), bf16 when io has the copies,
 * into O (NULL: io->o). */
ts_status ts_bench_attn_io_run(const ts_context *ctx, ts_attn_plan *plan, const ts_bench_attn_io *io, int64_t heads,
                               float *O);

#endif
