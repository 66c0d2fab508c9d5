/* Tokenizers from GGUF metadata: the byte-level BPE pre-tokenizer's word splits (GPT-2 pattern and
 * SmolLM2's digit rule), merges by rank, special tokens, encode -> decode identity on varied UTF-8
 * (and invalid bytes), SentencePiece with scores and byte fallback, malformed metadata errors, and
 * - when the real SmolLM2 GGUF is present ($TESSERA_SMOLLM2, or bench/peers/.venv-llm/smollm2.gguf
 * that scripts/get-smollm2.sh links) - token ids equal to llama.cpp's for fixed strings (recorded with
 * bench/peers/llm_llamacpp.py; skipped cleanly without the model). */
#include "test_llm_tiny.h"
#include "test_smollm2.h"

static ts_llm_vocab *tiny_bpe(void) {
  ts_gguf_writer *w;
  CHECK_OK(ts_gguf_writer_create(&w, 0));
  tiny_add_tokenizer(w);
  void *img;
  size_t n;
  CHECK_OK(ts_gguf_writer_to_mem(w, &img, &n));
  ts_gguf_writer_destroy(w);
  ts_gguf *g;
  ts_llm_vocab *v = NULL;
  CHECK_OK(ts_gguf_open_mem(&g, img, n, "tiny"));
  CHECK_OK(ts_llm_vocab_load(&v, g, "tiny"));
  ts_gguf_close(g); /* the vocabulary copies what it keeps */
  free(img);
  return v;
}

/* Splits text into words with the pre-tokenizer and compares with '|'-separated expectations. */
static void check_split(const ts_llm_vocab *v, const char *text, const char *want) {
  ts__ids ends = {0};
  CHECK_OK(ts__bpe_split(v, text, strlen(text), &ends));
  char got[512];
  size_t at = 0, prev = 0;
  for (size_t i = 0; i < ends.n && at + 64 < sizeof got; i++) {
    if (i) got[at++] = '|';
    memcpy(got + at, text + prev, (size_t)ends.p[i] - prev);
    at += (size_t)ends.p[i] - prev;
    prev = (size_t)ends.p[i];
  }
  got[at] = 0;
  CHECK(!strcmp(got, want), "split of \"%s\": got \"%s\", want \"%s\"", text, got, want);
  free(ends.p);
}

static void roundtrip(const ts_llm_vocab *v, const char *text, size_t len) {
  int32_t ids[1024];
  size_t n;
  CHECK_OK(ts_llm_tokenize(v, text, len, true, false, ids, 1024, &n));
  char *back = NULL;
  size_t bl = 0;
  CHECK_OK(ts_llm_detokenize(v, ids, n, false, &back, &bl));
  CHECK(back && bl == len && !memcmp(back, text, len), "round trip of %zu bytes gave %zu bytes: \"%s\"", len, bl, back ? back : "");
  free(back);
}

static const char *const kTexts[] = {
    "Hello world! It's 2024, isn't it?  Yes.",
    "  leading spaces\tand\ttabs\n\nnew lines   \n",
    "\xC3\x9Cn\xC3\xAF" "c\xC3\xB6" "d\xC3\xA9 \xE2\x80\x94 \xE2\x80\x9Cquotes\xE2\x80\x9D caf\xC3\xA9",
    "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\xF0\x9F\x91\x8D",
    "numbers 1234567 3.14159 -42 1e10 \xD9\xA3\xD9\xA4 \xC2\xB2\xC2\xB3",
    "I'M SHOUTING, you're whispering, we'll see; they'd've DONE it.",
    "def f(x):\n    return x**2 + 1  # comment\n",
    "<|im_start|>user\nhi<|im_end|>",
    " ",
    "",
    "\xFF\xFE invalid \xC3 utf-8 \xE2\x82 bytes \x80",
};

