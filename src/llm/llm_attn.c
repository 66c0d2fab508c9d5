/* Causal grouped-query attention over the fp16 KV cache, one thread's share of the work, in
 * llama.cpp's CPU order (cpu_order.h) so that scores, probabilities and outputs equal its values bit
 * for bit.
 *
 * Cache (llm_internal.h): K^T [hd][n_ctx] and V [n_ctx][hd] per layer and KV head, fp16. A work
 * item is one query head and up to TS__ATT_ROWS consecutive tokens (rows r at positions p0 + r);
 * row r sees keys j < valid = p0 + r + 1:
 *   s[j]  = dot(fp16(q[r]), K[j]) * scale           dot_f16_one (single-token batch) / _many
 *   e[j]  = vexpf(s[j] - max s), summed per 16 keys (sum16) into a double, keys from 0
 *   P[j]  = fp16(e[j] * fp32(1 / sum))
 *   o[i]  = dot over keys of P[j] V[j][i]            dot_f16_one / _many again
 * (llama.cpp scores a zero-padded key range of a multiple of 256: the masked keys' P = 0 terms
 * leave every sum unchanged, so they are left out here.) Items run largest first (the last chunk
 * sees the most keys), item i on thread i % nrun. Decode (T = 1) is one item per query head. The
 * AVX-512 item (llm_attn_avx512.c) equals this reference bit for bit (tests/test_llm.c). */
#include <math.h>
#include <string.h>

#include "llm/cpu_order.h"
#include "llm/llm_internal.h"

static inline float r16(float v) { return ts_f16_to_f32(ts_f32_to_f16(v)); }

/* dot_f16_one of cpu_order.h over elements 0..n-1 of x[i] y[i] (get(i) gives x[i] y's factor) */
static float dot_one(int n, const float *x, const float *y) {
  float acc[4][16] = {{0}};
  const int np = n & ~63;
  for (int i = 0; i < np; i += 64)
    for (int j = 0; j < 4; j++)
      for (int l = 0; l < 16; l++) acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
  float a[16];
  for (int l = 0; l < 16; l++) a[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double s = ts__sum16(a);
  for (int i = np; i < n; i++) s += (double)(x[i] * y[i]);
  return (float)s;
}

/* dot_f16_many (n % 16 == 0; otherwise llama.cpp takes dot_f16_one) */
static float dot_many(int n, const float *x, const float *y) {
  if (n % 16) return dot_one(n, x, y);
  float acc[16] = {0};
  for (int i = 0; i < n; i += 16)
    for (int l = 0; l < 16; l++) acc[l] = fmaf(x[i + l], y[i + l], acc[l]);
  return ts__sum16(acc);
}

/* Row probabilities in place: s[0..valid) scores -> fp16-rounded P, llama.cpp's softmax. */
static void softmax_row(float *s, int valid) {
  float mx = -INFINITY;
  for (int j = 0; j < valid; j++) mx = s[j] > mx ? s[j] : mx;
  double sum = 0;
  for (int c = 0; c < valid; c += 16) {
    float e[16];
    for (int l = 0; l < 16; l++) e[l] = c + l < valid ? ts__vexpf(s[c + l] - mx) : 0.0f;
    for (int l = 0; l < 16 && c + l < valid; l++) s[c + l] = e[l];
    sum += (double)ts__sum16(e);
  }
  const float inv = (float)(1.0 / sum);
  for (int j = 0; j < valid; j++) s[j] = r16(s[j] * inv);
}

void ts__att_item_ref(int m, int hd, int p0, float scale, int one, const float *q, int64_t ldq, const uint16_t *KT,
                      int64_t ldk, const uint16_t *V, float *S, float *out, int64_t ldo) {
  float qr[1024], col[1024]; /* hd <= 1024 (llm_model.c checks key_length) */
  float *vcol = S + ((p0 + m + 63) & ~63);  /* keys' values of one dimension, zero-padded */
  for (int r = 0; r < m; r++) {
    const int valid = p0 + r + 1, nk = (valid + 63) & ~63;
    for (int i = 0; i < hd; i++) qr[i] = r16(q[(size_t)r * (size_t)ldq + (size_t)i]);
    for (int j = 0; j < valid; j++) {
      for (int i = 0; i < hd; i++) col[i] = ts_f16_to_f32(KT[(size_t)i * (size_t)ldk + (size_t)j]);
      S[j] = (one ? dot_one(hd, qr, col) : dot_many(hd, qr, col)) * scale;
    }
    softmax_row(S, valid);
    for (int j = valid; j < nk; j++) S[j] = 0.0f;
    for (int i = 0; i < hd; i++) {
      for (int j = 0; j < nk; j++) vcol[j] = j < valid ? ts_f16_to_f32(V[(size_t)j * (size_t)hd + (size_t)i]) : 0.0f;
      /* the keys dot runs over the zero-padded range: P = 0 terms change nothing */
      out[(size_t)r * (size_t)ldo + (size_t)i] = one ? dot_one(nk, S, vcol) : dot_many((valid + 15) & ~15, S, vcol);
    }
  }
}

void ts__llm_attention(ts_llm_state *s, int l, int T, int pos, int tid) {
  const ts_llm_config *c = &s->m->cfg;
  const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, G = nh / nkv;
  const int64_t ldo = (int64_t)nh * hd;
  const int nchunks = (T + TS__ATT_ROWS - 1) / TS__ATT_ROWS;
  const float scale = 1.0f / sqrtf((float)hd);
  float *S = s->scores + (size_t)tid * (size_t)s->scores_ld;
  int item = 0;
  for (int ch = nchunks - 1; ch >= 0; ch--) {
    const int t0 = ch * TS__ATT_ROWS, m = T - t0 < TS__ATT_ROWS ? T - t0 : TS__ATT_ROWS;
    for (int h = 0; h < nh; h++, item++) {
      if (item % s->nrun != tid) continue;
      const int kh = h / G;
      const size_t base = ((size_t)l * (size_t)nkv + (size_t)kh) * (size_t)hd * (size_t)s->n_ctx;
      s->ops->att(m, hd, pos + t0, scale, T == 1, s->qkv + (size_t)t0 * (size_t)s->ldq + (size_t)h * (size_t)hd, s->ldq,
                  s->kc + base, s->n_ctx, s->vc + base, S, s->att + (size_t)t0 * (size_t)ldo + (size_t)h * (size_t)hd, ldo);
    }
  }
}
