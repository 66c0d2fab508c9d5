/* Host API of the CUDA attention kernels (include/tessera/attn_cuda.h): device checks, plan
 * creation (CPU classification -> flattening -> upload), execute, memory helpers. Only the CUDA
 * runtime's C API is used here; the kernels live in attn_fixed.cu and attn_vartile.cu. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "core/artifact_internal.h"
#include "cuda/attn_cuda_internal.h"
#include "tessera/attn_cuda.h"

struct ts_attn_cuda_plan {
  ts__cuda_dev dev;
  ts_attn_stats stats;
  void *dunits, *dchunks, *dmbits, *dcols, *dsplits; /* device allocations behind dev's pointers */
  void *ws;                                          /* split parts' workspace, grown on demand */
  size_t ws_bytes;
};

static ts_status launch(ts_attn_cuda_plan *p, int bf16, const void *Q, const void *K, const void *V, float *O, int64_t batch,
                        int64_t heads, void *stream);

static ts_status cuda_fail(cudaError_t e, const char *what) {
  return ts_error(e == cudaErrorMemoryAllocation ? TS_ERR_OOM : TS_ERR_INTERNAL, "cuda: %s: %s (%s)", what,
                  cudaGetErrorString(e), cudaGetErrorName(e));
}

/* TS_OK when a device can be used, else TS_ERR_UNSUPPORTED with the reason. */
static ts_status need_device(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* clear it: the next call should not see a stale error */
    return ts_error(TS_ERR_UNSUPPORTED, "cuda: no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
  }
  if (count < 1) return ts_error(TS_ERR_UNSUPPORTED, "cuda: no CUDA device (cudaGetDeviceCount found 0 devices)");
  return TS_OK;
}

bool ts_attn_cuda_available(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess && count > 0;
}

