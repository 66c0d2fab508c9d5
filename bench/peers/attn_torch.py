#!/usr/bin/env python3
"""Masked attention side by side: PyTorch's scaled_dot_product_attention (boolean mask) and
FlexAttention (BlockMask) against tessera's tile-aware sparse attention (`tessera attn bench`).

For each workload SPEC: `tessera pattern SPEC --out m.npy` writes the n x n mask (dense bool,
cell (i, j) true = query i may attend key j); Q, K, V [batch][heads][n][d] are drawn once from a
seeded normal distribution (fp32). Timed in-process with torch.set_num_threads(--threads), one
or more warm-up calls, then the median of --repeats calls:

1. torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask) in fp32, and in
   bf16 when torch runs it on this CPU (else the reason is recorded);
2. torch.nn.attention.flex_attention.flex_attention under torch.compile with a BlockMask from
   create_block_mask (mask_mod reads the dense mask tensor), block sizes --flex-blocks (128 =
   its default, and 64); when the installed torch cannot compile or run it on CPU the reason
   string is recorded instead (the run goes on);
3. tessera: `tessera attn bench --pattern SPEC --heads H --head-dim D --threads N --json`, its
   own in-process times (ms): dense_flash, fixed_64, fixed_best, fixed_best_reordered, greedy,
   ilp. When the binary has no `attn bench`, its column says "unavailable".

Correctness: on head (0, 0) each torch output is compared with a float64 NumPy masked softmax;
rows with no allowed key are left out of the comparison (their count is reported, and a probe
at start-up records what torch returns for them: NaN or zeros). bf16 is compared with the
reference computed on the same bf16-rounded inputs.

Usage: attn_torch.py [TESSERA_BIN] [--json] [--json-out FILE] [--threads 2] [--repeats 5] [--warmup 2]
                     [--heads 8] [--head-dim 64] [--batch 1] [--flex-blocks 128,64]
                     [--no-flex] [--no-bf16] [--spec SPEC ...]
TESSERA_BIN defaults to $TESSERA_BIN, else build/tessera under the repository root.
torch/NumPy come from the current interpreter when it has them, else from bench/peers/.venv-torch,
created on first use (python3 -m venv; pip install -r bench/peers/requirements-torch.txt).
Exit status: 0 ok, 1 when `tessera pattern` fails or a correctness check fails, 2 on bad usage."""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import peerenv
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(HERE, ".venv-torch")
REQS = os.path.join(HERE, "requirements-torch.txt")

BASE_SPECS = [
    "window1d:n=4096,w=64,global=16",
    "window2d:h=32,w=32,k=7",
    "window2d:h=32,w=32,k=13",
    "window2d:h=64,w=64,k=7",
    "window2d:h=64,w=64,k=13",
    "swin:h=56,w=56,win=7,shift=1",
    "vitdet:h=64,w=64,win=14,global=4",
    "keep:window2d:h=64,w=64,k=13,ratio=0.49,seed=3",
]
SPECS = BASE_SPECS + ["permute:" + s + ",seed=7" for s in BASE_SPECS]
TESSERA_FIELDS = ["dense_flash", "fixed_64", "fixed_best", "fixed_best_reordered", "greedy", "ilp"]
SEED = 20240601
# Max |out - ref| allowed on head (0, 0), as a fraction of max|V| (V ~ N(0, 1), |V| <= ~5):
# fp32 kernels accumulate in fp32 over <= 4096 keys (error ~1e-6 measured; 1e-4 leaves margin
# for a different summation order); bf16 rounds P and the output to 8-bit mantissas (2^-8 = 4e-3
# relative, on outputs that are averages of V), 2e-2 leaves room for the rounding of P per key.
TOL = {"fp32": 1e-4, "bf16": 2e-2}


def ensure_torch():
    """Imports torch and numpy, re-running this script inside bench/peers/.venv-torch when needed."""
    peerenv.ensure("attn_torch", ["numpy", "torch"], VENV, REQS, " (torch is large: this takes a while once)")


class TesseraError(Exception):
    pass


def reason(e):
    """One-line reason string of an exception (first line, at most 200 characters)."""
    msg = str(e).strip().splitlines()
    line = "%s: %s" % (type(e).__name__, msg[0] if msg else "")
    return line if len(line) <= 200 else line[:197] + "..."


