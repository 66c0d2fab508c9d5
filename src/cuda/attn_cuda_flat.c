/* Host-side flattening of a CPU attention plan into the units and chunks the CUDA kernels walk
 * (shapes in attn_cuda_internal.h). Pure C, no CUDA calls: the CUDA test checks it on machines
 * without a GPU by emulating the kernels' walk on the CPU. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "cuda/attn_cuda_internal.h"
#include "tessera/attn_cuda.h"

typedef struct vec {
  void *p;
  int64_t n, cap;
} vec;

static ts_status vec_push(vec *v, const void *x, size_t elem) {
  if (v->n == v->cap) {
    int64_t nc = v->cap ? v->cap * 2 : 256;
    void *q = realloc(v->p, (size_t)nc * elem);
    if (!q) return ts_error(TS_ERR_OOM, "cuda attn plan: cannot grow a list to %lld entries", (long long)nc);
    v->p = q, v->cap = nc;
  }
  memcpy((char *)v->p + (size_t)v->n * elem, x, elem);
  v->n++;
  return TS_OK;
}

void ts__cuda_flat_free(ts__cuda_flat *f) {
  if (!f) return;
  free(f->units);
  free(f->chunks);
  free(f->mbits);
  free(f->cols);
  free(f->splits);
  memset(f, 0, sizeof *f);
}

/* The plan's mask words, then (extra, may be NULL) the words made for DIAG items' chunks. */
static ts_status copy_mbits(const ts_attn_plan *pl, const vec *extra, ts__cuda_flat *f) {
  const int64_t ne = extra ? extra->n : 0;
  f->nmbits = pl->nmbits + ne;
  f->mbits = malloc((size_t)(f->nmbits ? f->nmbits : 1) * sizeof *f->mbits);
  if (!f->mbits) return ts_error(TS_ERR_OOM, "cuda attn plan: cannot copy %lld mask words", (long long)f->nmbits);
  if (pl->nmbits) memcpy(f->mbits, pl->mbits, (size_t)pl->nmbits * sizeof *f->mbits);
  if (ne) memcpy(f->mbits + pl->nmbits, extra->p, (size_t)ne * sizeof *f->mbits);
  return TS_OK;
}

/* The compiled shape for a panel: the smallest that holds its tallest sub-tile (and its widest,
 * between 32 and 64 columns at 32 rows). */
static int panel_class(const ts__attn_item *it, int64_t nit) {
  int32_t br = 1, bc = 1;
  for (int64_t k = 0; k < nit; k++) {
    if (it[k].br > br) br = it[k].br;
    if (it[k].bc > bc) bc = it[k].bc;
  }
  if (br <= 16) return 0;
  if (br <= 32) return bc <= 32 ? 1 : 2;
  return 3;
}

/* A COMPACT item (keys in runs, plan->runs + qoff): per row slice of its rows inside [g0, g1),
 * chunks over maximal stretches of consecutive keys (adjacent runs merged, at most cb columns). */
static ts_status compact_chunks(vec *chunks, const ts__attn_item *it, const int32_t *runs, int32_t g0, int32_t g1, int32_t rb,
                                int32_t cb) {
  const int32_t lo = it->i0 > g0 ? it->i0 : g0, hi = it->i0 + it->br < g1 ? it->i0 + it->br : g1, nv = (it->br + 15) / 16;
  const int32_t nq = it->bc / it->rl;
  for (int32_t ii = lo; ii < hi; ii += rb)
    for (int32_t q = 0; q < nq;) {
      int32_t e = q + 1; /* runs q .. e-1 are consecutive keys, at most cb of them */
      while (e < nq && runs[e] == runs[e - 1] + it->rl && (e + 1 - q) * it->rl <= cb) e++;
      ts__cuda_chunk c = {.i0 = ii - g0, .nr = hi - ii < rb ? hi - ii : rb, .j0 = runs[q], .nc = (e - q) * it->rl, .nv = nv,
                          .ro = ii - it->i0, .moff = it->moff < 0 ? -1 : it->moff + (int64_t)q * it->rl * nv};
      TS_TRY(vec_push(chunks, &c, sizeof c));
      q = e;
    }
  return TS_OK;
}

