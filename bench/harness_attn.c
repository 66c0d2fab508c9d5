#include "harness_attn.h"

#include <stdlib.h>
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
  ts_status st = ts_attn_plan_load(path, NULL, NULL, &perm, &s);
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
