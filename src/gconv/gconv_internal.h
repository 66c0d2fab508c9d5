/* Internal interfaces of the unstructured group convolution room: the kernel variants behind the
 * dispatch, the executor's B-space geometry (how a layer becomes "B rows at offsets"), the
 * partition helpers shared by the planner steps, and the cost model's table. Not public API. */
#ifndef TS_GCONV_INTERNAL_H
#define TS_GCONV_INTERNAL_H

#include <cjson/cJSON.h>

#include "core/dispatch.h"
#include "tessera/gconv.h"
#include "tessera/measure.h"

/* The plan as a cJSON object (the public ts_gconv_plan_to_json's document) and back (`name`
 * labels the errors; *out zeroed first, empty on error): the plan artifact, the CLI, the tests
 * and the fuzzers. */
ts_status ts__gconv_plan_to_cjson(const ts_gconv_plan *p, cJSON **out);
ts_status ts__gconv_plan_from_cjson(const cJSON *j, const char *name, ts_gconv_plan *out);

/* ---- kernels ---------------------------------------------------------------------------------
 * One partition over columns [j0, j1): see ts_gconv_kernel_run. Arguments are trusted. */
typedef void (*ts__gconv_kern_fn)(int rows, int64_t K, const float *wp, const float *b, const int32_t *off,
                                  float *const *c, int64_t j0, int64_t j1);
void ts__gconv_kern_avx512(int rows, int64_t K, const float *wp, const float *b, const int32_t *off, float *const *c,
                           int64_t j0, int64_t j1);
void ts__gconv_kern_avx2(int rows, int64_t K, const float *wp, const float *b, const int32_t *off, float *const *c,
                         int64_t j0, int64_t j1);
/* The room's variants in the core dispatcher: each table is a ts__gconv_kern_variant. */
typedef struct ts__gconv_kern_variant {
  ts__gconv_kern_fn fn;
} ts__gconv_kern_variant;
extern ts__dispatch ts__gconv_dispatch;
/* The kernel of the active level (TESSERA_ISA / TESSERA_REF apply). */
ts__gconv_kern_fn ts__gconv_kern(void);

/* ---- geometry ---------------------------------------------------------------------------------
 * How the executor (and the profiler, and the SpMM baseline) lays a layer out as B rows:
 *   direct   1x1, stride 1: B = the input image [cin][h*w]; off(c, 0) = c*h*w; the kernel
 *            writes the output rows directly (ncols = ho*wo).
 *   padded   3x3 (k > 1), stride 1: B = a zero-padded copy [cin][plane] of the image, plane =
 *            (h+2p)*(w+2p) + slack; the output is computed in padded-width coordinates
 *            (ncols = ho*(w+2p), the last 2p columns of each row junk) into a workspace and
 *            compacted: off(c, r*k + s) = c*plane + r*(w+2p) + s.
 *   im2col   any other stride: B = [cin*k*k][ho*wo] lowered once per image; off(c, t) =
 *            (c*k*k + t)*ho*wo; output written directly. */
typedef enum ts__gconv_geom_kind { TS__GEOM_DIRECT = 0, TS__GEOM_PADDED, TS__GEOM_IM2COL } ts__gconv_geom_kind;

typedef struct ts__gconv_geom {
  ts__gconv_geom_kind kind;
  int ho, wo, taps, pad;
  int64_t ncols;       /* columns the kernel computes per image */
  int64_t bfloats;     /* floats of B per image (0 for direct: B is the input itself) */
  int64_t plane;       /* padded: floats per channel plane of B */
  int64_t wpad;        /* padded: w + 2*pad */
  int64_t out_floats;  /* padded: floats of the padded-width output per image (cout * ncols) */
} ts__gconv_geom;

void ts__gconv_geom_make(const ts_gconv_layer *l, ts__gconv_geom *g);
/* The im2col layout whatever the layer (the dense and deploy baselines lower every kernel so). */
void ts__gconv_geom_im2col(const ts_gconv_layer *l, ts__gconv_geom *g);
/* Offset of B row (c, tap). */
int32_t ts__gconv_off(const ts__gconv_geom *g, const ts_gconv_layer *l, int32_t c, int tap);
/* Lays image x [cin][h][w] out as B (padded or im2col); channels [c0, c1). */
void ts__gconv_fill_b(const ts__gconv_geom *g, const ts_gconv_layer *l, const float *x, float *b, int c0, int c1);
/* padded: copies rows [o0, o1) of the padded-width output yw [cout][ncols] into y [cout][ho*wo]. */
void ts__gconv_compact(const ts__gconv_geom *g, const float *yw, float *y, int o0, int o1);

/* ---- cost model -------------------------------------------------------------------------------- */
struct ts_gconv_cost {
  int nrows, nk;
  int32_t rows[TS_GCONV_PROFILE_MAX];
  int32_t ks[TS_GCONV_PROFILE_MAX];
  double *sec; /* [nrows][nk][4] */
  char source[64];
};

/* Provenance and grid of a profile measured now at `level` (seconds not allocated). */
void ts__gconv_profile_provenance(ts_gconv_profile *p, ts_gconv_profile_level level);

