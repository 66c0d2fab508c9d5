/* Baselines measured side by side with the planned executor (see tessera/gconv.h): dense with
 * zeroed weights, the CondenseNet deploy path (gather + equal-size grouped convolution), oneDNN's
 * grouped and dense convolution primitives, and CSR SpMM over channels (an executor whose
 * partitions are single rows over exactly their own inputs). */
#include <string.h>

#include "gconv/gconv_base.h"
#include "tessera/kernels.h"

static const char *const names[TS_GCONV_BASE_COUNT] = {"dense", "deploy", "onednn_grouped", "onednn_dense", "spmm"};

const char *ts_gconv_base_name(ts_gconv_base_kind k) { return k >= 0 && k < TS_GCONV_BASE_COUNT ? names[k] : "?"; }

struct ts_gconv_base {
  ts_gconv_base_kind kind;
  ts_gconv_layer l;
  ts__gconv_geom g;   /* im2col geometry of the (gathered) input */
  ts_context *ctx;
  int threads, groups;
  int32_t umax;
  int32_t *gidx;      /* [groups][umax] gathered channels */
  float *w;           /* dense: [cout][cin*taps]; deploy: [cout][umax*taps] */
  float *col;         /* im2col of one (gathered) image */
  float *xg;          /* gathered input [n][groups*umax][h*w] */
  ts__gconv_dnnl *dn;
  ts_gconv_exec *ex;
  ts_gconv_part *parts;
  int32_t *rows;
};

ts_status ts_gconv_group_unions(const ts_csr *conn, int groups, int32_t *umax, int64_t *total) {
  if (groups < 1 || conn->rows % groups)
    return ts_error(TS_ERR_INVALID_ARG, "gconv: groups=%d does not divide cout=%lld", groups, (long long)conn->rows);
  uint8_t *mark = ts_calloc((size_t)conn->cols, 1);
  if (!mark) return TS_ERR_OOM;
  const int64_t per = conn->rows / groups;
  int32_t mx = 0;
  int64_t tot = 0;
  for (int g = 0; g < groups; g++) {
    int32_t n = 0;
    for (int64_t o = g * per; o < (g + 1) * per; o++)
      for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++) n += !mark[conn->col[q]], mark[conn->col[q]] = 1;
    memset(mark, 0, (size_t)conn->cols);
    mx = n > mx ? n : mx;
    tot += n;
  }
  ts_free(mark);
  if (umax) *umax = mx;
  if (total) *total = tot;
  return TS_OK;
}

void ts_gconv_base_destroy(ts_gconv_base *b) {
  if (!b) return;
  ts_free(b->gidx), ts_free(b->w), ts_free(b->col), ts_free(b->xg);
  ts__gconv_dnnl_destroy(b->dn);
  ts_gconv_exec_destroy(b->ex);
  ts_free(b->parts), ts_free(b->rows);
  ts_free(b);
}

/* Masked weights of output o over the channel list ch[0..nch) (channels at positions >= valid
 * are padding: zero), into dst [nch*taps]; mark: [cin] zeroed scratch, left zeroed. */
static void masked_row(const ts_gconv_layer *l, const ts_csr *conn, const float *w, int o, const int32_t *ch,
                       int64_t nch, int64_t valid, uint8_t *mark, float *dst) {
  const int taps = l->ksize * l->ksize;
  for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++) mark[conn->col[q]] = 1;
  for (int64_t u = 0; u < nch; u++) {
    const int32_t c = ch ? ch[u] : (int32_t)u;
    for (int t = 0; t < taps; t++) dst[u * taps + t] = u < valid && mark[c] ? w[((int64_t)o * l->cin + c) * taps + t] : 0.0f;
  }
  for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++) mark[conn->col[q]] = 0;
}

