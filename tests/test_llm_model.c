/* The real SmolLM2-135M-Instruct Q4_1 model when it is present (tests/test_smollm2.h; .ci/run
 * installs it; without it the program exits 77, which CTest reports as skipped): its configuration, and logits equal bit for bit to llama.cpp's for
 * a fixed prompt, in a 5-token prefill (llama.cpp's batch orders) and the next single-token decode
 * step (its single-token orders; llm/cpu_order.h), with 1 and 2 threads, in the orders of
 * llama.cpp's AVX-512 build (scalar and AVX-512 levels) and its AVX2 build (AVX2 level). The expected bits were
 * recorded from llama-cpp-python 0.3.36 (bench/peers/llm_llamacpp.py --check compares whole logit
 * matrices and greedy generations the same way). */
#include <string.h>

#include "llm/llm_internal.h" /* ts__llm_ops_active: the order followed */
#include "tessera/llm.h"
#include "test_smollm2.h"
#include "tst.h"

/* "The capital of France is" */
static const int32_t kIds[5] = {504, 3575, 282, 4649, 314};
static const int32_t kProbe[5] = {0, 1000, 30000, 49151, -1}; /* -1: the position's argmax */
/* [position][probe] as fp32 bit patterns; row 5 is the decode step fed token 7042. The prefill rows
 * are the same in llama.cpp's AVX-512 and AVX2 builds for this prompt; the decode step differs
 * (kDecode: [0] its AVX-512 build, [1] its AVX2 build, recorded 2026-12-07 on an AMD EPYC with AVX2
 * and no AVX-512, llama-cpp-python 0.3.36 built natively there), and tessera must give the one of
 * the order its active kernels follow (llm_internal.h, ts__llm_ops.lanes). */
static const uint32_t kBits[5][5] = {
    {0x4179e305, 0x419c3f78, 0x4134d09d, 0x40b9ebfc, 0x41d9421b},
    {0x410c7fe5, 0x414fb5c2, 0x3f25606c, 0x3fdefff0, 0x41b05d88},
    {0x3caccf00, 0x402b1b44, 0xc0b18655, 0xc09c2c05, 0x414eff7e},
    {0x41391189, 0x413b7274, 0x40933620, 0x40119ff6, 0x41c10d0b},
    {0x3fcf1ea8, 0x40312b5e, 0xc0816be8, 0xc10360a6, 0x418ac0b7},
};
static const uint32_t kDecode[2][5] = {
    {0x414b38d4, 0x414b35f6, 0x40a6722c, 0xbe8108c0, 0x41cc7568},
    {0x414a2483, 0x4149f79d, 0x40a63d0e, 0xbe872da0, 0x41cb8f70},
};
static const int32_t kArgmax[6] = {29, 282, 260, 314, 7042, 30};

static int32_t argmax(const float *z, int n) {
  int32_t b = 0;
  for (int i = 1; i < n; i++)
    if (z[i] > z[b]) b = i;
  return b;
}

static void check_row(const float *z, int nv, int row, int threads, int avx2_order) {
  const int32_t am = argmax(z, nv);
  CHECK(am == kArgmax[row], "position %d (%d threads): argmax %d, llama.cpp %d", row, threads, am, kArgmax[row]);
  const uint32_t *want = row < 5 ? kBits[row] : kDecode[avx2_order];
  for (int k = 0; k < 5; k++) {
    const int32_t id = kProbe[k] < 0 ? kArgmax[row] : kProbe[k];
    uint32_t bits;
    memcpy(&bits, &z[id], 4);
    CHECK(bits == want[k], "position %d (%d threads): logit[%d] = %.9g (0x%08x), llama.cpp (%s build) 0x%08x", row, threads,
          id, (double)z[id], bits, avx2_order ? "AVX2" : "AVX-512", want[k]);
  }
}

int main(void) {
  const char *path = tst_smollm2_path();
  if (!path && tst_smollm2_required()) {
    CHECK(0, "TESSERA_SMOLLM2=%s is not a readable file", getenv("TESSERA_SMOLLM2"));
    return tst_finish();
  }
  if (!path) tst_skip("SmolLM2 GGUF not found (set TESSERA_SMOLLM2 or run scripts/get-smollm2.sh; CI installs it)");
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  if (!m) return tst_finish();
  const ts_llm_config *c = ts_llm_model_config(m);
  CHECK(c->n_layer == 30 && c->d_model == 576 && c->n_ff == 1536 && c->n_head == 9 && c->n_head_kv == 3 &&
            c->head_dim == 64 && c->n_vocab == 49152 && c->tied_output,
        "SmolLM2 configuration");
  int32_t ids[16];
  size_t n = 0;
  CHECK_OK(ts_llm_tokenize(ts_llm_model_vocab(m), "The capital of France is", 24, true, false, ids, 16, &n));
  CHECK(n == 5 && !memcmp(ids, kIds, sizeof kIds), "prompt ids");
  const int nv = c->n_vocab;
  float *z = malloc((size_t)6 * nv * sizeof *z), *z1 = malloc((size_t)6 * nv * sizeof *z1);
  for (int threads = 1; threads <= 2; threads++) {
    ts_context *ctx;
    CHECK_OK(ts_context_create(&ctx, threads));
    ts_llm_state *s = NULL;
    CHECK_OK(ts_llm_state_create(&s, m, ctx, 64, 512));
    if (s) {
      float *out = threads == 1 ? z1 : z;
      CHECK_OK(ts_llm_eval(s, kIds, 5, 0, TS_LLM_LOGITS_ALL, out));
      const int32_t next = 7042;
      CHECK_OK(ts_llm_eval(s, &next, 1, 5, TS_LLM_LOGITS_LAST, out + (size_t)5 * nv));
      for (int row = 0; row < 6; row++) check_row(out + (size_t)row * nv, nv, row, threads, ts__llm_ops_active()->lanes == 8);
    }
    ts_llm_state_destroy(s);
    ts_context_destroy(ctx);
  }
  CHECK(!memcmp(z, z1, (size_t)6 * nv * sizeof *z), "1 and 2 threads give different logits");
  free(z);
  free(z1);
  ts_llm_model_destroy(m);
  return tst_finish();
}
