/* CNN graph building (cnn.h): nodes with per-image output shapes computed as they are added,
 * a sticky error, parameters and their random initialisation. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cnn_internal.h"

static const char *const op_names[TS_CNN_OP_COUNT] = {"input", "conv", "bn", "relu", "maxpool", "avgpool",
                                                      "gap",   "concat", "add", "fc"};

const char *ts_cnn_op_name(ts_cnn_op op) { return (unsigned)op < TS_CNN_OP_COUNT ? op_names[op] : "unknown"; }

ts_cnn_conv_params ts_cnn_conv_params_make(int k, int r, int s, int stride, int pad_h, int pad_w) {
  ts_cnn_conv_params p;
  memset(&p, 0, sizeof p);
  p.k = k, p.r = r, p.s = s;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = pad_h;
  p.pad_left = p.pad_right = pad_w;
  p.dilation_h = p.dilation_w = 1;
  p.groups = 1;
  return p;
}

ts_cnn_pool_params ts_cnn_pool_params_make(int k, int stride, int pad) {
  ts_cnn_pool_params p = {k, k, stride, stride, pad, pad, true};
  return p;
}

ts_status ts_cnn_graph_create(ts_cnn_graph **g, const char *name) {
  if (!g) return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_graph_create: NULL graph pointer");
  *g = calloc(1, sizeof **g);
  if (!*g) return ts_error(TS_ERR_OOM, "ts_cnn_graph_create: out of memory");
  snprintf((*g)->name, sizeof (*g)->name, "%s", name ? name : "graph");
  return TS_OK;
}

void ts_cnn_graph_destroy(ts_cnn_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++)
    for (int k = 0; k < 4; k++) ts_free(g->nodes[i].param[k]);
  free(g->nodes);
  free(g);
}

ts_status ts_cnn_graph_status(const ts_cnn_graph *g) {
  if (!g) return ts_error(TS_ERR_INVALID_ARG, "cnn graph: NULL graph");
  return g->err == TS_OK ? TS_OK : ts_error(g->err, "%s", g->errmsg);
}

const char *ts_cnn_graph_name(const ts_cnn_graph *g) { return g ? g->name : ""; }
int ts_cnn_graph_size(const ts_cnn_graph *g) { return g ? g->n : 0; }

int ts_cnn_graph_find(const ts_cnn_graph *g, const char *name) {
  for (int i = 0; g && name && i < g->n; i++)
    if (!strcmp(g->nodes[i].name, name)) return i;
  return -1;
}

/* Records the first error (message prefixed with the graph and node) and returns -1. */
static int fail(ts_cnn_graph *g, ts_status code, const char *node, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(ts_cnn_graph *g, ts_status code, const char *node, const char *fmt, ...) {
  if (g->err == TS_OK) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g->err = code;
    snprintf(g->errmsg, sizeof g->errmsg, "cnn graph %s: node '%s': %s", g->name, node ? node : "?", msg);
    ts_error(code, "%s", g->errmsg);
  }
  return -1;
}

