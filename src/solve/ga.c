/* GA engine: single-objective generational GA with elitism, or NSGA-II (non-dominated
 * sorting + crowding distance, (mu + lambda) survival). All randomness comes from one ts_rng
 * stream used only in the serial parts, so a seed fixes the run even when evaluations run on
 * several threads.
 * Storage: x: [2 mu][ngenes] and f: [2 mu][nobj]; parents live in slots [0, mu), the
 * generation's offspring in [mu, mu + noff); survivors are gathered in x2/f2 and swapped in. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solve/ga_internal.h"

typedef struct ga {
  const ts_ga_problem *p;
  const ts_ga_options *o;
  ts__ga_space s;
  int mu, n, m;
  double *x, *f, *x2, *f2;   /* [2 mu][n], [2 mu][m] */
  int *rank, *rank2;         /* [2 mu] */
  double *crowd, *crowd2;    /* [2 mu] */
  ts_status *est;            /* [2 mu] per-evaluation status */
  char err[256];             /* detail of the lowest failing slot (evaluations may run on other threads) */
  int err_slot;
  double *best_x, best_f;    /* single-objective: best ever (survives elite = 0) */
  double *child;             /* [n] spare child when the offspring count is odd */
  ts_rng rng;
  int64_t evals;
} ga;

static double *X(const ga *g, int i) { return g->x + (size_t)i * (size_t)g->n; }
static double *F(const ga *g, int i) { return g->f + (size_t)i * (size_t)g->m; }

/* Sort records: (k0, k1, slot) ascending, a strict total order. */
typedef struct key {
  double k0, k1;
  int slot;
} key;

static int cmp_key(const void *pa, const void *pb) {
  const key *a = pa, *b = pb;
  if (a->k0 != b->k0) return a->k0 < b->k0 ? -1 : 1;
  if (a->k1 != b->k1) return a->k1 < b->k1 ? -1 : 1;
  return (a->slot > b->slot) - (a->slot < b->slot);
}

/* Evaluates slots [a, b); returns the first (lowest-slot) error. A callback's ts_error detail
 * lives in the thread that ran it, so it is copied out for the lowest failing slot. */
static ts_status evaluate(ga *g, int a, int b) {
  int threads = g->o->threads > 1 ? g->o->threads : 1;
  g->err_slot = b;
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (threads > 1)
  for (int i = a; i < b; i++) {
    double *fi = F(g, i);
    ts_error_clear();
    g->est[i] = g->p->eval(X(g, i), g->n, fi, g->p->user);
    for (int k = 0; k < g->m; k++)
      if (isnan(fi[k])) fi[k] = INFINITY;
    if (g->est[i] != TS_OK) {
#pragma omp critical(ts_ga_err)
      if (i < g->err_slot) {
        g->err_slot = i;
        snprintf(g->err, sizeof g->err, "%s", ts_last_error());
      }
    }
  }
  g->evals += b - a;
  for (int i = a; i < b; i++) {
    if (g->est[i] != TS_OK)
      return ts_error(g->est[i], "GA evaluation of individual %d: %s", i, g->err);
    if (!g->o->nsga2 && F(g, i)[0] < g->best_f) {
      g->best_f = F(g, i)[0];
      memcpy(g->best_x, X(g, i), sizeof(double) * (size_t)g->n);
    }
  }
  return TS_OK;
}

/* Tournament among parents: objective 0 (single) or crowded comparison (NSGA-II). */
static bool better(const ga *g, int i, int j) {
  if (!g->o->nsga2) {
    double a = F(g, i)[0], b = F(g, j)[0];
    return a < b || (a == b && i < j);
  }
  if (g->rank[i] != g->rank[j]) return g->rank[i] < g->rank[j];
  if (g->crowd[i] != g->crowd[j]) return g->crowd[i] > g->crowd[j];
  return i < j;
}

static int tournament(ga *g) {
  int best = (int)ts_rng_below(&g->rng, (uint64_t)g->mu);
  for (int t = 1; t < g->o->tournament; t++) {
    int c = (int)ts_rng_below(&g->rng, (uint64_t)g->mu);
    if (better(g, c, best)) best = c;
  }
  return best;
}

/* Moves the slots keys[0..mu) into x2/f2 (and their rank/crowding), then swaps buffers. */
static void gather(ga *g, const key *keys) {
  for (int i = 0; i < g->mu; i++) {
    int s = keys[i].slot;
    memcpy(g->x2 + (size_t)i * (size_t)g->n, X(g, s), sizeof(double) * (size_t)g->n);
    memcpy(g->f2 + (size_t)i * (size_t)g->m, F(g, s), sizeof(double) * (size_t)g->m);
    g->rank2[i] = g->rank[s], g->crowd2[i] = g->crowd[s];
  }
  double *t = g->x;
  g->x = g->x2, g->x2 = t;
  t = g->f, g->f = g->f2, g->f2 = t;
  int *r = g->rank;
  g->rank = g->rank2, g->rank2 = r;
  t = g->crowd, g->crowd = g->crowd2, g->crowd2 = t;
}

