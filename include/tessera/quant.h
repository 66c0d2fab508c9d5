/* tessera quantized tensor types and the kernels a decode step needs: dequantize / quantize a row,
 * quantize an activation vector, dot(row, activation) and the matvec y = W x.
 *
 * Type ids are GGML's (the ids GGUF files store), so a tensor's type from ts_gguf passes straight
 * in. Every known GGML type has a name and a block size here (so a GGUF reader can bound-check a
 * tensor of any of them); kernels exist for F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K
 * (ts_qtype_has_kernels).
 *
 * Block layouts (32 elements per block, little-endian, fp16 = IEEE binary16):
 *   Q8_0: fp16 d, int8 q[32]                       x = q * d                 34 bytes
 *   Q4_0: fp16 d, uint8 qs[16]                     x = (q - 8) * d           18 bytes
 *   Q4_1: fp16 d, fp16 m, uint8 qs[16]             x = q * d + m             20 bytes
 *   Q5_0: fp16 d, uint8 qh[4], uint8 qs[16]        x = (q - 16) * d          22 bytes
 * 4-bit nibble order: qs[j] & 0xF is element j, qs[j] >> 4 is element j + 16 (j = 0..15); Q5_0's
 * fifth bit of element j is bit j of the little-endian 32-bit qh.
 * K-quants (super-blocks of 256 elements):
 *   Q4_K: fp16 d, fp16 dmin, uint8 scales[12], uint8 qs[128]                  144 bytes
 *         8 sub-blocks of 32 with 6-bit scale sc_j and min m_j (scales: j < 4: sc_j = s[j] & 63,
 *         m_j = s[j + 4] & 63; j >= 4: sc_j = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,
 *         m_j = (s[j + 4] >> 4) | (s[j] >> 6) << 4); sub-block 2p is the low nibbles of
 *         qs[32p .. 32p + 31], 2p + 1 their high nibbles; x = (d sc_j) q - dmin m_j
 *   Q6_K: uint8 ql[128], uint8 qh[64], int8 scales[16], fp16 d                 210 bytes
 *         per half h (128 elements; ql + 64 h, qh + 32 h, scales + 8 h) and l < 32:
 *         elements l, l + 32, l + 64, l + 96 are (ql[l] & 15, ql[l + 32] & 15, ql[l] >> 4,
 *         ql[l + 32] >> 4) | (qh[l] >> 0, 2, 4, 6 & 3) << 4, minus 32; x = (d sc) q with sc the
 *         scale of the element's group of 16
 *
 * Activation format (ts_quant_act, the "Q8 activation"): x is cut into blocks of 32; block b has
 * int8 q[32 b ..] = rint(x * (127 / max|x|)) (round to nearest even, |q| <= 127, never -128), the
 * scale d[b] = fp16(max|x| / 127) (the fp32 quotient rounded to fp16 and kept as fp32), the integer
 * sum sum[b] = sum of its q and s[b] = fp16((max|x| / 127) * sum[b]) (the block's sum of x). These
 * are the values of GGML's Q8_0 / Q8_1 activation blocks, so a matmul rounds its input exactly as
 * llama.cpp's does (the fp16 scale costs nothing measurable in accuracy: its relative error 2^-11
 * is 1/8 of the int8 step's); that makes a one-layer model agree with llama.cpp to fp32 rounding
 * (bench/peers/llm_llamacpp.py). The sums let one activation serve every weight type with integer
 * block dots: Q8_0: d_w d_x sum q_w q_x; Q4_0: d_w d_x (sum q_w q_x - 8 sum q_x); Q4_1:
 * d_w d_x sum q_w q_x + m_w s_x. Q5_0 is Q4_0's sum with 5-bit q and 16 for 8. Optimized kernels
 * compute the same integer block sums as the reference; only the fp32 order of the per-block
 * accumulation differs.
 *
 * The K-quants read a second form of the same activation, GGML's Q8_K (when n is a multiple of
 * 256): per super-block of 256, the element v of largest |x| (the first one), iscale = -127 / v,
 * kq = rint(iscale x) (fp32 product, nearest even; |kq| <= 127), kd = 1 / iscale (fp32, not rounded
 * to fp16) and kbs[g] = the sum of kq over group g of 16. Q4_K: sum over super-blocks of
 * (d_w kd) S - (dmin_w kd) M with S = sum_j sc_j (sum of q_w kq over sub-block j) and M = sum_j m_j
 * (kbs[2j] + kbs[2j + 1]); Q6_K: d_w kd (sum_j sc_j sum q_w kq - 32 sum_g sc_g kbs[g]). */
