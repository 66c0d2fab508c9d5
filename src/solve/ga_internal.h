/* GA internals shared by ga.c (generation loop, survival, results) and ga_ops.c (random
 * genomes, crossover, mutation). A genome is ngenes doubles; integer genes hold integral
 * values; permutation genomes hold 0..ngenes-1 once each. */
#ifndef TS_SOLVE_GA_INTERNAL_H
#define TS_SOLVE_GA_INTERNAL_H

#include "tessera/solve.h"

typedef struct ts__ga_space {
  int n;
  bool perm;
  const double *lo, *hi; /* [n], integer bounds already rounded inward (non-permutation only) */
  const bool *integer;   /* [n] or NULL */
  ts_ga_crossover cross;
  double pc, pm, eta_c, eta_m;
  int *scratch;          /* [2n] for order crossover */
} ts__ga_space;

static inline bool ts__ga_is_int(const ts__ga_space *s, int g) { return s->integer && s->integer[g]; }

/* Uniform random genome. */
void ts__ga_random(const ts__ga_space *s, ts_rng *r, double *x);
/* Crossover (with probability pc) then mutation of two children made from parents a, b. */
void ts__ga_breed(const ts__ga_space *s, ts_rng *r, const double *a, const double *b, double *c1, double *c2);
/* True when x is a valid genome for the space (bounds, integrality, permutation). */
bool ts__ga_valid(const ts__ga_space *s, const double *x);

#endif
