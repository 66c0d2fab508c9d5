/* plan3d partitioners: L layers into S contiguous stages minimizing the 1F1B time proxy
 * J = (m - 1) max_s T_s + sum_s T_s. Greedy (FASOP's min-max moves plus boundary refinement) is
 * what the search uses; the exact DP and brute force are its oracles (tests, bench). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan3d/plan3d_internal.h"
#include "tessera/measure.h"

const char *ts_p3_partitioner_name(ts_p3_partitioner p) {
  switch (p) {
    case TS_P3_GREEDY: return "greedy";
    case TS_P3_DP: return "dp";
    case TS_P3_BRUTE: return "brute";
  }
  return "?";
}

ts_status ts_p3_partitioner_parse(const char *s, ts_p3_partitioner *p) {
  if (!s || !p) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_partitioner_parse: NULL argument");
  for (int k = 0; k <= TS_P3_BRUTE; k++)
    if (!strcmp(s, ts_p3_partitioner_name((ts_p3_partitioner)k))) {
      *p = (ts_p3_partitioner)k;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "unknown partitioner '%s' (greedy, dp, brute)", s);
}

/* Prefix sums of each stage's layer costs: pre[s * (L + 1) + l] = sum_{k < l} cost[s * L + k]. */
typedef struct part_ctx {
  int S, L, m;
  const double *fixed;
  const int *cap;
  double *pre;
  int *scratch;   /* [S] */
  bool unpruned;  /* DP: every candidate bottleneck, no bound (the bench's reference) */
} part_ctx;

static inline double seg(const part_ctx *c, int s, int a, int b) { /* layers [a, b) on stage s */
  const double *p = c->pre + (size_t)s * (c->L + 1);
  return c->fixed[s] + p[b] - p[a];
}

static inline int capof(const part_ctx *c, int s) { return c->cap ? c->cap[s] : c->L; }

static double objective(const part_ctx *c, const int *counts) {
  double mx = 0, sum = 0;
  int a = 0;
  for (int s = 0; s < c->S; s++) {
    double t = seg(c, s, a, a + counts[s]);
    a += counts[s];
    sum += t;
    if (t > mx) mx = t;
  }
  return (c->m - 1) * mx + sum;
}

/* ---- greedy ---- */

/* Fills stages left to right (dir > 0) or right to left (dir < 0), each with as many layers as
 * keep its time <= B, its cap, and one layer for every stage still to fill. Taking more layers
 * early never hurts the stages after (they get a shorter suffix of non-negative costs), so this
 * succeeds exactly when some split has every T_s <= B. */
static bool fill(const part_ctx *c, double B, int dir, int *counts) {
  int S = c->S, L = c->L;
  if (dir > 0) {
    int a = 0;
    for (int s = 0; s < S; s++) {
      int left_after = S - 1 - s, k = 0;
      if (s == S - 1) {
        k = L - a;
        if (k > capof(c, s) || seg(c, s, a, L) > B) return false;
      } else {
        while (a + k + 1 <= L - left_after && k + 1 <= capof(c, s) && seg(c, s, a, a + k + 1) <= B) k++;
        if (k == 0) return false;
      }
      counts[s] = k, a += k;
    }
  } else {
    int b = L;
    for (int s = S - 1; s >= 0; s--) {
      int k = 0;
      if (s == 0) {
        k = b;
        if (k > capof(c, s) || seg(c, s, 0, b) > B) return false;
      } else {
        while (b - k - 1 >= s && k + 1 <= capof(c, s) && seg(c, s, b - k - 1, b) <= B) k++;
        if (k == 0) return false;
      }
      counts[s] = k, b -= k;
    }
  }
  return true;
}

/* The least bottleneck (min-max optimum) by bisection on B with the fill test. */
static double min_bottleneck(const part_ctx *c) {
  double hi = 0;
  for (int s = 0; s < c->S; s++) {
    double v = seg(c, s, 0, c->L);
    if (v > hi) hi = v;
  }
  double lo = 0;
  int *tmp = c->scratch;
  for (int it = 0; it < 60 && hi - lo > 1e-12 * hi; it++) {
    double mid = 0.5 * (lo + hi);
    if (fill(c, mid, 1, tmp)) hi = mid;
    else lo = mid;
  }
  return hi;
}

