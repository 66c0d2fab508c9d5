/* GGUF parser: validates the whole header (kv pairs, tensor infos, alignment, data bounds) before
 * anything is handed out. Every count is checked against the bytes left before it sizes an
 * allocation, so a hostile count cannot make us allocate more than a small multiple of the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/gguf_internal.h"

typedef struct cur {
  const uint8_t *p;
  size_t size, pos;
  const char *name;
  char *arena;
  size_t arena_len, arena_cap;
} cur;

size_t ts__gguf_scalar_size(uint32_t t) {
  switch (t) {
    case TS_GGUF_U8: case TS_GGUF_I8: case TS_GGUF_BOOL: return 1;
    case TS_GGUF_U16: case TS_GGUF_I16: return 2;
    case TS_GGUF_U32: case TS_GGUF_I32: case TS_GGUF_F32: return 4;
    case TS_GGUF_U64: case TS_GGUF_I64: case TS_GGUF_F64: return 8;
    default: return 0;
  }
}

static size_t left(const cur *c) { return c->size - c->pos; }

static ts_status need(cur *c, uint64_t n, const char *what) {
  if (n > left(c))
    return ts_error(TS_ERR_TRUNCATED, "%s: file ends at byte %zu while reading %s (%llu bytes needed, %zu left)",
                    c->name, c->size, what, (unsigned long long)n, left(c));
  return TS_OK;
}

static ts_status rd_u32(cur *c, uint32_t *v, const char *what) {
  TS_TRY(need(c, 4, what));
  memcpy(v, c->p + c->pos, 4);
  c->pos += 4;
  return TS_OK;
}

static ts_status rd_u64(cur *c, uint64_t *v, const char *what) {
  TS_TRY(need(c, 8, what));
  memcpy(v, c->p + c->pos, 8);
  c->pos += 8;
  return TS_OK;
}

static ts_status rd_str(cur *c, ts__gguf_str *s, const char *what) {
  uint64_t len;
  TS_TRY(rd_u64(c, &len, what));
  if (len > left(c))
    return ts_error(TS_ERR_TRUNCATED,
                    "%s: %s: string length %llu at byte %zu runs past the end of the file (%zu bytes left)", c->name, what, (unsigned long long)len, c->pos - 8, left(c));
  s->p = (const char *)c->p + c->pos;
  s->len = len;
  c->pos += (size_t)len;
  return TS_OK;
}

/* Copies a key/name into the arena (NUL-terminated); returns its offset. */
static ts_status arena_add(cur *c, ts__gguf_str s, const char *what, size_t *off) {
  if (s.len == 0) return ts_error(TS_ERR_FORMAT, "%s: %s is empty", c->name, what);
  if (memchr(s.p, 0, (size_t)s.len))
    return ts_error(TS_ERR_FORMAT, "%s: %s contains a NUL byte", c->name, what);
  if (c->arena_cap - c->arena_len < s.len + 1) {
    size_t cap = c->arena_cap ? c->arena_cap : 1024;
    while (cap - c->arena_len < s.len + 1) cap *= 2; /* s.len < file size: no overflow */
    char *a = ts_malloc(cap);
    if (!a) return ts_error(TS_ERR_OOM, "%s: out of memory for names", c->name);
    if (c->arena_len) memcpy(a, c->arena, c->arena_len);
    ts_free(c->arena);
    c->arena = a;
    c->arena_cap = cap;
  }
  memcpy(c->arena + c->arena_len, s.p, (size_t)s.len);
  c->arena[c->arena_len + s.len] = 0;
  *off = c->arena_len;
  c->arena_len += (size_t)s.len + 1;
  return TS_OK;
}

