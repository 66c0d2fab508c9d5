/* tessera I/O: .npy tensors and Matrix Market coordinate matrices.
 * Every reader validates everything it reads and returns a clear error (never crashes);
 * every writer writes a temporary file and renames it. (JSON documents are read and written
 * through cJSON inside the library, src/io/json_internal.h; the public API passes JSON as
 * strings.) */
#ifndef TESSERA_IO_H
#define TESSERA_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- .npy (format versions 1.0, 2.0, 3.0; C order only) ------------------------------------
 * dtypes: bool (|b1), u8, i8, i32, i64, f16, f32, f64 (little-endian; big-endian rejected).
 * bf16 has no .npy code: writing a bf16 tensor is TS_ERR_DTYPE.
 * Read errors (the message starts with the file name): TS_ERR_FORMAT bad magic / malformed or
 * incomplete header dict; TS_ERR_UNSUPPORTED other versions, fortran_order True;
 * TS_ERR_DTYPE big-endian or other dtypes; TS_ERR_SHAPE > 6 dims, negative extents, extra
 * trailing data; TS_ERR_OVERFLOW extents or byte size beyond 64 bits; TS_ERR_TRUNCATED short
 * preamble/header/data (expected vs present bytes). On error *out is zeroed (safe to free).
 * The result owns 64-byte aligned data (ts_tensor_free); bool elements are normalized to 0/1. */
ts_status ts_npy_read(const char *path, ts_tensor *out);
/* Parses an in-memory .npy image; `name` is used in error messages. */
ts_status ts_npy_read_mem(const void *buf, size_t len, const char *name, ts_tensor *out);
/* Writes a contiguous tensor as version 1.0, header padded to 64 bytes (as numpy does). */
ts_status ts_npy_write(const char *path, const ts_tensor *t);

/* ---- Matrix Market coordinate format ------------------------------------------------------ */

typedef enum ts_mm_field { TS_MM_PATTERN = 0, TS_MM_REAL, TS_MM_INTEGER } ts_mm_field;
typedef enum ts_mm_symmetry { TS_MM_GENERAL = 0, TS_MM_SYMMETRIC } ts_mm_symmetry;

/* Integer-field values are held as doubles, so they must lie within +-2^53 (exact); readers
 * and writers reject larger magnitudes. */
#define TS_MM_INT_MAX 9007199254740992LL

/* Entries with 0-based indices. val is NULL for pattern matrices. Arrays filled by ts_mm_read*
 * are owned by the matrix: release them with ts_mm_free. */
typedef struct ts_mm_matrix {
  int64_t rows, cols, nnz;
  int64_t *row, *col;
  double *val;
  ts_mm_field field;
  ts_mm_symmetry symmetry;
} ts_mm_matrix;

/* expand_symmetric: for symmetric files, also emit the mirrored off-diagonal entries
 * (appended after the stored ones; result is marked general).
 * Errors name the line: TS_ERR_FORMAT bad banner/size line/entry, index out of range, entry
 * above the diagonal of a symmetric file, NNZ above what the matrix can hold, more entries than
 * NNZ; TS_ERR_UNSUPPORTED array format, complex, skew-symmetric, hermitian, vector;
 * TS_ERR_TRUNCATED fewer entries than NNZ; TS_ERR_OVERFLOW sizes or integers too large.
 * On error *out is zeroed. */
ts_status ts_mm_read(const char *path, bool expand_symmetric, ts_mm_matrix *out);
ts_status ts_mm_read_mem(const char *buf, size_t len, const char *name, bool expand_symmetric, ts_mm_matrix *out);
/* Writes m (for symmetric, only entries with row >= col are written; others are an error). */
ts_status ts_mm_write(const char *path, const ts_mm_matrix *m);
void ts_mm_free(ts_mm_matrix *m);

#ifdef __cplusplus
}
#endif
#endif
