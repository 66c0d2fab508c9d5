/* Sparse attention kernels side by side in one process, per mask: dense flash (every tile computed
 * and masked), fixed-tile block skip at every tile of the menu (empty tiles skipped, full tiles
 * unmasked), and variable tiles (blocks = column runs of row strips, tile per block by the default
 * chooser, masked residue segments), fp32 and bf16.
 *
 *   bench_attn_kernels [--masks SPEC;SPEC;...] [--heads H] [--batch B] [--d D] [--threads N]
 *                      [--strips 8,16,32] [--rho R] [--quick] [--json]
 *
 * Masks are pattern spec strings (sparse.h), e.g. window2d:h=64,w=64,k=13, plus `full:n=N` (every
 * cell allowed: the kernels' dense efficiency). Figures: median ms of repeats after warm-up
 * (bench/harness.h); effective GFLOP/s = 4 d nnz B H / t (Q K^T and P V on the allowed cells only)
 * and its % of the machine profile's all-thread peak; work_ratio = computed cells / nnz; speedups
 * are t_baseline / t. Blocks for the variable-tile schedules come from tessera/reorder.h's extractor
 * (greedy and dp, default options) and from a simple strip splitter here (--strips). The schedule +
 * plan time (the decision cost) is printed beside each run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tessera/attn.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

typedef struct job {
  ts_context *ctx;
  ts_attn_plan *plan;
  const float *q, *k, *v;
  const uint16_t *qb, *kb, *vb;
  float *o;
  int64_t B, H, n, d;
  int bf16;
} job;

static void run_job(void *arg) {
  job *j = arg;
  ts_status s = j->bf16 ? ts_attn_execute_bf16(j->ctx, j->plan, j->qb, j->kb, j->vb, j->o, j->B, j->H, j->n, j->d)
                        : ts_attn_execute(j->ctx, j->plan, j->q, j->k, j->v, j->o, j->B, j->H, j->n, j->d);
  if (s != TS_OK) fprintf(stderr, "execute failed: %s\n", ts_last_error());
}

/* ---- masks and blocks --------------------------------------------------------------------------- */

/* The mask as a bitmap, and as CSR for the block extractor (csr->rows = 0 for full:n=N). */
static ts_status make_mask(const char *spec, ts_bitmap *m, ts_csr *c) {
  memset(c, 0, sizeof *c);
  if (strncmp(spec, "full:n=", 7) == 0) {
    int64_t n = atoll(spec + 7);
    TS_TRY(ts_bitmap_alloc(m, n, n));
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) ts_bitmap_set(m, i, j, true);
    return TS_OK;
  }
  TS_TRY(ts_pattern_generate(spec, c, NULL));
  return ts_csr_to_bitmap(c, m);
}

/* Rows cut into strips of g; in each strip the union of columns splits into maximal runs of
 * consecutive columns; a run whose density in the strip is >= rho becomes a block (the rest is
 * left to the residue segments). */
static int64_t strip_blocks(const ts_bitmap *m, int32_t g, double rho, ts_block **out) {
  int64_t n = m->rows, cap = 1024, nb = 0, W = m->stride;
  ts_block *bl = malloc((size_t)cap * sizeof *bl);
  uint64_t *u = malloc((size_t)W * sizeof *u);
  for (int64_t r0 = 0; r0 < n; r0 += g) {
    int64_t r1 = r0 + g < n ? r0 + g : n;
    memset(u, 0, (size_t)W * sizeof *u);
    for (int64_t i = r0; i < r1; i++)
      for (int64_t w = 0; w < W; w++) u[w] |= ts_bitmap_row(m, i)[w];
    for (int64_t j = 0; j < n;) {
      if (!((u[j >> 6] >> (j & 63)) & 1)) {
        j++;
        continue;
      }
      int64_t c0 = j;
      while (j < n && ((u[j >> 6] >> (j & 63)) & 1)) j++;
      int64_t cnt = 0;
      for (int64_t i = r0; i < r1; i++)
        for (int64_t x = c0; x < j; x++) cnt += ts_bitmap_get(m, i, x);
      if ((double)cnt < rho * (double)((r1 - r0) * (j - c0))) continue;
      if (nb == cap) bl = realloc(bl, (size_t)(cap *= 2) * sizeof *bl);
      bl[nb++] = (ts_block){.row0 = (int32_t)r0, .col0 = (int32_t)c0, .rows = (int32_t)(r1 - r0), .cols = (int32_t)(j - c0), .nnz = cnt};
    }
  }
  free(u);
  *out = bl;
  return nb;
}

