/* tessera sparse structure toolkit: 0/1 patterns (which query attends to which key, which input
 * channel feeds which output channel) in bitmap/CSR/COO/BSR form, pattern generators addressed by
 * spec strings, and permutations. Reorderings and dense-block extraction: tessera/reorder.h.
 *
 * Conventions:
 *  - A permutation is an int32 array `perm` of length n with perm[new_index] = old_index.
 *  - CSR column indices are sorted within each row and unique.
 *  - Indices are int32 (rows, cols <= INT32_MAX); nonzero counts and row pointers are int64 (a
 *    65,536-token mask at 1% density has ~43M nonzeros).
 *  - Every function that fills an output struct leaves it zeroed (safe to free) on error, and
 *    frees nothing the caller passed in. Outputs must not alias inputs. */
#ifndef TESSERA_SPARSE_H
#define TESSERA_SPARSE_H

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CSR ---------------------------------------------------------------------------------- */

/* rows x cols pattern in CSR. val is NULL for a pure 0/1 pattern. rowptr: [rows+1]; col: [nnz]. */
typedef struct ts_csr {
  int64_t rows, cols, nnz;
  int64_t *rowptr;
  int32_t *col;
  float *val;
} ts_csr;

void ts_csr_free(ts_csr *m);
/* Allocates rowptr [rows+1] (zeroed), col [nnz], and val [nnz] when with_values (ts_malloc'd;
 * ts_csr_free releases them). The caller fills them. */
ts_status ts_csr_alloc(ts_csr *m, int64_t rows, int64_t cols, int64_t nnz, bool with_values);
/* Checks everything a consumer relies on: 0 <= rows, cols <= INT32_MAX, rowptr[0] == 0,
 * non-decreasing, rowptr[rows] == nnz, columns in [0, cols), strictly increasing in each row.
 * TS_ERR_FORMAT naming the row and position ("csr: row 3: column 7 at position 12 is not
 * greater than the previous column 7 (columns must be sorted and unique)"). */
ts_status ts_csr_validate(const ts_csr *m);
ts_status ts_csr_copy(const ts_csr *in, ts_csr *out);
/* Same shape and pattern (values are compared too when both have them; a pattern with values
 * and one without are compared by pattern only). */
bool ts_csr_equal(const ts_csr *a, const ts_csr *b);
/* Pattern membership by binary search in row i. */
bool ts_csr_has(const ts_csr *m, int64_t i, int64_t j);
/* Transpose (cols x rows); values follow their entries. */
ts_status ts_csr_transpose(const ts_csr *in, ts_csr *out);
/* A | A^T for a square pattern; the result is a pure pattern (val = NULL). */
ts_status ts_csr_symmetrize(const ts_csr *in, ts_csr *out);
/* True when the pattern of a square matrix equals its transpose. */
bool ts_csr_is_symmetric(const ts_csr *m);
/* out(i, j) = in(row_perm[i], col_perm[j]): row_perm has `rows` entries, col_perm `cols`
 * (perm[new] = old); NULL leaves that side as is. Pass the same array twice for the symmetric
 * relabelling P A P^T. Both permutations are validated. Values follow their entries. */
ts_status ts_csr_permute(const ts_csr *in, const int32_t *row_perm, const int32_t *col_perm, ts_csr *out);

/* ---- permutations ------------------------------------------------------------------------- */

/* TS_OK when perm is a permutation of 0..n-1; else TS_ERR_INVALID_ARG naming the first bad
 * position ("perm[4] = 9 is out of range [0, 8)", "perm[6] = 2 repeats perm[1]"). */
ts_status ts_perm_validate(const int32_t *perm, int64_t n);
/* inv[perm[i]] = i. perm must be valid (validated). */
ts_status ts_perm_inverse(const int32_t *perm, int64_t n, int32_t *inv);
void ts_perm_identity(int32_t *perm, int64_t n);
/* Uniformly random permutation (Fisher-Yates) determined by seed. */
void ts_perm_random(int32_t *perm, int64_t n, uint64_t seed);

