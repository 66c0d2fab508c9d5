/* CUDA attention: GPU results against ts_attn_reference, and the host side everywhere.
 *
 * Everywhere, without a device too:
 *   - the flattened plans (units / chunks / mask words the kernels walk) are checked by a plain C
 *     re-implementation of the walk (same chunk order and mask addressing, fp32 online softmax);
 *   - the kernels' device code itself (src/cuda/attn_tile.cuh: thread mapping, shared-memory
 *     layout, barriers, warp shuffles) runs on 128 CPU fibers (emu_kernels.cpp) on a subset;
 *   - without a device, every API call must return TS_ERR_UNSUPPORTED naming the missing device,
 *     and the GPU part prints "SKIPPED (part): no CUDA device: the GPU part".
 *
 * Tolerance, as a fraction of max|V| (= 1): 5e-5. Both the GPU kernels and the emulation
 * accumulate in fp32 over at most a few hundred keys with exp2f (<= 2 ulp); the CPU kernels,
 * with the same arithmetic, measure 4e-6 (attn.h), so 5e-5 leaves an order of magnitude while a
 * wrong mask bit, a lost chunk or a row written twice gives errors of 1e-2 and more. bf16 runs are
 * compared with the reference on the same bf16-rounded inputs (the kernels widen them exactly). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "cuda/attn_cuda_internal.h"
#include "tessera/attn_cuda.h"
#include "../attn_test_blocks.h"
#include "tst.h"

#define TOL 5e-5

/* emu_kernels.cpp: the device block walks on CPU fibers (bh = batch * heads). */
int ts__cuda_emulate(const ts__cuda_flat *f, int fixed, int cls_fixed, int bf16, const void *Q, const void *K, const void *V,
                     float *O, int64_t bh);

/* ---- masks ---------------------------------------------------------------------------------- */

static ts_bitmap mk(int64_t n) {
  ts_bitmap b;
  CHECK_OK(ts_bitmap_alloc(&b, n, n));
  return b;
}