/* ---- one measured configuration ------------------------------------------------------------------ */

typedef struct ctxt {
  job j;
  const ts_bitmap *m;
  const ts_machine_profile *prof;
  bool have_prof, json;
  double flops, t_dense, t_skip64, t_best_skip;
  double peak; /* GFLOP/s the % column uses: the profile's all-thread peak, or its one-thread peak x threads
                  when running on fewer threads than the profile */
  cJSON *rows;
} ctxt;

/* Plans and times one schedule (freed here). sched_ms: time spent building the schedule (printed
 * with the plan time: the decision cost to weigh against one execution). */
static double measure(ctxt *c, const char *name, ts_attn_schedule *s, int bf16, double sched_ms) {
  ts_attn_plan *pl;
  double t0 = ts_now();
  ts_status ps = ts_attn_plan_create(&pl, c->j.ctx, s, c->m, c->j.d);
  double plan_ms = 1e3 * (ts_now() - t0);
  if (ps != TS_OK) {
    fprintf(stderr, "%s: plan: %s\n", name, ts_last_error());
    ts_attn_schedule_free(s);
    return NAN;
  }
  ts_attn_stats st;
  ts_attn_plan_stats(pl, &st);
  c->j.plan = pl;
  c->j.bf16 = bf16;
  ts_bench_opts o = ts_bench_opts_default();
  o.warmup = 1;
  o.repeats = 5;
  o.min_time_s = 0.3;
  ts_bench_result r;
  ts_bench_run(&o, run_job, &c->j, &r);
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(s);
  double gf = c->flops / r.median_s * 1e-9;
  double pct = c->have_prof && c->peak > 0 ? 100.0 * gf / c->peak : NAN;
  double sp_dense = isfinite(c->t_dense) ? c->t_dense / r.median_s : NAN;
  double sp_skip = isfinite(c->t_skip64) ? c->t_skip64 / r.median_s : NAN;
  printf("  %-34s %8.3f ms (min %8.3f) %6.1f GF/s %5.1f%% peak  work %5.2f  masked %6lld full %6lld  x%5.2f dense"
         "  x%5.2f skip64  [schedule+plan %.1f ms]\n",
         name, 1e3 * r.median_s, 1e3 * r.min_s, gf, pct, st.work_ratio, (long long)st.tiles_masked, (long long)st.tiles_full,
         sp_dense, sp_skip, sched_ms + plan_ms);
  fflush(stdout);
  if (c->json) {
    cJSON *row = ts_bench_result_json(&r, c->flops, 0, NULL);
    cJSON_AddNumberToObject(row, "pct_peak", isfinite(pct) ? pct : -1);
    cJSON_AddStringToObject(row, "name", name);
    cJSON_AddNumberToObject(row, "work_ratio", st.work_ratio);
    cJSON_AddNumberToObject(row, "tiles_masked", (double)st.tiles_masked);
    cJSON_AddNumberToObject(row, "tiles_full", (double)st.tiles_full);
    cJSON_AddNumberToObject(row, "schedule_plan_ms", sched_ms + plan_ms);
    cJSON_AddItemToArray(c->rows, row);
  }
  return r.median_s;
}

