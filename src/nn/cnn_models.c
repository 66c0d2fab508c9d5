/* Model zoo (cnn.h): VGG16 (Simonyan & Zisserman 2015, configuration D), ResNet-50/101/152 v1.5
 * (He et al. 2016; stride on the 3x3 convolution of a bottleneck, as torchvision), Inception-v4
 * (Szegedy et al. 2017: stem, 4 x Inception-A, Reduction-A, 7 x Inception-B, Reduction-B,
 * 3 x Inception-C; the layer shapes of the widely used PyTorch port, BatchNorm eps 1e-3).
 * Layer names follow the PyTorch modules ("features.conv3_2", "layer3.5.conv2",
 * "mixed_5b.branch1.1") so per-layer overrides can name them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn/cnn_internal.h"

/* Name buffers are wider than TS_CNN_NAME_MAX: a name that does not fit is reported by the graph. */
enum { NAMEBUF = 128 };

typedef struct builder {
  ts_cnn_graph *g;
  char prefix[48];
} builder;

static const char *nm(const builder *b, char *buf, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const char *nm(const builder *b, char *buf, const char *fmt, ...) {
  char tail[TS_CNN_NAME_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tail, sizeof tail, fmt, ap);
  va_end(ap);
  snprintf(buf, NAMEBUF, "%s%s%s", b->prefix, b->prefix[0] ? "." : "", tail);
  return buf;
}

/* conv (no bias) + BN + ReLU, PyTorch's BasicConv2d / conv-bn-relu; the conv is called NAME, the
 * BN NAME.bn, the ReLU NAME.relu. relu = 0 leaves the ReLU out (last conv of a bottleneck). */
static int cbr(const builder *b, const char *name, int x, int k, int r, int s, int stride, int ph, int pw, float eps,
               int relu) {
  char n1[NAMEBUF], n2[NAMEBUF], n3[NAMEBUF];
  const ts_cnn_conv_params p = ts_cnn_conv_params_make(k, r, s, stride, ph, pw);
  x = ts_cnn_conv(b->g, nm(b, n1, "%s", name), x, &p);
  x = ts_cnn_bn(b->g, nm(b, n2, "%s.bn", name), x, eps);
  return relu ? ts_cnn_relu(b->g, nm(b, n3, "%s.relu", name), x) : x;
}

static int pool(const builder *b, const char *name, int x, ts_cnn_op kind, int k, int stride, int pad) {
  char n[NAMEBUF];
  ts_cnn_pool_params p = ts_cnn_pool_params_make(k, stride, pad);
  p.count_include_pad = false; /* PyTorch ports of Inception use count_include_pad=False */
  return ts_cnn_pool(b->g, nm(b, n, "%s", name), x, kind, &p);
}

/* ---- VGG16 ---------------------------------------------------------------------------------- */

static void vgg16(ts_cnn_graph *g, int res) {
  static const int widths[5] = {64, 128, 256, 512, 512}, depth[5] = {2, 2, 3, 3, 3};
  builder b = {g, "features"};
  char n[NAMEBUF];
  int x = ts_cnn_input(g, 3, res, res);
  for (int st = 0; st < 5; st++) {
    for (int i = 0; i < depth[st]; i++) {
      ts_cnn_conv_params p = ts_cnn_conv_params_make(widths[st], 3, 3, 1, 1, 1);
      p.bias = true;
      x = ts_cnn_conv(g, nm(&b, n, "conv%d_%d", st + 1, i + 1), x, &p);
      x = ts_cnn_relu(g, nm(&b, n, "relu%d_%d", st + 1, i + 1), x);
    }
    x = ts_cnn_pool(g, nm(&b, n, "pool%d", st + 1), x, TS_CNN_MAXPOOL, &(ts_cnn_pool_params){2, 2, 2, 2, 0, 0, true});
  }
  x = ts_cnn_fc(g, "classifier.fc6", x, 4096);
  x = ts_cnn_relu(g, "classifier.relu6", x);
  x = ts_cnn_fc(g, "classifier.fc7", x, 4096);
  x = ts_cnn_relu(g, "classifier.relu7", x);
  ts_cnn_fc(g, "classifier.fc8", x, 1000);
}

/* ---- ResNet (bottleneck) -------------------------------------------------------------------- */

static int bottleneck(ts_cnn_graph *g, int stage, int blk, int x, int planes, int stride) {
  builder b = {g, ""};
  snprintf(b.prefix, sizeof b.prefix, "layer%d.%d", stage, blk);
  char n[NAMEBUF];
  const float eps = 1e-5f;
  int y = cbr(&b, "conv1", x, planes, 1, 1, 1, 0, 0, eps, 1);
  y = cbr(&b, "conv2", y, planes, 3, 3, stride, 1, 1, eps, 1);
  y = cbr(&b, "conv3", y, 4 * planes, 1, 1, 1, 0, 0, eps, 0);
  if (blk == 0) x = cbr(&b, "downsample", x, 4 * planes, 1, 1, stride, 0, 0, eps, 0);
  y = ts_cnn_add(g, nm(&b, n, "add"), y, x);
  return ts_cnn_relu(g, nm(&b, n, "relu"), y);
}

static void resnet(ts_cnn_graph *g, int res, const int blocks[4]) {
  builder b = {g, ""};
  int x = ts_cnn_input(g, 3, res, res);
  x = cbr(&b, "conv1", x, 64, 7, 7, 2, 3, 3, 1e-5f, 1);
  x = ts_cnn_pool(g, "maxpool", x, TS_CNN_MAXPOOL, &(ts_cnn_pool_params){3, 3, 2, 2, 1, 1, true});
  for (int st = 0; st < 4; st++)
    for (int i = 0; i < blocks[st]; i++) x = bottleneck(g, st + 1, i, x, 64 << st, i == 0 && st > 0 ? 2 : 1);
  x = ts_cnn_gap(g, "avgpool", x);
  ts_cnn_fc(g, "fc", x, 1000);
}

/* ---- Inception-v4 --------------------------------------------------------------------------- */

#define EPS 1e-3f

/* One branch: a chain of (k, r, s, stride, pad_h, pad_w) convolutions "<prefix>.<branch>.<i>". */
typedef struct cspec {
  int k, r, s, stride, ph, pw;
} cspec;
static int chain(builder *b, const char *branch, int x, int n, const cspec *c) {
  char name[NAMEBUF];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, n > 1 ? "%s.%d" : "%s", branch, i);
    x = cbr(b, name, x, c[i].k, c[i].r, c[i].s, c[i].stride, c[i].ph, c[i].pw, EPS, 1);
  }
  return x;
}
#define CHAIN(b, name, x, ...) chain(b, name, x, sizeof((cspec[]){__VA_ARGS__}) / sizeof(cspec), (cspec[]){__VA_ARGS__})

