/* libFuzzer harness for the artifact store's reader (tessera/artifact.h): any bytes as the file
 * <cache>/fz/k.json must either load (an envelope of kind "fz", key "k", version 1: its payload and
 * provenance come back, and storing them again and loading once more gives the same payload) or read
 * as TS_ERR_NOT_FOUND with a message, the file moved aside when it is not a usable artifact. The
 * provenance reader gets the bytes directly too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/artifact.h"
#include "tessera/measure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64], g_path[4400];

static void setup(void) {
  if (g_dir[0]) return;
  snprintf(g_dir, sizeof g_dir, "/tmp/tessera-fuzz-artifact-XXXXXX");
  if (!mkdtemp(g_dir)) __builtin_trap();
  setenv("TESSERA_CACHE", g_dir, 1);
  setenv("TESSERA_CACHE_MAX_MB", "64", 1);
  if (ts_artifact_store("fz", 1, "k", "0", NULL) != TS_OK) __builtin_trap(); /* makes <cache>/fz */
  if (ts_artifact_path("fz", "k", g_path, sizeof g_path) != TS_OK) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;

  ts_provenance p;
  ts_status s = ts_provenance_from_json(text, &p);
  if (s != TS_OK && !ts_last_error()[0]) __builtin_trap();
  if (s == TS_OK) { /* what the reader accepts round-trips */
    char *js = NULL;
    ts_provenance q;
    if (ts_provenance_to_json(&p, &js) != TS_OK || ts_provenance_from_json(js, &q) != TS_OK || memcmp(&p, &q, sizeof p))
      __builtin_trap();
    free(js);
  }

  if (ts_write_file_atomic(g_path, data, size) != TS_OK) __builtin_trap();
  char *payload = NULL;
  s = ts_artifact_load("fz", 1, "k", &payload, &p);
  if (s != TS_OK && (s != TS_ERR_NOT_FOUND || !ts_last_error()[0])) __builtin_trap();
  if (s == TS_OK) {
    char *again = NULL;
    ts_provenance q;
    if (ts_artifact_store("fz", 1, "k", payload, &p) != TS_OK || ts_artifact_load("fz", 1, "k", &again, &q) != TS_OK ||
        strcmp(payload, again) || memcmp(&p, &q, sizeof p))
      __builtin_trap();
    free(again);
  }
  free(payload);
  char bad[4500];
  snprintf(bad, sizeof bad, "%s.bad", g_path);
  unlink(bad);
  free(text);
  return 0;
}
