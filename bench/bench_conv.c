/* Convolution algorithms side by side with oneDNN's convolution on representative CNN layers.
 *
 *   bench_conv [--layers vgg_conv3_2,resnet_1x1,...] [--threads N] [--repeats R] [--reference] [--json]
 *
 * Layers (batch 1, fp32, NCHW, bias, no ReLU): VGG16 conv3_2 (256->256 3x3 at 56x56), ResNet
 * 1x1 256->64 at 56x56, ResNet 3x3 64->64 at 56x56, Inception-v4 1x7 (192->224 at 17x17, pad 0x3)
 * and a depthwise 3x3 over 32 channels at 112x112. Every tessera algorithm that supports the layer
 * (reference only with --reference: it is slow), then oneDNN with algorithm direct, winograd (it may
 * reject the layer: reported) and auto: src/dst in plain NCHW, oneDNN picks its weight/activation
 * layouts (format_tag any); the weight reorder runs once outside the timing, the activation
 * reorders inside it. Median of repeats after warm-up (bench/harness.h); GFLOP/s counted as
 * 2*N*K*P*Q*(C/g)*R*S for every algorithm (Winograd/FFT do fewer real operations: this is the
 * effective rate), % of the machine profile's peak, speed vs oneDNN's best (t_best / t), and
 * the process CPU time per call (all threads) as a load-independent second view. */
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "tessera/conv.h"

typedef struct layer {
  const char *name;
  ts_conv_desc d;
} layer;

static int nlayers;
static layer layers[8];

static void add_layer(const char *name, int c, int hw, int k, int r, int s, int ph, int pw, int groups) {
  ts_conv_desc d = ts_conv_desc_make(1, c, hw, hw, k, r, s);
  d.pad_top = d.pad_bottom = ph, d.pad_left = d.pad_right = pw;
  d.groups = groups;
  layers[nlayers++] = (layer){name, d};
}

/* ---- tessera contender -------------------------------------------------------------------- */

typedef struct ts_job {
  const ts_conv_plan *plan;
  const float *in;
  float *out;
  void *ws;
} ts_job;

static void run_tessera(void *arg) {
  ts_job *j = arg;
  ts_conv_execute(j->plan, j->in, j->out, j->ws);
}

/* ---- oneDNN contender --------------------------------------------------------------------- */

typedef struct dnnl_job {
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dnnl_primitive_t conv, src_reorder, dst_reorder;
  dnnl_memory_t user_src, user_dst, src, wei, bias, dst, user_wei;
  int nthreads;
  char impl[128];
} dnnl_job;

static void run_dnnl(void *arg) {
  dnnl_job *j = arg;
  omp_set_num_threads(j->nthreads);
  if (j->src_reorder) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, j->user_src}, {DNNL_ARG_TO, j->src}};
    dnnl_primitive_execute(j->src_reorder, j->strm, 2, a);
  }
  dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, j->src}, {DNNL_ARG_WEIGHTS, j->wei}, {DNNL_ARG_BIAS, j->bias},
                          {DNNL_ARG_DST, j->dst}};
  dnnl_primitive_execute(j->conv, j->strm, 4, a);
  if (j->dst_reorder) {
    dnnl_exec_arg_t b[2] = {{DNNL_ARG_FROM, j->dst}, {DNNL_ARG_TO, j->user_dst}};
    dnnl_primitive_execute(j->dst_reorder, j->strm, 2, b);
  }
  dnnl_stream_wait(j->strm);
}

static void dnnl_job_free(dnnl_job *j) {
  if (j->conv) dnnl_primitive_destroy(j->conv);
  if (j->src_reorder) dnnl_primitive_destroy(j->src_reorder);
  if (j->dst_reorder) dnnl_primitive_destroy(j->dst_reorder);
  dnnl_memory_t mems[] = {j->user_src, j->user_dst, j->user_wei, j->src, j->wei, j->bias, j->dst};
  for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
    if (mems[i] && (i < 3 || (mems[i] != j->user_src && mems[i] != j->user_dst && mems[i] != j->user_wei)))
      dnnl_memory_destroy(mems[i]);
  if (j->strm) dnnl_stream_destroy(j->strm);
  if (j->eng) dnnl_engine_destroy(j->eng);
  memset(j, 0, sizeof *j);
}

