/* Attention training: the training-mode forward (O bitwise the plain execute's, lse against a
 * double-precision log-sum-exp, stored scores) and the backward (tessera/attn_train.h) against the
 * double-precision reference backward (ts_attn_reference_backward) and against central finite
 * differences of L = sum(O o G) computed in double; every kernel level this CPU runs (the
 * backward's dispatcher: a level the CPU lacks is reported as skipped), every schedule item kind
 * (dense, block skip with MIXED / FULL sub-tiles, COMPACT with 4-key runs and with single keys,
 * DIAG, blocks + residues), masks with empty rows and empty columns, head dims 32, 64, 80, 128 and
 * odd ones, batch x heads > 1, 1 and 2 threads, both reductions, recomputed and stored scores, bf16
 * inputs; bad arguments.
 *
 * Tolerance (per gradient tensor X, absolute): tol_X = gamma * M_X, u = 2^-24 (fp32 unit roundoff).
 *  M_X bounds the sum of absolute values of the terms the kernels add (computed in double here):
 *    M_dV = max_{j,e} sum_i P_ij |dO_ie|,
 *    M_dQ = max_{i,e} sum_j W_ij |K_je|,  M_dK = max_{j,e} sum_i W_ij |Q_ie|,
 *    W_ij = scale P_ij (|dP_ij| + |Dr_i| + sum_e |dO_ie V_je| + sum_e |dO_ie O_ie|)
 *  (|dS_ij| <= scale P_ij (|dP_ij| + |Dr_i|); the last two sums bound the absolute values behind dP
 *  and Dr, whose fp32 dot products err by at most d u times them).
 *  gamma = u (L + 2 d + d scale A + |lse|max + 16): a sum of L <= n terms in fp32 errs by at most
 *  L u of its absolute sum; dP and Dr by d u each; P = exp2(S c - lse2) relatively by the error of
 *  its exponent: S's fp32 dot product errs by d u sum_k |q_k k_k| <= d u A (A = max over cells),
 *  scaled by `scale`, plus the rounding of lse (|lse| u) and of lse * log2(e), c and the exp2
 *  polynomial (a few u: the 16).
 *  Measured errors are 30-200x below (printed at the end); one cell dropped or doubled moves a
 *  gradient by about P_ij |dO| ~ M / (keys per row), orders of magnitude above gamma M (a kernel
 *  mutated to drop one row of a key block failed by 4e3-2e4 x the bound).
 *  bf16 inputs are compared with the reference on the same bf16-rounded values (the kernels convert
 *  them exactly to fp32): the same tolerance; where the forward runs the AVX-512 BF16 dot path (P
 *  rounded to bf16 for P V), its O moves Dr, and dQ, dK get the derived extra term of reference().
 *  Finite differences (double forward, h = 1e-4 relative): truncation O(h^2) ~ 1e-8 of the
 *  gradient scale, so the kernels' gradients must match within their tol_X + 1e-6 M_X. */
#include <math.h>

#include "attn/attn_internal.h"
#include "tessera/attn_train.h"
#include "attn_test_blocks.h"
#include "attn_masks.h"
#include "tst.h"
#include "tst_dispatch.h"

#ifdef TS_SANITIZE
static const int g_san = 1;
#else
static const int g_san = 0;
#endif

/* ---- masks ------------------------------------------------------------------------------------ */

static void mk_clr(ts_bitmap *b, int64_t i, int64_t j) { b->bits[i * b->stride + (j >> 6)] &= ~((uint64_t)1 << (j & 63)); }

/* A band with random extras; every 5th row empty, every 7th column empty, the last 9 rows empty. */
static ts_bitmap mask_holes(int64_t n) {
  ts_bitmap b = mask_random(n, 0.12, 99);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i > 5 ? i - 5 : 0; j < n && j <= i + 5; j++) mk_set(&b, i, j);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (i % 5 == 0 || j % 7 == 3 || i >= n - 9) mk_clr(&b, i, j);
  return b;
}
/* Each row allows 5 keys spread far apart: COMPACT lists them one by one (rl 1). */
static ts_bitmap mask_spread(int64_t n) {
  ts_bitmap b = mk_alloc(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < 5; t++) mk_set(&b, i, (i * 7 + 23 * t) % n);
  return b;
}

/* ---- data and the double-precision bounds -------------------------------------------------------- */

typedef struct data {
  int64_t B, H, n, d, total;
  const ts_bitmap *m;
  float *q, *k, *v, *g;             /* inputs; g = dO = G of the loss */
  uint16_t *qb, *kb, *vb;           /* bf16 copies */
  float *o, *lse, *rdq, *rdk, *rdv; /* reference forward O, lse; reference gradients (fp32 inputs) */
  float *rdqb, *rdkb, *rdvb, *ob, *lseb; /* the same on the bf16-rounded values */
  double tol[3], tolb[3];           /* dQ, dK, dV tolerances (fp32, bf16 values) */
  double told[3];                   /* bf16 with the AVX-512 BF16 dot path's forward (see reference) */
  double M[3];                      /* their magnitude bounds M_X (fp32 values) */
} data;

static double g_worst[3]; /* largest err / tol seen per tensor */

