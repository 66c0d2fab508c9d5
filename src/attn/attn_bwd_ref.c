/* Scalar backward micro-kernels (contracts: attn_internal.h, ts__attn_bwd_kern) and the atomic
 * float add the ATOMIC reduction uses at every level. */
#include <math.h>
#include <string.h>

#include "attn/attn_internal.h"

static inline bool allowed(const uint16_t *mask, int nw, int64_t j, int r) {
  return !mask || ((mask[j * nw + r / 16] >> (r % 16)) & 1);
}

static void pds_ref(const float *s, int64_t lds_s, float *pt, float *dpt, int64_t lds, int bc, int br, const uint16_t *mask,
                    float c, const float *lse2, const float *dr, float scale) {
  const int nw = (br + 15) / 16;
  for (int64_t j = 0; j < bc; j++)
    for (int r = 0; r < br; r++) {
      const bool on = allowed(mask, nw, j, r);
      const float p = on ? exp2f(fmaf(s[j * lds_s + r], c, -lse2[r])) : 0.0f;
      const float ds = on ? p * scale * (dpt[j * lds + r] - dr[r]) : 0.0f;
      pt[j * lds + r] = p;
      dpt[j * lds + r] = ds;
    }
}

/* dst[0..d) += sum_i pt[i] rows[i][0..d) (pt: one key's column of the item, br rows); fresh: dst
 * starts from zero (stale values). */
static void key_acc(const float *pt, const float *rows, int64_t ldr, int64_t d, int br, float *dst, bool atomic, bool fresh,
                    float *tmp) {
  float *acc = atomic ? tmp : dst;
  if (atomic || fresh) memset(acc, 0, (size_t)d * sizeof(float));
  for (int i = 0; i < br; i++) {
    const float p = pt[i];
    for (int64_t e = 0; e < d; e++) acc[e] += p * rows[i * ldr + e];
  }
  if (atomic) ts__attn_atomic_add(dst, tmp, d);
}

/* For the atomic case: one key's sums built in a stack row first (d <= 4096, the plan's limit). */
static void kv_ref(const float *pt, int64_t lds, const float *rows, int64_t d, int bc, int br, float *dst, int64_t key0,
                   const int32_t *runs, int rl, bool atomic, uint8_t *seen) {
  float tmp[4096];
  for (int j = 0; j < bc; j++) {
    const int64_t key = runs ? (int64_t)runs[j / rl] + j % rl : key0 + j;
    const bool fresh = seen && !seen[key];
    if (seen) seen[key] = 1;
    key_acc(pt + (int64_t)j * lds, rows, d, d, br, dst + key * d, atomic, fresh, tmp);
  }
}

static void kv_diag_ref(const float *pt, int64_t lds, const float *rows, int64_t d, int64_t n, int64_t row0,
                        const int32_t *offs, int nd, int br, float *dst, bool atomic, uint8_t *seen) {
  float tmp[4096];
  for (int t = 0; t < nd; t++)
    for (int i = 0; i < br; i++) {
      const int64_t key = row0 + i + offs[t];
      if (key < 0 || key >= n) continue;
      const bool fresh = seen && !seen[key];
      if (seen) seen[key] = 1;
      key_acc(&pt[(int64_t)t * lds + i], rows + (row0 + i) * d, d, d, 1, dst + key * d, atomic, fresh, tmp);
    }
}

/* Floats viewed as integers for compare-and-swap (may_alias: the same memory is read as float). */
typedef uint32_t __attribute__((may_alias)) u32a;
typedef uint64_t __attribute__((may_alias)) u64a;

static void add1(float *dst, float v) {
  u32a *p = (u32a *)dst;
  uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
  do {
    float f;
    memcpy(&f, &old, sizeof f);
    f += v;
    memcpy(&nw, &f, sizeof nw);
  } while (!__atomic_compare_exchange_n(p, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static void add2(float *dst, float a, float b) {
  u64a *p = (u64a *)dst;
  uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
  do {
    float f[2];
    memcpy(f, &old, sizeof f);
    f[0] += a, f[1] += b;
    memcpy(&nw, f, sizeof nw);
  } while (!__atomic_compare_exchange_n(p, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

void ts__attn_atomic_add(float *dst, const float *src, int64_t cnt) {
  int64_t x = 0;
  if (cnt > 0 && ((uintptr_t)dst & 7)) {
    if (src[0] != 0.0f) add1(dst, src[0]);
    x = 1;
  }
  for (; x + 2 <= cnt; x += 2)
    if (src[x] != 0.0f || src[x + 1] != 0.0f) add2(dst + x, src[x], src[x + 1]);
  if (x < cnt && src[x] != 0.0f) add1(dst + x, src[x]);
}

const ts__attn_bwd_kern ts__attn_bwd_kern_ref = {.pds = pds_ref, .kv = kv_ref, .kv_diag = kv_diag_ref};