/* A memory for `want`; when it differs from the user's, a new one and a reorder (else the user's). */
static dnnl_status_t dnnl_match(dnnl_job *j, dnnl_memory_t user, const dnnl_memory_desc_t *user_md,
                                const dnnl_memory_desc_t *want, dnnl_memory_t *mem, dnnl_primitive_t *reorder,
                                int to_user) {
  if (dnnl_memory_desc_equal(user_md, want)) {
    *mem = user;
    return dnnl_success;
  }
  dnnl_status_t s = dnnl_memory_create(mem, want, j->eng, DNNL_MEMORY_ALLOCATE);
  if (s != dnnl_success) return s;
  dnnl_primitive_desc_t rpd;
  s = to_user ? dnnl_reorder_primitive_desc_create(&rpd, want, j->eng, user_md, j->eng, NULL)
              : dnnl_reorder_primitive_desc_create(&rpd, user_md, j->eng, want, j->eng, NULL);
  if (s != dnnl_success) return s;
  s = dnnl_primitive_create(reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return s;
}

/* Sets up oneDNN's convolution with algorithm alg on the given buffers; dnnl_unimplemented when
 * oneDNN has no implementation (e.g. Winograd on this CPU). */
static dnnl_status_t dnnl_setup(dnnl_job *j, const ts_conv_desc *d, int P, int Q, dnnl_alg_kind_t alg, float *x,
                                float *w, float *b, float *y, int nthreads) {
  memset(j, 0, sizeof *j);
  j->nthreads = nthreads;
  dnnl_status_t s;
#define DN(call)                          \
  do {                                    \
    if ((s = (call)) != dnnl_success) {   \
      dnnl_job_free(j);                   \
      return s;                           \
    }                                     \
  } while (0)
  DN(dnnl_engine_create(&j->eng, dnnl_cpu, 0));
  DN(dnnl_stream_create(&j->strm, j->eng, dnnl_stream_default_flags));
  const int g = d->groups;
  dnnl_dims_t sdims = {d->n, d->c, d->h, d->w}, ddims = {d->n, d->k, P, Q}, bdims = {d->k};
  dnnl_dims_t wdims = {d->k, d->c, d->r, d->s}, gwdims = {g, d->k / g, d->c / g, d->r, d->s};
  dnnl_dims_t strides = {d->stride_h, d->stride_w}, dil = {d->dilation_h - 1, d->dilation_w - 1};
  dnnl_dims_t pl = {d->pad_top, d->pad_left}, pr = {d->pad_bottom, d->pad_right};
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
  DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, alg, &s_any, &w_any, &b_md, &d_any,
                                                strides, dil, pl, pr));
  dnnl_primitive_desc_t pd;
  DN(dnnl_primitive_desc_create(&pd, &cd, NULL, j->eng, NULL));
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(j->impl, sizeof j->impl, "%s", impl ? impl : "?");
  const dnnl_memory_desc_t *s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *d_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  s = dnnl_primitive_create(&j->conv, pd);
  if (s == dnnl_success) s = dnnl_memory_create(&j->user_src, &s_user, j->eng, x);
  if (s == dnnl_success) s = dnnl_memory_create(&j->user_dst, &d_user, j->eng, y);
  if (s == dnnl_success) s = dnnl_memory_create(&j->user_wei, &w_user, j->eng, w);
  if (s == dnnl_success) s = dnnl_memory_create(&j->bias, &b_md, j->eng, b);
  if (s == dnnl_success) s = dnnl_match(j, j->user_src, &s_user, s_md, &j->src, &j->src_reorder, 0);
  if (s == dnnl_success) s = dnnl_match(j, j->user_dst, &d_user, d_md, &j->dst, &j->dst_reorder, 1);
  dnnl_primitive_t wr = NULL;
  if (s == dnnl_success) s = dnnl_match(j, j->user_wei, &w_user, w_md, &j->wei, &wr, 0);
  dnnl_primitive_desc_destroy(pd);
  if (s != dnnl_success) {
    if (wr) dnnl_primitive_destroy(wr);
    dnnl_job_free(j);
    return s;
  }
  if (wr) { /* weights: once, outside the timing */
    omp_set_num_threads(nthreads);
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, j->user_wei}, {DNNL_ARG_TO, j->wei}};
    dnnl_primitive_execute(wr, j->strm, 2, a);
    dnnl_stream_wait(j->strm);
    dnnl_primitive_destroy(wr);
  }
  return dnnl_success;
#undef DN
}

