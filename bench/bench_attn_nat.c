/* PROTOTYPE, not a tessera execution path: neighbourhood (NAT / window2d) attention with 16
 * consecutive queries of one grid row in the vector lanes and the keys addressed by their window
 * slot, so a query computes exactly its k x k keys (work ratio 1.0; the block and compact-pass
 * schedules compute 1.9-2.2x the nonzeros on window2d k = 7). It measures what a "diagonal" plan
 * family could give the scheduler on sliding-window masks in the natural token order (issue 4,
 * the effective-GFLOP/s target), side by side with a scheduled plan of the same mask.
 *
 * Layout: per head K^T and V^T ([d][n + 32], transposed inside the timed call, as a plan family
 * would have to); for query block (grid row r, columns c0..c0+15) and window row ty the keys of
 * slot tx are K^T[x][(sr + ty) w + sc_i + tx] for lane i (sc_i the lane's clamped window start:
 * NAT borders), which is one unaligned load where sc_i = sc_0 + i (interior) and a two-source
 * permute of two loads at the borders. Q K^T, softmax (exp via ts_vexp), P V with O^T in the lanes,
 * then O^T transposed back. fp32, AVX-512, head dim 64.
 *
 *   bench_attn_nat [--grid H,W] [--k K] [--heads H] [--threads N] [--rounds R] [--plan FILE]
 *
 * --plan: a plan JSON of the same mask (`tessera attn plan --pattern window2d:h=H,w=W,k=K --heads H
 * --head-dim 64 --threads N --out FILE`), executed interleaved with the prototype (its own token
 * order; random Q, K, V either way): the ratio per round, median. Correctness: the prototype's O
 * against ts_attn_reference on heads 0-1 (max abs error printed). */
/* built with the base AVX-512 flags (CMakeLists.txt): it calls the AVX-512 attention kernels' inline
 * pieces directly */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/simd_avx512.h"
#include "attn/attn_internal.h"
#include "harness.h"
#include "harness_attn.h"
#include "tessera/attn.h"
#include "tessera/attn_sched.h"
#include "tessera/kernels.h"
#include "tessera/sparse.h"

#define D 64
#define PAD 32

typedef struct nat {
  int64_t h, w, n, heads;
  int k;
  float *kt, *vt; /* [heads][D][ldt] */
  int64_t ldt;
} nat;

static inline int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/* One block: 16 queries of grid row r from column c0 (lanes past the row repeat its last query and
 * are not stored). q, o: the head's [n][D]; kt, vt: the head's [D][ldt]. ws: (k*k + 2*D) * 16 floats. */
