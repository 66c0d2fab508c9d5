/* Calibration's statistics (llm_calib.c collects them, llm_calib_fit.c makes thresholds, routers
 * and the SATS curves' picture from them). */
#ifndef TS_LLM_CALIB_INTERNAL_H
#define TS_LLM_CALIB_INTERNAL_H

#include "llm/llm_internal.h"
#include "llm/llm_sparse_internal.h"

#define TS__LV 39       /* threshold levels: sparsity k / 40, k = 0..38 */
#define NBIN (1 << 18)  /* histogram bins: |v|'s float bits >> 13 */
enum { ST_ACT = 0, ST_ATTN, ST_O, ST_FFN, ST_DOWN, NST };

struct ts_llm_calib {
  int n_layer, d, ff, nq;
  int64_t tokens, proxy;            /* tokens of pass 1, of pass 2 */
  uint32_t *hist;                   /* [n_layer][NST][NBIN] */
  double *hn;                       /* [n_layer][NST] values counted */
  float *grid;                      /* [n_layer][NST][TS__LV] thresholds t_k */
  double *sats_err, *sats_base;     /* [n_layer][TS__LV], [n_layer] */
  double *teal_err, *teal_base;     /* [n_layer][NPROJ][TS__LV], [n_layer][NPROJ] */
  float *rs;                        /* router samples [proxy][n_layer][TS__LV][4]: f1 f2 f3 rel_err */
  int64_t rs_n;                     /* tokens sampled */
  double wparam[TS_LLM_NPROJ];      /* parameters per projection (TEAL's weights) */
  char text[128];
  char model_key[17], model_name[96];
  /* pass 2 scratch */
  int pass;
  bool teal;
  float *wt;                        /* a transposed fp32 matrix [n_in][n_out] */
  float *xn, *ev, *ev2, *hbuf, *abuf;
  float *rbuf;                      /* gemma3: [window][d] the stream a layer step starts from */
  float *snap;                      /* gemma3: [TS__LV][d] the dropped part of D h at each level */
  double *pscr;                     /* gemma3: [3][d] gemma_sats's scratch */
  double *xsq;                      /* [window] |x|^2 of the residual stream entering the MLP */
  bool gemma;
  bool relu; /* the model's MLP is ReLU-gated: a = relu(gate) */
  int64_t pos;                      /* first token of the current window (pass 2) */
  ts_llm_model *m;
};

/* the magnitude under which a fraction q of layer l's values of statistic st lies (0: none) */
float ts__calib_quantile(const ts_llm_calib *c, int l, int st, double q);
ts_status ts__calib_curves_svg(const ts_llm_calib *c, const ts_llm_thresholds *t, const char *path);

#endif
