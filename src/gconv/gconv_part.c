/* Partition helpers shared by the planner steps: row bitsets, partition-list checks, the
 * knapsack over partition sizes, the greedy assignment and an assignment's predicted cost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gconv/gconv_internal.h"
#include "tessera/solve.h"

ts_status ts__gconv_rowbits_make(const ts_csr *conn, ts__gconv_rowbits *rb) {
  memset(rb, 0, sizeof *rb);
  rb->rows = conn->rows;
  rb->words = (conn->cols + 63) / 64;
  rb->bits = ts_calloc((size_t)(rb->rows ? rb->rows : 1) * (size_t)(rb->words ? rb->words : 1), sizeof(uint64_t));
  if (!rb->bits) return TS_ERR_OOM;
  for (int64_t o = 0; o < conn->rows; o++)
    for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++)
      rb->bits[o * rb->words + conn->col[q] / 64] |= (uint64_t)1 << (conn->col[q] % 64);
  return TS_OK;
}

void ts__gconv_rowbits_free(ts__gconv_rowbits *rb) {
  ts_free(rb->bits);
  memset(rb, 0, sizeof *rb);
}

/* |union of rows idx[0..n)| using acc [words] as scratch. */
static int64_t union_size(const ts__gconv_rowbits *rb, const int32_t *idx, int64_t n, uint64_t *acc) {
  memset(acc, 0, (size_t)rb->words * sizeof(uint64_t));
  for (int64_t i = 0; i < n; i++) {
    const uint64_t *r = rb->bits + (int64_t)idx[i] * rb->words;
    for (int64_t w = 0; w < rb->words; w++) acc[w] |= r[w];
  }
  int64_t c = 0;
  for (int64_t w = 0; w < rb->words; w++) c += __builtin_popcountll(acc[w]);
  return c;
}

ts_status ts__gconv_parts_check(const ts_gconv_part *parts, int32_t nparts, const ts_csr *conn, const char *what) {
  if (nparts < 1 || !parts) return ts_error(TS_ERR_INVALID_ARG, "%s: no partitions", what);
  const int64_t cout = conn->rows, cin = conn->cols;
  int32_t *owner = ts_malloc((size_t)cout * sizeof(int32_t));
  uint8_t *in = ts_calloc((size_t)cin, 1);
  ts_status s = owner && in ? TS_OK : TS_ERR_OOM;
  if (owner)
    for (int64_t o = 0; o < cout; o++) owner[o] = -1;
  for (int32_t p = 0; s == TS_OK && p < nparts; p++) {
    const ts_gconv_part *P = &parts[p];
    if (P->nrows < 1 || P->nunion < 0 || P->nunion > cin || !P->rows || (P->nunion && !P->in)) {
      s = ts_error(TS_ERR_INVALID_ARG, "%s: partition %d has %d rows and %d inputs", what, p, P->nrows, P->nunion);
      break;
    }
    for (int32_t u = 0; s == TS_OK && u < P->nunion; u++)
      if (P->in[u] < 0 || P->in[u] >= cin || (u > 0 && P->in[u] <= P->in[u - 1]))
        s = ts_error(TS_ERR_INVALID_ARG, "%s: partition %d: input %d at position %d is out of range or not increasing",
                     what, p, P->in[u], u);
    for (int32_t u = 0; s == TS_OK && u < P->nunion; u++) in[P->in[u]] = 1;
    for (int32_t i = 0; s == TS_OK && i < P->nrows; i++) {
      int32_t o = P->rows[i];
      if (o < 0 || o >= cout) {
        s = ts_error(TS_ERR_INVALID_ARG, "%s: partition %d: output channel %d out of range [0, %lld)", what, p, o,
                     (long long)cout);
        break;
      }
      if (owner[o] >= 0) {
        s = ts_error(TS_ERR_INVALID_ARG, "%s: output channel %d is in partitions %d and %d", what, o, owner[o], p);
        break;
      }
      owner[o] = p;
      for (int64_t q = conn->rowptr[o]; q < conn->rowptr[o + 1]; q++)
        if (!in[conn->col[q]]) {
          s = ts_error(TS_ERR_INVALID_ARG, "%s: partition %d lacks input %d of output channel %d", what, p,
                       conn->col[q], o);
          break;
        }
    }
    for (int32_t u = 0; u < P->nunion && P->in && P->in[u] >= 0 && P->in[u] < cin; u++) in[P->in[u]] = 0;
  }
  for (int64_t o = 0; s == TS_OK && o < cout; o++)
    if (owner[o] < 0) s = ts_error(TS_ERR_INVALID_ARG, "%s: output channel %lld is in no partition", what, (long long)o);
  ts_free(owner);
  ts_free(in);
  return s;
}

