/* io: .npy round trips for every dtype and edge shapes, headers exactly as numpy writes them,
 * one check per malformed-input case; Matrix Market fields/symmetries/expansion and every bad
 * case (with line numbers); JSON parse positions and typed lookups; failed writes leave the old
 * file intact (forced with RLIMIT_FSIZE so the failure happens mid-write). */
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "io/json_internal.h"
#include "tst.h"

static char *read_all(const char *path, size_t *n) {
  char *d = NULL;
  if (ts_read_file(path, &d, n) != TS_OK) return NULL;
  return d;
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

static bool no_temp_left(const char *path) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld", path, (long)getpid(), (long)gettid()); /* the writer's name for it */
  return !file_exists(tmp);
}

/* A .npy image: preamble for version major.minor, `dict` padded with spaces and '\n' to a
 * multiple of `align` (align 0: dict verbatim), then dlen bytes of data. */
static unsigned char *npy_img(int major, int minor, const char *dict, size_t align, const void *data, size_t dlen,
                              size_t *len) {
  size_t pre = major == 1 ? 10 : 12, d = strlen(dict), h = d;
  if (align) h = ((pre + d + 1 + align - 1) / align) * align - pre;
  unsigned char *b = malloc(pre + h + dlen + 1);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)major, b[7] = (unsigned char)minor;
  for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(h >> (8 * i));
  memcpy(b + pre, dict, d);
  if (align) memset(b + pre + d, ' ', h - d - 1), b[pre + h - 1] = '\n';
  if (dlen) memcpy(b + pre + h, data, dlen);
  *len = pre + h + dlen;
  return b;
}

/* Reads an image built from a dict and `dlen` zero data bytes; returns the status. */
static ts_status npy_try(int major, const char *dict, size_t dlen) {
  static unsigned char zeros[4096];
  size_t n;
  unsigned char *b = npy_img(major, 0, dict, 64, zeros, dlen, &n);
  ts_tensor t;
  ts_status s = ts_npy_read_mem(b, n, "bad.npy", &t);
  ts_tensor_free(&t);
  free(b);
  return s;
}

static void test_npy_roundtrip(void) {
  static const ts_dtype types[] = {TS_BOOL, TS_U8, TS_I8, TS_I32, TS_I64, TS_F16, TS_F32, TS_F64};
  static const struct { int nd; int64_t s[6]; } shapes[] = {
      {0, {0}}, {1, {0}}, {1, {5}}, {2, {3, 4}}, {3, {2, 0, 3}}, {3, {7, 3, 5}}, {6, {1, 2, 1, 3, 1, 2}}, {2, {1, 1}},
  };
  char path[2048];
  tst_tmp_path(path, sizeof path, "io_roundtrip.npy");
  ts_rng rng;
  ts_rng_seed(&rng, 42);
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      ts_tensor a, b;
      CHECK_OK(ts_tensor_alloc(&a, types[ti], shapes[si].nd, shapes[si].s));
      size_t nb = ts_tensor_nbytes(&a);
      unsigned char *p = a.data;
      for (size_t i = 0; i < nb; i++) p[i] = types[ti] == TS_BOOL ? (unsigned char)(ts_rng_next(&rng) & 1) : (unsigned char)ts_rng_next(&rng);
      CHECK_OK(ts_npy_write(path, &a));
      memset(&b, 0x5A, sizeof b);
      CHECK_OK(ts_npy_read(path, &b));
      bool same = b.dtype == a.dtype && b.ndim == a.ndim && ts_tensor_nbytes(&b) == nb;
      for (int d = 0; same && d < a.ndim; d++) same = b.shape[d] == a.shape[d] && b.strides[d] == a.strides[d];
      CHECK(same && (nb == 0 || memcmp(a.data, b.data, nb) == 0), "%s shape #%zu round trip", ts_dtype_name(types[ti]), si);
      CHECK(((uintptr_t)b.data % TS_ALIGN) == 0, "aligned data");
      /* the file: version 1.0, data offset a multiple of 64, header ends with '\n' */
      size_t fn;
      char *f = read_all(path, &fn);
      size_t off = f && fn >= 10 ? 10 + ((unsigned char)f[8] | (size_t)(unsigned char)f[9] << 8) : 0;
      CHECK(f && f[6] == 1 && f[7] == 0 && off % 64 == 0 && off + nb == fn && f[off - 1] == '\n', "file layout");
      free(f);
      ts_tensor_free(&a);
      ts_tensor_free(&b);
    }
  }
  CHECK(no_temp_left(path), "temp file removed");
}

