/* Timing one block alone (the profiler's unit of measurement) and measuring a list of blocks for
 * the model-error report. Method: attn_profile.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attn/profile_internal.h"
#include "tessera/measure.h"

static ts_status timer_init(ts__attn_timer *t, int64_t nmax, int64_t d, ts_dtype dtype, int warmup, int repeats,
                            double min_time_s, bool wall_clock, int64_t heads) {
  memset(t, 0, sizeof *t);
  if (heads < 1 || heads > 4096) return ts_error(TS_ERR_INVALID_ARG, "attn profile: timer for %lld heads", (long long)heads);
  if (nmax < 1 || d < 1 || d > 4096)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: timer for blocks up to %lld with d = %lld", (long long)nmax,
                    (long long)d);
  if (dtype != TS_F32 && dtype != TS_BF16)
    return ts_error(TS_ERR_DTYPE, "attn profile: dtype %s is not f32 or bf16", ts_dtype_name(dtype));
  t->nmax = nmax, t->d = d, t->dtype = dtype;
  t->warmup = warmup < 0 ? 0 : warmup;
  t->repeats = repeats < 1 ? 1 : repeats > TS__ATTN_MAX_CALLS ? TS__ATTN_MAX_CALLS : repeats;
  t->min_time_s = min_time_s < 0 ? 0 : min_time_s;
  t->wall_clock = wall_clock;
  t->heads = heads;
  size_t ne;
  if (!ts_mul_size((size_t)nmax, (size_t)d, &ne) || !ts_mul_size(ne, (size_t)heads, &ne) || ne > ((size_t)1 << 34))
    return ts_error(TS_ERR_OVERFLOW, "attn profile: %lld heads of %lld x %lld is too large", (long long)heads, (long long)nmax,
                    (long long)d);
  t->q = ts_malloc(ne * sizeof(float)), t->k = ts_malloc(ne * sizeof(float));
  t->v = ts_malloc(ne * sizeof(float)), t->o = ts_malloc(ne * sizeof(float));
  t->qb = ts_malloc(ne * 2), t->kb = ts_malloc(ne * 2), t->vb = ts_malloc(ne * 2);
  if (!t->q || !t->k || !t->v || !t->o || !t->qb || !t->kb || !t->vb) {
    ts__attn_timer_free(t);
    return ts_error(TS_ERR_OOM, "attn profile: cannot allocate Q/K/V/O for %lld x %lld", (long long)nmax, (long long)d);
  }
  /* Values in [-1, 1): realistic softmax ranges, no denormals. */
  ts_rng r;
  ts_rng_seed(&r, 12345);
  float *bufs[3] = {t->q, t->k, t->v};
  uint16_t *hb[3] = {t->qb, t->kb, t->vb};
  for (int b = 0; b < 3; b++) {
    for (size_t i = 0; i < ne; i++) bufs[b][i] = (float)(2.0 * ts_rng_uniform(&r) - 1.0);
    ts_f32_to_bf16_array(bufs[b], hb[b], ne);
  }
  ts_status s = ts_context_create(&t->ctx, 1);
  if (s != TS_OK) ts__attn_timer_free(t);
  return s;
}

ts_status ts__attn_timer_init(ts__attn_timer *t, int64_t nmax, int64_t d, ts_dtype dtype, int warmup, int repeats,
                              double min_time_s, bool wall_clock) {
  return timer_init(t, nmax, d, dtype, warmup, repeats, min_time_s, wall_clock, 1);
}

ts_status ts__attn_timer_init_heads(ts__attn_timer *t, int64_t nmax, int64_t d, ts_dtype dtype, int64_t heads) {
  return timer_init(t, nmax, d, dtype, 1, 1, 0.0, false, heads);
}

void ts__attn_timer_free(ts__attn_timer *t) {
  if (!t) return;
  ts_context_destroy(t->ctx);
  ts_free(t->q), ts_free(t->k), ts_free(t->v), ts_free(t->o);
  ts_free(t->qb), ts_free(t->kb), ts_free(t->vb);
  ts_free(t->lse), ts_free(t->dout), ts_free(t->dq), ts_free(t->dk), ts_free(t->dv);
  memset(t, 0, sizeof *t);
}

