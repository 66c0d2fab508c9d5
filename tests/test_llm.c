/* LLM runtime on tiny GGUF models written by our writer (tests/test_llm_tiny.h): the forward pass
 * against an independent double-precision reference, prefill vs token-by-token decode, batching,
 * threads, sampling, perplexity, the batched GEMM and attention kernels against their references
 * (bit for bit), and load / eval errors. The real SmolLM2 model is not needed
 * (tests/test_llm_model.c and tests/test_tokenizer.c check it against llama.cpp when present).
 *
 * Tolerances (logits of a 2-layer model, |logit| up to ~25):
 *  - F32 weights: fp32 everywhere (norms, matmuls of length <= 256, softmax) against double, both
 *    rounding Q, K, V and the attention probabilities to fp16 at the same points: a few hundred
 *    fp32 roundings of unit-size terms (2e-4 (1 + |ref|)), plus the elements whose fp32 and double
 *    values fall on two sides of an fp16 rounding boundary, each moving by 2^-11 of itself
 *    (measured up to 1e-4 max|ref|): |diff| <= 2e-4 (1 + |ref| + max|ref|).
 *  - Q4_1 / Q8_0 / Q4_0 weights against the reference over the same dequantized weights, with the
 *    reference rounding every matmul input as the int8 activation format does (tiny_qact): what
 *    is left is the activation whose fp32 and double values fall on two sides of an int8 rounding
 *    boundary: one step (~0.8% of its block's range), which later layers and positions carry on.
 *    Without such a flip the gap is ~1e-7 max|ref|; with one, measured over 6 model seeds, both
 *    model shapes and the three block types (this code and the free-order kernels before it) up
 *    to 1.9e-2 max|ref| (the old 1e-2 bound held for seed 11 only by luck), so |diff| <= 5e-2
 *    max|ref|. A structural error (a head, a RoPE pair, a scale, an offset) moves logits by tens of
 *    % and fails it; the kernels themselves are checked bit for bit below.
 *  - prefill vs token-by-token decode: llama.cpp's (and so tessera's) attention orders differ
 *    between single-token and larger batches, so the same flips can occur: the same bounds
 *    (F32 1e-4 (1 + max|ref|)).
 *  - 1 vs 2 threads, and logits of a tail of the batch (eval_from): the same operations on the same
 *    values, bit for bit. */
#include <float.h>
#include <inttypes.h>
#include <omp.h>
#include <stdatomic.h>

#include "llm/cpu_order.h"
#include "llm/llm_internal.h"
#include "test_llm_tiny.h"
#include "tst_dispatch.h"

static const int32_t kSeq[] = {5, 77, 200, 3, 150, 260, 261, 9, 44, 100, 101, 102, 255, 7, 8, 30, 31, 32, 33, 34};
#define NSEQ (int)(sizeof kSeq / sizeof kSeq[0])

static ts_llm_model *load_tiny(const tiny_cfg *c, const char *file) { return tiny_load(c, file); }

static double max_abs(const double *x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

/* max |a - ref| / (abs_scale + rel * |ref|) */
static double err_ratio(const float *a, const double *ref, size_t n, double abs_scale, double rel) {
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - ref[i]) / (abs_scale + rel * fabs(ref[i]));
    if (!(e <= w)) w = e != e ? INFINITY : e;
  }
  return w;
}

static double max_diff_f(const float *a, const float *b, size_t n) { return tst_max_abs_diff(a, b, n); }

/* The packed layout (ts__llm_layout) for a team of nt: every packed matrix cut in nt pieces at its
 * decode home boundaries (ascending, 0 .. rows; q|k|v at decode's heads, gate|up at its neurons),
 * each row unpacking to the file's bytes, and each thread's pieces back to back in decode's order
 * (k, v, q, wo, gate, up, down of every layer, then the output projection), the threads' regions
 * one after another. */
static void check_layout(const ts_llm_model *m, int nt) {
  const int nl = m->cfg.n_layer;
  const ts__wmat *ws[64];
  int n = 0;
  for (int l = 0; l < nl && n + 8 < 64; l++) {
    const ts__llm_layer *L = &m->layers[l];
    const ts__wmat *lw[] = {&L->wk, &L->wv, &L->wq, &L->wo, &L->gate, &L->up, &L->down};
    for (int i = 0; i < 7; i++)
      if (lw[i]->npiece) ws[n++] = lw[i];
    for (int t = 0; t < nt && L->wq.npiece == nt; t++) { /* q, k, v: cut at decode's heads */
      const ts__qkv_part p = ts__qkv_part_of(&m->cfg, t, nt);
      const int64_t hd = m->cfg.head_dim;
      CHECK(L->wq.cut[t] == p.h0 * hd && L->wk.cut[t] == p.k0 * hd && L->wv.cut[t] == p.k0 * hd,
            "layer %d thread %d: q|k|v cut at %lld, %lld, %lld, expected heads %d and KV heads %d", l, t,
            (long long)L->wq.cut[t], (long long)L->wk.cut[t], (long long)L->wv.cut[t], p.h0, p.k0);
    }
    for (int t = 0; t < nt && L->gate.npiece == nt && L->up.npiece == nt; t++) { /* gate, up: at its neurons */
      int64_t f0, f1;
      ts__ff_part(&m->cfg, t, nt, &f0, &f1);
      CHECK(L->gate.cut[t] == f0 && L->up.cut[t] == f0, "layer %d thread %d: gate|up cut at %lld, %lld, expected %lld", l,
            t, (long long)L->gate.cut[t], (long long)L->up.cut[t], (long long)f0);
    }
  }
  if (m->output.npiece) ws[n++] = &m->output;
  if (n == 0) return; /* F32 weights, or no packed kernels at this ISA level */
  CHECK(m->layout_nt == nt, "layout for %d threads, expected %d", m->layout_nt, nt);
  uint8_t row[4096];
  const uint8_t *next = NULL;
  for (int t = 0; t < nt; t++)
    for (int i = 0; i < n; i++) {
      const ts__wmat *w = ws[i];
      CHECK(w->npiece == nt && w->cut[0] == 0 && w->cut[nt] == w->rows, "%s: %d pieces, cut %lld..%lld of %lld rows", w->name,
            w->npiece, (long long)w->cut[0], (long long)w->cut[w->npiece], (long long)w->rows);
      if (w->npiece != nt) return;
      CHECK(w->cut[t] <= w->cut[t + 1], "%s: cut %d decreases", w->name, t);
      CHECK(!next || w->at[t] == next, "%s: thread %d's piece is not right after its previous one", w->name, t);
      next = w->at[t] + ts__pack_bytes(w->type, w->cut[t + 1] - w->cut[t], w->cols);
      CHECK(w->row_bytes <= sizeof row, "row of %zu bytes", w->row_bytes);
      for (int64_t r = w->cut[t]; r < w->cut[t + 1] && w->row_bytes <= sizeof row; r++) {
        CHECK(ts__wmat_piece(w, r) == t || w->cut[ts__wmat_piece(w, r)] == w->cut[t], "%s row %lld: piece %d, expected %d",
              w->name, (long long)r, ts__wmat_piece(w, r), t);
        ts__unpack_row(w->type, w->at[t], r - w->cut[t], row, w->cols);
        if (memcmp(row, w->data + (size_t)r * w->row_bytes, w->row_bytes)) {
          CHECK(0, "%s row %lld (thread %d's piece) does not unpack to the file's row", w->name, (long long)r, t);
          return;
        }
      }
    }
}

