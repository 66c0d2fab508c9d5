/* The ILP's exact model of a panel's COMPACT pass (tessera/attn_sched.h, "ILP"): which keys each
 * row sub-tile computes given which block pieces merge into the pass. Per panel and pass height h:
 *
 *   sub-tile s (h rows) needs N_s = its residue's keys | the keys of the merged pieces' cells in s,
 *   and computes K_s = the plan's cover of N_s in key-equivalents (ts__attn_compact_rl: 1.1 per key
 *   when single keys compute less, else 4 per 4-key run; leftmost-greedy runs = a minimum cover),
 *   costing alpha_s + beta_s K_s when K_s > 0 (the secant of the cost model's price of an h-row
 *   block of K keys through the all-merged point, times the passes' family scale);
 *   panel load = sum_s cost_s + sum over standalone pieces of their cheapest tile.
 *
 * A piece's cost thus depends on which others merge: merged pieces share the keys and runs of
 * their sub-tile. The greedy prices each piece by its marginal against an otherwise merged pass,
 * exact for one piece at a time; two pieces stacked in one sub-tile that alone need some keys
 * have marginal 0 each and are merged, though taking both out saves the keys
 * (tests/test_attn_cover.c). Solving:
 *  - FIXED pieces: a piece whose standalone cost is at least the most its leaving could save (the
 *    cover of its keys nothing fixed needs, which bounds the saving by subadditivity, plus alpha
 *    where nothing fixed keeps the sub-tile open) merges in some optimum; repeated while the fixed
 *    keys grow;
 *  - the other, FREE pieces form COMPONENTS (sub-tiles joined by pieces spanning several), each
 *    solved exactly: enumerated up to COVER_ENUM free pieces, else by CBC (sched_cover_cbc.c):
 *      x_i in {0,1} free piece i merged; per sub-tile the mode m_s in {0,1} (runs or single keys;
 *      fixed when every need set between the fixed keys and all reachable ones picks the same rule),
 *      each piece split into shares w0 + w1 = x_i, w0 <= 1 - m_s, w1 <= m_s;
 *      single keys: z >= w0 of every piece reaching a key (keys with the same sources share one z;
 *      a key one piece alone reaches prices into its share); runs: y_q per start q in the key
 *      clusters (keys closer than 4 apart) a free piece reaches, sum_{k-3 <= q <= k} y_q >= w1 of
 *      every piece reaching key k (>= m_s for fixed keys); the other clusters are constants;
 *      open o_s >= x_i where nothing fixed keeps s running;
 *      min sum_s [alpha_s o_s + beta_s (1.1 sum z + 4 sum y + constants per mode)] + sum c_i (1 - x_i)
 *    (given x and m the cover rows form an interval matrix: the root LP comes out integral on
 *    every benchmark model), warm-started from the greedy's choices;
 *  - a LOWER BOUND per (panel, height) (cov_lower_bound) skips heights that cannot win, and the
 *    models are solved most promising first (best known load minus bound) while the budget lasts;
 *    a (panel, height) within COVER_GAP of its bound is left at its warm start.
 * Every answer is re-priced by the exact evaluation (cov_eval), and the warm start is kept when
 * it is not worse. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_cover.h"

/* Components with at most this many free pieces are enumerated (2^COVER_ENUM evaluations). */
#define COVER_ENUM 4
/* Longest CBC solve of one component (seconds), within the stage's budget. */
#define COVER_CBC_MAX_S 0.1
/* A panel's model at a height is solved only when its lower bound there is more than this fraction
 * below the panel's best known load (below it the gain is far inside the cost model's error). */
#define COVER_GAP 0.01

/* Keys and 4-key runs (leftmost greedy, starts clamped to n - 4 as the plan does) of u[0 .. nw),
 * word 0 = columns 64 w0 .. */
void ts__cov_keys_runs(const uint64_t *u, int64_t w0, int64_t nw, int64_t n, int64_t *keys, int64_t *runs) {
  int64_t k = 0, r = 0, next = -1;
  for (int64_t w = 0; w < nw; w++)
    for (uint64_t x = u[w]; x; x &= x - 1) {
      int64_t j = (w0 + w) * 64 + __builtin_ctzll(x);
      k++;
      if (j >= next) {
        int64_t q = j < n - TS__ATTN_RUN ? j : n - TS__ATTN_RUN;
        r++, next = q + TS__ATTN_RUN;
      }
    }
  *keys = k, *runs = r;
}

