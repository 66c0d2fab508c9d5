/* Core: status/detail messages, sizes and overflow, tensors, contexts, CPU detection and
 * dispatch level, f16/bf16 conversions, PRNG, atomic writes, UTF-8, other processes' CPU time. */
#include <unistd.h>

#include "tst.h"

static void test_status(void) {
  ts_error_clear();
  CHECK(ts_last_error()[0] == 0, "clear");
  ts_status s = ts_error(TS_ERR_FORMAT, "bad magic in %s", "x.npy");
  CHECK(s == TS_ERR_FORMAT, "returns code");
  CHECK(strcmp(ts_last_error(), "bad magic in x.npy") == 0, "detail '%s'", ts_last_error());
  ts_error_prefix("reading %s: ", "x");
  CHECK(strcmp(ts_last_error(), "reading x: bad magic in x.npy") == 0, "prefix '%s'", ts_last_error());
  for (int i = 0; i < TS_STATUS_COUNT; i++) CHECK(strcmp(ts_strerror((ts_status)i), "unknown status") != 0, "code %d", i);
  CHECK(strcmp(ts_strerror((ts_status)999), "unknown status") == 0, "out of range");
}

static void test_tensor(void) {
  ts_tensor t;
  int64_t shape[3] = {2, 3, 5};
  CHECK_OK(ts_tensor_alloc(&t, TS_F32, 3, shape));
  CHECK(((uintptr_t)t.data % TS_ALIGN) == 0, "aligned");
  CHECK(ts_tensor_numel(&t) == 30, "numel");
  CHECK(ts_tensor_nbytes(&t) == 120, "nbytes");
  CHECK(t.strides[0] == 15 && t.strides[1] == 5 && t.strides[2] == 1, "strides");
  CHECK(ts_tensor_is_contiguous(&t), "contiguous");
  t.strides[1] = 10;
  CHECK(!ts_tensor_is_contiguous(&t), "not contiguous");
  ts_tensor_free(&t);
  int64_t empty[3] = {2, 0, 3};
  CHECK_OK(ts_tensor_alloc(&t, TS_F32, 3, empty));
  CHECK(ts_tensor_numel(&t) == 0 && ts_tensor_is_contiguous(&t), "empty tensor is contiguous");
  ts_tensor_free(&t);
  /* empty, with non-zero extents whose product overflows int64 (an .npy the fuzzer made): allowed,
   * and the strides are computed without signed overflow (the sanitizer build checks) */
  int64_t empty_huge[3] = {0, 1ll << 40, 9551615}, empty_last[3] = {17356402279875ll, 551615, 0};
  CHECK_OK(ts_tensor_alloc(&t, TS_F32, 3, empty_huge));
  CHECK(ts_tensor_numel(&t) == 0 && t.strides[2] == 1 && t.strides[1] == 9551615, "empty tensor with huge extents");
  ts_tensor_free(&t);
  CHECK_OK(ts_tensor_alloc(&t, TS_F32, 3, empty_last)); /* the zero extent last: numel must not multiply first */
  CHECK(ts_tensor_numel(&t) == 0 && ts_tensor_nbytes(&t) == 0 && ts_tensor_is_contiguous(&t), "empty tensor, zero extent last");
  ts_tensor_free(&t);

  int64_t huge[4] = {1ll << 40, 1ll << 40, 1, 1};
  CHECK_STATUS(ts_tensor_alloc(&t, TS_F32, 4, huge), TS_ERR_OVERFLOW);
  int64_t neg[2] = {3, -1};
  CHECK_STATUS(ts_tensor_alloc(&t, TS_F32, 2, neg), TS_ERR_SHAPE);
  int64_t many[7] = {1, 1, 1, 1, 1, 1, 1};
  CHECK_STATUS(ts_tensor_alloc(&t, TS_F32, 7, many), TS_ERR_SHAPE);
  CHECK_STATUS(ts_tensor_alloc(&t, (ts_dtype)77, 1, many), TS_ERR_DTYPE);

  size_t out;
  CHECK(!ts_mul_size(SIZE_MAX / 2 + 1, 2, &out), "mul overflow");
  CHECK(ts_mul_size(1000, 1000, &out) && out == 1000000, "mul");
  CHECK(!ts_add_size(SIZE_MAX, 1, &out), "add overflow");

  ts_dtype d;
  CHECK_OK(ts_dtype_parse("bf16", &d));
  CHECK(d == TS_BF16 && ts_dtype_size(d) == 2, "bf16");
  CHECK_STATUS(ts_dtype_parse("f128", &d), TS_ERR_DTYPE);
}

