/* tessera llm SUBCOMMAND: the GGUF LLM runtime from the command line.
 *   generate    stream a continuation of a prompt (greedy or sampled; optional chat template)
 *   perplexity  llama.cpp's windowed perplexity over a text file
 *   bench       prefill and decode speed, bytes per token, GB/s and % of the machine's bandwidth
 *   tokenize    token ids (and pieces) of a text
 *   logits      logits of every position of a prompt into a .npy file (the peer check reads it)
 *   info        the model's configuration
 *   calibrate, eval, and bench with --thresholds / --config: activation sparsity (cmd_llm_sparse.c) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tessera/measure.h"
#include "tessera/hwinfo.h"
#include "tessera/io.h"
#include "tessera/llm.h"

#define CMD "llm"

enum { O_MODEL = 1, O_PROMPT = 2, O_N = 4, O_TEMP = 8, O_SEED = 16, O_TEXT = 32, O_CTX = 64, O_FULL = 128,
       O_CHUNKS = 256, O_CHAT = 512, O_SPECIAL = 1024, O_OUT = 2048, O_PLEN = 4096, O_GEN = 8192,
       O_REPEATS = 16384, O_TOPK = 32768, O_FILE = 65536, O_BATCH = 131072, O_BWS = 262144, O_ADAPT = 524288,
       O_WPF = 1048576 };

typedef struct opts {
  cli_common_opts c;
  const char *model, *prompt, *text, *out, *file;
  long n, seed, ctx, chunks, plen, gen, repeats, topk, batch, wpf; /* wpf -1: measure (auto) */
  double temp, bw_seconds;
  bool full, chat, special, ctx_set, adapt;
} opts;

static const struct { const char *name; unsigned allowed; const char *usage; } kSubs[] = {
    {"generate", O_MODEL | O_PROMPT | O_N | O_TEMP | O_SEED | O_CTX | O_CHAT | O_TOPK | O_BATCH | O_SPECIAL | O_ADAPT | O_WPF,
     "generate --model FILE --prompt TEXT [-n 64] [--temp 0] [--top-k 40] [--seed 1] [--chat] [--special] [--ctx N]\n"
     "                       [--adaptive-threads on|off] [--weight-prefetch auto|BYTES] [--json]"},
    {"perplexity", O_MODEL | O_TEXT | O_CTX | O_FULL | O_CHUNKS | O_BATCH | O_WPF,
     "perplexity --model FILE --text FILE [--ctx 512] [--full] [--chunks N] [--weight-prefetch auto|BYTES] [--json]"},
    {"bench", O_MODEL | O_PLEN | O_GEN | O_REPEATS | O_CTX | O_BWS | O_ADAPT | O_WPF,
     "bench --model FILE [--prompt-len 128] [--gen 64] [--repeats 5] [--bw-seconds 0.5] [--adaptive-threads on|off]\n"
     "                       [--weight-prefetch auto|BYTES] [--json]"},
    {"tokenize", O_MODEL | O_PROMPT | O_FILE | O_SPECIAL, "tokenize --model FILE (--prompt TEXT | --file FILE) [--special] [--json]"},
    {"logits", O_MODEL | O_PROMPT | O_OUT | O_SPECIAL | O_BATCH, "logits --model FILE --prompt TEXT --out FILE.npy [--special] [--json]"},
    {"info", O_MODEL, "info --model FILE [--json]"},
};
#define NSUBS (int)(sizeof kSubs / sizeof kSubs[0])

static void print_help(void) {
  printf("usage: tessera llm SUBCOMMAND --model FILE.gguf [options] [--threads N] [--json]\n\n");
  for (int i = 0; i < NSUBS; i++) printf("  tessera llm %s\n", kSubs[i].usage);
  printf("\nA LLaMA- or Gemma-3-architecture GGUF model (F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q4_K/Q6_K weights)\n"
         "with its gpt2 (byte-level BPE) or llama (SentencePiece) tokenizer. generate streams the text as it\n"
         "is produced; --temp 0\n"
         "(default) is greedy, --chat wraps the prompt in the model's ChatML template; without --ctx it\n"
         "stops at the model's training context (llm info prints it), --ctx N goes past it with a note.\n"
         "JSON output replaces bytes that are not UTF-8 (a token may end mid-character) by U+FFFD.\n"
         "perplexity follows\n"
         "llama.cpp: windows of --ctx tokens, each from an empty cache, scoring the second half of each\n"
         "window (--full: every position). bench times a --prompt-len prefill and --gen decode steps (median\n"
         "of --repeats) and reports bytes read per decoded token (weights + the fp16 KV cache attended), the\n"
         "GB/s that makes and its %% of `tessera hwinfo`'s read bandwidth (and of the same read test run\n"
         "right after the timed decode for --bw-seconds; 0 skips it), and, with that read test, its %% of\n"
         "the rate the same kernels stream the model's weight matrices alone in this process (stream_gbs:\n"
         "no attention, norms or barriers between phases), and the CPUs' worth of time other processes took\n"
         "during the timed runs (other_cpus: a figure taken beside busy neighbours reads low). --adaptive-threads (on by default)\n"
         "lets decode steps leave all but one thread out while the threads mostly wait for a partner the OS\n"
         "has descheduled (another busy process), probing the whole team again every 32 steps; the text\n"
         "does not depend on it (bench reports the share of steps run on one thread). --weight-prefetch sets\n"
         "how far ahead (bytes, 0 none) decode's kernels prefetch the weights; auto (default) measures it\n"
         "once per model and thread count from the kernels' stream rate at 0, 2, 4, 16 and 32 KiB (bench\n"
         "prints the rates). The text does not depend on it either.\n");
}

