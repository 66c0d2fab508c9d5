/* tessera hybrid: CPU-accelerator hybrid MapReduce scheduling (Hybrid Hadoop) on a local engine or
 * on Apache Spark.
 *   hybrid run     one job under a mode: makespan, busy time per class, role changes, tail gap,
 *                  the oracle split, an SVG timeline
 *   hybrid task    one Spark task (run by tools/hybrid/spark_job.py inside Spark's executors)
 *   hybrid device  the device model a run uses (JSON); --store FILE keeps a measured one */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/artifact_internal.h"
#include "hybrid/hybrid_internal.h"
#include "io/json_internal.h"
#include "tessera/hybrid.h"

#define CMD "hybrid"

static void usage(void) {
  printf("usage: tessera hybrid run --job NAME --input PATH|gen:... [--engine local|spark]\n"
         "                          [--mode auto|cpu|gpu|static:K] [--blocks N] [--rounds R] [--repeat R]\n"
         "                          [--pattern S] [--slots S] [--cores C] [--device FILE] [--tenant T0:T1:SHARE,...]\n"
         "                          [--work DIR] [--fresh] [--svg F.svg] [--out F.json] [--quiet] [--json]\n"
         "                          [--spark-master URL] [--spark-python PY] [--spark-driver PY] [--dynamic-allocation]\n"
         "       tessera hybrid task --connect HOST:PORT --work DIR --block I [--round R] [--slot NAME]\n"
         "       tessera hybrid device [--device FILE] [--store FILE]\n\n"
         "Runs a MapReduce job on a fixed pool of containers shared by CPU map tasks and tasks that feed an\n"
         "accelerator (Hybrid Hadoop, HPC Asia'21): the controller picks the mode and how many containers feed\n"
         "the device from a probe, moves containers between the roles from a device monitor, and splits the\n"
         "tail so both classes finish together. Without a GPU the device is modelled (curves from\n"
         "scripts/gpu-check.sh when it has run on one, else a datasheet model) and every report says so.\n\n"
         "  --job NAME        wordcount, grep (text input: a file), kmeans (gen:points=N,d=D,k=K,seed=S),\n"
         "                    gemm (gen:records=N,in=K,out=M,seed=S[,batches=B1/B2/..]: batched dense layer)\n"
         "  --engine E        local (threads as containers, default) | spark (a running standalone master:\n"
         "                    scripts/spark-cluster.sh start)\n"
         "  --mode M          auto (default) | cpu | gpu | static:K (K containers feed the device, no monitor)\n"
         "  --blocks N        tasks per round (text: 2 MiB blocks; generated: 32)\n"
         "  --rounds R        kmeans iterations (5)       --repeat R   text input repeated R times\n"
         "  --slots S         containers (= cores)        --cores C    cores the CPU tasks use (online CPUs)\n"
         "  --tenant SPEC     a co-tenant takes SHARE of the device's compute from T0 to T1 s after the start\n"
         "  --work DIR        reference pass and results (a directory under /tmp by default; reused when the\n"
         "                    job is the same; --fresh runs the reference pass again)\n"
         "  --svg F           the timeline                --out F      the report (JSON) to a file\n");
}

static ts_status parse_mode(const char *v, ts_hybrid_mode *m, int *k) {
  *k = 0;
  if (!strcmp(v, "auto")) *m = TS_HYBRID_MODE_AUTO;
  else if (!strcmp(v, "cpu")) *m = TS_HYBRID_MODE_CPU;
  else if (!strcmp(v, "gpu")) *m = TS_HYBRID_MODE_GPU;
  else if (!strncmp(v, "static:", 7)) {
    char *e;
    long x = strtol(v + 7, &e, 10);
    if (e == v + 7 || *e || x < 0 || x > 256) return ts_error(TS_ERR_INVALID_ARG, "--mode '%s': static:K with K in 0..256", v);
    *m = TS_HYBRID_MODE_STATIC;
    *k = (int)x;
  } else
    return ts_error(TS_ERR_INVALID_ARG, "--mode '%s': auto, cpu, gpu or static:K", v);
  return TS_OK;
}

