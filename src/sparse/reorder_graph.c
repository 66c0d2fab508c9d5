/* Graphs the reorderings walk: the symmetrized token graph (A | A^T without the diagonal) and
 * the row/column bipartite graph of a rectangular pattern. Both are built in O(nnz) with no
 * sorting: CSR rows arrive sorted, and scattering them by column visits rows in order, so each
 * adjacency list is two sorted halves that one merge deduplicates. */
#include <stdlib.h>
#include <string.h>

#include "sparse/reorder_internal.h"

void ts__graph_free(ts__graph *g) {
  if (!g) return;
  free(g->xadj);
  free(g->adj);
  memset(g, 0, sizeof *g);
}

static ts_status graph_alloc(ts__graph *g, int64_t n, int64_t nadj) {
  memset(g, 0, sizeof *g);
  g->n = n;
  g->xadj = calloc((size_t)n + 1, sizeof *g->xadj);
  g->adj = malloc(((size_t)nadj + 1) * sizeof *g->adj);
  if (!g->xadj || !g->adj) {
    ts__graph_free(g);
    return ts_error(TS_ERR_OOM, "reorder: graph with %lld nodes and %lld adjacency entries", (long long)n,
                    (long long)nadj);
  }
  return TS_OK;
}

/* dst[fill[j]++] = i for every entry (i, j) with row_ok[i], col_ok[j] (and i != j when
 * skip_diag): the transpose half of a graph. Done one block of TS__COL_BLOCK columns at a time
 * (a cursor per row remembers where the next block starts), so the scattered writes go to a
 * few thousand streams that stay in cache instead of n of them. */
static ts_status scatter_by_column(const ts_csr *m, const uint8_t *row_ok, const uint8_t *col_ok, bool skip_diag,
                                   int64_t *fill, int32_t *dst) {
  int64_t R = m->rows, C = m->cols;
  int64_t *cur = malloc(((size_t)R + 1) * sizeof *cur);
  if (!cur) return ts_error(TS_ERR_OOM, "reorder: row cursors for %lld rows", (long long)R);
  memcpy(cur, m->rowptr, (size_t)R * sizeof *cur);
  for (int64_t c1 = TS__COL_BLOCK; c1 - TS__COL_BLOCK < C; c1 += TS__COL_BLOCK) {
    for (int64_t i = 0; i < R; i++) {
      int64_t k = cur[i], end = m->rowptr[i + 1];
      if (!row_ok[i]) continue;
      for (; k < end && m->col[k] < c1; k++) {
        int32_t j = m->col[k];
        if (col_ok[j] && !(skip_diag && j == i)) dst[fill[j]++] = (int32_t)i;
      }
      cur[i] = k;
    }
  }
  free(cur);
  return TS_OK;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  x ^= x >> 33;
  return x;
}

ts_status ts__looks_symmetric(const ts_csr *m, const uint8_t *active, bool *sym) {
  int64_t n = m->rows;
  *sym = false;
  uint64_t *rsum = calloc((size_t)n + 1, sizeof *rsum), *csum = calloc((size_t)n + 1, sizeof *csum);
  if (!rsum || !csum) {
    free(rsum), free(csum);
    return ts_error(TS_ERR_OOM, "reorder: symmetry test for %lld tokens", (long long)n);
  }
  for (int64_t i = 0; i < n; i++) {
    if (!active[i]) continue;
    uint64_t hi = mix64((uint64_t)i + 0x9e3779b97f4a7c15ull), acc = 0;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int32_t j = m->col[k];
      if (j == i || !active[j]) continue;
      acc += mix64((uint64_t)j + 0x9e3779b97f4a7c15ull);
      csum[j] += hi;
    }
    rsum[i] = acc;
  }
  *sym = memcmp(rsum, csum, (size_t)n * sizeof *rsum) == 0;
  free(rsum), free(csum);
  return TS_OK;
}

