/* plan3d cost model: a configuration (node order, TP per type, dp, micro-batch, split) laid out
 * on GPUs in Megatron's rank order (tp fastest, then dp, then pp), priced with the profile, the
 * 1F1B simulation, activation transfers and all-reduces over the links they share, and checked
 * against each GPU's memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan3d/plan3d_estimate.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

ts_status ts__p3_ctx_init(p3_ctx *x, const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p,
                          const int *order, int norder) {
  memset(x, 0, sizeof *x);
  x->m = m, x->c = c, x->p = p;
  if (norder < 1 || norder > TS_P3_MAX_NODES)
    return ts_error(TS_ERR_INVALID_ARG, "a node order of %d nodes (1 to %d)", norder, TS_P3_MAX_NODES);
  int used[TS_P3_MAX_TYPES] = {0};
  int n = 0;
  for (int k = 0; k < norder; k++) {
    int t = order[k];
    if (t < 0 || t >= c->ntypes) return ts_error(TS_ERR_INVALID_ARG, "node order: type index %d of %d types", t, c->ntypes);
    if (++used[t] > c->types[t].count)
      return ts_error(TS_ERR_INVALID_ARG, "node order uses %d nodes of type '%s', the cluster has %d", used[t],
                      c->types[t].name, c->types[t].count);
    n += c->types[t].gpus_per_node;
  }
  if (n > P3_MAX_GPUS) return ts_error(TS_ERR_UNSUPPORTED, "%d GPUs: at most %d are supported", n, P3_MAX_GPUS);
  x->nnodes = norder;
  memcpy(x->order, order, (size_t)norder * sizeof *order);
  memcpy(x->node_counts, used, sizeof used);
  x->ngpus = n;
  x->gpu_node = malloc((size_t)n * sizeof *x->gpu_node);
  x->gpu_type = malloc((size_t)n * sizeof *x->gpu_type);
  if (!x->gpu_node || !x->gpu_type) {
    ts__p3_ctx_free(x);
    return ts_error(TS_ERR_OOM, "out of memory for a layout of %d GPUs", n);
  }
  int g = 0;
  for (int k = 0; k < norder; k++)
    for (int i = 0; i < c->types[order[k]].gpus_per_node; i++) x->gpu_node[g] = k, x->gpu_type[g++] = order[k];
  return TS_OK;
}

void ts__p3_ctx_free(p3_ctx *x) {
  free(x->gpu_node), free(x->gpu_type);
  x->gpu_node = x->gpu_type = NULL;
}

ts_status ts__p3_layout(const p3_ctx *x, int dp, const int *tp, p3_stage_layout *st, int *pp, char *why, size_t cap) {
  int pos = 0, s = 0;
  while (pos < x->ngpus) {
    if (s == TS_P3_MAX_STAGES) {
      snprintf(why, cap, "more than %d stages", TS_P3_MAX_STAGES);
      return TS_ERR_INFEASIBLE;
    }
    int t0 = x->gpu_type[pos];
    int t = tp[t0], size = dp * t;
    if (pos + size > x->ngpus) {
      snprintf(why, cap, "dp %d x tp %d does not divide the %d GPUs (stage %d would start at GPU %d)", dp, t, x->ngpus,
               s, pos);
      return TS_ERR_INFEASIBLE;
    }
    unsigned mask = 0;
    for (int g = pos; g < pos + size; g++) mask |= 1u << x->gpu_type[g];
    for (int k = 0; k < x->c->ntypes; k++)
      if ((mask >> k & 1) && tp[k] != t) {
        snprintf(why, cap, "stage %d spans node types '%s' and '%s' whose TP degrees differ (%d, %d)", s,
                 x->c->types[t0].name, x->c->types[k].name, t, tp[k]);
        return TS_ERR_INFEASIBLE;
      }
    /* every TP group inside one node */
    for (int r = 0; r < dp; r++) {
      int a = pos + r * t;
      if (x->gpu_node[a] != x->gpu_node[a + t - 1]) {
        snprintf(why, cap, "stage %d: the TP group of GPUs %d..%d spans two nodes", s, a, a + t - 1);
        return TS_ERR_INFEASIBLE;
      }
    }
    st[s].first_gpu = pos, st[s].ngpus = size, st[s].tp = t, st[s].types = mask;
    pos += size;
    s++;
  }
  *pp = s;
  return TS_OK;
}

