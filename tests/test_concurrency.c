/* Concurrency: what the headers say two threads may do at once, done at once by two pthreads, with
 * results bit for bit equal to the same work done by one thread. A normal test; `make tsan` runs it
 * under ThreadSanitizer (build-tsan, TS_TSAN=ON), where a data race between the two threads fails
 * it. Every context here has one thread, so only the two pthreads run concurrently: libgomp's own
 * synchronization is invisible to TSan (it would report false races between OpenMP workers).
 *
 *   attention  attn.h: "one execute at a time per plan (the workspaces belong to the plan)", so
 *              one plan is never executed by two threads at once. What may be shared is shared: one
 *              schedule, one mask and one Q/K/V (const), from which each thread, with its own
 *              context, creates its own plan and executes it, both at the same time.
 *   conv       conv.h: "execute is re-entrant for distinct workspaces": one plan (direct and
 *              Winograd F(4x4,3x3)), executed by two threads at once, each with its own workspace.
 *   cnn plan   cnn.h: a conv plan is immutable after create: two threads read one plan (its JSON and
 *              every layer's choice) at once, each the same as one thread's.
 *   gconv      gconv.h: a cost model is read by any number of planners at once: two threads plan
 *              one connectivity with one model (greedy, and ILP over CBC), each its own plan.
 *   LLM        one model (the tiny synthetic model of test_llm_tiny.h, laid out at load for a team
 *              of 3) shared by two one-thread states: each thread tokenizes with the shared
 *              vocabulary, creates its state (a state's creation lays the shared weights out again
 *              for its team, under the model's mutex, while no other state exists) and generates
 *              greedily; then each prompt alone.
 *   LLM sparse llm_sparse.h: a sparse object is immutable after create: two states of one model
 *              decode with it on two threads at once, each the same as alone.
 * Checks run on the main thread only (the CHECK counters are not atomic). `make tsan` also sets
 * OMP_NUM_THREADS=1, so the setup's OpenMP loops (pattern generation) run no workers either. */
#include <pthread.h>

#include "tessera/attn.h"
#include "tessera/cnn.h"
#include "tessera/conv.h"
#include "tessera/gconv.h"
#include "tessera/llm_sparse.h"
#include "tessera/sparse.h"
#include "test_llm_tiny.h"

#define ROUNDS 3

/* Runs fn(a0) and fn(a1) on two pthreads released together by a barrier. -1 when a thread cannot
 * be started. */
