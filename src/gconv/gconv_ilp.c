/* ILP improvement of a partition assignment over CBC. The full assignment problem (every output
 * to every partition, a binary per partition x input for the unions) has tens of thousands of
 * binaries on a CondenseNet layer (512 outputs, 1936 inputs, ~100 partitions): far beyond what
 * CBC proves in a planning budget. So it is solved by neighbourhoods: G partitions at a time
 * (G = 2 by default), their members and sizes fixed, an exact ILP re-deals those members:
 *
 *   x[i][g] in {0,1}   member i goes to partition g          sum_g x[i][g] = 1,  sum_i x[i][g] = size_g
 *   y[g][c] in {0,1}   input c is in partition g's union     sum_{i : conn(i, c)} x[i][g] <= deg(c) y[g][c]
 *   minimize sum_g slope_g * sum_c y[g][c]
 *
 * slope_g = the cost model's marginal time of one more union input for a partition of size_g
 * (a partition's time is close to linear in its union at fixed size). Channels read by the same
 * members form one class (one y per class and partition); the linking rows are per member
 * (x[i][g] <= y[g][k], the tight form) unless that exceeds LINK_ROWS_MAX rows, then per class
 * (the aggregated form above, G x classes rows); CBC starts from the current
 * assignment (warm start) and keeps it when it finds nothing better, and every result is accepted
 * only when the exact predicted cost (the full model, not the slopes) goes down.
 * Neighbourhoods: first windows of G consecutive partitions in the greedy order (neighbours in
 * the reordering), then each partition with the G-1 partitions whose unions overlap its own most;
 * passes repeat until none improves or the time limit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gconv/gconv_internal.h"
#include "tessera/measure.h"
#include "tessera/solve.h"

#define MAX_GROUP 4
#define MAX_MEMBERS (MAX_GROUP * TS_GCONV_PROFILE_MAX)
#define LINK_ROWS_MAX 8000

typedef struct state {
  const ts_gconv_layer *l;
  const ts_csr *conn;
  const ts__gconv_rowbits *rb;
  const ts_gconv_cost *m;
  ts__gconv_assign *a;
  int64_t words;
  uint64_t *ubits;   /* [nparts][words] unions */
  int32_t *usize;    /* [nparts] */
  double *cost;      /* [nparts] exact predicted cost */
  int32_t *mem;      /* scratch [cout] */
  int32_t *chan;     /* scratch [cin] channel list */
  int32_t *cidx;     /* scratch [cin] channel -> index in chan or -1 */
  struct chan_class *cls; /* scratch [cin] */
  int *yidx;         /* scratch [cin] */
  uint32_t *stamp;   /* [nparts] changes of each partition so far */
  uint64_t *memo;    /* [2 * nparts] neighbourhood of p (kind) at its last fruitless solve */
} state;

static int64_t popc(const uint64_t *w, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++) c += __builtin_popcountll(w[i]);
  return c;
}

static void recompute(state *S, int32_t p) {
  uint64_t *u = S->ubits + (int64_t)p * S->words;
  memset(u, 0, (size_t)S->words * sizeof(uint64_t));
  int32_t n = 0;
  for (int64_t o = 0; o < S->rb->rows; o++)
    if (S->a->part_of[o] == p) {
      const uint64_t *r = S->rb->bits + o * S->words;
      for (int64_t w = 0; w < S->words; w++) u[w] |= r[w];
      n++;
    }
  S->usize[p] = (int32_t)popc(u, S->words);
  S->cost[p] = n ? ts_gconv_cost_part(S->m, S->l, n, S->usize[p]) : 0;
}

static double slope(const state *S, int size, int32_t u) {
  int32_t lo = u > 4 ? u - 4 : 1, hi = u + 4;
  return (ts_gconv_cost_part(S->m, S->l, size, hi) - ts_gconv_cost_part(S->m, S->l, size, lo)) / (hi - lo);
}

