/* Planning a CNN graph into a net (cnn.h): fusion (BN folded into the convolution it follows,
 * ReLU into the convolution / add / fully connected node it follows), per-layer algorithm choice
 * (override, global algorithm, or the fastest measured in the profile), convolution plans with
 * folded weights, the activation arena and the shared workspace; then the forward pass. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cnn_internal.h"

ts_cnn_plan_opts ts_cnn_plan_opts_default(void) {
  ts_cnn_plan_opts o;
  memset(&o, 0, sizeof o);
  o.batch = 1;
  o.algo = TS_CNN_AUTO;
  o.measure_missing = true;
  o.time = ts_conv_time_opts_default();
  o.fold_bn = o.fuse_relu = o.reuse_memory = o.progress = true;
  return o;
}

void ts_cnn_net_destroy(ts_cnn_net *net) {
  if (!net) return;
  for (int i = 0; net->nodes && i < net->n; i++) { /* nodes NULL: create ran out of memory */
    ts_conv_plan_destroy(net->nodes[i].plan);
    ts_free(net->nodes[i].scale);
    ts_free(net->nodes[i].shift);
  }
  free(net->nodes);
  free(net->convs);
  ts_free(net->arena);
  ts_free(net->ws);
  free(net);
}

/* ---- fusion and lifetimes ------------------------------------------------------------------- */

static ts_status fuse(ts_cnn_net *net, const ts_cnn_plan_opts *o) {
  const ts_cnn_graph *g = net->g;
  int *cons = calloc((size_t)g->n, sizeof(int)); /* consumers of each node's output */
  if (!cons) return ts_error(TS_ERR_OOM, "cnn: out of memory");
  for (int j = 0; j < g->n; j++)
    for (int k = 0; k < g->nodes[j].nin; k++) cons[g->nodes[j].in[k]]++;
  cons[g->n - 1]++; /* the caller reads the output */
  for (int i = 0; i < g->n; i++) {
    const cnn_node *nd = &g->nodes[i];
    net_node *nn = &net->nodes[i];
    nn->src = i, nn->bn = -1;
    if (nd->op != TS_CNN_BN && nd->op != TS_CNN_RELU) continue;
    const int in = nd->in[0], s = net->nodes[in].src;
    net_node *p = &net->nodes[s];
    const ts_cnn_op pop = g->nodes[s].op;
    if (cons[in] != 1 || p->relu) continue; /* the pre-activation value is needed elsewhere */
    if (nd->op == TS_CNN_BN && o->fold_bn && pop == TS_CNN_CONV && s == in && p->bn < 0) {
      p->bn = i, nn->fused = true, nn->src = s;
    } else if (nd->op == TS_CNN_RELU && o->fuse_relu && (pop == TS_CNN_CONV || pop == TS_CNN_ADD || pop == TS_CNN_FC)) {
      p->relu = true, nn->fused = true, nn->src = s;
    }
  }
  /* lifetimes in execution (graph) order; the output tensor lives to the end */
  for (int i = 0; i < g->n; i++) net->nodes[i].first = net->nodes[i].last = i;
  for (int j = 0; j < g->n; j++) {
    if (net->nodes[j].fused) continue;
    for (int k = 0; k < g->nodes[j].nin; k++) {
      net_node *t = &net->nodes[net->nodes[g->nodes[j].in[k]].src];
      if (t->last < j) t->last = j;
    }
  }
  net->nodes[net->nodes[g->n - 1].src].last = g->n;
  free(cons);
  return TS_OK;
}

/* ---- convolutions --------------------------------------------------------------------------- */

static ts_conv_desc conv_desc(const ts_cnn_net *net, int id) {
  const cnn_node *nd = &net->g->nodes[id], *x = &net->g->nodes[nd->in[0]];
  const ts_cnn_conv_params *p = &nd->conv;
  ts_conv_desc d = ts_conv_desc_make(net->batch, x->c, x->h, x->w, p->k, p->r, p->s);
  d.stride_h = p->stride_h, d.stride_w = p->stride_w;
  d.pad_top = p->pad_top, d.pad_bottom = p->pad_bottom, d.pad_left = p->pad_left, d.pad_right = p->pad_right;
  d.dilation_h = p->dilation_h, d.dilation_w = p->dilation_w, d.groups = p->groups;
  d.relu = net->nodes[id].relu;
  return d;
}

/* The per-layer override for name: 1 and *a when a pattern matches, 0 when none does, -1 (error
 * set) for a malformed list or an unknown algorithm. */
