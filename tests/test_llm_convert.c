/* The safetensors reader and `ts_llm_convert`: parse round trips, a rejection for every malformed
 * header field, exact F16/BF16 inputs, the tensor-type rule, metadata types and errors, and a full
 * conversion of a tiny ReLU llama to Q8_0 (values within the quantizer's bound, the model loads
 * and evaluates). Every image is built here in memory; nothing needs the real model. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/safetensors_internal.h"
#include "llm/tok_internal.h"
#include "tessera/gguf.h"
#include "tessera/llm.h"
#include "tessera/llm_convert.h"
#include "tst.h"

/* ---- safetensors images ------------------------------------------------------------------ */

typedef struct ent {
  const char *name, *dtype;
  int nd;
  int64_t shape[4];
  const void *data;
  size_t nbytes;
} ent;

/* u64 header length + header text (padded with spaces to a multiple of 8, as the reference writer
 * does) + data_len bytes of data (data, or a byte pattern when NULL). */
static uint8_t *st_raw(const char *hdr, const void *data, size_t data_len, size_t *len) {
  size_t h = strlen(hdr), hp = (h + 7) / 8 * 8;
  *len = 8 + hp + data_len;
  uint8_t *img = malloc(*len);
  for (int i = 0; i < 8; i++) img[i] = (uint8_t)((uint64_t)hp >> (8 * i));
  memcpy(img + 8, hdr, h);
  memset(img + 8 + h, ' ', hp - h);
  for (size_t i = 0; i < data_len; i++) img[8 + hp + i] = data ? ((const uint8_t *)data)[i] : (uint8_t)(i * 7 + 1);
  return img;
}

/* A well-formed image of the entries, data packed in order; meta: a JSON object text or NULL. */
static uint8_t *st_image(const ent *e, int n, const char *meta, size_t *len) {
  size_t cap = 256 + (meta ? strlen(meta) : 0), total = 0;
  for (int i = 0; i < n; i++) cap += 160 + strlen(e[i].name), total += e[i].nbytes;
  char *h = malloc(cap);
  size_t o = (size_t)snprintf(h, cap, "{");
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    o += (size_t)snprintf(h + o, cap - o, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", e[i].name, e[i].dtype);
    for (int d = 0; d < e[i].nd; d++) o += (size_t)snprintf(h + o, cap - o, d ? ",%lld" : "%lld", (long long)e[i].shape[d]);
    o += (size_t)snprintf(h + o, cap - o, "],\"data_offsets\":[%zu,%zu]}", off, off + e[i].nbytes);
    off += e[i].nbytes;
  }
  if (meta) o += (size_t)snprintf(h + o, cap - o, "%s\"__metadata__\":%s", n ? "," : "", meta);
  snprintf(h + o, cap - o, "}");
  uint8_t *data = malloc(total ? total : 1);
  off = 0;
  for (int i = 0; i < n; i++) {
    if (e[i].nbytes) memcpy(data + off, e[i].data, e[i].nbytes);
    off += e[i].nbytes;
  }
  uint8_t *img = st_raw(h, data, total, len);
  free(h);
  free(data);
  return img;
}

static void write_file(const char *path, const void *p, size_t n) { CHECK_OK(ts_write_file_atomic(path, p, n)); }

/* Parses a header (with data_len pattern bytes after it) and expects `code` and `needle`. */
static void reject(const char *hdr, size_t data_len, ts_status code, const char *needle) {
  size_t n;
  uint8_t *img = st_raw(hdr, NULL, data_len, &n);
  ts__st *st = (ts__st *)1;
  ts_status s = ts__st_parse(img, n, "bad.safetensors", &st);
  CHECK(s == code && strstr(ts_last_error(), needle) && strstr(ts_last_error(), "bad.safetensors") && !st,
        "header %s: got %s (%s), want %s mentioning '%s'", hdr, ts_strerror(s), ts_last_error(), ts_strerror(code), needle);
  if (s == TS_OK) ts__st_free(st);
  free(img);
}

