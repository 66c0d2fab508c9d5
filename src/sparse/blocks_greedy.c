/* Greedy dense-block growth (after the IPDPS'26 pipeline's extractor, made disjoint).
 *
 * Seeds: every nonzero in row-major order that no earlier block contains. From the 1x1 seed the
 * rectangle grows one line at a time -- a column on the right or left, a row below or above --
 * taking the extension with the highest resulting density, as long as that density is >= rho,
 * the new line holds a nonzero, the size stays within max_rows x max_cols and the line touches
 * no earlier block (so blocks are disjoint rectangles). Kept when it holds >= min_nnz nonzeros.
 * Counting a line's nonzeros is two binary searches: in the CSR row, or in the CSC column (the
 * transpose, built once). Occupancy: per row and per column, a list of the blocks' spans.
 * Cost: O(nnz log d) seeding + O(log d + spans) per growth step. */
#include <stdlib.h>
#include <string.h>

#include "sparse/blocks_internal.h"

typedef struct spans { /* per-line singly linked span lists in one pool */
  int64_t *head;       /* [lines], -1 = empty */
  int32_t *a, *b;      /* [pool] span [a, b) */
  int64_t *next;
  int64_t n, cap;
} spans;

static ts_status spans_init(spans *s, int64_t lines) {
  memset(s, 0, sizeof *s);
  s->head = malloc(((size_t)lines + 1) * sizeof *s->head);
  if (!s->head) return ts_error(TS_ERR_OOM, "blocks: span lists for %lld lines", (long long)lines);
  for (int64_t i = 0; i < lines; i++) s->head[i] = -1;
  return TS_OK;
}

static void spans_free(spans *s) { free(s->head), free(s->a), free(s->b), free(s->next); }

static ts_status spans_add(spans *s, int64_t line, int64_t a, int64_t b) {
  if (s->n == s->cap) {
    int64_t nc = s->cap ? 2 * s->cap : 4096;
    int32_t *na = realloc(s->a, (size_t)nc * sizeof *na);
    if (na) s->a = na;
    int32_t *nb = realloc(s->b, (size_t)nc * sizeof *nb);
    if (nb) s->b = nb;
    int64_t *nn = realloc(s->next, (size_t)nc * sizeof *nn);
    if (nn) s->next = nn;
    if (!na || !nb || !nn) return ts_error(TS_ERR_OOM, "blocks: %lld occupancy spans", (long long)nc);
    s->cap = nc;
  }
  s->a[s->n] = (int32_t)a, s->b[s->n] = (int32_t)b, s->next[s->n] = s->head[line];
  s->head[line] = s->n++;
  return TS_OK;
}

/* Whether [a, b) on `line` is free of spans. */
static bool spans_free_range(const spans *s, int64_t line, int64_t a, int64_t b) {
  for (int64_t e = s->head[line]; e >= 0; e = s->next[e])
    if (s->a[e] < b && a < s->b[e]) return false;
  return true;
}

