/* Hierarchical (agglomerative) clustering order, shared by hc (from single items) and ic (from
 * its threshold clusters).
 *
 * Rounds: every current cluster has the MinHash signature of the union of its members' sets
 * (element-wise min); LSH bands propose candidate pairs; pairs are taken in decreasing estimated
 * Jaccard and merged when neither side merged yet this round (greedy matching, so sizes grow
 * evenly, about x2 per round). A merge keeps the two member sequences contiguous and picks the
 * orientation (A|B, A|rev B, rev A|B, rev A|rev B) whose touching end items are most similar, so
 * reading the final tree left to right puts similar clusters next to each other at every scale.
 * When a round merges few clusters the bands get shorter (4 -> 2 -> 1 bins: more, weaker
 * candidates); it stops when even that merges almost nothing, and the remaining roots are
 * sequenced by their signatures.
 * Cost per round: O(B * nc) hashing + radix sorts and O(B * W * nc * K) similarity estimates for
 * nc clusters, B <= 64 bands, W = 3 bucket neighbours, K = 64 bins; nc halves per round, so the
 * total is a small multiple of the first round. Memory O(n K). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

#define NEIGHBOURS 3
#define SIM_LEVELS 1024

typedef struct tree {
  int64_t L;                 /* leaves = items 0..L-1; internal nodes L..2L-2 */
  int32_t *child0, *child1;  /* [2L], valid for internal nodes */
  uint8_t *flip0, *flip1;    /* orientation of each child inside its parent */
  const uint32_t *leaf_sig;  /* [L][K] */
  uint32_t *node_sig;        /* [L][K]: union signature of internal node L + k */
} tree;

static const uint32_t *node_sig(const tree *t, int64_t v) {
  return v < t->L ? t->leaf_sig + (size_t)v * TS__SIG_K : t->node_sig + (size_t)(v - t->L) * TS__SIG_K;
}

/* The sub-cluster at the left (right = !left) end of node v read with orientation f, `depth`
 * levels down (or a leaf). */
static int64_t end_of(const tree *t, int64_t v, int f, bool left, int depth) {
  for (; depth > 0 && v >= t->L; depth--) {
    bool first = left != (f != 0); /* reading order is child0, child1 unless flipped */
    int nf = first ? t->flip0[v] : t->flip1[v];
    v = first ? t->child0[v] : t->child1[v];
    f ^= nf;
  }
  return v;
}

static int cmp_sig_rows(const void *a, const void *b, void *ctx) {
  const tree *t = ctx;
  const uint32_t *x = node_sig(t, *(const int32_t *)a), *y = node_sig(t, *(const int32_t *)b);
  for (int k = 0; k < TS__SIG_K; k++)
    if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
  return 0;
}

/* Emits node `root` (orientation 0) into order[*k...]. stack: [2L] entries (node << 1 | flip). */
static void emit(const tree *t, int32_t root, int64_t *stack, int32_t *order, int64_t *k) {
  int64_t sp = 0;
  stack[sp++] = (int64_t)root << 1;
  while (sp) {
    int64_t e = stack[--sp];
    int64_t v = e >> 1;
    int f = (int)(e & 1);
    if (v < t->L) {
      order[(*k)++] = (int32_t)v;
      continue;
    }
    int64_t c0 = ((int64_t)t->child0[v] << 1) | (t->flip0[v] ^ f), c1 = ((int64_t)t->child1[v] << 1) | (t->flip1[v] ^ f);
    if (!f) stack[sp++] = c1, stack[sp++] = c0; /* the stack pops the first child first */
    else stack[sp++] = c0, stack[sp++] = c1;
  }
}

/* Orientation of a merge A|B: the pair of facing end sub-clusters with the highest similarity.
 * Facing ends are compared at depths 1 (halves), 2 (quarters) and at the end items; the
 * summed similarity decides, so a clear large-scale fit wins and fine ends break ties. */
static void orient(const tree *t, int64_t A, int64_t B, int *fa, int *fb) {
  double best = -1;
  for (int x = 0; x < 2; x++)
    for (int y = 0; y < 2; y++) {
      double sm = 0;
      for (int d = 1; d <= 3; d++) {
        int depth = d == 3 ? INT32_MAX : d;
        sm += ts__sig_sim(node_sig(t, end_of(t, A, x, false, depth)), node_sig(t, end_of(t, B, y, true, depth)));
      }
      if (sm > best) best = sm, *fa = x, *fb = y;
    }
}

