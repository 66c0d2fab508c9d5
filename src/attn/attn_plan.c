/* Plan creation: binds a schedule to a mask and a head dimension. Every sub-tile of every segment is
 * classified here (skip / unmasked / masked, with ownership: a cell belongs to the first segment of
 * its panel that covers it), masked sub-tiles get their mask in the kernels' transposed layout, and
 * the per-thread workspaces are allocated. Execute then only walks the item lists. */
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"

/* ---- bit ranges in one row of 64-bit words ------------------------------------------------ */

static inline uint64_t word_mask(int64_t w, int64_t j0, int64_t j1) { /* bits of word w inside [j0, j1) */
  int64_t lo = w * 64, hi = lo + 64;
  uint64_t m = ~(uint64_t)0;
  if (j0 > lo) m &= ~(uint64_t)0 << (j0 - lo);
  if (j1 < hi) m &= ~(uint64_t)0 >> (hi - j1);
  return m;
}

static int64_t range_count(const uint64_t *row, int64_t j0, int64_t j1) {
  int64_t c = 0;
  for (int64_t w = j0 >> 6; w <= (j1 - 1) >> 6; w++) c += __builtin_popcountll(row[w] & word_mask(w, j0, j1));
  return c;
}

static void range_clear(uint64_t *row, int64_t j0, int64_t j1) {
  for (int64_t w = j0 >> 6; w <= (j1 - 1) >> 6; w++) row[w] &= ~word_mask(w, j0, j1);
}

/* First column in [j0, j1) whose bit equals `want`, or -1. */
static int64_t range_find(const uint64_t *row, int64_t j0, int64_t j1, int want) {
  for (int64_t w = j0 >> 6; w <= (j1 - 1) >> 6; w++) {
    uint64_t x = (want ? row[w] : ~row[w]) & word_mask(w, j0, j1);
    if (x) return w * 64 + __builtin_ctzll(x);
  }
  return -1;
}

/* ---- growable arrays ---------------------------------------------------------------------- */

typedef struct build {
  ts__attn_item *items;
  int64_t nitems, cap_items;
  uint16_t *mbits;
  int64_t nmbits, cap_mbits;
  int32_t *runs;
  int64_t nruns, cap_runs;
  uint64_t *skbits;
  int64_t nskbits, cap_skbits;
  uint64_t *u;  /* [W] scratch: the union of a row sub-tile's rows */
  uint64_t *du; /* [ceil((2n - 1) / 64)] scratch: a DIAG sub-tile's offsets, offset o at bit o + n - 1 */
} build;

static ts_status grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return TS_OK;
  int64_t nc = *cap ? *cap : 256;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * elem);
  if (!q) return ts_error(TS_ERR_OOM, "attn plan: cannot grow a work list to %lld entries", (long long)nc);
  *p = q;
  *cap = nc;
  return TS_OK;
}

/* Appends an item; masked ones copy the owned bits of R (rows relative to the panel) transposed. */
static ts_status add_item(build *b, const uint64_t *R, int64_t W, int32_t i0, int32_t br, int32_t j0, int32_t bc,
                          bool masked) {
  TS_TRY(grow((void **)&b->items, &b->cap_items, b->nitems + 1, sizeof *b->items));
  ts__attn_item *it = &b->items[b->nitems++];
  *it = (ts__attn_item){.i0 = i0, .br = br, .j0 = j0, .bc = bc, .moff = -1, .qoff = -1, .skoff = -1, .rl = 0};
  if (!masked) return TS_OK;
  int64_t nv = (br + 15) / 16, words = (int64_t)bc * nv;
  TS_TRY(grow((void **)&b->mbits, &b->cap_mbits, b->nmbits + words, sizeof *b->mbits));
  uint16_t *mw = b->mbits + b->nmbits;
  memset(mw, 0, (size_t)words * sizeof *mw);
  for (int32_t r = 0; r < br; r++) {
    const uint64_t *row = R + (int64_t)(i0 + r) * W;
    for (int64_t w = j0 >> 6; w <= ((int64_t)j0 + bc - 1) >> 6; w++) {
      uint64_t x = row[w] & word_mask(w, j0, (int64_t)j0 + bc);
      while (x) {
        int64_t j = w * 64 + __builtin_ctzll(x) - j0;
        x &= x - 1;
        mw[j * nv + r / 16] |= (uint16_t)(1u << (r % 16));
      }
    }
  }
  it->moff = b->nmbits;
  b->nmbits += words;
  return TS_OK;
}

