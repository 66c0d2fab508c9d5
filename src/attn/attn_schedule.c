/* Attention schedules as plain data: allocation, structural validation, and the fixed-tile
 * baseline builders (dense flash, block skip). */
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"

static const char *const kind_names[TS_ATTN_SEG_KIND_COUNT] = {"mixed", "full", "dense", "compact", "diag"};

const char *ts_attn_seg_kind_name(ts_attn_seg_kind k) {
  return (k >= 0 && k < TS_ATTN_SEG_KIND_COUNT) ? kind_names[k] : "unknown";
}

ts_status ts_attn_seg_kind_parse(const char *name, ts_attn_seg_kind *out) {
  if (!name || !out) return ts_error(TS_ERR_INVALID_ARG, "attn segment kind: NULL argument");
  for (int k = 0; k < TS_ATTN_SEG_KIND_COUNT; k++)
    if (strcmp(name, kind_names[k]) == 0) {
      *out = (ts_attn_seg_kind)k;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "attn segment kind '%s' is not one of mixed, full, dense, compact, diag", name);
}

void ts_attn_schedule_free(ts_attn_schedule *s) {
  if (!s) return;
  ts_free(s->panels);
  ts_free(s->segs);
  ts_free(s->thread);
  memset(s, 0, sizeof *s);
}

ts_status ts_attn_schedule_set_threads(ts_attn_schedule *s, const int32_t *thread) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn schedule: NULL schedule");
  if (!thread) {
    ts_free(s->thread);
    s->thread = NULL;
    return TS_OK;
  }
  for (int64_t p = 0; p < s->npanels; p++)
    if (thread[p] < -1 || thread[p] >= TS_ATTN_THREAD_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld: thread = %d is not in [-1, %d)", (long long)p,
                      thread[p], TS_ATTN_THREAD_MAX);
  int32_t *t = ts_malloc((s->npanels ? (size_t)s->npanels : 1) * sizeof *t);
  if (!t) return ts_error(TS_ERR_OOM, "attn schedule: cannot allocate %lld panel threads", (long long)s->npanels);
  if (s->npanels) memcpy(t, thread, (size_t)s->npanels * sizeof *t);
  ts_free(s->thread);
  s->thread = t;
  return TS_OK;
}

ts_status ts_attn_schedule_alloc(ts_attn_schedule *s, int64_t n, int64_t npanels, int64_t nsegs) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn schedule: NULL schedule");
  memset(s, 0, sizeof *s);
  if (n < 1 || n > INT32_MAX) return ts_error(TS_ERR_INVALID_ARG, "attn schedule: n = %lld is not in [1, 2^31)", (long long)n);
  if (npanels < 0 || nsegs < 0)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: negative count (panels %lld, segments %lld)",
                    (long long)npanels, (long long)nsegs);
  size_t pb, sb;
  if (!ts_mul_size((size_t)npanels, sizeof(ts_attn_panel), &pb) || !ts_mul_size((size_t)nsegs, sizeof(ts_attn_segment), &sb))
    return ts_error(TS_ERR_OVERFLOW, "attn schedule: %lld panels / %lld segments overflow", (long long)npanels,
                    (long long)nsegs);
  s->panels = ts_calloc(npanels ? (size_t)npanels : 1, sizeof(ts_attn_panel));
  s->segs = ts_calloc(nsegs ? (size_t)nsegs : 1, sizeof(ts_attn_segment));
  if (!s->panels || !s->segs) {
    ts_attn_schedule_free(s);
    return ts_error(TS_ERR_OOM, "attn schedule: cannot allocate %lld panels and %lld segments", (long long)npanels,
                    (long long)nsegs);
  }
  s->n = n;
  s->npanels = npanels;
  s->nsegs = nsegs;
  return TS_OK;
}

static int cmp_panel_r0(const void *a, const void *b) {
  const ts_attn_panel *x = *(const ts_attn_panel *const *)a, *y = *(const ts_attn_panel *const *)b;
  return (x->r0 > y->r0) - (x->r0 < y->r0);
}

static ts_status check_segment(const ts_attn_schedule *s, int64_t p, int64_t k, const ts_attn_segment *g) {
  const ts_attn_panel *P = &s->panels[p];
  const char *what = NULL;
  long long val = 0;
  if (g->nr < 1) what = "nr", val = g->nr;
  else if (g->nc < 1) what = "nc", val = g->nc;
  if (what)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld segment %lld: %s = %lld must be >= 1",
                    (long long)p, (long long)k, what, val);
  if (g->br < 1 || g->br > TS_ATTN_TILE_MAX) what = "br", val = g->br;
  else if (g->bc < 1 || g->bc > TS_ATTN_TILE_MAX) what = "bc", val = g->bc;
  if (what)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld segment %lld: %s = %lld is not in [1, %d]",
                    (long long)p, (long long)k, what, val, TS_ATTN_TILE_MAX);
  if (g->r0 < P->r0 || (int64_t)g->r0 + g->nr > (int64_t)P->r0 + P->nr)
    return ts_error(TS_ERR_INVALID_ARG,
                    "attn schedule: panel %lld segment %lld: rows [%d, %lld) are outside the panel's rows [%d, %lld)",
                    (long long)p, (long long)k, g->r0, (long long)g->r0 + g->nr, P->r0, (long long)P->r0 + P->nr);
  if (g->c0 < 0 || (int64_t)g->c0 + g->nc > s->n)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld segment %lld: columns [%d, %lld) are outside [0, %lld)",
                    (long long)p, (long long)k, g->c0, (long long)g->c0 + g->nc, (long long)s->n);
  if (g->kind < 0 || g->kind >= TS_ATTN_SEG_KIND_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld segment %lld: unknown kind %d", (long long)p,
                    (long long)k, g->kind);
  return TS_OK;
}