/* Forward of one head in double: P [n][n] (0 off the mask), O, lse; the bounds of the header. */
static void head_fwd(const ts_bitmap *m, const float *q, const float *k, const float *v, int64_t n, int64_t d, double *P,
                     double *O, double *lse) {
  const double scale = 1.0 / sqrt((double)d);
  for (int64_t i = 0; i < n; i++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) {
      P[i * n + j] = 0;
      if (!ts_bitmap_get(m, i, j)) continue;
      double s = 0;
      for (int64_t x = 0; x < d; x++) s += (double)q[i * d + x] * k[j * d + x];
      P[i * n + j] = s * scale;
      if (s * scale > mx) mx = s * scale;
    }
    for (int64_t j = 0; j < n; j++)
      if (ts_bitmap_get(m, i, j)) sum += (P[i * n + j] = exp(P[i * n + j] - mx));
    for (int64_t x = 0; x < d; x++) O[i * d + x] = 0;
    lse[i] = sum > 0 ? mx + log(sum) : -INFINITY;
    for (int64_t j = 0; j < n && sum > 0; j++) {
      P[i * n + j] /= sum;
      for (int64_t x = 0; x < d; x++) O[i * d + x] += P[i * n + j] * v[j * d + x];
    }
  }
}

/* Reference gradients, O and lse of every head, and the tolerances (header) for inputs q, k, v. */
static void reference(data *D, const float *q, const float *k, const float *v, float *O, float *lse, float *dq, float *dk,
                      float *dv, double tol[3], double Mout[3], double *told) {
  const int64_t n = D->n, d = D->d, hs = n * d;
  const double scale = 1.0 / sqrt((double)d), u = 1.0 / (1 << 24);
  CHECK_OK(ts_attn_reference_backward(D->m, q, k, v, D->g, dq, dk, dv, D->B, D->H, n, d));
  double *P = ts_malloc((size_t)(n * n) * 8), *Od = ts_malloc((size_t)hs * 8), *ls = ts_malloc((size_t)n * 8);
  double *W = ts_malloc((size_t)(n * n) * 8), *Z = ts_malloc((size_t)(n * n) * 8);
  double M[3] = {0, 0, 0}, A = 0, lmax = 0, Md[2] = {0, 0};
  for (int64_t h = 0; h < D->B * D->H; h++) {
    const float *qh = q + h * hs, *kh = k + h * hs, *vh = v + h * hs, *gh = D->g + h * hs;
    head_fwd(D->m, qh, kh, vh, n, d, P, Od, ls);
    double vmax = 0;
    for (int64_t x = 0; x < hs; x++) vmax = fmax(vmax, fabs(vh[x]));
    for (int64_t i = 0; i < n; i++) {
      double ga = 0;
      for (int64_t x = 0; x < d; x++) ga += fabs(gh[i * d + x]);
      for (int64_t j = 0; j < n; j++) Z[i * n + j] = scale * P[i * n + j] * ga * vmax / 512;
      lse[h * n + i] = (float)ls[i];
      if (isfinite(ls[i]) && fabs(ls[i]) > lmax) lmax = fabs(ls[i]);
      double dr = 0, adr = 0;
      for (int64_t x = 0; x < d; x++) {
        O[h * hs + i * d + x] = (float)Od[i * d + x];
        dr += gh[i * d + x] * Od[i * d + x], adr += fabs(gh[i * d + x] * Od[i * d + x]);
      }
      for (int64_t j = 0; j < n; j++) {
        W[i * n + j] = 0;
        if (!ts_bitmap_get(D->m, i, j)) continue;
        double dp = 0, adp = 0, a = 0;
        for (int64_t x = 0; x < d; x++) {
          dp += (double)gh[i * d + x] * vh[j * d + x], adp += fabs((double)gh[i * d + x] * vh[j * d + x]);
          a += fabs((double)qh[i * d + x] * kh[j * d + x]);
        }
        if (a > A) A = a;
        W[i * n + j] = scale * P[i * n + j] * (fabs(dp) + fabs(dr) + adp + adr);
      }
    }
    for (int64_t x = 0; x < d; x++) {
      for (int64_t i = 0; i < n; i++) { /* dQ: over keys j */
        double s = 0, z = 0;
        for (int64_t j = 0; j < n; j++) s += W[i * n + j] * fabs(kh[j * d + x]), z += Z[i * n + j] * fabs(kh[j * d + x]);
        M[0] = s > M[0] ? s : M[0];
        Md[0] = z > Md[0] ? z : Md[0];
      }
      for (int64_t j = 0; j < n; j++) { /* dK, dV: over rows i */
        double s = 0, t = 0, z = 0;
        for (int64_t i = 0; i < n; i++)
          s += W[i * n + j] * fabs(qh[i * d + x]), t += P[i * n + j] * fabs(gh[i * d + x]), z += Z[i * n + j] * fabs(qh[i * d + x]);
        M[1] = s > M[1] ? s : M[1];
        M[2] = t > M[2] ? t : M[2];
        Md[1] = z > Md[1] ? z : Md[1];
      }
    }
  }
  const double gamma = u * ((double)n + 2.0 * d + d * scale * A + lmax + 16);
  for (int x = 0; x < 3; x++) tol[x] = gamma * M[x] + 1e-30, Mout[x] = M[x];
  /* The AVX-512 BF16 forward rounds P to bf16 for P V (weights off by <= 2^-9 relative, the
   * normalizer exact: |dO_ie| <= 2^-9 max|V|, tests/test_attn.c), so Dr_i = dO_i . O_i moves by
   * <= 2^-9 vmax sum_e |dO_ie|, dS_ij by scale P_ij times that (Z), dQ and dK by Z summed against
   * |K| and |Q|; P itself (from lse) and dV do not move. */
  if (told) told[0] = tol[0] + Md[0], told[1] = tol[1] + Md[1], told[2] = tol[2];
  ts_free(P), ts_free(Od), ts_free(ls), ts_free(W), ts_free(Z);
}

