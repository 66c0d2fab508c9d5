/* Allocation-failure injection, SQLite-style: each create/plan/load path below runs once cleanly,
 * then again with its 1st, 2nd, 3rd, ... allocation failing, until the path no longer reaches the
 * failing allocation. Allocations counted: those through tessera's allocator hooks
 * (ts_set_allocator: ts_malloc and friends, and cJSON), and tessera's own plain
 * malloc/calloc/realloc calls, wrapped at link time (-Wl,--wrap, this program only); not the
 * libraries' own (CBC, oneDNN, FFTW, libc). Each failing run must return an error with a detail
 * message (TS_ERR_OOM, or another code where a caller reports what the failure stopped), never
 * crash, and give back every block it took through the hooks (a leak check of its own; under
 * `make sanitize` LeakSanitizer checks the plain blocks too). A run that succeeds although an
 * allocation failed is counted as "recovered", not failed (a path may do without what it could not
 * allocate; none of these does today).
 * Two modes: only the Nth allocation fails, and every allocation from the Nth on fails (the error
 * paths' own allocations fail too; not walked for the gconv ILP path, whose runs cost a CBC solve). Paths that write a file must leave neither the target nor a
 * temporary file behind when they fail. */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tessera/artifact.h"
#include "tessera/attn.h"
#include "tessera/cnn.h"
#include "tessera/conv.h"
#include "tessera/gconv.h"
#include "tessera/hwinfo.h"
#include "tessera/io.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"
#include "tessera/llm_sparse.h"
#include "tessera/nn.h"
#include "test_llm_tiny.h"

/* ---- the injecting allocator -------------------------------------------------------------- */

static long g_count;    /* allocations through the hooks in this run */
static long g_fail_at;  /* 0: none fails; else the Nth (and, persistent, every later one) */
static bool g_persist;
static long g_injected; /* failures injected in this run */
static long g_live;     /* blocks allocated and not freed */

static void *oom_alloc(void *user, size_t bytes, size_t align) {
  (void)user;
  const long n = __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
  if (g_fail_at && (n == g_fail_at || (g_persist && n > g_fail_at))) {
    __atomic_add_fetch(&g_injected, 1, __ATOMIC_RELAXED);
    errno = ENOMEM;
    return NULL;
  }
  void *p = aligned_alloc(align, bytes);
  if (p) __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
  return p;
}
static void oom_free(void *user, void *p) {
  (void)user;
  __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
  free(p);
}

/* tessera's own plain malloc/calloc/realloc calls (the readers' and planners' arrays the hooks do
 * not see): CMakeLists.txt links this program with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * so those calls in the static libraries (and this file) come here and are counted and failed in
 * the same sequence as the hooks' (libc's and the shared libraries' own calls are not wrapped). */
void *__real_malloc(size_t bytes);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t bytes);
static bool inject(void) {
  const long n = __atomic_add_fetch(&g_count, 1, __ATOMIC_RELAXED);
  if (!g_fail_at || (n != g_fail_at && !(g_persist && n > g_fail_at))) return false;
  __atomic_add_fetch(&g_injected, 1, __ATOMIC_RELAXED);
  errno = ENOMEM;
  return true;
}
void *__wrap_malloc(size_t bytes);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *p, size_t bytes);
void *__wrap_malloc(size_t bytes) { return inject() ? NULL : __real_malloc(bytes); }
void *__wrap_calloc(size_t count, size_t size) { return inject() ? NULL : __real_calloc(count, size); }
void *__wrap_realloc(void *p, size_t bytes) { return inject() ? NULL : __real_realloc(p, bytes); }

/* ---- the walk ----------------------------------------------------------------------------- */

typedef ts_status (*path_fn)(void *arg);
#define MAX_N 20000 /* a path with more allocations than this is walked that far */

/* The directory a writing path writes into (emptied before each run; must stay empty after a
 * failed one), or "" for paths that write nothing. */
static char g_outdir[1200];

static int dir_entries(const char *dir, char *first, size_t cap) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      if (n++ == 0) snprintf(first, cap, "%s", e->d_name);
  closedir(d);
  return n;
}
static void empty_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char p[1600];
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) snprintf(p, sizeof p, "%s/%s", dir, e->d_name), remove(p);
  closedir(d);
}

