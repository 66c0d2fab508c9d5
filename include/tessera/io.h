/* tessera I/O: .npy tensors, Matrix Market coordinate matrices, JSON files (cJSON).
 * Every reader validates everything it reads and returns a clear error (never crashes);
 * every writer writes a temporary file and renames it. */
#ifndef TESSERA_IO_H
#define TESSERA_IO_H

#include <cjson/cJSON.h>

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- .npy (format versions 1.0, 2.0, 3.0; C order only) ------------------------------------
 * dtypes: bool (|b1), u8, i8, i32, i64, f16, f32, f64 (little-endian; big-endian rejected).
 * bf16 has no .npy code: writing a bf16 tensor is TS_ERR_DTYPE. */
ts_status ts_npy_read(const char *path, ts_tensor *out);
/* Parses an in-memory .npy image; `name` is used in error messages. */
ts_status ts_npy_read_mem(const void *buf, size_t len, const char *name, ts_tensor *out);
/* Writes a contiguous tensor. */
ts_status ts_npy_write(const char *path, const ts_tensor *t);

/* ---- Matrix Market coordinate format ------------------------------------------------------ */

typedef enum ts_mm_field { TS_MM_PATTERN = 0, TS_MM_REAL, TS_MM_INTEGER } ts_mm_field;
typedef enum ts_mm_symmetry { TS_MM_GENERAL = 0, TS_MM_SYMMETRIC } ts_mm_symmetry;

/* Entries with 0-based indices. val is NULL for pattern matrices. */
typedef struct ts_mm_matrix {
  int64_t rows, cols, nnz;
  int64_t *row, *col;
  double *val;
  ts_mm_field field;
  ts_mm_symmetry symmetry;
} ts_mm_matrix;

/* expand_symmetric: for symmetric files, also emit the mirrored off-diagonal entries
 * (result is marked general). */
ts_status ts_mm_read(const char *path, bool expand_symmetric, ts_mm_matrix *out);
ts_status ts_mm_read_mem(const char *buf, size_t len, const char *name, bool expand_symmetric, ts_mm_matrix *out);
/* Writes m (for symmetric, only entries with row >= col are written; others are an error). */
ts_status ts_mm_write(const char *path, const ts_mm_matrix *m);
void ts_mm_free(ts_mm_matrix *m);

/* ---- JSON --------------------------------------------------------------------------------- */

ts_status ts_json_read_file(const char *path, cJSON **out);
/* Pretty-printed, atomic. */
ts_status ts_json_write_file(const char *path, const cJSON *j);
/* Typed lookups with errors naming the key: */
ts_status ts_json_get_number(const cJSON *obj, const char *key, double *out);
ts_status ts_json_get_string(const cJSON *obj, const char *key, const char **out);

#ifdef __cplusplus
}
#endif
#endif
