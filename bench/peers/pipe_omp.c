/* pipe_omp: the pipeline apps (tessera/pipe.h) run as OpenMP tasks with depend clauses, a peer the
 * tessera pipe runtime is measured against (bench/peers/pipe_peers.py runs both side by side).
 *
 *   pipe_omp --app NAME [--size WxH] [--frames N] [--threads T] [--tile WxH|best] [--inflight K]
 *            [--order wave|stage|best] [--repeats R] [--sweep-frames N] [--check] [--jitter NS] [--json]
 *
 * The same tasks as the runtime: one per (frame, stage, tile) over the same tile grids (a stage at
 * level l uses tile >> l, at least 1), calling the same stage kernels on the same plane layout
 * (plane [c][h][w], row = w). A task depends on exactly the producer tiles the kernel contract makes
 * it read (ts_pipe_input_span, the function the runtime's counters come from) and writes its own.
 *
 * This file is also the peers' shared driver (argument parsing, apps and planes, the tile sweep of
 * --tile best, the bit-exact check, the JSON): pipe_tbb.cpp is built with this file compiled with
 * TS_PIPE_PEER_DRIVER_ONLY, which leaves out the OpenMP runner and main, so both peers measure,
 * check and report the same way. The driver's interface for a runner is pipe_peer_driver.h, which
 * both include.
 *
 * How the OpenMP runner expresses the pipeline, and why this is its best configuration:
 *  - One producer (a `single` region) creates every task; dependences only order sibling tasks, so
 *    one parent must create them all. Each input's producer tiles are a rectangle of the producer's
 *    tile grid, given exactly with an OpenMP 5.0 iterator: depend(iterator(y = ay:by+1, x = ax:bx+1),
 *    in: dep[y * nx + x]) (gcc 12 / libgomp support it; the compiler expands the iterator into an
 *    address list at run time, no duplicates and no fixed maximum). The output is depend(out:) on the
 *    task's own tile. Dependence addresses are bytes of a per-slot array, one per (stage, tile).
 *  - Frames go to K+1 buffer slots for a feedback app (frame f reads slot (f-1)'s last plane while
 *    writing its own) and K slots otherwise, like the runtime. Reusing a slot is safe by the depend
 *    semantics alone: frame f+slots's depend(out:) on a tile's address orders it after every earlier
 *    depend(in:) on that address (the reads of frame f's consumers and of frame f+1's feedback).
 *  - At most K frames in flight: before creating frame f the producer waits, with
 *    `taskwait depend(in:)` on frame f-K's last-stage tiles, which in libgomp runs ready tasks while
 *    it waits (gomp_task_maybe_wait_for_dependencies) rather than idling. The wait is issued in
 *    chunks of at most 4096 addresses: gcc puts an iterator's address list on the stack (alloca),
 *    and a whole frame of small tiles would not fit a thread's stack.
 *  - Creation order. libgomp's team queue is FIFO and, past 64 queued tasks per thread, the producer
 *    runs each new task itself, so creation order is close to execution order, and it decides cache
 *    reuse. "wave": for each row of tiles of the source stages, the rows of every later stage whose
 *    producer rows are all created, so a consumer is queued soon after its producers (their tiles
 *    still in cache); "stage": stage after stage (more tasks ready at once, less locality). Which
 *    wins depends on the app and the tile (measured: wave far ahead on edge, stage ahead on cnn), so
 *    --tile best sweeps both with every tile. Either is a topological order, as it must be: a
 *    depend(in:) only sees tasks created before it, so no consumer is created before its producers.
 *  - OMP_WAIT_POLICY / OMP_PROC_BIND are the environment's (pipe_peers.py measures and sets the best);
 *    the thread pool is started before the timed run, the way an application keeps it.
 *
 * Timing: the wall clock of a whole run (ts_now): from before the runner starts (after the planes
 * are allocated, as the runtime's wall_s starts after its own) to the last frame's completion.
 *
 * Exit status: 0, 1 on an error or a --check mismatch, 2 on bad usage. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TS_PIPE_PEER_DRIVER_ONLY
#include <omp.h>
#endif

#include "tessera/core.h"
#include "tessera/measure.h"
#include "tessera/pipe.h"

#define MAXS TS_PIPE_MAX_STAGES
#define PP_MAX_INFLIGHT 16
#define PP_MAX_SLOTS (PP_MAX_INFLIGHT + 1)
#define PP_MAX_LADDER TS_PIPE_TUNE_MAX
#define PP_MAX_CAND (2 * PP_MAX_LADDER) /* ladder tiles x the OpenMP runner's two creation orders */

#include "pipe_peer_driver.h"

/* ---- runs ---------------------------------------------------------------------------------- */

typedef struct pp_grid {
  int tw, th, nx, ny, w, h; /* tiles of tw x th over the w x h plane */
  int64_t n;
} pp_grid;

