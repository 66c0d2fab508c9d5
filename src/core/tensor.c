/* Aligned allocation (through the allocator hooks), overflow-checked sizes, dtypes and tensor
 * descriptors. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tessera/core.h"

/* ---- allocator hooks ------------------------------------------------------------------ */

static void *default_alloc(void *user, size_t bytes, size_t align) {
  (void)user;
  return aligned_alloc(align, bytes);
}
static void default_free(void *user, void *p) {
  (void)user;
  free(p);
}
static ts_allocator g_alloc = {default_alloc, default_free, NULL};

/* cJSON's hooks take no user pointer: these go through g_alloc (16-byte aligned, as malloc) */
static void *cjson_alloc(size_t bytes) {
  const size_t a = 16, n = bytes ? (bytes + a - 1) & ~(a - 1) : a;
  void *p = n < bytes ? NULL : g_alloc.alloc(g_alloc.user, n, a);
  if (!p) errno = ENOMEM; /* as malloc: ts__json_read_mem tells a failed allocation from a bad text by it */
  return p;
}
static void cjson_free(void *p) {
  if (p) g_alloc.free(g_alloc.user, p);
}

void ts_set_allocator(const ts_allocator *a) {
  if (a && a->alloc && a->free) {
    g_alloc = *a;
    cJSON_Hooks h = {cjson_alloc, cjson_free};
    cJSON_InitHooks(&h);
  } else {
    g_alloc = (ts_allocator){default_alloc, default_free, NULL};
    cJSON_InitHooks(NULL);
  }
}

bool ts_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
bool ts_add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

/* bytes (at least 1) rounded up to a multiple of align (a power of two) and allocated so aligned;
 * *rounded gets the size (NULL, with the error set, on overflow or when memory is short) */
static void *alloc_aligned(size_t bytes, size_t align, size_t *rounded) {
  if (bytes == 0) bytes = 1;
  if (!ts_add_size(bytes, align - 1, rounded)) {
    ts_error(TS_ERR_OVERFLOW, "allocation of %zu bytes overflows", bytes);
    return NULL;
  }
  *rounded &= ~(align - 1);
  if (*rounded >= (size_t)256 << 20) { /* only large requests pay for reading /proc/meminfo */
    const size_t avail = ts_mem_available();
    if (avail > 0 && *rounded > avail) {
      ts_error(TS_ERR_OOM, "cannot allocate %.2f GiB: %.2f GiB of memory available", (double)bytes / (1 << 30),
               (double)avail / (1 << 30));
      return NULL;
    }
  }
  void *p = g_alloc.alloc(g_alloc.user, *rounded, align);
  if (!p) {
    errno = ENOMEM;
    ts_error(TS_ERR_OOM, "cannot allocate %zu bytes", bytes);
  }
  return p;
}

void *ts_malloc(size_t bytes) {
  size_t rounded;
  return alloc_aligned(bytes, TS_ALIGN, &rounded);
}

/* Large read-mostly buffers (an LLM's packed weights) in 2 MiB pages where the kernel's transparent
 * huge pages allow it (madvise or always; with never, or where madvise fails, the advice is
 * ignored and the buffer is an ordinary one). Streaming the packed weights of SmolLM2 from memory
 * measured 1.01-1.27x faster with them on a Zen 4 host (10 of 10 alternated rounds, 1 and 2
 * threads), and the same as 4 KiB pages on Zen 5 (docs/notes/BENCHMARKS.md, issue 7): fewer TLB misses,
 * and perhaps hardware prefetchers that run on past 4 KiB boundaries. */
void *ts_malloc_huge(size_t bytes) {
  const size_t huge = (size_t)2 << 20;
  if (bytes < huge) return ts_malloc(bytes);
  size_t rounded;
  void *p = alloc_aligned(bytes, huge, &rounded);
#ifdef MADV_HUGEPAGE
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: a refusal leaves 4 KiB pages */
#endif
  return p;
}

