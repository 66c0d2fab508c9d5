/* libFuzzer harness for tessera's JSON file readers (the files the cache directory holds): any JSON
 * document goes through every reader -- the attention schedule, the attention plan document (desc,
 * permutation, schedule), the attention tile profile, the machine profile, the gconv plan and the
 * gconv profile, the conv algorithm profile, the CUDA attention costs, the ViT training memory
 * planner's block timings, the CNN conv plan (its public
 * string reader), the plan3d model, cluster, profile and plan (public string readers), the pipeline
 * tuner's offline granularity table (artifact pipe-gran), the hybrid room's device model (artifact
 * hybrid-device; its public string reader) and its map-result parser (the text a Spark task prints,
 * for gemm and kmeans jobs) -- and
 * each must either accept it or fail cleanly (no crash, leak or UB, and an
 * error message); what a reader with a writer accepts must survive writing and reading again and
 * write the same JSON the second time. A document that is not JSON is the cJSON parser's business
 * (and is rejected before the cJSON readers run); the public string readers (ts_*_from_json) get
 * every input as text, JSON or not, and must accept it or fail cleanly too. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "attn/sched_internal.h"
#include "conv/conv_internal.h"
#include "core/artifact_internal.h"
#include "cuda/attn_cuda_internal.h"
#include "gconv/gconv_internal.h"
#include "nn/nn_internal.h"
#include "pipe/pipe_internal.h"
#include "tessera/llm_sparse.h"
#include "tessera/attn.h"
#include "tessera/attn_profile.h"
#include "tessera/attn_sched.h"
#include "tessera/attn_cuda.h"
#include "tessera/cnn.h"
#include "tessera/llm_sparse.h"
#include "tessera/conv.h"
#include "tessera/gconv.h"
#include "tessera/hwinfo.h"
#include "tessera/plan3d.h"
#include "tessera/hybrid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a failing reader must say why */
static void failed_cleanly(ts_status s) {
  if (s != TS_OK && !ts_last_error()[0]) __builtin_trap();
}

/* j1 and j2 print the same (then both are deleted) */
static void same_json(cJSON *j1, cJSON *j2) {
  if (!j1 || !j2) __builtin_trap();
  char *a = cJSON_PrintUnformatted(j1), *b = cJSON_PrintUnformatted(j2);
  if (!a || !b || strcmp(a, b) != 0) __builtin_trap();
  free(a), free(b);
  cJSON_Delete(j1), cJSON_Delete(j2);
}

static void schedule(const cJSON *j) {
  ts_attn_schedule s;
  memset(&s, 0, sizeof s);
  ts_status st = ts__attn_schedule_from_cjson(j, &s);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = ts__attn_schedule_to_cjson(&s);
  ts_attn_schedule t;
  memset(&t, 0, sizeof t);
  if (!o || ts__attn_schedule_from_cjson(o, &t) != TS_OK) __builtin_trap();
  same_json(o, ts__attn_schedule_to_cjson(&t));
  ts_attn_schedule_free(&s);
  ts_attn_schedule_free(&t);
}

static void plan_document(const cJSON *j) {
  ts_attn_plan_desc d;
  int32_t *perm = (int32_t *)&d; /* must come back NULL or allocated */
  ts_attn_schedule s;
  ts_status st = ts__attn_plan_parse(j, "fuzz.json", NULL, &d, &perm, &s);
  failed_cleanly(st);
  if (st != TS_OK && (perm || s.panels || s.segs)) __builtin_trap(); /* nothing left allocated */
  ts_free(perm);
  ts_attn_schedule_free(&s);
}

static void attn_profile(const cJSON *j) {
  ts_attn_profile p;
  memset(&p, 0, sizeof p);
  ts_status st = ts__attn_profile_from_cjson(j, &p);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = ts__attn_profile_to_cjson(&p);
  ts_attn_profile q;
  memset(&q, 0, sizeof q);
  if (!o || ts__attn_profile_from_cjson(o, &q) != TS_OK) __builtin_trap();
  same_json(o, ts__attn_profile_to_cjson(&q));
  ts_attn_profile_free(&p);
  ts_attn_profile_free(&q);
}

