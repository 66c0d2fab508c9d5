/* The CBC form of one component of the ILP's exact compact-pass model (formulation:
 * sched_cover.c): free pieces x_i, per sub-tile the mode m_s (when the bounds leave it open) with
 * the pieces' single-key and run shares, single-key variables z per group of keys with the same
 * sources, run starts y per modelled key cluster, and the cover rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_cover.h"

/* ---- the CBC model of one component --------------------------------------------------------------- */

/* Variables of a model: warm start and objective (accumulated, set at the end), in order. */
typedef struct mvars {
  double *w, *obj;
  int n, cap;
} mvars;

static ts_status mv_add(ts_ilp *m, mvars *V, bool binary, double warm, int *idx) {
  TS_TRY(binary ? ts_ilp_add_binary(m, NULL, 0.0, idx) : ts_ilp_add_continuous(m, NULL, 0.0, 1.0, 0.0, idx));
  if (V->n == V->cap) {
    int nc = V->cap ? V->cap * 2 : 256;
    double *w = realloc(V->w, (size_t)nc * sizeof *w);
    if (w) V->w = w;
    double *o = w ? realloc(V->obj, (size_t)nc * sizeof *o) : NULL;
    if (o) V->obj = o;
    if (!w || !o) return ts_error(TS_ERR_OOM, "attn scheduler: cannot grow the coverage model to %d variables", nc);
    V->cap = nc;
  }
  V->w[V->n] = warm, V->obj[V->n++] = 0.0;
  return TS_OK;
}

static inline int64_t run_start(int64_t k, int64_t n) { return k < n - TS__ATTN_RUN ? k : n - TS__ATTN_RUN; }

/* ORs the needs of piece k in sub-tile s into u (W words); false when it has none there. */
static bool need_or(const cov *C, int64_t k, int64_t s, uint64_t *u) {
  for (int64_t x = C->nstart[k]; x < C->nstart[k + 1]; x++)
    if (C->need[x].sub == s) {
      for (int32_t w = 0; w < C->need[x].nw; w++) u[C->need[x].w0 + w] |= C->bits[C->need[x].off + w];
      return true;
    }
  return false;
}

static bool need_has(const cov *C, int64_t k, int64_t s, int64_t key) {
  for (int64_t x = C->nstart[k]; x < C->nstart[k + 1]; x++) {
    const cov_need *nd = &C->need[x];
    if (nd->sub != s) continue;
    int64_t w = (key >> 6) - nd->w0;
    return w >= 0 && w < nd->nw && ((C->bits[nd->off + w] >> (key & 63)) & 1);
  }
  return false;
}

/* The model of one component under construction. */
typedef struct cmodel {
  const cov *C;
  const comp *K;
  const unsigned char *merged; /* warm start */
  ts_ilp *m;
  mvars V;
  ts_ilp_row rb;
  double scale;
  int *xv;                     /* [npiece] x_i */
  int *s0, *s1;                /* [npiece] piece's single-key / run share in the current sub-tile (-1: none) */
  int *src;                    /* [npiece] scratch: the shares reaching a key */
  int *yv;                     /* [n] run start variable of each key's q(k) */
  uint64_t *F, *A, *var, *Nw, *t; /* [W] fixed keys; all reachable; modelled (reachable, not fixed); warm; scratch */
} cmodel;

static ts_status row2(cmodel *M, int a, double ca, int b, double cb, ts_ilp_cmp cmp, double rhs) {
  TS_TRY(ts_ilp_row_push(&M->rb, a, ca));
  if (b >= 0) TS_TRY(ts_ilp_row_push(&M->rb, b, cb));
  return ts_ilp_row_add(M->m, &M->rb, cmp, rhs);
}

/* One sub-tile of the component while its rows are written: which rule prices its keys (mode 0:
 * single keys, 1: runs, -1: open, the binary m_s = variable mv decides) and its figures. */
typedef struct subtile {
  int64_t s;
  int mode, wmode, mv; /* wmode: the warm start's mode */
  double beta;         /* the sub-tile's per-key price, scaled */
  int64_t kfix, khi;   /* fixed keys; keys reachable at all */
} subtile;

