/* tessera plan3d: the launch files of a chosen plan. Megatron-LM arguments and Megatron-Core
 * TransformerConfig keywords with the per-stage layer split as a pipeline layout, a DeepSpeed
 * configuration with an explicit PipelineModule partition, and one torchrun command per node in
 * the plan's node order. What each engine accepts, and the versions checked against:
 * docs/notes/plan3d-engines.md; tests/plan3d_engines.py feeds the files to the engines' own code.
 *
 * Only names from the plan reach the scripts, and only in comments (control bytes replaced) or as
 * single-quoted words of [A-Za-z0-9 ._+-]: a plan file cannot inject shell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/artifact_internal.h"
#include "tessera/plan3d.h"


/* ---- small helpers ---------------------------------------------------------------------- */

/* A growing text: open_memstream's buffer is plain malloc (the files are returned as such). */
typedef struct text {
  FILE *f;
  char *s;
  size_t n;
} text;

static ts_status text_open(text *t) {
  t->s = NULL, t->n = 0;
  t->f = open_memstream(&t->s, &t->n);
  return t->f ? TS_OK : ts_error(TS_ERR_OOM, "out of memory making a launch file");
}

static ts_status text_close(text *t, char **out) {
  const bool bad = ferror(t->f) != 0;
  const bool closed = fclose(t->f) == 0;
  if (bad || !closed || !t->s) {
    free(t->s);
    return ts_error(TS_ERR_OOM, "out of memory writing a launch file");
  }
  *out = t->s;
  return TS_OK;
}