/* ---- bitmap mask -------------------------------------------------------------------------- */

/* rows x cols, one bit per cell: row i is the `stride` 64-bit words at bits + i*stride; cell
 * (i, j) is bit (j % 64) of word j / 64. stride = ceil(cols / 64); padding bits are always zero
 * (the counts rely on it). bits is 64-byte aligned. A 65,536^2 mask is 512 MiB. */
typedef struct ts_bitmap {
  int64_t rows, cols;
  int64_t stride; /* words per row */
  uint64_t *bits; /* [rows][stride] */
} ts_bitmap;

/* Zeroed bitmap. */
ts_status ts_bitmap_alloc(ts_bitmap *b, int64_t rows, int64_t cols);
void ts_bitmap_free(ts_bitmap *b);
static inline uint64_t *ts_bitmap_row(const ts_bitmap *b, int64_t i) { return b->bits + i * b->stride; }
static inline bool ts_bitmap_get(const ts_bitmap *b, int64_t i, int64_t j) {
  return (ts_bitmap_row(b, i)[j >> 6] >> (j & 63)) & 1u;
}
static inline void ts_bitmap_set(ts_bitmap *b, int64_t i, int64_t j, bool on) {
  uint64_t *w = ts_bitmap_row(b, i) + (j >> 6), m = (uint64_t)1 << (j & 63);
  *w = on ? (*w | m) : (*w & ~m);
}
/* Popcounts (AVX-512 VPOPCNTDQ when active, scalar reference otherwise). */
int64_t ts_bitmap_row_count(const ts_bitmap *b, int64_t i);
void ts_bitmap_row_counts(const ts_bitmap *b, int64_t *counts); /* counts: [rows] */
int64_t ts_bitmap_count(const ts_bitmap *b);
/* Popcount of n words: the dispatched kernel and the scalar reference it is tested against. */
int64_t ts_popcount_words(const uint64_t *w, int64_t n);
int64_t ts_popcount_words_ref(const uint64_t *w, int64_t n);

/* ---- COO ---------------------------------------------------------------------------------- */

/* Entries (row[k], col[k]) in any order; val NULL for a pattern. */
typedef struct ts_coo {
  int64_t rows, cols, nnz;
  int32_t *row, *col;
  float *val;
} ts_coo;

ts_status ts_coo_alloc(ts_coo *m, int64_t rows, int64_t cols, int64_t nnz, bool with_values);
void ts_coo_free(ts_coo *m);

/* ---- BSR ---------------------------------------------------------------------------------- */

/* Blocked rows: the pattern cut into br x bc blocks (the last block row/column may be partial:
 * cells past rows/cols are never set). Only non-empty blocks are stored, sorted by block column
 * within each block row. Block k covers rows [bi*br, ...) and cols [col[k]*bc, ...).
 * mask: per block, br rows of mask_stride = ceil(bc / 64) words; block-local cell (r, c) is bit
 * c % 64 of word k*br*mask_stride + r*mask_stride + c/64 (one word per tile row for bc <= 64,
 * which is what tile kernels want). val (when the source had values): [nblocks][br][bc] dense,
 * 0 where absent. */
typedef struct ts_bsr {
  int64_t rows, cols;    /* element shape */
  int32_t br, bc;        /* block shape */
  int64_t brows, bcols;  /* ceil(rows / br), ceil(cols / bc) */
  int64_t nblocks, nnz;  /* stored blocks, set cells */
  int64_t mask_stride;   /* words per block row of the mask */
  int64_t *rowptr;       /* [brows+1] */
  int32_t *col;          /* [nblocks] block column */
  uint64_t *mask;        /* [nblocks][br][mask_stride] */
  float *val;            /* NULL or [nblocks][br][bc] */
} ts_bsr;