static void check_bpe(void) {
  ts_llm_vocab *v = tiny_bpe();
  if (!v) return;
  CHECK(ts_llm_vocab_kind_of(v) == TS_LLM_VOCAB_BPE && ts_llm_vocab_size(v) == tiny_n_vocab(), "kind/size");
  /* GPT-2 pattern: contractions, optional leading space, whitespace runs leaving the last space */
  check_split(v, "Hello world", "Hello| world");
  check_split(v, "a  b", "a| | b");
  check_split(v, "a   \n b", "a|   \n| b"); /* the run stops before the space that precedes b */
  check_split(v, "it's we'll THEY'RE", "it|'s| we|'ll| THEY|'|RE");
  check_split(v, "x!?  (y)", "x|!?| | (|y|)");
  check_split(v, "end  ", "end|  ");
  check_split(v, "\n\nhi", "\n|\n|hi");   /* a lone newline before a letter is \s+ on its own */
  /* smollm: every digit alone, a space before a digit stays with what precedes it */
  check_split(v, "ab12 3x", "ab|1|2| |3|x");
  check_split(v, "caf\xC3\xA9 \xD9\xA3", "caf\xC3\xA9| |\xD9\xA3");
  /* merges by rank: "Hello" -> He, ll, Hell, Hello; " world" -> Ġw + or -> Ġwor + ld -> Ġworld */
  int32_t ids[64];
  size_t n;
  CHECK_OK(ts_llm_tokenize(v, "Hello world", 11, true, false, ids, 64, &n));
  int32_t hello = ts_llm_vocab_find(v, "Hello", 5), world = ts_llm_vocab_find(v, "\xC4\xA0world", 7);
  CHECK(n == 2 && hello >= 0 && world >= 0 && ids[0] == hello && ids[1] == world, "Hello world -> %zu tokens", n);
  /* special tokens: matched only with parse_special */
  const char *sp = "<|im_start|>hi";
  CHECK_OK(ts_llm_tokenize(v, sp, strlen(sp), false, true, ids, 64, &n));
  CHECK(n == 3 && ids[0] == 1, "special: %zu tokens, first %d", n, n ? ids[0] : -1);
  CHECK_OK(ts_llm_tokenize(v, sp, strlen(sp), false, false, ids, 64, &n));
  CHECK(n > 3 && ids[0] != 1, "without parse_special the text is plain: %zu tokens", n);
  char buf[32];
  size_t pl;
  CHECK_OK(ts_llm_token_piece(v, 2, false, buf, sizeof buf, &pl));
  CHECK(pl == 0, "a control token's piece is hidden");
  CHECK_OK(ts_llm_token_piece(v, 2, true, buf, sizeof buf, &pl));
  CHECK(pl == 10 && !memcmp(buf, "<|im_end|>", 10), "special piece");
  CHECK(ts_llm_vocab_is_control(v, 2) && !ts_llm_vocab_is_control(v, 100), "control flags");
  /* too small an output buffer: TS_ERR_SHAPE with the needed count */
  CHECK_STATUS(ts_llm_tokenize(v, "Hello world", 11, false, false, ids, 1, &n), TS_ERR_SHAPE);
  CHECK(n == 2, "needed count %zu", n);
  for (size_t i = 0; i < sizeof kTexts / sizeof kTexts[0]; i++) roundtrip(v, kTexts[i], strlen(kTexts[i]));
  /* every byte value, and random byte strings */
  char all[256];
  for (int b = 0; b < 256; b++) all[b] = (char)b;
  roundtrip(v, all, 256);
  ts_rng r;
  ts_rng_seed(&r, 1);
  for (int k = 0; k < 50; k++) {
    char s[200];
    size_t len = ts_rng_below(&r, sizeof s);
    for (size_t i = 0; i < len; i++) s[i] = (char)(ts_rng_below(&r, 4) ? " aeHlo'1\n"[ts_rng_below(&r, 9)] : (int)ts_rng_below(&r, 256));
    roundtrip(v, s, len);
  }
  ts_llm_vocab_destroy(v);
}

/* ---- SentencePiece ---------------------------------------------------------------------- */

