/* Attention backward driver (FlashAttention-2 style; formulas: tessera/attn_train.h). It walks the
 * forward plan's own items, so it skips exactly what the forward skips: per panel (one thread) it
 * packs Q^T and dO^T, computes Dr_i = dO_i . O_i and lse2_i = lse_i log2(e), then per item
 * recomputes S^T = K Q^T (or reads the stored scores), P = exp2(S c - lse2) on the allowed cells,
 * dP^T = V dO^T, dS = scale P (dP - Dr), and accumulates dQ += dS K (the panel's rows: an fp32
 * accumulator written once), dK += dS^T Q and dV += P^T dO (keys other panels share: see below).
 * S^T, dP^T and dQ run the forward's micro-kernels; P / dS and the key-major dK / dV updates are
 * the backward's own (attn_bwd_ref.c, attn_bwd_body.h). Per computed cell: 2d flops for S, 2d for
 * dP, 2d each for dQ, dK and dV: 10d, 2.5x the forward's 4d (8d with stored scores).
 *
 * Threads take one (batch, head) at a time: the head's panels are spread dynamically (most cells
 * first), and dK / dV of the head are summed race-free by
 *   PARTIALS: every thread adds into its own zeroed [n][d] pair; after the head's panels, the
 *             threads sum the pairs into dK / dV (chunks) and zero them again (see run: the pairs
 *             are double-buffered, one barrier per head);
 *   ATOMIC:   every thread adds each item's per-key sums into dK / dV with compare-and-swap.
 * bf16 Q, K, V: the head's three arrays are converted to fp32 once (by all threads, before its
 * panels), then the fp32 path runs on the copies; accumulation is fp32 throughout. Nothing here
 * allocates: workspaces, partials and the bf16 copies are made by ts_attn_bwd_create. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "tessera/attn_train.h"

static const ts__variant g_bwd_variants[] = {{TS__LV_SCALAR, &ts__attn_bwd_kern_ref},
                                             {TS__LV_AVX2, &ts__attn_bwd_kern_avx2},
                                             {TS__LV_AVX512, &ts__attn_bwd_kern_avx512}};
ts__dispatch ts__attn_bwd_dispatch = TS__DISPATCH("attn_bwd", g_bwd_variants);

const ts__attn_bwd_kern *ts__attn_bwd_kern_for(ts_isa isa) {
  return ts__dispatch_for(&ts__attn_bwd_dispatch, ts__level_top(isa), NULL);
}

/* AUTO's choice: PARTIALS. Measured 2026-12-07 on an AMD EPYC VM (Zen 3 class, AVX2, no AVX-512,
 * 2 vCPUs), 2 threads, n = 4096, d = 64, 8 heads, fp32, the scheduled plans (bench/bench_attn_bwd.c,
 * 21 interleaved rounds; docs/notes/attn-backward.md): PARTIALS / ATOMIC time per round, median
 * [quartiles], window2d k = 13 0.61 [0.58, 0.64], swin 0.72 [0.64, 0.80], vitdet 0.80 [0.74, 0.86].
 * An atomic add is a compare-and-swap per pair of floats (d/2 per key per item, against br d FMAs
 * for the sums) and the two threads' neighbouring panels contend for the same keys. */
#define BWD_AUTO TS_ATTN_BWD_PARTIALS

static const char *const g_reduce_names[TS_ATTN_BWD_REDUCE_COUNT] = {"auto", "partials", "atomic"};

const char *ts_attn_bwd_reduce_name(ts_attn_bwd_reduce r) {
  return r >= 0 && r < TS_ATTN_BWD_REDUCE_COUNT ? g_reduce_names[r] : "unknown";
}

ts_status ts_attn_bwd_reduce_parse(const char *name, ts_attn_bwd_reduce *out) {
  for (int r = 0; name && r < TS_ATTN_BWD_REDUCE_COUNT; r++)
    if (!strcmp(name, g_reduce_names[r])) {
      if (out) *out = (ts_attn_bwd_reduce)r;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "attn backward: unknown reduction '%s' (auto, partials, atomic)", name ? name : "(null)");
}

/* Per-thread workspace (floats): Q^T and dO^T [d][ldq] (the forward's packing), the dQ accumulator
 * [ldq][ldo], lse2, Dr and ones [ldq1] (ones: alpha of the dQ kernels, l of the finish), S^T / P^T
 * and dP^T / dS^T [st_rows][lds]. The forward plan's geometry (ts__attn_ws_layout) sizes them. */