static void test_parse(void) {
  float a[64];
  uint16_t h[4], b[6];
  for (int i = 0; i < 64; i++) a[i] = (float)i * 0.25f - 3.0f;
  for (int i = 0; i < 4; i++) h[i] = ts_f32_to_f16((float)i + 0.5f);
  for (int i = 0; i < 6; i++) b[i] = ts_f32_to_bf16(-(float)i * 1.5f);
  ent e[] = {{"w", "F32", 2, {2, 32}, a, sizeof a},
             {"norm", "F16", 1, {4}, h, sizeof h},
             {"b.x", "BF16", 2, {3, 2}, b, sizeof b},
             {"empty", "F32", 2, {0, 5}, NULL, 0},
             {"scalar", "F32", 0, {0}, a, 4}};
  size_t n;
  uint8_t *img = st_image(e, 5, "{\"format\":\"pt\"}", &n);
  ts__st *st;
  CHECK_OK(ts__st_parse(img, n, "ok.safetensors", &st));
  if (st) {
    CHECK(st->n == 5 && st->n_meta == 1, "n %lld meta %lld", (long long)st->n, (long long)st->n_meta);
    const ts__st_tensor *w = ts__st_find(st, "w"), *no = ts__st_find(st, "norm"), *bx = ts__st_find(st, "b.x"),
                        *em = ts__st_find(st, "empty"), *sc = ts__st_find(st, "scalar");
    CHECK(w && no && bx && em && sc && !ts__st_find(st, "missing"), "find");
    if (w && no && bx && em && sc) {
      CHECK(w->dtype == TS__ST_F32 && w->n_dims == 2 && w->shape[0] == 2 && w->shape[1] == 32 && w->nelem == 64 &&
                w->nbytes == 256 && w->offset == 0,
            "w fields");
      CHECK(no->dtype == TS__ST_F16 && no->n_dims == 1 && no->nelem == 4 && no->offset == 256, "norm fields");
      CHECK(bx->dtype == TS__ST_BF16 && bx->nelem == 6 && bx->offset == 264, "b.x fields");
      CHECK(em->nelem == 0 && em->nbytes == 0, "empty fields");
      CHECK(sc->n_dims == 0 && sc->nelem == 1 && sc->nbytes == 4, "scalar fields");
      float x[64];
      ts__st_to_f32(w, 0, 64, x);
      CHECK(!memcmp(x, a, sizeof a), "f32 values");
      ts__st_to_f32(no, 1, 3, x);
      CHECK(x[0] == 1.5f && x[1] == 2.5f && x[2] == 3.5f, "f16 values %g %g %g", (double)x[0], (double)x[1], (double)x[2]);
      ts__st_to_f32(bx, 0, 6, x);
      CHECK(x[0] == 0 && x[1] == -1.5f && x[5] == -7.5f, "bf16 values");
    }
    ts__st_free(st);
  }
  free(img);

  /* from a file, and a file that is missing */
  char path[2048];
  tst_tmp_path(path, sizeof path, "convert_parse.safetensors");
  img = st_image(e, 3, NULL, &n);
  write_file(path, img, n);
  CHECK_OK(ts__st_read_file(path, &st));
  if (st) CHECK(st->n == 3 && st->owned, "file read");
  ts__st_free(st);
  free(img);
  unlink(path);
  CHECK_STATUS(ts__st_read_file(path, &st), TS_ERR_NOT_FOUND);

  /* an empty header and gaps between tensors are fine */
  img = st_raw("{}", NULL, 0, &n);
  CHECK_OK(ts__st_parse(img, n, "empty.safetensors", &st));
  if (st) CHECK(st->n == 0, "no tensors");
  ts__st_free(st);
  free(img);
  img = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", NULL, 16, &n);
  CHECK_OK(ts__st_parse(img, n, "gap.safetensors", &st));
  ts__st_free(st);
  free(img);
}

static void test_reject(void) {
  const char *T = "\"dtype\":\"F32\",\"shape\":[2]";
  char h[512];
  /* header length: shorter than 8 bytes, past the end, absurdly large */
  uint8_t tiny[5] = {1, 0, 0, 0, 0};
  ts__st *st = NULL;
  CHECK_STATUS(ts__st_parse(tiny, sizeof tiny, "t.safetensors", &st), TS_ERR_TRUNCATED);
  size_t n;
  uint8_t *img = st_raw("{}", NULL, 0, &n);
  img[0] = 200; /* declares 200 bytes, 8 follow */
  CHECK_ERR_CONTAINS(ts__st_parse(img, n, "t.safetensors", &st), "header length 200");
  img[7] = 0x40; /* 2^62 + 200 */
  CHECK_STATUS(ts__st_parse(img, n, "t.safetensors", &st), TS_ERR_FORMAT);
  CHECK(strstr(ts_last_error(), "exceeds"), "%s", ts_last_error());
  free(img);
  /* the JSON */
  reject("{\"a\": ", 0, TS_ERR_FORMAT, "invalid JSON");
  reject("[1, 2]", 0, TS_ERR_FORMAT, "expected a JSON object");
  reject("{\"a\": 3}", 0, TS_ERR_FORMAT, "'a': expected an object");
  /* fields */
  reject("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, TS_ERR_FORMAT, "missing field 'dtype'");
  reject("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, TS_ERR_FORMAT, "missing field 'shape'");
  snprintf(h, sizeof h, "{\"a\":{%s}}", T);
  reject(h, 8, TS_ERR_FORMAT, "missing field 'data_offsets'");
  reject("{\"big.w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, TS_ERR_UNSUPPORTED, "'big.w': dtype 'I64'");
  reject("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, TS_ERR_FORMAT, "dtype: expected a string");
  reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, TS_ERR_UNSUPPORTED, "5 dims");
  reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, TS_ERR_FORMAT, "shape[0]");
  reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,4]}}", 4, TS_ERR_FORMAT, "shape[0]");
  reject("{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, TS_ERR_FORMAT, "shape: expected an array");
  reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,9007199254740992],\"data_offsets\":[0,4]}}", 4,
         TS_ERR_OVERFLOW, "overflows");
  reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, TS_ERR_FORMAT, "not an integer");
  snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0]}}", T);
  reject(h, 8, TS_ERR_FORMAT, "data_offsets: expected an array [begin, end]");
  snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,\"8\"]}}", T);
  reject(h, 8, TS_ERR_FORMAT, "data_offsets[1]");
  snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[8,0]}}", T);
  reject(h, 8, TS_ERR_FORMAT, "end before begin");
  /* shape x dtype against the byte range */
  snprintf(h, sizeof h, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}");
  reject(h, 12, TS_ERR_SHAPE, "shape [3] F32 needs 12 bytes");
  snprintf(h, sizeof h, "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,4]}}");
  reject(h, 8, TS_ERR_SHAPE, "needs 8 bytes");
  /* offsets past the buffer */
  snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[8,16]}}", T);
  reject(h, 12, TS_ERR_TRUNCATED, "past the data buffer's 12 bytes");
  /* overlap and duplicates */
  snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[4,12]}}", T, T);
  reject(h, 12, TS_ERR_FORMAT, "overlap");
  snprintf(h, sizeof h,
           "{\"c\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]},\"a\":{%s,\"data_offsets\":[24,32]},"
           "\"b\":{%s,\"data_offsets\":[16,24]}}",
           T, T);
  reject(h, 32, TS_ERR_FORMAT, "overlap"); /* b lies inside c, found after sorting by offset */
  snprintf(h, sizeof h, "{\"a\":{%s,\"data_offsets\":[0,8]},\"a\":{%s,\"data_offsets\":[8,16]}}", T, T);
  reject(h, 16, TS_ERR_FORMAT, "duplicate tensor name 'a'");
  /* __metadata__ */
  reject("{\"__metadata__\":{\"k\":1}}", 0, TS_ERR_FORMAT, "__metadata__ 'k'");
  reject("{\"__metadata__\":[]}", 0, TS_ERR_FORMAT, "__metadata__: expected an object");
}

