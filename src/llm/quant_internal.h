/* Internal entry points of the quant kernels: one unchecked function per ISA, and the dispatch
 * table the public wrappers (quant_dispatch.c) call through. Arguments are assumed valid: n a
 * positive multiple of 32 for block types, any n >= 0 for float types, pointers non-NULL where
 * read/written. Tests call each variant directly; a variant may only run when
 * ts__level_supported() reports its level (core/dispatch.h). */
#ifndef TS_LLM_QUANT_INTERNAL_H
#define TS_LLM_QUANT_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include <xmmintrin.h>

#include "core/dispatch.h"
#include "tessera/quant.h"

/* Block structs as stored in the file (packed by construction: only 1- and 2-byte members), with
 * alignment 1: GGUF allows any power-of-two alignment, so a block may start at an odd address
 * (the compiler then reads d and m bytewise where needed; fuzz_gguf runs with UB fatal). */
#define TS__BLK __attribute__((packed, aligned(1)))
typedef struct TS__BLK ts__blk_q8_0 { uint16_t d; int8_t q[32]; } ts__blk_q8_0;
typedef struct TS__BLK ts__blk_q4_0 { uint16_t d; uint8_t qs[16]; } ts__blk_q4_0;
typedef struct TS__BLK ts__blk_q4_1 { uint16_t d, m; uint8_t qs[16]; } ts__blk_q4_1;
typedef struct TS__BLK ts__blk_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } ts__blk_q5_0;
typedef struct TS__BLK ts__blk_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } ts__blk_q4_k;
typedef struct TS__BLK ts__blk_q6_k { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } ts__blk_q6_k;
_Static_assert(sizeof(ts__blk_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(ts__blk_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(ts__blk_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(ts__blk_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(ts__blk_q4_k) == 144, "q4_k block");
_Static_assert(sizeof(ts__blk_q6_k) == 210, "q6_k block");

/* The block types whose dots read the Q8 activation (Q8_0, Q4_0, Q4_1, Q5_0), the K-quants (its
 * Q8_K form), and either. */
static inline bool ts__qt_block32(uint32_t t) {
  return t == TS_QT_Q8_0 || t == TS_QT_Q4_0 || t == TS_QT_Q4_1 || t == TS_QT_Q5_0;
}
static inline bool ts__qt_kquant(uint32_t t) { return t == TS_QT_Q4_K || t == TS_QT_Q6_K; }
static inline bool ts__qt_block(uint32_t t) { return ts__qt_block32(t) || ts__qt_kquant(t); }

/* Q4_K's 6-bit scale and min of sub-block j (0..7) from its 12 packed bytes (quant.h). */
static inline void ts__q4k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* dot(row of n elements, activation): float types read x, block types read xq. */
typedef float (*ts__dot_fn)(int64_t n, const void *row, const float *x, const ts_quant_act *xq);
typedef void (*ts__actq_fn)(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum, float *s);
/* The Q8_K form of n (multiple of 256) values (quant.h): kq[n], kd[n/256], kbs[n/16]. */
typedef void (*ts__actqk_fn)(int64_t n, const float *x, int8_t *kq, float *kd, int16_t *kbs);

/* Lines prefetched on the side while other work runs (decode): ranges of `count` rows of `len`
 * bytes, `stride` apart, walked a few 64-byte lines at a time into L2 by the packed kernels' tiles,
 * by threads waiting at a barrier, and between attention items. The next phase's first weights go
 * in front (ts__pfq_add(.., front = 1)), the next layer's KV cache behind. */
#define TS__PFQ_MAX 16
typedef struct ts__pfq {
  struct {
    const uint8_t *p;
    int64_t len, stride;
    int count;
  } r[TS__PFQ_MAX];
  int n, i, row;
  int64_t off;
  /* decode's own weight prefetch: the packed kernels prefetch (T1) the weights this many bytes
   * ahead of the tile they read, 0 none; the model's measured setting (ts_llm_model's wpf, copied
   * in at every eval; ts__pfq_reset keeps it) */
  int wpf;
  /* whether decode queues side prefetches at all (the model's setting, copied in at every eval;
   * off by default, see ts_llm_model's side) */
  int side;
} ts__pfq;

/* An empty queue whose kernels prefetch their own weights wpf bytes ahead (0: none). */
static inline void ts__pfq_init(ts__pfq *q, int wpf) {
  memset(q, 0, sizeof *q);
  q->wpf = wpf;
}

static inline void ts__pfq_reset(ts__pfq *q) {
  q->n = q->i = q->row = 0;
  q->off = 0;
}

static inline void ts__pfq_add(ts__pfq *q, const void *p, int64_t len, int64_t stride, int count, int front) {
  if (!p || len <= 0 || count <= 0) return;
  if (q->i > 0) { /* drop the finished ranges */
    for (int k = q->i; k < q->n; k++) q->r[k - q->i] = q->r[k];
    q->n -= q->i;
    q->i = 0;
  }
  if (q->n >= TS__PFQ_MAX) return;
  int at = q->n;
  if (front && q->n > 0) { /* keep the current range's progress (whole rows), insert before it */
    q->r[0].p += q->row * q->r[0].stride;
    q->r[0].count -= q->row;
    q->row = 0;
    q->off = 0;
    for (int k = q->n; k > 0; k--) q->r[k] = q->r[k - 1];
    at = 0;
  }
  q->r[at].p = (const uint8_t *)p;
  q->r[at].len = len;
  q->r[at].stride = stride;
  q->r[at].count = count;
  q->n++;
}

static inline void ts__pfq_pump(ts__pfq *q, int lines) {
  for (; lines > 0 && q->i < q->n; lines--) {
    _mm_prefetch((const char *)q->r[q->i].p + q->row * q->r[q->i].stride + q->off, _MM_HINT_T1);
    if ((q->off += 64) >= q->r[q->i].len) {
      q->off = 0;
      if (++q->row >= q->r[q->i].count) q->row = 0, q->i++;
    }
  }
}

/* T quantized activations of n values each, the ts_quant_act arrays per token back to back:
 * q[T][n], d, sum, s [T][nb] (nb = n / 32); for the packed kernels also gsum[T][nb][8], the sums
 * of elements 4g..4g+3 of each block (Q4_0's and Q8_0's per-lane offsets). gsum is NULL when the
 * table has no packed kernels. */
typedef struct ts__qbatch {
  int64_t n;
  int T;
  const int8_t *q;
  const float *d;
  const int32_t *sum;
  const float *s;
  const int32_t *gsum;
  ts__pfq *pf; /* side prefetches (NULL: none) */
  /* the Q8_K form for K-quant weights, per token back to back: kq[T][n], kd[T][n/256],
   * kbs[T][n/16] (NULL when the batch has none) */
  const int8_t *kq;
  const float *kd;
  const int16_t *kbs;
  /* The K-quants' batch orders (quant_internal.h): llama.cpp runs the tokens of a Q4_K matmul in
   * groups of 4 through its repacked gemm and the last T % 4 through its gemv, and a Q6_K matmul
   * of 8 or more tokens through its tiled kernel. Tokens gfrom .. gfrom + gn - 1 of this batch are
   * that matmul's tokens (gn 0: all T from gfrom); Q4_K: the first gn - gn % 4 of them take the
   * gemm's order (ts__dot_q4_k4); Q6_K: all of them the tiled order when gn >= 8
   * (ts__dot_q6_k_t). */
  int gfrom, gn;
} ts__qbatch;

/* Packed block-type rows (ts__pack_rows): the file's blocks regrouped in groups of 8 rows (the
 * last group padded with zero rows), each group 8 x row_bytes, in two halves of 4 rows, so that one
 * 64-byte load holds one block of a half's 4 rows (quant_pgemm_vnni_avx512.c; AVX2 reads it as two
 * 32-byte row pairs, quant_pgemm_avx2.c). nb = cols / 32; blocks go in steps of 4 (j = b / 4,
 * nbj = min(4, nb - 4 j) blocks in step j), and step j, at byte 32 j x the block size of the group,
 * holds
 *   Q4_0: d [2 halves][4 rows][nbj], qs [nbj][2 halves][4 rows][16]
 *   Q4_1: d [2][4][nbj], m [2][4][nbj], qs [nbj][2][4][16]
 *   Q8_0: d [2][4][nbj], u [nbj][2][4][32] = q ^ 0x80 (the int8 values + 128, unsigned for vpdpbusd)
 * (d, m fp16). A decode tile reads its group's bytes strictly in address order and the groups
 * follow each other, so a thread's rows of a matrix are one ascending stream, which the hardware
 * prefetchers follow at the memory's rate (the layout before, groups of 4 with all scales first,
 * read in pairs, made two interleaved streams that they could not; docs/notes/BENCHMARKS.md, issue 7).
 * Rows are no longer separate byte ranges: skipping a neuron (a row of gate / up) costs an 8-row
 * group's granularity here (docs/ARCHITECTURE.md).
 * Batched GEMM on packed rows: y[t * ldy + r] = dot(row r, activation t), r < rows, t < x->T,
 * equal bit for bit to the reference dot of the file's row (llama.cpp's order, cpu_order.h); P
 * points at a group (row r0 of the matrix with r0 % 8 == 0, at byte r0 x row_bytes). */
typedef void (*ts__pgemm_fn)(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y,
                             int64_t ldy);
/* Fills gsum of T tokens from q (the packed kernels' extra input). */
typedef void (*ts__prep_fn)(int64_t n, int T, const int8_t *q, int32_t *gsum);

typedef struct ts__quant_table {
  ts_isa isa;
  ts__actq_fn act_quantize;
  ts__dot_fn dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0, dot_q4_1;
  /* Q5_0 (Q8 activation), Q4_K and Q6_K (its Q8_K form, made by act_quantize_k); row dots only,
   * no packed kernels: the LLM runtime runs them on the file's rows */
  ts__dot_fn dot_q5_0, dot_q4_k, dot_q6_k;
  ts__dot_fn dot_q4_k4; /* Q4_K in the order of llama.cpp's 4-token gemm (ts__dot_q4_k4_ref) */
  ts__dot_fn dot_q6_k_t; /* Q6_K in the order of llama.cpp's tiled matmul (ts__dot_q6_k_t_ref) */
  ts__actqk_fn act_quantize_k;
  /* packed kernels (NULL at the scalar level: it runs its dots on the file's rows) */
  ts__prep_fn prep_packed;
  ts__pgemm_fn pgemm_q8_0, pgemm_q4_0, pgemm_q4_1;
} ts__quant_table;

/* Rows per packed group, and the bytes of a packed rows x cols matrix (rows rounded up to a group). */
#define TS__PACK_ROWS 8
size_t ts__pack_bytes(uint32_t type, int64_t rows, int64_t cols);
/* Packs rows x cols of a block type from the file layout (src) into dst (ts__pack_bytes). */
void ts__pack_rows(uint32_t type, const void *src, void *dst, int64_t rows, int64_t cols);
/* Row r in the file layout back from a packed matrix P (tests). */
void ts__unpack_row(uint32_t type, const void *P, int64_t r, void *dst, int64_t cols);
/* The packed GEMM of a type in table t, NULL when there is none. */
ts__pgemm_fn ts__quant_pgemm_fn(const ts__quant_table *t, uint32_t type);

#define TS__QUANT_DECLARE(sfx)                                                                  \
  void ts__act_quantize_##sfx(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum, float *s); \
  float ts__dot_f32_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);  \
  float ts__dot_f16_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);  \
  float ts__dot_bf16_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq); \
  float ts__dot_q8_0_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq); \
  float ts__dot_q4_0_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq); \
  float ts__dot_q4_1_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);