/* Appends a COMPACT item: rows [i0, i0+br) x the nq runs of rl keys runs[0 .. nq) (already in
 * b->runs at qoff). Takes (copies and clears in R) the cells of those keys inside [lo, hi);
 * unmasked when it takes every cell. *taken = cells taken. */
static ts_status add_run_item(build *b, uint64_t *R, int64_t W, int32_t i0, int32_t br, int64_t qoff, int nq, int rl,
                              int64_t lo, int64_t hi, int64_t *taken, int64_t *pv_cells) {
  TS_TRY(grow((void **)&b->items, &b->cap_items, b->nitems + 1, sizeof *b->items));
  const int32_t *runs = b->runs + qoff;
  const int bc = nq * rl;
  int64_t nv = (br + 15) / 16, words = (int64_t)bc * nv, cnt = 0;
  TS_TRY(grow((void **)&b->mbits, &b->cap_mbits, b->nmbits + words, sizeof *b->mbits));
  uint16_t *mw = b->mbits + b->nmbits;
  memset(mw, 0, (size_t)words * sizeof *mw);
  for (int j = 0; j < bc; j++) {
    int64_t col = (int64_t)runs[j / rl] + j % rl;
    if (col < lo || col >= hi) continue;
    uint64_t bit = (uint64_t)1 << (col & 63);
    for (int32_t r = 0; r < br; r++) {
      uint64_t *w = R + (int64_t)(i0 + r) * W + (col >> 6);
      if (!(*w & bit)) continue;
      *w &= ~bit; /* taken: a repeated key (a run moved back at the end) gets no cell twice */
      mw[j * nv + r / 16] |= (uint16_t)(1u << (r % 16));
      cnt++;
    }
  }
  b->items[b->nitems++] =
      (ts__attn_item){.i0 = i0, .br = br, .j0 = runs[0], .bc = bc, .moff = -1, .qoff = qoff, .skoff = -1, .rl = rl};
  *taken = cnt;
  *pv_cells = (int64_t)br * bc;
  if (cnt == (int64_t)br * bc) return TS_OK;
  b->items[b->nitems - 1].moff = b->nmbits;
  b->nmbits += words;
  /* P V skip lists: per 4-row group (inside one 16-bit word, 16 % 4 = 0) the keys it has a cell in */
  const int64_t ng = (br + 3) / 4, nw = (bc + 63) / 64;
  TS_TRY(grow((void **)&b->skbits, &b->cap_skbits, b->nskbits + ng * nw, sizeof *b->skbits));
  uint64_t *sk = b->skbits + b->nskbits;
  memset(sk, 0, (size_t)(ng * nw) * sizeof *sk);
  int64_t listed = 0;
  for (int64_t g = 0; g < ng; g++)
    for (int j = 0; j < bc; j++)
      if ((mw[j * nv + g / 4] >> (4 * (g % 4))) & 0xF) sk[g * nw + j / 64] |= (uint64_t)1 << (j % 64), listed++;
  if (listed < ng * bc) { /* some group skips some key */
    b->items[b->nitems - 1].skoff = b->nskbits;
    b->nskbits += ng * nw;
    *pv_cells = 0;
    for (int64_t g = 0; g < ng; g++) {
      int64_t rows = br - 4 * g < 4 ? br - 4 * g : 4, keys = 0;
      for (int64_t w = 0; w < nw; w++) keys += __builtin_popcountll(sk[g * nw + w]);
      *pv_cells += rows * keys;
    }
  }
  return TS_OK;
}

static ts_status push_run(build *b, int64_t q) {
  TS_TRY(grow((void **)&b->runs, &b->cap_runs, b->nruns + 1, sizeof *b->runs));
  b->runs[b->nruns++] = (int32_t)q;
  return TS_OK;
}

/* COMPACT segment g (see attn.h): per br-high row sub-tile, the union of its rows' unowned cells
 * over [c0, chi), covered left to right by 4-key runs or listed key by key (ts__attn_compact_rl),
 * cut into items of at most max(1, bc/rl) runs. */
