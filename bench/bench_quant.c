/* Decode matvec y = W x for each weight type, reference vs SIMD side by side, in GB/s of weight
 * streamed and % of the machine profile's read bandwidth. Shapes are SmolLM2-135M's (rows x cols):
 * 576x1536 (ffn_down), 1536x576 (ffn_gate/up), 576x576 (attn_q/output), 49152x576 (the tied
 * vocabulary projection, 30 MB in Q8_0). "warm": repeated calls on the same matrix (a 0.5 MB layer
 * stays in L2/L3, as when one layer is hammered); "cold": caches flushed before each call (what a
 * decode step sees for a model larger than L3). The activation quantization (block types) is
 * inside the timed call, as in ts_quant_matvec. Block types also run "packed" (named
 * <level>-packed): the AVX2 or AVX-512 GEMM on rows packed as the LLM runtime packs them at load
 * (quant_pgemm_avx2.c, quant_pgemm_vnni_avx512.c; activation quantize and prepare inside the timed
 * call, rows split over the threads in one OpenMP region), the kernel a decode step runs; the row
 * of the level itself is the one-row dot loop on the file's rows. "stream": one timed call runs
 * the kernel on copies of the matrix one after another, 256 MB in all (huge pages where allowed,
 * like the runtime's packed weights), so the figure is the rate at which the kernel streams weights
 * from memory once it is under way, as a decode step's long phases do (no cache flush between
 * copies, and no copy is read twice).
 *
 * --tokens T (> 1): prefill's batched GEMM Y = W X of T tokens instead (the dot loop on the file's
 * rows, ts__quant_gemm_with, per thread on its rows; the packed kernel with T tokens); GFLOP/s of
 * 2 rows cols T, GB/s of the weights read once.
 *
 *   bench_quant [--threads N] [--types q4_1,q8_0,...] [--shapes 576x1536,...] [--tokens T]
 *               [--modes warm,cold,stream | --cold-only | --warm-only] [--json]
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/quant_internal.h"
#include "tessera/quant.h"

typedef struct job {
  const ts__quant_table *t;
  int nt;
  uint32_t type;
  const void *W;
  int64_t rows, cols;
  const float *x;
  ts_quant_act *xq;
  float *y;
  const void *P; /* packed rows (NULL: the file-layout dot loop) */
  int32_t *gsum;
  int copies;                /* stream mode: this many copies of W (P), stride bytes apart, one after another */
  size_t wstride, pstride;
  int T;                       /* tokens: x[T][cols], y[T][rows]; T > 1 the batch below */
  int8_t *bq;                  /* [T][cols] */
  float *bd, *bs;              /* [T][cols / 32] */
  int32_t *bsum;
} job;

/* token t's activation of the batch */
static void quantize_batch(const job *j) {
  const int64_t nb = j->cols / 32;
  for (int t = 0; t < j->T; t++)
    j->t->act_quantize(j->cols, j->x + (size_t)t * (size_t)j->cols, j->bq + (size_t)t * (size_t)j->cols,
                       j->bd + (size_t)t * (size_t)nb, j->bsum + (size_t)t * (size_t)nb, j->bs + (size_t)t * (size_t)nb);
}

/* rows [r0, r1) of thread id of nt, on packed groups */
static void share(const job *j, int64_t nt, int64_t id, int64_t *r0, int64_t *r1) {
  const int64_t g = TS__PACK_ROWS;
  *r0 = j->rows * id / nt / g * g;
  *r1 = id == nt - 1 ? j->rows : j->rows * (id + 1) / nt / g * g;
}

static void run(void *arg) {
  job *j = arg;
  bool blk = j->type == TS_QT_Q8_0 || j->type == TS_QT_Q4_0 || j->type == TS_QT_Q4_1;
  size_t rb;
  ts_qtype_row_bytes(j->type, j->cols, &rb);
  for (int c = 0; c < j->copies && j->T > 1; c++) { /* prefill: the dot loop over the batch */
    if (blk) quantize_batch(j);
    const ts__qbatch qb = {j->cols, j->T, j->bq, j->bd, j->bsum, j->bs, NULL, NULL, NULL, NULL, NULL, 0, 0};
    const uint8_t *W = (const uint8_t *)j->W + (size_t)c * j->wstride;
#pragma omp parallel num_threads(j->nt)
    {
      int64_t r0, r1;
      share(j, omp_get_num_threads(), omp_get_thread_num(), &r0, &r1);
      if (r1 > r0)
        ts__quant_gemm_with(j->t, j->type, W + (size_t)r0 * rb, rb, r1 - r0, j->cols, j->x, j->cols, &qb, j->T, j->y + r0,
                            j->rows);
    }
  }
  for (int c = 0; c < j->copies && j->T == 1; c++) {
    if (blk) j->t->act_quantize(j->cols, j->x, j->xq->q, j->xq->d, j->xq->sum, j->xq->s);
    ts__quant_matvec_with(j->t, j->nt, j->type, (const uint8_t *)j->W + (size_t)c * j->wstride, j->rows, j->cols, j->x,
                          blk ? j->xq : NULL, j->y);
  }
}

