/* Shared internals of the dense-block extraction (blocks*.c). Not public API. */
#ifndef TS_SPARSE_BLOCKS_INTERNAL_H
#define TS_SPARSE_BLOCKS_INTERNAL_H

#include "tessera/reorder.h"

/* Growable block array. */
typedef struct ts__block_list {
  ts_block *b;
  int64_t n, cap;
} ts__block_list;

ts_status ts__block_push(ts__block_list *l, int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t nnz);

/* The dp rule for one run of a row group: a block when rho * (h * len + block_cost) <= nnz. */
static inline bool ts__dp_is_block(double rho, double block_cost, int64_t h, int64_t len, int64_t nnz) {
  return rho * ((double)h * (double)len + block_cost) <= (double)nnz;
}

/* The extractors: fill the list with disjoint rectangles (nnz set); ts_blocks_extract sorts
 * them, builds the residue and checks every count. */
ts_status ts__blocks_greedy(const ts_csr *m, const ts_blocks_opts *o, ts__block_list *out);
/* *best: the optimal total cost the dp found (equals the objective of the emitted blocks). */
ts_status ts__blocks_dp(const ts_csr *m, const ts_blocks_opts *o, ts__block_list *out, double *best);

#endif
