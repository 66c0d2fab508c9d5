/* tessera attention on an NVIDIA GPU: the same schedules as attn.h, run by CUDA kernels.
 *
 * A CUDA plan is built from the CPU plan's classification (ts_attn_plan_create: every sub-tile is
 * skip / unmasked / masked, with first-owner semantics for overlapping segments), flattened on the
 * host and uploaded once; execute only launches kernels (a gather plan with split groups also
 * allocates its partials' workspace on its first execute, and again only when a larger batch x heads
 * needs more). Two kernels:
 *
 *   fixed    (src/cuda/attn_fixed.cu) block-skip flash attention baseline: one thread block per
 *            (batch, head, query tile of br rows) walking that tile's non-skipped key tiles (bc
 *            columns) in order; masked tiles apply their precomputed bits, full tiles run unmasked.
 *            With dense = true every tile is computed and masked (dense flash attention).
 *   variable (src/cuda/attn_vartile.cu) any ts_attn_schedule: one thread block per (batch, head,
 *            panel); a panel taller than 64 rows (or than the shared-memory budget allows at
 *            large d) is split into row groups, each its own block. The block walks a flattened list of chunks
 *            (the panel's sub-tiles in execution order, cut to at most 64 x 64 cells, which keeps
 *            the online softmax exact: it is associative over key chunks). Panels are dispatched to
 *            one of four compiled chunk shapes (16x64, 32x32, 32x64, 64x64) by their largest tile.
 *            Gather plans (ts_attn_cuda_plan_create_gather) run the same kernel with chunks that
 *            list their keys: row groups of 16, 32 or 64 rows, each covering the union of its
 *            rows' keys, the group size and chunk shape per 64-row band chosen by measured costs
 *            (ts_attn_cuda_profile): the GPU's tile assignment.
 *
 * Both: fp32 Q/K/V or bf16 Q/K/V (converted to fp32 on load), fp32 accumulation on CUDA cores,
 * online softmax in exp2 units, fp32 O; head dimension 64 compiled as a constant, any other d in
 * [1, 256] by a generic path (the plan fails with TS_ERR_UNSUPPORTED when the shared memory a
 * block needs exceeds the device's limit). Layouts are those of attn.h: Q, K, V, O are
 * [batch][heads][n][d] contiguous; a row with no allowed key outputs zeros.
 *
 * Without a usable device (no driver, no GPU, cudaGetDeviceCount failing) every function below
 * returns TS_ERR_UNSUPPORTED with "cuda: no CUDA device (...)" in ts_last_error(), and
 * ts_attn_cuda_available() is false. CUDA errors are TS_ERR_INTERNAL (TS_ERR_OOM for allocation)
 * with cudaGetErrorString's text. One execute at a time per plan; launches go to the default
 * stream unless a cudaStream_t is passed as `stream`. */
#ifndef TESSERA_ATTN_CUDA_H
#define TESSERA_ATTN_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when a CUDA device can be used (cudaGetDeviceCount succeeds with at least one device). */
bool ts_attn_cuda_available(void);
/* One line naming the current device and its compute capability, or why there is none. */
ts_status ts_attn_cuda_device_name(char *buf, size_t cap);

/* Thread safety: one execute at a time per plan, and not on two streams at once: a gather plan's
 * split parts share the plan's device workspace, which execute allocates on first use and grows
 * (the one CUDA exception to "execute never allocates", with _execute_host's per-call copies).
 * Different plans execute concurrently. stats only reads. */
typedef struct ts_attn_cuda_plan ts_attn_cuda_plan;

/* Variable-tile plan for schedule s on mask (n x n) with head dimension d. The schedule and mask
 * may be freed afterwards. Errors: those of ts_attn_plan_create, TS_ERR_UNSUPPORTED (no device, or
 * d too large for shared memory), CUDA errors. */
ts_status ts_attn_cuda_plan_create(ts_attn_cuda_plan **plan, const ts_attn_schedule *s, const ts_bitmap *mask,
                                   int64_t d);
/* Fixed-tile plan: query tiles of br rows, key tiles of bc columns, br and bc in {16, 32, 64, 128}.
 * dense = false: block skip (empty tiles skipped, full tiles unmasked, the rest masked);
 * dense = true: every tile computed with the mask (dense flash attention). */
ts_status ts_attn_cuda_plan_create_fixed(ts_attn_cuda_plan **plan, const ts_bitmap *mask, int64_t d, int32_t br,
                                         int32_t bc, bool dense);

/* The GPU's tile assignment. The kernels run four chunk shapes (classes 0..3: 16 x 64, 32 x 32,
 * 32 x 64, 64 x 64 rows x keys); a thread block runs one row group (a unit: Q load, O store) and
 * walks its chunks. Costs are device time per unit and per chunk in ns, as a full device runs them
 * side by side (total time / count), for one (batch, head). */
typedef struct ts_attn_cuda_costs {
  double unit_ns[4];
  double chunk_ns[4];
  int64_t d;      /* the head dimension they are for */
  bool bf16;      /* measured with bf16 inputs */
  bool measured;  /* false: ts_attn_cuda_costs_default's table */
  char device[128]; /* ts_attn_cuda_device_name of the device measured ("" for the default table) */
  char date[32];    /* UTC time of the measurement, ISO 8601 ("" for the default table) */
} ts_attn_cuda_costs;
/* Costs without a device: the H200's measured ones at d = 64 (docs/notes/BENCHMARKS.md), scaled by
 * d / 64; for tests and machines not yet profiled. */
