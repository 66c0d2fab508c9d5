/* UTF-8: one code point decoded or encoded, and text made valid for JSON and terminals. */
#include <stdlib.h>

#include "tessera/core.h"

int ts_utf8_next(const char *s, size_t len, uint32_t *cp, bool *valid) {
  const unsigned char *u = (const unsigned char *)s;
  unsigned c = u[0];
  int need;
  uint32_t v, min;
  if (c < 0x80) {
    *cp = c;
    *valid = true;
    return 1;
  }
  if ((c & 0xE0) == 0xC0) need = 1, v = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) need = 2, v = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) need = 3, v = c & 0x07, min = 0x10000;
  else goto bad;
  if ((size_t)need >= len) goto bad;
  for (int i = 1; i <= need; i++) {
    if ((u[i] & 0xC0) != 0x80) goto bad;
    v = (v << 6) | (u[i] & 0x3F);
  }
  /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
  *cp = v;
  *valid = true;
  return need + 1;
bad:
  *cp = c; /* the raw byte (the tokenizers class it as "other") */
  *valid = false;
  return 1;
}

int ts_utf8_put(uint32_t cp, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

char *ts_utf8_repair(const char *s, size_t len, size_t *out_len) {
  size_t bad = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    bool valid;
    i += (size_t)ts_utf8_next(s + i, len - i, &cp, &valid);
    bad += !valid;
  }
  /* each invalid byte (1) becomes U+FFFD (3) */
  char *o = malloc(len + 2 * bad + 1);
  if (!o) {
    ts_error(TS_ERR_OOM, "out of memory");
    return NULL;
  }
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    bool valid;
    const int k = ts_utf8_next(s + i, len - i, &cp, &valid);
    if (valid) {
      for (int j = 0; j < k; j++) o[n++] = s[i + j];
    } else {
      n += (size_t)ts_utf8_put(0xFFFD, o + n);
    }
    i += (size_t)k;
  }
  o[n] = '\0';
  if (out_len) *out_len = n;
  return o;
}
