/* tessera plan3d: data / tensor / pipeline parallel degrees, micro-batch size, node order and an
 * uneven per-stage layer split for Transformer training on heterogeneous GPU clusters, after
 * FASOP (Hwang et al., HPDC'24). Inputs are three JSON documents (docs/FORMATS.md, "plan3d"):
 * the model, the cluster (node types, bandwidths, memory, prices) and a profile of per-layer
 * forward/backward times per GPU type, TP degree and micro-batch size. The search enumerates
 * (tp per GPU type, dp, pp, micro-batch) x node orders, splits the layers with a partitioner
 * (greedy min-max, or DP / brute force as oracles), prices each candidate with a 1F1B event
 * simulation plus alpha-beta communication, rejects those that do not fit in memory (with the
 * reason), and ranks the rest; under a price limit it also searches cluster compositions and
 * returns the Pareto front of step time vs dollars per step.
 *
 * Times are in seconds in the C API and in milliseconds in JSON. Thread safety: every function
 * works on its arguments only; distinct objects may be used from distinct threads. */
#ifndef TESSERA_PLAN3D_H
#define TESSERA_PLAN3D_H

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_P3_MAX_TYPES 8     /* node types in one cluster */
#define TS_P3_MAX_NODES 256   /* nodes in one cluster */
#define TS_P3_MAX_STAGES 128  /* pipeline stages */
#define TS_P3_NAME 48         /* bytes of a name, NUL included */

/* ---- inputs ------------------------------------------------------------------------------ */

typedef struct ts_p3_model {
  char name[TS_P3_NAME];
  int layers, hidden, heads, seq, vocab, ffn; /* ffn: MLP width (default 4 * hidden) */
  int global_batch;                           /* sequences per optimizer step */
  double bytes_per_param;   /* weights + gradients + optimizer state per parameter (default 16:
                               fp16 weights and grads, fp32 master copy and two Adam moments) */
  int activation_bytes;     /* bytes per stored activation element (default 2) */
  bool recompute;           /* full activation recomputation: a layer keeps only its input */
  bool tied_embedding;      /* the LM head reuses the token embedding (default true) */
  /* Parameter counts, derived from the shape (ts_p3_model_derive) unless the JSON gives them. */
  double embed_params, layer_params, head_params;
} ts_p3_model;

typedef struct ts_p3_link {
  double bandwidth;  /* bytes/s, one direction */
  double latency;    /* seconds per message */
  /* A ring all-reduce's hop, where it was measured on all-reduces rather than point to point
   * (collective libraries rarely reach the send/recv figures: gloo's 2-rank all_reduce took 2x
   * the ring formula on this VM's send/recv fit); ar_bandwidth 0: the figures above. */
  double ar_bandwidth, ar_latency;
} ts_p3_link;

typedef struct ts_p3_node_type {
  char name[TS_P3_NAME];  /* instance name, "p4d.24xlarge" */
  char gpu[TS_P3_NAME];   /* GPU type: names its profile entries, "A100" */
  int gpus_per_node;
  int count;              /* nodes of this type available */
  double memory;          /* bytes per GPU */
  ts_p3_link intra;       /* GPU to GPU inside a node */
  ts_p3_link inter;       /* the node's network interface, shared by its GPUs */
  double price_per_hour;  /* dollars per node-hour */
} ts_p3_node_type;

typedef struct ts_p3_cluster {
  char name[TS_P3_NAME];
  int ntypes;
  ts_p3_node_type types[TS_P3_MAX_TYPES];
} ts_p3_cluster;

/* Per-layer costs, opaque: entries keyed by (GPU type, TP degree, micro-batch size). */
typedef struct ts_p3_profile ts_p3_profile;

typedef struct ts_p3_cost {
  double fwd, bwd; /* seconds per micro-batch */
} ts_p3_cost;

/* From JSON text (`what` names the document in messages: a file name). Every error names the
 * field and the value: TS_ERR_FORMAT for a wrong type or an impossible value (negative
 * bandwidth, zero layers), TS_ERR_NOT_FOUND for a missing required field. */