/* Key-equivalents the plan computes for the key set u (ts__attn_compact_rl's rule). */
static double kcov(const uint64_t *u, int64_t w0, int64_t nw, int64_t n) {
  int64_t k, r;
  ts__cov_keys_runs(u, w0, nw, n, &k, &r);
  if (k == 0) return 0.0;
  return ts__attn_compact_rl(k, r) == 1 ? ceil(1.1 * (double)k) : (double)(r * TS__ATTN_RUN);
}

/* The most a key set can add to any cover: max of its own runs and single-key prices. */
static double kcov_ub(const uint64_t *u, int64_t w0, int64_t nw, int64_t n) {
  int64_t k, r;
  ts__cov_keys_runs(u, w0, nw, n, &k, &r);
  double a = ceil(1.1 * (double)k), b = (double)(r * TS__ATTN_RUN);
  return a > b ? a : b;
}

static double subtile_price(int64_t rows, double keys, double nnz, int32_t h, int32_t bc, ts_attn_cost_fn cost, void *user) {
  ts_block b = {.rows = (int32_t)rows, .cols = (int32_t)(keys < 1 ? 1 : keys), .nnz = (int64_t)(nnz < 1 ? 1 : nnz)};
  return cost(&b, (ts_attn_tile){h, bc}, user);
}

static void cov_free(cov *C) {
  free(C->alpha), free(C->beta), free(C->res), free(C->fixed), free(C->hasfix), free(C->need), free(C->nstart);
  free(C->bits), free(C->state), free(C->u);
}

/* Builds the model of panel P at height hh: needs, residue keys, the secant of every sub-tile and
 * the fixed pieces. c: [npc] standalone costs; scale: the passes' family scale. */
