/* tessera-pipe-mpi: a stencil pipeline over P MPI ranks, each running the tessera runtime on a
 * contiguous share of the last stage's rows.
 *
 *   mpirun -np P tessera-pipe-mpi --app NAME [--size WxH] [--frames N] [--granularity auto|WxH]
 *                                 [--threads T] [--check] [--json]
 *
 * Share: rank r owns rows [r*Hl/P, (r+1)*Hl/P) of the last stage (Hl its height). ts_pipe_run with
 * row0/row1 = that share computes, of every other stage, only the rows the share reads through the
 * kernel contract (ts_pipe_input_span, back from the last stage): the ghost zones, computed
 * redundantly by both neighbours instead of communicated.
 *
 * Streaming apps (no FEEDBACK input): frames are independent, so each rank runs all N frames in
 * one ts_pipe_run and nothing is communicated until the --check gather.
 *
 * Feedback apps (heat, life): frame f's stages read frame f-1's last-stage rows [lo, hi) (the
 * FEEDBACK spans of the rank's regions), wider than the share by the halo accumulated through the
 * chain. Each rank runs frame by frame (frames 1, frame0 f, feedback0 = a full plane holding its own
 * rows and the halo rows received), and between frames sends every other rank the rows of its own
 * share that rank needs (in practice the upper and lower neighbour, a few rows each): Irecv / Isend
 * / Waitall with one strided datatype per peer ([c] blocks of rows x W floats, stride Hl x W).
 *
 * Exit codes, the same on every rank: 0 ok, 1 a run failed or --check found a mismatch, 2 bad usage
 * (message from rank 0 only). No MPI_Abort: every rank reaches MPI_Finalize. */
#include <limits.h>
#include <malloc.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tessera/pipe.h"

#define PROG "tessera-pipe-mpi"
#define MAXS TS_PIPE_MAX_STAGES

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

typedef struct args {
  const char *app;
  int w, h, threads, tile_w, tile_h; /* tile 0x0: auto */
  long frames;
  bool check, json, help;
} args;

static int g_rank;

static void usage(void) {
  printf("usage: mpirun -np P " PROG " --app NAME [--size WxH] [--frames N] [--granularity auto|WxH]\n"
         "                          [--threads T] [--check] [--json]\n\n"
         "Runs a tessera pipeline app over P processes: each rank computes a contiguous share of the last\n"
         "stage's rows (and of every other stage the rows that share reads: ghost zones, computed twice).\n"
         "Feedback apps (heat, life) run frame by frame and exchange the halo rows of the previous frame's\n"
         "output with the neighbours; streaming apps run all frames at once with no communication.\n\n"
         "  --app NAME          edge, heat, isp, flow, life, cnn\n"
         "  --size WxH          domain (1024x1024)            --frames N   frames (8)\n"
         "  --granularity G     auto (default) or a fixed WxH tile in level-0 pixels\n"
         "  --threads T         workers per rank (default: the machine's threads / P, at least 1)\n"
         "  --check             gather every frame to rank 0 and compare with the app's reference bit\n"
         "                      for bit (exit 1 on a mismatch)\n"
         "  --json              the report as JSON\n");
}

/* A usage error: one line on rank 0's stderr; every rank returns the same code. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  if (g_rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
  return EXIT_USAGE;
}

static bool parse_wxh(const char *v, int *w, int *h) {
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

static bool parse_long(const char *v, long lo, long hi, long *out) {
  char *e;
  long x = strtol(v, &e, 10);
  if (e == v || *e || x < lo || x > hi) return false;
  *out = x;
  return true;
}

static int parse_args(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->w = a->h = 1024;
  a->frames = 8;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--check")) a->check = true;
    else if (!strcmp(o, "--json")) a->json = true;
    else if (!strcmp(o, "--help") || !strcmp(o, "-h")) a->help = true;
    else if (!strcmp(o, "--app") || !strcmp(o, "--size") || !strcmp(o, "--frames") || !strcmp(o, "--granularity") ||
             !strcmp(o, "--threads")) {
      if (i + 1 >= argc) return usage_error("%s needs a value", o);
      const char *v = argv[++i];
      long x;
      if (!strcmp(o, "--app")) a->app = v;
      else if (!strcmp(o, "--size")) {
        if (!parse_wxh(v, &a->w, &a->h)) return usage_error("--size '%s': expected WxH, each 1..65536", v);
      } else if (!strcmp(o, "--frames")) {
        if (!parse_long(v, 1, 1 << 20, &a->frames)) return usage_error("--frames '%s': expected 1..1048576", v);
      } else if (!strcmp(o, "--threads")) {
        if (!parse_long(v, 1, 256, &x)) return usage_error("--threads '%s': expected 1..256 (per rank)", v);
        a->threads = (int)x;
      } else if (strcmp(v, "auto") != 0 && !parse_wxh(v, &a->tile_w, &a->tile_h)) {
        return usage_error("--granularity '%s': expected auto or WxH (each 1..65536)", v);
      }
    } else {
      return usage_error("unknown option '%s' (--help lists them)", o);
    }
  }
  if (!a->help && !a->app) return usage_error("--app NAME is required (edge, heat, isp, flow, life or cnn)");
  return EXIT_OK;
}

/* ---- shares, ghost zones, halos ------------------------------------------------------------- */

