/* tessera pipe: multi-stage stencil pipelines with automatic task granularity (GOPipe) and
 * HiWayLib's communication mechanisms.
 *   pipe apps     the built-in applications and their stages
 *   pipe bench    runs one app: throughput, granularity over the frames, queue contention and idle
 *                 time per worker; --check compares every frame with the app's reference bit for bit
 *   pipe tune     the offline best fixed granularity: every ladder tile timed (artifact store)
 *   pipe stress   randomized runs with injected delays and stalls: nothing lost or duplicated */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/artifact_internal.h"
#include "tessera/pipe.h"

#define CMD "pipe"

static void usage(void) {
  printf("usage: tessera pipe apps [--json]\n"
         "       tessera pipe bench  --app NAME [--size WxH] [--frames N] [--granularity auto|WxH|fine|coarse|offline]\n"
         "                           [--queue sharded|locked|mpmc] [--copy none|lazy|eager] [--inflight K]\n"
         "                           [--repeats R] [--check] [--timeline F.svg] [--threads T] [--json]\n"
         "       tessera pipe tune   --app NAME [--size WxH] [--frames N] [--queue Q] [--inflight K] [--fresh]\n"
         "                           [--threads T] [--json]\n"
         "       tessera pipe stress [--runs N] [--seed S] [--max-threads T] [--json]\n\n"
         "Runs a pipeline of stencil stages over streamed frames as (tile, stage) tasks with dependence counters\n"
         "on a pool of workers (GOPipe, PACT'20; HiWayLib, ASPLOS'19). The runtime picks the tile (auto: a\n"
         "cache/overhead model, then frame-by-frame measurement) unless one is given.\n\n"
         "  --app NAME          edge, heat, isp, flow, life, cnn (`pipe apps`)\n"
         "  --size WxH          domain (1024x1024)             --frames N   frames streamed (32)\n"
         "  --granularity G     auto (default) | WxH fixed tile | fine (32x2) | coarse (whole frame)\n"
         "                      | offline (the best fixed tile `pipe tune` found for this size)\n"
         "  --queue Q           sharded: a work-stealing deque per worker (default); locked: one mutex queue;\n"
         "                      mpmc: one lock-free ring\n"
         "  --copy C            none (one arena, default); lazy / eager: two device arenas (workers split,\n"
         "                      stages pinned to their device), tiles copied on first use / when produced\n"
         "  --inflight K        frames in flight (2)          --repeats R  runs, the median reported (1)\n"
         "  --check             every frame equal to the app's reference, bit for bit (exit 1 otherwise)\n"
         "  --timeline F.svg    tasks per worker over time\n"
         "  --fresh             tune: measure again instead of reading the artifact store\n"
         "  --runs N            stress: randomized runs (1000)  --seed S  (1)\n");
}

static bool parse_size(const char *v, int *w, int *h) {
  char *e;
  long a = strtol(v, &e, 10);
  if (e == v || (*e != 'x' && *e != 'X')) return false;
  const char *q = e + 1;
  long b = strtol(q, &e, 10);
  if (e == q || *e || a < 1 || b < 1 || a > 65536 || b > 65536) return false;
  *w = (int)a;
  *h = (int)b;
  return true;
}

/* The options bench and tune share: the app, its size, the frames, frames in flight, the queue. */
typedef struct run_args {
  const char *app;
  int w, h;
  long frames, inflight;
  ts_pipe_queue queue;
} run_args;

/* 1: a shared option (its value taken), 0: not one, -1: a bad value (message printed). */
static int run_opt(const char *a, const char *v, run_args *r) {
  if (!strcmp(a, "--app")) {
    r->app = v;
  } else if (!strcmp(a, "--size")) {
    if (!parse_size(v, &r->w, &r->h)) return cli_usage_error(CMD, "--size '%s': expected WxH, each 1..65536", v), -1;
  } else if (!strcmp(a, "--frames")) {
    if (!cli_parse_int(CMD, a, v, 1, 1 << 20, &r->frames)) return -1;
  } else if (!strcmp(a, "--inflight")) {
    if (!cli_parse_int(CMD, a, v, 1, 16, &r->inflight)) return -1;
  } else if (!strcmp(a, "--queue")) {
    if (ts_pipe_queue_parse(v, &r->queue) != TS_OK)
      return cli_usage_error(CMD, "--queue '%s': sharded, locked or mpmc", v), -1;
  } else {
    return 0;
  }
  return 1;
}

