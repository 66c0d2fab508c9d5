/* Causal grouped-query attention over the fp16 KV cache, one thread's share of the work.
 *
 * Cache (llm_internal.h): K^T [hd][n_ctx] and V [n_ctx][hd] per layer and KV head, fp16. A work
 * item is one query head and up to TS__ATT_ROWS consecutive tokens (rows r at positions p0 + r):
 *   S[r][j] = scale * q16[r] . K[j]        j < nk = p0 + m (keys up to the item's last row)
 *   P[r][.] = fp16(softmax(S[r][0..p0+r]))  (zero past the row's own position)
 *   O[r]    = sum_j P[r][j] V[j]
 * q16 and P are rounded to fp16, as llama.cpp's CPU path rounds them for its fp16 products. Items
 * run largest first (the last chunk sees the most keys), item i on thread i % nrun. Decode (T = 1)
 * is one item per query head. The AVX-512 item kernel (llm_attn_avx512.c) and this scalar
 * reference compute the same values up to fp32 summation order (tests/test_llm.c). */
#include <math.h>
#include <string.h>

#include "llm/llm_internal.h"

static inline float r16(float v) { return ts_f16_to_f32(ts_f32_to_f16(v)); }

void ts__att_item_ref(int m, int hd, int p0, float scale, const float *q, int64_t ldq, const uint16_t *KT,
                      int64_t ldk, const uint16_t *V, float *S, float *out, int64_t ldo) {
  const int nk = p0 + m;
  for (int r = 0; r < m; r++) {
    float *s = S + (size_t)r * (size_t)ldk;
    const int valid = p0 + r + 1;
    double mx = -INFINITY;
    for (int j = 0; j < valid; j++) {
      double acc = 0;
      for (int i = 0; i < hd; i++) acc += (double)r16(q[(size_t)r * (size_t)ldq + (size_t)i]) * ts_f16_to_f32(KT[(size_t)i * (size_t)ldk + (size_t)j]);
      s[j] = (float)acc * scale;
      mx = s[j] > mx ? s[j] : mx;
    }
    double z = 0;
    for (int j = 0; j < valid; j++) z += exp((double)s[j] - mx);
    for (int j = 0; j < nk; j++) s[j] = j < valid ? r16((float)(exp((double)s[j] - mx) / z)) : 0.0f;
    for (int i = 0; i < hd; i++) {
      double acc = 0;
      for (int j = 0; j < valid; j++) acc += (double)s[j] * ts_f16_to_f32(V[(size_t)j * (size_t)hd + (size_t)i]);
      out[(size_t)r * (size_t)ldo + (size_t)i] = (float)acc;
    }
  }
}

ts__att_fn ts__att_kernel(void) {
  return ts__quant()->isa >= TS_ISA_AVX512 ? ts__att_item_avx512 : ts__att_item_ref;
}

void ts__llm_attention(ts_llm_state *s, int l, int T, int pos, int tid) {
  const ts_llm_config *c = &s->m->cfg;
  const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, G = nh / nkv;
  const int64_t ldo = (int64_t)nh * hd;
  const int nchunks = (T + TS__ATT_ROWS - 1) / TS__ATT_ROWS;
  const float scale = 1.0f / sqrtf((float)hd);
  float *S = s->scores + (size_t)tid * TS__ATT_ROWS * (size_t)s->n_ctx;
  int item = 0;
  for (int ch = nchunks - 1; ch >= 0; ch--) {
    const int t0 = ch * TS__ATT_ROWS, m = T - t0 < TS__ATT_ROWS ? T - t0 : TS__ATT_ROWS;
    for (int h = 0; h < nh; h++, item++) {
      if (item % s->nrun != tid) continue;
      const int kh = h / G;
      const size_t base = ((size_t)l * (size_t)nkv + (size_t)kh) * (size_t)hd * (size_t)s->n_ctx;
      s->att_fn(m, hd, pos + t0, scale, s->qkv + (size_t)t0 * (size_t)s->ldq + (size_t)h * (size_t)hd, s->ldq,
                s->kc + base, s->n_ctx, s->vc + base, S, s->att + (size_t)t0 * (size_t)ldo + (size_t)h * (size_t)hd, ldo);
    }
  }
}
