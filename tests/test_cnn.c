/* CNN graph executor (cnn.h) against naive references.
 *
 *   nodes     a small graph with every node kind (conv with/without bias, BN, ReLU, max/avg
 *             pooling with padding, both avg divisors, concat, residual add, global average
 *             pool, fully connected), planned unfused with the reference convolution and no
 *             memory reuse: every node's tensor is compared with a double-precision reference
 *             computed from the net's own input tensors of that node (so each op is checked on
 *             its own). Tolerances: pooling/concat/ReLU/max are exact (copies and comparisons);
 *             BN, add, avg and GAP round once or twice: 4 u |y| + 4 u A; conv/fc: the summation
 *             bound (L + 2) u A with A = sum |x||w| + |b|.
 *   fusion    BN folded into the convolution and ReLU fused: same output as the unfused net within
 *             1e-5 of max|y| (folding rounds w * g / sqrt(v + eps) once per weight, a relative
 *             change of u per product, plus the summation bound over <= 3 layers of L <= 73).
 *   algos     the whole graph with every algorithm as --algo (selection where it does not apply)
 *             against the reference run: max|y - y_ref| <= 1e-4 max|y_ref| (F(4,3) loses ~13 u
 *             max A per layer, FFT ~2 u, see test_conv.c; six layers in sequence).
 *   memory    reuse on and off give bit-identical outputs.
 *   choice    per-layer overrides (globs), an override that does not apply, unknown algorithm,
 *             auto selection from a profile measured on the fly (a temp file: saved, reopened,
 *             provenance mismatch = stale and empty, malformed = TS_ERR_FORMAT), measure_missing
 *             off = TS_ERR_NOT_FOUND naming the layer.
 *   conv plan the per-layer choice kept in the artifact store (a private TESSERA_CACHE): made
 *             and stored, then a cache hit that is the identical plan (JSON equal); a plan made
 *             with another profile, or with the profile's entries measured again, is not reused;
 *             replan; a corrupt stored file (not JSON; a valid envelope for other layers) is moved
 *             aside (.bad) and planned again, not fatal; other options are another key; a graph
 *             without weights plans; the JSON round trip and the reader's errors.
 *   models    VGG16 / ResNet-101 / Inception-v4 graphs: conv layer counts, output shapes, FLOPs.
 *   errors    the graph builder's sticky errors. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/artifact.h"
#include "tessera/cnn.h"
#include "tst.h"

static const double U = 5.9604644775390625e-08; /* 2^-24 */

/* ---- the test graph ---------------------------------------------------------------------- */

static ts_cnn_graph *small_graph(void) {
  ts_cnn_graph *g = NULL;
  CHECK_OK(ts_cnn_graph_create(&g, "small"));
  int x = ts_cnn_input(g, 3, 13, 11);
  ts_cnn_conv_params p = ts_cnn_conv_params_make(17, 3, 3, 1, 1, 1);
  x = ts_cnn_conv(g, "stem.conv", x, &p);
  x = ts_cnn_bn(g, "stem.bn", x, 1e-3f);
  x = ts_cnn_relu(g, "stem.relu", x);
  ts_cnn_pool_params mp = ts_cnn_pool_params_make(3, 2, 1);
  x = ts_cnn_pool(g, "pool", x, TS_CNN_MAXPOOL, &mp); /* 17 x 7 x 6 */
  p = ts_cnn_conv_params_make(6, 1, 1, 1, 0, 0);
  int a = ts_cnn_conv(g, "branch_a.conv", x, &p);
  a = ts_cnn_bn(g, "branch_a.bn", a, 1e-5f);
  a = ts_cnn_relu(g, "branch_a.relu", a);
  p = ts_cnn_conv_params_make(5, 1, 3, 1, 0, 1);
  p.bias = true;
  int b = ts_cnn_conv(g, "branch_b.conv", x, &p);
  b = ts_cnn_relu(g, "branch_b.relu", b);
  ts_cnn_pool_params ap = ts_cnn_pool_params_make(3, 1, 1);
  ap.count_include_pad = false;
  const int c = ts_cnn_pool(g, "branch_c.pool", x, TS_CNN_AVGPOOL, &ap);
  const int cat_in[3] = {a, b, c};
  const int cat = ts_cnn_concat(g, "concat", 3, cat_in); /* 28 x 7 x 6 */
  p = ts_cnn_conv_params_make(16, 3, 3, 1, 1, 1);
  int y = ts_cnn_conv(g, "res.conv", cat, &p);
  y = ts_cnn_bn(g, "res.bn", y, 1e-5f);
  p = ts_cnn_conv_params_make(16, 1, 1, 1, 0, 0);
  const int sc = ts_cnn_conv(g, "res.shortcut", cat, &p);
  y = ts_cnn_add(g, "res.add", y, sc);
  y = ts_cnn_relu(g, "res.relu", y);
  ap = ts_cnn_pool_params_make(2, 2, 1); /* count_include_pad true: divide by 4 at the border too */
  y = ts_cnn_pool(g, "avg", y, TS_CNN_AVGPOOL, &ap);
  y = ts_cnn_gap(g, "gap", y);
  y = ts_cnn_fc(g, "fc", y, 7);
  CHECK(y > 0, "small graph: %s", ts_last_error());
  CHECK_OK(ts_cnn_graph_status(g));
  CHECK_OK(ts_cnn_graph_init_random(g, 5));
  return g;
}

/* ---- naive reference of one node from the net's input tensors ----------------------------- */

