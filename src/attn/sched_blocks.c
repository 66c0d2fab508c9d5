/* Schedules from dense blocks: builds the panels (ts_attn_schedule_from_blocks), prices every block
 * piece for every menu tile and (sched_compact.c) every panel's compact pass at every height,
 * solves (sched.c) and writes the chosen tiles, compact passes and threads into the schedule. Also
 * prices any schedule (ts_attn_schedule_predict). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_internal.h"

/* Copies panel p's mask rows into R ([nr][W], panel-relative rows). */
static void load_rows(const ts_bitmap *mask, const ts_attn_panel *P, int64_t W, uint64_t *R) {
  for (int32_t i = 0; i < P->nr; i++) memcpy(R + (int64_t)i * W, ts_bitmap_row(mask, P->r0 + i), (size_t)W * sizeof *R);
}

/* Price of segment g of panel P as the kernels run it: its cells still unowned in R are taken
 * (cleared); per br x bc sub-tile, one cost(sub-tile rectangle, tile) when it holds such a cell
 * (every sub-tile for DENSE; COMPACT: per row sub-tile, its 4-key runs). `price` false: only take
 * the cells. u: [W] scratch. */
static double price_segment(uint64_t *R, int64_t W, const ts_attn_panel *P, const ts_attn_segment *g, ts_attn_cost_fn cost,
                            void *user, bool price, uint64_t *u) {
  if (g->kind == TS_ATTN_SEG_COMPACT) return ts__attn_price_compact_segment(R, W, P, g, cost, user, u);
  double sum = 0;
  ts_attn_tile t = {g->br, g->bc};
  for (int64_t c = g->c0; c < (int64_t)g->c0 + g->nc; c += g->bc) {
    int64_t nc = (int64_t)g->c0 + g->nc - c < g->bc ? (int64_t)g->c0 + g->nc - c : g->bc;
    for (int64_t r = g->r0; r < (int64_t)g->r0 + g->nr; r += g->br) {
      int64_t nr = (int64_t)g->r0 + g->nr - r < g->br ? (int64_t)g->r0 + g->nr - r : g->br;
      int64_t cnt = ts__attn_rect_count(R, W, r - P->r0, nr, c, nc, true);
      if (price && (cnt > 0 || g->kind == TS_ATTN_SEG_DENSE)) {
        ts_block b = {.row0 = (int32_t)r, .col0 = (int32_t)c, .rows = (int32_t)nr, .cols = (int32_t)nc, .nnz = cnt};
        sum += cost(&b, t, user);
      }
    }
  }
  return sum;
}

