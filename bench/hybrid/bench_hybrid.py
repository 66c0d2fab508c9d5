#!/usr/bin/env python3
"""The hybrid controller's targets (issue 38) on the local engine, interleaved: every scenario runs
cpu, gpu, each static split and auto in turn, REPEATS rounds; the median makespan per mode. Reports
auto against the oracle split (the median over the auto runs of each run's makespan over its own
oracle: the oracle takes the run's measured task times, so it moves with the machine), against the
best static split and the static split the probe would
choose (its initial decision, held without the monitor), and the tail gap; an SVG timeline of each
scenario's auto run. The device is the modelled one (`tessera hybrid device`), as every report says.

    bench/hybrid/bench_hybrid.py --tessera build/tessera --out results/DATE-hybrid [--repeats 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scenarios(text):
    return [
        ("wordcount", ["--job", "wordcount", "--input", text, "--repeat", "16000", "--blocks", "96"], None),
        ("grep", ["--job", "grep", "--input", text, "--repeat", "32000", "--blocks", "96", "--pattern", "love"], None),
        ("kmeans", ["--job", "kmeans", "--input", "gen:points=1000000,d=16,k=8,seed=1", "--blocks", "48", "--rounds", "3"], None),
        ("gemm", ["--job", "gemm", "--input", "gen:records=393216,in=1024,out=1024,seed=1", "--blocks", "96"], None),
        # task costs that vary over time: batch sizes change mid-job (small batches are transfer-,
        # launch- and feed-bound on the device) ...
        ("gemm-phases", ["--job", "gemm", "--input", "gen:records=393216,in=1024,out=1024,seed=2,batches=8/1024/8",
                         "--blocks", "96"], None),
        # ... and a co-tenant that arrives halfway through the job (as the device alone runs it, i.e.
        # after the probe and the initial decision) and then takes 97% of the device's compute
        ("wordcount-cotenant", ["--job", "wordcount", "--input", text, "--repeat", "16000", "--blocks", "96"], "half:0.97"),
        ("gemm-cotenant", ["--job", "gemm", "--input", "gen:records=393216,in=1024,out=1024,seed=1", "--blocks", "96"],
         "half:0.97"),
    ]


def run(tessera, args, mode, tenant, slots, cores, svg=None):
    cmd = [tessera, "hybrid", "run"] + args + ["--mode", mode, "--slots", str(slots), "--cores", str(cores), "--json", "--quiet"]
    if tenant:
        cmd += ["--tenant", tenant]
    if svg:
        cmd += ["--svg", svg]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench_hybrid: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tessera"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    text = subprocess.run([os.path.join(ROOT, "scripts", "get-llm-text.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()
    modes = ["cpu", "gpu"] + ["static:%d" % k for k in range(1, a.slots)] + ["auto"]
    results = []
    for name, args, tenant in scenarios(text):
        if a.only and name not in a.only.split(","):
            continue
        # the reference pass, made now on this quiet machine (its timings are the probe's and the oracle's)
        run(a.tessera, args + ["--fresh"], "gpu", None, a.slots, a.cores)
        if tenant and tenant.startswith("half:"):  # the co-tenant's arrival: half the device-only makespan
            half = statistics.median(run(a.tessera, args, "gpu", None, a.slots, a.cores)["makespan_s"] for _ in range(3)) / 2
            tenant = "%.4f:100000:%s" % (half, tenant.split(":")[1])
        ms = {m: [] for m in modes}
        last = {}
        auto_ratio = []  # each auto run over its own oracle (the oracle uses the run's measured task times)
        for r in range(a.repeats):
            for m in modes:
                svg = os.path.join(a.out, "%s-auto.svg" % name) if (m == "auto" and r == a.repeats - 1) else None
                rep = run(a.tessera, args, m, tenant, a.slots, a.cores, svg)
                ms[m].append(rep["makespan_s"])
                last[m] = rep
                if m == "auto":
                    auto_ratio.append(rep["makespan_s"] / rep["oracle"]["makespan_s"])
                print("  %-20s %-9s round %d: %.3f s" % (name, m, r + 1, rep["makespan_s"]), file=sys.stderr)
        med = {m: statistics.median(v) for m, v in ms.items()}
        auto = last["auto"]
        init_k = auto["initial"]["device_containers"]
        probe_mode = "cpu" if init_k == 0 else "gpu" if init_k == a.slots else "static:%d" % init_k
        statics = {m: med[m] for m in modes if m != "auto"}
        best_static = min(statics, key=statics.get)
        row = {
            "scenario": name, "tenant": tenant, "median_s": med, "runs_s": ms,
            "oracle_s": med["auto"] / statistics.median(auto_ratio), "oracle_k": auto["oracle"]["device_containers"],
            "auto_over_oracle": statistics.median(auto_ratio), "auto_over_oracle_runs": auto_ratio,
            "best_static": best_static, "best_static_over_auto": med[best_static] / med["auto"],
            "probe_static": probe_mode, "probe_static_over_auto": med[probe_mode] / med["auto"],
            "cpu_over_auto": med["cpu"] / med["auto"],
            "tail_gap_frac": auto["tail"]["gap_frac"], "tail_both_classes": auto["tail"]["both_classes"],
            "reassignments": len(auto["reassignments"]), "auto_tasks": auto["tasks"],
            "output_ok": all(last[m]["output_ok"] for m in modes), "device": auto["device"],
            "provenance": auto["provenance"],
        }
        results.append(row)
        print("%-20s auto %.3f s, oracle %.3f (%.2fx), best static %s %.3f (%.2fx of auto), probe's static %s (%.2fx), "
              "cpu %.2fx, tail gap %.1f%%, %d role changes, output %s" % (
                  name, med["auto"], row["oracle_s"], row["auto_over_oracle"], best_static, med[best_static],
                  row["best_static_over_auto"], probe_mode, row["probe_static_over_auto"], row["cpu_over_auto"],
                  100 * row["tail_gap_frac"], row["reassignments"], "ok" if row["output_ok"] else "WRONG"))
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"bench": "hybrid", "date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": git, "slots": a.slots,
           "cores": a.cores, "repeats": a.repeats, "engine": "local", "scenarios": results}
    with open(os.path.join(a.out, "hybrid.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s" % os.path.join(a.out, "hybrid.json"), file=sys.stderr)


if __name__ == "__main__":
    main()
