/* Layer tables of the models whose group convolutions the bench runs, and the connectivity spec
 * of each layer under the --connectivity options.
 *
 * CondenseNet (Huang et al., ImageNet configuration): 5 dense stages of 4-6-8-10-8 layers, growth
 * k = 8-16-32-64-128, at 112, 56, 28, 14, 7 (2x2 average pooling between stages, no conv), 16
 * channels after the stem. Every layer: a 1x1 learned group convolution cin -> 4k (G = 4 groups,
 * condense factor C: each output keeps cin/C inputs), then a standard 3x3 group convolution
 * 4k -> k with G = 4 groups; the layer adds k channels.
 * ShuffleNet v1 (Zhang et al., 1x): stages of 4, 8, 4 units at 28, 14, 7 with 240/480/960
 * channels (g = 3) or 384/768/1536 (g = 8); 24 channels into stage 2 at 56 x 56. A unit is a 1x1
 * group conv to a bottleneck of out/4, shuffle, 3x3 depthwise, 1x1 group conv back; the first unit
 * of a stage has stride 2 (the depthwise conv), its second 1x1 produces out - in channels (the rest
 * is the pooled shortcut), and the very first 1x1 (24 inputs) is not grouped, so not listed. */
#include <stdio.h>
#include <string.h>

#include "gconv/gconv_internal.h"

static const char *const conn_names[TS_GCONV_CONN_COUNT] = {"unstructured", "shared", "random", "block", "permuted"};

const char *ts_gconv_connectivity_name(ts_gconv_connectivity c) {
  return c >= 0 && c < TS_GCONV_CONN_COUNT ? conn_names[c] : "?";
}

ts_status ts_gconv_connectivity_parse(const char *name, ts_gconv_connectivity *out) {
  for (int i = 0; name && i < TS_GCONV_CONN_COUNT; i++)
    if (strcmp(name, conn_names[i]) == 0) {
      *out = (ts_gconv_connectivity)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "connectivity '%s' is not one of unstructured, shared, random, block, permuted",
                  name ? name : "(null)");
}

void ts_gconv_conn_opts_default(ts_gconv_conn_opts *o) {
  memset(o, 0, sizeof *o);
  o->mode = TS_GCONV_CONN_UNSTRUCTURED;
  o->condense = 4;
  o->corr = 0.9;
  o->seed = 1;
}

static void add(ts_gconv_model_layer *t, int *n, const char *name, int batch, int cin, int cout, int hw, int k,
                int groups, bool learned, bool lgc) {
  ts_gconv_model_layer *m = &t[(*n)++];
  snprintf(m->name, sizeof m->name, "%s", name);
  m->layer = (ts_gconv_layer){batch, cin, cout, hw, hw, k, 1};
  m->groups = groups;
  m->learned = learned;
  m->lgc = lgc;
}

static int condensenet(ts_gconv_model_layer *t, int batch) {
  static const int layers[5] = {4, 6, 8, 10, 8}, growth[5] = {8, 16, 32, 64, 128}, hw[5] = {112, 56, 28, 14, 7};
  int n = 0, c = 16;
  for (int s = 0; s < 5; s++)
    for (int i = 0; i < layers[s]; i++) {
      char name[48];
      const int k = growth[s];
      if (t) {
        snprintf(name, sizeof name, "s%d.l%d.lgc1x1", s + 1, i + 1);
        add(t, &n, name, batch, c, 4 * k, hw[s], 1, 4, true, true);
        snprintf(name, sizeof name, "s%d.l%d.gconv3x3", s + 1, i + 1);
        add(t, &n, name, batch, 4 * k, k, hw[s], 3, 4, false, false);
      } else {
        n += 2;
      }
      c += k;
    }
  return n;
}

static int shufflenet(ts_gconv_model_layer *t, int batch, int g) {
  const int out3[3] = {240, 480, 960}, out8[3] = {384, 768, 1536}, units[3] = {4, 8, 4}, hw[3] = {28, 14, 7};
  const int *out = g == 3 ? out3 : out8;
  int n = 0, cin = 24;
  for (int s = 0; s < 3; s++) {
    const int c = out[s], mid = c / 4;
    for (int u = 0; u < units[s]; u++) {
      char name[48];
      if (!t) {
        n += (s == 0 && u == 0) ? 1 : 2;
        continue;
      }
      if (u == 0) {
        if (s > 0) {
          snprintf(name, sizeof name, "st%d.u%d.gconv1", s + 2, u + 1);
          add(t, &n, name, batch, cin, mid, 2 * hw[s], 1, g, true, false);
        }
        snprintf(name, sizeof name, "st%d.u%d.gconv2", s + 2, u + 1);
        add(t, &n, name, batch, mid, c - cin, hw[s], 1, g, true, false);
      } else {
        snprintf(name, sizeof name, "st%d.u%d.gconv1", s + 2, u + 1);
        add(t, &n, name, batch, c, mid, hw[s], 1, g, true, false);
        snprintf(name, sizeof name, "st%d.u%d.gconv2", s + 2, u + 1);
        add(t, &n, name, batch, mid, c, hw[s], 1, g, true, false);
      }
    }
    cin = c;
  }
  return n;
}

