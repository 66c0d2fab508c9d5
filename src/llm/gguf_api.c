/* GGUF handle lifecycle (mmap, read() fallback) and the typed metadata / tensor getters. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llm/gguf_internal.h"

static const char *g_vnames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64",
                                 "i64", "f64"};

const char *ts_gguf_vtype_name(uint32_t t) { return t < TS_GGUF_VTYPE_COUNT ? g_vnames[t] : "?"; }

static ts_status finish_open(ts_gguf *g, ts_gguf **out) {
  ts_status s = ts__gguf_parse(g);
  if (s != TS_OK) {
    ts_gguf_close(g);
    return s;
  }
  *out = g;
  return TS_OK;
}

/* The handle and its tables come from ts_malloc (the allocator hooks: tests/test_oom.c fails each
 * of them in turn); the file's own copy, when it is read rather than mapped, from ts_read_file. */
static ts_gguf *new_handle(const char *name) {
  ts_gguf *g = ts_calloc(1, sizeof *g);
  if (!g) return NULL;
  if (!name) name = "<memory>";
  const size_t n = strlen(name) + 1;
  if (!(g->name = ts_malloc(n))) {
    ts_free(g);
    return NULL;
  }
  memcpy(g->name, name, n);
  return g;
}

ts_status ts_gguf_open_mem(ts_gguf **out, const void *data, size_t size, const char *name) {
  if (!out || (!data && size)) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_open_mem: NULL argument");
  *out = NULL;
  ts_gguf *g = new_handle(name);
  if (!g) return ts_error(TS_ERR_OOM, "ts_gguf_open_mem: out of memory");
  g->base = data;
  g->size = size;
  return finish_open(g, out);
}

ts_status ts_gguf_open(ts_gguf **out, const char *path) {
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_open: NULL argument");
  *out = NULL;
  ts_gguf *g = new_handle(path);
  if (!g) return ts_error(TS_ERR_OOM, "ts_gguf_open: out of memory");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    ts_gguf_close(g);
    return ts_error(e == ENOENT ? TS_ERR_NOT_FOUND : TS_ERR_IO, "%s: %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      g->map = m;
      g->base = m;
      g->size = (size_t)st.st_size;
    }
  }
  close(fd);
  if (!g->map) { /* a pipe, an empty file, or mmap refused: read it whole */
    char *buf;
    size_t len;
    ts_status s = ts_read_file(path, &buf, &len);
    if (s != TS_OK) {
      ts_gguf_close(g);
      return s;
    }
    g->owned = buf;
    g->base = (const uint8_t *)buf;
    g->size = len;
  }
  return finish_open(g, out);
}

void ts_gguf_close(ts_gguf *g) {
  if (!g) return;
  if (g->kv)
    for (int64_t i = 0; i < g->nkv; i++) ts_free(g->kv[i].strs);
  ts_free(g->kv);
  ts_free(g->tensors);
  ts_free(g->arena);
  if (g->map) munmap(g->map, g->size);
  free(g->owned); /* ts_read_file's */
  ts_free(g->name);
  ts_free(g);
}

uint32_t ts_gguf_version(const ts_gguf *g) { return g->version; }
size_t ts_gguf_alignment(const ts_gguf *g) { return g->alignment; }
size_t ts_gguf_data_offset(const ts_gguf *g) { return g->data_off; }
size_t ts_gguf_file_size(const ts_gguf *g) { return g->size; }

/* ---- metadata ---------------------------------------------------------------------------- */

int64_t ts_gguf_kv_count(const ts_gguf *g) { return g->nkv; }

int64_t ts_gguf_kv_find(const ts_gguf *g, const char *key) {
  if (!key) return -1;
  for (int64_t i = 0; i < g->nkv; i++)
    if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0) return i;
  return -1;
}

ts_status ts_gguf_kv_info(const ts_gguf *g, int64_t i, const char **key, ts_gguf_vtype *type,
                          ts_gguf_vtype *elem_type, uint64_t *count) {
  if (i < 0 || i >= g->nkv)
    return ts_error(TS_ERR_INVALID_ARG, "%s: kv index %lld out of range (%lld kv pairs)", g->name, (long long)i,
                    (long long)g->nkv);
  const ts__gguf_kv *kv = &g->kv[i];
  if (key) *key = kv->key;
  if (type) *type = (ts_gguf_vtype)kv->type;
  if (elem_type) *elem_type = (ts_gguf_vtype)kv->elem;
  if (count) *count = kv->count;
  return TS_OK;
}

