/* Model loading: the LLaMA hyperparameters from `<arch>.*` metadata, every tensor bound to its
 * place with its shape and type checked, norms converted to fp32, and the tokenizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"

static ts_status get_int(const ts_gguf *g, const char *arch, const char *suffix, bool required, int64_t dflt,
                         int64_t lo, int64_t hi, int *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  int64_t v = dflt;
  if (ts_gguf_kv_find(g, key) >= 0) TS_TRY(ts_gguf_get_i64(g, key, &v));
  else if (required) return ts_error(TS_ERR_NOT_FOUND, "metadata key %s is missing", key);
  if (v < lo || v > hi) return ts_error(TS_ERR_FORMAT, "%s = %lld is outside %lld..%lld", key, (long long)v, (long long)lo, (long long)hi);
  *out = (int)v;
  return TS_OK;
}

static ts_status get_float(const ts_gguf *g, const char *arch, const char *suffix, bool required, float dflt,
                           float *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  *out = dflt;
  if (ts_gguf_kv_find(g, key) >= 0) TS_TRY(ts_gguf_get_f32(g, key, out));
  else if (required) return ts_error(TS_ERR_NOT_FOUND, "metadata key %s is missing", key);
  if (!(*out == *out) || *out > 1e30f || *out < -1e30f) return ts_error(TS_ERR_FORMAT, "%s = %g is not a finite value", key, (double)*out);
  return TS_OK;
}

/* gemma3's keys beyond llama's: the sliding window (llama.cpp: local layers only when the key is
 * present and > 0), the local RoPE base, and the final logit soft-capping this runtime does not
 * implement (absent or 0 in Gemma 3). The layer pattern is read by bind_all. */
static ts_status read_gemma3(const ts_gguf *g, ts_llm_config *c) {
  const char *a = c->arch;
  TS_TRY(get_int(g, a, "attention.sliding_window", false, 0, 0, 1 << 24, &c->n_swa));
  TS_TRY(get_float(g, a, "rope.freq_base_swa", false, 10000.0f, &c->rope_base_swa));
  if (c->rope_base_swa <= 1.0f)
    return ts_error(TS_ERR_FORMAT, "%s.rope.freq_base_swa = %g must exceed 1", a, (double)c->rope_base_swa);
  float cap = 0;
  TS_TRY(get_float(g, a, "final_logit_softcapping", false, 0.0f, &cap));
  if (cap != 0)
    return ts_error(TS_ERR_UNSUPPORTED, "%s.final_logit_softcapping = %g: logit soft-capping is not supported", a, (double)cap);
  return TS_OK;
}

/* Which layers are local (sliding window), as llama.cpp's load_swa_pattern decides for gemma3:
 * <arch>.attention.sliding_window_pattern as a per-layer array (nonzero: local), or as n (0: every
 * layer local; else layer l is local unless l % n == n - 1), by default n = 6. */
static ts_status read_swa_pattern(const ts_gguf *g, const ts_llm_config *c, ts__llm_layer *layers) {
  char key[128];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", c->arch);
  const int64_t k = ts_gguf_kv_find(g, key);
  int64_t n = 6;
  if (k >= 0) {
    ts_gguf_vtype t;
    TS_TRY(ts_gguf_kv_info(g, k, NULL, &t, NULL, NULL));
    if (t == TS_GGUF_ARRAY) {
      uint64_t count = 0;
      TS_TRY(ts_gguf_get_arr(g, key, NULL, &count));
      if (count < (uint64_t)c->n_layer)
        return ts_error(TS_ERR_FORMAT, "%s has %llu entries for %d layers", key, (unsigned long long)count, c->n_layer);
      for (int l = 0; l < c->n_layer; l++) {
        int64_t v;
        TS_TRY(ts_gguf_arr_int(g, key, (uint64_t)l, &v));
        layers[l].swa = c->n_swa > 0 && v != 0;
      }
      return TS_OK;
    }
    TS_TRY(ts_gguf_get_i64(g, key, &n));
    if (n < 0 || n > 4096) return ts_error(TS_ERR_FORMAT, "%s = %lld is outside 0..4096", key, (long long)n);
  }
  for (int l = 0; l < c->n_layer; l++) layers[l].swa = c->n_swa > 0 && (n == 0 || l % n < n - 1);
  return TS_OK;
}