void ts_attn_cuda_costs_default(ts_attn_cuda_costs *c, int64_t d);
/* Measures the costs on the current device: per class, synthetic gather plans of 2 and 10 masked
 * chunks per unit over 2048 rows x 48 (batch, head) pairs, median of 5 timings of 10 launches
 * each; chunk = the slope, unit = the rest. About 0.1-0.5 s. Errors: no device, CUDA errors. */
ts_status ts_attn_cuda_profile(ts_attn_cuda_costs *c, int64_t d, bool bf16);
/* The costs as a JSON file with provenance (docs/FORMATS.md, "CUDA attention costs"): save
 * (atomic) and load; load validates every field and names the bad one (TS_ERR_FORMAT), rejects a
 * newer version (TS_ERR_UNSUPPORTED), TS_ERR_NOT_FOUND when the file is absent. */
ts_status ts_attn_cuda_costs_save(const ts_attn_cuda_costs *c, const char *path);
ts_status ts_attn_cuda_costs_load(const char *path, ts_attn_cuda_costs *c);
/* The artifact's path: <cache>/attn-cuda-costs/d<D>-<f32|bf16>.json */
ts_status ts_attn_cuda_costs_path(int64_t d, bool bf16, char *buf, size_t cap);
/* The cached costs for (d, dtype) when they were measured on this device, else measured now
 * (ts_attn_cuda_profile) and saved; a failed save is reported on stderr only. cached (may be
 * NULL): whether they came from the file. Errors: those of the profile. */
ts_status ts_attn_cuda_costs_get(ts_attn_cuda_costs *c, int64_t d, bool bf16, bool *cached);
/* Gather plan on mask (n x n, in the token order it will run: reorder it first): per band of 64
 * rows, the split into row groups (one of 64 rows, two of 32 or four of 16) and the class with the
 * least predicted cost under `costs` (NULL: the default table); a group's chunks cover the union
 * of its rows' allowed keys, listed and loaded by index (gathered), so keys no row of the group
 * meets are never computed. Exact for this cost model (each band is chosen independently). A group
 * with more than max(8, 2 x the mean) chunks runs as parts whose partials a combine kernel merges
 * (their device workspace is allocated by the first execute and grown when a larger batch x heads
 * needs more).
 * Its ts_attn_cuda_plan_stats: cells, nnz, work_ratio; tiles_full / tiles_masked = chunks run
 * without / with mask words; panels = row groups; segments = thread blocks per (batch, head). */
ts_status ts_attn_cuda_plan_create_gather(ts_attn_cuda_plan **plan, const ts_bitmap *mask, int64_t d,
                                          const ts_attn_cuda_costs *costs);
void ts_attn_cuda_plan_destroy(ts_attn_cuda_plan *plan);
/* The work counts of the classification (as ts_attn_plan_stats); zeros for NULL. */
void ts_attn_cuda_plan_stats(const ts_attn_cuda_plan *plan, ts_attn_stats *st);

/* Execute on DEVICE pointers (cudaMalloc'd or ts_attn_cuda_malloc'd): Q, K, V [batch][heads][n][d],
 * O the same shape in fp32. Asynchronous on `stream` (NULL: default stream); launch errors are
 * reported, execution errors surface at the next synchronizing call. batch, heads <= 65535;
 * batch or heads 0: nothing. */
ts_status ts_attn_cuda_execute(ts_attn_cuda_plan *plan, const float *Q, const float *K, const float *V, float *O,
                               int64_t batch, int64_t heads, int64_t n, int64_t d, void *stream);
/* Same with bf16 Q, K, V (uint16 bit patterns, ts_f32_to_bf16). */
ts_status ts_attn_cuda_execute_bf16(ts_attn_cuda_plan *plan, const uint16_t *Q, const uint16_t *K, const uint16_t *V,
                                    float *O, int64_t batch, int64_t heads, int64_t n, int64_t d, void *stream);
/* Convenience on HOST arrays: copies in, executes, copies O back, synchronizes. */
ts_status ts_attn_cuda_execute_host(ts_attn_cuda_plan *plan, const float *Q, const float *K, const float *V, float *O,
                                    int64_t batch, int64_t heads, int64_t n, int64_t d);
ts_status ts_attn_cuda_execute_host_bf16(ts_attn_cuda_plan *plan, const uint16_t *Q, const uint16_t *K,
                                         const uint16_t *V, float *O, int64_t batch, int64_t heads, int64_t n,
                                         int64_t d);

/* Small device-memory helpers so C callers (tests, benchmarks) need no CUDA headers. */
ts_status ts_attn_cuda_malloc(void **dptr, size_t bytes);
void ts_attn_cuda_free(void *dptr);
ts_status ts_attn_cuda_to_device(void *dst, const void *src, size_t bytes);
ts_status ts_attn_cuda_to_host(void *dst, const void *src, size_t bytes);
/* Waits for all work on the device; reports asynchronous execution errors. */
ts_status ts_attn_cuda_synchronize(void);

#ifdef __cplusplus
}
#endif
#endif