void *ts_calloc(size_t count, size_t size) {
  size_t bytes;
  if (!ts_mul_size(count, size, &bytes)) {
    ts_error(TS_ERR_OVERFLOW, "allocation of %zu x %zu bytes overflows", count, size);
    return NULL;
  }
  void *p = ts_malloc(bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

void ts_free(void *p) {
  if (p) g_alloc.free(g_alloc.user, p);
}

static const struct { const char *name; size_t size; } dtypes[TS_DTYPE_COUNT] = {
    [TS_F32] = {"f32", 4}, [TS_F16] = {"f16", 2}, [TS_BF16] = {"bf16", 2},
    [TS_I8] = {"i8", 1},   [TS_U8] = {"u8", 1},   [TS_I32] = {"i32", 4},
    [TS_I64] = {"i64", 8}, [TS_F64] = {"f64", 8}, [TS_BOOL] = {"bool", 1},
};

size_t ts_dtype_size(ts_dtype t) { return (unsigned)t < TS_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *ts_dtype_name(ts_dtype t) { return (unsigned)t < TS_DTYPE_COUNT ? dtypes[t].name : "?"; }

ts_status ts_dtype_parse(const char *name, ts_dtype *out) {
  for (int i = 0; i < TS_DTYPE_COUNT; i++)
    if (strcmp(name, dtypes[i].name) == 0) {
      *out = (ts_dtype)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_DTYPE, "unknown dtype '%s' (expected f32, f16, bf16, i8, u8, i32, i64, f64 or bool)", name);
}

ts_status ts_shape_check(ts_dtype dtype, int ndim, const int64_t *shape, size_t *numel, size_t *bytes) {
  if ((unsigned)dtype >= TS_DTYPE_COUNT) return ts_error(TS_ERR_DTYPE, "invalid dtype code %d", (int)dtype);
  if (ndim < 0 || ndim > TS_MAX_DIMS)
    return ts_error(TS_ERR_SHAPE, "%d dimensions (at most %d supported)", ndim, TS_MAX_DIMS);
  size_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return ts_error(TS_ERR_SHAPE, "negative extent %lld in dimension %d", (long long)shape[i], i);
    if (!ts_mul_size(n, (size_t)shape[i], &n))
      return ts_error(TS_ERR_OVERFLOW, "element count overflows at dimension %d", i);
  }
  size_t b;
  if (!ts_mul_size(n, ts_dtype_size(dtype), &b) || n > (size_t)INT64_MAX)
    return ts_error(TS_ERR_OVERFLOW, "byte size of %zu %s elements overflows", n, ts_dtype_name(dtype));
  if (numel) *numel = n;
  if (bytes) *bytes = b;
  return TS_OK;
}

static void set_contiguous(ts_tensor *t, ts_dtype dtype, int ndim, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->ndim = ndim;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->strides[i] = s;
    /* the product of the non-zero extents can overflow only in an empty tensor (ts_shape_check
     * bounds every non-empty one), whose strides are never used: 0 from there on */
    if (s && __builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) s = 0;
  }
}

ts_status ts_tensor_alloc(ts_tensor *t, ts_dtype dtype, int ndim, const int64_t *shape) {
  size_t bytes;
  TS_TRY(ts_shape_check(dtype, ndim, shape, NULL, &bytes));
  void *p = ts_malloc(bytes);
  if (!p) return TS_ERR_OOM;
  memset(p, 0, bytes);
  set_contiguous(t, dtype, ndim, shape);
  t->data = p;
  t->owns_data = true;
  return TS_OK;
}

ts_status ts_tensor_wrap(ts_tensor *t, ts_dtype dtype, int ndim, const int64_t *shape, void *data) {
  TS_TRY(ts_shape_check(dtype, ndim, shape, NULL, NULL));
  set_contiguous(t, dtype, ndim, shape);
  t->data = data;
  t->owns_data = false;
  return TS_OK;
}

void ts_tensor_free(ts_tensor *t) {
  if (!t) return;
  if (t->owns_data) ts_free(t->data);
  t->data = NULL;
  t->owns_data = false;
}

int64_t ts_tensor_numel(const ts_tensor *t) {
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] == 0) return 0; /* before any product: the other extents may multiply past int64 */
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    if (__builtin_mul_overflow(n, t->shape[i], &n)) return INT64_MAX; /* not a valid tensor (ts_shape_check) */
  return n;
}

size_t ts_tensor_nbytes(const ts_tensor *t) { return (size_t)ts_tensor_numel(t) * ts_dtype_size(t->dtype); }

bool ts_tensor_is_contiguous(const ts_tensor *t) {
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] == 0) return true; /* no elements: any strides describe the same (empty) memory */
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}
