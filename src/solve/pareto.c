/* Pareto helpers (minimization): non-dominated sorting, crowding distance, 2-D hypervolume.
 * Sorting is the efficient non-dominated sort with sequential search (ENS-SS, Zhang et al.
 * 2015): points in lexicographic order can only be dominated by points before them, and a
 * point belongs to the first front none of whose members dominates it. O(M N^2) worst case,
 * O(N) extra memory (Deb's fast sort keeps N^2 domination lists). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/solve.h"

/* a dominates b: no worse everywhere, better somewhere. */
static bool dominates(const double *a, const double *b, int m) {
  bool strict = false;
  for (int k = 0; k < m; k++) {
    if (a[k] > b[k]) return false;
    if (a[k] < b[k]) strict = true;
  }
  return strict;
}

/* qsort has no context argument, so rows are sorted as (row pointer, length, index) records;
 * the index breaks ties so that the order is total and deterministic. */
typedef struct keyed {
  const double *row;
  int m, idx;
} keyed;

static int cmp_lex(const void *pa, const void *pb) {
  const keyed *a = pa, *b = pb;
  for (int k = 0; k < a->m; k++) {
    if (a->row[k] < b->row[k]) return -1;
    if (a->row[k] > b->row[k]) return 1;
  }
  return (a->idx > b->idx) - (a->idx < b->idx);
}

static ts_status check_points(const char *what, const double *f, int n, int m) {
  if (n < 0 || m < 1 || (n > 0 && !f))
    return ts_error(TS_ERR_INVALID_ARG, "%s: %d points of %d objectives (f=%p)", what, n, m, (const void *)f);
  for (size_t i = 0; i < (size_t)n * (size_t)m; i++)
    if (isnan(f[i]))
      return ts_error(TS_ERR_INVALID_ARG, "%s: point %zu objective %zu is NaN", what, i / (size_t)m, i % (size_t)m);
  return TS_OK;
}

ts_status ts_pareto_rank(const double *f, int n, int m, int *rank, int *nfronts) {
  TS_TRY(check_points("pareto rank", f, n, m));
  if (n > 0 && !rank) return ts_error(TS_ERR_INVALID_ARG, "pareto rank: rank is NULL");
  keyed *order = malloc(sizeof(keyed) * (size_t)(n ? n : 1));
  /* front r's members form a linked list: head[r], next[head[r]], ... (-1 ends it) */
  int *head = malloc(sizeof(int) * (size_t)(n ? n : 1)), *next = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!order || !head || !next) {
    free(order), free(head), free(next);
    return ts_error(TS_ERR_OOM, "pareto rank: out of memory for %d points", n);
  }
  for (int i = 0; i < n; i++) order[i] = (keyed){f + (size_t)i * (size_t)m, m, i};
  qsort(order, (size_t)n, sizeof *order, cmp_lex);
  int nf = 0;
  for (int t = 0; t < n; t++) {
    int p = order[t].idx;
    const double *fp = order[t].row;
    int r = 0;
    for (; r < nf; r++) {
      bool dom = false;
      for (int q = head[r]; q >= 0 && !dom; q = next[q]) dom = dominates(f + (size_t)q * (size_t)m, fp, m);
      if (!dom) break;
    }
    if (r == nf) head[nf++] = -1;
    next[p] = head[r], head[r] = p;
    rank[p] = r;
  }
  if (nfronts) *nfronts = nf;
  free(order), free(head), free(next);
  return TS_OK;
}

ts_status ts_pareto_front(const double *f, int n, int m, int *idx, int *count) {
  if (!count || (n > 0 && !idx)) return ts_error(TS_ERR_INVALID_ARG, "pareto front: NULL output");
  TS_TRY(check_points("pareto front", f, n, m));
  int *rank = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!rank) return ts_error(TS_ERR_OOM, "pareto front: out of memory");
  ts_status st = ts_pareto_rank(f, n, m, rank, NULL);
  int c = 0;
  for (int i = 0; st == TS_OK && i < n; i++)
    if (rank[i] == 0) idx[c++] = i;
  *count = c;
  free(rank);
  return st;
}

ts_status ts_pareto_crowding(const double *f, int n, int m, const int *members, int count, double *dist) {
  if (!f || m < 1 || count < 0 || count > n || (count > 0 && (!members || !dist)))
    return ts_error(TS_ERR_INVALID_ARG, "pareto crowding: %d members of %d points, %d objectives", count, n, m);
  for (int i = 0; i < count; i++) {
    if (members[i] < 0 || members[i] >= n)
      return ts_error(TS_ERR_INVALID_ARG, "pareto crowding: member %d is point %d of %d", i, members[i], n);
    dist[i] = 0;
  }
  if (count <= 2) {
    for (int i = 0; i < count; i++) dist[i] = INFINITY;
    return TS_OK;
  }
  keyed *o = malloc(sizeof(keyed) * (size_t)count);
  if (!o) return ts_error(TS_ERR_OOM, "pareto crowding: out of memory");
  for (int k = 0; k < m; k++) {
    /* Sort by objective k alone: a 1-objective key on the column k, ties by member position. */
    for (int i = 0; i < count; i++) o[i] = (keyed){f + (size_t)members[i] * (size_t)m + k, 1, i};
    qsort(o, (size_t)count, sizeof *o, cmp_lex);
    double lo = o[0].row[0], hi = o[count - 1].row[0];
    dist[o[0].idx] = dist[o[count - 1].idx] = INFINITY;
    if (!(hi > lo) || !isfinite(hi - lo)) continue;
    for (int i = 1; i < count - 1; i++)
      if (dist[o[i].idx] != INFINITY) dist[o[i].idx] += (o[i + 1].row[0] - o[i - 1].row[0]) / (hi - lo);
  }
  free(o);
  return TS_OK;
}

static int cmp_d2(const void *pa, const void *pb) {
  const double *a = pa, *b = pb;
  if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
  return (a[1] > b[1]) - (a[1] < b[1]);
}

ts_status ts_hypervolume_2d(const double *f, int n, const double ref[2], double *hv) {
  if (!ref || !hv || !isfinite(ref[0]) || !isfinite(ref[1]))
    return ts_error(TS_ERR_INVALID_ARG, "hypervolume: reference point missing or not finite");
  TS_TRY(check_points("hypervolume", f, n, 2));
  double *p = malloc(sizeof(double) * 2 * (size_t)(n ? n : 1));
  if (!p) return ts_error(TS_ERR_OOM, "hypervolume: out of memory");
  int k = 0;
  for (int i = 0; i < n; i++)
    if (f[2 * i] < ref[0] && f[2 * i + 1] < ref[1]) p[2 * k] = f[2 * i], p[2 * k + 1] = f[2 * i + 1], k++;
  qsort(p, (size_t)k, 2 * sizeof(double), cmp_d2);
  /* Sweep by increasing f0: each point adds the strip between its f1 and the lowest f1 so far. */
  double area = 0, y = ref[1];
  for (int i = 0; i < k; i++)
    if (p[2 * i + 1] < y) {
      area += (ref[0] - p[2 * i]) * (y - p[2 * i + 1]);
      y = p[2 * i + 1];
    }
  *hv = area;
  free(p);
  return TS_OK;
}
