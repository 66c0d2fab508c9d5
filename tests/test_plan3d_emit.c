/* plan3d emit: launch files of hand-built plans (an even split on two node types, uneven splits,
 * one stage, a TP degree per stage, a plan whose node sizes need --gpus-per-node, hostile names)
 * checked against the documented schema: the Megatron layout re-parsed with Megatron-Core's grammar
 * (src/.../pipeline_parallel_layer_layout.py, re-done here) gives the plan's stage layer counts;
 * megatron_args.sh sourced by bash gives exactly the arguments; the DeepSpeed batch sizes multiply
 * out and the partition boundaries match the split; torchrun.sh, run with a stand-in launcher,
 * passes each node its node rank, process count and the static rendezvous; refused plans write
 * nothing. With TESSERA_EMIT_KEEP=DIR the emitted files of each case stay in DIR/<case>/ with a
 * plan_expect.json (the plan's own numbers) for tests/plan3d_engines.py, which feeds them to
 * Megatron-Core's, DeepSpeed's and torchrun's own code. */
#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/artifact_internal.h"
#include "io/json_internal.h"
#include "tessera/plan3d.h"
#include "tst.h"

/* ---- plans --------------------------------------------------------------------------------- */

typedef struct spec {
  const char *name;
  int layers, dp, tp, pp, mbs, micro;
  const int *counts;            /* [pp] layers per stage */
  const int *stage_tp;          /* [pp] or NULL: tp everywhere */
  int ntypes;
  const char *const *tnames, *const *gnames;
  int nnodes;
  const int *order;             /* [nnodes] */
  const int *stage_type;        /* [pp] */
  const bool *mixed;            /* [pp] or NULL */
  bool recompute, untied;
} spec;

static void build(ts_p3_plan *p, const spec *s) {
  memset(p, 0, sizeof *p);
  ts_p3_model *m = &p->model;
  snprintf(m->name, sizeof m->name, "%s", s->name);
  m->layers = s->layers, m->hidden = 1024, m->heads = 16, m->seq = 1024, m->vocab = 50257, m->ffn = 0;
  m->bytes_per_param = 16, m->activation_bytes = 2, m->recompute = s->recompute, m->tied_embedding = !s->untied;
  m->global_batch = s->mbs * s->micro * s->dp;
  snprintf(p->cluster, sizeof p->cluster, "test-cluster");
  p->ntypes = s->ntypes;
  for (int t = 0; t < s->ntypes; t++) {
    snprintf(p->type_name[t], TS_P3_NAME, "%s", s->tnames[t]);
    snprintf(p->gpu_name[t], TS_P3_NAME, "%s", s->gnames[t]);
  }
  p->dp = s->dp, p->pp = s->pp, p->mbs = s->mbs, p->micro_batches = s->micro, p->global_batch = m->global_batch;
  p->nnodes = s->nnodes;
  for (int n = 0; n < s->nnodes; n++) p->node_order[n] = s->order[n], p->node_counts[s->order[n]]++;
  p->uniform_tp = true, p->uniform_split = true;
  int first = 0, gpu = 0;
  for (int i = 0; i < s->pp; i++) {
    ts_p3_stage *st = &p->stages[i];
    st->type = s->stage_type[i];
    st->mixed = s->mixed ? s->mixed[i] : false;
    st->tp = s->stage_tp ? s->stage_tp[i] : s->tp;
    st->first_gpu = gpu, st->ngpus = s->dp * st->tp;
    gpu += st->ngpus;
    st->first_layer = first, st->nlayers = s->counts[i];
    first += s->counts[i];
    st->embedding = i == 0, st->head = i == s->pp - 1;
    st->fwd = 0.01, st->bwd = 0.02;
    if (s->stage_tp && st->tp != s->tp) p->uniform_tp = false;
    if (s->counts[i] != s->counts[0]) p->uniform_split = false;
  }
  p->step = 1.25, p->pipeline = 1.0, p->usd_per_step = 0.0125;
}

/* ---- Megatron-Core's layout grammar, re-done ------------------------------------------------
 * pipeline_parallel_layer_layout.py parse_str_to_list: drop ',', unroll "(X)*n" then "c*n"
 * (one character), split on '|'; E embedding, L loss, t decoder, m mtp. */
/* Appends g bytes of src to the growing string o[n] (capacity *cap). */
static char *put(char *o, size_t *n, size_t *cap, const char *src, size_t g) {
  while (*n + g + 1 > *cap) o = realloc(o, *cap *= 2);
  memcpy(o + *n, src, g), *n += g;
  return o;
}

/* One unrolling pass: "(X)*n" (parens) or "c*n" (one character) repeated n times. */
static char *unroll(const char *s, bool parens) {
  size_t cap = 4096, n = 0;
  char *o = malloc(cap);
  for (size_t i = 0; s[i];) {
    const char *body = NULL, *star = NULL;
    if (parens && s[i] == '(') {
      const char *close = strchr(s + i, ')');
      if (close && close[1] == '*' && isdigit((unsigned char)close[2])) body = s + i + 1, star = close + 1;
    } else if (!parens && s[i + 1] == '*' && isdigit((unsigned char)s[i + 2])) {
      body = s + i, star = s + i + 1;
    }
    if (!body) {
      o = put(o, &n, &cap, s + i++, 1);
      continue;
    }
    const int k = atoi(star + 1);
    for (int r = 0; r < k; r++) o = put(o, &n, &cap, body, (size_t)(star - body) - (parens ? 1 : 0));
    i = (size_t)(star + 1 - s);
    while (isdigit((unsigned char)s[i])) i++;
  }
  o[n] = '\0';
  return o;
}

