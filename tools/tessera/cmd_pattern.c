/* tessera pattern SPEC: generate a sparsity pattern from a spec string, summarize it, and
 * optionally write it (.npy dense bool up to 16384 x 16384 cells' worth, .mtx at any size). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "tessera/io.h"
#include "tessera/sparse.h"

/* Dense .npy output holds rows*cols bytes in memory and on disk: capped at 16384^2 (256 MiB). */
#define NPY_MAX_CELLS (16384ll * 16384ll)

static void usage(void) {
  printf("usage: tessera pattern SPEC [--out FILE.npy|FILE.mtx] [--index FILE.npy] [--json]\n\n"
         "Generates the 0/1 pattern named by SPEC (rows = queries or output channels, cols = keys or\n"
         "input channels) and prints its kind, shape, nnz, density, row counts and grid.\n\n"
         "  --out FILE     write the pattern: .npy as a dense 2-D bool array (at most 16384 x 16384 =\n"
         "                 268435456 cells; larger patterns are refused, use .mtx), .mtx as a\n"
         "                 Matrix Market `coordinate pattern general` file (any size)\n"
         "  --index FILE   write the base index of each token as a 1-D int32 .npy (for permute: the\n"
         "                 permutation applied, perm[new] = old; for keep: the kept tokens)\n"
         "  --json         print the summary as JSON\n"
         "  --threads N    threads for the generators (default: TESSERA_THREADS / all CPUs)\n\n%s",
         ts_pattern_spec_help());
}

static bool has_ext(const char *path, const char *ext) {
  const char *dot = strrchr(path, '.');
  return dot && !strchr(dot, '/') && strcasecmp(dot, ext) == 0;
}

