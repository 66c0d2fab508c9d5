/* libFuzzer harness for the Matrix Market reader: any input must parse or fail cleanly, with and
 * without symmetric expansion; whatever parses must be accepted by the writer and read back to
 * the same matrix (values compared exactly, NaN with NaN). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/io_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const ts_mm_matrix *m) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return;
  ts_status s = ts__mm_write_stream(f, m, "fuzz.mtx");
  fclose(f);
  if (s != TS_OK) __builtin_trap();
  ts_mm_matrix b;
  if (ts_mm_read_mem(text, len, "re.mtx", false, &b) != TS_OK) __builtin_trap();
  if (b.rows != m->rows || b.cols != m->cols || b.nnz != m->nnz || b.field != m->field || b.symmetry != m->symmetry)
    __builtin_trap();
  for (int64_t k = 0; k < m->nnz; k++) {
    if (b.row[k] != m->row[k] || b.col[k] != m->col[k]) __builtin_trap();
    if (m->val && !(b.val[k] == m->val[k] || (isnan(b.val[k]) && isnan(m->val[k])))) __builtin_trap();
  }
  ts_mm_free(&b);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int expand = 0; expand < 2; expand++) {
    ts_mm_matrix m;
    ts_status s = ts_mm_read_mem((const char *)data, size, "fuzz.mtx", expand, &m);
    if (s != TS_OK) {
      if (!ts_last_error()[0] || m.row || m.col || m.val) __builtin_trap();
      return 0; /* the same input fails the same way with expansion */
    }
    for (int64_t k = 0; k < m.nnz; k++)
      if (m.row[k] < 0 || m.row[k] >= m.rows || m.col[k] < 0 || m.col[k] >= m.cols) __builtin_trap();
    if (expand && m.symmetry != TS_MM_GENERAL) __builtin_trap();
    roundtrip(&m);
    ts_mm_free(&m);
  }
  return 0;
}