static char *unroll_parens(const char *s) { return unroll(s, true); }
static char *unroll_chars(const char *s) { return unroll(s, false); }

/* Per stage: decoder layers in t[], embedding / loss positions checked. Returns the stage count,
 * -1 on a character Megatron rejects or an E / L out of place. */
static int parse_layout(const char *layout, int *t, int cap) {
  char *nocomma = strdup(layout);
  size_t w = 0;
  for (size_t i = 0; nocomma[i]; i++)
    if (nocomma[i] != ',') nocomma[w++] = nocomma[i];
  nocomma[w] = '\0';
  char *a = unroll_parens(nocomma), *b = unroll_chars(a);
  free(nocomma), free(a);
  int S = 0, E = 0, L = 0, bad = 0;
  size_t len = strlen(b);
  for (size_t i = 0, start = 0; i <= len; i++) {
    if (b[i] != '|' && b[i] != '\0') continue;
    if (S >= cap) { bad = 1; break; }
    t[S] = 0;
    for (size_t j = start; j < i; j++) {
      if (b[j] == 't') t[S]++;
      else if (b[j] == 'E') { E++; if (S != 0 || j != start) bad = 1; }
      else if (b[j] == 'L') { L++; if (i != len || j != i - 1) bad = 1; }
      else bad = 1;
    }
    S++;
    start = i + 1;
  }
  free(b);
  return bad || E != 1 || L != 1 ? -1 : S;
}

/* ---- shell --------------------------------------------------------------------------------- */

static bool have_bash(void) { return system("bash -c true >/dev/null 2>&1") == 0; }

/* Lines printed by cmd (NULL-terminated array, malloc'd), *n of them; NULL when it failed. */
static char **run_lines(const char *cmd, int *n) {
  FILE *f = popen(cmd, "r");
  if (!f) return NULL;
  int cap = 64;
  char **v = calloc((size_t)cap + 1, sizeof *v);
  char line[8192];
  *n = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (*n == cap) v = realloc(v, ((size_t)(cap *= 2) + 1) * sizeof *v);
    v[(*n)++] = strdup(line);
    v[*n] = NULL;
  }
  if (pclose(f) != 0) {
    for (int i = 0; i < *n; i++) free(v[i]);
    free(v);
    return NULL;
  }
  return v;
}

static void free_lines(char **v, int n) {
  for (int i = 0; v && i < n; i++) free(v[i]);
  free(v);
}

/* The value after `flag` in argv-like lines, NULL when absent. */
static const char *arg_after(char **v, int n, const char *flag) {
  for (int i = 0; i + 1 < n; i++)
    if (strcmp(v[i], flag) == 0) return v[i + 1];
  return NULL;
}
static bool has_arg(char **v, int n, const char *flag) {
  for (int i = 0; i < n; i++)
    if (strcmp(v[i], flag) == 0) return true;
  return false;
}
static int arg_int(char **v, int n, const char *flag) {
  const char *s = arg_after(v, n, flag);
  return s ? atoi(s) : -1;
}

/* ---- files --------------------------------------------------------------------------------- */

static const char *const FILES[] = {"megatron_args.sh", "megatron_config.json", "deepspeed_config.json",
                                    "deepspeed_partition.json", "torchrun.sh", "plan_expect.json"};
enum { NFILES = sizeof FILES / sizeof FILES[0] };

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4200];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static cJSON *read_json(const char *dir, const char *name) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  cJSON *j = NULL;
  if (ts__json_read_file(path, &j) != TS_OK) return NULL;
  return j;
}

static int jint(const cJSON *o, const char *k) {
  int64_t v = -1;
  if (ts__json_get_int(o, k, &v) != TS_OK) return -1;
  return (int)v;
}

