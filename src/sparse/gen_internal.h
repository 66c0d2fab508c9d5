/* Pattern generators: the kind table entry each generator declares (its keys, defaults, help)
 * and the helpers they share. The spec parser (gen_spec.c) fills gen_args from the spec string
 * and calls run(). Not public API. */
#ifndef TS_SPARSE_GEN_INTERNAL_H
#define TS_SPARSE_GEN_INTERNAL_H

#include "format_internal.h"

#define GEN_MAX_KEYS 8

typedef enum gen_key_type { GK_INT = 0, GK_NUM } gen_key_type;

typedef struct gen_key {
  const char *name;
  gen_key_type type;
  bool required;
  double def; /* default when not required */
} gen_key;

struct gen_kind;

/* Parsed key values of one generator (index = position in kind->keys). */
typedef struct gen_args {
  const struct gen_kind *kind;
  int64_t iv[GEN_MAX_KEYS];
  double nv[GEN_MAX_KEYS];
  bool given[GEN_MAX_KEYS];
} gen_args;

/* Leaves get inner = NULL. Wrappers get the inner pattern and its info; they fill out and info
 * (info->base_index may be taken over from inner_info, setting it NULL there). The framework
 * fills info->kind and info->nnz afterwards. */
typedef ts_status (*gen_run_fn)(const gen_args *a, const ts_csr *inner, ts_pattern_info *inner_info, ts_csr *out,
                                ts_pattern_info *info);

typedef struct gen_kind {
  const char *name;
  bool wrapper;
  gen_run_fn run;
  const char *help; /* one line after "kind:keys" in ts_pattern_spec_help */
  gen_key keys[GEN_MAX_KEYS];
} gen_kind;

/* Key value by name (the key must be declared by the kind: an internal invariant). */
int64_t ts__gen_int(const gen_args *a, const char *key);
double ts__gen_num(const gen_args *a, const char *key);
/* Range checks with the house error text: "window2d: k must be in [1, 2147483647], got 0". */
ts_status ts__gen_int_range(const gen_args *a, const char *key, int64_t lo, int64_t hi, int64_t *out);
ts_status ts__gen_num_range(const gen_args *a, const char *key, double lo, double hi, double *out);
/* a*b for sizes: TS_ERR_OVERFLOW "KIND: what overflows" when it exceeds INT64_MAX. */
ts_status ts__gen_mul(const gen_args *a, int64_t x, int64_t y, const char *what, int64_t *out);
/* Index-limit check: TS_ERR_OVERFLOW "KIND: what = v exceeds the int32 index limit". */
ts_status ts__gen_index_limit(const gen_args *a, int64_t v, const char *what);

/* Thread count for generator loops (they take no context): TESSERA_THREADS when it is set, else
 * OpenMP's default team (OMP_NUM_THREADS, or the count a program set with omp_set_num_threads,
 * as the CLI's --threads does; else all CPUs). */
int ts__gen_threads(void);

/* Building blocks (gen_window.c). */
/* 1-D band |i-j| <= half on n tokens. */
ts_status ts__gen_band(int64_t n, int64_t half, ts_csr *out);
/* Kronecker product pattern: row (y*wb + x) has columns y'*wb + x' for y' in row y of a and x' in
 * row x of b (a: ha x ha, b: wb x wb, both square). */
ts_status ts__gen_kron(const ts_csr *a, const ts_csr *b, ts_csr *out);
/* The first g tokens become global: their rows and columns are full. */
ts_status ts__gen_add_global(const ts_csr *in, int64_t g, ts_csr *out);
/* Exactly k distinct cells of a rows x cols pattern, uniformly (gen_random.c). */
ts_status ts__gen_random_exact(int64_t rows, int64_t cols, int64_t k, uint64_t seed, ts_csr *out);

/* The generators (one table entry each, defined beside their code). */
extern const gen_kind ts__gen_window1d, ts__gen_window2d, ts__gen_dilated2d, ts__gen_swin, ts__gen_vitdet;
extern const gen_kind ts__gen_random, ts__gen_blockrandom, ts__gen_randconn;
extern const gen_kind ts__gen_condense, ts__gen_unstructconv, ts__gen_groupconv, ts__gen_blockconn;
extern const gen_kind ts__gen_permconn;
extern const gen_kind ts__gen_keep, ts__gen_permute;

#endif
