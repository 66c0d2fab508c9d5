/* Status codes and the per-thread detail message of the last error. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tessera/core.h"

static _Thread_local char ts__last_error[1024];

const char *ts_strerror(ts_status s) {
  switch (s) {
    case TS_OK: return "ok";
    case TS_ERR_INVALID_ARG: return "invalid argument";
    case TS_ERR_USAGE: return "bad usage";
    case TS_ERR_OOM: return "out of memory";
    case TS_ERR_IO: return "i/o error";
    case TS_ERR_FORMAT: return "malformed input";
    case TS_ERR_TRUNCATED: return "truncated input";
    case TS_ERR_SHAPE: return "shape mismatch";
    case TS_ERR_DTYPE: return "unsupported data type";
    case TS_ERR_OVERFLOW: return "size overflow";
    case TS_ERR_UNSUPPORTED: return "unsupported";
    case TS_ERR_NOT_FOUND: return "not found";
    case TS_ERR_INFEASIBLE: return "infeasible";
    case TS_ERR_SOLVER: return "solver failure";
    case TS_ERR_TIMEOUT: return "time limit reached";
    case TS_ERR_INTERNAL: return "internal error";
    case TS_STATUS_COUNT: break;
  }
  return "unknown status";
}

const char *ts_last_error(void) { return ts__last_error; }

void ts_error_clear(void) { ts__last_error[0] = 0; }

ts_status ts_error(ts_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ts__last_error, sizeof ts__last_error, fmt, ap);
  va_end(ap);
  return code;
}

void ts_error_prefix(const char *fmt, ...) {
  char prefix[512];
  char old[sizeof ts__last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, ts__last_error, sizeof old);
  size_t np = strlen(prefix), no = strlen(old);
  if (np >= sizeof ts__last_error) np = sizeof ts__last_error - 1;
  if (np + no >= sizeof ts__last_error) no = sizeof ts__last_error - 1 - np;
  memcpy(ts__last_error, prefix, np);
  memcpy(ts__last_error + np, old, no);
  ts__last_error[np + no] = 0;
}
