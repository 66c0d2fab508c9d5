/* Attention backends for the nn models: one ts_attn_plan built once for (mask, head dimension), the
 * mask in the backend's token order, and the permutation that order comes from. The SCHEDULED
 * backend's tile/thread decision is one function (tile_schedule: the attention scheduler of
 * attn_sched.h, or the per-block cheapest tile); any other scheduler plugs in without touching this
 * file through ts_nn_attn_create_custom. */
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h" /* struct ts_nn_attn */

static const char *const kind_names[TS_NN_ATTN_KIND_COUNT] = {"reference", "dense_flash", "fixed", "scheduled",
                                                               "custom"};

const char *ts_nn_attn_kind_name(ts_nn_attn_kind k) {
  return (unsigned)k < TS_NN_ATTN_KIND_COUNT ? kind_names[k] : "?";
}

ts_status ts_nn_attn_kind_parse(const char *name, ts_nn_attn_kind *out) {
  for (int k = 0; name && k < TS_NN_ATTN_KIND_COUNT; k++)
    if (strcmp(name, kind_names[k]) == 0) return *out = (ts_nn_attn_kind)k, TS_OK;
  return ts_error(TS_ERR_INVALID_ARG,
                  "nn attn: unknown backend '%s' (reference, dense_flash, fixed, scheduled, custom)", name ? name : "");
}

void ts_nn_attn_opts_default(ts_nn_attn_opts *o, ts_nn_attn_kind kind) {
  memset(o, 0, sizeof *o);
  o->kind = kind;
  o->tile = (ts_attn_tile){64, 64};
  ts_reorder_opts_default(&o->reorder);
  o->reorder.method = TS_REORDER_AUTO;
  o->reorder.tile = 64; /* judge orders by the 64 x 64 tiles dense flash would touch */
  ts_blocks_opts_default(&o->blocks);
  o->sched = ts_attn_blocks_opts_default();
  o->solver = TS_ATTN_SOLVER_ILP;
  o->solve_time_limit = 1.0;
  o->heights[0] = 8, o->heights[1] = 16, o->heights[2] = 32, o->nheights = 3;
}

void ts_nn_attn_destroy(ts_nn_attn *a) {
  if (!a) return;
  if (a->bwd) a->bwd_free(a->bwd); /* before the plan it is bound to */
  ts_attn_plan_destroy(a->plan);
  ts_bitmap_free(&a->mask);
  ts_free(a->perm);
  ts_free(a);
}

/* The mask seen through perm (NULL: as is) as a bitmap; dense masks never go through a CSR. */
static ts_status mask_bitmap(const ts_nn_token_mask *m, const int32_t *perm, ts_bitmap *out) {
  if (m->dense) {
    TS_TRY(ts_bitmap_alloc(out, m->n, m->n));
    for (int64_t i = 0; i < m->n; i++) {
      uint64_t *row = ts_bitmap_row(out, i);
      for (int64_t j = 0; j < m->n; j += 64)
        row[j >> 6] = m->n - j >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << (m->n - j)) - 1);
    }
    return TS_OK;
  }
  if (!perm) return ts_csr_to_bitmap(&m->csr, out);
  ts_csr p;
  TS_TRY(ts_csr_permute(&m->csr, perm, perm, &p));
  ts_status s = ts_csr_to_bitmap(&p, out);
  ts_csr_free(&p);
  return s;
}

static ts_status check_args(ts_nn_attn **a, const ts_nn_token_mask *mask, int64_t d) {
  if (!a) return ts_error(TS_ERR_INVALID_ARG, "nn attn: NULL output handle");
  *a = NULL;
  if (!mask || mask->n < 1 || (!mask->dense && (mask->csr.rows != mask->n || mask->csr.cols != mask->n)))
    return ts_error(TS_ERR_INVALID_ARG, "nn attn: mask is missing or not n x n");
  if (d < 1 || d > 4096) return ts_error(TS_ERR_INVALID_ARG, "nn attn: head dimension %lld is not in [1, 4096]", (long long)d);
  return TS_OK;
}

