/* GGUF reader and writer: writer -> reader round trips (every kv type, arrays, every tensor type,
 * alignment 32 and 64, from memory and from a file), typed getter errors, and one hand-built bad
 * input per validation rule (plus every truncation of a valid image). */
#include "llm/gguf_internal.h"
#include "tessera/gguf.h"
#include "tst.h"

/* ---- a byte builder for hand-made images -------------------------------------------------- */

typedef struct bb {
  uint8_t p[4096];
  size_t n;
} bb;
static void b_raw(bb *b, const void *p, size_t n) {
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void b_u32(bb *b, uint32_t v) { b_raw(b, &v, 4); }
static void b_u64(bb *b, uint64_t v) { b_raw(b, &v, 8); }
static void b_str(bb *b, const char *s) {
  b_u64(b, strlen(s));
  b_raw(b, s, strlen(s));
}
static void b_hdr(bb *b, uint32_t version, uint64_t nt, uint64_t nkv) {
  b->n = 0;
  b_raw(b, "GGUF", 4);
  b_u32(b, version);
  b_u64(b, nt);
  b_u64(b, nkv);
}
static void b_kv_u32(bb *b, const char *k, uint32_t v) {
  b_str(b, k);
  b_u32(b, TS_GGUF_U32);
  b_u32(b, v);
}
/* tensor info: 1-d f32 of n elements at offset */
/* a tensor info of nd dimensions dims[0..nd) */
static void b_tensor_nd(bb *b, const char *name, uint32_t nd, const uint64_t *dims, uint32_t type, uint64_t off) {
  b_str(b, name);
  b_u32(b, nd);
  for (uint32_t d = 0; d < nd; d++) b_u64(b, dims[d]);
  b_u32(b, type);
  b_u64(b, off);
}
static void b_tensor(bb *b, const char *name, uint32_t type, uint64_t n, uint64_t off) {
  b_tensor_nd(b, name, 1, &n, type, off);
}
static void b_pad(bb *b, size_t a) {
  while (b->n % a) b->p[b->n++] = 0;
}
static void b_zeros(bb *b, size_t n) {
  memset(b->p + b->n, 0, n);
  b->n += n;
}

static ts_status open_bb(const bb *b, ts_gguf **g) { return ts_gguf_open_mem(g, b->p, b->n, "bad.gguf"); }

/* Expects failure with `code` and a message containing `needle`; closes anything that opened. */
#define BAD(b, code, needle)                                                                                  \
  do {                                                                                                        \
    ts_gguf *g_ = NULL;                                                                                       \
    ts_status s_ = open_bb(b, &g_);                                                                           \
    CHECK(s_ == (code) && strstr(ts_last_error(), needle) && !g_, "expected %s with '%s', got %s: %s",       \
          ts_strerror(code), needle, ts_strerror(s_), ts_last_error());                                      \
    ts_gguf_close(g_);                                                                                        \
  } while (0)

/* ---- round trip ------------------------------------------------------------------------------ */

static const uint32_t kTT[] = {TS_QT_F32, TS_QT_F16, TS_QT_BF16, TS_QT_Q8_0, TS_QT_Q4_0, TS_QT_Q4_1, TS_QT_Q6_K};

static void fill_bytes(uint8_t *p, size_t n, uint64_t seed) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)ts_rng_next(&r);
}