/* For comments: the name with control bytes (a newline would end the comment) as '?'. */
static const char *comment_safe(const char *in, char *out, size_t cap) {
  size_t i = 0;
  for (; in[i] && i + 1 < cap; i++) {
    const unsigned char c = (unsigned char)in[i];
    out[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  out[i] = '\0';
  return out;
}

/* For a single-quoted shell word: [A-Za-z0-9 ._+-], anything else '_'. */
static const char *word_safe(const char *in, char *out, size_t cap) {
  size_t i = 0;
  for (; in[i] && i + 1 < cap; i++) {
    const char c = in[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ' ' ||
                    c == '.' || c == '_' || c == '+' || c == '-';
    out[i] = ok ? c : '_';
  }
  out[i] = '\0';
  return out;
}

static int plan_tp(const ts_p3_plan *p) { return p->stages[0].tp; }
static int model_ffn(const ts_p3_model *m) { return m->ffn > 0 ? m->ffn : 4 * m->hidden; }

/* Half precision unless the plan stores 4-byte activations; fp16 rather than bf16 when a GPU of
 * the plan predates bf16 (Volta, Turing, Pascal, Kepler). */
typedef enum precision { PREC_BF16, PREC_FP16, PREC_FP32 } precision;

static precision plan_precision(const ts_p3_plan *p) {
  if (p->model.activation_bytes >= 4) return PREC_FP32;
  static const char *const old[] = {"V100", "T4", "P100", "P40", "K80", "K40", "M60", "M40", "TITAN V", "RTX 20", "GTX"};
  for (int t = 0; t < p->ntypes && t < TS_P3_MAX_TYPES; t++)
    for (size_t k = 0; k < sizeof old / sizeof old[0]; k++)
      if (strcasestr(p->gpu_name[t], old[k])) return PREC_FP16;
  return PREC_BF16;
}

/* ---- checks ------------------------------------------------------------------------------ */

ts_status ts_p3_emit_check(const ts_p3_plan *p) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit: plan is NULL");
  const ts_p3_model *m = &p->model;
  if (p->pp < 1 || p->pp > TS_P3_MAX_STAGES)
    return ts_error(TS_ERR_INVALID_ARG, "pp %d is not in [1, %d]", p->pp, TS_P3_MAX_STAGES);
  if (p->dp < 1) return ts_error(TS_ERR_INVALID_ARG, "dp %d is not positive", p->dp);
  if (p->mbs < 1) return ts_error(TS_ERR_INVALID_ARG, "micro-batch size %d is not positive", p->mbs);
  if (p->micro_batches < 1)
    return ts_error(TS_ERR_INVALID_ARG, "micro_batches %d is not positive", p->micro_batches);
  if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->seq < 1)
    return ts_error(TS_ERR_INVALID_ARG, "model '%s' has layers %d, hidden %d, heads %d, seq %d: all must be positive",
                    m->name, m->layers, m->hidden, m->heads, m->seq);
  if (m->ffn < 0) return ts_error(TS_ERR_INVALID_ARG, "model ffn %d is negative", m->ffn);
  const long long gb = (long long)p->mbs * p->micro_batches * p->dp;
  if (gb != p->global_batch)
    return ts_error(TS_ERR_INVALID_ARG,
                    "global_batch %d is not micro-batch size %d x micro_batches %d x dp %d = %lld (Megatron's "
                    "--global-batch-size and DeepSpeed's train_batch_size would disagree with the plan)",
                    p->global_batch, p->mbs, p->micro_batches, p->dp, gb);
  const int tp = plan_tp(p);
  if (tp < 1) return ts_error(TS_ERR_INVALID_ARG, "stage 0 has tensor-parallel size %d", tp);
  for (int s = 1; s < p->pp; s++)
    if (p->stages[s].tp != tp)
      return ts_error(TS_ERR_UNSUPPORTED,
                      "stage %d has tensor-parallel size %d and stage 0 has %d: Megatron-LM "
                      "(--tensor-model-parallel-size) and DeepSpeed (its pipe/data/model topology) run one "
                      "tensor-parallel size on every stage, so a plan with a TP degree per GPU type cannot be "
                      "launched with them; plan again with one TP degree for all types (per_type_tp = false)",
                      s, p->stages[s].tp, tp);
  const int ffn = model_ffn(m);
  if (m->heads % tp)
    return ts_error(TS_ERR_INVALID_ARG, "%d attention heads are not divisible by tensor-parallel size %d",
                    m->heads, tp);
  if (ffn % tp)
    return ts_error(TS_ERR_INVALID_ARG, "ffn hidden size %d is not divisible by tensor-parallel size %d", ffn, tp);
  if (m->hidden % m->heads)
    return ts_error(TS_ERR_INVALID_ARG, "hidden size %d is not divisible by %d heads (Megatron's kv_channels)",
                    m->hidden, m->heads);
  const long long per_stage = (long long)p->dp * tp;
  int next = 0;
  for (int s = 0; s < p->pp; s++) {
    const ts_p3_stage *st = &p->stages[s];
    if (st->first_layer != next || st->nlayers < 1)
      return ts_error(TS_ERR_INVALID_ARG,
                      "stage %d holds layers [%d, %d); the stages must cover the layers in order, each "
                      "holding at least one (expected it to start at %d)",
                      s, st->first_layer, st->first_layer + st->nlayers, next);
    next = st->first_layer + st->nlayers;
    if (st->ngpus != per_stage || st->first_gpu != s * per_stage)
      return ts_error(TS_ERR_INVALID_ARG,
                      "stage %d has GPUs [%d, %d) of the node order, but Megatron's and DeepSpeed's rank order "
                      "(tp fastest, then dp, then pp) gives it ranks [%lld, %lld)",
                      s, st->first_gpu, st->first_gpu + st->ngpus, s * per_stage, (s + 1) * per_stage);
    if (st->embedding != (s == 0))
      return ts_error(TS_ERR_UNSUPPORTED, "stage %d %s the embedding; Megatron and DeepSpeed keep it on the first stage",
                      s, st->embedding ? "holds" : "of 0 lacks");
    if (st->head != (s == p->pp - 1))
      return ts_error(TS_ERR_UNSUPPORTED, "stage %d %s the output head; Megatron and DeepSpeed keep it on the last stage",
                      s, st->head ? "holds" : "(the last) lacks");
    if (p->ntypes < 1 || p->ntypes > TS_P3_MAX_TYPES || st->type < 0 || st->type >= p->ntypes)
      return ts_error(TS_ERR_INVALID_ARG, "stage %d has node type %d of %d", s, st->type, p->ntypes);
  }
  if (next != m->layers)
    return ts_error(TS_ERR_INVALID_ARG, "the stages hold %d layers, the model has %d", next, m->layers);
  return TS_OK;
}

ts_status ts_p3_emit_megatron_layout(const ts_p3_plan *p, char *buf, size_t cap) {
  if (!buf || cap == 0) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit_megatron_layout: no buffer");
  buf[0] = '\0';
  TS_TRY(ts_p3_emit_check(p));
  size_t n = 0;
  for (int s = 0; s < p->pp; s++) {
    const int k = p->stages[s].nlayers;
    char layers[24];
    if (k == 1) snprintf(layers, sizeof layers, "t");
    else snprintf(layers, sizeof layers, "t*%d", k);
    const int w = snprintf(buf + n, cap - n, "%s%s%s%s", s ? "|" : "", s == 0 ? "E" : "", layers, s == p->pp - 1 ? "L" : "");
    if (w < 0 || (size_t)w >= cap - n) {
      buf[0] = '\0';
      return ts_error(TS_ERR_INVALID_ARG, "the pipeline layout does not fit in %zu bytes", cap);
    }
    n += (size_t)w;
  }
  return TS_OK;
}

/* Megatron-Core 0.9-0.12 split only the first and last stage off an even middle. */
static void older_megatron_form(const ts_p3_plan *p, char *buf, size_t cap) {
  const int S = p->pp;
  bool even = true, middle_even = true;
  for (int s = 1; s < S; s++) even &= p->stages[s].nlayers == p->stages[0].nlayers;
  for (int s = 2; s < S - 1; s++) middle_even &= p->stages[s].nlayers == p->stages[1].nlayers;
  if (even)
    snprintf(buf, cap, "no split argument (an even split of %d layers per stage)", p->stages[0].nlayers);
  else if (middle_even)
    snprintf(buf, cap, "--decoder-first-pipeline-num-layers %d --decoder-last-pipeline-num-layers %d",
             p->stages[0].nlayers, p->stages[S - 1].nlayers);
  else
    snprintf(buf, cap, "none (its middle stages hold different numbers of layers)");
}

/* "p4d.24xlarge (A100)" or "mixed, slowest p3.16xlarge (V100)". */
static void stage_where(const ts_p3_plan *p, const ts_p3_stage *st, char *buf, size_t cap) {
  char tn[TS_P3_NAME], gn[TS_P3_NAME];
  snprintf(buf, cap, "%s%s (%s)", st->mixed ? "mixed, slowest " : "",
           comment_safe(p->type_name[st->type], tn, sizeof tn), comment_safe(p->gpu_name[st->type], gn, sizeof gn));
}

/* The plan in a few comment lines, shared by the scripts. */
static void plan_summary(FILE *f, const ts_p3_plan *p) {
  const ts_p3_model *m = &p->model;
  char name[TS_P3_NAME], cl[TS_P3_NAME];
  const int tp = plan_tp(p);
  fprintf(f, "# model %s: %d layers, hidden %d, %d heads, ffn %d, sequence %d, vocabulary %d%s%s\n",
          comment_safe(m->name, name, sizeof name), m->layers, m->hidden, m->heads, model_ffn(m), m->seq, m->vocab,
          m->tied_embedding ? ", tied embedding" : ", untied embedding", m->recompute ? ", full recomputation" : "");
  fprintf(f, "# cluster %s: %d node%s, dp %d x pp %d x tp %d = %lld GPUs\n", comment_safe(p->cluster, cl, sizeof cl),
          p->nnodes, p->nnodes == 1 ? "" : "s", p->dp, p->pp, tp, (long long)p->dp * p->pp * tp);
  fprintf(f, "# micro-batch %d x %d micro-batches x dp %d = global batch %d\n", p->mbs, p->micro_batches, p->dp,
          p->global_batch);
  if (p->step > 0) {
    fprintf(f, "# estimated step %.4g s (pipeline %.4g s)", p->step, p->pipeline);
    if (p->usd_per_step > 0) fprintf(f, ", $%.4g per step", p->usd_per_step);
    fputc('\n', f);
  }
}

/* ---- Megatron ---------------------------------------------------------------------------- */

/* cJSON adds that remember a failure (an add returns NULL when out of memory). */
typedef struct jb {
  bool ok;
} jb;
static void jnum(jb *b, cJSON *o, const char *k, double v) { b->ok &= cJSON_AddNumberToObject(o, k, v) != NULL; }
static void jstr(jb *b, cJSON *o, const char *k, const char *v) { b->ok &= cJSON_AddStringToObject(o, k, v) != NULL; }
static void jbool(jb *b, cJSON *o, const char *k, bool v) { b->ok &= cJSON_AddBoolToObject(o, k, v) != NULL; }
static cJSON *jobj(jb *b, cJSON *o, const char *k) {
  cJSON *c = cJSON_AddObjectToObject(o, k);
  b->ok &= c != NULL;
  return c;
}
static void jints(jb *b, cJSON *o, const char *k, const int *v, int n) {
  cJSON *a = cJSON_CreateIntArray(v, n);
  if (!a || !cJSON_AddItemToObject(o, k, a)) {
    cJSON_Delete(a);
    b->ok = false;
  }
}

/* j, pretty and newline-terminated, into a plain malloc'd string; takes j. */
static ts_status json_take(cJSON *j, bool ok, const char *what, char **out) {
  char *t = ok && j ? ts__json_print(j, true) : NULL;
  cJSON_Delete(j);
  if (!t) return ts_error(TS_ERR_OOM, "out of memory making %s", what);
  const size_t n = strlen(t);
  char *s = malloc(n + 2);
  if (s) memcpy(s, t, n), s[n] = '\n', s[n + 1] = '\0';
  cJSON_free(t);
  if (!s) return ts_error(TS_ERR_OOM, "out of memory making %s", what);
  *out = s;
  return TS_OK;
}

static ts_status megatron_json(const ts_p3_plan *p, const char *layout, char **out) {
  const ts_p3_model *m = &p->model;
  const precision pr = plan_precision(p);
  const char *dtype = pr == PREC_BF16 ? "bfloat16" : pr == PREC_FP16 ? "float16" : "float32";
  jb b = {true};
  cJSON *j = cJSON_CreateObject();
  b.ok = j != NULL;
  if (j) {
    jnum(&b, j, "num_layers", m->layers);
    jnum(&b, j, "hidden_size", m->hidden);
    jnum(&b, j, "num_attention_heads", m->heads);
    jnum(&b, j, "ffn_hidden_size", model_ffn(m));
    jnum(&b, j, "tensor_model_parallel_size", plan_tp(p));
    jnum(&b, j, "pipeline_model_parallel_size", p->pp);
    if (p->pp > 1) jstr(&b, j, "pipeline_model_parallel_layout", layout);
    if (pr == PREC_BF16) jbool(&b, j, "bf16", true);
    if (pr == PREC_FP16) jbool(&b, j, "fp16", true);
    jstr(&b, j, "params_dtype", dtype);
    jstr(&b, j, "pipeline_dtype", dtype);
    if (m->recompute) {
      jstr(&b, j, "recompute_granularity", "full");
      jstr(&b, j, "recompute_method", "uniform");
      jnum(&b, j, "recompute_num_layers", 1);
    }
  }
  return json_take(j, b.ok, "megatron_config.json", out);
}

static ts_status megatron_sh(const ts_p3_plan *p, const char *layout, char **out) {
  const ts_p3_model *m = &p->model;
  const int tp = plan_tp(p);
  const long long per_stage = (long long)p->dp * tp;
  text t;
  TS_TRY(text_open(&t));
  FILE *f = t.f;
  fprintf(f, "# Megatron-LM arguments of a tessera plan3d plan (written by tessera plan3d emit). Source this\n"
             "# file, then run  torchrun ... pretrain_gpt.py \"${MEGATRON_ARGS[@]}\" <data, tokenizer, optimizer\n"
             "# and schedule arguments>  (torchrun.sh beside it does both).\n#\n");
  if (p->pp > 1) {
    char older[160];
    older_megatron_form(p, older, sizeof older);
    fprintf(f,
            "# Targets Megatron-Core >= %s, the first release with --pipeline-model-parallel-layout (written\n"
            "# and checked against megatron-core %s). Layout: stages separated by '|'; E the embedding,\n"
            "# t a transformer layer, t*N N of them, L the loss (final norm and output layer).\n"
            "# Megatron-Core 0.9-0.12 (no layout) can take this split as: %s\n#\n",
            TS_P3_MEGATRON_CORE_MIN, TS_P3_MEGATRON_CORE_CHECKED, older);
  } else {
    fprintf(f, "# One pipeline stage: no split argument (any Megatron-Core; checked against megatron-core %s).\n#\n",
            TS_P3_MEGATRON_CORE_CHECKED);
  }
  plan_summary(f, p);
  fprintf(f, "# The vocabulary (%d) comes from the tokenizer arguments; Megatron pads it to a multiple of\n"
             "# 128 x tp. A dry run: --tokenizer-type NullTokenizer --vocab-size %d --mock-data\n#\n",
          m->vocab, m->vocab);
  fprintf(f, "# stage  layers              global ranks  node type\n");
  for (int s = 0; s < p->pp; s++) {
    const ts_p3_stage *st = &p->stages[s];
    char lay[64], ranks[48], where[2 * TS_P3_NAME + 32];
    snprintf(lay, sizeof lay, "%d-%d (%d)%s%s", st->first_layer, st->first_layer + st->nlayers - 1, st->nlayers,
             st->embedding ? " +E" : "", st->head ? " +L" : "");
    snprintf(ranks, sizeof ranks, "%lld-%lld", s * per_stage, (s + 1) * per_stage - 1);
    stage_where(p, st, where, sizeof where);
    fprintf(f, "# %5d  %-18s  %-12s  %s\n", s, lay, ranks, where);
  }
  fprintf(f, "MEGATRON_ARGS=(\n");
  fprintf(f, "  --tensor-model-parallel-size %d\n", tp);
  fprintf(f, "  --pipeline-model-parallel-size %d\n", p->pp);
  if (p->pp > 1) fprintf(f, "  --pipeline-model-parallel-layout '%s'\n", layout);
  fprintf(f, "  --num-layers %d\n  --hidden-size %d\n  --ffn-hidden-size %d\n  --num-attention-heads %d\n", m->layers,
          m->hidden, model_ffn(m), m->heads);
  fprintf(f, "  --seq-length %d\n  --max-position-embeddings %d\n", m->seq, m->seq);
  fprintf(f, "  --micro-batch-size %d\n  --global-batch-size %d\n", p->mbs, p->global_batch);
  const precision pr = plan_precision(p);
  if (pr == PREC_BF16) fprintf(f, "  --bf16\n");
  if (pr == PREC_FP16) fprintf(f, "  --fp16  # a GPU of the plan has no bf16\n");
  if (m->recompute) fprintf(f, "  --recompute-granularity full --recompute-method uniform --recompute-num-layers 1\n");
  if (!m->tied_embedding) fprintf(f, "  --untie-embeddings-and-output-weights\n");
  fprintf(f, ")\n");
  return text_close(&t, out);
}

ts_status ts_p3_emit_megatron(const ts_p3_plan *p, char **args_sh, char **config_json) {
  if (!args_sh || !config_json) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit_megatron: NULL output");
  *args_sh = *config_json = NULL;
  char layout[TS_P3_LAYOUT_MAX];
  TS_TRY(ts_p3_emit_megatron_layout(p, layout, sizeof layout));
  TS_TRY(megatron_sh(p, layout, args_sh));
  const ts_status s = megatron_json(p, layout, config_json);
  if (s != TS_OK) free(*args_sh), *args_sh = NULL;
  return s;
}

/* ---- DeepSpeed --------------------------------------------------------------------------- */

ts_status ts_p3_emit_deepspeed(const ts_p3_plan *p, char **config_json, char **partition_json) {
  if (!config_json || !partition_json) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit_deepspeed: NULL output");
  *config_json = *partition_json = NULL;
  TS_TRY(ts_p3_emit_check(p));
  const int S = p->pp, L = p->model.layers;
  const precision pr = plan_precision(p);

  jb b = {true};
  cJSON *c = cJSON_CreateObject();
  b.ok = c != NULL;
  if (c) {
    jnum(&b, c, "train_batch_size", p->global_batch);
    jnum(&b, c, "train_micro_batch_size_per_gpu", p->mbs);
    jnum(&b, c, "gradient_accumulation_steps", p->micro_batches);
    if (pr != PREC_FP32) {
      cJSON *h = jobj(&b, c, pr == PREC_BF16 ? "bf16" : "fp16");
      if (h) jbool(&b, h, "enabled", true);
    }
    /* The plan's memory model keeps the full optimizer state on every data-parallel rank. */
    cJSON *z = jobj(&b, c, "zero_optimization");
    if (z) jnum(&b, z, "stage", 0);
    cJSON *pl = jobj(&b, c, "pipeline");
    if (pl) {
      jnum(&b, pl, "stages", S);
      jnum(&b, pl, "activation_checkpoint_interval", p->model.recompute ? 1 : 0);
    }
  }
  TS_TRY(json_take(c, b.ok, "deepspeed_config.json", config_json));

  /* Layer list [embedding, transformer 0 .. L-1, head]: stage s gets [parts[s], parts[s+1]). */
  int parts[TS_P3_MAX_STAGES + 1], counts[TS_P3_MAX_STAGES], firsts[TS_P3_MAX_STAGES];
  parts[0] = 0;
  for (int s = 0; s < S; s++) {
    counts[s] = p->stages[s].nlayers;
    firsts[s] = p->stages[s].first_layer;
    parts[s + 1] = 1 + p->stages[s].first_layer + p->stages[s].nlayers;
  }
  parts[S] = L + 2;
  b.ok = true;
  cJSON *q = cJSON_CreateObject();
  b.ok = q != NULL;
  if (q) {
    jstr(&b, q, "format", "tessera-plan3d-deepspeed-partition");
    jnum(&b, q, "version", 1);
    jstr(&b, q, "deepspeed_checked", TS_P3_DEEPSPEED_CHECKED);
    jstr(&b, q, "layer_list",
         "PipelineModule layers: 0 the embedding, 1..num_layers the transformer layers in order, num_layers + 1 "
         "the head (final norm and output layer); stage s builds layers [parts[s], parts[s+1])");
    jnum(&b, q, "num_layers", L);
    jnum(&b, q, "num_stages", S);
    jints(&b, q, "parts", parts, S + 1);
    jints(&b, q, "stage_layers", counts, S);
    jints(&b, q, "stage_first_layer", firsts, S);
    jbool(&b, q, "tied_embedding", p->model.tied_embedding);
    cJSON *topo = jobj(&b, q, "topology");
    if (topo) {
      jstr(&b, topo, "class", "PipeModelDataParallelTopology");
      jnum(&b, topo, "num_pp", S);
      jnum(&b, topo, "num_dp", p->dp);
      jnum(&b, topo, "num_mp", plan_tp(p));
    }
  }
  const ts_status s = json_take(q, b.ok, "deepspeed_partition.json", partition_json);
  if (s != TS_OK) free(*config_json), *config_json = NULL;
  return s;
}

/* ---- GPUs per node -------------------------------------------------------------------------- */

typedef struct gpn_search {
  const ts_p3_plan *p;
  int tp;
  int used[TS_P3_MAX_TYPES];   /* nodes of each type in the order */
  int g[TS_P3_MAX_TYPES];
  int free_t[TS_P3_MAX_TYPES], nfree;
  int nsol;
  int sol[2][TS_P3_MAX_TYPES];
  long long budget;
} gpn_search;

/* Whether the plan's stages sit on the nodes as it says under GPUs-per-node g; why[cap] when not. */
static bool gpn_fits(const ts_p3_plan *p, int tp, const int *g, char *why, size_t cap) {
  long long total = 0;
  for (int n = 0; n < p->nnodes; n++) total += g[p->node_order[n]];
  const long long want = (long long)p->dp * p->pp * tp;
  if (total != want) {
    snprintf(why, cap, "the nodes hold %lld GPUs, the plan uses dp x pp x tp = %lld", total, want);
    return false;
  }
  for (int t = 0; t < p->ntypes; t++)
    if (g[t] % tp) {
      snprintf(why, cap, "a node of type '%s' with %d GPUs would split a tensor-parallel group of %d across nodes",
               p->type_name[t], g[t], tp);
      return false;
    }
  for (int s = 0; s < p->pp; s++) {
    const ts_p3_stage *st = &p->stages[s];
    const long long a = st->first_gpu, e = (long long)st->first_gpu + st->ngpus;
    long long base = 0;
    int first_type = -1;
    bool two = false;
    for (int n = 0; n < p->nnodes; n++) {
      const int t = p->node_order[n];
      const long long lo = base, hi = base + g[t];
      base = hi;
      if (hi <= a || lo >= e) continue;
      if (first_type < 0) first_type = t;
      else if (t != first_type) two = true;
      if (!st->mixed && strcmp(p->gpu_name[t], p->gpu_name[st->type]) != 0) {
        snprintf(why, cap, "stage %d (GPUs %lld-%lld) would reach node %d of type '%s' (%s), the plan puts it on %s", s,
                 a, e - 1, n, p->type_name[t], p->gpu_name[t], p->gpu_name[st->type]);
        return false;
      }
    }
    if (st->mixed && !two) {
      snprintf(why, cap, "stage %d (GPUs %lld-%lld) would sit on one node type, the plan says it spans types", s, a, e - 1);
      return false;
    }
  }
  return true;
}

static void gpn_dfs(gpn_search *s, int k, long long remaining) {
  if (s->nsol >= 2 || s->budget <= 0) return;
  s->budget--;
  char why[8];
  if (k == s->nfree) {
    if (remaining == 0 && gpn_fits(s->p, s->tp, s->g, why, sizeof why)) memcpy(s->sol[s->nsol++], s->g, sizeof s->g);
    return;
  }
  const int t = s->free_t[k];
  long long later = 0; /* the least the later free types take */
  for (int i = k + 1; i < s->nfree; i++) later += (long long)s->used[s->free_t[i]] * s->tp;
  if (k == s->nfree - 1) {
    if (remaining <= 0 || remaining % s->used[t]) return;
    const long long v = remaining / s->used[t];
    if (v % s->tp || v > 1 << 20) return;
    s->g[t] = (int)v;
    gpn_dfs(s, k + 1, 0);
    return;
  }
  for (long long v = s->tp; v * s->used[t] + later <= remaining && s->nsol < 2 && s->budget > 0; v += s->tp) {
    s->g[t] = (int)v;
    gpn_dfs(s, k + 1, remaining - v * s->used[t]);
  }
}

static void gpn_str(const ts_p3_plan *p, const int *used, const int *g, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int t = 0; t < p->ntypes; t++) {
    if (!used[t]) continue;
    const int w = snprintf(buf + n, cap - n, "%s%s=%d", n ? "," : "", p->type_name[t], g[t]);
    if (w < 0 || (size_t)w >= cap - n) return;
    n += (size_t)w;
  }
}

