/* The vocabulary from GGUF metadata: token texts, types and scores, a text -> id hash, the BPE
 * merge table keyed by (left id, right id), byte tokens and the special-token list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"

uint64_t ts__tok_hash(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

int32_t ts__vocab_lookup(const ts_llm_vocab *v, const char *s, size_t len) {
  for (uint64_t h = ts__tok_hash(s, len) & v->hash_mask;; h = (h + 1) & v->hash_mask) {
    int32_t id = v->hash[h];
    if (id < 0) return -1;
    if (v->len[id] == len && memcmp(v->pool + v->off[id], s, len) == 0) return id;
  }
}

static uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  return k ^ (k >> 33);
}

bool ts__vocab_merge(const ts_llm_vocab *v, int32_t left, int32_t right, int32_t *rank, int32_t *result) {
  if (!v->merges) return false;
  uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
  for (uint64_t h = mix64(key) & v->merge_mask;; h = (h + 1) & v->merge_mask) {
    const ts__merge *m = &v->merges[h];
    if (m->key == UINT64_MAX) return false;
    if (m->key == key) {
      *rank = m->rank;
      *result = m->result;
      return true;
    }
  }
}

static uint64_t pow2_at_least(uint64_t n) {
  uint64_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

void ts_llm_vocab_destroy(ts_llm_vocab *v) {
  if (!v) return;
  free(v->pool);
  free(v->off);
  free(v->len);
  free(v->type);
  free(v->score);
  free(v->hash);
  free(v->merges);
  free(v->special);
  free(v);
}

static ts_status opt_id(const ts_gguf *g, const char *key, int n, int32_t *out) {
  uint32_t u;
  *out = -1;
  if (ts_gguf_kv_find(g, key) < 0) return TS_OK;
  TS_TRY(ts_gguf_get_u32(g, key, &u));
  if (u >= (uint32_t)n) return ts_error(TS_ERR_FORMAT, "%s = %u is not a token id (vocabulary of %d)", key, u, n);
  *out = (int32_t)u;
  return TS_OK;
}

static ts_status opt_bool(const ts_gguf *g, const char *key, bool dflt, bool *out) {
  *out = dflt;
  if (ts_gguf_kv_find(g, key) < 0) return TS_OK;
  return ts_gguf_get_bool(g, key, out);
}

/* Texts into one pool, types, scores. */
static ts_status load_tokens(const ts_gguf *g, ts_llm_vocab *v) {
  const char *kt = "tokenizer.ggml.tokens";
  ts_gguf_vtype et;
  uint64_t n;
  TS_TRY(ts_gguf_get_arr(g, kt, &et, &n));
  if (et != TS_GGUF_STRING) return ts_error(TS_ERR_DTYPE, "%s: array of %s, expected strings", kt, ts_gguf_vtype_name(et));
  if (n == 0 || n > (1u << 24)) return ts_error(TS_ERR_FORMAT, "%s: %llu tokens (expected 1..%u)", kt, (unsigned long long)n, 1u << 24);
  v->n = (int)n;
  int64_t kv = ts_gguf_kv_find(g, kt);
  size_t total = 0;
  for (uint64_t i = 0; i < n; i++) {
    const char *s;
    size_t len;
    TS_TRY(ts_gguf_arr_str_at(g, kv, i, &s, &len));
    total += len + 1; /* bounded by the file size */
  }
  if (total >= UINT32_MAX) return ts_error(TS_ERR_OVERFLOW, "%s: %zu bytes of token text", kt, total);
  v->pool = malloc(total);
  v->off = malloc(n * sizeof *v->off);
  v->len = malloc(n * sizeof *v->len);
  v->type = malloc(n);
  v->score = calloc(n, sizeof *v->score);
  if (!v->pool || !v->off || !v->len || !v->type || !v->score) return ts_error(TS_ERR_OOM, "%s: out of memory", kt);
  size_t at = 0;
  for (uint64_t i = 0; i < n; i++) {
    const char *s;
    size_t len;
    ts_gguf_arr_str_at(g, kv, i, &s, &len);
    memcpy(v->pool + at, s, len);
    v->pool[at + len] = 0;
    v->off[i] = (uint32_t)at;
    v->len[i] = (uint32_t)len;
    at += len + 1;
  }
  memset(v->type, TS__TOK_NORMAL, n);
  const char *ky = "tokenizer.ggml.token_type";
  if (ts_gguf_kv_find(g, ky) >= 0) {
    uint64_t m;
    TS_TRY(ts_gguf_get_arr(g, ky, &et, &m));
    if (m != n) return ts_error(TS_ERR_FORMAT, "%s has %llu entries, %s %llu", ky, (unsigned long long)m, kt, (unsigned long long)n);
    int64_t k = ts_gguf_kv_find(g, ky);
    for (uint64_t i = 0; i < n; i++) {
      int64_t t;
      TS_TRY(ts_gguf_arr_int_at(g, k, i, &t));
      if (t < 0 || t > TS__TOK_BYTE) return ts_error(TS_ERR_FORMAT, "%s[%llu] = %lld is not a token type (0..6)", ky, (unsigned long long)i, (long long)t);
      v->type[i] = (uint8_t)t;
    }
  }
  const char *ks = "tokenizer.ggml.scores";
  if (ts_gguf_kv_find(g, ks) >= 0) {
    uint64_t m;
    TS_TRY(ts_gguf_get_arr(g, ks, &et, &m));
    if (m != n) return ts_error(TS_ERR_FORMAT, "%s has %llu entries, %s %llu", ks, (unsigned long long)m, kt, (unsigned long long)n);
    int64_t k = ts_gguf_kv_find(g, ks);
    for (uint64_t i = 0; i < n; i++) {
      double d;
      TS_TRY(ts_gguf_arr_f64_at(g, k, i, &d));
      if (d != d) return ts_error(TS_ERR_FORMAT, "%s[%llu] is NaN", ks, (unsigned long long)i);
      v->score[i] = (float)d;
    }
  }
  return TS_OK;
}