ts_status ts_attn_cuda_device_name(char *buf, size_t cap) {
  if (!buf || cap == 0) return ts_error(TS_ERR_INVALID_ARG, "cuda: NULL or empty name buffer");
  buf[0] = 0;
  ts_status st = need_device();
  if (st != TS_OK) {
    snprintf(buf, cap, "%s", ts_last_error());
    return st;
  }
  int dev = 0;
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
  if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceProperties");
  snprintf(buf, cap, "%s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
  return TS_OK;
}

void ts_attn_cuda_plan_destroy(ts_attn_cuda_plan *p) {
  if (!p) return;
  cudaFree(p->dunits);
  cudaFree(p->dchunks);
  cudaFree(p->dmbits);
  cudaFree(p->dcols);
  cudaFree(p->dsplits);
  cudaFree(p->ws);
  free(p);
}

static ts_status upload(void **dst, const void *src, size_t bytes, const char *what) {
  cudaError_t e = cudaMalloc(dst, bytes ? bytes : 16);
  if (e != cudaSuccess) return cuda_fail(e, what);
  if (bytes && (e = cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) return cuda_fail(e, what);
  return TS_OK;
}

/* Uploads f and fills the plan with the given work counts (NULL: the CPU plan's). */
static ts_status plan_finish_stats(ts_attn_cuda_plan **out, const ts__cuda_flat *f, const ts_attn_stats *stats, int fixed,
                                   int cls_fixed) {
  ts_attn_cuda_plan *p = calloc(1, sizeof *p);
  if (!p) return ts_error(TS_ERR_OOM, "cuda attn plan: cannot allocate the plan");
  p->stats = *stats;
  ts_status st = upload(&p->dunits, f->units, (size_t)f->nunits * sizeof *f->units, "upload of the units");
  if (st == TS_OK) st = upload(&p->dchunks, f->chunks, (size_t)f->nchunks * sizeof *f->chunks, "upload of the chunks");
  if (st == TS_OK) st = upload(&p->dmbits, f->mbits, (size_t)f->nmbits * sizeof *f->mbits, "upload of the mask bits");
  if (st == TS_OK && f->cols) st = upload(&p->dcols, f->cols, (size_t)f->ncols * sizeof *f->cols, "upload of the key lists");
  if (st == TS_OK && f->nsplits)
    st = upload(&p->dsplits, f->splits, (size_t)f->nsplits * sizeof *f->splits, "upload of the split groups");
  if (st != TS_OK) {
    ts_attn_cuda_plan_destroy(p);
    return st;
  }
  p->dev = (ts__cuda_dev){.n = f->n, .d = f->d, .fixed = fixed, .cls_fixed = cls_fixed, .units = p->dunits,
                          .chunks = p->dchunks, .mbits = p->dmbits, .cols = p->dcols, .splits = p->dsplits,
                          .nsplits = f->nsplits, .nparts = f->nparts};
  memcpy(p->dev.cls, f->cls, sizeof f->cls);
  *out = p;
  return TS_OK;
}

/* plan_finish_stats with the work counts of the CPU plan it was flattened from. */
static ts_status plan_finish(ts_attn_cuda_plan **out, const ts__cuda_flat *f, const ts_attn_plan *cpu, int fixed,
                             int cls_fixed) {
  ts_attn_stats st;
  ts_attn_plan_stats(cpu, &st);
  return plan_finish_stats(out, f, &st, fixed, cls_fixed);
}

/* The CPU plan of s (single-threaded context: its workspaces are never used here). */
static ts_status cpu_plan(ts_attn_plan **pl, const ts_attn_schedule *s, const ts_bitmap *mask, int64_t d) {
  if (d < 1 || d > 256)
    return ts_error(TS_ERR_UNSUPPORTED, "cuda attn plan: head dimension d = %lld is not in [1, 256]", (long long)d);
  ts_context *ctx;
  TS_TRY(ts_context_create(&ctx, 1));
  ts_status st = ts_attn_plan_create(pl, ctx, s, mask, d);
  ts_context_destroy(ctx);
  return st;
}

static ts_status smem_limit(size_t *out) {
  int dev = 0, v = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess) return cuda_fail(e, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  *out = (size_t)v;
  return TS_OK;
}

ts_status ts_attn_cuda_plan_create(ts_attn_cuda_plan **out, const ts_attn_schedule *s, const ts_bitmap *mask, int64_t d) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "cuda attn plan: NULL output pointer");
  *out = NULL;
  TS_TRY(need_device());
  size_t limit = 0;
  TS_TRY(smem_limit(&limit));
  ts_attn_plan *pl;
  TS_TRY(cpu_plan(&pl, s, mask, d));
  ts__cuda_flat f;
  ts_status st = ts__cuda_flatten_vartile(pl, limit, &f);
  if (st == TS_OK) {
    st = plan_finish(out, &f, pl, 0, 0);
    ts__cuda_flat_free(&f);
  }
  ts_attn_plan_destroy(pl);
  return st;
}