struct pp_run {
  const ts_pipe_desc *d;
  int S, last, nslots, inflight, threads, tile_w, tile_h;
  bool feedback;
  int64_t frames;
  pp_grid g[MAXS];
  float *plane[PP_MAX_SLOTS][MAXS];
  float *keep;      /* --check: [frames][last plane], each frame's output */
  size_t keep_n;    /* floats per frame */
  int *kept;        /* [frames] times pp_frame_done saw each frame */
  unsigned jitter;  /* > 0: a pseudo-random spin of up to this many ns before one task in four (tests) */
};

int pp_stages(const pp_run *r) { return r->S; }
int pp_slots(const pp_run *r) { return r->nslots; }
int pp_inflight(const pp_run *r) { return r->inflight; }
int64_t pp_frames(const pp_run *r) { return r->frames; }
int64_t pp_tiles(const pp_run *r, int s) { return r->g[s].n; }
int pp_tiles_x(const pp_run *r, int s) { return r->g[s].nx; }
int pp_inputs(const pp_run *r, int s) { return r->d->stage[s].nin; }

static ts_pipe_rect tile_rect(const pp_grid *g, int64_t t) {
  int tx = (int)(t % g->nx), ty = (int)(t / g->nx);
  ts_pipe_rect q;
  q.x0 = tx * g->tw;
  q.x1 = q.x0 + g->tw < g->w ? q.x0 + g->tw : g->w;
  q.y0 = ty * g->th;
  q.y1 = q.y0 + g->th < g->h ? q.y0 + g->th : g->h;
  return q;
}

int pp_input_tiles(const pp_run *r, int s, int64_t t, int i, int *from, int *ax, int *bx, int *ay, int *by) {
  const ts_pipe_stage *st = &r->d->stage[s];
  int p = st->in[i].from, fb = p == TS_PIPE_FEEDBACK;
  if (fb) p = r->last;
  const pp_grid *pg = &r->g[p];
  ts_pipe_rect q = tile_rect(&r->g[s], t);
  int xlo, xhi, ylo, yhi;
  ts_pipe_input_span(st->level, r->d->stage[p].level, st->in[i].halo, pg->w, q.x0, q.x1, &xlo, &xhi);
  ts_pipe_input_span(st->level, r->d->stage[p].level, st->in[i].halo, pg->h, q.y0, q.y1, &ylo, &yhi);
  *from = p;
  *ax = xlo / pg->tw;
  *bx = xhi / pg->tw < pg->nx - 1 ? xhi / pg->tw : pg->nx - 1;
  *ay = ylo / pg->th;
  *by = yhi / pg->th < pg->ny - 1 ? yhi / pg->th : pg->ny - 1;
  return fb;
}

static ts_pipe_buf plane_buf(const pp_run *r, int64_t f, int s) {
  ts_pipe_buf b;
  b.data = r->plane[f % r->nslots][s];
  b.w = r->g[s].w;
  b.h = r->g[s].h;
  b.c = r->d->stage[s].channels;
  b.row = b.w;
  b.plane = (int64_t)b.w * b.h;
  return b;
}

static void spin_ns(unsigned ns) {
  double until = ts_now() + ns * 1e-9;
  while (ts_now() < until) {
  }
}

void pp_exec(pp_run *r, int64_t f, int s, int64_t t) {
  const ts_pipe_stage *st = &r->d->stage[s];
  if (r->jitter) { /* a splitmix of (f, s, t): reproducible, different per task */
    uint64_t z = (uint64_t)f * 0x9e3779b97f4a7c15u ^ (uint64_t)s << 40 ^ (uint64_t)t;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    if ((z & 3) == 0) spin_ns((unsigned)(z >> 32) % r->jitter);
  }
  ts_pipe_buf ib[TS_PIPE_MAX_IN];
  const ts_pipe_buf *in[TS_PIPE_MAX_IN];
  for (int i = 0; i < st->nin; i++) {
    int p = st->in[i].from;
    if (p == TS_PIPE_FEEDBACK) {
      if (f == 0) {
        in[i] = NULL; /* no initial state: the kernel makes one */
        continue;
      }
      ib[i] = plane_buf(r, f - 1, r->last);
    } else {
      ib[i] = plane_buf(r, f, p);
    }
    in[i] = &ib[i];
  }
  ts_pipe_buf ob = plane_buf(r, f, s);
  st->run(in, &ob, tile_rect(&r->g[s], t), f, st->params);
}

void pp_frame_done(pp_run *r, int64_t f) {
  if (!r->keep || f < 0 || f >= r->frames) return;
  __atomic_fetch_add(&r->kept[f], 1, __ATOMIC_RELAXED);
  ts_pipe_buf b = plane_buf(r, f, r->last);
  memcpy(r->keep + (size_t)f * r->keep_n, b.data, r->keep_n * sizeof(float)); /* contiguous: row = w */
}

