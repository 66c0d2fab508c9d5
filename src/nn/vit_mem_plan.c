/* The ViT training memory planner (nn.h, ts_nn_vit_plan_memory): one block's training forward +
 * backward timed per strategy by the measure engine, kept in the artifact store, and a
 * multiple-choice knapsack over the layers under the budget.
 *
 * Artifact "vit-train-mem" (docs/FORMATS.md): payload {"time_s": [recompute, store_scores,
 * checkpoint], "rounds": N}, seconds per block (medians); the key hashes the block's shape, the
 * batch, the backend (kind, mask bitmap, permutation, plan statistics, stored score floats), the
 * threads, the kernel level and the CPU, so a stored entry is only ever read for the same work on
 * the same machine. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "nn/nn_internal.h"

static const ts__artifact_kind KIND = {"vit-train-mem", 1};

void ts_nn_mem_plan_opts_default(ts_nn_mem_plan_opts *o, int64_t budget) {
  memset(o, 0, sizeof *o);
  o->budget = budget;
  o->rounds = 3;
  o->cache = true;
}

/* ---- measuring one block -------------------------------------------------------------------- */

typedef struct probe {
  ts_nn_vit *m;
  ts_nn_mem_strategy s;
  const float *x_in, *dy;
  const ts__vit_work *w;
} probe;

/* Block 0's forward (kept as strategy s keeps it) and backward from dy; the arena as it was after. */
static ts_status probe_call(void *arg) {
  const probe *p = arg;
  ts_nn_vit *m = p->m;
  ts__arena *a = &m->arena;
  const int64_t lo = a->lo, hi = a->hi, R = m->batch * m->n, D = m->cfg.dim;
  const bool ck = p->s == TS_NN_MEM_CHECKPOINT;
  ts__vit_clock clk = {0};
  ts__vit_saved sv;
  ts__vit_layer gl;
  ts__vit_grad_layer(m, &m->layers[0], &gl);
  float *x_out = ts__arena_lo(a, R * D);
  ts_status st = x_out ? ts__vit_saved_alloc(m, ck, p->s == TS_NN_MEM_STORE_SCORES, &sv) : TS_ERR_INTERNAL;
  if (st == TS_OK) st = ts__vit_block_fwd(m, &m->layers[0], p->x_in, &sv, p->w, x_out, &clk);
  a->hi = hi;
  if (st == TS_OK) memcpy(p->w->dx, p->dy, (size_t)(R * D) * sizeof(float));
  if (st == TS_OK && ck) {
    st = ts__vit_saved_alloc(m, true, false, &sv);
    if (st == TS_OK) st = ts__vit_block_fwd(m, &m->layers[0], p->x_in, &sv, p->w, NULL, &clk);
  }
  if (st == TS_OK) st = ts__vit_block_bwd(m, &m->layers[0], &gl, p->x_in, &sv, p->w, &clk);
  a->lo = lo, a->hi = hi;
  return st;
}

static ts_status measure(ts_nn_vit *m, int rounds, double t[TS_NN_MEM_COUNT]) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim;
  const int64_t x = ts__arena_bytes(R * D), cap0 = m->arena.cap;
  TS_TRY(ts__vit_train_reserve(m, 3 * x + ts__vit_work_bytes(m) + ts__vit_saved_bytes(m, true) +
                                      ts__vit_saved_bytes(m, false)));
  ts__arena *a = &m->arena;
  a->lo = a->hi = a->peak = 0;
  ts__vit_work w;
  TS_TRY(ts__vit_work_alloc(m, &w));
  float *x_in = ts__arena_lo(a, R * D), *dy = x_in ? ts__arena_lo(a, R * D) : NULL;
  if (!dy) return TS_ERR_INTERNAL;
  ts_rng r;
  ts_rng_seed(&r, 11);
  for (int64_t i = 0; i < R * D; i++) x_in[i] = ts_rng_normal(&r), dy[i] = 1e-3f * ts_rng_normal(&r);
  probe pr[TS_NN_MEM_COUNT];
  ts_measure_fn fn[TS_NN_MEM_COUNT];
  void *arg[TS_NN_MEM_COUNT];
  for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
    pr[k] = (probe){m, (ts_nn_mem_strategy)k, x_in, dy, &w};
    fn[k] = probe_call, arg[k] = &pr[k];
  }
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = 1, mo.rounds = mo.max_rounds = rounds, mo.min_time_s = 0, mo.alternate = true;
  ts_measure_result res[TS_NN_MEM_COUNT];
  ts_status st = ts_measure_run(TS_NN_MEM_COUNT, fn, arg, &mo, res, NULL);
  for (int k = 0; st == TS_OK && k < TS_NN_MEM_COUNT; k++) {
    if (res[k].status != TS_OK) {
      char why[256];
      snprintf(why, sizeof why, "%s", ts_last_error());
      st = ts_error(res[k].status, "vit memory planner: the %s block failed: %s", ts_nn_mem_strategy_name(k), why);
    } else {
      t[k] = res[k].s.median;
    }
  }
  a->lo = a->hi = 0;
  if (a->cap > cap0) { /* grown for the probes only: give it back (the next step reserves its bound) */
    ts_free(a->base);
    memset(a, 0, sizeof *a);
  }
  return st;
}

