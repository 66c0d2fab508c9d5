/* tessera core: status codes, last-error detail, tensors, contexts, CPU features and dispatch,
 * half-precision conversions, timing, cache directory and atomic file writes. */
#ifndef TESSERA_CORE_H
#define TESSERA_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ---------------------------------------------------------------------------- */

typedef enum ts_status {
  TS_OK = 0,
  TS_ERR_INVALID_ARG,   /* a bad argument or option value */
  TS_ERR_USAGE,         /* bad command-line usage */
  TS_ERR_OOM,           /* allocation failed */
  TS_ERR_IO,            /* open/read/write/rename failed (errno detail in the message) */
  TS_ERR_FORMAT,        /* malformed file content: bad magic, bad header, bad token */
  TS_ERR_TRUNCATED,     /* file ends before the header or data does */
  TS_ERR_SHAPE,         /* shape or size mismatch */
  TS_ERR_DTYPE,         /* unsupported or wrong element type */
  TS_ERR_OVERFLOW,      /* a size computation would overflow */
  TS_ERR_UNSUPPORTED,   /* valid request this build/algorithm does not support */
  TS_ERR_NOT_FOUND,     /* a named thing (file, key, method) does not exist */
  TS_ERR_INFEASIBLE,    /* an optimization problem has no feasible solution */
  TS_ERR_SOLVER,        /* an external solver failed */
  TS_ERR_TIMEOUT,       /* a time limit ran out with no usable result */
  TS_ERR_INTERNAL,      /* broken invariant: a bug in tessera */
  TS_STATUS_COUNT
} ts_status;

/* Short fixed text for a code ("malformed file"). */
const char *ts_strerror(ts_status s);
/* Detail message of the last error raised on this thread ("" if none). */
const char *ts_last_error(void);
/* Records a detail message for this thread and returns `code` (printf-style). */
ts_status ts_error(ts_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current detail message ("reading x.npy: " + old detail). */
void ts_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ts_error_clear(void);

#define TS_TRY(expr)                         \
  do {                                       \
    ts_status ts__s = (expr);                \
    if (ts__s != TS_OK) return ts__s;        \
  } while (0)

/* ---- memory ---------------------------------------------------------------------------- */

#define TS_ALIGN 64
/* 64-byte aligned allocation; NULL with TS_ERR_OOM detail on failure. Free with ts_free. */
void *ts_malloc(size_t bytes);
void *ts_calloc(size_t count, size_t size);
/* As ts_malloc; from 2 MiB up, 2 MiB aligned and advised into transparent huge pages (where the
 * system allows them). Free with ts_free. */
void *ts_malloc_huge(size_t bytes);
void ts_free(void *p);
/* Allocator hooks: route tessera's memory to an allocator of the caller's (the tests inject
 * allocation failures with them, SQLite-style: tests/test_oom.c).
 *   Covered: ts_malloc, ts_calloc, ts_malloc_huge and ts_free, hence ts_tensor_alloc/ts_tensor_free,
 *   contexts, and the plans, workspaces, weights and tables that the rooms allocate with them; and
 *   cJSON (cJSON_InitHooks) while an allocator is set: every cJSON item and printed string of the
 *   process, tessera's (plans, profiles, JSON files read and written) and the caller's alike.
 *   Not covered: the plain malloc/calloc/realloc/strdup calls in tessera (many readers' and
 *   planners' own arrays and scratch, and the JSON strings the public *_to_json functions return:
 *   plain malloc memory, free() them under any allocator), and the libraries' own memory
 *   (oneDNN, CBC, FFTW, METIS, OpenMP, zlib).
 * alloc(user, bytes, align): align is a power of two (16 for cJSON, 64 = TS_ALIGN, 2 MiB for large
 * ts_malloc_huge buffers) and bytes a nonzero multiple of it; NULL means out of memory (ts_malloc
 * then fails with TS_ERR_OOM, cJSON's calls with their own NULL; errno is ENOMEM after either, as
 * after malloc, so a JSON parse that ran out of memory is told from a malformed text). free(user, p): p came from alloc
 * (never NULL). ts_malloc's memory check (a request of 256 MiB or more past ts_mem_available
 * fails) runs before alloc. NULL restores the default (aligned_alloc and free; cJSON's own
 * malloc/free). The allocator is global: set it while no other thread calls tessera or cJSON, and
 * only when memory allocated under the previous one is freed first or the two allocators' free
 * accept each other's memory (the default's is free(); tessera's objects are freed with ts_free). */
typedef struct ts_allocator {
  void *(*alloc)(void *user, size_t bytes, size_t align);
  void (*free)(void *user, void *p);
  void *user;
} ts_allocator;
void ts_set_allocator(const ts_allocator *a);
/* Bytes the system can give without swapping (MemAvailable in /proc/meminfo, else the physical
 * memory); 0 when unknown. ts_malloc and friends refuse a request of 256 MiB or more past it with
 * TS_ERR_OOM: zeroing or filling it would otherwise end in the OOM killer, not in an error. */
size_t ts_mem_available(void);
/* a*b and a+b with overflow detection: returns false on overflow. */
bool ts_mul_size(size_t a, size_t b, size_t *out);
bool ts_add_size(size_t a, size_t b, size_t *out);

/* ---- dtypes and tensors ---------------------------------------------------------------- */

typedef enum ts_dtype {
  TS_F32 = 0,
  TS_F16,
  TS_BF16,
  TS_I8,
  TS_U8,
  TS_I32,
  TS_I64,
  TS_F64,
  TS_BOOL,
  TS_DTYPE_COUNT
} ts_dtype;

size_t ts_dtype_size(ts_dtype t);
const char *ts_dtype_name(ts_dtype t); /* "f32", "bf16", ... */
/* Parses a name as printed by ts_dtype_name. */
ts_status ts_dtype_parse(const char *name, ts_dtype *out);

#define TS_MAX_DIMS 6

/* A strided view over memory it may own. shape/strides are in elements, row-major by default. */
typedef struct ts_tensor {
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS];
  void *data;
  bool owns_data;
} ts_tensor;