/* wide: head size 64 with 3 query heads on 1 KV head, so the AVX-512 attention item runs (grouped
 * query heads in decode) and a 2-thread split of the q|k|v rows falls inside a head. gemma: the
 * tiny gemma3 (tiny_gemma: QK-norm, post-norms, GELU gate, a 7-position window on layer 0 with its
 * own RoPE base, 3 heads of 32 on a 64-wide stream), against the reference's gemma3 path. */
static void check_forward_arch(uint32_t wtype, const char *file, bool tied, bool wide, bool gemma) {
  tiny_cfg c = gemma ? tiny_gemma(wtype) : tiny_default(wtype);
  c.tied = tied;
  if (wide) c.d = 192, c.ff = 256, c.n_head = 3, c.n_kv = 1, c.hd = 64;
  ts_llm_model *m = load_tiny(&c, file);
  if (!m) return;
  const int nv = ts_llm_model_config(m)->n_vocab;
  CHECK(nv == tiny_n_vocab() && ts_llm_model_config(m)->tied_output == tied, "vocab %d tied %d", nv, ts_llm_model_config(m)->tied_output);
  double *ref = malloc((size_t)NSEQ * nv * sizeof *ref);
  tiny_qact = wtype != TS_QT_F32;
  tiny_reference(m, kSeq, NSEQ, ref);
  const double scale = max_abs(ref, (size_t)NSEQ * nv);
  const bool f32 = wtype == TS_QT_F32;
  float *all = tst_alloc_guarded((size_t)NSEQ * nv), *step = tst_alloc_guarded((size_t)NSEQ * nv);
  float *one_thread = malloc((size_t)3 * NSEQ * nv * sizeof *one_thread);
  for (int threads = 1; threads <= 3; threads++) {
    ts_context *ctx;
    CHECK_OK(ts_context_create(&ctx, threads));
    for (int batch = 1; batch <= 16; batch *= 4) { /* 1, 4, 16: decode-sized up to one big batch */
      ts_llm_state *s = NULL;
      CHECK_OK(ts_llm_state_create(&s, m, ctx, 32, batch));
      if (!s) continue;
      check_layout(m, s->nt);
      tst_poison(all, (size_t)NSEQ * nv);
      CHECK_OK(ts_llm_eval(s, kSeq, NSEQ, 0, TS_LLM_LOGITS_ALL, all));
      double w = f32 ? err_ratio(all, ref, (size_t)NSEQ * nv, 2e-4 * (1 + scale), 2e-4) : err_ratio(all, ref, (size_t)NSEQ * nv, 5e-2 * scale, 0);
      CHECK(w <= 1, "%s tied=%d threads=%d batch=%d: prefill vs reference error ratio %.3g (scale %.3g)",
            ts_qtype_name(wtype), tied, threads, batch, w, scale);
      if (threads == 1) memcpy(one_thread + (size_t)(batch == 1 ? 0 : batch == 4 ? 1 : 2) * NSEQ * nv, all, (size_t)NSEQ * nv * sizeof *all);
      else
        CHECK(!memcmp(one_thread + (size_t)(batch == 1 ? 0 : batch == 4 ? 1 : 2) * NSEQ * nv, all, (size_t)NSEQ * nv * sizeof *all),
              "%s batch=%d: 1 and %d threads give different logits", ts_qtype_name(wtype), batch, threads);
      if (threads == 2 && batch == 4) { /* a second state of another team while this one lives: the
                                         * layout stays cut for 2 threads, the logits are the same */
        ts_context *c1;
        ts_llm_state *s1 = NULL;
        CHECK_OK(ts_context_create(&c1, 1));
        CHECK_OK(ts_llm_state_create(&s1, m, c1, 32, batch));
        if (s1) {
          check_layout(m, s->nt);
          float *other = tst_alloc_guarded((size_t)NSEQ * nv);
          CHECK_OK(ts_llm_eval(s1, kSeq, NSEQ, 0, TS_LLM_LOGITS_ALL, other));
          CHECK(!memcmp(other, all, (size_t)NSEQ * nv * sizeof *all), "%s: a 1-thread state on the 2-thread layout differs",
                ts_qtype_name(wtype));
          ts_free(other);
        }
        ts_llm_state_destroy(s1);
        ts_context_destroy(c1);
      }
      /* token-by-token decode over the same cache positions */
      tst_poison(step, (size_t)NSEQ * nv);
      for (int t = 0; t < NSEQ; t++) CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, step + (size_t)t * nv));
      double dd = max_diff_f(all, step, (size_t)NSEQ * nv);
      CHECK(dd <= (f32 ? 1e-4 * (1 + scale) : 5e-2 * scale), "%s threads=%d batch=%d: prefill vs decode differ by %.3g",
            ts_qtype_name(wtype), threads, batch, dd);
      /* logits of the tail only: the same numbers */
      float *tail = tst_alloc_guarded((size_t)5 * nv);
      tst_poison(tail, (size_t)5 * nv);
      CHECK_OK(ts_llm_eval_from(s, kSeq, NSEQ, 0, NSEQ - 5, tail));
      CHECK(!memcmp(tail, all + (size_t)(NSEQ - 5) * nv, (size_t)5 * nv * sizeof *tail), "eval_from tail differs");
      CHECK(tst_guard_ok(tail, (size_t)5 * nv), "eval_from wrote past its logits");
      ts_free(tail);
      ts_llm_timing tm;
      ts_llm_state_timing(s, &tm);
      CHECK(tm.tokens == 2 * NSEQ + NSEQ && tm.total > 0, "timing counted %lld tokens", (long long)tm.tokens);
      if (threads == 2 && batch == 1) { /* the adaptive decode team: steps on one thread, the same logits */
        float *again = tst_alloc_guarded((size_t)NSEQ * nv);
        for (int adapt = 0; adapt <= 1; adapt++) {
          ts_llm_state_set_adaptive(s, adapt);
          ts_llm_state_timing_reset(s);
          tst_poison(again, (size_t)NSEQ * nv);
          for (int t = 0; t < NSEQ; t++) {
            if (adapt && t == 3) s->team.solo = 1, s->team.probe = 0; /* as if the team had gone solo */
            if (adapt && t == 12) s->team.solo = 0, s->team.probe = 0;
            CHECK_OK(ts_llm_eval(s, &kSeq[t], 1, t, TS_LLM_LOGITS_LAST, again + (size_t)t * nv));
          }
          CHECK(!memcmp(again, step, (size_t)NSEQ * nv * sizeof *again), "%s adaptive=%d: decode logits differ",
                ts_qtype_name(wtype), adapt);
          ts_llm_state_timing(s, &tm);
          CHECK(adapt ? tm.solo_steps >= 9 : tm.solo_steps == 0, "adaptive=%d: %lld solo steps", adapt,
                (long long)tm.solo_steps);
        }
        ts_free(again);
      }
      ts_llm_state_destroy(s);
    }
    ts_context_destroy(ctx);
  }
  CHECK(tst_guard_ok(all, (size_t)NSEQ * nv) && tst_guard_ok(step, (size_t)NSEQ * nv), "logits guard bytes overwritten");
  ts_free(all);
  ts_free(step);
  free(one_thread);
  free(ref);
  ts_llm_model_destroy(m);
}

