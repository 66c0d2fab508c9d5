/* The scheduler's core: candidates, panel configurations, the per-block greedy (+ LPT), the
 * evaluation of any solution, and the driver that runs the ILP stages (sched_ilp.c) under one
 * time limit; formulation in tessera/attn_sched.h. Costs are scaled so the lower bound is 1000
 * inside the models (CBC's tolerances are absolute). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_internal.h"

const char *ts_attn_solver_name(ts_attn_solver s) { return s == TS_ATTN_SOLVER_ILP ? "ilp" : "greedy"; }

ts_status ts_attn_solver_parse(const char *name, ts_attn_solver *out) {
  if (name && strcmp(name, "greedy") == 0) *out = TS_ATTN_SOLVER_GREEDY;
  else if (name && strcmp(name, "ilp") == 0) *out = TS_ATTN_SOLVER_ILP;
  else return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: unknown solver '%s' (greedy, ilp)", name ? name : "(null)");
  return TS_OK;
}

void ts_attn_sched_opts_default(ts_attn_sched_opts *o) {
  memset(o, 0, sizeof *o);
  o->solver = TS_ATTN_SOLVER_ILP;
  o->blocks = ts_attn_blocks_opts_default();
  o->time_limit = 2.0;
  o->k_tiles = 3;
  o->max_tile_vars = 2000;
  o->tie_break = 1e-4;
  o->rel_gap = 0.002;
  o->heights[0] = 8, o->heights[1] = 16, o->heights[2] = 32;
  o->nheights = 3;
  o->compact_bc = 128;
  o->calibrate_dtype = TS_F32;
  o->calibrate_heads = 1;
  o->guard = true;
  for (int f = 0; f < 5; f++) o->family_scale[f] = 1.0;
}

double ts__sched_config(const ts__sched *S, int64_t p, int h, int *choice) {
  const ts_attn_sched_problem *pb = S->pb;
  double L = ts__sched_base(pb, p) + (h >= 0 ? ts__sched_open(pb, p, h) : 0.0);
  for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++) {
    int64_t i = S->plist[x];
    int c = S->cand[i * S->k];
    double v = pb->cost[i * pb->ntiles + c];
    if (h >= 0 && pb->merge[i * pb->nheights + h] < v) c = pb->ntiles + h, v = pb->merge[i * pb->nheights + h];
    if (choice) choice[i] = c;
    L += v;
  }
  return L;
}

/* Thread loads of a solution; returns the makespan (NAN when a merged piece's height is not its
 * panel's), *total the sum. */
static double eval(const ts__sched *S, const int *tile, const int *height, const int32_t *thread, double *loads,
                   double *total) {
  const ts_attn_sched_problem *pb = S->pb;
  double tot = 0, mk = 0;
  for (int q = 0; q < S->P; q++) loads[q] = 0;
  for (int64_t p = 0; p < pb->npanels; p++) {
    int h = height ? height[p] : -1;
    double L = ts__sched_base(pb, p) + (h >= 0 ? ts__sched_open(pb, p, h) : 0.0);
    if (h < 0 && ts__sched_must(pb, p)) return NAN;
    for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++) {
      int64_t i = S->plist[x];
      if (tile[i] >= pb->ntiles && tile[i] - pb->ntiles != h) return NAN;
      L += ts__sched_choice(pb, i, tile[i]);
    }
    loads[thread[p]] += L, tot += L;
  }
  for (int q = 0; q < S->P; q++) mk = loads[q] > mk ? loads[q] : mk;
  *total = tot;
  return mk;
}