/* ---- conversion ---------------------------------------------------------------------------- */

/* The metadata JSON of a tiny ReLU llama with a GPT-2 byte-level vocabulary: <|endoftext|>, the 256
 * byte tokens, and merges "x y" -> "xy" of letter pairs up to n_vocab. */
static char *tiny_meta(int n_layer, int d, int n_ff, int n_vocab, const char *extra_kv_json) {
  cJSON *kv = cJSON_CreateArray();
#define KV(k, t, v)                                    \
  do {                                                 \
    cJSON *e = cJSON_CreateArray();                    \
    cJSON_AddItemToArray(e, cJSON_CreateString(k));    \
    cJSON_AddItemToArray(e, cJSON_CreateString(t));    \
    cJSON_AddItemToArray(e, v);                        \
    cJSON_AddItemToArray(kv, e);                       \
  } while (0)
  KV("general.architecture", "str", cJSON_CreateString("llama"));
  KV("general.name", "str", cJSON_CreateString("tiny-relu"));
  KV("llama.block_count", "u32", cJSON_CreateNumber(n_layer));
  KV("llama.embedding_length", "u32", cJSON_CreateNumber(d));
  KV("llama.feed_forward_length", "u32", cJSON_CreateNumber(n_ff));
  KV("llama.attention.head_count", "u32", cJSON_CreateNumber(4));
  KV("llama.attention.head_count_kv", "u32", cJSON_CreateNumber(2));
  KV("llama.context_length", "u32", cJSON_CreateNumber(128));
  KV("llama.rope.freq_base", "f32", cJSON_CreateNumber(10000.0));
  KV("llama.attention.layer_norm_rms_epsilon", "f32", cJSON_CreateNumber(1e-5));
  KV("tessera.ffn_activation", "str", cJSON_CreateString("relu"));
  KV("tokenizer.ggml.model", "str", cJSON_CreateString("gpt2"));
  KV("tokenizer.ggml.pre", "str", cJSON_CreateString("gpt2"));
  cJSON *tok = cJSON_CreateArray(), *types = cJSON_CreateArray(), *merges = cJSON_CreateArray();
  cJSON_AddItemToArray(tok, cJSON_CreateString("<|endoftext|>"));
  cJSON_AddItemToArray(types, cJSON_CreateNumber(3));
  for (int b = 0; b < 256; b++) {
    char s[8];
    s[ts_utf8_put(ts__byte_to_cp((uint8_t)b), s)] = 0;
    cJSON_AddItemToArray(tok, cJSON_CreateString(s));
    cJSON_AddItemToArray(types, cJSON_CreateNumber(1));
  }
  for (int i = 0; 257 + i < n_vocab; i++) {
    char m[4] = {(char)('a' + i / 7), ' ', (char)('a' + i % 7), 0}, t[3] = {m[0], m[2], 0};
    cJSON_AddItemToArray(merges, cJSON_CreateString(m));
    cJSON_AddItemToArray(tok, cJSON_CreateString(t));
    cJSON_AddItemToArray(types, cJSON_CreateNumber(1));
  }
  KV("tokenizer.ggml.tokens", "str[]", tok);
  KV("tokenizer.ggml.token_type", "i32[]", types);
  KV("tokenizer.ggml.merges", "str[]", merges);
  KV("tokenizer.ggml.bos_token_id", "u32", cJSON_CreateNumber(0));
  KV("tokenizer.ggml.eos_token_id", "u32", cJSON_CreateNumber(0));
  KV("tokenizer.ggml.add_bos_token", "bool", cJSON_CreateTrue());
#undef KV
  if (extra_kv_json) {
    cJSON *x = cJSON_Parse(extra_kv_json);
    while (x && x->child) cJSON_AddItemToArray(kv, cJSON_DetachItemViaPointer(x, x->child));
    cJSON_Delete(x);
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddItemToObject(root, "kv", kv);
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}

typedef struct tiny {
  int n_layer, d, n_ff, n_vocab;
  int n;         /* tensors */
  ent e[32];
  char names[32][48];
  float *data[32];
} tiny;

static void tiny_add(tiny *t, const char *name, int64_t rows, int64_t cols, float scale, float offset, ts_rng *r) {
  int i = t->n++;
  snprintf(t->names[i], sizeof t->names[i], "%s", name);
  size_t n = (size_t)((rows ? rows : 1) * cols);
  t->data[i] = malloc(n * sizeof(float));
  for (size_t k = 0; k < n; k++) t->data[i][k] = offset + scale * ts_rng_normal(r);
  t->e[i] = (ent){t->names[i], "F32", rows ? 2 : 1, {rows ? rows : cols, cols}, t->data[i], n * sizeof(float)};
}

/* 2 layers, d 64, n_ff 128, vocab 300; rows 0 adds a 1-D tensor of `cols`. */
static void tiny_make(tiny *t) {
  *t = (tiny){.n_layer = 2, .d = 64, .n_ff = 128, .n_vocab = 300};
  ts_rng r;
  ts_rng_seed(&r, 5);
  const int d = t->d, f = t->n_ff;
  tiny_add(t, "token_embd.weight", t->n_vocab, d, 0.5f, 0, &r);
  tiny_add(t, "output_norm.weight", 0, d, 0.1f, 1, &r);
  for (int l = 0; l < t->n_layer; l++) {
    char nm[48];
#define A(s, rows, cols, sc, off) (snprintf(nm, sizeof nm, "blk.%d." s, l), tiny_add(t, nm, rows, cols, sc, off, &r))
    A("attn_norm.weight", 0, d, 0.1f, 1);
    A("ffn_norm.weight", 0, d, 0.1f, 1);
    A("attn_q.weight", d, d, 0.12f, 0);
    A("attn_k.weight", 32, d, 0.12f, 0);
    A("attn_v.weight", 32, d, 0.3f, 0);
    A("attn_output.weight", d, d, 0.1f, 0);
    A("ffn_gate.weight", f, d, 0.2f, 0);
    A("ffn_up.weight", f, d, 0.2f, 0);
    A("ffn_down.weight", d, f, 0.1f, 0);
#undef A
  }
}

static void tiny_free(tiny *t) {
  for (int i = 0; i < t->n; i++) free(t->data[i]);
}

/* Writes the safetensors and meta files of t (meta from tiny_meta with extra kv). */
static void tiny_files(const tiny *t, const char *st_path, const char *meta_path, const char *extra_kv) {
  size_t n;
  uint8_t *img = st_image(t->e, t->n, NULL, &n);
  write_file(st_path, img, n);
  free(img);
  char *m = tiny_meta(t->n_layer, t->d, t->n_ff, t->n_vocab, extra_kv);
  write_file(meta_path, m, strlen(m));
  free(m);
}

static void test_tiny_q8(void) {
  char st_path[2048], meta_path[2048], out[2048];
  tst_tmp_path(st_path, sizeof st_path, "convert_tiny.safetensors");
  tst_tmp_path(meta_path, sizeof meta_path, "convert_tiny.meta.json");
  tst_tmp_path(out, sizeof out, "convert_tiny_q8_0.gguf");
  tiny t;
  tiny_make(&t);
  tiny_files(&t, st_path, meta_path, NULL);
  ts_llm_convert_report rep;
  CHECK_OK(ts_llm_convert(st_path, meta_path, TS_QT_Q8_0, out, &rep));
  /* 2 + 9 per layer tensors: the 2-D ones (1 + 7 per layer) in Q8_0, the norms in F32 */
  CHECK(rep.tensors == 20 && rep.type_tensors[TS_QT_Q8_0] == 15 && rep.type_tensors[TS_QT_F32] == 5,
        "report: %lld tensors, %lld q8_0, %lld f32", (long long)rep.tensors, (long long)rep.type_tensors[TS_QT_Q8_0],
        (long long)rep.type_tensors[TS_QT_F32]);
  int64_t params = 0;
  for (int i = 0; i < t.n; i++) params += (int64_t)(t.e[i].nbytes / 4);
  CHECK(rep.params == params && rep.kv == 21 && rep.bytes > 0, "params %lld (want %lld), kv %lld", (long long)rep.params,
        (long long)params, (long long)rep.kv);
  CHECK(rep.type_bytes[TS_QT_F32] == 5 * 64 * 4, "f32 bytes %llu", (unsigned long long)rep.type_bytes[TS_QT_F32]);

  ts_gguf *g = NULL;
  CHECK_OK(ts_gguf_open(&g, out));
  if (g) {
    CHECK(ts_gguf_file_size(g) == rep.bytes, "file size %zu vs report %llu", ts_gguf_file_size(g), (unsigned long long)rep.bytes);
    const char *s;
    size_t len;
    uint32_t u;
    float f;
    bool b;
    ts_gguf_vtype et;
    uint64_t cnt;
    CHECK(ts_gguf_get_str(g, "tessera.ffn_activation", &s, &len) == TS_OK && len == 4 && !memcmp(s, "relu", 4), "act");
    CHECK(ts_gguf_get_u32(g, "llama.block_count", &u) == TS_OK && u == 2, "block_count");
    CHECK(ts_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) == TS_OK && f == 1e-5f, "eps");
    CHECK(ts_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == TS_OK && b, "add_bos");
    CHECK(ts_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &cnt) == TS_OK && et == TS_GGUF_STRING && cnt == 300, "tokens");
    CHECK(ts_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &cnt) == TS_OK && et == TS_GGUF_I32 && cnt == 300, "types");
    CHECK(ts_gguf_arr_str(g, "tokenizer.ggml.tokens", 0, &s, &len) == TS_OK && len == 13, "token 0");
    CHECK(ts_gguf_get_u32(g, "general.file_type", &u) == TS_OK && u == 7, "file_type");
    CHECK(ts_gguf_get_u32(g, "general.quantization_version", &u) == TS_OK && u == 2, "quantization_version");
    CHECK(ts_gguf_tensor_count(g) == t.n, "tensor count");
    /* Q8_0 per block of 32: d = max|x| / 127 is stored as fp16(d) and q = round(x / d), so
     * |x - fp16(d) q| <= |x - d q| + |q| |d - fp16(d)| <= d/2 + 127 |d - fp16(d)| (quant.h), plus
     * a relative 1e-6 of d for the float arithmetic of the check. Norms stay F32: exact. */
    double worst = 0;
    for (int i = 0; i < t.n; i++) {
      const ts_gguf_tensor *gt;
      if (ts_gguf_find_tensor(g, t.names[i], &gt) != TS_OK) {
        CHECK(0, "tensor %s missing", t.names[i]);
        continue;
      }
      const ent *e = &t.e[i];
      int64_t cols = e->nd == 2 ? e->shape[1] : e->shape[0], rows = e->nd == 2 ? e->shape[0] : 1;
      CHECK(gt->ne[0] == cols && (e->nd == 1 || gt->ne[1] == rows) && gt->n_dims == e->nd, "%s dims", t.names[i]);
      CHECK(gt->type == (e->nd == 2 ? TS_QT_Q8_0 : TS_QT_F32), "%s type %s", t.names[i], ts_qtype_name(gt->type));
      float *deq = malloc((size_t)(rows * cols) * sizeof *deq);
      size_t rb;
      ts_qtype_row_bytes(gt->type, cols, &rb);
      for (int64_t r = 0; r < rows; r++)
        ts_quant_dequantize_row(gt->type, (const uint8_t *)gt->data + (size_t)r * rb, deq + r * cols, cols);
      int bad = 0;
      for (int64_t k0 = 0; k0 < rows * cols; k0 += 32) {
        const float *x = t.data[i] + k0;
        int64_t m = rows * cols - k0 < 32 ? rows * cols - k0 : 32;
        double amax = 0;
        for (int64_t k = 0; k < m; k++) amax = fmax(amax, fabs(x[k]));
        double dd = amax / 127, tol = gt->type == TS_QT_F32 ? 0
                                         : dd / 2 + 127 * fabs(dd - ts_f16_to_f32(ts_f32_to_f16((float)dd))) + 1e-6 * dd;
        for (int64_t k = 0; k < m; k++) {
          double err = fabs((double)x[k] - deq[k0 + k]);
          worst = fmax(worst, dd > 0 ? err / dd : err);
          if (err > tol) bad++;
        }
      }
      CHECK(bad == 0, "%s: %d values outside the Q8_0 bound", t.names[i], bad);
      free(deq);
    }
    printf("tiny q8_0: worst error %.3f of the block scale (bound 0.5 + the fp16 rounding of the scale)\n", worst);
    ts_gguf_close(g);
  }

  /* The converted model loads as a ReLU llama and evaluates to finite logits. */
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, out));
  if (m) {
    const ts_llm_config *c = ts_llm_model_config(m);
    CHECK(c->n_layer == 2 && c->d_model == 64 && c->n_ff == 128 && c->n_vocab == 300 && c->n_head == 4 &&
              c->n_head_kv == 2 && c->tied_output && c->wtype == TS_QT_Q8_0 && c->ffn_act == TS_LLM_ACT_RELU,
          "config: layers %d d %d ff %d vocab %d act %s", c->n_layer, c->d_model, c->n_ff, c->n_vocab, ts_llm_act_name(c->ffn_act));
    ts_llm_state *s = NULL;
    CHECK_OK(ts_llm_state_create(&s, m, NULL, 16, 8));
    if (s) {
      int32_t toks[5] = {0, 72, 101, 108, 257};
      float *logits = malloc(300 * sizeof *logits);
      CHECK_OK(ts_llm_eval(s, toks, 5, 0, TS_LLM_LOGITS_LAST, logits));
      int finite = 1;
      for (int i = 0; i < 300; i++) finite &= isfinite(logits[i]) != 0;
      CHECK(finite, "logits not finite");
      free(logits);
      ts_llm_state_destroy(s);
    }
    ts_llm_model_destroy(m);
  }

  /* the other types: every 2-D tensor in the type (all rows are multiples of 32) */
  const uint32_t types[] = {TS_QT_F32, TS_QT_F16, TS_QT_Q4_0, TS_QT_Q4_1};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    CHECK_OK(ts_llm_convert(st_path, meta_path, types[k], out, &rep));
    CHECK(rep.type_tensors[types[k]] == (types[k] == TS_QT_F32 ? 20 : 15), "%s: %lld tensors of the type",
          ts_qtype_name(types[k]), (long long)rep.type_tensors[types[k]]);
    CHECK(rep.kv == (types[k] == TS_QT_F32 || types[k] == TS_QT_F16 ? 20 : 21), "%s: kv %lld", ts_qtype_name(types[k]),
          (long long)rep.kv);
    CHECK_OK(ts_gguf_open(&g, out));
    ts_gguf_close(g);
  }
  /* F32 output is a copy of the input */
  CHECK_OK(ts_llm_convert(st_path, meta_path, TS_QT_F32, out, NULL));
  if (ts_gguf_open(&g, out) == TS_OK) {
    const ts_gguf_tensor *gt;
    CHECK(ts_gguf_find_tensor(g, "blk.1.ffn_down.weight", &gt) == TS_OK && !memcmp(gt->data, t.data[t.n - 1], gt->nbytes),
          "f32 copy");
    ts_gguf_close(g);
  }
  tiny_free(&t);
  unlink(st_path);
  unlink(meta_path);
  unlink(out);
}

