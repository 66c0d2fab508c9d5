/* fp32 GEMM side by side in one process: oneDNN dnnl_sgemm, OpenBLAS cblas_sgemm and a blocked
 * GEMM built only from ts_gemm_tile calls (naive outer blocking, no packing of A: it is there to
 * show the micro-kernel's quality at scale), then the tile micro-kernel alone on in-cache tiles,
 * single-threaded, next to oneDNN and OpenBLAS on the same small shapes.
 *
 *   bench_sgemm [--sizes 2048,1024x512x256,...] [--threads N] [--repeats R] [--no-tiles] [--json]
 *
 * Median of repeats after warm-up (bench/harness.h); GFLOP/s, % of the machine profile's peak
 * (the tile section uses the one-thread peak) and speed ratios vs oneDNN (t_onednn / t_other).
 * OPENBLAS_CORETYPE and friends are left as the environment has them. */
#include <cblas.h>
#include <dnnl.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "harness.h"
#include "kernels/kernels_internal.h"
#include "tessera/kernels.h"

/* ---- one GEMM problem ------------------------------------------------------------------ */

typedef struct gemm_job {
  int M, N, K, nthreads;
  int transb; /* B stored [N][K] */
  const float *A, *B;
  float *C;
  int inner;                      /* tile section: calls per timed repeat */
  const ts__kernel_table *kt;     /* tile section: variant to call directly */
} gemm_job;

static void run_onednn(void *arg) {
  gemm_job *j = arg;
  omp_set_num_threads(j->nthreads);
  for (int r = 0; r < j->inner; r++)
    dnnl_sgemm('N', j->transb ? 'T' : 'N', j->M, j->N, j->K, 1.0f, j->A, j->K, j->B, j->transb ? j->K : j->N,
               0.0f, j->C, j->N);
}

static void run_openblas(void *arg) {
  gemm_job *j = arg;
  for (int r = 0; r < j->inner; r++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, j->transb ? CblasTrans : CblasNoTrans, j->M, j->N, j->K, 1.0f, j->A,
                j->K, j->B, j->transb ? j->K : j->N, 0.0f, j->C, j->N);
}

/* Blocked GEMM over ts_gemm_tile: C blocks of MC x NC split over threads, k in KC steps. */
enum { BLK_MC = 128, BLK_NC = 128, BLK_KC = 256 }; /* best of a few tried on Zen 4 (1 thread, 2048^3) */
static void run_blocked(void *arg) {
  gemm_job *j = arg;
  const int M = j->M, N = j->N, K = j->K;
  const int mb = (M + BLK_MC - 1) / BLK_MC, nb = (N + BLK_NC - 1) / BLK_NC;
#pragma omp parallel for num_threads(j->nthreads) schedule(static)
  for (int b = 0; b < mb * nb; b++) {
    const int i0 = (b % mb) * BLK_MC, j0 = (b / mb) * BLK_NC;
    const int mc = M - i0 < BLK_MC ? M - i0 : BLK_MC, nc = N - j0 < BLK_NC ? N - j0 : BLK_NC;
    for (int p0 = 0; p0 < K; p0 += BLK_KC) {
      const int kc = K - p0 < BLK_KC ? K - p0 : BLK_KC;
      ts_gemm_tile(mc, nc, kc, 1.0f, j->A + (size_t)i0 * K + p0, K, j->B + (size_t)p0 * N + j0, N,
                   j->C + (size_t)i0 * N + j0, N, p0 ? TS_TILE_ACCUMULATE : TS_TILE_OVERWRITE);
    }
  }
}

/* The tile kernel on in-cache operands: `inner` accumulating calls on the same tile. */
static void run_tile(void *arg) {
  gemm_job *j = arg;
  const unsigned f = TS_TILE_ACCUMULATE | (j->transb ? TS_TILE_TRANS_B : 0);
  for (int r = 0; r < j->inner; r++)
    j->kt->gemm_tile(j->M, j->N, j->K, 1.0f, j->A, j->K, j->B, j->transb ? j->K : j->N, j->C, j->N, f);
}

/* ---- reporting ------------------------------------------------------------------------- */