static int parse(int argc, char **argv, int *sub, opts *o) {
  *o = (opts){.n = 64, .seed = 1, .ctx = 0, .plen = 128, .gen = 64, .repeats = 5, .topk = 40, .batch = 512, .bw_seconds = 0.5,
              .adapt = true, .wpf = -1};
  *sub = -1;
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    o->c.help = true;
    return CLI_OK;
  }
  for (int i = 0; i < NSUBS; i++)
    if (!strcmp(argv[1], kSubs[i].name)) *sub = i;
  if (*sub < 0) return cli_usage_error(CMD, "unknown subcommand '%s'", argv[1]);
  unsigned allowed = kSubs[*sub].allowed;
  for (int i = 2; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &o->c);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *a = argv[i];
    unsigned bit = 0;
    const char **str = NULL;
    long *num = NULL, lo = 0, hi = 0;
    if (!strcmp(a, "--model")) bit = O_MODEL, str = &o->model;
    else if (!strcmp(a, "--prompt")) bit = O_PROMPT, str = &o->prompt;
    else if (!strcmp(a, "--text")) bit = O_TEXT, str = &o->text;
    else if (!strcmp(a, "--file")) bit = O_FILE, str = &o->file;
    else if (!strcmp(a, "--out")) bit = O_OUT, str = &o->out;
    else if (!strcmp(a, "-n")) bit = O_N, num = &o->n, lo = 0, hi = 1 << 20;
    else if (!strcmp(a, "--seed")) bit = O_SEED, num = &o->seed, lo = 0, hi = 0x7fffffffL;
    else if (!strcmp(a, "--ctx")) bit = O_CTX, num = &o->ctx, lo = 2, hi = 1 << 20, o->ctx_set = true;
    else if (!strcmp(a, "--chunks")) bit = O_CHUNKS, num = &o->chunks, lo = 1, hi = 1 << 20;
    else if (!strcmp(a, "--prompt-len")) bit = O_PLEN, num = &o->plen, lo = 1, hi = 1 << 16;
    else if (!strcmp(a, "--gen")) bit = O_GEN, num = &o->gen, lo = 1, hi = 1 << 16;
    else if (!strcmp(a, "--repeats")) bit = O_REPEATS, num = &o->repeats, lo = 1, hi = 1000;
    else if (!strcmp(a, "--top-k")) bit = O_TOPK, num = &o->topk, lo = 0, hi = 1 << 24;
    else if (!strcmp(a, "--batch")) bit = O_BATCH, num = &o->batch, lo = 1, hi = 8192;
    else if (!strcmp(a, "--temp")) bit = O_TEMP;
    else if (!strcmp(a, "--bw-seconds")) bit = O_BWS;
    else if (!strcmp(a, "--adaptive-threads")) bit = O_ADAPT;
    else if (!strcmp(a, "--weight-prefetch")) bit = O_WPF;
    else if (!strcmp(a, "--full")) bit = O_FULL, o->full = true;
    else if (!strcmp(a, "--chat")) bit = O_CHAT, o->chat = true;
    else if (!strcmp(a, "--special")) bit = O_SPECIAL, o->special = true;
    else return cli_usage_error(CMD, "%s: unknown option '%s'", kSubs[*sub].name, a);
    if (!(allowed & bit)) return cli_usage_error(CMD, "%s does not take %s", kSubs[*sub].name, a);
    if (str || num || bit == O_TEMP || bit == O_BWS || bit == O_ADAPT || bit == O_WPF) {
      const char *v = cli_value(CMD, argc, argv, &i);
      if (!v) return CLI_USAGE;
      if (str) *str = v;
      else if (num && !cli_parse_int(CMD, a, v, lo, hi, num)) return CLI_USAGE;
      else if (bit == O_TEMP && !cli_parse_double(CMD, a, v, 0, 100, &o->temp)) return CLI_USAGE;
      else if (bit == O_BWS && !cli_parse_double(CMD, a, v, 0, 60, &o->bw_seconds)) return CLI_USAGE;
      else if (bit == O_ADAPT) {
        if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
          return cli_usage_error(CMD, "--adaptive-threads expects on or off, got '%s'", v);
        o->adapt = !strcmp(v, "on");
      } else if (bit == O_WPF) {
        if (!strcmp(v, "auto")) o->wpf = -1;
        else if (!cli_parse_int(CMD, a, v, 0, 1 << 20, &o->wpf)) return CLI_USAGE;
      }
    }
  }
  if (o->c.help) return CLI_OK;
  if (!o->model) return cli_usage_error(CMD, "%s needs --model FILE", kSubs[*sub].name);
  return CLI_OK;
}

/* ---- shared pieces ----------------------------------------------------------------------- */

typedef struct run {
  ts_context *ctx;
  ts_llm_model *m;
  const ts_llm_vocab *v;
  const ts_llm_config *cfg;
} run;

static ts_status open_run(const opts *o, run *r) {
  memset(r, 0, sizeof *r);
  TS_TRY(ts_context_create(&r->ctx, o->c.threads));
  ts_status s = ts_llm_model_load(&r->m, o->model);
  if (s != TS_OK) return s;
  if (o->wpf >= 0) TS_TRY(ts_llm_model_set_weight_prefetch(r->m, (int)o->wpf));
  r->v = ts_llm_model_vocab(r->m);
  r->cfg = ts_llm_model_config(r->m);
  return TS_OK;
}

static void close_run(run *r) {
  ts_llm_model_destroy(r->m);
  ts_context_destroy(r->ctx);
}

