/* Tile-aware sparse attention: every schedule kind (dense flash, fixed-tile block skip, variable
 * tiles from blocks, hand-built overlapping/full segments) on several masks and head dims, against
 * the double-precision reference, for every ISA level this CPU has (scalar, AVX2, AVX-512) and for
 * fp32 and bf16 inputs; schedule/plan/execute errors; work counters; JSON round trip.
 *
 * Tolerances (max |O - O_ref| / max|V|):
 *  - fp32, and bf16 against the reference computed on the bf16 values: TOL = 2e-5. Sources: scores in
 *    fp32 (d-term dot products, |error| <= d u |q||k| scale with u = 2^-24, ~1e-5 absolute at d = 80 in
 *    the worst case, ~1e-6 typical), exp2 by polynomial (a few ulp), fp32 sums of <= n P V terms
 *    (relative n u ~ 1e-5 worst). Measured max ~1e-6; a wrong mask bit moves a row by >= 1e-3.
 *    bf16 x bf16 products are exact in fp32 (8 + 8 significant bits), so bf16 sits in the same class.
 *  - bf16 dot path (AVX-512 BF16): P is also rounded to bf16 for the P V dot products, each weight
 *    by a relative |delta| <= 2^-9 (round to nearest, 8 significant bits), while the normalizer l
 *    sums the unrounded P: O - O_exact = sum_j p_j delta_j v_j / l, so |dO| <= 2^-9 max|V|.
 *    TOL_DOT = TOL + 2^-9 (measured max ~1.1e-3).
 *  - bf16 against the fp32 reference on the original values: the inputs are rounded with relative
 *    error u8 = 2^-8. A score moves by at most 2 u8 scale sum_k |q_k||k_k| <= 2 u8 scale d qmax kmax =: dS,
 *    each softmax weight by a factor in [e^-2dS, e^2dS], V by u8 relative: |dO| <= (e^(2dS) - 1 + u8)
 *    max|V|. That bound (plus TOL) is asserted. */
#include <cjson/cJSON.h>
#include <math.h>

#include "attn/attn_internal.h"
#include "tessera/attn.h"
#include "attn_test_blocks.h"
#include "attn_masks.h"
#include "tst.h"
#include "tst_dispatch.h"

#define TOL 2e-5
#define TOL_DOT (TOL + 1.0 / 512)

/* Sanitizer builds run at -O0 and ~50x slower: a smaller sweep (same kinds of cases). */
#ifdef TS_SANITIZE
static const int g_san = 1;
#else
static const int g_san = 0;
#endif

/* ---- masks ------------------------------------------------------------------------------------ */

static void mk_clear_row(ts_bitmap *b, int64_t i) { memset(b->bits + i * b->stride, 0, (size_t)b->stride * 8); }

typedef struct mask_case {
  const char *name;
  ts_bitmap m;
} mask_case;




static ts_bitmap mask_blockdiag(int64_t n, int64_t blk) {
  ts_bitmap b = mk_alloc(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (i / blk == j / blk) mk_set(&b, i, j);
  return b;
}

/* A band with holes, every 5th row empty and the last rows empty (whole empty sub-tiles). */
static ts_bitmap mask_empty_rows(int64_t n) {
  ts_bitmap b = mask_random(n, 0.15, 99);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i > 6 ? i - 6 : 0; j < n && j <= i + 6; j++) mk_set(&b, i, j);
  for (int64_t i = 0; i < n; i += 5) mk_clear_row(&b, i);
  for (int64_t i = n - 20 > 0 ? n - 20 : 0; i < n; i++) mk_clear_row(&b, i);
  return b;
}

static ts_bitmap mask_full(int64_t n) {
  ts_bitmap b = mk_alloc(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) mk_set(&b, i, j);
  return b;
}

/* ---- blocks from tile occupancy (the block extractor's stand-in for tests) ------------------- */


/* ---- data and comparison ---------------------------------------------------------------------- */

typedef struct data {
  int64_t B, H, n, d, total;
  float *q, *k, *v, *o, *ref;       /* fp32 inputs, output (guarded), reference */
  uint16_t *qb, *kb, *vb;           /* bf16 inputs */
  float *refb;                      /* reference on the bf16 values */
  float vmax, qmax, kmax;
} data;

static void data_make(data *D, int64_t B, int64_t H, int64_t n, int64_t d, const ts_bitmap *m, uint64_t seed, float qscale) {
  D->B = B, D->H = H, D->n = n, D->d = d, D->total = B * H * n * d;
  size_t t = (size_t)D->total;
  D->q = ts_malloc(t * 4), D->k = ts_malloc(t * 4), D->v = ts_malloc(t * 4), D->ref = ts_malloc(t * 4);
  D->refb = ts_malloc(t * 4), D->o = tst_alloc_guarded(t);
  D->qb = ts_malloc(t * 2), D->kb = ts_malloc(t * 2), D->vb = ts_malloc(t * 2);
  tst_fill_uniform(D->q, t, seed, -qscale, qscale);
  tst_fill_uniform(D->k, t, seed + 1, -1.0f, 1.0f);
  tst_fill_uniform(D->v, t, seed + 2, -1.0f, 1.0f);
  D->vmax = 1.0f, D->qmax = qscale, D->kmax = 1.0f;
  CHECK_OK(ts_attn_reference(m, D->q, D->k, D->v, D->ref, B, H, n, d));
  ts_f32_to_bf16_array(D->q, D->qb, t);
  ts_f32_to_bf16_array(D->k, D->kb, t);
  ts_f32_to_bf16_array(D->v, D->vb, t);
  float *q2 = ts_malloc(t * 4), *k2 = ts_malloc(t * 4), *v2 = ts_malloc(t * 4);
  ts_bf16_to_f32_array(D->qb, q2, t);
  ts_bf16_to_f32_array(D->kb, k2, t);
  ts_bf16_to_f32_array(D->vb, v2, t);
  CHECK_OK(ts_attn_reference(m, q2, k2, v2, D->refb, B, H, n, d));
  ts_free(q2), ts_free(k2), ts_free(v2);
}

static void data_free(data *D) {
  ts_free(D->q), ts_free(D->k), ts_free(D->v), ts_free(D->o), ts_free(D->ref), ts_free(D->refb);
  ts_free(D->qb), ts_free(D->kb), ts_free(D->vb);
}

static double worst_err, worst_dot; /* largest errors seen: fp32 class, bf16 dot path (printed at the end) */

