/* Convolution algorithms (fp32, NCHW), planned once and executed many times.
 *
 *   input   [N][C][H][W]
 *   weights [K][C/groups][R][S]
 *   bias    [K] (optional)
 *   output  [N][K][P][Q],  P = (H + pad_top + pad_bottom - ((R-1)*dilation_h + 1)) / stride_h + 1
 *                          Q = (W + pad_left + pad_right - ((S-1)*dilation_w + 1)) / stride_w + 1
 *   y[n][k][p][q] = bias[k] + sum_{c in group(k), r, s} x[n][c][p*sh - pad_top + r*dh][q*sw - pad_left + s*dw]
 *                   * w[k][c - group_base][r][s]   (zero outside the input), then ReLU if asked.
 *
 * Lifecycle: ts_conv_plan_create (validates the descriptor for the algorithm, precomputes transforms
 * and FFTW plans) -> ts_conv_plan_set_weights (packs / transforms the weights once: Winograd U,
 * kernel spectra, register-blocked packing) -> ts_conv_execute (many times; never allocates; the
 * caller passes a workspace of ts_conv_plan_workspace_size bytes, 64-byte aligned) -> destroy.
 *
 * Algorithms and what they accept (ts_conv_supported says why not, naming the parameter):
 *   reference    everything; direct loops accumulating in double (the test oracle, slow)
 *   direct       everything; register-blocked over a zero-padded, stride-phase-split input copy:
 *                on AVX-512 32 output channels in the lanes x 14 output columns (R x 1 kernels at
 *                stride 1: 14 positions of the flattened output plane); on AVX2 4 channels x 16
 *                columns with input channels blocked so a block's packed weights (~8 KiB) stay in
 *                L1; scalar fallback
 *   im2col       everything; lowering to a [C/g*R*S][P*Q] matrix per image and group + ts_sgemm
 *   kn2row       stride 1 only; R*S 1x1 GEMMs ([K/g][C/g] x [C/g][H*W]) whose shifted results are
 *                accumulated into the output
 *   implicit     everything; 1x1 kernels with no padding are a plain GEMM (strided input gathered
 *                first), other kernels lower column panels of 128 outputs per thread on the fly
 *                (workspace threads * C/g*R*S*128 floats instead of the whole im2col matrix)
 *   winograd_f2  F(2x2,3x3); 3x3 kernel, stride 1, dilation 1 (any padding, groups)
 *   winograd_f4  F(4x4,3x3) with interpolation points 0, 1, -1, 1/2, -2, inf (about 2x more
 *                accurate than 0, +-1, +-2 at the same cost); same restrictions as winograd_f2.
 *                On AVX-512 both run with 16 channels in the vector lanes by default (blocked
 *                transforms and batched GEMMs, conv_winograd_cl_avx512.c)
 *   fft          stride 1 (any kernel, dilation, padding, groups); overlap-save tiles of a
 *                16/32-point (or whole padded image) 2-D real FFT through FFTW, one complex GEMM
 *                per frequency bin (as a real GEMM [K][2C] x [2C][2T]) over the channels
 *   depthwise    groups == C == K only (channel multiplier 1); register-blocked 4 output rows x 32
 *                columns (AVX-512; 4 x 16 on AVX2) over the same padded input copy as direct
 *
 * Accuracy (u = 2^-24, L = C/g*R*S + 1, A = sum |x||w| + |bias| per output; measured in
 * tests/test_conv.c): direct/im2col/kn2row/implicit/depthwise stay within the summation bound
 * (L + 2) u A; Winograd and FFT errors are norm-wise, worst max|err| / (u max A) measured 1.9 for
 * F(2,3), 12.6 for F(4,3), 2.3 for fft (direct 3.2).
 * Memory: fft keeps K * C/g * Fh * (Fw/2+1) complex kernel spectra (75 MB for 256x256 3x3 at F = 16);
 * winograd_f4 keeps 36 * K * C/g floats. "Never allocates" is about tessera's own code: ts_sgemm
 * (oneDNN) may keep internal buffers.
 *
 * Threads: the context's thread count (NULL context: ts_default_threads()) for OpenMP loops and
 * ts_sgemm. The context must outlive the plan. Execute is re-entrant for distinct workspaces
 * (ts_conv_plan's thread safety). */
#ifndef TESSERA_CONV_H
#define TESSERA_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_conv_algo {
  TS_CONV_REFERENCE = 0,
  TS_CONV_DIRECT,
  TS_CONV_IM2COL,
  TS_CONV_KN2ROW,
  TS_CONV_IMPLICIT,
  TS_CONV_WINOGRAD_F2,
  TS_CONV_WINOGRAD_F4,
  TS_CONV_FFT,
  TS_CONV_DEPTHWISE,
  TS_CONV_ALGO_COUNT
} ts_conv_algo;