/* Merges clusters A and B into the new node v (A|B, each turned as orient() decides). */
static int64_t merge(tree *t, int64_t A, int64_t B, int64_t v, int32_t *cl_label) {
  int fa = 0, fb = 0;
  orient(t, A, B, &fa, &fb);
  t->child0[v] = (int32_t)A, t->child1[v] = (int32_t)B, t->flip0[v] = (uint8_t)fa, t->flip1[v] = (uint8_t)fb;
  if (cl_label) cl_label[v] = cl_label[A];
  uint32_t *ns = t->node_sig + (size_t)(v - t->L) * TS__SIG_K;
  memcpy(ns, node_sig(t, A), TS__SIG_K * sizeof *ns);
  ts__sig_union(ns, node_sig(t, B));
  return v;
}

ts_status ts__agglomerate(const uint32_t *sig, int64_t nitem, const double *item_size, const int32_t *label,
                          int32_t target, int32_t *order, int64_t *nat_target) {
  int64_t L = nitem;
  *nat_target = 0;
  if (L == 0) return TS_OK;
  size_t N = 2 * (size_t)L;
  tree t = {.L = L, .leaf_sig = sig};
  t.child0 = malloc(N * sizeof(int32_t)), t.child1 = malloc(N * sizeof(int32_t));
  t.flip0 = malloc(N), t.flip1 = malloc(N);
  t.node_sig = malloc((size_t)L * TS__SIG_K * sizeof(uint32_t));
  int32_t *act = malloc((size_t)L * sizeof *act), *nact = malloc((size_t)L * sizeof *nact);
  uint32_t *csig = malloc((size_t)L * TS__SIG_K * sizeof *csig);
  uint8_t *matched = malloc((size_t)L);
  int64_t *bucket = malloc((SIM_LEVELS + 2) * sizeof *bucket), *stack = malloc(N * sizeof *stack);
  uint64_t *pairs = NULL, *sorted = NULL;
  uint16_t *lvl = NULL;
  int32_t *cl_label = label ? malloc(N * sizeof *cl_label) : NULL; /* per node, phase 1 only */
  double *size = item_size ? malloc(N * sizeof *size) : NULL;       /* per node, Hamming only */
  ts_status s = TS_OK;
  if (!t.child0 || !t.child1 || !t.flip0 || !t.flip1 || !t.node_sig || !act || !nact || !csig || !matched || !bucket ||
      !stack || (label && !cl_label) || (item_size && !size)) {
    s = ts_error(TS_ERR_OOM, "hc: cluster tree of %lld leaves", (long long)L);
    goto done;
  }
  for (int64_t c = 0; c < L; c++) act[c] = (int32_t)c;
  if (label) memcpy(cl_label, label, (size_t)L * sizeof *cl_label);
  if (item_size) memcpy(size, item_size, (size_t)L * sizeof *size);
  int64_t nc = L, next = L;
  int band = 4;
  bool within = label != NULL; /* phase 1 of ic: merge only inside its clusters */
  if ((double)nitem >= (double)target * (double)nc) *nat_target = nc;
  while (nc > 1) {
    int64_t np;
    for (int64_t c = 0; c < nc; c++)
      memcpy(csig + (size_t)c * TS__SIG_K, node_sig(&t, act[c]), TS__SIG_K * sizeof *csig);
    free(pairs), free(sorted), free(lvl);
    pairs = sorted = NULL, lvl = NULL;
    s = ts__lsh_pairs(csig, nc, band, NEIGHBOURS, &pairs, &np);
    if (s != TS_OK) goto done;
    /* counting sort of the pairs, closest first: by quantized Jaccard similarity, or by the
     * estimated Hamming distance |A|+|B|-2|A&B| = (|A|+|B|)(1-J)/(1+J) on a log scale */
    sorted = malloc(((size_t)np + 1) * sizeof *sorted);
    lvl = malloc(((size_t)np + 1) * sizeof *lvl);
    if (!sorted || !lvl) {
      s = ts_error(TS_ERR_OOM, "hc: %lld candidate pairs", (long long)np);
      goto done;
    }
    memset(bucket, 0, (SIM_LEVELS + 2) * sizeof *bucket);
    for (int64_t k = 0; k < np; k++) {
      uint32_t a = (uint32_t)(pairs[k] >> 32), b = (uint32_t)pairs[k];
      double sim = ts__sig_sim(csig + (size_t)a * TS__SIG_K, csig + (size_t)b * TS__SIG_K);
      if (size) {
        double d = (size[act[a]] + size[act[b]]) * (1 - sim) / (1 + sim), q = 64 * log2(1 + d);
        lvl[k] = (uint16_t)(q < SIM_LEVELS ? q : SIM_LEVELS);
      } else {
        lvl[k] = (uint16_t)(SIM_LEVELS - (int)(sim * SIM_LEVELS)); /* 0 = identical */
      }
      bucket[lvl[k] + 1]++;
    }
    for (int l = 0; l <= SIM_LEVELS; l++) bucket[l + 1] += bucket[l];
    for (int64_t k = 0; k < np; k++) sorted[bucket[lvl[k]]++] = pairs[k];
    memset(matched, 0, (size_t)nc);
    int64_t merges = 0, nn = 0;
    for (int64_t k = 0; k < np; k++) {
      uint32_t a = (uint32_t)(sorted[k] >> 32), b = (uint32_t)sorted[k];
      if (a == b || matched[a] || matched[b]) continue;
      int32_t A = act[a], B = act[b];
      if (within && cl_label[A] != cl_label[B]) continue;
      matched[a] = matched[b] = 1;
      if (size) /* |A u B| = (|A| + |B|) / (1 + J) */
        size[next] = (size[A] + size[B]) / (1 + ts__sig_sim(node_sig(&t, A), node_sig(&t, B)));
      nact[nn++] = (int32_t)merge(&t, A, B, next++, cl_label);
      merges++;
    }
    for (int64_t c = 0; c < nc; c++)
      if (!matched[c]) nact[nn++] = act[c];
    int64_t prev = nc;
    nc = nn;
    int32_t *ta = act;
    act = nact, nact = ta;
    if (!*nat_target && (double)nitem >= (double)target * (double)nc) *nat_target = nc;
    if (merges * 20 < prev) {
      if (band > 1) {
        band /= 2;
      } else if (merges * 100 < prev || merges == 0) {
        if (!within) break;
        within = false, band = 4; /* ic: its clusters are done, now sequence them */
      }
    }
  }
  if (!*nat_target) *nat_target = nc;
  /* remaining roots: similar signatures next to each other */
  qsort_r(act, (size_t)nc, sizeof *act, cmp_sig_rows, &t);
  int64_t k = 0;
  for (int64_t c = 0; c < nc; c++) emit(&t, act[c], stack, order, &k);
  if (k != nitem) s = ts_error(TS_ERR_INTERNAL, "hc: emitted %lld of %lld items", (long long)k, (long long)nitem);
done:
  free(t.child0), free(t.child1), free(t.flip0), free(t.flip1), free(t.node_sig), free(cl_label), free(size);
  free(act), free(nact), free(csig), free(matched), free(bucket), free(stack), free(pairs), free(sorted), free(lvl);
  return s;
}