/* Runs plan on D for one ISA and dtype mode and checks the output. */
static void run_check(ts_attn_plan *pl, const ts_context *ctx, data *D, ts_isa isa, int bf16, int dot, const char *what) {
  if (ts_attn_plan_set_isa(pl, isa) != TS_OK) return;
  ts_attn_plan_set_bf16_dot(pl, dot);
  size_t t = (size_t)D->total;
  tst_poison(D->o, t);
  if (bf16) CHECK_OK(ts_attn_execute_bf16(ctx, pl, D->qb, D->kb, D->vb, D->o, D->B, D->H, D->n, D->d));
  else CHECK_OK(ts_attn_execute(ctx, pl, D->q, D->k, D->v, D->o, D->B, D->H, D->n, D->d));
  CHECK(tst_guard_ok(D->o, t), "%s: guard bytes after O overwritten", what);
  const int dotpath = bf16 && dot && isa == TS_ISA_AVX512 && ts__level_supported(TS__LV_AVX512_BF16);
  const double tol = dotpath ? TOL_DOT : TOL;
  double e = tst_max_abs_diff(D->o, bf16 ? D->refb : D->ref, t) / D->vmax;
  double *worst = dotpath ? &worst_dot : &worst_err;
  if (e > *worst && e < INFINITY) *worst = e;
  CHECK(e <= tol, "%s isa=%s %s%s: max err %.3g > %.3g (n=%lld d=%lld)", what, ts_isa_name(isa), bf16 ? "bf16" : "f32",
        dotpath ? "+dot" : "", e, tol, (long long)D->n, (long long)D->d);
  if (bf16) { /* against the fp32 reference on the unrounded values */
    double u8 = 1.0 / 256, dS = 2 * u8 * D->qmax * D->kmax * (double)D->d / sqrt((double)D->d);
    double bound = expm1(2 * dS) + u8 + tol;
    double e2 = tst_max_abs_diff(D->o, D->ref, t) / D->vmax;
    CHECK(e2 <= bound, "%s isa=%s bf16 vs fp32 reference: %.3g > derived bound %.3g", what, ts_isa_name(isa), e2, bound);
  }
}

/* Every ISA this CPU has, fp32 and bf16 (both bf16 paths on AVX-512). */
static void run_all_isas(ts_attn_plan *pl, const ts_context *ctx, data *D, const char *what, int full) {
  for (int isa = TS_ISA_SCALAR; isa <= (int)ts_isa_supported(); isa++) {
    if (!full && isa != (int)ts_isa_supported()) continue;
    run_check(pl, ctx, D, (ts_isa)isa, 0, 0, what);
    if (g_san && isa != (int)ts_isa_supported()) continue;
    run_check(pl, ctx, D, (ts_isa)isa, 1, 0, what);
    if (isa == TS_ISA_AVX512 && ts__level_supported(TS__LV_AVX512_BF16)) run_check(pl, ctx, D, (ts_isa)isa, 1, 1, what);
  }
}

static void check_schedule(ts_attn_schedule *s, const ts_bitmap *m, data *D, const ts_context *ctx, const char *what, int full) {
  ts_attn_plan *pl = NULL;
  ts_status st = ts_attn_plan_create(&pl, ctx, s, m, D->d);
  CHECK(st == TS_OK, "%s: plan: %s", what, ts_last_error());
  if (st == TS_OK) {
    ts_attn_stats S;
    ts_attn_plan_stats(pl, &S);
    /* every allowed cell is computed, so a plan computes at least nnz cells, in some sub-tile */
    CHECK(S.cells >= S.nnz && S.tiles_skipped >= 0 && (S.nnz == 0 || S.tiles_full + S.tiles_masked > 0),
          "%s: cells %lld, nnz %lld, %lld full + %lld masked sub-tiles, %lld skipped", what, (long long)S.cells,
          (long long)S.nnz, (long long)S.tiles_full, (long long)S.tiles_masked, (long long)S.tiles_skipped);
    run_all_isas(pl, ctx, D, what, full);
  }
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(s);
}

static void compact_schedule(ts_attn_schedule *s, int64_t n, int32_t P, int32_t br, int32_t bc) {
  pass_schedule(s, n, P, br, bc, TS_ATTN_SEG_COMPACT);
}

/* ---- the sweep -------------------------------------------------------------------------------- */