/* acc becomes the slower of acc and l, point to point and for all-reduces (each side's own
 * all-reduce figures where it has them, else its point-to-point ones). */
static void link_worst(ts_p3_link *acc, ts_p3_link l) {
  double abw = l.ar_bandwidth > 0 ? l.ar_bandwidth : l.bandwidth, alat = l.ar_bandwidth > 0 ? l.ar_latency : l.latency;
  if (l.bandwidth < acc->bandwidth) acc->bandwidth = l.bandwidth;
  if (l.latency > acc->latency) acc->latency = l.latency;
  if (abw < acc->ar_bandwidth) acc->ar_bandwidth = abw;
  if (alat > acc->ar_latency) acc->ar_latency = alat;
}

static const ts_p3_link LINK_NONE = {INFINITY, 0, INFINITY, 0};

/* The slowest NIC of two nodes. */
static ts_p3_link nic_pair(const p3_ctx *x, int n1, int n2) {
  ts_p3_link w = LINK_NONE;
  link_worst(&w, x->c->types[x->order[n1]].inter);
  link_worst(&w, x->c->types[x->order[n2]].inter);
  return w;
}

/* Looks up (gpu of type k, tp, mbs); fills why when missing. */
static const p3_entry *entry(const p3_ctx *x, int k, int tp, int mbs, double *scale, char *why, size_t cap) {
  const p3_entry *e = ts__p3_lookup(x->p, x->c->types[k].gpu, tp, mbs, scale);
  if (!e) {
    int tps[32], n = 0;
    ts_p3_profile_tps(x->p, x->c->types[k].gpu, tps, 32, &n);
    char list[160] = "";
    for (int i = 0, o = 0; i < n && o < (int)sizeof list - 8; i++)
      o += snprintf(list + o, sizeof list - (size_t)o, "%s%d", i ? ", " : "", tps[i]);
    if (n)
      snprintf(why, cap, "profile: no entry for gpu '%s' (node type '%s') at tp %d; it lists tp %s", x->c->types[k].gpu,
               x->c->types[k].name, tp, list);
    else
      snprintf(why, cap, "profile: no entry for gpu '%s' (node type '%s')", x->c->types[k].gpu, x->c->types[k].name);
  }
  return e;
}

/* Most layers stage s holds within the memory of its smallest GPU. */
static int max_layers(const p3_ctx *x, const p3_stage_layout *ls, int s, int pp, int mbs, int m, double *limit) {
  const ts_p3_model *md = x->m;
  double lim = INFINITY;
  for (int k = 0; k < x->c->ntypes; k++)
    if (ls[s].types >> k & 1 && x->c->types[k].memory < lim) lim = x->c->types[k].memory;
  *limit = lim;
  int inflight = pp - s < m ? pp - s : m;
  bool emb = s == 0, head = s == pp - 1;
  double m1 = ts__p3_stage_memory(md, 1, emb, head, pp, ls[s].tp, mbs, inflight, NULL);
  if (m1 > lim) return 0;
  double m2 = ts__p3_stage_memory(md, 2, emb, head, pp, ls[s].tp, mbs, inflight, NULL);
  double per = m2 - m1;
  if (per <= 0) return md->layers;
  double k = 1 + floor((lim - m1) / per);
  return k > md->layers ? md->layers : (int)k;
}

