/* Direct and depthwise convolution: weight packing, the scalar kernels, threading. A plan runs
 * the kernels of its level's table (ts_conv_plan.kern, conv_kern.c): for direct, output channels
 * in the lanes where the table has dconv_rows (conv_direct_oc_avx512.c, conv_direct_oc_avx2.c),
 * else the table's direct_rows (the scalar loop here, which walks the same packed layout); for
 * depthwise the table's dw_rows (conv_direct_tmpl.h per ISA, or the scalar loop here). */
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"

typedef struct direct_state {
  const ts__conv_kern *k; /* the plan's kernel table */
  int kb;        /* output channels per packed block */
  int kblocks_g; /* blocks per group: ceil(kg / kb) */
  float *wp;     /* [groups * kblocks_g][cg][R][S][kb], zero rows past the group's last channel */
  ts__conv_pad_geom g;
  int *soff;     /* [S] tap offsets in a padded row */
  int *toff;     /* channel-lane kernels: [R*S] tap offsets from an output's first input (ts__dconv_args) */
  int flat;      /* channel-lane kernels, R x 1 kernel at stride 1: rows of Q floats, tiles cross output rows */
  int bgroup;    /* channel-lane kernels: blocks run together per output row (1: block-major order) */
} direct_state;

/* direct_rows kernels: output rows per task. (Channel-lane kernels: one output row per task, or
 * the table's dconv_chunk positions of a flat plane.) */
enum { ROWS_PER_TASK = 4 };

static ts_status direct_init(ts_conv_plan *pl) {
  direct_state *st = calloc(1, sizeof *st);
  if (!st) return ts_error(TS_ERR_OOM, "direct: out of memory");
  pl->state = st;
  st->k = pl->kern;
  st->kb = st->k->direct_kb;
  st->kblocks_g = (pl->kg + st->kb - 1) / st->kb;
  const ts_conv_desc *d = &pl->d;
  const size_t wn = (size_t)d->groups * st->kblocks_g * pl->cg * d->r * d->s * st->kb;
  st->wp = ts_malloc(wn * sizeof(float));
  pl->state_bytes = wn * sizeof(float);
  if (!st->wp) return ts_error(TS_ERR_OOM, "direct: out of memory for %zu packed weights", wn);
  st->g = ts__conv_pad_geometry(d);
  st->flat = st->k->dconv_flat && d->s == 1 && d->stride_h == 1 && d->stride_w == 1;
  if (st->flat) { /* the broadcast kernel reads no slack: rows of exactly W + pads = Q floats */
    st->g.wrow = d->w + d->pad_left + d->pad_right;
    st->g.plane = (size_t)st->g.hp * st->g.wrow;
  }
  st->soff = malloc((size_t)d->s * sizeof(int));
  st->toff = malloc((size_t)d->r * d->s * sizeof(int));
  if (!st->soff || !st->toff) return ts_error(TS_ERR_OOM, "direct: out of memory");
  ts__conv_tap_offsets(d, &st->g, st->soff);
  for (int r = 0; r < d->r; r++)
    for (int s = 0; s < d->s; s++)
      st->toff[r * d->s + s] = r * d->dilation_h * st->g.sw * st->g.wrow + st->soff[s];
  pl->workspace = ts__conv_align((size_t)d->n * d->c * st->g.plane * sizeof(float));
  st->bgroup = 1;
  if (st->k->dconv_l2_group) { /* as many blocks as half of L2 holds the packed weights of */
    const size_t wblk = (size_t)pl->cg * d->r * d->s * st->kb * sizeof(float);
    const size_t fit = ts__conv_l2_bytes() / 2 / wblk;
    const int nb = d->groups * st->kblocks_g;
    st->bgroup = fit < 1 ? 1 : fit > (size_t)nb ? nb : (int)fit;
  }
  return TS_OK;
}

/* Task t of the channel-lane path: image n, block b, row or flat chunk i (per of them). With
 * bgroup 1 blocks are outermost after the image; else groups of bgroup blocks, and inside a group
 * the image, the row, then the group's blocks, so that consecutive tasks of a thread read the same
 * input rows (kept in L2 for the next block) while the group's weights stay in L2: with 16-channel
 * blocks a block-major order streamed a 128-channel 56^2 input from L3 once per block, its rows
 * read as 768 short interleaved streams that no hardware prefetcher follows. */
static void dconv_task(const direct_state *st, int N, int nb, int per, int t, int *n, int *b, int *i) {
  const int bg = st->bgroup;
  if (bg == 1) {
    *n = t / (nb * per), *b = (t / per) % nb, *i = t % per;
    return;
  }
  const int gi = t / (bg * N * per), sz = nb - gi * bg < bg ? nb - gi * bg : bg, local = t - gi * bg * N * per;
  *n = local / (per * sz), *i = local / sz % per, *b = gi * bg + local % sz;
}

