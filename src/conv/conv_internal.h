/* Shared internals of the convolution room: the plan, the per-algorithm hooks, the padded input
 * copy used by the direct and depthwise kernels, and the output epilogue. */
#ifndef TS_CONV_INTERNAL_H
#define TS_CONV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "tessera/conv.h"

/* Workspace slices are carved at this alignment. */
#define TS__CONV_ALIGN 64
static inline size_t ts__conv_align(size_t bytes) {
  return (bytes + TS__CONV_ALIGN - 1) / TS__CONV_ALIGN * TS__CONV_ALIGN;
}

typedef struct ts__conv_algo_ops ts__conv_algo_ops;
typedef struct ts__conv_kern ts__conv_kern;

/* ---- plan options that are not public ---------------------------------------------------------
 * Experiments and tests choose through them (bench_conv --wino-schedule, tests/test_conv.c),
 * never through an environment variable the library reads. */
enum {
  TS__WINO_SCHED_AUTO = 0,      /* the plan's own choice (ts__wino_setup_avx512) */
  TS__WINO_SCHED_FUSED,         /* the AVX-512 tile-lane schedules, fused or staged */
  TS__WINO_SCHED_STAGED,
  TS__WINO_SCHED_CLANE,         /* channels in the lanes, blocks private or shared as it chooses */
  TS__WINO_SCHED_CLANE_PRIVATE, /* channels in the lanes, blocks private to a thread */
  TS__WINO_SCHED_CLANE_SHARED,  /* channels in the lanes, shared blocks */
  TS__WINO_SCHED_COUNT
};
typedef struct ts__conv_plan_opts {
  int wino_schedule; /* a TS__WINO_SCHED_*; the tile-lane ones (fused, staged) exist at the AVX-512
                        level only, the channel-lane ones at AVX-512 and AVX2 (scalar has one) */
  const ts__conv_kern *kern; /* the kernel level's table (ts__conv_dispatch's variants; tests walk
                                them); NULL: the dispatcher's active one */
} ts__conv_plan_opts;
/* "auto", "fused", "staged", "clane", "clane-private", "clane-shared" and back (TS_ERR_NOT_FOUND
 * listing them). */
const char *ts__conv_wino_schedule_name(int sched);
ts_status ts__conv_wino_schedule_parse(const char *name, int *out);
/* ts_conv_plan_create with options (o NULL: the defaults, = ts_conv_plan_create). */
ts_status ts__conv_plan_create_opts(ts_conv_plan **plan, ts_context *ctx, const ts_conv_desc *d, ts_conv_algo a,
                                    const ts__conv_plan_opts *o);
/* ts_conv_trial_create whose plans are made with po (NULL: the defaults). */
ts_status ts__conv_trial_create_opts(ts_conv_trial **t, ts_context *ctx, const ts_conv_desc *d, unsigned algos,
                                     const ts_conv_time_opts *opts, const ts__conv_plan_opts *po);

struct ts_conv_plan {
  ts_conv_desc d;
  ts_conv_algo algo;
  ts_context *ctx;
  int threads;
  int p, q;             /* output height/width */
  int cg, kg;           /* channels per group: c / groups, k / groups */
  size_t workspace;     /* bytes */
  size_t state_bytes;   /* bytes of the algorithm's own transformed weights (ts_conv_plan_memory) */
  int has_weights;
  float *weights;       /* [K][C/g][R][S] copy (reference, im2col, implicit use it as is) */
  float *bias;          /* [K], zeros when none was given */
  const ts__conv_algo_ops *ops;
  const ts__conv_kern *kern; /* the kernels this plan runs (opts.kern, else the active level's) */
  void *state;          /* algorithm-owned: packed weights, transforms, FFTW plans */
  ts__conv_plan_opts opts;
};

/* Per-algorithm hooks. `check` returns TS_ERR_UNSUPPORTED with a message; `init` sets
 * plan->workspace and plan->state; `weights` runs after plan->weights/bias are filled. */
