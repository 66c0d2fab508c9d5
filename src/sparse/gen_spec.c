/* Spec strings -> generators. `KIND:k=v,...` or `WRAP:INNER-SPEC,k=v,...`. The innermost kind
 * splits the key=value pairs; every generator, innermost first, takes the longest leading run of
 * the remaining pairs whose keys it declares (a repeated key ends the run); the rest bubble up
 * to the enclosing wrapper, and anything left at the top is an error naming the key. */
#include <errno.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

static const gen_kind *const kinds[] = {
    &ts__gen_window1d, &ts__gen_window2d,    &ts__gen_dilated2d,    &ts__gen_swin,     &ts__gen_vitdet,
    &ts__gen_random,   &ts__gen_blockrandom, &ts__gen_condense,     &ts__gen_unstructconv,
    &ts__gen_randconn, &ts__gen_keep,        &ts__gen_permute,      &ts__gen_groupconv, &ts__gen_blockconn,
    &ts__gen_permconn,
};
#define NKINDS (sizeof kinds / sizeof kinds[0])
#define MAX_DEPTH 8
#define MAX_PAIRS 64

typedef struct pair {
  const char *key, *val;
  size_t klen, vlen;
} pair;

typedef struct node {
  gen_args args;
  int inner; /* index of the inner node in the chain, -1 for the leaf */
} node;

static int key_index(const gen_kind *k, const char *name, size_t len) {
  for (int i = 0; i < GEN_MAX_KEYS && k->keys[i].name; i++)
    if (strlen(k->keys[i].name) == len && strncmp(k->keys[i].name, name, len) == 0) return i;
  return -1;
}

static int key_index_z(const gen_kind *k, const char *name) { return key_index(k, name, strlen(name)); }

int64_t ts__gen_int(const gen_args *a, const char *key) {
  int i = key_index_z(a->kind, key);
  return i < 0 ? 0 : a->iv[i];
}

double ts__gen_num(const gen_args *a, const char *key) {
  int i = key_index_z(a->kind, key);
  return i < 0 ? 0 : a->nv[i];
}

ts_status ts__gen_int_range(const gen_args *a, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  int64_t v = ts__gen_int(a, key);
  if (v < lo || v > hi) {
    if (hi == INT64_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "%s: %s must be >= %lld, got %lld", a->kind->name, key, (long long)lo,
                      (long long)v);
    return ts_error(TS_ERR_INVALID_ARG, "%s: %s must be in [%lld, %lld], got %lld", a->kind->name, key, (long long)lo,
                    (long long)hi, (long long)v);
  }
  *out = v;
  return TS_OK;
}

ts_status ts__gen_num_range(const gen_args *a, const char *key, double lo, double hi, double *out) {
  double v = ts__gen_num(a, key);
  if (!(v >= lo && v <= hi))
    return ts_error(TS_ERR_INVALID_ARG, "%s: %s must be in [%g, %g], got %g", a->kind->name, key, lo, hi, v);
  *out = v;
  return TS_OK;
}

ts_status ts__gen_mul(const gen_args *a, int64_t x, int64_t y, const char *what, int64_t *out) {
  if (x < 0 || y < 0 || (x > 0 && y > INT64_MAX / x))
    return ts_error(TS_ERR_OVERFLOW, "%s: %s overflows (%lld * %lld)", a->kind->name, what, (long long)x, (long long)y);
  *out = x * y;
  return TS_OK;
}

ts_status ts__gen_index_limit(const gen_args *a, int64_t v, const char *what) {
  if (v > INT32_MAX)
    return ts_error(TS_ERR_OVERFLOW, "%s: %s = %lld exceeds the int32 index limit %d", a->kind->name, what,
                    (long long)v, INT32_MAX);
  return TS_OK;
}

int ts__gen_threads(void) {
  const char *t = getenv("TESSERA_THREADS");
  return t && *t ? ts_default_threads() : omp_get_max_threads();
}

static const gen_kind *find_kind(const char *name, size_t len) {
  for (size_t i = 0; i < NKINDS; i++)
    if (strlen(kinds[i]->name) == len && strncmp(kinds[i]->name, name, len) == 0) return kinds[i];
  return NULL;
}

static ts_status unknown_kind(const char *name, size_t len) {
  char known[256];
  size_t n = 0;
  known[0] = 0;
  for (size_t i = 0; i < NKINDS; i++) n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", kinds[i]->name);
  if (len == 0) return ts_error(TS_ERR_INVALID_ARG, "pattern spec has no kind (expected KIND:key=value,...; kinds: %s)", known);
  return ts_error(TS_ERR_INVALID_ARG, "unknown pattern kind '%.*s' (kinds: %s)", (int)(len > 64 ? 64 : len), name, known);
}

