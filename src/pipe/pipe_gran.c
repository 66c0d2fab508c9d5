/* Granularity-oblivious tiling (after GOPipe): the runtime, not the programmer, picks the tile.
 *
 * The candidates are a ladder of tile shapes (widths x heights, each doubling, capped at the
 * domain). The start comes from a model: a tile must carry enough work that the per-task runtime
 * cost (measured: a deque push and pop and a counter update) stays under 2% of it; its planes
 * across the pipeline's stages should fit in the private L2 (so a consumer finds its producer's
 * tile there) unless the frames in flight fit in the shared L3 anyway; and the workers need work:
 * four tiles per stage each, or, when frames do not depend on each other, one tile per stage of
 * each frame in flight. A candidate is measured over a window of frames (at least two and 10 ms,
 * so a small frame's jitter does not decide), and then, window by window, the measured completion
 * interval of frames decides: the runtime probes the start's
 * neighbours on the ladder (one doubling or halving of width or height), moves to a better one
 * (by more than 2%), probes again from there, and settles when no neighbour is better. Settled, it
 * probes again only when the chosen tile's frames drift by more than 15% from their cost at
 * settling (another input, a busy neighbour), so a steady stream pays for no probes at all. */
#include <math.h>
#include <string.h>

#include "pipe/pipe_internal.h"

#define GRAN_MOVE 0.98  /* a neighbour must be 2% faster to move */
#define GRAN_DRIFT 0.2 /* settled: a drift of the best's cost that starts a new probe round */
/* A measurement window lasts at least this long and two frames, and holds a multiple of the frames
 * in flight: with k frames overlapping, completions come in bursts of k, and a window cut inside a
 * burst would read a few percent fast or slow (the size of the moves it must judge). */
#define GRAN_WINDOW_S 10e-3

static int ladder(int n, int lo, int *out, int max) {
  int k = 0;
  for (int v = lo; k < max; v *= 2) {
    if (v >= n) {
      out[k++] = n;
      break;
    }
    out[k++] = v;
  }
  return k;
}

int ts_pipe_ladder(int width, int height, int *tile_w, int *tile_h, int cap) {
  ts__gran g;
  ts__gran_model m = {1e-6, 1e-8, 4, 1 << 20, 1 << 25, 1, 1, false, 1};
  ts__gran_init(&g, width, height, &m, 0, 0);
  int n = g.ncand < cap ? g.ncand : cap;
  for (int k = 0; k < n; k++) tile_w[k] = g.cw[k], tile_h[k] = g.ch[k];
  return n;
}

void ts__gran_init(ts__gran *g, int W, int H, const ts__gran_model *m, int start_w, int start_h) {
  memset(g, 0, sizeof *g);
  int ws[8], hs[8];
  g->gw = ladder(W, 32, ws, 8);
  g->gh = ladder(H, 2, hs, 8);
  if (g->gw * g->gh > TS__GRAN_MAXC) g->gh = TS__GRAN_MAXC / g->gw;
  g->ncand = 0;
  for (int i = 0; i < g->gw; i++)
    for (int j = 0; j < g->gh; j++) {
      g->cw[g->ncand] = ws[i];
      g->ch[g->ncand] = hs[j];
      g->ncand++;
    }
  g->overhead_s = m->o;
  g->inflight = m->inflight > 0 ? m->inflight : 1;
  g->frames = m->frames;
  int pick = -1;
  if (start_w > 0 && start_h > 0) { /* the nearest ladder entry to the caller's start */
    double bd = INFINITY;
    for (int k = 0; k < g->ncand; k++) {
      double dd = fabs(log((double)g->cw[k] / start_w)) + fabs(log((double)g->ch[k] / start_h));
      if (dd < bd) bd = dd, pick = k;
    }
  } else {
    /* The model: the largest area that fits the cache and gives the workers enough tiles; at
     * least the area whose work hides the per-task cost 50x. Among shapes of about that area, the
     * widest (rows are contiguous: longer inner loops, fewer halo rows re-read). */
    int nt = m->threads > 0 ? m->threads : 1;
    double frame_bytes = m->bytes_px * W * H * (m->inflight > 0 ? m->inflight : 1);
    double a_cache = m->bytes_px > 0 && frame_bytes > 0.5 * m->l3 ? m->l2 / m->bytes_px : 1e18;
    double a_par = m->feedback || m->inflight < 2 ? (double)W * H / (4.0 * nt)
                                                  : (double)W * H * m->inflight / (double)nt;
    double a_ovh = m->c > 0 ? 50.0 * m->o / m->c : 0;
    double area = fmin(a_cache, a_par);
    if (area < a_ovh) area = fmin(a_ovh, (double)W * H);
    /* the widest ladder width whose two-row tile fits the area (full rows when they do), then the
       height nearest the area */
    int iw = 0;
    for (int i = 0; i < g->gw; i++)
      if ((double)g->cw[i * g->gh] * g->ch[0] <= area) iw = i;
    double bd = INFINITY;
    for (int j = 0; j < g->gh; j++) {
      int k = iw * g->gh + j;
      double dd = fabs(log((double)g->cw[k] * g->ch[k] / area));
      if (dd < bd) bd = dd, pick = k;
    }
  }
  g->start = g->cur = g->best = pick;
}

