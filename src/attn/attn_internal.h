/* Internal shapes shared by the attention plan, the executor driver and the ISA kernel files. */
#ifndef TS_ATTN_INTERNAL_H
#define TS_ATTN_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/dispatch.h"
#include "tessera/attn.h"

/* The schedule as a cJSON object (the public ts_attn_schedule_to_json's document; NULL on OOM) and
 * back (TS_ERR_FORMAT naming the field, then the ts_attn_schedule_validate errors; *s zeroed
 * first, empty on error). For the plan cache, the CLI and the fuzzers. */
cJSON *ts__attn_schedule_to_cjson(const ts_attn_schedule *s);
ts_status ts__attn_schedule_from_cjson(const cJSON *j, ts_attn_schedule *s);

/* One sub-tile the kernels run: panel-relative query rows [i0, i0+br) x bc keys: the key columns
 * [j0, j0+bc) when qoff < 0, else (a COMPACT segment's item) bc / rl RUNS of rl consecutive keys
 * (rl = 4, or 1 where single keys compute less, ts__attn_compact_rl), run g = keys
 * [plan->runs[qoff + g], +rl), key j of the item = runs[qoff + j/rl] + j%rl (j0 = the first run's
 * key). moff < 0: unmasked; else the mask words start at plan->mbits + moff, laid out [bc][nv]
 * uint16 with nv = ceil(br/16): bit r of word (j, w) is cell (i0 + 16w + r, key j); bits past br
 * are zero. skoff >= 0 (masked COMPACT items where some 4-row group has no cell in some key): the
 * P V skip lists at plan->skbits + skoff, [ceil(br/4)][ceil(bc/64)] uint64, bit j of group g set
 * when rows i0 + 4g .. +3 have a cell in key j: P V for those rows runs over those keys only (the
 * rows of a 16-row sub-tile share Q K^T lanes, but each 4-row block of P V can skip the keys where
 * all its P are 0: about a quarter of a window's 16-row union). */
typedef struct ts__attn_item {
  int32_t i0, br, j0, bc;
  int64_t moff;
  int64_t qoff;
  int64_t skoff;
  int32_t rl;
  bool fresh; /* a DIAG item whose rows no earlier item of the panel wrote: its P V starts O at zero */
} ts__attn_item;

/* A DIAG item (TS_ATTN_SEG_DIAG) is marked by rl = 0 and qoff >= 0: its bc "keys" are the offsets
 * plan->runs[qoff .. qoff+bc) (ascending), row i of the sub-tile meeting key (panel r0 + i0 + i) +
 * offset t; j0 = its first offset's key for row i0 clamped into [0, n) (for bookkeeping only). The
 * mask words and skoff are as above with key j read as offset j. */
static inline bool ts__attn_item_diag(const ts__attn_item *it) { return it->rl == 0 && it->qoff >= 0; }

/* The end of the run of consecutive offsets that starts at offs[ta] (offs ascending, nd of them):
 * the DIAG kernels share K/V rows along such runs (a window's dx). */
static inline int ts__attn_run_end(const int32_t *offs, int nd, int ta) {
  int tb = ta + 1;
  while (tb < nd && offs[tb] == offs[tb - 1] + 1) tb++;
  return tb;
}

/* Row j clamped into [0, n): DIAG kernels read keys outside the mask clamped (their cells are masked). */
static inline int64_t ts__attn_clamp_row(int64_t j, int64_t n) { return j < 0 ? 0 : j >= n ? n - 1 : j; }

/* Keys per run of a COMPACT item's 4-key runs. */
#define TS__ATTN_RUN 4

/* Run length of a COMPACT row sub-tile whose owned cells lie in nkeys distinct key columns, which
 * 4-key runs cover in nruns runs: single keys (1) when they compute less after their extra cost,
 * else 4. A single-key item reads K through one pointer per key: its Q K^T ran at 187 GFLOP/s
 * against 226 for 4-key runs (AVX-512 1 x 16 kernel, K in L1, Zen 5), P V the same, so a key costs
 * about 1.1 run keys. Window masks with small windows (7 x 7 in Morton order: 2.68 cells per
 * allowed cell with 4-key runs, 1.89 with single keys) take single keys; large windows and runs of
 * consecutive keys keep 4-key runs. */
static inline int ts__attn_compact_rl(int64_t nkeys, int64_t nruns) {
  return (double)nkeys * 1.1 < (double)(nruns * TS__ATTN_RUN) ? 1 : TS__ATTN_RUN;
}

