#!/usr/bin/env python3
"""Renders a results folder written by scripts/results.sh into docs/RESULTS.md and one SVG bar
chart per subsystem.

  scripts/render_results.py RESULTS_DIR [--md docs/RESULTS.md] [--svg-dir docs/img]

RESULTS_DIR holds meta.json (date, commit, machine profile, load average, the list of runs with
their commands and exit status) and one JSON per benchmark, NAME.json for the native ISA class and
NAME.avx2.json for the AVX2 class where the machine has AVX-512. Any other JSON in the folder with
a "device" field (bench/cuda/bench_attn_cuda --json, bench/peers/attn_torch_cuda.py --json-out) is
rendered as GPU rows. Every ratio is tessera's speed over the peer's (> 1: tessera is faster); one
whose quartiles or interval contain 1.0 is printed as "no difference". A benchmark that failed, or
a peer that did not run, is said so in its row. Charts use matplotlib when it is installed, else
plain SVG written here.

Exit status: 0 written, 2 bad usage or a folder that is not a results folder."""
import argparse
import glob
import html
import json
import math
import os
import sys

SUBSYSTEMS = [  # key, title, what the ratio compares
    ("llm", "LLM inference (GGUF, CPU)", "tok/s of tessera ÷ tok/s of llama.cpp"),
    ("conv", "Convolution (whole network, batch 1)", "peer ms ÷ tessera ms, summed over the network's convolution layers"),
    ("gconv", "Group convolution (CondenseNet / ShuffleNet layers)", "peer ms ÷ tessera ms, summed over the model's group-convolution layers"),
    ("attn", "Sparse attention (8 heads, d = 64)", "peer ms ÷ tessera ms"),
    ("vit", "ViT end to end", "dense-flash model ms ÷ scheduled model ms"),
]
NOTEBOOK = "BENCHMARKS.md"   # the lab notebook, relative to docs/
NOTEBOOK_ALT = "notes/BENCHMARKS.md"


class BadInput(Exception):
    pass


# ---- reading JSON defensively --------------------------------------------------------------------

def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except FileNotFoundError:
        raise BadInput("%s: %s not found" % (what, path))
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput("%s: cannot read %s: %s" % (what, path, e))
    except ValueError as e:
        raise BadInput("%s: %s is not valid JSON (%s)" % (what, path, e))
    if not isinstance(d, dict):
        raise BadInput("%s: %s holds a JSON %s, not an object" % (what, path, type(d).__name__))
    return d


def get(d, *path):
    """d[path[0]][path[1]]... or None where a level is missing or of the wrong type."""
    for k in path:
        if isinstance(d, dict) and k in d:
            d = d[k]
        elif isinstance(d, list) and isinstance(k, int) and -len(d) <= k < len(d):
            d = d[k]
        else:
            return None
    return d


def num(d, *path):
    v = get(d, *path)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def text(d, *path):
    v = get(d, *path)
    return v if isinstance(v, str) else None


def spread(d, key):
    """(lo, hi, kind) of a ratio d[key]: quartiles d[key_q25], d[key_q75] or d[key] = {q25, q75}
    or, failing those, a 95% interval d[key_ci95] = [lo, hi]. (None, None, None) when absent."""
    lo, hi = num(d, key + "_q25"), num(d, key + "_q75")
    if lo is None or hi is None:
        lo, hi = num(d, key, "q25"), num(d, key, "q75")
    if lo is not None and hi is not None:
        return lo, hi, "quartiles"
    lo, hi = num(d, key + "_ci95", 0), num(d, key + "_ci95", 1)
    if lo is not None and hi is not None:
        return lo, hi, "95% interval"
    return None, None, None


def ratio_of(d, key):
    """The ratio d[key] (a number, or an object whose median is the ratio) and its spread."""
    r = num(d, key)
    if r is None:
        r = num(d, key, "median")
    lo, hi, kind = spread(d, key)
    return r, lo, hi, kind


# ---- formatting ------------------------------------------------------------------------------------

def fmt(v, unit="", digits=None):
    if v is None:
        return "—"
    if digits is None:
        a = abs(v)
        digits = 0 if a >= 1000 else 1 if a >= 100 else 2 if a >= 1 else 3
    return ("%.*f" % (digits, v)) + unit


def fx(v):
    return "%.2f×" % v if v is not None else "—"


def verdict(r, lo, hi):
    """'win', 'loss', 'tie' (interval contains 1.0) or None."""
    if r is None:
        return None
    if lo is not None and hi is not None and lo <= 1.0 <= hi:
        return "tie"
    return "win" if r >= 1.0 else "loss"


def ratio_cell(r, lo, hi, kind):
    v = verdict(r, lo, hi)
    if v is None:
        return "—"
    iv = " [%.2f, %.2f]%s" % (lo, hi, "" if kind == "quartiles" else " (95% CI)") if lo is not None else ""
    if v == "tie":
        return "no difference (%s%s)" % (fx(r), iv)
    if v == "win":
        return "**%s**%s tessera faster" % (fx(r), iv)
    return "**%s**%s tessera slower (peer %.2f× faster)" % (fx(r), iv, 1.0 / r)


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


class Row:
    """One line of a subsystem's table: tessera against one peer on one workload."""

    def __init__(self, key, workload, tessera="—", peer="—", config="—", ratio=None, lo=None, hi=None,
                 kind=None, pct="—", note="", headline=False, failed=None, short=None):
        self.key, self.workload, self.tessera, self.peer, self.config = key, workload, tessera, peer, config
        self.ratio, self.lo, self.hi, self.kind, self.pct, self.note = ratio, lo, hi, kind, pct, note
        self.headline, self.failed = headline, failed
        self.short = short or workload   # the label in the summary and the chart
        self.other = {}                  # isa class -> (ratio, lo, hi, kind, failed)


def failed_row(key, workload, why):
    return Row(key, workload, failed=why, short=workload)


# ---- per-subsystem readers: JSON -> rows ----------------------------------------------------------

def peak_of(d, meta):
    p = num(d, "peak_gflops")
    return p if p else num(meta, "machine", "peak_gflops_fp32")


def pct_of_peak(gflops, peak, effective=False):
    if gflops is None or not peak:
        return "—"
    return "%.0f%% of %.0f GFLOP/s%s" % (100.0 * gflops / peak, peak, " (effective: direct-convolution FLOPs; Winograd can pass 100%)" if effective else "")


def rows_llm_speed(d, meta, run):
    rows = []
    bench = get(d, "bench")
    if not isinstance(bench, list) or not bench:
        return [failed_row("llm-speed", "LLM prefill/decode", "the JSON has no 'bench' rows")]
    model = os.path.basename(text(d, "model") or "model")
    ver = text(d, "llama_cpp_python") or "?"
    sysinfo = (text(d, "llama_system_info") or text(d, "system_info") or text(get(d, "llama") or {}, "system_info")
               or text(meta, "peers", "llama_cpp_" + str(run.get("isa_class", "native")), "system_info"))
    flags = text(d, "llama_cmake_args") or text(d, "cmake_args")
    isa = text(d, "isa") or "native"
    thr = num(d, "threads")
    cfg = ["llama-cpp-python %s" % ver, "%d threads" % thr if thr else None,
           "OMP_WAIT_POLICY %s" % (text(d, "llama_omp_wait_policy") or "?"),
           "build: %s" % flags if flags else ("AVX2-only build" if isa == "avx2" else None),
           "ISA: %s" % sysinfo.replace("CPU : ", "").replace(" = 1", "").replace(" |", ",").strip(" ,")
           if sysinfo else "ISA flags not recorded"]
    cfg = ", ".join(c for c in cfg if c)
    for b in bench:
        P, G = num(b, "prompt_len"), num(b, "gen")
        t, l = get(b, "tessera") or {}, get(b, "llama") or {}
        lb = get(b, "llama_bench")  # llama.cpp's own llama-bench, where the peer script runs it
        for phase, key in (("prefill", "prefill"), ("decode", "decode")):
            tv = num(t, key + "_tps")
            peers = [(num(l, key + "_tps"), "llama.cpp (Python binding)")]
            if isinstance(lb, dict):
                peers.append((num(lb, key + "_tps"), "llama-bench"))
            peers = [p for p in peers if p[0]]
            wl = ("prefill %s tokens" % fmt(P, digits=0)) if phase == "prefill" else ("decode %s tokens after %s" % (fmt(G, digits=0), fmt(P, digits=0)))
            if tv is None or not peers:
                rows.append(failed_row("llm-%s-%s" % (phase, P), "%s, %s" % (model, wl),
                                       "tessera figure missing" if tv is None else "llama.cpp figure missing"))
                continue
            pv, pname = max(peers)
            # the per-pair ratios against the faster peer (llm_llamacpp.py writes both)
            r, lo, hi, kind = ratio_of(b, key + ("_ratio" if pname.startswith("llama.cpp") else "_ratio_llama_bench"))
            if r is None:
                r, lo, hi, kind = tv / pv, None, None, None
            pcfg = cfg
            if pname == "llama-bench":
                lbi = get(d, "llama_bench") or {}
                pcfg = ", ".join(c for c in (
                    "llama.cpp's llama-bench built from the binding's vendored source (commit %s)" % (text(lbi, "build_commit") or "?"),
                    "%d threads" % thr if thr else None,
                    "flash attention %s" % text(lbi, "flash_attn") if text(lbi, "flash_attn") else None,
                    "decode at depth %s (-d)" % fmt(P, digits=0) if phase == "decode" else None,
                    "CMake: %s" % " ".join(f for f in (get(lbi, "cmake_flags") or []) if isinstance(f, str) and f.startswith("-DGGML_"))
                    if get(lbi, "cmake_flags") else None) if c)
            pct = "—"
            if phase == "decode" and num(t, "pct_bandwidth") is not None:
                pct = "%.0f%% of %.1f GB/s read bandwidth" % (num(t, "pct_bandwidth"), num(t, "bandwidth_gbs") or 0)
            note = ""
            oc = num(t, "other_cpus")
            if oc is not None:
                note = "other processes took %.2f CPUs during tessera's run" % oc
            rows.append(Row("llm-%s-%s" % (phase, P), "%s, %s" % (model, wl), fmt(tv, " tok/s"), "%s: %s" % (pname, fmt(pv, " tok/s")),
                            pcfg, r, lo, hi, kind, pct, note, headline=(phase == "decode" or P == 128 or len(bench) == 1),
                            short="LLM %s (p%s)" % (phase, fmt(P, digits=0))))
    return rows


