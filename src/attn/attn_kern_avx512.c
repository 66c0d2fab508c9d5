/* AVX-512 attention micro-kernels: query rows in the 16 lanes (see attn.h "Kernel design").
 *   Q K^T:   S^T[j][i..i+16*IV) accumulated in IV x J zmm registers; per k one Q^T load per lane
 *            vector and one broadcast K[j][k] per key (K stays in its [n][d] layout).
 *   softmax: lane-wise running max / sum over the key rows of S^T, exp2 by polynomial + vscalefps.
 *   P V:     O[i][e..e+16*DV) for I rows in I x DV registers; per key one V load per vector and one
 *            broadcast of P^T[j][i] per row.
 *   bf16:    Q K^T with vdpbf16ps over (k, k+1) pairs (AVX-512 BF16).
 * Shapes and contracts: attn_internal.h. */
#include "attn/attn_avx512_inl.h"
#include "attn/attn_rows4_inl.h"

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
/* Keys in runs of RL consecutive rows: run g = K rows kq[g] + r*LDK, r < RL, so J = 16 keys take
 * 16 / RL pointers (4 for 4-key runs; single keys, RL = 1, one pointer each). */
#define QK_RUNS(NAME, IV, J, LDK, RL)                                                                          \
  static void NAME(const float *qt, int64_t ldq, const float *const *kq, int64_t ldk, int64_t d, float *st, int64_t lds) { \
    QK_BODY(__m512, 16, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, _mm512_setzero_ps, IV, J, \
            kq[j / (RL)][(j % (RL)) * (LDK) + x])                                                            \
  }