/* ---- planner steps ------------------------------------------------------------------------------ */

/* A working assignment: part_of[o] = partition of output o; sizes fixed per partition. */
typedef struct ts__gconv_assign {
  int32_t nparts;
  int32_t *size;      /* [nparts] */
  int32_t *part_of;   /* [cout] */
} ts__gconv_assign;

/* Input-channel bitsets of the connectivity rows ([cout][words]) for unions. */
typedef struct ts__gconv_rowbits {
  int64_t rows, words;
  uint64_t *bits;
} ts__gconv_rowbits;

ts_status ts__gconv_rowbits_make(const ts_csr *conn, ts__gconv_rowbits *rb);
void ts__gconv_rowbits_free(ts__gconv_rowbits *rb);

/* Knapsack over partition sizes 1..max_rows for the rows in `order` (a permutation of the
 * outputs): the size of each partition (in sequence: larger first) minimizing the sum of
 * ts_gconv_cost_part(size, union estimate(size)), the estimate being the mean union of windows
 * of `size` consecutive rows of the order. sizes: [cout] out, *nparts their count. */
ts_status ts__gconv_knapsack_sizes(const ts_gconv_layer *l, const ts__gconv_rowbits *rb, const int32_t *order,
                                   const ts_gconv_cost *m, int max_rows, int32_t *sizes, int32_t *nparts);
/* Optimal cut of `order` into consecutive segments of 1..max_rows rows (a DP over positions,
 * exact unions, the same cost model): sizes in sequence order. The knapsack's sizes assume a
 * union per size; this one sees the order, so its sizes always fit it. The planner keeps the
 * cheaper of the two as the greedy start. */
ts_status ts__gconv_segment(const ts_gconv_layer *l, const ts__gconv_rowbits *rb, const int32_t *order,
                            const ts_gconv_cost *m, int max_rows, int32_t *sizes, int32_t *nparts);
/* Greedy assignment: consecutive chunks of `order` of the given sizes. */
ts_status ts__gconv_greedy(const int32_t *order, int64_t cout, const int32_t *sizes, int32_t nparts,
                           ts__gconv_assign *a);
void ts__gconv_assign_free(ts__gconv_assign *a);
/* Predicted seconds (one thread, whole layer) of an assignment. */
double ts__gconv_assign_cost(const ts_gconv_layer *l, const ts__gconv_rowbits *rb, const ts_gconv_cost *m,
                             const ts__gconv_assign *a);
/* ILP improvement of a (in place): neighbourhoods of `group` partitions, each an exact ILP over
 * their channels (fixed sizes, binary unions) from the current assignment as warm start, until no
 * neighbourhood improves or time_limit elapsed seconds. */
typedef struct ts__gconv_ilp_stats {
  int solves, improved;
  bool timeout;
  double ms;
  double max_solve_s; /* the longest single neighbourhood solve (CBC can overrun its limit) */
} ts__gconv_ilp_stats;
ts_status ts__gconv_ilp_improve(const ts_gconv_layer *l, const ts_csr *conn, const ts__gconv_rowbits *rb,
                                const ts_gconv_cost *m, int group, double time_limit, ts__gconv_assign *a,
                                ts__gconv_ilp_stats *st);
/* Partition list of an assignment (empty partitions dropped: *nparts gets the count): rows in
 * output order, unions from rb. */
ts_status ts__gconv_assign_to_parts(const ts__gconv_rowbits *rb, const ts__gconv_assign *a, ts_gconv_part **parts,
                                    int32_t **rows_buf, int32_t **in_buf, int32_t *nparts);

/* Checks partitions against a connectivity (every output exactly once, unions sorted, unique, in
 * range and covering every connection); `what` names the list in messages. */
ts_status ts__gconv_parts_check(const ts_gconv_part *parts, int32_t nparts, const ts_csr *conn, const char *what);

/* Part of the plan key: bumped when the planner's decisions change for the same inputs, so a
 * plan cached by an older planner is planned again (2: ILP size guard and aggregated rows; 3: keys
 * hashed with ts_hash, plans in the artifact store). */
#define TS__GCONV_PLANNER_VERSION 3

/* The gconv profile from parsed JSON (ts_gconv_profile_load's parser; `path` labels the errors). On
 * failure *out is empty. For the loader and the fuzzer. */
ts_status ts__gconv_profile_from_json(const cJSON *j, const char *path, ts_gconv_profile *out);
/* The same with the provenance given (env: an artifact envelope's) or, env NULL, read from the
 * object's own "provenance"; and back (with_prov: a file of its own, else an artifact's data). */
ts_status ts__gconv_profile_parse(const cJSON *j, const ts_provenance *env, const char *path, ts_gconv_profile *out);
ts_status ts__gconv_profile_to_json(const ts_gconv_profile *p, bool with_prov, cJSON **out);
/* The profile's provenance fields as a ts_provenance. */
void ts__gconv_profile_prov(const ts_gconv_profile *p, ts_provenance *pv);
/* The artifact kind of profiles (key "<level>-<kernels>") and its format version. */
#define TS__GCONV_PROFILE_KIND "gconv-profile"

#endif