/* The pieces meeting sub-tile s: s0/s1 = -1 for those (-2 for the others), F its fixed keys, A
 * the keys the pieces reach, Nw the keys of the warm start (fixed ones and merged pieces'), and the
 * fewest keys and runs (*kmin, *rmin) one piece alone needs. False when no piece meets s. */
static bool sub_scan(cmodel *M, int64_t s, int64_t *kmin, int64_t *rmin) {
  const cov *C = M->C;
  const int64_t n = C->n, W = C->W, np = M->K->npiece;
  memcpy(M->F, C->fixed + s * W, (size_t)W * sizeof *M->F);
  memset(M->A, 0, (size_t)W * sizeof *M->A);
  memcpy(M->Nw, M->F, (size_t)W * sizeof *M->Nw);
  int64_t k_, r_;
  bool meets = false;
  *kmin = *rmin = INT64_MAX;
  for (int64_t a = 0; a < np; a++) {
    M->s0[a] = M->s1[a] = -2; /* -2: the piece has no cell in s */
    memset(M->t, 0, (size_t)W * sizeof *M->t);
    if (!need_or(C, M->K->piece[a], s, M->t)) continue;
    M->s0[a] = M->s1[a] = -1, meets = true;
    ts__cov_keys_runs(M->t, 0, W, n, &k_, &r_);
    *kmin = k_ < *kmin ? k_ : *kmin, *rmin = r_ < *rmin ? r_ : *rmin;
    for (int64_t w = 0; w < W; w++) M->A[w] |= M->t[w], M->Nw[w] |= M->merged[M->K->piece[a]] ? M->t[w] : 0;
  }
  return meets;
}

/* A sub-tile without fixed keys is open (o_s, priced alpha) when any piece meeting it is: o_s >= x_i. */
static ts_status sub_open(cmodel *M, int64_t s) {
  const int64_t np = M->K->npiece;
  int ov = -1;
  TS_TRY(mv_add(M->m, &M->V, false, 0.0, &ov));
  M->V.obj[ov] += M->scale * M->C->alpha[s];
  for (int64_t a = 0; a < np; a++)
    if (M->s0[a] != -2) {
      TS_TRY(row2(M, ov, 1.0, M->xv[a], -1.0, TS_ILP_GE, 0.0));
      if (M->merged[M->K->piece[a]]) M->V.w[ov] = 1.0;
    }
  return TS_OK;
}

/* Each meeting piece's single-key (s0) and run (s1) share: x_i itself when the mode is decided,
 * else w0 + w1 = x_i, w0 <= 1 - m, w1 <= m. */
static ts_status sub_shares(cmodel *M, const subtile *T) {
  const int64_t np = M->K->npiece;
  for (int64_t a = 0; a < np; a++) {
    if (M->s0[a] == -2) continue;
    const double xw = M->merged[M->K->piece[a]] ? 1.0 : 0.0;
    if (T->mode == 0) {
      M->s0[a] = M->xv[a];
    } else if (T->mode == 1) {
      M->s1[a] = M->xv[a];
    } else {
      TS_TRY(mv_add(M->m, &M->V, false, xw * (1 - T->wmode), &M->s0[a]));
      TS_TRY(mv_add(M->m, &M->V, false, xw * T->wmode, &M->s1[a]));
      TS_TRY(ts_ilp_row_push(&M->rb, M->s0[a], 1.0));
      TS_TRY(row2(M, M->s1[a], 1.0, M->xv[a], -1.0, TS_ILP_EQ, 0.0));
      TS_TRY(row2(M, M->s0[a], 1.0, T->mv, 1.0, TS_ILP_LE, 1.0));
      TS_TRY(row2(M, M->s1[a], 1.0, T->mv, -1.0, TS_ILP_LE, 0.0));
    }
  }
  return TS_OK;
}

/* single keys: 1.1 beta per computed key. Fixed keys are a constant (times 1 - m when the mode
 * is free); a modelled key reached by one share adds to that share, by several gets z_k >= each. */
