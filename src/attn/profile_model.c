/* Cost model over a measured attention profile: interpolation of the seconds table (rules in
 * attn_profile.h), the ts_attn_cost_fn adapter, and the residue-segment estimate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/attn_profile.h"

struct ts_attn_cost_model {
  int nsizes, ndens, nmenu;
  int32_t sizes[TS_ATTN_PROFILE_MAX_SIZES];
  double logs[TS_ATTN_PROFILE_MAX_SIZES];
  double densities[TS_ATTN_PROFILE_MAX_DENS];
  ts_attn_tile menu[TS_ATTN_PROFILE_MAX_MENU];
  double *t;  /* [nmenu][ndens][nsizes][nsizes] */
  double *ov; /* [nsizes][nsizes] */
};

ts_status ts_attn_cost_model_create(ts_attn_cost_model **out, const ts_attn_profile *p) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "attn cost model: NULL output");
  *out = NULL;
  if (!p || !p->seconds || !p->overhead || p->nsizes < 1 || p->ndens < 1 || p->nmenu < 1 ||
      p->nsizes > TS_ATTN_PROFILE_MAX_SIZES || p->ndens > TS_ATTN_PROFILE_MAX_DENS || p->nmenu > TS_ATTN_PROFILE_MAX_MENU)
    return ts_error(TS_ERR_INVALID_ARG, "attn cost model: empty or malformed profile");
  for (int i = 0; i < p->nsizes; i++)
    if (p->sizes[i] < 1 || (i > 0 && p->sizes[i] <= p->sizes[i - 1]))
      return ts_error(TS_ERR_INVALID_ARG, "attn cost model: profile sizes[%d] = %d is not ascending and >= 1", i, p->sizes[i]);
  for (int i = 0; i < p->ndens; i++)
    if (!(p->densities[i] > 0 && p->densities[i] <= 1) || (i > 0 && p->densities[i] <= p->densities[i - 1]))
      return ts_error(TS_ERR_INVALID_ARG, "attn cost model: profile densities[%d] = %g is not ascending in (0, 1]", i,
                      p->densities[i]);
  ts_attn_cost_model *m = calloc(1, sizeof *m);
  size_t ne = (size_t)p->nmenu * p->ndens * p->nsizes * p->nsizes, no = (size_t)p->nsizes * p->nsizes;
  if (m) m->t = malloc(ne * sizeof(double)), m->ov = malloc(no * sizeof(double));
  if (!m || !m->t || !m->ov) {
    ts_attn_cost_model_destroy(m);
    return ts_error(TS_ERR_OOM, "attn cost model: cannot allocate %zu entries", ne);
  }
  m->nsizes = p->nsizes, m->ndens = p->ndens, m->nmenu = p->nmenu;
  memcpy(m->sizes, p->sizes, sizeof m->sizes);
  memcpy(m->densities, p->densities, sizeof m->densities);
  memcpy(m->menu, p->menu, sizeof m->menu);
  for (int i = 0; i < m->nsizes; i++) m->logs[i] = log((double)m->sizes[i]);
  memcpy(m->t, p->seconds, ne * sizeof(double));
  memcpy(m->ov, p->overhead, no * sizeof(double));
  *out = m;
  return TS_OK;
}

void ts_attn_cost_model_destroy(ts_attn_cost_model *m) {
  if (!m) return;
  free(m->t);
  free(m->ov);
  free(m);
}

int ts_attn_cost_model_menu(const ts_attn_cost_model *m, const ts_attn_tile **menu) {
  if (menu) *menu = m ? m->menu : NULL;
  return m ? m->nmenu : 0;
}

/* Where x falls on the size axis: entries i0, i1 with weight w of i1 (log-linear), and the
 * proportional factor beyond the last size. */
typedef struct axis_pos {
  int i0, i1;
  double w, scale;
} axis_pos;

static axis_pos locate(const ts_attn_cost_model *m, int64_t x) {
  axis_pos a = {0, 0, 0.0, 1.0};
  int last = m->nsizes - 1;
  if (x <= m->sizes[0]) return a;
  if (x >= m->sizes[last]) {
    a.i0 = a.i1 = last;
    a.scale = (double)x / (double)m->sizes[last];
    return a;
  }
  int i = 0;
  while (m->sizes[i + 1] < x) i++;
  a.i0 = i, a.i1 = i + 1;
  a.w = (log((double)x) - m->logs[i]) / (m->logs[i + 1] - m->logs[i]);
  return a;
}

