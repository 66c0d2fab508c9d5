/* Evaluation state (KV cache, workspaces, RoPE table, worker pool) and the eval driver: one run of
 * the state's worker pool per batch of up to n_batch tokens, the layer steps separated by the
 * team's spin barrier:
 *
 *   embed | per layer: qkv+rope+cache | attention | wo+residual | gate,up,silu | down+residual |
 *   output (only the tokens whose logits are asked for)
 *
 * Prefill and decode are the same code: T tokens through batched GEMM kernels (T = 1 in decode). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/llm_sparse_internal.h"
#include "llm/llm_pred_internal.h"

static void *alloc(ts_llm_state *s, size_t count, size_t size, bool *ok) {
  size_t bytes;
  if (!ts_mul_size(count, size, &bytes)) {
    *ok = false;
    return NULL;
  }
  /* past memcap slots (a miscount of the allocations below) it fails rather than overflow s->mem */
  void *p = s->nmem < s->memcap ? ts_calloc(bytes ? bytes : 1, 1) : NULL;
  if (!p) *ok = false;
  else s->mem[s->nmem++] = p;
  return p;
}

/* Quantized activations of n values (the ts__actb arrays; pf unset), with the K-quants' Q8_K form
 * when `kform`. */
static void alloc_actb(ts_llm_state *s, ts__actb *a, size_t n, bool kform, bool *ok) {
  const size_t nb = n / TS_QK + 1;
  a->n = (int64_t)n;
  a->q = alloc(s, n, 1, ok);
  a->d = alloc(s, nb, sizeof(float), ok);
  a->s = alloc(s, nb, sizeof(float), ok);
  a->sum = alloc(s, nb, sizeof(int32_t), ok);
  a->gsum = alloc(s, nb * 8, sizeof(int32_t), ok);
  if (kform) {
    a->kq = alloc(s, n, 1, ok);
    a->kd = alloc(s, n / TS_QKK + 1, sizeof(float), ok);
    a->kbs = alloc(s, n / 16 + 1, sizeof(int16_t), ok);
  }
}

