/* The ILP's exact model of compact passes (src/attn/sched_cover.c): which keys and 4-key runs each
 * row sub-tile computes given which block pieces merge.
 *  - exactness: per panel and height, the solved load equals the brute-force minimum over every
 *    merge subset (priced by the same exact evaluation), the lower bound is below it, and the
 *    fixed-merged warm start is never worse than the warm start;
 *  - a coupling the greedy cannot see: pieces stacked in one 32-row sub-tile that alone need keys
 *    0..15 (each piece's marginal is 0, so the greedy merges them all); taking all of them out
 *    saves the keys, and the ILP does (CBC: 8 free pieces in one component);
 *  - schedules from both solvers run correctly against the double reference, and a tiny time
 *    limit still gives a valid schedule no worse than the greedy's.
 * Loads are compared with a relative 1e-9 (the same double sums in other orders). Attention
 * tolerance: max |O - O_ref| / max|V| <= 2e-5, the fp32 class of tests/test_attn.c. */
#include <math.h>

#include "attn/sched_internal.h"
#include "tessera/attn_sched.h"
#include "tst.h"

#define TOL 2e-5

/* rows x cols x (0.4 standalone with the 16 x 16 tile, 1.0 in a pass): linear in the keys, so the
 * model's secant is exact and the expected loads can be written down. */
static double toy_cost(const ts_block *b, ts_attn_tile t, void *user) {
  (void)user;
  return (double)b->rows * (double)b->cols * (t.bc == 16 ? 0.4 : 1.0);
}

static void run_and_check(const ts_attn_schedule *s, const ts_bitmap *mask, const char *what) {
  const int64_t n = mask->rows, d = 16, H = 2;
  size_t tot = (size_t)(H * n * d);
  float *Q = ts_malloc(tot * 4), *K = ts_malloc(tot * 4), *V = ts_malloc(tot * 4), *O = ts_malloc(tot * 4), *R = ts_malloc(tot * 4);
  tst_fill_uniform(Q, tot, 1, -1, 1), tst_fill_uniform(K, tot, 2, -1, 1), tst_fill_uniform(V, tot, 3, -1, 1);
  tst_poison(O, tot);
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_attn_plan *pl = NULL;
  CHECK_OK(ts_attn_plan_create(&pl, ctx, s, mask, d));
  CHECK_OK(ts_attn_execute(ctx, pl, Q, K, V, O, 1, H, n, d));
  CHECK_OK(ts_attn_reference(mask, Q, K, V, R, 1, H, n, d));
  double e = tst_max_abs_diff(O, R, tot); /* |V| <= 1 */
  CHECK(e <= TOL, "%s: error %g", what, e);
  ts_attn_plan_destroy(pl);
  ts_context_destroy(ctx);
  ts_free(Q), ts_free(K), ts_free(V), ts_free(O), ts_free(R);
}

static void test_stacked_pieces(void) {
  const int64_t n = 128;
  ts_bitmap m = {0};
  CHECK_OK(ts_bitmap_alloc(&m, n, n));
  for (int64_t i = 0; i < 32; i++) {
    for (int64_t j = 0; j < 16; j++) ts_bitmap_set(&m, i, j, true);    /* the pieces: keys only they need */
    for (int64_t j = 64; j < 128; j++) ts_bitmap_set(&m, i, j, true);  /* residue in the same rows */
  }
  for (int64_t i = 32; i < n; i++) ts_bitmap_set(&m, i, i, true);      /* residue: a diagonal */
  ts_block bl[8];
  for (int k = 0; k < 8; k++) bl[k] = (ts_block){.row0 = 4 * k, .col0 = 0, .rows = 4, .cols = 16, .nnz = 64};
  ts_blocks blk = {.rows = n, .cols = n, .nblocks = 8, .blocks = bl};
  static const ts_attn_tile menu[1] = {{16, 16}};
  ts_attn_schedule sg, si;
  ts_attn_sched_info ig, ii;
  for (int solver = 0; solver < 2; solver++) {
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    o.solver = solver ? TS_ATTN_SOLVER_ILP : TS_ATTN_SOLVER_GREEDY;
    o.threads = 1;
    o.menu = menu, o.nmenu = 1;
    o.cost = toy_cost;
    o.nheights = 1, o.heights[0] = 32, o.compact_bc = 64;
    CHECK_OK(ts_attn_schedule_solve(&blk, &m, &o, solver ? &si : &sg, solver ? &ii : &ig));
  }
  /* all merged: sub-tile 0 computes 16 + 64 keys in 4-key runs (32 rows x 80), the others their 32
   * diagonal keys (3 x 32 x 32); all out: 32 x 64 and 8 pieces of 4 x 16 x 0.4 */
  const double greedy = 32.0 * 80 + 3 * 32.0 * 32, ilp = 32.0 * 64 + 3 * 32.0 * 32 + 8 * 4 * 16 * 0.4;
  CHECK(ig.merged == 8 && fabs(ig.makespan - greedy) <= 1e-9 * greedy, "greedy merged %lld, makespan %g (expected 8, %g)",
        (long long)ig.merged, ig.makespan, greedy);
  CHECK(ii.cover_run && ii.solver == TS_ATTN_SOLVER_ILP && ii.merged == 0, "ilp: cover %d solver %s merged %lld", ii.cover_run,
        ts_attn_solver_name(ii.solver), (long long)ii.merged);
  CHECK(fabs(ii.makespan - ilp) <= 1e-9 * ilp && fabs(ii.greedy_makespan - greedy) <= 1e-9 * greedy,
        "ilp makespan %g (expected %g), greedy priced by the exact model %g (expected %g)", ii.makespan, ilp, ii.greedy_makespan,
        greedy);
  CHECK(ii.cover_cbc >= 1 && ii.cover_free >= 8, "8 free pieces in one component go to CBC (%lld CBC models, %lld free)",
        (long long)ii.cover_cbc, (long long)ii.cover_free);
  run_and_check(&sg, &m, "greedy");
  run_and_check(&si, &m, "ilp");
  ts_attn_schedule_free(&sg), ts_attn_schedule_free(&si);
  ts_bitmap_free(&m);
}