ts_status ts_attn_schedule_validate(const ts_attn_schedule *s) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn schedule: NULL schedule");
  if (s->n < 1 || s->n > INT32_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: n = %lld is not in [1, 2^31)", (long long)s->n);
  if (s->npanels < 1 || !s->panels)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: no panels (npanels = %lld)", (long long)s->npanels);
  if (s->nsegs < 0 || (s->nsegs > 0 && !s->segs))
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: nsegs = %lld with segs %s", (long long)s->nsegs,
                    s->segs ? "set" : "NULL");
  for (int64_t p = 0; p < s->npanels; p++) {
    const ts_attn_panel *P = &s->panels[p];
    if (P->nr < 1 || P->r0 < 0 || (int64_t)P->r0 + P->nr > s->n)
      return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld: rows [%d, %lld) are not a non-empty range inside [0, %lld)",
                      (long long)p, P->r0, (long long)P->r0 + P->nr, (long long)s->n);
    if (P->seg0 < 0 || P->nseg < 0 || P->seg0 > s->nsegs || P->nseg > s->nsegs - P->seg0)
      return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld: segments [%lld, %lld+%lld) are outside the %lld segments",
                      (long long)p, (long long)P->seg0, (long long)P->seg0, (long long)P->nseg, (long long)s->nsegs);
    for (int64_t k = 0; k < P->nseg; k++) TS_TRY(check_segment(s, p, k, &s->segs[P->seg0 + k]));
    if (s->thread && (s->thread[p] < -1 || s->thread[p] >= TS_ATTN_THREAD_MAX))
      return ts_error(TS_ERR_INVALID_ARG, "attn schedule: panel %lld: thread = %d is not in [-1, %d)", (long long)p,
                      s->thread[p], TS_ATTN_THREAD_MAX);
  }
  /* Panels must partition [0, n): sort pointers by r0 and walk. */
  const ts_attn_panel **ps = malloc((size_t)s->npanels * sizeof *ps);
  if (!ps) return ts_error(TS_ERR_OOM, "attn schedule: cannot allocate %lld panel pointers", (long long)s->npanels);
  for (int64_t p = 0; p < s->npanels; p++) ps[p] = &s->panels[p];
  qsort(ps, (size_t)s->npanels, sizeof *ps, cmp_panel_r0);
  int64_t next = 0;
  ts_status st = TS_OK;
  for (int64_t p = 0; p < s->npanels && st == TS_OK; p++) {
    if (ps[p]->r0 != next)
      st = ts_error(TS_ERR_INVALID_ARG, "attn schedule: panels do not partition the rows: panel %lld starts at row %d, expected %lld (%s)",
                    (long long)(ps[p] - s->panels), ps[p]->r0, (long long)next, ps[p]->r0 > next ? "gap" : "overlap");
    next = (int64_t)ps[p]->r0 + ps[p]->nr;
  }
  if (st == TS_OK && next != s->n)
    st = ts_error(TS_ERR_INVALID_ARG, "attn schedule: panels cover rows [0, %lld), expected [0, %lld)", (long long)next,
                  (long long)s->n);
  free(ps);
  return st;
}

/* Panels of br rows with one segment over all columns. */
static ts_status fixed_tile(ts_attn_schedule *s, int64_t n, int32_t br, int32_t bc, ts_attn_seg_kind kind) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn schedule: NULL schedule");
  memset(s, 0, sizeof *s);
  if (br < 1 || br > TS_ATTN_TILE_MAX || bc < 1 || bc > TS_ATTN_TILE_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn schedule: tile %d x %d is not in [1, %d]^2", br, bc, TS_ATTN_TILE_MAX);
  if (n < 1 || n > INT32_MAX) return ts_error(TS_ERR_INVALID_ARG, "attn schedule: n = %lld is not in [1, 2^31)", (long long)n);
  int64_t np = (n + br - 1) / br;
  TS_TRY(ts_attn_schedule_alloc(s, n, np, np));
  for (int64_t p = 0; p < np; p++) {
    int32_t r0 = (int32_t)(p * br), nr = (int32_t)((n - r0) < br ? (n - r0) : br);
    s->panels[p] = (ts_attn_panel){.r0 = r0, .nr = nr, .seg0 = p, .nseg = 1};
    s->segs[p] = (ts_attn_segment){.r0 = r0, .nr = nr, .c0 = 0, .nc = (int32_t)n, .br = br, .bc = bc, .kind = kind};
  }
  return TS_OK;
}

ts_status ts_attn_schedule_dense(ts_attn_schedule *s, int64_t n, int32_t br, int32_t bc) {
  return fixed_tile(s, n, br, bc, TS_ATTN_SEG_DENSE);
}

ts_status ts_attn_schedule_blockskip(ts_attn_schedule *s, int64_t n, int32_t br, int32_t bc) {
  return fixed_tile(s, n, br, bc, TS_ATTN_SEG_MIXED);
}
