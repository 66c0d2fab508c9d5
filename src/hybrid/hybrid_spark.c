/* The Spark engine: the controller and the modelled device served over TCP to Spark's tasks, and
 * the task side (`tessera hybrid task`).
 *
 * Mechanism: Spark standalone with a fixed executor set (no dynamic allocation: the container pool
 * cannot change once the job starts, as in the seed); each Spark task is one block and, when it
 * starts, asks this service for its role. So the controller decides per task launch, the way Hybrid
 * Hadoop's scheduler decides per map task, without touching Spark's own scheduler. Stage-level
 * scheduling (resource profiles) was not used: a profile is fixed per stage and a new one needs new
 * executors, i.e. a change of the container pool mid-job.
 *
 * Protocol (one TCP connection per task attempt, text lines):
 *   task -> START <round> <block> <slot>      service -> RUN <cpu|dev|split> <dev_frac>
 *   task -> SUBMIT                            service -> WAIT <done, CLOCK_MONOTONIC seconds>
 *   task -> DONE <cpu_s> <feed_s>             service -> OK
 * A connection that closes before DONE is a lost attempt (Spark re-runs it: the next START of the
 * same block is a retry). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hybrid/hybrid_internal.h"
#include "io/json_internal.h"

extern char **environ;

#ifndef TS_SOURCE_DIR
#define TS_SOURCE_DIR "."
#endif

typedef struct service {
  const ts_hybrid_job *job;
  ts_hybrid_ctl *ctl;
  ts_hybrid_devq *q;
  const ts_hybrid_task *tasks;
  int n, rounds;
  int round;
  double epoch, round_t0[64];
  int lfd;
  atomic_int stop;
  pthread_mutex_t mu;
  ts__hybrid_rec *rec;
  int nrec, caprec;
  int retries;
  uint8_t *started; /* per (round, block): starts seen */
  double period;
} service;

static int read_line(int fd, char *buf, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    char c;
    ssize_t r = recv(fd, &c, 1, 0);
    if (r <= 0) return -1;
    if (c == '\n') break;
    buf[n++] = c;
  }
  buf[n] = 0;
  return (int)n;
}

