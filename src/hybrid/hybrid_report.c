/* A run's report (JSON) and its timeline (SVG): containers by class over time, the device's compute
 * engine and the co-tenant's intervals, the controller's role changes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid/hybrid_internal.h"
#include "io/json_internal.h"
#include "tessera/plot.h"

static const char *mode_name(ts_hybrid_mode m) {
  switch (m) {
  case TS_HYBRID_MODE_CPU: return "cpu";
  case TS_HYBRID_MODE_GPU: return "gpu";
  case TS_HYBRID_MODE_STATIC: return "static";
  default: return "auto";
  }
}
/* The tail of the last round: when each class's last work ended. */
static void tail_of(const ts__hybrid_result *r, double *cpu_end, double *dev_end, double *round_start) {
  int last = r->nrounds - 1;
  *cpu_end = *dev_end = 0;
  *round_start = INFINITY;
  for (int i = 0; i < r->nrec; i++) {
    const ts__hybrid_rec *e = &r->rec[i];
    if (e->round != last) continue;
    if (e->t0 < *round_start) *round_start = e->t0;
    if (e->cls != TS_HYBRID_DEV && e->t1 > *cpu_end) *cpu_end = e->t1;
    if (e->cls != TS_HYBRID_CPU && e->t1 > *dev_end) *dev_end = e->t1;
  }
  if (!isfinite(*round_start)) *round_start = 0;
}