static void check_forward(uint32_t wtype, const char *file, bool tied, bool wide) {
  check_forward_arch(wtype, file, tied, wide, false);
}

/* The adaptive decode team's policy (llm_team.c) on synthetic step timings. */
static int team_step(ts__team_ctl *c, double t_team, double t_solo, double wait) {
  const int n = ts__team_size(c, 2);
  ts__team_update(c, 2, n, n > 1 ? t_team : t_solo, n > 1 ? wait : 0);
  return n;
}
static void check_team_policy(void) {
  ts__team_ctl c = {0};
  int solo = 0;
  /* quiet: the team waits a few % at its barriers; never a step on one thread */
  for (int i = 0; i < 500; i++) solo += team_step(&c, 3e-3, 5e-3, 0.04) == 1;
  CHECK(solo == 0 && !c.solo, "quiet machine: %d steps on one thread", solo);
  /* another process busy: 75% waiting, a team step 11 ms, alone 5 ms -> solo within a few steps */
  int first = -1;
  for (int i = 0; i < 10 && first < 0; i++)
    if (team_step(&c, 11e-3, 5e-3, 0.75) == 1 && c.solo) first = i;
  CHECK(first >= 0 && first <= 4, "loaded: solo after %d steps", first);
  /* still loaded: one team probe per TS__TEAM_PROBE_EVERY steps, and solo stays */
  int team = 0;
  for (int i = 0; i < 4 * TS__TEAM_PROBE_EVERY; i++) team += team_step(&c, 11e-3, 5e-3, 0.75) > 1;
  CHECK(c.solo && team >= 3 && team <= 5, "loaded: %d team probes in %d steps (solo %d)", team, 4 * TS__TEAM_PROBE_EVERY,
        c.solo);
  /* the load leaves: the next probe takes the team back */
  int back = -1;
  for (int i = 0; i <= TS__TEAM_PROBE_EVERY + 1 && back < 0; i++)
    if (team_step(&c, 3e-3, 5e-3, 0.04) > 1 && !c.solo) back = i;
  CHECK(back >= 0, "the team did not come back after the load left");
  /* waits high but the team still faster than one thread: stays, probing at most every 16 steps */
  ts__team_ctl d = {0};
  solo = 0;
  for (int i = 0; i < 320; i++) solo += team_step(&d, 4e-3, 6e-3, 0.5) == 1;
  CHECK(!d.solo && solo <= 320 / 16 + 1, "team faster than solo: %d solo probes in 320 steps (solo %d)", solo, d.solo);
  /* one thread: always 1 */
  ts__team_ctl e = {0};
  CHECK(ts__team_size(&e, 1) == 1, "team of one");
}

static void check_eval_errors(void) {
  tiny_cfg c = tiny_default(TS_QT_Q4_1);
  ts_llm_model *m = load_tiny(&c, "llm_err.gguf");
  if (!m) return;
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, NULL, 8, 4));
  float *lg = malloc((size_t)tiny_n_vocab() * 8 * sizeof *lg);
  int32_t bad[2] = {5, 100000};
  CHECK_ERR_CONTAINS(ts_llm_eval(s, bad, 2, 0, TS_LLM_LOGITS_LAST, lg), "token 100000 at index 1");
  int32_t ok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK_ERR_CONTAINS(ts_llm_eval(s, ok, 9, 0, TS_LLM_LOGITS_LAST, lg), "do not fit the 8-token context");
  CHECK_ERR_CONTAINS(ts_llm_eval(s, ok, 2, 7, TS_LLM_LOGITS_LAST, lg), "positions 7..8");
  CHECK_ERR_CONTAINS(ts_llm_eval(s, ok, 2, 0, TS_LLM_LOGITS_LAST, NULL), "NULL logits");
  CHECK_STATUS(ts_llm_eval(s, ok, 0, 0, TS_LLM_LOGITS_NONE, NULL), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_llm_eval(s, ok, 3, 0, TS_LLM_LOGITS_NONE, NULL));
  CHECK_STATUS(ts_llm_eval_from(s, ok, 3, 0, 3, lg), TS_ERR_INVALID_ARG);
  ts_llm_state *s0 = NULL; /* a failed create sets its output to NULL: keep s to destroy it */
  CHECK_STATUS(ts_llm_state_create(&s0, m, NULL, 0, 4), TS_ERR_INVALID_ARG);
  CHECK(s0 == NULL, "failed state_create left a state");
  ts_llm_state_destroy(s);
  free(lg);
  ts_llm_model_destroy(m);
}

