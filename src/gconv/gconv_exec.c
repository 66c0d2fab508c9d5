/* Executor: binds partitions to a layer and its weights. At create time every partition gets its
 * B-row offsets (union channel x tap, in the layer's geometry) and its weights packed in the
 * kernel layout, zero where a connection is absent; the work is cut into (image, partition,
 * column chunk) items sorted longest first; the B workspace (padded / im2col images) and the
 * padded-width output are allocated. Execute: fill B (if the geometry needs it), run the items
 * with OpenMP dynamic scheduling, compact (padded geometry). Nothing is allocated there. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gconv/gconv_internal.h"

typedef struct xpart {
  int32_t rows;
  int64_t K;
  const int32_t *row;  /* output channels */
  int32_t *off;        /* [K] */
  float *wp;           /* [rows * K] packed */
} xpart;

typedef struct xitem {
  int32_t img, part;
  int64_t j0, j1;
  double work;
} xitem;

struct ts_gconv_exec {
  ts_gconv_layer l;
  ts__gconv_geom g;
  int threads;
  int32_t nparts, maxrows;
  xpart *parts;
  int32_t *rows_buf;
  int64_t nitems;
  xitem *items;
  float *b;       /* [n][bfloats] or NULL (direct) */
  float *yw;      /* [n][out_floats] or NULL (not padded) */
  float **crow;   /* [threads][maxrows] per-thread output row pointers */
  size_t bytes;
};

static int item_cmp(const void *a, const void *b) {
  double x = ((const xitem *)a)->work, y = ((const xitem *)b)->work;
  return x < y ? 1 : x > y ? -1 : 0;
}

void ts_gconv_exec_destroy(ts_gconv_exec *e) {
  if (!e) return;
  for (int32_t p = 0; e->parts && p < e->nparts; p++) ts_free(e->parts[p].off), ts_free(e->parts[p].wp);
  ts_free(e->parts);
  ts_free(e->rows_buf);
  ts_free(e->items);
  ts_free(e->b);
  ts_free(e->yw);
  ts_free(e->crow);
  ts_free(e);
}

size_t ts_gconv_exec_bytes(const ts_gconv_exec *e) { return e ? e->bytes : 0; }

static void *xalloc(ts_gconv_exec *e, size_t count, size_t size) {
  size_t bytes;
  if (!ts_mul_size(count ? count : 1, size, &bytes)) return NULL;
  e->bytes += bytes;
  return ts_malloc(bytes);
}

/* Offsets and packed weights of partition p; mark: [cin] scratch (zeroed, left zeroed), dense:
 * [rows][K] scratch. */
static ts_status bind_part(ts_gconv_exec *e, const ts_csr *conn, const ts_gconv_part *src, const float *weights,
                           xpart *xp, uint8_t *mark, float *dense) {
  const ts_gconv_layer *l = &e->l;
  const int taps = e->g.taps;
  xp->rows = src->nrows;
  xp->K = (int64_t)src->nunion * taps;
  xp->off = xalloc(e, (size_t)xp->K, sizeof(int32_t));
  xp->wp = xalloc(e, (size_t)xp->K * (size_t)xp->rows, sizeof(float));
  if (!xp->off || !xp->wp) return TS_ERR_OOM;
  for (int32_t u = 0; u < src->nunion; u++)
    for (int t = 0; t < taps; t++) xp->off[(int64_t)u * taps + t] = ts__gconv_off(&e->g, l, src->in[u], t);
  for (int32_t i = 0; i < src->nrows; i++) {
    const int32_t o = src->rows[i];
    for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++) mark[conn->col[q]] = 1;
    float *d = dense + (int64_t)i * xp->K;
    for (int32_t u = 0; u < src->nunion; u++) {
      const int32_t c = src->in[u];
      const float *w = weights + ((int64_t)o * l->cin + c) * taps;
      for (int t = 0; t < taps; t++) d[(int64_t)u * taps + t] = mark[c] ? w[t] : 0.0f;
    }
    for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++) mark[conn->col[q]] = 0;
  }
  ts_gconv_pack_weights(xp->rows, xp->K, dense, xp->K, xp->wp);
  return TS_OK;
}