/* ---- apps ---- */

static int cmd_apps(int argc, char **argv) {
  cli_common_opts co = {0};
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c < 0) return CLI_USAGE;
    if (c == 0) return cli_usage_error(CMD, "apps: unknown option '%s'", argv[i]);
  }
  if (co.help) return usage(), CLI_OK;
  cJSON *arr = co.json ? cJSON_CreateArray() : NULL;
  for (const char *const *n = ts_pipe_app_names(); *n; n++) {
    ts_pipe_app *app;
    ts_status s = ts_pipe_app_create(*n, 64, 64, &app);
    if (s != TS_OK) {
      cJSON_Delete(arr);
      return cli_fail(CMD, s);
    }
    const ts_pipe_desc *d = ts_pipe_app_desc(app);
    cJSON *ja = arr ? cJSON_CreateObject() : NULL, *js = NULL;
    if (ja) {
      cJSON_AddStringToObject(ja, "name", *n);
      js = cJSON_AddArrayToObject(ja, "stages");
      cJSON_AddItemToArray(arr, ja);
    } else {
      printf("%s: %d stages\n", *n, d->nstages);
    }
    for (int s2 = 0; s2 < d->nstages; s2++) {
      const ts_pipe_stage *st = &d->stage[s2];
      char ins[160] = "";
      size_t k = 0;
      for (int i = 0; i < st->nin; i++) {
        if (st->in[i].from == TS_PIPE_FEEDBACK)
          k += (size_t)snprintf(ins + k, sizeof ins - k, "%sfeedback(halo %d)", i ? ", " : "", st->in[i].halo);
        else
          k += (size_t)snprintf(ins + k, sizeof ins - k, "%s%d(halo %d)", i ? ", " : "", st->in[i].from, st->in[i].halo);
        if (k >= sizeof ins) break;
      }
      if (js) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", st->name ? st->name : "");
        cJSON_AddNumberToObject(o, "level", st->level);
        cJSON_AddNumberToObject(o, "channels", st->channels);
        cJSON_AddStringToObject(o, "inputs", ins);
        cJSON_AddNumberToObject(o, "flops_per_px", st->flops_per_px);
        cJSON_AddNumberToObject(o, "device", st->device);
        cJSON_AddItemToArray(js, o);
      } else {
        printf("  %d %-12s level %d, %2d ch, %6.1f flop/px, device %d, inputs: %s\n", s2, st->name ? st->name : "",
               st->level, st->channels, st->flops_per_px, st->device, st->nin ? ins : "(source)");
      }
    }
    ts_pipe_app_destroy(app);
  }
  if (arr) cli_print_json(arr);
  return CLI_OK;
}

/* ---- bench ---- */

typedef struct checker {
  const ts_pipe_app *app;
  float *out;     /* [frames][w*h*c]: each frame's output, kept for the check */
  size_t n;       /* floats per frame */
  int64_t frames;
  int *calls;
} checker;

static void check_sink(int64_t frame, const ts_pipe_buf *b, void *user) {
  checker *c = user;
  if (frame < 0 || frame >= c->frames) return;
  __atomic_fetch_add(&c->calls[frame], 1, __ATOMIC_RELAXED);
  float *o = c->out + (size_t)frame * c->n;
  for (int ch = 0; ch < b->c; ch++)
    for (int y = 0; y < b->h; y++)
      memcpy(o + ((size_t)ch * b->h + y) * b->w, b->data + ch * b->plane + (int64_t)y * b->row, (size_t)b->w * sizeof(float));
}

/* Frames whose output differs from the reference (or was not delivered exactly once). */
static int64_t check_frames(const checker *c, ts_status *st) {
  float *ref = malloc(c->n * sizeof(float)), *prev = NULL;
  *st = TS_OK;
  if (!ref) {
    *st = ts_error(TS_ERR_OOM, "pipe bench --check: reference frame");
    return -1;
  }
  int64_t bad = 0;
  for (int64_t f = 0; f < c->frames; f++) {
    if ((*st = ts_pipe_app_reference(c->app, f, prev, ref)) != TS_OK) break;
    if (c->calls[f] != 1 || memcmp(ref, c->out + (size_t)f * c->n, c->n * sizeof(float)) != 0) bad++;
    prev = c->out + (size_t)f * c->n; /* the runtime's own output feeds the next reference frame */
  }
  free(ref);
  return bad;
}