def rows_llm_ppl(d, meta, run):
    p = get(d, "perplexity")
    if not isinstance(p, dict):
        return [failed_row("llm-ppl", "perplexity", "the JSON has no 'perplexity' object")]
    ts, ll = num(p, "tessera", "ppl"), num(p, "llama", "ppl")
    if ts is None or ll is None:
        return [failed_row("llm-ppl", "perplexity", "a perplexity figure is missing")]
    ch, ctx = num(p, "llama", "chunks"), num(p, "tessera", "ctx")
    rd = num(p, "rel_diff")
    wl = "perplexity, Hamlet, %s windows × %s tokens" % (fmt(ch, digits=0), fmt(ctx, digits=0))
    same = "equal to %.1e (relative)" % abs(rd) if rd is not None else ""
    ok = get(p, "pass")
    return [Row("llm-ppl", wl, "%.4f" % ts, "llama.cpp: %.4f" % ll,
                "llama-cpp-python %s, same windows and scoring" % (text(d, "llama_cpp_python") or "?"),
                None, pct="—", note="accuracy, not speed: %s%s" % (same, "" if ok in (True, None) else "; the check FAILED (target 0.5%)"),
                short="perplexity")]


def conv_config(d, col, meta=None):
    impls = set()
    for l in get(d, "layers") or []:
        v = text(l, "impl", col)
        if v:
            impls.add(v)
    thr = num(d, "threads")
    lib = {"onednn": "oneDNN", "openblas": "OpenBLAS im2col + sgemm", "torch": "PyTorch"}
    name = col
    for k, v in lib.items():
        if col.startswith(k):
            name = v + (" " + col[len(k) + 1:] if col.startswith("onednn_") else "")
    dnnl = text(meta or {}, "peers", "libdnnl2")
    if col.startswith("onednn") and dnnl:
        name = name.replace("oneDNN", "oneDNN %s (Debian libdnnl2)" % dnnl.split("-")[0], 1)
    parts = [name, "NCHW in/out, reorders timed" if col.startswith("onednn") else None,
             "%d threads" % thr if thr else None, "kernels capped at %s" % text(d, "kernels") if text(d, "kernels") else None]
    s = ", ".join(p for p in parts if p)
    if impls:
        s += "; implementations: " + ", ".join(sorted(impls)[:4]) + (" …" if len(impls) > 4 else "")
    return s


def rows_conv(d, meta, run):
    model = text(d, "model") or run.get("name", "conv")
    b = num(d, "batch") or 1
    ta = num(d, "total_ms", "auto")
    if ta is None:
        return [failed_row("conv-" + model, "%s batch %d" % (model, b), "total_ms.auto missing")]
    layers = get(d, "layers") or []
    gflop = sum(num(l, "gflop") or 0 for l in layers)
    pct = pct_of_peak(gflop / (ta * 1e-3) if gflop else None, peak_of(d, meta), effective=True)
    e2e = num(d, "e2e", "forward_ms")
    tcell = "%s (forward %s)" % (fmt(ta, " ms"), fmt(e2e, " ms")) if e2e else fmt(ta, " ms")
    rows = []
    wl = "%s, batch %d, %d conv layers" % (model, b, len(layers))
    best = text(d, "onednn_best")
    bms = num(d, "total_ms", "onednn")
    if bms is None or not best:
        rows.append(failed_row("conv-%s-onednn" % model, wl + " vs oneDNN", "oneDNN baseline did not run"))
    else:
        r, lo, hi, kind = ratio_of(d, "speedup_vs_onednn")
        rows.append(Row("conv-%s-onednn" % model, wl, tcell, "oneDNN best: %s" % fmt(bms, " ms"), conv_config(d, best, meta),
                        r if r is not None else bms / ta, lo, hi, kind, pct,
                        "per-layer minimum of oneDNN: %s" % fx(num(d, "speedup_vs_onednn_per_layer_min")),
                        headline=True, short="conv %s vs oneDNN" % model))
    oms = num(d, "total_ms", "openblas")
    if oms is not None:
        r, lo, hi, kind = ratio_of(d, "speedup_vs_openblas")
        rows.append(Row("conv-%s-openblas" % model, wl, tcell, "OpenBLAS im2col: %s" % fmt(oms, " ms"), conv_config(d, "openblas", meta),
                        r if r is not None else oms / ta, lo, hi, kind, pct, short="conv %s vs OpenBLAS" % model))
    tms = num(d, "total_ms", "torch")
    if tms is not None:
        r, lo, hi, kind = ratio_of(d, "speedup_vs_torch")
        rows.append(Row("conv-%s-torch" % model, wl, tcell, "PyTorch: %s" % fmt(tms, " ms"),
                        "PyTorch %s" % (text(d, "torch_version") or "?"), r if r is not None else tms / ta, lo, hi, kind, pct,
                        short="conv %s vs PyTorch" % model))
    return rows


GCONV_NAMES = {"dense": "dense masked sgemm/im2col", "deploy": "deploy path (gather + equal-size grouped conv)",
               "onednn_grouped": "oneDNN grouped conv", "onednn_dense": "oneDNN dense conv", "spmm": "CSR SpMM",
               "torch": "PyTorch", "best_baseline": "best baseline per layer"}


def rows_gconv(d, meta, run):
    model = text(d, "model") or run.get("name", "gconv")
    conn = text(d, "connectivity") or "?"
    cond = num(d, "condense")
    ours = num(d, "total_ms", "ours")
    wl = "%s, %s%s" % (model, conn, (", condense %d" % cond) if cond and model == "condensenet" else "")
    if ours is None:
        return [failed_row("gconv-" + model + conn, wl, "total_ms.ours missing")]
    layers = get(d, "layers") or []
    fl = sum(num(l, "flops") or 0 for l in layers)
    pct = pct_of_peak(fl / (ours * 1e-3) * 1e-9 if fl else None, peak_of(d, meta))
    thr = num(d, "threads")
    base_cfg = "%s%s, fp32" % ("%d threads" % thr if thr else "", ", kernels %s" % text(d, "kernels") if text(d, "kernels") else "")
    rows = []
    nl = "%s, %d layers" % (wl, len(layers))
    comps = [("best_baseline", "speedup_vs_best_baseline", "fastest of dense, deploy, oneDNN grouped/dense, SpMM, chosen per layer", True)]
    bs = text(d, "best_single_baseline")
    if bs:
        comps.append((bs, "speedup_vs_best_single_baseline", GCONV_NAMES.get(bs, bs) + " (best single baseline over the model)", False))
    if bs != "deploy":
        comps.append(("deploy", "speedup_vs_deploy", GCONV_NAMES["deploy"], False))
    comps.append(("torch", "speedup_vs_torch", "PyTorch %s" % (text(d, "torch_version") or ""), False))
    for col, key, desc, head in comps:
        pms = num(d, "total_ms", col)
        if pms is None:
            if col == "torch":
                continue   # PyTorch runs only through bench/peers/gconv_torch.py
            rows.append(failed_row("gconv-%s-%s-%s" % (model, conn, col), nl + " vs " + col, "%s did not run" % col))
            continue
        r, lo, hi, kind = ratio_of(d, key)
        rows.append(Row("gconv-%s-%s-%s" % (model, conn, col), nl, fmt(ours, " ms"),
                        "%s: %s" % (GCONV_NAMES.get(col, col), fmt(pms, " ms")), desc + "; " + base_cfg,
                        r if r is not None else pms / ours, lo, hi, kind, pct, headline=head,
                        short="gconv %s %s vs %s" % (model, conn, col.replace("_", " "))))
    re = num(d, "speedup_reorder")
    if rows and re is not None:
        rows[0].note = "reordering gains %s over the same plan without it" % fx(re)
    return rows


def rows_attn(d, meta, run):
    pat = text(d, "pattern") or run.get("name", "attn")
    il = num(d, "ilp")
    wl = "`%s`, %s tokens, density %s" % (pat, fmt(num(d, "n"), digits=0), "%.1f%%" % (100 * num(d, "density")) if num(d, "density") else "?")
    if il is None:
        return [failed_row("attn-" + pat, wl, "the scheduled ('ilp') time is missing")]
    pct = "%.1f%% of peak" % num(d, "pct_peak") if num(d, "pct_peak") is not None else "—"
    thr, dt = num(d, "threads"), text(d, "dtype") or "f32"
    rows = []
    fbr = num(d, "fixed_best_reordered")
    if fbr is not None:
        r, lo, hi, kind = ratio_of(d, "speedup_vs_fixed_best_reordered_paired")
        rounds = num(d, "speedup_vs_fixed_best_reordered_paired", "rounds")
        note = "paired: %d alternating rounds" % rounds if rounds else ""
        if r is None:
            r, lo, hi, kind, note = fbr / il, None, None, None, "unpaired medians"
        rows.append(Row("attn-%s-fbr" % pat, wl, fmt(il, " ms"), "best fixed tile, reordered: %s" % fmt(fbr, " ms"),
                        "block-skip tile %s on the same reordered mask, %s, %s threads" % (text(d, "fixed_best_reordered_tile") or "?", dt, fmt(thr, digits=0)),
                        r, lo, hi, kind, pct, note, headline=True, short="attn %s vs best fixed tile" % pat.split(":")[0]))
    f64 = num(d, "fixed_64")
    if f64 is not None:
        r, lo, hi, kind = ratio_of(d, "speedup_vs_fixed_64")
        rows.append(Row("attn-%s-f64" % pat, wl, fmt(il, " ms"), "fixed 64×64 tiles: %s" % fmt(f64, " ms"),
                        "block-skip 64×64 on the mask's own order, %s" % dt, r if r is not None else f64 / il, lo, hi, kind, pct,
                        short="attn %s vs fixed 64x64" % pat.split(":")[0]))
    return rows


def rows_vit(d, meta, run):
    model, res, pat = text(d, "model") or "?", num(d, "res"), text(d, "pattern") or "?"
    wl = "%s %s², %s tokens, `%s`, depth %s" % (model, fmt(res, digits=0), fmt(num(d, "tokens"), digits=0), pat, fmt(num(d, "depth"), digits=0))
    sched, dense, fixed = num(d, "ms_scheduled"), num(d, "ms_dense_flash"), num(d, "ms_fixed")
    if sched is None or dense is None:
        return [failed_row("vit-" + model, wl, "ms_scheduled / ms_dense_flash missing")]
    peak = peak_of(d, meta)
    gf = num(d, "gflop_sparse")
    pct = pct_of_peak(gf / (sched * 1e-3) if gf else None, peak)
    bound = num(d, "amdahl_bound")
    rows = []
    r, lo, hi, kind = ratio_of(d, "speedup_vs_dense_flash")
    ar, alo, ahi, _ = ratio_of(d, "attn_speedup_vs_dense_flash")
    note = "Amdahl bound %s (attention at zero cost); attention alone %s%s" % (
        fx(bound), fx(ar), " [%.2f, %.2f]" % (alo, ahi) if alo is not None else "")
    rounds = num(d, "rounds")
    if rounds:
        note += "; %d interleaved rounds" % rounds
    if num(d, "other_cpus") is not None:
        note += "; other processes took %.2f CPUs" % num(d, "other_cpus")
    rows.append(Row("vit-%s-%s-dense" % (model, fmt(res, digits=0)), wl, fmt(sched, " ms"), "dense flash attention: %s" % fmt(dense, " ms"),
                    "same model and weights, tessera's dense flash (64×64) attention", r if r is not None else dense / sched,
                    lo, hi, kind, pct, note, headline=True, short="ViT %s e2e vs dense flash" % model))
    if fixed is not None:
        r, lo, hi, kind = ratio_of(d, "speedup_vs_fixed")
        rows.append(Row("vit-%s-%s-fixed" % (model, fmt(res, digits=0)), wl, fmt(sched, " ms"),
                        "fixed %s tiles: %s" % (text(d, "fixed_tile") or "?", fmt(fixed, " ms")),
                        "same model, block-skip fixed tile (fastest of 4 by attention time)", r if r is not None else fixed / sched,
                        lo, hi, kind, pct, short="ViT %s e2e vs fixed tile" % model))
    return rows