/* A context past the model's training context runs (llama.cpp allows it too), with a note: the
 * positions past it are ones the model never saw in training. */
static void note_past_train(const run *r, long ctx) {
  if (ctx > r->cfg->n_ctx_train)
    fprintf(stderr, "tessera llm: note: the %ld-token context exceeds the model's %d-token training context\n", ctx,
            r->cfg->n_ctx_train);
}

/* Tokenizes text into a malloc'd array. */
static ts_status tokenize(const ts_llm_vocab *v, const char *text, size_t len, bool bos, bool special, int32_t **ids,
                          size_t *n) {
  size_t cap = len + 16;
  *ids = malloc(cap * sizeof **ids); /* a byte never makes more than one token (+ BOS) */
  if (!*ids) return ts_error(TS_ERR_OOM, "out of memory for %zu tokens", cap);
  ts_status s = ts_llm_tokenize(v, text, len, bos, special, *ids, cap, n);
  if (s != TS_OK) {
    free(*ids);
    *ids = NULL;
  }
  return s;
}

static cJSON *ids_json(const int32_t *ids, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
  return a;
}

/* The ChatML wrapping SmolLM2's template produces: its default system message (taken from the
 * template text), the user turn, and the assistant header. */
static ts_status chat_wrap(const ts_llm_model *m, const char *prompt, char **out) {
  const char *tmpl;
  size_t tl;
  if (ts_gguf_get_str(ts_llm_model_gguf(m), "tokenizer.chat_template", &tmpl, &tl) != TS_OK || !memmem(tmpl, tl, "<|im_start|>", 12))
    return ts_error(TS_ERR_UNSUPPORTED, "--chat: the model has no ChatML (<|im_start|>) chat template");
  const char *tag = "<|im_start|>system\n";
  const char *sys = memmem(tmpl, tl, tag, strlen(tag));
  size_t sl = 0;
  if (sys) {
    sys += strlen(tag);
    const char *end = memmem(sys, tl - (size_t)(sys - tmpl), "<|im_end|>", 10);
    sl = end ? (size_t)(end - sys) : 0;
  }
  size_t need = sl + strlen(prompt) + 128;
  *out = malloc(need);
  if (!*out) return ts_error(TS_ERR_OOM, "out of memory");
  if (sl) snprintf(*out, need, "<|im_start|>system\n%.*s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", (int)sl, sys, prompt);
  else snprintf(*out, need, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", prompt);
  return TS_OK;
}

/* ---- generate ---------------------------------------------------------------------------- */

static int do_generate(const opts *o, run *r) {
  char *wrapped = NULL;
  const char *prompt = o->prompt;
  if (!prompt) return cli_usage_error(CMD, "generate needs --prompt TEXT");
  ts_status s = TS_OK;
  if (o->chat && (s = chat_wrap(r->m, prompt, &wrapped)) != TS_OK) return cli_fail(CMD, s);
  if (wrapped) prompt = wrapped;
  int32_t *ids = NULL;
  size_t np = 0;
  s = tokenize(r->v, prompt, strlen(prompt), true, o->chat || o->special, &ids, &np);
  free(wrapped);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (np == 0) {
    free(ids);
    return cli_usage_error(CMD, "generate: the prompt makes no tokens");
  }
  /* Without --ctx the context is what the prompt and -n need, up to the model's training context:
   * past it the model sees positions it was never trained on, and the cache for -n's largest
   * values would not fit in memory. --ctx N goes past it on purpose. */
  long n_new = o->n, ctx;
  const long train = r->cfg->n_ctx_train;
  if (o->ctx_set) {
    ctx = o->ctx;
    note_past_train(r, ctx);
  } else {
    if ((long)np >= train) {
      free(ids);
      return cli_usage_error(CMD, "generate: the prompt's %zu tokens fill the model's %ld-token training context (--ctx N goes past it)",
                             np, train);
    }
    if ((long)np + n_new > train) {
      n_new = train - (long)np;
      fprintf(stderr, "tessera llm: generating at most %ld tokens, up to the model's %ld-token training context (--ctx N goes past it)\n",
              n_new, train);
    }
    ctx = (long)np + n_new < train ? (long)np + n_new + 1 : train;
  }
  if ((long)np + n_new > ctx) {
    free(ids);
    return cli_usage_error(CMD, "generate: %zu prompt tokens + %ld new do not fit --ctx %ld", np, n_new, ctx);
  }
  ts_llm_state *st = NULL;
  float *logits = malloc((size_t)r->cfg->n_vocab * sizeof *logits);
  int32_t *out = malloc(((size_t)n_new + 1) * sizeof *out);
  if (!logits || !out) s = ts_error(TS_ERR_OOM, "out of memory");
  if (s == TS_OK) s = ts_llm_state_create(&st, r->m, r->ctx, (int)ctx, (int)o->batch);
  if (s == TS_OK) ts_llm_state_set_adaptive(st, o->adapt);
  ts_rng rng;
  ts_rng_seed(&rng, (uint64_t)o->seed);
  double t0 = ts_now(), t_prefill = 0;
  if (s == TS_OK) s = ts_llm_eval(st, ids, (int)np, 0, TS_LLM_LOGITS_LAST, logits);
  t_prefill = ts_now() - t0;
  size_t ng = 0;
  bool stopped = false;
  double t1 = ts_now();
  char piece[256];
  while (s == TS_OK && (long)ng < n_new) {
    int32_t tok = ts_llm_sample(logits, r->cfg->n_vocab, (float)o->temp, (int)o->topk, &rng);
    out[ng++] = tok;
    if (tok == ts_llm_vocab_eos(r->v) || ts_llm_vocab_is_control(r->v, tok)) {
      stopped = true;
      break;
    }
    size_t pl;
    if (!o->c.json && ts_llm_token_piece(r->v, tok, false, piece, sizeof piece, &pl) == TS_OK) {
      fwrite(piece, 1, pl < sizeof piece ? pl : sizeof piece, stdout);
      fflush(stdout);
    }
    if ((long)ng < n_new) s = ts_llm_eval(st, &tok, 1, (int)(np + ng - 1), TS_LLM_LOGITS_LAST, logits);
  }
  double t_dec = ts_now() - t1;
  int rc = CLI_OK;
  if (s != TS_OK) rc = cli_fail(CMD, s);
  else if (o->c.json) {
    char *text = NULL;
    ts_llm_detokenize(r->v, out, ng, false, &text, NULL);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "prompt_tokens", ids_json(ids, np));
    cJSON_AddItemToObject(j, "tokens", ids_json(out, ng));
    cJSON_AddStringToObject(j, "text", text ? text : "");
    cJSON_AddBoolToObject(j, "stopped", stopped);
    cJSON_AddNumberToObject(j, "prefill_tps", (double)np / t_prefill);
    cJSON_AddNumberToObject(j, "decode_tps", ng > 1 ? (double)(ng - 1) / t_dec : 0);
    cli_print_json(j);
    free(text);
  } else {
    printf("\n");
    fprintf(stderr, "[%zu prompt tokens at %.1f tok/s, %zu generated at %.1f tok/s, %d threads]\n", np,
            (double)np / t_prefill, ng, ng > 1 ? (double)(ng - 1) / t_dec : 0.0, ts_context_threads(r->ctx));
  }
  ts_llm_state_destroy(st);
  free(logits);
  free(out);
  free(ids);
  return rc;
}