void ts_bsr_free(ts_bsr *m);
/* Set cells of stored block k. */
int64_t ts_bsr_block_nnz(const ts_bsr *m, int64_t k);

/* Block counts of a pattern for a br x bc tiling without building the BSR. A block is full
 * when every in-bounds cell of it is set (border blocks are smaller). */
typedef struct ts_block_stats {
  int64_t nblocks; /* non-empty blocks */
  int64_t nfull;   /* full blocks */
  int64_t nnz;
  int64_t cells;   /* in-bounds cells of the non-empty blocks */
  double fill;     /* nnz / cells (1 when there are no blocks) */
} ts_block_stats;
ts_status ts_csr_block_stats(const ts_csr *m, int32_t br, int32_t bc, ts_block_stats *st);

/* ---- conversions ---------------------------------------------------------------------------
 * Bitmap and dense forms hold patterns only (values are dropped). COO -> CSR accepts any order
 * and merges duplicates (values summed); CSR -> COO emits row-major order. Dense u8 is
 * [rows][cols] row-major, nonzero = 1 on input, 0/1 on output. */
ts_status ts_csr_to_coo(const ts_csr *in, ts_coo *out);
ts_status ts_coo_to_csr(const ts_coo *in, ts_csr *out);
ts_status ts_csr_to_bitmap(const ts_csr *in, ts_bitmap *out);
ts_status ts_bitmap_to_csr(const ts_bitmap *in, ts_csr *out);
ts_status ts_coo_to_bitmap(const ts_coo *in, ts_bitmap *out);
ts_status ts_bitmap_to_coo(const ts_bitmap *in, ts_coo *out);
/* dense: caller buffer of rows*cols bytes. */
ts_status ts_csr_to_dense_u8(const ts_csr *in, uint8_t *dense);
ts_status ts_csr_from_dense_u8(const uint8_t *dense, int64_t rows, int64_t cols, ts_csr *out);
ts_status ts_bitmap_to_dense_u8(const ts_bitmap *in, uint8_t *dense);
ts_status ts_bitmap_from_dense_u8(const uint8_t *dense, int64_t rows, int64_t cols, ts_bitmap *out);
/* Any 2-D tensor (any dtype, any strides): nonzero (x != 0; NaN counts as nonzero) = 1.
 * Other ranks: TS_ERR_SHAPE. */
ts_status ts_csr_from_tensor(const ts_tensor *t, ts_csr *out);
/* Dense 2-D tensor of dtype TS_BOOL or TS_U8 (allocated; ts_tensor_free it). */
ts_status ts_csr_to_tensor(const ts_csr *in, ts_dtype dtype, ts_tensor *out);
/* br, bc >= 1. */
ts_status ts_csr_to_bsr(const ts_csr *in, int32_t br, int32_t bc, ts_bsr *out);
ts_status ts_bsr_to_csr(const ts_bsr *in, ts_csr *out);

/* ---- files ---------------------------------------------------------------------------------
 * .npy pattern: 2-D array of any dtype io.h reads (bool, u8, i8, i32, i64, f16, f32, f64),
 * nonzero = 1; written as a dense 2-D bool array (rows*cols bytes in memory while writing).
 * .mtx pattern: coordinate pattern/real/integer, general or symmetric (expanded); stored
 * entries whose value is 0 are dropped, duplicates merged; written as `pattern general`.
 * Patterns read from files are pure 0/1 (val = NULL). */
ts_status ts_pattern_read_npy(const char *path, ts_csr *out);
ts_status ts_pattern_write_npy(const char *path, const ts_csr *m);
ts_status ts_pattern_read_mtx(const char *path, ts_csr *out);
ts_status ts_pattern_write_mtx(const char *path, const ts_csr *m);
/* By extension (.npy / .mtx, case-insensitive); anything else is TS_ERR_UNSUPPORTED. */
ts_status ts_pattern_load(const char *path, ts_csr *out);
ts_status ts_pattern_save(const char *path, const ts_csr *m);
/* Permutations as 1-D .npy: written int32; read from int32 or int64, then validated. *perm is
 * ts_malloc'd (ts_free it). */
