/* tessera LLM runtime: a LLaMA- or Gemma-3-architecture decoder read from a GGUF file (tensors used
 * in place from the mapping), its tokenizer from the GGUF metadata, and an evaluation state (KV
 * cache and workspaces) that runs batched prefill and single-token decode on a ts_context's
 * threads.
 *
 *   ts_llm_model_load ──► ts_llm_state_create (n_ctx, n_batch, threads) ──► ts_llm_eval (tokens at
 *   positions pos.., logits out) many times ──► ts_llm_state_destroy ──► ts_llm_model_destroy
 *
 * Architecture (`general.architecture` = "llama"): x = embed[token]; per block
 *   x += Wo attn(rope(Wq rms(x)), rope(Wk rms(x)), Wv rms(x))      (grouped-query, causal, KV cache)
 *   x += Wdown (silu(Wgate rms(x)) * Wup rms(x))                     (SwiGLU)
 * then logits = Wout rms(x), Wout = output.weight or the tied token_embd.weight. RoPE rotates
 * adjacent pairs (x[2i], x[2i+1]) of the first `rope.dimension_count` dims of each head by
 * pos * freq_base^(-2i/n_rot) (GGUF's llama layout: the converter permuted Q/K for it); a linear
 * `rope.scaling` divides pos by the factor.
 *
 * Architecture "gemma3" (llama.cpp's graph): x = embed[token] * sqrtf(d_model); per block
 *   q, k = rms(Wq rms(x)) * q_norm, rms(Wk rms(x)) * k_norm      (QK-norm per head, head_dim wide)
 *   x += rms(Wo attn(rope(q) * scale, rope(k), Wv rms(x))) * post_attention_norm
 *   x += rms(Wdown (gelu(Wgate rms(x)) * Wup rms(x))) * post_ffw_norm (GELU-tanh gate: ggml's fp16 table)
 * then logits = Wout rms(x) (tied). RoPE rotates NEOX pairs (i, i + n_rot/2). Layers are local
 * (sliding window: a position sees the last `attention.sliding_window` positions, RoPE base
 * `rope.freq_base_swa`, default 10000) or global (every position, `rope.freq_base`); the pattern is
 * `attention.sliding_window_pattern` (a per-layer array, or n: every n-th layer global), by
 * default every 6th layer global, as llama.cpp decides it. scale = 1/sqrt(head_dim) is applied to
 * q (llama.cpp's f_attention_scale; the scores are not scaled again). Norm weights are used as
 * stored (the converter already added Gemma's 1).
 *
 * Weight matrices stay in their file types (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K;
 * on AVX2 and AVX-512 Q8_0, Q4_0 and Q4_1 are regrouped once at load into a packed copy of the
 * same size for the multi-row kernels, the others run row dots); activations are quantized to
 * int8 per 32-block for the block types, and per 256-block (Q8_K) for the K-quants (quant.h); the
 * KV cache is fp16, and Q and the attention probabilities are rounded to fp16 before their
 * products, as llama.cpp's CPU path rounds them.
 *
 * Tokenizers: `tokenizer.ggml.model` "gpt2" (byte-level BPE; pre-tokenizers "smollm", "gpt2" and
 * "default" are implemented) or "llama" (SentencePiece: scores, byte fallback <0xXX>, "▁" for space).
 * Special tokens (control and user-defined types) are matched in the text as whole tokens; control
 * tokens only when `parse_special` is set. */
#ifndef TESSERA_LLM_H
#define TESSERA_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"
#include "tessera/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model ------------------------------------------------------------------------------- */

typedef enum ts_llm_rope { TS_LLM_ROPE_NORM = 0, TS_LLM_ROPE_NEOX = 1 } ts_llm_rope;

