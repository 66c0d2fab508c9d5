#!/usr/bin/env python3
"""tessera plan3d's cost model against real multi-process training steps (PyTorch CPU,
torch.distributed gloo), on a GPT-2-style decoder (bench/peers/plan3d_gpt.py).

Two "device types" share this CPU, each "GPU" being one process with one thread (so two
processes fill two cores): `fast` is torch as installed; `slow` is set by --knob (default `isa`:
the same fp32 arithmetic with MKL held to its SSE2-compatible code path, MKL_CBWR=COMPATIBLE, and
ATen / oneDNN held to their baseline ISA -- an older CPU generation; `fp64`: every stage computes
in float64; `bf16`: torch.autocast bfloat16, which on a CPU without AVX512-BF16 is far slower).
The ratio is measured and reported.

Steps, all written under --out:
1. profile: per device type (a process with its environment, 1 thread), per micro-batch size:
   fwd/bwd ms of the embedding, of one block (median over the L blocks, each timed inside the
   stack), of the head (final LN + tied LM head + loss), and Adam's step ms per million
   parameters -> profile.json (profile_raw.json keeps per-layer medians).
2. comm: gloo between 2 processes: ping-pong send/recv (one way = round trip / 2) and all_reduce
   from 1 KiB to 32 MiB; t = alpha + bytes / beta fitted to the ping-pong by least squares on the
   relative residuals; the ring model 2(d-1)/d bytes/beta + 2(d-1) alpha compared with the
   measured all_reduce -> comm.json and the link of the cluster files.
3. model.json, cluster-{fs,ff,ss,f,s}.json (fast+slow, 2x fast, 2x slow, 1 fast, 1 slow; a node
   is one process = one GPU).
4. correctness: one step of a pipeline plan (pp=2, heterogeneous, uneven split, tied embedding)
   and of a data-parallel plan (dp=2, heterogeneous) against the same step in one process (the
   plan's stages run one after the other on the whole batch): loss, every gradient and every
   parameter after Adam's step, within the tolerances derived at GTOL below.
5. plans: `tessera plan3d search --top K` on every cluster plus `tessera plan3d estimate` for a
   fixed list of other configurations (dp, pp, mbs, node order, uneven and deliberately bad
   splits); each is run by the executor: world = dp * pp worker processes (gloo over
   127.0.0.1), a hand-written 1F1B schedule over isend/irecv (warm-up pp-s-1 forwards on stage
   s, one forward one backward, cool-down), gradients accumulated into one flat buffer per
   stage, all_reduce over the dp replicas of the stage, the tied-embedding gradient summed
   between the first and the last stage, Adam. --warmup untimed steps, then --steps timed ones:
   barrier, step, barrier, rank 0's wall clock.
6. gloo.json (every plan: config, planner estimate, the peer's own estimate, measured median /
   q1 / q3, error % = (est - meas) / meas), estimate_vs_measured.svg, a table and the summary:
   mean |error|, worst plan, and per cluster whether the planner's top-1 is the measured fastest
   or within 5% of it.

Where the error comes from: every rank times its forward and backward compute, the rest of its
pipeline time (p2p, waiting for the neighbour stage), the all-reduces and Adam; `comp` = measured
compute / the profile's for the same work, and `replay` = the peer's cost model fed those
measured compute and update times instead of the profile's (what is left of the error then is
the schedule / communication model's own). CPU time, minor page faults, context switches and
gloo's thread CPU per step are kept per rank in gloo.json.

Noise: every run records the CPU time other processes took meanwhile (/proc/stat less this
script's own; > 5% of the machine flags the run NOT QUIET), and two sentinel plans (1 process,
fast mbs 4 and slow mbs 2) run before, halfway through and after the plans: their spread is the
machine's drift during the run. --rounds R runs the list R times (odd rounds reversed) and
pools the steps. --corun adds a second profile taken with a second process of the same type
training beside the one measured, and prices every plan with it too.

--estimator peer replaces the planner by the peer's own Python cost model (plan3d_gpt.py:
peer_estimate, same model class: 1F1B event simulation, ring all-reduce, Adam update) for a run
without tessera; its results say so. It is never the default.

Usage: plan3d_gloo.py [--tessera BIN] [--out DIR] [--knob isa|fp64|bf16] [--mbs 1,2,4,8,16]
                      [--warmup 2] [--steps 5] [--rounds 1] [--profile-repeats 5] [--top 3] [--quick]
                      [--corun] [--dry-run] [--skip-check] [--no-sentinel] [--estimator planner|peer]
                      (development: [--only profile|comm|check] [--reuse DIR])
BIN defaults to $TESSERA_BIN, else build-m/tessera; DIR to results/<today>-plan3d-gloo.
torch/NumPy come from the current interpreter when it has them, else from bench/peers/.venv-torch,
created on first use (python3 -m venv; pip install -r bench/peers/requirements-torch.txt).
Exit status: 0 ok, 1 a correctness check or a run failed, 2 bad usage / planner unavailable."""
import argparse
import datetime
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import peerenv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(HERE, ".venv-torch")
REQS = os.path.join(HERE, "requirements-torch.txt")
PROG = "plan3d_gloo"
LR = 1e-3
# Gradient tolerance of the correctness check, per tensor, as a fraction of its max |grad|: both
# sides compute in fp32 with different summation orders (micro-batches accumulated vs one batch;
# the slow device's MKL path; all_reduce sums). A GEMM over K terms is off by up to ~K u relative
# (u = 2^-24, K <= max(ffn, global batch * seq) = 2048: 1.2e-4), compounded over <= L + 2 parts
# in the worst case: ~1.2e-3; GTOL = 2e-3 leaves a margin. Parameters after Adam's first step
# (p - lr g / (|g| + eps)): an error delta <= GTOL max|g| in g moves the update by at most
# lr * min(2, 4 delta / (|g| + eps)) (when delta < |g|/2: |d/dg g/(|g|+eps)| <= 4 / (|g| + eps)),
# plus the rounding of p - update on each side, 4 u |p|. The loss: 1e-5 relative.
GTOL = 2e-3
LOSS_RTOL = 1e-5
U = 2.0 ** -24
# A run during which other processes took more than this fraction of the machine's CPU time is
# flagged (the timings of a shared machine are not the cost model's error).
NOISY = 0.05
STARTUP_S = 4.0  # start of a run's processes (interpreter, torch, model, gloo), for the time forecast


def ensure_torch():
    peerenv.ensure(PROG, ["numpy", "torch"], VENV, REQS, " (torch is large: this takes a while once)")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quantiles(xs):
    xs = sorted(xs)

    def q(f):
        k = (len(xs) - 1) * f
        i = int(k)
        j = min(i + 1, len(xs) - 1)
        return xs[i] + (xs[j] - xs[i]) * (k - i)
    return q(0.25), q(0.5), q(0.75)


def cpu_info():
    model, flags = "unknown", []
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = [f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "fma", "amx"))]
    except OSError:
        pass
    return {"model_name": model, "simd_flags": flags, "logical_cpus": os.cpu_count()}


# ----------------------------------------------------------------------------------------------
# Worker processes (re-entered as `plan3d_gloo.py _worker SPEC RANK` etc.).

def cpu_busy_s():
    """Busy CPU seconds of the whole machine so far (/proc/stat: all but idle and iowait)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return float("nan")


def own_cpu_s():
    c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime


def launch(kind, spec, world, envs, outdir, tag, timeout=900, stats=None):
    """Runs `world` processes of `kind` on `spec` (rank r with extra environment envs[r]); returns
    the list of their result dicts, or raises RuntimeError with the failing rank's stderr tail.
    stats (a dict) gets wall_s and foreign_cpu_frac: CPU time the machine spent outside this
    script and its workers during the run, as a fraction of wall time x CPUs (0 on a quiet box)."""
    b0, o0, w0 = cpu_busy_s(), own_cpu_s(), time.time()
    logs = os.path.join(outdir, "logs")
    os.makedirs(logs, exist_ok=True)
    spec = dict(spec, port=free_port(), world=world)
    fd, path = tempfile.mkstemp(prefix="plan3d-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    res_paths = [path + ".r%d" % r for r in range(world)]
    procs = []
    try:
        for r in range(world):
            env = dict(os.environ, **envs[r])
            if os.path.isdir("/sys/class/net/lo"):
                env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            errf = open(os.path.join(logs, "%s.rank%d.log" % (tag, r)), "w")
            procs.append((subprocess.Popen([sys.executable, os.path.abspath(__file__), kind, path, str(r)],
                                           env=env, stdout=errf, stderr=subprocess.STDOUT), errf))
        deadline = time.time() + timeout
        failed = None
        while True:
            codes = [p.poll() for p, _ in procs]
            if any(c not in (None, 0) for c in codes):
                failed = next(r for r, c in enumerate(codes) if c not in (None, 0))
                break
            if all(c == 0 for c in codes):
                break
            if time.time() > deadline:
                failed = -1
                break
            time.sleep(0.05)
        if failed is not None:
            for p, _ in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            who = "timeout after %ds" % timeout if failed < 0 else "rank %d exit %d" % (failed, procs[failed][0].returncode)
            tail = ""
            r = max(failed, 0)
            procs[r][1].flush()
            with open(os.path.join(logs, "%s.rank%d.log" % (tag, r))) as f:
                tail = "".join(f.readlines()[-12:])
            raise RuntimeError("%s (%s): %s" % (tag, who, tail.strip()))
        if stats is not None:
            wall = time.time() - w0
            foreign = (cpu_busy_s() - b0) - (own_cpu_s() - o0)
            stats.update(wall_s=wall, foreign_cpu_frac=max(0.0, foreign) / (wall * (os.cpu_count() or 1)))
        return [json.load(open(rp)) for rp in res_paths]
    finally:
        for p, f in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            f.close()
        for rp in res_paths + [path]:
            if os.path.exists(rp):
                os.remove(rp)


def sched_stats():
    """Counters of /proc/self/sched (Linux, the calling thread); {} elsewhere."""
    out = {}
    try:
        with open("/proc/self/sched") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k in ("se.nr_migrations", "nr_switches", "nr_voluntary_switches", "nr_involuntary_switches",
                         "se.statistics.nr_wakeups_affine", "nr_wakeups_affine", "se.statistics.nr_wakeups_migrate",
                         "nr_wakeups_migrate"):
                    out[k.split(".")[-1]] = int(float(v.strip()))
    except (OSError, ValueError):
        pass
    return out


def thread_cpu():
    """{thread id: (name, CPU seconds)} of this process's threads (Linux /proc), {} elsewhere."""
    out = {}
    tck = os.sysconf("SC_CLK_TCK")
    try:
        for tid in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/stat" % tid) as f:
                st = f.read()
            name = st[st.index("(") + 1:st.rindex(")")]
            fields = st[st.rindex(")") + 2:].split()
            out[tid] = (name, (int(fields[11]) + int(fields[12])) / tck)
    except (OSError, ValueError):
        pass
    return out