static ts_status build_hash(ts_llm_vocab *v) {
  uint64_t cap = pow2_at_least(2 * (uint64_t)v->n);
  v->hash = malloc(cap * sizeof *v->hash);
  if (!v->hash) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
  memset(v->hash, 0xFF, cap * sizeof *v->hash);
  v->hash_mask = cap - 1;
  for (int32_t i = 0; i < v->n; i++) {
    const char *s = v->pool + v->off[i];
    uint64_t h = ts__tok_hash(s, v->len[i]) & v->hash_mask;
    for (;; h = (h + 1) & v->hash_mask) {
      int32_t id = v->hash[h];
      if (id < 0) break;
      if (v->len[id] == v->len[i] && memcmp(v->pool + v->off[id], s, v->len[i]) == 0) break;
    }
    v->hash[h] = i; /* a repeated text maps to its last id, as llama.cpp's map does */
  }
  return TS_OK;
}

/* "left right" strings -> (left id, right id) -> rank, merged id. A merge whose parts or result
 * are not tokens can never apply to tokens and is left out. */
static ts_status load_merges(const ts_gguf *g, ts_llm_vocab *v) {
  const char *km = "tokenizer.ggml.merges";
  ts_gguf_vtype et;
  uint64_t n;
  TS_TRY(ts_gguf_get_arr(g, km, &et, &n));
  if (et != TS_GGUF_STRING) return ts_error(TS_ERR_DTYPE, "%s: array of %s, expected strings", km, ts_gguf_vtype_name(et));
  if (n >= INT32_MAX / 4) return ts_error(TS_ERR_FORMAT, "%s: %llu merges", km, (unsigned long long)n);
  uint64_t cap = pow2_at_least(2 * n + 2);
  v->merges = malloc(cap * sizeof *v->merges);
  if (!v->merges) return ts_error(TS_ERR_OOM, "%s: out of memory", km);
  for (uint64_t i = 0; i < cap; i++) v->merges[i].key = UINT64_MAX;
  v->merge_mask = cap - 1;
  int64_t kv = ts_gguf_kv_find(g, km);
  char *cat = NULL;
  size_t catcap = 0;
  for (uint64_t i = 0; i < n; i++) {
    const char *s;
    size_t len;
    TS_TRY(ts_gguf_arr_str_at(g, kv, i, &s, &len));
    const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
    if (!sp) {
      free(cat);
      return ts_error(TS_ERR_FORMAT, "%s[%llu] has no space between its two parts", km, (unsigned long long)i);
    }
    size_t ll = (size_t)(sp - s), rl = len - ll - 1;
    int32_t l = ts__vocab_lookup(v, s, ll), r = ts__vocab_lookup(v, sp + 1, rl);
    if (l < 0 || r < 0) continue;
    if (ll + rl > catcap) {
      char *c = realloc(cat, ll + rl);
      if (!c) {
        free(cat);
        return ts_error(TS_ERR_OOM, "%s: out of memory", km);
      }
      cat = c;
      catcap = ll + rl;
    }
    memcpy(cat, s, ll);
    memcpy(cat + ll, sp + 1, rl);
    int32_t res = ts__vocab_lookup(v, cat, ll + rl);
    if (res < 0) continue;
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    uint64_t h = mix64(key) & v->merge_mask;
    while (v->merges[h].key != UINT64_MAX && v->merges[h].key != key) h = (h + 1) & v->merge_mask;
    if (v->merges[h].key == key) continue; /* a repeated pair keeps its first (best) rank */
    v->merges[h] = (ts__merge){key, (int32_t)i, res};
  }
  free(cat);
  return TS_OK;
}