ts_status ts__attn_timer_set_pass(ts__attn_timer *t, ts_attn_pass pass) {
  if ((unsigned)pass >= TS_ATTN_PASS_COUNT) return ts_error(TS_ERR_INVALID_ARG, "attn profile: timer pass %d", (int)pass);
  t->pass = pass;
  if (pass == TS_ATTN_PASS_FORWARD || t->dout) return TS_OK;
  const size_t ne = (size_t)(t->heads * t->nmax * t->d), nl = (size_t)(t->heads * t->nmax);
  t->lse = ts_malloc(nl * sizeof(float)), t->dout = ts_malloc(ne * sizeof(float));
  t->dq = ts_malloc(ne * sizeof(float)), t->dk = ts_malloc(ne * sizeof(float)), t->dv = ts_malloc(ne * sizeof(float));
  if (!t->lse || !t->dout || !t->dq || !t->dk || !t->dv) {
    ts_free(t->lse), ts_free(t->dout), ts_free(t->dq), ts_free(t->dk), ts_free(t->dv);
    t->lse = t->dout = t->dq = t->dk = t->dv = NULL;
    t->pass = TS_ATTN_PASS_FORWARD;
    return ts_error(TS_ERR_OOM, "attn profile: cannot allocate the backward's arrays for %lld x %lld", (long long)t->nmax,
                    (long long)t->d);
  }
  ts_rng r;
  ts_rng_seed(&r, 54321);
  for (size_t i = 0; i < ne; i++) t->dout[i] = (float)(2.0 * ts_rng_uniform(&r) - 1.0);
  return TS_OK;
}

double ts__attn_round9(double x) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.9g", x);
  return strtod(buf, NULL);
}

typedef struct run_arg {
  ts__attn_timer *t;
  ts_attn_plan *plan;
  ts_attn_bwd *bwd; /* backward and train passes */
  int64_t n;
} run_arg;

static ts_status forward_train(const run_arg *a) {
  ts__attn_timer *t = a->t;
  if (t->dtype == TS_BF16)
    return ts_attn_execute_train_bf16(t->ctx, a->plan, t->qb, t->kb, t->vb, t->o, t->lse, NULL, 1, t->heads, a->n, t->d);
  return ts_attn_execute_train(t->ctx, a->plan, t->q, t->k, t->v, t->o, t->lse, NULL, 1, t->heads, a->n, t->d);
}

/* One call of the timer's pass on the plan (a timed candidate of the measure engine). */
static ts_status run_once(void *arg) {
  const run_arg *a = arg;
  ts__attn_timer *t = a->t;
  /* heads > 1: the timer's arrays are [heads][nmax][d]; a plan for n < nmax reads [heads][n][d] of them */
  if (t->pass == TS_ATTN_PASS_FORWARD) {
    if (t->dtype == TS_BF16) return ts_attn_execute_bf16(t->ctx, a->plan, t->qb, t->kb, t->vb, t->o, 1, t->heads, a->n, t->d);
    return ts_attn_execute(t->ctx, a->plan, t->q, t->k, t->v, t->o, 1, t->heads, a->n, t->d);
  }
  if (t->pass == TS_ATTN_PASS_TRAIN) TS_TRY(forward_train(a));
  if (t->dtype == TS_BF16)
    return ts_attn_backward_bf16(t->ctx, a->bwd, t->qb, t->kb, t->vb, t->o, t->dout, t->lse, NULL, t->dq, t->dk, t->dv, 1,
                                 t->heads, a->n, t->d);
  return ts_attn_backward(t->ctx, a->bwd, t->q, t->k, t->v, t->o, t->dout, t->lse, NULL, t->dq, t->dk, t->dv, 1, t->heads,
                          a->n, t->d);
}

/* The backward passes' setup of one plan, untimed: its executor and (backward alone) O and lse. */
static ts_status arg_init(run_arg *a, ts__attn_timer *t, ts_attn_plan *plan, int64_t n) {
  *a = (run_arg){t, plan, NULL, n};
  if (t->pass == TS_ATTN_PASS_FORWARD) return TS_OK;
  TS_TRY(ts_attn_bwd_create(&a->bwd, t->ctx, plan, TS_ATTN_BWD_AUTO));
  ts_status s = forward_train(a);
  if (s != TS_OK) ts_attn_bwd_destroy(a->bwd), a->bwd = NULL;
  return s;
}

/* The engine's options for this timer: thread CPU time (the one-thread execute runs on the calling
 * thread: OpenMP's team of one is the caller) unless the wall clock was asked for. */