static void test_npy_numpy_files(void) {
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i * 0.5f - 1.0f;
  /* Exactly what numpy 1.x writes for np.save(f, v.reshape(3, 4)) with a float32 C array:
   * 118-byte header ('v' = 0x76), total 128 bytes before the data. */
  static const char numpy_hdr[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  CHECK(sizeof numpy_hdr - 1 == 69, "header literal is %zu bytes", sizeof numpy_hdr - 1);
  unsigned char img[128 + 48];
  memcpy(img, numpy_hdr, 69);
  memset(img + 69, ' ', 58); /* numpy pads with spaces and ends the header with '\n' */
  img[127] = '\n';
  memcpy(img + 128, v, 48);
  ts_tensor t;
  CHECK_OK(ts_npy_read_mem(img, sizeof img, "numpy.npy", &t));
  CHECK(t.dtype == TS_F32 && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 4 && memcmp(t.data, v, 48) == 0, "numpy 1.x file");
  /* Our writer produces the same bytes. */
  char path[2048];
  tst_tmp_path(path, sizeof path, "io_numpy.npy");
  CHECK_OK(ts_npy_write(path, &t));
  size_t fn;
  char *f = read_all(path, &fn);
  CHECK(f && fn == sizeof img && memcmp(f, img, sizeof img) == 0, "writer matches numpy's bytes");
  free(f);
  ts_tensor_free(&t);

  /* Version 2.0 (u32 header length) and 3.0 (utf-8 header), as numpy writes them when forced. */
  for (int major = 2; major <= 3; major++) {
    size_t n;
    unsigned char *b = npy_img(major, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 64, v, 48, &n);
    CHECK(n == 128 + 48 && b[8] == 116 && b[11] == 0, "v%d image layout", major);
    CHECK_OK(ts_npy_read_mem(b, n, "v2.npy", &t));
    CHECK(t.ndim == 2 && t.shape[1] == 4 && memcmp(t.data, v, 48) == 0, "version %d.0", major);
    ts_tensor_free(&t);
    free(b);
  }
  /* Older numpy aligned to 16 bytes; Python 2 numpy wrote 'L' suffixes; keys in any order, double
   * quotes, no spaces, no trailing comma, extra whitespace, 0-d and 1-d tuples. */
  static const struct { const char *dict; size_t align; int nd; int64_t s0; ts_dtype dt; size_t bytes; } ok[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 16, 2, 3, TS_F32, 48},
      {"{'descr':'<i8','shape':(2L, 3L),'fortran_order':False}", 64, 2, 2, TS_I64, 48},
      {"{\"shape\": (6,), \"fortran_order\": False, \"descr\": \"<f2\"}", 64, 1, 6, TS_F16, 12},
      {"  {  'fortran_order' :False ,'shape' : ( 5 , ) , 'descr' : '|u1' ,  }  ", 64, 1, 5, TS_U8, 5},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 64, 0, 0, TS_F64, 8},
      {"{'descr': '<u1', 'fortran_order': False, 'shape': (4,), }", 64, 1, 4, TS_U8, 4},
      {"{'descr': '>i1', 'fortran_order': False, 'shape': (4,), }", 64, 1, 4, TS_I8, 4},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,3,), }", 0, 2, 2, TS_I32, 24},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4), }", 64, 2, 0, TS_F32, 0},
  };
  static unsigned char data[64];
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    size_t n;
    unsigned char *b = npy_img(1, 0, ok[i].dict, ok[i].align, data, ok[i].bytes, &n);
    CHECK_OK(ts_npy_read_mem(b, n, "ok.npy", &t));
    CHECK(t.dtype == ok[i].dt && t.ndim == ok[i].nd && (t.ndim == 0 || t.shape[0] == ok[i].s0) &&
              ts_tensor_nbytes(&t) == ok[i].bytes, "header %zu: %s", i, ok[i].dict);
    ts_tensor_free(&t);
    free(b);
  }
  /* bool: any nonzero byte is True (as numpy reads it); stored as 0/1 */
  unsigned char bools[4] = {0, 1, 2, 255};
  size_t n;
  unsigned char *b = npy_img(1, 0, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", 64, bools, 4, &n);
  CHECK_OK(ts_npy_read_mem(b, n, "bool.npy", &t));
  const unsigned char *tb = t.data;
  CHECK(t.dtype == TS_BOOL && tb[0] == 0 && tb[1] == 1 && tb[2] == 1 && tb[3] == 1, "bool normalized");
  ts_tensor_free(&t);
  free(b);
}

