/* libFuzzer harness for the LLM model loader on top of the GGUF reader: any input that opens as
 * GGUF goes through ts_llm_model_from_gguf (architecture metadata, every tensor's presence, shape
 * and type, the tokenizer's vocabulary, merges and scores) and must bind or fail cleanly (no
 * crash, leak or UB, and an error message). A model that binds is run: a short text is tokenized
 * and detokenized, and two tokens are evaluated (a 2-token prefill, then a 1-token decode) on
 * one thread with a 4-position cache, so the forward pass meets whatever shapes the loader let in.
 * Seeds: the unit tests' tiny Q4_0 models (fuzz/seeds/llm). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/gguf.h"
#include "tessera/llm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(ts_llm_model *m) {
  const ts_llm_config *c = ts_llm_model_config(m);
  const ts_llm_vocab *v = ts_llm_model_vocab(m);
  int32_t ids[64];
  size_t n = 0;
  static const char text[] = "Hello, world! 12 ab\n<|im_start|>";
  ts_status st = ts_llm_tokenize(v, text, sizeof text - 1, true, true, ids, 64, &n);
  if (st != TS_OK && !ts_last_error()[0]) __builtin_trap();
  if (st == TS_OK) {
    char *out = NULL;
    size_t len = 0;
    st = ts_llm_detokenize(v, ids, n, true, &out, &len);
    if (st != TS_OK && !ts_last_error()[0]) __builtin_trap();
    free(out);
  }
  if ((int64_t)c->n_vocab * 3 > (1 << 24)) return; /* logits buffer bound */
  ts_context *ctx = NULL;
  ts_llm_state *s = NULL;
  if (ts_context_create(&ctx, 1) != TS_OK) __builtin_trap();
  st = ts_llm_state_create(&s, m, ctx, 4, 2);
  if (st != TS_OK && !ts_last_error()[0]) __builtin_trap();
  if (st == TS_OK) {
    float *logits = malloc((size_t)c->n_vocab * 2 * sizeof *logits);
    if (!logits) __builtin_trap();
    const int32_t tok[3] = {0, (int32_t)(c->n_vocab > 1), (int32_t)(c->n_vocab - 1)};
    if (ts_llm_eval(s, tok, 2, 0, TS_LLM_LOGITS_ALL, logits) != TS_OK) __builtin_trap();
    if (ts_llm_eval(s, tok + 2, 1, 2, TS_LLM_LOGITS_LAST, logits) != TS_OK) __builtin_trap();
    free(logits);
  }
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a file is mapped at a page boundary: give the image the same alignment */
  void *img = aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (!img) __builtin_trap();
  memcpy(img, data, size);
  ts_gguf *g = NULL;
  if (ts_gguf_open_mem(&g, img, size, "fuzz.gguf") != TS_OK) {
    free(img);
    return 0;
  }
  ts_llm_model *m = NULL;
  ts_status st = ts_llm_model_from_gguf(&m, g, "fuzz.gguf"); /* takes g */
  if (st != TS_OK) {
    if (!ts_last_error()[0] || m) __builtin_trap();
    free(img);
    return 0;
  }
  run(m);
  ts_llm_model_destroy(m);
  free(img);
  return 0;
}
