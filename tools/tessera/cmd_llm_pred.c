/* tessera llm calibrate --method signbit|grasp|learned, and the predictors' parts of eval and bench
 * (tessera/llm_pred.h; the options and the rest of the commands: cmd_llm_sparse.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_pred.h"
#include "tessera/measure.h"
#include "tessera/plot.h"

#define CMD "llm"

ts_status cli_open_predictor(const char *spec, double alpha, const ts_llm_model *m, ts_llm_predictor **out) {
  *out = NULL;
  char kb[16];
  snprintf(kb, sizeof kb, "%.*s", (int)strcspn(spec, ":"), spec);
  ts_llm_pred_kind kind;
  TS_TRY(ts_llm_pred_kind_parse(kb, &kind));
  const char *file = strchr(spec, ':');
  if (file) {
    TS_TRY(ts_llm_predictor_load(out, file + 1, m));
    if (ts_llm_predictor_info_const(*out)->kind != kind) {
      const char *was = ts_llm_pred_kind_name(ts_llm_predictor_info_const(*out)->kind);
      ts_llm_predictor_destroy(*out);
      *out = NULL;
      return ts_error(TS_ERR_INVALID_ARG, "%s holds a %s predictor, not %s", file + 1, was, kb);
    }
    return TS_OK;
  }
  if (kind == TS_LLM_PRED_LEARNED) return ts_error(TS_ERR_INVALID_ARG, "the learned predictor needs its file (learned:FILE)");
  TS_TRY(ts_llm_predictor_create(out, m, kind));
  if (kind == TS_LLM_PRED_SIGNBIT && !isnan(alpha)) {
    ts_status s = ts_llm_predictor_set_alpha(*out, (float)alpha);
    if (s != TS_OK) {
      ts_llm_predictor_destroy(*out);
      *out = NULL;
      return s;
    }
  }
  return TS_OK;
}

void cli_predictor_json(cJSON *e, const ts_llm_predictor *p) {
  const ts_llm_pred_info *i = ts_llm_predictor_info_const(p);
  cJSON_AddStringToObject(e, "predictor", ts_llm_pred_kind_name(i->kind));
  cJSON_AddNumberToObject(e, "false_skip_budget", i->false_skip);
  cJSON *k = cJSON_CreateArray();
  for (int l = 0; l < ts_llm_predictor_n_layer(p); l++) {
    const ts_llm_pred_layer *y = ts_llm_predictor_layer_const(p, l);
    cJSON_AddItemToArray(k, cJSON_CreateNumber(i->kind == TS_LLM_PRED_SIGNBIT ? y->alpha : y->tau));
  }
  cJSON_AddItemToObject(e, "knob", k);
}

void cli_pred_stats_json(cJSON *e, const ts_llm_sparse_stats *ss) {
  if (ss->pred_active <= 0 && !ss->measured) return;
  cJSON_AddNumberToObject(e, "pred_active", ss->pred_active);
  cJSON_AddNumberToObject(e, "pred_bytes_per_token", ss->pred_bytes_per_token);
  cJSON_AddNumberToObject(e, "pred_seconds_per_token", ss->pred_seconds_per_token);
  if (!ss->measured) return;
  cJSON_AddNumberToObject(e, "actual_zero", ss->actual_zero);
  cJSON_AddNumberToObject(e, "false_skip", ss->false_skip);
  cJSON_AddNumberToObject(e, "missed_skip", ss->missed_skip);
  cJSON_AddNumberToObject(e, "efficiency", ss->efficiency);
  cJSON *a = cJSON_CreateArray(), *b = cJSON_CreateArray(), *z = cJSON_CreateArray();
  for (int l = 0; l < ss->n_layer && l < 256; l++) {
    cJSON_AddItemToArray(a, cJSON_CreateNumber(ss->layer_false_skip[l]));
    cJSON_AddItemToArray(b, cJSON_CreateNumber(ss->layer_efficiency[l]));
    cJSON_AddItemToArray(z, cJSON_CreateNumber(ss->layer_zero[l]));
  }
  cJSON_AddItemToObject(e, "layer_false_skip", a);
  cJSON_AddItemToObject(e, "layer_efficiency", b);
  cJSON_AddItemToObject(e, "layer_zero", z);
}

void cli_pred_stats_print(const char *name, const ts_llm_sparse_stats *ss) {
  if (!ss->measured) return;
  printf("%-40.40s zeros %.4f, predicted active %.4f, false-skip %.4f, missed-skip %.4f, efficiency %.4f, predictor %.3f MB/token\n",
         name, ss->actual_zero, ss->pred_active, ss->false_skip, ss->missed_skip, ss->efficiency, ss->pred_bytes_per_token / 1e6);
}

/* ---- calibrate --------------------------------------------------------------------------------- */

#define NFS_CURVE 12
static const double kCurveFs[NFS_CURVE] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3};

/* Efficiency against false-skip rate, one panel per layer group (pairs of layers), a line per
 * predictor (log x axis). */
