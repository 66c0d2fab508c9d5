/* Scalar micro-kernels: the portable fallback behind the same plan the SIMD kernels run (selected
 * at the scalar ISA level, e.g. TESSERA_REF=1). Shapes: attn_internal.h (ts__attn_kern). */
#include <math.h>

#include "attn/attn_internal.h"

static inline int allowed(const uint16_t *mask, int64_t nv, int64_t j, int64_t r) {
  return !mask || ((mask[j * nv + r / 16] >> (r % 16)) & 1);
}

static void qk_ref(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br, float *st,
                   int64_t lds) {
  for (int64_t j = 0; j < bc; j++) {
    float *s = st + j * lds;
    for (int64_t i = 0; i < br; i++) s[i] = 0.0f;
    for (int64_t x = 0; x < d; x++) {
      float kv = k[j * ldk + x];
      const float *q = qt + x * ldq;
      for (int64_t i = 0; i < br; i++) s[i] += kv * q[i];
    }
  }
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

static void pv_ref(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, int bc, int br, float *o,
                   int64_t ldo, const float *alpha) {
  for (int64_t r = 0; r < br; r++) {
    float *orow = o + r * ldo;
    for (int64_t e = 0; e < d; e++) orow[e] *= alpha[r];
    for (int64_t j = 0; j < bc; j++) {
      float p = pt[j * lds + r];
      const float *vr = v + j * ldv;
      for (int64_t e = 0; e < d; e++) orow[e] += p * vr[e];
    }
  }
}

const ts__attn_kern ts__attn_kern_ref = {.qk_f32 = qk_ref, .qk_bf16 = NULL, .softmax = softmax_ref, .pv = pv_ref};
