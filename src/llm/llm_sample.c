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

int32_t ts_llm_sample(const float *logits, int n_vocab, float temp, int top_k, ts_rng *rng) {
  if (!logits || n_vocab <= 0) return -1;
  if (!(temp > 0) || !rng) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
      if (logits[i] > logits[best]) best = i;
    return best;
  }
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