ts_status ts__graph_sym(const ts_csr *m, const uint8_t *active, ts__graph *g) {
  memset(g, 0, sizeof *g); /* a failure before graph_alloc frees it at `done` */
  int64_t n = m->rows;
  int64_t *rcnt = calloc((size_t)n + 1, sizeof *rcnt), *ccnt = calloc((size_t)n + 1, sizeof *ccnt);
  int64_t *rfill = NULL, *cfill = NULL;
  int32_t *tmp = NULL;
  ts_status s = TS_OK;
  if (!rcnt || !ccnt) {
    s = ts_error(TS_ERR_OOM, "reorder: degree counts for %lld tokens", (long long)n);
    goto done;
  }
  bool sym;
  s = ts__looks_symmetric(m, active, &sym);
  if (s != TS_OK) goto done;
  if (sym) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) total += m->rowptr[i + 1] - m->rowptr[i];
    s = graph_alloc(g, n, total);
    if (s != TS_OK) goto done;
    int64_t w = 0;
    for (int64_t i = 0; i < n; i++) {
      if (active[i])
        for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
          int32_t j = m->col[k];
          if (j != i && active[j]) g->adj[w++] = j;
        }
      g->xadj[i + 1] = w;
    }
    goto done;
  }
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!active[i]) continue;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int32_t j = m->col[k];
      if (j == i || !active[j]) continue;
      rcnt[i]++;
      ccnt[j]++;
      total += 2;
    }
  }
  s = graph_alloc(g, n, total);
  if (s != TS_OK) goto done;
  /* row half of token i at xadj[i] .. + rcnt[i], column half right after it */
  rfill = malloc(((size_t)n + 1) * sizeof *rfill);
  cfill = malloc(((size_t)n + 1) * sizeof *cfill);
  int64_t maxdeg = 0;
  if (!rfill || !cfill) {
    s = ts_error(TS_ERR_OOM, "reorder: fill pointers for %lld tokens", (long long)n);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    g->xadj[i + 1] = g->xadj[i] + rcnt[i] + ccnt[i];
    rfill[i] = g->xadj[i];
    cfill[i] = g->xadj[i] + rcnt[i];
    if (rcnt[i] + ccnt[i] > maxdeg) maxdeg = rcnt[i] + ccnt[i];
  }
  for (int64_t i = 0; i < n; i++) {
    if (!active[i]) continue;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int32_t j = m->col[k];
      if (j != i && active[j]) g->adj[rfill[i]++] = j;
    }
  }
  s = scatter_by_column(m, active, active, true, cfill, g->adj);
  if (s != TS_OK) goto done;
  tmp = malloc(((size_t)maxdeg + 1) * sizeof *tmp);
  if (!tmp) {
    s = ts_error(TS_ERR_OOM, "reorder: merge buffer of %lld", (long long)maxdeg);
    goto done;
  }
  /* merge the two sorted halves, dropping duplicates (entries present in both A and A^T);
   * compaction only moves lists towards the front, never over unread data */
  int64_t w = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = g->xadj[i], am = a + rcnt[i], b = am, bm = g->xadj[i + 1], t = 0;
    while (a < am || b < bm) {
      int32_t v;
      if (b >= bm || (a < am && g->adj[a] < g->adj[b])) v = g->adj[a++];
      else if (a >= am || g->adj[b] < g->adj[a]) v = g->adj[b++];
      else v = g->adj[a++], b++;
      tmp[t++] = v;
    }
    g->xadj[i] = w;
    memcpy(g->adj + w, tmp, (size_t)t * sizeof *tmp);
    w += t;
  }
  g->xadj[n] = w;
done:
  if (s != TS_OK) ts__graph_free(g);
  free(rcnt), free(ccnt), free(rfill), free(cfill), free(tmp);
  return s;
}