static void run_packed(void *arg) {
  job *j = arg;
  const ts__quant_table *t = j->t;
  ts__pgemm_fn f = ts__quant_pgemm_fn(t, j->type);
  size_t rb;
  ts_qtype_row_bytes(j->type, j->cols, &rb);
  for (int c = 0; c < j->copies; c++) {
    ts__qbatch qb = {j->cols, 1, j->xq->q, j->xq->d, j->xq->sum, j->xq->s, j->gsum, NULL, NULL, NULL, NULL, 0, 0};
    if (j->T > 1) {
      quantize_batch(j);
      qb = (ts__qbatch){j->cols, j->T, j->bq, j->bd, j->bsum, j->bs, j->gsum, NULL, NULL, NULL, NULL, 0, 0};
    } else {
      t->act_quantize(j->cols, j->x, j->xq->q, j->xq->d, j->xq->sum, j->xq->s);
    }
    t->prep_packed(j->cols, j->T, qb.q, j->gsum);
    const uint8_t *P = (const uint8_t *)j->P + (size_t)c * j->pstride;
#pragma omp parallel num_threads(j->nt)
    { /* row shares on packed groups */
      int64_t r0, r1;
      share(j, omp_get_num_threads(), omp_get_thread_num(), &r0, &r1);
      if (r1 > r0) f(P + (size_t)r0 * rb, rb, r1 - r0, &qb, j->y + r0, j->rows);
    }
  }
}

static int parse_list(const char *s, char items[][32], int max) {
  int n = 0;
  while (*s && n < max) {
    size_t len = strcspn(s, ",");
    if (len >= 32) len = 31;
    memcpy(items[n], s, len);
    items[n++][len] = 0;
    s += strcspn(s, ",");
    if (*s == ',') s++;
  }
  return n;
}