ts_status ts_p3_model_from_json(const char *json, const char *what, ts_p3_model *m);
ts_status ts_p3_cluster_from_json(const char *json, const char *what, ts_p3_cluster *c);
ts_status ts_p3_profile_from_json(const char *json, const char *what, ts_p3_profile **p);
/* Fills ffn and the parameter counts that are zero from the shape (GPT-2: embedding
 * vocab*h + seq*h; layer 4h^2 + 2h*ffn + 9h + ffn... ; head: final norm, plus vocab*h untied). */
void ts_p3_model_derive(ts_p3_model *m);

ts_status ts_p3_profile_create(ts_p3_profile **p);
void ts_p3_profile_destroy(ts_p3_profile *p);
/* Adds an entry. layers == NULL: every transformer layer costs `layer`; else layers[nlayers]
 * per layer. update_per_param: optimizer-step seconds per parameter held (0: not modelled). */
ts_status ts_p3_profile_add(ts_p3_profile *p, const char *gpu, int tp, int mbs, ts_p3_cost embed, ts_p3_cost layer,
                            ts_p3_cost head, const ts_p3_cost *layers, int nlayers, double update_per_param);
/* The TP degrees listed for `gpu`, ascending, into tps[cap]; their count in *n. */
ts_status ts_p3_profile_tps(const ts_p3_profile *p, const char *gpu, int *tps, int cap, int *n);

/* ---- partitioner -------------------------------------------------------------------------
 * Splits L layers into S contiguous, non-empty stages. cost[s * L + l] is the time (fwd + bwd)
 * of layer l on stage s's device; fixed[s] is stage s's time besides its layers (embedding,
 * head, activation transfers); max_layers[s] (NULL: no limit) the layers stage s can hold in
 * memory. Objective, the 1F1B time of m micro-batches with uniform transfers:
 *     J = (m - 1) * max_s T_s + sum_s T_s,   T_s = fixed[s] + sum of the stage's layer costs. */
typedef enum ts_p3_partitioner {
  TS_P3_GREEDY = 0, /* FASOP's moves -- a layer from the slowest stage to the fastest while J
                       falls -- then one-layer boundary moves while J falls, started from balanced
                       counts (FASOP's start), from the min-max split (bisection on the bottleneck
                       with a left / right fill) and from the least-total-time split; the best kept */
  TS_P3_DP,         /* exact: for every candidate bottleneck B, a DP of the least sum with every
                       T_s <= B (O(S L^2) each), pruned by a lower bound */
  TS_P3_BRUTE       /* exact: every composition of L into S parts (test oracle; small inputs) */
} ts_p3_partitioner;
const char *ts_p3_partitioner_name(ts_p3_partitioner p); /* "greedy", "dp", "brute" */
ts_status ts_p3_partitioner_parse(const char *s, ts_p3_partitioner *p);

/* counts[S] gets the layers per stage, *objective (may be NULL) J. TS_ERR_INFEASIBLE when the
 * memory limits admit no split (detail: the layers held at most vs L); TS_ERR_TIMEOUT when an
 * exact method would exceed its budget (brute force over 10^8 compositions). */
ts_status ts_p3_partition(ts_p3_partitioner method, int S, int L, const double *cost, const double *fixed,
                          const int *max_layers, int m, int *counts, double *objective);

/* ---- 1F1B pipeline simulation ------------------------------------------------------------
 * S stages, m micro-batches; stage s spends fwd[s] / bwd[s] per micro-batch; p2p[s] (S-1 of
 * them, NULL: none) is the transfer from stage s to s+1 (and of the gradient back). Stage s runs
 * min(S - s - 1, m) warm-up forwards, then alternates one forward and one backward, then drains;
 * each op starts when its stage is free and its input has arrived. For uniform stages and no
 * transfers the makespan is (m + S - 1) * (fwd + bwd). */
typedef struct ts_p3_event {
  int stage, micro;
  bool backward;
  double start, end;
} ts_p3_event;