/* T: one [nsizes][nsizes] table. */
static double bilinear_table(const ts_attn_cost_model *m, const double *T, axis_pos r, axis_pos c) {
  int ns = m->nsizes;
  double top = (1 - c.w) * T[r.i0 * ns + c.i0] + c.w * T[r.i0 * ns + c.i1];
  double bot = (1 - c.w) * T[r.i1 * ns + c.i0] + c.w * T[r.i1 * ns + c.i1];
  return ((1 - r.w) * top + r.w * bot) * r.scale * c.scale;
}

static double bilinear(const ts_attn_cost_model *m, int tile, int dens, axis_pos r, axis_pos c) {
  return bilinear_table(m, m->t + ((size_t)tile * m->ndens + dens) * m->nsizes * m->nsizes, r, c);
}

/* The overhead is a per-call, per-panel constant: clamped at both ends, never extrapolated
 * proportionally (a bigger block pays the same call). */
static double overhead(const ts_attn_cost_model *m, int64_t rows, int64_t cols) {
  axis_pos r = locate(m, rows), c = locate(m, cols);
  r.scale = c.scale = 1.0;
  return bilinear_table(m, m->ov, r, c);
}

/* Block work: the single-block time less the empty schedule's, at least 5% of the former. */
static double marginal(const ts_attn_cost_model *m, int ti, int64_t rows, int64_t cols, int64_t nnz);

static int find_tile(const ts_attn_cost_model *m, ts_attn_tile t) {
  for (int i = 0; i < m->nmenu; i++)
    if (m->menu[i].br == t.br && m->menu[i].bc == t.bc) return i;
  return -1;
}

/* Interpolated seconds at density x (full: every cell allowed), rows and cols >= the smallest size. */
static double predict_grid(const ts_attn_cost_model *m, int ti, int64_t rows, int64_t cols, double x, bool full) {
  axis_pos r = locate(m, rows), c = locate(m, cols);
  int nd = m->ndens;
  const double *D = m->densities;
  if (full && D[nd - 1] >= 1.0) return bilinear(m, ti, nd - 1, r, c);
  if (x <= D[0] || nd == 1) return bilinear(m, ti, 0, r, c);
  if (x >= D[nd - 1]) return bilinear(m, ti, nd - 1, r, c);
  int k = 0;
  while (D[k + 1] < x) k++;
  double w = (x - D[k]) / (D[k + 1] - D[k]);
  return (1 - w) * bilinear(m, ti, k, r, c) + w * bilinear(m, ti, k + 1, r, c);
}

/* Interpolated seconds; tile index already resolved, shape already checked. Below the smallest
 * size s along an axis, the call and panel overhead o stays and the block's work shrinks with the
 * side: t = o + (t(s) - o) * x / s (fewer keys to run; fewer query rows to pack and normalize,
 * though the lanes stay padded). Against clamping to t(s), this lowered the 90th-percentile error
 * on window2d k=13 blocks from 61% to 44% (ic order) and from 43% to 37% (hilbert), most of those
 * blocks being under 8 x 8 (bench/bench_attn_model.c). */
static double predict(const ts_attn_cost_model *m, int ti, int64_t rows, int64_t cols, int64_t nnz) {
  double x = (double)nnz / ((double)rows * (double)cols);
  bool full = nnz == rows * cols;
  int64_t s0 = m->sizes[0], rc = rows < s0 ? s0 : rows, cc = cols < s0 ? s0 : cols;
  double t = predict_grid(m, ti, rc, cc, x, full);
  if (rc == rows && cc == cols) return t;
  double w = t - overhead(m, rc, cc), f = (double)rows / (double)rc * (double)cols / (double)cc;
  if (w < 0.05 * t) w = 0.05 * t;
  return (t - w) + w * f;
}