/* ---- one layer ---------------------------------------------------------------------------- */

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ts_bench_run plus the process CPU seconds per call (all threads, warm-up calls included): on a
 * shared machine the wall-clock median includes time the threads waited for a core; the CPU time
 * does not (and is ~threads x wall when the threads run undisturbed). */
static ts_status run_timed(const ts_bench_opts *o, void (*fn)(void *), void *arg, ts_bench_result *r, double *cpu) {
  const double c0 = cpu_now();
  const ts_status s = ts_bench_run(o, fn, arg, r);
  *cpu = s == TS_OK ? (cpu_now() - c0) / (o->warmup + r->repeats) : NAN;
  return s;
}

static float *alloc_filled(size_t n, uint64_t seed) {
  float *p = ts_malloc(n * sizeof(float));
  if (!p) return NULL;
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) p[i] = (float)ts_rng_uniform(&r) - 0.5f;
  return p;
}

static double rel_diff(const float *x, const float *ref, size_t n) {
  double dmax = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)x[i] - ref[i]);
    if (!(e <= dmax)) dmax = e;
    if (fabs(ref[i]) > m) m = fabs(ref[i]);
  }
  return m > 0 ? dmax / m : dmax;
}

enum { MAX_ROWS = TS_CONV_ALGO_COUNT + 3 };

