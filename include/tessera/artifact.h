/* tessera artifacts: the one store for everything tessera measures or plans and keeps (machine
 * profiles, kernel cost tables, attention / convolution / group-convolution plans, the LLM's measured
 * prefetch distance), FFTW-wisdom style: look up by (kind, key); when absent, stale or unreadable,
 * compute, validate and write atomically.
 *
 * Layout: <cache>/<kind>/<key>.json, <cache> = ts_cache_dir() ($TESSERA_CACHE, else
 * ~/.cache/tessera). Each file is one JSON object (docs/FORMATS.md, "Artifacts"):
 *   {"artifact": kind, "version": N, "key": key, "provenance": {...}, "data": ...}
 * A kind is versioned: a file written by another version of its format is re-made, never
 * misread. A corrupt or foreign file (not JSON, another kind or key, a payload its reader rejects)
 * is moved aside to <file>.bad with a note on stderr and re-made: never trusted, never fatal.
 * The directory is size-bounded: after each store the least recently written artifacts are removed
 * until the whole store is under ts_cache_limit() bytes ($TESSERA_CACHE_MAX_MB, default 512 MiB).
 *
 * Thread and process safety: writes are atomic renames, so concurrent readers see a whole old file
 * or a whole new one; two processes computing the same artifact both write it, the last one wins.
 * Kinds and keys are [a-z0-9_-.] names up to 64 characters. */
#ifndef TESSERA_ARTIFACT_H
#define TESSERA_ARTIFACT_H

#include "tessera/core.h"
#include "tessera/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* <cache>/<kind>/<key>.json into buf[0..cap). */
ts_status ts_artifact_path(const char *kind, const char *key, char *buf, size_t cap);

/* The payload ("data") of artifact (kind, key) at format `version` as a malloc'd JSON string
 * (free()) and its provenance (prov may be NULL). TS_ERR_NOT_FOUND when there is none, or only one
 * of another version (left in place for that version's readers); a corrupt or foreign file is moved
 * aside and also reads as TS_ERR_NOT_FOUND. */
ts_status ts_artifact_load(const char *kind, int version, const char *key, char **data_json, ts_provenance *prov);

/* Writes artifact (kind, key) atomically with the payload data_json (a JSON value) and its
 * provenance (NULL: this machine now, no thread count), then bounds the store's size. */
ts_status ts_artifact_store(const char *kind, int version, const char *key, const char *data_json,
                            const ts_provenance *prov);

/* One stored artifact, as `tessera cache list` prints it. */
typedef struct ts_artifact_entry {
  char kind[65], key[65];
  int version;       /* -1 when the file could not be read */
  int64_t bytes;
  double mtime;      /* seconds since the epoch */
  ts_provenance prov;
  bool bad;          /* a file moved aside (<key>.json.bad) or one that does not parse */
} ts_artifact_entry;

/* The artifacts of `kind` (NULL: all kinds), sorted by kind then key, in *entries (free()) and
 * their count in *n. */
ts_status ts_artifact_list(const char *kind, ts_artifact_entry **entries, int *n);
/* Removes the artifacts of `kind` (NULL: all, and files moved aside); *removed (may be NULL) gets
 * their count. Nothing outside <cache>/<kind>/ is touched. */
ts_status ts_artifact_clear(const char *kind, int *removed);
/* Bytes the store may hold ($TESSERA_CACHE_MAX_MB, default 512 MiB). */
int64_t ts_cache_limit(void);
/* Removes the oldest artifacts until the store holds at most limit bytes; *removed their count. */
ts_status ts_artifact_trim(int64_t limit, int *removed);

#ifdef __cplusplus
}
#endif
#endif
