/* plan3d search: cluster compositions (under a price limit) x node orders x TP per GPU type x dp
 * x micro-batch size, each split by the partitioner and priced; the fastest plans, Megatron-LM's
 * default as the baseline, and the Pareto front of step time vs dollars per step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan3d/plan3d_estimate.h"
#include "tessera/solve.h"

void ts_p3_search_opts_default(ts_p3_search_opts *o) {
  memset(o, 0, sizeof *o);
  o->top = 10;
  o->partitioner = TS_P3_GREEDY;
  o->per_type_tp = true;
  o->max_orders = 64;
}

void ts_p3_search_result_free(ts_p3_search_result *r) {
  if (!r) return;
  free(r->plans);
  free(r->pareto);
  memset(r, 0, sizeof *r);
}

/* Next distinct permutation of a[0..n) in lexicographic order; false after the last. */
static bool next_perm(int *a, int n) {
  int i = n - 2;
  while (i >= 0 && a[i] >= a[i + 1]) i--;
  if (i < 0) return false;
  int j = n - 1;
  while (a[j] <= a[i]) j--;
  int t = a[i];
  a[i] = a[j], a[j] = t;
  for (int l = i + 1, r = n - 1; l < r; l++, r--) t = a[l], a[l] = a[r], a[r] = t;
  return true;
}

/* Distinct orders of a multiset of node types: n! / prod(count!) (as a double). */
static double n_orders(const int *counts, int ntypes) {
  double v = 1;
  int n = 0;
  for (int k = 0; k < ntypes; k++)
    for (int i = 1; i <= counts[k]; i++) v = v * (++n) / i;
  return v;
}

typedef struct search_state {
  const ts_p3_search_opts *o;
  ts_p3_search_result *r;
  ts_p3_plan *top;  /* [o->top], sorted by step */
  int ntop;
  ts_p3_plan *tmp;
  ts_p3_plan *comp_best; /* best plan of the composition in progress */
  bool comp_has;
  p3_scratch w;
} search_state;

static void keep_top(search_state *s, const ts_p3_plan *p) {
  int K = s->o->top;
  if (s->ntop == K && p->step >= s->top[K - 1].step) return;
  int i = s->ntop < K ? s->ntop++ : K - 1;
  while (i > 0 && s->top[i - 1].step > p->step) {
    s->top[i] = s->top[i - 1];
    i--;
  }
  s->top[i] = *p;
}

