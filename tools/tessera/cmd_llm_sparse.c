/* tessera llm calibrate | eval | bench --config: activation sparsity from the command line
 * (tessera/llm_sparse.h).
 *   calibrate  thresholds (CATS, TEAL, SATS) for target sparsities from a text; optionally routers
 *   eval       quality of sparse decode against the dense model on a text: perplexity, KL to the
 *              dense next-token distribution, top-1 agreement, measured sparsity, bytes per token,
 *              decode tok/s; every configuration in lockstep with one dense state
 *   bench      decode tok/s of the configurations and the dense model in interleaved rounds, with
 *              the byte-count bound each could reach */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_pred.h"
#include "tessera/io.h"
#include "tessera/llm.h"
#include "tessera/llm_pred.h"
#include "tessera/llm_sparse.h"
#include "tessera/measure.h"

#define CMD "llm"
#define MAXCFG 64
#define MAXLIST 16

typedef struct cfg_spec {
  const char *pred; /* --predictor KIND[:FILE] (thresholds NULL) */
  const char *thresholds, *router;
  double tau;    /* NAN: the router file's */
  char *own[2];  /* the strings a --config made */
} cfg_spec;

typedef struct sopts {
  cli_common_opts c;
  const char *model, *text, *out, *svg;
  int nmethod, nsparse, ncfg, npmethod, nfs;
  ts_llm_sparse_method method[4];
  ts_llm_pred_kind pmethod[4];
  double sparsity[MAXLIST], false_skip[MAXLIST], alpha;
  cfg_spec cfg[MAXCFG];
  long tokens, proxy, window, ctx, chunks, plen, gen, repeats, hidden;
  bool router;
} sopts;

static int parse_list(const char *v, double *out, int max, double lo, double hi, const char *opt) {
  int n = 0;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n >= max) return cli_usage_error(CMD, "%s: at most %d values", opt, max), -1;
    if (!cli_parse_double(CMD, opt, tok, lo, hi, &out[n++])) return -1;
  }
  return n;
}

/* --config THRESHOLDS[,ROUTER[,TAU]] */
static bool parse_cfg(const char *v, cfg_spec *c) {
  char *dup = strdup(v), *save = NULL;
  if (!dup) return false;
  const char *t = strtok_r(dup, ",", &save), *r = strtok_r(NULL, ",", &save), *tau = strtok_r(NULL, ",", &save);
  c->thresholds = c->own[0] = t ? strdup(t) : NULL;
  c->router = c->own[1] = r ? strdup(r) : NULL;
  c->tau = NAN;
  bool ok = c->thresholds != NULL;
  if (ok && tau) {
    char *end;
    c->tau = strtod(tau, &end);
    ok = *end == 0 && isfinite(c->tau);
    if (!ok) cli_usage_error(CMD, "--config: TAU '%s' is not a number", tau);
  }
  free(dup);
  return ok;
}

