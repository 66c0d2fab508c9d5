/* GA variation operators: random genomes, uniform / one-point / SBX crossover, polynomial and
 * integer mutation; order crossover (OX1) and swap mutation for permutations.
 * SBX and polynomial mutation follow Deb & Agrawal's bounded formulas (distribution indices
 * eta_c, eta_m: larger means children closer to their parents). */
#include <math.h>
#include <string.h>

#include "solve/ga_internal.h"

static double uni(ts_rng *r) { return ts_rng_uniform(r); }

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

void ts__ga_random(const ts__ga_space *s, ts_rng *r, double *x) {
  if (s->perm) {
    for (int g = 0; g < s->n; g++) x[g] = g;
    for (int g = s->n - 1; g > 0; g--) { /* Fisher-Yates */
      int k = (int)ts_rng_below(r, (uint64_t)g + 1);
      double t = x[g];
      x[g] = x[k], x[k] = t;
    }
    return;
  }
  for (int g = 0; g < s->n; g++) {
    if (ts__ga_is_int(s, g))
      x[g] = s->lo[g] + (double)ts_rng_below(r, (uint64_t)(s->hi[g] - s->lo[g]) + 1);
    else
      x[g] = s->lo[g] + (s->hi[g] - s->lo[g]) * uni(r);
  }
}

bool ts__ga_valid(const ts__ga_space *s, const double *x) {
  if (s->perm) {
    int *seen = s->scratch;
    memset(seen, 0, sizeof(int) * (size_t)s->n);
    for (int g = 0; g < s->n; g++) {
      if (!(x[g] >= 0 && x[g] < s->n) || x[g] != floor(x[g]) || seen[(int)x[g]]++) return false;
    }
    return true;
  }
  for (int g = 0; g < s->n; g++) {
    if (!(x[g] >= s->lo[g] && x[g] <= s->hi[g])) return false;
    if (ts__ga_is_int(s, g) && x[g] != floor(x[g])) return false;
  }
  return true;
}

/* SBX on one gene pair (bounded): children spread around the parents with a polynomial
 * distribution; both children stay within [lo, hi]. */
static void sbx_gene(ts_rng *r, double eta, double lo, double hi, double *a, double *b) {
  double y1 = fmin(*a, *b), y2 = fmax(*a, *b);
  if (y2 - y1 < 1e-14) return;
  double u = uni(r), e1 = 1.0 / (eta + 1);
  double beta = 1 + 2 * (y1 - lo) / (y2 - y1), alpha = 2 - pow(beta, -(eta + 1));
  double bq = u <= 1 / alpha ? pow(u * alpha, e1) : pow(1 / (2 - u * alpha), e1);
  double c1 = 0.5 * ((y1 + y2) - bq * (y2 - y1));
  beta = 1 + 2 * (hi - y2) / (y2 - y1), alpha = 2 - pow(beta, -(eta + 1));
  bq = u <= 1 / alpha ? pow(u * alpha, e1) : pow(1 / (2 - u * alpha), e1);
  double c2 = 0.5 * ((y1 + y2) + bq * (y2 - y1));
  c1 = clampd(c1, lo, hi), c2 = clampd(c2, lo, hi);
  if (uni(r) < 0.5) *a = c1, *b = c2;
  else *a = c2, *b = c1;
}

static double poly_mutate(ts_rng *r, double eta, double lo, double hi, double y) {
  if (!(hi > lo)) return y;
  double d1 = (y - lo) / (hi - lo), d2 = (hi - y) / (hi - lo), u = uni(r), p = 1.0 / (eta + 1), dq;
  if (u < 0.5) {
    double v = 2 * u + (1 - 2 * u) * pow(1 - d1, eta + 1);
    dq = pow(v, p) - 1;
  } else {
    double v = 2 * (1 - u) + 2 * (u - 0.5) * pow(1 - d2, eta + 1);
    dq = 1 - pow(v, p);
  }
  return clampd(y + dq * (hi - lo), lo, hi);
}

static void mutate(const ts__ga_space *s, ts_rng *r, double *x) {
  for (int g = 0; g < s->n; g++) {
    if (uni(r) >= s->pm) continue;
    if (s->perm) {
      int k = (int)ts_rng_below(r, (uint64_t)s->n);
      double t = x[g];
      x[g] = x[k], x[k] = t;
    } else if (ts__ga_is_int(s, g)) {
      /* half the time a fresh value (assignments), half a unit step (ordinal sizes) */
      if (s->hi[g] <= s->lo[g]) continue;
      if (uni(r) < 0.5) {
        x[g] = s->lo[g] + (double)ts_rng_below(r, (uint64_t)(s->hi[g] - s->lo[g]) + 1);
      } else {
        double v = x[g] + (uni(r) < 0.5 ? -1 : 1);
        x[g] = v < s->lo[g] ? s->lo[g] + 1 : v > s->hi[g] ? s->hi[g] - 1 : v;
      }
    } else {
      x[g] = poly_mutate(r, s->eta_m, s->lo[g], s->hi[g], x[g]);
    }
  }
}

/* OX1: the child keeps a slice [i, j] of parent a in place and fills the other positions,
 * starting after j, with the remaining values in the order they appear in b (from j + 1). */
static void order_cross(const ts__ga_space *s, ts_rng *r, const double *a, const double *b, double *c) {
  int n = s->n, *used = s->scratch;
  int i = (int)ts_rng_below(r, (uint64_t)n), j = (int)ts_rng_below(r, (uint64_t)n);
  if (i > j) {
    int t = i;
    i = j, j = t;
  }
  memset(used, 0, sizeof(int) * (size_t)n);
  for (int k = i; k <= j; k++) c[k] = a[k], used[(int)a[k]] = 1;
  int at = (j + 1) % n;
  for (int k = 0; k < n; k++) {
    int v = (int)b[(j + 1 + k) % n];
    if (used[v]) continue;
    c[at] = v, used[v] = 1;
    at = (at + 1) % n;
  }
}

void ts__ga_breed(const ts__ga_space *s, ts_rng *r, const double *a, const double *b, double *c1, double *c2) {
  int n = s->n;
  memcpy(c1, a, sizeof(double) * (size_t)n);
  memcpy(c2, b, sizeof(double) * (size_t)n);
  if (uni(r) < s->pc && n > 1) {
    if (s->perm) {
      order_cross(s, r, a, b, c1);
      order_cross(s, r, b, a, c2);
    } else if (s->cross == TS_GA_CROSS_ONE_POINT) {
      int cut = 1 + (int)ts_rng_below(r, (uint64_t)n - 1);
      for (int g = cut; g < n; g++) c1[g] = b[g], c2[g] = a[g];
    } else {
      for (int g = 0; g < n; g++) {
        if (uni(r) >= 0.5) continue; /* each gene pair takes part with probability 1/2 */
        if (s->cross == TS_GA_CROSS_UNIFORM) {
          c1[g] = b[g], c2[g] = a[g];
        } else {
          sbx_gene(r, s->eta_c, s->lo[g], s->hi[g], &c1[g], &c2[g]);
          if (ts__ga_is_int(s, g)) c1[g] = nearbyint(c1[g]), c2[g] = nearbyint(c2[g]);
        }
      }
    }
  }
  mutate(s, r, c1);
  mutate(s, r, c2);
}
