/* A tiny LLaMA (or Gemma 3) GGUF written by our own writer for the LLM tests: random weights, a byte-level BPE
 * vocabulary (3 control tokens, the 256 byte tokens, a few merges) with the "smollm"
 * pre-tokenizer, and an independent double-precision reference forward pass over the dequantized
 * weights. Nothing here needs the real model. */
#ifndef TEST_LLM_TINY_H
#define TEST_LLM_TINY_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/quant_internal.h"
#include "llm/tok_internal.h"
#include "tessera/gguf.h"
#include "tessera/llm.h"
#include "tst.h"

typedef struct tiny_cfg {
  int n_layer, d, ff, n_head, n_kv, hd;
  float rope_base, eps;
  uint32_t wtype, etype; /* matrices, token embedding */
  bool tied;
  uint64_t seed;
  /* for the error tests: leave out a tensor / give one a wrong shape / another architecture */
  const char *skip_tensor, *bad_shape_tensor, *arch;
  /* gemma3 (arch "gemma3"): the sliding window of the local layers (layer l local when l is even:
   * attention.sliding_window_pattern 2) and their RoPE base */
  int swa;
  float rope_base_swa;
  /* the type of layer l's matrix `tensor` ("attn_q", .., "ffn_down"; NULL: wtype for all), for
   * models of mixed types as the K-quant files are */
  uint32_t (*wtype_of)(int l, const char *tensor, uint32_t wtype);
  /* llama with tessera.ffn_activation = "relu": h = relu(gate) up */
  bool relu;
} tiny_cfg;

static inline tiny_cfg tiny_default(uint32_t wtype) {
  return (tiny_cfg){2, 64, 96, 4, 2, 16, 10000.0f, 1e-5f, wtype, wtype == TS_QT_F32 ? TS_QT_F32 : TS_QT_Q8_0, true, 11,
                    NULL, NULL, "llama", 0, 0, NULL, false};
}

/* A tiny gemma3: 3 heads of 32 on a 64-wide stream (heads need not make d_model), one KV head,
 * layer 0 local with a window of 7 positions and its own RoPE base, layer 1 global. */
static inline tiny_cfg tiny_gemma(uint32_t wtype) {
  tiny_cfg c = tiny_default(wtype);
  c.arch = "gemma3";
  c.n_head = 3, c.n_kv = 1, c.hd = 32;
  c.swa = 7;
  c.rope_base_swa = 100.0f;
  return c;
}

static inline bool tiny_is_gemma(const tiny_cfg *c) { return !strcmp(c->arch, "gemma3"); }

/* Merges as "left right"; every part and result is in the vocabulary. */
static const char *const kTinyMerges[] = {
    "\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 a", "e r", "o n", "\xC4\xA0 s", "r e", "a t", "e n",
    "\xC4\xA0 w", "o r", "\xC4\xA0w or", "l d", "\xC4\xA0wor ld", "l l", "H e", "He ll", "Hell o", "' s",
};
#define TINY_NMERGES (int)(sizeof kTinyMerges / sizeof kTinyMerges[0])
#define TINY_NSPECIAL 3

/* The vocabulary: <|endoftext|>, <|im_start|>, <|im_end|> (control), 256 byte-level tokens in byte
 * order, then each merge's result. Returns the token count; strs point into `pool`. */
static inline int tiny_vocab(char pool[][16], const char **strs, int32_t *types) {
  int n = 0;
  const char *sp[TINY_NSPECIAL] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < TINY_NSPECIAL; i++) snprintf(pool[n], 16, "%s", sp[i]), types[n++] = 3;
  for (int b = 0; b < 256; b++) {
    int k = ts_utf8_put(ts__byte_to_cp((uint8_t)b), pool[n]);
    pool[n][k] = 0;
    types[n++] = 1;
  }
  for (int i = 0; i < TINY_NMERGES; i++) {
    const char *m = kTinyMerges[i], *s = strchr(m + 1, ' ');
    snprintf(pool[n], 16, "%.*s%s", (int)(s - m), m, s + 1);
    types[n++] = 1;
  }
  for (int i = 0; i < n; i++) strs[i] = pool[i];
  return n;
}