/* Validates (and skips) an array body of `count` elements of type t; depth counts nesting. */
static ts_status skip_array(cur *c, uint32_t t, uint64_t count, int depth, const char *what) {
  if (t == TS_GGUF_STRING) {
    if (count > left(c) / 8)
      return ts_error(TS_ERR_FORMAT, "%s: %s: array of %llu strings cannot fit in the %zu bytes left", c->name, what,
                      (unsigned long long)count, left(c));
    for (uint64_t i = 0; i < count; i++) {
      ts__gguf_str s;
      TS_TRY(rd_str(c, &s, what));
    }
    return TS_OK;
  }
  if (t == TS_GGUF_ARRAY) {
    if (depth >= TS__GGUF_MAX_NEST)
      return ts_error(TS_ERR_FORMAT, "%s: %s: arrays nested deeper than %d", c->name, what, TS__GGUF_MAX_NEST);
    if (count > left(c) / 12)
      return ts_error(TS_ERR_FORMAT, "%s: %s: array of %llu arrays cannot fit in the %zu bytes left", c->name, what,
                      (unsigned long long)count, left(c));
    for (uint64_t i = 0; i < count; i++) {
      uint32_t et;
      uint64_t n;
      TS_TRY(rd_u32(c, &et, what));
      TS_TRY(rd_u64(c, &n, what));
      if (et >= TS_GGUF_VTYPE_COUNT)
        return ts_error(TS_ERR_FORMAT, "%s: %s: unknown array element type %u", c->name, what, et);
      TS_TRY(skip_array(c, et, n, depth + 1, what));
    }
    return TS_OK;
  }
  size_t es = ts__gguf_scalar_size(t);
  if (!es) return ts_error(TS_ERR_FORMAT, "%s: %s: unknown array element type %u", c->name, what, t);
  if (count > left(c) / es)
    return ts_error(TS_ERR_TRUNCATED, "%s: %s: array of %llu %s values runs past the end of the file (%zu bytes left)",
                    c->name, what, (unsigned long long)count, ts_gguf_vtype_name(t), left(c));
  if (t == TS_GGUF_BOOL)
    for (uint64_t i = 0; i < count; i++)
      if (c->p[c->pos + i] > 1)
        return ts_error(TS_ERR_FORMAT, "%s: %s: bool element %llu is %u (must be 0 or 1)", c->name, what,
                        (unsigned long long)i, c->p[c->pos + i]);
  c->pos += (size_t)(count * es);
  return TS_OK;
}

static ts_status parse_kv(cur *c, int64_t i, ts__gguf_kv *kv, size_t *key_off) {
  char what[96];
  ts__gguf_str key;
  snprintf(what, sizeof what, "key of kv %lld", (long long)i);
  TS_TRY(rd_str(c, &key, what));
  TS_TRY(arena_add(c, key, what, key_off));
  snprintf(what, sizeof what, "kv %lld '%.*s'", (long long)i, (int)(key.len > 48 ? 48 : key.len), key.p);
  TS_TRY(rd_u32(c, &kv->type, what));
  kv->elem = kv->type;
  kv->count = 1;
  if (kv->type >= TS_GGUF_VTYPE_COUNT)
    return ts_error(TS_ERR_FORMAT, "%s: %s: unknown value type %u", c->name, what, kv->type);
  if (kv->type == TS_GGUF_STRING) return rd_str(c, &kv->str, what);
  if (kv->type == TS_GGUF_ARRAY) {
    TS_TRY(rd_u32(c, &kv->elem, what));
    TS_TRY(rd_u64(c, &kv->count, what));
    if (kv->elem >= TS_GGUF_VTYPE_COUNT)
      return ts_error(TS_ERR_FORMAT, "%s: %s: unknown array element type %u", c->name, what, kv->elem);
    kv->raw = c->p + c->pos;
    size_t start = c->pos;
    TS_TRY(skip_array(c, kv->elem, kv->count, 1, what));
    if (kv->elem == TS_GGUF_STRING && kv->count) {
      /* count <= bytes/8 was checked: this allocation is at most twice the array's bytes */
      kv->strs = ts_malloc((size_t)kv->count * sizeof *kv->strs);
      if (!kv->strs) return ts_error(TS_ERR_OOM, "%s: %s: out of memory", c->name, what);
      cur r = *c;
      r.pos = start;
      for (uint64_t j = 0; j < kv->count; j++) TS_TRY(rd_str(&r, &kv->strs[j], what));
    }
    return TS_OK;
  }
  size_t es = ts__gguf_scalar_size(kv->type);
  TS_TRY(need(c, es, what));
  kv->raw = c->p + c->pos;
  if (kv->type == TS_GGUF_BOOL && kv->raw[0] > 1)
    return ts_error(TS_ERR_FORMAT, "%s: %s: bool value is %u (must be 0 or 1)", c->name, what, kv->raw[0]);
  c->pos += es;
  return TS_OK;
}