int main(int argc, char **argv) {
  const char *masks = "window2d:h=64,w=64,k=13;window1d:n=4096,w=64,global=16;vitdet:h=64,w=64,win=14;full:n=2048";
  int64_t H = 8, B = 1, d = 64;
  int threads = 0, strips[8] = {8, 16, 32}, nstrips = 3;
  double rho = 0.4;
  bool json = false, quick = false;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--masks") && a + 1 < argc) masks = argv[++a];
    else if (!strcmp(argv[a], "--heads") && a + 1 < argc) H = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--batch") && a + 1 < argc) B = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--d") && a + 1 < argc) d = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--strips") && a + 1 < argc) nstrips = ts_bench_parse_ints(argv[++a], strips, 8, 1, 1 << 20);
    else if (!strcmp(argv[a], "--rho") && a + 1 < argc) rho = atof(argv[++a]);
    else if (!strcmp(argv[a], "--json")) json = true;
    else if (!strcmp(argv[a], "--quick")) quick = true;
    else {
      fprintf(stderr, "usage: %s [--masks SPEC;SPEC] [--heads H] [--batch B] [--d D] [--threads N] [--strips 8,16,32] "
                      "[--rho R] [--quick] [--json]\n", argv[0]);
      return 2;
    }
  }
  if (nstrips < 0) {
    fprintf(stderr, "%s: --strips takes up to 8 strip heights, e.g. 8,16,32\n", argv[0]);
    return 2;
  }
  if (quick) masks = "window2d:h=32,w=32,k=13;full:n=512", H = 4;
  ts_machine_profile prof;
  bool have_prof = ts_bench_profile(&prof) == TS_OK;
  ts_context *ctx;
  if (ts_context_create(&ctx, threads) != TS_OK) return 1;
  const int nt = ts_context_threads(ctx);
  double peak = !have_prof ? NAN : nt >= prof.threads ? prof.peak_gflops_fp32 : prof.peak_gflops_fp32_1t * nt;
  printf("attention kernels: batch %lld heads %lld d %lld threads %d isa %s%s; %% of peak %.1f GFLOP/s (profile: %.1f at "
         "1 thread, %.1f at %d)\n",
         (long long)B, (long long)H, (long long)d, nt, ts_isa_name(ts_isa_active()), ts_cpu()->avx512bf16 ? " +bf16" : "", peak,
         have_prof ? prof.peak_gflops_fp32_1t : NAN, have_prof ? prof.peak_gflops_fp32 : NAN, have_prof ? prof.threads : 0);
  cJSON *root = json ? cJSON_CreateArray() : NULL;

  char *list = strdup(masks);
  for (char *save = NULL, *spec = strtok_r(list, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) {
    ts_bitmap m;
    ts_csr csr;
    if (make_mask(spec, &m, &csr) != TS_OK) {
      fprintf(stderr, "mask %s: %s\n", spec, ts_last_error());
      continue;
    }
    int64_t n = m.rows, nnz = ts_bitmap_count(&m), tot = B * H * n * d;
    float *q = ts_malloc((size_t)tot * 4), *k = ts_malloc((size_t)tot * 4), *v = ts_malloc((size_t)tot * 4), *o = ts_malloc((size_t)tot * 4);
    uint16_t *qb = ts_malloc((size_t)tot * 2), *kb = ts_malloc((size_t)tot * 2), *vb = ts_malloc((size_t)tot * 2);
    ts_rng r;
    ts_rng_seed(&r, 42);
    for (int64_t x = 0; x < tot; x++) q[x] = ts_rng_normal(&r), k[x] = ts_rng_normal(&r), v[x] = ts_rng_normal(&r);
    ts_f32_to_bf16_array(q, qb, (size_t)tot);
    ts_f32_to_bf16_array(k, kb, (size_t)tot);
    ts_f32_to_bf16_array(v, vb, (size_t)tot);
    ctxt c = {.j = {ctx, NULL, q, k, v, qb, kb, vb, o, B, H, n, d, 0}, .m = &m, .prof = &prof, .have_prof = have_prof,
              .json = json, .flops = 4.0 * (double)d * (double)nnz * (double)(B * H), .t_dense = NAN, .t_skip64 = NAN,
              .peak = peak};
    printf("\nmask %s: n %lld, nnz %lld (density %.4f)\n", spec, (long long)n, (long long)nnz, (double)nnz / ((double)n * n));
    cJSON *jm = NULL;
    if (json) {
      jm = cJSON_CreateObject();
      cJSON_AddStringToObject(jm, "mask", spec);
      cJSON_AddNumberToObject(jm, "n", (double)n);
      cJSON_AddNumberToObject(jm, "nnz", (double)nnz);
      c.rows = cJSON_AddArrayToObject(jm, "runs");
      cJSON_AddItemToArray(root, jm);
    }
    ts_attn_schedule s;
    char name[96];
    bool full = strncmp(spec, "full:", 5) == 0;
    if (ts_attn_schedule_dense(&s, n, 64, 64) == TS_OK) c.t_dense = measure(&c, "dense flash 64x64", &s, 0, 0);
    if (ts_attn_schedule_blockskip(&s, n, 64, 64) == TS_OK) c.t_skip64 = measure(&c, "skip 64x64", &s, 0, 0);
    const ts_attn_tile *menu;
    int nmenu = ts_attn_default_menu(&menu);
    double best = INFINITY;
    int bi = -1;
    for (int t = 0; t < nmenu; t++) {
      if (menu[t].br == 64 && menu[t].bc == 64) continue;
      if (full && menu[t].br < 32) continue;
      snprintf(name, sizeof name, "skip %dx%d", menu[t].br, menu[t].bc);
      if (ts_attn_schedule_blockskip(&s, n, menu[t].br, menu[t].bc) != TS_OK) continue;
      double t1 = measure(&c, name, &s, 0, 0);
      if (t1 < best) best = t1, bi = t;
    }
    if (c.t_skip64 < best) best = c.t_skip64, bi = -1;
    printf("  best fixed tile: %s (%.3f ms)\n", bi < 0 ? "64x64" : (snprintf(name, sizeof name, "%dx%d", menu[bi].br, menu[bi].bc), name),
           1e3 * best);
    if (!full) {
      int dd = (int)d;
      for (int g = 0; g < nstrips; g++) {
        ts_block *bl;
        double t0 = ts_now();
        int64_t nb = strip_blocks(&m, strips[g], rho, &bl);
        ts_attn_tile *tiles = malloc((size_t)(nb ? nb : 1) * sizeof *tiles);
        ts_attn_choose_tiles(bl, nb, menu, nmenu, NULL, &dd, tiles);
        ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
        bo.residue = (ts_attn_tile){8, 16};
        snprintf(name, sizeof name, "variable strips %d (%lld blocks)", strips[g], (long long)nb);
        if (ts_attn_schedule_from_blocks(&s, n, bl, tiles, nb, &m, &bo) == TS_OK) {
          double sched_ms = 1e3 * (ts_now() - t0);
          double t1 = measure(&c, name, &s, 0, sched_ms);
          printf("    -> x%.2f vs best fixed tile\n", best / t1);
          if (ts_attn_schedule_from_blocks(&s, n, bl, tiles, nb, &m, &bo) == TS_OK) {
            snprintf(name, sizeof name, "bf16 variable strips %d", strips[g]);
            measure(&c, name, &s, 1, sched_ms);
          }
        }
        free(bl);
        free(tiles);
      }
    }
    for (int em = 0; em < 2 && !full; em++) {
      ts_blocks_opts eo;
      ts_blocks_opts_default(&eo);
      eo.method = em ? TS_EXTRACT_DP : TS_EXTRACT_GREEDY;
      ts_blocks bx;
      double t0 = ts_now();
      if (ts_blocks_extract(&csr, &eo, &bx) != TS_OK) {
        fprintf(stderr, "extract %s: %s\n", ts_extract_method_name(eo.method), ts_last_error());
        continue;
      }
      int dd = (int)d;
      ts_attn_tile *tiles = malloc((size_t)(bx.nblocks ? bx.nblocks : 1) * sizeof *tiles);
      ts_attn_choose_tiles(bx.blocks, bx.nblocks, menu, nmenu, NULL, &dd, tiles);
      ts_attn_blocks_opts bo = ts_attn_blocks_opts_default();
      bo.residue = (ts_attn_tile){8, 16};
      if (ts_attn_schedule_from_blocks(&s, n, bx.blocks, tiles, bx.nblocks, &m, &bo) == TS_OK) {
        double sched_ms = 1e3 * (ts_now() - t0);
        snprintf(name, sizeof name, "variable %s (%lld blocks)", ts_extract_method_name(eo.method), (long long)bx.nblocks);
        double t1 = measure(&c, name, &s, 0, sched_ms);
        printf("    -> x%.2f vs best fixed tile\n", best / t1);
        if (ts_attn_schedule_from_blocks(&s, n, bx.blocks, tiles, bx.nblocks, &m, &bo) == TS_OK) {
          snprintf(name, sizeof name, "bf16 variable %s", ts_extract_method_name(eo.method));
          measure(&c, name, &s, 1, sched_ms);
        }
      }
      free(tiles);
      ts_blocks_free(&bx);
    }
    if (ts_attn_schedule_blockskip(&s, n, 64, 64) == TS_OK) measure(&c, "bf16 skip 64x64", &s, 1, 0);
    if (bi >= 0 && ts_attn_schedule_blockskip(&s, n, menu[bi].br, menu[bi].bc) == TS_OK) {
      snprintf(name, sizeof name, "bf16 skip %dx%d", menu[bi].br, menu[bi].bc);
      measure(&c, name, &s, 1, 0);
    }
    ts_free(q), ts_free(k), ts_free(v), ts_free(o), ts_free(qb), ts_free(kb), ts_free(vb);
    ts_bitmap_free(&m);
    ts_csr_free(&csr);
  }
  free(list);
  if (json) {
    ts_bench_print_json(root);
    cJSON_Delete(root);
  }
  ts_context_destroy(ctx);
  return 0;
}