typedef struct ts_conv_desc {
  int n, c, h, w;                                 /* batch, input channels, input height/width */
  int k, r, s;                                    /* output channels, kernel height/width */
  int stride_h, stride_w;                         /* >= 1 */
  int pad_top, pad_bottom, pad_left, pad_right;   /* >= 0 */
  int dilation_h, dilation_w;                     /* >= 1 (1 = dense kernel) */
  int groups;                                     /* >= 1, divides c and k */
  bool relu;                                      /* fused max(y, 0) after the bias */
} ts_conv_desc;

/* A descriptor with stride 1, no padding, dilation 1, one group and no ReLU. */
ts_conv_desc ts_conv_desc_make(int n, int c, int h, int w, int k, int r, int s);
/* Symmetric padding and stride in one call (convenience for the common case). */
void ts_conv_desc_set_geometry(ts_conv_desc *d, int stride, int pad, int dilation);

/* Validates the geometry (positive sizes, groups dividing c and k, kernel extent fitting the padded
 * input, sizes below 2^31 elements per tensor) and gives P and Q. TS_ERR_INVALID_ARG or
 * TS_ERR_SHAPE with the field and value; TS_ERR_OVERFLOW for tensors too large. */
ts_status ts_conv_output_dims(const ts_conv_desc *d, int *p, int *q);
/* 2 * N * K * P * Q * (C/groups) * R * S (0 for an invalid descriptor). */
double ts_conv_flops(const ts_conv_desc *d);

/* Names: "reference", "direct", "im2col", "kn2row", "implicit", "winograd_f2", "winograd_f4", "fft",
 * "depthwise"; parse also accepts "winograd" (= winograd_f4). Unknown: TS_ERR_NOT_FOUND. */
const char *ts_conv_algo_name(ts_conv_algo a);
ts_status ts_conv_algo_parse(const char *name, ts_conv_algo *out);

/* TS_OK when the algorithm can run the descriptor; otherwise TS_ERR_UNSUPPORTED with a message that
 * names the algorithm and the parameter, e.g. "winograd_f2: needs a 3x3 kernel with stride 1 and
 * dilation 1, got 5x5", or the descriptor's own validation error. */
ts_status ts_conv_supported(const ts_conv_desc *d, ts_conv_algo a);

/* Thread safety: create, set_weights and destroy need the plan to themselves. After set_weights
 * the plan is only read: ts_conv_execute may run on several threads AT ONCE ON ONE PLAN, each
 * call with its own workspace (the caller's, ts_conv_plan_workspace_size bytes: execute keeps
 * everything it writes there; two calls sharing a workspace race), as may the const queries
 * (tests/test_concurrency.c runs direct and Winograd this way). */
typedef struct ts_conv_plan ts_conv_plan;

ts_status ts_conv_plan_create(ts_conv_plan **plan, ts_context *ctx, const ts_conv_desc *d, ts_conv_algo a);
void ts_conv_plan_destroy(ts_conv_plan *plan);
/* Bytes of workspace ts_conv_execute needs (0 allowed: pass NULL then). */
size_t ts_conv_plan_workspace_size(const ts_conv_plan *plan);
ts_conv_algo ts_conv_plan_algo(const ts_conv_plan *plan);
/* weights [K][C/groups][R][S], bias [K] or NULL. Copied/transformed: the caller may free them. */
ts_status ts_conv_plan_set_weights(ts_conv_plan *plan, const float *weights, const float *bias);
/* in [N][C][H][W] -> out [N][K][P][Q] (out must not overlap in). workspace: 64-byte aligned,
 * ts_conv_plan_workspace_size bytes. TS_ERR_INVALID_ARG before set_weights or on NULL buffers. */
ts_status ts_conv_execute(const ts_conv_plan *plan, const float *in, float *out, void *workspace);
/* Bytes the plan holds or needs: weight copies and transforms (Winograd U, FFT spectra, packed
 * weights) plus the workspace. Known right after create (before set_weights touches the memory),
 * so a caller can skip an algorithm whose plan would be too large. */
size_t ts_conv_plan_memory(const ts_conv_plan *plan);

/* ---- timing ------------------------------------------------------------------------------
 * Contenders are timed round-robin: after `warmup` untimed rounds, each round calls every
 * contender once (its own ts_now() pair), so load from other processes that drifts over the run
 * hits every contender alike; medians are reported. Rounds continue until `repeats` rounds are
 * done and the fastest contender's timed calls add up to min_time_s (at most max_rounds rounds).
 * Pruning: after the warm-up, a prunable contender whose fastest warm-up call is slower than
 * `prune` x the fastest contender's stops being timed; its time is that call (flagged as pruned).
 * Taking each contender's fastest warm-up call keeps a single load spike (or a first call's page
 * faults) from pruning a contender that would have won. */
