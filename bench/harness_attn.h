/* Attention benchmarks' common input: a generated mask in the token order the scheduler uses. */
#ifndef TS_BENCH_HARNESS_ATTN_H
#define TS_BENCH_HARNESS_ATTN_H

#include "tessera/reorder.h"
#include "tessera/sparse.h"

/* The mask of pattern `spec` reordered by ts_attn_reorder with `method` (TS_REORDER_AUTO:
 * attention's own choice; a token grid from the generator is passed on), as CSR (*pm) and bitmap
 * (*bp); *used (may be NULL) gets the method that ran. */
ts_status ts_bench_attn_mask(const char *spec, ts_reorder_method method, ts_csr *pm, ts_bitmap *bp,
                             ts_reorder_method *used);

#endif
