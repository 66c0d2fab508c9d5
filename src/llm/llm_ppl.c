/* Perplexity in llama.cpp's protocol (see ts_llm_perplexity in llm.h): non-overlapping windows of
 * n_ctx tokens, each from an empty cache, scoring token j+1 from the logits at j for
 * j = first..n_ctx-2, first = n_ctx/2 (second half) or 0 (full). NLL = logsumexp(z) - z[target],
 * accumulated in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"

ts_status ts_llm_perplexity(ts_llm_state *s, const int32_t *tokens, size_t n, int n_ctx, bool full, int max_chunks,
                            bool progress, ts_llm_ppl_result *out) {
  if (!s || !out || (n && !tokens)) return ts_error(TS_ERR_INVALID_ARG, "ts_llm_perplexity: NULL argument");
  memset(out, 0, sizeof *out);
  if (n_ctx < 2 || n_ctx > s->n_ctx)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_perplexity: window %d outside 2..%d (the state's context)", n_ctx, s->n_ctx);
  int64_t chunks = (int64_t)(n / (size_t)n_ctx);
  if (max_chunks > 0 && chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1)
    return ts_error(TS_ERR_INVALID_ARG, "ts_llm_perplexity: %zu tokens do not fill one %d-token window", n, n_ctx);
  const ts_llm_vocab *v = s->m->vocab;
  const int nv = s->m->cfg.n_vocab, first = full ? 0 : n_ctx / 2;
  float *logits = malloc((size_t)(n_ctx - first) * (size_t)nv * sizeof *logits);
  int32_t *win = malloc((size_t)n_ctx * sizeof *win);
  if (!logits || !win) {
    free(logits);
    free(win);
    return ts_error(TS_ERR_OOM, "ts_llm_perplexity: out of memory for %d x %d logits", n_ctx - first, nv);
  }
  ts_progress pr;
  if (progress) ts_progress_begin(&pr, "perplexity", chunks);
  double sum = 0, sum2 = 0, t0 = ts_now();
  int64_t scored = 0;
  ts_status st = TS_OK;
  for (int64_t c = 0; c < chunks && st == TS_OK; c++) {
    memcpy(win, tokens + (size_t)c * (size_t)n_ctx, (size_t)n_ctx * sizeof *win);
    if (ts_llm_vocab_add_bos(v)) win[0] = ts_llm_vocab_bos(v);
    st = ts_llm_eval_from(s, win, n_ctx, 0, first, logits);
    for (int j = first; j < n_ctx - 1 && st == TS_OK; j++) {
      const float *z = logits + (size_t)(j - first) * (size_t)nv;
      float mx = z[0];
      for (int i = 1; i < nv; i++) mx = z[i] > mx ? z[i] : mx;
      double e = 0;
      for (int i = 0; i < nv; i++) e += exp((double)z[i] - mx);
      double nll = log(e) + mx - z[win[j + 1]];
      sum += nll;
      sum2 += nll * nll;
      scored++;
    }
    if (progress) ts_progress_update(&pr, c + 1);
  }
  if (progress) ts_progress_end(&pr);
  free(logits);
  free(win);
  if (st != TS_OK) return st;
  out->seconds = ts_now() - t0;
  out->scored = scored;
  out->chunks = chunks;
  out->nll_mean = sum / (double)scored;
  double var = sum2 / (double)scored - out->nll_mean * out->nll_mean;
  out->nll_stderr = scored > 1 && var > 0 ? sqrt(var / (double)(scored - 1)) : 0;
  out->ppl = exp(out->nll_mean);
  out->tokens_per_s = (double)chunks * n_ctx / out->seconds;
  return TS_OK;
}