static ts_status read_config(const ts_gguf *g, ts_llm_config *c, int *arch) {
  const char *s;
  size_t len;
  TS_TRY(ts_gguf_get_str(g, "general.architecture", &s, &len));
  const bool gemma3 = len == 6 && !memcmp(s, "gemma3", 6);
  if ((len != 5 || memcmp(s, "llama", 5)) && !gemma3)
    return ts_error(TS_ERR_UNSUPPORTED, "general.architecture \"%.*s\" is not supported (llama, gemma3)",
                    (int)(len > 31 ? 31 : len), s);
  *arch = gemma3 ? TS__ARCH_GEMMA3 : TS__ARCH_LLAMA;
  memcpy(c->arch, s, len);
  c->arch[len] = 0;
  if (ts_gguf_get_str(g, "general.name", &s, &len) == TS_OK) {
    if (len >= sizeof c->name) len = sizeof c->name - 1;
    memcpy(c->name, s, len);
    c->name[len] = 0;
  }
  const char *a = c->arch;
  TS_TRY(get_int(g, a, "block_count", true, 0, 1, 4096, &c->n_layer));
  TS_TRY(get_int(g, a, "embedding_length", true, 0, 32, 1 << 16, &c->d_model));
  TS_TRY(get_int(g, a, "feed_forward_length", true, 0, 32, 1 << 18, &c->n_ff));
  TS_TRY(get_int(g, a, "attention.head_count", true, 0, 1, 1024, &c->n_head));
  TS_TRY(get_int(g, a, "attention.head_count_kv", false, c->n_head, 1, c->n_head, &c->n_head_kv));
  TS_TRY(get_int(g, a, "context_length", false, 2048, 1, 1 << 24, &c->n_ctx_train));
  if (c->n_head % c->n_head_kv)
    return ts_error(TS_ERR_FORMAT, "%s.attention.head_count %d is not a multiple of head_count_kv %d", a, c->n_head, c->n_head_kv);
  char kl[128];
  snprintf(kl, sizeof kl, "%s.attention.key_length", a);
  if (c->d_model % c->n_head && ts_gguf_kv_find(g, kl) < 0) /* the head size defaults to d_model / heads */
    return ts_error(TS_ERR_FORMAT, "%s.embedding_length %d is not a multiple of attention.head_count %d", a, c->d_model, c->n_head);
  TS_TRY(get_int(g, a, "attention.key_length", false, c->d_model / c->n_head, 2, 1024, &c->head_dim));
  int vlen = 0;
  TS_TRY(get_int(g, a, "attention.value_length", false, c->head_dim, 2, 1024, &vlen));
  /* gemma3's heads need not make d_model (270M: 4 heads of 256 on 640); llama's always do here */
  if (vlen != c->head_dim || (!gemma3 && c->head_dim * c->n_head != c->d_model))
    return ts_error(TS_ERR_UNSUPPORTED, "%s: head sizes key %d / value %d with %d heads do not make embedding_length %d", a, c->head_dim,
                    vlen, c->n_head, c->d_model);
  if (c->head_dim % 2) return ts_error(TS_ERR_FORMAT, "%s: head size %d is odd (RoPE rotates pairs)", a, c->head_dim);
  TS_TRY(get_int(g, a, "rope.dimension_count", false, c->head_dim, 2, c->head_dim, &c->n_rot));
  if (c->n_rot % 2) return ts_error(TS_ERR_FORMAT, "%s.rope.dimension_count %d is odd", a, c->n_rot);
  TS_TRY(get_float(g, a, "rope.freq_base", false, 10000.0f, &c->rope_base));
  if (c->rope_base <= 1.0f) return ts_error(TS_ERR_FORMAT, "%s.rope.freq_base = %g must exceed 1", a, (double)c->rope_base);
  TS_TRY(get_float(g, a, "attention.layer_norm_rms_epsilon", true, 0, &c->rms_eps));
  if (c->rms_eps < 0) return ts_error(TS_ERR_FORMAT, "%s.attention.layer_norm_rms_epsilon = %g is negative", a, (double)c->rms_eps);
  /* llama's GGUF layout: the converter permuted Q/K for adjacent pairs; gemma3 keeps the NEOX halves */
  c->rope = gemma3 ? TS_LLM_ROPE_NEOX : TS_LLM_ROPE_NORM;
  c->rope_scale = 1.0f;
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", a);
  if (ts_gguf_kv_find(g, key) >= 0) {
    TS_TRY(ts_gguf_get_str(g, key, &s, &len));
    bool linear = len == 6 && !memcmp(s, "linear", 6), none = len == 4 && !memcmp(s, "none", 4);
    if (!linear && !none) return ts_error(TS_ERR_UNSUPPORTED, "%s \"%.*s\" is not supported (none, linear)", key, (int)(len > 31 ? 31 : len), s);
    if (linear) {
      float f;
      TS_TRY(get_float(g, a, "rope.scaling.factor", true, 1, &f));
      if (f < 1) return ts_error(TS_ERR_FORMAT, "%s.rope.scaling.factor = %g is below 1", a, (double)f);
      c->rope_scale = 1.0f / f;
    }
  }
  if (gemma3) TS_TRY(read_gemma3(g, c));
  c->ffn_act = gemma3 ? TS_LLM_ACT_GELU : TS_LLM_ACT_SILU;
  if (ts_gguf_kv_find(g, "tessera.ffn_activation") >= 0) { /* tessera's own key: llama.cpp has no ReLU llama */
    TS_TRY(ts_gguf_get_str(g, "tessera.ffn_activation", &s, &len));
    const bool relu = len == 4 && !memcmp(s, "relu", 4), silu = len == 4 && !memcmp(s, "silu", 4);
    if (gemma3 || (!relu && !silu))
      return ts_error(TS_ERR_UNSUPPORTED, "tessera.ffn_activation \"%.*s\" is not supported for %s (llama: silu, relu)",
                      (int)(len > 31 ? 31 : len), s, c->arch);
    c->ffn_act = relu ? TS_LLM_ACT_RELU : TS_LLM_ACT_SILU;
  }
  return TS_OK;
}

