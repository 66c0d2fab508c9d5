/* AVX-512 BF16 attention kernels (the bf16 dot path): Q K^T and P V with vdpbf16ps on bf16 pairs,
 * fp32 accumulation. Q K^T pairs (k, k+1) of the head dimension (Q^T packed as pairs, K pairs
 * broadcast as dwords); P V pairs (j, j+1) of the keys (V tile packed as pairs once per column tile,
 * P rounded to bf16 pairs by the softmax). Only called when the CPU has AVX512_BF16.
 * Shapes: attn_internal.h. */
#include "attn/attn_avx512_inl.h"
#include "attn/attn_rows4_inl.h"

/* ---- Q K^T (bf16 pairs, vdpbf16ps) ----------------------------------------------------------- */

static inline float bf16f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* As QK_BODY with (k, k+1) bf16 pairs: KEYP(j) points at key j's pair p (read as one dword). */
#define QKB_BODY(IV, J, KEYP, KEYLAST)                                                                        \
  __m512 acc[J][IV];                                                                                         \
  UNROLL for (int j = 0; j < J; j++) UNROLL for (int v = 0; v < IV; v++) acc[j][v] = _mm512_setzero_ps();    \
  _Pragma("GCC unroll 4") for (int64_t p = 0; p < d / 2; p++) {                                              \
    __m512bh q[IV];                                                                                          \
    UNROLL for (int v = 0; v < IV; v++) q[v] = (__m512bh)_mm512_loadu_si512(qtp + p * ldq + 16 * v);        \
    UNROLL for (int j = 0; j < J; j++) {                                                                     \
      uint32_t kw;                                                                                           \
      memcpy(&kw, KEYP, sizeof kw);                                                                          \
      __m512bh kv = (__m512bh)_mm512_set1_epi32((int)kw);                                                    \
      UNROLL for (int v = 0; v < IV; v++) acc[j][v] = _mm512_dpbf16_ps(acc[j][v], q[v], kv);                \
    }                                                                                                        \
  }                                                                                                          \
  if (d & 1) {                                                                                               \
    __m512 q[IV];                                                                                            \
    UNROLL for (int v = 0; v < IV; v++) q[v] = _mm512_loadu_ps(qlast + 16 * v);                             \
    UNROLL for (int j = 0; j < J; j++) {                                                                     \
      __m512 kv = _mm512_set1_ps(bf16f(KEYLAST));                                                            \
      UNROLL for (int v = 0; v < IV; v++) acc[j][v] = _mm512_fmadd_ps(kv, q[v], acc[j][v]);                 \
    }                                                                                                        \
  }                                                                                                          \
  UNROLL for (int j = 0; j < J; j++) UNROLL for (int v = 0; v < IV; v++)                                     \
      _mm512_storeu_ps(st + j * lds + 16 * v, acc[j][v]);

#define QKB_FULL(NAME, IV, J, LDK)                                                                             \
  static void NAME(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *kb, int64_t ldk,       \
                   int64_t d, float *st, int64_t lds) {                                                      \
    QKB_BODY(IV, J, kb + j * (LDK) + 2 * p, kb[j * (LDK) + d - 1])                                           \
  }
#define QKB_TAIL(NAME, IV, J)                                                                                  \
  static void NAME(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *const *kr, int64_t d, \
                   float *st, int64_t lds) {                                                                 \
    QKB_BODY(IV, J, kr[j] + 2 * p, kr[j][d - 1])                                                             \
  }
QKB_FULL(qkb_4x4_64, 4, 4, 64)
QKB_FULL(qkb_4x4_g, 4, 4, ldk)
QKB_FULL(qkb_2x8_64, 2, 8, 64)
QKB_FULL(qkb_2x8_g, 2, 8, ldk)
QKB_FULL(qkb_1x16_64, 1, 16, 64)
QKB_FULL(qkb_1x16_g, 1, 16, ldk)
QKB_TAIL(qkb_4x4_t, 4, 4)
QKB_TAIL(qkb_2x8_t, 2, 8)
QKB_TAIL(qkb_1x8_t, 1, 8)
/* Keys in runs of RL consecutive rows read in place (COMPACT items): run g = K rows kq[g] + r LDK. */
#define QKB_RUNS(NAME, IV, J, LDK, RL)                                                                         \
  static void NAME(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *const *kq, int64_t ldk, \
                   int64_t d, float *st, int64_t lds) {                                                      \
    (void)ldk;                                                                                               \
    QKB_BODY(IV, J, kq[j / (RL)] + (j % (RL)) * (LDK) + 2 * p, kq[j / (RL)][(j % (RL)) * (LDK) + d - 1])      \
  }