static inline void tiny_add_tokenizer(ts_gguf_writer *w) {
  static char pool[512][16];
  static const char *strs[512];
  static int32_t types[512];
  int n = tiny_vocab(pool, strs, types);
  CHECK_OK(ts_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", 4));
  CHECK_OK(ts_gguf_writer_add_str(w, "tokenizer.ggml.pre", "smollm", 6));
  CHECK_OK(ts_gguf_writer_add_str_arr(w, "tokenizer.ggml.tokens", strs, NULL, (uint64_t)n));
  CHECK_OK(ts_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", TS_GGUF_I32, types, (uint64_t)n));
  CHECK_OK(ts_gguf_writer_add_str_arr(w, "tokenizer.ggml.merges", kTinyMerges, NULL, TINY_NMERGES));
  uint32_t bos = 1, eos = 2;
  CHECK_OK(ts_gguf_writer_add(w, "tokenizer.ggml.bos_token_id", TS_GGUF_U32, &bos));
  CHECK_OK(ts_gguf_writer_add(w, "tokenizer.ggml.eos_token_id", TS_GGUF_U32, &eos));
  uint8_t no = 0;
  CHECK_OK(ts_gguf_writer_add(w, "tokenizer.ggml.add_bos_token", TS_GGUF_BOOL, &no));
}

static inline int tiny_n_vocab(void) { return TINY_NSPECIAL + 256 + TINY_NMERGES; }

static inline void tiny_tensor(ts_gguf_writer *w, const tiny_cfg *c, ts_rng *r, const char *name, uint32_t type,
                               int64_t cols, int64_t rows, float scale, float offset) {
  if (c->skip_tensor && !strcmp(name, c->skip_tensor)) return;
  size_t n = (size_t)(cols * rows);
  float *x = malloc(n * sizeof *x);
  size_t rb;
  ts_qtype_row_bytes(type, cols, &rb);
  void *q = malloc(rb * (size_t)rows);
  for (size_t i = 0; i < n; i++) x[i] = offset + scale * ts_rng_normal(r);
  for (int64_t i = 0; i < rows; i++) ts_quant_quantize_row(type, x + i * cols, (uint8_t *)q + (size_t)i * rb, cols);
  int64_t ne[2] = {cols, rows};
  if (c->bad_shape_tensor && !strcmp(name, c->bad_shape_tensor)) ne[1] = rows > 1 ? rows - 1 : 1;
  CHECK_OK(ts_gguf_writer_add_tensor(w, name, type, rows > 1 ? 2 : 1, ne, q));
  free(x);
  free(q);
}

/* Writes the model to path (temp + rename by the writer). */
static inline void tiny_write(const tiny_cfg *c, const char *path);

/* The model of c written to the test's temporary file `file` and loaded (NULL, and a failed
 * check, when it does not load). */
static inline ts_llm_model *tiny_load(const tiny_cfg *c, const char *file) {
  char path[2048];
  tst_tmp_path(path, sizeof path, file);
  tiny_write(c, path);
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  return m;
}

static inline void tiny_write(const tiny_cfg *c, const char *path) {
  ts_gguf_writer *w;
  CHECK_OK(ts_gguf_writer_create(&w, 0));
  char key[96];
  const char *a = c->arch;
  CHECK_OK(ts_gguf_writer_add_str(w, "general.architecture", a, strlen(a)));
  CHECK_OK(ts_gguf_writer_add_str(w, "general.name", "tiny", 4));
  if (c->relu) CHECK_OK(ts_gguf_writer_add_str(w, "tessera.ffn_activation", "relu", 4));
  uint32_t v;
#define U32(k, val)                             \
  do {                                          \
    snprintf(key, sizeof key, "%s." k, a);      \
    v = (uint32_t)(val);                        \
    CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_U32, &v)); \
  } while (0)
  U32("block_count", c->n_layer);
  U32("embedding_length", c->d);
  U32("feed_forward_length", c->ff);
  U32("attention.head_count", c->n_head);
  U32("attention.head_count_kv", c->n_kv);
  U32("context_length", 256);
  U32("rope.dimension_count", c->hd);
#undef U32
  snprintf(key, sizeof key, "%s.rope.freq_base", a);
  CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_F32, &c->rope_base));
  snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
  CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_F32, &c->eps));
  const bool gemma = tiny_is_gemma(c);
  if (gemma) {
    snprintf(key, sizeof key, "%s.attention.key_length", a);
    v = (uint32_t)c->hd;
    CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_U32, &v));
    snprintf(key, sizeof key, "%s.attention.value_length", a);
    CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_U32, &v));
    snprintf(key, sizeof key, "%s.attention.sliding_window", a);
    v = (uint32_t)c->swa;
    CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_U32, &v));
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
    v = 2;
    CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_U32, &v));
    snprintf(key, sizeof key, "%s.rope.freq_base_swa", a);
    CHECK_OK(ts_gguf_writer_add(w, key, TS_GGUF_F32, &c->rope_base_swa));
  }
  tiny_add_tokenizer(w);
  ts_rng r;
  ts_rng_seed(&r, c->seed);
  const int nv = tiny_n_vocab(), d = c->d, hd = c->hd;
  tiny_tensor(w, c, &r, "token_embd.weight", c->etype, d, nv, 0.5f, 0);
  if (!c->tied) tiny_tensor(w, c, &r, "output.weight", c->wtype, d, nv, 0.2f, 0);
  tiny_tensor(w, c, &r, "output_norm.weight", TS_QT_F32, d, 1, 0.1f, 1.0f);
  for (int l = 0; l < c->n_layer; l++) {
    char nm[64];
#define T(s, type, cols, rows, sc, off) (snprintf(nm, sizeof nm, "blk.%d." s, l), tiny_tensor(w, c, &r, nm, type, cols, rows, sc, off))
    T("attn_norm.weight", TS_QT_F32, d, 1, 0.1f, 1.0f);
    T("ffn_norm.weight", TS_QT_F32, d, 1, 0.1f, 1.0f);
#define WT(s) (c->wtype_of ? c->wtype_of(l, s, c->wtype) : c->wtype)
    T("attn_q.weight", WT("attn_q"), d, c->n_head * hd, 0.12f, 0); /* scores of order 1: a smooth softmax */
    T("attn_k.weight", WT("attn_k"), d, c->n_kv * hd, 0.12f, 0);
    T("attn_v.weight", WT("attn_v"), d, c->n_kv * hd, 0.3f, 0);
    T("attn_output.weight", WT("attn_output"), c->n_head * hd, d, 0.1f, 0);
    T("ffn_gate.weight", WT("ffn_gate"), d, c->ff, 0.2f, 0);
    T("ffn_up.weight", WT("ffn_up"), d, c->ff, 0.2f, 0);
    T("ffn_down.weight", WT("ffn_down"), c->ff, d, 0.1f, 0);
#undef WT
    if (gemma) {
      T("post_attention_norm.weight", TS_QT_F32, d, 1, 0.1f, 1.0f);
      T("post_ffw_norm.weight", TS_QT_F32, d, 1, 0.1f, 1.0f);
      T("attn_q_norm.weight", TS_QT_F32, hd, 1, 0.1f, 1.0f);
      T("attn_k_norm.weight", TS_QT_F32, hd, 1, 0.1f, 1.0f);
    }
#undef T
  }
  CHECK_OK(ts_gguf_writer_write(w, path));
  ts_gguf_writer_destroy(w);
}

