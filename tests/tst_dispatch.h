/* Tests of a room's kernel variants against its reference (core/dispatch.h): tst_variant gives
 * variant i's table when this CPU runs it, and otherwise reports "SKIPPED (part): <room> <level>:
 * ..." (once per room and level; a skipped part in tst.h's count) and gives NULL, so a comparison
 * never runs the reference against itself in place of a level the CPU lacks, and a skipped level
 * is said, not counted as passed. The environment's TESSERA_ISA / TESSERA_REF do not apply: a
 * test checks every variant the CPU has. */
#ifndef TST_DISPATCH_H
#define TST_DISPATCH_H

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dispatch.h"
#include "tst.h"

static inline const void *tst_variant(const ts__dispatch *d, int i) {
  static struct {
    const ts__dispatch *d;
    ts__level lv;
  } said[64];
  static int nsaid;
  const ts__variant *v = &d->variants[i];
  if (ts__level_supported(v->level)) return v->table;
  for (int k = 0; k < nsaid; k++)
    if (said[k].d == d && said[k].lv == v->level) return NULL;
  if (nsaid < 64) said[nsaid].d = d, said[nsaid++].lv = v->level;
  char why[160];
  snprintf(why, sizeof why, "%s %s: this CPU lacks it, its comparisons with the reference did not run", d->room,
           ts__level_name(v->level));
#ifdef TST_SKIP_CODE /* tst.h's skipped parts: counted and reported as skipped */
  tst_skip_part(why);
#else
  printf("SKIPPED (part): %s\n", why);
#endif
  return NULL;
}

/* Every variant of d above the reference: for (i = 1; i < d->count; i++) with t its table (skipped,
 * and said, where the CPU lacks it). The body is the inner of two loops: `continue` moves on to the
 * next variant, and so does `break`. */
#define TST_EACH_VARIANT(d, i, T, t) \
  for (int i = 1; i < (d)->count; i++) \
    for (const T *t = (const T *)tst_variant((d), i); t; t = NULL)

/* Runs this test program again (/proc/self/exe with args, NULL-terminated) with the environment's
 * TESSERA_REF / TESSERA_ISA replaced by envset ("TESSERA_ISA=avx2", ...): the cap is read once per
 * process, so each setting needs its own. Returns the child's exit code, -1 if it did not run. */
static inline int tst_run_capped(const char *envset, char *const *args) {
  extern char **environ;
  char *argv[8] = {(char *)"/proc/self/exe"};
  for (int i = 0; args[i] && i < 6; i++) argv[i + 1] = args[i];
  int nenv = 0;
  while (environ[nenv]) nenv++;
  char **env = calloc((size_t)nenv + 2, sizeof *env);
  if (!env) return -1;
  int k = 0;
  for (int i = 0; i < nenv; i++)
    if (strncmp(environ[i], "TESSERA_REF=", 12) && strncmp(environ[i], "TESSERA_ISA=", 12)) env[k++] = environ[i];
  env[k++] = (char *)envset;
  pid_t pid;
  int st = -1;
  if (posix_spawn(&pid, argv[0], NULL, NULL, argv, env) == 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
    st = WEXITSTATUS(st);
  else
    st = -1;
  free(env);
  return st;
}

#endif
