#!/usr/bin/env python3
"""tessera's pipeline runtime (`tessera pipe bench`) against two peers running the same apps with
the same stage kernels: OpenMP tasks with depend clauses (pipe_omp) and a oneTBB flow graph
(pipe_tbb), both built by cmake/pipe_peers.cmake into <build>/bench/peers.

Each contender runs at its best:
  tessera  --granularity auto (the runtime picks the tile online: what is being measured)
  pipe_omp --tile WxH --order O, the fastest of its own sweep (`--tile best`: every tile of
           ts_pipe_ladder, with both task creation orders, timed), found once per app before the
           rounds; then OMP_WAIT_POLICY (active / passive) x OMP_PROC_BIND (false / close)
           measured at that tile (two passes, the second in reverse order; the sweep itself runs
           with active, false), and the fastest kept for the rounds (short tasks usually favour
           active waiting; on a shared or oversubscribed machine passive can win, so it is
           measured, not assumed)
  pipe_tbb --tile WxH, likewise from its own sweep (TBB has no wait-policy setting)
tessera and pipe_tbb run with the OMP_* variables removed from the environment (libgomp is linked
into every tessera binary; a spinning policy would only steal cycles from them).

Then R interleaved rounds: in each round every app, and for each app the three contenders in an
order rotated round by round (so drift and warm caches do not favour one). Each invocation runs
--repeats in-process runs and reports their median wall clock (the whole run of all frames); the
figure per contender and app is the median over the rounds. ratio = tessera / peer time (< 1:
tessera faster). Before the rounds each contender runs once with --check (every frame bit-exact
against ts_pipe_app_reference) unless --no-check.

Noise: for every invocation the CPU time other processes took meanwhile (/proc/stat busy time less
this script's children's) is kept, as a fraction of the machine; rounds above 5% are flagged.

Writes results/<date>-pipe-peers/peers.json (or --out) and prints a table.

Usage: pipe_peers.py [--build DIR] [--apps edge,heat,...] [--size 1024x1024] [--frames 32]
                     [--threads 2] [--inflight 2] [--rounds 5] [--repeats 3] [--sweep-frames N]
                     [--out FILE] [--no-check] [--no-env-tune]
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile

APPS = ["edge", "heat", "isp", "flow", "life", "cnn"]
OMP_VARS = ("OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_SPINCOUNT")
ENV_CANDIDATES = [
    {"OMP_WAIT_POLICY": "active", "OMP_PROC_BIND": "false"},
    {"OMP_WAIT_POLICY": "active", "OMP_PROC_BIND": "close"},
    {"OMP_WAIT_POLICY": "passive", "OMP_PROC_BIND": "false"},
    {"OMP_WAIT_POLICY": "passive", "OMP_PROC_BIND": "close"},
]
ENV_PASSES = 2
# the sweep runs under the policy expected to be best for short tasks; the policy is then measured
SWEEP_ENV = {"OMP_WAIT_POLICY": "active", "OMP_PROC_BIND": "false"}


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    env.update(extra or {})
    return env


def cpu_busy():
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def run_json(cmd, env, timeout=3600):
    """Runs cmd, parses its JSON stdout; also the share of the machine other processes used."""
    b0, t0 = cpu_busy()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b1, t1 = cpu_busy()
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()[-2000:]))
    try:
        j = json.loads(p.stdout)
    except ValueError as e:
        raise RuntimeError("%s: no JSON on stdout (%s): %s" % (" ".join(cmd), e, p.stdout[-500:]))
    hz = os.sysconf("SC_CLK_TCK")
    own = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * hz
    other = max(0.0, (b1 - b0) - own) / max(1, t1 - t0)
    return j, other


def first_line(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
    except (OSError, IndexError):
        return None


def machine_info():
    model = None
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        model = m.group(1).strip() if m else None
    except OSError:
        pass
    return {
        "cpu_model": model,
        "nproc": os.cpu_count(),
        "nproc_available": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "gcc": first_line(["gcc", "--version"]),
        "g++": first_line(["g++", "--version"]),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
    }


def contender_cmd(name, bins, a, app, tile=None, repeats=None, check=False, order=None):
    reps = str(repeats if repeats is not None else a.repeats)
    common = ["--app", app, "--size", a.size, "--frames", str(a.frames), "--threads", str(a.threads),
              "--inflight", str(a.inflight), "--repeats", reps, "--json"]
    if name == "tessera":
        cmd = [bins["tessera"], "pipe", "bench", "--granularity", "auto"] + common
    elif name == "tessera_offline":  # its own offline sweep (`pipe tune`, kept in the artifact store), like the peers'
        cmd = [bins["tessera"], "pipe", "bench", "--granularity", "offline"] + common
    else:
        cmd = [bins[name]] + common + ["--tile", tile or "best"]
        if a.sweep_frames:
            cmd += ["--sweep-frames", str(a.sweep_frames)]
        if order:  # pipe_omp's task creation order (swept with the tile)
            cmd += ["--order", order]
    return cmd + (["--check"] if check else [])


def write_atomic(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("TESSERA_BUILD", "build"))
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--size", default="1024x1024")
    ap.add_argument("--frames", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="in-process runs per invocation (median)")
    ap.add_argument("--sweep-frames", type=int, default=0, help="frames per sweep run (peers' default: min(frames, 8))")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-env-tune", action="store_true", help="run pipe_omp with SWEEP_ENV, unmeasured")
    a = ap.parse_args()
    if not re.fullmatch(r"\d+x\d+", a.size):
        ap.error("--size '%s': expected WxH" % a.size)
    apps = [x for x in a.apps.split(",") if x]
    bad = [x for x in apps if x not in APPS]
    if bad:
        ap.error("unknown app(s) %s (%s)" % (",".join(bad), ",".join(APPS)))

    bins = {"tessera": os.path.join(a.build, "tessera"),
            "pipe_omp": os.path.join(a.build, "bench", "peers", "pipe_omp"),
            "pipe_tbb": os.path.join(a.build, "bench", "peers", "pipe_tbb")}
    missing = {k: v for k, v in bins.items() if not os.access(v, os.X_OK)}
    if "tessera" in missing or "pipe_omp" in missing:
        sys.exit("pipe_peers: %s not built (cmake --build %s --target tessera_cli pipe_omp pipe_tbb)"
                 % (", ".join(missing.values()), a.build))
    contenders = ["tessera", "tessera_offline", "pipe_omp"] + ([] if "pipe_tbb" in missing else ["pipe_tbb"])
    peers = [c for c in contenders if not c.startswith("tessera")]
    if "pipe_tbb" in missing:
        print("pipe_peers: %s not built (oneTBB missing?): the TBB peer is left out" % bins["pipe_tbb"], file=sys.stderr)

    date = datetime.date.today().isoformat()
    out = a.out or os.path.join("results", "%s-pipe-peers" % date, "peers.json")
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "config": {"apps": apps, "size": a.size, "frames": a.frames, "threads": a.threads,
                         "inflight": a.inflight, "rounds": a.rounds, "repeats": a.repeats,
                         "sweep_frames": a.sweep_frames or None},
              "machine": machine_info(), "commands": {}, "apps": {}}
    app_env = {}  # pipe_omp's environment per app

    # 1. each peer's best tile (its own sweep), once per app; then pipe_omp's best environment there
    tiles, orders = {}, {}
    for app in apps:
        rec = report["apps"].setdefault(app, {"sweeps": {}, "env_tune": [], "rounds": [], "check": {}})
        tiles[app], orders[app] = {}, {}
        for p in peers:
            env = clean_env(SWEEP_ENV if p == "pipe_omp" else None)
            cmd = contender_cmd(p, bins, a, app, tile="best", repeats=1)
            print("[sweep] %s %s ..." % (p, app), file=sys.stderr, flush=True)
            j, other = run_json(cmd, env)
            tiles[app][p] = "%dx%d" % (j["tile_w"], j["tile_h"])
            orders[app][p] = j.get("order")
            rec["sweeps"][p] = {"command": " ".join(cmd), "env": {k: env[k] for k in OMP_VARS if k in env},
                                "best_tile": tiles[app][p], "best_order": orders[app][p],
                                "sweep_frames": j.get("sweep_frames"),
                                "sweep": j.get("sweep"), "other_load": other}
            report["versions_" + p] = {"runtime": j.get("runtime"), "compiler": j.get("compiler")}
        app_env[app] = dict(SWEEP_ENV)
        if "pipe_omp" in peers and not a.no_env_tune:
            # two passes over the candidates, the second in reverse order; the median (mean) of each
            times = {i: [] for i in range(len(ENV_CANDIDATES))}
            cmd = contender_cmd("pipe_omp", bins, a, app, tile=tiles[app]["pipe_omp"], order=orders[app]["pipe_omp"])
            for pas in range(ENV_PASSES):
                seq = list(range(len(ENV_CANDIDATES)))
                for i in (seq if pas % 2 == 0 else seq[::-1]):
                    j, other = run_json(cmd, clean_env(ENV_CANDIDATES[i]))
                    times[i].append(j["wall_s"])
                    rec["env_tune"].append({"env": ENV_CANDIDATES[i], "pass": pas, "wall_s": j["wall_s"],
                                            "other_load": other})
            best = min(times, key=lambda i: statistics.median(times[i]))
            app_env[app] = dict(ENV_CANDIDATES[best])
        rec["omp_env"] = app_env[app]

    # 2. correctness: every contender once with --check at the measured configuration
    if not a.no_check:
        for app in apps:
            for c in contenders:
                env = clean_env(app_env[app]) if c == "pipe_omp" else clean_env()
                cmd = contender_cmd(c, bins, a, app, tile=tiles[app].get(c), repeats=1, check=True,
                                    order=orders[app].get(c))
                print("[check] %s %s ..." % (c, app), file=sys.stderr, flush=True)
                j, _ = run_json(cmd, env)
                report["apps"][app]["check"][c] = {"frames_mismatched": j.get("frames_mismatched")}

    # 3. interleaved rounds
    for r in range(a.rounds):
        for app in apps:
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            row = {"round": r, "order": order}
            for c in order:
                env = clean_env(app_env[app]) if c == "pipe_omp" else clean_env()
                cmd = contender_cmd(c, bins, a, app, tile=tiles[app].get(c), order=orders[app].get(c))
                report["commands"].setdefault("%s/%s" % (c, app), {"command": " ".join(cmd),
                                                                   "env": {k: env[k] for k in OMP_VARS if k in env}})
                j, other = run_json(cmd, env)
                row[c] = {"wall_s": j["wall_s"], "repeats_wall_s": j.get("repeats_wall_s"), "other_load": other}
                if c == "tessera":
                    row[c]["granularity_over_frames"] = j.get("granularity_over_frames")
            row["noisy"] = any(row[c]["other_load"] > 0.05 for c in contenders)
            report["apps"][app]["rounds"].append(row)
            print("[round %d/%d] %s: %s" % (r + 1, a.rounds, app,
                  "  ".join("%s %.1f ms" % (c, row[c]["wall_s"] * 1e3) for c in contenders)), file=sys.stderr, flush=True)

    # 4. summary
    wins_all, wins = 0, {p: 0 for p in peers}
    for app in apps:
        rec = report["apps"][app]
        med = {c: statistics.median(x[c]["wall_s"] for x in rec["rounds"]) for c in contenders}
        rec["median_wall_s"] = med
        px = (lambda c: float(a.size.split("x")[0]) * float(a.size.split("x")[1]) * a.frames / med[c] / 1e6)
        rec["median_mpix_per_s"] = {c: px(c) for c in contenders}
        rec["ratio_tessera_over"] = {p: med["tessera"] / med[p] for p in peers}
        rec["ratio_tessera_offline_over"] = {p: med["tessera_offline"] / med[p] for p in peers}
        rec["tessera_offline_wins"] = all(med["tessera_offline"] < med[p] for p in peers)
        rec["tiles"] = tiles[app]
        rec["omp_order"] = orders[app].get("pipe_omp")
        rec["tessera_wins"] = all(med["tessera"] < med[p] for p in peers)
        rec["noisy_rounds"] = sum(1 for x in rec["rounds"] if x["noisy"])
        wins_all += rec["tessera_wins"]
        for p in peers:
            wins[p] += med["tessera"] < med[p]
    report["summary"] = {"apps": len(apps), "tessera_faster_than_every_peer": wins_all,
                         "tessera_faster_than": wins,
                         "tessera_offline_faster_than_every_peer": sum(
                             1 for app in apps if report["apps"][app]["tessera_offline_wins"])}
    report["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    write_atomic(out, report)

    hdr = "%-6s %12s" % ("app", "tessera ms") + "".join(" %20s %8s" % (p + " ms (tile)", "t/" + p[5:]) for p in peers) + "  winner  noisy"
    print(hdr)
    for app in apps:
        rec = report["apps"][app]
        med = rec["median_wall_s"]
        line = "%-6s %12.2f" % (app, med["tessera"] * 1e3)
        for p in peers:
            line += " %20s %8.3f" % ("%.2f (%s)" % (med[p] * 1e3, tiles[app][p]), rec["ratio_tessera_over"][p])
        winner = min(contenders, key=lambda c: med[c])
        line += "  %-7s %d/%d" % (winner, rec["noisy_rounds"], a.rounds)
        print(line)
    print("tessera faster than every peer on %d of %d apps (%s); %s, %d threads, %d frames, %d rounds x %d repeats"
          % (wins_all, len(apps), ", ".join("vs %s: %d" % (p, wins[p]) for p in peers), a.size, a.threads, a.frames,
             a.rounds, a.repeats))
    print("wrote %s" % out)


if __name__ == "__main__":
    main()