static void build(ts_gguf_writer *w, uint8_t **tdata, size_t *tbytes) {
  uint8_t u8 = 200, bt = 1;
  int8_t i8 = -100;
  uint16_t u16 = 60000;
  int16_t i16 = -30000;
  uint32_t u32 = 4000000000u;
  int32_t i32 = -2000000000;
  float f32 = 1.5f;
  uint64_t u64 = 18000000000000000000ull;
  int64_t i64 = -9000000000000000000ll;
  double f64 = -2.25e100;
  CHECK_OK(ts_gguf_writer_add(w, "t.u8", TS_GGUF_U8, &u8));
  CHECK_OK(ts_gguf_writer_add(w, "t.i8", TS_GGUF_I8, &i8));
  CHECK_OK(ts_gguf_writer_add(w, "t.u16", TS_GGUF_U16, &u16));
  CHECK_OK(ts_gguf_writer_add(w, "t.i16", TS_GGUF_I16, &i16));
  CHECK_OK(ts_gguf_writer_add(w, "t.u32", TS_GGUF_U32, &u32));
  CHECK_OK(ts_gguf_writer_add(w, "t.i32", TS_GGUF_I32, &i32));
  CHECK_OK(ts_gguf_writer_add(w, "t.f32", TS_GGUF_F32, &f32));
  CHECK_OK(ts_gguf_writer_add(w, "t.bool", TS_GGUF_BOOL, &bt));
  CHECK_OK(ts_gguf_writer_add(w, "t.u64", TS_GGUF_U64, &u64));
  CHECK_OK(ts_gguf_writer_add(w, "t.i64", TS_GGUF_I64, &i64));
  CHECK_OK(ts_gguf_writer_add(w, "t.f64", TS_GGUF_F64, &f64));
  CHECK_OK(ts_gguf_writer_add_str(w, "t.str", "llama", 5));
  CHECK_OK(ts_gguf_writer_add_str(w, "t.empty", "", 0));
  int32_t ai[5] = {3, -1, 4, -1, 5};
  float af[3] = {0.5f, -0.25f, 8};
  uint8_t ab[4] = {1, 0, 0, 1};
  CHECK_OK(ts_gguf_writer_add_arr(w, "a.i32", TS_GGUF_I32, ai, 5));
  CHECK_OK(ts_gguf_writer_add_arr(w, "a.f32", TS_GGUF_F32, af, 3));
  CHECK_OK(ts_gguf_writer_add_arr(w, "a.bool", TS_GGUF_BOOL, ab, 4));
  CHECK_OK(ts_gguf_writer_add_arr(w, "a.none", TS_GGUF_U64, NULL, 0));
  const char *toks[4] = {"<s>", "", "hello", "\xc4\xa0world"};
  CHECK_OK(ts_gguf_writer_add_str_arr(w, "a.str", toks, NULL, 4));
  /* errors of the writer */
  CHECK_STATUS(ts_gguf_writer_add(w, "t.u8", TS_GGUF_U8, &u8), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_gguf_writer_add(w, "general.alignment", TS_GGUF_U32, &u32), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_gguf_writer_add(w, "x", TS_GGUF_STRING, &u32), TS_ERR_INVALID_ARG);
  uint8_t two = 2;
  CHECK_STATUS(ts_gguf_writer_add(w, "x", TS_GGUF_BOOL, &two), TS_ERR_INVALID_ARG);
  /* tensors: every type, 1..4 dims */
  for (size_t i = 0; i < sizeof kTT / sizeof *kTT; i++) {
    int64_t blk = ts_qtype_block_elems(kTT[i]);
    int64_t ne[4] = {blk * (int64_t)(i % 3 + 1) * (blk == 1 ? 5 : 1), 3, 2, 2};
    int nd = (int)(i % 4) + 1;
    size_t rb;
    ts_qtype_row_bytes(kTT[i], ne[0], &rb);
    for (int d = 1; d < nd; d++) rb *= (size_t)ne[d];
    tbytes[i] = rb;
    tdata[i] = malloc(rb);
    fill_bytes(tdata[i], rb, 100 + i);
    char name[32];
    snprintf(name, sizeof name, "blk.%zu.%s", i, ts_qtype_name(kTT[i]));
    CHECK_OK(ts_gguf_writer_add_tensor(w, name, kTT[i], nd, ne, tdata[i]));
  }
  int64_t bad_ne[1] = {33};
  CHECK_ERR_CONTAINS(ts_gguf_writer_add_tensor(w, "bad", TS_QT_Q4_0, 1, bad_ne, tdata[0]), "multiple of");
  CHECK_STATUS(ts_gguf_writer_add_tensor(w, "blk.0.f32", TS_QT_F32, 1, bad_ne, tdata[0]), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_gguf_writer_add_tensor(w, "bad", 99, 1, bad_ne, tdata[0]), TS_ERR_DTYPE);
}