/* ---- one run ------------------------------------------------------------------------------- */

typedef struct pp_cfg {
  const char *app;
  int w, h, threads, inflight, repeats, sweep_frames;
  int64_t frames;
  bool check, json, best;
  int tile_w, tile_h;
  unsigned jitter;
  const char *order; /* the OpenMP runner's creation order: wave, stage or best (NULL: another peer) */
  const char *peer, *runtime, *compiler;
  pp_init init;
  pp_runner run;
} pp_cfg;

/* The creation order the OpenMP runner uses (set by the driver: from --order, or per sweep entry). */
static const char *g_order = "wave";

static void run_free(pp_run *r) {
  for (int j = 0; j < PP_MAX_SLOTS; j++)
    for (int s = 0; s < MAXS; s++) ts_free(r->plane[j][s]);
}

/* Sets r up for a run of `frames` frames of d at tile tw x th: grids and fresh planes (untouched,
 * like the runtime's: first-touch page faults fall inside the run for every contender alike). */
static ts_status run_init(pp_run *r, const ts_pipe_desc *d, const pp_cfg *c, int64_t frames, int tw, int th) {
  memset(r, 0, sizeof *r);
  r->d = d;
  r->S = d->nstages;
  r->last = d->nstages - 1;
  r->threads = c->threads;
  r->inflight = c->inflight;
  r->frames = frames;
  r->tile_w = tw;
  r->tile_h = th;
  r->jitter = c->jitter;
  for (int s = 0; s < r->S; s++)
    for (int i = 0; i < d->stage[s].nin; i++) r->feedback |= d->stage[s].in[i].from == TS_PIPE_FEEDBACK;
  r->nslots = r->inflight + (r->feedback ? 1 : 0);
  for (int s = 0; s < r->S; s++) {
    pp_grid *g = &r->g[s];
    int lv = d->stage[s].level;
    ts_pipe_stage_size(d, s, &g->w, &g->h);
    g->tw = tw >> lv > 0 ? tw >> lv : 1;
    g->th = th >> lv > 0 ? th >> lv : 1;
    g->nx = (g->w + g->tw - 1) / g->tw;
    g->ny = (g->h + g->th - 1) / g->th;
    g->n = (int64_t)g->nx * g->ny;
  }
  for (int j = 0; j < r->nslots; j++)
    for (int s = 0; s < r->S; s++) {
      size_t n = (size_t)r->g[s].w * r->g[s].h * (size_t)d->stage[s].channels * sizeof(float);
      if (!(r->plane[j][s] = ts_malloc(n))) {
        run_free(r);
        return ts_error(TS_ERR_OOM, "pipe peer: plane of stage %d (%zu bytes)", s, n);
      }
    }
  return TS_OK;
}

static int64_t tasks_per_frame(const pp_run *r) {
  int64_t n = 0;
  for (int s = 0; s < r->S; s++) n += r->g[s].n;
  return n;
}

/* One timed run; *wall and *setup in seconds. */
static ts_status timed_run(const ts_pipe_desc *d, const pp_cfg *c, int64_t frames, int tw, int th, float *keep,
                           size_t keep_n, int *kept, double *wall, double *setup, int64_t *ntasks) {
  pp_run r;
  TS_TRY(run_init(&r, d, c, frames, tw, th));
  r.keep = keep;
  r.keep_n = keep_n;
  r.kept = kept;
  if (ntasks) *ntasks = tasks_per_frame(&r);
  double t0 = ts_now();
  double su = c->run(&r);
  *wall = ts_now() - t0;
  if (setup) *setup = su;
  run_free(&r);
  return TS_OK;
}

/* ---- --tile best ---------------------------------------------------------------------------- */

typedef struct pp_cand {
  int tw, th;
  const char *order; /* OpenMP: wave or stage; NULL for another peer */
  double screen_s, median_s;
  bool pruned;
} pp_cand;

/* Every ladder tile (ts_pipe_ladder: the tiles the runtime's AUTO moves on and ts_pipe_tune
 * searches), for the OpenMP runner with --order best crossed with both creation orders, screened
 * by one run of min(frames, 2) frames; those over 1.5x the fastest screen are dropped; the rest
 * timed in 3 interleaved rounds of sweep_frames frames each (order rotated per round), the median
 * per candidate. Returns the fastest's index. */
