/* The word table of the wordcount job: an open-addressing hash map from words to counts, for one
 * block's map (keys point into the block's lower-cased copy) and for the reducer (keys copied into
 * the table's own arena). */
#include <stdlib.h>
#include <string.h>

#include "hybrid/hybrid_internal.h"

static uint64_t wc_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static ts_status wc_grow(ts__wc_map *m) {
  size_t cap = m->cap ? 2 * m->cap : 4096;
  ts__wc_ent *e = calloc(cap, sizeof *e);
  if (!e) return ts_error(TS_ERR_OOM, "wordcount: out of memory");
  for (size_t i = 0; i < m->cap; i++)
    if (m->e[i].w) {
      size_t h = wc_hash(m->e[i].w, m->e[i].len) & (cap - 1);
      while (e[h].w) h = (h + 1) & (cap - 1);
      e[h] = m->e[i];
    }
  free(m->e);
  m->e = e;
  m->cap = cap;
  return TS_OK;
}

/* The slot of word w: its entry, or the empty slot where it would go (the map is never full). */
static size_t wc_slot(const ts__wc_map *m, const char *w, size_t len) {
  size_t h = wc_hash(w, len) & (m->cap - 1);
  while (m->e[h].w && !(m->e[h].len == len && memcmp(m->e[h].w, w, len) == 0)) h = (h + 1) & (m->cap - 1);
  return h;
}

ts_status ts__wc_add(ts__wc_map *m, const char *w, size_t len, int64_t n) {
  if (2 * (m->used + 1) > m->cap) TS_TRY(wc_grow(m));
  size_t h = wc_slot(m, w, len);
  if (m->e[h].w) {
    m->e[h].n += n;
    return TS_OK;
  }
  m->e[h] = (ts__wc_ent){w, (uint32_t)len, n};
  m->used++;
  return TS_OK;
}

static int wc_cmp(const void *a, const void *b) {
  const ts__wc_ent *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->w, y->w, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Sorted "word\tcount\n" lines. */
ts_status ts__wc_emit(ts__wc_map *m, char **out, size_t *len) {
  ts__wc_ent *v = malloc((m->used ? m->used : 1) * sizeof *v);
  if (!v) return ts_error(TS_ERR_OOM, "wordcount: out of memory");
  size_t k = 0, bytes = 1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->e[i].w) {
      v[k++] = m->e[i];
      bytes += m->e[i].len + 22;
    }
  qsort(v, k, sizeof *v, wc_cmp);
  char *s = malloc(bytes);
  if (!s) {
    free(v);
    return ts_error(TS_ERR_OOM, "wordcount: out of memory");
  }
  size_t p = 0;
  for (size_t i = 0; i < k; i++) {
    memcpy(s + p, v[i].w, v[i].len);
    p += v[i].len;
    p += (size_t)snprintf(s + p, bytes - p, "\t%lld\n", (long long)v[i].n);
  }
  s[p] = 0;
  free(v);
  *out = s;
  *len = p;
  return TS_OK;
}

void ts__wc_free(ts__wc_map *m) {
  free(m->e);
  free(m->own);
}

/* Keys of the reducer's map are copied into one growing arena; entries hold offsets until the end
 * (pointers would move on growth), so the arena is re-pointed after each growth. */
ts_status ts__wc_add_owned(ts__wc_map *m, const char *w, size_t len, int64_t n) {
  if (m->cap) {
    size_t h = wc_slot(m, w, len);
    if (m->e[h].w) {
      m->e[h].n += n;
      return TS_OK;
    }
  }
  if (m->own_len + len > m->own_cap) {
    size_t cap = m->own_cap ? 2 * m->own_cap : 1 << 16;
    while (cap < m->own_len + len) cap *= 2;
    char *p = realloc(m->own, cap);
    if (!p) return ts_error(TS_ERR_OOM, "wordcount: out of memory");
    if (p != m->own)
      for (size_t i = 0; i < m->cap; i++)
        if (m->e[i].w) m->e[i].w = p + (m->e[i].w - m->own);
    m->own = p;
    m->own_cap = cap;
  }
  char *k = m->own + m->own_len;
  memcpy(k, w, len);
  m->own_len += len;
  return ts__wc_add(m, k, len, n);
}