ts_status ts_attn_schedule_predict(const ts_attn_schedule *s, const ts_bitmap *mask, ts_attn_cost_fn cost, void *user,
                                   int threads, double *makespan, double *total) {
  TS_TRY(ts_attn_schedule_validate(s));
  if (!mask || !mask->bits || mask->rows != s->n || mask->cols != s->n)
    return ts_error(TS_ERR_SHAPE, "attn predict: the mask must be %lld x %lld", (long long)s->n, (long long)s->n);
  if (threads < 1 || threads > TS_ATTN_THREAD_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn predict: threads = %d is not in [1, %d]", threads, TS_ATTN_THREAD_MAX);
  if (!cost) cost = ts_attn_cost_default;
  int64_t W = mask->stride, nrmax = 1;
  for (int64_t p = 0; p < s->npanels; p++) nrmax = s->panels[p].nr > nrmax ? s->panels[p].nr : nrmax;
  uint64_t *R = malloc((size_t)(nrmax * W) * sizeof *R), *u = malloc((size_t)W * sizeof *u);
  double *L = malloc((size_t)s->npanels * sizeof *L);
  int64_t *piece_panel = malloc(sizeof *piece_panel);
  int32_t *thr = malloc((size_t)s->npanels * sizeof *thr);
  int tile0 = 0;
  ts_status st = TS_OK;
  if (!R || !u || !L || !piece_panel || !thr) st = ts_error(TS_ERR_OOM, "attn predict: cannot allocate panel rows");
  for (int64_t p = 0; p < s->npanels && st == TS_OK; p++) {
    const ts_attn_panel *P = &s->panels[p];
    load_rows(mask, P, W, R);
    L[p] = 0;
    for (int64_t k = 0; k < P->nseg; k++) L[p] += price_segment(R, W, P, &s->segs[P->seg0 + k], cost, user, true, u);
  }
  bool complete = s->thread != NULL;
  for (int64_t p = 0; complete && p < s->npanels; p++) complete = s->thread[p] >= 0;
  if (st == TS_OK && complete) {
    double *ld = calloc((size_t)TS_ATTN_THREAD_MAX, sizeof *ld), mk = 0, tot = 0;
    if (!ld) st = ts_error(TS_ERR_OOM, "attn predict: cannot allocate thread loads");
    for (int64_t p = 0; st == TS_OK && p < s->npanels; p++) ld[s->thread[p] % threads] += L[p], tot += L[p];
    for (int q = 0; st == TS_OK && q < threads; q++) mk = ld[q] > mk ? ld[q] : mk;
    free(ld);
    if (makespan) *makespan = mk;
    if (total) *total = tot;
  } else if (st == TS_OK) { /* LPT over the panel loads: the greedy solver with no pieces */
    ts_attn_sched_problem pb = {.npanels = s->npanels, .npieces = 0, .ntiles = 1, .piece_panel = piece_panel,
                                .cost = L, .base = L};
    ts_attn_sched_opts o;
    ts_attn_sched_opts_default(&o);
    o.solver = TS_ATTN_SOLVER_GREEDY;
    o.threads = threads;
    ts_attn_sched_info info;
    st = ts_attn_sched_problem_solve(&pb, &o, &tile0, NULL, thr, &info);
    if (st == TS_OK && makespan) *makespan = info.makespan;
    if (st == TS_OK && total) *total = info.total;
  }
  free(R), free(u), free(L), free(piece_panel), free(thr);
  return st;
}

/* Blocks meeting panel rows [p0, p1), as ts_attn_schedule_from_blocks lists them (block order). */
static int64_t blocks_meeting(const ts_block *bl, int64_t nb, int64_t p0, int64_t p1) {
  int64_t c = 0;
  for (int64_t b = 0; b < nb; b++) c += bl[b].row0 < p1 && (int64_t)bl[b].row0 + bl[b].rows > p0;
  return c;
}

ts_status ts__sched_build_schedule(const ts__sched_build *B, const int *choice, const int *height, ts_attn_schedule *fin) {
  const ts_attn_schedule *s = B->s;
  const int64_t ni = B->npieces;
  if (B->o->nheights == 0) { /* the blocks' schedule as it is, with the pieces' tiles */
    TS_TRY(ts_attn_schedule_alloc(fin, s->n, s->npanels, s->nsegs));
    memcpy(fin->panels, s->panels, (size_t)s->npanels * sizeof *fin->panels);
    memcpy(fin->segs, s->segs, (size_t)s->nsegs * sizeof *fin->segs);
    for (int64_t x = 0; x < ni; x++) fin->segs[B->segof[x]].br = B->menu[choice[x]].br, fin->segs[B->segof[x]].bc = B->menu[choice[x]].bc;
    return TS_OK;
  }
  int64_t nseg = 0;
  for (int64_t x = 0; x < ni; x++) nseg += choice[x] < B->nmenu;
  for (int64_t p = 0; p < s->npanels; p++) nseg += height[p] >= 0;
  TS_TRY(ts_attn_schedule_alloc(fin, s->n, s->npanels, nseg));
  int64_t k = 0, x = 0;
  for (int64_t p = 0; p < s->npanels; p++) {
    const ts_attn_panel *P = &s->panels[p];
    fin->panels[p] = (ts_attn_panel){.r0 = P->r0, .nr = P->nr, .seg0 = k, .nseg = 0};
    for (; x < ni && B->segof[x] < P->seg0 + P->nseg; x++) {
      if (choice[x] >= B->nmenu) continue;
      ts_attn_segment g = s->segs[B->segof[x]];
      g.br = B->menu[choice[x]].br, g.bc = B->menu[choice[x]].bc;
      fin->segs[k++] = g;
    }
    if (height[p] >= 0)
      fin->segs[k++] = (ts_attn_segment){.r0 = P->r0, .nr = P->nr, .c0 = 0, .nc = (int32_t)s->n,
                                         .br = B->o->heights[height[p]], .bc = B->o->compact_bc, .kind = TS_ATTN_SEG_COMPACT};
    fin->panels[p].nseg = k - fin->panels[p].seg0;
  }
  return TS_OK;
}

/* The arguments and options of ts_attn_schedule_solve: o (the defaults when opts is NULL), the
 * tile menu (the default one when o has none). */
static ts_status solve_args(const ts_blocks *blk, const ts_bitmap *mask, const ts_attn_sched_opts *opts, ts_attn_sched_opts *o,
                            const ts_attn_tile **menu, int *nmenu) {
  if (!blk || (blk->nblocks > 0 && !blk->blocks)) return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: NULL blocks");
  if (!mask || !mask->bits || mask->rows != blk->rows || mask->cols != blk->cols || blk->rows != blk->cols)
    return ts_error(TS_ERR_SHAPE, "attn scheduler: mask %lld x %lld does not match the %lld x %lld blocks' pattern",
                    mask ? (long long)mask->rows : 0LL, mask ? (long long)mask->cols : 0LL, (long long)blk->rows,
                    (long long)blk->cols);
  if (opts) *o = *opts;
  else ts_attn_sched_opts_default(o);
  *menu = o->menu;
  *nmenu = o->nmenu;
  if (!*menu || *nmenu < 1) *nmenu = ts_attn_default_menu(menu);
  for (int t = 0; t < *nmenu; t++) {
    const ts_attn_tile *m = &(*menu)[t];
    if (m->br < 1 || m->br > TS_ATTN_TILE_MAX || m->bc < 1 || m->bc > TS_ATTN_TILE_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: menu tile %d is %d x %d, not in [1, %d]^2", t, m->br, m->bc,
                      TS_ATTN_TILE_MAX);
  }
  if (o->nheights < 0 || o->nheights > 4 || (o->nheights > 0 && (o->compact_bc < 1 || o->compact_bc > TS_ATTN_TILE_MAX)))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: nheights = %d (0..4), compact_bc = %d (1..%d)", o->nheights,
                    o->compact_bc, TS_ATTN_TILE_MAX);
  for (int h = 0; h < o->nheights; h++)
    if (o->heights[h] < 1 || o->heights[h] > TS_ATTN_TILE_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: compact height %d = %d is not in [1, %d]", h, o->heights[h],
                      TS_ATTN_TILE_MAX);
  return TS_OK;
}