static ts_status sweep(const ts_pipe_desc *d, const pp_cfg *c, pp_cand *cs, int *ncand, int *best) {
  int tw[PP_MAX_LADDER], th[PP_MAX_LADDER];
  int nl = ts_pipe_ladder(d->width, d->height, tw, th, PP_MAX_LADDER);
  static const char *const both[] = {"wave", "stage"};
  const char *const *orders = both;
  int no = 2;
  if (!c->order) orders = NULL, no = 1;
  else if (strcmp(c->order, "best")) orders = &c->order, no = 1;
  int n = 0;
  for (int k = 0; k < nl; k++)
    for (int o = 0; o < no; o++, n++) {
      cs[n].tw = tw[k];
      cs[n].th = th[k];
      cs[n].order = orders ? orders[o] : NULL;
      cs[n].pruned = false;
      cs[n].median_s = NAN;
    }
  int64_t screen_frames = c->frames < 2 ? c->frames : 2;
  double fastest = INFINITY;
  for (int k = 0; k < n; k++) {
    if (cs[k].order) g_order = cs[k].order;
    TS_TRY(timed_run(d, c, screen_frames, cs[k].tw, cs[k].th, NULL, 0, NULL, &cs[k].screen_s, NULL, NULL));
    if (cs[k].screen_s < fastest) fastest = cs[k].screen_s;
  }
  for (int k = 0; k < n; k++) cs[k].pruned = cs[k].screen_s > 1.5 * fastest;
  enum { ROUNDS = 3 };
  double t[PP_MAX_CAND][ROUNDS];
  int idx[PP_MAX_CAND], m = 0;
  for (int k = 0; k < n; k++)
    if (!cs[k].pruned) idx[m++] = k;
  for (int round = 0; round < ROUNDS; round++)
    for (int j = 0; j < m; j++) {
      int k = idx[(j + round) % m];
      if (cs[k].order) g_order = cs[k].order;
      TS_TRY(timed_run(d, c, c->sweep_frames, cs[k].tw, cs[k].th, NULL, 0, NULL, &t[k][round], NULL, NULL));
    }
  *best = idx[0];
  for (int j = 0; j < m; j++) {
    int k = idx[j];
    cs[k].median_s = ts_median(t[k], ROUNDS);
    if (cs[k].median_s < cs[*best].median_s) *best = k;
  }
  *ncand = n;
  return TS_OK;
}

/* ---- the check, the report -------------------------------------------------------------------- */

/* Frames whose output differs from ts_pipe_app_reference bit for bit (or that were not kept exactly
 * once); a feedback app's reference for frame f starts from the peer's own frame f-1. */
static int64_t check_frames(const ts_pipe_app *app, const float *keep, size_t n, const int *kept, int64_t frames,
                            ts_status *st) {
  float *ref = malloc(n * sizeof(float));
  const float *prev = NULL;
  *st = TS_OK;
  if (!ref) {
    *st = ts_error(TS_ERR_OOM, "pipe peer --check: reference frame");
    return -1;
  }
  int64_t bad = 0;
  for (int64_t f = 0; f < frames; f++) {
    if ((*st = ts_pipe_app_reference(app, f, prev, ref)) != TS_OK) break;
    if (kept[f] != 1 || memcmp(ref, keep + (size_t)f * n, n * sizeof(float)) != 0) bad++;
    prev = keep + (size_t)f * n;
  }
  free(ref);
  return bad;
}

static void json_str(const char *k, const char *v, bool comma) {
  printf("\"%s\": \"", k);
  for (const char *p = v ? v : ""; *p; p++) {
    if (*p == '"' || *p == '\\') putchar('\\');
    if ((unsigned char)*p >= 0x20) putchar(*p);
  }
  printf("\"%s", comma ? ", " : "");
}

static void print_json(const pp_cfg *c, int tw, int th, const double *walls, double wall, double setup,
                       int64_t ntasks, const pp_cand *cs, int ncand, int best, int64_t bad) {
  printf("{");
  json_str("peer", c->peer, true);
  json_str("app", c->app, true);
  printf("\"width\": %d, \"height\": %d, \"frames\": %lld, \"threads\": %d, \"inflight\": %d, ", c->w, c->h,
         (long long)c->frames, c->threads, c->inflight);
  printf("\"tile_w\": %d, \"tile_h\": %d, ", tw, th);
  json_str("tile_option", c->best ? "best" : "fixed", true);
  printf("\"tasks_per_frame\": %lld, \"wall_s\": %.9g, \"setup_s\": %.9g, \"mpix_per_s\": %.6g, ", (long long)ntasks,
         wall, setup, (double)c->w * c->h * (double)c->frames / wall / 1e6);
  printf("\"repeats_wall_s\": [");
  for (int i = 0; i < c->repeats; i++) printf("%s%.9g", i ? ", " : "", walls[i]);
  printf("], ");
  if (c->order) json_str("order", c->order, true);
  json_str("runtime", c->runtime, true);
  json_str("compiler", c->compiler, true);
  printf("\"env\": {");
  static const char *const envs[] = {"OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_SPINCOUNT", NULL};
  bool first = true;
  for (int i = 0; envs[i]; i++) {
    const char *v = getenv(envs[i]);
    if (!v) continue;
    if (!first) printf(", ");
    json_str(envs[i], v, false);
    first = false;
  }
  printf("}");
  if (ncand > 0) {
    printf(", \"sweep_frames\": %d, \"sweep\": [", c->sweep_frames);
    for (int k = 0; k < ncand; k++) {
      printf("%s{\"tile_w\": %d, \"tile_h\": %d, ", k ? ", " : "", cs[k].tw, cs[k].th);
      if (cs[k].order) json_str("order", cs[k].order, true);
      printf("\"screen_s\": %.9g, ", cs[k].screen_s);
      if (cs[k].pruned) printf("\"median_s\": null, \"pruned\": true}");
      else printf("\"median_s\": %.9g, \"pruned\": false}", cs[k].median_s);
    }
    printf("], \"sweep_best\": %d", best);
  }
  if (c->check) printf(", \"frames_mismatched\": %lld", (long long)bad);
  printf("}\n");
}

