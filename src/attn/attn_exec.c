/* Execution driver: OpenMP over (batch, head, panel), one panel per task (or a static panel ->
 * thread assignment when the schedule gives one, with stealing once a thread's own queue is empty). Per panel: pack Q^T into
 * the thread's workspace, reset the online-softmax state, run the plan's items through the ISA's
 * micro-kernels, then normalize into O. Nothing here allocates. */
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "attn/attn_internal.h"

typedef enum exec_mode { MODE_F32 = 0, MODE_BF16_CONVERT, MODE_BF16_DOT } exec_mode;

static const ts__variant g_variants[] = {{TS__LV_SCALAR, &ts__attn_kern_ref},
                                         {TS__LV_AVX2, &ts__attn_kern_avx2},
                                         {TS__LV_AVX512, &ts__attn_kern_avx512},
                                         {TS__LV_AVX512_BF16, &ts__attn_kern_avx512_bf16}};
ts__dispatch ts__attn_dispatch = TS__DISPATCH("attn", g_variants);

const ts__attn_kern *ts__attn_kern_for(ts_isa isa) { return ts__dispatch_for(&ts__attn_dispatch, ts__level_top(isa), NULL); }

static inline float bf16f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Thread workspace pointers. */
typedef struct ws_ptrs {
  float *qt, *qlast, *o, *m, *l, *alpha, *st, *kbuf, *vbuf;
  uint32_t *qtp, *vp, *pp;
} ws_ptrs;

static ws_ptrs ws_bind(const ts__attn_ws_layout *L, unsigned char *base) {
  ws_ptrs w;
  w.qt = (float *)(base + L->off_qt);
  w.qtp = (uint32_t *)(base + L->off_qtp);
  w.qlast = (float *)(base + L->off_qlast);
  w.o = (float *)(base + L->off_o);
  w.m = (float *)(base + L->off_m);
  w.l = (float *)(base + L->off_l);
  w.alpha = (float *)(base + L->off_alpha);
  w.st = (float *)(base + L->off_st);
  w.kbuf = (float *)(base + L->off_kbuf);
  w.vbuf = (float *)(base + L->off_vbuf);
  w.vp = (uint32_t *)(base + L->off_vp);
  w.pp = (uint32_t *)(base + L->off_pp);
  return w;
}

/* bf16 Q rows [0, nr) of the panel -> fp32 Q^T [d][ldq] (the fp32 path: kn->pack_q). Columns past
 * nr keep whatever an earlier panel left there (finite values, or zeros from the plan's calloc):
 * the kernels compute those lanes but never store them into the softmax state or O. */
static void pack_q_bf16(const uint16_t *q16, int64_t nr, int64_t d, int64_t ldq, float *qt) {
  for (int64_t i = 0; i < nr; i++)
    for (int64_t k = 0; k < d; k++) qt[k * ldq + i] = bf16f(q16[i * d + k]);
}

/* bf16 Q rows -> pair-packed Q^T [d/2][ldq] dwords (+ Q[i][d-1] in fp32 for odd d). */
static void pack_q_pairs(const uint16_t *q16, int64_t nr, int64_t d, int64_t ldq, uint32_t *qtp, float *qlast) {
  for (int64_t i = 0; i < nr; i++) {
    const uint16_t *row = q16 + i * d;
    for (int64_t p = 0; p < d / 2; p++) qtp[p * ldq + i] = (uint32_t)row[2 * p] | (uint32_t)row[2 * p + 1] << 16;
    if (d & 1) qlast[i] = bf16f(row[d - 1]);
  }
}

static void convert_rows(const uint16_t *src, int64_t count, float *dst) {
  for (int64_t x = 0; x < count; x++) dst[x] = bf16f(src[x]);
}

/* The rows of a COMPACT item's keys (nq runs of rl keys) of a bf16 [n][d] array, converted to fp32
 * into dst [rl nq][d] (the conversion path; the bf16 dot path reads them in place). */
static void gather_rows(const uint16_t *src, int64_t d, const int32_t *runs, int nq, int rl, float *dst) {
  for (int g = 0; g < nq; g++) convert_rows(src + (int64_t)runs[g] * d, (int64_t)rl * d, dst + (int64_t)g * rl * d);
}