/* A DIAG item (offsets plan->runs + qoff, row i meeting key r0 + i + offset; attn_internal.h): per
 * row slice of its rows inside [g0, g1) and per run of consecutive offsets, the keys the slice's
 * rows meet at the run's offsets are one stretch of consecutive columns (nr + run length - 1 of
 * them, clipped into [0, n)), cut into chunks of at most cb columns. Their cells are the run's
 * diagonals only, so each chunk gets mask words of its own, appended to extra (indices from
 * base = the plan's word count on): [nc][nv] with nv = ceil(nr / 16), ro = 0. Chunks without an
 * allowed cell are left out. The GPU computes each chunk's whole rectangle: nr + L - 1 columns
 * for L offsets, the price of running the CPU's diagonal passes on rectangle kernels. */
static ts_status diag_chunks(vec *chunks, vec *extra, int64_t base, const ts_attn_plan *pl, const ts__attn_item *it,
                             int32_t r0, int32_t g0, int32_t g1, int32_t rb, int32_t cb) {
  const int32_t lo = it->i0 > g0 ? it->i0 : g0, hi = it->i0 + it->br < g1 ? it->i0 + it->br : g1;
  const int32_t *offs = pl->runs + it->qoff, nvi = (it->br + 15) / 16;
  const int64_t n = pl->n;
  for (int32_t ii = lo; ii < hi; ii += rb) {
    const int32_t nr = hi - ii < rb ? hi - ii : rb, nv = (nr + 15) / 16;
    const int64_t row = (int64_t)r0 + ii; /* the slice's first row, absolute */
    for (int ta = 0, tb; ta < it->bc; ta = tb) {
      tb = ts__attn_run_end(offs, it->bc, ta);
      int64_t k0 = row + offs[ta], k1 = row + nr - 1 + offs[tb - 1]; /* the stretch [k0, k1] */
      if (k0 < 0) k0 = 0;
      if (k1 > n - 1) k1 = n - 1;
      for (int64_t c0 = k0; c0 <= k1; c0 += cb) {
        const int32_t nc = (int32_t)(k1 - c0 + 1 < cb ? k1 - c0 + 1 : cb);
        const int64_t w0 = extra->n;
        bool any = false;
        for (int32_t j = 0; j < nc; j++)
          for (int32_t r = 0; r < nv * 16; r += 16) {
            uint16_t w = 0;
            for (int32_t b = 0; b < 16 && r + b < nr; b++) {
              const int64_t o = c0 + j - (row + r + b); /* the cell's offset */
              if (o < offs[ta] || o > offs[tb - 1]) continue;
              const int32_t t = ta + (int32_t)(o - offs[ta]), ir = ii + r + b - it->i0; /* offset index, item row */
              if (it->moff >= 0 && !((pl->mbits[it->moff + (int64_t)t * nvi + ir / 16] >> (ir % 16)) & 1u)) continue;
              w |= (uint16_t)(1u << b);
            }
            any |= w != 0;
            TS_TRY(vec_push(extra, &w, sizeof w));
          }
        if (!any) {
          extra->n = w0;
          continue;
        }
        ts__cuda_chunk c = {.i0 = ii - g0, .nr = nr, .j0 = (int32_t)c0, .nc = nc, .nv = nv, .ro = 0, .moff = base + w0};
        TS_TRY(vec_push(chunks, &c, sizeof c));
      }
    }
  }
  return TS_OK;
}

/* Chunks of the items of one row group [g0, g1) (panel-relative; the panel starts at row r0). Runs
 * of consecutive items over the same key columns with rows going down (the row sub-tiles of one
 * column tile) walk their column chunks in the outer loop, so a block loads each K/V chunk once for
 * the whole run. COMPACT items (compact_chunks) and DIAG items (diag_chunks) go one by one. */
