// The pipeline's device executor: persistent thread blocks draining device-side task queues.
//
// Each block loops: thread 0 takes a ready task (its group's queue, else one stolen from another
// group's; or none left: outstanding == 0), broadcasts it through shared memory, every thread of
// the block computes the tile (threads stride over its pixels, x fastest), __syncthreads, then
// thread 0 releases the task's consumers (atomicSub on their counters; a counter reaching 0 makes
// the consumer ready: pushed) and decrements the outstanding-work counter. A block leaves when it
// finds no task and outstanding is 0 (no grid-wide barrier, no co-residency needed: a block only
// claims a slot that a running block has already reserved, so a block that is never scheduled
// holds nothing up).
//
// Memory ordering (the PTX model's fence patterns; CUDA atomics are relaxed):
//   producer: plane stores by all threads -> __syncthreads -> thread 0: __threadfence ->
//             atomicSub(counter) [-> __threadfence -> reserve slot (atomicAdd tail) -> store id]
//   consumer: thread 0: CAS(head) -> load slot (volatile, spin while -1) -> __threadfence ->
//             shared store -> __syncthreads -> all threads read planes.
// The fence before the counter publishes the block's tile; the counter's read-modify-writes chain
// the producers' fences to the last producer, whose fence before its slot store carries them all
// to the consumer's fence. Planes are read with ld.global.cg (L2, not the SM's incoherent L1): a
// 32-byte sector read for a halo can hold neighbouring pixels that another SM writes later.
//
// Included by pipe_cuda.cu (nvcc, --fmad=false) and by tests/cuda/pipe_emu.cpp (TS_PIPE_EMULATE:
// blocks as std::threads, a block's threads as fibers switched at __syncthreads, atomics as
// __atomic builtins, the hooks below defined there).
//
// The stage kernels are the C kernels of src/pipe/app_heat.c, app_life.c and app_edge.c, pixel by
// pixel with the same arithmetic in the same order (clamped reads everywhere: the C kernels'
// interior fast paths read the same pixels), so results are bit-identical to them and to
// ts_pipe_app_reference. The helpers of src/pipe/pipe_apps_internal.h (hash, scene) are host-only
// static functions there; their copies here are checked by the same bit-identity tests.
#ifndef TS_CUDA_PIPE_EXEC_CUH
#define TS_CUDA_PIPE_EXEC_CUH

#include <stdint.h>

#include "cuda/pipe_cuda_internal.h"

#define TS_PD_DEV __device__ __forceinline__  // the emulation defines both words away

#ifndef TS_PIPE_EMULATE
#include <cuda_runtime.h>
// planes: through L2 only (see above)
#define TS_PD_LD(p) __ldcg(p)
#define TS_PD_JITTER(where) ((void)0)
TS_PD_DEV int32_t ts_pd_load(const int32_t *p) { return *(const volatile int32_t *)p; }
TS_PD_DEV void ts_pd_store(int32_t *p, int32_t v) { *(volatile int32_t *)p = v; }
TS_PD_DEV uint64_t ts_pd_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
TS_PD_DEV void ts_pd_pause(unsigned ns) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
  __nanosleep(ns);
#else
  (void)ns;  // no sleep before Volta: spin
#endif
}
#endif