ts_status ts_perm_write_npy(const char *path, const int32_t *perm, int64_t n);
ts_status ts_perm_read_npy(const char *path, int32_t **perm, int64_t *n);

/* ---- pattern generators --------------------------------------------------------------------
 * One spec string names a generator and its keys: `KIND:key=value,key=value,...`. Wrappers take
 * an inner spec: `WRAP:INNER_KIND:inner keys...,wrapper keys...`. Keys are read left to right:
 * each generator takes the longest run of leading pairs whose keys it declares (a key repeated
 * ends the run), and the rest bubble up to the enclosing wrapper; pairs left over at the top
 * are an error naming the key. So `permute:window2d:h=64,w=64,k=13,seed=7` gives seed to
 * permute, and `permute:random:n=64,density=0.1,seed=3,seed=7` seeds random with 3, permute 7.
 * Integers are decimal; numbers are C floating-point literals; round() below is to nearest with
 * halves away from zero. Optional keys and defaults: global=0, shift=0, seed=1 (seed is any
 * integer; every other key is required). Errors are TS_ERR_INVALID_ARG
 * (TS_ERR_OVERFLOW for sizes) naming the kind and the key or value: "window2d: unknown key 'q'",
 * "window2d: k must be odd, got 4", "window2d: missing key h", "random: n*n overflows".
 *
 * Token patterns (square, n x n; row = query, column = key; tokens of 2-D kinds are row-major on
 * the h x w grid, token = y*w + x):
 *   window1d:n,w[,global=0]   i attends j iff |i - j| <= w/2 (integer division, so
 *                             a row has up to 2*(w/2)+1 keys); the first `global` tokens attend to
 *                             all and are attended by all. Symmetric.
 *   window2d:h,w,k            k x k neighbourhood (k odd), NAT clamping: along each axis the
 *                             window [c - k/2, c + k/2] is shifted to stay inside the grid, so each
 *                             query has exactly k*k keys when h, w >= k (min(k,h)*min(k,w) always).
 *   dilated2d:h,w,k,d         NAT dilation: along each axis the keys of coordinate c are the
 *                             positions with the same residue c % d, a k-window (clamped as above)
 *                             in that subsequence; exactly k*k keys when h, w >= k*d. d = 1 is
 *                             window2d.
 *   swin:h,w,win[,shift=0]    Swin window attention. shift=0: win x win windows from (0,0)
 *                             (partial at the far borders). shift=1: the shifted partition with
 *                             Swin's cyclic-shift mask, shift s = win/2: tokens attend iff they are
 *                             in the same group along both axes, the groups along an axis of size L
 *                             being [0, s), [s, s+win), [s+win, s+2win), ... clipped to L (the
 *                             wrapped-around window is split by the mask into its two pieces).
 *                             As in Swin, when min(h, w) <= win the window becomes min(h, w) and no
 *                             shift is applied. Symmetric.
 *   vitdet:h,w,win[,global=0] non-overlapping win x win windows from (0,0), partial at the
 *                             borders, plus the first `global` tokens (row-major) as global tokens
 *                             (attend to all, attended by all). Symmetric.
 *   random:n,density[,seed=1] exactly round(density*n*n) distinct cells, uniformly among all
 *                             such sets (row counts drawn hypergeometrically, columns by Floyd's
 *                             sampling); fast at n = 65,536, density 0.01 (43M nonzeros).
 *   blockrandom:n,b,density[,seed=1]  each b x b block (partial at borders) is on with
 *                             probability density, independently (Bernoulli).
 * Channel connectivity (rows = output channels cout, cols = input channels cin; n = 0):
 *   condense:cin,cout,groups[,seed=1][,keep]  cin and cout divisible by groups; output channel o
 *                             is in group o / (cout/groups); each group uses its own random set of
 *                             cin/groups input channels (sets of different groups may overlap), as a
 *                             condensed CondenseNet layer. Each row has exactly cin/groups, or
 *                             round(keep*cin) >= 1 when keep is given (condense factor C != groups:
 *                             keep = 1/C).
 *   unstructconv:cin,cout,keep,groups,corr[,seed=1]  m = round(keep*cin) inputs per output
 *                             channel, exactly. Output channel o is in latent group
 *                             o*groups/cout (integer division). Each group has a preferred set of
 *                             m random inputs. Each of the m picks of a channel comes, with
 *                             probability corr, from its group's preferred inputs not yet picked
 *                             (from all inputs when those are used up), otherwise uniformly from all
 *                             inputs not yet picked. corr=1 is condense-like, corr=0 is randconn-like.
 *   randconn:cin,cout,density[,seed=1]  exactly round(density*cin*cout) distinct cells, uniform.
 *   groupconv:cin,cout,groups  a standard grouped convolution: block diagonal, output channel o
 *                             uses inputs [g*cin/groups, (g+1)*cin/groups), g = o / (cout/groups).
 *   blockconn:cin,cout,bo,bi,density[,seed=1]  block structure: the output channels in blocks of
 *                             bo (last one partial), the inputs in blocks of bi (likewise); each
 *                             output block connects to exactly max(1, round(density*ceil(cin/bi)))
 *                             input blocks, drawn uniformly per output block.
 *   permconn:SPEC[,seed=1]    wrapper over a connectivity: independent random row and column
 *                             relabelling, out(i,j) = in(rp[i], cp[j]) (hides the block or group
 *                             structure from the channel order).
 * Wrappers (inner pattern must be square):
 *   keep:SPEC,ratio[,seed=1]  DynamicViT-style pruning: keeps round(ratio*n) >= 1 random tokens
 *                             (sorted ascending) and returns the induced n' x n' sub-pattern.
 *   permute:SPEC[,seed=1]     random symmetric relabelling P A P^T: out(i,j) = in(p[i], p[j]).
 * Sizes: every index must fit int32 (n, h*w, cin, cout <= INT32_MAX). */