static ts_status group_chunks(vec *chunks, vec *extra, const ts_attn_plan *pl, const ts__attn_item *items, int64_t nit,
                              int32_t r0, int32_t g0, int32_t g1, int32_t rb, int32_t cb) {
  for (int64_t a = 0; a < nit;) {
    if (ts__attn_item_diag(&items[a])) {
      TS_TRY(diag_chunks(chunks, extra, pl->nmbits, pl, &items[a], r0, g0, g1, rb, cb));
      a++;
      continue;
    }
    if (items[a].qoff >= 0) {
      TS_TRY(compact_chunks(chunks, &items[a], pl->runs + items[a].qoff, g0, g1, rb, cb));
      a++;
      continue;
    }
    int64_t e = a + 1;
    while (e < nit && items[e].qoff < 0 && items[e].j0 == items[a].j0 && items[e].bc == items[a].bc &&
           items[e].i0 >= items[e - 1].i0 + items[e - 1].br)
      e++;
    for (int32_t jj = 0; jj < items[a].bc; jj += cb) {
      for (int64_t q = a; q < e; q++) {
        const ts__attn_item *it = &items[q];
        int32_t lo = it->i0 > g0 ? it->i0 : g0, hi = it->i0 + it->br < g1 ? it->i0 + it->br : g1;
        int32_t nv = (it->br + 15) / 16;
        for (int32_t ii = lo; ii < hi; ii += rb) {
          ts__cuda_chunk c = {.i0 = ii - g0, .nr = hi - ii < rb ? hi - ii : rb, .j0 = it->j0 + jj,
                              .nc = it->bc - jj < cb ? it->bc - jj : cb, .nv = nv, .ro = ii - it->i0,
                              .moff = it->moff < 0 ? -1 : it->moff + (int64_t)jj * nv};
          TS_TRY(vec_push(chunks, &c, sizeof c));
        }
      }
    }
    a = e;
  }
  return TS_OK;
}