static ts_status cov_build(cov *C, const ts_bitmap *mask, const ts_attn_panel *P, const ts_attn_segment *pieces, int64_t npc,
                           const double *c, int32_t hh, const ts_attn_sched_opts *o, ts_attn_cost_fn cost, double scale) {
  memset(C, 0, sizeof *C);
  const int64_t n = mask->cols, W = mask->stride, nr = P->nr, ns = (nr + hh - 1) / hh;
  C->n = n, C->W = W, C->ns = ns, C->hh = hh, C->npc = npc, C->c = c;
  int64_t cap_need = 0, cap_bits = 0;
  for (int64_t k = 0; k < npc; k++) {
    int64_t a = pieces[k].r0 - P->r0, b = a + pieces[k].nr, w0 = pieces[k].c0 >> 6, w1 = ((int64_t)pieces[k].c0 + pieces[k].nc - 1) >> 6;
    int64_t subs = (b - 1) / hh - a / hh + 1;
    cap_need += subs, cap_bits += subs * (w1 - w0 + 1);
  }
  uint64_t *R = malloc((size_t)(nr * W) * sizeof *R);
  C->alpha = calloc((size_t)ns, sizeof *C->alpha), C->beta = calloc((size_t)ns, sizeof *C->beta);
  C->res = calloc((size_t)(ns * W), sizeof *C->res), C->fixed = malloc((size_t)(ns * W) * sizeof *C->fixed);
  C->hasfix = calloc((size_t)ns, 1), C->need = malloc((size_t)(cap_need ? cap_need : 1) * sizeof *C->need);
  C->nstart = calloc((size_t)npc + 1, sizeof *C->nstart), C->bits = calloc((size_t)(cap_bits ? cap_bits : 1), sizeof *C->bits);
  C->state = calloc((size_t)(npc ? npc : 1), 1), C->u = malloc((size_t)W * sizeof *C->u);
  if (!R || !C->alpha || !C->beta || !C->res || !C->fixed || !C->hasfix || !C->need || !C->nstart || !C->bits || !C->state || !C->u) {
    free(R);
    cov_free(C);
    return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the coverage model of a %lld-row panel", (long long)nr);
  }
  for (int64_t i = 0; i < nr; i++) memcpy(R + i * W, ts_bitmap_row(mask, P->r0 + i), (size_t)W * sizeof *R);
  int64_t *cells = calloc((size_t)ns, sizeof *cells);
  if (!cells) {
    free(R);
    cov_free(C);
    return ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld sub-tile counts", (long long)ns);
  }
  for (int64_t i = 0; i < nr; i++) /* the panel's cells per sub-tile */
    for (int64_t w = 0; w < W; w++) cells[i / hh] += __builtin_popcountll(R[i * W + w]);
  /* the pieces' owned cells (ownership order), OR-ed per sub-tile and taken from R (blocks from
   * ts_blocks_extract are disjoint; with overlapping blocks a later standalone piece would take
   * the cells a merged earlier one leaves, which this prices in the pass: a pricing error only) */
  for (int64_t k = 0; k < npc; k++) {
    const ts_attn_segment *g = &pieces[k];
    const int64_t a = g->r0 - P->r0, b = a + g->nr, c0 = g->c0, c1 = c0 + g->nc, w0 = c0 >> 6, w1 = (c1 - 1) >> 6;
    for (int64_t s = a / hh; s * hh < b && s < ns; s++) {
      cov_need *nd = &C->need[C->nneed];
      *nd = (cov_need){.piece = (int32_t)k, .sub = (int32_t)s, .w0 = (int32_t)w0, .nw = (int32_t)(w1 - w0 + 1), .off = C->nbits};
      uint64_t *bits = C->bits + C->nbits, any = 0;
      const int64_t r0 = s * hh > a ? s * hh : a, r1 = (s + 1) * hh < b ? (s + 1) * hh : b;
      for (int64_t i = r0; i < r1; i++)
        for (int64_t w = w0; w <= w1; w++) {
          uint64_t m = ~(uint64_t)0;
          if (w == w0) m &= ~(uint64_t)0 << (c0 & 63);
          if (w == w1 && (c1 & 63)) m &= ((uint64_t)1 << (c1 & 63)) - 1;
          uint64_t x = R[i * W + w] & m;
          bits[w - w0] |= x, any |= x;
          R[i * W + w] &= ~m;
        }
      if (any) C->nneed++, C->nbits += nd->nw;
    }
    C->nstart[k + 1] = C->nneed;
  }
  for (int64_t i = 0; i < nr; i++) /* what is left is the residue */
    for (int64_t w = 0; w < W; w++) C->res[(i / hh) * W + w] |= R[i * W + w];
  free(R);
  /* per sub-tile: all merged (K_hi) and a reference point (the residue alone, at least half of
   * K_hi) of the cost model, the secant through them */
  for (int64_t s = 0; s < ns; s++) {
    uint64_t *u = C->u;
    memcpy(u, C->res + s * W, (size_t)W * sizeof *u);
    for (int64_t w = 0; w < W; w++) C->hasfix[s] |= u[w] != 0;
    double klo = kcov(u, 0, W, n);
    for (int64_t x = 0; x < C->nneed; x++)
      if (C->need[x].sub == s)
        for (int32_t w = 0; w < C->need[x].nw; w++) u[C->need[x].w0 + w] |= C->bits[C->need[x].off + w];
    double khi = kcov(u, 0, W, n), rows = (s + 1) * hh < nr ? hh : nr - s * hh;
    if (khi <= 0) continue;
    double kref = klo > khi / 2 ? klo : khi / 2;
    if (kref >= khi) kref = khi / 2;
    double chi = subtile_price((int64_t)rows, khi, (double)cells[s], hh, o->compact_bc, cost, o->cost_user);
    double cref = subtile_price((int64_t)rows, kref, (double)cells[s] * kref / khi, hh, o->compact_bc, cost, o->cost_user);
    double beta = (chi - cref) / (khi - kref), alpha;
    if (!(beta >= 0)) beta = 0;
    alpha = chi - beta * khi;
    if (alpha < 0) alpha = 0, beta = chi / khi;
    C->alpha[s] = alpha * scale, C->beta[s] = beta * scale;
  }
  free(cells);
  /* fixed pieces: standalone costs at least what their leaving could save, which is at most the
   * cover of their keys that nothing fixed needs (subadditivity), plus the sub-tile's alpha when
   * nothing fixed keeps it open; repeated while the fixed keys grow */
  memcpy(C->fixed, C->res, (size_t)(ns * W) * sizeof *C->fixed);
  for (bool grew = true; grew;) {
    grew = false;
    for (int64_t k = 0; k < npc; k++) {
      if (C->state[k]) continue;
      double ub = 0;
      for (int64_t x = C->nstart[k]; x < C->nstart[k + 1] && ub <= c[k]; x++) {
        const cov_need *nd = &C->need[x];
        const uint64_t *f = C->fixed + nd->sub * W + nd->w0;
        const bool open = C->hasfix[nd->sub];
        for (int32_t w = 0; w < nd->nw; w++) C->u[w] = C->bits[nd->off + w] & ~f[w];
        ub += C->beta[nd->sub] * kcov_ub(C->u, nd->w0, nd->nw, n) + (open ? 0.0 : C->alpha[nd->sub]);
      }
      if (c[k] >= ub) {
        C->state[k] = 1, grew = true;
        for (int64_t x = C->nstart[k]; x < C->nstart[k + 1]; x++)
          for (int32_t w = 0; w < C->need[x].nw; w++) C->fixed[C->need[x].sub * W + C->need[x].w0 + w] |= C->bits[C->need[x].off + w];
        for (int64_t x = C->nstart[k]; x < C->nstart[k + 1]; x++) C->hasfix[C->need[x].sub] = 1;
      }
    }
  }
  return TS_OK;
}

