/* LLM runtime internals shared by the loader (llm_model.c), the forward pass (llm_forward.c,
 * llm_layer.c), attention (llm_attn.c) and the thread team (llm_team.c). */
#ifndef TS_LLM_INTERNAL_H
#define TS_LLM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "llm/quant_internal.h"
#include "tessera/llm.h"

/* A weight matrix [rows][cols] in its file type: row r at data + r * row_bytes (in the mapping).
 * Block types also get a packed copy (groups of 8 rows, the same bytes, ts__pack_rows) when the
 * active ISA has packed kernels: then npiece > 0 and pgemm is its kernel. The packed copy is cut in
 * npiece pieces, rows [cut[p], cut[p+1]) at at[p], one piece per thread of the decode team the
 * model is laid out for (ts__llm_layout): each thread's pieces of every matrix lie back to back in
 * the order decode reads them, so that its whole token is one ascending stream. */
typedef struct ts__wmat {
  const char *name;
  uint32_t type;
  int64_t rows, cols;
  size_t row_bytes;
  const uint8_t *data;
  int npiece;
  const int64_t *cut;       /* [npiece + 1]: 0, .., rows */
  const uint8_t *const *at; /* [npiece] */
  ts__pgemm_fn pgemm;
} ts__wmat;

/* The piece of w holding row r (0 <= r < rows): the last p with cut[p] <= r. */
static inline int ts__wmat_piece(const ts__wmat *w, int64_t r) {
  int lo = 0, hi = w->npiece - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (w->cut[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* One transformer block. Gate and up keep the file layout, neurons = rows ([n_ff][d]): a neuron is
 * one contiguous row of each, so skipping a neuron skips its bytes. Down is [d][n_ff] as stored
 * (each output row reads every neuron; see docs/ARCHITECTURE.md for the layout decision). */
typedef struct ts__llm_layer {
  const float *attn_norm, *ffn_norm; /* [d] fp32 (owned copies) */
  ts__wmat wq, wk, wv, wo;           /* [n_head*hd][d], [n_kv*hd][d] x2, [d][n_head*hd] */
  ts__wmat gate, up, down;           /* [n_ff][d], [n_ff][d], [d][n_ff] */
  /* gemma3 (NULL / false for llama): QK-norm weights [hd], the post-attention and post-MLP norms
   * [d], and whether the layer is local (sliding window, the local RoPE base) */
  const float *q_norm, *k_norm, *post_attn_norm, *post_ffn_norm;
  bool swa;
} ts__llm_layer;

/* Architectures (ts_llm_model.arch). */
enum { TS__ARCH_LLAMA = 0, TS__ARCH_GEMMA3 = 1 };

struct ts_llm_model {
  ts_gguf *g;
  char *name;
  ts_llm_config cfg;
  ts__wmat tok_embd, output; /* [vocab][d]; output aliases tok_embd when tied */
  const float *output_norm;  /* [d] */
  ts__llm_layer *layers;
  float *norms;              /* owned fp32 norm weights: (2 n_layer + 1) d (gemma3: (4 d + 2 hd) n_layer + d) */
  int arch;                  /* TS__ARCH_LLAMA, TS__ARCH_GEMMA3 */
  float embd_scale;          /* gemma3: the embedding times sqrtf(d_model) (llama: 1, not applied) */
  float q_scale;             /* gemma3: q times this after RoPE, the scores then unscaled (llama.cpp's
                              * f_attention_scale); 0: llama, the scores times 1/sqrt(hd) */
  uint8_t *packmem;          /* owned packed copies of the block-type matrices (NULL: none) */
  size_t packbytes;
  void *cutmem;              /* the packed matrices' cut and at arrays (ts__llm_layout) */
  int layout_nt;             /* the team the pieces are cut for (0: no packed copies) */
  pthread_mutex_t lock;      /* layout_nt and nstates */
  int nstates;               /* live states (ts_llm_state_create .. destroy) */
  ts_llm_vocab *vocab;
  uint64_t weight_bytes;
  /* decode's weight prefetch distance (bytes; -1: measure at the next state's creation, under
   * lock) and how it was chosen (ts_llm_model_set_weight_prefetch, ts__llm_tune_wpf) */
  int wpf;
  ts_llm_wpf_report wpf_rep;
  bool wpf_fresh; /* -1 was set: the next measurement ignores the stored one ("llm-wpf") */
  /* decode's side prefetches (each next phase's first weights, the next layer's KV cache, walked
   * into L2 by the matmul tiles and by threads waiting at a barrier; ts__pfq): 0 off (default),
   * 1 on. Off by default: in-process comparisons on the Xeon VM had them cost
   * decode 3-9% whether or not the kernels prefetch their own weights (they compete for the
   * core's miss buffers), and on the Zen 4 VM leaving out their KV part or their pumping had
   * measured 2% faster, within those runs' noise (docs/notes/BENCHMARKS.md, issue 7). Not public:
   * bench/bench_llm_ab.c sets it to compare both in one process on another machine. */
  int side;
};

/* Measures and sets m->wpf for a team of nt threads (llm_stream.c); called under m->lock by the
 * first state of a team. The measurement is an artifact (kind "llm-wpf", keyed by the weights'
 * identity, the team, the cpu and the kernels): a stored one is read instead (report.cached),
 * unless wpf_fresh asks for a new one. Models under min_bytes of weights (TS__WPF_MIN_BYTES: passes too short
 * to time) and models without packed copies get none, as does any failure (performance only). */
#define TS__WPF_MIN_BYTES ((uint64_t)8 << 20)
void ts__llm_tune_wpf(ts_llm_model *m, int nt, uint64_t min_bytes);

/* ---- thread team: one run of the state's worker pool per eval call, phases separated by a spin
 * barrier ------------------------------------------------------------------------------------ */

/* The state's worker threads (llm_team.c): ts__pool_run runs fn(arg, tid, nrun) on the calling
 * thread (tid 0) and workers 1..nrun-1, and returns when every worker has finished it. Between runs
 * a worker spins on the next run's generation for TS__POOL_SPIN seconds, then sleeps on a futex:
 * decode calls follow each other within tens of microseconds (sampling, the next token), and
 * waking a sleeping vCPU costs ~50-200 us on a VM (an OpenMP fork under OMP_WAIT_POLICY=passive
 * paid that on every token: docs/notes/BENCHMARKS.md, issue 7), while a short bounded spin leaves the
 * core to other work soon after the last call. */
#define TS__POOL_SPIN 1e-3
typedef void (*ts__pool_fn)(void *arg, int tid, int nrun);
typedef struct ts__pool ts__pool;
/* Starts up to `workers` threads; *started says how many did (NULL: none could, or out of memory). */
ts__pool *ts__pool_create(int workers, int *started);
/* nrun - 1 <= the pool's workers; the workers beyond nrun - 1 pass the run by. */
void ts__pool_run(ts__pool *p, ts__pool_fn fn, void *arg, int nrun);
void ts__pool_destroy(ts__pool *p);

typedef struct ts__barrier {
  _Alignas(64) atomic_int count;
  _Alignas(64) atomic_int phase;
  atomic_int sleepers; /* waiters asleep on the phase futex */
  int n;
} ts__barrier;

void ts__barrier_init(ts__barrier *b, int n);
/* Every one of the n threads calls it; returns when all have. Spins briefly (prefetching from pf
 * meanwhile, when given), then sleeps on a futex (the machine is shared: a waiter must not burn a
 * core another thread needs). */
void ts__barrier_wait(ts__barrier *b, ts__pfq *pf);

/* A point-to-point signal inside a phase: one thread publishes a value (after its stores, which the
 * waiter then sees), another waits for exactly that value (spinning briefly with side prefetches
 * from pf, then on a futex, like the barrier). The values a flag takes only move on, and a waiter
 * asks for the next one, so equality is enough. */
typedef struct ts__flag {
  _Alignas(64) atomic_int seq;
  atomic_int sleepers;
} ts__flag;
void ts__flag_init(ts__flag *f);
void ts__flag_set(ts__flag *f, int v);
void ts__flag_wait(ts__flag *f, int v, ts__pfq *pf);

/* The adaptive decode team (ts_llm_state_set_adaptive): before each single-token eval
 * ts__team_size says how many threads run it, after it ts__team_update takes its wall time and the
 * share of it the threads spent waiting at barriers. The full team runs while that share stays low
 * (a quiet machine: a few %, and no probing at all); when its running average passes
 * TS__TEAM_WAIT_SOLO, one probe step runs on a single thread, and if that was faster than the
 * team's average the decode goes solo. Solo, every TS__TEAM_PROBE_EVERY steps one probe runs with
 * the full team, which takes over again when it beat the solo average. */
#define TS__TEAM_WAIT_SOLO 0.35
#define TS__TEAM_PROBE_EVERY 32
typedef struct ts__team_ctl {
  int solo;        /* decode runs on one thread */
  int probe;       /* the next step is a probe of the other size */
  int since;       /* steps since the last probe (or since going solo) */
  double wait_ew;  /* running average of the full team's barrier-wait share */
  double t_team;   /* running averages of a step's wall time, full team and solo (0: none yet) */
  double t_solo;
} ts__team_ctl;
int ts__team_size(const ts__team_ctl *c, int nt);
void ts__team_update(ts__team_ctl *c, int nt, int used, double seconds, double wait_share);

/* [lo, hi) of n items for thread t of nt, in multiples of `align` (the last part takes the rest). */
void ts__split(int64_t n, int t, int nt, int64_t align, int64_t *lo, int64_t *hi);

/* The phases over weight rows (llm_layer.c): n rows (the stacked q | k | v rows, a d-row matrix,
 * the vocabulary; batches also gate's then up's n_ff rows stacked) in units of work of `unit` rows;
 * thread t of nt has the home rows ts__split(n, t, nt, unit) (work sharing then evens out the
 * phase's end). The packed layout (ts__llm_layout) cuts wo, down and the output projection at these
 * boundaries; decode computes q|k|v and gate|up without units, by heads (ts__qkv_part) and neurons
 * (ts__ff_part), and the layout cuts them there. */
typedef struct ts__grid {
  int64_t n, unit;
} ts__grid;
ts__grid ts__grid_qkv(const ts_llm_model *m);
/* Decode's q|k|v phase with its attention (ts__step_qkv_att): thread t of nt attends query heads
 * [h0, h1) (contiguous: ts__att_heads), computes their q rows and the k and v rows of KV heads
 * [k0, k1), those whose first query head is among its own (so each KV head is computed, roped and
 * stored once, by its owner), and reads KV heads [n0, n1); only n0 can be another thread's (when h0
 * falls inside a group), whose k and v it waits for (ts__flag) instead of a barrier. */
typedef struct ts__qkv_part {
  int h0, h1, k0, k1, n0, n1;
} ts__qkv_part;
ts__qkv_part ts__qkv_part_of(const ts_llm_config *c, int t, int nt);
/* Decode's MLP neurons [f0, f1) of thread t of nt (multiples of TS_QK): its rows of gate and of up,
 * so that it forms and quantizes its own part of h = silu(gate) up (ts__step_gate_up). */
void ts__ff_part(const ts_llm_config *c, int t, int nt, int64_t *f0, int64_t *f1);
ts__grid ts__grid_d(const ts__wmat *w);
ts__grid ts__grid_vocab(const ts_llm_model *m);
/* (Re)lays the packed weights out for a decode team of nt threads (llm_model.c): each thread's
 * pieces back to back in decode's order (per layer k, v, q, wo, gate, up, down; then the output
 * projection; q, k and v cut by ts__qkv_part, gate and up by ts__ff_part), the threads' regions one
 * after another. Results do not depend on it, only the order of the bytes in memory does. Only
 * while no state uses the model. */
ts_status ts__llm_layout(ts_llm_model *m, int nt);

/* Work sharing inside a phase: its items cut into units (ts__split's), thread t owns the units of
 * its ts__split range and takes them front to back; when they are done it takes the other threads'
 * last units, one at a time. The static home ranges keep each thread streaming one contiguous range
 * (and the side prefetches of the next phase's first bytes right); the stealing absorbs the
 * imbalance of a phase (memory bandwidth shared unevenly, a thread descheduled, the KV-cache stores
 * of qkv), which otherwise every barrier turns into waiting. One slot per thread: [start, end) in
 * units, packed in 64 bits, changed by compare-and-swap (owner: start + run, thief: end - 1). */
typedef struct ts__share {
  _Alignas(64) _Atomic uint64_t se;
} ts__share;
/* Thread tid's slot <- its home units of `units` (call at the phase's start, after its barrier:
 * the slots of the previous phase are all empty by then, so a thief never takes a stale unit). */
void ts__share_begin(ts__share *sh, int tid, int nt, int64_t units);
/* The next units for thread tid, -1 when none is left: its own from the front, a quarter of what
 * is left in its slot at a time (at least one), then the others' last units one at a time. The first
 * unit is returned and the run's length in *count. Each claim is a locked compare-and-swap, which
 * waits for the thread's outstanding loads: one claim per 16 KB unit cost decode ~7% of its time
 * (perf), a quarter at a time takes ~log(units) claims per phase and the thief still evens out the
 * end. */
int64_t ts__share_next(ts__share *sh, int tid, int nt, int64_t *count);

/* ---- state ------------------------------------------------------------------------------- */

/* Batched activations for the block kernels: T vectors of n values in the ts__qbatch arrays
 * (q[T][n], d/sum/s[T][n/32], gsum[T][n/32][8]); sized for n_batch x wmax, re-cut per use. */
typedef struct ts__actb {
  int64_t n;
  int8_t *q;
  float *d, *s;
  int32_t *sum, *gsum;
  ts__pfq *pf; /* the thread's side-prefetch queue (single-token batches only) */
  /* the Q8_K form for K-quant weights (quant.h): kq[T][n], kd[T][n/256], kbs[T][n/16]; filled
   * only where a K-quant matrix reads the activation (NULL in the decode-shared hact / aact) */
  int8_t *kq;
  float *kd;
  int16_t *kbs;
} ts__actb;
/* Elements [e0, e1) of x (multiples of TS_QK) quantized into a's blocks: in decode a thread's part
 * of a team-shared vector that the next phase reads whole (s->aact, s->hact; the same bits as
 * quantizing it whole: blocks are independent). */
void ts__actb_quant_part(ts__actb *a, const float *x, int64_t e0, int64_t e1);

/* Per-thread buffers: every thread normalizes and quantizes the whole batch's input itself (a
 * d- or n_ff-wide pass per token, ~1/500 of its matmul share), so no barrier is needed between
 * preparing an activation and using it. */
typedef struct ts__tbuf {
  _Alignas(64) float *xn; /* [n_batch][wmax] normalized input (read by float weight types) */
  float *xr;              /* gemma3: [n_batch][d] the residual stream after a post-norm, formed by
                           * every thread for the whole batch (ts__gemma_resid) */
  ts__actb act;
  ts__pfq pf; /* written while the thread runs: the struct's 64-byte size and alignment keep it
               * off the other threads' lines */
} ts__tbuf;

/* K cache layout: blocks of 16 keys, each [hd][16] fp16 (one 32-byte load = 16 keys of one
 * dimension, and a block's 2 hd bytes contiguous, so that attention reads K as one stream: with K^T
 * rows of the whole context, a block's hd rows were hd interleaved streams, which neither the
 * prefetchers nor (at power-of-two strides) L1's sets took well). */
static inline size_t ts__kidx(int hd, int i, int j) {
  return ((size_t)(j >> 4) * (size_t)hd + (size_t)i) * 16 + (size_t)(j & 15);
}

/* Query rows (tokens) per attention work item. */
#define TS__ATT_ROWS 8

/* One attention work item (llm_attn.c): m <= TS__ATT_ROWS query rows q[r * ldq + i] (fp32; rounded
 * to fp16 inside), row r at position p0 + r dp (dp 1: consecutive tokens of a batch; 0: query
 * heads of one KV head at one position, decode), against keys 0..position of one KV head: K in
 * blocks of 16 keys (KT[ts__kidx(hd, i, j)] = dimension i of key j; the last block is read whole,
 * whatever its keys past the last position hold) and V[j * hd + i], fp16. S: scratch of m rows of
 * lds floats (lds >= round_up(last position + 1, 64) + 64). out[r * ldo + i] = the row's output.
 * `one`: the eval batch is a single token, which llama.cpp evaluates with other dot orders
 * (cpu_order.h: dot_f16_one instead of dot_f16_many). */
typedef struct ts__att_item {
  int m, hd, p0, dp, one;
  float scale;
  const float *q;
  int64_t ldq;
  const uint16_t *KT, *V;
  float *S;
  int64_t lds;
  float *out;
  int64_t ldo;
  /* sliding window: row r at position p sees keys p - win < j <= p (0: all keys j <= p); the keys
   * before it get probability 0 in llama.cpp's masked range, so the item starts at the 64-key
   * boundary at or below the first key a row sees and gives the keys before that row's window
   * probability 0 (the same bits as scoring from key 0: every sum's lanes keep their assignment
   * by key index, and a zero term changes no sum) */
  int win;
} ts__att_item;
typedef void (*ts__att_fn)(const ts__att_item *it);
void ts__att_item_ref(const ts__att_item *it);  /* llama.cpp's AVX-512 order */
void ts__att_item_ref8(const ts__att_item *it); /* its AVX2 order */
/* AVX-512 form (hd a multiple of 64 up to 256; other sizes run the reference). */
void ts__att_item_avx512(const ts__att_item *it);
/* AVX2 form (hd a multiple of 32 up to 256; other sizes run ts__att_item_ref8). */
void ts__att_item_avx2(const ts__att_item *it);

/* RoPE of one head in place: pairs (2i, 2i+1) (neox: (i, i + n_rot/2)) for i < n_rot/2 rotated by
 * cs[2i] = cos, cs[2i+1] = sin: (x0 c - x1 s, x0 s + x1 c), each formed as fma(x0, c, -(x1 s)) and
 * fma(x0, s, x1 c) (llama.cpp's contraction of its rotation). */
typedef void (*ts__rope_fn)(float *v, const float *cs, int n_rot, int neox);
void ts__rope_ref(float *v, const float *cs, int n_rot, int neox);
void ts__rope_avx512(float *v, const float *cs, int n_rot, int neox);
void ts__rope_avx2(float *v, const float *cs, int n_rot, int neox);
/* g[i] = silu(g[i]) * u[i] for i < n, llama.cpp's swiglu: the vector exp (cpu_order.h) in groups
 * of 16, the C library's expf for the last n % 16 (ref8, AVX2 order: vexpf8 in groups of 8). */
typedef void (*ts__swiglu_fn)(int64_t n, float *g, const float *u);
void ts__swiglu_ref(int64_t n, float *g, const float *u);
void ts__swiglu_ref8(int64_t n, float *g, const float *u);
void ts__swiglu_avx512(int64_t n, float *g, const float *u);
void ts__swiglu_avx2(int64_t n, float *g, const float *u);
/* g[i] = gelu(g[i]) * u[i], llama.cpp's GEGLU on x86 (ggml_vec_geglu_f32 with GGML_GELU_FP16, the
 * same in its AVX2 and AVX-512 builds): g <= -10 gives 0, g >= 10 gives g u, otherwise the fp16
 * table entry of fp16(g) times u, the table holding fp16(0.5 x (1 + tanhf(sqrt(2/pi) x (1 + 0.044715
 * x x)))) for every fp16 x (evaluated in fp32 with the C library's tanhf; llm_ops.c). A table
 * lookup per element: one scalar form serves every level. */
void ts__geglu_ref(int64_t n, float *g, const float *u);
/* g[i] = gelu(g[i]) as ts__geglu_ref forms it (the table, 0 from -10 down, the identity from 10
 * up): activation sparsity's a, whose product a u is then geglu's bit for bit. */
void ts__gelu_ref(int64_t n, float *g);
/* g[i] = relu(g[i]) * u[i]: the ReLU-gated MLP (TS_LLM_ACT_RELU) */
void ts__reglu(int64_t n, float *g, const float *u);
/* h = act(gate) * up of the model's MLP for n values (the dense path's own function per activation) */
void ts__glu(const ts_llm_state *s, int64_t n, float *g, const float *u);

/* RMSNorm with llama.cpp's arithmetic, so that the int8 activation quantization downstream sees
 * the same floats: the fp32 squares summed in double, mean = fp32(sum / n), scale = 1 / sqrtf(mean
 * + eps) in fp32, y = fp32(fp32(x scale) w). llama.cpp sums sequentially; here element j goes to
 * double lane j % 16 and the lanes are added in sum16's tree (the fp32 mean can differ only when
 * the exact mean lies within ~1e-15 relative of an fp32 rounding boundary: never seen). */
typedef void (*ts__rmsnorm_fn)(int64_t n, const float *x, const float *w, float eps, float *y);
void ts__rmsnorm_ref(int64_t n, const float *x, const float *w, float eps, float *y);
void ts__rmsnorm_avx512(int64_t n, const float *x, const float *w, float eps, float *y);
void ts__rmsnorm_avx2(int64_t n, const float *x, const float *w, float eps, float *y);

/* y[i] = fp16(x[i]) for i < n, round to nearest even (ts_f32_to_f16's bits): the KV cache's stores. */
typedef void (*ts__f16_fn)(int64_t n, const float *x, uint16_t *y);
void ts__f16_ref(int64_t n, const float *x, uint16_t *y);
void ts__f16_avx512(int64_t n, const float *x, uint16_t *y);
void ts__f16_avx2(int64_t n, const float *x, uint16_t *y);

/* The forward pass's kernels besides the matmuls, one set per level (llm_ops.c: the references,
 * AVX2 and AVX-512), in the core dispatcher as ts__llm_ops_dispatch; ts__llm_ops_active() is its
 * active set (TESSERA_ISA / TESSERA_REF apply). Each set follows one of llama.cpp's build classes
 * (cpu_order.h): `lanes` 16 (its AVX-512 build) or 8 (AVX2), and `ref` is that order's scalar set. */
typedef struct ts__llm_ops {
  ts__att_fn att;
  ts__rope_fn rope;
  ts__swiglu_fn swiglu;
  ts__rmsnorm_fn rmsnorm;
  ts__f16_fn f16;
  const struct ts__llm_ops *ref;
  int lanes;
} ts__llm_ops;
extern ts__dispatch ts__llm_ops_dispatch;
const ts__llm_ops *ts__llm_ops_active(void);

struct ts_llm_state {
  ts_llm_model *m; /* not const: creating and destroying the state count it in m (nstates, under m->lock) */
  int nt, n_ctx, n_batch;
  int nrun;      /* threads of the running team (<= nt): the work splits use it */
  int64_t wmax;  /* max(d, n_ff, n_head hd) */
  int64_t ldq;   /* (n_head + 2 n_kv) hd */
  uint16_t *kc;  /* K fp16: [layer][kv_head][kcap / 16][hd][16] (ts__kidx) */
  int64_t kcap;  /* n_ctx rounded up to a multiple of 16 */
  uint16_t *vc;  /* V fp16: [layer][kv_head][n_ctx][hd] (one position's values contiguous) */
  float *x;      /* [n_batch][d] residual stream */
  float *x2;     /* gemma3: [n_batch][d] the stream after the attention half (x + post(attn)), while
                  * tmp holds the MLP's output (ts__gemma_resid) */
  float *tmp;    /* [n_batch][d] matmul output before the residual add */
  float *qkv;    /* [n_batch][ldq] */
  float *att;    /* [n_batch][n_head hd] */
  float *ffg, *ffu; /* [n_batch][n_ff] gate (then silu(gate) * up), up */
  float *scores; /* [nt][TS__ATT_ROWS][scores_ld] an attention item's scratch (llm_attn.c) */
  int64_t scores_ld;
  float *rope;   /* [n_ctx][n_rot / 2][2] cos, sin */
  float *rope_swa; /* gemma3: the same for the local layers' base (NULL: none) */
  ts__tbuf *tb;  /* [nt] */
  void **mem;    /* every allocation, for destroy */
  int nmem, memcap;
  ts__barrier bar;
  ts__pool *pool;   /* threads 1..nt-1 (NULL when nt = 1) */
  double *waits;    /* [nt] each thread's barrier time in the last eval */
  ts__share *share; /* [nt] */
  ts__flag *kvf;    /* [nt] thread t's KV heads of the current layer stored (decode) */
  ts__actb hact;    /* decode: h quantized for down, each thread's neurons written by it (pf unset) */
  ts__actb aact;    /* decode: attention's output quantized for wo, each thread's heads by it */
  unsigned kvgen;   /* decode steps so far: kvf's values (ts__step_qkv_att) */
  int out_from;     /* the eval batch's first token with logits (T: none; ts__step_down) */
  const ts__llm_ops *ops;
  ts_llm_timing tm;
  bool counted;     /* counted in the model's nstates */
  bool adapt;       /* adaptive decode team (ts_llm_state_set_adaptive) */
  ts__team_ctl team;
  /* activation sparsity (llm_sparse.c; NULL: dense decode) and its per-state scratch and counts */
  const struct ts_llm_sparse *sp;
  struct ts__sparse_ws *spw;
  /* calibration's observer of batches (llm_calib.c; NULL: none): called on thread 0 at each
   * ts__cap_point of every layer, the other threads waiting at a barrier on either side */
  void (*cap)(void *ctx, ts_llm_state *s, int l, int point, int T);
  void *cap_ctx;
};
/* Where calibration observes a batch of layer l: x before attention (s->x), attention's output
 * (s->att), x after attention (s->x), gate and up before SwiGLU (s->ffg, s->ffu). */
enum { TS__CAP_X_ATTN = 0, TS__CAP_ATT, TS__CAP_X_FFN, TS__CAP_GATE_UP };

/* Y[t][r] = W[r] . X[t] for rows [r0, r1) and tokens [0, T): Y at y + t * ldy + r. Float weight
 * types read xf[t * ldx ..]; block types read the quantized xb (xb->n == w->cols). */
void ts__wmat_gemm(const ts__wmat *w, int64_t r0, int64_t r1, const float *xf, int64_t ldx, const ts__actb *xb,
                   int T, float *y, int64_t ldy);

/* One eval batch's steps on thread tid (llm_layer.c); barriers between them are the caller's. */
void ts__step_embed(ts_llm_state *s, int tid, const int32_t *tokens, int T);
void ts__step_qkv(ts_llm_state *s, int tid, int l, int T, int pos);
/* Decode (T = 1): the thread's part of q|k|v (ts__qkv_part) and then its attention heads, with no
 * barrier between; returns the seconds spent in attention (with any wait for another thread's KV
 * head). */
double ts__step_qkv_att(ts_llm_state *s, int tid, int l, int pos);
void ts__step_wo(ts_llm_state *s, int tid, int l, int T);
void ts__step_gate_up(ts_llm_state *s, int tid, int l, int T, int pos);
void ts__step_swiglu(ts_llm_state *s, int tid, int T);
void ts__step_down(ts_llm_state *s, int tid, int l, int T);
void ts__step_output(ts_llm_state *s, int tid, int T, int from, float *logits);

/* ---- activation sparsity in decode (llm_sparse.c) ---------------------------------------------
 * With s->sp set, single-token evals route these through the sparse paths. ts__sparse_rows computes
 * rows [r0, r1) of projection p of layer l (q, k, v: of their own matrix; o: of wo) into y[r0..r1)
 * from the fp32 input x when the layer thresholds p's input (TEAL) and returns true; false: the
 * caller runs the dense rows. The MLP: ts__sparse_mlp_needs says whether layer l runs the sparse
 * MLP, which takes three phases with a barrier after each of the first two (mlp_a: gate rows of the
 * thread's neurons, a = silu(gate) (gemma3: gelu(gate)); mlp_b: the active neurons, routing, up rows
 * of the thread's share of them; mlp_c: down over the active neurons into the thread's d rows,
 * added to the residual; gemma3: into tmp, which the next step post-norms and adds, as its dense
 * down does). */
bool ts__sparse_rows(ts_llm_state *s, int tid, int l, int p, int64_t r0, int64_t r1, const float *x, float *y);
bool ts__sparse_mlp_needs(const ts_llm_state *s, int l);
/* The thread's input of layer l's MLP in a decode step: rms(x) * ffn_norm into its xn (*xf, *ldx)
 * and quantized into its act, with the K-quants' form when gate or up is one (llm_layer.c's prep
 * for token 0); gemma3: x first becomes x + post_attn_norm(tmp), kept in x2, as ts__step_gate_up
 * forms it. */
void ts__sparse_prep(ts_llm_state *s, int tid, int l, const float **xf, int64_t *ldx);
void ts__sparse_mlp_a(ts_llm_state *s, int tid, int l);
void ts__sparse_mlp_b(ts_llm_state *s, int tid, int l);
void ts__sparse_mlp_c(ts_llm_state *s, int tid, int l);
/* Frees the state's sparse scratch (ts_llm_state_destroy). */
void ts__sparse_ws_free(ts_llm_state *s);
/* Counts a finished single-token eval (eval_batch). */
void ts__sparse_count_token(ts_llm_state *s);

/* Query heads [h0, h1) of thread tid when a batch is one chunk of TS__ATT_ROWS tokens or fewer
 * (decode): contiguous, so that a thread reads the fewest KV heads. */
void ts__att_heads(const ts_llm_state *s, int tid, int *h0, int *h1);
/* Offsets of layer l, KV head kh in the K (blocked, ts__kidx) and V caches. */
static inline size_t ts__kbase(const ts_llm_state *s, int l, int kh, int nkv, int hd) {
  return ((size_t)l * (size_t)nkv + (size_t)kh) * (size_t)hd * (size_t)s->kcap;
}
static inline size_t ts__vbase(const ts_llm_state *s, int l, int kh, int nkv, int hd) {
  return ((size_t)l * (size_t)nkv + (size_t)kh) * (size_t)hd * (size_t)s->n_ctx;
}
/* Dimensions [i0, i1) of KV head kh's k row (roped) and v row at position pos into layer l's cache. */
void ts__kv_store(ts_llm_state *s, int l, int kh, int pos, const float *k, const float *v, int i0, int i1);
/* Queues, on thread tid's side-prefetch queue, the K and V of layer l that its single-token
 * attention at position pos will read (pumped by the matmul tiles before that). */
void ts__att_queue_kv(ts_llm_state *s, int tid, int l, int pos);

/* Thread tid's part of causal attention for tokens [0, T > 1) at positions pos.. of layer l: q
 * from s->qkv, K/V from the cache (already holding these tokens), output into s->att. */
void ts__llm_attention(ts_llm_state *s, int l, int T, int pos, int tid);
/* Decode: thread tid's query heads (ts__att_heads) at position pos, the cache holding it. */
void ts__att_decode(ts_llm_state *s, int l, int pos, int tid);

#endif