/* A new node with its inputs checked (ids of earlier nodes); NULL after an error. */
static cnn_node *new_node(ts_cnn_graph *g, ts_cnn_op op, const char *name, int nin, const int *in) {
  if (!g || g->err != TS_OK) return NULL;
  char auto_name[TS_CNN_NAME_MAX];
  if (!name) snprintf(auto_name, sizeof auto_name, "%s%d", op_names[op], g->n), name = auto_name;
  if (strlen(name) >= TS_CNN_NAME_MAX)
    return fail(g, TS_ERR_INVALID_ARG, name, "name longer than %d bytes", TS_CNN_NAME_MAX - 1), NULL;
  if (ts_cnn_graph_find(g, name) >= 0) return fail(g, TS_ERR_INVALID_ARG, name, "duplicate name"), NULL;
  if (nin > TS_CNN_MAX_INPUTS) return fail(g, TS_ERR_INVALID_ARG, name, "%d inputs (at most %d)", nin, TS_CNN_MAX_INPUTS), NULL;
  for (int i = 0; i < nin; i++)
    if (in[i] < 0 || in[i] >= g->n)
      return fail(g, TS_ERR_INVALID_ARG, name, "input %d is node %d, not an existing node (0..%d)", i, in[i], g->n - 1),
             NULL;
  if (op != TS_CNN_INPUT && g->n == 0) return fail(g, TS_ERR_INVALID_ARG, name, "the first node must be the input"), NULL;
  if (op == TS_CNN_INPUT && g->n) return fail(g, TS_ERR_INVALID_ARG, name, "only one input node"), NULL;
  if (g->n == g->cap) {
    const int cap = g->cap ? 2 * g->cap : 64;
    cnn_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
    if (!nn) return fail(g, TS_ERR_OOM, name, "out of memory"), NULL;
    g->nodes = nn, g->cap = cap;
  }
  cnn_node *nd = &g->nodes[g->n];
  memset(nd, 0, sizeof *nd);
  nd->op = op;
  snprintf(nd->name, sizeof nd->name, "%s", name);
  nd->nin = nin;
  for (int i = 0; i < nin; i++) nd->in[i] = in[i];
  if (nin) nd->c = g->nodes[in[0]].c, nd->h = g->nodes[in[0]].h, nd->w = g->nodes[in[0]].w;
  return nd;
}

static int commit(ts_cnn_graph *g) { return g->n++; }

int ts_cnn_input(ts_cnn_graph *g, int c, int h, int w) {
  cnn_node *nd = new_node(g, TS_CNN_INPUT, "input", 0, NULL);
  if (!nd) return -1;
  if (c < 1 || h < 1 || w < 1 || c > (1 << 20) || h > (1 << 16) || w > (1 << 16))
    return fail(g, TS_ERR_INVALID_ARG, "input", "shape %dx%dx%d out of range", c, h, w);
  nd->c = c, nd->h = h, nd->w = w;
  return commit(g);
}

int ts_cnn_conv(ts_cnn_graph *g, const char *name, int x, const ts_cnn_conv_params *p) {
  cnn_node *nd = new_node(g, TS_CNN_CONV, name, 1, &x);
  if (!nd) return -1;
  if (!p) return fail(g, TS_ERR_INVALID_ARG, nd->name, "NULL conv parameters");
  nd->conv = *p;
  ts_conv_desc d = ts_conv_desc_make(1, nd->c, nd->h, nd->w, p->k, p->r, p->s);
  d.stride_h = p->stride_h, d.stride_w = p->stride_w;
  d.pad_top = p->pad_top, d.pad_bottom = p->pad_bottom, d.pad_left = p->pad_left, d.pad_right = p->pad_right;
  d.dilation_h = p->dilation_h, d.dilation_w = p->dilation_w, d.groups = p->groups;
  int P, Q;
  const ts_status st = ts_conv_output_dims(&d, &P, &Q);
  if (st != TS_OK) return fail(g, st, nd->name, "%s", ts_last_error());
  nd->c = p->k, nd->h = P, nd->w = Q;
  return commit(g);
}

int ts_cnn_bn(ts_cnn_graph *g, const char *name, int x, float eps) {
  cnn_node *nd = new_node(g, TS_CNN_BN, name, 1, &x);
  if (!nd) return -1;
  if (!(eps > 0)) return fail(g, TS_ERR_INVALID_ARG, nd->name, "eps = %g must be positive", eps);
  nd->eps = eps;
  return commit(g);
}

int ts_cnn_relu(ts_cnn_graph *g, const char *name, int x) {
  return new_node(g, TS_CNN_RELU, name, 1, &x) ? commit(g) : -1;
}