typedef struct pair_arg {
  pthread_barrier_t *go;
  void *(*fn)(void *);
  void *arg;
} pair_arg;
static void *pair_trampoline(void *a) {
  pair_arg *p = a;
  pthread_barrier_wait(p->go);
  return p->fn(p->arg);
}
static int run_two(void *(*fn)(void *), void *a0, void *a1) {
  pthread_barrier_t go;
  if (pthread_barrier_init(&go, NULL, 2) != 0) return -1;
  pair_arg args[2] = {{&go, fn, a0}, {&go, fn, a1}};
  pthread_t t[2];
  if (pthread_create(&t[0], NULL, pair_trampoline, &args[0]) != 0) {
    pthread_barrier_destroy(&go);
    return -1;
  }
  if (pthread_create(&t[1], NULL, pair_trampoline, &args[1]) != 0) {
    pthread_barrier_wait(&go); /* release the first, then run the second here */
    fn(a1);
    pthread_join(t[0], NULL);
    pthread_barrier_destroy(&go);
    return -1;
  }
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  pthread_barrier_destroy(&go);
  return 0;
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct attn_job {
  const ts_attn_schedule *s;
  const ts_bitmap *mask;
  const float *q, *k, *v;
  float *o;
  int64_t B, H, n, d;
  ts_status st;
  char err[256];
} attn_job;

static ts_status attn_once(attn_job *j) {
  ts_context *ctx = NULL;
  ts_attn_plan *pl = NULL;
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_attn_plan_create(&pl, ctx, j->s, j->mask, j->d);
  for (int r = 0; r < ROUNDS && st == TS_OK; r++)
    st = ts_attn_execute(ctx, pl, j->q, j->k, j->v, j->o, j->B, j->H, j->n, j->d);
  if (st != TS_OK) snprintf(j->err, sizeof j->err, "%s", ts_last_error());
  ts_attn_plan_destroy(pl);
  ts_context_destroy(ctx);
  return st;
}
static void *attn_thread(void *a) {
  attn_job *j = a;
  j->st = attn_once(j);
  return NULL;
}

static void test_attention(void) {
  ts_csr csr;
  ts_bitmap mask = {0};
  CHECK_OK(ts_pattern_generate("window2d:h=16,w=16,k=5", &csr, NULL));
  CHECK_OK(ts_csr_to_bitmap(&csr, &mask));
  ts_csr_free(&csr);
  const int64_t B = 1, H = 2, n = mask.rows, d = 32, total = B * H * n * d;
  float *q = malloc((size_t)total * sizeof *q), *k = malloc((size_t)total * sizeof *k), *v = malloc((size_t)total * sizeof *v);
  float *ref = malloc((size_t)total * sizeof *ref), *o[2] = {malloc((size_t)total * sizeof(float)), malloc((size_t)total * sizeof(float))};
  tst_fill_uniform(q, (size_t)total, 1, -1, 1);
  tst_fill_uniform(k, (size_t)total, 2, -1, 1);
  tst_fill_uniform(v, (size_t)total, 3, -1, 1);
  const char *names[2] = {"block skip 16x16", "dense 32x32"};
  for (int c = 0; c < 2; c++) {
    ts_attn_schedule s;
    if (c == 0) CHECK_OK(ts_attn_schedule_blockskip(&s, n, 16, 16));
    else CHECK_OK(ts_attn_schedule_dense(&s, n, 32, 32));
    attn_job one = {&s, &mask, q, k, v, ref, B, H, n, d, TS_OK, ""};
    CHECK_OK(attn_once(&one));
    attn_job j[2];
    for (int t = 0; t < 2; t++) {
      j[t] = one;
      j[t].o = o[t];
      tst_poison(o[t], (size_t)total);
    }
    CHECK(run_two(attn_thread, &j[0], &j[1]) == 0, "attention: cannot start two threads");
    for (int t = 0; t < 2; t++) {
      CHECK(j[t].st == TS_OK, "attention %s, thread %d: %s (%s)", names[c], t, ts_strerror(j[t].st), j[t].err);
      CHECK(!memcmp(o[t], ref, (size_t)total * sizeof *ref), "attention %s, thread %d: output differs from one thread's",
            names[c], t);
    }
    ts_attn_schedule_free(&s);
  }
  free(q), free(k), free(v), free(ref), free(o[0]), free(o[1]);
  ts_bitmap_free(&mask);
}

/* ---- convolution -------------------------------------------------------------------------- */

typedef struct conv_job {
  const ts_conv_plan *pl;
  const float *in;
  float *out;
  size_t ws_bytes;
  ts_status st;
  char err[256];
} conv_job;

static void *conv_thread(void *a) {
  conv_job *j = a;
  void *ws = j->ws_bytes ? ts_malloc(j->ws_bytes) : NULL;
  j->st = j->ws_bytes && !ws ? TS_ERR_OOM : TS_OK;
  for (int r = 0; r < ROUNDS && j->st == TS_OK; r++) j->st = ts_conv_execute(j->pl, j->in, j->out, ws);
  if (j->st != TS_OK) snprintf(j->err, sizeof j->err, "%s", ts_last_error());
  ts_free(ws);
  return NULL;
}

static void test_conv(void) {
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 1));
  ts_conv_desc dsc = ts_conv_desc_make(2, 16, 12, 12, 16, 3, 3);
  ts_conv_desc_set_geometry(&dsc, 1, 1, 1);
  int P, Q;
  CHECK_OK(ts_conv_output_dims(&dsc, &P, &Q));
  const size_t nin = (size_t)dsc.n * dsc.c * dsc.h * dsc.w, nout = (size_t)dsc.n * dsc.k * P * Q;
  const size_t nw = (size_t)dsc.k * dsc.c * dsc.r * dsc.s;
  float *in = malloc(nin * sizeof *in), *w = malloc(nw * sizeof *w), *bias = malloc((size_t)dsc.k * sizeof *bias);
  float *ref = malloc(nout * sizeof *ref), *out[2] = {malloc(nout * sizeof(float)), malloc(nout * sizeof(float))};
  tst_fill_uniform(in, nin, 4, -1, 1);
  tst_fill_uniform(w, nw, 5, -0.5f, 0.5f);
  tst_fill_uniform(bias, (size_t)dsc.k, 6, -0.1f, 0.1f);
  const ts_conv_algo algos[2] = {TS_CONV_DIRECT, TS_CONV_WINOGRAD_F4};
  for (int a = 0; a < 2; a++) {
    ts_conv_plan *pl = NULL;
    CHECK_OK(ts_conv_plan_create(&pl, ctx, &dsc, algos[a]));
    if (!pl) continue;
    CHECK_OK(ts_conv_plan_set_weights(pl, w, bias));
    conv_job one = {pl, in, ref, ts_conv_plan_workspace_size(pl), TS_OK, ""};
    conv_thread(&one);
    CHECK(one.st == TS_OK, "conv %s, one thread: %s", ts_conv_algo_name(algos[a]), one.err);
    conv_job j[2] = {one, one};
    j[0].out = out[0], j[1].out = out[1];
    tst_poison(out[0], nout), tst_poison(out[1], nout);
    CHECK(run_two(conv_thread, &j[0], &j[1]) == 0, "conv: cannot start two threads");
    for (int t = 0; t < 2; t++) {
      CHECK(j[t].st == TS_OK, "conv %s, thread %d: %s (%s)", ts_conv_algo_name(algos[a]), t, ts_strerror(j[t].st), j[t].err);
      CHECK(!memcmp(out[t], ref, nout * sizeof *ref), "conv %s, thread %d: output differs from one thread's",
            ts_conv_algo_name(algos[a]), t);
    }
    ts_conv_plan_destroy(pl);
  }
  free(in), free(w), free(bias), free(ref), free(out[0]), free(out[1]);
  ts_context_destroy(ctx);
}