/* A compiled panel: rows [r0, r0+nr), items[it0 .. it0+nit) in execution order (segment, column
 * tile, row sub-tile); cells = its computed cells (for ordering); the keys its items read, as
 * maximal runs of consecutive keys: kspan[ks0 .. ks0+nks) (pairs first key, count). */
typedef struct ts__attn_cpanel {
  int32_t r0, nr;
  int64_t it0, nit;
  int64_t cells;
  int64_t ks0;
  int32_t nks;
  int64_t s0;             /* the panel's first stored score (ts_attn_execute_train): the cells of the panels
                             before it in schedule order; item x of the panel stores its S^T [bc][br] at s0
                             plus the br x bc of the panel's items before it */
  bool qt;                /* some item reads the packed Q^T (every kind but DIAG) */
  bool zero_o;            /* O must start zeroed: some item reads an O row no earlier item wrote, or a row has no item */
} ts__attn_cpanel;

/* Per-thread workspace geometry (floats unless said). ldq = rows of Q^T / O / m / l arrays: the
 * largest panel rounded up to 16 plus one vector, so a 16-lane load starting at any sub-tile row
 * stays inside. lds = S^T row stride = largest br rounded up to 16. */
typedef struct ts__attn_ws_layout {
  int64_t ldq, ldo, lds, st_rows;
  int64_t vp_slot; /* dwords of one V-pairs slot (the bf16 dot path; off_vp holds two) */
  size_t off_qt, off_qtp, off_qlast, off_o, off_m, off_l, off_alpha, off_st, off_kbuf, off_vbuf, off_vp, off_pp;
  size_t bytes; /* per thread, multiple of 64 */
} ts__attn_ws_layout;

/* A work-queue cursor on its own cache line (the static executor's queues, attn_exec.c). */
typedef struct ts__attn_qnext {
  _Alignas(64) _Atomic int64_t next;
  char pad[64 - sizeof(int64_t)];
} ts__attn_qnext;

struct ts_attn_plan {
  int64_t n, d;
  int nthreads;
  ts_isa isa;
  bool bf16_dot;          /* use AVX-512 BF16 dot products for Q K^T when isa is AVX-512 */
  int64_t npanels;
  ts__attn_cpanel *panels;
  int64_t *order;         /* panel indices, most cells first */
  int64_t nitems;
  ts__attn_item *items;
  uint16_t *mbits;
  int64_t nmbits;
  int32_t *runs;          /* first keys of the runs of COMPACT items */
  int64_t nruns;
  uint64_t *skbits;       /* P V skip lists of COMPACT items (ts__attn_item.skoff) */
  int64_t nskbits;
  int32_t *kspan;         /* the panels' key runs (ts__attn_cpanel.ks0): first key, count */
  int64_t nkspan;
  bool warm;              /* load each panel's K and V rows before its items run (attn_exec.c) */
  int32_t nr_max, br_max, bc_max;
  ts_attn_stats stats;
  ts__attn_ws_layout ws;
  unsigned char *wsmem;   /* nthreads * ws.bytes */
  /* Static assignment (schedule's thread array complete): nstatic = max thread + 1 (0: dynamic);
   * spanels lists the panel indices grouped by thread, thread t's at spanels[sstart[t] ..
   * sstart[t+1]) in schedule order. qnext[t] (one cache line each, reset by every execute): the
   * next unit of queue t, the (batch*head, panel) units of schedule thread t in its order. */
  int32_t nstatic;
  int64_t *spanels, *sstart;
  ts__attn_qnext *qnext;
};

/* Fills the static assignment fields from s (attn_exec.c); TS_OK with nstatic = 0 when the schedule
 * has no complete thread assignment. */
ts_status ts__attn_plan_static(ts_attn_plan *pl, const ts_attn_schedule *s);