def worker_init(spec, rank):
    import datetime as dt
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % spec["port"], rank=rank,
                            world_size=spec["world"], timeout=dt.timedelta(seconds=600))
    return torch, dist


def comm_worker(spec, rank):
    """Ping-pong send/recv and all_reduce between 2 ranks, every size in spec["sizes"]."""
    torch, dist = worker_init(spec, rank)
    other = 1 - rank
    out = {"p2p": [], "allreduce": []}
    for n in spec["sizes"]:
        buf = torch.ones(n // 4)
        iters = int(max(8, min(200, 4e8 / n)))
        ts = []
        for it in range(iters + 3):
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, other)
                dist.recv(buf, other)
            else:
                dist.recv(buf, other)
                dist.send(buf, other)
            if it >= 3:
                ts.append((time.perf_counter() - t0) * 1e3 / 2)
        out["p2p"].append({"bytes": n, "ms": statistics.median(ts), "min_ms": min(ts), "iters": iters})
        dist.barrier()
        ts = []
        for it in range(iters + 3):
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            if it >= 3:
                ts.append((time.perf_counter() - t0) * 1e3)
        out["allreduce"].append({"bytes": n, "ms": statistics.median(ts), "min_ms": min(ts), "iters": iters})
        dist.barrier()
    dist.destroy_process_group()
    return out