static int parse(int argc, char **argv, const char *sub, sopts *o) {
  *o = (sopts){.window = 512, .proxy = 2048, .ctx = 512, .plen = 128, .gen = 64, .repeats = 10, .alpha = NAN, .hidden = 64};
  const char *th = NULL, *rt = NULL;
  double tau = NAN;
  for (int i = 2; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &o->c);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *a = argv[i];
    if (!strcmp(a, "--router") && !strcmp(sub, "calibrate")) {
      o->router = true;
      continue;
    }
    const char *v = cli_value(CMD, argc, argv, &i);
    if (!v) return CLI_USAGE;
    if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--text")) o->text = v;
    else if (!strcmp(a, "--out") && !strcmp(sub, "calibrate")) o->out = v;
    else if (!strcmp(a, "--svg") && !strcmp(sub, "calibrate")) o->svg = v;
    else if (!strcmp(a, "--method") && !strcmp(sub, "calibrate")) {
      char buf[128];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        ts_llm_sparse_method m = !strcmp(t, "cats") ? TS_LLM_SPARSE_CATS : !strcmp(t, "teal") ? TS_LLM_SPARSE_TEAL
                                 : !strcmp(t, "sats") ? TS_LLM_SPARSE_SATS : TS_LLM_SPARSE_NONE;
        ts_llm_pred_kind pk = !strcmp(t, "signbit") ? TS_LLM_PRED_SIGNBIT : !strcmp(t, "grasp") ? TS_LLM_PRED_GRASP
                              : !strcmp(t, "learned") ? TS_LLM_PRED_LEARNED : TS_LLM_PRED_NONE;
        if (pk != TS_LLM_PRED_NONE && o->npmethod < 3) {
          o->pmethod[o->npmethod++] = pk;
          continue;
        }
        if (m == TS_LLM_SPARSE_NONE || o->nmethod >= 3)
          return cli_usage_error(CMD, "--method: '%s' is not cats, teal, sats, signbit, grasp or learned", t);
        o->method[o->nmethod++] = m;
      }
    } else if (!strcmp(a, "--sparsity") && !strcmp(sub, "calibrate")) {
      if ((o->nsparse = parse_list(v, o->sparsity, MAXLIST, 0.01, 0.94, a)) < 0) return CLI_USAGE;
    } else if (!strcmp(a, "--false-skip") && !strcmp(sub, "calibrate")) {
      if ((o->nfs = parse_list(v, o->false_skip, MAXLIST, 1e-4, 0.5, a)) < 0) return CLI_USAGE;
    } else if (!strcmp(a, "--hidden") && !strcmp(sub, "calibrate")) {
      if (!cli_parse_int(CMD, a, v, 1, 256, &o->hidden)) return CLI_USAGE;
    } else if (!strcmp(a, "--alpha") && strcmp(sub, "calibrate")) {
      if (!cli_parse_double(CMD, a, v, TS_LLM_PRED_ALPHA_MIN, TS_LLM_PRED_ALPHA_MAX, &o->alpha)) return CLI_USAGE;
    } else if (!strcmp(a, "--predictor") && strcmp(sub, "calibrate")) {
      if (o->ncfg >= MAXCFG) return cli_usage_error(CMD, "at most %d configurations", MAXCFG);
      ts_llm_pred_kind pk;
      char kb[16];
      snprintf(kb, sizeof kb, "%.*s", (int)strcspn(v, ":"), v);
      if (ts_llm_pred_kind_parse(kb, &pk) != TS_OK) return cli_usage_error(CMD, "--predictor: %s", ts_last_error());
      if (pk == TS_LLM_PRED_LEARNED && !strchr(v, ':'))
        return cli_usage_error(CMD, "--predictor learned needs its file: learned:FILE (from calibrate --method learned)");
      if (pk != TS_LLM_PRED_NONE) o->cfg[o->ncfg++] = (cfg_spec){.pred = v, .tau = NAN};
    } else if (!strcmp(a, "--tokens")) {
      if (!cli_parse_int(CMD, a, v, 2, 1L << 30, &o->tokens)) return CLI_USAGE;
    } else if (!strcmp(a, "--proxy-tokens") && !strcmp(sub, "calibrate")) {
      if (!cli_parse_int(CMD, a, v, 1, 1L << 24, &o->proxy)) return CLI_USAGE;
    } else if (!strcmp(a, "--window") && !strcmp(sub, "calibrate")) {
      if (!cli_parse_int(CMD, a, v, 16, 8192, &o->window)) return CLI_USAGE;
    } else if (!strcmp(a, "--ctx") && !strcmp(sub, "eval")) {
      if (!cli_parse_int(CMD, a, v, 4, 1 << 16, &o->ctx)) return CLI_USAGE;
    } else if (!strcmp(a, "--chunks") && !strcmp(sub, "eval")) {
      if (!cli_parse_int(CMD, a, v, 1, 1 << 20, &o->chunks)) return CLI_USAGE;
    } else if (!strcmp(a, "--prompt-len") && !strcmp(sub, "bench")) {
      if (!cli_parse_int(CMD, a, v, 1, 1 << 16, &o->plen)) return CLI_USAGE;
    } else if (!strcmp(a, "--gen") && !strcmp(sub, "bench")) {
      if (!cli_parse_int(CMD, a, v, 1, 1 << 16, &o->gen)) return CLI_USAGE;
    } else if (!strcmp(a, "--repeats") && !strcmp(sub, "bench")) {
      if (!cli_parse_int(CMD, a, v, 1, 1000, &o->repeats)) return CLI_USAGE;
    } else if (!strcmp(a, "--thresholds") && strcmp(sub, "calibrate")) th = v;
    else if (!strcmp(a, "--router") && strcmp(sub, "calibrate")) rt = v;
    else if (!strcmp(a, "--tau") && strcmp(sub, "calibrate")) {
      if (!cli_parse_double(CMD, a, v, -1e30, 1e30, &tau)) return CLI_USAGE;
    } else if (!strcmp(a, "--config") && strcmp(sub, "calibrate")) {
      if (o->ncfg >= MAXCFG) return cli_usage_error(CMD, "at most %d --config", MAXCFG);
      if (!parse_cfg(v, &o->cfg[o->ncfg++])) return cli_usage_error(CMD, "--config expects THRESHOLDS[,ROUTER[,TAU]], got '%s'", v);
    } else return cli_usage_error(CMD, "%s: unknown option '%s'", sub, a);
  }
  if (o->c.help) return CLI_OK;
  if (th) {
    if (o->ncfg >= MAXCFG) return cli_usage_error(CMD, "at most %d configurations", MAXCFG);
    o->cfg[o->ncfg++] = (cfg_spec){.thresholds = th, .router = rt, .tau = tau};
  } else if (rt) return cli_usage_error(CMD, "--router needs --thresholds (or use --config T,R,TAU)");
  if (!o->model) return cli_usage_error(CMD, "%s needs --model FILE", sub);
  if (strcmp(sub, "bench") && !o->text) return cli_usage_error(CMD, "%s needs --text FILE", sub);
  if (!strcmp(sub, "calibrate")) {
    if ((!o->nmethod && !o->npmethod) || !o->out) return cli_usage_error(CMD, "calibrate needs --method and --out");
    if (o->nmethod && !o->nsparse) return cli_usage_error(CMD, "calibrate --method cats|teal|sats needs --sparsity");
    if (o->npmethod && !o->nfs) return cli_usage_error(CMD, "calibrate --method signbit|grasp|learned needs --false-skip");
    if (o->nmethod && o->npmethod) return cli_usage_error(CMD, "calibrate: thresholds (cats, teal, sats) and predictors (signbit, grasp, learned) in separate runs");
  } else if (!o->ncfg && !strcmp(sub, "bench")) return cli_usage_error(CMD, "bench needs --thresholds FILE, --config or --predictor");
  if (!isnan(o->alpha)) {
    bool any = false;
    for (int i = 0; i < o->ncfg; i++) any |= o->cfg[i].pred && !strncmp(o->cfg[i].pred, "signbit", 7) && !strchr(o->cfg[i].pred, ':');
    if (!any) return cli_usage_error(CMD, "--alpha sets the knob of --predictor signbit (without a file)");
  }
  return CLI_OK;
}

