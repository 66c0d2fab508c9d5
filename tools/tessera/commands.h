/* The CLI's subcommands: one X-macro line each, implemented as `int cmd_NAME(int argc, char **argv)`
 * in tools/tessera/cmd_NAME.c. The order here is the order `tessera --help` shows. */
TS_CMD(version, "print the version, the detected CPU and the active kernel level")
