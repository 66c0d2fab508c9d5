/* The real Gemma 3 270M Q4_K_M model when it is present (scripts/get-gemma3.sh installs it; without
 * it the program exits 77, which CTest reports as skipped; TESSERA_GEMMA3 set makes it required):
 * its configuration, and logits equal bit for bit to llama.cpp's (tests/test_gemma3.h, recorded by
 * bench/peers/gemma3_record.py from llama-cpp-python 0.3.36's AVX2 build) for three prompts:
 * every position of a 6-token prefill and 3 decode steps, the last position of a 23-token prefill
 * and 2 decode steps, and the last position of a 520-token prefill (past the local layers' 512-key
 * window) and 2 decode steps; each row's whole logit vector through a hash, with probes named on
 * failure; with 1 and 2 threads (the long prompt with 2), giving the same bits; and the
 * perplexity of a short text (48-token windows) equal to llama.cpp's.
 *
 * Orders: the bits are llama.cpp's AVX2 build's, which tessera's AVX2 level follows (cpu_order.h).
 * Its scalar and AVX-512 levels follow llama.cpp's AVX-512 build, not recorded here (no AVX-512
 * llama.cpp on the machine the bits were recorded on): there they are checked against the AVX2
 * bits within a stated tolerance instead, the attention's and softmax's sums being the only
 * operations whose orders differ between the builds for this model (every matmul, norm, RoPE and
 * the GELU table are the same in both; the sums' different roundings then flip an int8
 * activation rounding now and then, which later layers carry on). Measured at TESSERA_ISA=scalar
 * on the AVX2 machine (AMD EPYC, no AVX-512), 2026-12-07: argmax the same in every row, |probe -
 * AVX2 bits| up to 0.259 (logits up to ~30), perplexity 6.1e-3 relative; the tolerance is twice
 * that, 0.5 absolute and 2e-2 relative, and the argmax. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "llm/llm_internal.h" /* ts__llm_ops_active: the order followed */
#include "tessera/llm.h"
#include "test_gemma3.h"
#include "tst.h"

#define TOL_LOGIT 0.5
#define TOL_PPL 2e-2

static bool required(void) {
  const char *e = getenv("TESSERA_GEMMA3");
  return e && *e;
}

/* $TESSERA_GEMMA3, else bench/peers/.venv-llm/gemma3.gguf (scripts/get-gemma3.sh links it); NULL when absent */
static const char *model_path(void) {
  const char *e = getenv("TESSERA_GEMMA3");
  if (e && *e) return access(e, R_OK) == 0 ? e : NULL;
  static char p[2048];
  const char *f = __FILE__, *end = strstr(f, "/tests/test_gemma3.c");
  snprintf(p, sizeof p, "%.*s/bench/peers/.venv-llm/gemma3.gguf", end ? (int)(end - f) : 1, end ? f : ".");
  return access(p, R_OK) == 0 ? p : NULL;
}

/* FNV-1a 64 over the fp32 bit patterns as 32-bit words (gemma3_record.py's fnv64) */
static uint64_t g3_hash(const float *z, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; i++) {
    uint32_t w;
    memcpy(&w, &z[i], 4);
    h = (h ^ w) * 0x100000001b3ull;
  }
  return h;
}

static int32_t argmax(const float *z, int n) {
  int32_t b = 0;
  for (int i = 1; i < n; i++)
    if (z[i] > z[b]) b = i;
  return b;
}

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* one logit row against llama.cpp's record: bits (AVX2 order) or the tolerance (the other order) */
static void check_row(const float *z, int nv, const g3_row *want, bool bits, const char *what, int threads) {
  const int32_t am = argmax(z, nv);
  CHECK(am == want->argmax, "%s (%d threads): argmax %d, llama.cpp %d", what, threads, am, want->argmax);
  const uint64_t h = g3_hash(z, nv);
  double worst = 0;
  for (int k = 0; k < G3_NPROBE; k++) {
    const int32_t id = k < G3_NPROBE - 1 ? g3_probe_ids[k] : want->argmax;
    const float w = from_bits(want->probes[k]);
    worst = fmax(worst, fabs((double)z[id] - w));
    if (bits) {
      uint32_t b;
      memcpy(&b, &z[id], 4);
      CHECK(b == want->probes[k], "%s (%d threads): logit[%d] = %.9g (0x%08x), llama.cpp 0x%08x (%.9g)", what, threads, id,
            (double)z[id], b, want->probes[k], (double)w);
    }
  }
  if (bits)
    CHECK(h == want->hash, "%s (%d threads): the logit row's hash %016llx, llama.cpp's %016llx (probes off by up to %.3g)", what,
          threads, (unsigned long long)h, (unsigned long long)want->hash, worst);
  else
    CHECK(worst <= TOL_LOGIT, "%s (%d threads): probes off llama.cpp's AVX2 bits by %.3g (tolerance %g)", what, threads, worst,
          TOL_LOGIT);
}

