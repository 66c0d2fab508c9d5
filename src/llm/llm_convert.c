/* tessera llm convert: safetensors weights + a metadata JSON -> a GGUF file (tessera/llm_convert.h).
 * The metadata pairs go through the GGUF writer in order; each tensor is converted to float a row at
 * a time and stored as F32 or quantized with the reference quantizers; the image is parsed back
 * before it is written, so what lands on disk is a file ts_gguf_open accepts. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_internal.h"
#include "llm/safetensors_internal.h"
#include "tessera/gguf.h"
#include "tessera/llm_convert.h"

static const struct {
  const char *name;
  ts_gguf_vtype t;
} kVtypes[] = {{"u8", TS_GGUF_U8},   {"i8", TS_GGUF_I8},   {"u16", TS_GGUF_U16}, {"i16", TS_GGUF_I16},
               {"u32", TS_GGUF_U32}, {"i32", TS_GGUF_I32}, {"u64", TS_GGUF_U64}, {"i64", TS_GGUF_I64},
               {"f32", TS_GGUF_F32}, {"f64", TS_GGUF_F64}, {"bool", TS_GGUF_BOOL}, {"str", TS_GGUF_STRING}};

/* "u32" -> U32, "str[]" -> STRING with *arr set; false for anything else. */
static bool parse_vtype(const char *s, ts_gguf_vtype *t, bool *arr) {
  size_t n = strlen(s);
  *arr = n > 2 && !strcmp(s + n - 2, "[]");
  if (*arr) n -= 2;
  for (size_t i = 0; i < sizeof kVtypes / sizeof kVtypes[0]; i++)
    if (strlen(kVtypes[i].name) == n && !strncmp(s, kVtypes[i].name, n)) {
      *t = kVtypes[i].t;
      return true;
    }
  return false;
}

/* One scalar JSON value of type t (not STRING) into dst, little-endian as the writer takes it.
 * `what` names the entry in messages ("meta.json: kv[3] 'llama.block_count'"), idx the array
 * element (-1 for a scalar value). */
static ts_status encode_scalar(const cJSON *v, ts_gguf_vtype t, const char *what, long idx, void *dst) {
  char el[32] = "";
  if (idx >= 0) snprintf(el, sizeof el, " element %ld", idx);
  if (t == TS_GGUF_BOOL) {
    if (!cJSON_IsBool(v)) return ts_error(TS_ERR_FORMAT, "%s%s: expected true or false", what, el);
    *(uint8_t *)dst = cJSON_IsTrue(v) ? 1 : 0;
    return TS_OK;
  }
  if (!cJSON_IsNumber(v)) return ts_error(TS_ERR_FORMAT, "%s%s: expected a number", what, el);
  double d = v->valuedouble;
  if (t == TS_GGUF_F64) {
    memcpy(dst, &d, 8);
    return TS_OK;
  }
  if (t == TS_GGUF_F32) {
    if (!(fabs(d) <= FLT_MAX)) return ts_error(TS_ERR_OVERFLOW, "%s%s: %g is out of f32 range", what, el, d);
    float f = (float)d;
    memcpy(dst, &f, 4);
    return TS_OK;
  }
  /* integers: 64-bit ones only up to 2^53, where a JSON double still holds every integer exactly */
  static const struct { double lo, hi; int bytes; } kRange[] = {
      [TS_GGUF_U8] = {0, 255, 1},          [TS_GGUF_I8] = {-128, 127, 1},
      [TS_GGUF_U16] = {0, 65535, 2},       [TS_GGUF_I16] = {-32768, 32767, 2},
      [TS_GGUF_U32] = {0, 4294967295.0, 4}, [TS_GGUF_I32] = {-2147483648.0, 2147483647.0, 4},
      [TS_GGUF_U64] = {0, 9007199254740992.0, 8}, [TS_GGUF_I64] = {-9007199254740992.0, 9007199254740992.0, 8}};
  if ((unsigned)t >= sizeof kRange / sizeof kRange[0] || !kRange[t].bytes)
    return ts_error(TS_ERR_INTERNAL, "%s: type %s is not a scalar", what, ts_gguf_vtype_name(t));
  if (d != floor(d) || d < kRange[t].lo || d > kRange[t].hi)
    return ts_error(TS_ERR_FORMAT, "%s%s: %.17g is not an integer in %s's range [%.17g, %.17g]", what, el, d,
                    ts_gguf_vtype_name(t), kRange[t].lo, kRange[t].hi);
  int64_t i = (int64_t)d;
  memcpy(dst, &i, (size_t)kRange[t].bytes); /* little-endian: the low bytes are the narrow value */
  return TS_OK;
}

