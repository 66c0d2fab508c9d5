/* libFuzzer harness for the activation-predictor files (llm-predictor, a GGUF container): any input
 * that opens as GGUF goes through ts__predictor_from_gguf with the file's own shapes (no model:
 * every field, range and tensor check runs) and must load or fail cleanly with a message; what
 * loads is saved again and must load back with the same knobs. Seeds: fuzz/seeds/llm_pred. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm/llm_pred_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  void *img = aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (!img) __builtin_trap();
  memcpy(img, data, size);
  ts_gguf *g = NULL;
  if (ts_gguf_open_mem(&g, img, size, "fuzz.gguf") != TS_OK) {
    free(img);
    return 0;
  }
  ts_llm_predictor *p = NULL;
  ts_status st = ts__predictor_from_gguf(g, "fuzz.gguf", NULL, &p);
  if (st != TS_OK && (!ts_last_error()[0] || p)) __builtin_trap();
  if (st == TS_OK) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_llm_pred.%d.gguf", (int)getpid());
    if (ts_llm_predictor_save(p, path) != TS_OK) __builtin_trap();
    ts_gguf *g2 = NULL;
    ts_llm_predictor *q = NULL;
    if (ts_gguf_open(&g2, path) != TS_OK || ts__predictor_from_gguf(g2, path, NULL, &q) != TS_OK) __builtin_trap();
    for (int l = 0; l < ts_llm_predictor_n_layer(p); l++) {
      const ts_llm_pred_layer *a = ts_llm_predictor_layer_const(p, l), *b = ts_llm_predictor_layer_const(q, l);
      if (a->alpha != b->alpha || a->tau != b->tau || a->k != b->k) __builtin_trap();
    }
    ts_llm_predictor_destroy(q);
    ts_gguf_close(g2);
    unlink(path);
    ts_llm_predictor_destroy(p);
  }
  ts_gguf_close(g);
  free(img);
  return 0;
}