/* gidx and deploy weights: group g's union (ascending), padded with its first channel. */
static ts_status gather_setup(ts_gconv_base *b, const ts_csr *conn, const float *w, uint8_t *mark) {
  const ts_gconv_layer *l = &b->l;
  const int G = b->groups, per = l->cout / G, taps = l->ksize * l->ksize;
  TS_TRY(ts_gconv_group_unions(conn, G, &b->umax, NULL));
  if (b->umax < 1) b->umax = 1;
  b->gidx = ts_malloc((size_t)G * b->umax * sizeof(int32_t));
  b->w = ts_malloc((size_t)l->cout * b->umax * taps * sizeof(float));
  if (!b->gidx || !b->w) return TS_ERR_OOM;
  for (int g = 0; g < G; g++) {
    int32_t *gi = b->gidx + (int64_t)g * b->umax, n = 0;
    for (int o = g * per; o < (g + 1) * per; o++)
      for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++) mark[conn->col[q]] = 1;
    for (int c = 0; c < l->cin; c++)
      if (mark[c]) gi[n++] = c, mark[c] = 0;
    for (int32_t u = n; u < b->umax; u++) gi[u] = n ? gi[0] : 0;
    for (int o = g * per; o < (g + 1) * per; o++)
      masked_row(l, conn, w, o, gi, b->umax, n, mark, b->w + (int64_t)o * b->umax * taps);
  }
  return TS_OK;
}

/* Single-row partitions over exactly each row's inputs: the SpMM executor. */
static ts_status spmm_setup(ts_gconv_base *b, const ts_csr *conn, const float *w) {
  const int cout = b->l.cout;
  b->parts = ts_calloc((size_t)cout, sizeof(ts_gconv_part));
  b->rows = ts_malloc((size_t)cout * sizeof(int32_t));
  if (!b->parts || !b->rows) return TS_ERR_OOM;
  for (int o = 0; o < cout; o++) {
    b->rows[o] = o;
    b->parts[o].nrows = 1;
    b->parts[o].rows = b->rows + o;
    b->parts[o].nunion = (int32_t)(conn->rowptr[o + 1] - conn->rowptr[o]);
    b->parts[o].in = conn->col + conn->rowptr[o];
  }
  return ts_gconv_exec_create(&b->ex, b->ctx, &b->l, conn, b->parts, cout, w);
}

ts_status ts_gconv_base_create(ts_gconv_base **out, ts_context *ctx, ts_gconv_base_kind kind, const ts_gconv_layer *l,
                               const ts_csr *conn, const float *weights, int groups) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "gconv baseline: NULL output");
  *out = NULL;
  TS_TRY(ts_gconv_conn_check(l, conn));
  if (!weights) return ts_error(TS_ERR_INVALID_ARG, "gconv baseline: weights are NULL");
  if (kind < 0 || kind >= TS_GCONV_BASE_COUNT) return ts_error(TS_ERR_INVALID_ARG, "gconv baseline: kind %d", (int)kind);
  const bool grouped = kind == TS_GCONV_BASE_DEPLOY || kind == TS_GCONV_BASE_ONEDNN_GROUPED;
  if (!grouped) groups = 1;
  if (groups < 1 || l->cout % groups)
    return ts_error(TS_ERR_INVALID_ARG, "gconv baseline %s: groups=%d does not divide cout=%d", names[kind], groups, l->cout);
  ts_gconv_base *b = ts_calloc(1, sizeof *b);
  uint8_t *mark = ts_calloc((size_t)l->cin, 1);
  if (!b || !mark) return ts_free(b), ts_free(mark), ts_error(TS_ERR_OOM, "gconv baseline: out of memory");
  b->kind = kind, b->l = *l, b->ctx = ctx, b->threads = ts_context_threads(ctx), b->groups = groups;
  const int taps = l->ksize * l->ksize;
  ts_status s = TS_OK;
  ts_gconv_layer gl = *l; /* the layer the GEMMs see: the gathered channels for grouped kinds */
  if (grouped) {
    s = gather_setup(b, conn, weights, mark);
    gl.cin = groups * b->umax;
    if (s == TS_OK && !(b->xg = ts_malloc((size_t)l->n * gl.cin * l->h * l->w * sizeof(float)))) s = TS_ERR_OOM;
  } else if (kind == TS_GCONV_BASE_DENSE || kind == TS_GCONV_BASE_ONEDNN_DENSE) {
    if (!(b->w = ts_malloc((size_t)l->cout * l->cin * taps * sizeof(float)))) s = TS_ERR_OOM;
    for (int o = 0; s == TS_OK && o < l->cout; o++)
      masked_row(l, conn, weights, o, NULL, l->cin, l->cin, mark, b->w + (int64_t)o * l->cin * taps);
  }
  if (s == TS_OK && (kind == TS_GCONV_BASE_DENSE || kind == TS_GCONV_BASE_DEPLOY)) {
    ts__gconv_geom_im2col(&gl, &b->g);
    if (!(l->ksize == 1 && l->stride == 1) && !(b->col = ts_malloc((size_t)b->g.bfloats * sizeof(float)))) s = TS_ERR_OOM;
  }
  if (s == TS_OK && (kind == TS_GCONV_BASE_ONEDNN_GROUPED || kind == TS_GCONV_BASE_ONEDNN_DENSE))
    s = ts__gconv_dnnl_create(&b->dn, b->threads, l, gl.cin, groups, b->w);
  if (s == TS_OK && kind == TS_GCONV_BASE_SPMM) s = spmm_setup(b, conn, weights);
  ts_free(mark);
  if (s != TS_OK) {
    ts_gconv_base_destroy(b);
    return s == TS_ERR_OOM ? ts_error(TS_ERR_OOM, "gconv baseline %s: out of memory", names[kind]) : s;
  }
  *out = b;
  return TS_OK;
}