static void check_read(const ts_gguf *g, size_t align, uint8_t **tdata, const size_t *tbytes, const void *base) {
  CHECK(ts_gguf_version(g) == 3, "version %u", ts_gguf_version(g));
  CHECK(ts_gguf_alignment(g) == align, "alignment %zu", ts_gguf_alignment(g));
  CHECK(ts_gguf_data_offset(g) % align == 0, "data offset %zu", ts_gguf_data_offset(g));
  int64_t iv = 0;
  uint64_t uv = 0;
  uint32_t u32 = 0;
  double dv = 0;
  float fv = 0;
  bool bv = false;
  CHECK_OK(ts_gguf_get_i64(g, "t.u8", &iv));
  CHECK(iv == 200, "u8 %lld", (long long)iv);
  CHECK_OK(ts_gguf_get_i64(g, "t.i8", &iv));
  CHECK(iv == -100, "i8 %lld", (long long)iv);
  CHECK_OK(ts_gguf_get_i64(g, "t.u16", &iv));
  CHECK(iv == 60000, "u16");
  CHECK_OK(ts_gguf_get_i64(g, "t.i16", &iv));
  CHECK(iv == -30000, "i16");
  CHECK_OK(ts_gguf_get_u32(g, "t.u32", &u32));
  CHECK(u32 == 4000000000u, "u32");
  CHECK_OK(ts_gguf_get_i64(g, "t.i32", &iv));
  CHECK(iv == -2000000000, "i32");
  CHECK_OK(ts_gguf_get_f32(g, "t.f32", &fv));
  CHECK(fv == 1.5f, "f32 %g", fv);
  CHECK_OK(ts_gguf_get_bool(g, "t.bool", &bv));
  CHECK(bv, "bool");
  CHECK_OK(ts_gguf_get_u64(g, "t.u64", &uv));
  CHECK(uv == 18000000000000000000ull, "u64");
  CHECK_OK(ts_gguf_get_i64(g, "t.i64", &iv));
  CHECK(iv == -9000000000000000000ll, "i64");
  CHECK_OK(ts_gguf_get_f64(g, "t.f64", &dv));
  CHECK(dv == -2.25e100, "f64");
  const char *s = NULL;
  size_t len = 9;
  CHECK_OK(ts_gguf_get_str(g, "t.str", &s, &len));
  CHECK(len == 5 && memcmp(s, "llama", 5) == 0, "str");
  CHECK_OK(ts_gguf_get_str(g, "t.empty", &s, &len));
  CHECK(len == 0, "empty str");
  /* getter errors name the key and the type found */
  CHECK_ERR_CONTAINS(ts_gguf_get_str(g, "t.u32", &s, &len), "'t.u32' has type u32");
  CHECK_ERR_CONTAINS(ts_gguf_get_f32(g, "t.i32", &fv), "'t.i32' has type i32");
  CHECK_ERR_CONTAINS(ts_gguf_get_u32(g, "t.i8", &u32), "negative");
  CHECK_ERR_CONTAINS(ts_gguf_get_u32(g, "t.u64", &u32), "exceeds");
  CHECK_ERR_CONTAINS(ts_gguf_get_i64(g, "t.u64", &iv), "does not fit int64");
  CHECK_STATUS(ts_gguf_get_bool(g, "t.u8", &bv), TS_ERR_DTYPE);
  CHECK_ERR_CONTAINS(ts_gguf_get_i64(g, "no.such.key", &iv), "no.such.key");
  CHECK_STATUS(ts_gguf_get_i64(g, "no.such.key", &iv), TS_ERR_NOT_FOUND);
  /* arrays */
  ts_gguf_vtype et;
  uint64_t n = 0;
  CHECK_OK(ts_gguf_get_arr(g, "a.i32", &et, &n));
  CHECK(et == TS_GGUF_I32 && n == 5, "a.i32 %d %llu", et, (unsigned long long)n);
  CHECK_OK(ts_gguf_arr_int(g, "a.i32", 4, &iv));
  CHECK(iv == 5, "a.i32[4]");
  CHECK_OK(ts_gguf_arr_int(g, "a.i32", 1, &iv));
  CHECK(iv == -1, "a.i32[1]");
  CHECK_STATUS(ts_gguf_arr_int(g, "a.i32", 5, &iv), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_gguf_arr_f64(g, "a.f32", 2, &dv));
  CHECK(dv == 8, "a.f32[2]");
  CHECK_OK(ts_gguf_arr_int(g, "a.bool", 3, &iv));
  CHECK(iv == 1, "a.bool[3]");
  CHECK_OK(ts_gguf_get_arr(g, "a.none", &et, &n));
  CHECK(et == TS_GGUF_U64 && n == 0, "empty array");
  CHECK_OK(ts_gguf_get_arr(g, "a.str", &et, &n));
  CHECK(et == TS_GGUF_STRING && n == 4, "a.str");
  CHECK_OK(ts_gguf_arr_str(g, "a.str", 3, &s, &len));
  CHECK(len == 7 && memcmp(s, "\xc4\xa0world", 7) == 0, "a.str[3]");
  CHECK_OK(ts_gguf_arr_str(g, "a.str", 1, &s, &len));
  CHECK(len == 0, "a.str[1]");
  CHECK_ERR_CONTAINS(ts_gguf_arr_str(g, "a.i32", 0, &s, &len), "expected strings");
  CHECK_STATUS(ts_gguf_arr_f64(g, "a.str", 0, &dv), TS_ERR_DTYPE);
  CHECK_ERR_CONTAINS(ts_gguf_get_arr(g, "t.str", &et, &n), "expected array");
  /* tensors */
  CHECK(ts_gguf_tensor_count(g) == (int64_t)(sizeof kTT / sizeof *kTT), "tensor count %lld",
        (long long)ts_gguf_tensor_count(g));
  for (size_t i = 0; i < sizeof kTT / sizeof *kTT; i++) {
    char name[32];
    snprintf(name, sizeof name, "blk.%zu.%s", i, ts_qtype_name(kTT[i]));
    const ts_gguf_tensor *t = NULL;
    CHECK_OK(ts_gguf_find_tensor(g, name, &t));
    if (!t) continue;
    CHECK(t->type == kTT[i] && t->known && t->n_dims == (int)(i % 4) + 1 && t->nbytes == tbytes[i], "tensor %s info",
          name);
    CHECK(t->data && memcmp(t->data, tdata[i], tbytes[i]) == 0, "tensor %s data", name);
    CHECK(((const uint8_t *)t->data - (const uint8_t *)base) % align == 0, "tensor %s aligned", name);
    int64_t ne = 1;
    for (int d = 0; d < t->n_dims; d++) ne *= t->ne[d];
    CHECK(ne == t->nelem, "nelem");
  }
  const ts_gguf_tensor *t;
  CHECK_ERR_CONTAINS(ts_gguf_find_tensor(g, "missing.weight", &t), "missing.weight");
  CHECK(ts_gguf_tensor_at(g, -1) == NULL && ts_gguf_tensor_at(g, 999) == NULL, "tensor_at range");
}

