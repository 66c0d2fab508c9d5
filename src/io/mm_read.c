/* Matrix Market coordinate reader. Accepted input:
 *   %%MatrixMarket matrix coordinate pattern|real|integer general|symmetric   (words any case)
 *   % comment lines (anywhere after the banner), blank lines
 *   ROWS COLS NNZ
 *   I J [VALUE]          NNZ lines, 1-based indices
 * Every rejection names the line. The declared NNZ is never trusted for allocation: the arrays
 * are sized by min(NNZ, what the remaining bytes can hold), since each entry takes >= 4 bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io_internal.h"

typedef struct mm_in {
  const char *p, *end, *name;
  int64_t line;      /* number of the line last returned by next_line */
  const char *ls, *le; /* that line, without '\n' / "\r\n" */
} mm_in;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

static bool next_raw_line(mm_in *in) {
  if (in->p >= in->end) return false;
  const char *nl = memchr(in->p, '\n', (size_t)(in->end - in->p));
  in->ls = in->p;
  in->le = nl ? nl : in->end;
  in->p = nl ? nl + 1 : in->end;
  in->line++;
  return true;
}

/* Next line that is neither blank nor a '%' comment. */
static bool next_data_line(mm_in *in) {
  while (next_raw_line(in)) {
    const char *q = in->ls;
    while (q < in->le && is_space(*q)) q++;
    if (q < in->le && *q != '%') return true;
  }
  return false;
}

/* Splits the current line at whitespace; returns the count (at most max are stored). */
static int tokens(const mm_in *in, const char **tok, size_t *len, int max) {
  int n = 0;
  const char *q = in->ls;
  for (;;) {
    while (q < in->le && is_space(*q)) q++;
    if (q >= in->le) return n;
    const char *s = q;
    while (q < in->le && !is_space(*q)) q++;
    if (n < max) tok[n] = s, len[n] = (size_t)(q - s);
    n++;
  }
}

/* Token text for messages: at most 40 printable bytes. */
static const char *shown(const char *s, size_t n, char *buf) {
  size_t o = 0;
  for (size_t i = 0; i < n && o < 40; i++) buf[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (n > 40) memcpy(buf + o, "...", 3), o += 3;
  buf[o] = 0;
  return buf;
}

/* Decimal int64 with optional sign. Returns TS_ERR_FORMAT / TS_ERR_OVERFLOW without a message. */
static ts_status parse_i64(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i == n) return TS_ERR_FORMAT;
  uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, x = 0;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return TS_ERR_FORMAT;
    unsigned d = (unsigned)(s[i] - '0');
    if (x > (lim - d) / 10) return TS_ERR_OVERFLOW;
    x = x * 10 + d;
  }
  *out = neg ? (int64_t)(0 - x) : (int64_t)x;
  return TS_OK;
}

static ts_status parse_real(const char *s, size_t n, double *out) {
  char buf[128];
  if (n == 0 || n >= sizeof buf) return TS_ERR_FORMAT;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *e;
  *out = strtod(buf, &e);
  return e == buf + n ? TS_OK : TS_ERR_FORMAT;
}

