/* GGUF writer: collects metadata (serialized as it is added) and tensors (copied), then lays out
 * header, kv pairs, tensor infos, padding and the aligned data section in one image. */
#include <stdlib.h>
#include <string.h>

#include "llm/gguf_internal.h"

typedef struct buf {
  uint8_t *p;
  size_t len, cap;
} buf;

typedef struct wtensor {
  char *name;
  uint32_t type;
  int n_dims;
  int64_t ne[TS_GGUF_MAX_DIMS];
  void *data;
  size_t nbytes;
} wtensor;

struct ts_gguf_writer {
  size_t alignment;
  buf kv;          /* serialized kv pairs */
  uint64_t nkv;
  char **keys;     /* for duplicate checks */
  wtensor *t;
  int64_t nt, tcap;
};

static ts_status put(buf *b, const void *p, size_t n) {
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) return ts_error(TS_ERR_OVERFLOW, "gguf writer: image too large");
      cap *= 2;
    }
    uint8_t *q = realloc(b->p, cap);
    if (!q) return ts_error(TS_ERR_OOM, "gguf writer: out of memory");
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, p, n);
  b->len += n;
  return TS_OK;
}
static ts_status put_u32(buf *b, uint32_t v) { return put(b, &v, 4); }
static ts_status put_u64(buf *b, uint64_t v) { return put(b, &v, 8); }
static ts_status put_str(buf *b, const char *s, size_t len) {
  TS_TRY(put_u64(b, len));
  return put(b, s, len);
}

ts_status ts_gguf_writer_create(ts_gguf_writer **out, size_t alignment) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_create: NULL argument");
  *out = NULL;
  if (alignment == 0) alignment = TS_GGUF_DEFAULT_ALIGNMENT;
  if (alignment > 65536 || (alignment & (alignment - 1)))
    return ts_error(TS_ERR_INVALID_ARG, "gguf writer: alignment %zu is not a power of two in 1..65536", alignment);
  ts_gguf_writer *w = calloc(1, sizeof *w);
  if (!w) return ts_error(TS_ERR_OOM, "gguf writer: out of memory");
  w->alignment = alignment;
  if (alignment != TS_GGUF_DEFAULT_ALIGNMENT) {
    uint32_t a = (uint32_t)alignment;
    ts_status s = ts_gguf_writer_add(w, "general.alignment", TS_GGUF_U32, &a);
    if (s != TS_OK) {
      ts_gguf_writer_destroy(w);
      return s;
    }
  }
  *out = w;
  return TS_OK;
}

void ts_gguf_writer_destroy(ts_gguf_writer *w) {
  if (!w) return;
  for (uint64_t i = 0; i < w->nkv; i++) free(w->keys[i]);
  free(w->keys);
  for (int64_t i = 0; i < w->nt; i++) {
    free(w->t[i].name);
    free(w->t[i].data);
  }
  free(w->t);
  free(w->kv.p);
  free(w);
}

/* Registers the key (rejecting duplicates and, after creation, general.alignment) and writes the
 * key string and the type. */
static ts_status begin_kv(ts_gguf_writer *w, const char *key, uint32_t type) {
  if (!key || !key[0]) return ts_error(TS_ERR_INVALID_ARG, "gguf writer: empty key");
  for (uint64_t i = 0; i < w->nkv; i++)
    if (strcmp(w->keys[i], key) == 0) return ts_error(TS_ERR_INVALID_ARG, "gguf writer: duplicate key '%s'", key);
  if (w->nkv && strcmp(key, "general.alignment") == 0)
    return ts_error(TS_ERR_INVALID_ARG, "gguf writer: general.alignment is set by ts_gguf_writer_create");
  char **k = realloc(w->keys, (size_t)(w->nkv + 1) * sizeof *k);
  if (!k) return ts_error(TS_ERR_OOM, "gguf writer: out of memory");
  w->keys = k;
  if (!(k[w->nkv] = strdup(key))) return ts_error(TS_ERR_OOM, "gguf writer: out of memory");
  w->nkv++;
  TS_TRY(put_str(&w->kv, key, strlen(key)));
  return put_u32(&w->kv, type);
}

