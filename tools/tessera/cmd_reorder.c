/* tessera reorder: compute a reordering of a pattern, report how local it made it (bandwidth,
 * profile, tile counts, dense blocks) and save the permutation. Also the pieces `tessera blocks`
 * shares (cmd_reorder.h). */
#include "cmd_reorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CMD "reorder"

void rcli_defaults(rcli_args *a, ts_reorder_method method, int32_t tile) {
  memset(a, 0, sizeof *a);
  ts_reorder_opts_default(&a->ro);
  a->ro.method = method;
  a->ro.tile = tile;
  ts_blocks_opts_default(&a->bo);
}

const char *rcli_options_help(void) {
  return "input (one of):\n"
         "  --in FILE          pattern file (.mtx or .npy, see 'tessera pattern --help')\n"
         "  --pattern SPEC     generated pattern, e.g. permute:window2d:h=64,w=64,k=13,seed=7\n"
         "reordering:\n"
         "  --method M         none|rcm|hc|ic|metis|morton|hilbert|raster|auto\n"
         "  --mode MODE        auto (symmetric when square) | symmetric | rectangular\n"
         "  --tile T           tile side of the tile counts and of auto's criterion\n"
         "  --grid HxW         token grid for morton/hilbert/raster with --in (generated 2-D patterns carry\n"
         "                     theirs, with each token's position, so permute: patterns work too)\n"
         "  --cluster-size N   hc: target average cluster size (8)\n"
         "  --distance D       hc: merge the most Jaccard-similar (jaccard) or the closest in Hamming\n"
         "                     distance (hamming) clusters first (jaccard)\n"
         "  --tau X            ic: Jaccard threshold in (0, 1] (0.6)\n"
         "  --quotient Q       hc/ic: columns per signature element (1 = exact columns)\n"
         "  --refine W         hc/ic: local refinement segment, 0 = off (64)\n"
         "  --part-size N      metis: items per part (32)\n"
         "  --dense F          tokens with degree >= F * n (and > 4x the median) go first; 0 = off (0.25)\n"
         "  --seed S           hashing / METIS seed (1)\n"
         "blocks:\n"
         "  --density RHO      minimum block density in (0, 1] (0.6)\n"
         "  --extract E        greedy | dp (greedy)\n"
         "  --min-nnz N        greedy: smallest block kept (4)\n"
         "  --max-group N      dp: most rows per group, 1..1024 (32)\n"
         "  --block-cost C     dp: per-block overhead in cells (16)\n";
}