ts_status ts__cuda_flatten_vartile(const ts_attn_plan *pl, size_t smem_limit, ts__cuda_flat *out) {
  memset(out, 0, sizeof *out);
  out->n = pl->n, out->d = pl->d;
  int32_t g[TS__CUDA_NCLASS];
  for (int c = 0; c < TS__CUDA_NCLASS; c++) {
    g[c] = TS__CUDA_GMAX;
    while (g[c] >= 16 && ts__cuda_smem_bytes(g[c], ts__cuda_class_rb[c], ts__cuda_class_cb[c], pl->d) > smem_limit) g[c] -= 16;
  }
  vec units[TS__CUDA_NCLASS] = {{0}}, chunks = {0}, extra = {0};
  ts_status st = TS_OK;
  for (int64_t k = 0; k < pl->npanels && st == TS_OK; k++) {
    const ts__attn_cpanel *P = &pl->panels[pl->order[k]];
    const ts__attn_item *items = pl->items + P->it0;
    int c = panel_class(items, P->nit);
    if (g[c] < 16) {
      st = ts_error(TS_ERR_UNSUPPORTED, "cuda attn plan: head dimension d = %lld needs %zu bytes of shared memory per block, the device allows %zu",
                    (long long)pl->d, ts__cuda_smem_bytes(16, ts__cuda_class_rb[c], ts__cuda_class_cb[c], pl->d), smem_limit);
      break;
    }
    for (int32_t g0 = 0; g0 < P->nr && st == TS_OK; g0 += g[c]) {
      int32_t g1 = g0 + g[c] < P->nr ? g0 + g[c] : P->nr;
      int64_t c0 = chunks.n;
      st = group_chunks(&chunks, &extra, pl, items, P->nit, P->r0, g0, g1, ts__cuda_class_rb[c], ts__cuda_class_cb[c]);
      if (st == TS_OK && chunks.n - c0 > INT32_MAX)
        st = ts_error(TS_ERR_OVERFLOW, "cuda attn plan: panel at row %d has %lld chunks", P->r0, (long long)(chunks.n - c0));
      ts__cuda_unit u = {.c0 = c0, .nchunks = (int32_t)(chunks.n - c0), .r0 = P->r0 + g0, .rows = g1 - g0, .part = -1};
      if (st == TS_OK) st = vec_push(&units[c], &u, sizeof u);
    }
  }
  int64_t nu = 0;
  for (int c = 0; c < TS__CUDA_NCLASS; c++) nu += units[c].n;
  if (st == TS_OK && nu > INT32_MAX) st = ts_error(TS_ERR_OVERFLOW, "cuda attn plan: %lld thread blocks per head", (long long)nu);
  if (st == TS_OK && !(out->units = malloc((size_t)(nu ? nu : 1) * sizeof *out->units)))
    st = ts_error(TS_ERR_OOM, "cuda attn plan: cannot allocate %lld units", (long long)nu);
  if (st == TS_OK) {
    int64_t at = 0;
    for (int c = 0; c < TS__CUDA_NCLASS; c++) {
      out->cls[c] = (ts__cuda_class_run){.u0 = at, .nu = units[c].n, .g = g[c]};
      if (units[c].n) memcpy(out->units + at, units[c].p, (size_t)units[c].n * sizeof *out->units);
      at += units[c].n;
    }
    out->nunits = nu;
    out->chunks = chunks.p, out->nchunks = chunks.n, chunks.p = NULL;
    st = copy_mbits(pl, &extra, out);
  }
  for (int c = 0; c < TS__CUDA_NCLASS; c++) free(units[c].p);
  free(chunks.p), free(extra.p);
  if (st != TS_OK) ts__cuda_flat_free(out);
  return st;
}

ts_status ts__cuda_flatten_fixed(const ts_attn_plan *pl, int cls, ts__cuda_flat *out) {
  memset(out, 0, sizeof *out);
  out->n = pl->n, out->d = pl->d;
  if (cls < 0 || cls >= TS__CUDA_NCLASS) return ts_error(TS_ERR_INVALID_ARG, "cuda attn plan: unknown chunk class %d", cls);
  if (pl->npanels > INT32_MAX) return ts_error(TS_ERR_OVERFLOW, "cuda attn plan: %lld query tiles", (long long)pl->npanels);
  out->units = malloc((size_t)(pl->npanels ? pl->npanels : 1) * sizeof *out->units);
  out->chunks = malloc((size_t)(pl->nitems ? pl->nitems : 1) * sizeof *out->chunks);
  if (!out->units || !out->chunks) {
    ts__cuda_flat_free(out);
    return ts_error(TS_ERR_OOM, "cuda attn plan: cannot allocate %lld tiles", (long long)pl->nitems);
  }
  int32_t g = 1;
  int64_t at = 0;
  for (int64_t k = 0; k < pl->npanels; k++) {
    const ts__attn_cpanel *P = &pl->panels[pl->order[k]];
    if (P->nit > INT32_MAX) {
      ts__cuda_flat_free(out);
      return ts_error(TS_ERR_OVERFLOW, "cuda attn plan: query tile at row %d has %lld key tiles", P->r0, (long long)P->nit);
    }
    out->units[k] = (ts__cuda_unit){.c0 = at, .nchunks = (int32_t)P->nit, .r0 = P->r0, .rows = P->nr, .part = -1};
    if (P->nr > g) g = P->nr;
    for (int64_t q = 0; q < P->nit; q++) {
      const ts__attn_item *it = &pl->items[P->it0 + q];
      out->chunks[at++] = (ts__cuda_chunk){.i0 = it->i0, .nr = it->br, .j0 = it->j0, .nc = it->bc,
                                           .nv = (it->br + 15) / 16, .ro = 0, .moff = it->moff};
    }
  }
  out->nunits = pl->npanels, out->nchunks = at;
  out->cls[cls] = (ts__cuda_class_run){.u0 = 0, .nu = pl->npanels, .g = g};
  ts_status st = copy_mbits(pl, NULL, out);
  if (st != TS_OK) ts__cuda_flat_free(out);
  return st;
}