/* ---- perplexity -------------------------------------------------------------------------- */

static int do_perplexity(const opts *o, run *r) {
  if (!o->text) return cli_usage_error(CMD, "perplexity needs --text FILE");
  char *data;
  size_t len;
  ts_status s = ts_read_file(o->text, &data, &len);
  if (s != TS_OK) return cli_fail(CMD, s);
  int32_t *ids = NULL;
  size_t n = 0;
  s = tokenize(r->v, data, len, true, false, &ids, &n);
  free(data);
  if (s != TS_OK) return cli_fail(CMD, s);
  int ctx = o->ctx_set ? (int)o->ctx : 512;
  note_past_train(r, ctx);
  ts_llm_state *st = NULL;
  ts_llm_ppl_result res;
  s = ts_llm_state_create(&st, r->m, r->ctx, ctx, (int)o->batch);
  if (s == TS_OK) s = ts_llm_perplexity(st, ids, n, ctx, o->full, (int)o->chunks, !o->c.json, &res);
  ts_llm_state_destroy(st);
  free(ids);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (o->c.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "text", o->text);
    cJSON_AddNumberToObject(j, "text_tokens", (double)n);
    cJSON_AddNumberToObject(j, "ctx", ctx);
    cJSON_AddStringToObject(j, "scoring", o->full ? "full" : "second-half");
    cJSON_AddNumberToObject(j, "chunks", (double)res.chunks);
    cJSON_AddNumberToObject(j, "scored", (double)res.scored);
    cJSON_AddNumberToObject(j, "ppl", res.ppl);
    cJSON_AddNumberToObject(j, "nll", res.nll_mean);
    cJSON_AddNumberToObject(j, "nll_stderr", res.nll_stderr);
    cJSON_AddNumberToObject(j, "seconds", res.seconds);
    cJSON_AddNumberToObject(j, "tokens_per_s", res.tokens_per_s);
    cJSON_AddNumberToObject(j, "threads", ts_context_threads(r->ctx));
    cli_print_json(j);
  } else {
    printf("text        %s (%zu tokens)\n", o->text, n);
    printf("windows     %lld x %d tokens, %s scoring, %lld predictions\n", (long long)res.chunks, ctx,
           o->full ? "full" : "second-half", (long long)res.scored);
    printf("perplexity  %.4f  (mean NLL %.5f +- %.5f nats)\n", res.ppl, res.nll_mean, res.nll_stderr);
    printf("speed       %.1f tokens/s over %.1f s, %d threads\n", res.tokens_per_s, res.seconds, ts_context_threads(r->ctx));
  }
  return CLI_OK;
}

/* ---- tokenize, logits, info ------------------------------------------------------------- */

static int do_tokenize(const opts *o, run *r) {
  char *data = NULL;
  size_t len;
  const char *text = o->prompt;
  ts_status s;
  if (o->file) {
    if ((s = ts_read_file(o->file, &data, &len)) != TS_OK) return cli_fail(CMD, s);
    text = data;
  } else if (!text) {
    return cli_usage_error(CMD, "tokenize needs --prompt TEXT or --file FILE");
  } else {
    len = strlen(text);
  }
  int32_t *ids;
  size_t n;
  s = tokenize(r->v, text, len, true, o->special, &ids, &n);
  free(data);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (o->c.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "ids", ids_json(ids, n));
    cli_print_json(j);
  } else {
    for (size_t i = 0; i < n; i++) {
      size_t tl;
      const char *t = ts_llm_vocab_text(r->v, ids[i], &tl);
      printf("%6d  %.*s\n", ids[i], (int)tl, t);
    }
  }
  free(ids);
  return CLI_OK;
}

