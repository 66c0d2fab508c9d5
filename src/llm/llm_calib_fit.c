/* Thresholds (CATS, SATS, TEAL), the router's probe and the SATS curves' picture from the
 * statistics llm_calib.c collected (tessera/llm_sparse.h; the proxies: llm_calib.c's header). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_calib_internal.h"
#include "tessera/plot.h"

/* ---- the methods ------------------------------------------------------------------------ */

static double sats_curve(const ts_llm_calib *c, int l, int k) {
  return k == 0 || c->sats_base[l] <= 0 ? 0 : c->sats_err[(size_t)l * TS__LV + k] / c->sats_base[l];
}
static double teal_curve(const ts_llm_calib *c, int l, int p, int k) {
  const double b = c->teal_base[(size_t)l * TS_LLM_NPROJ + p];
  return k == 0 || b <= 0 ? 0 : c->teal_err[((size_t)l * TS_LLM_NPROJ + p) * TS__LV + k] / b;
}
static int stat_of(int p) {
  return p <= TS_LLM_PROJ_V ? ST_ATTN : p == TS_LLM_PROJ_O ? ST_O : p == TS_LLM_PROJ_DOWN ? ST_DOWN : ST_FFN;
}

/* SATS: levels k_l minimising sum_l E_l(k_l) subject to sum_l k_l = K (the target's level sum),
 * exactly on the grid by dynamic programming over layers. */
static ts_status sats_levels(const ts_llm_calib *c, double target, int *lev) {
  const int L = c->n_layer, K = (int)lround(target * 40.0 * L), KM = (TS__LV - 1) * L;
  if (K > KM) return ts_error(TS_ERR_INVALID_ARG, "SATS: target %.3f above the grid's 95%%", target);
  double *f = ts_malloc((size_t)(L + 1) * (size_t)(KM + 1) * sizeof *f);
  int *arg = ts_malloc((size_t)L * (size_t)(KM + 1) * sizeof *arg);
  if (!f || !arg) {
    ts_free(f), ts_free(arg);
    return ts_error(TS_ERR_OOM, "SATS: out of memory");
  }
  for (int s = 0; s <= KM; s++) f[s] = s == 0 ? 0 : INFINITY;
  for (int l = 0; l < L; l++)
    for (int s = 0; s <= KM; s++) {
      double best = INFINITY;
      int bk = 0;
      for (int k = 0; k < TS__LV && k <= s; k++) {
        const double v = f[(size_t)l * (KM + 1) + s - k] + sats_curve(c, l, k);
        if (v < best) best = v, bk = k;
      }
      f[(size_t)(l + 1) * (KM + 1) + s] = best;
      arg[(size_t)l * (KM + 1) + s] = bk;
    }
  for (int l = L - 1, s = K; l >= 0; l--) {
    lev[l] = arg[(size_t)l * (KM + 1) + s];
    s -= lev[l];
  }
  ts_free(f), ts_free(arg);
  return TS_OK;
}