static void walk_mode(const char *name, path_fn f, void *arg, bool persist) {
  int oom = 0, other = 0, recovered = 0;
  char other_msg[256] = "";
  long n;
  for (n = 1; n <= MAX_N; n++) {
    if (g_outdir[0]) empty_dir(g_outdir);
    const long live0 = g_live;
    g_count = 0, g_injected = 0, g_persist = persist, g_fail_at = n;
    ts_error_clear();
    const ts_status s = f(arg);
    g_fail_at = 0;
    const long injected = g_injected;
    CHECK(g_live == live0, "%s: allocation %ld failing (%s): %ld blocks not given back", name, n,
          persist ? "and every later one" : "alone", g_live - live0);
    if (getenv("TS_OOM_VERBOSE")) /* every run: what the failure of allocation n gave */
      printf("    %s, allocation %ld%s: %s (%s)\n", name, n, persist ? " on" : "", ts_strerror(s), s ? ts_last_error() : "");
    if (s == TS_OK) {
      if (!injected) break; /* the path no longer reaches allocation n: walked */
      recovered++;          /* a failure the path worked around */
      continue;
    }
    CHECK(injected > 0, "%s: fails (%s: %s) with no allocation failing", name, ts_strerror(s), ts_last_error());
    CHECK(ts_last_error()[0] != 0, "%s: allocation %ld failing: %s with an empty message", name, n, ts_strerror(s));
    if (s == TS_ERR_OOM) oom++;
    else if (other++ == 0) snprintf(other_msg, sizeof other_msg, "%s: %s", ts_strerror(s), ts_last_error());
    if (g_outdir[0]) {
      char first[256] = "";
      const int left = dir_entries(g_outdir, first, sizeof first);
      CHECK(left == 0, "%s: allocation %ld failing leaves %d file(s) behind (%s)", name, n, left, first);
    }
  }
  printf("  %-34s %-10s %4ld runs: %d TS_ERR_OOM, %d other errors, %d recovered%s%s\n", name,
         persist ? "from N on" : "Nth only", n - 1, oom, other, recovered, other ? "; e.g. " : "", other_msg);
}

static bool g_nth_only; /* walk only the "Nth only" mode (the next walk) */

static void walk(const char *name, path_fn f, void *arg) {
  /* TS_OOM_ONLY=text: walk only the paths whose name holds it (for a closer look, e.g. under
   * valgrind or gdb); TS_OOM_VERBOSE=1 prints every run's status */
  const char *only = getenv("TS_OOM_ONLY");
  if (only && *only && !strstr(name, only)) {
    g_nth_only = false;
    return;
  }
  if (g_outdir[0]) empty_dir(g_outdir);
  /* clean runs first: the path works, and a second run gives back what it takes (the first may
   * fill process-wide caches) */
  g_fail_at = 0, g_count = 0;
  ts_status s = f(arg);
  CHECK(s == TS_OK, "%s without failures: %s (%s)", name, ts_strerror(s), ts_last_error());
  if (s != TS_OK) return;
  const long live0 = g_live;
  g_count = 0;
  s = f(arg);
  CHECK(s == TS_OK && g_live == live0, "%s, second clean run: %s, %ld blocks not given back", name, ts_strerror(s),
        g_live - live0);
  CHECK(g_count > 0, "%s: allocates nothing that can be made to fail", name);
  if (g_count == 0) return;
  walk_mode(name, f, arg, false);
  if (!g_nth_only) walk_mode(name, f, arg, true);
  g_nth_only = false;
}

/* walk() for a path that writes the artifact store, whose failed stores are notes on stderr
 * ("tessera: could not store ...", not errors): those lines are counted, not shown; every other
 * line (a failed CHECK) is passed on. */
static void walk_store(const char *name, path_fn f, void *arg) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  const int saved = tmp ? dup(2) : -1;
  if (saved < 0 || dup2(fileno(tmp), 2) < 0) {
    if (saved >= 0) close(saved);
    if (tmp) fclose(tmp);
    walk(name, f, arg);
    return;
  }
  walk(name, f, arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  char line[2048];
  long notes = 0;
  while (fgets(line, sizeof line, tmp)) {
    if (!strncmp(line, "tessera: ", 9)) notes++;
    else fputs(line, stderr);
  }
  fclose(tmp);
  if (notes) printf("  %-34s %ld notes of the artifact store on stderr (not shown)\n", "", notes);
}

