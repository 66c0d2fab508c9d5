/* Optimal 1-D variable-row-block (1D-VBR) partition by dynamic programming.
 *
 * best[j] = min over i in [j - max_group, j) of best[i] + cost(i, j), cost(i, j) being the cost
 * of rows [i, j) as one group: over the maximal runs U of consecutive columns in the union of
 * the group's columns, sum of min(h * len(U) + block_cost, nnz(U) / rho) (see reorder.h).
 *
 * cost(i, i+1), ..., cost(i, i+L) come from one sweep that adds rows i, i+1, ... and keeps the
 * runs incrementally: union-find over columns (a new column joins its neighbours' runs), each run
 * knowing its length, its nonzeros and whether it is currently a block; running sums give the
 * cost in O(1). Adding a row only touches the runs of its columns, but every block run gets
 * costlier as the group grows, and turns into residue at a height fixed by its (len, nnz): that
 * height is scheduled as an event in a bucket per height, so untouched runs cost nothing.
 * Cost: O(max_group * nnz * alpha) over all starts (alpha: union-find), starts in parallel
 * (OpenMP, one workspace per thread), memory O(cols) per thread + a cost table per chunk. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/blocks_internal.h"

#define CHUNK 4096 /* starts whose costs are tabulated at once */

typedef struct ws {
  int64_t *stamp;    /* [C] == cur: column is in the current union */
  int32_t *parent;   /* [C] union-find */
  int32_t *len;      /* [C] at roots */
  int64_t *nnz;      /* [C] at roots */
  uint8_t *mode;     /* [C] at roots: 0 residue, 1 block, 2 not counted yet */
  uint32_t *ver;     /* [C] bumped on every change, to drop stale events */
  int32_t *touched;  /* [3 * max row nnz]: runs a row changed */
  int64_t *ev_head;  /* [L + 2] per height: first event, -1 none */
  int32_t *ev_col;   /* event pool */
  uint32_t *ev_ver;
  int64_t *ev_next;
  int64_t nev, evcap;
  int64_t cur;
  int64_t sl, nb, sn; /* sums: len of block runs, number of block runs, nnz of residue runs */
  bool oom;
} ws;

static int32_t find(ws *w, int32_t c) {
  while (w->parent[c] != c) {
    w->parent[c] = w->parent[w->parent[c]];
    c = w->parent[c];
  }
  return c;
}

static void uncount(ws *w, int32_t r) {
  if (w->mode[r] == 1) w->sl -= w->len[r], w->nb--;
  else if (w->mode[r] == 0) w->sn -= w->nnz[r];
  w->mode[r] = 2;
}

static void schedule(ws *w, int32_t r, int64_t h_at, int64_t L) {
  if (h_at > L) return;
  if (w->nev == w->evcap) {
    int64_t nc = w->evcap ? 2 * w->evcap : 4096;
    int32_t *a = realloc(w->ev_col, (size_t)nc * sizeof *a);
    if (a) w->ev_col = a;
    uint32_t *b = realloc(w->ev_ver, (size_t)nc * sizeof *b);
    if (b) w->ev_ver = b;
    int64_t *c = realloc(w->ev_next, (size_t)nc * sizeof *c);
    if (c) w->ev_next = c;
    if (!a || !b || !c) {
      w->oom = true;
      return;
    }
    w->evcap = nc;
  }
  w->ev_col[w->nev] = r, w->ev_ver[w->nev] = w->ver[r], w->ev_next[w->nev] = w->ev_head[h_at];
  w->ev_head[h_at] = w->nev++;
}

/* Counts run r at height h and, if it is a block, schedules the height where it stops being one. */
static void count(ws *w, const ts_blocks_opts *o, int32_t r, int64_t h, int64_t L) {
  w->ver[r]++;
  if (ts__dp_is_block(o->rho, o->block_cost, h, w->len[r], w->nnz[r])) {
    w->mode[r] = 1, w->sl += w->len[r], w->nb++;
    /* first height > h where it fails: about (nnz/rho - cost)/len + 1, settled exactly */
    double est = ((double)w->nnz[r] / o->rho - o->block_cost) / (double)w->len[r];
    int64_t f = est < (double)h ? h + 1 : est > (double)L ? L + 1 : (int64_t)est + 1;
    while (f > h + 1 && !ts__dp_is_block(o->rho, o->block_cost, f - 1, w->len[r], w->nnz[r])) f--;
    while (f <= L && ts__dp_is_block(o->rho, o->block_cost, f, w->len[r], w->nnz[r])) f++;
    schedule(w, r, f, L);
  } else {
    w->mode[r] = 0, w->sn += w->nnz[r];
  }
}

