/* pipe apps: the six built-in pipelines run by a small sequential executor of this file (not the
 * runtime) over random tilings — tiles from 1x1 to the whole plane, in a shuffled order, stage by
 * stage, planes with padded rows poisoned with NaN — must equal ts_pipe_app_reference bit for bit
 * over three frames (each frame's output fed back for the feedback apps), and write every pixel.
 * The kernel contract itself: a kernel given inputs that are NaN everywhere outside the span
 * ts_pipe_input_span allows must give the same tile and write nothing outside it. Plus the
 * descriptions' checks and the registry's errors. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/pipe.h"
#include "tst.h"

/* one stage plane: buf over mem (rows padded, channels padded), n floats in all */
typedef struct plane {
  float *mem;
  int64_t n;
  ts_pipe_buf buf;
} plane;

typedef struct exec {
  const ts_pipe_app *app;
  const ts_pipe_desc *d;
  plane st[TS_PIPE_MAX_STAGES];
  plane prev; /* the previous frame's last stage (feedback) */
  int have_prev, feedback;
  ts_rng rng;
} exec;

static void fill_nan(float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

static int plane_alloc(plane *p, int w, int h, int c, ts_rng *rng) {
  int pad_row = (int)ts_rng_below(rng, 4), pad_plane = (int)ts_rng_below(rng, 6);
  p->buf.w = w;
  p->buf.h = h;
  p->buf.c = c;
  p->buf.row = w + pad_row;
  p->buf.plane = p->buf.row * h + pad_plane;
  p->n = p->buf.plane * c;
  p->mem = ts_malloc((size_t)p->n * sizeof(float));
  p->buf.data = p->mem;
  if (!p->mem) return 0;
  fill_nan(p->mem, p->n);
  return 1;
}

/* the same layout as src, contents copied */
static int plane_clone(plane *dst, const plane *src) {
  *dst = *src;
  dst->mem = ts_malloc((size_t)src->n * sizeof(float));
  dst->buf.data = dst->mem;
  if (!dst->mem) return 0;
  memcpy(dst->mem, src->mem, (size_t)src->n * sizeof(float));
  return 1;
}

static float *px(const ts_pipe_buf *b, int c, int y, int x) { return b->data + c * b->plane + (int64_t)y * b->row + x; }

static int exec_init(exec *e, const ts_pipe_app *app, uint64_t seed) {
  memset(e, 0, sizeof *e);
  e->app = app;
  e->d = ts_pipe_app_desc(app);
  ts_rng_seed(&e->rng, seed);
  for (int s = 0; s < e->d->nstages; s++) {
    int w, h;
    ts_pipe_stage_size(e->d, s, &w, &h);
    if (!plane_alloc(&e->st[s], w, h, e->d->stage[s].channels, &e->rng)) return 0;
    for (int i = 0; i < e->d->stage[s].nin; i++)
      if (e->d->stage[s].in[i].from == TS_PIPE_FEEDBACK) e->feedback = 1;
  }
  return 1;
}

static void exec_free(exec *e) {
  for (int s = 0; s < e->d->nstages; s++) ts_free(e->st[s].mem);
  ts_free(e->prev.mem);
}

/* the inputs of stage s as the kernel sees them */
static void stage_inputs(const exec *e, int s, const ts_pipe_buf **in) {
  const ts_pipe_stage *st = &e->d->stage[s];
  for (int i = 0; i < st->nin; i++) {
    int from = st->in[i].from;
    in[i] = from == TS_PIPE_FEEDBACK ? (e->have_prev ? &e->prev.buf : NULL) : &e->st[from].buf;
  }
}

/* Cuts [0, n) into pieces: the whole, all 1s, or random lengths (1s, short ones, long ones). */
static int cuts(ts_rng *rng, int n, int mode, int *at) {
  int k = 0;
  at[k++] = 0;
  if (mode == 0) {
    at[k++] = n;
    return k;
  }
  int pos = 0;
  while (pos < n) {
    int step;
    if (mode == 1) step = 1;
    else {
      uint64_t c = ts_rng_below(rng, 4);
      step = c == 0 ? 1 : c == 1 ? 1 + (int)ts_rng_below(rng, 8) : 1 + (int)ts_rng_below(rng, (uint64_t)n);
    }
    pos = pos + step < n ? pos + step : n;
    at[k++] = pos;
  }
  return k;
}

/* Random tiles covering a w x h plane, shuffled. Returns the count; *out is malloc'd. */
static int tiling(ts_rng *rng, int w, int h, ts_pipe_rect **out) {
  /* modes per axis: 0 whole, 1 ones (only on small planes: a 1x1 tiling of everything), 2 random */
  int mx = (int)ts_rng_below(rng, 3), my = (int)ts_rng_below(rng, 3);
  if ((int64_t)w * h > 4096 && mx == 1 && my == 1) my = 2;
  int *ax = malloc(sizeof(int) * (size_t)(w + 2)), *ay = malloc(sizeof(int) * (size_t)(h + 2));
  int nx = cuts(rng, w, mx, ax) - 1, ny = cuts(rng, h, my, ay) - 1;
  ts_pipe_rect *t = malloc(sizeof *t * (size_t)nx * (size_t)ny);
  int n = 0;
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++) t[n++] = (ts_pipe_rect){ax[i], ay[j], ax[i + 1], ay[j + 1]};
  for (int i = n - 1; i > 0; i--) {
    int k = (int)ts_rng_below(rng, (uint64_t)i + 1);
    ts_pipe_rect tmp = t[i];
    t[i] = t[k];
    t[k] = tmp;
  }
  free(ax);
  free(ay);
  *out = t;
  return n;
}