/* The training forward's extras for one (batch, head): lse [n] (NULL: not asked, the plain execute)
 * and the stored scores (NULL: not asked; else ts__attn_score_stride floats). */
typedef struct train_out {
  float *lse, *scores;
} train_out;

/* An item's raw scores S^T (st [bc][lds]) into dst [bc][br]: the layout the backward reads. */
static void keep_scores(const float *st, int64_t lds, int bc, int br, float *dst) {
  for (int j = 0; j < bc; j++) memcpy(dst + (int64_t)j * br, st + (int64_t)j * lds, (size_t)br * sizeof(float));
}

/* One panel of one (batch, head). q/k/v/o point at the head's [n][d] arrays (q32/k32/v32 for fp32,
 * q16/k16/v16 for bf16). */
static void run_panel(const ts_attn_plan *pl, const ts__attn_kern *kn, exec_mode mode, const ts__attn_cpanel *cp,
                      const float *q32, const float *k32, const float *v32, const uint16_t *q16, const uint16_t *k16,
                      const uint16_t *v16, float *o, ws_ptrs w, train_out tr) {
  const ts__attn_ws_layout *L = &pl->ws;
  const int64_t d = pl->d, ldq = L->ldq, ldo = L->ldo, lds = L->lds;
  const float c = (float)(1.4426950408889634 / sqrt((double)d)); /* scale * log2(e) */
  const int64_t r0 = cp->r0, nr = cp->nr;

  if (cp->qt) { /* (panels of DIAG items only read Q in place) */
    if (mode == MODE_BF16_DOT) pack_q_pairs(q16 + r0 * d, nr, d, ldq, w.qtp, w.qlast);
    else if (q32) kn->pack_q(q32 + r0 * d, nr, d, ldq, w.qt);
    else pack_q_bf16(q16 + r0 * d, nr, d, ldq, w.qt);
  }
  for (int64_t i = 0; i < ldq; i++) {
    w.m[i] = TS__ATTN_M0;
    w.l[i] = 0.0f;
  }
  if (cp->zero_o) memset(w.o, 0, (size_t)(nr * ldo) * sizeof(float)); /* else fresh DIAG items write every row first */

  int32_t cj0 = -1, cbc = -1;
  /* bf16 dot path: the key runs whose V pairs slots 0 and 1 of w.vp hold (consecutive row sub-tiles
   * of one window often list the same keys; column tiles use slot 0) */
  const int32_t *vk[2] = {NULL, NULL};
  int vkn[2] = {0, 0}, vkrl[2] = {0, 0}, vnext = 0;
  float *sc = tr.scores ? tr.scores + cp->s0 : NULL; /* the next item's stored scores */
  for (int64_t x = 0; x < cp->nit; x++) {
    const ts__attn_item *it = &pl->items[cp->it0 + x];
    const uint16_t *mask = it->moff >= 0 ? pl->mbits + it->moff : NULL;
    float *keep = sc; /* (a predictable branch per item when scores are not asked for) */
    if (sc) sc += (int64_t)it->br * it->bc;
    float *orow = w.o + (int64_t)it->i0 * ldo;
    const float *kt, *vt;
    const uint16_t *kt16 = k16 ? k16 + (int64_t)it->j0 * d : NULL;
    if (ts__attn_item_diag(it)) { /* DIAG item: Q, K and V rows read in place, fp32 or bf16 */
      const int32_t *offs = pl->runs + it->qoff;
      const int64_t row0 = r0 + it->i0;
      (mode == MODE_BF16_DOT && kn->qk_diag_dot ? kn->qk_diag_dot : kn->qk_diag)(q32, q16, k32, k16, d, pl->n, row0, offs,
                                                                             it->bc, it->br, mask, w.st, lds);
      if (keep) keep_scores(w.st, lds, it->bc, it->br, keep);
      kn->softmax(w.st, lds, it->bc, it->br, mask, c, w.m + it->i0, w.l + it->i0, w.alpha);
      kn->pv_diag(w.st, lds, v32, v16, d, pl->n, row0, offs, it->bc, it->br, mask, orow, ldo, it->fresh ? NULL : w.alpha);
      continue;
    }
    if (it->qoff >= 0) { /* COMPACT item: keys in runs of rl */
      const int32_t *runs = pl->runs + it->qoff;
      const int rl = it->rl, nq = it->bc / rl;
      if (mode == MODE_F32) {
        kn->qk_runs(w.qt + it->i0, ldq, k32, d, d, runs, nq, rl, it->br, w.st, lds);
        if (keep) keep_scores(w.st, lds, it->bc, it->br, keep);
        kn->softmax(w.st, lds, it->bc, it->br, mask, c, w.m + it->i0, w.l + it->i0, w.alpha);
        kn->pv_runs(w.st, lds, v32, d, d, runs, nq, rl, it->br, orow, ldo, w.alpha, it->skoff >= 0 ? pl->skbits + it->skoff : NULL);
        continue;
      }
      cj0 = -1; /* the buffers no longer hold a column tile */
      if (mode == MODE_BF16_DOT) { /* K read in place by runs, V pair-packed from its rows in place */
        int z = -1;
        for (int y = 0; y < 2 && z < 0; y++)
          if (vk[y] && vkn[y] == nq && vkrl[y] == rl && !memcmp(vk[y], runs, (size_t)nq * sizeof *runs)) z = y;
        if (z < 0) {
          z = vnext, vnext ^= 1;
          kn->vpack(v16, d, d, it->bc, w.vp + z * L->vp_slot, ldo, runs, rl);
          vk[z] = runs, vkn[z] = nq, vkrl[z] = rl;
        }
        kn->qk_bf16(w.qtp + it->i0, w.qlast + it->i0, ldq, k16, d, d, it->bc, it->br, w.st, lds, runs, rl);
        if (keep) keep_scores(w.st, lds, it->bc, it->br, keep);
        kn->softmax_pairs(w.st, lds, it->bc, it->br, mask, c, w.m + it->i0, w.l + it->i0, w.alpha, w.pp);
        kn->pv_pairs(w.pp, lds, w.vp + z * L->vp_slot, ldo, d, it->bc, it->br, orow, ldo, w.alpha);
        continue;
      }
      /* bf16 converted: gather the keys' rows into fp32, then the contiguous kernels on the copies */
      gather_rows(k16, d, runs, nq, rl, w.kbuf);
      gather_rows(v16, d, runs, nq, rl, w.vbuf);
      kt = w.kbuf, vt = w.vbuf;
    } else if (mode == MODE_F32) {
      kt = k32 + (int64_t)it->j0 * d;
      vt = v32 + (int64_t)it->j0 * d;
    } else {
      if (it->j0 != cj0 || it->bc != cbc) { /* a new column tile: convert it once for all row sub-tiles */
        if (mode == MODE_BF16_DOT) {
          kn->vpack(v16 + (int64_t)it->j0 * d, d, d, it->bc, w.vp, ldo, NULL, 1);
          vk[0] = NULL, vnext = 0; /* slot 0 now holds the column tile */
        } else {
          convert_rows(k16 + (int64_t)it->j0 * d, (int64_t)it->bc * d, w.kbuf);
          convert_rows(v16 + (int64_t)it->j0 * d, (int64_t)it->bc * d, w.vbuf);
        }
        cj0 = it->j0;
        cbc = it->bc;
      }
      kt = w.kbuf;
      vt = w.vbuf;
    }
    if (mode == MODE_BF16_DOT) {
      kn->qk_bf16(w.qtp + it->i0, w.qlast + it->i0, ldq, kt16, d, d, it->bc, it->br, w.st, lds, NULL, 1);
      if (keep) keep_scores(w.st, lds, it->bc, it->br, keep);
      kn->softmax_pairs(w.st, lds, it->bc, it->br, mask, c, w.m + it->i0, w.l + it->i0, w.alpha, w.pp);
      kn->pv_pairs(w.pp, lds, w.vp, ldo, d, it->bc, it->br, orow, ldo, w.alpha);
    } else {
      kn->qk_f32(w.qt + it->i0, ldq, kt, d, d, it->bc, it->br, w.st, lds);
      if (keep) keep_scores(w.st, lds, it->bc, it->br, keep);
      kn->softmax(w.st, lds, it->bc, it->br, mask, c, w.m + it->i0, w.l + it->i0, w.alpha);
      kn->pv(w.st, lds, vt, d, d, it->bc, it->br, orow, ldo, w.alpha);
    }
  }

  kn->finish(w.o, ldo, w.l, nr, d, o + r0 * d);
  if (tr.lse) /* ln sum_j exp(S scale) = (m + log2 l) ln 2: m is the running max in scaled log2 units */
    for (int64_t i = 0; i < nr; i++)
      tr.lse[r0 + i] = w.l[i] > 0.0f ? (float)(((double)w.m[i] + log2((double)w.l[i])) * 0.6931471805599453) : -INFINITY;
}

