/* safetensors reader: the header length, the JSON header (through the io room's cJSON reader) and
 * every entry's dtype, shape and byte range, validated against the image before anything is used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_internal.h"
#include "llm/safetensors_internal.h"

static const struct {
  const char *name;
  ts__st_dtype t;
  size_t size;
} kDtypes[] = {{"F32", TS__ST_F32, 4}, {"F16", TS__ST_F16, 2}, {"BF16", TS__ST_BF16, 2}};

const char *ts__st_dtype_name(ts__st_dtype t) { return (unsigned)t < 3 ? kDtypes[t].name : "?"; }
size_t ts__st_dtype_size(ts__st_dtype t) { return (unsigned)t < 3 ? kDtypes[t].size : 0; }

void ts__st_free(ts__st *st) {
  if (!st) return;
  for (int64_t i = 0; i < st->n; i++) free(st->t[i].name);
  free(st->t);
  free(st->owned);
  free(st);
}

/* A JSON number that is a non-negative integer exactly representable in a double (<= 2^53):
 * offsets and dims beyond that cannot be told apart after cJSON's parse, and no real file has them. */
static ts_status get_u53(const cJSON *v, const char *file, const char *tensor, const char *field, uint64_t *out) {
  if (!cJSON_IsNumber(v))
    return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': %s: expected a non-negative integer", file, tensor, field);
  double d = v->valuedouble;
  if (!isfinite(d) || d < 0 || d != floor(d) || d > 9007199254740992.0)
    return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': %s: %.17g is not an integer in 0..2^53", file, tensor, field, d);
  *out = (uint64_t)d;
  return TS_OK;
}

static ts_status parse_dtype(const cJSON *e, const char *file, const char *tn, ts__st_dtype *dt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  if (!v) return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': missing field 'dtype'", file, tn);
  if (!cJSON_IsString(v)) return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': dtype: expected a string", file, tn);
  for (size_t i = 0; i < sizeof kDtypes / sizeof kDtypes[0]; i++)
    if (!strcmp(v->valuestring, kDtypes[i].name)) {
      *dt = kDtypes[i].t;
      return TS_OK;
    }
  return ts_error(TS_ERR_UNSUPPORTED, "%s: tensor '%s': dtype '%.32s' is not supported (F32, F16, BF16)", file, tn,
                  v->valuestring);
}

static ts_status parse_shape(const cJSON *e, const char *file, ts__st_tensor *t) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "shape");
  if (!v) return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': missing field 'shape'", file, t->name);
  if (!cJSON_IsArray(v)) return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': shape: expected an array", file, t->name);
  int nd = cJSON_GetArraySize(v);
  if (nd > TS__ST_MAX_DIMS)
    return ts_error(TS_ERR_UNSUPPORTED, "%s: tensor '%s': shape has %d dims (at most %d)", file, t->name, nd,
                    TS__ST_MAX_DIMS);
  size_t nelem = 1;
  int d = 0;
  for (const cJSON *x = v->child; x; x = x->next, d++) {
    char field[24];
    snprintf(field, sizeof field, "shape[%d]", d);
    uint64_t dim = 0;
    TS_TRY(get_u53(x, file, t->name, field, &dim));
    if (!ts_mul_size(nelem, (size_t)dim, &nelem) || nelem > (size_t)INT64_MAX)
      return ts_error(TS_ERR_OVERFLOW, "%s: tensor '%s': shape: element count overflows", file, t->name);
    t->shape[d] = (int64_t)dim;
  }
  for (int k = nd; k < TS__ST_MAX_DIMS; k++) t->shape[k] = 1;
  t->n_dims = nd;
  t->nelem = (int64_t)nelem;
  if (!ts_mul_size(nelem, ts__st_dtype_size(t->dtype), &t->nbytes))
    return ts_error(TS_ERR_OVERFLOW, "%s: tensor '%s': shape: byte size overflows", file, t->name);
  return TS_OK;
}

