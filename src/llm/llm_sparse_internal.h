/* Activation sparsity's objects (tessera/llm_sparse.h) as the runtime (llm_sparse.c), the files
 * (llm_sparse_json.c) and calibration (llm_calib.c) see them. */
#ifndef TS_LLM_SPARSE_INTERNAL_OBJ_H
#define TS_LLM_SPARSE_INTERNAL_OBJ_H

#include "llm/llm_internal.h"
#include "llm/sparse_internal.h"
#include "tessera/llm_sparse.h"

/* Projection p (ts_llm_proj order: q, k, v, o, gate, up, down) of layer l. */
static inline const ts__wmat *ts__proj_mat(const ts_llm_model *m, int l, int p) {
  const ts__llm_layer *L = &m->layers[l];
  const ts__wmat *w[TS_LLM_NPROJ] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
  return w[p];
}

struct ts_llm_thresholds {
  int n_layer;
  ts_llm_layer_thresholds *layer;
  double *sparsity, *proxy; /* [n_layer] calibration detail */
  ts_llm_thresholds_info info;
};

struct ts_llm_router {
  int n_layer;
  double *w; /* [n_layer][TS_LLM_ROUTER_NF] */
  double tau;
  char model_key[17];
};
int ts__router_n_layer(const ts_llm_router *r);
const double *ts__router_weights_const(const ts_llm_router *r, int l);

struct ts_llm_sparse {
  const ts_llm_model *m;
  int n_layer, nt;
  ts_llm_layer_thresholds *th; /* [n_layer] */
  ts__tmat *tm;                /* [n_layer][TS_LLM_NPROJ]; npiece 0: none */
  float *dnorm;                /* [n_layer][n_ff] |D[:, i]|^2 (the router's feature weights; zeros without one) */
  double *rw;                  /* router weights [n_layer][NF], NULL: no router */
  double tau;
  bool any;
  struct ts__pred *pr; /* an activation predictor (llm_pred.c; NULL: none), owned */
};

/* Per-layer counts of a thread (doubles): selected x rows and total x rows per projection, bytes
 * read per projection, active and total neurons, routed-dense tokens. */
enum {
  TS__SP_SEL = 0,
  TS__SP_TOT = TS__SP_SEL + TS_LLM_NPROJ,
  TS__SP_BYTES = TS__SP_TOT + TS_LLM_NPROJ,
  TS__SP_ACT = TS__SP_BYTES + TS_LLM_NPROJ,
  TS__SP_ACT_TOT,
  TS__SP_ROUTED,
  TS__SP_PACT,    /* predictor: neurons predicted active (gate and up rows read) */
  TS__SP_PBYTES,  /* predictor: bytes it read */
  TS__SP_M_ACT,   /* measure: actually active neurons */
  TS__SP_M_FS,    /* measure: active neurons predicted zero (false skips) */
  TS__SP_M_CS,    /* measure: zeros predicted zero (correct skips) */
  TS__SP_PTIME,   /* predictor: thread 0's seconds in the prediction (ts_now) */
  TS__SP_NCNT
};

typedef struct ts__sparse_ws {
  void *mem;
  size_t per, cnt_per;
  int32_t *idx[TS__TMAT_MAXP];
  float *coef[TS__TMAT_MAXP], *y[TS__TMAT_MAXP];
  double *cnt[TS__TMAT_MAXP];
  int nact[TS__TMAT_MAXP];
  float *h; /* [n_ff] h = silu(gate) up of the active neurons (kind 2) or all (kind 1) */
  void *pred[TS__TMAT_MAXP]; /* predictor scratch per thread: ts__pred_x, outliers, measured gate */
  int64_t tokens;
} ts__sparse_ws;

static inline double *ts__sp_cnt(ts_llm_state *s, int tid, int l) { return s->spw->cnt[tid] + (size_t)l * TS__SP_NCNT; }
/* Bytes of a thread's predictor scratch (ts__sparse_ws.pred). */
size_t ts__pred_scratch_bytes(const ts_llm_config *c);

/* 0: dense MLP; 1: TEAL-only MLP (phases a, c); 2: activation threshold or router (a, b, c);
 * 3: predictor (ts__pred_mlp_a, then c). */
int ts__sparse_mlp_kind(const ts_llm_state *s, int l);
void ts__sparse_stats_reset(ts_llm_state *s);

#endif