typedef struct bwd_ws {
  float *qt, *dot, *dq, *lse2, *dr, *ones, *st, *dpt;
} bwd_ws;

struct ts_attn_bwd {
  const ts_attn_plan *pl;
  int nthreads;
  ts_attn_bwd_reduce reduce;
  int64_t ldq1;      /* entries of lse2 / Dr / ones: max(ldq, lds) */
  size_t ws_floats;  /* per thread, a multiple of 16 */
  float *ws;         /* nthreads * ws_floats */
  float *part;       /* PARTIALS, nthreads > 1: [2][nthreads][2][n][d]: per head parity and thread, the dK and dV
                        partials (a row holds a sum only where its seen flag is set) */
  uint8_t *seen;     /* [2][nthreads][2][n]: the partial rows written in the current head; 0 outside a backward */
  float *conv;       /* [3][n][d]: one head's Q, K, V in fp32 (bf16 inputs) */
  size_t bytes;
};

static bwd_ws ws_bind(const ts_attn_bwd *b, int tid) {
  const ts__attn_ws_layout *L = &b->pl->ws;
  const int64_t d = b->pl->d;
  float *p = b->ws + (size_t)tid * b->ws_floats;
  bwd_ws w;
  w.qt = p, p += d * L->ldq;
  w.dot = p, p += d * L->ldq;
  w.dq = p, p += L->ldq * L->ldo;
  w.lse2 = p, p += b->ldq1;
  w.dr = p, p += b->ldq1;
  w.ones = p, p += b->ldq1;
  w.st = p, p += L->st_rows * L->lds;
  w.dpt = p;
  return w;
}

ts_status ts_attn_bwd_create(ts_attn_bwd **out, const ts_context *ctx, const ts_attn_plan *plan, ts_attn_bwd_reduce reduce) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "attn backward: NULL output pointer");
  *out = NULL;
  if (!plan) return ts_error(TS_ERR_INVALID_ARG, "attn backward: NULL plan");
  if (reduce < 0 || reduce >= TS_ATTN_BWD_REDUCE_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "attn backward: unknown reduction %d", (int)reduce);
  ts_attn_bwd *b = ts_calloc(1, sizeof *b);
  if (!b) return ts_error(TS_ERR_OOM, "attn backward: cannot allocate the executor");
  const ts__attn_ws_layout *L = &plan->ws;
  const int64_t n = plan->n, d = plan->d;
  b->pl = plan;
  b->nthreads = ctx ? ts_context_threads(ctx) : plan->nthreads;
  if (b->nthreads < 1) b->nthreads = 1;
  b->reduce = reduce == TS_ATTN_BWD_AUTO ? BWD_AUTO : reduce;
  b->ldq1 = L->ldq > L->lds ? L->ldq : L->lds;
  const double wsf = 2.0 * (double)d * L->ldq + (double)L->ldq * L->ldo + 3.0 * b->ldq1 + 2.0 * (double)L->st_rows * L->lds;
  const double hf = (double)n * d;
  const double partf = b->reduce == TS_ATTN_BWD_PARTIALS && b->nthreads > 1 ? 4.0 * hf * b->nthreads : 0.0;
  if ((wsf * b->nthreads + partf + 3 * hf) * sizeof(float) > (double)((size_t)1 << 46)) {
    ts_free(b);
    return ts_error(TS_ERR_OVERFLOW, "attn backward: workspaces of %.3g floats", wsf * b->nthreads + partf + 3 * hf);
  }
  b->ws_floats = ((size_t)wsf + 15) / 16 * 16;
  b->ws = ts_calloc(b->ws_floats * (size_t)b->nthreads, sizeof(float));
  b->part = partf > 0 ? ts_malloc((size_t)partf * sizeof(float)) : NULL;
  b->seen = partf > 0 ? ts_calloc((size_t)(4 * n * b->nthreads), 1) : NULL;
  b->conv = ts_calloc((size_t)(3 * hf), sizeof(float));
  if (!b->ws || (partf > 0 && (!b->part || !b->seen)) || !b->conv) {
    const double mb = (wsf * b->nthreads + partf + 3 * hf) * sizeof(float) / 1e6; /* before b is freed */
    ts_attn_bwd_destroy(b);
    return ts_error(TS_ERR_OOM, "attn backward: cannot allocate %.3g MB of workspaces", mb);
  }
  for (int t = 0; t < b->nthreads; t++) {
    bwd_ws w = ws_bind(b, t);
    for (int64_t i = 0; i < b->ldq1; i++) w.ones[i] = 1.0f;
  }
  b->bytes = sizeof *b + (b->ws_floats * (size_t)b->nthreads + (size_t)partf + (size_t)(3 * hf)) * sizeof(float) +
             (partf > 0 ? (size_t)(4 * n * b->nthreads) : 0);
  *out = b;
  return TS_OK;
}

