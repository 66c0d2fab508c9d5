/* bench_pipe: the pipeline runtime's targets (issue 37), every figure timed in interleaved rounds by
 * the core's measure engine.
 *
 *   1. granularity: per app, the offline best fixed tile found exhaustively at a small and a large
 *      frame size (ts_pipe_tune); then at each size, interleaved: auto (no memory of earlier runs:
 *      it starts from its model and learns within the run), the offline best for this size, the
 *      offline best for the other size, VersaPipe-style fine (32x2) and coarse (whole frame);
 *   2. queues: the finest-granularity configuration (the app with the shortest tasks at the fine
 *      tile) under sharded deques, one mutex queue and one lock-free MPMC ring, with their
 *      contention counters;
 *   3. lazy vs eager copies between two device arenas: bytes moved and time, per app;
 *   4. termination: ts_pipe_stress over 10^4 randomized runs.
 *
 * usage: bench_pipe [--out DIR] [--apps a,b,...] [--small WxH] [--large WxH] [--frames-small N]
 *                   [--frames-large N] [--rounds R] [--stress N] [--threads T] [--sections gqcs]
 *                   [--reuse-tune 1]
 * --sections: which of the four parts run (default all: g granularity, q queues, c copies, s stress);
 * --reuse-tune 1: the offline tables from the artifact store when there (default: measured again). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/artifact_internal.h"
#include "tessera/measure.h"
#include "tessera/pipe.h"

typedef struct job {
  const ts_pipe_desc *d;
  ts_pipe_opts o;
} job;

static ts_status run_job(void *a) {
  job *j = a;
  return ts_pipe_run(j->d, &j->o, NULL);
}

static bool parse_size(const char *v, int *w, int *h) { return sscanf(v, "%dx%d", w, h) == 2 && *w > 0 && *h > 0; }

static ts_pipe_opts fixed(ts_pipe_opts o, int tw, int th) {
  o.gran = TS_PIPE_GRAN_FIXED;
  o.tile_w = tw;
  o.tile_h = th;
  return o;
}

static ts_measure_opts mopts(int rounds) {
  ts_measure_opts m = ts_measure_opts_default();
  m.warmup = 1;
  m.rounds = rounds;
  m.max_rounds = rounds;
  m.min_time_s = 0;
  m.alternate = true;
  return m;
}

#define NG 5
static const char *gname[NG] = {"auto", "offline_same", "offline_other", "fine", "coarse"};

/* Section 1 for one app at one size: returns the JSON object. */
static cJSON *granularity(const char *app, int w, int h, int64_t frames, int threads, int rounds,
                          const ts_pipe_tune_result *same, const ts_pipe_tune_result *other, double *ratio_other,
                          double *ratio_same) {
  ts_pipe_app *a;
  if (ts_pipe_app_create(app, w, h, &a) != TS_OK) return NULL;
  const ts_pipe_desc *d = ts_pipe_app_desc(a);
  ts_pipe_opts o = ts_pipe_opts_default();
  o.frames = frames;
  o.threads = threads;
  job J[NG] = {{d, o},
               {d, fixed(o, same->e[same->best].tile_w, same->e[same->best].tile_h)},
               {d, fixed(o, other->e[other->best].tile_w, other->e[other->best].tile_h)},
               {d, fixed(o, 32 < w ? 32 : w, 2 < h ? 2 : h)},
               {d, fixed(o, w, h)}};
  ts_measure_fn fn[NG];
  void *arg[NG];
  for (int i = 0; i < NG; i++) fn[i] = run_job, arg[i] = &J[i];
  ts_measure_opts m = mopts(rounds);
  m.baseline = 0;
  ts_measure_result r[NG];
  ts_measure_info info;
  if (ts_measure_run(NG, fn, arg, &m, r, &info) != TS_OK) {
    ts_pipe_app_destroy(a);
    return NULL;
  }
  /* one more auto run for its trace: the granularity it moved through */
  ts_pipe_report *rep = NULL;
  ts_pipe_run(d, &o, &rep);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "app", app);
  cJSON_AddNumberToObject(j, "width", w);
  cJSON_AddNumberToObject(j, "height", h);
  cJSON_AddNumberToObject(j, "frames", (double)frames);
  cJSON_AddNumberToObject(j, "rounds", info.rounds);
  cJSON_AddNumberToObject(j, "other_cpus", info.other_cpus);
  cJSON *c = cJSON_AddObjectToObject(j, "candidates");
  for (int i = 0; i < NG; i++) {
    cJSON *x = cJSON_AddObjectToObject(c, gname[i]);
    if (i) {
      cJSON_AddNumberToObject(x, "tile_w", J[i].o.tile_w);
      cJSON_AddNumberToObject(x, "tile_h", J[i].o.tile_h);
    }
    cJSON_AddNumberToObject(x, "median_s", r[i].s.median);
    cJSON_AddNumberToObject(x, "q1_s", r[i].s.q1);
    cJSON_AddNumberToObject(x, "q3_s", r[i].s.q3);
    cJSON_AddNumberToObject(x, "mpix_per_s", (double)w * h * (double)frames / r[i].s.median / 1e6);
    /* paired ratio: candidate time / auto time (> 1: auto faster) */
    cJSON_AddNumberToObject(x, "over_auto", r[i].ratio);
    cJSON_AddNumberToObject(x, "over_auto_lo", r[i].ratio_lo);
    cJSON_AddNumberToObject(x, "over_auto_hi", r[i].ratio_hi);
  }
  if (rep) {
    cJSON *t = cJSON_AddArrayToObject(j, "auto_trace");
    for (int64_t f = 0; f < rep->frames;) {
      int64_t e = f;
      while (e + 1 < rep->frames && rep->frame_tile_w[e + 1] == rep->frame_tile_w[f] &&
             rep->frame_tile_h[e + 1] == rep->frame_tile_h[f])
        e++;
      char s[64];
      snprintf(s, sizeof s, "%lld-%lld:%dx%d", (long long)f, (long long)e, rep->frame_tile_w[f], rep->frame_tile_h[f]);
      cJSON_AddItemToArray(t, cJSON_CreateString(s));
      f = e + 1;
    }
    ts_pipe_report_free(rep);
  }
  *ratio_other = r[2].ratio;
  *ratio_same = r[1].ratio;
  printf("  %-5s %5dx%-5d auto %8.2f ms | offline same %dx%d %8.2f ms (%.3fx) | other %dx%d %8.2f ms (%.3fx) | fine %.2fx | coarse %.2fx\n",
         app, w, h, r[0].s.median * 1e3, J[1].o.tile_w, J[1].o.tile_h, r[1].s.median * 1e3, r[1].ratio, J[2].o.tile_w,
         J[2].o.tile_h, r[2].s.median * 1e3, r[2].ratio, r[3].ratio, r[4].ratio);
  fflush(stdout);
  ts_pipe_app_destroy(a);
  return j;
}