/* The blocks' panels (every block in the menu's first tile) into out; *ni: the block pieces they
 * hold, *nrmax: the tallest panel's rows. */
static ts_status solve_panels(const ts_blocks *blk, const ts_bitmap *mask, const ts_attn_sched_opts *o, const ts_attn_tile *menu,
                              ts_attn_schedule *out, int64_t *ni, int64_t *nrmax) {
  const int64_t nb = blk->nblocks;
  ts_attn_tile *t0s = malloc((size_t)(nb ? nb : 1) * sizeof *t0s);
  if (!t0s) return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld tiles", (long long)nb);
  for (int64_t b = 0; b < nb; b++) t0s[b] = menu[0];
  ts_status st = ts_attn_schedule_from_blocks(out, blk->rows, blk->blocks, t0s, nb, mask, &o->blocks);
  free(t0s);
  TS_TRY(st);
  *ni = 0, *nrmax = 1;
  for (int64_t p = 0; p < out->npanels; p++) {
    const ts_attn_panel *P = &out->panels[p];
    int64_t c = blocks_meeting(blk->blocks, nb, P->r0, (int64_t)P->r0 + P->nr);
    if (c > P->nseg) {
      ts_attn_schedule_free(out);
      return ts_error(TS_ERR_INTERNAL, "attn scheduler: panel %lld lists %lld segments for %lld block pieces", (long long)p,
                      (long long)P->nseg, (long long)c);
    }
    *ni += c;
    *nrmax = P->nr > *nrmax ? P->nr : *nrmax;
  }
  return TS_OK;
}

/* The problem's arrays: per piece its panel, segment, price per menu tile and (nh heights) share
 * of each compact pass; per panel its residue's price, its compact passes' own prices and whether
 * it must run one; the solution (tile, height, thread); row scratch. */
typedef struct solve_buf {
  int64_t *pp, *segof;
  double *cost_m, *base, *merge, *open;
  unsigned char *must;
  uint64_t *R, *u;
  int *tile, *height;
  int32_t *thread;
} solve_buf;

static ts_status solve_buf_alloc(solve_buf *b, int64_t ni, int64_t np, int nmenu, int nh, int64_t nrmax, int64_t W) {
  const size_t n1 = (size_t)(ni ? ni : 1);
  b->pp = malloc(n1 * sizeof *b->pp), b->segof = malloc(n1 * sizeof *b->segof);
  b->cost_m = malloc(n1 * (size_t)nmenu * sizeof *b->cost_m), b->base = calloc((size_t)np, sizeof *b->base);
  b->merge = nh ? malloc(n1 * (size_t)nh * sizeof *b->merge) : NULL;
  b->open = nh ? calloc((size_t)(np * nh), sizeof *b->open) : NULL;
  b->must = nh ? calloc((size_t)np, 1) : NULL;
  b->R = malloc((size_t)(nrmax * W) * sizeof *b->R), b->u = malloc((size_t)W * sizeof *b->u);
  b->tile = malloc(n1 * sizeof *b->tile), b->height = malloc((size_t)np * sizeof *b->height);
  b->thread = malloc((size_t)np * sizeof *b->thread);
  if (!b->pp || !b->segof || !b->cost_m || !b->base || !b->R || !b->u || !b->tile || !b->height || !b->thread ||
      (nh && (!b->merge || !b->open || !b->must)))
    return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the costs of %lld pieces x %d tiles", (long long)ni, nmenu);
  return TS_OK;
}