/* ts_malloc_huge: small sizes as ts_malloc, from 2 MiB 2 MiB-aligned and whole; overflow is an error */
static void test_malloc_huge(void) {
  const size_t sizes[] = {1, 4096, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 3};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    unsigned char *p = ts_malloc_huge(sizes[i]);
    CHECK(p != NULL, "ts_malloc_huge(%zu)", sizes[i]);
    if (!p) continue;
    const uintptr_t align = sizes[i] >= ((size_t)2 << 20) ? ((uintptr_t)2 << 20) : TS_ALIGN;
    CHECK((uintptr_t)p % align == 0, "%zu bytes aligned to %zu", sizes[i], (size_t)align);
    memset(p, 0xA5, sizes[i]); /* every byte writable */
    CHECK(p[0] == 0xA5 && p[sizes[i] - 1] == 0xA5, "%zu bytes readable", sizes[i]);
    ts_free(p);
  }
  CHECK(ts_malloc_huge(SIZE_MAX - 5) == NULL && ts_last_error()[0], "overflowing size refused: %s", ts_last_error());
}

static void test_context(void) {
  ts_context *c;
  CHECK_OK(ts_context_create(&c, 3));
  CHECK(ts_context_threads(c) == 3, "threads");
  ts_context_destroy(c);
  CHECK_OK(ts_context_create(&c, 0));
  CHECK(ts_context_threads(c) >= 1, "default threads");
  ts_context_destroy(c);
  CHECK_STATUS(ts_context_create(&c, 100000), TS_ERR_INVALID_ARG);
}

static void test_cpu(void) {
  const ts_cpu_features *f = ts_cpu();
  CHECK(f->model[0] != 0, "model string");
  ts_isa a = ts_isa_active();
  CHECK(a <= ts_isa_supported(), "active %s within supported %s", ts_isa_name(a), ts_isa_name(ts_isa_supported()));
  const char *ref = getenv("TESSERA_REF");
  if (ref && strcmp(ref, "1") == 0) CHECK(a == TS_ISA_SCALAR, "TESSERA_REF forces scalar");
  if (f->avx512f) CHECK(f->avx2 && f->fma, "avx512 implies avx2/fma here");
  const char *names[32];
  int n = ts_cpu_isa_list(names, 32);
  CHECK(n >= 0 && n <= 32, "isa list");
}