int main(int argc, char **argv) {
  int threads = 2, T = 1;
  bool json = false, warm = true, cold = true, stream = true;
  char types[8][32], shapes[8][32];
  int ntypes = parse_list("f32,f16,bf16,q8_0,q4_0,q4_1", types, 8);
  int nshapes = parse_list("576x1536,1536x576,576x576,49152x576", shapes, 8);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--types") && i + 1 < argc) ntypes = parse_list(argv[++i], types, 8);
    else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) nshapes = parse_list(argv[++i], shapes, 8);
    else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) T = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--cold-only")) warm = stream = false;
    else if (!strcmp(argv[i], "--warm-only")) cold = stream = false;
    else if (!strcmp(argv[i], "--modes") && i + 1 < argc) {
      const char *m = argv[++i];
      warm = strstr(m, "warm") != NULL, cold = strstr(m, "cold") != NULL, stream = strstr(m, "stream") != NULL;
      if (!warm && !cold && !stream) {
        fprintf(stderr, "bench_quant: --modes takes a list of warm, cold, stream\n");
        return 2;
      }
    }
    else {
      fprintf(stderr, "usage: bench_quant [--threads N] [--types a,b] [--shapes RxC,...] [--tokens T] [--modes warm,cold,stream | "
                      "--cold-only | --warm-only] [--json]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  if (T < 1) T = 1;
  ts_machine_profile prof;
  bool have_prof = ts_bench_profile(&prof) == TS_OK;
  if (have_prof && threads == 1 && prof.bandwidth_gbs_1t > 0) prof.bandwidth_gbs = prof.bandwidth_gbs_1t; /* %bw of one thread's read */
  ts_isa top = ts_isa_active();
  cJSON *root = json ? cJSON_CreateArray() : NULL;
  if (!json) {
    if (T > 1) printf("prefill GEMM of %d tokens, ", T);
    else printf("decode matvec, ");
    printf("%d thread(s), kernels up to %s; profile bandwidth %.1f GB/s (1 thread %.1f)\n", threads, ts_isa_name(top),
           have_prof ? prof.bandwidth_gbs : 0.0, have_prof ? prof.bandwidth_gbs_1t : 0.0);
    ts_bench_print_header(stdout);
  }
  for (int si = 0; si < nshapes; si++) {
    long long R, C;
    if (sscanf(shapes[si], "%lldx%lld", &R, &C) != 2 || R < 1 || C < 32 || C % 32) {
      fprintf(stderr, "bench_quant: bad shape '%s' (ROWSxCOLS, COLS a multiple of 32)\n", shapes[si]);
      return 2;
    }
    for (int ti = 0; ti < ntypes; ti++) {
      uint32_t type;
      if (ts_qtype_parse(types[ti], &type) != TS_OK || !ts_qtype_has_kernels(type)) {
        fprintf(stderr, "bench_quant: %s\n", ts_last_error());
        return 2;
      }
      size_t rb;
      ts_qtype_row_bytes(type, C, &rb);
      size_t wbytes = rb * (size_t)R;
      uint8_t *W = ts_malloc(wbytes);
      float *x = ts_malloc(sizeof(float) * (size_t)C * (size_t)T), *y = ts_malloc(sizeof(float) * (size_t)R * (size_t)T);
      int8_t *bq = ts_malloc((size_t)C * (size_t)T);
      const size_t tb = (size_t)(C / 32) * (size_t)T; /* the batch's blocks */
      float *bd = ts_malloc(sizeof(float) * tb), *bs = ts_malloc(sizeof(float) * tb);
      int32_t *bsum = ts_malloc(sizeof(int32_t) * tb);
      float *tmp = ts_malloc(sizeof(float) * (size_t)C);
      void *amem = ts_malloc(ts_quant_act_bytes(C));
      const bool blk = type == TS_QT_Q8_0 || type == TS_QT_Q4_0 || type == TS_QT_Q4_1;
      const ts__quant_table *top_t = ts__quant_for(top);
      uint8_t *P = blk && top_t->prep_packed ? ts_malloc(ts__pack_bytes(type, R, C)) : NULL;
      int32_t *gsum = ts_malloc(sizeof(int32_t) * (size_t)(C / 4) * (size_t)T);
      ts_quant_act xq;
      if (!W || !x || !y || !tmp || !amem || !bq || !bd || !bs || !bsum ||
          ts_quant_act_init(&xq, C, amem, ts_quant_act_bytes(C)) != TS_OK) {
        fprintf(stderr, "bench_quant: out of memory\n");
        return 1;
      }
      ts_rng rng;
      ts_rng_seed(&rng, 7);
      for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < C; c++) tmp[c] = ts_rng_normal(&rng) * 0.05f;
        ts__quantize_ref(type, tmp, W + rb * (size_t)r, C);
      }
      for (int64_t c = 0; c < C * T; c++) x[c] = ts_rng_normal(&rng);
      if (P) ts__pack_rows(type, W, P, R, C);
      /* stream mode: copies of W and P back to back, 256 MB of each */
      const size_t pbytes = P ? ts__pack_bytes(type, R, C) : 0;
      const int copies = (int)(((size_t)256 << 20) / wbytes) + 1;
      uint8_t *Wc = stream ? ts_malloc_huge(wbytes * (size_t)copies) : NULL;
      uint8_t *Pc = stream && P ? ts_malloc_huge(pbytes * (size_t)copies) : NULL;
      if (stream && (!Wc || (P && !Pc))) {
        fprintf(stderr, "bench_quant: out of memory for the stream copies\n");
        return 1;
      }
      for (int c = 0; stream && c < copies; c++) {
        memcpy(Wc + (size_t)c * wbytes, W, wbytes);
        if (Pc) memcpy(Pc + (size_t)c * pbytes, P, pbytes);
      }
      for (int mode = 0; mode < 3; mode++) {
        if ((mode == 0 && !warm) || (mode == 1 && !cold) || (mode == 2 && !stream)) continue;
        for (int isa = mode == 2 ? TS_ISA_SCALAR + 1 : TS_ISA_SCALAR; isa <= (int)top + (P ? 1 : 0); isa++) {
          const bool packed = isa > (int)top;
          job j = {ts__quant_for(packed ? top : (ts_isa)isa), threads, type, W, R, C, x, &xq, y, P, gsum, 1, 0, 0,
                   T, bq, bd, bs, bsum};
          if (mode == 2) j.W = Wc, j.P = Pc, j.copies = copies, j.wstride = wbytes, j.pstride = pbytes;
          const double bytes = (double)wbytes * j.copies, flops = T > 1 ? 2.0 * (double)R * (double)C * T * j.copies : 0;
          ts_bench_opts o = ts_bench_opts_default();
          o.flush_cache = mode == 1;
          if (isa == TS_ISA_SCALAR) o.repeats = 3, o.min_time_s = 0.05;
          ts_bench_result res;
          if (ts_bench_run(&o, packed ? run_packed : run, &j, &res) != TS_OK) {
            fprintf(stderr, "bench_quant: %s\n", ts_last_error());
            return 1;
          }
          char name[320], packed_name[40];
          snprintf(packed_name, sizeof packed_name, "%s-packed", ts_isa_name(top));
          snprintf(name, sizeof name, "%s %lldx%lld %s %s", types[ti], R, C, mode == 2 ? "stream" : mode ? "cold" : "warm",
                   packed ? packed_name : ts_isa_name((ts_isa)isa));
          if (json) {
            cJSON *o2 = ts_bench_result_json(&res, flops, bytes, have_prof ? &prof : NULL);
            cJSON_AddStringToObject(o2, "name", name);
            cJSON_AddNumberToObject(o2, "weight_bytes", bytes);
            cJSON_AddNumberToObject(o2, "threads", threads);
            cJSON_AddNumberToObject(o2, "tokens", T);
            cJSON_AddItemToArray(root, o2);
          } else {
            ts_bench_print_row(stdout, name, &res, flops, bytes, have_prof ? &prof : NULL);
          }
        }
      }
      ts_free(W);
      ts_free(x);
      ts_free(y);
      ts_free(tmp);
      ts_free(amem);
      ts_free(P);
      ts_free(Wc);
      ts_free(Pc);
      ts_free(gsum);
      ts_free(bq), ts_free(bd), ts_free(bs), ts_free(bsum);
    }
  }
  if (json) {
    ts_bench_print_json(root);
    cJSON_Delete(root);
  }
  return 0;
}
