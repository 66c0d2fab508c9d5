/* GGML type table: names, block sizes and bytes per block for every type id a GGUF file may
 * carry (so the reader can bound-check tensors it has no kernels for), and row sizes. */
#include <strings.h>

#include "llm/quant_internal.h"

typedef struct qinfo {
  const char *name;
  int64_t blk;   /* elements per block; 0: unknown id */
  size_t bytes;  /* bytes per block */
} qinfo;

/* Indexed by GGML id. K-quants and i-quants use super-blocks of 256 elements. */
static const qinfo g_info[] = {
    [TS_QT_F32] = {"f32", 1, 4},         [TS_QT_F16] = {"f16", 1, 2},
    [TS_QT_Q4_0] = {"q4_0", 32, 18},     [TS_QT_Q4_1] = {"q4_1", 32, 20},
    [TS_QT_Q5_0] = {"q5_0", 32, 22},     [TS_QT_Q5_1] = {"q5_1", 32, 24},
    [TS_QT_Q8_0] = {"q8_0", 32, 34},     [TS_QT_Q8_1] = {"q8_1", 32, 36},
    [TS_QT_Q2_K] = {"q2_k", 256, 84},    [TS_QT_Q3_K] = {"q3_k", 256, 110},
    [TS_QT_Q4_K] = {"q4_k", 256, 144},   [TS_QT_Q5_K] = {"q5_k", 256, 176},
    [TS_QT_Q6_K] = {"q6_k", 256, 210},   [TS_QT_Q8_K] = {"q8_k", 256, 292},
    [TS_QT_IQ2_XXS] = {"iq2_xxs", 256, 66}, [TS_QT_IQ2_XS] = {"iq2_xs", 256, 74},
    [TS_QT_IQ3_XXS] = {"iq3_xxs", 256, 98}, [TS_QT_IQ1_S] = {"iq1_s", 256, 50},
    [TS_QT_IQ4_NL] = {"iq4_nl", 32, 18}, [TS_QT_IQ3_S] = {"iq3_s", 256, 110},
    [TS_QT_IQ2_S] = {"iq2_s", 256, 82},  [TS_QT_IQ4_XS] = {"iq4_xs", 256, 136},
    [TS_QT_I8] = {"i8", 1, 1},           [TS_QT_I16] = {"i16", 1, 2},
    [TS_QT_I32] = {"i32", 1, 4},         [TS_QT_I64] = {"i64", 1, 8},
    [TS_QT_F64] = {"f64", 1, 8},         [TS_QT_IQ1_M] = {"iq1_m", 256, 56},
    [TS_QT_BF16] = {"bf16", 1, 2},       [TS_QT_TQ1_0] = {"tq1_0", 256, 54},
    [TS_QT_TQ2_0] = {"tq2_0", 256, 66},
};
#define NINFO (sizeof g_info / sizeof g_info[0])

static const qinfo *info(uint32_t t) {
  if (t >= NINFO || g_info[t].blk == 0) return NULL;
  return &g_info[t];
}

const char *ts_qtype_name(uint32_t t) {
  const qinfo *q = info(t);
  return q ? q->name : "unknown";
}

ts_status ts_qtype_parse(const char *name, uint32_t *type) {
  if (!name || !type) return ts_error(TS_ERR_INVALID_ARG, "ts_qtype_parse: NULL argument");
  for (uint32_t t = 0; t < NINFO; t++)
    if (g_info[t].blk && strcasecmp(name, g_info[t].name) == 0) {
      *type = t;
      return TS_OK;
    }
  return ts_error(TS_ERR_DTYPE, "unknown tensor type '%s' (expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q4_k, q6_k, ...)",
                  name);
}

bool ts_qtype_known(uint32_t t) { return info(t) != NULL; }

int64_t ts_qtype_block_elems(uint32_t t) {
  const qinfo *q = info(t);
  return q ? q->blk : 0;
}

size_t ts_qtype_block_bytes(uint32_t t) {
  const qinfo *q = info(t);
  return q ? q->bytes : 0;
}

ts_status ts_qtype_row_bytes(uint32_t t, int64_t n, size_t *bytes) {
  const qinfo *q = info(t);
  if (!q) return ts_error(TS_ERR_DTYPE, "unknown tensor type id %u", t);
  if (n < 0) return ts_error(TS_ERR_SHAPE, "negative row length %lld", (long long)n);
  if (n % q->blk)
    return ts_error(TS_ERR_SHAPE, "row length %lld is not a multiple of %s's block size %lld", (long long)n,
                    q->name, (long long)q->blk);
  if (!ts_mul_size((size_t)(n / q->blk), q->bytes, bytes))
    return ts_error(TS_ERR_OVERFLOW, "row of %lld %s elements overflows size_t", (long long)n, q->name);
  return TS_OK;
}

bool ts_qtype_has_kernels(uint32_t t) {
  return t == TS_QT_F32 || t == TS_QT_F16 || t == TS_QT_BF16 || t == TS_QT_Q8_0 || t == TS_QT_Q4_0 ||
         t == TS_QT_Q4_1 || t == TS_QT_Q5_0 || t == TS_QT_Q4_K || t == TS_QT_Q6_K;
}
