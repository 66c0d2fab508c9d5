/* Next-token sampling: greedy argmax, or temperature softmax over the top k. */
#include <math.h>
#include <stdlib.h>

#include "tessera/llm.h"

typedef struct cand { float v; int32_t id; } cand;

/* min-heap on (v, -id): the root is the weakest of the kept candidates */
static bool weaker(cand a, cand b) { return a.v < b.v || (a.v == b.v && a.id > b.id); }

static void sift_down(cand *h, int n, int i) {
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && weaker(h[c + 1], h[c])) c++;
    if (!weaker(h[c], h[i])) return;
    cand t = h[c];
    h[c] = h[i];
    h[i] = t;
    i = c;
  }
}

/* Greedy: the first i with logits[i] > every earlier best, i.e. the scalar loop
 *   best = 0; for i in 1..n-1: if (logits[i] > logits[best]) best = i
 * (NaN never wins, and logits[0] = NaN keeps 0; ties keep the lowest id), which carries a load and a
 * compare per element in one dependency chain: ~48 us for a 49152-token vocabulary, 2% of a
 * SmolLM2 decode step. Here the maximum comes from LANES independent lane maxima (vector max
 * instructions: x > m ? x : m leaves m on a NaN x, as the loop does), then the first element equal
 * to it: the same index, ~2 us (tests/test_llm.c compares them). */
#define LANES 32
static int32_t argmax_first(const float *x, int32_t n) {
  if (x[0] != x[0]) return 0;
  float m[LANES];
  for (int l = 0; l < LANES; l++) m[l] = x[0];
  int32_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
  float best = x[0];
  for (int l = 0; l < LANES; l++) best = m[l] > best ? m[l] : best;
  for (int32_t k = i; k < n; k++) best = x[k] > best ? x[k] : best;
  /* best is x[0] or an element's value, so an element equals it (-0 == +0 as in the loop's > test) */
  for (int32_t c = 0; c < n; c += LANES) {
    const int32_t e = n - c > LANES ? c + LANES : n;
    int hit = 0;
    for (int32_t k = c; k < e; k++) hit |= x[k] == best;
    if (hit)
      for (int32_t k = c; k < e; k++)
        if (x[k] == best) return k;
  }
  return 0;
}

int32_t ts_llm_sample(const float *logits, int n_vocab, float temp, int top_k, ts_rng *rng) {
  if (!logits || n_vocab <= 0) return -1;
  if (!(temp > 0) || !rng) return argmax_first(logits, n_vocab);
  int k = top_k <= 0 || top_k > n_vocab ? n_vocab : top_k;
  cand *h = malloc((size_t)k * sizeof *h);
  if (!h) return ts_llm_sample(logits, n_vocab, 0, 0, NULL);
  for (int i = 0; i < k; i++) h[i] = (cand){logits[i], i};
  for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
  for (int32_t i = k; i < n_vocab; i++)
    if (weaker(h[0], (cand){logits[i], i})) {
      h[0] = (cand){logits[i], i};
      sift_down(h, k, 0);
    }
  float mx = h[0].v;
  for (int i = 1; i < k; i++)
    if (h[i].v > mx) mx = h[i].v;
  double z = 0;
  for (int i = 0; i < k; i++) z += exp(((double)h[i].v - mx) / temp);
  double u = ts_rng_uniform(rng) * z, c = 0;
  int32_t pick = h[0].id;
  for (int i = 0; i < k; i++) {
    c += exp(((double)h[i].v - mx) / temp);
    pick = h[i].id;
    if (u < c) break;
  }
  free(h);
  return pick;
}