typedef struct layout {
  int S, last, W, H, C; /* stages; the last stage's plane W x H x C */
  int h[MAXS], w[MAXS];
  bool feedback;
} layout;

static void layout_of(const ts_pipe_desc *d, layout *L) {
  L->S = d->nstages;
  L->last = d->nstages - 1;
  L->feedback = false;
  for (int s = 0; s < L->S; s++) {
    ts_pipe_stage_size(d, s, &L->w[s], &L->h[s]);
    for (int i = 0; i < d->stage[s].nin; i++) L->feedback |= d->stage[s].in[i].from == TS_PIPE_FEEDBACK;
  }
  L->W = L->w[L->last];
  L->H = L->h[L->last];
  L->C = d->stage[L->last].channels;
}

/* Rank r's share of n rows among p: [*a, *b), balanced (sizes differ by at most one). */
static void share(int64_t n, int p, int r, int *a, int *b) {
  *a = (int)(n * r / p);
  *b = (int)(n * (r + 1) / p);
}

/* Rows [ry0[s], ry1[s]) each stage computes for last-stage rows [row0, row1): the runtime's own
 * back-propagation (pipe_run.c, regions()) through ts_pipe_input_span; an unread stage gets none. */
static void regions(const ts_pipe_desc *d, const layout *L, int row0, int row1, int *ry0, int *ry1) {
  for (int s = 0; s < L->S; s++) ry0[s] = ry1[s] = -1;
  ry0[L->last] = row0;
  ry1[L->last] = row1;
  for (int s = L->last; s >= 0; s--) {
    if (ry0[s] < 0) {
      ry0[s] = ry1[s] = 0;
      continue;
    }
    const ts_pipe_stage *st = &d->stage[s];
    for (int i = 0; i < st->nin; i++) {
      int j = st->in[i].from, lo, hi;
      if (j == TS_PIPE_FEEDBACK) continue;
      ts_pipe_input_span(st->level, d->stage[j].level, st->in[i].halo, L->h[j], ry0[s], ry1[s], &lo, &hi);
      if (ry0[j] < 0) {
        ry0[j] = lo;
        ry1[j] = hi + 1;
      } else {
        if (lo < ry0[j]) ry0[j] = lo;
        if (hi + 1 > ry1[j]) ry1[j] = hi + 1;
      }
    }
  }
}

/* Rows [*lo, *hi) of the previous frame's last stage that these regions read through FEEDBACK
 * inputs (the union over every reading stage; empty: *lo == *hi). */
static void feedback_need(const ts_pipe_desc *d, const layout *L, const int *ry0, const int *ry1, int *lo, int *hi) {
  *lo = *hi = 0;
  bool any = false;
  for (int s = 0; s < L->S; s++) {
    if (ry1[s] <= ry0[s]) continue;
    const ts_pipe_stage *st = &d->stage[s];
    for (int i = 0; i < st->nin; i++) {
      if (st->in[i].from != TS_PIPE_FEEDBACK) continue;
      int a, b;
      ts_pipe_input_span(st->level, d->stage[L->last].level, st->in[i].halo, L->H, ry0[s], ry1[s], &a, &b);
      if (!any || a < *lo) *lo = a;
      if (!any || b + 1 > *hi) *hi = b + 1;
      any = true;
    }
  }
}

/* The halo exchange for one rank: per peer, the rows sent and received ([a, b) of the last stage,
 * empty when a >= b) and their strided datatypes over a full W x H x C plane. */
typedef struct peer {
  int send_a, send_b, recv_a, recv_b;
  MPI_Datatype send_t, recv_t;
} peer;

typedef struct exchange {
  int P;
  peer *p;          /* [P] */
  int64_t sent_bytes, recv_bytes; /* per frame */
  int need_lo, need_hi;
} exchange;

static MPI_Datatype rows_type(const layout *L, int rows) {
  MPI_Datatype t;
  /* [C] blocks of rows x W floats, a plane (H x W) apart */
  MPI_Type_vector(L->C, rows * L->W, L->H * L->W, MPI_FLOAT, &t);
  MPI_Type_commit(&t);
  return t;
}