static int concat(builder *b, int n, const int *xs) {
  char name[NAMEBUF];
  return ts_cnn_concat(b->g, nm(b, name, "concat"), n, xs);
}

static int stem(ts_cnn_graph *g, int x) {
  builder b = {g, ""};
  x = cbr(&b, "features.0", x, 32, 3, 3, 2, 0, 0, EPS, 1);
  x = cbr(&b, "features.1", x, 32, 3, 3, 1, 0, 0, EPS, 1);
  x = cbr(&b, "features.2", x, 64, 3, 3, 1, 1, 1, EPS, 1);
  snprintf(b.prefix, sizeof b.prefix, "mixed_3a");
  int br[2];
  br[0] = pool(&b, "maxpool", x, TS_CNN_MAXPOOL, 3, 2, 0);
  br[1] = CHAIN(&b, "conv", x, {96, 3, 3, 2, 0, 0});
  x = concat(&b, 2, br);
  snprintf(b.prefix, sizeof b.prefix, "mixed_4a");
  br[0] = CHAIN(&b, "branch0", x, {64, 1, 1, 1, 0, 0}, {96, 3, 3, 1, 0, 0});
  br[1] = CHAIN(&b, "branch1", x, {64, 1, 1, 1, 0, 0}, {64, 1, 7, 1, 0, 3}, {64, 7, 1, 1, 3, 0}, {96, 3, 3, 1, 0, 0});
  x = concat(&b, 2, br);
  snprintf(b.prefix, sizeof b.prefix, "mixed_5a");
  br[0] = CHAIN(&b, "conv", x, {192, 3, 3, 2, 0, 0});
  br[1] = pool(&b, "maxpool", x, TS_CNN_MAXPOOL, 3, 2, 0);
  return concat(&b, 2, br);
}

static int inception_a(ts_cnn_graph *g, int i, int x) {
  builder b = {g, ""};
  snprintf(b.prefix, sizeof b.prefix, "inception_a%d", i);
  int br[4];
  br[0] = CHAIN(&b, "branch0", x, {96, 1, 1, 1, 0, 0});
  br[1] = CHAIN(&b, "branch1", x, {64, 1, 1, 1, 0, 0}, {96, 3, 3, 1, 1, 1});
  br[2] = CHAIN(&b, "branch2", x, {64, 1, 1, 1, 0, 0}, {96, 3, 3, 1, 1, 1}, {96, 3, 3, 1, 1, 1});
  br[3] = CHAIN(&b, "branch3", pool(&b, "branch3.pool", x, TS_CNN_AVGPOOL, 3, 1, 1), {96, 1, 1, 1, 0, 0});
  return concat(&b, 4, br);
}

static int reduction_a(ts_cnn_graph *g, int x) {
  builder b = {g, "reduction_a"};
  int br[3];
  br[0] = CHAIN(&b, "branch0", x, {384, 3, 3, 2, 0, 0});
  br[1] = CHAIN(&b, "branch1", x, {192, 1, 1, 1, 0, 0}, {224, 3, 3, 1, 1, 1}, {256, 3, 3, 2, 0, 0});
  br[2] = pool(&b, "branch2", x, TS_CNN_MAXPOOL, 3, 2, 0);
  return concat(&b, 3, br);
}