/* Union sizes an assignment can reach whatever the order: from 16 seed rows spread over the
 * outputs, a cluster grown one row at a time by the row that adds the fewest inputs; grow[r-1] +=
 * its union at r rows (summed over seeds; *nseeds gets the count). O(seeds R cout words). */
static ts_status cluster_unions(const ts__gconv_rowbits *rb, int R, double *grow, int *nseeds) {
  const int64_t cout = rb->rows, W = rb->words;
  const int S = cout < 16 ? (int)cout : 16;
  uint64_t *acc = ts_malloc((size_t)W * sizeof(uint64_t) + 8);
  uint8_t *in = ts_malloc((size_t)cout);
  if (!acc || !in) return ts_free(acc), ts_free(in), TS_ERR_OOM;
  for (int r = 0; r < R; r++) grow[r] = 0;
  for (int sd = 0; sd < S; sd++) {
    memset(in, 0, (size_t)cout);
    int64_t o = (int64_t)sd * cout / S;
    memcpy(acc, rb->bits + o * W, (size_t)W * sizeof(uint64_t));
    in[o] = 1;
    for (int r = 1; r <= R; r++) {
      int64_t u = 0;
      for (int64_t w = 0; w < W; w++) u += __builtin_popcountll(acc[w]);
      grow[r - 1] += (double)u;
      if (r == R) break;
      int64_t best = -1, bu = INT64_MAX;
      for (int64_t q = 0; q < cout; q++) {
        if (in[q]) continue;
        const uint64_t *b = rb->bits + q * W;
        int64_t add = 0;
        for (int64_t w = 0; w < W && add < bu; w++) add += __builtin_popcountll(b[w] & ~acc[w]);
        if (add < bu) bu = add, best = q;
      }
      in[best] = 1;
      for (int64_t w = 0; w < W; w++) acc[w] |= rb->bits[best * W + w];
    }
  }
  ts_free(acc), ts_free(in);
  *nseeds = S;
  return TS_OK;
}

ts_status ts__gconv_knapsack_sizes(const ts_gconv_layer *l, const ts__gconv_rowbits *rb, const int32_t *order,
                                   const ts_gconv_cost *m, int max_rows, int32_t *sizes, int32_t *nparts) {
  const int64_t cout = rb->rows;
  int R = max_rows < cout ? max_rows : (int)cout;
  int64_t *sz = ts_malloc((size_t)R * sizeof(int64_t)), *counts = ts_malloc((size_t)R * sizeof(int64_t));
  double *cost = ts_malloc((size_t)R * sizeof(double));
  uint64_t *acc = ts_malloc((size_t)rb->words * sizeof(uint64_t) + 8);
  double *grow = ts_malloc((size_t)R * sizeof(double));
  int nseeds = 1;
  ts_status s = sz && counts && cost && acc && grow ? TS_OK : TS_ERR_OOM;
  if (s == TS_OK) s = cluster_unions(rb, R, grow, &nseeds);
  for (int r = 1; s == TS_OK && r <= R; r++) {
    /* the smaller of: the mean union of the non-overlapping windows of r consecutive rows of the
     * order (what the greedy chunks get), and the grown clusters' (what the ILP can reach) */
    int64_t nw = cout / r, tot = 0;
    for (int64_t w = 0; w < nw; w++) tot += union_size(rb, order + w * r, r, acc);
    double u = (double)tot / (double)nw, uc = grow[r - 1] / nseeds;
    sz[r - 1] = r;
    cost[r - 1] = ts_gconv_cost_part(m, l, r, (int64_t)((u < uc ? u : uc) + 0.5));
  }
  if (s == TS_OK) s = ts_partition_min_cost(cout, R, sz, cost, 0, counts, NULL);
  if (s == TS_OK) {
    int32_t n = 0;
    for (int r = R; r >= 1; r--)
      for (int64_t t = 0; t < counts[r - 1]; t++) sizes[n++] = r;
    *nparts = n;
  }
  ts_free(sz), ts_free(counts), ts_free(cost), ts_free(acc), ts_free(grow);
  return s;
}