/* Every rank's need from its own regions, then what this rank sends to and receives from each. */
static int exchange_plan(const ts_pipe_desc *d, const layout *L, int rank, int P, exchange *X) {
  memset(X, 0, sizeof *X);
  X->P = P;
  X->p = calloc((size_t)P, sizeof *X->p);
  int *nlo = calloc((size_t)P, sizeof(int)), *nhi = calloc((size_t)P, sizeof(int));
  if (!X->p || !nlo || !nhi) {
    free(nlo);
    free(nhi);
    return -1;
  }
  int ry0[MAXS], ry1[MAXS];
  for (int q = 0; q < P; q++) {
    int a, b;
    share(L->H, P, q, &a, &b);
    regions(d, L, a, b, ry0, ry1);
    feedback_need(d, L, ry0, ry1, &nlo[q], &nhi[q]);
  }
  X->need_lo = nlo[rank];
  X->need_hi = nhi[rank];
  int my0, my1;
  share(L->H, P, rank, &my0, &my1);
  int rc = 0;
  for (int q = 0; q < P; q++) {
    peer *e = &X->p[q];
    e->send_t = e->recv_t = MPI_DATATYPE_NULL;
    if (q == rank) continue;
    int q0, q1;
    share(L->H, P, q, &q0, &q1);
    e->send_a = nlo[q] > my0 ? nlo[q] : my0; /* my rows q reads */
    e->send_b = nhi[q] < my1 ? nhi[q] : my1;
    e->recv_a = nlo[rank] > q0 ? nlo[rank] : q0; /* q's rows I read */
    e->recv_b = nhi[rank] < q1 ? nhi[rank] : q1;
    if ((int64_t)(e->send_b - e->send_a) * L->W > INT_MAX || (int64_t)(e->recv_b - e->recv_a) * L->W > INT_MAX ||
        (int64_t)L->H * L->W > INT_MAX)
      rc = -2; /* a block MPI cannot count in an int */
    if (rc) continue;
    if (e->send_b > e->send_a) {
      e->send_t = rows_type(L, e->send_b - e->send_a);
      X->sent_bytes += (int64_t)(e->send_b - e->send_a) * L->W * L->C * (int64_t)sizeof(float);
    }
    if (e->recv_b > e->recv_a) {
      e->recv_t = rows_type(L, e->recv_b - e->recv_a);
      X->recv_bytes += (int64_t)(e->recv_b - e->recv_a) * L->W * L->C * (int64_t)sizeof(float);
    }
  }
  free(nlo);
  free(nhi);
  return rc;
}

static void exchange_free(exchange *X) {
  if (!X->p) return;
  for (int q = 0; q < X->P; q++) {
    if (X->p[q].send_t != MPI_DATATYPE_NULL) MPI_Type_free(&X->p[q].send_t);
    if (X->p[q].recv_t != MPI_DATATYPE_NULL) MPI_Type_free(&X->p[q].recv_t);
  }
  free(X->p);
  X->p = NULL;
}

/* Sends this rank's rows of plane (W x H x C) to the peers that read them and receives theirs into
 * the same plane (disjoint rows: a rank never receives rows of its own share). */
static void exchange_run(const exchange *X, const layout *L, float *plane, MPI_Request *req) {
  int n = 0;
  for (int q = 0; q < X->P; q++)
    if (X->p[q].recv_t != MPI_DATATYPE_NULL)
      MPI_Irecv(plane + (int64_t)X->p[q].recv_a * L->W, 1, X->p[q].recv_t, q, 0, MPI_COMM_WORLD, &req[n++]);
  for (int q = 0; q < X->P; q++)
    if (X->p[q].send_t != MPI_DATATYPE_NULL)
      MPI_Isend(plane + (int64_t)X->p[q].send_a * L->W, 1, X->p[q].send_t, q, 0, MPI_COMM_WORLD, &req[n++]);
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
}

/* ---- running -------------------------------------------------------------------------------- */

/* What the sink keeps of each frame: the share's rows into a full plane (the next frame's
 * feedback0) and, for --check, packed rows per frame: keep [frames][C][rows][W]. */
typedef struct keeper {
  const layout *L;
  int row0, row1;
  int64_t frame0, frames;
  float *plane; /* W x H x C, or NULL */
  float *keep;  /* or NULL */
} keeper;