/* The plan's own numbers for tests/plan3d_engines.py, from the plan struct, not the emitter. */
static void write_expect(const ts_p3_plan *p, const int *gpn, const char *dir) {
  cJSON *j = cJSON_CreateObject();
  int counts[TS_P3_MAX_STAGES], nproc[TS_P3_MAX_NODES];
  for (int s = 0; s < p->pp; s++) counts[s] = p->stages[s].nlayers;
  cJSON_AddNumberToObject(j, "layers", p->model.layers);
  cJSON_AddItemToObject(j, "stage_layers", cJSON_CreateIntArray(counts, p->pp));
  cJSON_AddNumberToObject(j, "dp", p->dp);
  cJSON_AddNumberToObject(j, "pp", p->pp);
  cJSON_AddNumberToObject(j, "tp", p->stages[0].tp);
  cJSON_AddNumberToObject(j, "mbs", p->mbs);
  cJSON_AddNumberToObject(j, "micro_batches", p->micro_batches);
  cJSON_AddNumberToObject(j, "global_batch", p->global_batch);
  if (gpn) {
    for (int n = 0; n < p->nnodes; n++) nproc[n] = gpn[p->node_order[n]];
    cJSON_AddItemToObject(j, "node_nproc", cJSON_CreateIntArray(nproc, p->nnodes));
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/plan_expect.json", dir);
  CHECK_OK(ts__json_write_file(path, j));
  cJSON_Delete(j);
}

/* ---- the checks of one emitted plan ------------------------------------------------------- */

static char g_root[1024];
static bool g_keep;

static void check_megatron(const ts_p3_plan *p, const char *dir) {
  const int S = p->pp, tp = p->stages[0].tp;
  cJSON *c = read_json(dir, "megatron_config.json");
  CHECK(c != NULL, "%s: megatron_config.json does not parse", dir);
  if (!c) return;
  CHECK(jint(c, "num_layers") == p->model.layers, "num_layers");
  CHECK(jint(c, "hidden_size") == 1024 && jint(c, "num_attention_heads") == 16, "hidden / heads");
  CHECK(jint(c, "ffn_hidden_size") == 4096, "ffn_hidden_size %d (0 means 4 h)", jint(c, "ffn_hidden_size"));
  CHECK(jint(c, "tensor_model_parallel_size") == tp, "tp");
  CHECK(jint(c, "pipeline_model_parallel_size") == S, "pp");
  const char *dt = NULL;
  CHECK(ts__json_get_string(c, "pipeline_dtype", &dt) == TS_OK && dt, "pipeline_dtype: Megatron requires it for pp > 1");
  const char *layout = NULL;
  const bool has_layout = ts__json_get_string(c, "pipeline_model_parallel_layout", &layout) == TS_OK;
  if (S == 1) {
    CHECK(!has_layout, "one stage: no layout (%s)", layout ? layout : "");
  } else {
    CHECK(has_layout, "%s: no pipeline_model_parallel_layout", dir);
    int t[TS_P3_MAX_STAGES];
    const int ns = has_layout ? parse_layout(layout, t, TS_P3_MAX_STAGES) : -1;
    CHECK(ns == S, "layout '%s' parses to %d stages, plan has %d", layout ? layout : "", ns, S);
    for (int s = 0; s < S && ns == S; s++)
      CHECK(t[s] == p->stages[s].nlayers, "layout '%s' stage %d: %d layers, plan %d", layout, s, t[s], p->stages[s].nlayers);
    char buf[TS_P3_LAYOUT_MAX];
    CHECK_OK(ts_p3_emit_megatron_layout(p, buf, sizeof buf));
    CHECK(layout && strcmp(buf, layout) == 0, "layout API '%s' vs config '%s'", buf, layout ? layout : "");
  }
  const bool rec = p->model.recompute;
  const char *gran = NULL;
  CHECK((ts__json_get_string(c, "recompute_granularity", &gran) == TS_OK) == rec, "recompute_granularity iff recompute");
  if (rec) CHECK(jint(c, "recompute_num_layers") == 1, "recompute_num_layers");

  if (!have_bash()) {
    tst_skip_part("bash not found: megatron_args.sh not sourced");
    cJSON_Delete(c);
    return;
  }
  char cmd[4600];
  snprintf(cmd, sizeof cmd,
           "bash -c 'set -eu; source \"$1\"; printf \"%%s\\n\" \"${MEGATRON_ARGS[@]}\"' _ '%s/megatron_args.sh'", dir);
  int n = 0;
  char **v = run_lines(cmd, &n);
  CHECK(v != NULL, "%s: sourcing megatron_args.sh failed", dir);
  if (v) {
    CHECK(arg_int(v, n, "--tensor-model-parallel-size") == tp, "--tensor-model-parallel-size");
    CHECK(arg_int(v, n, "--pipeline-model-parallel-size") == S, "--pipeline-model-parallel-size");
    CHECK(arg_int(v, n, "--num-layers") == p->model.layers, "--num-layers");
    CHECK(arg_int(v, n, "--hidden-size") == 1024, "--hidden-size");
    CHECK(arg_int(v, n, "--ffn-hidden-size") == 4096, "--ffn-hidden-size");
    CHECK(arg_int(v, n, "--num-attention-heads") == 16, "--num-attention-heads");
    CHECK(arg_int(v, n, "--seq-length") == 1024 && arg_int(v, n, "--max-position-embeddings") == 1024, "--seq-length");
    CHECK(arg_int(v, n, "--micro-batch-size") == p->mbs, "--micro-batch-size");
    CHECK(arg_int(v, n, "--global-batch-size") == p->global_batch, "--global-batch-size");
    const char *lay = arg_after(v, n, "--pipeline-model-parallel-layout");
    if (S > 1) CHECK(lay && layout && strcmp(lay, layout) == 0, "args layout '%s' vs config '%s'", lay ? lay : "(none)",
                     layout ? layout : "");
    else CHECK(!lay, "one stage: no layout argument");
    CHECK(has_arg(v, n, "--recompute-granularity") == rec, "--recompute-granularity iff recompute");
    CHECK(has_arg(v, n, "--untie-embeddings-and-output-weights") == !p->model.tied_embedding, "untie iff untied");
    CHECK(has_arg(v, n, "--bf16") != has_arg(v, n, "--fp16"), "exactly one of --bf16 / --fp16");
    /* every element is a flag or the value of the one before */
    for (int i = 0; i < n; i++)
      CHECK(v[i][0] && strchr(v[i], '\n') == NULL, "argument %d empty or multi-line", i);
  }
  free_lines(v, n);
  cJSON_Delete(c);
}

static void check_deepspeed(const ts_p3_plan *p, const char *dir) {
  const int S = p->pp, L = p->model.layers;
  cJSON *c = read_json(dir, "deepspeed_config.json");
  CHECK(c != NULL, "%s: deepspeed_config.json does not parse", dir);
  if (c) {
    const int tb = jint(c, "train_batch_size"), mb = jint(c, "train_micro_batch_size_per_gpu"),
              ga = jint(c, "gradient_accumulation_steps");
    CHECK(tb == p->global_batch, "train_batch_size %d, plan %d", tb, p->global_batch);
    CHECK(mb == p->mbs && ga == p->micro_batches, "micro %d gas %d", mb, ga);
    CHECK(tb == mb * ga * p->dp, "DeepSpeed's batch assertion: %d != %d * %d * dp %d", tb, mb, ga, p->dp);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(c, "pipeline");
    CHECK(pl && jint(pl, "stages") == S, "pipeline.stages");
    CHECK(pl && jint(pl, "activation_checkpoint_interval") == (p->model.recompute ? 1 : 0), "activation_checkpoint_interval");
    const cJSON *z = cJSON_GetObjectItemCaseSensitive(c, "zero_optimization");
    CHECK(z && jint(z, "stage") == 0, "zero stage 0 (the plan's memory model; pipelines forbid 2 and 3)");
    cJSON_Delete(c);
  }
  cJSON *q = read_json(dir, "deepspeed_partition.json");
  CHECK(q != NULL, "%s: deepspeed_partition.json does not parse", dir);
  if (!q) return;
  const cJSON *parts = cJSON_GetObjectItemCaseSensitive(q, "parts");
  CHECK(cJSON_IsArray(parts) && cJSON_GetArraySize(parts) == S + 1, "parts: %d boundaries for %d stages",
        parts ? cJSON_GetArraySize(parts) : -1, S);
  if (cJSON_IsArray(parts) && cJSON_GetArraySize(parts) == S + 1) {
    CHECK(cJSON_GetArrayItem(parts, 0)->valueint == 0, "parts[0] = 0");
    CHECK(cJSON_GetArrayItem(parts, S)->valueint == L + 2, "parts[S] = layers + 2 (embedding and head)");
    for (int s = 0; s < S; s++) {
      const int a = cJSON_GetArrayItem(parts, s)->valueint, b = cJSON_GetArrayItem(parts, s + 1)->valueint;
      const int want = p->stages[s].nlayers + (s == 0) + (s == S - 1);
      CHECK(b - a == want, "stage %d: %d PipelineModule layers, want %d", s, b - a, want);
      /* its transformer layers are [a-1, b-1) clipped to the model */
      const int lo = a == 0 ? 0 : a - 1, hi = (b - 1 > L) ? L : b - 1;
      CHECK(lo == p->stages[s].first_layer && hi - lo == p->stages[s].nlayers, "stage %d: layers [%d, %d)", s, lo, hi);
    }
  }
  const cJSON *topo = cJSON_GetObjectItemCaseSensitive(q, "topology");
  CHECK(topo && jint(topo, "num_pp") == S && jint(topo, "num_dp") == p->dp && jint(topo, "num_mp") == p->stages[0].tp,
        "topology");
  CHECK(jint(q, "num_layers") == L && jint(q, "num_stages") == S, "num_layers / num_stages");
  cJSON_Delete(q);
}

/* torchrun.sh with a stand-in launcher that prints its arguments, on every node. */
static void check_torchrun(const ts_p3_plan *p, const int *gpn, const char *dir) {
  if (!have_bash()) {
    tst_skip_part("bash not found: torchrun.sh not run");
    return;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/torchrun.sh", dir);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0100), "torchrun.sh is executable");
  char *sh = NULL;
  size_t len = 0;
  CHECK_OK(ts_read_file(path, &sh, &len));
  if (!sh) return;
  /* the "#@" table: nodes in order, contiguous ranks, each stage of rank r = r / (dp tp) */
  const long long per_stage = (long long)p->dp * p->stages[0].tp;
  long long next = 0;
  int nodes = 0;
  for (const char *l = strstr(sh, "\n#@ "); l; l = strstr(l + 1, "\n#@ ")) {
    int node = -1, nproc = -1;
    long long r0 = -1, r1 = -1;
    const char *np = strstr(l, " nproc="), *rk = strstr(l, " ranks=");
    sscanf(l, "\n#@ node=%d", &node);
    if (np) sscanf(np, " nproc=%d", &nproc);
    if (rk) sscanf(rk, " ranks=%lld-%lld", &r0, &r1);
    CHECK(node == nodes, "table node %d at place %d", node, nodes);
    CHECK(nproc == gpn[p->node_order[nodes]], "node %d: nproc %d, want %d", nodes, nproc, gpn[p->node_order[nodes]]);
    CHECK(r0 == next && r1 == next + nproc - 1, "node %d: ranks %lld-%lld, want from %lld", nodes, r0, r1, next);
    next = r1 + 1;
    nodes++;
  }
  CHECK(nodes == p->nnodes, "table has %d nodes, plan %d", nodes, p->nnodes);
  CHECK(next == per_stage * p->pp, "table ranks end at %lld, world %lld", next, per_stage * p->pp);
  free(sh);

  char cmd[4800];
  for (int node = 0; node < p->nnodes; node++) {
    snprintf(cmd, sizeof cmd,
             "NODE_RANK=%d MASTER_ADDR=10.0.0.1 MASTER_PORT=1234 TORCHRUN='printf %%s\\n' bash '%s/torchrun.sh' "
             "--extra 'a b' 2>/dev/null",
             node, dir);
    int n = 0;
    char **v = run_lines(cmd, &n);
    CHECK(v != NULL, "torchrun.sh failed for node %d", node);
    if (!v) continue;
    CHECK(arg_int(v, n, "--nnodes") == p->nnodes, "--nnodes");
    CHECK(arg_int(v, n, "--nproc-per-node") == gpn[p->node_order[node]], "node %d --nproc-per-node %d", node,
          arg_int(v, n, "--nproc-per-node"));
    CHECK(arg_int(v, n, "--node-rank") == node, "--node-rank");
    const char *be = arg_after(v, n, "--rdzv-backend"), *ep = arg_after(v, n, "--rdzv-endpoint");
    CHECK(be && strcmp(be, "static") == 0, "static rendezvous (c10d ignores --node-rank)");
    CHECK(ep && strcmp(ep, "10.0.0.1:1234") == 0, "--rdzv-endpoint %s", ep ? ep : "(none)");
    CHECK(has_arg(v, n, "pretrain_gpt.py"), "the training script");
    CHECK(arg_int(v, n, "--num-layers") == p->model.layers, "MEGATRON_ARGS passed on");
    CHECK(n >= 2 && strcmp(v[n - 2], "--extra") == 0 && strcmp(v[n - 1], "a b") == 0, "extra arguments last, one word");
    free_lines(v, n);
  }
  snprintf(cmd, sizeof cmd, "NODE_RANK=%d MASTER_ADDR=h TORCHRUN=true bash '%s/torchrun.sh' >/dev/null 2>&1", p->nnodes,
           dir);
  CHECK(system(cmd) != 0, "a NODE_RANK past the plan's nodes is refused");
  snprintf(cmd, sizeof cmd, "env -u NODE_RANK MASTER_ADDR=h TORCHRUN=true bash '%s/torchrun.sh' >/dev/null 2>&1", dir);
  CHECK(system(cmd) != 0, "a missing NODE_RANK is refused");
}

/* Emits p into <root>/<name> and checks every file. */
static void check_plan(const ts_p3_plan *p, const ts_p3_emit_opts *o, const char *name) {
  char dir[2048];
  snprintf(dir, sizeof dir, "%s/%s", g_root, name);
  char *written = NULL;
  CHECK_OK(ts_p3_emit_dir(p, o, dir, TS_P3_EMIT_ALL, &written));
  int lines = 0;
  for (const char *c = written; c && *c; c++) lines += *c == '\n';
  CHECK(lines == 5, "%s: %d files written, want 5", name, lines);
  free(written);
  CHECK(count_entries(dir) == 5, "%s: %d entries (temporary files left?)", name, count_entries(dir));
  int gpn[TS_P3_MAX_TYPES];
  CHECK_OK(ts_p3_emit_gpus_per_node(p, o, gpn));
  check_megatron(p, dir);
  check_deepspeed(p, dir);
  check_torchrun(p, gpn, dir);
  if (g_keep) write_expect(p, gpn, dir);
  else rm_dir(dir);
}

/* ---- cases --------------------------------------------------------------------------------- */

static const char *const T2[] = {"p4d.24xlarge", "g5.12xlarge"}, *const G2[] = {"A100", "A10G"};

/* 24 layers, 6 per stage; a p4d (8 A100) holds stages 0-1, two g5 (4 A10G) stages 2 and 3. */
static void case_uniform(void) {
  static const int counts[] = {6, 6, 6, 6}, order[] = {0, 1, 1}, types[] = {0, 0, 1, 1};
  const spec s = {"gpt-uniform", 24, 2, 2, 4, 2, 8, counts, NULL, 2, T2, G2, 3, order, types, NULL, false, false};
  ts_p3_plan *p = malloc(sizeof *p);
  build(p, &s);
  int g[TS_P3_MAX_TYPES];
  CHECK_OK(ts_p3_emit_gpus_per_node(p, NULL, g));
  CHECK(g[0] == 8 && g[1] == 4, "inferred GPUs per node %d, %d (want 8, 4)", g[0], g[1]);
  p->gpus_per_node[0] = 4, p->gpus_per_node[1] = 6; /* recorded, and wrong: stage 1 would reach a g5 */
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, NULL, g), "stage 1 (GPUs 4-7) would reach node 1");
  p->gpus_per_node[0] = 8, p->gpus_per_node[1] = 4;
  CHECK_OK(ts_p3_emit_gpus_per_node(p, NULL, g));
  char lay[TS_P3_LAYOUT_MAX];
  CHECK_OK(ts_p3_emit_megatron_layout(p, lay, sizeof lay));
  CHECK(strcmp(lay, "Et*6|t*6|t*6|t*6L") == 0, "layout %s", lay);
  char *sh = NULL, *js = NULL;
  CHECK_OK(ts_p3_emit_megatron(p, &sh, &js));
  CHECK(sh && strstr(sh, "no split argument (an even split of 6 layers per stage)"), "older-form note for an even split");
  CHECK(sh && strstr(sh, TS_P3_MEGATRON_CORE_MIN) && strstr(sh, TS_P3_MEGATRON_CORE_CHECKED), "version named in the file");
  free(sh), free(js);
  check_plan(p, NULL, "uniform");
  free(p);
}

