#include "harness_attn.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tessera/attn_sched.h"

ts_status ts_bench_attn_mask(const char *spec, ts_reorder_method method, ts_csr *pm, ts_bitmap *bp,
                             ts_reorder_method *used) {
  ts_csr csr = {0};
  ts_pattern_info info;
  memset(&info, 0, sizeof info);
  TS_TRY(ts_pattern_generate(spec, &csr, &info));
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = method;
  ro.grid_h = info.grid_h, ro.grid_w = info.grid_w, ro.grid_pos = info.base_index;
  ts_reorder_stats rst;
  int32_t *perm = malloc((size_t)csr.rows * sizeof *perm);
  ts_status s = perm ? ts_attn_reorder(&csr, &ro, perm, &rst) : ts_error(TS_ERR_OOM, "bench: permutation of %s", spec);
  if (s == TS_OK && used) *used = rst.method;
  if (s == TS_OK) s = ts_csr_permute(&csr, perm, perm, pm);
  if (s == TS_OK) s = ts_csr_to_bitmap(pm, bp);
  free(perm);
  ts_csr_free(&csr);
  ts_pattern_info_free(&info);
  return s;
}

ts_status ts_bench_attn_load_plan(const char *path, const ts_context *ctx, const char *spec, int64_t d, ts_attn_plan **plan,
                                  int64_t *n) {
  ts_csr m = {0}, pm = {0};
  ts_bitmap bm = {0};
  ts_attn_schedule s = {0};
  int32_t *perm = NULL;
  char file[4096];
  int br = 0, bc = 0;
  snprintf(file, sizeof file, "%s", path);
  char *at = strrchr(file, '@');
  if (at && sscanf(at, "@fixed:%dx%d", &br, &bc) == 2) *at = '\0'; /* the plan's order, block-skip tiles */
  else br = bc = 0;
  ts_status st = ts_attn_plan_load(file, NULL, NULL, &perm, &s);
  if (st == TS_OK && br > 0) {
    const int64_t nn = s.n;
    ts_attn_schedule_free(&s);
    st = ts_attn_schedule_blockskip(&s, nn, br, bc);
  }
  if (st == TS_OK) st = ts_pattern_generate(spec, &m, NULL);
  if (st == TS_OK) st = perm ? ts_csr_permute(&m, perm, perm, &pm) : ts_csr_copy(&m, &pm);
  if (st == TS_OK) st = ts_csr_to_bitmap(&pm, &bm);
  if (st == TS_OK) st = ts_attn_plan_create(plan, ctx, &s, &bm, d);
  if (st == TS_OK && n) *n = m.rows;
  ts_attn_schedule_free(&s);
  ts_bitmap_free(&bm);
  ts_csr_free(&pm);
  ts_csr_free(&m);
  ts_free(perm);
  return st;
}

ts_status ts_bench_attn_io_make(ts_bench_attn_io *io, int64_t heads, int64_t n, int64_t d, bool bf16) {
  memset(io, 0, sizeof *io);
  io->heads = heads, io->n = n, io->d = d;
  const size_t ne = (size_t)heads * (size_t)n * (size_t)d;
  io->q = ts_malloc(ne * 4), io->k = ts_malloc(ne * 4), io->v = ts_malloc(ne * 4), io->o = ts_malloc(ne * 4);
  if (bf16) io->qb = ts_malloc(ne * 2), io->kb = ts_malloc(ne * 2), io->vb = ts_malloc(ne * 2);
  if (!io->q || !io->k || !io->v || !io->o || (bf16 && (!io->qb || !io->kb || !io->vb))) {
    ts_bench_attn_io_free(io);
    return ts_error(TS_ERR_OOM, "bench: inputs of %lld heads x %lld x %lld", (long long)heads, (long long)n, (long long)d);
  }
  ts_rng rng;
  ts_rng_seed(&rng, 3);
  for (size_t i = 0; i < ne; i++)
    io->q[i] = (float)ts_rng_normal(&rng), io->k[i] = (float)ts_rng_normal(&rng), io->v[i] = (float)ts_rng_normal(&rng);
  if (bf16) ts_f32_to_bf16_array(io->q, io->qb, ne), ts_f32_to_bf16_array(io->k, io->kb, ne), ts_f32_to_bf16_array(io->v, io->vb, ne);
  return TS_OK;
}

void ts_bench_attn_io_free(ts_bench_attn_io *io) {
  ts_free(io->q), ts_free(io->k), ts_free(io->v), ts_free(io->o), ts_free(io->qb), ts_free(io->kb), ts_free(io->vb);
  memset(io, 0, sizeof *io);
}

ts_status ts_bench_attn_io_run(const ts_context *ctx, ts_attn_plan *plan, const ts_bench_attn_io *io, int64_t heads,
                               float *O) {
  if (!O) O = io->o;
  return io->qb ? ts_attn_execute_bf16(ctx, plan, io->qb, io->kb, io->vb, O, 1, heads, io->n, io->d)
                : ts_attn_execute(ctx, plan, io->q, io->k, io->v, O, 1, heads, io->n, io->d);
}