static void test_half(void) {
  /* Exact values and rounding ties. */
  CHECK(ts_f32_to_f16(1.0f) == 0x3c00, "1.0");
  CHECK(ts_f32_to_f16(-2.0f) == 0xc000, "-2.0");
  CHECK(ts_f32_to_f16(65504.0f) == 0x7bff, "max");
  CHECK(ts_f32_to_f16(65520.0f) == 0x7c00, "overflow to inf");
  CHECK(ts_f32_to_f16(5.960464477539063e-08f) == 0x0001, "min subnormal");
  CHECK(ts_f32_to_f16(2.98e-08f) == 0x0000, "below half min subnormal rounds to 0");
  CHECK(ts_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00, "tie to even (down)");
  CHECK(ts_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "tie to even (up)");
  uint16_t hn = ts_f32_to_f16(NAN);
  CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff), "nan");
  CHECK(ts_f32_to_bf16(1.0f) == 0x3f80, "bf16 1.0");
  CHECK(ts_f32_to_bf16(1.00390625f) == 0x3f80, "bf16 tie to even");
  CHECK(ts_f32_to_bf16(1.01171875f) == 0x3f82, "bf16 tie up");
  CHECK(isnan(ts_bf16_to_f32(ts_f32_to_bf16(NAN))), "bf16 nan");
  /* Every f16 bit pattern round-trips through f32. */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = ts_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    if (ts_f32_to_f16(f) != h) bad++;
  }
  CHECK(bad == 0, "%d f16 patterns do not round-trip", bad);
  /* Relative error bounds on random values. */
  ts_rng r;
  ts_rng_seed(&r, 1);
  double e16 = 0, e_bf = 0;
  for (int i = 0; i < 100000; i++) {
    float x = (float)((ts_rng_uniform(&r) * 2 - 1) * 1000);
    if (fabsf(x) < 1e-3f) continue;
    double a = fabs(ts_f16_to_f32(ts_f32_to_f16(x)) - x) / fabs(x);
    double b = fabs(ts_bf16_to_f32(ts_f32_to_bf16(x)) - x) / fabs(x);
    if (a > e16) e16 = a;
    if (b > e_bf) e_bf = b;
  }
  CHECK(e16 <= 1.0 / 2048 + 1e-9, "f16 rel err %g (half ulp 2^-11)", e16);
  CHECK(e_bf <= 1.0 / 256 + 1e-9, "bf16 rel err %g (half ulp 2^-8)", e_bf);
}

static void test_rng(void) {
  ts_rng a, b;
  ts_rng_seed(&a, 42);
  ts_rng_seed(&b, 42);
  int same = 1;
  for (int i = 0; i < 100; i++) same &= ts_rng_next(&a) == ts_rng_next(&b);
  CHECK(same, "deterministic");
  int hist[10] = {0};
  for (int i = 0; i < 100000; i++) hist[ts_rng_below(&a, 10)]++;
  for (int i = 0; i < 10; i++) CHECK(hist[i] > 9500 && hist[i] < 10500, "bucket %d = %d", i, hist[i]);
}

static void test_files(void) {
  char path[1200];
  tst_tmp_path(path, sizeof path, "core_atomic.txt");
  CHECK_OK(ts_write_file_atomic(path, "hello", 5));
  char *d;
  size_t n;
  CHECK_OK(ts_read_file(path, &d, &n));
  CHECK(n == 5 && memcmp(d, "hello", 5) == 0, "content");
  free(d);
  CHECK_STATUS(ts_write_file_atomic("/nonexistent-dir/x", "a", 1), TS_ERR_IO);
  CHECK_STATUS(ts_read_file("/nonexistent-dir/x", &d, &n), TS_ERR_NOT_FOUND);
  /* the failed atomic write left no temporary behind and the old file intact */
  CHECK_OK(ts_read_file(path, &d, &n));
  CHECK(n == 5, "old file intact");
  free(d);
  unlink(path);
}

/* UTF-8: decoding rejects what is not UTF-8; repair keeps valid text as it is and turns each
 * invalid byte into U+FFFD (EF BF BD). */