static ts_status read_tokens(const ts_llm_model *m, const char *path, long cap, int32_t **ids, size_t *n) {
  char *data;
  size_t len;
  TS_TRY(ts_read_file(path, &data, &len));
  *ids = malloc((len + 16) * sizeof **ids);
  ts_status s = *ids ? ts_llm_tokenize(ts_llm_model_vocab(m), data, len, true, false, *ids, len + 16, n)
                     : ts_error(TS_ERR_OOM, "out of memory for %zu tokens", len + 16);
  free(data);
  if (s == TS_OK && cap > 0 && *n > (size_t)cap) *n = (size_t)cap;
  return s;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* ---- calibrate ----------------------------------------------------------------------------- */

static int do_calibrate(const sopts *o, ts_llm_model *m, ts_context *ctx) {
  int32_t *ids = NULL;
  size_t n = 0;
  ts_status s = read_tokens(m, o->text, o->tokens, &ids, &n);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (o->npmethod) {
    const cli_pred_cal pc = {o->pmethod, o->npmethod, o->false_skip, o->nfs, o->out, o->svg, base_name(o->text),
                             (int)o->window, o->tokens > 0 ? o->tokens : 8192, (int)o->hidden, o->c.json};
    const int rc = cli_pred_calibrate(&pc, m, ctx, ids, n);
    free(ids);
    return rc;
  }
  const bool many = o->nmethod * o->nsparse > 1;
  if (many && mkdir(o->out, 0777) != 0 && errno != EEXIST) {
    free(ids);
    return cli_fail(CMD, ts_error(TS_ERR_IO, "cannot create the output directory %s", o->out));
  }
  ts_llm_state *st = NULL;
  s = ts_llm_state_create(&st, m, ctx, (int)o->window, (int)o->window);
  cJSON *res = cJSON_CreateArray();
  /* one collection for every method (with TEAL's error curves when TEAL is among them) */
  ts_llm_calib_opts co = ts_llm_calib_opts_default();
  co.method = TS_LLM_SPARSE_SATS;
  for (int mi = 0; mi < o->nmethod; mi++)
    if (o->method[mi] == TS_LLM_SPARSE_TEAL) co.method = TS_LLM_SPARSE_TEAL;
  co.window = (int)o->window;
  co.proxy_tokens = o->proxy;
  co.text_name = base_name(o->text);
  co.progress = !o->c.json;
  ts_llm_calib *cal = NULL;
  const double t0 = ts_now();
  if (s == TS_OK) s = ts_llm_calib_collect(&cal, st, ids, n, &co);
  const double t_collect = ts_now() - t0;
  for (int mi = 0; mi < o->nmethod && s == TS_OK; mi++) {
    co.method = o->method[mi];
    for (int si = 0; si < o->nsparse && s == TS_OK; si++) {
      co.target = o->sparsity[si];
      char path[4096], rpath[4096], svg[4096];
      if (many) snprintf(path, sizeof path, "%s/%s-%02d.json", o->out, ts_llm_sparse_method_name(co.method), (int)lround(co.target * 100));
      else snprintf(path, sizeof path, "%s", o->out);
      snprintf(rpath, sizeof rpath, "%.*s.router.json", (int)(strlen(path) - 5), path);
      if (o->svg) {
        if (many) snprintf(svg, sizeof svg, "%.*s-%s-%02d.svg", (int)(strlen(o->svg) - 4), o->svg,
                           ts_llm_sparse_method_name(co.method), (int)lround(co.target * 100));
        else snprintf(svg, sizeof svg, "%s", o->svg);
        co.curves_svg = svg;
      }
      ts_llm_thresholds *t = NULL;
      s = ts_llm_calibrate(cal, &co, &t);
      if (s == TS_OK) s = ts_llm_thresholds_save(t, path);
      if (s == TS_OK && o->router && co.method != TS_LLM_SPARSE_TEAL) {
        ts_llm_router *r = NULL;
        s = ts_llm_router_train(cal, t, &r);
        if (s == TS_OK) s = ts_llm_router_save(r, rpath);
        ts_llm_router_destroy(r);
      }
      if (s == TS_OK) {
        const ts_llm_thresholds_info *i = ts_llm_thresholds_info_const(t);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "method", ts_llm_sparse_method_name(co.method));
        cJSON_AddNumberToObject(e, "target", co.target);
        cJSON_AddNumberToObject(e, "calibrated", i->calibrated);
        cJSON_AddNumberToObject(e, "tokens", (double)i->tokens);
        cJSON_AddNumberToObject(e, "collect_seconds", t_collect);
        cJSON_AddStringToObject(e, "out", path);
        if (o->router && co.method != TS_LLM_SPARSE_TEAL) cJSON_AddStringToObject(e, "router", rpath);
        cJSON_AddItemToArray(res, e);
        if (!o->c.json)
          printf("%-4s target %.2f: mean calibration sparsity %.3f on %lld tokens (statistics %.1f s) -> %s\n",
                 ts_llm_sparse_method_name(co.method), co.target, i->calibrated, (long long)i->tokens, t_collect, path);
      }
      ts_llm_thresholds_destroy(t);
    }
  }
  ts_llm_calib_destroy(cal);
  ts_llm_state_destroy(st);
  free(ids);
  if (s != TS_OK) {
    cJSON_Delete(res);
    return cli_fail(CMD, s);
  }
  if (o->c.json) cli_print_json(res);
  else cJSON_Delete(res);
  return CLI_OK;
}

