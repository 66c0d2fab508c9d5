/* Baselines for the benchmarks (conv.h): oneDNN's convolution primitive through its C API and
 * OpenBLAS im2col + sgemm. They are measured next to tessera's algorithms, never selected.
 *
 * oneDNN: source/weights/destination descriptors with dnnl_format_tag_any, so the primitive picks
 * its preferred layouts (nChw16c activations and blocked weights on AVX-512); our NCHW buffers are
 * bound to "user" memories with dnnl_memory_set_data_handle at every execute and reordered to and
 * from the primitive's layouts inside execute; the weights are reordered once at create. oneDNN
 * runs on OpenMP and takes its thread count from omp_get_max_threads() of the calling thread --
 * and several implementations (brgconv, the Winograd kernels) fix their work split for that count
 * when the primitive is created and then run that many threads whatever the count at execute --
 * so create and execute both set it to the context's count and restore it.
 * OpenBLAS is loaded with dlopen (the library itself never links it): its pthread server spins
 * after each call for 2^OPENBLAS_THREAD_TIMEOUT cycles, which would steal the CPU from the next
 * contender of a round-robin timing, so the timeout is set to its minimum (2^4 cycles) unless the
 * environment already chose one. */
#include <dlfcn.h>
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "kernels/kernels_internal.h"

static const char *const base_names[TS_CONV_BASE_COUNT] = {"onednn_direct", "onednn_winograd", "onednn_auto",
                                                           "openblas"};

const char *ts_conv_baseline_name(ts_conv_baseline_kind k) {
  return (unsigned)k < TS_CONV_BASE_COUNT ? base_names[k] : "unknown";
}

/* cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), row-major 101 */
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);

struct ts_conv_baseline {
  ts_conv_baseline_kind kind;
  ts_conv_desc d;
  int p, q, threads;
  char impl[160];
  /* oneDNN */
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dnnl_primitive_t conv, src_reorder, dst_reorder;
  dnnl_memory_t user_src, user_dst, src, wei, bias, dst;
  /* OpenBLAS */
  cblas_sgemm_fn sgemm;
  void (*set_threads)(int);
  float *w, *b, *col; /* weights [K][CRS], bias [K], im2col buffer [CRS][P*Q] */
};

void ts_conv_baseline_destroy(ts_conv_baseline *b) {
  if (!b) return;
  dnnl_primitive_t prims[] = {b->conv, b->src_reorder, b->dst_reorder};
  for (size_t i = 0; i < 3; i++)
    if (prims[i]) dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t own[] = {b->src != b->user_src ? b->src : NULL, b->dst != b->user_dst ? b->dst : NULL, b->user_src,
                         b->user_dst, b->wei, b->bias};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (own[i]) dnnl_memory_destroy(own[i]);
  if (b->strm) dnnl_stream_destroy(b->strm);
  if (b->eng) dnnl_engine_destroy(b->eng);
  ts_free(b->w), ts_free(b->b), ts_free(b->col);
  free(b);
}

/* ---- oneDNN --------------------------------------------------------------------------------- */