/* Scalar references: exact integer block sums, per-block terms accumulated in double; float types
 * accumulate in double. The reference activation quantizer is the definition of the format. */
TS__QUANT_DECLARE(ref)
TS__QUANT_DECLARE(avx2)
TS__QUANT_DECLARE(avx512)

/* Q5_0 and the K-quants (quant_k_ref.c: the references, llama.cpp's orders; quant_k_avx2.c; the
 * AVX-512 level runs the AVX2 row dots, as for Q4_0, see quant_avx512.c). Q4_K follows llama.cpp's
 * x86 kernels for Q4_K rows repacked 8 at a time (ggml's CPU_REPACK q4_K_8x8, which llama.cpp uses
 * for every Q4_K matrix whose row count is a multiple of 8 on an AVX2 or AVX-512 CPU): per output,
 * acc = fma((float)S_b, d_w kd_b, acc) and accm = fma((float)M_b, dmin_w kd_b, accm) super-block
 * after super-block, then acc - accm (S_b, M_b the exact integers of quant.h): its gemv, which
 * llama.cpp runs for a single token and for the last T % 4 tokens of a batch; the first T - T % 4
 * it runs 4 at a time through its gemm, which takes the fma per pair of sub-blocks instead (4
 * per super-block: S and M of sub-blocks 2p and 2p + 1, p = 0..3; ts__dot_q4_k4). Q6_K follows
 * ggml_vec_dot_q6_K_q8_K's AVX2 code (its AVX-512 build runs the same): 8 int32 lanes per
 * super-block, lane L = sum over the 8 vectors v of 32 elements of sc[2v + L / 4] times the sum of
 * q kq over elements 32v + 4L .. + 3, minus 32 (kbs[2L] sc[2L] + kbs[2L + 1] sc[2L + 1]); acc_L =
 * fma(kd d_w, (float)lane, acc_L), then hsum8 (cpu_order.h): what llama.cpp runs for a matmul of
 * fewer than 8 tokens. With 8 or more its tiled K-quant matmul (ggml-cpu/tiled, on by default)
 * takes over (ts__dot_q6_k_t): per super-block the exact integer S = sum_g sc_g sum (q - 32) kq,
 * acc = fma(d_w (float)S, kd, acc) (the product d_w (float)S rounded first). Which of each pair a
 * batch token takes: ts__qbatch's gfrom / gn. */