int ts_cnn_pool(ts_cnn_graph *g, const char *name, int x, ts_cnn_op kind, const ts_cnn_pool_params *p) {
  cnn_node *nd = new_node(g, kind, name, 1, &x);
  if (!nd) return -1;
  if (kind != TS_CNN_MAXPOOL && kind != TS_CNN_AVGPOOL)
    return fail(g, TS_ERR_INVALID_ARG, nd->name, "pool kind must be maxpool or avgpool, got %s", ts_cnn_op_name(kind));
  if (!p || p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 ||
      p->pad_h >= p->kh || p->pad_w >= p->kw)
    return fail(g, TS_ERR_INVALID_ARG, nd->name, "pool parameters out of range (kernel >= 1, stride >= 1, 0 <= pad < kernel)");
  const int hp = nd->h + 2 * p->pad_h - p->kh, wp = nd->w + 2 * p->pad_w - p->kw;
  if (hp < 0 || wp < 0)
    return fail(g, TS_ERR_SHAPE, nd->name, "window %dx%d larger than the padded input %dx%d", p->kh, p->kw,
                nd->h + 2 * p->pad_h, nd->w + 2 * p->pad_w);
  nd->pool = *p;
  nd->h = hp / p->stride_h + 1, nd->w = wp / p->stride_w + 1;
  return commit(g);
}

int ts_cnn_gap(ts_cnn_graph *g, const char *name, int x) {
  cnn_node *nd = new_node(g, TS_CNN_GAP, name, 1, &x);
  if (!nd) return -1;
  nd->h = nd->w = 1;
  return commit(g);
}

int ts_cnn_concat(ts_cnn_graph *g, const char *name, int n, const int *xs) {
  if (g && g->err == TS_OK && (n < 1 || !xs)) return fail(g, TS_ERR_INVALID_ARG, name, "concat of %d inputs", n);
  cnn_node *nd = new_node(g, TS_CNN_CONCAT, name, n, xs);
  if (!nd) return -1;
  int c = 0;
  for (int i = 0; i < n; i++) {
    const cnn_node *s = &g->nodes[xs[i]];
    if (s->h != nd->h || s->w != nd->w)
      return fail(g, TS_ERR_SHAPE, nd->name, "input %d ('%s') is %dx%d, input 0 is %dx%d", i, s->name, s->h, s->w, nd->h,
                  nd->w);
    c += s->c;
  }
  nd->c = c;
  return commit(g);
}

int ts_cnn_add(ts_cnn_graph *g, const char *name, int a, int b) {
  const int in[2] = {a, b};
  cnn_node *nd = new_node(g, TS_CNN_ADD, name, 2, in);
  if (!nd) return -1;
  const cnn_node *x = &g->nodes[a], *y = &g->nodes[b];
  if (x->c != y->c || x->h != y->h || x->w != y->w)
    return fail(g, TS_ERR_SHAPE, nd->name, "'%s' is %dx%dx%d, '%s' is %dx%dx%d", x->name, x->c, x->h, x->w, y->name, y->c,
                y->h, y->w);
  return commit(g);
}

int ts_cnn_fc(ts_cnn_graph *g, const char *name, int x, int out) {
  cnn_node *nd = new_node(g, TS_CNN_FC, name, 1, &x);
  if (!nd) return -1;
  if (out < 1 || out > (1 << 24)) return fail(g, TS_ERR_INVALID_ARG, nd->name, "out = %d out of range", out);
  nd->fc_out = out;
  nd->c = out, nd->h = nd->w = 1;
  return commit(g);
}

ts_status ts_cnn_graph_node(const ts_cnn_graph *g, int id, ts_cnn_node_info *out) {
  if (!g || !out || id < 0 || id >= g->n)
    return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_graph_node: node %d out of range (graph has %d)", id, g ? g->n : 0);
  const cnn_node *nd = &g->nodes[id];
  memset(out, 0, sizeof *out);
  out->op = nd->op, out->name = nd->name, out->ninputs = nd->nin, out->inputs = nd->in;
  out->c = nd->c, out->h = nd->h, out->w = nd->w, out->layout = TS_CNN_NCHW;
  out->conv = nd->conv, out->pool = nd->pool, out->fc_out = nd->fc_out, out->eps = nd->eps;
  if (nd->op == TS_CNN_CONV) {
    const cnn_node *s = &g->nodes[nd->in[0]];
    out->flops = 2.0 * nd->c * nd->h * nd->w * (double)(s->c / nd->conv.groups) * nd->conv.r * nd->conv.s;
  } else if (nd->op == TS_CNN_FC) {
    const cnn_node *s = &g->nodes[nd->in[0]];
    out->flops = 2.0 * (double)s->c * s->h * s->w * nd->fc_out;
  }
  return TS_OK;
}