static void machine_profile(const cJSON *j) {
  ts_machine_profile p, q;
  ts_status st = ts__hwinfo_from_cjson(j, &p);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = ts__hwinfo_to_cjson(&p);
  if (!o || ts__hwinfo_from_cjson(o, &q) != TS_OK) __builtin_trap();
  same_json(o, ts__hwinfo_to_cjson(&q));
}

static void gconv_plan(const cJSON *j) {
  ts_gconv_plan p, q;
  ts_status st = ts__gconv_plan_from_cjson(j, "fuzz.json", &p);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = NULL, *o2 = NULL;
  if (ts__gconv_plan_to_cjson(&p, &o) != TS_OK || ts__gconv_plan_from_cjson(o, "re.json", &q) != TS_OK ||
      ts__gconv_plan_to_cjson(&q, &o2) != TS_OK)
    __builtin_trap();
  same_json(o, o2);
  ts_gconv_plan_free(&p);
  ts_gconv_plan_free(&q);
}

static void gconv_profile(const cJSON *j) {
  ts_gconv_profile p;
  ts_status st = ts__gconv_profile_from_json(j, "fuzz.json", &p);
  failed_cleanly(st);
  if (st != TS_OK && p.seconds) __builtin_trap();
  ts_gconv_profile_free(&p);
}

/* entries of a conv profile opened empty for this machine (no file at that path) */
static void conv_profile(const cJSON *j) {
  ts_conv_profile *p = NULL;
  bool stale = false;
  if (ts_conv_profile_open(&p, NULL, "/nonexistent/tessera-fuzz/conv_profile.json", &stale) != TS_OK) __builtin_trap();
  failed_cleanly(ts__conv_profile_from_json(p, j, "fuzz.json", &stale));
  ts_conv_profile_destroy(p);
}

/* the CUDA attention costs (src/cuda/attn_cuda_costs.c: plain C, linked into this harness alone) */
static void cuda_costs(const cJSON *j) {
  ts_attn_cuda_costs p, q;
  ts_status st = ts__cuda_costs_from_json(j, "fuzz.json", &p);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = ts__cuda_costs_to_json(&p);
  if (!o || ts__cuda_costs_from_json(o, "re.json", &q) != TS_OK) __builtin_trap();
  same_json(o, ts__cuda_costs_to_json(&q));
}