def median_ms(fn, warmup, repeats, out=None):
    """Median wall time (ms) of `repeats` calls after `warmup` calls; out["min_ms"] gets the fastest."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    if out is not None:
        out["min_ms"] = min(ts)
    return statistics.median(ts)


def reference_head(q, k, v, mask, np):
    """float64 masked softmax attention of one head: q, k, v [n][d] arrays, mask [n][n] bool.
    Returns (out [n][d], valid [n] bool); rows with no allowed key are NaN and not valid."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = (q @ k.T) / math.sqrt(q.shape[1])
    s = np.where(mask, s, -np.inf)
    valid = mask.any(axis=1)
    m = np.where(valid, s.max(axis=1), 0.0)
    p = np.where(mask, np.exp(s - m[:, None]), 0.0)
    l = p.sum(axis=1)
    out = np.full((q.shape[0], v.shape[1]), np.nan)
    out[valid] = (p[valid] @ v) / l[valid, None]
    return out, valid


def compare(out_head, ref, valid, vmax, tol, np):
    """Max |out - ref| over the valid rows as a fraction of max|V|, and whether it is within tol."""
    o = out_head.detach().float().numpy().astype(np.float64)
    if not valid.any():
        return {"max_err": 0.0, "tol": tol, "ok": True}
    d = np.abs(o[valid] - ref[valid])
    err = float(np.nanmax(d)) / vmax if np.isfinite(d).all() else float("inf")
    return {"max_err": err, "tol": tol, "ok": bool(err <= tol)}


def empty_row_probe(torch, F):
    """What torch's SDPA returns for a query row with no allowed key (fp32, and bf16 when it runs)."""
    g = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=g) for _ in range(3))
    mask = torch.ones(64, 64, dtype=torch.bool)
    mask[5, :] = False
    res = {}

    def math_only(dt):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), attn_mask=mask)

    def flex_eager(dt):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        bm = create_block_mask(lambda b, h, i, j: mask[i, j], B=None, H=None, Q_LEN=64, KV_LEN=64, device="cpu",
                               BLOCK_SIZE=64)
        return flex_attention(q.to(dt), k.to(dt), v.to(dt), block_mask=bm)

    variants = [("fp32", lambda dt: F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), attn_mask=mask),
                 torch.float32),
                ("bf16", lambda dt: F.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt), attn_mask=mask),
                 torch.bfloat16),
                ("fp32_math_backend", math_only, torch.float32),
                ("flex_eager_fp32", flex_eager, torch.float32)]
    for name, fn, dt in variants:
        try:
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # eager flex_attention warns that it is unfused: known here
                o = fn(dt)[:, :, 5].float()
            res[name] = ("NaN" if torch.isnan(o).all() else "zeros" if (o == 0).all() else
                         "other (max |o| %.3g)" % float(o.abs().max()))
        except Exception as e:  # noqa: BLE001 -- record why, never crash
            res[name] = "error: " + reason(e)
    return res


def sdpa_backend(torch, q, k, v, mask):
    """Name of the fused SDPA backend torch picks for these inputs (best effort)."""
    try:
        from torch.nn.attention import SDPBackend
        return SDPBackend(torch._fused_sdp_choice(q, k, v, mask)).name
    except Exception as e:  # noqa: BLE001
        return "unknown (%s)" % reason(e)


def run_sdpa(torch, F, q, k, v, mask_t, dt, args, ref, valid, vmax, np):
    q2, k2, v2 = (x.to(dt) for x in (q, k, v))
    res = {}
    with torch.inference_mode():
        out = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask_t)
        res["ms"] = median_ms(lambda: F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask_t),
                              args.warmup, args.repeats, res)
    res["backend"] = sdpa_backend(torch, q2, k2, v2, mask_t)
    res["check"] = compare(out[0, 0], ref, valid, vmax, TOL["fp32" if dt == torch.float32 else "bf16"], np)
    return res


def run_flex(torch, flex, q, k, v, mask_t, n, block, ref, valid, vmax, args, np):
    """FlexAttention under torch.compile with a BlockMask of block x block; a dict with ms, or with
    the reason it could not run."""
    flex_attention, create_block_mask, compiled = flex
    res = {"block": block}
    try:
        def mask_mod(b, h, q_idx, kv_idx):
            return mask_t[q_idx, kv_idx]

        t0 = time.perf_counter()
        bm = create_block_mask(mask_mod, B=None, H=None, Q_LEN=n, KV_LEN=n, device="cpu", BLOCK_SIZE=block)
        res["block_mask_ms"] = (time.perf_counter() - t0) * 1e3
        try:
            res["block_sparsity_pct"] = float(bm.sparsity())
        except Exception:  # noqa: BLE001 -- informational only
            pass
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = compiled(q, k, v, block_mask=bm)
            res["first_call_s"] = time.perf_counter() - t0
            res["ms"] = median_ms(lambda: compiled(q, k, v, block_mask=bm), args.warmup, args.repeats, res)
        res["check"] = compare(out[0, 0], ref, valid, vmax, TOL["fp32"], np)
    except Exception as e:  # noqa: BLE001 -- unsupported on this torch/CPU: record, go on
        res.pop("ms", None)
        res["reason"] = reason(e)
    return res