ts_status ts__p3_price(const p3_ctx *x, int dp, const p3_stage_layout *ls, int pp, int mbs, const int *split,
                       ts_p3_partitioner method, p3_scratch *w, ts_p3_plan *plan, char *why, size_t cap) {
  const ts_p3_model *md = x->m;
  const ts_p3_cluster *c = x->c;
  int L = md->layers;
  if (md->global_batch % (dp * mbs)) {
    snprintf(why, cap, "dp %d x micro-batch %d does not divide the global batch %d", dp, mbs, md->global_batch);
    return TS_ERR_INFEASIBLE;
  }
  int m = md->global_batch / (dp * mbs);
  if (pp > L) {
    snprintf(why, cap, "%d stages for %d layers", pp, L);
    return TS_ERR_INFEASIBLE;
  }
  /* per-stage, per-layer costs (the slowest type of a mixed stage), the fixed parts, and transfers */
  double act_bytes = (double)mbs * md->seq * md->hidden * md->activation_bytes;
  for (int s = 0; s < pp; s++) {
    double ef = 0, eb = 0, hf = 0, hb = 0, upd = 0;
    for (int l = 0; l < L; l++) w->cost[(size_t)s * L + l] = 0, w->lf[(size_t)s * L + l] = 0, w->lb[(size_t)s * L + l] = 0;
    for (int k = 0; k < c->ntypes; k++) {
      if (!(ls[s].types >> k & 1)) continue;
      double sc;
      const p3_entry *e = entry(x, k, ls[s].tp, mbs, &sc, why, cap);
      if (!e) return TS_ERR_NOT_FOUND;
      for (int l = 0; l < L; l++) {
        ts_p3_cost q = ts__p3_layer_cost(e, l);
        size_t i = (size_t)s * L + l;
        if ((q.fwd + q.bwd) * sc > w->cost[i]) w->cost[i] = (q.fwd + q.bwd) * sc, w->lf[i] = q.fwd * sc, w->lb[i] = q.bwd * sc;
      }
      if (s == 0 && (e->embed.fwd + e->embed.bwd) * sc > ef + eb) ef = e->embed.fwd * sc, eb = e->embed.bwd * sc;
      if (s == pp - 1 && (e->head.fwd + e->head.bwd) * sc > hf + hb) hf = e->head.fwd * sc, hb = e->head.bwd * sc;
      if (e->update_per_param > upd) upd = e->update_per_param;
    }
    w->ef[s] = ef + hf, w->eb[s] = eb + hb, w->upd[s] = upd;
  }
  /* activation transfers s -> s+1, over the slowest link any pipeline replica crosses */
  for (int s = 0; s + 1 < pp; s++) {
    int streams[TS_P3_MAX_NODES] = {0};
    bool cross = false;
    double t_intra = 0;
    ts_p3_link worst = LINK_NONE;
    for (int r = 0; r < dp; r++) {
      int a = ls[s].first_gpu + r * ls[s].tp, b = ls[s + 1].first_gpu + r * ls[s + 1].tp;
      int na = x->gpu_node[a], nb = x->gpu_node[b];
      if (na != nb) {
        cross = true;
        streams[na]++;
        link_worst(&worst, nic_pair(x, na, nb));
      } else {
        ts_p3_link l = c->types[x->order[na]].intra;
        int t = ls[s].tp < ls[s + 1].tp ? ls[s].tp : ls[s + 1].tp;
        double v = l.latency + act_bytes / t / l.bandwidth; /* TP ranks send their slices in parallel */
        if (v > t_intra) t_intra = v;
      }
    }
    double v = t_intra;
    if (cross) {
      int mx = 0;
      for (int n = 0; n < x->nnodes; n++)
        if (streams[n] > mx) mx = streams[n];
      double t = worst.latency + act_bytes * mx / worst.bandwidth; /* the replicas share the NIC */
      if (t > v) v = t;
    }
    w->p2p[s] = v;
  }
  /* The partitioner's stage time: compute plus the slower of its two transfers. In steady 1F1B,
   * neighbours s, s+1 take (T_s + T_{s+1}) / 2 + c_s per micro-batch (one forward hand-off and one
   * gradient hand-back per pair of ops), which max(T_s, T_{s+1}) + c_s bounds from above. */
  for (int s = 0; s < pp; s++) {
    double cin = s > 0 ? w->p2p[s - 1] : 0, cout = s + 1 < pp ? w->p2p[s] : 0;
    w->fixed[s] = w->ef[s] + w->eb[s] + (cin > cout ? cin : cout);
  }
  /* memory: layers each stage can hold */
  for (int s = 0; s < pp; s++) w->cap[s] = max_layers(x, ls, s, pp, mbs, m, &w->limit[s]);
  int *counts = w->counts;
  if (split) {
    int sum = 0;
    for (int s = 0; s < pp; s++) {
      if (split[s] < 1) {
        snprintf(why, cap, "split: stage %d gets %d layers", s, split[s]);
        return TS_ERR_INVALID_ARG;
      }
      sum += split[s], counts[s] = split[s];
    }
    if (sum != L) {
      snprintf(why, cap, "split: the stages' layers add up to %d, the model has %d", sum, L);
      return TS_ERR_INVALID_ARG;
    }
  } else {
    ts_status st = ts_p3_partition(method, pp, L, w->cost, w->fixed, w->cap, m, counts, NULL);
    if (st == TS_ERR_INFEASIBLE) {
      int room = 0, worst = 0;
      for (int s = 0; s < pp; s++) {
        room += w->cap[s];
        if (w->cap[s] < w->cap[worst]) worst = s;
      }
      double m1 = ts__p3_stage_memory(md, 1, worst == 0, worst == pp - 1, pp, ls[worst].tp, mbs,
                                      pp - worst < m ? pp - worst : m, NULL);
      snprintf(why, cap,
               "out of memory: the %d stages hold at most %d of the %d layers (stage %d, tp %d, micro-batch %d: %.2f GiB "
               "with one layer, %.2f GiB per GPU)",
               pp, room, L, worst, ls[worst].tp, mbs, m1 / GIB, w->limit[worst] / GIB);
      return TS_ERR_INFEASIBLE;
    }
    if (st != TS_OK) {
      snprintf(why, cap, "%s", ts_last_error());
      return st;
    }
  }
  /* memory check of the split itself (a given split, or one the partitioner kept within caps) */
  for (int s = 0; s < pp; s++) {
    int inflight = pp - s < m ? pp - s : m;
    double params;
    double mem = ts__p3_stage_memory(md, counts[s], s == 0, s == pp - 1, pp, ls[s].tp, mbs, inflight, &params);
    w->mem[s] = mem, w->params[s] = params;
    if (mem > w->limit[s]) {
      snprintf(why, cap, "out of memory: stage %d (%d layers, tp %d, micro-batch %d, %d in flight) needs %.2f GiB per GPU, "
               "it has %.2f GiB",
               s, counts[s], ls[s].tp, mbs, inflight, mem / GIB, w->limit[s] / GIB);
      return TS_ERR_INFEASIBLE;
    }
  }
  /* stage times per micro-batch */
  int a = 0;
  for (int s = 0; s < pp; s++) {
    double f = w->ef[s], b = w->eb[s];
    for (int l = a; l < a + counts[s]; l++) f += w->lf[(size_t)s * L + l], b += w->lb[(size_t)s * L + l];
    w->fwd[s] = f, w->bwd[s] = b;
    w->first_layer[s] = a;
    a += counts[s];
  }
  double makespan;
  TS_TRY(ts_p3_simulate_1f1b(pp, m, w->fwd, w->bwd, pp > 1 ? w->p2p : NULL, &makespan, w->events));
  /* data-parallel rings: (stage, tp rank) groups of dp GPUs; a ring across nodes shares each
   * node's NIC with every other such ring touching that node */
  double grad_elem = md->activation_bytes;
  int rings_on[TS_P3_MAX_NODES] = {0};
  if (dp > 1)
    for (int s = 0; s < pp; s++)
      for (int j = 0; j < ls[s].tp; j++) {
        int n0 = x->gpu_node[ls[s].first_gpu + j];
        bool multi = false;
        for (int r = 1; r < dp; r++) multi |= x->gpu_node[ls[s].first_gpu + r * ls[s].tp + j] != n0;
        if (!multi) continue;
        int last = -1;
        for (int r = 0; r < dp; r++) {
          int n = x->gpu_node[ls[s].first_gpu + r * ls[s].tp + j];
          if (n != last) rings_on[n]++; /* replicas of one node are consecutive */
          last = n;
        }
      }
  double ar_max = 0;
  for (int s = 0; s < pp; s++) {
    double t = 0;
    if (dp > 1)
      for (int j = 0; j < ls[s].tp; j++) {
        int n0 = x->gpu_node[ls[s].first_gpu + j];
        ts_p3_link link = c->types[x->order[n0]].intra;
        bool multi = false;
        int sharing = 1;
        for (int r = 0; r < dp; r++) {
          int n = x->gpu_node[ls[s].first_gpu + r * ls[s].tp + j];
          if (n != n0) multi = true;
        }
        if (multi) {
          link = LINK_NONE;
          for (int r = 0; r < dp; r++) {
            int n = x->gpu_node[ls[s].first_gpu + r * ls[s].tp + j];
            link_worst(&link, nic_pair(x, n, n0));
            if (rings_on[n] > sharing) sharing = rings_on[n];
          }
        }
        double v = ts_p3_allreduce_time(w->params[s] * grad_elem, dp, link, sharing);
        if (v > t) t = v;
      }
    w->ar[s] = t;
    if (t > ar_max) ar_max = t;
  }
  /* tied embedding: first and last stage all-reduce the word embedding's gradient, pairwise */
  double emb = 0;
  if (md->tied_embedding && pp > 1) {
    int t = ls[0].tp < ls[pp - 1].tp ? ls[0].tp : ls[pp - 1].tp;
    double bytes = (double)md->vocab * md->hidden * grad_elem / t;
    int streams[TS_P3_MAX_NODES] = {0};
    ts_p3_link link = LINK_NONE;
    bool cross = false;
    for (int r = 0; r < dp; r++)
      for (int j = 0; j < t; j++) {
        int na = x->gpu_node[ls[0].first_gpu + r * ls[0].tp + j], nb = x->gpu_node[ls[pp - 1].first_gpu + r * ls[pp - 1].tp + j];
        if (na != nb) {
          cross = true;
          streams[na]++, streams[nb]++;
          link_worst(&link, nic_pair(x, na, nb));
        }
      }
    if (cross) {
      int mx = 1;
      for (int n = 0; n < x->nnodes; n++)
        if (streams[n] > mx) mx = streams[n];
      emb = ts_p3_allreduce_time(bytes, 2, link, mx);
    } else {
      emb = ts_p3_allreduce_time(bytes, 2, c->types[x->order[x->gpu_node[ls[0].first_gpu]]].intra, 1);
    }
  }
  /* the step: each stage all-reduces once its last backward is done; the embedding pair waits for
   * both ends; then every stage steps its optimizer */
  double ready[TS_P3_MAX_STAGES];
  for (int s = 0; s < pp; s++) {
    double fin = w->events[(size_t)2 * m * s + 2 * m - 1].end;
    ready[s] = fin + w->ar[s];
  }
  if (emb > 0) {
    double e0 = (ready[0] > ready[pp - 1] ? ready[0] : ready[pp - 1]) + emb;
    ready[0] = ready[pp - 1] = e0;
  }
  double step = 0, upd_max = 0;
  for (int s = 0; s < pp; s++) {
    double u = w->params[s] * w->upd[s];
    w->update[s] = u;
    if (u > upd_max) upd_max = u;
    if (ready[s] + u > step) step = ready[s] + u;
  }
  /* the plan */
  memset(plan, 0, sizeof *plan);
  plan->model = *md;
  snprintf(plan->cluster, sizeof plan->cluster, "%s", c->name);
  plan->ntypes = c->ntypes;
  for (int k = 0; k < c->ntypes; k++) {
    snprintf(plan->type_name[k], TS_P3_NAME, "%s", c->types[k].name);
    snprintf(plan->gpu_name[k], TS_P3_NAME, "%s", c->types[k].gpu);
    plan->gpus_per_node[k] = c->types[k].gpus_per_node;
  }
  plan->dp = dp, plan->pp = pp, plan->mbs = mbs, plan->micro_batches = m, plan->global_batch = md->global_batch;
  plan->nnodes = x->nnodes;
  memcpy(plan->node_order, x->order, (size_t)x->nnodes * sizeof *x->order);
  memcpy(plan->node_counts, x->node_counts, sizeof plan->node_counts);
  plan->uniform_tp = true;
  plan->uniform_split = L % pp == 0;
  for (int s = 0; s < pp; s++) {
    plan->uniform_tp &= ls[s].tp == ls[0].tp;
    plan->uniform_split &= counts[s] == L / pp;
  }
  plan->partitioner = method;
  double usd_h = 0;
  for (int k = 0; k < c->ntypes; k++) usd_h += x->node_counts[k] * c->types[k].price_per_hour;
  for (int s = 0; s < pp; s++) {
    ts_p3_stage *o = &plan->stages[s];
    int slow = -1;
    double slow_t = -1;
    for (int k = 0; k < c->ntypes; k++)
      if (ls[s].types >> k & 1) {
        double sc;
        const p3_entry *e = ts__p3_lookup(x->p, c->types[k].gpu, ls[s].tp, mbs, &sc);
        double t = e ? (e->layer.fwd + e->layer.bwd) * sc : 0;
        if (t > slow_t) slow_t = t, slow = k;
      }
    o->type = slow;
    o->mixed = (ls[s].types & (ls[s].types - 1)) != 0;
    o->tp = ls[s].tp;
    o->first_gpu = ls[s].first_gpu, o->ngpus = ls[s].ngpus;
    o->first_layer = w->first_layer[s], o->nlayers = counts[s];
    o->embedding = s == 0, o->head = s == pp - 1;
    o->fwd = w->fwd[s], o->bwd = w->bwd[s];
    o->send = s + 1 < pp ? w->p2p[s] : 0;
    o->update = w->update[s];
    o->allreduce = w->ar[s];
    o->params = w->params[s];
    o->mem = w->mem[s], o->mem_limit = w->limit[s];
  }
  plan->step = step;
  plan->pipeline = makespan;
  plan->dp_allreduce = ar_max;
  plan->embed_allreduce = emb;
  plan->update = upd_max;
  plan->usd_per_hour = usd_h;
  plan->usd_per_step = step * usd_h / 3600.0;
  return TS_OK;
}