static ts_status parse_offsets(const cJSON *e, const char *file, size_t buf_len, ts__st_tensor *t) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!v) return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': missing field 'data_offsets'", file, t->name);
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
    return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': data_offsets: expected an array [begin, end]", file, t->name);
  uint64_t b = 0, en = 0;
  TS_TRY(get_u53(v->child, file, t->name, "data_offsets[0]", &b));
  TS_TRY(get_u53(v->child->next, file, t->name, "data_offsets[1]", &en));
  if (en < b)
    return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu]: end before begin", file, t->name,
                    (unsigned long long)b, (unsigned long long)en);
  if (en > buf_len)
    return ts_error(TS_ERR_TRUNCATED, "%s: tensor '%s': data_offsets [%llu, %llu] past the data buffer's %zu bytes", file,
                    t->name, (unsigned long long)b, (unsigned long long)en, buf_len);
  if (en - b != t->nbytes) {
    char sh[96];
    size_t o = 0;
    for (int d = 0; d < t->n_dims && o < sizeof sh; d++)
      o += (size_t)snprintf(sh + o, sizeof sh - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (!t->n_dims) sh[0] = 0;
    return ts_error(TS_ERR_SHAPE, "%s: tensor '%s': shape [%s] %s needs %zu bytes but data_offsets [%llu, %llu] hold %llu",
                    file, t->name, sh, ts__st_dtype_name(t->dtype), t->nbytes, (unsigned long long)b,
                    (unsigned long long)en, (unsigned long long)(en - b));
  }
  t->offset = b;
  return TS_OK;
}

static ts_status parse_meta(const cJSON *m, const char *file, int64_t *n) {
  if (!cJSON_IsObject(m)) return ts_error(TS_ERR_FORMAT, "%s: __metadata__: expected an object", file);
  for (const cJSON *x = m->child; x; x = x->next, (*n)++)
    if (!cJSON_IsString(x))
      return ts_error(TS_ERR_FORMAT, "%s: __metadata__ '%.64s': expected a string value", file, x->string);
  return TS_OK;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const ts__st_tensor *const *)a)->name, (*(const ts__st_tensor *const *)b)->name);
}
static int by_offset(const void *a, const void *b) {
  uint64_t x = (*(const ts__st_tensor *const *)a)->offset, y = (*(const ts__st_tensor *const *)b)->offset;
  return x < y ? -1 : x > y;
}

/* Duplicate names and overlapping byte ranges, by sorting pointers (a fuzzed header may hold many
 * thousands of entries: no quadratic scan). Empty tensors own no bytes and overlap nothing. */
static ts_status check_set(const ts__st *st, const char *file) {
  if (st->n < 2) return TS_OK;
  const ts__st_tensor **p = malloc((size_t)st->n * sizeof *p);
  if (!p) return ts_error(TS_ERR_OOM, "%s: out of memory", file);
  for (int64_t i = 0; i < st->n; i++) p[i] = &st->t[i];
  ts_status s = TS_OK;
  qsort(p, (size_t)st->n, sizeof *p, by_name);
  for (int64_t i = 1; i < st->n && s == TS_OK; i++)
    if (!strcmp(p[i - 1]->name, p[i]->name)) s = ts_error(TS_ERR_FORMAT, "%s: duplicate tensor name '%s'", file, p[i]->name);
  qsort(p, (size_t)st->n, sizeof *p, by_offset);
  const ts__st_tensor *prev = NULL;
  for (int64_t i = 0; i < st->n && s == TS_OK; i++) {
    if (!p[i]->nbytes) continue;
    if (prev && prev->offset + prev->nbytes > p[i]->offset)
      s = ts_error(TS_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap", file, prev->name,
                   (unsigned long long)prev->offset, (unsigned long long)(prev->offset + prev->nbytes), p[i]->name,
                   (unsigned long long)p[i]->offset, (unsigned long long)(p[i]->offset + p[i]->nbytes));
    if (!prev || p[i]->offset + p[i]->nbytes > prev->offset + prev->nbytes) prev = p[i];
  }
  free(p);
  return s;
}