ts_status ts_attn_cuda_plan_create_fixed(ts_attn_cuda_plan **out, const ts_bitmap *mask, int64_t d, int32_t br, int32_t bc,
                                         bool dense) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "cuda attn plan: NULL output pointer");
  *out = NULL;
  TS_TRY(need_device());
  const int32_t ok[] = {16, 32, 64, 128};
  bool br_ok = false, bc_ok = false;
  for (int i = 0; i < 4; i++) br_ok |= br == ok[i], bc_ok |= bc == ok[i];
  if (!br_ok || !bc_ok)
    return ts_error(TS_ERR_INVALID_ARG, "cuda attn plan: fixed tile %d x %d: br and bc must be 16, 32, 64 or 128", br, bc);
  if (!mask || !mask->bits) return ts_error(TS_ERR_INVALID_ARG, "cuda attn plan: NULL mask");
  int cls = br <= 32 && bc <= 32 ? 1 : 3;
  size_t limit = 0, need = ts__cuda_smem_bytes(br, ts__cuda_class_rb[cls], ts__cuda_class_cb[cls], d);
  TS_TRY(smem_limit(&limit));
  if (d >= 1 && d <= 256 && need > limit)
    return ts_error(TS_ERR_UNSUPPORTED, "cuda attn plan: fixed %d x %d tiles at d = %lld need %zu bytes of shared memory, the device allows %zu",
                    br, bc, (long long)d, need, limit);
  ts_attn_schedule s;
  TS_TRY(dense ? ts_attn_schedule_dense(&s, mask->rows, br, bc) : ts_attn_schedule_blockskip(&s, mask->rows, br, bc));
  ts_attn_plan *pl;
  ts_status st = cpu_plan(&pl, &s, mask, d);
  ts_attn_schedule_free(&s);
  if (st != TS_OK) return st;
  ts__cuda_flat f;
  st = ts__cuda_flatten_fixed(pl, cls, &f);
  if (st == TS_OK) {
    st = plan_finish(out, &f, pl, 1, cls);
    ts__cuda_flat_free(&f);
  }
  ts_attn_plan_destroy(pl);
  return st;
}

ts_status ts_attn_cuda_plan_create_gather(ts_attn_cuda_plan **out, const ts_bitmap *mask, int64_t d,
                                          const ts_attn_cuda_costs *costs) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "cuda attn plan: NULL output pointer");
  *out = NULL;
  TS_TRY(need_device());
  size_t limit = 0;
  TS_TRY(smem_limit(&limit));
  ts__cuda_flat f;
  ts_attn_stats stats;
  TS_TRY(ts__cuda_flatten_gather(mask, d, limit, costs, &f, &stats));
  ts_status st = plan_finish_stats(out, &f, &stats, 0, 0);
  ts__cuda_flat_free(&f);
  return st;
}

/* ---- profile ------------------------------------------------------------------------------------ */

/* A synthetic gather plan for class k: n / g units of g rows, each with `nch` masked chunks of CB
 * listed keys (keys 0 .. nch * CB - 1 of the row band, mask words all ones, shared). */
static ts_status synth_plan(ts_attn_cuda_plan **out, int64_t n, int64_t d, int k, int32_t g, int32_t nch) {
  const int32_t rb = ts__cuda_class_rb[k], cb = ts__cuda_class_cb[k], slices = (g + rb - 1) / rb, nv = (rb + 15) / 16;
  const int64_t nunits = n / g, per = (int64_t)nch * slices;
  ts__cuda_flat f;
  memset(&f, 0, sizeof f);
  f.n = n, f.d = d, f.nunits = nunits, f.nchunks = nunits * per, f.nmbits = (int64_t)cb * nv, f.ncols = (int64_t)nch * cb;
  f.units = malloc((size_t)nunits * sizeof *f.units);
  f.chunks = malloc((size_t)f.nchunks * sizeof *f.chunks);
  f.mbits = malloc((size_t)f.nmbits * sizeof *f.mbits);
  f.cols = malloc((size_t)f.ncols * sizeof *f.cols);
  if (!f.units || !f.chunks || !f.mbits || !f.cols) {
    ts__cuda_flat_free(&f);
    return ts_error(TS_ERR_OOM, "cuda profile: synthetic plan");
  }
  for (int64_t i = 0; i < f.nmbits; i++) f.mbits[i] = 0xFFFFu;
  for (int64_t i = 0; i < f.ncols; i++) f.cols[i] = (int32_t)(i % n);
  for (int64_t u = 0; u < nunits; u++) {
    f.units[u] = (ts__cuda_unit){.c0 = u * per, .nchunks = (int32_t)per, .r0 = (int32_t)(u * g), .rows = g, .part = -1};
    int64_t c = u * per;
    for (int32_t p = 0; p < nch; p++)
      for (int32_t s = 0; s < slices; s++)
        f.chunks[c++] = (ts__cuda_chunk){.i0 = s * rb, .nr = rb, .j0 = p * cb, .nc = cb, .nv = nv, .ro = 0, .moff = 0};
  }
  f.cls[k] = (ts__cuda_class_run){.u0 = 0, .nu = nunits, .g = g};
  ts_attn_stats stats;
  memset(&stats, 0, sizeof stats);
  ts_status st = plan_finish_stats(out, &f, &stats, 0, 0);
  ts__cuda_flat_free(&f);
  return st;
}