/* ---- the artifact --------------------------------------------------------------------------- */

typedef struct cache_get {
  ts_nn_vit *m;
  int rounds;
  double t[TS_NN_MEM_COUNT];
} cache_get;

ts_status ts__vit_mem_from_cjson(const cJSON *data, double t[TS_NN_MEM_COUNT]) {
  const cJSON *ts = cJSON_IsObject(data) ? cJSON_GetObjectItemCaseSensitive(data, "time_s") : NULL;
  if (!cJSON_IsArray(ts) || cJSON_GetArraySize(ts) != TS_NN_MEM_COUNT)
    return ts_error(TS_ERR_FORMAT, "vit-train-mem: \"time_s\" is not an array of %d numbers", TS_NN_MEM_COUNT);
  double v[TS_NN_MEM_COUNT];
  for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
    const cJSON *x = cJSON_GetArrayItem(ts, k);
    if (!cJSON_IsNumber(x) || !(x->valuedouble > 0 && isfinite(x->valuedouble)))
      return ts_error(TS_ERR_FORMAT, "vit-train-mem: time_s[%d] is not a positive number", k);
    v[k] = x->valuedouble;
  }
  memcpy(t, v, sizeof v);
  return TS_OK;
}

cJSON *ts__vit_mem_to_cjson(const double t[TS_NN_MEM_COUNT], int rounds) {
  cJSON *j = cJSON_CreateObject(), *a = cJSON_CreateArray();
  if (!j || !a || !cJSON_AddItemToObject(j, "time_s", a)) {
    cJSON_Delete(j), cJSON_Delete(a);
    return NULL;
  }
  for (int k = 0; k < TS_NN_MEM_COUNT; k++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(t[k]))) return cJSON_Delete(j), NULL;
  if (!cJSON_AddNumberToObject(j, "rounds", rounds)) return cJSON_Delete(j), NULL;
  return j;
}

static ts_status cache_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  cache_get *g = ctx;
  (void)prov; /* the key holds the CPU, kernels and threads */
  return ts__vit_mem_from_cjson(data, g->t);
}

static ts_status cache_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  cache_get *g = ctx;
  TS_TRY(measure(g->m, g->rounds, g->t));
  ts_provenance_here(prov, ts_isa_active(), ts__vit_threads(g->m));
  snprintf(prov->clock, sizeof prov->clock, "%s", ts_clock_name(TS_CLOCK_WALL));
  *data = ts__vit_mem_to_cjson(g->t, g->rounds);
  return *data ? TS_OK : ts_error(TS_ERR_OOM, "vit-train-mem: cannot build the payload");
}