struct ts__conv_algo_ops {
  ts_status (*check)(const ts_conv_desc *d);
  ts_status (*init)(ts_conv_plan *pl);
  ts_status (*weights)(ts_conv_plan *pl);
  ts_status (*execute)(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws);
  void (*destroy)(ts_conv_plan *pl);
};

extern const ts__conv_algo_ops ts__conv_ops_reference, ts__conv_ops_direct, ts__conv_ops_depthwise,
    ts__conv_ops_im2col, ts__conv_ops_kn2row, ts__conv_ops_implicit, ts__conv_ops_winograd_f2,
    ts__conv_ops_winograd_f4, ts__conv_ops_fft;

/* ---- padded, stride-phase-split input (direct and depthwise kernels) -------------------------
 * xp [N][C][Hp][sw][Wrow]: row h of the zero-padded input (Hp = H + pad_top + pad_bottom) split by
 * column phase, xp[..][h][ph][j] = padded[h][j*sw + ph]. Then output column q with kernel tap s
 * reads phase (s*dw) % sw at index q + (s*dw) / sw: contiguous in q for every stride. Wrow has
 * TS__CONV_SLACK zero columns beyond the last so full-vector loads past Q stay inside the row. */
#define TS__CONV_SLACK 32 /* >= 2 vectors of 16 - 1: the widest tile's overrun */
typedef struct ts__conv_pad_geom {
  int hp, wrow, sw;
  size_t plane; /* floats per channel: hp * sw * wrow */
} ts__conv_pad_geom;
/* soff[s] for s < d->s (see ts__conv_direct_args); the caller allocates d->s ints. */
void ts__conv_tap_offsets(const ts_conv_desc *d, const ts__conv_pad_geom *g, int *soff);
ts__conv_pad_geom ts__conv_pad_geometry(const ts_conv_desc *d);
void ts__conv_pad_input(const ts_conv_desc *d, const ts__conv_pad_geom *g, const float *in, float *xp, int threads);

/* Row (c, r, s) of the im2col matrix for output positions [j0, j0 + nb) of one input plane x
 * [H][W] (zeros where the tap falls in the padding): dst[j - j0] for j = p * Q + q (conv_gemm.c). */
void ts__conv_lower_row(const ts_conv_desc *d, int Q, const float *x, int r, int s, int j0, int nb, float *dst);

/* out[k][i] = relu?(out[k][i] + bias[k]) over `rows` rows of `len` (row k0 + row index picks the
 * bias), one image plane block. */
void ts__conv_epilogue(float *out, int rows, size_t len, size_t ld, const float *bias, int relu);

/* Column-lane direct and depthwise kernels (conv_direct_tmpl.h: the depthwise kernels of
 * conv_direct_avx512.c and conv_direct_avx2.c; the scalar ones of conv_direct.c).
 * Packed weights wp [K/KB (rounded up)][C/g][R][S][KB]. One call: output rows [p0, p1) of output
 * channel block kb (channels k0 .. k0+KB-1, clipped to K by `kvalid`) of image n. */
typedef struct ts__conv_direct_args {
  const ts_conv_desc *d;
  const ts__conv_pad_geom *g;
  int p, q, cg;
  const float *xp;   /* padded input of image n, first channel of the group */
  const float *wp;   /* packed weights of this channel block */
  const float *bias; /* bias of the block's first channel */
  float *out;        /* output of image n, first channel of the block, [kvalid][P][Q] */
  int kvalid;
  const int *soff;   /* [S]: offset of tap s in a padded row, ((s*dw) % sw) * wrow + (s*dw) / sw */
} ts__conv_direct_args;
/* Depthwise: one channel, weights [R][S], output rows [p0, p1). */
void ts__conv_dw_rows_avx512(const ts__conv_direct_args *a, int p0, int p1);
void ts__conv_dw_rows_avx2(const ts__conv_direct_args *a, int p0, int p1);
/* Winograd on AVX-512 (conv_winograd_avx512.c; plan, weights and the scalar path in
 * conv_winograd.c). Tiles: tile row R = n * th + ty over the batch (th x tw tiles per image). */