/* costs[h-1] = cost(i, i+h) for h = 1..L. */
static void sweep(ws *w, const ts_csr *m, const ts_blocks_opts *o, int64_t i, int64_t L, double *costs) {
  w->cur++;
  w->sl = w->nb = w->sn = 0;
  w->nev = 0;
  for (int64_t h = 0; h <= L + 1; h++) w->ev_head[h] = -1;
  for (int64_t h = 1; h <= L; h++) {
    /* block runs that stop paying off at this height */
    for (int64_t e = w->ev_head[h]; e >= 0; e = w->ev_next[e]) {
      int32_t r = w->ev_col[e];
      if (w->ev_ver[e] != w->ver[r] || w->stamp[r] != w->cur || w->parent[r] != r || w->mode[r] != 1) continue;
      uncount(w, r);
      count(w, o, r, h, L);
    }
    /* add the row: runs it touches are uncounted (mode 2) as they change, and counted again
     * once, after the row, so the block test runs per touched run, not per nonzero */
    int64_t row = i + h - 1, nt = 0;
    for (int64_t k = m->rowptr[row]; k < m->rowptr[row + 1]; k++) {
      int32_t c = m->col[k];
      if (w->stamp[c] != w->cur) { /* a new column: a run of its own, joined to its neighbours */
        w->stamp[c] = w->cur, w->parent[c] = c, w->len[c] = 1, w->nnz[c] = 0, w->mode[c] = 2, w->ver[c]++;
        w->touched[nt++] = c;
        for (int side = -1; side <= 1; side += 2) {
          int64_t nbc = (int64_t)c + side;
          if (nbc < 0 || nbc >= m->cols || w->stamp[nbc] != w->cur) continue;
          int32_t a = find(w, c), b = find(w, (int32_t)nbc);
          uncount(w, a), uncount(w, b);
          if (w->len[a] < w->len[b]) {
            int32_t t = a;
            a = b, b = t;
          }
          w->parent[b] = a, w->len[a] += w->len[b], w->nnz[a] += w->nnz[b], w->ver[b]++;
          w->touched[nt++] = a;
        }
      }
      int32_t r = find(w, c);
      if (w->mode[r] != 2) {
        uncount(w, r);
        w->touched[nt++] = r;
      }
      w->nnz[r]++;
    }
    for (int64_t t = 0; t < nt; t++) {
      int32_t r = find(w, w->touched[t]);
      if (w->mode[r] == 2) count(w, o, r, h, L);
    }
    costs[h - 1] = (double)h * (double)w->sl + o->block_cost * (double)w->nb + (double)w->sn / o->rho;
  }
}

static void ws_free(ws *w) {
  free(w->touched), free(w->stamp), free(w->parent), free(w->len), free(w->nnz), free(w->mode), free(w->ver);
  free(w->ev_head), free(w->ev_col), free(w->ev_ver), free(w->ev_next);
}