/* Uneven splits, recomputation, untied embedding; tp 4 on two 8-GPU nodes of two types. */
static void case_uneven(void) {
  static const int c1[] = {5, 9, 9, 7}, c2[] = {3, 10, 9, 8}, c3[] = {1, 2, 12}, order[] = {0, 1}, types[] = {0, 0, 1, 1};
  const spec s1 = {"gpt-uneven", 30, 1, 4, 4, 1, 16, c1, NULL, 2, T2, G2, 2, order, types, NULL, true, true};
  ts_p3_plan *p = malloc(sizeof *p);
  build(p, &s1);
  char lay[TS_P3_LAYOUT_MAX];
  CHECK_OK(ts_p3_emit_megatron_layout(p, lay, sizeof lay));
  CHECK(strcmp(lay, "Et*5|t*9|t*9|t*7L") == 0, "layout %s", lay);
  char *sh = NULL, *js = NULL;
  CHECK_OK(ts_p3_emit_megatron(p, &sh, &js));
  CHECK(sh && strstr(sh, "--decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 7"),
        "older-form alternative when the middle is even");
  free(sh), free(js);
  check_plan(p, NULL, "uneven");

  const spec s2 = {"gpt-uneven2", 30, 1, 4, 4, 1, 16, c2, NULL, 2, T2, G2, 2, order, types, NULL, false, false};
  build(p, &s2);
  CHECK_OK(ts_p3_emit_megatron_layout(p, lay, sizeof lay));
  CHECK(strcmp(lay, "Et*3|t*10|t*9|t*8L") == 0, "layout %s", lay);
  CHECK_OK(ts_p3_emit_megatron(p, &sh, &js));
  CHECK(sh && strstr(sh, "none (its middle stages hold different numbers of layers)"), "older form impossible");
  free(sh), free(js);
  check_plan(p, NULL, "uneven2");

  /* a one-layer stage ("t", not "t*1"), three stages; two 4-GPU g5 and one p4d: dp 2 tp 2 */
  static const int order3[] = {1, 1, 0}, types3[] = {1, 1, 0};
  const spec s3 = {"gpt-uneven3", 15, 2, 2, 3, 4, 4, c3, NULL, 2, T2, G2, 3, order3, types3, NULL, false, false};
  build(p, &s3);
  /* 12 GPUs: g5 = 4 each holds stages 0 and 1, but the p4d would need 4 too: give 4 */
  ts_p3_emit_opts o;
  memset(&o, 0, sizeof o);
  int g[TS_P3_MAX_TYPES];
  CHECK_OK(ts_p3_emit_gpus_per_node(p, NULL, g));
  CHECK(g[0] == 4 && g[1] == 4, "inferred %d %d", g[0], g[1]);
  CHECK_OK(ts_p3_emit_megatron_layout(p, lay, sizeof lay));
  CHECK(strcmp(lay, "Et|t*2|t*12L") == 0, "layout %s", lay);
  check_plan(p, &o, "uneven3");
  free(p);
}