/* Panels to threads by LPT over their loads under (tile, height). */
static void lpt(const ts__sched *S, const int *tile, const int *height, int32_t *thread, double *loads) {
  const ts_attn_sched_problem *pb = S->pb;
  for (int q = 0; q < S->P; q++) loads[q] = 0;
  double *L = malloc((size_t)pb->npanels * sizeof *L);
  int64_t *ord = malloc((size_t)pb->npanels * sizeof *ord);
  if (!L || !ord) { /* cannot happen at these sizes; fall back to the rank order */
    for (int64_t r = 0; r < pb->npanels; r++) thread[S->rank[r]] = (int32_t)(r % S->P);
    free(L), free(ord);
    return;
  }
  for (int64_t p = 0; p < pb->npanels; p++) {
    int h = height ? height[p] : -1;
    L[p] = ts__sched_base(pb, p) + (h >= 0 ? ts__sched_open(pb, p, h) : 0.0);
    for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++) L[p] += ts__sched_choice(pb, S->plist[x], tile[S->plist[x]]);
    ord[p] = p;
  }
  for (int64_t a = 1; a < pb->npanels; a++) { /* insertion sort by decreasing load, index on ties */
    int64_t v = ord[a], b = a;
    while (b > 0 && (L[ord[b - 1]] < L[v] || (L[ord[b - 1]] == L[v] && ord[b - 1] > v))) ord[b] = ord[b - 1], b--;
    ord[b] = v;
  }
  for (int64_t r = 0; r < pb->npanels; r++) {
    int best = 0;
    for (int q = 1; q < S->P; q++)
      if (loads[q] < loads[best]) best = q;
    thread[ord[r]] = best;
    loads[best] += L[ord[r]];
  }
  free(L), free(ord);
}

/* The per-block greedy (header). */
static void greedy(const ts__sched *S, int *tile, int *height, int32_t *thread, double *loads) {
  const ts_attn_sched_problem *pb = S->pb;
  const int nh = pb->nheights, nt = pb->ntiles;
  for (int64_t p = 0; p < pb->npanels; p++) {
    int h = -1;
    if (ts__sched_must(pb, p))
      for (int g = 0; g < nh; g++)
        if (h < 0 || ts__sched_open(pb, p, g) < ts__sched_open(pb, p, h)) h = g;
    for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++) {
      int64_t i = S->plist[x];
      int c = S->cand[i * S->k];
      double v = pb->cost[i * nt + c];
      if (h >= 0) {
        if (pb->merge[i * nh + h] < v) c = nt + h;
      } else {
        int gb = -1;
        double vb = INFINITY;
        for (int g = 0; g < nh; g++) {
          double w = pb->merge[i * nh + g] + ts__sched_open(pb, p, g);
          if (w < vb) vb = w, gb = g;
        }
        if (gb >= 0 && vb < v) c = nt + gb, h = gb;
      }
      tile[i] = c;
    }
    if (height) height[p] = h;
  }
  lpt(S, tile, height, thread, loads);
}

static ts_status check_problem(const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o, int P) {
  if (!pb || pb->npanels < 1 || pb->npieces < 0 || pb->ntiles < 1 || (pb->npieces > 0 && (!pb->piece_panel || !pb->cost)))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: empty or incomplete problem");
  if (pb->nheights < 0 || pb->nheights > 64 || (pb->nheights > 0 && pb->npieces > 0 && !pb->merge))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: nheights = %d (0..64) needs the merge costs", pb->nheights);
  if (P < 1 || P > TS_ATTN_THREAD_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: threads = %d is not in [1, %d]", P, TS_ATTN_THREAD_MAX);
  if (o->solver == TS_ATTN_SOLVER_ILP && !(o->time_limit > 0))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: time_limit = %g must be > 0", o->time_limit);
  if (!(o->rel_gap >= 0 && o->rel_gap < 1))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: rel_gap = %g is not in [0, 1)", o->rel_gap);
  if ((unsigned)o->calibrate_pass >= TS_ATTN_PASS_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: calibrate_pass = %d is not forward, backward or train",
                    (int)o->calibrate_pass);
  if ((int64_t)P * pb->npanels > 10000000)
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: %lld panels x %d threads is too large", (long long)pb->npanels, P);
  for (int64_t i = 0; i < pb->npieces; i++) {
    if (pb->piece_panel[i] < 0 || pb->piece_panel[i] >= pb->npanels)
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: piece %lld: panel %lld is not in [0, %lld)", (long long)i,
                      (long long)pb->piece_panel[i], (long long)pb->npanels);
    for (int c = 0; c < pb->ntiles + pb->nheights; c++) {
      double v = ts__sched_choice(pb, i, c);
      if (!(v >= 0) || !isfinite(v))
        return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: piece %lld %s %d: cost %g is not finite and >= 0", (long long)i,
                        c < pb->ntiles ? "tile" : "height", c < pb->ntiles ? c : c - pb->ntiles, v);
    }
  }
  for (int64_t p = 0; p < pb->npanels; p++) {
    if (!(ts__sched_base(pb, p) >= 0) || !isfinite(ts__sched_base(pb, p)))
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: panel %lld: base cost %g is not finite and >= 0", (long long)p,
                      ts__sched_base(pb, p));
    for (int h = 0; h < pb->nheights; h++)
      if (!(ts__sched_open(pb, p, h) >= 0) || !isfinite(ts__sched_open(pb, p, h)))
        return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: panel %lld height %d: open cost %g is not finite and >= 0",
                        (long long)p, h, ts__sched_open(pb, p, h));
  }
  return TS_OK;
}

