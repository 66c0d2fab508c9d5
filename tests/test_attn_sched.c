/* Attention scheduler and plan cache: greedy vs ILP on small abstract instances (the ILP equals
 * brute force on tiny ones and never loses to greedy), the static panel -> thread assignment of the
 * executor (vs the reference), schedules from the scheduler on a permuted window2d mask executed on
 * the original token order, and the plan cache (round trip, key mismatch, corrupt files).
 *
 * Attention tolerance: max |O - O_ref| / max|V| <= 2e-5, the fp32 class of tests/test_attn.c (the
 * executor's fp32 scores and sums against a double reference; measured ~1e-6 there). Predicted
 * makespans are compared with a relative 1e-9 (the same double sums in a different order). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "io/json_internal.h"
#include "tessera/attn_sched.h"
#include "tst.h"

#define TOL 2e-5

/* ---- abstract instances ------------------------------------------------------------------------ */

typedef struct inst {
  int64_t np, ni;
  int nt;
  int64_t pp[16];
  double cost[16 * 4], base[8];
} inst;

static void inst_random(inst *I, ts_rng *r, int64_t np, int64_t ni, int nt) {
  I->np = np, I->ni = ni, I->nt = nt;
  for (int64_t i = 0; i < ni; i++) {
    I->pp[i] = i < np ? i : (int64_t)ts_rng_below(r, (uint64_t)np); /* every panel gets a piece */
    for (int t = 0; t < nt; t++) I->cost[i * nt + t] = 1.0 + floor(ts_rng_uniform(r) * 100.0);
  }
  for (int64_t p = 0; p < np; p++) I->base[p] = floor(ts_rng_uniform(r) * 30.0);
}

/* Exhaustive minimum makespan over every tile choice and every panel -> thread map. */
static double brute(const inst *I, int P) {
  double best = INFINITY;
  int64_t tc = 1, ac = 1;
  for (int64_t i = 0; i < I->ni; i++) tc *= I->nt;
  for (int64_t p = 0; p < I->np; p++) ac *= P;
  for (int64_t a = 0; a < ac; a++)
    for (int64_t c = 0; c < tc; c++) {
      double L[8] = {0}, ld[4] = {0}, mk = 0;
      for (int64_t p = 0; p < I->np; p++) L[p] = I->base[p];
      int64_t x = c;
      for (int64_t i = 0; i < I->ni; i++, x /= I->nt) L[I->pp[i]] += I->cost[i * I->nt + x % I->nt];
      x = a;
      for (int64_t p = 0; p < I->np; p++, x /= P) ld[x % P] += L[p];
      for (int q = 0; q < P; q++) mk = ld[q] > mk ? ld[q] : mk;
      if (mk < best) best = mk;
    }
  return best;
}

static double makespan_of(const inst *I, int P, const int *tile, const int32_t *thread) {
  double L[8] = {0}, ld[4] = {0}, mk = 0;
  for (int64_t p = 0; p < I->np; p++) L[p] = I->base[p];
  for (int64_t i = 0; i < I->ni; i++) L[I->pp[i]] += I->cost[i * I->nt + tile[i]];
  for (int64_t p = 0; p < I->np; p++) ld[thread[p]] += L[p];
  for (int q = 0; q < P; q++) mk = ld[q] > mk ? ld[q] : mk;
  return mk;
}

static void test_brute_force(void) {
  ts_rng r;
  ts_rng_seed(&r, 42);
  static const struct { int64_t np, ni; int nt, P; } shapes[] = {{4, 4, 3, 2}, {3, 6, 3, 2}, {5, 5, 2, 3}, {4, 7, 2, 2}};
  int ilp_wins = 0;
  for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
    for (int rep = 0; rep < 6; rep++) {
      inst I;
      inst_random(&I, &r, shapes[sh].np, shapes[sh].ni, shapes[sh].nt);
      int P = shapes[sh].P;
      ts_attn_sched_problem pb = {.npanels = I.np, .npieces = I.ni, .ntiles = I.nt, .piece_panel = I.pp, .cost = I.cost,
                                  .base = I.base};
      double opt = brute(&I, P);
      for (int fixed = 0; fixed < 2; fixed++) {
        ts_attn_sched_opts o;
        ts_attn_sched_opts_default(&o);
        o.threads = P;
        o.k_tiles = I.nt;
        o.max_tile_vars = fixed ? 0 : 1000;
        o.full_model = !fixed; /* exercise the x variables (else the proven aggregate answers) */
        o.time_limit = 5.0;
        o.rel_gap = 0; /* prove optimality (brute force is exact) */
        int tile[16];
        int32_t thread[8];
        ts_attn_sched_info info;
        CHECK_OK(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, &info));
        CHECK(info.ilp_run && info.tiles_fixed == (fixed == 1), "ilp run %d, tiles fixed %d", info.ilp_run, info.tiles_fixed);
        CHECK(info.ilp_status == TS_ILP_OPTIMAL, "shape %zu rep %d: ilp status %s", sh, rep, ts_ilp_status_name(info.ilp_status));
        double mk = makespan_of(&I, P, tile, thread);
        CHECK(fabs(mk - info.makespan) <= 1e-9 * mk, "reported makespan %g, recomputed %g", info.makespan, mk);
        CHECK(fabs(mk - opt) <= 1e-9 * opt, "shape %zu rep %d fixed %d: ILP makespan %g, brute force %g", sh, rep, fixed, mk, opt);
        CHECK(info.makespan <= info.greedy_makespan * (1 + 1e-12), "ILP %g > greedy %g", info.makespan, info.greedy_makespan);
        CHECK(info.lower_bound <= opt * (1 + 1e-12), "lower bound %g > optimum %g", info.lower_bound, opt);
        ilp_wins += info.makespan < info.greedy_makespan;
        /* greedy alone */
        o.solver = TS_ATTN_SOLVER_GREEDY;
        ts_attn_sched_info gi;
        CHECK_OK(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, &gi));
        CHECK(!gi.ilp_run && gi.solver == TS_ATTN_SOLVER_GREEDY, "greedy ran the ILP");
        CHECK(fabs(gi.makespan - info.greedy_makespan) <= 1e-9 * gi.makespan, "greedy %g vs %g", gi.makespan, info.greedy_makespan);
        for (int64_t i = 0; i < I.ni; i++) /* cheapest tile */
          for (int t = 0; t < I.nt; t++) CHECK(I.cost[i * I.nt + tile[i]] <= I.cost[i * I.nt + t], "greedy tile not cheapest");
      }
    }
  printf("brute force: ILP beat greedy (LPT) on %d of 48 solves\n", ilp_wins);
  /* LPT's classic bad case: panel loads {3, 3, 2, 2, 2} on 2 threads, LPT 7, optimum 6 (each panel
   * has one piece whose second tile is dearer, so tiles must stay at their cheapest). */
  inst I = {.np = 5, .ni = 5, .nt = 2, .pp = {0, 1, 2, 3, 4}, .base = {3, 3, 2, 2, 2}};
  for (int i = 0; i < 5; i++) I.cost[2 * i] = 0.5, I.cost[2 * i + 1] = 0.25 + 0.5 * (i % 2); /* tile 1 cheaper on even i */
  for (int i = 0; i < 5; i++) I.base[i] -= I.cost[2 * i + (i % 2 == 0)];
  ts_attn_sched_problem pb = {.npanels = 5, .npieces = 5, .ntiles = 2, .piece_panel = I.pp, .cost = I.cost, .base = I.base};
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.threads = 2;
  o.rel_gap = 0;
  int tile[5];
  int32_t thread[5];
  ts_attn_sched_info info;
  CHECK_OK(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, &info));
  CHECK(fabs(info.greedy_makespan - 7) < 1e-9 && fabs(info.makespan - 6) < 1e-9 && info.solver == TS_ATTN_SOLVER_ILP &&
            info.ilp_improved,
        "LPT case: greedy %g (7), ILP %g (6), solver %s", info.greedy_makespan, info.makespan, ts_attn_solver_name(info.solver));
  CHECK(fabs(brute(&I, 2) - 6) < 1e-9, "brute force of the LPT case %g", brute(&I, 2));
}