/* Micro-kernels, one set per ISA. Shapes (all row-major, strides in elements):
 *   qk_f32:  st[j][i] = sum_k k[j][k] * qt[k][i] for j < bc, i < round16(br) (lanes past br may hold
 *            garbage); qt: [d][ldq] starting at the sub-tile's first row; k: [bc][ldk]; st: [.][lds]
 *            with room for round16(bc) rows (kernels may compute padding rows from clamped keys).
 *   qk_bf16: the same from pair-packed bf16: qtp [ceil(d/2)][ldq] dwords (Q[i][2p] low half,
 *            Q[i][2p+1] high half, zero past d), k bf16 [bc][ldk]; for odd d the last k is taken in
 *            fp32 from qlast [ldq] (Q[i][d-1]) instead of a pair. runs (NULL: none): the keys are
 *            bc / rl runs of rl rows of k, the head's whole array (as qk_runs). NULL where the CPU
 *            lacks it.
 *   softmax: online-softmax update of rows [0, br): c = scale * log2(e); m, l: running max (in
 *            log2 units, scaled) and sum, panel arrays offset to the sub-tile; mask as in
 *            ts__attn_item (NULL: unmasked). st becomes P^T (masked cells exactly 0); alpha[r] =
 *            exp2(m_old - m_new) for r < br.
 *   pv:      o[i][:] = o[i][:] * alpha[i] + sum_j pt[j][i] * v[j][:] for i < br; o: [br][ldo];
 *            v: [bc][ldv]; pt: [bc][lds].
 *   qk_runs, pv_runs: the same over the keys of nq runs of rl keys (rl 4 or 1, bc = rl nq): key j
 *            is row runs[j/rl] + j%rl of k / v ([n][ldk] / [n][ldv], the head's whole arrays); st
 *            has room for round16(bc) rows (padding rows may be computed from repeated runs).
 *            pv_runs' skip (NULL: every key): the item's skip lists (ts__attn_item.skoff); a kernel
 *            may run a 4-row block over only its listed keys or over all of them (the others have
 *            P = 0 in its rows): the AVX-512 one skips, the AVX2 and scalar ones do not.
 *   qk_diag, pv_diag: a DIAG item (ts__attn_item_diag) of br rows starting at absolute row row0 and
 *            nd offsets offs[]: st[t][i] = Q[row0+i] . K[row0+i+offs[t]] and o[i][:] = o[i][:] *
 *            alpha[i] + sum_t pt[t][i] V[row0+i+offs[t]][:], with Q/K/V the head's whole [n][d]
 *            arrays in fp32 (q32/k32/v32) or bf16 (q16/k16/v16; the fp32 pointer NULL), fp32
 *            accumulation. Keys outside [0, n) are read clamped (their cells are masked, P = 0); st
 *            lanes < round4(br) may be written (scratch past br). mask: the item's words
 *            (ts__attn_item, NULL: unmasked); qk_diag may leave st stale for (4 rows, offset) blocks
 *            with no allowed cell (the softmax masks them) and pv_diag may skip them. pv_diag with
 *            alpha NULL (a fresh item) starts o at zero without reading it, and writes all br rows.
 * The bf16 dot path (AVX-512 BF16 only; NULL elsewhere) replaces softmax + pv by:
 *   vpack:         once per column tile: vp [ceil(bc/2)][ldvp] dwords, (V[2p][e], V[2p+1][e]) in the
 *                  (low, high) halves, zero past d (up to ldvp) and past bc; with runs, key j is row
 *                  runs[j / rl] + j % rl of v (the head's whole array).
 *   softmax_pairs: the softmax update writing P as bf16 pairs to pp [ceil(bc/2)][lds] dwords
 *                  ((P[i][2p], P[i][2p+1]), zero past bc) instead of overwriting st.
 *   pv_pairs:      pv from pp and vp (ldvp = ldo, a multiple of 16).
 *   qk_diag_dot:   qk_diag from bf16 Q and K by vdpbf16ps (q16/k16 only); pv_diag stays. */
typedef struct ts__attn_kern {
  void (*qk_f32)(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, int bc, int br,
                 float *st, int64_t lds);
  void (*qk_bf16)(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *k, int64_t ldk,
                  int64_t d, int bc, int br, float *st, int64_t lds, const int32_t *runs, int rl);
  void (*softmax)(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m,
                  float *l, float *alpha);
  void (*pv)(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, int bc, int br,
             float *o, int64_t ldo, const float *alpha);
  /* pack_q: qt[k][i] = q[i][k] for i < nr, k < d (qt [d][ldq], lanes up to round16(nr) may be
   * written); finish: dst[i][e] = o[i][e] / l[i] (0 where l[i] = 0) for i < nr, e < d. */
  void (*pack_q)(const float *q, int64_t nr, int64_t d, int64_t ldq, float *qt);
  void (*finish)(const float *o, int64_t ldo, const float *l, int64_t nr, int64_t d, float *dst);
  void (*qk_runs)(const float *qt, int64_t ldq, const float *k, int64_t ldk, int64_t d, const int32_t *runs, int nq,
                  int rl, int br, float *st, int64_t lds);
  void (*pv_runs)(const float *pt, int64_t lds, const float *v, int64_t ldv, int64_t d, const int32_t *runs, int nq,
                  int rl, int br, float *o, int64_t ldo, const float *alpha, const uint64_t *skip);
  void (*vpack)(const uint16_t *v, int64_t ldv, int64_t d, int bc, uint32_t *vp, int64_t ldvp, const int32_t *runs,
                int rl);
  void (*softmax_pairs)(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m,
                        float *l, float *alpha, uint32_t *pp);
  void (*pv_pairs)(const uint32_t *pp, int64_t lds, const uint32_t *vp, int64_t ldvp, int64_t d, int bc, int br,
                   float *o, int64_t ldo, const float *alpha);
  void (*qk_diag)(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d, int64_t n,
                  int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask, float *st, int64_t lds);
  void (*pv_diag)(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n, int64_t row0,
                  const int32_t *offs, int nd, int br, const uint16_t *mask, float *o, int64_t ldo, const float *alpha);
  void (*qk_diag_dot)(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d, int64_t n,
                      int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask, float *st, int64_t lds);
} ts__attn_kern;