/* y[N * per-image output] and a per-output error bound tol. */
static void ref_node(const ts_cnn_graph *gc, const ts_cnn_net *net, int id, int N, const float *input, double *y,
                     double *tol) {
  ts_cnn_graph *g = (ts_cnn_graph *)gc;
  ts_cnn_node_info nd, xi;
  ts_cnn_graph_node(g, id, &nd);
  ts_cnn_graph_node(g, nd.inputs[0], &xi);
  const float *x = nd.inputs[0] == 0 ? input : ts_cnn_net_tensor(net, nd.inputs[0]);
  const int C = nd.c, H = nd.h, W = nd.w, XC = xi.c, XH = xi.h, XW = xi.w;
  const size_t out = (size_t)C * H * W;
  float *p[4] = {0};
  for (int k = 0; k < 4; k++)
    if (ts_cnn_param(g, id, k, &p[k], NULL) != TS_OK) p[k] = NULL;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) {
          const size_t o = (size_t)n * out + ((size_t)c * H + h) * W + w;
          double v = 0, A = 0;
          const float *xn = x + (size_t)n * XC * XH * XW;
          switch (nd.op) {
            case TS_CNN_CONV: {
              const ts_cnn_conv_params *cp = &nd.conv;
              const int cg = XC / cp->groups, kg = C / cp->groups;
              if (cp->bias) v = p[1][c], A = fabs(v);
              for (int ci = 0; ci < cg; ci++)
                for (int r = 0; r < cp->r; r++)
                  for (int s = 0; s < cp->s; s++) {
                    const int ih = h * cp->stride_h - cp->pad_top + r * cp->dilation_h;
                    const int iw = w * cp->stride_w - cp->pad_left + s * cp->dilation_w;
                    if (ih < 0 || ih >= XH || iw < 0 || iw >= XW) continue;
                    const double t = (double)xn[((size_t)(c / kg * cg + ci) * XH + ih) * XW + iw] *
                                     p[0][(((size_t)c * cg + ci) * cp->r + r) * cp->s + s];
                    v += t, A += fabs(t);
                  }
              A *= (double)cg * cp->r * cp->s + 3;
              break;
            }
            case TS_CNN_BN: {
              const double sc = p[0][c] / sqrt((double)p[3][c] + nd.eps);
              v = (xn[((size_t)c * XH + h) * XW + w] - (double)p[2][c]) * sc + p[1][c];
              A = 4 * fabs(v) + 4 * (fabs(xn[((size_t)c * XH + h) * XW + w] * sc) + fabs(p[1][c] - p[2][c] * sc));
              break;
            }
            case TS_CNN_RELU: v = fmax(xn[((size_t)c * XH + h) * XW + w], 0); break;
            case TS_CNN_MAXPOOL:
            case TS_CNN_AVGPOOL: {
              const ts_cnn_pool_params *pp = &nd.pool;
              double m = -INFINITY, s = 0;
              int cnt = 0;
              for (int r = 0; r < pp->kh; r++)
                for (int q = 0; q < pp->kw; q++) {
                  const int ih = h * pp->stride_h - pp->pad_h + r, iw = w * pp->stride_w - pp->pad_w + q;
                  if (ih < 0 || ih >= XH || iw < 0 || iw >= XW) continue;
                  const double t = xn[((size_t)c * XH + ih) * XW + iw];
                  m = fmax(m, t), s += t, A += fabs(t), cnt++;
                }
              const double div = pp->count_include_pad ? pp->kh * pp->kw : cnt;
              v = nd.op == TS_CNN_MAXPOOL ? m : s / div;
              A = nd.op == TS_CNN_MAXPOOL ? 0 : (pp->kh * pp->kw + 2) * A / div;
              break;
            }
            case TS_CNN_GAP:
              for (int i = 0; i < XH * XW; i++) v += xn[(size_t)c * XH * XW + i], A += fabs(xn[(size_t)c * XH * XW + i]);
              v /= XH * XW, A = 4 * A / (XH * XW);
              break;
            case TS_CNN_ADD: {
              const float *b = ts_cnn_net_tensor(net, nd.inputs[1]) + (size_t)n * out;
              const size_t i = ((size_t)c * H + h) * W + w;
              v = (double)xn[i] + b[i], A = 2 * (fabs(xn[i]) + fabs(b[i]));
              break;
            }
            case TS_CNN_CONCAT: {
              int c0 = 0, k = 0;
              ts_cnn_node_info si;
              for (;; k++) {
                ts_cnn_graph_node(g, nd.inputs[k], &si);
                if (c < c0 + si.c) break;
                c0 += si.c;
              }
              const float *s = nd.inputs[k] == 0 ? input : ts_cnn_net_tensor(net, nd.inputs[k]);
              v = s[(size_t)n * si.c * H * W + ((size_t)(c - c0) * H + h) * W + w];
              break;
            }
            case TS_CNN_FC: {
              const size_t in = (size_t)XC * XH * XW;
              v = p[1][c], A = fabs(v);
              for (size_t i = 0; i < in; i++) {
                const double t = (double)xn[i] * p[0][(size_t)c * in + i];
                v += t, A += fabs(t);
              }
              A *= (double)in + 3;
              break;
            }
            default: break;
          }
          y[o] = v, tol[o] = U * A + 1e-30;
        }
}

static float *random_input(const ts_cnn_net *net, uint64_t seed) {
  const size_t n = ts_cnn_net_input_numel(net);
  float *x = malloc(n * sizeof(float));
  tst_fill_uniform(x, n, seed, -1, 1);
  return x;
}