static void test_npy_bad(void) {
  ts_tensor t;
  size_t n;
  unsigned char *b;
#define DICT(shape, descr, fo) "{'descr': '" descr "', 'fortran_order': " fo ", 'shape': " shape ", }"
  /* preamble */
  CHECK_STATUS(ts_npy_read_mem("", 0, "e.npy", &t), TS_ERR_TRUNCATED);
  CHECK_STATUS(ts_npy_read_mem("PK\x03\x04 not npy", 15, "z.npy", &t), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(ts_npy_read_mem("\x93NUMPZ\x01\x00\x00\x00", 10, "z.npy", &t), "z.npy: not a .npy file (bad magic");
  CHECK_STATUS(ts_npy_read_mem("\x93NUMPY\x01", 7, "p.npy", &t), TS_ERR_TRUNCATED);
  b = npy_img(1, 0, DICT("(1,)", "<f4", "False"), 64, "abcd", 4, &n);
  b[6] = 4;
  CHECK_STATUS(ts_npy_read_mem(b, n, "v4.npy", &t), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(ts_npy_read_mem(b, n, "v4.npy", &t), "unsupported .npy format version 4.0");
  b[6] = 1, b[7] = 1;
  CHECK_ERR_CONTAINS(ts_npy_read_mem(b, n, "v11.npy", &t), "version 1.1");
  b[7] = 0;
  CHECK_STATUS(ts_npy_read_mem(b, 40, "cut.npy", &t), TS_ERR_TRUNCATED);
  CHECK_ERR_CONTAINS(ts_npy_read_mem(b, 40, "cut.npy", &t), "header truncated: it declares 118 bytes but only 30 follow");
  free(b);
  b = npy_img(2, 0, DICT("(1,)", "<f4", "False"), 64, "abcd", 4, &n);
  CHECK_STATUS(ts_npy_read_mem(b, 11, "cut2.npy", &t), TS_ERR_TRUNCATED);
  free(b);

  /* header dict */
  CHECK_STATUS(npy_try(1, "['descr', '<f4']", 0), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(npy_try(1, "['descr', '<f4']", 0), "bad.npy: malformed .npy header: not a dict");
  CHECK_ERR_CONTAINS(npy_try(1, "{'descr': '<f4', 'fortran_order': False}", 0), "missing key 'shape'");
  CHECK_ERR_CONTAINS(npy_try(1, "{'shape': (2,), 'fortran_order': False}", 0), "missing key 'descr'");
  CHECK_ERR_CONTAINS(npy_try(1, "{'descr': '<f4', 'shape': (2,)}", 8), "missing key 'fortran_order'");
  CHECK_ERR_CONTAINS(npy_try(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8), "unexpected key 'x'");
  CHECK_ERR_CONTAINS(npy_try(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8), "'descr' appears twice");
  CHECK_STATUS(npy_try(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(npy_try(1, "{'descr': '<f4", 8), "expected the closing quote");
  CHECK_STATUS(npy_try(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8), TS_ERR_FORMAT);
  CHECK_STATUS(npy_try(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", 8), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(2,)", "<f4", "maybe"), 8), "expected True or False for 'fortran_order'");
  CHECK_STATUS(npy_try(1, DICT("(2,)", "<f4", "True"), 8), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(2,)", "<f4", "True"), 8), "Fortran-ordered arrays are not supported: bad.npy");
  /* dtypes */
  CHECK_STATUS(npy_try(1, DICT("(2,)", ">f4", "False"), 8), TS_ERR_DTYPE);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(2,)", ">f4", "False"), 8), "big-endian dtype '>f4'");
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(2,)", "<c8", "False"), 16), "unsupported .npy dtype '<c8'");
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(2,)", "|f4", "False"), 8), "'|f4'");
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(2,)", "<U10", "False"), 80), "'<U10'");
  CHECK_STATUS(npy_try(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8), TS_ERR_DTYPE);
  /* shapes */
  CHECK_STATUS(npy_try(1, DICT("(1, 1, 1, 1, 1, 1, 1)", "<f4", "False"), 4), TS_ERR_SHAPE);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(1, 1, 1, 1, 1, 1, 1)", "<f4", "False"), 4), "7 dimensions; at most 6");
  CHECK_STATUS(npy_try(1, DICT("(3, -4)", "<f4", "False"), 0), TS_ERR_SHAPE);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(3, -4)", "<f4", "False"), 0), "negative extent '-4'");
  CHECK_STATUS(npy_try(1, DICT("(3, x)", "<f4", "False"), 0), TS_ERR_FORMAT);
  CHECK_STATUS(npy_try(1, DICT("(3.5,)", "<f4", "False"), 0), TS_ERR_FORMAT);
  CHECK_STATUS(npy_try(1, DICT("(3, 4", "<f4", "False"), 0), TS_ERR_FORMAT);
  CHECK_STATUS(npy_try(1, DICT("[3, 4]", "<f4", "False"), 0), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(5)", "<f4", "False"), 20), "shape (5) is not a tuple");
  CHECK_STATUS(npy_try(1, DICT("(99999999999999999999,)", "<f4", "False"), 0), TS_ERR_OVERFLOW);
  CHECK_STATUS(npy_try(1, DICT("(1099511627776, 1099511627776)", "<f4", "False"), 0), TS_ERR_OVERFLOW);
  CHECK_STATUS(npy_try(1, DICT("(4611686018427387904,)", "<f8", "False"), 0), TS_ERR_OVERFLOW);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(4611686018427387904,)", "<f8", "False"), 0), "bad.npy: shape (4611686018427387904,) <f8");
  /* data block */
  CHECK_STATUS(npy_try(1, DICT("(3, 4)", "<f4", "False"), 40), TS_ERR_TRUNCATED);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(3, 4)", "<f4", "False"), 40), "data truncated: shape (3, 4) <f4 needs 48 bytes, file has 40");
  CHECK_STATUS(npy_try(1, DICT("(3, 4)", "<f4", "False"), 52), TS_ERR_SHAPE);
  CHECK_ERR_CONTAINS(npy_try(1, DICT("(3, 4)", "<f4", "False"), 52), "(4 extra)");
  CHECK_STATUS(npy_try(1, DICT("()", "<f8", "False"), 0), TS_ERR_TRUNCATED);
  CHECK(t.data == NULL && t.ndim == 0, "out cleared on error");
#undef DICT

  /* files */
  char path[2048];
  tst_tmp_path(path, sizeof path, "io_missing_dir/none.npy");
  CHECK_STATUS(ts_npy_read(path, &t), TS_ERR_NOT_FOUND);
  tst_tmp_path(path, sizeof path, "io_empty.npy");
  CHECK_OK(ts_write_file_atomic(path, "", 0));
  CHECK_STATUS(ts_npy_read(path, &t), TS_ERR_TRUNCATED);
  CHECK_ERR_CONTAINS(ts_npy_read(path, &t), path);
}

/* Sets the file size limit (SIGXFSZ ignored, so writes fail with EFBIG instead). */
static void fsize_limit(rlim_t lim) {
  struct rlimit r;
  getrlimit(RLIMIT_FSIZE, &r);
  r.rlim_cur = lim;
  setrlimit(RLIMIT_FSIZE, &r);
}

static void test_npy_write_bad(void) {
  char path[2048];
  tst_tmp_path(path, sizeof path, "io_keep.npy");
  ts_tensor a, big, t;
  int64_t s1[1] = {3}, sbig[2] = {512, 512};
  CHECK_OK(ts_tensor_alloc(&a, TS_I32, 1, s1));
  ((int32_t *)a.data)[2] = 7;
  CHECK_OK(ts_npy_write(path, &a));
  size_t n0;
  char *before = read_all(path, &n0);

  ts_tensor h;
  CHECK_OK(ts_tensor_alloc(&h, TS_BF16, 1, s1));
  CHECK_STATUS(ts_npy_write(path, &h), TS_ERR_DTYPE);
  CHECK_ERR_CONTAINS(ts_npy_write(path, &h), "bf16 has no .npy dtype");
  ts_tensor_free(&h);
  CHECK_OK(ts_tensor_alloc(&big, TS_F32, 2, sbig));
  big.strides[0] = 1024; /* a strided view */
  CHECK_STATUS(ts_npy_write(path, &big), TS_ERR_INVALID_ARG);
  big.strides[0] = 512;
  /* a write that fails half-way (file size limit): old file intact, no temp left */
  signal(SIGXFSZ, SIG_IGN);
  fsize_limit(4096);
  CHECK_STATUS(ts_npy_write(path, &big), TS_ERR_IO);
  fsize_limit(RLIM_INFINITY);
  size_t n1;
  char *after = read_all(path, &n1);
  CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "old file intact after failed write");
  CHECK(no_temp_left(path), "temp removed after failed write");
  CHECK_OK(ts_npy_read(path, &t));
  CHECK(t.dtype == TS_I32 && t.shape[0] == 3 && ((int32_t *)t.data)[2] == 7, "old content readable");
  ts_tensor_free(&t);
  tst_tmp_path(path, sizeof path, "io_no_such_dir/x.npy");
  CHECK_STATUS(ts_npy_write(path, &a), TS_ERR_IO);
  free(before);
  free(after);
  ts_tensor_free(&a);
  ts_tensor_free(&big);
}

/* ---- Matrix Market ---------------------------------------------------------------------- */

static ts_status mm_try(const char *text, bool expand, ts_mm_matrix *m) {
  return ts_mm_read_mem(text, strlen(text), "t.mtx", expand, m);
}

static void test_mm_read(void) {
  ts_mm_matrix m;
  const char *real = "%%MatrixMarket Matrix Coordinate REAL General\r\n% a comment\n%\n\n 3 4 3 \r\n"
                     "1 1 1.5\n3 4 -2e-3\n\n% between entries\n2 2   7";
  CHECK_OK(mm_try(real, false, &m));
  CHECK(m.rows == 3 && m.cols == 4 && m.nnz == 3 && m.field == TS_MM_REAL && m.symmetry == TS_MM_GENERAL, "real header");
  CHECK(m.row[0] == 0 && m.col[0] == 0 && m.val[0] == 1.5 && m.row[1] == 2 && m.col[1] == 3 && m.val[1] == -2e-3 &&
            m.row[2] == 1 && m.col[2] == 1 && m.val[2] == 7.0, "real entries, 0-based");
  ts_mm_free(&m);
  CHECK(m.row == NULL && m.nnz == 0, "freed");

  const char *pat = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 4\n1 1\n2 1\n3 1\n3 3\n";
  CHECK_OK(mm_try(pat, false, &m));
  CHECK(m.nnz == 4 && m.val == NULL && m.symmetry == TS_MM_SYMMETRIC && m.field == TS_MM_PATTERN, "pattern symmetric");
  ts_mm_free(&m);
  CHECK_OK(mm_try(pat, true, &m));
  CHECK(m.nnz == 6 && m.symmetry == TS_MM_GENERAL, "expanded nnz %lld", (long long)m.nnz);
  CHECK(m.row[4] == 0 && m.col[4] == 1 && m.row[5] == 0 && m.col[5] == 2, "mirrored entries");
  ts_mm_free(&m);

  const char *sym = "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 4\n2 1 -1.25\n";
  CHECK_OK(mm_try(sym, true, &m));
  CHECK(m.nnz == 3 && m.row[2] == 0 && m.col[2] == 1 && m.val[2] == -1.25 && m.val[0] == 4, "real symmetric expanded");
  ts_mm_free(&m);

  const char *in = "%%MatrixMarket matrix coordinate integer general\n2 3 2\n1 3 -42\n2 1 +9007199254740992\n";
  CHECK_OK(mm_try(in, false, &m));
  CHECK(m.field == TS_MM_INTEGER && m.val[0] == -42 && m.col[0] == 2 && m.val[1] == 9007199254740992.0, "integer");
  ts_mm_free(&m);

  CHECK_OK(mm_try("%%MatrixMarket matrix coordinate real general\n0 0 0\n", false, &m));
  CHECK(m.rows == 0 && m.nnz == 0, "empty matrix");
  ts_mm_free(&m);

  char path[2048];
  tst_tmp_path(path, sizeof path, "io_none.mtx");
  CHECK_STATUS(ts_mm_read(path, false, &m), TS_ERR_NOT_FOUND);
}

static void test_mm_bad(void) {
  ts_mm_matrix m;
#define B(f, s) "%%MatrixMarket matrix coordinate " f " " s "\n"
  CHECK_STATUS(mm_try("", false, &m), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(mm_try("3 3 1\n1 1 1\n", false, &m), "t.mtx: line 1: not a Matrix Market file");
  CHECK_ERR_CONTAINS(mm_try("%%MatrixMarket matrix coordinate real\n1 1 0\n", false, &m), "line 1: bad Matrix Market banner");
  CHECK_STATUS(mm_try("%%MatrixMarket vector coordinate real general\n1 1 0\n", false, &m), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(mm_try("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", false, &m), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(mm_try("%%MatrixMarket matrix array real general\n2 2\n", false, &m), "'array' (dense) format is not supported");
  CHECK_ERR_CONTAINS(mm_try("%%MatrixMarket matrix sparse real general\n", false, &m), "unknown Matrix Market format 'sparse'");
  CHECK_STATUS(mm_try(B("complex", "general") "1 1 1\n1 1 1 0\n", false, &m), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(mm_try(B("complex", "general"), false, &m), "field 'complex' is not supported");
  CHECK_ERR_CONTAINS(mm_try(B("float", "general"), false, &m), "unknown Matrix Market field 'float'");
  CHECK_STATUS(mm_try(B("real", "hermitian"), false, &m), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(mm_try(B("real", "hermitian"), false, &m), "symmetry 'hermitian' is not supported");
  CHECK_ERR_CONTAINS(mm_try(B("real", "Skew-Symmetric"), false, &m), "symmetry 'Skew-Symmetric' is not supported");
  CHECK_ERR_CONTAINS(mm_try(B("real", "upper"), false, &m), "unknown Matrix Market symmetry 'upper'");
  /* size line */
  CHECK_STATUS(mm_try(B("real", "general") "% only comments\n", false, &m), TS_ERR_TRUNCATED);
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "%\n3 3\n", false, &m), "line 3: bad size line: expected 'ROWS COLS NNZ', found 2");
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 -3 1\n", false, &m), "line 2: bad size line: COLS '-3'");
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 x\n", false, &m), "NNZ 'x' is not a non-negative integer");
  CHECK_STATUS(mm_try(B("real", "general") "99999999999999999999 3 1\n", false, &m), TS_ERR_OVERFLOW);
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "99999999999999999999 3 1\n", false, &m), "ROWS '99999999999999999999' does not fit");
  CHECK_ERR_CONTAINS(mm_try(B("real", "symmetric") "3 4 1\n", false, &m), "symmetric matrix must be square");
  /* NNZ above ROWS*COLS is legal (duplicates); a file too short for it fails as truncated. */
  CHECK_STATUS(mm_try(B("real", "general") "2 3 7\n", false, &m), TS_ERR_TRUNCATED);
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "2 3 7\n", false, &m), "file ends after 0 of the 7 entries");
  CHECK_OK(mm_try(B("real", "general") "1 1 2\n1 1 1.5\n1 1 2.5\n", false, &m));
  CHECK(m.nnz == 2 && m.val[0] == 1.5 && m.val[1] == 2.5, "duplicates kept as read (nnz %lld)", (long long)m.nnz);
  ts_mm_free(&m);
  /* entries */
  CHECK_STATUS(mm_try(B("real", "general") "3 3 2\n0 1 1\n1 1 1\n", false, &m), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 2\n1 1 1\n%\n2 4 1\n", false, &m), "line 5: column index 4 out of range 1..3");
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 2\n0 1 1\n", false, &m), "line 3: row index 0 out of range");
  CHECK_STATUS(mm_try(B("real", "general") "3 3 3\n1 1 1\n2 2 2\n", false, &m), TS_ERR_TRUNCATED);
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 3\n1 1 1\n2 2 2\n", false, &m), "file ends after 2 of the 3 entries declared on line 2");
  CHECK_STATUS(mm_try(B("real", "general") "3 3 1\n1 1 1\n2 2 2\n", false, &m), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 1\n1 1 1\n2 2 2\n", false, &m), "line 4: more entries than the 1 declared");
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 1\n1 1 1.2.3\n", false, &m), "line 3: bad real value '1.2.3'");
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 1\n1 1\n", false, &m), "line 3: expected 3 fields ('I J VALUE'), found 2");
  CHECK_ERR_CONTAINS(mm_try(B("pattern", "general") "3 3 1\n1 1 5\n", false, &m), "expected 2 fields ('I J'), found 3");
  CHECK_ERR_CONTAINS(mm_try(B("integer", "general") "3 3 1\n1 1 1.5\n", false, &m), "bad integer value '1.5'");
  CHECK_STATUS(mm_try(B("integer", "general") "3 3 1\n1 1 99999999999999999999\n", false, &m), TS_ERR_OVERFLOW);
  CHECK_ERR_CONTAINS(mm_try(B("integer", "general") "3 3 1\n1 1 -9007199254740993\n", false, &m), "within +-2^53");
  CHECK_ERR_CONTAINS(mm_try(B("real", "general") "3 3 1\n1 x 1\n", false, &m), "bad column index 'x'");
  CHECK_STATUS(mm_try(B("real", "symmetric") "3 3 1\n1 2 1\n", false, &m), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(mm_try(B("real", "symmetric") "3 3 1\n1 2 1\n", true, &m), "line 3: entry (1, 2) is above the diagonal");
  /* a huge declared NNZ with no data behind it: truncated, without allocating for the claim */
  CHECK_STATUS(mm_try(B("pattern", "general") "4000000000 4000000000 4000000000000000000\n1 1\n", false, &m), TS_ERR_TRUNCATED);
  CHECK(m.row == NULL && m.nnz == 0, "out cleared on error");
#undef B
}

static void test_mm_write(void) {
  char path[2048];
  tst_tmp_path(path, sizeof path, "io_rt.mtx");
  int64_t r[4] = {0, 2, 1, 2}, c[4] = {0, 0, 1, 2};
  double v[4] = {0.1, 1.0 / 3.0, -1e-300, 12345678.9};
  for (int f = TS_MM_PATTERN; f <= TS_MM_INTEGER; f++) {
    for (int sy = TS_MM_GENERAL; sy <= TS_MM_SYMMETRIC; sy++) {
      double iv[4] = {1, -2, 3, 4000000000.0};
      ts_mm_matrix m = {3, 3, 4, r, c, f == TS_MM_PATTERN ? NULL : f == TS_MM_REAL ? v : iv, (ts_mm_field)f, (ts_mm_symmetry)sy};
      ts_mm_matrix b;
      CHECK_OK(ts_mm_write(path, &m));
      CHECK_OK(ts_mm_read(path, false, &b));
      bool same = b.rows == 3 && b.cols == 3 && b.nnz == 4 && (int)b.field == f && (int)b.symmetry == sy;
      for (int k = 0; same && k < 4; k++)
        same = b.row[k] == r[k] && b.col[k] == c[k] && (f == TS_MM_PATTERN ? b.val == NULL : b.val[k] == m.val[k]);
      CHECK(same, "mm round trip field %d symmetry %d (exact doubles)", f, sy);
      ts_mm_free(&b);
    }
  }
  /* A symmetric file with a repeated off-diagonal entry expands to more entries than a general
   * 2x2 holds; the written general file must still read back (found by fuzz_mtx). */
  {
    static const char dup[] = "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 3\n2 1\n2 1\n2 1\n";
    ts_mm_matrix e, b;
    CHECK_OK(ts_mm_read_mem(dup, strlen(dup), "dup.mtx", true, &e));
    CHECK(e.nnz == 6 && e.symmetry == TS_MM_GENERAL, "duplicates mirrored (nnz %lld)", (long long)e.nnz);
    CHECK_OK(ts_mm_write(path, &e));
    CHECK_OK(ts_mm_read(path, false, &b));
    bool same = b.nnz == e.nnz;
    for (int64_t k = 0; same && k < e.nnz; k++) same = b.row[k] == e.row[k] && b.col[k] == e.col[k];
    CHECK(same, "expanded symmetric matrix with duplicates round-trips");
    ts_mm_free(&e);
    ts_mm_free(&b);
  }
  size_t n0;
  char *before = read_all(path, &n0);
  int64_t up_r[1] = {0}, up_c[1] = {1};
  ts_mm_matrix up = {2, 2, 1, up_r, up_c, v, TS_MM_REAL, TS_MM_SYMMETRIC};
  CHECK_ERR_CONTAINS(ts_mm_write(path, &up), "above the diagonal");
  ts_mm_matrix bad = {2, 2, 1, up_r, up_c, v, TS_MM_INTEGER, TS_MM_GENERAL};
  CHECK_ERR_CONTAINS(ts_mm_write(path, &bad), "is not an integer within +-2^53");
  int64_t oob[1] = {5};
  ts_mm_matrix out = {2, 2, 1, oob, up_c, v, TS_MM_REAL, TS_MM_GENERAL};
  CHECK_STATUS(ts_mm_write(path, &out), TS_ERR_INVALID_ARG);
  /* a matrix too large for the file size limit: fails mid-write, old file intact */
  enum { N = 20000 };
  int64_t *br = malloc(N * sizeof *br), *bc = malloc(N * sizeof *bc);
  double *bv = malloc(N * sizeof *bv);
  for (int k = 0; k < N; k++) br[k] = k, bc[k] = k, bv[k] = 1.0 / (k + 1);
  ts_mm_matrix large = {N, N, N, br, bc, bv, TS_MM_REAL, TS_MM_GENERAL};
  signal(SIGXFSZ, SIG_IGN);
  fsize_limit(8192);
  CHECK_STATUS(ts_mm_write(path, &large), TS_ERR_IO);
  fsize_limit(RLIM_INFINITY);
  size_t n1;
  char *after = read_all(path, &n1);
  CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0 && no_temp_left(path), "mm old file intact");
  free(before);
  free(after);
  free(br);
  free(bc);
  free(bv);
}

/* ---- JSON ------------------------------------------------------------------------------- */

static void test_json(void) {
  char path[2048];
  tst_tmp_path(path, sizeof path, "io_bad.json");
  CHECK_OK(ts_write_file_atomic(path, "{\n  \"a\": 1,\n  \"b\": tru\n}\n", 25));
  cJSON *j = NULL;
  CHECK_STATUS(ts__json_read_file(path, &j), TS_ERR_FORMAT);
  char want[2200];
  snprintf(want, sizeof want, "%s:3:8: invalid JSON near 'tru'", path);
  CHECK_ERR_CONTAINS(ts__json_read_file(path, &j), want);
  CHECK(j == NULL, "no result on error");
  CHECK_ERR_CONTAINS(ts__json_read_mem("{\"a\": [1, 2,", 12, "m.json", &j), "m.json:1:13: invalid JSON: unexpected end of text");
  CHECK_ERR_CONTAINS(ts__json_read_mem("{} x", 4, "m.json", &j), "m.json:1:4: invalid JSON near 'x'");
  CHECK_ERR_CONTAINS(ts__json_read_mem("", 0, "m.json", &j), "m.json:1:1:");
  CHECK_ERR_CONTAINS(ts__json_read_mem("{}\0{}", 5, "m.json", &j), "NUL byte");
  tst_tmp_path(path, sizeof path, "io_none.json");
  CHECK_STATUS(ts__json_read_file(path, &j), TS_ERR_NOT_FOUND);

  /* pretty atomic write, read back, typed lookups */
  tst_tmp_path(path, sizeof path, "io_ok.json");
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n", 2.5);
  cJSON_AddNumberToObject(o, "k", 12);
  cJSON_AddStringToObject(o, "s", "abc");
  cJSON_AddBoolToObject(o, "b", 1);
  cJSON_AddItemToObject(o, "arr", cJSON_CreateArray());
  CHECK_OK(ts__json_write_file(path, o));
  cJSON_Delete(o);
  size_t n;
  char *text = read_all(path, &n);
  CHECK(text && n > 2 && text[n - 1] == '\n' && strchr(text, '\t') != NULL, "pretty, newline-terminated");
  free(text);
  CHECK_OK(ts__json_read_file(path, &j));
  double d = 0;
  const char *s = NULL;
  int64_t k = 0;
  bool b = false;
  CHECK_OK(ts__json_get_number(j, "n", &d));
  CHECK_OK(ts__json_get_string(j, "s", &s));
  CHECK_OK(ts__json_get_int(j, "k", &k));
  CHECK_OK(ts__json_get_bool(j, "b", &b));
  CHECK(d == 2.5 && s && strcmp(s, "abc") == 0 && k == 12 && b, "lookups");
  CHECK_STATUS(ts__json_get_number(j, "missing", &d), TS_ERR_NOT_FOUND);
  CHECK_ERR_CONTAINS(ts__json_get_number(j, "missing", &d), "missing key 'missing'");
  CHECK_STATUS(ts__json_get_number(j, "s", &d), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(ts__json_get_number(j, "s", &d), "key 's': expected a number, found a string (\"abc\")");
  CHECK_ERR_CONTAINS(ts__json_get_string(j, "n", &s), "key 'n': expected a string, found a number (2.5)");
  CHECK_ERR_CONTAINS(ts__json_get_int(j, "n", &k), "key 'n': expected an integer, found 2.5");
  CHECK_ERR_CONTAINS(ts__json_get_bool(j, "arr", &b), "key 'arr': expected true or false, found an array");
  CHECK_STATUS(ts__json_get_number(cJSON_GetObjectItem(j, "arr"), "x", &d), TS_ERR_INVALID_ARG);
  CHECK(d == 2.5 && k == 12, "outputs untouched on error");
  cJSON_Delete(j);
  /* a failed write keeps the old file */
  size_t n0, n1;
  char *before = read_all(path, &n0);
  cJSON *big = cJSON_CreateArray();
  for (int i = 0; i < 5000; i++) cJSON_AddItemToArray(big, cJSON_CreateNumber(i * 1.5));
  signal(SIGXFSZ, SIG_IGN);
  fsize_limit(4096);
  CHECK_STATUS(ts__json_write_file(path, big), TS_ERR_IO);
  fsize_limit(RLIM_INFINITY);
  cJSON_Delete(big);
  char *after = read_all(path, &n1);
  CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0 && no_temp_left(path), "json old file intact");
  free(before);
  free(after);
}

int main(void) {
  test_npy_roundtrip();
  test_npy_numpy_files();
  test_npy_bad();
  test_npy_write_bad();
  test_mm_read();
  test_mm_bad();
  test_mm_write();
  test_json();
  return tst_finish();
}
