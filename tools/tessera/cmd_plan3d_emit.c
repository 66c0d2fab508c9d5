/* tessera plan3d emit PLAN.json --out DIR: the launch files of a plan (Megatron-LM arguments and
 * config, DeepSpeed config and partition, torchrun script). Called by cmd_plan3d.c with argv[0] =
 * "emit". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tessera/plan3d.h"

#define CMD "plan3d emit"

int ts__cmd_plan3d_emit(int argc, char **argv);

static void usage(void) {
  printf("usage: tessera plan3d emit PLAN.json --out DIR [--only GROUPS] [--gpus-per-node TYPE=N,...] [--json]\n\n"
         "Writes the files that run a plan (from 'tessera plan3d search' or 'estimate') with real engines:\n"
         "  megatron   megatron_args.sh (bash array MEGATRON_ARGS for pretrain_gpt.py, the split as\n"
         "             --pipeline-model-parallel-layout, Megatron-Core >= " TS_P3_MEGATRON_CORE_MIN ") and\n"
         "             megatron_config.json (TransformerConfig keyword arguments)\n"
         "  deepspeed  deepspeed_config.json and deepspeed_partition.json (explicit PipelineModule 'parts')\n"
         "  torchrun   torchrun.sh: one command per node in the plan's node order (static rendezvous)\n"
         "Each file is written atomically; a plan the engines cannot run (a TP degree per GPU type, batch\n"
         "sizes that do not multiply out) writes nothing and says why. docs/notes/plan3d-engines.md.\n\n"
         "  --out DIR             output directory (created if missing)\n"
         "  --only GROUPS         comma-separated subset of megatron,deepspeed,torchrun (default: all)\n"
         "  --gpus-per-node LIST  TYPE=N per node type (the plan's type names), when the plan's stages do\n"
         "                        not fix them (torchrun.sh only)\n"
         "  --json                print the files written as JSON\n");
}

static int parse_only(const char *v, int *what) {
  *what = 0;
  const char *p = v;
  while (*p) {
    const char *e = strchr(p, ',');
    const size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 8 && strncmp(p, "megatron", n) == 0) *what |= TS_P3_EMIT_MEGATRON;
    else if (n == 9 && strncmp(p, "deepspeed", n) == 0) *what |= TS_P3_EMIT_DEEPSPEED;
    else if (n == 8 && strncmp(p, "torchrun", n) == 0) *what |= TS_P3_EMIT_TORCHRUN;
    else return cli_usage_error(CMD, "--only: unknown group '%.*s' (megatron, deepspeed, torchrun)", (int)n, p);
    p += n;
    if (*p == ',') p++;
  }
  if (!*what) return cli_usage_error(CMD, "--only: no group given (megatron, deepspeed, torchrun)");
  return CLI_OK;
}

/* "TYPE=N,TYPE=N" against the plan's type names. */
static int parse_gpn(const char *v, const ts_p3_plan *plan, ts_p3_emit_opts *o) {
  char *copy = strdup(v);
  if (!copy) return cli_fail(CMD, ts_error(TS_ERR_OOM, "out of memory"));
  int rc = CLI_OK;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && rc == CLI_OK; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strrchr(tok, '=');
    if (!eq) {
      rc = cli_usage_error(CMD, "--gpus-per-node: '%s' is not TYPE=N", tok);
      break;
    }
    *eq = '\0';
    int t = -1;
    for (int i = 0; i < plan->ntypes && i < TS_P3_MAX_TYPES; i++)
      if (strcmp(plan->type_name[i], tok) == 0) t = i;
    if (t < 0) {
      rc = cli_usage_error(CMD, "--gpus-per-node: the plan has no node type '%s'", tok);
      break;
    }
    long n;
    if (!cli_parse_int(CMD, "--gpus-per-node", eq + 1, 1, 1 << 16, &n)) {
      rc = CLI_USAGE;
      break;
    }
    o->gpus_per_node[t] = (int)n;
  }
  free(copy);
  return rc;
}

int ts__cmd_plan3d_emit(int argc, char **argv) {
  cli_common_opts co = {0};
  const char *plan_path = NULL, *out = NULL, *gpn = NULL;
  int what = TS_P3_EMIT_ALL;
  for (int i = 1; i < argc; i++) {
    const int r = cli_common(CMD, argc, argv, &i, &co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if (strcmp(argv[i], "--out") == 0) {
      if (!(out = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(argv[i], "--only") == 0) {
      const char *v = cli_value(CMD, argc, argv, &i);
      if (!v) return CLI_USAGE;
      const int rc = parse_only(v, &what);
      if (rc != CLI_OK) return rc;
    } else if (strcmp(argv[i], "--gpus-per-node") == 0) {
      if (!(gpn = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
    } else if (argv[i][0] != '-' && !plan_path) {
      plan_path = argv[i];
    } else {
      return cli_usage_error(CMD, "unknown option '%s'", argv[i]);
    }
  }
  if (co.help) {
    usage();
    return CLI_OK;
  }
  if (!plan_path) return cli_usage_error(CMD, "expected a plan file (PLAN.json)");
  if (!out) return cli_usage_error(CMD, "expected --out DIR");

  char *json = NULL;
  size_t len = 0;
  ts_status s = ts_read_file(plan_path, &json, &len);
  if (s != TS_OK) return cli_fail(CMD, s);
  ts_p3_plan *plan = calloc(1, sizeof *plan);
  if (!plan) {
    free(json);
    return cli_fail(CMD, ts_error(TS_ERR_OOM, "out of memory"));
  }
  s = ts_p3_plan_from_json(json, plan_path, plan);
  free(json);
  if (s != TS_OK) {
    free(plan);
    return cli_fail(CMD, s);
  }
  ts_p3_emit_opts o;
  memset(&o, 0, sizeof o);
  if (gpn) {
    const int rc = parse_gpn(gpn, plan, &o);
    if (rc != CLI_OK) {
      free(plan);
      return rc;
    }
  }
  char *written = NULL;
  s = ts_p3_emit_dir(plan, &o, out, what, &written);
  free(plan);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (co.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON *files = j ? cJSON_AddArrayToObject(j, "files") : NULL;
    bool ok = files != NULL;
    for (char *line = written, *nl; ok && line && *line; line = nl + 1) {
      nl = strchr(line, '\n');
      if (!nl) break;
      *nl = '\0';
      ok = cJSON_AddItemToArray(files, cJSON_CreateString(line));
    }
    free(written);
    if (!ok) {
      cJSON_Delete(j);
      return cli_fail(CMD, ts_error(TS_ERR_OOM, "cannot build the JSON output"));
    }
    cli_print_json(j);
  } else {
    for (char *line = written, *nl; line && *line; line = nl + 1) {
      nl = strchr(line, '\n');
      if (!nl) break;
      *nl = '\0';
      printf("wrote %s\n", line);
    }
    free(written);
  }
  return CLI_OK;
}