static void data_make(data *D, int64_t B, int64_t H, const ts_bitmap *m, int64_t d, uint64_t seed) {
  const int64_t n = m->rows;
  *D = (data){.B = B, .H = H, .n = n, .d = d, .total = B * H * n * d, .m = m};
  const size_t t = (size_t)D->total, tl = (size_t)(B * H * n);
  D->q = ts_malloc(t * 4), D->k = ts_malloc(t * 4), D->v = ts_malloc(t * 4), D->g = ts_malloc(t * 4);
  D->qb = ts_malloc(t * 2), D->kb = ts_malloc(t * 2), D->vb = ts_malloc(t * 2);
  D->o = ts_malloc(t * 4), D->ob = ts_malloc(t * 4), D->lse = ts_malloc(tl * 4), D->lseb = ts_malloc(tl * 4);
  D->rdq = ts_malloc(t * 4), D->rdk = ts_malloc(t * 4), D->rdv = ts_malloc(t * 4);
  D->rdqb = ts_malloc(t * 4), D->rdkb = ts_malloc(t * 4), D->rdvb = ts_malloc(t * 4);
  tst_fill_uniform(D->q, t, seed, -2.0f, 2.0f);
  tst_fill_uniform(D->k, t, seed + 1, -1.0f, 1.0f);
  tst_fill_uniform(D->v, t, seed + 2, -1.0f, 1.0f);
  tst_fill_uniform(D->g, t, seed + 3, -1.0f, 1.0f);
  reference(D, D->q, D->k, D->v, D->o, D->lse, D->rdq, D->rdk, D->rdv, D->tol, D->M, NULL);
  ts_f32_to_bf16_array(D->q, D->qb, t);
  ts_f32_to_bf16_array(D->k, D->kb, t);
  ts_f32_to_bf16_array(D->v, D->vb, t);
  double M[3];
  float *q2 = ts_malloc(t * 4), *k2 = ts_malloc(t * 4), *v2 = ts_malloc(t * 4);
  ts_bf16_to_f32_array(D->qb, q2, t);
  ts_bf16_to_f32_array(D->kb, k2, t);
  ts_bf16_to_f32_array(D->vb, v2, t);
  reference(D, q2, k2, v2, D->ob, D->lseb, D->rdqb, D->rdkb, D->rdvb, D->tolb, M, D->told);
  ts_free(q2), ts_free(k2), ts_free(v2);
}

static void data_free(data *D) {
  float *f[] = {D->q, D->k, D->v, D->g, D->o, D->ob, D->lse, D->lseb, D->rdq, D->rdk, D->rdv, D->rdqb, D->rdkb, D->rdvb};
  for (size_t x = 0; x < sizeof f / sizeof f[0]; x++) ts_free(f[x]);
  ts_free(D->qb), ts_free(D->kb), ts_free(D->vb);
}

/* ---- one backward run, checked ------------------------------------------------------------------ */

typedef struct run_opts {
  int threads;
  ts_attn_bwd_reduce reduce;
  bool scores, bf16;
} run_opts;

static void check_grads(const data *D, const float *gq, const float *gk, const float *gv, bool bf16, bool dot,
                        const char *what) {
  const float *ref[3] = {bf16 ? D->rdqb : D->rdq, bf16 ? D->rdkb : D->rdk, bf16 ? D->rdvb : D->rdv};
  const float *got[3] = {gq, gk, gv};
  static const char *nm[3] = {"dQ", "dK", "dV"};
  for (int x = 0; x < 3; x++) {
    const double tol = dot ? D->told[x] : bf16 ? D->tolb[x] : D->tol[x], e = tst_max_abs_diff(got[x], ref[x], (size_t)D->total);
    if (e / tol > g_worst[x] && e < INFINITY) g_worst[x] = e / tol;
    CHECK(e <= tol, "%s: %s max err %.3g > tol %.3g (n=%lld d=%lld)", what, nm[x], e, tol, (long long)D->n, (long long)D->d);
    CHECK(tst_guard_ok(got[x], (size_t)D->total), "%s: guard bytes after %s overwritten", what, nm[x]);
  }
}

