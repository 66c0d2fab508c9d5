/* The .npy header dict: a tiny parser for the Python literal numpy writes
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * (keys in any order, any spacing, optional trailing comma, 'L' suffixes from Python 2 writers),
 * and the encoder for the version 1.0 header tessera writes. The parser accepts what numpy's own
 * reader accepts for the supported dtypes and rejects everything else with a message that names
 * the offending key or value. */
#include <stdio.h>
#include <string.h>

#include "io/io_internal.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .npy reader/writer assumes a little-endian host"
#endif

static const struct { const char *descr; ts_dtype dtype; } npy_types[] = {
    {"b1", TS_BOOL}, {"u1", TS_U8}, {"i1", TS_I8}, {"i4", TS_I32},
    {"i8", TS_I64},  {"f2", TS_F16}, {"f4", TS_F32}, {"f8", TS_F64},
};

const char *ts__npy_descr(ts_dtype dtype) {
  switch (dtype) {
    case TS_BOOL: return "|b1";
    case TS_U8: return "|u1";
    case TS_I8: return "|i1";
    case TS_I32: return "<i4";
    case TS_I64: return "<i8";
    case TS_F16: return "<f2";
    case TS_F32: return "<f4";
    case TS_F64: return "<f8";
    default: return NULL;
  }
}

void ts__npy_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
  size_t o = 0;
  int k = snprintf(buf, cap, "(");
  o = k > 0 ? (size_t)k : 0;
  for (int i = 0; i < ndim && o < cap; i++) {
    k = snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k > 0) o += (size_t)k;
  }
  if (o < cap) snprintf(buf + o, cap - o, ndim == 1 ? ",)" : ")");
}

/* ---- lexer over h[0..n) --------------------------------------------------------------- */

typedef struct lex {
  const char *p, *begin, *end, *name;
} lex;

static void skip_ws(lex *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r' || *l->p == '\f' ||
                           *l->p == '\v'))
    l->p++;
}

/* Copies up to cap-1 bytes of s[0..n) replacing unprintable bytes, so messages stay one clean line. */
static const char *printable(const char *s, size_t n, char *buf, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < cap; i++) buf[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (n >= cap && cap > 4) memcpy(buf + cap - 4, "...", 3), o = cap - 1;
  buf[o] = 0;
  return buf;
}

/* What the lexer is looking at, for "expected X, found '...'" messages. */
static const char *found(const lex *l, char *buf, size_t cap) {
  if (l->p >= l->end) return "end of header";
  size_t n = (size_t)(l->end - l->p);
  return printable(l->p, n < 12 ? n : 12, buf, cap);
}

static ts_status fmt_err(const lex *l, const char *expected) {
  char b[32];
  return ts_error(TS_ERR_FORMAT, "%s: malformed .npy header: expected %s at header byte %td, found '%s'", l->name, expected,
                  l->p - l->begin, found(l, b, sizeof b));
}

/* A Python string literal in '...' or "..." (backslash escapes taken literally). Stores up to
 * cap-1 bytes; *too_long is set when the literal is longer. */
static ts_status lex_string(lex *l, char *out, size_t cap, bool *too_long) {
  if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return fmt_err(l, "a quoted string");
  char q = *l->p++;
  size_t o = 0;
  *too_long = false;
  while (l->p < l->end && *l->p != q) {
    if (*l->p == '\\' && l->p + 1 < l->end) l->p++;
    if (*l->p == '\n') return fmt_err(l, "the closing quote of the string");
    if (o + 1 < cap) out[o++] = *l->p;
    else *too_long = true;
    l->p++;
  }
  if (l->p >= l->end) return fmt_err(l, "the closing quote of the string");
  l->p++;
  out[o] = 0;
  return TS_OK;
}

static bool is_ident(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

static bool lex_word(lex *l, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n) != 0) return false;
  if (l->p + n < l->end && is_ident(l->p[n])) return false;
  l->p += n;
  return true;
}