ts_status ts_llm_calibrate(const ts_llm_calib *c, const ts_llm_calib_opts *o, ts_llm_thresholds **out) {
  if (!c || !o || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: NULL argument");
  *out = NULL;
  if (!(o->target > 0 && o->target < 0.95))
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: target sparsity %g outside (0, 0.95)", o->target);
  if (o->method == TS_LLM_SPARSE_TEAL && !c->teal)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: TEAL needs statistics collected with method TEAL (its error curves)");
  if (o->method != TS_LLM_SPARSE_CATS && o->method != TS_LLM_SPARSE_TEAL && o->method != TS_LLM_SPARSE_SATS)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_calibrate: method %d is not cats, teal or sats", (int)o->method);
  ts_llm_thresholds *t = NULL;
  TS_TRY(ts_llm_thresholds_create(&t, c->m));
  const int L = c->n_layer;
  double mean = 0;
  ts_status st = TS_OK;
  if (o->method == TS_LLM_SPARSE_CATS) {
    for (int l = 0; l < L; l++) {
      t->layer[l].act = ts__calib_quantile(c, l, ST_ACT, o->target);
      t->sparsity[l] = o->target;
      const double kf = o->target * 40;
      const int k = (int)floor(kf);
      t->proxy[l] = k + 1 < TS__LV ? sats_curve(c, l, k) + (kf - k) * (sats_curve(c, l, k + 1) - sats_curve(c, l, k)) : sats_curve(c, l, k);
      mean += o->target;
    }
  } else if (o->method == TS_LLM_SPARSE_SATS) {
    int *lev = ts_malloc((size_t)L * sizeof *lev);
    st = lev ? sats_levels(c, o->target, lev) : ts_error(TS_ERR_OOM, "SATS: out of memory");
    for (int l = 0; st == TS_OK && l < L; l++) {
      t->layer[l].act = c->grid[((size_t)l * NST + ST_ACT) * TS__LV + lev[l]];
      t->sparsity[l] = lev[l] / 40.0;
      t->proxy[l] = sats_curve(c, l, lev[l]);
      mean += t->sparsity[l];
    }
    ts_free(lev);
  } else { /* TEAL: per block, the step with the least added error per parameter-weighted sparsity */
    double wsum = 0;
    for (int p = 0; p < TS_LLM_NPROJ; p++) wsum += c->wparam[p];
    for (int l = 0; l < L; l++) {
      int k[TS_LLM_NPROJ] = {0};
      double s = 0;
      while (s < o->target - 1e-12) {
        int bp = -1;
        double best = INFINITY;
        for (int p = 0; p < TS_LLM_NPROJ; p++) {
          if (k[p] + 1 >= TS__LV) continue;
          const double de = teal_curve(c, l, p, k[p] + 1) - teal_curve(c, l, p, k[p]);
          const double ds = c->wparam[p] / wsum / 40.0;
          if (de / ds < best) best = de / ds, bp = p;
        }
        if (bp < 0) break;
        k[bp]++;
        s += c->wparam[bp] / wsum / 40.0;
      }
      double e = 0;
      for (int p = 0; p < TS_LLM_NPROJ; p++) {
        t->layer[l].in[p] = c->grid[((size_t)l * NST + stat_of(p)) * TS__LV + k[p]];
        e += teal_curve(c, l, p, k[p]);
      }
      t->sparsity[l] = s;
      t->proxy[l] = e;
      mean += s;
    }
  }
  if (st != TS_OK) {
    ts_llm_thresholds_destroy(t);
    return st;
  }
  ts_llm_thresholds_info *i = &t->info;
  i->method = o->method;
  i->target = o->target;
  i->calibrated = mean / L;
  i->tokens = c->tokens;
  snprintf(i->text, sizeof i->text, "%s", c->text);
  ts_provenance_here(&i->prov, ts_isa_active(), 0);
  if (o->curves_svg && o->method == TS_LLM_SPARSE_SATS) st = ts__calib_curves_svg(c, t, o->curves_svg);
  if (st != TS_OK) {
    ts_llm_thresholds_destroy(t);
    return st;
  }
  *out = t;
  return TS_OK;
}

/* ---- the router ------------------------------------------------------------------------- */

/* Solves the 4 x 4 system A w = b (Gaussian elimination with partial pivoting, a ridge 1e-9 on
 * the diagonal); false when singular. */
static bool solve4(double A[4][4], double b[4], double w[4]) {
  for (int i = 0; i < 4; i++) A[i][i] += 1e-9;
  for (int col = 0; col < 4; col++) {
    int piv = col;
    for (int r = col + 1; r < 4; r++)
      if (fabs(A[r][col]) > fabs(A[piv][col])) piv = r;
    if (fabs(A[piv][col]) < 1e-300) return false;
    for (int k = 0; k < 4; k++) {
      const double tmp = A[col][k];
      A[col][k] = A[piv][k], A[piv][k] = tmp;
    }
    const double tb = b[col];
    b[col] = b[piv], b[piv] = tb;
    for (int r = col + 1; r < 4; r++) {
      const double f = A[r][col] / A[col][col];
      for (int k = col; k < 4; k++) A[r][k] -= f * A[col][k];
      b[r] -= f * b[col];
    }
  }
  for (int r = 3; r >= 0; r--) {
    double s = b[r];
    for (int k = r + 1; k < 4; k++) s -= A[r][k] * w[k];
    w[r] = s / A[r][r];
  }
  return true;
}

/* the grid level of threshold t in layer l's activation grid (nearest) */
static int level_of(const ts_llm_calib *c, int l, float t) {
  const float *g = c->grid + ((size_t)l * NST + ST_ACT) * TS__LV;
  int best = 0;
  for (int k = 1; k < TS__LV; k++)
    if (fabsf(g[k] - t) < fabsf(g[best] - t)) best = k;
  return best;
}

ts_status ts_llm_router_train(const ts_llm_calib *c, const ts_llm_thresholds *t, ts_llm_router **out) {
  if (!c || !t || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_train: NULL argument");
  *out = NULL;
  if (t->n_layer != c->n_layer) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_router_train: thresholds of %d layers, statistics of %d", t->n_layer, c->n_layer);
  ts_llm_router *r = NULL;
  TS_TRY(ts_llm_router_create(&r, c->m));
  for (int l = 0; l < c->n_layer; l++) {
    const int k = level_of(c, l, t->layer[l].act);
    double A[4][4] = {{0}}, b[4] = {0}, w[4] = {0};
    for (int64_t i = 0; i < c->rs_n; i++) {
      const float *s = c->rs + (((size_t)i * c->n_layer + l) * TS__LV + k) * 4;
      const double f[4] = {1, s[0], s[1], s[2]};
      for (int a = 0; a < 4; a++) {
        for (int e = 0; e < 4; e++) A[a][e] += f[a] * f[e];
        b[a] += f[a] * s[3];
      }
    }
    if (!solve4(A, b, w)) memset(w, 0, sizeof w);
    memcpy(ts_llm_router_weights(r, l), w, sizeof w);
  }
  *out = r;
  return TS_OK;
}

/* ---- the SATS curves as a picture --------------------------------------------------------- */

/* One chart: per layer its proxy E_l (log scale) against the calibration sparsity of the grid
 * levels, coloured by depth, and the level SATS chose for it marked. */
ts_status ts__calib_curves_svg(const ts_llm_calib *c, const ts_llm_thresholds *t, const char *path) {
  const double W = 860, H = 520, x0 = 70, y0 = 64, pw = 600, ph = 400;
  double lo = INFINITY, hi = 0;
  for (int l = 0; l < c->n_layer; l++)
    for (int k = 1; k < TS__LV; k++) {
      const double e = sats_curve(c, l, k);
      if (e > 0) lo = e < lo ? e : lo, hi = e > hi ? e : hi;
    }
  if (!(hi > 0)) return TS_OK; /* nothing measured */
  lo = pow(10, floor(log10(lo))), hi = pow(10, ceil(log10(hi)));
  ts_svg *g;
  TS_TRY(ts_svg_create(&g, W, H));
  ts_svg_rect(g, 0, 0, W, H, 0xFFFFFF);
  char buf[160];
  snprintf(buf, sizeof buf, "SATS proxy per layer: %s, %lld calibration tokens, target %.0f%%", c->model_name,
           (long long)c->tokens, t->info.target * 100);
  ts_svg_text(g, 14, 22, 13, 's', 0x000000, buf);
  ts_svg_frame(g, x0, y0, pw, ph, 0x000000, 1);
#define PX(s) (x0 + pw * (s) / 0.95)
#define PY(e) (y0 + ph * (1 - (log10(e) - log10(lo)) / (log10(hi) - log10(lo))))
  for (double dec = lo; dec <= hi * 1.0001; dec *= 10) {
    ts_svg_line(g, x0 - 4, PY(dec), x0, PY(dec), 0x000000, 1);
    snprintf(buf, sizeof buf, "%g", dec);
    ts_svg_text(g, x0 - 6, PY(dec) + 4, 11, 'e', 0x000000, buf);
  }
  for (int s = 0; s <= 90; s += 10) {
    ts_svg_line(g, PX(s / 100.0), y0 + ph, PX(s / 100.0), y0 + ph + 4, 0x000000, 1);
    snprintf(buf, sizeof buf, "%d%%", s);
    ts_svg_text(g, PX(s / 100.0), y0 + ph + 16, 11, 'm', 0x000000, buf);
  }
  ts_svg_text(g, x0 + pw / 2, H - 8, 12, 'm', 0x000000,
              c->gemma ? "neurons skipped on the calibration text (|gelu(gate)| <= t)" : "neurons skipped on the calibration text (|silu(gate)| <= t)");
  ts_svg_text(g, 14, y0 - 14, 12, 's', 0x000000,
              c->gemma ? "E_l = mean over tokens of |P(D(m.h)) - P(Dh)|^2 / |x|^2, P the post-FFN norm (log scale)"
                       : "E_l = mean over tokens of |D(m.h) - Dh|^2 / |x|^2 (log scale)");
  for (int l = 0; l < c->n_layer; l++) {
    const uint32_t col = ts_plot_colormap(0.15 + 0.8 * l / (c->n_layer > 1 ? c->n_layer - 1 : 1));
    for (int k = 2; k < TS__LV; k++) {
      const double e0 = sats_curve(c, l, k - 1), e1 = sats_curve(c, l, k);
      if (e0 > 0 && e1 > 0) ts_svg_line(g, PX((k - 1) / 40.0), PY(e0), PX(k / 40.0), PY(e1), col, 1.2);
    }
    const double s = t->sparsity[l], e = t->proxy[l];
    if (e > 0) {
      snprintf(buf, sizeof buf, "M%.1f %.1fh6v6h-6z", PX(s) - 3, PY(e) - 3);
      ts_svg_path(g, buf, col);
    }
  }
  for (int l = 0; l < c->n_layer; l += (c->n_layer + 5) / 6) { /* legend: layer colours */
    const double y = y0 + 14 + 16.0 * l / ((c->n_layer + 5) / 6);
    ts_svg_line(g, x0 + pw + 12, y, x0 + pw + 32, y, ts_plot_colormap(0.15 + 0.8 * l / (c->n_layer > 1 ? c->n_layer - 1 : 1)), 2);
    snprintf(buf, sizeof buf, "layer %d", l);
    ts_svg_text(g, x0 + pw + 36, y + 4, 11, 's', 0x000000, buf);
  }
  ts_svg_text(g, x0 + pw + 12, y0 + ph - 4, 11, 's', 0x000000, "squares: SATS's levels");
#undef PX
#undef PY
  ts_status st = ts_svg_write(g, path);
  ts_svg_destroy(g);
  return st;
}