typedef struct ts__wino_geom {
  const float *BT, *AT;          /* [A][6] and [M][6] (leading dimension 6) */
  int A, M, N, C, H, W, P, Q, K; /* tile size, output tile, tensor sizes */
  int pad_top, pad_left, th, tw;
  int cg, kg, groups, threads;
  int kgp;                       /* row length of U: kg rounded up to the level's wino_kalign */
  int upw;                       /* U's panel width, set by the level's setup: U is [groups][A*A]
                                    [kgp / upw panels][cg][upw] (channels past kg zero), the last
                                    panel kgp % upw wide. AVX-512: 16 (tile lanes), 64 (clane);
                                    AVX2: 16; the scalar path 1 ([A*A][kg][cg]) */
  const float *U;
  const float *bias;             /* [K] */
  int relu;
  int sched;                     /* TS__WINO_STAGED, _FUSED or _CLANE (ts__wino_setup_avx512) */
  int rpb, ld;                   /* staged, clane: tile rows per block; staged: V/M row length (>= rpb * tw, 16 | ld) */
  int nck, ldb, kb;              /* fused: chunks per tile row, chunk row length (16 | ldb), k block */
  int cgp, wp, wpv, obl;         /* clane: cg rounded up to 16, padded input row (wp = tw*m + A - m columns,
                                    wpv rounded up to 16), output row buffer length (tw*m rounded up to 16) */
  int clpriv;                    /* clane: 1 blocks private to a thread (no barriers), 0 shared blocks
                                    (-1 on entry to ts__wino_cl_setup: choose) */
  int force;                     /* on entry to ts__wino_setup_avx512: a TS__WINO_SCHED_* (the plan's
                                    options; AUTO: choose) */
  size_t workspace;              /* bytes */
} ts__wino_geom;
enum { TS__WINO_STAGED = 0, TS__WINO_FUSED, TS__WINO_CLANE };
/* Chooses the schedule and its blocking; sets the workspace size. */
void ts__wino_setup_avx512(ts__wino_geom *g);
ts_status ts__wino_execute_avx512(const ts__wino_geom *g, const float *in, float *out, unsigned char *ws);
/* The channel-lane schedule (conv_winograd_cl_avx512.c): blocking and workspace, then one group. */
void ts__wino_cl_setup(ts__wino_geom *g);
void ts__wino_cl_group(const ts__wino_geom *g, int grp, const float *in, float *out, unsigned char *ws);
/* Winograd on AVX2 (conv_winograd_cl_avx2.c): the channel-lane schedule with 8 lanes; one setup
 * (honours the clane-private / clane-shared options) and the execution of every group. */
void ts__wino_setup_avx2(ts__wino_geom *g);
ts_status ts__wino_execute_avx2(const ts__wino_geom *g, const float *in, float *out, unsigned char *ws);
/* The L2 size per core the AVX-512 Winograd blocking and the AVX2 direct kernels' block grouping
 * are scaled by (ts_hwinfo_cache_sizes, read once; 1 MiB, the machine the AVX-512 constants were
 * tuned on, when the OS does not say). */
size_t ts__conv_l2_bytes(void);

/* Direct kernels with output channels in the lanes (conv_direct_oc_avx512.c, conv_direct_oc_avx2.c):
 * output rows [p0, p1) of one block of KB packed output channels (the table's direct_kb:
 * TS__CONV_KB_AVX512 = 32, TS__CONV_KB_OC_AVX2 = 16) of image n and one group, the weights packed
 * as for the other direct kernels ([cg][R][S][KB]).
 * Flat layouts (kernels one column wide at stride 1: R x 1, including 1 x 1): the padded input is
 * made with rows of exactly Q floats (no slack), so output position j = p Q + q reads input j +
 * toff[t] for every tap and a tile of consecutive positions may cross output rows:
 * ts__dconv_flat_avx512 runs positions [j0, j1) of the flattened P x Q plane in full tiles. */