/* Channel classes of a neighbourhood: channels whose member sets (which of the nm members read
 * them) are equal are interchangeable, so the ILP has one union variable per (partition, class)
 * weighted by the class size. Classes read by every member are in every union whatever the
 * assignment (a constant, dropped); classes read by one member need no variable (the member's
 * own x carries their cost). */
typedef struct chan_class chan_class;
struct chan_class {
  uint64_t set[2]; /* members (nm <= 128) */
  int count;       /* channels in the class */
  int nmem;        /* members in the set */
};

static int class_cmp(const void *a, const void *b) {
  const chan_class *x = a, *y = b;
  if (x->set[1] != y->set[1]) return x->set[1] < y->set[1] ? -1 : 1;
  return x->set[0] < y->set[0] ? -1 : x->set[0] > y->set[0];
}

/* Classes of the channels of members mem[0..nm) into cls (capacity cin); returns their count. */
static int channel_classes(state *S, int nm, chan_class *cls) {
  const ts_csr *conn = S->conn;
  int nc = 0;
  for (int i = 0; i < nm; i++)
    for (int64_t q = conn->rowptr[S->mem[i]]; q < conn->rowptr[S->mem[i] + 1]; q++) {
      const int32_t c = conn->col[q];
      if (S->cidx[c] < 0) {
        S->cidx[c] = nc, S->chan[nc] = c;
        memset(&cls[nc], 0, sizeof cls[nc]);
        nc++;
      }
      cls[S->cidx[c]].set[i / 64] |= (uint64_t)1 << (i % 64);
    }
  for (int c = 0; c < nc; c++) S->cidx[S->chan[c]] = -1;
  qsort(cls, (size_t)nc, sizeof *cls, class_cmp);
  int n = 0;
  for (int c = 0; c < nc; c++) {
    if (n > 0 && class_cmp(&cls[n - 1], &cls[c]) == 0) {
      cls[n - 1].count++;
      continue;
    }
    cls[n] = cls[c];
    cls[n].count = 1;
    cls[n].nmem = __builtin_popcountll(cls[c].set[0]) + __builtin_popcountll(cls[c].set[1]);
    n++;
  }
  return n;
}

static bool in_set(const chan_class *k, int i) { return (k->set[i / 64] >> (i % 64)) & 1; }

/* Exact ILP over the partitions ps[0..G) (their members re-dealt at fixed sizes):
 *   x[i][g]: member i in partition g;  y[g][k]: class k in partition g's union (|k| >= 2)
 *   sum_g x[i][g] = 1;  sum_i x[i][g] = size_g;  x[i][g] <= y[g][k] for i in k
 *   minimize sum_g slope_g (sum_k |k| y[g][k] + sum_i priv_i x[i][g])
 * Returns TS_OK with *better set when a cheaper assignment (exact cost) was applied. */