ts_status ts__hybrid_report(const ts__hybrid_result *r, char **json) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return ts_error(TS_ERR_OOM, "hybrid report: out of memory");
  cJSON_AddStringToObject(o, "engine", r->engine);
  cJSON_AddStringToObject(o, "job", ts_hybrid_job_name(ts_hybrid_job_kind_of(r->job)));
  char mode[32];
  if (r->o->mode == TS_HYBRID_MODE_STATIC) snprintf(mode, sizeof mode, "static:%d", r->o->static_k);
  else snprintf(mode, sizeof mode, "%s", mode_name(r->o->mode));
  cJSON_AddStringToObject(o, "mode", mode);
  cJSON_AddNumberToObject(o, "blocks", ts_hybrid_job_blocks(r->job));
  cJSON_AddNumberToObject(o, "rounds", r->nrounds);
  cJSON_AddNumberToObject(o, "slots", r->slots);
  cJSON_AddNumberToObject(o, "cores", r->cores);
  cJSON *dv = cJSON_AddObjectToObject(o, "device");
  cJSON_AddStringToObject(dv, "kind", "modelled device");
  cJSON_AddStringToObject(dv, "name", r->dev->name);
  cJSON_AddBoolToObject(dv, "curves_measured", r->dev->measured);
  cJSON_AddStringToObject(dv, "source", r->dev->source);
  cJSON_AddStringToObject(dv, "results",
                          "device-fed tasks return the reference pass's result after the modelled time (no silicon)");
  cJSON *ten = cJSON_AddArrayToObject(o, "tenant");
  for (int i = 0; i < r->ntenant; i++) {
    double v[3] = {r->tenant[i].t0, r->tenant[i].t1, r->tenant[i].share};
    cJSON_AddItemToArray(ten, cJSON_CreateDoubleArray(v, 3));
  }
  cJSON *pr = cJSON_AddObjectToObject(o, "probe");
  cJSON_AddNumberToObject(pr, "cpu_s_per_unit", r->probe_cpu_s_per_unit);
  cJSON_AddNumberToObject(pr, "feed_s_per_unit", r->probe_feed_s_per_unit);
  cJSON *in = cJSON_AddObjectToObject(o, "initial");
  cJSON_AddStringToObject(in, "mode", r->init_mode ? r->init_mode : "");
  cJSON_AddNumberToObject(in, "device_containers", r->init_k);
  cJSON_AddNumberToObject(in, "predicted_tasks_per_s", r->init_pred);
  cJSON_AddNumberToObject(o, "makespan_s", r->makespan);
  cJSON_AddItemToObject(o, "rounds_s", cJSON_CreateDoubleArray(r->round_s, r->nrounds < 64 ? r->nrounds : 64));
  double cpu = 0, feed = 0, devk = 0;
  int cnt[3] = {0, 0, 0};
  for (int i = 0; i < r->nrec; i++) {
    cpu += r->rec[i].cpu_s;
    feed += r->rec[i].feed_s;
    cnt[r->rec[i].cls]++;
  }
  for (int i = 0; i < r->nkern; i++) devk += r->kern_e[i] - r->kern_s[i];
  cJSON *b = cJSON_AddObjectToObject(o, "busy_s");
  cJSON_AddNumberToObject(b, "cpu_tasks", cpu);
  cJSON_AddNumberToObject(b, "device_feed", feed);
  cJSON_AddNumberToObject(b, "device_kernels", devk);
  cJSON *tk = cJSON_AddObjectToObject(o, "tasks");
  cJSON_AddNumberToObject(tk, "cpu", cnt[0]);
  cJSON_AddNumberToObject(tk, "dev", cnt[1]);
  cJSON_AddNumberToObject(tk, "split", cnt[2]);
  /* the timeline: [round, block, container, class (0 cpu, 1 device, 2 split), start, end] */
  cJSON *tl0 = cJSON_AddArrayToObject(o, "timeline");
  for (int i = 0; i < r->nrec; i++) {
    const ts__hybrid_rec *e = &r->rec[i];
    double v[6] = {e->round, e->task, e->slot, e->cls, round(e->t0 * 1e6) / 1e6, round(e->t1 * 1e6) / 1e6};
    cJSON_AddItemToArray(tl0, cJSON_CreateDoubleArray(v, 6));
  }
  cJSON *ev = cJSON_AddArrayToObject(o, "reassignments");
  for (int i = 0; i < r->nev; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "t_s", r->ev[i].t - r->epoch);
    cJSON_AddNumberToObject(e, "from", r->ev[i].from_k);
    cJSON_AddNumberToObject(e, "to", r->ev[i].to_k);
    cJSON_AddStringToObject(e, "reason", r->ev[i].reason);
    cJSON_AddItemToArray(ev, e);
  }
  double ce, de, rs;
  tail_of(r, &ce, &de, &rs);
  cJSON *tl = cJSON_AddObjectToObject(o, "tail");
  double last = r->round_s[(r->nrounds < 64 ? r->nrounds : 64) - 1];
  bool both = ce > 0 && de > 0;
  cJSON_AddNumberToObject(tl, "cpu_end_s", ce > 0 ? ce - rs : 0);
  cJSON_AddNumberToObject(tl, "dev_end_s", de > 0 ? de - rs : 0);
  cJSON_AddNumberToObject(tl, "gap_s", both ? fabs(ce - de) : 0);
  cJSON_AddNumberToObject(tl, "gap_frac", both && last > 0 ? fabs(ce - de) / last : 0);
  cJSON_AddBoolToObject(tl, "both_classes", both);
  cJSON *orc = cJSON_AddObjectToObject(o, "oracle");
  cJSON_AddNumberToObject(orc, "makespan_s", r->oracle_makespan);
  cJSON_AddNumberToObject(orc, "device_containers", r->oracle_k);
  cJSON_AddNumberToObject(orc, "device_tasks", r->oracle_ndev);
  cJSON_AddNumberToObject(orc, "ratio", r->oracle_makespan > 0 ? r->makespan / r->oracle_makespan : 0);
  cJSON_AddBoolToObject(o, "output_ok", r->output_ok);
  cJSON_AddStringToObject(o, "output_note", r->output_note);
  ts_provenance p;
  ts_provenance_here(&p, ts_isa_active(), r->cores);
  cJSON_AddItemToObject(o, "provenance", ts__provenance_json(&p));
  return ts__json_out(o, "hybrid report", json);
}

static const uint32_t k_col[3] = {0x4e79a7, 0xf28e2b, 0xb07aa1};