static size_t scalar_size(ts_gguf_vtype t) {
  switch (t) {
    case TS_GGUF_U8: case TS_GGUF_I8: case TS_GGUF_BOOL: return 1;
    case TS_GGUF_U16: case TS_GGUF_I16: return 2;
    case TS_GGUF_U32: case TS_GGUF_I32: case TS_GGUF_F32: return 4;
    default: return 8;
  }
}

static ts_status add_array(ts_gguf_writer *w, const char *key, ts_gguf_vtype t, const cJSON *v, const char *what) {
  if (!cJSON_IsArray(v)) return ts_error(TS_ERR_FORMAT, "%s: expected an array", what);
  size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
  if (t == TS_GGUF_STRING) {
    const char **s = malloc((n ? n : 1) * sizeof *s);
    if (!s) return ts_error(TS_ERR_OOM, "%s: out of memory", what);
    for (const cJSON *x = v->child; x; x = x->next, i++) {
      if (!cJSON_IsString(x)) {
        free(s);
        return ts_error(TS_ERR_FORMAT, "%s: element %zu: expected a string", what, i);
      }
      s[i] = x->valuestring;
    }
    ts_status st = ts_gguf_writer_add_str_arr(w, key, s, NULL, n);
    free(s);
    return st;
  }
  size_t es = scalar_size(t);
  uint8_t *buf = malloc(n ? n * es : 1);
  if (!buf) return ts_error(TS_ERR_OOM, "%s: out of memory", what);
  ts_status st = TS_OK;
  for (const cJSON *x = v->child; x && st == TS_OK; x = x->next, i++) st = encode_scalar(x, t, what, (long)i, buf + i * es);
  if (st == TS_OK) st = ts_gguf_writer_add_arr(w, key, t, buf, n);
  free(buf);
  return st;
}

typedef struct meta {
  const cJSON *kv; /* the "kv" array */
  size_t alignment;
  bool has_ftype, has_qver;
} meta;

/* The entry's three parts, with messages naming the entry. */
static ts_status entry_parts(const cJSON *e, const char *path, int idx, const char **key, const char **type,
                             const cJSON **val) {
  if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 3)
    return ts_error(TS_ERR_FORMAT, "%s: kv[%d]: expected [key, type, value]", path, idx);
  if (!cJSON_IsString(e->child) || !e->child->valuestring[0])
    return ts_error(TS_ERR_FORMAT, "%s: kv[%d]: key: expected a non-empty string", path, idx);
  if (!cJSON_IsString(e->child->next))
    return ts_error(TS_ERR_FORMAT, "%s: kv[%d] '%s': type: expected a string", path, idx, e->child->valuestring);
  *key = e->child->valuestring;
  *type = e->child->next->valuestring;
  *val = e->child->next->next;
  return TS_OK;
}

/* First pass: the kv array's shape, general.alignment (the writer takes it at creation) and which
 * keys the converter must not add itself. */
