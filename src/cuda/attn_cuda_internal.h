/* Shapes shared by the CUDA host code (C) and the kernels (CUDA C++).
 *
 * The host flattens a CPU plan (attn_internal.h) into UNITS, each run by one thread block per
 * (batch, head): rows [r0, r0+rows) of one panel (rows <= the unit's group size G <= 64 for the
 * variable-tile kernel, = br for the fixed one), whose
 * per-row softmax state and O accumulator live in shared memory, and the unit's CHUNKS in execution
 * order. A chunk is a rectangle of at most RB x CB cells of one plan sub-tile: unit-relative rows
 * [i0, i0+nr) x absolute key columns [j0, j0+nc). moff < 0: unmasked; else cell (i0+r, j0+j) is
 * bit (ro+r) % 16 of word mbits[moff + j*nv + (ro+r)/16] (the plan's [bc][nv] layout of the
 * sub-tile, moff already advanced to the chunk's first column; ro = the chunk's first row inside
 * the sub-tile; a DIAG sub-tile's chunks carry words of their own, appended after the plan's, with
 * ro = 0). The fixed kernel reads its units unsplit (one per query tile, chunks = whole key
 * tiles) and cuts the chunks itself.
 *
 * GATHER plans (ts__cuda_flatten_gather) list each chunk's keys: cols != NULL, and a chunk's key
 * columns are cols[j0 .. j0+nc) (ascending, not necessarily consecutive) instead of j0 .. j0+nc-1;
 * everything else (mask words, row slices) reads as above. */
#ifndef TS_CUDA_ATTN_INTERNAL_H
#define TS_CUDA_ATTN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ts__cuda_chunk {
  int32_t i0, nr, j0, nc;
  int32_t nv, ro;
  int64_t moff;
} ts__cuda_chunk;

typedef struct ts__cuda_unit {
  int64_t c0;          /* first chunk */
  int32_t nchunks;
  int32_t r0, rows;    /* absolute first row, row count (<= G) */
  int32_t part;        /* -1: writes O; else its partial slot (a split group's part, below) */
} ts__cuda_unit;

/* Split groups (gather plans): a row group whose key pieces would make one thread block walk far
 * longer than the rest is cut into parts, units over the same rows and disjoint key pieces. Each
 * part writes its unnormalized accumulator, running max m and sum l to its slot of a workspace
 * (per (batch, head): nparts slots of TS__CUDA_SLOT(d) floats: O [GMAX][d], m [GMAX], l [GMAX]); a
 * combine kernel then merges parts p0 .. p0+np-1 into O rows [r0, r0+rows). */
typedef struct ts__cuda_split {
  int32_t r0, rows, p0, np;
} ts__cuda_split;
#define TS__CUDA_SLOT(d) ((int64_t)TS__CUDA_GMAX * ((d) + 2)) /* O [GMAX][d], m [GMAX], l [GMAX] */

/* Chunk shapes the kernels are compiled for (RB rows x CB columns, 128 threads each). */
/* GMAX: the tallest variable-tile row group; 64 rows keep a block near 85 KB of shared memory at
 * d = 64, so two blocks (8 warps) share an SM instead of one. */
enum { TS__CUDA_NCLASS = 4, TS__CUDA_THREADS = 128, TS__CUDA_GMAX = 64 };
static const int32_t ts__cuda_class_rb[TS__CUDA_NCLASS] = {16, 32, 32, 64};
static const int32_t ts__cuda_class_cb[TS__CUDA_NCLASS] = {64, 32, 64, 64};

/* Units of one class: units[u0 .. u0+nu) run with group size g. */
typedef struct ts__cuda_class_run {
  int64_t u0, nu;
  int32_t g;
} ts__cuda_class_run;

/* Host-side flattened plan. */
typedef struct ts__cuda_flat {
  int64_t n, d;
  int64_t nunits, nchunks, nmbits;
  ts__cuda_unit *units;
  ts__cuda_chunk *chunks;
  uint16_t *mbits;
  ts__cuda_class_run cls[TS__CUDA_NCLASS];
  int32_t *cols; /* gather plans: the chunks' key lists (NULL otherwise) */
  int64_t ncols;
  ts__cuda_split *splits; /* gather plans: split groups (NULL when none) */
  int64_t nsplits, nparts;
} ts__cuda_flat;

/* Dynamic shared memory of one block (bytes): Q [g][d+1], K [cb][d+1], V [cb][d] + 64 spare,
 * S [rb][cb+1], O [g][d+8], m and l [g], alpha [rb] (floats). Pads keep the kernels' shared
 * accesses free of bank conflicts at d = 64 and let the generic path read a row tail unguarded. */
