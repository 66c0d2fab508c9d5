/* tessera llm convert: a GGUF model from a safetensors file and a metadata JSON (ts_llm_convert),
 * reached from cmd_llm.c's dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tessera/llm_convert.h"

#define CMD "llm convert"
#define USAGE "tessera llm convert --safetensors FILE --meta FILE --type q8_0|q4_0|q4_1|f16|f32 --out FILE.gguf [--json]"


static void print_help(void) {
  printf("usage: %s\n\n"
         "Writes a GGUF model from a safetensors file of F32/F16/BF16 tensors (already named and laid out\n"
         "as GGUF wants) and a metadata JSON {\"kv\": [[key, type, value], ...]} (docs/FORMATS.md). 2-D\n"
         "tensors whose rows are a multiple of the type's block size are stored in --type; 1-D tensors\n"
         "(norms) and the rest stay f32. The file is parsed back before it is written (atomically).\n",
         USAGE);
}

static void print_json(const char *out, uint32_t type, const ts_llm_convert_report *r) {
  cJSON *j = cJSON_CreateObject(), *types = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "out", out);
  cJSON_AddStringToObject(j, "type", ts_qtype_name(type));
  cJSON_AddNumberToObject(j, "tensors", (double)r->tensors);
  cJSON_AddNumberToObject(j, "kv", (double)r->kv);
  cJSON_AddNumberToObject(j, "params", (double)r->params);
  cJSON_AddNumberToObject(j, "bytes", (double)r->bytes);
  cJSON_AddNumberToObject(j, "seconds", r->seconds);
  for (int t = 0; t < TS_LLM_CONVERT_TYPES; t++) {
    if (!r->type_tensors[t]) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "tensors", (double)r->type_tensors[t]);
    cJSON_AddNumberToObject(e, "bytes", (double)r->type_bytes[t]);
    cJSON_AddItemToObject(types, ts_qtype_name((uint32_t)t), e);
  }
  cJSON_AddItemToObject(j, "types", types);
  cli_print_json(j);
}

static void print_text(const char *out, const ts_llm_convert_report *r) {
  char types[256];
  size_t o = 0;
  for (int t = 0; t < TS_LLM_CONVERT_TYPES && o < sizeof types; t++)
    if (r->type_tensors[t])
      o += (size_t)snprintf(types + o, sizeof types - o, "%s%lld %s", o ? ", " : "", (long long)r->type_tensors[t],
                            ts_qtype_name((uint32_t)t));
  if (!o) types[0] = 0;
  printf("wrote %s: %lld tensors (%s), %.2fM parameters, %llu bytes (%.1f MiB), %lld kv, %.2f s\n", out,
         (long long)r->tensors, types, (double)r->params / 1e6, (unsigned long long)r->bytes,
         (double)r->bytes / (1024.0 * 1024.0), (long long)r->kv, r->seconds);
}

int cmd_llm_convert(int argc, char **argv) {
  cli_common_opts c = {0};
  const char *st = NULL, *meta = NULL, *type = NULL, *out = NULL;
  for (int i = 2; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &c);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char **dst = !strcmp(argv[i], "--safetensors") ? &st
                       : !strcmp(argv[i], "--meta")      ? &meta
                       : !strcmp(argv[i], "--type")      ? &type
                       : !strcmp(argv[i], "--out")       ? &out
                                                         : NULL;
    if (!dst) return cli_usage_error(CMD, "unknown argument '%s' (usage: %s)", argv[i], USAGE);
    if (*dst) return cli_usage_error(CMD, "%s given twice", argv[i]);
    if (!(*dst = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
  }
  if (c.help) {
    print_help();
    return CLI_OK;
  }
  if (!st || !meta || !type || !out)
    return cli_usage_error(CMD, "missing %s (usage: %s)", !st ? "--safetensors" : !meta ? "--meta" : !type ? "--type" : "--out",
                           USAGE);
  uint32_t wt;
  if (ts_qtype_parse(type, &wt) != TS_OK ||
      (wt != TS_QT_F32 && wt != TS_QT_F16 && wt != TS_QT_Q8_0 && wt != TS_QT_Q4_0 && wt != TS_QT_Q4_1))
    return cli_usage_error(CMD, "--type expects q8_0, q4_0, q4_1, f16 or f32, got '%s'", type);
  ts_llm_convert_report rep;
  ts_status s = ts_llm_convert(st, meta, wt, out, &rep);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (c.json) print_json(out, wt, &rep);
  else print_text(out, &rep);
  return CLI_OK;
}
