/* A run's report as JSON, and its timeline (tasks per worker, coloured by stage) as SVG. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/pipe.h"
#include "tessera/plot.h"

ts_status ts_pipe_report_json(const ts_pipe_report *r, char **json) {
  if (!r || !json) return ts_error(TS_ERR_INVALID_ARG, "ts_pipe_report_json: NULL argument");
  *json = NULL;
  cJSON *o = cJSON_CreateObject();
  if (!o) return ts_error(TS_ERR_OOM, "pipe report JSON");
  cJSON_AddStringToObject(o, "app", r->app);
  cJSON_AddNumberToObject(o, "width", r->width);
  cJSON_AddNumberToObject(o, "height", r->height);
  cJSON_AddNumberToObject(o, "frames", (double)r->frames);
  cJSON_AddNumberToObject(o, "threads", r->threads);
  cJSON_AddNumberToObject(o, "stages", r->nstages);
  cJSON_AddStringToObject(o, "queue", ts_pipe_queue_name(r->queue));
  cJSON_AddStringToObject(o, "copy", ts_pipe_copy_name(r->copy));
  cJSON_AddStringToObject(o, "granularity", r->gran == TS_PIPE_GRAN_AUTO ? "auto" : "fixed");
  cJSON_AddNumberToObject(o, "wall_s", r->wall_s);
  cJSON_AddNumberToObject(o, "mpix_per_s", r->mpix_per_s);
  cJSON_AddNumberToObject(o, "gflops", r->gflops);
  cJSON_AddNumberToObject(o, "tasks", (double)r->tasks);
  cJSON_AddNumberToObject(o, "tasks_expected", (double)r->tasks_expected);
  cJSON_AddNumberToObject(o, "copy_bytes", (double)r->copy_bytes);
  cJSON_AddNumberToObject(o, "copies", (double)r->copies);
  cJSON_AddNumberToObject(o, "task_overhead_us", r->overhead_s * 1e6);
  /* the granularity over time: runs of frames with one tile */
  cJSON *g = cJSON_AddArrayToObject(o, "granularity_over_frames");
  for (int64_t f = 0; f < r->frames;) {
    int64_t e = f;
    while (e + 1 < r->frames && r->frame_tile_w[e + 1] == r->frame_tile_w[f] && r->frame_tile_h[e + 1] == r->frame_tile_h[f])
      e++;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "first", (double)f);
    cJSON_AddNumberToObject(x, "last", (double)e);
    cJSON_AddNumberToObject(x, "tile_w", r->frame_tile_w[f]);
    cJSON_AddNumberToObject(x, "tile_h", r->frame_tile_h[f]);
    cJSON_AddNumberToObject(x, "tasks_per_frame", (double)r->frame_tasks[f]);
    double sum = 0;
    for (int64_t k = f; k <= e; k++) sum += r->frame_s[k];
    cJSON_AddNumberToObject(x, "mean_frame_ms", sum / (double)(e - f + 1) * 1e3);
    cJSON_AddItemToArray(g, x);
    f = e + 1;
  }
  cJSON *w = cJSON_AddArrayToObject(o, "workers");
  for (int i = 0; i < r->threads; i++) {
    const ts_pipe_worker_stats *s = &r->worker[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "tasks", (double)s->tasks);
    cJSON_AddNumberToObject(x, "busy_s", s->busy_s);
    cJSON_AddNumberToObject(x, "idle_s", s->idle_s);
    cJSON_AddNumberToObject(x, "steals", (double)s->steals);
    cJSON_AddNumberToObject(x, "steal_attempts", (double)s->steal_attempts);
    cJSON_AddNumberToObject(x, "handoffs", (double)s->handoffs);
    cJSON_AddNumberToObject(x, "contended", (double)s->contended);
    cJSON_AddItemToArray(w, x);
  }
  char *t = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!t) return ts_error(TS_ERR_OOM, "pipe report JSON");
  *json = t;
  return TS_OK;
}

static const uint32_t stage_colour[] = {0x4e79a7, 0xf28e2b, 0x59a14f, 0xe15759, 0x76b7b2, 0xedc948, 0xb07aa1, 0xff9da7,
                                        0x9c755f, 0xbab0ac, 0x2f4b7c, 0xa05195, 0x665191, 0xd45087, 0xf95d6a, 0x00a6a6};

ts_status ts_pipe_report_svg(const ts_pipe_report *r, const ts_pipe_desc *d, const char *path) {
  if (!r || !d || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_pipe_report_svg: NULL argument");
  if (!r->events || r->nevents == 0)
    return ts_error(TS_ERR_INVALID_ARG, "pipe timeline: the run recorded no tasks (run with timeline)");
  double span = 0;
  for (int64_t i = 0; i < r->nevents; i++) span = fmax(span, r->events[i].t1);
  if (!(span > 0)) span = 1e-6;
  double left = 90, right = 20, top = 56, row = 34, W = 1200;
  double H = top + r->threads * row + 80 + 18 * ((d->nstages + 5) / 6);
  double pw = W - left - right, sx = pw / span;
  ts_svg *svg;
  TS_TRY(ts_svg_create(&svg, W, H));
  char t[256];
  snprintf(t, sizeof t, "%s %dx%d, %lld frames, %d workers, %s queues: %.1f Mpixel/s", r->app, r->width, r->height,
           (long long)r->frames, r->threads, ts_pipe_queue_name(r->queue), r->mpix_per_s);
  ts_svg_text(svg, 10, 18, 13, 's', 0x202020, t);
  snprintf(t, sizeof t, "tasks per worker over time (colour: stage); %lld tasks%s",
           (long long)r->nevents, r->events_dropped ? ", later ones not recorded" : "");
  ts_svg_text(svg, 10, 36, 11, 's', 0x555555, t);
  for (int k = 0; k <= 10; k++) {
    double x = left + pw * k / 10;
    ts_svg_line(svg, x, top - 4, x, top + r->threads * row, 0xd8d8d8, 1);
    snprintf(t, sizeof t, "%.3g", span * k / 10 * 1e3);
    ts_svg_text(svg, x, top + r->threads * row + 16, 10, 'm', 0x202020, t);
  }
  ts_svg_text(svg, left + pw / 2, top + r->threads * row + 34, 11, 'm', 0x202020, "time (ms)");
  for (int i = 0; i < r->threads; i++) {
    snprintf(t, sizeof t, "worker %d", i);
    ts_svg_text(svg, left - 8, top + i * row + row * 0.62, 11, 'e', 0x202020, t);
  }
  for (int64_t i = 0; i < r->nevents; i++) {
    const ts_pipe_event *e = &r->events[i];
    double x = left + e->t0 * sx, w = (e->t1 - e->t0) * sx;
    ts_svg_rect(svg, x, top + e->worker * row + 3, w > 0.3 ? w : 0.3, row - 6, stage_colour[e->stage % 16]);
  }
  double ly = top + r->threads * row + 52;
  for (int s = 0; s < d->nstages; s++) {
    double x = left + (s % 6) * 170, y = ly + (s / 6) * 18;
    ts_svg_rect(svg, x, y - 9, 12, 10, stage_colour[s % 16]);
    snprintf(t, sizeof t, "%d %s (level %d)", s, d->stage[s].name ? d->stage[s].name : "", d->stage[s].level);
    ts_svg_text(svg, x + 16, y, 10, 's', 0x202020, t);
  }
  ts_status st = ts_svg_write(svg, path);
  ts_svg_destroy(svg);
  return st;
}