/* ---- configurations -------------------------------------------------------------------------- */

typedef struct config {
  const char *name;
  ts_llm_predictor *p;
  ts_llm_thresholds *t;
  ts_llm_router *r;
  ts_llm_sparse *sp;
  ts_llm_state *st;
  double create_s; /* ts_llm_sparse_create's time (the transposed copies) */
} config;

static ts_status open_configs(const sopts *o, ts_llm_model *m, ts_context *ctx, config *cf, bool measure) {
  for (int i = 0; i < o->ncfg; i++) {
    if (o->cfg[i].pred) {
      cf[i].name = o->cfg[i].pred;
      TS_TRY(cli_open_predictor(o->cfg[i].pred, o->alpha, m, &cf[i].p));
      const double t0 = ts_now();
      TS_TRY(ts_llm_sparse_create_pred(&cf[i].sp, m, cf[i].p, measure, ctx));
      cf[i].create_s = ts_now() - t0;
      continue;
    }
    cf[i].name = o->cfg[i].thresholds;
    TS_TRY(ts_llm_thresholds_load(&cf[i].t, o->cfg[i].thresholds, m));
    if (o->cfg[i].router) {
      TS_TRY(ts_llm_router_load(&cf[i].r, o->cfg[i].router, m));
      if (!isnan(o->cfg[i].tau)) ts_llm_router_set_tau(cf[i].r, o->cfg[i].tau);
    }
    const double t0 = ts_now();
    TS_TRY(ts_llm_sparse_create(&cf[i].sp, m, cf[i].t, cf[i].r, ctx));
    cf[i].create_s = ts_now() - t0;
  }
  return TS_OK;
}

static void close_configs(config *cf, int n) {
  for (int i = 0; i < n; i++) {
    ts_llm_state_destroy(cf[i].st);
    ts_llm_sparse_destroy(cf[i].sp);
    ts_llm_router_destroy(cf[i].r);
    ts_llm_thresholds_destroy(cf[i].t);
    ts_llm_predictor_destroy(cf[i].p);
  }
}

static cJSON *cfg_json(const sopts *o, int i, const config *c) {
  cJSON *e = cJSON_CreateObject();
  if (c->p) {
    cli_predictor_json(e, c->p);
    cJSON_AddNumberToObject(e, "copy_bytes", (double)ts_llm_sparse_bytes(c->sp));
    cJSON_AddNumberToObject(e, "create_seconds", c->create_s);
    return e;
  }
  const ts_llm_thresholds_info *ti = ts_llm_thresholds_info_const(c->t);
  cJSON_AddStringToObject(e, "thresholds", c->name);
  cJSON_AddStringToObject(e, "method", ts_llm_sparse_method_name(ti->method));
  cJSON_AddNumberToObject(e, "target", ti->target);
  if (c->r) {
    cJSON_AddStringToObject(e, "router", o->cfg[i].router);
    cJSON_AddNumberToObject(e, "tau", ts_llm_router_tau(c->r));
  }
  cJSON_AddNumberToObject(e, "copy_bytes", (double)ts_llm_sparse_bytes(c->sp));
  cJSON_AddNumberToObject(e, "create_seconds", c->create_s);
  return e;
}