def tessera_available(binary):
    """None when `tessera attn bench` exists, else the reason it does not."""
    p = subprocess.run([binary, "attn", "bench", "--help"], capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return "unavailable (%s)" % (msg[0] if msg else "exit %d" % p.returncode)
    return None


def tessera_ms(v):
    """A tessera time field: a number of ms, or an object with an "ms" member."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, dict):
        for key in ("ms", "median_ms", "time_ms"):
            if isinstance(v.get(key), (int, float)):
                return float(v[key])
    return None


def attn_bench_json(binary, spec, args, extra=()):
    """`tessera attn bench ... --json` on spec with the common options (and extra): (report, None),
    or (None, {"reason", "command"}) when it failed or printed no JSON."""
    cmd = [binary, "attn", "bench", "--pattern", spec] + list(extra) + [
        "--heads", str(args.heads), "--head-dim", str(args.head_dim), "--batch", str(args.batch), "--threads",
        str(args.threads), "--repeats", str(args.repeats), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return None, {"reason": "failed: %s" % (msg[-1] if msg else "exit %d" % p.returncode), "command": " ".join(cmd)}
    try:
        return json.loads(p.stdout), None
    except ValueError as e:
        return None, {"reason": "bad JSON: %s" % reason(e), "command": " ".join(cmd)}


def run_tessera_attn(binary, spec, args):
    j, err = attn_bench_json(binary, spec, args)
    if err:
        return err
    res = {f: tessera_ms(j.get(f)) for f in TESSERA_FIELDS}
    res["raw"] = j
    return res


def load_mask(binary, spec, np):
    """The n x n boolean mask `tessera pattern SPEC` writes (TesseraError when it fails)."""
    with tempfile.TemporaryDirectory(prefix="attn_torch_") as tmpdir:
        path = os.path.join(tmpdir, "m.npy")
        p = subprocess.run([binary, "pattern", spec, "--out", path], capture_output=True, text=True)
        if p.returncode != 0:
            raise TesseraError("%s pattern %s exited %d: %s" % (binary, spec, p.returncode, p.stderr.strip()))
        mask = np.load(path).astype(bool)
    if mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
        raise TesseraError("tessera pattern %s wrote a %s mask, expected square" % (spec, mask.shape))
    return mask


def speedups(row):
    """The ILP's speedups over SDPA fp32 and the best FlexAttention block size, into row."""
    base = row["sdpa_fp32"]["ms"]
    flex_ms = [f["ms"] for f in row["flex"] if "ms" in f]
    ilp = row["tessera"].get("ilp")
    row["speedup_ilp_vs_sdpa_fp32"] = base / ilp if ilp else None
    row["speedup_ilp_vs_flex_best"] = min(flex_ms) / ilp if ilp and flex_ms else None
    return row


def measure(spec, args, torch, F, flex, np, tessera_reason):
    mask = load_mask(args.tessera, spec, np)
    n = mask.shape[0]
    g = torch.Generator().manual_seed(SEED)
    shape = (args.batch, args.heads, n, args.head_dim)
    q, k, v = (torch.randn(*shape, generator=g, dtype=torch.float32) for _ in range(3))
    mask_t = torch.from_numpy(mask)
    row = {"spec": spec, "n": n, "density": float(mask.mean()), "nnz": int(mask.sum()),
           "empty_rows": int((~mask.any(axis=1)).sum())}
    ref, valid = reference_head(q[0, 0].numpy(), k[0, 0].numpy(), v[0, 0].numpy(), mask, np)
    vmax = float(v[0, 0].abs().max())

    row["sdpa_fp32"] = run_sdpa(torch, F, q, k, v, mask_t, torch.float32, args, ref, valid, vmax, np)
    if args.no_bf16:
        row["sdpa_bf16"] = {"reason": "skipped (--no-bf16)"}
    else:
        try:
            qb, kb, vb = (x[0, 0].to(torch.bfloat16).float().numpy() for x in (q, k, v))
            ref_b, _ = reference_head(qb, kb, vb, mask, np)
            row["sdpa_bf16"] = run_sdpa(torch, F, q, k, v, mask_t, torch.bfloat16, args, ref_b, valid, vmax, np)
        except Exception as e:  # noqa: BLE001 -- bf16 unsupported on this CPU/torch
            row["sdpa_bf16"] = {"reason": reason(e)}

    row["flex"] = []
    for block in args.flex_blocks:
        if isinstance(flex, str):
            row["flex"].append({"block": block, "reason": flex})
        else:
            row["flex"].append(run_flex(torch, flex, q, k, v, mask_t, n, block, ref, valid, vmax, args, np))

    row["tessera"] = {"reason": tessera_reason} if tessera_reason else run_tessera_attn(args.tessera, spec, args)
    return speedups(row)


def checks_ok(row):
    items = [row["sdpa_fp32"], row["sdpa_bf16"]] + row["flex"]
    return all(it.get("check", {"ok": True})["ok"] for it in items)


def table_cells():
    """(cell, x, notes) for the report tables: cell(d, key) prints d[key] in ms or a footnote number
    for d["reason"] (collected in notes), x(v) a speedup or "-"."""
    notes = []

    def cell(d, key="ms", width=8):
        if d.get(key) is not None:
            return "%*.2f" % (width, d[key])
        r = d.get("reason", "n/a")
        if r not in notes:
            notes.append(r)
        return "%*s" % (width, "[%d]" % (notes.index(r) + 1))

    def x(v):
        return "%6.2fx" % v if v is not None else "%7s" % "-"

    return cell, x, notes


def fmt_table(rows, blocks):
    cell, x, notes = table_cells()
    flex_heads = " ".join("%8s" % ("flex%d" % b) for b in blocks)
    head = ("%-56s %5s %6s | %8s %8s %s | %8s %8s %8s | %7s %7s | %s" %
            ("workload", "n", "dens%", "sdpa32", "sdpa16", flex_heads, "ts.ilp", "ts.fbest", "ts.dense",
             "ilp/sd", "ilp/fx", "check"))
    lines = [head, "-" * len(head)]
    for r in rows:
        t = r["tessera"]
        flex_cells = " ".join(cell(f) for f in r["flex"])
        lines.append("%-56s %5d %6.2f | %s %s %s | %s %s %s | %s %s | %s" %
                     (r["spec"], r["n"], 100 * r["density"], cell(r["sdpa_fp32"]), cell(r["sdpa_bf16"]), flex_cells,
                      cell(t, "ilp"), cell(t, "fixed_best"), cell(t, "dense_flash"),
                      x(r["speedup_ilp_vs_sdpa_fp32"]), x(r["speedup_ilp_vs_flex_best"]),
                      "ok" if checks_ok(r) else "FAIL"))
    for i, r in enumerate(notes):
        lines.append("[%d] %s" % (i + 1, r))
    return "\n".join(lines)


def parse_blocks(s):
    try:
        b = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        b = []
    if not b or any(x < 16 or x & (x - 1) for x in b):
        raise argparse.ArgumentTypeError("--flex-blocks %r: expected powers of two >= 16, e.g. 128,64" % s)
    return b


def add_common_args(ap):
    """The options both attention peers take."""
    ap.add_argument("tessera", nargs="?", default=os.environ.get("TESSERA_BIN", os.path.join(ROOT, "build", "tessera")),
                    help="tessera binary (default $TESSERA_BIN or build/tessera)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--json-out", metavar="FILE", help="also write the JSON report to FILE")
    ap.add_argument("--threads", type=int, default=2, help="threads for torch and tessera, default 2")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per variant (median), default 5")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls first, default 2")
    ap.add_argument("--heads", type=int, default=8, help="heads, default 8")
    ap.add_argument("--head-dim", type=int, default=64, help="head dimension d, default 64")
    ap.add_argument("--batch", type=int, default=1, help="batch, default 1")
    ap.add_argument("--flex-blocks", type=parse_blocks, default=[128, 64],
                    help="FlexAttention BlockMask block sizes, default 128,64")
    ap.add_argument("--no-flex", action="store_true", help="skip FlexAttention (it compiles: slow the first time)")
    ap.add_argument("--spec", action="append", help="run only these workloads (repeatable)")


