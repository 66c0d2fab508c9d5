/* tessera spy: a picture of a pattern's nonzeros (density heat map) as stored and after one or
 * more reorderings, side by side, each panel titled with its bandwidth and non-empty tiles. */
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

/* The command line. */
typedef struct spy_opts {
  cli_common_opts c;
  const char *in, *spec, *methods, *perm_path, *out, *grid;
  long size, tile;
  ts_plot_format fmt;
  int64_t gh, gw;
  ts_reorder_method meth[MAX_METHODS];
  int nmeth;
} spy_opts;

/* The picture being made: the pattern and its panels. */
typedef struct spy_run {
  ts_csr m;
  ts_pattern_info info;
  panel_info pi[TS_SPY_MAX_PANELS];
  int np;
  int32_t *file_perm; /* --perm (shared by its panel's row and column permutations) */
} spy_run;

/* The picture shows no times, so the same command draws the same picture. */
static void subtitle(panel_info *p, int32_t tile) {
  int64_t nonempty = p->met.tiles_mixed + p->met.tiles_full;
  int64_t total = nonempty + p->met.tiles_empty;
  snprintf(p->subtitle, sizeof p->subtitle, "bandwidth %lld, tiles%d %lld (%.1f%%)", (long long)p->met.bandwidth,
           (int)tile, (long long)nonempty, total ? 100.0 * (double)nonempty / (double)total : 0.0);
}

/* --method M[,M...]: parsed before any work, so a typo costs nothing. CLI_OK or CLI_USAGE. */
static int parse_methods(spy_opts *o) {
  char mbuf[256];
  snprintf(mbuf, sizeof mbuf, "%s", o->methods);
  for (char *save = NULL, *t = strtok_r(mbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    ts_reorder_method m;
    if (ts_reorder_method_parse(t, &m) != TS_OK) return cli_usage_error(CMD, "--method: %s", ts_last_error());
    if (m == TS_REORDER_NONE) continue; /* the stored pattern is always the first panel */
    if (o->nmeth == MAX_METHODS) return cli_usage_error(CMD, "--method: at most %d methods", MAX_METHODS);
    o->meth[o->nmeth++] = m;
  }
  return CLI_OK;
}

static int parse(int argc, char **argv, spy_opts *o) {
  *o = (spy_opts){.methods = "none", .size = 512, .tile = 16};
  for (int i = 1; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &o->c);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    const char *a = argv[i], **dst = NULL;
    if (strcmp(a, "--in") == 0) dst = &o->in;
    else if (strcmp(a, "--pattern") == 0) dst = &o->spec;
    else if (strcmp(a, "--method") == 0) dst = &o->methods;
    else if (strcmp(a, "--perm") == 0) dst = &o->perm_path;
    else if (strcmp(a, "--out") == 0) dst = &o->out;
    else if (strcmp(a, "--grid") == 0) dst = &o->grid;
    else if (strcmp(a, "--size") == 0 || strcmp(a, "--tile") == 0) {
      const char *v = cli_value(CMD, argc, argv, &i);
      if (!v) return CLI_USAGE;
      bool ok = a[2] == 's' ? cli_parse_int(CMD, a, v, 16, 4096, &o->size) : cli_parse_int(CMD, a, v, 1, 1 << 20, &o->tile);
      if (!ok) return CLI_USAGE;
      continue;
    } else return cli_usage_error(CMD, "unknown option '%s'", a);
    if (!(*dst = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
  }
  if (o->c.help) return CLI_OK;
  if (!o->in == !o->spec) return cli_usage_error(CMD, "give exactly one of --in FILE and --pattern SPEC");
  if (!o->out) return cli_usage_error(CMD, "--out FILE (.png or .svg) is required");
  if (ts_plot_format_from_path(o->out, &o->fmt) != TS_OK) return cli_usage_error(CMD, "--out %s", ts_last_error());
  if (o->grid && !cli_parse_grid(o->grid, &o->gh, &o->gw))
    return cli_usage_error(CMD, "--grid expects HxW (e.g. 64x64), got '%s'", o->grid);
  return parse_methods(o);
}

/* The first panel: the pattern as stored. */
static ts_status add_original(const spy_opts *o, spy_run *S) {
  panel_info *p = &S->pi[0];
  snprintf(p->title, sizeof p->title, "original");
  snprintf(p->method, sizeof p->method, "none");
  p->ms = -1;
  TS_TRY(ts_pattern_metrics_compute(&S->m, NULL, NULL, (int32_t)o->tile, &p->met));
  subtitle(p, (int32_t)o->tile);
  S->np = 1;
  return TS_OK;
}

/* --perm FILE: the pattern relabelled by the file's permutation. */
static ts_status add_perm(const spy_opts *o, spy_run *S) {
  const ts_csr *m = &S->m;
  int64_t n = 0;
  TS_TRY(ts_perm_read_npy(o->perm_path, &S->file_perm, &n));
  if (m->rows != m->cols || n != m->rows)
    return ts_error(TS_ERR_SHAPE, "%s: permutation of %lld entries for a %lldx%lld pattern (needs a square one of %lld)",
                    o->perm_path, (long long)n, (long long)m->rows, (long long)m->cols, (long long)m->rows);
  panel_info *p = &S->pi[S->np++];
  const char *base = strrchr(o->perm_path, '/');
  snprintf(p->title, sizeof p->title, "%s", base ? base + 1 : o->perm_path);
  snprintf(p->method, sizeof p->method, "perm");
  p->row_perm = p->col_perm = S->file_perm;
  p->ms = -1;
  TS_TRY(ts_pattern_metrics_compute(m, S->file_perm, S->file_perm, (int32_t)o->tile, &p->met));
  subtitle(p, (int32_t)o->tile);
  return TS_OK;
}

/* The pattern after reordering method meth. */
static ts_status add_method(const spy_opts *o, ts_reorder_method meth, spy_run *S) {
  const ts_csr *m = &S->m;
  panel_info *p = &S->pi[S->np++];
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = meth;
  ro.tile = (int32_t)o->tile;
  if (o->grid) {
    ro.grid_h = o->gh;
    ro.grid_w = o->gw;
  } else if (S->info.grid_h > 0) {
    ro.grid_h = S->info.grid_h;
    ro.grid_w = S->info.grid_w;
    ro.grid_pos = S->info.base_index;
  }
  p->row_perm = malloc((size_t)m->rows * sizeof(int32_t));
  p->col_perm = malloc((size_t)m->cols * sizeof(int32_t));
  if (!p->row_perm || !p->col_perm)
    return ts_error(TS_ERR_OOM, "permutations for a %lldx%lld pattern", (long long)m->rows, (long long)m->cols);
  ts_reorder_stats st;
  TS_TRY(ts_reorder(m, &ro, p->row_perm, p->col_perm, &st));
  if (st.symmetric) memcpy(p->col_perm, p->row_perm, (size_t)m->rows * sizeof(int32_t));
  p->ms = st.ms;
  const char *mname = ts_reorder_method_name(st.method);
  snprintf(p->method, sizeof p->method, "%s", mname);
  if (meth == TS_REORDER_AUTO) snprintf(p->title, sizeof p->title, "auto: %s", mname);
  else snprintf(p->title, sizeof p->title, "%s", mname);
  TS_TRY(ts_pattern_metrics_compute(m, p->row_perm, p->col_perm, (int32_t)o->tile, &p->met));
  subtitle(p, (int32_t)o->tile);
  return TS_OK;
}

static ts_status draw(const spy_opts *o, const spy_run *S) {
  const ts_csr *m = &S->m;
  char heading[512];
  snprintf(heading, sizeof heading, "%s  (%lld x %lld, %lld nonzeros)", o->in ? o->in : o->spec, (long long)m->rows,
           (long long)m->cols, (long long)m->nnz);
  ts_spy_panel panels[TS_SPY_MAX_PANELS];
  for (int k = 0; k < S->np; k++)
    panels[k] = (ts_spy_panel){.m = m, .row_perm = S->pi[k].row_perm, .col_perm = S->pi[k].col_perm,
                               .title = S->pi[k].title, .subtitle = S->pi[k].subtitle};
  ts_spy_options so = {.size = (int32_t)o->size, .heading = heading};
  return ts_spy_write(o->out, panels, S->np, &so);
}

static void report_json(const spy_opts *o, const spy_run *S) {
  const ts_csr *m = &S->m;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "out", o->out);
  cJSON_AddStringToObject(j, "format", o->fmt == TS_PLOT_PNG ? "png" : "svg");
  cJSON_AddStringToObject(j, o->in ? "in" : "pattern", o->in ? o->in : o->spec);
  cJSON_AddNumberToObject(j, "rows", (double)m->rows);
  cJSON_AddNumberToObject(j, "cols", (double)m->cols);
  cJSON_AddNumberToObject(j, "nnz", (double)m->nnz);
  cJSON_AddNumberToObject(j, "tile", (double)o->tile);
  cJSON_AddNumberToObject(j, "size", (double)o->size);
  cJSON *arr = cJSON_AddArrayToObject(j, "panels");
  for (int k = 0; k < S->np; k++) {
    const panel_info *p = &S->pi[k];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "title", p->title);
    cJSON_AddStringToObject(e, "method", p->method);
    cJSON_AddNumberToObject(e, "bandwidth", (double)p->met.bandwidth);
    cJSON_AddNumberToObject(e, "tiles_nonempty", (double)(p->met.tiles_mixed + p->met.tiles_full));
    cJSON_AddNumberToObject(e, "tiles_total", (double)(p->met.tiles_mixed + p->met.tiles_full + p->met.tiles_empty));
    if (p->ms >= 0) cJSON_AddNumberToObject(e, "reorder_ms", p->ms);
    cJSON_AddItemToArray(arr, e);
  }
  cli_print_json(j);
}

static void report_text(const spy_opts *o, const spy_run *S) {
  const ts_csr *m = &S->m;
  printf("wrote %s: %d panel%s of %lldx%lld, %lld nonzeros\n", o->out, S->np, S->np > 1 ? "s" : "", (long long)m->rows,
         (long long)m->cols, (long long)m->nnz);
  for (int k = 0; k < S->np; k++) {
    printf("  %-18s %s", S->pi[k].title, S->pi[k].subtitle);
    if (S->pi[k].ms >= 0) printf(", reordered in %.1f ms", S->pi[k].ms);
    printf("\n");
  }
}

static void spy_run_free(spy_run *S) {
  for (int k = 0; k < S->np; k++) {
    if (S->pi[k].row_perm != S->file_perm) free(S->pi[k].row_perm);
    if (S->pi[k].col_perm != S->file_perm) free(S->pi[k].col_perm);
  }
  ts_free(S->file_perm);
  ts_pattern_info_free(&S->info);
  ts_csr_free(&S->m);
}

int cmd_spy(int argc, char **argv) {
  spy_opts o;
  int rc = parse(argc, argv, &o);
  if (rc != CLI_OK) return rc;
  if (o.c.help) {
    usage();
    return CLI_OK;
  }
  cli_apply_threads(o.c.threads);
  spy_run S;
  memset(&S, 0, sizeof S);
  ts_status s = o.in ? ts_pattern_load(o.in, &S.m) : ts_pattern_generate(o.spec, &S.m, &S.info);
  if (s != TS_OK) return cli_fail(CMD, s);
  s = add_original(&o, &S);
  if (s == TS_OK && o.perm_path) s = add_perm(&o, &S);
  for (int k = 0; k < o.nmeth && s == TS_OK; k++) s = add_method(&o, o.meth[k], &S);
  if (s == TS_OK) s = draw(&o, &S);
  if (s == TS_OK && o.c.json) report_json(&o, &S);
  else if (s == TS_OK) report_text(&o, &S);
  if (s != TS_OK) rc = cli_fail(CMD, s);
  spy_run_free(&S);
  return rc;
}