static int write_file(const char *path, const char *text) {
  ts_status s = ts_write_file_atomic(path, text, strlen(text));
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

static int cmd_run(int argc, char **argv) {
  ts_hybrid_job_opts jo = {0};
  ts_hybrid_run_opts ro = {0};
  ts_hybrid_spark_opts so = {0};
  const char *job = NULL, *engine = "local", *svg_path = NULL, *out_path = NULL;
  bool fresh = false;
  cli_common_opts co = {0};
  for (int i = 2; i < argc; i++) {
    int c = cli_common(CMD, argc, argv, &i, &co);
    if (c < 0) return CLI_USAGE;
    if (c > 0) continue;
    const char *a = argv[i];
    if (!strcmp(a, "--quiet")) {
      ro.quiet = true;
      continue;
    }
    if (!strcmp(a, "--dynamic-allocation")) {
      so.dynamic_allocation = true;
      continue;
    }
    if (!strcmp(a, "--fresh")) {
      fresh = true;
      continue;
    }
    const char *v = cli_value(CMD, argc, argv, &i);
    if (!v) return CLI_USAGE;
    long x;
    if (!strcmp(a, "--job")) job = v;
    else if (!strcmp(a, "--input")) jo.input = v;
    else if (!strcmp(a, "--engine")) engine = v;
    else if (!strcmp(a, "--mode")) {
      ts_status s = parse_mode(v, &ro.mode, &ro.static_k);
      if (s != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
    } else if (!strcmp(a, "--blocks")) {
      if (!cli_parse_int(CMD, a, v, 1, 100000, &x)) return CLI_USAGE;
      jo.blocks = (int)x;
    } else if (!strcmp(a, "--rounds")) {
      if (!cli_parse_int(CMD, a, v, 1, 64, &x)) return CLI_USAGE;
      jo.rounds = (int)x;
    } else if (!strcmp(a, "--repeat")) {
      if (!cli_parse_int(CMD, a, v, 1, 100000, &x)) return CLI_USAGE;
      jo.repeat = (int)x;
    } else if (!strcmp(a, "--slots")) {
      if (!cli_parse_int(CMD, a, v, 1, 256, &x)) return CLI_USAGE;
      ro.slots = (int)x;
    } else if (!strcmp(a, "--cores")) {
      if (!cli_parse_int(CMD, a, v, 1, 256, &x)) return CLI_USAGE;
      ro.cores = (int)x;
    } else if (!strcmp(a, "--pattern")) jo.pattern = v;
    else if (!strcmp(a, "--device")) ro.device_path = v;
    else if (!strcmp(a, "--tenant")) ro.tenant = v;
    else if (!strcmp(a, "--work")) ro.work_dir = v;
    else if (!strcmp(a, "--svg")) svg_path = v;
    else if (!strcmp(a, "--out")) out_path = v;
    else if (!strcmp(a, "--spark-master")) so.master = v;
    else if (!strcmp(a, "--spark-python")) so.python = v;
    else if (!strcmp(a, "--spark-driver")) so.driver = v;
    else return cli_usage_error(CMD, "unknown option '%s' (--help)", a);
  }
  if (co.help) return usage(), CLI_OK;
  if (!job) return cli_usage_error(CMD, "run: --job is required (wordcount, grep, kmeans, gemm)");
  if (!jo.input) return cli_usage_error(CMD, "run: --input is required");
  if (ts_hybrid_job_parse(job, &jo.kind) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
  if (strcmp(engine, "local") && strcmp(engine, "spark")) return cli_usage_error(CMD, "--engine '%s': local or spark", engine);
  ts_hybrid_tenant ten[TS_HYBRID_MAX_TENANT];
  int nten;
  if (ts_hybrid_tenant_parse(ro.tenant, ten, &nten) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
  ts_hybrid_job *j = NULL;
  ts_status s = ts_hybrid_job_open(&jo, &j);
  if (s != TS_OK) return cli_fail(CMD, s);
  char work[4096];
  if (!ro.work_dir) { /* one directory per job, so a rerun reuses the reference pass */
    char *jj = NULL;
    s = ts__hybrid_job_to_json(j, &jj);
    if (s != TS_OK) {
      ts_hybrid_job_close(j);
      return cli_fail(CMD, s);
    }
    ts_hash h;
    char hex[17];
    ts_hash_init(&h, "hybrid-work");
    ts_hash_str(&h, jj);
    ts_hash_hex(&h, hex);
    free(jj);
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/tessera-hybrid-%s-%s", tmp && *tmp ? tmp : "/tmp", job, hex);
    ro.work_dir = work;
  }
  if (fresh) { /* the reference pass again (its timings are the probe's and the oracle's) */
    char p[4200];
    snprintf(p, sizeof p, "%s/prepare.json", ro.work_dir);
    remove(p);
  }
  char *report = NULL, *svg = NULL;
  s = !strcmp(engine, "spark") ? ts_hybrid_run_spark(j, &ro, &so, &report, svg_path ? &svg : NULL)
                               : ts_hybrid_run_local(j, &ro, &report, svg_path ? &svg : NULL);
  ts_hybrid_job_close(j);
  if (s != TS_OK) return cli_fail(CMD, s);
  int rc = CLI_OK;
  if (svg_path && svg) rc = write_file(svg_path, svg);
  if (rc == CLI_OK && out_path) rc = write_file(out_path, report);
  if (rc == CLI_OK) {
    cJSON *o = NULL;
    if (ts__json_read_mem(report, strlen(report), "report", &o) != TS_OK) rc = cli_fail(CMD, TS_ERR_INTERNAL);
    else if (co.json) cli_print_json(o);
    else {
      const cJSON *orc = cJSON_GetObjectItem(o, "oracle"), *tl = cJSON_GetObjectItem(o, "tail"),
                  *in = cJSON_GetObjectItem(o, "initial"), *tk = cJSON_GetObjectItem(o, "tasks");
      printf("%s on %s, mode %s (modelled device: %s)\n", job, engine, cJSON_GetObjectItem(o, "mode")->valuestring,
             cJSON_GetObjectItem(cJSON_GetObjectItem(o, "device"), "name")->valuestring);
      printf("  initial decision   %s, %d of %d containers feed the device\n",
             cJSON_GetObjectItem(in, "mode")->valuestring, cJSON_GetObjectItem(in, "device_containers")->valueint,
             cJSON_GetObjectItem(o, "slots")->valueint);
      printf("  makespan           %.3f s   (oracle split %.3f s: %.2fx of it)\n",
             cJSON_GetObjectItem(o, "makespan_s")->valuedouble, cJSON_GetObjectItem(orc, "makespan_s")->valuedouble,
             cJSON_GetObjectItem(orc, "ratio")->valuedouble);
      printf("  tasks              %d cpu, %d device, %d split; %d role changes\n",
             cJSON_GetObjectItem(tk, "cpu")->valueint, cJSON_GetObjectItem(tk, "dev")->valueint,
             cJSON_GetObjectItem(tk, "split")->valueint, cJSON_GetArraySize(cJSON_GetObjectItem(o, "reassignments")));
      printf("  tail gap           %.3f s (%.1f%% of the last round)\n", cJSON_GetObjectItem(tl, "gap_s")->valuedouble,
             100 * cJSON_GetObjectItem(tl, "gap_frac")->valuedouble);
      printf("  output             %s: %s\n", cJSON_IsTrue(cJSON_GetObjectItem(o, "output_ok")) ? "ok" : "WRONG",
             cJSON_GetObjectItem(o, "output_note")->valuestring);
      cJSON_Delete(o);
    }
  }
  free(report);
  free(svg);
  return rc;
}

static int cmd_task(int argc, char **argv) {
  const char *connect = NULL, *work = NULL, *slot = "";
  long block = -1, round = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(), CLI_OK;
    const char *v = cli_value(CMD, argc, argv, &i);
    if (!v) return CLI_USAGE;
    if (!strcmp(a, "--connect")) connect = v;
    else if (!strcmp(a, "--work")) work = v;
    else if (!strcmp(a, "--slot")) slot = v;
    else if (!strcmp(a, "--block")) {
      if (!cli_parse_int(CMD, a, v, 0, 100000, &block)) return CLI_USAGE;
    } else if (!strcmp(a, "--round")) {
      if (!cli_parse_int(CMD, a, v, 0, 63, &round)) return CLI_USAGE;
    } else
      return cli_usage_error(CMD, "unknown option '%s' (--help)", a);
  }
  if (!connect || !work || block < 0) return cli_usage_error(CMD, "task: --connect, --work and --block are required");
  ts_status s = ts_hybrid_task_run(connect, work, (int)round, (int)block, slot, stdout);
  if (s == TS_OK && fflush(stdout) != 0) s = ts_error(TS_ERR_IO, "stdout: write failed");
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

static int cmd_device(int argc, char **argv) {
  const char *path = NULL, *store = NULL;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(), CLI_OK;
    const char *v = cli_value(CMD, argc, argv, &i);
    if (!v) return CLI_USAGE;
    if (!strcmp(a, "--device")) path = v;
    else if (!strcmp(a, "--store")) store = v;
    else return cli_usage_error(CMD, "unknown option '%s' (--help)", a);
  }
  ts_hybrid_device_model m;
  ts_status s = ts_hybrid_device_load(store ? store : path, &m);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (store) { /* a measured model (scripts/gpu-check.sh) into the artifact store, keyed by its name */
    if (!m.measured) return cli_usage_error(CMD, "--store: '%s' says measured: false (only measured curves are kept)", store);
    char *js = NULL;
    cJSON *data = NULL;
    s = ts_hybrid_device_to_json(&m, &js);
    if (s == TS_OK) s = ts__json_read_mem(js, strlen(js), "device", &data);
    ts_hash h;
    char key[17];
    ts_hash_init(&h, "hybrid-device");
    ts_hash_str(&h, m.name);
    ts_hash_hex(&h, key);
    ts_provenance p;
    ts_provenance_here(&p, ts_isa_active(), 0);
    if (s == TS_OK) s = ts__artifact_store(&ts__hybrid_device_kind, key, data, &p);
    cJSON_Delete(data);
    free(js);
    if (s != TS_OK) return cli_fail(CMD, s);
    printf("stored the device model '%s' (hybrid-device/%s)\n", m.name, key);
    return CLI_OK;
  }
  char *js = NULL;
  s = ts_hybrid_device_to_json(&m, &js);
  if (s != TS_OK) return cli_fail(CMD, s);
  printf("%s\n", js);
  free(js);
  return CLI_OK;
}

int cmd_hybrid(int argc, char **argv) {
  if (argc < 2) return cli_usage_error(CMD, "missing subcommand (run, task, device; --help)");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(), CLI_OK;
  if (!strcmp(argv[1], "run")) return cmd_run(argc, argv);
  if (!strcmp(argv[1], "task")) return cmd_task(argc, argv);
  if (!strcmp(argv[1], "device")) return cmd_device(argc, argv);
  return cli_usage_error(CMD, "unknown subcommand '%s' (run, task, device)", argv[1]);
}