/* ---- paths -------------------------------------------------------------------------------- */

static ts_status p_context(void *arg) {
  (void)arg;
  ts_context *c = NULL;
  ts_status s = ts_context_create(&c, 1);
  ts_context_destroy(c);
  return s;
}

/* attention: mask from a pattern spec, a schedule, a plan; the schedule's JSON round trip */
static ts_status p_attn(void *arg) {
  const int kind = *(const int *)arg;
  ts_context *ctx = NULL;
  ts_csr csr = {0};
  ts_bitmap mask = {0};
  ts_attn_schedule s = {0}, s2 = {0};
  ts_attn_plan *pl = NULL;
  char *j = NULL;
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_pattern_generate("window2d:h=8,w=8,k=3", &csr, NULL);
  if (st == TS_OK) st = ts_csr_to_bitmap(&csr, &mask);
  if (st == TS_OK) {
    if (kind == 0) st = ts_attn_schedule_blockskip(&s, mask.rows, 16, 16);
    else if (kind == 1) st = ts_attn_schedule_dense(&s, mask.rows, 32, 32);
    else if ((st = ts_attn_schedule_alloc(&s, mask.rows, 2, 2)) == TS_OK) { /* compact and diag panels */
      s.panels[0] = (ts_attn_panel){0, 32, 0, 1};
      s.panels[1] = (ts_attn_panel){32, 32, 1, 1};
      s.segs[0] = (ts_attn_segment){0, 32, 0, (int32_t)mask.cols, 16, 32, TS_ATTN_SEG_COMPACT};
      s.segs[1] = (ts_attn_segment){32, 32, 0, (int32_t)mask.cols, 16, 16, TS_ATTN_SEG_DIAG};
    }
  }
  if (st == TS_OK) st = ts_attn_plan_create(&pl, ctx, &s, &mask, 16);
  if (st == TS_OK) st = ts_attn_schedule_to_json(&s, &j);
  if (st == TS_OK) st = ts_attn_schedule_from_json(j, &s2);
  free(j);
  ts_attn_schedule_free(&s2);
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s);
  ts_bitmap_free(&mask);
  ts_csr_free(&csr);
  ts_context_destroy(ctx);
  return st;
}

/* the ViT training step: model, mask, fixed backend, per-layer strategies (a CHECKPOINT and a
 * STORE_SCORES layer: both arena ends), one step (the backward executor made on first use) */
static ts_status p_vit_train(void *arg) {
  (void)arg;
  ts_context *ctx = NULL;
  ts_nn_vit *m = NULL;
  ts_nn_attn *a = NULL;
  ts_nn_token_mask mask = {0};
  ts_nn_vit_config c;
  static float img[2 * 3 * 32 * 32];
  const int32_t labels[2] = {1, 7};
  const ts_nn_mem_strategy strat[2] = {TS_NN_MEM_CHECKPOINT, TS_NN_MEM_STORE_SCORES};
  for (size_t i = 0; i < sizeof img / sizeof img[0]; i++) img[i] = (float)(i % 13) * 0.1f - 0.6f;
  ts_nn_attn_opts o;
  ts_nn_attn_opts_default(&o, TS_NN_ATTN_FIXED);
  o.tile = (ts_attn_tile){2, 2};
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_nn_vit_config_preset("tiny", 32, &c);
  if (st == TS_OK) st = ts_nn_vit_create(&m, ctx, &c, 2);
  if (st == TS_OK) st = ts_nn_token_mask_create("window2d:k=3", 2, 2, &mask);
  if (st == TS_OK) st = ts_nn_attn_create(&a, ctx, &mask, c.dim / c.heads, &o);
  if (st == TS_OK) st = ts_nn_vit_set_attn(m, a);
  if (st == TS_OK) st = ts_nn_vit_train_set_strategies(m, strat);
  if (st == TS_OK) st = ts_nn_vit_train_step(m, img, labels, 0.01f, NULL);
  ts_nn_attn_destroy(a);
  ts_nn_vit_destroy(m);
  ts_nn_token_mask_free(&mask);
  ts_context_destroy(ctx);
  return st;
}