static int bench_layer(const layer *L, ts_context *ctx, int nthreads, int with_ref, const ts_bench_opts *o,
                       const ts_machine_profile *prof, cJSON *jl) {
  const ts_conv_desc *d = &L->d;
  int P, Q;
  if (ts_conv_output_dims(d, &P, &Q) != TS_OK) return 1;
  const size_t nx = (size_t)d->n * d->c * d->h * d->w, nw = (size_t)d->k * (d->c / d->groups) * d->r * d->s,
               ny = (size_t)d->n * d->k * P * Q;
  float *x = alloc_filled(nx, 1), *w = alloc_filled(nw, 2), *b = alloc_filled(d->k, 3);
  float *y = ts_malloc(ny * sizeof(float)), *yref = ts_malloc(ny * sizeof(float));
  if (!x || !w || !b || !y || !yref) {
    fprintf(stderr, "bench_conv: out of memory for %s\n", L->name);
    ts_free(x), ts_free(w), ts_free(b), ts_free(y), ts_free(yref);
    return 1;
  }
  const double flops = ts_conv_flops(d);
  cJSON *obj = NULL, *rows = NULL;
  if (jl) {
    obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "layer", L->name);
    const int v[] = {d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_top, d->pad_left, d->groups};
    const char *nm[] = {"n", "c", "h", "w", "k", "r", "s", "pad_h", "pad_w", "groups"};
    for (int i = 0; i < 10; i++) cJSON_AddNumberToObject(obj, nm[i], v[i]);
    cJSON_AddNumberToObject(obj, "gflop", flops * 1e-9);
    rows = cJSON_AddArrayToObject(obj, "results");
    cJSON_AddItemToArray(jl, obj);
  } else {
    printf("\n%s: N=%d C=%d %dx%d -> K=%d %dx%d, kernel %dx%d, pad %dx%d, groups %d, %.3f GFLOP, %d thread(s)\n",
           L->name, d->n, d->c, d->h, d->w, d->k, P, Q, d->r, d->s, d->pad_top, d->pad_left, d->groups, flops * 1e-9,
           nthreads);
    ts_bench_print_header(stdout);
  }
  const char *names[MAX_ROWS];
  char labels[MAX_ROWS][160];
  double t[MAX_ROWS], diff[MAX_ROWS];
  int nr = 0, have_ref = 0;
  double best_dnnl = 0;
  /* oneDNN first: its auto result is the cross-check for every other contender */
  const struct { const char *name; dnnl_alg_kind_t alg; } dal[] = {
      {"onednn_auto", dnnl_convolution_auto}, {"onednn_direct", dnnl_convolution_direct},
      {"onednn_winograd", dnnl_convolution_winograd}};
  for (int i = 0; i < 3; i++) {
    dnnl_job j;
    dnnl_status_t s = dnnl_setup(&j, d, P, Q, dal[i].alg, x, w, b, y, nthreads);
    if (s != dnnl_success) {
      if (jl) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "impl", dal[i].name);
        cJSON_AddStringToObject(r, "rejected", s == dnnl_unimplemented ? "unimplemented" : "error");
        cJSON_AddItemToArray(rows, r);
      } else {
        printf("%-36s rejected by oneDNN (%s)\n", dal[i].name, s == dnnl_unimplemented ? "unimplemented" : "error");
      }
      continue;
    }
    ts_bench_result r;
    double cpu;
    if (run_timed(o, run_dnnl, &j, &r, &cpu) == TS_OK) {
      snprintf(labels[nr], sizeof labels[nr], "%s [%s]", dal[i].name, j.impl);
      if (!have_ref) memcpy(yref, y, ny * sizeof(float)), have_ref = 1;
      names[nr] = dal[i].name, t[nr] = r.median_s, diff[nr] = rel_diff(y, yref, ny);
      if (best_dnnl == 0 || r.median_s < best_dnnl) best_dnnl = r.median_s;
      if (jl) {
        cJSON *rj = ts_bench_result_json(&r, flops, 0, prof);
        cJSON_AddStringToObject(rj, "impl", dal[i].name);
        cJSON_AddStringToObject(rj, "onednn_impl", j.impl);
        cJSON_AddNumberToObject(rj, "cpu_ms_per_call", cpu * 1e3);
        cJSON_AddItemToArray(rows, rj);
      } else {
        ts_bench_print_row(stdout, labels[nr], &r, flops, 0, prof);
        printf("%-36s cpu %.3f ms/call (all threads)\n", "", cpu * 1e3);
      }
      nr++;
    }
    dnnl_job_free(&j);
  }
  const int first_ts = nr;
  for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) {
    if ((a == TS_CONV_REFERENCE && !with_ref) || ts_conv_supported(d, (ts_conv_algo)a) != TS_OK) continue;
    ts_conv_plan *pl = NULL;
    ts_status st = ts_conv_plan_create(&pl, ctx, d, (ts_conv_algo)a);
    if (st == TS_OK) st = ts_conv_plan_set_weights(pl, w, b);
    void *ws = NULL;
    const size_t wsz = pl ? ts_conv_plan_workspace_size(pl) : 0;
    if (st == TS_OK && wsz && !(ws = ts_malloc(wsz))) st = TS_ERR_OOM;
    ts_bench_result r;
    double cpu = NAN;
    ts_job job = {pl, x, y, ws};
    if (st == TS_OK) st = run_timed(o, run_tessera, &job, &r, &cpu);
    if (st != TS_OK) {
      fprintf(stderr, "bench_conv: %s %s: %s: %s\n", L->name, ts_conv_algo_name((ts_conv_algo)a), ts_strerror(st),
              ts_last_error());
    } else {
      snprintf(labels[nr], sizeof labels[nr], "tessera_%s", ts_conv_algo_name((ts_conv_algo)a));
      names[nr] = ts_conv_algo_name((ts_conv_algo)a), t[nr] = r.median_s;
      diff[nr] = have_ref ? rel_diff(y, yref, ny) : NAN;
      if (jl) {
        cJSON *rj = ts_bench_result_json(&r, flops, 0, prof);
        cJSON_AddStringToObject(rj, "impl", labels[nr]);
        cJSON_AddNumberToObject(rj, "workspace_bytes", (double)wsz);
        cJSON_AddNumberToObject(rj, "cpu_ms_per_call", cpu * 1e3);
        cJSON_AddItemToArray(rows, rj);
      } else {
        ts_bench_print_row(stdout, labels[nr], &r, flops, 0, prof);
        printf("%-36s cpu %.3f ms/call (all threads)\n", "", cpu * 1e3);
      }
      nr++;
    }
    ts_free(ws);
    ts_conv_plan_destroy(pl);
  }
  /* speed vs oneDNN's best (t_best / t: above 1 is faster than oneDNN) and agreement */
  cJSON *sj = jl ? cJSON_AddObjectToObject(obj, "speed_vs_onednn_best") : NULL;
  cJSON *dj = jl ? cJSON_AddObjectToObject(obj, "max_rel_diff_vs_onednn_auto") : NULL;
  if (!jl) printf("  speed vs oneDNN's best (t_best / t), max |diff| / max |y| vs onednn_auto:\n");
  for (int i = first_ts; i < nr; i++) {
    const double q = best_dnnl > 0 ? best_dnnl / t[i] : NAN;
    if (jl) {
      cJSON_AddNumberToObject(sj, names[i], q);
      cJSON_AddNumberToObject(dj, names[i], diff[i]);
    } else {
      printf("    %-12s %5.2fx   diff %.1e\n", names[i], q, diff[i]);
    }
  }
  ts_free(x), ts_free(w), ts_free(b), ts_free(y), ts_free(yref);
  return 0;
}