/* pixels of a plane that are NaN (unwritten), and padding that is not NaN (written outside) */
static void plane_scan(const plane *p, int64_t *nan_px, int64_t *pad_written) {
  *nan_px = *pad_written = 0;
  const ts_pipe_buf *b = &p->buf;
  for (int c = 0; c < b->c; c++)
    for (int y = 0; y < b->h; y++)
      for (int x = 0; x < b->w; x++)
        if (isnan(*px(b, c, y, x))) (*nan_px)++;
  for (int64_t i = 0; i < p->n; i++) {
    int64_t c = i / b->plane, r = i % b->plane, y = r / b->row, x = r % b->row;
    int inside = c < b->c && y < b->h && x < b->w;
    if (!inside && !isnan(p->mem[i])) (*pad_written)++;
  }
}

/* Runs frame `frame` stage by stage over random shuffled tilings. */
static void exec_frame(exec *e, int64_t frame) {
  for (int s = 0; s < e->d->nstages; s++) fill_nan(e->st[s].mem, e->st[s].n);
  for (int s = 0; s < e->d->nstages; s++) {
    const ts_pipe_stage *st = &e->d->stage[s];
    const ts_pipe_buf *in[TS_PIPE_MAX_IN];
    stage_inputs(e, s, in);
    ts_pipe_rect *t;
    int n = tiling(&e->rng, e->st[s].buf.w, e->st[s].buf.h, &t);
    for (int i = 0; i < n; i++) st->run(in, &e->st[s].buf, t[i], frame, st->params);
    free(t);
  }
}

/* The last stage against the reference (contiguous ref [c][h][w]): bitwise. */
static int64_t compare_last(const exec *e, const float *ref, int *fx, int *fy, int *fc) {
  const ts_pipe_buf *b = &e->st[e->d->nstages - 1].buf;
  int64_t bad = 0;
  for (int c = 0; c < b->c; c++)
    for (int y = 0; y < b->h; y++)
      for (int x = 0; x < b->w; x++) {
        const float *a = px(b, c, y, x), *r = ref + ((int64_t)c * b->h + y) * b->w + x;
        if (memcmp(a, r, sizeof(float))) {
          if (!bad) *fx = x, *fy = y, *fc = c;
          bad++;
        }
      }
  return bad;
}

/* After the frame's planes are complete: for `ntiles` rects per stage, rerun the kernel on inputs
 * poisoned outside the contract's span; the rect must come out the same and nothing else be written. */
