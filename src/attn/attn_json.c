/* Schedules as JSON (the serializable form of the decision):
 *   {"n": N, "panels": [{"r0": R, "nr": NR, ["thread": T,] "segs": [[r0, nr, c0, nc, br, bc, "kind"], ...]}, ...]}
 * Segments are compact arrays because a schedule for a large mask holds thousands of them. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "core/artifact_internal.h"

cJSON *ts__attn_schedule_to_cjson(const ts_attn_schedule *s) {
  if (!s) return NULL;
  /* cJSON_Add*ToObject creates and attaches in one step: nothing is left unowned when its key
   * cannot be allocated (cJSON_AddItemToObject then fails, leaving the item to the caller) */
  cJSON *root = cJSON_CreateObject(), *panels = NULL;
  if (!root || !cJSON_AddNumberToObject(root, "n", (double)s->n) || !(panels = cJSON_AddArrayToObject(root, "panels")))
    goto fail;
  for (int64_t p = 0; p < s->npanels; p++) {
    const ts_attn_panel *P = &s->panels[p];
    cJSON *jp = cJSON_CreateObject(), *segs = NULL;
    if (!jp) goto fail;
    cJSON_AddItemToArray(panels, jp);
    if (!cJSON_AddNumberToObject(jp, "r0", P->r0) || !cJSON_AddNumberToObject(jp, "nr", P->nr) ||
        (s->thread && !cJSON_AddNumberToObject(jp, "thread", s->thread[p])) || !(segs = cJSON_AddArrayToObject(jp, "segs")))
      goto fail;
    for (int64_t k = 0; k < P->nseg; k++) {
      const ts_attn_segment *g = &s->segs[P->seg0 + k];
      int v[6] = {g->r0, g->nr, g->c0, g->nc, g->br, g->bc};
      cJSON *a = cJSON_CreateIntArray(v, 6), *kind = cJSON_CreateString(ts_attn_seg_kind_name((ts_attn_seg_kind)g->kind));
      if (!a || !kind) {
        cJSON_Delete(a);
        cJSON_Delete(kind);
        goto fail;
      }
      cJSON_AddItemToArray(a, kind);
      cJSON_AddItemToArray(segs, a);
    }
  }
  return root;
fail:
  cJSON_Delete(root);
  return NULL;
}

/* An integer-valued number in [lo, hi]. */
static ts_status get_int(const cJSON *j, const char *what, double lo, double hi, int64_t *out) {
  if (!cJSON_IsNumber(j)) return ts_error(TS_ERR_FORMAT, "attn schedule json: %s is missing or not a number", what);
  double v = j->valuedouble;
  if (!(v >= lo && v <= hi) || v != floor(v))
    return ts_error(TS_ERR_FORMAT, "attn schedule json: %s = %g is not an integer in [%g, %g]", what, v, lo, hi);
  *out = (int64_t)v;
  return TS_OK;
}

