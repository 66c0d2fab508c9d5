/* Public tokenizer calls: special-token splitting, encode (BPE or SPM per fragment), token pieces
 * and decode. */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"

typedef struct frag { size_t off, len; int32_t tok; } frag; /* tok >= 0: a special token */

typedef struct frags { frag *p; size_t n, cap; } frags;

static ts_status frag_insert(frags *f, size_t at, frag x) {
  if (f->n == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 16;
    frag *p = realloc(f->p, cap * sizeof *p);
    if (!p) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
    f->p = p;
    f->cap = cap;
  }
  memmove(f->p + at + 1, f->p + at, (f->n - at) * sizeof *f->p);
  f->p[at] = x;
  f->n++;
  return TS_OK;
}

/* Cuts the raw fragments at every occurrence of each eligible special token, longest token first
 * (so <|im_start|> wins over a shorter token it contains). */
static ts_status split_special(const ts_llm_vocab *v, const char *text, size_t len, bool parse_special, frags *f) {
  f->n = 0;
  if (len) TS_TRY(frag_insert(f, 0, (frag){0, len, -1}));
  for (int k = 0; k < v->n_special; k++) {
    int32_t id = v->special[k];
    if (v->type[id] == TS__TOK_CONTROL && !parse_special) continue;
    const char *tt = v->pool + v->off[id];
    size_t tl = v->len[id];
    for (size_t i = 0; i < f->n; i++) {
      frag fr = f->p[i];
      if (fr.tok >= 0 || fr.len < tl) continue;
      const char *hit = memmem(text + fr.off, fr.len, tt, tl);
      if (!hit) continue;
      size_t at = (size_t)(hit - text);
      size_t before = at - fr.off, after = fr.off + fr.len - at - tl;
      /* [before][token][after]; the loop continues with `after` (index i + 2, or i + 1) */
      if (before) {
        f->p[i].len = before;
        TS_TRY(frag_insert(f, i + 1, (frag){at, tl, id}));
        i++;
      } else {
        f->p[i] = (frag){at, tl, id};
      }
      if (after) TS_TRY(frag_insert(f, i + 1, (frag){at + tl, after, -1}));
    }
  }
  return TS_OK;
}

/* SPM: optional leading space, then every ' ' as U+2581 "▁" (3 bytes). */
static ts_status spm_fragment(const ts_llm_vocab *v, const char *p, size_t n, bool prefix, ts__ids *out) {
  size_t spaces = prefix;
  for (size_t i = 0; i < n; i++) spaces += p[i] == ' ';
  char *buf = malloc(n + 2 * spaces + 3 + 1);
  if (!buf) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
  size_t m = 0;
  if (prefix) memcpy(buf, "\xE2\x96\x81", 3), m = 3;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == ' ') memcpy(buf + m, "\xE2\x96\x81", 3), m += 3;
    else buf[m++] = p[i];
  }
  ts_status s = ts__spm_encode(v, buf, m, out);
  free(buf);
  return s;
}

ts_status ts_llm_tokenize(const ts_llm_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                          int32_t *ids, size_t cap, size_t *n_out) {
  if (!v || !n_out || (len && !text) || (cap && !ids)) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_tokenize: NULL argument");
  if (len >= UINT32_MAX) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_tokenize: %zu bytes of text (limit 4 GiB)", len);
  *n_out = 0;
  ts__ids out = {0};
  frags f = {0};
  ts_status s = TS_OK;
  if (add_bos && v->add_bos) s = ts__ids_push(&out, v->bos);
  if (s == TS_OK) s = split_special(v, text, len, parse_special, &f);
  bool prev_special = true; /* SPM puts a space in front of the text and after special tokens */
  for (size_t i = 0; i < f.n && s == TS_OK; i++) {
    frag fr = f.p[i];
    if (fr.tok >= 0) {
      s = ts__ids_push(&out, fr.tok);
      prev_special = true;
    } else if (v->kind == TS_LLM_VOCAB_BPE) {
      s = ts__bpe_encode(v, text + fr.off, fr.len, &out);
    } else {
      s = spm_fragment(v, text + fr.off, fr.len, v->add_space_prefix && prev_special, &out);
      prev_special = false;
    }
  }
  if (s == TS_OK) {
    *n_out = out.n;
    if (out.n > cap) s = ts_error(TS_ERR_SHAPE, "ts_llm_tokenize: %zu tokens do not fit in %zu", out.n, cap);
    else if (out.n) memcpy(ids, out.p, out.n * sizeof *ids);
  }
  free(out.p);
  free(f.p);
  return s;
}