static ts_status direct_weights(ts_conv_plan *pl) {
  direct_state *st = pl->state;
  const ts_conv_desc *d = &pl->d;
  const int kb = st->kb, rs = d->r * d->s, nb = d->groups * st->kblocks_g;
  for (int b = 0; b < nb; b++) {
    const int grp = b / st->kblocks_g, k0 = (b % st->kblocks_g) * kb;
    float *dst = st->wp + (size_t)b * pl->cg * rs * kb;
    for (int c = 0; c < pl->cg; c++)
      for (int t = 0; t < rs; t++)
        for (int kk = 0; kk < kb; kk++) {
          const int kl = k0 + kk;
          dst[((size_t)c * rs + t) * kb + kk] =
              kl < pl->kg ? pl->weights[((size_t)(grp * pl->kg + kl) * pl->cg + c) * rs + t] : 0.0f;
        }
  }
  return TS_OK;
}

/* Scalar direct: same blocking over channels (KB_SCALAR), one output at a time. */
void ts__conv_direct_rows_scalar(const ts__conv_direct_args *a, int p0, int p1) {
  enum { KB = TS__CONV_KB_SCALAR };
  const ts_conv_desc *d = a->d;
  const ts__conv_pad_geom *g = a->g;
  const size_t rowlen = (size_t)g->sw * g->wrow, pq = (size_t)a->p * a->q;
  for (int p = p0; p < p1; p++)
    for (int q = 0; q < a->q; q++) {
      float acc[KB] = {0};
      const float *wv = a->wp;
      for (int c = 0; c < a->cg; c++)
        for (int r = 0; r < d->r; r++) {
          const float *xr = a->xp + (size_t)c * g->plane + (size_t)(p * d->stride_h + r * d->dilation_h) * rowlen + q;
          for (int s = 0; s < d->s; s++, wv += KB) {
            const float x = xr[a->soff[s]];
            for (int kk = 0; kk < KB; kk++) acc[kk] += x * wv[kk];
          }
        }
      for (int kk = 0; kk < a->kvalid; kk++) {
        const float y = acc[kk] + a->bias[kk];
        a->out[kk * pq + (size_t)p * a->q + q] = d->relu && y < 0.0f ? 0.0f : y;
      }
    }
}

static ts_status direct_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const direct_state *st = pl->state;
  const ts_conv_desc *d = &pl->d;
  float *xp = (float *)ws;
  ts__conv_pad_input(d, &st->g, in, xp, pl->threads);
  const int nb = d->groups * st->kblocks_g, pt = (pl->p + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
  const int tasks = d->n * nb * pt;
  if (st->k->dconv_rows) { /* output channels in the lanes; a task is one output row or a flat chunk */
    const size_t pq = (size_t)pl->p * pl->q;
    const int chunk = st->k->dconv_chunk, per = st->flat ? (int)((pq + chunk - 1) / chunk) : pl->p, all = d->n * nb * per;
#pragma omp parallel for num_threads(pl->threads) schedule(static)
    for (int t = 0; t < all; t++) {
      int n, b, i;
      dconv_task(st, d->n, nb, per, t, &n, &b, &i);
      const int grp = b / st->kblocks_g, k0 = grp * pl->kg + (b % st->kblocks_g) * st->kb, kend = (grp + 1) * pl->kg;
      const ts__dconv_args a = {d, &st->g, pl->p, pl->q, pl->cg, xp + ((size_t)n * d->c + (size_t)grp * pl->cg) * st->g.plane,
                                st->wp + (size_t)b * pl->cg * d->r * d->s * st->kb, pl->bias + k0,
                                out + ((size_t)n * d->k + k0) * pq, kend - k0 < st->kb ? kend - k0 : st->kb, st->toff};
      if (st->flat) st->k->dconv_flat(&a, i * chunk, (int)((size_t)(i + 1) * chunk < pq ? (size_t)(i + 1) * chunk : pq));
      else st->k->dconv_rows(&a, i, i + 1);
    }
    return TS_OK;
  }
  void (*rows)(const ts__conv_direct_args *, int, int) = st->k->direct_rows;
  const size_t pq = (size_t)pl->p * pl->q;
#pragma omp parallel for num_threads(pl->threads) schedule(static)
  for (int t = 0; t < tasks; t++) {
    const int n = t / (nb * pt), b = (t / pt) % nb, pr = t % pt;
    const int grp = b / st->kblocks_g, k0 = grp * pl->kg + (b % st->kblocks_g) * st->kb;
    const int kend = (grp + 1) * pl->kg;
    ts__conv_direct_args a = {d, &st->g, pl->p, pl->q, pl->cg,
                              xp + ((size_t)n * d->c + (size_t)grp * pl->cg) * st->g.plane,
                              st->wp + (size_t)b * pl->cg * d->r * d->s * st->kb, pl->bias + k0,
                              out + ((size_t)n * d->k + k0) * pq, kend - k0 < st->kb ? kend - k0 : st->kb,
                              st->soff};
    const int p0 = pr * ROWS_PER_TASK, p1 = p0 + ROWS_PER_TASK < pl->p ? p0 + ROWS_PER_TASK : pl->p;
    rows(&a, p0, p1);
  }
  return TS_OK;
}