void ts_attn_bwd_destroy(ts_attn_bwd *b) {
  if (!b) return;
  ts_free(b->ws);
  ts_free(b->part);
  ts_free(b->seen);
  ts_free(b->conv);
  ts_free(b);
}

ts_attn_bwd_reduce ts_attn_bwd_get_reduce(const ts_attn_bwd *b) { return b ? b->reduce : TS_ATTN_BWD_AUTO; }
size_t ts_attn_bwd_workspace_bytes(const ts_attn_bwd *b) { return b ? b->bytes : 0; }

/* One (batch, head)'s fp32 tensors: inputs [n][d] (q, k, v, o, go = dO), lse [n], the stored scores
 * (NULL: recompute), dQ [n][d] and the dK / dV this thread adds into. */
typedef struct head_io {
  const float *q, *k, *v, *o, *go, *lse, *scores;
  float *dq, *dk, *dv;
  uint8_t *seen_k, *seen_v; /* partials: the rows of dk / dv written (ts__attn_bwd_kern.kv); NULL otherwise */
  bool atomic;
} head_io;

static void bwd_panel(const ts_attn_plan *pl, const ts__attn_kern *kn, const ts__attn_bwd_kern *bk,
                      const ts__attn_cpanel *cp, const head_io *io, bwd_ws w) {
  const ts__attn_ws_layout *L = &pl->ws;
  const int64_t d = pl->d, n = pl->n, ldq = L->ldq, ldo = L->ldo, lds = L->lds, r0 = cp->r0, nr = cp->nr;
  const float c = (float)(1.4426950408889634 / sqrt((double)d)), scale = (float)(1.0 / sqrt((double)d));
  if (cp->qt) { /* (DIAG items read Q and dO in place) */
    kn->pack_q(io->q + r0 * d, nr, d, ldq, w.qt);
    kn->pack_q(io->go + r0 * d, nr, d, ldq, w.dot);
  }
  for (int64_t i = 0; i < nr; i++) {
    const float *g = io->go + (r0 + i) * d, *o = io->o + (r0 + i) * d;
    double t = 0.0;
    for (int64_t e = 0; e < d; e++) t += (double)g[e] * (double)o[e];
    w.dr[i] = (float)t;
    w.lse2[i] = io->lse[r0 + i] * 1.4426950408889634f;
  }
  memset(w.dq, 0, (size_t)(nr * ldo) * sizeof(float));
  const float *sc = io->scores ? io->scores + cp->s0 : NULL;
  for (int64_t x = 0; x < cp->nit; x++) {
    const ts__attn_item *it = &pl->items[cp->it0 + x];
    const uint16_t *mask = it->moff >= 0 ? pl->mbits + it->moff : NULL;
    const int br = it->br, bc = it->bc;
    const float *src = w.st; /* S^T: recomputed into st, or the stored [bc][br] */
    int64_t lds_s = lds;
    if (sc) src = sc, lds_s = br, sc += (int64_t)br * bc;
    float *dqr = w.dq + (int64_t)it->i0 * ldo;
    const float *lse2 = w.lse2 + it->i0, *dr = w.dr + it->i0;
    if (ts__attn_item_diag(it)) {
      const int32_t *offs = pl->runs + it->qoff;
      const int64_t row0 = r0 + it->i0;
      if (!io->scores) kn->qk_diag(io->q, NULL, io->k, NULL, d, n, row0, offs, bc, br, mask, w.st, lds);
      kn->qk_diag(io->go, NULL, io->v, NULL, d, n, row0, offs, bc, br, mask, w.dpt, lds);
      bk->pds(src, lds_s, w.st, w.dpt, lds, bc, br, mask, c, lse2, dr, scale);
      kn->pv_diag(w.dpt, lds, io->k, NULL, d, n, row0, offs, bc, br, mask, dqr, ldo, w.ones);
      bk->kv_diag(w.st, lds, io->go, d, n, row0, offs, bc, br, io->dv, io->atomic, io->seen_v);
      bk->kv_diag(w.dpt, lds, io->q, d, n, row0, offs, bc, br, io->dk, io->atomic, io->seen_k);
      continue;
    }
    const float *qrows = io->q + (r0 + it->i0) * d, *grows = io->go + (r0 + it->i0) * d;
    if (it->qoff >= 0) { /* COMPACT: keys in runs of rl */
      const int32_t *runs = pl->runs + it->qoff;
      const int rl = it->rl, nq = bc / rl;
      if (!io->scores) kn->qk_runs(w.qt + it->i0, ldq, io->k, d, d, runs, nq, rl, br, w.st, lds);
      kn->qk_runs(w.dot + it->i0, ldq, io->v, d, d, runs, nq, rl, br, w.dpt, lds);
      bk->pds(src, lds_s, w.st, w.dpt, lds, bc, br, mask, c, lse2, dr, scale);
      kn->pv_runs(w.dpt, lds, io->k, d, d, runs, nq, rl, br, dqr, ldo, w.ones, it->skoff >= 0 ? pl->skbits + it->skoff : NULL);
      bk->kv(w.st, lds, grows, d, bc, br, io->dv, 0, runs, rl, io->atomic, io->seen_v);
      bk->kv(w.dpt, lds, qrows, d, bc, br, io->dk, 0, runs, rl, io->atomic, io->seen_k);
      continue;
    }
    const float *kt = io->k + (int64_t)it->j0 * d, *vt = io->v + (int64_t)it->j0 * d;
    if (!io->scores) kn->qk_f32(w.qt + it->i0, ldq, kt, d, d, bc, br, w.st, lds);
    kn->qk_f32(w.dot + it->i0, ldq, vt, d, d, bc, br, w.dpt, lds);
    bk->pds(src, lds_s, w.st, w.dpt, lds, bc, br, mask, c, lse2, dr, scale);
    kn->pv(w.dpt, lds, kt, d, d, bc, br, dqr, ldo, w.ones);
    bk->kv(w.st, lds, grows, d, bc, br, io->dv, it->j0, NULL, 1, io->atomic, io->seen_v);
    bk->kv(w.dpt, lds, qrows, d, bc, br, io->dk, it->j0, NULL, 1, io->atomic, io->seen_k);
  }
  kn->finish(w.dq, ldo, w.ones, nr, d, io->dq + r0 * d);
}

