/* tessera unstructured group convolution: a convolution whose output channels each read an
 * irregular subset of the input channels (CondenseNet's learned group convolutions, pruned
 * filters), given as a cout x cin 0/1 connectivity. The planner cuts the output channels into
 * PARTITIONS, each computed as one dense GEMM/convolution over the union of its members' input
 * channels (zero weights where a connection is absent), from a cost model measured on this
 * machine: reorder the connectivity (HC, IC, RCM, none), choose partition sizes with a knapsack
 * over the predicted cost of a partition of each size, assign channels to partitions greedily in
 * the reordered order, then improve that assignment with ILPs over CBC (elapsed-time limit, the
 * greedy assignment as warm start and fallback). Reference: C. Li, S. Kuppannagari, "Optimizing
 * Deployment of Unstructured Group Convolutions for Low Latency Inference", HiPC 2025.
 *
 * Tensors (fp32, NCHW, batch n):
 *   input   [n][cin][h][w]
 *   weights [cout][cin][k][k]  dense; entries whose connection is absent are ignored (read as 0)
 *   output  [n][cout][ho][wo], ho = (h + 2*pad - k) / stride + 1, pad = k / 2 (likewise wo)
 *   y[b][o][i][j] = sum_{c : conn(o, c)} sum_{r, s} w[o][c][r][s] x[b][c][i*stride - pad + r][j*stride - pad + s]
 *
 * Flow: connectivity (ts_csr, rows = output channels) -> ts_gconv_plan_make (a ts_gconv_plan: plain
 * data, JSON, cacheable) -> ts_gconv_exec_create (packs the weights of every partition once,
 * allocates every workspace) -> ts_gconv_execute (many times; never allocates). */
#ifndef TESSERA_GCONV_H
#define TESSERA_GCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== layers ================================================================================ */

typedef struct ts_gconv_layer {
  int n;          /* batch, >= 1 */
  int cin, cout;  /* channels, >= 1 */
  int h, w;       /* input height and width, >= 1 */
  int ksize;      /* 1 or 3 (padding ksize / 2) */
  int stride;     /* 1..4 */
} ts_gconv_layer;

/* Checks the sizes (TS_ERR_INVALID_ARG naming the field and value; TS_ERR_OVERFLOW when a tensor
 * would exceed 2^31 elements per image plane set). */
ts_status ts_gconv_layer_check(const ts_gconv_layer *l);
void ts_gconv_layer_out(const ts_gconv_layer *l, int *ho, int *wo);
/* Useful flops 2 * n * ho * wo * k * k * nnz (nnz = kept connections). */
double ts_gconv_layer_flops(const ts_gconv_layer *l, int64_t nnz);
/* Connectivity matches the layer: cout x cin, valid CSR (TS_ERR_SHAPE / TS_ERR_FORMAT). */
ts_status ts_gconv_conn_check(const ts_gconv_layer *l, const ts_csr *conn);
/* FNV-1a over rows, cols, row pointers and columns: part of the plan key. */
uint64_t ts_gconv_conn_hash(const ts_csr *conn);

/* Reads a connectivity file: .npy, a 2-D cout x cin array of 0 and 1 (bool, integer or float
 * dtype; any other value, NaN included, is TS_ERR_FORMAT naming the entry: it is most likely a
 * weight tensor), or .mtx (coordinate; its entries are the connections). TS_ERR_SHAPE for 0 rows
 * or columns; errors name the file. */
ts_status ts_gconv_conn_load(const char *path, ts_csr *out);
/* Reads a layer's weights: .npy float32 [cout][cin][k][k] (or [cout][cin] when k = 1), every
 * value finite; *out is ts_malloc'd [cout][cin][k][k]. Errors name the file and the shape wanted. */
ts_status ts_gconv_weights_load(const char *path, const ts_gconv_layer *l, float **out);

/* Dense masked reference: double accumulation over the kept connections (the test oracle). */
ts_status ts_gconv_reference(const ts_gconv_layer *l, const ts_csr *conn, const float *weights, const float *in,
                             float *out);

/* ==== kernel: one partition over a column range ==============================================
 * The building block the executor runs and the profiler times: rows output rows (packed weights
 * in blocks of <= TS_GCONV_MR rows, [K][mb] per block) over K "B rows", B row k being the floats
 * b + off[k] + j for column j. C row i is c[i] + j. Columns [j0, j1) in tiles of 64 (masked tail).
 * Exposed so tests and benchmarks can reach it; `ts_gconv_kernel_isa` says which variant runs. */