/* F16 and BF16 inputs: exact as F32, and F16 -> F16 keeps every bit. Rows not a multiple of the
 * block, 3-D tensors, scalars and empty tensors stay F32. */
static void test_types(void) {
  char st_path[2048], meta_path[2048], out[2048];
  tst_tmp_path(st_path, sizeof st_path, "convert_types.safetensors");
  tst_tmp_path(meta_path, sizeof meta_path, "convert_types.meta.json");
  tst_tmp_path(out, sizeof out, "convert_types.gguf");
  uint16_t h[2 * 64], b[2 * 64];
  float odd[3 * 40], cube[2 * 2 * 32], sc = 2.5f;
  ts_rng r;
  ts_rng_seed(&r, 9);
  for (int i = 0; i < 128; i++) h[i] = ts_f32_to_f16(ts_rng_normal(&r)), b[i] = ts_f32_to_bf16(100 * ts_rng_normal(&r));
  for (int i = 0; i < 120; i++) odd[i] = ts_rng_normal(&r);
  for (int i = 0; i < 128; i++) cube[i] = ts_rng_normal(&r);
  ent e[] = {{"h", "F16", 2, {2, 64}, h, sizeof h}, {"b", "BF16", 2, {2, 64}, b, sizeof b},
             {"odd", "F32", 2, {3, 40}, odd, sizeof odd}, {"cube", "F32", 3, {2, 2, 32}, cube, sizeof cube},
             {"sc", "F32", 0, {0}, &sc, 4}, {"none", "F32", 2, {0, 32}, NULL, 0}};
  size_t n;
  uint8_t *img = st_image(e, 6, NULL, &n);
  write_file(st_path, img, n);
  free(img);
  const char *meta = "{\"kv\": [[\"general.architecture\", \"str\", \"llama\"], [\"u\", \"u64\", 9007199254740992],"
                     " [\"i\", \"i8\", -128], [\"d\", \"f64\", 0.1], [\"fa\", \"f32[]\", [1.5, -2]],"
                     " [\"ua\", \"u32[]\", []], [\"ba\", \"bool[]\", [true, false]], [\"general.alignment\", \"u32\", 64]]}";
  write_file(meta_path, meta, strlen(meta));
  ts_llm_convert_report rep;
  CHECK_OK(ts_llm_convert(st_path, meta_path, TS_QT_F32, out, &rep));
  ts_gguf *g = NULL;
  if (ts_gguf_open(&g, out) == TS_OK) {
    const ts_gguf_tensor *gh = NULL, *gb = NULL, *go = NULL, *gc = NULL, *gs = NULL, *gn = NULL;
    ts_gguf_find_tensor(g, "h", &gh), ts_gguf_find_tensor(g, "b", &gb), ts_gguf_find_tensor(g, "odd", &go);
    ts_gguf_find_tensor(g, "cube", &gc), ts_gguf_find_tensor(g, "sc", &gs), ts_gguf_find_tensor(g, "none", &gn);
    CHECK(gh && gb && go && gc && gs && gn, "tensors present");
    if (gh && gb && go && gc && gs && gn) {
      int same = 1;
      for (int i = 0; i < 128; i++) {
        float x, y;
        memcpy(&x, (const float *)gh->data + i, 4);
        memcpy(&y, (const float *)gb->data + i, 4);
        same &= x == ts_f16_to_f32(h[i]) && y == ts_bf16_to_f32(b[i]);
      }
      CHECK(gh->type == TS_QT_F32 && gb->type == TS_QT_F32 && same, "f16/bf16 -> f32 exact");
      CHECK(gc->n_dims == 3 && gc->ne[0] == 32 && gc->ne[1] == 2 && gc->ne[2] == 2, "3-D dims reversed");
      CHECK(gs->n_dims == 1 && gs->ne[0] == 1 && *(const float *)gs->data == 2.5f, "scalar as ne {1}");
      CHECK(gn->nelem == 0 && gn->type == TS_QT_F32, "empty tensor");
    }
    CHECK(ts_gguf_alignment(g) == 64, "alignment %zu", ts_gguf_alignment(g));
    uint64_t u = 0;
    int64_t i8 = 0, ib = 0;
    double dv = 0, fa = 0;
    ts_gguf_vtype et;
    uint64_t cnt = 9;
    CHECK(ts_gguf_get_u64(g, "u", &u) == TS_OK && u == 9007199254740992ull, "u64");
    CHECK(ts_gguf_get_i64(g, "i", &i8) == TS_OK && i8 == -128, "i8");
    CHECK(ts_gguf_get_f64(g, "d", &dv) == TS_OK && dv == 0.1, "f64");
    CHECK(ts_gguf_arr_f64(g, "fa", 1, &fa) == TS_OK && fa == -2, "f32[]");
    CHECK(ts_gguf_get_arr(g, "ua", &et, &cnt) == TS_OK && et == TS_GGUF_U32 && cnt == 0, "empty u32[]");
    CHECK(ts_gguf_arr_int(g, "ba", 0, &ib) == TS_OK && ib == 1, "bool[]");
    uint32_t ft = 9;
    CHECK(ts_gguf_get_u32(g, "general.file_type", &ft) == TS_OK && ft == 0 && ts_gguf_kv_find(g, "general.quantization_version") < 0,
          "f32 file type");
    ts_gguf_close(g);
  } else CHECK(0, "open: %s", ts_last_error());

  /* Q8_0: the 64-wide matrices quantize; odd rows (40), 3-D, scalar, empty stay F32 */
  CHECK_OK(ts_llm_convert(st_path, meta_path, TS_QT_Q8_0, out, &rep));
  CHECK(rep.type_tensors[TS_QT_Q8_0] == 2 && rep.type_tensors[TS_QT_F32] == 4, "q8_0 %lld f32 %lld",
        (long long)rep.type_tensors[TS_QT_Q8_0], (long long)rep.type_tensors[TS_QT_F32]);
  /* F16 from F16: every bit kept (f16 -> f32 -> f16 is exact) */
  CHECK_OK(ts_llm_convert(st_path, meta_path, TS_QT_F16, out, &rep));
  if (ts_gguf_open(&g, out) == TS_OK) {
    const ts_gguf_tensor *gh;
    CHECK(ts_gguf_find_tensor(g, "h", &gh) == TS_OK && gh->type == TS_QT_F16 && !memcmp(gh->data, h, sizeof h),
          "f16 -> f16 bit exact");
    ts_gguf_close(g);
  }
  unlink(st_path);
  unlink(meta_path);
  unlink(out);
}