typedef struct ts__dconv_args {
  const ts_conv_desc *d;
  const ts__conv_pad_geom *g;
  int p, q, cg;
  const float *x;    /* padded input of image n, first channel of the group */
  const float *w;    /* the block's packed weights [cg][R][S][KB] */
  const float *bias; /* bias of the block's first channel */
  float *out;        /* output of image n, first channel of the block, [kvalid][P][Q] */
  int kvalid;        /* channels of the block that exist (<= KB; <= one vector's lanes uses one vector) */
  const int *toff;   /* [R*S] offset of tap (r, s) from output (p, q)'s first input:
                        r * dilation_h * sw * wrow + soff[s] */
} ts__dconv_args;
void ts__dconv_rows_avx512(const ts__dconv_args *a, int p0, int p1);
void ts__dconv_flat_avx512(const ts__dconv_args *a, int j0, int j1);
void ts__dconv_rows_avx2(const ts__dconv_args *a, int p0, int p1);
void ts__dconv_flat_avx2(const ts__dconv_args *a, int j0, int j1);

#define TS__CONV_KB_AVX512 32
#define TS__CONV_KB_OC_AVX2 16 /* output channels in the lanes (conv_direct_oc_avx2.c) */
#define TS__CONV_KB_SCALAR 4

/* ---- the room's kernels per level (conv_kern.c; core/dispatch.h, docs/ARCHITECTURE.md "Dispatch")
 * A plan takes one table when it is made (ts_conv_plan.kern: the options' or the dispatcher's
 * active one, so TESSERA_ISA / TESSERA_REF cap convolution like every room) and runs only its
 * entries; layouts that differ by level (packed direct weights, U's panels) follow the table's
 * fields. */
struct ts__conv_kern {
  ts_isa isa; /* the level's family */
  /* direct: blocks of direct_kb output channels; either output channels in the lanes (dconv_rows,
   * with dconv_flat for R x 1 kernels at stride 1) or columns in the lanes (direct_rows) */
  int direct_kb;
  void (*direct_rows)(const ts__conv_direct_args *a, int p0, int p1);
  void (*dconv_rows)(const ts__dconv_args *a, int p0, int p1);
  void (*dconv_flat)(const ts__dconv_args *a, int j0, int j1);
  int dconv_chunk; /* flat positions per task: a few full tiles of the channel-lane kernel */
  int dconv_l2_group; /* run the blocks whose weights fit half of L2 together per output row
                         (conv_direct.c; measured on AVX2 only: AVX-512 keeps block-major order) */
  void (*dw_rows)(const ts__conv_direct_args *a, int p0, int p1); /* depthwise */
  /* Winograd: kg rounded up to wino_kalign in U; wino_setup NULL = the scalar transforms and
   * ts_sgemm of conv_winograd.c */
  int wino_kalign;
  void (*wino_setup)(ts__wino_geom *g);
  ts_status (*wino_execute)(const ts__wino_geom *g, const float *in, float *out, unsigned char *ws);
};
/* Variants: scalar, avx2, avx512 (conv_kern.c). */
extern ts__dispatch ts__conv_dispatch;
const ts__conv_kern *ts__conv_kern_active(void);
/* The scalar kernels (conv_direct.c), the reference level's entries. */
void ts__conv_direct_rows_scalar(const ts__conv_direct_args *a, int p0, int p1);
void ts__conv_dw_rows_scalar(const ts__conv_direct_args *a, int p0, int p1);

/* The entries of a conv profile document into p (opened for this machine; conv_profile.c's file
 * reader). A document measured elsewhere (version, CPU, kernels or threads differ) adds nothing and
 * sets *stale; a malformed one fails naming the problem and leaves p empty. For the fuzzer. */
struct cJSON;
ts_status ts__conv_profile_from_json(ts_conv_profile *p, const struct cJSON *j, const char *path, bool *stale);

#endif