ts_status ts_gconv_model_layers(const char *model, int batch, ts_gconv_model_layer **layers, int *count) {
  *layers = NULL, *count = 0;
  if (batch < 1) return ts_error(TS_ERR_INVALID_ARG, "gconv model: batch must be >= 1, got %d", batch);
  int kind = !model ? -1 : strcmp(model, "condensenet") == 0 ? 0 : strcmp(model, "shufflenet-g3") == 0 ? 3
                            : strcmp(model, "shufflenet-g8") == 0 ? 8 : -1;
  if (kind < 0)
    return ts_error(TS_ERR_NOT_FOUND, "gconv model '%s' is not one of condensenet, shufflenet-g3, shufflenet-g8",
                    model ? model : "(null)");
  int n = kind == 0 ? condensenet(NULL, batch) : shufflenet(NULL, batch, kind);
  ts_gconv_model_layer *t = ts_calloc((size_t)n, sizeof *t);
  if (!t) return TS_ERR_OOM;
  *count = kind == 0 ? condensenet(t, batch) : shufflenet(t, batch, kind);
  *layers = t;
  return TS_OK;
}

ts_status ts_gconv_model_conn_spec(const ts_gconv_model_layer *ml, int index, const ts_gconv_conn_opts *o, char *spec,
                                   size_t cap) {
  const ts_gconv_layer *l = &ml->layer;
  const uint64_t seed = o->seed + (uint64_t)index;
  const int G = ml->groups;
  /* CondenseNet keeps 1/C of the inputs per output; ShuffleNet's group convs keep 1/g */
  const bool condense = ml->learned && ml->lgc;
  if (condense && o->condense != 1 && o->condense != 2 && o->condense != 4 && o->condense != 8)
    return ts_error(TS_ERR_INVALID_ARG, "gconv model: condense factor must be 1, 2, 4 or 8, got %d", o->condense);
  const double keep = condense ? 1.0 / o->condense : 1.0 / G, dens = o->density > 0 ? o->density : keep;
  int n;
  if (!ml->learned || (o->mode == TS_GCONV_CONN_SHARED && !condense))
    n = snprintf(spec, cap, "groupconv:cin=%d,cout=%d,groups=%d", l->cin, l->cout, G);
  else if (o->mode == TS_GCONV_CONN_SHARED)
    n = snprintf(spec, cap, "condense:cin=%d,cout=%d,groups=%d,seed=%llu,keep=%.9g", l->cin, l->cout, G,
                 (unsigned long long)seed, keep);
  else if (o->mode == TS_GCONV_CONN_RANDOM)
    n = snprintf(spec, cap, "randconn:cin=%d,cout=%d,density=%.9g,seed=%llu", l->cin, l->cout, dens,
                 (unsigned long long)seed);
  else if (o->mode == TS_GCONV_CONN_BLOCK)
    n = snprintf(spec, cap, "permconn:blockconn:cin=%d,cout=%d,bo=%d,bi=%d,density=%.9g,seed=%llu,seed=%llu", l->cin,
                 l->cout, l->cout < 16 ? l->cout : 16, l->cin < 8 ? l->cin : 8, dens, (unsigned long long)seed,
                 (unsigned long long)seed + 1000);
  else
    n = snprintf(spec, cap, "%sunstructconv:cin=%d,cout=%d,keep=%.9g,groups=%d,corr=%.9g,seed=%llu%s",
                 o->mode == TS_GCONV_CONN_PERMUTED ? "permconn:" : "", l->cin, l->cout, keep, G, o->corr,
                 (unsigned long long)seed, o->mode == TS_GCONV_CONN_PERMUTED ? ",seed=" : "");
  if (o->mode == TS_GCONV_CONN_PERMUTED && ml->learned && (size_t)n < cap)
    n += snprintf(spec + n, cap - (size_t)n, "%llu", (unsigned long long)seed + 1000);
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_INVALID_ARG, "gconv model: spec buffer too small");
  return TS_OK;
}