static void check_load_errors(void) {
  char path[2048];
  tst_tmp_path(path, sizeof path, "llm_bad.gguf");
  struct { const char *skip, *shape, *arch, *needle; } cases[] = {
      {"blk.1.ffn_up.weight", NULL, "llama", "blk.1.ffn_up.weight"},
      {NULL, "blk.0.attn_k.weight", "llama", "tensor blk.0.attn_k.weight has shape 64 x 31"},
      {NULL, NULL, "gpt2", "general.architecture \"gpt2\" is not supported"},
      {"output_norm.weight", NULL, "llama", "output_norm.weight"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tiny_cfg c = tiny_default(TS_QT_Q8_0);
    c.skip_tensor = cases[i].skip;
    c.bad_shape_tensor = cases[i].shape;
    c.arch = cases[i].arch;
    tiny_write(&c, path);
    ts_llm_model *m = (ts_llm_model *)1;
    CHECK_ERR_CONTAINS(ts_llm_model_load(&m, path), cases[i].needle);
    CHECK(m == NULL, "failed load left a model");
    CHECK(strstr(ts_last_error(), "llm_bad.gguf") != NULL, "error does not name the file: %s", ts_last_error());
  }
  /* gemma3: its own tensors and keys, named */
  struct { const char *skip, *shape, *needle; float base_swa; } g3[] = {
      {"blk.1.post_ffw_norm.weight", NULL, "blk.1.post_ffw_norm.weight", 100.0f},
      {"blk.0.attn_k_norm.weight", NULL, "blk.0.attn_k_norm.weight", 100.0f},
      {NULL, "blk.0.attn_q.weight", "tensor blk.0.attn_q.weight has shape 64 x 95", 100.0f},
      {NULL, NULL, "gemma3.rope.freq_base_swa = 0.5 must exceed 1", 0.5f},
  };
  for (size_t i = 0; i < sizeof g3 / sizeof g3[0]; i++) {
    tiny_cfg c = tiny_gemma(TS_QT_Q8_0);
    c.skip_tensor = g3[i].skip;
    c.bad_shape_tensor = g3[i].shape;
    c.rope_base_swa = g3[i].base_swa;
    tiny_write(&c, path);
    ts_llm_model *m = (ts_llm_model *)1;
    CHECK_ERR_CONTAINS(ts_llm_model_load(&m, path), g3[i].needle);
    CHECK(m == NULL, "failed load left a model");
  }
  ts_llm_model *m;
  CHECK_ERR_CONTAINS(ts_llm_model_load(&m, "/nonexistent/x.gguf"), "/nonexistent/x.gguf");
}

/* Attention work items: every SIMD level's kernel this CPU runs (a level it lacks is said to be
 * skipped, never replaced by the reference) vs the scalar reference over edge shapes (1..8 rows,
 * key counts below / at / above 16 and 64 up to 191, each head size with its own SIMD path (64,
 * 128, 192, 256), and 48, which has none: the SIMD item must hand it to the reference, checked as
 * such; a V row count that is not a multiple of 16), in both of llama.cpp's orders (single-token
 * batch or not). Both follow llm/cpu_order.h operation for operation, so the outputs must be equal
 * bit for bit. */
static void check_attention(void) {
  const int hds[] = {64, 128, 192, 256, 48};
  const int p0s[] = {0, 5, 15, 16, 37, 63, 64, 100, 190};
  ts_rng r;
  ts_rng_seed(&r, 17);
  TST_EACH_VARIANT(&ts__llm_ops_dispatch, vi, ts__llm_ops, ops)
  for (int hi = 0; hi < 5; hi++)
    for (int pi = 0; pi < 9; pi++)
      for (int mode = 0; mode < 3; mode++) /* tokens of a batch; query heads of one KV head, decode or not */
        for (int m = 1; m <= (mode != 2 ? TS__ATT_ROWS : 3); m++) { /* decode: up to 4 rows at once, then the rest */
          const int hd = hds[hi], p0 = p0s[pi], dp = mode == 0, one = mode == 1, ldk = 211, ldq = hd + 3, ldo = hd + 5;
          if ((hd > 128 || mode == 0) && p0 > 100) continue; /* the reference's time, not coverage */
          const int64_t lds = ((ldk + 63) & ~63) + 64;
          const int kcap = (ldk + 15) & ~15; /* K in blocks of 16 keys (ts__kidx) */
          uint16_t *KT = malloc((size_t)hd * kcap * 2), *V = malloc((size_t)ldk * hd * 2);
          float *q = malloc((size_t)m * ldq * sizeof *q), *S = malloc((size_t)m * lds * sizeof *S);
          float *o0 = tst_alloc_guarded((size_t)m * ldo), *o1 = tst_alloc_guarded((size_t)m * ldo);
          for (int i = 0; i < hd * kcap; i++) KT[i] = ts_f32_to_f16(ts_rng_normal(&r) * 0.3f);
          for (int i = 0; i < ldk * hd; i++) V[i] = ts_f32_to_f16(ts_rng_normal(&r));
          for (int i = 0; i < m * ldq; i++) q[i] = ts_rng_normal(&r) * 2.0f;
          if (pi % 2) { /* zeros of both signs among the keys and the query (zero products) */
            for (int i = 0; i < hd * kcap; i += 3) KT[i] = i % 2 ? 0x8000 : 0;
            for (int i = 0; i < m * ldq; i += 4) q[i] = i % 8 ? -0.0f : 0.0f;
          }
          /* the positions past those the rows see (a cache's unwritten or stale ones: the kernel
           * reads whole blocks of 16 keys) hold NaN and infinities, which must not reach an output */
          const int seen = p0 + (dp ? m : 1);
          for (int j = seen; j < kcap; j++)
            for (int i = 0; i < hd; i++) /* NaN, +inf, -inf */
              KT[ts__kidx(hd, i, j)] = (uint16_t)((i + j) % 3 ? 0x7E00 : i % 2 ? 0x7C00 : 0xFC00);
          for (int j = seen; j < ldk; j++)
            for (int i = 0; i < hd; i++) V[(size_t)j * hd + i] = 0x7E00;
          tst_poison(o0, (size_t)m * ldo);
          tst_poison(o1, (size_t)m * ldo);
          /* sliding windows (gemma3's local layers) that cut keys below, inside and past the first
           * 64-key block of a row (win 40 at p0 15 / 63 / 190, win 7 at p0 100) */
          const int win = pi % 3 == 2 ? 40 : pi == 7 ? 7 : 0;
          ts__att_item it = {m, hd, p0, dp, one, 0.125f, q, ldq, KT, V, S, lds, o0, ldo, win};
          ops->ref->att(&it); /* the scalar form of the level's order (llama.cpp's AVX-512 or AVX2 build) */
          it.out = o1;
          ops->att(&it);
          int bad = 0;
          for (int rr = 0; rr < m; rr++)
            for (int i = 0; i < hd; i++) bad += memcmp(&o0[rr * ldo + i], &o1[rr * ldo + i], sizeof(float)) != 0;
          CHECK(bad == 0 && p0 + m <= ldk, "attention %s hd=%d%s p0=%d m=%d mode=%d win=%d: %d outputs differ from the reference",
                ts__level_name(ts__llm_ops_dispatch.variants[vi].level), hd, hd % 32 ? " (handed to the reference)" : "",
                p0, m, mode, win, bad);
          CHECK(tst_guard_ok(o1, (size_t)m * ldo), "attention wrote past its output");
          free(KT), free(V), free(q), free(S);
          ts_free(o0), ts_free(o1);
        }
}

static void check_ops_of(const ts__llm_ops *op, const char *lv) {
  ts_rng r;
  ts_rng_seed(&r, 23);
  for (int n_rot = 2; n_rot <= 128; n_rot += n_rot < 16 ? 2 : 14) {
    float v0[130], v1[130], cs[130];
    for (int i = 0; i < 130; i++) v0[i] = v1[i] = ts_rng_normal(&r) * 3.0f, cs[i] = ts_rng_normal(&r);
    ts__rope_ref(v0, cs, n_rot, 0);
    op->rope(v1, cs, n_rot, 0);
    CHECK(!memcmp(v0, v1, sizeof v0), "rope %s n_rot=%d differs from the reference", lv, n_rot);
  }
  for (int n = 1; n <= 70; n += 3) {
    float g0[70], g1[70], u[70];
    for (int i = 0; i < n; i++) g0[i] = g1[i] = ts_rng_normal(&r) * (i % 9 == 0 ? 60.0f : 4.0f), u[i] = ts_rng_normal(&r);
    op->ref->swiglu(n, g0, u);
    op->swiglu(n, g1, u);
    CHECK(!memcmp(g0, g1, (size_t)n * sizeof(float)), "swiglu %s n=%d differs from the reference", lv, n);
  }
  for (int n = 1; n <= 600; n += n < 40 ? 1 : 97) {
    float x[600], w[600], y0[600], y1[600];
    for (int i = 0; i < n; i++) x[i] = ts_rng_normal(&r) * (i == 3 ? 300.0f : 1.0f), w[i] = ts_rng_normal(&r);
    ts__rmsnorm_ref(n, x, w, 1e-5f, y0);
    op->rmsnorm(n, x, w, 1e-5f, y1);
    CHECK(!memcmp(y0, y1, (size_t)n * sizeof(float)), "rmsnorm %s n=%d differs from the reference", lv, n);
  }
  { /* fp16 stores of the KV cache: normal, tie-rounding, subnormal, overflow, inf, NaN, signed-zero inputs */
    enum { N = 1000 };
    float x[N];
    uint16_t h0[N], h1[N];
    const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x33000000u, 0x33000001u, 0x33800000u,
                             0x38800000u, 0x387fe000u, 0x387ff000u, 0x38801000u, 0x38803000u, 0x477fe000u,
                             0x477ff000u, 0x477fefffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc12345u,
                             0x7f800001u, 0x3f801000u, 0x3f803000u, 0xc7800000u};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < N; i++) {
      uint32_t u = i < ne ? edge[i] : (uint32_t)ts_rng_next(&r);
      if (i >= ne && i % 3 == 0) u = (u & 0x81FFFFFFu) | 0x38000000u; /* around fp16's range */
      memcpy(&x[i], &u, 4);
    }
    for (int n = 1; n <= N; n += n < 40 ? 1 : 211) {
      ts__f16_ref(n, x, h0);
      memset(h1, 0xAB, sizeof h1);
      op->f16(n, x, h1);
      int bad = 0;
      for (int i = 0; i < n; i++) bad += h0[i] != h1[i];
      CHECK(bad == 0 && (n == N || h1[n] == 0xABAB), "f16 %s n=%d: %d values differ from ts_f32_to_f16 (or it wrote past n)",
            lv, n, bad);
    }
  }
}