def check_common_args(ap, args, prog):
    """Range checks of the common options; False (after a message) when the binary is missing."""
    if min(args.threads, args.repeats, args.heads, args.head_dim, args.batch) < 1 or args.warmup < 0:
        ap.error("--threads, --repeats, --heads, --head-dim, --batch must be >= 1 and --warmup >= 0")
    if not (os.path.isfile(args.tessera) and os.access(args.tessera, os.X_OK)):
        print("%s: tessera binary %s not found or not executable (pass it or set TESSERA_BIN)" % (prog, args.tessera),
              file=sys.stderr)
        return False
    return True


def compile_flex(torch, no_flex):
    """(flex_attention, create_block_mask, compiled) or the reason string FlexAttention cannot run."""
    if no_flex:
        return "skipped (--no-flex)"
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        import torch._dynamo
        # one compiled graph per (n, block size): more than dynamo's default recompile limit
        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, max(256, getattr(torch._dynamo.config, knob)))
        return flex_attention, create_block_mask, torch.compile(flex_attention, dynamic=False, fullgraph=True)
    except Exception as e:  # noqa: BLE001 -- old torch without flex attention
        return reason(e)


def cpu_capability(torch):
    try:
        return torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001
        return "unknown"


def run_specs(specs, measure_one, ok, prog):
    """rows of measure_one(spec) for every spec (progress on stderr) and the exit status: 1 when a
    row's check failed; rows None when `tessera pattern` failed (reported)."""
    rows, status = [], 0
    try:
        for spec in specs:
            t0 = time.perf_counter()
            rows.append(measure_one(spec))
            if not ok(rows[-1]):
                status = 1
            print("measured %s (%.0f s)" % (spec, time.perf_counter() - t0), file=sys.stderr)
    except TesseraError as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return None, 1
    return rows, status