static ts_status parse(const cJSON *j, ts_attn_schedule *s) {
  char what[96];
  int64_t n = 0, np, nsegs = 0;
  if (!cJSON_IsObject(j)) return ts_error(TS_ERR_FORMAT, "attn schedule json: the document is not an object");
  TS_TRY(get_int(cJSON_GetObjectItemCaseSensitive(j, "n"), "n", 1, INT32_MAX, &n));
  const cJSON *panels = cJSON_GetObjectItemCaseSensitive(j, "panels");
  if (!cJSON_IsArray(panels)) return ts_error(TS_ERR_FORMAT, "attn schedule json: panels is missing or not an array");
  np = cJSON_GetArraySize(panels);
  const cJSON *jp;
  cJSON_ArrayForEach(jp, panels) {
    const cJSON *segs = cJSON_GetObjectItemCaseSensitive(jp, "segs");
    if (!cJSON_IsArray(segs)) return ts_error(TS_ERR_FORMAT, "attn schedule json: a panel has no segs array");
    nsegs += cJSON_GetArraySize(segs);
  }
  TS_TRY(ts_attn_schedule_alloc(s, n, np, nsegs));
  int64_t p = 0, k = 0;
  cJSON_ArrayForEach(jp, panels) {
    int64_t r0 = 0, nr = 0;
    snprintf(what, sizeof what, "panels[%lld].r0", (long long)p);
    TS_TRY(get_int(cJSON_GetObjectItemCaseSensitive(jp, "r0"), what, 0, INT32_MAX, &r0));
    snprintf(what, sizeof what, "panels[%lld].nr", (long long)p);
    TS_TRY(get_int(cJSON_GetObjectItemCaseSensitive(jp, "nr"), what, 0, INT32_MAX, &nr));
    s->panels[p] = (ts_attn_panel){.r0 = (int32_t)r0, .nr = (int32_t)nr, .seg0 = k, .nseg = 0};
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(jp, "thread");
    if (jt) { /* optional static thread; panels without one are dynamic (-1) */
      int64_t t = 0;
      snprintf(what, sizeof what, "panels[%lld].thread", (long long)p);
      TS_TRY(get_int(jt, what, -1, TS_ATTN_THREAD_MAX - 1, &t));
      if (!s->thread) {
        if (!(s->thread = ts_malloc((size_t)np * sizeof *s->thread)))
          return ts_error(TS_ERR_OOM, "attn schedule json: cannot allocate %lld panel threads", (long long)np);
        for (int64_t q = 0; q < np; q++) s->thread[q] = -1;
      }
      s->thread[p] = (int32_t)t;
    }
    const cJSON *g, *segs = cJSON_GetObjectItemCaseSensitive(jp, "segs");
    int64_t q = 0;
    cJSON_ArrayForEach(g, segs) {
      if (!cJSON_IsArray(g) || cJSON_GetArraySize(g) != 7)
        return ts_error(TS_ERR_FORMAT, "attn schedule json: panels[%lld].segs[%lld] is not [r0, nr, c0, nc, br, bc, kind]",
                        (long long)p, (long long)q);
      static const char *const names[6] = {"r0", "nr", "c0", "nc", "br", "bc"};
      int64_t v[6] = {0};
      for (int f = 0; f < 6; f++) {
        snprintf(what, sizeof what, "panels[%lld].segs[%lld].%s", (long long)p, (long long)q, names[f]);
        TS_TRY(get_int(cJSON_GetArrayItem(g, f), what, 0, INT32_MAX, &v[f]));
      }
      const cJSON *kind = cJSON_GetArrayItem(g, 6);
      ts_attn_seg_kind kd;
      if (!cJSON_IsString(kind))
        return ts_error(TS_ERR_FORMAT, "attn schedule json: panels[%lld].segs[%lld].kind is not a string", (long long)p,
                        (long long)q);
      if (ts_attn_seg_kind_parse(kind->valuestring, &kd) != TS_OK)
        return ts_error(TS_ERR_FORMAT, "attn schedule json: panels[%lld].segs[%lld].kind '%s' is not mixed, full or dense",
                        (long long)p, (long long)q, kind->valuestring);
      s->segs[k++] = (ts_attn_segment){.r0 = (int32_t)v[0], .nr = (int32_t)v[1], .c0 = (int32_t)v[2], .nc = (int32_t)v[3],
                                       .br = (int32_t)v[4], .bc = (int32_t)v[5], .kind = kd};
      q++;
    }
    s->panels[p].nseg = q;
    p++;
  }
  return ts_attn_schedule_validate(s);
}

ts_status ts__attn_schedule_from_cjson(const cJSON *j, ts_attn_schedule *s) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn schedule json: NULL schedule");
  memset(s, 0, sizeof *s);
  if (!j) return ts_error(TS_ERR_INVALID_ARG, "attn schedule json: NULL document");
  ts_status st = parse(j, s);
  if (st != TS_OK) ts_attn_schedule_free(s);
  return st;
}

ts_status ts_attn_schedule_to_json(const ts_attn_schedule *s, char **json) {
  if (!s || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_attn_schedule_to_json: NULL argument");
  return ts__json_out(ts__attn_schedule_to_cjson(s), "attn schedule json", json);
}

static ts_status sched_parse(const cJSON *j, void *s) { return ts__attn_schedule_from_cjson(j, s); }

ts_status ts_attn_schedule_from_json(const char *json, ts_attn_schedule *s) {
  if (!s) return ts_error(TS_ERR_INVALID_ARG, "attn schedule json: NULL schedule");
  memset(s, 0, sizeof *s);
  return ts__json_in(json, "attn schedule json", sched_parse, s);
}
