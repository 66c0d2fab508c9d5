#!/usr/bin/env python3
"""GPU side by side: tessera's CUDA attention kernels (bench_attn_cuda) against PyTorch on the same
GPU, in one run: scaled_dot_product_attention with the boolean mask, and FlexAttention with a
BlockMask (torch.compile), fp32 and bf16.

For each workload SPEC: `tessera pattern SPEC --out m.npy` writes the n x n mask; `tessera attn
plan` makes the same CPU-scheduler plan as scripts/gpu-check.sh (greedy, analytic cost, no compact
passes); `bench_attn_cuda --plan` times tessera's kernels (dense_flash, fixed_64, fixed_best,
fixed_best_reordered, variable, gather: R back-to-back launches after 3 warm-ups, mean per
launch); the speedups are tessera's gather plan (its GPU tile assignment) against each peer. Torch
runs the same shape (batch, heads, n, d) on the same device, timed the same way: R back-to-back
calls between two CUDA events after 3 warm-ups; --groups such groups, median of the group means.
TF32 is off for torch (fp32 means fp32, as in tessera's kernels, which use CUDA cores).

Correctness: head (0, 0) of each torch output against a float64 masked softmax computed on the
GPU (bf16: on the bf16-rounded inputs), tolerance as a fraction of max|V|: fp32 1e-4, bf16 2e-2.
tessera's own check is bench_attn_cuda's max_abs_err (head 0 against ts_attn_reference).

Usage: attn_torch_cuda.py [--tessera BIN] [--bench BIN] [--spec SPEC ...] [--batch 4] [--heads 12]
                          [--head-dim 64] [--reps 20] [--groups 5] [--dtypes f32,bf16]
                          [--flex-blocks 128] [--no-flex] [--json-out FILE] [--device cuda|cpu]
BIN defaults: build-gpu/tessera and build-gpu/bench/bench_attn_cuda under the repository root.
Needs torch with CUDA in the running interpreter (it creates no venv: the GPU machine has its
own torch). Each row is printed as soon as it is measured (JSON lines on stdout, table at the
end), so a run cut short keeps what it measured. Exit status: 0 ok, 1 when a check fails or a
tool fails, 2 on bad usage or without a CUDA device."""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPECS = ["window2d:h=64,w=64,k=13", "swin:h=56,w=56,win=7,shift=1", "vitdet:h=64,w=64,win=14,global=4"]
TOL = {"f32": 1e-4, "bf16": 2e-2}
SEED = 20240601


def reason(e):
    msg = str(e).strip().splitlines()
    line = "%s: %s" % (type(e).__name__, msg[0] if msg else "")
    return line if len(line) <= 200 else line[:197] + "..."


def gpu_ms(torch, fn, reps, groups):
    """Median over `groups` of the mean time (ms) of `reps` back-to-back calls, after 3 warm-ups
    (CUDA events; wall clock with --device cpu, which only smoke-tests this script)."""
    for _ in range(3):
        fn()
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
    means = []
    for _ in range(groups):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        if cuda:
            b.record()
            b.synchronize()
            means.append(a.elapsed_time(b) / reps)
        else:
            means.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(means), min(means)


def reference(torch, q, k, v, mask):
    """float64 masked softmax attention of one head on the GPU: q, k, v [n][d], mask [n][n] bool."""
    q, k, v = (x.double() for x in (q, k, v))
    s = (q @ k.T) / math.sqrt(q.shape[1])
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=1)
    return p @ v


def check(torch, out, ref, vmax, tol):
    err = float((out.double() - ref).abs().max()) / vmax
    return {"max_err": err, "tol": tol, "ok": bool(math.isfinite(err) and err <= tol)}


def tessera_bench(args, spec, plan, dt):
    cmd = [args.bench, "--mask", spec, "--heads", str(args.heads), "--d", str(args.head_dim), "--batch",
           str(args.batch), "--reps", str(args.reps), "--dtype", dt]
    if plan:
        cmd += ["--plan", plan]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"reason": "bench_attn_cuda exited %d: %s" % (p.returncode, p.stderr.strip()[-300:])}
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        return {"reason": "bad JSON from bench_attn_cuda: " + reason(e)}