static ts_status parse_banner(mm_in *in, ts_mm_field *field, ts_mm_symmetry *sym) {
  static const char want[] = "expected '%%%%MatrixMarket matrix coordinate real|integer|pattern general|symmetric'";
  if (!next_raw_line(in) || in->le - in->ls < 14 || strncasecmp(in->ls, "%%MatrixMarket", 14) != 0)
    return ts_error(TS_ERR_FORMAT, "%s: line 1: not a Matrix Market file (no '%%%%MatrixMarket' banner)", in->name);
  const char *t[6];
  size_t l[6];
  int n = tokens(in, t, l, 6);
  char b[48];
  if (n != 5 || l[0] != 14)
    return ts_error(TS_ERR_FORMAT, "%s: line 1: bad Matrix Market banner (%d words): %s", in->name, n, want);
#define IS(k, w) (l[k] == strlen(w) && strncasecmp(t[k], w, l[k]) == 0)
  if (!IS(1, "matrix"))
    return ts_error(IS(1, "vector") ? TS_ERR_UNSUPPORTED : TS_ERR_FORMAT,
                    "%s: line 1: Matrix Market object '%s' is not supported (only 'matrix')", in->name, shown(t[1], l[1], b));
  if (IS(2, "array"))
    return ts_error(TS_ERR_UNSUPPORTED, "%s: line 1: Matrix Market 'array' (dense) format is not supported (only 'coordinate')",
                    in->name);
  if (!IS(2, "coordinate"))
    return ts_error(TS_ERR_FORMAT, "%s: line 1: unknown Matrix Market format '%s' (expected 'coordinate')", in->name,
                    shown(t[2], l[2], b));
  if (IS(3, "real")) *field = TS_MM_REAL;
  else if (IS(3, "integer")) *field = TS_MM_INTEGER;
  else if (IS(3, "pattern")) *field = TS_MM_PATTERN;
  else if (IS(3, "complex"))
    return ts_error(TS_ERR_UNSUPPORTED, "%s: line 1: Matrix Market field 'complex' is not supported (real, integer, pattern)",
                    in->name);
  else
    return ts_error(TS_ERR_FORMAT, "%s: line 1: unknown Matrix Market field '%s' (expected real, integer or pattern)",
                    in->name, shown(t[3], l[3], b));
  if (IS(4, "general")) *sym = TS_MM_GENERAL;
  else if (IS(4, "symmetric")) *sym = TS_MM_SYMMETRIC;
  else if (IS(4, "skew-symmetric") || IS(4, "hermitian"))
    return ts_error(TS_ERR_UNSUPPORTED, "%s: line 1: Matrix Market symmetry '%s' is not supported (general, symmetric)",
                    in->name, shown(t[4], l[4], b));
  else
    return ts_error(TS_ERR_FORMAT, "%s: line 1: unknown Matrix Market symmetry '%s' (expected general or symmetric)",
                    in->name, shown(t[4], l[4], b));
#undef IS
  return TS_OK;
}

static ts_status parse_size(mm_in *in, ts_mm_symmetry sym, int64_t *rows, int64_t *cols, int64_t *nnz) {
  if (!next_data_line(in))
    return ts_error(TS_ERR_TRUNCATED, "%s: line %lld: file ends before the size line 'ROWS COLS NNZ'", in->name,
                    (long long)in->line);
  const char *t[4];
  size_t l[4];
  int n = tokens(in, t, l, 4);
  if (n != 3)
    return ts_error(TS_ERR_FORMAT, "%s: line %lld: bad size line: expected 'ROWS COLS NNZ', found %d fields", in->name,
                    (long long)in->line, n);
  static const char *what[3] = {"ROWS", "COLS", "NNZ"};
  int64_t v[3];
  for (int k = 0; k < 3; k++) {
    char b[48];
    ts_status s = parse_i64(t[k], l[k], &v[k]);
    if (s == TS_ERR_OVERFLOW)
      return ts_error(s, "%s: line %lld: size %s '%s' does not fit in 64 bits", in->name, (long long)in->line, what[k],
                      shown(t[k], l[k], b));
    if (s != TS_OK || v[k] < 0)
      return ts_error(TS_ERR_FORMAT, "%s: line %lld: bad size line: %s '%s' is not a non-negative integer", in->name,
                      (long long)in->line, what[k], shown(t[k], l[k], b));
  }
  if (sym == TS_MM_SYMMETRIC && v[0] != v[1])
    return ts_error(TS_ERR_FORMAT, "%s: line %lld: symmetric matrix must be square, size is %lld x %lld", in->name,
                    (long long)in->line, (long long)v[0], (long long)v[1]);
  /* NNZ is not bounded by ROWS*COLS: duplicate coordinates are legal (the sparse formats sum them),
   * and a symmetric file with duplicates mirrors into more entries than a general file of its size
   * could hold, which must still read back after ts_mm_write. Allocation is bounded by the file size
   * instead (ts_mm_read_mem), and a short file fails as truncated. */
  *rows = v[0], *cols = v[1], *nnz = v[2];
  return TS_OK;
}

