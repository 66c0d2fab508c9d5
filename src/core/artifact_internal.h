/* The artifact store, provenance records and machine profile for the rooms (cJSON side of
 * tessera/artifact.h, tessera/measure.h and tessera/hwinfo.h), and the two helpers every room's
 * public JSON functions use: public JSON is a malloc'd NUL-terminated string (ARCHITECTURE.md,
 * "API shape"), cJSON stays inside. How a room keeps a kind of artifact: ARCHITECTURE.md, "Adding
 * a subsystem". */
#ifndef TS_CORE_ARTIFACT_INTERNAL_H
#define TS_CORE_ARTIFACT_INTERNAL_H

#include <cjson/cJSON.h>

#include "tessera/artifact.h"
#include "tessera/hwinfo.h"
#include "tessera/measure.h"

/* j printed compactly into a plain malloc'd string (*out, the caller's to free(), whatever
 * allocator ts_set_allocator installed for cJSON). TS_ERR_OOM naming `what`; j NULL (a failed
 * to_cjson) is TS_ERR_OOM too. */
ts_status ts__json_to_string(const cJSON *j, const char *what, char **out);
/* j as text (indented or not; freed with cJSON_free; NULL when out of memory) in which every number
 * reads back as the same double: cJSON prints 15 significant digits whenever they come within a
 * relative DBL_EPSILON of the value, which loses the last bits of measured figures; such numbers
 * are written with 17 here. Every writer of the library's JSON goes through it. */
char *ts__json_print(const cJSON *j, bool formatted);
/* Parses a NUL-terminated JSON text (*out, the caller's to cJSON_Delete). TS_ERR_FORMAT naming
 * `what` and the byte offset; TS_ERR_OOM when an allocation failed; TS_ERR_INVALID_ARG for NULL. */
ts_status ts__json_from_string(const char *json, const char *what, cJSON **out);
/* The public string forms of a room's cJSON writer and reader (the one shape of every ts_X_to_json /
 * ts_X_from_json): json_out prints j (taking it: deleted here; NULL reads as TS_ERR_OOM) into *out;
 * json_in parses `json` and hands the tree to parse(j, obj). */
ts_status ts__json_out(cJSON *j, const char *what, char **out);
ts_status ts__json_in(const char *json, const char *what, ts_status (*parse)(const cJSON *j, void *obj), void *obj);

/* Provenance as a cJSON object (NULL on OOM) and back (TS_ERR_FORMAT naming `what` on a field of
 * the wrong type or length; absent fields stay empty). */
cJSON *ts__provenance_json(const ts_provenance *p);
ts_status ts__provenance_parse(const cJSON *j, const char *what, ts_provenance *p);

/* The machine profile's JSON object (NULL on OOM) and back (from_cjson names the bad field). */
cJSON *ts__hwinfo_to_cjson(const ts_machine_profile *p);
ts_status ts__hwinfo_from_cjson(const cJSON *j, ts_machine_profile *p);

/* A room's kind of artifact: its name (the folder) and format version. */
typedef struct ts__artifact_kind {
  const char *name;
  int version;
} ts__artifact_kind;

/* The payload of (kind, key) as cJSON (*data, the caller's to cJSON_Delete) and its provenance;
 * TS_ERR_NOT_FOUND when absent, of another version, or corrupt (then moved aside). */
ts_status ts__artifact_load(const ts__artifact_kind *k, const char *key, cJSON **data, ts_provenance *prov);
/* Writes (kind, key) atomically; data stays the caller's. */
ts_status ts__artifact_store(const ts__artifact_kind *k, const char *key, const cJSON *data, const ts_provenance *prov);
/* Moves (kind, key) aside to <file>.bad with a note on stderr naming why (its reader rejected it). */
void ts__artifact_reject(const ts__artifact_kind *k, const char *key, const char *why);

/* get(): a stored artifact the room's reader accepts, else compute -> check -> store. */
typedef struct ts__artifact_ops {
  ts__artifact_kind kind;
  /* Takes a stored payload into ctx's object. TS_OK: use it. TS_ERR_NOT_FOUND: valid but stale (made
   * on another machine, with other settings): re-made silently. Any other error: the file is corrupt
   * or foreign: moved aside, re-made. Must leave ctx's object empty on failure. */
  ts_status (*accept)(void *ctx, const cJSON *data, const ts_provenance *prov);
  /* Makes a new one in ctx's object and returns its payload (*data, handed over) and provenance. */
  ts_status (*compute)(void *ctx, cJSON **data, ts_provenance *prov);
  /* Optional: checks a computed payload before it is stored (a payload the reader would reject is
   * never written: TS_ERR_INTERNAL). */
  ts_status (*check)(void *ctx, const cJSON *data);
} ts__artifact_ops;

/* *computed (may be NULL) says whether it was made now. A store that fails after a successful
 * compute is reported on stderr and is not an error (the result is in ctx's object). */
ts_status ts__artifact_get(const ts__artifact_ops *ops, const char *key, void *ctx, bool *computed);

#endif
