/* Shared by the attention profiler files (src/attn/profile*.c): timing one block alone. */
#ifndef TS_ATTN_PROFILE_INTERNAL_H
#define TS_ATTN_PROFILE_INTERNAL_H

#include <cjson/cJSON.h>

#include "tessera/attn_profile.h"
#include "tessera/attn_train.h"

/* The profile as a cJSON object (the public ts_attn_profile_to_json's document; NULL on OOM) and
 * back (the public from_json's checks; *p zeroed first, empty on error): the profile artifact's
 * payload, the CLI and the fuzzers. */
cJSON *ts__attn_profile_to_cjson(const ts_attn_profile *p);
ts_status ts__attn_profile_from_cjson(const cJSON *j, ts_attn_profile *p);

/* In-cache inputs for timing blocks up to nmax x nmax: Q, K, V [nmax][d] (fp32 or bf16), O. */
typedef struct ts__attn_timer {
  ts_context *ctx; /* 1 thread */
  int64_t nmax, d;
  int64_t heads;   /* heads of every execute (batch 1): 1 (ts__attn_timer_init_heads: `heads`) */
  ts_dtype dtype;
  int warmup, repeats;
  double min_time_s;
  bool wall_clock;
  float *q, *k, *v, *o;
  uint16_t *qb, *kb, *vb;
  /* ts__attn_timer_set_pass: what a timed call runs (forward by default); for the backward and the
   * training step also lse [heads][nmax], dO (random, fixed) and the gradients [heads][nmax][d] */
  ts_attn_pass pass;
  float *lse, *dout, *dq, *dk, *dv;
} ts__attn_timer;

#define TS__ATTN_MAX_CALLS 1000 /* timed calls of one time_plan at most */

ts_status ts__attn_timer_init(ts__attn_timer *t, int64_t nmax, int64_t d, ts_dtype dtype, int warmup, int repeats,
                              double min_time_s, bool wall_clock);
/* The same with `heads` heads of nmax x d per execute (batch 1): the heads' Q, K, V and O go
 * through the caches as in a multi-head call (one head's stay in L2/L3 from call to call). */
ts_status ts__attn_timer_init_heads(ts__attn_timer *t, int64_t nmax, int64_t d, ts_dtype dtype, int64_t heads);
void ts__attn_timer_free(ts__attn_timer *t);
/* Makes every later timing measure `pass` (allocating the backward's arrays on first need). The
 * backward is timed after one untimed ts_attn_execute_train of the same plan (O and lse), with a
 * ts_attn_bwd executor made per plan outside the timed calls. */
ts_status ts__attn_timer_set_pass(ts__attn_timer *t, ts_attn_pass pass);
/* Median seconds of ts_attn_execute for one segment of `kind` with tile `tile` over the allowed
 * cells of `cells` (a rows x cols bitmap, block at the origin), see attn_profile.h's method. */
ts_status ts__attn_time_block(ts__attn_timer *t, const ts_bitmap *cells, ts_attn_seg_kind kind, ts_attn_tile tile,
                              double *seconds);

/* Median seconds of ts_attn_execute of `plan` (made for n <= nmax tokens, any thread count; t's
 * one-thread context runs it) on batch = heads = 1. */
ts_status ts__attn_time_plan(ts__attn_timer *t, ts_attn_plan *plan, int64_t n, double *seconds);
/* Plans side by side: one warm-up call each, then `rounds` rounds (<= 64) timing every plan once in
 * turn (all made for n <= nmax tokens, run on batch = heads = 1). seconds[i] = plan 0's fastest
 * call x the median over the rounds of (plan i's call / plan 0's call in the same round): on a
 * shared machine the calls of one round see about the same load, so their ratios stay steady
 * while the times themselves move by tens of percent with what else runs. */
ts_status ts__attn_time_plans(ts__attn_timer *t, ts_attn_plan *const *plans, int np, int64_t n, int rounds, double *seconds);
/* The same panels with no segment over an empty rows x cols mask: the call and panel overhead. */
ts_status ts__attn_time_empty(ts__attn_timer *t, int64_t rows, int64_t cols, double *seconds);
/* x rounded to 9 significant digits: far below timing noise, and such a double prints in cJSON's
 * 15-digit form and parses back to the very same value, so a saved table reloads bit for bit. */
double ts__attn_round9(double x);

#endif