static void test_nodes(ts_context *ctx) {
  ts_cnn_graph *g = small_graph();
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.batch = 2, o.algo = TS_CONV_REFERENCE, o.fold_bn = o.fuse_relu = o.reuse_memory = false;
  ts_cnn_net *net = NULL;
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, &o));
  if (!net) return;
  float *x = random_input(net, 11);
  const size_t no = ts_cnn_net_output_numel(net);
  CHECK(no == 2 * 7, "output numel %zu", no);
  float *y = tst_alloc_guarded(no);
  tst_poison(y, no);
  CHECK_OK(ts_cnn_net_forward(net, x, y));
  CHECK(tst_guard_ok(y, no), "forward wrote past the output");
  CHECK(ts_cnn_net_conv_count(net) == 5, "conv count %d", ts_cnn_net_conv_count(net));
  int kinds = 0;
  for (int id = 1; id < ts_cnn_graph_size(g); id++) {
    ts_cnn_node_info nd;
    ts_cnn_graph_node(g, id, &nd);
    const float *t = ts_cnn_net_tensor(net, id);
    CHECK(t != NULL, "node %s: tensor not readable without reuse", nd.name);
    if (!t) continue;
    const size_t n = (size_t)2 * nd.c * nd.h * nd.w;
    double *r = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));
    ref_node(g, net, id, 2, x, r, tol);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
      if (!(fabs(t[i] - r[i]) <= tol[i])) bad = i;
    CHECK(bad == n, "node %s (%s): element %zu = %.9g, expected %.9g (tol %.3g)", nd.name, ts_cnn_op_name(nd.op), bad,
          bad < n ? t[bad] : 0.0f, bad < n ? r[bad] : 0.0, bad < n ? tol[bad] : 0.0);
    kinds |= 1 << nd.op;
    free(r), free(tol);
  }
  CHECK(kinds == ((1 << TS_CNN_OP_COUNT) - 2), "every node kind but the input covered: %x", kinds);
  const float *last = ts_cnn_net_tensor(net, ts_cnn_graph_size(g) - 1);
  CHECK(last && !memcmp(last, y, no * sizeof(float)), "output = last tensor");
  ts_cnn_timing tm;
  ts_cnn_net_last_timing(net, &tm);
  CHECK(tm.total_s > 0 && tm.conv_s > 0 && tm.conv_s <= tm.total_s, "timing %g %g", tm.total_s, tm.conv_s);
  free(x);
  ts_free(y);
  ts_cnn_net_destroy(net);
  ts_cnn_graph_destroy(g);
}

/* ---- whole-graph comparisons --------------------------------------------------------------- */

/* Output of g under o (input seeded 21), malloc'ed; NULL on failure. */
static float *run_net(ts_context *ctx, const ts_cnn_graph *g, const ts_cnn_plan_opts *o, size_t *n) {
  ts_cnn_net *net = NULL;
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, o));
  if (!net) return NULL;
  float *x = random_input(net, 21);
  *n = ts_cnn_net_output_numel(net);
  float *y = malloc(*n * sizeof(float));
  tst_poison(y, *n);
  CHECK_OK(ts_cnn_net_forward(net, x, y));
  CHECK_OK(ts_cnn_net_forward(net, x, y)); /* twice: forward can be repeated */
  free(x);
  ts_cnn_net_destroy(net);
  return y;
}

static double rel_err(const float *y, const float *r, size_t n) {
  double e = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)y[i] - r[i]);
    e = d > e || d != d ? d : e;
    m = fmax(m, fabs(r[i]));
  }
  return m > 0 ? e / m : e;
}

static void test_fusion_algos_memory(ts_context *ctx) {
  ts_cnn_graph *g = small_graph();
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.batch = 3, o.algo = TS_CONV_REFERENCE, o.fold_bn = o.fuse_relu = false;
  size_t n, n2;
  float *ref = run_net(ctx, g, &o, &n);
  o.fold_bn = o.fuse_relu = true;
  float *fused = run_net(ctx, g, &o, &n2);
  if (ref && fused) CHECK(rel_err(fused, ref, n) <= 1e-5, "BN folding / ReLU fusion: rel err %.3g", rel_err(fused, ref, n));
  free(fused);
  /* the folded layers as the net plans them */
  ts_cnn_conv_info li[8];
  CHECK(ts_cnn_conv_layers(g, &o, li, 8) == 5, "conv layers");
  CHECK(li[0].bn_folded && li[0].desc.relu && li[0].desc.n == 3, "stem: folded + relu, batch 3");
  CHECK(li[2].desc.relu && !li[2].bn_folded, "branch_b: relu, no bn");
  CHECK(li[3].bn_folded && !li[3].desc.relu, "res.conv: bn folded, relu after the add");
  for (int a = TS_CONV_DIRECT; a < TS_CONV_ALGO_COUNT; a++) {
    o.algo = a;
    o.candidates = 1u << TS_CONV_DIRECT; /* selection for the layers `a` does not apply to */
    o.measure_missing = true;
    o.progress = false;
    o.time.warmup = 0, o.time.repeats = 1, o.time.min_time_s = 0;
    ts_conv_profile *prof = NULL;
    char path[1100];
    unlink(tst_tmp_path(path, sizeof path, "cnn_algo_profile.json"));
    CHECK_OK(ts_conv_profile_open(&prof, ctx, path, NULL));
    o.profile = prof;
    float *y = run_net(ctx, g, &o, &n2);
    if (ref && y) CHECK(rel_err(y, ref, n) <= 1e-4, "--algo %s: rel err %.3g", ts_conv_algo_name(a), rel_err(y, ref, n));
    free(y);
    ts_conv_profile_destroy(prof);
    unlink(path);
  }
  o = ts_cnn_plan_opts_default();
  o.batch = 2, o.algo = TS_CONV_DIRECT;
  float *y1 = run_net(ctx, g, &o, &n);
  o.reuse_memory = false;
  float *y2 = run_net(ctx, g, &o, &n2);
  CHECK(y1 && y2 && n == n2 && !memcmp(y1, y2, n * sizeof(float)), "memory reuse changes the output");
  free(y1), free(y2), free(ref);
  ts_cnn_graph_destroy(g);
}