static int usage(const char *msg) {
  fprintf(stderr,
          "bench_conv: %s\nusage: bench_conv [--layers a,b,...] [--threads N] [--repeats R] [--reference] [--json]\n"
          "layers: vgg_conv3_2, resnet_1x1, resnet_3x3, inception_1x7, depthwise_3x3\n",
          msg);
  return 2;
}

int main(int argc, char **argv) {
  add_layer("vgg_conv3_2", 256, 56, 256, 3, 3, 1, 1, 1);
  add_layer("resnet_1x1", 256, 56, 64, 1, 1, 0, 0, 1);
  add_layer("resnet_3x3", 64, 56, 64, 3, 3, 1, 1, 1);
  add_layer("inception_1x7", 192, 17, 224, 1, 7, 0, 3, 1);
  add_layer("depthwise_3x3", 32, 112, 32, 3, 3, 1, 1, 32);
  const char *want = NULL;
  int nthreads = 2, with_ref = 0;
  bool json = false;
  ts_bench_opts o = ts_bench_opts_default();
  o.repeats = 5;
  for (int i = 1; i < argc; i++) {
    const char *why = NULL;
    int c = ts_bench_common_arg(argc, argv, &i, &nthreads, &o, &json, &why);
    if (c < 0) return usage(why);
    if (c > 0) continue;
    if (!strcmp(argv[i], "--reference")) with_ref = 1;
    else if (!strcmp(argv[i], "--layers") && i + 1 < argc) want = argv[++i];
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage("convolution algorithms vs oneDNN on representative layers");
      return 0;
    } else {
      return usage("unknown or incomplete option");
    }
  }
  if (want) { /* validate the list before the profile measurement */
    char *list = strdup(want);
    if (!list) return 1;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      int found = 0;
      for (int i = 0; i < nlayers; i++) found |= !strcmp(tok, layers[i].name);
      if (!found) {
        fprintf(stderr, "bench_conv: unknown layer '%s'\n", tok);
        free(list);
        return usage("--layers wants names from the list below");
      }
    }
    free(list);
  }
  ts_machine_profile prof;
  const int have = ts_bench_profile(&prof) == TS_OK;
  if (have && nthreads != prof.threads) prof.peak_gflops_fp32 = prof.peak_gflops_fp32_1t * nthreads;
  const ts_machine_profile *pp = have ? &prof : NULL;
  ts_context *ctx = NULL;
  if (ts_context_create(&ctx, nthreads) != TS_OK) {
    fprintf(stderr, "bench_conv: %s\n", ts_last_error());
    return 1;
  }
  cJSON *root = NULL, *jl = NULL;
  if (json) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "bench", "conv");
    cJSON_AddStringToObject(root, "isa", ts_isa_name(ts_isa_active()));
    cJSON_AddNumberToObject(root, "threads", nthreads);
    if (have) cJSON_AddItemToObject(root, "profile", ts_hwinfo_to_json(&prof));
    jl = cJSON_AddArrayToObject(root, "layers");
  } else {
    printf("bench_conv: isa %s, oneDNN %d.%d, %d thread(s)\n", ts_isa_name(ts_isa_active()), dnnl_version()->major,
           dnnl_version()->minor, nthreads);
    if (have)
      printf("machine profile: %s, peak %.1f GFLOP/s for %d thread(s), measured %s\n", prof.cpu_model,
             prof.peak_gflops_fp32, nthreads, prof.date);
  }
  int rc = 0;
  for (int i = 0; i < nlayers; i++) {
    if (want) {
      const size_t n = strlen(layers[i].name);
      const char *p = strstr(want, layers[i].name);
      int hit = 0;
      for (; p && !hit; p = strstr(p + 1, layers[i].name))
        hit = (p == want || p[-1] == ',') && (p[n] == ',' || p[n] == 0);
      if (!hit) continue;
    }
    rc |= bench_layer(&layers[i], ctx, nthreads, with_ref, &o, pp, jl);
  }
  if (json) {
    char *s = cJSON_Print(root);
    if (s) puts(s);
    free(s);
    cJSON_Delete(root);
  }
  ts_context_destroy(ctx);
  return rc;
}