/* RoPE, SwiGLU, RMSNorm and fp16 conversion of every SIMD level this CPU runs vs their references,
 * bit for bit; the vector exp vs libm, also at its edges (underflow to 0 below -103.97, inf above
 * 88.38, NaN through). */
static void check_ops(void) {
  TST_EACH_VARIANT(&ts__llm_ops_dispatch, vi, ts__llm_ops, op)
  check_ops_of(op, ts__level_name(ts__llm_ops_dispatch.variants[vi].level));
  CHECK(ts__vexpf(-110.0f) == 0.0f && isinf(ts__vexpf(100.0f)) && isnan(ts__vexpf(NAN)), "vexpf edge values");
  double worst = 0;
  for (float x = -80.0f; x < 80.0f; x += 0.37f) worst = fmax(worst, fabs(ts__vexpf(x) / exp((double)x) - 1.0));
  CHECK(worst < 4e-7, "vexpf relative error %.3g (ggml's routine: < 1.5 ulp)", worst);
  /* the AVX2 build's exp: the same bound, and its two-factor scaling for |n| > 126 down to the
   * subnormals (to 0 below -103.97; inf above 88.38) */
  CHECK(ts__vexpf8(-110.0f) == 0.0f && isinf(ts__vexpf8(100.0f)) && isnan(ts__vexpf8(NAN)) && ts__vexpf8(-INFINITY) == 0.0f &&
            ts__vexpf8(0.0f) == 1.0f,
        "vexpf8 edge values");
  worst = 0;
  for (float x = -100.0f; x < 88.0f; x += 0.37f) {
    const double want = exp((double)x);
    /* below fp32's normal range the result has fewer bits: measure against its spacing there */
    const double err = want < 0x1p-126 ? fabs(ts__vexpf8(x) - want) / 0x1p-149 * 0x1p-24 : fabs(ts__vexpf8(x) / want - 1.0);
    worst = fmax(worst, err);
  }
  CHECK(worst < 4e-7, "vexpf8 error %.3g (ggml's routine: < 1.5 ulp; in subnormal ulps x 2^-24 below 2^-126)", worst);
}

/* Batched GEMM of every level this CPU runs (its packed kernel when it has one, and its dot loop on
 * the file rows, which the runtime still runs on rows off a packed group; a level it lacks is said
 * to be skipped) vs the loop over the reference dot, edge shapes around the tiles (AVX-512: 4 rows
 * x 1..4 tokens, two groups side by side; AVX2: 8 rows x 1 token, 2 rows x 1..4 tokens: T = 4, 8
 * whole token tiles, 2, 3, 5, 7, 9 a remainder; odd rows, a last partial group), the 4-block steps
 * (n = 32 .. 1536: 1, 2, 3 blocks alone, 4 + 1, 4 + 3, 16 + 1, 16 + 2, 48) and prefill's chunks of
 * L1d (17 rows of 1536 columns are two chunks). Every
 * kernel follows llama.cpp's fp32 order (llm/cpu_order.h), so the results must be equal bit for
 * bit, not within a tolerance. */