static ts_nn_attn *new_backend(ts_nn_attn_kind kind, const ts_nn_token_mask *mask, int64_t d) {
  ts_nn_attn *a = ts_calloc(1, sizeof *a);
  if (!a) return NULL;
  a->kind = kind;
  a->n = mask->n;
  a->d = d;
  a->info.kind = kind;
  a->info.n = mask->n;
  a->info.d = d;
  a->info.solver = -1;
  return a;
}

/* Takes ownership of perm; builds the reordered bitmap and the plan for schedule s (NULL: the
 * reference, no plan). */
static ts_status finish(ts_nn_attn *a, const ts_context *ctx, const ts_nn_token_mask *mask, int32_t *perm,
                        const ts_attn_schedule *s) {
  a->perm = perm;
  a->info.perm = perm;
  TS_TRY(mask_bitmap(mask, perm, &a->mask));
  if (!s) return TS_OK;
  TS_TRY(ts_attn_plan_create(&a->plan, ctx, s, &a->mask, a->d));
  ts_attn_plan_stats(a->plan, &a->info.stats);
  return TS_OK;
}

/* Tiles (and panel threads) for the blocks of the reordered mask bm: the attention scheduler
 * (attn_sched.h) when o->solver >= 0, else each block's cheapest menu tile. */
static ts_status tile_schedule(ts_nn_attn *a, const ts_context *ctx, const ts_blocks *blk, const ts_bitmap *bm,
                               const ts_nn_attn_opts *o, ts_attn_schedule *s) {
  const ts_attn_tile *menu = o->menu;
  int nmenu = o->nmenu;
  if (!menu) nmenu = ts_attn_default_menu(&menu);
  int dd = (int)a->d;
  a->info.solver = o->solver;
  if (o->solver >= 0) {
    ts_attn_sched_opts so;
    ts_attn_sched_opts_default(&so);
    so.solver = (ts_attn_solver)o->solver;
    so.threads = ctx ? ts_context_threads(ctx) : 0;
    so.menu = menu;
    so.nmenu = nmenu;
    so.cost_user = &dd;
    if (o->cost) so.cost = o->cost, so.cost_user = o->cost_user;
    so.blocks = o->sched;
    so.time_limit = o->solve_time_limit;
    so.nheights = o->nheights < 0 ? 0 : o->nheights > 4 ? 4 : o->nheights;
    memcpy(so.heights, o->heights, sizeof so.heights);
    so.calibrate_d = o->calibrate ? a->d : 0;
    so.calibrate_heads = o->heads > 1 ? o->heads : 1;
    ts_attn_sched_info si;
    TS_TRY(ts_attn_schedule_solve(blk, bm, &so, s, &si));
    a->info.solver = (int)si.solver;
    a->info.merged = si.merged;
    a->info.compact_panels = si.compact_panels;
    a->info.ilp_improved = si.ilp_improved;
    a->info.sched_ms = si.ms;
    a->info.predicted_makespan = si.makespan;
    return TS_OK;
  }
  ts_attn_tile *tiles = ts_malloc((size_t)(blk->nblocks + 1) * sizeof *tiles);
  if (!tiles) return TS_ERR_OOM;
  ts_status st = TS_OK;
  if (blk->nblocks > 0) st = ts_attn_choose_tiles(blk->blocks, blk->nblocks, menu, nmenu, NULL, &dd, tiles);
  if (st == TS_OK) st = ts_attn_schedule_from_blocks(s, a->n, blk->blocks, tiles, blk->nblocks, bm, &o->sched);
  ts_free(tiles);
  return st;
}

/* Reorder (symmetric, on the grid) -> dense blocks -> tile_schedule. *perm: NULL when the order
 * is the identity. A dense mask is one block: reordering and extraction have nothing to find. */