static void test_roundtrip(void) {
  const size_t aligns[] = {32, 64, 1};
  for (size_t ai = 0; ai < 3; ai++) {
    ts_gguf_writer *w = NULL;
    CHECK_OK(ts_gguf_writer_create(&w, aligns[ai]));
    if (!w) return;
    uint8_t *tdata[8];
    size_t tbytes[8];
    build(w, tdata, tbytes);
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(ts_gguf_writer_to_mem(w, &img, &n));
    ts_gguf *g = NULL;
    CHECK_OK(ts_gguf_open_mem(&g, img, n, "rt.gguf"));
    if (g) {
      check_read(g, aligns[ai], tdata, tbytes, img);
      /* alignment != 32 is stored as general.alignment */
      uint32_t a = 0;
      ts_status s = ts_gguf_get_u32(g, "general.alignment", &a);
      CHECK(aligns[ai] == 32 ? s == TS_ERR_NOT_FOUND : (s == TS_OK && a == aligns[ai]), "general.alignment");
      ts_gguf_close(g);
    }
    /* through a file (mmap path) */
    char path[2048];
    tst_tmp_path(path, sizeof path, "gguf_rt.gguf");
    CHECK_OK(ts_gguf_writer_write(w, path));
    g = NULL;
    CHECK_OK(ts_gguf_open(&g, path));
    if (g) {
      CHECK(ts_gguf_file_size(g) == n, "file size");
      const ts_gguf_tensor *t0 = ts_gguf_tensor_at(g, 0);
      check_read(g, aligns[ai], tdata, tbytes, (const uint8_t *)t0->data - ts_gguf_data_offset(g) - t0->offset);
      ts_gguf_close(g);
    }
    free(img);
    for (size_t i = 0; i < sizeof kTT / sizeof *kTT; i++) free(tdata[i]);
    ts_gguf_writer_destroy(w);
  }
  ts_gguf_writer *w;
  CHECK_STATUS(ts_gguf_writer_create(&w, 48), TS_ERR_INVALID_ARG);
  ts_gguf *g;
  CHECK_STATUS(ts_gguf_open(&g, "/nonexistent/dir/x.gguf"), TS_ERR_NOT_FOUND);
}