static void check_gemm(void) {
  const uint32_t types[] = {TS_QT_Q8_0, TS_QT_Q4_0, TS_QT_Q4_1};
  const int64_t ns[] = {32, 64, 96, 160, 224, 544, 576, 1536};
  const int64_t rowsv[] = {1, 3, 4, 5, 8, 12, 13, 17};
  const int Ts[] = {1, 2, 3, 4, 5, 7, 8, 9};
  const ts__quant_table *ref = ts__quant_dispatch.variants[0].table;
  ts_rng r;
  ts_rng_seed(&r, 3);
  for (int ti = 0; ti < 3; ti++)
    for (int ni = 0; ni < 8; ni++)
      for (int ri = 0; ri < 8; ri++)
        for (int tk = 0; tk < 8; tk++) {
          const uint32_t type = types[ti];
          const int64_t n = ns[ni], rows = rowsv[ri], nb = n / 32;
          const int T = Ts[tk];
          size_t rb;
          ts_qtype_row_bytes(type, n, &rb);
          float *w = malloc((size_t)(rows * n) * sizeof *w), *x = malloc((size_t)(T * n) * sizeof *x);
          uint8_t *W = malloc(rb * (size_t)rows), *P = malloc(ts__pack_bytes(type, rows, n));
          int8_t *q = malloc((size_t)(T * n));
          float *d = malloc((size_t)(T * nb) * sizeof *d), *sx = malloc((size_t)(T * nb) * sizeof *sx);
          int32_t *sm = malloc((size_t)(T * nb) * sizeof *sm), *gs = malloc((size_t)(T * nb * 8) * sizeof *gs);
          for (int64_t i = 0; i < rows * n; i++) w[i] = ts_rng_normal(&r) + (i % 7 == 0 ? 0.5f : 0);
          for (int64_t i = 0; i < T * n; i++) x[i] = ts_rng_normal(&r) * (i % 5 == 0 ? 3.0f : 1.0f);
          for (int64_t i = 0; i < rows; i++) ts_quant_quantize_row(type, w + i * n, W + (size_t)i * rb, n);
          for (int t = 0; t < T; t++) ref->act_quantize(n, x + t * n, q + t * n, d + t * nb, sm + t * nb, sx + t * nb);
          ts__pack_rows(type, W, P, rows, n);
          if (T == 1) { /* the packing is a pure regrouping: every file row comes back */
            uint8_t *row = malloc(rb);
            int lost = 0;
            for (int64_t i = 0; i < rows; i++) {
              ts__unpack_row(type, P, i, row, n);
              lost += memcmp(row, W + (size_t)i * rb, rb) != 0;
            }
            CHECK(lost == 0, "pack %s n=%lld rows=%lld: %d rows differ after unpacking", ts_qtype_name(type), (long long)n,
                  (long long)rows, lost);
            free(row);
          }
          ts__qbatch qb = {n, T, q, d, sm, sx, gs, NULL, NULL, NULL, NULL, 0, 0};
          float *y0 = tst_alloc_guarded((size_t)(T * rows)), *y1 = tst_alloc_guarded((size_t)(T * rows));
          tst_poison(y0, (size_t)(T * rows));
          ts__quant_gemm_with(ref, type, W, rb, rows, n, NULL, 0, &qb, T, y0, rows);
          /* every level this CPU runs (AVX2's and AVX-512 VNNI's packed kernels and dot loops, and with GFNI) */
          TST_EACH_VARIANT(&ts__quant_dispatch, vi, ts__quant_table, tb) {
            const ts__pgemm_fn pg = ts__quant_pgemm_fn(tb, type);
            const char *lv = ts__level_name(ts__quant_dispatch.variants[vi].level);
            for (int packed = pg ? 1 : 0; packed >= 0; packed--) {
              tst_poison(y1, (size_t)(T * rows));
              if (packed) {
                tb->prep_packed(n, T, q, gs);
                pg(P, rb, rows, &qb, y1, rows);
              } else {
                ts__quant_gemm_with(tb, type, W, rb, rows, n, NULL, 0, &qb, T, y1, rows);
              }
              int bad = 0;
              double worst = 0;
              for (int64_t i = 0; i < T * rows; i++)
                if (memcmp(&y0[i], &y1[i], sizeof(float))) bad++, worst = fmax(worst, fabs((double)y0[i] - y1[i]));
              CHECK(bad == 0, "gemm %s n=%lld rows=%lld T=%d (%s%s): %d of %lld outputs differ from the reference (max %.3g)",
                    ts_qtype_name(type), (long long)n, (long long)rows, T, lv, packed ? ", packed" : "", bad,
                    (long long)(T * rows), worst);
              CHECK(tst_guard_ok(y1, (size_t)(T * rows)), "gemm wrote past y");
            }
            if (pg && T == 1) { /* decode with its own weight prefetches (past the end too): the same bits */
              ts__pfq pq;
              ts__pfq_init(&pq, 64 << (2 * (ri % 4) + vi % 2)); /* 64 B .. 8 KB ahead */
              ts__qbatch qp = qb;
              qp.pf = &pq;
              tst_poison(y1, (size_t)rows);
              pg(P, rb, rows, &qp, y1, rows);
              CHECK(!memcmp(y0, y1, (size_t)rows * sizeof *y0), "gemm %s n=%lld rows=%lld (%s, packed) with weight prefetches %d B ahead differs",
                    ts_qtype_name(type), (long long)n, (long long)rows, lv, pq.wpf);
              CHECK(tst_guard_ok(y1, (size_t)rows), "gemm with prefetches wrote past y");
            }
          }
          free(w), free(x), free(W), free(P), free(q), free(d), free(sx), free(sm), free(gs);
          ts_free(y0), ts_free(y1);
        }
}

static void check_sample(void) {
  float lg[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, -5.0f};
  CHECK(ts_llm_sample(lg, 6, 0, 0, NULL) == 1, "greedy picks the lowest id of a tie");
  ts_rng r;
  ts_rng_seed(&r, 5);
  int counts[6] = {0};
  for (int i = 0; i < 3000; i++) {
    int32_t t = ts_llm_sample(lg, 6, 1.0f, 3, &r);
    if (t >= 0 && t < 6) counts[t]++;
  }
  CHECK(counts[0] == 0 && counts[2] == 0 && counts[5] == 0, "top-3 sampled outside the top 3: %d %d %d", counts[0], counts[2], counts[5]);
  /* p(1) = p(3) = e^2 / (2 e^2 + e^1.9) = 0.356 */
  CHECK(counts[1] > 900 && counts[3] > 900 && counts[4] > 700, "top-3 frequencies %d %d %d", counts[1], counts[3], counts[4]);
  ts_rng a, b;
  ts_rng_seed(&a, 9);
  ts_rng_seed(&b, 9);
  bool same = true;
  for (int i = 0; i < 50; i++) same &= ts_llm_sample(lg, 6, 0.7f, 0, &a) == ts_llm_sample(lg, 6, 0.7f, 0, &b);
  CHECK(same, "sampling with the same seed differs");
  /* greedy against the plain loop (the first strict maximum; NaN never wins, NaN at 0 keeps 0), on
   * lengths around the vectorized lanes and a vocabulary's, with ties, +-0, -inf and NaN */
  ts_rng_seed(&r, 11);
  static float big[49157];
  int bad = 0, runs = 0;
  for (int t = 0; t < 4000; t++) {
    const int n = t < 3990 ? 1 + (int)ts_rng_below(&r, 200) : 49152 + (t % 6);
    const int kinds = t % 3 == 0 ? 4 : 10; /* some arrays all ties, zeros, -inf and NaN */
    for (int i = 0; i < n; i++) {
      const int k = (int)ts_rng_below(&r, (uint64_t)kinds);
      big[i] = k == 0 ? NAN : k == 1 ? -INFINITY : k == 2 ? 0.0f : k == 3 ? -0.0f : (float)ts_rng_below(&r, 7) - 3.0f;
    }
    if (t >= 3990) big[(t * 7919) % n] = 100.0f; /* a single winner somewhere in a long row */
    int32_t ref = 0;
    for (int32_t i = 1; i < n; i++)
      if (big[i] > big[ref]) ref = i;
    bad += ts_llm_sample(big, n, 0, 0, NULL) != ref;
    runs++;
  }
  CHECK(bad == 0, "greedy sampling differs from the first strict maximum in %d of %d rows", bad, runs);
}