static ts_status bind(const ts_gguf *g, const char *name, int64_t cols, int64_t rows, ts__wmat *w) {
  const ts_gguf_tensor *t;
  TS_TRY(ts_gguf_find_tensor(g, name, &t));
  bool vec = rows == 0;
  int64_t want_rows = vec ? 1 : rows;
  if (t->ne[0] != cols || (t->n_dims > 1 ? t->ne[1] : 1) != want_rows || t->ne[2] != 1 || t->ne[3] != 1)
    return ts_error(TS_ERR_SHAPE, "tensor %s has shape %lld x %lld x %lld x %lld, expected %lld x %lld", name, (long long)t->ne[0],
                    (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)cols, (long long)want_rows);
  if (!ts_qtype_has_kernels(t->type))
    return ts_error(TS_ERR_UNSUPPORTED, "tensor %s is %s: no kernels for it (f32, f16, bf16, q8_0, q4_0, q4_1)", name,
                    ts_qtype_name(t->type));
  if (vec && t->type != TS_QT_F32 && t->type != TS_QT_F16 && t->type != TS_QT_BF16)
    return ts_error(TS_ERR_UNSUPPORTED, "tensor %s is %s: a norm weight must be f32, f16 or bf16", name, ts_qtype_name(t->type));
  w->name = t->name;
  w->type = t->type;
  w->rows = want_rows;
  w->cols = cols;
  TS_TRY(ts_qtype_row_bytes(t->type, cols, &w->row_bytes));
  w->data = t->data;
  w->npiece = 0;
  w->cut = NULL;
  w->at = NULL;
  w->pgemm = NULL;
  return TS_OK;
}

/* A norm vector as fp32 into dst[d]. */
static ts_status bind_norm(const ts_gguf *g, const char *name, int64_t d, float *dst) {
  ts__wmat w;
  TS_TRY(bind(g, name, d, 0, &w));
  return ts_quant_dequantize_row(w.type, w.data, dst, d);
}

static bool has_tensor(const ts_gguf *g, const char *name) {
  const ts_gguf_tensor *t;
  bool ok = ts_gguf_find_tensor(g, name, &t) == TS_OK;
  ts_error_clear();
  return ok;
}

