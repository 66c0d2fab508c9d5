/* One-permutation MinHash signatures of row/column sets, their Jaccard estimate, LSH banding
 * into candidate pairs, and the radix sort they use. This is what keeps hc/ic away from O(n^2):
 * hashing is one table lookup per nonzero, and only LSH bucket neighbours are ever compared.
 *
 * Element e (a column index divided by the quotient q) maps to bin = top 6 bits and value =
 * low 32 bits of a 64-bit mix of (e, seed): one hash per element, precomputed per element. */
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

_Static_assert(TS__SIG_K == 64, "the bin is the top 6 bits of the element hash");

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static inline void sig_add(uint32_t *sig, uint8_t bin, uint32_t val) {
  if (val < sig[bin]) sig[bin] = val;
}

ts_status ts__sig_build(const ts__ro_problem *p, int side, uint32_t **sig_out, int32_t **ids_out, int64_t *nitem_out) {
  const ts_csr *m = p->m;
  int64_t R = m->rows, C = m->cols, q = p->o->quotient;
  const uint8_t *item_act = side == 0 ? p->row_active : p->col_active;
  int64_t nitem = side == 0 ? p->nrow_active : p->ncol_active, nall = side == 0 ? R : C;
  /* elements are indices of the other side (symmetric: tokens) */
  int64_t nelem = (side == 0 ? C : R) / q + 1;
  *sig_out = NULL, *ids_out = NULL, *nitem_out = 0;
  uint32_t *sig = malloc(((size_t)nitem + 1) * TS__SIG_K * sizeof *sig);
  int32_t *ids = malloc(((size_t)nitem + 1) * sizeof *ids), *idx = malloc(((size_t)nall + 1) * sizeof *idx);
  uint8_t *hbin = malloc((size_t)nelem);
  uint32_t *hval = malloc((size_t)nelem * sizeof *hval);
  if (!sig || !ids || !idx || !hbin || !hval) {
    free(sig), free(ids), free(idx), free(hbin), free(hval);
    return ts_error(TS_ERR_OOM, "minhash: signatures of %lld items", (long long)nitem);
  }
  for (size_t k = 0; k < (size_t)nitem * TS__SIG_K; k++) sig[k] = TS__SIG_EMPTY;
  uint64_t seed = mix64(p->o->seed * 0x9e3779b97f4a7c15ull + 0x51ed27);
  for (int64_t e = 0; e < nelem; e++) {
    uint64_t h = mix64((uint64_t)e ^ seed);
    hbin[e] = (uint8_t)(h >> 58);
    uint32_t v = (uint32_t)h;
    hval[e] = v == TS__SIG_EMPTY ? v - 1 : v;
  }
  int64_t k = 0;
  for (int64_t i = 0; i < nall; i++) {
    idx[i] = item_act[i] ? (int32_t)k : -1;
    if (item_act[i]) ids[k++] = (int32_t)i;
  }
  /* rows gain their columns (sequential) */
  if (side == 0)
    for (int64_t i = 0; i < R; i++) {
      if (!p->row_active[i]) continue;
      uint32_t *si = sig + (size_t)idx[i] * TS__SIG_K;
      for (int64_t t = m->rowptr[i]; t < m->rowptr[i + 1]; t++) {
        int32_t j = m->col[t];
        if (p->col_active[j]) sig_add(si, hbin[j / q], hval[j / q]);
      }
    }
  /* columns gain their rows: skipped when the pattern is symmetric (the row pass saw it all);
   * column blocks keep the scattered updates within TS__COL_BLOCK signatures at a time */
  bool need_cols = side == 1;
  if (side == 0 && p->symmetric) {
    bool sym;
    ts_status s = ts__looks_symmetric(m, p->row_active, &sym);
    if (s != TS_OK) {
      free(sig), free(ids), free(idx), free(hbin), free(hval);
      return s;
    }
    need_cols = !sym;
  }
  int64_t *cur = need_cols ? malloc(((size_t)R + 1) * sizeof *cur) : NULL;
  if (need_cols && !cur) {
    free(sig), free(ids), free(idx), free(hbin), free(hval);
    return ts_error(TS_ERR_OOM, "minhash: row cursors for %lld rows", (long long)R);
  }
  if (need_cols) memcpy(cur, m->rowptr, (size_t)R * sizeof *cur);
  for (int64_t c1 = TS__COL_BLOCK; need_cols && c1 - TS__COL_BLOCK < C; c1 += TS__COL_BLOCK)
    for (int64_t i = 0; i < R; i++) {
      if (!p->row_active[i]) continue;
      int64_t t = cur[i], end = m->rowptr[i + 1];
      for (; t < end && m->col[t] < c1; t++) {
        int32_t j = m->col[t];
        if (p->col_active[j]) sig_add(sig + (size_t)idx[j] * TS__SIG_K, hbin[i / q], hval[i / q]);
      }
      cur[i] = t;
    }
  free(cur);
  free(idx), free(hbin), free(hval);
  *sig_out = sig, *ids_out = ids, *nitem_out = nitem;
  return TS_OK;
}