/* ---- algorithm choice ---------------------------------------------------------------------- */

static void test_choice(ts_context *ctx) {
  ts_cnn_graph *g = small_graph();
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.algo = TS_CONV_IM2COL;
  o.overrides = "branch_*=direct,res.conv=winograd_f2,*=kn2row";
  ts_cnn_net *net = NULL;
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, &o));
  static const ts_conv_algo want[5] = {TS_CONV_KN2ROW, TS_CONV_DIRECT, TS_CONV_DIRECT, TS_CONV_WINOGRAD_F2, TS_CONV_KN2ROW};
  for (int i = 0; net && i < 5; i++) {
    ts_cnn_conv_info ci;
    CHECK_OK(ts_cnn_net_conv_info(net, i, &ci));
    CHECK(ci.algo == want[i], "layer %s: %s, expected %s", ci.name, ts_conv_algo_name(ci.algo), ts_conv_algo_name(want[i]));
    CHECK(strstr(ci.why, "override") == ci.why, "layer %s why: %s", ci.name, ci.why);
  }
  ts_cnn_net_destroy(net), net = NULL;
  o.overrides = "stem.*=fft";
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, &o));
  ts_cnn_conv_info ci;
  CHECK_OK(ts_cnn_net_conv_info(net, 1, &ci));
  CHECK(ci.algo == TS_CONV_IM2COL && !strcmp(ci.why, "--algo im2col"), "global algo: %s (%s)", ts_conv_algo_name(ci.algo), ci.why);
  ts_cnn_net_destroy(net), net = NULL;
  o.overrides = "branch_b.conv=winograd_f4";
  CHECK_ERR_CONTAINS(ts_cnn_net_create(&net, ctx, g, &o), "layer 'branch_b.conv' (override branch_b.conv=winograd_f4)");
  CHECK(net == NULL, "net left set on failure");
  o.overrides = "stem.conv=magic";
  CHECK_ERR_CONTAINS(ts_cnn_net_create(&net, ctx, g, &o), "unknown convolution algorithm 'magic'");
  o.overrides = "stem.conv";
  CHECK_ERR_CONTAINS(ts_cnn_net_create(&net, ctx, g, &o), "is not PATTERN=ALGORITHM");

  /* auto selection from a profile measured now */
  char path[1100];
  tst_tmp_path(path, sizeof path, "cnn_profile.json");
  unlink(path);
  ts_conv_profile *prof = NULL;
  bool stale = true;
  CHECK_OK(ts_conv_profile_open(&prof, ctx, path, &stale));
  CHECK(!stale && ts_conv_profile_size(prof) == 0, "new profile");
  o = ts_cnn_plan_opts_default();
  o.profile = prof, o.measure_missing = false;
  CHECK_ERR_CONTAINS(ts_cnn_net_create(&net, ctx, g, &o), "(first: 'stem.conv') are not in the profile");
  o.measure_missing = true, o.progress = false;
  o.time.warmup = 1, o.time.repeats = 1, o.time.min_time_s = 0;
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, &o));
  CHECK(ts_conv_profile_size(prof) == 5, "5 distinct shapes measured, got %d", ts_conv_profile_size(prof));
  for (int i = 0; net && i < 5; i++) {
    CHECK_OK(ts_cnn_net_conv_info(net, i, &ci));
    CHECK(strstr(ci.why, "fastest of") || strstr(ci.why, "the only measured"), "layer %s why: %s", ci.name, ci.why);
    ts_conv_profile_entry e;
    CHECK(ts_conv_profile_get(prof, &ci.desc, &e), "entry for %s", ci.name);
    CHECK(isnan(e.ms[TS_CONV_REFERENCE]), "reference is never a candidate");
    for (int a = 0; a < TS_CONV_ALGO_COUNT; a++)
      CHECK(isnan(e.ms[a]) || e.ms[ci.algo] <= e.ms[a], "%s: chosen %s is not the fastest", ci.name, ts_conv_algo_name(ci.algo));
  }
  ts_cnn_net_destroy(net), net = NULL;
  CHECK_OK(ts_conv_profile_save(prof));
  ts_conv_profile *again = NULL;
  CHECK_OK(ts_conv_profile_open(&again, ctx, path, &stale));
  CHECK(!stale && ts_conv_profile_size(again) == 5, "reopened profile: %d entries", ts_conv_profile_size(again));
  o.profile = again, o.measure_missing = false;
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, &o)); /* everything from the file */
  ts_cnn_net_destroy(net), net = NULL;
  ts_conv_profile_destroy(again);
  ts_conv_profile_destroy(prof);
  /* another thread count: measured elsewhere -> stale, empty */
  ts_context *one = NULL;
  CHECK_OK(ts_context_create(&one, 1));
  if (ts_context_threads(ctx) != 1) {
    CHECK_OK(ts_conv_profile_open(&prof, one, path, &stale));
    CHECK(stale && ts_conv_profile_size(prof) == 0, "profile of another thread count is stale");
    ts_conv_profile_destroy(prof);
  }
  ts_context_destroy(one);
  FILE *f = fopen(path, "w");
  fputs("{\"format\": \"tessera-conv-profile\", \"version\": 1, \"provenance\": {}, \"entries\": 5}", f);
  fclose(f);
  CHECK_STATUS(ts_conv_profile_open(&prof, ctx, path, NULL), TS_ERR_FORMAT);
  unlink(path);

  /* the default: a "conv-profile" artifact keyed by kernels and threads; a payload its reader
   * rejects is moved aside (<file>.bad) and the profile starts empty, never fatal */
  CHECK_OK(ts_conv_profile_open(&prof, ctx, NULL, &stale));
  char swant[64], bad[4500];
  snprintf(swant, sizeof swant, "/conv-profile/%s-t%d.json", ts_isa_name(ts_isa_active()), ts_context_threads(ctx));
  const char *sp = ts_conv_profile_path(prof);
  CHECK(strlen(sp) > strlen(swant) && !strcmp(sp + strlen(sp) - strlen(swant), swant), "store path %s", sp);
  ts_conv_profile_entry e1;
  memset(&e1, 0, sizeof e1);
  for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) e1.ms[a] = NAN;
  e1.ms[TS_CONV_DIRECT] = 1.5, e1.load_avg = -1;
  snprintf(e1.date, sizeof e1.date, "2026-01-01T00:00:00Z");
  ts_conv_desc d1 = ts_conv_desc_make(1, 3, 9, 9, 4, 3, 3);
  CHECK_OK(ts_conv_profile_put(prof, &d1, &e1));
  CHECK_OK(ts_conv_profile_save(prof));
  char spath[4400];
  snprintf(spath, sizeof spath, "%s", sp);
  ts_conv_profile_destroy(prof);
  CHECK_OK(ts_conv_profile_open(&prof, ctx, NULL, &stale));
  CHECK(!stale && ts_conv_profile_size(prof) == 1 && ts_conv_profile_get(prof, &d1, &e1) && e1.ms[TS_CONV_DIRECT] == 1.5,
        "stored profile read back: %d entries", ts_conv_profile_size(prof));
  ts_conv_profile_destroy(prof);
  char *text = NULL;
  size_t tl = 0;
  CHECK_OK(ts_read_file(spath, &text, &tl));
  char *at = text ? strstr(text, "\"entries\"") : NULL;
  if (at) memcpy(at, "\"entrieZ\"", 9); /* a valid envelope whose data lacks its entries */
  if (text) CHECK_OK(ts_write_file_atomic(spath, text, tl));
  free(text);
  snprintf(bad, sizeof bad, "%s.bad", spath);
  unlink(bad);
  CHECK_OK(ts_conv_profile_open(&prof, ctx, NULL, &stale));
  CHECK(ts_conv_profile_size(prof) == 0 && access(bad, F_OK) == 0, "rejected stored profile moved aside");
  ts_conv_profile_destroy(prof);
  unlink(bad);
  ts_cnn_graph_destroy(g);
}