/* ---- instances with compact passes -------------------------------------------------------------- */

typedef struct cinst {
  int64_t np, ni;
  int nt, nh;
  int64_t pp[8];
  double cost[8 * 2], merge[8 * 2], open[4 * 2];
  unsigned char must[4];
} cinst;

/* Panel load of configuration h (-1: no pass) with the piece choices in c (tile t, or nt + h). */
static double cload(const cinst *I, int64_t p, int h, const int *c) {
  double L = h >= 0 ? I->open[p * I->nh + h] : 0;
  for (int64_t i = 0; i < I->ni; i++)
    if (I->pp[i] == p) L += c[i] < I->nt ? I->cost[i * I->nt + c[i]] : I->merge[i * I->nh + c[i] - I->nt];
  return L;
}

/* Exhaustive: every height per panel, every choice per piece consistent with it, every thread map. */
static double cbrute(const cinst *I, int P) {
  double best = INFINITY;
  int64_t hc = 1, cc = 1, ac = 1;
  for (int64_t p = 0; p < I->np; p++) hc *= I->nh + 1, ac *= P;
  for (int64_t i = 0; i < I->ni; i++) cc *= I->nt + I->nh;
  for (int64_t hx = 0; hx < hc; hx++) {
    int h[4];
    int64_t x = hx;
    bool ok = true;
    for (int64_t p = 0; p < I->np; p++, x /= I->nh + 1) h[p] = (int)(x % (I->nh + 1)) - 1, ok &= h[p] >= 0 || !I->must[p];
    for (int64_t cx = 0; ok && cx < cc; cx++) {
      int c[8];
      bool cok = true;
      x = cx;
      for (int64_t i = 0; i < I->ni; i++, x /= I->nt + I->nh) {
        c[i] = (int)(x % (I->nt + I->nh));
        cok &= c[i] < I->nt || c[i] - I->nt == h[I->pp[i]];
      }
      if (!cok) continue;
      double L[4];
      for (int64_t p = 0; p < I->np; p++) L[p] = cload(I, p, h[p], c);
      for (int64_t ax = 0; ax < ac; ax++) {
        double ld[3] = {0}, mk = 0;
        x = ax;
        for (int64_t p = 0; p < I->np; p++, x /= P) ld[x % P] += L[p];
        for (int q = 0; q < P; q++) mk = ld[q] > mk ? ld[q] : mk;
        if (mk < best) best = mk;
      }
    }
  }
  return best;
}

/* The ILP (aggregated and full) equals brute force with compact passes; the myopic greedy never
 * wins; solutions are consistent (merged pieces at their panel's height, residue panels open). */
static void test_compact_brute(void) {
  ts_rng r;
  ts_rng_seed(&r, 99);
  int wins = 0, solves = 0;
  for (int rep = 0; rep < 16; rep++) {
    cinst I = {.np = 3 + rep % 2, .ni = 6, .nt = 2, .nh = 2};
    for (int64_t i = 0; i < I.ni; i++) {
      I.pp[i] = i < I.np ? i : (int64_t)ts_rng_below(&r, (uint64_t)I.np);
      for (int t = 0; t < I.nt; t++) I.cost[i * I.nt + t] = 20 + floor(ts_rng_uniform(&r) * 60);
      for (int h = 0; h < I.nh; h++) I.merge[i * I.nh + h] = 5 + floor(ts_rng_uniform(&r) * 60);
    }
    for (int64_t p = 0; p < I.np; p++) {
      I.must[p] = ts_rng_uniform(&r) < 0.5;
      for (int h = 0; h < I.nh; h++) I.open[p * I.nh + h] = floor(ts_rng_uniform(&r) * (I.must[p] ? 40 : 15));
    }
    ts_attn_sched_problem pb = {.npanels = I.np, .npieces = I.ni, .ntiles = I.nt, .piece_panel = I.pp, .cost = I.cost,
                                .nheights = I.nh, .merge = I.merge, .open = I.open, .must_open = I.must};
    double opt = cbrute(&I, 2);
    for (int full = 0; full < 2; full++) {
      ts_attn_sched_opts o;
      ts_attn_sched_opts_default(&o);
      o.threads = 2, o.k_tiles = I.nt, o.rel_gap = 0, o.time_limit = 5.0;
      o.full_model = full, o.max_tile_vars = full ? 1000 : 0;
      int tile[8], height[4];
      int32_t thread[4];
      ts_attn_sched_info info;
      CHECK_OK(ts_attn_sched_problem_solve(&pb, &o, tile, height, thread, &info));
      double ld[2] = {0};
      for (int64_t p = 0; p < I.np; p++) {
        CHECK(height[p] >= -1 && height[p] < I.nh && (height[p] >= 0 || !I.must[p]), "rep %d: panel %lld height %d (must %d)",
              rep, (long long)p, height[p], I.must[p]);
        ld[thread[p]] += cload(&I, p, height[p], tile);
      }
      for (int64_t i = 0; i < I.ni; i++)
        CHECK(tile[i] < I.nt || tile[i] - I.nt == height[I.pp[i]], "rep %d: piece %lld merged at %d, panel height %d", rep,
              (long long)i, tile[i] - I.nt, height[I.pp[i]]);
      double mk = ld[0] > ld[1] ? ld[0] : ld[1];
      CHECK(fabs(mk - info.makespan) <= 1e-9 * mk, "rep %d: reported %g, recomputed %g", rep, info.makespan, mk);
      CHECK(fabs(mk - opt) <= 1e-9 * opt, "rep %d full %d: ILP %g, brute force %g", rep, full, mk, opt);
      CHECK(info.makespan <= info.greedy_makespan * (1 + 1e-12), "ILP %g > greedy %g", info.makespan, info.greedy_makespan);
      wins += info.makespan < info.greedy_makespan * (1 - 1e-12);
      solves++;
    }
  }
  printf("compact brute force: ILP beat the per-block greedy on %d of %d solves\n", wins, solves);
  /* a case the per-block greedy gets wrong: the residue prefers height 0 (open 1 vs 2), both pieces
   * prefer height 1 (merge 10 vs 4 against a standalone 12): greedy 1 + 10 + 10 = 21, best 2 + 4 + 4 */
  cinst I = {.np = 1, .ni = 2, .nt = 1, .nh = 2, .pp = {0, 0}, .cost = {12, 12}, .merge = {10, 4, 10, 4}, .open = {1, 2},
             .must = {1}};
  ts_attn_sched_problem pb = {.npanels = 1, .npieces = 2, .ntiles = 1, .piece_panel = I.pp, .cost = I.cost, .nheights = 2,
                              .merge = I.merge, .open = I.open, .must_open = I.must};
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.threads = 2;
  int tile[2], height[1];
  int32_t thread[1];
  ts_attn_sched_info info;
  CHECK_OK(ts_attn_sched_problem_solve(&pb, &o, tile, height, thread, &info));
  CHECK(fabs(info.greedy_makespan - 21) < 1e-9 && fabs(info.makespan - 10) < 1e-9 && height[0] == 1 && tile[0] == 2 &&
            info.solver == TS_ATTN_SOLVER_ILP && info.greedy_merged == 2 && info.merged == 2 && info.compact_panels == 1,
        "facility case: greedy %g (21), ILP %g (10), height %d", info.greedy_makespan, info.makespan, height[0]);
  CHECK_ERR_CONTAINS(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, NULL), "height");
  I.merge[1] = NAN;
  CHECK_ERR_CONTAINS(ts_attn_sched_problem_solve(&pb, &o, tile, height, thread, NULL), "piece 0 height 1");
}