/* The DIAG kernels: AVX-512 (attn_kern_diag_avx512.c), AVX2 (attn_kern_diag_avx2.c) and scalar
 * (attn_kern_ref.c). */
void ts__attn_avx512_qk_diag(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                             int64_t n, int64_t row0, const int32_t *offs, int nd, int br,
                             const uint16_t *mask, float *st, int64_t lds);
void ts__attn_avx512_pv_diag(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n,
                             int64_t row0, const int32_t *offs, int nd, int br,
                             const uint16_t *mask, float *o, int64_t ldo, const float *alpha);
void ts__attn_avx512_qk_diag_dot(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                                 int64_t n, int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask,
                                 float *st, int64_t lds);
void ts__attn_avx2_qk_diag(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                           int64_t n, int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask,
                           float *st, int64_t lds);
void ts__attn_avx2_pv_diag(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n,
                           int64_t row0, const int32_t *offs, int nd, int br, const uint16_t *mask, float *o,
                           int64_t ldo, const float *alpha);
void ts__attn_qk_diag_ref(const float *q32, const uint16_t *q16, const float *k32, const uint16_t *k16, int64_t d,
                          int64_t n, int64_t row0, const int32_t *offs, int nd, int br,
                          const uint16_t *mask, float *st, int64_t lds);
void ts__attn_pv_diag_ref(const float *pt, int64_t lds, const float *v32, const uint16_t *v16, int64_t d, int64_t n,
                          int64_t row0, const int32_t *offs, int nd, int br,
                          const uint16_t *mask, float *o, int64_t ldo, const float *alpha);

/* The AVX-512 BF16 functions of that table (attn_kern_bf16_avx512.c). */
void ts__attn_avx512_qk_bf16(const uint32_t *qtp, const float *qlast, int64_t ldq, const uint16_t *k, int64_t ldk,
                             int64_t d, int bc, int br, float *st, int64_t lds, const int32_t *runs, int rl);
void ts__attn_avx512_vpack(const uint16_t *v, int64_t ldv, int64_t d, int bc, uint32_t *vp, int64_t ldvp, const int32_t *runs,
                           int rl);
void ts__attn_avx512_softmax_pairs(float *st, int64_t lds, int bc, int br, const uint16_t *mask, float c, float *m,
                                   float *l, float *alpha, uint32_t *pp);
void ts__attn_avx512_pv_pairs(const uint32_t *pp, int64_t lds, const uint32_t *vp, int64_t ldvp, int64_t d, int bc,
                              int br, float *o, int64_t ldo, const float *alpha);

/* The scalar pack_q (also the AVX2 table's). */
void ts__attn_pack_q_ref(const float *q, int64_t nr, int64_t d, int64_t ldq, float *qt);

extern const ts__attn_kern ts__attn_kern_ref;
extern const ts__attn_kern ts__attn_kern_avx2;
extern const ts__attn_kern ts__attn_kern_avx512;      /* bf16 dot entries NULL */
extern const ts__attn_kern ts__attn_kern_avx512_bf16; /* with them: CPUs with AVX-512 BF16 */

/* Initial running max: finite, so exp2(m_old - m_new) is never inf - inf. */
#define TS__ATTN_M0 (-3.0e38f)

/* The room's variants in the core dispatcher (scalar, AVX2, AVX-512, AVX-512 BF16), and the table
 * a plan's ISA family runs on this CPU (the best variant of that family; a plan's family is
 * ts_isa_active() when it is made, so TESSERA_ISA / TESSERA_REF apply, or ts_attn_plan_set_isa's). */