static cJSON *queues(const char *app, int w, int h, int64_t frames, int threads, int rounds, int tw, int th) {
  ts_pipe_app *a;
  if (ts_pipe_app_create(app, w, h, &a) != TS_OK) return NULL;
  const ts_pipe_desc *d = ts_pipe_app_desc(a);
  ts_pipe_opts o = fixed(ts_pipe_opts_default(), tw, th);
  o.frames = frames;
  o.threads = threads;
  job J[3];
  ts_measure_fn fn[3];
  void *arg[3];
  for (int q = 0; q < 3; q++) {
    J[q].d = d;
    J[q].o = o;
    J[q].o.queue = (ts_pipe_queue)q;
    fn[q] = run_job;
    arg[q] = &J[q];
  }
  ts_measure_opts m = mopts(rounds);
  m.baseline = 0; /* sharded */
  ts_measure_result r[3];
  ts_measure_info info;
  cJSON *j = NULL;
  if (ts_measure_run(3, fn, arg, &m, r, &info) == TS_OK) {
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "app", app);
    cJSON_AddNumberToObject(j, "width", w);
    cJSON_AddNumberToObject(j, "height", h);
    cJSON_AddNumberToObject(j, "frames", (double)frames);
    cJSON_AddNumberToObject(j, "tile_w", tw);
    cJSON_AddNumberToObject(j, "tile_h", th);
    cJSON_AddNumberToObject(j, "other_cpus", info.other_cpus);
    printf("  %s %dx%d tile %dx%d, %d threads:\n", app, w, h, tw, th, threads);
    for (int q = 0; q < 3; q++) {
      ts_pipe_report *rep = NULL;
      ts_pipe_run(d, &J[q].o, &rep);
      cJSON *x = cJSON_AddObjectToObject(j, ts_pipe_queue_name((ts_pipe_queue)q));
      cJSON_AddNumberToObject(x, "median_s", r[q].s.median);
      cJSON_AddNumberToObject(x, "over_sharded", r[q].ratio);
      cJSON_AddNumberToObject(x, "over_sharded_lo", r[q].ratio_lo);
      cJSON_AddNumberToObject(x, "over_sharded_hi", r[q].ratio_hi);
      int64_t cont = 0, steals = 0, tasks = 0;
      double idle = 0;
      if (rep) {
        for (int i = 0; i < rep->threads; i++) {
          cont += rep->worker[i].contended;
          steals += rep->worker[i].steals;
          idle += rep->worker[i].idle_s;
        }
        tasks = rep->tasks;
        cJSON_AddNumberToObject(x, "tasks", (double)tasks);
        cJSON_AddNumberToObject(x, "contended", (double)cont);
        cJSON_AddNumberToObject(x, "steals", (double)steals);
        cJSON_AddNumberToObject(x, "idle_s", idle);
        cJSON_AddNumberToObject(x, "tasks_per_s", (double)tasks / rep->wall_s);
        ts_pipe_report_free(rep);
      }
      printf("    %-8s %8.2f ms  %.3fx sharded's time [%.3f, %.3f]  %lld tasks, contended %lld, steals %lld, idle %.1f ms\n",
             ts_pipe_queue_name((ts_pipe_queue)q), r[q].s.median * 1e3, r[q].ratio, r[q].ratio_lo, r[q].ratio_hi,
             (long long)tasks, (long long)cont, (long long)steals, idle * 1e3);
    }
  }
  ts_pipe_app_destroy(a);
  return j;
}