/* Column chunks: items of about 512 columns (a multiple of the 64-column tile), fewer when the
 * layer has enough partitions to keep every thread busy. */
static int64_t chunk_cols(const ts_gconv_exec *e) {
  const int64_t nc = e->g.ncols;
  int64_t want = (int64_t)8 * e->threads; /* items wanted overall */
  int64_t per = (want + (int64_t)e->l.n * e->nparts - 1) / ((int64_t)e->l.n * e->nparts);
  int64_t chunks = (nc + 511) / 512;
  if (per > chunks) chunks = per;
  int64_t cw = (nc + chunks - 1) / chunks;
  cw = (cw + TS_GCONV_NR - 1) / TS_GCONV_NR * TS_GCONV_NR;
  return cw < TS_GCONV_NR ? TS_GCONV_NR : cw;
}

ts_status ts_gconv_exec_create(ts_gconv_exec **out, ts_context *ctx, const ts_gconv_layer *l, const ts_csr *conn,
                               const ts_gconv_part *parts, int32_t nparts, const float *weights) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "gconv exec: NULL output");
  *out = NULL;
  TS_TRY(ts_gconv_conn_check(l, conn));
  if (!weights) return ts_error(TS_ERR_INVALID_ARG, "gconv exec: weights are NULL");
  TS_TRY(ts__gconv_parts_check(parts, nparts, conn, "gconv exec"));
  ts_gconv_exec *e = ts_calloc(1, sizeof *e);
  if (!e) return TS_ERR_OOM;
  e->l = *l;
  ts__gconv_geom_make(l, &e->g);
  e->threads = ts_context_threads(ctx);
  e->nparts = nparts;
  ts_status s = TS_OK;
  e->parts = xalloc(e, (size_t)nparts, sizeof(xpart));
  e->rows_buf = xalloc(e, (size_t)l->cout, sizeof(int32_t));
  uint8_t *mark = ts_calloc((size_t)l->cin, 1);
  int64_t maxk = 0;
  for (int32_t p = 0; p < nparts; p++) {
    if (parts[p].nrows > e->maxrows) e->maxrows = parts[p].nrows;
    int64_t cells = (int64_t)parts[p].nrows * parts[p].nunion * e->g.taps;
    if (cells > maxk) maxk = cells;
  }
  float *dense = ts_malloc((size_t)(maxk ? maxk : 1) * sizeof(float));
  if (!e->parts || !e->rows_buf || !mark || !dense) s = TS_ERR_OOM;
  if (e->parts) memset(e->parts, 0, (size_t)nparts * sizeof(xpart)); /* destroy frees them on any failure */
  int32_t *rp = e->rows_buf;
  for (int32_t p = 0; s == TS_OK && p < nparts; p++) {
    memcpy(rp, parts[p].rows, (size_t)parts[p].nrows * sizeof(int32_t));
    e->parts[p].row = rp;
    rp += parts[p].nrows;
    s = bind_part(e, conn, &parts[p], weights, &e->parts[p], mark, dense);
  }
  ts_free(mark);
  ts_free(dense);
  if (s == TS_OK) {
    const int64_t cw = chunk_cols(e), nch = (e->g.ncols + cw - 1) / cw;
    e->nitems = (int64_t)l->n * nparts * nch;
    e->items = xalloc(e, (size_t)e->nitems, sizeof(xitem));
    if (!e->items) s = TS_ERR_OOM;
    int64_t q = 0;
    for (int32_t b = 0; s == TS_OK && b < l->n; b++)
      for (int32_t p = 0; p < nparts; p++)
        for (int64_t c = 0; c < nch; c++) {
          xitem *it = &e->items[q++];
          it->img = b, it->part = p, it->j0 = c * cw;
          it->j1 = it->j0 + cw < e->g.ncols ? it->j0 + cw : e->g.ncols;
          /* (rows + 4 per block of B loads) x K x columns: the kernel's instruction count */
          it->work = (double)(e->parts[p].rows + 4.0 * ts_gconv_row_blocks(e->parts[p].rows, NULL)) *
                     (double)(e->parts[p].K + 8) * (double)(it->j1 - it->j0);
        }
    if (s == TS_OK) qsort(e->items, (size_t)e->nitems, sizeof(xitem), item_cmp);
  }
  if (s == TS_OK && e->g.bfloats) {
    e->b = xalloc(e, (size_t)e->g.bfloats * (size_t)l->n, sizeof(float));
    if (!e->b) s = TS_ERR_OOM;
  }
  if (s == TS_OK && e->g.kind == TS__GEOM_PADDED) {
    e->yw = xalloc(e, (size_t)e->g.out_floats * (size_t)l->n, sizeof(float));
    if (!e->yw) s = TS_ERR_OOM;
  }
  if (s == TS_OK) {
    e->crow = xalloc(e, (size_t)e->threads * (size_t)(e->maxrows ? e->maxrows : 1), sizeof(float *));
    if (!e->crow) s = TS_ERR_OOM;
  }
  if (s != TS_OK) {
    ts_gconv_exec_destroy(e);
    return s == TS_ERR_OOM ? ts_error(TS_ERR_OOM, "gconv exec: out of memory binding %d partitions", nparts) : s;
  }
  *out = e;
  return TS_OK;
}