/* ---- the conv plan: the artifact store's get() ------------------------------------------------ */

/* A profile at path (made anew) with an entry for every layer of g: `fast` 1 ms, `slow` 2 ms. */
static ts_conv_profile *fake_profile(ts_context *ctx, const ts_cnn_graph *g, const char *path, ts_conv_algo fast,
                                     ts_conv_algo slow) {
  unlink(path);
  ts_conv_profile *p = NULL;
  CHECK_OK(ts_conv_profile_open(&p, ctx, path, NULL));
  ts_cnn_conv_info ls[8];
  const int n = ts_cnn_conv_layers(g, NULL, ls, 8);
  for (int i = 0; p && i < n; i++) {
    ts_conv_profile_entry e;
    memset(&e, 0, sizeof e);
    for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) e.ms[a] = NAN;
    e.ms[fast] = 1, e.ms[slow] = 2, e.load_avg = -1;
    snprintf(e.date, sizeof e.date, "2026-01-01T00:00:00Z");
    CHECK_OK(ts_conv_profile_put(p, &ls[i].desc, &e));
  }
  return p;
}

/* Two descriptors, field by field (padding bytes are no part of the value). */
static bool desc_eq(const ts_conv_desc *a, const ts_conv_desc *b) {
  return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k && a->r == b->r && a->s == b->s &&
         a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_top == b->pad_top &&
         a->pad_bottom == b->pad_bottom && a->pad_left == b->pad_left && a->pad_right == b->pad_right &&
         a->dilation_h == b->dilation_h && a->dilation_w == b->dilation_w && a->groups == b->groups && a->relu == b->relu;
}

/* Both plans' JSON, equal (and every layer's choice, field by field). */
static bool same_plan(const ts_cnn_conv_plan *a, const ts_cnn_conv_plan *b) {
  char *ja = NULL, *jb = NULL;
  bool same = ts_cnn_conv_plan_to_json(a, &ja) == TS_OK && ts_cnn_conv_plan_to_json(b, &jb) == TS_OK && !strcmp(ja, jb) &&
              ts_cnn_conv_plan_count(a) == ts_cnn_conv_plan_count(b);
  for (int i = 0; same && i < ts_cnn_conv_plan_count(a); i++) {
    ts_cnn_conv_info x, y;
    same = ts_cnn_conv_plan_layer(a, i, &x) == TS_OK && ts_cnn_conv_plan_layer(b, i, &y) == TS_OK &&
           !strcmp(x.name, y.name) && x.node == y.node && x.algo == y.algo && !strcmp(x.why, y.why) &&
           desc_eq(&x.desc, &y.desc) && x.bn_folded == y.bn_folded;
  }
  free(ja), free(jb);
  return same;
}