static int override_for(const char *list, const char *name, ts_conv_algo *a, char *pat, size_t cap) {
  if (!list || !*list) return 0;
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ','), *eq = strchr(p, '=');
    if (!end) end = p + strlen(p);
    if (!eq || eq > end || eq == p || eq + 1 == end || (size_t)(end - p) >= cap) {
      ts_error(TS_ERR_INVALID_ARG, "overrides: '%.*s' is not PATTERN=ALGORITHM", (int)(end - p), p);
      return -1;
    }
    char algo[32];
    snprintf(pat, cap, "%.*s", (int)(eq - p), p);
    snprintf(algo, sizeof algo, "%.*s", (int)(end - eq - 1), eq + 1);
    if (ts_conv_algo_parse(algo, a) != TS_OK) {
      ts_error_prefix("overrides '%s=%s': ", pat, algo);
      return -1;
    }
    if (fnmatch(pat, name, 0) == 0) {
      snprintf(pat + strlen(pat), cap - strlen(pat), "=%s", algo);
      return 1;
    }
    p = *end ? end + 1 : end;
  }
  return 0;
}

/* Fixed choices (override or --algo) for every conv; auto layers get algo = -1. */
static ts_status fixed_choices(ts_cnn_net *net, const ts_cnn_plan_opts *o, int *need_auto) {
  *need_auto = 0;
  for (int i = 0; i < net->nconv; i++) {
    net_node *nn = &net->nodes[net->convs[i]];
    const char *name = net->g->nodes[net->convs[i]].name;
    ts_conv_algo a;
    char pat[128];
    const int ov = override_for(o->overrides, name, &a, pat, sizeof pat);
    if (ov < 0) return TS_ERR_INVALID_ARG;
    if (ov) {
      if (ts_conv_supported(&nn->desc, a) != TS_OK) {
        ts_error_prefix("layer '%s' (override %s): ", name, pat);
        return TS_ERR_UNSUPPORTED;
      }
      nn->algo = a, nn->chosen = true;
      snprintf(nn->why, sizeof nn->why, "override %s", pat);
      continue;
    }
    nn->chosen = false;
    nn->why[0] = 0;
    if (o->algo != TS_CNN_AUTO) {
      if ((unsigned)o->algo >= TS_CONV_ALGO_COUNT) return ts_error(TS_ERR_INVALID_ARG, "cnn: algo %d is not an algorithm", o->algo);
      if (ts_conv_supported(&nn->desc, (ts_conv_algo)o->algo) == TS_OK) {
        nn->algo = (ts_conv_algo)o->algo, nn->chosen = true;
        snprintf(nn->why, sizeof nn->why, "--algo %s", ts_conv_algo_name(nn->algo));
        continue;
      }
      snprintf(nn->why, sizeof nn->why, "%s does not apply; ", ts_conv_algo_name((ts_conv_algo)o->algo));
    }
    *need_auto = 1;
  }
  ts_error_clear();
  return TS_OK;
}

/* Selection for the layers left: measure the distinct shapes the profile lacks, then choose. */
static ts_status auto_choices(ts_cnn_net *net, const ts_cnn_plan_opts *o) {
  ts_conv_profile *prof = o->profile, *own = NULL;
  if (!prof) {
    TS_TRY(ts_conv_profile_open(&own, net->ctx, NULL, NULL));
    prof = own;
  }
  int *todo = malloc((size_t)net->nconv * sizeof(int)), nt = 0;
  ts_status s = todo ? TS_OK : ts_error(TS_ERR_OOM, "cnn: out of memory");
  for (int i = 0; s == TS_OK && i < net->nconv; i++) {
    const net_node *nn = &net->nodes[net->convs[i]];
    if (nn->chosen || ts_conv_profile_get(prof, &nn->desc, NULL)) continue;
    int dup = 0;
    char k1[96], k2[96];
    ts_conv_desc_key(&nn->desc, k1, sizeof k1);
    for (int j = 0; j < nt && !dup; j++) {
      ts_conv_desc_key(&net->nodes[net->convs[todo[j]]].desc, k2, sizeof k2);
      dup = !strcmp(k1, k2);
    }
    if (!dup) todo[nt++] = i;
  }
  if (s == TS_OK && nt && !o->measure_missing)
    s = ts_error(TS_ERR_NOT_FOUND, "cnn %s: %d layer shapes (first: '%s') are not in the profile %s", net->g->name, nt,
                 net->g->nodes[net->convs[todo[0]]].name, ts_conv_profile_path(prof));
  if (s == TS_OK && nt) {
    ts_progress pg;
    if (o->progress) ts_progress_begin(&pg, "conv profile", nt);
    for (int j = 0; s == TS_OK && j < nt; j++) {
      s = ts_conv_profile_measure(prof, net->ctx, &net->nodes[net->convs[todo[j]]].desc, o->candidates, &o->time, NULL);
      if (o->progress) ts_progress_update(&pg, j + 1);
    }
    if (o->progress) ts_progress_end(&pg);
    if (s == TS_OK && own && ts_conv_profile_save(own) != TS_OK)
      fprintf(stderr, "tessera: could not save the conv profile: %s\n", ts_last_error());
  }
  for (int i = 0; s == TS_OK && i < net->nconv; i++) {
    net_node *nn = &net->nodes[net->convs[i]];
    if (nn->chosen) continue;
    ts_conv_profile_entry e;
    char why[160];
    ts_conv_profile_get(prof, &nn->desc, &e);
    s = ts_conv_choose(&e, &nn->desc, o->candidates ? o->candidates : ~(1u << TS_CONV_REFERENCE), &nn->algo, why, sizeof why);
    if (s != TS_OK) ts_error_prefix("layer '%s': ", net->g->nodes[net->convs[i]].name);
    nn->chosen = s == TS_OK;
    const size_t len = strlen(nn->why);
    snprintf(nn->why + len, sizeof nn->why - len, "%s", why);
  }
  free(todo);
  ts_conv_profile_destroy(own);
  return s;
}

