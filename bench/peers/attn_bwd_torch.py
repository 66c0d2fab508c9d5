#!/usr/bin/env python3
"""Masked attention BACKWARD side by side: PyTorch's scaled_dot_product_attention backward (boolean
mask) and FlexAttention's backward (BlockMask, torch.compile) against tessera's backward over its
tile-aware schedule (`tessera attn bench --pass backward`).

For each workload SPEC: `tessera pattern SPEC --out m.npy` writes the n x n mask; Q, K, V, dO
[batch][heads][n][d] are drawn once from a seeded normal distribution (fp32, the same seed as
attn_torch.py). PyTorch: the forward runs once with requires_grad inputs, then the backward alone
is timed, torch.autograd.grad(out, (q, k, v), dO, retain_graph=True), median of --repeats calls
after --warmup, torch.set_num_threads(--threads):

1. SDPA fp32 with attn_mask = the boolean mask (the fused CPU kernel torch picks for a mask);
2. FlexAttention under torch.compile with a BlockMask from create_block_mask, block sizes
   --flex-blocks; when the installed torch cannot run its backward on CPU the reason is recorded.

tessera: `tessera attn bench --pattern SPEC --pass backward ... --json` times, in its own process
and interleaved rounds, the backward of every method (dense_flash, fixed_64, fixed_best,
fixed_best_reordered, greedy, ilp = re-solved for the backward, ilp_forward_schedule = the forward's
schedule reused as is) and checks dQ, dK, dV against its double-precision reference.

Correctness of the peers: on head (0, 0) dQ, dK, dV are compared with a float64 NumPy backward of the
masked softmax attention (rows with no allowed key left out; none in the default workloads), as a
fraction of each reference's max |.|. Tolerance 1e-4 (fp32 sums of <= 4096 terms, ~1e-6 measured).

Usage: attn_bwd_torch.py [TESSERA_BIN] [--json] [--json-out FILE] [--threads 2] [--repeats 5]
                         [--warmup 2] [--heads 8] [--head-dim 64] [--batch 1] [--flex-blocks 128,64]
                         [--no-flex] [--spec SPEC ...]
Exit status: 0 ok, 1 when `tessera pattern` fails or a correctness check fails, 2 on bad usage."""
import argparse
import math
import os
import re
import sys
import time

import attn_torch as at

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPECS = ["window2d:h=64,w=64,k=13", "swin:h=64,w=64,win=8,shift=1", "vitdet:h=64,w=64,win=16,global=4",
         "window2d:h=64,w=64,k=7"]
TESSERA_FIELDS = ["dense_flash", "fixed_64", "fixed_best", "fixed_best_reordered", "greedy", "ilp",
                  "ilp_forward_schedule"]
TOL = 1e-4