typedef struct report {
  bool json;
  cJSON *list; /* array the current group's object goes into */
} report;


/* Runs one contender; prints its row or adds it to obj. Returns the median seconds (0: failed). */
static double contender(report *rep, cJSON *obj, const char *name, void (*fn)(void *), gemm_job *job,
                        const ts_bench_opts *o, double flops, const ts_machine_profile *prof) {
  ts_bench_result r;
  ts_status s = ts_bench_run(o, fn, job, &r);
  if (s != TS_OK) {
    fprintf(stderr, "bench_sgemm: %s: %s: %s\n", name, ts_strerror(s), ts_last_error());
    return 0;
  }
  double per_call = flops * job->inner;
  if (rep->json)
    cJSON_AddItemToObject(obj, name, ts_bench_result_json(&r, per_call, 0, prof));
  else
    ts_bench_print_row(stdout, name, &r, per_call, 0, prof);
  return r.median_s / job->inner;
}

static void ratios(report *rep, cJSON *obj, const char **names, const double *t, int n) {
  cJSON *rj = rep->json ? cJSON_AddObjectToObject(obj, "speed_vs_onednn") : NULL;
  if (!rep->json) printf("  speed vs oneDNN (t_onednn / t):");
  for (int i = 1; i < n; i++) {
    double q = t[0] > 0 && t[i] > 0 ? t[0] / t[i] : NAN;
    if (rj)
      cJSON_AddNumberToObject(rj, names[i], q);
    else
      printf("  %s %.2fx", names[i], q);
  }
  if (!rep->json) printf("\n");
}

static float *alloc_filled(size_t n, uint64_t seed) {
  float *p = ts_malloc(n * sizeof(float));
  if (!p) return NULL;
  ts_rng r;
  ts_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) p[i] = (float)ts_rng_uniform(&r) - 0.5f;
  return p;
}

/* Largest |x - ref| / max|ref|; a sanity check that the contenders computed the same product. */
static double rel_diff(const float *x, const float *ref, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)x[i] - ref[i]);
    if (!(e <= d)) d = e;
    if (fabs(ref[i]) > m) m = fabs(ref[i]);
  }
  return m > 0 ? d / m : d;
}

static int bench_size(report *rep, int M, int N, int K, int nthreads, const ts_bench_opts *o,
                      const ts_machine_profile *prof) {
  float *A = alloc_filled((size_t)M * K, 1), *B = alloc_filled((size_t)K * N, 2);
  float *C = ts_malloc((size_t)M * N * sizeof(float)), *C1 = ts_malloc((size_t)M * N * sizeof(float));
  if (!A || !B || !C || !C1) {
    fprintf(stderr, "bench_sgemm: out of memory for %dx%dx%d\n", M, N, K);
    ts_free(A), ts_free(B), ts_free(C), ts_free(C1);
    return 1;
  }
  const double flops = 2.0 * M * N * K;
  gemm_job job = {M, N, K, nthreads, 0, A, B, C, 1, NULL};
  cJSON *obj = NULL;
  char label[64];
  snprintf(label, sizeof label, "%dx%dx%d", M, N, K);
  if (rep->json) {
    obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "size", label);
    cJSON_AddNumberToObject(obj, "M", M), cJSON_AddNumberToObject(obj, "N", N), cJSON_AddNumberToObject(obj, "K", K);
    cJSON_AddNumberToObject(obj, "threads", nthreads);
    cJSON_AddItemToArray(rep->list, obj);
  } else {
    printf("\nC[M][N] = A[M][K] B[K][N], M x N x K = %s, %d thread(s)\n", label, nthreads);
  }
  openblas_set_num_threads(nthreads);
  const char *names[3] = {"onednn", "openblas", "tile_blocked"};
  double t[3];
  t[0] = contender(rep, obj, names[0], run_onednn, &job, o, flops, prof);
  memcpy(C1, C, (size_t)M * N * sizeof(float));
  t[1] = contender(rep, obj, names[1], run_openblas, &job, o, flops, prof);
  double d1 = rel_diff(C, C1, (size_t)M * N);
  t[2] = contender(rep, obj, names[2], run_blocked, &job, o, flops, prof);
  double d2 = rel_diff(C, C1, (size_t)M * N);
  ratios(rep, obj, names, t, 3);
  if (rep->json) {
    cJSON_AddNumberToObject(obj, "max_rel_diff_openblas", d1);
    cJSON_AddNumberToObject(obj, "max_rel_diff_tile_blocked", d2);
  } else {
    printf("  results agree with oneDNN: openblas %.1e, tile_blocked %.1e (max |diff| / max |C|)\n", d1, d2);
  }
  ts_free(A), ts_free(B), ts_free(C), ts_free(C1);
  return 0;
}