static ts_status parse_tensor(cur *c, int64_t i, ts_gguf_tensor *t, size_t *name_off) {
  char what[112];
  ts__gguf_str name;
  snprintf(what, sizeof what, "name of tensor %lld", (long long)i);
  TS_TRY(rd_str(c, &name, what));
  TS_TRY(arena_add(c, name, what, name_off));
  snprintf(what, sizeof what, "tensor %lld '%.*s'", (long long)i, (int)(name.len > 64 ? 64 : name.len), name.p);
  uint32_t nd;
  TS_TRY(rd_u32(c, &nd, what));
  if (nd < 1 || nd > TS_GGUF_MAX_DIMS)
    return ts_error(TS_ERR_FORMAT, "%s: %s: n_dims is %u (must be 1..%d)", c->name, what, nd, TS_GGUF_MAX_DIMS);
  t->n_dims = (int)nd;
  /* nz: the product of the nonzero dimensions, which must fit too (a zero dimension does not make
   * {0, 2^62, 2^62} a shape anything downstream can index, nor one the writer re-encodes). */
  uint64_t nelem = 1, nz = 1;
  for (int d = 0; d < TS_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t v;
    TS_TRY(rd_u64(c, &v, what));
    if (v > (uint64_t)INT64_MAX)
      return ts_error(TS_ERR_FORMAT, "%s: %s: dimension %u is %llu (negative as int64)", c->name, what, d,
                      (unsigned long long)v);
    if (v && nz > (uint64_t)INT64_MAX / v)
      return ts_error(TS_ERR_OVERFLOW, "%s: %s: element count overflows int64 at dimension %u", c->name, what, d);
    nelem *= v;
    if (v) nz *= v;
    t->ne[d] = (int64_t)v;
  }
  t->nelem = (int64_t)nelem;
  TS_TRY(rd_u32(c, &t->type, what));
  TS_TRY(rd_u64(c, &t->offset, what));
  t->known = ts_qtype_known(t->type);
  if (t->known) {
    size_t rb, nb;
    int64_t blk = ts_qtype_block_elems(t->type);
    if (t->ne[0] % blk)
      return ts_error(TS_ERR_FORMAT, "%s: %s: ne[0] = %lld is not a multiple of %s's block size %lld", c->name, what,
                      (long long)t->ne[0], ts_qtype_name(t->type), (long long)blk);
    if (ts_qtype_row_bytes(t->type, t->ne[0], &rb) != TS_OK ||
        !ts_mul_size(rb, t->ne[0] ? (size_t)(nelem / (uint64_t)t->ne[0]) : 0, &nb))
      return ts_error(TS_ERR_OVERFLOW, "%s: %s: byte size overflows size_t", c->name, what);
    t->nbytes = nb;
  }
  return TS_OK;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }
static int cmp_off(const void *a, const void *b) {
  const ts_gguf_tensor *x = *(const ts_gguf_tensor *const *)a, *y = *(const ts_gguf_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Rejects duplicate names among n (sorted copy). */
static ts_status check_dups(const char *file, const char **names, int64_t n, const char *kind) {
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int64_t i = 1; i < n; i++)
    if (strcmp(names[i - 1], names[i]) == 0)
      return ts_error(TS_ERR_FORMAT, "%s: duplicate %s '%s'", file, kind, names[i]);
  return TS_OK;
}

static ts_status set_alignment(ts_gguf *g) {
  g->alignment = TS_GGUF_DEFAULT_ALIGNMENT;
  int64_t i = ts_gguf_kv_find(g, "general.alignment");
  if (i < 0) return TS_OK;
  const ts__gguf_kv *kv = &g->kv[i];
  if (kv->type != TS_GGUF_U32)
    return ts_error(TS_ERR_FORMAT, "%s: general.alignment has type %s (must be u32)", g->name,
                    ts_gguf_vtype_name(kv->type));
  uint32_t a;
  memcpy(&a, kv->raw, 4);
  if (a == 0 || (a & (a - 1)))
    return ts_error(TS_ERR_FORMAT, "%s: general.alignment is %u (must be a power of two)", g->name, a);
  g->alignment = a;
  return TS_OK;
}

/* Offsets aligned, extents inside the file, no overlap between tensors. */
static ts_status check_data(ts_gguf *g) {
  size_t avail = g->size >= g->data_off ? g->size - g->data_off : 0;
  if (g->ntensors && g->data_off > g->size)
    return ts_error(TS_ERR_TRUNCATED, "%s: data section would start at byte %zu, past the end of the file (%zu bytes)",
                    g->name, g->data_off, g->size);
  const ts_gguf_tensor **byoff = ts_malloc((size_t)(g->ntensors ? g->ntensors : 1) * sizeof *byoff);
  if (!byoff) return ts_error(TS_ERR_OOM, "%s: out of memory", g->name);
  int64_t n = 0;
  ts_status s = TS_OK;
  for (int64_t i = 0; i < g->ntensors && s == TS_OK; i++) {
    ts_gguf_tensor *t = &g->tensors[i];
    if (t->offset % g->alignment)
      s = ts_error(TS_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %zu", g->name,
                   t->name, (unsigned long long)t->offset, g->alignment);
    else if (t->offset > avail || t->nbytes > avail - t->offset)
      s = ts_error(TS_ERR_TRUNCATED, "%s: tensor '%s': data [%llu, +%zu) lies beyond the data section (%zu bytes)",
                   g->name, t->name, (unsigned long long)t->offset, t->nbytes, avail);
    else if (t->known) {
      t->data = g->base + g->data_off + t->offset;
      if (t->nbytes) byoff[n++] = t;
    }
  }
  if (s == TS_OK) {
    qsort(byoff, (size_t)n, sizeof *byoff, cmp_off);
    for (int64_t i = 1; i < n && s == TS_OK; i++)
      if (byoff[i - 1]->offset + byoff[i - 1]->nbytes > byoff[i]->offset)
        s = ts_error(TS_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", g->name,
                     byoff[i - 1]->name, byoff[i]->name);
  }
  ts_free(byoff);
  return s;
}

ts_status ts__gguf_parse(ts_gguf *g) {
  cur c = {.p = g->base, .size = g->size, .name = g->name};
  char magic[4];
  TS_TRY(need(&c, 4, "the magic"));
  memcpy(magic, c.p, 4);
  c.pos = 4;
  if (memcmp(magic, TS__GGUF_MAGIC, 4) != 0)
    return ts_error(TS_ERR_FORMAT, "%s: bad magic %02x %02x %02x %02x (expected \"GGUF\")", g->name,
                    (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
  TS_TRY(rd_u32(&c, &g->version, "the version"));
  if (g->version == 0x02000000u || g->version == 0x03000000u)
    return ts_error(TS_ERR_UNSUPPORTED, "%s: big-endian GGUF files are not supported", g->name);
  if (g->version != 2 && g->version != 3)
    return ts_error(TS_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)", g->name, g->version);
  uint64_t nt, nkv;
  TS_TRY(rd_u64(&c, &nt, "the tensor count"));
  TS_TRY(rd_u64(&c, &nkv, "the kv count"));
  /* smallest kv: 8 (key length) + 1 (key) + 4 (type) + 1 (u8); smallest tensor info: 8 + 1 + 4 + 8 + 4 + 8 */
  if (nkv > left(&c) / 14)
    return ts_error(TS_ERR_FORMAT,
                    "%s: kv count %llu cannot fit in the %zu bytes left (file truncated or count corrupt)",
                    g->name, (unsigned long long)nkv, left(&c));
  if (nt > left(&c) / 33)
    return ts_error(TS_ERR_FORMAT,
                    "%s: tensor count %llu cannot fit in the %zu bytes left (file truncated or count corrupt)",
                    g->name, (unsigned long long)nt, left(&c));
  g->kv = ts_calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
  g->tensors = ts_calloc(nt ? (size_t)nt : 1, sizeof *g->tensors);
  size_t *offs = ts_malloc((size_t)(nkv + nt + 1) * sizeof *offs);
  const char **names = ts_malloc((size_t)(nkv + nt + 1) * sizeof *names);
  ts_status s = TS_OK;
  if (!g->kv || !g->tensors || !offs || !names) s = ts_error(TS_ERR_OOM, "%s: out of memory", g->name);
  for (uint64_t i = 0; i < nkv && s == TS_OK; i++) {
    s = parse_kv(&c, (int64_t)i, &g->kv[i], &offs[i]);
    g->nkv = (int64_t)i + 1; /* parsed entries are freed by close, also on failure */
  }
  for (uint64_t i = 0; i < nt && s == TS_OK; i++) {
    s = parse_tensor(&c, (int64_t)i, &g->tensors[i], &offs[nkv + i]);
    if (s == TS_OK) g->ntensors = (int64_t)i + 1;
  }
  g->arena = c.arena;
  if (s == TS_OK) {
    for (uint64_t i = 0; i < nkv; i++) names[i] = g->kv[i].key = c.arena + offs[i];
    s = check_dups(g->name, names, (int64_t)nkv, "key");
  }
  if (s == TS_OK) {
    for (uint64_t i = 0; i < nt; i++) names[i] = g->tensors[i].name = c.arena + offs[nkv + i];
    s = check_dups(g->name, names, (int64_t)nt, "tensor name");
  }
  if (s == TS_OK) s = set_alignment(g);
  if (s == TS_OK) {
    size_t a = g->alignment;
    g->data_off = c.pos % a ? c.pos + (a - c.pos % a) : c.pos; /* pos <= size, a <= 2^31: no overflow */
    s = check_data(g);
  }
  ts_free(offs);
  ts_free(names);
  return s;
}