/* Whether any matrix of the model is a K-quant (its activations then also get the Q8_K form). */
static bool has_kquant(const ts_llm_model *m) {
  if (ts__qt_kquant(m->output.type)) return true;
  for (int l = 0; l < m->cfg.n_layer; l++) {
    const ts__llm_layer *L = &m->layers[l];
    const ts__wmat *w[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    for (int i = 0; i < 7; i++)
      if (ts__qt_kquant(w[i]->type)) return true;
  }
  return false;
}

void ts_llm_state_destroy(ts_llm_state *s) {
  if (!s) return;
  ts__pool_destroy(s->pool); /* its threads first: they read the state */
  ts__sparse_ws_free(s);
  if (s->counted) {
    pthread_mutex_lock(&s->m->lock);
    s->m->nstates--;
    pthread_mutex_unlock(&s->m->lock);
  }
  for (int i = 0; i < s->nmem; i++) ts_free(s->mem[i]);
  free(s->mem);
  ts_free(s->tb);
  free(s);
}

/* cos, sin of theta_i = scale * p * base^(-2i / n_rot), with the powers formed as llama.cpp forms
 * them (an fp32 running product of powf(base, -2 / n_rot), cosf/sinf of the fp32 angle): the angle
 * is then the same float, and Q/K round to the same fp16 values. */
static void rope_table(ts_llm_state *s, float *rope, float base, float scale) {
  const ts_llm_config *c = &s->m->cfg;
  const int half = c->n_rot / 2;
  const float theta_scale = powf(base, -2.0f / (float)c->n_rot);
  for (int p = 0; p < s->n_ctx; p++) {
    float theta = (float)p;
    for (int i = 0; i < half; i++) {
      const float t = scale * theta;
      rope[((size_t)p * half + i) * 2] = cosf(t);
      rope[((size_t)p * half + i) * 2 + 1] = sinf(t);
      theta *= theta_scale;
    }
  }
}

ts_status ts_llm_state_create(ts_llm_state **out, ts_llm_model *m, const ts_context *ctx, int n_ctx, int n_batch) {
  if (!m || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_state_create: NULL argument");
  *out = NULL;
  if (n_ctx < 1 || n_ctx > (1 << 20)) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_state_create: context %d outside 1..%d", n_ctx, 1 << 20);
  if (n_batch < 1 || n_batch > 8192) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_state_create: batch %d outside 1..8192", n_batch);
  if (n_batch > n_ctx) n_batch = n_ctx;
  const ts_llm_config *c = &m->cfg;
  ts_llm_state *s = calloc(1, sizeof *s);
  if (!s) return ts_error(TS_ERR_OOM, "ts_llm_state_create: out of memory");
  s->m = m;
  s->nt = ctx ? ts_context_threads(ctx) : ts_default_threads();
  if (s->nt < 1) s->nt = 1;
  s->n_ctx = n_ctx;
  s->n_batch = n_batch;
  const int64_t d = c->d_model, ff = c->n_ff, hd = c->head_dim, nq = (int64_t)c->n_head * hd;
  s->wmax = d > ff ? d : ff;
  if (nq > s->wmax) s->wmax = nq;
  s->ldq = (int64_t)(c->n_head + 2 * c->n_head_kv) * hd;
  s->memcap = 48 + 12 * s->nt;
  s->mem = calloc((size_t)s->memcap, sizeof *s->mem);
  s->tb = ts_calloc((size_t)s->nt, sizeof *s->tb); /* 64-byte aligned: no line shared across threads */
  bool ok = s->mem && s->tb;
  s->kcap = ((int64_t)n_ctx + 15) & ~(int64_t)15;
  const size_t B = (size_t)n_batch, cache = (size_t)c->n_layer * (size_t)c->n_head_kv * (size_t)hd * (size_t)n_ctx;
  if (ok) {
    s->kc = alloc(s, cache / (size_t)n_ctx * (size_t)s->kcap, sizeof(uint16_t), &ok);
    s->vc = alloc(s, cache, sizeof(uint16_t), &ok);
    s->x = alloc(s, B * (size_t)d, sizeof(float), &ok);
    s->tmp = alloc(s, B * (size_t)d, sizeof(float), &ok);
    s->qkv = alloc(s, B * (size_t)s->ldq, sizeof(float), &ok);
    s->att = alloc(s, B * (size_t)nq, sizeof(float), &ok);
    s->ffg = alloc(s, B * (size_t)ff, sizeof(float), &ok);
    s->ffu = alloc(s, B * (size_t)ff, sizeof(float), &ok);
    s->scores_ld = (((int64_t)n_ctx + 63) & ~(int64_t)63) + 64;
    s->scores = alloc(s, (size_t)s->nt * TS__ATT_ROWS * (size_t)s->scores_ld, sizeof(float), &ok);
    s->share = alloc(s, (size_t)s->nt, sizeof(ts__share), &ok);
    s->waits = alloc(s, (size_t)s->nt, sizeof(double), &ok);
    s->kvf = alloc(s, (size_t)s->nt, sizeof(ts__flag), &ok);
    for (int t = 0; t < s->nt && ok; t++) ts__flag_init(&s->kvf[t]);
    alloc_actb(s, &s->hact, (size_t)ff, false, &ok);
    alloc_actb(s, &s->aact, (size_t)nq, false, &ok);
    s->rope = alloc(s, (size_t)n_ctx * (size_t)(c->n_rot / 2) * 2, sizeof(float), &ok);
    const bool gemma = m->arch == TS__ARCH_GEMMA3, kform = has_kquant(m);
    if (gemma) {
      s->x2 = alloc(s, B * (size_t)d, sizeof(float), &ok);
      if (c->n_swa_layers) s->rope_swa = alloc(s, (size_t)n_ctx * (size_t)(c->n_rot / 2) * 2, sizeof(float), &ok);
    }
    for (int t = 0; t < s->nt && ok; t++) {
      ts__tbuf *b = &s->tb[t];
      const size_t nv = B * (size_t)s->wmax;
      b->xn = alloc(s, nv, sizeof(float), &ok);
      if (gemma) b->xr = alloc(s, B * (size_t)d, sizeof(float), &ok);
      alloc_actb(s, &b->act, nv, kform, &ok);
      b->act.pf = &b->pf;
    }
  }
  if (!ok) {
    ts_llm_state_destroy(s);
    return ts_error(TS_ERR_OOM, "ts_llm_state_create: out of memory for a %d-token context (%.2f GiB of KV cache, %.2f GiB of memory available)",
                    n_ctx, (double)(2 * cache * sizeof(uint16_t)) / (1 << 30), (double)ts_mem_available() / (1 << 30));
  }
  if (s->nt > 1) { /* threads 1..nt-1; fewer when the system gives fewer (results do not depend on it) */
    int started = 0;
    s->pool = ts__pool_create(s->nt - 1, &started);
    s->nt = 1 + started;
  }
  { /* the packed weights cut for this team, unless another state uses them (results do not depend on
     * it; the layout is the model's cache shared by its states). Under m->lock, so states created
     * and destroyed on several threads at once count right and only the first of a team lays out. */
    pthread_mutex_lock(&m->lock);
    if (m->nstates == 0 && ts__llm_layout(m, s->nt) != TS_OK) ts_error_clear(); /* the old layout serves */
    /* decode's weight prefetch distance, measured for this team (unless set) */
    if (m->nstates == 0 && (m->wpf < 0 || (m->wpf_rep.measured && m->wpf_rep.team != s->nt)))
      ts__llm_tune_wpf(m, s->nt, TS__WPF_MIN_BYTES);
    m->nstates++;
    s->counted = true;
    pthread_mutex_unlock(&m->lock);
  }
  rope_table(s, s->rope, c->rope_base, c->rope_scale);
  if (s->rope_swa) rope_table(s, s->rope_swa, c->rope_base_swa, 1.0f); /* llama.cpp: local layers unscaled */
  s->ops = ts__llm_ops_active();
  s->nrun = s->nt;
  ts__barrier_init(&s->bar, s->nt);
  s->adapt = true;
  *out = s;
  return TS_OK;
}

int ts_llm_state_n_ctx(const ts_llm_state *s) { return s->n_ctx; }

void ts_llm_state_set_adaptive(ts_llm_state *s, bool on) {
  if (!s) return;
  s->adapt = on;
  memset(&s->team, 0, sizeof s->team);
}

void ts_llm_state_timing(const ts_llm_state *s, ts_llm_timing *t) { *t = s->tm; }
void ts_llm_state_timing_reset(ts_llm_state *s) {
  memset(&s->tm, 0, sizeof s->tm);
  ts__sparse_stats_reset(s);
}

/* One batch of T <= n_batch tokens on the team: the job every thread of the pool's run takes. */
typedef struct eval_job {
  ts_llm_state *s;
  const int32_t *tokens;
  int T, pos, from;
  float *logits;
  double acc[6];    /* thread 0's time per step kind (ts_llm_timing) */
  double *waited;   /* [nrun] each thread's time at barriers (imbalance, a descheduled partner) */
} eval_job;

static void eval_team(void *arg, int tid, int nrun) {
  (void)nrun;
  eval_job *j = arg;
  ts_llm_state *s = j->s;
  const int T = j->T, pos = j->pos, from = j->from, nl = s->m->cfg.n_layer;
  double t0 = ts_now(), t1;
#define LAP(i)                      \
  if (tid == 0) {                   \
    t1 = ts_now();                  \
    j->acc[i] += t1 - t0;           \
    t0 = t1;                        \
  }
  /* decode: the thread's side-prefetch queue (next phases' first weights, next layer's KV) */
  ts__pfq *pf = T == 1 ? &s->tb[tid].pf : NULL;
  if (pf) {
    ts__pfq_reset(pf);
    const int wpf = __atomic_load_n(&s->m->wpf, __ATOMIC_RELAXED); /* the model's setting (-1: none yet) */
    pf->wpf = wpf > 0 ? wpf : 0;
    pf->side = __atomic_load_n(&s->m->side, __ATOMIC_RELAXED) != 0; /* side prefetches (default off) */
  }
  double waited = 0;
#define BAR()                            \
  do {                                   \
    const double w0 = ts_now();          \
    ts__barrier_wait(&s->bar, pf);       \
    waited += ts_now() - w0;             \
  } while (0)
  ts__step_embed(s, tid, j->tokens, T);
  BAR();
  LAP(5)
#define CAP(point)                                                   \
  if (s->cap && T > 1) {                                             \
    if (tid == 0) s->cap(s->cap_ctx, s, l, (point), T);              \
    BAR();                                                           \
  }
  for (int l = 0; l < nl; l++) {
    CAP(TS__CAP_X_ATTN)
    if (T == 1) { /* q|k|v and attention in one phase */
      const double ta = ts__step_qkv_att(s, tid, l, pos);
      BAR();
      if (tid == 0) {
        t1 = ts_now();
        j->acc[0] += t1 - t0 - ta;
        j->acc[1] += ta;
        t0 = t1;
      }
    } else {
      ts__step_qkv(s, tid, l, T, pos);
      BAR();
      LAP(0)
      ts__llm_attention(s, l, T, pos, tid);
      BAR();
      LAP(1)
    }
    CAP(TS__CAP_ATT)
    ts__step_wo(s, tid, l, T);
    BAR();
    LAP(2)
    CAP(TS__CAP_X_FFN)
    if (T == 1 && ts__sparse_mlp_needs(s, l)) { /* activation-sparse MLP (llm_sparse.c) */
      if (ts__sparse_mlp_kind(s, l) == 3) ts__pred_mlp_a(s, tid, l); /* predictor (llm_pred.c) */
      else ts__sparse_mlp_a(s, tid, l);
      BAR();
      if (ts__sparse_mlp_kind(s, l) == 2) {
        ts__sparse_mlp_b(s, tid, l);
        BAR();
      }
      ts__sparse_mlp_c(s, tid, l);
      BAR();
      LAP(3)
      continue;
    }
    ts__step_gate_up(s, tid, l, T, pos);
    BAR();
    CAP(TS__CAP_GATE_UP)
    if (T > 1) {
      ts__step_swiglu(s, tid, T);
      BAR();
    }
    ts__step_down(s, tid, l, T);
    BAR();
    LAP(3)
  }
  if (j->logits && from < T) ts__step_output(s, tid, T, from, j->logits);
  LAP(4)
#undef LAP
#undef CAP
#undef BAR
  j->waited[tid] = waited;
}

/* One batch of T <= n_batch tokens; logits of tokens [from, T) when logits != NULL. */
static void eval_batch(ts_llm_state *s, const int32_t *tokens, int T, int pos, int from, float *logits) {
  /* decode: the adaptive team's size (llm_team.c); batches always run on the whole team */
  const int team = T == 1 && s->adapt ? ts__team_size(&s->team, s->nt) : s->nt;
  double *waited = s->waits;
  for (int t = 0; t < team; t++) waited[t] = 0;
  eval_job j = {s, tokens, T, pos, from, logits, {0}, waited};
  const double t_start = ts_now();
  s->nrun = team;
  s->out_from = logits ? from : T;
  ts__barrier_init(&s->bar, team);
  if (team > 1) ts__pool_run(s->pool, eval_team, &j, team);
  else eval_team(&j, 0, 1);
  if (T == 1) {
    s->kvgen++;
    ts__sparse_count_token(s);
  } /* the next step's KV flag values (ts__step_qkv_att) */
  double wait_sum = 0;
  for (int t = 0; t < team; t++) wait_sum += waited[t];
  s->tm.qkv += j.acc[0];
  s->tm.attn += j.acc[1];
  s->tm.wo += j.acc[2];
  s->tm.mlp += j.acc[3];
  s->tm.output += j.acc[4];
  s->tm.other += j.acc[5];
  const double elapsed = ts_now() - t_start;
  s->tm.total += elapsed;
  s->tm.wait += wait_sum / team;
  if (T == 1 && s->adapt) {
    ts__team_update(&s->team, s->nt, team, elapsed, elapsed > 0 ? wait_sum / team / elapsed : 0);
    if (team == 1 && s->nt > 1) s->tm.solo_steps++;
  }
  s->tm.tokens += T;
  s->tm.calls++;
}

static ts_status eval_checked(ts_llm_state *s, const int32_t *tokens, int n, int pos, ts_llm_logits which, int from,
                              float *logits) {
  if (!s || (n > 0 && !tokens)) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: NULL argument");
  if (n < 1) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: %d tokens (at least 1)", n);
  if (pos < 0 || (int64_t)pos + n > s->n_ctx)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: positions %d..%lld do not fit the %d-token context", pos,
                    (long long)pos + n - 1, s->n_ctx);
  if (which != TS_LLM_LOGITS_NONE && !logits) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: NULL logits buffer");
  const int nv = s->m->cfg.n_vocab;
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= nv)
      return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: token %d at index %d is outside the vocabulary of %d", tokens[i], i, nv);
  if (which == TS_LLM_LOGITS_LAST) from = n - 1;
  else if (which == TS_LLM_LOGITS_ALL) from = 0;
  else if (which == TS_LLM_LOGITS_NONE) from = n;
  for (int b0 = 0; b0 < n; b0 += s->n_batch) {
    int T = n - b0 < s->n_batch ? n - b0 : s->n_batch;
    int f = from - b0 < 0 ? 0 : from - b0;
    float *lg = f < T ? logits + (size_t)(b0 + f - from) * (size_t)nv : NULL;
    eval_batch(s, tokens + b0, T, pos + b0, f, lg);
  }
  return TS_OK;
}

ts_status ts_llm_eval(ts_llm_state *s, const int32_t *tokens, int n, int pos, ts_llm_logits which, float *logits) {
  if (which == TS_LLM_LOGITS_FROM) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: TS_LLM_LOGITS_FROM needs ts_llm_eval_from");
  if ((unsigned)which > TS_LLM_LOGITS_FROM) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval: unknown logits mode %d", (int)which);
  return eval_checked(s, tokens, n, pos, which, 0, logits);
}

ts_status ts_llm_eval_from(ts_llm_state *s, const int32_t *tokens, int n, int pos, int from, float *logits) {
  if (from < 0 || from >= n) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_eval_from: first scored token %d outside 0..%d", from, n - 1);
  return eval_checked(s, tokens, n, pos, TS_LLM_LOGITS_FROM, from, logits);
}