static ts_status check_args(const ts_attn_plan *pl, const void *Q, const void *K, const void *V, const float *O,
                            int64_t batch, int64_t heads, int64_t n, int64_t d, int64_t *bh) {
  if (!pl) return ts_error(TS_ERR_INVALID_ARG, "attn execute: NULL plan");
  if (batch < 0 || heads < 0)
    return ts_error(TS_ERR_INVALID_ARG, "attn execute: batch = %lld, heads = %lld must be >= 0", (long long)batch, (long long)heads);
  if (n != pl->n || d != pl->d)
    return ts_error(TS_ERR_SHAPE, "attn execute: n = %lld, d = %lld but the plan was made for n = %lld, d = %lld", (long long)n,
                    (long long)d, (long long)pl->n, (long long)pl->d);
  size_t x, tot;
  if (!ts_mul_size((size_t)batch, (size_t)heads, &x) || !ts_mul_size(x, (size_t)n, &tot) || !ts_mul_size(tot, (size_t)d, &tot) ||
      !ts_mul_size(tot, sizeof(float), &tot))
    return ts_error(TS_ERR_OVERFLOW, "attn execute: %lld x %lld x %lld x %lld elements overflow", (long long)batch,
                    (long long)heads, (long long)n, (long long)d);
  *bh = (int64_t)x;
  if (x > 0 && (!Q || !K || !V || !O)) return ts_error(TS_ERR_INVALID_ARG, "attn execute: NULL Q, K, V or O");
  return TS_OK;
}

