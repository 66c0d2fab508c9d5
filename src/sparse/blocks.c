/* ts_blocks_extract: option checks, dispatch to the greedy / dp extractors, and the common
 * finish: blocks sorted by (row0, col0), the residue (nonzeros inside no block) as CSR, every
 * block's nonzero count recounted and the rectangles checked disjoint row by row (a broken
 * invariant is TS_ERR_INTERNAL, never a silently wrong cover). Also the summary statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/blocks_internal.h"

static const char *const extract_names[] = {"greedy", "dp"};

const char *ts_extract_method_name(ts_extract_method m) {
  return (m == TS_EXTRACT_GREEDY || m == TS_EXTRACT_DP) ? extract_names[m] : "?";
}

ts_status ts_extract_method_parse(const char *name, ts_extract_method *out) {
  for (int i = 0; i < 2; i++)
    if (name && strcmp(name, extract_names[i]) == 0) {
      *out = (ts_extract_method)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "unknown block extraction '%s' (expected greedy or dp)", name ? name : "(null)");
}

void ts_blocks_opts_default(ts_blocks_opts *o) {
  memset(o, 0, sizeof *o);
  o->method = TS_EXTRACT_GREEDY;
  o->rho = 0.6;
  o->min_nnz = 4;
  o->max_rows = 1024;
  o->max_cols = 1024;
  o->max_group = 32;
  o->block_cost = 16;
}

void ts_blocks_free(ts_blocks *b) {
  if (!b) return;
  free(b->blocks);
  ts_csr_free(&b->residue);
  memset(b, 0, sizeof *b);
}

ts_status ts__block_push(ts__block_list *l, int64_t row0, int64_t col0, int64_t rows, int64_t cols, int64_t nnz) {
  if (l->n == l->cap) {
    int64_t nc = l->cap ? 2 * l->cap : 256;
    ts_block *nb = realloc(l->b, (size_t)nc * sizeof *nb);
    if (!nb) return ts_error(TS_ERR_OOM, "blocks: list of %lld blocks", (long long)nc);
    l->b = nb, l->cap = nc;
  }
  l->b[l->n++] = (ts_block){(int32_t)row0, (int32_t)col0, (int32_t)rows, (int32_t)cols, nnz};
  return TS_OK;
}

static int cmp_block(const void *a, const void *b) {
  const ts_block *x = a, *y = b;
  if (x->row0 != y->row0) return x->row0 < y->row0 ? -1 : 1;
  return (x->col0 > y->col0) - (x->col0 < y->col0);
}

typedef struct span {
  int32_t c0, c1; /* [c0, c1) */
  int64_t block;
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  return (x->c0 > y->c0) - (x->c0 < y->c0);
}

/* Sorts the blocks, recounts their nonzeros, checks disjointness and builds the residue. */
static ts_status finish(const ts_csr *m, const ts_blocks_opts *o, ts__block_list *l, ts_blocks *out) {
  int64_t R = m->rows, nb = l->n;
  if (nb > 1) qsort(l->b, (size_t)nb, sizeof *l->b, cmp_block);
  int64_t *ptr = calloc((size_t)R + 2, sizeof *ptr), *cnt = calloc((size_t)nb + 1, sizeof *cnt);
  span *sp = NULL;
  ts_status s = TS_OK;
  if (!ptr || !cnt) {
    s = ts_error(TS_ERR_OOM, "blocks: row index for %lld rows", (long long)R);
    goto done;
  }
  int64_t total = 0;
  for (int64_t b = 0; b < nb; b++) {
    const ts_block *k = &l->b[b];
    if (k->rows < 1 || k->cols < 1 || k->row0 < 0 || k->col0 < 0 || k->row0 + (int64_t)k->rows > R ||
        k->col0 + (int64_t)k->cols > m->cols) {
      s = ts_error(TS_ERR_INTERNAL, "blocks: block %lld (%d,%d %dx%d) is outside the %lldx%lld pattern", (long long)b,
                   k->row0, k->col0, k->rows, k->cols, (long long)R, (long long)m->cols);
      goto done;
    }
    for (int64_t r = k->row0; r < k->row0 + k->rows; r++) ptr[r + 1]++;
    total += k->rows;
  }
  for (int64_t r = 0; r < R; r++) ptr[r + 1] += ptr[r];
  sp = malloc(((size_t)total + 1) * sizeof *sp);
  if (!sp) {
    s = ts_error(TS_ERR_OOM, "blocks: %lld row spans", (long long)total);
    goto done;
  }
  for (int64_t b = 0; b < nb; b++) {
    const ts_block *k = &l->b[b];
    for (int64_t r = k->row0; r < k->row0 + k->rows; r++)
      sp[ptr[r]++] = (span){k->col0, k->col0 + k->cols, b};
  }
  for (int64_t r = R; r > 0; r--) ptr[r] = ptr[r - 1];
  ptr[0] = 0;
  /* pass 1: sort each row's spans, check they are disjoint, count the residue */
  int64_t res = 0;
  for (int64_t r = 0; r < R; r++) {
    span *a = sp + ptr[r];
    int64_t na = ptr[r + 1] - ptr[r];
    if (na > 1) qsort(a, (size_t)na, sizeof *a, cmp_span);
    for (int64_t t = 1; t < na; t++)
      if (a[t].c0 < a[t - 1].c1) {
        s = ts_error(TS_ERR_INTERNAL, "blocks: blocks %lld and %lld overlap in row %lld", (long long)a[t - 1].block,
                     (long long)a[t].block, (long long)r);
        goto done;
      }
    int64_t t = 0;
    for (int64_t k = m->rowptr[r]; k < m->rowptr[r + 1]; k++) {
      int32_t c = m->col[k];
      while (t < na && a[t].c1 <= c) t++;
      if (t < na && a[t].c0 <= c) cnt[a[t].block]++;
      else res++;
    }
  }
  s = ts_csr_alloc(&out->residue, R, m->cols, res, false);
  if (s != TS_OK) goto done;
  /* pass 2: fill the residue */
  int64_t w = 0;
  for (int64_t r = 0; r < R; r++) {
    const span *a = sp + ptr[r];
    int64_t na = ptr[r + 1] - ptr[r], t = 0;
    for (int64_t k = m->rowptr[r]; k < m->rowptr[r + 1]; k++) {
      int32_t c = m->col[k];
      while (t < na && a[t].c1 <= c) t++;
      if (!(t < na && a[t].c0 <= c)) out->residue.col[w++] = c;
    }
    out->residue.rowptr[r + 1] = w;
  }
  for (int64_t b = 0; b < nb; b++) {
    const ts_block *k = &l->b[b];
    double cells = (double)k->rows * (double)k->cols;
    if (cnt[b] != k->nnz || (double)cnt[b] < o->rho * cells * (1 - 1e-12)) {
      s = ts_error(TS_ERR_INTERNAL, "blocks: block %lld (%d,%d %dx%d) holds %lld nonzeros, extractor said %lld (rho %g)",
                   (long long)b, k->row0, k->col0, k->rows, k->cols, (long long)cnt[b], (long long)k->nnz, o->rho);
      goto done;
    }
    out->block_nnz += k->nnz;
    out->block_cells += (int64_t)k->rows * k->cols;
  }
  out->blocks = l->b, out->nblocks = nb;
  l->b = NULL, l->n = l->cap = 0;
  out->objective = (double)out->block_cells + (double)nb * o->block_cost + (double)res / o->rho;
done:
  free(ptr), free(cnt), free(sp);
  return s;
}

