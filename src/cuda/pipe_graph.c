/* Flattening a batch of frames of a pipeline into the device executor's task graph
 * (pipe_cuda_internal.h): tasks, initial dependence counters, consumer lists in CSR.
 *
 * The grids and the producer-tile ranges are the CPU runtime's (pipe_run.c: tile_rect,
 * producer_range) for a whole frame (no row range): the counters must count the same relation the
 * kernels' input spans read, so both come from ts_pipe_input_span. The CSR is built from the
 * consumer side (each consumer lists its producer tiles, each producer receives the consumer), so
 * a producer's list releases exactly what its consumers counted; tests/cuda/test_pipe_cuda.c
 * checks both against a brute-force intersection of tile rectangles with the spans. */
#include <stdlib.h>
#include <string.h>

#include "cuda/pipe_cuda_internal.h"

static ts_pipe_rect grid_rect(const ts__pd_grid *g, int32_t t) {
  int tx = t % g->nx, ty = t / g->nx;
  ts_pipe_rect r;
  r.x0 = tx * g->tw;
  r.x1 = r.x0 + g->tw < g->w ? r.x0 + g->tw : g->w;
  r.y0 = ty * g->th;
  r.y1 = r.y0 + g->th < g->h ? r.y0 + g->th : g->h;
  return r;
}

/* Producer tiles [ax, bx] x [ay, by] of pg (level plvl) that consumer rect r (level clvl) reads
 * through `halo`: never empty (ts_pipe_input_span clamps into the plane). */
static void producer_range(const ts__pd_grid *pg, int plvl, int clvl, int halo, ts_pipe_rect r, int *ax, int *bx,
                           int *ay, int *by) {
  int xlo, xhi, ylo, yhi;
  ts_pipe_input_span(clvl, plvl, halo, pg->w, r.x0, r.x1, &xlo, &xhi);
  ts_pipe_input_span(clvl, plvl, halo, pg->h, r.y0, r.y1, &ylo, &yhi);
  *ax = xlo / pg->tw;
  *bx = xhi / pg->tw;
  *ay = ylo / pg->th;
  *by = yhi / pg->th;
}

void ts__pd_graph_free(ts__pd_graph *g) {
  free(g->task);
  free(g->cnt0);
  free(g->off);
  free(g->cons);
  memset(g, 0, sizeof *g);
}

/* Calls edge(p, c) for every (producer task p, consumer task c) edge, consumers in ascending
 * order; returns c's producer count in cnt[c]. */
typedef void (*edge_fn)(int32_t p, int32_t c, void *u);

static void walk_edges(const ts_pipe_desc *d, const ts__pd_graph *g, int32_t *cnt, edge_fn edge, void *u) {
  int last = d->nstages - 1;
  for (int32_t f = 0; f < g->frames; f++)
    for (int s = 0; s < d->nstages; s++) {
      const ts_pipe_stage *st = &d->stage[s];
      const ts__pd_grid *cg = &g->g[s];
      for (int32_t t = 0; t < cg->n; t++) {
        int32_t c = f * g->per_frame + cg->base + t;
        ts_pipe_rect r = grid_rect(cg, t);
        int32_t k = 0;
        for (int i = 0; i < st->nin; i++) {
          int from = st->in[i].from;
          int32_t pf = f;
          if (from == TS_PIPE_FEEDBACK) {
            if (f == 0) continue; /* the launch's prev plane (or none): no producer tiles */
            from = last;
            pf = f - 1;
          }
          const ts__pd_grid *pg = &g->g[from];
          int ax, bx, ay, by;
          producer_range(pg, d->stage[from].level, st->level, st->in[i].halo, r, &ax, &bx, &ay, &by);
          for (int ty = ay; ty <= by; ty++)
            for (int tx = ax; tx <= bx; tx++) {
              if (edge) edge(pf * g->per_frame + pg->base + ty * pg->nx + tx, c, u);
              k++;
            }
        }
        if (cnt) cnt[c] = k;
      }
    }
}