/* ts_llm_perplexity against the NLL computed here from full logits, both scorings. */
static void check_perplexity(void) {
  tiny_cfg c = tiny_default(TS_QT_Q4_0);
  ts_llm_model *m = load_tiny(&c, "llm_ppl.gguf");
  if (!m) return;
  const int nv = tiny_n_vocab(), win = 8, nwin = 3;
  int32_t toks[26];
  for (int i = 0; i < 26; i++) toks[i] = (int32_t)((i * 37 + 11) % nv);
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, NULL, win, 8));
  float *lg = malloc((size_t)win * nv * sizeof *lg);
  for (int full = 0; full <= 1; full++) {
    double sum = 0;
    int cnt = 0;
    for (int w = 0; w < nwin; w++) {
      CHECK_OK(ts_llm_eval(s, toks + w * win, win, 0, TS_LLM_LOGITS_ALL, lg));
      for (int j = full ? 0 : win / 2; j < win - 1; j++) {
        const float *z = lg + (size_t)j * nv;
        double mx = z[0], e = 0;
        for (int i = 1; i < nv; i++) mx = z[i] > mx ? z[i] : mx;
        for (int i = 0; i < nv; i++) e += exp(z[i] - mx);
        sum += log(e) + mx - z[toks[w * win + j + 1]];
        cnt++;
      }
    }
    ts_llm_ppl_result res;
    CHECK_OK(ts_llm_perplexity(s, toks, 26, win, full, 0, false, &res));
    CHECK(res.chunks == nwin && res.scored == cnt, "perplexity scored %lld in %lld windows, expected %d in %d",
          (long long)res.scored, (long long)res.chunks, cnt, nwin);
    CHECK(fabs(res.nll_mean - sum / cnt) < 1e-5 && fabs(res.ppl - exp(sum / cnt)) < 1e-4 * res.ppl,
          "perplexity %.6f vs %.6f (full=%d)", res.ppl, exp(sum / cnt), full);
    CHECK_OK(ts_llm_perplexity(s, toks, 26, win, full, 1, false, &res));
    CHECK(res.chunks == 1, "max_chunks 1 gave %lld windows", (long long)res.chunks);
  }
  ts_llm_ppl_result res;
  CHECK_ERR_CONTAINS(ts_llm_perplexity(s, toks, 5, win, false, 0, false, &res), "do not fill one 8-token window");
  CHECK_STATUS(ts_llm_perplexity(s, toks, 26, 16, false, 0, false, &res), TS_ERR_INVALID_ARG);
  free(lg);
  ts_llm_state_destroy(s);
  ts_llm_model_destroy(m);
}

/* The kernels' streaming rate over a model's weights: a positive figure, bad arguments refused. */
static void test_stream_gbs(void) {
  tiny_cfg c = tiny_default(TS_QT_Q4_1);
  ts_llm_model *m = load_tiny(&c, "llm_stream.gguf");
  if (!m) return;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  double g = 0;
  CHECK_OK(ts_llm_model_stream_gbs(m, ctx, 3, &g));
  CHECK(g > 0 && g < 1e5, "stream GB/s %g", g);
  CHECK_STATUS(ts_llm_model_stream_gbs(m, ctx, 0, &g), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_llm_model_stream_gbs(NULL, ctx, 3, &g), TS_ERR_INVALID_ARG);
  ts_context_destroy(ctx);
  ts_llm_model_destroy(m);
}

/* Decode's weight prefetch distance: set, read back, measured on request, refused out of range;
 * decode's logits depend neither on it nor on the side prefetches (ts_llm_model's side). The
 * measurements go to a store of this test's own: one that an earlier run (or another process on
 * the same store) left for the same weights and team would be read instead of measured. */
static void test_weight_prefetch(void) {
  tiny_cfg c = tiny_default(TS_QT_Q4_1);
  ts_llm_model *m = load_tiny(&c, "llm_wpf.gguf");
  if (!m) return;
  ts_context *ctx;
  CHECK_OK(ts_context_create(&ctx, 2));
  const int32_t toks[5] = {1, 7, 3, 12, 5};
  const int nv = ts_llm_model_config(m)->n_vocab;
  float *lg[4];
  for (int k = 0; k < 4; k++) { /* distance 0 / 4096, side prefetches off / on */
    const int b = k & 1 ? 4096 : 0;
    CHECK_OK(ts_llm_model_set_weight_prefetch(m, b));
    m->side = k >> 1;
    ts_llm_wpf_report r;
    ts_llm_model_weight_prefetch(m, &r);
    CHECK(r.bytes == b && !r.measured, "weight prefetch set %d: report %d (measured %d)", b, r.bytes, r.measured);
    lg[k] = malloc((size_t)nv * sizeof(float));
    ts_llm_state *s = NULL;
    CHECK_OK(ts_llm_state_create(&s, m, ctx, 16, 4));
    CHECK_OK(ts_llm_eval(s, toks, 3, 0, TS_LLM_LOGITS_LAST, lg[k]));
    for (int p = 3; p < 5; p++) CHECK_OK(ts_llm_eval(s, toks + p, 1, p, TS_LLM_LOGITS_LAST, lg[k])); /* decode */
    ts_llm_state_destroy(s);
  }
  for (int k = 1; k < 4; k++)
    CHECK(!memcmp(lg[0], lg[k], (size_t)nv * sizeof(float)), "decode logits depend on the weight prefetch (%d B, side %s)",
          k & 1 ? 4096 : 0, k >> 1 ? "on" : "off");
  m->side = 0;
  for (int k = 0; k < 4; k++) free(lg[k]);
  /* auto: a tiny model keeps none without timing; forced past the size floor it is timed */
  const char *was = getenv("TESSERA_CACHE");
  char *saved = was ? strdup(was) : NULL, cache[64];
  snprintf(cache, sizeof cache, "/tmp/ts_test_llm_wpf_XXXXXX");
  CHECK(mkdtemp(cache) != NULL, "mkdtemp");
  setenv("TESSERA_CACHE", cache, 1);
  CHECK_OK(ts_llm_model_set_weight_prefetch(m, -1));
  ts_llm_state *s = NULL;
  CHECK_OK(ts_llm_state_create(&s, m, ctx, 16, 4));
  ts_llm_wpf_report r;
  ts_llm_model_weight_prefetch(m, &r);
  CHECK(r.bytes == 0 && !r.measured, "tiny model: weight prefetch %d (measured %d), expected none unmeasured", r.bytes, r.measured);
  ts_llm_state_destroy(s);
  ts__llm_tune_wpf(m, 2, 0);
  ts_llm_model_weight_prefetch(m, &r);
  if (r.measured) { /* packed kernels on this CPU */
    int found = 0;
    for (int i = 0; i < TS_LLM_WPF_CANDIDATES; i++) {
      found += r.candidates[i] == r.bytes;
      CHECK(r.gbs[i] > 0, "weight prefetch candidate %d B: %g GB/s", r.candidates[i], r.gbs[i]);
    }
    CHECK(found == 1 && r.team == 2, "weight prefetch measured: %d B is not one candidate (team %d)", r.bytes, r.team);
    CHECK(!r.cached, "weight prefetch asked for again (-1): measured anew, not read from the store");
    /* the same weights in another model object (another process) read the stored measurement */
    ts_llm_model *m2 = load_tiny(&c, "llm_wpf.gguf");
    ts_llm_state *s2 = NULL;
    if (m2 && ts_llm_state_create(&s2, m2, ctx, 16, 4) == TS_OK) { /* cuts the packed layout for 2 */
      ts_llm_state_destroy(s2);
      ts__llm_tune_wpf(m2, 2, 0);
      ts_llm_wpf_report r2;
      ts_llm_model_weight_prefetch(m2, &r2);
      CHECK(r2.measured && r2.cached && r2.bytes == r.bytes && r2.team == 2 && !memcmp(r2.gbs, r.gbs, sizeof r.gbs),
            "weight prefetch from the store: measured %d cached %d, %d B (want %d)", r2.measured, r2.cached, r2.bytes,
            r.bytes);
      ts__llm_tune_wpf(m2, 1, 0); /* another team: another key, measured */
      ts_llm_model_weight_prefetch(m2, &r2);
      CHECK(!r2.measured || (!r2.cached && r2.team == 1), "weight prefetch for another team was read from the store");
    }
    ts_llm_model_destroy(m2);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache);
  if (saved) setenv("TESSERA_CACHE", saved, 1);
  else unsetenv("TESSERA_CACHE");
  free(saved);
  CHECK_STATUS(ts_llm_model_set_weight_prefetch(m, -2), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_llm_model_set_weight_prefetch(m, (1 << 20) + 1), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_llm_model_set_weight_prefetch(NULL, 0), TS_ERR_INVALID_ARG);
  ts_context_destroy(ctx);
  ts_llm_model_destroy(m);
}