static ts_status sub_singles(cmodel *M, const subtile *T) {
  const cov *C = M->C;
  const int64_t W = C->W, np = M->K->npiece, s = T->s;
  const double beta = T->beta;
  if (T->mode < 0) M->V.obj[T->mv] -= 1.1 * beta * (double)T->kfix;
  /* the modelled keys by their set of sources: keys reached by the same shares share one z */
  int64_t nv = 0, *kidx = NULL;
  int *lists = NULL;
  for (int64_t w = 0; w < W; w++) nv += __builtin_popcountll(M->var[w]);
  kidx = malloc((size_t)nv * sizeof *kidx), lists = malloc((size_t)(nv * (np + 1)) * sizeof *lists);
  if (!kidx || !lists) {
    free(kidx), free(lists);
    return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld coverage keys", (long long)nv);
  }
  nv = 0;
  for (int64_t w = 0; w < W; w++)
    for (uint64_t x = M->var[w]; x; x &= x - 1) {
      const int64_t k = w * 64 + __builtin_ctzll(x);
      int *l = lists + nv * (np + 1), c = 0;
      for (int64_t a2 = 0; a2 < np; a2++)
        if (M->s0[a2] >= 0 && need_has(C, M->K->piece[a2], s, k)) l[1 + c++] = M->s0[a2];
      l[0] = c, kidx[nv++] = k;
    }
  ts_status st = TS_OK;
  unsigned char *done = calloc((size_t)(nv ? nv : 1), 1);
  if (!done) st = ts_error(TS_ERR_OOM, "attn scheduler: coverage key groups");
  for (int64_t i = 0; i < nv && st == TS_OK; i++) {
    if (done[i]) continue;
    const int *l = lists + i * (np + 1);
    double cnt = 0, warm = 0;
    for (int64_t j = i; j < nv; j++) { /* the keys with this very list (np is small: quadratic is fine) */
      const int *l2 = lists + j * (np + 1);
      if (done[j] || l2[0] != l[0] || memcmp(l2 + 1, l + 1, (size_t)l[0] * sizeof *l)) continue;
      done[j] = 1, cnt++;
      warm += T->wmode == 0 && ((M->Nw[kidx[j] >> 6] >> (kidx[j] & 63)) & 1);
    }
    if (l[0] == 1) {
      M->V.obj[l[1]] += 1.1 * beta * cnt;
      continue;
    }
    int z;
    st = mv_add(M->m, &M->V, false, warm > 0 ? 1.0 : 0.0, &z);
    if (st == TS_OK) M->V.obj[z] += 1.1 * beta * cnt;
    for (int b2 = 0; b2 < l[0] && st == TS_OK; b2++) st = row2(M, z, 1.0, l[1 + b2], -1.0, TS_ILP_GE, 0.0);
  }
  free(kidx), free(lists), free(done);
  return st;
}

/* The start variables of one cluster keys[a..e) of modelled keys, one per q(k), with the warm
 * start's greedy runs. */
static ts_status cluster_starts(cmodel *M, const subtile *T, const int64_t *keys, int64_t a, int64_t e) {
  const int64_t n = M->C->n;
  int64_t next = -1;
  for (int64_t t = a; t < e; t++) {
    const int64_t k = keys[t], q = run_start(k, n);
    const bool start = T->wmode == 1 && ((M->Nw[k >> 6] >> (k & 63)) & 1) && k >= next;
    if (start) next = q + TS__ATTN_RUN;
    if (t > a && q == run_start(keys[t - 1], n)) {
      M->yv[k] = M->yv[keys[t - 1]];
      if (start) M->V.w[M->yv[k]] = 1.0;
      continue;
    }
    TS_TRY(mv_add(M->m, &M->V, false, start ? 1.0 : 0.0, &M->yv[k]));
    M->V.obj[M->yv[k]] += 4.0 * T->beta;
  }
  return TS_OK;
}

/* Per key of the cluster keys[a..e), per source (fixed: 1, or m; a piece: its run share): the sum
 * of the starts in [k - 3, k] >= the source. */