/* Local search from counts: (1) FASOP's move of one layer from the slowest stage to the fastest,
 * while J falls; (2) single boundary moves between neighbours, while J falls. */
static double local_search(const part_ctx *c, int *counts, double *t) {
  int S = c->S, L = c->L;
  double J = objective(c, counts);
  for (int it = 0; it < L * S; it++) {
    int a = 0, smax = -1, smin = -1;
    for (int s = 0; s < S; s++) {
      t[s] = seg(c, s, a, a + counts[s]);
      a += counts[s];
    }
    for (int s = 0; s < S; s++) {
      if (counts[s] > 1 && (smax < 0 || t[s] > t[smax])) smax = s;
      if (counts[s] < capof(c, s) && (smin < 0 || t[s] < t[smin])) smin = s;
    }
    if (smax < 0 || smin < 0 || smax == smin) break;
    counts[smax]--, counts[smin]++;
    double Jn = objective(c, counts);
    if (!(Jn < J)) {
      counts[smax]++, counts[smin]--;
      break;
    }
    J = Jn;
  }
  for (bool improved = true; improved;) {
    improved = false;
    for (int s = 0; s + 1 < S; s++) {
      for (int dir = -1; dir <= 1; dir += 2) { /* -1: stage s gives its last layer to s+1 */
        int from = dir < 0 ? s : s + 1, to = dir < 0 ? s + 1 : s;
        if (counts[from] <= 1 || counts[to] >= capof(c, to)) continue;
        counts[from]--, counts[to]++;
        double Jn = objective(c, counts);
        if (Jn < J * (1 - 1e-12)) {
          J = Jn;
          improved = true;
        } else {
          counts[from]++, counts[to]--;
        }
      }
    }
  }
  return J;
}

/* The split of least total time (the J of one micro-batch), ignoring the caps: a monotone path
 * through (stage, layer), O(S L). false when memory runs out. */
static bool min_sum_path(const part_ctx *c, int *counts) {
  int S = c->S, L = c->L;
  double *D = malloc((size_t)S * (L + 1) * sizeof *D);
  unsigned char *from = malloc((size_t)S * (L + 1));
  if (!D || !from) {
    free(D), free(from);
    return false;
  }
  /* D[s][l]: layers [0, l) in stages 0..s, stage s non-empty and ending at l */
  for (int s = 0; s < S; s++)
    for (int l = 0; l <= L; l++) {
      double *d = &D[(size_t)s * (L + 1) + l];
      *d = INFINITY;
      if (l < s + 1) continue;
      const double *p = c->pre + (size_t)s * (L + 1);
      double ext = D[(size_t)s * (L + 1) + l - 1] + p[l] - p[l - 1];
      double start = s == 0 ? (l == 1 ? c->fixed[0] + p[1] : INFINITY)
                            : D[(size_t)(s - 1) * (L + 1) + l - 1] + c->fixed[s] + p[l] - p[l - 1];
      if (s == 0 && l > 1) start = INFINITY;
      *d = ext < start ? ext : start;
      from[(size_t)s * (L + 1) + l] = ext < start ? 0 : 1;
    }
  bool ok = D[(size_t)(S - 1) * (L + 1) + L] < INFINITY;
  for (int s = S - 1, l = L; ok && s >= 0; s--) {
    int k = 0;
    while (from[(size_t)s * (L + 1) + l] == 0) k++, l--;
    k++, l--; /* the first layer of stage s */
    counts[s] = k;
  }
  free(D), free(from);
  return ok;
}

/* Moves the layers over a stage's cap to its neighbours: right first (dir > 0) or left first
 * (the caps hold L in all, checked by the caller). */