static int send_str(int fd, const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

typedef struct conn {
  service *sv;
  int fd;
} conn;

static void *conn_worker(void *arg) {
  conn *c = arg;
  service *sv = c->sv;
  int fd = c->fd;
  free(c);
  char line[256], reply[128];
  int round, block;
  char slot[64] = "";
  if (read_line(fd, line, sizeof line) < 0 || sscanf(line, "START %d %d %63s", &round, &block, slot) < 2 || block < 0 ||
      block >= sv->n || round < 0 || round >= sv->rounds) {
    send_str(fd, "ERR bad START\n");
    close(fd);
    return NULL;
  }
  double t0 = ts_now();
  pthread_mutex_lock(&sv->mu);
  if (sv->started) {
    uint8_t *st = &sv->started[(size_t)round * sv->n + block];
    if (*st) sv->retries++; /* Spark re-runs a lost attempt, or a finished task whose output was lost */
    if (*st < 255) (*st)++;
  }
  if (round > sv->round) { /* the driver moved to the next round */
    sv->round = round;
    if (round < 64) sv->round_t0[round] = t0;
    ts_hybrid_ctl_round(sv->ctl, t0);
  }
  pthread_mutex_unlock(&sv->mu);
  ts_hybrid_decision d;
  if (ts_hybrid_ctl_start(sv->ctl, t0, block, &d) != TS_OK) {
    send_str(fd, "ERR controller\n");
    close(fd);
    return NULL;
  }
  snprintf(reply, sizeof reply, "RUN %s %.17g\n", d.cls == TS_HYBRID_CPU ? "cpu" : d.cls == TS_HYBRID_DEV ? "dev" : "split",
           d.dev_frac);
  ts__hybrid_rec r = {.round = round, .task = block, .cls = d.cls, .dev_frac = d.dev_frac};
  ts_hybrid_done dn = {.task = block, .cls = d.cls, .dev_frac = d.dev_frac};
  bool ok = send_str(fd, reply) == 0;
  double done_at = 0;
  if (ok && d.cls != TS_HYBRID_CPU) {
    ok = read_line(fd, line, sizeof line) >= 0 && strncmp(line, "SUBMIT", 6) == 0;
    if (ok) {
      double now = ts_now(), t[3];
      for (int e = 0; e < 3; e++) t[e] = sv->tasks[block].dev_s[e] * d.dev_frac;
      done_at = ts_hybrid_devq_submit(sv->q, now, t, &dn.kernel_s);
      r.dev_submit = now - sv->epoch;
      r.dev_end = done_at - sv->epoch;
      dn.dev_s = done_at - now;
      snprintf(reply, sizeof reply, "WAIT %.17g\n", done_at);
      ok = send_str(fd, reply) == 0;
    }
  }
  double cpu_s = 0, feed_s = 0;
  if (ok) ok = read_line(fd, line, sizeof line) >= 0 && sscanf(line, "DONE %lf %lf", &cpu_s, &feed_s) == 2;
  double t1 = ts_now();
  if (ok) {
    dn.cpu_s = cpu_s;
    dn.feed_s = feed_s;
    ts_hybrid_ctl_done(sv->ctl, t1, &dn);
    send_str(fd, "OK\n");
    r.t0 = t0 - sv->epoch;
    r.t1 = t1 - sv->epoch;
    r.cpu_s = cpu_s;
    r.feed_s = feed_s;
    /* containers are Spark's: a slot lane per concurrently running task, first free */
    pthread_mutex_lock(&sv->mu);
    int lane = 0;
    for (bool clash = true; clash; lane++) {
      clash = false;
      for (int i = 0; i < sv->nrec && !clash; i++)
        if (sv->rec[i].slot == lane && sv->rec[i].t1 > r.t0 && sv->rec[i].t0 < r.t1) clash = true;
      if (!clash) break;
    }
    r.slot = lane;
    if (sv->nrec == sv->caprec) {
      int cap = sv->caprec ? 2 * sv->caprec : 256;
      ts__hybrid_rec *nr = realloc(sv->rec, (size_t)cap * sizeof *nr);
      if (nr) sv->rec = nr, sv->caprec = cap;
    }
    if (sv->nrec < sv->caprec) sv->rec[sv->nrec++] = r;
    pthread_mutex_unlock(&sv->mu);
  }
  close(fd);
  return NULL;
}

static void *accept_worker(void *arg) {
  service *sv = arg;
  while (!sv->stop) {
    struct pollfd p = {sv->lfd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int fd = accept(sv->lfd, NULL, NULL);
    if (fd < 0) continue;
    conn *c = malloc(sizeof *c);
    pthread_t th;
    if (!c) {
      close(fd);
      continue;
    }
    *c = (conn){sv, fd};
    if (pthread_create(&th, NULL, conn_worker, c) != 0) {
      free(c);
      close(fd);
      continue;
    }
    pthread_detach(th);
  }
  return NULL;
}

static void *monitor_worker(void *arg) {
  service *sv = arg;
  double window = sv->period * 4;
  while (!sv->stop) {
    struct timespec ts = {0, (long)(sv->period * 1e9)};
    nanosleep(&ts, NULL);
    double now = ts_now(), busy, own;
    int queued;
    ts_hybrid_devq_monitor(sv->q, now, window, &busy, &own, &queued);
    ts_hybrid_ctl_monitor(sv->ctl, now, busy, own, queued);
  }
  return NULL;
}

/* Runs argv with stdout into a pipe; returns the last line that starts with '{'. */
static ts_status run_driver(char *const argv[], char *json, size_t cap, int *status) {
  int pfd[2];
  if (pipe(pfd) != 0) return ts_error(TS_ERR_IO, "pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pfd[0]);
  pid_t pid;
  int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  if (e != 0) {
    close(pfd[0]);
    return ts_error(TS_ERR_IO, "%s: %s", argv[0], strerror(e));
  }
  FILE *f = fdopen(pfd[0], "r");
  char *line = NULL;
  size_t lcap = 0;
  json[0] = 0;
  while (f && getline(&line, &lcap, f) > 0) {
    if (line[0] == '{') snprintf(json, cap, "%s", line);
    else fputs(line, stderr);
  }
  free(line);
  if (f) fclose(f);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  return TS_OK;
}

ts_status ts_hybrid_run_spark(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, const ts_hybrid_spark_opts *so,
                              char **report, char **svg) {
  *report = NULL;
  if (svg) *svg = NULL;
  ts__hybrid_run *run;
  TS_TRY(ts__hybrid_setup(job, o, "spark", &run));
  int n = run->n, R = run->R, S = run->S;
  ts_hybrid_task *tasks = run->tasks;
  ts__hybrid_result *res = &run->res;
  ts_hybrid_ctl_opts co = run->co;
  service sv = {.job = job, .tasks = tasks, .n = n, .rounds = R, .lfd = -1, .period = o->monitor_period_s > 0 ? o->monitor_period_s : 0.025};
  pthread_mutex_init(&sv.mu, NULL);
  sv.started = calloc((size_t)n * R, 1);
  ts_status s = sv.started ? ts_hybrid_ctl_create(&sv.ctl, &co, tasks, n) : ts_error(TS_ERR_OOM, "hybrid: out of memory");
  struct sockaddr_in a = {0};
  socklen_t al = sizeof a;
  if (s == TS_OK) {
    sv.lfd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (sv.lfd < 0 || bind(sv.lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(sv.lfd, 64) != 0 ||
        getsockname(sv.lfd, (struct sockaddr *)&a, &al) != 0)
      s = ts_error(TS_ERR_IO, "hybrid: cannot listen on 127.0.0.1: %s", strerror(errno));
  }
  sv.epoch = ts_now();
  sv.round_t0[0] = sv.epoch;
  if (s == TS_OK) s = ts_hybrid_devq_create(&sv.q, run->ten, run->nten, sv.epoch);
  pthread_t acc, mon;
  bool acc_on = false, mon_on = false;
  if (s == TS_OK) acc_on = pthread_create(&acc, NULL, accept_worker, &sv) == 0;
  if (s == TS_OK && !acc_on) s = ts_error(TS_ERR_INTERNAL, "hybrid: cannot start the service thread");
  if (s == TS_OK && o->mode == TS_HYBRID_MODE_AUTO) mon_on = pthread_create(&mon, NULL, monitor_worker, &sv) == 0;
  char self[4096] = "", addr[64], blocks[16], rounds[16], out[4200], djson[65536] = "";
  int status = -1;
  if (s == TS_OK) {
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0) s = ts_error(TS_ERR_IO, "hybrid: cannot find this program's path");
    else self[l] = 0;
  }
  if (s == TS_OK) {
    char py[4200], drv[4200];
    snprintf(py, sizeof py, "%s", so && so->python ? so->python : TS_SOURCE_DIR "/bench/peers/.venv-spark/bin/python");
    snprintf(drv, sizeof drv, "%s", so && so->driver ? so->driver : TS_SOURCE_DIR "/tools/hybrid/spark_job.py");
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    snprintf(blocks, sizeof blocks, "%d", n);
    snprintf(rounds, sizeof rounds, "%d", R);
    snprintf(out, sizeof out, "%s/output-spark.txt", o->work_dir);
    remove(out);
    const char *master = so && so->master ? so->master : "spark://127.0.0.1:7077";
    char slots[16];
    snprintf(slots, sizeof slots, "%d", S);
    char *argv[26];
    int k = 0;
    argv[k++] = py;
    argv[k++] = drv;
    argv[k++] = "--master";
    argv[k++] = (char *)master;
    argv[k++] = "--tessera";
    argv[k++] = self;
    argv[k++] = "--connect";
    argv[k++] = addr;
    argv[k++] = "--work";
    argv[k++] = (char *)o->work_dir;
    argv[k++] = "--job";
    argv[k++] = (char *)ts_hybrid_job_name(ts_hybrid_job_kind_of(job));
    argv[k++] = "--blocks";
    argv[k++] = blocks;
    argv[k++] = "--rounds";
    argv[k++] = rounds;
    argv[k++] = "--slots";
    argv[k++] = slots;
    argv[k++] = "--out";
    argv[k++] = out;
    if (so && so->dynamic_allocation) argv[k++] = "--dynamic-allocation";
    argv[k] = NULL;
    if (access(py, X_OK) != 0)
      s = ts_error(TS_ERR_NOT_FOUND, "hybrid: Spark's python '%s' is missing (scripts/spark-cluster.sh install)", py);
    if (s == TS_OK) s = run_driver(argv, djson, sizeof djson, &status);
    if (s == TS_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      s = ts_error(TS_ERR_IO, "hybrid: the Spark driver failed (status %d); its messages are above", status);
  }
  sv.stop = 1;
  if (acc_on) pthread_join(acc, NULL);
  if (mon_on) pthread_join(mon, NULL);
  if (sv.lfd >= 0) close(sv.lfd);
  /* the driver's wall time per round (the makespan as a user sees it) */
  if (s == TS_OK) {
    cJSON *dj = NULL;
    s = ts__json_read_mem(djson, strlen(djson), "the Spark driver's report", &dj);
    const cJSON *rr = s == TS_OK ? cJSON_GetObjectItemCaseSensitive(dj, "rounds") : NULL;
    if (s == TS_OK && (!cJSON_IsArray(rr) || cJSON_GetArraySize(rr) != R))
      s = ts_error(TS_ERR_FORMAT, "hybrid: the Spark driver's report does not list %d rounds", R);
    for (int r = 0; s == TS_OK && r < R; r++) {
      double w = 0;
      s = ts__json_get_number(cJSON_GetArrayItem(rr, r), "wall_s", &w);
      if (r < 64) res->round_s[r] = w;
      res->makespan += w;
    }
    cJSON_Delete(dj);
  }
  char *txt = NULL;
  size_t tl = 0;
  if (s == TS_OK) s = ts_read_file(out, &txt, &tl);
  if (s == TS_OK) s = ts__hybrid_check_output(o->work_dir, txt, tl, &res->output_ok, res->output_note, sizeof res->output_note);
  free(txt);
  if (s == TS_OK && sv.retries) {
    size_t l = strlen(res->output_note);
    snprintf(res->output_note + l, sizeof res->output_note - l, "; %d task attempts re-run by Spark", sv.retries);
  }
  if (s == TS_OK) s = ts__hybrid_conclude(run, sv.ctl, sv.q, sv.epoch, sv.rec, sv.nrec, report, svg);
  ts_hybrid_devq_destroy(sv.q);
  ts_hybrid_ctl_destroy(sv.ctl);
  free(sv.rec);
  free(sv.started);
  free(tasks);
  free(run);
  pthread_mutex_destroy(&sv.mu);
  return s;
}

/* ---- the task side ------------------------------------------------------------------------- */

static int connect_to(const char *hostport) {
  char host[64];
  const char *colon = strrchr(hostport, ':');
  if (!colon || colon - hostport >= (long)sizeof host) return -1;
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = 0;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}


ts_status ts_hybrid_task_run(const char *connect, const char *work, int round, int block, const char *slot, FILE *outf) {
  char path[4200];
  snprintf(path, sizeof path, "%s/job.json", work);
  ts_hybrid_job *job = NULL;
  TS_TRY(ts__hybrid_job_from_file(path, &job));
  ts_status s = TS_OK;
  if (block < 0 || block >= ts_hybrid_job_blocks(job) || round < 0 || round >= ts_hybrid_job_rounds(job))
    s = ts_error(TS_ERR_INVALID_ARG, "hybrid task: block %d / round %d out of range", block, round);
  double *cent = NULL;
  if (s == TS_OK && ts_hybrid_job_kind_of(job) == TS_HYBRID_KMEANS) {
    snprintf(path, sizeof path, "%s/centroids-%d.txt", work, round);
    s = ts__hybrid_centroids_load(job, path, &cent);
  }
  int fd = s == TS_OK ? connect_to(connect) : -1;
  if (s == TS_OK && fd < 0) s = ts_error(TS_ERR_IO, "hybrid task: cannot connect to the controller at %s", connect);
  char line[256], cls[16] = "";
  double frac = 0, done_at = 0, cpu_s = 0, feed_s = 0;
  if (s == TS_OK) {
    snprintf(line, sizeof line, "START %d %d %s\n", round, block, slot && *slot ? slot : "-");
    if (send_str(fd, line) != 0 || read_line(fd, line, sizeof line) < 0 || sscanf(line, "RUN %15s %lf", cls, &frac) != 2)
      s = ts_error(TS_ERR_IO, "hybrid task: the controller did not answer START (%s)", line);
  }
  bool dev = strcmp(cls, "cpu") != 0;
  if (s == TS_OK && dev) {
    double t0 = ts_now();
    volatile uint64_t h = ts__hybrid_feed_part(job, block, 1 - frac, 1);
    (void)h;
    feed_s = ts_now() - t0;
    if (send_str(fd, "SUBMIT\n") != 0 || read_line(fd, line, sizeof line) < 0 || sscanf(line, "WAIT %lf", &done_at) != 1)
      s = ts_error(TS_ERR_IO, "hybrid task: the controller did not answer SUBMIT");
  }
  char *out = NULL;
  size_t len = 0;
  if (s == TS_OK && strcmp(cls, "dev") != 0) {
    double t0 = ts_now();
    s = ts__hybrid_cpu_part(job, block, 1 - frac, cent, &out, &len);
    cpu_s = ts_now() - t0;
    if (dev) free(out), out = NULL;
  }
  if (s == TS_OK && dev) {
    ts__hybrid_sleep_until(done_at);
    s = ts__hybrid_dev_result(work, round, block, &out, &len);
  }
  if (s == TS_OK) {
    snprintf(line, sizeof line, "DONE %.9f %.9f\n", cpu_s, feed_s);
    if (send_str(fd, line) != 0 || read_line(fd, line, sizeof line) < 0 || strcmp(line, "OK") != 0)
      s = ts_error(TS_ERR_IO, "hybrid task: the controller did not acknowledge DONE");
  }
  if (s == TS_OK && fwrite(out, 1, len, outf) != len) s = ts_error(TS_ERR_IO, "hybrid task: cannot write the result");
  if (fd >= 0) close(fd);
  free(out);
  free(cent);
  ts_hybrid_job_close(job);
  return s;
}