/* Training forward (O bitwise the plain execute's, lse) then backward with options o on plan pl. */
static void run_one(ts_attn_plan *pl, const data *D, run_opts o, const char *what0) {
  char what[256];
  snprintf(what, sizeof what, "%s [%s, %s, %d thr, %s%s]", what0, ts_isa_name(ts_attn_plan_isa(pl)),
           ts_attn_bwd_reduce_name(o.reduce), o.threads, o.bf16 ? "bf16" : "f32", o.scores ? ", scores" : "");
  const size_t t = (size_t)D->total, tl = (size_t)(D->B * D->H * D->n);
  const int64_t sf = ts_attn_score_floats(pl);
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, o.threads));
  float *O = ts_malloc(t * 4), *O2 = ts_malloc(t * 4), *lse = ts_malloc(tl * 4);
  float *sc = o.scores ? ts_malloc((size_t)(sf * D->B * D->H) * 4) : NULL;
  float *gq = tst_alloc_guarded(t), *gk = tst_alloc_guarded(t), *gv = tst_alloc_guarded(t);
  tst_poison(O, t), tst_poison(O2, t), tst_poison(lse, tl), tst_poison(gq, t), tst_poison(gk, t), tst_poison(gv, t);
  if (sc) tst_poison(sc, (size_t)(sf * D->B * D->H));
  if (o.bf16) {
    CHECK_OK(ts_attn_execute_bf16(ctx, pl, D->qb, D->kb, D->vb, O, D->B, D->H, D->n, D->d));
    CHECK_OK(ts_attn_execute_train_bf16(ctx, pl, D->qb, D->kb, D->vb, O2, lse, sc, D->B, D->H, D->n, D->d));
  } else {
    CHECK_OK(ts_attn_execute(ctx, pl, D->q, D->k, D->v, O, D->B, D->H, D->n, D->d));
    CHECK_OK(ts_attn_execute_train(ctx, pl, D->q, D->k, D->v, O2, lse, sc, D->B, D->H, D->n, D->d));
  }
  CHECK(!memcmp(O, O2, t * 4), "%s: training forward's O differs from execute's", what);
  /* bf16 on AVX-512 BF16: the forward's dot path (P rounded to bf16 for P V) feeds O to the backward */
  const bool dot = o.bf16 && ts_attn_plan_isa(pl) == TS_ISA_AVX512 && ts__level_supported(TS__LV_AVX512_BF16);
  /* lse: relative error of ln l from the fp32 sum of <= n terms and the scores' d u A: 1e-5 of max(1, |lse|) */
  const float *rl = o.bf16 ? D->lseb : D->lse;
  double le = 0;
  for (size_t i = 0; i < tl; i++) {
    if (isinf(rl[i]) || isinf(lse[i])) {
      CHECK(rl[i] == lse[i], "%s: lse[%zu] = %g, reference %g", what, i, lse[i], rl[i]);
      continue;
    }
    const double e = fabs((double)lse[i] - rl[i]) / fmax(1.0, fabs(rl[i]));
    le = e > le || e != e ? e : le;
  }
  CHECK(le <= 1e-5, "%s: lse relative error %.3g > 1e-5", what, le);
  ts_attn_bwd *b = NULL;
  CHECK_OK(ts_attn_bwd_create(&b, ctx, pl, o.reduce));
  CHECK(ts_attn_bwd_get_reduce(b) == o.reduce, "%s: reduction %s", what, ts_attn_bwd_reduce_name(ts_attn_bwd_get_reduce(b)));
  for (int rep = 0; rep < 2 && b; rep++) { /* twice: partials must be left zeroed for the next call */
    if (o.bf16)
      CHECK_OK(ts_attn_backward_bf16(ctx, b, D->qb, D->kb, D->vb, O2, D->g, lse, sc, gq, gk, gv, D->B, D->H, D->n, D->d));
    else CHECK_OK(ts_attn_backward(ctx, b, D->q, D->k, D->v, O2, D->g, lse, sc, gq, gk, gv, D->B, D->H, D->n, D->d));
    check_grads(D, gq, gk, gv, o.bf16, dot, what);
  }
  ts_attn_bwd_destroy(b);
  ts_free(O), ts_free(O2), ts_free(lse), ts_free(sc), ts_free(gq), ts_free(gk), ts_free(gv);
  ts_context_destroy(ctx);
}

/* Every backward level this CPU runs (the dispatcher's variants; the others reported skipped). full:
 * the option matrix at each level, else one run per level plus the matrix at the best. */
static void run_levels(ts_attn_plan *pl, const data *D, const char *what, bool full) {
  const ts__dispatch *dp = &ts__attn_bwd_dispatch;
  int top = 0;
  for (int i = 0; i < dp->count; i++)
    if (ts__level_supported(dp->variants[i].level)) top = i;
  for (int i = 0; i < dp->count; i++) {
    if (i > 0 && !tst_variant(dp, i)) continue; /* says SKIPPED (part) once per level */
    if (ts_attn_plan_set_isa(pl, ts__level_isa(dp->variants[i].level)) != TS_OK) continue;
    run_one(pl, D, (run_opts){2, TS_ATTN_BWD_PARTIALS, false, false}, what);
    if (!full && i != top) continue;
    if (g_san && i != top) continue;
    run_one(pl, D, (run_opts){2, TS_ATTN_BWD_ATOMIC, true, false}, what);
    run_one(pl, D, (run_opts){1, TS_ATTN_BWD_PARTIALS, true, true}, what);
    run_one(pl, D, (run_opts){2, TS_ATTN_BWD_ATOMIC, false, true}, what);
  }
}