static bool within_caps(const part_ctx *c, int *counts, int dir) {
  int S = c->S;
  for (int pass = 0; pass < 2; pass++, dir = -dir) {
    if (dir > 0) {
      for (int s = 0; s + 1 < S; s++)
        if (counts[s] > capof(c, s)) counts[s + 1] += counts[s] - capof(c, s), counts[s] = capof(c, s);
    } else {
      for (int s = S - 1; s > 0; s--)
        if (counts[s] > capof(c, s)) counts[s - 1] += counts[s] - capof(c, s), counts[s] = capof(c, s);
    }
  }
  for (int s = 0; s < S; s++)
    if (counts[s] < 1 || counts[s] > capof(c, s)) return false;
  return true;
}

/* Greedy: local search from four starts -- balanced counts (FASOP's start) and the two fills at
 * the min-max bottleneck (what matters when many micro-batches fill the pipeline), and the least
 * total time (when few do) -- keeping the best. O(S L) per move, O(L) per bisection step. */
static ts_status greedy(const part_ctx *c, int *counts) {
  int S = c->S, L = c->L;
  double *t = malloc((size_t)S * sizeof *t);
  int *cur = malloc((size_t)S * sizeof *cur);
  if (!t || !cur) {
    free(t), free(cur);
    return ts_error(TS_ERR_OOM, "out of memory in the greedy partitioner");
  }
  double best = INFINITY;
  /* balanced counts within the caps: one more layer at a time to each stage with room */
  for (int s = 0; s < S; s++) cur[s] = 1;
  for (int left = L - S; left > 0;) {
    bool any = false;
    for (int s = 0; s < S && left > 0; s++)
      if (cur[s] < capof(c, s)) cur[s]++, left--, any = true;
    if (!any) break;
  }
  double J = local_search(c, cur, t);
  if (J < best) best = J, memcpy(counts, cur, (size_t)S * sizeof *cur);
  /* fills at the min-max bottleneck and a little above it (a looser bottleneck can buy a smaller
   * sum of stage times) */
  double B = min_bottleneck(c);
  int *seen = malloc((size_t)12 * S * sizeof *seen), nseen = 0;
  for (int k = 0; k < 6; k++)
    for (int dir = -1; dir <= 1; dir += 2)
      if (fill(c, B * (1 + 0.02 * k), dir, cur)) {
        bool dup = false; /* neighbouring bottlenecks often fill alike: search each start once */
        for (int i = 0; seen && i < nseen && !dup; i++) dup = !memcmp(seen + (size_t)i * S, cur, (size_t)S * sizeof *cur);
        if (dup) continue;
        if (seen) memcpy(seen + (size_t)nseen++ * S, cur, (size_t)S * sizeof *cur);
        J = local_search(c, cur, t);
        if (J < best) best = J, memcpy(counts, cur, (size_t)S * sizeof *cur);
      }
  free(seen);
  int *raw = c->scratch;
  if (min_sum_path(c, raw))
    for (int dir = -1; dir <= 1; dir += 2) {
      memcpy(cur, raw, (size_t)S * sizeof *cur);
      if (!within_caps(c, cur, dir)) continue;
      J = local_search(c, cur, t);
      if (J < best) best = J, memcpy(counts, cur, (size_t)S * sizeof *cur);
    }
  free(t), free(cur);
  return TS_OK;
}

/* ---- exact DP over bottleneck candidates ---- */

/* The least sum of stage times with every T_s <= B; INFINITY when none. D: [(S+1) (L+1)],
 * arg: [S (L+1)] the start of the last stage. */
static double min_sum(const part_ctx *c, double B, double *D, int *arg) {
  int S = c->S, L = c->L;
  for (int l = 0; l <= L; l++) D[l] = l == 0 ? 0 : INFINITY;
  for (int s = 1; s <= S; s++) {
    double *prev = D + (size_t)(s - 1) * (L + 1), *cur = D + (size_t)s * (L + 1);
    int cp = capof(c, s - 1);
    for (int l = 0; l <= L; l++) {
      cur[l] = INFINITY;
      arg[(size_t)(s - 1) * (L + 1) + l] = -1;
      int lo = l - cp > s - 1 ? l - cp : s - 1;
      for (int a = l - 1; a >= lo; a--) {
        if (prev[a] == INFINITY) continue;
        double t = seg(c, s - 1, a, l);
        if (t > B) break; /* costs are >= 0: a longer segment is no shorter */
        double v = prev[a] + t;
        if (v < cur[l]) cur[l] = v, arg[(size_t)(s - 1) * (L + 1) + l] = a;
      }
    }
  }
  return D[(size_t)S * (L + 1) + L];
}