/* Median over 5 groups of the mean ms of 10 launches (after 2 warm-ups), by CUDA events (device
 * time: the measure engine's clocks are the host's). */
static ts_status time_launches(ts_attn_cuda_plan *p, int bf16, const void *q, const void *k, const void *v, float *o,
                               int64_t batch, int64_t heads, cudaEvent_t e0, cudaEvent_t e1, double *ms) {
  double t[5];
  for (int w = 0; w < 2; w++) TS_TRY(launch(p, bf16, q, k, v, o, batch, heads, NULL));
  for (int r = 0; r < 5; r++) {
    cudaError_t e = cudaEventRecord(e0, 0);
    for (int i = 0; i < 10 && e == cudaSuccess; i++) {
      ts_status st = launch(p, bf16, q, k, v, o, batch, heads, NULL);
      if (st != TS_OK) return st;
    }
    if (e == cudaSuccess) e = cudaEventRecord(e1, 0);
    if (e == cudaSuccess) e = cudaEventSynchronize(e1);
    float f = 0;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&f, e0, e1);
    if (e != cudaSuccess) return cuda_fail(e, "profile timing");
    t[r] = f / 10.0;
  }
  *ms = ts_median(t, 5);
  return TS_OK;
}

ts_status ts_attn_cuda_profile(ts_attn_cuda_costs *out, int64_t d, bool bf16) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "cuda profile: NULL output");
  if (d < 1 || d > 256) return ts_error(TS_ERR_UNSUPPORTED, "cuda profile: head dimension d = %lld is not in [1, 256]", (long long)d);
  TS_TRY(need_device());
  size_t limit = 0;
  TS_TRY(smem_limit(&limit));
  ts_attn_cuda_costs res, *c = &res; /* *out changes only on success */
  ts_attn_cuda_costs_default(c, d); /* classes that do not fit keep the default (never chosen then) */
  c->bf16 = bf16;
  const int64_t n = 2048, batch = 4, heads = 12, lo = 2, hi = 10;
  const size_t cnt = (size_t)(batch * heads * n * d), esz = bf16 ? 2 : 4;
  static const int32_t gk[TS__CUDA_NCLASS] = {16, 32, 32, 64};
  void *q = NULL, *k = NULL, *v = NULL, *o = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  cudaError_t e = cudaMalloc(&q, cnt * esz);
  if (e == cudaSuccess) e = cudaMalloc(&k, cnt * esz);
  if (e == cudaSuccess) e = cudaMalloc(&v, cnt * esz);
  if (e == cudaSuccess) e = cudaMalloc(&o, cnt * 4);
  /* small finite inputs: every bf16 0x3c3c and fp32 0x3c3c3c3c is about 0.0115 */
  if (e == cudaSuccess) e = cudaMemset(q, 0x3c, cnt * esz);
  if (e == cudaSuccess) e = cudaMemset(k, 0x3c, cnt * esz);
  if (e == cudaSuccess) e = cudaMemset(v, 0x3c, cnt * esz);
  if (e == cudaSuccess) e = cudaEventCreate(&e0);
  if (e == cudaSuccess) e = cudaEventCreate(&e1);
  ts_status st = e == cudaSuccess ? TS_OK : cuda_fail(e, "profile buffers");
  for (int cl = 0; cl < TS__CUDA_NCLASS && st == TS_OK; cl++) {
    if (ts__cuda_smem_bytes(gk[cl], ts__cuda_class_rb[cl], ts__cuda_class_cb[cl], d) > limit) continue;
    double t[2];
    const int32_t nch[2] = {(int32_t)lo, (int32_t)hi};
    for (int r = 0; r < 2 && st == TS_OK; r++) {
      ts_attn_cuda_plan *p = NULL;
      st = synth_plan(&p, n, d, cl, gk[cl], nch[r]);
      if (st == TS_OK) st = time_launches(p, bf16, q, k, v, o, batch, heads, e0, e1, &t[r]);
      ts_attn_cuda_plan_destroy(p);
    }
    if (st != TS_OK) break;
    const double units = (double)(n / gk[cl]) * (double)(batch * heads), slices = (double)((gk[cl] + ts__cuda_class_rb[cl] - 1) / ts__cuda_class_rb[cl]);
    double chunk = (t[1] - t[0]) * 1e6 / (units * slices * (double)(hi - lo));
    double unit = t[0] * 1e6 / units - chunk * slices * (double)lo;
    c->chunk_ns[cl] = chunk > 0 ? chunk : 0;
    c->unit_ns[cl] = unit > 0 ? unit : 0;
  }
  if (st == TS_OK) {
    c->measured = true;
    ts_provenance now; /* the core's record of this machine and moment: its date */
    ts_provenance_here(&now, ts_isa_active(), 0);
    memcpy(c->date, now.date, sizeof c->date);
    st = ts_attn_cuda_device_name(c->device, sizeof c->device);
  }
  if (st == TS_OK) *out = res;
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o);
  return st;
}

