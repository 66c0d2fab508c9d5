/* AVX-512 attention micro-kernels: query rows in the 16 lanes (see attn.h "Kernel design").
 *   Q K^T:   S^T[j][i..i+16*IV) accumulated in IV x J zmm registers; per k one Q^T load per lane
 *            vector and one broadcast K[j][k] per key (K stays in its [n][d] layout).
 *   softmax: lane-wise running max / sum over the key rows of S^T, exp2 by polynomial + vscalefps.
 *   P V:     O[i][e..e+16*DV) for I rows in I x DV registers; per key one V load per vector and one
 *            broadcast of P^T[j][i] per row.
 *   bf16:    Q K^T with vdpbf16ps over (k, k+1) pairs (AVX-512 BF16).
 * Shapes and contracts: attn_internal.h. */
#include "attn/attn_avx512_inl.h"

/* ---- Q K^T (fp32) --------------------------------------------------------------------------- */

/* st[j][0 .. W*IV) for J keys: IV lane vectors (W = 16 lanes zmm, 8 lanes ymm) x J keys. Full key
 * blocks read consecutive K rows kb + j*LDK (LDK is the argument ldk, or the literal 64 so the row
 * offsets become immediates and one pointer walks the head dimension); tail blocks read through a
 * pointer per key (keys past bc clamped to the last one: their st rows are scratch). */
#define QK_BODY(VEC, W, LOADU, SET1, FMA, STOREU, ZERO, IV, J, KEY)                                          \
  VEC acc[J][IV];                                                                                            \
  UNROLL for (int j = 0; j < J; j++) UNROLL for (int v = 0; v < IV; v++) acc[j][v] = ZERO();                 \
  _Pragma("GCC unroll 4") for (int64_t x = 0; x < d; x++) {                                                  \
    VEC q[IV];                                                                                               \
    UNROLL for (int v = 0; v < IV; v++) q[v] = LOADU(qt + x * ldq + W * v);                                 \
    UNROLL for (int j = 0; j < J; j++) {                                                                     \
      VEC kv = SET1(KEY);                                                                                    \
      UNROLL for (int v = 0; v < IV; v++) acc[j][v] = FMA(kv, q[v], acc[j][v]);                             \
    }                                                                                                        \
  }                                                                                                          \
  UNROLL for (int j = 0; j < J; j++) UNROLL for (int v = 0; v < IV; v++) STOREU(st + j * lds + W * v, acc[j][v]);

#define QK_FULL(NAME, IV, J, LDK)                                                                              \
  static void NAME(const float *qt, int64_t ldq, const float *kb, int64_t ldk, int64_t d, float *st, int64_t lds) { \
    QK_BODY(__m512, 16, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, _mm512_setzero_ps, IV, J, \
            kb[j * (LDK) + x])                                                                               \
  }
#define QH_FULL(NAME, J, LDK)                                                                                  \
  static void NAME(const float *qt, int64_t ldq, const float *kb, int64_t ldk, int64_t d, float *st, int64_t lds) { \
    QK_BODY(__m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, _mm256_setzero_ps, 1, J, \
            kb[j * (LDK) + x])                                                                               \
  }
#define QK_TAIL(NAME, IV, J)                                                                                   \
  static void NAME(const float *qt, int64_t ldq, const float *const *kr, int64_t d, float *st, int64_t lds) { \
    QK_BODY(__m512, 16, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, _mm512_setzero_ps, IV, J, \
            kr[j][x])                                                                                        \
  }
#define QH_TAIL(NAME, J)                                                                                       \
  static void NAME(const float *qt, int64_t ldq, const float *const *kr, int64_t d, float *st, int64_t lds) { \
    QK_BODY(__m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, _mm256_setzero_ps, 1, J, \
            kr[j][x])                                                                                        \
  }
QK_FULL(qk_4x4_64, 4, 4, 64)
QK_FULL(qk_4x4_g, 4, 4, ldk)
QK_FULL(qk_2x8_64, 2, 8, 64)
QK_FULL(qk_2x8_g, 2, 8, ldk)
QK_FULL(qk_1x16_64, 1, 16, 64)
QK_FULL(qk_1x16_g, 1, 16, ldk)
QH_FULL(qh_16_64, 16, 64)
QH_FULL(qh_16_g, 16, ldk)
QK_TAIL(qk_4x4_t, 4, 4)
QK_TAIL(qk_2x8_t, 2, 8)
QK_TAIL(qk_1x8_t, 1, 8)
QH_TAIL(qh_8_t, 8)

typedef void (*qk_full_fn)(const float *, int64_t, const float *, int64_t, int64_t, float *, int64_t);
typedef void (*qk_tail_fn)(const float *, int64_t, const float *const *, int64_t, float *, int64_t);

/* Passes over the lane vectors (4, 2 or 1 zmm at a time; one ymm for sub-tiles of <= 8 rows: Zen 4
 * issues two ymm FMAs per cycle against one zmm, so half-width rows lose nothing there), each pass
 * over the keys in full blocks, then 8-key (4-key) tail blocks. */