ts_status ts_gguf_writer_add(ts_gguf_writer *w, const char *key, ts_gguf_vtype t, const void *value) {
  size_t es = ts__gguf_scalar_size(t);
  if (!w || !value) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_add: NULL argument");
  if (!es) return ts_error(TS_ERR_INVALID_ARG, "gguf writer: key '%s': type %s is not a scalar", key ? key : "",
                           ts_gguf_vtype_name(t));
  if (t == TS_GGUF_BOOL && *(const uint8_t *)value > 1)
    return ts_error(TS_ERR_INVALID_ARG, "gguf writer: key '%s': bool must be 0 or 1", key ? key : "");
  TS_TRY(begin_kv(w, key, t));
  return put(&w->kv, value, es);
}

ts_status ts_gguf_writer_add_str(ts_gguf_writer *w, const char *key, const char *s, size_t len) {
  if (!w || (!s && len)) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_add_str: NULL argument");
  TS_TRY(begin_kv(w, key, TS_GGUF_STRING));
  return put_str(&w->kv, s, len);
}

ts_status ts_gguf_writer_add_arr(ts_gguf_writer *w, const char *key, ts_gguf_vtype elem_type, const void *data,
                                 uint64_t n) {
  size_t es = ts__gguf_scalar_size(elem_type), bytes;
  if (!w || (!data && n)) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_add_arr: NULL argument");
  if (!es) return ts_error(TS_ERR_INVALID_ARG, "gguf writer: key '%s': element type %s is not a scalar (use add_str_arr)",
                           key ? key : "", ts_gguf_vtype_name(elem_type));
  if (n > SIZE_MAX || !ts_mul_size((size_t)n, es, &bytes))
    return ts_error(TS_ERR_OVERFLOW, "gguf writer: key '%s': array too large", key ? key : "");
  if (elem_type == TS_GGUF_BOOL)
    for (uint64_t i = 0; i < n; i++)
      if (((const uint8_t *)data)[i] > 1)
        return ts_error(TS_ERR_INVALID_ARG, "gguf writer: key '%s': bool element %llu must be 0 or 1", key ? key : "",
                        (unsigned long long)i);
  TS_TRY(begin_kv(w, key, TS_GGUF_ARRAY));
  TS_TRY(put_u32(&w->kv, elem_type));
  TS_TRY(put_u64(&w->kv, n));
  return put(&w->kv, data, bytes);
}

ts_status ts_gguf_writer_add_str_arr(ts_gguf_writer *w, const char *key, const char *const *strs,
                                     const size_t *lens, uint64_t n) {
  if (!w || (!strs && n)) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_add_str_arr: NULL argument");
  for (uint64_t i = 0; i < n; i++)
    if (!strs[i] && (!lens || lens[i]))
      return ts_error(TS_ERR_INVALID_ARG, "gguf writer: key '%s': string %llu is NULL", key ? key : "",
                      (unsigned long long)i);
  TS_TRY(begin_kv(w, key, TS_GGUF_ARRAY));
  TS_TRY(put_u32(&w->kv, TS_GGUF_STRING));
  TS_TRY(put_u64(&w->kv, n));
  for (uint64_t i = 0; i < n; i++) TS_TRY(put_str(&w->kv, strs[i], lens ? lens[i] : strlen(strs[i])));
  return TS_OK;
}