/* A larger instance: ILP within [lower bound, greedy]; bad inputs rejected. */
static void test_larger(void) {
  enum { NP = 40, NI = 120, NT = 5 };
  static int64_t pp[NI];
  static double cost[NI * NT], base[NP];
  ts_rng r;
  ts_rng_seed(&r, 7);
  for (int i = 0; i < NI; i++) {
    pp[i] = i % NP;
    for (int t = 0; t < NT; t++) cost[i * NT + t] = 100 + ts_rng_uniform(&r) * 1000;
  }
  for (int p = 0; p < NP; p++) base[p] = ts_rng_uniform(&r) * 200;
  ts_attn_sched_problem pb = {.npanels = NP, .npieces = NI, .ntiles = NT, .piece_panel = pp, .cost = cost, .base = base};
  for (int P = 2; P <= 3; P++) {
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    o.threads = P;
    o.time_limit = 0.5;
    int tile[NI];
    int32_t thread[NP];
    ts_attn_sched_info info;
    CHECK_OK(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, &info));
    CHECK(info.makespan <= info.greedy_makespan * (1 + 1e-12) && info.makespan >= info.lower_bound * (1 - 1e-9),
          "P=%d: makespan %g not in [%g, %g]", P, info.makespan, info.lower_bound, info.greedy_makespan);
    for (int p = 0; p < NP; p++) CHECK(thread[p] >= 0 && thread[p] < P, "thread %d", thread[p]);
  }
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  int tile[NI];
  int32_t thread[NP];
  o.threads = -3;
  CHECK_ERR_CONTAINS(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, NULL), "threads");
  o.threads = 2;
  o.time_limit = 0;
  CHECK_ERR_CONTAINS(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, NULL), "time_limit");
  o.time_limit = 1;
  cost[5] = NAN;
  CHECK_ERR_CONTAINS(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, NULL), "piece 1 tile 0");
  cost[5] = 1;
  pp[3] = NP;
  CHECK_ERR_CONTAINS(ts_attn_sched_problem_solve(&pb, &o, tile, NULL, thread, NULL), "piece 3");
  pp[3] = 3;
  ts_attn_solver sv;
  CHECK_OK(ts_attn_solver_parse("ilp", &sv));
  CHECK(sv == TS_ATTN_SOLVER_ILP, "parse ilp");
  CHECK_STATUS(ts_attn_solver_parse("cplex", &sv), TS_ERR_INVALID_ARG);
}

/* ---- attention on masks ---------------------------------------------------------------------- */

typedef struct qkv {
  int64_t b, h, n, d;
  float *Q, *K, *V, *O, *R;
  double vmax;
} qkv;

static qkv qkv_make(int64_t b, int64_t h, int64_t n, int64_t d, uint64_t seed) {
  qkv x = {.b = b, .h = h, .n = n, .d = d};
  size_t tot = (size_t)(b * h * n * d);
  x.Q = ts_malloc(tot * sizeof(float)), x.K = ts_malloc(tot * sizeof(float)), x.V = ts_malloc(tot * sizeof(float));
  x.O = ts_malloc(tot * sizeof(float)), x.R = ts_malloc(tot * sizeof(float));
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (size_t i = 0; i < tot; i++) {
    x.Q[i] = ts_rng_normal(&r), x.K[i] = ts_rng_normal(&r), x.V[i] = ts_rng_normal(&r);
    x.vmax = fabs(x.V[i]) > x.vmax ? fabs(x.V[i]) : x.vmax;
  }
  return x;
}
static void qkv_free(qkv *x) { ts_free(x->Q), ts_free(x->K), ts_free(x->V), ts_free(x->O), ts_free(x->R); }
static void poison(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = NAN;
}
static double rel_err(const qkv *x) {
  return tst_max_abs_diff(x->O, x->R, (size_t)(x->b * x->h * x->n * x->d)) / x->vmax;
}

static void test_static_threads(void) {
  ts_csr m = {0};
  ts_bitmap bm = {0};
  CHECK_OK(ts_pattern_generate("window2d:h=12,w=11,k=5", &m, NULL));
  CHECK_OK(ts_csr_to_bitmap(&m, &bm));
  const int64_t n = m.rows;
  qkv x = qkv_make(2, 3, n, 24, 11);
  CHECK_OK(ts_attn_reference(&bm, x.Q, x.K, x.V, x.R, x.b, x.h, n, x.d));
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_attn_schedule s;
  CHECK_OK(ts_attn_schedule_blockskip(&s, n, 16, 32));
  CHECK(s.thread == NULL, "a fresh schedule has no thread array");
  int32_t thr[64];
  /* 0: round robin over 3 threads (more than ctx runs: mod 2); 1: all on thread 1; 2: one dynamic */
  for (int variant = 0; variant < 3; variant++) {
    for (int64_t p = 0; p < s.npanels; p++) thr[p] = variant == 0 ? (int32_t)(p % 3) : 1;
    if (variant == 2) thr[s.npanels / 2] = -1;
    CHECK_OK(ts_attn_schedule_set_threads(&s, thr));
    ts_attn_plan *pl;
    CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, &bm, x.d));
    poison(x.O, (size_t)(x.b * x.h * n * x.d));
    CHECK_OK(ts_attn_execute(ctx, pl, x.Q, x.K, x.V, x.O, x.b, x.h, n, x.d));
    double e = rel_err(&x);
    CHECK(e <= TOL, "static variant %d: error %g", variant, e);
    poison(x.O, (size_t)(x.b * x.h * n * x.d));
    CHECK_OK(ts_attn_execute(NULL, pl, x.Q, x.K, x.V, x.O, x.b, x.h, n, x.d)); /* plan's threads */
    CHECK(rel_err(&x) <= TOL, "static variant %d (plan threads): error %g", variant, rel_err(&x));
    ts_attn_plan_destroy(pl);
    /* JSON round trip keeps the assignment */
    char *text = NULL;
    ts_attn_schedule r;
    CHECK_OK(ts_attn_schedule_to_json(&s, &text));
    CHECK_OK(ts_attn_schedule_from_json(text, &r));
    CHECK(r.thread && memcmp(r.thread, thr, (size_t)s.npanels * sizeof *thr) == 0, "thread array round trip");
    ts_attn_schedule_free(&r);
    free(text);
  }
  thr[0] = -2;
  CHECK_ERR_CONTAINS(ts_attn_schedule_set_threads(&s, thr), "panel 0: thread = -2");
  s.thread[1] = TS_ATTN_THREAD_MAX;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "panel 1: thread");
  char *text = NULL;
  CHECK_OK(ts_attn_schedule_to_json(&s, &text));
  if (text) {
    CHECK_STATUS(ts_attn_schedule_from_json(text, &(ts_attn_schedule){0}), TS_ERR_FORMAT);
    free(text);
  }
  CHECK_OK(ts_attn_schedule_set_threads(&s, NULL));
  CHECK(s.thread == NULL, "cleared");
  ts_attn_schedule_free(&s);
  ts_context_destroy(ctx);
  qkv_free(&x);
  ts_bitmap_free(&bm);
  ts_csr_free(&m);
}