static ts_status dnnl_fail(const char *what, dnnl_status_t s, ts_conv_baseline_kind k) {
  if (s == dnnl_unimplemented)
    return ts_error(TS_ERR_UNSUPPORTED, "%s: oneDNN has no implementation for this layer (%s)", base_names[k], what);
  return ts_error(TS_ERR_INTERNAL, "%s: %s failed with oneDNN status %d", base_names[k], what, (int)s);
}
#define DN(call)                                                  \
  do {                                                            \
    dnnl_status_t dn__s = (call);                                 \
    if (dn__s != dnnl_success) return dnnl_fail(#call, dn__s, b->kind); \
  } while (0)

/* *mem = the primitive's memory for `want`: the user's memory when the layouts agree, else a new
 * one plus a reorder (user -> want, or want -> user when to_user). */
static ts_status dnnl_match(ts_conv_baseline *b, dnnl_memory_t user, const dnnl_memory_desc_t *user_md,
                            const dnnl_memory_desc_t *want, dnnl_memory_t *mem, dnnl_primitive_t *reorder, int to_user) {
  if (dnnl_memory_desc_equal(user_md, want)) {
    *mem = user;
    return TS_OK;
  }
  DN(dnnl_memory_create(mem, want, b->eng, DNNL_MEMORY_ALLOCATE));
  dnnl_primitive_desc_t rpd;
  if (to_user) DN(dnnl_reorder_primitive_desc_create(&rpd, want, b->eng, user_md, b->eng, NULL));
  else DN(dnnl_reorder_primitive_desc_create(&rpd, user_md, b->eng, want, b->eng, NULL));
  dnnl_status_t s = dnnl_primitive_create(reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return s == dnnl_success ? TS_OK : dnnl_fail("reorder", s, b->kind);
}

static ts_status dnnl_reorder_once(ts_conv_baseline *b, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  const int prev = omp_get_max_threads();
  omp_set_num_threads(b->threads);
  dnnl_status_t s = dnnl_primitive_execute(r, b->strm, 2, a);
  if (s == dnnl_success) s = dnnl_stream_wait(b->strm);
  omp_set_num_threads(prev);
  return s == dnnl_success ? TS_OK : dnnl_fail("weight reorder", s, b->kind);
}

static ts_status dnnl_init(ts_conv_baseline *b, const float *w, const float *bias) {
  const ts_conv_desc *d = &b->d;
  static const dnnl_alg_kind_t algs[] = {dnnl_convolution_direct, dnnl_convolution_winograd, dnnl_convolution_auto};
  ts__dnnl_cap(); /* TESSERA_ISA=avx2 caps the peer too */
  DN(dnnl_engine_create(&b->eng, dnnl_cpu, 0));
  DN(dnnl_stream_create(&b->strm, b->eng, dnnl_stream_default_flags));
  const int g = d->groups;
  dnnl_dims_t sdims = {d->n, d->c, d->h, d->w}, ddims = {d->n, d->k, b->p, b->q}, bdims = {d->k};
  dnnl_dims_t wdims = {d->k, d->c, d->r, d->s}, gwdims = {g, d->k / g, d->c / g, d->r, d->s};
  dnnl_dims_t strides = {d->stride_h, d->stride_w}, dil = {d->dilation_h - 1, d->dilation_w - 1};
  dnnl_dims_t padl = {d->pad_top, d->pad_left}, padr = {d->pad_bottom, d->pad_right};
  dnnl_memory_desc_t s_user, d_user, w_user, b_md, s_any, d_any, w_any;
  DN(dnnl_memory_desc_init_by_tag(&s_user, 4, sdims, dnnl_f32, dnnl_nchw));
  DN(dnnl_memory_desc_init_by_tag(&d_user, 4, ddims, dnnl_f32, dnnl_nchw));
  if (g > 1) DN(dnnl_memory_desc_init_by_tag(&w_user, 5, gwdims, dnnl_f32, dnnl_goihw));
  else DN(dnnl_memory_desc_init_by_tag(&w_user, 4, wdims, dnnl_f32, dnnl_oihw));
  DN(dnnl_memory_desc_init_by_tag(&b_md, 1, bdims, dnnl_f32, dnnl_x));
  DN(dnnl_memory_desc_init_by_tag(&s_any, 4, sdims, dnnl_f32, dnnl_format_tag_any));
  DN(dnnl_memory_desc_init_by_tag(&d_any, 4, ddims, dnnl_f32, dnnl_format_tag_any));
  DN(dnnl_memory_desc_init_by_tag(&w_any, g > 1 ? 5 : 4, g > 1 ? gwdims : wdims, dnnl_f32, dnnl_format_tag_any));
  dnnl_convolution_desc_t cd;
  DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, algs[b->kind], &s_any, &w_any, &b_md,
                                                &d_any, strides, dil, padl, padr));
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  if (d->relu) {
    DN(dnnl_primitive_attr_create(&attr));
    DN(dnnl_post_ops_create(&po));
    DN(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    DN(dnnl_primitive_attr_set_post_ops(attr, po));
  }
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t s = dnnl_primitive_desc_create(&pd, &cd, attr, b->eng, NULL);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return dnnl_fail("primitive_desc_create", s, b->kind);
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(b->impl, sizeof b->impl, "%s", impl ? impl : "?");
  const dnnl_memory_desc_t *s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *d_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  s = dnnl_primitive_create(&b->conv, pd);
  ts_status st = s == dnnl_success ? TS_OK : dnnl_fail("primitive_create", s, b->kind);
  /* user memories get their data handles at execute; the weights are copied in now */
  dnnl_memory_t user_wei = NULL;
  dnnl_primitive_t wr = NULL;
  if (st == TS_OK && (dnnl_memory_create(&b->user_src, &s_user, b->eng, DNNL_MEMORY_NONE) != dnnl_success ||
                      dnnl_memory_create(&b->user_dst, &d_user, b->eng, DNNL_MEMORY_NONE) != dnnl_success ||
                      dnnl_memory_create(&user_wei, &w_user, b->eng, (void *)w) != dnnl_success ||
                      dnnl_memory_create(&b->bias, &b_md, b->eng, DNNL_MEMORY_ALLOCATE) != dnnl_success))
    st = ts_error(TS_ERR_OOM, "%s: out of memory for oneDNN memories", base_names[b->kind]);
  if (st == TS_OK) st = dnnl_match(b, b->user_src, &s_user, s_md, &b->src, &b->src_reorder, 0);
  if (st == TS_OK) st = dnnl_match(b, b->user_dst, &d_user, d_md, &b->dst, &b->dst_reorder, 1);
  if (st == TS_OK) {
    if (dnnl_memory_desc_equal(&w_user, w_md)) {
      /* plain layout: a copy the baseline owns */
      if (dnnl_memory_create(&b->wei, w_md, b->eng, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        st = ts_error(TS_ERR_OOM, "%s: out of memory for the weights", base_names[b->kind]);
      void *h = NULL;
      if (st == TS_OK) dnnl_memory_get_data_handle(b->wei, &h);
      if (h) memcpy(h, w, (size_t)d->k * (d->c / g) * d->r * d->s * sizeof(float));
    } else {
      st = dnnl_match(b, user_wei, &w_user, w_md, &b->wei, &wr, 0);
      if (st == TS_OK) st = dnnl_reorder_once(b, wr, user_wei, b->wei);
    }
  }
  if (st == TS_OK) {
    void *h = NULL;
    dnnl_memory_get_data_handle(b->bias, &h);
    for (int k = 0; h && k < d->k; k++) ((float *)h)[k] = bias ? bias[k] : 0.0f;
  }
  if (wr) dnnl_primitive_destroy(wr);
  if (user_wei) dnnl_memory_destroy(user_wei);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

static ts_status dnnl_exec(ts_conv_baseline *b, const float *in, float *out) {
  if (dnnl_memory_set_data_handle(b->user_src, (void *)in) != dnnl_success ||
      dnnl_memory_set_data_handle(b->user_dst, out) != dnnl_success)
    return ts_error(TS_ERR_INTERNAL, "%s: could not bind the NCHW buffers", base_names[b->kind]);
  const int prev = omp_get_max_threads();
  omp_set_num_threads(b->threads);
  dnnl_status_t s = dnnl_success;
  if (b->src_reorder) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, b->user_src}, {DNNL_ARG_TO, b->src}};
    s = dnnl_primitive_execute(b->src_reorder, b->strm, 2, a);
  }
  dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, b->src}, {DNNL_ARG_WEIGHTS, b->wei}, {DNNL_ARG_BIAS, b->bias},
                          {DNNL_ARG_DST, b->dst}};
  if (s == dnnl_success) s = dnnl_primitive_execute(b->conv, b->strm, 4, a);
  if (s == dnnl_success && b->dst_reorder) {
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, b->dst}, {DNNL_ARG_TO, b->user_dst}};
    s = dnnl_primitive_execute(b->dst_reorder, b->strm, 2, r);
  }
  if (s == dnnl_success) s = dnnl_stream_wait(b->strm);
  omp_set_num_threads(prev);
  return s == dnnl_success ? TS_OK : dnnl_fail("execute", s, b->kind);
}