static void solve_buf_free(solve_buf *b) {
  free(b->pp), free(b->segof), free(b->cost_m), free(b->base), free(b->merge), free(b->open), free(b->must), free(b->R),
      free(b->u), free(b->tile), free(b->height), free(b->thread);
}

/* Prices every block piece for every menu tile, and either each panel's residue (no compact
 * passes) or every panel's compact pass at every height (the pieces' shares and the residue's). */
static ts_status solve_price(const ts_blocks *blk, const ts_bitmap *mask, const ts_attn_sched_opts *o, const ts_attn_tile *menu,
                             int nmenu, ts_attn_cost_fn cost, const ts_attn_schedule *out, solve_buf *b) {
  const int64_t W = mask->stride;
  const int nh = o->nheights;
  ts_status st = TS_OK;
  int64_t i = 0;
  for (int64_t p = 0; p < out->npanels && st == TS_OK; p++) {
    const ts_attn_panel *P = &out->panels[p];
    int64_t c = blocks_meeting(blk->blocks, blk->nblocks, P->r0, (int64_t)P->r0 + P->nr), i0 = i;
    load_rows(mask, P, W, b->R);
    for (int64_t k = 0; k < P->nseg; k++) {
      const ts_attn_segment *g = &out->segs[P->seg0 + k];
      if (k < c) { /* a block piece: its cells, then its price for every menu tile */
        ts_block bl = {.row0 = g->r0, .col0 = g->c0, .rows = g->nr, .cols = g->nc};
        bl.nnz = ts__attn_rect_count(b->R, W, g->r0 - P->r0, g->nr, g->c0, g->nc, true);
        for (int t = 0; t < nmenu; t++) b->cost_m[i * nmenu + t] = cost(&bl, menu[t], o->cost_user);
        b->pp[i] = p, b->segof[i] = P->seg0 + k;
        i++;
      } else if (!nh) { /* residue (no compact passes): priced per non-empty sub-tile of its own tile */
        b->base[p] += price_segment(b->R, W, P, g, cost, o->cost_user, true, b->u);
      }
    }
    if (nh) { /* the compact pass at every height: the pieces' shares and the residue's */
      int64_t rc;
      st = ts__attn_price_compact(mask, P, &out->segs[P->seg0], c, o, cost, b->merge + i0 * nh, b->open + p * nh, &rc);
      b->must[p] = rc > 0;
    }
  }
  return st;
}

/* The family scales (given, or measured from the unscaled prices) applied to b's prices: [0] tiles,
 * [1 + h] compact passes of height h. */
static ts_status solve_scale(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o, solve_buf *b,
                             double scale[5]) {
  const int64_t ni = pb->npieces, np = pb->npanels;
  const int nmenu = pb->ntiles, nh = pb->nheights;
  if (o->calibrate_d > 0 && !o->family_given) TS_TRY(ts__sched_calibrate(B, pb, o, scale));
  for (int f = 0; f < 5; f++)
    if (!(scale[f] > 0 && scale[f] < 1e300))
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: family scale %d = %g must be > 0", f, scale[f]);
  for (int64_t x = 0; x < ni; x++) {
    for (int t = 0; t < nmenu; t++) b->cost_m[x * nmenu + t] *= scale[0];
    for (int h = 0; h < nh; h++) b->merge[x * nh + h] *= scale[1 + h];
  }
  for (int64_t p = 0; p < np; p++) {
    b->base[p] *= scale[0];
    for (int h = 0; h < nh; h++) b->open[p * nh + h] *= scale[1 + h];
  }
  return TS_OK;
}

/* Solves pb and writes the chosen tiles, compact passes and threads into B's schedule. With
 * compact passes the ILP starts from the greedy's solution, then (unless DIAG passes measured
 * faster) solves the exact coverage model of every panel (sched_cover.c); without passes the
 * linear problem is exact. Then the measured guard, when calibrating. */