static int cmd_bench(int argc, char **argv) {
  cli_common_opts co = {0};
  const char *gran = "auto", *timeline = NULL;
  run_args ra = {NULL, 1024, 1024, 32, 2, TS_PIPE_Q_SHARDED};
  long repeats = 1;
  bool check = false;
  ts_pipe_opts o = ts_pipe_opts_default();
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c < 0) return CLI_USAGE;
    if (c) continue;
    const char *a = argv[i], *v;
    if (!strcmp(a, "--check")) {
      check = true;
      continue;
    }
    if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    int r = run_opt(a, v, &ra);
    if (r < 0) return CLI_USAGE;
    if (r) continue;
    if (!strcmp(a, "--repeats")) {
      if (!cli_parse_int(CMD, a, v, 1, 1000, &repeats)) return CLI_USAGE;
    } else if (!strcmp(a, "--granularity")) gran = v;
    else if (!strcmp(a, "--copy")) {
      if (ts_pipe_copy_parse(v, &o.copy) != TS_OK) return cli_usage_error(CMD, "--copy '%s': none, lazy or eager", v);
    } else if (!strcmp(a, "--timeline")) timeline = v;
    else return cli_usage_error(CMD, "bench: unknown option '%s'", a);
  }
  const char *appname = ra.app;
  int w = ra.w, h = ra.h;
  long frames = ra.frames, inflight = ra.inflight;
  o.queue = ra.queue;
  if (co.help) return usage(), CLI_OK;
  if (!appname) return cli_usage_error(CMD, "bench: --app NAME is required (`tessera pipe apps`)");
  ts_pipe_app *app;
  ts_status s = ts_pipe_app_create(appname, w, h, &app);
  if (s != TS_OK) return cli_fail(CMD, s);
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  o.frames = frames;
  o.inflight = (int)inflight;
  o.threads = co.threads;
  o.timeline = timeline != NULL;
  ts_pipe_tune_result tr;
  bool tuned = false;
  if (!strcmp(gran, "auto")) {
    o.gran = TS_PIPE_GRAN_AUTO;
  } else if (!strcmp(gran, "coarse")) {
    o.gran = TS_PIPE_GRAN_FIXED, o.tile_w = w, o.tile_h = h;
  } else if (!strcmp(gran, "fine")) {
    o.gran = TS_PIPE_GRAN_FIXED, o.tile_w = 32 < w ? 32 : w, o.tile_h = 2 < h ? 2 : h;
  } else if (!strcmp(gran, "offline")) {
    if ((s = ts_pipe_tune(d, &o, false, true, &tr)) != TS_OK) {
      ts_pipe_app_destroy(app);
      return cli_fail(CMD, s);
    }
    tuned = true;
    o.gran = TS_PIPE_GRAN_FIXED, o.tile_w = tr.e[tr.best].tile_w, o.tile_h = tr.e[tr.best].tile_h;
  } else if (parse_size(gran, &o.tile_w, &o.tile_h)) {
    o.gran = TS_PIPE_GRAN_FIXED;
  } else {
    ts_pipe_app_destroy(app);
    return cli_usage_error(CMD, "--granularity '%s': auto, WxH, fine, coarse or offline", gran);
  }
  int lw, lh;
  ts_pipe_stage_size(d, d->nstages - 1, &lw, &lh);
  checker ck = {app, NULL, (size_t)lw * lh * (size_t)d->stage[d->nstages - 1].channels, frames, NULL};
  if (check) {
    size_t tot;
    if (!ts_mul_size(ck.n * sizeof(float), (size_t)frames, &tot) || tot > ((size_t)8 << 30) ||
        !(ck.out = malloc(tot)) || !(ck.calls = calloc((size_t)frames, sizeof(int)))) {
      free(ck.out);
      ts_pipe_app_destroy(app);
      return cli_fail(CMD, ts_error(TS_ERR_OOM, "pipe bench --check: %lld frames of %zu floats kept", (long long)frames, ck.n));
    }
    o.sink = check_sink;
    o.sink_user = &ck;
  }
  /* repeats: the median run by wall time is reported */
  ts_pipe_report **reps = calloc((size_t)repeats, sizeof *reps);
  int rc = CLI_OK;
  int64_t bad = 0;
  if (!reps) s = ts_error(TS_ERR_OOM, "pipe bench: reports");
  for (long r = 0; s == TS_OK && r < repeats; r++) {
    if (ck.calls) memset(ck.calls, 0, (size_t)frames * sizeof(int));
    s = ts_pipe_run(d, &o, &reps[r]);
    if (s == TS_OK && check) {
      ts_status cs;
      int64_t b = check_frames(&ck, &cs);
      if (cs != TS_OK) s = cs;
      else bad += b;
    }
  }
  if (s != TS_OK) {
    rc = cli_fail(CMD, s);
    goto out;
  }
  int med = 0;
  {
    double t[1000];
    for (long r = 0; r < repeats; r++) t[r] = reps[r]->wall_s;
    double m = ts_median(t, (int)repeats);
    for (long r = 0; r < repeats; r++)
      if (reps[r]->wall_s == m) med = (int)r;
  }
  ts_pipe_report *rep = reps[med];
  if (timeline && (s = ts_pipe_report_svg(rep, d, timeline)) != TS_OK) {
    rc = cli_fail(CMD, s);
    goto out;
  }
  if (co.json) {
    char *js;
    if ((s = ts_pipe_report_json(rep, &js)) != TS_OK) {
      rc = cli_fail(CMD, s);
      goto out;
    }
    cJSON *j = cJSON_Parse(js);
    free(js);
    if (!j) {
      rc = cli_fail(CMD, ts_error(TS_ERR_OOM, "pipe bench JSON"));
      goto out;
    }
    ts_provenance prov;
    ts_provenance_here(&prov, ts_isa_active(), rep->threads);
    snprintf(prov.clock, sizeof prov.clock, "%s", ts_clock_name(TS_CLOCK_WALL));
    cJSON_AddItemToObject(j, "provenance", ts__provenance_json(&prov));
    cJSON_AddNumberToObject(j, "inflight", (double)inflight);
    cJSON_AddStringToObject(j, "granularity_option", gran);
    cJSON *wr = cJSON_AddArrayToObject(j, "repeats_wall_s");
    for (long r = 0; r < repeats; r++) cJSON_AddItemToArray(wr, cJSON_CreateNumber(reps[r]->wall_s));
    if (tuned) {
      cJSON_AddNumberToObject(j, "offline_tile_w", tr.e[tr.best].tile_w);
      cJSON_AddNumberToObject(j, "offline_tile_h", tr.e[tr.best].tile_h);
    }
    if (check) cJSON_AddNumberToObject(j, "frames_mismatched", (double)bad);
    cli_print_json(j);
  } else {
    printf("%s %dx%d, %lld frames, %d threads, %s queue, copy %s, granularity %s%s: %.2f ms (median of %ld)\n",
           rep->app, w, h, (long long)frames, rep->threads, ts_pipe_queue_name(o.queue), ts_pipe_copy_name(o.copy), gran,
           tuned ? " (tuned)" : "", rep->wall_s * 1e3, repeats);
    printf("  %.1f Mpixel/s, %.2f GFLOP/s; %lld tasks (%lld expected)\n", rep->mpix_per_s, rep->gflops,
           (long long)rep->tasks, (long long)rep->tasks_expected);
    if (o.copy != TS_PIPE_COPY_NONE)
      printf("  copies between arenas: %lld tiles, %.2f MB\n", (long long)rep->copies, rep->copy_bytes / 1e6);
    printf("  granularity over the frames:");
    for (int64_t f = 0; f < rep->frames;) {
      int64_t e = f;
      while (e + 1 < rep->frames && rep->frame_tile_w[e + 1] == rep->frame_tile_w[f] &&
             rep->frame_tile_h[e + 1] == rep->frame_tile_h[f])
        e++;
      printf(" [%lld-%lld] %dx%d", (long long)f, (long long)e, rep->frame_tile_w[f], rep->frame_tile_h[f]);
      f = e + 1;
    }
    printf("\n");
    for (int i = 0; i < rep->threads; i++) {
      const ts_pipe_worker_stats *ws = &rep->worker[i];
      printf("  worker %d: %lld tasks, busy %.1f ms, idle %.1f ms, steals %lld/%lld, handoffs %lld, contended %lld\n", i,
             (long long)ws->tasks, ws->busy_s * 1e3, ws->idle_s * 1e3, (long long)ws->steals, (long long)ws->steal_attempts,
             (long long)ws->handoffs, (long long)ws->contended);
    }
    if (check) printf("  check: %lld of %lld frames differ from the reference\n", (long long)bad, (long long)(frames * repeats));
    if (timeline) printf("  timeline: %s\n", timeline);
  }
  if (check && bad) rc = CLI_FAIL;