#define TS_GCONV_MR 6
#define TS_GCONV_NR 64
#define TS_GCONV_KC 256 /* B rows per pass: 256 x 64 floats = 64 KiB, L1/L2 resident */
/* Row blocks of a partition of `rows` rows: ceil(rows / MR) blocks of near-equal height (7 ->
 * 4 + 3, 8 -> 4 + 4). Returns the count; heights (may be NULL) gets them. */
int ts_gconv_row_blocks(int rows, int *heights);
/* wp: packed weights (ts_gconv_pack_weights layout); c: [rows] output row pointers. */
ts_status ts_gconv_kernel_run(int rows, int64_t K, const float *wp, const float *b, const int32_t *off,
                              float *const *c, int64_t j0, int64_t j1);
/* The scalar reference of the same contract (double accumulation per output). */
void ts_gconv_kernel_ref(int rows, int64_t K, const float *wp, const float *b, const int32_t *off, float *const *c,
                         int64_t j0, int64_t j1);
ts_isa ts_gconv_kernel_isa(void);
/* Packs w[rows][K] (row i at w + i * ldw) into the kernel's layout (rows * K floats). */
void ts_gconv_pack_weights(int rows, int64_t K, const float *w, int64_t ldw, float *wp);

/* ==== cost model (profile) ===================================================================
 * seconds[r][k][v]: thread CPU time of one 64-column tile of the kernel for a partition of
 * rows[r] rows over K = ks[k] B rows whose last vector count is v + 1 (1..4 vectors of 16), one
 * thread, B rows spread over a larger input as in a real layer (same time split across KC passes
 * as the executor). Median of passes. Stored as JSON with provenance under
 * the artifact gconv-profile/<level>-<kernels> (tessera/artifact.h), reused only when cpu model, kernel level, level,
 * version and grid match. */
#define TS_GCONV_PROFILE_VERSION 1
#define TS_GCONV_PROFILE_MAX 32

typedef enum ts_gconv_profile_level {
  TS_GCONV_PROFILE_QUICK = 0, /* rows {1,4,6,12}, K {8,64,512}: well under a second (tests) */
  TS_GCONV_PROFILE_STANDARD,  /* rows {1..8,10,12,16,24,32}, K {4..8192 by x2}: about 5-15 s */
  TS_GCONV_PROFILE_LEVEL_COUNT
} ts_gconv_profile_level;

const char *ts_gconv_profile_level_name(ts_gconv_profile_level l);
ts_status ts_gconv_profile_level_parse(const char *name, ts_gconv_profile_level *out);

typedef struct ts_gconv_profile {
  int version;
  char cpu_model[64], kernels[16], date[32], tessera_version[32], level[16], clock[16];
  int threads;        /* 1 */
  int passes;
  double min_time_s;  /* per entry and pass */
  double measure_s;   /* wall time of the whole measurement */
  int nrows, nk;
  int32_t rows[TS_GCONV_PROFILE_MAX];
  int32_t ks[TS_GCONV_PROFILE_MAX];
  double *seconds;    /* [nrows][nk][4] (ts_malloc'd) */
} ts_gconv_profile;

/* Measures the level's grid on this machine (progress on stderr when progress). */
ts_status ts_gconv_profile_measure(ts_gconv_profile_level level, bool progress, ts_gconv_profile *out);
void ts_gconv_profile_free(ts_gconv_profile *p);
ts_status ts_gconv_profile_save(const ts_gconv_profile *p, const char *path);
/* TS_ERR_NOT_FOUND when absent, TS_ERR_FORMAT naming the field, TS_ERR_UNSUPPORTED newer version. */
ts_status ts_gconv_profile_load(const char *path, ts_gconv_profile *out);
ts_status ts_gconv_profile_default_path(ts_gconv_profile_level level, char *buf, size_t cap);
/* The cached profile when it matches this machine and level, else measures and saves it
 * (*measured says which). path NULL: the default path. */
ts_status ts_gconv_profile_get(ts_gconv_profile_level level, const char *path, bool progress, ts_gconv_profile *out,
                               bool *measured);

/* Thread safety: immutable after create; the const functions (source, tile, part,
 * ts_gconv_parts_pred_ms, ts_gconv_plan_key, and planning with it) read it from any number of
 * threads at once. */
typedef struct ts_gconv_cost ts_gconv_cost;
/* Interpolating model over a profile (copied): linear in rows, piecewise linear in K (linear
 * extrapolation past the grid), exact in the vector count. */
ts_status ts_gconv_cost_create(ts_gconv_cost **out, const ts_gconv_profile *p);
/* A fixed formula on the same grid (no measurement): a tile costs
 * (2 + ceil(rows/MR)) * 4 ns + K * (ceil(rows/6)*(v+1)*... ) -- deterministic, for tests. */