extern ts__dispatch ts__attn_dispatch;
const ts__attn_kern *ts__attn_kern_for(ts_isa isa);

/* ---- backward (attn_bwd.c; formulas: tessera/attn_train.h) -----------------------------------
 * The backward walks the forward plan's items and runs, besides the forward table's kernels
 * (qk_f32 / qk_runs / qk_diag for S^T = K Q^T and dP^T = V dO^T, from the packed Q^T and dO^T;
 * pv / pv_runs / pv_diag for dQ += dS K with alpha = 1; pack_q; finish with l = 1), these:
 *   pds:     for j < bc and i < br: P = exp2(s[j][i] c - lse2[i]) on allowed cells (mask as in
 *            ts__attn_item; NULL: all), exactly 0 elsewhere, into pt[j][i]; dS = scale P (dpt[j][i] -
 *            dr[i]) (exactly 0 where not allowed) into dpt[j][i]. s: the item's S^T, [bc][lds_s]
 *            (pt itself, or stored scores with lds_s = br: lanes past br are read but not used, so
 *            up to round16(br) - br floats past the item's last key may be read). lse2[i] = lse * log2(e)
 *            of the row; lanes of pt / dpt up to round16(br) may be written.
 *   kv:      dst[key(j)][0..d) += sum_{i < br} pt[j][i] rows[i][0..d) for j < bc, rows [br][d]; key(j) =
 *            key0 + j (runs NULL) or runs[j / rl] + j % rl; dst: the head's [n][d] array. Any 4 keys
 *            4g .. 4g+3 of an item are distinct (a tile's columns, one run of 4, or listed single keys),
 *            so a kernel may hold up to 4 aligned keys in registers; repeated keys of different runs
 *            (a run moved back at n - 4) are added one after the other. atomic: the adds are atomic
 *            (other threads add to the same rows), else plain read-modify-write. seen (NULL: every
 *            dst row holds a running sum): one flag per key row; a row whose flag is 0 holds stale
 *            values and starts from zero (its flag is then set), so per-thread partials need no
 *            zeroing between heads and their sums read only the rows a thread wrote.
 *   kv_diag: the same for a DIAG item: dst[row0 + i + offs[t]] += pt[t][i] rows[row0 + i] for t < nd,
 *            i < br, keys outside [0, n) skipped (their P is 0); rows: the head's [n][d] array. */
typedef struct ts__attn_bwd_kern {
  void (*pds)(const float *s, int64_t lds_s, float *pt, float *dpt, int64_t lds, int bc, int br, const uint16_t *mask,
              float c, const float *lse2, const float *dr, float scale);
  void (*kv)(const float *pt, int64_t lds, const float *rows, int64_t d, int bc, int br, float *dst, int64_t key0,
             const int32_t *runs, int rl, bool atomic, uint8_t *seen);
  void (*kv_diag)(const float *pt, int64_t lds, const float *rows, int64_t d, int64_t n, int64_t row0, const int32_t *offs,
                  int nd, int br, float *dst, bool atomic, uint8_t *seen);
} ts__attn_bwd_kern;

extern const ts__attn_bwd_kern ts__attn_bwd_kern_ref, ts__attn_bwd_kern_avx2, ts__attn_bwd_kern_avx512;
/* The backward's variants (scalar, AVX2, AVX-512) and the table of a plan's ISA family. */
extern ts__dispatch ts__attn_bwd_dispatch;
const ts__attn_bwd_kern *ts__attn_bwd_kern_for(ts_isa isa);

/* dst[0..cnt) += src[0..cnt), each add atomic (compare-and-swap on pairs of floats where aligned). */
void ts__attn_atomic_add(float *dst, const float *src, int64_t cnt);

/* Floats of stored scores per (batch, head): the plan's cells rounded up to 16, plus 16 (reads of
 * a last item's lanes past br, and a tag naming the plan in the last two: ts__attn_score_tag). */
int64_t ts__attn_score_stride(const ts_attn_plan *pl);
/* The tag ts_attn_execute_train writes into the last two floats of each head's scores and the
 * backward checks (scores from another plan are refused, not misread). */
void ts__attn_score_tag(const ts_attn_plan *pl, uint32_t tag[2]);

/* Workspace layout for a plan's maxima. */
ts_status ts__attn_ws_layout_make(int64_t nr_max, int32_t br_max, int32_t bc_max, int64_t d,
                                  ts__attn_ws_layout *ws);

#endif