#define TS_PATTERN_KIND_MAX 128

typedef struct ts_pattern_info {
  char kind[TS_PATTERN_KIND_MAX]; /* generator chain, outermost first: "permute:keep:window2d" */
  int64_t rows, cols, nnz;
  int64_t n;                      /* tokens (rows == cols) of token patterns; 0 for connectivity */
  int64_t grid_h, grid_w;         /* 2-D token grid of the base (innermost) generator, 0 if none */
  int64_t base_n;                 /* tokens of the base pattern (n unless keep: dropped some) */
  /* [n] or NULL (= identity): base_index[i] is the base pattern's index of token i, so its grid
   * coordinates are (base_index[i] / grid_w, base_index[i] % grid_w). keep: and permute: compose
   * into it; for `permute:<plain kind>` it is exactly the permutation applied (perm[new] = old),
   * for `keep:<plain kind>` the sorted kept indices. ts_malloc'd; ts_pattern_info_free. */
  int32_t *base_index;
  bool symmetric;                 /* symmetric by construction */
} ts_pattern_info;

/* Generates the pattern named by spec. info may be NULL. */
ts_status ts_pattern_generate(const char *spec, ts_csr *out, ts_pattern_info *info);
void ts_pattern_info_free(ts_pattern_info *info);
/* Grid coordinates of token i (false when the pattern has no grid or i is out of range). */
bool ts_pattern_token_coords(const ts_pattern_info *info, int64_t i, int64_t *y, int64_t *x);
/* Multi-line list of kinds and their keys with defaults (static text). */
const char *ts_pattern_spec_help(void);

#ifdef __cplusplus
}
#endif
#endif
