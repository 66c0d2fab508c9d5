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
