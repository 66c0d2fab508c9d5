/* tessera gconv: unstructured group convolution from the command line.
 *   gconv plan    one layer's connectivity -> reorder candidates, knapsack sizes, ILP assignment
 *                 -> plan JSON (kept as a "gconv-plan" artifact, <cache>/gconv-plan/<key>.json; --out writes a copy)
 *   gconv bench   every layer of a model (or one layer): our plan and every baseline timed in one
 *                 process on the same data, errors against the dense masked reference, totals
 *   gconv export  a model's layer table and connectivities (.npy), for bench/peers/gconv_torch.py */
#include "cmd_gconv.h"
#include "gconv/gconv_internal.h"
#include "io/json_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define CMD GCLI_CMD

static void usage(void) {
  printf("usage: tessera gconv plan   (--conn FILE | --gen SPEC) --hw H --ksize K [--stride S] [--batch B]\n"
         "                            [--out plan.json] [planner options] [--json]\n"
         "       tessera gconv bench  (--model M [--connectivity C] [--condense F] [--layers A-B]\n"
         "                             | (--conn FILE | --gen SPEC) --hw H --ksize K [--groups G] [--weights FILE])\n"
         "                            [--batch B] [--torch FILE] [--repeats R] [--min-time S] [planner options] [--json]\n"
         "       tessera gconv export --model M [--connectivity C] [--condense F] [--batch B] --out DIR\n\n"
         "A layer is a convolution whose output channels each read their own subset of the input channels,\n"
         "given as a cout x cin 0/1 connectivity. plan reorders the connectivity (none, rcm, hc, ic), picks\n"
         "partition sizes with a knapsack over this machine's measured kernel cost, assigns output channels\n"
         "to partitions (greedy, then neighbourhood ILPs over CBC under --time-limit) and keeps the cheapest\n"
         "predicted candidate; a partition runs as one dense GEMM/convolution over the union of its inputs.\n"
         "bench times our executor (with and without reordering) against: dense with zeroed weights\n"
         "(sgemm/im2col), the CondenseNet deploy path (gather + equal-size grouped conv), oneDNN grouped and\n"
         "dense convolutions, CSR SpMM over channels, and PyTorch (--torch FILE from bench/peers/gconv_torch.py).\n\n"
         "  --model M          condensenet | shufflenet-g3 | shufflenet-g8 (their group-convolution layers)\n"
         "  --connectivity C   unstructured (per-filter, default) | shared (group-shared, condensed) | random |\n"
         "                     block (block structure, randomly permuted) | permuted (unstructured, relabelled)\n"
         "  --condense F       CondenseNet condense factor 1|2|4|8 (4): each output keeps 1/F of its inputs\n"
         "  --corr X           unstructured: share of a filter's inputs from its group's preferred set (0.9)\n"
         "  --density X        random/block: density (default 1/F)\n"
         "  --seed N           connectivity seed (1)           --layers A-B  model layers A..B only\n"
         "  --conn FILE        connectivity file: .npy (cout x cin, values 0 and 1) or .mtx\n"
         "  --weights FILE     bench with --conn/--gen: weights .npy float32 (cout, cin, k, k) (default: random)\n"
         "  --gen SPEC         generated connectivity, e.g. unstructconv:cin=256,cout=128,keep=0.25,groups=4,corr=0.9\n"
         "  --hw H             input height and width        --ksize K   1 or 3       --stride S  1..4 (1)\n"
         "  --batch B          images (1)                     --groups G  grouped baselines' groups (4, or 1)\n"
         "  --reorder LIST     reorder candidates, comma separated (none,rcm,hc,ic)\n"
         "  --solver S         ilp | greedy (ilp)             --time-limit S  ILP seconds per candidate (1)\n"
         "  --max-rows R       largest partition (32)\n"
         "  --cost C           profile (this machine's kernel timings, measured once, default) | analytic\n"
         "  --profile-level L  quick | standard (standard: measured once in 5-15 s, then cached)\n"
         "  --no-cache         neither read nor write the plan cache\n"
         "  --torch FILE       bench: PyTorch timings written by bench/peers/gconv_torch.py\n"
         "  --json-out FILE    bench: also write the JSON report to FILE (the text report still prints)\n"
         "  --repeats R        bench: timed calls per method, at least (10)\n"
         "  --min-time S       bench: seconds of timed calls per method and layer, at least (0.05)\n"
         "  --no-check         bench: skip the reference comparison\n"
         "  --out FILE|DIR     plan: copy of the plan JSON; export: output directory\n"
         "  --threads N        threads (default: all)         --json  JSON report\n");
}

