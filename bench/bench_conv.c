/* Convolution algorithms side by side with oneDNN's convolution on single layers.
 *
 *   bench_conv [--layers vgg_conv3_2,resnet_1x1,...] [--shape C,HW,K,R,S,PADH,PADW,STRIDE[,N] ...]
 *              [--algos direct,winograd_f4,...] [--wino-schedule S] [--threads N] [--repeats R] [--json]
 *
 * Built-in layers (batch 1, fp32, NCHW, bias, no ReLU): VGG16 conv3_2 (256->256 3x3 at 56x56),
 * VGG16 conv5_1 (512->512 3x3 at 14x14), ResNet 1x1 256->64 at 56x56, ResNet 3x3 64->64 at 56x56,
 * ResNet 3x3/2 128->128 at 56x56, Inception-v4 1x7 (192->224 at 17x17, pad 0x3) and 7x1 (192->192,
 * pad 3x0), a depthwise 3x3 over 32 channels at 112x112; --shape adds any other (square input).
 * Each layer is one ts_conv_trial (conv.h): every tessera algorithm that supports it (or those of
 * --algos) and oneDNN direct, winograd (when it has an implementation) and auto -- src/dst NCHW,
 * oneDNN's preferred layouts chosen with format_tag any, weights reordered once, activation
 * reorders inside the timing -- on the same data, timed round-robin (median of the rounds after
 * warm-up, --repeats rounds at least and 0.2 s per contender), outputs cross-checked against
 * oneDNN's. GFLOP/s are effective: 2*N*K*P*Q*(C/g)*R*S per call for every contender (Winograd and
 * FFT do fewer operations, so theirs can pass the FMA peak); % of the machine profile's peak for
 * the thread count; speed vs oneDNN = oneDNN's best median / the contender's.
 * --wino-schedule auto|fused|staged|clane|clane-private|clane-shared picks the AVX-512 Winograd
 * schedule (the plans' internal option ts__conv_plan_opts, conv_internal.h; auto: the plan's own
 * choice), so two runs compare schedules against the same oneDNN baseline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "core/artifact_internal.h"
#include "harness.h"
#include "tessera/conv.h"

typedef struct layer {
  char name[64];
  ts_conv_desc d;
} layer;

enum { MAX_LAYERS = 32 };
static int nlayers;
static layer layers[MAX_LAYERS];

static void add_layer(const char *name, int n, int c, int hw, int k, int r, int s, int ph, int pw, int stride,
                      int groups) {
  layer *L = &layers[nlayers++];
  snprintf(L->name, sizeof L->name, "%s", name);
  L->d = ts_conv_desc_make(n, c, hw, hw, k, r, s);
  L->d.pad_top = L->d.pad_bottom = ph, L->d.pad_left = L->d.pad_right = pw;
  L->d.stride_h = L->d.stride_w = stride;
  L->d.groups = groups;
}

/* --shape C,HW,K,R,S,PADH,PADW,STRIDE[,N]: 1 when added. */
static int parse_shape(const char *spec) {
  int v[9] = {0, 0, 0, 0, 0, 0, 0, 0, 1}, n = 0;
  const char *p = spec;
  while (n < 9) {
    char *end;
    const long x = strtol(p, &end, 10);
    if (end == p || x < 0 || x > (1 << 24)) return 0;
    v[n++] = (int)x;
    if (*end == 0) break;
    if (*end != ',') return 0;
    p = end + 1;
  }
  if (n < 8 || nlayers == MAX_LAYERS) return 0;
  char name[64];
  snprintf(name, sizeof name, "c%d_%dx%d_k%d_%dx%d_s%d", v[0], v[1], v[1], v[2], v[3], v[4], v[7]);
  add_layer(name, v[8], v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], 1);
  return ts_conv_output_dims(&layers[nlayers - 1].d, NULL, NULL) == TS_OK ? 1 : (nlayers--, 0);
}