typedef ts_status (*ts_conv_timed_fn)(void *arg);
typedef struct ts_conv_time_opts {
  int warmup;            /* 2 */
  int repeats;           /* 5 */
  double min_time_s;     /* 0.05 */
  int max_rounds;        /* 40 */
  double prune;          /* 3.0; 0 = never prune */
  size_t max_plan_bytes; /* trials skip algorithms whose plan needs more (ts_conv_plan_memory); 1 GiB */
  uint64_t seed;         /* trial data: inputs, weights, bias uniform in [-1, 1) (1) */
} ts_conv_time_opts;
ts_conv_time_opts ts_conv_time_opts_default(void);
/* ms[i] = median ms of contender i (NAN when its call failed: the error is kept in the detail
 * message and the status is TS_OK unless every contender failed); pruned may be NULL. */
ts_status ts_conv_time_rounds(int n, const ts_conv_timed_fn *fn, void *const *arg, const bool *prunable,
                              const ts_conv_time_opts *o, double *ms, bool *pruned);

/* ---- baselines (benchmarks only: never candidates of the selection) ----------------------
 * oneDNN 2.x convolution through its C API with algorithm direct, winograd or auto: source and
 * destination memory descriptors with dnnl_format_tag_any, so oneDNN picks its preferred
 * (blocked) layouts; our NCHW tensors are reordered to them and back inside execute (that is the
 * cost a NCHW caller pays), the weights once at create. ReLU as a post-op when d->relu.
 * OpenBLAS: im2col (skipped for 1x1 stride-1 unpadded kernels) + cblas_sgemm per image and group,
 * libopenblas loaded with dlopen at create (TS_ERR_UNSUPPORTED when absent), its thread count
 * set to the context's. */
typedef enum ts_conv_baseline_kind {
  TS_CONV_BASE_ONEDNN_DIRECT = 0,
  TS_CONV_BASE_ONEDNN_WINOGRAD,
  TS_CONV_BASE_ONEDNN_AUTO,
  TS_CONV_BASE_OPENBLAS,
  TS_CONV_BASE_COUNT
} ts_conv_baseline_kind;
/* "onednn_direct", "onednn_winograd", "onednn_auto", "openblas". */
const char *ts_conv_baseline_name(ts_conv_baseline_kind k);
typedef struct ts_conv_baseline ts_conv_baseline;
/* weights [K][C/g][R][S], bias [K] or NULL. TS_ERR_UNSUPPORTED when the library has no
 * implementation for d (oneDNN's Winograd: 3x3, stride 1, AVX-512 only) or is not installed.
 * Thread safety: one execute at a time per baseline (it runs through buffers and a stream the
 * baseline owns); the OpenBLAS one also sets OpenBLAS's process-wide thread count at every
 * execute, so it should not run beside other OpenBLAS users. Benchmarks only. */
ts_status ts_conv_baseline_create(ts_conv_baseline **b, ts_context *ctx, const ts_conv_desc *d,
                                  ts_conv_baseline_kind kind, const float *weights, const float *bias);
/* in [N][C][H][W] -> out [N][K][P][Q], NCHW like ts_conv_execute. */
ts_status ts_conv_baseline_execute(ts_conv_baseline *b, const float *in, float *out);
/* What runs: oneDNN's implementation string ("brgconv:avx512_core", "jit_wino_4x3:avx512_core"),
 * or "openblas <config>". */
const char *ts_conv_baseline_impl(const ts_conv_baseline *b);
void ts_conv_baseline_destroy(ts_conv_baseline *b);

/* ---- trials: every algorithm (and baselines) on one layer --------------------------------- */
typedef struct ts_conv_trial ts_conv_trial;
/* Random data for d (opts seed) and one plan per algorithm in `algos` (bit mask over ts_conv_algo;
 * 0 = every algorithm but the reference) that supports d and fits max_plan_bytes, weights set.
 * Algorithms left out keep their reason (ts_conv_trial_info).
 * Thread safety: a trial belongs to one thread at a time (add_baseline and run write it; info and
 * count read what run wrote). Timings of trials run side by side disturb each other. */
ts_status ts_conv_trial_create(ts_conv_trial **t, ts_context *ctx, const ts_conv_desc *d, unsigned algos,
                               const ts_conv_time_opts *opts);
/* Adds a baseline contender on the trial's data; TS_ERR_UNSUPPORTED (reason kept) when the
 * baseline cannot run d -- the trial stays usable. */
