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
 * *n (may be NULL) gets the token count. */
ts_status ts_bench_attn_load_plan(const char *path, const ts_context *ctx, const char *spec, int64_t d, ts_attn_plan **plan,
                                  int64_t *n);

#endif