/* Parses one entry line into (r, c, v) 0-based. */
static ts_status parse_entry(const mm_in *in, const ts_mm_matrix *m, int64_t *r, int64_t *c, double *v) {
  const char *t[4];
  size_t l[4];
  int want = m->field == TS_MM_PATTERN ? 2 : 3;
  int n = tokens(in, t, l, 4);
  long long ln = (long long)in->line;
  char b[48];
  if (n != want)
    return ts_error(TS_ERR_FORMAT, "%s: line %lld: expected %d fields ('I J%s'), found %d", in->name, ln, want,
                    want == 3 ? " VALUE" : "", n);
  int64_t ij[2], lim[2] = {m->rows, m->cols};
  for (int k = 0; k < 2; k++) {
    ts_status s = parse_i64(t[k], l[k], &ij[k]);
    if (s != TS_OK)
      return ts_error(TS_ERR_FORMAT, "%s: line %lld: bad %s index '%s'", in->name, ln, k ? "column" : "row",
                      shown(t[k], l[k], b));
    if (ij[k] < 1 || ij[k] > lim[k])
      return ts_error(TS_ERR_FORMAT, "%s: line %lld: %s index %lld out of range 1..%lld", in->name, ln,
                      k ? "column" : "row", (long long)ij[k], (long long)lim[k]);
  }
  if (m->symmetry == TS_MM_SYMMETRIC && ij[0] < ij[1])
    return ts_error(TS_ERR_FORMAT,
                    "%s: line %lld: entry (%lld, %lld) is above the diagonal; a symmetric file stores only the lower triangle",
                    in->name, ln, (long long)ij[0], (long long)ij[1]);
  *r = ij[0] - 1, *c = ij[1] - 1, *v = 1.0;
  if (m->field == TS_MM_REAL) {
    if (parse_real(t[2], l[2], v) != TS_OK)
      return ts_error(TS_ERR_FORMAT, "%s: line %lld: bad real value '%s'", in->name, ln, shown(t[2], l[2], b));
  } else if (m->field == TS_MM_INTEGER) {
    int64_t x;
    ts_status s = parse_i64(t[2], l[2], &x);
    /* Values are stored as doubles: beyond 2^53 they would silently change, so say so instead. */
    if (s == TS_OK && (x > TS_MM_INT_MAX || x < -TS_MM_INT_MAX)) s = TS_ERR_OVERFLOW;
    if (s != TS_OK)
      return ts_error(s, "%s: line %lld: bad integer value '%s'%s", in->name, ln, shown(t[2], l[2], b),
                      s == TS_ERR_OVERFLOW ? " (integer values must be within +-2^53 to be exact as doubles)" : "");
    *v = (double)x;
  }
  return TS_OK;
}

/* Appends the mirror (j, i) of every off-diagonal entry; the result is a general matrix. */
static ts_status expand(ts_mm_matrix *m, const char *name) {
  int64_t off = 0;
  for (int64_t k = 0; k < m->nnz; k++) off += m->row[k] != m->col[k];
  size_t total = (size_t)m->nnz + (size_t)off, rb, vb;
  if (!ts_mul_size(total ? total : 1, sizeof(int64_t), &rb) || !ts_mul_size(total ? total : 1, sizeof(double), &vb))
    return ts_error(TS_ERR_OVERFLOW, "%s: expanded symmetric matrix is too large", name);
  /* Each realloc result is stored at once so ts_mm_free releases the right block on failure. */
  int64_t *r = realloc(m->row, rb);
  if (r) m->row = r;
  int64_t *c = r ? realloc(m->col, rb) : NULL;
  if (c) m->col = c;
  double *v = NULL;
  if (c && m->val && (v = realloc(m->val, vb)) != NULL) m->val = v;
  if (!r || !c || (m->val && !v))
    return ts_error(TS_ERR_OOM, "%s: out of memory expanding to %zu entries", name, total);
  int64_t o = m->nnz;
  for (int64_t k = 0; k < m->nnz; k++) {
    if (m->row[k] == m->col[k]) continue;
    m->row[o] = m->col[k], m->col[o] = m->row[k];
    if (m->val) m->val[o] = m->val[k];
    o++;
  }
  m->nnz = o;
  m->symmetry = TS_MM_GENERAL;
  return TS_OK;
}