#ifndef TESSERA_QUANT_H
#define TESSERA_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GGML tensor type ids (4 and 5 were removed from the format; 31..33 are unassigned here). */
typedef enum ts_qtype {
  TS_QT_F32 = 0,
  TS_QT_F16 = 1,
  TS_QT_Q4_0 = 2,
  TS_QT_Q4_1 = 3,
  TS_QT_Q5_0 = 6,
  TS_QT_Q5_1 = 7,
  TS_QT_Q8_0 = 8,
  TS_QT_Q8_1 = 9,
  TS_QT_Q2_K = 10,
  TS_QT_Q3_K = 11,
  TS_QT_Q4_K = 12,
  TS_QT_Q5_K = 13,
  TS_QT_Q6_K = 14,
  TS_QT_Q8_K = 15,
  TS_QT_IQ2_XXS = 16,
  TS_QT_IQ2_XS = 17,
  TS_QT_IQ3_XXS = 18,
  TS_QT_IQ1_S = 19,
  TS_QT_IQ4_NL = 20,
  TS_QT_IQ3_S = 21,
  TS_QT_IQ2_S = 22,
  TS_QT_IQ4_XS = 23,
  TS_QT_I8 = 24,
  TS_QT_I16 = 25,
  TS_QT_I32 = 26,
  TS_QT_I64 = 27,
  TS_QT_F64 = 28,
  TS_QT_IQ1_M = 29,
  TS_QT_BF16 = 30,
  TS_QT_TQ1_0 = 34,
  TS_QT_TQ2_0 = 35,
} ts_qtype;

#define TS_QK 32   /* elements per block of Q8_0 / Q4_0 / Q4_1 / Q5_0 and of the activation */
#define TS_QKK 256 /* elements per super-block of the K-quants and of the activation's Q8_K form */

/* "q4_1", "f32", ...; "unknown" for an id this build does not know. */
const char *ts_qtype_name(uint32_t type);
/* Parses a name as printed by ts_qtype_name (case-insensitive). */
ts_status ts_qtype_parse(const char *name, uint32_t *type);
/* True when the id is a known GGML type (its block size and bytes are known). */
bool ts_qtype_known(uint32_t type);
/* Elements per block (1 for plain types) and bytes per block; 0 for an unknown id. */
int64_t ts_qtype_block_elems(uint32_t type);
size_t ts_qtype_block_bytes(uint32_t type);
/* Bytes of a row of n elements: TS_ERR_DTYPE for an unknown id, TS_ERR_SHAPE naming n and the block
 * size when n is not a multiple of it, TS_ERR_OVERFLOW. */
ts_status ts_qtype_row_bytes(uint32_t type, int64_t n, size_t *bytes);
/* True for the types this module has kernels for: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K,
 * Q6_K. */
bool ts_qtype_has_kernels(uint32_t type);