READERS = {"llm-speed": rows_llm_speed, "llm-ppl": rows_llm_ppl, "conv": rows_conv, "gconv": rows_gconv,
           "attn": rows_attn, "vit": rows_vit}


def reader_for(run):
    name, sub = run.get("name", ""), run.get("subsystem", "")
    if sub == "llm":
        return rows_llm_ppl if "ppl" in name else rows_llm_speed
    return READERS.get(sub)


# ---- GPU rows ----------------------------------------------------------------------------------------

# The H200 figures of the lab notebook (2026-12-04, commit 268e7c3, batch 4 x 12 heads, d = 64, 4096
# tokens; CUDA events, mean of 20 launches; torch 2.11.0+cu130, TF32 off). Not rerun by results.sh.
GPU_STATIC = {
    "date": "2026-12-04", "commit": "268e7c3", "device": "NVIDIA H200",
    "rows": [  # mask, dtype, tessera gather ms, fbr ms (tile), flex ms, sdpa ms, tessera ms in the torch run
        ("window2d:h=64,w=64,k=13", "f32", 1.513, (1.848, "32x32"), 3.757, 7.155, 1.512),
        ("swin:h=56,w=56,win=7,shift=1", "f32", 0.413, (0.393, "32x32"), 2.162, 4.086, 0.414),
        ("vitdet:h=64,w=64,win=14,global=4", "f32", 1.754, (2.316, "32x32"), 5.752, 7.120, 1.734),
        ("window2d:h=64,w=64,k=13", "bf16", 1.515, (1.822, "32x32"), 0.249, 0.819, 1.515),
        ("swin:h=56,w=56,win=7,shift=1", "bf16", 0.414, (0.385, "32x32"), 0.191, 0.571, 0.415),
        ("vitdet:h=64,w=64,win=14,global=4", "bf16", 1.735, (2.173, "32x32"), 0.323, 0.815, 1.740),
    ],
}


def gpu_static_rows():
    rows = []
    for spec, dt, g, (fbr, tile), flex, sdpa, gt in GPU_STATIC["rows"]:
        name = spec.split(":")[0]
        wl = "`%s`, %s" % (spec, dt)
        rows.append(Row("gpu-%s-%s-flex" % (name, dt), wl, fmt(gt, " ms"), "FlexAttention: %s" % fmt(flex, " ms"),
                        "torch 2.11.0+cu130 FlexAttention, BlockMask 128, compiled%s" % (", bf16 on tensor cores" if dt == "bf16" else ", fp32 (TF32 off)"),
                        flex / gt, pct="—", note="SDPA with a bool mask: %s" % fmt(sdpa, " ms"), headline=True,
                        short="GPU %s %s vs FlexAttention" % (name, dt)))
    for spec, dt, g, (fbr, tile), flex, sdpa, gt in GPU_STATIC["rows"]:
        if dt != "f32":
            continue
        name = spec.split(":")[0]
        rows.append(Row("gpu-%s-%s-fbr" % (name, dt), "`%s`, %s" % (spec, dt), fmt(g, " ms"), "best fixed tile, reordered: %s" % fmt(fbr, " ms"),
                        "tessera's CUDA block-skip kernel, tile %s" % tile, fbr / g, pct="—",
                        short="GPU %s %s vs best fixed tile" % (name, dt)))
    return rows


def gpu_rows_from_json(path, d):
    """Rows from a GPU results JSON (bench_attn_cuda --json or attn_torch_cuda.py --json-out)."""
    dev = text(d, "device") or "GPU"
    rows = []
    if isinstance(get(d, "rows"), list):   # attn_torch_cuda.py
        for r in get(d, "rows"):
            spec, dt = text(r, "spec") or "?", text(r, "dtype") or "?"
            g = num(r, "tessera", "gather")
            peers = [(num(r, "sdpa", "ms"), "SDPA (bool mask)")]
            for f in get(r, "flex") or []:
                peers.append((num(f, "ms"), "FlexAttention, BlockMask %s" % fmt(num(f, "block"), digits=0)))
            peers = [p for p in peers if p[0]]
            wl = "`%s`, %s, %s" % (spec, dt, dev)
            if g is None or not peers:
                rows.append(failed_row("gpuj-%s-%s" % (spec, dt), wl, "tessera or peer time missing in %s" % os.path.basename(path)))
                continue
            pv, pn = min(peers)
            rows.append(Row("gpuj-%s-%s" % (spec, dt), wl, fmt(g, " ms"), "%s: %s" % (pn, fmt(pv, " ms")),
                            "torch %s on %s" % (text(d, "torch") or "?", dev), pv / g, headline=True,
                            short="GPU %s %s vs torch" % (spec.split(":")[0], dt)))
    else:                                   # bench_attn_cuda --json
        spec, dt = text(d, "pattern") or "?", text(d, "dtype") or "?"
        g, fbr = num(d, "gather"), num(d, "fixed_best_reordered")
        if g is None or fbr is None:
            g, fbr = num(d, "variable"), num(d, "fixed_best")
        wl = "`%s`, %s, %s" % (spec, dt, dev)
        if g is None or fbr is None:
            rows.append(failed_row("gpuj-" + spec, wl, "times missing in %s" % os.path.basename(path)))
        else:
            rows.append(Row("gpuj-%s-%s" % (spec, dt), wl, fmt(g, " ms"), "best fixed tile: %s" % fmt(fbr, " ms"),
                            "tessera's CUDA block-skip kernel, tile %s" % (text(d, "fixed_best_reordered_tile") or text(d, "fixed_best_tile") or "?"),
                            fbr / g, headline=True, short="GPU %s %s vs fixed tile" % (spec.split(":")[0], dt)))
    return rows


# ---- charts ------------------------------------------------------------------------------------------

COL = {"win": "#2e7d32", "loss": "#c62828", "tie": "#8a8a8a"}


def chart_items(rows):
    items = []
    for r in rows:
        if r.failed:
            items.append((r.short, None, None, None, "failed"))
        elif r.ratio is not None:
            items.append((r.short, r.ratio, r.lo, r.hi, verdict(r.ratio, r.lo, r.hi)))
        for cls, (ratio, lo, hi, _kind, failed) in sorted(r.other.items()):
            label = "%s (%s class)" % (r.short, cls.upper())
            items.append((label, None, None, None, "failed") if failed or ratio is None else
                         (label, ratio, lo, hi, verdict(ratio, lo, hi)))
    return items


def svg_chart(title, items, path):
    """A horizontal bar chart of ratios on a log2 axis, bars from 1.0, a line at 1.0; plain SVG."""
    vals = [v for it in items for v in it[1:4] if v]
    lo = min([0.5] + [v / 1.15 for v in vals])
    hi = max([2.0] + [v * 1.15 for v in vals])
    e0, e1 = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    W, LW, RW, RH, TOP = 860, 330, 90, 24, 44
    PW = W - LW - RW
    H = TOP + RH * len(items) + 40

    def X(v):
        return LW + (math.log2(v) - e0) / (e1 - e0) * PW
    e = html.escape
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="20" font-size="14" font-weight="bold">%s</text>' % e(title),
         '<text x="10" y="36" fill="#555">ratio = tessera speed ÷ peer speed (log scale; right of 1.0: tessera faster; grey: no difference)</text>']
    for k in range(e0, e1 + 1):
        x = X(2.0 ** k)
        lab = ("%g" % (2.0 ** k)) if k >= 0 else "1/%d" % (2 ** -k)
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>' % (x, TOP - 4, x, H - 34))
        o.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s×</text>' % (x, H - 20, lab))
    for i, (label, r, l, h, v) in enumerate(items):
        y = TOP + i * RH
        o.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (LW - 8, y + RH * 0.65, e(label[:52])))
        if r is None:
            o.append('<text x="%.1f" y="%d" fill="#c62828">%s</text>' % (X(1.0) + 6, y + RH * 0.65, "failed / not run"))
            continue
        x0, x1 = sorted((X(1.0), X(r)))
        o.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>' % (x0, y + 4, max(x1 - x0, 1.0), RH - 8, COL.get(v, "#555")))
        if l and h:
            o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (X(l), y + RH / 2, X(h), y + RH / 2))
            for xx in (X(l), X(h)):
                o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (xx, y + 7, xx, y + RH - 7))
        tx = max(X(r), X(h) if h else 0) + 5 if r >= 1 else X(1.0) + 5
        o.append('<text x="%.1f" y="%d">%s</text>' % (tx, y + RH * 0.65, "%.2f×%s" % (r, " (no diff.)" if v == "tie" else "")))
    x1 = X(1.0)
    o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-width="1.5"/>' % (x1, TOP - 6, x1, H - 34))
    o.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(o) + "\n")


def mpl_chart(title, items, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(items) + 1.2))
    for i, (label, r, l, h, v) in enumerate(items):
        y = len(items) - 1 - i
        if r is None:
            ax.text(1.0, y, "  failed / not run", va="center", color=COL["loss"])
            continue
        ax.barh(y, r - 1.0, left=1.0, color=COL.get(v, "#555"))
        if l and h:
            ax.errorbar(r, y, xerr=[[r - l], [h - r]], color="black", capsize=3)
        ax.text(max(r, h or 0) * 1.03 if r >= 1 else 1.03, y, "%.2f×" % r, va="center")
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels([it[0] for it in reversed(items)])
    ax.set_xscale("log", base=2)
    ax.axvline(1.0, color="black")
    ax.set_title(title)
    ax.set_xlabel("tessera speed ÷ peer speed")
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def chart(title, rows, path):
    items = chart_items(rows)
    if not items:
        return False
    try:
        import matplotlib  # noqa: F401
        mpl_chart(title, items, path)
    except ImportError:
        svg_chart(title, items, path)
    return True


# ---- the page ------------------------------------------------------------------------------------------

def load_str(la):
    if isinstance(la, list) and la and all(isinstance(x, (int, float)) for x in la):
        return "/".join("%.2f" % x for x in la[:3])
    return "?"