#define QH_RUNS(NAME, J, LDK, RL)                                                                              \
  static void NAME(const float *qt, int64_t ldq, const float *const *kq, int64_t ldk, int64_t d, float *st, int64_t lds) { \
    QK_BODY(__m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, _mm256_setzero_ps, 1, J, \
            kq[j / (RL)][(j % (RL)) * (LDK) + x])                                                            \
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

QK_RUNS(qr_4x4_64, 4, 4, 64, 4)
QK_RUNS(qr_4x4_g, 4, 4, ldk, 4)
QK_RUNS(qr_2x8_64, 2, 8, 64, 4)
QK_RUNS(qr_2x8_g, 2, 8, ldk, 4)
QK_RUNS(qr_2x4_64, 2, 4, 64, 4)
QK_RUNS(qr_2x4_g, 2, 4, ldk, 4)
QK_RUNS(qr_1x16_64, 1, 16, 64, 4)
QK_RUNS(qr_1x16_g, 1, 16, ldk, 4)
QK_RUNS(qr_1x8_64, 1, 8, 64, 4)
QK_RUNS(qr_1x8_g, 1, 8, ldk, 4)
QH_RUNS(qhr_16_64, 16, 64, 4)
QH_RUNS(qhr_16_g, 16, ldk, 4)
QH_RUNS(qhr_8_64, 8, 64, 4)
QH_RUNS(qhr_8_g, 8, ldk, 4)
QK_RUNS(qs_4x4, 4, 4, 0, 1)
QK_RUNS(qs_2x8, 2, 8, 0, 1)
QK_RUNS(qs_2x4, 2, 4, 0, 1)
QK_RUNS(qs_1x16, 1, 16, 0, 1)
QK_RUNS(qs_1x8, 1, 8, 0, 1)
QH_RUNS(qhs_16, 16, 0, 1)
QH_RUNS(qhs_8, 8, 0, 1)

typedef void (*qk_full_fn)(const float *, int64_t, const float *, int64_t, int64_t, float *, int64_t);
typedef void (*qk_runs_fn)(const float *, int64_t, const float *const *, int64_t, int64_t, float *, int64_t);
typedef void (*qk_tail_fn)(const float *, int64_t, const float *const *, int64_t, float *, int64_t);

/* Sub-tiles of <= 4 rows (a few global tokens' rows over many keys, the last rows of a panel): with
 * the rows in the lanes they fill half of a ymm, which on Zen 5 issues no faster than a zmm, so
 * here the head dimension is in the lanes instead: per 4 rows x 4 keys, 16 dot products over d in
 * 16 zmm, reduced to one vector whose 128-bit lane t holds key t's 4 rows (st's layout). The rows
 * are copied out of Q^T once per sub-tile (rows past br repeat the last; keys past bc repeat the
 * last key into st's padding rows). Against the ymm kernel, side by side in one process: 4 x 16
 * block-skip tiles on swin 1.37x; vitdet's plan (global rows) 1.02-1.03x; at 5-8 rows the ymm
 * kernel, whose lanes are then (nearly) full, stays 1.5-2% ahead. d <= QS_MAXD (the copy). */
#define QS_ROWS 4
#define QS_MAXD 256
static inline __attribute__((always_inline)) void qk_small_impl(const float *qt, int64_t ldq, const float *k, int64_t ldk,
                                                                int64_t d, int bc, int br, float *st, int64_t lds) {
  _Alignas(64) float qr[4 * QS_MAXD];
  for (int i0 = 0; i0 < br; i0 += 4) {
    ts__attn_rows4(qt, ldq, d, i0, br, qr);
    for (int j0 = 0; j0 < bc; j0 += 4) {
      const float *kr[4];
      UNROLL for (int t = 0; t < 4; t++) kr[t] = k + (int64_t)(j0 + t < bc ? j0 + t : bc - 1) * ldk;
      __m512 acc[16];
      UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_setzero_ps();
      _Pragma("GCC unroll 4") for (int64_t c = 0; c < d; c += 16) {
        const __mmask16 m = ts__mask16(d - c);
        __m512 qv[4], kv[4];
        UNROLL for (int r = 0; r < 4; r++) qv[r] = _mm512_maskz_loadu_ps(m, qr + r * d + c);
        UNROLL for (int t = 0; t < 4; t++) {
          kv[t] = _mm512_maskz_loadu_ps(m, kr[t] + c);
          PIN(kv[t]);
        }
        UNROLL for (int x = 0; x < 16; x++) acc[x] = _mm512_fmadd_ps(qv[x / 4], kv[x % 4], acc[x]);
      }
      const __m512 sv = reduce16(acc); /* 128-bit lane t: key j0 + t's rows i0 .. i0+3 */
      store_lanes4(st + (int64_t)j0 * lds + i0, lds, sv, 4);
    }
  }
}

static void qk_small(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br, float *st,
                     int64_t lds) {
  if (d == 64) qk_small_impl(qt, ldq, k, ldk, 64, bc, br, st, lds);
  else qk_small_impl(qt, ldq, k, ldk, d, bc, br, st, lds);
}

/* Passes over the lane vectors (4, 2 or 1 zmm at a time; one ymm for sub-tiles of 5-8 rows: Zen 4
 * issues two ymm FMAs per cycle against one zmm, so half-width rows lose nothing there), each pass
 * over the keys in full blocks, then 8-key (4-key) tail blocks; <= 4 rows: qk_small. */
static void qk_f32(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br, float *st,
                   int64_t lds) {
  if (br <= QS_ROWS && d <= QS_MAXD) {
    qk_small(qt, ldq, k, ldk, d, bc, br, st, lds);
    return;
  }
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

/* qk_f32 over nq runs of rl keys (4, or 1: single keys): the same passes over the lane vectors,
 * keys in blocks of 16 for one lane vector, 8 for two, 4 for four; a last block of fewer than 12
 * keys takes the 8-key kernel for one lane vector, of at most 4 the 4-key kernel for two; missing
 * keys repeat the last run (scratch st rows). */
static void qk_runs(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, const int32_t *runs, int nq, int rl,
                    int br, float *st, int64_t lds) {
  const int nv = br <= 8 ? 1 : (br + 15) / 16, k64 = ldk == 64, nk = nq * rl;
  for (int v0 = 0; v0 < nv;) {
    int iv = nv - v0 >= 4 ? 4 : nv - v0 >= 2 ? 2 : 1;
    const float *q = qt + 16 * v0;
    for (int j0 = 0; j0 < nk;) {
      int J;
      qk_runs_fn f;
      if (iv == 4) J = 4, f = rl == 1 ? qs_4x4 : k64 ? qr_4x4_64 : qr_4x4_g;
      else if (iv == 2 && nk - j0 <= 4) J = 4, f = rl == 1 ? qs_2x4 : k64 ? qr_2x4_64 : qr_2x4_g; /* no 4 padding keys */
      else if (iv == 2) J = 8, f = rl == 1 ? qs_2x8 : k64 ? qr_2x8_64 : qr_2x8_g;
      else if (nk - j0 >= 12) J = 16, f = br <= 8 ? (rl == 1 ? qhs_16 : k64 ? qhr_16_64 : qhr_16_g)
                                                    : (rl == 1 ? qs_1x16 : k64 ? qr_1x16_64 : qr_1x16_g);
      else J = 8, f = br <= 8 ? (rl == 1 ? qhs_8 : k64 ? qhr_8_64 : qhr_8_g) : (rl == 1 ? qs_1x8 : k64 ? qr_1x8_64 : qr_1x8_g);
      const float *kq[16];
      for (int g = 0, g0 = j0 / rl; g < J / rl; g++) kq[g] = k + (int64_t)runs[g0 + g < nq ? g0 + g : nq - 1] * ldk;
      f(q, ldq, kq, ldk, d, st + (int64_t)j0 * lds + 16 * v0, lds);
      j0 += J;
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
/* Keys in nruns runs of RUNLEN consecutive V rows, run g starting at row starts[g] of v0 (contiguous
 * keys: one run of bc from row 0; COMPACT items: 4-key runs, RUNLEN the constant 4). */
#define PV_BLOCK(NAME, I, DV, RUNLEN)                                                                          \
  static void NAME(const float *pt, int64_t lds, const float *v0, int64_t ldv, const int32_t *starts, int nruns,    \
                   int runlen, float *o, int64_t ldo, const float *alpha, __mmask16 tm) {                    \
    __m512 acc[I][DV];                                                                                       \
    UNROLL for (int i = 0; i < I; i++) {                                                                     \
      __m512 a = _mm512_set1_ps(alpha[i]);                                                                   \
      UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ldo + 16 * e), a); \
    }                                                                                                        \
    (void)runlen;                                                                                            \
    for (int g = 0; g < nruns; g++) {                                                                        \
    const float *v = v0 + (int64_t)starts[g] * ldv;                                                          \
    for (int j = 0; j < (RUNLEN); j++) {                                                                     \
      __m512 vv[DV];                                                                                         \
      UNROLL for (int e = 0; e < DV; e++) vv[e] = _mm512_maskz_loadu_ps(e == DV - 1 ? tm : 0xFFFF, v + 16 * e); \
      UNROLL for (int e = 0; e < DV; e++) PIN(vv[e]);                                                        \
      UNROLL for (int i = 0; i < I; i++) {                                                                   \
        __m512 pb = _mm512_set1_ps(pt[i]);                                                                   \
        UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_fmadd_ps(pb, vv[e], acc[i][e]);              \
      }                                                                                                      \
      v += ldv;                                                                                              \
      pt += lds;                                                                                             \
    }                                                                                                        \
    }                                                                                                        \
    UNROLL for (int i = 0; i < I; i++) UNROLL for (int e = 0; e < DV; e++)                                   \
        _mm512_storeu_ps(o + i * ldo + 16 * e, acc[i][e]);                                                   \
  }
#define PV_ROWS(P, DV, RL)                                                                                     \
  PV_BLOCK(P##_4x##DV, 4, DV, RL) PV_BLOCK(P##_3x##DV, 3, DV, RL) PV_BLOCK(P##_2x##DV, 2, DV, RL)            \
  PV_BLOCK(P##_1x##DV, 1, DV, RL)
#define PV_ALL(P, RL) PV_ROWS(P, 4, RL) PV_ROWS(P, 3, RL) PV_ROWS(P, 2, RL) PV_ROWS(P, 1, RL)
PV_ALL(pv, runlen)
PV_ALL(pvr, TS__ATTN_RUN)
PV_ALL(pvs, 1)

typedef void (*pv_fn)(const float *, int64_t, const float *, int64_t, const int32_t *, int, int, float *, int64_t,
                      const float *, __mmask16);
#define PV_TABLE(P)                                                                                            \
  {{P##_1x1, P##_1x2, P##_1x3, P##_1x4},                                                                      \
   {P##_2x1, P##_2x2, P##_2x3, P##_2x4},                                                                      \
   {P##_3x1, P##_3x2, P##_3x3, P##_3x4},                                                                      \
   {P##_4x1, P##_4x2, P##_4x3, P##_4x4}}
static const pv_fn pv_table[3][4][4] = {PV_TABLE(pv), PV_TABLE(pvr), PV_TABLE(pvs)};

/* Head dimension in chunks of up to 4 vectors (64 floats), rows in blocks of 4; keys in nruns runs
 * (table 0: one run of runlen, table 1: 4-key runs, table 2: single keys). */
static void pv_keys(int table, const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *starts,
                    int nruns, int runlen, int br, float *o, int64_t ldo, const float *alpha) {
  const int64_t nvec = (d + 15) / 16;
  for (int64_t e0 = 0; e0 < nvec; e0 += 4) {
    int dv = nvec - e0 >= 4 ? 4 : (int)(nvec - e0);
    __mmask16 tm = e0 + dv == nvec ? ts__mask16(d - 16 * (nvec - 1)) : (__mmask16)0xFFFF;
    for (int i0 = 0; i0 < br; i0 += 4) {
      int rows = br - i0 >= 4 ? 4 : br - i0;
      pv_table[table][rows - 1][dv - 1](pt + i0, lds, v + 16 * e0, ldv, starts, nruns, runlen,
                                        o + (int64_t)i0 * ldo + 16 * e0, ldo, alpha + i0, tm);
    }
  }
}

static void pv(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, int bc, int br, float *o, int64_t ldo,
               const float *alpha) {
  static const int32_t zero = 0;
  pv_keys(0, pt, lds, v, ldv, d, &zero, 1, bc, br, o, ldo, alpha);
}

/* P V of I rows x 16 DV columns over the keys listed in bits[0 .. nw) (bit j: key j, row
 * runs[j / RL] + j % RL of v0; P^T row j of pt). */
#define PVS_BLOCK(NAME, I, DV, RL)                                                                             \
  static void NAME(const float *pt, int64_t lds, const float *v0, int64_t ldv, const int32_t *runs, const uint64_t *bits, \
                   int nw, float *o, int64_t ldo, const float *alpha, __mmask16 tm) {                          \
    __m512 acc[I][DV];                                                                                       \
    UNROLL for (int i = 0; i < I; i++) {                                                                     \
      __m512 a = _mm512_set1_ps(alpha[i]);                                                                   \
      UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_mul_ps(_mm512_loadu_ps(o + i * ldo + 16 * e), a); \
    }                                                                                                        \
    for (int w = 0; w < nw; w++)                                                                             \
      for (uint64_t m = bits[w]; m; m &= m - 1) {                                                            \
        const int j = 64 * w + __builtin_ctzll(m);                                                           \
        const float *v = v0 + ((int64_t)runs[j / (RL)] + j % (RL)) * ldv, *p = pt + (int64_t)j * lds;        \
        __m512 vv[DV];                                                                                       \
        UNROLL for (int e = 0; e < DV; e++) vv[e] = _mm512_maskz_loadu_ps(e == DV - 1 ? tm : 0xFFFF, v + 16 * e); \
      UNROLL for (int e = 0; e < DV; e++) PIN(vv[e]);                                                        \
        UNROLL for (int i = 0; i < I; i++) {                                                                 \
          __m512 pb = _mm512_set1_ps(p[i]);                                                                  \
          UNROLL for (int e = 0; e < DV; e++) acc[i][e] = _mm512_fmadd_ps(pb, vv[e], acc[i][e]);            \
        }                                                                                                    \
      }                                                                                                      \
    UNROLL for (int i = 0; i < I; i++) UNROLL for (int e = 0; e < DV; e++)                                   \
        _mm512_storeu_ps(o + i * ldo + 16 * e, acc[i][e]);                                                   \
  }
#define PVS_ROWS(P, DV, RL)                                                                                    \
  PVS_BLOCK(P##_4x##DV, 4, DV, RL) PVS_BLOCK(P##_3x##DV, 3, DV, RL) PVS_BLOCK(P##_2x##DV, 2, DV, RL)         \
  PVS_BLOCK(P##_1x##DV, 1, DV, RL)
#define PVS_ALL(P, RL) PVS_ROWS(P, 4, RL) PVS_ROWS(P, 3, RL) PVS_ROWS(P, 2, RL) PVS_ROWS(P, 1, RL)
PVS_ALL(pvsr, TS__ATTN_RUN)
PVS_ALL(pvss, 1)
typedef void (*pvs_fn)(const float *, int64_t, const float *, int64_t, const int32_t *, const uint64_t *, int, float *,
                       int64_t, const float *, __mmask16);
static const pvs_fn pvs_table[2][4][4] = {PV_TABLE(pvsr), PV_TABLE(pvss)};

static void pv_runs(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *runs, int nq, int rl,
                    int br, float *o, int64_t ldo, const float *alpha, const uint64_t *skip) {
  if (!skip) {
    pv_keys(rl == 1 ? 2 : 1, pt, lds, v, ldv, d, runs, nq, rl, br, o, ldo, alpha);
    return;
  }
  /* every 4-row block over its own keys (skip lists [ceil(br/4)][nw]) */
  const int64_t nvec = (d + 15) / 16;
  const int nw = (nq * rl + 63) / 64;
  for (int64_t e0 = 0; e0 < nvec; e0 += 4) {
    int dv = nvec - e0 >= 4 ? 4 : (int)(nvec - e0);
    __mmask16 tm = e0 + dv == nvec ? ts__mask16(d - 16 * (nvec - 1)) : (__mmask16)0xFFFF;
    for (int i0 = 0; i0 < br; i0 += 4) {
      int rows = br - i0 >= 4 ? 4 : br - i0;
      pvs_table[rl == 1][rows - 1][dv - 1](pt + i0, lds, v + 16 * e0, ldv, runs, skip + (int64_t)(i0 / 4) * nw, nw,
                                           o + (int64_t)i0 * ldo + 16 * e0, ldo, alpha + i0, tm);
    }
  }
}

/* ---- Q^T packing and the final normalization ------------------------------------------------ */

/* 16 x 16 blocks: rows past nr load as zeros (their lanes are scratch), columns past d are not
 * stored. */
static void pack_q(const float *q, int64_t nr, int64_t d, int64_t ldq, float *qt) {
  for (int64_t i0 = 0; i0 < nr; i0 += 16)
    for (int64_t k0 = 0; k0 < d; k0 += 16) {
      __m512 r[16];
      const __mmask16 km = ts__mask16(d - k0);
      UNROLL for (int a = 0; a < 16; a++)
        r[a] = i0 + a < nr ? _mm512_maskz_loadu_ps(km, q + (i0 + a) * d + k0) : _mm512_setzero_ps();
      ts__transpose16(r);
      const int kc = d - k0 < 16 ? (int)(d - k0) : 16;
      for (int c = 0; c < kc; c++) _mm512_storeu_ps(qt + (k0 + c) * ldq + i0, r[c]);
    }
}

static void finish(const float *o, int64_t ldo, const float *l, int64_t nr, int64_t d, float *dst) {
  for (int64_t i = 0; i < nr; i++) {
    const __m512 inv = _mm512_set1_ps(l[i] > 0.0f ? 1.0f / l[i] : 0.0f);
    for (int64_t e = 0; e < d; e += 16)
      _mm512_mask_storeu_ps(dst + i * d + e, ts__mask16(d - e), _mm512_mul_ps(_mm512_loadu_ps(o + i * ldo + e), inv));
  }
}

/* Two tables: plain AVX-512, and with the bf16 dot entries (attn_kern_bf16_avx512.c,
 * attn_kern_diag_bf16_avx512.c) for CPUs with AVX-512 BF16; the dispatcher (attn_exec.c) picks. */
#define TS__ATTN_KERN_AVX512(QK_BF16, VPACK, SOFTMAX_PAIRS, PV_PAIRS, QK_DIAG_DOT)                                       \
  {.pack_q = pack_q,                                                                                                     \
   .finish = finish,                                                                                                     \
   .qk_f32 = qk_f32,                                                                                                     \
   .qk_bf16 = QK_BF16,                                                                                                   \
   .softmax = softmax,                                                                                                   \
   .pv = pv,                                                                                                             \
   .qk_runs = qk_runs,                                                                                                   \
   .pv_runs = pv_runs,                                                                                                   \
   .vpack = VPACK,                                                                                                       \
   .softmax_pairs = SOFTMAX_PAIRS,                                                                                       \
   .pv_pairs = PV_PAIRS,                                                                                                 \
   .qk_diag = ts__attn_avx512_qk_diag,                                                                                   \
   .qk_diag_dot = QK_DIAG_DOT,                                                                                           \
   .pv_diag = ts__attn_avx512_pv_diag}
const ts__attn_kern ts__attn_kern_avx512 = TS__ATTN_KERN_AVX512(NULL, NULL, NULL, NULL, NULL);
const ts__attn_kern ts__attn_kern_avx512_bf16 =
    TS__ATTN_KERN_AVX512(ts__attn_avx512_qk_bf16, ts__attn_avx512_vpack, ts__attn_avx512_softmax_pairs,
                         ts__attn_avx512_pv_pairs, ts__attn_avx512_qk_diag_dot);