static cJSON *copies(const char *app, int w, int h, int64_t frames, int threads, int rounds, int tw, int th) {
  ts_pipe_app *a;
  if (ts_pipe_app_create(app, w, h, &a) != TS_OK) return NULL;
  const ts_pipe_desc *d = ts_pipe_app_desc(a);
  ts_pipe_opts o = fixed(ts_pipe_opts_default(), tw, th);
  o.frames = frames;
  o.threads = threads < 2 ? 2 : threads;
  job J[3];
  ts_measure_fn fn[3];
  void *arg[3];
  for (int c = 0; c < 3; c++) {
    J[c].d = d;
    J[c].o = o;
    J[c].o.copy = (ts_pipe_copy)c;
    fn[c] = run_job;
    arg[c] = &J[c];
  }
  ts_measure_opts m = mopts(rounds);
  m.baseline = 1; /* lazy */
  ts_measure_result r[3];
  cJSON *j = NULL;
  if (ts_measure_run(3, fn, arg, &m, r, NULL) == TS_OK) {
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "app", app);
    printf("  %-5s", app);
    for (int c = 0; c < 3; c++) {
      ts_pipe_report *rep = NULL;
      ts_pipe_run(d, &J[c].o, &rep);
      cJSON *x = cJSON_AddObjectToObject(j, ts_pipe_copy_name((ts_pipe_copy)c));
      cJSON_AddNumberToObject(x, "median_s", r[c].s.median);
      cJSON_AddNumberToObject(x, "over_lazy", r[c].ratio);
      double mb = rep ? rep->copy_bytes / 1e6 : NAN;
      cJSON_AddNumberToObject(x, "copy_mb", mb);
      cJSON_AddNumberToObject(x, "copies", rep ? (double)rep->copies : NAN);
      printf("  %s %.2f ms (%.3fx lazy) %.1f MB", ts_pipe_copy_name((ts_pipe_copy)c), r[c].s.median * 1e3, r[c].ratio, mb);
      ts_pipe_report_free(rep);
    }
    printf("\n");
  }
  ts_pipe_app_destroy(a);
  return j;
}