ts_status ts_p3_emit_gpus_per_node(const ts_p3_plan *p, const ts_p3_emit_opts *o, int gpus_per_node[TS_P3_MAX_TYPES]) {
  if (!gpus_per_node) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit_gpus_per_node: NULL output");
  TS_TRY(ts_p3_emit_check(p));
  if (p->nnodes < 1 || p->nnodes > TS_P3_MAX_NODES)
    return ts_error(TS_ERR_INVALID_ARG, "nnodes %d is not in [1, %d]", p->nnodes, TS_P3_MAX_NODES);
  gpn_search s;
  memset(&s, 0, sizeof s);
  s.p = p, s.tp = plan_tp(p), s.budget = 1 << 22;
  for (int n = 0; n < p->nnodes; n++) {
    const int t = p->node_order[n];
    if (t < 0 || t >= p->ntypes) return ts_error(TS_ERR_INVALID_ARG, "node %d has type %d of %d", n, t, p->ntypes);
    s.used[t]++;
  }
  long long remaining = (long long)p->dp * p->pp * s.tp;
  for (int t = 0; t < p->ntypes; t++) {
    const int opt = o ? o->gpus_per_node[t] : 0, given = opt > 0 ? opt : p->gpus_per_node[t];
    if (opt < 0 || given < 0)
      return ts_error(TS_ERR_INVALID_ARG, "%d GPUs per node for type '%s'", opt < 0 ? opt : given, p->type_name[t]);
    if (!s.used[t]) continue;
    if (given > 0) s.g[t] = given, remaining -= (long long)given * s.used[t];
    else s.free_t[s.nfree++] = t;
  }
  char why[256] = "";
  if (s.nfree == 0) {
    if (!gpn_fits(p, s.tp, s.g, why, sizeof why))
      return ts_error(TS_ERR_INVALID_ARG, "the GPUs per node given or recorded do not fit the plan: %s", why);
    memcpy(gpus_per_node, s.g, sizeof s.g);
    return TS_OK;
  }
  gpn_dfs(&s, 0, remaining);
  if (s.nsol == 1) {
    memcpy(gpus_per_node, s.sol[0], sizeof s.sol[0]);
    return TS_OK;
  }
  if (s.nsol >= 2) {
    char a[256], b[256];
    gpn_str(p, s.used, s.sol[0], a, sizeof a);
    gpn_str(p, s.used, s.sol[1], b, sizeof b);
    return ts_error(TS_ERR_INVALID_ARG,
                    "the plan does not fix how many GPUs a node of each type has (both %s and %s fit its "
                    "stages); give them (tessera plan3d emit --gpus-per-node TYPE=N,...)", a, b);
  }
  if (s.budget <= 0)
    return ts_error(TS_ERR_INVALID_ARG, "too many GPU-per-node assignments to try; give them (--gpus-per-node TYPE=N,...)");
  return ts_error(TS_ERR_INVALID_ARG,
                  "no number of GPUs per node type puts the plan's %lld GPUs on its %d nodes with every stage on "
                  "its node type",
                  (long long)p->dp * p->pp * s.tp, p->nnodes);
}