/* the public string forms: any text, NUL-terminated; what parses must print back */
static void public_strings(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1), *o = NULL;
  if (!text) return;
  memcpy(text, data, size);
  text[size] = 0;
  ts_attn_schedule s;
  ts_status st = ts_attn_schedule_from_json(text, &s);
  failed_cleanly(st);
  if (st == TS_OK && ts_attn_schedule_to_json(&s, &o) != TS_OK) __builtin_trap();
  ts_attn_schedule_free(&s), free(o), o = NULL;
  ts_attn_profile ap;
  st = ts_attn_profile_from_json(text, &ap);
  failed_cleanly(st);
  if (st == TS_OK && ts_attn_profile_to_json(&ap, &o) != TS_OK) __builtin_trap();
  ts_attn_profile_free(&ap), free(o), o = NULL;
  ts_machine_profile mp;
  st = ts_hwinfo_from_json(text, &mp);
  failed_cleanly(st);
  if (st == TS_OK && ts_hwinfo_to_json(&mp, &o) != TS_OK) __builtin_trap();
  free(o), o = NULL;
  ts_gconv_plan gp;
  st = ts_gconv_plan_from_json(text, &gp);
  failed_cleanly(st);
  if (st == TS_OK && ts_gconv_plan_to_json(&gp, &o) != TS_OK) __builtin_trap();
  ts_gconv_plan_free(&gp), free(o), o = NULL;
  ts_cnn_conv_plan *cp = NULL, *cq = NULL; /* the CNN conv plan: what it accepts writes back the same twice */
  char *o2 = NULL;
  st = ts_cnn_conv_plan_from_json(&cp, text);
  failed_cleanly(st);
  if (st == TS_OK && (ts_cnn_conv_plan_to_json(cp, &o) != TS_OK || ts_cnn_conv_plan_from_json(&cq, o) != TS_OK ||
                      ts_cnn_conv_plan_to_json(cq, &o2) != TS_OK || strcmp(o, o2) != 0))
    __builtin_trap();
  ts_cnn_conv_plan_destroy(cp), ts_cnn_conv_plan_destroy(cq), free(o), free(o2);
  o = o2 = NULL;
  /* activation-sparsity thresholds and routers (no model: the format alone): what they accept
   * writes back, reads again and writes the same */
  ts_llm_thresholds *th = NULL, *th2 = NULL;
  st = ts_llm_thresholds_from_json(&th, text, NULL);
  failed_cleanly(st);
  if (st != TS_OK && th) __builtin_trap();
  if (st == TS_OK && (ts_llm_thresholds_to_json(th, &o) != TS_OK || ts_llm_thresholds_from_json(&th2, o, NULL) != TS_OK ||
                      ts_llm_thresholds_to_json(th2, &o2) != TS_OK || strcmp(o, o2) != 0))
    __builtin_trap();
  ts_llm_thresholds_destroy(th), ts_llm_thresholds_destroy(th2), free(o), free(o2);
  o = o2 = NULL;
  ts_llm_router *rt = NULL, *rt2 = NULL;
  st = ts_llm_router_from_json(&rt, text, NULL);
  failed_cleanly(st);
  if (st == TS_OK && (ts_llm_router_to_json(rt, &o) != TS_OK || ts_llm_router_from_json(&rt2, o, NULL) != TS_OK ||
                      ts_llm_router_to_json(rt2, &o2) != TS_OK || strcmp(o, o2) != 0))
    __builtin_trap();
  ts_llm_router_destroy(rt), ts_llm_router_destroy(rt2), free(o), free(o2);
  o = o2 = NULL;
  /* plan3d inputs and plans: the model writes back and reads the same; a plan writes back and
   * reads again (its times travel as milliseconds, so the last bit may round: not compared) */
  ts_p3_model pm, pm2;
  st = ts_p3_model_from_json(text, "fuzz.json", &pm);
  failed_cleanly(st);
  if (st == TS_OK && (ts_p3_model_to_json(&pm, &o) != TS_OK || ts_p3_model_from_json(o, "o", &pm2) != TS_OK ||
                      ts_p3_model_to_json(&pm2, &o2) != TS_OK || strcmp(o, o2) != 0))
    __builtin_trap();
  free(o), free(o2);
  o = o2 = NULL;
  ts_p3_cluster pc;
  failed_cleanly(ts_p3_cluster_from_json(text, "fuzz.json", &pc));
  ts_p3_profile *pp = NULL;
  st = ts_p3_profile_from_json(text, "fuzz.json", &pp);
  failed_cleanly(st);
  if (st != TS_OK && pp) __builtin_trap();
  ts_p3_profile_destroy(pp);
  ts_p3_plan *plan = malloc(sizeof *plan), *plan2 = malloc(sizeof *plan2);
  if (plan && plan2) {
    st = ts_p3_plan_from_json(text, "fuzz.json", plan);
    failed_cleanly(st);
    if (st == TS_OK && (ts_p3_plan_to_json(plan, &o) != TS_OK || ts_p3_plan_from_json(o, "o", plan2) != TS_OK))
      __builtin_trap();
    free(o);
  }
  free(plan), free(plan2);
  free(text);
}

/* the ViT training memory planner's block timings (artifact vit-train-mem) */
static void vit_mem(const cJSON *j) {
  double t[TS_NN_MEM_COUNT], u[TS_NN_MEM_COUNT];
  ts_status st = ts__vit_mem_from_cjson(j, t);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = ts__vit_mem_to_cjson(t, 3);
  if (!o || ts__vit_mem_from_cjson(o, u) != TS_OK || memcmp(t, u, sizeof t)) __builtin_trap();
  same_json(o, ts__vit_mem_to_cjson(u, 3));
}

