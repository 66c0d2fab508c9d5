/* Token masks for models over an h x w patch grid: fill the grid size into a pattern spec, generate
 * it, and bring it back to grid order (token = y*w + x). */
#include <stdio.h>
#include <string.h>

#include "tessera/nn.h"

ts_status ts_nn_spec_for_grid(const char *spec, int64_t h, int64_t w, char *out, size_t cap) {
  if (!spec || !spec[0]) return ts_error(TS_ERR_INVALID_ARG, "nn mask: empty pattern spec");
  if (!out || cap == 0) return ts_error(TS_ERR_INVALID_ARG, "nn mask: no output buffer");
  if (h < 1 || w < 1) return ts_error(TS_ERR_INVALID_ARG, "nn mask: grid %lld x %lld is empty", (long long)h, (long long)w);
  size_t len = strlen(spec);
  /* The keys come after the innermost kind: the text after the last ':' (kinds never contain '='). */
  const char *colon = strrchr(spec, ':');
  const char *keys = colon ? colon + 1 : spec + len;
  bool has_grid = false;
  for (const char *k = keys; *k;) {
    if ((k[0] == 'h' || k[0] == 'w') && k[1] == '=') has_grid = true;
    const char *comma = strchr(k, ',');
    if (!comma) break;
    k = comma + 1;
  }
  int wrote;
  if (strcmp(spec, "dense") == 0 || has_grid) {
    wrote = snprintf(out, cap, "%s", spec);
  } else if (!colon) {
    wrote = snprintf(out, cap, "%s:h=%lld,w=%lld", spec, (long long)h, (long long)w);
  } else {
    wrote = snprintf(out, cap, "%.*sh=%lld,w=%lld%s%s", (int)(keys - spec), spec, (long long)h, (long long)w,
                     keys[0] ? "," : "", keys);
  }
  if (wrote < 0 || (size_t)wrote >= cap)
    return ts_error(TS_ERR_INVALID_ARG, "nn mask: spec '%s' with the grid does not fit %zu bytes", spec, cap);
  return TS_OK;
}

void ts_nn_token_mask_free(ts_nn_token_mask *m) {
  if (!m) return;
  ts_csr_free(&m->csr);
  memset(m, 0, sizeof *m);
}

ts_status ts_nn_token_mask_create(const char *spec, int64_t h, int64_t w, ts_nn_token_mask *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "nn mask: out is NULL");
  memset(out, 0, sizeof *out);
  if (h < 1 || w < 1 || h > (1 << 15) || w > (1 << 15) || h * w > (1 << 20))
    return ts_error(TS_ERR_INVALID_ARG, "nn mask: grid %lld x %lld is out of range", (long long)h, (long long)w);
  char full[512];
  TS_TRY(ts_nn_spec_for_grid(spec, h, w, full, sizeof full));
  int64_t n = h * w;
  if (strcmp(full, "dense") == 0) {
    *out = (ts_nn_token_mask){.h = h, .w = w, .n = n, .dense = true, .nnz = n * n, .density = 1.0};
    return TS_OK;
  }
  ts_csr m;
  ts_pattern_info info;
  ts_status s = ts_pattern_generate(full, &m, &info);
  if (s != TS_OK) {
    ts_error_prefix("nn mask '%s': ", full);
    return s;
  }
  if (m.rows != n || m.cols != n) {
    s = ts_error(TS_ERR_SHAPE, "nn mask '%s': pattern is %lld x %lld, the %lld x %lld grid has %lld tokens", full,
                 (long long)m.rows, (long long)m.cols, (long long)h, (long long)w, (long long)n);
  } else if (info.base_index) {
    /* permute: relabelled the grid tokens (token i is grid token base_index[i]); undo it, since the
     * model's tokens are grid cells: grid(g1, g2) = pattern(inv[g1], inv[g2]). */
    int32_t *inv = ts_malloc((size_t)n * sizeof *inv);
    ts_csr g;
    s = inv ? ts_perm_inverse(info.base_index, n, inv) : TS_ERR_OOM;
    if (s == TS_OK) s = ts_csr_permute(&m, inv, inv, &g);
    ts_free(inv);
    if (s == TS_OK) {
      ts_csr_free(&m);
      m = g;
    }
  }
  ts_pattern_info_free(&info);
  if (s != TS_OK) {
    ts_csr_free(&m);
    return s;
  }
  *out = (ts_nn_token_mask){.h = h, .w = w, .n = n, .csr = m, .nnz = m.nnz, .density = (double)m.nnz / ((double)n * n)};
  return TS_OK;
}