/* One stage on a V100 node: fp16, no layout, parts [0, L + 2]. */
static void case_pp1(void) {
  static const char *const T[] = {"p3.16xlarge"}, *const G[] = {"Tesla V100-SXM2-16GB"};
  static const int counts[] = {12}, order[] = {0}, types[] = {0};
  const spec s = {"gpt-pp1", 12, 4, 2, 1, 4, 2, counts, NULL, 1, T, G, 1, order, types, NULL, true, true};
  ts_p3_plan *p = malloc(sizeof *p);
  build(p, &s);
  char lay[TS_P3_LAYOUT_MAX];
  CHECK_OK(ts_p3_emit_megatron_layout(p, lay, sizeof lay));
  CHECK(strcmp(lay, "Et*12L") == 0, "layout %s", lay);
  char *sh = NULL, *js = NULL;
  CHECK_OK(ts_p3_emit_megatron(p, &sh, &js));
  CHECK(sh && strstr(sh, "--fp16") && !strstr(sh, "--bf16"), "V100: fp16");
  CHECK(js && strstr(js, "\"float16\"") && !strstr(js, "pipeline_model_parallel_layout"), "fp16 config, no layout");
  free(sh), free(js);
  check_plan(p, NULL, "pp1");
  free(p);
}

/* A TP degree per GPU type: refused by every emitter, nothing written. */
static void case_mixed_tp(void) {
  static const int counts[] = {6, 6, 6, 6}, tps[] = {4, 4, 2, 2}, order[] = {0, 1}, types[] = {0, 0, 1, 1};
  const spec s = {"gpt-mixed-tp", 24, 1, 4, 4, 1, 8, counts, tps, 2, T2, G2, 2, order, types, NULL, false, false};
  ts_p3_plan *p = malloc(sizeof *p);
  build(p, &s);
  char *a = NULL, *b = NULL;
  CHECK_STATUS(ts_p3_emit_megatron(p, &a, &b), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(ts_p3_emit_megatron(p, &a, &b), "stage 2 has tensor-parallel size 2 and stage 0 has 4");
  CHECK(a == NULL && b == NULL, "no text on refusal");
  CHECK_STATUS(ts_p3_emit_deepspeed(p, &a, &b), TS_ERR_UNSUPPORTED);
  CHECK_STATUS(ts_p3_emit_torchrun(p, NULL, &a), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(ts_p3_emit_check(p), "per_type_tp = false");
  char dir[2048];
  snprintf(dir, sizeof dir, "%s/mixed_tp", g_root);
  CHECK_STATUS(ts_p3_emit_dir(p, NULL, dir, TS_P3_EMIT_ALL, NULL), TS_ERR_UNSUPPORTED);
  CHECK(access(dir, F_OK) != 0, "a refused plan creates nothing");
  free(p);
}

/* A stage spanning two single-node types: 16 GPUs as 8 + 8 or 4 + 12 ...: ambiguous until given. */
static void case_gpus_per_node(void) {
  static const int counts[] = {8, 8}, order[] = {0, 1, 0, 1}, types[] = {0, 1};
  static const bool mixed[] = {true, true};
  const spec s = {"gpt-ambiguous", 16, 8, 1, 2, 1, 4, counts, NULL, 2, T2, G2, 4, order, types, mixed, false, false};
  ts_p3_plan *p = malloc(sizeof *p);
  build(p, &s);
  int g[TS_P3_MAX_TYPES];
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, NULL, g), "--gpus-per-node");
  char *sh = NULL;
  CHECK_STATUS(ts_p3_emit_torchrun(p, NULL, &sh), TS_ERR_INVALID_ARG);
  char *a = NULL, *b = NULL;
  CHECK_OK(ts_p3_emit_megatron(p, &a, &b)); /* only torchrun needs the node sizes */
  free(a), free(b);
  ts_p3_emit_opts o;
  memset(&o, 0, sizeof o);
  o.gpus_per_node[0] = 4;
  CHECK_OK(ts_p3_emit_gpus_per_node(p, &o, g));
  CHECK(g[0] == 4 && g[1] == 4, "one given, the other inferred: %d %d", g[0], g[1]);
  o.gpus_per_node[1] = 2;
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, &o, g), "the nodes hold 12 GPUs");
  o.gpus_per_node[0] = 6, o.gpus_per_node[1] = 2; /* 16 GPUs, but stage 0 (0-7) = 6 + 2: fits, mixed */
  CHECK_OK(ts_p3_emit_gpus_per_node(p, &o, g));
  o.gpus_per_node[0] = 4, o.gpus_per_node[1] = 4;
  check_plan(p, &o, "gpus_per_node");
  /* the plan's own counts (what plan files carry) settle it too, and are checked the same way */
  p->gpus_per_node[0] = 4, p->gpus_per_node[1] = 4;
  CHECK_OK(ts_p3_emit_gpus_per_node(p, NULL, g));
  CHECK(g[0] == 4 && g[1] == 4, "the plan's counts: %d %d", g[0], g[1]);
  p->gpus_per_node[1] = 2;
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, NULL, g), "given or recorded do not fit the plan: the nodes hold 12");
  memset(&o, 0, sizeof o);
  o.gpus_per_node[1] = 4; /* an option overrides the plan's count */
  CHECK_OK(ts_p3_emit_gpus_per_node(p, &o, g));
  o.gpus_per_node[0] = 4;
  p->gpus_per_node[0] = p->gpus_per_node[1] = 0;
  /* an unmixed stage on the wrong node type */
  p->stages[0].mixed = false;
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, &o, g), "stage 0 (GPUs 0-7) would reach node 1");
  free(p);
}