static void check_schedule(ts_attn_schedule *s, const data *D, const char *what, bool full, ts_attn_stats *out) {
  ts_attn_plan *pl = NULL;
  ts_status st = ts_attn_plan_create(&pl, NULL, s, D->m, D->d);
  CHECK(st == TS_OK, "%s: plan: %s", what, ts_last_error());
  if (pl) {
    if (out) ts_attn_plan_stats(pl, out);
    run_levels(pl, D, what, full);
  }
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(s);
}


/* Blocks from tile occupancy, tiles by the analytic cost, then the residue as given (-1: as made). */
static void blocks_schedule(ts_attn_schedule *s, const data *D, int32_t residue_kind) {
  ts_block bl[512];
  const int64_t nb = attn_test_blocks(D->m, 8, bl, 512);
  ts_attn_tile tiles[512];
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu), dd = (int)D->d;
  CHECK_OK(ts_attn_choose_tiles(bl, nb, menu, nmenu, NULL, &dd, tiles));
  ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
  bo.panel_rows = 48;
  CHECK_OK(ts_attn_schedule_from_blocks(s, D->n, bl, tiles, nb, residue_kind < 0 ? D->m : NULL, &bo));
  if (residue_kind >= 0)
    for (int64_t p = 0; p < s->npanels; p++) {
      ts_attn_segment *g = &s->segs[s->panels[p].seg0 + s->panels[p].nseg - 1];
      g->kind = residue_kind, g->br = 16, g->bc = residue_kind == TS_ATTN_SEG_DIAG ? 40 : 32;
    }
}

/* ---- the sweep ------------------------------------------------------------------------------ */

static void test_sweep(void) {
  struct { const char *name; ts_bitmap m; } masks[] = {
      {"band+global", mask_band(70, 7, 3)}, {"window2d", mask_window2d(8, 9, 5)}, {"holes", mask_holes(64)},
      {"random", mask_random(45, 0.3, 7)},
  };
  const int nm = (int)(sizeof masks / sizeof masks[0]);
  const int64_t dims[] = {32, 64, 80, 128, 33};
  for (int mi = 0; mi < nm; mi++)
    for (int di = 0; di < 5; di++) {
      if (g_san && di != 1 && di != 4) continue;
      if (mi == 3 && di != 4 && di != 0) continue; /* random: two dims */
      const int64_t d = dims[di], n = masks[mi].m.rows;
      const bool full = di == 1 || di == 4; /* the option matrix at every level at d = 64 and 33 */
      data D;
      data_make(&D, 2, 3, &masks[mi].m, d, 500 + 10 * mi + di);
      char what[160];
      ts_attn_schedule s;
      ts_attn_stats S;
      snprintf(what, sizeof what, "%s d%lld dense 16x32", masks[mi].name, (long long)d);
      CHECK_OK(ts_attn_schedule_dense(&s, n, 16, 32));
      check_schedule(&s, &D, what, full, NULL);
      static const ts_attn_tile skip[] = {{16, 16}, {5, 7}, {32, 64}};
      for (int t = 0; t < 3; t++) {
        if (g_san && t == 2) continue;
        snprintf(what, sizeof what, "%s d%lld blockskip %dx%d", masks[mi].name, (long long)d, skip[t].br, skip[t].bc);
        CHECK_OK(ts_attn_schedule_blockskip(&s, n, skip[t].br, skip[t].bc));
        check_schedule(&s, &D, what, full && t < 2, &S);
        if (mi == 0 && t == 0) CHECK(S.tiles_full > 0 && S.tiles_masked > 0 && S.tiles_skipped > 0,
                                     "%s: want full, masked and skipped sub-tiles (%lld, %lld, %lld)", what,
                                     (long long)S.tiles_full, (long long)S.tiles_masked, (long long)S.tiles_skipped);
      }
      static const struct { int32_t P, br, bc; } cp[] = {{40, 16, 64}, {37, 5, 13}, {48, 8, 4}};
      for (int t = 0; t < 3; t++) {
        snprintf(what, sizeof what, "%s d%lld compact P%d %dx%d", masks[mi].name, (long long)d, cp[t].P, cp[t].br, cp[t].bc);
        pass_schedule(&s, n, cp[t].P, cp[t].br, cp[t].bc, TS_ATTN_SEG_COMPACT);
        check_schedule(&s, &D, what, full && t < 2, NULL);
        snprintf(what, sizeof what, "%s d%lld diag P%d %dx%d", masks[mi].name, (long long)d, cp[t].P, cp[t].br, cp[t].bc);
        pass_schedule(&s, n, cp[t].P, cp[t].br, cp[t].bc, TS_ATTN_SEG_DIAG);
        check_schedule(&s, &D, what, full && t < 2, &S);
        if (t == 0) CHECK(S.tiles_diag > 0, "%s: no DIAG item", what);
      }
      static const struct { int32_t kind; const char *name; } res[] = {{-1, "residue"}, {TS_ATTN_SEG_COMPACT, "compact residue"},
                                                                       {TS_ATTN_SEG_DIAG, "diag residue"}};
      for (int r = 0; r < 3; r++) {
        snprintf(what, sizeof what, "%s d%lld blocks+%s", masks[mi].name, (long long)d, res[r].name);
        blocks_schedule(&s, &D, res[r].kind);
        check_schedule(&s, &D, what, full, NULL);
      }
      data_free(&D);
    }
  for (int mi = 0; mi < nm; mi++) ts_free(masks[mi].m.bits);
}