void ts__gran_min_tile(const ts__gran *g, int *w, int *h) {
  *w = g->cw[0];
  *h = g->ch[0];
}

void ts__gran_observe(ts__gran *g, int idx, double s) {
  if (idx < 0 || idx >= g->ncand || !(s > 0)) return;
  if (g->nobs++ == 0) return; /* the run's first frame pays the planes' page faults */
  if (idx != g->cur) return;  /* a frame started before the switch */
  g->win_s += s;
  g->win_n++;
}

/* A neighbour of k on the ladder not measured yet: the next to probe, or -1. */
static int unprobed_neighbour(const ts__gran *g, int k) {
  int iw = k / g->gh, ih = k % g->gh;
  const int d[4][2] = {{0, 1}, {0, -1}, {1, 0}, {-1, 0}};
  for (int i = 0; i < 4; i++) {
    int a = iw + d[i][0], b = ih + d[i][1];
    if (a < 0 || a >= g->gw || b < 0 || b >= g->gh) continue;
    int n = a * g->gh + b;
    if (g->nmeas[n] < 1) return n;
  }
  return -1;
}

int ts__gran_next(ts__gran *g) {
  if (g->win_n < 2 || g->win_s < GRAN_WINDOW_S || g->win_n % g->inflight) return g->cur; /* still open */
  double c = g->win_s / g->win_n;
  g->cost[g->cur] = g->nmeas[g->cur] > 0 && g->cost[g->cur] > 0 ? 0.5 * g->cost[g->cur] + 0.5 * c : c;
  g->nmeas[g->cur]++;
  if (g->cur != g->best) g->probe_frames += g->win_n;
  g->last_win = g->win_n;
  g->win_s = 0;
  g->win_n = 0;
  /* the exploration budget: probes take at most a quarter of the run's frames (a short run cannot
     pay for a search; it keeps the model's start or what it has found) */
  bool may_probe = (double)(g->probe_frames + g->last_win) <= 0.25 * (double)g->frames;
  /* the current best: the fastest measured twice (a probe that looks faster after one window is
     measured again before the runtime moves to it: one lucky window must not decide) */
  for (int k = 0; k < g->ncand; k++) {
    if (k == g->best || g->cost[k] <= 0) continue;
    if (g->cost[g->best] > 0 && g->cost[k] >= GRAN_MOVE * g->cost[g->best]) continue;
    if (g->nmeas[k] < 2 && may_probe) return g->cur = k; /* confirm it */
    if (g->nmeas[k] < 2) continue;
    g->best = k;
  }
  if (g->cost[g->best] <= 0) return g->cur = g->best; /* measure the start first */
  int n = may_probe ? unprobed_neighbour(g, g->best) : -1;
  if (n >= 0) {
    g->settled_cost = 0;
    return g->cur = n;
  }
  if (g->settled_cost <= 0) {
    g->settled_cost = g->cost[g->best];
  } else if (fabs(g->cost[g->best] / g->settled_cost - 1) > GRAN_DRIFT) { /* drifted: probe again */
    g->settled_cost = 0;
    int iw = g->best / g->gh, ih = g->best % g->gh;
    const int d[4][2] = {{0, 1}, {0, -1}, {1, 0}, {-1, 0}};
    for (int i = 0; i < 4; i++) {
      int a = iw + d[i][0], b = ih + d[i][1];
      if (a < 0 || a >= g->gw || b < 0 || b >= g->gh) continue;
      g->nmeas[a * g->gh + b] = 0;
      g->cost[a * g->gh + b] = 0;
    }
  }
  return g->cur = g->best;
}