static ts_bitmap mask_band(int64_t n, int64_t w, int64_t global) {
  ts_bitmap b = mk(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (llabs(i - j) <= w || i < global || j < global) ts_bitmap_set(&b, i, j, true);
  return b;
}

static ts_bitmap mask_window2d(int64_t h, int64_t w, int64_t k) {
  ts_bitmap b = mk(h * w);
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      for (int64_t y2 = 0; y2 < h; y2++)
        for (int64_t x2 = 0; x2 < w; x2++)
          if (llabs(y - y2) <= k / 2 && llabs(x - x2) <= k / 2) ts_bitmap_set(&b, y * w + x, y2 * w + x2, true);
  return b;
}

/* Random cells plus a band, every 5th row and the last 20 rows empty (whole empty tiles). */
static ts_bitmap mask_holes(int64_t n, double density, uint64_t seed) {
  ts_bitmap b = mk(n);
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (ts_rng_uniform(&r) < density || llabs(i - j) <= 6) ts_bitmap_set(&b, i, j, true);
  for (int64_t i = 0; i < n; i++)
    if (i % 5 == 0 || i >= n - 20)
      for (int64_t j = 0; j < n; j++) ts_bitmap_set(&b, i, j, false);
  return b;
}

/* A band of half-width 3, rows 0 and 5 attending every key, row 2 none: the groups holding rows 0
 * and 5 meet every key, far more chunks than the rest, so gather plans split them. */
static ts_bitmap mask_globalrows(int64_t n) {
  ts_bitmap b = mask_band(n, 3, 0);
  for (int64_t j = 0; j < n; j++) ts_bitmap_set(&b, 0, j, true), ts_bitmap_set(&b, 5, j, true), ts_bitmap_set(&b, 2, j, false);
  return b;
}

static ts_bitmap mask_blockdiag(int64_t n, int64_t blk) {
  ts_bitmap b = mk(n);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (i / blk == j / blk) ts_bitmap_set(&b, i, j, true);
  return b;
}


/* ---- data ----------------------------------------------------------------------------------- */

typedef struct data {
  int64_t B, H, n, d;
  size_t total;
  float *q, *k, *v, *o, *ref, *refb;
  uint16_t *qb, *kb, *vb;
} data;

static void data_make(data *D, int64_t B, int64_t H, const ts_bitmap *m, int64_t d, uint64_t seed) {
  D->B = B, D->H = H, D->n = m->rows, D->d = d, D->total = (size_t)(B * H * m->rows * d);
  size_t t = D->total;
  D->q = ts_malloc(t * 4), D->k = ts_malloc(t * 4), D->v = ts_malloc(t * 4);
  D->ref = ts_malloc(t * 4), D->refb = ts_malloc(t * 4), D->o = tst_alloc_guarded(t);
  D->qb = ts_malloc(t * 2), D->kb = ts_malloc(t * 2), D->vb = ts_malloc(t * 2);
  tst_fill_uniform(D->q, t, seed, -3.0f, 3.0f);
  tst_fill_uniform(D->k, t, seed + 1, -1.0f, 1.0f);
  tst_fill_uniform(D->v, t, seed + 2, -1.0f, 1.0f);
  CHECK_OK(ts_attn_reference(m, D->q, D->k, D->v, D->ref, B, H, D->n, d));
  ts_f32_to_bf16_array(D->q, D->qb, t);
  ts_f32_to_bf16_array(D->k, D->kb, t);
  ts_f32_to_bf16_array(D->v, D->vb, t);
  float *q2 = ts_malloc(t * 4), *k2 = ts_malloc(t * 4), *v2 = ts_malloc(t * 4);
  ts_bf16_to_f32_array(D->qb, q2, t);
  ts_bf16_to_f32_array(D->kb, k2, t);
  ts_bf16_to_f32_array(D->vb, v2, t);
  CHECK_OK(ts_attn_reference(m, q2, k2, v2, D->refb, B, H, D->n, d));
  ts_free(q2), ts_free(k2), ts_free(v2);
}

static void data_free(data *D) {
  ts_free(D->q), ts_free(D->k), ts_free(D->v), ts_free(D->o), ts_free(D->ref), ts_free(D->refb);
  ts_free(D->qb), ts_free(D->kb), ts_free(D->vb);
}

static double worst;

/* The first `count` outputs against ref; the guard bytes after all of O. */
static void compare_n(const data *D, const float *ref, size_t count, const char *what) {
  double e = tst_max_abs_diff(D->o, ref, count);
  if (e > worst) worst = e;
  CHECK(e <= TOL, "%s: max |err| = %.3g > %.3g", what, e, TOL);
  CHECK(tst_guard_ok(D->o, D->total), "%s: guard bytes after O overwritten", what);
}

static void compare(const data *D, const float *ref, const char *what) { compare_n(D, ref, D->total, what); }

/* ---- emulation of the kernels' walk ----------------------------------------------------------- */

/* Key column of a chunk's j-th column: listed (gather plans) or consecutive. */
static int32_t key_of(const ts__cuda_flat *f, const ts__cuda_chunk *ch, int32_t j) {
  return f->cols ? f->cols[ch->j0 + j] : ch->j0 + j;
}

/* One chunk on rows of a unit: the arithmetic of attn_tile.cuh in the same order per row. */
static void emu_chunk(const ts__cuda_flat *f, const ts__cuda_chunk *ch, const float *Q, const float *K, const float *V,
                      int32_t r0, float c, float *m, float *l, float *o) {
  int64_t d = f->d;
  float s[64];
  for (int32_t i = 0; i < ch->nr; i++) {
    const float *q = Q + (int64_t)(r0 + ch->i0 + i) * d;
    int32_t r = ch->ro + i, ii = ch->i0 + i;
    float mx = -INFINITY;
    for (int32_t j = 0; j < ch->nc; j++) {
      const float *k = K + (int64_t)key_of(f, ch, j) * d;
      float acc = 0;
      for (int64_t e = 0; e < d; e++) acc = fmaf(q[e] * c, k[e], acc);
      int allowed = ch->moff < 0 || ((f->mbits[ch->moff + (int64_t)j * ch->nv + (r >> 4)] >> (r & 15)) & 1u);
      s[j] = allowed ? acc : -INFINITY;
      mx = fmaxf(mx, s[j]);
    }
    float mn = fmaxf(m[ii], mx), sum = 0, al = exp2f(m[ii] - mn);
    for (int32_t j = 0; j < ch->nc; j++) s[j] = exp2f(s[j] - mn), sum += s[j];
    l[ii] = l[ii] * al + sum, m[ii] = mn;
    for (int64_t e = 0; e < d; e++) {
      float acc = o[ii * d + e] * al;
      for (int32_t j = 0; j < ch->nc; j++) acc = fmaf(s[j], V[(int64_t)key_of(f, ch, j) * d + e], acc);
      o[ii * d + e] = acc;
    }
  }
}

/* Runs the flattened plan on the CPU; fixed: tiles cut into RB x CB chunks as attn_fixed.cu does.
 * Split parts keep (m, l, unnormalized o) per row; each split group's rows are then merged here
 * by the same formula the combine kernel uses, written out separately. */
static void emulate(const ts__cuda_flat *f, int fixed, const float *Q, const float *K, const float *V, float *O, int64_t BH) {
  int64_t n = f->n, d = f->d;
  float c = 1.4426950408889634f / sqrtf((float)d);
  float *m = ts_malloc(256 * 4), *l = ts_malloc(256 * 4), *o = ts_malloc((size_t)(256 * d) * 4);
  const int64_t np = f->nparts;
  float *pm = ts_malloc((size_t)(np * 64 + 1) * 4), *pl = ts_malloc((size_t)(np * 64 + 1) * 4);
  float *po = ts_malloc((size_t)(np * 64 * d + 1) * 4);
  for (int64_t bh = 0; bh < BH; bh++) {
    const float *q = Q + bh * n * d, *k = K + bh * n * d, *v = V + bh * n * d;
    for (int cl = 0; cl < TS__CUDA_NCLASS; cl++) {
      int32_t RB = ts__cuda_class_rb[cl], CB = ts__cuda_class_cb[cl];
      for (int64_t ui = f->cls[cl].u0; ui < f->cls[cl].u0 + f->cls[cl].nu; ui++) {
        const ts__cuda_unit *u = &f->units[ui];
        CHECK(u->rows >= 1 && u->rows <= f->cls[cl].g, "unit %lld: %d rows, group %d", (long long)ui, u->rows, f->cls[cl].g);
        for (int32_t i = 0; i < u->rows; i++) m[i] = -3.0e38f, l[i] = 0;
        memset(o, 0, (size_t)(u->rows * d) * 4);
        for (int32_t qi = 0; qi < u->nchunks; qi++) {
          const ts__cuda_chunk *t = &f->chunks[u->c0 + qi];
          if (!fixed) {
            CHECK(t->nr <= RB && t->nc <= CB && t->i0 + t->nr <= u->rows, "chunk %lld too large", (long long)(u->c0 + qi));
            emu_chunk(f, t, q, k, v, u->r0, c, m, l, o);
            continue;
          }
          for (int32_t jj = 0; jj < t->nc; jj += CB)
            for (int32_t ii = 0; ii < t->nr; ii += RB) {
              ts__cuda_chunk ch = {.i0 = t->i0 + ii, .nr = t->nr - ii < RB ? t->nr - ii : RB, .j0 = t->j0 + jj,
                                   .nc = t->nc - jj < CB ? t->nc - jj : CB, .nv = t->nv, .ro = t->ro + ii,
                                   .moff = t->moff < 0 ? -1 : t->moff + (int64_t)jj * t->nv};
              emu_chunk(f, &ch, q, k, v, u->r0, c, m, l, o);
            }
        }
        if (u->part >= 0) {
          CHECK(u->part < np, "unit %lld: part %d of %lld", (long long)ui, u->part, (long long)np);
          if (u->part >= np) continue;
          for (int32_t i = 0; i < u->rows; i++) {
            pm[u->part * 64 + i] = m[i], pl[u->part * 64 + i] = l[i];
            memcpy(po + (u->part * 64 + i) * d, o + i * d, (size_t)d * 4);
          }
          continue;
        }
        for (int32_t i = 0; i < u->rows; i++)
          for (int64_t e = 0; e < d; e++) O[bh * n * d + (int64_t)(u->r0 + i) * d + e] = l[i] > 0 ? o[i * d + e] / l[i] : 0.0f;
      }
    }
    for (int64_t sp = 0; sp < f->nsplits; sp++) {
      const ts__cuda_split *S = &f->splits[sp];
      for (int32_t i = 0; i < S->rows; i++) {
        float mx = -3.0e38f, L = 0;
        for (int32_t p = S->p0; p < S->p0 + S->np; p++) mx = fmaxf(mx, pm[p * 64 + i]);
        for (int32_t p = S->p0; p < S->p0 + S->np; p++) L += pl[p * 64 + i] * exp2f(pm[p * 64 + i] - mx);
        for (int64_t e = 0; e < d; e++) {
          float acc = 0;
          for (int32_t p = S->p0; p < S->p0 + S->np; p++) acc += po[(p * 64 + i) * d + e] * exp2f(pm[p * 64 + i] - mx);
          O[bh * n * d + (int64_t)(S->r0 + i) * d + e] = L > 0 ? acc / L : 0.0f;
        }
      }
    }
  }
  ts_free(m), ts_free(l), ts_free(o), ts_free(pm), ts_free(pl), ts_free(po);
}

static ts_attn_plan *cpu_plan(const ts_attn_schedule *s, const ts_bitmap *m, int64_t d) {
  ts_context *ctx;
  ts_attn_plan *pl = NULL;
  CHECK_OK(ts_context_create(&ctx, 1));
  CHECK_OK(ts_attn_plan_create(&pl, ctx, s, m, d));
  ts_context_destroy(ctx);
  return pl;
}

/* A flattened plan on D: the C walk on every head, then with fibers the device code on CPU fibers
 * (slow: head 0 only): 1 fp32, 2 fp32 and bf16. */
static void run_flat(const ts__cuda_flat *f, int fixed, int cls, data *D, int fibers, const char *what) {
  tst_poison(D->o, D->total);
  emulate(f, fixed, D->q, D->k, D->v, D->o, D->B * D->H);
  compare(D, D->ref, what);
  if (!fibers) return; /* head 0 only: the fibers are slow, and the head offsets are plain arithmetic */
  char w2[240];
  size_t head = (size_t)(D->n * D->d);
  tst_poison(D->o, D->total);
  CHECK(ts__cuda_emulate(f, fixed, cls, 0, D->q, D->k, D->v, D->o, 1) == 0, "%s: fibers: out of memory", what);
  snprintf(w2, sizeof w2, "%s (device code on fibers, fp32)", what);
  compare_n(D, D->ref, head, w2);
  CHECK(isnan(D->o[head]), "%s: fibers wrote past head 0", what);
  if (fibers == 2) { /* bf16 differs only in load_elem: on a subset */
    tst_poison(D->o, D->total);
    CHECK(ts__cuda_emulate(f, fixed, cls, 1, D->qb, D->kb, D->vb, D->o, 1) == 0, "%s: fibers: out of memory", what);
    snprintf(w2, sizeof w2, "%s (device code on fibers, bf16)", what);
    compare_n(D, D->refb, head, w2);
  }
}

/* The CPU plan of s on m flattened (fixed: by class cls; else variable-tile under limit), then run_flat. */
static void emu_case(const ts_attn_schedule *s, const ts_bitmap *m, data *D, int fixed, int cls, size_t limit, int fibers,
                     const char *what) {
  ts_attn_plan *pl = cpu_plan(s, m, D->d);
  if (!pl) return;
  ts__cuda_flat f;
  ts_status st = fixed ? ts__cuda_flatten_fixed(pl, cls, &f) : ts__cuda_flatten_vartile(pl, limit, &f);
  CHECK(st == TS_OK, "%s: flatten: %s", what, ts_last_error());
  if (st == TS_OK) {
    run_flat(&f, fixed, cls, D, fibers, what);
    ts__cuda_flat_free(&f);
  }
  ts_attn_plan_destroy(pl);
}

/* Variable-tile schedules over m: blocks + residue (panels of 48 and 200 rows), blocks without the
 * mask, block skip with odd tiles. */
static int vt_schedules(const ts_bitmap *m, int64_t d, ts_attn_schedule *out, const char **names) {
  ts_block bl[512];
  ts_attn_tile tiles[512];
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu), dd = (int)d, k = 0;
  int64_t nb = attn_test_blocks(m, 8, bl, 512);
  CHECK_OK(ts_attn_choose_tiles(bl, nb, menu, nmenu, NULL, &dd, tiles));
  ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
  bo.panel_rows = 48;
  names[k] = "blocks+residue p48";
  CHECK_OK(ts_attn_schedule_from_blocks(&out[k++], m->rows, bl, tiles, nb, m, &bo));
  bo.panel_rows = 200;
  bo.residue = (ts_attn_tile){128, 16};
  names[k] = "blocks+residue p200";
  CHECK_OK(ts_attn_schedule_from_blocks(&out[k++], m->rows, bl, tiles, nb, m, &bo));
  names[k] = "blocks, no mask";
  CHECK_OK(ts_attn_schedule_from_blocks(&out[k++], m->rows, bl, tiles, nb, NULL, NULL));
  names[k] = "blockskip 5x7";
  CHECK_OK(ts_attn_schedule_blockskip(&out[k++], m->rows, 5, 7));
  names[k] = "blockskip 128x256";
  CHECK_OK(ts_attn_schedule_blockskip(&out[k++], m->rows, 128, 256));
  names[k] = "blockskip 32x32"; /* the 32x32 chunk shape */
  CHECK_OK(ts_attn_schedule_blockskip(&out[k++], m->rows, 32, 32));
  names[k] = "blockskip 24x48"; /* the 32x64 chunk shape */
  CHECK_OK(ts_attn_schedule_blockskip(&out[k++], m->rows, 24, 48));
  /* passes, every panel one segment of one kind over all keys: compact (4-key runs and single keys,
   * the items' keys listed in plan->runs; 128 keys per item, the scheduler's default) and DIAG (each
   * row meets its keys at listed offsets: chunks of the offsets' diagonals with mask words of their
   * own; 64 and 5 offsets per item) */
  const struct { const char *name; int32_t kind, br, bc; } pass[] = {{"compact 16x128", TS_ATTN_SEG_COMPACT, 16, 128},
                                                                      {"compact 8x16", TS_ATTN_SEG_COMPACT, 8, 16},
                                                                      {"diag 16x64", TS_ATTN_SEG_DIAG, 16, 64},
                                                                      {"diag 16x5", TS_ATTN_SEG_DIAG, 16, 5}};
  for (size_t c = 0; c < sizeof pass / sizeof pass[0]; c++) {
    names[k] = pass[c].name;
    CHECK_OK(ts_attn_schedule_blockskip(&out[k], m->rows, pass[c].br, m->rows));
    for (int64_t g = 0; g < out[k].nsegs; g++) out[k].segs[g].kind = pass[c].kind, out[k].segs[g].bc = pass[c].bc;
    k++;
  }
  return k;
}