/* Inputs the engines would reject, or no engine could mean. */
static void case_bad(void) {
  static const int counts[] = {6, 6, 6, 6}, order[] = {0, 1, 1}, types[] = {0, 0, 1, 1};
  const spec s = {"gpt-bad", 24, 2, 2, 4, 2, 8, counts, NULL, 2, T2, G2, 3, order, types, NULL, false, false};
  ts_p3_plan *p = malloc(sizeof *p);
  char *a = NULL, *b = NULL, lay[8];
  CHECK_STATUS(ts_p3_emit_check(NULL), TS_ERR_INVALID_ARG);
  build(p, &s);
  CHECK_STATUS(ts_p3_emit_megatron(p, NULL, &b), TS_ERR_INVALID_ARG);
  CHECK_ERR_CONTAINS(ts_p3_emit_megatron_layout(p, lay, sizeof lay), "does not fit in 8 bytes");
  CHECK_STATUS(ts_p3_emit_dir(p, NULL, g_root, 0, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_p3_emit_dir(p, NULL, g_root, 8, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_p3_emit_dir(p, NULL, "", TS_P3_EMIT_ALL, NULL), TS_ERR_INVALID_ARG);
  p->global_batch = 33;
  CHECK_ERR_CONTAINS(ts_p3_emit_deepspeed(p, &a, &b), "global_batch 33 is not micro-batch size 2 x micro_batches 8 x dp 2");
  build(p, &s);
  p->model.heads = 15;
  CHECK_ERR_CONTAINS(ts_p3_emit_megatron(p, &a, &b), "15 attention heads are not divisible by tensor-parallel size 2");
  build(p, &s);
  p->stages[1].nlayers = 5;
  CHECK_ERR_CONTAINS(ts_p3_emit_megatron(p, &a, &b), "stage 2 holds layers [12, 18)");
  build(p, &s);
  p->stages[3].nlayers = 7;
  CHECK_ERR_CONTAINS(ts_p3_emit_megatron(p, &a, &b), "the stages hold 25 layers, the model has 24");
  build(p, &s);
  p->stages[1].first_gpu = 3;
  CHECK_ERR_CONTAINS(ts_p3_emit_deepspeed(p, &a, &b), "gives it ranks [4, 8)");
  build(p, &s);
  p->stages[1].embedding = true;
  CHECK_STATUS(ts_p3_emit_megatron(p, &a, &b), TS_ERR_UNSUPPORTED);
  build(p, &s);
  p->stages[3].head = false;
  CHECK_ERR_CONTAINS(ts_p3_emit_megatron(p, &a, &b), "the output head");
  build(p, &s);
  p->node_order[2] = 5;
  int g[TS_P3_MAX_TYPES];
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, NULL, g), "node 2 has type 5 of 2");
  build(p, &s);
  p->nnodes = 2, p->node_order[0] = 1, p->node_order[1] = 0; /* stage 0 (a p4d stage) on a g5 first */
  CHECK_ERR_CONTAINS(ts_p3_emit_gpus_per_node(p, NULL, g), "no number of GPUs per node type");
  CHECK(a == NULL && b == NULL, "outputs stay NULL on errors");
  free(p);
}