#define TS__QUANT_K_DECLARE(sfx)                                                                  \
  float ts__dot_q5_0_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);   \
  float ts__dot_q4_k_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);   \
  float ts__dot_q6_k_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);   \
  float ts__dot_q4_k4_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);  \
  float ts__dot_q6_k_t_##sfx(int64_t n, const void *row, const float *x, const ts_quant_act *xq);
TS__QUANT_K_DECLARE(ref)
TS__QUANT_K_DECLARE(avx2)
TS__QUANT_K_DECLARE(avx512)
/* GGML's quantize_row_q8_K_ref (quant.h's Q8_K form); every level uses it (a d-wide pass per token,
 * small beside the matmuls that read it). */
void ts__act_quantize_k_ref(int64_t n, const float *x, int8_t *kq, float *kd, int16_t *kbs);
/* Reference dequantize / quantize of the K-quants and Q5_0 (quant_k_ref.c; ts__dequant_ref and
 * ts__quantize_ref call them). */
void ts__dequant_k_ref(uint32_t type, const void *src, float *dst, int64_t n);
void ts__quantize_k_ref(uint32_t type, const float *src, void *dst, int64_t n);

/* The room's variants (scalar, AVX2, AVX-512 VNNI, AVX-512 VNNI + GFNI) in the core dispatcher,
 * the active table (TESSERA_ISA / TESSERA_REF apply), and the best table of an ISA family that
 * this CPU runs (benches). */
