/* Shared between cmd_attn.c (options, `plan`, the planning steps) and cmd_attn_bench.c (`bench`). */
#ifndef TS_CMD_ATTN_H
#define TS_CMD_ATTN_H

#include <cjson/cJSON.h>

#include "cmd_reorder.h"
#include "tessera/attn_profile.h"
#include "tessera/attn_sched.h"
#include "tessera/attn_train.h"

#define CMD "attn"

typedef struct args {
  rcli_args r;
  bool bench, no_cache;
  bool cpu_clock;               /* bench --cpu-clock: time calls by the thread's CPU clock (1 thread) */
  long heads, d, batch, repeats, rounds;
  ts_attn_solver solver;
  double time_limit;
  bool bf16;
  bool profile;                 /* --cost profile */
  ts_attn_profile_level level;  /* --profile-level */
  bool calibrate;               /* --calibrate on|off */
  bool guard;                   /* --guard on|off */
  bool warm, warm_given;        /* bench --warm on|off (ts_attn_plan_set_warm) */
  ts_attn_pass pass;            /* --pass: what the profile, the calibration and the bench time (forward) */
  int32_t heights[4];           /* --compact: row heights of the compact passes (nheights 0: none) */
  int nheights;
  const char *out;
  cli_common_opts co;
} args;

/* Everything planning produces. */
typedef struct planned {
  rcli_input in;
  int32_t *perm;           /* [n] perm[new] = old */
  ts_reorder_stats rst;
  ts_csr pm;               /* permuted mask */
  ts_bitmap bo, bp;        /* original and permuted bitmaps */
  ts_blocks blk;
  ts_attn_schedule greedy, ilp;
  ts_attn_sched_info gi, ii;
  ts_attn_schedule ilp_fwd;   /* bench --pass backward|train: the schedule solved for the forward ("reuse as is") */
  ts_attn_sched_info fi;
  double reorder_ms, blocks_ms, solve_ms, greedy_ms;
  int threads, d;
  /* --cost profile: the model made from the profile, where the profile lives, whether this run
   * measured it, its date (part of the plan key: a re-measured profile is another cost model) */
  ts_attn_cost_model *model;
  char profile_path[4200], profile_date[32];
  bool profile_measured;
  double profile_ms;
} planned;

/* Scheduler options for the solver from the command line. */
ts_attn_sched_opts attn_cli_sched_opts(const args *A, const planned *P, ts_attn_solver solver);
/* --cost profile: the cached profile (measured when missing) and its cost model. CLI_OK or the exit code. */
int attn_cli_cost_setup(const args *A, planned *P);
/* JSON fields naming the cost model. */
void attn_cli_cost_json(cJSON *j, const args *A, const planned *P);
/* Loads the mask (square). CLI_OK or the exit code. */
int attn_cli_load_mask(args *A, planned *P);
/* Reorder, permute, extract blocks (the mask is loaded). */
int attn_cli_prepare(args *A, planned *P);
/* Scheduler figures of the greedy (g) and chosen (x) solves. */
void attn_cli_info_json(cJSON *j, const ts_attn_sched_info *g, const ts_attn_sched_info *x);
/* "8:12 16:28": panels running a compact pass of each row height ("none" when no panel does). */
void attn_cli_compact_heights(const ts_attn_schedule *s, char *buf, size_t cap);
/* `attn bench`. */
int attn_cli_bench(args *A, planned *P, const ts_context *ctx);

#endif
