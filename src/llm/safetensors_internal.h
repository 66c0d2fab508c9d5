/* safetensors reader (the converter's input; docs/FORMATS.md, "safetensors").
 *
 * File layout: u64 little-endian header length N, N bytes of JSON
 *   {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]}, ..., "__metadata__": {str: str}}
 * then the data buffer; offsets are relative to the buffer's start. Only F32, F16 and BF16 tensors
 * are read (a file holding any other dtype is TS_ERR_UNSUPPORTED, naming the tensor: the converter
 * would have nothing to do with it). Everything is validated before ts__st_parse returns: the
 * header length (within the file, at most 100 MiB: the reference implementation's limit), the JSON,
 * each entry's fields, at most 4 dims, element count x dtype size == END - BEGIN without overflow,
 * offsets inside the buffer, no two tensors' bytes overlapping and no duplicate names (cJSON keeps
 * both members of a repeated key, so duplicates are looked for explicitly). Gaps between tensors
 * and trailing bytes are accepted (they are harmless to a reader). Errors are ts_status codes whose
 * message names the file and the field; nothing aborts on input. */
#ifndef TS_LLM_SAFETENSORS_INTERNAL_H
#define TS_LLM_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"

#define TS__ST_MAX_DIMS 4
#define TS__ST_MAX_HEADER (100u << 20)

typedef enum ts__st_dtype { TS__ST_F32, TS__ST_F16, TS__ST_BF16 } ts__st_dtype;

typedef struct ts__st_tensor {
  char *name;
  ts__st_dtype dtype;
  int n_dims;                      /* 0..4; 0 is a scalar (one element) */
  int64_t shape[TS__ST_MAX_DIMS];  /* outermost first, as in the file; unused dims are 1 */
  int64_t nelem;
  size_t nbytes;
  uint64_t offset;                 /* from the start of the data buffer */
  const uint8_t *data;             /* inside the image; any alignment (read with memcpy) */
} ts__st_tensor;

typedef struct ts__st {
  ts__st_tensor *t; /* in the header's order */
  int64_t n;
  int64_t n_meta;   /* string pairs in __metadata__ */
  size_t data_offset, size; /* the buffer's offset in the image, the image's size */
  char *owned;      /* the image when ts__st_read_file read it */
} ts__st;

/* "F32", "F16", "BF16"; element size 4 or 2. */
const char *ts__st_dtype_name(ts__st_dtype t);
size_t ts__st_dtype_size(ts__st_dtype t);

/* Parses an image without copying it: img must outlive the handle. `name` is used in messages. */
ts_status ts__st_parse(const uint8_t *img, size_t n, const char *name, ts__st **out);
/* Reads a whole file and parses it; the handle owns the image. */
ts_status ts__st_read_file(const char *path, ts__st **out);
void ts__st_free(ts__st *st);

/* The tensor of that name, or NULL. */
const ts__st_tensor *ts__st_find(const ts__st *st, const char *name);
/* dst[i] = element i + first of t as float, for count elements (exact for every dtype read). */
void ts__st_to_f32(const ts__st_tensor *t, int64_t first, int64_t count, float *dst);

#endif