ts_status ts_attn_cost_model_predict(const ts_attn_cost_model *m, int64_t rows, int64_t cols, int64_t nnz,
                                     ts_attn_tile t, double *seconds) {
  if (!m || !seconds) return ts_error(TS_ERR_INVALID_ARG, "attn cost model: NULL model or output");
  if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX || nnz < 0 || nnz > rows * cols)
    return ts_error(TS_ERR_INVALID_ARG, "attn cost model: block %lld x %lld with nnz %lld is not a valid block",
                    (long long)rows, (long long)cols, (long long)nnz);
  int ti = find_tile(m, t);
  if (ti < 0) return ts_error(TS_ERR_NOT_FOUND, "attn cost model: tile %d x %d is not in the profile's menu", t.br, t.bc);
  *seconds = predict(m, ti, rows, cols, nnz);
  return TS_OK;
}

static double marginal(const ts_attn_cost_model *m, int ti, int64_t rows, int64_t cols, int64_t nnz) {
  double t = predict(m, ti, rows, cols, nnz), w = t - overhead(m, rows, cols);
  return w > 0.05 * t ? w : 0.05 * t;
}

ts_status ts_attn_cost_model_overhead(const ts_attn_cost_model *m, int64_t rows, int64_t cols, double *seconds) {
  if (!m || !seconds) return ts_error(TS_ERR_INVALID_ARG, "attn cost model: NULL model or output");
  if (rows < 1 || cols < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn cost model: block %lld x %lld is not a valid block", (long long)rows,
                    (long long)cols);
  *seconds = overhead(m, rows, cols);
  return TS_OK;
}

double ts_attn_cost_profiled(const ts_block *b, ts_attn_tile t, void *model) {
  const ts_attn_cost_model *m = model;
  if (!m || !b || b->rows < 1 || b->cols < 1 || b->nnz < 0 || b->nnz > (int64_t)b->rows * b->cols) return 1e300;
  int ti = find_tile(m, t);
  return ti < 0 ? 1e300 : marginal(m, ti, b->rows, b->cols, b->nnz);
}

ts_status ts_attn_cost_model_residue(const ts_attn_cost_model *m, const ts_csr *cells, int64_t r0, int64_t nr,
                                     int64_t c0, int64_t nc, ts_attn_tile t, double *seconds, int64_t *nonempty) {
  if (!m || !cells || !seconds) return ts_error(TS_ERR_INVALID_ARG, "attn cost residue: NULL model, cells or output");
  if (nr < 1 || nc < 1 || r0 < 0 || c0 < 0 || r0 + nr > cells->rows || c0 + nc > cells->cols)
    return ts_error(TS_ERR_INVALID_ARG, "attn cost residue: segment rows [%lld, %lld) x cols [%lld, %lld) is not inside %lld x %lld",
                    (long long)r0, (long long)(r0 + nr), (long long)c0, (long long)(c0 + nc), (long long)cells->rows,
                    (long long)cells->cols);
  int ti = find_tile(m, t);
  if (ti < 0) return ts_error(TS_ERR_NOT_FOUND, "attn cost residue: tile %d x %d is not in the profile's menu", t.br, t.bc);
  /* One flag per column sub-tile of the current row strip of br rows. */
  int64_t ncs = (nc + t.bc - 1) / t.bc, count = 0;
  unsigned char *seen = calloc((size_t)ncs, 1);
  if (!seen) return ts_error(TS_ERR_OOM, "attn cost residue: cannot allocate %lld flags", (long long)ncs);
  for (int64_t s0 = r0; s0 < r0 + nr; s0 += t.br) {
    memset(seen, 0, (size_t)ncs);
    int64_t s1 = s0 + t.br < r0 + nr ? s0 + t.br : r0 + nr;
    for (int64_t i = s0; i < s1; i++)
      for (int64_t p = cells->rowptr[i]; p < cells->rowptr[i + 1]; p++) {
        int64_t j = cells->col[p];
        if (j < c0 || j >= c0 + nc) continue;
        unsigned char *f = &seen[(j - c0) / t.bc];
        count += !*f, *f = 1;
      }
  }
  free(seen);
  /* A masked sub-tile of the full br x bc size costs about the work of a br x bc block at the
   * lowest profiled density (partial border sub-tiles are priced as whole: lanes are padded). */
  double per = marginal(m, ti, t.br, t.bc, 0);
  *seconds = (double)count * per;
  if (nonempty) *nonempty = count;
  return TS_OK;
}