/* Every panel of random block schedules at every height: the solved load against brute force. */
static void test_brute_panels(void) {
  static const char *specs[] = {"blockrandom:n=192,b=12,density=0.3,seed=4", "window2d:h=12,w=12,k=5", "random:n=160,density=0.12,seed=9",
                                "swin:h=14,w=14,win=7,shift=1"};
  int64_t checked = 0, cbc_before = 0;
  ts_attn_sched_info info;
  memset(&info, 0, sizeof info);
  ts_rng r;
  ts_rng_seed(&r, 77);
  for (size_t sp = 0; sp < sizeof specs / sizeof *specs; sp++) {
    ts_csr m = {0};
    CHECK_OK(ts_pattern_generate(specs[sp], &m, NULL));
    ts_bitmap bm = {0};
    CHECK_OK(ts_csr_to_bitmap(&m, &bm));
    ts_blocks_opts bo;
    ts_blocks_opts_default(&bo);
    bo.rho = 0.5, bo.min_nnz = 2;
    ts_blocks blk;
    CHECK_OK(ts_blocks_extract(&m, &bo, &blk));
    ts_attn_tile *t0 = ts_malloc((size_t)(blk.nblocks + 1) * sizeof *t0);
    for (int64_t b = 0; b < blk.nblocks; b++) t0[b] = (ts_attn_tile){16, 16};
    ts_attn_blocks_opts po = ts_attn_blocks_opts_default();
    po.panel_rows = 32;
    ts_attn_schedule s;
    CHECK_OK(ts_attn_schedule_from_blocks(&s, m.rows, blk.blocks, t0, blk.nblocks, &bm, &po));
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    int d = 32;
    o.cost_user = &d;
    for (int64_t p = 0; p < s.npanels; p++) {
      const ts_attn_panel *P = &s.panels[p];
      int64_t npc = 0; /* the block pieces: the segments before the residue ones */
      for (int64_t b = 0; b < blk.nblocks; b++)
        npc += blk.blocks[b].row0 < P->r0 + P->nr && blk.blocks[b].row0 + blk.blocks[b].rows > P->r0;
      if (npc == 0 || npc > 11) continue;
      double c[11];
      unsigned char warm[11], sub[11], got[11];
      for (int64_t k = 0; k < npc; k++) { /* standalone costs around what the pass would charge */
        const ts_attn_segment *g = &s.segs[P->seg0 + k];
        ts_block b = {.rows = g->nr, .cols = g->nc, .nnz = (int64_t)g->nr * g->nc / 2};
        c[k] = ts_attn_cost_default(&b, (ts_attn_tile){16, 16}, &d) * (0.2 + 0.8 * ts_rng_uniform(&r));
        warm[k] = ts_rng_uniform(&r) < 0.5;
      }
      for (int h = 0; h < 3; h++) {
        double load, wl, lb, best = INFINITY, v, l2;
        CHECK_OK(ts__sched_cover_panel(&bm, P, &s.segs[P->seg0], npc, c, o.heights[h], &o, ts_attn_cost_default, 1.0, warm, false,
                                       ts_now() + 10, got, &load, &wl, &lb, &info));
        CHECK(load <= wl * (1 + 1e-9), "%s panel %lld h %d: fixed-merged warm start %g > warm start %g", specs[sp], (long long)p,
              o.heights[h], load, wl);
        for (int64_t mask_ = 0; mask_ < ((int64_t)1 << npc); mask_++) {
          for (int64_t k = 0; k < npc; k++) sub[k] = (mask_ >> k) & 1;
          CHECK_OK(ts__sched_cover_panel(&bm, P, &s.segs[P->seg0], npc, c, o.heights[h], &o, ts_attn_cost_default, 1.0, sub, false,
                                         ts_now() + 10, got, &l2, &v, &lb, &info));
          best = v < best ? v : best;
        }
        cbc_before = info.cover_cbc;
        CHECK_OK(ts__sched_cover_panel(&bm, P, &s.segs[P->seg0], npc, c, o.heights[h], &o, ts_attn_cost_default, 1.0, warm, true,
                                       ts_now() + 10, got, &load, &wl, &lb, &info));
        CHECK(fabs(load - best) <= 1e-9 * best, "%s panel %lld h %d: solved %g, brute force %g (%lld CBC models)", specs[sp],
              (long long)p, o.heights[h], load, best, (long long)(info.cover_cbc - cbc_before));
        CHECK(lb <= best * (1 + 1e-9), "%s panel %lld h %d: lower bound %g > optimum %g", specs[sp], (long long)p, o.heights[h], lb,
              best);
        double again;
        CHECK_OK(ts__sched_cover_panel(&bm, P, &s.segs[P->seg0], npc, c, o.heights[h], &o, ts_attn_cost_default, 1.0, got, false,
                                       ts_now() + 10, sub, &l2, &again, &lb, &info));
        CHECK(fabs(again - load) <= 1e-9 * load, "the returned choice prices at %g, reported %g", again, load);
        checked++;
      }
    }
    ts_free(t0);
    ts_attn_schedule_free(&s);
    ts_blocks_free(&blk);
    ts_bitmap_free(&bm);
    ts_csr_free(&m);
  }
  printf("brute force: %lld panel heights, %lld enumerated components, %lld CBC models\n", (long long)checked,
         (long long)info.cover_enum, (long long)info.cover_cbc);
  CHECK(checked >= 15 && info.cover_cbc > 0 && info.cover_enum > 0, "%lld panel heights, %lld CBC, %lld enumerated", (long long)checked,
        (long long)info.cover_cbc, (long long)info.cover_enum);
}