/* Reorder a permuted window2d, extract blocks, schedule (greedy and ILP), execute on the ORIGINAL
 * token order via the permutation, compare with the reference on the original mask. */
/* A generated 2-D pattern in a token order: the pattern, its permuted copy, both as bitmaps, the
 * permutation and the permuted pattern's dense blocks. */
typedef struct ordered {
  int64_t n;
  ts_csr m, pm;
  ts_pattern_info info;
  int32_t *perm;
  ts_bitmap bo, bp;
  ts_blocks blk;
} ordered;

static ordered ordered_make(const char *spec, ts_reorder_method method) {
  ordered M;
  memset(&M, 0, sizeof M);
  CHECK_OK(ts_pattern_generate(spec, &M.m, &M.info));
  M.n = M.m.rows;
  M.perm = ts_malloc((size_t)M.n * sizeof *M.perm);
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = method;
  ro.grid_h = M.info.grid_h, ro.grid_w = M.info.grid_w, ro.grid_pos = M.info.base_index;
  CHECK_OK(ts_reorder(&M.m, &ro, M.perm, NULL, NULL));
  CHECK_OK(ts_csr_permute(&M.m, M.perm, M.perm, &M.pm));
  CHECK_OK(ts_csr_to_bitmap(&M.m, &M.bo));
  CHECK_OK(ts_csr_to_bitmap(&M.pm, &M.bp));
  ts_blocks_opts bopt;
  ts_blocks_opts_default(&bopt);
  CHECK_OK(ts_blocks_extract(&M.pm, &bopt, &M.blk));
  return M;
}

static void ordered_free(ordered *M) {
  ts_blocks_free(&M->blk);
  ts_bitmap_free(&M->bo), ts_bitmap_free(&M->bp);
  ts_free(M->perm);
  ts_pattern_info_free(&M->info);
  ts_csr_free(&M->m), ts_csr_free(&M->pm);
}

static void test_scheduled_window2d(void) {
  const char *specs[] = {"permute:window2d:h=16,w=16,k=5,seed=3", "permute:vitdet:h=14,w=14,win=7,global=2,seed=5"};
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  for (int sp = 0; sp < 2; sp++) {
    ordered M = ordered_make(specs[sp], TS_REORDER_HILBERT);
    const int64_t n = M.n;
    int32_t *perm = M.perm;
    ts_bitmap bo = M.bo, bp = M.bp;
    ts_blocks blk = M.blk;
    qkv x = qkv_make(1, 2, n, 32, 21 + (uint64_t)sp);
    CHECK_OK(ts_attn_reference(&bo, x.Q, x.K, x.V, x.R, x.b, x.h, n, x.d));
    int d = 32;
    for (int variant = 0; variant < 5; variant++) {
      const int solver = variant & 1 || variant == 4;
      ts_attn_sched_opts o;
      ts_attn_sched_opts_default(&o);
      if (variant == 2 || variant == 3) o.nheights = 0; /* no compact passes: blocks and a MIXED residue */
      if (variant == 4) o.calibrate_d = 32;             /* measured: calibration, then the guard */
      if (variant == 4 && sp % 2) o.calibrate_heads = 3; /* the guard's executes on 3 heads */
      o.solver = solver ? TS_ATTN_SOLVER_ILP : TS_ATTN_SOLVER_GREEDY;
      o.threads = 2;
      o.time_limit = 0.5;
      o.cost_user = &d;
      o.blocks.panel_rows = 32;
      ts_attn_schedule s;
      ts_attn_sched_info si;
      CHECK_OK(ts_attn_schedule_solve(&blk, &bp, &o, &s, &si));
      if (variant == 4) { /* an alternative may win the guard: then the schedule is that, run dynamically */
        CHECK(si.calibrated && si.guarded && si.guard_schedule_s > 0 && si.guard_fixed_s > 0 && si.guard_ms > 0,
              "%s: calibrated %d guarded %d (%g, %g s)", specs[sp], si.calibrated, si.guarded, si.guard_schedule_s,
              si.guard_fixed_s);
        /* block skip, or every panel one pass (after no standalone piece) */
        for (int64_t g = 0; si.fallback.br > 0 && g < s.nsegs; g++)
          CHECK(s.thread == NULL && s.segs[g].br == si.fallback.br && s.segs[g].bc == si.fallback.bc &&
                    s.segs[g].kind == (si.fallback_kind == TS_ATTN_SEG_DIAG ? TS_ATTN_SEG_DIAG
                                       : si.fallback_kind == TS_ATTN_SEG_COMPACT ? TS_ATTN_SEG_COMPACT : TS_ATTN_SEG_MIXED),
                "%s: fallback %dx%d is not the schedule", specs[sp], si.fallback.br, si.fallback.bc);
        if (si.fallback.br == 0)
          CHECK(si.guard_fixed_s >= 0.97 * si.guard_schedule_s, "%s: kept a schedule %g s against a fixed %g s", specs[sp],
                si.guard_schedule_s, si.guard_fixed_s);
      } else {
        CHECK(!si.guarded && si.fallback.br == 0, "no guard without measurements");
      }
      if (si.fallback.br == 0) CHECK(s.thread != NULL, "the scheduler sets threads");
      for (int64_t p = 0; s.thread && p < s.npanels; p++) CHECK(s.thread[p] >= 0 && s.thread[p] < 2, "thread %d", s.thread[p]);
      CHECK(si.makespan <= si.greedy_makespan * (1 + 1e-12), "%s: makespan %g > greedy %g", specs[sp], si.makespan,
            si.greedy_makespan);
      CHECK(si.npieces >= si.nblocks && (si.fallback.br > 0 || si.npanels == s.npanels), "pieces %lld blocks %lld",
            (long long)si.npieces, (long long)si.nblocks);
      double pmk, ptot;
      CHECK_OK(ts_attn_schedule_predict(&s, &bp, NULL, &d, 2, &pmk, &ptot));
      CHECK(pmk > 0 && ptot >= pmk, "predict %g %g", pmk, ptot);
      ts_attn_plan *pl;
      CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, &bp, x.d));
      poison(x.O, (size_t)(x.b * x.h * n * x.d));
      CHECK_OK(ts_attn_execute_original(ctx, pl, perm, x.Q, x.K, x.V, x.O, x.b, x.h, n, x.d));
      double e = rel_err(&x);
      CHECK(e <= TOL, "%s variant %d: error %g", specs[sp], variant, e);
      if (variant == 2 || variant == 3)
        CHECK(si.merged == 0 && si.compact_panels == 0, "no compact passes asked, %lld merged", (long long)si.merged);
      if (solver)
        printf("%s (%s): %lld blocks, %lld panels (%lld compact, %lld pieces merged), predicted makespan greedy %.4g ilp %.4g "
               "(bound %.4g), error %.2g\n", specs[sp], variant == 3 ? "no compact" : variant == 4 ? "measured" : "compact", (long long)si.nblocks,
               (long long)si.npanels, (long long)si.compact_panels, (long long)si.merged, si.greedy_makespan, si.makespan,
               si.lower_bound, e);
      ts_attn_plan_destroy(pl);
      ts_attn_schedule_free(&s);
    }
    /* the permuted run without the helper is wrong on the original order: the helper matters */
    ts_attn_schedule s;
    CHECK_OK(ts_attn_schedule_blockskip(&s, n, 16, 16));
    ts_attn_plan *pl;
    CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, &bp, x.d));
    CHECK_OK(ts_attn_execute(ctx, pl, x.Q, x.K, x.V, x.O, x.b, x.h, n, x.d));
    CHECK(rel_err(&x) > 1e-2, "unpermuted run matched the original order (%g)", rel_err(&x));
    CHECK_STATUS(ts_attn_execute_original(ctx, pl, (int32_t[]){0, 0}, x.Q, x.K, x.V, x.O, x.b, x.h, 2, x.d), TS_ERR_INVALID_ARG);
    ts_attn_plan_destroy(pl);
    ts_attn_schedule_free(&s);
    qkv_free(&x);
    ordered_free(&M);
  }
  ts_context_destroy(ctx);
}