/* Replaces the nth (0-based) occurrence of `from` in s by `to` (same length) in place. */
static bool patch(char *s, const char *from, const char *to, int nth) {
  char *at = s;
  for (int i = 0; at && (at = strstr(at, from)) && i < nth; i++) at += strlen(from);
  if (!at || strlen(from) != strlen(to)) return false;
  memcpy(at, to, strlen(to));
  return true;
}

static void rewrite(const char *path, const char *from, const char *to) {
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ts_read_file(path, &text, &len));
  CHECK(text && patch(text, from, to, 0), "%s: no '%s' to replace", path, from);
  if (text) CHECK_OK(ts_write_file_atomic(path, text, len));
  free(text);
}

static void test_conv_plan(ts_context *ctx) {
  char cache[1100], saved[4096] = "", pa[1100], pb[1100];
  const char *was = getenv("TESSERA_CACHE");
  if (was) snprintf(saved, sizeof saved, "%s", was);
  tst_tmp_path(cache, sizeof cache, "cnn_plan_cache");
  tst_tmp_path(pa, sizeof pa, "cnn_plan_profile_a.json");
  tst_tmp_path(pb, sizeof pb, "cnn_plan_profile_b.json");
  setenv("TESSERA_CACHE", cache, 1);
  CHECK_OK(ts_artifact_clear("conv-plan", NULL));
  ts_cnn_graph *g = small_graph();
  ts_conv_profile *A = fake_profile(ctx, g, pa, TS_CONV_DIRECT, TS_CONV_IM2COL);
  ts_conv_profile *B = fake_profile(ctx, g, pb, TS_CONV_IM2COL, TS_CONV_DIRECT);
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.profile = A, o.measure_missing = false, o.progress = false; /* nothing is measured here */
  ts_cnn_conv_info ls[8], ci;
  const int n = ts_cnn_conv_layers(g, &o, ls, 8);

  /* made now and stored */
  ts_cnn_conv_plan *p1 = NULL, *p = NULL;
  CHECK_OK(ts_cnn_conv_plan_create(&p1, ctx, g, &o));
  if (!p1) goto out;
  const char *path = ts_cnn_conv_plan_path(p1);
  char want[64], bad[4500];
  snprintf(want, sizeof want, "/conv-plan/%s.json", ts_cnn_conv_plan_key(p1));
  CHECK(!ts_cnn_conv_plan_cached(p1) && ts_cnn_conv_plan_count(p1) == n && n == 5, "first plan: cached %d, %d layers",
        ts_cnn_conv_plan_cached(p1), ts_cnn_conv_plan_count(p1));
  CHECK(strlen(path) > strlen(want) && !strcmp(path + strlen(path) - strlen(want), want) && access(path, F_OK) == 0,
        "stored at %s", path);
  snprintf(bad, sizeof bad, "%s.bad", path);
  for (int i = 0; i < n; i++) {
    CHECK_OK(ts_cnn_conv_plan_layer(p1, i, &ci));
    CHECK(!strcmp(ci.name, ls[i].name) && ci.node == ls[i].node && desc_eq(&ci.desc, &ls[i].desc) &&
              ci.algo == TS_CONV_DIRECT && strstr(ci.why, "fastest of 2 measured") == ci.why,
          "layer %d: %s %s (%s)", i, ci.name, ts_conv_algo_name(ci.algo), ci.why);
  }
  CHECK_STATUS(ts_cnn_conv_plan_layer(p1, n, &ci), TS_ERR_INVALID_ARG);
  char *data = NULL;
  ts_provenance pv;
  CHECK_OK(ts_artifact_load("conv-plan", TS_CNN_CONV_PLAN_VERSION, ts_cnn_conv_plan_key(p1), &data, &pv));
  CHECK(pv.threads == ts_context_threads(ctx) && pv.cpu_model[0], "stored provenance: %d threads", pv.threads);
  free(data);

  /* a cache hit returns the identical plan */
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(ts_cnn_conv_plan_cached(p) && same_plan(p1, p) && !strcmp(ts_cnn_conv_plan_path(p), path),
        "second create: cached %d, same plan", ts_cnn_conv_plan_cached(p));
  ts_cnn_conv_plan_destroy(p), p = NULL;

  /* another profile: not reused (chosen again, and it replaces the stored plan); then back */
  o.profile = B;
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && !strcmp(ts_cnn_conv_plan_key(p), ts_cnn_conv_plan_key(p1)) &&
            ts_cnn_conv_plan_layer(p, 0, &ci) == TS_OK && ci.algo == TS_CONV_IM2COL,
        "plan with profile B: cached %d, %s", ts_cnn_conv_plan_cached(p), ts_conv_algo_name(ci.algo));
  ts_cnn_conv_plan_destroy(p), p = NULL;
  o.profile = A;
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && same_plan(p1, p), "B's plan reused for A");
  ts_cnn_conv_plan_destroy(p), p = NULL;

  /* replan: chosen again although stored */
  o.replan = true;
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && same_plan(p1, p), "replan");
  ts_cnn_conv_plan_destroy(p), p = NULL;
  o.replan = false;

  /* corrupt stored files: moved aside and planned again, never fatal */
  FILE *f = fopen(path, "w");
  if (f) fputs("{not json", f), fclose(f);
  unlink(bad);
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && same_plan(p1, p) && access(bad, F_OK) == 0 && access(path, F_OK) == 0,
        "a stored plan that is not JSON: moved aside, planned again");
  ts_cnn_conv_plan_destroy(p), p = NULL;
  unlink(bad);
  rewrite(path, "\"branch_a.conv\"", "\"branch_z.conv\""); /* a valid envelope for other layers */
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && same_plan(p1, p) && access(bad, F_OK) == 0,
        "a stored plan for other layers: moved aside, planned again");
  ts_cnn_conv_plan_destroy(p), p = NULL;
  unlink(bad);
  rewrite(path, "\"direct\"", "\"winogr\""); /* an algorithm name the reader rejects */
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && same_plan(p1, p) && access(bad, F_OK) == 0, "a bad algorithm: moved aside");
  ts_cnn_conv_plan_destroy(p), p = NULL;
  unlink(bad);

  /* the profile's entries measured again: the stamp changed, planned again */
  ts_conv_profile_entry e;
  CHECK(ts_conv_profile_get(A, &ls[1].desc, &e), "entry of %s", ls[1].name);
  e.ms[TS_CONV_DIRECT] = 1.25;
  CHECK_OK(ts_conv_profile_put(A, &ls[1].desc, &e));
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p), "a re-measured profile entry: planned again");
  ts_cnn_conv_plan_destroy(p), p = NULL;

  /* other options: another key */
  o.algo = TS_CONV_IM2COL;
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  CHECK(p && !ts_cnn_conv_plan_cached(p) && strcmp(ts_cnn_conv_plan_key(p), ts_cnn_conv_plan_key(p1)) &&
            ts_cnn_conv_plan_layer(p, 2, &ci) == TS_OK && ci.algo == TS_CONV_IM2COL && !strcmp(ci.why, "--algo im2col"),
        "--algo im2col: another key, %s", ci.why);
  ts_cnn_conv_plan_destroy(p), p = NULL;
  o.algo = TS_CNN_AUTO;

  /* a graph without weights plans (the choice needs none) */
  ts_cnn_graph *vgg = NULL;
  CHECK_OK(ts_cnn_model_create(&vgg, "vgg16", 32));
  ts_cnn_plan_opts ov = o;
  ov.algo = TS_CONV_DIRECT;
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, vgg, &ov));
  CHECK(p && ts_cnn_conv_plan_count(p) == 13, "vgg16 without weights: %d layers", ts_cnn_conv_plan_count(p));
  ts_cnn_conv_plan_destroy(p), p = NULL;
  ts_cnn_graph_destroy(vgg);

  /* JSON: the round trip, and the reader's errors */
  char *j = NULL;
  CHECK_OK(ts_cnn_conv_plan_to_json(p1, &j));
  CHECK_OK(ts_cnn_conv_plan_from_json(&p, j));
  CHECK(p && same_plan(p1, p) && !ts_cnn_conv_plan_cached(p) && !ts_cnn_conv_plan_path(p)[0] &&
            !strcmp(ts_cnn_conv_plan_key(p), ts_cnn_conv_plan_key(p1)),
        "JSON round trip");
  ts_cnn_conv_plan_destroy(p), p = NULL;
  char *j2 = j ? malloc(strlen(j) + 16) : NULL;
  if (j2) { /* branch_a.conv is 1x1: winograd_f2 does not apply */
    char *at = strstr(j, "\"branch_a.conv\""), *al = at ? strstr(at, "\"algo\":\"direct\"") : NULL;
    if (al) snprintf(j2, strlen(j) + 16, "%.*s\"algo\":\"winograd_f2\"%s", (int)(al - j), j, al + strlen("\"algo\":\"direct\""));
    if (al) CHECK_ERR_CONTAINS(ts_cnn_conv_plan_from_json(&p, j2), "conv plan: layers[1]: winograd_f2");
    CHECK(p == NULL, "plan left set on failure");
  }
  free(j2), free(j);
  CHECK_STATUS(ts_cnn_conv_plan_from_json(&p, "{not json"), TS_ERR_FORMAT);
  CHECK_ERR_CONTAINS(ts_cnn_conv_plan_from_json(&p, "[1]"), "expected an object");
  CHECK_ERR_CONTAINS(ts_cnn_conv_plan_from_json(&p, "{\"format\": \"tessera-conv-plan\"}"), "'model'");
  CHECK_STATUS(ts_cnn_conv_plan_create(NULL, ctx, g, &o), TS_ERR_INVALID_ARG);