/* COMPACT with single keys (rl 1) and with 4-key runs (rl 4), and a FULL segment (unmasked items). */
static void test_compact_full(void) {
  ts_bitmap sp = mask_spread(90), band = mask_band(60, 6, 0);
  data D;
  data_make(&D, 1, 2, &sp, 64, 71);
  ts_attn_schedule s;
  ts_attn_stats S;
  pass_schedule(&s, 90, 48, 16, 64, TS_ATTN_SEG_COMPACT);
  check_schedule(&s, &D, "spread compact (single keys)", true, &S);
  CHECK(S.tiles_keyed > 0 && S.tiles_keyed == S.tiles_full + S.tiles_masked, "spread: %lld of %lld items keyed",
        (long long)S.tiles_keyed, (long long)(S.tiles_full + S.tiles_masked));
  data_free(&D);
  data_make(&D, 2, 1, &band, 80, 72);
  pass_schedule(&s, 60, 32, 16, 32, TS_ATTN_SEG_COMPACT);
  check_schedule(&s, &D, "band compact (4-key runs)", true, &S);
  CHECK(S.tiles_keyed < S.tiles_full + S.tiles_masked, "band: every item keyed (%lld)", (long long)S.tiles_keyed);
  /* panel 0: a FULL square inside the band first, then MIXED over all columns (ownership) */
  CHECK_OK(ts_attn_schedule_alloc(&s, 60, 2, 3));
  s.panels[0] = (ts_attn_panel){0, 30, 0, 2};
  s.panels[1] = (ts_attn_panel){30, 30, 2, 1};
  s.segs[0] = (ts_attn_segment){8, 6, 8, 6, 8, 4, TS_ATTN_SEG_FULL};
  s.segs[1] = (ts_attn_segment){0, 30, 0, 60, 8, 16, TS_ATTN_SEG_MIXED};
  s.segs[2] = (ts_attn_segment){30, 30, 0, 60, 16, 16, TS_ATTN_SEG_COMPACT};
  check_schedule(&s, &D, "band full+mixed, compact", true, &S);
  CHECK(S.tiles_full > 0, "band: no unmasked item");
  data_free(&D);
  ts_free(sp.bits), ts_free(band.bits);
}

/* n = 1 (allowed and empty), and n = 4..7 bands under COMPACT 2 x 4 items: runs near the end move
 * back to n - 4 and repeat keys of the run before (each key's cells counted once). */
static void test_edges(void) {
  for (int allowed = 0; allowed <= 1; allowed++) {
    ts_bitmap m = mk_alloc(1);
    if (allowed) mk_set(&m, 0, 0);
    data D;
    data_make(&D, 2, 2, &m, 33, 5);
    ts_attn_schedule s;
    CHECK_OK(ts_attn_schedule_blockskip(&s, 1, 16, 16));
    check_schedule(&s, &D, allowed ? "n=1 allowed" : "n=1 empty", true, NULL);
    pass_schedule(&s, 1, 8, 8, 64, TS_ATTN_SEG_COMPACT); /* n < 4: runs as MIXED */
    check_schedule(&s, &D, allowed ? "n=1 compact" : "n=1 empty compact", false, NULL);
    data_free(&D);
    ts_free(m.bits);
  }
  for (int64_t n = 4; n <= 7; n++) {
    ts_bitmap m = mask_band(n, 2, 0);
    data D;
    data_make(&D, 1, 3, &m, 16, 50 + (uint64_t)n);
    ts_attn_schedule s;
    pass_schedule(&s, n, 3, 2, 4, TS_ATTN_SEG_COMPACT);
    check_schedule(&s, &D, "small n compact", true, NULL);
    pass_schedule(&s, n, 3, 2, 3, TS_ATTN_SEG_DIAG);
    check_schedule(&s, &D, "small n diag", true, NULL);
    data_free(&D);
    ts_free(m.bits);
  }
}

/* ---- finite differences --------------------------------------------------------------------- */

/* L = sum(O o G) of head h in double, from double copies of the inputs. */
static double loss(const data *D, const double *q, const double *k, const double *v, int64_t h) {
  const int64_t n = D->n, d = D->d;
  const double scale = 1.0 / sqrt((double)d);
  double L = 0, *p = ts_malloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++) {
      if (!ts_bitmap_get(D->m, i, j)) continue;
      double s = 0;
      for (int64_t x = 0; x < d; x++) s += q[i * d + x] * k[j * d + x];
      p[j] = s * scale, mx = p[j] > mx ? p[j] : mx;
    }
    for (int64_t j = 0; j < n; j++)
      if (ts_bitmap_get(D->m, i, j)) sum += (p[j] = exp(p[j] - mx));
    for (int64_t j = 0; j < n && sum > 0; j++)
      if (ts_bitmap_get(D->m, i, j))
        for (int64_t x = 0; x < d; x++) L += p[j] / sum * v[j * d + x] * D->g[h * n * d + i * d + x];
  }
  ts_free(p);
  return L;
}