/* The whole ILP under a tiny time limit and normal: valid, never worse than the greedy (same model). */
static void test_budget(void) {
  ts_csr m = {0};
  ts_pattern_info pi;
  CHECK_OK(ts_pattern_generate("window2d:h=24,w=24,k=7", &m, &pi));
  ts_bitmap bm = {0};
  CHECK_OK(ts_csr_to_bitmap(&m, &bm));
  ts_blocks_opts bo;
  ts_blocks_opts_default(&bo);
  ts_blocks blk;
  CHECK_OK(ts_blocks_extract(&m, &bo, &blk));
  for (int tl = 0; tl < 2; tl++) {
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    o.threads = 2;
    o.time_limit = tl ? 1.0 : 1e-3;
    int d = 32;
    o.cost_user = &d;
    ts_attn_schedule s;
    ts_attn_sched_info si;
    CHECK_OK(ts_attn_schedule_solve(&blk, &bm, &o, &s, &si));
    CHECK(si.cover_run && si.makespan <= si.greedy_makespan * (1 + 1e-12), "time limit %g: makespan %g, greedy %g", o.time_limit,
          si.makespan, si.greedy_makespan);
    CHECK(si.lower_bound <= si.makespan * (1 + 1e-12), "bound %g > makespan %g", si.lower_bound, si.makespan);
    run_and_check(&s, &bm, tl ? "ilp" : "ilp, 1 ms");
    ts_attn_schedule_free(&s);
  }
  ts_blocks_free(&blk);
  ts_bitmap_free(&bm);
  ts_pattern_info_free(&pi);
  ts_csr_free(&m);
}

int main(void) {
  test_stacked_pieces();
  test_brute_panels();
  test_budget();
  return tst_finish();
}