/* ---- torchrun ---------------------------------------------------------------------------- */

ts_status ts_p3_emit_torchrun(const ts_p3_plan *p, const ts_p3_emit_opts *o, char **sh) {
  if (!sh) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit_torchrun: NULL output");
  *sh = NULL;
  int g[TS_P3_MAX_TYPES];
  TS_TRY(ts_p3_emit_gpus_per_node(p, o, g));
  const int tp = plan_tp(p);
  const long long per_stage = (long long)p->dp * tp;
  text t;
  TS_TRY(text_open(&t));
  FILE *f = t.f;
  fprintf(f, "#!/usr/bin/env bash\n"
             "# torchrun launch of a tessera plan3d plan, one command per node (written by tessera plan3d emit).\n");
  plan_summary(f, p);
  fprintf(f,
          "#\n"
          "# On every node of the plan, with the node's place in the node order below as NODE_RANK, and the\n"
          "# same MASTER_ADDR (the host of node 0) and MASTER_PORT everywhere:\n"
          "#   NODE_RANK=0 MASTER_ADDR=host0 MASTER_PORT=29500 bash torchrun.sh [more pretrain_gpt.py arguments]\n"
          "# torchrun starts TRAIN_SCRIPT (default pretrain_gpt.py) with \"${MEGATRON_ARGS[@]}\" from\n"
          "# megatron_args.sh beside this file, then this script's arguments (data, tokenizer, optimizer).\n"
          "# TORCHRUN (default torchrun) names the launcher, e.g. \"python -m torch.distributed.run\".\n"
          "#\n"
          "# The rendezvous is static (torchrun's --rdzv-backend static with --node-rank), not c10d: c10d\n"
          "# ignores --node-rank and numbers the nodes in its own order, which would put the plan's stages\n"
          "# on other node types. A node's global ranks follow the GPUs of the nodes before it; Megatron's\n"
          "# and DeepSpeed's rank order puts tp fastest, then dp, then pp, so stage s is ranks\n"
          "# [s*%lld, (s+1)*%lld).\n"
          "#\n"
          "# node  type / GPU, local processes, global ranks, pipeline stages\n",
          per_stage, per_stage);
  long long base = 0;
  for (int n = 0; n < p->nnodes; n++) {
    const int ty = p->node_order[n];
    char tn[TS_P3_NAME], gn[TS_P3_NAME];
    word_safe(p->type_name[ty], tn, sizeof tn);
    word_safe(p->gpu_name[ty], gn, sizeof gn);
    for (char *c = tn; *c; c++) if (*c == ' ') *c = '_';
    for (char *c = gn; *c; c++) if (*c == ' ') *c = '_';
    const long long s0 = base / per_stage, s1 = (base + g[ty] - 1) / per_stage;
    char stages[48];
    if (s0 == s1) snprintf(stages, sizeof stages, "%lld", s0);
    else snprintf(stages, sizeof stages, "%lld-%lld", s0, s1);
    fprintf(f, "#@ node=%d type=%s gpu=%s nproc=%d ranks=%lld-%lld stages=%s\n", n, tn, gn, g[ty], base, base + g[ty] - 1,
            stages);
    base += g[ty];
  }
  fprintf(f,
          "set -euo pipefail\n"
          "HERE=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n"
          ": \"${NODE_RANK:?set NODE_RANK to this node's place in the plan's node order, 0-%d}\"\n"
          ": \"${MASTER_ADDR:?set MASTER_ADDR to the host of node 0}\"\n"
          "MASTER_PORT=\"${MASTER_PORT:-29500}\"\n"
          "TRAIN_SCRIPT=\"${TRAIN_SCRIPT:-pretrain_gpt.py}\"\n"
          "read -r -a LAUNCHER <<< \"${TORCHRUN:-torchrun}\"\n"
          "case \"$NODE_RANK\" in\n",
          p->nnodes - 1);
  for (int n = 0; n < p->nnodes; n++) {
    const int ty = p->node_order[n];
    char gn[TS_P3_NAME];
    word_safe(p->gpu_name[ty], gn, sizeof gn);
    fprintf(f, "  %d) NPROC=%d GPU='%s' ;;\n", n, g[ty], gn);
  }
  fprintf(f,
          "  *) echo \"torchrun.sh: NODE_RANK=$NODE_RANK: the plan has nodes 0-%d\" >&2; exit 2 ;;\n"
          "esac\n"
          "if [ ! -f \"$HERE/megatron_args.sh\" ]; then\n"
          "  echo \"torchrun.sh: $HERE/megatron_args.sh is missing (tessera plan3d emit --only megatron writes it)\" >&2\n"
          "  exit 2\n"
          "fi\n"
          "source \"$HERE/megatron_args.sh\"\n"
          "# A node of another type than the plan puts here would hold other stages: warn when nvidia-smi\n"
          "# sees another GPU or fewer of them.\n"
          "if command -v nvidia-smi >/dev/null 2>&1; then\n"
          "  HAVE=\"$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)\"\n"
          "  COUNT=\"$(nvidia-smi -L 2>/dev/null | wc -l || true)\"\n"
          "  case \"${HAVE,,}\" in\n"
          "    *\"${GPU,,}\"*) ;;\n"
          "    *) echo \"torchrun.sh: warning: the plan puts a $GPU node at NODE_RANK=$NODE_RANK; nvidia-smi reports '$HAVE'\" >&2 ;;\n"
          "  esac\n"
          "  if [ \"${COUNT:-0}\" -lt \"$NPROC\" ]; then\n"
          "    echo \"torchrun.sh: warning: the plan runs $NPROC processes on node $NODE_RANK; nvidia-smi lists ${COUNT:-0} GPUs\" >&2\n"
          "  fi\n"
          "fi\n"
          "export CUDA_DEVICE_MAX_CONNECTIONS=\"${CUDA_DEVICE_MAX_CONNECTIONS:-1}\"\n"
          "exec \"${LAUNCHER[@]}\" --nnodes %d --nproc-per-node \"$NPROC\" --node-rank \"$NODE_RANK\" \\\n"
          "  --rdzv-backend static --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" \\\n"
          "  \"$TRAIN_SCRIPT\" \"${MEGATRON_ARGS[@]}\" \"$@\"\n",
          p->nnodes - 1, p->nnodes);
  return text_close(&t, sh);
}