static ts_status build_scheduled(ts_nn_attn *a, const ts_context *ctx, const ts_nn_token_mask *mask,
                                 const ts_nn_attn_opts *o, ts_attn_schedule *s, int32_t **perm) {
  int64_t n = mask->n;
  ts_bitmap bm = {0};
  if (mask->dense) {
    ts_block all = {0, 0, (int32_t)n, (int32_t)n, n * n};
    ts_blocks blk = {.rows = n, .cols = n, .nnz = n * n, .nblocks = 1, .blocks = &all, .block_nnz = n * n,
                     .block_cells = n * n};
    a->info.nblocks = 1;
    ts_status st = mask_bitmap(mask, NULL, &bm);
    if (st == TS_OK) st = tile_schedule(a, ctx, &blk, &bm, o, s);
    ts_bitmap_free(&bm);
    return st;
  }
  ts_reorder_opts ro = o->reorder;
  ro.mode = TS_REORDER_MODE_SYMMETRIC;
  ro.grid_h = mask->h;
  ro.grid_w = mask->w;
  ro.grid_pos = NULL;
  int32_t *p = ts_malloc((size_t)n * sizeof *p);
  if (!p) return TS_ERR_OOM;
  ts_reorder_stats rst;
  memset(&rst, 0, sizeof rst);
  ts_status st = ts_attn_reorder(&mask->csr, &ro, p, &rst); /* auto: the order compact passes run best in */
  bool identity = true;
  for (int64_t i = 0; st == TS_OK && i < n && identity; i++) identity = p[i] == i;
  if (st != TS_OK || identity) {
    ts_free(p);
    p = NULL;
  }
  a->info.reorder = rst.method;
  a->info.reorder_ms = st == TS_OK ? rst.ms : 0;
  ts_csr pm = {0};
  ts_blocks blocks = {0};
  if (st == TS_OK) st = p ? ts_csr_permute(&mask->csr, p, p, &pm) : ts_csr_copy(&mask->csr, &pm);
  if (st == TS_OK) st = ts_blocks_extract(&pm, &o->blocks, &blocks);
  if (st == TS_OK) {
    a->info.extract_ms = blocks.ms;
    a->info.nblocks = blocks.nblocks;
    st = ts_csr_to_bitmap(&pm, &bm);
  }
  if (st == TS_OK) st = tile_schedule(a, ctx, &blocks, &bm, o, s);
  ts_bitmap_free(&bm);
  ts_blocks_free(&blocks);
  ts_csr_free(&pm);
  if (st != TS_OK) {
    ts_free(p);
    return st;
  }
  *perm = p;
  return TS_OK;
}

/* The plan cache's request (ts_nn_attn_opts.cache): source key over the mask, d, threads and
 * every option that shapes the scheduled backend's plan. */
