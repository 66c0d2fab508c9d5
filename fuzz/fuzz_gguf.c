/* libFuzzer harness for the GGUF reader: any input must open or fail cleanly (no crash, leak, UB,
 * or error without a message). Whatever opens is walked completely (every kv through the getters,
 * every tensor's bytes touched, small tensors of kernel types dequantized), re-encoded with the
 * writer and read back to the same metadata count and tensor bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/gguf_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t g_sink;

static void walk(const ts_gguf *g, ts_gguf_writer *w) {
  for (int64_t k = 0; k < ts_gguf_kv_count(g); k++) {
    const char *key;
    ts_gguf_vtype t, et;
    uint64_t n;
    if (ts_gguf_kv_info(g, k, &key, &t, &et, &n) != TS_OK || !key) __builtin_trap();
    const ts__gguf_kv *kv = &g->kv[k];
    bool skip = strcmp(key, "general.alignment") == 0; /* the writer sets it from its alignment */
    if (t == TS_GGUF_ARRAY) {
      for (uint64_t i = 0; i < n && i < 64; i++) {
        int64_t iv;
        double dv;
        const char *s;
        size_t len;
        if (ts_gguf_arr_int_at(g, k, i, &iv) == TS_OK) g_sink += (uint64_t)iv;
        if (ts_gguf_arr_f64_at(g, k, i, &dv) == TS_OK) g_sink += (uint64_t)(dv == dv);
        if (ts_gguf_arr_str_at(g, k, i, &s, &len) == TS_OK && len) g_sink += (uint8_t)s[len - 1];
      }
      if (et == TS_GGUF_STRING) {
        const char **strs = malloc((n ? n : 1) * sizeof *strs);
        size_t *lens = malloc((n ? n : 1) * sizeof *lens);
        if (!strs || !lens) __builtin_trap();
        for (uint64_t i = 0; i < n; i++) {
          strs[i] = kv->strs[i].p;
          lens[i] = kv->strs[i].len;
        }
        if (ts_gguf_writer_add_str_arr(w, key, strs, lens, n) != TS_OK) __builtin_trap();
        free(strs);
        free(lens);
      } else if (et != TS_GGUF_ARRAY) {
        if (ts_gguf_writer_add_arr(w, key, et, kv->raw, n) != TS_OK) __builtin_trap();
      } else {
        uint8_t zero = 0; /* nested arrays are not re-encoded: keep the key count equal */
        if (ts_gguf_writer_add(w, key, TS_GGUF_U8, &zero) != TS_OK) __builtin_trap();
      }
    } else {
      int64_t iv = 0;
      double dv = 0;
      const char *s = NULL;
      size_t len = 0;
      if (ts_gguf_kv_scalar(g, k, &iv, &dv, &s, &len) != TS_OK) __builtin_trap();
      if (t == TS_GGUF_STRING) {
        if (ts_gguf_writer_add_str(w, key, s, len) != TS_OK) __builtin_trap();
      } else if (!skip && ts_gguf_writer_add(w, key, t, kv->raw) != TS_OK) {
        __builtin_trap();
      }
    }
  }
  for (int64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
    const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
    if (!t || !t->name) __builtin_trap();
    if (!t->known) continue;
    if (t->nbytes) g_sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
    if (ts_qtype_has_kernels(t->type) && t->nbytes && t->ne[0] > 0 && t->ne[0] <= 4096) { /* one row */
      float row[4096];
      if (ts_quant_dequantize_row(t->type, t->data, row, t->ne[0]) != TS_OK) __builtin_trap();
    }
    if (ts_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) != TS_OK) __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts_gguf *g = NULL;
  ts_status s = ts_gguf_open_mem(&g, data, size, "fuzz.gguf");
  if (s != TS_OK) {
    if (!ts_last_error()[0] || g) __builtin_trap();
    return 0;
  }
  if (ts_gguf_alignment(g) > 65536) { /* valid for the reader, beyond the writer's range */
    ts_gguf_close(g);
    return 0;
  }
  ts_gguf_writer *w = NULL;
  if (ts_gguf_writer_create(&w, ts_gguf_alignment(g)) != TS_OK) __builtin_trap();
  walk(g, w);
  void *img;
  size_t n;
  if (ts_gguf_writer_to_mem(w, &img, &n) != TS_OK) __builtin_trap();
  ts_gguf *h = NULL;
  if (ts_gguf_open_mem(&h, img, n, "re.gguf") != TS_OK) __builtin_trap();
  /* an explicit general.alignment of 32 is the default: the writer leaves it out */
  int64_t nkv = ts_gguf_kv_count(g) - (ts_gguf_kv_find(g, "general.alignment") >= 0 && ts_gguf_alignment(g) == 32);
  if (ts_gguf_kv_count(h) != nkv) __builtin_trap();
  int64_t known = 0;
  for (int64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
    const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i), *u = NULL;
    if (!t->known) continue;
    known++;
    if (ts_gguf_find_tensor(h, t->name, &u) != TS_OK || u->nbytes != t->nbytes || u->type != t->type ||
        (t->nbytes && memcmp(u->data, t->data, t->nbytes) != 0))
      __builtin_trap();
  }
  if (ts_gguf_tensor_count(h) != known) __builtin_trap();
  ts_gguf_close(h);
  free(img);
  ts_gguf_writer_destroy(w);
  ts_gguf_close(g);
  return 0;
}