ts_status ts_gconv_cost_analytic(ts_gconv_cost **out);
void ts_gconv_cost_destroy(ts_gconv_cost *m);
/* Where the model comes from: "analytic" or the profile's date (part of the plan key). */
const char *ts_gconv_cost_source(const ts_gconv_cost *m);
/* Seconds of one tile (rows >= 1, K >= 0, nvec 1..4). */
double ts_gconv_cost_tile(const ts_gconv_cost *m, int rows, int64_t K, int nvec);
/* Predicted seconds of one partition of `rows` output channels over `nunion` input channels for
 * the whole layer (every image, every tile; one thread). */
double ts_gconv_cost_part(const ts_gconv_cost *m, const ts_gconv_layer *l, int rows, int64_t nunion);

/* ==== plans =================================================================================== */

typedef struct ts_gconv_part {
  int32_t nrows, nunion;
  int32_t *rows;  /* output channels, in the order the partition computes them */
  int32_t *in;    /* input channels (sorted ascending) */
} ts_gconv_part;

typedef enum ts_gconv_solver { TS_GCONV_SOLVER_ILP = 0, TS_GCONV_SOLVER_GREEDY } ts_gconv_solver;
const char *ts_gconv_solver_name(ts_gconv_solver s); /* "ilp", "greedy" */
ts_status ts_gconv_solver_parse(const char *name, ts_gconv_solver *out);

#define TS_GCONV_MAX_CANDIDATES 8

/* What planning one reorder candidate produced (predicted times are one thread, whole layer). */
typedef struct ts_gconv_candidate {
  ts_reorder_method method;
  double reorder_ms;
  double knapsack_ms, greedy_ms, ilp_ms;
  double knapsack_pred_ms; /* knapsack sizes, greedy assignment (chunks of the order) */
  double segment_pred_ms;  /* the order cut optimally into consecutive segments (DP) */
  bool segment_won;        /* the segment cut started the ILP (else the knapsack's sizes) */
  double greedy_pred_ms;   /* the better of the two: the ILP's warm start */
  double pred_ms;          /* after the ILP (= greedy_pred_ms when the ILP did not run or improve) */
  int32_t nparts;
  int ilp_solves, ilp_improved; /* neighbourhood ILPs solved, and how many lowered the cost */
  bool ilp_ran, ilp_timeout;
} ts_gconv_candidate;

typedef struct ts_gconv_plan {
  ts_gconv_layer layer;
  int64_t nnz;
  uint64_t conn_hash;
  int32_t nparts;
  ts_gconv_part *parts;      /* [nparts]; rows and in point into rows_buf / in_buf */
  int32_t *rows_buf;         /* [cout] */
  int32_t *in_buf;           /* [sum nunion] */
  ts_reorder_method method;  /* the reordering the partitions came from */
  ts_gconv_solver solver;
  double pred_ms;            /* predicted layer time, one thread */
  double dense_pred_ms;      /* one partition of all rows over all inputs (dense), same model */
  double plan_ms;            /* wall time of planning */
  char cost_source[64];      /* ts_gconv_cost_source of the model used */
  char cpu_model[64];
  uint64_t key;              /* ts_gconv_plan_key */
  int ncand;
  ts_gconv_candidate cand[TS_GCONV_MAX_CANDIDATES];
  int best_none;             /* index in cand of the `none` candidate, -1 if not planned */
  /* The plan of the `none` candidate too (partitions without reordering), when it was planned
   * and is not the winner: for the "ILP with vs without reordering" comparison. nparts 0 else. */
  int32_t none_nparts;
  ts_gconv_part *none_parts;
  int32_t *none_rows_buf, *none_in_buf;
} ts_gconv_plan;

typedef struct ts_gconv_plan_opts {
  ts_reorder_method methods[TS_GCONV_MAX_CANDIDATES]; /* candidates (none, rcm, hc, ic) */
  int nmethods;
  ts_gconv_solver solver;   /* ilp */
  double time_limit;        /* ILP seconds per candidate (elapsed), > 0 (1.0) */
  int ilp_candidates;       /* the ILP runs on this many best greedy candidates, plus `none` (2) */
  int max_rows;             /* largest partition, 1..TS_GCONV_PROFILE_MAX (32) */
  int ilp_group;            /* partitions per neighbourhood ILP, 2..4 (2) */
  bool keep_none;           /* also keep the `none` candidate's partitions in the plan (true) */
  uint64_t seed;            /* reorderings' hashing seed (1) */
  bool progress;            /* ts_progress on stderr (false) */
} ts_gconv_plan_opts;

