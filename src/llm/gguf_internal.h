/* GGUF reader internals shared by gguf_read.c (parse + validate) and gguf_api.c (getters). */
#ifndef TS_LLM_GGUF_INTERNAL_H
#define TS_LLM_GGUF_INTERNAL_H

#include "tessera/gguf.h"

#define TS__GGUF_MAGIC "GGUF"
#define TS__GGUF_MAX_NEST 4 /* arrays of arrays deeper than this are rejected */

typedef struct ts__gguf_str {
  const char *p; /* into the image, not NUL-terminated */
  uint64_t len;
} ts__gguf_str;

typedef struct ts__gguf_kv {
  const char *key;     /* NUL-terminated, in the arena */
  uint32_t type;       /* ts_gguf_vtype */
  uint32_t elem;       /* arrays: element type; else == type */
  uint64_t count;      /* arrays: element count; else 1 */
  const uint8_t *raw;  /* scalars: the value bytes; arrays: the first element */
  ts__gguf_str str;    /* STRING values */
  ts__gguf_str *strs;  /* arrays of strings: count entries (malloc'd) */
} ts__gguf_kv;

struct ts_gguf {
  const uint8_t *base;
  size_t size;
  void *map;       /* mmap'd region (munmap), or */
  void *owned;     /* a read() copy (free) */
  char *name;      /* file name for messages */
  uint32_t version;
  size_t alignment, data_off;
  int64_t nkv, ntensors;
  ts__gguf_kv *kv;
  ts_gguf_tensor *tensors;
  char *arena;     /* keys and tensor names */
};

/* Byte size of one scalar value of type t (0 for STRING/ARRAY/unknown). */
size_t ts__gguf_scalar_size(uint32_t t);
/* Parses and validates g->base[0..size) into g (keys, tensors); g->name set. */
ts_status ts__gguf_parse(ts_gguf *g);

#endif
