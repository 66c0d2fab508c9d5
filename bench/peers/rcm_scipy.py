#!/usr/bin/env python3
"""Reverse Cuthill-McKee side by side: SciPy's scipy.sparse.csgraph.reverse_cuthill_mckee
against tessera's `reorder --method rcm` (and auto, ic), on the pattern generator suite.

For each spec: `tessera pattern SPEC --out X.mtx` writes the pattern; SciPy reorders A | A^T
(symmetric_mode=True, which assumes a symmetric pattern -- tessera also orders the symmetrized
pattern) and is timed in-process, median of --repeats runs after one warm-up; bandwidth
(max |i - j| over the nonzeros of the relabelled pattern P A P^T) and non-empty TxT tiles are
computed here for the original and the SciPy order; tessera's figures come from
`tessera reorder --pattern SPEC --method M --out perm.npy --json` (its own in-process time,
median of --repeats runs; the bandwidth and tiles it reports are checked against the ones
recomputed here from the permutation it wrote). One table row (or JSON object) per spec.

Usage: rcm_scipy.py [TESSERA_BIN] [--json] [--repeats 5] [--tile 16] [--spec SPEC ...]
TESSERA_BIN defaults to $TESSERA_BIN, else build/tessera under the repository root.
SciPy/NumPy come from the current interpreter when it has them, else from bench/peers/.venv,
created on first use (python3 -m venv; pip install -r bench/peers/requirements.txt).
Exit status: 0 ok, 1 when the tessera binary fails (its stderr is shown), 2 on bad usage."""
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
VENV = os.path.join(HERE, ".venv")
REQS = os.path.join(HERE, "requirements.txt")

BASE_SPECS = [
    "window1d:n=4096,w=64,global=16",
    "window2d:h=32,w=32,k=7",
    "window2d:h=64,w=64,k=13",
    "dilated2d:h=64,w=64,k=7,d=2",
    "swin:h=56,w=56,win=7,shift=1",
    "vitdet:h=64,w=64,win=14,global=4",
    "random:n=4096,density=0.01,seed=1",
]
SPECS = BASE_SPECS + ["permute:" + s + ",seed=7" for s in BASE_SPECS]
TESSERA_METHODS = ["rcm", "auto", "ic"]


def ensure_scipy():
    """Imports numpy and scipy, re-running this script inside bench/peers/.venv when needed."""
    peerenv.ensure("rcm_scipy", ["numpy", "scipy.sparse.csgraph"], VENV, REQS)


class TesseraError(Exception):
    pass


def run_tessera(binary, args):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise TesseraError("%s %s exited %d: %s" % (binary, " ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def pattern_metrics(rows, cols, perm, tile, np):
    """Bandwidth and non-empty tile x tile tiles of P A P^T (perm[new] = old; None = identity)."""
    if perm is not None:
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size, dtype=perm.dtype)
        rows, cols = inv[rows], inv[cols]
    bw = int(np.abs(rows.astype(np.int64) - cols).max()) if rows.size else 0
    nbc = (int(cols.max()) // tile + 1) if cols.size else 1
    tiles = np.unique((rows.astype(np.int64) // tile) * nbc + cols // tile).size
    return bw, int(tiles)


def tessera_reorder(binary, spec, method, tile, repeats, tmpdir):
    """Runs `tessera reorder` `repeats` times; returns its last JSON report, the path of the
    permutation it wrote and the median of its in-process times (ms)."""
    perm_path = os.path.join(tmpdir, "perm_%s.npy" % method)
    times, j = [], None
    for _ in range(repeats):
        out = run_tessera(binary, ["reorder", "--pattern", spec, "--method", method, "--tile", str(tile),
                                   "--out", perm_path, "--json"])
        j = json.loads(out)
        times.append(float(j["reorder_ms"]))
    return j, perm_path, statistics.median(times)


def measure(spec, binary, tile, repeats, np, csgraph):
    with tempfile.TemporaryDirectory(prefix="rcm_scipy_") as tmpdir:
        mtx = os.path.join(tmpdir, "pattern.mtx")
        run_tessera(binary, ["pattern", spec, "--out", mtx])
        import scipy.io
        a = scipy.io.mmread(mtx).tocsr()
        n, nnz = a.shape[0], a.nnz
        coo = a.tocoo()
        r, c = coo.row.astype(np.int64), coo.col.astype(np.int64)
        sym = ((a != 0).astype(np.int8) + (a != 0).astype(np.int8).T).tocsr()
        sym.data[:] = 1
        csgraph.reverse_cuthill_mckee(sym, symmetric_mode=True)  # warm-up
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            perm = csgraph.reverse_cuthill_mckee(sym, symmetric_mode=True)
            ts.append((time.perf_counter() - t0) * 1e3)
        perm = np.asarray(perm, dtype=np.int64)
        bw0, tiles0 = pattern_metrics(r, c, None, tile, np)
        bws, tiles_s = pattern_metrics(r, c, perm, tile, np)
        row = {"spec": spec, "n": n, "nnz": int(nnz), "bandwidth_original": bw0, "tiles_original": tiles0,
               "scipy_rcm": {"bandwidth": bws, "tiles": tiles_s, "ms": statistics.median(ts)}}
        for m in TESSERA_METHODS:
            j, perm_path, ms = tessera_reorder(binary, spec, m, tile, repeats, tmpdir)
            tp = np.load(perm_path).astype(np.int64)
            if tp.shape != (n,) or not np.array_equal(np.sort(tp), np.arange(n)):
                raise TesseraError("tessera reorder --method %s wrote an invalid permutation for %s" % (m, spec))
            bw, tiles = pattern_metrics(r, c, tp, tile, np)
            # tessera's own report must agree with the figures recomputed here from its order
            if (bw, tiles, bw0, tiles0) != (j["bandwidth_after"], j["tiles_nonempty"], j["bandwidth_before"],
                                            j["tiles_nonempty_before"]):
                raise TesseraError("tessera reorder --method %s on %s reports bandwidth %s -> %s, tiles %s -> %s; "
                                   "recomputed from its permutation: %d -> %d, %d -> %d" %
                                   (m, spec, j["bandwidth_before"], j["bandwidth_after"], j["tiles_nonempty_before"],
                                    j["tiles_nonempty"], bw0, bw, tiles0, tiles))
            row["tessera_" + m] = {"bandwidth": bw, "tiles": tiles, "ms": ms, "method": j["method"]}
        row["ratio_bandwidth_tessera_scipy"] = (row["tessera_rcm"]["bandwidth"] / bws) if bws else None
        return row


def fmt_table(rows, tile):
    head = ("%-50s %6s %8s | %6s %6s %6s %5s | %8s %8s | %6s %6s %6s %12s %6s" %
            ("spec", "n", "nnz", "bw", "scipy", "ts.rcm", "ratio", "scipy ms", "ts ms",
             "t%d" % tile, "scipy", "ts.rcm", "ts.auto", "ts.ic"))
    lines = [head, "-" * len(head)]
    for r in rows:
        s, t = r["scipy_rcm"], r["tessera_rcm"]
        ratio = "%5.2f" % r["ratio_bandwidth_tessera_scipy"] if r["ratio_bandwidth_tessera_scipy"] is not None else "  -  "
        auto = "%d (%s)" % (r["tessera_auto"]["tiles"], r["tessera_auto"]["method"])
        lines.append("%-50s %6d %8d | %6d %6d %6d %s | %8.2f %8.2f | %6d %6d %6d %12s %6d" %
                     (r["spec"], r["n"], r["nnz"], r["bandwidth_original"], s["bandwidth"], t["bandwidth"], ratio,
                      s["ms"], t["ms"], r["tiles_original"], s["tiles"], t["tiles"], auto,
                      r["tessera_ic"]["tiles"]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera", nargs="?", default=os.environ.get("TESSERA_BIN", os.path.join(ROOT, "build", "tessera")),
                    help="tessera binary (default $TESSERA_BIN or build/tessera)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per tool (median), default 5")
    ap.add_argument("--tile", type=int, default=16, help="tile side of the non-empty tile counts, default 16")
    ap.add_argument("--spec", action="append", help="run only these specs (repeatable)")
    args = ap.parse_args()
    if args.repeats < 1 or args.tile < 1:
        ap.error("--repeats and --tile must be >= 1")
    if not (os.path.isfile(args.tessera) and os.access(args.tessera, os.X_OK)):
        print("rcm_scipy: tessera binary %s not found or not executable (pass it or set TESSERA_BIN)" % args.tessera,
              file=sys.stderr)
        return 1
    ensure_scipy()
    import numpy as np
    import scipy
    from scipy.sparse import csgraph

    rows = []
    try:
        for spec in args.spec or SPECS:
            rows.append(measure(spec, args.tessera, args.tile, args.repeats, np, csgraph))
            if not args.json:
                print("measured %s" % spec, file=sys.stderr)
    except TesseraError as e:
        print("rcm_scipy: %s" % e, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"scipy": scipy.__version__, "numpy": np.__version__, "tile": args.tile,
                          "repeats": args.repeats, "tessera": args.tessera, "rows": rows}, indent=1))
    else:
        print("scipy %s, numpy %s; times: median of %d in-process runs; tiles: non-empty %dx%d" %
              (scipy.__version__, np.__version__, args.repeats, args.tile, args.tile))
        print(fmt_table(rows, args.tile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