/* Writes src[0..n) at buf[*at..] as far as cap allows; *at counts every byte. */
static void put(char *buf, size_t cap, size_t *at, const char *src, size_t n) {
  if (*at < cap) memcpy(buf + *at, src, n < cap - *at ? n : cap - *at);
  *at += n;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

ts_status ts_llm_token_piece(const ts_llm_vocab *v, int32_t id, bool special, char *buf, size_t cap, size_t *len) {
  if (!v || !len || (cap && !buf)) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_token_piece: NULL argument");
  if (id < 0 || id >= v->n) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_token_piece: token id %d outside the vocabulary of %d", id, v->n);
  const char *t = v->pool + v->off[id];
  size_t n = v->len[id], at = 0;
  uint8_t ty = v->type[id];
  if (ty == TS__TOK_CONTROL) {
    if (special) put(buf, cap, &at, t, n);
  } else if (ty == TS__TOK_USER || ty == TS__TOK_UNUSED) {
    put(buf, cap, &at, t, n);
  } else if (v->kind == TS_LLM_VOCAB_BPE) { /* byte-level code points back to bytes */
    for (size_t i = 0; i < n;) {
      uint32_t cp;
      bool valid;
      int k = ts_utf8_next(t + i, n - i, &cp, &valid);
      int b = valid ? ts__cp_to_byte(cp) : -1;
      if (b >= 0) {
        char c = (char)b;
        put(buf, cap, &at, &c, 1);
      } else {
        put(buf, cap, &at, t + i, (size_t)k);
      }
      i += (size_t)k;
    }
  } else if (ty == TS__TOK_BYTE && n == 6 && !memcmp(t, "<0x", 3) && t[5] == '>' && hexval(t[3]) >= 0 && hexval(t[4]) >= 0) {
    char c = (char)(hexval(t[3]) * 16 + hexval(t[4]));
    put(buf, cap, &at, &c, 1);
  } else if (ty == TS__TOK_UNKNOWN) {
    put(buf, cap, &at, "\xE2\x96\x85", 3); /* SentencePiece's rendering of <unk> */
  } else { /* SPM normal: U+2581 back to ' ' */
    for (size_t i = 0; i < n;) {
      if (i + 3 <= n && !memcmp(t + i, "\xE2\x96\x81", 3)) {
        put(buf, cap, &at, " ", 1);
        i += 3;
      } else {
        put(buf, cap, &at, t + i, 1);
        i++;
      }
    }
  }
  *len = at;
  return TS_OK;
}

ts_status ts_llm_detokenize(const ts_llm_vocab *v, const int32_t *ids, size_t n, bool special, char **text, size_t *len) {
  if (!v || !text || (n && !ids)) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_detokenize: NULL argument");
  *text = NULL;
  size_t cap = 64, at = 0;
  char *buf = malloc(cap);
  if (!buf) return ts_error(TS_ERR_OOM, "ts_llm_detokenize: out of memory");
  bool strip = v->kind == TS_LLM_VOCAB_SPM && v->add_space_prefix;
  for (size_t i = 0; i < n; i++) {
    size_t pl;
    ts_status s = ts_llm_token_piece(v, ids[i], special, buf + at, cap - at - 1, &pl);
    if (s == TS_OK && at + pl + 1 > cap) { /* grow and redo this piece */
      while (at + pl + 1 > cap) cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) s = ts_error(TS_ERR_OOM, "ts_llm_detokenize: out of memory");
      else buf = nb, s = ts_llm_token_piece(v, ids[i], special, buf + at, cap - at - 1, &pl);
    }
    if (s != TS_OK) {
      free(buf);
      return s;
    }
    if (strip && pl > 0) { /* the space the encoder put in front of the text */
      if (buf[at] == ' ') memmove(buf + at, buf + at + 1, --pl);
      strip = false;
    }
    at += pl;
  }
  buf[at] = 0;
  *text = buf;
  if (len) *len = at;
  return TS_OK;
}
