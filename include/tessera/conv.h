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
 *   direct       everything; register-blocked (8 output channels x 32 output columns on AVX-512,
 *                4 x 16 on AVX2, scalar fallback) over a zero-padded, stride-phase-split input copy,
 *                input channels blocked so each block's packed weights (~8 KiB) stay in L1
 *   im2col       everything; lowering to a [C/g*R*S][P*Q] matrix per image and group + ts_sgemm
 *   kn2row       stride 1 only; R*S 1x1 GEMMs ([K/g][C/g] x [C/g][H*W]) whose shifted results are
 *                accumulated into the output
 *   implicit     everything; 1x1 kernels with no padding are a plain GEMM (strided input gathered
 *                first), other kernels lower column panels of 128 outputs per thread on the fly
 *                (workspace threads * C/g*R*S*128 floats instead of the whole im2col matrix)
 *   winograd_f2  F(2x2,3x3); 3x3 kernel, stride 1, dilation 1 (any padding, groups)
 *   winograd_f4  F(4x4,3x3) with interpolation points 0, 1, -1, 1/2, -2, inf (about 2x more
 *                accurate than 0, +-1, +-2 at the same cost); same restrictions as winograd_f2
 *   fft          stride 1 (any kernel, dilation, padding, groups); overlap-save tiles of a
 *                16/32-point (or whole padded image) 2-D real FFT through FFTW, one complex GEMM
 *                per frequency bin (as a real GEMM [K][2C] x [2C][2T]) over the channels
 *   depthwise    groups == C == K only (channel multiplier 1); register-blocked 4 output rows x 32
 *                columns (AVX-512; 4 x 16 on AVX2) over the same padded input copy as direct
 *
 * Accuracy (u = 2^-24, L = C/g*R*S + 1, A = sum |x||w| + |bias| per output; measured in
 * tests/test_conv.c): direct/im2col/kn2row/implicit/depthwise stay within the summation bound
 * (L + 2) u A; Winograd and FFT errors are norm-wise, worst max|err| / (u max A) measured 1.8 for
 * F(2,3), ~13 for F(4,3), 2.3 for fft.
 * Memory: fft keeps K * C/g * Fh * (Fw/2+1) complex kernel spectra (75 MB for 256x256 3x3 at F = 16);
 * winograd_f4 keeps 36 * K * C/g floats. "Never allocates" is about tessera's own code: ts_sgemm
 * (oneDNN) may keep internal buffers.
 *
 * Threads: the context's thread count (NULL context: ts_default_threads()) for OpenMP loops and
 * ts_sgemm. The context must outlive the plan. Execute is re-entrant for distinct workspaces. */
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

#ifdef __cplusplus
}
#endif

#endif