typedef struct rank_key { double load; int64_t p; } rank_key;
static int cmp_desc(const void *a, const void *b) {
  const rank_key *x = a, *y = b;
  if (x->load != y->load) return x->load > y->load ? -1 : 1;
  return (x->p > y->p) - (x->p < y->p);
}

/* Candidates, panel piece lists, best configurations, bounds and the rank of every panel. */
static ts_status setup(ts__sched *S) {
  const ts_attn_sched_problem *pb = S->pb;
  const int64_t np = pb->npanels, ni = pb->npieces;
  S->cand = malloc((size_t)(ni ? ni : 1) * (size_t)S->k * sizeof *S->cand);
  S->pstart = calloc((size_t)np + 1, sizeof *S->pstart);
  S->plist = malloc((size_t)(ni ? ni : 1) * sizeof *S->plist);
  S->best_h = malloc((size_t)np * sizeof *S->best_h);
  S->lbest = malloc((size_t)np * sizeof *S->lbest);
  S->umax = malloc((size_t)np * sizeof *S->umax);
  S->rank = malloc((size_t)np * sizeof *S->rank);
  S->pos = malloc((size_t)np * sizeof *S->pos);
  rank_key *rk = malloc((size_t)np * sizeof *rk);
  if (!S->cand || !S->pstart || !S->plist || !S->best_h || !S->lbest || !S->umax || !S->rank || !S->pos || !rk) {
    free(rk);
    return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the working arrays (%lld pieces)", (long long)ni);
  }
  for (int64_t i = 0; i < ni; i++) { /* k cheapest tiles by selection (k is small); ties: menu order */
    int *c = S->cand + i * S->k;
    for (int j = 0; j < S->k; j++) {
      int best = -1;
      for (int t = 0; t < pb->ntiles; t++) {
        bool used = false;
        for (int u = 0; u < j; u++) used |= c[u] == t;
        if (!used && (best < 0 || pb->cost[i * pb->ntiles + t] < pb->cost[i * pb->ntiles + best])) best = t;
      }
      c[j] = best;
    }
    S->pstart[pb->piece_panel[i] + 1]++;
  }
  for (int64_t p = 0; p < np; p++) S->pstart[p + 1] += S->pstart[p];
  int64_t *fill = malloc((size_t)np * sizeof *fill);
  if (!fill) {
    free(rk);
    return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld panel lists", (long long)np);
  }
  memcpy(fill, S->pstart, (size_t)np * sizeof *fill);
  for (int64_t i = 0; i < ni; i++) S->plist[fill[pb->piece_panel[i]]++] = i;
  free(fill);
  for (int64_t p = 0; p < np; p++) {
    int hb = -1;
    double lb = ts__sched_must(pb, p) ? INFINITY : ts__sched_config(S, p, -1, NULL), omax = 0;
    for (int h = 0; h < S->nh; h++) {
      double L = ts__sched_config(S, p, h, NULL);
      if (L < lb) lb = L, hb = h;
      omax = ts__sched_open(pb, p, h) > omax ? ts__sched_open(pb, p, h) : omax;
    }
    S->best_h[p] = hb, S->lbest[p] = lb;
    double u = ts__sched_base(pb, p) + omax;
    for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++) {
      int64_t i = S->plist[x];
      double m = pb->cost[i * pb->ntiles + S->cand[i * S->k + S->k - 1]];
      for (int h = 0; h < S->nh; h++) m = pb->merge[i * S->nh + h] > m ? pb->merge[i * S->nh + h] : m;
      u += m;
    }
    S->umax[p] = u;
    rk[p] = (rank_key){lb, p};
  }
  qsort(rk, (size_t)np, sizeof *rk, cmp_desc);
  for (int64_t r = 0; r < np; r++) S->rank[r] = rk[r].p, S->pos[rk[r].p] = r;
  free(rk);
  return TS_OK;
}