/* C->u |= the keys merged piece k needs in sub-tile s. */
static void or_needs(const cov *C, int64_t k, int64_t s) {
  for (int64_t x = C->nstart[k]; x < C->nstart[k + 1]; x++)
    if (C->need[x].sub == s)
      for (int32_t w = 0; w < C->need[x].nw; w++) C->u[C->need[x].w0 + w] |= C->bits[C->need[x].off + w];
}

/* Exact load of the panel when the pieces with merged[k] set merge (every piece, fixed or free). */
static double cov_eval(const cov *C, const unsigned char *merged) {
  double L = 0;
  for (int64_t k = 0; k < C->npc; k++) L += merged[k] ? 0.0 : C->c[k];
  for (int64_t s = 0; s < C->ns; s++) {
    memcpy(C->u, C->res + s * C->W, (size_t)C->W * sizeof *C->u);
    for (int64_t k = 0; k < C->npc; k++)
      if (merged[k]) or_needs(C, k, s);
    double K = kcov(C->u, 0, C->W, C->n);
    if (K > 0) L += C->alpha[s] + C->beta[s] * K;
  }
  return L;
}

/* A lower bound of the panel's load (to skip a height that cannot win), the larger of two:
 * (1) the passes over the fixed keys alone (merging more never lowers a sub-tile's keys);
 * (2) the fixed keys at one key-equivalent each (a cover computes at least its keys: 4 per run
 * >= the keys it covers, 1.1 per single key), plus per free piece the least of its standalone cost
 * and its share of what merging it must add: each modelled key it reaches split evenly among the
 * free pieces reaching it (some merged one brings it), and alpha of a sub-tile without fixed keys
 * split among the pieces in it. */
static double cov_lower_bound(const cov *C) {
  double lb1 = 0, lb2 = 0;
  const int64_t W = C->W;
  for (int64_t s = 0; s < C->ns; s++) {
    if (!C->hasfix[s]) continue;
    double K = kcov(C->fixed + s * W, 0, W, C->n);
    int64_t k = 0;
    for (int64_t w = 0; w < W; w++) k += __builtin_popcountll(C->fixed[s * W + w]);
    lb1 += K > 0 ? C->alpha[s] + C->beta[s] * K : 0.0;
    lb2 += k > 0 ? C->alpha[s] + C->beta[s] * (double)k : 0.0;
  }
  /* per sub-tile: how many free pieces reach each non-fixed key, and how many free pieces it has */
  uint8_t *deg = calloc((size_t)(W * 64), 1);
  int64_t *npc_s = calloc((size_t)C->ns, sizeof *npc_s);
  if (!deg || !npc_s) { /* (1) alone */
    free(deg), free(npc_s);
    return lb1;
  }
  for (int64_t x = 0; x < C->nneed; x++) npc_s[C->need[x].sub] += !C->state[C->need[x].piece];
  for (int64_t k = 0; k < C->npc; k++) {
    if (C->state[k]) continue;
    double share = 0;
    for (int64_t x = C->nstart[k]; x < C->nstart[k + 1]; x++) {
      const cov_need *nd = &C->need[x];
      const int64_t s = nd->sub;
      for (int64_t y = 0; y < C->nneed; y++) { /* degrees of this sub-tile's keys */
        const cov_need *e = &C->need[y];
        if (e->sub != s || C->state[e->piece]) continue;
        for (int32_t w = 0; w < e->nw; w++)
          for (uint64_t b = C->bits[e->off + w] & ~C->fixed[s * W + e->w0 + w]; b; b &= b - 1) {
            int64_t j = (e->w0 + w) * 64 + __builtin_ctzll(b);
            if (deg[j] < 255) deg[j]++;
          }
      }
      double sk = 0;
      for (int32_t w = 0; w < nd->nw; w++)
        for (uint64_t b = C->bits[nd->off + w] & ~C->fixed[s * W + nd->w0 + w]; b; b &= b - 1)
          sk += 1.0 / deg[(nd->w0 + w) * 64 + __builtin_ctzll(b)];
      share += C->beta[s] * sk + (C->hasfix[s] ? 0.0 : C->alpha[s] / (double)npc_s[s]);
      for (int64_t y = 0; y < C->nneed; y++) { /* reset the degrees */
        const cov_need *e = &C->need[y];
        if (e->sub == s)
          for (int32_t w = 0; w < e->nw; w++)
            for (uint64_t b = C->bits[e->off + w]; b; b &= b - 1) deg[(e->w0 + w) * 64 + __builtin_ctzll(b)] = 0;
      }
    }
    lb2 += share < C->c[k] ? share : C->c[k];
  }
  free(deg), free(npc_s);
  return lb1 > lb2 ? lb1 : lb2;
}