/* The MLP's gate activation: h = act(gate) * up. */
typedef enum ts_llm_act {
  TS_LLM_ACT_SILU = 0, /* llama (SwiGLU) */
  TS_LLM_ACT_GELU,     /* gemma3 (GEGLU, tanh form through llama.cpp's fp16 table) */
  TS_LLM_ACT_RELU      /* llama with tessera.ffn_activation = "relu" (ReLU-gated GLU, as ReluLLaMA /
                        * ProSparse): exact zeros that activation-sparsity predictors skip */
} ts_llm_act;
/* "silu", "gelu", "relu" */
const char *ts_llm_act_name(ts_llm_act a);

typedef struct ts_llm_config {
  char arch[32];       /* general.architecture */
  char name[96];       /* general.name ("" when absent) */
  int n_layer;         /* <arch>.block_count */
  int d_model;         /* <arch>.embedding_length */
  int n_ff;            /* <arch>.feed_forward_length */
  int n_head, n_head_kv, head_dim; /* head_dim = d_model / n_head (or <arch>.attention.key_length) */
  int n_rot;           /* <arch>.rope.dimension_count (default head_dim) */
  int n_vocab;         /* token count of the vocabulary */
  int n_ctx_train;     /* <arch>.context_length */
  float rope_base;     /* <arch>.rope.freq_base (default 10000) */
  float rope_scale;    /* 1 / <arch>.rope.scaling.factor for linear scaling, else 1 */
  float rms_eps;       /* <arch>.attention.layer_norm_rms_epsilon */
  ts_llm_rope rope;    /* pair layout */
  bool tied_output;    /* no output.weight: the token embedding is the output projection */
  uint32_t wtype;      /* type of blk.0.ffn_gate.weight (the model's main quantization) */
  ts_llm_act ffn_act;  /* the MLP's gate activation (llama: tessera.ffn_activation, default silu) */
  /* gemma3 (0 for llama): */
  int n_swa;           /* <arch>.attention.sliding_window: a local layer's position sees the last
                          n_swa positions (0: every layer global) */
  int n_swa_layers;    /* how many of the n_layer layers are local */
  float rope_base_swa; /* <arch>.rope.freq_base_swa (default 10000): the local layers' RoPE base */
} ts_llm_config;

/* Thread safety: a loaded model is shared by any number of threads and states. Its const functions
 * (config, vocab, gguf, weight_bytes, kv_bytes_per_pos, weight_prefetch, stream_gbs) may run at any
 * time on any thread, as may ts_llm_eval on its states and ts_llm_state_create / _destroy
 * (stream_gbs and weight_prefetch take the model's internal lock, so they never see the packed
 * layout or the prefetch report half made). set_weight_prefetch may be called while states
 * evaluate: running evals take the new distance at their next call. ts_llm_model_destroy needs the
 * model to itself, after every state made from it is destroyed: a state must not outlive its
 * model (it reads the model's weights, vocabulary and lock). */
typedef struct ts_llm_model ts_llm_model;
/* Thread safety: immutable after load; every function takes a const vocabulary, only reads it,
 * and may run on any number of threads at once (tokenize and detokenize allocate their own
 * scratch). The vocabulary of ts_llm_model_vocab lives as long as its model. */
typedef struct ts_llm_vocab ts_llm_vocab;

/* Opens, validates and binds a GGUF model: every tensor the architecture needs, with its shape and
 * a type that has kernels; the tokenizer metadata. Errors name the file and the key or tensor. The
 * weights stay in the mapping (no copy; norms are converted to fp32). */
ts_status ts_llm_model_load(ts_llm_model **out, const char *path);
/* The same from an opened file; takes ownership of g (closed on failure too). */
ts_status ts_llm_model_from_gguf(ts_llm_model **out, ts_gguf *g, const char *name);
void ts_llm_model_destroy(ts_llm_model *m);
const ts_llm_config *ts_llm_model_config(const ts_llm_model *m);
const ts_llm_vocab *ts_llm_model_vocab(const ts_llm_model *m);
const ts_gguf *ts_llm_model_gguf(const ts_llm_model *m);
/* Bytes of weights one decode step reads: every layer matrix, the norms, the output projection
 * and the token's embedding row (not the KV cache). */