/* ---- main ----------------------------------------------------------------------------------- */

static int usage_error(const char *prog, const char *fmt, const char *v) {
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, v);
  fprintf(stderr, " (--help for usage)\n");
  return 2;
}

static bool parse_wxh(const char *s, int *w, int *h) {
  char *e;
  errno = 0;
  long a = strtol(s, &e, 10);
  if (e == s || (*e != 'x' && *e != 'X')) return false;
  const char *s2 = e + 1;
  long b = strtol(s2, &e, 10);
  if (e == s2 || *e || errno || a < 1 || b < 1 || a > 65536 || b > 65536) return false;
  *w = (int)a;
  *h = (int)b;
  return true;
}

static bool parse_long(const char *s, long lo, long hi, long *v) {
  char *e;
  errno = 0;
  long x = strtol(s, &e, 10);
  if (e == s || *e || errno || x < lo || x > hi) return false;
  *v = x;
  return true;
}

static void usage(const char *prog, bool omp) {
  printf("usage: %s --app NAME [--size WxH] [--frames N] [--threads T] [--tile WxH|best] [--inflight K]\n"
         "       %*s [--repeats R] [--sweep-frames N]%s [--check] [--jitter NS] [--json]\n\n"
         "Runs a tessera pipeline app (edge, heat, isp, flow, life, cnn) as one task per (frame, stage, tile),\n"
         "each depending on the producer tiles the kernel contract makes it read, with up to K frames in flight.\n\n"
         "  --size WxH        domain (1024x1024)          --frames N    frames streamed (32)\n"
         "  --threads T       workers (2)                 --inflight K  frames in flight (2, 1..16)\n"
         "  --tile WxH|best   the level-0 tile (a stage at level l uses tile >> l); best (default): every tile of\n"
         "                    ts_pipe_ladder screened, then the fast ones timed in 3 interleaved rounds of\n"
         "                    --sweep-frames frames (min(frames, 8)); the fastest is used\n"
         "  --repeats R       timed runs, the median reported (1)\n"
         "%s"
         "  --check           every frame's last stage equal to ts_pipe_app_reference, bit for bit (exit 1 if not)\n"
         "  --jitter NS       a pseudo-random spin of up to NS ns before one task in four (exposes a missing\n"
         "                    dependence to --check)\n"
         "  --json            one JSON object: the run, the sweep, versions, the OMP_* environment\n",
         prog, (int)strlen(prog), "", omp ? " [--order wave|stage|best]" : "",
         omp ? "  --order O         task creation order: wave (rows of every stage as soon as their producers exist),\n"
               "                    stage (stage after stage), or best (default): with --tile best both are swept,\n"
               "                    with a fixed tile wave\n"
             : "");
}