/* ---- components of free pieces ---------------------------------------------------------------- */

static int64_t uf_find(int64_t *p, int64_t a) {
  while (p[a] != a) a = p[a] = p[p[a]];
  return a;
}

/* Cost of one component's sub-tiles and free pieces under merged[] (the other pieces as fixed). */
double ts__cov_comp_eval(const cov *C, const comp *K, const unsigned char *merged) {
  double L = 0;
  for (int64_t a = 0; a < K->npiece; a++) L += merged[K->piece[a]] ? 0.0 : C->c[K->piece[a]];
  for (int64_t b = 0; b < K->nsub; b++) {
    const int64_t s = K->sub[b];
    memcpy(C->u, C->fixed + s * C->W, (size_t)C->W * sizeof *C->u);
    for (int64_t a = 0; a < K->npiece; a++) {
      const int64_t k = K->piece[a];
      if (merged[k]) or_needs(C, k, s);
    }
    double Kc = kcov(C->u, 0, C->W, C->n);
    if (Kc > 0) L += C->alpha[s] + C->beta[s] * Kc;
  }
  return L;
}

/* ---- one panel at one height ------------------------------------------------------------------- */

ts_status ts__sched_cover_panel(const ts_bitmap *mask, const ts_attn_panel *P, const ts_attn_segment *pieces, int64_t npc,
                                const double *c, int32_t hh, const ts_attn_sched_opts *o, ts_attn_cost_fn cost, double scale,
                                const unsigned char *warm, bool solve, double deadline, unsigned char *merged, double *load,
                                double *warm_load, double *lower, ts_attn_sched_info *info) {
  cov C;
  TS_TRY(cov_build(&C, mask, P, pieces, npc, c, hh, o, cost, scale));
  const int64_t ns = C.ns;
  int64_t *uf = malloc((size_t)ns * sizeof *uf);
  int64_t *plist = malloc((size_t)(npc ? npc : 1) * sizeof *plist), *slist = malloc((size_t)ns * sizeof *slist);
  unsigned char *cur = malloc((size_t)(npc ? npc : 1)), *sol = malloc((size_t)(npc ? npc : 1));
  ts_status st = uf && plist && slist && cur && sol ? TS_OK : ts_error(TS_ERR_OOM, "attn scheduler: coverage components");
  if (st == TS_OK) { /* the warm start with the fixed pieces merged: never worse (see cov_build) */
    for (int64_t k = 0; k < npc; k++) cur[k] = C.state[k] ? 1 : warm[k];
    *warm_load = cov_eval(&C, warm);
    *lower = cov_lower_bound(&C);
  }
  if (st == TS_OK && solve) {
    for (int64_t s = 0; s < ns; s++) uf[s] = s;
    int64_t nfree = 0;
    for (int64_t k = 0; k < npc; k++) {
      if (C.state[k] || C.nstart[k] == C.nstart[k + 1]) {
        if (C.nstart[k] == C.nstart[k + 1]) cur[k] = 1; /* no cells: merging costs nothing */
        continue;
      }
      nfree++;
      int64_t r0 = uf_find(uf, C.need[C.nstart[k]].sub);
      for (int64_t x = C.nstart[k] + 1; x < C.nstart[k + 1]; x++) {
        int64_t r = uf_find(uf, C.need[x].sub);
        if (r != r0) uf[r] = r0;
      }
    }
    info->cover_free += nfree, info->cover_fixed += npc - nfree;
    /* components in sub-tile order of their roots */
    for (int64_t s = 0; s < ns && st == TS_OK; s++) {
      if (uf_find(uf, s) != s) continue;
      comp K = {.piece = plist, .sub = slist};
      for (int64_t k = 0; k < npc; k++)
        if (!C.state[k] && C.nstart[k] < C.nstart[k + 1] && uf_find(uf, C.need[C.nstart[k]].sub) == s) plist[K.npiece++] = k;
      if (K.npiece == 0) continue;
      for (int64_t t = 0; t < ns; t++)
        if (uf_find(uf, t) == s) slist[K.nsub++] = t;
      if (K.npiece <= COVER_ENUM) { /* every subset */
        double best = INFINITY;
        int64_t bm = 0;
        for (int64_t mask_ = 0; mask_ < ((int64_t)1 << K.npiece); mask_++) {
          for (int64_t a = 0; a < K.npiece; a++) cur[plist[a]] = (mask_ >> a) & 1;
          double v = ts__cov_comp_eval(&C, &K, cur);
          if (v < best) best = v, bm = mask_;
        }
        for (int64_t a = 0; a < K.npiece; a++) cur[plist[a]] = (bm >> a) & 1;
        info->cover_enum++;
        continue;
      }
      double left = deadline - ts_now();
      if (left < 1e-3) { /* out of time: the warm start */
        info->cover_timeouts++;
        continue;
      }
      bool used = false;
      memcpy(sol, cur, (size_t)npc);
      st = ts__cov_comp_cbc(&C, &K, cur, left < COVER_CBC_MAX_S ? left : COVER_CBC_MAX_S, sol, &used, info);
      if (st == TS_OK && used && ts__cov_comp_eval(&C, &K, sol) < ts__cov_comp_eval(&C, &K, cur)) memcpy(cur, sol, (size_t)npc);
    }
  }
  if (st == TS_OK) {
    double v = cov_eval(&C, cur);
    if (v <= *warm_load) memcpy(merged, cur, (size_t)npc), *load = v;
    else memcpy(merged, warm, (size_t)npc), *load = *warm_load;
  }
  free(uf), free(plist), free(slist), free(cur), free(sol);
  cov_free(&C);
  return st;
}

