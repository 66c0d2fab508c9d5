/* AVX2 attention micro-kernels: query rows in the 8 lanes, the same structure as the AVX-512 file
 * (S^T tiles, lane-wise online softmax, broadcast-P x V) with 16 ymm registers: Q K^T blocks of
 * 2 lane vectors x 4 keys or 1 x 8, P V blocks of 4 rows x 16 floats. Shapes: attn_internal.h. */
#include <immintrin.h>
#include <math.h>

#include "attn/attn_internal.h"
#include "attn/attn_rows4_inl.h"
#include "kernels/simd_avx2.h" /* ts__mask8 */

#define UNROLL _Pragma("GCC unroll 16")

/* 2^x for x in [-127, 127] (below -126.5 gives 0): x = n + f, |f| <= 1/2, degree-7 Taylor of
 * 2^f, times 2^n built in the exponent field. */
static inline __attribute__((always_inline)) __m256 exp2_ps(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-127.0f));
  x = _mm256_min_ps(x, _mm256_set1_ps(127.0f));
  __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(1.525273380405984e-05f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381606e-04f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618129107628477e-03f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550410866482158e-02f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402265069591007e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471805599453e-01f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* All-ones lanes where bit `lane` of the 8-bit value b is set. */
static inline __attribute__((always_inline)) __m256 bits8(unsigned b) {
  const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256i x = _mm256_and_si256(_mm256_set1_epi32((int)b), sel);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(x, sel));
}


/* ---- Q K^T ------------------------------------------------------------------------------------ */

#define QK_BLOCK(NAME, IV, J)                                                                                   \
  static void NAME(const float *qt, int64_t ldq, const float *const *kr, int64_t d, float *st, int64_t lds) { \
    __m256 acc[J][IV];                                                                                        \
    UNROLL for (int j = 0; j < J; j++) UNROLL for (int v = 0; v < IV; v++) acc[j][v] = _mm256_setzero_ps();   \
    for (int64_t x = 0; x < d; x++) {                                                                         \
      __m256 q[IV];                                                                                           \
      UNROLL for (int v = 0; v < IV; v++) q[v] = _mm256_loadu_ps(qt + x * ldq + 8 * v);                      \
      UNROLL for (int j = 0; j < J; j++) {                                                                    \
        __m256 kb = _mm256_broadcast_ss(kr[j] + x);                                                           \
        UNROLL for (int v = 0; v < IV; v++) acc[j][v] = _mm256_fmadd_ps(kb, q[v], acc[j][v]);                \
      }                                                                                                       \
    }                                                                                                         \
    UNROLL for (int j = 0; j < J; j++) UNROLL for (int v = 0; v < IV; v++)                                    \
        _mm256_storeu_ps(st + j * lds + 8 * v, acc[j][v]);                                                    \
  }
QK_BLOCK(qk_2x4, 2, 4)
QK_BLOCK(qk_1x8, 1, 8)

/* Row of key j: j (runs NULL: contiguous keys) or the j%rl-th key of run j/rl. */
static inline int64_t key_row(const int32_t *runs, int rl, int j) {
  return runs ? (int64_t)runs[j / rl] + j % rl : j;
}

/* Passes of 2 (or 1) lane vectors, each over the keys in blocks of 4 (8); keys past bc repeat the
 * last key (their st rows are scratch). */
static void qk_keys(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, const int32_t *runs, int rl,
                    int bc, int br, float *st, int64_t lds) {
  int nv = (br + 7) / 8;
  for (int v0 = 0; v0 < nv;) {
    int iv = nv - v0 >= 2 ? 2 : 1, J = iv == 2 ? 4 : 8;
    for (int j0 = 0; j0 < bc; j0 += J) {
      const float *kr[8];
      for (int j = 0; j < J; j++) kr[j] = k + key_row(runs, rl, j0 + j < bc ? j0 + j : bc - 1) * ldk;
      if (iv == 2) qk_2x4(qt + 8 * v0, ldq, kr, d, st + (int64_t)j0 * lds + 8 * v0, lds);
      else qk_1x8(qt + 8 * v0, ldq, kr, d, st + (int64_t)j0 * lds + 8 * v0, lds);
    }
    v0 += iv;
  }
}

/* Sub-tiles of <= 4 rows: with the rows in the lanes they would fill half of each ymm, so the head
 * dimension is in the lanes instead (as in the AVX-512 file): per 4 rows x 2 keys, 8 dot products
 * over d in 8 ymm, reduced by hadds to one vector whose lanes 4t .. 4t+3 hold key t's 4 rows (st's
 * layout). The rows are copied out of Q^T once per sub-tile (rows past br repeat the last, keys past
 * bc the last key). 4 x 16 block-skip tiles on swin 1.12x against the rows-in-lanes kernel. */