/* One shape entry: a non-negative decimal integer (Python 2 'L' suffix allowed). */
static ts_status lex_dim(lex *l, int64_t *v) {
  const char *start = l->p;
  bool neg = false;
  if (l->p < l->end && *l->p == '-') neg = true, l->p++;
  if (l->p >= l->end || *l->p < '0' || *l->p > '9') {
    l->p = start;
    return fmt_err(l, "an integer shape entry");
  }
  uint64_t x = 0;
  bool big = false;
  while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
    if (x > (uint64_t)(INT64_MAX - (*l->p - '0')) / 10) big = true;
    else x = x * 10 + (uint64_t)(*l->p - '0');
    l->p++;
  }
  if (l->p < l->end && (*l->p == 'L' || *l->p == 'l')) l->p++;
  if (l->p < l->end && (is_ident(*l->p) || *l->p == '.')) {
    l->p = start;
    return fmt_err(l, "an integer shape entry");
  }
  char b[32];
  if (neg) return ts_error(TS_ERR_SHAPE, "%s: .npy shape has a negative extent '%s'", l->name,
                           printable(start, (size_t)(l->p - start), b, sizeof b));
  if (big) return ts_error(TS_ERR_OVERFLOW, "%s: .npy shape extent '%s' does not fit in 64 bits", l->name,
                           printable(start, (size_t)(l->p - start), b, sizeof b));
  *v = (int64_t)x;
  return TS_OK;
}

/* A Python tuple of integers: (), (5,), (3, 4), (3, 4,). "(5)" is an int in Python, not a tuple. */
static ts_status lex_shape(lex *l, int *ndim, int64_t shape[TS_MAX_DIMS]) {
  if (l->p >= l->end || *l->p != '(') return fmt_err(l, "a shape tuple '('");
  l->p++;
  int n = 0;
  bool trailing_comma = false;
  for (;;) {
    skip_ws(l);
    if (l->p < l->end && *l->p == ')') break;
    int64_t v = 0;
    TS_TRY(lex_dim(l, &v));
    if (n < TS_MAX_DIMS) shape[n] = v;
    n++;
    skip_ws(l);
    trailing_comma = false;
    if (l->p < l->end && *l->p == ',') {
      l->p++;
      trailing_comma = true;
      continue;
    }
    if (l->p < l->end && *l->p == ')') break;
    return fmt_err(l, "',' or ')' in the shape tuple");
  }
  l->p++;
  if (n == 1 && !trailing_comma)
    return ts_error(TS_ERR_FORMAT, "%s: malformed .npy header: shape (%lld) is not a tuple (a 1-d shape is written (%lld,))",
                    l->name, (long long)shape[0], (long long)shape[0]);
  if (n > TS_MAX_DIMS)
    return ts_error(TS_ERR_SHAPE, "%s: .npy array has %d dimensions; at most %d are supported", l->name, n, TS_MAX_DIMS);
  *ndim = n;
  return TS_OK;
}

static ts_status parse_descr(const lex *l, const char *d, bool too_long, ts_dtype *dtype) {
  char b[80];
  const char *shown = printable(d, strlen(d), b, sizeof b);
  const char *more = too_long ? "..." : "";
  if (!too_long && strlen(d) == 3 && strchr("<>|=", d[0])) {
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
      if (strcmp(d + 1, npy_types[i].descr) != 0) continue;
      bool one_byte = ts_dtype_size(npy_types[i].dtype) == 1;
      if (one_byte || d[0] == '<') {  /* byte order is meaningless for 1-byte types */
        *dtype = npy_types[i].dtype;
        return TS_OK;
      }
      if (d[0] == '>')
        return ts_error(TS_ERR_DTYPE, "%s: big-endian dtype '%s' is not supported (only little-endian '<')", l->name, shown);
      break;
    }
  }
  return ts_error(TS_ERR_DTYPE,
                  "%s: unsupported .npy dtype '%s%s' (supported: |b1, |u1, |i1, <i4, <i8, <f2, <f4, <f8)", l->name,
                  shown, more);
}