/* All configurations of one node order. */
static ts_status search_order(search_state *S, const p3_ctx *x, const int *tp_opts, const int *ntp, bool full_cluster) {
  const ts_p3_model *m = x->m;
  const ts_p3_cluster *c = x->c;
  const ts_p3_search_opts *o = S->o;
  int present[TS_P3_MAX_TYPES], np = 0;
  for (int k = 0; k < c->ntypes; k++)
    if (x->node_counts[k]) present[np++] = k;
  /* odometer over the TP degree of each present type (one shared degree when !per_type_tp) */
  int idx[TS_P3_MAX_TYPES] = {0};
  for (;;) {
    int tp[TS_P3_MAX_TYPES];
    for (int k = 0; k < c->ntypes; k++) tp[k] = 1;
    bool uniform_ok = true;
    for (int i = 0; i < np; i++) {
      int k = present[i];
      tp[k] = tp_opts[k * 32 + idx[o->per_type_tp ? i : 0]];
      if (!o->per_type_tp && idx[0] >= ntp[k]) uniform_ok = false;
    }
    if (!o->per_type_tp) { /* the shared degree must be listed for every present type */
      int want = tp_opts[present[0] * 32 + idx[0]];
      for (int i = 0; i < np && uniform_ok; i++) {
        int k = present[i];
        bool has = false;
        for (int j = 0; j < ntp[k]; j++) has |= tp_opts[k * 32 + j] == want;
        uniform_ok = has;
        tp[k] = want;
      }
    }
    if (uniform_ok) {
      for (int dp = 1; dp <= x->ngpus && dp <= m->global_batch; dp++) {
        if (o->dp > 0 && dp != o->dp) continue;
        if (m->global_batch % dp) continue;
        p3_stage_layout ls[TS_P3_MAX_STAGES];
        int pp;
        char why[320];
        if (ts__p3_layout(x, dp, tp, ls, &pp, why, sizeof why) != TS_OK) continue; /* not a layout */
        if (o->pp > 0 && pp != o->pp) continue;
        if (pp > m->layers) continue;
        for (int mbs = 1; mbs <= m->global_batch / dp; mbs++) {
          if ((m->global_batch / dp) % mbs) continue;
          if (o->mbs > 0 && mbs != o->mbs) continue;
          S->r->evaluated++;
          ts_status st = ts__p3_price(x, dp, ls, pp, mbs, NULL, o->partitioner, &S->w, S->tmp, why, sizeof why);
          if (st == TS_ERR_NOT_FOUND) return ts_error(st, "%s", why);
          if (st == TS_ERR_OOM) return st;
          if (st != TS_OK) {
            if (!strncmp(why, "out of memory", 13)) {
              if (!S->r->rejected_memory) snprintf(S->r->first_rejection, sizeof S->r->first_rejection, "%s", why);
              S->r->rejected_memory++;
            } else {
              S->r->rejected_other++;
            }
            continue;
          }
          S->tmp->partitioner = o->partitioner;
          if (full_cluster || o->budget_per_hour > 0) keep_top(S, S->tmp);
          if (!S->comp_has || S->tmp->step < S->comp_best->step) *S->comp_best = *S->tmp, S->comp_has = true;
        }
      }
    }
    /* advance the odometer */
    int i = 0;
    int nidx = o->per_type_tp ? np : 1;
    for (; i < nidx; i++) {
      int lim = o->per_type_tp ? ntp[present[i]] : ntp[present[0]];
      if (++idx[i] < lim) break;
      idx[i] = 0;
    }
    if (i == nidx) break;
  }
  return TS_OK;
}

/* The node orders of one composition: every distinct order when there are at most max_orders,
 * else the type-contiguous ones (types in each permutation of the present types). */
static ts_status search_composition(search_state *S, const ts_p3_model *m, const ts_p3_cluster *c,
                                    const ts_p3_profile *p, const int *counts, const int *tp_opts, const int *ntp,
                                    bool full, ts_progress *prog, int64_t *done) {
  int order[TS_P3_MAX_NODES], n = 0;
  for (int k = 0; k < c->ntypes; k++)
    for (int i = 0; i < counts[k]; i++) order[n++] = k;
  S->comp_has = false;
  bool all = n_orders(counts, c->ntypes) <= S->o->max_orders;
  int present[TS_P3_MAX_TYPES], np = 0;
  for (int k = 0; k < c->ntypes; k++)
    if (counts[k]) present[np++] = k;
  int tried = 0;
  for (;;) {
    p3_ctx x;
    TS_TRY(ts__p3_ctx_init(&x, m, c, p, order, n));
    ts_status st = search_order(S, &x, tp_opts, ntp, full);
    ts__p3_ctx_free(&x);
    if (st != TS_OK) return st;
    tried++;
    if (all) {
      if (!next_perm(order, n)) break;
    } else {
      if (tried >= S->o->max_orders || !next_perm(present, np)) break;
      n = 0;
      for (int i = 0; i < np; i++)
        for (int j = 0; j < counts[present[i]]; j++) order[n++] = present[i];
    }
  }
  if (prog) ts_progress_update(prog, ++*done);
  return TS_OK;
}

/* Megatron-LM's default on the full cluster in file order: one TP degree, the layers split evenly,
 * the best dp and micro-batch. */