out:
  ts_cnn_conv_plan_destroy(p1);
  ts_conv_profile_destroy(A);
  ts_conv_profile_destroy(B);
  ts_cnn_graph_destroy(g);
  unlink(pa), unlink(pb);
  if (saved[0]) setenv("TESSERA_CACHE", saved, 1);
  else unsetenv("TESSERA_CACHE");
}

/* ---- models and builder errors ---------------------------------------------------------- */

static void test_models(void) {
  static const struct { const char *name; int convs, out; double gflop; } m[] = {
      {"vgg16", 13, 1000, 30.69}, {"resnet101", 104, 1000, 15.60}, {"inception-v4", 149, 1000, 24.50}};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
    ts_cnn_graph *g = NULL;
    CHECK_OK(ts_cnn_model_create(&g, m[i].name, 0));
    if (!g) continue;
    const int n = ts_cnn_conv_layers(g, NULL, NULL, 0);
    ts_cnn_conv_info *li = calloc((size_t)n, sizeof *li);
    ts_cnn_conv_layers(g, NULL, li, n);
    double gf = 0;
    for (int k = 0; k < n; k++) gf += li[k].flops * 1e-9;
    ts_cnn_node_info last;
    ts_cnn_graph_node(g, ts_cnn_graph_size(g) - 1, &last);
    CHECK(n == m[i].convs && last.c == m[i].out && last.h == 1 && fabs(gf - m[i].gflop) < 0.01,
          "%s: %d convs, output %d, %.2f GFLOP", m[i].name, n, last.c, gf);
    free(li);
    ts_cnn_graph_destroy(g);
  }
  ts_cnn_graph *g = NULL;
  CHECK_OK(ts_cnn_model_create(&g, "inception-v4", 0));
  const int id = ts_cnn_graph_find(g, "inception_c2.concat");
  ts_cnn_node_info nd;
  CHECK(id > 0 && ts_cnn_graph_node(g, id, &nd) == TS_OK && nd.c == 1536 && nd.h == 8 && nd.w == 8,
        "Inception-C output 1536 x 8 x 8");
  ts_cnn_graph_destroy(g);
  CHECK_ERR_CONTAINS(ts_cnn_model_create(&g, "alexnet", 0), "unknown model 'alexnet'");
}