int cmd_pattern(int argc, char **argv) {
  cli_common_opts o = {0};
  const char *spec = NULL, *out = NULL, *index = NULL;
  for (int i = 1; i < argc; i++) {
    int r = cli_common("pattern", argc, argv, &i, &o);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if (strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "-o") == 0) {
      if (!(out = cli_value("pattern", argc, argv, &i))) return CLI_USAGE;
    } else if (strcmp(argv[i], "--index") == 0) {
      if (!(index = cli_value("pattern", argc, argv, &i))) return CLI_USAGE;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return cli_usage_error("pattern", "unknown option '%s'", argv[i]);
    } else if (spec) {
      return cli_usage_error("pattern", "one SPEC expected, got '%s' and '%s'", spec, argv[i]);
    } else {
      spec = argv[i];
    }
  }
  if (o.help) {
    usage();
    return CLI_OK;
  }
  if (!spec) return cli_usage_error("pattern", "missing SPEC (e.g. window2d:h=64,w=64,k=13)");
  if (out && !has_ext(out, ".npy") && !has_ext(out, ".mtx"))
    return cli_usage_error("pattern", "--out %s: expected a .npy or .mtx file name", out);
  if (index && !has_ext(index, ".npy")) return cli_usage_error("pattern", "--index %s: expected a .npy file name", index);
  cli_apply_threads(o.threads);

  ts_csr m;
  ts_pattern_info info;
  double t0 = ts_now();
  ts_status s = ts_pattern_generate(spec, &m, &info);
  double gen_s = ts_now() - t0;
  if (s == TS_ERR_INVALID_ARG || s == TS_ERR_OVERFLOW) return cli_usage_error("pattern", "%s", ts_last_error());
  if (s != TS_OK) return cli_fail("pattern", s);

  int rc = CLI_OK;
  if (out && has_ext(out, ".npy") && m.rows * m.cols > NPY_MAX_CELLS) {
    rc = cli_usage_error("pattern",
                         "%lld x %lld is too large for a dense .npy (limit %lld cells = 16384 x 16384); "
                         "write a .mtx file instead",
                         (long long)m.rows, (long long)m.cols, NPY_MAX_CELLS);
  } else if (out && (s = ts_pattern_save(out, &m)) != TS_OK) {
    rc = cli_fail("pattern", s);
  }
  if (rc == CLI_OK && index) {
    if (info.n <= 0) {
      rc = cli_usage_error("pattern", "--index: %s is a connectivity pattern, it has no tokens", info.kind);
    } else {
      int32_t *idx = info.base_index;
      if (!idx && (idx = ts_malloc((size_t)info.n * sizeof *idx)) != NULL) ts_perm_identity(idx, info.n);
      /* base_index lists distinct tokens; written as a permutation only when nothing was dropped. */
      if (!idx) s = TS_ERR_OOM;
      else if (info.n == info.base_n) s = ts_perm_write_npy(index, idx, info.n);
      else {
        ts_tensor t;
        int64_t n = info.n;
        s = ts_tensor_wrap(&t, TS_I32, 1, &n, idx);
        if (s == TS_OK) s = ts_npy_write(index, &t);
      }
      if (idx != info.base_index) ts_free(idx);
      if (s != TS_OK) rc = cli_fail("pattern", s);
    }
  }
  if (rc != CLI_OK) {
    ts_csr_free(&m);
    ts_pattern_info_free(&info);
    return rc;
  }

  int64_t rmin = m.rows ? INT64_MAX : 0, rmax = 0;
  for (int64_t i = 0; i < m.rows; i++) {
    int64_t c = m.rowptr[i + 1] - m.rowptr[i];
    if (c < rmin) rmin = c;
    if (c > rmax) rmax = c;
  }
  double cells = (double)m.rows * (double)m.cols;
  double density = cells > 0 ? (double)m.nnz / cells : 0, mean = m.rows ? (double)m.nnz / (double)m.rows : 0;
  if (o.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "spec", spec);
    cJSON_AddStringToObject(j, "kind", info.kind);
    cJSON_AddNumberToObject(j, "rows", (double)m.rows);
    cJSON_AddNumberToObject(j, "cols", (double)m.cols);
    cJSON_AddNumberToObject(j, "n", (double)info.n);
    cJSON_AddNumberToObject(j, "nnz", (double)m.nnz);
    cJSON_AddNumberToObject(j, "density", density);
    if (info.grid_h > 0) {
      cJSON *g = cJSON_AddObjectToObject(j, "grid");
      cJSON_AddNumberToObject(g, "h", (double)info.grid_h);
      cJSON_AddNumberToObject(g, "w", (double)info.grid_w);
    } else {
      cJSON_AddNullToObject(j, "grid");
    }
    cJSON_AddNumberToObject(j, "base_n", (double)info.base_n);
    cJSON_AddBoolToObject(j, "symmetric", info.symmetric);
    cJSON *rn = cJSON_AddObjectToObject(j, "row_nnz");
    cJSON_AddNumberToObject(rn, "min", (double)rmin);
    cJSON_AddNumberToObject(rn, "max", (double)rmax);
    cJSON_AddNumberToObject(rn, "mean", mean);
    cJSON_AddNumberToObject(j, "generate_s", gen_s);
    if (out) cJSON_AddStringToObject(j, "out", out);
    else cJSON_AddNullToObject(j, "out");
    if (index) cJSON_AddStringToObject(j, "index", index);
    cli_print_json(j);
  } else {
    printf("kind       %s\n", info.kind);
    printf("shape      %lld x %lld", (long long)m.rows, (long long)m.cols);
    if (info.n > 0) printf("  (%lld tokens)\n", (long long)info.n);
    else printf("  (cout x cin)\n");
    if (info.grid_h > 0) {
      printf("grid       %lld x %lld", (long long)info.grid_h, (long long)info.grid_w);
      if (info.n != info.grid_h * info.grid_w) printf("  (%lld of %lld tokens kept)", (long long)info.n, (long long)info.base_n);
      printf("\n");
    }
    printf("nnz        %lld\n", (long long)m.nnz);
    printf("density    %.6g\n", density);
    printf("row nnz    min %lld  mean %.2f  max %lld\n", (long long)rmin, mean, (long long)rmax);
    printf("symmetric  %s\n", info.symmetric ? "yes (by construction)" : "not guaranteed");
    printf("generated  in %.3f s\n", gen_s);
    if (out) printf("wrote      %s\n", out);
    if (index) printf("wrote      %s (base index of each token)\n", index);
  }
  ts_csr_free(&m);
  ts_pattern_info_free(&info);
  return CLI_OK;
}