static void qk_f32(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br, float *st,
                   int64_t lds) {
  const int nv = br <= 8 ? 1 : (br + 15) / 16, k64 = ldk == 64;
  for (int v0 = 0; v0 < nv;) {
    int iv = nv - v0 >= 4 ? 4 : nv - v0 >= 2 ? 2 : 1, J, Jt;
    qk_full_fn full;
    qk_tail_fn tail;
    if (br <= 8) full = k64 ? qh_16_64 : qh_16_g, tail = qh_8_t, J = 16, Jt = 8;
    else if (iv == 4) full = k64 ? qk_4x4_64 : qk_4x4_g, tail = qk_4x4_t, J = 4, Jt = 4;
    else if (iv == 2) full = k64 ? qk_2x8_64 : qk_2x8_g, tail = qk_2x8_t, J = 8, Jt = 8;
    else full = k64 ? qk_1x16_64 : qk_1x16_g, tail = qk_1x8_t, J = 16, Jt = 8;
    const float *q = qt + 16 * v0;
    int j0 = 0;
    for (; j0 + J <= bc; j0 += J) full(q, ldq, k + (int64_t)j0 * ldk, ldk, d, st + (int64_t)j0 * lds + 16 * v0, lds);
    for (; j0 < bc; j0 += Jt) {
      const float *kr[8];
      for (int j = 0; j < Jt; j++) kr[j] = k + (int64_t)(j0 + j < bc ? j0 + j : bc - 1) * ldk;
      tail(q, ldq, kr, d, st + (int64_t)j0 * lds + 16 * v0, lds);
    }
    v0 += iv;
  }
}

/* ---- online softmax --------------------------------------------------------------------------- */

static void softmax(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m, float *l,
                    float *alpha) {
  softmax_impl(st, lds, bc, br, mask, c, m, l, alpha, NULL);
}

/* ---- P V ------------------------------------------------------------------------------------- */

/* o[0..I)[0 .. 16*DV) = o * alpha + P V; the last of the DV vectors of V uses lane mask tm. */
#define PV_BLOCK(NAME, I, DV)                                                                                  \
  static void NAME(const float *pt, int64_t lds, const float *v, int64_t ldv, int bc, float *o, int64_t ldo,  \
                   const float *alpha, __mmask16 tm) {                                                       \
    __m512 acc[I][DV];                                                                                       \
    UNROLL for (int i = 0; i < I; i++) {                                                                     \
      __m512 a = _mm512_set1_ps(alpha[i]);                                                                   \
      UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ldo + 16 * e), a); \
    }                                                                                                        \
    for (int j = 0; j < bc; j++) {                                                                           \
      __m512 vv[DV];                                                                                         \
      UNROLL for (int e = 0; e < DV; e++) vv[e] = _mm512_maskz_loadu_ps(e == DV - 1 ? tm : 0xFFFF, v + 16 * e); \
      UNROLL for (int i = 0; i < I; i++) {                                                                   \
        __m512 pb = _mm512_set1_ps(pt[i]);                                                                   \
        UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_fmadd_ps(pb, vv[e], acc[i][e]);              \
      }                                                                                                      \
      v += ldv;                                                                                              \
      pt += lds;                                                                                             \
    }                                                                                                        \
    UNROLL for (int i = 0; i < I; i++) UNROLL for (int e = 0; e < DV; e++)                                   \
        _mm512_storeu_ps(o + i * ldo + 16 * e, acc[i][e]);                                                   \
  }
#define PV_ROWS(DV) PV_BLOCK(pv_4x##DV, 4, DV) PV_BLOCK(pv_3x##DV, 3, DV) PV_BLOCK(pv_2x##DV, 2, DV) PV_BLOCK(pv_1x##DV, 1, DV)
PV_ROWS(4)
PV_ROWS(3)
PV_ROWS(2)
PV_ROWS(1)

typedef void (*pv_fn)(const float *, int64_t, const float *, int64_t, int, float *, int64_t, const float *, __mmask16);
static const pv_fn pv_table[4][4] = {{pv_1x1, pv_1x2, pv_1x3, pv_1x4},
                                     {pv_2x1, pv_2x2, pv_2x3, pv_2x4},
                                     {pv_3x1, pv_3x2, pv_3x3, pv_3x4},
                                     {pv_4x1, pv_4x2, pv_4x3, pv_4x4}};

/* Head dimension in chunks of up to 4 vectors (64 floats), rows in blocks of 4. */
static void pv(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, int bc, int br, float *o, int64_t ldo,
               const float *alpha) {
  const int64_t nvec = (d + 15) / 16;
  for (int64_t e0 = 0; e0 < nvec; e0 += 4) {
    int dv = nvec - e0 >= 4 ? 4 : (int)(nvec - e0);
    __mmask16 tm = e0 + dv == nvec ? lanes(d - 16 * (nvec - 1)) : (__mmask16)0xFFFF;
    for (int i0 = 0; i0 < br; i0 += 4) {
      int rows = br - i0 >= 4 ? 4 : br - i0;
      pv_table[rows - 1][dv - 1](pt + i0, lds, v + 16 * e0, ldv, bc, o + (int64_t)i0 * ldo + 16 * e0, ldo, alpha + i0, tm);
    }
  }
}

const ts__attn_kern ts__attn_kern_avx512 = {.qk_f32 = qk_f32,
                                            .qk_bf16 = ts__attn_avx512_qk_bf16,
                                            .softmax = softmax,
                                            .pv = pv,
                                            .vpack = ts__attn_avx512_vpack,
                                            .softmax_pairs = ts__attn_avx512_softmax_pairs,
                                            .pv_pairs = ts__attn_avx512_pv_pairs};
