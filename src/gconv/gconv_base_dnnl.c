/* oneDNN convolution primitive through the libdnnl C API (v2), for the baselines: grouped (the
 * input already gathered into equal groups) or dense. Activations stay NCHW, as the caller's
 * tensors are; the weights are reordered once into the layout oneDNN prefers for the primitive.
 * oneDNN runs on OpenMP here: the calling thread's nthreads ICV is set for each call and restored
 * (as ts_sgemm does). */
#include <dnnl.h>
#include <omp.h>
#include <string.h>

#include "gconv/gconv_base.h"
#include "kernels/kernels_internal.h"

struct ts__gconv_dnnl {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t conv;
  dnnl_memory_t src, wei, dst;
  int threads;
};

#define DN(call)                                                                                          \
  do {                                                                                                    \
    dnnl_status_t ds__ = (call);                                                                          \
    if (ds__ != dnnl_success) {                                                                           \
      s = ts_error(TS_ERR_INTERNAL, "oneDNN: %s failed with status %d", #call, (int)ds__);                \
      goto done;                                                                                          \
    }                                                                                                     \
  } while (0)

void ts__gconv_dnnl_destroy(ts__gconv_dnnl *d) {
  if (!d) return;
  if (d->src) dnnl_memory_destroy(d->src);
  if (d->wei) dnnl_memory_destroy(d->wei);
  if (d->dst) dnnl_memory_destroy(d->dst);
  if (d->conv) dnnl_primitive_destroy(d->conv);
  if (d->pd) dnnl_primitive_desc_destroy(d->pd);
  if (d->stream) dnnl_stream_destroy(d->stream);
  if (d->eng) dnnl_engine_destroy(d->eng);
  ts_free(d);
}

ts_status ts__gconv_dnnl_create(ts__gconv_dnnl **out, int threads, const ts_gconv_layer *l, int cin, int groups,
                                const float *weights) {
  *out = NULL;
  ts__gconv_dnnl *d = ts_calloc(1, sizeof *d);
  if (!d) return TS_ERR_OOM;
  d->threads = threads;
  ts_status s = TS_OK;
  int ho, wo;
  ts_gconv_layer_out(l, &ho, &wo);
  const int k = l->ksize, p = k / 2, prev = omp_get_max_threads();
  omp_set_num_threads(threads);
  dnnl_memory_desc_t src_md, dst_md, wei_any, wei_user;
  dnnl_memory_t user = NULL;
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t reorder = NULL;
  const dnnl_dims_t sd = {l->n, cin, l->h, l->w}, dd = {l->n, l->cout, ho, wo};
  const dnnl_dims_t wg = {groups, l->cout / groups, cin / groups, k, k}, w1 = {l->cout, cin, k, k};
  const dnnl_dims_t strides = {l->stride, l->stride}, pads = {p, p};
  ts__dnnl_cap(); /* TESSERA_ISA=avx2 caps the peer too */
  DN(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
  DN(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags));
  DN(dnnl_memory_desc_init_by_tag(&src_md, 4, sd, dnnl_f32, dnnl_nchw));
  DN(dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, dnnl_f32, dnnl_nchw));
  if (groups > 1) {
    DN(dnnl_memory_desc_init_by_tag(&wei_any, 5, wg, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&wei_user, 5, wg, dnnl_f32, dnnl_goihw));
  } else {
    DN(dnnl_memory_desc_init_by_tag(&wei_any, 4, w1, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&wei_user, 4, w1, dnnl_f32, dnnl_oihw));
  }
  dnnl_convolution_desc_t cd;
  DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &wei_any, NULL,
                                        &dst_md, strides, pads, pads));
  DN(dnnl_primitive_desc_create(&d->pd, &cd, NULL, d->eng, NULL));
  DN(dnnl_primitive_create(&d->conv, d->pd));
  const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0);
  DN(dnnl_memory_create(&d->wei, wmd, d->eng, DNNL_MEMORY_ALLOCATE));
  DN(dnnl_memory_create(&user, &wei_user, d->eng, (void *)weights));
  DN(dnnl_reorder_primitive_desc_create(&rpd, &wei_user, d->eng, wmd, d->eng, NULL));
  DN(dnnl_primitive_create(&reorder, rpd));
  dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, d->wei}};
  DN(dnnl_primitive_execute(reorder, d->stream, 2, rargs));
  DN(dnnl_stream_wait(d->stream));
  DN(dnnl_memory_create(&d->src, &src_md, d->eng, DNNL_MEMORY_NONE));
  DN(dnnl_memory_create(&d->dst, &dst_md, d->eng, DNNL_MEMORY_NONE));
done:
  omp_set_num_threads(prev);
  if (reorder) dnnl_primitive_destroy(reorder);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  if (user) dnnl_memory_destroy(user);
  if (s != TS_OK) {
    ts__gconv_dnnl_destroy(d);
    return s;
  }
  *out = d;
  return TS_OK;
}

ts_status ts__gconv_dnnl_run(const ts__gconv_dnnl *d, const float *src, float *dst) {
  ts_status s = TS_OK;
  const int prev = omp_get_max_threads();
  omp_set_num_threads(d->threads);
  DN(dnnl_memory_set_data_handle(d->src, (void *)src));
  DN(dnnl_memory_set_data_handle(d->dst, dst));
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_DST, d->dst}};
  DN(dnnl_primitive_execute(d->conv, d->stream, 3, args));
  DN(dnnl_stream_wait(d->stream));
done:
  omp_set_num_threads(prev);
  return s;
}