static void stats_json(cJSON *e, const ts_llm_sparse_stats *ss) {
  cJSON_AddNumberToObject(e, "act_sparsity", ss->act_sparsity);
  cJSON_AddNumberToObject(e, "in_sparsity", ss->in_sparsity);
  cJSON_AddNumberToObject(e, "weight_skip", ss->weight_skip);
  cJSON_AddNumberToObject(e, "bytes_per_token", ss->bytes_per_token);
  cJSON_AddNumberToObject(e, "dense_bytes_per_token", ss->dense_bytes_per_token);
  cJSON_AddNumberToObject(e, "byte_bound", ss->bytes_per_token > 0 ? ss->dense_bytes_per_token / ss->bytes_per_token : 1);
  cJSON_AddNumberToObject(e, "routed_dense", ss->routed_dense);
  cJSON *la = cJSON_CreateArray();
  for (int l = 0; l < ss->n_layer && l < 256; l++) cJSON_AddItemToArray(la, cJSON_CreateNumber(ss->layer_act[l]));
  cJSON_AddItemToObject(e, "layer_act_sparsity", la);
  cli_pred_stats_json(e, ss);
}

/* ---- eval ------------------------------------------------------------------------------------ */

typedef struct acc {
  double nll, kl, top1, secs;
  int64_t scored;
} acc;

static int argmax(const float *x, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[b]) b = i;
  return b;
}

/* log-softmax normaliser of x */
static double lse(const float *x, int n) {
  double mx = -INFINITY, s = 0;
  for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
  return mx + log(s);
}