out:
  if (reps)
    for (long r = 0; r < repeats; r++) ts_pipe_report_free(reps[r]);
  free(reps);
  free(ck.out);
  free(ck.calls);
  ts_pipe_app_destroy(app);
  return rc;
}

/* ---- tune ---- */

static int cmd_tune(int argc, char **argv) {
  cli_common_opts co = {0};
  run_args ra = {NULL, 1024, 1024, 8, 2, TS_PIPE_Q_SHARDED};
  bool fresh = false;
  ts_pipe_opts o = ts_pipe_opts_default();
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c < 0) return CLI_USAGE;
    if (c) continue;
    const char *a = argv[i], *v;
    if (!strcmp(a, "--fresh")) {
      fresh = true;
      continue;
    }
    if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    int r = run_opt(a, v, &ra);
    if (r < 0) return CLI_USAGE;
    if (!r) return cli_usage_error(CMD, "tune: unknown option '%s'", a);
  }
  const char *appname = ra.app;
  int w = ra.w, h = ra.h;
  long frames = ra.frames, inflight = ra.inflight;
  o.queue = ra.queue;
  if (co.help) return usage(), CLI_OK;
  if (!appname) return cli_usage_error(CMD, "tune: --app NAME is required (`tessera pipe apps`)");
  ts_pipe_app *app;
  ts_status s = ts_pipe_app_create(appname, w, h, &app);
  if (s != TS_OK) return cli_fail(CMD, s);
  o.frames = frames;
  o.inflight = (int)inflight;
  o.threads = co.threads;
  ts_pipe_tune_result r;
  s = ts_pipe_tune(ts_pipe_app_desc(app), &o, fresh, true, &r);
  ts_pipe_app_destroy(app);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (co.json) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "candidates");
    cJSON_AddStringToObject(j, "app", appname);
    cJSON_AddNumberToObject(j, "width", w);
    cJSON_AddNumberToObject(j, "height", h);
    cJSON_AddNumberToObject(j, "frames", (double)frames);
    cJSON_AddBoolToObject(j, "cached", r.cached);
    cJSON_AddNumberToObject(j, "best_tile_w", r.e[r.best].tile_w);
    cJSON_AddNumberToObject(j, "best_tile_h", r.e[r.best].tile_h);
    cJSON_AddItemToObject(j, "provenance", ts__provenance_json(&r.prov));
    for (int i = 0; i < r.n; i++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "tile_w", r.e[i].tile_w);
      cJSON_AddNumberToObject(e, "tile_h", r.e[i].tile_h);
      if (r.e[i].pruned) cJSON_AddNullToObject(e, "median_s");
      else cJSON_AddNumberToObject(e, "median_s", r.e[i].median_s);
      cJSON_AddItemToArray(arr, e);
    }
    cli_print_json(j);
  } else {
    printf("%s %dx%d, %ld frames: best fixed tile %dx%d, %.2f ms per run%s (made %s)\n", appname, w, h, frames,
           r.e[r.best].tile_w, r.e[r.best].tile_h, r.e[r.best].median_s * 1e3, r.cached ? ", from the artifact store" : "",
           r.prov.date);
    for (int i = 0; i < r.n; i++) {
      if (r.e[i].pruned) printf("  %5dx%-5d  pruned (> 1.5x the fastest after warm-up)\n", r.e[i].tile_w, r.e[i].tile_h);
      else printf("  %5dx%-5d  %9.2f ms  %.2fx the best\n", r.e[i].tile_w, r.e[i].tile_h, r.e[i].median_s * 1e3,
                  r.e[i].median_s / r.e[r.best].median_s);
    }
  }
  return CLI_OK;
}