double ts__sig_sim(const uint32_t *a, const uint32_t *b) {
  int match = 0, both_empty = 0;
  for (int k = 0; k < TS__SIG_K; k++) {
    match += a[k] == b[k] && a[k] != TS__SIG_EMPTY;
    both_empty += (a[k] & b[k]) == TS__SIG_EMPTY;
  }
  int valid = TS__SIG_K - both_empty;
  return valid ? (double)match / valid : 0.0;
}

void ts__sig_union(uint32_t *dst, const uint32_t *src) {
  for (int k = 0; k < TS__SIG_K; k++)
    if (src[k] < dst[k]) dst[k] = src[k];
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

ts_status ts__radix_sort_u64(uint64_t *a, int64_t n) {
  if (n < 2) return TS_OK;
  if (n < 16384) { /* 4 passes over 65536 counters would dominate */
    qsort(a, (size_t)n, sizeof *a, cmp_u64);
    return TS_OK;
  }
  uint64_t *tmp = malloc((size_t)n * sizeof *tmp);
  int64_t *cnt = malloc(65536 * sizeof *cnt);
  if (!tmp || !cnt) {
    free(tmp), free(cnt);
    return ts_error(TS_ERR_OOM, "radix sort of %lld keys", (long long)n);
  }
  uint64_t *src = a, *dst = tmp;
  for (int shift = 0; shift < 64; shift += 16) {
    memset(cnt, 0, 65536 * sizeof *cnt);
    for (int64_t i = 0; i < n; i++) cnt[(src[i] >> shift) & 0xffff]++;
    if (cnt[(src[0] >> shift) & 0xffff] == n) continue; /* one digit value: order unchanged */
    int64_t sum = 0;
    for (int d = 0; d < 65536; d++) {
      int64_t c = cnt[d];
      cnt[d] = sum;
      sum += c;
    }
    for (int64_t i = 0; i < n; i++) dst[cnt[(src[i] >> shift) & 0xffff]++] = src[i];
    uint64_t *t = src;
    src = dst, dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
  free(tmp), free(cnt);
  return TS_OK;
}

/* Appends pair (a, b) to a growable array. */
static bool push_pair(uint64_t **pairs, int64_t *n, int64_t *cap, uint32_t a, uint32_t b) {
  if (*n == *cap) {
    int64_t nc = *cap ? 2 * *cap : 4096;
    uint64_t *p = realloc(*pairs, (size_t)nc * sizeof *p);
    if (!p) return false;
    *pairs = p, *cap = nc;
  }
  if (a > b) {
    uint32_t t = a;
    a = b, b = t;
  }
  (*pairs)[(*n)++] = ((uint64_t)a << 32) | b;
  return true;
}

ts_status ts__lsh_pairs(const uint32_t *sig, int64_t nitem, int r, int width, uint64_t **pairs_out, int64_t *npairs_out) {
  *pairs_out = NULL, *npairs_out = 0;
  if (r < 1 || r > TS__SIG_K || TS__SIG_K % r)
    return ts_error(TS_ERR_INTERNAL, "lsh: band length %d does not divide %d", r, TS__SIG_K);
  uint64_t *key = malloc(((size_t)nitem + 1) * sizeof *key), *pairs = NULL;
  int64_t np = 0, cap = 0;
  if (!key) return ts_error(TS_ERR_OOM, "lsh: keys for %lld items", (long long)nitem);
  for (int b0 = 0; b0 < TS__SIG_K; b0 += r) {
    int64_t nk = 0;
    for (int64_t i = 0; i < nitem; i++) {
      const uint32_t *s = sig + (size_t)i * TS__SIG_K + b0;
      uint64_t h = 0x8f3ad6e1b2c4ull + (uint64_t)b0;
      bool any = false;
      for (int t = 0; t < r; t++) {
        any |= s[t] != TS__SIG_EMPTY;
        h = mix64(h ^ s[t]);
      }
      if (any) key[nk++] = (h & 0xffffffff00000000ull) | (uint64_t)i;
    }
    ts_status st = ts__radix_sort_u64(key, nk);
    if (st != TS_OK) {
      free(key), free(pairs);
      return st;
    }
    for (int64_t a = 0; a < nk; a++)
      for (int64_t b = a + 1; b < nk && b <= a + width && (key[b] >> 32) == (key[a] >> 32); b++)
        if (!push_pair(&pairs, &np, &cap, (uint32_t)key[a], (uint32_t)key[b])) {
          free(key), free(pairs);
          return ts_error(TS_ERR_OOM, "lsh: %lld candidate pairs", (long long)np);
        }
  }
  free(key);
  *pairs_out = pairs, *npairs_out = np;
  return TS_OK;
}