/* ---- gather plans ------------------------------------------------------------------------------ */

void ts_attn_cuda_costs_default(ts_attn_cuda_costs *c, int64_t d) {
  /* ts_attn_cuda_profile on an H200 at d = 64, fp32 (docs/notes/BENCHMARKS.md, three runs): per chunk
   * 40-47, 27-29, 62-64 and 120-122 ns of device time side by side, per unit 5-7, 10-11, 15-16 and
   * 40-42 ns, for 16 x 64, 32 x 32, 32 x 64 and 64 x 64. Scaled by d / 64 (the dot products and
   * the P V row are d long). */
  static const double chunk[TS__CUDA_NCLASS] = {44.0, 28.0, 63.0, 121.0}, unit[TS__CUDA_NCLASS] = {6.0, 11.0, 15.5, 41.0};
  memset(c, 0, sizeof *c);
  const double f = (double)(d > 0 ? d : 64) / 64.0;
  for (int k = 0; k < TS__CUDA_NCLASS; k++) c->chunk_ns[k] = f * chunk[k], c->unit_ns[k] = f * unit[k];
  c->d = d;
}

/* The row group [r0, r0 + h): the union of its rows' key bits into acc (stride words); returns its
 * popcount. */
static int64_t group_union(const ts_bitmap *m, int64_t r0, int64_t h, uint64_t *acc) {
  memset(acc, 0, (size_t)m->stride * sizeof *acc);
  for (int64_t i = r0; i < r0 + h; i++) {
    const uint64_t *row = ts_bitmap_row(m, i);
    for (int64_t w = 0; w < m->stride; w++) acc[w] |= row[w];
  }
  return ts_popcount_words(acc, m->stride);
}

typedef struct gplan {
  vec units[TS__CUDA_NCLASS], chunks, words, cols, splits;
  int64_t cells, full, masked, nparts;
} gplan;

/* Cuts units with more than `cap` chunks into parts of whole key pieces (a piece = the group's row
 * slices over one run of CB keys, consecutive chunks), at most cap chunks each. */
static ts_status split_long(gplan *G, int64_t cap) {
  for (int k = 0; k < TS__CUDA_NCLASS; k++) {
    vec out = {0};
    const ts__cuda_unit *us = G->units[k].p;
    for (int64_t i = 0; i < G->units[k].n; i++) {
      const ts__cuda_unit u = us[i];
      const int32_t slices = (u.rows + ts__cuda_class_rb[k] - 1) / ts__cuda_class_rb[k];
      if (u.nchunks <= cap || u.nchunks / slices < 2) {
        TS_TRY(vec_push(&out, &u, sizeof u));
        continue;
      }
      const int32_t per = (int32_t)(cap / slices > 0 ? cap / slices : 1) * slices; /* chunks per part */
      const int32_t np = (u.nchunks + per - 1) / per;
      if (G->nparts + np > INT32_MAX) return ts_error(TS_ERR_OVERFLOW, "cuda gather plan: 2^31 split parts");
      ts__cuda_split sp = {.r0 = u.r0, .rows = u.rows, .p0 = (int32_t)G->nparts, .np = np};
      TS_TRY(vec_push(&G->splits, &sp, sizeof sp));
      for (int32_t q = 0; q < np; q++) {
        ts__cuda_unit pu = u;
        pu.c0 = u.c0 + (int64_t)q * per;
        pu.nchunks = u.nchunks - q * per < per ? u.nchunks - q * per : per;
        pu.part = (int32_t)(G->nparts + q);
        TS_TRY(vec_push(&out, &pu, sizeof pu));
      }
      G->nparts += np;
    }
    free(G->units[k].p);
    G->units[k] = out;
  }
  return TS_OK;
}