ts_status ts_gguf_writer_add_tensor(ts_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                    const int64_t *ne, const void *data) {
  if (!w || !name || !ne) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_add_tensor: NULL argument");
  if (!name[0]) return ts_error(TS_ERR_INVALID_ARG, "gguf writer: empty tensor name");
  if (n_dims < 1 || n_dims > TS_GGUF_MAX_DIMS)
    return ts_error(TS_ERR_INVALID_ARG, "gguf writer: tensor '%s': n_dims %d (must be 1..4)", name, n_dims);
  if (!ts_qtype_known(type))
    return ts_error(TS_ERR_DTYPE, "gguf writer: tensor '%s': unknown type id %u", name, type);
  for (int64_t i = 0; i < w->nt; i++)
    if (strcmp(w->t[i].name, name) == 0)
      return ts_error(TS_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", name);
  size_t rows = 1, rb, nbytes;
  for (int d = 0; d < n_dims; d++) {
    if (ne[d] < 0) return ts_error(TS_ERR_SHAPE, "gguf writer: tensor '%s': ne[%d] = %lld", name, d, (long long)ne[d]);
    if (d > 0 && !ts_mul_size(rows, (size_t)ne[d], &rows))
      return ts_error(TS_ERR_OVERFLOW, "gguf writer: tensor '%s' too large", name);
  }
  ts_status s = ts_qtype_row_bytes(type, ne[0], &rb);
  if (s != TS_OK) {
    ts_error_prefix("gguf writer: tensor '%s': ", name);
    return s;
  }
  if (!ts_mul_size(rb, rows, &nbytes)) return ts_error(TS_ERR_OVERFLOW, "gguf writer: tensor '%s' too large", name);
  if (nbytes && !data) return ts_error(TS_ERR_INVALID_ARG, "gguf writer: tensor '%s': NULL data", name);
  if (w->nt == w->tcap) {
    int64_t cap = w->tcap ? 2 * w->tcap : 16;
    wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
    if (!t) return ts_error(TS_ERR_OOM, "gguf writer: out of memory");
    w->t = t;
    w->tcap = cap;
  }
  wtensor *t = &w->t[w->nt];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  t->data = malloc(nbytes ? nbytes : 1);
  if (!t->name || !t->data) {
    free(t->name);
    free(t->data);
    return ts_error(TS_ERR_OOM, "gguf writer: out of memory for tensor '%s'", name);
  }
  if (nbytes) memcpy(t->data, data, nbytes);
  t->type = type;
  t->n_dims = n_dims;
  for (int d = 0; d < n_dims; d++) t->ne[d] = ne[d];
  t->nbytes = nbytes;
  w->nt++;
  return TS_OK;
}

static size_t align_up(size_t x, size_t a) { return x % a ? x + (a - x % a) : x; }

ts_status ts_gguf_writer_to_mem(const ts_gguf_writer *w, void **data, size_t *size) {
  if (!w || !data || !size) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_to_mem: NULL argument");
  *data = NULL;
  *size = 0;
  buf b = {0};
  ts_status s = put(&b, TS__GGUF_MAGIC, 4);
  if (s == TS_OK) s = put_u32(&b, 3);
  if (s == TS_OK) s = put_u64(&b, (uint64_t)w->nt);
  if (s == TS_OK) s = put_u64(&b, w->nkv);
  if (s == TS_OK) s = put(&b, w->kv.p, w->kv.len);
  size_t off = 0;
  for (int64_t i = 0; i < w->nt && s == TS_OK; i++) {
    const wtensor *t = &w->t[i];
    s = put_str(&b, t->name, strlen(t->name));
    if (s == TS_OK) s = put_u32(&b, (uint32_t)t->n_dims);
    for (int d = 0; d < t->n_dims && s == TS_OK; d++) s = put_u64(&b, (uint64_t)t->ne[d]);
    if (s == TS_OK) s = put_u32(&b, t->type);
    if (s == TS_OK) s = put_u64(&b, off);
    off = align_up(off + t->nbytes, w->alignment);
  }
  static const uint8_t zeros[64];
  /* padding up to the data section, then each tensor at its aligned offset */
  size_t data_off = align_up(b.len, w->alignment);
  while (s == TS_OK && b.len < data_off) s = put(&b, zeros, data_off - b.len < 64 ? data_off - b.len : 64);
  for (int64_t i = 0; i < w->nt && s == TS_OK; i++) {
    s = put(&b, w->t[i].data, w->t[i].nbytes);
    size_t end = align_up(b.len - data_off, w->alignment) + data_off;
    while (s == TS_OK && i + 1 < w->nt && b.len < end) s = put(&b, zeros, end - b.len < 64 ? end - b.len : 64);
  }
  if (s != TS_OK) {
    free(b.p);
    return s;
  }
  *data = b.p;
  *size = b.len;
  return TS_OK;
}

ts_status ts_gguf_writer_write(const ts_gguf_writer *w, const char *path) {
  if (!path) return ts_error(TS_ERR_INVALID_ARG, "ts_gguf_writer_write: NULL path");
  void *img;
  size_t n;
  TS_TRY(ts_gguf_writer_to_mem(w, &img, &n));
  ts_status s = ts_write_file_atomic(path, img, n);
  free(img);
  return s;
}