/* The tensors of one backward: fp32 (q32/k32/v32) or bf16 (q16/k16/v16) inputs. */
typedef struct bwd_io {
  const float *q32, *k32, *v32;
  const uint16_t *q16, *k16, *v16;
  const float *O, *dO, *lse, *scores;
  float *dQ, *dK, *dV;
} bwd_io;

static inline float bf16f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#define CHUNK 4096 /* floats per chunk of the per-head conversion and zeroing loops */
#define RCH 64     /* key rows per chunk of the partials' sums */

/* The tensors of (batch, head) h for thread tid: its own partials (and their flags) when part. */
static void head_bind(head_io *hio, const ts_attn_bwd *b, const bwd_io *io, int64_t h, int tid, bool part) {
  const int64_t n = b->pl->n, hsz = n * b->pl->d, off = h * hsz;
  const bool bf = io->q16 != NULL;
  hio->q = bf ? b->conv : io->q32 + off;
  hio->k = bf ? b->conv + hsz : io->k32 + off;
  hio->v = bf ? b->conv + 2 * hsz : io->v32 + off;
  hio->o = io->O + off, hio->go = io->dO + off, hio->lse = io->lse + h * n;
  hio->scores = io->scores ? io->scores + h * ts__attn_score_stride(b->pl) : NULL;
  hio->dq = io->dQ + off, hio->dk = io->dK + off, hio->dv = io->dV + off;
  hio->seen_k = hio->seen_v = NULL;
  if (part) {
    const size_t slot = (size_t)(h & 1) * (size_t)b->nthreads + (size_t)tid;
    hio->dk = b->part + slot * 2 * (size_t)hsz, hio->dv = hio->dk + hsz;
    hio->seen_k = b->seen + slot * 2 * (size_t)n, hio->seen_v = hio->seen_k + n;
  }
}

/* Barriers: ATOMIC (and one thread) on fp32 inputs: one, after zeroing dK and dV; then every
 * (head, panel) unit dynamically, heads in order. PARTIALS: a thread's first write to a partial row
 * in a head sets the row (seen flag) instead of adding, so nothing is zeroed; after the head's
 * panels (a barrier) the threads sum the rows each thread wrote into dK / dV (rows nobody wrote:
 * zeros) and clear the flags. The partials are double-buffered by head parity, so those sums need
 * no barrier before the next head's panels (which use the other set, whose flags the sums of head
 * h - 1 cleared before the barrier after head h's panels): one barrier per head. bf16: one more per
 * head, after converting its Q, K, V. */