static ts_status meta_scan(const cJSON *root, const char *path, meta *m) {
  *m = (meta){.alignment = TS_GGUF_DEFAULT_ALIGNMENT};
  if (!cJSON_IsObject(root)) return ts_error(TS_ERR_FORMAT, "%s: expected a JSON object {\"kv\": [...]}", path);
  m->kv = cJSON_GetObjectItemCaseSensitive(root, "kv");
  if (!m->kv) return ts_error(TS_ERR_NOT_FOUND, "%s: missing key 'kv'", path);
  if (!cJSON_IsArray(m->kv)) return ts_error(TS_ERR_FORMAT, "%s: 'kv': expected an array of [key, type, value]", path);
  int idx = 0;
  bool seen_align = false;
  for (const cJSON *e = m->kv->child; e; e = e->next, idx++) {
    const char *key = NULL, *type = NULL;
    const cJSON *val = NULL;
    TS_TRY(entry_parts(e, path, idx, &key, &type, &val));
    if (!strcmp(key, "general.file_type")) m->has_ftype = true;
    if (!strcmp(key, "general.quantization_version")) m->has_qver = true;
    if (!strcmp(key, "general.alignment")) {
      if (seen_align) return ts_error(TS_ERR_FORMAT, "%s: kv[%d]: duplicate key 'general.alignment'", path, idx);
      seen_align = true;
      double a = cJSON_IsNumber(val) ? val->valuedouble : 0;
      if (strcmp(type, "u32") != 0 || !(a >= 1 && a <= 65536) || a != floor(a) || ((uint32_t)a & ((uint32_t)a - 1)))
        return ts_error(TS_ERR_FORMAT, "%s: kv[%d] 'general.alignment': expected a u32 power of two in 1..65536", path, idx);
      m->alignment = (size_t)a;
    }
  }
  return TS_OK;
}

static ts_status meta_add(ts_gguf_writer *w, const meta *m, const char *path, int64_t *nkv) {
  int idx = 0;
  for (const cJSON *e = m->kv->child; e; e = e->next, idx++) {
    const char *key = NULL, *type = NULL;
    const cJSON *val = NULL;
    TS_TRY(entry_parts(e, path, idx, &key, &type, &val));
    char what[384];
    snprintf(what, sizeof what, "%s: kv[%d] '%.200s'", path, idx, key);
    if (!strcmp(key, "general.alignment")) { /* the writer wrote it (when not the default 32) */
      if (m->alignment != TS_GGUF_DEFAULT_ALIGNMENT) (*nkv)++;
      continue;
    }
    ts_gguf_vtype t;
    bool arr;
    if (!parse_vtype(type, &t, &arr))
      return ts_error(TS_ERR_FORMAT, "%s: unknown type '%.32s' (str, bool, u8..u64, i8..i64, f32, f64, or one of them + [])",
                      what, type);
    ts_status s;
    if (arr) s = add_array(w, key, t, val, what);
    else if (t == TS_GGUF_STRING) {
      if (!cJSON_IsString(val)) return ts_error(TS_ERR_FORMAT, "%s: expected a string", what);
      s = ts_gguf_writer_add_str(w, key, val->valuestring, strlen(val->valuestring));
    } else {
      uint8_t v[8];
      s = encode_scalar(val, t, what, -1, v);
      if (s == TS_OK) s = ts_gguf_writer_add(w, key, t, v);
    }
    if (s != TS_OK) {
      if (!strstr(ts_last_error(), path)) ts_error_prefix("%s: ", what); /* the writer's messages name no file */
      return s;
    }
    (*nkv)++;
  }
  return TS_OK;
}

/* llama.cpp's llama_ftype for the file's main type (general.file_type). */
static uint32_t ftype_of(uint32_t wtype) {
  switch (wtype) {
    case TS_QT_F16: return 1;
    case TS_QT_Q4_0: return 2;
    case TS_QT_Q4_1: return 3;
    case TS_QT_Q8_0: return 7;
    default: return 0;
  }
}

/* GGUF layout of a safetensors tensor: dims reversed (ne[0] innermost), a scalar as ne {1}. */
static int gguf_dims(const ts__st_tensor *t, int64_t ne[TS_GGUF_MAX_DIMS]) {
  for (int d = 0; d < TS_GGUF_MAX_DIMS; d++) ne[d] = 1;
  for (int d = 0; d < t->n_dims; d++) ne[d] = t->shape[t->n_dims - 1 - d];
  return t->n_dims ? t->n_dims : 1;
}

