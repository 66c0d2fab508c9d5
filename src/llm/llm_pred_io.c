/* Predictor files: the artifact "llm-predictor" v1, a GGUF container (docs/FORMATS.md), so that the
 * learned predictor's weights are stored as tensors and the one fuzzed GGUF reader validates the
 * container. Keys (prefix "predictor."): format ("llm-predictor"), version (1), kind, model_key,
 * model_name, n_layer, d, n_ff, false_skip, tokens, text, provenance (JSON), and per-layer arrays
 * alpha, tau, k (f32) and layer_false_skip, layer_efficiency, layer_zero (f64); learned adds
 * hidden and per layer the f32 tensors pred.<l>.w1 {d, r}, .b1 {r}, .w2 {r, n_ff}, .b2 {n_ff}. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_pred_internal.h"
#include "tessera/gguf.h"

#define K(s) "predictor." s

ts_status ts_llm_predictor_save(const ts_llm_predictor *p, const char *path) {
  if (!p || !path) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_predictor_save: NULL argument");
  ts_gguf_writer *w = NULL;
  TS_TRY(ts_gguf_writer_create(&w, 0));
  const int L = p->n_layer;
  float *f = ts_malloc((size_t)L * 3 * sizeof(float));
  double *g = ts_malloc((size_t)L * 3 * sizeof(double));
  char *prov = NULL;
  ts_status st = f && g ? TS_OK : ts_error(TS_ERR_OOM, "ts_llm_predictor_save: out of memory");
  const ts_llm_pred_info *i = &p->info;
  const uint32_t ver = 1, nl = (uint32_t)L, d = (uint32_t)p->d, nff = (uint32_t)p->n_ff;
  const int64_t tok = i->tokens;
#define ADD(x) \
  if (st == TS_OK) st = (x)
  ADD(ts_gguf_writer_add_str(w, K("format"), "llm-predictor", 13));
  ADD(ts_gguf_writer_add(w, K("version"), TS_GGUF_U32, &ver));
  const char *kn = ts_llm_pred_kind_name(i->kind);
  ADD(ts_gguf_writer_add_str(w, K("kind"), kn, strlen(kn)));
  ADD(ts_gguf_writer_add_str(w, K("model_key"), i->model_key, strlen(i->model_key)));
  ADD(ts_gguf_writer_add_str(w, K("model_name"), i->model_name, strlen(i->model_name)));
  ADD(ts_gguf_writer_add(w, K("n_layer"), TS_GGUF_U32, &nl));
  ADD(ts_gguf_writer_add(w, K("d"), TS_GGUF_U32, &d));
  ADD(ts_gguf_writer_add(w, K("n_ff"), TS_GGUF_U32, &nff));
  ADD(ts_gguf_writer_add(w, K("false_skip"), TS_GGUF_F64, &i->false_skip));
  ADD(ts_gguf_writer_add(w, K("tokens"), TS_GGUF_I64, &tok));
  ADD(ts_gguf_writer_add_str(w, K("text"), i->text, strlen(i->text)));
  if (st == TS_OK) st = ts_provenance_to_json(&i->prov, &prov);
  ADD(ts_gguf_writer_add_str(w, K("provenance"), prov, strlen(prov)));
  if (st == TS_OK) {
    const char *fk[3] = {K("alpha"), K("tau"), K("k")}, *gk[3] = {K("layer_false_skip"), K("layer_efficiency"), K("layer_zero")};
    for (int q = 0; q < 3 && st == TS_OK; q++) {
      for (int l = 0; l < L; l++) {
        const ts_llm_pred_layer *y = &p->layer[l];
        f[l] = q == 0 ? y->alpha : q == 1 ? y->tau : y->k;
        g[l] = q == 0 ? y->false_skip : q == 1 ? y->efficiency : y->zero_share;
      }
      ADD(ts_gguf_writer_add_arr(w, fk[q], TS_GGUF_F32, f, (uint64_t)L));
      ADD(ts_gguf_writer_add_arr(w, gk[q], TS_GGUF_F64, g, (uint64_t)L));
    }
  }
  if (i->kind == TS_LLM_PRED_LEARNED) {
    if (!p->mlp && st == TS_OK) st = ts_error(TS_ERR_INVALID_ARG, "ts_llm_predictor_save: the learned predictor has no weights");
    const uint32_t r = p->mlp ? (uint32_t)p->mlp[0].r : 0;
    ADD(ts_gguf_writer_add(w, K("hidden"), TS_GGUF_U32, &r));
    for (int l = 0; l < L && st == TS_OK; l++) {
      const ts__pmlp *M = &p->mlp[l];
      char name[64];
      const int64_t n1[2] = {M->d, M->r}, n2[1] = {M->r}, n3[2] = {M->r, M->n}, n4[1] = {M->n};
      snprintf(name, sizeof name, "pred.%d.w1", l);
      ADD(ts_gguf_writer_add_tensor(w, name, TS_QT_F32, 2, n1, M->w1));
      snprintf(name, sizeof name, "pred.%d.b1", l);
      ADD(ts_gguf_writer_add_tensor(w, name, TS_QT_F32, 1, n2, M->b1));
      snprintf(name, sizeof name, "pred.%d.w2", l);
      ADD(ts_gguf_writer_add_tensor(w, name, TS_QT_F32, 2, n3, M->w2));
      snprintf(name, sizeof name, "pred.%d.b2", l);
      ADD(ts_gguf_writer_add_tensor(w, name, TS_QT_F32, 1, n4, M->b2));
    }
  }
#undef ADD
  if (st == TS_OK) st = ts_gguf_writer_write(w, path);
  free(prov);
  ts_free(f), ts_free(g);
  ts_gguf_writer_destroy(w);
  return st;
}

static ts_status get_str(const ts_gguf *g, const char *path, const char *key, char *dst, size_t cap) {
  const char *s;
  size_t len;
  if (ts_gguf_get_str(g, key, &s, &len) != TS_OK) return ts_error(TS_ERR_FORMAT, "%s: %s: %s", path, key, ts_last_error());
  if (len >= cap) return ts_error(TS_ERR_FORMAT, "%s: %s is %zu bytes long (at most %zu)", path, key, len, cap - 1);
  memcpy(dst, s, len);
  dst[len] = 0;
  return TS_OK;
}

static ts_status layer_arr(const ts_gguf *g, const char *path, const char *key, int L, double lo, double hi, double *out) {
  ts_gguf_vtype et;
  uint64_t cnt;
  if (ts_gguf_get_arr(g, key, &et, &cnt) != TS_OK) return ts_error(TS_ERR_FORMAT, "%s: %s: %s", path, key, ts_last_error());
  if (cnt != (uint64_t)L) return ts_error(TS_ERR_FORMAT, "%s: %s has %llu entries for %d layers", path, key, (unsigned long long)cnt, L);
  for (int l = 0; l < L; l++) {
    if (ts_gguf_arr_f64(g, key, (uint64_t)l, &out[l]) != TS_OK) return ts_error(TS_ERR_FORMAT, "%s: %s[%d]: %s", path, key, l, ts_last_error());
    if (!isfinite(out[l]) || out[l] < lo || out[l] > hi)
      return ts_error(TS_ERR_FORMAT, "%s: %s[%d] = %g is outside [%g, %g]", path, key, l, out[l], lo, hi);
  }
  return TS_OK;
}

static ts_status load_mlp(const ts_gguf *g, const char *path, int l, int d, int n, int r, ts__pmlp *M) {
  const size_t nf = (size_t)r * (size_t)d + (size_t)r + (size_t)n * (size_t)r + (size_t)n;
  float *mem = malloc(nf * sizeof(float)); /* one block w1 | b1 | w2 | b2, freed by ts__pmlp_free */
  if (!mem) return ts_error(TS_ERR_OOM, "%s: out of memory", path);
  memset(M, 0, sizeof *M);
  M->d = d, M->r = r, M->n = n;
  M->w1 = mem, M->b1 = mem + (size_t)r * (size_t)d, M->w2 = M->b1 + r, M->b2 = M->w2 + (size_t)n * (size_t)r;
  const char *part[4] = {"w1", "b1", "w2", "b2"};
  float *dst[4] = {M->w1, M->b1, M->w2, M->b2};
  const int64_t ne0[4] = {d, r, r, n}, ne1[4] = {r, 1, n, 1};
  for (int q = 0; q < 4; q++) {
    char name[64];
    snprintf(name, sizeof name, "pred.%d.%s", l, part[q]);
    const ts_gguf_tensor *t;
    if (ts_gguf_find_tensor(g, name, &t) != TS_OK) {
      ts__pmlp_free(M);
      return ts_error(TS_ERR_FORMAT, "%s: %s", path, ts_last_error());
    }
    if (t->type != TS_QT_F32 || t->ne[0] != ne0[q] || t->ne[1] != ne1[q] || t->ne[2] != 1 || t->ne[3] != 1) {
      ts__pmlp_free(M);
      return ts_error(TS_ERR_FORMAT, "%s: tensor %s is not f32 of %lld x %lld", path, name, (long long)ne0[q], (long long)ne1[q]);
    }
    memcpy(dst[q], t->data, (size_t)ne0[q] * (size_t)ne1[q] * sizeof(float));
    for (int64_t i = 0; i < ne0[q] * ne1[q]; i++)
      if (!isfinite(dst[q][i])) {
        ts__pmlp_free(M);
        return ts_error(TS_ERR_FORMAT, "%s: tensor %s has a non-finite value at %lld", path, name, (long long)i);
      }
  }
  return TS_OK;
}