static ts_status parse_header(const cJSON *root, const char *file, const uint8_t *buf, size_t buf_len, ts__st *st) {
  if (!cJSON_IsObject(root)) return ts_error(TS_ERR_FORMAT, "%s: header: expected a JSON object", file);
  int64_t cap = 0;
  for (const cJSON *e = root->child; e; e = e->next) cap++;
  if (cap) {
    st->t = calloc((size_t)cap, sizeof *st->t);
    if (!st->t) return ts_error(TS_ERR_OOM, "%s: out of memory for %lld tensor entries", file, (long long)cap);
  }
  bool have_meta = false;
  for (const cJSON *e = root->child; e; e = e->next) {
    if (!strcmp(e->string, "__metadata__")) {
      if (have_meta) return ts_error(TS_ERR_FORMAT, "%s: duplicate __metadata__", file);
      have_meta = true;
      TS_TRY(parse_meta(e, file, &st->n_meta));
      continue;
    }
    ts__st_tensor *t = &st->t[st->n];
    if (!(t->name = strdup(e->string))) return ts_error(TS_ERR_OOM, "%s: out of memory", file);
    st->n++;
    if (!cJSON_IsObject(e)) return ts_error(TS_ERR_FORMAT, "%s: tensor '%s': expected an object", file, t->name);
    TS_TRY(parse_dtype(e, file, t->name, &t->dtype));
    TS_TRY(parse_shape(e, file, t));
    TS_TRY(parse_offsets(e, file, buf_len, t));
    t->data = buf + t->offset;
  }
  return check_set(st, file);
}

ts_status ts__st_parse(const uint8_t *img, size_t n, const char *name, ts__st **out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts__st_parse: out is NULL");
  *out = NULL;
  if (!name) name = "<memory>";
  if (!img && n) return ts_error(TS_ERR_INVALID_ARG, "%s: buffer is NULL", name);
  if (n < 8)
    return ts_error(TS_ERR_TRUNCATED, "%s: %zu bytes: shorter than the 8-byte safetensors header length", name, n);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | img[i];
  if (hlen > TS__ST_MAX_HEADER)
    return ts_error(TS_ERR_FORMAT, "%s: header length %llu exceeds the limit of %u bytes (not a safetensors file?)", name,
                    (unsigned long long)hlen, TS__ST_MAX_HEADER);
  if (hlen > n - 8)
    return ts_error(TS_ERR_TRUNCATED, "%s: header length %llu but only %zu bytes follow", name, (unsigned long long)hlen,
                    n - 8);
  cJSON *root;
  TS_TRY(ts__json_read_mem((const char *)img + 8, (size_t)hlen, name, &root));
  ts__st *st = calloc(1, sizeof *st);
  if (!st) {
    cJSON_Delete(root);
    return ts_error(TS_ERR_OOM, "%s: out of memory", name);
  }
  st->data_offset = 8 + (size_t)hlen;
  st->size = n;
  ts_status s = parse_header(root, name, img + st->data_offset, n - st->data_offset, st);
  cJSON_Delete(root);
  if (s != TS_OK) {
    ts__st_free(st);
    return s;
  }
  *out = st;
  return TS_OK;
}

ts_status ts__st_read_file(const char *path, ts__st **out) {
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "ts__st_read_file: NULL argument");
  *out = NULL;
  char *img;
  size_t n;
  TS_TRY(ts_read_file(path, &img, &n));
  ts_status s = ts__st_parse((const uint8_t *)img, n, path, out);
  if (s != TS_OK) {
    free(img);
    return s;
  }
  (*out)->owned = img;
  return TS_OK;
}

const ts__st_tensor *ts__st_find(const ts__st *st, const char *name) {
  for (int64_t i = 0; st && name && i < st->n; i++)
    if (!strcmp(st->t[i].name, name)) return &st->t[i];
  return NULL;
}

/* The bytes are little-endian and tessera runs on little-endian hosts only (the GGUF reader has the
 * same premise), so a memcpy reads an element; memcpy because the data may sit at any offset. */
void ts__st_to_f32(const ts__st_tensor *t, int64_t first, int64_t count, float *dst) {
  const uint8_t *p = t->data + (size_t)first * ts__st_dtype_size(t->dtype);
  if (t->dtype == TS__ST_F32) {
    memcpy(dst, p, (size_t)count * 4);
    return;
  }
  for (int64_t i = 0; i < count; i++) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    dst[i] = t->dtype == TS__ST_F16 ? ts_f16_to_f32(h) : ts_bf16_to_f32(h);
  }
}