/* ---- double-precision reference forward ------------------------------------------------- */

static inline double *tiny_deq(const ts_gguf *g, const char *name, int64_t *rows, int64_t *cols) {
  const ts_gguf_tensor *t;
  if (ts_gguf_find_tensor(g, name, &t) != TS_OK) return NULL;
  *cols = t->ne[0];
  *rows = t->n_dims > 1 ? t->ne[1] : 1;
  size_t rb;
  ts_qtype_row_bytes(t->type, *cols, &rb);
  float *f = malloc((size_t)*cols * sizeof *f);
  const int64_t nb = (*cols + 31) / 32;
  /* [rows][cols] values, then [rows][nb] the Q4_1 block minima (0 for other types) */
  double *o = calloc((size_t)(*rows * (*cols + nb)), sizeof *o);
  for (int64_t r = 0; r < *rows; r++) {
    const uint8_t *row = (const uint8_t *)t->data + (size_t)r * rb;
    ts_quant_dequantize_row(t->type, row, f, *cols);
    for (int64_t j = 0; j < *cols; j++) o[r * *cols + j] = f[j];
    if (t->type == TS_QT_Q4_1)
      for (int64_t b = 0; b < nb; b++) o[*rows * *cols + r * nb + b] = ts_f16_to_f32((uint16_t)(row[20 * b + 2] | row[20 * b + 3] << 8));
  }
  free(f);
  return o;
}

/* When set, the input of every matmul is rounded as the runtime's int8 activation format rounds it
 * (ts__act_quantize_ref then q * d): block-type weights see exactly these values, and corr[b] =
 * s_b - d_b sum_b is what a Q4_1 block minimum multiplies on top (its term is m s, not m d sum). */
static bool tiny_qact;

