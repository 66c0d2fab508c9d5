/* tessera reorderings, dense-block extraction and pattern metrics: the analysis front end of
 * tile-aware sparse attention (mask -> reorder -> locally dense blocks -> tile assignment) and of
 * unstructured group convolution (reorder the rows and columns of a cout x cin connectivity).
 *
 * Conventions (as in tessera/sparse.h): a permutation is int32 perm[new] = old; patterns are CSR
 * with sorted unique columns (ts_csr_validate); indices fit int32.
 *
 * Reordering modes. A square token pattern (attention mask) is relabelled symmetrically: one
 * permutation for rows and columns (P A P^T), computed on the symmetrized pattern A | A^T. A
 * rectangular (or explicitly non-symmetric) pattern gets independent row and column orders.
 *
 * Dense tokens. Rows/columns with very many nonzeros (global tokens: degree >= dense_frac * n AND
 * > 4 x the median degree) connect everything and ruin every locality heuristic. Every method but
 * `none` sets them aside and places them first (in their original relative order); items with no
 * nonzeros at all (after removing the dense ones) are placed last. */
#ifndef TESSERA_REORDER_H
#define TESSERA_REORDER_H

#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reorderings -------------------------------------------------------------------------- */

typedef enum ts_reorder_method {
  TS_REORDER_NONE = 0, /* identity */
  TS_REORDER_RCM,      /* reverse Cuthill-McKee, George-Liu pseudo-peripheral starts */
  TS_REORDER_HC,       /* agglomerative (hierarchical) clustering on MinHash signatures, read
                          as a tree so similar clusters are adjacent, locally refined */
  TS_REORDER_IC,       /* iterative (greedy Jaccard-threshold) clusters, then sequenced as hc */
  TS_REORDER_METIS,    /* METIS recursive bisection into parts, items by part, RCM in a part */
  TS_REORDER_MORTON,   /* Z-order of the token grid */
  TS_REORDER_HILBERT,  /* Hilbert curve over the token grid */
  TS_REORDER_RASTER,   /* row-major order of the token grid (the natural order of a 2-D pattern
                          whose tokens were relabelled: sliding windows then sit on diagonals) */
  TS_REORDER_AUTO,     /* tries none, rcm, hc, ic (+ morton, hilbert, raster with a grid), keeps the
                          fewest non-empty tile x tile tiles (metis is left out: slow) */
  TS_REORDER_METHOD_COUNT
} ts_reorder_method;

/* "none", "rcm", "hc", "ic", "metis", "morton", "hilbert", "raster", "auto" ("?" when out of range). */
const char *ts_reorder_method_name(ts_reorder_method m);
/* Parses a name as printed above (exact, lower case). TS_ERR_INVALID_ARG listing the names. */
ts_status ts_reorder_method_parse(const char *name, ts_reorder_method *out);

typedef enum ts_reorder_mode {
  TS_REORDER_MODE_AUTO = 0,    /* symmetric when square, else rows and columns independently */
  TS_REORDER_MODE_SYMMETRIC,   /* one permutation for both sides; the pattern must be square */
  TS_REORDER_MODE_RECTANGULAR  /* independent row and column orders (square patterns too) */
} ts_reorder_mode;

/* hc: which pairs of clusters merge first. Both are estimated from MinHash signatures. */
typedef enum ts_reorder_distance {
  TS_REORDER_JACCARD = 0, /* highest Jaccard similarity |A&B| / |A or B| first */
  TS_REORDER_HAMMING      /* smallest Hamming distance |A| + |B| - 2|A&B| first (small sets first) */
} ts_reorder_distance;