int rcli_option(const char *cmd, int argc, char **argv, int *i, rcli_args *a) {
  const char *o = argv[*i], *v;
  long n;
  double x;
#define VALUE() \
  if (!(v = cli_value(cmd, argc, argv, i))) return -1
  if (strcmp(o, "--in") == 0) {
    VALUE();
    a->in = v;
  } else if (strcmp(o, "--pattern") == 0) {
    VALUE();
    a->spec = v;
  } else if (strcmp(o, "--method") == 0) {
    VALUE();
    if (ts_reorder_method_parse(v, &a->ro.method) != TS_OK) {
      cli_usage_error(cmd, "%s", ts_last_error());
      return -1;
    }
    a->method_given = true;
  } else if (strcmp(o, "--mode") == 0) {
    VALUE();
    if (strcmp(v, "auto") == 0) a->ro.mode = TS_REORDER_MODE_AUTO;
    else if (strcmp(v, "symmetric") == 0) a->ro.mode = TS_REORDER_MODE_SYMMETRIC;
    else if (strcmp(v, "rectangular") == 0) a->ro.mode = TS_REORDER_MODE_RECTANGULAR;
    else {
      cli_usage_error(cmd, "--mode expects auto, symmetric or rectangular, got '%s'", v);
      return -1;
    }
  } else if (strcmp(o, "--tile") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 1, 1 << 20, &n)) return -1;
    a->ro.tile = (int32_t)n;
  } else if (strcmp(o, "--grid") == 0) {
    VALUE();
    if (!cli_parse_grid(v, &a->ro.grid_h, &a->ro.grid_w)) {
      cli_usage_error(cmd, "--grid expects HxW with positive sides, got '%s'", v);
      return -1;
    }
    a->grid_given = true;
  } else if (strcmp(o, "--cluster-size") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 1, INT32_MAX, &n)) return -1;
    a->ro.cluster_size = (int32_t)n;
  } else if (strcmp(o, "--distance") == 0) {
    VALUE();
    if (strcmp(v, "jaccard") == 0) a->ro.distance = TS_REORDER_JACCARD;
    else if (strcmp(v, "hamming") == 0) a->ro.distance = TS_REORDER_HAMMING;
    else {
      cli_usage_error(cmd, "--distance expects jaccard or hamming, got '%s'", v);
      return -1;
    }
  } else if (strcmp(o, "--tau") == 0) {
    VALUE();
    if (!cli_parse_double(cmd, o, v, 1e-9, 1, &x)) return -1;
    a->ro.tau = x;
  } else if (strcmp(o, "--quotient") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 1, INT32_MAX, &n)) return -1;
    a->ro.quotient = (int32_t)n;
  } else if (strcmp(o, "--refine") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 0, 1 << 20, &n)) return -1;
    a->ro.refine_window = (int32_t)n;
  } else if (strcmp(o, "--part-size") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 1, INT32_MAX, &n)) return -1;
    a->ro.part_size = (int32_t)n;
  } else if (strcmp(o, "--dense") == 0) {
    VALUE();
    if (!cli_parse_double(cmd, o, v, 0, 1, &x)) return -1;
    a->ro.dense_frac = x;
  } else if (strcmp(o, "--seed") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 0, INT32_MAX, &n)) return -1;
    a->ro.seed = (uint64_t)n;
  } else if (strcmp(o, "--density") == 0) {
    VALUE();
    if (!cli_parse_double(cmd, o, v, 1e-9, 1, &x)) return -1;
    a->bo.rho = x;
  } else if (strcmp(o, "--extract") == 0) {
    VALUE();
    if (ts_extract_method_parse(v, &a->bo.method) != TS_OK) {
      cli_usage_error(cmd, "%s", ts_last_error());
      return -1;
    }
  } else if (strcmp(o, "--min-nnz") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 1, INT32_MAX, &n)) return -1;
    a->bo.min_nnz = n;
  } else if (strcmp(o, "--max-group") == 0) {
    VALUE();
    if (!cli_parse_int(cmd, o, v, 1, 1024, &n)) return -1;
    a->bo.max_group = (int32_t)n;
  } else if (strcmp(o, "--block-cost") == 0) {
    VALUE();
    if (!cli_parse_double(cmd, o, v, 0, 1e12, &x)) return -1;
    a->bo.block_cost = x;
  } else {
    return 0;
  }
#undef VALUE
  return 1;
}

int rcli_load(const char *cmd, rcli_args *a, rcli_input *in) {
  memset(in, 0, sizeof *in);
  if (!a->in == !a->spec) return cli_usage_error(cmd, "give exactly one of --in FILE and --pattern SPEC");
  ts_status s;
  if (a->in) {
    in->name = a->in;
    s = ts_pattern_load(a->in, &in->m);
    if (s == TS_ERR_UNSUPPORTED) return cli_usage_error(cmd, "%s", ts_last_error());
    if (s != TS_OK) return cli_fail(cmd, s);
    return CLI_OK;
  }
  in->name = a->spec;
  s = ts_pattern_generate(a->spec, &in->m, &in->info);
  if (s == TS_ERR_INVALID_ARG || s == TS_ERR_OVERFLOW) return cli_usage_error(cmd, "%s", ts_last_error());
  if (s != TS_OK) return cli_fail(cmd, s);
  if (!a->grid_given && in->info.grid_h > 0) {
    a->ro.grid_h = in->info.grid_h, a->ro.grid_w = in->info.grid_w;
    a->ro.grid_pos = in->info.base_index; /* NULL (identity) unless keep:/permute: moved tokens */
  }
  return CLI_OK;
}