typedef struct mcase {
  const char *name;
  ts_bitmap m;
} mcase;

/* Which emulated cases also run on fibers (slow): two masks, each at one head dimension (d = 64:
 * the constant path, d = 33: the generic one), every variable-tile schedule (all four chunk
 * shapes, row groups) and the fixed 32x32, 128x128 (cut into 64x64 chunks) and dense tiles. */
#define FIBERS(mi, di) ((mi) == 0 && (di) == 0 ? 1 : (mi) == 2 && (di) == 1 ? 2 : 0)

static const int32_t fixed_tiles[][3] = {{32, 32, 0}, {64, 64, 0}, {128, 128, 0}, {16, 64, 0}, {64, 64, 1}};

static void test_emulation(mcase *ms, int nm) {
  char what[160];
  for (int mi = 0; mi < nm; mi++) {
    const int64_t dims[] = {64, 33};
    for (int di = 0; di < 2; di++) {
      data D;
      data_make(&D, 1, 2, &ms[mi].m, dims[di], 500 + 7 * mi + di);
      ts_attn_schedule s[12];
      const char *names[12];
      int ns = vt_schedules(&ms[mi].m, D.d, s, names);
      for (int k = 0; k < ns; k++) {
        snprintf(what, sizeof what, "emulated vartile %s %s d=%lld", ms[mi].name, names[k], (long long)D.d);
        emu_case(&s[k], &ms[mi].m, &D, 0, 0, 227 * 1024, k == 3 ? 0 : FIBERS(mi, di), what); /* not 5x7: 30 blocks */
        /* a small shared-memory budget: panels split into row groups of 16..48 rows */
        size_t small = ts__cuda_smem_bytes(48, 64, 64, D.d);
        snprintf(what, sizeof what, "emulated vartile %s %s d=%lld small smem", ms[mi].name, names[k], (long long)D.d);
        emu_case(&s[k], &ms[mi].m, &D, 0, 0, small, 0, what);
        ts_attn_schedule_free(&s[k]);
      }
      for (size_t t = 0; t < sizeof fixed_tiles / sizeof fixed_tiles[0]; t++) {
        int32_t br = fixed_tiles[t][0], bc = fixed_tiles[t][1];
        ts_attn_schedule fs;
        CHECK_OK(fixed_tiles[t][2] ? ts_attn_schedule_dense(&fs, D.n, br, bc) : ts_attn_schedule_blockskip(&fs, D.n, br, bc));
        snprintf(what, sizeof what, "emulated fixed %s %dx%d%s d=%lld", ms[mi].name, br, bc, fixed_tiles[t][2] ? " dense" : "",
                 (long long)D.d);
        emu_case(&fs, &ms[mi].m, &D, 1, br <= 32 && bc <= 32 ? 1 : 3, 0, t == 0 || t == 2 || t == 4 ? FIBERS(mi, di) : 0, what);
        ts_attn_schedule_free(&fs);
      }
      data_free(&D);
    }
  }
  /* d too large for the budget: a clear error, not a crash */
  ts_attn_schedule s;
  CHECK_OK(ts_attn_schedule_blockskip(&s, ms[0].m.rows, 64, 64));
  ts_attn_plan *pl = cpu_plan(&s, &ms[0].m, 64);
  ts__cuda_flat f;
  if (pl) CHECK_ERR_CONTAINS(ts__cuda_flatten_vartile(pl, 1024, &f), "shared memory");
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s);
}