static void baseline(search_state *S, const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p,
                     const int *tp_opts, const int *ntp) {
  int order[TS_P3_MAX_NODES];
  int n = ts__p3_full_order(c, order);
  p3_ctx x;
  if (ts__p3_ctx_init(&x, m, c, p, order, n) != TS_OK) return;
  int first = -1;
  for (int k = 0; k < c->ntypes; k++)
    if (c->types[k].count) {
      first = k;
      break;
    }
  for (int j = 0; first >= 0 && j < ntp[first]; j++) {
    int t = tp_opts[first * 32 + j];
    bool everywhere = true;
    int tp[TS_P3_MAX_TYPES];
    for (int k = 0; k < c->ntypes; k++) {
      tp[k] = t;
      if (!c->types[k].count) continue;
      bool has = false;
      for (int i = 0; i < ntp[k]; i++) has |= tp_opts[k * 32 + i] == t;
      everywhere &= has;
    }
    if (!everywhere) continue;
    for (int dp = 1; dp <= x.ngpus && dp <= m->global_batch; dp++) {
      if (m->global_batch % dp) continue;
      p3_stage_layout ls[TS_P3_MAX_STAGES];
      int pp;
      char why[320];
      if (ts__p3_layout(&x, dp, tp, ls, &pp, why, sizeof why) != TS_OK) continue;
      if (pp > m->layers || m->layers % pp) continue; /* Megatron needs layers % pp == 0 */
      int split[TS_P3_MAX_STAGES];
      for (int s = 0; s < pp; s++) split[s] = m->layers / pp;
      for (int mbs = 1; mbs <= m->global_batch / dp; mbs++) {
        if ((m->global_batch / dp) % mbs) continue;
        if (ts__p3_price(&x, dp, ls, pp, mbs, split, S->o->partitioner, &S->w, S->tmp, why, sizeof why) != TS_OK)
          continue;
        if (!S->r->has_baseline || S->tmp->step < S->r->baseline.step) S->r->baseline = *S->tmp, S->r->has_baseline = true;
      }
    }
  }
  ts__p3_ctx_free(&x);
}