static void run(ts_attn_bwd *b, int nt, const bwd_io *io, int64_t bh) {
  const ts_attn_plan *pl = b->pl;
  const ts__attn_kern *kn = ts__attn_kern_for(pl->isa);
  const ts__attn_bwd_kern *bk = ts__attn_bwd_kern_for(pl->isa);
  const int64_t n = pl->n, d = pl->d, hsz = n * d, nchunk = (hsz + CHUNK - 1) / CHUNK, np = pl->npanels;
  const int64_t nrch = (n + RCH - 1) / RCH;
  const bool bf = io->q16 != NULL;
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
    const bwd_ws w = ws_bind(b, tid);
    const bool part = b->reduce == TS_ATTN_BWD_PARTIALS && nth > 1;
    head_io hio = {.atomic = !part && nth > 1};
    if (!bf && !part) {
#pragma omp for schedule(static)
      for (int64_t ch = 0; ch < bh * nchunk; ch++) {
        const int64_t h = ch / nchunk, e0 = ch % nchunk * CHUNK, cnt = hsz - e0 < CHUNK ? hsz - e0 : CHUNK;
        memset(io->dK + h * hsz + e0, 0, (size_t)cnt * sizeof(float));
        memset(io->dV + h * hsz + e0, 0, (size_t)cnt * sizeof(float));
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t u = 0; u < bh * np; u++) {
        head_bind(&hio, b, io, u / np, tid, part);
        bwd_panel(pl, kn, bk, &pl->panels[pl->order[u % np]], &hio, w);
      }
    } else {
      for (int64_t h = 0; h < bh; h++) {
        const int64_t off = h * hsz;
        if (bf) {
#pragma omp for schedule(static)
          for (int64_t ch = 0; ch < nchunk; ch++) { /* Q, K, V of the head to fp32; dK, dV zeroed unless partials */
            const int64_t e0 = ch * CHUNK, e1 = hsz - e0 < CHUNK ? hsz : e0 + CHUNK;
            for (int64_t e = e0; e < e1; e++) {
              b->conv[e] = bf16f(io->q16[off + e]);
              b->conv[hsz + e] = bf16f(io->k16[off + e]);
              b->conv[2 * hsz + e] = bf16f(io->v16[off + e]);
            }
            if (!part) {
              memset(io->dK + off + e0, 0, (size_t)(e1 - e0) * sizeof(float));
              memset(io->dV + off + e0, 0, (size_t)(e1 - e0) * sizeof(float));
            }
          }
        }
        head_bind(&hio, b, io, h, tid, part);
#pragma omp for schedule(dynamic, 1)
        for (int64_t x = 0; x < np; x++) bwd_panel(pl, kn, bk, &pl->panels[pl->order[x]], &hio, w);
        if (!part) continue;
        const size_t set = (size_t)(h & 1) * (size_t)b->nthreads;
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t ch = 0; ch < 2 * nrch; ch++) { /* RCH key rows of dK (ch < nrch) or dV: the sum of the partials */
          const int64_t a = ch < nrch ? 0 : 1, r0 = ch % nrch * RCH, r1 = r0 + RCH < n ? r0 + RCH : n;
          float *dst = (a ? io->dV : io->dK) + off;
          for (int64_t r = r0; r < r1; r++) {
            float *o = dst + r * d;
            bool first = true;
            for (int t = 0; t < nth; t++) {
              uint8_t *sn = b->seen + (set + (size_t)t) * 2 * (size_t)n + (size_t)(a * n);
              if (!sn[r]) continue; /* thread t wrote nothing to this row: stale */
              sn[r] = 0;
              const float *p = b->part + (set + (size_t)t) * 2 * (size_t)hsz + (size_t)(a * hsz + r * d);
              if (first) memcpy(o, p, (size_t)d * sizeof(float));
              else
                for (int64_t e = 0; e < d; e++) o[e] += p[e];
              first = false;
            }
            if (first) memset(o, 0, (size_t)d * sizeof(float)); /* no row of the head attends this key */
          }
        }
      }
    }
  }
}