/* ---- the driver: every panel at every height, then panels to threads ---------------------------- */

/* A (panel, height) model worth solving; gain: the panel's best known load minus its lower bound. */
typedef struct cover_cand {
  int64_t p;
  int h;
  double gain;
} cover_cand;

static int cmp_cand(const void *a, const void *b) {
  const cover_cand *x = a, *y = b;
  if (x->gain != y->gain) return x->gain > y->gain ? -1 : 1;
  return x->p != y->p ? (x->p > y->p) - (x->p < y->p) : x->h - y->h;
}

ts_status ts__sched_cover_solve(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                                const double *scale, int *choice, int *height, int32_t *thread, ts_attn_sched_info *info) {
  const double t0 = ts_now();
  const ts_attn_schedule *s = B->s;
  const int64_t np = pb->npanels, ni = pb->npieces;
  const int nt = pb->ntiles, nh = pb->nheights;
  const int P = info->threads;
  ts_attn_cost_fn cost = o->cost ? o->cost : ts_attn_cost_default;
  /* the stage's budget: half the time limit for the panels, the rest for threads */
  const double deadline = t0 + 0.5 * o->time_limit;
  int64_t *pstart = calloc((size_t)np + 1, sizeof *pstart);
  int *best_t = malloc((size_t)(ni ? ni : 1) * sizeof *best_t), *ich = malloc((size_t)(ni ? ni : 1) * sizeof *ich);
  int *ih = malloc((size_t)np * sizeof *ih), dummy = 0;
  int32_t *ith = malloc((size_t)np * sizeof *ith);
  double *c = malloc((size_t)(ni ? ni : 1) * sizeof *c), *L = malloc((size_t)np * sizeof *L), *G = malloc((size_t)np * sizeof *G);
  unsigned char *warm = malloc((size_t)(ni ? ni : 1)), *mg = malloc((size_t)(ni ? ni : 1) * (size_t)(nh ? nh : 1));
  int64_t *pp0 = malloc(sizeof *pp0);
  double *Lq = malloc((size_t)(np * nh) * sizeof *Lq), *LBq = malloc((size_t)(np * nh) * sizeof *LBq), *best = malloc((size_t)np * sizeof *best);
  int *bh = malloc((size_t)np * sizeof *bh);
  cover_cand *cand = malloc((size_t)(np * nh) * sizeof *cand);
  ts_status st = pstart && best_t && ich && ih && ith && c && L && G && warm && mg && pp0 && Lq && LBq && best && bh && cand
                     ? TS_OK
                     : ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the coverage stage (%lld pieces)", (long long)ni);
  for (int64_t i = 0; i < ni && st == TS_OK; i++) { /* a standalone piece runs its cheapest tile */
    int b = 0;
    for (int t = 1; t < nt; t++)
      if (pb->cost[i * nt + t] < pb->cost[i * nt + b]) b = t;
    best_t[i] = b, c[i] = pb->cost[i * nt + b];
    pstart[pb->piece_panel[i] + 1]++;
  }
  for (int64_t p = 0; p < np && st == TS_OK; p++) pstart[p + 1] += pstart[p];
  info->cover_run = true;
  /* pass 1, every panel at every height: the warm start (the greedy's choices at its height, else
   * its rule at h) with the fixed pieces merged, and a lower bound */
  for (int64_t p = 0; p < np && st == TS_OK; p++) {
    const int64_t i0 = pstart[p], npc = pstart[p + 1] - i0;
    double sumc = 0;
    for (int64_t k = 0; k < npc; k++) sumc += c[i0 + k];
    const bool must = pb->must_open && pb->must_open[p];
    best[p] = must ? INFINITY : sumc, bh[p] = -1; /* no pass: every piece standalone (without residue) */
    G[p] = height[p] < 0 ? sumc : NAN;
    for (int h = 0; h < nh && st == TS_OK; h++) {
      unsigned char *m = mg + (size_t)h * ni + i0;
      for (int64_t k = 0; k < npc; k++) {
        const int64_t i = i0 + k;
        warm[i] = height[p] == h ? choice[i] >= nt : pb->merge[i * nh + h] < c[i];
      }
      double Wh;
      st = ts__sched_cover_panel(B->mask, &s->panels[p], npc ? &s->segs[B->segof[i0]] : NULL, npc, c + i0, o->heights[h], o,
                                 cost, scale[1 + h], warm + i0, false, 0.0, m, &Lq[p * nh + h], &Wh, &LBq[p * nh + h], info);
      if (height[p] == h) G[p] = Wh;
      if (st == TS_OK && Lq[p * nh + h] < best[p]) best[p] = Lq[p * nh + h], bh[p] = h;
    }
  }
  /* pass 2: the exact models, most promising first (best known load minus the height's bound),
   * while the budget lasts; a height whose bound is within COVER_GAP of the panel's best is left */
  int64_t ncand = 0;
  for (int64_t p = 0; p < np && st == TS_OK; p++)
    for (int h = 0; h < nh; h++) {
      if (LBq[p * nh + h] < best[p] * (1 - COVER_GAP)) cand[ncand++] = (cover_cand){p, h, best[p] - LBq[p * nh + h]};
      else info->cover_pruned++;
    }
  qsort(cand, (size_t)ncand, sizeof *cand, cmp_cand);
  for (int64_t x = 0; x < ncand && st == TS_OK; x++) {
    const int64_t p = cand[x].p, i0 = pstart[p], npc = pstart[p + 1] - i0;
    const int h = cand[x].h;
    if (!(LBq[p * nh + h] < best[p] * (1 - COVER_GAP))) {
      info->cover_pruned++;
      continue;
    }
    if (ts_now() > deadline - 1e-3) {
      info->cover_timeouts += ncand - x;
      break;
    }
    unsigned char *m = mg + (size_t)h * ni + i0;
    for (int64_t k = 0; k < npc; k++) warm[i0 + k] = m[k];
    double Lh, Wh, lb;
    st = ts__sched_cover_panel(B->mask, &s->panels[p], npc ? &s->segs[B->segof[i0]] : NULL, npc, c + i0, o->heights[h], o,
                               cost, scale[1 + h], warm + i0, true, deadline, m, &Lh, &Wh, &lb, info);
    if (st == TS_OK && Lh < Lq[p * nh + h]) Lq[p * nh + h] = Lh;
    if (st == TS_OK && Lq[p * nh + h] < best[p]) best[p] = Lq[p * nh + h], bh[p] = h;
  }
  for (int64_t p = 0; p < np && st == TS_OK; p++) {
    const double base = pb->base ? pb->base[p] : 0.0;
    L[p] = base + best[p], G[p] += base, ih[p] = bh[p];
    for (int64_t i = pstart[p]; i < pstart[p + 1]; i++) ich[i] = bh[p] >= 0 && mg[(size_t)bh[p] * ni + i] ? nt + bh[p] : best_t[i];
  }
  info->cover_ms = (ts_now() - t0) * 1e3;
  /* panels to threads: P||Cmax over the panel loads (LPT, then the aggregated ILP) */
  ts_attn_sched_info ti;
  memset(&ti, 0, sizeof ti);
  if (st == TS_OK) {
    ts_attn_sched_problem tp = {.npanels = np, .npieces = 0, .ntiles = 1, .piece_panel = pp0, .cost = L, .base = L};
    ts_attn_sched_opts to = *o;
    to.threads = P;
    to.time_limit = o->time_limit - (ts_now() - t0);
    if (to.time_limit < 0.05) to.time_limit = 0.05;
    st = ts_attn_sched_problem_solve(&tp, &to, &dummy, NULL, ith, &ti);
  }
  if (st == TS_OK) {
    double gl[TS_ATTN_THREAD_MAX] = {0}, il[TS_ATTN_THREAD_MAX] = {0}, gm = 0, im = 0, gt = 0, it = 0, lsum = 0, lmax = 0;
    for (int64_t p = 0; p < np; p++) {
      gl[thread[p]] += G[p], gt += G[p], il[ith[p]] += L[p], it += L[p];
      lsum += L[p], lmax = L[p] > lmax ? L[p] : lmax;
    }
    for (int q = 0; q < P; q++) gm = gl[q] > gm ? gl[q] : gm, im = il[q] > im ? il[q] : im;
    double ol[TS_ATTN_THREAD_MAX] = {0}, om = 0; /* the greedy's assignment over the ILP's loads */
    for (int64_t p = 0; p < np; p++) ol[thread[p]] += L[p];
    for (int q = 0; q < P; q++) om = ol[q] > om ? ol[q] : om;
    if (om < im) memcpy(ith, thread, (size_t)np * sizeof *ith), im = om;
    info->greedy_makespan_linear = info->greedy_makespan;
    info->greedy_makespan = gm, info->greedy_total = gt;
    info->ilp_makespan = im;
    info->lower_bound = lsum / P > lmax ? lsum / P : lmax;
    info->ilp_status = ti.ilp_status, info->ilp_gap = ti.ilp_gap, info->ilp_seconds = ti.ilp_seconds + info->cover_cbc_seconds;
    info->ilp_nodes = ti.ilp_nodes, info->ilp_vars = ti.ilp_vars, info->ilp_rows = ti.ilp_rows, info->ilp_skipped = ti.ilp_skipped;
    info->tiles_fixed = false;
    double tol = 1e-9 * (gm > 0 ? gm : 1);
    if (im < gm - tol || (im <= gm + tol && it < gt - tol)) {
      memcpy(choice, ich, (size_t)ni * sizeof *choice);
      memcpy(height, ih, (size_t)np * sizeof *height);
      memcpy(thread, ith, (size_t)np * sizeof *thread);
      info->makespan = im, info->total = it;
      info->solver = TS_ATTN_SOLVER_ILP;
      info->ilp_improved = true;
    } else {
      info->makespan = gm, info->total = gt;
    }
    info->merged = info->compact_panels = 0;
    for (int64_t i = 0; i < ni; i++) info->merged += choice[i] >= nt;
    for (int64_t p = 0; p < np; p++) info->compact_panels += height[p] >= 0;
  }
  free(pstart), free(best_t), free(ich), free(ih), free(ith), free(c), free(L), free(G), free(warm), free(mg), free(pp0);
  free(Lq), free(LBq), free(best), free(bh), free(cand);
  return st;
}

ts_status ts__sched_cover_price(const ts__sched_build *B, int32_t hh, const unsigned char *merged, double *cost) {
  const ts_attn_schedule *s = B->s;
  ts_attn_cost_fn cf = B->o->cost ? B->o->cost : ts_attn_cost_default;
  double *zero = calloc((size_t)(B->npieces ? B->npieces : 1), sizeof *zero);
  unsigned char *none = calloc((size_t)(B->npieces ? B->npieces : 1), 1);
  ts_status st = zero && none ? TS_OK : ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld pieces", (long long)B->npieces);
  *cost = 0;
  for (int64_t p = 0, x = 0; p < s->npanels && st == TS_OK; p++) {
    const ts_attn_panel *P = &s->panels[p];
    int64_t x0 = x;
    while (x < B->npieces && B->segof[x] < P->seg0 + P->nseg) x++;
    cov C;
    st = cov_build(&C, B->mask, P, x > x0 ? &s->segs[B->segof[x0]] : NULL, x - x0, zero + x0, hh, B->o, cf, 1.0);
    if (st == TS_OK) *cost += cov_eval(&C, merged ? merged + x0 : none + x0), cov_free(&C);
  }
  free(zero), free(none);
  return st;
}