/* Allocates a zeroed contiguous row-major tensor (64-byte aligned). */
ts_status ts_tensor_alloc(ts_tensor *t, ts_dtype dtype, int ndim, const int64_t *shape);
/* Describes caller memory as a contiguous tensor (does not take ownership). */
ts_status ts_tensor_wrap(ts_tensor *t, ts_dtype dtype, int ndim, const int64_t *shape, void *data);
void ts_tensor_free(ts_tensor *t);
int64_t ts_tensor_numel(const ts_tensor *t);
size_t ts_tensor_nbytes(const ts_tensor *t); /* numel * dtype size (contiguous extent) */
bool ts_tensor_is_contiguous(const ts_tensor *t);
/* Checks the shape is valid and numel * size fits in size_t; fills numel and bytes when non-NULL. */
ts_status ts_shape_check(ts_dtype dtype, int ndim, const int64_t *shape, size_t *numel, size_t *bytes);

/* ---- context --------------------------------------------------------------------------- */

/* Carries the thread count every parallel call uses. Opaque.
 * Thread safety: immutable after create; one context may be passed to any number of calls on any
 * threads at once (each call runs its own OpenMP team of that many threads). Destroy it after
 * every object that keeps it (conv plans and trials, gconv executors and baselines, CNN nets, ViT
 * models). */
typedef struct ts_context ts_context;
/* nthreads <= 0: TESSERA_THREADS, else OMP_NUM_THREADS, else all online CPUs. */
ts_status ts_context_create(ts_context **ctx, int nthreads);
void ts_context_destroy(ts_context *ctx);
int ts_context_threads(const ts_context *ctx);
/* Default thread count as ts_context_create(.., 0) resolves it. */
int ts_default_threads(void);

/* ---- CPU features and dispatch --------------------------------------------------------- */

typedef struct ts_cpu_features {
  bool sse42, avx, avx2, fma, f16c;
  bool avx512f, avx512bw, avx512vl, avx512dq, avx512cd, avx512vnni, avx512bf16, avx512vpopcntdq;
  bool gfni; /* Galois-field instructions (the AVX-512 forms also need avx512f) */
  bool os_avx, os_avx512; /* XCR0 says the OS saves the wide registers */
  char vendor[16];
  char model[64];
} ts_cpu_features;

/* Detected once (cpuid + xgetbv), then cached. */
const ts_cpu_features *ts_cpu(void);

typedef enum ts_isa { TS_ISA_SCALAR = 0, TS_ISA_AVX2 = 1, TS_ISA_AVX512 = 2 } ts_isa;

/* Highest kernel level usable on this CPU: AVX512 needs F/BW/VL/DQ, AVX2 needs AVX2+FMA+F16C. */
ts_isa ts_isa_supported(void);
/* Level the dispatch tables use, resolved once: ts_isa_supported() capped by TESSERA_ISA
 * (scalar|avx2|avx512); TESSERA_REF=1 forces scalar reference kernels. */
ts_isa ts_isa_active(void);
const char *ts_isa_name(ts_isa isa);
/* Writes the names of detected ISA extensions ("avx2", "avx512f", ...) into names[0..max); returns count. */
int ts_cpu_isa_list(const char **names, int max);