static ts_status check(const ts_attn_bwd *b, const void *Q, const void *K, const void *V, const float *O, const float *dO,
                       const float *lse, const float *scores, const float *dQ, const float *dK, const float *dV,
                       int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t *bh) {
  if (!b) return ts_error(TS_ERR_INVALID_ARG, "attn backward: NULL executor");
  const ts_attn_plan *pl = b->pl;
  if (batch < 0 || heads < 0)
    return ts_error(TS_ERR_INVALID_ARG, "attn backward: batch = %lld, heads = %lld must be >= 0", (long long)batch, (long long)heads);
  if (n != pl->n || d != pl->d)
    return ts_error(TS_ERR_SHAPE, "attn backward: n = %lld, d = %lld but the plan was made for n = %lld, d = %lld", (long long)n,
                    (long long)d, (long long)pl->n, (long long)pl->d);
  size_t x, tot;
  if (!ts_mul_size((size_t)batch, (size_t)heads, &x) || !ts_mul_size(x, (size_t)n, &tot) || !ts_mul_size(tot, (size_t)d, &tot) ||
      !ts_mul_size(tot, sizeof(float), &tot) || !ts_mul_size(x, (size_t)ts__attn_score_stride(pl) * sizeof(float), &tot))
    return ts_error(TS_ERR_OVERFLOW, "attn backward: %lld x %lld x %lld x %lld elements overflow", (long long)batch,
                    (long long)heads, (long long)n, (long long)d);
  *bh = (int64_t)x;
  if (x == 0) return TS_OK;
  if (!Q || !K || !V || !O || !dO || !lse) return ts_error(TS_ERR_INVALID_ARG, "attn backward: NULL Q, K, V, O, dO or lse");
  if (!dQ || !dK || !dV) return ts_error(TS_ERR_INVALID_ARG, "attn backward: NULL dQ, dK or dV");
  if (scores) { /* the tag ts_attn_execute_train leaves after each head's scores */
    uint32_t tag[2], got[2];
    ts__attn_score_tag(pl, tag);
    const int64_t ss = ts__attn_score_stride(pl);
    for (int64_t h = 0; h < (int64_t)x; h++) {
      memcpy(got, scores + (h + 1) * ss - 2, sizeof got);
      if (got[0] != tag[0] || got[1] != tag[1])
        return ts_error(TS_ERR_INVALID_ARG,
                        "attn backward: scores of (batch, head) %lld were not written by ts_attn_execute_train with this "
                        "executor's plan (%lld cells, %lld floats per head)",
                        (long long)h, (long long)pl->stats.cells, (long long)ss);
    }
  }
  return TS_OK;
}

static int threads_for(const ts_context *ctx, const ts_attn_bwd *b) {
  int nt = ctx ? ts_context_threads(ctx) : b->nthreads;
  if (nt > b->nthreads) nt = b->nthreads;
  return nt < 1 ? 1 : nt;
}

ts_status ts_attn_backward(const ts_context *ctx, ts_attn_bwd *b, const float *Q, const float *K, const float *V,
                           const float *O, const float *dO, const float *lse, const float *scores, float *dQ, float *dK,
                           float *dV, int64_t batch, int64_t heads, int64_t n, int64_t d) {
  int64_t bh = 0;
  TS_TRY(check(b, Q, K, V, O, dO, lse, scores, dQ, dK, dV, batch, heads, n, d, &bh));
  if (bh == 0) return TS_OK;
  const bwd_io io = {.q32 = Q, .k32 = K, .v32 = V, .O = O, .dO = dO, .lse = lse, .scores = scores, .dQ = dQ, .dK = dK, .dV = dV};
  run(b, threads_for(ctx, b), &io, bh);
  return TS_OK;
}

ts_status ts_attn_backward_bf16(const ts_context *ctx, ts_attn_bwd *b, const uint16_t *Q, const uint16_t *K,
                                const uint16_t *V, const float *O, const float *dO, const float *lse, const float *scores,
                                float *dQ, float *dK, float *dV, int64_t batch, int64_t heads, int64_t n, int64_t d) {
  int64_t bh = 0;
  TS_TRY(check(b, Q, K, V, O, dO, lse, scores, dQ, dK, dV, batch, heads, n, d, &bh));
  if (bh == 0) return TS_OK;
  const bwd_io io = {.q16 = Q, .k16 = K, .v16 = V, .O = O, .dO = dO, .lse = lse, .scores = scores, .dQ = dQ, .dK = dK, .dV = dV};
  run(b, threads_for(ctx, b), &io, bh);
  return TS_OK;
}