static void test_sweep(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 3));
  mask_case masks[] = {
      {"band+global", mask_band(150, 9, 3)},   {"window2d", mask_window2d(11, 13, 5)},
      {"random", mask_random(97, 0.3, 7)},     {"blockdiag", mask_blockdiag(130, 24)},
      {"empty-rows", mask_empty_rows(120)},    {"full", mask_full(70)},
  };
  const int nm = (int)(sizeof masks / sizeof masks[0]);
  const int64_t dims[] = {16, 33, 64, 80};
  const ts_attn_tile skip_tiles[] = {{8, 16}, {16, 32}, {64, 64}, {128, 16}, {32, 128}, {5, 7}, {3, 22}};
  for (int mi = 0; mi < nm; mi++) {
    const ts_bitmap *m = &masks[mi].m;
    int64_t n = m->rows;
    for (int di = 0; di < 4; di++) {
      if (g_san && (di == 0 || di == 3)) continue;
      int64_t d = dims[di];
      int full = di == 1 || di == 2; /* all ISA levels at d = 33 and 64; the best level elsewhere */
      data D;
      data_make(&D, 2, 3, n, d, m, 1000 + 10 * mi + di, mi == 2 ? 6.0f : 2.0f);
      char what[128];
      ts_attn_schedule s;
      snprintf(what, sizeof what, "%s dense 32x64", masks[mi].name);
      CHECK_OK(ts_attn_schedule_dense(&s, n, 32, 64));
      check_schedule(&s, m, &D, ctx, what, full);
      for (size_t t = 0; t < sizeof skip_tiles / sizeof skip_tiles[0]; t++) {
        if (g_san && (t == 1 || t == 3 || t == 4)) continue;
        snprintf(what, sizeof what, "%s blockskip %dx%d", masks[mi].name, skip_tiles[t].br, skip_tiles[t].bc);
        CHECK_OK(ts_attn_schedule_blockskip(&s, n, skip_tiles[t].br, skip_tiles[t].bc));
        check_schedule(&s, m, &D, ctx, what, full && (t < 3 || t >= 5)); /* 3 rows: the small-sub-tile Q K^T (AVX-512, AVX2) */
      }
      /* COMPACT: heights below / at / above the 8 and 16 lane widths, items of 16 runs, one run
       * (bc 4), a bc that is no multiple of 4 (3 runs) and panels that are no multiple of br */
      static const struct { int32_t P, br, bc; } cp[] = {{40, 16, 64}, {48, 8, 4}, {37, 5, 13}, {64, 32, 128}, {130, 17, 64}};
      for (size_t t = 0; t < sizeof cp / sizeof cp[0]; t++) {
        if (g_san && t >= 2) continue;
        snprintf(what, sizeof what, "%s compact P%d %dx%d", masks[mi].name, cp[t].P, cp[t].br, cp[t].bc);
        compact_schedule(&s, n, cp[t].P, cp[t].br, cp[t].bc);
        check_schedule(&s, m, &D, ctx, what, full && t < 3);
      }
      /* DIAG: the same shapes (rows past the lane width, offsets cut into several items, a panel
       * that is no multiple of br) */
      for (size_t t = 0; t < sizeof cp / sizeof cp[0]; t++) {
        if (g_san && t >= 2) continue;
        snprintf(what, sizeof what, "%s diag P%d %dx%d", masks[mi].name, cp[t].P, cp[t].br, cp[t].bc);
        pass_schedule(&s, n, cp[t].P, cp[t].br, cp[t].bc, TS_ATTN_SEG_DIAG);
        check_schedule(&s, m, &D, ctx, what, full && t < 3);
      }
      ts_block bl[512];
      int64_t nb = attn_test_blocks(m, 8, bl, 512);
      ts_attn_tile tiles[512];
      const ts_attn_tile *menu;
      int nmenu = ts_attn_default_menu(&menu);
      int dd = (int)d;
      CHECK_OK(ts_attn_choose_tiles(bl, nb, menu, nmenu, NULL, &dd, tiles));
      ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
      bo.panel_rows = 48;
      snprintf(what, sizeof what, "%s blocks(%lld)+residue", masks[mi].name, (long long)nb);
      CHECK_OK(ts_attn_schedule_from_blocks(&s, n, bl, tiles, nb, m, &bo));
      check_schedule(&s, m, &D, ctx, what, full);
      /* blocks first, the residue as a COMPACT or DIAG segment (ownership: it takes what they leave) */
      static const struct { int32_t kind, bc; const char *name; } res[] = {{TS_ATTN_SEG_COMPACT, 32, "compact"},
                                                                          {TS_ATTN_SEG_DIAG, 40, "diag"}};
      for (int r = 0; r < 2; r++) {
        CHECK_OK(ts_attn_schedule_from_blocks(&s, n, bl, tiles, nb, NULL, &bo));
        for (int64_t p = 0; p < s.npanels; p++) {
          ts_attn_segment *g = &s.segs[s.panels[p].seg0 + s.panels[p].nseg - 1];
          g->kind = res[r].kind, g->br = 16, g->bc = res[r].bc;
        }
        snprintf(what, sizeof what, "%s blocks(%lld)+%s residue", masks[mi].name, (long long)nb, res[r].name);
        check_schedule(&s, m, &D, ctx, what, full);
      }
      snprintf(what, sizeof what, "%s blocks(%lld), no mask", masks[mi].name, (long long)nb);
      CHECK_OK(ts_attn_schedule_from_blocks(&s, n, bl, tiles, nb, NULL, NULL));
      if (g_san) ts_attn_schedule_free(&s);
      else check_schedule(&s, m, &D, ctx, what, 0);
      data_free(&D);
    }
  }
  for (int mi = 0; mi < nm; mi++) mk_free(&masks[mi].m);
  ts_context_destroy(ctx);
}

/* n = 1 (allowed and not), and large scores (online max must not overflow). */
static void test_edges(void) {
  for (int allowed = 0; allowed <= 1; allowed++) {
    ts_bitmap m = mk_alloc(1);
    if (allowed) mk_set(&m, 0, 0);
    data D;
    data_make(&D, 2, 3, 1, 33, &m, 5, 1.0f);
    ts_attn_schedule s;
    CHECK_OK(ts_attn_schedule_blockskip(&s, 1, 16, 16));
    check_schedule(&s, &m, &D, NULL, allowed ? "n=1 allowed" : "n=1 empty", 1);
    CHECK_OK(ts_attn_schedule_dense(&s, 1, 8, 16));
    check_schedule(&s, &m, &D, NULL, allowed ? "n=1 dense" : "n=1 empty dense", 1);
    compact_schedule(&s, 1, 8, 8, 64); /* n < 4: runs as MIXED */
    check_schedule(&s, &m, &D, NULL, allowed ? "n=1 compact" : "n=1 empty compact", 1);
    if (!allowed) CHECK(D.o[0] == 0.0f, "empty row gives zeros, got %g", D.o[0]);
    data_free(&D);
    mk_free(&m);
  }
  /* n = 4..7, a band: runs near the end move back to n - 4 and repeat keys of the run before */
  for (int64_t n = 4; n <= 7; n++) {
    ts_bitmap m = mask_band(n, 2, 0);
    data D;
    data_make(&D, 1, 2, n, 16, &m, 50 + (uint64_t)n, 1.0f);
    ts_attn_schedule s;
    compact_schedule(&s, n, 3, 2, 4);
    check_schedule(&s, &m, &D, NULL, "small n compact", 1);
    data_free(&D);
    mk_free(&m);
  }
  /* scores up to ~ +-300 (q in [-40, 40], d = 64): exp of unshifted scores would overflow */
  ts_bitmap m = mask_band(90, 20, 0);
  data D;
  data_make(&D, 1, 2, 90, 64, &m, 77, 40.0f);
  ts_attn_schedule s;
  CHECK_OK(ts_attn_schedule_blockskip(&s, 90, 16, 16));
  ts_attn_plan *pl;
  CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &m, 64));
  for (int isa = 0; isa <= (int)ts_isa_supported(); isa++) run_check(pl, NULL, &D, (ts_isa)isa, 0, 0, "large scores");
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s);
  data_free(&D);
  mk_free(&m);
}

