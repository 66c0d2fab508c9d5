/* The built-in apps' registry: names, create/destroy, description, reference dispatch. */
#include <string.h>

#include "pipe/pipe_apps_internal.h"

typedef struct app_entry {
  const char *name;
  void (*build)(ts_pipe_app *app);
  ts_status (*ref)(const ts_pipe_app *app, int64_t frame, const float *prev, float *out);
} app_entry;

/* indexed by TS__PIPE_EDGE .. TS__PIPE_CNN */
static const app_entry apps[TS__PIPE_NAPPS] = {
    {"edge", ts__pipe_edge_build, ts__pipe_edge_ref}, {"heat", ts__pipe_heat_build, ts__pipe_heat_ref},
    {"isp", ts__pipe_isp_build, ts__pipe_isp_ref},    {"flow", ts__pipe_flow_build, ts__pipe_flow_ref},
    {"life", ts__pipe_life_build, ts__pipe_life_ref}, {"cnn", ts__pipe_cnn_build, ts__pipe_cnn_ref},
};

static const char *const app_names[TS__PIPE_NAPPS + 1] = {"edge", "heat", "isp", "flow", "life", "cnn", NULL};

const char *const *ts_pipe_app_names(void) { return app_names; }

int ts__pipe_add_stage(ts_pipe_desc *d, const char *name, int level, int channels, ts_pipe_kernel run,
                       const void *params, double flops_per_px) {
  int s = d->nstages++;
  ts_pipe_stage *st = &d->stage[s];
  memset(st, 0, sizeof *st);
  st->name = name;
  st->level = level;
  st->channels = channels;
  st->run = run;
  st->params = params;
  st->flops_per_px = flops_per_px;
  return s;
}

void ts__pipe_add_input(ts_pipe_desc *d, int stage, int from, int halo) {
  ts_pipe_stage *st = &d->stage[stage];
  st->in[st->nin].from = from;
  st->in[st->nin].halo = halo;
  st->nin++;
}

ts_status ts__pipe_ref_alloc(float **planes, const int64_t *n, int count) {
  for (int i = 0; i < count; i++) planes[i] = NULL;
  for (int i = 0; i < count; i++) {
    planes[i] = ts_malloc((size_t)n[i] * sizeof(float));
    if (!planes[i]) {
      ts__pipe_ref_free(planes, i);
      return TS_ERR_OOM; /* ts_malloc left the detail */
    }
  }
  return TS_OK;
}

void ts__pipe_ref_free(float **planes, int count) {
  for (int i = 0; i < count; i++) {
    ts_free(planes[i]);
    planes[i] = NULL;
  }
}

/* cnn weights: small dyadic values from the app's seed, so every sum is reproducible and the
 * layers keep a mix of active and inactive ReLUs. */
static void cnn_weights(ts_pipe_app *a) {
  for (int i = 0; i < (int)(sizeof a->c1w / sizeof a->c1w[0]); i++)
    a->c1w[i] = (float)((int)(ts__pipe_hash((uint32_t)i, 1, a->seed) & 255) - 128) * (1.0f / 512);
  for (int i = 0; i < (int)(sizeof a->c2w / sizeof a->c2w[0]); i++)
    a->c2w[i] = (float)((int)(ts__pipe_hash((uint32_t)i, 2, a->seed) & 255) - 128) * (1.0f / 1024);
  for (int i = 0; i < (int)(sizeof a->c3w / sizeof a->c3w[0]); i++)
    a->c3w[i] = (float)((int)(ts__pipe_hash((uint32_t)i, 3, a->seed) & 255) - 128) * (1.0f / 256);
  for (int i = 0; i < TS__PIPE_CNN_C1; i++)
    a->c1b[i] = (float)((int)(ts__pipe_hash((uint32_t)i, 11, a->seed) & 63) - 24) * (1.0f / 1024);
  for (int i = 0; i < TS__PIPE_CNN_C2; i++)
    a->c2b[i] = (float)((int)(ts__pipe_hash((uint32_t)i, 12, a->seed) & 63) - 24) * (1.0f / 1024);
  for (int i = 0; i < TS__PIPE_CNN_C3; i++)
    a->c3b[i] = (float)((int)(ts__pipe_hash((uint32_t)i, 13, a->seed) & 63) - 32) * (1.0f / 256);
}

ts_status ts_pipe_app_create(const char *name, int width, int height, ts_pipe_app **app) {
  if (!app) return ts_error(TS_ERR_INVALID_ARG, "pipe app: no output pointer");
  *app = NULL;
  int kind = -1;
  for (int k = 0; k < TS__PIPE_NAPPS; k++)
    if (name && !strcmp(name, apps[k].name)) kind = k;
  if (kind < 0)
    return ts_error(TS_ERR_NOT_FOUND, "pipe app: unknown app '%s' (edge, heat, isp, flow, life or cnn)",
                    name ? name : "");
  if (width < 1 || height < 1 || width > (1 << 16) || height > (1 << 16))
    return ts_error(TS_ERR_INVALID_ARG, "pipe app %s: domain %dx%d (each must be 1..65536)", name, width, height);
  ts_pipe_app *a = ts_malloc(sizeof *a);
  if (!a) return TS_ERR_OOM;
  memset(a, 0, sizeof *a);
  a->kind = kind;
  a->w = width;
  a->h = height;
  a->seed = 0x7e55e4a1u;
  a->desc.name = apps[kind].name;
  a->desc.width = width;
  a->desc.height = height;
  if (kind == TS__PIPE_CNN) cnn_weights(a);
  apps[kind].build(a);
  /* the first half of the stages on device 0, the rest on device 1 (two-arena runs) */
  for (int s = 0; s < a->desc.nstages; s++) a->desc.stage[s].device = 2 * s < a->desc.nstages ? 0 : 1;
  ts_status st = ts_pipe_desc_check(&a->desc);
  if (st != TS_OK) {
    ts_free(a);
    return ts_error(TS_ERR_INTERNAL, "pipe app %s: built an invalid description", name);
  }
  *app = a;
  return TS_OK;
}

void ts_pipe_app_destroy(ts_pipe_app *app) { ts_free(app); }

const ts_pipe_desc *ts_pipe_app_desc(const ts_pipe_app *app) { return app ? &app->desc : NULL; }

ts_status ts_pipe_app_reference(const ts_pipe_app *app, int64_t frame, const float *prev, float *out) {
  if (!app || !out) return ts_error(TS_ERR_INVALID_ARG, "pipe app reference: no app or no output");
  return apps[app->kind].ref(app, frame, prev, out);
}
