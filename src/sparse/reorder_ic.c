/* Iterative clustering (ic): the unassigned item with the lowest index seeds a cluster; the
 * cluster grows breadth-first through LSH neighbours of its members, taking every unassigned
 * candidate whose estimated Jaccard similarity with the cluster's union signature is >= tau
 * (the union absorbs each new member, so a cluster stops when its footprint grows too wide for
 * its rows -- the blocking criterion of Sylos Labini et al.). The order then comes from the
 * agglomeration of reorder_hc.c run with the clusters as labels: it first merges inside each
 * cluster (ordering its members), then across, so similar clusters sit next to each other.
 * Candidates: B = 16 bands of 4 MinHash bins; each member looks at the W = 2 items on either side
 * of it in every band's sorted bucket list. Cost O(nnz) hashing + O(n B W K) similarity work +
 * the agglomeration of the clusters; memory O(n (K + 2B)). */
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

#define BAND 4
#define NBANDS (TS__SIG_K / BAND)
#define W 2

static uint64_t band_hash(const uint32_t *s, int b0, bool *any) {
  uint64_t h = 0x2545f4914f6cdd1dull + (uint64_t)b0;
  *any = false;
  for (int t = 0; t < BAND; t++) {
    *any |= s[t] != TS__SIG_EMPTY;
    h ^= s[t];
    h *= 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return h;
}

/* Threshold clusters: ptr [ncl+1] offsets into items [nitem]. */
static ts_status ic_cluster(const uint32_t *sig, int64_t nitem, double tau, int64_t *ptr, int32_t *items,
                            int64_t *ncl_out) {
  size_t n = (size_t)nitem + 1;
  int32_t *list = malloc(NBANDS * n * sizeof *list), *pos = malloc(NBANDS * n * sizeof *pos);
  uint32_t *bh = malloc(NBANDS * n * sizeof *bh);
  uint64_t *key = malloc(n * sizeof *key);
  uint8_t *assigned = calloc(n, 1);
  uint32_t csig[TS__SIG_K];
  ts_status s = TS_OK;
  if (!list || !pos || !bh || !key || !assigned) {
    s = ts_error(TS_ERR_OOM, "ic: band lists for %lld items", (long long)nitem);
    goto done;
  }
  int64_t cnt[NBANDS];
  for (int b = 0; b < NBANDS; b++) {
    int64_t nk = 0;
    for (int64_t i = 0; i < nitem; i++) {
      bool any;
      uint64_t h = band_hash(sig + (size_t)i * TS__SIG_K + b * BAND, b * BAND, &any);
      pos[(size_t)b * n + i] = -1;
      if (any) key[nk++] = (h & 0xffffffff00000000ull) | (uint64_t)i;
    }
    s = ts__radix_sort_u64(key, nk);
    if (s != TS_OK) goto done;
    for (int64_t k = 0; k < nk; k++) {
      int32_t i = (int32_t)(uint32_t)key[k];
      list[(size_t)b * n + k] = i;
      bh[(size_t)b * n + k] = (uint32_t)(key[k] >> 32);
      pos[(size_t)b * n + i] = (int32_t)k;
    }
    cnt[b] = nk;
  }
  int64_t ncl = 0, total = 0;
  ptr[0] = 0;
  for (int64_t s0 = 0; s0 < nitem; s0++) {
    if (assigned[s0]) continue;
    int64_t head = total;
    items[total++] = (int32_t)s0;
    assigned[s0] = 1;
    memcpy(csig, sig + (size_t)s0 * TS__SIG_K, sizeof csig);
    while (head < total) {
      int32_t u = items[head++];
      for (int b = 0; b < NBANDS; b++) {
        int64_t p = pos[(size_t)b * n + u];
        if (p < 0) continue;
        const int32_t *bl = list + (size_t)b * n;
        const uint32_t *bb = bh + (size_t)b * n;
        for (int64_t q = p - W; q <= p + W; q++) {
          if (q < 0 || q >= cnt[b] || q == p || bb[q] != bb[p]) continue;
          int32_t v = bl[q];
          if (assigned[v] || ts__sig_sim(sig + (size_t)v * TS__SIG_K, csig) < tau) continue;
          assigned[v] = 1;
          items[total++] = v;
          ts__sig_union(csig, sig + (size_t)v * TS__SIG_K);
        }
      }
    }
    ptr[++ncl] = total;
  }
  *ncl_out = ncl;
done:
  free(list), free(pos), free(bh), free(key), free(assigned);
  return s;
}

ts_status ts__ro_ic(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                    int64_t *col_groups) {
  for (int side = 0; side < (p->symmetric ? 1 : 2); side++) {
    uint32_t *sig;
    int32_t *ids;
    int64_t nitem, ncl = 0, unused;
    TS_TRY(ts__sig_build(p, side, &sig, &ids, &nitem));
    int64_t *ptr = malloc(((size_t)nitem + 2) * sizeof *ptr);
    int32_t *items = malloc(((size_t)nitem + 1) * sizeof *items), *ord = malloc(((size_t)nitem + 1) * sizeof *ord);
    int32_t *label = malloc(((size_t)nitem + 1) * sizeof *label);
    ts_status s = (ptr && items && ord && label) ? ic_cluster(sig, nitem, p->o->tau, ptr, items, &ncl)
                                                 : ts_error(TS_ERR_OOM, "ic: clusters of %lld items", (long long)nitem);
    if (s == TS_OK) {
      for (int64_t c = 0; c < ncl; c++)
        for (int64_t k = ptr[c]; k < ptr[c + 1]; k++) label[items[k]] = (int32_t)c;
      s = ts__agglomerate(sig, nitem, NULL, label, p->o->cluster_size, ord, &unused);
    }
    int32_t *out = side ? col_order : row_order;
    if (s == TS_OK)
      for (int64_t k = 0; k < nitem; k++) out[k] = ids[ord[k]];
    *(side ? col_groups : groups) = ncl;
    free(sig), free(ids), free(ptr), free(items), free(ord), free(label);
    TS_TRY(s);
  }
  return TS_OK;
}