/* ---- CNN conv plan: one plan, two readers --------------------------------------------------- */

typedef struct cnn_plan_job {
  const ts_cnn_conv_plan *p;
  char *json;        /* the last round's JSON */
  int layers_ok;     /* layers read whose name and why are those of the plan's JSON */
  ts_status st;
} cnn_plan_job;

static void *cnn_plan_thread(void *a) {
  cnn_plan_job *j = a;
  for (int r = 0; r < ROUNDS && j->st == TS_OK; r++) {
    free(j->json), j->json = NULL;
    j->st = ts_cnn_conv_plan_to_json(j->p, &j->json);
    j->layers_ok = 0;
    for (int i = 0; j->st == TS_OK && i < ts_cnn_conv_plan_count(j->p); i++) {
      ts_cnn_conv_info ci;
      j->st = ts_cnn_conv_plan_layer(j->p, i, &ci);
      j->layers_ok += j->st == TS_OK && strstr(j->json, ci.name) && strstr(j->json, ci.why);
    }
  }
  return NULL;
}

static void test_cnn_plan(void) {
  ts_context *ctx = NULL;
  ts_cnn_graph *g = NULL;
  ts_cnn_conv_plan *p = NULL;
  CHECK_OK(ts_context_create(&ctx, 1));
  CHECK_OK(ts_cnn_model_create(&g, "vgg16", 32));
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.algo = TS_CONV_DIRECT, o.overrides = "features.conv5_*=im2col", o.progress = false;
  CHECK_OK(ts_cnn_conv_plan_create(&p, ctx, g, &o));
  if (p) {
    cnn_plan_job one = {p, NULL, 0, TS_OK};
    cnn_plan_thread(&one);
    CHECK(one.st == TS_OK && one.layers_ok == 13, "cnn plan, one thread: %s, %d layers", ts_strerror(one.st), one.layers_ok);
    cnn_plan_job j[2] = {{p, NULL, 0, TS_OK}, {p, NULL, 0, TS_OK}};
    CHECK(run_two(cnn_plan_thread, &j[0], &j[1]) == 0, "cnn plan: cannot start two threads");
    for (int t = 0; t < 2; t++) {
      CHECK(j[t].st == TS_OK && j[t].layers_ok == 13 && one.json && j[t].json && !strcmp(j[t].json, one.json),
            "cnn plan, thread %d: %s, %d layers, JSON %s", t, ts_strerror(j[t].st), j[t].layers_ok,
            one.json && j[t].json && !strcmp(j[t].json, one.json) ? "same" : "differs");
      free(j[t].json);
    }
    free(one.json);
  }
  ts_cnn_conv_plan_destroy(p);
  ts_cnn_graph_destroy(g);
  ts_context_destroy(ctx);
}