static int do_eval(const sopts *o, ts_llm_model *m, ts_context *ctx) {
  const int nv = ts_llm_model_config(m)->n_vocab, C = (int)o->ctx, nc = o->ncfg;
  int32_t *ids = NULL;
  size_t n = 0;
  ts_status s = read_tokens(m, o->text, o->tokens, &ids, &n);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (n < (size_t)C) {
    free(ids);
    return cli_fail(CMD, ts_error(TS_ERR_INVALID_ARG, "eval: %s has %zu tokens, shorter than one window of %d", o->text, n, C));
  }
  config cf[MAXCFG] = {{0}};
  s = open_configs(o, m, ctx, cf, true);
  ts_llm_state *dense = NULL;
  if (s == TS_OK) s = ts_llm_state_create(&dense, m, ctx, C, 1);
  for (int i = 0; i < nc && s == TS_OK; i++) {
    s = ts_llm_state_create(&cf[i].st, m, ctx, C, 1);
    if (s == TS_OK) s = ts_llm_state_set_sparse(cf[i].st, cf[i].sp);
  }
  float *ld = malloc((size_t)nv * sizeof *ld), *ls = malloc((size_t)nv * sizeof *ls);
  acc a[MAXCFG + 1] = {{0}};
  if (!ld || !ls) s = ts_error(TS_ERR_OOM, "out of memory");
  const int32_t bos = ts_llm_vocab_add_bos(ts_llm_model_vocab(m)) ? ts_llm_vocab_bos(ts_llm_model_vocab(m)) : -1;
  int64_t nw = (int64_t)(n / (size_t)C);
  if (o->chunks > 0 && nw > o->chunks) nw = o->chunks;
  const double t_start = ts_now();
  for (int64_t w = 0; w < nw && s == TS_OK; w++) {
    const int32_t *tk = ids + w * C;
    for (int p = 0; p < C - 1 && s == TS_OK; p++) {
      const int32_t tok = p == 0 && bos >= 0 ? bos : tk[p];
      double t0 = ts_now();
      s = ts_llm_eval(dense, &tok, 1, p, TS_LLM_LOGITS_LAST, ld);
      a[0].secs += ts_now() - t0;
      const bool scored = p >= C / 2; /* llama.cpp's second half */
      const int32_t next = tk[p + 1];
      double lzd = 0;
      if (scored) {
        lzd = lse(ld, nv);
        a[0].nll += lzd - ld[next];
        a[0].top1 += 1;
        a[0].scored++;
      }
      for (int i = 0; i < nc && s == TS_OK; i++) {
        t0 = ts_now();
        s = ts_llm_eval(cf[i].st, &tok, 1, p, TS_LLM_LOGITS_LAST, ls);
        a[i + 1].secs += ts_now() - t0;
        if (!scored) continue;
        const double lz = lse(ls, nv);
        a[i + 1].nll += lz - ls[next];
        double kl = 0; /* KL(dense || sparse) of the next-token distributions */
        for (int v = 0; v < nv; v++) {
          const double lpd = ld[v] - lzd;
          kl += exp(lpd) * (lpd - (ls[v] - lz));
        }
        a[i + 1].kl += kl;
        a[i + 1].top1 += argmax(ls, nv) == argmax(ld, nv);
        a[i + 1].scored++;
      }
    }
    if (!o->c.json) {
      fprintf(stderr, "\reval: window %lld / %lld, %.0f s", (long long)w + 1, (long long)nw, ts_now() - t_start);
      fflush(stderr);
    }
  }
  if (!o->c.json && nw > 0 && (s == TS_OK || a[0].scored > 0)) fputc('\n', stderr);
  cJSON *j = NULL;
  if (s == TS_OK) {
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", base_name(o->model));
    cJSON_AddStringToObject(j, "text", base_name(o->text));
    cJSON_AddNumberToObject(j, "ctx", C);
    cJSON_AddNumberToObject(j, "windows", (double)nw);
    cJSON_AddNumberToObject(j, "scored", (double)a[0].scored);
    cJSON_AddNumberToObject(j, "threads", ts_context_threads(ctx));
    cJSON *dj = cJSON_CreateObject();
    const int64_t ntok = nw * (C - 1);
    cJSON_AddNumberToObject(dj, "ppl", exp(a[0].nll / a[0].scored));
    cJSON_AddNumberToObject(dj, "decode_tps", ntok / a[0].secs);
    cJSON_AddNumberToObject(dj, "bytes_per_token", (double)ts_llm_model_weight_bytes(m));
    cJSON_AddItemToObject(j, "dense", dj);
    cJSON *arr = cJSON_CreateArray();
    if (!o->c.json)
      printf("%-40s %9s %8s %7s %8s %8s %8s %9s %8s\n", "configuration", "ppl", "kl", "top1", "act_sp", "in_sp", "skip", "MB/token",
             "tok/s");
    if (!o->c.json)
      printf("%-40s %9.4f %8s %7s %8s %8s %8s %9.2f %8.1f\n", "dense", exp(a[0].nll / a[0].scored), "-", "-", "-", "-", "-",
             ts_llm_model_weight_bytes(m) / 1e6, ntok / a[0].secs);
    for (int i = 0; i < nc; i++) {
      ts_llm_sparse_stats ss;
      ts_llm_state_sparse_stats(cf[i].st, &ss);
      cJSON *e = cfg_json(o, i, &cf[i]);
      const double ppl = exp(a[i + 1].nll / a[i + 1].scored), kl = a[i + 1].kl / a[i + 1].scored, t1 = a[i + 1].top1 / a[i + 1].scored;
      cJSON_AddNumberToObject(e, "ppl", ppl);
      cJSON_AddNumberToObject(e, "kl", kl);
      cJSON_AddNumberToObject(e, "top1", t1);
      cJSON_AddNumberToObject(e, "decode_tps", ntok / a[i + 1].secs);
      stats_json(e, &ss);
      cJSON_AddItemToArray(arr, e);
      if (!o->c.json)
        printf("%-40.40s %9.4f %8.5f %7.4f %8.4f %8.4f %8.4f %9.2f %8.1f\n", base_name(cf[i].name), ppl, kl, t1, ss.act_sparsity,
               ss.in_sparsity, ss.weight_skip, ss.bytes_per_token / 1e6, ntok / a[i + 1].secs);
    }
    cJSON_AddItemToObject(j, "configs", arr);
    if (!o->c.json)
      for (int i = 0; i < nc; i++)
        if (cf[i].p) {
          ts_llm_sparse_stats ss;
          ts_llm_state_sparse_stats(cf[i].st, &ss);
          cli_pred_stats_print(base_name(cf[i].name), &ss);
        }
  }
  ts_llm_state_destroy(dense);
  close_configs(cf, nc);
  free(ld), free(ls), free(ids);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (o->c.json) cli_print_json(j);
  else cJSON_Delete(j);
  return CLI_OK;
}

/* ---- bench ----------------------------------------------------------------------------------- */

typedef struct dec_job {
  ts_llm_state *st;
  int P, G, nv;
  int32_t first;
  float *logits;
} dec_job;

/* G greedy decode steps at positions P.. (the prompt stays in the cache; each call overwrites the
 * same positions) */
static ts_status dec_call(void *arg) {
  dec_job *j = arg;
  int32_t tok = j->first;
  for (int g = 0; g < j->G; g++) {
    TS_TRY(ts_llm_eval(j->st, &tok, 1, j->P + g, TS_LLM_LOGITS_LAST, j->logits));
    tok = ts_llm_sample(j->logits, j->nv, 0, 0, NULL);
  }
  return TS_OK;
}