#define NAT_BLOCK(KK)                                                                                        \
  static void nat_block_##KK(const nat *g, const float *q, const float *kt, const float *vt, int r, int c0,   \
                             float *o, float *ws) {                                                          \
    const int k = KK, R = KK / 2, w = (int)g->w, nl = w - c0 < 16 ? w - c0 : 16;                             \
    const int64_t ldt = g->ldt;                                                                              \
    float *S = ws, *qt = ws + KK * KK * 16, *ot = qt + D * 16;                                               \
    ts__attn_kern_avx512.pack_q(q + ((int64_t)r * w + c0) * D, nl, D, 16, qt);                               \
    const int sr = clampi(r - R, 0, (int)g->h - k);                                                          \
    int sc[16];                                                                                              \
    for (int i = 0; i < 16; i++) sc[i] = clampi((i < nl ? c0 + i : c0 + nl - 1) - R, 0, w - k);             \
    const int base = sc[0];                                                                                  \
    bool interior = true;                                                                                    \
    for (int i = 0; i < 16; i++) interior &= sc[i] == base + i;                                              \
    __m512i idx[KK];                                                                                         \
    for (int tx = 0; tx < k; tx++) {                                                                         \
      int32_t v[16];                                                                                         \
      for (int i = 0; i < 16; i++) v[i] = sc[i] - base + tx;                                                 \
      idx[tx] = _mm512_loadu_si512(v);                                                                       \
    }                                                                                                        \
    /* S[(ty k + tx)][lane] = q_lane . key(ty, tx)_lane */                                                   \
    for (int ty = 0; ty < k; ty++) {                                                                         \
      const float *kr = kt + (int64_t)(sr + ty) * w + base;                                                  \
      __m512 acc[KK];                                                                                        \
      for (int tx = 0; tx < k; tx++) acc[tx] = _mm512_setzero_ps();                                          \
      if (interior) {                                                                                        \
        for (int x = 0; x < D; x++) {                                                                        \
          const __m512 qv = _mm512_load_ps(qt + 16 * x);                                                     \
          const float *kx = kr + x * ldt;                                                                    \
          for (int tx = 0; tx < k; tx++) acc[tx] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kx + tx), acc[tx]);   \
        }                                                                                                    \
      } else {                                                                                               \
        for (int x = 0; x < D; x++) {                                                                        \
          const __m512 qv = _mm512_load_ps(qt + 16 * x);                                                     \
          const float *kx = kr + x * ldt;                                                                    \
          const __m512 lo = _mm512_loadu_ps(kx), hi = _mm512_loadu_ps(kx + 16);                              \
          for (int tx = 0; tx < k; tx++)                                                                     \
            acc[tx] = _mm512_fmadd_ps(qv, _mm512_permutex2var_ps(lo, idx[tx], hi), acc[tx]);                 \
        }                                                                                                    \
      }                                                                                                      \
      for (int tx = 0; tx < k; tx++) _mm512_store_ps(S + 16 * (ty * k + tx), acc[tx]);                      \
    }                                                                                                        \
    /* softmax over the k*k slots, per lane */                                                               \
    const __m512 scale = _mm512_set1_ps(1.0f / sqrtf((float)D));                                             \
    __m512 m = _mm512_set1_ps(-INFINITY);                                                                    \
    for (int s = 0; s < k * k; s++) m = _mm512_max_ps(m, _mm512_load_ps(S + 16 * s));                        \
    for (int s = 0; s < k * k; s++)                                                                          \
      _mm512_store_ps(S + 16 * s, _mm512_mul_ps(_mm512_sub_ps(_mm512_load_ps(S + 16 * s), m), scale));       \
    ts_vexp(16 * k * k, S, S);                                                                               \
    __m512 l = _mm512_setzero_ps();                                                                          \
    for (int s = 0; s < k * k; s++) l = _mm512_add_ps(l, _mm512_load_ps(S + 16 * s));                        \
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), l);                                               \
    /* O^T[e][lane] = sum over slots of p * V[key][e], 4 dims at a time */                                   \
    for (int e0 = 0; e0 < D; e0 += 4) {                                                                      \
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                            \
      for (int ty = 0; ty < k; ty++) {                                                                       \
        const float *vr = vt + (int64_t)(sr + ty) * w + base + (int64_t)e0 * ldt;                            \
        const float *ps = S + 16 * ty * k;                                                                   \
        if (interior) {                                                                                      \
          for (int tx = 0; tx < k; tx++) {                                                                   \
            const __m512 p = _mm512_load_ps(ps + 16 * tx);                                                   \
            a0 = _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + tx), a0);                                           \
            a1 = _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + ldt + tx), a1);                                     \
            a2 = _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + 2 * ldt + tx), a2);                                 \
            a3 = _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + 3 * ldt + tx), a3);                                 \
          }                                                                                                  \
        } else {                                                                                             \
          const __m512 l0 = _mm512_loadu_ps(vr), h0 = _mm512_loadu_ps(vr + 16);                              \
          const __m512 l1 = _mm512_loadu_ps(vr + ldt), h1 = _mm512_loadu_ps(vr + ldt + 16);                  \
          const __m512 l2 = _mm512_loadu_ps(vr + 2 * ldt), h2 = _mm512_loadu_ps(vr + 2 * ldt + 16);          \
          const __m512 l3 = _mm512_loadu_ps(vr + 3 * ldt), h3 = _mm512_loadu_ps(vr + 3 * ldt + 16);          \
          for (int tx = 0; tx < k; tx++) {                                                                   \
            const __m512 p = _mm512_load_ps(ps + 16 * tx);                                                   \
            a0 = _mm512_fmadd_ps(p, _mm512_permutex2var_ps(l0, idx[tx], h0), a0);                            \
            a1 = _mm512_fmadd_ps(p, _mm512_permutex2var_ps(l1, idx[tx], h1), a1);                            \
            a2 = _mm512_fmadd_ps(p, _mm512_permutex2var_ps(l2, idx[tx], h2), a2);                            \
            a3 = _mm512_fmadd_ps(p, _mm512_permutex2var_ps(l3, idx[tx], h3), a3);                            \
          }                                                                                                  \
        }                                                                                                    \
      }                                                                                                      \
      _mm512_store_ps(ot + 16 * (e0 + 0), _mm512_mul_ps(a0, inv));                                           \
      _mm512_store_ps(ot + 16 * (e0 + 1), _mm512_mul_ps(a1, inv));                                           \
      _mm512_store_ps(ot + 16 * (e0 + 2), _mm512_mul_ps(a2, inv));                                           \
      _mm512_store_ps(ot + 16 * (e0 + 3), _mm512_mul_ps(a3, inv));                                           \
    }                                                                                                        \
    /* O^T [D][16] -> the block's rows of O (through qt, free now) */                                        \
    ts__attn_kern_avx512.pack_q(ot, D, 16, D, qt);                                                           \
    memcpy(o + ((int64_t)r * w + c0) * D, qt, (size_t)nl * D * sizeof(float));                               \
  }
