/* SentencePiece-style encoding (tokenizer.ggml.model "llama"): start from the UTF-8 characters of
 * the (already "▁"-escaped) text and repeatedly join the adjacent pair whose concatenation is a
 * vocabulary token with the highest score (leftmost among equal scores). A character that never
 * became a token is written as its bytes' <0xXX> tokens (byte fallback), else as the unknown token.
 * Candidates sit in a binary heap keyed by (score, left) and are re-checked when popped: a pair is
 * stale once either side has changed length (sides only grow, and a span is a fixed substring). */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"

typedef struct ssym { uint32_t start, n; int32_t prev, next; } ssym;
typedef struct spair { float score; int32_t left, right; uint32_t size; } spair;

typedef struct spm_ws {
  ssym *s;
  spair *h;
  size_t hn, hcap;
} spm_ws;

static bool better(const spair *a, const spair *b) {
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static ts_status push(spm_ws *w, spair p) {
  if (w->hn == w->hcap) {
    size_t cap = w->hcap ? 2 * w->hcap : 64;
    spair *h = realloc(w->h, cap * sizeof *h);
    if (!h) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
    w->h = h;
    w->hcap = cap;
  }
  size_t i = w->hn++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!better(&p, &w->h[up])) break;
    w->h[i] = w->h[up];
    i = up;
  }
  w->h[i] = p;
  return TS_OK;
}

static spair pop(spm_ws *w) {
  spair top = w->h[0], last = w->h[--w->hn];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= w->hn) break;
    if (c + 1 < w->hn && better(&w->h[c + 1], &w->h[c])) c++;
    if (!better(&w->h[c], &last)) break;
    w->h[i] = w->h[c];
    i = c;
  }
  if (w->hn) w->h[i] = last;
  return top;
}

static ts_status try_pair(const ts_llm_vocab *v, spm_ws *w, const char *text, int32_t l, int32_t r) {
  if (l < 0 || r < 0) return TS_OK;
  uint32_t size = w->s[l].n + w->s[r].n;
  int32_t id = ts__vocab_lookup(v, text + w->s[l].start, size);
  if (id < 0) return TS_OK;
  return push(w, (spair){v->score[id], l, r, size});
}

static ts_status emit_bytes(const ts_llm_vocab *v, const char *p, uint32_t n, ts__ids *out) {
  for (uint32_t j = 0; j < n; j++) {
    unsigned char b = (unsigned char)p[j];
    int32_t id = v->byte_tok[b];
    if (id < 0) id = ts__vocab_lookup(v, p + j, 1);
    if (id < 0) id = v->unk;
    if (id < 0)
      return ts_error(TS_ERR_FORMAT, "tokenizer: byte 0x%02X has no token (no <0x%02X>, no unknown token)", b, b);
    TS_TRY(ts__ids_push(out, id));
  }
  return TS_OK;
}

ts_status ts__spm_encode(const ts_llm_vocab *v, const char *text, size_t len, ts__ids *out) {
  if (len == 0) return TS_OK;
  spm_ws w = {0};
  w.s = malloc(len * sizeof *w.s);
  if (!w.s) return ts_error(TS_ERR_OOM, "tokenizer: out of memory for %zu bytes of text", len);
  int32_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    bool valid;
    int k = ts_utf8_next(text + i, len - i, &cp, &valid);
    w.s[n] = (ssym){(uint32_t)i, (uint32_t)k, n - 1, i + (size_t)k < len ? n + 1 : -1};
    n++;
    i += (size_t)k;
  }
  ts_status st = TS_OK;
  for (int32_t i = 0; i + 1 < n && st == TS_OK; i++) st = try_pair(v, &w, text, i, i + 1);
  while (w.hn && st == TS_OK) {
    spair p = pop(&w);
    ssym *L = &w.s[p.left], *R = &w.s[p.right];
    if (L->n == 0 || R->n == 0 || L->n + R->n != p.size) continue;
    L->n += R->n;
    R->n = 0;
    L->next = R->next;
    if (R->next >= 0) w.s[R->next].prev = p.left;
    st = try_pair(v, &w, text, L->prev, p.left);
    if (st == TS_OK) st = try_pair(v, &w, text, p.left, L->next);
  }
  for (int32_t i = 0; i >= 0 && st == TS_OK; i = w.s[i].next) {
    int32_t id = ts__vocab_lookup(v, text + w.s[i].start, w.s[i].n);
    st = id >= 0 ? ts__ids_push(out, id) : emit_bytes(v, text + w.s[i].start, w.s[i].n, out);
  }
  free(w.s);
  free(w.h);
  return st;
}