/* M's schedule from the measured pipeline (calibration and guard at d = 32, 2 threads). */
static void guarded_solve(const ordered *M, ts_attn_schedule *s, ts_attn_sched_info *si) {
  int d = 32;
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.calibrate_d = 32;
  o.threads = 2;
  o.time_limit = 0.5;
  o.cost_user = &d;
  CHECK_OK(ts_attn_schedule_solve(&M->blk, &M->bp, &o, s, si));
}

/* Inputs (batch 1, 2 heads, d = 32, seed) with their reference output for M's mask, and M's
 * guarded schedule. */
static qkv guarded_case(const ordered *M, uint64_t seed, ts_attn_schedule *s, ts_attn_sched_info *si) {
  qkv x = qkv_make(1, 2, M->n, 32, seed);
  CHECK_OK(ts_attn_reference(&M->bo, x.Q, x.K, x.V, x.R, x.b, x.h, M->n, x.d));
  guarded_solve(M, s, si);
  return x;
}

/* The guard's schedule s planned and executed on M's mask in the original token order, against the
 * reference in x (what: the case, for the message). */
static void execute_checked(const ts_context *ctx, const ts_attn_schedule *s, const ordered *M, qkv *x, const char *what) {
  ts_attn_plan *pl = NULL;
  CHECK_OK(ts_attn_plan_create(&pl, ctx, s, &M->bp, x->d));
  if (pl) {
    CHECK_OK(ts_attn_execute_original(ctx, pl, M->perm, x->Q, x->K, x->V, x->O, x->b, x->h, M->n, x->d));
    CHECK(rel_err(x) <= TOL, "%s: error %g", what, rel_err(x));
  }
  ts_attn_plan_destroy(pl);
}

/* The guard times 16-row DIAG passes where their cells make them a candidate -- a small window in
 * the natural order -- and not on the Hilbert-ordered one, whose rows meet their keys at scattered
 * offsets; whatever it keeps runs correctly. */
static void test_guard_diag(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  for (int order = 0; order < 2; order++) {
    ordered M = ordered_make("window2d:h=24,w=24,k=5", order ? TS_REORDER_HILBERT : TS_REORDER_NONE);
    ts_attn_schedule s;
    ts_attn_sched_info si;
    qkv x = guarded_case(&M, 41 + (uint64_t)order, &s, &si);
    const bool diag_isa = ts_isa_active() == TS_ISA_AVX512; /* below it DIAG passes are never candidates */
    CHECK(si.guarded && (order || !diag_isa ? si.guard_diag_s == 0 : si.guard_diag_s > 0), "%s order: guard_diag_s %g",
          order ? "hilbert" : "natural", si.guard_diag_s);
    /* DIAG passes timed before the ILP's coverage stage only where they are predicted to win (the
     * natural order), and then the stage did not run */
    CHECK(order ? !si.diag_first : !si.diag_first || (!si.ilp_run && si.guard_diag_s > 0), "%s order: diag_first %d ilp_run %d",
          order ? "hilbert" : "natural", si.diag_first, si.ilp_run);
    for (int64_t g = 0; si.fallback_kind == TS_ATTN_SEG_DIAG && g < s.nsegs; g++)
      CHECK(s.segs[g].kind == TS_ATTN_SEG_DIAG && s.segs[g].br == 16, "the DIAG fallback is the schedule");
    char what[96];
    snprintf(what, sizeof what, "%s order (fallback %s)", order ? "hilbert" : "natural",
             si.fallback.br ? ts_attn_seg_kind_name((ts_attn_seg_kind)si.fallback_kind) : "none");
    execute_checked(ctx, &s, &M, &x, what);
    printf("guard on window2d 24x24 k=5, %s order: schedule %.3g ms, diag passes %.3g ms, kept %s\n",
           order ? "hilbert" : "natural", si.guard_schedule_s * 1e3, si.guard_diag_s * 1e3,
           si.fallback.br ? ts_attn_seg_kind_name((ts_attn_seg_kind)si.fallback_kind) : "the schedule");
    ts_attn_schedule_free(&s);
    qkv_free(&x);
    ordered_free(&M);
  }
  ts_context_destroy(ctx);
}

/* The guard's block-aligned candidate: on windows + global tokens in RCM order (windows contiguous)
 * it is built and timed (guard_blocks_s), and its schedule, when it replaces the solved one, cuts
 * panels at the edges of blocks of >= 16 columns and runs each block in 64-row tiles whose column
 * tile spans the block;
 * either way the result matches the reference. */
/* A schedule re-solved for the backward (calibration and guard time ts_attn_backward, or a training
 * step's forward + backward) is a valid schedule of the mask, calibrated and guarded, and runs
 * correctly (forward against the reference; its backward is tests/test_attn_bwd.c's). */
static void test_backward_pass(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ordered M = ordered_make("window2d:h=16,w=16,k=5", TS_REORDER_HILBERT);
  for (int k = TS_ATTN_PASS_BACKWARD; k <= TS_ATTN_PASS_TRAIN; k++) {
    int d = 32;
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    o.calibrate_d = 32, o.threads = 2, o.time_limit = 0.5, o.cost_user = &d;
    o.calibrate_pass = (ts_attn_pass)k;
    ts_attn_schedule s;
    ts_attn_sched_info si;
    qkv x = qkv_make(1, 2, M.n, 32, 90 + (uint64_t)k);
    CHECK_OK(ts_attn_reference(&M.bo, x.Q, x.K, x.V, x.R, x.b, x.h, M.n, x.d));
    CHECK_OK(ts_attn_schedule_solve(&M.blk, &M.bp, &o, &s, &si));
    CHECK(si.calibrated && si.guarded && si.calib_ms > 0, "%s pass: calibrated %d guarded %d",
          ts_attn_pass_name(o.calibrate_pass), si.calibrated, si.guarded);
    CHECK_OK(ts_attn_schedule_validate(&s));
    execute_checked(ctx, &s, &M, &x, ts_attn_pass_name(o.calibrate_pass));
    ts_attn_schedule_free(&s);
    qkv_free(&x);
  }
  /* a pass outside the enum is refused, naming it */
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.calibrate_d = 32, o.calibrate_pass = (ts_attn_pass)7;
  ts_attn_schedule s;
  ts_attn_sched_info si;
  CHECK_ERR_CONTAINS(ts_attn_schedule_solve(&M.blk, &M.bp, &o, &s, &si), "pass");
  ordered_free(&M);
  ts_context_destroy(ctx);
}