static int do_logits(const opts *o, run *r) {
  if (!o->prompt || !o->out) return cli_usage_error(CMD, "logits needs --prompt TEXT and --out FILE.npy");
  int32_t *ids;
  size_t n;
  ts_status s = tokenize(r->v, o->prompt, strlen(o->prompt), true, o->special, &ids, &n);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (n == 0) {
    free(ids);
    return cli_usage_error(CMD, "logits: the prompt makes no tokens");
  }
  ts_llm_state *st = NULL;
  ts_tensor t = {0};
  int64_t shape[2] = {(int64_t)n, r->cfg->n_vocab};
  s = ts_tensor_alloc(&t, TS_F32, 2, shape);
  if (s == TS_OK) s = ts_llm_state_create(&st, r->m, r->ctx, (int)n, (int)o->batch);
  if (s == TS_OK) s = ts_llm_eval(st, ids, (int)n, 0, TS_LLM_LOGITS_ALL, t.data);
  if (s == TS_OK) s = ts_npy_write(o->out, &t);
  ts_llm_state_destroy(st);
  ts_tensor_free(&t);
  int rc = s == TS_OK ? CLI_OK : cli_fail(CMD, s);
  if (rc == CLI_OK && o->c.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "ids", ids_json(ids, n));
    cJSON_AddStringToObject(j, "out", o->out);
    cli_print_json(j);
  }
  free(ids);
  return rc;
}

