/* Helpers shared by the CLI's subcommands: uniform errors, option parsing, JSON output. */
#ifndef TS_CLI_H
#define TS_CLI_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera/core.h"

/* Exit codes: 0 ok, 1 the operation failed, 2 bad usage. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Prints "tessera CMD: message" (one line) and returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "tessera CMD: STRERROR: DETAIL" and returns CLI_FAIL. */
int cli_fail(const char *cmd, ts_status s);

/* Strict number parsing for option values; false (and a usage message) when not a number in range. */
bool cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out);
bool cli_parse_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out);
/* "HxW" (or "HXW"), both in [1, INT32_MAX] -> *h, *w; false (nothing written) otherwise. */
bool cli_parse_grid(const char *v, int64_t *h, int64_t *w);

/* Common options every command accepts: --threads N, --json, --help/-h.
 * cli_common consumes argv[*i] (and its value) if it is one of them: returns 1 when consumed,
 * 0 when not a common option, -1 on a bad value (message printed). */
typedef struct cli_common_opts {
  int threads; /* 0 = default */
  bool json;
  bool help;
} cli_common_opts;
int cli_common(const char *cmd, int argc, char **argv, int *i, cli_common_opts *o);

/* --threads N (N > 0) for the library's OpenMP loops that take no context (reordering, block
 * extraction, the pattern generators): OpenMP's default team. The contexts a command creates get N
 * from ts_context_create(&ctx, N) itself. 0: nothing changes. */
void cli_apply_threads(int threads);

/* Fetches the value of option argv[*i] (advancing *i); NULL and a usage message if missing. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);

/* Prints a cJSON object to stdout (pretty) and deletes it. */
void cli_print_json(cJSON *j);

/* tessera llm convert (cmd_llm_convert.c), dispatched from cmd_llm.c: argv[1] is "convert". */
int cmd_llm_convert(int argc, char **argv);

#endif
