/* Byte-level BPE (GPT-2 style): pre-tokenize into words, then merge each word's byte tokens by
 * merge rank.
 *
 * Pre-tokenizer "gpt2" is the GPT-2 pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched left to right by hand (no regex engine): at each position the first alternative that
 * matches wins; "\s+(?!\S)" takes a run of whitespace but leaves its last character to start the
 * next word when a non-space follows (so " world" keeps its space). "smollm" first cuts the text
 * after and before every \p{N} code point (each digit is a word of its own), then applies the GPT-2
 * pattern inside each piece. Bytes that are not valid UTF-8 are words' characters of class "other".
 *
 * Merging (per word): each byte starts as its byte-level token; repeatedly join the adjacent pair
 * with the lowest merge rank (leftmost first among equal ranks), through a binary heap of candidate
 * pairs that are re-checked when popped (a pair whose sides changed is stale). */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"

ts_status ts__ids_push(ts__ids *o, int32_t id) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? 2 * o->cap : 64;
    int32_t *p = realloc(o->p, cap * sizeof *p);
    if (!p) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
    o->p = p;
    o->cap = cap;
  }
  o->p[o->n++] = id;
  return TS_OK;
}

/* ---- merging ----------------------------------------------------------------------------- */

typedef struct sym { int32_t id, prev, next; } sym;
typedef struct pair { int32_t rank, left, right, lid, rid; } pair;

typedef struct bpe_ws {
  sym *s;
  pair *h;
  size_t scap, hcap, hn;
} bpe_ws;

static bool pair_less(const pair *a, const pair *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(bpe_ws *w, pair p) {
  size_t i = w->hn++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!pair_less(&p, &w->h[up])) break;
    w->h[i] = w->h[up];
    i = up;
  }
  w->h[i] = p;
}

static pair heap_pop(bpe_ws *w) {
  pair top = w->h[0], last = w->h[--w->hn];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= w->hn) break;
    if (c + 1 < w->hn && pair_less(&w->h[c + 1], &w->h[c])) c++;
    if (!pair_less(&w->h[c], &last)) break;
    w->h[i] = w->h[c];
    i = c;
  }
  if (w->hn) w->h[i] = last;
  return top;
}

static void try_pair(const ts_llm_vocab *v, bpe_ws *w, int32_t l, int32_t r) {
  if (l < 0 || r < 0 || w->s[l].id < 0 || w->s[r].id < 0) return;
  int32_t rank, res;
  if (ts__vocab_merge(v, w->s[l].id, w->s[r].id, &rank, &res))
    heap_push(w, (pair){rank, l, r, w->s[l].id, w->s[r].id});
}