ts_status ts__graph_bip(const ts_csr *m, const uint8_t *row_active, const uint8_t *col_active, ts__graph *g) {
  int64_t R = m->rows, C = m->cols, n = R + C, total = 0;
  if (n > INT32_MAX)
    return ts_error(TS_ERR_OVERFLOW, "reorder: rows + cols = %lld exceeds the int32 node range of the bipartite graph",
                    (long long)n);
  int64_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
  ts_status s = TS_OK;
  if (!fill) return ts_error(TS_ERR_OOM, "reorder: fill pointers for %lld nodes", (long long)n);
  s = graph_alloc(g, n, 0);
  if (s != TS_OK) goto done;
  for (int64_t i = 0; i < R; i++) {
    if (!row_active[i]) continue;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int32_t j = m->col[k];
      if (!col_active[j]) continue;
      g->xadj[i + 1]++;
      g->xadj[R + j + 1]++;
      total += 2;
    }
  }
  free(g->adj);
  g->adj = malloc(((size_t)total + 1) * sizeof *g->adj);
  if (!g->adj) {
    s = ts_error(TS_ERR_OOM, "reorder: bipartite graph with %lld adjacency entries", (long long)total);
    goto done;
  }
  for (int64_t v = 0; v < n; v++) g->xadj[v + 1] += g->xadj[v];
  memcpy(fill, g->xadj, (size_t)n * sizeof *fill);
  for (int64_t i = 0; i < R; i++) {
    if (!row_active[i]) continue;
    for (int64_t k = m->rowptr[i]; k < m->rowptr[i + 1]; k++) {
      int32_t j = m->col[k];
      if (col_active[j]) g->adj[fill[i]++] = (int32_t)(R + j);
    }
  }
  s = scatter_by_column(m, row_active, col_active, false, fill + R, g->adj);
done:
  if (s != TS_OK) ts__graph_free(g);
  free(fill);
  return s;
}

ts_status ts__ro_graph_order(const ts__ro_problem *p, const char *name, ts__graph_order_fn fn, int32_t *row_order,
                             int32_t *col_order, int64_t *groups, int64_t *col_groups) {
  ts__graph g;
  int64_t nw, R = p->m->rows;
  if (p->symmetric) {
    TS_TRY(ts__graph_sym(p->m, p->row_active, &g));
    ts_status s = fn(&g, p->row_active, p->o, row_order, &nw, groups);
    ts__graph_free(&g);
    if (s == TS_OK && nw != p->nrow_active)
      s = ts_error(TS_ERR_INTERNAL, "%s: ordered %lld of %lld tokens", name, (long long)nw, (long long)p->nrow_active);
    return s;
  }
  /* Rectangular: order rows and columns together on the bipartite graph (rows 0..R-1, then the
   * columns), then split the one order into a row order and a column order. */
  TS_TRY(ts__graph_bip(p->m, p->row_active, p->col_active, &g));
  int64_t n = g.n;
  uint8_t *inc = malloc((size_t)n + 1);
  int32_t *ord = malloc(((size_t)n + 1) * sizeof *ord);
  ts_status s = TS_OK;
  if (!inc || !ord) {
    s = ts_error(TS_ERR_OOM, "%s: bipartite work arrays for %lld nodes", name, (long long)n);
    goto done;
  }
  memcpy(inc, p->row_active, (size_t)R);
  memcpy(inc + R, p->col_active, (size_t)(n - R));
  s = fn(&g, inc, p->o, ord, &nw, groups);
  if (s != TS_OK) goto done;
  *col_groups = *groups;
  int64_t nr = 0, nc = 0;
  for (int64_t k = 0; k < nw; k++) {
    if (ord[k] < R) row_order[nr++] = ord[k];
    else col_order[nc++] = (int32_t)(ord[k] - R);
  }
  if (nr != p->nrow_active || nc != p->ncol_active)
    s = ts_error(TS_ERR_INTERNAL, "%s: ordered %lld/%lld rows and %lld/%lld columns", name, (long long)nr,
                 (long long)p->nrow_active, (long long)nc, (long long)p->ncol_active);
done:
  ts__graph_free(&g);
  free(inc), free(ord);
  return s;
}
