/* Cost model: interpolates a profile's tile timings (or a fixed formula on the same grid) and
 * sums them over a layer's tiles to predict a partition's time. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gconv/gconv_internal.h"

static ts_gconv_cost *alloc_model(int nrows, int nk) {
  ts_gconv_cost *m = ts_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->nrows = nrows, m->nk = nk;
  m->sec = ts_calloc((size_t)nrows * nk * 4, sizeof(double));
  if (!m->sec) {
    ts_free(m);
    return NULL;
  }
  return m;
}

ts_status ts_gconv_cost_create(ts_gconv_cost **out, const ts_gconv_profile *p) {
  if (!p || !out || !p->seconds || p->nrows < 1 || p->nk < 1 || p->nrows > TS_GCONV_PROFILE_MAX ||
      p->nk > TS_GCONV_PROFILE_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "gconv cost: bad profile");
  ts_gconv_cost *m = alloc_model(p->nrows, p->nk);
  if (!m) return ts_error(TS_ERR_OOM, "gconv cost: out of memory");
  memcpy(m->rows, p->rows, (size_t)p->nrows * sizeof(int32_t));
  memcpy(m->ks, p->ks, (size_t)p->nk * sizeof(int32_t));
  memcpy(m->sec, p->seconds, (size_t)p->nrows * p->nk * 4 * sizeof(double));
  snprintf(m->source, sizeof m->source, "profile %s %s", p->level, p->date);
  *out = m;
  return TS_OK;
}

/* Cycles of one 64-column tile at 3.5 GHz: per row block of mb rows and nv vectors, each k step
 * costs max(mb * nv FMAs, (nv + mb) / 2 loads at two per cycle), plus 30 cycles per block. */
ts_status ts_gconv_cost_analytic(ts_gconv_cost **out) {
  static const int32_t rows[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32}, ks[] = {1, 4096};
  ts_gconv_cost *m = alloc_model(11, 2);
  if (!m) return ts_error(TS_ERR_OOM, "gconv cost: out of memory");
  memcpy(m->rows, rows, sizeof rows);
  memcpy(m->ks, ks, sizeof ks);
  for (int r = 0; r < m->nrows; r++) {
    int h[TS_GCONV_PROFILE_MAX];
    const int nb = ts_gconv_row_blocks(rows[r], h);
    for (int k = 0; k < m->nk; k++)
      for (int v = 1; v <= 4; v++) {
        double cyc = 0;
        for (int b = 0; b < nb; b++) cyc += 30 + ks[k] * fmax((double)h[b] * v, (v + h[b]) / 2.0);
        m->sec[((size_t)r * m->nk + k) * 4 + v - 1] = cyc / 3.5e9;
      }
  }
  snprintf(m->source, sizeof m->source, "analytic");
  *out = m;
  return TS_OK;
}

void ts_gconv_cost_destroy(ts_gconv_cost *m) {
  if (!m) return;
  ts_free(m->sec);
  ts_free(m);
}

const char *ts_gconv_cost_source(const ts_gconv_cost *m) { return m ? m->source : ""; }

/* Linear in K between grid points, extrapolated with the nearest segment's slope (clamped at 0). */
static double at_rows(const ts_gconv_cost *m, int ri, int64_t K, int v) {
  const double *s = m->sec + (size_t)ri * m->nk * 4 + (v - 1);
  if (m->nk == 1) return s[0] * (double)K / m->ks[0];
  int k = 0;
  while (k < m->nk - 2 && K > m->ks[k + 1]) k++;
  double k0 = m->ks[k], k1 = m->ks[k + 1], y0 = s[(size_t)k * 4], y1 = s[(size_t)(k + 1) * 4];
  double y = y0 + (y1 - y0) * ((double)K - k0) / (k1 - k0);
  return y > 0 ? y : 0;
}

double ts_gconv_cost_tile(const ts_gconv_cost *m, int rows, int64_t K, int nvec) {
  if (!m || rows < 1 || nvec < 1 || nvec > 4) return INFINITY;
  const int last = m->rows[m->nrows - 1];
  if (rows > last) /* beyond the grid: whole copies of the largest height plus the rest */
    return (double)(rows / last) * ts_gconv_cost_tile(m, last, K, nvec) +
           (rows % last ? ts_gconv_cost_tile(m, rows % last, K, nvec) : 0);
  int r = 0;
  while (r < m->nrows - 1 && rows > m->rows[r + 1]) r++;
  if (rows <= m->rows[0]) return at_rows(m, 0, K, nvec) * rows / m->rows[0];
  if (rows == m->rows[r]) return at_rows(m, r, K, nvec);
  double r0 = m->rows[r], r1 = m->rows[r + 1], a = at_rows(m, r, K, nvec), b = at_rows(m, r + 1, K, nvec);
  return a + (b - a) * ((double)rows - r0) / (r1 - r0);
}

double ts_gconv_cost_part(const ts_gconv_cost *m, const ts_gconv_layer *l, int rows, int64_t nunion) {
  ts__gconv_geom g;
  ts__gconv_geom_make(l, &g);
  const int64_t K = nunion * g.taps, full = g.ncols / TS_GCONV_NR, tail = g.ncols % TS_GCONV_NR;
  double t = (double)full * ts_gconv_cost_tile(m, rows, K, 4);
  if (tail) t += ts_gconv_cost_tile(m, rows, K, (int)((tail + 15) / 16));
  return t * l->n;
}
