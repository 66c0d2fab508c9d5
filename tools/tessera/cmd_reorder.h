/* What `tessera reorder` and `tessera blocks` share (defined in cmd_reorder.c): the input
 * (--in FILE | --pattern SPEC), the reordering and extraction options, running the reordering,
 * and the before/after metrics in JSON and text. */
#ifndef TS_CMD_REORDER_H
#define TS_CMD_REORDER_H

#include "cli.h"
#include "tessera/reorder.h"

typedef struct rcli_args {
  const char *in, *spec;   /* exactly one */
  ts_reorder_opts ro;      /* method, mode, clustering/METIS knobs, grid */
  bool grid_given;
  bool method_given;
  ts_blocks_opts bo;       /* --density, --extract, --min-nnz, --max-group, --block-cost */
} rcli_args;

/* Defaults (reorder: method auto, tile 16; blocks: method none, tile 64). */
void rcli_defaults(rcli_args *a, ts_reorder_method method, int32_t tile);
/* Consumes argv[*i] (and its value) when it is one of the shared options: 1 consumed, 0 not one
 * of them, -1 bad value (usage message printed). */
int rcli_option(const char *cmd, int argc, char **argv, int *i, rcli_args *a);
/* A command's own option with a string value: --name (or its alias, NULL: none) VALUE -> *dst. */
typedef struct rcli_str_opt {
  const char *name, *alias;
  const char **dst;
} rcli_str_opt;
/* Parses argv[1..]: the common options into co, the shared ones into a (set its defaults first),
 * then the command's own (own[0..nown)). CLI_OK, else CLI_USAGE (message printed). */
int rcli_parse(const char *cmd, int argc, char **argv, cli_common_opts *co, rcli_args *a, const rcli_str_opt *own, int nown);
/* Help text of the shared options. */
const char *rcli_options_help(void);

typedef struct rcli_input {
  ts_csr m;
  ts_pattern_info info; /* zeroed for --in */
  const char *name;     /* spec or path */
} rcli_input;

/* Loads the input: CLI_OK, else the exit code (message printed). Sets the grid of a->ro from the
 * generator unless --grid was given. */
int rcli_load(const char *cmd, rcli_args *a, rcli_input *in);
void rcli_input_free(rcli_input *in);

/* Reorders (row/col perms allocated here; col_perm = row_perm's copy in symmetric mode): CLI_OK
 * or the exit code (bad option combinations are usage errors). */
int rcli_reorder(const char *cmd, const rcli_args *a, const rcli_input *in, int32_t **row_perm, int32_t **col_perm,
                 ts_reorder_stats *st);

/* What both commands measure of the input and its reordering (rp, cp; NULL: identity): the tile
 * metrics before and after, the permuted pattern, its dense blocks and their summary. */
typedef struct rcli_result {
  ts_pattern_metrics before, after;
  ts_csr pm;
  ts_blocks blk;
  ts_blocks_summary bs;
} rcli_result;
/* Fills r (zeroed first; free it with rcli_result_free whatever this returns). */
ts_status rcli_measure(const rcli_args *a, const rcli_input *in, const int32_t *rp, const int32_t *cp, rcli_result *r);
void rcli_result_free(rcli_result *r);

/* Adds the shared report fields: n, rows, cols, nnz, method, reorder_ms, tile, bandwidth and
 * profile before/after, tiles_* after and tiles_*_before, and the block summary (blocks,
 * fill_ratio, ...). */
void rcli_json_metrics(cJSON *j, const rcli_input *in, const ts_pattern_metrics *before,
                       const ts_pattern_metrics *after, const ts_reorder_stats *st, const ts_blocks_summary *bs,
                       const ts_blocks_opts *bo, double extract_ms);
void rcli_print_metrics(const rcli_input *in, const ts_pattern_metrics *before, const ts_pattern_metrics *after,
                        const ts_reorder_stats *st, const ts_blocks_summary *bs, const ts_blocks_opts *bo,
                        double extract_ms);

#endif