ts_status ts_blocks_extract(const ts_csr *m, const ts_blocks_opts *o, ts_blocks *out) {
  double t0 = ts_now();
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "blocks: output is NULL");
  memset(out, 0, sizeof *out);
  if (!m || !o) return ts_error(TS_ERR_INVALID_ARG, "blocks: pattern and options are required");
  TS_TRY(ts_csr_validate(m));
  if (o->method != TS_EXTRACT_GREEDY && o->method != TS_EXTRACT_DP)
    return ts_error(TS_ERR_INVALID_ARG, "blocks: method %d out of range", (int)o->method);
  if (!(o->rho > 0 && o->rho <= 1)) return ts_error(TS_ERR_INVALID_ARG, "blocks: rho must be in (0, 1], got %g", o->rho);
  if (o->min_nnz < 1) return ts_error(TS_ERR_INVALID_ARG, "blocks: min_nnz must be >= 1, got %lld", (long long)o->min_nnz);
  if (o->max_rows < 1 || o->max_cols < 1)
    return ts_error(TS_ERR_INVALID_ARG, "blocks: max block %dx%d must be at least 1x1", o->max_rows, o->max_cols);
  if (o->max_group < 1 || o->max_group > 1024)
    return ts_error(TS_ERR_INVALID_ARG, "blocks: max_group must be in [1, 1024], got %d", o->max_group);
  if (!(o->block_cost >= 0 && o->block_cost < 1e15))
    return ts_error(TS_ERR_INVALID_ARG, "blocks: block_cost must be >= 0, got %g", o->block_cost);
  out->rows = m->rows, out->cols = m->cols, out->nnz = m->nnz;
  ts__block_list l = {0};
  double best = 0;
  ts_status s = o->method == TS_EXTRACT_GREEDY ? ts__blocks_greedy(m, o, &l) : ts__blocks_dp(m, o, &l, &best);
  if (s == TS_OK) s = finish(m, o, &l, out);
  /* the dp's optimum must be exactly what its blocks and residue cost */
  if (s == TS_OK && o->method == TS_EXTRACT_DP && !(fabs(best - out->objective) <= 1e-9 * (1 + fabs(best))))
    s = ts_error(TS_ERR_INTERNAL, "blocks dp: optimum %.17g differs from the emitted cover's cost %.17g", best,
                 out->objective);
  free(l.b);
  if (s != TS_OK) {
    ts_blocks_free(out);
    return s;
  }
  out->rows = m->rows, out->cols = m->cols, out->nnz = m->nnz;
  out->ms = 1e3 * (ts_now() - t0);
  return TS_OK;
}

void ts_blocks_summarize(const ts_blocks *b, ts_blocks_summary *out) {
  memset(out, 0, sizeof *out);
  out->nblocks = b->nblocks;
  out->residue_nnz = b->residue.nnz;
  for (int64_t k = 0; k < b->nblocks; k++) {
    const ts_block *x = &b->blocks[k];
    int64_t cells = (int64_t)x->rows * x->cols;
    out->block_cells += cells;
    out->block_nnz += x->nnz;
    int bin = cells ? (int)(10.0 * (double)x->nnz / (double)cells) : 0;
    out->density_hist[bin < 0 ? 0 : bin > 9 ? 9 : bin]++;
  }
  out->fill_ratio = b->nnz ? (double)(out->block_cells + out->residue_nnz) / (double)b->nnz : 1.0;
  out->coverage = b->nnz ? (double)out->block_nnz / (double)b->nnz : 1.0;
  out->mean_density = out->block_cells ? (double)out->block_nnz / (double)out->block_cells : 0.0;
}