int pp_main(int argc, char **argv, const char *peer, const char *runtime, const char *compiler, pp_init init,
            pp_runner run) {
  const char *prog = argc > 0 ? argv[0] : "pipe_peer";
  const char *slash = strrchr(prog, '/');
  if (slash) prog = slash + 1;
  bool omp = !strcmp(peer, "openmp-tasks");
  pp_cfg c;
  memset(&c, 0, sizeof c);
  c.w = c.h = 1024;
  c.frames = 32;
  c.threads = 2;
  c.inflight = 2;
  c.repeats = 1;
  c.sweep_frames = 0;
  c.best = true;
  c.peer = peer;
  c.runtime = runtime;
  c.compiler = compiler;
  c.init = init;
  c.run = run;
  c.order = omp ? "best" : NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long v;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(prog, omp);
      return 0;
    }
    if (!strcmp(a, "--check")) {
      c.check = true;
      continue;
    }
    if (!strcmp(a, "--json")) {
      c.json = true;
      continue;
    }
    if (i + 1 >= argc) return usage_error(prog, "option '%s' needs a value", a);
    const char *val = argv[++i];
    if (!strcmp(a, "--app")) c.app = val;
    else if (!strcmp(a, "--size")) {
      if (!parse_wxh(val, &c.w, &c.h)) return usage_error(prog, "--size '%s': expected WxH, each 1..65536", val);
    } else if (!strcmp(a, "--frames")) {
      if (!parse_long(val, 1, 1 << 20, &v)) return usage_error(prog, "--frames '%s': 1..1048576", val);
      c.frames = v;
    } else if (!strcmp(a, "--threads")) {
      if (!parse_long(val, 1, 256, &v)) return usage_error(prog, "--threads '%s': 1..256", val);
      c.threads = (int)v;
    } else if (!strcmp(a, "--inflight")) {
      if (!parse_long(val, 1, PP_MAX_INFLIGHT, &v)) return usage_error(prog, "--inflight '%s': 1..16", val);
      c.inflight = (int)v;
    } else if (!strcmp(a, "--repeats")) {
      if (!parse_long(val, 1, 1000, &v)) return usage_error(prog, "--repeats '%s': 1..1000", val);
      c.repeats = (int)v;
    } else if (!strcmp(a, "--sweep-frames")) {
      if (!parse_long(val, 1, 1 << 20, &v)) return usage_error(prog, "--sweep-frames '%s': 1..1048576", val);
      c.sweep_frames = (int)v;
    } else if (!strcmp(a, "--jitter")) {
      if (!parse_long(val, 0, 100000000, &v)) return usage_error(prog, "--jitter '%s': 0..1e8 ns", val);
      c.jitter = (unsigned)v;
    } else if (!strcmp(a, "--tile")) {
      if (!strcmp(val, "best")) c.best = true;
      else if (parse_wxh(val, &c.tile_w, &c.tile_h)) c.best = false;
      else return usage_error(prog, "--tile '%s': WxH or best", val);
    } else if (omp && !strcmp(a, "--order")) {
      if (strcmp(val, "wave") && strcmp(val, "stage") && strcmp(val, "best"))
        return usage_error(prog, "--order '%s': wave, stage or best", val);
      c.order = val;
    } else {
      return usage_error(prog, "unknown option '%s'", a);
    }
  }
  if (!c.app) return usage_error(prog, "%s", "--app NAME is required (edge, heat, isp, flow, life, cnn)");
  if (c.sweep_frames == 0) c.sweep_frames = c.frames < 8 ? (int)c.frames : 8;
  if (c.order && !strcmp(c.order, "best") && !c.best) c.order = "wave"; /* a fixed tile: the default order */
  if (c.order) g_order = c.order;
  if (!c.best) { /* a tile larger than the domain is the whole domain */
    if (c.tile_w > c.w) c.tile_w = c.w;
    if (c.tile_h > c.h) c.tile_h = c.h;
  }

  ts_pipe_app *app;
  ts_status s = ts_pipe_app_create(c.app, c.w, c.h, &app);
  if (s != TS_OK) {
    fprintf(stderr, "%s: %s\n", prog, ts_last_error());
    return s == TS_ERR_NOT_FOUND || s == TS_ERR_INVALID_ARG ? 2 : 1;
  }
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  init(c.threads);

  int rc = 0;
  pp_cand cs[PP_MAX_CAND];
  int ncand = 0, best = -1;
  float *keep = NULL;
  int *kept = NULL;
  double *walls = calloc((size_t)c.repeats, sizeof *walls);
  double setup = 0;
  int64_t ntasks = 0, bad = 0;
  if (!walls) {
    s = ts_error(TS_ERR_OOM, "pipe peer: repeats");
    goto out;
  }
  if (c.best) {
    if ((s = sweep(d, &c, cs, &ncand, &best)) != TS_OK) goto out;
    c.tile_w = cs[best].tw;
    c.tile_h = cs[best].th;
    if (cs[best].order) c.order = g_order = cs[best].order;
  }
  int lw, lh;
  ts_pipe_stage_size(d, d->nstages - 1, &lw, &lh);
  size_t keep_n = (size_t)lw * lh * (size_t)d->stage[d->nstages - 1].channels;
  if (c.check) {
    size_t tot;
    if (!ts_mul_size(keep_n * sizeof(float), (size_t)c.frames, &tot) || tot > ((size_t)8 << 30) ||
        !(keep = malloc(tot)) || !(kept = calloc((size_t)c.frames, sizeof *kept))) {
      s = ts_error(TS_ERR_OOM, "pipe peer --check: %lld frames of %zu floats kept", (long long)c.frames, keep_n);
      goto out;
    }
  }
  for (int r = 0; r < c.repeats; r++) {
    double su;
    if (kept) memset(kept, 0, (size_t)c.frames * sizeof *kept);
    if ((s = timed_run(d, &c, c.frames, c.tile_w, c.tile_h, keep, keep_n, kept, &walls[r], &su, &ntasks)) != TS_OK)
      goto out;
    setup += su / c.repeats;
    if (c.check) {
      int64_t b = check_frames(app, keep, keep_n, kept, c.frames, &s);
      if (s != TS_OK) goto out;
      bad += b;
    }
  }
  double *sorted = malloc((size_t)c.repeats * sizeof *sorted);
  if (!sorted) {
    s = ts_error(TS_ERR_OOM, "pipe peer: repeats");
    goto out;
  }
  memcpy(sorted, walls, (size_t)c.repeats * sizeof *sorted);
  double wall = ts_median(sorted, c.repeats);
  free(sorted);
  if (c.json) {
    print_json(&c, c.tile_w, c.tile_h, walls, wall, setup, ntasks, cs, ncand, best, bad);
  } else {
    printf("%s %s %dx%d, %lld frames, %d threads, inflight %d, tile %dx%d%s: %.2f ms (median of %d), %.1f Mpixel/s\n",
           c.peer, c.app, c.w, c.h, (long long)c.frames, c.threads, c.inflight, c.tile_w, c.tile_h,
           c.best ? " (best of the sweep)" : "", wall * 1e3, c.repeats,
           (double)c.w * c.h * (double)c.frames / wall / 1e6);
    if (c.check) printf("  check: %lld of %lld frames differ from the reference\n", (long long)bad, (long long)(c.frames * c.repeats));
  }
  if (c.check && bad) {
    fprintf(stderr, "%s: %s: %lld frame(s) differ from the reference\n", prog, c.app, (long long)bad);
    rc = 1;
  }