/* convolution: plan, weights */
static ts_status p_conv(void *arg) {
  const ts_conv_algo a = *(const ts_conv_algo *)arg;
  ts_conv_desc d = ts_conv_desc_make(1, 8, 10, 10, 8, 3, 3);
  ts_conv_desc_set_geometry(&d, 1, 1, 1);
  if (a == TS_CONV_DEPTHWISE) d.groups = 8;
  static float w[8 * 8 * 9], bias[8];
  for (int i = 0; i < 8 * 8 * 9; i++) w[i] = (float)(i % 7) * 0.1f - 0.3f;
  ts_context *ctx = NULL;
  ts_conv_plan *pl = NULL;
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_conv_plan_create(&pl, ctx, &d, a);
  if (st == TS_OK) st = ts_conv_plan_set_weights(pl, w, bias);
  ts_conv_plan_destroy(pl);
  ts_context_destroy(ctx);
  return st;
}

/* the CNN conv plan: chosen from a profile (given: nothing measured), kept in the artifact store
 * (a private TESSERA_CACHE), read back from it; its JSON round trip */
static ts_cnn_graph *g_cnn;
static ts_conv_profile *g_cnn_prof;
static ts_status p_cnn_plan(void *arg) {
  const bool replan = *(const bool *)arg;
  ts_context *ctx = NULL;
  ts_cnn_conv_plan *p = NULL, *q = NULL;
  char *j = NULL;
  ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
  o.profile = g_cnn_prof, o.measure_missing = false, o.progress = false, o.replan = replan;
  o.overrides = "b=im2col";
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_cnn_conv_plan_create(&p, ctx, g_cnn, &o);
  if (st == TS_OK) st = ts_cnn_conv_plan_to_json(p, &j);
  if (st == TS_OK) st = ts_cnn_conv_plan_from_json(&q, j);
  free(j);
  ts_cnn_conv_plan_destroy(q);
  ts_cnn_conv_plan_destroy(p);
  ts_context_destroy(ctx);
  return st;
}

/* unstructured group convolution: connectivity, plan (greedy and ILP), JSON, executor */
static ts_status p_gconv(void *arg) {
  const ts_gconv_solver solver = *(const ts_gconv_solver *)arg;
  ts_gconv_layer l = {1, 16, 8, 6, 6, 1, 1};
  static float w[8 * 16];
  ts_context *ctx = NULL;
  ts_csr conn = {0};
  ts_gconv_cost *m = NULL;
  ts_gconv_plan p, q;
  memset(&p, 0, sizeof p), memset(&q, 0, sizeof q);
  ts_gconv_exec *e = NULL;
  char *j = NULL;
  ts_gconv_plan_opts o;
  ts_gconv_plan_opts_default(&o);
  o.solver = solver, o.time_limit = 30; /* the small ILPs finish long before: no timing in the outcome */
  if (solver == TS_GCONV_SOLVER_ILP) /* one candidate and its ILP (the greedy walk covers the rest) */
    o.methods[0] = TS_REORDER_NONE, o.nmethods = 1, o.ilp_candidates = 1;
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_pattern_generate("permconn:condense:cin=16,cout=8,groups=2,seed=3,seed=4", &conn, NULL);
  if (st == TS_OK) st = ts_gconv_cost_analytic(&m);
  if (st == TS_OK) st = ts_gconv_plan_make(&l, &conn, m, &o, &p);
  if (st == TS_OK) st = ts_gconv_plan_to_json(&p, &j);
  if (st == TS_OK) st = ts_gconv_plan_from_json(j, &q);
  if (st == TS_OK) st = ts_gconv_exec_create(&e, ctx, &l, &conn, p.parts, p.nparts, w);
  ts_gconv_exec_destroy(e);
  free(j);
  ts_gconv_plan_free(&q);
  ts_gconv_plan_free(&p);
  ts_gconv_cost_destroy(m);
  ts_csr_free(&conn);
  ts_context_destroy(ctx);
  return st;
}

/* a gconv plan saved to a file (the atomic write) */
typedef struct save_arg {
  ts_gconv_plan *plan;
  char path[1300];
} save_arg;
static ts_status p_gconv_save(void *arg) {
  save_arg *a = arg;
  return ts_gconv_plan_save(a->plan, a->path);
}

