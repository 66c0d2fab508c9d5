/* JSON documents through cJSON, for the rooms, the CLI, the benchmarks, the tests and the fuzzers
 * (all of which include src/ privately). Not public API: public functions take and return JSON as
 * NUL-terminated strings (ARCHITECTURE.md, "API shape"), so no cJSON type is in include/tessera/.
 * Parse errors locate the text; typed lookups name the key and what was found instead. */
#ifndef TS_IO_JSON_INTERNAL_H
#define TS_IO_JSON_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/io.h"

/* Parse errors are TS_ERR_FORMAT "path:LINE:COL: invalid JSON near '...'" (1-based, bytes);
 * TS_ERR_OOM when an allocation failed. Free the result with cJSON_Delete. */
ts_status ts__json_read_file(const char *path, cJSON **out);
/* The same for an in-memory text (need not be NUL-terminated); `name` is used in messages. */
ts_status ts__json_read_mem(const char *buf, size_t len, const char *name, cJSON **out);
/* Pretty-printed, newline-terminated, atomic. */
ts_status ts__json_write_file(const char *path, const cJSON *j);
/* Typed lookups with errors naming the key: TS_ERR_NOT_FOUND for a missing key, TS_ERR_FORMAT
 * for a value of the wrong type ("key 'n': expected a number, found a string ("abc")"),
 * TS_ERR_INVALID_ARG when obj is not an object. *out is untouched on error. */
ts_status ts__json_get_number(const cJSON *obj, const char *key, double *out);
/* A number that is an integer of magnitude <= 2^53. */
ts_status ts__json_get_int(const cJSON *obj, const char *key, int64_t *out);
/* Points into obj (valid while obj lives). */
ts_status ts__json_get_string(const cJSON *obj, const char *key, const char **out);
ts_status ts__json_get_bool(const cJSON *obj, const char *key, bool *out);

#endif