extern ts__dispatch ts__quant_dispatch;
const ts__quant_table *ts__quant(void);
const ts__quant_table *ts__quant_for(ts_isa isa);

/* y = W x with table t's dot for `type` over nt threads (one thread below 64 KiB of W); arguments
 * already validated (ts_quant_matvec_act). Benchmarks call it with each table. */
void ts__quant_matvec_with(const ts__quant_table *t, int nt, uint32_t type, const void *W, int64_t rows,
                           int64_t cols, const float *x, const ts_quant_act *xq, float *y);

/* Y = W X on the file's rows with table t's dot (the batched form of ts__quant_matvec_with for one
 * thread; the packed kernels are called directly). Float types read xf[t * ldx ..] instead of x. */
void ts__quant_gemm_with(const ts__quant_table *t, uint32_t type, const void *W, size_t row_bytes, int64_t rows,
                         int64_t cols, const float *xf, int64_t ldx, const ts__qbatch *x, int T, float *y,
                         int64_t ldy);
/* The dot function of a type in table t (NULL for types without kernels). */
ts__dot_fn ts__quant_dot_fn(const ts__quant_table *t, uint32_t type);

/* Bytes of packed rows a prefill tile pass keeps in L1d (quant_pack.c: from the machine's L1d). */
int64_t ts__pgemm_chunk_bytes(void);

/* AVX2 (+FMA, F16C) packed kernels on the same layout (quant_pgemm_avx2.c; Q4_0 reads gsum) */
void ts__prep_packed_avx2(int64_t n, int T, const int8_t *q, int32_t *gsum);
void ts__pgemm_q8_0_avx2(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
void ts__pgemm_q4_0_avx2(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
void ts__pgemm_q4_1_avx2(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
void ts__prep_packed_avx512(int64_t n, int T, const int8_t *q, int32_t *gsum);
void ts__pgemm_q8_0_avx512(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
void ts__pgemm_q4_0_avx512(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
void ts__pgemm_q4_1_avx512(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
/* the same Q4 kernels with GFNI for the high nibbles (quant_pgemm_gfni_avx512.c; CPUs with GFNI) */
void ts__pgemm_q4_0_avx512_gfni(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);
void ts__pgemm_q4_1_avx512_gfni(const void *P, size_t row_bytes, int64_t rows, const ts__qbatch *x, float *y, int64_t ldy);

/* Reference dequantize / quantize of n elements (n a multiple of the block size). */
void ts__dequant_ref(uint32_t type, const void *src, float *dst, int64_t n);
void ts__quantize_ref(uint32_t type, const float *src, void *dst, int64_t n);

#endif