/* dst[n] = the values of a row of `type` (reference conversion; exact for F32/F16/BF16). */
ts_status ts_quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
/* Quantizes n floats into a row of `type` (the reference quantizers, round to nearest):
 *   Q8_0: d = max|x| / 127, q = round(x / d)                     |err| <= d/2 + 127 |d - fp16(d)|
 *   Q4_0: v = the element of largest |x| (signed), d = v / -8, q = min(15, round(x / d) + 8)
 *         |err| <= |d|/2 + 8 |d - fp16(d)|, except elements clamped to q = 15 (x/d + 8 > 15.5,
 *         only on the side opposite to v), where |err| <= |d| + ...
 *   Q4_1: m = min x, d = (max x - m) / 15, q = round((x - m) / d)
 *         |err| <= d/2 + 15 |d - fp16(d)| + |m - fp16(m)|
 *   Q5_0: as Q4_0 with 32 levels: d = v / -16, q = min(31, floor(x / d + 16.5))
 *         |err| <= |d|/2 + 16 |d - fp16(d)|, except elements clamped to q = 31 (|err| <= |d| + ...)
 *   Q4_K: per sub-block of 32, lo = min(0, min x), s = (max x - lo) / 15; d = max s / 63,
 *         dmin = max(-lo) / 63 (fp16), sc = round(s / d), m = round(-lo / dmin) (6 bits),
 *         q = round((x + dmin m) / (d sc)) clamped to 0..15: |err| <= d sc / 2 plus what the
 *         rounded scales move the range (tests/test_quant.c checks the clamp-aware bound)
 *   Q6_K: per group of 16, s = max|x| / 31; d = max s / 127 (fp16), sc = round(s / d) (int8),
 *         q = round(x / (d sc)) clamped to -32..31: |err| <= d sc / 2 where not clamped
 *   (round-to-nearest quantizers for tests and tools, not llama.cpp's searched K-quant scales)
 *   (Q8_0 rounds half away from zero; Q4_0 computes floor(x/d + 8.5), Q4_1 floor((x - m)/d + 0.5):
 *   round half up. An all-zero block gets d = 0 and dequantizes to exact zeros.)
 *   F16/BF16: round to nearest even. */
ts_status ts_quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

/* ---- activation ------------------------------------------------------------------------ */

/* A vector of n (multiple of 32) values in the Q8 activation format above: q[n], d[n/32], sum[n/32],
 * s[n/32]; when n is a multiple of 256 also its Q8_K form kq[n], kd[n/256], kbs[n/16] (else NULL). */
typedef struct ts_quant_act {
  int64_t n;
  int8_t *q;
  float *d;
  int32_t *sum;
  float *s;
  int8_t *kq;
  float *kd;
  int16_t *kbs;
} ts_quant_act;

/* Bytes of caller memory ts_quant_act_init needs for n values, both forms (0 when n is not a
 * positive multiple of 32). */
size_t ts_quant_act_bytes(int64_t n);
/* Lays an activation over caller memory (any alignment); TS_ERR_SHAPE when n is not a positive
 * multiple of 32, TS_ERR_INVALID_ARG when `bytes` is too small. */
ts_status ts_quant_act_init(ts_quant_act *a, int64_t n, void *mem, size_t bytes);
/* Quantizes x[a->n] into a, both forms (dispatched; every ISA gives bit-identical results). */
ts_status ts_quant_act_quantize(ts_quant_act *a, const float *x);

/* ---- dot and matvec -------------------------------------------------------------------- */

/* *out = dot(row of `type` with n elements, activation). Float types (F32/F16/BF16) read x (fp32);
 * block types read xq (quantized from the same x with ts_quant_act_quantize; xq->n == n; the
 * K-quants its Q8_K form). Either
 * pointer may be NULL when that type does not read it. Dispatched on ts_isa_active(). */
ts_status ts_quant_dot(uint32_t type, const void *row, int64_t n, const float *x, const ts_quant_act *xq,
                       float *out);

/* y[rows] = W x with W row-major [rows][cols] in `type` (each row ts_qtype_row_bytes(type, cols)
 * bytes, rows contiguous), x[cols] fp32; rows split over ctx's threads (NULL ctx: default threads).
 * Block types quantize x first (small stack buffer; heap only for cols > 4096). TS_ERR_SHAPE when
 * cols is not a multiple of the block size, TS_ERR_DTYPE for a type without kernels. */
ts_status ts_quant_matvec(const ts_context *ctx, uint32_t type, const void *W, int64_t rows, int64_t cols,
                          const float *x, float *y);
/* The same with x already quantized (reuse one activation for several matrices: Q/K/V, gate/up).
 * x is read for float types, xq for block types (as ts_quant_dot). */
ts_status ts_quant_matvec_act(const ts_context *ctx, uint32_t type, const void *W, int64_t rows,
                              int64_t cols, const float *x, const ts_quant_act *xq, float *y);

/* The ISA level the quant kernels run at (ts_isa_active(), resolved once). */
ts_isa ts_quant_isa(void);

#ifdef __cplusplus
}
#endif
#endif