uint64_t ts_llm_model_weight_bytes(const ts_llm_model *m);
/* KV-cache bytes a decode step reads per cached position: K and V of every layer and KV head, fp16
 * (2 n_layer n_head_kv head_dim 2). A step at position p attends p + 1 positions. */
uint64_t ts_llm_model_kv_bytes_per_pos(const ts_llm_model *m);

/* GB/s at which this build's decode kernels stream the model's weight matrices (every layer's q, k,
 * v, o, gate, up, down and the output projection, once, one token; each thread its row share of
 * every matrix back to back, no attention, norms or barriers): median of `passes` (1..1000) after a
 * warm-up, threads from ctx. The reference a decode step's GB/s is compared with in the same
 * process (`tessera llm bench`: stream_gbs, pct_stream). */
ts_status ts_llm_model_stream_gbs(const ts_llm_model *m, const ts_context *ctx, int passes, double *gbs);

/* Decode's software prefetch of the weights: the packed kernels prefetch (into L2) the weights this
 * many bytes ahead of what they read. Whether that helps depends on the machine (on a Zen 4 host it
 * cost a plain read a quarter of its rate; on a Xeon VM whose L3 holds the model it nearly doubled
 * decode), so by default it is measured: the first state created for a team size streams the
 * weights (as ts_llm_model_stream_gbs) at each candidate distance, rounds interleaved, and keeps
 * the largest distance within 2% of the best median rate, none unless some distance beats none by
 * 3% (models under 8 MiB of weights keep none: their passes are too short to time). The
 * measurement is kept in the artifact store (kind "llm-wpf", keyed by the weights' names, types and
 * shapes, the team, the cpu and the kernels): a later process loading the same model on this
 * machine reads it instead of measuring (report.cached). Results do not depend on it.
 * ts_llm_model_set_weight_prefetch(m, bytes) fixes it (0 none, up to 1 MiB) or, with -1, asks for
 * the measurement again, ignoring and replacing the stored one, when the next state is created
 * while no other state uses the model (until then decode runs without). */
#define TS_LLM_WPF_CANDIDATES 5
typedef struct ts_llm_wpf_report {
  int bytes;    /* the distance in use (0: none) */
  int measured; /* 1: chosen by the measurement below; 0: set, or the model too small to time */
  int team;     /* threads the measurement ran with */
  int candidates[TS_LLM_WPF_CANDIDATES];
  double gbs[TS_LLM_WPF_CANDIDATES]; /* median stream GB/s at each candidate distance */
  int cached;   /* 1: the measurement was read from the artifact store (kind "llm-wpf"), made by an
                   earlier process for the same weights, team, cpu and kernels; 0: measured now */
} ts_llm_wpf_report;
ts_status ts_llm_model_set_weight_prefetch(ts_llm_model *m, int bytes);
void ts_llm_model_weight_prefetch(const ts_llm_model *m, ts_llm_wpf_report *out);

/* ---- evaluation state -------------------------------------------------------------------- */

/* Thread safety: a state belongs to one thread at a time: ts_llm_eval, _eval_from, perplexity,
 * set_adaptive and timing_reset write it (its KV cache, workspaces, worker team and timings) and
 * must not overlap; its own worker threads are internal. States of one model are independent:
 * they evaluate concurrently, each on its own thread (they share only the model's weights, read
 * only; tests/test_concurrency.c). */
typedef struct ts_llm_state ts_llm_state;