#define QS_MAXD 256
static inline __attribute__((always_inline)) void qk_small_impl(const float *qt, int64_t ldq, const float *k, int64_t ldk,
                                                                int64_t d, int bc, int br, float *st, int64_t lds) {
  float qr[4 * QS_MAXD];
  for (int i0 = 0; i0 < br; i0 += 4) {
    ts__attn_rows4(qt, ldq, d, i0, br, qr);
    for (int j0 = 0; j0 < bc; j0 += 2) {
      const float *k0 = k + (int64_t)j0 * ldk, *k1 = k + (int64_t)(j0 + 1 < bc ? j0 + 1 : bc - 1) * ldk;
      __m256 acc[8];
      UNROLL for (int x = 0; x < 8; x++) acc[x] = _mm256_setzero_ps();
      _Pragma("GCC unroll 8") for (int64_t c = 0; c < d; c += 8) {
        const __m256i m = ts__mask8(d - c);
        const __m256 ka = _mm256_maskload_ps(k0 + c, m), kb = _mm256_maskload_ps(k1 + c, m);
        UNROLL for (int r = 0; r < 4; r++) {
          const __m256 q = _mm256_maskload_ps(qr + r * d + c, m);
          acc[r] = _mm256_fmadd_ps(q, ka, acc[r]);
          acc[4 + r] = _mm256_fmadd_ps(q, kb, acc[4 + r]);
        }
      }
      /* lane x of the result = the sum of acc[x]: key x / 4, row x % 4 */
      const __m256 h01 = _mm256_hadd_ps(acc[0], acc[1]), h23 = _mm256_hadd_ps(acc[2], acc[3]);
      const __m256 h45 = _mm256_hadd_ps(acc[4], acc[5]), h67 = _mm256_hadd_ps(acc[6], acc[7]);
      const __m256 a = _mm256_hadd_ps(h01, h23), b = _mm256_hadd_ps(h45, h67);
      const __m256 sv = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
      float *o = st + (int64_t)j0 * lds + i0;
      _mm_storeu_ps(o, _mm256_castps256_ps128(sv));
      _mm_storeu_ps(o + lds, _mm256_extractf128_ps(sv, 1));
    }
  }
}

static void qk_f32(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br, float *st,
                   int64_t lds) {
  if (br <= 4 && d <= QS_MAXD) {
    if (d == 64) qk_small_impl(qt, ldq, k, ldk, 64, bc, br, st, lds);
    else qk_small_impl(qt, ldq, k, ldk, d, bc, br, st, lds);
    return;
  }
  qk_keys(qt, ldq, k, ldk, d, NULL, 1, bc, br, st, lds);
}

static void qk_runs(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, const int32_t *runs, int nq, int rl,
                    int br, float *st, int64_t lds) {
  qk_keys(qt, ldq, k, ldk, d, runs, rl, nq * rl, br, st, lds);
}

/* ---- online softmax --------------------------------------------------------------------------- */

static void softmax(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m, float *l,
                    float *alpha) {
  const int nv = (br + 7) / 8, nw = (br + 15) / 16;
  const __m256 vc = _mm256_set1_ps(c), ninf = _mm256_set1_ps(-INFINITY);
  for (int v = 0; v < nv; v++) {
    float *s = st + 8 * v;
    const uint16_t *mk = mask ? mask + v / 2 : NULL;
    const int sh = 8 * (v & 1);
    __m256 mt = ninf;
    for (int j = 0; j < bc; j++) {
      __m256 x = _mm256_loadu_ps(s + j * lds);
      if (mk) x = _mm256_blendv_ps(ninf, x, bits8((unsigned)(mk[j * nw] >> sh) & 0xFFu));
      mt = _mm256_max_ps(mt, x);
    }
    const __m256 mo = _mm256_loadu_ps(m + 8 * v);
    const __m256 mn = _mm256_max_ps(mo, _mm256_mul_ps(mt, vc));
    const __m256 al = exp2_ps(_mm256_sub_ps(mo, mn));
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    for (int j = 0; j < bc; j++) {
      __m256 p = exp2_ps(_mm256_fmsub_ps(_mm256_loadu_ps(s + j * lds), vc, mn));
      if (mk) p = _mm256_and_ps(p, bits8((unsigned)(mk[j * nw] >> sh) & 0xFFu));
      _mm256_storeu_ps(s + j * lds, p);
      if (j & 1) sum1 = _mm256_add_ps(sum1, p);
      else sum0 = _mm256_add_ps(sum0, p);
    }
    /* Lanes past br belong to other sub-tiles of the panel: write their old values back. */
    const __m256 on = _mm256_castsi256_ps(ts__mask8(br - 8 * v));
    const __m256 lo = _mm256_loadu_ps(l + 8 * v);
    const __m256 ln = _mm256_fmadd_ps(lo, al, _mm256_add_ps(sum0, sum1));
    _mm256_storeu_ps(m + 8 * v, _mm256_blendv_ps(mo, mn, on));
    _mm256_storeu_ps(l + 8 * v, _mm256_blendv_ps(lo, ln, on));
    _mm256_storeu_ps(alpha + 8 * v, al);
  }
}

/* ---- P V ------------------------------------------------------------------------------------- */

/* Keys in nruns runs of runlen consecutive V rows, run g starting at row starts[g] of v (contiguous
 * keys: one run of bc from row 0). */