static ts_measure_opts timer_opts(const ts__attn_timer *t, int warmup, int rounds, int max_rounds, double min_time_s) {
  ts_measure_opts o = ts_measure_opts_default();
  o.clock = t->wall_clock ? TS_CLOCK_WALL : TS_CLOCK_THREAD_CPU;
  o.warmup = warmup, o.rounds = rounds, o.max_rounds = max_rounds, o.min_time_s = min_time_s;
  return o;
}

ts_status ts__attn_time_plan(ts__attn_timer *t, ts_attn_plan *plan, int64_t n, double *seconds) {
  if (n > t->nmax)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: a plan for n = %lld on a timer for %lld", (long long)n, (long long)t->nmax);
  run_arg a;
  TS_TRY(arg_init(&a, t, plan, n));
  const ts_measure_opts o = timer_opts(t, t->warmup, t->repeats, TS__ATTN_MAX_CALLS, t->min_time_s);
  ts_measure_result r;
  ts_status st = ts_measure_one(run_once, &a, &o, &r);
  ts_attn_bwd_destroy(a.bwd);
  TS_TRY(st);
  if (r.status != TS_OK) return r.status;
  *seconds = ts__attn_round9(r.s.median > 1e-9 ? r.s.median : 1e-9); /* a table entry is always positive */
  return TS_OK;
}

ts_status ts__attn_time_plans(ts__attn_timer *t, ts_attn_plan *const *plans, int np, int64_t n, int rounds, double *seconds) {
  if (n > t->nmax)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: plans for n = %lld on a timer for %lld", (long long)n, (long long)t->nmax);
  if (np < 1 || rounds < 1 || rounds > 64) return ts_error(TS_ERR_INVALID_ARG, "attn profile: %d plans, %d rounds", np, rounds);
  run_arg *a = calloc((size_t)np, sizeof *a);
  void **args = malloc((size_t)np * sizeof *args);
  ts_measure_fn *fn = malloc((size_t)np * sizeof *fn);
  ts_measure_result *res = malloc((size_t)np * sizeof *res);
  ts_status st = a && args && fn && res ? TS_OK : ts_error(TS_ERR_OOM, "attn profile: %d x %d timings", np, rounds);
  for (int i = 0; st == TS_OK && i < np; i++) st = arg_init(&a[i], t, plans[i], n), args[i] = &a[i], fn[i] = run_once;
  /* one warm-up call each, then exactly `rounds` interleaved rounds */
  const ts_measure_opts o = timer_opts(t, 1, rounds, rounds, 0.0);
  if (st == TS_OK) st = ts_measure_run(np, fn, args, &o, res, NULL);
  for (int i = 0; st == TS_OK && i < np; i++) st = res[i].status; /* every plan must run */
  if (st == TS_OK) {
    const double m0 = res[0].s.min > 1e-9 ? res[0].s.min : 1e-9; /* plan 0's fastest call */
    for (int i = 0; i < np; i++) seconds[i] = m0 * res[i].ratio;
  }
  for (int i = 0; a && i < np; i++) ts_attn_bwd_destroy(a[i].bwd);
  free(a), free(args), free(fn), free(res);
  return st;
}

/* nseg = 1: the block's segment; nseg = 0: the same panels with no segment (cells must be empty). */
static ts_status time_schedule(ts__attn_timer *t, const ts_bitmap *cells, int nseg, ts_attn_seg_kind kind,
                               ts_attn_tile tile, double *seconds) {
  int64_t rows = cells->rows, cols = cells->cols, n = rows > cols ? rows : cols;
  if (rows < 1 || cols < 1 || n > t->nmax)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: block %lld x %lld is not in [1, %lld]^2", (long long)rows,
                    (long long)cols, (long long)t->nmax);
  ts_bitmap mask = {0};
  ts_attn_schedule s = {0};
  ts_attn_plan *plan = NULL;
  ts_status st = ts_bitmap_alloc(&mask, n, n);
  /* The block's cells at the origin of the n x n mask; row words copy straight (same columns). */
  for (int64_t i = 0; st == TS_OK && i < rows; i++)
    memcpy(ts_bitmap_row(&mask, i), ts_bitmap_row(cells, i), (size_t)cells->stride * sizeof(uint64_t));
  if (st == TS_OK) st = ts_attn_schedule_alloc(&s, n, rows < n ? 2 : 1, nseg);
  if (st == TS_OK) {
    s.panels[0] = (ts_attn_panel){.r0 = 0, .nr = (int32_t)rows, .seg0 = 0, .nseg = nseg};
    if (rows < n) s.panels[1] = (ts_attn_panel){.r0 = (int32_t)rows, .nr = (int32_t)(n - rows), .seg0 = nseg, .nseg = 0};
    if (nseg)
      s.segs[0] = (ts_attn_segment){.r0 = 0, .nr = (int32_t)rows, .c0 = 0, .nc = (int32_t)cols, .br = tile.br,
                                    .bc = tile.bc, .kind = kind};
    st = ts_attn_plan_create(&plan, t->ctx, &s, &mask, t->d);
  }
  if (st == TS_OK) st = ts__attn_time_plan(t, plan, n, seconds);
  ts_attn_plan_destroy(plan);
  ts_attn_schedule_free(&s);
  ts_bitmap_free(&mask);
  return st;
}