static void contract_check(exec *e, int64_t frame, int ntiles, const char *tag) {
  const ts_pipe_desc *d = e->d;
  for (int s = 0; s < d->nstages; s++) {
    const ts_pipe_stage *st = &d->stage[s];
    const plane *op = &e->st[s];
    int w = op->buf.w, h = op->buf.h;
    const ts_pipe_buf *real_in[TS_PIPE_MAX_IN];
    stage_inputs(e, s, real_in);
    int bad_tiles = 0;
    for (int t = 0; t < ntiles; t++) {
      ts_pipe_rect r;
      if (t == 0) r = (ts_pipe_rect){0, 0, w, h};
      else if (t == 1) r = (ts_pipe_rect){0, 0, 1, 1};
      else if (t == 2) r = (ts_pipe_rect){w - 1, h - 1, w, h};
      else {
        int x0 = (int)ts_rng_below(&e->rng, (uint64_t)w), y0 = (int)ts_rng_below(&e->rng, (uint64_t)h);
        int x1 = x0 + 1 + (int)ts_rng_below(&e->rng, (uint64_t)(w - x0)), y1 = y0 + 1 + (int)ts_rng_below(&e->rng, (uint64_t)(h - y0));
        r = (ts_pipe_rect){x0, y0, x1, y1};
      }
      plane poisoned[TS_PIPE_MAX_IN], outp;
      const ts_pipe_buf *in[TS_PIPE_MAX_IN];
      int ok = 1;
      for (int i = 0; i < st->nin; i++) {
        in[i] = NULL;
        poisoned[i].mem = NULL;
        if (!real_in[i]) continue;
        const plane *src = st->in[i].from == TS_PIPE_FEEDBACK ? &e->prev : &e->st[st->in[i].from];
        int lvl_in = st->in[i].from == TS_PIPE_FEEDBACK ? d->stage[d->nstages - 1].level : d->stage[st->in[i].from].level;
        if (!plane_clone(&poisoned[i], src)) {
          ok = 0;
          continue;
        }
        int xlo, xhi, ylo, yhi;
        ts_pipe_input_span(st->level, lvl_in, st->in[i].halo, src->buf.w, r.x0, r.x1, &xlo, &xhi);
        ts_pipe_input_span(st->level, lvl_in, st->in[i].halo, src->buf.h, r.y0, r.y1, &ylo, &yhi);
        const ts_pipe_buf *pb = &poisoned[i].buf;
        for (int c = 0; c < pb->c; c++)
          for (int y = 0; y < pb->h; y++)
            for (int x = 0; x < pb->w; x++)
              if (y < ylo || y > yhi || x < xlo || x > xhi) *px(pb, c, y, x) = NAN;
        in[i] = pb;
      }
      outp = *op;
      outp.mem = ts_malloc((size_t)op->n * sizeof(float));
      outp.buf.data = outp.mem;
      if (!outp.mem) ok = 0;
      if (ok) {
        fill_nan(outp.mem, outp.n);
        st->run(in, &outp.buf, r, frame, st->params);
        for (int c = 0; c < outp.buf.c && ok; c++)
          for (int y = 0; y < h && ok; y++)
            for (int x = 0; x < w && ok; x++) {
              const float *a = px(&outp.buf, c, y, x), *b = px(&op->buf, c, y, x);
              int inside = x >= r.x0 && x < r.x1 && y >= r.y0 && y < r.y1;
              if (inside ? memcmp(a, b, sizeof(float)) != 0 : !isnan(*a)) {
                fprintf(stderr, "%s stage %s rect [%d,%d)x[%d,%d): pixel (%d,%d,%d) %s: %.9g vs %.9g\n", tag, st->name,
                        r.x0, r.x1, r.y0, r.y1, c, y, x, inside ? "differs under poisoned inputs" : "written outside",
                        (double)*a, (double)*b);
                ok = 0;
              }
            }
      }
      if (!ok) bad_tiles++;
      ts_free(outp.mem);
      for (int i = 0; i < st->nin; i++) ts_free(poisoned[i].mem);
    }
    CHECK(bad_tiles == 0, "%s stage %d (%s): %d of %d tiles break the contract", tag, s, st->name, bad_tiles, ntiles);
  }
}

/* min != max over the last stage's pixels */
static int varies(const float *p, int64_t n) {
  for (int64_t i = 1; i < n; i++)
    if (p[i] != p[0]) return 1;
  return 0;
}

