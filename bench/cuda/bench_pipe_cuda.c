/* The pipeline runtime on the GPU (include/tessera/pipe_cuda.h) against the CPU runtime
 * (ts_pipe_run, sharded deques, automatic granularity), per device app, timed in interleaved
 * rounds by the measure engine (median seconds per run of --frames frames, including each run's
 * graph build, uploads and the copies of every frame back to the host).
 *
 *   bench_pipe_cuda [--apps heat,life,edge] [--size WxH] [--frames N] [--inflight K] [--rounds R]
 *                   [--threads T]
 *
 * Variants per app: gpu_global_TWxTH and gpu_sharded_TWxTH for tiles 32x8, 64x16 and 128x32, and
 * cpu (T threads, 0: all). Prints one JSON object: the size, frames, device, and per app each
 * variant's median_s, mpix_per_s and speedup_vs_cpu (paired ratio of medians per round), and
 * bit_identical (the last frame of a GPU run equal to the CPU runtime's). Exits 0 with
 * {"skipped": "no CUDA device ..."} when there is no device. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/measure.h"
#include "tessera/pipe.h"
#include "tessera/pipe_cuda.h"

#define NV 7

typedef struct job {
  const char *app;
  int w, h;
  bool gpu;
  ts_pipe_opts o;
  const ts_pipe_desc *d;
} job;

static ts_status run_job(void *a) {
  job *j = a;
  return j->gpu ? ts_pipe_cuda_run(j->app, j->w, j->h, &j->o, NULL) : ts_pipe_run(j->d, &j->o, NULL);
}

typedef struct last_frame {
  int64_t want;
  float *v;
  size_t n;
} last_frame;

static void keep_last(int64_t frame, const ts_pipe_buf *out, void *user) {
  last_frame *l = user;
  if (frame != l->want) return;
  for (int c = 0; c < out->c; c++)
    for (int y = 0; y < out->h; y++)
      memcpy(l->v + ((size_t)c * out->h + y) * out->w, out->data + c * out->plane + y * out->row,
             (size_t)out->w * sizeof(float));
}

static int usage(void) {
  fprintf(stderr,
          "usage: bench_pipe_cuda [--apps heat,life,edge] [--size WxH] [--frames N] [--inflight K] "
          "[--rounds R] [--threads T]\n");
  return 2;
}

int main(int argc, char **argv) {
  char apps[256] = "heat,life,edge";
  int W = 4096, H = 4096, inflight = 4, rounds = 5, threads = 0;
  int64_t frames = 16;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--apps") && v)
      snprintf(apps, sizeof apps, "%s", v), i++;
    else if (!strcmp(argv[i], "--size") && v && sscanf(v, "%dx%d", &W, &H) == 2 && W > 0 && H > 0)
      i++;
    else if (!strcmp(argv[i], "--frames") && v && (frames = atoll(v)) > 0)
      i++;
    else if (!strcmp(argv[i], "--inflight") && v && (inflight = atoi(v)) > 0)
      i++;
    else if (!strcmp(argv[i], "--rounds") && v && (rounds = atoi(v)) > 0)
      i++;
    else if (!strcmp(argv[i], "--threads") && v && (threads = atoi(v)) >= 0)
      i++;
    else
      return usage();
  }
  if (!ts_pipe_cuda_available()) {
    printf("{\"skipped\": \"no CUDA device: bench_pipe_cuda needs one\"}\n");
    return 0;
  }
  static const int tiles[3][2] = {{32, 8}, {64, 16}, {128, 32}};
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "width", W);
  cJSON_AddNumberToObject(root, "height", H);
  cJSON_AddNumberToObject(root, "frames", (double)frames);
  cJSON_AddNumberToObject(root, "inflight", inflight);
  cJSON *japps = cJSON_AddObjectToObject(root, "apps");
  int status = 0;
  for (char *tok = strtok(apps, ","); tok; tok = strtok(NULL, ",")) {
    ts_pipe_app *app;
    ts_status st = ts_pipe_app_create(tok, W, H, &app);
    if (st != TS_OK) {
      fprintf(stderr, "bench_pipe_cuda: %s\n", ts_last_error());
      status = 1;
      continue;
    }
    job jobs[NV];
    char names[NV][32];
    for (int v = 0; v < NV; v++) {
      job *j = &jobs[v];
      memset(j, 0, sizeof *j);
      j->app = tok, j->w = W, j->h = H, j->d = ts_pipe_app_desc(app);
      j->o = ts_pipe_opts_default();
      j->o.frames = frames;
      j->o.inflight = inflight;
      if (v < NV - 1) {
        j->gpu = true;
        j->o.queue = v % 2 ? TS_PIPE_Q_SHARDED : TS_PIPE_Q_MPMC;
        j->o.gran = TS_PIPE_GRAN_FIXED;
        j->o.tile_w = tiles[v / 2][0];
        j->o.tile_h = tiles[v / 2][1];
        snprintf(names[v], sizeof names[v], "gpu_%s_%dx%d", v % 2 ? "sharded" : "global", j->o.tile_w, j->o.tile_h);
      } else {
        j->o.threads = threads;
        snprintf(names[v], sizeof names[v], "cpu");
      }
    }
    ts_measure_fn fn[NV];
    void *arg[NV];
    for (int v = 0; v < NV; v++) fn[v] = run_job, arg[v] = &jobs[v];
    ts_measure_opts m = ts_measure_opts_default();
    m.warmup = 1;
    m.rounds = rounds;
    m.max_rounds = rounds;
    m.min_time_s = 0;
    m.alternate = true;
    m.baseline = NV - 1;
    ts_measure_result res[NV];
    st = ts_measure_run(NV, fn, arg, &m, res, NULL);
    cJSON *ja = cJSON_AddObjectToObject(japps, tok);
    if (st != TS_OK) {
      cJSON_AddStringToObject(ja, "error", ts_last_error());
      status = 1;
    }
    for (int v = 0; v < NV && st == TS_OK; v++) {
      cJSON *jv = cJSON_AddObjectToObject(ja, names[v]);
      if (res[v].status != TS_OK) {
        cJSON_AddStringToObject(jv, "error", ts_strerror(res[v].status));
        continue;
      }
      cJSON_AddNumberToObject(jv, "median_s", res[v].s.median);
      cJSON_AddNumberToObject(jv, "mpix_per_s", (double)W * H * (double)frames / res[v].s.median / 1e6);
      if (v < NV - 1) cJSON_AddNumberToObject(jv, "speedup_vs_cpu", 1.0 / res[v].ratio);
    }
    /* the GPU's last frame against the CPU runtime's */
    const ts_pipe_desc *d = ts_pipe_app_desc(app);
    int lw, lh;
    ts_pipe_stage_size(d, d->nstages - 1, &lw, &lh);
    size_t n = (size_t)lw * lh * d->stage[d->nstages - 1].channels;
    last_frame a = {frames - 1, malloc(n * sizeof(float)), n}, b = {frames - 1, malloc(n * sizeof(float)), n};
    jobs[1].o.sink = keep_last, jobs[1].o.sink_user = &a;
    jobs[NV - 1].o.sink = keep_last, jobs[NV - 1].o.sink_user = &b;
    bool same = a.v && b.v && run_job(&jobs[1]) == TS_OK && run_job(&jobs[NV - 1]) == TS_OK &&
                memcmp(a.v, b.v, n * sizeof(float)) == 0;
    cJSON_AddBoolToObject(ja, "bit_identical", same);
    if (!same) status = 1;
    free(a.v);
    free(b.v);
    ts_pipe_app_destroy(app);
  }
  char *s = cJSON_Print(root);
  printf("%s\n", s);
  free(s);
  cJSON_Delete(root);
  return status;
}