static void trace(const part_ctx *c, const int *arg, int *counts) {
  int l = c->L;
  for (int s = c->S; s >= 1; s--) {
    int a = arg[(size_t)(s - 1) * (c->L + 1) + l];
    counts[s - 1] = l - a;
    l = a;
  }
}

static ts_status dp_exact(const part_ctx *c, int *counts, bool prune) {
  int S = c->S, L = c->L;
  size_t ncand = 0;
  for (int s = 0; s < S; s++) ncand += (size_t)L * (L + 1) / 2;
  double *cand = malloc(ncand * sizeof *cand);
  double *D = malloc((size_t)(S + 1) * (L + 1) * sizeof *D);
  int *arg = malloc((size_t)S * (L + 1) * sizeof *arg);
  int *tmp = malloc((size_t)S * sizeof *tmp);
  if (!cand || !D || !arg || !tmp) {
    free(cand), free(D), free(arg), free(tmp);
    return ts_error(TS_ERR_OOM, "out of memory in the DP partitioner (%d stages, %d layers)", S, L);
  }
  size_t k = 0;
  for (int s = 0; s < S; s++)
    for (int a = 0; a < L; a++)
      for (int b = a + 1; b <= L; b++) cand[k++] = seg(c, s, a, b);
  qsort(cand, k, sizeof *cand, ts_cmp_double);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (u == 0 || cand[i] != cand[u - 1]) cand[u++] = cand[i];
  double lb = min_sum(c, INFINITY, D, arg);
  ts_status st = TS_OK;
  if (lb == INFINITY) {
    st = TS_ERR_INFEASIBLE;
  } else {
    /* the least feasible bottleneck (min-max optimum), by bisection over the candidates */
    size_t lo = 0, hi = u - 1;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (min_sum(c, cand[mid], D, arg) < INFINITY) hi = mid;
      else lo = mid + 1;
    }
    double best = INFINITY;
    for (size_t i = lo; i < u; i++) {
      if (prune && (c->m - 1) * cand[i] + lb >= best) break; /* no larger bottleneck can win */
      if (min_sum(c, cand[i], D, arg) == INFINITY) continue;
      trace(c, arg, tmp);
      double J = objective(c, tmp); /* its true maximum may lie below cand[i] */
      if (J < best) best = J, memcpy(counts, tmp, (size_t)S * sizeof *tmp);
    }
  }
  free(cand), free(D), free(arg), free(tmp);
  if (st == TS_ERR_INFEASIBLE) return ts_error(st, "no split of %d layers into %d stages fits the memory limits", L, S);
  return st;
}

/* ---- brute force ---- */

static void brute_rec(const part_ctx *c, int s, int left, int *cur, int *best, double *bestJ) {
  if (s == c->S - 1) {
    if (left < 1 || left > capof(c, s)) return;
    cur[s] = left;
    double J = objective(c, cur);
    if (J < *bestJ) *bestJ = J, memcpy(best, cur, (size_t)c->S * sizeof *cur);
    return;
  }
  int mx = left - (c->S - 1 - s);
  if (mx > capof(c, s)) mx = capof(c, s);
  for (int k = 1; k <= mx; k++) {
    cur[s] = k;
    brute_rec(c, s + 1, left - k, cur, best, bestJ);
  }
}