/* *makespan gets the finish of the last backward; events (may be NULL) gets all 2 S m ops in
 * the order each stage runs them, stage by stage (events[2 m s + k]). */
ts_status ts_p3_simulate_1f1b(int S, int m, const double *fwd, const double *bwd, const double *p2p, double *makespan,
                              ts_p3_event *events);

/* Ring all-reduce of `bytes` over d ranks whose slowest hop is `link` shared by `sharing`
 * concurrent rings: 2 (d-1)/d * bytes * sharing / bandwidth + 2 (d-1) * latency, with the link's
 * all-reduce figures where it has them. */
double ts_p3_allreduce_time(double bytes, int d, ts_p3_link link, int sharing);

/* ---- plans --------------------------------------------------------------------------------- */

typedef struct ts_p3_stage {
  int type;           /* node type index (the slowest one when the stage spans types) */
  bool mixed;         /* its GPUs are of more than one type */
  int tp;
  int first_gpu, ngpus; /* GPUs [first_gpu, first_gpu + ngpus) in node order; ngpus = dp * tp */
  int first_layer, nlayers;
  bool embedding, head;
  double fwd, bwd;    /* seconds per micro-batch, embedding / head included */
  double send;        /* activation transfer to the next stage per micro-batch (0 on the last) */
  double update;      /* optimizer step */
  double allreduce;   /* data-parallel gradient all-reduce of this stage's parameters */
  double params;      /* parameters per GPU (after TP) */
  double mem, mem_limit; /* peak bytes per GPU and the GPU's memory */
} ts_p3_stage;

typedef struct ts_p3_plan {
  ts_p3_model model;       /* what it trains (a plan file is self-contained) */
  char cluster[TS_P3_NAME];
  int ntypes;
  char type_name[TS_P3_MAX_TYPES][TS_P3_NAME], gpu_name[TS_P3_MAX_TYPES][TS_P3_NAME];
  int gpus_per_node[TS_P3_MAX_TYPES];
  int dp, pp, mbs, micro_batches, global_batch;
  int nnodes;
  int node_order[TS_P3_MAX_NODES]; /* node type index of each node, in GPU order */
  int node_counts[TS_P3_MAX_TYPES]; /* nodes of each type in use */
  bool uniform_tp, uniform_split;
  ts_p3_partitioner partitioner;
  ts_p3_stage stages[TS_P3_MAX_STAGES]; /* pp of them */
  /* The estimate: step = pipeline + max over stages of (dp all-reduce + update)
   * + embedding all-reduce between the first and last stage. */
  double step, pipeline, dp_allreduce, embed_allreduce, update;
  double usd_per_hour, usd_per_step;
} ts_p3_plan;

/* A configuration to price (`tessera plan3d estimate`). Zero fields are free; split == NULL:
 * partitioned by `partitioner`; order == NULL: the cluster's types in file order, every node
 * of each. tp[t] per node type (0: the type's smallest profiled degree). */
typedef struct ts_p3_config {
  int dp, pp, mbs;
  int tp[TS_P3_MAX_TYPES];
  const int *split;        /* [pp] layers per stage */
  const int *order;        /* [norder] node type indices in GPU order */
  int norder;
  ts_p3_partitioner partitioner;
} ts_p3_config;

/* Prices one configuration. A configuration that cannot run returns TS_ERR_INFEASIBLE with the
 * reason (out of memory on stage s: needed vs held; dp*pp*tp not the GPU count; a TP group
 * across nodes; a stage spanning GPU types with per-type TP; ...). */
ts_status ts_p3_estimate(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p, const ts_p3_config *cfg,
                         ts_p3_plan *plan);

typedef struct ts_p3_search_opts {
  int top;                   /* plans kept, fastest first (default 10) */
  ts_p3_partitioner partitioner; /* default greedy */
  bool per_type_tp;          /* a TP degree per GPU type (default true); false: one for all */
  int max_orders;            /* node orders tried per composition (default 64): all distinct
                                orders when there are at most this many, else the type-contiguous
                                ones and their rotations */
  double budget_per_hour;    /* > 0: also search sub-clusters priced <= this many $/hour
                                (Pareto front of step time vs $ per step) */
  int dp, pp, mbs;           /* > 0: fixed */
  bool progress;             /* a progress line on stderr */
} ts_p3_search_opts;