/* Overlapping segments (ownership), FULL segments, several panel heights, thread counts. */
static void test_handmade(void) {
  const int64_t n = 100, d = 48;
  ts_bitmap m = mask_band(n, 30, 0);
  data D;
  data_make(&D, 2, 3, n, d, &m, 31, 2.0f);
  ts_attn_schedule s;
  /* panels [0,40) [40,100). Panel 0: MIXED [0,40)x[40,100) first (rows accumulate), then a FULL
   * square [0,20)x[0,20) (inside the band) whose last 16-row sub-tile has 4 rows, so vector lanes
   * past it hold rows with live state, then MIXED [0,40)x[0,70) overlapping both (ownership).
   * Panel 1: DENSE [40,70)x[0,100), MIXED [70,100)x[30,100). */
  CHECK_OK(ts_attn_schedule_alloc(&s, n, 2, 5));
  s.panels[0] = (ts_attn_panel){0, 40, 0, 3};
  s.panels[1] = (ts_attn_panel){40, 60, 3, 2};
  s.segs[0] = (ts_attn_segment){0, 40, 40, 60, 8, 16, TS_ATTN_SEG_MIXED};
  s.segs[1] = (ts_attn_segment){0, 20, 0, 20, 16, 16, TS_ATTN_SEG_FULL};
  s.segs[2] = (ts_attn_segment){0, 40, 0, 70, 8, 32, TS_ATTN_SEG_MIXED};
  s.segs[3] = (ts_attn_segment){40, 30, 0, 100, 64, 64, TS_ATTN_SEG_DENSE};
  s.segs[4] = (ts_attn_segment){70, 30, 30, 70, 128, 128, TS_ATTN_SEG_MIXED};
  ts_attn_plan *pl;
  CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &m, d));
  ts_attn_stats S;
  ts_attn_plan_stats(pl, &S);
  CHECK(S.nnz > 0 && S.cells >= S.nnz && S.tiles_full >= 2, "stats nnz %lld cells %lld full %lld", (long long)S.nnz,
        (long long)S.cells, (long long)S.tiles_full);
  ts_context *c1, *c3;
  CHECK_OK(ts_context_create(&c1, 1));
  CHECK_OK(ts_context_create(&c3, 3));
  run_all_isas(pl, c1, &D, "handmade 1 thread", 1);
  run_all_isas(pl, c3, &D, "handmade 3 threads", 1);
  /* batch 0: nothing written */
  tst_poison(D.o, (size_t)D.total);
  CHECK_OK(ts_attn_execute(c3, pl, D.q, D.k, D.v, D.o, 0, 3, n, d));
  CHECK(isnan(D.o[0]), "batch 0 must not write");
  ts_attn_plan_destroy(pl);

  /* COMPACT segments: first in panel 0 over a column range (its runs reach past c0+nc, whose
   * cells the MIXED segment after it must still get), last in panel 1 after a FULL square */
  ts_attn_schedule s2;
  CHECK_OK(ts_attn_schedule_alloc(&s2, n, 2, 4));
  s2.panels[0] = (ts_attn_panel){0, 40, 0, 2};
  s2.panels[1] = (ts_attn_panel){40, 60, 2, 2};
  s2.segs[0] = (ts_attn_segment){0, 40, 21, 50, 8, 8, TS_ATTN_SEG_COMPACT};
  s2.segs[1] = (ts_attn_segment){0, 40, 0, 100, 16, 16, TS_ATTN_SEG_MIXED};
  s2.segs[2] = (ts_attn_segment){50, 20, 50, 20, 16, 16, TS_ATTN_SEG_FULL};
  s2.segs[3] = (ts_attn_segment){40, 60, 0, 100, 16, 64, TS_ATTN_SEG_COMPACT};
  CHECK_OK(ts_attn_plan_create(&pl, NULL, &s2, &m, d));
  run_all_isas(pl, c3, &D, "handmade compact", 1);
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s2);

  /* the FULL square over a masked cell is rejected */
  s.segs[1] = (ts_attn_segment){0, 40, 0, 40, 16, 16, TS_ATTN_SEG_FULL};
  CHECK_ERR_CONTAINS(ts_attn_plan_create(&pl, NULL, &s, &m, d), "marked full");
  CHECK(pl == NULL, "no plan on error");
  /* an allowed cell no segment covers */
  s.segs[1] = (ts_attn_segment){0, 20, 0, 20, 16, 16, TS_ATTN_SEG_FULL};
  s.segs[4] = (ts_attn_segment){70, 30, 50, 50, 128, 128, TS_ATTN_SEG_MIXED};
  CHECK_ERR_CONTAINS(ts_attn_plan_create(&pl, NULL, &s, &m, d), "(row 70, col 40) is not covered");
  ts_attn_schedule_free(&s);
  ts_context_destroy(c1);
  ts_context_destroy(c3);
  data_free(&D);
  mk_free(&m);
}

/* COMPACT sub-tiles whose keys are listed one by one (the plan's choice when 4-key runs would
 * compute clearly more) and P V skip lists (4-row blocks over their own keys): a mask whose rows
 * allow a few keys spread far apart, and a small window in row-major order (some sub-tiles one
 * way, some the other), every ISA, fp32 and bf16, panels and item widths below / above / not a
 * multiple of 16 (the sweep's compact cases run skip lists with 4-key runs too). */
static void test_compact_keys(void) {
  const int64_t n = 150;
  ts_bitmap spread = mk_alloc(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < 6; t++) mk_set(&spread, i, (i * 7 + 23 * t) % n);
  mask_case masks[] = {{"spread", spread}, {"window2d k=3", mask_window2d(12, 12, 3)}};
  static const struct { int32_t P, br, bc; } cp[] = {{48, 16, 64}, {40, 8, 16}, {37, 5, 13}, {64, 32, 20}};
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  for (int mi = 0; mi < 2; mi++) {
    const ts_bitmap *m = &masks[mi].m;
    data D;
    data_make(&D, 1, 2, m->rows, 64, m, 77 + mi, 2.0f);
    int64_t keyed = 0, pv_skipped = 0;
    for (size_t t = 0; t < sizeof cp / sizeof cp[0]; t++) {
      if (g_san && t >= 2) continue;
      char what[128];
      snprintf(what, sizeof what, "%s compact P%d %dx%d", masks[mi].name, cp[t].P, cp[t].br, cp[t].bc);
      ts_attn_schedule s;
      compact_schedule(&s, m->rows, cp[t].P, cp[t].br, cp[t].bc);
      ts_attn_plan *pl = NULL;
      CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, m, D.d));
      ts_attn_stats S;
      ts_attn_plan_stats(pl, &S);
      keyed += S.tiles_keyed;
      pv_skipped += S.cells - S.pv_cells;
      CHECK(S.pv_cells >= S.nnz && S.pv_cells <= S.cells, "%s: P V cells %lld not in [nnz %lld, cells %lld]", what,
            (long long)S.pv_cells, (long long)S.nnz, (long long)S.cells);
      if (mi == 0 && cp[t].br <= 16) /* keys far apart (4-key runs would compute ~4x them): every sub-tile lists its keys */
        CHECK(S.tiles_keyed == S.tiles_full + S.tiles_masked, "%s: %lld of %lld items keyed", what, (long long)S.tiles_keyed,
              (long long)(S.tiles_full + S.tiles_masked));
      if (pl) run_all_isas(pl, ctx, &D, what, 1);
      ts_attn_plan_destroy(pl);
      ts_attn_schedule_free(&s);
    }
    CHECK(keyed > 0, "%s: no COMPACT item lists its keys", masks[mi].name);
    CHECK(pv_skipped > 0, "%s: no COMPACT item skips keys in P V", masks[mi].name);
    data_free(&D);
    mk_free(&masks[mi].m);
  }
  ts_context_destroy(ctx);
}

