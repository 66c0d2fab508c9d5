/* Shared internals of the reorderings (reorder*.c, order2d*.c). Not public API.
 *
 * Every method orders the "active" items only: tokens (symmetric mode) or rows / columns
 * (rectangular mode) that are neither dense (set aside, placed first) nor empty (placed last);
 * ts_reorder (reorder.c) assembles the final permutations around them. */
#ifndef TS_SPARSE_REORDER_INTERNAL_H
#define TS_SPARSE_REORDER_INTERNAL_H

#include "tessera/reorder.h"

/* What a method sees. Symmetric mode: items are the n tokens, row_active == col_active, and the
 * method fills row_order only. Rectangular: rows and columns separately. */
typedef struct ts__ro_problem {
  const ts_csr *m;
  const ts_reorder_opts *o;
  bool symmetric;
  const uint8_t *row_active, *col_active; /* [rows], [cols]: 1 = order it */
  int64_t nrow_active, ncol_active;
} ts__ro_problem;

/* Writes the active rows in their new order to row_order[0..nrow_active) and, in rectangular
 * mode, the active columns to col_order[0..ncol_active). groups / col_groups: see
 * ts_reorder_stats. */
typedef ts_status (*ts__ro_fn)(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                               int64_t *col_groups);
ts_status ts__ro_rcm(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups, int64_t *col_groups);
ts_status ts__ro_hc(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups, int64_t *col_groups);
ts_status ts__ro_ic(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups, int64_t *col_groups);
ts_status ts__ro_metis(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                       int64_t *col_groups);
ts_status ts__ro_morton(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                        int64_t *col_groups);
ts_status ts__ro_raster(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                        int64_t *col_groups);
ts_status ts__ro_hilbert(const ts__ro_problem *p, int32_t *row_order, int32_t *col_order, int64_t *groups,
                         int64_t *col_groups);

/* Local barycentric refinement of the hc/ic order (reorder_refine.c): re-sorts the items in
 * positions [rlo, rhi) of row_perm (and [clo, chi) of col_perm in rectangular mode) inside
 * segments of `window` by the mean position of their entries, keeping a pass only when it lowers
 * the number of non-empty tile x tile tiles. symmetric: col_perm is ignored (rows == columns). */
ts_status ts__refine_local(const ts_csr *m, bool symmetric, int32_t *row_perm, int64_t rlo, int64_t rhi,
                           int32_t *col_perm, int64_t clo, int64_t chi, int32_t tile, int window);

/* ts_pattern_tiles_nonempty without validating m (callers hold a validated pattern); the
 * permutations are still checked (O(n)). */
ts_status ts__tiles_nonempty(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm, int32_t tile,
                             int64_t *nonempty);

/* ---- graphs (reorder_graph.c) ------------------------------------------------------------ */

/* Columns per block when a pass scatters entries by column (see scatter_by_column). */
#define TS__COL_BLOCK 8192

/* Undirected graph in adjacency form: neighbours of v are adj[xadj[v] .. xadj[v+1]), sorted,
 * unique, no self loops. */
typedef struct ts__graph {
  int64_t n;
  int64_t *xadj; /* [n+1] */
  int32_t *adj;  /* [xadj[n]] */
} ts__graph;

void ts__graph_free(ts__graph *g);
/* Whether a square pattern equals its transpose on the off-diagonal entries between active
 * tokens, so A | A^T is just A. Tested by comparing, for every token, a sum of 64-bit hashes over
 * its row with the same sum over its column (one pass; the scatter goes to an n-word array). A
 * false "symmetric" needs a hash-sum collision, and even then only some A^T entries are missed
 * by a heuristic: results stay valid permutations. */
ts_status ts__looks_symmetric(const ts_csr *m, const uint8_t *active, bool *sym);
/* Square pattern -> graph of A | A^T over the tokens with active[t] (others keep no edges). */
ts_status ts__graph_sym(const ts_csr *m, const uint8_t *active, ts__graph *g);
/* rows x cols pattern -> bipartite graph: nodes 0..rows-1 are rows, rows..rows+cols-1 columns;
 * an edge per nonzero between an active row and an active column. */