static ts_status compile_compact(build *b, ts_attn_stats *st, uint64_t *R, int64_t W, int64_t n, const ts_attn_panel *P,
                                 const ts_attn_segment *g) {
  int64_t rlo = g->r0 - P->r0, rhi = rlo + g->nr, chi = (int64_t)g->c0 + g->nc;
  for (int64_t i0 = rlo; i0 < rhi; i0 += g->br) {
    int64_t i1 = i0 + g->br < rhi ? i0 + g->br : rhi, nkeys = 0;
    for (int64_t w = g->c0 >> 6; w <= (chi - 1) >> 6; w++) {
      uint64_t x = 0;
      for (int64_t i = i0; i < i1; i++) x |= R[i * W + w];
      b->u[w] = x & word_mask(w, g->c0, chi);
      nkeys += __builtin_popcountll(b->u[w]);
    }
    int64_t q0 = b->nruns;
    for (int64_t j = range_find(b->u, g->c0, chi, 1); j >= 0;) {
      int64_t q = j < n - TS__ATTN_RUN ? j : n - TS__ATTN_RUN;
      TS_TRY(push_run(b, q));
      j = q + TS__ATTN_RUN < chi ? range_find(b->u, q + TS__ATTN_RUN, chi, 1) : -1;
    }
    const int rl = ts__attn_compact_rl(nkeys, b->nruns - q0);
    if (rl == 1) { /* the keys themselves */
      b->nruns = q0;
      for (int64_t j = range_find(b->u, g->c0, chi, 1); j >= 0; j = j + 1 < chi ? range_find(b->u, j + 1, chi, 1) : -1)
        TS_TRY(push_run(b, j));
    }
    /* as few items as max(1, bc/rl) runs allow, the runs spread evenly over them (a last item of a
     * run or two would pay a whole item's softmax and O reload for a few keys) */
    const int nqmax = g->bc / rl > 1 ? g->bc / rl : 1;
    int64_t nit = (b->nruns - q0 + nqmax - 1) / nqmax;
    for (int64_t a = q0; a < b->nruns; nit--) {
      int nq = (int)((b->nruns - a + nit - 1) / nit);
      int64_t taken, pvc;
      TS_TRY(add_run_item(b, R, W, (int32_t)i0, (int32_t)(i1 - i0), a, nq, rl, g->c0, chi, &taken, &pvc));
      if (b->items[b->nitems - 1].moff >= 0) st->tiles_masked++;
      else st->tiles_full++;
      st->tiles_keyed += rl == 1;
      st->cells += (i1 - i0) * (int64_t)nq * rl;
      st->pv_cells += pvc;
      a += nq;
    }
  }
  return TS_OK;
}

/* DIAG segment g (see attn.h): per br-high row sub-tile, the offsets j - i of its rows' unowned
 * cells in [c0, chi), ascending, cut into as few items of at most bc offsets as possible (spread
 * evenly); each item takes (copies and clears in R) the cells of its offsets. */