ts_status ts__attn_plan_static(ts_attn_plan *pl, const ts_attn_schedule *s) {
  pl->nstatic = 0;
  if (!s->thread) return TS_OK;
  int32_t tmax = -1;
  for (int64_t p = 0; p < s->npanels; p++) {
    if (s->thread[p] < 0) return TS_OK; /* incomplete: dynamic */
    if (s->thread[p] > tmax) tmax = s->thread[p];
  }
  pl->spanels = ts_malloc((size_t)s->npanels * sizeof *pl->spanels);
  pl->sstart = ts_calloc((size_t)tmax + 2, sizeof *pl->sstart);
  pl->qnext = ts_calloc((size_t)tmax + 1, sizeof *pl->qnext);
  if (!pl->spanels || !pl->sstart || !pl->qnext) return ts_error(TS_ERR_OOM, "attn plan: cannot allocate the static assignment");
  for (int64_t p = 0; p < s->npanels; p++) pl->sstart[s->thread[p] + 1]++;
  for (int32_t t = 0; t <= tmax; t++) pl->sstart[t + 1] += pl->sstart[t];
  int64_t *fill = ts_malloc(((size_t)tmax + 1) * sizeof *fill);
  if (!fill) return ts_error(TS_ERR_OOM, "attn plan: cannot allocate the static assignment");
  memcpy(fill, pl->sstart, ((size_t)tmax + 1) * sizeof *fill);
  for (int64_t p = 0; p < s->npanels; p++) pl->spanels[fill[s->thread[p]]++] = p;
  ts_free(fill);
  pl->nstatic = tmax + 1;
  return TS_OK;
}

/* The tensors of one execute: [bh][n][d] fp32 (q32/k32/v32) or bf16 (q16/k16/v16) inputs, fp32 O. */
typedef struct exec_io {
  const float *q32, *k32, *v32;
  const uint16_t *q16, *k16, *v16;
  float *O;
  int64_t hsz; /* n * d */
  float *lse, *scores; /* training forward: [bh][n], [bh][sstride] (NULL: not asked) */
  int64_t sstride;
} exec_io;

static _Atomic uint32_t g_warm_sink; /* keeps warm_keys' loads (relaxed stores from every thread) */

