/* Tokenizer internals shared by its files: the vocabulary (tok_vocab.c), the byte-level BPE
 * pre-tokenizer and merges (tok_bpe.c), SentencePiece (tok_spm.c), special-token splitting and the
 * public encode/decode (tok_api.c), and the Unicode classes (tok_unicode.c + tok_unicode_data.c). */
#ifndef TS_LLM_TOK_INTERNAL_H
#define TS_LLM_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/llm.h"

/* GGUF tokenizer.ggml.token_type values */
enum {
  TS__TOK_UNDEFINED = 0,
  TS__TOK_NORMAL = 1,
  TS__TOK_UNKNOWN = 2,
  TS__TOK_CONTROL = 3,
  TS__TOK_USER = 4,
  TS__TOK_UNUSED = 5,
  TS__TOK_BYTE = 6
};

/* Byte-level BPE pre-tokenizers (tokenizer.ggml.pre). */
typedef enum ts__pre { TS__PRE_GPT2 = 0, TS__PRE_SMOLLM = 1 } ts__pre;

/* Open-addressing hash of strings or 64-bit keys to int32 values; capacity a power of two. */
typedef struct ts__merge { uint64_t key; int32_t rank, result; } ts__merge;

struct ts_llm_vocab {
  ts_llm_vocab_kind kind;
  ts__pre pre;
  int n;
  char *pool;        /* every token's text, NUL-terminated, back to back */
  uint32_t *off;     /* [n] offset of token i in pool */
  uint32_t *len;     /* [n] bytes */
  uint8_t *type;     /* [n] TS__TOK_* */
  float *score;      /* [n] SPM scores (0 for BPE) */
  int32_t *hash;     /* text -> id, -1 empty; hash_mask + 1 slots */
  uint64_t hash_mask;
  ts__merge *merges; /* (left id << 32 | right id) -> rank, merged id; key UINT64_MAX empty */
  uint64_t merge_mask;
  int32_t byte_tok[256]; /* BPE: the token of byte b's byte-level char; SPM: <0xXX>, -1 absent */
  int32_t *special;  /* ids of control / user-defined tokens, longest text first */
  int n_special;
  int32_t bos, eos, unk;
  bool add_bos, add_space_prefix;
};

uint64_t ts__tok_hash(const char *s, size_t len);
/* Exact-text lookup (-1 absent). */
int32_t ts__vocab_lookup(const ts_llm_vocab *v, const char *s, size_t len);
/* Merge rank/result of (left, right), false when no merge joins them. */
bool ts__vocab_merge(const ts_llm_vocab *v, int32_t left, int32_t right, int32_t *rank, int32_t *result);

/* A growable id list (tokenize's output before it is copied to the caller). */
typedef struct ts__ids { int32_t *p; size_t n, cap; } ts__ids;
ts_status ts__ids_push(ts__ids *o, int32_t id);

/* BPE: pre-tokenize text[0..len) and append the merged ids of every word. */
ts_status ts__bpe_encode(const ts_llm_vocab *v, const char *text, size_t len, ts__ids *out);
/* BPE pre-tokenizer only: the end byte offset of every word (tests). */
ts_status ts__bpe_split(const ts_llm_vocab *v, const char *text, size_t len, ts__ids *ends);
/* SPM: encode one raw fragment (" " already replaced; prefix space handled by the caller). */
ts_status ts__spm_encode(const ts_llm_vocab *v, const char *text, size_t len, ts__ids *out);

/* GPT-2 byte <-> code point map: bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF are their own code
 * points; the other 68 bytes map to 256, 257, ... in byte order. */
uint32_t ts__byte_to_cp(uint8_t b);
int ts__cp_to_byte(uint32_t cp); /* -1 when cp is not in the map */

/* Unicode classes for the pre-tokenizer: general category L*, N*, and White_Space. */
bool ts__is_letter(uint32_t cp);
bool ts__is_number(uint32_t cp);
bool ts__is_space(uint32_t cp);

extern const uint32_t ts__unicode_letters[][2];
extern const size_t ts__unicode_letters_count;
extern const uint32_t ts__unicode_numbers[][2];
extern const size_t ts__unicode_numbers_count;
extern const char ts__unicode_version[];

#endif