def machine_line(meta):
    m = get(meta, "machine") or {}
    cpu = get(meta, "cpu_model_name") or text(m, "cpu_model") or "unknown CPU"
    isa = get(m, "isa")
    isa = " ".join(isa) if isinstance(isa, list) else "?"
    return "%s, %s CPUs online, ISA %s; `tessera hwinfo`: %s GFLOP/s fp32 peak and %s GB/s read bandwidth on %s threads" % (
        cpu, fmt(num(meta, "cpus_online") or num(m, "cpus_online"), digits=0), isa, fmt(num(m, "peak_gflops_fp32"), digits=0),
        fmt(num(m, "bandwidth_gbs"), digits=1), fmt(num(m, "threads"), digits=0))


def rel_to_root(p):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = os.path.relpath(os.path.abspath(p), root)
    return p if r.startswith("..") else r


def short_paths(cmd):
    """A command with the repository's absolute prefix removed (the paths read as from its root)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return str(cmd).replace(root + "/", "")


def commit_str(meta):
    c = text(meta, "git", "commit") or "unknown"
    return c + ("-dirty" if get(meta, "git", "dirty") else "")


def sparsity_table(d, md_path):
    """One sweep folder (scripts/llm_sparsity_sweep.sh) in a few rows: for each method the
    configuration nearest 50% of its own sparsity, its perplexity against the dense model's and its
    decode speed against dense (interleaved); then SATS against CATS at each common target."""
    ev = load_json(os.path.join(d, "eval.json"), "sparsity eval") if os.path.exists(os.path.join(d, "eval.json")) else None
    be = load_json(os.path.join(d, "bench.json"), "sparsity bench") if os.path.exists(os.path.join(d, "bench.json")) else None
    meta = load_json(os.path.join(d, "meta.json"), "sparsity meta") if os.path.exists(os.path.join(d, "meta.json")) else {}
    if not ev:
        return []
    rel = os.path.relpath(os.path.join(d, "sparsity.md"), os.path.dirname(os.path.abspath(md_path)))
    out = ["%s on %s, calibrated on King Lear + The Tempest, evaluated on Hamlet (held out); %s, %s, commit %s. "
           "Full sweep, charts and the matched-sparsity comparison: [%s](%s)." % (
               get(ev, "model") or "?", get(ev, "text") or "?", get(meta, "machine") or "?", get(meta, "date") or "?",
               get(meta, "commit") or "?", rel, rel), "",
           "| method (no router) | own sparsity | weight bytes skipped | perplexity (dense %.3f) | decode vs dense [95%% CI] | byte bound |" %
           (num(ev, "dense", "ppl") or float("nan")),
           "| --- | --- | --- | --- | --- | --- |"]
    bmap = {(c.get("thresholds"), c.get("tau")): c for c in (be or {}).get("configs", [])}
    for m in ("cats", "sats", "teal"):
        cs = [c for c in ev.get("configs", []) if c.get("method") == m and "router" not in c]
        if not cs:
            continue
        own = lambda c: c.get("in_sparsity") if m == "teal" else c.get("act_sparsity")
        c = min(cs, key=lambda c: abs((own(c) or 0) - 0.5))
        b = bmap.get((c.get("thresholds"), None))
        sp = "%.3f× [%.3f, %.3f]" % (b["speedup"], b["speedup_lo"], b["speedup_hi"]) if b else "not timed"
        bound = "%.3f×" % b["byte_bound"] if b else "—"
        out.append("| %s | %.1f%% | %.1f%% | %.3f | %s | %s |" % (m, 100 * (own(c) or 0), 100 * c.get("weight_skip", 0), c.get("ppl", float("nan")), sp, bound))
    out.append("")
    # SATS against CATS at each target both calibrated (same target; measured sparsities given)
    by = {}
    for c in ev.get("configs", []):
        if c.get("method") in ("cats", "sats") and "router" not in c and c.get("target") is not None:
            by.setdefault(round(100 * c["target"]), {})[c["method"]] = c
    pairs = []
    for t in sorted(by):
        a, b2 = by[t].get("cats"), by[t].get("sats")
        if a and b2 and a.get("ppl") and b2.get("ppl"):
            pairs.append("%d%%: %+.1f%% (%.1f%% vs %.1f%% measured)" % (t, 100 * (b2["ppl"] / a["ppl"] - 1),
                                                                       100 * (b2.get("act_sparsity") or 0), 100 * (a.get("act_sparsity") or 0)))
    if pairs:
        out.append("SATS perplexity against CATS at the same target (negative: SATS better): " + "; ".join(pairs) + ".")
        out.append("")
    return out


def sparsity_section(md_path):
    """The newest activation-sparsity sweep of every model (results/*-sparsity*/). Empty when none."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(md_path)))
    dirs = sorted(glob.glob(os.path.join(root, "results", "*-sparsity*")))
    newest = {}
    for d in dirs:
        if not os.path.exists(os.path.join(d, "eval.json")):
            continue
        model = get(load_json(os.path.join(d, "eval.json"), "sparsity eval"), "model") or d
        newest[model] = d  # sorted by name, date first: the last is the newest
    if not newest:
        return []
    out = ["## LLM activation sparsity (decode; issue 33)", ""]
    for model in sorted(newest):
        out.extend(sparsity_table(newest[model], md_path))
    return out