/* Hints the caches towards the bytes [p, p + bytes): read (rw 0) or about to be written (rw 1). */
static void prefetch_range(const void *p, int64_t bytes, int rw) {
  const char *c = p;
  for (int64_t x = 0; x < bytes; x += 64) {
    if (rw) __builtin_prefetch(c + x, 1, 2);
    else __builtin_prefetch(c + x, 0, 2);
  }
}

/* Loads one value of every 64-byte line of the K and V rows of the panel's new keys (kspan: those
 * its thread's previous panel did not read) and of its Q rows, before its items run. With Q, K, V
 * and O in DRAM (8 heads of 4096 x 64: 32 MB), window2d k = 7 ran 1.25-1.35x faster with these
 * loads (2 threads; swin 1.13-1.31x, window2d k = 13 1.03-1.10x), where software prefetches of the
 * same lines (the next panel's keys, at once or spread over the current panel's items, or the next
 * head's, into L1 or L2) changed nothing measurable (no hardware counters on this VM to say why;
 * most likely prefetches that find the core's miss buffers full are dropped, where loads wait), so
 * the panel's misses now overlap one another in one burst instead of stalling its kernels. While
 * the arrays stay in L3 (2 heads), the loads cost 1-5%. fp32 only: warming bf16 inputs measured
 * 0.95-0.99x at 2-8 heads (1.04-1.09x at 16) when the bf16 paths still copied each item's K/V rows
 * into the workspace first, and 0.97x at 8 and 16 heads on a bf16 DIAG plan, which reads them in
 * place.
 * bench/bench_attn_warm.c and docs/notes/BENCHMARKS.md (issue 4). */
static uint32_t touch_lines(const char *p, int64_t bytes) { /* one load in each line of [p, p + bytes) */
  uint32_t acc = 0;
  for (const char *e = p + bytes; p < e; p = (const char *)(((uintptr_t)p | 63) + 1)) acc += *(const volatile uint8_t *)p;
  return acc;
}

static void warm_keys(const ts_attn_plan *pl, const exec_io *io, int64_t h, const ts__attn_cpanel *cp) {
  const int64_t d = pl->d, es = io->k32 ? (int64_t)sizeof(float) : (int64_t)sizeof(uint16_t);
  const char *kb = (io->k32 ? (const char *)io->k32 : (const char *)io->k16) + h * io->hsz * es;
  const char *vb = (io->v32 ? (const char *)io->v32 : (const char *)io->v16) + h * io->hsz * es;
  const char *qb = (io->q32 ? (const char *)io->q32 : (const char *)io->q16) + (h * io->hsz + (int64_t)cp->r0 * d) * es;
  const int32_t *ks = pl->kspan + cp->ks0;
  uint32_t acc = touch_lines(qb, (int64_t)cp->nr * d * es);
  for (int32_t r = 0; r < cp->nks; r++) {
    const int64_t o = (int64_t)ks[2 * r] * d * es, len = (int64_t)ks[2 * r + 1] * d * es;
    acc += touch_lines(kb + o, len) + touch_lines(vb + o, len);
  }
  atomic_store_explicit(&g_warm_sink, acc, memory_order_relaxed);
}

/* Panel cp of (batch, head) index h. next (may be NULL): the panel this thread most likely runs
 * next, at head index hn: its Q rows are prefetched now (the pack at a panel's start otherwise
 * waits on them: 7-16% of execute on window2d/swin masks before), and so are this panel's O rows,
 * which finish writes at the end. */