ts_status ts_mm_read_mem(const char *buf, size_t len, const char *name, bool expand_symmetric, ts_mm_matrix *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_mm_read_mem: out is NULL");
  memset(out, 0, sizeof *out);
  if (!name) name = "<memory>";
  if (!buf && len) return ts_error(TS_ERR_INVALID_ARG, "%s: buffer is NULL", name);
  mm_in in = {buf, buf + len, name, 0, NULL, NULL};
  ts_mm_matrix m = {0};
  TS_TRY(parse_banner(&in, &m.field, &m.symmetry));
  int64_t nnz = 0;
  TS_TRY(parse_size(&in, m.symmetry, &m.rows, &m.cols, &nnz));
  int64_t size_line = in.line;
  /* Each entry needs at least "1 1" plus a newline before the next: 4 bytes (the last, 3). */
  size_t fit = ((size_t)(in.end - in.p) + 1) / 4;
  size_t cap = (uint64_t)nnz < fit ? (size_t)nnz : fit;
  if (cap == 0) cap = 1;
  m.row = malloc(cap * sizeof(int64_t));
  m.col = malloc(cap * sizeof(int64_t));
  if (m.field != TS_MM_PATTERN) m.val = malloc(cap * sizeof(double));
  ts_status s = TS_OK;
  if (!m.row || !m.col || (m.field != TS_MM_PATTERN && !m.val)) {
    s = ts_error(TS_ERR_OOM, "%s: out of memory for %zu entries", name, cap);
    goto fail;
  }
  for (int64_t k = 0; k < nnz; k++) {
    if (!next_data_line(&in)) {
      s = ts_error(TS_ERR_TRUNCATED, "%s: line %lld: file ends after %lld of the %lld entries declared on line %lld", name,
                   (long long)in.line, (long long)k, (long long)nnz, (long long)size_line);
      goto fail;
    }
    if ((size_t)k >= cap) { /* cannot happen: every data line is >= 4 bytes apart */
      s = ts_error(TS_ERR_INTERNAL, "%s: line %lld: entry capacity %zu exceeded", name, (long long)in.line, cap);
      goto fail;
    }
    double v = 0;
    s = parse_entry(&in, &m, &m.row[k], &m.col[k], &v);
    if (s != TS_OK) goto fail;
    if (m.val) m.val[k] = v;
    m.nnz = k + 1;
  }
  if (next_data_line(&in)) {
    s = ts_error(TS_ERR_FORMAT, "%s: line %lld: more entries than the %lld declared on line %lld", name, (long long)in.line,
                 (long long)nnz, (long long)size_line);
    goto fail;
  }
  if (expand_symmetric && m.symmetry == TS_MM_SYMMETRIC && (s = expand(&m, name)) != TS_OK) goto fail;
  *out = m;
  return TS_OK;
fail:
  ts_mm_free(&m);
  return s;
}

ts_status ts_mm_read(const char *path, bool expand_symmetric, ts_mm_matrix *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_mm_read: out is NULL");
  memset(out, 0, sizeof *out);
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "ts_mm_read: path is NULL");
  char *data;
  size_t n;
  TS_TRY(ts_read_file(path, &data, &n));
  ts_status s = ts_mm_read_mem(data, n, path, expand_symmetric, out);
  free(data);
  return s;
}

void ts_mm_free(ts_mm_matrix *m) {
  if (!m) return;
  free(m->row);
  free(m->col);
  free(m->val);
  memset(m, 0, sizeof *m);
}
