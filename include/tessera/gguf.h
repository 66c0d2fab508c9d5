/* tessera GGUF reader and writer (GGUF v3, v2 accepted; little-endian files only).
 *
 * File layout: "GGUF" u32 version, u64 tensor count, u64 kv count; kv pairs (string key, u32 value
 * type, value); tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 GGML type, u64 offset);
 * padding to `general.alignment` (default 32); the data section. Strings are u64 length + bytes.
 * ne[0] is the innermost (contiguous) dimension: a weight matrix [rows][cols] has ne = {cols, rows}.
 *
 * The reader maps the file (read() into memory where mmap fails) and validates everything before
 * ts_gguf_open returns: truncation anywhere, string lengths, counts (allocations are capped by what
 * the remaining bytes could hold), value types, nested arrays (depth <= 4), bool bytes (0/1),
 * duplicate keys and tensor names, n_dims in 1..4, non-negative dims whose product fits, ne[0] a
 * multiple of the type's block size, offsets aligned and inside the file, and no two tensors'
 * bytes overlapping (a writer never produces overlap; accepting it would let one tensor alias
 * another). A tensor of an unknown type id is kept: `known` is false and data/nbytes are NULL/0
 * (its extent cannot be computed, so only its offset is checked). Keys and tensor names are
 * NUL-terminated copies; string values point into the mapping (not NUL-terminated). */
#ifndef TESSERA_GGUF_H
#define TESSERA_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"
#include "tessera/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_gguf_vtype {
  TS_GGUF_U8 = 0,
  TS_GGUF_I8 = 1,
  TS_GGUF_U16 = 2,
  TS_GGUF_I16 = 3,
  TS_GGUF_U32 = 4,
  TS_GGUF_I32 = 5,
  TS_GGUF_F32 = 6,
  TS_GGUF_BOOL = 7,
  TS_GGUF_STRING = 8,
  TS_GGUF_ARRAY = 9,
  TS_GGUF_U64 = 10,
  TS_GGUF_I64 = 11,
  TS_GGUF_F64 = 12,
  TS_GGUF_VTYPE_COUNT
} ts_gguf_vtype;

#define TS_GGUF_MAX_DIMS 4
#define TS_GGUF_DEFAULT_ALIGNMENT 32

/* "u32", "string", "array", ... ("?" for an unknown id). */
const char *ts_gguf_vtype_name(uint32_t t);

/* Thread safety: immutable after open; every getter takes a const handle, only reads, and may run
 * on any number of threads at once. Pointers it returns (keys, names, string values, tensor data)
 * stay valid until ts_gguf_close, which needs the handle to itself. */
typedef struct ts_gguf ts_gguf;

typedef struct ts_gguf_tensor {
  const char *name;
  uint32_t type;   /* GGML type id (ts_qtype) */
  bool known;      /* ts_qtype_known(type): extent and data are valid */
  int n_dims;      /* 1..4 */
  int64_t ne[TS_GGUF_MAX_DIMS]; /* ne[0] innermost; unused dims are 1 */
  int64_t nelem;
  uint64_t offset; /* from the start of the data section */
  size_t nbytes;   /* 0 when !known */
  const void *data; /* inside the mapping; NULL when !known */
} ts_gguf_tensor;

/* Opens and validates a file into *out (the handle first, as every constructor takes it). Errors
 * name the file and the field (TS_ERR_IO, TS_ERR_FORMAT, TS_ERR_TRUNCATED, TS_ERR_UNSUPPORTED for
 * another version or a big-endian file, TS_ERR_OVERFLOW). */
ts_status ts_gguf_open(ts_gguf **out, const char *path);
/* Parses an image in memory without copying it: `data` must outlive the handle. `name` is used in
 * messages. */
ts_status ts_gguf_open_mem(ts_gguf **out, const void *data, size_t size, const char *name);
void ts_gguf_close(ts_gguf *g);

uint32_t ts_gguf_version(const ts_gguf *g);
size_t ts_gguf_alignment(const ts_gguf *g);
size_t ts_gguf_data_offset(const ts_gguf *g); /* byte offset of the data section in the file */
size_t ts_gguf_file_size(const ts_gguf *g);

/* ---- metadata ---------------------------------------------------------------------------- */

int64_t ts_gguf_kv_count(const ts_gguf *g);
/* Index of a key, or -1. */
int64_t ts_gguf_kv_find(const ts_gguf *g, const char *key);
/* Key, type, and for arrays the element type and count (count 1 and elem_type = type otherwise).
 * Any out pointer may be NULL. TS_ERR_INVALID_ARG for an index out of range. */
ts_status ts_gguf_kv_info(const ts_gguf *g, int64_t i, const char **key, ts_gguf_vtype *type,
                          ts_gguf_vtype *elem_type, uint64_t *count);

/* Typed getters by key: TS_ERR_NOT_FOUND naming the key when absent, TS_ERR_DTYPE naming the key
 * and the type found when it does not fit. Integer getters accept any integer type whose value fits
 * the requested range (a u32 layer count reads as int64; a negative i32 does not read as u64). */