static void sched_free(ts__sched *S) {
  free(S->cand), free(S->pstart), free(S->plist), free(S->best_h), free(S->lbest), free(S->umax), free(S->rank), free(S->pos);
}

static void count_merged(const ts_attn_sched_problem *pb, const int *tile, const int *height, int64_t *merged,
                         int64_t *panels) {
  *merged = *panels = 0;
  for (int64_t i = 0; i < pb->npieces; i++) *merged += tile[i] >= pb->ntiles;
  for (int64_t p = 0; height && p < pb->npanels; p++) *panels += height[p] >= 0;
}

/* The ILP stages under one time limit: the best configurations with LPT (accepted at once when
 * within rel_gap of the bound), the aggregated model, then (when it fits and is still needed) the
 * full model from the best solution so far. tile/height/thread hold the best verified solution. */
static ts_status ilp_stages(const ts__sched *S, const ts_attn_sched_opts *o, ts_attn_sched_info *info, int *tile, int *height,
                            int32_t *thread, double *loads) {
  const ts_attn_sched_problem *pb = S->pb;
  const double t0 = ts_now(), scale = info->lower_bound > 0 ? 1000.0 / info->lower_bound : 1.0;
  for (int64_t p = 0; p < pb->npanels; p++) {
    ts__sched_config(S, p, S->best_h[p], tile);
    if (height) height[p] = S->best_h[p];
  }
  lpt(S, tile, height, thread, loads);
  double tot, mk = eval(S, tile, height, thread, loads, &tot);
  info->tiles_fixed = true;
  if (mk <= info->lower_bound * (1 + o->rel_gap) && !o->full_model) { /* proven within the gap: no search */
    info->ilp_skipped = true;
    info->ilp_status = TS_ILP_OPTIMAL;
    info->ilp_gap = info->lower_bound > 0 ? (mk - info->lower_bound) / mk : 0;
  } else {
    ts_attn_sched_opts o1 = *o;
    int64_t nx = pb->npieces * (int64_t)(S->k + S->nh);
    bool full_fits = (S->k > 1 || S->nh > 0) && nx <= o->max_tile_vars;
    if (full_fits) o1.time_limit = o->time_limit / 2;
    ts_status st = ts__sched_ilp_aggregated(S, &o1, scale, tile, height, thread, info);
    if (st == TS_ERR_OOM) return st;
    if (full_fits && (o->full_model || st != TS_OK || info->ilp_status != TS_ILP_OPTIMAL)) {
      ts_attn_sched_opts o2 = *o;
      double s1 = info->ilp_seconds;
      o2.time_limit = o->time_limit - (ts_now() - t0);
      if (o2.time_limit < 1e-3) o2.time_limit = 1e-3;
      info->tiles_fixed = false;
      st = ts__sched_ilp_full(S, &o2, scale, tile, height, thread, info);
      info->ilp_seconds += s1;
      if (st == TS_ERR_OOM) return st;
    }
  }
  return TS_OK;
}