static int parse_methods(const char *v, ts_gconv_plan_opts *po) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  po->nmethods = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (po->nmethods == TS_GCONV_MAX_CANDIDATES)
      return cli_usage_error(CMD, "--reorder takes at most %d methods", TS_GCONV_MAX_CANDIDATES);
    if (ts_reorder_method_parse(t, &po->methods[po->nmethods]) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
    po->nmethods++;
  }
  return po->nmethods ? CLI_OK : cli_usage_error(CMD, "--reorder expects a list like none,rcm,hc,ic");
}

/* Options with an integer value: name, destination, range. */
static long *int_opt(gcli_args *A, const char *o, long *lo, long *hi) {
  static const struct {
    const char *name;
    size_t off;
    long lo, hi;
  } t[] = {{"--batch", offsetof(gcli_args, batch), 1, 4096},      {"--hw", offsetof(gcli_args, hw), 1, 65536},
           {"--ksize", offsetof(gcli_args, ksize), 1, 3},         {"--stride", offsetof(gcli_args, stride), 1, 4},
           {"--groups", offsetof(gcli_args, groups), 1, 1 << 24}, {"--repeats", offsetof(gcli_args, repeats), 1, 100000}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(o, t[i].name) == 0) {
      *lo = t[i].lo, *hi = t[i].hi;
      return (long *)((char *)A + t[i].off);
    }
  return NULL;
}

static int parse_opt(int argc, char **argv, int *i, gcli_args *A) {
  const char *o = argv[*i], *v;
  long lo, hi, *dst = int_opt(A, o, &lo, &hi), n;
  double x;
  if (dst) return (v = cli_value(CMD, argc, argv, i)) && cli_parse_int(CMD, o, v, lo, hi, dst) ? CLI_OK : CLI_USAGE;
  if (!(v = cli_value(CMD, argc, argv, i))) return CLI_USAGE;
  if (strcmp(o, "--model") == 0) A->model = v;
  else if (strcmp(o, "--conn") == 0) A->conn = v;
  else if (strcmp(o, "--gen") == 0) A->gen = v;
  else if (strcmp(o, "--out") == 0 || strcmp(o, "-o") == 0) A->out = v;
  else if (strcmp(o, "--torch") == 0) A->torch = v;
  else if (strcmp(o, "--weights") == 0) A->weights = v;
  else if (strcmp(o, "--json-out") == 0) A->json_out = v;
  else if (strcmp(o, "--connectivity") == 0) {
    if (ts_gconv_connectivity_parse(v, &A->conn_opts.mode) != TS_OK) return cli_usage_error(CMD, "%s", ts_last_error());
  } else if (strcmp(o, "--condense") == 0) {
    if (!cli_parse_int(CMD, o, v, 1, 8, &n)) return CLI_USAGE;
    if (n != 1 && n != 2 && n != 4 && n != 8) return cli_usage_error(CMD, "--condense expects 1, 2, 4 or 8, got %ld", n);
    A->conn_opts.condense = (int)n;
  } else if (strcmp(o, "--corr") == 0 || strcmp(o, "--density") == 0) {
    if (!cli_parse_double(CMD, o, v, o[2] == 'd' ? 1e-6 : 0, 1, &x)) return CLI_USAGE;
    *(o[2] == 'd' ? &A->conn_opts.density : &A->conn_opts.corr) = x;
  } else if (strcmp(o, "--seed") == 0) {
    if (!cli_parse_int(CMD, o, v, 0, 1L << 40, &n)) return CLI_USAGE;
    A->conn_opts.seed = (uint64_t)n;
  } else if (strcmp(o, "--layers") == 0) {
    char *end;
    A->first = strtol(v, &end, 10);
    A->last = *end == '-' ? strtol(end + 1, &end, 10) : A->first;
    if (*end || A->first < 0 || A->last < A->first)
      return cli_usage_error(CMD, "--layers expects A-B with 0 <= A <= B, got '%s'", v);
  } else if (strcmp(o, "--reorder") == 0) {
    return parse_methods(v, &A->po);
  } else if (strcmp(o, "--solver") == 0) {
    if (ts_gconv_solver_parse(v, &A->po.solver) != TS_OK) return cli_usage_error(CMD, "--solver expects ilp or greedy, got '%s'", v);
  } else if (strcmp(o, "--time-limit") == 0 || strcmp(o, "--min-time") == 0) {
    if (!cli_parse_double(CMD, o, v, o[2] == 't' ? 1e-3 : 0, 3600, &x)) return CLI_USAGE;
    *(o[2] == 't' ? &A->po.time_limit : &A->min_time) = x;
  } else if (strcmp(o, "--max-rows") == 0) {
    if (!cli_parse_int(CMD, o, v, 1, TS_GCONV_PROFILE_MAX, &n)) return CLI_USAGE;
    A->po.max_rows = (int)n;
  } else if (strcmp(o, "--cost") == 0) {
    if (strcmp(v, "analytic") != 0 && strcmp(v, "profile") != 0)
      return cli_usage_error(CMD, "--cost expects profile or analytic, got '%s'", v);
    A->analytic = v[0] == 'a';
  } else if (strcmp(o, "--profile-level") == 0) {
    if (ts_gconv_profile_level_parse(v, &A->level) != TS_OK)
      return cli_usage_error(CMD, "--profile-level expects quick or standard, got '%s'", v);
  } else {
    return cli_usage_error(CMD, "unknown argument '%s'", o);
  }
  return CLI_OK;
}

static int parse(int argc, char **argv, gcli_args *A) {
  memset(A, 0, sizeof *A);
  ts_gconv_conn_opts_default(&A->conn_opts);
  ts_gconv_plan_opts_default(&A->po);
  A->batch = 1, A->stride = 1, A->repeats = 10, A->min_time = 0.05, A->last = -1;
  A->level = TS_GCONV_PROFILE_STANDARD;
  if (argc < 2) return cli_usage_error(CMD, "expected a sub-command: plan, bench or export");
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) return A->co.help = true, CLI_OK;
  if (strcmp(argv[1], "plan") == 0) A->sub = GCLI_PLAN;
  else if (strcmp(argv[1], "bench") == 0) A->sub = GCLI_BENCH;
  else if (strcmp(argv[1], "export") == 0) A->sub = GCLI_EXPORT;
  else return cli_usage_error(CMD, "unknown sub-command '%s' (plan, bench, export)", argv[1]);
  for (int i = 2; i < argc; i++) {
    int r = cli_common(CMD, argc, argv, &i, &A->co);
    if (r < 0) return CLI_USAGE;
    if (r > 0) continue;
    if (strcmp(argv[i], "--no-cache") == 0) A->no_cache = true;
    else if (strcmp(argv[i], "--no-check") == 0) A->no_check = true;
    else if ((r = parse_opt(argc, argv, &i, A)) != CLI_OK) return r;
  }
  if (A->co.help) return CLI_OK;
  const int given = !!A->model + !!A->conn + !!A->gen;
  if (given != 1) return cli_usage_error(CMD, "give exactly one of --model, --conn FILE and --gen SPEC");
  if (A->sub == GCLI_PLAN && A->model) return cli_usage_error(CMD, "plan takes one layer: --conn FILE or --gen SPEC");
  if (A->sub == GCLI_EXPORT && (!A->model || !A->out)) return cli_usage_error(CMD, "export needs --model and --out DIR");
  if (!A->model && (A->hw < 1 || A->ksize < 1)) return cli_usage_error(CMD, "--hw and --ksize are required with --conn/--gen");
  if (!A->model && A->ksize == 2) return cli_usage_error(CMD, "--ksize expects 1 or 3, got 2");
  if (A->out && A->sub == GCLI_BENCH) return cli_usage_error(CMD, "--out belongs to plan and export");
  if ((A->torch || A->json_out) && A->sub != GCLI_BENCH)
    return cli_usage_error(CMD, "%s belongs to bench", A->torch ? "--torch" : "--json-out");
  if (A->weights && (A->sub != GCLI_BENCH || A->model))
    return cli_usage_error(CMD, "--weights belongs to bench with --conn FILE or --gen SPEC (one layer)");
  return CLI_OK;
}

/* ---- layers ------------------------------------------------------------------------------------ */

void gcli_layers_free(gcli_layer *l, int count) {
  for (int i = 0; l && i < count; i++) ts_csr_free(&l[i].conn), ts_free(l[i].w);
  free(l);
}

static int single_layer(const gcli_args *a, gcli_layer *ly) {
  ts_status s = a->conn ? ts_gconv_conn_load(a->conn, &ly->conn) : ts_pattern_generate(a->gen, &ly->conn, NULL);
  if (s != TS_OK) return cli_fail(CMD, s);
  const char *src = a->conn ? a->conn : a->gen, *base = a->conn && strrchr(a->conn, '/') ? strrchr(a->conn, '/') + 1 : src;
  snprintf(ly->name, sizeof ly->name, "%.63s", base);
  snprintf(ly->spec, sizeof ly->spec, "%s", src);
  ly->l = (ts_gconv_layer){(int)a->batch, (int)ly->conn.cols, (int)ly->conn.rows, (int)a->hw, (int)a->hw, (int)a->ksize,
                           (int)a->stride};
  ly->learned = true;
  ly->groups = a->groups ? (int)a->groups : ly->l.cout % 4 == 0 ? 4 : 1;
  if (ly->l.cout % ly->groups)
    return cli_usage_error(CMD, "--groups %d does not divide the %d output channels", ly->groups, ly->l.cout);
  if ((s = ts_gconv_conn_check(&ly->l, &ly->conn)) != TS_OK) {
    ts_error_prefix("%s: ", src);
    return cli_fail(CMD, s);
  }
  if (a->weights && (s = ts_gconv_weights_load(a->weights, &ly->l, &ly->w)) != TS_OK) return cli_fail(CMD, s);
  return CLI_OK;
}

int gcli_layers(const gcli_args *a, gcli_layer **out, int *count) {
  *out = NULL, *count = 0;
  if (!a->model) {
    gcli_layer *ly = calloc(1, sizeof *ly);
    if (!ly) return cli_fail(CMD, ts_error(TS_ERR_OOM, "out of memory"));
    int r = single_layer(a, ly);
    if (r != CLI_OK) return gcli_layers_free(ly, 1), r;
    *out = ly, *count = 1;
    return CLI_OK;
  }
  ts_gconv_model_layer *t;
  int n;
  ts_status s = ts_gconv_model_layers(a->model, (int)a->batch, &t, &n);
  if (s != TS_OK) return s == TS_ERR_NOT_FOUND ? cli_usage_error(CMD, "%s", ts_last_error()) : cli_fail(CMD, s);
  const int first = (int)a->first, last = a->last < 0 || a->last >= n ? n - 1 : (int)a->last;
  if (first > last) {
    ts_free(t);
    return cli_usage_error(CMD, "--layers: %s has layers 0-%d", a->model, n - 1);
  }
  gcli_layer *L = calloc((size_t)(last - first + 1), sizeof *L);
  s = L ? TS_OK : ts_error(TS_ERR_OOM, "out of memory");
  int k = 0;
  for (int i = first; s == TS_OK && i <= last; i++, k++) {
    gcli_layer *ly = &L[k];
    snprintf(ly->name, sizeof ly->name, "%s", t[i].name);
    ly->l = t[i].layer, ly->groups = t[i].groups, ly->learned = t[i].learned;
    s = ts_gconv_model_conn_spec(&t[i], i, &a->conn_opts, ly->spec, sizeof ly->spec);
    if (s == TS_OK) s = ts_pattern_generate(ly->spec, &ly->conn, NULL);
  }
  ts_free(t);
  if (s != TS_OK) return gcli_layers_free(L, k), cli_fail(CMD, s);
  *out = L, *count = k;
  return CLI_OK;
}

/* ---- cost model and planning --------------------------------------------------------------------- */

int gcli_cost_setup(const gcli_args *a, gcli_cost *c) {
  memset(c, 0, sizeof *c);
  const double t0 = ts_now();
  ts_status s;
  if (a->analytic) {
    s = ts_gconv_cost_analytic(&c->m);
  } else {
    ts_gconv_profile p;
    s = ts_gconv_profile_default_path(a->level, c->path, sizeof c->path);
    if (s == TS_OK) s = ts_gconv_profile_get(a->level, c->path, true, &p, &c->measured);
    if (s == TS_OK) s = ts_gconv_cost_create(&c->m, &p), ts_gconv_profile_free(&p);
  }
  c->ms = (ts_now() - t0) * 1e3;
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

void gcli_cost_json(cJSON *j, const gcli_args *a, const gcli_cost *c) {
  cJSON_AddStringToObject(j, "cost", a->analytic ? "analytic" : "profile");
  cJSON_AddStringToObject(j, "cost_source", ts_gconv_cost_source(c->m));
  if (a->analytic) return;
  cJSON_AddStringToObject(j, "profile_level", ts_gconv_profile_level_name(a->level));
  cJSON_AddStringToObject(j, "profile_path", c->path);
  cJSON_AddBoolToObject(j, "profile_measured", c->measured);
  cJSON_AddNumberToObject(j, "profile_ms", c->ms);
}

ts_status gcli_plan(const gcli_args *a, const gcli_layer *ly, const gcli_cost *c, ts_gconv_plan *p, bool *cached) {
  *cached = false;
  return a->no_cache ? ts_gconv_plan_make(&ly->l, &ly->conn, c->m, &a->po, p)
                     : ts_gconv_plan_get(&ly->l, &ly->conn, c->m, &a->po, p, cached);
}

/* ---- plan ---------------------------------------------------------------------------------------- */

static void print_plan(const gcli_layer *ly, const ts_gconv_plan *p, bool cached) {
  const ts_gconv_layer *l = &p->layer;
  printf("%s: %d -> %d, %dx%d, %dx%d/%d, batch %d; %lld connections (%.1f%%)\n", ly->spec, l->cin, l->cout, l->h, l->w,
         l->ksize, l->ksize, l->stride, l->n, (long long)p->nnz, 100.0 * (double)p->nnz / ((double)l->cin * l->cout));
  printf("plan %016llx %s: %d partitions, reorder %s, solver %s; predicted %.4f ms (dense %.4f ms), planned in %.1f ms\n",
         (unsigned long long)p->key, cached ? "(cached)" : "(new)", p->nparts, ts_reorder_method_name(p->method),
         ts_gconv_solver_name(p->solver), p->pred_ms, p->dense_pred_ms, p->plan_ms);
  printf("%-8s %10s %10s %10s %8s %10s %8s %7s\n", "reorder", "knapsack", "segment", "greedy", "ilp ms", "final", "parts",
         "solves");
  for (int i = 0; i < p->ncand; i++) {
    const ts_gconv_candidate *c = &p->cand[i];
    printf("%-8s %10.4f %10.4f %10.4f %8.1f %10.4f %8d %4d/%-3d%s\n", ts_reorder_method_name(c->method), c->knapsack_pred_ms,
           c->segment_pred_ms, c->greedy_pred_ms, c->ilp_ms, c->pred_ms, c->nparts, c->ilp_improved, c->ilp_solves,
           c->method == p->method ? " <- chosen" : "");
  }
  printf("cost model: %s\n", p->cost_source);
}

static int cmd_plan(const gcli_args *a) {
  gcli_layer *ly;
  int n, r = gcli_layers(a, &ly, &n);
  if (r != CLI_OK) return r;
  gcli_cost c;
  if ((r = gcli_cost_setup(a, &c)) != CLI_OK) return gcli_layers_free(ly, n), r;
  ts_gconv_plan p;
  bool cached;
  ts_status s = gcli_plan(a, ly, &c, &p, &cached);
  if (s == TS_OK && a->out) s = ts_gconv_plan_save(&p, a->out);
  if (s == TS_OK) {
    if (a->co.json) {
      cJSON *j;
      s = ts__gconv_plan_to_cjson(&p, &j);
      if (s == TS_OK) {
        cJSON_AddBoolToObject(j, "cached", cached);
        gcli_cost_json(j, a, &c);
        if (a->out) cJSON_AddStringToObject(j, "out", a->out);
        cli_print_json(j);
      }
    } else {
      print_plan(ly, &p, cached);
      if (a->out) printf("wrote %s\n", a->out);
    }
  }
  ts_gconv_plan_free(&p);
  ts_gconv_cost_destroy(c.m);
  gcli_layers_free(ly, n);
  return s == TS_OK ? CLI_OK : cli_fail(CMD, s);
}

/* ---- export ---------------------------------------------------------------------------------------- */

/* DIR/layers.json {model, connectivity, condense, batch, layers: [{index, name, n, cin, cout, h, w, ksize,
 * stride, groups, learned, nnz, spec, conn: "LLL.npy"}]} and DIR/LLL.npy (cout x cin bool). */
static int cmd_export(const gcli_args *a) {
  gcli_layer *L;
  int n, r = gcli_layers(a, &L, &n);
  if (r != CLI_OK) return r;
  ts_status s = ts_mkdirs(a->out);
  cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "layers");
  cJSON_AddStringToObject(j, "model", a->model);
  cJSON_AddStringToObject(j, "connectivity", ts_gconv_connectivity_name(a->conn_opts.mode));
  cJSON_AddNumberToObject(j, "condense", a->conn_opts.condense);
  cJSON_AddNumberToObject(j, "batch", (double)a->batch);
  for (int i = 0; s == TS_OK && i < n; i++) {
    char file[32], path[4200];
    snprintf(file, sizeof file, "%03d.npy", (int)a->first + i);
    snprintf(path, sizeof path, "%s/%s", a->out, file);
    s = ts_pattern_save(path, &L[i].conn);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    const ts_gconv_layer *l = &L[i].l;
    cJSON_AddNumberToObject(o, "index", (double)a->first + i);
    cJSON_AddStringToObject(o, "name", L[i].name);
    const int f[] = {l->n, l->cin, l->cout, l->h, l->w, l->ksize, l->stride, L[i].groups};
    const char *k[] = {"n", "cin", "cout", "h", "w", "ksize", "stride", "groups"};
    for (int q = 0; q < 8; q++) cJSON_AddNumberToObject(o, k[q], f[q]);
    cJSON_AddBoolToObject(o, "learned", L[i].learned);
    cJSON_AddNumberToObject(o, "nnz", (double)L[i].conn.nnz);
    cJSON_AddStringToObject(o, "spec", L[i].spec);
    cJSON_AddStringToObject(o, "conn", file);
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/layers.json", a->out);
  if (s == TS_OK) s = ts__json_write_file(path, j);
  cJSON_Delete(j);
  gcli_layers_free(L, n);
  if (s != TS_OK) return cli_fail(CMD, s);
  if (!a->co.json) printf("wrote %s and %d connectivity files\n", path, n);
  else {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "layers_json", path);
    cJSON_AddNumberToObject(o, "layers", n);
    cli_print_json(o);
  }
  return CLI_OK;
}

int cmd_gconv(int argc, char **argv) {
  gcli_args a;
  int r = parse(argc, argv, &a);
  if (r != CLI_OK) return r;
  if (a.co.help) {
    usage();
    return CLI_OK;
  }
  return a.sub == GCLI_PLAN ? cmd_plan(&a) : a.sub == GCLI_EXPORT ? cmd_export(&a) : gcli_bench(&a);
}
