/* Where the real SmolLM2-135M-Instruct Q4_1 GGUF is, for the tests that use it when present:
 * $TESSERA_SMOLLM2, else bench/peers/.venv-llm/smollm2.gguf (scripts/get-smollm2.sh links it).
 * NULL when absent: those checks are skipped (CI has no model). */
#ifndef TEST_SMOLLM2_H
#define TEST_SMOLLM2_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