/* ---- half precision -------------------------------------------------------------------- */

uint16_t ts_f32_to_f16(float x);  /* round to nearest even; overflow -> inf; NaN kept */
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float x); /* round to nearest even; NaN kept quiet */
float ts_bf16_to_f32(uint16_t h);
void ts_f32_to_f16_array(const float *x, uint16_t *y, size_t n);
void ts_f16_to_f32_array(const uint16_t *x, float *y, size_t n);
void ts_f32_to_bf16_array(const float *x, uint16_t *y, size_t n);
void ts_bf16_to_f32_array(const uint16_t *x, float *y, size_t n);

/* ---- UTF-8 ----------------------------------------------------------------------------- */

/* Decodes one code point at s[0..len) (len >= 1) and returns the bytes it used (1..4). An invalid,
 * overlong or truncated sequence, a surrogate or a value past U+10FFFF uses its first byte alone:
 * *valid = false and *cp = that byte. */
int ts_utf8_next(const char *s, size_t len, uint32_t *cp, bool *valid);
/* Encodes cp (<= U+10FFFF) into out; returns the bytes written (1..4). */
int ts_utf8_put(uint32_t cp, char *out);
/* A malloc'd NUL-terminated copy of s[0..len) with each byte that ts_utf8_next finds invalid
 * replaced by U+FFFD; *out_len (may be NULL) gets its length. NULL (TS_ERR_OOM) on failure. */
char *ts_utf8_repair(const char *s, size_t len, size_t *out_len);

/* ---- time, randomness ------------------------------------------------------------------ */

double ts_now(void); /* monotonic seconds */
/* A cheap monotone counter for timing many short spans (a runtime's tasks): the time-stamp counter
 * on x86 (a few ns; clock_gettime cost tens on a VM and took a fifth of a fine-grained pipeline
 * run), nanoseconds of the monotonic clock elsewhere. Its rate is not fixed: convert a count to
 * seconds against ts_now taken over the same span (seconds per tick = wall span / tick span). */
uint64_t ts_ticks(void);

/* How busy the rest of the machine is: a mark holds the wall clock, the seconds all CPUs have
 * spent busy since boot (/proc/stat: user, nice, system, irq, softirq and steal) and this
 * process's own CPU seconds (busy and own < 0 where unknown). */
typedef struct ts_cpu_mark {
  double wall, busy, own;
} ts_cpu_mark;
ts_cpu_mark ts_cpu_mark_now(void);
/* CPUs' worth of time that other processes (and the hypervisor's steal) took between two marks
 * (>= 0), or -1 when unknown or the marks are under 0.5 s apart (/proc/stat counts 10 ms ticks). */
double ts_cpu_others(ts_cpu_mark a, ts_cpu_mark b);

/* Small fast PRNG (xoshiro256**-style, splitmix-seeded) for generators and tests. */
typedef struct ts_rng { uint64_t s[4]; } ts_rng;
void ts_rng_seed(ts_rng *r, uint64_t seed);
uint64_t ts_rng_next(ts_rng *r);
double ts_rng_uniform(ts_rng *r);               /* [0,1) */
uint64_t ts_rng_below(ts_rng *r, uint64_t n);   /* [0,n), unbiased */
float ts_rng_normal(ts_rng *r);                 /* N(0,1) */

/* ---- files, cache, progress ------------------------------------------------------------ */

/* $TESSERA_CACHE, else $HOME/.cache/tessera; created if missing. */
ts_status ts_cache_dir(char *buf, size_t cap);
/* Creates a directory and its parents (mkdir -p). */
ts_status ts_mkdirs(const char *path);
/* Writes bytes to path.tmp.<pid>.<tid> and renames it over path: never leaves a half-written file,
 * and two threads or processes writing one path each write their own temporary file. */
ts_status ts_write_file_atomic(const char *path, const void *data, size_t len);
/* Reads a whole file (NUL-terminated for convenience; *len excludes the NUL). Free with free(). */
ts_status ts_read_file(const char *path, char **data, size_t *len);

/* Progress on stderr for long work: redraws one line when stderr is a terminal, prints
 * occasional lines otherwise (quiet when TESSERA_QUIET=1). */
typedef struct ts_progress {
  const char *label;
  int64_t total;
  double t0, last;
  bool tty, quiet;
  int last_pct;
} ts_progress;
void ts_progress_begin(ts_progress *p, const char *label, int64_t total);
void ts_progress_update(ts_progress *p, int64_t done);
void ts_progress_end(ts_progress *p);

/* Library version string. */
const char *ts_version(void);

#ifdef __cplusplus
}
#endif
#endif