/* ---- group convolution: one cost model and connectivity, two planners ----------------------- */

typedef struct gconv_job {
  const ts_gconv_layer *l;
  const ts_csr *conn;
  const ts_gconv_cost *m;
  const ts_gconv_plan_opts *o;
  ts_gconv_plan plan;
  ts_status st;
  char err[256];
} gconv_job;

static void *gconv_thread(void *a) {
  gconv_job *j = a;
  j->st = ts_gconv_plan_make(j->l, j->conn, j->m, j->o, &j->plan);
  if (j->st != TS_OK) snprintf(j->err, sizeof j->err, "%s", ts_last_error());
  return NULL;
}

static bool same_parts(const ts_gconv_plan *a, const ts_gconv_plan *b) {
  if (a->nparts != b->nparts || a->method != b->method) return false;
  for (int32_t i = 0; i < a->nparts; i++)
    if (a->parts[i].nrows != b->parts[i].nrows || a->parts[i].nunion != b->parts[i].nunion ||
        memcmp(a->parts[i].rows, b->parts[i].rows, (size_t)a->parts[i].nrows * sizeof(int32_t)) ||
        memcmp(a->parts[i].in, b->parts[i].in, (size_t)a->parts[i].nunion * sizeof(int32_t)))
      return false;
  return true;
}

/* gconv.h: the cost model is read by any number of planners at once; each plan its own. Both
 * solvers (the ILP's limit far above what the small problem needs, so both runs end alike). */
static void test_gconv_planning(void) {
  ts_gconv_layer l = {1, 48, 24, 8, 8, 1, 1};
  ts_csr conn;
  ts_gconv_cost *m = NULL;
  CHECK_OK(ts_pattern_generate("permconn:condense:cin=48,cout=24,groups=3,seed=2,seed=5", &conn, NULL));
  CHECK_OK(ts_gconv_cost_analytic(&m));
  if (!m) return;
  for (int solver = 0; solver < 2; solver++) {
    ts_gconv_plan_opts o;
    ts_gconv_plan_opts_default(&o);
    o.solver = solver ? TS_GCONV_SOLVER_ILP : TS_GCONV_SOLVER_GREEDY, o.time_limit = 60;
    gconv_job one = {.l = &l, .conn = &conn, .m = m, .o = &o};
    gconv_thread(&one);
    CHECK(one.st == TS_OK, "gconv plan (%s), one thread: %s", ts_gconv_solver_name(o.solver), one.err);
    gconv_job j[2] = {one, one};
    memset(&j[0].plan, 0, sizeof j[0].plan), memset(&j[1].plan, 0, sizeof j[1].plan);
    CHECK(run_two(gconv_thread, &j[0], &j[1]) == 0, "gconv: cannot start two threads");
    for (int t = 0; t < 2; t++) {
      CHECK(j[t].st == TS_OK, "gconv plan (%s), thread %d: %s", ts_gconv_solver_name(o.solver), t, j[t].err);
      CHECK(j[t].st != TS_OK || same_parts(&j[t].plan, &one.plan), "gconv plan (%s), thread %d: partitions differ from one thread's",
            ts_gconv_solver_name(o.solver), t);
      ts_gconv_plan_free(&j[t].plan);
    }
    ts_gconv_plan_free(&one.plan);
  }
  ts_gconv_cost_destroy(m);
  ts_csr_free(&conn);
}