static uint32_t tensor_type(const ts__st_tensor *t, const int64_t *ne, uint32_t wtype) {
  if (t->n_dims != 2 || t->nelem == 0) return TS_QT_F32;
  return ne[0] % ts_qtype_block_elems(wtype) == 0 ? wtype : TS_QT_F32;
}

/* The values a quantizer would spoil silently: a NaN or infinity spreads over its whole block (the
 * block's scale is max|x|), and f16 turns values past 65504 into infinities. */
static ts_status check_row(const ts__st_tensor *t, const float *x, int64_t n, int64_t first, uint32_t type) {
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || (type == TS_QT_F16 && fabsf(x[i]) > 65504.0f))
      return ts_error(TS_ERR_FORMAT, "tensor '%s': element %lld is %g, which %s cannot hold", t->name,
                      (long long)(first + i), (double)x[i], ts_qtype_name(type));
  }
  return TS_OK;
}

/* Converts tensor t into out (its GGUF bytes in `type`), a row at a time through row[ne0]. */
static ts_status convert_tensor(const ts__st_tensor *t, const int64_t *ne, uint32_t type, uint8_t *out, float *row) {
  if (type == TS_QT_F32) {
    ts__st_to_f32(t, 0, t->nelem, (float *)(void *)out);
    return TS_OK;
  }
  size_t rb;
  TS_TRY(ts_qtype_row_bytes(type, ne[0], &rb));
  for (int64_t r = 0; r < ne[1]; r++) {
    ts__st_to_f32(t, r * ne[0], ne[0], row);
    TS_TRY(check_row(t, row, ne[0], r * ne[0], type));
    TS_TRY(ts_quant_quantize_row(type, row, out + (size_t)r * rb, ne[0]));
  }
  return TS_OK;
}

static ts_status add_tensors(ts_gguf_writer *w, const ts__st *st, uint32_t wtype, const char *st_path,
                             ts_llm_convert_report *rep) {
  size_t cap = 0;
  int64_t maxrow = 1;
  for (int64_t i = 0; i < st->n; i++) maxrow = st->t[i].n_dims && st->t[i].shape[st->t[i].n_dims - 1] > maxrow
                                                   ? st->t[i].shape[st->t[i].n_dims - 1] : maxrow;
  float *row = malloc((size_t)maxrow * sizeof *row);
  uint8_t *out = NULL;
  ts_status s = row ? TS_OK : ts_error(TS_ERR_OOM, "%s: out of memory", st_path);
  for (int64_t i = 0; i < st->n && s == TS_OK; i++) {
    const ts__st_tensor *t = &st->t[i];
    int64_t ne[TS_GGUF_MAX_DIMS];
    int nd = gguf_dims(t, ne);
    uint32_t type = tensor_type(t, ne, wtype);
    size_t rb, bytes;
    if ((s = ts_qtype_row_bytes(type, ne[0], &rb)) != TS_OK) break;
    if (!ts_mul_size(rb, (size_t)(t->nelem / (ne[0] ? ne[0] : 1)), &bytes)) {
      s = ts_error(TS_ERR_OVERFLOW, "%s: tensor '%s' too large", st_path, t->name);
      break;
    }
    if (bytes > cap) { /* one scratch for all tensors: the writer copies what it is given */
      free(out);
      cap = bytes;
      if (!(out = malloc(cap))) {
        s = ts_error(TS_ERR_OOM, "%s: out of memory for tensor '%s' (%zu bytes)", st_path, t->name, bytes);
        break;
      }
    }
    if (t->nelem && (s = convert_tensor(t, ne, type, out, row)) != TS_OK) break;
    if ((s = ts_gguf_writer_add_tensor(w, t->name, type, nd, ne, out)) != TS_OK) break;
    rep->tensors++;
    rep->params += t->nelem;
    rep->type_tensors[type]++;
    rep->type_bytes[type] += bytes;
  }
  if (s != TS_OK && !strstr(ts_last_error(), st_path)) ts_error_prefix("%s: ", st_path);
  free(row);
  free(out);
  return s;
}