/* First index in sorted x[lo..hi) with x >= v. */
static int64_t lower(const int32_t *x, int64_t lo, int64_t hi, int64_t v) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (x[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Nonzeros of line `i` of m (a row of the CSR, or of the transpose) within [a, b). */
static int64_t count_in(const ts_csr *m, int64_t i, int64_t a, int64_t b) {
  int64_t lo = m->rowptr[i], hi = m->rowptr[i + 1];
  return lower(m->col, lo, hi, b) - lower(m->col, lo, hi, a);
}

typedef struct grow_ctx {
  const ts_csr *m, *t; /* pattern and its transpose */
  const ts_blocks_opts *o;
  spans rows, cols;
} grow_ctx;

/* Grows the rectangle [*r0, *r1) x [*c0, *c1) holding *k nonzeros. */
static void grow(grow_ctx *g, int64_t *r0, int64_t *r1, int64_t *c0, int64_t *c1, int64_t *k) {
  const ts_blocks_opts *o = g->o;
  int64_t R = g->m->rows, C = g->m->cols;
  for (;;) {
    /* candidates: 0 right, 1 down, 2 left, 3 up */
    double dens[4];
    int64_t add[4];
    for (int d = 0; d < 4; d++) {
      dens[d] = -1;
      int64_t h = *r1 - *r0, w = *c1 - *c0;
      bool col = d == 0 || d == 2;
      int64_t line = d == 0 ? *c1 : d == 1 ? *r1 : d == 2 ? *c0 - 1 : *r0 - 1;
      if (line < 0 || line >= (col ? C : R) || (col ? w >= o->max_cols : h >= o->max_rows)) continue;
      add[d] = col ? count_in(g->t, line, *r0, *r1) : count_in(g->m, line, *c0, *c1);
      if (add[d] == 0) continue;
      double dn = (double)(*k + add[d]) / ((double)(col ? h * (w + 1) : (h + 1) * w));
      if (dn >= o->rho) dens[d] = dn;
    }
    int best = -1;
    for (;;) { /* the densest candidate whose line is free of earlier blocks */
      best = -1;
      for (int d = 0; d < 4; d++)
        if (dens[d] >= 0 && (best < 0 || dens[d] > dens[best])) best = d;
      if (best < 0) return;
      bool col = best == 0 || best == 2;
      int64_t line = best == 0 ? *c1 : best == 1 ? *r1 : best == 2 ? *c0 - 1 : *r0 - 1;
      if (col ? spans_free_range(&g->cols, line, *r0, *r1) : spans_free_range(&g->rows, line, *c0, *c1)) break;
      dens[best] = -1;
    }
    *k += add[best];
    if (best == 0) (*c1)++;
    else if (best == 1) (*r1)++;
    else if (best == 2) (*c0)--;
    else (*r0)--;
  }
}

typedef struct rspan {
  int32_t a, b;
} rspan;

static int cmp_rspan(const void *x, const void *y) {
  const rspan *p = x, *q = y;
  return (p->a > q->a) - (p->a < q->a);
}

ts_status ts__blocks_greedy(const ts_csr *m, const ts_blocks_opts *o, ts__block_list *out) {
  int64_t R = m->rows, C = m->cols;
  grow_ctx g = {.m = m, .o = o};
  ts_csr t = {0};
  rspan *cur = NULL;
  int64_t ncap = 0;
  ts_status s = ts_csr_transpose(m, &t);
  if (s == TS_OK) s = spans_init(&g.rows, R);
  if (s == TS_OK) s = spans_init(&g.cols, C);
  if (s != TS_OK) goto done;
  g.t = &t;
  for (int64_t r = 0; r < R; r++) {
    /* the spans of earlier blocks in this row, sorted, walked left to right with the seeds */
    int64_t ns = 0;
    for (int64_t e = g.rows.head[r]; e >= 0; e = g.rows.next[e]) {
      if (ns == ncap) {
        ncap = ncap ? 2 * ncap : 64;
        rspan *nc = realloc(cur, (size_t)ncap * sizeof *nc);
        if (!nc) {
          s = ts_error(TS_ERR_OOM, "blocks: %lld spans in row %lld", (long long)ncap, (long long)r);
          goto done;
        }
        cur = nc;
      }
      cur[ns++] = (rspan){g.rows.a[e], g.rows.b[e]};
    }
    if (ns > 1) qsort(cur, (size_t)ns, sizeof *cur, cmp_rspan);
    int64_t p = 0, end = m->rowptr[r + 1];
    for (int64_t k = m->rowptr[r]; k < end; k++) {
      int64_t c = m->col[k];
      while (p < ns && cur[p].b <= c) p++;
      if (p < ns && cur[p].a <= c) { /* inside an earlier block: skip past it */
        k = lower(m->col, k, end, cur[p].b) - 1;
        continue;
      }
      int64_t r0 = r, r1 = r + 1, c0 = c, c1 = c + 1, nz = 1;
      grow(&g, &r0, &r1, &c0, &c1, &nz);
      if (nz < o->min_nnz) continue;
      s = ts__block_push(out, r0, c0, r1 - r0, c1 - c0, nz);
      for (int64_t i = r0; s == TS_OK && i < r1; i++) s = spans_add(&g.rows, i, c0, c1);
      for (int64_t j = c0; s == TS_OK && j < c1; j++) s = spans_add(&g.cols, j, r0, r1);
      if (s != TS_OK) goto done;
      k = lower(m->col, k, end, c1) - 1; /* the new block covers this row up to c1 */
    }
  }
done:
  ts_csr_free(&t);
  spans_free(&g.rows), spans_free(&g.cols);
  free(cur);
  return s;
}