int rcli_parse(const char *cmd, int argc, char **argv, cli_common_opts *co, rcli_args *a, const rcli_str_opt *own, int nown) {
  for (int i = 1; i < argc; i++) {
    int r = cli_common(cmd, argc, argv, &i, co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if ((r = rcli_option(cmd, argc, argv, &i, a)) < 0) return CLI_USAGE;
    if (r > 0) continue;
    int k = 0;
    while (k < nown && strcmp(argv[i], own[k].name) != 0 && !(own[k].alias && strcmp(argv[i], own[k].alias) == 0)) k++;
    if (k == nown) return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    if (!(*own[k].dst = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
  }
  return CLI_OK;
}

void rcli_input_free(rcli_input *in) {
  ts_csr_free(&in->m);
  ts_pattern_info_free(&in->info);
}

ts_status rcli_measure(const rcli_args *a, const rcli_input *in, const int32_t *rp, const int32_t *cp, rcli_result *r) {
  memset(r, 0, sizeof *r);
  TS_TRY(ts_pattern_metrics_compute(&in->m, NULL, NULL, a->ro.tile, &r->before));
  TS_TRY(ts_pattern_metrics_compute(&in->m, rp, cp, a->ro.tile, &r->after));
  TS_TRY(ts_csr_permute(&in->m, rp, cp, &r->pm));
  TS_TRY(ts_blocks_extract(&r->pm, &a->bo, &r->blk));
  ts_blocks_summarize(&r->blk, &r->bs);
  return TS_OK;
}

void rcli_result_free(rcli_result *r) {
  ts_csr_free(&r->pm);
  ts_blocks_free(&r->blk);
}

int rcli_reorder(const char *cmd, const rcli_args *a, const rcli_input *in, int32_t **row_perm, int32_t **col_perm,
                 ts_reorder_stats *st) {
  const ts_csr *m = &in->m;
  *row_perm = malloc(((size_t)m->rows + 1) * sizeof **row_perm);
  *col_perm = malloc(((size_t)m->cols + 1) * sizeof **col_perm);
  if (!*row_perm || !*col_perm) return cli_fail(cmd, ts_error(TS_ERR_OOM, "permutations of %lld + %lld entries",
                                                              (long long)m->rows, (long long)m->cols));
  ts_status s = ts_reorder(m, &a->ro, *row_perm, *col_perm, st);
  /* a method that cannot apply to this input (no grid, not square) is a usage error */
  if (s == TS_ERR_INVALID_ARG) return cli_usage_error(cmd, "%s", ts_last_error());
  if (s != TS_OK) return cli_fail(cmd, s);
  return CLI_OK;
}

static void add_tiles(cJSON *j, const char *suffix, const ts_pattern_metrics *x) {
  char k[64];
  snprintf(k, sizeof k, "tiles_empty%s", suffix);
  cJSON_AddNumberToObject(j, k, (double)x->tiles_empty);
  snprintf(k, sizeof k, "tiles_mixed%s", suffix);
  cJSON_AddNumberToObject(j, k, (double)x->tiles_mixed);
  snprintf(k, sizeof k, "tiles_full%s", suffix);
  cJSON_AddNumberToObject(j, k, (double)x->tiles_full);
  snprintf(k, sizeof k, "tiles_nonempty%s", suffix);
  cJSON_AddNumberToObject(j, k, (double)(x->tiles_mixed + x->tiles_full));
}

void rcli_json_metrics(cJSON *j, const rcli_input *in, const ts_pattern_metrics *before,
                       const ts_pattern_metrics *after, const ts_reorder_stats *st, const ts_blocks_summary *bs,
                       const ts_blocks_opts *bo, double extract_ms) {
  cJSON_AddStringToObject(j, "input", in->name);
  cJSON_AddNumberToObject(j, "n", (double)(in->m.rows == in->m.cols ? in->m.rows : 0));
  cJSON_AddNumberToObject(j, "rows", (double)in->m.rows);
  cJSON_AddNumberToObject(j, "cols", (double)in->m.cols);
  cJSON_AddNumberToObject(j, "nnz", (double)in->m.nnz);
  cJSON_AddStringToObject(j, "method", ts_reorder_method_name(st->method));
  cJSON_AddBoolToObject(j, "symmetric", st->symmetric);
  cJSON_AddNumberToObject(j, "reorder_ms", st->ms);
  cJSON_AddNumberToObject(j, "groups", (double)st->groups);
  if (!st->symmetric) cJSON_AddNumberToObject(j, "col_groups", (double)st->col_groups);
  cJSON_AddNumberToObject(j, "dense_rows", (double)st->dense_rows);
  cJSON_AddNumberToObject(j, "dense_cols", (double)st->dense_cols);
  cJSON *cand = NULL;
  for (int k = 0; k < TS_REORDER_METHOD_COUNT; k++)
    if (st->auto_tiles[k] >= 0) {
      if (!cand) cand = cJSON_AddObjectToObject(j, "auto_candidates");
      cJSON *c = cJSON_AddObjectToObject(cand, ts_reorder_method_name((ts_reorder_method)k));
      cJSON_AddNumberToObject(c, "tiles_nonempty", (double)st->auto_tiles[k]);
      cJSON_AddNumberToObject(c, "ms", st->auto_ms[k]);
    }
  cJSON_AddNumberToObject(j, "tile", (double)after->tile);
  cJSON_AddNumberToObject(j, "bandwidth_before", (double)before->bandwidth);
  cJSON_AddNumberToObject(j, "bandwidth_after", (double)after->bandwidth);
  cJSON_AddNumberToObject(j, "profile_before", (double)before->profile);
  cJSON_AddNumberToObject(j, "profile_after", (double)after->profile);
  add_tiles(j, "", after);
  add_tiles(j, "_before", before);
  cJSON_AddStringToObject(j, "extract", ts_extract_method_name(bo->method));
  cJSON_AddNumberToObject(j, "density", bo->rho);
  cJSON_AddNumberToObject(j, "blocks", (double)bs->nblocks);
  cJSON_AddNumberToObject(j, "fill_ratio", bs->fill_ratio);
  cJSON_AddNumberToObject(j, "coverage", bs->coverage);
  cJSON_AddNumberToObject(j, "block_cells", (double)bs->block_cells);
  cJSON_AddNumberToObject(j, "block_nnz", (double)bs->block_nnz);
  cJSON_AddNumberToObject(j, "residue_nnz", (double)bs->residue_nnz);
  cJSON_AddNumberToObject(j, "mean_block_density", bs->mean_density);
  double hist[10];
  for (int k = 0; k < 10; k++) hist[k] = (double)bs->density_hist[k];
  cJSON_AddItemToObject(j, "density_hist", cJSON_CreateDoubleArray(hist, 10));
  cJSON_AddNumberToObject(j, "extract_ms", extract_ms);
}

void rcli_print_metrics(const rcli_input *in, const ts_pattern_metrics *before, const ts_pattern_metrics *after,
                        const ts_reorder_stats *st, const ts_blocks_summary *bs, const ts_blocks_opts *bo,
                        double extract_ms) {
  printf("input      %s  (%lld x %lld, %lld nonzeros)\n", in->name, (long long)in->m.rows, (long long)in->m.cols,
         (long long)in->m.nnz);
  printf("method     %s%s  %.1f ms", ts_reorder_method_name(st->method), st->symmetric ? " (symmetric)" : " (rows and columns)",
         st->ms);
  if (st->groups) printf("  groups %lld", (long long)st->groups);
  if (st->dense_rows || st->dense_cols) printf("  dense set aside %lld/%lld", (long long)st->dense_rows, (long long)st->dense_cols);
  printf("\n");
  for (int k = 0; k < TS_REORDER_METHOD_COUNT; k++)
    if (st->auto_tiles[k] >= 0)
      printf("  auto     %-8s %lld non-empty tiles  %.1f ms%s\n", ts_reorder_method_name((ts_reorder_method)k),
             (long long)st->auto_tiles[k], st->auto_ms[k], k == (int)st->method ? "  <- kept" : "");
  printf("             %14s %14s\n", "before", "after");
  printf("bandwidth    %14lld %14lld\n", (long long)before->bandwidth, (long long)after->bandwidth);
  printf("profile      %14lld %14lld\n", (long long)before->profile, (long long)after->profile);
  printf("tiles %dx%d\n", (int)after->tile, (int)after->tile);
  printf("  non-empty  %14lld %14lld\n", (long long)(before->tiles_mixed + before->tiles_full),
         (long long)(after->tiles_mixed + after->tiles_full));
  printf("  full       %14lld %14lld\n", (long long)before->tiles_full, (long long)after->tiles_full);
  printf("  mixed      %14lld %14lld\n", (long long)before->tiles_mixed, (long long)after->tiles_mixed);
  printf("blocks     %lld (%s, density >= %g): fill ratio %.3f, %.1f%% of nonzeros in blocks, residue %lld, %.1f ms\n",
         (long long)bs->nblocks, ts_extract_method_name(bo->method), bo->rho, bs->fill_ratio, 100 * bs->coverage,
         (long long)bs->residue_nnz, extract_ms);
}

static void usage(void) {
  printf("usage: tessera reorder (--in FILE | --pattern SPEC) [--method M] [--out perm.npy]\n"
         "                       [--col-out colperm.npy] [--tile T] [options] [--json]\n\n"
         "Computes a reordering (perm[new] = old) that makes the pattern local, and reports bandwidth,\n"
         "profile, empty/mixed/full T x T tiles before and after, and the dense blocks (density >= RHO)\n"
         "of the reordered pattern. Square patterns get one permutation for rows and columns; others\n"
         "(or --mode rectangular) independent row and column orders.\n\n"
         "  --out FILE       write the (row) permutation as a 1-D int32 .npy\n"
         "  --col-out FILE   write the column permutation (needed with --out in rectangular mode)\n"
         "  --json           print the report as JSON\n"
         "  --threads N      threads (the dp extraction and generators)\n\n"
         "defaults here: --method auto, --tile 16\n%s",
         rcli_options_help());
}

int cmd_reorder(int argc, char **argv) {
  cli_common_opts co = {0};
  rcli_args a;
  rcli_defaults(&a, TS_REORDER_AUTO, 16);
  const char *out = NULL, *col_out = NULL;
  const rcli_str_opt own[] = {{"--out", "-o", &out}, {"--col-out", NULL, &col_out}};
  if (rcli_parse(CMD, argc, argv, &co, &a, own, 2) != CLI_OK) return CLI_USAGE;
  if (co.help) {
    usage();
    return CLI_OK;
  }
  cli_apply_threads(co.threads);
  rcli_input in;
  int rc = rcli_load(CMD, &a, &in);
  if (rc != CLI_OK) return rc;
  int32_t *rp = NULL, *cp = NULL;
  ts_reorder_stats st;
  rcli_result R = {0};
  ts_status s;
  rc = rcli_reorder(CMD, &a, &in, &rp, &cp, &st);
  if (rc != CLI_OK) goto done;
  if (out && !st.symmetric && !col_out) {
    rc = cli_usage_error(CMD, "rectangular reordering: give --col-out FILE for the column permutation too");
    goto done;
  }
  if ((s = rcli_measure(&a, &in, rp, cp, &R)) != TS_OK || (out && (s = ts_perm_write_npy(out, rp, in.m.rows)) != TS_OK) ||
      (col_out && (s = ts_perm_write_npy(col_out, cp, in.m.cols)) != TS_OK)) {
    rc = cli_fail(CMD, s);
    goto done;
  }
  if (co.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "method_requested", ts_reorder_method_name(a.ro.method));
    rcli_json_metrics(j, &in, &R.before, &R.after, &st, &R.bs, &a.bo, R.blk.ms);
    if (out) cJSON_AddStringToObject(j, "out", out);
    if (col_out) cJSON_AddStringToObject(j, "col_out", col_out);
    cli_print_json(j);
  } else {
    rcli_print_metrics(&in, &R.before, &R.after, &st, &R.bs, &a.bo, R.blk.ms);
    if (out) printf("wrote      %s%s\n", out, st.symmetric ? "" : " (rows)");
    if (col_out) printf("wrote      %s (columns)\n", col_out);
  }
done:
  free(rp), free(cp);
  rcli_result_free(&R);
  rcli_input_free(&in);
  return rc;
}