/* The plan of conv node id with its BN folded in: w' = w * g / sqrt(v + eps) per output channel,
 * b' = (b - mean) * g / sqrt(v + eps) + beta (in double, rounded once). */
static ts_status make_plan(ts_cnn_net *net, int id) {
  net_node *nn = &net->nodes[id];
  const cnn_node *nd = &net->g->nodes[id];
  const size_t wn = nd->param_n[0], per = wn / (size_t)nd->conv.k;
  if (!nd->param[0] || (nd->conv.bias && !nd->param[1]))
    return ts_error(TS_ERR_INVALID_ARG, "cnn: conv '%s' has no weights (ts_cnn_graph_init_random or ts_cnn_param)", nd->name);
  TS_TRY(ts_conv_plan_create(&nn->plan, net->ctx, &nn->desc, nn->algo));
  const float *w = nd->param[0], *b = nd->conv.bias ? nd->param[1] : NULL;
  float *wf = NULL, *bf = NULL;
  if (nn->bn >= 0) {
    const cnn_node *bn = &net->g->nodes[nn->bn];
    if (!bn->param[3]) return ts_error(TS_ERR_INVALID_ARG, "cnn: batch norm '%s' has no parameters", bn->name);
    wf = ts_malloc(wn * sizeof(float)), bf = ts_malloc((size_t)nd->conv.k * sizeof(float));
    if (!wf || !bf) return ts_free(wf), ts_free(bf), ts_error(TS_ERR_OOM, "cnn: out of memory folding '%s'", bn->name);
    for (int k = 0; k < nd->conv.k; k++) {
      const double sc = bn->param[0][k] / sqrt((double)bn->param[3][k] + bn->eps);
      for (size_t i = 0; i < per; i++) wf[k * per + i] = (float)(w[k * per + i] * sc);
      bf[k] = (float)(((b ? b[k] : 0.0) - bn->param[2][k]) * sc + bn->param[1][k]);
    }
    w = wf, b = bf;
  }
  const ts_status s = ts_conv_plan_set_weights(nn->plan, w, b);
  ts_free(wf), ts_free(bf);
  if (s != TS_OK) ts_error_prefix("cnn: conv '%s': ", nd->name);
  return s;
}

/* Standalone BN: y = x * scale + shift. */
static ts_status bn_affine(ts_cnn_net *net, int id) {
  net_node *nn = &net->nodes[id];
  const cnn_node *nd = &net->g->nodes[id];
  if (!nd->param[3]) return ts_error(TS_ERR_INVALID_ARG, "cnn: batch norm '%s' has no parameters", nd->name);
  nn->scale = ts_malloc((size_t)nd->c * sizeof(float)), nn->shift = ts_malloc((size_t)nd->c * sizeof(float));
  if (!nn->scale || !nn->shift) return ts_error(TS_ERR_OOM, "cnn: out of memory");
  for (int c = 0; c < nd->c; c++) {
    const double sc = nd->param[0][c] / sqrt((double)nd->param[3][c] + nd->eps);
    nn->scale[c] = (float)sc, nn->shift[c] = (float)(nd->param[1][c] - nd->param[2][c] * sc);
  }
  return TS_OK;
}

/* Fusion, shapes and every convolution's algorithm; with `params` also the standalone BN affines
 * (the graph's parameters are checked before anything is measured). */
