/* Causal grouped-query attention over the fp16 KV cache, one thread's share of the work, in
 * llama.cpp's CPU orders (cpu_order.h: its AVX-512 build's, ts__att_item_ref, and its AVX2 build's,
 * ts__att_item_ref8, which differ in vector width, exp and the sums' trees) so that scores,
 * probabilities and outputs equal its values bit for bit.
 *
 * Cache (llm_internal.h): K in blocks of 16 keys ([hd][16] each) and V [n_ctx][hd] per layer and KV
 * head, fp16. A work
 * item is rows of one KV head: up to TS__ATT_ROWS consecutive tokens of one query head (rows r at
 * positions p0 + r), or in decode the query heads sharing the KV head (all at p0); a row at
 * position p sees keys j < valid = p + 1:
 *   s[j]  = dot(fp16(q[r]), K[j]) * scale           dot_f16_one (single-token batch) / _many
 *   e[j]  = vexpf(s[j] - max s), summed per 16 keys (sum16) into a double, keys from 0
 *           (AVX2 order: vexpf8, per 8 keys, hsum8)
 *   P[j]  = fp16(e[j] * fp32(1 / sum))
 *   o[i]  = dot over keys of P[j] V[j][i]            dot_f16_one / _many again
 * (llama.cpp scores a zero-padded key range of a multiple of 256: the masked keys' P = 0 terms
 * leave every sum unchanged, so they are left out here.) Items run largest first (the last chunk
 * sees the most keys), item i on thread i % nrun. Decode gives each thread a contiguous range of
 * query heads, and an item is those of them that share a KV head (GQA), so each K and V line is
 * read from memory once per thread. The
 * AVX-512 item (llm_attn_avx512.c) equals ts__att_item_ref, the AVX2 item (llm_attn_avx2.c)
 * ts__att_item_ref8, bit for bit (tests/test_llm.c). */
#include <math.h>
#include <string.h>

#include "llm/cpu_order.h"
#include "llm/llm_internal.h"

static inline float r16(float v) { return ts_f16_to_f32(ts_f32_to_f16(v)); }

/* The orders of llama.cpp's build with W-lane vectors (cpu_order.h; W 16: AVX-512, 8: AVX2). */
static float vreduce(int W, const float *v) { return W == 16 ? ts__sum16(v) : ts__hsum8(v); }
static float vexp(int W, float x) { return W == 16 ? ts__vexpf(x) : ts__vexpf8(x); }