static ts_status lookup(const ts_gguf *g, const char *key, const ts__gguf_kv **out) {
  int64_t i = ts_gguf_kv_find(g, key);
  if (i < 0) return ts_error(TS_ERR_NOT_FOUND, "%s: no metadata key '%s'", g->name, key ? key : "(null)");
  *out = &g->kv[i];
  return TS_OK;
}

static bool is_int(uint32_t t) {
  return t <= TS_GGUF_I32 || t == TS_GGUF_U64 || t == TS_GGUF_I64;
}

/* Integer element at p of type t: signed values in *iv, unsigned in *uv; *neg tells which. */
static void read_int(const uint8_t *p, uint32_t t, int64_t *iv, uint64_t *uv, bool *neg) {
  int64_t s = 0;
  uint64_t u = 0;
  bool sgn = false;
  switch (t) {
    case TS_GGUF_U8: u = p[0]; break;
    case TS_GGUF_I8: s = (int8_t)p[0]; sgn = true; break;
    case TS_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); u = v; break; }
    case TS_GGUF_I16: { int16_t v; memcpy(&v, p, 2); s = v; sgn = true; break; }
    case TS_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); u = v; break; }
    case TS_GGUF_I32: { int32_t v; memcpy(&v, p, 4); s = v; sgn = true; break; }
    case TS_GGUF_U64: memcpy(&u, p, 8); break;
    case TS_GGUF_I64: memcpy(&s, p, 8); sgn = true; break;
    default: break;
  }
  if (sgn) {
    *neg = s < 0;
    *iv = s;
    *uv = (uint64_t)s;
  } else {
    *neg = false;
    *uv = u;
    *iv = (int64_t)(u > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : u);
  }
}

static ts_status bad_type(const ts_gguf *g, const char *key, uint32_t found, const char *want) {
  return ts_error(TS_ERR_DTYPE, "%s: metadata key '%s' has type %s, expected %s", g->name, key,
                  ts_gguf_vtype_name(found), want);
}

/* Integer scalar in [lo, hi] (hi as uint64 for the unsigned getters). */
static ts_status get_int(const ts_gguf *g, const char *key, bool want_unsigned, uint64_t umax, int64_t *iv,
                         uint64_t *uv) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(lookup(g, key, &kv));
  if (!is_int(kv->type)) return bad_type(g, key, kv->type, "an integer");
  bool neg;
  read_int(kv->raw, kv->type, iv, uv, &neg);
  if (want_unsigned && neg)
    return ts_error(TS_ERR_DTYPE, "%s: metadata key '%s' (%s) is negative (%lld), expected an unsigned value",
                    g->name, key, ts_gguf_vtype_name(kv->type), (long long)*iv);
  if (want_unsigned) {
    if (*uv > umax)
      return ts_error(TS_ERR_DTYPE, "%s: metadata key '%s' (%s) value %llu exceeds %llu", g->name, key,
                      ts_gguf_vtype_name(kv->type), (unsigned long long)*uv, (unsigned long long)umax);
  } else if (!neg && *uv > (uint64_t)INT64_MAX) {
    return ts_error(TS_ERR_DTYPE, "%s: metadata key '%s' (u64) value %llu does not fit int64", g->name, key,
                    (unsigned long long)*uv);
  }
  return TS_OK;
}

ts_status ts_gguf_get_i64(const ts_gguf *g, const char *key, int64_t *out) {
  int64_t iv = 0;
  uint64_t uv = 0;
  TS_TRY(get_int(g, key, false, 0, &iv, &uv));
  *out = iv;
  return TS_OK;
}

ts_status ts_gguf_get_u64(const ts_gguf *g, const char *key, uint64_t *out) {
  int64_t iv = 0;
  uint64_t uv = 0;
  TS_TRY(get_int(g, key, true, UINT64_MAX, &iv, &uv));
  *out = uv;
  return TS_OK;
}

