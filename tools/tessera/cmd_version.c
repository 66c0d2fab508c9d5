/* tessera version: what this build is and which kernels it will run here. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_version(int argc, char **argv) {
  cli_common_opts o = {0};
  for (int i = 1; i < argc; i++) {
    int r = cli_common("version", argc, argv, &i, &o);
    if (r < 0) return CLI_USAGE;
    if (r == 0) return cli_usage_error("version", "unknown option '%s'", argv[i]);
  }
  if (o.help) {
    printf("usage: tessera version [--json]\n\nPrints the tessera version, the CPU model, the detected ISA extensions and\n"
           "the kernel level the dispatch tables use (TESSERA_REF / TESSERA_ISA change it).\n");
    return CLI_OK;
  }
  const ts_cpu_features *f = ts_cpu();
  const char *isa[32];
  int n = ts_cpu_isa_list(isa, 32);
  if (o.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", ts_version());
    cJSON_AddStringToObject(j, "cpu", f->model);
    cJSON_AddItemToObject(j, "isa", cJSON_CreateStringArray(isa, n));
    cJSON_AddStringToObject(j, "kernels", ts_isa_name(ts_isa_active()));
    cli_print_json(j);
    return CLI_OK;
  }
  printf("tessera %s\ncpu      %s\nisa     ", ts_version(), f->model);
  for (int i = 0; i < n; i++) printf(" %s", isa[i]);
  printf("\nkernels  %s\n", ts_isa_name(ts_isa_active()));
  return CLI_OK;
}