static ts_llm_vocab *tiny_spm(void) {
  static char pool[300][16];
  const char *strs[300];
  float scores[300];
  int32_t types[300];
  int n = 0;
  const char *base[] = {"<unk>", "<s>", "</s>"};
  int32_t bt[] = {2, 3, 3};
  for (int i = 0; i < 3; i++) snprintf(pool[n], 16, "%s", base[i]), types[n] = bt[i], scores[n++] = 0;
  for (int b = 0; b < 256; b++) snprintf(pool[n], 16, "<0x%02X>", b), types[n] = 6, scores[n++] = 0;
  /* pieces with scores: higher merges first */
  const char *pc[] = {"\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d", "\xE2\x96\x81h", "\xE2\x96\x81he", "ll",
                      "\xE2\x96\x81hell", "\xE2\x96\x81hello", "\xE2\x96\x81w", "\xE2\x96\x81wo", "or", "\xE2\x96\x81wor", "ld",
                      "\xE2\x96\x81world", "lo"};
  /* "▁world": ▁w (-3), then "or" (-3.15) beats ▁wo (-3.2) and makes it stale, ▁wor, ld, ▁world */
  const float sc[] = {-10, -10, -10, -10, -10, -10, -10, -10, -3, -3.1f, -3.05f, -3.3f, -1, -3, -3.2f, -3.15f, -3.4f, -3.5f, -1, -9};
  for (int i = 0; i < 20; i++) snprintf(pool[n], 16, "%s", pc[i]), types[n] = 1, scores[n++] = sc[i];
  for (int i = 0; i < n; i++) strs[i] = pool[i];
  ts_gguf_writer *w;
  CHECK_OK(ts_gguf_writer_create(&w, 0));
  CHECK_OK(ts_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5));
  CHECK_OK(ts_gguf_writer_add_str_arr(w, "tokenizer.ggml.tokens", strs, NULL, (uint64_t)n));
  CHECK_OK(ts_gguf_writer_add_arr(w, "tokenizer.ggml.scores", TS_GGUF_F32, scores, (uint64_t)n));
  CHECK_OK(ts_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", TS_GGUF_I32, types, (uint64_t)n));
  uint32_t bos = 1, eos = 2, unk = 0;
  CHECK_OK(ts_gguf_writer_add(w, "tokenizer.ggml.bos_token_id", TS_GGUF_U32, &bos));
  CHECK_OK(ts_gguf_writer_add(w, "tokenizer.ggml.eos_token_id", TS_GGUF_U32, &eos));
  CHECK_OK(ts_gguf_writer_add(w, "tokenizer.ggml.unknown_token_id", TS_GGUF_U32, &unk));
  void *img;
  size_t sz;
  CHECK_OK(ts_gguf_writer_to_mem(w, &img, &sz));
  ts_gguf_writer_destroy(w);
  ts_gguf *g;
  ts_llm_vocab *v = NULL;
  CHECK_OK(ts_gguf_open_mem(&g, img, sz, "spm"));
  CHECK_OK(ts_llm_vocab_load(&v, g, "spm"));
  ts_gguf_close(g);
  free(img);
  return v;
}