static void run_unit(const ts_attn_plan *pl, const ts__attn_kern *kn, exec_mode mode, const exec_io *io, int64_t h,
                     const ts__attn_cpanel *cp, int64_t hn, const ts__attn_cpanel *next, ws_ptrs w) {
  const int64_t off = h * io->hsz, d = pl->d;
  if (next) {
    const int64_t qo = hn * io->hsz + (int64_t)next->r0 * d, qb = (int64_t)next->nr * d;
    if (io->q32) prefetch_range(io->q32 + qo, qb * (int64_t)sizeof(float), 0);
    else prefetch_range(io->q16 + qo, qb * (int64_t)sizeof(uint16_t), 0);
  }
  prefetch_range(io->O + off + (int64_t)cp->r0 * d, (int64_t)cp->nr * d * (int64_t)sizeof(float), 1);
  if (pl->warm && mode == MODE_F32) warm_keys(pl, io, h, cp); /* fp32 only (above) */
  const train_out tr = {io->lse ? io->lse + h * pl->n : NULL, io->scores ? io->scores + h * io->sstride : NULL};
  run_panel(pl, kn, mode, cp, io->q32 ? io->q32 + off : NULL, io->k32 ? io->k32 + off : NULL, io->v32 ? io->v32 + off : NULL,
            io->q16 ? io->q16 + off : NULL, io->k16 ? io->k16 + off : NULL, io->v16 ? io->v16 + off : NULL, io->O + off, w, tr);
}

static ts_status execute(const ts_context *ctx, ts_attn_plan *pl, const exec_io *io, int64_t bh) {
  if (bh == 0) return TS_OK;
  const ts__attn_kern *kn = ts__attn_kern_for(pl->isa);
  exec_mode mode = MODE_F32;
  if (!io->q32) mode = pl->bf16_dot && kn->pv_pairs ? MODE_BF16_DOT : MODE_BF16_CONVERT; /* the AVX-512 BF16 table's */
  int nt = ctx ? ts_context_threads(ctx) : pl->nthreads;
  if (nt > pl->nthreads) nt = pl->nthreads;
  if (nt < 1) nt = 1;
  const int64_t units = pl->npanels * bh;
  if (pl->nstatic > 0 && nt > 1) {
    /* (One thread runs the dynamic order below: draining queue after queue would read every head's
     * K and V once per queue, 14% slower on window2d k = 13 with 2 queues and 8 heads.)
     * Static order with stealing: queue t holds schedule thread t's units, (batch, head) by
     * (batch, head), its panels in schedule order. OpenMP thread `tid` of `nth` drains queues tid,
     * tid + nth, ... first (so a quiet machine runs exactly the scheduled assignment), then takes
     * what is left in the other queues, so a thread the OS deschedules does not hold the others
     * back. Units are taken with one atomic add each. */
    for (int32_t t = 0; t < pl->nstatic; t++) atomic_store_explicit(&pl->qnext[t].next, 0, memory_order_relaxed);
#pragma omp parallel num_threads(nt)
    {
      const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
      ws_ptrs w = ws_bind(&pl->ws, pl->wsmem + (size_t)tid * pl->ws.bytes);
      for (int pass = 0; pass < 2; pass++)
        for (int32_t k = 0; k < pl->nstatic; k++) {
          const int32_t t = (int32_t)((tid + k) % pl->nstatic);
          if ((pass == 0) != (t % nth == tid)) continue; /* pass 0: own queues, pass 1: the others */
          const int64_t cnt = pl->sstart[t + 1] - pl->sstart[t], total = cnt * bh;
          const int64_t *sp = pl->spanels + pl->sstart[t];
          for (int64_t u; (u = atomic_fetch_add_explicit(&pl->qnext[t].next, 1, memory_order_relaxed)) < total;)
            run_unit(pl, kn, mode, io, u / cnt, &pl->panels[sp[u % cnt]], (u + 1) / cnt,
                     u + 1 < total ? &pl->panels[sp[(u + 1) % cnt]] : NULL, w);
        }
    }
    return TS_OK;
  }
  /* Dynamic: (batch, head) outer, its panels most cells first inner, so the threads share one
   * head's K and V at a time (L2-resident: 2 x 1 MB at n = 4096, d = 64) and the small panels of
   * the last head even out the end. Heads inner (the order before) made every unit read another
   * head's K and V: at 8 heads on 2 threads the same plans ran 15-45% slower than with a static
   * assignment (window2d k = 13, pure compact passes). */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t u = 0; u < units; u++) {
    /* the next unit this thread takes is about u + nt */
    const int64_t un = u + nt, np = pl->npanels;
    ws_ptrs w = ws_bind(&pl->ws, pl->wsmem + (size_t)omp_get_thread_num() * pl->ws.bytes);
    const bool last = u / np == bh - 1, lastn = un / np == bh - 1;
    run_unit(pl, kn, mode, io, u / np, &pl->panels[last ? pl->order[u % np] : u % np], un / np,
             un < units ? &pl->panels[lastn ? pl->order[un % np] : un % np] : NULL, w);
  }
  return TS_OK;
}