/* dot_f16_one (W 16) / dot_f16_one8 (W 8) of x[i] y[i], i < n */
static float dot_one(int W, int n, const float *x, const float *y) {
  float acc[4][16] = {{0}};
  const int np = n - n % (4 * W);
  for (int i = 0; i < np; i += 4 * W)
    for (int j = 0; j < 4; j++)
      for (int l = 0; l < W; l++) acc[j][l] = fmaf(x[i + W * j + l], y[i + W * j + l], acc[j][l]);
  float a[16];
  for (int l = 0; l < W; l++) a[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double s = W == 16 ? ts__sum16(a) : ts__hadd8(a);
  for (int i = np; i < n; i++) s += (double)(x[i] * y[i]);
  return (float)s;
}

/* dot_f16_many / _many8 (n % W == 0; otherwise llama.cpp takes dot_f16_one) */
static float dot_many(int W, int n, const float *x, const float *y) {
  if (n % W) return dot_one(W, n, x, y);
  float acc[16] = {0};
  for (int i = 0; i < n; i += W)
    for (int l = 0; l < W; l++) acc[l] = fmaf(x[i + l], y[i + l], acc[l]);
  return vreduce(W, acc);
}

/* Row probabilities in place: s[kb..valid) scores -> fp16-rounded P, llama.cpp's softmax; the keys
 * [kb, lo) before the row's window get P = 0 (exp of llama.cpp's -inf mask), the sums' groups of W
 * keys counted from key 0 (kb a multiple of 64). */
static void softmax_row(int W, float *s, int kb, int lo, int valid) {
  float mx = -INFINITY;
  for (int j = lo; j < valid; j++) mx = s[j] > mx ? s[j] : mx;
  double sum = 0;
  for (int c = kb; c < valid; c += W) {
    float e[16];
    for (int l = 0; l < W; l++) e[l] = c + l >= lo && c + l < valid ? vexp(W, s[c + l] - mx) : 0.0f;
    for (int l = 0; l < W && c + l < valid; l++) s[c + l] = e[l];
    sum += (double)vreduce(W, e);
  }
  const float inv = (float)(1.0 / sum);
  for (int j = kb; j < valid; j++) s[j] = r16(s[j] * inv);
}

static void att_item_ref(const ts__att_item *it, int W) {
  const int hd = it->hd;
  float qr[1024], col[1024], vcol[1024]; /* hd <= 1024 (llm_model.c checks key_length) */
  for (int r = 0; r < it->m; r++) {
    const int valid = it->p0 + r * it->dp + 1, nk = (valid + 63) & ~63;
    /* the row's window [lo, valid), scored from the 64-key boundary kb below it (llm_internal.h) */
    const int lo = it->win > 0 && valid > it->win ? valid - it->win : 0, kb = lo & ~63;
    float *S = it->S + (size_t)r * (size_t)it->lds;
    for (int i = 0; i < hd; i++) qr[i] = r16(it->q[(size_t)r * (size_t)it->ldq + (size_t)i]);
    for (int j = lo; j < valid; j++) {
      for (int i = 0; i < hd; i++) col[i] = ts_f16_to_f32(it->KT[ts__kidx(hd, i, j)]);
      S[j] = (it->one ? dot_one(W, hd, qr, col) : dot_many(W, hd, qr, col)) * it->scale;
    }
    softmax_row(W, S, kb, lo, valid);
    for (int j = valid; j < nk; j++) S[j] = 0.0f;
    for (int i = 0; i < hd; i++) {
      /* o_i = the keys dot of P and dimension i of V, over the zero-padded key range (P = 0 terms
       * change nothing), in both orders' accumulators; V's column gathered 1024 keys at a time */
      float acc_one[4][16] = {{0}}, acc_many[16] = {0};
      for (int c0 = kb; c0 < nk; c0 += 1024) {
        const int n = nk - c0 < 1024 ? nk - c0 : 1024;
        for (int j = 0; j < n; j++)
          vcol[j] = c0 + j < valid ? ts_f16_to_f32(it->V[(size_t)(c0 + j) * (size_t)hd + (size_t)i]) : 0.0f;
        for (int j = 0; j < n; j++) { /* the two orders' accumulators, key c0 + j */
          const int k = c0 + j, c = (k / W) & 3, l = k % W;
          acc_one[c][l] = fmaf(S[k], vcol[j], acc_one[c][l]);
          if (k < (valid + W - 1) / W * W) acc_many[l] = fmaf(S[k], vcol[j], acc_many[l]);
        }
      }
      float o;
      if (it->one) {
        float a[16];
        for (int l = 0; l < W; l++) a[l] = (acc_one[0][l] + acc_one[2][l]) + (acc_one[1][l] + acc_one[3][l]);
        o = W == 16 ? ts__sum16(a) : ts__hadd8(a);
      } else {
        o = vreduce(W, acc_many);
      }
      it->out[(size_t)r * (size_t)it->ldo + (size_t)i] = o;
    }
  }
}

void ts__att_item_ref(const ts__att_item *it) { att_item_ref(it, 16); }
void ts__att_item_ref8(const ts__att_item *it) { att_item_ref(it, 8); }

/* The scores' scale: 1/sqrt(head_dim), or 1 where q was scaled already (gemma3: llama.cpp's
 * kq_scale 1 after q times f_attention_scale) */
static float att_scale(const ts_llm_state *s) { return s->m->q_scale != 0 ? 1.0f : 1.0f / sqrtf((float)s->m->cfg.head_dim); }

void ts__att_heads(const ts_llm_state *s, int tid, int *h0, int *h1) {
  const ts__qkv_part p = ts__qkv_part_of(&s->m->cfg, tid, s->nrun);
  *h0 = p.h0;
  *h1 = p.h1;
}

void ts__kv_store(ts_llm_state *s, int l, int kh, int pos, const float *k, const float *v, int i0, int i1) {
  const int hd = s->m->cfg.head_dim, nkv = s->m->cfg.n_head_kv;
  if (k) { /* K: dim i of position p in p's block of 16 keys */
    uint16_t h[1024]; /* hd <= 1024 (llm_model.c checks key_length) */
    s->ops->f16(i1 - i0, k + i0, h);
    uint16_t *kb = s->kc + ts__kbase(s, l, kh, nkv, hd);
    for (int i = i0; i < i1; i++) kb[ts__kidx(hd, i, pos)] = h[i - i0];
  }
  if (v) /* V: position p's values contiguous */
    s->ops->f16(i1 - i0, v + i0, s->vc + ts__vbase(s, l, kh, nkv, hd) + (size_t)pos * (size_t)hd + (size_t)i0);
}

void ts__att_queue_kv(ts_llm_state *s, int tid, int l, int pos) {
  const ts_llm_config *c = &s->m->cfg;
  const int hd = c->head_dim, nkv = c->n_head_kv, G = c->n_head / nkv;
  int h0, h1;
  ts__att_heads(s, tid, &h0, &h1);
  ts__pfq *q = &s->tb[tid].pf;
  for (int kh = h0 / G; h1 > h0 && kh <= (h1 - 1) / G; kh++) {
    /* K: the blocks of keys 0..pos; V: pos + 1 rows of hd values */
    ts__pfq_add(q, s->kc + ts__kbase(s, l, kh, nkv, hd), (int64_t)(pos / 16 + 1) * hd * 32, 0, 1, 0);
    ts__pfq_add(q, s->vc + ts__vbase(s, l, kh, nkv, hd), (int64_t)(pos + 1) * hd * 2, 0, 1, 0);
  }
}

void ts__att_decode(ts_llm_state *s, int l, int pos, int tid) {
  const ts_llm_config *c = &s->m->cfg;
  const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, G = nh / nkv;
  /* the thread's contiguous heads, grouped by KV head (rows = query heads sharing it, so its K and
   * V lines are read once from memory for all of them) */
  ts__att_item it = {.hd = hd, .one = 1, .scale = att_scale(s), .lds = s->scores_ld,
                     .S = s->scores + (size_t)tid * TS__ATT_ROWS * (size_t)s->scores_ld, .p0 = pos, .dp = 0, .ldq = hd,
                     .ldo = hd, .win = s->m->layers[l].swa ? c->n_swa : 0};
  int h0, h1;
  ts__att_heads(s, tid, &h0, &h1);
  for (int h = h0; h < h1;) {
    const int kh = h / G, he = (kh + 1) * G < h1 ? (kh + 1) * G : h1;
    it.m = he - h;
    it.q = s->qkv + (size_t)h * (size_t)hd;
    it.KT = s->kc + ts__kbase(s, l, kh, nkv, hd);
    it.V = s->vc + ts__vbase(s, l, kh, nkv, hd);
    it.out = s->att + (size_t)h * (size_t)hd;
    s->ops->att(&it);
    ts__pfq_pump(&s->tb[tid].pf, 32); /* what is queued (the next layer's KV, where queued) meanwhile */
    h = he;
  }
}

void ts__llm_attention(ts_llm_state *s, int l, int T, int pos, int tid) {
  const ts_llm_config *c = &s->m->cfg;
  const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, G = nh / nkv;
  const int64_t ldo = (int64_t)nh * hd;
  const int nchunks = (T + TS__ATT_ROWS - 1) / TS__ATT_ROWS;
  ts__att_item it = {.hd = hd, .one = T == 1, .scale = att_scale(s), .lds = s->scores_ld,
                     .S = s->scores + (size_t)tid * TS__ATT_ROWS * (size_t)s->scores_ld,
                     .win = s->m->layers[l].swa ? c->n_swa : 0};
  /* batches: (chunk of TS__ATT_ROWS tokens, head) items round robin, largest chunks first */
  int item = 0;
  for (int ch = nchunks - 1; ch >= 0; ch--) {
    const int t0 = ch * TS__ATT_ROWS, m = T - t0 < TS__ATT_ROWS ? T - t0 : TS__ATT_ROWS;
    for (int h = 0; h < nh; h++, item++) {
      if (item % s->nrun != tid) continue;
      it.m = m;
      it.p0 = pos + t0;
      it.dp = 1;
      it.q = s->qkv + (size_t)t0 * (size_t)s->ldq + (size_t)h * (size_t)hd;
      it.ldq = s->ldq;
      it.KT = s->kc + ts__kbase(s, l, h / G, nkv, hd);
      it.V = s->vc + ts__vbase(s, l, h / G, nkv, hd);
      it.out = s->att + (size_t)t0 * (size_t)ldo + (size_t)h * (size_t)hd;
      it.ldo = ldo;
      s->ops->att(&it);
    }
  }
}