/* In-cache tiles, one thread: our tile kernel (each ISA variant the CPU has) vs oneDNN and
 * OpenBLAS called on the same shape. */
static void bench_tiles(report *rep, const ts_bench_opts *o, const ts_machine_profile *prof1) {
  static const int shapes[][4] = {
      /* M, N, K, B^T */
      {64, 64, 64, 0}, {64, 64, 64, 1}, {128, 128, 64, 0}, {128, 128, 64, 1},
      {64, 128, 128, 0}, {128, 64, 128, 1}, {48, 80, 96, 0}, {33, 65, 17, 1},
  };
  if (!rep->json) printf("\nIn-cache GEMM tiles, 1 thread, C (+)= A B or A B^T (%% of the one-thread peak)\n");
  openblas_set_num_threads(1);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], tb = shapes[s][3];
    float *A = alloc_filled((size_t)M * K, 3), *B = alloc_filled((size_t)K * N, 4);
    float *C = alloc_filled((size_t)M * N, 5);
    if (!A || !B || !C) {
      ts_free(A), ts_free(B), ts_free(C);
      continue;
    }
    const double flops = 2.0 * M * N * K;
    int inner = (int)(2e6 / flops) + 1; /* ~2 MFLOP per timed call: tens of microseconds */
    gemm_job job = {M, N, K, 1, tb, A, B, C, inner, NULL};
    char label[64];
    snprintf(label, sizeof label, "%dx%dx%d %s", M, N, K, tb ? "NT" : "NN");
    cJSON *obj = NULL;
    if (rep->json) {
      obj = cJSON_CreateObject();
      cJSON_AddStringToObject(obj, "tile", label);
      cJSON_AddItemToArray(rep->list, obj);
    } else {
      printf("tile %s\n", label);
    }
    const char *names[5] = {"onednn", "openblas", "tile_avx512", "tile_avx2", "tile_active"};
    double t[5] = {0};
    t[0] = contender(rep, obj, names[0], run_onednn, &job, o, flops, prof1);
    t[1] = contender(rep, obj, names[1], run_openblas, &job, o, flops, prof1);
    for (int isa = TS_ISA_AVX512; isa >= TS_ISA_AVX2; isa--) {
      int slot = isa == TS_ISA_AVX512 ? 2 : 3;
      if ((ts_isa)isa > ts_isa_supported()) continue;
      job.kt = ts__kernels_for((ts_isa)isa);
      t[slot] = contender(rep, obj, names[slot], run_tile, &job, o, flops, prof1);
    }
    job.kt = ts__kernels(); /* what ts_gemm_tile dispatches to (TESSERA_ISA / TESSERA_REF apply) */
    t[4] = contender(rep, obj, names[4], run_tile, &job, o, flops, prof1);
    ratios(rep, obj, names, t, 5);
    ts_free(A), ts_free(B), ts_free(C);
  }
}

/* ---- options --------------------------------------------------------------------------- */

static int parse_size(const char *s, int *M, int *N, int *K) {
  char *end;
  long v[3];
  int n = 0;
  while (n < 3) {
    errno = 0;
    v[n] = strtol(s, &end, 10);
    if (end == s || errno || v[n] < 1 || v[n] > 65536) return -1;
    n++;
    if (*end != 'x') break;
    s = end + 1;
  }
  if (*end != 0 || n == 2) return -1;
  *M = (int)v[0], *N = (int)(n == 3 ? v[1] : v[0]), *K = (int)(n == 3 ? v[2] : v[0]);
  return 0;
}