/* ---- parameters --------------------------------------------------------------------------- */

/* Parameter counts need the input's shape (conv weights, fc weights). */
static int param_counts(const ts_cnn_graph *g, const cnn_node *nd, size_t counts[4]) {
  memset(counts, 0, 4 * sizeof counts[0]);
  const cnn_node *s = nd->nin ? &g->nodes[nd->in[0]] : NULL;
  switch (nd->op) {
    case TS_CNN_CONV:
      counts[0] = (size_t)nd->conv.k * (s->c / nd->conv.groups) * nd->conv.r * nd->conv.s;
      counts[1] = (size_t)nd->conv.k;
      return nd->conv.bias ? 2 : 1;
    case TS_CNN_BN: counts[0] = counts[1] = counts[2] = counts[3] = (size_t)nd->c; return 4;
    case TS_CNN_FC:
      counts[0] = (size_t)nd->fc_out * s->c * s->h * s->w;
      counts[1] = (size_t)nd->fc_out;
      return 2;
    default: return 0;
  }
}

ts_status ts_cnn_param(ts_cnn_graph *g, int id, int which, float **data, size_t *count) {
  if (!g || id < 0 || id >= g->n || !data)
    return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_param: node %d out of range (graph has %d)", id, g ? g->n : 0);
  cnn_node *nd = &g->nodes[id];
  size_t counts[4];
  const int n = param_counts(g, nd, counts);
  if (which < 0 || which >= n)
    return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_param: node '%s' (%s) has %d parameter arrays, asked for %d", nd->name,
                    op_names[nd->op], n, which);
  if (!nd->param[which]) {
    if (!(nd->param[which] = ts_calloc(counts[which], sizeof(float))))
      return ts_error(TS_ERR_OOM, "ts_cnn_param: out of memory for %zu parameters of '%s'", counts[which], nd->name);
    nd->param_n[which] = counts[which];
  }
  *data = nd->param[which];
  if (count) *count = counts[which];
  return TS_OK;
}

static void fill(float *p, size_t n, ts_rng *r, double lo, double hi) {
  for (size_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * ts_rng_uniform(r));
}

ts_status ts_cnn_graph_init_random(ts_cnn_graph *g, uint64_t seed) {
  TS_TRY(ts_cnn_graph_status(g));
  for (int id = 0; id < g->n; id++) {
    cnn_node *nd = &g->nodes[id];
    size_t counts[4];
    const int n = param_counts(g, nd, counts);
    ts_rng r;
    ts_rng_seed(&r, seed * 1000003u + (uint64_t)id); /* per node: the same weights whatever else changes */
    for (int k = 0; k < n; k++) {
      float *p;
      TS_TRY(ts_cnn_param(g, id, k, &p, NULL));
      if (nd->op == TS_CNN_BN) {
        static const double lo[4] = {0.4, -0.1, -0.1, 0.5}, hi[4] = {0.9, 0.1, 0.1, 1.5};
        fill(p, counts[k], &r, lo[k], hi[k]);
      } else if (k == 0) {
        const double fan_in = (double)counts[0] / (nd->op == TS_CNN_CONV ? nd->conv.k : nd->fc_out), a = sqrt(6.0 / fan_in);
        fill(p, counts[k], &r, -a, a);
      } else {
        fill(p, counts[k], &r, -0.1, 0.1);
      }
    }
  }
  return TS_OK;
}