static ts_status compile_diag(build *b, ts_attn_stats *st, uint64_t *R, int64_t W, int64_t n, const ts_attn_panel *P,
                              const ts_attn_segment *g) {
  const int64_t rlo = g->r0 - P->r0, rhi = rlo + g->nr, chi = (int64_t)g->c0 + g->nc, DW = (2 * n - 1 + 63) / 64;
  for (int64_t i0 = rlo; i0 < rhi; i0 += g->br) {
    const int64_t i1 = i0 + g->br < rhi ? i0 + g->br : rhi, br = i1 - i0, row0 = P->r0 + i0;
    memset(b->du, 0, (size_t)DW * sizeof *b->du);
    for (int64_t i = i0; i < i1; i++) /* offset o = j - (P->r0 + i) at bit o + n - 1 = j + n - 1 - (P->r0 + i) */
      for (int64_t j = range_find(R + i * W, g->c0, chi, 1); j >= 0; j = j + 1 < chi ? range_find(R + i * W, j + 1, chi, 1) : -1) {
        const int64_t x = j + n - 1 - (P->r0 + i);
        b->du[x >> 6] |= (uint64_t)1 << (x & 63);
      }
    const int64_t q0 = b->nruns;
    for (int64_t w = 0; w < DW; w++)
      for (uint64_t x = b->du[w]; x; x &= x - 1) TS_TRY(push_run(b, w * 64 + __builtin_ctzll(x) - (n - 1)));
    const int64_t nd = b->nruns - q0;
    int64_t nit = (nd + g->bc - 1) / g->bc;
    for (int64_t a = q0; a < b->nruns; nit--) {
      const int nq = (int)((b->nruns - a + nit - 1) / nit);
      const int32_t *offs = b->runs + a;
      const int64_t nv = (br + 15) / 16, words = (int64_t)nq * nv;
      TS_TRY(grow((void **)&b->items, &b->cap_items, b->nitems + 1, sizeof *b->items));
      TS_TRY(grow((void **)&b->mbits, &b->cap_mbits, b->nmbits + words, sizeof *b->mbits));
      uint16_t *mw = b->mbits + b->nmbits;
      memset(mw, 0, (size_t)words * sizeof *mw);
      int64_t cnt = 0, pvc = 0;
      for (int t = 0; t < nq; t++) {
        uint64_t grp = 0; /* 4-row groups with a cell at this offset (the AVX-512 P V skips the others) */
        for (int64_t r = 0; r < br; r++) {
          const int64_t j = row0 + r + offs[t];
          if (j < g->c0 || j >= chi) continue;
          uint64_t *wd = R + (i0 + r) * W + (j >> 6), bit = (uint64_t)1 << (j & 63);
          if (!(*wd & bit)) continue;
          *wd &= ~bit;
          mw[t * nv + r / 16] |= (uint16_t)(1u << (r % 16));
          cnt++;
          grp |= (uint64_t)1 << (r / 4); /* br <= TS_ATTN_TILE_MAX: at most 64 groups */
        }
        const uint64_t full = br / 4 >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << (br / 4)) - 1;
        pvc += 4 * __builtin_popcountll(grp & full) + br % 4; /* a partial last group runs whole */
      }
      const int64_t j0 = row0 + offs[0] < 0 ? 0 : row0 + offs[0] >= n ? n - 1 : row0 + offs[0];
      b->items[b->nitems++] = (ts__attn_item){.i0 = (int32_t)i0, .br = (int32_t)br, .j0 = (int32_t)j0, .bc = nq,
                                              .moff = -1, .qoff = a, .skoff = -1, .rl = 0};
      if (cnt != br * nq) {
        b->items[b->nitems - 1].moff = b->nmbits;
        b->nmbits += words;
        st->tiles_masked++;
      } else {
        st->tiles_full++;
      }
      st->tiles_diag++;
      st->cells += br * nq;
      st->pv_cells += pvc;
      a += nq;
    }
  }
  return TS_OK;
}

/* Classifies the sub-tiles of segment g of panel p (R: the panel's unowned allowed cells). */
static ts_status compile_segment(build *b, ts_attn_stats *st, uint64_t *R, int64_t W, int64_t n, const ts_attn_panel *P,
                                 int64_t p, int64_t k, const ts_attn_segment *g) {
  if (g->kind == TS_ATTN_SEG_COMPACT && n >= TS__ATTN_RUN) return compile_compact(b, st, R, W, n, P, g);
  if (g->kind == TS_ATTN_SEG_DIAG) return compile_diag(b, st, R, W, n, P, g);
  int64_t rlo = g->r0 - P->r0, rhi = rlo + g->nr, chi = (int64_t)g->c0 + g->nc;
  for (int64_t j0 = g->c0; j0 < chi; j0 += g->bc) {
    int64_t j1 = j0 + g->bc < chi ? j0 + g->bc : chi;
    for (int64_t i0 = rlo; i0 < rhi; i0 += g->br) {
      int64_t i1 = i0 + g->br < rhi ? i0 + g->br : rhi, area = (i1 - i0) * (j1 - j0), cnt = 0;
      for (int64_t i = i0; i < i1; i++) cnt += range_count(R + i * W, j0, j1);
      bool masked;
      if (g->kind == TS_ATTN_SEG_FULL) {
        if (cnt != area) {
          for (int64_t i = i0; i < i1; i++) {
            int64_t j = range_find(R + i * W, j0, j1, 0);
            if (j >= 0)
              return ts_error(TS_ERR_INVALID_ARG,
                              "attn plan: panel %lld segment %lld is marked full but cell (row %lld, col %lld) is masked "
                              "or owned by an earlier segment",
                              (long long)p, (long long)k, (long long)(P->r0 + i), (long long)j);
          }
        }
        masked = false;
      } else if (g->kind == TS_ATTN_SEG_DENSE) {
        masked = true;
      } else {
        if (cnt == 0) {
          st->tiles_skipped++;
          continue;
        }
        masked = cnt != area;
      }
      TS_TRY(add_item(b, R, W, (int32_t)i0, (int32_t)(i1 - i0), (int32_t)j0, (int32_t)(j1 - j0), masked));
      if (masked) st->tiles_masked++;
      else st->tiles_full++;
      st->cells += area;
      st->pv_cells += area;
      for (int64_t i = i0; i < i1; i++) range_clear(R + i * W, j0, j1);
    }
  }
  return TS_OK;
}