static ts_status choose(ts_cnn_net *net, const ts_cnn_plan_opts *o, bool params) {
  const ts_cnn_graph *g = net->g;
  TS_TRY(fuse(net, o));
  for (int i = 0; i < g->n; i++) {
    net_node *nn = &net->nodes[i];
    nn->numel = (size_t)net->batch * g->nodes[i].c * g->nodes[i].h * g->nodes[i].w;
    if (g->nodes[i].op == TS_CNN_CONV) nn->desc = conv_desc(net, i), net->convs[net->nconv++] = i;
    if (params && g->nodes[i].op == TS_CNN_BN && !nn->fused) TS_TRY(bn_affine(net, i));
    if (params && (g->nodes[i].op == TS_CNN_FC) && !g->nodes[i].param[1])
      return ts_error(TS_ERR_INVALID_ARG, "cnn: fc '%s' has no weights", g->nodes[i].name);
  }
  int need_auto;
  TS_TRY(fixed_choices(net, o, &need_auto));
  return need_auto ? auto_choices(net, o) : TS_OK;
}

static ts_status build(ts_cnn_net *net, const ts_cnn_plan_opts *o) {
  const ts_cnn_graph *g = net->g;
  TS_TRY(choose(net, o, true));
  for (int i = 0; i < net->nconv; i++) {
    TS_TRY(make_plan(net, net->convs[i]));
    const size_t ws = ts_conv_plan_workspace_size(net->nodes[net->convs[i]].plan);
    if (ws > net->ws_bytes) net->ws_bytes = ws;
  }
  size_t *off = malloc((size_t)g->n * sizeof(size_t));
  if (!off) return ts_error(TS_ERR_OOM, "cnn: out of memory");
  ts_status s = ts__cnn_arena_plan(net, o->reuse_memory, off, &net->arena_bytes);
  if (s == TS_OK && net->arena_bytes && !(net->arena = ts_malloc(net->arena_bytes)))
    s = ts_error(TS_ERR_OOM, "cnn %s: out of memory for %.1f MB of activations", g->name, net->arena_bytes / 1e6);
  if (s == TS_OK && net->ws_bytes && !(net->ws = ts_malloc(net->ws_bytes)))
    s = ts_error(TS_ERR_OOM, "cnn %s: out of memory for a %.1f MB workspace", g->name, net->ws_bytes / 1e6);
  for (int i = 0; s == TS_OK && i < g->n; i++)
    if (off[i] != SIZE_MAX) net->nodes[i].out = (float *)(net->arena + off[i]);
  free(off);
  return s;
}

/* A net of g for opts, built in full (plans) or only as far as the convolutions' choice. */
static ts_status net_create(ts_cnn_net **out, ts_context *ctx, const ts_cnn_graph *g, const ts_cnn_plan_opts *opts,
                            bool full) {
  const char *fn = full ? "ts_cnn_net_create" : "cnn conv choice";
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "%s: NULL net pointer", fn);
  *out = NULL;
  TS_TRY(ts_cnn_graph_status(g));
  const ts_cnn_plan_opts o = opts ? *opts : ts_cnn_plan_opts_default();
  if (g->n < 2) return ts_error(TS_ERR_INVALID_ARG, "cnn %s: the graph has no node after its input", g->name);
  if (o.batch < 1 || o.batch > 4096) return ts_error(TS_ERR_INVALID_ARG, "cnn: batch = %d out of range [1, 4096]", o.batch);
  ts_cnn_net *net = calloc(1, sizeof *net);
  if (!net) return ts_error(TS_ERR_OOM, "%s: out of memory", fn);
  net->ctx = ctx, net->g = g, net->batch = o.batch, net->n = g->n;
  net->nodes = calloc((size_t)g->n, sizeof *net->nodes);
  net->convs = malloc((size_t)g->n * sizeof(int));
  ts_status s = !net->nodes || !net->convs ? ts_error(TS_ERR_OOM, "%s: out of memory", fn)
                : full                   ? build(net, &o)
                                         : choose(net, &o, false);
  if (s != TS_OK) {
    ts_cnn_net_destroy(net);
    return s;
  }
  *out = net;
  return TS_OK;
}

ts_status ts_cnn_net_create(ts_cnn_net **out, ts_context *ctx, const ts_cnn_graph *g, const ts_cnn_plan_opts *opts) {
  return net_create(out, ctx, g, opts, true);
}

ts_status ts__cnn_net_choose(ts_cnn_net **out, ts_context *ctx, const ts_cnn_graph *g, const ts_cnn_plan_opts *o) {
  return net_create(out, ctx, g, o, false);
}

/* ---- forward and queries -------------------------------------------------------------------- */