/* DIAG passes on a window in raster order: every sub-tile lists at most the window's k^2 offsets
 * (a token's keys sit at the same offsets dy w + dx wherever it is; the grid's edges only mask some),
 * so the pass computes 16 k^2 cells per 16 rows; the 4-row blocks of P V at the edges skip the
 * offsets none of their rows has (pv_cells < cells); every ISA, fp32 and bf16, and d with tails. */
/* A plan's workspace holds the previous execute's O accumulators. Fresh DIAG items start O at zero
 * without reading it, and only panels where some item reads an O row nothing wrote yet (or a row
 * has no item) zero O first: an execute on NaN values before each checked one leaves NaN in every
 * accumulator, which any read of a stale row would carry into the output. */
static void test_stale_workspace(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  const int64_t gh = 12, gw = 20, n = gh * gw, d = 32;
  ts_bitmap m = mask_window2d(gh, gw, 5);
  data D;
  data_make(&D, 1, 2, n, d, &m, 4242, 2.0f);
  const size_t t = (size_t)D.total;
  float *vnan = ts_malloc(t * 4);
  uint16_t *vnanb = ts_malloc(t * 2);
  for (size_t i = 0; i < t; i++) vnan[i] = NAN;
  ts_f32_to_bf16_array(vnan, vnanb, t);
  for (int sc = 0; sc < 4; sc++) {
    ts_attn_schedule s;
    const char *what = sc == 0 ? "stale: diag" : sc == 1 ? "stale: diag, panel tail" : sc == 2 ? "stale: compact" : "stale: blocks+diag";
    if (sc == 0) pass_schedule(&s, n, 48, 16, 64, TS_ATTN_SEG_DIAG);
    else if (sc == 1) pass_schedule(&s, n, 37, 16, 20, TS_ATTN_SEG_DIAG); /* 5-row tails, offsets in 2+ items */
    else if (sc == 2) compact_schedule(&s, n, 40, 16, 64);
    else {
      ts_block bl[256];
      int64_t nb = attn_test_blocks(&m, 8, bl, 256);
      ts_attn_tile tiles[256];
      const ts_attn_tile *menu;
      int nmenu = ts_attn_default_menu(&menu), dd = (int)d;
      CHECK_OK(ts_attn_choose_tiles(bl, nb, menu, nmenu, NULL, &dd, tiles));
      ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
      bo.panel_rows = 48;
      CHECK_OK(ts_attn_schedule_from_blocks(&s, n, bl, tiles, nb, NULL, &bo));
      for (int64_t p = 0; p < s.npanels; p++) {
        ts_attn_segment *g = &s.segs[s.panels[p].seg0 + s.panels[p].nseg - 1];
        g->kind = TS_ATTN_SEG_DIAG, g->br = 16, g->bc = 40;
      }
    }
    ts_attn_plan *pl = NULL;
    CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, &m, d));
    for (int isa = TS_ISA_SCALAR; pl && isa <= (int)ts_isa_supported(); isa++)
      for (int mode = 0; mode < 3; mode++) { /* fp32, bf16 converted, bf16 dot */
        if (mode == 2 && !(isa == TS_ISA_AVX512 && ts__level_supported(TS__LV_AVX512_BF16))) continue;
        CHECK_OK(ts_attn_plan_set_isa(pl, (ts_isa)isa));
        ts_attn_plan_set_bf16_dot(pl, mode == 2);
        if (mode == 0) CHECK_OK(ts_attn_execute(ctx, pl, D.q, D.k, vnan, D.o, D.B, D.H, n, d));
        else CHECK_OK(ts_attn_execute_bf16(ctx, pl, D.qb, D.kb, vnanb, D.o, D.B, D.H, n, d));
        run_check(pl, ctx, &D, (ts_isa)isa, mode > 0, mode == 2, what);
      }
    ts_attn_plan_destroy(pl);
    ts_attn_schedule_free(&s);
  }
  ts_free(vnan), ts_free(vnanb);
  data_free(&D);
  mk_free(&m);
  ts_context_destroy(ctx);
}

static void test_diag(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  const int64_t gh = 20, gw = 24, k = 7, n = gh * gw;
  ts_bitmap m = mask_window2d(gh, gw, k);
  const int64_t dims[] = {64, 24, 80};
  for (int di = 0; di < 3; di++) {
    data D;
    data_make(&D, 1, 2, n, dims[di], &m, 313 + di, 2.0f);
    ts_attn_schedule s;
    pass_schedule(&s, n, 48, 16, 64, TS_ATTN_SEG_DIAG);
    ts_attn_plan *pl = NULL;
    CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, &m, D.d));
    if (pl) {
      ts_attn_stats S;
      ts_attn_plan_stats(pl, &S);
      CHECK(S.cells <= n * k * k && S.cells >= S.nnz, "diag window2d: %lld cells, %lld allowed, at most %lld expected",
            (long long)S.cells, (long long)S.nnz, (long long)(n * k * k));
      CHECK(S.tiles_diag == S.tiles_full + S.tiles_masked && S.tiles_diag == n / 16, "diag window2d: %lld diag items of %lld",
            (long long)S.tiles_diag, (long long)(S.tiles_full + S.tiles_masked));
      CHECK(S.pv_cells >= S.nnz && S.pv_cells < S.cells, "diag window2d: P V cells %lld not in [%lld, %lld)",
            (long long)S.pv_cells, (long long)S.nnz, (long long)S.cells);
      char what[64];
      snprintf(what, sizeof what, "diag window2d k=7 d=%lld", (long long)D.d);
      run_all_isas(pl, ctx, &D, what, 1);
    }
    ts_attn_plan_destroy(pl);
    ts_attn_schedule_free(&s);
    data_free(&D);
  }
  mk_free(&m);
  ts_context_destroy(ctx);
}

/* ---- key warming ------------------------------------------------------------------------------ */

/* The keys panel p's items read, as a bitmap of n bits. */
static void panel_keys(const ts_attn_plan *pl, int64_t p, uint64_t *u) {
  memset(u, 0, (size_t)((pl->n + 63) / 64) * sizeof *u);
  const ts__attn_cpanel *cp = &pl->panels[p];
  for (int64_t x = 0; x < cp->nit; x++) {
    const ts__attn_item *it = &pl->items[cp->it0 + x];
    if (ts__attn_item_diag(it)) {
      for (int t = 0; t < it->bc; t++)
        for (int64_t i = 0; i < it->br; i++) {
          const int64_t j = cp->r0 + it->i0 + i + pl->runs[it->qoff + t];
          if (j >= 0 && j < pl->n) u[j >> 6] |= (uint64_t)1 << (j & 63);
        }
      continue;
    }
    const int nq = it->qoff >= 0 ? it->bc / it->rl : 1, len = it->qoff >= 0 ? it->rl : it->bc;
    for (int g = 0; g < nq; g++)
      for (int64_t j = it->qoff >= 0 ? pl->runs[it->qoff + g] : it->j0, e = j + len; j < e && j < pl->n; j++)
        u[j >> 6] |= (uint64_t)1 << (j & 63);
  }
}