/* Marks the panel's fresh DIAG items (no earlier item wrote any of their rows, so their P V starts
 * O at zero without reading it) and returns whether O must still be zeroed before the items run:
 * an item that reads O (any other kind, or a DIAG item some of whose rows were written) meets a row
 * no earlier item wrote, or some row has no item at all. done: nr bytes of scratch. */
static bool panel_fresh(ts__attn_item *items, int64_t nit, int32_t nr, uint8_t *done) {
  memset(done, 0, (size_t)nr);
  bool zero = false;
  for (int64_t x = 0; x < nit; x++) {
    ts__attn_item *it = &items[x];
    int32_t cnt = 0;
    for (int32_t r = it->i0; r < it->i0 + it->br; r++) cnt += done[r];
    it->fresh = ts__attn_item_diag(it) && cnt == 0;
    if (!it->fresh && cnt < it->br) zero = true;
    memset(done + it->i0, 1, (size_t)it->br);
  }
  for (int32_t r = 0; r < nr && !zero; r++) zero = !done[r];
  return zero;
}

static ts_status compile_panels(ts_attn_plan *pl, const ts_attn_schedule *s, const ts_bitmap *mask) {
  int64_t W = (s->n + 63) / 64;
  uint64_t *R = ts_malloc((size_t)pl->nr_max * (size_t)W * sizeof *R);
  if (!R) return ts_error(TS_ERR_OOM, "attn plan: cannot allocate %lld x %lld mask words", (long long)pl->nr_max, (long long)W);
  build b = {0};
  ts_status st = TS_OK;
  uint8_t *done = ts_malloc((size_t)pl->nr_max + 1);
  if (!(b.u = ts_malloc((size_t)W * sizeof *b.u)) || !(b.du = ts_malloc((size_t)(2 * W) * sizeof *b.du)) || !done)
    st = ts_error(TS_ERR_OOM, "attn plan: cannot allocate %lld mask words", (long long)(3 * W));
  for (int64_t p = 0; p < s->npanels && st == TS_OK; p++) {
    const ts_attn_panel *P = &s->panels[p];
    for (int32_t i = 0; i < P->nr; i++) memcpy(R + (int64_t)i * W, mask->bits + (P->r0 + i) * mask->stride, (size_t)W * sizeof *R);
    int64_t it0 = b.nitems, cells0 = pl->stats.cells;
    for (int64_t k = 0; k < P->nseg && st == TS_OK; k++)
      st = compile_segment(&b, &pl->stats, R, W, s->n, P, p, k, &s->segs[P->seg0 + k]);
    for (int32_t i = 0; i < P->nr && st == TS_OK; i++) {
      int64_t j = range_find(R + (int64_t)i * W, 0, s->n, 1);
      if (j >= 0)
        st = ts_error(TS_ERR_INVALID_ARG, "attn plan: allowed cell (row %lld, col %lld) is not covered by panel %lld's segments",
                      (long long)(P->r0 + i), (long long)j, (long long)p);
    }
    if (st != TS_OK) break;
    bool qt = false;
    for (int64_t x = it0; x < b.nitems; x++) qt |= !ts__attn_item_diag(&b.items[x]);
    pl->panels[p] = (ts__attn_cpanel){.r0 = P->r0, .nr = P->nr, .it0 = it0, .nit = b.nitems - it0,
                                      .cells = pl->stats.cells - cells0, .s0 = cells0, .qt = qt,
                                      .zero_o = panel_fresh(b.items + it0, b.nitems - it0, P->nr, done)};
  }
  ts_free(R);
  ts_free(done);
  ts_free(b.u);
  ts_free(b.du);
  pl->items = b.items;
  pl->nitems = b.nitems;
  pl->mbits = b.mbits;
  pl->nmbits = b.nmbits;
  pl->runs = b.runs;
  pl->nruns = b.nruns;
  pl->skbits = b.skbits;
  pl->nskbits = b.nskbits;
  return st;
}

