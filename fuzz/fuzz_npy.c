/* libFuzzer harness for the .npy reader: any input must parse or fail cleanly (no crash, leak,
 * UB, or error without a message), and whatever parses must survive re-encoding with the
 * writer's header and parse back to the same dtype, shape and bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts_tensor t;
  ts_status s = ts_npy_read_mem(data, size, "fuzz.npy", &t);
  if (s != TS_OK) {
    if (!ts_last_error()[0] || t.data) __builtin_trap();
    return 0;
  }
  size_t bytes = ts_tensor_nbytes(&t);
  char hdr[TS__NPY_HEADER_MAX];
  size_t hlen;
  if (ts__npy_format_header(t.dtype, t.ndim, t.shape, hdr, &hlen) != TS_OK) __builtin_trap();
  unsigned char *img = malloc(hlen + bytes + 1);
  if (!img) __builtin_trap();
  memcpy(img, hdr, hlen);
  if (bytes) memcpy(img + hlen, t.data, bytes);
  ts_tensor u;
  if (ts_npy_read_mem(img, hlen + bytes, "re.npy", &u) != TS_OK) __builtin_trap();
  if (u.dtype != t.dtype || u.ndim != t.ndim || ts_tensor_nbytes(&u) != bytes) __builtin_trap();
  for (int d = 0; d < t.ndim; d++)
    if (u.shape[d] != t.shape[d]) __builtin_trap();
  if (bytes && memcmp(u.data, t.data, bytes) != 0) __builtin_trap();
  ts_tensor_free(&u);
  free(img);
  ts_tensor_free(&t);
  return 0;
}