static int do_bench(const sopts *o, ts_llm_model *m, ts_context *ctx) {
  const int nv = ts_llm_model_config(m)->n_vocab, P = (int)o->plen, G = (int)o->gen, nc = o->ncfg, n = nc + 1;
  config cf[MAXCFG] = {{0}};
  ts_status s = open_configs(o, m, ctx, cf, false);
  dec_job job[MAXCFG + 1] = {{0}};
  int32_t *toks = malloc((size_t)P * sizeof *toks);
  if (!toks) s = ts_error(TS_ERR_OOM, "out of memory");
  ts_rng rng;
  ts_rng_seed(&rng, 7);
  for (int i = 0; i < P && toks; i++) toks[i] = 100 + (int32_t)ts_rng_below(&rng, (uint64_t)(nv - 100));
  for (int i = 0; i < n && s == TS_OK; i++) {
    job[i] = (dec_job){NULL, P, G, nv, 0, malloc((size_t)nv * sizeof(float))};
    s = ts_llm_state_create(&job[i].st, m, ctx, P + G + 1, P < 512 ? P : 512);
    if (s == TS_OK && i > 0) s = ts_llm_state_set_sparse(job[i].st, cf[i - 1].sp);
    if (s == TS_OK) s = ts_llm_eval(job[i].st, toks, P, 0, TS_LLM_LOGITS_LAST, job[i].logits);
    if (s == TS_OK) job[i].first = ts_llm_sample(job[i].logits, nv, 0, 0, NULL);
  }
  ts_measure_fn fn[MAXCFG + 1];
  void *args[MAXCFG + 1];
  for (int i = 0; i < n; i++) fn[i] = dec_call, args[i] = &job[i];
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = 1;
  mo.rounds = (int)o->repeats;
  mo.min_time_s = 0;
  mo.alternate = true;
  ts_measure_result res[MAXCFG + 1];
  ts_measure_info info;
  if (s == TS_OK) {
    for (int i = 0; i < n; i++) ts_llm_state_timing_reset(job[i].st);
    s = ts_measure_run(n, fn, args, &mo, res, &info);
  }
  cJSON *j = NULL;
  if (s == TS_OK) {
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", base_name(o->model));
    cJSON_AddNumberToObject(j, "prompt_len", P);
    cJSON_AddNumberToObject(j, "gen", G);
    cJSON_AddNumberToObject(j, "rounds", info.rounds);
    cJSON_AddNumberToObject(j, "threads", ts_context_threads(ctx));
    cJSON_AddNumberToObject(j, "other_cpus", info.other_cpus);
    cJSON *dj = cJSON_CreateObject();
    cJSON_AddNumberToObject(dj, "decode_tps", G / res[0].s.median);
    cJSON_AddNumberToObject(dj, "bytes_per_token", (double)ts_llm_model_weight_bytes(m));
    cJSON_AddItemToObject(j, "dense", dj);
    cJSON *arr = cJSON_CreateArray();
    if (!o->c.json) {
      printf("decode %d tokens after a %d-token prompt, %d interleaved rounds, %d threads\n", G, P, info.rounds, ts_context_threads(ctx));
      printf("%-34s %9s %9s %17s %8s %8s %9s %8s\n", "configuration", "tok/s", "MB/token", "speedup [95% CI]", "bound", "of bound",
             "act_sp", "routed");
      printf("%-34s %9.1f %9.2f %17s %8s %8s %9s %8s\n", "dense", G / res[0].s.median, ts_llm_model_weight_bytes(m) / 1e6, "1", "1",
             "-", "-", "-");
    }
    for (int i = 1; i < n; i++) {
      ts_llm_sparse_stats ss;
      ts_llm_state_sparse_stats(job[i].st, &ss);
      cJSON *e = cfg_json(o, i - 1, &cf[i - 1]);
      const double sp = 1 / res[i].ratio, lo = 1 / res[i].ratio_hi, hi = 1 / res[i].ratio_lo;
      const double bound = ss.bytes_per_token > 0 ? ss.dense_bytes_per_token / ss.bytes_per_token : 1;
      cJSON_AddNumberToObject(e, "decode_tps", G / res[i].s.median);
      cJSON_AddNumberToObject(e, "speedup", sp);
      cJSON_AddNumberToObject(e, "speedup_lo", lo);
      cJSON_AddNumberToObject(e, "speedup_hi", hi);
      cJSON_AddNumberToObject(e, "of_bound", sp / bound);
      stats_json(e, &ss);
      cJSON_AddItemToArray(arr, e);
      if (!o->c.json) {
        char ci[48];
        snprintf(ci, sizeof ci, "%.3f [%.3f, %.3f]", sp, lo, hi);
        printf("%-34.34s %9.1f %9.2f %17s %8.3f %7.1f%% %9.3f %8.3f\n", base_name(cf[i - 1].name), G / res[i].s.median,
               ss.bytes_per_token / 1e6, ci, bound, 100 * sp / bound, ss.act_sparsity, ss.routed_dense);
      }
    }
    cJSON_AddItemToObject(j, "configs", arr);
    ts_llm_timing dt;
    ts_llm_state_timing(job[0].st, &dt);
    const double mlp = dt.tokens > 0 ? dt.mlp / (double)dt.tokens : 0;
    cJSON_AddNumberToObject(dj, "mlp_seconds_per_token", mlp);
    for (int i = 1; i < n; i++) {
      if (!cf[i - 1].p) continue;
      ts_llm_sparse_stats ss;
      ts_llm_state_sparse_stats(job[i].st, &ss);
      cJSON *e = cJSON_GetArrayItem(arr, i - 1);
      cJSON_AddNumberToObject(e, "pred_of_dense_mlp", mlp > 0 ? ss.pred_seconds_per_token / mlp : 0);
      if (!o->c.json)
        printf("%-34.34s predictor %.1f us per token (thread 0), %.1f%% of the dense MLP's %.1f us; predicted active %.3f\n",
               base_name(cf[i - 1].name), 1e6 * ss.pred_seconds_per_token, mlp > 0 ? 100 * ss.pred_seconds_per_token / mlp : 0, 1e6 * mlp,
               ss.pred_active);
    }
  }
  for (int i = 0; i < n; i++) {
    ts_llm_state_destroy(job[i].st);
    free(job[i].logits);
  }
  close_configs(cf, nc);
  free(toks);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (o->c.json) cli_print_json(j);
  else cJSON_Delete(j);
  return CLI_OK;
}