ts_status ts_p3_search(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p,
                       const ts_p3_search_opts *opts, ts_p3_search_result *r) {
  if (!r) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_search: NULL result");
  memset(r, 0, sizeof *r);
  TS_TRY(ts__p3_check_inputs(m, c, p));
  ts_p3_search_opts o;
  if (opts) o = *opts;
  else ts_p3_search_opts_default(&o);
  if (o.top < 1) o.top = 1;
  if (o.max_orders < 1) o.max_orders = 1;
  double t0 = ts_now();
  /* TP degrees per type: profiled, dividing the node's GPUs, the heads and the hidden size */
  int tp_opts[TS_P3_MAX_TYPES * 32], ntp[TS_P3_MAX_TYPES] = {0};
  for (int k = 0; k < c->ntypes; k++) {
    int tps[32], n;
    ts_p3_profile_tps(p, c->types[k].gpu, tps, 32, &n);
    if (!n)
      return ts_error(TS_ERR_NOT_FOUND, "profile: no entry for gpu '%s' (node type '%s' of cluster '%s')",
                      c->types[k].gpu, c->types[k].name, c->name);
    for (int i = 0; i < n; i++) {
      int t = tps[i];
      if (c->types[k].gpus_per_node % t || m->heads % t || m->hidden % t) continue;
      tp_opts[k * 32 + ntp[k]++] = t;
    }
    if (!ntp[k])
      return ts_error(TS_ERR_INFEASIBLE,
                      "profile: no TP degree listed for gpu '%s' divides its node's %d GPUs and the model's %d heads",
                      c->types[k].gpu, c->types[k].gpus_per_node, m->heads);
  }
  search_state S = {0};
  S.o = &o, S.r = r;
  S.top = malloc((size_t)o.top * sizeof *S.top);
  S.tmp = malloc(sizeof *S.tmp);
  S.comp_best = malloc(sizeof *S.comp_best);
  ts_p3_plan *front = NULL;
  int nfront = 0, capfront = 0;
  ts_status st = !S.top || !S.tmp || !S.comp_best ? ts_error(TS_ERR_OOM, "out of memory for the plan3d search") : TS_OK;
  if (st == TS_OK) st = ts__p3_scratch_init(&S.w, m->layers, m->global_batch);
  /* compositions: the full cluster, or every sub-cluster within the price limit */
  int full[TS_P3_MAX_TYPES], cur[TS_P3_MAX_TYPES] = {0};
  int64_t ncomp = 1;
  for (int k = 0; k < c->ntypes; k++) full[k] = c->types[k].count, ncomp *= full[k] + 1;
  ts_progress prog, *pg = NULL;
  int64_t done = 0;
  if (st == TS_OK && o.progress) {
    ts_progress_begin(&prog, "plan3d search (cluster compositions)", o.budget_per_hour > 0 ? ncomp : 1);
    pg = &prog;
  }
  if (st == TS_OK && o.budget_per_hour <= 0) {
    st = search_composition(&S, m, c, p, full, tp_opts, ntp, true, pg, &done);
    if (st == TS_OK && S.comp_has) r->full_best = *S.comp_best, r->has_full = true;
    if (st == TS_OK && S.comp_has) {
      front = malloc(sizeof *front);
      if (!front) st = ts_error(TS_ERR_OOM, "out of memory for the Pareto front");
      else front[nfront++] = *S.comp_best;
    }
    r->compositions = 1;
  } else if (st == TS_OK) {
    for (;;) {
      /* next composition (odometer over 0..count per type) */
      int k = 0;
      for (; k < c->ntypes; k++) {
        if (++cur[k] <= full[k]) break;
        cur[k] = 0;
      }
      if (k == c->ntypes) break;
      double price = 0;
      int nodes = 0;
      for (int t = 0; t < c->ntypes; t++) price += cur[t] * c->types[t].price_per_hour, nodes += cur[t];
      if (pg) ts_progress_update(pg, ++done);
      if (price > o.budget_per_hour * (1 + 1e-12) || nodes == 0) continue;
      r->compositions++;
      bool is_full = !memcmp(cur, full, (size_t)c->ntypes * sizeof *cur);
      st = search_composition(&S, m, c, p, cur, tp_opts, ntp, is_full, NULL, &done);
      if (st != TS_OK) break;
      if (!S.comp_has) continue;
      if (is_full) r->full_best = *S.comp_best, r->has_full = true;
      if (nfront == capfront) {
        capfront = capfront ? 2 * capfront : 16;
        ts_p3_plan *f = realloc(front, (size_t)capfront * sizeof *f);
        if (!f) {
          st = ts_error(TS_ERR_OOM, "out of memory for the Pareto front");
          break;
        }
        front = f;
      }
      front[nfront++] = *S.comp_best;
    }
  }
  if (pg) ts_progress_end(pg);
  if (st == TS_OK) baseline(&S, m, c, p, tp_opts, ntp);
  /* the Pareto front of (step, $ per step) over the compositions' best plans */
  if (st == TS_OK && nfront) {
    double *f = malloc((size_t)nfront * 2 * sizeof *f);
    int *idx = malloc((size_t)nfront * sizeof *idx);
    r->pareto = malloc((size_t)nfront * sizeof *r->pareto);
    if (!f || !idx || !r->pareto) {
      st = ts_error(TS_ERR_OOM, "out of memory for the Pareto front");
    } else {
      for (int i = 0; i < nfront; i++) f[2 * i] = front[i].step, f[2 * i + 1] = front[i].usd_per_step;
      int cnt = 0;
      st = ts_pareto_front(f, nfront, 2, idx, &cnt);
      for (int i = 0; st == TS_OK && i < cnt; i++) {
        int j = i; /* insertion by step */
        r->pareto[j] = front[idx[i]];
        while (j > 0 && r->pareto[j - 1].step > r->pareto[j].step) {
          ts_p3_plan t = r->pareto[j];
          r->pareto[j] = r->pareto[j - 1], r->pareto[j - 1] = t;
          j--;
        }
      }
      r->npareto = cnt;
    }
    free(f), free(idx);
  }
  free(front);
  free(S.tmp), free(S.comp_best);
  ts__p3_scratch_free(&S.w);
  r->seconds = ts_now() - t0;
  if (st == TS_OK && S.ntop == 0) {
    char why[sizeof r->first_rejection];
    memcpy(why, r->first_rejection, sizeof why);
    free(S.top);
    ts_p3_search_result_free(r);
    if (why[0]) return ts_error(TS_ERR_INFEASIBLE, "no plan fits: %s", why);
    return ts_error(TS_ERR_INFEASIBLE, "no configuration of model '%s' runs on cluster '%s'", m->name, c->name);
  }
  if (st != TS_OK) {
    free(S.top);
    ts_p3_search_result_free(r);
    return st;
  }
  r->plans = S.top;
  r->nplans = S.ntop;
  return TS_OK;
}