/* Sets the bits of the keys panel cp's items read (COMPACT runs, tile columns) in u. */
static void panel_keys_mark(const ts_attn_plan *pl, const ts__attn_cpanel *cp, uint64_t *u) {
  for (int64_t x = 0; x < cp->nit; x++) {
    const ts__attn_item *it = &pl->items[cp->it0 + x];
    if (ts__attn_item_diag(it)) { /* keys row + offset of the item's rows */
      for (int t = 0; t < it->bc; t++) {
        int64_t a = (int64_t)cp->r0 + it->i0 + pl->runs[it->qoff + t], b = a + it->br;
        a = a < 0 ? 0 : a, b = b < pl->n ? b : pl->n;
        for (int64_t j = a; j < b; j++) u[j >> 6] |= (uint64_t)1 << (j & 63);
      }
      continue;
    }
    const int nq = it->qoff >= 0 ? it->bc / it->rl : 1, len = it->qoff >= 0 ? it->rl : it->bc;
    for (int g = 0; g < nq; g++) {
      const int64_t a = it->qoff >= 0 ? pl->runs[it->qoff + g] : it->j0, b = a + len < pl->n ? a + len : pl->n;
      for (int64_t j = a; j < b; j++) u[j >> 6] |= (uint64_t)1 << (j & 63);
    }
  }
}

/* Each panel's new keys (ts__attn_cpanel.ks0 / nks): the keys its items read that the panel run
 * before it by the same thread did not, as maximal runs of consecutive keys. "Before it": in the
 * static assignment (nstatic > 0: ts__attn_plan_static, which must run first) the previous panel
 * of its thread's queue, the first of a queue having all its keys new; otherwise the previous panel
 * in plan order, which the dynamic executor follows within a head (its other threads run the
 * neighbouring panels, whose keys are then in the shared L3). */
static ts_status panel_key_spans(ts_attn_plan *pl) {
  const int64_t W = (pl->n + 63) / 64;
  uint64_t *mem = ts_calloc((size_t)(2 * W), sizeof *mem), *u = mem, *prev = mem + W;
  if (!mem) return ts_error(TS_ERR_OOM, "attn plan: cannot allocate %lld key words", (long long)(2 * W));
  int64_t cap = 0, nk = 0, q = 0;
  int32_t *ks = NULL;
  ts_status st = TS_OK;
  for (int64_t x = 0; x < pl->npanels && st == TS_OK; x++) {
    const int64_t p = pl->nstatic > 0 ? pl->spanels[x] : x;
    if (pl->nstatic > 0 && x == pl->sstart[q]) { /* a queue starts: nothing read before it */
      memset(prev, 0, (size_t)W * sizeof *prev);
      while (q < pl->nstatic && pl->sstart[q] <= x) q++;
    }
    ts__attn_cpanel *cp = &pl->panels[p];
    panel_keys_mark(pl, cp, u);
    cp->ks0 = nk;
    cp->nks = 0;
    for (int64_t w = 0; w < W && st == TS_OK; w++) { /* runs of u & ~prev */
      uint64_t bits = u[w] & ~prev[w];
      while (bits && st == TS_OK) {
        const int64_t j = w * 64 + __builtin_ctzll(bits);
        if (cp->nks > 0 && ks[nk - 2] + ks[nk - 1] == j) { /* continues the last run */
          ks[nk - 1]++;
        } else {
          if (nk + 2 > cap) st = grow((void **)&ks, &cap, nk + 2, sizeof *ks);
          if (st != TS_OK) break;
          ks[nk++] = (int32_t)j;
          ks[nk++] = 1;
          cp->nks++;
        }
        bits &= bits - 1;
      }
    }
    uint64_t *t = prev; /* this panel's keys become the previous ones */
    prev = u, u = t;
    memset(u, 0, (size_t)W * sizeof *u);
  }
  ts_free(mem);
  pl->kspan = ks;
  pl->nkspan = nk;
  return st;
}