/* A plan's warming spans: panel p's runs are sorted, disjoint, not touching (maximal), and hold
 * exactly the keys p reads that the panel its thread runs before it does not (static assignment:
 * the previous panel of its queue; otherwise the previous in plan order); warming on or off gives
 * the same bits. */
static void check_warm(ts_attn_plan *pl, const ts_context *ctx, data *D, const char *what) {
  const int64_t n = pl->n, W = (n + 63) / 64;
  uint64_t *cur = ts_calloc((size_t)W, 8), *prev = ts_calloc((size_t)W, 8), *got = ts_calloc((size_t)W, 8);
  int bad = 0;
  for (int64_t x = 0; x < pl->npanels && !bad; x++) {
    const int64_t p = pl->nstatic > 0 ? pl->spanels[x] : x;
    bool first = x == 0;
    for (int32_t t = 0; t < pl->nstatic; t++) first = first || pl->sstart[t] == x;
    if (first) memset(prev, 0, (size_t)W * 8);
    panel_keys(pl, p, cur);
    memset(got, 0, (size_t)W * 8);
    const ts__attn_cpanel *cp = &pl->panels[p];
    for (int32_t r = 0; r < cp->nks && !bad; r++) {
      const int32_t a = pl->kspan[cp->ks0 + 2 * r], c = pl->kspan[cp->ks0 + 2 * r + 1];
      if (c < 1 || a < 0 || a + c > n || (r > 0 && a <= pl->kspan[cp->ks0 + 2 * r - 2] + pl->kspan[cp->ks0 + 2 * r - 1])) bad = 1;
      for (int64_t j = a; j < a + c && !bad; j++) got[j >> 6] |= (uint64_t)1 << (j & 63);
    }
    for (int64_t w = 0; w < W && !bad; w++)
      if (got[w] != (cur[w] & ~prev[w])) bad = 1;
    CHECK(!bad, "%s: panel %lld's warming runs are not its new keys", what, (long long)p);
    memcpy(prev, cur, (size_t)W * 8);
  }
  ts_free(cur), ts_free(prev), ts_free(got);
  const size_t t = (size_t)D->total;
  float *o2 = ts_malloc(t * 4);
  for (int bf16 = 0; bf16 < 2; bf16++) {
    for (int w = 0; w < 2; w++) {
      ts_attn_plan_set_warm(pl, w);
      float *o = w ? o2 : D->o;
      if (bf16) CHECK_OK(ts_attn_execute_bf16(ctx, pl, D->qb, D->kb, D->vb, o, D->B, D->H, D->n, D->d));
      else CHECK_OK(ts_attn_execute(ctx, pl, D->q, D->k, D->v, o, D->B, D->H, D->n, D->d));
    }
    CHECK(memcmp(D->o, o2, t * 4) == 0, "%s %s: warming changed the output", what, bf16 ? "bf16" : "f32");
    CHECK(tst_max_abs_diff(o2, bf16 ? D->refb : D->ref, t) / D->vmax <= (bf16 ? TOL_DOT : TOL), "%s: warmed output wrong", what);
  }
  ts_attn_plan_set_warm(pl, true);
  ts_free(o2);
}

static void test_warm(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  ts_bitmap masks[] = {mask_window2d(12, 12, 3), mask_band(150, 9, 3), mask_random(97, 0.1, 5)};
  static const char *names[] = {"window2d k=3", "band+global", "random"};
  for (int mi = 0; mi < 3; mi++) {
    const ts_bitmap *m = &masks[mi];
    data D;
    data_make(&D, 2, 3, m->rows, 24, m, 91 + mi, 2.0f);
    for (int kind = 0; kind < 5; kind++) {
      ts_attn_schedule s;
      if (kind == 4) pass_schedule(&s, m->rows, 16, 16, 64, TS_ATTN_SEG_DIAG);
      else if (kind == 0 || kind == 3) compact_schedule(&s, m->rows, 16, 16, 64);
      else if (kind == 1) CHECK_OK(ts_attn_schedule_blockskip(&s, m->rows, 16, 32));
      else if (kind == 2) CHECK_OK(ts_attn_schedule_dense(&s, m->rows, 32, 16));
      if (kind == 3) { /* a static assignment: panels to threads 0, 1, 1, 0, 0, 1, ... */
        s.thread = ts_malloc((size_t)s.npanels * sizeof *s.thread);
        for (int64_t p = 0; s.thread && p < s.npanels; p++) s.thread[p] = (int32_t)((p + p / 2) % 2);
      }
      char what[96];
      snprintf(what, sizeof what, "warm %s %s", names[mi],
               kind == 0 ? "compact" : kind == 1 ? "block skip" : kind == 2 ? "dense" : kind == 3 ? "compact, static threads" : "diag");
      ts_attn_plan *pl = NULL;
      CHECK_OK(ts_attn_plan_create(&pl, ctx, &s, m, D.d));
      if (pl) {
        CHECK(kind != 3 || pl->nstatic == 2, "%s: the plan runs statically", what);
        check_warm(pl, ctx, &D, what);
      }
      ts_attn_plan_destroy(pl);
      ts_attn_schedule_free(&s);
    }
    data_free(&D);
    mk_free(&masks[mi]);
  }
  ts_context_destroy(ctx);
}

/* ---- errors, counters, JSON ------------------------------------------------------------------ */

