// pipe_tbb: the pipeline apps (tessera/pipe.h) run as a oneTBB flow graph, a peer the tessera pipe
// runtime is measured against (bench/peers/pipe_peers.py runs both side by side).
//
//   pipe_tbb --app NAME [--size WxH] [--frames N] [--threads T] [--tile WxH|best] [--inflight K]
//            [--repeats R] [--sweep-frames N] [--check] [--jitter NS] [--json]
//
// The command line, the tile sweep, the bit-exact check and the JSON are pipe_omp.c's driver
// (compiled into this program with TS_PIPE_PEER_DRIVER_ONLY); this file is the runner only.
//
// How the graph expresses the pipeline, and why this is the flow graph's best configuration:
//  - The graph is built once per run and reused frame after frame, the way the flow graph is meant
//    to be used for streams (a continue_node resets its count each time it fires): one
//    continue_node per (slot, stage, tile) for K slots (K+1 for a feedback app, whose frame f reads
//    frame f-1's slot), the same slots as the runtime's. Building a graph per frame instead would
//    pay node and edge construction every frame.
//  - One make_edge per dependence: from each producer tile the kernel contract makes the tile read
//    (ts_pipe_input_span via pp_input_tiles), duplicates merged, so a node fires exactly when its
//    inputs are complete. Feedback edges run from slot j's last-stage tiles to slot j+1's readers,
//    so the slots form a ring and frame f+1's first stage starts tile by tile as frame f's last
//    stage finishes, with no barrier between frames.
//  - Per slot, a broadcast_node starts the frame (edges to the tiles with no producer in the frame,
//    so that no tile of a frame runs before its slot is handed to it) and a continue_node fed by
//    the tiles with no consumer in the frame marks it complete. The completion node admits the next
//    frames in order (a frame may start once the frame K before it is complete, as the runtime's
//    inflight), under a mutex taken once per frame; the admitting put happens inside the graph, so
//    the main thread only waits (wait_for_all) and joins the work.
//  - Bodies run as spawned tasks (the default policy), so TBB's scheduler hands a freshly enabled
//    successor to the same thread (task bypass) with stealing for balance; `lightweight` nodes
//    would run every enabled successor inline one after the other and forgo that parallelism.
//  - Threads: tbb::global_control(max_allowed_parallelism, T), the main thread counted among the
//    T; the pool is started before anything is timed.
// The graph's construction is inside the timed run (a user pays it once per stream) and is also
// reported apart as setup_s.
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/version.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "tessera/core.h"

#include "pipe_peer_driver.h"

namespace {

namespace flow = oneapi::tbb::flow;
using cnode = flow::continue_node<flow::continue_msg>;
using bnode = flow::broadcast_node<flow::continue_msg>;

struct state {
  pp_run *r = nullptr;
  int nslots = 0, inflight = 0;
  int64_t frames = 0, next = 0;
  // The frame each slot holds: written when the frame is admitted, before its start message; read
  // by the slot's bodies, which that message (and TBB's spawn) orders after the write.
  std::vector<int64_t> slot_frame;
  std::vector<char> completed;
  std::mutex mu;
  std::deque<bnode> *start = nullptr; // [slot]: owned by the runner, destroyed before its graph
};

// Frame f is complete: keep it for --check, then admit every frame that may now start (in order).
void frame_complete(state *st, int64_t f) {
  pp_frame_done(st->r, f);
  int64_t admit[16]; // at most inflight (<= 16): frame m needs frame m-K complete, and K are in flight
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->completed[(size_t)f] = 1;
    while (st->next < st->frames && n < 16 && st->completed[(size_t)(st->next - st->inflight)]) {
      st->slot_frame[(size_t)(st->next % st->nslots)] = st->next;
      admit[n++] = st->next++;
    }
  }
  // outside the lock: a put may run bodies on this thread
  for (int i = 0; i < n; i++) (*st->start)[(size_t)(admit[i] % st->nslots)].try_put(flow::continue_msg());
}