ts_status ts__attn_time_block(ts__attn_timer *t, const ts_bitmap *cells, ts_attn_seg_kind kind, ts_attn_tile tile,
                              double *seconds) {
  return time_schedule(t, cells, 1, kind, tile, seconds);
}

ts_status ts__attn_time_empty(ts__attn_timer *t, int64_t rows, int64_t cols, double *seconds) {
  ts_bitmap cells = {0};
  TS_TRY(ts_bitmap_alloc(&cells, rows, cols));
  ts_status s = time_schedule(t, &cells, 0, TS_ATTN_SEG_MIXED, (ts_attn_tile){16, 16}, seconds);
  ts_bitmap_free(&cells);
  return s;
}

ts_attn_measure_opts ts_attn_measure_opts_default(void) {
  ts_attn_measure_opts o = {.d = 64, .dtype = TS_F32, .warmup = 1, .repeats = 5, .min_time_s = 2e-3, .wall_clock = false,
                            .progress = true};
  return o;
}

ts_status ts_attn_blocks_measure(const ts_attn_measure_opts *o, const ts_bitmap *mask, const ts_block *blocks,
                                 const ts_attn_tile *tiles, int64_t nblocks, double *seconds) {
  ts_attn_measure_opts def = ts_attn_measure_opts_default();
  if (!o) o = &def;
  if (!mask || nblocks < 0 || (nblocks > 0 && (!blocks || !tiles || !seconds)))
    return ts_error(TS_ERR_INVALID_ARG, "attn blocks measure: NULL mask/blocks/tiles/seconds or negative count");
  int64_t nmax = 1;
  for (int64_t b = 0; b < nblocks; b++) {
    const ts_block *B = &blocks[b];
    if (B->rows < 1 || B->cols < 1 || B->row0 < 0 || B->col0 < 0 || (int64_t)B->row0 + B->rows > mask->rows ||
        (int64_t)B->col0 + B->cols > mask->cols)
      return ts_error(TS_ERR_INVALID_ARG, "attn blocks measure: block %lld (%d, %d, %d x %d) is not inside the %lld x %lld mask",
                      (long long)b, B->row0, B->col0, B->rows, B->cols, (long long)mask->rows, (long long)mask->cols);
    if (B->rows > nmax) nmax = B->rows;
    if (B->cols > nmax) nmax = B->cols;
  }
  ts__attn_timer t;
  TS_TRY(ts__attn_timer_init(&t, nmax, o->d, o->dtype, o->warmup, o->repeats, o->min_time_s, o->wall_clock));
  ts_progress pr;
  if (o->progress) ts_progress_begin(&pr, "measuring blocks", nblocks);
  ts_status st = TS_OK;
  for (int64_t b = 0; st == TS_OK && b < nblocks; b++) {
    const ts_block *B = &blocks[b];
    ts_bitmap cells = {0};
    st = ts_bitmap_alloc(&cells, B->rows, B->cols);
    for (int64_t i = 0; st == TS_OK && i < B->rows; i++)
      for (int64_t j = 0; j < B->cols; j++)
        if (ts_bitmap_get(mask, B->row0 + i, B->col0 + j)) ts_bitmap_set(&cells, i, j, true);
    if (st == TS_OK) st = ts__attn_time_block(&t, &cells, TS_ATTN_SEG_MIXED, tiles[b], &seconds[b]);
    if (st != TS_OK) ts_error_prefix("attn blocks measure: block %lld: ", (long long)b);
    ts_bitmap_free(&cells);
    if (o->progress) ts_progress_update(&pr, b + 1);
  }
  if (o->progress) ts_progress_end(&pr);
  ts__attn_timer_free(&t);
  return st;
}