static inline size_t ts__cuda_smem_bytes(int64_t g, int64_t rb, int64_t cb, int64_t d) {
  return sizeof(float) * (size_t)(g * (d + 1) + cb * (d + 1) + cb * d + 64 + rb * (cb + 1) + g * (d + 8) + 2 * g + rb);
}

/* Device-side copy of a flattened plan (pointers are device memory). */
typedef struct ts__cuda_dev {
  int64_t n, d;
  int fixed;           /* 1: fixed-tile kernel, class cls_fixed, g = br */
  int cls_fixed;
  const ts__cuda_unit *units;
  const ts__cuda_chunk *chunks;
  const uint16_t *mbits;
  const int32_t *cols; /* gather plans' key lists, else NULL */
  const ts__cuda_split *splits;
  int64_t nsplits, nparts;
  float *ws;           /* partial slots: batch * heads * nparts * TS__CUDA_SLOT(d) floats (set per execute) */
  ts__cuda_class_run cls[TS__CUDA_NCLASS];
} ts__cuda_dev;

/* Launches (attn_fixed.cu, attn_vartile.cu): return a cudaError_t value (0 = success). bf16: Q, K, V
 * are uint16 bf16 patterns, else float. */
int ts__cuda_launch_fixed(const ts__cuda_dev *dv, int bf16, const void *Q, const void *K, const void *V, float *O,
                          int64_t batch, int64_t heads, void *stream);
int ts__cuda_launch_vartile(const ts__cuda_dev *dv, int bf16, const void *Q, const void *K, const void *V, float *O,
                            int64_t batch, int64_t heads, void *stream);

#ifndef __CUDACC__
#include "tessera/core.h"
struct ts_attn_plan;
/* Variable-tile flattening (attn_cuda_flat.c): panels in the plan's largest-first order, each
 * assigned the class of its largest sub-tile, split into row groups of the largest G (multiple of
 * 16, <= TS__CUDA_GMAX) whose shared memory fits smem_limit bytes; units grouped by class.
 * TS_ERR_UNSUPPORTED when even G = 16 does not fit. */
ts_status ts__cuda_flatten_vartile(const struct ts_attn_plan *pl, size_t smem_limit, ts__cuda_flat *out);
/* Fixed-tile flattening of a plan whose panels hold one segment with br = the panel's rows:
 * one unit per panel (largest first), chunks = its items unchanged; cls: the class the kernel cuts
 * tiles with. */
ts_status ts__cuda_flatten_fixed(const struct ts_attn_plan *pl, int cls, ts__cuda_flat *out);
void ts__cuda_flat_free(ts__cuda_flat *f);
/* Gather flattening of a mask (tessera/attn_cuda.h, ts_attn_cuda_plan_create_gather): per 64-row
 * band, the split into row groups (one of 64 rows, two of 32 or four of 16) and the chunk shape
 * with the least predicted cost; a group's chunks cover the union of its rows' keys, listed in
 * cols, CB keys at a time. A group with more than max(8, 2 x the mean) chunks is split into parts
 * of at most that many (splits, above). Units of a class largest first. stats: the work counts
 * (may be NULL). */
struct ts_attn_cuda_costs;
struct ts_bitmap;
struct ts_attn_stats;
struct cJSON;
/* The costs file's JSON (attn_cuda_costs.c): build, and read with every field validated (name:
 * the file or document named in errors). */
struct cJSON *ts__cuda_costs_to_json(const struct ts_attn_cuda_costs *c);
ts_status ts__cuda_costs_from_json(const struct cJSON *j, const char *name, struct ts_attn_cuda_costs *c);
/* The costs' artifact: kind "attn-cuda-costs" (version = the payload's format version), key
 * d<D>-<f32|bf16>, and the provenance its envelope records (this host, the measurement's date). */
extern const struct ts__artifact_kind ts__cuda_costs_kind;
ts_status ts__cuda_costs_key(int64_t d, bool bf16, char *key, size_t cap);
struct ts_provenance;
void ts__cuda_costs_provenance(const struct ts_attn_cuda_costs *c, struct ts_provenance *p);
ts_status ts__cuda_flatten_gather(const struct ts_bitmap *mask, int64_t d, size_t smem_limit,
                                  const struct ts_attn_cuda_costs *costs, ts__cuda_flat *out, struct ts_attn_stats *stats);
#endif

#ifdef __cplusplus
}
#endif
#endif
