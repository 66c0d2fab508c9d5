/* Reporting pieces the CLI's bench commands share (see bench_report.h). */
#include "bench_report.h"
#include "io/json_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/measure.h"

double bench_ratio(double num, double den) { return isnan(num) || isnan(den) || den <= 0 ? NAN : num / den; }


void bench_json_num(cJSON *o, const char *k, double v) {
  if (isnan(v) || isinf(v)) cJSON_AddNullToObject(o, k);
  else cJSON_AddNumberToObject(o, k, v);
}

ts_status bench_torch_open(bench_torch *t, const char *cmd, const char *path, int threads) {
  memset(t, 0, sizeof *t);
  TS_TRY(ts__json_read_file(path, &t->root));
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(t->root, "torch");
  const cJSON *th = cJSON_GetObjectItemCaseSensitive(t->root, "threads");
  t->layers = cJSON_GetObjectItemCaseSensitive(t->root, "layers");
  snprintf(t->version, sizeof t->version, "%s", cJSON_IsString(v) ? v->valuestring : "?");
  t->threads = cJSON_IsNumber(th) ? th->valueint : 0;
  if (!cJSON_IsArray(t->layers)) return ts_error(TS_ERR_FORMAT, "%s: expected a \"layers\" array", path);
  if (t->threads && t->threads != threads)
    fprintf(stderr, "tessera %s: warning: %s was measured with %d threads, this run uses %d\n", cmd, path, t->threads, threads);
  return TS_OK;
}

void bench_torch_close(bench_torch *t) {
  cJSON_Delete(t->root);
  memset(t, 0, sizeof *t);
}
