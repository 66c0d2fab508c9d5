/* JSON files through cJSON: parse errors located as line:column, pretty atomic writes, and typed
 * lookups whose errors name the key and what was found instead. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"

/* 1-based line and column (in bytes) of offset `off` in buf. */
static void line_col(const char *buf, size_t off, long *line, long *col) {
  long ln = 1, c = 1;
  for (size_t i = 0; i < off; i++) {
    if (buf[i] == '\n') ln++, c = 1;
    else c++;
  }
  *line = ln, *col = c;
}

ts_status ts__json_read_mem(const char *buf, size_t len, const char *name, cJSON **out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts__json_read_mem: out is NULL");
  *out = NULL;
  if (!name) name = "<memory>";
  if (!buf && len) return ts_error(TS_ERR_INVALID_ARG, "%s: buffer is NULL", name);
  const char *nul = len ? memchr(buf, 0, len) : NULL;
  size_t n = nul ? (size_t)(nul - buf) : len;
  if (nul) {
    long ln, col;
    line_col(buf, n, &ln, &col);
    return ts_error(TS_ERR_FORMAT, "%s:%ld:%ld: invalid JSON: NUL byte in the text", name, ln, col);
  }
  /* cJSON wants a NUL-terminated text when rejecting trailing garbage; copy, as buf need not be. */
  char *text = malloc(n + 1);
  if (!text) return ts_error(TS_ERR_OOM, "%s: out of memory for %zu bytes of JSON", name, n);
  if (n) memcpy(text, buf, n);
  text[n] = 0;
  const char *end = NULL;
  errno = 0;
  cJSON *j = cJSON_ParseWithLengthOpts(text, n + 1, &end, 1);
  if (!j && errno == ENOMEM) { /* an allocation failed (malloc and the allocator hooks set ENOMEM), not the text */
    free(text);
    return ts_error(TS_ERR_OOM, "%s: out of memory parsing %zu bytes of JSON", name, n);
  }
  if (!j) {
    /* end is what cJSON_GetErrorPtr would report, without its global state. */
    size_t off = end && end >= text && end <= text + n ? (size_t)(end - text) : n;
    long ln, col;
    line_col(text, off, &ln, &col);
    char near[24];
    size_t k = 0;
    for (size_t i = off; i < n && k < 20 && text[i] != '\n'; i++) near[k++] = (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
    near[k] = 0;
    free(text);
    if (off >= n || k == 0)
      return ts_error(TS_ERR_FORMAT, "%s:%ld:%ld: invalid JSON: unexpected end of text", name, ln, col);
    return ts_error(TS_ERR_FORMAT, "%s:%ld:%ld: invalid JSON near '%s'", name, ln, col, near);
  }
  free(text);
  *out = j;
  return TS_OK;
}

ts_status ts__json_read_file(const char *path, cJSON **out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts__json_read_file: out is NULL");
  *out = NULL;
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "ts__json_read_file: path is NULL");
  char *data;
  size_t n;
  TS_TRY(ts_read_file(path, &data, &n));
  ts_status s = ts__json_read_mem(data, n, path, out);
  free(data);
  return s;
}

ts_status ts__json_write_file(const char *path, const cJSON *j) {
  if (!path || !j) return ts_error(TS_ERR_INVALID_ARG, "ts__json_write_file: %s is NULL", path ? "json" : "path");
  char *text = ts__json_print(j, true); /* cJSON's allocator (the hooks, when set): freed with cJSON_free */
  if (!text) return ts_error(TS_ERR_OOM, "cannot format JSON for '%s'", path);
  size_t n = strlen(text);
  text[n] = '\n'; /* replaces the NUL: the file ends with a newline */
  ts_status s = ts_write_file_atomic(path, text, n + 1);
  cJSON_free(text);
  return s;
}

/* "a string (\"abc\")", "an array", ... for "expected X, found Y" messages. */
static const char *describe(const cJSON *v, char *buf, size_t cap) {
  const char *kind = cJSON_IsNumber(v) ? "a number" : cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean"
                   : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "an array" : cJSON_IsObject(v) ? "an object" : "invalid";
  char *p = cJSON_IsArray(v) || cJSON_IsObject(v) ? NULL : cJSON_PrintUnformatted(v);
  if (p && strlen(p) > 40) strcpy(p + 37, "...");
  if (p) snprintf(buf, cap, "%s (%s)", kind, p);
  else snprintf(buf, cap, "%s", kind);
  cJSON_free(p);
  return buf;
}

static ts_status lookup(const cJSON *obj, const char *key, const cJSON **v) {
  if (!key) return ts_error(TS_ERR_INVALID_ARG, "JSON lookup with a NULL key");
  if (!cJSON_IsObject(obj)) {
    char b[80];
    return ts_error(TS_ERR_INVALID_ARG, "cannot look up key '%s': value is %s, not an object", key,
                    obj ? describe(obj, b, sizeof b) : "missing");
  }
  *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!*v) return ts_error(TS_ERR_NOT_FOUND, "missing key '%s'", key);
  return TS_OK;
}

ts_status ts__json_get_number(const cJSON *obj, const char *key, double *out) {
  const cJSON *v;
  TS_TRY(lookup(obj, key, &v));
  char b[80];
  if (!cJSON_IsNumber(v))
    return ts_error(TS_ERR_FORMAT, "key '%s': expected a number, found %s", key, describe(v, b, sizeof b));
  *out = v->valuedouble;
  return TS_OK;
}

ts_status ts__json_get_int(const cJSON *obj, const char *key, int64_t *out) {
  double d = 0;
  TS_TRY(ts__json_get_number(obj, key, &d));
  /* |d| < 2^53: beyond that a JSON number no longer identifies one integer through a double. */
  if (!(d == floor(d) && fabs(d) <= 9007199254740992.0))
    return ts_error(TS_ERR_FORMAT, "key '%s': expected an integer, found %.17g", key, d);
  *out = (int64_t)d;
  return TS_OK;
}

ts_status ts__json_get_string(const cJSON *obj, const char *key, const char **out) {
  const cJSON *v;
  TS_TRY(lookup(obj, key, &v));
  char b[80];
  if (!cJSON_IsString(v) || !v->valuestring)
    return ts_error(TS_ERR_FORMAT, "key '%s': expected a string, found %s", key, describe(v, b, sizeof b));
  *out = v->valuestring;
  return TS_OK;
}

ts_status ts__json_get_bool(const cJSON *obj, const char *key, bool *out) {
  const cJSON *v;
  TS_TRY(lookup(obj, key, &v));
  char b[80];
  if (!cJSON_IsBool(v))
    return ts_error(TS_ERR_FORMAT, "key '%s': expected true or false, found %s", key, describe(v, b, sizeof b));
  *out = cJSON_IsTrue(v);
  return TS_OK;
}