static void sink(int64_t frame, const ts_pipe_buf *b, void *user) {
  keeper *k = user;
  const layout *L = k->L;
  int rows = k->row1 - k->row0;
  size_t rowb = (size_t)L->W * sizeof(float);
  for (int ch = 0; ch < b->c; ch++)
    for (int y = k->row0; y < k->row1; y++) {
      const float *src = b->data + ch * b->plane + (int64_t)y * b->row;
      if (k->plane) memcpy(k->plane + ((int64_t)ch * L->H + y) * L->W, src, rowb);
      if (k->keep && frame >= k->frame0 && frame < k->frame0 + k->frames)
        memcpy(k->keep + (((frame - k->frame0) * L->C + ch) * rows + (y - k->row0)) * (int64_t)L->W, src, rowb);
    }
}

/* Per-rank figures gathered to rank 0. */
enum { F_WALL, F_COMPUTE, F_COMM, F_TILE_W, F_TILE_H, F_TASKS, F_XCHG, NF };

/* Compares every frame with the reference on rank 0; all ranks take part in the gathers.
 * Returns frames that differ (on every rank), or -1 when the reference failed. */
static int64_t check_frames(const ts_pipe_app *app, const layout *L, int rank, int P, int64_t frames, const float *keep,
                            int row0, int row1) {
  int64_t n = (int64_t)L->W * L->H * L->C;
  int mine = (row1 - row0) * L->W * L->C;
  int *cnt = NULL, *dsp = NULL;
  float *got = NULL, *full = NULL, *ref = NULL, *prev = NULL;
  int64_t bad = 0;
  int ok = 1;
  if (rank == 0) {
    cnt = malloc((size_t)P * sizeof *cnt);
    dsp = malloc((size_t)P * sizeof *dsp);
    got = malloc((size_t)n * sizeof *got);
    full = malloc((size_t)n * sizeof *full);
    ref = malloc((size_t)n * sizeof *ref);
    prev = malloc((size_t)n * sizeof *prev);
    ok = cnt && dsp && got && full && ref && prev;
    for (int q = 0; ok && q < P; q++) {
      int a, b;
      share(L->H, P, q, &a, &b);
      cnt[q] = (b - a) * L->W * L->C;
      dsp[q] = a * L->W * L->C; /* the packed shares, one after another */
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) bad = -1;
  for (int64_t f = 0; ok && f < frames; f++) {
    MPI_Gatherv(keep + f * mine, mine, MPI_FLOAT, got, cnt, dsp, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      for (int q = 0; q < P; q++) { /* [q][C][rows_q][W] -> [C][H][W] */
        int a, b;
        share(L->H, P, q, &a, &b);
        for (int ch = 0; ch < L->C; ch++)
          memcpy(full + ((int64_t)ch * L->H + a) * L->W, got + dsp[q] + (int64_t)ch * (b - a) * L->W,
                 (size_t)(b - a) * L->W * sizeof(float));
      }
      if (ts_pipe_app_reference(app, f, L->feedback && f > 0 ? prev : NULL, ref) != TS_OK) {
        fprintf(stderr, PROG ": reference of frame %lld: %s\n", (long long)f, ts_last_error());
        bad = -1;
        ok = 0;
      } else if (memcmp(ref, full, (size_t)n * sizeof(float)) != 0) {
        int64_t i = 0;
        while (i < n && memcmp(&ref[i], &full[i], sizeof(float)) == 0) i++;
        int64_t ch = i / ((int64_t)L->W * L->H), y = i / L->W % L->H, x = i % L->W;
        if (bad == 0)
          fprintf(stderr,
                  PROG ": frame %lld differs from the reference first at channel %lld, row %lld, column %lld "
                       "(%.9g, reference %.9g)\n",
                  (long long)f, (long long)ch, (long long)y, (long long)x, (double)full[i], (double)ref[i]);
        bad++;
      }
      float *t = prev; /* the gathered frame feeds the next reference frame */
      prev = full;
      full = t;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD); /* every rank stops gathering together */
  }
  MPI_Bcast(&bad, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  free(cnt);
  free(dsp);
  free(got);
  free(full);
  free(ref);
  free(prev);
  return bad;
}

/* ---- the report (rank 0) -------------------------------------------------------------------- */

typedef struct run_info {
  const args *a;
  const ts_pipe_desc *d;
  const layout *L;
  int P, threads;
  double wall_s;         /* the slowest rank, from a common start */
  const double *fig;     /* [P][NF] */
  int64_t bytes_per_frame; /* halo bytes all ranks send per frame */
  int64_t checked, mismatched; /* --check: frames compared, frames that differ (-1: not checked) */
} run_info;

/* Rows stage s computes on rank q, and the balanced split of its rows that rank would "own". */
static void stage_rows(const run_info *I, int q, int s, int *a, int *b, int *oa, int *ob) {
  int ry0[MAXS], ry1[MAXS], r0, r1;
  share(I->L->H, I->P, q, &r0, &r1);
  regions(I->d, I->L, r0, r1, ry0, ry1);
  *a = ry0[s];
  *b = ry1[s];
  share(I->L->h[s], I->P, q, oa, ob);
}

/* Pixels all ranks compute over the pixels one process computes (every row of every stage). */
static double redundant_fraction(const run_info *I) {
  double all = 0, one = 0;
  for (int s = 0; s < I->L->S; s++) {
    one += (double)I->L->w[s] * I->L->h[s];
    for (int q = 0; q < I->P; q++) {
      int a, b, oa, ob;
      stage_rows(I, q, s, &a, &b, &oa, &ob);
      all += (double)I->L->w[s] * (b - a);
    }
  }
  return all / one - 1.0;
}

static void report_text(const run_info *I) {
  const args *a = I->a;
  const layout *L = I->L;
  double px = (double)a->w * a->h * (double)a->frames;
  char gran[32];
  if (a->tile_w) snprintf(gran, sizeof gran, "%dx%d", a->tile_w, a->tile_h);
  else snprintf(gran, sizeof gran, "auto");
  printf("%s %dx%d, %ld frames, %d ranks x %d threads, granularity %s, %s\n", a->app, a->w, a->h, a->frames, I->P,
         I->threads, gran,
         L->feedback ? "feedback: frame by frame, halo rows exchanged" : "streaming: frames independent, no exchange");
  printf("  wall %.4f s, %.1f Mpixel/s; %lld halo bytes sent per frame (all ranks)\n", I->wall_s,
         px / I->wall_s / 1e6, (long long)I->bytes_per_frame);
  if (L->feedback && I->P > 1) {
    double x = 0;
    for (int q = 0; q < I->P; q++)
      if (I->fig[q * NF + F_XCHG] > x) x = I->fig[q * NF + F_XCHG];
    printf("  halo exchange alone (barrier-aligned, median, slowest rank): %.1f us per frame\n", 1e6 * x);
  }
  /* comm_s: the exchanges between frames, waiting for the slower neighbour included */
  printf("  rank  last-stage rows   compute_s    comm_s  comm%%  tile (last frame)  tasks\n");
  for (int q = 0; q < I->P; q++) {
    const double *f = I->fig + q * NF;
    int r0, r1;
    share(L->H, I->P, q, &r0, &r1);
    char rows[32];
    snprintf(rows, sizeof rows, "[%d, %d)", r0, r1);
    printf("  %4d  %-15s %10.4f %9.4f %5.1f%%  %5dx%-5d       %10.0f\n", q, rows, f[F_COMPUTE], f[F_COMM],
           f[F_WALL] > 0 ? 100.0 * f[F_COMM] / f[F_WALL] : 0.0, (int)f[F_TILE_W], (int)f[F_TILE_H], f[F_TASKS]);
  }
  printf("  rows computed per stage (owned: the stage's rows split evenly; the rest is ghost zone):\n");
  for (int s = 0; s < L->S; s++) {
    int tot = 0;
    printf("  %-10s lvl %d  %5d rows:", I->d->stage[s].name ? I->d->stage[s].name : "?", I->d->stage[s].level,
           L->h[s]);
    for (int q = 0; q < I->P; q++) {
      int ra, rb, oa, ob;
      stage_rows(I, q, s, &ra, &rb, &oa, &ob);
      tot += rb - ra;
      printf("  r%d [%d,%d) %d/%d", q, ra, rb, rb - ra, ob - oa);
    }
    printf("  => %+.2f%%\n", 100.0 * ((double)tot / L->h[s] - 1.0));
  }
  printf("  redundant pixels (all stages): %+.2f%%\n", 100.0 * redundant_fraction(I));
  if (L->feedback)
    for (int q = 0; q < I->P; q++) {
      int ry0[MAXS], ry1[MAXS], r0, r1, lo, hi;
      share(L->H, I->P, q, &r0, &r1);
      regions(I->d, L, r0, r1, ry0, ry1);
      feedback_need(I->d, L, ry0, ry1, &lo, &hi);
      printf("  rank %d reads the previous frame's rows [%d, %d): %d above, %d below its share\n", q, lo, hi, r0 - lo,
             hi - r1);
    }
  if (I->mismatched >= 0)
    printf("  check: %lld frames gathered, %lld differ from the reference\n", (long long)I->checked,
           (long long)I->mismatched);
}

static void report_json(const run_info *I) {
  const args *a = I->a;
  const layout *L = I->L;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "app", a->app);
  cJSON_AddNumberToObject(j, "width", a->w);
  cJSON_AddNumberToObject(j, "height", a->h);
  cJSON_AddNumberToObject(j, "frames", (double)a->frames);
  cJSON_AddNumberToObject(j, "ranks", I->P);
  cJSON_AddNumberToObject(j, "threads_per_rank", I->threads);
  if (a->tile_w) {
    char g[32];
    snprintf(g, sizeof g, "%dx%d", a->tile_w, a->tile_h);
    cJSON_AddStringToObject(j, "granularity", g);
  } else {
    cJSON_AddStringToObject(j, "granularity", "auto");
  }
  cJSON_AddBoolToObject(j, "feedback", L->feedback);
  cJSON_AddStringToObject(j, "cpu", ts_cpu()->model);
  cJSON_AddNumberToObject(j, "wall_s", I->wall_s);
  cJSON_AddNumberToObject(j, "mpix_per_s", (double)a->w * a->h * (double)a->frames / I->wall_s / 1e6);
  cJSON_AddNumberToObject(j, "bytes_exchanged_per_frame", (double)I->bytes_per_frame);
  cJSON_AddNumberToObject(j, "redundant_pixel_fraction", redundant_fraction(I));
  cJSON *jr = cJSON_AddArrayToObject(j, "per_rank");
  for (int q = 0; q < I->P; q++) {
    const double *f = I->fig + q * NF;
    int r0, r1, ry0[MAXS], ry1[MAXS], lo = 0, hi = 0;
    share(L->H, I->P, q, &r0, &r1);
    regions(I->d, L, r0, r1, ry0, ry1);
    if (L->feedback) feedback_need(I->d, L, ry0, ry1, &lo, &hi);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rank", q);
    int rows[2] = {r0, r1}, fb[2] = {lo, hi}, tile[2] = {(int)f[F_TILE_W], (int)f[F_TILE_H]};
    cJSON_AddItemToObject(o, "rows", cJSON_CreateIntArray(rows, 2));
    if (L->feedback) cJSON_AddItemToObject(o, "feedback_rows", cJSON_CreateIntArray(fb, 2));
    cJSON_AddNumberToObject(o, "wall_s", f[F_WALL]);
    cJSON_AddNumberToObject(o, "compute_s", f[F_COMPUTE]);
    cJSON_AddNumberToObject(o, "comm_s", f[F_COMM]);
    if (L->feedback && I->P > 1) cJSON_AddNumberToObject(o, "exchange_alone_s", f[F_XCHG]);
    cJSON_AddItemToObject(o, "tile_last_frame", cJSON_CreateIntArray(tile, 2));
    cJSON_AddNumberToObject(o, "tasks", f[F_TASKS]);
    cJSON_AddItemToArray(jr, o);
  }
  cJSON *js = cJSON_AddArrayToObject(j, "stages");
  for (int s = 0; s < L->S; s++) {
    cJSON *o = cJSON_CreateObject(), *rows = cJSON_CreateArray(), *owned = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", I->d->stage[s].name ? I->d->stage[s].name : "");
    cJSON_AddNumberToObject(o, "level", I->d->stage[s].level);
    cJSON_AddNumberToObject(o, "height", L->h[s]);
    int tot = 0;
    for (int q = 0; q < I->P; q++) {
      int ra, rb, oa, ob;
      stage_rows(I, q, s, &ra, &rb, &oa, &ob);
      int r[2] = {ra, rb};
      cJSON_AddItemToArray(rows, cJSON_CreateIntArray(r, 2));
      cJSON_AddItemToArray(owned, cJSON_CreateNumber(ob - oa));
      tot += rb - ra;
    }
    cJSON_AddItemToObject(o, "computed_rows", rows);
    cJSON_AddItemToObject(o, "owned_rows", owned);
    cJSON_AddNumberToObject(o, "redundant_fraction", (double)tot / L->h[s] - 1.0);
    cJSON_AddItemToArray(js, o);
  }
  if (I->mismatched >= 0) {
    cJSON *c = cJSON_AddObjectToObject(j, "check");
    cJSON_AddNumberToObject(c, "frames", (double)I->checked);
    cJSON_AddNumberToObject(c, "mismatched", (double)I->mismatched);
  } else {
    cJSON_AddNullToObject(j, "check");
  }
  char *txt = cJSON_Print(j);
  if (txt) puts(txt);
  cJSON_free(txt);
  cJSON_Delete(j);
}

/* ---- main ----------------------------------------------------------------------------------- */

/* Runs one rank's part; returns its status (the caller agrees on one exit code across ranks). */
static int run_rank(const args *a, const ts_pipe_app *app, const layout *L, int rank, int P, int threads,
                    float *keep, double *fig, int64_t *sent_per_frame) {
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  int row0, row1;
  share(L->H, P, rank, &row0, &row1);
  ts_pipe_opts o = ts_pipe_opts_default();
  o.threads = threads;
  o.row0 = row0;
  o.row1 = row1;
  if (a->tile_w) {
    o.gran = TS_PIPE_GRAN_FIXED;
    o.tile_w = a->tile_w;
    o.tile_h = a->tile_h;
  }
  keeper k = {L, row0, row1, 0, a->frames, NULL, keep};
  int failed = 0;
  exchange X = {0};
  float *pl[2] = {NULL, NULL};
  MPI_Request *req = NULL;
  if (L->feedback) {
    int e = exchange_plan(d, L, rank, P, &X);
    size_t n = (size_t)L->W * L->H * L->C;
    pl[0] = calloc(n, sizeof(float));
    pl[1] = calloc(n, sizeof(float));
    req = malloc((size_t)(2 * P) * sizeof *req);
    if (e == -2) {
      fprintf(stderr, PROG ": rank %d: a halo message over %d x %d rows does not fit MPI's int counts\n", rank, L->W,
              L->H);
      failed = 1;
    } else if (e || !pl[0] || !pl[1] || !req) {
      fprintf(stderr, PROG ": rank %d: out of memory for the feedback planes (%dx%dx%d)\n", rank, L->W, L->H, L->C);
      failed = 1;
    }
    *sent_per_frame = X.sent_bytes;
  }
  /* a failed allocation anywhere: every rank stops before the first exchange */
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) goto out;

  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  if (!L->feedback) {
    /* every frame in one run: the frames stream through the rank's workers; nothing to exchange */
    o.frames = a->frames;
    o.sink = keep ? sink : NULL;
    o.sink_user = &k;
    ts_pipe_report *rep = NULL;
    double t = MPI_Wtime();
    ts_status st = ts_pipe_run(d, &o, &rep);
    fig[F_COMPUTE] = MPI_Wtime() - t;
    if (st != TS_OK) {
      fprintf(stderr, PROG ": rank %d: %s: %s\n", rank, ts_strerror(st), ts_last_error());
      failed = 1;
    } else {
      fig[F_TILE_W] = rep->frame_tile_w[a->frames - 1];
      fig[F_TILE_H] = rep->frame_tile_h[a->frames - 1];
      fig[F_TASKS] = (double)rep->tasks;
    }
    ts_pipe_report_free(rep);
  } else {
    /* frame by frame: run (frame f reads pl[fb], the sink writes the share into pl[1 - fb]), then
       complete pl[1 - fb] with the neighbours' rows; a rank whose run failed keeps exchanging so
       no peer waits forever */
    ts_pipe_buf fbuf = {NULL, L->W, L->H, L->C, L->W, (int64_t)L->W * L->H};
    int cur = 0;
    o.frames = 1;
    o.inflight = 1;
    o.sink = sink;
    o.sink_user = &k;
    for (int64_t f = 0; f < a->frames; f++) {
      o.frame0 = f;
      fbuf.data = pl[cur];
      o.feedback0 = f > 0 ? &fbuf : NULL; /* NULL: the kernels make the initial state */
      k.frame0 = f;
      k.frames = 1;
      k.plane = pl[1 - cur];
      k.keep = keep ? keep + f * (int64_t)L->C * (row1 - row0) * L->W : NULL;
      if (!failed) {
        ts_pipe_report *rep = NULL;
        double t = MPI_Wtime();
        ts_status st = ts_pipe_run(d, &o, &rep);
        fig[F_COMPUTE] += MPI_Wtime() - t;
        if (st != TS_OK) {
          fprintf(stderr, PROG ": rank %d, frame %lld: %s: %s\n", rank, (long long)f, ts_strerror(st), ts_last_error());
          failed = 1;
        } else {
          fig[F_TILE_W] = rep->frame_tile_w[0];
          fig[F_TILE_H] = rep->frame_tile_h[0];
          fig[F_TASKS] += (double)rep->tasks;
        }
        ts_pipe_report_free(rep);
      }
      if (f + 1 < a->frames) {
        double t = MPI_Wtime();
        exchange_run(&X, L, pl[1 - cur], req);
        fig[F_COMM] += MPI_Wtime() - t;
      }
      cur = 1 - cur;
    }
  }
  fig[F_WALL] = MPI_Wtime() - t0;
  if (L->feedback && P > 1) {
    /* the exchange alone: comm_s above also holds the wait for the slower neighbour (imbalance,
       noise); the median of barrier-aligned exchanges is the transfer itself */
    enum { NX = 21 };
    double xs[NX];
    for (int i = 0; i < NX; i++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = MPI_Wtime();
      exchange_run(&X, L, pl[0], req);
      xs[i] = MPI_Wtime() - t;
    }
    for (int i = 1; i < NX; i++) /* insertion sort: 21 samples */
      for (int j = i; j > 0 && xs[j] < xs[j - 1]; j--) {
        double t = xs[j];
        xs[j] = xs[j - 1];
        xs[j - 1] = t;
      }
    fig[F_XCHG] = xs[NX / 2];
  }
out:
  exchange_free(&X);
  free(pl[0]);
  free(pl[1]);
  free(req);
  return failed ? EXIT_FAIL : EXIT_OK;
}

