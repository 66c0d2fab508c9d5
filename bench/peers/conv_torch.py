#!/usr/bin/env python3
"""PyTorch CPU Conv2d on every distinct convolution layer of a model, for `tessera conv bench`.

The layers come from tessera itself, so both sides time the same shapes: `tessera conv layers
--model M --batch N --json` lists the convolutions as the executor plans them (batch norm folded,
so every layer is a Conv2d with bias; ReLU fused where tessera fuses it). For each distinct layer
key the script builds torch.nn.Conv2d(C, K, (R, S), stride, padding, dilation, groups, bias=True)
with seeded random weights and input [N][C][H][W] (fp32, NCHW, contiguous), and times it under
torch.inference_mode() with torch.set_num_threads(--threads): --warmup untimed calls, then calls
until --repeats are done and 50 ms have passed (at most 200); the median is reported.

  ms            Conv2d alone (bias included): the figure `tessera conv bench --torch` uses. It
                leaves out the ReLU that tessera fuses into its layers, so it favours PyTorch.
  ms_with_relu  Conv2d followed by an in-place ReLU where tessera's layer has one (eager PyTorch
                runs them as two operators).

Output (--out FILE, default conv_torch_<model>_b<batch>.json), read by `tessera conv bench
--torch FILE`:
  {"torch": version, "threads": n, "model": M, "batch": N, "mkldnn": bool,
   "layers": [{"key": tessera layer key, "name": first layer with it, "count": layers with it,
               "ms": median, "ms_with_relu": median}, ...], "total_ms": sum over all layers}

With --bench the script then runs `tessera conv bench --model M --batch N --threads T --torch FILE`
itself (plus whatever follows `--`, e.g. `-- --json`), so one command gives the whole table.

Usage: conv_torch.py [TESSERA_BIN] --model vgg16|resnet101|inception-v4 [--batch 1] [--res R]
                     [--threads 2] [--repeats 10] [--warmup 3] [--out FILE] [--bench] [-- ARGS]
TESSERA_BIN defaults to $TESSERA_BIN, else build/tessera under the repository root. torch comes
from the current interpreter when it has it, else from bench/peers/.venv-torch (created on first
use from requirements-torch.txt). Exit status: 0 ok, 1 when tessera fails, 2 on bad usage."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import peerenv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(HERE, ".venv-torch")
REQS = os.path.join(HERE, "requirements-torch.txt")


def parse():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tessera", nargs="?", default=os.environ.get("TESSERA_BIN", os.path.join(ROOT, "build", "tessera")))
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--res", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--bench", action="store_true")
    a = ap.parse_args(argv)
    if a.batch < 1 or a.threads < 1 or a.repeats < 1 or a.warmup < 0:
        ap.error("--batch, --threads, --repeats must be >= 1 and --warmup >= 0")
    a.extra = extra
    if not a.out:
        a.out = "conv_torch_%s_b%d.json" % (a.model, a.batch)
    return a


def tessera_layers(a):
    cmd = [a.tessera, "conv", "layers", "--model", a.model, "--batch", str(a.batch), "--json"]
    if a.res:
        cmd += ["--res", str(a.res)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write("conv_torch: %s failed: %s" % (" ".join(cmd), p.stderr))
        sys.exit(1)
    return json.loads(p.stdout)["layers"]


def time_layer(torch, L, a, relu):
    if L["pad_top"] != L["pad_bottom"] or L["pad_left"] != L["pad_right"]:
        raise SystemExit("conv_torch: layer %s has asymmetric padding (Conv2d takes symmetric)" % L["key"])
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(L["c"], L["k"], (L["r"], L["s"]), stride=(L["stride_h"], L["stride_w"]),
                           padding=(L["pad_top"], L["pad_left"]), dilation=(L["dilation_h"], L["dilation_w"]),
                           groups=L["groups"], bias=True).eval()
    x = torch.rand(L["n"], L["c"], L["h"], L["w"]) * 2 - 1

    def call():
        y = conv(x)
        if relu:
            torch.relu_(y)
        return y

    with torch.inference_mode():
        for _ in range(a.warmup):
            call()
        ts, spent = [], 0.0
        while len(ts) < 200 and (len(ts) < a.repeats or spent < 0.05):
            t0 = time.perf_counter()
            call()
            dt = time.perf_counter() - t0
            ts.append(dt)
            spent += dt
    return 1e3 * statistics.median(ts)


def main():
    a = parse()
    peerenv.ensure("conv_torch", ["torch"], VENV, REQS, " (torch is large: this takes a while once)")
    import torch

    torch.set_num_threads(a.threads)
    layers = tessera_layers(a)
    shapes = {}
    for L in layers:
        s = shapes.setdefault(L["key"], {"layer": L, "count": 0})
        s["count"] += 1
    rows, total = [], 0.0
    for i, (key, s) in enumerate(shapes.items()):
        L = s["layer"]
        ms = time_layer(torch, L, a, False)
        msr = time_layer(torch, L, a, True) if L["relu"] else ms
        rows.append({"key": key, "name": L["name"], "count": s["count"], "ms": ms, "ms_with_relu": msr})
        total += s["count"] * ms
        sys.stderr.write("\rconv_torch: %s %d/%d shapes" % (a.model, i + 1, len(shapes)))
    sys.stderr.write("\n")
    out = {"torch": torch.__version__, "threads": a.threads, "model": a.model, "batch": a.batch,
           "mkldnn": bool(torch.backends.mkldnn.is_available()), "layers": rows, "total_ms": total}
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, a.out)
    sys.stderr.write("conv_torch: torch %s, %d threads: %s convolutions %.2f ms (Conv2d alone) -> %s\n"
                     % (torch.__version__, a.threads, a.model, total, a.out))
    if a.bench:
        cmd = [a.tessera, "conv", "bench", "--model", a.model, "--batch", str(a.batch), "--threads", str(a.threads),
               "--torch", a.out] + (["--res", str(a.res)] if a.res else []) + a.extra
        sys.exit(1 if subprocess.call(cmd) else 0)


if __name__ == "__main__":
    main()