typedef struct ts_p3_search_result {
  int nplans;
  ts_p3_plan *plans;          /* [nplans], fastest first, on the full cluster */
  bool has_baseline;
  ts_p3_plan baseline;        /* Megatron-LM's default: uniform TP, even split, file node order */
  bool has_full;
  ts_p3_plan full_best;       /* the fastest plan on the whole cluster (what the baseline compares
                                 with; under a budget plans[0] may use a sub-cluster) */
  int npareto;
  ts_p3_plan *pareto;         /* [npareto] non-dominated (step, usd_per_step), fastest first */
  int64_t evaluated;          /* configurations priced */
  int64_t rejected_memory;    /* of which out of memory */
  int64_t rejected_other;     /* of which infeasible for another reason */
  int64_t compositions;       /* clusters searched */
  char first_rejection[320];  /* the first out-of-memory reason, for "nothing fits" */
  double seconds;             /* search wall time */
} ts_p3_search_result;

void ts_p3_search_opts_default(ts_p3_search_opts *o);
/* TS_ERR_INFEASIBLE naming the first rejection when no configuration fits. */
ts_status ts_p3_search(const ts_p3_model *m, const ts_p3_cluster *c, const ts_p3_profile *p,
                       const ts_p3_search_opts *o, ts_p3_search_result *r);
void ts_p3_search_result_free(ts_p3_search_result *r);

/* A plan as JSON (docs/FORMATS.md, "plan3d plan"; malloc'd, free()) and back: the file names its
 * node types and carries the model, so it stands alone (explain, emit). from_json checks the
 * plan's consistency (stages cover the layers and GPUs exactly; dp * tp GPUs per stage; the
 * micro-batches multiply out to the global batch) and names the first field that fails. */
ts_status ts_p3_plan_to_json(const ts_p3_plan *plan, char **json);
ts_status ts_p3_plan_from_json(const char *json, const char *what, ts_p3_plan *plan);
/* The model as JSON (the input schema, with the derived counts). */
ts_status ts_p3_model_to_json(const ts_p3_model *m, char **json);

/* ---- pictures ------------------------------------------------------------------------------ */
/* The plan's simulated 1F1B schedule as an SVG Gantt chart (a row per stage; forward, backward,
 * then all-reduces and the optimizer step), written atomically. */
ts_status ts_p3_plan_gantt_svg(const ts_p3_plan *plan, const char *path);
/* The Pareto front (step time vs $ per step, fastest first) with the baseline (may be NULL). */
ts_status ts_p3_pareto_svg(const ts_p3_plan *front, int n, const ts_p3_plan *baseline, const char *path);

/* ---- engine launch files (plan3d_emit.c) ----------------------------------------------------
 * What users run a chosen plan with: Megatron-LM arguments, a DeepSpeed pipeline configuration
 * with an explicit partition list, a torchrun command line. */
/* Files (ts_p3_emit_dir writes them under these names; `tessera plan3d emit --only` picks groups):
 *   megatron   megatron_args.sh      a bash array MEGATRON_ARGS=(...) for Megatron-LM's pretrain_gpt.py
 *              megatron_config.json  Megatron-Core TransformerConfig keyword arguments (the *_dtype
 *                                    values name torch dtypes: getattr(torch, v))
 *   deepspeed  deepspeed_config.json   batch sizes, precision, the "pipeline" section
 *              deepspeed_partition.json  PipelineModule stage boundaries ("parts") over the layer list
 *                                    [embedding, transformer layer 0 .. L-1, head]
 *   torchrun   torchrun.sh           one torchrun command per node (static rendezvous, --node-rank in
 *                                    the plan's node order), sourcing megatron_args.sh beside it
 * The split is Megatron-Core's --pipeline-model-parallel-layout (Megatron-Core >= 0.13.0; checked
 * against 0.16.1), DeepSpeed's an explicit `parts` list applied by overriding
 * PipelineModule._partition_layers (checked against 0.19.8): docs/notes/plan3d-engines.md.
 * Rank order is Megatron's and DeepSpeed's (tp fastest, then dp, then pp): stage s is global ranks
 * [s dp tp, (s+1) dp tp), the GPUs [first_gpu, first_gpu + ngpus) of the plan's node order.
 * Refused with TS_ERR_UNSUPPORTED: stages with different TP degrees (both engines run one
 * tensor-parallel size everywhere), an embedding or head off the first / last stage. */