def profile_worker(spec, rank):
    """Rank 0 profiles; with spec["partner"], rank 1 meanwhile runs training steps of the same
    device type (whole model, mbs 2) until rank 0 is done: the co-run profile."""
    import torch
    torch.set_num_threads(1)
    import plan3d_gpt as G
    cfg = G.Config.from_model_json(spec["model"])
    if rank == 1:
        st = G.Stage(cfg, 0, cfg.layers, True, True, spec["mode"], G.init_full_state(cfg))
        tok, tgt = G.batch(cfg, 0)
        n = 0
        while not os.path.exists(spec["stop"]):
            st(tok[:2], tgt[:2]).backward()
            n += 1
        return {"partner_steps": n}
    if spec.get("partner"):  # let the partner start before timing
        time.sleep(3.0)
    res = G.profile_device(cfg, spec["mode"], spec["mbs"], spec["warmup"], spec["repeats"], LR)
    if spec.get("partner"):
        open(spec["stop"], "w").close()
    res["torch_threads"] = torch.get_num_threads()
    try:
        res["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001
        res["cpu_capability"] = "unknown"
    return res


def train_worker(spec, rank):
    """Runs the plan spec["plan"] on this rank: spec["warmup"] + spec["steps"] training steps
    (spec["check"]: one step, then the parameters and gradients are saved for the comparison)."""
    torch, dist = worker_init(spec, rank)
    import plan3d_gpt as G
    cfg = G.Config.from_model_json(spec["model"])
    plan = spec["plan"]
    stages = plan["stages"]
    pp, dp, mbs = len(stages), plan["dp"], plan["mbs"]
    m = cfg.global_batch // (dp * mbs)
    me = [(s, rank - st["gpus"][0]) for s, st in enumerate(stages) if st["gpus"][0] <= rank < st["gpus"][0] + st["gpus"][1]]
    if len(me) != 1:
        raise SystemExit("rank %d is in %d stages of the plan" % (rank, len(me)))
    s, d = me[0]

    def rank_of(stage, rep):
        return stages[stage]["gpus"][0] + rep

    dp_groups = [dist.new_group([rank_of(t, r) for r in range(dp)]) if dp > 1 else None for t in range(pp)]
    emb_groups = [dist.new_group([rank_of(0, r), rank_of(pp - 1, r)]) if pp > 1 else None for r in range(dp)]
    first, last = s == 0, s == pp - 1
    mode = spec["modes"][rank]
    st = stages[s]
    stage = G.Stage(cfg, st["layers"][0], st["layers"][1], first, last, mode, G.init_full_state(cfg),
                    own_head_copy=last and pp > 1)
    params = list(stage.parameters())
    flat = torch.zeros(sum(p.numel() for p in params))
    off = 0
    for p in params:
        p.grad = flat[off:off + p.numel()].view_as(p)
        off += p.numel()
    ptrs = [p.grad.data_ptr() for p in params]
    opt = torch.optim.Adam(params, lr=LR)
    tied = stage.tied_param()
    prev = rank_of(s - 1, d) if not first else None
    nxt = rank_of(s + 1, d) if not last else None
    shape = (mbs, cfg.seq, cfg.hidden)
    scale = 1.0 / (m * dp)
    B = cfg.global_batch // dp

    def wait_all(reqs):
        for q in reqs:
            q.wait()

    def recv_forward():
        if first:
            return None
        b = torch.empty(shape)
        dist.irecv(b, prev).wait()
        return b

    def send_forward(out):
        if not last:
            dist.isend(out.detach().contiguous(), nxt).wait()

    def recv_backward():
        if last:
            return None
        b = torch.empty(shape)
        dist.irecv(b, nxt).wait()
        return b

    def send_backward(g):
        if not first:
            dist.isend(g.contiguous(), prev).wait()

    def send_forward_recv_backward(out):
        if last:
            return None
        b = torch.empty(shape)
        wait_all([dist.isend(out.detach().contiguous(), nxt), dist.irecv(b, nxt)])
        return b

    def send_backward_recv_forward(g):
        if first:
            return None
        b = torch.empty(shape)
        wait_all([dist.isend(g.contiguous(), prev), dist.irecv(b, prev)])
        return b

    def one_step(step):
        tokens, targets = G.batch(cfg, step)
        tok, tgt = tokens[d * B:(d + 1) * B], targets[d * B:(d + 1) * B]
        losses = []
        busy = [0.0, 0.0]  # seconds in forward, backward compute
        flat.zero_()
        t0 = time.perf_counter()

        def forward(i, inp):
            tf = time.perf_counter()
            sl = slice(i * mbs, (i + 1) * mbs)
            if first:
                out = stage(tok[sl], tgt[sl] if last else None)
            else:
                inp.requires_grad_()
                out = stage(inp, tgt[sl] if last else None)
            if last:
                losses.append(float(out.detach()))
                out = out * scale
            busy[0] += time.perf_counter() - tf
            return out

        def backward(inp, out, g):
            tb = time.perf_counter()
            if last:
                out.backward()
            else:
                out.backward(g)
            busy[1] += time.perf_counter() - tb
            return None if first else inp.grad

        warm = min(pp - s - 1, m)
        rest = m - warm
        saved = []
        for i in range(warm):
            inp = recv_forward()
            out = forward(i, inp)
            send_forward(out)
            saved.append((inp, out))
        inp = recv_forward() if rest > 0 else None
        for i in range(rest):
            out = forward(warm + i, inp)
            g = send_forward_recv_backward(out)
            saved.append((inp, out))
            a, o = saved.pop(0)
            gin = backward(a, o, g)
            if i == rest - 1:
                inp = None
                send_backward(gin)
            else:
                inp = send_backward_recv_forward(gin)
        for i in range(warm):
            a, o = saved.pop(0)
            g = recv_backward()
            send_backward(backward(a, o, g))
        t1 = time.perf_counter()
        if dp > 1:
            dist.all_reduce(flat, group=dp_groups[s])
        t2 = time.perf_counter()
        if pp > 1 and (first or last):
            dist.all_reduce(tied.grad, group=emb_groups[d])
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        return losses, [(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3,
                        busy[0] * 1e3, busy[1] * 1e3, (t1 - t0 - busy[0] - busy[1]) * 1e3]

    res = {"rank": rank, "stage": s, "replica": d, "mode": mode, "params": flat.numel(), "micro_batches": m}
    if spec.get("check"):
        losses, parts = one_step(0)
        res["grad_in_place"] = all(p.grad.data_ptr() == q for p, q in zip(params, ptrs))
        res["loss"] = sum(losses) / m if last else None
        names = dict(stage.global_names())
        local = dict(stage.named_parameters())
        torch.save({"param": {names[n]: local[n].detach().clone() for n in local},
                    "grad": {names[n]: local[n].grad.clone() for n in local}},
                   spec["save"] + ".rank%d.pt" % rank)
        dist.destroy_process_group()
        return res
    total, parts_all, loss_all, cpu, faults = [], [], [], [], []
    sched0, threads0 = None, {}
    for k in range(spec["warmup"] + spec["steps"]):
        dist.barrier()
        c0 = time.process_time()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        losses, parts = one_step(k)
        dist.barrier()
        t = (time.perf_counter() - t0) * 1e3
        if k >= spec["warmup"]:
            total.append(t)
            parts_all.append(parts)
            cpu.append((time.process_time() - c0) * 1e3)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        if k + 1 == spec["warmup"]:
            sched0 = sched_stats()
            threads0 = thread_cpu()
        if last:
            loss_all.append(sum(losses) / m)
    res["step_ms"] = total
    # pipeline = fwd_compute + bwd_compute + pipeline_other (p2p transfers, waiting for the
    # neighbour stage, the schedule's own Python)
    res["parts_ms_median"] = dict(zip(["pipeline", "dp_allreduce", "embed_allreduce", "update", "fwd_compute",
                                       "bwd_compute", "pipeline_other"],
                                      [statistics.median(p[i] for p in parts_all) for i in range(7)]))
    # CPU time of the whole process (all its threads) per step: near the step time on a rank that
    # computes all along, lower on one that waits (unless something spins)
    res["cpu_ms_per_step_median"] = statistics.median(cpu)
    res["minor_faults_per_step_median"] = statistics.median(faults)
    # the main thread's scheduler counters over the timed steps (migrations between CPUs, wake-ups
    # that pulled it to the waker's CPU, preemptions)
    s1 = sched_stats()
    res["sched_timed_steps"] = {k: s1[k] - (sched0 or {}).get(k, 0) for k in s1}
    # CPU ms per timed step of each thread other than the main one (gloo's I/O and worker threads)
    main_tid = str(threading.get_native_id())
    t1 = thread_cpu()
    res["other_threads_cpu_ms_per_step"] = {
        "%s/%s" % (name, tid): round((c - threads0.get(tid, (name, 0.0))[1]) * 1e3 / len(total), 1)
        for tid, (name, c) in t1.items() if tid != main_tid and c - threads0.get(tid, (name, 0.0))[1] > 0}
    res["loss_per_step"] = loss_all if last else None
    res["grad_in_place"] = all(p.grad.data_ptr() == q for p, q in zip(params, ptrs))
    dist.destroy_process_group()
    return res


def worker_entry(kind, spec_path, rank):
    spec = json.load(open(spec_path))
    rank = int(rank)
    fn = {"_worker": train_worker, "_comm": comm_worker, "_profile": profile_worker}[kind]
    res = fn(spec, rank)
    with open(spec_path + ".r%d" % rank, "w") as f:
        json.dump(res, f)
    return 0


# ----------------------------------------------------------------------------------------------
# Orchestration.

def run_profile(args, cfg, G, model_json, corun=False):
    """profile.json's dict and the raw results; corun: each device type is profiled while a second
    process of the same type trains beside it (the two cores busy, as in a 2-process run)."""
    spec = {"model": model_json, "mbs": args.mbs, "warmup": 2, "repeats": args.profile_repeats}
    out, raw = [], {}
    for typ in ("fast", "slow"):
        log("%s: profiling device type %s (mode %s, env %s)%s" % (
            PROG, typ, G.device_mode(args.knob, typ), G.DEVICE_KNOBS[args.knob][typ][0] or "as installed",
            ", a second process training beside it" if corun else ""))
        stats = {}
        sp = dict(spec, mode=G.device_mode(args.knob, typ))
        if corun:
            sp.update(partner=True, stop=os.path.join(args.out, "logs", "corun-%s-%d.stop" % (typ, os.getpid())))
        res = launch("_profile", sp, 2 if corun else 1, [G.device_env(args.knob, typ)] * (2 if corun else 1),
                     args.out, ("profile-corun-" if corun else "profile-") + typ, stats=stats)[0]
        if corun and os.path.exists(sp["stop"]):
            os.remove(sp["stop"])
        raw[typ] = dict(res, **stats)
        if stats["foreign_cpu_frac"] > NOISY:
            log("  other processes took %.0f%% of the CPUs during this profile: NOT QUIET" % (100 * stats["foreign_cpu_frac"]))
        for e in res["entries"]:
            out.append({"gpu": typ, "tp": 1, "mbs": e["mbs"], "embed": e["embed"], "layer": e["layer"],
                        "head": e["head"], "update_ms_per_mparam": res["update"]["ms_per_mparam"]})
    return {"profile": "gpt2-tiny-cpu-%s%s" % (args.knob, "-corun" if corun else ""), "entries": out}, raw


def fit_link(p2p):
    """alpha (us), beta (GB/s) of t = alpha + bytes / beta, least squares on relative residuals."""
    import numpy as np
    n = np.array([r["bytes"] for r in p2p], float)
    t = np.array([r["ms"] for r in p2p], float) * 1e-3
    A = np.stack([np.ones_like(n), n], 1) / t[:, None]
    (a, b), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    model = a + b * n
    rel = (model - t) / t
    return {"latency_us": float(a * 1e6), "bandwidth_gbs": float(1.0 / b / 1e9),
            "fit": "least squares of (alpha + bytes/beta - t) / t over %d sizes %d B .. %d B" % (len(n), n[0], n[-1]),
            "max_rel_residual": float(np.max(np.abs(rel))), "mean_abs_rel_residual": float(np.mean(np.abs(rel)))}


def run_comm(args, G):
    sizes = [2 ** k for k in range(10, 26)]
    log("%s: gloo ping-pong and all_reduce, 2 processes, %d sizes 1 KiB .. 32 MiB" % (PROG, len(sizes)))
    stats = {}
    res = launch("_comm", {"sizes": sizes}, 2, [G.device_env(args.knob, "fast")] * 2, args.out, "comm", stats=stats)[0]
    res["p2p"][0]["run_foreign_cpu_frac"] = stats["foreign_cpu_frac"]
    link = fit_link(res["p2p"])
    ring = []
    for r in res["allreduce"]:
        model = G.ring_allreduce_ms(r["bytes"], 2, link["latency_us"], link["bandwidth_gbs"])
        ring.append(dict(r, ring_model_ms=model, rel_err=(model - r["ms"]) / r["ms"]))
    for r in res["p2p"]:
        r["fit_ms"] = G.p2p_ms(r["bytes"], link["latency_us"], link["bandwidth_gbs"])
    big = [r["rel_err"] for r in ring if r["bytes"] >= 1 << 20]
    # For reference only (the cluster files keep the ping-pong link): the alpha and beta that the
    # ring formula for d = 2 (2 alpha + bytes / beta) would need to match gloo's all_reduce.
    ar_fit = fit_link([{"bytes": r["bytes"], "ms": r["ms"]} for r in res["allreduce"]])
    ar_fit["latency_us"] /= 2
    return {"p2p": res["p2p"], "allreduce": ring, "link": link, "allreduce_as_ring_d2_fit": ar_fit,
            "allreduce_ring_fit": {"mean_abs_rel_err": statistics.mean(abs(r["rel_err"]) for r in ring),
                                   "max_abs_rel_err": max(abs(r["rel_err"]) for r in ring),
                                   "mean_rel_err_ge_1MiB": statistics.mean(big) if big else None}}


CLUSTERS = {  # name -> [(node type, count)]
    "fs": [("fast", 1), ("slow", 1)],
    "ff": [("fast", 2)],
    "ss": [("slow", 2)],
    "f": [("fast", 1)],
    "s": [("slow", 1)],
}


def cluster_json(name, link, ar=None):
    """ar: the ring model fitted on gloo's all_reduce (comm.json's allreduce_as_ring_d2_fit): the
    planner prices its all-reduces with it instead of the send/recv fit."""
    lk = {"bandwidth_gbs": round(link["bandwidth_gbs"], 4), "latency_us": round(link["latency_us"], 3)}
    if ar:
        lk["allreduce"] = {"bandwidth_gbs": round(ar["bandwidth_gbs"], 4), "latency_us": round(ar["latency_us"], 3)}
    price = {"fast": 1.0, "slow": 0.5}
    return {"cluster": "cpu-gloo-" + name,
            "node_types": [{"name": t, "gpu": t, "gpus_per_node": 1, "count": c, "memory_gib": 8,
                            "intra_node": lk, "inter_node": lk, "price_per_hour": price[t]} for t, c in CLUSTERS[name]]}


def rank_types(plan, cluster):
    """Device type of each global rank: node_order[g // gpus_per_node] -> its node type's gpu."""
    nt = {n["name"]: n for n in cluster["node_types"]}
    gpus = []  # node_order has one entry per node, each with its type's gpus_per_node GPUs
    for name in plan["node_order"]:
        gpus += [nt[name]["gpu"]] * nt[name]["gpus_per_node"]
    world = plan["dp"] * len(plan["stages"])
    if world > len(gpus):
        raise ValueError("plan's node_order %s has %d GPUs, the plan needs %d" % (plan["node_order"], len(gpus), world))
    return gpus[:world]


def make_plan(cfg, cluster, dp, pp, mbs, split, order):
    """A PLAN dict as the planner writes it (for --estimator peer and for the check)."""
    if split is None:
        base = cfg.layers // pp
        split = [base + (1 if i < cfg.layers % pp else 0) for i in range(pp)]
    stages, l0 = [], 0
    nt = {n["name"]: n for n in cluster["node_types"]}
    for s in range(pp):
        name = order[s * dp]
        stages.append({"node_type": name, "gpu": nt[name]["gpu"], "tp": 1, "gpus": [s * dp, dp],
                       "layers": [l0, split[s]], "embedding": s == 0, "head": s == pp - 1})
        l0 += split[s]
    return {"dp": dp, "pp": pp, "mbs": mbs, "micro_batches": cfg.global_batch // (dp * mbs),
            "global_batch": cfg.global_batch, "node_order": list(order), "stages": stages}


def describe(plan):
    split = ",".join(str(st["layers"][1]) for st in plan["stages"])
    return "dp=%d pp=%d mbs=%d split=%s order=%s" % (plan["dp"], len(plan["stages"]), plan["mbs"], split,
                                                      ",".join(plan["node_order"]))


def plan_key(cname, plan):
    return (cname, plan["dp"], len(plan["stages"]), plan["mbs"],
            tuple(st["layers"][1] for st in plan["stages"]), tuple(plan["node_order"][:plan["dp"] * len(plan["stages"])]))


def node_orders(cname):
    types = [t for t, c in CLUSTERS[cname] for _ in range(c)]
    orders = [types]
    if len(set(types)) > 1:
        orders.append(list(reversed(types)))
    return orders


def peer_search(cfg, cluster, cname, profile, link, mbs_list, G, top):
    """Exhaustive search with the peer's cost model (dp * pp <= nodes, every split, both orders)."""
    n = sum(c for _, c in CLUSTERS[cname])
    cands = []
    for dp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            if dp * pp > n or pp > cfg.layers:
                continue
            for mbs in mbs_list:
                if cfg.global_batch % (dp * mbs):
                    continue
                splits = [[cfg.layers]] if pp == 1 else [[a, cfg.layers - a] for a in range(1, cfg.layers)] if pp == 2 \
                    else [None]
                for order in node_orders(cname):
                    for sp in splits:
                        pl = make_plan(cfg, cluster, dp, pp, mbs, sp, order[:dp * pp])
                        pl["rank_types"] = rank_types(pl, cluster)
                        pl["estimate"] = G.peer_estimate(pl, cfg, profile, link)
                        del pl["rank_types"]
                        cands.append(pl)
    cands.sort(key=lambda p: p["estimate"]["step_ms"])
    return cands[:top]


class Planner:
    def __init__(self, binary, files):
        self.binary, self.files = binary, files

    def _run(self, argv):
        r = subprocess.run([self.binary, "plan3d"] + argv + ["--json"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("tessera plan3d %s: exit %d: %s" % (argv[0], r.returncode, (r.stderr or r.stdout).strip()[-400:]))
        return json.loads(r.stdout)

    def common(self, cname, profile="profile"):
        return ["--model", self.files["model"], "--cluster", self.files["cluster-" + cname],
                "--profile", self.files[profile]]

    def search(self, cname, top):
        return self._run(["search"] + self.common(cname) + ["--top", str(top)])["plans"]

    def estimate(self, cname, dp, pp, mbs, split, order, profile="profile"):
        argv = ["estimate"] + self.common(cname, profile) + ["--dp", str(dp), "--pp", str(pp), "--mbs", str(mbs)]
        if split:
            argv += ["--split", ",".join(map(str, split))]
        if order:
            argv += ["--order", ",".join(order)]
        out = self._run(argv)
        if "plans" in out:
            return out["plans"][0]
        return out.get("plan", out)


def planner_available(binary):
    if not binary or not os.path.exists(binary):
        return "no binary at %s" % binary
    try:
        r = subprocess.run([binary, "plan3d", "search", "--help"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return str(e)
    if r.returncode != 0:
        return "`%s plan3d search --help` exits %d: %s" % (binary, r.returncode, (r.stderr or r.stdout).strip()[:200])
    return None


# The fixed configurations run besides the planner's top-K: (cluster, dp, pp, mbs, split, order, why).
EXTRA = [
    ("fs", 1, 2, 2, [4, 4], ["fast", "slow"], "even split"),
    ("fs", 1, 2, 2, [4, 4], ["slow", "fast"], "even split, reversed order"),
    ("fs", 1, 2, 2, [2, 6], ["fast", "slow"], "bad: most layers on slow"),
    ("fs", 1, 2, 1, [6, 2], ["fast", "slow"], "uneven, mbs 1"),
    ("fs", 1, 2, 4, [6, 2], ["fast", "slow"], "uneven, mbs 4"),
    ("fs", 2, 1, 2, None, ["fast", "slow"], "heterogeneous data parallel"),
    ("ff", 1, 2, 2, [4, 4], ["fast", "fast"], "even split"),
    ("ff", 1, 2, 2, [2, 6], ["fast", "fast"], "bad: head stage overloaded"),
    ("ff", 2, 1, 4, None, ["fast", "fast"], "data parallel"),
    ("ss", 1, 2, 2, [5, 3], ["slow", "slow"], "pipeline"),
    ("ss", 2, 1, 1, None, ["slow", "slow"], "data parallel"),
    ("f", 1, 1, 1, None, ["fast"], "one process"),
    ("f", 1, 1, 4, None, ["fast"], "one process"),
    ("s", 1, 1, 2, None, ["slow"], "one process"),
]
QUICK = [0, 1, 5, 8, 11]


def build_runs(args, cfg, clusters, profile, link, G, planner):
    """[(cluster, plan, source)]: the top-K of search on every cluster, then EXTRA (deduplicated)."""
    runs, seen = [], set()

    def add(cname, plan, source):
        k = plan_key(cname, plan)
        if k in seen:
            for r in runs:
                if plan_key(r[0], r[1]) == k:
                    r[2].append(source)
            return
        seen.add(k)
        runs.append((cname, plan, [source]))

    for cname in CLUSTERS:
        # one process: the plans differ by mbs only, top-1 is enough (the fixed list adds others)
        top = args.top if len(CLUSTERS[cname]) > 1 or CLUSTERS[cname][0][1] > 1 else 1
        if args.quick:
            top = 1
        plans = planner.search(cname, top) if planner else \
            peer_search(cfg, clusters[cname], cname, profile, link, args.mbs, G, top)
        for i, p in enumerate(plans):
            add(cname, p, "search#%d" % (i + 1))
    extra = [EXTRA[i] for i in QUICK] if args.quick else EXTRA
    for cname, dp, pp, mbs, split, order, why in extra:
        if mbs not in args.mbs:
            continue
        if planner:
            p = planner.estimate(cname, dp, pp, mbs, split, order)
        else:
            p = make_plan(cfg, clusters[cname], dp, pp, mbs, split or [cfg.layers], order)
            p["rank_types"] = rank_types(p, clusters[cname])
            p["estimate"] = G.peer_estimate(p, cfg, profile, link)
            del p["rank_types"]
        add(cname, p, "estimate: " + why)
    return runs


# Sentinels: one fixed 1-process plan per device type, run before the plans, halfway and after
# them (1 warm-up + 3 timed steps): the spread of their times is the machine's drift during the
# run, the floor under which an estimate's error is not the cost model's.
SENTINELS = [("f", 4, "fast"), ("s", 2, "slow")]


def make_sentinels(cfg, clusters, profile, link, G, planner):
    out = []
    for cname, mbs, typ in SENTINELS:
        if planner:
            p = planner.estimate(cname, 1, 1, mbs, None, [typ])
        else:
            p = make_plan(cfg, clusters[cname], 1, 1, mbs, [cfg.layers], [typ])
            p["estimate"] = G.peer_estimate(dict(p, rank_types=rank_types(p, clusters[cname])), cfg, profile, link)
        out.append((cname, p))
    return out


def run_sentinels(args, cfg, model_json, clusters, sentinels, G, when, store):
    a = argparse.Namespace(**dict(vars(args), warmup=1, steps=3))
    for cname, p in sentinels:
        stats = {}
        try:
            res, _ = execute(a, cfg, model_json, clusters[cname], p, G, "sentinel-%s-%s" % (cname, when), stats=stats)
        except RuntimeError as e:
            log("%s: sentinel %s failed: %s" % (PROG, cname, e))
            continue
        med = statistics.median(res[0]["step_ms"])
        ent = store.setdefault(cname, {"plan": describe(p), "estimate_ms": p["estimate"]["step_ms"], "runs": []})
        ent["runs"].append({"when": when, "median_ms": med, "steps_ms": res[0]["step_ms"],
                            "foreign_cpu_frac": stats["foreign_cpu_frac"]})
        log("%s: sentinel (%s) %s %s: %.0f ms (estimate %.0f, %+.1f%%)" % (
            PROG, when, cname, describe(p), med, p["estimate"]["step_ms"], (p["estimate"]["step_ms"] - med) / med * 100))


def execute(args, cfg, model_json, cluster, plan, G, tag, check=None, stats=None):
    types = rank_types(plan, cluster)
    if any(st.get("tp", 1) != 1 for st in plan["stages"]):
        raise RuntimeError("tensor parallel stages are not executed here (tp > 1)")
    world = plan["dp"] * len(plan["stages"])
    spec = {"model": model_json, "plan": plan, "modes": [G.device_mode(args.knob, t) for t in types],
            "warmup": args.warmup, "steps": args.steps}
    if check:
        spec.update(check=True, save=check)
    res = launch("_worker", spec, world, [G.device_env(args.knob, t) for t in types], args.out, tag, stats=stats)
    return res, types


def check_plan(args, cfg, model_json, cluster, plan, G, torch, tag):
    """One step of `plan` against the same step in this process; returns the check record."""
    with tempfile.TemporaryDirectory() as tmp:
        save = os.path.join(tmp, "ck")
        res, types = execute(args, cfg, model_json, cluster, plan, G, tag, check=save)
        got = {"param": {}, "grad": {}}
        for r in range(len(res)):
            d = torch.load(save + ".rank%d.pt" % r)
            for k in ("param", "grad"):
                for n, t in d[k].items():
                    got[k].setdefault(n, []).append(t)
    # Reference: the plan's stages one after the other in this process, whole batch at once
    # (same compute mode per stage as the first replica's rank), tied copies' grads summed.
    state = G.init_full_state(cfg)
    stages = []
    for s, st in enumerate(plan["stages"]):
        stages.append(G.Stage(cfg, st["layers"][0], st["layers"][1], s == 0, s == len(plan["stages"]) - 1,
                              G.device_mode(args.knob, types[st["gpus"][0]]), state,
                              own_head_copy=(s == len(plan["stages"]) - 1 and len(plan["stages"]) > 1)))
    tokens, targets = G.batch(cfg, 0)
    x = tokens
    for s, stg in enumerate(stages):
        x = stg(x, targets if s == len(stages) - 1 else None)
    loss = x
    loss.backward()
    if len(stages) > 1:
        g = stages[0].wte.weight.grad + stages[-1].head_wte.grad
        stages[0].wte.weight.grad = g.clone()
        stages[-1].head_wte.grad = g.clone()
    ref = {"param": {}, "grad": {}}
    for stg in stages:
        for local, glob in stg.global_names():
            ref["grad"][glob] = dict(stg.named_parameters())[local].grad.clone()
    opt = torch.optim.Adam([p for stg in stages for p in stg.parameters()], lr=LR)
    opt.step()
    for stg in stages:
        for local, glob in stg.global_names():
            ref["param"][glob] = dict(stg.named_parameters())[local].detach().clone()
    losses = [r["loss"] for r in res if r["loss"] is not None]
    got_loss = sum(losses) / len(losses)
    worst_g, worst_p, ok = (0.0, ""), (0.0, ""), True
    for n, rg in ref["grad"].items():
        gm = float(rg.abs().max()) or 1.0
        for t in got["grad"][n]:
            e = float((t - rg).abs().max()) / gm
            if e > worst_g[0]:
                worst_g = (e, n)
            ok &= e <= GTOL
        delta = GTOL * gm
        allowed = LR * torch.clamp(4 * delta / (rg.abs() + 1e-8), max=2.0) + 4 * U * ref["param"][n].abs()
        for t in got["param"][n]:
            ratio = float(((t - ref["param"][n]).abs() / allowed).max())
            if ratio > worst_p[0]:
                worst_p = (ratio, n)
            ok &= ratio <= 1.0
    loss = loss.detach()
    loss_err = abs(got_loss - float(loss)) / abs(float(loss))
    ok &= loss_err <= LOSS_RTOL
    ok &= all(r["grad_in_place"] for r in res)
    rec = {"plan": describe(plan), "rank_types": types, "loss_pipeline": got_loss, "loss_single": float(loss),
           "loss_rel_err": loss_err, "loss_rtol": LOSS_RTOL,
           "grad_max_err_rel_to_max": worst_g[0], "grad_worst_tensor": worst_g[1], "gtol": GTOL,
           "param_max_err_over_allowed": worst_p[0], "param_worst_tensor": worst_p[1],
           "tensors_compared": len(ref["grad"]), "ok": bool(ok)}
    # For context: how far the parameters moved (Adam's first step moves each by ~lr).
    rec["param_max_abs_diff"] = max(float((t - ref["param"][n]).abs().max()) for n in ref["param"] for t in got["param"][n])
    rec["lr"] = LR
    return rec


def rank_breakdown(plan, res, types, profile, cfg):
    """Per rank: its measured forward / backward compute per step against what the profile gives
    for the same work (m micro-batches of its stage on its device type), the rest of its pipeline
    time (p2p, waiting for the neighbour, the schedule's Python), CPU time and page faults."""
    prof = {(e["gpu"], e["mbs"]): e for e in profile["entries"] if e.get("tp", 1) == 1}
    m, out = plan["micro_batches"], []
    for r in res:
        st = plan["stages"][r["stage"]]
        e = prof.get((types[r["rank"]], plan["mbs"]))
        n = st["layers"][1]
        pf = pb = float("nan")
        if e:
            pf = m * (n * e["layer"]["fwd_ms"] + (e["embed"]["fwd_ms"] if st["embedding"] else 0) +
                      (e["head"]["fwd_ms"] if st["head"] else 0))
            pb = m * (n * e["layer"]["bwd_ms"] + (e["embed"]["bwd_ms"] if st["embedding"] else 0) +
                      (e["head"]["bwd_ms"] if st["head"] else 0))
        p = r["parts_ms_median"]
        out.append({"rank": r["rank"], "stage": r["stage"], "type": types[r["rank"]], "fwd_ms": p["fwd_compute"],
                    "bwd_ms": p["bwd_compute"], "fwd_profile_ms": pf, "bwd_profile_ms": pb,
                    "pipeline_other_ms": p["pipeline_other"], "dp_allreduce_ms": p["dp_allreduce"],
                    "embed_allreduce_ms": p["embed_allreduce"], "update_ms": p["update"],
                    "cpu_ms": r["cpu_ms_per_step_median"], "minor_faults": r["minor_faults_per_step_median"],
                    "sched": r.get("sched_timed_steps"), "other_threads_cpu_ms": r.get("other_threads_cpu_ms_per_step")})
    return out


def svg_scatter(rows, path):
    pts = [(r["measured"]["median_ms"], r["estimate_ms"], r["cluster"], i + 1) for i, r in enumerate(rows)
           if r.get("measured") and r.get("estimate_ms")]
    if not pts:
        return
    W, H, M = 560, 520, 60
    hi = max(max(p[0], p[1]) for p in pts) * 1.08
    sx = lambda v: M + (W - 2 * M) * v / hi
    sy = lambda v: H - M - (H - 2 * M) * v / hi
    colors = {"fs": "#d62728", "ff": "#1f77b4", "ss": "#2ca02c", "f": "#9467bd", "s": "#ff7f0e"}
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#999" stroke-dasharray="4 3"/>' % (sx(0), sy(0), sx(hi), sy(hi)),
         '<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>' % (sx(0), sy(0), sx(hi), sy(0)),
         '<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>' % (sx(0), sy(0), sx(0), sy(hi))]
    step = 10 ** len(str(int(hi / 5))) / 10
    while hi / step > 8:
        step *= 2
    v = 0.0
    while v <= hi:
        o.append('<text x="%g" y="%g" text-anchor="middle">%g</text>' % (sx(v), sy(0) + 16, v))
        o.append('<text x="%g" y="%g" text-anchor="end">%g</text>' % (sx(0) - 6, sy(v) + 4, v))
        o.append('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#eee"/>' % (sx(v), sy(0), sx(v), sy(hi)))
        o.append('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#eee"/>' % (sx(0), sy(v), sx(hi), sy(v)))
        v += step
    for f in (0.8, 1.2):  # +-20% bands
        o.append('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#ccc" stroke-dasharray="1 3"/>' % (
            sx(0), sy(0), sx(min(hi, hi / f)), sy(min(hi, hi / f) * f)))
    for mx, est, c, i in pts:
        o.append('<circle cx="%g" cy="%g" r="4" fill="%s"/>' % (sx(mx), sy(est), colors.get(c, "black")))
        o.append('<text x="%g" y="%g" fill="#444">%d</text>' % (sx(mx) + 5, sy(est) - 5, i))
    o.append('<text x="%g" y="%g" text-anchor="middle">measured step (ms, median)</text>' % (W / 2, H - 18))
    o.append('<text transform="translate(16 %g) rotate(-90)" text-anchor="middle">planner estimate (ms)</text>' % (H / 2))
    o.append('<text x="%g" y="24" text-anchor="middle" font-size="13">tessera plan3d estimate vs gloo step (y = x dashed, &#177;20%% dotted)</text>' % (W / 2))
    y = 44
    for c, name in (("fs", "fast+slow"), ("ff", "2x fast"), ("ss", "2x slow"), ("f", "1 fast"), ("s", "1 slow")):
        o.append('<circle cx="%g" cy="%g" r="4" fill="%s"/><text x="%g" y="%g">%s</text>' % (M + 10, y, colors[c], M + 18, y + 4, name))
        y += 14
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def summarize(rows):
    done = [r for r in rows if r.get("measured") and r.get("estimate_ms")]
    summ = {"plans_run": len(done), "plans_failed": len(rows) - len(done),
            "plans_not_quiet": [rows.index(r) + 1 for r in done if r["measured"]["foreign_cpu_frac"] > NOISY]}
    if not done:
        return summ
    errs = [abs(r["error_pct"]) for r in done]
    worst = max(done, key=lambda r: abs(r["error_pct"]))
    summ.update(mean_abs_error_pct=statistics.mean(errs), median_abs_error_pct=statistics.median(errs),
                worst={"index": rows.index(worst) + 1, "cluster": worst["cluster"], "plan": worst["config"],
                       "error_pct": worst["error_pct"]})
    co = [r for r in done if "error_corun_pct" in r]
    if co:
        summ["mean_abs_error_corun_pct"] = statistics.mean(abs(r["error_corun_pct"]) for r in co)
        # each plan priced with the profile taken in its own conditions: alone for 1 process,
        # co-run for 2
        matched = [abs(r["error_corun_pct"] if r["plan"]["dp"] * len(r["plan"]["stages"]) > 1 else r["error_pct"])
                   for r in co]
        summ["mean_abs_error_matched_pct"] = statistics.mean(matched)
        summ["worst_matched_pct"] = max(matched)
    rp = [r for r in done if "replay_error_pct" in r]
    if rp:
        summ["mean_abs_replay_error_pct"] = statistics.mean(abs(r["replay_error_pct"]) for r in rp)
        summ["mean_replay_error_pct"] = statistics.mean(r["replay_error_pct"] for r in rp)
    kinds = {}
    for r in done:
        k = "1 process" if r["plan"]["dp"] * len(r["plan"]["stages"]) == 1 else \
            "data parallel" if len(r["plan"]["stages"]) == 1 else "pipeline"
        kinds.setdefault(k, {"errors": [], "compute": [], "replay": []})
        kinds[k]["errors"].append(r["error_pct"])
        kinds[k]["compute"].append(r["measured"]["compute_over_profile"])
        if "replay_error_pct" in r:
            kinds[k]["replay"].append(r["replay_error_pct"])
    summ["by_kind"] = {k: {"plans": len(v["errors"]), "mean_error_pct": statistics.mean(v["errors"]),
                           "median_compute_over_profile": statistics.median(v["compute"]),
                           "mean_replay_error_pct": statistics.mean(v["replay"]) if v["replay"] else None}
                       for k, v in kinds.items()}
    per = {}
    for c in CLUSTERS:
        rs = [r for r in done if r["cluster"] == c]
        if not rs:
            continue
        fastest = min(rs, key=lambda r: r["measured"]["median_ms"])
        top = [r for r in rs if "search#1" in r["source"]]
        ent = {"plans": len(rs), "measured_fastest": fastest["config"], "measured_fastest_ms": fastest["measured"]["median_ms"]}
        if top:
            t = top[0]
            gap = (t["measured"]["median_ms"] - fastest["measured"]["median_ms"]) / fastest["measured"]["median_ms"] * 100
            ent.update(top1=t["config"], top1_ms=t["measured"]["median_ms"], top1_gap_pct=gap,
                       top1_is_fastest=t is fastest, top1_within_5pct=gap <= 5.0,
                       # a gap smaller than the step-to-step spread: the two IQRs overlap
                       top1_iqr_overlaps_fastest=t["measured"]["q1_ms"] <= fastest["measured"]["q3_ms"])
        # rank agreement: Spearman between estimates and measurements on this cluster
        if len(rs) >= 3:
            def ranks(v):
                o = sorted(range(len(v)), key=lambda i: v[i])
                rk = [0] * len(v)
                for k, i in enumerate(o):
                    rk[i] = k
                return rk
            a = ranks([r["estimate_ms"] for r in rs])
            b = ranks([r["measured"]["median_ms"] for r in rs])
            n = len(rs)
            ent["spearman"] = 1 - 6 * sum((x - y) ** 2 for x, y in zip(a, b)) / (n * (n * n - 1))
        per[c] = ent
    summ["per_cluster"] = per
    return summ


def main():
    if len(sys.argv) >= 4 and sys.argv[1] in ("_worker", "_comm", "_profile"):
        sys.path.insert(0, HERE)
        return worker_entry(*sys.argv[1:4])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=os.environ.get("TESSERA_BIN") or os.path.join(ROOT, "build-m", "tessera"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--knob", choices=["isa", "fp64", "bf16"], default="isa", help="what makes `slow` slow")
    ap.add_argument("--mbs", default="1,2,4,8,16",
                    help="micro-batch sizes profiled (every one the planner may pick: it extrapolates linearly "
                         "from the nearest profiled size otherwise)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per plan and round")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the list R times (every other round in reverse order) and pool the timed steps")
    ap.add_argument("--profile-repeats", type=int, default=5)
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="top-1 per cluster + 5 fixed plans, 5 steps")
    ap.add_argument("--estimator", choices=["planner", "peer"], default="planner")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--no-sentinel", action="store_true", help="skip the drift sentinels")
    ap.add_argument("--corun", action="store_true",
                    help="also profile each device type with a second process training beside it, and price "
                         "every plan with that profile too (estimate_corun_ms)")
    ap.add_argument("--p2p-allreduce", action="store_true",
                    help="price all-reduces with the send/recv fit instead of the all_reduce fit (what the "
                         "2026-12-07 results did, before the cluster file took an all-reduce term)")
    ap.add_argument("--dry-run", action="store_true", help="list the plans and the expected time, run none")
    ap.add_argument("--only", default="", choices=["", "profile", "comm", "check"],
                    help="stop after this step (development)")
    ap.add_argument("--reuse", default="", help="directory whose profile.json / comm.json to reuse (development)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--global-batch", type=int, default=16)
    args = ap.parse_args()
    args.mbs = [int(x) for x in args.mbs.split(",") if x]
    if args.quick:
        args.steps = min(args.steps, 5)
    if args.steps < 1 or args.warmup < 0 or args.rounds < 1:
        ap.error("--steps >= 1, --rounds >= 1 and --warmup >= 0")
    if args.out is None:
        args.out = os.path.join(ROOT, "results", "%s-plan3d-gloo" % datetime.date.today().isoformat())
    reason = None
    if args.estimator == "planner":
        reason = planner_available(args.tessera)
        if reason:
            log("%s: the planner is unavailable (%s); --estimator peer runs without it" % (PROG, reason))
            return 2
    ensure_torch()
    sys.path.insert(0, HERE)
    import numpy as np
    import torch
    import plan3d_gpt as G
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    cfg = G.Config(layers=args.layers, global_batch=args.global_batch)
    model_json = cfg.as_model_json()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "numpy": np.__version__, "python": sys.version.split()[0],
            "cpu": cpu_info(), "threads_per_process": 1, "thread_env": G.THREAD_ENV, "processes_max": 2,
            "knob": args.knob, "slow_env": G.DEVICE_KNOBS[args.knob]["slow"][0],
            "modes": {t: G.device_mode(args.knob, t) for t in ("fast", "slow")},
            "optimizer": "torch.optim.Adam(lr=%g), defaults otherwise" % LR, "warmup_steps": args.warmup,
            "timed_steps": args.steps, "estimator": args.estimator, "tessera": args.tessera,
            "loadavg_start": list(os.getloadavg()), "isa_caps": peerenv.isa_caps()}
    files = {"model": os.path.join(args.out, "model.json"), "profile": os.path.join(args.out, "profile.json")}
    with open(files["model"], "w") as f:
        json.dump(model_json, f, indent=1)
    # 1. profile
    if args.reuse:
        profile = json.load(open(os.path.join(args.reuse, "profile.json")))
        raw = json.load(open(os.path.join(args.reuse, "profile_raw.json")))
    else:
        profile, raw = run_profile(args, cfg, G, model_json)
    with open(files["profile"], "w") as f:
        json.dump(profile, f, indent=1)
    with open(os.path.join(args.out, "profile_raw.json"), "w") as f:
        json.dump(raw, f, indent=1)
    ratio = {}
    for mbs in args.mbs:
        e = {t: next(x for x in profile["entries"] if x["gpu"] == t and x["mbs"] == mbs) for t in ("fast", "slow")}
        tot = {t: e[t]["embed"]["fwd_ms"] + e[t]["embed"]["bwd_ms"] + cfg.layers * (e[t]["layer"]["fwd_ms"] + e[t]["layer"]["bwd_ms"])
               + e[t]["head"]["fwd_ms"] + e[t]["head"]["bwd_ms"] for t in e}
        ratio[str(mbs)] = {"layer_fwd": e["slow"]["layer"]["fwd_ms"] / e["fast"]["layer"]["fwd_ms"],
                           "layer_bwd": e["slow"]["layer"]["bwd_ms"] / e["fast"]["layer"]["bwd_ms"],
                           "head_fwd_bwd": (e["slow"]["head"]["fwd_ms"] + e["slow"]["head"]["bwd_ms"]) /
                                           (e["fast"]["head"]["fwd_ms"] + e["fast"]["head"]["bwd_ms"]),
                           "model_fwd_bwd": tot["slow"] / tot["fast"], "fast_model_fwd_bwd_ms": tot["fast"]}
    meta["slow_over_fast"] = ratio
    meta["update_ms_per_mparam"] = {t: raw[t]["update"]["ms_per_mparam"] for t in raw}
    log("%s: slow/fast time ratio (whole fwd+bwd per micro-batch): %s" % (PROG, ", ".join(
        "mbs %s %.2fx" % (k, v["model_fwd_bwd"]) for k, v in ratio.items())))
    for e in profile["entries"]:
        log("  %-4s mbs %d  embed %.2f/%.2f  layer %.2f/%.2f  head %.2f/%.2f ms (fwd/bwd)  Adam %.2f ms/Mparam" % (
            e["gpu"], e["mbs"], e["embed"]["fwd_ms"], e["embed"]["bwd_ms"], e["layer"]["fwd_ms"], e["layer"]["bwd_ms"],
            e["head"]["fwd_ms"], e["head"]["bwd_ms"], e["update_ms_per_mparam"]))
    if args.corun:
        if args.reuse and os.path.exists(os.path.join(args.reuse, "profile-corun.json")):
            profile_co = json.load(open(os.path.join(args.reuse, "profile-corun.json")))
            raw_co = json.load(open(os.path.join(args.reuse, "profile-corun_raw.json")))
        else:
            profile_co, raw_co = run_profile(args, cfg, G, model_json, corun=True)
        files["profile-corun"] = os.path.join(args.out, "profile-corun.json")
        with open(files["profile-corun"], "w") as f:
            json.dump(profile_co, f, indent=1)
        with open(os.path.join(args.out, "profile-corun_raw.json"), "w") as f:
            json.dump(raw_co, f, indent=1)
        co = {}
        for e in profile_co["entries"]:
            a = next(x for x in profile["entries"] if x["gpu"] == e["gpu"] and x["mbs"] == e["mbs"])
            co["%s/%d" % (e["gpu"], e["mbs"])] = (e["layer"]["fwd_ms"] + e["layer"]["bwd_ms"]) / (
                a["layer"]["fwd_ms"] + a["layer"]["bwd_ms"])
        meta["corun_over_alone_layer"] = co
        log("%s: co-run / alone, one layer fwd+bwd: %s" % (PROG, ", ".join("%s %.2fx" % kv for kv in co.items())))
    if args.only == "profile":
        return 0
    # 2. comm
    if args.reuse and os.path.exists(os.path.join(args.reuse, "comm.json")):
        comm = json.load(open(os.path.join(args.reuse, "comm.json")))
    else:
        comm = run_comm(args, G)
    with open(os.path.join(args.out, "comm.json"), "w") as f:
        json.dump(comm, f, indent=1)
    link = comm["link"]
    log("%s: gloo link fit alpha %.1f us, beta %.2f GB/s (max rel residual %.0f%%); all_reduce vs ring model: "
        "mean |err| %.0f%%, mean err >= 1 MiB %+.0f%%" % (PROG, link["latency_us"], link["bandwidth_gbs"],
                                                          100 * link["max_rel_residual"],
                                                          100 * comm["allreduce_ring_fit"]["mean_abs_rel_err"],
                                                          100 * (comm["allreduce_ring_fit"]["mean_rel_err_ge_1MiB"] or 0)))
    clusters = {}
    ar_fit = None if args.p2p_allreduce else comm.get("allreduce_as_ring_d2_fit")
    if ar_fit:  # the peer's own model prices all-reduces as the planner does
        link = dict(link, allreduce=ar_fit)
    for c in CLUSTERS:
        clusters[c] = cluster_json(c, link, ar_fit)
        files["cluster-" + c] = os.path.join(args.out, "cluster-%s.json" % c)
        with open(files["cluster-" + c], "w") as f:
            json.dump(clusters[c], f, indent=1)
    if args.only == "comm":
        return 0
    # 3. correctness
    status = 0
    checks = []
    if not args.skip_check:
        for cname, dp, pp, mbs, split, order in (("fs", 1, 2, 2, [3, 5], ["slow", "fast"]),
                                                 ("fs", 2, 1, 2, [cfg.layers], ["fast", "slow"])):
            pl = make_plan(cfg, clusters[cname], dp, pp, mbs, split, order)
            log("%s: correctness, one step of %s against one process" % (PROG, describe(pl)))
            try:
                rec = check_plan(args, cfg, model_json, clusters[cname], pl, G, torch, "check-%s-dp%dpp%d" % (cname, dp, pp))
            except RuntimeError as e:
                rec = {"plan": describe(pl), "ok": False, "error": str(e)}
            checks.append(rec)
            log("  %s: loss %.6f vs %.6f (rel %.1e), grads max err %.1e of max|g| (%s), params %.2f of allowed (%s)"
                % ("ok" if rec["ok"] else "FAILED", rec.get("loss_pipeline", float("nan")), rec.get("loss_single", float("nan")),
                   rec.get("loss_rel_err", float("nan")), rec.get("grad_max_err_rel_to_max", float("nan")),
                   rec.get("grad_worst_tensor", "-"), rec.get("param_max_err_over_allowed", float("nan")),
                   rec.get("param_worst_tensor", rec.get("error", "-"))))
            if not rec["ok"]:
                status = 1
    if args.only == "check":
        return status
    # 4. plans
    planner = Planner(args.tessera, files) if args.estimator == "planner" else None
    try:
        runs = build_runs(args, cfg, clusters, profile, link, G, planner)
    except (RuntimeError, ValueError, KeyError, json.JSONDecodeError, subprocess.TimeoutExpired) as e:
        log("%s: the planner failed: %s" % (PROG, e))
        return 2
    sentinel_runs = {}
    sentinels = []
    if not args.no_sentinel:
        try:
            sentinels = make_sentinels(cfg, clusters, profile, link, G, planner)
        except (RuntimeError, KeyError, ValueError, json.JSONDecodeError) as e:
            log("%s: no sentinels (%s)" % (PROG, e))
    expect = args.rounds * sum((args.warmup + args.steps) * (p.get("estimate", {}).get("step_ms") or 0) / 1e3 + STARTUP_S
                               for _, p, _ in runs)
    expect += 3 * sum(4 * p["estimate"]["step_ms"] / 1e3 + STARTUP_S for _, p in sentinels)
    log("%s: %d plans, about %.0f s if the estimates hold (%d warm-up + %d timed steps each)" % (
        PROG, len(runs), expect, args.warmup, args.steps))
    if args.dry_run:
        for i, (cname, plan, source) in enumerate(runs):
            pe = G.peer_estimate(dict(plan, rank_types=rank_types(plan, clusters[cname])), cfg, profile, link)
            print("%3d %-3s %-52s %-34s %8.0f ms (peer model %.0f)" % (
                i + 1, cname, describe(plan), "; ".join(source)[:34],
                plan.get("estimate", {}).get("step_ms") or float("nan"), pe["step_ms"]))
        return status
    if sentinels:
        run_sentinels(args, cfg, model_json, clusters, sentinels, G, "start", sentinel_runs)
    rows = []
    for i, (cname, plan, source) in enumerate(runs):
        est = plan.get("estimate", {})
        row = {"cluster": cname, "source": source, "config": describe(plan), "plan": plan,
               "estimate_ms": est.get("step_ms"), "estimate": est, "rounds": []}
        try:
            row["peer_estimate"] = G.peer_estimate(dict(plan, rank_types=rank_types(plan, clusters[cname])),
                                                   cfg, profile, link)
        except (KeyError, ValueError) as e:
            row["peer_estimate"] = {"error": str(e)}
        if args.corun:
            try:
                if planner:
                    pc = planner.estimate(cname, plan["dp"], len(plan["stages"]), plan["mbs"],
                                          [st["layers"][1] for st in plan["stages"]] if len(plan["stages"]) > 1 else None,
                                          plan["node_order"], profile="profile-corun")
                    row["estimate_corun_ms"] = pc["estimate"]["step_ms"]
                else:
                    row["estimate_corun_ms"] = G.peer_estimate(dict(plan, rank_types=rank_types(plan, clusters[cname])),
                                                               cfg, profile_co, link)["step_ms"]
            except (RuntimeError, KeyError, ValueError, json.JSONDecodeError) as e:
                row["estimate_corun_error"] = str(e)
        rows.append(row)
    # Round r runs the plans in order (odd rounds in reverse, so that a drift of the machine's
    # speed does not always favour the same plans); a plan's timed steps of every round are pooled.
    order = [(r, i) for r in range(args.rounds) for i in (range(len(rows)) if r % 2 == 0 else reversed(range(len(rows))))]
    for k, (rnd, i) in enumerate(order):
        if sentinels and k == len(order) // 2 and k > 0:
            run_sentinels(args, cfg, model_json, clusters, sentinels, G, "middle", sentinel_runs)
        row, cname, plan = rows[i], rows[i]["cluster"], rows[i]["plan"]
        if "error" in row:
            continue
        log("[%d/%d] %s: %s (%s)%s: estimate %s ms ..." % (
            k + 1, len(order), cname, row["config"], "; ".join(row["source"]),
            " round %d" % (rnd + 1) if args.rounds > 1 else "",
            "%.0f" % row["estimate_ms"] if row["estimate_ms"] else "-"))
        t0 = time.time()
        try:
            if plan["micro_batches"] * plan["dp"] * plan["mbs"] != cfg.global_batch:
                raise RuntimeError("micro_batches * dp * mbs != global_batch")
            stats = {}
            res, types = execute(args, cfg, model_json, clusters[cname], plan, G, "plan%02d-r%d" % (i + 1, rnd + 1),
                                 stats=stats)
        except RuntimeError as e:
            row["error"] = str(e)
            log("    FAILED: %s" % e)
            status = 1
            continue
        br = rank_breakdown(plan, res, types, profile, cfg)
        q1, med, q3 = quantiles(res[0]["step_ms"])
        comp = sum(b["fwd_ms"] + b["bwd_ms"] for b in br) / sum(b["fwd_profile_ms"] + b["bwd_profile_ms"] for b in br)
        row["rank_types"] = types
        row["rounds"].append({"steps_ms": res[0]["step_ms"], "ranks": br, "compute_over_profile": comp,
                              "loss_last_step": next(r["loss_per_step"][-1] for r in res if r["loss_per_step"]),
                              "run_wall_s": stats["wall_s"], "foreign_cpu_frac": stats["foreign_cpu_frac"]})
        log("    measured %.0f ms (IQR %.0f..%.0f), error %+.1f%%, compute %.2fx the profile's, %.0f s, "
            "other load %.0f%% of the CPUs%s" % (
                med, q1, q3, (row["estimate_ms"] - med) / med * 100 if row["estimate_ms"] else float("nan"), comp,
                time.time() - t0, 100 * stats["foreign_cpu_frac"],
                "  <- NOT QUIET" if stats["foreign_cpu_frac"] > NOISY else ""))
    for row in rows:
        if not row["rounds"] or "error" in row:
            continue
        plan = row["plan"]
        steps = [t for rd in row["rounds"] for t in rd["steps_ms"]]
        q1, med, q3 = quantiles(steps)
        # per rank: the mean over the rounds of each round's medians
        ranks = []
        for j in range(len(row["rounds"][0]["ranks"])):
            per = [rd["ranks"][j] for rd in row["rounds"]]
            ranks.append({k: (statistics.mean(p[k] for p in per) if isinstance(v, (int, float)) and
                              not isinstance(v, bool) and k not in ("rank", "stage") else v)
                          for k, v in per[0].items()})
        row["measured"] = {"median_ms": med, "q1_ms": q1, "q3_ms": q3, "steps_ms": steps, "ranks": ranks,
                           "compute_over_profile": statistics.mean(rd["compute_over_profile"] for rd in row["rounds"]),
                           "foreign_cpu_frac": max(rd["foreign_cpu_frac"] for rd in row["rounds"]),
                           "loss_last_step": row["rounds"][-1]["loss_last_step"]}
        # replay: the peer's model with each rank's measured compute and update times in place of
        # the profile's; what is left of the error is the schedule / communication model's
        try:
            meas = {b["rank"]: {"fwd_mb": b["fwd_ms"] / plan["micro_batches"],
                                "bwd_mb": b["bwd_ms"] / plan["micro_batches"], "update": b["update_ms"]} for b in ranks}
            row["replay_ms"] = G.peer_estimate(dict(plan, rank_types=row["rank_types"]), cfg, profile, link, meas)["step_ms"]
            row["replay_error_pct"] = (row["replay_ms"] - med) / med * 100
        except (KeyError, ValueError) as e:
            row["replay_error"] = str(e)
        if row["estimate_ms"]:
            row["error_pct"] = (row["estimate_ms"] - med) / med * 100
        if row.get("estimate_corun_ms"):
            row["error_corun_pct"] = (row["estimate_corun_ms"] - med) / med * 100
    if sentinels:
        run_sentinels(args, cfg, model_json, clusters, sentinels, G, "end", sentinel_runs)
    for ent in sentinel_runs.values():
        ms = [r["median_ms"] for r in ent["runs"]]
        ent["spread_pct"] = (max(ms) / min(ms) - 1) * 100
        ent["error_pct"] = [(ent["estimate_ms"] - m) / m * 100 for m in ms]
    meta["loadavg_end"] = list(os.getloadavg())
    meta["wall_s"] = time.time() - t_start
    summ = summarize(rows)
    summ["sentinels"] = sentinel_runs
    report = {"meta": meta, "model": model_json, "link": link, "comm_summary": comm["allreduce_ring_fit"],
              "checks": checks, "summary": summ, "rows": rows}
    with open(os.path.join(args.out, "gloo.json"), "w") as f:
        json.dump(report, f, indent=1)
    svg_scatter(rows, os.path.join(args.out, "estimate_vs_measured.svg"))
    # table
    print("%s: %s, torch %s, %s; knob %s (slow/fast fwd+bwd %s); link alpha %.1f us beta %.2f GB/s; estimates from %s" % (
        PROG, meta["date"], torch.__version__, meta["cpu"]["model_name"], args.knob,
        "/".join("%.2fx" % ratio[k]["model_fwd_bwd"] for k in ratio), link["latency_us"], link["bandwidth_gbs"],
        "tessera plan3d" if planner else "the peer's own model (--estimator peer)"))
    print("%3s %-3s %-52s %-26s %9s %9s %9s %17s %8s %9s %8s %6s" % ("#", "cl", "plan", "source", "est ms", "peer ms",
                                                                     "meas ms", "IQR", "err %", "co err %", "replay%",
                                                                     "comp"))
    for i, r in enumerate(rows):
        m = r.get("measured")
        pe = r.get("peer_estimate", {}).get("step_ms")
        print("%3d %-3s %-52s %-26s %9s %9s %9s %17s %8s %9s %8s %6s" % (
            i + 1, r["cluster"], r["config"], r["source"][0][:26], "%.0f" % r["estimate_ms"] if r["estimate_ms"] else "-",
            "%.0f" % pe if pe else "-", "%.0f" % m["median_ms"] if m else "FAIL",
            "%.0f..%.0f" % (m["q1_ms"], m["q3_ms"]) if m else "", "%+.1f" % r["error_pct"] if "error_pct" in r else "-",
            "%+.1f" % r["error_corun_pct"] if "error_corun_pct" in r else "-",
            "%+.1f" % r["replay_error_pct"] if "replay_error_pct" in r else "-",
            "%.2f" % m["compute_over_profile"] if m else "-"))
    if "mean_abs_error_pct" in summ:
        print("mean |error| %.1f%% (median %.1f%%) over %d plans; worst #%d %s %s: %+.1f%%" % (
            summ["mean_abs_error_pct"], summ["median_abs_error_pct"], summ["plans_run"], summ["worst"]["index"],
            summ["worst"]["cluster"], summ["worst"]["plan"], summ["worst"]["error_pct"]))
        print("by kind: " + "; ".join("%s (%d): mean error %+.1f%%, compute %.2fx the profile's, replay error %s" % (
            k, v["plans"], v["mean_error_pct"], v["median_compute_over_profile"],
            "%+.1f%%" % v["mean_replay_error_pct"] if v["mean_replay_error_pct"] is not None else "-")
            for k, v in summ["by_kind"].items()))
        if "mean_abs_replay_error_pct" in summ:
            print("replay (the same cost model fed each run's measured compute and update times): mean |error| "
                  "%.1f%% (mean %+.1f%%): the part of the error that is not the profile's compute times" % (
                      summ["mean_abs_replay_error_pct"], summ["mean_replay_error_pct"]))
        if "mean_abs_error_corun_pct" in summ:
            print("with the co-run profile: mean |error| %.1f%%; each plan with the profile of its own conditions "
                  "(alone: 1 process, co-run: 2): mean |error| %.1f%%, worst %.1f%%" % (
                      summ["mean_abs_error_corun_pct"], summ["mean_abs_error_matched_pct"], summ["worst_matched_pct"]))
        for c, e in summ["per_cluster"].items():
            if "top1" in e:
                print("  %-2s top-1 %s: %.0f ms, measured fastest %s: %.0f ms -> %s (%+.1f%%%s)%s" % (
                    c, e["top1"], e["top1_ms"], e["measured_fastest"], e["measured_fastest_ms"],
                    "fastest" if e["top1_is_fastest"] else "within 5%" if e["top1_within_5pct"] else "NOT within 5%",
                    e["top1_gap_pct"], ", IQRs overlap" if not e["top1_is_fastest"] and e["top1_iqr_overlaps_fastest"] else "",
                    "; spearman %.2f" % e["spearman"] if "spearman" in e else ""))
    for c, ent in sentinel_runs.items():
        print("sentinel %s %s, same plan at %s: %s ms (spread %.1f%%), estimate %.0f ms: error %s" % (
            c, ent["plan"], "/".join(r["when"] for r in ent["runs"]), "/".join("%.0f" % r["median_ms"] for r in ent["runs"]),
            ent["spread_pct"], ent["estimate_ms"], "/".join("%+.1f%%" % e for e in ent["error_pct"])))
    for c in checks:
        print("check %s: %s" % (c["plan"], "ok" if c["ok"] else "FAILED"))
    if summ.get("plans_not_quiet"):
        print("WARNING: other processes used > %d%% of the CPUs during plans %s: their timings are not "
              "representative; rerun on a quiet machine" % (100 * NOISY, summ["plans_not_quiet"]))
    print("wrote %s (%.0f s)" % (os.path.join(args.out, "gloo.json"), meta["wall_s"]))
    return status


if __name__ == "__main__":
    sys.exit(main())