static void test_guard_blocks(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  const char *specs[] = {"vitdet:h=28,w=28,win=7,global=2", "swin:h=28,w=28,win=7,shift=1"};
  for (int c = 0; c < 2; c++) {
    ordered M = ordered_make(specs[c], TS_REORDER_RCM);
    ts_attn_schedule s;
    ts_attn_sched_info si;
    qkv x = guarded_case(&M, 77 + (uint64_t)c, &s, &si);
    CHECK(si.guarded && si.guard_blocks_s > 0, "%s: block-aligned candidate timed (%g)", specs[c], si.guard_blocks_s);
    if (si.block_panels) {
      CHECK(si.fallback.br == 64 && si.fallback.bc == TS_ATTN_TILE_MAX && si.fallback_kind == TS_ATTN_SEG_MIXED,
            "%s: block-aligned fallback %dx%d kind %d", specs[c], si.fallback.br, si.fallback.bc, si.fallback_kind);
      for (int64_t g = 0; g < s.nsegs; g++) {
        const ts_attn_segment *sg = &s.segs[g];
        if (sg->kind == TS_ATTN_SEG_COMPACT) continue;
        CHECK(sg->kind == TS_ATTN_SEG_MIXED && sg->br == 64 && (sg->bc >= sg->nc || sg->bc == TS_ATTN_TILE_MAX),
              "%s: block segment %lld: %dx%d over %d columns", specs[c], (long long)g, sg->br, sg->bc, sg->nc);
      }
      for (int64_t p = 0; p < s.npanels; p++) /* panels cut at the edges of blocks of >= 16 columns */
        for (int64_t k = 0; k < s.panels[p].nseg; k++) {
          const ts_attn_segment *sg = &s.segs[s.panels[p].seg0 + k];
          const bool spans = sg->r0 == s.panels[p].r0 && sg->nr == s.panels[p].nr;
          CHECK(sg->nc < 16 ? sg->r0 >= s.panels[p].r0 && sg->r0 + sg->nr <= s.panels[p].r0 + s.panels[p].nr : spans,
                "%s: panel %lld segment %lld rows [%d, +%d) over %d columns", specs[c], (long long)p, (long long)k, sg->r0,
                sg->nr, sg->nc);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "%s (block panels %d)", specs[c], si.block_panels);
    execute_checked(ctx, &s, &M, &x, what);
    printf("guard on %s: schedule %.3g ms, block-aligned panels %.3g ms, kept %s\n", specs[c], si.guard_schedule_s * 1e3,
           si.guard_blocks_s * 1e3, si.block_panels ? "the block-aligned panels" : si.fallback.br ? "a fallback" : "the schedule");
    ts_attn_schedule_free(&s);
    qkv_free(&x);
    ordered_free(&M);
  }
  ts_context_destroy(ctx);
}

/* ---- token order ------------------------------------------------------------------------------- */

/* An order's auto score: its 16-row compact-pass cells, or its 16-row DIAG-pass cells at 1.3 each
 * where that is fewer. */
static int64_t order_score(const ts_csr *m, const int32_t *perm, int64_t *compact) {
  int64_t c = 0, d = 0;
  CHECK_OK(ts_attn_order_cells(m, perm, 16, &c));
  CHECK_OK(ts_attn_order_diag_cells(m, perm, 16, &d));
  if (compact) *compact = c;
  if (ts_isa_active() != TS_ISA_AVX512) return c; /* DIAG kernels vectorized on AVX-512 only */
  return (double)d * 1.3 < (double)c ? (int64_t)ceil((double)d * 1.3) : c;
}

/* ts_attn_reorder's auto keeps the candidate with the lowest score (order_score): with a grid among
 * none/raster/morton/hilbert/rcm, without one among none/rcm/hc/ic; the compact cells are >= nnz, a named
 * method runs as ts_reorder does. On a small window in row-major order a space-filling curve's
 * compact pass computes fewer cells than row-major's, and row-major's DIAG pass fewer still (window2d
 * 24 x 24, k = 5: a query's keys at the same 25 offsets, more only where NAT's windows clamp at the
 * grid's edges), so without the grid's curves auto keeps row-major. */
static void test_attn_order(void) {
  ts_csr m = {0};
  ts_pattern_info info;
  CHECK_OK(ts_pattern_generate("window2d:h=24,w=24,k=5", &m, &info));
  const int64_t n = m.rows;
  int32_t *perm = ts_malloc((size_t)n * sizeof *perm), *p2 = ts_malloc((size_t)n * sizeof *p2);
  for (int grid = 0; grid < 2; grid++) {
    ts_reorder_opts ro;
    ts_reorder_opts_default(&ro);
    ro.method = TS_REORDER_AUTO;
    if (grid) ro.grid_h = info.grid_h, ro.grid_w = info.grid_w;
    ts_reorder_stats st;
    CHECK_OK(ts_attn_reorder(&m, &ro, perm, &st));
    CHECK_OK(ts_perm_validate(perm, n));
    int64_t compact, diag;
    const int64_t cells = order_score(&m, perm, &compact);
    CHECK_OK(ts_attn_order_diag_cells(&m, perm, 16, &diag));
    CHECK(cells == st.auto_tiles[st.method] && compact >= m.nnz && diag >= m.nnz, "winner %s: score %lld, recorded %lld, nnz %lld",
          ts_reorder_method_name(st.method), (long long)cells, (long long)st.auto_tiles[st.method], (long long)m.nnz);
    for (int k = 0; k < TS_REORDER_METHOD_COUNT; k++) {
      bool tried = st.auto_tiles[k] >= 0;
      bool expect = k == TS_REORDER_NONE || k == TS_REORDER_RCM ||
                    (grid ? k == TS_REORDER_MORTON || k == TS_REORDER_HILBERT || k == TS_REORDER_RASTER : k == TS_REORDER_HC || k == TS_REORDER_IC);
      CHECK(tried == expect, "grid %d: candidate %s tried %d", grid, ts_reorder_method_name((ts_reorder_method)k), tried);
      if (tried) CHECK(st.auto_tiles[k] >= cells, "candidate %s has fewer cells than the winner", ts_reorder_method_name((ts_reorder_method)k));
    }
    int64_t none_compact;
    const int64_t none_score = order_score(&m, NULL, &none_compact);
    CHECK(none_score == st.auto_tiles[TS_REORDER_NONE], "identity score %lld vs %lld", (long long)none_score,
          (long long)st.auto_tiles[TS_REORDER_NONE]);
    if (grid) {
      int64_t curve_compact;
      CHECK_OK(ts_attn_order_cells(&m, NULL, 16, &none_compact));
      ro.method = TS_REORDER_MORTON;
      CHECK_OK(ts_attn_reorder(&m, &ro, p2, NULL));
      CHECK_OK(ts_attn_order_cells(&m, p2, 16, &curve_compact));
      CHECK(curve_compact < none_compact, "a curve's compact pass should beat row-major's on window2d (%lld vs %lld)",
            (long long)curve_compact, (long long)none_compact);
    }
    int64_t nd;
    CHECK_OK(ts_attn_order_diag_cells(&m, NULL, 16, &nd));
    CHECK(nd >= m.nnz && nd < none_compact && (grid || ts_isa_active() != TS_ISA_AVX512 || st.method == TS_REORDER_NONE),
          "row-major DIAG passes: %lld cells (nnz %lld, compact %lld), winner %s", (long long)nd, (long long)m.nnz,
          (long long)none_compact, ts_reorder_method_name(st.method));
  }
  /* the permute: version reorders to the very mask the unpermuted one does (curves from the grid
   * positions; RCM does not depend on the labeling here), so the schedules are the same too */
  for (int w = 0; w < 2; w++) {
    const char *base = w ? "swin:h=56,w=56,win=7,shift=1" : "vitdet:h=24,w=24,win=6,global=2";
    char spec[96];
    snprintf(spec, sizeof spec, "permute:%s,seed=5", base);
    ts_csr a = {0}, b = {0}, pa = {0}, pb = {0};
    ts_pattern_info ia, ib;
    CHECK_OK(ts_pattern_generate(base, &a, &ia));
    CHECK_OK(ts_pattern_generate(spec, &b, &ib));
    int32_t *qa = ts_malloc((size_t)a.rows * sizeof *qa), *qb = ts_malloc((size_t)b.rows * sizeof *qb);
    for (int v = 0; v < 2; v++) {
      ts_reorder_opts ro;
      ts_reorder_opts_default(&ro);
      ro.method = TS_REORDER_AUTO;
      ro.grid_h = (v ? ia : ib).grid_h, ro.grid_w = (v ? ia : ib).grid_w, ro.grid_pos = (v ? ia : ib).base_index;
      ts_reorder_stats st;
      CHECK_OK(ts_attn_reorder(v ? &a : &b, &ro, v ? qa : qb, &st));
      CHECK_OK(ts_perm_validate(v ? qa : qb, a.rows));
    }
    CHECK_OK(ts_csr_permute(&a, qa, qa, &pa));
    CHECK_OK(ts_csr_permute(&b, qb, qb, &pb));
    bool same = pa.nnz == pb.nnz && memcmp(pa.rowptr, pb.rowptr, (size_t)(pa.rows + 1) * sizeof *pa.rowptr) == 0 &&
                memcmp(pa.col, pb.col, (size_t)pa.nnz * sizeof *pa.col) == 0;
    CHECK(same, "%s: the permuted mask reorders to another mask than the unpermuted one", spec);
    ts_free(qa), ts_free(qb);
    ts_pattern_info_free(&ia), ts_pattern_info_free(&ib);
    ts_csr_free(&a), ts_csr_free(&b), ts_csr_free(&pa), ts_csr_free(&pb);
  }
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = TS_REORDER_RCM;
  CHECK_OK(ts_attn_reorder(&m, &ro, perm, NULL));
  CHECK_OK(ts_reorder(&m, &ro, p2, NULL, NULL));
  CHECK(memcmp(perm, p2, (size_t)n * sizeof *perm) == 0, "a named method is ts_reorder's");
  ro.method = TS_REORDER_MORTON; /* no grid: a usage error */
  CHECK_STATUS(ts_attn_reorder(&m, &ro, perm, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_order_cells(&m, NULL, 0, &(int64_t){0}), TS_ERR_INVALID_ARG);
  ts_free(perm), ts_free(p2);
  ts_pattern_info_free(&info);
  ts_csr_free(&m);
}

/* ---- plan cache -------------------------------------------------------------------------------- */

static void test_cache(void) {
  ts_csr m = {0}, pm = {0};
  CHECK_OK(ts_pattern_generate("permute:window2d:h=8,w=8,k=3,seed=2", &m, NULL));
  const int64_t n = m.rows;
  int32_t *perm = ts_malloc((size_t)n * sizeof *perm);
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = TS_REORDER_RCM;
  CHECK_OK(ts_reorder(&m, &ro, perm, NULL, NULL));
  CHECK_OK(ts_csr_permute(&m, perm, perm, &pm));
  ts_bitmap bp = {0};
  CHECK_OK(ts_csr_to_bitmap(&pm, &bp));
  ts_blocks_opts bopt;
  ts_blocks_opts_default(&bopt);
  ts_blocks blk;
  CHECK_OK(ts_blocks_extract(&pm, &bopt, &blk));
  ts_attn_sched_opts o;
  ts_attn_sched_opts_default(&o);
  o.threads = 2;
  o.time_limit = 0.5;
  o.blocks.panel_rows = 16;
  ts_attn_schedule s;
  ts_attn_sched_info si;
  CHECK_OK(ts_attn_schedule_solve(&blk, &bp, &o, &s, &si));

  ts_attn_plan_desc d;
  ts_attn_plan_desc_init(&d, n, 4, 32, 2);
  snprintf(d.reorder, sizeof d.reorder, "rcm");
  char key[17], key2[17], path[4200];
  CHECK_OK(ts_attn_plan_key(&pm, perm, &d, key));
  CHECK(strlen(key) == 16, "key '%s'", key);
  CHECK_OK(ts_attn_plan_key(&pm, perm, &d, key2));
  CHECK(strcmp(key, key2) == 0, "key not deterministic");
  /* every part of the key matters */
  ts_attn_plan_desc d2 = d;
  d2.threads = 3;
  CHECK_OK(ts_attn_plan_key(&pm, perm, &d2, key2));
  CHECK(strcmp(key, key2) != 0, "threads not in the key");
  d2 = d;
  snprintf(d2.dtype, sizeof d2.dtype, "bf16");
  CHECK_OK(ts_attn_plan_key(&pm, perm, &d2, key2));
  CHECK(strcmp(key, key2) != 0, "dtype not in the key");
  CHECK_OK(ts_attn_plan_key(&pm, NULL, &d, key2));
  CHECK(strcmp(key, key2) != 0, "perm not in the key");
  CHECK_OK(ts_attn_plan_key(&m, perm, &d, key2));
  CHECK(strcmp(key, key2) != 0, "mask not in the key");
  CHECK_STATUS(ts_attn_plan_key(&pm, perm, &d2, NULL), TS_ERR_INVALID_ARG);
  d2 = d;
  d2.n = n + 1;
  CHECK_STATUS(ts_attn_plan_key(&pm, perm, &d2, key2), TS_ERR_SHAPE);

  /* the keys keep the values of the FNV-1a words they were made with before the one key hash
   * (ts_hash_*): a mask, permutation and desc pinned to the values the old code gave */
  {
    int64_t rp[5] = {0, 1, 3, 4, 6};
    int32_t cl[6] = {0, 0, 1, 2, 1, 3}, pp[4] = {3, 2, 1, 0};
    ts_csr pin = {.rows = 4, .cols = 4, .nnz = 6, .rowptr = rp, .col = cl};
    ts_attn_plan_desc pd;
    ts_attn_plan_desc_init(&pd, 4, 2, 16, 2);
    snprintf(pd.reorder, sizeof pd.reorder, "rcm"), snprintf(pd.solver, sizeof pd.solver, "ilp");
    snprintf(pd.options, sizeof pd.options, "0123456789abcdef"), snprintf(pd.cpu_model, sizeof pd.cpu_model, "Test CPU 9000");
    snprintf(pd.kernels, sizeof pd.kernels, "avx2");
    char pk[17];
    CHECK_OK(ts_attn_plan_key(&pin, pp, &pd, pk));
    CHECK(strcmp(pk, "44d632e0994a4ebe") == 0, "plan key %s changed", pk);
    CHECK_OK(ts_attn_plan_key(&pin, NULL, &pd, pk));
    CHECK(strcmp(pk, "3274ef9ef5c4445f") == 0, "plan key (no perm) %s changed", pk);
    CHECK_OK(ts_attn_plan_source_key(&pin, "window k=5", &pd, pk));
    CHECK(strcmp(pk, "19529b35add6fc63") == 0, "source key %s changed", pk);
  }

  /* the store: plans under attn-plan/<key>.json, the request's index under attn-plan-src/ */
  char cache[256];
  snprintf(cache, sizeof cache, "/tmp/ts_test_attn_sched_XXXXXX");
  CHECK(mkdtemp(cache) != NULL, "mkdtemp");
  setenv("TESSERA_CACHE", cache, 1);
  CHECK_OK(ts_attn_plan_cache_path(key, path, sizeof path));
  CHECK(strstr(path, cache) == path && strstr(path, "/attn-plan/") && strstr(path, key), "path %s", path);
  {
    const char src[17] = "00112233445566ff";
    char fk[17];
    ts_attn_plan_desc fd;
    int32_t *fp = NULL;
    ts_attn_schedule fs;
    CHECK_STATUS(ts_attn_plan_cache_find(src, fk, &fd, &fp, &fs), TS_ERR_NOT_FOUND);
    CHECK_OK(ts_attn_plan_cache_store(src, key, &d, perm, &s, &si));
    CHECK(access(path, F_OK) == 0, "no artifact at %s", path);
    CHECK_OK(ts_attn_plan_cache_find(src, fk, &fd, &fp, &fs));
    CHECK(strcmp(fk, key) == 0 && strcmp(fd.source, src) == 0 && fp && memcmp(fp, perm, (size_t)n * sizeof *perm) == 0 &&
              fs.npanels == s.npanels && fs.nsegs == s.nsegs,
          "cache round trip");
    ts_free(fp), fp = NULL;
    ts_attn_schedule_free(&fs);
    /* the envelope: kind, the planner's version, provenance with the threads */
    cJSON *env = NULL;
    CHECK_OK(ts__json_read_file(path, &env));
    const cJSON *pv = cJSON_GetObjectItem(env, "provenance");
    CHECK(env && !strcmp(cJSON_GetObjectItem(env, "artifact")->valuestring, "attn-plan") &&
              cJSON_GetObjectItem(env, "version")->valueint == 4 && cJSON_IsObject(pv) &&
              cJSON_GetObjectItem(pv, "threads")->valueint == 2 && cJSON_IsString(cJSON_GetObjectItem(pv, "profile")),
          "plan envelope");
    cJSON_Delete(env);
    /* another request's key finds nothing; a corrupt plan is moved aside, never trusted */
    CHECK_STATUS(ts_attn_plan_cache_find("ffffffffffffffff", fk, &fd, &fp, &fs), TS_ERR_NOT_FOUND);
    const char *foreign = "{\"artifact\":\"attn-plan\",\"version\":4,\"key\":\"x\"}";
    CHECK_OK(ts_write_file_atomic(path, foreign, strlen(foreign)));
    CHECK(ts_attn_plan_cache_find(src, fk, &fd, &fp, &fs) != TS_OK && fp == NULL && fs.panels == NULL, "corrupt plan accepted");
    char bad[4300];
    snprintf(bad, sizeof bad, "%s.bad", path);
    CHECK(access(bad, F_OK) == 0, "corrupt plan not moved aside");
  }
  snprintf(path, sizeof path, "%s/explicit/plan.json", cache); /* an explicit file: the plan document itself */
  ts_attn_plan_desc ld;
  int32_t *lperm = NULL;
  ts_attn_schedule ls;
  CHECK_STATUS(ts_attn_plan_load(path, key, &ld, &lperm, &ls), TS_ERR_NOT_FOUND);
  CHECK_OK(ts_attn_plan_save(path, key, &d, perm, &s, &si));
  double t0 = ts_now();
  CHECK_OK(ts_attn_plan_load(path, key, &ld, &lperm, &ls));
  double load_ms = (ts_now() - t0) * 1e3;
  CHECK(ld.n == n && ld.heads == 4 && ld.d == 32 && ld.threads == 2 && strcmp(ld.reorder, "rcm") == 0 &&
            strcmp(ld.cpu_model, d.cpu_model) == 0 && strcmp(ld.kernels, d.kernels) == 0,
        "desc round trip");
  CHECK(lperm && memcmp(lperm, perm, (size_t)n * sizeof *perm) == 0, "perm round trip");
  CHECK(ls.npanels == s.npanels && ls.nsegs == s.nsegs && memcmp(ls.segs, s.segs, (size_t)s.nsegs * sizeof *s.segs) == 0 &&
            ls.thread && memcmp(ls.thread, s.thread, (size_t)s.npanels * sizeof *s.thread) == 0,
        "schedule round trip");
  for (int64_t p = 0; p < s.npanels; p++)
    CHECK(ls.panels[p].r0 == s.panels[p].r0 && ls.panels[p].nr == s.panels[p].nr && ls.panels[p].nseg == s.panels[p].nseg,
          "panel %lld", (long long)p);
  /* its key recomputed from what it stores matches: the file is self-describing */
  CHECK_OK(ts_attn_plan_key(&pm, lperm, &ld, key2));
  CHECK(strcmp(key, key2) == 0, "key of the loaded plan %s vs %s", key2, key);
  ts_free(lperm);
  ts_attn_schedule_free(&ls);
  printf("plan cache: %lld panels loaded in %.2f ms\n", (long long)s.npanels, load_ms);
  /* mismatched key */
  CHECK_ERR_CONTAINS(ts_attn_plan_load(path, "0123456789abcdef", &ld, &lperm, &ls), "key mismatch");
  CHECK(lperm == NULL && ls.panels == NULL, "outputs cleared on error");
  /* no key check */
  CHECK_OK(ts_attn_plan_load(path, NULL, NULL, &lperm, &ls));
  ts_free(lperm);
  ts_attn_schedule_free(&ls);
  /* corrupt files: a bad perm, a schedule that does not validate, not JSON */
  static const char *bad[] = {
      "{\"format\":\"tessera-attn-plan\",\"key\":\"k\",\"desc\":{\"n\":2,\"heads\":1,\"d\":4,\"threads\":1,\"dtype\":\"f32\","
      "\"reorder\":\"none\",\"solver\":\"greedy\",\"cpu_model\":\"x\",\"kernels\":\"avx2\"},\"perm\":[0,0],"
      "\"schedule\":{\"n\":2,\"panels\":[{\"r0\":0,\"nr\":2,\"segs\":[[0,2,0,2,16,16,\"mixed\"]]}]}}",
      "{\"format\":\"tessera-attn-plan\",\"key\":\"k\",\"desc\":{\"n\":2,\"heads\":1,\"d\":4,\"threads\":1,\"dtype\":\"f32\","
      "\"reorder\":\"none\",\"solver\":\"greedy\",\"cpu_model\":\"x\",\"kernels\":\"avx2\"},\"perm\":null,"
      "\"schedule\":{\"n\":2,\"panels\":[{\"r0\":0,\"nr\":1,\"segs\":[]}]}}",
      "{\"format\":\"tessera-attn-plan\",\"key\":\"k\",\"desc\":{\"n\":3,\"heads\":1,\"d\":4,\"threads\":1,\"dtype\":\"f32\","
      "\"reorder\":\"none\",\"solver\":\"greedy\",\"cpu_model\":\"x\",\"kernels\":\"avx2\"},\"perm\":null,"
      "\"schedule\":{\"n\":2,\"panels\":[{\"r0\":0,\"nr\":2,\"segs\":[]}]}}",
      "{\"format\":\"other\"}",
      "[1, 2"};
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
    CHECK_OK(ts_write_file_atomic(path, bad[b], strlen(bad[b])));
    ts_status st = ts_attn_plan_load(path, NULL, &ld, &lperm, &ls);
    CHECK(st != TS_OK && lperm == NULL && ls.panels == NULL, "corrupt plan %zu accepted (%s)", b, ts_strerror(st));
  }
  remove(path);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache);
  unsetenv("TESSERA_CACHE");
  ts_attn_schedule_free(&s);
  ts_blocks_free(&blk);
  ts_bitmap_free(&bp);
  ts_free(perm);
  ts_csr_free(&m), ts_csr_free(&pm);
}

int main(void) {
  test_guard_diag();
  test_guard_blocks();
  test_backward_pass();
  test_attn_order();
  test_brute_force();
  test_compact_brute();
  test_larger();
  test_static_threads();
  test_scheduled_window2d();
  test_cache();
  return tst_finish();
}