static void check_spm(void) {
  ts_llm_vocab *v = tiny_spm();
  if (!v) return;
  CHECK(ts_llm_vocab_kind_of(v) == TS_LLM_VOCAB_SPM && ts_llm_vocab_add_bos(v), "spm kind, adds BOS by default");
  int32_t ids[64];
  size_t n;
  /* "hello world" -> "▁hello▁world" -> <s> ▁hello ▁world */
  CHECK_OK(ts_llm_tokenize(v, "hello world", 11, true, false, ids, 64, &n));
  int32_t hello = ts_llm_vocab_find(v, "\xE2\x96\x81hello", 8), world = ts_llm_vocab_find(v, "\xE2\x96\x81world", 8);
  CHECK(n == 3 && ids[0] == 1 && ids[1] == hello && ids[2] == world, "spm hello world: %zu tokens (%d %d %d)", n, ids[0],
        n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1);
  /* 'é' is no piece: byte fallback <0xC3> <0xA9> */
  CHECK_OK(ts_llm_tokenize(v, "h\xC3\xA9", 3, false, false, ids, 64, &n));
  CHECK(n == 3 && ids[0] == ts_llm_vocab_find(v, "\xE2\x96\x81h", 4) && ids[1] == 3 + 0xC3 && ids[2] == 3 + 0xA9,
        "byte fallback: %zu tokens", n);
  const char *texts[] = {"hello world", "h\xC3\xA9llo  w\xC3\xB6rld \xF0\x9F\x98\x80", " lead", "x"};
  for (int i = 0; i < 4; i++) roundtrip(v, texts[i], strlen(texts[i]));
  ts_llm_vocab_destroy(v);
}

/* ---- malformed metadata ----------------------------------------------------------------- */

static void vocab_error(void (*fill)(ts_gguf_writer *), const char *needle) {
  ts_gguf_writer *w;
  CHECK_OK(ts_gguf_writer_create(&w, 0));
  fill(w);
  void *img;
  size_t sz;
  CHECK_OK(ts_gguf_writer_to_mem(w, &img, &sz));
  ts_gguf_writer_destroy(w);
  ts_gguf *g;
  CHECK_OK(ts_gguf_open_mem(&g, img, sz, "bad"));
  ts_llm_vocab *v = (ts_llm_vocab *)1;
  CHECK_ERR_CONTAINS(ts_llm_vocab_load(&v, g, "bad.gguf"), needle);
  CHECK(v == NULL && strstr(ts_last_error(), "bad.gguf"), "error names the file: %s", ts_last_error());
  ts_gguf_close(g);
  free(img);
}

static const char *const kTok3[] = {"a", "b", "ab"};
static void f_model(ts_gguf_writer *w) { ts_gguf_writer_add_str(w, "tokenizer.ggml.model", "bert", 4); }
static void f_nopre(ts_gguf_writer *w) {
  ts_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2", 4);
  ts_gguf_writer_add_str_arr(w, "tokenizer.ggml.tokens", kTok3, NULL, 3);
}
static void f_pre(ts_gguf_writer *w) {
  f_nopre(w);
  ts_gguf_writer_add_str(w, "tokenizer.ggml.pre", "qwen2", 5);
}
static void f_merge(ts_gguf_writer *w) {
  f_nopre(w);
  ts_gguf_writer_add_str(w, "tokenizer.ggml.pre", "smollm", 6);
  const char *m[] = {"a b", "ab"};
  ts_gguf_writer_add_str_arr(w, "tokenizer.ggml.merges", m, NULL, 2);
}
static void f_types(ts_gguf_writer *w) {
  f_merge(w);
  int32_t t[2] = {1, 1};
  ts_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", TS_GGUF_I32, t, 2);
}
static void f_bos(ts_gguf_writer *w) {
  ts_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5);
  ts_gguf_writer_add_str_arr(w, "tokenizer.ggml.tokens", kTok3, NULL, 3);
  uint32_t b = 7;
  ts_gguf_writer_add(w, "tokenizer.ggml.bos_token_id", TS_GGUF_U32, &b);
}
static void f_tokens_type(ts_gguf_writer *w) {
  ts_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5);
  int32_t t[2] = {1, 2};
  ts_gguf_writer_add_arr(w, "tokenizer.ggml.tokens", TS_GGUF_I32, t, 2);
}
static void f_missing(ts_gguf_writer *w) { (void)w; }