static int do_info(const opts *o, run *r) {
  const ts_llm_config *c = r->cfg;
  uint64_t wb = ts_llm_model_weight_bytes(r->m);
  if (o->c.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "arch", c->arch);
    cJSON_AddStringToObject(j, "name", c->name);
    cJSON_AddNumberToObject(j, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(j, "d_model", c->d_model);
    cJSON_AddNumberToObject(j, "n_ff", c->n_ff);
    cJSON_AddNumberToObject(j, "n_head", c->n_head);
    cJSON_AddNumberToObject(j, "n_head_kv", c->n_head_kv);
    cJSON_AddNumberToObject(j, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(j, "n_rot", c->n_rot);
    cJSON_AddNumberToObject(j, "n_vocab", c->n_vocab);
    cJSON_AddNumberToObject(j, "n_ctx_train", c->n_ctx_train);
    cJSON_AddNumberToObject(j, "rope_base", c->rope_base);
    cJSON_AddNumberToObject(j, "rms_eps", c->rms_eps);
    cJSON_AddBoolToObject(j, "tied_output", c->tied_output);
    cJSON_AddStringToObject(j, "weight_type", ts_qtype_name(c->wtype));
    cJSON_AddNumberToObject(j, "weight_bytes_per_token", (double)wb);
    cJSON_AddStringToObject(j, "tokenizer", ts_llm_vocab_kind_of(r->v) == TS_LLM_VOCAB_BPE ? "bpe" : "spm");
    if (c->n_swa) { /* gemma3's local layers */
      cJSON_AddNumberToObject(j, "sliding_window", c->n_swa);
      cJSON_AddNumberToObject(j, "sliding_window_layers", c->n_swa_layers);
      cJSON_AddNumberToObject(j, "rope_base_swa", c->rope_base_swa);
    }
    cli_print_json(j);
  } else {
    printf("model       %s (%s, \"%s\")\n", o->model, c->arch, c->name);
    printf("shape       %d layers, d %d, ff %d, heads %d / kv %d x %d, rope %d dims base %g, trained on %d-token contexts\n",
           c->n_layer, c->d_model, c->n_ff, c->n_head, c->n_head_kv, c->head_dim, c->n_rot, (double)c->rope_base,
           c->n_ctx_train);
    printf("mlp         %s-gated\n", ts_llm_act_name(c->ffn_act));
    if (c->n_swa)
      printf("local       %d of the %d layers see the last %d positions, rope base %g\n", c->n_swa_layers, c->n_layer, c->n_swa,
             (double)c->rope_base_swa);
    printf("weights     %s, %.1f MB read per decoded token, output %s\n", ts_qtype_name(c->wtype), (double)wb / 1e6,
           c->tied_output ? "tied to the token embedding" : "output.weight");
    printf("tokenizer   %s, %d tokens, bos %d, eos %d\n", ts_llm_vocab_kind_of(r->v) == TS_LLM_VOCAB_BPE ? "byte-level BPE" : "SentencePiece",
           c->n_vocab, ts_llm_vocab_bos(r->v), ts_llm_vocab_eos(r->v));
  }
  return CLI_OK;
}


/* ---- bench ------------------------------------------------------------------------------- */

/* What `llm bench` measured and derived, from the timed runs to the report. */
typedef struct bench_fig {
  int P, G, R; /* --prompt-len, --gen, --repeats */
  /* the timed runs (bench_time) */
  double prefill_tps, decode_tps;
  ts_llm_timing tm;  /* the decode steps of the last run, by phase */
  double others;     /* CPUs other processes took during the runs (< 0: unknown) */
  double xfer0, xfer1; /* ns a cache line takes between the threads, before / after (0: not measured) */
  /* bytes per token and the bandwidths they are compared with (bench_bandwidth) */
  ts_machine_profile prof;
  bool have_prof;
  double wbytes, kv, bpt, gbs;
  double bw, pct, bw_run, pct_run, bw_ws, pct_ws, stream, pct_stream;
  ts_llm_wpf_report wr;
  double load;
} bench_fig;

/* A --prompt-len prefill and --gen greedy decode steps from it, a warm-up then --repeats times;
 * the median rates, the last run's decode phases, and the machine's state around the runs. */
static ts_status bench_time(const opts *o, run *r, int ctx, bench_fig *f) {
  const ts_llm_config *c = r->cfg;
  const int P = f->P, G = f->G, R = f->R;
  ts_llm_state *st = NULL;
  float *logits = malloc((size_t)c->n_vocab * sizeof *logits);
  int32_t *toks = malloc((size_t)P * sizeof *toks);
  double *tp = malloc((size_t)(R + 1) * sizeof *tp), *td = malloc((size_t)(R + 1) * sizeof *td);
  ts_status s = logits && toks && tp && td ? TS_OK : ts_error(TS_ERR_OOM, "out of memory");
  if (s == TS_OK) s = ts_llm_state_create(&st, r->m, r->ctx, ctx, P < 512 ? P : 512);
  if (s == TS_OK) ts_llm_state_set_adaptive(st, o->adapt);
  ts_rng rng;
  ts_rng_seed(&rng, 7);
  for (int i = 0; i < P && s == TS_OK; i++) toks[i] = 100 + (int32_t)ts_rng_below(&rng, (uint64_t)(c->n_vocab - 100));
  /* how far apart the threads sit, before and after the timed runs (ts_hwinfo_xfer_ns) */
  const bool team = ts_context_threads(r->ctx) > 1;
  if (team && s == TS_OK && ts_hwinfo_xfer_ns(&f->xfer0) != TS_OK) f->xfer0 = 0, ts_error_clear();
  const ts_cpu_mark mark0 = ts_cpu_mark_now(); /* what other processes take during the timed runs */
  for (int rep = 0; rep <= R && s == TS_OK; rep++) { /* rep 0 is the warm-up */
    double t0 = ts_now();
    s = ts_llm_eval(st, toks, P, 0, TS_LLM_LOGITS_LAST, logits);
    double t1 = ts_now();
    ts_llm_state_timing_reset(st);
    for (int g = 0; g < G && s == TS_OK; g++) {
      int32_t tok = ts_llm_sample(logits, c->n_vocab, 0, 0, NULL);
      s = ts_llm_eval(st, &tok, 1, P + g, TS_LLM_LOGITS_LAST, logits);
    }
    double t2 = ts_now();
    tp[rep] = t1 - t0;
    td[rep] = t2 - t1;
    if (rep == R) ts_llm_state_timing(st, &f->tm);
  }
  f->others = ts_cpu_others(mark0, ts_cpu_mark_now());
  if (team && s == TS_OK && ts_hwinfo_xfer_ns(&f->xfer1) != TS_OK) f->xfer1 = 0, ts_error_clear();
  ts_llm_state_destroy(st);
  free(logits);
  free(toks);
  if (s == TS_OK) {
    qsort(tp + 1, (size_t)R, sizeof *tp, ts_cmp_double);
    qsort(td + 1, (size_t)R, sizeof *td, ts_cmp_double);
    f->prefill_tps = P / tp[1 + R / 2];
    f->decode_tps = G / td[1 + R / 2];
  }
  free(tp);
  free(td);
  return s;
}

/* A read test of `bytes` (0: the profile's buffer) for --bw-seconds; 0 when skipped or failed. */
static double bench_read_gbs(const opts *o, run *r, size_t bytes) {
  double gbs = 0;
  if (o->bw_seconds > 0 && ts_hwinfo_read_gbs(ts_context_threads(r->ctx), bytes, o->bw_seconds, 3, &gbs) != TS_OK) {
    gbs = 0;
    ts_error_clear();
  }
  return gbs;
}

/* Bytes per decoded token and the bandwidths they are compared with. */
static void bench_bandwidth(const opts *o, run *r, bench_fig *f) {
  const int P = f->P, G = f->G;
  /* bytes a decode step reads: every weight (packed copies, the same size as the file's) plus the
   * fp16 K and V of the positions it attends: step g at position P + g attends P + g + 1 of them,
   * P + (G + 1) / 2 on average */
  f->wbytes = (double)ts_llm_model_weight_bytes(r->m);
  f->kv = (double)ts_llm_model_kv_bytes_per_pos(r->m) * (P + (G + 1) / 2.0);
  f->bpt = f->wbytes + f->kv, f->gbs = f->bpt * f->decode_tps / 1e9;
  /* % of bandwidth = achieved GB/s / the machine profile's read bandwidth (`tessera hwinfo`: best
   * pass over a 256 MiB buffer with all threads) = decode tok/s / the bound tok/s (that bandwidth /
   * bytes per token). The same read test is also run here, right after the timed decode, for a
   * figure taken under the same machine load ("_run"). */
  f->bw = f->have_prof ? f->prof.bandwidth_gbs : 0, f->pct = f->bw > 0 ? 100.0 * f->gbs / f->bw : 0;
  f->bw_run = bench_read_gbs(o, r, 0);
  f->pct_run = f->bw_run > 0 ? 100.0 * f->gbs / f->bw_run : 0;
  /* the same read test over a buffer the size of a decode step's bytes: where the model fits in a
   * cache that a 2 GiB buffer does not (a large shared L3), the step's own working set reads faster
   * than the profile's figure, and that is the bound that applies to it */
  f->bw_ws = bench_read_gbs(o, r, (size_t)f->bpt);
  f->pct_ws = f->bw_ws > 0 ? 100.0 * f->gbs / f->bw_ws : 0;
  ts_llm_model_weight_prefetch(r->m, &f->wr);
  /* the kernels' own streaming rate over the weights, in this process and minute (with the read test) */
  f->stream = 0;
  if (o->bw_seconds > 0 && ts_llm_model_stream_gbs(r->m, r->ctx, 21, &f->stream) != TS_OK) {
    f->stream = 0;
    ts_error_clear();
  }
  f->pct_stream = f->stream > 0 ? 100.0 * f->gbs / f->stream : 0;
  f->load = ts_hwinfo_load_now();
}

static cJSON *wpf_json(const ts_llm_wpf_report *wr) {
  cJSON *wp = cJSON_CreateObject();
  cJSON_AddNumberToObject(wp, "bytes", wr->bytes);
  cJSON_AddBoolToObject(wp, "measured", wr->measured != 0);
  if (wr->measured) {
    cJSON_AddNumberToObject(wp, "team", wr->team);
    cJSON *cands = cJSON_CreateArray();
    for (int i = 0; i < TS_LLM_WPF_CANDIDATES; i++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddNumberToObject(e, "bytes", wr->candidates[i]);
      cJSON_AddNumberToObject(e, "stream_gbs", wr->gbs[i]);
      cJSON_AddItemToArray(cands, e);
    }
    cJSON_AddItemToObject(wp, "candidates", cands);
  }
  return wp;
}

static void bench_json(const opts *o, const run *r, const bench_fig *f) {
  const ts_llm_timing *tm = &f->tm;
  const double tot = tm->total > 0 ? tm->total : 1;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "model", o->model);
  cJSON_AddNumberToObject(j, "threads", ts_context_threads(r->ctx));
  cJSON_AddNumberToObject(j, "prompt_len", f->P);
  cJSON_AddNumberToObject(j, "gen", f->G);
  cJSON_AddNumberToObject(j, "repeats", f->R);
  cJSON_AddNumberToObject(j, "prefill_tps", f->prefill_tps);
  cJSON_AddNumberToObject(j, "decode_tps", f->decode_tps);
  cJSON_AddNumberToObject(j, "bytes_per_token", f->bpt);
  cJSON_AddNumberToObject(j, "weight_bytes_per_token", f->wbytes);
  cJSON_AddNumberToObject(j, "kv_bytes_per_token", f->kv);
  cJSON_AddNumberToObject(j, "gbs", f->gbs);
  if (f->bw > 0) {
    cJSON_AddNumberToObject(j, "pct_bandwidth", f->pct);
    cJSON_AddNumberToObject(j, "bandwidth_gbs", f->bw);
    cJSON_AddNumberToObject(j, "bound_tps", f->bw * 1e9 / f->bpt);
    if (f->prof.xfer_ns > 0) cJSON_AddNumberToObject(j, "bandwidth_xfer_ns", f->prof.xfer_ns);
  } else {
    cJSON_AddNullToObject(j, "pct_bandwidth");
  }
  if (f->bw_run > 0) {
    cJSON_AddNumberToObject(j, "bandwidth_gbs_run", f->bw_run);
    cJSON_AddNumberToObject(j, "pct_bandwidth_run", f->pct_run);
  }
  if (f->bw_ws > 0) {
    cJSON_AddNumberToObject(j, "bandwidth_gbs_ws", f->bw_ws);
    cJSON_AddNumberToObject(j, "pct_bandwidth_ws", f->pct_ws);
  }
  if (f->stream > 0) {
    cJSON_AddNumberToObject(j, "stream_gbs", f->stream);
    cJSON_AddNumberToObject(j, "pct_stream", f->pct_stream);
  }
  cJSON_AddItemToObject(j, "weight_prefetch", wpf_json(&f->wr));
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "qkv", tm->qkv / tot);
  cJSON_AddNumberToObject(b, "attention", tm->attn / tot);
  cJSON_AddNumberToObject(b, "wo", tm->wo / tot);
  cJSON_AddNumberToObject(b, "mlp", tm->mlp / tot);
  cJSON_AddNumberToObject(b, "output", tm->output / tot);
  cJSON_AddNumberToObject(b, "rest", (tm->total - tm->qkv - tm->attn - tm->wo - tm->mlp - tm->output) / tot);
  cJSON_AddItemToObject(j, "decode_time_share", b);
  cJSON_AddNumberToObject(j, "decode_barrier_wait_share", tm->wait / tot);
  cJSON_AddBoolToObject(j, "adaptive_threads", o->adapt);
  cJSON_AddNumberToObject(j, "decode_solo_share", tm->tokens > 0 ? (double)tm->solo_steps / (double)tm->tokens : 0);
  cJSON_AddNumberToObject(j, "load_avg", f->load);
  if (f->others >= 0) cJSON_AddNumberToObject(j, "other_cpus", f->others);
  if (f->xfer0 > 0) cJSON_AddNumberToObject(j, "xfer_ns_before", f->xfer0);
  if (f->xfer1 > 0) cJSON_AddNumberToObject(j, "xfer_ns_after", f->xfer1);
  cli_print_json(j);
}