/* Work sharing (ts__share): every unit of a phase is taken exactly once, whatever the thread count
 * and however the threads race; the owner's runs come from the front of its home units (a quarter
 * of what is left, at least one), a thief's single units from the back. */
static void check_share(void) {
  enum { MAXT = 3, MAXU = 1000 };
  ts__share sh[MAXT];
  /* one thread alone: its runs walk the units front to back, the first a quarter of them */
  ts__share_begin(sh, 0, 1, 100);
  int64_t cnt = 0, next = 0, runs = 0, u;
  while ((u = ts__share_next(sh, 0, 1, &cnt)) >= 0) {
    CHECK(u == next && cnt >= 1, "share: run %" PRId64 " at unit %" PRId64 " (expected %" PRId64 "), %" PRId64 " units",
          runs, u, next, cnt);
    if (runs == 0) CHECK(cnt == 25, "share: first run of 100 units is %" PRId64 " (a quarter)", cnt);
    next = u + cnt;
    runs++;
  }
  CHECK(next == 100 && runs < 30, "share: 100 units in %" PRId64 " runs, ended at %" PRId64, runs, next);
  /* a thief takes the other slot's last unit */
  ts__share_begin(sh, 0, 2, 10);
  ts__share_begin(sh, 1, 2, 10);
  while (ts__share_next(sh, 1, 1, &cnt) >= 0) {
  } /* slot 1 drained by its owner (nt 1: no stealing) */
  u = ts__share_next(sh, 1, 2, &cnt);
  CHECK(u == 4 && cnt == 1, "share: the thief took unit %" PRId64 " x %" PRId64 " (expected 4 x 1)", u, cnt);
  /* racing threads: each unit once */
  for (int nt = 1; nt <= MAXT; nt++)
    for (int units = 0; units <= MAXU; units += units < 20 ? 1 : 327) {
      static _Atomic int taken[MAXU];
      for (int i = 0; i < units; i++) atomic_store(&taken[i], 0);
      int bad = 0;
#pragma omp parallel num_threads(nt) reduction(+ : bad)
      {
        const int tid = omp_get_thread_num(), n = omp_get_num_threads();
        ts__share_begin(sh, tid, n, units);
#pragma omp barrier
        int64_t c = 0, v;
        while ((v = ts__share_next(sh, tid, n, &c)) >= 0)
          for (int64_t i = v; i < v + c; i++) bad += i >= units || atomic_fetch_add(&taken[i], 1) != 0;
      }
      int missed = 0;
      for (int i = 0; i < units; i++) missed += atomic_load(&taken[i]) != 1;
      CHECK(!bad && !missed, "share: %d threads, %d units: %d taken twice or out of range, %d not once", nt, units,
            bad, missed);
    }
}

/* The worker pool: every run reaches exactly threads 0..nrun-1 once, the caller returns only after
 * all of them finished (their writes visible), runs with fewer threads than the pool pass the rest
 * by, and runs after the workers went to sleep (past TS__POOL_SPIN) wake them; destroy joins
 * workers whether spinning or asleep. */
typedef struct pool_job {
  int runs[8];
  int seen[8];
  int round;
} pool_job;
static void pool_fn(void *arg, int tid, int nrun) {
  pool_job *j = arg;
  j->runs[tid]++;
  j->seen[tid] = j->round * 16 + nrun;
}
/* past the workers' spin: they are asleep on the futex by the end */
static void idle_past_spin(void) {
  const double t0 = ts_now();
  while (ts_now() - t0 < 5 * TS__POOL_SPIN) {
  }
}
static void check_pool(void) {
  int started = -1;
  CHECK(ts__pool_create(0, &started) == NULL && started == 0, "pool: no workers asked, none started");
  for (int workers = 1; workers <= 3; workers++) {
    ts__pool *p = ts__pool_create(workers, &started);
    CHECK(p && started == workers, "pool: %d of %d workers started", started, workers);
    if (!p) continue;
    pool_job j;
    memset(&j, 0, sizeof j);
    int want[8] = {0}, bad = 0;
    for (int r = 0; r < 300; r++) {
      const int nrun = 1 + r % (workers + 1);
      j.round = r;
      if (r % 100 == 99) idle_past_spin();
      ts__pool_run(p, pool_fn, &j, nrun);
      for (int t = 0; t < nrun; t++) {
        want[t]++;
        bad += j.seen[t] != r * 16 + nrun;
      }
    }
    int miss = 0;
    for (int t = 0; t <= workers; t++) miss += j.runs[t] != want[t];
    CHECK(!bad && !miss, "pool: %d workers: %d stale results, %d threads ran a wrong number of times", workers, bad, miss);
    ts__pool_destroy(p);
  }
  /* destroyed at once after create, and after the workers slept */
  ts__pool *p = ts__pool_create(2, &started);
  ts__pool_destroy(p);
  p = ts__pool_create(2, &started);
  idle_past_spin();
  ts__pool_destroy(p);
}

int main(void) {
  check_pool();
  check_share();
  test_stream_gbs();
  test_weight_prefetch();
  check_forward(TS_QT_F32, "llm_f32.gguf", true, false);
  check_forward(TS_QT_Q4_1, "llm_q41.gguf", true, false);
  check_forward(TS_QT_Q8_0, "llm_q80.gguf", false, false);
  check_forward(TS_QT_Q4_0, "llm_q40.gguf", true, false);
  check_forward(TS_QT_Q4_1, "llm_q41w.gguf", true, true);
  check_forward(TS_QT_F32, "llm_f32w.gguf", false, true);
  check_forward_arch(TS_QT_F32, "llm_g3_f32.gguf", true, false, true);
  check_forward_arch(TS_QT_Q5_0, "llm_g3_q50.gguf", true, false, true);
  check_forward_arch(TS_QT_Q8_0, "llm_g3_q80.gguf", false, false, true);
  check_team_policy();
  check_eval_errors();
  check_load_errors();
  check_gemm();
  check_attention();
  check_ops();
  check_sample();
  check_perplexity();
  return tst_finish();
}