ts_status ts_attn_sched_problem_solve(const ts_attn_sched_problem *pb, const ts_attn_sched_opts *opts, int *tile, int *height,
                                      int32_t *thread, ts_attn_sched_info *info_out) {
  double t0 = ts_now();
  ts_attn_sched_opts o;
  if (opts) o = *opts;
  else ts_attn_sched_opts_default(&o);
  if (o.threads < 0) return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: threads = %d must be >= 0 (0: default)", o.threads);
  int P = o.threads > 0 ? o.threads : ts_default_threads();
  TS_TRY(check_problem(pb, &o, P));
  if ((pb->npieces > 0 && !tile) || !thread || (pb->nheights > 0 && !height))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: NULL tile/height/thread output");
  ts_attn_sched_info info;
  memset(&info, 0, sizeof info);
  info.threads = P;
  info.npanels = pb->npanels;
  info.npieces = pb->npieces;
  info.ilp_makespan = info.ilp_gap = NAN;
  ts__sched S = {.pb = pb, .P = P, .k = o.k_tiles < 1 ? 1 : o.k_tiles > pb->ntiles ? pb->ntiles : o.k_tiles,
                 .nh = pb->nheights};
  const int64_t np = pb->npanels, ni = pb->npieces;
  int *itile = malloc((size_t)(ni ? ni : 1) * sizeof *itile), *iheight = malloc((size_t)np * sizeof *iheight);
  int32_t *ithread = malloc((size_t)np * sizeof *ithread);
  double *loads = calloc((size_t)P, sizeof *loads);
  ts_status st = TS_OK;
  if (!itile || !iheight || !ithread || !loads) st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld pieces", (long long)ni);
  if (st == TS_OK) st = setup(&S);
  if (st != TS_OK) goto done;
  double lsum = 0, lmax = 0;
  for (int64_t p = 0; p < np; p++) lsum += S.lbest[p], lmax = S.lbest[p] > lmax ? S.lbest[p] : lmax;
  info.lower_bound = lsum / P > lmax ? lsum / P : lmax;

  int *hgt = pb->nheights > 0 ? height : NULL;
  greedy(&S, tile, hgt, thread, loads);
  info.greedy_makespan = info.makespan = eval(&S, tile, hgt, thread, loads, &info.greedy_total);
  info.total = info.greedy_total;
  info.solver = TS_ATTN_SOLVER_GREEDY;
  count_merged(pb, tile, hgt, &info.greedy_merged, &info.greedy_compact_panels);
  if (o.solver == TS_ATTN_SOLVER_ILP) {
    info.ilp_run = true;
    if (P == 1) { /* makespan = total: the best configurations are optimal */
      info.ilp_skipped = true, info.tiles_fixed = true, info.ilp_status = TS_ILP_OPTIMAL;
      for (int64_t p = 0; p < np; p++) ts__sched_config(&S, p, S.best_h[p], itile), iheight[p] = S.best_h[p], ithread[p] = 0;
    } else {
      memcpy(itile, tile, (size_t)ni * sizeof *itile);
      memcpy(ithread, thread, (size_t)np * sizeof *ithread);
      if (hgt) memcpy(iheight, hgt, (size_t)np * sizeof *iheight);
      if ((st = ilp_stages(&S, &o, &info, itile, hgt ? iheight : NULL, ithread, loads)) != TS_OK) goto done;
    }
    double itot, imk = eval(&S, itile, hgt ? iheight : NULL, ithread, loads, &itot);
    info.ilp_makespan = imk;
    double tol = 1e-9 * (info.greedy_makespan > 0 ? info.greedy_makespan : 1);
    if (isfinite(imk) && (imk < info.greedy_makespan - tol || (imk <= info.greedy_makespan + tol && itot < info.greedy_total - tol))) {
      memcpy(tile, itile, (size_t)ni * sizeof *tile);
      memcpy(thread, ithread, (size_t)np * sizeof *thread);
      if (hgt) memcpy(hgt, iheight, (size_t)np * sizeof *hgt);
      info.makespan = imk;
      info.total = itot;
      info.solver = TS_ATTN_SOLVER_ILP;
      info.ilp_improved = true;
    }
  }
  count_merged(pb, tile, hgt, &info.merged, &info.compact_panels);
done:
  info.ms = (ts_now() - t0) * 1e3;
  if (info_out) *info_out = info;
  sched_free(&S);
  free(itile), free(iheight), free(ithread), free(loads);
  return st;
}