static ts_status cache_request(const ts_nn_attn *b, const ts_context *ctx, const ts_nn_token_mask *mask,
                               const ts_nn_attn_opts *o, ts_attn_plan_desc *desc, char src[17]) {
  const ts_reorder_opts *r = &o->reorder;
  const ts_blocks_opts *bo = &o->blocks;
  char txt[1024];
  int len = snprintf(txt, sizeof txt,
                     "nn-attn grid=%lldx%lld mode=%d cs=%d dist=%d tau=%.17g q=%d rw=%d ps=%d df=%.17g tile=%d seed=%llu "
                     "ex=%d rho=%.17g mn=%lld mr=%d mc=%d mg=%d bcst=%.17g pr=%d res=%dx%d solver=%d tl=%.17g cal=%d gh=%lld v3 h=",
                     (long long)mask->h, (long long)mask->w, (int)r->mode, r->cluster_size, (int)r->distance, r->tau,
                     r->quotient, r->refine_window, r->part_size, r->dense_frac, r->tile, (unsigned long long)r->seed,
                     (int)bo->method, bo->rho, (long long)bo->min_nnz, bo->max_rows, bo->max_cols, bo->max_group,
                     bo->block_cost, o->sched.panel_rows, o->sched.residue.br, o->sched.residue.bc, o->solver,
                     o->solver == TS_ATTN_SOLVER_ILP ? o->solve_time_limit : 0.0, o->calibrate,
                     (long long)(o->calibrate && o->heads > 1 ? o->heads : 1));
  if (len > 0 && (size_t)len < sizeof txt)
    len += snprintf(txt + len, sizeof txt - (size_t)len, "cost=%s align=%d ", o->cost ? (o->cost_tag ? o->cost_tag : "?") : "analytic",
                    o->sched.align);
  for (int h = 0; h < o->nheights && h < 4 && len > 0 && (size_t)len < sizeof txt; h++)
    len += snprintf(txt + len, sizeof txt - (size_t)len, "%d,", o->heights[h]);
  for (int t = 0; o->menu && t < o->nmenu && len > 0 && (size_t)len < sizeof txt; t++)
    len += snprintf(txt + len, sizeof txt - (size_t)len, "m%dx%d", o->menu[t].br, o->menu[t].bc);
  ts_attn_plan_desc_init(desc, mask->n, 0, b->d, ctx ? ts_context_threads(ctx) : ts_default_threads());
  snprintf(desc->reorder, sizeof desc->reorder, "%s", ts_reorder_method_name(r->method));
  snprintf(desc->solver, sizeof desc->solver, "%s", o->solver < 0 ? "none" : ts_attn_solver_name((ts_attn_solver)o->solver));
  return ts_attn_plan_source_key(&mask->csr, txt, desc, src);
}

/* Stores the scheduled backend's plan (schedule s, b's perm) under the request src. */
static ts_status cache_store(const ts_nn_attn *b, const ts_nn_token_mask *mask, ts_attn_plan_desc *desc, const char src[17],
                             const ts_attn_schedule *s) {
  ts_csr pm = {0};
  char key[17];
  snprintf(desc->reorder, sizeof desc->reorder, "%s", ts_reorder_method_name(b->info.reorder));
  ts_status st = b->perm ? ts_csr_permute(&mask->csr, b->perm, b->perm, &pm) : ts_csr_copy(&mask->csr, &pm);
  if (st == TS_OK) st = ts_attn_plan_key(&pm, b->perm, desc, key);
  if (st == TS_OK) st = ts_attn_plan_cache_store(src, key, desc, b->perm, s, NULL);
  ts_csr_free(&pm);
  return st;
}