static ts_status cluster_covers(cmodel *M, const subtile *T, const int64_t *keys, int64_t a, int64_t e) {
  const int64_t np = M->K->npiece, s = T->s;
  for (int64_t t = a; t < e; t++) {
    const int64_t k = keys[t];
    const bool fixed = (M->F[k >> 6] >> (k & 63)) & 1;
    int ns_ = 0;
    if (fixed) M->src[ns_++] = T->mode < 0 ? T->mv : -1;
    else
      for (int64_t b = 0; b < np; b++)
        if (M->s1[b] >= 0 && need_has(M->C, M->K->piece[b], s, k)) M->src[ns_++] = M->s1[b];
    for (int b = 0; b < ns_; b++) {
      int last = -1;
      for (int64_t u2 = t; u2 >= a && keys[u2] >= k - (TS__ATTN_RUN - 1); u2--)
        if (M->yv[keys[u2]] != last) {
          TS_TRY(ts_ilp_row_push(&M->rb, M->yv[keys[u2]], 1.0));
          last = M->yv[keys[u2]];
        }
      if (M->src[b] >= 0) TS_TRY(ts_ilp_row_push(&M->rb, M->src[b], -1.0));
      TS_TRY(ts_ilp_row_add(M->m, &M->rb, TS_ILP_GE, M->src[b] >= 0 ? 0.0 : 1.0));
    }
  }
  return TS_OK;
}

/* runs: 4 beta per run. Clusters of keys closer than 4 apart cover independently; those without a
 * modelled key are a constant (times m when the mode is free), the others get a start variable
 * per q(k) and per key a cover row for each source. */
static ts_status sub_runs(cmodel *M, const subtile *T) {
  const int64_t n = M->C->n, W = M->C->W;
  int64_t *keys = malloc((size_t)(T->khi + 1) * sizeof *keys), nk = 0, rconst = 0;
  if (!keys) return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld coverage keys", (long long)T->khi);
  for (int64_t w = 0; w < W; w++)
    for (uint64_t x = M->A[w]; x; x &= x - 1) keys[nk++] = w * 64 + __builtin_ctzll(x);
  ts_status st = TS_OK;
  for (int64_t a = 0, e; a < nk && st == TS_OK; a = e) {
    bool modelled = false;
    for (e = a + 1; e < nk && keys[e] - keys[e - 1] < TS__ATTN_RUN; e++) {}
    for (int64_t t = a; t < e; t++) modelled |= (M->var[keys[t] >> 6] >> (keys[t] & 63)) & 1;
    if (!modelled) {
      int64_t next = -1;
      for (int64_t t = a; t < e; t++)
        if (keys[t] >= next) rconst++, next = run_start(keys[t], n) + TS__ATTN_RUN;
      continue;
    }
    st = cluster_starts(M, T, keys, a, e);
    if (st == TS_OK) st = cluster_covers(M, T, keys, a, e);
  }
  free(keys);
  TS_TRY(st);
  if (T->mode < 0) M->V.obj[T->mv] += 4.0 * T->beta * (double)rconst;
  return TS_OK;
}

/* Sub-tile s of the component (see the file comment). The mode is fixed when the bounds decide it
 * (every need set between the fixed keys and all reachable ones picks the same rule), else m_s with
 * each piece split into a single-key and a run share (w0 + w1 = x_i, w0 <= 1 - m, w1 <= m: the
 * tight form of the switch). */
static ts_status sub_model(cmodel *M, int64_t s) {
  const cov *C = M->C;
  const int64_t n = C->n, W = C->W;
  int64_t kmin, rmin;
  if (!sub_scan(M, s, &kmin, &rmin)) return TS_OK;
  bool anyvar = false;
  for (int64_t w = 0; w < W; w++) M->var[w] = M->A[w] & ~M->F[w], anyvar |= M->var[w] != 0, M->A[w] |= M->F[w];
  const bool hasfix = C->hasfix[s];
  if (!hasfix) TS_TRY(sub_open(M, s)); /* also when the keys are all fixed: then none are */
  if (!anyvar) return TS_OK;           /* every reachable key is computed anyway: a constant */
  int64_t klo, rlo, khi, rhi, kw, rw;
  ts__cov_keys_runs(M->F, 0, W, n, &klo, &rlo);
  ts__cov_keys_runs(M->A, 0, W, n, &khi, &rhi);
  ts__cov_keys_runs(M->Nw, 0, W, n, &kw, &rw);
  subtile T = {.s = s, .kfix = klo, .khi = khi, .mv = -1, .beta = M->scale * C->beta[s]}; /* klo becomes a bound below */
  if (!hasfix) klo = kmin, rlo = rmin; /* a nonempty need set holds at least one piece's keys */
  T.mode = 1.1 * (double)khi < 4.0 * (double)rlo ? 0 : !(1.1 * (double)klo < 4.0 * (double)rhi) ? 1 : -1;
  T.wmode = kw > 0 ? ts__attn_compact_rl(kw, rw) != 1 : (T.mode >= 0 ? T.mode : 0);
  if (T.mode < 0) TS_TRY(mv_add(M->m, &M->V, true, T.wmode, &T.mv));
  TS_TRY(sub_shares(M, &T));
  if (T.mode != 1) TS_TRY(sub_singles(M, &T));
  if (T.mode != 0) TS_TRY(sub_runs(M, &T));
  return TS_OK;
}

