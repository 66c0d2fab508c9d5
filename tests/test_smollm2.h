/* Where the real SmolLM2-135M-Instruct Q4_1 GGUF is, for the tests that use it when present:
 * $TESSERA_SMOLLM2, else bench/peers/.venv-llm/smollm2.gguf (scripts/get-smollm2.sh links it).
 * NULL when absent: those checks are skipped and say so (SKIPPED; .ci/run installs the model, so
 * CI runs them). */
#ifndef TEST_SMOLLM2_H
#define TEST_SMOLLM2_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* TESSERA_SMOLLM2 set (as .ci/run sets it): the model is required, and its absence is a failure,
 * not a skip. */
static inline bool tst_smollm2_required(void) {
  const char *e = getenv("TESSERA_SMOLLM2");
  return e && *e;
}

static inline const char *tst_smollm2_path(void) {
  const char *e = getenv("TESSERA_SMOLLM2");
  if (e && *e) return access(e, R_OK) == 0 ? e : NULL;
  static char p[2048];
  /* the repository root from this file's path (CMake compiles the tests by absolute path) */
  const char *f = __FILE__, *end = strstr(f, "/tests/test_smollm2.h");
  snprintf(p, sizeof p, "%.*s/bench/peers/.venv-llm/smollm2.gguf", end ? (int)(end - f) : 1, end ? f : ".");
  return access(p, R_OK) == 0 ? p : NULL;
}

#endif