static void help(void) {
  printf("usage:\n"
         "  tessera llm calibrate --model M --text FILE --method cats|teal|sats[,..] --sparsity S[,S..] --out PATH\n"
         "                        [--tokens N] [--proxy-tokens 2048] [--window 512] [--router] [--svg FILE.svg] [--json]\n"
         "  tessera llm eval --model M --text FILE [--thresholds F [--router R] [--tau X]] [--config F[,R[,TAU]]]...\n"
         "                   [--ctx 512] [--chunks N] [--tokens N] [--json]\n"
         "  tessera llm bench --model M (--thresholds F [--router R] [--tau X] | --config F[,R[,TAU]]...)\n"
         "                    [--prompt-len 128] [--gen 64] [--repeats 10] [--json]\n"
         "  activation predictors (ReLU-gated models):\n"
         "  tessera llm calibrate --model M --text FILE --method signbit|grasp|learned[,..] --false-skip F[,F..] --out PATH\n"
         "                        [--tokens 8192] [--window 512] [--hidden 64] [--svg CURVES.svg] [--json]\n"
         "  tessera llm eval|bench --model M --predictor signbit|grasp|oracle|none[:FILE] | learned:FILE ... [--alpha A]\n\n"
         "calibrate evaluates the text densely in windows and writes thresholds for each method and target\n"
         "sparsity (one file, or PATH/<method>-<percent>.json for several; --router adds a router trained\n"
         "for each, <file>.router.json; --svg draws SATS's per-layer proxy curves). eval runs the text one\n"
         "token at a time through a dense state and each configuration in lockstep (windows of --ctx\n"
         "tokens, the second half of each scored, as llama.cpp's perplexity) and reports perplexity, KL of\n"
         "the dense next-token distribution to each configuration's, top-1 agreement, measured sparsity,\n"
         "bytes per token and decode tok/s. bench times decode of the dense model and the configurations\n"
         "in interleaved rounds and reports each speedup with its 95%% interval and the byte-count bound\n"
         "(dense bytes per token / the configuration's).\n");
}

int cmd_llm_sparse(int argc, char **argv) {
  const char *sub = argv[1];
  sopts o;
  int rc = parse(argc, argv, sub, &o);
  if (rc != CLI_OK || o.c.help) {
    if (o.c.help) help();
    return rc;
  }
  ts_context *ctx = NULL;
  ts_llm_model *m = NULL;
  ts_status s = ts_context_create(&ctx, o.c.threads);
  if (s == TS_OK) s = ts_llm_model_load(&m, o.model);
  if (s != TS_OK) rc = cli_fail(CMD, s);
  else if (!strcmp(sub, "calibrate")) rc = do_calibrate(&o, m, ctx);
  else if (!strcmp(sub, "eval")) rc = do_eval(&o, m, ctx);
  else rc = do_bench(&o, m, ctx);
  ts_llm_model_destroy(m);
  ts_context_destroy(ctx);
  for (int i = 0; i < o.ncfg; i++) free(o.cfg[i].own[0]), free(o.cfg[i].own[1]);
  return rc;
}