typedef struct order_key { int64_t cells, idx; } order_key;
static int cmp_order(const void *a, const void *b) {
  const order_key *x = a, *y = b;
  if (x->cells != y->cells) return x->cells > y->cells ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Panels with the most work first, so dynamic scheduling ends with the small ones (LPT). */
static ts_status order_panels(ts_attn_plan *pl) {
  order_key *k = malloc((size_t)pl->npanels * sizeof *k);
  if (!k) return ts_error(TS_ERR_OOM, "attn plan: cannot allocate %lld panel keys", (long long)pl->npanels);
  for (int64_t p = 0; p < pl->npanels; p++) k[p] = (order_key){pl->panels[p].cells, p};
  qsort(k, (size_t)pl->npanels, sizeof *k, cmp_order);
  for (int64_t p = 0; p < pl->npanels; p++) pl->order[p] = k[p].idx;
  free(k);
  return TS_OK;
}

static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

ts_status ts__attn_ws_layout_make(int64_t nr_max, int32_t br_max, int32_t bc_max, int64_t d, ts__attn_ws_layout *ws) {
  memset(ws, 0, sizeof *ws);
  ws->ldq = (nr_max + 15) / 16 * 16 + 16;
  ws->ldo = (d + 15) / 16 * 16;
  ws->lds = (br_max + 15) / 16 * 16;
  ws->st_rows = (bc_max + 15) / 16 * 16;
  size_t off = 0, f = sizeof(float);
  double total = (double)d * ws->ldq * f * 2.5 + (double)ws->ldq * ws->ldo * f + (double)ws->st_rows * ws->lds * f * 1.5 +
                 3.0 * bc_max * (double)ws->ldo * f;
  if (total > (double)(1ull << 40)) return ts_error(TS_ERR_OVERFLOW, "attn plan: workspace of %.3g bytes per thread", total);
  ws->off_qt = off, off = up64(off + (size_t)(d * ws->ldq) * f);
  ws->off_qtp = off, off = up64(off + (size_t)((d + 1) / 2 * ws->ldq) * sizeof(uint32_t));
  ws->off_qlast = off, off = up64(off + (size_t)ws->ldq * f);
  ws->off_o = off, off = up64(off + (size_t)(ws->ldq * ws->ldo) * f);
  ws->off_m = off, off = up64(off + (size_t)ws->ldq * f);
  ws->off_l = off, off = up64(off + (size_t)ws->ldq * f);
  ws->off_alpha = off, off = up64(off + (size_t)ws->lds * f);
  ws->off_st = off, off = up64(off + (size_t)(ws->st_rows * ws->lds) * f);
  ws->off_kbuf = off, off = up64(off + (size_t)((int64_t)bc_max * d) * f);
  ws->off_vbuf = off, off = up64(off + (size_t)((int64_t)bc_max * d) * f);
  ws->vp_slot = (int64_t)(bc_max + 1) / 2 * ws->ldo; /* two slots: attn_exec.c keeps the last two items' V pairs */
  ws->off_vp = off, off = up64(off + (size_t)(2 * ws->vp_slot) * sizeof(uint32_t));
  ws->off_pp = off, off = up64(off + (size_t)(ws->st_rows / 2 * ws->lds) * sizeof(uint32_t));
  ws->bytes = off;
  return TS_OK;
}

void ts_attn_plan_destroy(ts_attn_plan *pl) {
  if (!pl) return;
  free(pl->items);
  free(pl->mbits);
  free(pl->runs);
  free(pl->skbits);
  free(pl->kspan);
  ts_free(pl->panels);
  ts_free(pl->order);
  ts_free(pl->wsmem);
  ts_free(pl->spanels);
  ts_free(pl->sstart);
  ts_free(pl->qnext);
  free(pl);
}

ts_status ts_attn_plan_create(ts_attn_plan **out, const ts_context *ctx, const ts_attn_schedule *s, const ts_bitmap *mask,
                              int64_t d) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "attn plan: NULL output pointer");
  *out = NULL;
  TS_TRY(ts_attn_schedule_validate(s));
  if (!mask || !mask->bits) return ts_error(TS_ERR_INVALID_ARG, "attn plan: NULL mask");
  if (mask->rows != s->n || mask->cols != s->n || mask->stride < (s->n + 63) / 64)
    return ts_error(TS_ERR_SHAPE, "attn plan: mask is %lld x %lld (stride %lld words), schedule needs %lld x %lld",
                    (long long)mask->rows, (long long)mask->cols, (long long)mask->stride, (long long)s->n, (long long)s->n);
  if (d < 1 || d > 4096) return ts_error(TS_ERR_INVALID_ARG, "attn plan: head dimension d = %lld is not in [1, 4096]", (long long)d);

  ts_attn_plan *pl = calloc(1, sizeof *pl);
  if (!pl) return ts_error(TS_ERR_OOM, "attn plan: cannot allocate the plan");
  pl->n = s->n;
  pl->d = d;
  pl->nthreads = ctx ? ts_context_threads(ctx) : ts_default_threads();
  pl->isa = ts_isa_active();
  pl->bf16_dot = true;
  pl->warm = true;
  pl->npanels = s->npanels;
  for (int64_t p = 0; p < s->npanels; p++)
    if (s->panels[p].nr > pl->nr_max) pl->nr_max = s->panels[p].nr;
  pl->br_max = pl->bc_max = 1;
  for (int64_t k = 0; k < s->nsegs; k++) {
    const ts_attn_segment *g = &s->segs[k];
    int32_t bc = g->kind == TS_ATTN_SEG_COMPACT && g->bc < TS__ATTN_RUN ? TS__ATTN_RUN : g->bc; /* >= one run */
    if (g->br > pl->br_max) pl->br_max = g->br;
    if (bc > pl->bc_max) pl->bc_max = bc;
  }
  for (int64_t i = 0; i < s->n; i++) pl->stats.nnz += range_count(mask->bits + i * mask->stride, 0, s->n);

  ts_status st = TS_OK;
  pl->panels = ts_calloc((size_t)s->npanels, sizeof *pl->panels);
  pl->order = ts_malloc((size_t)s->npanels * sizeof *pl->order);
  if (!pl->panels || !pl->order) st = ts_error(TS_ERR_OOM, "attn plan: cannot allocate %lld panels", (long long)s->npanels);
  if (st == TS_OK) st = compile_panels(pl, s, mask);
  if (st == TS_OK) st = ts__attn_plan_static(pl, s);
  if (st == TS_OK) st = panel_key_spans(pl);
  if (st == TS_OK) {
    st = order_panels(pl);
    pl->stats.panels = s->npanels;
    pl->stats.segments = s->nsegs;
    pl->stats.work_ratio = pl->stats.nnz ? (double)pl->stats.cells / (double)pl->stats.nnz : 0.0;
    if (st == TS_OK) st = ts__attn_ws_layout_make(pl->nr_max, pl->br_max, pl->bc_max, d, &pl->ws);
  }
  if (st == TS_OK) {
    size_t total;
    if (!ts_mul_size(pl->ws.bytes, (size_t)pl->nthreads, &total))
      st = ts_error(TS_ERR_OVERFLOW, "attn plan: %d workspaces of %zu bytes", pl->nthreads, pl->ws.bytes);
    else if (!(pl->wsmem = ts_calloc(total, 1)))
      st = ts_error(TS_ERR_OOM, "attn plan: cannot allocate %d workspaces of %zu bytes", pl->nthreads, pl->ws.bytes);
  }
  if (st != TS_OK) {
    ts_attn_plan_destroy(pl);
    return st;
  }
  *out = pl;
  return TS_OK;
}