static void test_validation(void) {
  ts_attn_schedule s;
  CHECK_STATUS(ts_attn_schedule_dense(&s, 10, 0, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_schedule_blockskip(&s, 10, 16, 257), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_schedule_blockskip(&s, 0, 16, 16), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_attn_schedule_blockskip(&s, 40, 16, 16));
  CHECK_OK(ts_attn_schedule_validate(&s));
  s.segs[1].bc = 0;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "panel 1 segment 0: bc = 0 is not in [1, 256]");
  s.segs[1].bc = 16, s.segs[1].br = -3;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "br = -3");
  s.segs[1].br = 16, s.segs[1].nc = 41;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "columns [0, 41) are outside [0, 40)");
  s.segs[1].nc = 40, s.segs[1].r0 = 10;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "outside the panel's rows");
  s.segs[1].r0 = 16, s.segs[1].kind = 9;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "unknown kind 9");
  s.segs[1].kind = TS_ATTN_SEG_MIXED, s.segs[1].nr = 0;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "nr = 0");
  s.segs[1].nr = 16, s.panels[1].nseg = 5;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "are outside the 3 segments");
  s.panels[1].nseg = 1, s.panels[1].r0 = 12;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "outside the panel's rows"); /* segment now outside */
  s.segs[1].r0 = 12, s.segs[1].nr = 16, s.panels[1].nr = 16;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "overlap");
  s.panels[1].r0 = 20, s.segs[1].r0 = 20, s.panels[1].nr = 12, s.segs[1].nr = 12;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "gap");
  s.panels[1].r0 = 16, s.segs[1].r0 = 16, s.panels[1].nr = 16, s.segs[1].nr = 16, s.panels[2].nr = 4, s.segs[2].nr = 4;
  CHECK_ERR_CONTAINS(ts_attn_schedule_validate(&s), "cover rows [0, 36)");
  s.panels[2].nr = 8, s.segs[2].nr = 8;
  CHECK_OK(ts_attn_schedule_validate(&s));

  ts_bitmap m = mask_band(40, 3, 0), wrong = mask_band(41, 3, 0);
  ts_attn_plan *pl = NULL;
  CHECK_STATUS(ts_attn_plan_create(&pl, NULL, &s, &wrong, 16), TS_ERR_SHAPE);
  CHECK_STATUS(ts_attn_plan_create(&pl, NULL, &s, &m, 0), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_plan_create(&pl, NULL, &s, NULL, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_plan_create(NULL, NULL, &s, &m, 16), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &m, 16));
  float buf[2 * 40 * 16] = {0};
  CHECK_STATUS(ts_attn_execute(NULL, pl, buf, buf, buf, buf, 1, 1, 40, 32), TS_ERR_SHAPE);
  CHECK_STATUS(ts_attn_execute(NULL, pl, buf, buf, buf, buf, 1, 1, 39, 16), TS_ERR_SHAPE);
  CHECK_STATUS(ts_attn_execute(NULL, pl, NULL, buf, buf, buf, 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_execute(NULL, pl, buf, buf, buf, buf, -1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_execute(NULL, NULL, buf, buf, buf, buf, 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_plan_set_isa(pl, (ts_isa)7), TS_ERR_INVALID_ARG);
  if (ts_isa_supported() < TS_ISA_AVX512) CHECK_STATUS(ts_attn_plan_set_isa(pl, TS_ISA_AVX512), TS_ERR_UNSUPPORTED);
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s);

  /* block schedule input errors */
  ts_block b = {.row0 = 0, .col0 = 30, .rows = 5, .cols = 11};
  ts_attn_tile t = {16, 16};
  CHECK_ERR_CONTAINS(ts_attn_schedule_from_blocks(&s, 40, &b, &t, 1, NULL, NULL), "block 0");
  b.cols = 10, t.bc = 0;
  CHECK_ERR_CONTAINS(ts_attn_schedule_from_blocks(&s, 40, &b, &t, 1, NULL, NULL), "tile of block 0");
  t.bc = 16;
  CHECK_STATUS(ts_attn_schedule_from_blocks(&s, 40, &b, &t, 1, &wrong, NULL), TS_ERR_SHAPE);
  ts_attn_tile bad = {0, 4}, out;
  CHECK_STATUS(ts_attn_choose_tiles(&b, 1, &bad, 1, NULL, NULL, &out), TS_ERR_INVALID_ARG);
  ts_attn_seg_kind k;
  CHECK_STATUS(ts_attn_seg_kind_parse("sparse", &k), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_attn_seg_kind_parse("dense", &k));
  CHECK(k == TS_ATTN_SEG_DENSE && strcmp(ts_attn_seg_kind_name(TS_ATTN_SEG_FULL), "full") == 0, "kind names");
  CHECK_OK(ts_attn_seg_kind_parse("compact", &k));
  CHECK(k == TS_ATTN_SEG_COMPACT && strcmp(ts_attn_seg_kind_name(TS_ATTN_SEG_COMPACT), "compact") == 0, "compact kind name");
  CHECK_OK(ts_attn_seg_kind_parse("diag", &k));
  CHECK(k == TS_ATTN_SEG_DIAG && strcmp(ts_attn_seg_kind_name(TS_ATTN_SEG_DIAG), "diag") == 0, "diag kind name");
  mk_free(&m);
  mk_free(&wrong);
}

static double prefer_32x64(const ts_block *b, ts_attn_tile t, void *user) {
  (void)b, (void)user;
  return fabs(t.br - 32.0) + fabs(t.bc - 64.0);
}

static void test_counters(void) {
  /* block diagonal with 32-blocks: block skip 32x32 computes exactly the nonzeros, all unmasked;
   * dense computes n^2; 16x16 block skip is exact too; 64x64 computes twice the work. */
  const int64_t n = 128;
  ts_bitmap m = mask_blockdiag(n, 32);
  ts_attn_schedule s;
  ts_attn_plan *pl;
  ts_attn_stats S;
  struct { int dense, br, bc; int64_t cells, masked, skipped; } cases[] = {
      {1, 32, 32, n * n, 16, 0}, {0, 32, 32, 4 * 32 * 32, 0, 12}, {0, 16, 16, 4 * 32 * 32, 0, 48}, {0, 64, 64, 2 * 64 * 64, 2, 2}};
  for (int c = 0; c < 4; c++) {
    if (cases[c].dense) CHECK_OK(ts_attn_schedule_dense(&s, n, cases[c].br, cases[c].bc));
    else CHECK_OK(ts_attn_schedule_blockskip(&s, n, cases[c].br, cases[c].bc));
    CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &m, 64));
    ts_attn_plan_stats(pl, &S);
    CHECK(S.nnz == 4 * 32 * 32 && S.cells == cases[c].cells && S.tiles_masked == cases[c].masked &&
              S.tiles_skipped == cases[c].skipped,
          "case %d: nnz %lld cells %lld masked %lld skipped %lld", c, (long long)S.nnz, (long long)S.cells,
          (long long)S.tiles_masked, (long long)S.tiles_skipped);
    CHECK(fabs(S.work_ratio - (double)S.cells / (double)S.nnz) < 1e-12, "work ratio");
    ts_attn_plan_destroy(pl);
    ts_attn_schedule_free(&s);
  }
  /* blocks = the diagonal blocks exactly: no residue segment, work ratio 1 */
  ts_block bl[4];
  ts_attn_tile tl[4];
  for (int b = 0; b < 4; b++) bl[b] = (ts_block){.row0 = 32 * b, .col0 = 32 * b, .rows = 32, .cols = 32};
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu);
  CHECK(nmenu == 20 && menu[0].br == 8 && menu[19].bc == 128, "default menu");
  CHECK_OK(ts_attn_choose_tiles(bl, 4, menu, nmenu, prefer_32x64, NULL, tl));
  CHECK(tl[0].br == 32 && tl[0].bc == 64 && tl[3].br == 32, "custom cost picks 32x64, got %dx%d", tl[0].br, tl[0].bc);
  CHECK_OK(ts_attn_choose_tiles(bl, 4, menu, nmenu, NULL, NULL, tl));
  CHECK(tl[0].br >= 8 && tl[0].bc >= 16, "default chooser gives a menu tile");
  ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
  bo.panel_rows = 64;
  CHECK_OK(ts_attn_schedule_from_blocks(&s, n, bl, tl, 4, &m, &bo));
  CHECK(s.npanels == 2 && s.nsegs == 4, "panels %lld segs %lld (cuts at block edges, no residue)", (long long)s.npanels,
        (long long)s.nsegs);
  CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &m, 64));
  ts_attn_plan_stats(pl, &S);
  CHECK(S.cells == S.nnz && S.work_ratio == 1.0, "blocks: cells %lld nnz %lld", (long long)S.cells, (long long)S.nnz);
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s);
  /* blocks of 24 rows: align 1 cuts at their edges, align 32 at multiples of 32 (splitting blocks),
   * with panel_rows rounded up to a multiple of align */
  ts_block b24[5];
  ts_attn_tile t24[5];
  for (int b = 0; b < 5; b++) b24[b] = (ts_block){.row0 = 24 * b, .col0 = 24 * b, .rows = 24, .cols = 24}, t24[b] = (ts_attn_tile){16, 16};
  for (int al = 0; al < 2; al++) {
    bo.panel_rows = 50, bo.align = al ? 32 : 1;
    CHECK_OK(ts_attn_schedule_from_blocks(&s, 120, b24, t24, 5, NULL, &bo));
    for (int64_t p = 0; p < s.npanels; p++) {
      int32_t r0 = s.panels[p].r0;
      CHECK(al ? r0 % 32 == 0 : r0 % 24 == 0, "align %d: panel %lld starts at %d", bo.align, (long long)p, r0);
      CHECK(s.panels[p].nr <= (al ? 64 : 50), "align %d: panel %lld has %d rows", bo.align, (long long)p, s.panels[p].nr);
    }
    ts_attn_schedule_free(&s);
  }
  bo.align = 0;
  CHECK_ERR_CONTAINS(ts_attn_schedule_from_blocks(&s, 120, b24, t24, 5, NULL, &bo), "align");
  mk_free(&m);
}