/* ---- LLM: one model, two states ----------------------------------------------------------- */

#define GEN 12
typedef struct llm_job {
  ts_llm_model *m; /* not const: ts_llm_state_create may lay the model's weights out again */
  const int32_t *prompt;
  int nprompt;
  int32_t tokens[GEN];
  float *last; /* logits of the last step [n_vocab] */
  int32_t ids[64]; /* the shared vocabulary's tokens of a fixed text */
  size_t nids;
  const ts_llm_sparse *sp; /* activation sparsity shared by the states (NULL: dense) */
  ts_status st;
  char err[256];
} llm_job;

static int32_t argmax(const float *z, int n) {
  int32_t b = 0;
  for (int i = 1; i < n; i++)
    if (z[i] > z[b]) b = i;
  return b;
}

static void *llm_thread(void *a) {
  llm_job *j = a;
  ts_context *ctx = NULL;
  ts_llm_state *s = NULL;
  static const char text[] = "Hello world, the worlds' hellos: <|im_start|>r\xC3\xA9sum\xC3\xA9 \xF0\x9F\x99\x82";
  j->st = ts_llm_tokenize(ts_llm_model_vocab(j->m), text, sizeof text - 1, true, true, j->ids, 64, &j->nids);
  if (j->st == TS_OK) j->st = ts_context_create(&ctx, 1);
  if (j->st == TS_OK) j->st = ts_llm_state_create(&s, j->m, ctx, 64, 8);
  if (j->st == TS_OK && j->sp) j->st = ts_llm_state_set_sparse(s, j->sp);
  if (j->st == TS_OK) j->st = ts_llm_eval(s, j->prompt, j->nprompt, 0, TS_LLM_LOGITS_LAST, j->last);
  const int nv = ts_llm_model_config(j->m)->n_vocab;
  for (int g = 0; g < GEN && j->st == TS_OK; g++) {
    j->tokens[g] = argmax(j->last, nv);
    j->st = ts_llm_eval(s, &j->tokens[g], 1, j->nprompt + g, TS_LLM_LOGITS_LAST, j->last);
  }
  if (j->st != TS_OK) snprintf(j->err, sizeof j->err, "%s", ts_last_error());
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
  return NULL;
}

static void test_llm_shared_model(void) {
  char path[1100];
  tst_tmp_path(path, sizeof path, "concurrency_tiny.gguf");
  tiny_cfg cfg = tiny_default(TS_QT_Q8_0);
  tiny_write(&cfg, path);
  /* the model laid out for a team of 3 at load, so the first one-thread state lays it out again
   * (under the model's mutex, while no other state uses it) with the other state being created */
  char *env = getenv("TESSERA_THREADS") ? strdup(getenv("TESSERA_THREADS")) : NULL;
  setenv("TESSERA_THREADS", "3", 1);
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (env) setenv("TESSERA_THREADS", env, 1);
  else unsetenv("TESSERA_THREADS");
  free(env);
  if (!m) return;
  const int nv = ts_llm_model_config(m)->n_vocab;
  static const int32_t prompt[2][5] = {{1, 72, 101, 108, 108}, {1, 87, 111, 114, 108}};
  llm_job one[2], two[2];
  for (int t = 0; t < 2; t++) {
    one[t] = (llm_job){.m = m, .prompt = prompt[t], .nprompt = 5, .last = malloc((size_t)nv * sizeof(float))};
    two[t] = (llm_job){.m = m, .prompt = prompt[t], .nprompt = 5, .last = malloc((size_t)nv * sizeof(float))};
  }
  CHECK(run_two(llm_thread, &two[0], &two[1]) == 0, "llm: cannot start two threads");
  for (int t = 0; t < 2; t++) { /* then each prompt alone */
    llm_thread(&one[t]);
    CHECK(one[t].st == TS_OK, "llm, prompt %d on one thread: %s", t, one[t].err);
  }
  for (int t = 0; t < 2; t++) {
    CHECK(two[t].st == TS_OK, "llm, state %d: %s (%s)", t, ts_strerror(two[t].st), two[t].err);
    CHECK(two[t].nids == one[t].nids && !memcmp(two[t].ids, one[t].ids, one[t].nids * sizeof(int32_t)),
          "llm, state %d: the shared vocabulary's tokens differ from one thread's", t);
    CHECK(!memcmp(two[t].tokens, one[t].tokens, sizeof one[t].tokens) &&
              !memcmp(two[t].last, one[t].last, (size_t)nv * sizeof(float)),
          "llm, state %d: tokens or logits differ from one thread's", t);
    free(one[t].last), free(two[t].last);
  }
  ts_llm_model_destroy(m);
  remove(path);
}