/* One app at one size: 3 frames through the executor against the reference chain. */
static void run_app(const char *name, int w, int h, int64_t frame0, uint64_t seed, int contract) {
  ts_pipe_app *app = NULL;
  CHECK_OK(ts_pipe_app_create(name, w, h, &app));
  if (!app) return;
  const ts_pipe_desc *d = ts_pipe_app_desc(app);
  CHECK_OK(ts_pipe_desc_check(d));
  exec e;
  if (!exec_init(&e, app, seed)) {
    CHECK(0, "%s %dx%d: out of memory", name, w, h);
    exec_free(&e);
    ts_pipe_app_destroy(app);
    return;
  }
  const ts_pipe_buf *lb = &e.st[d->nstages - 1].buf;
  int64_t nl = (int64_t)lb->w * lb->h * lb->c;
  float *ref = ts_malloc((size_t)nl * sizeof(float)), *ref_prev = ts_malloc((size_t)nl * sizeof(float));
  float *first = ts_malloc((size_t)nl * sizeof(float));
  CHECK(ref && ref_prev && first, "%s %dx%d: out of memory", name, w, h);
  int differs = 0;
  for (int k = 0; k < 3 && ref && ref_prev && first; k++) {
    int64_t f = frame0 + k;
    char tag[96];
    snprintf(tag, sizeof tag, "%s %dx%d frame %lld", name, w, h, (long long)f);
    CHECK_OK(ts_pipe_app_reference(app, f, e.feedback && k > 0 ? ref_prev : NULL, ref));
    for (int pass = 0; pass < 2; pass++) { /* two independent tilings of the same frame */
      exec_frame(&e, f);
      int fx = 0, fy = 0, fc = 0;
      int64_t bad = compare_last(&e, ref, &fx, &fy, &fc);
      CHECK(bad == 0, "%s pass %d: %lld pixels differ from the reference, first (c %d, y %d, x %d): %.9g vs %.9g",
            tag, pass, (long long)bad, fc, fy, fx, bad ? (double)*px(lb, fc, fy, fx) : 0.0,
            bad ? (double)ref[((int64_t)fc * lb->h + fy) * lb->w + fx] : 0.0);
      for (int s = 0; s < d->nstages; s++) {
        int64_t nan_px, pad;
        plane_scan(&e.st[s], &nan_px, &pad);
        CHECK(nan_px == 0, "%s stage %s: %lld pixels never written", tag, d->stage[s].name, (long long)nan_px);
        CHECK(pad == 0, "%s stage %s: %lld padding elements written", tag, d->stage[s].name, (long long)pad);
      }
      if (contract && k < 2 && pass == 0) contract_check(&e, f, 12, tag);
    }
    if (k == 0) memcpy(first, ref, (size_t)nl * sizeof(float));
    else if (memcmp(first, ref, (size_t)nl * sizeof(float))) differs = 1;
    if (k == 2 && (int64_t)w * h >= 1000) { /* the content is not degenerate */
      CHECK(varies(ref, nl), "%s: the output is constant (%g)", tag, (double)ref[0]);
      CHECK(differs, "%s: frames %lld..%lld give the same output", tag, (long long)frame0, (long long)f);
    }
    /* feed back: the executor its own last plane, the reference its own output */
    if (e.feedback) {
      ts_free(e.prev.mem);
      e.prev.mem = NULL;
      CHECK(plane_clone(&e.prev, &e.st[d->nstages - 1]), "out of memory");
      e.have_prev = 1;
      memcpy(ref_prev, ref, (size_t)nl * sizeof(float));
    }
  }
  ts_free(ref);
  ts_free(ref_prev);
  ts_free(first);
  exec_free(&e);
  ts_pipe_app_destroy(app);
}