void ts_attn_cuda_plan_stats(const ts_attn_cuda_plan *p, ts_attn_stats *st) {
  if (!st) return;
  if (!p) memset(st, 0, sizeof *st);
  else *st = p->stats;
}

static ts_status check_exec(const ts_attn_cuda_plan *p, const void *Q, const void *K, const void *V, const float *O,
                            int64_t batch, int64_t heads, int64_t n, int64_t d) {
  if (!p) { /* a plan exists only where a device does: no device check on the hot path */
    TS_TRY(need_device());
    return ts_error(TS_ERR_INVALID_ARG, "cuda attn execute: NULL plan");
  }
  if (n != p->dev.n || d != p->dev.d)
    return ts_error(TS_ERR_SHAPE, "cuda attn execute: n = %lld, d = %lld but the plan is for n = %lld, d = %lld", (long long)n,
                    (long long)d, (long long)p->dev.n, (long long)p->dev.d);
  if (batch < 0 || batch > 65535 || heads < 0 || heads > 65535)
    return ts_error(TS_ERR_INVALID_ARG, "cuda attn execute: batch = %lld, heads = %lld: each must be in [0, 65535]",
                    (long long)batch, (long long)heads);
  if (batch && heads && (!Q || !K || !V || !O)) return ts_error(TS_ERR_INVALID_ARG, "cuda attn execute: NULL Q, K, V or O");
  return TS_OK;
}

static ts_status launch(ts_attn_cuda_plan *p, int bf16, const void *Q, const void *K, const void *V, float *O, int64_t batch,
                        int64_t heads, void *stream) {
  if (batch == 0 || heads == 0) return TS_OK;
  if (p->dev.nsplits) { /* the split parts' workspace for this batch x heads */
    size_t need;
    if (!ts_mul_size((size_t)(batch * heads) * (size_t)p->dev.nparts, (size_t)TS__CUDA_SLOT(p->dev.d) * sizeof(float), &need))
      return ts_error(TS_ERR_OVERFLOW, "cuda attn execute: split workspace size");
    if (need > p->ws_bytes) {
      cudaFree(p->ws);
      p->ws = NULL, p->ws_bytes = 0, p->dev.ws = NULL;
      cudaError_t ce = cudaMalloc(&p->ws, need);
      if (ce != cudaSuccess) return cuda_fail(ce, "cudaMalloc of the split workspace");
      p->ws_bytes = need;
    }
    p->dev.ws = p->ws;
  }
  int e = p->dev.fixed ? ts__cuda_launch_fixed(&p->dev, bf16, Q, K, V, O, batch, heads, stream)
                       : ts__cuda_launch_vartile(&p->dev, bf16, Q, K, V, O, batch, heads, stream);
  return e == 0 ? TS_OK : cuda_fail((cudaError_t)e, p->dev.fixed ? "fixed-tile attention launch" : "variable-tile attention launch");
}

