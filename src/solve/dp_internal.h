/* Shared pieces of the knapsack / partition dynamic programs. */
#ifndef TS_SOLVE_DP_INTERNAL_H
#define TS_SOLVE_DP_INTERNAL_H

#include "tessera/solve.h"

/* rows * cols * elem bytes, refused with TS_ERR_OVERFLOW (message names `what` and the sizes)
 * when the product overflows or exceeds TS_DP_MAX_TABLE_BYTES. */
ts_status ts__dp_table_bytes(const char *what, int64_t rows, int64_t cols, size_t elem, size_t *bytes);

/* 0/1 knapsack core over n items with weights in [0, cap], any values (items with value <= 0
 * are skipped). chosen[n] must be writable; best may be NULL. */
ts_status ts__knapsack01_core(const char *what, int n, const int64_t *w, const double *v, int64_t cap, bool *chosen,
                              double *best);

#endif