static ts_status curves_svg(const char *path, const char *model, int n_layer, int nk, const ts_llm_pred_kind *kind, const double *eff) {
  const int ng = (n_layer + 1) / 2, cols = ng < 3 ? ng : 3, rows = (ng + cols - 1) / cols;
  const double pw = 260, ph = 200, mx = 60, my = 50, W = cols * (pw + mx) + 200, H = rows * (ph + my) + 50;
  ts_svg *g = NULL;
  TS_TRY(ts_svg_create(&g, W, H));
  ts_svg_rect(g, 0, 0, W, H, 0xFFFFFF);
  char buf[256];
  snprintf(buf, sizeof buf, "%s: skipping efficiency (zeros predicted zero / zeros) against false-skip rate, calibration tokens", model);
  ts_svg_text(g, 10, 20, 13, 's', 0x000000, buf);
  const uint32_t col[3] = {0x1f77b4, 0xd62728, 0x2ca02c};
  const double lx0 = log10(kCurveFs[0]), lx1 = log10(kCurveFs[NFS_CURVE - 1]);
  for (int gi = 0; gi < ng; gi++) {
    const double x0 = 50 + (gi % cols) * (pw + mx), y0 = 40 + (gi / cols) * (ph + my);
    ts_svg_frame(g, x0, y0, pw, ph, 0x000000, 1);
    const int l0 = 2 * gi, l1 = 2 * gi + 1 < n_layer ? 2 * gi + 1 : 2 * gi;
    snprintf(buf, sizeof buf, "layers %d-%d", l0, l1);
    ts_svg_text(g, x0 + pw / 2, y0 - 6, 12, 'm', 0x000000, buf);
#define PX(f) (x0 + pw * (log10(f) - lx0) / (lx1 - lx0))
#define PY(e) (y0 + ph * (1 - (e)))
    for (int t = 0; t <= 4; t++) {
      snprintf(buf, sizeof buf, "%.2f", t / 4.0);
      ts_svg_line(g, x0 - 4, PY(t / 4.0), x0, PY(t / 4.0), 0x000000, 1);
      ts_svg_text(g, x0 - 6, PY(t / 4.0) + 4, 10, 'e', 0x000000, buf);
    }
    const double ticks[4] = {0.001, 0.01, 0.1, 0.3};
    for (int t = 0; t < 4; t++) {
      snprintf(buf, sizeof buf, "%g", ticks[t]);
      ts_svg_line(g, PX(ticks[t]), y0 + ph, PX(ticks[t]), y0 + ph + 4, 0x000000, 1);
      ts_svg_text(g, PX(ticks[t]), y0 + ph + 15, 10, 'm', 0x000000, buf);
    }
    for (int k = 0; k < nk; k++) {
      double prev = 0;
      for (int f = 0; f < NFS_CURVE; f++) {
        const double e = 0.5 * (eff[((size_t)k * n_layer + l0) * NFS_CURVE + f] + eff[((size_t)k * n_layer + l1) * NFS_CURVE + f]);
        if (f) ts_svg_line(g, PX(kCurveFs[f - 1]), PY(prev), PX(kCurveFs[f]), PY(e), col[k % 3], 1.6);
        prev = e;
      }
    }
#undef PX
#undef PY
  }
  for (int k = 0; k < nk; k++) {
    const double y = 50 + 18 * k, x = W - 140;
    ts_svg_line(g, x, y, x + 20, y, col[k % 3], 2.5);
    ts_svg_text(g, x + 24, y + 4, 12, 's', 0x000000, ts_llm_pred_kind_name(kind[k]));
  }
  ts_svg_text(g, W - 140, 50 + 18 * nk + 10, 10, 's', 0x555555, "x: false-skip rate, log");
  ts_status st = ts_svg_write(g, path);
  ts_svg_destroy(g);
  return st;
}

