/* Contexts: the caller decides the thread count; kernels read it from here. */
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include "tessera/core.h"

struct ts_context {
  int nthreads;
};

static int env_threads(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  long n = strtol(v, &end, 10);
  return (*end == 0 && n > 0 && n <= 4096) ? (int)n : 0;
}

int ts_default_threads(void) {
  int n = env_threads("TESSERA_THREADS");
  if (!n) n = env_threads("OMP_NUM_THREADS");
  if (!n) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)c : 1;
  }
  return n;
}

ts_status ts_context_create(ts_context **ctx, int nthreads) {
  if (!ctx) return ts_error(TS_ERR_INVALID_ARG, "ts_context_create: ctx is NULL");
  if (nthreads > 4096) return ts_error(TS_ERR_INVALID_ARG, "thread count %d is too large", nthreads);
  ts_context *c = ts_malloc(sizeof *c);
  if (!c) return ts_error(TS_ERR_OOM, "cannot allocate context");
  c->nthreads = nthreads > 0 ? nthreads : ts_default_threads();
  *ctx = c;
  return TS_OK;
}

void ts_context_destroy(ts_context *ctx) { ts_free(ctx); }

int ts_context_threads(const ts_context *ctx) { return ctx ? ctx->nthreads : ts_default_threads(); }
