/* tessera gguf FILE: the metadata (long arrays abbreviated) and the tensor table of a GGUF file,
 * with totals per tensor type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tessera/gguf.h"

#define MAX_TYPES 64

typedef struct totals {
  int64_t tensors[MAX_TYPES], elems[MAX_TYPES];
  uint64_t bytes[MAX_TYPES];
} totals;

/* Prints s[0..len) with C escapes, at most `max` source bytes (then "..."). */
static void print_str(const char *s, size_t len, size_t max) {
  putchar('"');
  for (size_t i = 0; i < len && i < max; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c == '\n') printf("\\n");
    else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
    else putchar(c);
  }
  putchar('"');
  if (len > max) printf("...(%zu bytes)", len);
}

static void print_scalar(const ts_gguf *g, int64_t k, ts_gguf_vtype t) {
  int64_t iv = 0;
  double fv = 0;
  const char *s = NULL;
  size_t len = 0;
  ts_gguf_kv_scalar(g, k, &iv, &fv, &s, &len);
  if (t == TS_GGUF_STRING) print_str(s, len, 120);
  else if (t == TS_GGUF_BOOL) printf("%s", iv ? "true" : "false");
  else if (t == TS_GGUF_F32 || t == TS_GGUF_F64) printf("%.9g", fv);
  else if (t == TS_GGUF_U64 && fv > 9.2e18) printf("%.0f", fv);
  else printf("%lld", (long long)iv);
}

static void print_elem(const ts_gguf *g, int64_t k, ts_gguf_vtype et, uint64_t i) {
  if (et == TS_GGUF_STRING) {
    const char *s;
    size_t len;
    if (ts_gguf_arr_str_at(g, k, i, &s, &len) == TS_OK) print_str(s, len, 40);
  } else if (et == TS_GGUF_F32 || et == TS_GGUF_F64) {
    double v;
    if (ts_gguf_arr_f64_at(g, k, i, &v) == TS_OK) printf("%.6g", v);
  } else if (et != TS_GGUF_ARRAY) {
    int64_t v;
    if (ts_gguf_arr_int_at(g, k, i, &v) == TS_OK) printf("%lld", (long long)v);
    else printf("(> int64)");
  }
}

static cJSON *json_elem(const ts_gguf *g, int64_t k, ts_gguf_vtype et, uint64_t i) {
  if (et == TS_GGUF_STRING) {
    const char *s;
    size_t len;
    if (ts_gguf_arr_str_at(g, k, i, &s, &len) != TS_OK) return cJSON_CreateNull();
    char *c = strndup(s, len); /* a string with a NUL inside is cut there */
    cJSON *j = cJSON_CreateString(c ? c : "");
    free(c);
    return j;
  }
  if (et == TS_GGUF_F32 || et == TS_GGUF_F64) {
    double v;
    return ts_gguf_arr_f64_at(g, k, i, &v) == TS_OK ? cJSON_CreateNumber(v) : cJSON_CreateNull();
  }
  if (et == TS_GGUF_BOOL) {
    int64_t v;
    return ts_gguf_arr_int_at(g, k, i, &v) == TS_OK ? cJSON_CreateBool(v != 0) : cJSON_CreateNull();
  }
  int64_t v;
  return ts_gguf_arr_int_at(g, k, i, &v) == TS_OK ? cJSON_CreateNumber((double)v) : cJSON_CreateNull();
}

static cJSON *json_value(const ts_gguf *g, int64_t k, ts_gguf_vtype t, ts_gguf_vtype et, uint64_t n, uint64_t max_arr) {
  if (t == TS_GGUF_ARRAY) {
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "type", "array");
    cJSON_AddStringToObject(o, "elem_type", ts_gguf_vtype_name(et));
    cJSON_AddNumberToObject(o, "count", (double)n);
    for (uint64_t i = 0; i < n && i < max_arr && et != TS_GGUF_ARRAY; i++) cJSON_AddItemToArray(a, json_elem(g, k, et, i));
    cJSON_AddItemToObject(o, n > max_arr ? "head" : "values", a);
    return o;
  }
  int64_t iv = 0;
  double fv = 0;
  const char *s = NULL;
  size_t len = 0;
  ts_gguf_kv_scalar(g, k, &iv, &fv, &s, &len);
  if (t == TS_GGUF_STRING) {
    char *c = strndup(s, len);
    cJSON *j = cJSON_CreateString(c ? c : "");
    free(c);
    return j;
  }
  if (t == TS_GGUF_BOOL) return cJSON_CreateBool(iv != 0);
  if (t == TS_GGUF_F32 || t == TS_GGUF_F64) return cJSON_CreateNumber(fv);
  return cJSON_CreateNumber(t == TS_GGUF_U64 ? fv : (double)iv);
}