/* xg[b] = the gathered channels of every image. */
static void gather(const ts_gconv_base *b, const float *in) {
  const ts_gconv_layer *l = &b->l;
  const int64_t hw = (int64_t)l->h * l->w, rows = (int64_t)b->groups * b->umax;
#pragma omp parallel for collapse(2) schedule(static) num_threads(b->threads)
  for (int i = 0; i < l->n; i++)
    for (int64_t r = 0; r < rows; r++)
      memcpy(b->xg + (i * rows + r) * hw, in + ((int64_t)i * l->cin + b->gidx[r]) * hw, (size_t)hw * sizeof(float));
}

/* Grouped (G = 1: dense) GEMM convolution of image x (cin_eff channels) into y. */
static ts_status gemm_conv(const ts_gconv_base *b, const float *x, float *y) {
  const ts_gconv_layer *l = &b->l;
  const int G = b->groups, per = l->cout / G, taps = l->ksize * l->ksize;
  const int64_t ohw = b->g.ncols, cg = b->kind == TS_GCONV_BASE_DEPLOY ? b->umax : l->cin, K = cg * taps;
  const float *B = x;
  int64_t ldb = (int64_t)l->h * l->w;
  if (b->col) {
    const ts_gconv_layer gl = {1, (int)(cg * G), l->cout, l->h, l->w, l->ksize, l->stride};
#pragma omp parallel for schedule(dynamic, 1) num_threads(b->threads)
    for (int c0 = 0; c0 < gl.cin; c0 += 4) ts__gconv_fill_b(&b->g, &gl, x, b->col, c0, c0 + 4 < gl.cin ? c0 + 4 : gl.cin);
    B = b->col, ldb = ohw;
  }
  for (int g = 0; g < G; g++)
    TS_TRY(ts_sgemm(b->ctx, TS_NO_TRANS, TS_NO_TRANS, per, ohw, K, 1.0f, b->w + (int64_t)g * per * K, K,
                    B + (int64_t)g * K * ldb, ldb, 0.0f, y + (int64_t)g * per * ohw, ohw));
  return TS_OK;
}

ts_status ts_gconv_base_run(ts_gconv_base *b, const float *in, float *out) {
  if (!b || !in || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv baseline run: NULL argument");
  const ts_gconv_layer *l = &b->l;
  int ho, wo;
  ts_gconv_layer_out(l, &ho, &wo);
  const int64_t in_img = (int64_t)l->cin * l->h * l->w, out_img = (int64_t)l->cout * ho * wo;
  const int64_t g_img = (int64_t)b->groups * b->umax * l->h * l->w;
  switch (b->kind) {
    case TS_GCONV_BASE_DENSE:
      for (int i = 0; i < l->n; i++) TS_TRY(gemm_conv(b, in + i * in_img, out + i * out_img));
      return TS_OK;
    case TS_GCONV_BASE_DEPLOY:
      gather(b, in);
      for (int i = 0; i < l->n; i++) TS_TRY(gemm_conv(b, b->xg + i * g_img, out + i * out_img));
      return TS_OK;
    case TS_GCONV_BASE_ONEDNN_GROUPED: gather(b, in); return ts__gconv_dnnl_run(b->dn, b->xg, out);
    case TS_GCONV_BASE_ONEDNN_DENSE: return ts__gconv_dnnl_run(b->dn, in, out);
    case TS_GCONV_BASE_SPMM: return ts_gconv_execute(b->ex, in, out);
    default: return ts_error(TS_ERR_INTERNAL, "gconv baseline: kind %d", (int)b->kind);
  }
}