ts_status ts_attn_cuda_execute(ts_attn_cuda_plan *p, const float *Q, const float *K, const float *V, float *O, int64_t batch,
                               int64_t heads, int64_t n, int64_t d, void *stream) {
  TS_TRY(check_exec(p, Q, K, V, O, batch, heads, n, d));
  return launch(p, 0, Q, K, V, O, batch, heads, stream);
}

ts_status ts_attn_cuda_execute_bf16(ts_attn_cuda_plan *p, const uint16_t *Q, const uint16_t *K, const uint16_t *V, float *O,
                                    int64_t batch, int64_t heads, int64_t n, int64_t d, void *stream) {
  TS_TRY(check_exec(p, Q, K, V, O, batch, heads, n, d));
  return launch(p, 1, Q, K, V, O, batch, heads, stream);
}

/* Copies Q, K, V (elem bytes each) in, runs, copies O out. */
static ts_status exec_host(ts_attn_cuda_plan *p, int bf16, const void *Q, const void *K, const void *V, float *O, int64_t batch,
                           int64_t heads, int64_t n, int64_t d) {
  TS_TRY(check_exec(p, Q, K, V, O, batch, heads, n, d));
  if (batch == 0 || heads == 0) return TS_OK;
  size_t cnt, in_bytes, out_bytes;
  if (!ts_mul_size((size_t)(batch * heads), (size_t)(n * d), &cnt) || !ts_mul_size(cnt, bf16 ? 2 : 4, &in_bytes) ||
      !ts_mul_size(cnt, 4, &out_bytes))
    return ts_error(TS_ERR_OVERFLOW, "cuda attn execute: %lld x %lld x %lld x %lld elements", (long long)batch,
                    (long long)heads, (long long)n, (long long)d);
  void *dq = NULL, *dk = NULL, *dv = NULL, *dO = NULL;
  ts_status st = TS_OK;
  cudaError_t e = cudaMalloc(&dq, in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dk, in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dv, in_bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dO, out_bytes);
  if (e != cudaSuccess) st = cuda_fail(e, "cudaMalloc of Q, K, V, O");
  if (st == TS_OK && ((e = cudaMemcpy(dq, Q, in_bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
                      (e = cudaMemcpy(dk, K, in_bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
                      (e = cudaMemcpy(dv, V, in_bytes, cudaMemcpyHostToDevice)) != cudaSuccess))
    st = cuda_fail(e, "copy of Q, K, V to the device");
  if (st == TS_OK) st = launch(p, bf16, dq, dk, dv, dO, batch, heads, NULL);
  if (st == TS_OK && (e = cudaMemcpy(O, dO, out_bytes, cudaMemcpyDeviceToHost)) != cudaSuccess)
    st = cuda_fail(e, "attention kernel or copy of O to the host");
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dO);
  return st;
}

ts_status ts_attn_cuda_execute_host(ts_attn_cuda_plan *p, const float *Q, const float *K, const float *V, float *O,
                                    int64_t batch, int64_t heads, int64_t n, int64_t d) {
  return exec_host(p, 0, Q, K, V, O, batch, heads, n, d);
}

ts_status ts_attn_cuda_execute_host_bf16(ts_attn_cuda_plan *p, const uint16_t *Q, const uint16_t *K, const uint16_t *V,
                                         float *O, int64_t batch, int64_t heads, int64_t n, int64_t d) {
  return exec_host(p, 1, Q, K, V, O, batch, heads, n, d);
}

ts_status ts_attn_cuda_malloc(void **dptr, size_t bytes) {
  if (!dptr) return ts_error(TS_ERR_INVALID_ARG, "cuda malloc: NULL output pointer");
  *dptr = NULL;
  TS_TRY(need_device());
  cudaError_t e = cudaMalloc(dptr, bytes ? bytes : 16);
  if (e != cudaSuccess) {
    *dptr = NULL;
    return cuda_fail(e, "cudaMalloc");
  }
  return TS_OK;
}

void ts_attn_cuda_free(void *dptr) {
  if (dptr) cudaFree(dptr);
}

static ts_status copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, const char *what) {
  TS_TRY(need_device());
  if (bytes == 0) return TS_OK;
  if (!dst || !src) return ts_error(TS_ERR_INVALID_ARG, "cuda %s: NULL pointer", what);
  cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
  return e == cudaSuccess ? TS_OK : cuda_fail(e, what);
}

ts_status ts_attn_cuda_to_device(void *dst, const void *src, size_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyHostToDevice, "copy to the device");
}

ts_status ts_attn_cuda_to_host(void *dst, const void *src, size_t bytes) {
  return copy(dst, src, bytes, cudaMemcpyDeviceToHost, "copy to the host");
}

ts_status ts_attn_cuda_synchronize(void) {
  TS_TRY(need_device());
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? TS_OK : cuda_fail(e, "cudaDeviceSynchronize");
}

/* ts_attn_cuda_costs_get through the artifact store: kept costs are used when they were measured on
 * this device for this (d, dtype). */
typedef struct costs_ctx {
  ts_attn_cuda_costs *c;
  int64_t d;
  bool bf16;
  const char *dev;
} costs_ctx;

static ts_status costs_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  (void)prov;
  costs_ctx *x = ctx;
  ts_attn_cuda_costs f;
  TS_TRY(ts__cuda_costs_from_json(data, "cached cuda costs", &f));
  if (!f.measured || f.d != x->d || f.bf16 != x->bf16 || strcmp(f.device, x->dev) != 0)
    return ts_error(TS_ERR_NOT_FOUND, "cuda costs: made for another device or request");
  *x->c = f;
  return TS_OK;
}