/* ---- gather plans --------------------------------------------------------------------------------- */

/* CHECK that st is TS_OK; returns whether it is. */
static bool ok_status(ts_status st, const char *what) {
  CHECK(st == TS_OK, "%s: %s: %s", what, ts_strerror(st), ts_last_error());
  return st == TS_OK;
}

/* Costs that make class `only` the cheapest by far (-1: the default table). */
static void costs_forcing(ts_attn_cuda_costs *c, int64_t d, int only) {
  ts_attn_cuda_costs_default(c, d);
  if (only < 0) return;
  for (int k = 0; k < 4; k++) c->chunk_ns[k] = k == only ? 1.0 : 1e6, c->unit_ns[k] = k == only ? 0.0 : 1e6;
}

/* Structure of a gather flat: units cover every row once with the class's group size; chunks fit
 * their class, list ascending keys, and cover every allowed cell exactly once (a masked chunk's
 * bits are exactly the mask's cells; a full chunk's cells are all allowed); the stats count them. */
static void check_gather_flat(const ts__cuda_flat *f, const ts_bitmap *m, const ts_attn_stats *st, const char *what) {
  const int64_t n = m->rows;
  int32_t *rows = calloc((size_t)n, sizeof *rows), *parts = calloc((size_t)f->nparts + 1, sizeof *parts);
  int64_t covered = 0, cells = 0;
  for (int64_t sp = 0; sp < f->nsplits; sp++) { /* a split's rows count once; its parts are checked below */
    const ts__cuda_split *S = &f->splits[sp];
    CHECK(S->np >= 2 && S->p0 >= 0 && S->p0 + S->np <= f->nparts && S->rows >= 1 && S->r0 + S->rows <= n, "%s: split %lld", what,
          (long long)sp);
    for (int32_t i = 0; i < S->rows && S->r0 + i < n; i++) rows[S->r0 + i]++;
  }
  static const int32_t gk[4] = {16, 32, 32, 64};
  for (int k = 0; k < 4; k++) {
    CHECK(f->cls[k].nu == 0 || f->cls[k].g == gk[k], "%s: class %d group %d", what, k, f->cls[k].g);
    for (int64_t ui = f->cls[k].u0; ui < f->cls[k].u0 + f->cls[k].nu; ui++) {
      const ts__cuda_unit *u = &f->units[ui];
      CHECK(u->rows >= 1 && u->rows <= gk[k] && u->r0 >= 0 && u->r0 + u->rows <= n, "%s: unit %lld rows", what, (long long)ui);
      if (ui > f->cls[k].u0) CHECK(u->nchunks <= u[-1].nchunks, "%s: units of class %d not largest first", what, k);
      if (u->part < 0)
        for (int32_t i = 0; i < u->rows && u->r0 + i < n; i++) rows[u->r0 + i]++;
      else
        parts[u->part < f->nparts && u->part >= 0 ? u->part : 0]++;
      for (int32_t q = 0; q < u->nchunks; q++) {
        const ts__cuda_chunk *c = &f->chunks[u->c0 + q];
        CHECK(c->nr >= 1 && c->nr <= ts__cuda_class_rb[k] && c->nc >= 1 && c->nc <= ts__cuda_class_cb[k] &&
                  c->i0 + c->nr <= u->rows && c->j0 >= 0 && c->j0 + c->nc <= f->ncols,
              "%s: chunk %lld out of its class or unit", what, (long long)(u->c0 + q));
        cells += (int64_t)c->nr * c->nc;
        for (int32_t j = 0; j < c->nc; j++) {
          const int32_t key = f->cols[c->j0 + j];
          CHECK(key >= 0 && key < n && (j == 0 || key > f->cols[c->j0 + j - 1]), "%s: key list not ascending", what);
          for (int32_t r = 0; r < c->nr; r++) {
            const bool allowed = ts_bitmap_get(m, u->r0 + c->i0 + r, key);
            const bool on = c->moff < 0 || ((f->mbits[c->moff + (int64_t)j * c->nv + (c->ro + r) / 16] >> ((c->ro + r) % 16)) & 1u);
            CHECK(on == allowed, "%s: cell (%d, %d): bit %d, mask %d", what, u->r0 + c->i0 + r, key, on, allowed);
            covered += on;
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < n; i++) CHECK(rows[i] == 1, "%s: row %lld in %d units", what, (long long)i, rows[i]);
  for (int64_t p = 0; p < f->nparts; p++) CHECK(parts[p] == 1, "%s: part slot %lld used %d times", what, (long long)p, parts[p]);
  for (int64_t sp = 0; sp < f->nsplits; sp++) /* every part of a split runs the split's rows */
    for (int64_t ui = 0; ui < f->nunits; ui++) {
      const ts__cuda_unit *u = &f->units[ui];
      if (u->part >= f->splits[sp].p0 && u->part < f->splits[sp].p0 + f->splits[sp].np)
        CHECK(u->r0 == f->splits[sp].r0 && u->rows == f->splits[sp].rows, "%s: part %d rows", what, u->part);
    }
  CHECK(covered == ts_bitmap_count(m), "%s: %lld cells covered, %lld allowed", what, (long long)covered,
        (long long)ts_bitmap_count(m));
  CHECK(st->cells == cells && st->nnz == ts_bitmap_count(m) && st->segments == f->nunits &&
            st->panels == f->nunits - f->nparts + f->nsplits, "%s: stats", what);
  free(rows), free(parts);
}

/* Every option forced in turn (and the default table), C walk always, device code on fibers for a subset. */
static void test_gather(mcase *ms, int nm) {
  char what[200];
  for (int mi = 0; mi < nm; mi++) {
    const int64_t dims[] = {64, 33};
    for (int di = 0; di < 2; di++) {
      data D;
      data_make(&D, 1, 2, &ms[mi].m, dims[di], 700 + 5 * mi + di);
      for (int only = -1; only < 4; only++) {
        ts_attn_cuda_costs c;
        costs_forcing(&c, D.d, only);
        ts__cuda_flat f;
        ts_attn_stats st;
        snprintf(what, sizeof what, "gather %s d=%lld class %d", ms[mi].name, (long long)D.d, only);
        if (!ok_status(ts__cuda_flatten_gather(&ms[mi].m, D.d, 227 * 1024, &c, &f, &st), what)) continue;
        check_gather_flat(&f, &ms[mi].m, &st, what);
        if (only >= 0)
          for (int k = 0; k < 4; k++) CHECK(k == only || f.cls[k].nu == 0, "%s: units of class %d", what, k);
        if (mi == 5 && only == 1)
          CHECK(f.nsplits >= 1 && f.nparts >= 2, "%s: the global rows' group not split (%lld splits)", what, (long long)f.nsplits);
        const int fib = (mi == 0 && di == 0) || (mi == 5 && (only < 0 || only == 1)) ? 1 : (mi == 2 && di == 1 && only < 0) ? 2 : 0;
        run_flat(&f, 0, 0, &D, fib, what);
        ts__cuda_flat_free(&f);
      }
      /* a shared-memory budget without room for 64-row groups: never class 3 */
      ts__cuda_flat f;
      ts_attn_stats st;
      ts_attn_cuda_costs c;
      costs_forcing(&c, D.d, 3);
      snprintf(what, sizeof what, "gather %s d=%lld small smem", ms[mi].name, (long long)D.d);
      if (ok_status(ts__cuda_flatten_gather(&ms[mi].m, D.d, ts__cuda_smem_bytes(32, 32, 64, D.d), &c, &f, &st), what)) {
        check_gather_flat(&f, &ms[mi].m, &st, what);
        CHECK(f.cls[3].nu == 0, "%s: class 3 used", what);
        run_flat(&f, 0, 0, &D, 0, what);
        ts__cuda_flat_free(&f);
      }
      data_free(&D);
    }
  }
  /* the default costs pick the cheapest option: on a block diagonal of 32-row blocks, 32-row groups with
   * 32 x 32 chunks compute exactly the blocks, unmasked (64-row groups would compute 2x the cells,
   * 16-row groups 16 x 64 chunks of which 16 columns are used) */
  ts_bitmap bd = mask_blockdiag(128, 32);
  ts__cuda_flat f;
  ts_attn_stats st;
  if (ok_status(ts__cuda_flatten_gather(&bd, 64, 227 * 1024, NULL, &f, &st), "block diagonal")) {
    CHECK(f.cls[1].nu == 4 && f.nchunks == 4 && st.tiles_full == 4 && st.work_ratio == 1.0,
          "block diagonal: %lld units of 32 rows, %lld chunks, %lld full, ratio %.2f", (long long)f.cls[1].nu,
          (long long)f.nchunks, (long long)st.tiles_full, st.work_ratio);
    ts__cuda_flat_free(&f);
  }
  ts_bitmap_free(&bd);
  /* errors */
  ts_attn_cuda_costs c;
  ts_attn_cuda_costs_default(&c, 64);
  CHECK_ERR_CONTAINS(ts__cuda_flatten_gather(NULL, 64, 227 * 1024, NULL, &f, NULL), "square");
  CHECK_ERR_CONTAINS(ts__cuda_flatten_gather(&ms[0].m, 0, 227 * 1024, NULL, &f, NULL), "head dimension");
  CHECK_ERR_CONTAINS(ts__cuda_flatten_gather(&ms[0].m, 300, 227 * 1024, NULL, &f, NULL), "head dimension");
  CHECK_ERR_CONTAINS(ts__cuda_flatten_gather(&ms[0].m, 64, 1024, NULL, &f, NULL), "shared memory");
  c.chunk_ns[2] = NAN;
  CHECK_ERR_CONTAINS(ts__cuda_flatten_gather(&ms[0].m, 64, 227 * 1024, &c, &f, NULL), "negative or NaN");
}

/* ---- the costs file --------------------------------------------------------------------------- */

static void write_str(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static void test_costs_file(void) {
  char path[4200], dir[4096];
  CHECK_OK(ts_attn_cuda_costs_path(64, true, path, sizeof path));
  CHECK_OK(ts_cache_dir(dir, sizeof dir));
  CHECK(strstr(path, dir) == path && strstr(path, "/attn-cuda-costs/d64-bf16.json"), "path '%s'", path);
  /* round trip of the payload at an explicit path (the store keeps it inside an envelope) */
  snprintf(path, sizeof path, "%s/costs_rt.json", dir);
  ts_attn_cuda_costs c, r;
  ts_attn_cuda_costs_default(&c, 64);
  c.bf16 = true, c.measured = true, c.chunk_ns[2] = 61.25, c.unit_ns[0] = 0;
  snprintf(c.device, sizeof c.device, "Test GPU (sm_90, 1 SMs, 1.0 GiB)");
  snprintf(c.date, sizeof c.date, "2026-12-04T16:00:00Z");
  CHECK_OK(ts_attn_cuda_costs_save(&c, path));
  memset(&r, 0, sizeof r);
  CHECK_OK(ts_attn_cuda_costs_load(path, &r));
  CHECK(r.d == 64 && r.bf16 && r.measured && !strcmp(r.device, c.device) && !strcmp(r.date, c.date), "round trip: header fields");
  for (int k = 0; k < 4; k++)
    CHECK(r.chunk_ns[k] == c.chunk_ns[k] && r.unit_ns[k] == c.unit_ns[k], "round trip: class %d costs", k);
  /* absent, malformed and newer files: clear errors naming the field, the output untouched */
  char bad[4200];
  snprintf(bad, sizeof bad, "%s/costs_bad.json", dir);
  CHECK_STATUS(ts_attn_cuda_costs_load("/nonexistent/costs.json", &r), TS_ERR_NOT_FOUND);
  const char *head = "{\"format\": \"tessera cuda attention costs\", \"version\": 1, \"device\": \"x\", "
                     "\"date\": \"2026-12-04T16:00:00Z\", \"d\": 64, "
                     "\"dtype\": \"f32\", \"measured\": true, \"classes\": [\"16x64\", \"32x32\", \"32x64\", \"64x64\"], ";
  const struct { const char *tail, *needle; } cases[] = {
      {"\"unit_ns\": [1, 2, 3, 4], \"chunk_ns\": [1, 2, 3]}", "'chunk_ns' must be an array of 4"},
      {"\"unit_ns\": [1, 2, 3, 4]}", "missing 'chunk_ns'"},
      {"\"unit_ns\": [1, 2, -3, 4], \"chunk_ns\": [1, 2, 3, 4]}", "'unit_ns'[2]"},
      {"\"unit_ns\": [1, 2, 3, \"4\"], \"chunk_ns\": [1, 2, 3, 4]}", "'unit_ns'[3]"},
      {"\"unit_ns\": [1, 2, 3, 4], \"chunk_ns\": [1, 2, 3, 1e12]}", "'chunk_ns'[3]"},
      {"\"unit_ns\": [1, 2, 3, 4], \"chunk_ns\": [1, 2, 3, 4]", "invalid JSON"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", head, cases[i].tail);
    write_str(bad, text);
    r.d = -7;
    CHECK_ERR_CONTAINS(ts_attn_cuda_costs_load(bad, &r), cases[i].needle);
    CHECK(r.d == -7, "case %zu: output changed on error", i);
  }
  const struct { const char *text, *needle; ts_status code; } whole[] = {
      {"[1, 2]", "expected a JSON object", TS_ERR_FORMAT},
      {"{\"format\": \"tessera machine profile\", \"version\": 1}", "'format'", TS_ERR_FORMAT},
      {"{\"format\": \"tessera cuda attention costs\", \"version\": 9}", "newer", TS_ERR_UNSUPPORTED},
      {"{\"format\": \"tessera cuda attention costs\", \"version\": 1, \"device\": \"x\", \"date\": 7}", "'date'", TS_ERR_FORMAT},
      {"{\"format\": \"tessera cuda attention costs\", \"version\": 1, \"device\": \"x\", \"date\": \"\", \"d\": 0}", "'d'",
       TS_ERR_FORMAT},
      {"{\"format\": \"tessera cuda attention costs\", \"version\": 1, \"device\": \"x\", \"date\": \"\", \"d\": 64, "
       "\"dtype\": \"f16\"}", "'dtype'", TS_ERR_FORMAT},
      {"{\"format\": \"tessera cuda attention costs\", \"version\": 1, \"device\": \"x\", \"date\": \"\", \"d\": 64, "
       "\"dtype\": \"f32\", \"measured\": true, \"classes\": [\"16x64\", \"32x32\", \"64x64\", \"32x64\"]}", "'classes'[2]",
       TS_ERR_FORMAT},
  };
  for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
    write_str(bad, whole[i].text);
    ts_status st = ts_attn_cuda_costs_load(bad, &r);
    CHECK(st == whole[i].code && strstr(ts_last_error(), whole[i].needle), "file %zu: %s: %s (expected '%s')", i, ts_strerror(st),
          ts_last_error(), whole[i].needle);
  }
  remove(bad);
  remove(path);
}

/* ---- API without a device ----------------------------------------------------------------------- */

static void test_no_device(const ts_bitmap *m) {
  ts_attn_cuda_plan *p = (ts_attn_cuda_plan *)&p;
  ts_attn_schedule s;
  CHECK_OK(ts_attn_schedule_blockskip(&s, m->rows, 64, 64));
  CHECK_STATUS(ts_attn_cuda_plan_create(&p, &s, m, 64), TS_ERR_UNSUPPORTED);
  CHECK(p == NULL, "plan pointer not cleared");
  CHECK(strstr(ts_last_error(), "no CUDA device") != NULL, "message: %s", ts_last_error());
  CHECK_STATUS(ts_attn_cuda_plan_create_fixed(&p, m, 64, 64, 64, false), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_attn_cuda_plan_create_gather(&p, m, 64, NULL), TS_ERR_UNSUPPORTED);
  CHECK(p == NULL, "gather plan pointer not cleared");
  ts_attn_cuda_costs costs;
  CHECK_STATUS(ts_attn_cuda_profile(&costs, 64, false), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_attn_cuda_costs_get(&costs, 64, false, NULL), TS_ERR_UNSUPPORTED);
  float x[4] = {0};
  CHECK_STATUS(ts_attn_cuda_execute(NULL, x, x, x, x, 1, 1, m->rows, 64, NULL), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_attn_cuda_execute_host(NULL, x, x, x, x, 1, 1, m->rows, 64), TS_ERR_UNSUPPORTED);
  void *dp = &dp;
  CHECK_STATUS(ts_attn_cuda_malloc(&dp, 64), TS_ERR_UNSUPPORTED);
  CHECK(dp == NULL, "device pointer not cleared");
  CHECK_STATUS(ts_attn_cuda_to_device(x, x, 4), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_attn_cuda_synchronize(), TS_ERR_UNSUPPORTED);
  char name[256];
  CHECK_STATUS(ts_attn_cuda_device_name(name, sizeof name), TS_ERR_UNSUPPORTED);
  CHECK(strstr(name, "no CUDA device") != NULL, "device name: %s", name);
  ts_attn_cuda_plan_destroy(NULL);
  ts_attn_stats st;
  ts_attn_cuda_plan_stats(NULL, &st);
  CHECK(st.cells == 0 && st.nnz == 0, "stats of NULL not zero");
  ts_attn_schedule_free(&s);
}

/* ---- GPU ---------------------------------------------------------------------------------------- */

static void gpu_run(ts_attn_cuda_plan *p, data *D, const char *what) {
  char w2[200];
  tst_poison(D->o, D->total);
  CHECK_OK(ts_attn_cuda_execute_host(p, D->q, D->k, D->v, D->o, D->B, D->H, D->n, D->d));
  snprintf(w2, sizeof w2, "%s fp32", what);
  compare(D, D->ref, w2);
  tst_poison(D->o, D->total);
  CHECK_OK(ts_attn_cuda_execute_host_bf16(p, D->qb, D->kb, D->vb, D->o, D->B, D->H, D->n, D->d));
  snprintf(w2, sizeof w2, "%s bf16", what);
  compare(D, D->refb, w2);
}

static void test_gpu(mcase *ms, int nm) {
  char what[200];
  const int64_t dims[] = {64, 33, 80};
  for (int mi = 0; mi < nm; mi++)
    for (int di = 0; di < 3; di++) {
      data D;
      data_make(&D, 2, 3, &ms[mi].m, dims[di], 900 + 11 * mi + di);
      ts_attn_schedule s[12];
      const char *names[12];
      int ns = ms[mi].m.rows > 256 ? 0 : vt_schedules(&ms[mi].m, D.d, s, names);
      for (int k = 0; k < ns; k++) {
        ts_attn_cuda_plan *p = NULL;
        snprintf(what, sizeof what, "gpu vartile %s %s d=%lld", ms[mi].name, names[k], (long long)D.d);
        CHECK_OK(ts_attn_cuda_plan_create(&p, &s[k], &ms[mi].m, D.d));
        if (p) {
          ts_attn_stats a, b;
          ts_attn_plan *pl = cpu_plan(&s[k], &ms[mi].m, D.d);
          ts_attn_plan_stats(pl, &a);
          ts_attn_cuda_plan_stats(p, &b);
          CHECK(a.cells == b.cells && a.tiles_skipped == b.tiles_skipped, "%s: stats differ from the CPU plan", what);
          ts_attn_plan_destroy(pl);
          gpu_run(p, &D, what);
        }
        ts_attn_cuda_plan_destroy(p);
        ts_attn_schedule_free(&s[k]);
      }
      for (int only = -1; only < 4; only++) {
        ts_attn_cuda_plan *p = NULL;
        ts_attn_cuda_costs c;
        costs_forcing(&c, D.d, only);
        snprintf(what, sizeof what, "gpu gather %s class %d d=%lld", ms[mi].name, only, (long long)D.d);
        CHECK_OK(ts_attn_cuda_plan_create_gather(&p, &ms[mi].m, D.d, &c));
        if (p) gpu_run(p, &D, what);
        ts_attn_cuda_plan_destroy(p);
      }
      for (size_t t = 0; t < sizeof fixed_tiles / sizeof fixed_tiles[0]; t++) {
        ts_attn_cuda_plan *p = NULL;
        int32_t br = fixed_tiles[t][0], bc = fixed_tiles[t][1];
        snprintf(what, sizeof what, "gpu fixed %s %dx%d%s d=%lld", ms[mi].name, br, bc, fixed_tiles[t][2] ? " dense" : "",
                 (long long)D.d);
        CHECK_OK(ts_attn_cuda_plan_create_fixed(&p, &ms[mi].m, D.d, br, bc, fixed_tiles[t][2]));
        if (p) gpu_run(p, &D, what);
        ts_attn_cuda_plan_destroy(p);
      }
      data_free(&D);
    }
  /* the costs cache: measured and saved once, then served from the file */
  {
    ts_attn_cuda_costs a, b;
    bool ca = true, cb = false;
    char path[4200];
    CHECK_OK(ts_attn_cuda_costs_path(64, false, path, sizeof path));
    remove(path);
    CHECK_OK(ts_attn_cuda_costs_get(&a, 64, false, &ca));
    CHECK_OK(ts_attn_cuda_costs_get(&b, 64, false, &cb));
    CHECK(!ca && cb && a.measured && b.measured && !strcmp(a.device, b.device) && a.device[0], "costs cache: %d %d '%s'", ca, cb, a.device);
    for (int k = 0; k < 4; k++) CHECK(a.chunk_ns[k] == b.chunk_ns[k], "costs cache: class %d differs", k);
  }
  /* measured costs: every fitting class timed, finite, and a plan from them is right */
  for (int b = 0; b < 2; b++) {
    ts_attn_cuda_costs c;
    const int64_t d = b ? 33 : 64;
    if (!ok_status(ts_attn_cuda_profile(&c, d, b), "profile")) continue;
    CHECK(c.measured && c.d == d && c.bf16 == b, "profile fields");
    for (int k = 0; k < 4; k++)
      CHECK(isfinite(c.chunk_ns[k]) && c.chunk_ns[k] > 0 && isfinite(c.unit_ns[k]) && c.unit_ns[k] >= 0,
            "profile d=%lld: class %d chunk %.3g ns, unit %.3g ns", (long long)d, k, c.chunk_ns[k], c.unit_ns[k]);
    printf("profile d=%lld %s: chunk ns %.1f %.1f %.1f %.1f, unit ns %.1f %.1f %.1f %.1f\n", (long long)d, b ? "bf16" : "f32",
           c.chunk_ns[0], c.chunk_ns[1], c.chunk_ns[2], c.chunk_ns[3], c.unit_ns[0], c.unit_ns[1], c.unit_ns[2], c.unit_ns[3]);
    data D;
    data_make(&D, 2, 3, &ms[1].m, d, 77 + b);
    ts_attn_cuda_plan *p = NULL;
    CHECK_OK(ts_attn_cuda_plan_create_gather(&p, &ms[1].m, d, &c));
    if (p) gpu_run(p, &D, b ? "gpu gather, profiled costs d=33" : "gpu gather, profiled costs d=64");
    ts_attn_cuda_plan_destroy(p);
    data_free(&D);
  }
  /* errors on a live device */
  ts_attn_cuda_plan *p = NULL;
  CHECK_STATUS(ts_attn_cuda_plan_create_gather(&p, &ms[0].m, 300, NULL), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_attn_cuda_profile(NULL, 64, false), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_cuda_plan_create_fixed(&p, &ms[0].m, 64, 48, 64, false), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_cuda_plan_create_fixed(&p, &ms[0].m, 300, 64, 64, false), TS_ERR_UNSUPPORTED);
  CHECK_OK(ts_attn_cuda_plan_create_fixed(&p, &ms[0].m, 64, 64, 64, false));
  float x[4] = {0};
  CHECK_STATUS(ts_attn_cuda_execute_host(p, x, x, x, x, 1, 1, ms[0].m.rows + 1, 64), TS_ERR_SHAPE);
  CHECK_STATUS(ts_attn_cuda_execute_host(p, x, x, x, x, 1, 70000, ms[0].m.rows, 64), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_attn_cuda_execute_host(p, NULL, NULL, NULL, NULL, 0, 3, ms[0].m.rows, 64));
  ts_attn_cuda_plan_destroy(p);
  CHECK_OK(ts_attn_cuda_synchronize());
}

int main(void) {
  mcase ms[] = {
      {"band+global", mask_band(150, 9, 3)}, {"window2d", mask_window2d(11, 13, 5)}, {"holes", mask_holes(137, 0.2, 7)},
      {"blockdiag", mask_blockdiag(130, 24)}, {"n=1", mask_band(1, 0, 0)}, {"global rows", mask_globalrows(300)},
  };
  const int nm = (int)(sizeof ms / sizeof ms[0]);
  test_emulation(ms, nm - 1); /* the CPU schedules' passes need n <= 256: not "global rows" */
  test_gather(ms, nm);
  test_costs_file();
  printf("emulated kernel walk: worst |err| %.3g (tolerance %.1g)\n", worst, TOL);
  if (!ts_attn_cuda_available()) {
    test_no_device(&ms[0].m);
    tst_skip_part("no CUDA device: the GPU part");
  } else {
    char name[256];
    CHECK_OK(ts_attn_cuda_device_name(name, sizeof name));
    printf("device: %s\n", name);
    worst = 0;
    test_gpu(ms, nm);
    printf("gpu: worst |err| %.3g (tolerance %.1g)\n", worst, TOL);
  }
  for (int i = 0; i < nm; i++) ts_bitmap_free(&ms[i].m);
  return tst_finish();
}
