/* tessera sparse structure toolkit: 0/1 patterns (which query attends to which key, which input
 * channel feeds which output channel) in bitmap/CSR/COO/BSR form, pattern generators addressed by
 * spec strings, and permutations. Reorderings and dense-block extraction: tessera/reorder.h.
 *
 * Conventions:
 *  - A permutation is an int32 array `perm` of length n with perm[new_index] = old_index.
 *  - CSR column indices are sorted within each row and unique. */
#ifndef TESSERA_SPARSE_H
#define TESSERA_SPARSE_H

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows x cols pattern in CSR. val is NULL for a pure 0/1 pattern. rowptr: [rows+1]; col: [nnz]. */
typedef struct ts_csr {
  int64_t rows, cols, nnz;
  int64_t *rowptr;
  int32_t *col;
  float *val;
} ts_csr;

void ts_csr_free(ts_csr *m);

#ifdef __cplusplus
}
#endif
#endif