static void bench_text(const opts *o, const run *r, const bench_fig *f) {
  const ts_llm_timing *tm = &f->tm;
  const ts_llm_wpf_report *wr = &f->wr;
  const double tot = tm->total > 0 ? tm->total : 1, bpt = f->bpt;
  printf("model       %s, %d threads, load average %.2f", o->model, ts_context_threads(r->ctx), f->load);
  if (f->others >= 0) printf("; other processes took %.2f CPUs during the timed runs", f->others);
  printf("\n");
  printf("prefill     %d tokens: %.1f tok/s (median of %d)\n", f->P, f->prefill_tps, f->R);
  printf("decode      %d tokens after the prompt: %.1f tok/s (%.3f ms/token)\n", f->G, f->decode_tps, 1e3 / f->decode_tps);
  printf("bytes/token %.2f MB (weights %.2f MB + KV cache %.2f MB)\n", bpt / 1e6, f->wbytes / 1e6, f->kv / 1e6);
  if (f->bw > 0)
    printf("bandwidth   %.2f GB/s = %.1f%% of the profile's %.2f GB/s (bound %.1f tok/s%s)\n", f->gbs, f->pct, f->bw,
           f->bw * 1e9 / bpt,
           ts_hwinfo_xfer_shared(f->prof.xfer_ns) > 0   ? "; read with the threads on one cache"
           : ts_hwinfo_xfer_shared(f->prof.xfer_ns) < 0 ? "; read with the threads apart"
                                                        : "");
  if (f->bw_run > 0)
    printf("            %.1f%% of %.2f GB/s read in this run (bound %.1f tok/s)\n", f->pct_run, f->bw_run, f->bw_run * 1e9 / bpt);
  if (f->bw_ws > 0)
    printf("            %.1f%% of %.2f GB/s read from a buffer of the step's %.0f MB in this run (bound %.1f tok/s)\n", f->pct_ws,
           f->bw_ws, bpt / 1e6, f->bw_ws * 1e9 / bpt);
  if (f->stream > 0)
    printf("            %.1f%% of the %.2f GB/s the matvec kernels stream the weight matrices alone\n", f->pct_stream, f->stream);
  if (wr->measured) {
    if (wr->bytes) printf("prefetch    decode's kernels prefetch the weights %d B ahead", wr->bytes);
    else printf("prefetch    decode's kernels do not prefetch the weights");
    printf(" (measured for %d threads, stream GB/s:", wr->team);
    for (int i = 0; i < TS_LLM_WPF_CANDIDATES; i++)
      printf(" %dK %.1f%s", wr->candidates[i] / 1024, wr->gbs[i], i + 1 < TS_LLM_WPF_CANDIDATES ? "," : ")\n");
  } else {
    if (wr->bytes) printf("prefetch    decode's kernels prefetch the weights %d B ahead (set, not measured)\n", wr->bytes);
    else printf("prefetch    decode's kernels do not prefetch the weights (set, or the model too small to measure)\n");
  }
  printf("decode time qkv %.1f%%, attention %.1f%%, wo %.1f%%, mlp %.1f%%, output %.1f%%, rest %.1f%% (barrier waits %.1f%%)\n",
         100 * tm->qkv / tot, 100 * tm->attn / tot, 100 * tm->wo / tot, 100 * tm->mlp / tot, 100 * tm->output / tot,
         100 * (tm->total - tm->qkv - tm->attn - tm->wo - tm->mlp - tm->output) / tot, 100 * tm->wait / tot);
  if (f->xfer0 > 0 || f->xfer1 > 0) {
    const int a = ts_hwinfo_xfer_shared(f->xfer0), b = ts_hwinfo_xfer_shared(f->xfer1);
    printf("threads     a cache line passes between them in %.0f ns before / %.0f ns after the timed runs%s\n", f->xfer0,
           f->xfer1, a > 0 && b > 0 ? " (one shared cache)" : a < 0 && b < 0 ? " (apart: no shared cache)" : "");
  }
  if (tm->solo_steps > 0)
    printf("adaptive    %lld of %lld decode steps ran on one thread (the others waited on a descheduled partner)\n",
           (long long)tm->solo_steps, (long long)tm->tokens);
}