ts_status ts__gconv_segment(const ts_gconv_layer *l, const ts__gconv_rowbits *rb, const int32_t *order,
                            const ts_gconv_cost *m, int max_rows, int32_t *sizes, int32_t *nparts) {
  const int64_t n = rb->rows, W = rb->words;
  double *f = ts_malloc((size_t)(n + 1) * sizeof(double));
  int32_t *from = ts_malloc((size_t)(n + 1) * sizeof(int32_t));
  uint64_t *acc = ts_malloc((size_t)W * sizeof(uint64_t) + 8);
  if (!f || !from || !acc) return ts_free(f), ts_free(from), ts_free(acc), TS_ERR_OOM;
  f[0] = 0;
  for (int64_t i = 1; i <= n; i++) {
    f[i] = INFINITY;
    memset(acc, 0, (size_t)W * sizeof(uint64_t));
    int64_t u = 0;
    for (int r = 1; r <= max_rows && r <= i; r++) { /* segment order[i-r .. i) grown backwards */
      const uint64_t *b = rb->bits + (int64_t)order[i - r] * W;
      for (int64_t w = 0; w < W; w++) u += __builtin_popcountll(b[w] & ~acc[w]), acc[w] |= b[w];
      double c = f[i - r] + ts_gconv_cost_part(m, l, r, u);
      if (c < f[i]) f[i] = c, from[i] = r;
    }
  }
  int32_t np = 0;
  for (int64_t i = n; i > 0; i -= from[i]) sizes[np++] = from[i];
  for (int32_t a = 0, b = np - 1; a < b; a++, b--) { /* back to sequence order */
    int32_t t = sizes[a];
    sizes[a] = sizes[b], sizes[b] = t;
  }
  *nparts = np;
  ts_free(f), ts_free(from), ts_free(acc);
  return TS_OK;
}

void ts__gconv_assign_free(ts__gconv_assign *a) {
  ts_free(a->size);
  ts_free(a->part_of);
  memset(a, 0, sizeof *a);
}

ts_status ts__gconv_greedy(const int32_t *order, int64_t cout, const int32_t *sizes, int32_t nparts,
                           ts__gconv_assign *a) {
  memset(a, 0, sizeof *a);
  a->size = ts_malloc((size_t)nparts * sizeof(int32_t));
  a->part_of = ts_malloc((size_t)cout * sizeof(int32_t));
  if (!a->size || !a->part_of) {
    ts__gconv_assign_free(a);
    return TS_ERR_OOM;
  }
  a->nparts = nparts;
  int64_t i = 0;
  for (int32_t p = 0; p < nparts; p++) {
    a->size[p] = sizes[p];
    for (int32_t t = 0; t < sizes[p]; t++) a->part_of[order[i++]] = p;
  }
  if (i != cout) {
    ts__gconv_assign_free(a);
    return ts_error(TS_ERR_INTERNAL, "gconv greedy: sizes sum to %lld, not %lld", (long long)i, (long long)cout);
  }
  return TS_OK;
}