/* One row group [r0, r0 + h) of class k with key union acc (nu keys): its keys into cols, its
 * chunks (key pieces of CB outer, row slices of RB inner: one K/V load per piece), mask words of
 * their own for chunks with a disallowed cell. */
static ts_status emit_group(gplan *G, const ts_bitmap *m, int64_t r0, int32_t h, int k, const uint64_t *acc, int64_t nu) {
  const int32_t rb = ts__cuda_class_rb[k], cb = ts__cuda_class_cb[k];
  const int64_t base = G->cols.n, c0 = G->chunks.n;
  if (base + nu > INT32_MAX) return ts_error(TS_ERR_OVERFLOW, "cuda gather plan: more than 2^31 listed keys");
  for (int64_t w = 0; w < m->stride; w++)
    for (uint64_t x = acc[w]; x; x &= x - 1) {
      int32_t j = (int32_t)(w * 64 + __builtin_ctzll(x));
      TS_TRY(vec_push(&G->cols, &j, sizeof j));
    }
  const int32_t *cols = (const int32_t *)G->cols.p + base;
  for (int64_t p = 0; p < nu; p += cb) {
    const int32_t nc = (int32_t)(nu - p < cb ? nu - p : cb);
    for (int32_t ii = 0; ii < h; ii += rb) {
      const int32_t nr = h - ii < rb ? h - ii : rb, nv = (nr + 15) / 16;
      const int64_t w0 = G->words.n;
      bool full = true;
      for (int32_t j = 0; j < nc; j++)
        for (int32_t r = 0; r < nv * 16; r += 16) {
          uint16_t wd = 0;
          for (int32_t b = 0; b < 16 && r + b < nr; b++)
            if (ts_bitmap_get(m, r0 + ii + r + b, cols[p + j])) wd |= (uint16_t)(1u << b);
            else full = false;
          TS_TRY(vec_push(&G->words, &wd, sizeof wd)); /* grows words, never cols */
        }
      if (full) G->words.n = w0;
      ts__cuda_chunk c = {.i0 = ii, .nr = nr, .j0 = (int32_t)(base + p), .nc = nc, .nv = nv, .ro = 0,
                          .moff = full ? -1 : w0};
      TS_TRY(vec_push(&G->chunks, &c, sizeof c));
      G->cells += (int64_t)nr * nc;
      full ? G->full++ : G->masked++;
    }
  }
  if (G->chunks.n - c0 > INT32_MAX) return ts_error(TS_ERR_OVERFLOW, "cuda gather plan: a unit with 2^31 chunks");
  ts__cuda_unit u = {.c0 = c0, .nchunks = (int32_t)(G->chunks.n - c0), .r0 = (int32_t)r0, .rows = h, .part = -1};
  return vec_push(&G->units[k], &u, sizeof u);
}

/* Units of one class sorted by chunk count, most first (ties by row: deterministic). */
static int unit_cmp(const void *a, const void *b) {
  const ts__cuda_unit *x = a, *y = b;
  if (x->nchunks != y->nchunks) return x->nchunks > y->nchunks ? -1 : 1;
  return (x->r0 > y->r0) - (x->r0 < y->r0);
}