NAT_BLOCK(3)
NAT_BLOCK(5)
NAT_BLOCK(7)
NAT_BLOCK(9)
NAT_BLOCK(11)
NAT_BLOCK(13)

typedef void (*nat_fn)(const nat *, const float *, const float *, const float *, int, int, float *, float *);

static nat_fn nat_for(int k) {
  switch (k) {
    case 3: return nat_block_3;
    case 5: return nat_block_5;
    case 7: return nat_block_7;
    case 9: return nat_block_9;
    case 11: return nat_block_11;
    case 13: return nat_block_13;
    default: return NULL;
  }
}

/* dst[x][j] = src[j][x] for j < n, x < D (dst [D][ldt]): 16 x 16 register transposes, 16 head
 * dims at a time over all keys, so the stores go to 16 rows of dst at once (64 at once, key block
 * by key block, wrote 64 streams 16 KB apart and took as long as the attention itself). */
static void transpose_head(const float *src, int64_t n, int64_t ldt, float *dst) {
  for (int x0 = 0; x0 < D; x0 += 16)
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
      __m512 r[16];
      const int64_t nj = n - j0 < 16 ? n - j0 : 16;
      for (int a = 0; a < 16; a++) r[a] = a < nj ? _mm512_loadu_ps(src + (j0 + a) * D + x0) : _mm512_setzero_ps();
      ts__transpose16(r);
      for (int c = 0; c < 16; c++) _mm512_storeu_ps(dst + (int64_t)(x0 + c) * ldt + j0, r[c]);
    }
}

/* O = NAT attention of Q, K, V ([heads][n][D]) on nt threads: K^T and V^T per head, then the blocks. */
static void nat_forward(nat *g, const float *Q, const float *K, const float *V, float *O, int nt, float *wsall) {
  const int64_t hsz = g->n * D, tsz = D * g->ldt;
  const int nb = (int)((g->w + 15) / 16);
  nat_fn f = nat_for(g->k);
#pragma omp parallel num_threads(nt)
  {
    float *ws = wsall + (size_t)omp_get_thread_num() * (size_t)((g->k * g->k + 2 * D) * 16);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < 2 * g->heads; t++) {
      const int64_t hh = t / 2;
      if (t % 2 == 0) transpose_head(K + hh * hsz, g->n, g->ldt, g->kt + hh * tsz);
      else transpose_head(V + hh * hsz, g->n, g->ldt, g->vt + hh * tsz);
    }
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int64_t hh = 0; hh < g->heads; hh++)
      for (int64_t r = 0; r < g->h; r++)
        for (int b = 0; b < nb; b++)
          f(g, Q + hh * hsz, g->kt + hh * tsz, g->vt + hh * tsz, (int)r, 16 * b, O + hh * hsz, ws);
  }
}


