/* plan3d pictures: a plan's simulated 1F1B schedule as a Gantt chart, and the Pareto front of step
 * time vs dollars per step over cluster compositions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan3d/plan3d_internal.h"
#include "tessera/plot.h"

#define INK 0x202020u
#define GRID 0xd8d8d8u

/* A "nice" tick step for a span: 1, 2 or 5 x 10^k giving about n ticks. */
static double tick_step(double span, int n) {
  double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

ts_status ts_p3_plan_gantt_svg(const ts_p3_plan *p, const char *path) {
  if (!p || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_plan_gantt_svg: NULL argument");
  int S = p->pp, m = p->micro_batches;
  double fwd[TS_P3_MAX_STAGES], bwd[TS_P3_MAX_STAGES], p2p[TS_P3_MAX_STAGES];
  for (int s = 0; s < S; s++) fwd[s] = p->stages[s].fwd, bwd[s] = p->stages[s].bwd, p2p[s] = p->stages[s].send;
  ts_p3_event *ev = malloc((size_t)2 * S * m * sizeof *ev);
  if (!ev) return ts_error(TS_ERR_OOM, "out of memory for %d x %d schedule events", S, m);
  double span;
  ts_status st = ts_p3_simulate_1f1b(S, m, fwd, bwd, S > 1 ? p2p : NULL, &span, ev);
  if (st != TS_OK) {
    free(ev);
    return st;
  }
  double total = p->step > span ? p->step : span;
  double left = 150, right = 30, top = 62, row = S > 24 ? 14 : 26, W = 1100, H = top + S * row + 70;
  double pw = W - left - right, sx = pw / total;
  ts_svg *svg;
  st = ts_svg_create(&svg, W, H);
  if (st != TS_OK) {
    free(ev);
    return st;
  }
  char t[256];
  snprintf(t, sizeof t, "%s on %s", p->model.name, p->cluster);
  ts_svg_text(svg, 10, 16, 13, 's', INK, t);
  snprintf(t, sizeof t, "dp %d, pp %d, micro-batch %d x %d; step %.1f ms (pipeline %.1f ms)", p->dp, p->pp, p->mbs, m,
           p->step * 1e3, p->pipeline * 1e3);
  ts_svg_text(svg, 10, 32, 12, 's', INK, t);
  ts_svg_text(svg, 10, 47, 10, 's', 0x555555u,
              "simulated 1F1B: blue forward, orange backward (shade: micro-batch); grey data-parallel all-reduce, "
              "purple embedding all-reduce, green optimizer");
  /* time grid */
  double step = tick_step(total * 1e3, 8);
  for (double x = 0; x <= total * 1e3 + 1e-9; x += step) {
    double px = left + x * 1e-3 * sx;
    ts_svg_line(svg, px, top - 4, px, top + S * row, GRID, 1);
    snprintf(t, sizeof t, "%g", x);
    ts_svg_text(svg, px, top + S * row + 16, 10, 'm', INK, t);
  }
  ts_svg_text(svg, left + pw / 2, top + S * row + 34, 11, 'm', INK, "time (ms)");
  for (int s = 0; s < S; s++) {
    const ts_p3_stage *q = &p->stages[s];
    double y = top + s * row;
    snprintf(t, sizeof t, "%d %s tp%d L%d", s, p->gpu_name[q->type], q->tp, q->nlayers);
    ts_svg_text(svg, left - 6, y + row * 0.7, S > 24 ? 9 : 11, 'e', INK, t);
    double last_end = 0;
    for (int k = 0; k < 2 * m; k++) {
      const ts_p3_event *e = &ev[(size_t)2 * m * s + k];
      double shade = m > 1 ? (double)e->micro / (m - 1) : 0;
      uint32_t c;
      if (e->backward) {
        int g = (int)(150 + 60 * shade);
        c = 0xe0u << 16 | (uint32_t)g << 8 | 0x40u;
      } else {
        int r = (int)(40 + 120 * shade), g = (int)(100 + 100 * shade);
        c = (uint32_t)r << 16 | (uint32_t)g << 8 | 0xe0u;
      }
      double x0 = left + e->start * sx, w = (e->end - e->start) * sx;
      ts_svg_rect(svg, x0, y + 2, w > 0.5 ? w : 0.5, row - 4, c);
      if (w > 14 && row >= 20) {
        snprintf(t, sizeof t, "%d", e->micro);
        ts_svg_text(svg, x0 + w / 2, y + row * 0.65, 9, 'm', 0xffffffu, t);
      }
      if (e->end > last_end) last_end = e->end;
    }
    /* after the flush: this stage's all-reduce, the embedding pair's, the optimizer */
    double x = last_end;
    if (q->allreduce > 0) ts_svg_rect(svg, left + x * sx, y + 2, q->allreduce * sx, row - 4, 0x9a9a9au), x += q->allreduce;
    if ((q->embedding || q->head) && p->embed_allreduce > 0 && S > 1) {
      ts_svg_rect(svg, left + x * sx, y + 2, p->embed_allreduce * sx, row - 4, 0x9a5fc0u);
      x += p->embed_allreduce;
    }
    if (q->update > 0) ts_svg_rect(svg, left + x * sx, y + 2, q->update * sx, row - 4, 0x3aa05au);
  }
  ts_svg_frame(svg, left, top - 4, pw, S * row + 4, INK, 1);
  free(ev);
  ts_status w = ts_svg_write(svg, path);
  ts_svg_destroy(svg);
  return w;
}

static void composition(const ts_p3_plan *p, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = 0;
  for (int k = 0; k < p->ntypes && o < cap; k++)
    if (p->node_counts[k])
      o += (size_t)snprintf(buf + o, cap - o, "%s%dx %s", o ? " + " : "", p->node_counts[k], p->type_name[k]);
}

ts_status ts_p3_pareto_svg(const ts_p3_plan *front, int n, const ts_p3_plan *baseline, const char *path) {
  if (!front || n < 1 || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_pareto_svg: empty front or NULL path");
  double W = 900, H = 560, left = 90, right = 40, top = 50, bottom = 70;
  double pw = W - left - right, ph = H - top - bottom;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (int i = 0; i <= n; i++) {
    const ts_p3_plan *p = i < n ? &front[i] : baseline;
    if (!p) continue;
    double x = p->usd_per_step * 1e3, y = p->step * 1e3;
    if (x < xmin) xmin = x;
    if (x > xmax) xmax = x;
    if (y < ymin) ymin = y;
    if (y > ymax) ymax = y;
  }
  double dx = (xmax - xmin) > 0 ? (xmax - xmin) : xmax * 0.2 + 1e-9, dy = (ymax - ymin) > 0 ? (ymax - ymin) : ymax * 0.2 + 1e-9;
  xmin -= 0.08 * dx, xmax += 0.08 * dx, ymin -= 0.08 * dy, ymax += 0.08 * dy;
  if (xmin < 0) xmin = 0;
  if (ymin < 0) ymin = 0;
  ts_svg *svg;
  TS_TRY(ts_svg_create(&svg, W, H));
  char t[200];
  snprintf(t, sizeof t, "%s: step time vs cost per step, best plan of each cluster composition on the front",
           front[0].model.name);
  ts_svg_text(svg, left, 26, 14, 's', INK, t);
#define PX(v) (left + ((v) - xmin) / (xmax - xmin) * pw)
#define PY(v) (top + ph - ((v) - ymin) / (ymax - ymin) * ph)
  double xs = tick_step(xmax - xmin, 6), ys = tick_step(ymax - ymin, 6);
  for (double v = ceil(xmin / xs) * xs; v <= xmax; v += xs) {
    ts_svg_line(svg, PX(v), top, PX(v), top + ph, GRID, 1);
    snprintf(t, sizeof t, "%g", v);
    ts_svg_text(svg, PX(v), top + ph + 16, 10, 'm', INK, t);
  }
  for (double v = ceil(ymin / ys) * ys; v <= ymax; v += ys) {
    ts_svg_line(svg, left, PY(v), left + pw, PY(v), GRID, 1);
    snprintf(t, sizeof t, "%g", v);
    ts_svg_text(svg, left - 6, PY(v) + 4, 10, 'e', INK, t);
  }
  ts_svg_text(svg, left + pw / 2, H - 24, 12, 'm', INK, "cost per step (milli-dollars)");
  ts_svg_text(svg, 18, top - 12, 12, 's', INK, "step time (ms)");
  /* the front as a staircase, then its points and labels */
  for (int i = 0; i + 1 < n; i++) {
    double x0 = PX(front[i].usd_per_step * 1e3), y0 = PY(front[i].step * 1e3);
    double x1 = PX(front[i + 1].usd_per_step * 1e3), y1 = PY(front[i + 1].step * 1e3);
    ts_svg_line(svg, x0, y0, x0, y1, 0x2a6fdbu, 1.5);
    ts_svg_line(svg, x0, y1, x1, y1, 0x2a6fdbu, 1.5);
  }
  for (int i = 0; i < n; i++) {
    double x = PX(front[i].usd_per_step * 1e3), y = PY(front[i].step * 1e3);
    ts_svg_rect(svg, x - 4, y - 4, 8, 8, 0x2a6fdbu);
    composition(&front[i], t, sizeof t);
    ts_svg_text(svg, x + 7, y - 6, 10, 's', INK, t);
  }
  if (baseline) {
    double x = PX(baseline->usd_per_step * 1e3), y = PY(baseline->step * 1e3);
    ts_svg_rect(svg, x - 4, y - 4, 8, 8, 0xd03030u);
    ts_svg_text(svg, x + 7, y + 14, 10, 's', 0xd03030u, "Megatron-LM default (full cluster)");
  }
#undef PX
#undef PY
  ts_svg_frame(svg, left, top, pw, ph, INK, 1);
  ts_status w = ts_svg_write(svg, path);
  ts_svg_destroy(svg);
  return w;
}