static void test_fd(void) {
  ts_bitmap ms[2] = {mask_holes(48), mask_window2d(6, 8, 3)};
  const int64_t dims[2] = {32, 7};
  for (int c = 0; c < 2; c++) {
    data D;
    data_make(&D, 1, 2, &ms[c], dims[c], 900 + (uint64_t)c);
    const int64_t n = D.n, d = D.d, hs = n * d, t = D.total;
    ts_attn_schedule s;
    pass_schedule(&s, n, 24, 8, 16, c ? TS_ATTN_SEG_DIAG : TS_ATTN_SEG_COMPACT);
    ts_attn_plan *pl = NULL;
    CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &ms[c], d));
    float *O = ts_malloc((size_t)t * 4), *lse = ts_malloc((size_t)(2 * n) * 4), *gr[3];
    for (int x = 0; x < 3; x++) gr[x] = ts_malloc((size_t)t * 4);
    ts_attn_bwd *b = NULL;
    CHECK_OK(ts_attn_execute_train(NULL, pl, D.q, D.k, D.v, O, lse, NULL, 1, 2, n, d));
    CHECK_OK(ts_attn_bwd_create(&b, NULL, pl, TS_ATTN_BWD_AUTO));
    CHECK_OK(ts_attn_backward(NULL, b, D.q, D.k, D.v, O, D.g, lse, NULL, gr[0], gr[1], gr[2], 1, 2, n, d));
    double *in[3];
    const float *src[3] = {D.q, D.k, D.v}, *rf[3] = {D.rdq, D.rdk, D.rdv};
    for (int x = 0; x < 3; x++) {
      in[x] = ts_malloc((size_t)t * 8);
      for (int64_t e = 0; e < t; e++) in[x][e] = src[x][e];
    }
    double worst[3] = {0, 0, 0}, worst_ref[3] = {0, 0, 0};
    ts_rng r;
    ts_rng_seed(&r, 5);
    const int samples = g_san ? 12 : 150;
    for (int x = 0; x < 3; x++)
      for (int sIdx = 0; sIdx < samples; sIdx++) {
        const int64_t e = (int64_t)(ts_rng_uniform(&r) * (double)t), h = e / hs;
        const double x0 = in[x][e], step = 1e-4 * fmax(1.0, fabs(x0));
        in[x][e] = x0 + step;
        const double lp = loss(&D, in[0] + h * hs, in[1] + h * hs, in[2] + h * hs, h);
        in[x][e] = x0 - step;
        const double lm = loss(&D, in[0] + h * hs, in[1] + h * hs, in[2] + h * hs, h);
        in[x][e] = x0;
        const double fd = (lp - lm) / (2 * step);
        worst[x] = fmax(worst[x], fabs(gr[x][e] - fd));
        worst_ref[x] = fmax(worst_ref[x], fabs(rf[x][e] - fd));
      }
    for (int x = 0; x < 3; x++) {
      const double M = D.M[x];
      CHECK(worst[x] <= D.tol[x] + 1e-6 * M, "fd %s: tensor %d kernels vs finite differences %.3g > %.3g", c ? "window" : "holes",
            x, worst[x], D.tol[x] + 1e-6 * M);
      CHECK(worst_ref[x] <= D.tol[x] + 1e-6 * M, "fd %s: tensor %d reference vs finite differences %.3g", c ? "window" : "holes",
            x, worst_ref[x]);
    }
    for (int x = 0; x < 3; x++) ts_free(in[x]), ts_free(gr[x]);
    ts_free(O), ts_free(lse);
    ts_attn_bwd_destroy(b);
    ts_attn_plan_destroy(pl);
    ts_attn_schedule_free(&s);
    data_free(&D);
    ts_free(ms[c].bits);
  }
}

/* ---- bad arguments -------------------------------------------------------------------------- */