const float *ts__cnn_data(const ts_cnn_net *net, int id) {
  const int s = net->nodes[id].src;
  return net->g->nodes[s].op == TS_CNN_INPUT ? net->input : net->nodes[s].out;
}

ts_status ts_cnn_net_forward(ts_cnn_net *net, const float *in, float *out) {
  if (!net || !in || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_net_forward: NULL argument");
  net->input = in;
  const double t0 = ts_now();
  double conv = 0;
  ts_status s = TS_OK;
  for (int i = 1; s == TS_OK && i < net->n; i++) {
    net_node *nn = &net->nodes[i];
    nn->seconds = 0;
    if (nn->fused) continue;
    const double ti = ts_now();
    if (nn->plan) s = ts_conv_execute(nn->plan, ts__cnn_data(net, net->g->nodes[i].in[0]), nn->out, net->ws);
    else s = ts__cnn_run_node(net, i);
    nn->seconds = ts_now() - ti;
    if (nn->plan) conv += nn->seconds;
    if (s != TS_OK) ts_error_prefix("cnn %s: node '%s': ", net->g->name, net->g->nodes[i].name);
  }
  if (s == TS_OK) memcpy(out, ts__cnn_data(net, net->n - 1), net->nodes[net->n - 1].numel * sizeof(float));
  net->timing.total_s = ts_now() - t0, net->timing.conv_s = conv;
  net->input = NULL;
  return s;
}

size_t ts_cnn_net_input_numel(const ts_cnn_net *net) { return net ? net->nodes[0].numel : 0; }
size_t ts_cnn_net_output_numel(const ts_cnn_net *net) { return net ? net->nodes[net->n - 1].numel : 0; }
size_t ts_cnn_net_arena_bytes(const ts_cnn_net *net) { return net ? net->arena_bytes : 0; }
size_t ts_cnn_net_workspace_bytes(const ts_cnn_net *net) { return net ? net->ws_bytes : 0; }

const float *ts_cnn_net_tensor(const ts_cnn_net *net, int node) {
  if (!net || node <= 0 || node >= net->n) return NULL;
  const net_node *t = &net->nodes[net->nodes[node].src];
  return t->intact ? t->out : NULL;
}

int ts_cnn_net_conv_count(const ts_cnn_net *net) { return net ? net->nconv : 0; }

int ts_cnn_conv_layers(const ts_cnn_graph *g, const ts_cnn_plan_opts *opts, ts_cnn_conv_info *out, int cap) {
  if (ts_cnn_graph_status(g) != TS_OK) return -1;
  const ts_cnn_plan_opts o = opts ? *opts : ts_cnn_plan_opts_default();
  ts_cnn_net net;
  memset(&net, 0, sizeof net);
  net.g = g, net.batch = o.batch, net.n = g->n;
  net.nodes = calloc((size_t)g->n, sizeof *net.nodes);
  if (!net.nodes || fuse(&net, &o) != TS_OK) {
    free(net.nodes);
    ts_error(TS_ERR_OOM, "ts_cnn_conv_layers: out of memory");
    return -1;
  }
  int n = 0;
  for (int i = 0; i < g->n; i++) {
    if (g->nodes[i].op != TS_CNN_CONV) continue;
    if (n < cap && out) {
      memset(&out[n], 0, sizeof out[n]);
      out[n].name = g->nodes[i].name, out[n].node = i, out[n].desc = conv_desc(&net, i), out[n].why = "";
      out[n].bn_folded = net.nodes[i].bn >= 0, out[n].flops = ts_conv_flops(&out[n].desc);
    }
    n++;
  }
  free(net.nodes);
  return n;
}

ts_status ts_cnn_net_conv_info(const ts_cnn_net *net, int i, ts_cnn_conv_info *out) {
  if (!net || !out || i < 0 || i >= net->nconv)
    return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_net_conv_info: index %d out of range (%d convolutions)", i,
                    net ? net->nconv : 0);
  const int id = net->convs[i];
  const net_node *nn = &net->nodes[id];
  out->name = net->g->nodes[id].name, out->node = id, out->desc = nn->desc, out->algo = nn->algo, out->why = nn->why;
  out->bn_folded = nn->bn >= 0;
  out->flops = ts_conv_flops(&nn->desc);
  return TS_OK;
}

void ts_cnn_net_last_timing(const ts_cnn_net *net, ts_cnn_timing *t) {
  if (t) *t = net ? net->timing : (ts_cnn_timing){0, 0};
}

double ts_cnn_net_node_seconds(const ts_cnn_net *net, int node) {
  return net && node >= 0 && node < net->n ? net->nodes[node].seconds : 0;
}