ts_status ts__hybrid_svg(const ts__hybrid_result *r, char **out) {
  double span = r->makespan;
  for (int i = 0; i < r->nrec; i++) span = fmax(span, r->rec[i].t1);
  if (!(span > 0)) span = 1e-6;
  double left = 110, right = 20, top = 60, row = 26, W = 1200;
  int lanes = r->slots + 1;
  double H = top + lanes * row + 90;
  double pw = W - left - right, sx = pw / span;
  ts_svg *svg;
  TS_TRY(ts_svg_create(&svg, W, H));
  char t[320];
  snprintf(t, sizeof t, "%s on %s, %s: makespan %.2f s (oracle split %.2f s), %d containers on %d cores",
           ts_hybrid_job_name(ts_hybrid_job_kind_of(r->job)), r->engine,
           r->o->mode == TS_HYBRID_MODE_AUTO ? "auto" : mode_name(r->o->mode), r->makespan, r->oracle_makespan, r->slots,
           r->cores);
  ts_svg_text(svg, 10, 18, 13, 's', 0x202020, t);
  snprintf(t, sizeof t, "modelled device: %s%s", r->dev->name, r->dev->measured ? " (measured curves)" : "");
  ts_svg_text(svg, 10, 36, 11, 's', 0x555555, t);
  double gy = top + lanes * row;
  for (int k = 0; k <= 10; k++) {
    double x = left + pw * k / 10;
    ts_svg_line(svg, x, top - 4, x, gy, 0xd8d8d8, 1);
    snprintf(t, sizeof t, "%.3g", span * k / 10);
    ts_svg_text(svg, x, gy + 16, 10, 'm', 0x202020, t);
  }
  ts_svg_text(svg, left + pw / 2, gy + 32, 11, 'm', 0x202020, "time (s)");
  for (int i = 0; i < r->slots; i++) {
    snprintf(t, sizeof t, "container %d", i);
    ts_svg_text(svg, left - 8, top + i * row + row * 0.65, 11, 'e', 0x202020, t);
  }
  ts_svg_text(svg, left - 8, top + r->slots * row + row * 0.65, 11, 'e', 0x202020, "device kernels");
  for (int i = 0; i < r->ntenant; i++) {
    double x0 = left + fmin(r->tenant[i].t0, span) * sx, x1 = left + fmin(r->tenant[i].t1, span) * sx;
    ts_svg_rect(svg, x0, top + r->slots * row + 2, fmax(x1 - x0, 0.5), row - 4, 0xe0e0e0);
  }
  for (int i = 0; i < r->nrec; i++) {
    const ts__hybrid_rec *e = &r->rec[i];
    double x = left + e->t0 * sx, w = (e->t1 - e->t0) * sx;
    ts_svg_rect(svg, x, top + e->slot * row + 3, w > 0.5 ? w : 0.5, row - 6, k_col[e->cls]);
  }
  for (int i = 0; i < r->nkern; i++) {
    double x = left + (r->kern_s[i] - r->epoch) * sx, w = (r->kern_e[i] - r->kern_s[i]) * sx;
    ts_svg_rect(svg, x, top + r->slots * row + 5, w > 0.5 ? w : 0.5, row - 10, k_col[1]);
  }
  for (int i = 0; i < r->nev; i++) {
    double x = left + (r->ev[i].t - r->epoch) * sx;
    ts_svg_line(svg, x, top - 6, x, gy, 0xd62728, 1.2);
    snprintf(t, sizeof t, "%d>%d", r->ev[i].from_k, r->ev[i].to_k);
    ts_svg_text(svg, x + 2, top - 8, 9, 's', 0xd62728, t);
  }
  double ly = gy + 56;
  const char *lab[4] = {"CPU task", "device-fed task (host part + wait)", "split task (tail)", "co-tenant on the device"};
  for (int i = 0; i < 4; i++) {
    double x = left + i * 250;
    ts_svg_rect(svg, x, ly - 9, 12, 10, i < 3 ? k_col[i] : 0xe0e0e0);
    ts_svg_text(svg, x + 16, ly, 10, 's', 0x202020, lab[i]);
  }
  ts_svg_text(svg, left, ly + 18, 10, 's', 0xd62728, "red lines: the controller's role changes (device-fed containers from>to)");
  size_t len;
  ts_status s = ts_svg_finish(svg, out, &len);
  ts_svg_destroy(svg);
  return s;
}