/* ---- stress ---- */

static void stress_progress(int64_t done, void *user) { ts_progress_update(user, done); }

static int cmd_stress(int argc, char **argv) {
  cli_common_opts co = {0};
  long runs = 1000, seed = 1, maxt = 4;
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c < 0) return CLI_USAGE;
    if (c) continue;
    const char *a = argv[i], *v;
    if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    if (!strcmp(a, "--runs")) {
      if (!cli_parse_int(CMD, a, v, 1, 100000000, &runs)) return CLI_USAGE;
    } else if (!strcmp(a, "--seed")) {
      if (!cli_parse_int(CMD, a, v, 0, 0x7fffffff, &seed)) return CLI_USAGE;
    } else if (!strcmp(a, "--max-threads")) {
      if (!cli_parse_int(CMD, a, v, 1, 64, &maxt)) return CLI_USAGE;
    } else return cli_usage_error(CMD, "stress: unknown option '%s'", a);
  }
  if (co.help) return usage(), CLI_OK;
  ts_progress p;
  ts_progress_begin(&p, "pipe stress", runs);
  ts_pipe_stress_result r;
  ts_status s = ts_pipe_stress(runs, (uint64_t)seed, (int)maxt, stress_progress, &p, &r);
  ts_progress_end(&p);
  if (s != TS_OK) return cli_fail(CMD, s);
  bool ok = r.lost == 0 && r.duplicated == 0 && r.frames_bad == 0 && r.mismatched == 0 && r.failed_runs == 0;
  if (co.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "runs", (double)r.runs);
    cJSON_AddNumberToObject(j, "seed", (double)seed);
    cJSON_AddNumberToObject(j, "max_threads", (double)maxt);
    cJSON_AddNumberToObject(j, "tasks", (double)r.tasks);
    cJSON_AddNumberToObject(j, "results_checked", (double)r.pixels);
    cJSON_AddNumberToObject(j, "lost", (double)r.lost);
    cJSON_AddNumberToObject(j, "duplicated", (double)r.duplicated);
    cJSON_AddNumberToObject(j, "frames_bad", (double)r.frames_bad);
    cJSON_AddNumberToObject(j, "runs_mismatched", (double)r.mismatched);
    cJSON_AddNumberToObject(j, "runs_failed", (double)r.failed_runs);
    cJSON_AddNumberToObject(j, "wall_s", r.wall_s);
    cJSON_AddBoolToObject(j, "ok", ok);
    cli_print_json(j);
  } else {
    printf("%lld randomized runs (seed %ld, up to %ld workers, delays and stalls injected): %lld tasks, %lld results\n"
           "  lost %lld, duplicated %lld, frames not delivered once %lld, runs differing from the sequential run %lld, "
           "runs failed %lld: %s (%.1f s)\n",
           (long long)r.runs, seed, maxt, (long long)r.tasks, (long long)r.pixels, (long long)r.lost,
           (long long)r.duplicated, (long long)r.frames_bad, (long long)r.mismatched, (long long)r.failed_runs,
           ok ? "ok" : "FAILED", r.wall_s);
  }
  return ok ? CLI_OK : CLI_FAIL;
}

int cmd_pipe(int argc, char **argv) {
  if (argc < 2) return cli_usage_error(CMD, "missing subcommand (apps, bench, tune, stress; --help)");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(), CLI_OK;
  const char *sub = argv[1];
  if (!strcmp(sub, "apps")) return cmd_apps(argc, argv);
  if (!strcmp(sub, "bench")) return cmd_bench(argc, argv);
  if (!strcmp(sub, "tune")) return cmd_tune(argc, argv);
  if (!strcmp(sub, "stress")) return cmd_stress(argc, argv);
  return cli_usage_error(CMD, "unknown subcommand '%s' (apps, bench, tune, stress)", sub);
}
