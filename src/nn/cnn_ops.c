/* The non-convolution nodes of a CNN net, NCHW fp32 (shapes per image in cnn_node, batch N):
 *   bn       y[n][c][i] = x * scale[c] + shift[c]
 *   relu     y = max(x, 0) (NaN stays NaN)
 *   maxpool  max over the in-range window taps (padding is -inf)
 *   avgpool  sum over in-range taps / (kh*kw, or the in-range count without count_include_pad)
 *   gap      mean over H*W
 *   concat   channel slices copied image by image
 *   add      y = a + b (+ fused ReLU)
 *   fc       y [N][out] = x [N][in] W^T + b (+ fused ReLU): ts_sgemm(NO_TRANS, TRANS)
 * Every loop runs over (image, channel) planes with the context's thread count. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "nn/cnn_internal.h"
#include "tessera/kernels.h"

static inline float relu1(float v) { return v < 0.0f ? 0.0f : v; }

static void pool_plane(const cnn_node *nd, const cnn_node *xn, const float *x, float *y) {
  const ts_cnn_pool_params *p = &nd->pool;
  const int H = xn->h, W = xn->w, max = nd->op == TS_CNN_MAXPOOL;
  for (int oh = 0; oh < nd->h; oh++) {
    const int h0 = oh * p->stride_h - p->pad_h, ha = h0 < 0 ? 0 : h0, hb = h0 + p->kh > H ? H : h0 + p->kh;
    for (int ow = 0; ow < nd->w; ow++) {
      const int w0 = ow * p->stride_w - p->pad_w, wa = w0 < 0 ? 0 : w0, wb = w0 + p->kw > W ? W : w0 + p->kw;
      float acc = max ? -INFINITY : 0.0f;
      for (int h = ha; h < hb; h++)
        for (int w = wa; w < wb; w++) {
          const float v = x[(size_t)h * W + w];
          if (max) acc = v > acc || v != v ? v : acc; /* NaN propagates */
          else acc += v;
        }
      if (!max) acc /= p->count_include_pad ? (float)(p->kh * p->kw) : (float)((hb - ha) * (wb - wa));
      y[(size_t)oh * nd->w + ow] = acc;
    }
  }
}

static ts_status run_fc(ts_cnn_net *net, int id, const cnn_node *nd, const float *x, float *y) {
  const cnn_node *xn = &net->g->nodes[nd->in[0]];
  const int64_t in = (int64_t)xn->c * xn->h * xn->w, out = nd->fc_out;
  TS_TRY(ts_sgemm(net->ctx, TS_NO_TRANS, TS_TRANS, net->batch, out, in, 1.0f, x, in, nd->param[0], in, 0.0f, y, out));
  const float *b = nd->param[1];
  const int relu = net->nodes[id].relu;
  for (int n = 0; n < net->batch; n++)
    for (int64_t o = 0; o < out; o++) {
      const float v = y[n * out + o] + b[o];
      y[n * out + o] = relu ? relu1(v) : v;
    }
  return TS_OK;
}

ts_status ts__cnn_run_node(ts_cnn_net *net, int id) {
  const cnn_node *nd = &net->g->nodes[id];
  net_node *nn = &net->nodes[id];
  const cnn_node *xn = &net->g->nodes[nd->in[0]];
  const float *x = ts__cnn_data(net, nd->in[0]);
  float *y = nn->out;
  const int threads = ts_context_threads(net->ctx), N = net->batch, C = nd->c;
  const size_t hw = (size_t)nd->h * nd->w, xhw = (size_t)xn->h * xn->w;
  switch (nd->op) {
    case TS_CNN_BN:
    case TS_CNN_RELU: {
      const int bn = nd->op == TS_CNN_BN;
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int nc = 0; nc < N * C; nc++) {
        const float *xi = x + (size_t)nc * hw;
        float *yi = y + (size_t)nc * hw;
        const float sc = bn ? nn->scale[nc % C] : 1.0f, sh = bn ? nn->shift[nc % C] : 0.0f;
        if (bn)
          for (size_t i = 0; i < hw; i++) yi[i] = xi[i] * sc + sh;
        else
          for (size_t i = 0; i < hw; i++) yi[i] = relu1(xi[i]);
      }
      return TS_OK;
    }
    case TS_CNN_MAXPOOL:
    case TS_CNN_AVGPOOL:
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int nc = 0; nc < N * C; nc++) pool_plane(nd, xn, x + (size_t)nc * xhw, y + (size_t)nc * hw);
      return TS_OK;
    case TS_CNN_GAP:
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int nc = 0; nc < N * C; nc++) {
        double acc = 0;
        for (size_t i = 0; i < xhw; i++) acc += x[(size_t)nc * xhw + i];
        y[nc] = (float)(acc / (double)xhw);
      }
      return TS_OK;
    case TS_CNN_ADD: {
      const float *b = ts__cnn_data(net, nd->in[1]);
      const size_t total = (size_t)N * C * hw;
      const int relu = nn->relu;
#pragma omp parallel for num_threads(threads) schedule(static)
      for (size_t i = 0; i < total; i++) {
        const float v = x[i] + b[i];
        y[i] = relu ? relu1(v) : v;
      }
      return TS_OK;
    }
    case TS_CNN_CONCAT: {
      const size_t img = (size_t)C * hw;
      for (int k = 0, c0 = 0; k < nd->nin; k++) {
        const cnn_node *s = &net->g->nodes[nd->in[k]];
        const float *src = ts__cnn_data(net, nd->in[k]);
        const size_t part = (size_t)s->c * hw;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int n = 0; n < N; n++) memcpy(y + n * img + (size_t)c0 * hw, src + n * part, part * sizeof(float));
        c0 += s->c;
      }
      return TS_OK;
    }
    case TS_CNN_FC: return run_fc(net, id, nd, x, y);
    default: return ts_error(TS_ERR_INTERNAL, "cnn: node '%s' of kind %s cannot run here", nd->name, ts_cnn_op_name(nd->op));
  }
}