QKB_RUNS(qkbr_4x4_64, 4, 4, 64, 4)
QKB_RUNS(qkbr_4x4_g, 4, 4, ldk, 4)
QKB_RUNS(qkbr_2x8_64, 2, 8, 64, 4)
QKB_RUNS(qkbr_2x8_g, 2, 8, ldk, 4)
QKB_RUNS(qkbr_2x4_64, 2, 4, 64, 4)
QKB_RUNS(qkbr_2x4_g, 2, 4, ldk, 4)
QKB_RUNS(qkbr_1x16_64, 1, 16, 64, 4)
QKB_RUNS(qkbr_1x16_g, 1, 16, ldk, 4)
QKB_RUNS(qkbr_1x8_64, 1, 8, 64, 4)
QKB_RUNS(qkbr_1x8_g, 1, 8, ldk, 4)
QKB_RUNS(qkbs_4x4, 4, 4, 0, 1)
QKB_RUNS(qkbs_2x8, 2, 8, 0, 1)
QKB_RUNS(qkbs_2x4, 2, 4, 0, 1)
QKB_RUNS(qkbs_1x16, 1, 16, 0, 1)
QKB_RUNS(qkbs_1x8, 1, 8, 0, 1)
typedef void (*qkb_runs_fn)(const uint32_t *, const float *, int64_t, const uint16_t *const *, int64_t, int64_t, float *,
                            int64_t);

/* Keys as nq runs of rl (4 or 1) rows of the head's k (as the fp32 qk_runs): passes of 4, 2 or 1
 * lane vectors over blocks of 4, 8 (a last one of <= 4: 4) or 16 (a last one of < 12: 8) keys;
 * missing keys repeat the last run (scratch st rows). */
static void qkb_runs(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *k, int64_t ldk, int64_t d,
                     const int32_t *runs, int nq, int rl, int br, float *st, int64_t lds) {
  const int nv = (br + 15) / 16, k64 = ldk == 64, nk = nq * rl;
  for (int v0 = 0; v0 < nv;) {
    const int iv = nv - v0 >= 4 ? 4 : nv - v0 >= 2 ? 2 : 1;
    for (int j0 = 0; j0 < nk;) {
      int J;
      qkb_runs_fn f;
      if (iv == 4) J = 4, f = rl == 1 ? qkbs_4x4 : k64 ? qkbr_4x4_64 : qkbr_4x4_g;
      else if (iv == 2 && nk - j0 <= 4) J = 4, f = rl == 1 ? qkbs_2x4 : k64 ? qkbr_2x4_64 : qkbr_2x4_g;
      else if (iv == 2) J = 8, f = rl == 1 ? qkbs_2x8 : k64 ? qkbr_2x8_64 : qkbr_2x8_g;
      else if (nk - j0 >= 12) J = 16, f = rl == 1 ? qkbs_1x16 : k64 ? qkbr_1x16_64 : qkbr_1x16_g;
      else J = 8, f = rl == 1 ? qkbs_1x8 : k64 ? qkbr_1x8_64 : qkbr_1x8_g;
      const uint16_t *kq[16];
      for (int g = 0, g0 = j0 / rl; g < J / rl; g++) kq[g] = k + (int64_t)runs[g0 + g < nq ? g0 + g : nq - 1] * ldk;
      f(qtp + 16 * v0, qlast + 16 * v0, ldq, kq, ldk, d, st + (int64_t)j0 * lds + 16 * v0, lds);
      j0 += J;
    }
    v0 += iv;
  }
}

typedef void (*qkb_full_fn)(const uint32_t *, const float *, int64_t, const uint16_t *, int64_t, int64_t, float *, int64_t);
typedef void (*qkb_tail_fn)(const uint32_t *, const float *, int64_t, const uint16_t *const *, int64_t, float *, int64_t);

/* Sub-tiles of <= 4 rows, even d (as the fp32 kernels' qk_small, attn_kern_avx512.c): the head
 * dimension's pairs in the lanes, 4 rows x 4 keys per block (K rows read as dwords of pairs in
 * place), one transposing reduction; the rows' pairs are copied out of the pair-packed Q^T once per
 * sub-tile. With the rows in the lanes, 4 rows used a quarter of each vdpbf16ps. */