/* Parses one value into args slot i. */
static ts_status parse_value(gen_args *a, int i, const pair *p) {
  const gen_key *k = &a->kind->keys[i];
  char buf[64];
  if (p->vlen == 0 || p->vlen >= sizeof buf)
    return ts_error(TS_ERR_INVALID_ARG, "%s: bad value '%.*s' for %s (expected %s)", a->kind->name,
                    (int)(p->vlen > 40 ? 40 : p->vlen), p->val, k->name, k->type == GK_INT ? "an integer" : "a number");
  memcpy(buf, p->val, p->vlen);
  buf[p->vlen] = 0;
  char *end;
  errno = 0;
  if (k->type == GK_INT) {
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || end == buf)
      return ts_error(TS_ERR_INVALID_ARG, "%s: bad value '%s' for %s (expected an integer)", a->kind->name, buf, k->name);
    a->iv[i] = v;
    a->nv[i] = (double)v;
  } else {
    double v = strtod(buf, &end);
    if (errno || *end || end == buf || !isfinite(v))
      return ts_error(TS_ERR_INVALID_ARG, "%s: bad value '%s' for %s (expected a number)", a->kind->name, buf, k->name);
    a->nv[i] = v;
  }
  a->given[i] = true;
  return TS_OK;
}

/* Consumes the leading run of pairs[*at..np) that kind a->kind declares. */
static ts_status take_keys(gen_args *a, const pair *pairs, int np, int *at) {
  while (*at < np) {
    int i = key_index(a->kind, pairs[*at].key, pairs[*at].klen);
    if (i < 0 || a->given[i]) break;
    TS_TRY(parse_value(a, i, &pairs[*at]));
    (*at)++;
  }
  return TS_OK;
}

/* Splits "k=v,k=v" into pairs. */
static ts_status split_pairs(const gen_kind *k, const char *s, pair *pairs, int *np) {
  *np = 0;
  if (!*s) return TS_OK;
  for (;;) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    const char *eq = memchr(s, '=', len);
    if (len == 0) return ts_error(TS_ERR_INVALID_ARG, "%s: empty key=value pair in the spec", k->name);
    if (!eq || eq == s)
      return ts_error(TS_ERR_INVALID_ARG, "%s: expected key=value, got '%.*s'", k->name, (int)(len > 40 ? 40 : len), s);
    if (*np == MAX_PAIRS) return ts_error(TS_ERR_INVALID_ARG, "%s: more than %d key=value pairs", k->name, MAX_PAIRS);
    pair *p = &pairs[(*np)++];
    p->key = s;
    p->klen = (size_t)(eq - s);
    p->val = eq + 1;
    p->vlen = len - p->klen - 1;
    if (!comma) return TS_OK;
    s = comma + 1;
  }
}

static void list_keys(const gen_kind *k, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < GEN_MAX_KEYS && k->keys[i].name && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", k->keys[i].name);
}

/* Builds the chain nodes[0] (outermost) .. nodes[*nn-1] (leaf) and assigns the pairs. */
static ts_status parse_spec(const char *spec, node *nodes, int *nn) {
  pair pairs[MAX_PAIRS];
  int np = 0;
  const char *s = spec;
  *nn = 0;
  for (;;) {
    const char *colon = strchr(s, ':');
    size_t len = colon ? (size_t)(colon - s) : strlen(s);
    const gen_kind *k = find_kind(s, len);
    if (!k) return unknown_kind(s, len);
    if (*nn == MAX_DEPTH) return ts_error(TS_ERR_INVALID_ARG, "pattern spec nests more than %d generators", MAX_DEPTH);
    node *nd = &nodes[(*nn)++];
    memset(nd, 0, sizeof *nd);
    nd->args.kind = k;
    nd->inner = -1;
    const char *rest = colon ? colon + 1 : "";
    if (k->wrapper) {
      if (!*rest) return ts_error(TS_ERR_INVALID_ARG, "%s: missing inner spec (%s:SPEC,key=value,...)", k->name, k->name);
      nd->inner = *nn;
      s = rest;
      continue;
    }
    TS_TRY(split_pairs(k, rest, pairs, &np));
    break;
  }
  int at = 0;
  for (int d = *nn - 1; d >= 0; d--) TS_TRY(take_keys(&nodes[d].args, pairs, np, &at));
  if (at < np) {
    const gen_kind *top = nodes[0].args.kind;
    const pair *p = &pairs[at];
    int ki = key_index(top, p->key, p->klen);
    if (ki >= 0) return ts_error(TS_ERR_INVALID_ARG, "%s: duplicate key '%.*s'", top->name, (int)p->klen, p->key);
    for (int d = 1; d < *nn; d++)
      if (key_index(nodes[d].args.kind, p->key, p->klen) >= 0)
        return ts_error(TS_ERR_INVALID_ARG, "%s: unknown key '%.*s' (a key of %s: the inner spec's keys come first)",
                        top->name, (int)p->klen, p->key, nodes[d].args.kind->name);
    char keys[160];
    list_keys(top, keys, sizeof keys);
    return ts_error(TS_ERR_INVALID_ARG, "%s: unknown key '%.*s' (%s takes %s)", top->name, (int)(p->klen > 40 ? 40 : p->klen),
                    p->key, top->name, keys[0] ? keys : "no keys");
  }
  /* Missing required keys (leaf first: that is what the user wrote first), then defaults. */
  for (int d = *nn - 1; d >= 0; d--) {
    gen_args *a = &nodes[d].args;
    for (int i = 0; i < GEN_MAX_KEYS && a->kind->keys[i].name; i++) {
      if (a->given[i]) continue;
      if (a->kind->keys[i].required)
        return ts_error(TS_ERR_INVALID_ARG, "%s: missing key %s", a->kind->name, a->kind->keys[i].name);
      a->nv[i] = a->kind->keys[i].def;
      a->iv[i] = (int64_t)a->kind->keys[i].def;
    }
  }
  return TS_OK;
}