ts_status ts_nn_attn_create(ts_nn_attn **a, const ts_context *ctx, const ts_nn_token_mask *mask, int64_t d,
                            const ts_nn_attn_opts *o) {
  TS_TRY(check_args(a, mask, d));
  ts_nn_attn_opts def;
  if (!o) {
    ts_nn_attn_opts_default(&def, TS_NN_ATTN_SCHEDULED);
    o = &def;
  }
  if ((unsigned)o->kind >= TS_NN_ATTN_KIND_COUNT || o->kind == TS_NN_ATTN_CUSTOM)
    return ts_error(TS_ERR_INVALID_ARG, "nn attn: backend kind %d cannot be built here (custom: ts_nn_attn_create_custom)",
                    (int)o->kind);
  if (mask->n > INT32_MAX) return ts_error(TS_ERR_OVERFLOW, "nn attn: %lld tokens", (long long)mask->n);
  ts_nn_attn *b = new_backend(o->kind, mask, d);
  if (!b) return TS_ERR_OOM;
  double t0 = ts_now();
  ts_attn_schedule s = {0};
  int32_t *perm = NULL;
  ts_attn_plan_desc desc;
  char src[17] = "";
  ts_status st = TS_OK;
  switch (o->kind) {
  case TS_NN_ATTN_DENSE_FLASH:
    st = ts_attn_schedule_dense(&s, mask->n, o->tile.br, o->tile.bc);
    b->info.tile = o->tile;
    break;
  case TS_NN_ATTN_FIXED:
    st = ts_attn_schedule_blockskip(&s, mask->n, o->tile.br, o->tile.bc);
    b->info.tile = o->tile;
    break;
  case TS_NN_ATTN_SCHEDULED:
    if (o->cache && !mask->dense && (!o->cost || o->cost_tag)) {
      char key[17];
      st = cache_request(b, ctx, mask, o, &desc, src);
      if (st == TS_OK && ts_attn_plan_cache_find(src, key, NULL, &perm, &s) == TS_OK) {
        b->info.cached = true;
        b->info.solver = o->solver;
        break;
      }
      ts_error_clear();
    }
    if (st == TS_OK) st = build_scheduled(b, ctx, mask, o, &s, &perm);
    break;
  default: /* reference: no schedule */
    break;
  }
  if (st == TS_OK) st = finish(b, ctx, mask, perm, o->kind == TS_NN_ATTN_REFERENCE ? NULL : &s);
  else ts_free(perm);
  if (st != TS_OK && b->info.cached) { /* a cached plan that does not fit the mask: plan anew */
    ts_error_clear();
    ts_attn_schedule_free(&s);
    ts_attn_plan_destroy(b->plan), b->plan = NULL;
    ts_bitmap_free(&b->mask);
    ts_free(b->perm), b->perm = NULL, b->info.perm = NULL;
    b->info.cached = false;
    perm = NULL;
    st = build_scheduled(b, ctx, mask, o, &s, &perm);
    if (st == TS_OK) st = finish(b, ctx, mask, perm, &s);
    else ts_free(perm);
  }
  if (st == TS_OK && src[0] && !b->info.cached) st = cache_store(b, mask, &desc, src, &s);
  ts_attn_schedule_free(&s);
  if (st != TS_OK) {
    ts_error_prefix("nn attn %s: ", kind_names[o->kind]);
    ts_nn_attn_destroy(b);
    return st;
  }
  b->info.plan_ms = (ts_now() - t0) * 1e3;
  *a = b;
  return TS_OK;
}

ts_status ts_nn_attn_create_custom(ts_nn_attn **a, const ts_context *ctx, const ts_nn_token_mask *mask,
                                   const int32_t *perm, const ts_attn_schedule *s, int64_t d) {
  TS_TRY(check_args(a, mask, d));
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "nn attn custom: NULL schedule");
  if (s->n != mask->n)
    return ts_error(TS_ERR_SHAPE, "nn attn custom: schedule is for %lld tokens, the mask has %lld", (long long)s->n,
                    (long long)mask->n);
  if (perm) TS_TRY(ts_perm_validate(perm, mask->n));
  ts_nn_attn *b = new_backend(TS_NN_ATTN_CUSTOM, mask, d);
  int32_t *p = perm ? ts_malloc((size_t)mask->n * sizeof *p) : NULL;
  if (!b || (perm && !p)) {
    ts_free(p);
    ts_nn_attn_destroy(b);
    return TS_ERR_OOM;
  }
  if (p) memcpy(p, perm, (size_t)mask->n * sizeof *p);
  double t0 = ts_now();
  ts_status st = finish(b, ctx, mask, p, s);
  if (st != TS_OK) {
    ts_error_prefix("nn attn custom: ");
    ts_nn_attn_destroy(b);
    return st;
  }
  b->info.plan_ms = (ts_now() - t0) * 1e3;
  *a = b;
  return TS_OK;
}

void ts_nn_attn_get_info(const ts_nn_attn *a, ts_nn_attn_info *info) {
  if (a && info) *info = a->info;
}

ts_status ts_nn_attn_run(ts_nn_attn *a, const ts_context *ctx, const float *Q, const float *K, const float *V,
                         float *O, int64_t batch, int64_t heads) {
  if (!a) return ts_error(TS_ERR_INVALID_ARG, "nn attn run: NULL backend");
  if (!a->plan) return ts_attn_reference(&a->mask, Q, K, V, O, batch, heads, a->n, a->d);
  return ts_attn_execute(ctx, a->plan, Q, K, V, O, batch, heads, a->n, a->d);
}