/* Names with newlines, quotes and $(...) stay inside comments / single-quoted safe words. */
static void case_hostile_names(void) {
  static const char *const T[] = {"node'\n touch /tmp/ts_pwned_$(id -u) #", "b\"`x`"},
                           *const G[] = {"A100'; touch /tmp/ts_pwned2\n", "H100 $(reboot)"};
  static const int counts[] = {6, 6}, order[] = {0, 1}, types[] = {0, 1};
  const spec s = {"m\n touch /tmp/ts_pwned3 '$(x)", 12, 1, 8, 2, 1, 2, counts, NULL, 2, T, G, 2, order, types, NULL,
                  false, false};
  ts_p3_plan *p = malloc(sizeof *p);
  build(p, &s);
  char *sh = NULL, *js = NULL, *tr = NULL;
  CHECK_OK(ts_p3_emit_megatron(p, &sh, &js));
  CHECK_OK(ts_p3_emit_torchrun(p, NULL, &tr));
  for (const char *t = sh; t && (t = strchr(t, '\n')); t++) CHECK(strncmp(t + 1, " touch", 6) != 0, "a name broke a comment");
  for (const char *t = tr; t && (t = strchr(t, '\n')); t++) CHECK(strncmp(t + 1, " touch", 6) != 0, "a name broke a comment");
  CHECK(tr && !strstr(tr, "$(reboot)") && !strstr(tr, "'; touch"), "GPU names reduced to safe words");
  free(sh), free(js), free(tr);
  check_plan(p, NULL, "hostile");
  CHECK(access("/tmp/ts_pwned3", F_OK) != 0 && access("/tmp/ts_pwned2", F_OK) != 0, "nothing ran");
  free(p);
}

int main(void) {
  const char *keep = getenv("TESSERA_EMIT_KEEP");
  if (keep && keep[0]) {
    g_keep = true;
    snprintf(g_root, sizeof g_root, "%s", keep);
    CHECK_OK(ts_mkdirs(g_root));
  } else {
    snprintf(g_root, sizeof g_root, "/tmp/ts_p3emit.XXXXXX");
    if (!mkdtemp(g_root)) tst_skip("cannot create a temporary directory");
  }
  case_uniform();
  case_uneven();
  case_pp1();
  case_mixed_tp();
  case_gpus_per_node();
  case_bad();
  case_hostile_names();
  if (!g_keep) rmdir(g_root);
  return tst_finish();
}