static int pipe_mpi(int argc, char **argv, int rank, int P) {
  args a;
  int rc = parse_args(argc, argv, &a);
  if (rc != EXIT_OK) return rc;
  if (a.help) {
    if (rank == 0) usage();
    return EXIT_OK;
  }
  ts_pipe_app *app = NULL;
  ts_status st = ts_pipe_app_create(a.app, a.w, a.h, &app);
  if (st != TS_OK) {
    if (rank == 0) fprintf(stderr, PROG ": %s: %s\n", ts_strerror(st), ts_last_error());
    return st == TS_ERR_OOM ? EXIT_FAIL : EXIT_USAGE;
  }
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  layout L;
  layout_of(d, &L);
  if (P > L.H) { /* the message names the stage: said before the app (and its names) is freed */
    int r = usage_error("%d ranks but %s's last stage (%s) has %d rows at %dx%d: at most one rank per row", P, a.app,
                        d->stage[L.last].name ? d->stage[L.last].name : "?", L.H, a.w, a.h);
    ts_pipe_app_destroy(app);
    return r;
  }
  if (a.check && (int64_t)L.W * L.H * L.C > INT_MAX) {
    int r = usage_error("--check gathers whole frames with int counts: %s's last stage is %dx%dx%d floats (at most "
                        "%d)", a.app, L.W, L.H, L.C, INT_MAX);
    ts_pipe_app_destroy(app);
    return r;
  }
  int threads = a.threads;
  if (!threads) threads = ts_default_threads() / P > 1 ? ts_default_threads() / P : 1;
  int row0, row1;
  share(L.H, P, rank, &row0, &row1);
  float *keep = NULL;
  int failed = 0;
  if (a.check) { /* [frames][C][rows][W] */
    size_t n = (size_t)a.frames * L.C * (size_t)(row1 - row0) * L.W;
    if (!(keep = malloc(n * sizeof(float)))) {
      fprintf(stderr, PROG ": rank %d: out of memory keeping %ld frames for --check\n", rank, a.frames);
      failed = 1;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) {
    free(keep);
    ts_pipe_app_destroy(app);
    return EXIT_FAIL;
  }
  double fig[NF] = {0};
  int64_t sent = 0;
  failed = run_rank(&a, app, &L, rank, P, threads, keep, fig, &sent) != EXIT_OK;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  double *all = rank == 0 ? calloc((size_t)P * NF, sizeof(double)) : NULL;
  MPI_Gather(fig, NF, MPI_DOUBLE, all, NF, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int64_t sent_all = 0;
  MPI_Reduce(&sent, &sent_all, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  run_info I = {&a, d, &L, P, threads, 0, all, sent_all, 0, -1};
  if (!failed && a.check) {
    I.mismatched = check_frames(app, &L, rank, P, a.frames, keep, row0, row1);
    I.checked = a.frames;
    if (I.mismatched != 0) failed = 1;
  }
  if (rank == 0 && all) {
    for (int q = 0; q < P; q++)
      if (all[q * NF + F_WALL] > I.wall_s) I.wall_s = all[q * NF + F_WALL];
    if (!failed || I.mismatched > 0) {
      if (a.json) report_json(&I);
      else report_text(&I);
    }
  }
  free(all);
  free(keep);
  ts_pipe_app_destroy(app);
  return failed ? EXIT_FAIL : EXIT_OK;
}

int main(int argc, char **argv) {
  int provided, rank, P;
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  /* feedback apps call ts_pipe_run once per frame, and each call allocates its planes afresh (a few
     MiB each at 1024x1024): kept in the heap instead of mmap'd and unmapped, the next frame reuses
     pages already faulted in (at 1024x1024 heat, fresh pages cost more than the sweeps) */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  /* the runtime's workers never call MPI: only the main thread does */
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  g_rank = rank;
  int rc = pipe_mpi(argc, argv, rank, P);
  fflush(stdout);
  MPI_Finalize();
  return rc;
}
