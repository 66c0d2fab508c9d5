/* tessera hwinfo: measure (or load) the machine profile every benchmark reports % of. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/artifact_internal.h"
#include "tessera/hwinfo.h"

static void usage(void) {
  printf("usage: tessera hwinfo [--json] [--threads N] [--no-save] [--cached] [--quick]\n\n"
         "Measures this machine: peak fp32 FMA GFLOP/s (1 thread and N threads), sustained read\n"
         "bandwidth (1 thread and N threads), cache sizes and ISA, in about 3 s, and saves the profile\n"
         "in the artifact store as machine/t<N>.json under the cache directory ($TESSERA_CACHE, default\n"
         "~/.cache/tessera), one per thread count N.\n\n"
         "  --threads N  threads for the all-thread figures (default: TESSERA_THREADS, OMP_NUM_THREADS\n"
         "               or all CPUs)\n"
         "  --cached     use the saved profile when it was measured on this CPU with the same\n"
         "               threads and kernel level; measure otherwise\n"
         "  --no-save    do not write the profile\n"
         "  --quick      shorter runs (about 0.5 s; rougher figures, saved like any other)\n"
         "  --json       print the profile as JSON (with profile_path, saved, source)\n");
}

static const char *human_bytes(int64_t b, char *buf, size_t cap) {
  if (b <= 0) snprintf(buf, cap, "unknown");
  else if (b % (1 << 20) == 0) snprintf(buf, cap, "%lld MiB", (long long)(b >> 20));
  else if (b % (1 << 10) == 0) snprintf(buf, cap, "%lld KiB", (long long)(b >> 10));
  else snprintf(buf, cap, "%lld B", (long long)b);
  return buf;
}

static void print_table(const ts_machine_profile *p, const char *path, const char *source, bool saved, double xfer) {
  char a[32], b[32], c[32];
  printf("cpu        %s (%s)\n", p->cpu_model, p->vendor[0] ? p->vendor : "unknown vendor");
  printf("isa        %s\n", p->isa);
  printf("kernels    %s (peak from the %s FMA loop)\n", p->kernels, p->peak_isa[0] ? p->peak_isa : "?");
  printf("threads    %d\n", p->threads);
  printf("caches     L1d %s, L2 %s, L3 %s\n", human_bytes(p->l1d_bytes, a, sizeof a),
         human_bytes(p->l2_bytes, b, sizeof b), human_bytes(p->l3_bytes, c, sizeof c));
  printf("peak fp32  %8.1f GFLOP/s 1 thread   %8.1f GFLOP/s %d threads\n", p->peak_gflops_fp32_1t,
         p->peak_gflops_fp32, p->threads);
  printf("bandwidth  %8.1f GB/s    1 thread   %8.1f GB/s    %d threads (sustained read", p->bandwidth_gbs_1t,
         p->bandwidth_gbs, p->threads);
  if (p->xfer_ns > 0) printf("; threads %.0f ns apart", p->xfer_ns);
  printf(")\n");
  if (xfer > 0)
    printf("line xfer  %8.0f ns between 2 threads now (%s; not saved)\n", xfer,
           ts_hwinfo_xfer_shared(xfer) > 0 ? "one shared cache" : ts_hwinfo_xfer_shared(xfer) < 0 ? "apart: no shared cache" : "unclear");
  printf("measured   %s on %s", p->date, p->host[0] ? p->host : "unknown host");
  if (p->load_avg >= 0 && p->cpus_online > 0) printf(" at load average %.2f on %d CPUs", p->load_avg, p->cpus_online);
  if (p->other_cpus >= 0) printf(", other processes %.2f CPUs", p->other_cpus);
  if (ts_hwinfo_busy(p)) printf(" (busy: figures may read low; re-measured when quiet)");
  printf("\n");
  printf("profile    %s (%s%s)\n", path, source, saved ? ", saved" : ", not saved");
}

int cmd_hwinfo(int argc, char **argv) {
  cli_common_opts o = {0};
  bool no_save = false, cached = false, quick = false;
  for (int i = 1; i < argc; i++) {
    int r = cli_common("hwinfo", argc, argv, &i, &o);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if (strcmp(argv[i], "--no-save") == 0) no_save = true;
    else if (strcmp(argv[i], "--cached") == 0) cached = true;
    else if (strcmp(argv[i], "--quick") == 0) quick = true;
    else return cli_usage_error("hwinfo", "unknown option '%s'", argv[i]);
  }
  if (o.help) {
    usage();
    return CLI_OK;
  }

  ts_context *ctx;
  ts_status s = ts_context_create(&ctx, o.threads);
  if (s != TS_OK) return cli_fail("hwinfo", s);
  char path[4400]; /* the store's machine/t<N>.json */
  s = ts_hwinfo_path_threads(ts_context_threads(ctx), path, sizeof path);
  if (s != TS_OK) {
    ts_context_destroy(ctx);
    return cli_fail("hwinfo", s);
  }

  ts_machine_profile p;
  const char *source = "measured";
  bool saved = false, have = false;
  if (cached) {
    s = ts_hwinfo_load(path, &p);
    if (s == TS_OK && ts_hwinfo_matches(&p, ts_context_threads(ctx))) {
      have = true;
      source = "cached";
      saved = true;
    } else if (s != TS_OK && s != TS_ERR_NOT_FOUND) {
      fprintf(stderr, "tessera hwinfo: ignoring the cached profile: %s: %s\n", ts_strerror(s), ts_last_error());
    }
  }
  if (!have) {
    ts_hwinfo_opts mo = ts_hwinfo_opts_default();
    if (quick) {
      mo.duration_s = 0.04;
      mo.runs = 2;
    }
    s = ts_hwinfo_measure_opts(ctx, &mo, &p);
    /* Figures measured while other work ran read low. Saved over a matching profile they would
     * lower every later "% of peak" denominator, so they only raise its figures (the saved
     * profile's higher ones are kept), as a re-measurement on a quiet machine would. */
    ts_machine_profile old;
    if (s == TS_OK && ts_hwinfo_busy(&p) && ts_hwinfo_load(path, &old) == TS_OK &&
        ts_hwinfo_matches(&old, ts_context_threads(ctx))) {
      ts_hwinfo_merge_max(&p, &old);
      char why[96];
      if (p.other_cpus >= 0) snprintf(why, sizeof why, "while other processes used %.2f of %d CPUs", p.other_cpus, p.cpus_online);
      else snprintf(why, sizeof why, "at load average %.2f on %d CPUs", p.load_avg, p.cpus_online);
      fprintf(stderr, "tessera hwinfo: measured %s: the higher figures of the profile measured %s are kept\n", why,
              old.date);
    }
    ts_error_clear();
    if (s == TS_OK && !no_save) {
      s = ts_hwinfo_save(&p, path);
      saved = s == TS_OK;
    }
  }
  const bool team = ts_context_threads(ctx) > 1;
  ts_context_destroy(ctx);
  if (s != TS_OK) return cli_fail("hwinfo", s);
  /* where the threads sit now (it moves on a VM, and the bandwidth of all threads with it) */
  double xfer = 0;
  if (team && ts_hwinfo_xfer_ns(&xfer) != TS_OK) {
    xfer = 0;
    ts_error_clear();
  }

  if (o.json) {
    cJSON *j = ts__hwinfo_to_cjson(&p);
    if (!j) return cli_fail("hwinfo", ts_error(TS_ERR_OOM, "cannot build the JSON output"));
    cJSON_AddStringToObject(j, "profile_path", path);
    cJSON_AddBoolToObject(j, "saved", saved);
    cJSON_AddStringToObject(j, "source", source);
    if (xfer > 0) cJSON_AddNumberToObject(j, "xfer_ns_now", xfer);
    cli_print_json(j);
  } else {
    print_table(&p, path, source, saved, xfer);
  }
  return CLI_OK;
}