static ts_status merge_word(const ts_llm_vocab *v, bpe_ws *w, const unsigned char *b, size_t n, ts__ids *out) {
  if (n > w->scap) {
    size_t cap = n < 256 ? 256 : n;
    sym *s = realloc(w->s, cap * sizeof *s);
    pair *h = s ? realloc(w->h, cap * sizeof *h) : NULL; /* at most n - 1 live pairs + stale ones */
    if (s) w->s = s;
    if (h) w->h = h;
    if (!s || !h) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
    w->scap = w->hcap = cap;
  }
  for (size_t i = 0; i < n; i++)
    w->s[i] = (sym){v->byte_tok[b[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
  w->hn = 0;
  for (size_t i = 0; i + 1 < n; i++) try_pair(v, w, (int32_t)i, (int32_t)i + 1);
  while (w->hn) {
    pair p = heap_pop(w);
    sym *L = &w->s[p.left], *R = &w->s[p.right];
    if (L->id != p.lid || R->id != p.rid || L->next != p.right) continue; /* stale */
    int32_t rank, res;
    ts__vocab_merge(v, L->id, R->id, &rank, &res);
    L->id = res;
    L->next = R->next;
    if (R->next >= 0) w->s[R->next].prev = p.left;
    R->id = -1;
    /* every pair a merge creates has a new left or right id, so old entries for the same
     * positions fail the id check; the heap never holds more than 2 entries per merge + n */
    if (w->hn + 2 > w->hcap) {
      pair *h = realloc(w->h, 2 * w->hcap * sizeof *h);
      if (!h) return ts_error(TS_ERR_OOM, "tokenizer: out of memory");
      w->h = h;
      w->hcap *= 2;
    }
    try_pair(v, w, L->prev, p.left);
    try_pair(v, w, p.left, L->next);
  }
  for (int32_t i = 0; i >= 0; i = w->s[i].next)
    if (w->s[i].id >= 0) TS_TRY(ts__ids_push(out, w->s[i].id)); /* -1: a byte without a token */
  return TS_OK;
}

/* ---- pre-tokenizer ----------------------------------------------------------------------- */

enum { C_END = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 4, C_OTHER = 8 };

typedef struct cpt { uint32_t cp; uint32_t off; uint8_t cls; } cpt;

static uint8_t classify(uint32_t cp, bool valid) {
  if (!valid) return C_OTHER;
  if (ts__is_letter(cp)) return C_LETTER;
  if (ts__is_number(cp)) return C_NUMBER;
  if (ts__is_space(cp)) return C_SPACE;
  return C_OTHER;
}

/* GPT-2 pattern over code points c[a..e): emits word boundaries through `emit`. */
typedef struct emitter {
  const ts_llm_vocab *v;
  bpe_ws *w;
  const char *text;
  const cpt *c;
  ts__ids *out;
  bool split_only; /* push each word's end byte offset instead of its tokens */
  size_t prev;     /* code point index where the current word starts */
} emitter;

static ts_status emit_to(emitter *e, size_t end) {
  if (end <= e->prev) return TS_OK;
  uint32_t b0 = e->c[e->prev].off, b1 = e->c[end].off;
  e->prev = end;
  if (e->split_only) return ts__ids_push(e->out, (int32_t)b1);
  return merge_word(e->v, e->w, (const unsigned char *)e->text + b0, b1 - b0, e->out);
}

static ts_status gpt2_split(emitter *e, size_t a, size_t end) {
  const cpt *c = e->c;
#define CLS(i) ((i) < end ? c[i].cls : C_END)
#define CP(i) ((i) < end ? c[i].cp : 0xFFFFFFFFu)
  e->prev = a;
  size_t pos = a;
  while (pos < end) {
    uint32_t cp = c[pos].cp;
    /* 's 't 're 've 'm 'll 'd (lower case only, as in GPT-2) */
    if (cp == '\'' && pos + 1 < end) {
      uint32_t n1 = CP(pos + 1), n2 = CP(pos + 2);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        pos += 2;
        TS_TRY(emit_to(e, pos));
        continue;
      }
      if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
        pos += 3;
        TS_TRY(emit_to(e, pos));
        continue;
      }
    }
    uint8_t k = cp == ' ' ? CLS(pos + 1) : c[pos].cls;
    if (k == C_LETTER || k == C_NUMBER || k == C_OTHER) { /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ */
      if (cp == ' ') pos++;
      while (CLS(pos) == k) pos++;
      TS_TRY(emit_to(e, pos));
      continue;
    }
    size_t ns = 0;
    while (CLS(pos + ns) == C_SPACE) ns++;
    if (ns > 1 && pos + ns < end) { /* \s+(?!\S): leave the last space for the next word */
      pos += ns - 1;
      TS_TRY(emit_to(e, pos));
      continue;
    }
    if (ns > 0) { /* \s+ */
      pos += ns;
      TS_TRY(emit_to(e, pos));
      continue;
    }
    TS_TRY(emit_to(e, ++pos)); /* unreachable with these classes; kept for safety */
  }
#undef CLS
#undef CP
  return TS_OK;
}

static ts_status encode(const ts_llm_vocab *v, const char *text, size_t len, bool split_only, ts__ids *out) {
  if (len == 0) return TS_OK;
  cpt *c = malloc((len + 1) * sizeof *c);
  if (!c) return ts_error(TS_ERR_OOM, "tokenizer: out of memory for %zu bytes of text", len);
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    bool valid;
    int k = ts_utf8_next(text + i, len - i, &cp, &valid);
    c[n++] = (cpt){cp, (uint32_t)i, classify(cp, valid)};
    i += (size_t)k;
  }
  c[n] = (cpt){0, (uint32_t)len, C_END};
  bpe_ws w = {0};
  emitter e = {v, &w, text, c, out, split_only, 0};
  ts_status s = TS_OK;
  if (v->pre == TS__PRE_SMOLLM) { /* every \p{N} code point is a piece of its own */
    size_t a = 0;
    for (size_t i = 0; i < n && s == TS_OK; i++) {
      if (c[i].cls != C_NUMBER) continue;
      if (i > a) s = gpt2_split(&e, a, i);
      if (s == TS_OK) s = gpt2_split(&e, i, i + 1);
      a = i + 1;
    }
    if (s == TS_OK && a < n) s = gpt2_split(&e, a, n);
  } else {
    s = gpt2_split(&e, 0, n);
  }
  free(w.s);
  free(w.h);
  free(c);
  return s;
}

ts_status ts__bpe_encode(const ts_llm_vocab *v, const char *text, size_t len, ts__ids *out) {
  return encode(v, text, len, false, out);
}

ts_status ts__bpe_split(const ts_llm_vocab *v, const char *text, size_t len, ts__ids *ends) {
  return encode(v, text, len, true, ends);
}