def reference_backward(q, k, v, do, mask, np):
    """float64 backward of masked softmax attention for one head: returns dq, dk, dv [n][d] and the
    valid rows (rows with no allowed key contribute nothing and get dq = 0)."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    scale = 1.0 / math.sqrt(q.shape[1])
    s = np.where(mask, (q @ k.T) * scale, -np.inf)
    valid = mask.any(axis=1)
    m = np.where(valid, s.max(axis=1), 0.0)
    p = np.where(mask, np.exp(s - m[:, None]), 0.0)
    l = p.sum(axis=1)
    p[valid] /= l[valid, None]
    o = p @ v
    dp = do @ v.T
    dr = (do * o).sum(axis=1)
    ds = p * (dp - dr[:, None]) * scale
    return ds @ k, ds.T @ q, p.T @ do, valid


def compare_grads(got, ref, np):
    """Max |got - ref| / max |ref| over dq, dk, dv (the largest of the three)."""
    worst = 0.0
    for g, r in zip(got, ref):
        g = g.detach().float().numpy().astype(np.float64)
        d = np.abs(g - r)
        scale = float(np.abs(r).max()) or 1.0
        e = float(d.max()) / scale if np.isfinite(d).all() else float("inf")
        worst = max(worst, e)
    return {"max_rel_err": worst, "tol": TOL, "ok": bool(worst <= TOL)}


def time_backward(torch, out, inputs, do, args, res):
    """Median ms of torch.autograd.grad(out, inputs, do) (the graph kept), and the gradients."""
    grads = torch.autograd.grad(out, inputs, do, retain_graph=True)
    res["ms"] = at.median_ms(lambda: torch.autograd.grad(out, inputs, do, retain_graph=True), args.warmup,
                             args.repeats, res)
    return grads


def run_sdpa(torch, F, q, k, v, do, mask_t, args, ref, np):
    res = {}
    qq, kk, vv = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask_t)
    grads = time_backward(torch, out, (qq, kk, vv), do, args, res)
    res["backend"] = at.sdpa_backend(torch, q, k, v, mask_t)
    res["check"] = compare_grads([g[0, 0] for g in grads], ref, np)
    return res


def run_flex(torch, flex, q, k, v, do, mask_t, n, block, args, ref, np):
    flex_attention, create_block_mask, compiled = flex
    res = {"block": block}
    try:
        bm = create_block_mask(lambda b, h, qi, ki: mask_t[qi, ki], B=None, H=None, Q_LEN=n, KV_LEN=n, device="cpu",
                               BLOCK_SIZE=block)
        qq, kk, vv = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        t0 = time.perf_counter()
        out = compiled(qq, kk, vv, block_mask=bm)
        grads = time_backward(torch, out, (qq, kk, vv), do, args, res)
        res["first_call_s"] = time.perf_counter() - t0
        res["check"] = compare_grads([g[0, 0] for g in grads], ref, np)
    except Exception as e:  # noqa: BLE001 -- unsupported on this torch/CPU: record, go on
        res.pop("ms", None)
        # torch.compile wraps the real cause (e.g. "FlexAttention does not support backward on CPU")
        # in a graph-break message: report the inner NotImplementedError when there is one
        inner = re.search(r"NotImplementedError\('([^']*)'\)", str(e))
        res["reason"] = "NotImplementedError: " + inner.group(1) if inner else at.reason(e)
    return res


def run_tessera(binary, spec, args):
    j, err = at.attn_bench_json(binary, spec, args, ["--pass", "backward"])
    if err:
        return err
    res = {f: at.tessera_ms(j.get(f)) for f in TESSERA_FIELDS}
    res["forward_ms_ilp"] = j.get("forward_ms_ilp")
    res["max_rel_err"] = j.get("max_rel_err")
    res["raw"] = j
    return res


def measure(spec, args, torch, F, flex, np):
    mask = at.load_mask(args.tessera, spec, np)
    n = mask.shape[0]
    g = torch.Generator().manual_seed(at.SEED)
    shape = (args.batch, args.heads, n, args.head_dim)
    q, k, v, do = (torch.randn(*shape, generator=g, dtype=torch.float32) for _ in range(4))
    mask_t = torch.from_numpy(mask)
    row = {"spec": spec, "n": n, "density": float(mask.mean()), "nnz": int(mask.sum()),
           "empty_rows": int((~mask.any(axis=1)).sum())}
    dq, dk, dv, _ = reference_backward(q[0, 0].numpy(), k[0, 0].numpy(), v[0, 0].numpy(), do[0, 0].numpy(), mask, np)
    ref = [dq, dk, dv]
    row["sdpa_fp32"] = run_sdpa(torch, F, q, k, v, do, mask_t, args, ref, np)
    row["flex"] = []
    for block in args.flex_blocks:
        if isinstance(flex, str):
            row["flex"].append({"block": block, "reason": flex})
        else:
            row["flex"].append(run_flex(torch, flex, q, k, v, do, mask_t, n, block, args, ref, np))
    row["tessera"] = run_tessera(args.tessera, spec, args)
    return at.speedups(row)


def checks_ok(row):
    items = [row["sdpa_fp32"]] + row["flex"]
    ok = all(it.get("check", {"ok": True})["ok"] for it in items)
    e = row["tessera"].get("max_rel_err")
    return ok and (e is None or e <= TOL)


def fmt_table(rows, blocks):
    cell, x, notes = at.table_cells()
    flex_heads = " ".join("%8s" % ("flex%d" % b) for b in blocks)
    head = ("%-36s %5s %6s | %8s %s | %8s %8s %8s %8s %8s | %7s %7s | %s" %
            ("workload (backward, ms)", "n", "dens%", "sdpa32", flex_heads, "ts.ilp", "ts.reuse", "ts.fbr", "ts.f64",
             "ts.fwd", "ilp/sd", "ilp/fx", "check"))
    lines = [head, "-" * len(head)]
    for r in rows:
        t = r["tessera"]
        lines.append("%-36s %5d %6.2f | %s %s | %s %s %s %s %s | %s %s | %s" %
                     (r["spec"], r["n"], 100 * r["density"], cell(r["sdpa_fp32"]),
                      " ".join(cell(f) for f in r["flex"]), cell(t, "ilp"), cell(t, "ilp_forward_schedule"),
                      cell(t, "fixed_best_reordered"), cell(t, "fixed_64"), cell(t, "forward_ms_ilp"),
                      x(r["speedup_ilp_vs_sdpa_fp32"]), x(r["speedup_ilp_vs_flex_best"]),
                      "ok" if checks_ok(r) else "FAIL"))
    for i, r in enumerate(notes):
        lines.append("[%d] %s" % (i + 1, r))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    at.add_common_args(ap)
    args = ap.parse_args()
    if not at.check_common_args(ap, args, "attn_bwd_torch"):
        return 1
    at.ensure_torch()
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    flex = at.compile_flex(torch, args.no_flex)
    cpu_cap = at.cpu_capability(torch)
    meta = {"torch": torch.__version__, "numpy": np.__version__, "cpu_capability": cpu_cap,
            "threads": torch.get_num_threads(), "repeats": args.repeats, "warmup": args.warmup, "batch": args.batch,
            "heads": args.heads, "head_dim": args.head_dim, "seed": at.SEED, "tessera": args.tessera,
            "loadavg_start": list(os.getloadavg())}
    rows, status = at.run_specs(args.spec or SPECS, lambda spec: measure(spec, args, torch, F, flex, np), checks_ok,
                                "attn_bwd_torch")
    if rows is None:
        return status
    if not at.write_json(meta, rows, args):
        print("torch %s (CPU capability %s); %d threads; B=%d H=%d d=%d; backward times in ms, median of %d calls "
              "after %d warm-up; tessera: its own interleaved rounds (attn bench --pass backward)" %
              (torch.__version__, cpu_cap, meta["threads"], args.batch, args.heads, args.head_dim, args.repeats,
               args.warmup))
        print(fmt_table(rows, args.flex_blocks))
        print("load average at start %.1f, at end %.1f" % (meta["loadavg_start"][0], meta["loadavg_end"][0]))
    return status


if __name__ == "__main__":
    sys.exit(main())