/* ---- a directory of them ----------------------------------------------------------------- */

ts_status ts_p3_emit_dir(const ts_p3_plan *p, const ts_p3_emit_opts *o, const char *dir, int what, char **written) {
  if (written) *written = NULL;
  if (!dir || !dir[0]) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_emit_dir: no output directory");
  if (what <= 0 || (what & ~TS_P3_EMIT_ALL))
    return ts_error(TS_ERR_INVALID_ARG, "file groups %d are not a combination of megatron, deepspeed, torchrun", what);
  enum { NF = 5 };
  static const char *const names[NF] = {"megatron_args.sh", "megatron_config.json", "deepspeed_config.json",
                                        "deepspeed_partition.json", "torchrun.sh"};
  char *texts[NF] = {0};
  ts_status s = TS_OK;
  if (what & TS_P3_EMIT_MEGATRON) s = ts_p3_emit_megatron(p, &texts[0], &texts[1]);
  if (s == TS_OK && (what & TS_P3_EMIT_DEEPSPEED)) s = ts_p3_emit_deepspeed(p, &texts[2], &texts[3]);
  if (s == TS_OK && (what & TS_P3_EMIT_TORCHRUN)) s = ts_p3_emit_torchrun(p, o, &texts[4]);
  if (s == TS_OK) s = ts_mkdirs(dir);
  text list = {0};
  if (s == TS_OK && written) s = text_open(&list);
  for (int i = 0; i < NF && s == TS_OK; i++) {
    if (!texts[i]) continue;
    char path[4096];
    const int w = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (w < 0 || (size_t)w >= sizeof path) {
      s = ts_error(TS_ERR_INVALID_ARG, "output path too long: '%s/%s'", dir, names[i]);
      break;
    }
    s = ts_write_file_atomic(path, texts[i], strlen(texts[i]));
    if (s == TS_OK && i == 4 && chmod(path, 0755) != 0) s = ts_error(TS_ERR_IO, "cannot make '%s' executable", path);
    if (s == TS_OK && written) fprintf(list.f, "%s\n", path);
  }
  for (int i = 0; i < NF; i++) free(texts[i]);
  if (list.f && s != TS_OK) {
    fclose(list.f);
    free(list.s);
  } else if (list.f) {
    s = text_close(&list, written);
  }
  return s;
}