static void test_registry(void) {
  const char *const *names = ts_pipe_app_names();
  int n = 0;
  while (names[n]) n++;
  CHECK(n == 6, "%d apps", n);
  static const char *const want[] = {"edge", "heat", "isp", "flow", "life", "cnn"};
  for (int i = 0; i < 6 && i < n; i++) CHECK(!strcmp(names[i], want[i]), "app %d is %s", i, names[i]);

  ts_pipe_app *app = (ts_pipe_app *)&n; /* must come back NULL on error */
  CHECK_STATUS(ts_pipe_app_create("nope", 8, 8, &app), TS_ERR_NOT_FOUND);
  CHECK(app == NULL, "app not cleared on error");
  CHECK(strstr(ts_last_error(), "nope") && strstr(ts_last_error(), "edge") && strstr(ts_last_error(), "cnn"),
        "message names the bad app and the valid ones: %s", ts_last_error());
  CHECK_STATUS(ts_pipe_app_create(NULL, 8, 8, &app), TS_ERR_NOT_FOUND);
  CHECK_STATUS(ts_pipe_app_create("Edge", 8, 8, &app), TS_ERR_NOT_FOUND);
  CHECK_STATUS(ts_pipe_app_create("edge", 0, 8, &app), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_pipe_app_create("edge", 8, 0, &app), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_pipe_app_create("heat", -3, 8, &app), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_pipe_app_create("cnn", (1 << 16) + 1, 8, &app), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_pipe_app_create("flow", 8, (1 << 16) + 1, &app), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_pipe_app_create("life", 8, 8, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_pipe_app_reference(NULL, 0, NULL, (float *)&n), TS_ERR_INVALID_ARG);
  CHECK(ts_pipe_app_desc(NULL) == NULL, "desc of no app");
  ts_pipe_app_destroy(NULL);

  for (int i = 0; i < n; i++) {
    int sizes[3][2] = {{1, 1}, {1 << 16, 1}, {97, 1 << 16}};
    for (int k = 0; k < 3; k++) {
      app = NULL;
      CHECK_OK(ts_pipe_app_create(names[i], sizes[k][0], sizes[k][1], &app));
      if (!app) continue;
      const ts_pipe_desc *d = ts_pipe_app_desc(app);
      CHECK_OK(ts_pipe_desc_check(d));
      CHECK(d->name && !strcmp(d->name, names[i]), "%s: desc named %s", names[i], d->name ? d->name : "(null)");
      CHECK(d->width == sizes[k][0] && d->height == sizes[k][1], "%s: domain %dx%d", names[i], d->width, d->height);
      CHECK(d->nstages >= 4, "%s: %d stages", names[i], d->nstages);
      int dev0 = 0, dev1 = 0, feedback = 0;
      for (int s = 0; s < d->nstages; s++) {
        const ts_pipe_stage *st = &d->stage[s];
        CHECK(st->name && st->name[0], "%s stage %d has no name", names[i], s);
        CHECK(st->flops_per_px > 0, "%s stage %d: flops_per_px %g", names[i], s, st->flops_per_px);
        CHECK(st->device == (2 * s < d->nstages ? 0 : 1), "%s stage %d on device %d", names[i], s, st->device);
        dev0 += st->device == 0;
        dev1 += st->device == 1;
        for (int j = 0; j < st->nin; j++) feedback |= st->in[j].from == TS_PIPE_FEEDBACK;
      }
      CHECK(dev0 > 0 && dev1 > 0, "%s: devices %d/%d", names[i], dev0, dev1);
      int want_fb = !strcmp(names[i], "heat") || !strcmp(names[i], "life");
      CHECK(feedback == want_fb, "%s: feedback %d", names[i], feedback);
      CHECK_STATUS(ts_pipe_app_reference(app, 0, NULL, NULL), TS_ERR_INVALID_ARG);
      ts_pipe_app_destroy(app);
    }
  }
}

int main(void) {
  double t0 = ts_now();
  test_registry();
  static const int sizes[][2] = {{1, 1}, {3, 5}, {1, 7}, {6, 2}, {17, 9}, {64, 48}, {127, 65}, {256, 200}};
  const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
  const char *const *names = ts_pipe_app_names();
  for (int a = 0; names[a]; a++)
    for (int k = 0; k < nsizes; k++) {
      int w = sizes[k][0], h = sizes[k][1];
      int64_t frame0 = 7 * k - 2; /* a negative frame number too */
      /* the contract check on a few shapes: tiny, odd, mid-sized */
      int contract = (w == 3 && h == 5) || (w == 17 && h == 9) || (w == 127 && h == 65);
      run_app(names[a], w, h, frame0, 1000u * (uint64_t)a + (uint64_t)k + 1, contract);
    }
  printf("pipe apps: %.2f s\n", ts_now() - t0);
  return tst_finish();
}