static bool ws_init(ws *w, int64_t C, int64_t L, int64_t maxrow) {
  memset(w, 0, sizeof *w);
  w->touched = malloc((3 * (size_t)maxrow + 1) * sizeof *w->touched);
  size_t c = (size_t)C + 1;
  w->stamp = calloc(c, sizeof *w->stamp), w->parent = malloc(c * sizeof *w->parent), w->len = malloc(c * sizeof *w->len);
  w->nnz = malloc(c * sizeof *w->nnz), w->mode = malloc(c), w->ver = calloc(c, sizeof *w->ver);
  w->ev_head = malloc(((size_t)L + 2) * sizeof *w->ev_head);
  return w->touched && w->stamp && w->parent && w->len && w->nnz && w->mode && w->ver && w->ev_head;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Emits the blocks of group [i, j): runs of the union that the rule makes blocks. */
static ts_status emit_group(const ts_csr *m, const ts_blocks_opts *o, int64_t i, int64_t j, int64_t *cnt, int32_t *cols,
                            ts__block_list *out) {
  int64_t n = 0;
  for (int64_t r = i; r < j; r++)
    for (int64_t k = m->rowptr[r]; k < m->rowptr[r + 1]; k++) {
      int32_t c = m->col[k];
      if (cnt[c]++ == 0) cols[n++] = c;
    }
  qsort(cols, (size_t)n, sizeof *cols, cmp_i32);
  ts_status s = TS_OK;
  for (int64_t a = 0; a < n;) {
    int64_t b = a, nz = 0;
    while (b + 1 < n && cols[b + 1] == cols[b] + 1) b++;
    for (int64_t t = a; t <= b; t++) nz += cnt[cols[t]];
    int64_t len = b - a + 1;
    if (s == TS_OK && ts__dp_is_block(o->rho, o->block_cost, j - i, len, nz))
      s = ts__block_push(out, i, cols[a], j - i, len, nz);
    a = b + 1;
  }
  for (int64_t t = 0; t < n; t++) cnt[cols[t]] = 0;
  return s;
}

ts_status ts__blocks_dp(const ts_csr *m, const ts_blocks_opts *o, ts__block_list *out, double *best_out) {
  int64_t R = m->rows, C = m->cols, L = o->max_group < R ? o->max_group : R;
  *best_out = 0;
  if (R == 0) return TS_OK;
  double *best = malloc(((size_t)R + 1) * sizeof *best), *tab = malloc((size_t)CHUNK * (size_t)L * sizeof *tab);
  int64_t *from = malloc(((size_t)R + 1) * sizeof *from), *ends = NULL;
  int nthr = omp_get_max_threads();
  ws *w = calloc((size_t)nthr, sizeof *w);
  ts_status s = TS_OK;
  if (!best || !tab || !from || !w) {
    s = ts_error(TS_ERR_OOM, "blocks dp: tables for %lld rows", (long long)R);
    goto done;
  }
  int64_t maxrow = 0;
  for (int64_t r = 0; r < R; r++)
    if (m->rowptr[r + 1] - m->rowptr[r] > maxrow) maxrow = m->rowptr[r + 1] - m->rowptr[r];
  for (int t = 0; t < nthr; t++)
    if (!ws_init(&w[t], C, L, maxrow)) {
      s = ts_error(TS_ERR_OOM, "blocks dp: workspace for %lld columns", (long long)C);
      goto done;
    }
  best[0] = 0;
  for (int64_t j = 1; j <= R; j++) best[j] = -1;
  bool oom = false;
  for (int64_t c0 = 0; c0 < R && !oom; c0 += CHUNK) {
    int64_t c1 = c0 + CHUNK < R ? c0 + CHUNK : R;
#pragma omp parallel for schedule(dynamic, 16) num_threads(nthr)
    for (int64_t i = c0; i < c1; i++) {
      ws *mw = &w[omp_get_thread_num()];
      int64_t h = R - i < L ? R - i : L;
      sweep(mw, m, o, i, h, tab + (size_t)(i - c0) * (size_t)L);
    }
    for (int t = 0; t < nthr; t++) oom |= w[t].oom;
    for (int64_t i = c0; i < c1; i++) { /* best[i] is final: all its predecessors are done */
      int64_t h = R - i < L ? R - i : L;
      const double *ct = tab + (size_t)(i - c0) * (size_t)L;
      for (int64_t d = 1; d <= h; d++) {
        double v = best[i] + ct[d - 1];
        if (best[i + d] < 0 || v < best[i + d]) best[i + d] = v, from[i + d] = i;
      }
    }
  }
  if (oom) {
    s = ts_error(TS_ERR_OOM, "blocks dp: event lists");
    goto done;
  }
  *best_out = best[R];
  /* walk the optimal cut back, then emit the groups top to bottom */
  int64_t ng = 0;
  for (int64_t j = R; j > 0; j = from[j]) ng++;
  ends = malloc(((size_t)ng + 1) * sizeof *ends);
  if (!ends) {
    s = ts_error(TS_ERR_OOM, "blocks dp: %lld groups", (long long)ng);
    goto done;
  }
  for (int64_t j = R, g = ng; j > 0; j = from[j]) ends[--g] = j;
  int64_t *cnt = w[0].stamp; /* a [C] scratch of counts, zeroed, kept zero between groups */
  memset(cnt, 0, (size_t)C * sizeof *cnt);
  int32_t *cols = w[0].parent;
  for (int64_t g = 0, i = 0; g < ng && s == TS_OK; g++) {
    s = emit_group(m, o, i, ends[g], cnt, cols, out);
    i = ends[g];
  }
done:
  for (int t = 0; w && t < nthr; t++) ws_free(&w[t]);
  free(w), free(best), free(tab), free(from), free(ends);
  return s;
}
