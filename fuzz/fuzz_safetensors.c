/* libFuzzer harness for the safetensors reader: any input must parse or fail cleanly (no crash,
 * leak, UB, or error without a message), and whatever parses must describe tensors that lie inside
 * the image, hold exactly their shape's bytes, overlap no other tensor, and read back as floats. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/safetensors_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts__st *st = (ts__st *)1;
  ts_status s = ts__st_parse(data, size, "fuzz.safetensors", &st);
  if (s != TS_OK) {
    if (!ts_last_error()[0] || st) __builtin_trap();
    return 0;
  }
  if (!st || st->data_offset > size) __builtin_trap();
  const uint8_t *buf = data + st->data_offset, *end = data + size;
  for (int64_t i = 0; i < st->n; i++) {
    const ts__st_tensor *t = &st->t[i];
    if (t->n_dims < 0 || t->n_dims > TS__ST_MAX_DIMS || t->nelem < 0) __builtin_trap();
    int64_t ne = 1;
    for (int d = 0; d < t->n_dims; d++) ne *= t->shape[d];
    if (ne != t->nelem || t->nbytes != (size_t)t->nelem * ts__st_dtype_size(t->dtype)) __builtin_trap();
    if (t->data != buf + t->offset || t->nbytes > (size_t)(end - t->data)) __builtin_trap();
    if (ts__st_find(st, t->name) == NULL) __builtin_trap();
    for (int64_t j = 0; j < i; j++) { /* inputs are small (-max_len): a quadratic check is fine here */
      const ts__st_tensor *u = &st->t[j];
      if (!strcmp(u->name, t->name)) __builtin_trap();
      if (t->nbytes && u->nbytes && t->offset < u->offset + u->nbytes && u->offset < t->offset + t->nbytes)
        __builtin_trap();
    }
    float *x = malloc((size_t)t->nelem * sizeof *x + 1);
    if (!x) __builtin_trap();
    if (t->nelem) ts__st_to_f32(t, 0, t->nelem, x);
    free(x);
  }
  ts__st_free(st);
  return 0;
}