static void count_out(int32_t p, int32_t c, void *u) {
  (void)c;
  ((int64_t *)u)[p + 1]++;
}

typedef struct fill_state {
  int64_t *next;
  int32_t *cons;
} fill_state;

static void fill_out(int32_t p, int32_t c, void *u) {
  fill_state *fs = u;
  fs->cons[fs->next[p]++] = c;
}

ts_status ts__pd_graph_build(const ts_pipe_desc *d, int frames, int tile_w, int tile_h, ts__pd_graph *g) {
  memset(g, 0, sizeof *g);
  TS_TRY(ts_pipe_desc_check(d));
  if (frames < 1 || tile_w < 1 || tile_h < 1)
    return ts_error(TS_ERR_INVALID_ARG, "pipe graph: %d frames, tile %dx%d (each must be >= 1)", frames, tile_w,
                    tile_h);
  g->nstages = d->nstages;
  g->frames = frames;
  int64_t per = 0;
  for (int s = 0; s < d->nstages; s++) {
    ts__pd_grid *gr = &g->g[s];
    int lv = d->stage[s].level;
    gr->tw = tile_w >> lv > 0 ? tile_w >> lv : 1;
    gr->th = tile_h >> lv > 0 ? tile_h >> lv : 1;
    ts_pipe_stage_size(d, s, &gr->w, &gr->h);
    gr->nx = (gr->w + gr->tw - 1) / gr->tw;
    gr->ny = (gr->h + gr->th - 1) / gr->th;
    gr->base = (int32_t)per;
    int64_t n = (int64_t)gr->nx * gr->ny;
    per += n;
    if (per * frames > INT32_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "pipe graph %s: %d frames of tile %dx%d exceed 2^31 - 1 tasks",
                      d->name ? d->name : "", frames, tile_w, tile_h);
    gr->n = (int32_t)n;
  }
  g->per_frame = (int32_t)per;
  g->n = (int32_t)(per * frames);
  size_t n = (size_t)g->n;
  g->task = malloc(n * sizeof *g->task);
  g->cnt0 = malloc(n * sizeof *g->cnt0);
  g->off = calloc(n + 1, sizeof *g->off);
  if (!g->task || !g->cnt0 || !g->off) {
    ts__pd_graph_free(g);
    return ts_error(TS_ERR_OOM, "pipe graph: %zu tasks", n);
  }
  for (int32_t f = 0; f < frames; f++)
    for (int s = 0; s < d->nstages; s++)
      for (int32_t t = 0; t < g->g[s].n; t++) {
        ts_pipe_rect r = grid_rect(&g->g[s], t);
        ts__pd_task *k = &g->task[(size_t)f * per + g->g[s].base + t];
        k->frame = f, k->stage = s, k->x0 = r.x0, k->y0 = r.y0, k->x1 = r.x1, k->y1 = r.y1;
      }

  /* out-degrees, then offsets, then the lists */
  walk_edges(d, g, g->cnt0, count_out, g->off);
  for (size_t i = 0; i < n; i++) {
    if (g->off[i + 1] > INT32_MAX) {
      ts__pd_graph_free(g);
      return ts_error(TS_ERR_INVALID_ARG, "pipe graph: a task with more than 2^31 - 1 consumers");
    }
    g->off[i + 1] += g->off[i];
  }
  int64_t ne = g->off[n];
  g->cons = malloc((size_t)(ne > 0 ? ne : 1) * sizeof *g->cons);
  int64_t *next = malloc((n + 1) * sizeof *next);
  if (!g->cons || !next) {
    free(next);
    ts__pd_graph_free(g);
    return ts_error(TS_ERR_OOM, "pipe graph: %lld consumer edges", (long long)ne);
  }
  memcpy(next, g->off, (n + 1) * sizeof *next);
  fill_state fs = {next, g->cons};
  walk_edges(d, g, NULL, fill_out, &fs);
  free(next);
  for (size_t i = 0; i < n; i++) g->nready += g->cnt0[i] == 0;
  return TS_OK;
}
