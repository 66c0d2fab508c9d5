/* Shared by the ILP's exact model of compact passes (sched_cover.c: the model, its evaluation and
 * bound, the driver) and its CBC form (sched_cover_cbc.c). Formulation: sched_cover.c. */
#ifndef TS_ATTN_SCHED_COVER_H
#define TS_ATTN_SCHED_COVER_H

#include "attn/sched_internal.h"

typedef struct cov_need {
  int32_t piece, sub; /* panel-local piece index, sub-tile */
  int32_t w0, nw;     /* word range of its keys */
  int64_t off;        /* its words in cov.bits */
} cov_need;

typedef struct cov {
  int64_t n, W, ns, hh, npc;
  double *alpha, *beta;   /* [ns] */
  uint64_t *res;          /* [ns][W] residue keys */
  uint64_t *fixed;        /* [ns][W] residue + fixed-merged pieces' keys */
  unsigned char *hasfix;  /* [ns] the sub-tile has fixed keys (residue, fixed pieces): it always runs */
  cov_need *need;         /* by piece, then sub-tile */
  int64_t nneed, *nstart; /* [npc + 1] */
  uint64_t *bits;
  int64_t nbits;
  const double *c;        /* [npc] standalone cost of each piece */
  unsigned char *state;   /* [npc] 1: fixed merged, 0: free */
  uint64_t *u;            /* [W] scratch */
} cov;

typedef struct comp {
  int64_t *piece, npiece; /* free pieces of the component */
  int64_t *sub, nsub;     /* its sub-tiles */
} comp;

/* Keys and 4-key runs (leftmost greedy, starts clamped to n - 4 as the plan does) of u[0 .. nw),
 * word 0 = columns 64 w0 .. */
void ts__cov_keys_runs(const uint64_t *u, int64_t w0, int64_t nw, int64_t n, int64_t *keys, int64_t *runs);
/* Cost of component K's sub-tiles and free pieces under merged[] (the fixed pieces merged). */
double ts__cov_comp_eval(const cov *C, const comp *K, const unsigned char *merged);
/* Solves component K by CBC from the warm start merged[] (its free pieces) within time_limit
 * seconds; sol[] (indexed like merged) gets the answer when one comes back (*used). info: the
 * cover_cbc counters. */
ts_status ts__cov_comp_cbc(const cov *C, const comp *K, const unsigned char *merged, double time_limit, unsigned char *sol,
                           bool *used, ts_attn_sched_info *info);

#endif