ts_status ts_gguf_get_i64(const ts_gguf *g, const char *key, int64_t *out);
ts_status ts_gguf_get_u64(const ts_gguf *g, const char *key, uint64_t *out);
ts_status ts_gguf_get_u32(const ts_gguf *g, const char *key, uint32_t *out);
/* f32 or f64 values (f64 rounded to float / kept as double). */
ts_status ts_gguf_get_f32(const ts_gguf *g, const char *key, float *out);
ts_status ts_gguf_get_f64(const ts_gguf *g, const char *key, double *out);
ts_status ts_gguf_get_bool(const ts_gguf *g, const char *key, bool *out);
/* String value: pointer into the file and its length (not NUL-terminated). */
ts_status ts_gguf_get_str(const ts_gguf *g, const char *key, const char **s, size_t *len);
/* Array: element type and count (TS_ERR_DTYPE when the key is not an array). */
ts_status ts_gguf_get_arr(const ts_gguf *g, const char *key, ts_gguf_vtype *elem_type, uint64_t *count);
/* Element i of an array value (TS_ERR_INVALID_ARG when i >= count; TS_ERR_DTYPE as the scalar
 * getters: integer elements read through _int, f32/f64 through _f64, strings through _str). */
ts_status ts_gguf_arr_int(const ts_gguf *g, const char *key, uint64_t i, int64_t *out);
ts_status ts_gguf_arr_f64(const ts_gguf *g, const char *key, uint64_t i, double *out);
ts_status ts_gguf_arr_str(const ts_gguf *g, const char *key, uint64_t i, const char **s, size_t *len);
/* The same by kv index (no key search: for loops over a 50k-token vocabulary). */
ts_status ts_gguf_arr_int_at(const ts_gguf *g, int64_t kv, uint64_t i, int64_t *out);
ts_status ts_gguf_arr_f64_at(const ts_gguf *g, int64_t kv, uint64_t i, double *out);
ts_status ts_gguf_arr_str_at(const ts_gguf *g, int64_t kv, uint64_t i, const char **s, size_t *len);
/* Scalar value at kv index i, for printing: integers/bool through *ival (u64 above INT64_MAX is
 * reported through *fval only), floats through *fval; strings through s/len. Any pointer may be NULL. */
ts_status ts_gguf_kv_scalar(const ts_gguf *g, int64_t i, int64_t *ival, double *fval, const char **s,
                            size_t *len);

/* ---- tensors ----------------------------------------------------------------------------- */

int64_t ts_gguf_tensor_count(const ts_gguf *g);
const ts_gguf_tensor *ts_gguf_tensor_at(const ts_gguf *g, int64_t i); /* NULL when out of range */
/* TS_ERR_NOT_FOUND naming the tensor when absent. */
ts_status ts_gguf_find_tensor(const ts_gguf *g, const char *name, const ts_gguf_tensor **out);

/* ---- writer ------------------------------------------------------------------------------ */

/* Thread safety: the add functions write the writer and need it to themselves; to_mem and write
 * only read it and may run concurrently with each other (write: not two on one path at once). */
typedef struct ts_gguf_writer ts_gguf_writer;

/* alignment: a power of two in 1..65536 (0: 32); written as `general.alignment` (u32) when not 32. */
ts_status ts_gguf_writer_create(ts_gguf_writer **out, size_t alignment);
void ts_gguf_writer_destroy(ts_gguf_writer *w);
/* A scalar of type t (not STRING/ARRAY) read from *value (a uint8_t for BOOL). Duplicate keys are
 * TS_ERR_INVALID_ARG. */
ts_status ts_gguf_writer_add(ts_gguf_writer *w, const char *key, ts_gguf_vtype t, const void *value);
ts_status ts_gguf_writer_add_str(ts_gguf_writer *w, const char *key, const char *s, size_t len);
/* A numeric/bool array: n elements of elem_type packed little-endian at data. */
ts_status ts_gguf_writer_add_arr(ts_gguf_writer *w, const char *key, ts_gguf_vtype elem_type, const void *data,
                                 uint64_t n);
/* An array of n strings (lens NULL: NUL-terminated). */
ts_status ts_gguf_writer_add_str_arr(ts_gguf_writer *w, const char *key, const char *const *strs,
                                     const size_t *lens, uint64_t n);
/* A tensor: ne[0..n_dims) as in the file (ne[0] innermost), `type` known, data of exactly the
 * tensor's byte size (copied). */
ts_status ts_gguf_writer_add_tensor(ts_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                    const int64_t *ne, const void *data);
/* The file image in memory (malloc'd; free with free()). */
ts_status ts_gguf_writer_to_mem(const ts_gguf_writer *w, void **data, size_t *size);
/* Writes the image to path (temp file + rename). */
ts_status ts_gguf_writer_write(const ts_gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif
