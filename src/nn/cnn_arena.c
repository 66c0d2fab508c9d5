/* Activation arena of a CNN net: every tensor (a non-fused node other than the input) gets an
 * offset; with reuse, tensors whose lifetimes [first, last] (producer, last consumer, in execution
 * order) overlap never share bytes, and the others may. Placement: largest tensors first, each at
 * the lowest offset that clears every already placed tensor it is alive with (greedy by size,
 * the usual heuristic for this interval-packing problem; a few percent above the peak of live
 * bytes on these models). Offsets are 64-byte aligned. */
#include <stdint.h>
#include <stdlib.h>

#include "nn/cnn_internal.h"

typedef struct slot {
  int id;
  size_t size, off;
} slot;

static int by_size_desc(const void *a, const void *b) {
  const slot *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return x->id - y->id;
}

static int by_off(const void *a, const void *b) {
  const slot *x = *(slot *const *)a, *y = *(slot *const *)b;
  return (x->off > y->off) - (x->off < y->off);
}

static int alive_together(const net_node *a, const net_node *b) { return a->first <= b->last && b->first <= a->last; }

ts_status ts__cnn_arena_plan(ts_cnn_net *net, bool reuse, size_t *offsets, size_t *total) {
  const int n = net->n;
  slot *s = malloc((size_t)n * sizeof *s);
  slot **near = malloc((size_t)n * sizeof *near);
  if (!s || !near) return free(s), free(near), ts_error(TS_ERR_OOM, "cnn arena: out of memory");
  int ns = 0;
  for (int i = 0; i < n; i++) {
    offsets[i] = SIZE_MAX;
    const net_node *nn = &net->nodes[i];
    if (nn->fused || net->g->nodes[i].op == TS_CNN_INPUT || !nn->numel) continue;
    s[ns++] = (slot){i, (nn->numel * sizeof(float) + TS_ALIGN - 1) / TS_ALIGN * TS_ALIGN, 0};
  }
  size_t end = 0;
  if (!reuse) {
    for (int k = 0; k < ns; k++) s[k].off = end, end += s[k].size;
  } else {
    qsort(s, (size_t)ns, sizeof *s, by_size_desc);
    for (int k = 0; k < ns; k++) {
      int nn = 0;
      for (int j = 0; j < k; j++)
        if (alive_together(&net->nodes[s[j].id], &net->nodes[s[k].id])) near[nn++] = &s[j];
      qsort(near, (size_t)nn, sizeof *near, by_off);
      size_t off = 0;
      for (int j = 0; j < nn; j++) {
        if (off + s[k].size <= near[j]->off) break;
        if (near[j]->off + near[j]->size > off) off = near[j]->off + near[j]->size;
      }
      s[k].off = off;
      if (off + s[k].size > end) end = off + s[k].size;
    }
  }
  /* intact: no tensor produced later overlaps it in memory */
  for (int k = 0; k < ns; k++) {
    net_node *t = &net->nodes[s[k].id];
    t->intact = true;
    for (int j = 0; reuse && j < ns && t->intact; j++) {
      const net_node *u = &net->nodes[s[j].id];
      if (u->first > t->first && s[j].off < s[k].off + s[k].size && s[k].off < s[j].off + s[j].size) t->intact = false;
    }
    offsets[s[k].id] = s[k].off;
  }
  free(s), free(near);
  *total = end;
  return TS_OK;
}