static inline void tiny_round_act(const double *x, int64_t n, double *y, double *corr) {
  for (int64_t b = 0; b < n / 32; b++) corr[b] = 0;
  if (!tiny_qact || n % 32) {
    if (y != x) memcpy(y, x, (size_t)n * sizeof *y);
    return;
  }
  float f[4096] = {0}, d[128], sx[128];
  int8_t q[4096];
  int32_t sm[128];
  for (int64_t i = 0; i < n; i++) f[i] = (float)x[i];
  ts__act_quantize_ref(n, f, q, d, sm, sx);
  for (int64_t i = 0; i < n; i++) y[i] = (double)q[i] * d[i / 32];
  for (int64_t b = 0; b < n / 32; b++) corr[b] = (double)sx[b] - (double)d[b] * sm[b];
}

/* y[rows] = W[rows][cols] x (x rounded first when tiny_qact; W as tiny_deq returns it) */
static inline void tiny_mv(const double *W, int64_t rows, int64_t cols, const double *x0, double *y) {
  double x[4096], corr[128];
  const int64_t nb = (cols + 31) / 32;
  const double *M = W + rows * cols;
  tiny_round_act(x0, cols, x, corr);
  for (int64_t r = 0; r < rows; r++) {
    double s = 0;
    for (int64_t j = 0; j < cols; j++) s += W[r * cols + j] * x[j];
    for (int64_t b = 0; b < cols / 32; b++) s += M[r * nb + b] * corr[b];
    y[r] = s;
  }
}

/* The runtime keeps K and V in fp16 and rounds Q and the attention probabilities to fp16 before
 * their products (as llama.cpp does): the reference rounds the same values. */
static inline double tiny_r16(double v) { return ts_f16_to_f32(ts_f32_to_f16((float)v)); }

static inline void tiny_rms(const double *x, const double *g, int n, double eps, double *y) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i] * x[i];
  double k = 1.0 / sqrt(s / n + eps);
  for (int i = 0; i < n; i++) y[i] = x[i] * k * g[i];
}

/* gemma3's GELU (tanh form) in double, its input and output rounded to fp16 as the runtime's (and
 * llama.cpp's) table rounds them; 0 below -10 and the identity from 10 as the table's callers */
static inline double tiny_gelu(double x) {
  if (x <= -10) return 0;
  if (x >= 10) return x;
  const double h = tiny_r16(x);
  return tiny_r16(0.5 * h * (1 + tanh(0.7978845608028654 * h * (1 + 0.044715 * h * h))));
}