/* Members of every partition, grouped: start [nparts+1], mem [cout]. */
static ts_status members(const ts__gconv_assign *a, int64_t cout, int64_t **start, int32_t **mem) {
  *start = ts_calloc((size_t)a->nparts + 1, sizeof(int64_t));
  *mem = ts_malloc((size_t)cout * sizeof(int32_t));
  if (!*start || !*mem) {
    ts_free(*start), ts_free(*mem);
    return TS_ERR_OOM;
  }
  for (int64_t o = 0; o < cout; o++) (*start)[a->part_of[o] + 1]++;
  for (int32_t p = 0; p < a->nparts; p++) (*start)[p + 1] += (*start)[p];
  int64_t *fill = ts_malloc((size_t)a->nparts * sizeof(int64_t) + 8);
  if (!fill) {
    ts_free(*start), ts_free(*mem);
    return TS_ERR_OOM;
  }
  memcpy(fill, *start, (size_t)a->nparts * sizeof(int64_t));
  for (int64_t o = 0; o < cout; o++) (*mem)[fill[a->part_of[o]]++] = (int32_t)o;
  ts_free(fill);
  return TS_OK;
}

double ts__gconv_assign_cost(const ts_gconv_layer *l, const ts__gconv_rowbits *rb, const ts_gconv_cost *m,
                             const ts__gconv_assign *a) {
  int64_t *start;
  int32_t *mem;
  uint64_t *acc = ts_malloc((size_t)rb->words * sizeof(uint64_t) + 8);
  if (!acc || members(a, rb->rows, &start, &mem) != TS_OK) {
    ts_free(acc);
    return INFINITY;
  }
  double t = 0;
  for (int32_t p = 0; p < a->nparts; p++) {
    int64_t n = start[p + 1] - start[p];
    if (n) t += ts_gconv_cost_part(m, l, (int)n, union_size(rb, mem + start[p], n, acc));
  }
  ts_free(start), ts_free(mem), ts_free(acc);
  return t;
}

ts_status ts__gconv_assign_to_parts(const ts__gconv_rowbits *rb, const ts__gconv_assign *a, ts_gconv_part **parts,
                                    int32_t **rows_buf, int32_t **in_buf, int32_t *nparts) {
  *parts = NULL, *rows_buf = NULL, *in_buf = NULL, *nparts = 0;
  int64_t *start;
  int32_t *mem;
  TS_TRY(members(a, rb->rows, &start, &mem));
  uint64_t *acc = ts_malloc((size_t)rb->words * sizeof(uint64_t) + 8);
  int32_t np = 0;
  int64_t tot = 0;
  for (int32_t p = 0; acc && p < a->nparts; p++)
    if (start[p + 1] > start[p]) np++, tot += union_size(rb, mem + start[p], start[p + 1] - start[p], acc);
  ts_gconv_part *P = acc ? ts_calloc((size_t)(np ? np : 1), sizeof *P) : NULL;
  int32_t *ib = P ? ts_malloc((size_t)(tot ? tot : 1) * sizeof(int32_t)) : NULL;
  if (!ib) {
    ts_free(start), ts_free(mem), ts_free(acc), ts_free(P);
    return TS_ERR_OOM;
  }
  int32_t q = 0;
  int64_t ip = 0;
  for (int32_t p = 0; p < a->nparts; p++) {
    int64_t n = start[p + 1] - start[p];
    if (!n) continue;
    union_size(rb, mem + start[p], n, acc);
    P[q].nrows = (int32_t)n;
    P[q].rows = mem + start[p];
    P[q].in = ib + ip;
    for (int64_t w = 0; w < rb->words; w++)
      for (uint64_t x = acc[w]; x; x &= x - 1) ib[ip++] = (int32_t)(w * 64 + __builtin_ctzll(x));
    P[q].nunion = (int32_t)(ib + ip - P[q].in);
    q++;
  }
  *parts = P, *rows_buf = mem, *in_buf = ib, *nparts = q;
  ts_free(start), ts_free(acc);
  return TS_OK;
}

double ts_gconv_parts_pred_ms(const ts_gconv_cost *m, const ts_gconv_layer *l, const ts_gconv_part *parts,
                              int32_t nparts) {
  double t = 0;
  for (int32_t p = 0; p < nparts; p++) t += ts_gconv_cost_part(m, l, parts[p].nrows, parts[p].nunion);
  return t * 1e3;
}