ts_status ts__p3_scratch_init(p3_scratch *w, int L, int max_m) {
  memset(w, 0, sizeof *w);
  size_t SL = (size_t)TS_P3_MAX_STAGES * L;
  w->cost = malloc(SL * sizeof *w->cost);
  w->lf = malloc(SL * sizeof *w->lf);
  w->lb = malloc(SL * sizeof *w->lb);
  w->max_m = max_m;
  w->events = malloc((size_t)2 * TS_P3_MAX_STAGES * max_m * sizeof *w->events);
  if (!w->cost || !w->lf || !w->lb || !w->events) {
    ts__p3_scratch_free(w);
    return ts_error(TS_ERR_OOM, "out of memory for plan3d scratch (%d layers, %d micro-batches)", L, max_m);
  }
  return TS_OK;
}

void ts__p3_scratch_free(p3_scratch *w) {
  free(w->cost), free(w->lf), free(w->lb), free(w->events);
  memset(w, 0, sizeof *w);
}

ts_status ts__p3_check_inputs(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p) {
  if (!m || !c || !p) return ts_error(TS_ERR_INVALID_ARG, "plan3d: NULL model, cluster or profile");
  if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->seq < 1 || m->global_batch < 1 || m->vocab < 1)
    return ts_error(TS_ERR_INVALID_ARG, "plan3d: model '%s' has a zero dimension", m->name);
  if (c->ntypes < 1 || c->ntypes > TS_P3_MAX_TYPES)
    return ts_error(TS_ERR_INVALID_ARG, "plan3d: cluster '%s' has %d node types", c->name, c->ntypes);
  for (int k = 0; k < c->ntypes; k++) {
    const ts_p3_node_type *t = &c->types[k];
    if (!(t->intra.bandwidth > 0 && t->inter.bandwidth > 0 && t->intra.latency >= 0 && t->inter.latency >= 0 &&
          t->memory > 0 && t->gpus_per_node >= 1 && t->count >= 0))
      return ts_error(TS_ERR_INVALID_ARG, "plan3d: node type '%s': bandwidths and memory must be > 0", t->name);
  }
  return TS_OK;
}