void ts_gconv_plan_opts_default(ts_gconv_plan_opts *o);
/* Plans the layer: conn validated against l; m the cost model. out is zeroed on error; free with
 * ts_gconv_plan_free. */
ts_status ts_gconv_plan_make(const ts_gconv_layer *l, const ts_csr *conn, const ts_gconv_cost *m,
                             const ts_gconv_plan_opts *o, ts_gconv_plan *out);
void ts_gconv_plan_free(ts_gconv_plan *p);
/* Checks a plan against a connectivity: every output channel in exactly one partition, every
 * connection (o, c) with c in the union of o's partition, unions sorted and unique. */
ts_status ts_gconv_plan_validate(const ts_gconv_plan *p, const ts_csr *conn);
/* Predicted one-thread time of a partition list under m (ms). */
double ts_gconv_parts_pred_ms(const ts_gconv_cost *m, const ts_gconv_layer *l, const ts_gconv_part *parts,
                              int32_t nparts);
/* Key: FNV-1a of the connectivity hash, the layer, the cost source, the CPU model, the planner's
 * version and the options that change the result (methods, solver, time limit, max rows, ILP
 * settings). */
uint64_t ts_gconv_plan_key(const ts_gconv_layer *l, const ts_csr *conn, const ts_gconv_cost *m,
                           const ts_gconv_plan_opts *o);

/* JSON (docs/FORMATS.md): the plan with its candidates and provenance, as a malloc'd
 * NUL-terminated string (*json; the caller free()s it), and back (TS_ERR_FORMAT naming the field,
 * or for text that is not JSON; *out zeroed first, empty on error; free with ts_gconv_plan_free). */
ts_status ts_gconv_plan_to_json(const ts_gconv_plan *p, char **json);
ts_status ts_gconv_plan_from_json(const char *json, ts_gconv_plan *out);
ts_status ts_gconv_plan_save(const ts_gconv_plan *p, const char *path);
ts_status ts_gconv_plan_load(const char *path, ts_gconv_plan *out);
/* The artifact path <cache>/gconv-plan/<key as 16 hex digits>.json (tessera/artifact.h) */
ts_status ts_gconv_plan_cache_path(uint64_t key, char *buf, size_t cap);
/* The cached plan for (l, conn, m, o) when present and valid for conn, else plans and stores it.
 * *cached says which. A cache that cannot be written is reported on stderr, not an error. */
ts_status ts_gconv_plan_get(const ts_gconv_layer *l, const ts_csr *conn, const ts_gconv_cost *m,
                            const ts_gconv_plan_opts *o, ts_gconv_plan *out, bool *cached);

/* ==== executor ================================================================================ */

typedef struct ts_gconv_exec ts_gconv_exec;

/* Binds partitions to a layer, its connectivity and weights [cout][cin][k][k] (copied; absent
 * connections read as 0). Validates the partitions against conn. Threads: ctx (NULL: default);
 * the context must outlive the executor. Work is split over (image, partition, column chunk)
 * items, longest predicted first, run by OpenMP dynamic scheduling.
 * Thread safety: one ts_gconv_execute at a time per executor (it writes the executor's own
 * workspace: the padded or lowered input and the per-thread row pointers, allocated here);
 * different executors run concurrently. ts_gconv_exec_bytes only reads. */
ts_status ts_gconv_exec_create(ts_gconv_exec **out, ts_context *ctx, const ts_gconv_layer *l, const ts_csr *conn,
                               const ts_gconv_part *parts, int32_t nparts, const float *weights);
/* in [n][cin][h][w] -> out [n][cout][ho][wo]; never allocates. Not re-entrant (one workspace, the
 * executor's: hence not const). */
ts_status ts_gconv_execute(ts_gconv_exec *e, const float *in, float *out);
void ts_gconv_exec_destroy(ts_gconv_exec *e);
/* Bytes the executor holds (packed weights + workspace). */
size_t ts_gconv_exec_bytes(const ts_gconv_exec *e);

/* ==== baselines (measured side by side by `tessera gconv bench`) ==============================
 *   dense        zeroed weights, dense convolution: 1x1 stride 1 one ts_sgemm per image, else
 *                im2col + ts_sgemm
 *   deploy       the CondenseNet deploy path: `groups` groups of cout/groups consecutive output
 *                channels; gather (index_select) each group's union of inputs, padded to the
 *                largest union, into [groups][umax] channels, then an equal-size grouped
 *                convolution (ts_sgemm per group, im2col for 3x3)
 *   onednn_grouped  the same gather, then oneDNN's grouped convolution primitive (libdnnl C API,
 *                nchw activations, weights in the layout oneDNN prefers, reordered once)
 *   onednn_dense oneDNN's convolution on the dense zeroed weights
 *   spmm         CSR SpMM over channels: each output row is the sum of its kept input rows
 *                (x its weight, per tap), register-blocked 64 columns at a time (the kernel above
 *                with one row and the row's own inputs) */