/* Every prefix of a valid image fails cleanly (and the full image opens). */
static void test_truncation(void) {
  ts_gguf_writer *w = NULL;
  CHECK_OK(ts_gguf_writer_create(&w, 32));
  uint32_t v = 7;
  CHECK_OK(ts_gguf_writer_add(w, "k.u32", TS_GGUF_U32, &v));
  const char *toks[2] = {"ab", "c"};
  CHECK_OK(ts_gguf_writer_add_str_arr(w, "k.toks", toks, NULL, 2));
  float data[32] = {0};
  int64_t ne[2] = {32, 1};
  CHECK_OK(ts_gguf_writer_add_tensor(w, "w", TS_QT_F32, 2, ne, data));
  void *img;
  size_t n;
  CHECK_OK(ts_gguf_writer_to_mem(w, &img, &n));
  int bad = 0;
  for (size_t len = 0; len < n; len++) {
    ts_gguf *g = NULL;
    ts_status s = ts_gguf_open_mem(&g, img, len, "cut.gguf");
    if (s == TS_OK || g || !ts_last_error()[0]) bad++;
    ts_gguf_close(g);
  }
  CHECK(bad == 0, "%d truncated images were accepted", bad);
  ts_gguf *g = NULL;
  CHECK_OK(ts_gguf_open_mem(&g, img, n, "full.gguf"));
  ts_gguf_close(g);
  free(img);
  ts_gguf_writer_destroy(w);
}