static ts_status brute(const part_ctx *c, int *counts) {
  /* C(L-1, S-1) compositions */
  double n = 1;
  for (int i = 1; i <= c->S - 1; i++) n = n * (c->L - c->S + i) / i;
  if (n > 1e8)
    return ts_error(TS_ERR_TIMEOUT, "brute force over %.3g splits of %d layers into %d stages: over the 1e8 limit", n,
                    c->L, c->S);
  int *cur = malloc((size_t)c->S * sizeof *cur);
  if (!cur) return ts_error(TS_ERR_OOM, "out of memory in the brute-force partitioner");
  double bestJ = INFINITY;
  brute_rec(c, 0, c->L, cur, counts, &bestJ);
  free(cur);
  if (bestJ == INFINITY)
    return ts_error(TS_ERR_INFEASIBLE, "no split of %d layers into %d stages fits the memory limits", c->L, c->S);
  return TS_OK;
}

static ts_status partition(ts_p3_partitioner method, int S, int L, const double *cost, const double *fixed,
                           const int *max_layers, int m, int *counts, double *objective_out, bool unpruned);

ts_status ts_p3_partition(ts_p3_partitioner method, int S, int L, const double *cost, const double *fixed,
                          const int *max_layers, int m, int *counts, double *objective_out) {
  return partition(method, S, L, cost, fixed, max_layers, m, counts, objective_out, false);
}

ts_status ts__p3_partition_dp_unpruned(int S, int L, const double *cost, const double *fixed, const int *max_layers, int m,
                                       int *counts, double *objective) {
  return partition(TS_P3_DP, S, L, cost, fixed, max_layers, m, counts, objective, true);
}

static ts_status partition(ts_p3_partitioner method, int S, int L, const double *cost, const double *fixed,
                           const int *max_layers, int m, int *counts, double *objective_out, bool unpruned) {
  if (!cost || !fixed || !counts) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_partition: NULL argument");
  if (S < 1 || L < S) return ts_error(TS_ERR_INVALID_ARG, "cannot split %d layers into %d non-empty stages", L, S);
  if (m < 1) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_partition: %d micro-batches", m);
  for (int s = 0; s < S; s++)
    if (!(fixed[s] >= 0 && isfinite(fixed[s]))) return ts_error(TS_ERR_INVALID_ARG, "stage %d: fixed time %g", s, fixed[s]);
  for (size_t i = 0; i < (size_t)S * L; i++)
    if (!(cost[i] >= 0 && isfinite(cost[i])))
      return ts_error(TS_ERR_INVALID_ARG, "stage %zu layer %zu: cost %g", i / L, i % L, cost[i]);
  int64_t room = 0;
  for (int s = 0; s < S; s++) {
    int cp = max_layers ? max_layers[s] : L;
    if (cp < 1)
      return ts_error(TS_ERR_INFEASIBLE, "stage %d cannot hold a single layer in memory", s);
    room += cp;
  }
  if (room < L)
    return ts_error(TS_ERR_INFEASIBLE, "the %d stages hold at most %lld of the %d layers in memory", S, (long long)room, L);
  part_ctx c = {S, L, m, fixed, max_layers, NULL, NULL, unpruned};
  c.pre = malloc((size_t)S * (L + 1) * sizeof *c.pre);
  c.scratch = malloc((size_t)S * sizeof *c.scratch);
  if (!c.pre || !c.scratch) {
    free(c.pre), free(c.scratch);
    return ts_error(TS_ERR_OOM, "out of memory in the partitioner");
  }
  for (int s = 0; s < S; s++) {
    double *p = c.pre + (size_t)s * (L + 1);
    p[0] = 0;
    for (int l = 0; l < L; l++) p[l + 1] = p[l] + cost[(size_t)s * L + l];
  }
  ts_status st;
  switch (method) {
    case TS_P3_GREEDY: st = greedy(&c, counts); break;
    case TS_P3_DP: st = dp_exact(&c, counts, !c.unpruned); break;
    case TS_P3_BRUTE: st = brute(&c, counts); break;
    default: st = ts_error(TS_ERR_INVALID_ARG, "unknown partitioner %d", (int)method);
  }
  if (st == TS_OK && objective_out) *objective_out = objective(&c, counts);
  free(c.pre), free(c.scratch);
  return st;
}