static ts_status solve_group(state *S, const int32_t *ps, int G, double time_limit, bool *better) {
  *better = false;
  int nm = 0;
  for (int64_t o = 0; o < S->rb->rows; o++)
    for (int g = 0; g < G; g++)
      if (S->a->part_of[o] == ps[g]) S->mem[nm++] = (int32_t)o;
  chan_class *cls = S->cls;
  const int ncl = channel_classes(S, nm, cls);
  double old_cost = 0, priv[MAX_MEMBERS];
  bool equal_sizes = true;
  for (int g = 0; g < G; g++) old_cost += S->cost[ps[g]], equal_sizes &= S->a->size[ps[g]] == S->a->size[ps[0]];
  for (int i = 0; i < nm; i++) priv[i] = 0;
  int *yidx = S->yidx; /* class -> first y variable (G of them), or -1 */
  for (int k = 0; k < ncl; k++) {
    yidx[k] = -1;
    if (cls[k].nmem == 1)
      for (int i = 0; i < nm; i++)
        if (in_set(&cls[k], i)) priv[i] += cls[k].count;
  }
  /* slopes relative to the first partition's: coefficients near 1 (seconds per input, ~1e-8,
   * fall below CBC's absolute tolerances and every solution looks optimal) */
  double sl[MAX_GROUP];
  for (int g = 0; g < G; g++) sl[g] = slope(S, S->a->size[ps[g]], S->usize[ps[g]]);
  for (int g = G - 1; g >= 0; g--) sl[g] /= sl[0] > 0 ? sl[0] : 1;
  ts_ilp *ilp = NULL;
  ts_status s = ts_ilp_create(&ilp);
  for (int i = 0; s == TS_OK && i < nm; i++)
    for (int g = 0; s == TS_OK && g < G; g++) s = ts_ilp_add_binary(ilp, NULL, sl[g] * priv[i], NULL);
  for (int k = 0; s == TS_OK && k < ncl; k++) {
    if (cls[k].nmem < 2 || cls[k].nmem == nm) continue;
    yidx[k] = ts_ilp_num_vars(ilp);
    for (int g = 0; s == TS_OK && g < G; g++) s = ts_ilp_add_binary(ilp, NULL, sl[g] * cls[k].count, NULL);
  }
  int vars[MAX_MEMBERS + 1];
  double coef[MAX_MEMBERS + 1];
  for (int i = 0; s == TS_OK && i < nm; i++) {
    for (int g = 0; g < G; g++) vars[g] = i * G + g, coef[g] = 1;
    s = ts_ilp_add_row(ilp, NULL, G, vars, coef, TS_ILP_EQ, 1, NULL);
  }
  for (int g = 0; s == TS_OK && g < G; g++) {
    for (int i = 0; i < nm; i++) vars[i] = i * G + g, coef[i] = 1;
    s = ts_ilp_add_row(ilp, NULL, nm, vars, coef, TS_ILP_EQ, S->a->size[ps[g]], NULL);
  }
  /* linking rows: one per (member, class, partition) when that stays small (the tight form);
   * past LINK_ROWS_MAX (e.g. random connectivity at 50%: ~1000 classes x 50 members x 2 = 50k
   * rows, whose root LP alone runs for seconds, past any time limit CBC can enforce) one
   * aggregated row per (class, partition): sum_{i in k} x[i][g] <= nmem_k y[g][k] */
  int64_t link_rows = 0;
  for (int k = 0; k < ncl; k++) link_rows += yidx[k] >= 0 ? (int64_t)cls[k].nmem * G : 0;
  if (link_rows <= LINK_ROWS_MAX) {
    coef[0] = 1, coef[1] = -1;
    for (int k = 0; s == TS_OK && k < ncl; k++)
      for (int i = 0; yidx[k] >= 0 && s == TS_OK && i < nm; i++)
        for (int g = 0; in_set(&cls[k], i) && s == TS_OK && g < G; g++) {
          vars[0] = i * G + g, vars[1] = yidx[k] + g;
          s = ts_ilp_add_row(ilp, NULL, 2, vars, coef, TS_ILP_LE, 0, NULL);
        }
  } else {
    for (int k = 0; s == TS_OK && k < ncl; k++)
      for (int g = 0; yidx[k] >= 0 && s == TS_OK && g < G; g++) {
        int n = 0;
        for (int i = 0; i < nm; i++)
          if (in_set(&cls[k], i)) vars[n] = i * G + g, coef[n] = 1, n++;
        vars[n] = yidx[k] + g, coef[n] = -cls[k].nmem;
        s = ts_ilp_add_row(ilp, NULL, n + 1, vars, coef, TS_ILP_LE, 0, NULL);
      }
  }
  if (s == TS_OK && equal_sizes) { /* interchangeable partitions: member 0 goes to the first */
    vars[0] = 0, coef[0] = 1;
    s = ts_ilp_add_row(ilp, NULL, 1, vars, coef, TS_ILP_EQ, 1, NULL);
  }
  /* warm start: the current assignment, relabelled so member 0 sits in partition 0 */
  double *x0 = s == TS_OK ? ts_calloc((size_t)ts_ilp_num_vars(ilp), sizeof(double)) : NULL;
  if (s == TS_OK && !x0) s = TS_ERR_OOM;
  int perm[MAX_GROUP];
  for (int g = 0; g < G; g++) perm[g] = g;
  if (s == TS_OK && equal_sizes)
    for (int g = 0; g < G; g++)
      if (S->a->part_of[S->mem[0]] == ps[g]) perm[g] = 0, perm[0] = g;
  for (int i = 0; s == TS_OK && i < nm; i++)
    for (int g = 0; g < G; g++)
      if (S->a->part_of[S->mem[i]] == ps[perm[g]]) {
        x0[i * G + g] = 1;
        for (int k = 0; k < ncl; k++)
          if (yidx[k] >= 0 && in_set(&cls[k], i)) x0[yidx[k] + g] = 1;
      }
  if (s == TS_OK) s = ts_ilp_set_warm_start(ilp, x0, ts_ilp_num_vars(ilp));
  ts_ilp_result res;
  memset(&res, 0, sizeof res);
  if (s == TS_OK) {
    ts_ilp_options opt;
    ts_ilp_options_default(&opt);
    opt.time_limit = time_limit;
    opt.rel_gap = 1e-4;
    ts_status q = ts_ilp_solve(ilp, &opt, &res);
    if (q == TS_OK && res.x && !res.from_warm_start) {
      /* apply tentatively, keep only if the exact cost drops */
      int32_t save[MAX_MEMBERS];
      for (int i = 0; i < nm; i++) save[i] = S->a->part_of[S->mem[i]];
      for (int i = 0; i < nm; i++)
        for (int g = 0; g < G; g++)
          if (res.x[i * G + g] > 0.5) S->a->part_of[S->mem[i]] = ps[perm[g]];
      double new_cost = 0;
      for (int g = 0; g < G; g++) recompute(S, ps[g]), new_cost += S->cost[ps[g]];
      if (new_cost < old_cost * (1 - 1e-9)) {
        *better = true;
        for (int g = 0; g < G; g++) S->stamp[ps[g]]++;
      } else {
        for (int i = 0; i < nm; i++) S->a->part_of[S->mem[i]] = save[i];
        for (int g = 0; g < G; g++) recompute(S, ps[g]);
      }
    } else if (q == TS_ERR_OOM) {
      s = q; /* out of memory is the caller's to know: the plan must not depend on which allocation failed */
    } else if (q != TS_OK) {
      ts_error_clear(); /* a failed neighbourhood keeps the current assignment: the greedy fallback */
    }
  }
  ts_ilp_result_free(&res);
  ts_ilp_destroy(ilp);
  ts_free(x0);
  return s;
}