/* logits[n][n_vocab] of tokens[0..n) at positions 0..n-1. */
static inline void tiny_reference(const ts_llm_model *m, const int32_t *tokens, int n, double *logits) {
  const ts_gguf *g = ts_llm_model_gguf(m);
  const ts_llm_config *c = ts_llm_model_config(m);
  const bool gemma = !strcmp(c->arch, "gemma3"), relu = c->ffn_act == TS_LLM_ACT_RELU;
  const int d = c->d_model, hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, ff = c->n_ff, nv = c->n_vocab;
  int64_t rr, cc;
  double *E = tiny_deq(g, "token_embd.weight", &rr, &cc);
  double *O = c->tied_output ? E : tiny_deq(g, "output.weight", &rr, &cc);
  double *on = tiny_deq(g, "output_norm.weight", &rr, &cc);
  double *x = malloc((size_t)n * d * sizeof *x), *h = malloc((size_t)(ff > d ? ff : d) * sizeof *h);
  double *q = malloc((size_t)n * nh * hd * sizeof *q), *k = malloc((size_t)n * nkv * hd * sizeof *k);
  double *v = malloc((size_t)n * nkv * hd * sizeof *v), *att = malloc((size_t)nh * hd * sizeof *att);
  double *g1 = malloc((size_t)ff * sizeof *g1), *u1 = malloc((size_t)ff * sizeof *u1), *o1 = malloc((size_t)d * sizeof *o1);
  double *sc = malloc((size_t)n * sizeof *sc);
  for (int t = 0; t < n; t++)
    for (int i = 0; i < d; i++) x[t * d + i] = E[(size_t)tokens[t] * d + i] * (gemma ? sqrt((double)d) : 1.0);
  for (int l = 0; l < c->n_layer; l++) {
    char nm[64];
#define W(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), tiny_deq(g, nm, &rr, &cc))
    double *an = W("attn_norm.weight"), *fn = W("ffn_norm.weight"), *wq = W("attn_q.weight"), *wk = W("attn_k.weight");
    double *wv = W("attn_v.weight"), *wo = W("attn_output.weight"), *wg = W("ffn_gate.weight"), *wu = W("ffn_up.weight");
    double *wd = W("ffn_down.weight");
    /* gemma3: QK-norm, post norms; layer l local when even (the tiny model's pattern) */
    double *qn = gemma ? W("attn_q_norm.weight") : NULL, *kn = gemma ? W("attn_k_norm.weight") : NULL;
    double *pa = gemma ? W("post_attention_norm.weight") : NULL, *pf = gemma ? W("post_ffw_norm.weight") : NULL;
#undef W
    const bool local = gemma && c->n_swa > 0 && l % 2 == 0;
    const float base = local ? c->rope_base_swa : c->rope_base;
    for (int t = 0; t < n; t++) {
      tiny_rms(x + t * d, an, d, c->rms_eps, h);
      tiny_mv(wq, nh * hd, d, h, q + t * nh * hd);
      tiny_mv(wk, nkv * hd, d, h, k + t * nkv * hd);
      tiny_mv(wv, nkv * hd, d, h, v + t * nkv * hd);
      for (int hh = 0; hh < nh + nkv; hh++) { /* RoPE: adjacent pairs of the first n_rot dims (gemma3: NEOX halves) */
        double *p = hh < nh ? q + (t * nh + hh) * hd : k + (t * nkv + hh - nh) * hd;
        if (gemma) tiny_rms(p, hh < nh ? qn : kn, hd, c->rms_eps, p);
        /* the angle as the runtime (and llama.cpp) forms it: an fp32 running product */
        float thf = (float)t, tsc = powf(base, -2.0f / (float)c->n_rot);
        const int half = c->n_rot / 2, st = gemma ? 1 : 2, off = gemma ? half : 1;
        for (int i = 0; i < half; i++, thf *= tsc) {
          double th = thf, a = p[st * i], b = p[st * i + off];
          p[st * i] = a * cos(th) - b * sin(th);
          p[st * i + off] = a * sin(th) + b * cos(th);
        }
        if (gemma && hh < nh)
          for (int i = 0; i < hd; i++) p[i] /= sqrt((double)hd); /* f_attention_scale */
        for (int i = 0; i < hd; i++) p[i] = tiny_r16(p[i]);
      }
      for (int i = 0; i < nkv * hd; i++) v[t * nkv * hd + i] = tiny_r16(v[t * nkv * hd + i]);
    }
    for (int t = 0; t < n; t++) {
      for (int hh = 0; hh < nh; hh++) {
        int kh = hh / (nh / nkv);
        double mx = -INFINITY, z = 0;
        const int j0 = local && t + 1 > c->n_swa ? t + 1 - c->n_swa : 0; /* the sliding window */
        for (int j = j0; j <= t; j++) {
          double s = 0;
          for (int i = 0; i < hd; i++) s += q[(t * nh + hh) * hd + i] * k[(j * nkv + kh) * hd + i];
          sc[j] = gemma ? s : s / sqrt((double)hd);
          mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = j0; j <= t; j++) z += sc[j] = exp(sc[j] - mx);
        for (int i = 0; i < hd; i++) {
          double s = 0;
          for (int j = j0; j <= t; j++) s += tiny_r16(sc[j] / z) * v[(j * nkv + kh) * hd + i];
          att[hh * hd + i] = s;
        }
      }
      tiny_mv(wo, d, nh * hd, att, o1);
      if (gemma) tiny_rms(o1, pa, d, c->rms_eps, o1);
      for (int i = 0; i < d; i++) x[t * d + i] += o1[i];
      tiny_rms(x + t * d, fn, d, c->rms_eps, h);
      tiny_mv(wg, ff, d, h, g1);
      tiny_mv(wu, ff, d, h, u1);
      for (int i = 0; i < ff; i++) g1[i] = (gemma ? tiny_gelu(g1[i]) : relu ? (g1[i] > 0 ? g1[i] : 0) : g1[i] / (1 + exp(-g1[i]))) * u1[i];
      tiny_mv(wd, d, ff, g1, o1);
      if (gemma) tiny_rms(o1, pf, d, c->rms_eps, o1);
      for (int i = 0; i < d; i++) x[t * d + i] += o1[i];
    }
    free(an), free(fn), free(wq), free(wk), free(wv), free(wo), free(wg), free(wu), free(wd);
    free(qn), free(kn), free(pa), free(pf);
  }
  for (int t = 0; t < n; t++) {
    tiny_rms(x + t * d, on, d, c->rms_eps, h);
    tiny_mv(O, nv, d, h, logits + (size_t)t * nv);
  }
  if (O != E) free(O);
  free(E), free(on), free(x), free(h), free(q), free(k), free(v), free(att), free(g1), free(u1), free(o1), free(sc);
}

#endif
