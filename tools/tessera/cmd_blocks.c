/* tessera blocks: cover a (reordered) pattern with dense blocks plus a residue and report the
 * blocks, their densities and the fill ratio; optionally write the block list as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_reorder.h"
#include "io/json_internal.h"

#define CMD "blocks"

static void usage(void) {
  printf("usage: tessera blocks (--in FILE | --pattern SPEC) [--perm perm.npy [--col-perm cperm.npy]]\n"
         "                      [--method M] [--density RHO] [--tile T] [--extract greedy|dp]\n"
         "                      [--out blocks.json] [options] [--json]\n\n"
         "Covers every nonzero of the pattern -- relabelled by --perm, or reordered by --method first --\n"
         "exactly once: by disjoint rectangular blocks of density >= RHO, or by the residue (the\n"
         "nonzeros in no block). greedy grows rectangles from seeds; dp cuts the rows optimally into\n"
         "groups whose column runs become blocks when that is cheaper than leaving them sparse.\n"
         "Reports blocks, fill ratio (computed cells + residue) / nnz, the block density histogram and\n"
         "the T x T tile counts before and after the relabelling.\n\n"
         "  --perm FILE      permutation (1-D .npy, perm[new] = old) for the rows, and for the columns\n"
         "                   too when the pattern is square and --col-perm is absent\n"
         "  --col-perm FILE  column permutation\n"
         "  --out FILE       write the blocks as JSON: {\"blocks\": [[row0, col0, rows, cols, nnz], ...]}\n"
         "  --json           print the report as JSON\n"
         "  --threads N      threads (the dp extraction and generators)\n\n"
         "defaults here: --method none, --tile 64\n%s",
         rcli_options_help());
}

/* Reads a permutation into a malloc'd array (*perm), checking its length. */
static int read_perm(const char *path, int64_t n, const char *what, int32_t **perm) {
  int64_t len;
  int32_t *p;
  ts_status s = ts_perm_read_npy(path, &p, &len);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (len != n) {
    ts_free(p);
    return cli_usage_error(CMD, "%s %s has %lld entries, the pattern has %lld %s", what, path, (long long)len,
                           (long long)n, what[0] == 'c' ? "columns" : "rows");
  }
  *perm = malloc(((size_t)n + 1) * sizeof **perm);
  if (*perm) memcpy(*perm, p, (size_t)n * sizeof **perm);
  ts_free(p);
  if (!*perm) return cli_fail(CMD, ts_error(TS_ERR_OOM, "permutation of %lld", (long long)n));
  return CLI_OK;
}

static ts_status write_blocks(const char *path, const ts_blocks *b, const ts_blocks_opts *bo) {
  cJSON *j = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(j, "blocks");
  cJSON_AddNumberToObject(j, "rows", (double)b->rows);
  cJSON_AddNumberToObject(j, "cols", (double)b->cols);
  cJSON_AddNumberToObject(j, "nnz", (double)b->nnz);
  cJSON_AddStringToObject(j, "extract", ts_extract_method_name(bo->method));
  cJSON_AddNumberToObject(j, "density", bo->rho);
  cJSON_AddNumberToObject(j, "residue_nnz", (double)b->residue.nnz);
  for (int64_t k = 0; k < b->nblocks; k++) {
    const ts_block *x = &b->blocks[k];
    double v[5] = {x->row0, x->col0, x->rows, x->cols, (double)x->nnz};
    cJSON_AddItemToArray(list, cJSON_CreateDoubleArray(v, 5));
  }
  ts_status s = ts__json_write_file(path, j);
  cJSON_Delete(j);
  return s;
}

int cmd_blocks(int argc, char **argv) {
  cli_common_opts co = {0};
  rcli_args a;
  rcli_defaults(&a, TS_REORDER_NONE, 64);
  const char *perm_path = NULL, *cperm_path = NULL, *out = NULL;
  const rcli_str_opt own[] = {{"--perm", NULL, &perm_path}, {"--col-perm", NULL, &cperm_path}, {"--out", "-o", &out}};
  if (rcli_parse(CMD, argc, argv, &co, &a, own, 3) != CLI_OK) return CLI_USAGE;
  if (co.help) {
    usage();
    return CLI_OK;
  }
  if ((perm_path || cperm_path) && a.method_given && a.ro.method != TS_REORDER_NONE)
    return cli_usage_error(CMD, "give --perm or --method, not both");
  cli_apply_threads(co.threads);
  rcli_input in;
  int rc = rcli_load(CMD, &a, &in);
  if (rc != CLI_OK) return rc;
  int32_t *rp = NULL, *cp = NULL;
  ts_reorder_stats st = {.method = TS_REORDER_NONE};
  for (int k = 0; k < TS_REORDER_METHOD_COUNT; k++) st.auto_tiles[k] = -1;
  rcli_result R = {0};
  ts_status s;
  if (perm_path || cperm_path) {
    if (perm_path && (rc = read_perm(perm_path, in.m.rows, "row permutation", &rp)) != CLI_OK) goto done;
    if (cperm_path && (rc = read_perm(cperm_path, in.m.cols, "column permutation", &cp)) != CLI_OK) goto done;
    if (perm_path && !cperm_path && in.m.rows == in.m.cols) {
      cp = malloc(((size_t)in.m.cols + 1) * sizeof *cp);
      if (!cp) {
        rc = cli_fail(CMD, ts_error(TS_ERR_OOM, "column permutation of %lld", (long long)in.m.cols));
        goto done;
      }
      memcpy(cp, rp, (size_t)in.m.cols * sizeof *cp);
    }
    st.symmetric = rp && cp && in.m.rows == in.m.cols && memcmp(rp, cp, (size_t)in.m.rows * sizeof *rp) == 0;
  } else {
    rc = rcli_reorder(CMD, &a, &in, &rp, &cp, &st);
    if (rc != CLI_OK) goto done;
  }
  if ((s = rcli_measure(&a, &in, rp, cp, &R)) != TS_OK || (out && (s = write_blocks(out, &R.blk, &a.bo)) != TS_OK)) {
    rc = cli_fail(CMD, s);
    goto done;
  }
  if (co.json) {
    cJSON *j = cJSON_CreateObject();
    rcli_json_metrics(j, &in, &R.before, &R.after, &st, &R.bs, &a.bo, R.blk.ms);
    if (perm_path || cperm_path) {
      cJSON_ReplaceItemInObject(j, "method", cJSON_CreateString("perm"));
      if (perm_path) cJSON_AddStringToObject(j, "perm", perm_path);
      if (cperm_path) cJSON_AddStringToObject(j, "col_perm", cperm_path);
    }
    cJSON_AddNumberToObject(j, "objective", R.blk.objective);
    if (out) cJSON_AddStringToObject(j, "out", out);
    cli_print_json(j);
  } else {
    rcli_print_metrics(&in, &R.before, &R.after, &st, &R.bs, &a.bo, R.blk.ms);
    printf("density    ");
    for (int k = 0; k < 10; k++) printf("%s%d%%:%lld", k ? "  " : "", 10 * k, (long long)R.bs.density_hist[k]);
    printf("\nobjective  %.1f (cells + %g per block + residue / %g)\n", R.blk.objective, a.bo.block_cost, a.bo.rho);
    if (perm_path) printf("perm       %s\n", perm_path);
    if (out) printf("wrote      %s\n", out);
  }
done:
  free(rp), free(cp);
  rcli_result_free(&R);
  rcli_input_free(&in);
  return rc;
}