static void test_utf8(void) {
  static const struct {
    const char *in;
    size_t len;
    const char *out;
  } cases[] = {
      {"", 0, ""},
      {"plain ascii", 11, "plain ascii"},
      {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},
      {"a\x80z", 3, "a\xEF\xBF\xBDz"},                                   /* lone continuation byte */
      {"\xC3", 1, "\xEF\xBF\xBD"},                                       /* truncated at the end */
      {"\xE2\x82", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},                       /* truncated: each byte alone */
      {"\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},                       /* overlong '/' */
      {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},       /* surrogate U+D800 */
      {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* past U+10FFFF */
      {"\xFF" "ok", 3, "\xEF\xBF\xBD" "ok"},
      {"\xEF\xBF\xBD", 3, "\xEF\xBF\xBD"},                               /* U+FFFD itself is valid */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = 99;
    char *r = ts_utf8_repair(cases[i].in, cases[i].len, &n);
    CHECK(r && n == strlen(cases[i].out) && !memcmp(r, cases[i].out, n + 1), "repair case %zu: got %zu bytes", i, n);
    free(r);
  }
  uint32_t cp;
  bool valid;
  CHECK(ts_utf8_next("\xF0\x9F\x98\x80", 4, &cp, &valid) == 4 && valid && cp == 0x1F600, "4-byte decode: cp %x", cp);
  CHECK(ts_utf8_next("\xF0\x9F\x98\x80", 3, &cp, &valid) == 1 && !valid && cp == 0xF0, "truncated by len: cp %x", cp);
  /* put then next round-trips every boundary code point */
  static const uint32_t cps[] = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
  for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
    char b[4];
    const int k = ts_utf8_put(cps[i], b);
    CHECK(ts_utf8_next(b, (size_t)k, &cp, &valid) == k && valid && cp == cps[i], "round trip U+%04X", cps[i]);
  }
}

/* A request of 256 MiB or more past the memory available fails with an error instead of ending in
 * the OOM killer once it is written; smaller ones are not checked. */
static void test_mem_available(void) {
  const size_t avail = ts_mem_available();
#ifdef __linux__
  CHECK(avail > 0, "MemAvailable known on Linux");
#endif
  if (avail == 0) return;
  ts_error_clear();
  void *p = ts_malloc(avail + ((size_t)1 << 30));
  CHECK(!p && strstr(ts_last_error(), "of memory available"), "past the available memory: '%s'", ts_last_error());
  ts_free(p);
  ts_error_clear();
  p = ts_calloc(2, avail / 2 + ((size_t)1 << 30));
  CHECK(!p && strstr(ts_last_error(), "of memory available"), "calloc past it: '%s'", ts_last_error());
  ts_free(p);
  if (avail > ((size_t)2 << 30)) { /* 300 MiB is checked and given (not touched) */
    p = ts_malloc((size_t)300 << 20);
    CHECK(p != NULL, "300 MiB of %zu MiB available: %s", avail >> 20, ts_last_error());
    ts_free(p);
  }
}

/* Other processes' CPU time between two marks: unknown under 0.5 s, else a share >= 0 that this
 * process's own spinning does not raise past what the rest of the machine did. */
static void test_cpu_others(void) {
  const ts_cpu_mark a = ts_cpu_mark_now();
  CHECK(ts_cpu_others(a, ts_cpu_mark_now()) == -1, "marks under 0.5 s apart: unknown");
  double x = 0;
  /* this process busy for 0.6 s of wall time and (where its CPU time is known) until it has run
   * 0.3 s itself: a loaded machine may give it less in 0.6 s, so the spin waits for it rather than
   * asserting on how long it took */
  while (ts_now() - a.wall < 0.6 || (a.own >= 0 && ts_cpu_mark_now().own - a.own < 0.3))
    for (int i = 0; i < 100000; i++) x += 1;
  CHECK(x > 0, "spun %g times", x);
  const ts_cpu_mark b = ts_cpu_mark_now();
  const double o = ts_cpu_others(a, b);
#ifdef __linux__
  CHECK(a.busy >= 0 && a.own >= 0 && b.own - a.own >= 0.3, "marks known, own time %g s", b.own - a.own);
  CHECK(o >= 0 && o <= (double)sysconf(_SC_NPROCESSORS_ONLN), "others %g CPUs", o);
#else
  CHECK(o >= -1, "others %g", o);
#endif
}

int main(void) {
  test_status();
  test_tensor();
  test_malloc_huge();
  test_context();
  test_cpu();
  test_half();
  test_rng();
  test_files();
  test_utf8();
  test_cpu_others();
  test_mem_available();
  return tst_finish();
}