/* Set sizes for the Hamming ranking: active entries of each item's row (side 0) or column
 * (side 1); symmetric mode: the larger of the two. */
static ts_status item_sizes(const ts__ro_problem *p, int side, const int32_t *ids, int64_t nitem, double *isz) {
  const ts_csr *m = p->m;
  double *rc = calloc((size_t)m->rows + 1, sizeof *rc), *cc = calloc((size_t)m->cols + 1, sizeof *cc);
  if (!rc || !cc) {
    free(rc), free(cc);
    return ts_error(TS_ERR_OOM, "hc: set sizes of %lld items", (long long)nitem);
  }
  for (int64_t i = 0; i < m->rows; i++) {
    if (!p->row_active[i]) continue;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++)
      if (p->col_active[m->col[k]]) rc[i]++, cc[m->col[k]]++;
  }
  for (int64_t k = 0; k < nitem; k++) {
    int32_t id = ids[k];
    isz[k] = side ? cc[id] : p->symmetric ? (rc[id] > cc[id] ? rc[id] : cc[id]) : rc[id];
  }
  free(rc), free(cc);
  return TS_OK;
}

ts_status ts__ro_hc(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                    int64_t *col_groups) {
  bool hamming = p->o->distance == TS_REORDER_HAMMING;
  for (int side = 0; side < (p->symmetric ? 1 : 2); side++) {
    uint32_t *sig;
    int32_t *ids;
    int64_t nitem;
    TS_TRY(ts__sig_build(p, side, &sig, &ids, &nitem));
    int32_t *ord = malloc(((size_t)nitem + 1) * sizeof *ord);
    double *isz = hamming ? malloc(((size_t)nitem + 1) * sizeof *isz) : NULL;
    ts_status s = ord && (!hamming || isz) ? TS_OK : ts_error(TS_ERR_OOM, "hc: order of %lld items", (long long)nitem);
    if (s == TS_OK && hamming) s = item_sizes(p, side, ids, nitem, isz);
    if (s == TS_OK) s = ts__agglomerate(sig, nitem, isz, NULL, p->o->cluster_size, ord, side ? col_groups : groups);
    int32_t *out = side ? col_order : row_order;
    if (s == TS_OK)
      for (int64_t k = 0; k < nitem; k++) out[k] = ids[ord[k]];
    free(sig), free(ids), free(ord), free(isz);
    TS_TRY(s);
  }
  return TS_OK;
}
