/* tessera cache: list or clear the artifact store (machine profiles, cost tables, plans). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tessera/artifact.h"

static void usage(void) {
  printf("usage: tessera cache list [--kind K] [--json]\n"
         "       tessera cache clear [--kind K]\n\n"
         "The artifact store: everything tessera measured or planned and keeps, one JSON file per\n"
         "artifact in <cache>/<kind>/<key>.json (cache: $TESSERA_CACHE, default ~/.cache/tessera),\n"
         "bounded to $TESSERA_CACHE_MAX_MB (default 512) by removing the oldest. A file that cannot be\n"
         "read is moved aside as <key>.json.bad and made again; list shows it as bad.\n\n"
         "  list         every artifact: kind, key, format version, size, when and where it was made\n"
         "  clear        remove the artifacts (all kinds, or --kind K), files moved aside included\n"
         "  --kind K     only kind K (e.g. machine, attn-plan, conv-plan, gconv-plan, llm-wpf)\n"
         "  --json       list as a JSON array\n");
}

static void fmt_bytes(int64_t b, char *buf, size_t cap) {
  if (b >= (1 << 20)) snprintf(buf, cap, "%.1f MiB", (double)b / (1 << 20));
  else if (b >= (1 << 10)) snprintf(buf, cap, "%.1f KiB", (double)b / (1 << 10));
  else snprintf(buf, cap, "%lld B", (long long)b);
}

static int do_list(const char *kind, bool json) {
  ts_artifact_entry *e = NULL;
  int n = 0;
  ts_status s = ts_artifact_list(kind, &e, &n);
  if (s != TS_OK) return cli_fail("cache", s);
  char dir[4096];
  if (ts_cache_dir(dir, sizeof dir) != TS_OK) snprintf(dir, sizeof dir, "?");
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += e[i].bytes;
  if (json) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
      cJSON *o = cJSON_CreateObject();
      if (!o) break;
      cJSON_AddStringToObject(o, "kind", e[i].kind);
      cJSON_AddStringToObject(o, "key", e[i].key);
      if (e[i].version >= 0) cJSON_AddNumberToObject(o, "version", e[i].version);
      else cJSON_AddNullToObject(o, "version");
      cJSON_AddNumberToObject(o, "bytes", (double)e[i].bytes);
      cJSON_AddBoolToObject(o, "bad", e[i].bad);
      cJSON_AddStringToObject(o, "date", e[i].prov.date);
      cJSON_AddStringToObject(o, "cpu_model", e[i].prov.cpu_model);
      cJSON_AddStringToObject(o, "kernels", e[i].prov.kernels);
      cJSON_AddNumberToObject(o, "threads", e[i].prov.threads);
      cJSON_AddItemToArray(a, o);
    }
    free(e);
    if (!a) return cli_fail("cache", ts_error(TS_ERR_OOM, "cannot build the JSON output"));
    cli_print_json(a);
    return CLI_OK;
  }
  char tb[32], lb[32];
  fmt_bytes(total, tb, sizeof tb), fmt_bytes(ts_cache_limit(), lb, sizeof lb);
  printf("cache %s: %d artifact%s, %s of %s\n", dir, n, n == 1 ? "" : "s", tb, lb);
  if (n) printf("%-16s %-20s %4s %10s  %-20s %-8s %3s  %s\n", "kind", "key", "ver", "size", "made", "kernels", "thr", "cpu");
  for (int i = 0; i < n; i++) {
    char b[32], ver[16];
    fmt_bytes(e[i].bytes, b, sizeof b);
    if (e[i].version >= 0) snprintf(ver, sizeof ver, "%d", e[i].version);
    else snprintf(ver, sizeof ver, "-");
    printf("%-16s %-20s %4s %10s  %-20s %-8s %3d  %s%s\n", e[i].kind, e[i].key, ver, b,
           e[i].prov.date[0] ? e[i].prov.date : "-", e[i].prov.kernels[0] ? e[i].prov.kernels : "-", e[i].prov.threads,
           e[i].prov.cpu_model, e[i].bad ? " (bad: moved aside or unreadable)" : "");
  }
  free(e);
  return CLI_OK;
}

int cmd_cache(int argc, char **argv) {
  cli_common_opts o = {0};
  const char *sub = NULL, *kind = NULL;
  for (int i = 1; i < argc; i++) {
    const int r = cli_common("cache", argc, argv, &i, &o);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if (strcmp(argv[i], "--kind") == 0) {
      if (!(kind = cli_value("cache", argc, argv, &i))) return CLI_USAGE;
    } else if (argv[i][0] != '-' && !sub) {
      sub = argv[i];
    } else {
      return cli_usage_error("cache", "unknown option '%s'", argv[i]);
    }
  }
  if (o.help) {
    usage();
    return CLI_OK;
  }
  if (!sub) return cli_usage_error("cache", "expected 'list' or 'clear'");
  if (strcmp(sub, "list") == 0) return do_list(kind, o.json);
  if (strcmp(sub, "clear") == 0) {
    int removed = 0;
    const ts_status s = ts_artifact_clear(kind, &removed);
    if (s != TS_OK) return cli_fail("cache", s);
    printf("removed %d artifact%s%s%s\n", removed, removed == 1 ? "" : "s", kind ? " of kind " : "", kind ? kind : "");
    return CLI_OK;
  }
  return cli_usage_error("cache", "unknown subcommand '%s' (list, clear)", sub);
}