/* NSGA-II survival over slots [0, total): fronts in order, the last one cut by crowding. */
static ts_status survive_nsga(ga *g, int total, key *keys, int *members) {
  int nf = 0;
  TS_TRY(ts_pareto_rank(g->f, total, g->m, g->rank, &nf));
  /* members grouped by front (counting sort keeps slot order within a front) */
  int *cnt = calloc((size_t)nf + 1, sizeof(int));
  if (!cnt) return ts_error(TS_ERR_OOM, "GA: out of memory");
  for (int i = 0; i < total; i++) cnt[g->rank[i] + 1]++;
  for (int r = 0; r < nf; r++) cnt[r + 1] += cnt[r];
  for (int i = 0; i < total; i++) members[cnt[g->rank[i]]++] = i;
  ts_status st = TS_OK;
  for (int r = 0, at = 0; r < nf && st == TS_OK; r++) {
    int c = cnt[r] - at;
    double *d = g->crowd2; /* scratch: crowding of this front in member order */
    st = ts_pareto_crowding(g->f, total, g->m, members + at, c, d);
    for (int k = 0; k < c && st == TS_OK; k++) g->crowd[members[at + k]] = d[k];
    at = cnt[r];
  }
  free(cnt);
  if (st != TS_OK) return st;
  for (int i = 0; i < total; i++) keys[i] = (key){(double)g->rank[i], -g->crowd[i], i};
  qsort(keys, (size_t)total, sizeof *keys, cmp_key);
  gather(g, keys);
  return TS_OK;
}

/* Single-objective survival: the `elite` best parents, then the offspring in order. */
static void survive_so(ga *g, int noff, key *keys) {
  int e = g->mu - noff;
  for (int i = 0; i < g->mu; i++) keys[i] = (key){F(g, i)[0], 0, i};
  qsort(keys, (size_t)g->mu, sizeof *keys, cmp_key);
  for (int i = 0; i < noff; i++) keys[e + i] = (key){0, 0, g->mu + i};
  gather(g, keys);
}

static ts_status check(const ts_ga_problem *p, const ts_ga_options *o) {
  if (!p || !o) return ts_error(TS_ERR_INVALID_ARG, "ts_ga_run: problem or options is NULL");
  if (p->ngenes < 1 || p->nobj < 1 || !p->eval)
    return ts_error(TS_ERR_INVALID_ARG, "GA problem: %d genes, %d objectives, eval=%s", p->ngenes, p->nobj,
                    p->eval ? "set" : "NULL");
  if (p->nobj > 1 && !o->nsga2)
    return ts_error(TS_ERR_INVALID_ARG, "GA problem: %d objectives need the nsga2 option", p->nobj);
  if (o->population < 4 || o->population % 2 || o->population > (1 << 24))
    return ts_error(TS_ERR_INVALID_ARG, "GA options: population %d must be even and in [4, 2^24]", o->population);
  if (o->generations < 0) return ts_error(TS_ERR_INVALID_ARG, "GA options: generations %d", o->generations);
  if (o->tournament < 2 || o->tournament > o->population)
    return ts_error(TS_ERR_INVALID_ARG, "GA options: tournament %d outside [2, population]", o->tournament);
  if ((unsigned)o->crossover > TS_GA_CROSS_SBX)
    return ts_error(TS_ERR_INVALID_ARG, "GA options: unknown crossover %d", (int)o->crossover);
  if (!(o->crossover_prob >= 0 && o->crossover_prob <= 1) || !(o->mutation_prob <= 1) ||
      !(o->eta_c >= 0) || !(o->eta_m >= 0) || isnan(o->time_limit))
    return ts_error(TS_ERR_INVALID_ARG, "GA options: crossover_prob %g, mutation_prob %g, eta_c %g, eta_m %g",
                    o->crossover_prob, o->mutation_prob, o->eta_c, o->eta_m);
  if (!o->nsga2 && (o->elite < 0 || o->elite >= o->population))
    return ts_error(TS_ERR_INVALID_ARG, "GA options: elite %d outside [0, population)", o->elite);
  if (o->threads < 1 || o->threads > 1024) return ts_error(TS_ERR_INVALID_ARG, "GA options: threads %d", o->threads);
  if (o->n_initial < 0 || o->n_initial > o->population || (o->n_initial > 0 && !o->initial))
    return ts_error(TS_ERR_INVALID_ARG, "GA options: %d initial genomes (population %d)", o->n_initial, o->population);
  if (!p->permutation) {
    if (!p->lo || !p->hi) return ts_error(TS_ERR_INVALID_ARG, "GA problem: lo/hi bounds are NULL");
    for (int k = 0; k < p->ngenes; k++) {
      double lo = p->lo[k], hi = p->hi[k];
      if (p->integer && p->integer[k]) lo = ceil(lo), hi = floor(hi);
      if (!isfinite(lo) || !isfinite(hi) || lo > hi || (p->integer && p->integer[k] && hi - lo > 9.0e15))
        return ts_error(TS_ERR_INVALID_ARG, "GA problem: gene %d has bounds [%g, %g]", k, p->lo[k], p->hi[k]);
    }
  }
  return TS_OK;
}