ts_status ts_conv_trial_add_baseline(ts_conv_trial *t, ts_conv_baseline_kind kind);
/* Times every contender round-robin (ts_conv_time_rounds; baselines are never pruned), then runs
 * each once more and compares its output with the first baseline's (else the first algorithm's):
 * max |y - y0| / max |y0|. */
ts_status ts_conv_trial_run(ts_conv_trial *t);
typedef struct ts_conv_trial_info {
  const char *name;    /* algorithm or baseline name */
  bool baseline;       /* false: a tessera algorithm (index `algo`) */
  ts_conv_algo algo;
  ts_conv_baseline_kind base;
  bool ran;            /* false: skipped or failed, see why */
  double ms;           /* median ms (NAN when not run) */
  bool pruned;         /* time is its fastest warm-up call (pruned as much slower than the fastest) */
  double rel_diff;     /* vs the reference contender (NAN when not compared) */
  const char *impl;    /* baselines: the implementation; algorithms: "" */
  const char *why;     /* why it did not run ("" when it ran) */
} ts_conv_trial_info;
/* Contenders in order: the TS_CONV_ALGO_COUNT algorithm slots (index = ts_conv_algo, unmeasured
 * ones with ran = false), then the baselines in the order added. */
int ts_conv_trial_count(const ts_conv_trial *t);
void ts_conv_trial_info_at(const ts_conv_trial *t, int i, ts_conv_trial_info *out);
void ts_conv_trial_destroy(ts_conv_trial *t);

/* ---- per-layer selection: the profile ------------------------------------------------------
 * A table of measured per-algorithm times keyed by the layer descriptor (every field but relu),
 * stored as the artifact conv-profile/<kernels>-t<threads> (tessera/artifact.h) with its provenance (CPU model, kernel
 * ISA level, threads, oneDNN version, date and load average of each entry). Opened for a context:
 * a file measured elsewhere (another CPU, ISA level or thread count) is ignored and replaced on
 * save. Selection picks the fastest measured tessera algorithm -- never a baseline. */
#define TS_CONV_PROFILE_VERSION 1
/* Thread safety: put and measure write the profile and need it to themselves; get, size and path
 * only read it and may run on any number of threads while nothing writes it; save one at a time
 * (the store's temporary file is named per process, not per thread). */
typedef struct ts_conv_profile ts_conv_profile;
typedef struct ts_conv_profile_entry {
  double ms[TS_CONV_ALGO_COUNT]; /* median ms; NAN: not applicable, skipped or not measured */
  bool pruned[TS_CONV_ALGO_COUNT];
  char date[32];                 /* ISO 8601 UTC of the measurement */
  double load_avg;               /* 1-minute load average then (< 0 unknown) */
} ts_conv_profile_entry;

/* "n1-c256-h56-w56-k256-r3-s3-st1x1-p1.1.1.1-d1x1-g1" (pads: top.bottom.left.right). */
void ts_conv_desc_key(const ts_conv_desc *d, char *buf, size_t cap);
/* path NULL: the default path. A missing file gives an empty profile; a malformed one is
 * TS_ERR_FORMAT naming the field; a mismatched provenance gives an empty profile (*stale set when
 * given). */
ts_status ts_conv_profile_open(ts_conv_profile **p, const ts_context *ctx, const char *path, bool *stale);
ts_status ts_conv_profile_save(const ts_conv_profile *p);
void ts_conv_profile_destroy(ts_conv_profile *p);
const char *ts_conv_profile_path(const ts_conv_profile *p);
int ts_conv_profile_size(const ts_conv_profile *p);
/* true and *e filled when d was measured. */
bool ts_conv_profile_get(const ts_conv_profile *p, const ts_conv_desc *d, ts_conv_profile_entry *e);
ts_status ts_conv_profile_put(ts_conv_profile *p, const ts_conv_desc *d, const ts_conv_profile_entry *e);
/* The entry of a trial that has run (its algorithm slots), dated now. */
void ts_conv_trial_entry(const ts_conv_trial *t, ts_conv_profile_entry *e);
/* Measures d (a trial of `algos`, no baselines) and stores the entry; e may be NULL. */
ts_status ts_conv_profile_measure(ts_conv_profile *p, ts_context *ctx, const ts_conv_desc *d, unsigned algos,
                                  const ts_conv_time_opts *opts, ts_conv_profile_entry *e);
/* The fastest algorithm of e among `algos` (0 = all) that supports d; why (may be NULL) says
 * "fastest of 6 measured: winograd_f4 12.30 ms, next direct 15.10 ms (1.23x)".
 * TS_ERR_NOT_FOUND when e has no time for any of them. */
ts_status ts_conv_choose(const ts_conv_profile_entry *e, const ts_conv_desc *d, unsigned algos, ts_conv_algo *out,
                         char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