def write_json(meta, rows, args):
    """The report to --json-out and, with --json, to stdout; True when it was printed."""
    meta["loadavg_end"] = list(os.getloadavg())
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(dict(meta, rows=rows), f, indent=1)
    if args.json:
        print(json.dumps(dict(meta, rows=rows), indent=1))
    return args.json


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--no-bf16", action="store_true", help="skip bf16 SDPA")
    args = ap.parse_args()
    if not check_common_args(ap, args, "attn_torch"):
        return 1
    ensure_torch()
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    flex = compile_flex(torch, args.no_flex)
    tessera_reason = tessera_available(args.tessera)
    probe = empty_row_probe(torch, F)
    cpu_cap = cpu_capability(torch)
    meta = {"torch": torch.__version__, "numpy": np.__version__, "cpu_capability": cpu_cap,
            "threads": torch.get_num_threads(), "repeats": args.repeats, "warmup": args.warmup,
            "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "seed": SEED,
            "tessera": args.tessera, "tessera_attn": tessera_reason or "available",
            "torch_sdpa_fully_masked_row": probe, "loadavg_start": list(os.getloadavg())}

    rows, status = run_specs(args.spec or SPECS, lambda spec: measure(spec, args, torch, F, flex, np, tessera_reason),
                             checks_ok, "attn_torch")
    if rows is None:
        return status
    if not write_json(meta, rows, args):
        print("torch %s (CPU capability %s), numpy %s; %d threads; B=%d H=%d d=%d; times in ms: median of %d "
              "in-process calls after %d warm-up" % (torch.__version__, cpu_cap, np.__version__, meta["threads"],
                                                    args.batch, args.heads, args.head_dim, args.repeats, args.warmup))
        print("a query row with no allowed key gives: torch SDPA fp32 %s, bf16 %s, SDPA math backend %s, eager "
              "flex_attention %s; tessera: zeros. Such rows are left out of the checks" %
              (probe["fp32"], probe["bf16"], probe["fp32_math_backend"], probe["flex_eager_fp32"]))
        print("tessera attn bench: %s; load average at start %.1f, at end %.1f (on %d CPUs)" %
              (tessera_reason or "available", meta["loadavg_start"][0], meta["loadavg_end"][0], os.cpu_count() or 0))
        print(fmt_table(rows, args.flex_blocks))
        bad = [(r["spec"], k, c["check"]) for r in rows
               for k, c in [("sdpa_fp32", r["sdpa_fp32"]), ("sdpa_bf16", r["sdpa_bf16"])] +
               [("flex%d" % f["block"], f) for f in r["flex"]] if "check" in c and not c["check"]["ok"]]
        for spec, k, c in bad:
            print("CHECK FAILED %s %s: max err %.3g of max|V| > tol %.3g" % (spec, k, c["max_err"], c["tol"]))
    return status


if __name__ == "__main__":
    sys.exit(main())