ts_status ts_attn_execute(const ts_context *ctx, ts_attn_plan *plan, const float *Q, const float *K, const float *V, float *O,
                          int64_t batch, int64_t heads, int64_t n, int64_t d) {
  int64_t bh = 0;
  TS_TRY(check_args(plan, Q, K, V, O, batch, heads, n, d, &bh));
  exec_io io = {.q32 = Q, .k32 = K, .v32 = V, .O = O, .hsz = n * d};
  return execute(ctx, plan, &io, bh);
}

ts_status ts_attn_execute_bf16(const ts_context *ctx, ts_attn_plan *plan, const uint16_t *Q, const uint16_t *K,
                               const uint16_t *V, float *O, int64_t batch, int64_t heads, int64_t n, int64_t d) {
  int64_t bh = 0;
  TS_TRY(check_args(plan, Q, K, V, O, batch, heads, n, d, &bh));
  exec_io io = {.q16 = Q, .k16 = K, .v16 = V, .O = O, .hsz = n * d};
  return execute(ctx, plan, &io, bh);
}

/* ---- training forward ------------------------------------------------------------------------ */

int64_t ts__attn_score_stride(const ts_attn_plan *pl) { return (pl->stats.cells + 15) / 16 * 16 + 16; }

void ts__attn_score_tag(const ts_attn_plan *pl, uint32_t tag[2]) {
  /* a NaN pattern no kernel writes, then a hash of the plan's shape (cells, items, n, d, panels) */
  uint64_t h = 1469598103934665603ull;
  const int64_t f[5] = {pl->stats.cells, pl->nitems, pl->n, pl->d, pl->npanels};
  for (int x = 0; x < 5; x++) h = (h ^ (uint64_t)f[x]) * 1099511628211ull;
  tag[0] = 0x7FA7C0DEu;
  tag[1] = (uint32_t)(h ^ (h >> 32));
}

int64_t ts_attn_score_floats(const ts_attn_plan *plan) { return plan ? ts__attn_score_stride(plan) : 0; }

static ts_status execute_train(const ts_context *ctx, ts_attn_plan *plan, exec_io *io, float *lse, float *scores,
                               int64_t batch, int64_t heads, int64_t n, int64_t d) {
  int64_t bh = 0;
  TS_TRY(check_args(plan, io->q32 ? (const void *)io->q32 : io->q16, io->k32 ? (const void *)io->k32 : io->k16,
                    io->v32 ? (const void *)io->v32 : io->v16, io->O, batch, heads, n, d, &bh));
  if (!lse) return ts_error(TS_ERR_INVALID_ARG, "attn execute_train: NULL lse (the backward needs it)");
  io->lse = lse;
  io->scores = scores;
  io->sstride = ts__attn_score_stride(plan);
  TS_TRY(execute(ctx, plan, io, bh));
  if (scores) {
    uint32_t tag[2];
    ts__attn_score_tag(plan, tag);
    for (int64_t h = 0; h < bh; h++) memcpy(scores + (h + 1) * io->sstride - 2, tag, sizeof tag);
  }
  return TS_OK;
}

ts_status ts_attn_execute_train(const ts_context *ctx, ts_attn_plan *plan, const float *Q, const float *K, const float *V,
                                float *O, float *lse, float *scores, int64_t batch, int64_t heads, int64_t n, int64_t d) {
  exec_io io = {.q32 = Q, .k32 = K, .v32 = V, .O = O, .hsz = n * d};
  return execute_train(ctx, plan, &io, lse, scores, batch, heads, n, d);
}

ts_status ts_attn_execute_train_bf16(const ts_context *ctx, ts_attn_plan *plan, const uint16_t *Q, const uint16_t *K,
                                     const uint16_t *V, float *O, float *lse, float *scores, int64_t batch, int64_t heads,
                                     int64_t n, int64_t d) {
  exec_io io = {.q16 = Q, .k16 = K, .v16 = V, .O = O, .hsz = n * d};
  return execute_train(ctx, plan, &io, lse, scores, batch, heads, n, d);
}