static void test_bad(void) {
  bb b;
  /* header */
  b_hdr(&b, 3, 0, 0);
  b.p[0] = 'X';
  BAD(&b, TS_ERR_FORMAT, "bad magic");
  b_hdr(&b, 1, 0, 0);
  BAD(&b, TS_ERR_UNSUPPORTED, "version 1");
  b_hdr(&b, 4, 0, 0);
  BAD(&b, TS_ERR_UNSUPPORTED, "version 4");
  b_hdr(&b, 0x03000000u, 0, 0);
  BAD(&b, TS_ERR_UNSUPPORTED, "big-endian");
  b_hdr(&b, 3, 0, 0);
  b.n = 20;
  BAD(&b, TS_ERR_TRUNCATED, "kv count");
  /* v2 and an empty v3 file are fine */
  {
    ts_gguf *g = NULL;
    b_hdr(&b, 2, 0, 0);
    CHECK_OK(open_bb(&b, &g));
    CHECK(g && ts_gguf_version(g) == 2 && ts_gguf_kv_count(g) == 0, "v2 empty");
    ts_gguf_close(g);
  }
  /* absurd counts */
  b_hdr(&b, 3, 0, 1ull << 60);
  BAD(&b, TS_ERR_FORMAT, "kv count");
  b_hdr(&b, 3, 1ull << 40, 0);
  BAD(&b, TS_ERR_FORMAT, "tensor count");
  /* string length beyond the file */
  b_hdr(&b, 3, 0, 1);
  b_u64(&b, 1000);
  b_raw(&b, "abc", 3);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_TRUNCATED, "string length 1000");
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, TS_GGUF_STRING);
  b_u64(&b, UINT64_MAX);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_TRUNCATED, "string length");
  /* empty key */
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "");
  b_u32(&b, TS_GGUF_U8);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_FORMAT, "empty");
  /* unknown kv type */
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, 13);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_FORMAT, "unknown value type 13");
  /* unknown array element type */
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, TS_GGUF_ARRAY);
  b_u32(&b, 77);
  b_u64(&b, 1);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_FORMAT, "element type 77");
  /* array longer than the file */
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, TS_GGUF_ARRAY);
  b_u32(&b, TS_GGUF_U32);
  b_u64(&b, 1ull << 61);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_TRUNCATED, "array of");
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, TS_GGUF_ARRAY);
  b_u32(&b, TS_GGUF_STRING);
  b_u64(&b, 1ull << 61);
  b_zeros(&b, 8);
  BAD(&b, TS_ERR_FORMAT, "strings cannot fit");
  /* bool that is not 0/1 (scalar and element) */
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, TS_GGUF_BOOL);
  b_raw(&b, "\x02", 1);
  BAD(&b, TS_ERR_FORMAT, "bool value is 2");
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, TS_GGUF_ARRAY);
  b_u32(&b, TS_GGUF_BOOL);
  b_u64(&b, 2);
  b_raw(&b, "\x01\x05", 2);
  BAD(&b, TS_ERR_FORMAT, "bool element 1");
  /* nested arrays: depth 2 accepted (elements refused by the getters), depth 5 rejected */
  {
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "nest");
    b_u32(&b, TS_GGUF_ARRAY);
    b_u32(&b, TS_GGUF_ARRAY);
    b_u64(&b, 2);
    for (int i = 0; i < 2; i++) {
      b_u32(&b, TS_GGUF_U16);
      b_u64(&b, 1);
      b_raw(&b, "\x01\x00", 2);
    }
    ts_gguf *g = NULL;
    CHECK_OK(open_bb(&b, &g));
    if (g) {
      ts_gguf_vtype et;
      uint64_t n;
      int64_t iv;
      CHECK_OK(ts_gguf_get_arr(g, "nest", &et, &n));
      CHECK(et == TS_GGUF_ARRAY && n == 2, "nested array info");
      CHECK_STATUS(ts_gguf_arr_int(g, "nest", 0, &iv), TS_ERR_DTYPE);
      ts_gguf_close(g);
    }
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "deep");
    b_u32(&b, TS_GGUF_ARRAY);
    for (int d = 0; d < 5; d++) {
      b_u32(&b, TS_GGUF_ARRAY);
      b_u64(&b, 1);
    }
    b_u32(&b, TS_GGUF_U8);
    b_u64(&b, 0);
    BAD(&b, TS_ERR_FORMAT, "nested deeper");
  }
  /* duplicate key */
  b_hdr(&b, 3, 0, 2);
  b_kv_u32(&b, "same", 1);
  b_kv_u32(&b, "same", 2);
  BAD(&b, TS_ERR_FORMAT, "duplicate key 'same'");
  /* general.alignment: wrong type, not a power of two */
  b_hdr(&b, 3, 0, 1);
  b_str(&b, "general.alignment");
  b_u32(&b, TS_GGUF_U64);
  b_u64(&b, 32);
  BAD(&b, TS_ERR_FORMAT, "general.alignment has type u64");
  b_hdr(&b, 3, 0, 1);
  b_kv_u32(&b, "general.alignment", 48);
  BAD(&b, TS_ERR_FORMAT, "power of two");
  b_hdr(&b, 3, 0, 1);
  b_kv_u32(&b, "general.alignment", 0);
  BAD(&b, TS_ERR_FORMAT, "power of two");
  /* tensors: n_dims 0 and 5 */
  static const uint64_t ones[5] = {1, 1, 1, 1, 1};
  for (uint32_t nd = 0; nd <= 5; nd += 5) {
    b_hdr(&b, 3, 1, 0);
    b_tensor_nd(&b, "t", nd, ones, TS_QT_F32, 0);
    b_pad(&b, 32);
    b_zeros(&b, 32);
    BAD(&b, TS_ERR_FORMAT, "n_dims");
  }
  /* dims overflow and a dim negative as int64 */
  static const uint64_t big[3] = {0, 1ull << 40, 1ull << 40};
  b_hdr(&b, 3, 1, 0);
  b_tensor_nd(&b, "t", 2, big + 1, TS_QT_F32, 0);
  BAD(&b, TS_ERR_OVERFLOW, "overflows");
  /* ... also behind a zero dimension (0 elements, yet no shape to index or re-encode; fuzz_gguf) */
  b_hdr(&b, 3, 1, 0);
  b_tensor_nd(&b, "t", 3, big, TS_QT_F32, 0);
  BAD(&b, TS_ERR_OVERFLOW, "overflows int64 at dimension 2");
  b_hdr(&b, 3, 1, 0);
  b_tensor(&b, "t", TS_QT_F32, 1ull << 63, 0);
  BAD(&b, TS_ERR_FORMAT, "negative");
  /* byte size overflow: 2^62 f32 elements */
  b_hdr(&b, 3, 1, 0);
  b_tensor(&b, "t", TS_QT_F32, 1ull << 62, 0);
  BAD(&b, TS_ERR_OVERFLOW, "byte size");
  /* ne[0] not a multiple of the block size */
  b_hdr(&b, 3, 1, 0);
  b_tensor(&b, "t", TS_QT_Q4_0, 48, 0);
  b_pad(&b, 32);
  b_zeros(&b, 64);
  BAD(&b, TS_ERR_FORMAT, "block size 32");
  /* misaligned offset */
  b_hdr(&b, 3, 1, 0);
  b_tensor(&b, "t", TS_QT_F32, 4, 8);
  b_pad(&b, 32);
  b_zeros(&b, 64);
  BAD(&b, TS_ERR_FORMAT, "not a multiple of the alignment");
  /* data out of bounds */
  b_hdr(&b, 3, 1, 0);
  b_tensor(&b, "t", TS_QT_F32, 16, 0);
  b_pad(&b, 32);
  b_zeros(&b, 60);
  BAD(&b, TS_ERR_TRUNCATED, "beyond the data section");
  b_hdr(&b, 3, 1, 0);
  b_tensor(&b, "t", TS_QT_F32, 1, 1ull << 62);
  b_pad(&b, 32);
  b_zeros(&b, 32);
  BAD(&b, TS_ERR_TRUNCATED, "beyond the data section");
  /* overlap */
  b_hdr(&b, 3, 2, 0);
  b_tensor(&b, "a", TS_QT_F32, 16, 0);
  b_tensor(&b, "b", TS_QT_F32, 16, 32);
  b_pad(&b, 32);
  b_zeros(&b, 128);
  BAD(&b, TS_ERR_FORMAT, "overlap");
  /* duplicate tensor name */
  b_hdr(&b, 3, 2, 0);
  b_tensor(&b, "a", TS_QT_F32, 8, 0);
  b_tensor(&b, "a", TS_QT_F32, 8, 32);
  b_pad(&b, 32);
  b_zeros(&b, 64);
  BAD(&b, TS_ERR_FORMAT, "duplicate tensor name 'a'");
  /* a name with a NUL byte */
  b_hdr(&b, 3, 1, 0);
  b_u64(&b, 3);
  b_raw(&b, "a\0b", 3);
  b_u32(&b, 1);
  b_u64(&b, 8);
  b_u32(&b, TS_QT_F32);
  b_u64(&b, 0);
  b_pad(&b, 32);
  b_zeros(&b, 32);
  BAD(&b, TS_ERR_FORMAT, "NUL byte");
  /* unknown tensor type: kept, marked unknown, no data pointer; a known neighbour still works */
  {
    b_hdr(&b, 3, 2, 0);
    b_tensor(&b, "odd", 99, 64, 64);
    b_tensor(&b, "w", TS_QT_F32, 8, 0);
    b_pad(&b, 32);
    b_zeros(&b, 96);
    ts_gguf *g = NULL;
    CHECK_OK(open_bb(&b, &g));
    if (g) {
      const ts_gguf_tensor *t = NULL;
      CHECK_OK(ts_gguf_find_tensor(g, "odd", &t));
      CHECK(t && !t->known && t->type == 99 && !t->data && t->nbytes == 0, "unknown type kept");
      CHECK_OK(ts_gguf_find_tensor(g, "w", &t));
      CHECK(t && t->known && t->data && t->nbytes == 32, "known neighbour");
      ts_gguf_close(g);
    }
  }
}

int main(void) {
  test_roundtrip();
  test_truncation();
  test_bad();
  return tst_finish();
}