/* the machine profile: load, and save (the atomic write) */
static char g_profile[1300];
static ts_status p_hwinfo_load(void *arg) {
  (void)arg;
  ts_machine_profile p;
  return ts_hwinfo_load(g_profile, &p);
}
static ts_machine_profile g_prof;
static char g_profile_out[1300];
static ts_status p_hwinfo_save(void *arg) {
  (void)arg;
  return ts_hwinfo_save(&g_prof, g_profile_out);
}

/* reorderings of a relabelled window mask */
static ts_status p_reorder(void *arg) {
  const ts_reorder_method method = *(const ts_reorder_method *)arg;
  ts_csr m = {0};
  int32_t perm[64];
  ts_reorder_opts o;
  ts_reorder_opts_default(&o);
  o.method = method, o.mode = TS_REORDER_MODE_SYMMETRIC;
  ts_status st = ts_pattern_generate("permute:window2d:h=8,w=8,k=3,seed=7", &m, NULL);
  if (st == TS_OK) st = ts_reorder(&m, &o, perm, NULL, NULL);
  ts_csr_free(&m);
  return st;
}

/* GGUF, the LLM model and state, .npy, Matrix Market */
static char g_mtx[1300];
static ts_status p_mtx(void *arg) {
  (void)arg;
  ts_mm_matrix m;
  ts_status st = ts_mm_read(g_mtx, true, &m);
  if (st == TS_OK) ts_mm_free(&m);
  return st;
}
static char g_gguf[1300], g_npy[1300];
static ts_status p_gguf(void *arg) {
  (void)arg;
  ts_gguf *g = NULL;
  ts_status st = ts_gguf_open(&g, g_gguf);
  ts_gguf_close(g);
  return st;
}
static ts_status p_llm(void *arg) {
  (void)arg;
  ts_context *ctx = NULL;
  ts_llm_model *m = NULL;
  ts_llm_state *s = NULL;
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_llm_model_load(&m, g_gguf);
  if (st == TS_OK) st = ts_llm_state_create(&s, m, ctx, 32, 8);
  ts_llm_state_destroy(s);
  ts_llm_model_destroy(m);
  ts_context_destroy(ctx);
  return st;
}
/* activation sparsity on the wide tiny model (head dim 64): thresholds and a router, the sparse
 * object, a state decoding one token with it; calibration statistics and the three methods; the
 * files read back */
static char g_wide[1300], g_thfile[1300], g_rtfile[1300];
static ts_llm_model *g_wm;
static ts_status p_sparse(void *arg) {
  (void)arg;
  ts_context *ctx = NULL;
  ts_llm_thresholds *t = NULL;
  ts_llm_router *r = NULL;
  ts_llm_sparse *sp = NULL;
  ts_llm_state *s = NULL;
  ts_status st = ts_context_create(&ctx, 2);
  if (st == TS_OK) st = ts_llm_thresholds_create(&t, g_wm);
  if (st == TS_OK) st = ts_llm_router_create(&r, g_wm);
  for (int l = 0; st == TS_OK && l < 2; l++) {
    ts_llm_thresholds_layer(t, l)->act = 0.02f;
    ts_llm_thresholds_layer(t, l)->in[TS_LLM_PROJ_Q] = 0.05f;
    ts_llm_router_weights(r, l)[1] = 1;
  }
  if (st == TS_OK) st = ts_llm_sparse_create(&sp, g_wm, t, r, ctx);
  if (st == TS_OK) st = ts_llm_state_create(&s, g_wm, ctx, 16, 4);
  if (st == TS_OK) st = ts_llm_state_set_sparse(s, sp);
  const int32_t tok = 7;
  if (st == TS_OK) st = ts_llm_eval(s, &tok, 1, 0, TS_LLM_LOGITS_NONE, NULL);
  ts_llm_state_destroy(s);
  ts_llm_sparse_destroy(sp);
  ts_llm_router_destroy(r);
  ts_llm_thresholds_destroy(t);
  ts_context_destroy(ctx);
  return st;
}
static ts_status p_calib(void *arg) {
  (void)arg;
  ts_context *ctx = NULL;
  ts_llm_state *s = NULL;
  ts_llm_calib *c = NULL;
  ts_llm_thresholds *t = NULL;
  ts_llm_router *r = NULL;
  int32_t tok[64];
  for (int i = 0; i < 64; i++) tok[i] = (int32_t)(i * 37 % 200);
  ts_llm_calib_opts o = ts_llm_calib_opts_default();
  o.method = TS_LLM_SPARSE_TEAL, o.window = 32, o.proxy_tokens = 32;
  ts_status st = ts_context_create(&ctx, 1);
  if (st == TS_OK) st = ts_llm_state_create(&s, g_wm, ctx, 32, 32);
  if (st == TS_OK) st = ts_llm_calib_collect(&c, s, tok, 64, &o);
  const ts_llm_sparse_method meth[3] = {TS_LLM_SPARSE_CATS, TS_LLM_SPARSE_SATS, TS_LLM_SPARSE_TEAL};
  for (int k = 0; k < 3 && st == TS_OK; k++) {
    o.method = meth[k];
    st = ts_llm_calibrate(c, &o, &t);
    if (st == TS_OK && k < 2) st = ts_llm_router_train(c, t, &r);
    ts_llm_router_destroy(r), r = NULL;
    ts_llm_thresholds_destroy(t), t = NULL;
  }
  ts_llm_calib_destroy(c);
  ts_llm_state_destroy(s);
  ts_context_destroy(ctx);
  return st;
}
static ts_status p_sparse_files(void *arg) {
  (void)arg;
  ts_llm_thresholds *t = NULL;
  ts_llm_router *r = NULL;
  ts_status st = ts_llm_thresholds_load(&t, g_thfile, g_wm);
  if (st == TS_OK) st = ts_llm_router_load(&r, g_rtfile, g_wm);
  ts_llm_router_destroy(r);
  ts_llm_thresholds_destroy(t);
  return st;
}

