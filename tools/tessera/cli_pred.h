/* The activation predictors' parts of `tessera llm calibrate | eval | bench` (cmd_llm_pred.c),
 * called from cmd_llm_sparse.c. */
#ifndef TS_CLI_PRED_H
#define TS_CLI_PRED_H

#include <cjson/cJSON.h>

#include "tessera/llm_pred.h"

/* KIND[:FILE]: loads FILE (its kind must be KIND) or makes KIND with default knobs (signbit:
 * alpha, NAN = 1; grasp: tau 0, k 3); learned needs FILE. */
ts_status cli_open_predictor(const char *spec, double alpha, const ts_llm_model *m, ts_llm_predictor **out);
void cli_predictor_json(cJSON *e, const ts_llm_predictor *p);
void cli_pred_stats_json(cJSON *e, const ts_llm_sparse_stats *ss);
void cli_pred_stats_print(const char *name, const ts_llm_sparse_stats *ss);

typedef struct cli_pred_cal {
  const ts_llm_pred_kind *kind;
  int nkind;
  const double *fs;
  int nfs;
  const char *out, *svg, *text_name;
  int window;
  long tokens;
  int hidden;
  bool json;
} cli_pred_cal;
int cli_pred_calibrate(const cli_pred_cal *pc, ts_llm_model *m, ts_context *ctx, const int32_t *ids, size_t n);

#endif