/* Solves component K by CBC from the warm start merged[] (its free pieces); sol[] (indexed like
 * merged) gets the answer when one comes back (*used). */
ts_status ts__cov_comp_cbc(const cov *C, const comp *K, const unsigned char *merged, double time_limit, unsigned char *sol,
                          bool *used, ts_attn_sched_info *info) {
  const int64_t W = C->W, np = K->npiece;
  cmodel M = {.C = C, .K = K, .merged = merged};
  ts_ilp_result res = {0};
  *used = false;
  M.xv = malloc((size_t)np * sizeof *M.xv), M.s0 = malloc((size_t)np * sizeof *M.s0), M.s1 = malloc((size_t)np * sizeof *M.s1);
  M.src = malloc((size_t)(np + 1) * sizeof *M.src), M.yv = malloc((size_t)(W * 64) * sizeof *M.yv);
  uint64_t *wb = malloc((size_t)(5 * W) * sizeof *wb);
  unsigned char *allm = malloc((size_t)C->npc);
  ts_status st = M.xv && M.s0 && M.s1 && M.src && M.yv && wb && allm ? TS_OK : ts_error(TS_ERR_OOM, "attn scheduler: coverage model buffers");
  if (st == TS_OK) {
    M.F = wb, M.A = wb + W, M.var = wb + 2 * W, M.Nw = wb + 3 * W, M.t = wb + 4 * W;
    memcpy(allm, merged, (size_t)C->npc); /* objective scale: the component all merged ~ 1000 */
    for (int64_t a = 0; a < np; a++) allm[K->piece[a]] = 1;
    double e = ts__cov_comp_eval(C, K, allm);
    M.scale = e > 0 ? 1000.0 / e : 1.0;
    st = ts_ilp_create(&M.m);
  }
  for (int64_t a = 0; a < np && st == TS_OK; a++) {
    st = mv_add(M.m, &M.V, true, merged[K->piece[a]] ? 1.0 : 0.0, &M.xv[a]);
    if (st == TS_OK) M.V.obj[M.xv[a]] -= M.scale * C->c[K->piece[a]];
  }
  for (int64_t b = 0; b < K->nsub && st == TS_OK; b++) st = sub_model(&M, K->sub[b]);
  for (int j = 0; j < M.V.n && st == TS_OK; j++)
    if (M.V.obj[j] != 0) st = ts_ilp_set_obj(M.m, j, M.V.obj[j]);
  if (st == TS_OK) {
    ts_ilp_options io;
    ts_ilp_options_default(&io);
    io.time_limit = time_limit;
    io.rel_gap = 1e-6;
    st = ts_ilp_set_warm_start(M.m, M.V.w, M.V.n);
    if (st == TS_OK) st = ts_ilp_solve(M.m, &io, &res);
    if (st == TS_OK) {
      info->cover_cbc++;
      info->cover_cbc_seconds += res.seconds;
      info->cover_cbc_vars += ts_ilp_num_vars(M.m);
      if (res.status != TS_ILP_OPTIMAL) info->cover_cbc_unproven++;
      if (res.x) {
        for (int64_t a = 0; a < np; a++) sol[K->piece[a]] = res.x[M.xv[a]] > 0.5;
        *used = true;
      }
    }
  }
  ts_ilp_result_free(&res);
  ts_ilp_destroy(M.m);
  free(M.V.w), free(M.V.obj), ts_ilp_row_free(&M.rb), free(M.xv), free(M.s0), free(M.s1), free(M.src), free(M.yv), free(wb), free(allm);
  return st;
}

