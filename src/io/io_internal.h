/* Internal helpers shared by the io room (and its fuzz harnesses): streaming atomic writes,
 * the .npy header encoder, and the Matrix Market writer on a FILE*. Not public API. */
#ifndef TS_IO_INTERNAL_H
#define TS_IO_INTERNAL_H

#include <stdio.h>

#include "tessera/io.h"

/* A file being written atomically: content goes to "<path>.tmp.<pid>", which replaces `path`
 * only on ts__atomic_commit. Lets writers stream large payloads (tensor data, millions of
 * Matrix Market lines) without building the whole image in memory first. */
typedef struct ts__atomic_file {
  FILE *f;
  char path[4096];
  char tmp[4200];
} ts__atomic_file;

ts_status ts__atomic_open(ts__atomic_file *af, const char *path);
/* Flushes, fsyncs, closes and renames over the target. On failure the target is untouched. */
ts_status ts__atomic_commit(ts__atomic_file *af);
/* Closes and removes the temporary file; the target is untouched. */
void ts__atomic_abort(ts__atomic_file *af);

/* Largest .npy header ts__npy_format_header can produce (6 dims of 19 digits fit easily). */
#define TS__NPY_HEADER_MAX 256

/* Encodes the version 1.0 preamble + header dict for a contiguous tensor of `dtype` and `shape`
 * into buf[0..TS__NPY_HEADER_MAX): magic, version, length, dict, spaces, '\n', total length a
 * multiple of 64 (numpy's alignment). bf16 and other dtypes without a .npy code: TS_ERR_DTYPE. */
ts_status ts__npy_format_header(ts_dtype dtype, int ndim, const int64_t *shape, char *buf, size_t *len);

/* Parses the .npy header dict text h[0..n) (the Python literal after the preamble):
 * {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } with keys in any order.
 * `name` prefixes error messages. */
ts_status ts__npy_parse_dict(const char *h, size_t n, const char *name, ts_dtype *dtype, int *ndim,
                             int64_t shape[TS_MAX_DIMS]);

/* "(3, 4)", "(5,)", "()" as numpy prints shapes. */
void ts__npy_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);
/* The .npy descr for a dtype ("<f4"), NULL for dtypes without one (bf16). */
const char *ts__npy_descr(ts_dtype dtype);

/* Writes the whole Matrix Market text of m to f (validated first; `name` for messages). */
ts_status ts__mm_write_stream(FILE *f, const ts_mm_matrix *m, const char *name);

#endif