ts_status ts__cuda_flatten_gather(const ts_bitmap *m, int64_t d, size_t smem_limit, const ts_attn_cuda_costs *costs,
                                  ts__cuda_flat *out, ts_attn_stats *stats) {
  memset(out, 0, sizeof *out);
  if (stats) memset(stats, 0, sizeof *stats);
  if (!m || !m->bits || m->rows != m->cols || m->rows < 1)
    return ts_error(TS_ERR_INVALID_ARG, "cuda gather plan: the mask must be a non-empty square bitmap");
  if (m->rows > INT32_MAX / 2) return ts_error(TS_ERR_OVERFLOW, "cuda gather plan: n = %lld", (long long)m->rows);
  if (d < 1 || d > 256) return ts_error(TS_ERR_UNSUPPORTED, "cuda gather plan: head dimension d = %lld is not in [1, 256]", (long long)d);
  ts_attn_cuda_costs def;
  if (!costs) ts_attn_cuda_costs_default(&def, d), costs = &def;
  for (int k = 0; k < TS__CUDA_NCLASS; k++)
    if (!(costs->chunk_ns[k] >= 0) || !(costs->unit_ns[k] >= 0))
      return ts_error(TS_ERR_INVALID_ARG, "cuda gather plan: cost of class %d is negative or NaN", k);
  /* the row-group options: height, class; one that does not fit the shared memory is left out */
  static const struct { int32_t h; int k; } opt[] = {{64, 3}, {32, 1}, {32, 2}, {16, 0}};
  bool fits[4];
  bool any = false;
  for (int o = 0; o < 4; o++) {
    fits[o] = ts__cuda_smem_bytes(opt[o].h, ts__cuda_class_rb[opt[o].k], ts__cuda_class_cb[opt[o].k], d) <= smem_limit;
    any |= fits[o];
  }
  if (!any)
    return ts_error(TS_ERR_UNSUPPORTED, "cuda gather plan: head dimension d = %lld needs %zu bytes of shared memory per block, the device allows %zu",
                    (long long)d, ts__cuda_smem_bytes(16, 16, 64, d), smem_limit);
  const int64_t n = m->rows;
  gplan G;
  memset(&G, 0, sizeof G);
  /* per band, the key unions of its row groups, each computed once: 16-row quarters [0, 4), their
   * OR in pairs (32-row halves [4, 6)), and the whole band [6] */
  const int64_t sw = m->stride;
  uint64_t *U = malloc((size_t)(7 * sw) * sizeof *U);
  int64_t nk[7]; /* their key counts */
  static const int first[3] = {0, 4, 6}; /* groups of 16, 32, 64 rows */
  ts_status st = U ? TS_OK : ts_error(TS_ERR_OOM, "cuda gather plan: scratch");
  for (int64_t R = 0; R < n && st == TS_OK; R += 64) {
    const int32_t band = (int32_t)(n - R < 64 ? n - R : 64);
    for (int q = 0; q < 4; q++) {
      const int32_t gh = band - 16 * q < 16 ? band - 16 * q : 16;
      if (gh > 0) nk[q] = group_union(m, R + 16 * q, gh, U + q * sw);
      else memset(U + q * sw, 0, (size_t)sw * sizeof *U), nk[q] = 0;
    }
    for (int g = 4; g < 7; g++) {
      const uint64_t *a = U + (g == 6 ? 4 : 2 * (g - 4)) * sw, *b = a + sw;
      for (int64_t w = 0; w < sw; w++) U[g * sw + w] = a[w] | b[w];
      nk[g] = ts_popcount_words(U + g * sw, sw);
    }
    /* each option's predicted cost over the band, then the cheapest one's groups */
    double best = 0;
    int bo = -1;
    for (int o = 0; o < 4; o++) {
      if (!fits[o]) continue;
      const int k = opt[o].k, L = opt[o].h == 16 ? 0 : opt[o].h == 32 ? 1 : 2;
      const int32_t h = opt[o].h, rb = ts__cuda_class_rb[k], cb = ts__cuda_class_cb[k];
      double cost = 0;
      for (int32_t g0 = 0, gi = 0; g0 < band; g0 += h, gi++) {
        const int32_t gh = band - g0 < h ? band - g0 : h;
        cost += costs->unit_ns[k] + (double)((nk[first[L] + gi] + cb - 1) / cb) * (double)((gh + rb - 1) / rb) * costs->chunk_ns[k];
      }
      if (bo < 0 || cost < best) best = cost, bo = o;
    }
    const int k = opt[bo].k, L = opt[bo].h == 16 ? 0 : opt[bo].h == 32 ? 1 : 2;
    const int32_t h = opt[bo].h;
    for (int32_t g0 = 0, gi = 0; g0 < band && st == TS_OK; g0 += h, gi++) {
      const int32_t gh = band - g0 < h ? band - g0 : h;
      st = emit_group(&G, m, R + g0, gh, k, U + (first[L] + gi) * sw, nk[first[L] + gi]);
    }
  }
  free(U);
  /* split the groups far longer than the mean: the walk of one block is the kernel's critical path */
  int64_t nu = 0;
  for (int k = 0; k < TS__CUDA_NCLASS; k++) nu += G.units[k].n;
  if (st == TS_OK && nu > 0) {
    const int64_t mean = (G.chunks.n + nu - 1) / nu, cap = 2 * mean > 8 ? 2 * mean : 8;
    st = split_long(&G, cap);
  }
  nu = 0;
  for (int k = 0; k < TS__CUDA_NCLASS; k++) nu += G.units[k].n;
  if (st == TS_OK && nu > INT32_MAX) st = ts_error(TS_ERR_OVERFLOW, "cuda gather plan: %lld thread blocks per head", (long long)nu);
  if (st == TS_OK && !(out->units = malloc((size_t)(nu ? nu : 1) * sizeof *out->units)))
    st = ts_error(TS_ERR_OOM, "cuda gather plan: cannot allocate %lld units", (long long)nu);
  if (st == TS_OK) {
    static const int32_t gk[TS__CUDA_NCLASS] = {16, 32, 32, 64};
    int64_t at = 0;
    for (int k = 0; k < TS__CUDA_NCLASS; k++) {
      if (G.units[k].n) {
        qsort(G.units[k].p, (size_t)G.units[k].n, sizeof(ts__cuda_unit), unit_cmp);
        memcpy(out->units + at, G.units[k].p, (size_t)G.units[k].n * sizeof *out->units);
      }
      out->cls[k] = (ts__cuda_class_run){.u0 = at, .nu = G.units[k].n, .g = gk[k]};
      at += G.units[k].n;
    }
    out->n = n, out->d = d, out->nunits = nu;
    out->chunks = G.chunks.p, out->nchunks = G.chunks.n, G.chunks.p = NULL;
    out->mbits = G.words.p, out->nmbits = G.words.n, G.words.p = NULL;
    out->cols = G.cols.p, out->ncols = G.cols.n, G.cols.p = NULL;
    out->splits = G.splits.p, out->nsplits = G.splits.n, out->nparts = G.nparts, G.splits.p = NULL;
    if (!out->chunks && !(out->chunks = malloc(sizeof *out->chunks))) st = ts_error(TS_ERR_OOM, "cuda gather plan: chunks");
    if (st == TS_OK && !out->mbits && !(out->mbits = malloc(sizeof *out->mbits))) st = ts_error(TS_ERR_OOM, "cuda gather plan: words");
    if (st == TS_OK && !out->cols && !(out->cols = malloc(sizeof *out->cols))) st = ts_error(TS_ERR_OOM, "cuda gather plan: keys");
  }
  if (st == TS_OK && stats) {
    stats->nnz = ts_bitmap_count(m);
    stats->cells = stats->pv_cells = G.cells;
    stats->tiles_full = G.full, stats->tiles_masked = G.masked;
    stats->panels = nu - G.nparts + G.splits.n; /* row groups */
    stats->segments = nu;                        /* thread blocks per (batch, head) */
    stats->work_ratio = stats->nnz ? (double)G.cells / (double)stats->nnz : 0.0;
  }
  for (int k = 0; k < TS__CUDA_NCLASS; k++) free(G.units[k].p);
  free(G.chunks.p), free(G.words.p), free(G.cols.p), free(G.splits.p);
  if (st != TS_OK) ts__cuda_flat_free(out);
  return st;
}