static int cmp_special(const void *a, const void *b, void *arg) {
  const ts_llm_vocab *v = arg;
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (v->len[x] != v->len[y]) return v->len[x] > v->len[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

static ts_status bind_bytes_and_specials(ts_llm_vocab *v) {
  for (int b = 0; b < 256; b++) {
    char buf[8];
    int len;
    if (v->kind == TS_LLM_VOCAB_BPE) {
      len = ts_utf8_put(ts__byte_to_cp((uint8_t)b), buf);
    } else {
      len = snprintf(buf, sizeof buf, "<0x%02X>", b);
    }
    /* a BPE vocabulary may lack bytes that never occur in UTF-8 text (SmolLM2 lacks 21, e.g.
     * 0xC0, 0xF5..0xFF): such a byte is dropped when encoding, as llama.cpp drops it */
    v->byte_tok[b] = ts__vocab_lookup(v, buf, (size_t)len);
  }
  v->special = malloc((size_t)v->n * sizeof *v->special);
  if (!v->special) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
  for (int32_t i = 0; i < v->n; i++)
    if ((v->type[i] == TS__TOK_CONTROL || v->type[i] == TS__TOK_USER) && v->len[i] > 0) v->special[v->n_special++] = i;
  qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, cmp_special, v);
  return TS_OK;
}

static ts_status load(const ts_gguf *g, ts_llm_vocab *v) {
  const char *s;
  size_t len;
  TS_TRY(ts_gguf_get_str(g, "tokenizer.ggml.model", &s, &len));
  if (len == 4 && !memcmp(s, "gpt2", 4)) v->kind = TS_LLM_VOCAB_BPE;
  else if (len == 5 && !memcmp(s, "llama", 5)) v->kind = TS_LLM_VOCAB_SPM;
  else
    return ts_error(TS_ERR_UNSUPPORTED, "tokenizer.ggml.model \"%.*s\" is not supported (gpt2: byte-level BPE, llama: SentencePiece)",
                    (int)(len > 64 ? 64 : len), s);
  if (v->kind == TS_LLM_VOCAB_BPE) {
    if (ts_gguf_get_str(g, "tokenizer.ggml.pre", &s, &len) != TS_OK)
      return ts_error(TS_ERR_UNSUPPORTED, "tokenizer.ggml.pre is missing: the byte-level BPE pre-tokenizer is unknown (supported: smollm, gpt2)");
    if (len == 6 && !memcmp(s, "smollm", 6)) v->pre = TS__PRE_SMOLLM;
    else if (len == 5 && !memcmp(s, "gpt-2", 5)) v->pre = TS__PRE_GPT2;
    else if (len == 4 && !memcmp(s, "gpt2", 4)) v->pre = TS__PRE_GPT2;
    else
      return ts_error(TS_ERR_UNSUPPORTED, "tokenizer.ggml.pre \"%.*s\" is not supported (smollm, gpt-2)", (int)(len > 64 ? 64 : len), s);
  }
  TS_TRY(load_tokens(g, v));
  TS_TRY(build_hash(v));
  if (v->kind == TS_LLM_VOCAB_BPE) TS_TRY(load_merges(g, v));
  TS_TRY(bind_bytes_and_specials(v));
  TS_TRY(opt_id(g, "tokenizer.ggml.bos_token_id", v->n, &v->bos));
  TS_TRY(opt_id(g, "tokenizer.ggml.eos_token_id", v->n, &v->eos));
  TS_TRY(opt_id(g, "tokenizer.ggml.unknown_token_id", v->n, &v->unk));
  bool spm = v->kind == TS_LLM_VOCAB_SPM;
  TS_TRY(opt_bool(g, "tokenizer.ggml.add_bos_token", spm, &v->add_bos));
  TS_TRY(opt_bool(g, "tokenizer.ggml.add_space_prefix", spm, &v->add_space_prefix));
  if (v->add_bos && v->bos < 0) return ts_error(TS_ERR_FORMAT, "tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is missing");
  if (spm && v->unk < 0) v->unk = ts__vocab_lookup(v, "<unk>", 5);
  return TS_OK;
}

ts_status ts_llm_vocab_load(ts_llm_vocab **out, const ts_gguf *g, const char *name) {
  if (!g || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_vocab_load: NULL argument");
  *out = NULL;
  ts_llm_vocab *v = calloc(1, sizeof *v);
  if (!v) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
  ts_status s = load(g, v);
  if (s != TS_OK) {
    if (name) ts_error_prefix("%s: ", name);
    ts_llm_vocab_destroy(v);
    return s;
  }
  *out = v;
  return TS_OK;
}

ts_llm_vocab_kind ts_llm_vocab_kind_of(const ts_llm_vocab *v) { return v->kind; }
int ts_llm_vocab_size(const ts_llm_vocab *v) { return v->n; }
int32_t ts_llm_vocab_bos(const ts_llm_vocab *v) { return v->bos; }
int32_t ts_llm_vocab_eos(const ts_llm_vocab *v) { return v->eos; }
bool ts_llm_vocab_add_bos(const ts_llm_vocab *v) { return v->add_bos; }

const char *ts_llm_vocab_text(const ts_llm_vocab *v, int32_t id, size_t *len) {
  if (id < 0 || id >= v->n) return NULL;
  if (len) *len = v->len[id];
  return v->pool + v->off[id];
}

bool ts_llm_vocab_is_control(const ts_llm_vocab *v, int32_t id) {
  return id >= 0 && id < v->n && v->type[id] == TS__TOK_CONTROL;
}

int32_t ts_llm_vocab_find(const ts_llm_vocab *v, const char *text, size_t len) {
  return ts__vocab_lookup(v, text, len);
}
