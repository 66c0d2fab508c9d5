/* Helpers shared by the sparse format files (format_*.c) and the generators (gen_*.c).
 * Not public API. */
#ifndef TS_SPARSE_FORMAT_INTERNAL_H
#define TS_SPARSE_FORMAT_INTERNAL_H

#include "core/dispatch.h"
#include "tessera/sparse.h"

/* ts_malloc of count elements of `elem` bytes with an error naming `what` on overflow/OOM. */
void *ts__sp_alloc(int64_t count, size_t elem, const char *what);
/* Checks shape fields only (cheap): 0 <= rows, cols <= INT32_MAX, nnz >= 0, arrays present. */
ts_status ts__csr_check_header(const ts_csr *m, const char *who);
/* Splitmix-style 64-bit mix: independent per-row/per-purpose RNG streams from one seed, so
 * parallel generators give the same result whatever the thread count. */
uint64_t ts__mix64(uint64_t seed, uint64_t stream);

/* AVX-512 VPOPCNTDQ popcount of n words (format_bitmap_popcnt_avx512.c). */
int64_t ts__popcount_words_avx512(const uint64_t *w, int64_t n);
/* The popcount variants in the core dispatcher (reference, AVX-512 VPOPCNTDQ), each table a
 * ts__popcount_variant. */
typedef struct ts__popcount_variant {
  int64_t (*fn)(const uint64_t *w, int64_t n);
} ts__popcount_variant;
extern ts__dispatch ts__popcount_dispatch;

#endif