def training_section(md_path):
    """Attention backward (results/*-attn-bwd/peers.json: bench/peers/attn_bwd_torch.py, whose rows
    hold `tessera attn bench --pass backward`) and the ViT training step (results/*-vit-train/*.json:
    `tessera vit train-bench --json`), the newest of each. Empty when neither exists."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(md_path)))
    out = []
    bw = sorted(glob.glob(os.path.join(root, "results", "*-attn-bwd", "peers.json")))
    if bw:
        j = load_json(bw[-1], "attention backward peers")
        rel = os.path.relpath(os.path.dirname(bw[-1]), os.path.dirname(os.path.abspath(md_path)))
        out += ["## Sparse attention training (issue 34)", "",
                "Attention backward (dQ, dK, dV; 10d flops per allowed cell), %s heads, d = %s, fp32, %s threads, torch %s "
                "(CPU capability %s); load average %.1f before, %.1f after. tessera: `attn bench --pass backward` (times per "
                "method: the fastest of its interleaved rounds; paired ratios: 21 alternating rounds); PyTorch: median of %s "
                "backward calls. Command: `python3 bench/peers/attn_bwd_torch.py build-m/tessera --flex-blocks 128 --json-out "
                "%s/peers.json` ([data](%s))." % (
                    get(j, "heads"), get(j, "head_dim"), get(j, "threads"), get(j, "torch"), get(j, "cpu_capability"),
                    (get(j, "loadavg_start") or [float("nan")])[0], (get(j, "loadavg_end") or [float("nan")])[0],
                    get(j, "repeats"), rel_to_root(os.path.dirname(bw[-1])), rel), "",
                "| workload | tessera backward | vs fixed 64×64 (own order) | vs best fixed tile (own order) | vs best fixed tile, reordered [paired] | "
                "re-solved for backward vs forward's schedule | backward / forward | % of peak | PyTorch SDPA backward | FlexAttention backward |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in j.get("rows", []):
            t = get(r, "tessera", "raw") or {}
            il = num(t, "ilp")
            if il is None:
                out.append("| `%s` | failed: %s | | | | | | | | |" % (r.get("spec"), md_escape(get(r, "tessera", "reason") or "?")))
                continue
            pr = get(t, "speedup_vs_fixed_best_reordered_paired") or {}
            sd = num(r, "sdpa_fp32", "ms")
            fl = [f for f in r.get("flex", []) if "ms" in f]
            why = (r.get("flex") or [{}])[0].get("reason", "—")
            flx = ("%.1f ms" % min(f["ms"] for f in fl)) if fl else "not run: " + md_escape(why.split(". ")[0])
            out.append("| `%s`, density %.1f%% | %.1f ms | %s | %s (%s) | %s (%s) [%.2f, %.2f] | %s | %.2f | %.1f%% | %s (tessera %s) | %s |" % (
                r.get("spec"), 100 * (r.get("density") or 0), il, fx(num(t, "speedup_vs_fixed_64")),
                fx(num(t, "speedup_vs_fixed_best")), text(t, "fixed_best_tile") or "?",
                fx(num(pr, "median")), text(t, "fixed_best_reordered_tile") or "?", num(pr, "q25") or float("nan"),
                num(pr, "q75") or float("nan"), fx(num(t, "speedup_vs_forward_schedule")),
                num(t, "pass_forward_ratio_ilp") or float("nan"), num(t, "pct_peak") or float("nan"),
                "%.0f ms" % sd if sd else "—", fx(sd / il) if sd else "—", flx))
        out.append("")
    vt = sorted(glob.glob(os.path.join(root, "results", "*-vit-train", "*.json")))
    if vt:
        out += vit_train_rows(vt, md_path)
    return out


def vit_train_rows(paths, md_path):
    """`vit train-bench --json` reports (fields suffixed by backend): one row per backend per run."""
    out = ["ViT training step (forward, backward, SGD; fp32, interleaved rounds), `tessera vit train-bench --json`:", "",
           "| run | backend | step (median) | attention share | vs dense flash (per-round median [quartiles]) | Amdahl bound | "
           "% of bound | peak activation (measured) | other processes |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for pth in paths:
        j = load_json(pth, "vit train-bench")
        wl = "%s %s², `%s`, batch %s, %s rounds ([data](%s))" % (
            text(j, "model") or "?", fmt(num(j, "res"), digits=0), text(j, "pattern") or "?", fmt(num(j, "batch"), digits=0),
            fmt(num(j, "rounds"), digits=0), os.path.relpath(pth, os.path.dirname(os.path.abspath(md_path))))
        for b in ("dense_flash", "fixed", "scheduled"):
            step = num(j, "step_ms_" + b)
            if step is None:
                continue
            sp = num(j, "speedup_vs_dense_flash_" + b)
            out.append("| %s | %s | %.2f s | %s | %s | %s | %s | %s | %s |" % (
                wl, b.replace("_", " "), step / 1e3,
                "%.0f%%" % (100 * num(j, "attn_share_" + b)) if num(j, "attn_share_" + b) is not None else "—",
                "%s [%.2f, %.2f]" % (fx(sp), num(j, "speedup_vs_dense_flash_%s_q25" % b), num(j, "speedup_vs_dense_flash_%s_q75" % b))
                if sp is not None else "—",
                fx(num(j, "amdahl_bound")) if b != "dense_flash" else "—",
                "%.0f%%" % (100 * num(j, "amdahl_fraction_" + b)) if num(j, "amdahl_fraction_" + b) is not None else "—",
                "%.0f MiB" % (num(j, "peak_activation_bytes_" + b) / 2**20) if num(j, "peak_activation_bytes_" + b) else "—",
                "%.2f CPUs" % num(j, "other_cpus") if num(j, "other_cpus") is not None else "?"))
    out.append("")
    return out


def pipe_section(md_path):
    """The stencil-pipeline runtime (issue 37): the newest results/*-pipe/bench_pipe.json (auto
    granularity vs the offline best, queues, copies, termination) and results/*-pipe-peers/peers.json
    (OpenMP tasks and a oneTBB flow graph, interleaved). Empty when neither exists."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(md_path)))
    here = os.path.dirname(os.path.abspath(md_path))
    out = []
    bench = sorted(glob.glob(os.path.join(root, "results", "*-pipe", "bench_pipe.json")))
    peers = sorted(glob.glob(os.path.join(root, "results", "*-pipe-peers", "peers.json")))
    if not bench and not peers:
        return out
    out += ["## Stencil pipelines: automatic granularity, queues, peers (GOPipe, HiWayLib; issue 37)", ""]
    # bench_pipe runs its parts separately (--sections): each part from the newest file that has it
    parts = {}
    for path in bench:
        jj = load_json(path, "bench_pipe")
        for k in ("granularity", "queues", "copies", "stress"):
            if get(jj, k):
                parts[k] = (path, jj)
    if bench:
        gpath, j = parts.get("granularity", (bench[-1], load_json(bench[-1], "bench_pipe")))
        prov = get(j, "provenance") or {}
        out += ["Command: `make bench-pipe` ([data](%s)); %s, %s threads, kernels %s, %s. Times are medians of interleaved "
                "rounds; a ratio is the paired median of candidate time / auto's time (> 1: auto faster)." % (
                    os.path.relpath(gpath, here), text(prov, "cpu_model") or "?", fmt(num(prov, "threads"), digits=0),
                    text(prov, "kernels") or "?", text(prov, "date") or "?"), "",
                "| app | size × frames | auto | offline best, this size | offline best, the other size | fine 32×2 | coarse (frame) | auto's tiles over the frames |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for g in get(j, "granularity") or []:
            c = get(g, "candidates") or {}
            def cell(k):
                x = get(c, k) or {}
                t = "%s×%s " % (fmt(num(x, "tile_w"), digits=0), fmt(num(x, "tile_h"), digits=0)) if k.startswith("offline") else ""
                return "%s%.1f ms (%s)" % (t, (num(x, "median_s") or float("nan")) * 1e3, fx(num(x, "over_auto")))
            tr = get(g, "auto_trace") or []
            out.append("| %s | %s×%s × %s | %.1f ms | %s | %s | %s | %s | %s |" % (
                text(g, "app"), fmt(num(g, "width"), digits=0), fmt(num(g, "height"), digits=0), fmt(num(g, "frames"), digits=0),
                (num(c, "auto", "median_s") or float("nan")) * 1e3, cell("offline_same"), cell("offline_other"), cell("fine"),
                cell("coarse"), md_escape(", ".join(tr[:4]) + (" …" if len(tr) > 4 else ""))))
        gs = get(j, "granularity_summary") or {}
        sizes = sorted({(num(g, "width") or 0) * (num(g, "height") or 0) for g in get(j, "granularity") or []})
        def gm(pred, key):
            v = [num(g, "candidates", key, "over_auto") for g in get(j, "granularity") or [] if pred(g)]
            v = [x for x in v if x and x > 0]
            return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")
        big = (lambda g: (num(g, "width") or 0) * (num(g, "height") or 0) == sizes[-1]) if sizes else (lambda g: False)
        out += ["", "Geometric mean over the app-sizes: the other size's offline best takes %s auto's time (target ≥ 1.3×; "
                "%s at the large size with the small size's tile, %s at the small size with the large size's tile, which the "
                "ladder caps at the frame); this size's offline best %s (target: auto within 5%%, i.e. ≥ 0.95×)." % (
                    fx(num(gs, "geomean_offline_other_over_auto")), fx(gm(big, "offline_other")),
                    fx(gm(lambda g: not big(g), "offline_other")), fx(num(gs, "geomean_offline_same_over_auto"))), ""]
        qpath, qj = parts.get("queues", (None, {}))
        q = get(qj, "queues") or {}
        if q:
            out += ["Queues at the finest granularity (%s %s×%s, tile %s×%s, %s frames, 2 threads; [data](%s)):" % (
                text(q, "app"), fmt(num(q, "width"), digits=0), fmt(num(q, "height"), digits=0), fmt(num(q, "tile_w"), digits=0),
                fmt(num(q, "tile_h"), digits=0), fmt(num(q, "frames"), digits=0), os.path.relpath(qpath, here)), "",
                "| queue | time | / sharded's | tasks/s | contended | steals | idle (both workers) |", "| --- | --- | --- | --- | --- | --- | --- |"]
            for name in ("sharded", "locked", "mpmc"):
                x = get(q, name) or {}
                out.append("| %s | %.1f ms | %s [%s, %s] | %s M | %s | %s | %.1f ms |" % (
                    name, (num(x, "median_s") or float("nan")) * 1e3, fx(num(x, "over_sharded")), fmt(num(x, "over_sharded_lo"), digits=3),
                    fmt(num(x, "over_sharded_hi"), digits=3), fmt((num(x, "tasks_per_s") or float("nan")) / 1e6, digits=2),
                    fmt(num(x, "contended"), digits=0), fmt(num(x, "steals"), digits=0), (num(x, "idle_s") or float("nan")) * 1e3))
            out += ["", "Target: sharded ≥ 1.2× over the lock-free ring.", ""]
        cp = get(parts.get("copies", (None, {}))[1], "copies") or []
        if cp:
            out += ["Two device arenas (stages pinned half and half), tile 64×16: lazy copies move only what a consumer on the other "
                    "device reads, eager ones every tile.", "", "| app | one arena | lazy | eager | MB moved lazy / eager |",
                    "| --- | --- | --- | --- | --- |"]
            for x in cp:
                out.append("| %s | %.1f ms | %.1f ms | %.1f ms (%s lazy's) | %s / %s |" % (
                    text(x, "app"), (num(x, "none", "median_s") or float("nan")) * 1e3, (num(x, "lazy", "median_s") or float("nan")) * 1e3,
                    (num(x, "eager", "median_s") or float("nan")) * 1e3, fx(num(x, "eager", "over_lazy")),
                    fmt(num(x, "lazy", "copy_mb"), digits=1), fmt(num(x, "eager", "copy_mb"), digits=1)))
            out.append("")
        st = get(parts.get("stress", (None, {}))[1], "stress") or {}
        if st:
            out += ["Termination: %s randomized runs (delays and worker stalls injected), %s tasks: %s lost, %s duplicated, %s frames "
                    "not delivered once, %s outputs different from a sequential run." % (
                        fmt(num(st, "runs"), digits=0), fmt(num(st, "tasks"), digits=0), fmt(num(st, "lost"), digits=0),
                        fmt(num(st, "duplicated"), digits=0), fmt(num(st, "frames_bad"), digits=0), fmt(num(st, "mismatched"), digits=0)), ""]
    if peers:
        j = load_json(peers[-1], "pipe peers")
        cfg, sm, m = get(j, "config") or {}, get(j, "summary") or {}, get(j, "machine") or {}
        out += ["Peers, interleaved (command: `make peer-pipe`, [data](%s)): the same apps and kernels as OpenMP tasks with `depend` "
                "clauses and as a oneTBB flow graph, each at its own best tile (and OpenMP at its best wait policy and task order), "
                "tessera at `--granularity auto`; %s, %s threads, %s frames." % (
                    os.path.relpath(peers[-1], here), text(cfg, "size") or "?", fmt(num(cfg, "threads"), digits=0),
                    fmt(num(cfg, "frames"), digits=0)), "",
                "| app | tessera auto | tessera offline tile | OpenMP tasks (tile) | auto / OpenMP | TBB flow graph (tile) | auto / TBB | offline / best peer | noisy rounds |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for app, rec in sorted((get(j, "apps") or {}).items(), key=lambda kv: kv[0]):
            med, r, t = get(rec, "median_wall_s") or {}, get(rec, "ratio_tessera_over") or {}, get(rec, "tiles") or {}
            ro = get(rec, "ratio_tessera_offline_over") or {}
            off = num(med, "tessera_offline")
            out.append("| %s | %.1f ms | %s | %.1f ms (%s) | %s | %.1f ms (%s) | %s | %s | %s |" % (
                app, (num(med, "tessera") or float("nan")) * 1e3, "%.1f ms" % (off * 1e3) if off else "—",
                (num(med, "pipe_omp") or float("nan")) * 1e3,
                md_escape(str(get(t, "pipe_omp"))), fmt(num(r, "pipe_omp"), digits=3), (num(med, "pipe_tbb") or float("nan")) * 1e3,
                md_escape(str(get(t, "pipe_tbb"))), fmt(num(r, "pipe_tbb"), digits=3),
                fmt(max([v for v in ro.values() if v] or [float("nan")]), digits=3) if ro else "—",
                fmt(num(rec, "noisy_rounds"), digits=0)))
        if num(sm, "tessera_offline_faster_than_every_peer") is not None:
            out += ["", "With its own offline sweep's tile (`--granularity offline`, as the peers use theirs) tessera is faster than "
                    "both peers on %s of %s apps." % (fmt(num(sm, "tessera_offline_faster_than_every_peer"), digits=0),
                                                      fmt(num(sm, "apps"), digits=0))]
        out += ["", "tessera faster than both peers on %s of %s apps (target: at least four); a ratio below 1 is tessera ahead. "
                "tessera's time includes its online search for the tile within the run; the peers' tiles come from their own "
                "offline sweeps before the rounds. At equal tiles the three schedulers are within a few percent of each other on "
                "two workers: the kernels dominate, and what separates them is the tile and the order of the tasks." % (
            fmt(num(sm, "tessera_faster_than_every_peer"), digits=0), fmt(num(sm, "apps"), digits=0)), ""]
    return out


def relu_pred_section(md_path):
    """The ReLU-model activation predictors (issue 39): the newest results/*-relu-pred/ sweep
    (scripts/relu_pred_sweep.sh). Empty when none."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(md_path)))
    here = os.path.dirname(os.path.abspath(md_path))
    dirs = [d for d in sorted(glob.glob(os.path.join(root, "results", "*-relu-pred"))) if os.path.exists(os.path.join(d, "eval.json"))]
    if not dirs:
        return []
    d = dirs[-1]
    ev = load_json(os.path.join(d, "eval.json"), "relu-pred eval")
    be = load_json(os.path.join(d, "bench.json"), "relu-pred bench") if os.path.exists(os.path.join(d, "bench.json")) else None
    meta = load_json(os.path.join(d, "meta.json"), "relu-pred meta")
    pr = load_json(os.path.join(d, "ppl-relu.json"), "relu ppl")
    ps = load_json(os.path.join(d, "ppl-silu.json"), "silu ppl") if os.path.exists(os.path.join(d, "ppl-silu.json")) else None
    rel = os.path.relpath(os.path.join(d, "relu-pred.md"), here)
    out = ["## ReLU-model activation predictors (sign-bit, Grasp, learned; issue 39)", "",
           "Command: `make bench-relu` ([page](%s)); %s, commit %s, %s. Model `models/relu/shakespeare-relu.gguf` "
           "(trained here, 14.6M parameters, Q8_0): Hamlet perplexity %s%s; %s zeros of relu(gate) on Hamlet." % (
               rel, text(meta, "date"), text(meta, "commit"), text(meta, "machine"), fmt(num(pr, "ppl"), digits=2),
               " (its SiLU twin %s)" % fmt(num(ps, "ppl"), digits=2) if ps else "",
               next(("%.1f%%" % (100 * c["act_sparsity"]) for c in ev["configs"] if c.get("predictor") == "oracle"), "?")), ""]
    bsp = {}
    if be:
        for c in be["configs"]:
            key = (c.get("predictor"), c.get("false_skip_budget"))
            bsp[key] = c
    out += ["| predictor | false-skip budget | measured false-skip | efficiency | ppl vs dense | decode speedup [95% CI] | predictor / dense MLP |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    dp = ev["dense"]["ppl"]
    for c in ev["configs"]:
        k = c.get("predictor")
        b = bsp.get((k, c.get("false_skip_budget")))
        sp = "%.2fx [%.2f, %.2f]" % (b["speedup"], b["speedup_lo"], b["speedup_hi"]) if b else "-"
        cost = "%.0f%%" % (100 * b["pred_of_dense_mlp"]) if b and k != "oracle" else "-"
        if k == "oracle":
            out.append("| oracle | - | 0 | 1 | %+.2f%% | %s | - |" % (100 * (c["ppl"] / dp - 1), sp))
        else:
            out.append("| %s | %.3g | %.4f | %.3f | %+.2f%% | %s | %s |" % (k, c["false_skip_budget"], c.get("false_skip", 0), c.get("efficiency", 0),
                                                                    100 * (c["ppl"] / dp - 1), sp, cost))
    if be:
        out += ["", "Dense decode %s tok/s (%d threads, %d interleaved rounds of %d tokens: the sweep's short rounds, noisy at this "
                "model's ~2,000 tok/s)." % (fmt(num(be, "dense", "decode_tps"), digits=0), be["threads"], be["rounds"], be["gen"])]
    lp = os.path.join(d, "bench-long.json")
    if os.path.exists(lp):
        bl = load_json(lp, "relu-pred long bench")
        mp = os.path.join(d, "bench-long.meta.json")
        bm = load_json(mp, "relu-pred long bench meta") if os.path.exists(mp) else {}
        out += ["", "A longer interleaved run (%s, commit %s; %d rounds of %d tokens, dense %s tok/s): " % (
            text(bm, "date") or "?", text(bm, "commit") or "?", bl["rounds"], bl["gen"], fmt(num(bl, "dense", "decode_tps"), digits=0)) +
                "; ".join("%s%s %.2fx [%.2f, %.2f]%s" % (c["predictor"], "" if c["predictor"] == "oracle" else " @ %.3g" % c["false_skip_budget"],
                                                   c["speedup"], c["speedup_lo"], c["speedup_hi"],
                                                   "" if c["predictor"] == "oracle" else ", predictor %.1f%% of the dense MLP" % (100 * c["pred_of_dense_mlp"]))
                          for c in bl["configs"]) + "."]
    out.append("")
    return out


def hybrid_section(md_path):
    """The CPU-accelerator hybrid MapReduce controller (issue 38): the newest
    results/*-hybrid/hybrid.json (local engine, every mode interleaved) and, when present,
    results/*-hybrid-spark/*.json (the same jobs on Apache Spark). Empty when neither exists."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(md_path)))
    here = os.path.dirname(os.path.abspath(md_path))
    out = []
    bench = sorted(glob.glob(os.path.join(root, "results", "*-hybrid", "hybrid.json")))
    spark = sorted(glob.glob(os.path.join(root, "results", "*-hybrid-spark")))
    if not bench and not spark:
        return out
    out += ["## CPU-accelerator hybrid MapReduce (Hybrid Hadoop; issue 38)", ""]
    if bench:
        j = load_json(bench[-1], "hybrid bench")
        sc = get(j, "scenarios") or []
        prov = get(sc[0], "provenance") if sc else {}
        dev = get(sc[0], "device") if sc else {}
        out += ["Command: `make bench-hybrid` ([data](%s)); local engine, %s containers on %s cores, %s; commit %s, %s. "
                "**Modelled device**: %s (%s). Medians of %s interleaved rounds per mode; the oracle split knows every task's "
                "CPU time and the co-tenant in advance and takes the task times each run measured, so auto ÷ oracle is the "
                "median over the auto runs of each one's makespan over its own oracle (docs/notes/hybrid.md)." % (
                    os.path.relpath(bench[-1], here), fmt(num(j, "slots"), digits=0), fmt(num(j, "cores"), digits=0),
                    text(prov, "cpu_model") or "?", text(j, "commit") or "?", text(j, "date") or "?", text(dev, "name") or "?",
                    "measured curves" if get(dev, "curves_measured") else "datasheet curves, not measured",
                    fmt(num(j, "repeats"), digits=0)), "",
                "| job | auto | oracle split (auto ÷ oracle) | CPU-only | device-only | best static split | the probe's static split | role changes | tail gap |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in sc:
            med = get(r, "median_s") or {}
            auto = num(med, "auto") or float("nan")
            def cell(m):
                v = num(med, m)
                return "%.3f s (%s)" % (v, fx(v / auto)) if v else "?"
            out.append("| %s%s | %.3f s | %.3f s (%s) | %s | %s | %s: %s | %s: %s | %s | %.1f%% |" % (
                text(r, "scenario"), " (co-tenant %s)" % md_escape(text(r, "tenant")) if get(r, "tenant") else "", auto,
                num(r, "oracle_s") or float("nan"), fx(num(r, "auto_over_oracle")), cell("cpu"), cell("gpu"),
                text(r, "best_static"), cell(text(r, "best_static")), text(r, "probe_static"), cell(text(r, "probe_static")),
                fmt(num(r, "reassignments"), digits=0), 100 * (num(r, "tail_gap_frac") or 0)))
        out += ["", "Cells: median makespan (that mode's time ÷ auto's; > 1: auto faster). Every run's output equals the "
                "reference pass: %s." % ("yes" if all(get(r, "output_ok") for r in sc) else "NO"), ""]
        within = [text(r, "scenario") for r in sc if (num(r, "auto_over_oracle") or 9) <= 1.10]
        varying = [r for r in sc if "-" in (text(r, "scenario") or "")]
        both = [r for r in sc if get(r, "tail_both_classes")]
        out += ["Targets: auto within 10%% of the oracle split on %d of %d jobs (%s); on the jobs whose task costs change "
                "over time, auto over the best static split %s (target ≥ 1.3×); tail gap where both classes ran %s "
                "(target ≤ 5%%). CPU-only takes %s auto's time: where the modelled device is that far ahead the best "
                "split is nearly all-device and a hybrid gains little over it; kmeans is bound by its host feed "
                "(generating the points) on either side. The ≥ 3× on a real GPU is not measured here (no GPU)." % (
                    len(within), len(sc), ", ".join(within),
                    ", ".join("%s %s" % (text(r, "scenario"), fx(num(r, "best_static_over_auto"))) for r in varying) or "—",
                    ", ".join("%s %.1f%%" % (text(r, "scenario"), 100 * (num(r, "tail_gap_frac") or 0)) for r in both) or "—",
                    ", ".join("%s %s" % (text(r, "scenario"), fx(num(r, "cpu_over_auto"))) for r in sc if r not in varying)), ""]
    if spark:
        rows = []
        for path in sorted(glob.glob(os.path.join(spark[-1], "*.json"))):
            if os.path.basename(path) == "meta.json":
                continue
            r = load_json(path, "hybrid spark run")
            rows.append((os.path.basename(path)[:-5], r))
        if rows:
            out += ["On Apache Spark (`make integration`, [data](%s)): standalone master and two one-core workers on this machine, "
                    "one task per block through `tessera hybrid task`; the makespan is the driver's wall time per round (Spark's "
                    "per-task overhead included); the oracle split uses the run's measured task times (each task a fresh process) and "
                    "leaves Spark's per-task cost out." % os.path.relpath(spark[-1], here), "",
                    "| run | makespan | oracle split | tasks cpu / device / split | role changes | output |", "| --- | --- | --- | --- | --- | --- |"]
            for name, r in rows:
                t = get(r, "tasks") or {}
                out.append("| %s | %.2f s | %.2f s | %s / %s / %s | %s | %s |" % (
                    name, num(r, "makespan_s") or float("nan"), num(r, "oracle", "makespan_s") or float("nan"),
                    fmt(num(t, "cpu"), digits=0), fmt(num(t, "dev"), digits=0), fmt(num(t, "split"), digits=0),
                    len(get(r, "reassignments") or []), "ok" if get(r, "output_ok") else "WRONG: " + md_escape(text(r, "output_note"))))
            dyn = [(n, r) for n, r in rows if n.endswith("-cpu-dyn")]
            fixed = dict(rows)
            ratios = ["%s %s" % (n[:-8], fx((num(r, "makespan_s") or 0) / (num(fixed.get(n[:-8] + "-cpu"), "makespan_s") or 1)))
                      for n, r in dyn if fixed.get(n[:-8] + "-cpu")]
            out += ["", "On Spark the engine's own cost dominates at these sizes: about 0.1 s per task (a Python worker and "
                    "one `tessera hybrid task` process per block) against device work of milliseconds, so every device "
                    "mode lands near the same floor. Spark's dynamic allocation (CPU work, executors added on backlog) takes "
                    "the fixed pool's time: %s. A worker killed mid-job (tests/hybrid_spark_fault.sh, part of `make "
                    "integration`): Spark re-ran the lost attempts, the output was identical to the reference pass." % (
                        ", ".join(ratios) or "—"), ""]
    return out


def plan3d_section(md_path):
    """The 3D-parallel planner (issue 36): the newest results/*-plan3d/bench_plan3d.json (simulated
    paper-scale figures) and results/*-plan3d-gloo/gloo.json (estimates against real gloo runs).
    Empty when neither exists."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(md_path)))
    here = os.path.dirname(os.path.abspath(md_path))
    out = []
    sim = sorted(glob.glob(os.path.join(root, "results", "*-plan3d", "bench_plan3d.json")))
    real = sorted(glob.glob(os.path.join(root, "results", "*-plan3d-gloo", "gloo.json")))
    if not sim and not real:
        return out
    out += ["## 3D-parallel training plans on mixed GPU clusters (FASOP; issue 36)", ""]
    if sim:
        j = load_json(sim[-1], "bench_plan3d")
        d = os.path.dirname(sim[-1])
        a, q, sr = get(j, "partitioner_32x48") or {}, get(j, "greedy_quality") or {}, get(j, "search") or {}
        out += ["Simulated (GPT-2 1.5B on 1 p4d.24xlarge + 6 g5.12xlarge = 8 A100 + 24 A10G; per-layer times derived "
                "from datasheets, `bench/plan3d/make_inputs.py`). Command: `make bench-plan3d` ([data](%s), "
                "[best plan](%s), [Megatron default](%s), [Pareto front](%s))." % (
                    os.path.relpath(sim[-1], here), os.path.relpath(os.path.join(d, "best-plan-gantt.svg"), here),
                    os.path.relpath(os.path.join(d, "megatron-default-gantt.svg"), here),
                    os.path.relpath(os.path.join(d, "pareto.svg"), here)), "",
                "| figure | tessera | reference | ratio | target |", "| --- | --- | --- | --- | --- |",
                "| step time, best plan vs Megatron-LM's default (even split, one TP degree) | %.1f ms | %.1f ms | %s | beat it (FASOP: up to 1.37×) |" % (
                    num(sr, "best_step_ms") or float("nan"), num(sr, "megatron_step_ms") or float("nan"),
                    fx(num(sr, "speedup_vs_megatron"))),
                "| partitioner, %s stages × %s layers: greedy vs exact DP (interleaved) | %.3f ms | %.3f ms (%.1f ms without its bound) | %s [%.0f, %.0f] (%s) | ≥ 1000× |" % (
                    fmt(num(a, "stages"), digits=0), fmt(num(a, "layers"), digits=0), num(a, "greedy_ms") or float("nan"),
                    num(a, "dp_ms") or float("nan"), num(a, "dp_unpruned_ms") or float("nan"), fx(num(a, "speedup")),
                    num(a, "speedup_ci_lo") or float("nan"), num(a, "speedup_ci_hi") or float("nan"),
                    fx(num(a, "speedup_vs_unpruned"))),
                "| greedy's objective within 2%% of the DP optimum | %s/%s search instances, %s/%s random | worst %.2f%% | | every instance |" % (
                    fmt(num(q, "search_within_2pct"), digits=0), fmt(num(q, "search_instances"), digits=0),
                    fmt(num(q, "random_within_2pct"), digits=0), fmt(num(q, "random_instances"), digits=0),
                    max(num(q, "search_worst_pct") or 0, num(q, "random_worst_pct") or 0)),
                "| whole search, %s configurations | %.3f s (greedy) | %.3f s (DP) | %s | |" % (
                    fmt(num(sr, "configurations"), digits=0), num(sr, "greedy_s") or float("nan"),
                    num(sr, "dp_s") or float("nan"),
                    fx((num(sr, "dp_s") or float("nan")) / (num(sr, "greedy_s") or float("nan")))), ""]
        pa = get(j, "pareto") or []
        if pa:
            out.append("Pareto front (step time vs $ per step) over sub-clusters of a pool of 2 p4d + 8 g5.12xlarge: " + "; ".join(
                "%d p4d + %d g5: %.0f ms, $%.4f/step" % (e["p4d"], e["g5"], e["step_ms"], e["usd_per_step"]) for e in pa) + ".")
            out.append("")
    if real:
        j = load_json(real[-1], "plan3d gloo")
        sm, meta = get(j, "summary") or {}, get(j, "meta") or {}
        out += ["Real: the planner's estimates against multi-process training steps over torch.distributed (gloo, 2 processes, "
                "one thread each; device types fp32 and the same model on SSE4.1 code paths), torch %s, %s. Command: "
                "`make peer-plan3d` ([data](%s), [scatter](%s))." % (
                    text(meta, "torch") or "?", text(meta, "date") or "?", os.path.relpath(real[-1], here),
                    os.path.relpath(os.path.join(os.path.dirname(real[-1]), "estimate_vs_measured.svg"), here)), "",
                "| plans | mean \\|error\\| | median | worst | error with measured compute (model structure alone) | top-1 fastest or within 5% |",
                "| --- | --- | --- | --- | --- | --- |"]
        pc = get(sm, "per_cluster") or {}
        ok = sum(1 for v in pc.values() if v.get("top1_within_5pct"))
        w = get(sm, "worst") or {}
        out.append("| %s | %.1f%% (target ≤ 8.7%%) | %.1f%% | %.1f%% (%s) | %.1f%% | %d of %d clusters |" % (
            fmt(num(sm, "plans_run"), digits=0), num(sm, "mean_abs_error_pct") or float("nan"),
            num(sm, "median_abs_error_pct") or float("nan"), num(w, "error_pct") or float("nan"),
            md_escape(text(w, "plan") or "?"), num(sm, "mean_abs_replay_error_pct") or float("nan"), ok, len(pc)))
        out += ["", "On this VM the compute speed drifts between profiling and running (the same plan by 21-31% within one run); "
                "with each run's measured compute put back into the same cost model the error is the fifth column "
                "(docs/notes/plan3d.md, which also gives the earlier run of the same day).", ""]
    return out


def render(rdir, md_path, svg_dir):
    meta = load_json(os.path.join(rdir, "meta.json"), "results folder %s" % rdir)
    if get(meta, "format") != "tessera results":
        raise BadInput("%s/meta.json is not a tessera results file (its 'format' is %r; scripts/results.sh writes it)" % (rdir, get(meta, "format")))
    runs = get(meta, "runs")
    if not isinstance(runs, list):
        raise BadInput("%s/meta.json has no 'runs' list" % rdir)
    native_class = text(meta, "machine", "kernels") or "?"
    classes = get(meta, "isa_classes") or ["native"]

    by_sub = {k: [] for k, _, _ in SUBSYSTEMS}
    runs_by_sub = {k: [] for k, _, _ in SUBSYSTEMS}
    native_rows = {}
    warnings = []
    for run in runs:
        if not isinstance(run, dict) or not isinstance(run.get("name"), str):
            warnings.append("a run record without a name was skipped")
            continue
        sub = run.get("subsystem")
        if sub not in by_sub:
            warnings.append("run %s: unknown subsystem %r, skipped" % (run["name"], sub))
            continue
        runs_by_sub[sub].append(run)
        cls = run.get("isa_class", "native")
        reader = reader_for(run)
        path = os.path.join(rdir, run.get("file") or "")
        rc = run.get("rc")
        if rc != 0:
            tail = run.get("stderr_tail") or []
            why = "%s%s" % (run.get("error") or "exit status %s" % rc, ": " + tail[-1] if tail else "")
            rows = [failed_row(run["name"], run["name"], why)]
        else:
            try:
                d = load_json(path, "run %s" % run["name"])
                rows = reader(d, meta, run)
            except BadInput as e:
                rows = [failed_row(run["name"], run["name"], str(e))]
            except Exception as e:  # a JSON whose fields have unexpected types: say so in the row
                rows = [failed_row(run["name"], run["name"], "could not read %s: %s: %s" % (os.path.basename(path), type(e).__name__, e))]
        for r in rows:
            r.run = run
        if cls == "native":
            by_sub[sub].extend(rows)
            for r in rows:
                native_rows[r.key] = r
        else:
            for r in rows:
                if r.key in native_rows:
                    native_rows[r.key].other[cls] = (r.ratio, r.lo, r.hi, r.kind, r.failed)
                else:   # the native run failed differently: keep the row visible
                    r.workload += " (%s class only)" % cls.upper()
                    r.short += " (%s)" % cls
                    by_sub[sub].append(r)

    # GPU rows: JSON files in the folder that carry a device and are not a CPU run's output
    own = {run.get("file") for run in runs if isinstance(run, dict)}
    gpu_rows = []
    for p in sorted(glob.glob(os.path.join(rdir, "*.json"))):
        b = os.path.basename(p)
        if b in own or b in ("meta.json", "hwinfo.json"):
            continue
        try:
            d = load_json(p, "GPU results")
        except BadInput as e:
            warnings.append(str(e))
            continue
        if text(d, "device") and text(d, "device") != "cpu":
            gpu_rows.extend(gpu_rows_from_json(p, d))

    os.makedirs(svg_dir, exist_ok=True)
    md_dir = os.path.dirname(os.path.abspath(md_path))
    has_avx2 = "avx2" in classes
    nb = NOTEBOOK_ALT if os.path.exists(os.path.join(md_dir, NOTEBOOK_ALT)) else NOTEBOOK
    out = []
    date = text(meta, "date_utc") or "?"
    day = date[:10]
    host = text(meta, "host") or "?"
    commit = commit_str(meta)
    out.append("<!-- generated by scripts/render_results.py from %s: edit the scripts, not this page -->" % rel_to_root(rdir))
    out.append("# Results")
    out.append("")
    out.append("Generated by `make results` (`%s`) from `%s`: measured %s on `%s` (%s), commit %s. "
               "Method details, history and every earlier figure: [the lab notebook](%s)." % (
                   text(meta, "command") or "scripts/results.sh", rel_to_root(rdir),
                   date, host, get(meta, "cpu_model_name") or "?", commit, nb))
    out.append("")

    # -- summary
    cpu_rows = [r for k, _, _ in SUBSYSTEMS for r in by_sub[k]]
    wins, losses, ties, failed = [], [], [], []
    for r in cpu_rows:
        if r.failed:
            failed.append(r)
        elif r.ratio is not None:
            v = verdict(r.ratio, r.lo, r.hi)
            if r.headline or v == "loss":   # every loss is listed, the wins and ties of the headline comparisons
                {"win": wins, "loss": losses, "tie": ties}[v].append(r)
    wins.sort(key=lambda r: -r.ratio)
    losses.sort(key=lambda r: r.ratio)

    def lst(rs, inv=False):
        return "; ".join("%s %s" % (r.short, ("%.2f× (peer %.2f× faster)" % (r.ratio, 1 / r.ratio)) if inv else fx(r.ratio)) for r in rs)
    la0, la1 = load_str(get(meta, "load_avg_before")), load_str(get(meta, "load_avg_after"))
    summ = []
    summ.append("- **Where tessera wins** (CPU, %s, %s class): %s." % (day, native_class.upper(), lst(wins) if wins else "no headline comparison came out ahead in this run"))
    summ.append("- **Where it loses** (CPU): %s." % (lst(losses, True) if losses else "no comparison came out behind in this run"))
    gs = [r for r in gpu_static_rows() if r.headline]
    gl = [r for r in gs if r.ratio < 1]
    gw = [r for r in gs if r.ratio >= 1]
    summ.append("- **GPU** (%s, %s, commit %s, not rerun): FlexAttention in bf16 (tensor cores) is %.1f–%.1f× faster than tessera's CUDA kernels; "
                "in fp32 tessera is %.1f–%.1f× faster than FlexAttention." % (
                    GPU_STATIC["device"], GPU_STATIC["date"], GPU_STATIC["commit"], min(1 / r.ratio for r in gl), max(1 / r.ratio for r in gl),
                    min(r.ratio for r in gw), max(r.ratio for r in gw)))
    summ.append("- **No difference** (interval contains 1.0): %s.%s" % (
        "; ".join("%s %s [%.2f, %.2f]" % (r.short, fx(r.ratio), r.lo, r.hi) for r in ties) if ties else "none",
        (" **Failed or not run:** %s." % "; ".join(r.workload for r in failed)) if failed else ""))
    summ.append("- **Conditions**: 2-thread runs on a machine %s; load average %s before, %s after (1/5/15 min); %s. "
                "Ratios are tessera's speed over the peer's; those with [quartiles] in the tables come from alternating paired rounds, "
                "the others compare medians of runs taken one after the other." % (
                    "shared with other jobs" if (get(meta, "load_avg_before") or [0])[0] > 0.5 else "otherwise quiet", la0, la1,
                    "ISA class unknown (`tessera hwinfo` gave no machine profile)" if not get(meta, "machine") else
                    "one ISA class (no AVX-512 here: the native run is the AVX2 class)" if not has_avx2 else
                    "native (%s) and AVX2 class columns" % native_class.upper()))
    out += ["## Summary", ""] + summ + [""]
    if not has_avx2 and get(meta, "machine"):
        out.append("ISA classes: this machine has no AVX-512 (`tessera hwinfo`: %s), so its native run is the AVX2 class and each table has one "
                   "ratio column. On an AVX-512 machine `scripts/results.sh` runs everything a second time capped at AVX2 "
                   "(`TESSERA_ISA=avx2`; llama.cpp built AVX2-only) and the tables gain an AVX2-class column." % (
                       " ".join(get(meta, "machine", "isa") or []) or "?"))
        out.append("")

    # -- one table per subsystem
    for key, title, what in SUBSYSTEMS:
        rows = by_sub[key]
        out.append("## %s" % title)
        out.append("")
        if not rows:
            out.append("Not run in this results set (`scripts/results.sh --only` left it out).")
            out.append("")
            continue
        svg = os.path.join(svg_dir, "results-%s.svg" % key)
        if chart(title, rows, svg):
            out.append("![%s](%s)" % (title, os.path.relpath(svg, md_dir)))
            out.append("")
        out.append("Ratio: %s; > 1 means tessera is faster. [a, b]: quartiles of per-round paired ratios where the benchmark "
                   "alternates the two sides; a ratio without brackets compares two medians." % what)
        out.append("")
        hdr = ["workload", "tessera", "best peer", "peer configuration", "ratio%s" % (" (%s, native)" % native_class.upper() if has_avx2 else "")]
        if has_avx2:
            hdr.append("ratio (AVX2 class)")
        hdr += ["% of measured peak", "notes"]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + " --- |" * len(hdr))
        for r in rows:
            if r.failed:
                cells = [r.workload, "**failed / not run**", "—", "—", "—"] + (["—"] if has_avx2 else []) + ["—", r.failed]
            else:
                cells = [r.workload, r.tessera, r.peer, r.config, ratio_cell(r.ratio, r.lo, r.hi, r.kind) if r.ratio is not None else "—"]
                if has_avx2:
                    o = r.other.get("avx2")
                    cells.append("—" if not o else ("failed: " + o[4]) if o[4] else ratio_cell(o[0], o[1], o[2], o[3]))
                cells += [r.pct, r.note]
            out.append("| " + " | ".join(md_escape(c) for c in cells) + " |")
        out.append("")
        for run in runs_by_sub[key]:
            out.append("- `%s` (%s class): %s, %s s, load average %s → %s. Command: `%s`" % (
                run.get("name"), run.get("isa_class", "native"), run.get("start_utc", "?"), fmt(run.get("elapsed_s") if isinstance(run.get("elapsed_s"), (int, float)) else None, digits=0),
                load_str(run.get("load_avg_before")), load_str(run.get("load_avg_after")), short_paths(run.get("command", "?"))))
        out.append("")
        out.append("Machine: %s (%s kernels), %s CPUs; commit %s; %s. Details under [This results set](#this-results-set)." % (
            get(meta, "cpu_model_name") or text(meta, "machine", "cpu_model") or "?", native_class.upper(),
            fmt(num(meta, "cpus_online"), digits=0), commit, day))
        out.append("")

    # -- GPU
    out.append("## GPU")
    out.append("")
    if gpu_rows:
        svg = os.path.join(svg_dir, "results-gpu.svg")
        chart("GPU (this results set)", gpu_rows, svg)
        out.append("![GPU](%s)" % os.path.relpath(svg, md_dir))
        out.append("")
        out.append("| workload | tessera | best peer | peer configuration | ratio | notes |")
        out.append("| --- | --- | --- | --- | --- | --- |")
        for r in gpu_rows:
            out.append("| " + " | ".join(md_escape(c) for c in (
                [r.workload, "**failed**", "—", "—", "—", r.failed] if r.failed else
                [r.workload, r.tessera, r.peer, r.config, ratio_cell(r.ratio, r.lo, r.hi, r.kind), r.note])) + " |")
        out.append("")
    else:
        out.append("No GPU results in this results set (the machine that ran it has no GPU). The table below is not rerun: it is "
                   "the %s figures of the lab notebook (%s, commit %s; batch 4 × 12 heads, d = 64; CUDA events, mean of 20 launches "
                   "after 3 warm-ups; tessera's gather kernels on the CPU scheduler's reordering)." % (
                       GPU_STATIC["device"], GPU_STATIC["date"], GPU_STATIC["commit"]))
        out.append("")
    srows = gpu_static_rows()
    svg = os.path.join(svg_dir, "results-gpu-%s.svg" % GPU_STATIC["date"])
    chart("GPU, %s, %s (not rerun)" % (GPU_STATIC["device"], GPU_STATIC["date"]), srows, svg)
    out.append("### GPU (not rerun): %s, %s, commit %s" % (GPU_STATIC["device"], GPU_STATIC["date"], GPU_STATIC["commit"]))
    out.append("")
    out.append("![GPU %s](%s)" % (GPU_STATIC["date"], os.path.relpath(svg, md_dir)))
    out.append("")
    out.append("| workload | tessera | best peer | peer configuration | ratio | notes |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for r in srows:
        out.append("| " + " | ".join(md_escape(c) for c in [r.workload, r.tessera, r.peer, r.config, ratio_cell(r.ratio, None, None, None), r.note]) + " |")
    out.append("")
    out.append("In bf16, PyTorch's FlexAttention runs on tensor cores and is 2–6× faster than tessera's CUDA-core kernels, which widen "
               "bf16 to fp32; in fp32 FlexAttention skips only whole 128 × 128 blocks and tessera's gather plans are ahead. "
               "Against its own best fixed tile on the reordered mask tessera is ahead on window2d and vitdet and slightly behind on swin.")
    out.append("")

    try:
        out.extend(sparsity_section(md_path))
    except BadInput as e:
        out.extend(["## LLM activation sparsity (decode; issue 33)", "", "Not rendered: %s." % e, ""])
    try:
        out.extend(training_section(md_path))
    except BadInput as e:
        out.extend(["## Sparse attention training (issue 34)", "", "Not rendered: %s." % e, ""])
    try:
        out.extend(plan3d_section(md_path))
    except BadInput as e:
        out.extend(["## 3D-parallel training plans (issue 36)", "", "Not rendered: %s." % e, ""])
    try:
        out.extend(pipe_section(md_path))
    except BadInput as e:
        out.extend(["## Stencil pipelines (issue 37)", "", "Not rendered: %s." % e, ""])
    try:
        out.extend(hybrid_section(md_path))
    except BadInput as e:
        out.extend(["## CPU-accelerator hybrid MapReduce (issue 38)", "", "Not rendered: %s." % e, ""])
    try:
        out.extend(relu_pred_section(md_path))
    except BadInput as e:
        out.extend(["## ReLU-model activation predictors (issue 39)", "", "Not rendered: %s." % e, ""])

    # -- footer
    out.append("## This results set")
    out.append("")
    out.append("- Date: %s to %s (UTC); mode `%s`; %s s of benchmarks." % (
        date, text(meta, "end_utc") or "(incomplete run)", text(meta, "mode") or "?", fmt(num(meta, "duration_s"), digits=0)))
    out.append("- Machine: %s; host `%s`; kernel %s." % (machine_line(meta), host, text(meta, "kernel") or "?"))
    out.append("- Load average (1/5/15 min) %s before, %s after. The machine is a 2-vCPU VM that other jobs share: figures taken beside "
               "busy neighbours read low on both sides, and a paired ratio is the steadier reading." % (la0, la1))
    out.append("- Commit %s%s; `%s`." % (commit, " (the working tree had uncommitted changes)" if get(meta, "git", "dirty") else "",
                                         (text(meta, "tessera", "version") or "tessera version: ?").replace("\n", "; ")))
    env = get(meta, "env") or {}
    out.append("- Environment: %s." % ", ".join("%s=%s" % (k, v) for k, v in sorted(env.items()) if v) if isinstance(env, dict) and any(env.values()) else "- Environment: defaults.")
    peers = get(meta, "peers") or {}
    if isinstance(peers, dict) and peers:
        out.append("- Peers installed: %s." % "; ".join("%s %s" % (k, str(v).replace("\n", ", ")) for k, v in sorted(peers.items())))
    out.append("- Command: `%s` (the exact command of each benchmark is listed under its table)." % (text(meta, "command") or "scripts/results.sh"))
    if not get(meta, "complete"):
        out.append("- **This results set is incomplete**: `scripts/results.sh` did not finish.")
    for w in warnings:
        out.append("- Note: %s" % w)
    out.append("")
    out.append("Regenerate with `make results` (5-15 minutes on 2 cores; `scripts/results.sh --full` for every workload at full "
               "repeats) or re-render a folder with `python3 scripts/render_results.py results/<date>-<host>`.")
    out.append("")
    with open(md_path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    os.replace(md_path + ".tmp", md_path)
    return summ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir")
    ap.add_argument("--md", default=None, help="page to write (default docs/RESULTS.md of the repository)")
    ap.add_argument("--svg-dir", default=None, help="folder of the charts (default docs/img)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    md = a.md or os.path.join(root, "docs", "RESULTS.md")
    svg = a.svg_dir or os.path.join(root, "docs", "img")
    if not os.path.isdir(a.results_dir):
        print("render_results: %s is not a folder (scripts/results.sh writes one under results/)" % a.results_dir, file=sys.stderr)
        return 2
    try:
        summ = render(a.results_dir, md, svg)
    except BadInput as e:
        print("render_results: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("render_results: cannot write the page or its charts: %s" % e, file=sys.stderr)
        return 2
    print("render_results: wrote %s and charts in %s" % (md, svg))
    for s in summ:
        print(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