static void shape_str(const ts_gguf_tensor *t, char *buf, size_t cap) {
  size_t o = 0;
  for (int d = 0; d < t->n_dims && o < cap; d++)
    o += (size_t)snprintf(buf + o, cap - o, d ? " x %lld" : "%lld", (long long)t->ne[d]);
}

static void add_total(totals *tot, const ts_gguf_tensor *t) {
  uint32_t k = t->type < MAX_TYPES - 1 ? t->type : MAX_TYPES - 1; /* last slot: ids this table does not hold */
  tot->tensors[k]++;
  tot->elems[k] += t->nelem;
  tot->bytes[k] += t->nbytes;
}

static int print_text(const char *path, const ts_gguf *g, uint64_t max_arr) {
  int64_t nkv = ts_gguf_kv_count(g), nt = ts_gguf_tensor_count(g);
  printf("file         %s\nversion      %u\nalignment    %zu\ndata offset  %zu\nfile size    %zu\n", path,
         ts_gguf_version(g), ts_gguf_alignment(g), ts_gguf_data_offset(g), ts_gguf_file_size(g));
  printf("\nmetadata (%lld keys)\n", (long long)nkv);
  for (int64_t k = 0; k < nkv; k++) {
    const char *key;
    ts_gguf_vtype t, et;
    uint64_t n;
    ts_gguf_kv_info(g, k, &key, &t, &et, &n);
    if (t == TS_GGUF_ARRAY && et == TS_GGUF_ARRAY) {
      printf("  %-40s array[%llu] (arrays of arrays are not shown)\n", key, (unsigned long long)n);
    } else if (t == TS_GGUF_ARRAY) {
      printf("  %-40s %s[%llu] [", key, ts_gguf_vtype_name(et), (unsigned long long)n);
      for (uint64_t i = 0; i < n && i < max_arr; i++) {
        if (i) printf(", ");
        print_elem(g, k, et, i);
      }
      printf(n > max_arr ? "%s...]\n" : "]\n", max_arr ? ", " : "");
    } else {
      printf("  %-40s %-7s ", key, ts_gguf_vtype_name(t));
      print_scalar(g, k, t);
      putchar('\n');
    }
  }
  printf("\ntensors (%lld; shape as ne0 x ne1 ..., ne0 contiguous)\n", (long long)nt);
  printf("  %-36s %-8s %-22s %12s %12s\n", "name", "type", "shape", "bytes", "offset");
  totals tot;
  memset(&tot, 0, sizeof tot);
  uint64_t all = 0;
  for (int64_t i = 0; i < nt; i++) {
    const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
    char shp[96];
    shape_str(t, shp, sizeof shp);
    printf("  %-36s %-8s %-22s %12zu %12llu\n", t->name, t->known ? ts_qtype_name(t->type) : "unknown", shp, t->nbytes,
           (unsigned long long)t->offset);
    add_total(&tot, t);
    all += t->nbytes;
  }
  printf("\ntotals per type\n");
  for (int k = 0; k < MAX_TYPES; k++)
    if (tot.tensors[k])
      printf("  %-8s %5lld tensors %12lld elements %12llu bytes%s\n", k == MAX_TYPES - 1 ? "other" : ts_qtype_name((uint32_t)k),
             (long long)tot.tensors[k], (long long)tot.elems[k], (unsigned long long)tot.bytes[k],
             ts_qtype_has_kernels((uint32_t)k) ? "" : "  (no kernels)");
  printf("  %-8s %5lld tensors %12s          %12llu bytes\n", "all", (long long)nt, "", (unsigned long long)all);
  return CLI_OK;
}