static void check_errors(void) {
  vocab_error(f_model, "tokenizer.ggml.model \"bert\" is not supported");
  vocab_error(f_nopre, "tokenizer.ggml.pre is missing");
  vocab_error(f_pre, "tokenizer.ggml.pre \"qwen2\" is not supported");
  vocab_error(f_merge, "tokenizer.ggml.merges[1] has no space");
  vocab_error(f_types, "tokenizer.ggml.token_type has 2 entries");
  vocab_error(f_bos, "tokenizer.ggml.bos_token_id = 7");
  vocab_error(f_tokens_type, "tokenizer.ggml.tokens: array of i32");
  vocab_error(f_missing, "tokenizer.ggml.model");
}

/* ---- the real model (optional) ---------------------------------------------------------- */

static void check_smollm2(void) {
  const char *path = tst_smollm2_path();
  CHECK(path || !tst_smollm2_required(), "TESSERA_SMOLLM2=%s is not a readable file", getenv("TESSERA_SMOLLM2"));
  if (!path) {
    tst_skip_part("SmolLM2 GGUF not found (set TESSERA_SMOLLM2 or run scripts/get-smollm2.sh): its token-id checks");
    return;
  }
  ts_gguf *g;
  ts_llm_vocab *v = NULL;
  CHECK_OK(ts_gguf_open(&g, path));
  CHECK_OK(ts_llm_vocab_load(&v, g, path));
  ts_gguf_close(g);
  if (!v) return;
  /* ids from llama.cpp (llama-cpp-python 0.3.36, add_bos=True, special=False) */
  static const struct { const char *text; int n; int32_t ids[48]; } kRef[] = {
      {"Hello world! It's 2024, isn't it?  Yes.", 18, {19556, 905, 17, 657, 506, 216, 34, 32, 34, 36, 28, 3247, 982, 357, 47, 216, 9230, 30}},
      {"  leading spaces\tand\ttabs\n\nnew lines   \n", 14, {216, 2899, 5600, 197, 397, 197, 100, 7366, 198, 198, 2241, 3204, 333, 198}},
      {"numbers 1234567 3.14159 -42 1e10 \xD9\xA3\xD9\xA4\xD9\xA5 \xC2\xB2\xC2\xB3", 35,
       {28707, 216, 33, 34, 35, 36, 37, 38, 39, 216, 35, 30, 33, 36, 33, 37, 41, 731, 36, 34, 216, 33, 85, 33, 32, 216, 164, 113, 164, 114, 164, 115, 216, 19133, 39050}},
      {"I'M SHOUTING, you're whispering, we'll see; they'd've DONE it.", 23,
       {57, 23, 61, 334, 21953, 4728, 28, 346, 2316, 15060, 26649, 28, 392, 3060, 963, 43, 502, 6737, 3543, 422, 19832, 357, 30}},
      {"def f(x):\n    return x**2 + 1  # comment\n", 17, {1604, 275, 24, 104, 727, 472, 1003, 1792, 828, 34, 1232, 216, 33, 216, 907, 5189, 198}},
  };
  for (size_t i = 0; i < sizeof kRef / sizeof kRef[0]; i++) {
    int32_t ids[256];
    size_t n;
    CHECK_OK(ts_llm_tokenize(v, kRef[i].text, strlen(kRef[i].text), true, false, ids, 256, &n));
    bool eq = n == (size_t)kRef[i].n && !memcmp(ids, kRef[i].ids, n * sizeof *ids);
    CHECK(eq, "SmolLM2 ids of \"%s\" differ from llama.cpp's (%zu vs %d tokens)", kRef[i].text, n, kRef[i].n);
    roundtrip(v, kRef[i].text, strlen(kRef[i].text));
  }
  int32_t ids[16];
  size_t n;
  const char *chat = "<|im_start|>user\nhi<|im_end|>";
  CHECK_OK(ts_llm_tokenize(v, chat, strlen(chat), true, true, ids, 16, &n));
  CHECK(n == 5 && ids[0] == 1 && ids[1] == 4093 && ids[2] == 198 && ids[3] == 6004 && ids[4] == 2, "chat special ids");
  ts_llm_vocab_destroy(v);
}

int main(void) {
  check_bpe();
  check_spm();
  check_errors();
  check_smollm2();
  return tst_finish();
}