void ts_ga_options_default(ts_ga_options *o) {
  memset(o, 0, sizeof *o);
  o->population = 100, o->generations = 100, o->tournament = 2;
  o->crossover = TS_GA_CROSS_SBX, o->crossover_prob = 0.9, o->mutation_prob = 0;
  o->eta_c = 15, o->eta_m = 20, o->elite = 2, o->threads = 1;
}

void ts_ga_result_free(ts_ga_result *r) {
  if (!r) return;
  free(r->x), free(r->f);
  r->x = r->f = NULL;
  r->n = 0;
}

static void ga_free(ga *g) {
  free(g->x), free(g->f), free(g->x2), free(g->f2), free(g->rank), free(g->rank2), free(g->crowd);
  free(g->crowd2), free(g->est), free(g->best_x), free(g->child), free(g->s.scratch);
  free((void *)g->s.lo), free((void *)g->s.hi);
}

static ts_status ga_alloc(ga *g, const ts_ga_problem *p) {
  size_t two = 2 * (size_t)g->mu, xs, fs;
  if (!ts_mul_size(two, (size_t)g->n, &xs) || !ts_mul_size(xs, sizeof(double), &xs) ||
      !ts_mul_size(two, (size_t)g->m, &fs) || !ts_mul_size(fs, sizeof(double), &fs))
    return ts_error(TS_ERR_OVERFLOW, "GA: population %d x %d genes overflows", g->mu, g->n);
  g->x = malloc(xs), g->x2 = malloc(xs), g->f = malloc(fs), g->f2 = malloc(fs);
  g->rank = malloc(two * sizeof(int)), g->rank2 = malloc(two * sizeof(int));
  g->crowd = calloc(two, sizeof(double)), g->crowd2 = calloc(two, sizeof(double));
  g->est = malloc(two * sizeof(ts_status));
  g->best_x = malloc(sizeof(double) * (size_t)g->n), g->child = malloc(sizeof(double) * (size_t)g->n);
  g->s.scratch = malloc(sizeof(int) * 2 * (size_t)g->n);
  double *lo = malloc(sizeof(double) * (size_t)g->n), *hi = malloc(sizeof(double) * (size_t)g->n);
  g->s.lo = lo, g->s.hi = hi;
  if (!g->x || !g->x2 || !g->f || !g->f2 || !g->rank || !g->rank2 || !g->crowd || !g->crowd2 || !g->est ||
      !g->best_x || !g->child || !g->s.scratch || !lo || !hi)
    return ts_error(TS_ERR_OOM, "GA: out of memory (population %d, %d genes)", g->mu, g->n);
  for (int k = 0; k < g->n; k++) {
    bool in = p->integer && p->integer[k];
    lo[k] = p->permutation ? 0 : in ? ceil(p->lo[k]) : p->lo[k];
    hi[k] = p->permutation ? g->n - 1 : in ? floor(p->hi[k]) : p->hi[k];
  }
  for (size_t i = 0; i < two; i++) g->rank[i] = 0;
  return TS_OK;
}