def measure(args, spec, torch, F, flex, tmp):
    path = os.path.join(tmp, "m.npy")
    p = subprocess.run([args.tessera, "pattern", spec, "--out", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("tessera pattern %s exited %d: %s" % (spec, p.returncode, p.stderr.strip()))
    import numpy as np
    mask_np = np.load(path).astype(bool)
    n = mask_np.shape[0]
    plan = os.path.join(tmp, "plan.json")
    p = subprocess.run([args.tessera, "attn", "plan", "--pattern", spec, "--heads", str(args.heads), "--head-dim",
                        str(args.head_dim), "--solver", "greedy", "--no-cache", "--cost", "analytic", "--calibrate",
                        "off", "--compact", "none", "--out", plan], capture_output=True, text=True)
    if p.returncode != 0:
        plan = None
    dev = torch.device(args.device)
    mask = torch.from_numpy(mask_np).to(dev)
    nnz = int(mask_np.sum())
    g = torch.Generator(device=dev).manual_seed(SEED)
    shape = (args.batch, args.heads, n, args.head_dim)
    q32, k32, v32 = (torch.rand(*shape, generator=g, device=dev) * 2 - 1 for _ in range(3))
    rows = []
    for dt in args.dtypes:
        tdt = torch.float32 if dt == "f32" else torch.bfloat16
        q, k, v = (x.to(tdt) for x in (q32, k32, v32))
        ref = reference(torch, q[0, 0], k[0, 0], v[0, 0], mask)
        vmax = float(v[0, 0].float().abs().max())
        flops = 4.0 * args.head_dim * nnz * args.batch * args.heads
        row = {"spec": spec, "n": n, "nnz": nnz, "density": nnz / float(n * n), "dtype": dt,
               "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim}
        res = {}
        with torch.inference_mode():
            try:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                ms, mn = gpu_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), args.reps,
                                args.groups)
                res = {"ms": ms, "min_ms": mn, "check": check(torch, out[0, 0], ref, vmax, TOL[dt])}
            except Exception as e:  # noqa: BLE001 -- record why, go on
                res = {"reason": reason(e)}
        row["sdpa"] = res
        row["flex"] = []
        for block in args.flex_blocks:
            if isinstance(flex, str):
                row["flex"].append({"block": block, "reason": flex})
                continue
            fa, cbm, compiled = flex
            res = {"block": block}
            try:
                t0 = time.perf_counter()
                bm = cbm(lambda b, h, i, j: mask[i, j], B=None, H=None, Q_LEN=n, KV_LEN=n, device=args.device,
                         BLOCK_SIZE=block)
                res["block_mask_ms"] = (time.perf_counter() - t0) * 1e3
                with torch.inference_mode():
                    t0 = time.perf_counter()
                    out = compiled(q, k, v, block_mask=bm)
                    if args.device == "cuda":
                        torch.cuda.synchronize()
                    res["first_call_s"] = time.perf_counter() - t0
                    res["ms"], res["min_ms"] = gpu_ms(torch, lambda: compiled(q, k, v, block_mask=bm), args.reps,
                                                      args.groups)
                res["check"] = check(torch, out[0, 0], ref, vmax, TOL[dt])
            except Exception as e:  # noqa: BLE001
                res.pop("ms", None)
                res["reason"] = reason(e)
            row["flex"].append(res)
        t = tessera_bench(args, spec, plan, dt)
        row["tessera"] = t
        tv = t.get("gather")  # tessera's GPU tile assignment
        peers = {"sdpa": row["sdpa"].get("ms")}
        for f in row["flex"]:
            if "ms" in f:
                peers["flex_%d" % f["block"]] = f["ms"]
        row["gflops_effective"] = {k2: flops / (v2 * 1e-3) / 1e9 for k2, v2 in
                                   list(peers.items()) + [("tessera_variable", t.get("variable")),
                                                          ("tessera_gather", tv)] if v2}
        row["speedup_tessera_vs"] = {k2: v2 / tv for k2, v2 in peers.items() if v2 and tv}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def ok(row):
    items = [row["sdpa"]] + row["flex"]
    good = all(it.get("check", {"ok": True})["ok"] for it in items)
    # bench_attn_cuda: absolute error on head 0, |V| <= 1, fp32 accumulation in both dtypes
    # (bf16 is compared on the rounded inputs): test_attn_cuda's tolerance, 5e-5, for every variant
    errs = row["tessera"].get("max_abs_err_all")
    return good and isinstance(errs, dict) and bool(errs) and all(
        isinstance(e, (int, float)) and e <= 5e-5 for e in errs.values())


def table(rows):
    lines = ["%-36s %-4s %9s %9s %9s %9s %9s %9s %9s  %s" % ("workload", "dt", "sdpa", "flex", "t.dense", "t.fix64",
                                                              "t.fbr", "t.var", "t.gather", "t.gather vs sdpa / flex")]
    for r in rows:
        t = r["tessera"]
        fl = [f["ms"] for f in r["flex"] if "ms" in f]

        def c(v):
            return "%9.3f" % v if isinstance(v, (int, float)) else "%9s" % "-"
        sp = r["speedup_tessera_vs"]
        fs = [v for k, v in sp.items() if k.startswith("flex")]
        lines.append("%-36s %-4s %s %s %s %s %s %s %s  %s / %s" % (
            r["spec"][:36], r["dtype"], c(r["sdpa"].get("ms")), c(min(fl) if fl else None), c(t.get("dense_flash")),
            c(t.get("fixed_64")), c(t.get("fixed_best_reordered")), c(t.get("variable")), c(t.get("gather")),
            "%.2fx" % sp["sdpa"] if "sdpa" in sp else "-", "%.2fx" % max(fs) if fs else "-"))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build-gpu", "tessera"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build-gpu", "bench", "bench_attn_cuda"))
    ap.add_argument("--spec", action="append")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--flex-blocks", default="128")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--json-out")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu only smoke-tests the script (torch timings on the CPU, no tessera GPU run)")
    args = ap.parse_args()
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if any(d not in TOL for d in args.dtypes):
        ap.error("--dtypes: f32 and/or bf16")
    try:
        args.flex_blocks = [int(b) for b in args.flex_blocks.split(",") if b]
    except ValueError:
        ap.error("--flex-blocks: integers, e.g. 128,64")
    if args.batch < 1 or args.heads < 1 or args.head_dim < 1 or args.reps < 1 or args.groups < 1:
        ap.error("batch, heads, head-dim, reps and groups must be positive")
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("attn_torch_cuda: torch is missing: %s" % e, file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("attn_torch_cuda: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.no_flex:
        flex = "skipped (--no-flex)"
    else:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            flex = (flex_attention, create_block_mask, torch.compile(flex_attention, dynamic=False))
        except Exception as e:  # noqa: BLE001
            flex = "unavailable: " + reason(e)
    devname = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print("# torch %s on %s" % (torch.__version__, devname), flush=True)
    rows, failed = [], False
    with tempfile.TemporaryDirectory(prefix="attn_torch_cuda_") as tmp:
        for spec in args.spec or SPECS:
            try:
                rows += measure(args, spec, torch, F, flex, tmp)
            except Exception as e:  # noqa: BLE001
                print("attn_torch_cuda: %s: %s" % (spec, reason(e)), file=sys.stderr)
                failed = True
    print(table(rows))
    bad = [r["spec"] + " " + r["dtype"] for r in rows if not ok(r)]
    if bad:
        print("attn_torch_cuda: correctness check failed: " + ", ".join(bad), file=sys.stderr)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"torch": torch.__version__, "device": devname, "rows": rows}, f, indent=1)
    return 1 if failed or bad else 0


if __name__ == "__main__":
    sys.exit(main())
