/* Reporting pieces the CLI's bench commands share (attn, conv, gconv, vit bench): ratios and
 * medians of measured figures, JSON numbers that may be missing, and the peers' PyTorch figures
 * (--torch FILE, written by bench/peers/conv_torch.py and gconv_torch.py). */
#ifndef TS_BENCH_REPORT_H
#define TS_BENCH_REPORT_H

#include <cjson/cJSON.h>

#include "tessera/core.h"

/* num / den, NAN when either is NaN or den <= 0 (a speedup against a figure that is missing). */
double bench_ratio(double num, double den);

/* The median of v[0..n) (n >= 1; sorts v): the middle value, the mean of the two middle ones for
 * an even n. */


/* o[k] = v, or null when v is NaN or infinite (a figure that was not measured). */
void bench_json_num(cJSON *o, const char *k, double v);

/* A peer's timings file: {"torch": version, "threads": n, "layers": [...], ...}; the layers'
 * fields are the command's own. */
typedef struct bench_torch {
  cJSON *root;          /* the whole file: bench_torch_close deletes it */
  const cJSON *layers;  /* root's "layers" array */
  char version[64];     /* "torch", "?" when the file has none */
  int threads;          /* "threads", 0 when the file has none */
} bench_torch;

/* Reads path into t: TS_ERR_FORMAT when it has no "layers" array (t->version is set anyway; close t
 * in either case). A thread count other than this run's is a warning on stderr ("tessera CMD:
 * warning: ..."), not an error. */
ts_status bench_torch_open(bench_torch *t, const char *cmd, const char *path, int threads);
void bench_torch_close(bench_torch *t);

#endif