double tbb_runner(pp_run *r) {
  double t0 = ts_now();
  state st;
  st.r = r;
  st.nslots = pp_slots(r);
  st.inflight = pp_inflight(r);
  st.frames = pp_frames(r);
  st.slot_frame.assign((size_t)st.nslots, -1);
  st.completed.assign((size_t)st.frames, 0);
  const int S = pp_stages(r);
  std::vector<int64_t> base((size_t)S);
  int64_t n = 0;
  for (int s = 0; s < S; s++) {
    base[(size_t)s] = n;
    n += pp_tiles(r, s);
  }

  flow::graph g; // declared before its nodes: destroyed after them
  std::deque<bnode> start; // [slot]
  std::deque<cnode> nodes; // [slot][stage base + tile]
  std::deque<cnode> done;  // [slot]
  st.start = &start;
  for (int j = 0; j < st.nslots; j++) {
    start.emplace_back(g);
    done.emplace_back(g, [&st, j](const flow::continue_msg &) {
      frame_complete(&st, st.slot_frame[(size_t)j]);
      return flow::continue_msg();
    });
    for (int s = 0; s < S; s++)
      for (int64_t t = 0; t < pp_tiles(r, s); t++)
        nodes.emplace_back(g, [&st, j, s, t](const flow::continue_msg &) {
          pp_exec(st.r, st.slot_frame[(size_t)j], s, t);
          return flow::continue_msg();
        });
  }
  // edges: every slot alike, feedback from the slot before in the ring
  std::vector<char> has_succ((size_t)n, 0);
  std::vector<int> fb_preds((size_t)n, 0); // feedback edges into slot 0's nodes, primed for frame 0
  std::vector<int64_t> preds;
  for (int j = 0; j < st.nslots; j++) {
    int jp = (j + st.nslots - 1) % st.nslots;
    std::fill(has_succ.begin(), has_succ.end(), 0);
    for (int s = 0; s < S; s++)
      for (int64_t t = 0; t < pp_tiles(r, s); t++) {
        cnode &c = nodes[(size_t)(j * n + base[(size_t)s] + t)];
        preds.clear();
        int in_frame = 0;
        for (int i = 0; i < pp_inputs(r, s); i++) {
          int p, ax, bx, ay, by;
          int fb = pp_input_tiles(r, s, t, i, &p, &ax, &bx, &ay, &by);
          int nx = pp_tiles_x(r, p);
          for (int y = ay; y <= by; y++)
            for (int x = ax; x <= bx; x++) {
              int64_t k = base[(size_t)p] + (int64_t)y * nx + x;
              // feedback producers are encoded past n so they sort apart from in-frame ones
              preds.push_back(fb ? n + k : k);
            }
        }
        std::sort(preds.begin(), preds.end());
        preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
        for (int64_t k : preds) {
          if (k >= n) {
            flow::make_edge(nodes[(size_t)(jp * n + (k - n))], c);
            if (j == 0) fb_preds[(size_t)(base[(size_t)s] + t)]++;
          } else {
            flow::make_edge(nodes[(size_t)(j * n + k)], c);
            has_succ[(size_t)k] = 1;
            in_frame++;
          }
        }
        if (in_frame == 0) flow::make_edge(start[(size_t)j], c);
      }
    for (int64_t k = 0; k < n; k++)
      if (!has_succ[(size_t)k]) flow::make_edge(nodes[(size_t)(j * n + k)], done[(size_t)j]);
  }
  // frame 0 has no previous frame: its feedback readers get their feedback messages up front
  for (int64_t k = 0; k < n; k++)
    for (int m = 0; m < fb_preds[(size_t)k]; m++) nodes[(size_t)k].try_put(flow::continue_msg());
  double setup = ts_now() - t0;

  // the first frames; st.next is read under the lock only (a completing frame moves it on)
  int64_t first = st.frames < st.inflight ? st.frames : st.inflight;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    for (int64_t f = 0; f < first; f++) st.slot_frame[(size_t)(f % st.nslots)] = f;
    st.next = first;
  }
  for (int64_t f = 0; f < first; f++) start[(size_t)(f % st.nslots)].try_put(flow::continue_msg());
  g.wait_for_all();
  return setup;
}

std::unique_ptr<oneapi::tbb::global_control> g_threads;

void tbb_init(int threads) {
  g_threads = std::make_unique<oneapi::tbb::global_control>(oneapi::tbb::global_control::max_allowed_parallelism,
                                                            (size_t)threads);
  // start the workers now, not inside the first timed run
  std::atomic<int> arrived{0};
  oneapi::tbb::parallel_for(0, threads, [&](int) {
    arrived++;
    double until = ts_now() + 0.01;
    while (arrived.load() < threads && ts_now() < until) {
    }
  });
}

} // namespace

int main(int argc, char **argv) {
  char runtime[96];
  std::snprintf(runtime, sizeof runtime, "oneTBB %d.%d.%d (headers), %s (library)", TBB_VERSION_MAJOR,
                TBB_VERSION_MINOR, TBB_VERSION_PATCH, TBB_runtime_version());
#if defined(__clang__)
  const char *compiler = __VERSION__;
#elif defined(__GNUC__)
  const char *compiler = "g++ " __VERSION__;
#else
  const char *compiler = "unknown";
#endif
  return pp_main(argc, argv, "tbb-flow-graph", runtime, compiler, tbb_init, tbb_runner);
}