typedef enum ts_gconv_base_kind {
  TS_GCONV_BASE_DENSE = 0,
  TS_GCONV_BASE_DEPLOY,
  TS_GCONV_BASE_ONEDNN_GROUPED,
  TS_GCONV_BASE_ONEDNN_DENSE,
  TS_GCONV_BASE_SPMM,
  TS_GCONV_BASE_COUNT
} ts_gconv_base_kind;

const char *ts_gconv_base_name(ts_gconv_base_kind k);

/* Thread safety: one ts_gconv_base_run at a time per baseline (it writes the baseline's gather and
 * im2col buffers, or runs its oneDNN primitive or executor); different baselines run concurrently.
 * Benchmarks only. */
typedef struct ts_gconv_base ts_gconv_base;
/* groups: deploy/onednn_grouped only (>= 1, dividing cout). */
ts_status ts_gconv_base_create(ts_gconv_base **out, ts_context *ctx, ts_gconv_base_kind kind, const ts_gconv_layer *l,
                               const ts_csr *conn, const float *weights, int groups);
ts_status ts_gconv_base_run(ts_gconv_base *b, const float *in, float *out);
void ts_gconv_base_destroy(ts_gconv_base *b);
/* Per group of cout/groups consecutive outputs, the size of the union of their inputs: umax the
 * largest, total the sum. */
ts_status ts_gconv_group_unions(const ts_csr *conn, int groups, int32_t *umax, int64_t *total);

/* ==== model layer tables ====================================================================== */

typedef enum ts_gconv_connectivity {
  TS_GCONV_CONN_UNSTRUCTURED = 0, /* per-filter: unstructconv keep=1/C, groups=G, corr */
  TS_GCONV_CONN_SHARED,           /* group-shared: condense (CondenseNet) / groupconv (ShuffleNet) */
  TS_GCONV_CONN_RANDOM,           /* randconn at density 1/C (or --density) */
  TS_GCONV_CONN_BLOCK,            /* permconn:blockconn: block structure randomly permuted */
  TS_GCONV_CONN_PERMUTED,         /* permconn:unstructconv: the unstructured case, channels relabelled */
  TS_GCONV_CONN_COUNT
} ts_gconv_connectivity;

const char *ts_gconv_connectivity_name(ts_gconv_connectivity c);
ts_status ts_gconv_connectivity_parse(const char *name, ts_gconv_connectivity *out);

typedef struct ts_gconv_model_layer {
  char name[48];
  ts_gconv_layer layer;
  int groups;    /* the model's group count (G of CondenseNet, g of ShuffleNet) */
  bool learned;  /* the connectivity option applies (CondenseNet 1x1 LGC, ShuffleNet 1x1 GConv);
                    false: a standard grouped convolution in every mode (CondenseNet 3x3) */
  bool lgc;      /* a CondenseNet learned group conv: keeps 1/C of its inputs (C = condense);
                    other learned layers keep 1/groups */
} ts_gconv_model_layer;

typedef struct ts_gconv_conn_opts {
  ts_gconv_connectivity mode; /* unstructured */
  int condense;               /* CondenseNet condense factor C: 1, 2, 4 or 8 (4); ShuffleNet: 1/g */
  double corr;                /* unstructured/permuted: share of a filter's inputs from its group's
                                 preferred set (0.9) */
  double density;             /* random/block: density (0 = 1/C) */
  uint64_t seed;              /* (1); layer i uses seed + i */
} ts_gconv_conn_opts;

void ts_gconv_conn_opts_default(ts_gconv_conn_opts *o);
/* "condensenet", "shufflenet-g3", "shufflenet-g8" (TS_ERR_NOT_FOUND listing them). layers is
 * ts_malloc'd; batch sets every layer's n. */
ts_status ts_gconv_model_layers(const char *model, int batch, ts_gconv_model_layer **layers, int *count);
/* The generator spec (tessera/sparse.h) of layer `index` of a model under o. */
ts_status ts_gconv_model_conn_spec(const ts_gconv_model_layer *ml, int index, const ts_gconv_conn_opts *o, char *spec,
                                   size_t cap);

#ifdef __cplusplus
}
#endif
#endif