#define PV_BLOCK(NAME, I, DV)                                                                                  \
  static void NAME(const float *pt, int64_t lds, const float *v0, int64_t ldv, const int32_t *starts, int nruns,    \
                   int runlen, float *o, int64_t ldo, const float *alpha, __m256i tm) {                      \
    __m256 acc[I][DV];                                                                                       \
    const __m256i all = _mm256_set1_epi32(-1);                                                               \
    UNROLL for (int i = 0; i < I; i++) {                                                                     \
      __m256 a = _mm256_set1_ps(alpha[i]);                                                                   \
      UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm256_mul_ps(_mm256_loadu_ps(o + i * ldo + 8 * e), a); \
    }                                                                                                        \
    for (int g = 0; g < nruns; g++)                                                                          \
    for (const float *v = v0 + (int64_t)starts[g] * ldv, *ve = v + (int64_t)runlen * ldv; v < ve;) {       \
      __m256 vv[DV];                                                                                         \
      UNROLL for (int e = 0; e < DV; e++) vv[e] = _mm256_maskload_ps(v + 8 * e, e == DV - 1 ? tm : all);   \
      UNROLL for (int i = 0; i < I; i++) {                                                                   \
        __m256 pb = _mm256_broadcast_ss(pt + i);                                                             \
        UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm256_fmadd_ps(pb, vv[e], acc[i][e]);              \
      }                                                                                                      \
      v += ldv;                                                                                              \
      pt += lds;                                                                                             \
    }                                                                                                        \
    UNROLL for (int i = 0; i < I; i++) UNROLL for (int e = 0; e < DV; e++)                                   \
        _mm256_storeu_ps(o + i * ldo + 8 * e, acc[i][e]);                                                    \
  }
PV_BLOCK(pv_4x2, 4, 2)
PV_BLOCK(pv_3x2, 3, 2)
PV_BLOCK(pv_2x2, 2, 2)
PV_BLOCK(pv_1x2, 1, 2)
PV_BLOCK(pv_4x1, 4, 1)
PV_BLOCK(pv_3x1, 3, 1)
PV_BLOCK(pv_2x1, 2, 1)
PV_BLOCK(pv_1x1, 1, 1)

typedef void (*pv_fn)(const float *, int64_t, const float *, int64_t, const int32_t *, int, int, float *, int64_t,
                      const float *, __m256i);
static const pv_fn pv_table[4][2] = {{pv_1x1, pv_1x2}, {pv_2x1, pv_2x2}, {pv_3x1, pv_3x2}, {pv_4x1, pv_4x2}};

/* O accumulator rows are ldo = round16(d) wide, so only V needs the tail mask. */
static void pv_keys(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *starts, int nruns,
                    int runlen, int br, float *o, int64_t ldo, const float *alpha) {
  const int64_t nvec = (d + 7) / 8;
  for (int64_t e0 = 0; e0 < nvec; e0 += 2) {
    int dv = nvec - e0 >= 2 ? 2 : 1;
    __m256i tm = e0 + dv == nvec ? ts__mask8(d - 8 * (nvec - 1)) : _mm256_set1_epi32(-1);
    for (int i0 = 0; i0 < br; i0 += 4) {
      int rows = br - i0 >= 4 ? 4 : br - i0;
      pv_table[rows - 1][dv - 1](pt + i0, lds, v + 8 * e0, ldv, starts, nruns, runlen, o + (int64_t)i0 * ldo + 8 * e0, ldo,
                                 alpha + i0, tm);
    }
  }
}

static void pv(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, int bc, int br, float *o, int64_t ldo,
               const float *alpha) {
  static const int32_t zero = 0;
  pv_keys(pt, lds, v, ldv, d, &zero, 1, bc, br, o, ldo, alpha);
}

/* skip is ignored: the keys it leaves out have P = 0 in the rows that skip them */
static void pv_runs(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *runs, int nq, int rl,
                    int br, float *o, int64_t ldo, const float *alpha, const uint64_t *skip) {
  (void)skip;
  pv_keys(pt, lds, v, ldv, d, runs, nq, rl, br, o, ldo, alpha);
}

static void finish(const float *o, int64_t ldo, const float *l, int64_t nr, int64_t d, float *dst) {
  for (int64_t i = 0; i < nr; i++) {
    const __m256 inv = _mm256_set1_ps(l[i] > 0.0f ? 1.0f / l[i] : 0.0f);
    for (int64_t e = 0; e < d; e += 8) {
      __m256i tm = ts__mask8(d - e);
      _mm256_maskstore_ps(dst + i * d + e, tm, _mm256_mul_ps(_mm256_loadu_ps(o + i * ldo + e), inv));
    }
  }
}

const ts__attn_kern ts__attn_kern_avx2 = {.qk_f32 = qk_f32, .qk_bf16 = NULL, .softmax = softmax, .pv = pv,
                                          .pack_q = ts__attn_pack_q_ref, .finish = finish,
                                          .qk_runs = qk_runs, .pv_runs = pv_runs,
                                          .qk_diag = ts__attn_avx2_qk_diag, .pv_diag = ts__attn_avx2_pv_diag};