ts_status ts__graph_bip(const ts_csr *m, const uint8_t *row_active, const uint8_t *col_active, ts__graph *g);
/* A graph ordering: writes the included nodes of g in order (order[0..*nwritten)) and a group count. */
typedef ts_status (*ts__graph_order_fn)(const ts__graph *g, const uint8_t *include, const ts_reorder_opts *o,
                                        int32_t *order, int64_t *nwritten, int64_t *groups);
/* Runs fn on the symmetrized graph (square, symmetric problems) or on the bipartite row/column
 * graph (rectangular), checking every active row and column is ordered; `name` labels errors. */
ts_status ts__ro_graph_order(const ts__ro_problem *p, const char *name, ts__graph_order_fn fn, int32_t *row_order,
                             int32_t *col_order, int64_t *groups, int64_t *col_groups);

/* Reverse Cuthill-McKee over the nodes with include[v] (NULL = all), written to order[] in the
 * sequence given by `starts` [nstarts]: its nodes are tried as component starts in that order
 * (NULL = every node by increasing degree; nodes of components no start reaches are skipped); each component is located from its first node by the George-Liu
 * pseudo-peripheral search, numbered by Cuthill-McKee (neighbours by increasing degree), tried
 * from up to `tries` candidate starts keeping the least bandwidth, and reversed in place.
 * label (NULL = none): the BFS never crosses between nodes of different labels, so components
 * live within one label. Returns the number of nodes written; *ncomp the components. */
ts_status ts__rcm(const ts__graph *g, const uint8_t *include, const int32_t *label, const int32_t *starts,
                  int64_t nstarts, int tries, int32_t *order, int64_t *nwritten, int64_t *ncomp);

/* ---- MinHash signatures and LSH (reorder_minhash.c) -------------------------------------- */

/* One-permutation MinHash: each element (a column, or q consecutive columns) hashes to one of
 * K bins and a 32-bit value; a set's signature holds the minimum value per bin, TS__SIG_EMPTY in
 * bins no element reached. The signature of a union is the element-wise minimum, and
 * matches / bins-not-both-empty estimates the Jaccard similarity. */
#define TS__SIG_K 64
#define TS__SIG_EMPTY UINT32_MAX

/* Signatures [nitem][K] of the active rows (side 0) or columns (side 1) of p, item k being the
 * k-th active one in index order (ids[k] gets its index). Symmetric mode: item = token, set =
 * its row and its column (A | A^T). Elements are active indices of the other side only. */
ts_status ts__sig_build(const ts__ro_problem *p, int side, uint32_t **sig, int32_t **ids, int64_t *nitem);
double ts__sig_sim(const uint32_t *a, const uint32_t *b);
void ts__sig_union(uint32_t *dst, const uint32_t *src);

/* LSH candidate pairs: for each band of r consecutive bins (K / r bands), items whose band is
 * not all empty are sorted by the band's hash; each is paired with the next `width` items of
 * the same bucket. pairs[k] = (a << 32) | b with a < b; duplicates possible. *pairs malloc'd. */
ts_status ts__lsh_pairs(const uint32_t *sig, int64_t nitem, int r, int width, uint64_t **pairs, int64_t *npairs);

/* Sorts n uint64 in place (LSD radix, 16 bits per pass, passes over all-equal digits skipped;
 * qsort below 16384 keys). */
ts_status ts__radix_sort_u64(uint64_t *a, int64_t n);

/* Orders items so similar ones sit next to each other, at every scale: agglomerative rounds of
 * greedy matching on the estimated Jaccard of cluster unions (LSH candidates), each merge
 * oriented so the most similar facing ends meet; the order is the tree read left to right.
 * item_size (NULL = rank pairs by Jaccard similarity): set sizes, to rank pairs by estimated
 * Hamming distance instead (which merges small sets first).
 * label (NULL = none): first merge only items of equal label (ic's clusters), then the rest.
 * *nat_target: number of clusters when the average cluster size first reached `target` (the
 * final number of roots when it never did). */
ts_status ts__agglomerate(const uint32_t *sig, int64_t nitem, const double *item_size, const int32_t *label,
                          int32_t target, int32_t *order, int64_t *nat_target);

#endif