/* The image parses as GGUF and holds the tensors as they were added. */
static ts_status verify(const void *img, size_t n, const char *out_path, const ts__st *st, uint32_t wtype,
                        int64_t nkv) {
  ts_gguf *g;
  TS_TRY(ts_gguf_open_mem(&g, img, n, out_path));
  ts_status s = TS_OK;
  if (ts_gguf_tensor_count(g) != st->n || ts_gguf_kv_count(g) != nkv)
    s = ts_error(TS_ERR_INTERNAL, "%s: written file holds %lld tensors and %lld kv pairs, expected %lld and %lld", out_path,
                 (long long)ts_gguf_tensor_count(g), (long long)ts_gguf_kv_count(g), (long long)st->n, (long long)nkv);
  for (int64_t i = 0; i < st->n && s == TS_OK; i++) {
    const ts_gguf_tensor *gt = ts_gguf_tensor_at(g, i);
    int64_t ne[TS_GGUF_MAX_DIMS];
    int nd = gguf_dims(&st->t[i], ne);
    bool same = gt && !strcmp(gt->name, st->t[i].name) && gt->type == tensor_type(&st->t[i], ne, wtype) &&
                gt->n_dims == nd;
    for (int d = 0; d < nd && same; d++) same = gt->ne[d] == ne[d];
    if (!same) s = ts_error(TS_ERR_INTERNAL, "%s: tensor %lld ('%s') differs after writing", out_path, (long long)i, st->t[i].name);
  }
  ts_gguf_close(g);
  return s;
}

ts_status ts_llm_convert(const char *st_path, const char *meta_path, uint32_t wtype, const char *out_path,
                         ts_llm_convert_report *rep) {
  double t0 = ts_now();
  ts_llm_convert_report local;
  if (!rep) rep = &local;
  memset(rep, 0, sizeof *rep);
  if (!st_path || !meta_path || !out_path) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_convert: NULL path");
  if (wtype != TS_QT_F32 && wtype != TS_QT_F16 && wtype != TS_QT_Q8_0 && wtype != TS_QT_Q4_0 && wtype != TS_QT_Q4_1)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_convert: type %s is not one of f32, f16, q8_0, q4_0, q4_1",
                    ts_qtype_name(wtype));
  cJSON *root = NULL;
  ts__st *st = NULL;
  ts_gguf_writer *w = NULL;
  void *img = NULL;
  size_t n = 0;
  meta m = {0};
  int64_t nkv = 0;
  ts_status s = ts__json_read_file(meta_path, &root);
  if (s == TS_OK) s = meta_scan(root, meta_path, &m);
  if (s == TS_OK) s = ts__st_read_file(st_path, &st);
  if (s == TS_OK) s = ts_gguf_writer_create(&w, m.alignment);
  if (s == TS_OK) s = meta_add(w, &m, meta_path, &nkv);
  if (s == TS_OK && !m.has_ftype) {
    uint32_t ft = ftype_of(wtype);
    if ((s = ts_gguf_writer_add(w, "general.file_type", TS_GGUF_U32, &ft)) == TS_OK) nkv++;
  }
  if (s == TS_OK && !m.has_qver && ts_qtype_block_elems(wtype) > 1) {
    uint32_t qv = 2; /* GGML_QNT_VERSION: the block layouts of quant.h */
    if ((s = ts_gguf_writer_add(w, "general.quantization_version", TS_GGUF_U32, &qv)) == TS_OK) nkv++;
  }
  if (s == TS_OK) s = add_tensors(w, st, wtype, st_path, rep);
  if (s == TS_OK) s = ts_gguf_writer_to_mem(w, &img, &n);
  ts_gguf_writer_destroy(w); /* its tensor copies go before the image is parsed and written */
  if (s == TS_OK) s = verify(img, n, out_path, st, wtype, nkv);
  if (s == TS_OK) s = ts_write_file_atomic(out_path, img, n);
  free(img);
  ts__st_free(st);
  cJSON_Delete(root);
  if (s != TS_OK) {
    memset(rep, 0, sizeof *rep);
    return s;
  }
  rep->kv = nkv;
  rep->bytes = n;
  rep->seconds = ts_now() - t0;
  return TS_OK;
}