/* One sparse object (activation and input thresholds) shared read-only by two states decoding on
 * two threads at once: the same tokens and logits as each alone. */
static void test_llm_shared_sparse(void) {
  char path[1100];
  tst_tmp_path(path, sizeof path, "concurrency_sparse.gguf");
  tiny_cfg cfg = tiny_default(TS_QT_Q4_1);
  cfg.d = 192, cfg.ff = 256, cfg.n_head = 3, cfg.n_kv = 1, cfg.hd = 64;
  tiny_write(&cfg, path);
  ts_llm_model *m = NULL;
  ts_llm_thresholds *th = NULL;
  ts_llm_sparse *sp = NULL;
  ts_context *ctx = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (m) CHECK_OK(ts_llm_thresholds_create(&th, m));
  for (int l = 0; th && l < 2; l++) {
    ts_llm_thresholds_layer(th, l)->act = 0.02f;
    ts_llm_thresholds_layer(th, l)->in[TS_LLM_PROJ_O] = 0.05f;
  }
  CHECK_OK(ts_context_create(&ctx, 1));
  if (th) CHECK_OK(ts_llm_sparse_create(&sp, m, th, NULL, ctx));
  if (sp) {
    const int nv = ts_llm_model_config(m)->n_vocab;
    static const int32_t prompt[2][5] = {{1, 72, 101, 108, 108}, {1, 87, 111, 114, 108}};
    llm_job one[2], two[2];
    for (int t = 0; t < 2; t++) {
      one[t] = (llm_job){.m = m, .prompt = prompt[t], .nprompt = 5, .sp = sp, .last = malloc((size_t)nv * sizeof(float))};
      two[t] = (llm_job){.m = m, .prompt = prompt[t], .nprompt = 5, .sp = sp, .last = malloc((size_t)nv * sizeof(float))};
    }
    CHECK(run_two(llm_thread, &two[0], &two[1]) == 0, "llm sparse: cannot start two threads");
    for (int t = 0; t < 2; t++) llm_thread(&one[t]);
    for (int t = 0; t < 2; t++) {
      CHECK(two[t].st == TS_OK && one[t].st == TS_OK, "llm sparse, state %d: %s", t, two[t].err);
      CHECK(!memcmp(two[t].tokens, one[t].tokens, sizeof one[t].tokens) &&
                !memcmp(two[t].last, one[t].last, (size_t)nv * sizeof(float)),
            "llm sparse, state %d: tokens or logits differ from one thread's", t);
      free(one[t].last), free(two[t].last);
    }
  }
  ts_llm_sparse_destroy(sp);
  ts_llm_thresholds_destroy(th);
  ts_context_destroy(ctx);
  ts_llm_model_destroy(m);
  remove(path);
}

int main(void) {
  test_attention();
  test_conv();
  test_cnn_plan();
  test_gconv_planning();
  test_llm_shared_model();
  test_llm_shared_sparse();
  return tst_finish();
}
