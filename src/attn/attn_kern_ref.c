/* Scalar micro-kernels: the portable fallback behind the same plan the SIMD kernels run (selected
 * at the scalar ISA level, e.g. TESSERA_REF=1). Shapes: attn_internal.h (ts__attn_kern). */
#include <math.h>
#include <string.h>

#include "attn/attn_internal.h"

static inline int allowed(const uint16_t *mask, int64_t nv, int64_t j, int64_t r) {
  return !mask || ((mask[j * nv + r / 16] >> (r % 16)) & 1);
}

/* Row of key j: j itself (runs NULL: contiguous keys) or the j%rl-th key of run j/rl. */
static inline int64_t key_row(const int32_t *runs, int rl, int64_t j) {
  return runs ? (int64_t)runs[j / rl] + j % rl : j;
}

static void qk_keys(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, const int32_t *runs, int rl,
                    int bc, int br, float *st, int64_t lds) {
  for (int64_t j = 0; j < bc; j++) {
    float *s = st + j * lds;
    const float *kj = k + key_row(runs, rl, j) * ldk;
    for (int64_t i = 0; i < br; i++) s[i] = 0.0f;
    for (int64_t x = 0; x < d; x++) {
      float kv = kj[x];
      const float *q = qt + x * ldq;
      for (int64_t i = 0; i < br; i++) s[i] += kv * q[i];
    }
  }
}

static void qk_ref(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br, float *st,
                   int64_t lds) {
  qk_keys(qt, ldq, k, ldk, d, NULL, 1, bc, br, st, lds);
}

static void qk_runs_ref(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, const int32_t *runs, int nq,
                        int rl, int br, float *st, int64_t lds) {
  qk_keys(qt, ldq, k, ldk, d, runs, rl, nq * rl, br, st, lds);
}

static void softmax_ref(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m, float *l,
                        float *alpha) {
  int64_t nv = (br + 15) / 16;
  for (int64_t r = 0; r < br; r++) {
    float mt = -INFINITY;
    for (int64_t j = 0; j < bc; j++)
      if (allowed(mask, nv, j, r)) mt = fmaxf(mt, st[j * lds + r]);
    float mo = m[r], mn = fmaxf(mo, mt * c), sum = 0.0f;
    for (int64_t j = 0; j < bc; j++) {
      float *s = &st[j * lds + r];
      float p = allowed(mask, nv, j, r) ? exp2f(*s * c - mn) : 0.0f;
      *s = p;
      sum += p;
    }
    alpha[r] = exp2f(mo - mn);
    l[r] = l[r] * alpha[r] + sum;
    m[r] = mn;
  }
}

static void pv_keys(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *runs, int rl,
                    int bc, int br, float *o, int64_t ldo, const float *alpha) {
  for (int64_t r = 0; r < br; r++) {
    float *orow = o + r * ldo;
    for (int64_t e = 0; e < d; e++) orow[e] *= alpha[r];
    for (int64_t j = 0; j < bc; j++) {
      float p = pt[j * lds + r];
      const float *vr = v + key_row(runs, rl, j) * ldv;
      for (int64_t e = 0; e < d; e++) orow[e] += p * vr[e];
    }
  }
}

static void pv_ref(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, int bc, int br, float *o,
                   int64_t ldo, const float *alpha) {
  pv_keys(pt, lds, v, ldv, d, NULL, 1, bc, br, o, ldo, alpha);
}

/* skip is ignored: the keys it leaves out have P = 0 in the rows that skip them */
static void pv_runs_ref(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *runs, int nq,
                        int rl, int br, float *o, int64_t ldo, const float *alpha, const uint64_t *skip) {
  (void)skip;
  pv_keys(pt, lds, v, ldv, d, runs, rl, nq * rl, br, o, ldo, alpha);
}

/* Element x of row r of a [.][d] array in fp32 (a32) or bf16 (a16). */
static inline float elem(const float *a32, const uint16_t *a16, int64_t d, int64_t r, int64_t x) {
  if (a32) return a32[r * d + x];
  uint32_t u = (uint32_t)a16[r * d + x] << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void ts__attn_qk_diag_ref(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                          int64_t n, int64_t row0, const int32_t *offs, int nd, int br,
                          const uint16_t *mask, float *st, int64_t lds) {
  (void)mask; /* every cell computed */
  for (int t = 0; t < nd; t++)
    for (int i = 0; i < br; i++) {
      const int64_t key = ts__attn_clamp_row(row0 + i + offs[t], n);
      float s = 0.0f;
      for (int64_t x = 0; x < d; x++) s += elem(q32, q16, d, row0 + i, x) * elem(k32, k16, d, key, x);
      st[(int64_t)t * lds + i] = s;
    }
}

void ts__attn_pv_diag_ref(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n,
                          int64_t row0, const int32_t *offs, int nd, int br,
                          const uint16_t *mask, float *o, int64_t ldo, const float *alpha) {
  (void)mask; /* P = 0 where masked */
  for (int i = 0; i < br; i++) {
    float *orow = o + (int64_t)i * ldo;
    for (int64_t e = 0; e < d; e++) orow[e] = alpha ? orow[e] * alpha[i] : 0.0f; /* NULL: a fresh item */
    for (int t = 0; t < nd; t++) {
      const float p = pt[(int64_t)t * lds + i];
      const int64_t key = ts__attn_clamp_row(row0 + i + offs[t], n);
      for (int64_t e = 0; e < d; e++) orow[e] += p * elem(v32, v16, d, key, e);
    }
  }
}

void ts__attn_pack_q_ref(const float *q, int64_t nr, int64_t d, int64_t ldq, float *qt) {
  for (int64_t i = 0; i < nr; i++)
    for (int64_t k = 0; k < d; k++) qt[k * ldq + i] = q[i * d + k];
}

static void finish_ref(const float *o, int64_t ldo, const float *l, int64_t nr, int64_t d, float *dst) {
  for (int64_t i = 0; i < nr; i++) {
    float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int64_t e = 0; e < d; e++) dst[i * d + e] = o[i * ldo + e] * inv;
  }
}

const ts__attn_kern ts__attn_kern_ref = {.qk_f32 = qk_ref, .qk_bf16 = NULL, .softmax = softmax_ref, .pv = pv_ref,
                                         .pack_q = ts__attn_pack_q_ref, .finish = finish_ref,
                                         .qk_runs = qk_runs_ref, .pv_runs = pv_runs_ref,
                                         .qk_diag = ts__attn_qk_diag_ref, .pv_diag = ts__attn_pv_diag_ref};