static double geomean(const double *v, int n) {
  double s = 0;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > 0) s += log(v[i]), k++;
  return k ? exp(s / k) : NAN;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines reach a log as they happen */
  const char *out = NULL, *apps_arg = NULL;
  int sw = 320, sh = 240, lw = 1920, lh = 1080, threads = 2, rounds = 5;
  long fs = 200, fl = 16, stress = 10000;
  const char *sections = "gqcs";
  bool reuse = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "bench_pipe: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--out")) out = v;
    else if (!strcmp(a, "--apps")) apps_arg = v;
    else if (!strcmp(a, "--small") && parse_size(v, &sw, &sh)) {
    } else if (!strcmp(a, "--large") && parse_size(v, &lw, &lh)) {
    } else if (!strcmp(a, "--frames-small")) fs = atol(v);
    else if (!strcmp(a, "--frames-large")) fl = atol(v);
    else if (!strcmp(a, "--rounds")) rounds = atoi(v);
    else if (!strcmp(a, "--stress")) stress = atol(v);
    else if (!strcmp(a, "--threads")) threads = atoi(v);
    else if (!strcmp(a, "--sections")) sections = v;
    else if (!strcmp(a, "--reuse-tune")) reuse = atoi(v) != 0;
    else {
      fprintf(stderr, "bench_pipe: bad option %s %s\n", a, v);
      return 2;
    }
  }
  if (fs < 1 || fl < 1 || rounds < 1 || threads < 1 || stress < 0) {
    fprintf(stderr, "bench_pipe: frames, rounds and threads must be >= 1\n");
    return 2;
  }
  const char *apps[8];
  int napps = 0;
  char appbuf[256];
  if (apps_arg) {
    snprintf(appbuf, sizeof appbuf, "%s", apps_arg);
    for (char *t = strtok(appbuf, ","); t && napps < 8; t = strtok(NULL, ",")) apps[napps++] = t;
  } else {
    for (const char *const *n = ts_pipe_app_names(); *n && napps < 8; n++) apps[napps++] = *n;
  }
  cJSON *root = cJSON_CreateObject();
  ts_provenance prov;
  ts_provenance_here(&prov, ts_isa_active(), threads);
  snprintf(prov.clock, sizeof prov.clock, "wall");
  cJSON_AddItemToObject(root, "provenance", ts__provenance_json(&prov));
  cJSON_AddNumberToObject(root, "rounds", rounds);

  /* 1. granularity */
  if (strchr(sections, 'g')) {
  printf("1. granularity: auto vs the offline best fixed tile (ratios: candidate time / auto time)\n");
  cJSON *G = cJSON_AddArrayToObject(root, "granularity");
  double r_other[16], r_same[16];
  int nr = 0;
  for (int k = 0; k < napps; k++) {
    ts_pipe_app *as, *al;
    if (ts_pipe_app_create(apps[k], sw, sh, &as) != TS_OK || ts_pipe_app_create(apps[k], lw, lh, &al) != TS_OK) {
      fprintf(stderr, "bench_pipe: %s\n", ts_last_error());
      return 1;
    }
    ts_pipe_opts o = ts_pipe_opts_default();
    o.threads = threads;
    ts_pipe_tune_result ts_, tl;
    o.frames = fs / 4 > 4 ? fs / 4 : 4; /* the offline search runs a quarter of the frames */
    ts_status s1 = ts_pipe_tune(ts_pipe_app_desc(as), &o, !reuse, true, &ts_);
    o.frames = fl / 4 > 4 ? fl / 4 : 4;
    ts_status s2 = ts_pipe_tune(ts_pipe_app_desc(al), &o, !reuse, true, &tl);
    ts_pipe_app_destroy(as);
    ts_pipe_app_destroy(al);
    if (s1 != TS_OK || s2 != TS_OK) {
      fprintf(stderr, "bench_pipe: tune %s: %s\n", apps[k], ts_last_error());
      return 1;
    }
    cJSON *x = granularity(apps[k], sw, sh, fs, threads, rounds, &ts_, &tl, &r_other[nr], &r_same[nr]);
    if (x) cJSON_AddItemToArray(G, x), nr++;
    x = granularity(apps[k], lw, lh, fl, threads, rounds, &tl, &ts_, &r_other[nr], &r_same[nr]);
    if (x) cJSON_AddItemToArray(G, x), nr++;
  }
  double go = geomean(r_other, nr), gs = geomean(r_same, nr);
  cJSON *gsum = cJSON_AddObjectToObject(root, "granularity_summary");
  cJSON_AddNumberToObject(gsum, "geomean_offline_other_over_auto", go);
  cJSON_AddNumberToObject(gsum, "geomean_offline_same_over_auto", gs);
  printf("  geomean over %d app-sizes: offline-other / auto %.3f (target >= 1.3), offline-same / auto %.3f (target >= 0.95)\n",
         nr, go, gs);
  }

  /* 2. queues: the app with the shortest tasks at the fine tile (life: 10 flop/px) */
  if (strchr(sections, 'q')) {
    printf("2. queues at the finest granularity\n");
    cJSON *q = queues("life", sw, sh, fs, threads, rounds, 32 < sw ? 32 : sw, 2 < sh ? 2 : sh);
    if (q) cJSON_AddItemToObject(root, "queues", q);
  }

  /* 3. copies */
  if (strchr(sections, 'c')) {
    printf("3. two device arenas: lazy vs eager copies (tile 64x16)\n");
    cJSON *C = cJSON_AddArrayToObject(root, "copies");
    for (int k = 0; k < napps; k++) {
      cJSON *x = copies(apps[k], sw, sh, fs / 4 > 4 ? fs / 4 : 4, threads, rounds, 64, 16);
      if (x) cJSON_AddItemToArray(C, x);
    }
  }

  /* 4. termination */
  if (stress > 0 && strchr(sections, 's')) {
    printf("4. termination: %ld randomized runs with delays and stalls\n", stress);
    ts_pipe_stress_result sr;
    if (ts_pipe_stress(stress, 1, 4, NULL, NULL, &sr) == TS_OK) {
      cJSON *x = cJSON_AddObjectToObject(root, "stress");
      cJSON_AddNumberToObject(x, "runs", (double)sr.runs);
      cJSON_AddNumberToObject(x, "tasks", (double)sr.tasks);
      cJSON_AddNumberToObject(x, "results", (double)sr.pixels);
      cJSON_AddNumberToObject(x, "lost", (double)sr.lost);
      cJSON_AddNumberToObject(x, "duplicated", (double)sr.duplicated);
      cJSON_AddNumberToObject(x, "frames_bad", (double)sr.frames_bad);
      cJSON_AddNumberToObject(x, "mismatched", (double)sr.mismatched);
      cJSON_AddNumberToObject(x, "failed", (double)sr.failed_runs);
      cJSON_AddNumberToObject(x, "wall_s", sr.wall_s);
      printf("  %lld runs, %lld tasks: lost %lld, duplicated %lld, frames bad %lld, mismatched %lld (%.1f s)\n",
             (long long)sr.runs, (long long)sr.tasks, (long long)sr.lost, (long long)sr.duplicated,
             (long long)sr.frames_bad, (long long)sr.mismatched, sr.wall_s);
    }
  }
  if (out) {
    mkdir(out, 0755);
    char path[1024];
    snprintf(path, sizeof path, "%s/bench_pipe.json", out);
    char *t = ts__json_print(root, true);
    if (!t || ts_write_file_atomic(path, t, strlen(t)) != TS_OK) {
      fprintf(stderr, "bench_pipe: writing %s: %s\n", path, ts_last_error());
      return 1;
    }
    cJSON_free(t);
    printf("wrote %s\n", path);
  }
  cJSON_Delete(root);
  return 0;
}