typedef struct ts_reorder_opts {
  ts_reorder_method method;
  ts_reorder_mode mode;
  int32_t cluster_size; /* hc: target average cluster size (8) */
  ts_reorder_distance distance; /* hc: merge order (jaccard) */
  double tau;           /* ic: Jaccard threshold in (0, 1] for joining a cluster (0.6) */
  int32_t quotient;     /* hc/ic: columns per signature element ("quotient" bitsets of q
                           consecutive columns); 1 = exact columns (1). Coarsening only helps
                           when the column order already means something: on a randomly
                           relabelled window1d, q = 16 left 3-6x more non-empty tiles */
  int32_t refine_window; /* hc/ic: segment of the local barycentric refinement that follows
                           the clustering order, kept only where it lowers the non-empty
                           tile x tile count; 0 = off (64) */
  int32_t part_size;    /* metis: target items per part (32) */
  /* morton/hilbert/raster: token grid. Token t sits at cell grid_pos[t] (= y * grid_w + x) when
   * grid_pos is given (e.g. ts_pattern_info.base_index; a negative entry marks a token outside
   * the grid, placed first), else at cell t, which needs n == grid_h * grid_w. */
  int64_t grid_h, grid_w;
  const int32_t *grid_pos;
  double dense_frac;    /* dense-token threshold as a fraction of n; 0 disables (0.25) */
  int32_t tile;         /* auto and the hc/ic refinement: tile side of their criterion (16) */
  uint64_t seed;        /* hashing (hc/ic) and METIS seed (1) */
} ts_reorder_opts;

/* Fills the defaults above (method = none, mode = auto, no grid). */
void ts_reorder_opts_default(ts_reorder_opts *o);

typedef struct ts_reorder_stats {
  ts_reorder_method method;  /* the method that made the permutation (auto: the winner) */
  bool symmetric;            /* row_perm == col_perm */
  double ms;                 /* wall time of ts_reorder */
  int64_t dense_rows, dense_cols; /* set aside and placed first (symmetric: the same tokens) */
  int64_t empty_rows, empty_cols; /* no nonzeros once dense ones are removed: placed last */
  /* rcm: connected components; hc: clusters when the average size first reached cluster_size;
   * ic: clusters; metis: parts; none/morton/hilbert/raster: 0. col_groups: the same for the columns in
   * rectangular mode. */
  int64_t groups, col_groups;
  /* auto: non-empty tile x tile tiles and time of each candidate it tried (-1: not tried). */
  int64_t auto_tiles[TS_REORDER_METHOD_COUNT];
  double auto_ms[TS_REORDER_METHOD_COUNT];
} ts_reorder_stats;

/* Computes row_perm [m->rows] and col_perm [m->cols] (perm[new] = old). col_perm may be NULL in
 * symmetric mode (it would equal row_perm). st may be NULL. Errors: TS_ERR_INVALID_ARG for bad
 * options, a symmetric mode on a non-square pattern, morton/hilbert/raster without a grid (or with a
 * grid that does not match n); TS_ERR_SOLVER when METIS fails.
 * Cost (nnz nonzeros, n items): none O(n); rcm O(nnz) per BFS, about 14 BFS sweeps (pseudo-
 * peripheral search, then 5 candidate starts per component numbered and scored, keeping the
 * least bandwidth);
 * hc/ic O(nnz) to hash + O(n K B log n) for the LSH rounds (K = 64 MinHash bins, B <= 64 bands)
 * + O(nnz) per refinement pass (usually 2-4), never O(n^2); metis: METIS's multilevel recursive
 * bisection, about O(nnz log parts); morton/hilbert/raster O(n log n); auto: the sum of its candidates. */
ts_status ts_reorder(const ts_csr *m, const ts_reorder_opts *o, int32_t *row_perm, int32_t *col_perm,
                     ts_reorder_stats *st);

/* ---- pattern metrics ---------------------------------------------------------------------- */

typedef struct ts_pattern_metrics {
  int64_t rows, cols, nnz;
  int64_t bandwidth;    /* max |i - j| over nonzeros (i, j) (0 when empty) */
  int64_t profile;      /* sum over rows i of max(0, i - min column of row i) (empty rows: 0) */
  int32_t tile;         /* T of the tile grid below */
  /* ceil(rows/T) x ceil(cols/T) tiles; border tiles are smaller, and full means every in-bounds
   * cell is set. empty + mixed + full = number of tiles. */
  int64_t tiles_empty, tiles_mixed, tiles_full;
} ts_pattern_metrics;

/* Metrics of the pattern seen through permutations (out(i, j) = m(row_perm[i], col_perm[j]);
 * NULL = identity; nothing is materialized): one pass over the CSR. tile >= 1. The permutations
 * are validated. */
ts_status ts_pattern_metrics_compute(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm,
                                     int32_t tile, ts_pattern_metrics *out);