static int bench_layer(const layer *L, ts_context *ctx, unsigned algos, const ts_conv_time_opts *to,
                       const ts__conv_plan_opts *po, double peak, cJSON *jl) {
  const ts_conv_desc *d = &L->d;
  int P, Q;
  ts_conv_trial *t = NULL;
  if (ts_conv_output_dims(d, &P, &Q) != TS_OK || ts__conv_trial_create_opts(&t, ctx, d, algos, to, po) != TS_OK) {
    fprintf(stderr, "bench_conv: %s: %s\n", L->name, ts_last_error());
    return 1;
  }
  for (int b = TS_CONV_BASE_ONEDNN_DIRECT; b <= TS_CONV_BASE_ONEDNN_AUTO; b++)
    ts_conv_trial_add_baseline(t, (ts_conv_baseline_kind)b); /* a rejection keeps its reason */
  if (ts_conv_trial_run(t) != TS_OK) {
    fprintf(stderr, "bench_conv: %s: %s\n", L->name, ts_last_error());
    ts_conv_trial_destroy(t);
    return 1;
  }
  const double flops = ts_conv_flops(d);
  double best = NAN;
  for (int i = 0; i < ts_conv_trial_count(t); i++) {
    ts_conv_trial_info in;
    ts_conv_trial_info_at(t, i, &in);
    if (in.baseline && in.ran && !(in.ms >= best)) best = in.ms;
  }
  cJSON *rows = NULL;
  if (jl) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "layer", L->name);
    const int v[] = {d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_top, d->pad_left, d->stride_h, d->groups};
    const char *nm[] = {"n", "c", "h", "w", "k", "r", "s", "pad_h", "pad_w", "stride", "groups"};
    for (int i = 0; i < 11; i++) cJSON_AddNumberToObject(o, nm[i], v[i]);
    cJSON_AddNumberToObject(o, "gflop", flops * 1e-9);
    if (!isnan(best)) cJSON_AddNumberToObject(o, "onednn_best_ms", best);
    rows = cJSON_AddArrayToObject(o, "results");
    cJSON_AddItemToArray(jl, o);
  } else {
    printf("\n%s: N=%d C=%d %dx%d -> K=%d %dx%d, kernel %dx%d, pad %dx%d, stride %d, groups %d, %.3f GFLOP\n", L->name,
           d->n, d->c, d->h, d->w, d->k, P, Q, d->r, d->s, d->pad_top, d->pad_left, d->stride_h, d->groups, flops * 1e-9);
    printf("  %-16s %10s %10s %7s %9s %9s  %s\n", "contender", "median ms", "eff GF/s", "%peak", "vs oneDNN", "rel diff",
           "implementation");
  }
  for (int i = 0; i < ts_conv_trial_count(t); i++) {
    ts_conv_trial_info in;
    ts_conv_trial_info_at(t, i, &in);
    if (!in.baseline && (in.algo == TS_CONV_REFERENCE || !(algos >> in.algo & 1u))) continue;
    if (!in.ran) {
      if (jl) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "impl", in.name);
        cJSON_AddStringToObject(r, "not_run", in.why);
        cJSON_AddItemToArray(rows, r);
      } else {
        printf("  %-16s %s\n", in.name, in.why);
      }
      continue;
    }
    const double gf = flops / (in.ms * 1e-3) * 1e-9, pct = peak > 0 ? 100 * gf / peak : NAN, sp = best / in.ms;
    if (jl) {
      cJSON *r = cJSON_CreateObject();
      cJSON_AddStringToObject(r, "impl", in.name);
      cJSON_AddNumberToObject(r, "median_ms", in.ms);
      cJSON_AddBoolToObject(r, "pruned", in.pruned);
      cJSON_AddNumberToObject(r, "gflops", gf);
      if (!isnan(pct)) cJSON_AddNumberToObject(r, "pct_peak", pct);
      if (!isnan(sp)) cJSON_AddNumberToObject(r, "speed_vs_onednn_best", sp);
      if (!isnan(in.rel_diff)) cJSON_AddNumberToObject(r, "rel_diff", in.rel_diff);
      if (in.impl[0]) cJSON_AddStringToObject(r, "onednn_impl", in.impl);
      cJSON_AddItemToArray(rows, r);
    } else {
      printf("  %-16s %9.3f%c %10.1f %6.1f%% %8.2fx %9.1e  %s\n", in.name, in.ms, in.pruned ? '~' : ' ', gf, pct, sp,
             in.rel_diff, in.impl);
    }
  }
  ts_conv_trial_destroy(t);
  return 0;
}

static int usage(const char *msg) {
  fprintf(stderr,
          "bench_conv: %s\nusage: bench_conv [--layers a,b,...] [--shape C,HW,K,R,S,PADH,PADW,STRIDE[,N] ...]\n"
          "                  [--algos direct,winograd_f4,...] [--wino-schedule auto|fused|staged|clane|clane-private|clane-shared]\n"
          "                  [--threads N] [--repeats R] [--json]\n"
          "layers: vgg_conv3_2, vgg_conv5_1, resnet_1x1, resnet_3x3, resnet_3x3s2, inception_1x7, inception_7x1,\n"
          "        depthwise_3x3 (default: all; --shape alone: only the shapes)\n",
          msg);
  return 2;
}