static void cache_key(const ts_nn_vit *m, char key[17]) {
  const ts_nn_attn *a = m->attn;
  ts_hash h;
  ts_hash_init(&h, KIND.name);
  ts_hash_i64(&h, KIND.version);
  const int64_t v[] = {m->cfg.dim, m->cfg.heads, m->cfg.mlp, m->n, m->batch, a->kind, ts_nn_attn_score_floats(a),
                       a->info.stats.nnz, a->info.stats.cells, a->info.stats.tiles_full, a->info.stats.tiles_masked,
                       a->info.stats.tiles_diag, a->info.stats.tiles_keyed, a->info.stats.panels,
                       a->info.stats.segments, ts__vit_threads(m)};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) ts_hash_i64(&h, v[i]);
  ts_hash_bytes(&h, a->mask.bits, (size_t)(a->mask.rows * a->mask.stride) * sizeof(uint64_t));
  if (a->perm) ts_hash_bytes(&h, a->perm, (size_t)a->n * sizeof(int32_t));
  ts_hash_str(&h, ts_cpu()->model), ts_hash_str(&h, ts_isa_name(ts_isa_active()));
  ts_hash_hex(&h, key);
}

static ts_status block_times(ts_nn_vit *m, const ts_nn_mem_plan_opts *o, double t[TS_NN_MEM_COUNT], bool *cached) {
  *cached = false;
  if (o->times) {
    for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
      if (!(o->times[k] >= 0 && isfinite(o->times[k])))
        return ts_error(TS_ERR_INVALID_ARG, "vit memory planner: given time of %s is %g", ts_nn_mem_strategy_name(k),
                        o->times[k]);
      t[k] = o->times[k];
    }
    return TS_OK;
  }
  const int rounds = o->rounds < 1 ? 1 : o->rounds > 64 ? 64 : o->rounds;
  if (!o->cache) return measure(m, rounds, t);
  char key[17];
  cache_key(m, key);
  cache_get g = {.m = m, .rounds = rounds};
  const ts__artifact_ops ops = {KIND, cache_accept, cache_compute, NULL};
  bool computed = false;
  TS_TRY(ts__artifact_get(&ops, key, &g, &computed));
  memcpy(t, g.t, sizeof g.t);
  *cached = !computed;
  return TS_OK;
}

/* ---- the choice ----------------------------------------------------------------------------- */

/* Minimum total time with options 0..nopt-1 per layer under `avail` bytes; *time = INFINITY when
 * nothing fits. */
static ts_status knapsack(const ts_nn_vit_mem *mm, const double t[TS_NN_MEM_COUNT], int64_t depth, int nopt, int64_t avail,
                          int64_t unit, ts_nn_mem_strategy *out, double *time) {
  *time = INFINITY;
  if (avail < 0) return TS_OK;
  int *start = ts_malloc((size_t)(depth + 1) * sizeof *start), *choice = ts_malloc((size_t)depth * sizeof *choice);
  int64_t *wt = ts_malloc((size_t)(depth * nopt) * sizeof *wt);
  double *val = ts_malloc((size_t)(depth * nopt) * sizeof *val);
  ts_status st = start && choice && wt && val ? TS_OK : TS_ERR_OOM;
  for (int64_t l = 0; st == TS_OK && l <= depth; l++) {
    start[l] = (int)(l * nopt);
    for (int j = 0; l < depth && j < nopt; j++)
      wt[l * nopt + j] = (mm->layer[j] + unit - 1) / unit, val[l * nopt + j] = t[j];
  }
  double best = 0;
  if (st == TS_OK) st = ts_knapsack_mc((int)depth, start, wt, val, avail / unit, false, choice, &best);
  if (st == TS_ERR_INFEASIBLE) {
    ts_error_clear();
    st = TS_OK;
  } else if (st == TS_OK) {
    for (int64_t l = 0; l < depth; l++) out[l] = (ts_nn_mem_strategy)(choice[l] - start[l]);
    *time = best;
  }
  ts_free(start), ts_free(choice), ts_free(wt), ts_free(val);
  return st;
}

/* The knapsack's bytes are rounded up to units: move layers to faster strategies while the exact
 * bound stays within the budget (the best single move each time), taking back that slack. */
static void repair(const ts_nn_vit_mem *mm, const double t[TS_NN_MEM_COUNT], int64_t L, int64_t budget,
                   ts_nn_mem_strategy *out) {
  for (;;) {
    double gain = 0;
    int64_t bl = -1;
    ts_nn_mem_strategy bk = TS_NN_MEM_RECOMPUTE;
    for (int64_t l = 0; l < L; l++)
      for (int k = 0; k < TS_NN_MEM_COUNT; k++) {
        const ts_nn_mem_strategy was = out[l];
        if (!(t[was] - t[k] > gain)) continue;
        out[l] = (ts_nn_mem_strategy)k;
        if (ts_nn_vit_train_bound(mm, out, L) <= budget) gain = t[was] - t[k], bl = l, bk = (ts_nn_mem_strategy)k;
        out[l] = was;
      }
    if (bl < 0) return;
    out[bl] = bk;
  }
}