/* Result: single-objective: population sorted best first; NSGA-II: distinct front-0 genomes. */
static ts_status make_result(ga *g, key *keys, ts_ga_result *r) {
  int cnt = 0;
  if (!g->o->nsga2) {
    for (int i = 0; i < g->mu; i++) keys[i] = (key){F(g, i)[0], 0, i};
    qsort(keys, (size_t)g->mu, sizeof *keys, cmp_key);
    if (g->best_f < keys[0].k0) { /* elite = 0 lost the best: it replaces the worst */
      int w = keys[g->mu - 1].slot;
      memcpy(X(g, w), g->best_x, sizeof(double) * (size_t)g->n);
      F(g, w)[0] = g->best_f;
      memmove(keys + 1, keys, sizeof(key) * (size_t)(g->mu - 1));
      keys[0] = (key){g->best_f, 0, w};
    }
    cnt = g->mu;
  } else {
    for (int i = 0; i < g->mu; i++) {
      if (g->rank[i] != 0) continue;
      bool dup = false;
      for (int k = 0; k < cnt && !dup; k++)
        dup = memcmp(X(g, keys[k].slot), X(g, i), sizeof(double) * (size_t)g->n) == 0;
      if (!dup) keys[cnt++] = (key){F(g, i)[0], g->m > 1 ? F(g, i)[1] : 0, i};
    }
    qsort(keys, (size_t)cnt, sizeof *keys, cmp_key);
  }
  r->x = malloc(sizeof(double) * (size_t)cnt * (size_t)g->n);
  r->f = malloc(sizeof(double) * (size_t)cnt * (size_t)g->m);
  if (!r->x || !r->f) {
    ts_ga_result_free(r);
    return ts_error(TS_ERR_OOM, "GA: out of memory for the result");
  }
  for (int i = 0; i < cnt; i++) {
    memcpy(r->x + (size_t)i * (size_t)g->n, X(g, keys[i].slot), sizeof(double) * (size_t)g->n);
    memcpy(r->f + (size_t)i * (size_t)g->m, F(g, keys[i].slot), sizeof(double) * (size_t)g->m);
  }
  r->n = cnt;
  return TS_OK;
}

ts_status ts_ga_run(const ts_ga_problem *p, const ts_ga_options *o, ts_ga_result *r) {
  if (!r) return ts_error(TS_ERR_INVALID_ARG, "ts_ga_run: result is NULL");
  memset(r, 0, sizeof *r);
  TS_TRY(check(p, o));
  double t0 = ts_now();
  ga g;
  memset(&g, 0, sizeof g);
  g.p = p, g.o = o, g.mu = o->population, g.n = p->ngenes, g.m = p->nobj, g.best_f = INFINITY;
  r->ngenes = g.n, r->nobj = g.m;
  ts_rng_seed(&g.rng, o->seed);
  key *keys = malloc(sizeof(key) * 2 * (size_t)g.mu);
  int *members = malloc(sizeof(int) * 2 * (size_t)g.mu);
  ts_status st = keys && members ? ga_alloc(&g, p) : ts_error(TS_ERR_OOM, "GA: out of memory");
  g.s.n = g.n, g.s.perm = p->permutation, g.s.integer = p->permutation ? NULL : p->integer;
  g.s.cross = o->crossover, g.s.pc = o->crossover_prob;
  g.s.pm = o->mutation_prob > 0 ? o->mutation_prob : 1.0 / g.n;
  g.s.eta_c = o->eta_c, g.s.eta_m = o->eta_m;

  for (int i = 0; st == TS_OK && i < g.mu; i++) {
    if (i < o->n_initial) {
      memcpy(X(&g, i), o->initial + (size_t)i * (size_t)g.n, sizeof(double) * (size_t)g.n);
      if (!ts__ga_valid(&g.s, X(&g, i)))
        st = ts_error(TS_ERR_INVALID_ARG, "GA options: initial genome %d is outside the genome space", i);
    } else {
      ts__ga_random(&g.s, &g.rng, X(&g, i));
    }
  }
  if (st == TS_OK) st = evaluate(&g, 0, g.mu);
  if (st == TS_OK && o->nsga2) st = survive_nsga(&g, g.mu, keys, members);

  ts_progress prog;
  if (o->progress) ts_progress_begin(&prog, o->nsga2 ? "nsga-ii" : "ga", o->generations);
  int gen = 0;
  for (; st == TS_OK && gen < o->generations; gen++) {
    if (o->time_limit > 0 && ts_now() - t0 >= o->time_limit) break;
    int noff = o->nsga2 ? g.mu : g.mu - o->elite;
    for (int i = 0; i < noff; i += 2) {
      const double *a = X(&g, tournament(&g)), *b = X(&g, tournament(&g));
      double *c2 = i + 1 < noff ? X(&g, g.mu + i + 1) : g.child;
      ts__ga_breed(&g.s, &g.rng, a, b, X(&g, g.mu + i), c2);
    }
    st = evaluate(&g, g.mu, g.mu + noff);
    if (st != TS_OK) break;
    if (o->nsga2) st = survive_nsga(&g, g.mu + noff, keys, members);
    else survive_so(&g, noff, keys);
    if (o->progress) ts_progress_update(&prog, gen + 1);
  }
  if (o->progress) ts_progress_end(&prog);
  if (st == TS_OK) st = make_result(&g, keys, r);
  r->generations = gen;
  r->evaluations = g.evals;
  r->seconds = ts_now() - t0;
  free(keys), free(members);
  ga_free(&g);
  return st;
}