ts_status ts_p3_estimate(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p, const ts_p3_config *cfg,
                         ts_p3_plan *plan) {
  TS_TRY(ts__p3_check_inputs(m, c, p));
  if (!cfg || !plan) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_estimate: NULL config or plan");
  if (cfg->dp < 1 || cfg->mbs < 1)
    return ts_error(TS_ERR_INVALID_ARG, "estimate: dp (%d) and micro-batch size (%d) must be given (>= 1)", cfg->dp, cfg->mbs);
  int order[TS_P3_MAX_NODES], norder = 0;
  if (cfg->order) {
    if (cfg->norder < 1 || cfg->norder > TS_P3_MAX_NODES)
      return ts_error(TS_ERR_INVALID_ARG, "estimate: a node order of %d nodes", cfg->norder);
    memcpy(order, cfg->order, (size_t)cfg->norder * sizeof *order);
    norder = cfg->norder;
  } else {
    norder = ts__p3_full_order(c, order);
  }
  p3_ctx x;
  TS_TRY(ts__p3_ctx_init(&x, m, c, p, order, norder));
  int tp[TS_P3_MAX_TYPES];
  for (int k = 0; k < c->ntypes; k++) {
    tp[k] = cfg->tp[k];
    if (tp[k] <= 0) {
      int tps[1], n = 0;
      ts_p3_profile_tps(p, c->types[k].gpu, tps, 1, &n);
      tp[k] = n ? tps[0] : 1;
    }
  }
  char why[320] = "";
  ts_status st = TS_OK;
  /* every type in the order: its TP degree profiled and within one node */
  for (int k = 0; k < c->ntypes && st == TS_OK; k++) {
    if (!x.node_counts[k]) continue;
    double sc;
    if (!entry(&x, k, tp[k], cfg->mbs, &sc, why, sizeof why)) st = TS_ERR_NOT_FOUND;
    else if (c->types[k].gpus_per_node % tp[k])
      snprintf(why, sizeof why, "tp %d does not divide the %d GPUs of a '%s' node", tp[k], c->types[k].gpus_per_node,
               c->types[k].name),
          st = TS_ERR_INFEASIBLE;
  }
  p3_stage_layout ls[TS_P3_MAX_STAGES];
  int pp = 0;
  if (st == TS_OK) st = ts__p3_layout(&x, cfg->dp, tp, ls, &pp, why, sizeof why);
  if (st == TS_OK && cfg->pp > 0 && cfg->pp != pp) {
    snprintf(why, sizeof why, "dp %d with these TP degrees lays the %d GPUs out as %d stages, not pp %d", cfg->dp,
             x.ngpus, pp, cfg->pp);
    st = TS_ERR_INFEASIBLE;
  }
  p3_scratch w;
  if (st == TS_OK) {
    int mm = m->global_batch / (cfg->dp * cfg->mbs);
    st = ts__p3_scratch_init(&w, m->layers, mm > 0 ? mm : 1);
    if (st != TS_OK) {
      ts__p3_ctx_free(&x);
      return st;
    }
    st = ts__p3_price(&x, cfg->dp, ls, pp, cfg->mbs, cfg->split, cfg->partitioner, &w, plan, why, sizeof why);
    ts__p3_scratch_free(&w);
  }
  ts__p3_ctx_free(&x);
  if (st != TS_OK) return ts_error(st, "%s", why[0] ? why : ts_last_error());
  return TS_OK;
}