static void test_errors(void) {
  ts_bitmap m = mask_band(40, 4, 0), m2 = mask_band(40, 9, 0);
  data D;
  data_make(&D, 1, 1, &m, 16, 3);
  ts_attn_schedule s, s2;
  ts_attn_plan *pl = NULL, *pl2 = NULL;
  CHECK_OK(ts_attn_schedule_blockskip(&s, 40, 16, 16));
  CHECK_OK(ts_attn_schedule_blockskip(&s2, 40, 8, 8));
  CHECK_OK(ts_attn_plan_create(&pl, NULL, &s, &m, 16));
  CHECK_OK(ts_attn_plan_create(&pl2, NULL, &s2, &m2, 16)); /* another plan of another size */
  const int64_t t = D.total;
  float *O = ts_malloc((size_t)t * 4), *lse = ts_malloc(40 * 4), *g[3];
  /* scores of another plan, in a buffer large enough for either (the backward reads this plan's layout) */
  const int64_t f1 = ts_attn_score_floats(pl), f2 = ts_attn_score_floats(pl2);
  float *sc2 = ts_malloc((size_t)(f1 > f2 ? f1 : f2) * 4);
  tst_poison(sc2, (size_t)(f1 > f2 ? f1 : f2));
  for (int x = 0; x < 3; x++) g[x] = ts_malloc((size_t)t * 4);
  CHECK(ts_attn_score_floats(pl) >= 40 * 4 && ts_attn_score_floats(pl) != ts_attn_score_floats(pl2), "score floats %lld, %lld",
        (long long)ts_attn_score_floats(pl), (long long)ts_attn_score_floats(pl2));
  CHECK(ts_attn_score_floats(NULL) == 0, "NULL plan has no scores");
  CHECK_STATUS(ts_attn_execute_train(NULL, pl, D.q, D.k, D.v, O, NULL, NULL, 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_execute_train(NULL, pl, D.q, D.k, D.v, O, lse, NULL, 1, 1, 41, 16), TS_ERR_SHAPE);
  CHECK_STATUS(ts_attn_execute_train(NULL, NULL, D.q, D.k, D.v, O, lse, NULL, 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_attn_execute_train(NULL, pl, D.q, D.k, D.v, O, lse, NULL, 1, 1, 40, 16));
  CHECK_OK(ts_attn_execute_train(NULL, pl2, D.q, D.k, D.v, O, lse, sc2, 1, 1, 40, 16));
  ts_attn_bwd *b = NULL;
  CHECK_STATUS(ts_attn_bwd_create(&b, NULL, NULL, TS_ATTN_BWD_AUTO), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_bwd_create(NULL, NULL, pl, TS_ATTN_BWD_AUTO), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_bwd_create(&b, NULL, pl, (ts_attn_bwd_reduce)7), TS_ERR_INVALID_ARG);
  CHECK(b == NULL, "no executor on error");
  CHECK_OK(ts_attn_bwd_create(&b, NULL, pl, TS_ATTN_BWD_AUTO));
  CHECK(ts_attn_bwd_get_reduce(b) != TS_ATTN_BWD_AUTO && ts_attn_bwd_workspace_bytes(b) > 0, "AUTO resolved, bytes counted");
  CHECK_STATUS(ts_attn_backward(NULL, NULL, D.q, D.k, D.v, O, D.g, lse, NULL, g[0], g[1], g[2], 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_backward(NULL, b, D.q, D.k, D.v, O, D.g, lse, NULL, g[0], g[1], g[2], 1, 1, 40, 17), TS_ERR_SHAPE);
  CHECK_STATUS(ts_attn_backward(NULL, b, D.q, NULL, D.v, O, D.g, lse, NULL, g[0], g[1], g[2], 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_backward(NULL, b, D.q, D.k, D.v, O, D.g, NULL, NULL, g[0], g[1], g[2], 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_backward(NULL, b, D.q, D.k, D.v, O, D.g, lse, NULL, g[0], NULL, g[2], 1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_backward(NULL, b, D.q, D.k, D.v, O, D.g, lse, NULL, g[0], g[1], g[2], -1, 1, 40, 16), TS_ERR_INVALID_ARG);
  CHECK_ERR_CONTAINS(ts_attn_backward(NULL, b, D.q, D.k, D.v, O, D.g, lse, sc2, g[0], g[1], g[2], 1, 1, 40, 16),
                     "not written by ts_attn_execute_train with this executor's plan");
  CHECK_STATUS(ts_attn_backward_bf16(NULL, b, D.qb, D.kb, NULL, O, D.g, lse, NULL, g[0], g[1], g[2], 1, 1, 40, 16),
               TS_ERR_INVALID_ARG);
  tst_poison(g[0], (size_t)t);
  CHECK_OK(ts_attn_backward(NULL, b, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, 40, 16));
  CHECK(isnan(g[0][0]), "batch 0 must not write");
  ts_attn_bwd_reduce r;
  CHECK_OK(ts_attn_bwd_reduce_parse("atomic", &r));
  CHECK(r == TS_ATTN_BWD_ATOMIC && !strcmp(ts_attn_bwd_reduce_name(TS_ATTN_BWD_PARTIALS), "partials"), "names");
  CHECK_ERR_CONTAINS(ts_attn_bwd_reduce_parse("sum", &r), "'sum'");
  ts_attn_bwd_destroy(b);
  ts_attn_bwd_destroy(NULL);
  for (int x = 0; x < 3; x++) ts_free(g[x]);
  ts_free(O), ts_free(lse), ts_free(sc2);
  ts_attn_plan_destroy(pl), ts_attn_plan_destroy(pl2);
  ts_attn_schedule_free(&s), ts_attn_schedule_free(&s2);
  data_free(&D);
  ts_free(m.bits), ts_free(m2.bits);
}

int main(void) {
  test_errors();
  test_edges();
  test_compact_full();
  test_fd();
  test_sweep();
  printf("worst err / tol: dQ %.3g, dK %.3g, dV %.3g\n", g_worst[0], g_worst[1], g_worst[2]);
  return tst_finish();
}