static ts_status costs_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  costs_ctx *x = ctx;
  TS_TRY(ts_attn_cuda_profile(x->c, x->d, x->bf16));
  ts__cuda_costs_provenance(x->c, prov);
  if (!(*data = ts__cuda_costs_to_json(x->c))) fprintf(stderr, "tessera: CUDA costs measured but not saved: out of memory\n");
  return TS_OK;
}

static ts_status costs_check(void *ctx, const cJSON *data) {
  (void)ctx;
  ts_attn_cuda_costs f;
  return ts__cuda_costs_from_json(data, "measured cuda costs", &f);
}

ts_status ts_attn_cuda_costs_get(ts_attn_cuda_costs *c, int64_t d, bool bf16, bool *cached) {
  if (!c) return ts_error(TS_ERR_INVALID_ARG, "cuda costs: NULL output");
  if (cached) *cached = false;
  char dev[128], key[64];
  TS_TRY(ts_attn_cuda_device_name(dev, sizeof dev));
  TS_TRY(ts__cuda_costs_key(d, bf16, key, sizeof key));
  const ts__artifact_ops ops = {ts__cuda_costs_kind, costs_accept, costs_compute, costs_check};
  costs_ctx x = {c, d, bf16, dev};
  bool computed = false;
  TS_TRY(ts__artifact_get(&ops, key, &x, &computed));
  if (cached) *cached = !computed;
  return TS_OK;
}