ts_status ts_nn_vit_plan_memory(ts_nn_vit *m, const ts_nn_mem_plan_opts *o, ts_nn_mem_strategy *out,
                                ts_nn_mem_plan_info *info) {
  if (!m || !o || !out) return ts_error(TS_ERR_INVALID_ARG, "vit memory planner: NULL model, options or output");
  if (o->budget < 1) return ts_error(TS_ERR_INVALID_ARG, "vit memory planner: budget %lld bytes", (long long)o->budget);
  if (!m->attn) return ts_error(TS_ERR_INVALID_ARG, "vit memory planner: no attention backend (ts_nn_vit_set_attn)");
  const double t0 = ts_now();
  const int64_t L = m->cfg.depth;
  ts_nn_mem_plan_info inf;
  memset(&inf, 0, sizeof inf);
  TS_TRY(ts_nn_vit_train_mem(m, &inf.mem));
  const ts_nn_vit_mem *mm = &inf.mem;
  ts_nn_mem_strategy *alt = ts_malloc((size_t)L * sizeof *alt), *all_ck = ts_malloc((size_t)L * sizeof *all_ck);
  if (!alt || !all_ck) {
    ts_free(alt), ts_free(all_ck);
    return TS_ERR_OOM;
  }
  for (int64_t l = 0; l < L; l++) all_ck[l] = TS_NN_MEM_CHECKPOINT;
  const int64_t need = ts_nn_vit_train_bound(mm, all_ck, L);
  ts_status st = TS_OK;
  if (need > o->budget)
    st = ts_error(TS_ERR_INFEASIBLE,
                  "vit memory planner: a budget of %lld bytes is below the %lld bytes even every layer CHECKPOINT needs "
                  "(fixed %lld + working %lld + %lld layers x %lld + one block made again %lld)",
                  (long long)o->budget, (long long)need, (long long)mm->fixed, (long long)mm->scratch, (long long)L,
                  (long long)mm->layer[TS_NN_MEM_CHECKPOINT], (long long)mm->remat);
  if (st == TS_OK) st = block_times(m, o, inf.time_s, &inf.cached);
  double best = INFINITY, tk = INFINITY;
  const int64_t unit = (o->budget + 16383) / 16384, base = o->budget - mm->fixed - mm->scratch;
  /* without CHECKPOINT, then with it (its re-made block reserved) */
  if (st == TS_OK) st = knapsack(mm, inf.time_s, L, 2, base, unit, out, &best);
  if (st == TS_OK) st = knapsack(mm, inf.time_s, L, 3, base - mm->remat, unit, alt, &tk);
  if (st == TS_OK && tk < best) memcpy(out, alt, (size_t)L * sizeof *out), best = tk;
  if (st == TS_OK && !isfinite(best)) /* only the rounding to units left nothing: all CHECKPOINT fits */
    memcpy(out, all_ck, (size_t)L * sizeof *out), best = (double)L * inf.time_s[TS_NN_MEM_CHECKPOINT];
  ts_free(alt), ts_free(all_ck);
  if (st != TS_OK) return st;
  repair(mm, inf.time_s, L, o->budget, out);
  inf.bound = ts_nn_vit_train_bound(mm, out, L);
  inf.predicted_s = 0;
  for (int64_t l = 0; l < L; l++) inf.count[out[l]]++, inf.predicted_s += inf.time_s[out[l]];
  inf.ms = (ts_now() - t0) * 1e3;
  if (inf.bound > o->budget) /* the rounding above makes this impossible */
    return ts_error(TS_ERR_INTERNAL, "vit memory planner: chose %lld bytes over a budget of %lld", (long long)inf.bound,
                    (long long)o->budget);
  if (info) *info = inf;
  return TS_OK;
}