static void test_builder_errors(ts_context *ctx) {
  ts_cnn_graph *g = NULL;
  CHECK_OK(ts_cnn_graph_create(&g, "bad"));
  const int x = ts_cnn_input(g, 4, 8, 8);
  const ts_cnn_conv_params p = ts_cnn_conv_params_make(4, 3, 3, 1, 1, 1);
  CHECK(ts_cnn_conv(g, "c", x, &p) == 1, "first conv");
  CHECK(ts_cnn_conv(g, "c", x, &p) == -1, "duplicate name");
  CHECK_ERR_CONTAINS(ts_cnn_graph_status(g), "node 'c': duplicate name");
  CHECK(ts_cnn_relu(g, "r", x) == -1, "sticky: later calls fail too");
  ts_cnn_graph_destroy(g);

  CHECK_OK(ts_cnn_graph_create(&g, "bad2"));
  ts_cnn_input(g, 4, 8, 8);
  CHECK(ts_cnn_relu(g, "r", 7) == -1, "input id out of range");
  CHECK_ERR_CONTAINS(ts_cnn_graph_status(g), "input 0 is node 7");
  ts_cnn_graph_destroy(g);

  CHECK_OK(ts_cnn_graph_create(&g, "bad3"));
  int in = ts_cnn_input(g, 4, 8, 8);
  ts_cnn_pool_params mp = ts_cnn_pool_params_make(2, 2, 0);
  const int pooled = ts_cnn_pool(g, "p", in, TS_CNN_MAXPOOL, &mp);
  const int two[2] = {in, pooled};
  CHECK(ts_cnn_concat(g, "cat", 2, two) == -1, "concat of 8x8 and 4x4");
  CHECK_ERR_CONTAINS(ts_cnn_graph_status(g), "input 1 ('p') is 4x4, input 0 is 8x8");
  ts_cnn_graph_destroy(g);

  CHECK_OK(ts_cnn_graph_create(&g, "bad4"));
  in = ts_cnn_input(g, 4, 8, 8);
  const ts_cnn_conv_params p8 = ts_cnn_conv_params_make(8, 1, 1, 1, 0, 0);
  const int c8 = ts_cnn_conv(g, "c8", in, &p8);
  CHECK(ts_cnn_add(g, "add", in, c8) == -1, "add of 4 and 8 channels");
  CHECK_ERR_CONTAINS(ts_cnn_graph_status(g), "'input' is 4x8x8, 'c8' is 8x8x8");
  ts_cnn_graph_destroy(g);

  CHECK_OK(ts_cnn_graph_create(&g, "bad5"));
  in = ts_cnn_input(g, 4, 8, 8);
  const ts_cnn_conv_params big = ts_cnn_conv_params_make(4, 11, 11, 1, 0, 0);
  CHECK(ts_cnn_conv(g, "huge", in, &big) == -1, "kernel larger than the input");
  CHECK_ERR_CONTAINS(ts_cnn_graph_status(g), "exceeds the padded input");
  ts_cnn_graph_destroy(g);

  /* a graph without parameters cannot be planned */
  CHECK_OK(ts_cnn_graph_create(&g, "noparams"));
  in = ts_cnn_input(g, 4, 8, 8);
  ts_cnn_conv(g, "c", in, &p);
  ts_cnn_net *net = NULL;
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.algo = TS_CONV_DIRECT;
  float *w;
  CHECK_OK(ts_cnn_param(g, 1, 0, &w, NULL)); /* zeros now: plannable */
  CHECK_OK(ts_cnn_net_create(&net, ctx, g, &o));
  ts_cnn_net_destroy(net), net = NULL;
  CHECK_STATUS(ts_cnn_param(g, 1, 1, &w, NULL), TS_ERR_INVALID_ARG); /* no bias on this conv */
  o.batch = 0;
  CHECK_ERR_CONTAINS(ts_cnn_net_create(&net, ctx, g, &o), "batch = 0");
  ts_cnn_graph_destroy(g);
}

int main(int argc, char **argv) {
  /* spin-waiting OpenMP threads make this 30x slower on a loaded machine: passive unless chosen */
  char self[4096];
  const ssize_t len = getenv("OMP_WAIT_POLICY") ? -1 : readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0 && argc > 0) {
    self[len] = 0;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv(self, argv);
  }
  /* run by hand (outside ctest, which points TESSERA_CACHE at the build tree's test cache), the
   * profile tests would read, move aside and replace the user's own conv profile: a private cache */
  char priv[] = "/tmp/tessera-test-cnn-XXXXXX";
  if (!getenv("TESSERA_CACHE") && mkdtemp(priv)) setenv("TESSERA_CACHE", priv, 1);
  ts_context *ctx = NULL;
  CHECK_OK(ts_context_create(&ctx, 2));
  test_nodes(ctx);
  test_fusion_algos_memory(ctx);
  test_choice(ctx);
  test_conv_plan(ctx);
  test_models();
  test_builder_errors(ctx);
  ts_context_destroy(ctx);
  return tst_finish();
}
