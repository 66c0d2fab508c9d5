/* tessera conv: convolution algorithms with per-layer selection on CNN models.
 *   layers  the model's convolution layers as the executor plans them (JSON for the torch peer)
 *   plan    per-layer algorithm choice from the cached profile (measuring shapes it lacks): a
 *           ts_cnn_conv_plan, which the library keeps as a "conv-plan" artifact, so the same layers
 *           on the same machine are answered from it
 *   bench   every algorithm and the baselines per layer, totals, the selection, end to end
 *           (cmd_conv_bench.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_conv.h"

static void usage(void) {
  printf("usage: tessera conv bench|plan|layers --model M [options]\n\n"
         "Convolution algorithms (direct, im2col, kn2row, implicit, winograd_f2, winograd_f4, fft, depthwise)\n"
         "with per-layer selection on VGG16, ResNet-101 and Inception-v4 (random weights, seed 1).\n\n"
         "  bench    time every applicable algorithm on each distinct layer shape, side by side with\n"
         "           oneDNN (direct, winograd, auto; format_tag any) and OpenBLAS im2col + sgemm (and\n"
         "           PyTorch from --torch FILE): per-layer table, network totals, speedups, the\n"
         "           per-layer choice and why, and the end-to-end forward time with that choice.\n"
         "           The measurements replace the profile's entries.\n"
         "  plan     the per-layer choice from the cached profile (<cache>/conv-profile/<isa>-t<threads>.json);\n"
         "           shapes it lacks are measured first (progress on stderr). The choice is kept in\n"
         "           <cache>/conv-plan/<key>.json: the same layers, options and machine read it back\n"
         "           (\"cached\") while the profile's entries for them are unchanged\n"
         "  layers   the convolution layers (after BN folding and ReLU fusion) with their shape keys\n\n"
         "  --model M        vgg16, resnet50, resnet101, resnet152, inception-v4\n"
         "  --batch N        images per forward (1)\n"
         "  --res R          input side (the model's own: 224, inception-v4 299)\n"
         "  --algo A         use algorithm A for every layer it applies to (selection for the rest);\n"
         "                   default auto (per-layer selection)\n"
         "  --override L     per-layer choices PATTERN=ALGO,... (shell globs over layer names, e.g.\n"
         "                   'features.conv1_*=direct,layer3.*.conv2=im2col'); first match wins\n"
         "  --repeats N      timed rounds per layer, at least (5; more until --min-time is reached)\n"
         "  --min-time MS    timed milliseconds per contender and layer, at least (50)\n"
         "  --torch FILE     bench: per-layer PyTorch times written by bench/peers/conv_torch.py\n"
         "  --no-baselines   bench: tessera's algorithms only\n"
         "  --no-e2e         bench: skip the end-to-end forward\n"
         "  --e2e-repeats N  bench: timed forwards (5)\n"
         "  --reprofile      plan: measure every shape again (implies --replan)\n"
         "  --replan         plan: choose again from the profile instead of the stored plan\n"
         "  --threads N      threads for everything (tessera, oneDNN, OpenBLAS)\n"
         "  --json           machine-readable report\n");
}

static int parse(int argc, char **argv, conv_args *a) {
  memset(a, 0, sizeof *a);
  a->batch = 1, a->repeats = 5, a->e2e_repeats = 5, a->algo = TS_CNN_AUTO, a->min_time_ms = 50;
  int i = 1;
  if (argc > 1 && argv[1][0] != '-') a->sub = argv[1], i = 2;
  for (; i < argc; i++) {
    const int r = cli_common(CONV_CMD, argc, argv, &i, &a->co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *o = argv[i], *v;
    long x;
    if (!strcmp(o, "--model")) {
      if (!(a->model = cli_value(CONV_CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (!strcmp(o, "--batch")) {
      if (!(v = cli_value(CONV_CMD, argc, argv, &i)) || !cli_parse_int(CONV_CMD, o, v, 1, 256, &a->batch)) return CLI_USAGE;
    } else if (!strcmp(o, "--res")) {
      if (!(v = cli_value(CONV_CMD, argc, argv, &i)) || !cli_parse_int(CONV_CMD, o, v, 32, 2048, &a->res)) return CLI_USAGE;
    } else if (!strcmp(o, "--repeats")) {
      if (!(v = cli_value(CONV_CMD, argc, argv, &i)) || !cli_parse_int(CONV_CMD, o, v, 1, 1000, &a->repeats)) return CLI_USAGE;
    } else if (!strcmp(o, "--min-time")) {
      if (!(v = cli_value(CONV_CMD, argc, argv, &i)) || !cli_parse_int(CONV_CMD, o, v, 0, 60000, &x)) return CLI_USAGE;
      a->min_time_ms = (double)x;
    } else if (!strcmp(o, "--e2e-repeats")) {
      if (!(v = cli_value(CONV_CMD, argc, argv, &i)) || !cli_parse_int(CONV_CMD, o, v, 1, 1000, &x)) return CLI_USAGE;
      a->e2e_repeats = x;
    } else if (!strcmp(o, "--algo")) {
      if (!(v = cli_value(CONV_CMD, argc, argv, &i))) return CLI_USAGE;
      ts_conv_algo al;
      if (!strcmp(v, "auto")) a->algo = TS_CNN_AUTO;
      else if (ts_conv_algo_parse(v, &al) == TS_OK) a->algo = (int)al;
      else return cli_usage_error(CONV_CMD, "--algo: %s", ts_last_error());
    } else if (!strcmp(o, "--override")) {
      if (!(a->overrides = cli_value(CONV_CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (!strcmp(o, "--torch")) {
      if (!(a->torch = cli_value(CONV_CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (!strcmp(o, "--no-baselines")) {
      a->no_baselines = true;
    } else if (!strcmp(o, "--no-e2e")) {
      a->no_e2e = true;
    } else if (!strcmp(o, "--reprofile")) {
      a->reprofile = true;
    } else if (!strcmp(o, "--replan")) {
      a->replan = true;
    } else {
      return cli_usage_error(CONV_CMD, "unknown argument '%s'", o);
    }
  }
  if (a->co.help) return CLI_OK;
  if (!a->sub) return cli_usage_error(CONV_CMD, "expected a subcommand: bench, plan or layers");
  if (strcmp(a->sub, "bench") && strcmp(a->sub, "plan") && strcmp(a->sub, "layers"))
    return cli_usage_error(CONV_CMD, "unknown subcommand '%s' (bench, plan, layers)", a->sub);
  if (!a->model) return cli_usage_error(CONV_CMD, "%s: --model is required (%s)", a->sub, ts_cnn_model_list());
  ts_cnn_graph *g = NULL;
  const ts_status s = ts_cnn_model_create(&g, a->model, (int)a->res);
  ts_cnn_graph_destroy(g);
  if (s != TS_OK) return cli_usage_error(CONV_CMD, "%s", ts_last_error());
  return CLI_OK;
}

ts_cnn_plan_opts conv_plan_opts(const conv_args *a) {
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.batch = (int)a->batch;
  o.algo = a->algo;
  o.overrides = a->overrides;
  o.time.repeats = (int)a->repeats;
  o.time.min_time_s = a->min_time_ms * 1e-3;
  if (o.time.max_rounds < o.time.repeats) o.time.max_rounds = o.time.repeats;
  return o;
}

ts_status conv_model_load(const conv_args *a, bool weights, conv_model *m) {
  memset(m, 0, sizeof *m);
  TS_TRY(ts_cnn_model_create(&m->g, a->model, (int)a->res));
  const ts_cnn_plan_opts o = conv_plan_opts(a);
  ts_status s = weights ? ts_cnn_graph_init_random(m->g, 1) : TS_OK;
  const int n = s == TS_OK ? ts_cnn_conv_layers(m->g, &o, NULL, 0) : -1;
  if (s == TS_OK && n < 0) s = TS_ERR_INTERNAL;
  if (s == TS_OK && !(m->layers = calloc((size_t)(n ? n : 1), sizeof *m->layers))) s = ts_error(TS_ERR_OOM, "out of memory");
  if (s == TS_OK) m->nlayers = ts_cnn_conv_layers(m->g, &o, m->layers, n);
  if (s != TS_OK) conv_model_free(m);
  return s;
}

void conv_model_free(conv_model *m) {
  ts_cnn_graph_destroy(m->g);
  free(m->layers);
  memset(m, 0, sizeof *m);
}

static cJSON *desc_json(const ts_conv_desc *d) {
  cJSON *j = cJSON_CreateObject();
  char key[96];
  ts_conv_desc_key(d, key, sizeof key);
  cJSON_AddStringToObject(j, "key", key);
  const struct { const char *n; int v; } f[] = {
      {"n", d->n}, {"c", d->c}, {"h", d->h}, {"w", d->w}, {"k", d->k}, {"r", d->r}, {"s", d->s},
      {"stride_h", d->stride_h}, {"stride_w", d->stride_w}, {"pad_top", d->pad_top}, {"pad_bottom", d->pad_bottom},
      {"pad_left", d->pad_left}, {"pad_right", d->pad_right}, {"dilation_h", d->dilation_h},
      {"dilation_w", d->dilation_w}, {"groups", d->groups}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cJSON_AddNumberToObject(j, f[i].n, f[i].v);
  cJSON_AddBoolToObject(j, "relu", d->relu);
  cJSON_AddNumberToObject(j, "gflop", ts_conv_flops(d) * 1e-9);
  return j;
}

static int cmd_layers(const conv_args *a) {
  conv_model m;
  const ts_status s = conv_model_load(a, false, &m);
  if (s != TS_OK) return cli_fail(CONV_CMD, s);
  double gf = 0;
  for (int i = 0; i < m.nlayers; i++) gf += m.layers[i].flops * 1e-9;
  if (a->co.json) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", a->model);
    cJSON_AddNumberToObject(j, "batch", (double)a->batch);
    cJSON_AddNumberToObject(j, "conv_gflop", gf);
    for (int i = 0; i < m.nlayers; i++) {
      cJSON *l = desc_json(&m.layers[i].desc);
      cJSON_AddStringToObject(l, "name", m.layers[i].name);
      cJSON_AddBoolToObject(l, "bn_folded", m.layers[i].bn_folded);
      cJSON_AddItemToArray(arr, l);
    }
    cJSON_AddItemToObject(j, "layers", arr);
    cli_print_json(j);
  } else {
    printf("%s batch %ld: %d convolution layers, %.2f GFLOP\n", a->model, a->batch, m.nlayers, gf);
    for (int i = 0; i < m.nlayers; i++) {
      const ts_conv_desc *d = &m.layers[i].desc;
      char key[96];
      ts_conv_desc_key(d, key, sizeof key);
      printf("%-40s %-58s%s%s %.3f GFLOP\n", m.layers[i].name, key, d->relu ? " relu" : "",
             m.layers[i].bn_folded ? " bn" : "", m.layers[i].flops * 1e-9);
    }
  }
  conv_model_free(&m);
  return CLI_OK;
}

/* ---- plan: the per-layer choice, a ts_cnn_conv_plan (the library keeps it as a "conv-plan"
 * artifact and answers the same layers, options and profile entries from it) ---------------- */