/* A KV cache for n_ctx positions (<= 1<<20) and workspaces for up to n_batch tokens per ts_llm_eval
 * call; threads from ctx (NULL: default). Everything is allocated here; eval never allocates.
 * m is not const: creating a state may change, under the model's internal mutex,
 *   - the model's packed weight layout: the packed copy of the block-type matrices (AVX-512) is
 *     cut and laid out again for this state's team size (its thread count), but only while no
 *     other state of the model exists (ts__llm_layout; a later state of another team uses the
 *     layout it finds);
 *   - the model's measured weight prefetch distance: measured for this team (or read from the
 *     "llm-wpf" artifact) when it was never set or was measured for another team, again only while
 *     no other state exists (ts_llm_model_set_weight_prefetch);
 *   - the model's count of live states (ts_llm_state_destroy lowers it).
 * Neither the layout nor the distance changes any result (the logits are the same bits). The
 * mutex makes ts_llm_state_create and ts_llm_state_destroy on one model safe from several
 * threads at once and while its other states evaluate (no state exists when the layout changes),
 * and also beside ts_llm_model_stream_gbs; not beside ts_llm_model_destroy. */
ts_status ts_llm_state_create(ts_llm_state **out, ts_llm_model *m, const ts_context *ctx, int n_ctx, int n_batch);
void ts_llm_state_destroy(ts_llm_state *s);
int ts_llm_state_n_ctx(const ts_llm_state *s);
/* Adaptive decode team (on by default; no effect with one thread): single-token evals leave the
 * other threads out while they mostly wait at the phase barriers for a partner the OS has
 * descheduled (another process busy on the machine), and take them back once a probe step with the
 * whole team is faster again. The logits do not depend on the team size (every output element is
 * computed by one thread in a fixed order). Off: every eval uses the whole team. */
void ts_llm_state_set_adaptive(ts_llm_state *s, bool on);

/* Which logits ts_llm_eval writes. */
typedef enum ts_llm_logits {
  TS_LLM_LOGITS_NONE = 0, /* none (prefill of a context only) */
  TS_LLM_LOGITS_LAST,     /* logits[n_vocab] of the last token */
  TS_LLM_LOGITS_ALL,      /* logits[n][n_vocab], token order */
  TS_LLM_LOGITS_FROM      /* logits[n - from][n_vocab] of tokens from..n-1 (ts_llm_eval_from) */
} ts_llm_logits;

/* Runs n tokens (1 <= n, any n: cut into batches of n_batch) at positions pos..pos+n-1: the KV
 * cache must hold positions 0..pos-1 (from earlier calls); positions >= pos are overwritten.
 * TS_ERR_INVALID_ARG for a token id out of the vocabulary (naming it and its index), pos + n >
 * n_ctx, or a NULL logits buffer when one is asked for. */
ts_status ts_llm_eval(ts_llm_state *s, const int32_t *tokens, int n, int pos, ts_llm_logits which,
                      float *logits);
/* TS_LLM_LOGITS_FROM: logits of tokens from..n-1 only (the output projection is skipped for the
 * others: perplexity scores the second half of a window). */
ts_status ts_llm_eval_from(ts_llm_state *s, const int32_t *tokens, int n, int pos, int from, float *logits);

/* Wall time spent per phase since the state was created or reset (seconds; the decode-time
 * breakdown `tessera llm bench` prints): matmuls of the attention block, the attention itself, the
 * MLP matmuls, the output projection, and everything else (embedding), summed over the calls,
 * thread 0's clock (each phase includes its norm, quantization and closing barrier). `wait`: the
 * time a thread spent waiting at the barriers, averaged over the threads (included in the
 * phases: imbalance, or a partner thread descheduled). */
typedef struct ts_llm_timing {
  double qkv, attn, wo, mlp, output, other, total;
  int64_t tokens, calls;
  double wait;
  int64_t solo_steps; /* single-token evals the adaptive decode team ran on one thread */
} ts_llm_timing;
void ts_llm_state_timing(const ts_llm_state *s, ts_llm_timing *t);
void ts_llm_state_timing_reset(ts_llm_state *s);

/* ---- tokenizer --------------------------------------------------------------------------- */

typedef enum ts_llm_vocab_kind { TS_LLM_VOCAB_BPE = 0, TS_LLM_VOCAB_SPM = 1 } ts_llm_vocab_kind;