int main(int argc, char **argv) {
  int threads = ts_default_threads(), rounds = 21;
  ts_bench_opts bo = ts_bench_opts_default();
  bool json = false;
  long gh = 64, gw = 64, k = 7, heads = 8;
  const char *plan_path = NULL, *why = NULL;
  for (int i = 1; i < argc; i++) {
    int c = ts_bench_common_arg(argc, argv, &i, &threads, &bo, &json, &why);
    if (c < 0) return fprintf(stderr, "bench_attn_nat: %s\n", why), 2;
    if (c > 0) continue;
    if (!strcmp(argv[i], "--grid") && i + 1 < argc) {
      if (sscanf(argv[++i], "%ld,%ld", &gh, &gw) != 2) return fprintf(stderr, "bench_attn_nat: --grid H,W\n"), 2;
    } else if (!strcmp(argv[i], "--k") && i + 1 < argc) k = atol(argv[++i]);
    else if (!strcmp(argv[i], "--heads") && i + 1 < argc) heads = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--plan") && i + 1 < argc) plan_path = argv[++i];
    else return fprintf(stderr, "bench_attn_nat: unknown option %s\n", argv[i]), 2;
  }
  if (!nat_for((int)k) || gh < k || gw < k || gw < 16 || heads < 1 || rounds < 1 || rounds > 1000)
    return fprintf(stderr, "bench_attn_nat: k in 3..13 odd, grid sides >= k (w >= 16), heads >= 1, rounds 1..1000\n"), 2;
  if (ts_isa_active() != TS_ISA_AVX512) return fprintf(stderr, "bench_attn_nat: needs AVX-512\n"), 2;
  nat g = {.h = gh, .w = gw, .n = gh * gw, .heads = heads, .k = (int)k};
  g.ldt = g.n + PAD;
  const size_t ne = (size_t)(heads * g.n * D);
  float *Q = ts_malloc(ne * 4), *K = ts_malloc(ne * 4), *V = ts_malloc(ne * 4), *O = ts_malloc(ne * 4), *R = ts_malloc(ne * 4);
  g.kt = ts_calloc((size_t)(heads * D * g.ldt), 4), g.vt = ts_calloc((size_t)(heads * D * g.ldt), 4);
  float *ws = ts_malloc((size_t)threads * (size_t)((k * k + 2 * D) * 16) * 4);
  if (!Q || !K || !V || !O || !R || !g.kt || !g.vt || !ws) return fprintf(stderr, "bench_attn_nat: out of memory\n"), 1;
  ts_rng rng;
  ts_rng_seed(&rng, 5);
  for (size_t i = 0; i < ne; i++) Q[i] = (float)(2 * ts_rng_uniform(&rng) - 1), K[i] = (float)(2 * ts_rng_uniform(&rng) - 1),
                                   V[i] = (float)(2 * ts_rng_uniform(&rng) - 1);
  char spec[96];
  snprintf(spec, sizeof spec, "window2d:h=%ld,w=%ld,k=%ld", gh, gw, k);
  /* correctness: heads 0-1 against the reference */
  ts_csr m = {0};
  ts_bitmap bm = {0};
  ts_status st = ts_pattern_generate(spec, &m, NULL);
  if (st == TS_OK) st = ts_csr_to_bitmap(&m, &bm);
  nat_forward(&g, Q, K, V, O, threads, ws);
  const int64_t hc = heads < 2 ? heads : 2;
  if (st == TS_OK) st = ts_attn_reference(&bm, Q, K, V, R, 1, hc, g.n, D);
  if (st != TS_OK) return fprintf(stderr, "bench_attn_nat: %s\n", ts_last_error()), 1;
  double err = 0;
  for (size_t i = 0; i < (size_t)(hc * g.n * D); i++) err = fmax(err, fabs((double)O[i] - (double)R[i]));
  const int64_t nnz = m.nnz;
  ts_csr_free(&m);
  ts_bitmap_free(&bm);

  ts_context *ctx = NULL;
  ts_attn_plan *plan = NULL;
  st = ts_context_create(&ctx, threads);
  if (st == TS_OK && plan_path) st = ts_bench_attn_load_plan(plan_path, ctx, spec, D, &plan, NULL);
  if (st != TS_OK) return fprintf(stderr, "bench_attn_nat: %s\n", ts_last_error()), 1;
  ts_machine_profile prof;
  bool have = ts_bench_profile(&prof) == TS_OK;
  double *tn = malloc((size_t)rounds * sizeof *tn), *tp = malloc((size_t)rounds * sizeof *tp), *rt = malloc((size_t)rounds * sizeof *rt);
  for (int w = 0; w < 2; w++) { /* warm-up */
    nat_forward(&g, Q, K, V, O, threads, ws);
    if (plan) ts_attn_execute(ctx, plan, Q, K, V, O, 1, heads, g.n, D);
  }
  for (int r = 0; r < rounds; r++) {
    double t0 = ts_now();
    nat_forward(&g, Q, K, V, O, threads, ws);
    tn[r] = ts_now() - t0;
    if (plan) {
      t0 = ts_now();
      ts_attn_execute(ctx, plan, Q, K, V, O, 1, heads, g.n, D);
      tp[r] = ts_now() - t0;
      rt[r] = tp[r] / tn[r];
    }
  }
  qsort(tn, (size_t)rounds, sizeof *tn, ts_cmp_double);
  if (plan) qsort(tp, (size_t)rounds, sizeof *tp, ts_cmp_double), qsort(rt, (size_t)rounds, sizeof *rt, ts_cmp_double);
  const double flops = 4.0 * D * (double)nnz * (double)heads, gf = flops / tn[rounds / 2] * 1e-9;
  printf("%s, %ld heads, d %d, %d threads, %d rounds (median ms; effective GFLOP/s = 4 d nnz heads / t)\n", spec, heads, D,
         threads, rounds);
  printf("  nat prototype  %8.3f ms  %7.1f GFLOP/s eff.  %5.1f%% of %.0f  work ratio 1.00  max abs err vs reference %.2e\n",
         tn[rounds / 2] * 1e3, gf, have ? ts_bench_pct_peak_flops(&prof, gf) : NAN, have ? prof.peak_gflops_fp32 : NAN, err);
  if (plan) {
    ts_attn_stats ps;
    ts_attn_plan_stats(plan, &ps);
    const double gp = flops / tp[rounds / 2] * 1e-9;
    printf("  plan %-9s %8.3f ms  %7.1f GFLOP/s eff.  %5.1f%% of %.0f  work ratio %.2f\n", "(--plan)", tp[rounds / 2] * 1e3, gp,
           have ? ts_bench_pct_peak_flops(&prof, gp) : NAN, have ? prof.peak_gflops_fp32 : NAN, ps.work_ratio);
    printf("  plan / nat per round: median %.3f [q25 %.3f, q75 %.3f]\n", rt[rounds / 2], rt[rounds / 4], rt[3 * rounds / 4]);
  }
  ts_attn_plan_destroy(plan);
  ts_context_destroy(ctx);
  free(tn), free(tp), free(rt);
  ts_free(Q), ts_free(K), ts_free(V), ts_free(O), ts_free(R), ts_free(g.kt), ts_free(g.vt), ts_free(ws);
  return err < 1e-4 ? 0 : 1;
}