static int do_bench(const opts *o, run *r) {
  bench_fig f = {.P = (int)o->plen, .G = (int)o->gen, .R = (int)o->repeats};
  int ctx = o->ctx_set ? (int)o->ctx : f.P + f.G + 1;
  if (f.P + f.G > ctx) return cli_usage_error(CMD, "bench: --prompt-len %d + --gen %d exceed --ctx %d", f.P, f.G, ctx);
  note_past_train(r, ctx);
  f.have_prof = ts_hwinfo_get(r->ctx, &f.prof) == TS_OK;
  ts_status s = bench_time(o, r, ctx, &f);
  if (s != TS_OK) return cli_fail(CMD, s);
  bench_bandwidth(o, r, &f);
  if (o->c.json) bench_json(o, r, &f);
  else bench_text(o, r, &f);
  return CLI_OK;
}

/* calibrate, eval and bench with sparsity configurations: cmd_llm_sparse.c */
int cmd_llm_sparse(int argc, char **argv);
static bool sparse_sub(int argc, char **argv) {
  if (argc < 2) return false;
  if (!strcmp(argv[1], "calibrate") || !strcmp(argv[1], "eval")) return true;
  if (strcmp(argv[1], "bench") != 0) return false;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--thresholds") || !strcmp(argv[i], "--config") || !strcmp(argv[i], "--predictor")) return true;
  return false;
}

int cmd_llm(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "convert")) return cmd_llm_convert(argc, argv);
  if (sparse_sub(argc, argv)) return cmd_llm_sparse(argc, argv);
  int sub;
  opts o;
  int rc = parse(argc, argv, &sub, &o);
  if (rc != CLI_OK) return rc;
  if (o.c.help) {
    if (sub >= 0) printf("usage: tessera llm %s\n\n", kSubs[sub].usage);
    print_help();
    return CLI_OK;
  }
  run r;
  ts_status s = open_run(&o, &r);
  if (s != TS_OK) {
    close_run(&r);
    return cli_fail(CMD, s);
  }
  switch (sub) {
    case 0: rc = do_generate(&o, &r); break;
    case 1: rc = do_perplexity(&o, &r); break;
    case 2: rc = do_bench(&o, &r); break;
    case 3: rc = do_tokenize(&o, &r); break;
    case 4: rc = do_logits(&o, &r); break;
    default: rc = do_info(&o, &r); break;
  }
  close_run(&r);
  return rc;
}
