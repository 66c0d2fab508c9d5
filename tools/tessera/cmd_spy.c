/* tessera spy: a picture of a pattern's nonzeros (density heat map) as stored and after one or
 * more reorderings, side by side, each panel titled with its bandwidth and non-empty tiles. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tessera/plot.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#define CMD "spy"
#define MAX_METHODS (TS_SPY_MAX_PANELS - 2) /* room for the original and a --perm panel */

static void usage(void) {
  printf("usage: tessera spy (--in FILE | --pattern SPEC) [--method M[,M...]] [--perm perm.npy]\n"
         "                  [--size PX] [--tile T] [--grid HxW] --out spy.png|spy.svg [--json]\n\n"
         "Draws the pattern's nonzeros as a density heat map (each pixel = fraction of nonzeros in the\n"
         "block of entries it covers; white = empty, dark = full): the pattern as stored, then after\n"
         "each reordering, side by side. Each panel's title gives the method, the bandwidth and the\n"
         "number of non-empty T x T tiles.\n\n"
         "  --in FILE        pattern file (.mtx or .npy)\n"
         "  --pattern SPEC   generated pattern, e.g. permute:window2d:h=64,w=64,k=13,seed=7\n"
         "                   (see 'tessera pattern --help' for the kinds)\n"
         "  --method M       none|rcm|hc|ic|metis|morton|hilbert|raster|auto, or a comma list such as\n"
         "                   rcm,ic (one panel each; default none: only the stored pattern)\n"
         "  --perm FILE      also show the pattern relabelled by this permutation (1-D .npy,\n"
         "                   perm[new] = old, square patterns)\n"
         "  --size PX        longest side of each panel's plot in pixels, 16..4096 (default 512)\n"
         "  --tile T         tile side for the titles' non-empty tile count and for auto (default 16)\n"
         "  --grid HxW       token grid for morton/hilbert/raster with --in (generated 2-D patterns\n"
         "                   carry their own)\n"
         "  --out FILE       .png (8-bit RGB) or .svg (heat map coarsened to at most 128x128 cells)\n"
         "  --json           print what was drawn as JSON\n");
}

typedef struct panel_info {
  char title[96], subtitle[160], method[32];
  ts_pattern_metrics met;
  double ms;
  int32_t *row_perm, *col_perm;
} panel_info;

/* The picture shows no times, so the same command draws the same picture. */
static void subtitle(panel_info *p, int32_t tile) {
  int64_t nonempty = p->met.tiles_mixed + p->met.tiles_full;
  int64_t total = nonempty + p->met.tiles_empty;
  snprintf(p->subtitle, sizeof p->subtitle, "bandwidth %lld, tiles%d %lld (%.1f%%)", (long long)p->met.bandwidth,
           (int)tile, (long long)nonempty, total ? 100.0 * (double)nonempty / (double)total : 0.0);
}