int cli_pred_calibrate(const cli_pred_cal *pc, ts_llm_model *m, ts_context *ctx, const int32_t *ids, size_t n) {
  const bool many = pc->nkind * pc->nfs > 1;
  if (many && mkdir(pc->out, 0777) != 0 && errno != EEXIST)
    return cli_fail(CMD, ts_error(TS_ERR_IO, "cannot create the output directory %s", pc->out));
  ts_llm_state *st = NULL;
  ts_status s = ts_llm_state_create(&st, m, ctx, pc->window, pc->window);
  ts_llm_pred_opts po = ts_llm_pred_opts_default();
  po.window = pc->window;
  po.max_tokens = pc->tokens;
  po.hidden = pc->hidden;
  po.text_name = pc->text_name;
  po.progress = !pc->json;
  ts_llm_pred_calib *cal = NULL;
  const double t0 = ts_now();
  if (s == TS_OK) s = ts_llm_pred_collect(&cal, st, ids, n, &po);
  const double t_collect = ts_now() - t0;
  const int L = ts_llm_model_config(m)->n_layer;
  double *eff = malloc((size_t)pc->nkind * (size_t)L * NFS_CURVE * sizeof *eff);
  if (!eff && s == TS_OK) s = ts_error(TS_ERR_OOM, "out of memory");
  cJSON *res = cJSON_CreateObject(), *arr = cJSON_CreateArray(), *curves = cJSON_CreateArray();
  for (int ki = 0; ki < pc->nkind && s == TS_OK; ki++) {
    const double t1 = ts_now();
    ts_llm_predictor *ps[16] = {NULL};
    s = ts_llm_pred_calibrate_set(cal, pc->kind[ki], pc->fs, pc->nfs, &po, ps, kCurveFs, NFS_CURVE, eff + (size_t)ki * (size_t)L * NFS_CURVE);
    const double secs = ts_now() - t1;
    for (int fi = 0; fi < pc->nfs && s == TS_OK; fi++) {
      ts_llm_predictor *p = ps[fi];
      char path[4096];
      if (many) snprintf(path, sizeof path, "%s/%s-fs%04d.gguf", pc->out, ts_llm_pred_kind_name(pc->kind[ki]), (int)lround(pc->fs[fi] * 10000));
      else snprintf(path, sizeof path, "%s", pc->out);
      s = ts_llm_predictor_save(p, path);
      if (s == TS_OK) {
        cJSON *e = cJSON_CreateObject();
        cli_predictor_json(e, p);
        cJSON *fsa = cJSON_CreateArray(), *efa = cJSON_CreateArray(), *za = cJSON_CreateArray();
        double mf = 0, me = 0;
        for (int l = 0; l < L; l++) {
          const ts_llm_pred_layer *y = ts_llm_predictor_layer_const(p, l);
          cJSON_AddItemToArray(fsa, cJSON_CreateNumber(y->false_skip));
          cJSON_AddItemToArray(efa, cJSON_CreateNumber(y->efficiency));
          cJSON_AddItemToArray(za, cJSON_CreateNumber(y->zero_share));
          mf += y->false_skip / L, me += y->efficiency / L;
        }
        cJSON_AddItemToObject(e, "layer_false_skip", fsa);
        cJSON_AddItemToObject(e, "layer_efficiency", efa);
        cJSON_AddItemToObject(e, "layer_zero", za);
        cJSON_AddNumberToObject(e, "bytes_per_token", (double)ts_llm_predictor_bytes(p, m));
        cJSON_AddNumberToObject(e, "seconds", secs);
        cJSON_AddStringToObject(e, "out", path);
        cJSON_AddItemToArray(arr, e);
        if (!pc->json)
          printf("%-8s false-skip %.4f: mean over layers false-skip %.4f, efficiency %.4f -> %s\n", ts_llm_pred_kind_name(pc->kind[ki]),
                 pc->fs[fi], mf, me, path);
      }
    }
    for (int fi = 0; fi < pc->nfs; fi++) ts_llm_predictor_destroy(ps[fi]);
    if (s == TS_OK && !pc->json) printf("%-8s calibrated at %d budgets in %.1f s\n", ts_llm_pred_kind_name(pc->kind[ki]), pc->nfs, secs);
    if (s == TS_OK) {
      cJSON *c = cJSON_CreateObject();
      cJSON_AddStringToObject(c, "predictor", ts_llm_pred_kind_name(pc->kind[ki]));
      cJSON *fs = cJSON_CreateDoubleArray(kCurveFs, NFS_CURVE), *layers = cJSON_CreateArray();
      for (int l = 0; l < L; l++)
        cJSON_AddItemToArray(layers, cJSON_CreateDoubleArray(eff + ((size_t)ki * (size_t)L + (size_t)l) * NFS_CURVE, NFS_CURVE));
      cJSON_AddItemToObject(c, "false_skip", fs);
      cJSON_AddItemToObject(c, "layer_efficiency", layers);
      cJSON_AddItemToArray(curves, c);
    }
  }
  if (s == TS_OK && pc->svg) s = curves_svg(pc->svg, ts_llm_model_config(m)->name, L, pc->nkind, pc->kind, eff);
  if (s == TS_OK) {
    cJSON_AddNumberToObject(res, "collect_seconds", t_collect);
    cJSON_AddNumberToObject(res, "tokens", (double)(n < (size_t)pc->tokens ? n : (size_t)pc->tokens));
    cJSON_AddItemToObject(res, "predictors", arr);
    cJSON_AddItemToObject(res, "curves", curves);
  } else {
    cJSON_Delete(arr);
    cJSON_Delete(curves);
  }
  free(eff);
  ts_llm_pred_calib_destroy(cal);
  ts_llm_state_destroy(st);
  if (s != TS_OK) {
    cJSON_Delete(res);
    return cli_fail(CMD, s);
  }
  if (pc->json) cli_print_json(res);
  else cJSON_Delete(res);
  return CLI_OK;
}