out:
  if (s != TS_OK) {
    fprintf(stderr, "%s: %s\n", prog, ts_last_error());
    rc = 1;
  }
  free(walls);
  free(keep);
  free(kept);
  ts_pipe_app_destroy(app);
  return rc;
}

#ifndef TS_PIPE_PEER_DRIVER_ONLY
/* ---- the OpenMP runner ----------------------------------------------------------------------- */

/* The wait of a frame is split into lists of this many dependence addresses (gcc builds each list
 * on the stack). */
#define WAIT_CHUNK 4096

typedef struct omp_state {
  pp_run *r;
  char *dep;             /* [slots][tasks per frame]: dependence addresses, never read or written */
  int64_t base[MAXS], n; /* a stage's first tile in a slot's part of dep, tasks per frame */
} omp_state;

static char *dep_of(const omp_state *o, int64_t f, int s) { return o->dep + (f % o->r->nslots) * o->n + o->base[s]; }

/* Creates the tasks of row ty of stage s of frame f. */
static void spawn_row(const omp_state *o, int64_t f, int s, int ty) {
  pp_run *r = o->r;
  const pp_grid *g = &r->g[s];
  int nin = pp_inputs(r, s);
  for (int tx = 0; tx < g->nx; tx++) {
    int64_t t = (int64_t)ty * g->nx + tx;
    /* input i: producer tiles [a_i, b_i) x [c_i, e_i) of the grid at D_i with n_i tiles a row; an
       unused input (or frame 0's feedback) gets an empty range */
    char *D[TS_PIPE_MAX_IN];
    int nx[TS_PIPE_MAX_IN], ax[TS_PIPE_MAX_IN], bx[TS_PIPE_MAX_IN], ay[TS_PIPE_MAX_IN], by[TS_PIPE_MAX_IN];
    char *O = dep_of(o, f, s) + t;
    for (int i = 0; i < TS_PIPE_MAX_IN; i++) {
      D[i] = O;
      nx[i] = 1;
      ax[i] = bx[i] = ay[i] = by[i] = 0;
      if (i >= nin) continue;
      int p, x0, x1, y0, y1;
      int fb = pp_input_tiles(r, s, t, i, &p, &x0, &x1, &y0, &y1);
      if (fb && f == 0) continue;
      D[i] = dep_of(o, fb ? f - 1 : f, p);
      nx[i] = r->g[p].nx;
      ax[i] = x0, bx[i] = x1 + 1, ay[i] = y0, by[i] = y1 + 1;
    }
    char *D0 = D[0], *D1 = D[1], *D2 = D[2], *D3 = D[3];
    int n0 = nx[0], n1 = nx[1], n2 = nx[2], n3 = nx[3];
    int a0 = ax[0], b0 = bx[0], c0 = ay[0], e0 = by[0];
    int a1 = ax[1], b1 = bx[1], c1 = ay[1], e1 = by[1];
    int a2 = ax[2], b2 = bx[2], c2 = ay[2], e2 = by[2];
    int a3 = ax[3], b3 = bx[3], c3 = ay[3], e3 = by[3];
    /* gcc 12 reports variables read only by a depend clause's iterator as set but unused */
    (void)D0, (void)D1, (void)D2, (void)D3, (void)n0, (void)n1, (void)n2, (void)n3;
    (void)a0, (void)b0, (void)c0, (void)e0, (void)a1, (void)b1, (void)c1, (void)e1;
    (void)a2, (void)b2, (void)c2, (void)e2, (void)a3, (void)b3, (void)c3, (void)e3;
#pragma omp task firstprivate(r, f, s, t) depend(out : O[0])                                              \
    depend(iterator(int y0 = c0 : e0, int x0 = a0 : b0), in : D0[y0 * n0 + x0])                              \
    depend(iterator(int y1 = c1 : e1, int x1 = a1 : b1), in : D1[y1 * n1 + x1])                              \
    depend(iterator(int y2 = c2 : e2, int x2 = a2 : b2), in : D2[y2 * n2 + x2])                              \
    depend(iterator(int y3 = c3 : e3, int x3 = a3 : b3), in : D3[y3 * n3 + x3])
    pp_exec(r, f, s, t);
  }
}

