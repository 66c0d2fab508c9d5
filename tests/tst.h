/* Minimal test harness: CHECK macros, seeded data, guarded buffers, and the closing line
 * "N passed, N failed" that CTest logs and CI reads.
 *
 * Tests that can fail: a program that cannot run at all (a model file absent) calls tst_skip(why),
 * which prints "SKIPPED: why" and exits with TST_SKIP_CODE (77), reported by CTest as skipped
 * (SKIP_RETURN_CODE in CMakeLists.txt), never as passed. A program that skips only a part calls
 * tst_skip_part(why) ("SKIPPED (part): why") and goes on. tst_finish() fails a program that ran
 * no check at all (exit 77 instead when it skipped parts and checked nothing). */
#ifndef TST_H
#define TST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/core.h"

static int tst_passed, tst_failed, tst_skipped;

#define TST_SKIP_CODE 77

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (cond) {                                                               \
      tst_passed++;                                                           \
    } else {                                                                  \
      tst_failed++;                                                           \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                           \
      fputc('\n', stderr);                                                    \
    }                                                                         \
  } while (0)

/* Expects TS_OK; prints the status and the detail message otherwise. */
#define CHECK_OK(expr)                                                                     \
  do {                                                                                     \
    ts_status tst__s = (expr);                                                             \
    CHECK(tst__s == TS_OK, "%s -> %s: %s", #expr, ts_strerror(tst__s), ts_last_error()); \
  } while (0)

/* Expects a specific error code and a non-empty detail message. */
#define CHECK_STATUS(expr, code)                                                            \
  do {                                                                                      \
    ts_status tst__s = (expr);                                                              \
    CHECK(tst__s == (code) && ts_last_error()[0], "%s -> %s (%s), expected %s", #expr,      \
          ts_strerror(tst__s), ts_last_error(), ts_strerror(code));                         \
  } while (0)

/* Any error with a detail message that contains `needle`. */
#define CHECK_ERR_CONTAINS(expr, needle)                                                     \
  do {                                                                                       \
    ts_status tst__s = (expr);                                                               \
    CHECK(tst__s != TS_OK && strstr(ts_last_error(), (needle)) != NULL,                      \
          "%s -> %s (%s), expected an error mentioning '%s'", #expr, ts_strerror(tst__s),    \
          ts_last_error(), (needle));                                                        \
  } while (0)

/* The whole program cannot run: "SKIPPED: why", exit 77. */
__attribute__((noreturn)) static inline void tst_skip(const char *why) {
  printf("SKIPPED: %s\n", why);
  fflush(stdout);
  exit(TST_SKIP_CODE);
}

/* A part of the program does not run: "SKIPPED (part): why"; the rest goes on. */
static inline void tst_skip_part(const char *why) {
  tst_skipped++;
  printf("SKIPPED (part): %s\n", why);
}

static inline int tst_finish(void) {
  if (tst_skipped) printf("%d passed, %d failed, %d skipped parts\n", tst_passed, tst_failed, tst_skipped);
  else printf("%d passed, %d failed\n", tst_passed, tst_failed);
  if (tst_failed) return 1;
  if (tst_passed == 0) {
    if (tst_skipped) {
      printf("SKIPPED: every part of this program was skipped\n");
      return TST_SKIP_CODE;
    }
    fprintf(stderr, "no check ran: a test program with zero checks fails\n");
    return 1;
  }
  return 0;
}

/* Max |a-b| over n floats; NaN anywhere counts as infinite error. */
static inline double tst_max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (d != d) return INFINITY;
    if (d > m) m = d;
  }
  return m;
}

static inline void tst_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)ts_rng_uniform(&r);
}

static inline void tst_poison(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = NAN;
}

/* Buffer of n floats followed by 64 guard bytes; tst_guard_ok checks they are untouched. */
#define TST_GUARD 64
static inline float *tst_alloc_guarded(size_t n) {
  unsigned char *p = ts_malloc(n * sizeof(float) + TST_GUARD);
  if (p) memset(p + n * sizeof(float), 0xA5, TST_GUARD);
  return (float *)p;
}
static inline int tst_guard_ok(const float *buf, size_t n) {
  const unsigned char *g = (const unsigned char *)(buf + n);
  for (int i = 0; i < TST_GUARD; i++)
    if (g[i] != 0xA5) return 0;
  return 1;
}

/* Path of a scratch file in the build tree's test cache. */
static inline const char *tst_tmp_path(char *buf, size_t cap, const char *name) {
  char dir[1024];
  if (ts_cache_dir(dir, sizeof dir) != TS_OK) snprintf(dir, sizeof dir, "/tmp");
  snprintf(buf, cap, "%s/%s", dir, name);
  return buf;
}

#endif