static ts_status solve_schedule(ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                                const double scale[5], solve_buf *b, ts_attn_schedule *out, ts_attn_sched_info *inf) {
  const bool cover = o->solver == TS_ATTN_SOLVER_ILP && pb->nheights > 0 && out->n >= TS__ATTN_RUN;
  ts_attn_sched_opts og = *o;
  if (cover) og.solver = TS_ATTN_SOLVER_GREEDY;
  TS_TRY(ts_attn_sched_problem_solve(pb, &og, b->tile, b->height, b->thread, inf));
  if (cover && o->calibrate_d > 0 && o->guard) { /* DIAG passes measured faster: no coverage stage */
    ts_attn_schedule gs;
    ts_status st = ts__sched_build_schedule(B, b->tile, b->height, &gs);
    if (st == TS_OK) st = ts_attn_schedule_set_threads(&gs, b->thread);
    if (st == TS_OK) st = ts__sched_diag_first(B, o, &gs, &inf->diag_first);
    ts_attn_schedule_free(&gs);
    TS_TRY(st);
  }
  if (cover && !inf->diag_first) {
    inf->ilp_run = true;
    TS_TRY(ts__sched_cover_solve(B, pb, o, scale, b->tile, b->height, b->thread, inf));
  }
  ts_attn_schedule fin;
  TS_TRY(ts__sched_build_schedule(B, b->tile, b->height, &fin));
  ts_attn_schedule_free(out), *out = fin;
  TS_TRY(ts_attn_schedule_set_threads(out, b->thread));
  double tg = ts_now();
  ts_status st = TS_OK;
  if (o->calibrate_d > 0 && o->guard) st = ts__sched_guard(B, pb, o, out, inf);
  inf->guard_ms = inf->guarded ? (ts_now() - tg) * 1e3 : 0.0;
  return st;
}

ts_status ts_attn_schedule_solve(const ts_blocks *blk, const ts_bitmap *mask, const ts_attn_sched_opts *opts,
                                 ts_attn_schedule *out, ts_attn_sched_info *info) {
  double t0 = ts_now();
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: NULL schedule");
  memset(out, 0, sizeof *out);
  ts_attn_sched_opts o;
  const ts_attn_tile *menu = NULL;
  int nmenu = 0;
  TS_TRY(solve_args(blk, mask, opts, &o, &menu, &nmenu));
  ts_attn_cost_fn cost = o.cost ? o.cost : ts_attn_cost_default;
  int64_t ni = 0, nrmax = 1;
  TS_TRY(solve_panels(blk, mask, &o, menu, out, &ni, &nrmax));
  const int64_t np = out->npanels;
  const int nh = o.nheights;
  solve_buf b = {0};
  ts_status st = solve_buf_alloc(&b, ni, np, nmenu, nh, nrmax, mask->stride);
  if (st == TS_OK) st = solve_price(blk, mask, &o, menu, nmenu, cost, out, &b);
  ts_attn_sched_info inf;
  memset(&inf, 0, sizeof inf);
  ts__sched_build B = {.s = out, .mask = mask, .segof = b.segof, .npieces = ni, .menu = menu, .nmenu = nmenu, .o = &o,
                       .diag_ratio = INFINITY, .blocks = blk->blocks, .nblocks = blk->nblocks};
  if (st == TS_OK && o.calibrate_d > 0 && o.guard) st = ts__attn_diag_ratio(mask, &B.diag_ratio);
  ts_attn_sched_problem pb = {.npanels = np, .npieces = ni, .ntiles = nmenu, .piece_panel = b.pp, .cost = b.cost_m,
                              .base = b.base, .nheights = nh, .merge = b.merge, .open = b.open, .must_open = b.must};
  double scale[5], tc = ts_now();
  memcpy(scale, o.family_scale, sizeof scale);
  if (st == TS_OK) st = solve_scale(&B, &pb, &o, &b, scale);
  tc = ts_now() - tc;
  if (st == TS_OK) st = solve_schedule(&B, &pb, &o, scale, &b, out, &inf);
  if (st == TS_OK && info) {
    inf.nblocks = blk->nblocks;
    inf.calibrated = o.calibrate_d > 0 && !o.family_given;
    memcpy(inf.calib_scale, scale, sizeof scale);
    inf.calib_ms = inf.calibrated ? tc * 1e3 : 0.0;
    inf.ms = (ts_now() - t0) * 1e3;
    *info = inf;
  }
  solve_buf_free(&b);
  if (st != TS_OK) ts_attn_schedule_free(out);
  return st;
}