ts_status ts__npy_parse_dict(const char *h, size_t n, const char *name, ts_dtype *dtype, int *ndim,
                             int64_t shape[TS_MAX_DIMS]) {
  lex l = {h, h, h + n, name};
  bool have_descr = false, have_fortran = false, have_shape = false;
  skip_ws(&l);
  if (l.p >= l.end || *l.p != '{') {
    char b[32];
    return ts_error(TS_ERR_FORMAT, "%s: malformed .npy header: not a dict (starts with '%s')", name, found(&l, b, sizeof b));
  }
  l.p++;
  for (;;) {
    skip_ws(&l);
    if (l.p < l.end && *l.p == '}') break;
    char key[32], val[64];
    bool too_long;
    TS_TRY(lex_string(&l, key, sizeof key, &too_long));
    char kb[48];
    const char *kshown = printable(key, strlen(key), kb, sizeof kb);
    skip_ws(&l);
    if (l.p >= l.end || *l.p != ':') return fmt_err(&l, "':' after a key");
    l.p++;
    skip_ws(&l);
    bool dup;
    if (!too_long && strcmp(key, "descr") == 0) {
      dup = have_descr;
      if (l.p < l.end && *l.p == '[')
        return ts_error(TS_ERR_DTYPE, "%s: structured .npy dtypes (descr is a list) are not supported", name);
      if (!dup) {
        bool vlong;
        TS_TRY(lex_string(&l, val, sizeof val, &vlong));
        TS_TRY(parse_descr(&l, val, vlong, dtype));
      }
      have_descr = true;
    } else if (!too_long && strcmp(key, "fortran_order") == 0) {
      dup = have_fortran;
      if (lex_word(&l, "True")) {
        if (!dup)
          return ts_error(TS_ERR_UNSUPPORTED,
                          "Fortran-ordered arrays are not supported: %s has fortran_order True (save it C-ordered, "
                          "e.g. np.save(f, np.ascontiguousarray(a)))", name);
      } else if (!lex_word(&l, "False")) {
        return fmt_err(&l, "True or False for 'fortran_order'");
      }
      have_fortran = true;
    } else if (!too_long && strcmp(key, "shape") == 0) {
      dup = have_shape;
      if (!dup) TS_TRY(lex_shape(&l, ndim, shape));
      have_shape = true;
    } else {
      return ts_error(TS_ERR_FORMAT, "%s: malformed .npy header: unexpected key '%s%s' (expected descr, fortran_order, shape)",
                      name, kshown, too_long ? "..." : "");
    }
    if (dup) return ts_error(TS_ERR_FORMAT, "%s: malformed .npy header: key '%s' appears twice", name, kshown);
    skip_ws(&l);
    if (l.p < l.end && *l.p == ',') {
      l.p++;
      continue;
    }
    if (l.p < l.end && *l.p == '}') break;
    return fmt_err(&l, "',' or '}' after a value");
  }
  l.p++;
  skip_ws(&l);
  if (l.p < l.end) return fmt_err(&l, "only padding after the header dict");
  const char *missing = !have_descr ? "descr" : !have_fortran ? "fortran_order" : !have_shape ? "shape" : NULL;
  if (missing) return ts_error(TS_ERR_FORMAT, "%s: malformed .npy header: missing key '%s'", name, missing);
  return TS_OK;
}

ts_status ts__npy_format_header(ts_dtype dtype, int ndim, const int64_t *shape, char *buf, size_t *len) {
  const char *descr = ts__npy_descr(dtype);
  if (!descr)
    return ts_error(TS_ERR_DTYPE, "%s has no .npy dtype code (convert to f32 before saving)", ts_dtype_name(dtype));
  if (ndim < 0 || ndim > TS_MAX_DIMS) return ts_error(TS_ERR_SHAPE, "%d dimensions (at most %d)", ndim, TS_MAX_DIMS);
  char sh[160];
  ts__npy_shape_str(ndim, shape, sh, sizeof sh);
  /* Preamble (10 bytes) + dict + spaces + '\n' is a multiple of 64, so data starts aligned. */
  int d = snprintf(buf + 10, TS__NPY_HEADER_MAX - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sh);
  if (d < 0 || (size_t)d + 11 > TS__NPY_HEADER_MAX) return ts_error(TS_ERR_INTERNAL, "npy header does not fit");
  size_t total = ((size_t)d + 11 + 63) / 64 * 64;
  if (total > TS__NPY_HEADER_MAX) return ts_error(TS_ERR_INTERNAL, "npy header does not fit");
  memset(buf + 10 + d, ' ', total - 11 - (size_t)d);
  buf[total - 1] = '\n';
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  size_t hlen = total - 10;
  buf[8] = (char)(hlen & 0xff);
  buf[9] = (char)(hlen >> 8);
  *len = total;
  return TS_OK;
}