ts_status ts_gguf_get_u32(const ts_gguf *g, const char *key, uint32_t *out) {
  int64_t iv = 0;
  uint64_t uv = 0;
  TS_TRY(get_int(g, key, true, UINT32_MAX, &iv, &uv));
  *out = (uint32_t)uv;
  return TS_OK;
}

static bool read_float(const uint8_t *p, uint32_t t, double *out) {
  if (t == TS_GGUF_F32) {
    float f;
    memcpy(&f, p, 4);
    *out = f;
    return true;
  }
  if (t == TS_GGUF_F64) {
    memcpy(out, p, 8);
    return true;
  }
  return false;
}

ts_status ts_gguf_get_f64(const ts_gguf *g, const char *key, double *out) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(lookup(g, key, &kv));
  if (!read_float(kv->raw, kv->type, out)) return bad_type(g, key, kv->type, "f32 or f64");
  return TS_OK;
}

ts_status ts_gguf_get_f32(const ts_gguf *g, const char *key, float *out) {
  double v;
  TS_TRY(ts_gguf_get_f64(g, key, &v));
  *out = (float)v;
  return TS_OK;
}

ts_status ts_gguf_get_bool(const ts_gguf *g, const char *key, bool *out) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(lookup(g, key, &kv));
  if (kv->type != TS_GGUF_BOOL) return bad_type(g, key, kv->type, "bool");
  *out = kv->raw[0] != 0;
  return TS_OK;
}

ts_status ts_gguf_get_str(const ts_gguf *g, const char *key, const char **s, size_t *len) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(lookup(g, key, &kv));
  if (kv->type != TS_GGUF_STRING) return bad_type(g, key, kv->type, "string");
  *s = kv->str.p;
  *len = (size_t)kv->str.len;
  return TS_OK;
}

ts_status ts_gguf_get_arr(const ts_gguf *g, const char *key, ts_gguf_vtype *elem_type, uint64_t *count) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(lookup(g, key, &kv));
  if (kv->type != TS_GGUF_ARRAY) return bad_type(g, key, kv->type, "array");
  if (elem_type) *elem_type = (ts_gguf_vtype)kv->elem;
  if (count) *count = kv->count;
  return TS_OK;
}

/* kv index -> array element pointer check */
static ts_status arr_elem(const ts_gguf *g, int64_t k, uint64_t i, const ts__gguf_kv **out) {
  if (k < 0 || k >= g->nkv)
    return ts_error(TS_ERR_INVALID_ARG, "%s: kv index %lld out of range", g->name, (long long)k);
  const ts__gguf_kv *kv = &g->kv[k];
  if (kv->type != TS_GGUF_ARRAY) return bad_type(g, kv->key, kv->type, "array");
  if (i >= kv->count)
    return ts_error(TS_ERR_INVALID_ARG, "%s: index %llu past the end of array '%s' (%llu elements)", g->name,
                    (unsigned long long)i, kv->key, (unsigned long long)kv->count);
  *out = kv;
  return TS_OK;
}

ts_status ts_gguf_arr_int_at(const ts_gguf *g, int64_t k, uint64_t i, int64_t *out) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(arr_elem(g, k, i, &kv));
  if (!is_int(kv->elem) && kv->elem != TS_GGUF_BOOL)
    return ts_error(TS_ERR_DTYPE, "%s: array '%s' has %s elements, expected integers", g->name, kv->key,
                    ts_gguf_vtype_name(kv->elem));
  size_t es = ts__gguf_scalar_size(kv->elem);
  uint64_t uv = 0;
  bool neg;
  read_int(kv->raw + i * es, kv->elem == TS_GGUF_BOOL ? TS_GGUF_U8 : kv->elem, out, &uv, &neg);
  if (!neg && uv > (uint64_t)INT64_MAX)
    return ts_error(TS_ERR_DTYPE, "%s: array '%s' element %llu = %llu does not fit int64", g->name, kv->key,
                    (unsigned long long)i, (unsigned long long)uv);
  return TS_OK;
}