static ts_status bind_all(ts_llm_model *m) {
  const ts_gguf *g = m->g;
  ts_llm_config *c = &m->cfg;
  const bool gemma = m->arch == TS__ARCH_GEMMA3;
  const int64_t d = c->d_model, hd = c->head_dim, ff = c->n_ff, nq = (int64_t)c->n_head * hd;
  TS_TRY(bind(g, "token_embd.weight", d, c->n_vocab, &m->tok_embd));
  c->tied_output = !has_tensor(g, "output.weight");
  if (c->tied_output) m->output = m->tok_embd;
  else TS_TRY(bind(g, "output.weight", d, c->n_vocab, &m->output));
  /* norms: output_norm, then per layer attn_norm, ffn_norm (gemma3 also post_attention_norm,
   * post_ffw_norm [d] and attn_q_norm, attn_k_norm [hd]) */
  const size_t per = gemma ? (size_t)(4 * d + 2 * hd) : (size_t)(2 * d);
  m->norms = malloc((per * (size_t)c->n_layer + (size_t)d) * sizeof(float));
  m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
  if (!m->norms || !m->layers) return ts_error(TS_ERR_OOM, "out of memory for %d layers", c->n_layer);
  TS_TRY(bind_norm(g, "output_norm.weight", d, m->norms));
  m->output_norm = m->norms;
  m->weight_bytes = (uint64_t)m->output.row_bytes * (uint64_t)m->output.rows + (uint64_t)d * 4;
  if (gemma) /* EmbeddingGemma's dense projections: another model */
    for (int i = 0; i < 2; i++) {
      const char *nm = i ? "dense_3.weight" : "dense_2.weight";
      if (has_tensor(g, nm)) return ts_error(TS_ERR_UNSUPPORTED, "tensor %s: gemma3's dense output projections are not supported", nm);
    }
  for (int l = 0; l < c->n_layer; l++) {
    ts__llm_layer *L = &m->layers[l];
    char nm[96];
    float *nw = m->norms + (size_t)d + (size_t)l * per;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
    TS_TRY(bind_norm(g, NAME("attn_norm.weight"), d, nw));
    TS_TRY(bind_norm(g, NAME("ffn_norm.weight"), d, nw + d));
    L->attn_norm = nw;
    L->ffn_norm = nw + d;
    if (gemma) {
      TS_TRY(bind_norm(g, NAME("post_attention_norm.weight"), d, nw + 2 * d));
      TS_TRY(bind_norm(g, NAME("post_ffw_norm.weight"), d, nw + 3 * d));
      TS_TRY(bind_norm(g, NAME("attn_q_norm.weight"), hd, nw + 4 * d));
      TS_TRY(bind_norm(g, NAME("attn_k_norm.weight"), hd, nw + 4 * d + hd));
      L->post_attn_norm = nw + 2 * d;
      L->post_ffn_norm = nw + 3 * d;
      L->q_norm = nw + 4 * d;
      L->k_norm = nw + 4 * d + hd;
    }
    static const char *const biases[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"};
    for (int b = 0; b < 4; b++) {
      snprintf(nm, sizeof nm, "blk.%d.%s", l, biases[b]);
      if (has_tensor(g, nm)) return ts_error(TS_ERR_UNSUPPORTED, "tensor %s: attention biases are not supported", nm);
    }
    TS_TRY(bind(g, NAME("attn_q.weight"), d, nq, &L->wq));
    TS_TRY(bind(g, NAME("attn_k.weight"), d, c->n_head_kv * hd, &L->wk));
    TS_TRY(bind(g, NAME("attn_v.weight"), d, c->n_head_kv * hd, &L->wv));
    TS_TRY(bind(g, NAME("attn_output.weight"), nq, d, &L->wo));
    TS_TRY(bind(g, NAME("ffn_gate.weight"), d, ff, &L->gate));
    TS_TRY(bind(g, NAME("ffn_up.weight"), d, ff, &L->up));
    TS_TRY(bind(g, NAME("ffn_down.weight"), ff, d, &L->down));
#undef NAME
    const ts__wmat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    for (int i = 0; i < 7; i++) m->weight_bytes += (uint64_t)ws[i]->row_bytes * (uint64_t)ws[i]->rows;
    m->weight_bytes += (uint64_t)per * 4;
  }
  m->weight_bytes += m->tok_embd.row_bytes; /* the token's embedding row */
  c->wtype = m->layers[0].gate.type;
  m->embd_scale = 1.0f;
  m->q_scale = 0;
  if (gemma) {
    TS_TRY(read_swa_pattern(g, c, m->layers));
    for (int l = 0; l < c->n_layer; l++) c->n_swa_layers += m->layers[l].swa;
    /* llama.cpp's gemma3 graph: inputs times sqrtf(n_embd); q times f_attention_scale after RoPE,
     * 1/sqrt(n_embd / n_head) for the 27B model (62 layers), else 1/sqrt(head_dim) */
    m->embd_scale = sqrtf((float)d);
    const int64_t qd = c->n_layer == 62 && d >= c->n_head ? d / c->n_head : hd;
    m->q_scale = 1.0f / sqrtf((float)qd);
  }
  return TS_OK;
}

/* The packed matrices in decode's order (per layer k, v, q, wo, gate, up, down; then the output
 * projection) into ws (when given), and each one's boundaries between the home rows of a team of
 * nt (ts__qkv_part's heads, ts__ff_part's neurons, ts__grid_*; when cuts is given): cuts[i stride + 0..nt]. Returns how
 * many there are. */
static int decode_order(ts_llm_model *m, int nt, ts__wmat **ws, int64_t *cuts, size_t stride) {
  const ts_llm_config *c = &m->cfg;
  int n = 0;
  for (int l = 0; l <= c->n_layer; l++) {
    ts__llm_layer *L = l < c->n_layer ? &m->layers[l] : NULL;
    ts__wmat *lw[7] = {NULL};
    int k = 0;
    if (L) {
      lw[k++] = &L->wk, lw[k++] = &L->wv, lw[k++] = &L->wq, lw[k++] = &L->wo;
      lw[k++] = &L->gate, lw[k++] = &L->up, lw[k++] = &L->down;
    } else {
      lw[k++] = &m->output;
    }
    for (int i = 0; i < k; i++) {
      ts__wmat *w = lw[i];
      if (!w->pgemm) continue;
      if (ws) ws[n] = w;
      if (!cuts) {
        n++;
        continue;
      }
      const ts__grid g = L ? ts__grid_d(w) : ts__grid_vocab(m);
      const bool ff = L && (w == &L->gate || w == &L->up);
      const bool qkv = L && (w == &L->wq || w == &L->wk || w == &L->wv);
      int64_t *cut = cuts + (size_t)n * stride;
      for (int t = 0; t < nt; t++) {
        int64_t lo, hi;
        if (qkv) { /* decode's heads (ts__step_qkv_att) */
          const ts__qkv_part p = ts__qkv_part_of(c, t, nt);
          lo = (int64_t)(w == &L->wq ? p.h0 : p.k0) * c->head_dim;
        } else if (ff) { /* decode's neurons (ts__step_gate_up) */
          ts__ff_part(c, t, nt, &lo, &hi);
        } else {
          ts__split(g.n, t, nt, g.unit, &lo, &hi);
        }
        cut[t] = lo < 0 ? 0 : lo > w->rows ? w->rows : lo;
      }
      cut[0] = 0;
      cut[nt] = w->rows;
      n++;
    }
  }
  return n;
}

ts_status ts__llm_layout(ts_llm_model *m, int nt) {
  if (!m->packmem || nt < 1 || nt == m->layout_nt) return TS_OK;
  const int nm = decode_order(m, 1, NULL, NULL, 0);
  /* one allocation: every matrix's cut[0..nt], then every matrix's at[0..nt-1] */
  const size_t per = (size_t)nt + 1;
  ts__wmat **ws = malloc((size_t)nm * sizeof *ws);
  int64_t *cm = malloc((size_t)nm * (per * sizeof(int64_t) + (size_t)nt * sizeof(uint8_t *)));
  if (!ws || !cm) {
    free(ws), free(cm);
    return ts_error(TS_ERR_OOM, "out of memory for the weight layout of %d threads", nt);
  }
  const uint8_t **ats = (const uint8_t **)(cm + (size_t)nm * per);
  decode_order(m, nt, ws, cm, per);
  size_t total = 0;
  for (int i = 0; i < nm; i++)
    for (int t = 0; t < nt; t++) {
      const int64_t *cut = cm + (size_t)i * per;
      total += ts__pack_bytes(ws[i]->type, cut[t + 1] - cut[t], ws[i]->cols);
    }
  if (total > m->packbytes) { /* cuts inside groups of 8 rows (q|k|v heads of other sizes) pad them */
    uint8_t *pm = ts_malloc_huge(total);
    if (!pm) {
      free(ws), free(cm);
      return ts_error(TS_ERR_OOM, "out of memory for %zu MiB of packed weights", total >> 20);
    }
    ts_free(m->packmem);
    m->packmem = pm;
    m->packbytes = total;
  }
  /* each thread's pieces in decode's order, thread after thread */
  size_t off = 0;
  for (int t = 0; t < nt; t++)
    for (int i = 0; i < nm; i++) {
      const int64_t *cut = cm + (size_t)i * per;
      ats[(size_t)i * (size_t)nt + (size_t)t] = m->packmem + off;
      off += ts__pack_bytes(ws[i]->type, cut[t + 1] - cut[t], ws[i]->cols);
    }
  for (int i = 0; i < nm; i++) {
    const int64_t *cut = cm + (size_t)i * per;
    ws[i]->npiece = nt;
    ws[i]->cut = cut;
    ws[i]->at = ats + (size_t)i * (size_t)nt;
  }
  const int jobs = nm * nt;
#pragma omp parallel for schedule(dynamic, 1)
  for (int k = 0; k < jobs; k++) {
    const ts__wmat *w = ws[k / nt];
    const int t = k % nt;
    if (w->cut[t + 1] > w->cut[t])
      ts__pack_rows(w->type, w->data + (size_t)w->cut[t] * w->row_bytes, (void *)w->at[t], w->cut[t + 1] - w->cut[t], w->cols);
  }
  if (m->cfg.tied_output) m->tok_embd = m->output; /* the same matrix, and its pieces */
  free(m->cutmem);
  m->cutmem = cm;
  m->layout_nt = nt;
  free(ws);
  return TS_OK;
}

/* The packed copies of every block-type matrix (one allocation), when the active ISA has packed
 * kernels, laid out for the default thread count (ts__llm_layout; a state with another team lays
 * them out again while no other state uses the model): a one-time regrouping of ~all the weight
 * bytes (~0.1 s for 100 MB on 2 cores). */
static ts_status pack_all(ts_llm_model *m) {
  const ts__quant_table *qt = ts__quant();
  if (!qt->prep_packed) return TS_OK;
  const int nl = m->cfg.n_layer;
  ts__wmat *out = m->cfg.tied_output ? &m->tok_embd : &m->output; /* the embedding is only read by rows */
  out->pgemm = ts__quant_pgemm_fn(qt, out->type);
  if (m->cfg.tied_output) m->output = m->tok_embd;
  for (int l = 0; l < nl; l++) {
    ts__llm_layer *L = &m->layers[l];
    ts__wmat *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    for (int i = 0; i < 7; i++) lw[i]->pgemm = ts__quant_pgemm_fn(qt, lw[i]->type);
  }
  const int nm = decode_order(m, 1, NULL, NULL, 0);
  if (nm == 0) return TS_OK;
  ts__wmat **ws = malloc((size_t)nm * sizeof *ws);
  if (!ws) return ts_error(TS_ERR_OOM, "out of memory");
  decode_order(m, 1, ws, NULL, 0);
  size_t total = 0;
  for (int i = 0; i < nm; i++) total += ts__pack_bytes(ws[i]->type, ws[i]->rows, ws[i]->cols);
  free(ws);
  m->packbytes = total;
  m->packmem = ts_malloc_huge(total); /* streamed every token: 2 MiB pages where allowed */
  if (!m->packmem) return ts_error(TS_ERR_OOM, "out of memory for %zu MiB of packed weights", total >> 20);
  return ts__llm_layout(m, ts_default_threads());
}

void ts_llm_model_destroy(ts_llm_model *m) {
  if (!m) return;
  ts_llm_vocab_destroy(m->vocab);
  free(m->layers);
  free(m->norms);
  ts_free(m->packmem);
  free(m->cutmem);
  pthread_mutex_destroy(&m->lock);
  free(m->name);
  ts_gguf_close(m->g);
  free(m);
}

ts_status ts_llm_model_from_gguf(ts_llm_model **out, ts_gguf *g, const char *name) {
  if (!out) {
    ts_gguf_close(g);
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_from_gguf: NULL out");
  }
  *out = NULL;
  if (!g) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_from_gguf: NULL gguf");
  if (!name) name = "model";
  ts_llm_model *m = calloc(1, sizeof *m);
  if (!m) {
    ts_gguf_close(g);
    return ts_error(TS_ERR_OOM, "%s: out of memory", name);
  }
  m->g = g;
  m->wpf = -1; /* measured by the first state (ts__llm_tune_wpf) */
  m->side = 0; /* decode's side prefetches off (ts_llm_model's side) */
  pthread_mutex_init(&m->lock, NULL);
  m->name = strdup(name);
  ts_status s = m->name ? TS_OK : ts_error(TS_ERR_OOM, "out of memory");
  if (s == TS_OK) s = read_config(g, &m->cfg, &m->arch);
  if (s == TS_OK) {
    ts_status vs = ts_llm_vocab_load(&m->vocab, g, NULL);
    if (vs != TS_OK) {
      /* ts_llm_vocab_load prefixed "gguf: "; the file name is added below */
      s = vs;
    }
  }
  if (s == TS_OK) {
    m->cfg.n_vocab = ts_llm_vocab_size(m->vocab);
    char key[128];
    snprintf(key, sizeof key, "%s.vocab_size", m->cfg.arch);
    int64_t vs;
    if (ts_gguf_kv_find(g, key) >= 0 && ts_gguf_get_i64(g, key, &vs) == TS_OK && vs != m->cfg.n_vocab)
      s = ts_error(TS_ERR_FORMAT, "%s = %lld but tokenizer.ggml.tokens has %d tokens", key, (long long)vs, m->cfg.n_vocab);
  }
  if (s == TS_OK) s = bind_all(m);
  if (s == TS_OK) s = pack_all(m);
  if (s != TS_OK) {
    ts_error_prefix("%s: ", name);
    ts_llm_model_destroy(m);
    return s;
  }
  *out = m;
  return TS_OK;
}

ts_status ts_llm_model_load(ts_llm_model **out, const char *path) {
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_load: NULL argument");
  *out = NULL;
  ts_gguf *g;
  TS_TRY(ts_gguf_open(&g, path));
  return ts_llm_model_from_gguf(out, g, path);
}

const ts_llm_config *ts_llm_model_config(const ts_llm_model *m) { return &m->cfg; }
const ts_llm_vocab *ts_llm_model_vocab(const ts_llm_model *m) { return m->vocab; }
const ts_gguf *ts_llm_model_gguf(const ts_llm_model *m) { return m->g; }
uint64_t ts_llm_model_weight_bytes(const ts_llm_model *m) { return m->weight_bytes; }

ts_status ts_llm_model_set_weight_prefetch(ts_llm_model *m, int bytes) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_model_set_weight_prefetch: NULL model");
  if (bytes < -1 || bytes > (1 << 20))
    return ts_error(TS_ERR_INVALID_ARG, "weight prefetch distance %d bytes outside 0..1048576 (-1: measure)", bytes);
  pthread_mutex_lock(&m->lock);
  __atomic_store_n(&m->wpf, bytes, __ATOMIC_RELAXED); /* read by running evals (llm_forward.c) */
  memset(&m->wpf_rep, 0, sizeof m->wpf_rep);
  m->wpf_rep.bytes = bytes > 0 ? bytes : 0;
  m->wpf_fresh = bytes == -1; /* asked for again: measured anew, not read from the store */
  pthread_mutex_unlock(&m->lock);
  return TS_OK;
}

void ts_llm_model_weight_prefetch(const ts_llm_model *m, ts_llm_wpf_report *out) {
  if (!m || !out) return;
  ts_llm_model *mm = (ts_llm_model *)m; /* the lock only: not the model's value, nothing is modified */
  pthread_mutex_lock(&mm->lock);
  *out = m->wpf_rep;
  const int b = __atomic_load_n(&m->wpf, __ATOMIC_RELAXED);
  out->bytes = b > 0 ? b : 0;
  pthread_mutex_unlock(&mm->lock);
}
uint64_t ts_llm_model_kv_bytes_per_pos(const ts_llm_model *m) {
  return 2ull * (uint64_t)m->cfg.n_layer * (uint64_t)m->cfg.n_head_kv * (uint64_t)m->cfg.head_dim * sizeof(uint16_t);
}

const char *ts_llm_act_name(ts_llm_act a) {
  switch (a) {
    case TS_LLM_ACT_SILU: return "silu";
    case TS_LLM_ACT_GELU: return "gelu";
    case TS_LLM_ACT_RELU: return "relu";
  }
  return "?";
}