#define TS_P3_MEGATRON_CORE_MIN "0.13.0"    /* first release with pipeline_model_parallel_layout */
#define TS_P3_MEGATRON_CORE_CHECKED "0.16.1"
#define TS_P3_DEEPSPEED_CHECKED "0.19.8"
#define TS_P3_LAYOUT_MAX 2048 /* bytes of a layout string, NUL included (128 stages of any size) */

enum {
  TS_P3_EMIT_MEGATRON = 1,  /* megatron_args.sh, megatron_config.json */
  TS_P3_EMIT_DEEPSPEED = 2, /* deepspeed_config.json, deepspeed_partition.json */
  TS_P3_EMIT_TORCHRUN = 4,  /* torchrun.sh */
  TS_P3_EMIT_ALL = 7
};

typedef struct ts_p3_emit_opts {
  /* GPUs per node of each of the plan's node types (type_name order); 0: the plan's own
   * gpus_per_node, and where that is 0 too (a hand-made plan) inferred: the counts under which
   * every stage sits on its node type, no tensor-parallel group spans two nodes and the nodes hold
   * dp * pp * tp GPUs (TS_ERR_INVALID_ARG naming two candidates when more than one fits). Counts
   * given or recorded are checked the same way. Only torchrun.sh needs them. */
  int gpus_per_node[TS_P3_MAX_TYPES];
} ts_p3_emit_opts;

/* What the engines need of a plan: batch sizes that multiply out, stages covering the layers in
 * order on the GPU ranges of Megatron's rank order, heads, ffn divisible by tp. Every emitter
 * checks it first; TS_ERR_UNSUPPORTED as above, TS_ERR_INVALID_ARG naming the field otherwise. */
ts_status ts_p3_emit_check(const ts_p3_plan *p);
/* Megatron-Core's pipeline_model_parallel_layout of the plan's split, "Et*5|t*10|t*9L"
 * (pp > 1; pp == 1 gives "Et*24L"): buf[cap], at most TS_P3_LAYOUT_MAX bytes. */
ts_status ts_p3_emit_megatron_layout(const ts_p3_plan *p, char *buf, size_t cap);
/* The GPUs per node of each node type: o's counts where given, else the plan's, else inferred. */
ts_status ts_p3_emit_gpus_per_node(const ts_p3_plan *p, const ts_p3_emit_opts *o, int gpus_per_node[TS_P3_MAX_TYPES]);
/* File texts (malloc'd, free()); o may be NULL (everything inferred). */
ts_status ts_p3_emit_megatron(const ts_p3_plan *p, char **args_sh, char **config_json);
ts_status ts_p3_emit_deepspeed(const ts_p3_plan *p, char **config_json, char **partition_json);
ts_status ts_p3_emit_torchrun(const ts_p3_plan *p, const ts_p3_emit_opts *o, char **sh);
/* Writes the files of the groups in `what` (TS_P3_EMIT_* bits) into dir (created if missing),
 * each atomically; every text is made before the first is written, so a refused plan writes
 * nothing. *written (may be NULL; malloc'd, free()) gets the paths written, one per line. */
ts_status ts_p3_emit_dir(const ts_p3_plan *p, const ts_p3_emit_opts *o, const char *dir, int what, char **written);

#ifdef __cplusplus
}
#endif
#endif