#define QSB_MAXP 128
static inline __attribute__((always_inline)) void qkb_small_impl(const uint32_t *qtp, int64_t ldq, const uint16_t *k,
                                                                 int64_t ldk, int64_t np, int bc, int br, float *st,
                                                                 int64_t lds) {
  _Alignas(64) uint32_t qr[4 * QSB_MAXP];
  for (int i0 = 0; i0 < br; i0 += 4) {
    ts__attn_rows4((const float *)qtp, ldq, np, i0, br, (float *)qr); /* dwords moved as floats: bit copies */
    for (int j0 = 0; j0 < bc; j0 += 4) {
      const uint16_t *kr[4];
      UNROLL for (int t = 0; t < 4; t++) kr[t] = k + (int64_t)(j0 + t < bc ? j0 + t : bc - 1) * ldk;
      __m512 acc[16];
      UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_setzero_ps();
      _Pragma("GCC unroll 4") for (int64_t c = 0; c < np; c += 16) {
        const __mmask16 m = ts__mask16(np - c);
        __m512bh qv[4], kv[4];
        UNROLL for (int r = 0; r < 4; r++) qv[r] = (__m512bh)_mm512_maskz_loadu_epi32(m, qr + r * np + c);
        UNROLL for (int t = 0; t < 4; t++) kv[t] = (__m512bh)_mm512_maskz_loadu_epi32(m, kr[t] + 2 * c);
        UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_dpbf16_ps(acc[x], qv[x / 4], kv[x % 4]);
      }
      const __m512 sv = reduce16(acc); /* 128-bit lane t: key j0 + t's rows i0 .. i0+3 */
      store_lanes4(st + (int64_t)j0 * lds + i0, lds, sv, 4);
    }
  }
}

void ts__attn_avx512_qk_bf16(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *k, int64_t ldk, int64_t d, int bc,
                             int br, float *st, int64_t lds, const int32_t *runs, int rl) {
  if (runs) {
    qkb_runs(qtp, qlast, ldq, k, ldk, d, runs, bc / rl, rl, br, st, lds);
    return;
  }
  if (br <= 4 && !(d & 1) && d / 2 <= QSB_MAXP) {
    if (d == 64) qkb_small_impl(qtp, ldq, k, ldk, 32, bc, br, st, lds);
    else qkb_small_impl(qtp, ldq, k, ldk, d / 2, bc, br, st, lds);
    return;
  }
  const int nv = (br + 15) / 16, k64 = ldk == 64;
  for (int v0 = 0; v0 < nv;) {
    int iv = nv - v0 >= 4 ? 4 : nv - v0 >= 2 ? 2 : 1, J, Jt;
    qkb_full_fn full;
    qkb_tail_fn tail;
    if (iv == 4) full = k64 ? qkb_4x4_64 : qkb_4x4_g, tail = qkb_4x4_t, J = 4, Jt = 4;
    else if (iv == 2) full = k64 ? qkb_2x8_64 : qkb_2x8_g, tail = qkb_2x8_t, J = 8, Jt = 8;
    else full = k64 ? qkb_1x16_64 : qkb_1x16_g, tail = qkb_1x8_t, J = 16, Jt = 8;
    int j0 = 0;
    for (; j0 + J <= bc; j0 += J)
      full(qtp + 16 * v0, qlast + 16 * v0, ldq, k + (int64_t)j0 * ldk, ldk, d, st + (int64_t)j0 * lds + 16 * v0, lds);
    for (; j0 < bc; j0 += Jt) {
      const uint16_t *kr[8];
      for (int j = 0; j < Jt; j++) kr[j] = k + (int64_t)(j0 + j < bc ? j0 + j : bc - 1) * ldk;
      tail(qtp + 16 * v0, qlast + 16 * v0, ldq, kr, d, st + (int64_t)j0 * lds + 16 * v0, lds);
    }
    v0 += iv;
  }
}

/* ---- V tile -> pairs --------------------------------------------------------------------------- */

/* vp[p][e] = (V[2p][e], V[2p+1][e]) for p < ceil(bc/2), e < ldvp (zero past d and past bc); key j is
 * row j of v, or with runs row runs[j / rl] + j % rl (COMPACT items: V read in place). */
