/* tessera CLI: `tessera <command> [options]`; each command lives in cmd_<command>.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define TS_CMD(name, help) int cmd_##name(int argc, char **argv);
#include "commands.h"
#undef TS_CMD

static const struct { const char *name; int (*fn)(int, char **); const char *help; } commands[] = {
#define TS_CMD(name, help) {#name, cmd_##name, help},
#include "commands.h"
#undef TS_CMD
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f,
          "tessera %s: decide from measurements where computation can be skipped and how the rest is\n"
          "cut and placed, then run that decision with its own kernels.\n\n"
          "usage: tessera <command> [options]     (tessera <command> --help for its options)\n\n"
          "commands:\n",
          ts_version());
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f,
          "\ncommon options: --threads N, --json, --help\n"
          "environment: TESSERA_CACHE (profiles, plans), TESSERA_THREADS, TESSERA_REF=1 (reference\n"
          "kernels), TESSERA_ISA=scalar|avx2|avx512 (cap the kernel level), TESSERA_QUIET=1\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return CLI_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("tessera %s\n", ts_version());
    return CLI_OK;
  }
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "tessera: unknown command '%s' (see 'tessera --help')\n", argv[1]);
  return CLI_USAGE;
}