/* Non-empty tiles only (the `auto` criterion), same conventions. */
ts_status ts_pattern_tiles_nonempty(const ts_csr *m, const int32_t *row_perm, const int32_t *col_perm,
                                    int32_t tile, int64_t *nonempty);

/* ---- dense-block extraction --------------------------------------------------------------
 * Covers the nonzeros of a (typically reordered) pattern with pairwise DISJOINT rectangles
 * ("blocks", each of density >= rho) and a residue: a nonzero belongs to the block whose
 * rectangle contains it, or to the residue when no block does. So every nonzero is covered
 * exactly once, by construction.
 *
 * greedy: seeds at each nonzero (row-major) not yet inside a block; grows the rectangle one
 *   row or column at a time (right, down, left or up: the extension with the highest resulting
 *   density) while the density stays >= rho, the added line holds at least one nonzero, the
 *   rectangle stays within max_rows x max_cols and does not touch an earlier block. A result
 *   with fewer than min_nnz nonzeros is dropped (its nonzeros stay eligible for later blocks,
 *   else they end in the residue).
 * dp: optimal 1-D variable-row-block partition. Rows are cut into contiguous groups of at most
 *   max_group rows; in a group of h rows, the union of its columns splits into maximal runs of
 *   consecutive columns, and each run U (len columns, nnz nonzeros in the group) becomes
 *       a block   when rho * (h * len + block_cost) <= nnz   (cost h * len + block_cost cells)
 *       residue   otherwise                                 (cost nnz / rho)
 *   i.e. each run takes the cheaper of the two, and a block's density is >= rho. The DP picks
 *   the cut minimizing the total cost exactly (objective below). O(n * max_group * row nnz). */

typedef enum ts_extract_method { TS_EXTRACT_GREEDY = 0, TS_EXTRACT_DP } ts_extract_method;

/* "greedy", "dp". */
const char *ts_extract_method_name(ts_extract_method m);
ts_status ts_extract_method_parse(const char *name, ts_extract_method *out);

typedef struct ts_blocks_opts {
  ts_extract_method method;
  double rho;              /* minimum block density in (0, 1] (0.6) */
  int64_t min_nnz;         /* greedy: smallest block kept (4) */
  int32_t max_rows, max_cols; /* greedy: largest block (1024 x 1024) */
  int32_t max_group;       /* dp: most rows in a group, 1..1024 (32) */
  double block_cost;       /* dp: per-block overhead in cells, >= 0 (16) */
} ts_blocks_opts;

void ts_blocks_opts_default(ts_blocks_opts *o);

typedef struct ts_block {
  int32_t row0, col0, rows, cols; /* rectangle [row0, row0+rows) x [col0, col0+cols) */
  int64_t nnz;                    /* nonzeros inside it */
} ts_block;

typedef struct ts_blocks {
  int64_t rows, cols, nnz;   /* of the pattern */
  int64_t nblocks;
  ts_block *blocks;          /* [nblocks], sorted by (row0, col0); pairwise disjoint */
  ts_csr residue;            /* rows x cols pattern of the nonzeros in no block (val NULL) */
  int64_t block_nnz, block_cells;
  /* block_cells + nblocks * block_cost + residue.nnz / rho: the dp objective (for greedy the same
   * formula, for comparison). */
  double objective;
  double ms;                 /* wall time of the extraction */
} ts_blocks;

/* Extracts blocks from m (validated). out is zeroed on error; free with ts_blocks_free. */
ts_status ts_blocks_extract(const ts_csr *m, const ts_blocks_opts *o, ts_blocks *out);
void ts_blocks_free(ts_blocks *b);

typedef struct ts_blocks_summary {
  int64_t nblocks, block_cells, block_nnz, residue_nnz;
  /* (block_cells + residue_nnz) / nnz: cells computed per useful nonzero (1 when nnz = 0). */
  double fill_ratio;
  double coverage;           /* block_nnz / nnz (1 when nnz = 0) */
  /* blocks by density d = nnz / cells: bin k counts k/10 <= d < (k+1)/10, bin 9 includes 1. */
  int64_t density_hist[10];
  double mean_density;       /* of the blocks (cell-weighted: block_nnz / block_cells) */
} ts_blocks_summary;

void ts_blocks_summarize(const ts_blocks *b, ts_blocks_summary *out);

#ifdef __cplusplus
}
#endif
#endif