void ts__attn_avx512_vpack(const uint16_t *v, int64_t ldv, int64_t d, int bc, uint32_t *vp, int64_t ldvp,
                           const int32_t *runs, int rl) {
  for (int p = 0; p < (bc + 1) / 2; p++) {
    const int hasb = 2 * p + 1 < bc, ja = 2 * p, jb = 2 * p + 1;
    const uint16_t *a = v + (runs ? (int64_t)runs[ja / rl] + ja % rl : ja) * ldv;
    const uint16_t *b = hasb ? v + (runs ? (int64_t)runs[jb / rl] + jb % rl : jb) * ldv : a;
    for (int64_t e = 0; e < ldvp; e += 16) {
      __mmask16 km = ts__mask16(d - e);
      __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, a + e));
      __m512i hi = hasb ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, b + e)) : _mm512_setzero_si512();
      _mm512_storeu_si512(vp + p * ldvp + e, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

/* ---- softmax producing P pairs ------------------------------------------------------------------- */

void ts__attn_avx512_softmax_pairs(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m,
                                   float *l, float *alpha, uint32_t *pp) {
  softmax_impl(st, lds, bc, br, mask, c, m, l, alpha, pp);
}

/* ---- P V from pairs -------------------------------------------------------------------------------- */

/* o[0..I)[0 .. 16*DV) = o * alpha + sum over key pairs of dot(P pair, V pair). */
#define PVB_BLOCK(NAME, I, DV)                                                                                 \
  static void NAME(const uint32_t *pp, int64_t lds, const uint32_t *vp, int64_t ldvp, int np, float *o,       \
                   int64_t ldo, const float *alpha) {                                                        \
    __m512 acc[I][DV];                                                                                       \
    UNROLL for (int i = 0; i < I; i++) {                                                                     \
      __m512 a = _mm512_set1_ps(alpha[i]);                                                                   \
      UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ldo + 16 * e), a); \
    }                                                                                                        \
    for (int p = 0; p < np; p++) {                                                                           \
      __m512bh vv[DV];                                                                                       \
      UNROLL for (int e = 0; e < DV; e++) vv[e] = (__m512bh)_mm512_loadu_si512(vp + 16 * e);                \
      UNROLL for (int i = 0; i < I; i++) {                                                                   \
        __m512bh pb = (__m512bh)_mm512_set1_epi32((int)pp[i]);                                               \
        UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_dpbf16_ps(acc[i][e], vv[e], pb);             \
      }                                                                                                      \
      vp += ldvp;                                                                                            \
      pp += lds;                                                                                             \
    }                                                                                                        \
    UNROLL for (int i = 0; i < I; i++) UNROLL for (int e = 0; e < DV; e++)                                   \
        _mm512_storeu_ps(o + i * ldo + 16 * e, acc[i][e]);                                                   \
  }
#define PVB_ROWS(DV) PVB_BLOCK(pvb_4x##DV, 4, DV) PVB_BLOCK(pvb_3x##DV, 3, DV) PVB_BLOCK(pvb_2x##DV, 2, DV) PVB_BLOCK(pvb_1x##DV, 1, DV)
PVB_ROWS(4)
PVB_ROWS(3)
PVB_ROWS(2)
PVB_ROWS(1)

typedef void (*pvb_fn)(const uint32_t *, int64_t, const uint32_t *, int64_t, int, float *, int64_t, const float *);
static const pvb_fn pvb_table[4][4] = {{pvb_1x1, pvb_1x2, pvb_1x3, pvb_1x4},
                                       {pvb_2x1, pvb_2x2, pvb_2x3, pvb_2x4},
                                       {pvb_3x1, pvb_3x2, pvb_3x3, pvb_3x4},
                                       {pvb_4x1, pvb_4x2, pvb_4x3, pvb_4x4}};

/* O rows are ldo = round16(d) wide and vp is zero past d, so no lane masks are needed. */
void ts__attn_avx512_pv_pairs(const uint32_t *pp, int64_t lds, const uint32_t *vp, int64_t ldvp, int64_t d, int bc, int br,
                              float *o, int64_t ldo, const float *alpha) {
  const int64_t nvec = (d + 15) / 16;
  const int np = (bc + 1) / 2;
  for (int64_t e0 = 0; e0 < nvec; e0 += 4) {
    int dv = nvec - e0 >= 4 ? 4 : (int)(nvec - e0);
    for (int i0 = 0; i0 < br; i0 += 4) {
      int rows = br - i0 >= 4 ? 4 : br - i0;
      pvb_table[rows - 1][dv - 1](pp + i0, lds, vp + 16 * e0, ldvp, np, o + (int64_t)i0 * ldo + 16 * e0, ldo, alpha + i0);
    }
  }
}