int main(void) {
  const char *path = model_path();
  if (!path && required()) {
    CHECK(0, "TESSERA_GEMMA3=%s is not a readable file", getenv("TESSERA_GEMMA3"));
    return tst_finish();
  }
  if (!path) tst_skip("Gemma 3 270M GGUF not found (set TESSERA_GEMMA3 or run scripts/get-gemma3.sh)");
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (!m) return tst_finish();
  const ts_llm_config *c = ts_llm_model_config(m);
  CHECK(!strcmp(c->arch, "gemma3") && c->n_layer == 18 && c->d_model == 640 && c->n_ff == 2048 && c->n_head == 4 &&
            c->n_head_kv == 1 && c->head_dim == 256 && c->n_vocab == 262144 && c->tied_output && c->n_swa == 512 &&
            c->n_swa_layers == 15 && c->rope_base == 1e6f && c->rope_base_swa == 1e4f && c->rope == TS_LLM_ROPE_NEOX,
        "Gemma 3 270M configuration");
  const bool bits = ts__llm_ops_active()->lanes == 8;
  printf("kernels at %s: %s\n", ts_isa_name(ts_quant_isa()),
         bits ? "llama.cpp's AVX2 orders, checked bit for bit" : "llama.cpp's AVX-512 orders, checked within tolerance");
  const ts_llm_vocab *v = ts_llm_model_vocab(m);
  const int nv = c->n_vocab;
  float *z = malloc((size_t)8 * nv * sizeof *z);
  uint64_t first[3][16]; /* 1-thread rows' hashes */
  for (int threads = 1; threads <= 2; threads++) {
    ts_context *ctx;
    CHECK_OK(ts_context_create(&ctx, threads));
    ts_llm_state *s = NULL;
    CHECK_OK(ts_llm_state_create(&s, m, ctx, 1024, 512));
    for (int ci = 0; ci < 3 && s; ci++) {
      const g3_case *k = &g3_cases[ci];
      if (ci == 2 && threads == 1) continue; /* the long prompt once (2 threads) */
      if (ci == 2 && ts_quant_isa() == TS_ISA_SCALAR) {
        tst_skip_part("gemma3: the 520-token prompt at the scalar level (minutes of scalar matmuls)");
        continue;
      }
      if (k->prompt) { /* tokenizer parity */
        int32_t ids[64];
        size_t n = 0;
        CHECK_OK(ts_llm_tokenize(v, k->prompt, strlen(k->prompt), true, false, ids, 64, &n));
        CHECK(n == (size_t)k->n && !memcmp(ids, k->ids, (size_t)k->n * sizeof *ids), "case %d: token ids differ from llama.cpp's", ci);
      }
      int row = 0;
      char what[96];
      CHECK_OK(ts_llm_eval(s, k->ids, k->n, 0, k->all ? TS_LLM_LOGITS_ALL : TS_LLM_LOGITS_LAST, z));
      for (int r = 0; r < (k->all ? k->n : 1); r++, row++) {
        snprintf(what, sizeof what, "case %d prefill position %d", ci, k->all ? r : k->n - 1);
        check_row(z + (size_t)r * nv, nv, &k->rows[row], bits, what, threads);
        if (threads == 1) first[ci][row] = g3_hash(z + (size_t)r * nv, nv);
        else if (ci < 2) CHECK(first[ci][row] == g3_hash(z + (size_t)r * nv, nv), "%s: 1 and 2 threads differ", what);
      }
      for (int st = 0; st < k->nsteps; st++, row++) {
        CHECK_OK(ts_llm_eval(s, &k->steps[st], 1, k->n + st, TS_LLM_LOGITS_LAST, z));
        snprintf(what, sizeof what, "case %d decode step %d (position %d)", ci, st, k->n + st);
        check_row(z, nv, &k->rows[row], bits, what, threads);
        if (threads == 1) first[ci][row] = g3_hash(z, nv);
        else if (ci < 2) CHECK(first[ci][row] == g3_hash(z, nv), "%s: 1 and 2 threads differ", what);
      }
    }
    if (threads == 2 && s) { /* perplexity, llama.cpp's protocol */
      int32_t toks[256];
      size_t n = 0;
      CHECK_OK(ts_llm_tokenize(v, g3_ppl_text, sizeof g3_ppl_text - 1, true, false, toks, 256, &n));
      CHECK(n == G3_PPL_TOKENS, "perplexity text: %zu tokens, llama.cpp %d", n, G3_PPL_TOKENS);
      ts_llm_ppl_result res;
      CHECK_OK(ts_llm_perplexity(s, toks, n, G3_PPL_CTX, false, 0, false, &res));
      const double rel = fabs(res.ppl - g3_ppl) / g3_ppl;
      CHECK(res.scored == G3_PPL_SCORED && rel <= (bits ? 1e-12 : TOL_PPL),
            "perplexity %.12g over %lld predictions, llama.cpp %.12g over %d (relative %.3g)", res.ppl, (long long)res.scored, g3_ppl,
            G3_PPL_SCORED, rel);
      printf("perplexity %.9f (llama.cpp %.9f, relative difference %.3g)\n", res.ppl, g3_ppl, rel);
    }
    ts_llm_state_destroy(s);
    ts_context_destroy(ctx);
  }
  free(z);
  ts_llm_model_destroy(m);
  return tst_finish();
}