/* the pipeline tuner's offline granularity table (artifact pipe-gran) */
static void pipe_gran(const cJSON *j) {
  ts_pipe_tune_result r, r2;
  ts_status st = ts__pipe_tune_from_cjson(j, &r);
  failed_cleanly(st);
  if (st != TS_OK) return;
  cJSON *o = ts__pipe_tune_to_cjson(&r);
  if (!o || ts__pipe_tune_from_cjson(o, &r2) != TS_OK || r2.n != r.n || r2.best != r.best) __builtin_trap();
  for (int i = 0; i < r.n; i++)
    if (r2.e[i].tile_w != r.e[i].tile_w || r2.e[i].tile_h != r.e[i].tile_h || r2.e[i].pruned != r.e[i].pruned)
      __builtin_trap();
  same_json(o, ts__pipe_tune_to_cjson(&r2));
}

/* the hybrid device model (text), and map results through the reducers of three small jobs: what the
 * model reader accepts writes back and reads the same; a refused map result leaves the sums as they
 * were (the reducer's result is unchanged) */
static void hybrid(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1), *o = NULL, *o2 = NULL;
  if (!text) return;
  memcpy(text, data, size);
  text[size] = 0;
  ts_hybrid_device_model m, m2;
  ts_status st = ts_hybrid_device_from_json(text, &m);
  failed_cleanly(st);
  if (st == TS_OK && (ts_hybrid_device_to_json(&m, &o) != TS_OK || ts_hybrid_device_from_json(o, &m2) != TS_OK ||
                      ts_hybrid_device_to_json(&m2, &o2) != TS_OK || strcmp(o, o2) != 0))
    __builtin_trap();
  free(o), free(o2);
  static const char *specs[2] = {"gen:points=8,d=2,k=2,seed=1", "gen:records=4,in=4,out=4,seed=1"};
  static const ts_hybrid_job_kind kinds[2] = {TS_HYBRID_KMEANS, TS_HYBRID_GEMM};
  for (int q = 0; q < 2; q++) {
    ts_hybrid_job_opts jo = {.kind = kinds[q], .input = specs[q], .blocks = 2, .rounds = 1};
    ts_hybrid_job *job = NULL;
    ts_hybrid_reducer *r = NULL;
    if (ts_hybrid_job_open(&jo, &job) != TS_OK || ts_hybrid_reducer_create(job, &r) != TS_OK) __builtin_trap();
    double cent[4] = {0, 0, 1, 1};
    char *before = NULL, *after = NULL;
    size_t bl, al;
    if (ts_hybrid_reducer_result(r, cent, &before, &bl) != TS_OK) __builtin_trap();
    st = ts_hybrid_reducer_add(r, text, size);
    failed_cleanly(st);
    if (ts_hybrid_reducer_result(r, cent, &after, &al) != TS_OK) __builtin_trap();
    if (st != TS_OK && (bl != al || memcmp(before, after, bl) != 0)) __builtin_trap();
    double c2[4] = {0, 0, 1, 1}; /* kmeans: refused sums leave the centroids where they were */
    if (ts_hybrid_reducer_next_round(r, c2) != TS_OK || (st != TS_OK && memcmp(c2, cent, sizeof c2) != 0)) __builtin_trap();
    free(before), free(after);
    ts_hybrid_reducer_destroy(r);
    ts_hybrid_job_close(job);
  }
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  public_strings(data, size);
  hybrid(data, size);
  cJSON *j = cJSON_ParseWithLength((const char *)data, size);
  if (!j) return 0;
  schedule(j);
  schedule(cJSON_GetObjectItemCaseSensitive(j, "schedule")); /* a plan document's schedule */
  plan_document(j);
  attn_profile(j);
  machine_profile(j);
  gconv_plan(j);
  gconv_profile(j);
  conv_profile(j);
  cuda_costs(j);
  vit_mem(j);
  pipe_gran(j);
  cJSON_Delete(j);
  return 0;
}