/* Reads the tokenizer from GGUF metadata (tokenizer.ggml.model, tokens, token_type, scores, merges,
 * pre, bos/eos ids, add_bos_token, add_space_prefix). Errors name the key and the index. */
ts_status ts_llm_vocab_load(ts_llm_vocab **out, const ts_gguf *g, const char *name);
void ts_llm_vocab_destroy(ts_llm_vocab *v);
ts_llm_vocab_kind ts_llm_vocab_kind_of(const ts_llm_vocab *v);
int ts_llm_vocab_size(const ts_llm_vocab *v);
int32_t ts_llm_vocab_bos(const ts_llm_vocab *v); /* -1 when none */
int32_t ts_llm_vocab_eos(const ts_llm_vocab *v);
bool ts_llm_vocab_add_bos(const ts_llm_vocab *v);
/* Token text as stored in the vocabulary (byte-level or "▁" form), NULL when out of range. */
const char *ts_llm_vocab_text(const ts_llm_vocab *v, int32_t id, size_t *len);
/* True for control tokens (<|im_end|>, </s>): generation stops at them and decode hides them. */
bool ts_llm_vocab_is_control(const ts_llm_vocab *v, int32_t id);
/* Token id of an exact vocabulary string, -1 when absent. */
int32_t ts_llm_vocab_find(const ts_llm_vocab *v, const char *text, size_t len);

/* Encodes UTF-8 text (len bytes; invalid UTF-8 bytes are encoded as themselves) into token ids.
 * add_bos: prepend BOS when the vocabulary asks for it (tokenizer.ggml.add_bos_token).
 * parse_special: match control tokens written in the text (a chat template's <|im_start|>).
 * Writes at most cap ids; *n_out is the full count (TS_ERR_SHAPE when it exceeds cap, so a caller
 * can size the buffer and retry). */
ts_status ts_llm_tokenize(const ts_llm_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                          int32_t *ids, size_t cap, size_t *n_out);
/* The bytes a token stands for (control tokens: "" unless `special`); writes at most cap bytes
 * and returns the full length in *len. An SPM byte token <0xXX> gives its byte. */
ts_status ts_llm_token_piece(const ts_llm_vocab *v, int32_t id, bool special, char *buf, size_t cap, size_t *len);
/* Concatenated pieces of n ids into a malloc'd NUL-terminated string (free()). SPM drops the space
 * the encoder put in front of the text. */
ts_status ts_llm_detokenize(const ts_llm_vocab *v, const int32_t *ids, size_t n, bool special, char **text,
                            size_t *len);

/* ---- sampling and evaluation ------------------------------------------------------------- */

/* Next token from logits[n_vocab]: temp <= 0 is greedy (argmax, lowest id on ties); otherwise
 * softmax(logits / temp) restricted to the top_k most likely (top_k <= 0: all) and sampled with rng. */
int32_t ts_llm_sample(const float *logits, int n_vocab, float temp, int top_k, ts_rng *rng);

/* Perplexity over a token sequence, llama.cpp's protocol: cut into n/n_ctx windows of n_ctx
 * tokens (the tail is dropped), each evaluated from an empty cache (its first token replaced by BOS
 * when the vocabulary adds one); score the predictions of positions first..n_ctx-2 (token j+1 from
 * the logits at j) with first = n_ctx/2 ("second half", llama.cpp's default) or first = 0 (full).
 * max_chunks > 0 caps the windows. Progress on stderr when `progress`. */
typedef struct ts_llm_ppl_result {
  double ppl, nll_mean, nll_stderr; /* exp(mean NLL), mean NLL in nats, its standard error */
  int64_t scored, chunks;           /* predictions scored, windows used */
  double seconds, tokens_per_s;     /* evaluation wall time and tokens evaluated per second */
} ts_llm_ppl_result;
ts_status ts_llm_perplexity(ts_llm_state *s, const int32_t *tokens, size_t n, int n_ctx, bool full,
                            int max_chunks, bool progress, ts_llm_ppl_result *out);

#ifdef __cplusplus
}
#endif
#endif