/* A failed conversion names the cause and leaves no output file. */
static void convert_fails(const char *st_path, const char *meta_path, const char *meta, uint32_t wtype, ts_status code,
                          const char *needle) {
  char out[2048];
  tst_tmp_path(out, sizeof out, "convert_fail.gguf");
  unlink(out);
  if (meta) write_file(meta_path, meta, strlen(meta));
  ts_llm_convert_report rep;
  rep.tensors = 99;
  ts_status s = ts_llm_convert(st_path, meta_path, wtype, out, &rep);
  CHECK(s == code && strstr(ts_last_error(), needle) && rep.tensors == 0, "meta %s: got %s (%s), want %s mentioning '%s'",
        meta ? meta : "-", ts_strerror(s), ts_last_error(), ts_strerror(code), needle);
  CHECK(access(out, F_OK) != 0, "a failed conversion left %s", out);
}

static void test_convert_errors(void) {
  char st_path[2048], meta_path[2048], nan_path[2048];
  tst_tmp_path(st_path, sizeof st_path, "convert_err.safetensors");
  tst_tmp_path(meta_path, sizeof meta_path, "convert_err.meta.json");
  tst_tmp_path(nan_path, sizeof nan_path, "convert_nan.safetensors");
  float w[64] = {0}, big[64] = {0};
  w[3] = NAN;
  big[5] = 1e6f;
  ent e[] = {{"w", "F32", 2, {2, 32}, big, sizeof big}};
  size_t n;
  uint8_t *img = st_image(e, 1, NULL, &n);
  write_file(st_path, img, n);
  free(img);
  e[0].data = w;
  img = st_image(e, 1, NULL, &n);
  write_file(nan_path, img, n);
  free(img);
#define M(body) "{\"kv\": [" body "]}"
  convert_fails(st_path, meta_path, M("[\"a\", \"u32\", -1]"), TS_QT_Q8_0, TS_ERR_FORMAT, "kv[0] 'a': -1 is not an integer in u32");
  convert_fails(st_path, meta_path, M("[\"a\", \"u8\", 1.5]"), TS_QT_Q8_0, TS_ERR_FORMAT, "kv[0] 'a'");
  convert_fails(st_path, meta_path, M("[\"a\", \"u64\", 1e17]"), TS_QT_Q8_0, TS_ERR_FORMAT, "u64's range");
  convert_fails(st_path, meta_path, M("[\"a\", \"f32\", 1e39]"), TS_QT_Q8_0, TS_ERR_OVERFLOW, "out of f32 range");
  convert_fails(st_path, meta_path, M("[\"a\", \"str\", \"x\"], [\"b\", \"q99\", 1]"), TS_QT_Q8_0, TS_ERR_FORMAT,
                "kv[1] 'b': unknown type 'q99'");
  convert_fails(st_path, meta_path, M("[\"a\", \"str\", 3]"), TS_QT_Q8_0, TS_ERR_FORMAT, "expected a string");
  convert_fails(st_path, meta_path, M("[\"a\", \"bool\", 1]"), TS_QT_Q8_0, TS_ERR_FORMAT, "expected true or false");
  convert_fails(st_path, meta_path, M("[\"a\", \"str[]\", [\"x\", 2]]"), TS_QT_Q8_0, TS_ERR_FORMAT, "element 1");
  convert_fails(st_path, meta_path, M("[\"a\", \"i32[]\", [1, \"2\"]]"), TS_QT_Q8_0, TS_ERR_FORMAT, "'a' element 1");
  convert_fails(st_path, meta_path, M("[\"a\", \"i32[]\", 5]"), TS_QT_Q8_0, TS_ERR_FORMAT, "expected an array");
  convert_fails(st_path, meta_path, M("[\"a\", \"u32\"]"), TS_QT_Q8_0, TS_ERR_FORMAT, "kv[0]: expected [key, type, value]");
  convert_fails(st_path, meta_path, M("[\"\", \"u32\", 1]"), TS_QT_Q8_0, TS_ERR_FORMAT, "non-empty string");
  convert_fails(st_path, meta_path, M("[\"a\", \"u32\", 1], [\"a\", \"u32\", 2]"), TS_QT_Q8_0, TS_ERR_INVALID_ARG,
                "duplicate key 'a'");
  convert_fails(st_path, meta_path, M("[\"general.alignment\", \"u32\", 48]"), TS_QT_Q8_0, TS_ERR_FORMAT, "power of two");
  convert_fails(st_path, meta_path, "{\"kv\": 3}", TS_QT_Q8_0, TS_ERR_FORMAT, "'kv': expected an array");
  convert_fails(st_path, meta_path, "{}", TS_QT_Q8_0, TS_ERR_NOT_FOUND, "missing key 'kv'");
  convert_fails(st_path, meta_path, "{\"kv\": [", TS_QT_Q8_0, TS_ERR_FORMAT, "invalid JSON");
  /* the weights: a value f16 cannot hold, a NaN in a block to quantize, a bad type, missing files */
  convert_fails(st_path, meta_path, M(""), TS_QT_F16, TS_ERR_FORMAT, "tensor 'w': element 5 is 1e+06");
  convert_fails(nan_path, meta_path, NULL, TS_QT_Q4_0, TS_ERR_FORMAT, "element 3 is nan");
  convert_fails(st_path, meta_path, NULL, TS_QT_Q5_0, TS_ERR_INVALID_ARG, "q5_0");
  convert_fails("/nonexistent/x.safetensors", meta_path, NULL, TS_QT_Q8_0, TS_ERR_NOT_FOUND, "/nonexistent/x.safetensors");
  convert_fails(st_path, "/nonexistent/m.json", NULL, TS_QT_Q8_0, TS_ERR_NOT_FOUND, "/nonexistent/m.json");
#undef M
  /* the NaN file converts to F32 as it is (nothing is rounded there) */
  char out[2048];
  tst_tmp_path(out, sizeof out, "convert_nan.gguf");
  CHECK_OK(ts_llm_convert(nan_path, meta_path, TS_QT_F32, out, NULL));
  unlink(out);
  unlink(st_path);
  unlink(nan_path);
  unlink(meta_path);
}

int main(void) {
  test_parse();
  test_reject();
  test_types();
  test_tiny_q8();
  test_convert_errors();
  return tst_finish();
}