/* ---- OpenBLAS ------------------------------------------------------------------------------- */

static void *openblas_handle(void) {
  static void *h;
  static int tried;
#pragma omp critical(ts_conv_openblas_load)
  if (!tried) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    tried = 1;
  }
  return h;
}

static ts_status openblas_init(ts_conv_baseline *b, const float *w, const float *bias) {
  void *h = openblas_handle();
  if (!h) return ts_error(TS_ERR_UNSUPPORTED, "openblas: libopenblas.so.0 could not be loaded: %s", dlerror());
  b->sgemm = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
  b->set_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
  char *(*config)(void) = (char *(*)(void))dlsym(h, "openblas_get_config");
  if (!b->sgemm) return ts_error(TS_ERR_UNSUPPORTED, "openblas: libopenblas has no cblas_sgemm");
  snprintf(b->impl, sizeof b->impl, "openblas %s", config ? config() : "");
  const ts_conv_desc *d = &b->d;
  const size_t crs = (size_t)(d->c / d->groups) * d->r * d->s, wn = (size_t)d->k * crs;
  b->w = ts_malloc(wn * sizeof(float));
  b->b = ts_malloc((size_t)d->k * sizeof(float));
  b->col = ts_malloc(crs * b->p * b->q * sizeof(float));
  if (!b->w || !b->b || !b->col) return ts_error(TS_ERR_OOM, "openblas: out of memory for %zu weights", wn);
  memcpy(b->w, w, wn * sizeof(float));
  for (int k = 0; k < d->k; k++) b->b[k] = bias ? bias[k] : 0.0f;
  return TS_OK;
}