/* The G-1 partitions whose unions share the most inputs with p's (q != p), into out. */
static int partners(const state *S, int32_t p, int G, int32_t *out) {
  int n = 0;
  const int cap = G - 1;
  int64_t best[MAX_GROUP];
  const uint64_t *up = S->ubits + (int64_t)p * S->words;
  for (int32_t q = 0; q < S->a->nparts; q++) {
    if (q == p) continue;
    const uint64_t *uq = S->ubits + (int64_t)q * S->words;
    int64_t ov = 0;
    for (int64_t w = 0; w < S->words; w++) ov += __builtin_popcountll(up[w] & uq[w]);
    if (n == cap && ov <= best[n - 1]) continue;
    int k = n < cap ? n++ : cap - 1; /* insertion point: the end, or the last (dropped) entry */
    while (k > 0 && best[k - 1] < ov) best[k] = best[k - 1], out[k] = out[k - 1], k--;
    best[k] = ov, out[k] = q;
  }
  return n;
}

ts_status ts__gconv_ilp_improve(const ts_gconv_layer *l, const ts_csr *conn, const ts__gconv_rowbits *rb,
                                const ts_gconv_cost *m, int group, double time_limit, ts__gconv_assign *a,
                                ts__gconv_ilp_stats *st) {
  memset(st, 0, sizeof *st);
  const double t0 = ts_now();
  if (group < 2) group = 2;
  if (group > MAX_GROUP) group = MAX_GROUP;
  if (group > a->nparts) group = a->nparts;
  if (group < 2) return TS_OK;
  for (int32_t p = 0; p < a->nparts; p++)
    if (a->size[p] > TS_GCONV_PROFILE_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "gconv ILP: partition %d has %d rows (at most %d)", p, a->size[p],
                      TS_GCONV_PROFILE_MAX);
  state S;
  memset(&S, 0, sizeof S);
  S.l = l, S.conn = conn, S.rb = rb, S.m = m, S.a = a, S.words = rb->words;
  S.ubits = ts_calloc((size_t)a->nparts * (size_t)(rb->words ? rb->words : 1), sizeof(uint64_t));
  S.usize = ts_malloc((size_t)a->nparts * sizeof(int32_t));
  S.cost = ts_malloc((size_t)a->nparts * sizeof(double));
  S.mem = ts_malloc((size_t)rb->rows * sizeof(int32_t));
  S.chan = ts_malloc((size_t)conn->cols * sizeof(int32_t));
  S.cidx = ts_malloc((size_t)conn->cols * sizeof(int32_t));
  S.cls = ts_malloc((size_t)conn->cols * sizeof(chan_class));
  S.yidx = ts_malloc((size_t)conn->cols * sizeof(int));
  S.stamp = ts_calloc((size_t)a->nparts, sizeof(uint32_t));
  S.memo = ts_calloc((size_t)a->nparts * 2, sizeof(uint64_t));
  ts_status s = S.ubits && S.usize && S.cost && S.mem && S.chan && S.cidx && S.cls && S.yidx && S.stamp && S.memo ? TS_OK : TS_ERR_OOM;
  for (int64_t c = 0; s == TS_OK && c < conn->cols; c++) S.cidx[c] = -1;
  for (int32_t p = 0; s == TS_OK && p < a->nparts; p++) recompute(&S, p);
  bool any = true;
  double last_solve = 0;
  for (int pass = 0; s == TS_OK && any && !st->timeout; pass++) {
    any = false;
    /* windows of consecutive partitions, then best-overlap partners */
    for (int kind = 0; kind < 2 && s == TS_OK && !st->timeout; kind++)
      for (int32_t p = 0; s == TS_OK && p < a->nparts; p++) {
        int32_t ps[MAX_GROUP];
        int G = group;
        if (kind == 0) {
          if (p + G > a->nparts) break;
          for (int g = 0; g < G; g++) ps[g] = p + g;
        } else {
          ps[0] = p;
          G = 1 + partners(&S, p, group, ps + 1);
          if (G < 2) continue;
        }
        /* a neighbourhood solved before without success, none of its partitions changed since */
        ts_hash kh;
        ts_hash_init(&kh, NULL);
        for (int g = 0; g < G; g++) ts_hash_bytes(&kh, &ps[g], 4), ts_hash_bytes(&kh, &S.stamp[ps[g]], 4);
        const uint64_t key = kh.h;
        if (S.memo[2 * p + kind] == key) continue;
        /* CBC checks its limit only between root passes and nodes, so a solve can overrun it
         * (a large neighbourhood's root LP); stop when the time left is below what the last
         * solve took, instead of starting one that would overrun the planner's limit */
        double left = time_limit - (ts_now() - t0);
        if (left <= 0.005 || left < last_solve) {
          st->timeout = true;
          break;
        }
        bool better;
        const double ts0 = ts_now();
        s = solve_group(&S, ps, G, left < 0.5 ? left : 0.5, &better);
        last_solve = ts_now() - ts0;
        if (last_solve > st->max_solve_s) st->max_solve_s = last_solve;
        st->solves++;
        if (better) st->improved++, any = true;
        else S.memo[2 * p + kind] = key;
      }
  }
  ts_free(S.ubits), ts_free(S.usize), ts_free(S.cost), ts_free(S.mem), ts_free(S.chan), ts_free(S.cidx), ts_free(S.cls), ts_free(S.yidx);
  ts_free(S.stamp), ts_free(S.memo);
  st->ms = (ts_now() - t0) * 1e3;
  return s == TS_ERR_OOM ? ts_error(TS_ERR_OOM, "gconv ILP: out of memory") : s;
}