ts_status ts_gguf_arr_f64_at(const ts_gguf *g, int64_t k, uint64_t i, double *out) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(arr_elem(g, k, i, &kv));
  if (!read_float(kv->raw + i * ts__gguf_scalar_size(kv->elem), kv->elem, out))
    return ts_error(TS_ERR_DTYPE, "%s: array '%s' has %s elements, expected f32 or f64", g->name, kv->key,
                    ts_gguf_vtype_name(kv->elem));
  return TS_OK;
}

ts_status ts_gguf_arr_str_at(const ts_gguf *g, int64_t k, uint64_t i, const char **s, size_t *len) {
  const ts__gguf_kv *kv = NULL;
  TS_TRY(arr_elem(g, k, i, &kv));
  if (kv->elem != TS_GGUF_STRING)
    return ts_error(TS_ERR_DTYPE, "%s: array '%s' has %s elements, expected strings", g->name, kv->key,
                    ts_gguf_vtype_name(kv->elem));
  *s = kv->strs[i].p;
  *len = (size_t)kv->strs[i].len;
  return TS_OK;
}

#define BY_KEY(fn, at, T)                                                          \
  ts_status fn(const ts_gguf *g, const char *key, uint64_t i, T) {                 \
    int64_t k = ts_gguf_kv_find(g, key);                                           \
    if (k < 0) return ts_error(TS_ERR_NOT_FOUND, "%s: no metadata key '%s'", g->name, key ? key : "(null)"); \
    return at;                                                                     \
  }
BY_KEY(ts_gguf_arr_int, ts_gguf_arr_int_at(g, k, i, out), int64_t *out)
BY_KEY(ts_gguf_arr_f64, ts_gguf_arr_f64_at(g, k, i, out), double *out)

ts_status ts_gguf_arr_str(const ts_gguf *g, const char *key, uint64_t i, const char **s, size_t *len) {
  int64_t k = ts_gguf_kv_find(g, key);
  if (k < 0) return ts_error(TS_ERR_NOT_FOUND, "%s: no metadata key '%s'", g->name, key ? key : "(null)");
  return ts_gguf_arr_str_at(g, k, i, s, len);
}

ts_status ts_gguf_kv_scalar(const ts_gguf *g, int64_t i, int64_t *ival, double *fval, const char **s, size_t *len) {
  if (i < 0 || i >= g->nkv)
    return ts_error(TS_ERR_INVALID_ARG, "%s: kv index %lld out of range", g->name, (long long)i);
  const ts__gguf_kv *kv = &g->kv[i];
  if (kv->type == TS_GGUF_STRING) {
    if (s) *s = kv->str.p;
    if (len) *len = (size_t)kv->str.len;
    return TS_OK;
  }
  if (kv->type == TS_GGUF_ARRAY) return bad_type(g, kv->key, kv->type, "a scalar");
  double f;
  if (read_float(kv->raw, kv->type, &f)) {
    if (fval) *fval = f;
    return TS_OK;
  }
  int64_t iv = 0;
  uint64_t uv = 0;
  bool neg;
  read_int(kv->raw, kv->type == TS_GGUF_BOOL ? TS_GGUF_U8 : kv->type, &iv, &uv, &neg);
  if (ival) *ival = iv;
  if (fval) *fval = neg ? (double)iv : (double)uv;
  return TS_OK;
}

/* ---- tensors ----------------------------------------------------------------------------- */

int64_t ts_gguf_tensor_count(const ts_gguf *g) { return g->ntensors; }

const ts_gguf_tensor *ts_gguf_tensor_at(const ts_gguf *g, int64_t i) {
  return i >= 0 && i < g->ntensors ? &g->tensors[i] : NULL;
}

ts_status ts_gguf_find_tensor(const ts_gguf *g, const char *name, const ts_gguf_tensor **out) {
  if (name)
    for (int64_t i = 0; i < g->ntensors; i++)
      if (strcmp(g->tensors[i].name, name) == 0) {
        *out = &g->tensors[i];
        return TS_OK;
      }
  return ts_error(TS_ERR_NOT_FOUND, "%s: no tensor '%s'", g->name, name ? name : "(null)");
}