static int usage(const char *msg) {
  fprintf(stderr, "bench_sgemm: %s\nusage: bench_sgemm [--sizes S[,S...]] [--threads N] [--repeats R] [--no-tiles] [--json]\n"
                  "  S is N (square) or MxNxK; default 2048\n", msg);
  return 2;
}

int main(int argc, char **argv) {
  const char *sizes = "2048";
  int nthreads = ts_default_threads(), tiles = 1;
  report rep = {false, NULL};
  ts_bench_opts o = ts_bench_opts_default();
  for (int i = 1; i < argc; i++) {
    const char *why = NULL;
    int c = ts_bench_common_arg(argc, argv, &i, &nthreads, &o, &rep.json, &why);
    if (c < 0) return usage(why);
    if (c > 0) continue;
    if (!strcmp(argv[i], "--no-tiles")) tiles = 0;
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = argv[++i];
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage("fp32 GEMM: oneDNN, OpenBLAS and ts_gemm_tile side by side");
      return 0;
    } else {
      return usage("unknown or incomplete option");
    }
  }
  /* sizes first: a bad list fails before the (seconds-long) profile measurement */
  enum { MAX_SIZES = 32 };
  int sz[MAX_SIZES][3], nsz = 0;
  char *list = strdup(sizes);
  if (!list) return 1;
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (nsz == MAX_SIZES || parse_size(tok, &sz[nsz][0], &sz[nsz][1], &sz[nsz][2])) {
      free(list);
      return usage("--sizes wants up to 32 items N or MxNxK (1..65536), separated by commas");
    }
    nsz++;
  }
  free(list);
  ts_isa_active();
  ts_machine_profile prof, prof1, profn;
  bool have = ts_bench_profile(&prof) == TS_OK;
  /* % of peak for the thread count actually used: the profile's all-thread figure when the counts
   * match, else the one-thread figure scaled; the tile section is one thread */
  prof1 = prof, profn = prof;
  if (have) {
    prof1.peak_gflops_fp32 = prof.peak_gflops_fp32_1t, prof1.bandwidth_gbs = prof.bandwidth_gbs_1t;
    if (nthreads != prof.threads) profn.peak_gflops_fp32 = prof.peak_gflops_fp32_1t * nthreads;
  }
  const ts_machine_profile *pp = have ? &profn : NULL, *pp1 = have ? &prof1 : NULL;
  cJSON *root = NULL, *gl = NULL, *tl = NULL;
  if (rep.json) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "bench", "sgemm");
    cJSON_AddStringToObject(root, "kernels", ts_isa_name(ts_kernels_isa()));
    cJSON_AddNumberToObject(root, "threads", nthreads);
    if (have) cJSON_AddItemToObject(root, "profile", ts__hwinfo_to_cjson(&prof));
    gl = cJSON_AddArrayToObject(root, "gemm");
    tl = cJSON_AddArrayToObject(root, "tiles");
  } else {
    printf("bench_sgemm: kernels %s, oneDNN %d.%d, OpenBLAS %s\n", ts_isa_name(ts_kernels_isa()),
           dnnl_version()->major, dnnl_version()->minor, openblas_get_config());
    if (have)
      printf("machine profile: %s, peak %.1f GFLOP/s (1 thread) / %.1f (%d threads), measured %s\n", prof.cpu_model,
             prof.peak_gflops_fp32_1t, prof.peak_gflops_fp32, prof.threads, prof.date);
    else
      printf("no machine profile (%s): %% of peak left out\n", ts_last_error());
    ts_bench_print_header(stdout);
  }
  int rc = 0;
  for (int i = 0; i < nsz; i++) {
    rep.list = gl;
    rc |= bench_size(&rep, sz[i][0], sz[i][1], sz[i][2], nthreads, &o, pp);
  }
  if (tiles) {
    rep.list = tl;
    bench_tiles(&rep, &o, pp1);
  }
  if (rep.json) {
    ts_bench_print_json(root);
    cJSON_Delete(root);
  }
  return rc;
}