void ts_pattern_info_free(ts_pattern_info *info) {
  if (!info) return;
  ts_free(info->base_index);
  memset(info, 0, sizeof *info);
}

static ts_status run_node(node *nodes, int d, ts_csr *out, ts_pattern_info *info) {
  const gen_args *a = &nodes[d].args;
  memset(out, 0, sizeof *out);
  memset(info, 0, sizeof *info);
  ts_status s;
  if (nodes[d].inner < 0) {
    s = a->kind->run(a, NULL, NULL, out, info);
  } else {
    ts_csr in;
    ts_pattern_info ii;
    TS_TRY(run_node(nodes, nodes[d].inner, &in, &ii));
    s = a->kind->run(a, &in, &ii, out, info);
    if (s == TS_OK) { /* "wrap:" + inner chain; MAX_DEPTH short names always fit */
      size_t w = strlen(a->kind->name), k = strnlen(ii.kind, sizeof ii.kind - 1);
      if (w + 1 + k >= sizeof info->kind) k = sizeof info->kind - 2 - w;
      memcpy(info->kind, a->kind->name, w);
      info->kind[w] = ':';
      memcpy(info->kind + w + 1, ii.kind, k);
      info->kind[w + 1 + k] = 0;
    }
    ts_csr_free(&in);
    ts_pattern_info_free(&ii);
  }
  if (s != TS_OK) {
    ts_csr_free(out);
    ts_pattern_info_free(info);
    return s;
  }
  if (nodes[d].inner < 0) snprintf(info->kind, sizeof info->kind, "%s", a->kind->name);
  info->rows = out->rows;
  info->cols = out->cols;
  info->nnz = out->nnz;
  return TS_OK;
}

ts_status ts_pattern_generate(const char *spec, ts_csr *out, ts_pattern_info *info) {
  if (out) memset(out, 0, sizeof *out);
  if (info) memset(info, 0, sizeof *info);
  if (!spec || !out) return ts_error(TS_ERR_INVALID_ARG, "pattern generate: NULL argument");
  node nodes[MAX_DEPTH];
  int nn;
  TS_TRY(parse_spec(spec, nodes, &nn));
  ts_pattern_info local;
  ts_status s = run_node(nodes, 0, out, info ? info : &local);
  if (s == TS_OK && !info) ts_pattern_info_free(&local);
  return s;
}

bool ts_pattern_token_coords(const ts_pattern_info *info, int64_t i, int64_t *y, int64_t *x) {
  if (!info || info->grid_h <= 0 || info->grid_w <= 0 || i < 0 || i >= info->n) return false;
  int64_t b = info->base_index ? info->base_index[i] : i;
  if (b < 0 || b >= info->grid_h * info->grid_w) return false;
  if (y) *y = b / info->grid_w;
  if (x) *x = b % info->grid_w;
  return true;
}

const char *ts_pattern_spec_help(void) {
  static _Thread_local char buf[4096];
  if (buf[0]) return buf;
  size_t n = (size_t)snprintf(buf, sizeof buf,
                              "pattern specs: KIND:key=value,...   wrappers: WRAP:INNER-SPEC,key=value,...\n"
                              "(each generator takes the leading keys it knows, the rest go to the wrapper:\n"
                              " permute:window2d:h=64,w=64,k=13,seed=7 seeds permute; [key=v] is a default;\n"
                              " exact definitions: include/tessera/sparse.h)\n");
  for (size_t i = 0; i < NKINDS && n < sizeof buf; i++) {
    const gen_kind *k = kinds[i];
    char head[128];
    size_t h = (size_t)snprintf(head, sizeof head, "%s:%s", k->name, k->wrapper ? "SPEC" : "");
    for (int j = 0; j < GEN_MAX_KEYS && k->keys[j].name && h < sizeof head; j++) {
      bool first = !k->wrapper && j == 0;
      if (k->keys[j].required) h += (size_t)snprintf(head + h, sizeof head - h, "%s%s", first ? "" : ",", k->keys[j].name);
      else h += (size_t)snprintf(head + h, sizeof head - h, "%s%s=%g]", first ? "[" : "[,", k->keys[j].name, k->keys[j].def);
    }
    n += (size_t)snprintf(buf + n, sizeof buf - n, "  %s\n      %s\n", head, k->help);
  }
  return buf;
}
