/* Shared CLI helpers. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h" /* ts__json_print */

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "tessera %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see 'tessera %s --help')\n", cmd);
  return CLI_USAGE;
}

int cli_fail(const char *cmd, ts_status s) {
  const char *d = ts_last_error();
  if (d && *d) fprintf(stderr, "tessera %s: %s: %s\n", cmd, ts_strerror(s), d);
  else fprintf(stderr, "tessera %s: %s\n", cmd, ts_strerror(s));
  return CLI_FAIL;
}

bool cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(val, &end, 10);
  if (errno || end == val || *end || v < lo || v > hi) {
    cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, val);
    return false;
  }
  *out = v;
  return true;
}

bool cli_parse_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(val, &end);
  if (errno || end == val || *end || !(v >= lo && v <= hi)) {
    cli_usage_error(cmd, "%s expects a number in [%g, %g], got '%s'", opt, lo, hi, val);
    return false;
  }
  *out = v;
  return true;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    cli_usage_error(cmd, "option %s needs a value", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

int cli_common(const char *cmd, int argc, char **argv, int *i, cli_common_opts *o) {
  const char *a = argv[*i];
  if (strcmp(a, "--json") == 0) { o->json = true; return 1; }
  if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { o->help = true; return 1; }
  if (strcmp(a, "--threads") == 0) {
    const char *v = cli_value(cmd, argc, argv, i);
    long n;
    if (!v || !cli_parse_int(cmd, "--threads", v, 1, 4096, &n)) return -1;
    o->threads = (int)n;
    return 1;
  }
  return 0;
}

/* Replaces *s, a string cJSON owns, by its UTF-8 repair when some byte of it is not valid UTF-8
 * (each such byte grows by two in the repair, so an unchanged length means nothing was replaced). */
static void utf8_own(char **s) {
  const size_t n = strlen(*s);
  size_t m = n;
  char *r = ts_utf8_repair(*s, n, &m);
  if (r && m != n) {
    cJSON_free(*s);
    *s = r;
  } else {
    free(r);
  }
}

/* JSON text is UTF-8, but strings from files (GGUF metadata, decoded tokens, paths) may hold any
 * bytes: each invalid byte of a key or string value is printed as U+FFFD. */
static void json_utf8(cJSON *j) {
  for (cJSON *c = j; c; c = c->next) {
    if (c->string && !(c->type & cJSON_StringIsConst)) utf8_own(&c->string);
    if (cJSON_IsString(c) && c->valuestring && !(c->type & cJSON_IsReference)) utf8_own(&c->valuestring);
    if (c->child) json_utf8(c->child);
  }
}

void cli_print_json(cJSON *j) {
  json_utf8(j);
  char *s = ts__json_print(j, true); /* numbers as the library writes them (--json-out files) */
  if (s) {
    fputs(s, stdout);
    fputc('\n', stdout);
    cJSON_free(s);
  }
  cJSON_Delete(j);
}

void cli_apply_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

bool cli_parse_grid(const char *v, int64_t *h, int64_t *w) {
  char *end;
  long long a = strtoll(v, &end, 10);
  if (end == v || (*end != 'x' && *end != 'X')) return false;
  const char *b = end + 1;
  long long c = strtoll(b, &end, 10);
  if (end == b || *end || a < 1 || c < 1 || a > INT32_MAX || c > INT32_MAX) return false;
  *h = a, *w = c;
  return true;
}