/* --reprofile: every distinct shape of the model measured again into prof, which is saved. */
static ts_status reprofile(const conv_args *a, ts_context *ctx, const conv_model *m, ts_conv_profile *prof) {
  const ts_cnn_plan_opts o = conv_plan_opts(a);
  ts_status s = TS_OK;
  ts_progress pg;
  ts_progress_begin(&pg, "conv profile", m->nlayers);
  for (int i = 0; s == TS_OK && i < m->nlayers; i++) {
    int seen = 0;
    char k1[96], k2[96];
    ts_conv_desc_key(&m->layers[i].desc, k1, sizeof k1);
    for (int j = 0; j < i && !seen; j++) ts_conv_desc_key(&m->layers[j].desc, k2, sizeof k2), seen = !strcmp(k1, k2);
    if (!seen) s = ts_conv_profile_measure(prof, ctx, &m->layers[i].desc, 0, &o.time, NULL);
    ts_progress_update(&pg, i + 1);
  }
  ts_progress_end(&pg);
  return s == TS_OK ? ts_conv_profile_save(prof) : s;
}

static int cmd_plan(const conv_args *a, ts_context *ctx) {
  conv_model m;
  ts_status s = conv_model_load(a, false, &m);
  if (s != TS_OK) return cli_fail(CONV_CMD, s);
  ts_conv_profile *prof = NULL;
  ts_cnn_conv_plan *plan = NULL;
  bool stale = false;
  s = ts_conv_profile_open(&prof, ctx, NULL, &stale);
  if (s == TS_OK && a->reprofile) s = reprofile(a, ctx, &m, prof);
  ts_cnn_plan_opts o = conv_plan_opts(a);
  o.profile = prof, o.replan = a->replan || a->reprofile;
  if (s == TS_OK) s = ts_cnn_conv_plan_create(&plan, ctx, m.g, &o);
  const int n = ts_cnn_conv_plan_count(plan);
  const char *path = ts_cnn_conv_plan_path(plan);
  const bool cached = ts_cnn_conv_plan_cached(plan);
  ts_cnn_conv_info ci;
  if (s == TS_OK && a->co.json) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "model", a->model);
    cJSON_AddNumberToObject(j, "batch", (double)a->batch);
    cJSON_AddStringToObject(j, "profile", ts_conv_profile_path(prof));
    cJSON_AddStringToObject(j, "plan", path);
    cJSON_AddBoolToObject(j, "cached", cached);
    for (int i = 0; i < n && ts_cnn_conv_plan_layer(plan, i, &ci) == TS_OK; i++) {
      cJSON *l = desc_json(&ci.desc);
      cJSON_AddStringToObject(l, "name", ci.name);
      cJSON_AddStringToObject(l, "algo", ts_conv_algo_name(ci.algo));
      cJSON_AddStringToObject(l, "why", ci.why);
      cJSON_AddItemToArray(arr, l);
    }
    cJSON_AddItemToObject(j, "layers", arr);
    cli_print_json(j);
  } else if (s == TS_OK) {
    printf("%s batch %ld, profile %s%s\n", a->model, a->batch, ts_conv_profile_path(prof),
           stale ? " (the old one was measured elsewhere: replaced)" : "");
    printf("plan %s (%s)\n", path, cached ? "cached" : "made now");
    for (int i = 0; i < n && ts_cnn_conv_plan_layer(plan, i, &ci) == TS_OK; i++)
      printf("%-40s %-12s %s\n", ci.name, ts_conv_algo_name(ci.algo), ci.why);
  }
  ts_cnn_conv_plan_destroy(plan);
  ts_conv_profile_destroy(prof);
  conv_model_free(&m);
  return s == TS_OK ? CLI_OK : cli_fail(CONV_CMD, s);
}

int cmd_conv(int argc, char **argv) {
  conv_args a;
  int rc = parse(argc, argv, &a);
  if (rc != CLI_OK) return rc;
  if (a.co.help) {
    usage();
    return CLI_OK;
  }
  cli_apply_threads(a.co.threads);
  if (!strcmp(a.sub, "layers")) return cmd_layers(&a);
  ts_context *ctx = NULL;
  ts_status s = ts_context_create(&ctx, a.co.threads);
  if (s != TS_OK) return cli_fail(CONV_CMD, s);
  rc = !strcmp(a.sub, "plan") ? cmd_plan(&a, ctx) : conv_bench(&a, ctx);
  ts_context_destroy(ctx);
  return rc;
}