void ts_attn_plan_stats(const ts_attn_plan *pl, ts_attn_stats *st) {
  if (!st) return;
  if (!pl) {
    memset(st, 0, sizeof *st);
    return;
  }
  *st = pl->stats;
}

ts_isa ts_attn_plan_isa(const ts_attn_plan *pl) { return pl ? pl->isa : TS_ISA_SCALAR; }

ts_status ts_attn_plan_set_isa(ts_attn_plan *pl, ts_isa isa) {
  if (!pl) return ts_error(TS_ERR_INVALID_ARG, "attn plan: NULL plan");
  if (isa < TS_ISA_SCALAR || isa > TS_ISA_AVX512) return ts_error(TS_ERR_INVALID_ARG, "attn plan: unknown ISA level %d", (int)isa);
  if (isa > ts_isa_supported())
    return ts_error(TS_ERR_UNSUPPORTED, "attn plan: this CPU does not support the %s kernels", ts_isa_name(isa));
  pl->isa = isa;
  return TS_OK;
}

void ts_attn_plan_set_bf16_dot(ts_attn_plan *pl, bool on) {
  if (pl) pl->bf16_dot = on;
}

void ts_attn_plan_set_warm(ts_attn_plan *pl, bool on) {
  if (pl) pl->warm = on;
}