static void direct_destroy(ts_conv_plan *pl) {
  direct_state *st = pl->state;
  if (!st) return;
  ts_free(st->wp);
  free(st->soff);
  free(st->toff);
  free(st);
  pl->state = NULL;
}

const ts__conv_algo_ops ts__conv_ops_direct = {NULL, direct_init, direct_weights, direct_execute, direct_destroy};

/* ---- depthwise: groups == C == K ------------------------------------------------------------ */

static ts_status dw_check(const ts_conv_desc *d) {
  if (d->groups != d->c || d->k != d->c)
    return ts_error(TS_ERR_UNSUPPORTED,
                    "depthwise: needs groups == c == k (channel multiplier 1), got c = %d, k = %d, groups = %d", d->c,
                    d->k, d->groups);
  return TS_OK;
}

static ts_status dw_init(ts_conv_plan *pl) {
  direct_state *st = calloc(1, sizeof *st);
  if (!st) return ts_error(TS_ERR_OOM, "depthwise: out of memory");
  pl->state = st;
  st->k = pl->kern;
  st->g = ts__conv_pad_geometry(&pl->d);
  if (!(st->soff = malloc((size_t)pl->d.s * sizeof(int)))) return ts_error(TS_ERR_OOM, "depthwise: out of memory");
  ts__conv_tap_offsets(&pl->d, &st->g, st->soff);
  pl->workspace = ts__conv_align((size_t)pl->d.n * pl->d.c * st->g.plane * sizeof(float));
  return TS_OK;
}

void ts__conv_dw_rows_scalar(const ts__conv_direct_args *a, int p0, int p1) {
  const ts_conv_desc *d = a->d;
  const ts__conv_pad_geom *g = a->g;
  const size_t rowlen = (size_t)g->sw * g->wrow;
  for (int p = p0; p < p1; p++)
    for (int q = 0; q < a->q; q++) {
      float acc = 0;
      for (int r = 0; r < d->r; r++)
        for (int s = 0; s < d->s; s++)
          acc += a->xp[(size_t)(p * d->stride_h + r * d->dilation_h) * rowlen + a->soff[s] + q] * a->wp[r * d->s + s];
      const float y = acc + a->bias[0];
      a->out[(size_t)p * a->q + q] = d->relu && y < 0.0f ? 0.0f : y;
    }
}

static ts_status dw_execute(const ts_conv_plan *pl, const float *in, float *out, unsigned char *ws) {
  const direct_state *st = pl->state;
  const ts_conv_desc *d = &pl->d;
  float *xp = (float *)ws;
  ts__conv_pad_input(d, &st->g, in, xp, pl->threads);
  enum { DW_ROWS = 8 };
  const int pt = (pl->p + DW_ROWS - 1) / DW_ROWS, tasks = d->n * d->c * pt;
  void (*rows)(const ts__conv_direct_args *, int, int) = st->k->dw_rows;
  const size_t pq = (size_t)pl->p * pl->q;
#pragma omp parallel for num_threads(pl->threads) schedule(static)
  for (int t = 0; t < tasks; t++) {
    const int nc = t / pt, c = nc % d->c, pr = t % pt;
    ts__conv_direct_args a = {d, &st->g, pl->p, pl->q, 1, xp + (size_t)nc * st->g.plane,
                              pl->weights + (size_t)c * d->r * d->s, pl->bias + c, out + (size_t)nc * pq, 1, st->soff};
    const int p0 = pr * DW_ROWS, p1 = p0 + DW_ROWS < pl->p ? p0 + DW_ROWS : pl->p;
    rows(&a, p0, p1);
  }
  return TS_OK;
}

const ts__conv_algo_ops ts__conv_ops_depthwise = {dw_check, dw_init, NULL, dw_execute, direct_destroy};
