/* Activation sparsity's kernels and transposed weights (issue 33): the sparse paths of decode read
 * a weight matrix by its input columns, so each such matrix gets a transposed copy W^T[n_in][n_out],
 * re-quantized at load along n_out in 32-element blocks (Q4_1 or Q8_0: ts__tmat), and a product
 * over the selected inputs is an AXPY of their rows:
 *
 *   y[0 .. 32 nblk) += sum_k c[k] * dequant(W^T row idx[k])[b0 .. b0 + nblk blocks)
 *
 * Layout decision: the copy is cut by output rows into the decode team's pieces (the same row
 * splits as the dense phases: q by query heads, k and v by KV heads, gate and up by neurons, wo
 * and down in d-row parts of 32), and inside a piece one input's segment follows the other's
 * (piece p: [n_in][its blocks]). A thread then streams only its own piece, in ascending input
 * order, skipping the unselected segments: no reduction across threads and no extra barrier, and
 * every thread reads the same share of every selected input. The cost: one extra copy of each
 * transposed matrix (the same bytes as the file's for Q4_1 models, 1.7x for Q4_1 stored as Q8_0,
 * 1.5x for Gemma 3's Q4_K_M matrices: Q5_0, Q4_K and Q6_K all stored as Q8_0),
 * made once per model at ts_llm_sparse_create, and a second rounding of the weights (measured as
 * the sparse path's quality at threshold 0, docs/notes/llm-sparsity.md). */
#ifndef TS_LLM_SPARSE_INTERNAL_H
#define TS_LLM_SPARSE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "tessera/quant.h"

/* y[0 .. 32 nblk) += sum_k c[k] * W^T row idx[k], blocks of `bsz` bytes, row idx[k] at
 * base + idx[k] * stride (a piece's segment). */
typedef void (*ts__axpy_fn)(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c,
                            int n, float *y);
/* out[k] = dot(row rows[k] of a file-layout block matrix, x) for k < n (the active neurons' up
 * rows): x quantized to int8 blocks (ts_quant_act, x->n the row length). */
typedef void (*ts__gdot_fn)(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n,
                            const ts_quant_act *x, float *out);
typedef struct ts__sparse_kern {
  ts__axpy_fn axpy_q8_0, axpy_q4_1;
  ts__gdot_fn gdot_q8_0, gdot_q4_1, gdot_q5_0;
} ts__sparse_kern;

void ts__axpy_q8_0_ref(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n, float *y);
void ts__axpy_q4_1_ref(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n, float *y);
void ts__axpy_q8_0_avx2(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n, float *y);
void ts__axpy_q4_1_avx2(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n, float *y);
void ts__gdot_q8_0_ref(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out);
void ts__gdot_q4_1_ref(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out);
void ts__gdot_q8_0_avx2(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out);
void ts__gdot_q4_1_avx2(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out);
/* Q5_0 (Gemma 3's up rows: 640 wide, no K-quant fits): equal bit for bit to the quant table's Q5_0
 * row dot of each row (the dense decode's up values), 4 rows per pass sharing the activation. */
void ts__gdot_q5_0_ref(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out);
void ts__gdot_q5_0_avx2(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out);

extern ts__dispatch ts__sparse_dispatch;
const ts__sparse_kern *ts__sparse_kern_active(void);
/* The AXPY of a transposed copy's type (TS_QT_Q8_0 or TS_QT_Q4_1) in table k; the indexed row dot
 * of a file type (NULL for types without one: the caller uses the quant table's dot per row). */
ts__axpy_fn ts__sparse_axpy(const ts__sparse_kern *k, uint32_t type);
ts__gdot_fn ts__sparse_gdot(const ts__sparse_kern *k, uint32_t type);

/* A transposed, re-quantized copy of a weight matrix W[n_out][n_in], cut by output rows into
 * pieces: piece p holds rows [cut[p], cut[p+1]) (multiples of 32) of every input, input j's
 * segment at at[p] + j * seg[p], seg[p] = (cut[p+1] - cut[p]) / 32 blocks. */
#define TS__TMAT_MAXP 64
typedef struct ts__tmat {
  uint32_t type;
  int64_t n_in, n_out;
  size_t bsz;
  int npiece;
  int64_t cut[TS__TMAT_MAXP + 1];
  uint8_t *at[TS__TMAT_MAXP];
  size_t seg[TS__TMAT_MAXP];
  size_t bytes; /* all pieces */
} ts__tmat;

/* y[r - r0] += sum_k c[k] W[r][idx[k]] for output rows [r0, r1) (multiples of 32, or r1 = n_out),
 * whatever pieces they fall in. */
void ts__tmat_axpy(const ts__sparse_kern *k, const ts__tmat *t, int64_t r0, int64_t r1, const int32_t *idx,
                   const float *c, int n, float *y);

#endif