static ts_status openblas_exec(ts_conv_baseline *b, const float *in, float *out) {
  const ts_conv_desc *d = &b->d;
  const int cg = d->c / d->groups, kg = d->k / d->groups, rs = d->r * d->s, crs = cg * rs, pq = b->p * b->q;
  const int plain = rs == 1 && d->stride_h == 1 && d->stride_w == 1 && !d->pad_top && !d->pad_bottom &&
                    !d->pad_left && !d->pad_right;
  if (b->set_threads) b->set_threads(b->threads);
  for (int n = 0; n < d->n; n++)
    for (int g = 0; g < d->groups; g++) {
      const float *x = in + ((size_t)n * d->c + (size_t)g * cg) * d->h * d->w, *col = x;
      if (!plain) {
#pragma omp parallel for num_threads(b->threads) schedule(static)
        for (int row = 0; row < crs; row++)
          ts__conv_lower_row(d, b->q, x + (size_t)(row / rs) * d->h * d->w, (row % rs) / d->s, row % d->s, 0, pq,
                             b->col + (size_t)row * pq);
        col = b->col;
      }
      float *o = out + ((size_t)n * d->k + (size_t)g * kg) * pq;
      b->sgemm(101, 111, 111, kg, pq, crs, 1.0f, b->w + (size_t)g * kg * crs, crs, col, pq, 0.0f, o, pq);
#pragma omp parallel for num_threads(b->threads) schedule(static)
      for (int k = 0; k < kg; k++) ts__conv_epilogue(o + (size_t)k * pq, 1, pq, pq, b->b + g * kg + k, d->relu);
    }
  return TS_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

ts_status ts_conv_baseline_create(ts_conv_baseline **out, ts_context *ctx, const ts_conv_desc *d,
                                  ts_conv_baseline_kind kind, const float *w, const float *bias) {
  if (!out || !w) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_baseline_create: NULL argument");
  *out = NULL;
  if ((unsigned)kind >= TS_CONV_BASE_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "ts_conv_baseline_create: unknown baseline %d", (int)kind);
  int p, q;
  TS_TRY(ts_conv_output_dims(d, &p, &q));
  ts_conv_baseline *b = calloc(1, sizeof *b);
  if (!b) return ts_error(TS_ERR_OOM, "ts_conv_baseline_create: out of memory");
  b->kind = kind, b->d = *d, b->p = p, b->q = q;
  b->threads = ctx ? ts_context_threads(ctx) : ts_default_threads();
  const int prev = omp_get_max_threads(); /* oneDNN fixes its work split for this count (see above) */
  omp_set_num_threads(b->threads);
  const ts_status s = kind == TS_CONV_BASE_OPENBLAS ? openblas_init(b, w, bias) : dnnl_init(b, w, bias);
  omp_set_num_threads(prev);
  if (s != TS_OK) {
    ts_conv_baseline_destroy(b);
    return s;
  }
  *out = b;
  return TS_OK;
}

ts_status ts_conv_baseline_execute(ts_conv_baseline *b, const float *in, float *out) {
  if (!b || !in || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_baseline_execute: NULL argument");
  return b->kind == TS_CONV_BASE_OPENBLAS ? openblas_exec(b, in, out) : dnnl_exec(b, in, out);
}

const char *ts_conv_baseline_impl(const ts_conv_baseline *b) { return b ? b->impl : ""; }
