#!/usr/bin/env python3
"""Unstructured group convolution side by side: PyTorch CPU Conv2d (dense with masked weights, and
the CondenseNet deploy form: index_select of each group's union of inputs + Conv2d(groups=G))
against `tessera gconv bench`, on the same layer table and connectivities.

1. `tessera gconv export --model M --connectivity C --condense F --batch B --out DIR` writes the
   layer table (DIR/layers.json) and every layer's cout x cin connectivity (DIR/NNN.npy).
2. torch, in-process, torch.set_num_threads(--threads), torch.inference_mode(), fp32 NCHW, for
   every layer: weights and input drawn from a seeded uniform [-1, 1); --warmup untimed calls,
   then the median of --repeats calls of
     dense:   F.conv2d(x, w * mask) (the weights masked once, outside the timing);
     grouped: F.conv2d(x.index_select(1, idx), wg, groups=G): idx = each group of cout/G
              consecutive outputs' union of inputs (ascending), padded to the largest union with
              the group's first input (zero weights there), wg the masked weights on those
              inputs. The index_select is timed (it is part of the deploy path).
   Both outputs are compared with a float64 torch conv of the masked weights: max |out - ref| must
   stay within (L + 2) 2^-24 max(sum |w||x|), L = cin k k (any summation order's fp32 bound).
3. The torch figures go to DIR/torch.json ({"torch", "threads", "batch", "layers": [{"name",
   "cin", "cout", "h", "dense_ms", "grouped_ms", "dense_ok", "grouped_ok", ...}]}), then
   `tessera gconv bench ... --torch DIR/torch.json [--json]` runs our executor and every C
   baseline and prints the combined report (speedup_vs_torch etc.); --json-out FILE also writes
   its JSON report to FILE (tessera's --json-out: the text report still prints).

Usage: gconv_torch.py [TESSERA_BIN] [--model condensenet] [--connectivity unstructured] [--condense 4]
                      [--density X] [--seed N] [--batch 1] [--threads 2] [--repeats 10] [--warmup 3] [--dir DIR] [--json]
                      [--json-out FILE] [--torch-only] [--layers A-B] [-- extra tessera bench options]
TESSERA_BIN defaults to $TESSERA_BIN, else build/tessera under the repository root.
torch/NumPy come from the current interpreter when it has them, else from bench/peers/.venv-torch
(created on first use: python3 -m venv; pip install -r bench/peers/requirements-torch.txt).
Exit status: 0 ok, 1 when tessera fails or a torch output is beyond the bound, 2 on bad usage."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import peerenv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(HERE, ".venv-torch")
REQS = os.path.join(HERE, "requirements-torch.txt")
SEED = 20250101


def median_ms(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def group_index(mask, groups, np):
    """[groups * umax] input indices: each group's union (ascending) padded with its first input,
    and the padded count per group (umax)."""
    cout = mask.shape[0]
    per = cout // groups
    unions = [np.nonzero(mask[g * per:(g + 1) * per].any(axis=0))[0] for g in range(groups)]
    umax = max(1, max(len(u) for u in unions))
    idx = np.zeros((groups, umax), dtype=np.int64)
    valid = np.zeros((groups, umax), dtype=bool)
    for g, u in enumerate(unions):
        idx[g, :len(u)] = u
        idx[g, len(u):] = u[0] if len(u) else 0
        valid[g, :len(u)] = True
    return idx, valid, umax


def run_layer(torch, F, np, ly, mask, args, gen):
    n, cin, cout, h, w, k, s, G = (ly[x] for x in ("n", "cin", "cout", "h", "w", "ksize", "stride", "groups"))
    p = k // 2
    x = torch.rand((n, cin, h, w), generator=gen) * 2 - 1
    wt = torch.rand((cout, cin, k, k), generator=gen) * 2 - 1
    m = torch.from_numpy(mask.astype(np.float32))[:, :, None, None]
    wm = (wt * m).contiguous()
    idx, valid, umax = group_index(mask, G, np)
    per = cout // G
    wg = torch.zeros((cout, umax, k, k))
    for g in range(G):
        sel = torch.from_numpy(idx[g])
        wg[g * per:(g + 1) * per] = wm[g * per:(g + 1) * per][:, sel] * torch.from_numpy(valid[g].astype(np.float32))[None, :, None, None]
    idx_t = torch.from_numpy(idx.reshape(-1))
    res = {"name": ly["name"], "cin": cin, "cout": cout, "h": h, "ksize": k, "groups": G, "umax": int(umax)}
    with torch.inference_mode():
        ref = F.conv2d(x.double(), wm.double(), stride=s, padding=p)
        bound_sum = F.conv2d(x.abs().double(), wm.abs().double(), stride=s, padding=p).max().item()
        tol = (cin * k * k + 2) * 2.0 ** -24 * bound_sum * 1.0001
        dense = lambda: F.conv2d(x, wm, stride=s, padding=p)
        grouped = lambda: F.conv2d(x.index_select(1, idx_t), wg, stride=s, padding=p, groups=G)
        for name, fn in (("dense", dense), ("grouped", grouped)):
            err = (fn().double() - ref).abs().max().item()
            res[name + "_err"] = err
            res[name + "_ok"] = bool(err <= tol)
            res[name + "_ms"], res[name + "_min_ms"] = median_ms(fn, args.warmup, args.repeats)
    res["tol"] = tol
    return res


def tessera_cmd(args, sub):
    cmd = [args.tessera, "gconv", sub, "--model", args.model, "--connectivity", args.connectivity, "--condense",
           str(args.condense), "--batch", str(args.batch)]
    if args.layers:
        cmd += ["--layers", args.layers]
    if args.density:
        cmd += ["--density", str(args.density)]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tessera", nargs="?", default=os.environ.get("TESSERA_BIN", os.path.join(ROOT, "build", "tessera")))
    ap.add_argument("--model", default="condensenet")
    ap.add_argument("--connectivity", default="unstructured")
    ap.add_argument("--condense", type=int, default=4)
    ap.add_argument("--density", type=float, default=0.0, help="random/block connectivity density (tessera's --density)")
    ap.add_argument("--seed", type=int, default=None, help="connectivity seed (tessera's --seed)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--layers", default="")
    ap.add_argument("--dir", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--json-out", default="", help="also write tessera's JSON report to FILE")
    ap.add_argument("--torch-only", action="store_true", help="export and time torch; do not run tessera bench")
    ap.add_argument("extra", nargs="*", help="after --: more options for tessera gconv bench")
    args = ap.parse_args()
    if args.threads < 1 or args.repeats < 1 or args.warmup < 0 or args.batch < 1:
        ap.error("--threads, --repeats, --batch must be >= 1 and --warmup >= 0")
    peerenv.ensure("gconv_torch", ["numpy", "torch"], VENV, REQS, " (torch is large: this takes a while once)")
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    d = args.dir or tempfile.mkdtemp(prefix="gconv_torch_")
    ex = subprocess.run(tessera_cmd(args, "export") + ["--out", d], capture_output=True, text=True)
    if ex.returncode != 0:
        sys.stderr.write(ex.stderr)
        return 1
    with open(os.path.join(d, "layers.json")) as f:
        table = json.load(f)
    gen = torch.Generator().manual_seed(SEED)
    out = {"torch": torch.__version__, "threads": args.threads, "batch": args.batch, "model": args.model,
           "connectivity": args.connectivity, "condense": args.condense, "mkldnn": torch.backends.mkldnn.is_available(),
           "load_start": os.getloadavg()[0], "layers": []}
    bad = 0
    for i, ly in enumerate(table["layers"]):
        mask = np.load(os.path.join(d, ly["conn"])).astype(bool)
        r = run_layer(torch, F, np, ly, mask, args, gen)
        bad += (not r["dense_ok"]) + (not r["grouped_ok"])
        out["layers"].append(r)
        print("\rgconv_torch: %d/%d layers" % (i + 1, len(table["layers"])), end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    out["load_end"] = os.getloadavg()[0]
    out["total_dense_ms"] = sum(r["dense_ms"] for r in out["layers"])
    out["total_grouped_ms"] = sum(r["grouped_ms"] for r in out["layers"])
    out["total_best_ms"] = sum(min(r["dense_ms"], r["grouped_ms"]) for r in out["layers"])
    tpath = os.path.join(d, "torch.json")
    with open(tpath, "w") as f:
        json.dump(out, f, indent=1)
    for r in out["layers"]:
        for form in ("dense", "grouped"):
            if not r[form + "_ok"]:
                print("gconv_torch: %s %s: error %.3g beyond the bound %.3g" % (r["name"], form, r[form + "_err"], r["tol"]),
                      file=sys.stderr)
    print("gconv_torch: torch %s, %d threads: dense-masked %.3f ms, grouped %.3f ms, faster per layer %.3f ms "
          "(load %.2f -> %.2f); %s" % (torch.__version__, args.threads, out["total_dense_ms"], out["total_grouped_ms"],
                                       out["total_best_ms"], out["load_start"], out["load_end"], tpath), file=sys.stderr)
    if args.torch_only:
        return 1 if bad else 0
    cmd = tessera_cmd(args, "bench") + ["--threads", str(args.threads), "--torch", tpath] + args.extra
    if args.json:
        cmd.append("--json")
    if args.json_out:
        cmd += ["--json-out", args.json_out]
    b = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(b.stderr)
    sys.stdout.write(b.stdout)
    return 1 if bad or b.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
