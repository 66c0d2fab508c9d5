/* The LLM decode attention work item alone, L1/L2-hot, on one thread: R query heads sharing one KV
 * head (GQA), one new position against P cached keys, the active ISA's kernel beside the scalar
 * reference (llama.cpp's dot orders, cpu_order.h; the two agree bit for bit, which this checks).
 * Hot is the compute side of decode attention. In decode the cache streams in from L3 (or
 * memory) instead, so the item is also timed with its K and V pushed out of L2 before every call
 * (a read of twice the L2 in between, untimed): the "L2-cold" column, and the rate at which it
 * then takes in its K and V (docs/notes/BENCHMARKS.md, issue 7).
 *
 *   bench_llm_att [--positions 128,512,2048] [--rows 1,2,3,4] [--hd 64,128] [--repeats R] [--json]
 *
 * Figures: median µs per item after warm-up (bench/harness.h), GFLOP/s = 4 P hd R / t (Q K^T and
 * P V, 2 flops per multiply-add; softmax not counted) and its % of the machine profile's one-thread
 * fp32 peak (`tessera hwinfo`), ns per block of 16 keys, the speedup over the reference, and the
 * L2-cold median with its K and V GB/s (against the profile's one-thread read rate). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/llm_internal.h"

typedef struct job {
  ts__att_fn fn;
  const ts__att_item *it;
} job;

static void run(void *arg) {
  const job *j = arg;
  j->fn(j->it);
}

/* Before a timed L2-cold call: a read of the eviction buffer (2 x L2), which pushes the item's K and
 * V out of L2 (into L3, where decode finds them) */
typedef struct evict {
  const float *p;
  size_t n;
  volatile float sink;
} evict;
static void evict_l2(void *arg) {
  evict *e = arg;
  float acc = 0;
  for (size_t i = 0; i < e->n; i += 16) acc += e->p[i];
  e->sink += acc;
}