/* Row ty of stage s can be created: every in-frame producer row it reads has been (made[p] rows). */
static bool row_ready(const pp_run *r, int s, int ty, const int *made) {
  int64_t t = (int64_t)ty * r->g[s].nx; /* rows of a tile row share their y span: column 0 stands for all */
  for (int i = 0; i < pp_inputs(r, s); i++) {
    int p, ax, bx, ay, by;
    if (pp_input_tiles(r, s, t, i, &p, &ax, &bx, &ay, &by)) continue; /* feedback: an earlier frame */
    if (by >= made[p]) return false;
  }
  return true;
}

static bool is_source(const pp_run *r, int s) {
  for (int i = 0; i < pp_inputs(r, s); i++)
    if (r->d->stage[s].in[i].from != TS_PIPE_FEEDBACK) return false;
  return true;
}

static void spawn_frame(const omp_state *o, int64_t f, bool wave) {
  pp_run *r = o->r;
  if (!wave) {
    for (int s = 0; s < r->S; s++)
      for (int ty = 0; ty < r->g[s].ny; ty++) spawn_row(o, f, s, ty);
    return;
  }
  int made[MAXS] = {0};
  for (bool more = true; more;) {
    more = false;
    for (int s = 0; s < r->S; s++) {
      if (is_source(r, s)) {
        if (made[s] < r->g[s].ny) spawn_row(o, f, s, made[s]++);
      } else {
        while (made[s] < r->g[s].ny && row_ready(r, s, made[s], made)) spawn_row(o, f, s, made[s]++);
      }
      more |= made[s] < r->g[s].ny;
    }
  }
}

/* Returns once frame f's last-stage tasks are done, running other tasks meanwhile. */
static void wait_frame(const omp_state *o, int64_t f) {
  char *D = dep_of(o, f, o->r->last);
  int64_t n = o->r->g[o->r->last].n;
  for (int64_t k0 = 0; k0 < n; k0 += WAIT_CHUNK) {
    long lo = (long)k0, hi = (long)(k0 + WAIT_CHUNK < n ? k0 + WAIT_CHUNK : n);
    (void)lo, (void)hi, (void)D;
#pragma omp taskwait depend(iterator(long k = lo : hi), in : D[k])
  }
}

static double omp_runner(pp_run *r) {
  omp_state o;
  o.r = r;
  o.n = 0;
  for (int s = 0; s < r->S; s++) {
    o.base[s] = o.n;
    o.n += r->g[s].n;
  }
  o.dep = malloc((size_t)(o.n * r->nslots));
  if (!o.dep) {
    fprintf(stderr, "pipe_omp: out of memory for %lld dependence addresses\n", (long long)(o.n * r->nslots));
    exit(1);
  }
  bool wave = !strcmp(g_order, "wave");
#pragma omp parallel num_threads(r->threads)
#pragma omp single
  {
    for (int64_t f = 0; f < r->frames; f++) {
      if (f >= r->inflight) {
        wait_frame(&o, f - r->inflight);
        pp_frame_done(r, f - r->inflight);
      }
      spawn_frame(&o, f, wave);
    }
#pragma omp taskwait
    for (int64_t f = r->frames > r->inflight ? r->frames - r->inflight : 0; f < r->frames; f++) pp_frame_done(r, f);
  }
  free(o.dep);
  return 0;
}

/* The team is started here, before anything is timed, and kept by libgomp for the runs. */
static void omp_init(int threads) {
  omp_set_dynamic(0);
  omp_set_num_threads(threads);
#pragma omp parallel num_threads(threads)
  {
  }
}

int main(int argc, char **argv) {
  char runtime[96];
  snprintf(runtime, sizeof runtime, "libgomp, OpenMP %d", (int)_OPENMP);
  const char *compiler =
#if defined(__clang__)
      __VERSION__; /* "Debian Clang 14.0.6", say */
#elif defined(__GNUC__)
      "gcc " __VERSION__;
#else
      "unknown";
#endif
  return pp_main(argc, argv, "openmp-tasks", runtime, compiler, omp_init, omp_runner);
}
#endif