ts_status ts_llm_predictor_load(ts_llm_predictor **out, const char *path, const ts_llm_model *m) {
  if (!out || !path || !m) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_predictor_load: NULL argument");
  *out = NULL;
  ts_gguf *g = NULL;
  TS_TRY(ts_gguf_open(&g, path));
  ts_status st = ts__predictor_from_gguf(g, path, m, out);
  ts_gguf_close(g);
  return st;
}

ts_status ts__predictor_from_gguf(const ts_gguf *g, const char *path, const ts_llm_model *m, ts_llm_predictor **out) {
  *out = NULL;
  char fmt[32], kind_s[16], key[17];
  ts_llm_pred_kind kind = TS_LLM_PRED_NONE;
  ts_llm_predictor *p = NULL;
  uint32_t ver = 0, nl = 0, d = 0, nff = 0;
  const ts_llm_config *c = m ? ts_llm_model_config(m) : NULL;
  ts_status st = get_str(g, path, K("format"), fmt, sizeof fmt);
  if (st == TS_OK && strcmp(fmt, "llm-predictor") != 0) st = ts_error(TS_ERR_FORMAT, "%s: predictor.format is \"%s\", not llm-predictor", path, fmt);
  if (st == TS_OK && ts_gguf_get_u32(g, K("version"), &ver) != TS_OK) st = ts_error(TS_ERR_FORMAT, "%s: predictor.version: %s", path, ts_last_error());
  if (st == TS_OK && ver != 1) st = ts_error(TS_ERR_UNSUPPORTED, "%s: predictor.version %u (this build reads 1)", path, ver);
  if (st == TS_OK) st = get_str(g, path, K("kind"), kind_s, sizeof kind_s);
  if (st == TS_OK && ts_llm_pred_kind_parse(kind_s, &kind) != TS_OK) st = ts_error(TS_ERR_FORMAT, "%s: predictor.kind: %s", path, ts_last_error());
  if (st == TS_OK && kind == TS_LLM_PRED_NONE) st = ts_error(TS_ERR_FORMAT, "%s: predictor.kind is none", path);
  if (st == TS_OK) st = get_str(g, path, K("model_key"), key, sizeof key);
  if (st == TS_OK && m) {
    char mk[17];
    ts_llm_model_key(m, mk);
    if (strcmp(mk, key) != 0) st = ts_error(TS_ERR_INVALID_ARG, "%s: made for model %s, not this one (%s)", path, key, mk);
  }
  if (st == TS_OK && (ts_gguf_get_u32(g, K("n_layer"), &nl) != TS_OK || ts_gguf_get_u32(g, K("d"), &d) != TS_OK ||
                      ts_gguf_get_u32(g, K("n_ff"), &nff) != TS_OK))
    st = ts_error(TS_ERR_FORMAT, "%s: %s", path, ts_last_error());
  if (st == TS_OK && c && ((int)nl != c->n_layer || (int)d != c->d_model || (int)nff != c->n_ff))
    st = ts_error(TS_ERR_FORMAT, "%s: shapes %u layers, d %u, n_ff %u; the model has %d, %d, %d", path, nl, d, nff, c->n_layer, c->d_model, c->n_ff);
  if (st == TS_OK && (nl < 1 || nl > 4096 || d < 1 || d > 64 * TS__PRED_MAXW || nff < 1 || nff > (1u << 18)))
    st = ts_error(TS_ERR_FORMAT, "%s: shapes %u layers, d %u, n_ff %u out of range", path, nl, d, nff);
  if (st == TS_OK) st = m ? ts_llm_predictor_create(&p, m, kind) : ts__predictor_alloc(&p, (int)nl, (int)d, (int)nff, kind);
  if (st == TS_OK && !m) snprintf(p->info.model_key, sizeof p->info.model_key, "%s", key);
  double *v = st == TS_OK ? ts_malloc((size_t)nl * sizeof(double)) : NULL;
  if (st == TS_OK && !v) st = ts_error(TS_ERR_OOM, "%s: out of memory", path);
  if (st == TS_OK) {
    ts_llm_pred_info *i = &p->info;
    if (ts_gguf_get_f64(g, K("false_skip"), &i->false_skip) != TS_OK || ts_gguf_get_i64(g, K("tokens"), &i->tokens) != TS_OK)
      st = ts_error(TS_ERR_FORMAT, "%s: %s", path, ts_last_error());
    if (st == TS_OK && (!(i->false_skip >= 0 && i->false_skip < 1) || i->tokens < 0))
      st = ts_error(TS_ERR_FORMAT, "%s: predictor.false_skip %g / tokens %lld out of range", path, i->false_skip, (long long)i->tokens);
    if (st == TS_OK) st = get_str(g, path, K("text"), i->text, sizeof i->text);
    if (st == TS_OK) st = get_str(g, path, K("model_name"), i->model_name, sizeof i->model_name);
    const char *ps;
    size_t plen;
    if (st == TS_OK && ts_gguf_get_str(g, K("provenance"), &ps, &plen) == TS_OK) {
      char *pj = ts_malloc(plen + 1);
      if (pj) {
        memcpy(pj, ps, plen);
        pj[plen] = 0;
        if (ts_provenance_from_json(pj, &i->prov) != TS_OK) st = ts_error(TS_ERR_FORMAT, "%s: predictor.provenance: %s", path, ts_last_error());
        ts_free(pj);
      }
    } else if (st == TS_OK) ts_error_clear(); /* no provenance: fine (keep an earlier error's message) */
    const char *keys[6] = {K("alpha"), K("tau"), K("k"), K("layer_false_skip"), K("layer_efficiency"), K("layer_zero")};
    const double lo[6] = {TS_LLM_PRED_ALPHA_MIN, -1e30, 1e-6, 0, 0, 0}, hi[6] = {TS_LLM_PRED_ALPHA_MAX, 1e30, 100, 1, 1, 1};
    for (int q = 0; q < 6 && st == TS_OK; q++) {
      st = layer_arr(g, path, keys[q], (int)nl, lo[q], hi[q], v);
      for (int l = 0; l < (int)nl && st == TS_OK; l++) {
        ts_llm_pred_layer *y = &p->layer[l];
        switch (q) {
          case 0: y->alpha = (float)v[l]; break;
          case 1: y->tau = (float)v[l]; break;
          case 2: y->k = (float)v[l]; break;
          case 3: y->false_skip = v[l]; break;
          case 4: y->efficiency = v[l]; break;
          default: y->zero_share = v[l]; break;
        }
      }
    }
  }
  if (st == TS_OK && kind == TS_LLM_PRED_LEARNED) {
    uint32_t r = 0;
    if (ts_gguf_get_u32(g, K("hidden"), &r) != TS_OK) st = ts_error(TS_ERR_FORMAT, "%s: %s", path, ts_last_error());
    else if (r < 1 || r > 256) st = ts_error(TS_ERR_FORMAT, "%s: predictor.hidden %u is outside 1..256", path, r);
    if (st == TS_OK) {
      p->mlp = ts_calloc(nl, sizeof *p->mlp);
      if (!p->mlp) st = ts_error(TS_ERR_OOM, "%s: out of memory", path);
    }
    for (int l = 0; l < (int)nl && st == TS_OK; l++) st = load_mlp(g, path, l, (int)d, (int)nff, (int)r, &p->mlp[l]);
  }
  ts_free(v);
  if (st != TS_OK) {
    ts_llm_predictor_destroy(p);
    return st;
  }
  *out = p;
  return TS_OK;
}