static int print_json(const char *path, const ts_gguf *g, uint64_t max_arr) {
  cJSON *j = cJSON_CreateObject(), *meta = cJSON_CreateObject(), *ts = cJSON_CreateArray(), *tj = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "file", path);
  cJSON_AddNumberToObject(j, "version", ts_gguf_version(g));
  cJSON_AddNumberToObject(j, "alignment", (double)ts_gguf_alignment(g));
  cJSON_AddNumberToObject(j, "data_offset", (double)ts_gguf_data_offset(g));
  cJSON_AddNumberToObject(j, "file_size", (double)ts_gguf_file_size(g));
  for (int64_t k = 0; k < ts_gguf_kv_count(g); k++) {
    const char *key;
    ts_gguf_vtype t, et;
    uint64_t n;
    ts_gguf_kv_info(g, k, &key, &t, &et, &n);
    cJSON_AddItemToObject(meta, key, json_value(g, k, t, et, n, max_arr));
  }
  totals tot;
  memset(&tot, 0, sizeof tot);
  for (int64_t i = 0; i < ts_gguf_tensor_count(g); i++) {
    const ts_gguf_tensor *t = ts_gguf_tensor_at(g, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "type", t->known ? ts_qtype_name(t->type) : "unknown");
    cJSON_AddNumberToObject(o, "type_id", t->type);
    double sh[TS_GGUF_MAX_DIMS];
    for (int d = 0; d < t->n_dims; d++) sh[d] = (double)t->ne[d];
    cJSON_AddItemToObject(o, "ne", cJSON_CreateDoubleArray(sh, t->n_dims));
    cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
    cJSON_AddNumberToObject(o, "offset", (double)t->offset);
    cJSON_AddItemToArray(ts, o);
    add_total(&tot, t);
  }
  for (int k = 0; k < MAX_TYPES; k++)
    if (tot.tensors[k]) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "tensors", (double)tot.tensors[k]);
      cJSON_AddNumberToObject(o, "elements", (double)tot.elems[k]);
      cJSON_AddNumberToObject(o, "bytes", (double)tot.bytes[k]);
      cJSON_AddItemToObject(tj, k == MAX_TYPES - 1 ? "other" : ts_qtype_name((uint32_t)k), o);
    }
  cJSON_AddItemToObject(j, "metadata", meta);
  cJSON_AddItemToObject(j, "tensors", ts);
  cJSON_AddItemToObject(j, "totals", tj);
  cli_print_json(j);
  return CLI_OK;
}

int cmd_gguf(int argc, char **argv) {
  cli_common_opts o = {0};
  const char *path = NULL;
  long max_arr = 8;
  for (int i = 1; i < argc; i++) {
    int r = cli_common("gguf", argc, argv, &i, &o);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if (strcmp(argv[i], "--max-array") == 0) {
      const char *v = cli_value("gguf", argc, argv, &i);
      if (!v || !cli_parse_int("gguf", "--max-array", v, 0, 1L << 40, &max_arr)) return CLI_USAGE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("gguf", "unknown option '%s'", argv[i]);
    } else if (path) {
      return cli_usage_error("gguf", "one FILE expected, got '%s' too", argv[i]);
    } else {
      path = argv[i];
    }
  }
  if (o.help) {
    printf("usage: tessera gguf FILE [--json] [--max-array N]\n\n"
           "Validates a GGUF (v2/v3) file and prints its metadata (arrays abbreviated to their first N\n"
           "elements, default 8) and its tensor table: name, type, shape (ne0 first, ne0 contiguous),\n"
           "bytes and offset, with totals per tensor type.\n");
    return CLI_OK;
  }
  if (!path) return cli_usage_error("gguf", "missing FILE");
  ts_gguf *g;
  ts_status s = ts_gguf_open(&g, path);
  if (s != TS_OK) return cli_fail("gguf", s);
  int rc = o.json ? print_json(path, g, (uint64_t)max_arr) : print_text(path, g, (uint64_t)max_arr);
  ts_gguf_close(g);
  return rc;
}