int main(int argc, char **argv) {
  static const layer builtin[] = {
      {"vgg_conv3_2", {1, 256, 56, 56, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}},
      {"vgg_conv5_1", {1, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}},
      {"resnet_1x1", {1, 256, 56, 56, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false}},
      {"resnet_3x3", {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}},
      {"resnet_3x3s2", {1, 128, 56, 56, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, false}},
      {"inception_1x7", {1, 192, 17, 17, 224, 1, 7, 1, 1, 0, 0, 3, 3, 1, 1, 1, false}},
      {"inception_7x1", {1, 192, 17, 17, 192, 7, 1, 1, 1, 3, 3, 0, 0, 1, 1, 1, false}},
      {"depthwise_3x3", {1, 32, 112, 112, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32, false}},
  };
  const int nbuiltin = (int)(sizeof builtin / sizeof builtin[0]);
  const char *want = NULL;
  int nthreads = 2, shapes = 0;
  unsigned algos = 0;
  ts__conv_plan_opts po = {.wino_schedule = TS__WINO_SCHED_AUTO};
  bool json = false;
  ts_bench_opts bo = ts_bench_opts_default();
  bo.repeats = 5;
  for (int i = 1; i < argc; i++) {
    const char *why = NULL;
    const int c = ts_bench_common_arg(argc, argv, &i, &nthreads, &bo, &json, &why);
    if (c < 0) return usage(why);
    if (c > 0) continue;
    if (!strcmp(argv[i], "--layers") && i + 1 < argc) {
      want = argv[++i];
    } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
      if (!parse_shape(argv[++i])) return usage("--shape wants C,HW,K,R,S,PADH,PADW,STRIDE[,N] of a valid layer");
      shapes++;
    } else if (!strcmp(argv[i], "--algos") && i + 1 < argc) {
      char *list = strdup(argv[++i]);
      for (char *save = NULL, *tok = list ? strtok_r(list, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
        ts_conv_algo a;
        if (ts_conv_algo_parse(tok, &a) != TS_OK) {
          free(list);
          return usage(ts_last_error());
        }
        algos |= 1u << a;
      }
      free(list);
    } else if (!strcmp(argv[i], "--wino-schedule") && i + 1 < argc) {
      if (ts__conv_wino_schedule_parse(argv[++i], &po.wino_schedule) != TS_OK) return usage(ts_last_error());
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage("convolution algorithms vs oneDNN on single layers");
      return 0;
    } else {
      return usage("unknown or incomplete option");
    }
  }
  const int nshapes = nlayers;
  for (int b = 0; b < nbuiltin; b++) { /* built-in layers after the shapes: all, the --layers ones, or none */
    int hit = !want && !shapes;
    for (const char *p = want ? strstr(want, builtin[b].name) : NULL; p && !hit; p = strstr(p + 1, builtin[b].name)) {
      const size_t n = strlen(builtin[b].name);
      hit = (p == want || p[-1] == ',') && (p[n] == ',' || p[n] == 0);
    }
    if (hit && nlayers < MAX_LAYERS) layers[nlayers++] = builtin[b];
  }
  if (want && nlayers - nshapes == 0) return usage("--layers wants names from the list below");
  if (!algos) algos = ((1u << TS_CONV_ALGO_COUNT) - 1) & ~(1u << TS_CONV_REFERENCE);
  ts_conv_time_opts to = ts_conv_time_opts_default();
  to.repeats = bo.repeats, to.min_time_s = 0.2, to.max_rounds = bo.repeats > 200 ? bo.repeats : 200, to.prune = 0;
  ts_machine_profile prof;
  const int have = ts_bench_profile(&prof) == TS_OK;
  const double peak = !have ? NAN : nthreads == prof.threads ? prof.peak_gflops_fp32 : prof.peak_gflops_fp32_1t * nthreads;
  ts_context *ctx = NULL;
  if (ts_context_create(&ctx, nthreads) != TS_OK) {
    fprintf(stderr, "bench_conv: %s\n", ts_last_error());
    return 1;
  }
  const char *sched = po.wino_schedule == TS__WINO_SCHED_AUTO ? NULL : ts__conv_wino_schedule_name(po.wino_schedule);
  cJSON *root = NULL, *jl = NULL;
  if (json) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "bench", "conv");
    cJSON_AddStringToObject(root, "isa", ts_isa_name(ts_isa_active()));
    cJSON_AddNumberToObject(root, "threads", nthreads);
    cJSON_AddStringToObject(root, "winograd_schedule", sched ? sched : "default");
    if (have) cJSON_AddItemToObject(root, "profile", ts__hwinfo_to_cjson(&prof));
    jl = cJSON_AddArrayToObject(root, "layers");
  } else {
    printf("bench_conv: kernels %s, %d thread(s), Winograd schedule %s", ts_isa_name(ts_isa_active()), nthreads,
           sched ? sched : "default");
    if (have) printf("; peak %.1f GFLOP/s (%s, measured %s)", peak, prof.cpu_model, prof.date);
    printf("\nmedian ms of round-robin rounds ('~' pruned); GFLOP/s effective (direct-convolution flop count)\n");
  }
  int rc = 0;
  for (int i = 0; i < nlayers; i++) rc |= bench_layer(&layers[i], ctx, algos, &to, &po, peak, jl);
  if (json) {
    ts_bench_print_json(root);
    cJSON_Delete(root);
  }
  ts_context_destroy(ctx);
  return rc;
}