namespace ts_pd {

// ---- helpers of src/pipe/pipe_apps_internal.h ------------------------------------------------

TS_PD_DEV int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

TS_PD_DEV uint32_t hash3(uint32_t x, uint32_t y, uint32_t z) {
  uint32_t h = (x * 0x8da6b343u) ^ (y * 0xd8163841u) ^ (z * 0xcb1ab31fu);
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

TS_PD_DEV int fmod20(int64_t f) {
  int64_t r = f % (1 << 20);
  return (int)(r < 0 ? r + (1 << 20) : r);
}

TS_PD_DEV int tri(int t, int p) {
  int v = (int)((unsigned)t & (unsigned)(p - 1));
  return v < p / 2 ? v : p - v;
}

TS_PD_DEV int in_disc(int x, int y, int cx, int cy, int r, int w, int h) {
  int dx = x - cx, dy = y - cy;
  if (dx < 0) dx = -dx;
  if (dy < 0) dy = -dy;
  if (dx > w - dx) dx = w - dx;
  if (dy > h - dy) dy = h - dy;
  if (dx > r || dy > r) return 0;
  return dx * dx + dy * dy <= r * r;
}

struct scene {
  int w, h, fm, r;
  int cx[3], cy[3];
  uint32_t seed;
};

TS_PD_DEV void scene_init(scene *s, int w, int h, int64_t frame, uint32_t seed) {
  s->w = w;
  s->h = h;
  s->fm = fmod20(frame);
  s->seed = seed;
  int m = w < h ? w : h;
  s->r = m / 6 > 1 ? m / 6 : 1;
  int64_t fw = frame % w, fh = frame % h;  // the frame modulo the torus: continuous across 0
  if (fw < 0) fw += w;
  if (fh < 0) fh += h;
  for (int k = 0; k < 3; k++) {
    s->cx[k] = (int)(((int64_t)w * (k + 1) / 4 + fw * (k + 1)) % w);
    s->cy[k] = (int)(((int64_t)h * (2 * k + 1) / 6 + fh * (2 - k)) % h);
  }
}

// ---- a stage's view of its planes ------------------------------------------------------------

struct plane {
  const float *p;  // NULL: none (a feedback input on the run's first frame)
  int w, h;
  int64_t sz;  // w * h: between channels
};

// Element (ch, clamp(y), clamp(x)) of an input plane.
TS_PD_DEV float at(const plane &b, int ch, int x, int y) {
  return TS_PD_LD(b.p + ch * b.sz + (int64_t)clampi(y, 0, b.h - 1) * b.w + clampi(x, 0, b.w - 1));
}

// ---- heat (app_heat.c) -----------------------------------------------------------------------

struct heat_src {
  int cx[3], cy[3], rs;
  float val[3];
};

TS_PD_DEV void heat_sources(heat_src *s, int w, int h) {
  int m = w < h ? w : h;
  s->rs = m / 16;
  s->cx[0] = w / 4, s->cy[0] = h / 3, s->val[0] = 1.0f;
  s->cx[1] = 3 * w / 4, s->cy[1] = 2 * h / 3, s->val[1] = 0.8f;
  s->cx[2] = w / 2, s->cy[2] = h / 2, s->val[2] = 0.0f;
}

TS_PD_DEV float heat_initial(uint32_t seed, int x, int y) {
  return (hash3((uint32_t)(x >> 3), (uint32_t)(y >> 3), seed) & 7) == 0 ? 1.0f : 0.0f;
}

TS_PD_DEV float sweep_px(float c, float n, float s, float w, float e) {
  return c + 0.2f * (((n + s) + (w + e)) - 4.0f * c);
}

// u' = sweep, then the sources hold their values (later ones win), as k_sweep + hold_sources
TS_PD_DEV float heat_px(const plane &in, const heat_src &src, uint32_t seed, int x, int y, int w, int h) {
  float v;
  if (!in.p) {
    int ym = clampi(y - 1, 0, h - 1), yp = clampi(y + 1, 0, h - 1);
    int xm = clampi(x - 1, 0, w - 1), xp = clampi(x + 1, 0, w - 1);
    v = sweep_px(heat_initial(seed, x, y), heat_initial(seed, x, ym), heat_initial(seed, x, yp),
                 heat_initial(seed, xm, y), heat_initial(seed, xp, y));
  } else {
    v = sweep_px(at(in, 0, x, y), at(in, 0, x, y - 1), at(in, 0, x, y + 1), at(in, 0, x - 1, y), at(in, 0, x + 1, y));
  }
  for (int k = 0; k < 3; k++)
    if (y >= src.cy[k] - src.rs && y <= src.cy[k] + src.rs && x >= src.cx[k] - src.rs && x <= src.cx[k] + src.rs)
      v = src.val[k];
  return v;
}

// ---- life (app_life.c) -----------------------------------------------------------------------

TS_PD_DEV float life_initial(uint32_t seed, int x, int y) {
  return (hash3((uint32_t)x, (uint32_t)y, seed ^ 0x11feu) & 7) < 3 ? 1.0f : 0.0f;
}

TS_PD_DEV float life_px(float c, float nw, float n, float ne, float w, float e, float sw, float s, float se) {
  float cnt = ((((((nw + n) + ne) + w) + e) + sw) + s) + se;
  return (cnt == 3.0f || (cnt == 2.0f && c != 0.0f)) ? 1.0f : 0.0f;
}

TS_PD_DEV float life_at(const plane &in, uint32_t seed, int x, int y, int w, int h) {
  // the first frame's board, made where it is read (clamped like a plane read)
  return in.p ? at(in, 0, x, y) : life_initial(seed, clampi(x, 0, w - 1), clampi(y, 0, h - 1));
}

TS_PD_DEV float life_gen(const plane &in, uint32_t seed, int x, int y, int w, int h) {
  return life_px(
      life_at(in, seed, x, y, w, h), life_at(in, seed, x - 1, y - 1, w, h), life_at(in, seed, x, y - 1, w, h),
      life_at(in, seed, x + 1, y - 1, w, h), life_at(in, seed, x - 1, y, w, h), life_at(in, seed, x + 1, y, w, h),
      life_at(in, seed, x - 1, y + 1, w, h), life_at(in, seed, x, y + 1, w, h), life_at(in, seed, x + 1, y + 1, w, h));
}

// ---- edge (app_edge.c) -----------------------------------------------------------------------

#define TS_PD_TAN22 0.41421356f
#define TS_PD_HI 0.4f
#define TS_PD_LO 0.15f

TS_PD_DEV int grey(const scene &s, int x, int y) {
  int v = tri(x + 2 * y + 3 * s.fm, 512) >> 2;
  if (in_disc(x, y, s.cx[0], s.cy[0], s.r, s.w, s.h)) v += 120;
  if (in_disc(x, y, s.cx[1], s.cy[1], s.r, s.w, s.h)) v += 80;
  int dx = x - s.cx[2], dy = y - s.cy[2];
  if (dx < 0) dx = -dx;
  if (dy < 0) dy = -dy;
  if (dx > s.w - dx) dx = s.w - dx;
  if (dy > s.h - dy) dy = s.h - dy;
  if (dx <= s.r && 2 * dy <= s.r) v += 100;
  v += (int)(hash3((uint32_t)x, (uint32_t)y, s.seed) & 15);
  return v > 255 ? 255 : v;
}

TS_PD_DEV float blur_row(const plane &b, int y, int x) {
  return (((0.0625f * at(b, 0, x - 2, y) + 0.25f * at(b, 0, x - 1, y)) + 0.375f * at(b, 0, x, y)) +
          0.25f * at(b, 0, x + 1, y)) +
         0.0625f * at(b, 0, x + 2, y);
}

TS_PD_DEV float blur_px(const plane &b, int x, int y) {
  return (((0.0625f * blur_row(b, y - 2, x) + 0.25f * blur_row(b, y - 1, x)) + 0.375f * blur_row(b, y, x)) +
          0.25f * blur_row(b, y + 1, x)) +
         0.0625f * blur_row(b, y + 2, x);
}

TS_PD_DEV void sobel_px(const plane &b, int x, int y, float *mag, float *dir) {
  float gx = ((at(b, 0, x + 1, y - 1) + 2.0f * at(b, 0, x + 1, y)) + at(b, 0, x + 1, y + 1)) -
             ((at(b, 0, x - 1, y - 1) + 2.0f * at(b, 0, x - 1, y)) + at(b, 0, x - 1, y + 1));
  float gy = ((at(b, 0, x - 1, y + 1) + 2.0f * at(b, 0, x, y + 1)) + at(b, 0, x + 1, y + 1)) -
             ((at(b, 0, x - 1, y - 1) + 2.0f * at(b, 0, x, y - 1)) + at(b, 0, x + 1, y - 1));
  float ax = fabsf(gx), ay = fabsf(gy);
  int same = (gx > 0.0f) == (gy > 0.0f);
  float d = same ? 1.0f : 3.0f;
  d = ax <= TS_PD_TAN22 * ay ? 2.0f : d;
  d = ay <= TS_PD_TAN22 * ax ? 0.0f : d;
  *mag = ax + ay;
  *dir = d;
}

TS_PD_DEV float nms_px(const plane &b, int x, int y) {
  float m = at(b, 0, x, y), w = at(b, 0, x - 1, y), e = at(b, 0, x + 1, y);
  float nw = at(b, 0, x - 1, y - 1), n = at(b, 0, x, y - 1), ne = at(b, 0, x + 1, y - 1);
  float sw = at(b, 0, x - 1, y + 1), s = at(b, 0, x, y + 1), se = at(b, 0, x + 1, y + 1);
  float d = at(b, 1, x, y);
  float n1 = d == 0.0f ? w : (d == 1.0f ? nw : (d == 2.0f ? n : ne));
  float n2 = d == 0.0f ? e : (d == 1.0f ? se : (d == 2.0f ? s : sw));
  return ((m >= n1) & (m >= n2)) ? m : 0.0f;
}

TS_PD_DEV float fmax_(float a, float b) { return a > b ? a : b; }

TS_PD_DEV float thr_px(const plane &b, int x, int y) {
  float c = at(b, 0, x, y);
  float nb = fmax_(
      fmax_(fmax_(at(b, 0, x - 1, y - 1), at(b, 0, x, y - 1)), fmax_(at(b, 0, x + 1, y - 1), at(b, 0, x - 1, y))),
      fmax_(fmax_(at(b, 0, x + 1, y), at(b, 0, x - 1, y + 1)), fmax_(at(b, 0, x, y + 1), at(b, 0, x + 1, y + 1))));
  return (c >= TS_PD_HI || (c >= TS_PD_LO && nb >= TS_PD_HI)) ? 1.0f : 0.0f;
}

// ---- one task: every thread of the block ------------------------------------------------------

TS_PD_DEV void run_task(const ts__pd_exec *E, const ts__pd_task &t) {
  const int s = t.stage;
  float *out = E->planes + t.frame * E->fstride + E->poff[s];
  const int ow = E->pw[s], oh = E->ph[s];
  const int64_t osz = (int64_t)ow * oh;
  plane in = {nullptr, 0, 0, 0};
  const int from = E->from[s];
  if (from != TS__PD_FROM_NONE) {
    const int j = from == TS__PD_FROM_FEEDBACK ? E->nstages - 1 : from;
    if (from >= 0)
      in.p = E->planes + t.frame * E->fstride + E->poff[j];
    else if (t.frame > 0)
      in.p = E->planes + (t.frame - 1) * E->fstride + E->poff[j];
    else
      in.p = E->prev;
    in.w = E->pw[j], in.h = E->ph[j], in.sz = (int64_t)in.w * in.h;
  }
  const int tw = t.x1 - t.x0, npx = tw * (t.y1 - t.y0);
  const int64_t frame = E->frame0 + t.frame;
  switch (E->app) {
    case TS__PD_HEAT: {
      heat_src src;
      heat_sources(&src, E->w, E->h);
      for (int i = threadIdx.x; i < npx; i += blockDim.x) {
        int x = t.x0 + i % tw, y = t.y0 + i / tw;
        out[(int64_t)y * ow + x] = heat_px(in, src, E->seed, x, y, ow, oh);
      }
      break;
    }
    case TS__PD_LIFE:
      for (int i = threadIdx.x; i < npx; i += blockDim.x) {
        int x = t.x0 + i % tw, y = t.y0 + i / tw;
        out[(int64_t)y * ow + x] = life_gen(in, E->seed, x, y, ow, oh);
      }
      break;
    case TS__PD_EDGE: {
      scene sc;
      scene_init(&sc, E->w, E->h, frame, E->seed);  // the source's; a few integer ops for the others
      for (int i = threadIdx.x; i < npx; i += blockDim.x) {
        int x = t.x0 + i % tw, y = t.y0 + i / tw;
        int64_t o = (int64_t)y * ow + x;
        switch (s) {
          case 0: out[o] = (float)grey(sc, x, y) * (1.0f / 256); break;
          case 1: out[o] = blur_px(in, x, y); break;
          case 2: sobel_px(in, x, y, &out[o], &out[osz + o]); break;
          case 3: out[o] = nms_px(in, x, y); break;
          default: out[o] = thr_px(in, x, y); break;
        }
      }
      break;
    }
    default: break;
  }
}

// ---- queues (thread 0) -------------------------------------------------------------------------

// One task from queue k, or -1 when it holds none; lost CAS races count in *contended.
TS_PD_DEV int32_t q_pop(const ts__pd_exec *E, int k, int64_t *contended) {
  ts__pd_queue *Q = &E->q[k];
  for (;;) {
    const int32_t h = ts_pd_load(&Q->head), t = ts_pd_load(&Q->tail);
    if (h >= t) return -1;
    if (atomicCAS(&Q->head, h, h + 1) == h) {
      const int32_t *slot = E->slots + (int64_t)k * E->ntasks + h;
      int32_t v;
      while ((v = ts_pd_load(slot)) < 0) ts_pd_pause(32);  // reserved by a running pusher, not yet stored
      return v;
    }
    ++*contended;
  }
}

// n ready tasks into queue k: one reservation, then the stores.
TS_PD_DEV void q_push(const ts__pd_exec *E, int k, const int32_t *ids, int n) {
  ts__pd_queue *Q = &E->q[k];
  const int32_t pos = atomicAdd(&Q->tail, n);
  TS_PD_JITTER(1);  // a popper may now wait on a reserved slot
  int32_t *slot = E->slots + (int64_t)k * E->ntasks + pos;
  for (int i = 0; i < n; i++) ts_pd_store(slot + i, ids[i]);
}

// A ready task for a block of group `home`, or -1 when the launch is over (or stalled).
TS_PD_DEV int32_t acquire(const ts__pd_exec *E, int home, ts__pd_bstat *st) {
  const uint64_t t0 = ts_pd_now();
  unsigned backoff = 32;
  for (;;) {
    int32_t id = q_pop(E, home, &st->contended);
    if (id < 0 && E->qmode == TS__PD_Q_SHARDED && E->nq > 1) {
      const int rot = (int)(st->steal_attempts % E->nq);  // victims in turn, not always the same first
      for (int i = 0; i < E->nq && id < 0; i++) {
        const int k = (rot + i) % E->nq;
        if (k == home) continue;
        st->steal_attempts++;
        id = q_pop(E, k, &st->contended);
        if (id >= 0) st->steals++;
      }
    }
    const uint64_t now = ts_pd_now();
    if (id >= 0) {
      __threadfence();  // acquire: the producers' planes before this block's reads
      st->idle_ns += (int64_t)(now - t0);
      return id;
    }
    if (ts_pd_load(E->outstanding) == 0 || ts_pd_load(E->error)) {
      st->idle_ns += (int64_t)(now - t0);
      return -1;
    }
    if ((int64_t)(now - t0) > E->stall_ns) {
      atomicExch(E->error, 1);
      st->idle_ns += (int64_t)(now - t0);
      return -1;
    }
    ts_pd_pause(backoff);
    backoff = backoff < 1024 ? 2 * backoff : 1024;
  }
}

// After the block computed task id: count its consumers down, push those that became ready, and
// count the task off its frame and the launch.
TS_PD_DEV void release(const ts__pd_exec *E, int32_t id, int frame, int home) {
  __threadfence();  // release: this block's plane stores (before the barrier) before the counters
  TS_PD_JITTER(2);
  int32_t ready[TS__PD_BATCH];
  int nr = 0;
  const int64_t e1 = E->off[id + 1];
  for (int64_t e = E->off[id]; e < e1; e++) {
    const int32_t c = E->cons[e];
    if (atomicSub(&E->cnt[c], 1) != 1) continue;
    if (E->qmode == TS__PD_Q_GLOBAL) {
      __threadfence();  // the other producers' releases (seen through the counter) before the push
      q_push(E, 0, &c, 1);
    } else {
      ready[nr++] = c;
      if (nr == TS__PD_BATCH) {
        __threadfence();
        q_push(E, home, ready, nr);
        nr = 0;
      }
    }
  }
  if (nr > 0) {
    __threadfence();
    q_push(E, home, ready, nr);
  }
  if (atomicSub(&E->frame_left[frame], 1) == 1) E->frame_t1[frame] = ts_pd_now();
  atomicSub(E->outstanding, 1);
}

// The whole life of one persistent block; sh_task: one int of the block's shared memory.
TS_PD_DEV void block_main(const ts__pd_exec *E, int32_t *sh_task) {
  const bool lead = threadIdx.x == 0;
  const int home = E->qmode == TS__PD_Q_SHARDED ? (int)(blockIdx.x % (unsigned)E->nq) : 0;
  ts__pd_bstat st = {0, 0, 0, 0, 0, 0};
  uint64_t tb = 0;
  for (;;) {
    if (lead) {
      const int32_t id = acquire(E, home, &st);
      *sh_task = id;
      if (id >= 0) {
        tb = ts_pd_now();
        atomicAdd(&E->runs[id], 1);
        atomicMin((unsigned long long *)&E->frame_t0[E->task[id].frame], (unsigned long long)tb);
        TS_PD_JITTER(0);
      }
    }
    __syncthreads();
    const int32_t id = *sh_task;
    if (id < 0) break;
    const ts__pd_task t = E->task[id];
    run_task(E, t);
    __syncthreads();  // the tile is written; *sh_task may be overwritten after this
    if (lead) {
      release(E, id, t.frame, home);
      st.tasks++;
      st.busy_ns += (int64_t)(ts_pd_now() - tb);
    }
  }
  if (lead) E->bstat[blockIdx.x] = st;
}

}  // namespace ts_pd

#endif