int cmd_spy(int argc, char **argv) {
  cli_common_opts o = {0};
  const char *in = NULL, *spec = NULL, *methods = "none", *perm_path = NULL, *out = NULL, *grid = NULL;
  long size = 512, tile = 16;
  for (int i = 1; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &o);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *a = argv[i], **dst = NULL;
    if (strcmp(a, "--in") == 0) dst = &in;
    else if (strcmp(a, "--pattern") == 0) dst = &spec;
    else if (strcmp(a, "--method") == 0) dst = &methods;
    else if (strcmp(a, "--perm") == 0) dst = &perm_path;
    else if (strcmp(a, "--out") == 0) dst = &out;
    else if (strcmp(a, "--grid") == 0) dst = &grid;
    else if (strcmp(a, "--size") == 0 || strcmp(a, "--tile") == 0) {
      const char *v = cli_value(CMD, argc, argv, &i);
      if (!v) return CLI_USAGE;
      bool ok = a[2] == 's' ? cli_parse_int(CMD, a, v, 16, 4096, &size) : cli_parse_int(CMD, a, v, 1, 1 << 20, &tile);
      if (!ok) return CLI_USAGE;
      continue;
    } else return cli_usage_error(CMD, "unknown option '%s'", a);
    if (!(*dst = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
  }
  if (o.help) {
    usage();
    return CLI_OK;
  }
  if (!in == !spec) return cli_usage_error(CMD, "give exactly one of --in FILE and --pattern SPEC");
  if (!out) return cli_usage_error(CMD, "--out FILE (.png or .svg) is required");
  ts_plot_format fmt;
  if (ts_plot_format_from_path(out, &fmt) != TS_OK) return cli_usage_error(CMD, "--out %s", ts_last_error());
  int64_t gh = 0, gw = 0;
  if (grid && !cli_parse_grid(grid, &gh, &gw)) return cli_usage_error(CMD, "--grid expects HxW (e.g. 64x64), got '%s'", grid);

  /* the methods, parsed before any work so a typo costs nothing */
  ts_reorder_method meth[MAX_METHODS];
  int nmeth = 0;
  char mbuf[256];
  snprintf(mbuf, sizeof mbuf, "%s", methods);
  for (char *save = NULL, *t = strtok_r(mbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    ts_reorder_method m;
    if (ts_reorder_method_parse(t, &m) != TS_OK) return cli_usage_error(CMD, "--method: %s", ts_last_error());
    if (m == TS_REORDER_NONE) continue; /* the stored pattern is always the first panel */
    if (nmeth == MAX_METHODS) return cli_usage_error(CMD, "--method: at most %d methods", MAX_METHODS);
    meth[nmeth++] = m;
  }
  if (o.threads > 0) omp_set_num_threads(o.threads);

  ts_csr m = {0};
  ts_pattern_info info = {0};
  ts_status s = in ? ts_pattern_load(in, &m) : ts_pattern_generate(spec, &m, &info);
  if (s != TS_OK) return cli_fail(CMD, s);

  panel_info pi[TS_SPY_MAX_PANELS];
  memset(pi, 0, sizeof pi);
  int np = 0, rc = CLI_OK;
  int32_t *file_perm = NULL;
  snprintf(pi[0].title, sizeof pi[0].title, "original");
  snprintf(pi[0].method, sizeof pi[0].method, "none");
  pi[0].ms = -1;
  if ((s = ts_pattern_metrics_compute(&m, NULL, NULL, (int32_t)tile, &pi[0].met)) != TS_OK) goto fail;
  subtitle(&pi[0], (int32_t)tile);
  np = 1;

  if (perm_path) {
    int64_t n = 0;
    if ((s = ts_perm_read_npy(perm_path, &file_perm, &n)) != TS_OK) goto fail;
    if (m.rows != m.cols || n != m.rows) {
      s = ts_error(TS_ERR_SHAPE, "%s: permutation of %lld entries for a %lldx%lld pattern (needs a square one of %lld)",
                   perm_path, (long long)n, (long long)m.rows, (long long)m.cols, (long long)m.rows);
      goto fail;
    }
    panel_info *p = &pi[np++];
    const char *base = strrchr(perm_path, '/');
    snprintf(p->title, sizeof p->title, "%s", base ? base + 1 : perm_path);
    snprintf(p->method, sizeof p->method, "perm");
    p->row_perm = p->col_perm = file_perm;
    p->ms = -1;
    if ((s = ts_pattern_metrics_compute(&m, file_perm, file_perm, (int32_t)tile, &p->met)) != TS_OK) goto fail;
    subtitle(p, (int32_t)tile);
  }

  for (int k = 0; k < nmeth; k++) {
    panel_info *p = &pi[np++];
    ts_reorder_opts ro;
    ts_reorder_opts_default(&ro);
    ro.method = meth[k];
    ro.tile = (int32_t)tile;
    if (grid) {
      ro.grid_h = gh;
      ro.grid_w = gw;
    } else if (info.grid_h > 0) {
      ro.grid_h = info.grid_h;
      ro.grid_w = info.grid_w;
      ro.grid_pos = info.base_index;
    }
    p->row_perm = malloc((size_t)m.rows * sizeof(int32_t));
    p->col_perm = malloc((size_t)m.cols * sizeof(int32_t));
    if (!p->row_perm || !p->col_perm) {
      s = ts_error(TS_ERR_OOM, "permutations for a %lldx%lld pattern", (long long)m.rows, (long long)m.cols);
      goto fail;
    }
    ts_reorder_stats st;
    if ((s = ts_reorder(&m, &ro, p->row_perm, p->col_perm, &st)) != TS_OK) goto fail;
    if (st.symmetric) memcpy(p->col_perm, p->row_perm, (size_t)m.rows * sizeof(int32_t));
    p->ms = st.ms;
    const char *mname = ts_reorder_method_name(st.method);
    snprintf(p->method, sizeof p->method, "%s", mname);
    if (meth[k] == TS_REORDER_AUTO) snprintf(p->title, sizeof p->title, "auto: %s", mname);
    else snprintf(p->title, sizeof p->title, "%s", mname);
    if ((s = ts_pattern_metrics_compute(&m, p->row_perm, p->col_perm, (int32_t)tile, &p->met)) != TS_OK) goto fail;
    subtitle(p, (int32_t)tile);
  }

  {
    char heading[512];
    snprintf(heading, sizeof heading, "%s  (%lld x %lld, %lld nonzeros)", in ? in : spec, (long long)m.rows,
             (long long)m.cols, (long long)m.nnz);
    ts_spy_panel panels[TS_SPY_MAX_PANELS];
    for (int k = 0; k < np; k++)
      panels[k] = (ts_spy_panel){.m = &m, .row_perm = pi[k].row_perm, .col_perm = pi[k].col_perm,
                                 .title = pi[k].title, .subtitle = pi[k].subtitle};
    ts_spy_options so = {.size = (int32_t)size, .heading = heading};
    if ((s = ts_spy_write(out, panels, np, &so)) != TS_OK) goto fail;
  }

  if (o.json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "out", out);
    cJSON_AddStringToObject(j, "format", fmt == TS_PLOT_PNG ? "png" : "svg");
    cJSON_AddStringToObject(j, in ? "in" : "pattern", in ? in : spec);
    cJSON_AddNumberToObject(j, "rows", (double)m.rows);
    cJSON_AddNumberToObject(j, "cols", (double)m.cols);
    cJSON_AddNumberToObject(j, "nnz", (double)m.nnz);
    cJSON_AddNumberToObject(j, "tile", (double)tile);
    cJSON_AddNumberToObject(j, "size", (double)size);
    cJSON *arr = cJSON_AddArrayToObject(j, "panels");
    for (int k = 0; k < np; k++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "title", pi[k].title);
      cJSON_AddStringToObject(e, "method", pi[k].method);
      cJSON_AddNumberToObject(e, "bandwidth", (double)pi[k].met.bandwidth);
      cJSON_AddNumberToObject(e, "tiles_nonempty", (double)(pi[k].met.tiles_mixed + pi[k].met.tiles_full));
      cJSON_AddNumberToObject(e, "tiles_total",
                              (double)(pi[k].met.tiles_mixed + pi[k].met.tiles_full + pi[k].met.tiles_empty));
      if (pi[k].ms >= 0) cJSON_AddNumberToObject(e, "reorder_ms", pi[k].ms);
      cJSON_AddItemToArray(arr, e);
    }
    cli_print_json(j);
  } else {
    printf("wrote %s: %d panel%s of %lldx%lld, %lld nonzeros\n", out, np, np > 1 ? "s" : "", (long long)m.rows,
           (long long)m.cols, (long long)m.nnz);
    for (int k = 0; k < np; k++) {
      printf("  %-18s %s", pi[k].title, pi[k].subtitle);
      if (pi[k].ms >= 0) printf(", reordered in %.1f ms", pi[k].ms);
      printf("\n");
    }
  }
  goto done;
fail:
  rc = cli_fail(CMD, s);
done:
  for (int k = 0; k < np; k++) {
    if (pi[k].row_perm != file_perm) free(pi[k].row_perm);
    if (pi[k].col_perm != file_perm) free(pi[k].col_perm);
  }
  ts_free(file_perm);
  ts_pattern_info_free(&info);
  ts_csr_free(&m);
  return rc;
}