static void test_json(void) {
  ts_bitmap m = mask_band(90, 10, 2);
  ts_block bl[64];
  int64_t nb = attn_test_blocks(&m, 8, bl, 64);
  ts_attn_tile tiles[64];
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu);
  CHECK_OK(ts_attn_choose_tiles(bl, nb, menu, nmenu, NULL, NULL, tiles));
  ts_attn_schedule s, r;
  CHECK_OK(ts_attn_schedule_from_blocks(&s, 90, bl, tiles, nb, &m, NULL));
  s.segs[0].kind = TS_ATTN_SEG_DENSE;
  char *text = NULL; /* the public form: a malloc'd string */
  CHECK_OK(ts_attn_schedule_to_json(&s, &text));
  CHECK_OK(ts_attn_schedule_from_json(text, &r));
  CHECK(r.n == s.n && r.npanels == s.npanels && r.nsegs == s.nsegs, "round trip sizes");
  int same = r.nsegs == s.nsegs;
  for (int64_t k = 0; same && k < s.nsegs; k++) same = memcmp(&r.segs[k], &s.segs[k], sizeof s.segs[k]) == 0;
  for (int64_t p = 0; same && p < s.npanels; p++) same = memcmp(&r.panels[p], &s.panels[p], sizeof s.panels[p]) == 0;
  CHECK(same, "round trip equal");
  ts_attn_schedule_free(&r);
  free(text);
  /* the internal cJSON form gives the same document */
  cJSON *j = ts__attn_schedule_to_cjson(&s);
  char *text2 = j ? cJSON_PrintUnformatted(j) : NULL;
  CHECK_OK(ts_attn_schedule_to_json(&s, &text));
  CHECK(text && text2 && !strcmp(text, text2), "string and cJSON forms agree");
  free(text), cJSON_free(text2), cJSON_Delete(j);
  ts_attn_schedule_free(&s);
  const char *bad[] = {"[]", "{\"n\": 0, \"panels\": []}", "{\"n\": 10}", "{\"n\": 10, \"panels\": [{\"r0\": 0, \"nr\": 10}]}",
                       "{\"n\": 10, \"panels\": [{\"r0\": 0, \"nr\": 10, \"segs\": [[0, 10, 0, 10, 16, 16]]}]}",
                       "{\"n\": 10, \"panels\": [{\"r0\": 0, \"nr\": 10, \"segs\": [[0, 10, 0, 10, 16, 16.5, \"mixed\"]]}]}",
                       "{\"n\": 10, \"panels\": [{\"r0\": 0, \"nr\": 10, \"segs\": [[0, 10, 0, 10, 16, 16, \"sparse\"]]}]}"};
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
    CHECK_STATUS(ts_attn_schedule_from_json(bad[b], &r), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(ts_attn_schedule_from_json("{\"n\": 10, \"panels\": [", &r), "invalid JSON at byte");
  CHECK_STATUS(ts_attn_schedule_from_json(NULL, &r), TS_ERR_INVALID_ARG);
  const char *short_rows = "{\"n\": 10, \"panels\": [{\"r0\": 0, \"nr\": 9, \"segs\": [[0, 9, 0, 10, 16, 16, \"mixed\"]]}]}";
  CHECK_ERR_CONTAINS(ts_attn_schedule_from_json(short_rows, &r), "cover rows [0, 9)");
  mk_free(&m);
}

int main(void) {
  /* the executor runs each ISA family's best variant: say which levels this CPU lacks (their
   * comparisons with the reference below do not run) */
  for (int i = 1; i < ts__attn_dispatch.count; i++) (void)tst_variant(&ts__attn_dispatch, i);
  test_diag();
  test_stale_workspace();
  test_warm();
  test_compact_keys();
  test_validation();
  test_counters();
  test_json();
  test_handmade();
  test_edges();
  test_sweep();
  printf("attn: largest error / max|V|: fp32 class %.3g (tolerance %.1g), bf16 dot path %.3g (tolerance %.3g); "
         "kernels up to %s%s\n", worst_err, TOL, worst_dot, TOL_DOT, ts_isa_name(ts_isa_supported()),
         ts_cpu()->avx512bf16 ? " + avx512bf16" : "");
  return tst_finish();
}