ts_status ts_gconv_execute(ts_gconv_exec *e, const float *in, float *out) {
  if (!e || !in || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv execute: NULL argument");
  const ts_gconv_layer *l = &e->l;
  const ts__gconv_geom *g = &e->g;
  const ts__gconv_kern_fn kern = ts__gconv_kern();
  const int64_t in_img = (int64_t)l->cin * l->h * l->w, out_img = (int64_t)l->cout * g->ho * g->wo;
  const int64_t cstride = g->kind == TS__GEOM_PADDED ? g->ncols : (int64_t)g->ho * g->wo;
  float *const ybase = g->kind == TS__GEOM_PADDED ? e->yw : out;
  const int64_t yimg = g->kind == TS__GEOM_PADDED ? g->out_floats : out_img;
#pragma omp parallel num_threads(e->threads)
  {
    float **crow = e->crow + (int64_t)omp_get_thread_num() * (e->maxrows ? e->maxrows : 1);
    if (e->b) {
#pragma omp for collapse(2) schedule(dynamic, 1)
      for (int b = 0; b < l->n; b++)
        for (int c0 = 0; c0 < l->cin; c0 += 8)
          ts__gconv_fill_b(g, l, in + b * in_img, e->b + b * g->bfloats, c0, c0 + 8 < l->cin ? c0 + 8 : l->cin);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t q = 0; q < e->nitems; q++) {
      const xitem *it = &e->items[q];
      const xpart *p = &e->parts[it->part];
      float *yb = ybase + it->img * yimg;
      for (int32_t i = 0; i < p->rows; i++) crow[i] = yb + p->row[i] * cstride;
      const float *bb = e->b ? e->b + it->img * g->bfloats : in + it->img * in_img;
      kern(p->rows, p->K, p->wp, bb, p->off, crow, it->j0, it->j1);
    }
    if (g->kind == TS__GEOM_PADDED) {
#pragma omp for collapse(2) schedule(static)
      for (int b = 0; b < l->n; b++)
        for (int o0 = 0; o0 < l->cout; o0 += 16)
          ts__gconv_compact(g, e->yw + b * g->out_floats, out + b * out_img, o0, o0 + 16 < l->cout ? o0 + 16 : l->cout);
    }
  }
  return TS_OK;
}