static ts_status p_npy(void *arg) {
  (void)arg;
  ts_tensor t;
  ts_status st = ts_npy_read(g_npy, &t);
  if (st == TS_OK) ts_tensor_free(&t);
  return st;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  ts_allocator a = {oom_alloc, oom_free, NULL};
  ts_set_allocator(&a);
  /* the scratch files: written with no failure injected */
  char dir[1100];
  tst_tmp_path(dir, sizeof dir, "test_oom");
  CHECK_OK(ts_mkdirs(dir));
  snprintf(g_gguf, sizeof g_gguf, "%s/tiny.gguf", dir);
  snprintf(g_npy, sizeof g_npy, "%s/x.npy", dir);
  snprintf(g_profile, sizeof g_profile, "%s/machine.json", dir);
  tiny_cfg cfg = tiny_default(TS_QT_Q8_0);
  tiny_write(&cfg, g_gguf);
  ts_tensor t;
  const int64_t shape[2] = {3, 5};
  CHECK_OK(ts_tensor_alloc(&t, TS_F32, 2, shape));
  CHECK_OK(ts_npy_write(g_npy, &t));
  ts_tensor_free(&t);
  snprintf(g_mtx, sizeof g_mtx, "%s/m.mtx", dir);
  {
    int64_t r[3] = {0, 1, 2}, c[3] = {0, 0, 1};
    double v[3] = {1.5, -2, 3};
    ts_mm_matrix mm = {3, 3, 3, r, c, v, TS_MM_REAL, TS_MM_SYMMETRIC};
    CHECK_OK(ts_mm_write(g_mtx, &mm));
  }
  memset(&g_prof, 0, sizeof g_prof);
  snprintf(g_prof.cpu_model, sizeof g_prof.cpu_model, "%s", ts_cpu()->model);
  snprintf(g_prof.kernels, sizeof g_prof.kernels, "%s", ts_isa_name(ts_isa_active()));
  snprintf(g_prof.peak_isa, sizeof g_prof.peak_isa, "avx2");
  snprintf(g_prof.date, sizeof g_prof.date, "2024-05-01T12:34:56Z");
  g_prof.threads = 2, g_prof.version = TS_HWINFO_VERSION, g_prof.cpus_online = 2;
  g_prof.peak_gflops_fp32_1t = 50, g_prof.peak_gflops_fp32 = 100, g_prof.bandwidth_gbs = 20, g_prof.bandwidth_gbs_1t = 10;
  g_prof.load_avg = 0.1, g_prof.other_cpus = 0;
  CHECK_OK(ts_hwinfo_save(&g_prof, g_profile));

  printf("allocation failures injected, path by path (runs: allocations walked):\n");
  walk("context create", p_context, NULL);
  const char *attn_names[3] = {"attention plan (block skip)", "attention plan (dense)", "attention plan (compact, diag)"};
  for (int k = 0; k < 3; k++) walk(attn_names[k], p_attn, &k);
  walk("vit training step", p_vit_train, NULL);
  const ts_conv_algo algos[] = {TS_CONV_DIRECT,      TS_CONV_IM2COL,      TS_CONV_KN2ROW, TS_CONV_IMPLICIT,
                                TS_CONV_WINOGRAD_F2, TS_CONV_WINOGRAD_F4, TS_CONV_FFT,    TS_CONV_DEPTHWISE};
  for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
    char nm[64];
    snprintf(nm, sizeof nm, "conv plan + weights (%s)", ts_conv_algo_name(algos[i]));
    walk(nm, p_conv, (void *)&algos[i]);
  }
  const ts_gconv_solver solvers[2] = {TS_GCONV_SOLVER_GREEDY, TS_GCONV_SOLVER_ILP};
  walk("gconv plan + exec (greedy)", p_gconv, (void *)&solvers[0]);
  /* the ILP path: a CBC solve per run (~30 ms under ASan); its failing allocations one at a time
   * (the greedy walk above runs the shared stages in both modes) */
  g_nth_only = true;
  walk("gconv plan + exec (ILP)", p_gconv, (void *)&solvers[1]);
  { /* a small graph and a profile with its shapes; the store in a cache of its own */
    char cache[1300], was[4096] = "";
    if (getenv("TESSERA_CACHE")) snprintf(was, sizeof was, "%s", getenv("TESSERA_CACHE"));
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("TESSERA_CACHE", cache, 1);
    CHECK_OK(ts_artifact_clear("conv-plan", NULL));
    CHECK_OK(ts_cnn_graph_create(&g_cnn, "oom"));
    const ts_cnn_conv_params pa = ts_cnn_conv_params_make(8, 3, 3, 1, 1, 1), pb = ts_cnn_conv_params_make(4, 1, 1, 1, 0, 0);
    const int x = ts_cnn_input(g_cnn, 4, 8, 8), y = ts_cnn_relu(g_cnn, "a.relu", ts_cnn_conv(g_cnn, "a", x, &pa));
    ts_cnn_conv(g_cnn, "b", y, &pb);
    CHECK_OK(ts_cnn_graph_status(g_cnn));
    char ppath[1300];
    snprintf(ppath, sizeof ppath, "%s/conv_profile.json", dir);
    remove(ppath);
    CHECK_OK(ts_conv_profile_open(&g_cnn_prof, NULL, ppath, NULL));
    ts_cnn_conv_info ls[2];
    ts_cnn_plan_opts o = ts_cnn_plan_opts_default();
    CHECK(ts_cnn_conv_layers(g_cnn, &o, ls, 2) == 2, "two conv layers");
    ts_conv_profile_entry e;
    memset(&e, 0, sizeof e);
    for (int k = 0; k < TS_CONV_ALGO_COUNT; k++) e.ms[k] = NAN;
    e.ms[TS_CONV_DIRECT] = 1, e.ms[TS_CONV_WINOGRAD_F2] = 0.5, e.load_avg = -1;
    for (int k = 0; k < 2; k++) CHECK_OK(ts_conv_profile_put(g_cnn_prof, &ls[k].desc, &e));
    const bool made = true, cached = false;
    walk_store("cnn conv plan (cached)", p_cnn_plan, (void *)&cached);
    walk_store("cnn conv plan (made, stored)", p_cnn_plan, (void *)&made);
    ts_conv_profile_destroy(g_cnn_prof);
    ts_cnn_graph_destroy(g_cnn);
    if (was[0]) setenv("TESSERA_CACHE", was, 1);
    else unsetenv("TESSERA_CACHE");
  }
  walk("hwinfo profile load", p_hwinfo_load, NULL);
  walk("GGUF open (tiny model)", p_gguf, NULL);
  walk("LLM model load + state", p_llm, NULL);
  { /* activation sparsity: the wide tiny model and its files made with no failure injected */
    tiny_cfg wc = tiny_default(TS_QT_Q4_1);
    wc.d = 192, wc.ff = 256, wc.n_head = 3, wc.n_kv = 1, wc.hd = 64;
    snprintf(g_wide, sizeof g_wide, "%s/wide.gguf", dir);
    snprintf(g_thfile, sizeof g_thfile, "%s/th.json", dir);
    snprintf(g_rtfile, sizeof g_rtfile, "%s/rt.json", dir);
    tiny_write(&wc, g_wide);
    CHECK_OK(ts_llm_model_load(&g_wm, g_wide));
    ts_llm_thresholds *wt = NULL;
    ts_llm_router *r = NULL;
    if (g_wm) CHECK_OK(ts_llm_thresholds_create(&wt, g_wm));
    if (g_wm) CHECK_OK(ts_llm_router_create(&r, g_wm));
    if (wt && r) {
      ts_llm_thresholds_layer(wt, 1)->act = 0.5f;
      CHECK_OK(ts_llm_thresholds_save(wt, g_thfile));
      CHECK_OK(ts_llm_router_save(r, g_rtfile));
      walk("LLM sparse create + decode (CATS, TEAL q, router)", p_sparse, NULL);
      walk("LLM sparsity calibration (statistics, CATS, SATS, TEAL, routers)", p_calib, NULL);
      walk("LLM thresholds + router load", p_sparse_files, NULL);
    }
    ts_llm_router_destroy(r);
    ts_llm_thresholds_destroy(wt);
    ts_llm_model_destroy(g_wm);
    /* the same on a tiny gemma3 (GELU gate and post-norms: calibration's gemma3 scratch, Q5_0 up rows) */
    tiny_cfg gc = tiny_gemma(TS_QT_Q5_0);
    gc.d = 192, gc.ff = 256, gc.n_head = 4, gc.n_kv = 1, gc.hd = 64;
    snprintf(g_wide, sizeof g_wide, "%s/wide_g3.gguf", dir);
    tiny_write(&gc, g_wide);
    g_wm = NULL;
    CHECK_OK(ts_llm_model_load(&g_wm, g_wide));
    if (g_wm) {
      walk("LLM sparse create + decode on gemma3 (CATS, TEAL q, router)", p_sparse, NULL);
      walk("LLM sparsity calibration on gemma3 (statistics, CATS, SATS, TEAL, routers)", p_calib, NULL);
    }
    ts_llm_model_destroy(g_wm);
  }
  walk("npy read", p_npy, NULL);
  walk("Matrix Market read", p_mtx, NULL);
  const ts_reorder_method methods[] = {TS_REORDER_RCM, TS_REORDER_HC, TS_REORDER_IC, TS_REORDER_METIS};
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
    char nm[64];
    snprintf(nm, sizeof nm, "reorder (%s)", ts_reorder_method_name(methods[i]));
    walk(nm, p_reorder, (void *)&methods[i]);
  }

  /* writing paths: into an empty directory of their own, which a failure must leave empty */
  snprintf(g_outdir, sizeof g_outdir, "%s/out", dir);
  CHECK_OK(ts_mkdirs(g_outdir));
  snprintf(g_profile_out, sizeof g_profile_out, "%s/machine.json", g_outdir);
  walk("hwinfo profile save", p_hwinfo_save, NULL);
  {
    ts_gconv_layer l = {1, 16, 8, 6, 6, 1, 1};
    ts_csr conn;
    ts_gconv_cost *m = NULL;
    ts_gconv_plan p;
    ts_gconv_plan_opts o;
    ts_gconv_plan_opts_default(&o);
    o.solver = TS_GCONV_SOLVER_GREEDY;
    CHECK_OK(ts_pattern_generate("condense:cin=16,cout=8,groups=2,seed=3", &conn, NULL));
    CHECK_OK(ts_gconv_cost_analytic(&m));
    CHECK_OK(ts_gconv_plan_make(&l, &conn, m, &o, &p));
    save_arg sa = {&p, ""};
    snprintf(sa.path, sizeof sa.path, "%s/plan.json", g_outdir);
    walk("gconv plan save", p_gconv_save, &sa);
    ts_gconv_plan_free(&p);
    ts_gconv_cost_destroy(m);
    ts_csr_free(&conn);
  }
  empty_dir(g_outdir);
  g_outdir[0] = 0;
  ts_set_allocator(NULL);
  return tst_finish();
}