static int inception_b(ts_cnn_graph *g, int i, int x) {
  builder b = {g, ""};
  snprintf(b.prefix, sizeof b.prefix, "inception_b%d", i);
  int br[4];
  br[0] = CHAIN(&b, "branch0", x, {384, 1, 1, 1, 0, 0});
  br[1] = CHAIN(&b, "branch1", x, {192, 1, 1, 1, 0, 0}, {224, 1, 7, 1, 0, 3}, {256, 7, 1, 1, 3, 0});
  br[2] = CHAIN(&b, "branch2", x, {192, 1, 1, 1, 0, 0}, {192, 7, 1, 1, 3, 0}, {224, 1, 7, 1, 0, 3}, {224, 7, 1, 1, 3, 0},
                {256, 1, 7, 1, 0, 3});
  br[3] = CHAIN(&b, "branch3", pool(&b, "branch3.pool", x, TS_CNN_AVGPOOL, 3, 1, 1), {128, 1, 1, 1, 0, 0});
  return concat(&b, 4, br);
}

static int reduction_b(ts_cnn_graph *g, int x) {
  builder b = {g, "reduction_b"};
  int br[3];
  br[0] = CHAIN(&b, "branch0", x, {192, 1, 1, 1, 0, 0}, {192, 3, 3, 2, 0, 0});
  br[1] = CHAIN(&b, "branch1", x, {256, 1, 1, 1, 0, 0}, {256, 1, 7, 1, 0, 3}, {320, 7, 1, 1, 3, 0}, {320, 3, 3, 2, 0, 0});
  br[2] = pool(&b, "branch2", x, TS_CNN_MAXPOOL, 3, 2, 0);
  return concat(&b, 3, br);
}

static int inception_c(ts_cnn_graph *g, int i, int x) {
  builder b = {g, ""};
  snprintf(b.prefix, sizeof b.prefix, "inception_c%d", i);
  int br[6];
  br[0] = CHAIN(&b, "branch0", x, {256, 1, 1, 1, 0, 0});
  const int b1 = CHAIN(&b, "branch1_0", x, {384, 1, 1, 1, 0, 0});
  br[1] = CHAIN(&b, "branch1_1a", b1, {256, 1, 3, 1, 0, 1});
  br[2] = CHAIN(&b, "branch1_1b", b1, {256, 3, 1, 1, 1, 0});
  const int b2 = CHAIN(&b, "branch2", x, {384, 1, 1, 1, 0, 0}, {448, 3, 1, 1, 1, 0}, {512, 1, 3, 1, 0, 1});
  br[3] = CHAIN(&b, "branch2_3a", b2, {256, 1, 3, 1, 0, 1});
  br[4] = CHAIN(&b, "branch2_3b", b2, {256, 3, 1, 1, 1, 0});
  br[5] = CHAIN(&b, "branch3", pool(&b, "branch3.pool", x, TS_CNN_AVGPOOL, 3, 1, 1), {256, 1, 1, 1, 0, 0});
  return concat(&b, 6, br);
}

static void inception_v4(ts_cnn_graph *g, int res) {
  int x = stem(g, ts_cnn_input(g, 3, res, res));
  for (int i = 0; i < 4; i++) x = inception_a(g, i, x);
  x = reduction_a(g, x);
  for (int i = 0; i < 7; i++) x = inception_b(g, i, x);
  x = reduction_b(g, x);
  for (int i = 0; i < 3; i++) x = inception_c(g, i, x);
  x = ts_cnn_gap(g, "avgpool", x);
  ts_cnn_fc(g, "last_linear", x, 1000);
}

/* ---- registry ------------------------------------------------------------------------------- */

const char *ts_cnn_model_list(void) { return "vgg16, resnet50, resnet101, resnet152, inception-v4"; }

ts_status ts_cnn_model_create(ts_cnn_graph **out, const char *name, int res) {
  if (!out || !name) return ts_error(TS_ERR_INVALID_ARG, "ts_cnn_model_create: NULL argument");
  *out = NULL;
  static const int r50[4] = {3, 4, 6, 3}, r101[4] = {3, 4, 23, 3}, r152[4] = {3, 8, 36, 3};
  const int *blocks = !strcmp(name, "resnet50") ? r50 : !strcmp(name, "resnet101") ? r101 : !strcmp(name, "resnet152") ? r152 : NULL;
  const int inception = !strcmp(name, "inception-v4"), vgg = !strcmp(name, "vgg16");
  if (!blocks && !inception && !vgg)
    return ts_error(TS_ERR_NOT_FOUND, "unknown model '%s' (%s)", name, ts_cnn_model_list());
  if (res < 0 || res > 4096) return ts_error(TS_ERR_INVALID_ARG, "model %s: resolution %d out of range", name, res);
  if (!res) res = inception ? 299 : 224;
  ts_cnn_graph *g;
  TS_TRY(ts_cnn_graph_create(&g, name));
  if (vgg) vgg16(g, res);
  else if (blocks) resnet(g, res, blocks);
  else inception_v4(g, res);
  const ts_status s = ts_cnn_graph_status(g);
  if (s != TS_OK) {
    ts_cnn_graph_destroy(g);
    return s;
  }
  *out = g;
  return TS_OK;
}