int main(int argc, char **argv) {
  int P[16] = {128, 512, 2048}, np = 3, R[8] = {1, 2, 3, 4}, nr = 4, HD[4] = {64, 128}, nh = 2, threads = 1;
  bool json = false;
  ts_bench_opts o = ts_bench_opts_default();
  o.min_time_s = 0.1;
  for (int i = 1; i < argc; i++) {
    const char *why = NULL;
    const int c = ts_bench_common_arg(argc, argv, &i, &threads, &o, &json, &why);
    if (c > 0) continue;
    if (c < 0) {
      fprintf(stderr, "bench_llm_att: %s\n", why);
      return 2;
    }
    if (!strcmp(argv[i], "--positions") && i + 1 < argc) np = ts_bench_parse_ints(argv[++i], P, 16, 1, 1 << 16);
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) nr = ts_bench_parse_ints(argv[++i], R, 8, 1, TS__ATT_ROWS);
    else if (!strcmp(argv[i], "--hd") && i + 1 < argc) nh = ts_bench_parse_ints(argv[++i], HD, 4, 16, 256);
    else np = -1;
    if (np < 1 || nr < 1 || nh < 1) {
      fprintf(stderr, "usage: bench_llm_att [--positions 128,512,2048] [--rows 1,2,3,4] [--hd 64,128] [--repeats R] "
                      "[--json]\n");
      return 2;
    }
  }
  ts_machine_profile prof;
  const bool have = ts_bench_profile(&prof) == TS_OK;
  const ts__att_fn fast = ts__llm_ops_active()->att;
  evict ev = {NULL, (size_t)(have && prof.l2_bytes > 0 ? 2 * prof.l2_bytes : 4 << 20) / sizeof(float), 0};
  float *evbuf = ts_calloc(ev.n, sizeof(float)); /* written: real pages, not the shared zero page */
  if (!evbuf) {
    fprintf(stderr, "bench_llm_att: out of memory\n");
    return 1;
  }
  ev.p = evbuf;
  ts_bench_opts oc = o; /* L2-cold: at least 51 timed calls, each after evict_l2 */
  oc.repeats = o.repeats > 51 ? o.repeats : 51;
  oc.min_time_s = 0;
  oc.before = evict_l2;
  oc.before_arg = &ev;
  cJSON *root = json ? cJSON_CreateArray() : NULL;
  if (!json)
    printf("decode attention item, one thread; kernels %s; peak %.1f GFLOP/s and read %.1f GB/s on one thread\n"
           "%-22s %10s %10s %8s %9s %8s %9s %12s %8s %8s\n",
           ts_isa_name(ts_isa_active()), have ? prof.peak_gflops_fp32_1t : 0.0, have ? prof.bandwidth_gbs_1t : 0.0,
           "item", "ref us", "hot us", "GFLOP/s", "% peak1t", "ns/blk", "vs ref", "L2-cold us", "KV GB/s", "% read1t");
  int fail = 0;
  ts_rng rng;
  ts_rng_seed(&rng, 3);
  for (int hi = 0; hi < nh; hi++)
    for (int pi = 0; pi < np; pi++)
      for (int ri = 0; ri < nr; ri++) {
        const int hd = HD[hi], pos = P[pi] - 1, m = R[ri];
        const int kcap = (pos + 1 + 15) & ~15;
        const int64_t lds = ((pos + 1 + 63) & ~63) + 64;
        uint16_t *K = ts_malloc((size_t)kcap * (size_t)hd * 2), *V = ts_malloc((size_t)kcap * (size_t)hd * 2);
        float *q = ts_malloc((size_t)m * (size_t)hd * sizeof(float)), *S = ts_malloc((size_t)m * (size_t)lds * sizeof(float));
        float *o0 = ts_malloc((size_t)m * (size_t)hd * sizeof(float)), *o1 = ts_malloc((size_t)m * (size_t)hd * sizeof(float));
        if (!K || !V || !q || !S || !o0 || !o1) {
          fprintf(stderr, "bench_llm_att: out of memory\n");
          return 1;
        }
        for (int i = 0; i < kcap * hd; i++) {
          K[i] = ts_f32_to_f16(ts_rng_normal(&rng) * 0.3f);
          V[i] = ts_f32_to_f16(ts_rng_normal(&rng));
        }
        for (int i = 0; i < m * hd; i++) q[i] = ts_rng_normal(&rng);
        ts__att_item it = {.m = m, .hd = hd, .p0 = pos, .dp = 0, .one = 1, .scale = 1.0f / 8.0f, .q = q, .ldq = hd,
                           .KT = K, .V = V, .S = S, .lds = lds, .out = o0, .ldo = hd};
        ts__att_item_ref(&it);
        ts__att_item it1 = it;
        it1.out = o1;
        fast(&it1);
        const bool same = !memcmp(o0, o1, (size_t)m * (size_t)hd * sizeof(float));
        fail += !same;
        ts_bench_result rr, rf, rc;
        job jr = {ts__att_item_ref, &it}, jf = {fast, &it1};
        if (ts_bench_run(&o, run, &jr, &rr) != TS_OK || ts_bench_run(&o, run, &jf, &rf) != TS_OK ||
            ts_bench_run(&oc, run, &jf, &rc) != TS_OK) {
          fprintf(stderr, "bench_llm_att: %s\n", ts_last_error());
          return 1;
        }
        const double flops = 4.0 * (pos + 1) * hd * m, gf = flops / rf.median_s * 1e-9;
        const double pct = have && prof.peak_gflops_fp32_1t > 0 ? 100 * gf / prof.peak_gflops_fp32_1t : 0;
        const double nsblk = rf.median_s * 1e9 / (kcap / 16);
        const double cold = rc.median_s;
        const double kvb = ((double)kcap + (pos + 1)) * hd * 2, kvgbs = cold > 0 ? kvb / cold * 1e-9 : 0;
        const double kvpct = have && prof.bandwidth_gbs_1t > 0 ? 100 * kvgbs / prof.bandwidth_gbs_1t : 0;
        char name[64];
        snprintf(name, sizeof name, "hd%d P%d R%d%s", hd, pos + 1, m, same ? "" : " DIFFERS");
        if (json) {
          cJSON *e = cJSON_CreateObject();
          cJSON_AddNumberToObject(e, "hd", hd);
          cJSON_AddNumberToObject(e, "positions", pos + 1);
          cJSON_AddNumberToObject(e, "rows", m);
          cJSON_AddNumberToObject(e, "ref_us", rr.median_s * 1e6);
          cJSON_AddNumberToObject(e, "us", rf.median_s * 1e6);
          cJSON_AddNumberToObject(e, "gflops", gf);
          cJSON_AddNumberToObject(e, "pct_peak_1t", pct);
          cJSON_AddNumberToObject(e, "ns_per_block", nsblk);
          cJSON_AddNumberToObject(e, "speedup", rr.median_s / rf.median_s);
          cJSON_AddNumberToObject(e, "l2_cold_us", cold * 1e6);
          cJSON_AddNumberToObject(e, "kv_gbs", kvgbs);
          cJSON_AddNumberToObject(e, "pct_read_1t", kvpct);
          cJSON_AddBoolToObject(e, "bitwise_equal", same);
          cJSON_AddItemToArray(root, e);
        } else
          printf("%-22s %10.2f %10.3f %8.1f %8.1f%% %8.1f %8.1fx %12.3f %8.1f %7.1f%%\n", name, rr.median_s * 1e6,
                 rf.median_s * 1e6, gf, pct, nsblk, rr.median_s / rf.median_s, cold * 1e6, kvgbs, kvpct);
        ts_free(K), ts_free(V), ts_free(q), ts_free(S), ts_free(o0), ts_free(o1);
      }
  ts_free(evbuf);
  if (json) {
    ts_bench_print_json(root);
    cJSON_Delete(root);
  }
  if (fail) fprintf(stderr, "bench_llm_att: %d item(s) differ from the reference\n", fail);
  return fail ? 1 : 0;
}
