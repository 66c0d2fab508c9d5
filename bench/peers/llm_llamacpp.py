#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) side by side with `tessera llm` on the same GGUF file:
correctness (tokenizer ids, logits, greedy generation, perplexity) and speed (prefill and
decode tok/s with the same thread count and prompt lengths).

Usage:
  llm_llamacpp.py [TESSERA_BIN] --model FILE [--threads 2] [--json] [--json-out FILE]
                  [--check] [--ppl TEXT [--ctx 512] [--chunks N]] [--bench [--prompt-lens 16,128,512]
                  [--gen 128] [--repeats 5]] [--llama-omp-wait default|passive|active]
  With none of --check/--ppl/--bench, --check and --bench run.

--check
  tokenizer: every string of TOKENIZER_CASES through `tessera llm tokenize --file F --json` and
    Llama.tokenize(text, add_bos=True, special=False) (and special=True for the chat cases):
    the id lists must be equal.
  logits: every prompt of LOGIT_PROMPTS through `tessera llm logits` (all positions) and
    Llama(logits_all=True).eval: per position max |dz|, the RMS of dz over the RMS of the
    centred llama.cpp logits (relative RMS), KL(p_llama || p_tessera), top-1 agreement, and the
    number of positions whose logits are bitwise equal. Tolerance: relative RMS <= 0.05, mean KL
    <= 0.01 nats and top-1 agreement >= 90% per prompt - what two int8-activation engines that
    accumulate in different orders reach (an order difference flips an activation rounding now
    and then). tessera follows llama.cpp's CPU orders (src/llm/cpu_order.h): its AVX-512 build's
    at tessera's AVX-512 and scalar levels, its AVX2 build's at the AVX2 level, so against
    llama-cpp-python 0.3.36 built for the same class its logits are expected to be bitwise equal
    (max |dz| 0); the tolerance stays the pass criterion for other llama.cpp builds and versions.
--isa avx2
  Both engines at the AVX2 class on any x86 machine: tessera with TESSERA_ISA=avx2, llama.cpp
  built without AVX-512 (GGML_NATIVE=OFF, AVX2/FMA/F16C on) into bench/peers/.venv-llama-avx2.
  On a machine without AVX-512 the default (native) build already is that class.
  greedy: every prompt of GREEDY_PROMPTS, 64 tokens at temperature 0 from both: the token lists
    must be equal (tessera stops early at a control token such as <|im_end|>: the prefix it
    produced, stop token included, must equal llama.cpp's).
--ppl TEXT
  `tessera llm perplexity --model FILE --text TEXT --ctx C [--chunks N] --json` and the same
  protocol on llama.cpp (llama.cpp's `perplexity` program: the whole text tokenized once with
  add_bos as the model says, cut into windows of C tokens, each evaluated from an empty cache
  with its first token replaced by BOS when the vocabulary adds one, scoring token j+1 from the
  logits at j for j = C/2 .. C-2; NLL in float64 here). Target: within 0.5%.
--bench
  For each prompt length P, R pairs alternated (the order flips every pair): `tessera llm bench
  --prompt-len P --gen G --repeats 1 --threads T --json`, and on llama.cpp (n_threads =
  n_threads_batch = T, one model object, a short untimed eval before each run) a P-token prefill of random ids in one
  eval and G single-token decode steps fed the argmax, timed by llama.cpp's own counters
  (llama_perf_context: t_p_eval_ms, t_eval_ms, which leave out Python) and by the wall clock
  around the calls. Figures are medians over the pairs with quartiles; ratio = tessera /
  llama.cpp, the median of the per-pair ratios [quartiles].

Exit status 0 when every check passes, 1 when one fails or tessera fails, 2 on bad usage.
llama-cpp-python compiles llama.cpp from source on first use (several minutes on 2 cores): it is
imported from the running interpreter when present, else installed into bench/peers/.venv-llama
from requirements-llama.txt (see peerenv.py)."""
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
VENV = os.path.join(HERE, ".venv-llama")
# llama.cpp is built for the machine (-march=native) but without its AMX matmul: on a Xeon with AMX
# (this project's machine on 2026-12-05) llama-cpp-python 0.3.36's ggml_backend_amx_mul_mat
# segfaults on every multi-token batch (ggml-org/llama.cpp#20824 reports the same crash, open), and
# its AMX Q4_0/Q4_1 path was reported to give wrong results (ggml-org/llama.cpp#16315). The peer is
# then llama.cpp's AVX-512 VNNI CPU path, the one it runs on every other x86 machine with AVX-512.
# gcc honours explicit -mno-* flags before -march=native. --no-cache-dir: pip's wheel cache would
# otherwise hand back a wheel built with other flags.
LLAMA_BUILD_ENV = {"CFLAGS": "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
                   "CXXFLAGS": "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"}
REQS = os.path.join(HERE, "requirements-llama.txt")
# --isa avx2: llama.cpp as its AVX2 build (ggml's CMake options; the x86 variants other than these
# off), so that a machine with AVX-512 measures the AVX2 class against tessera capped the same way.
LLAMA_AVX2_CMAKE = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
                    "-DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX512_VBMI=OFF "
                    "-DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF")

TOKENIZER_CASES = [
    "Hello world",
    "The capital of France is Paris.",
    "  leading and  double   spaces\tand\ttabs\n\nnew lines\r\n",
    "I'm sure you'll see they've gone, haven't they? 'Quoted' words. DON'T SHOUT",
    "Numbers: 3.14159, 2024-05-17, 1,000,000 and 42nd street; x^2 + y^2 = z^2",
    "Unicode: caf\u00e9 na\u00efve \u00fcber \u0444\u0438\u0437\u0438\u043a\u0430 \u03b1\u03b2\u03b3 \u4e2d\u6587\u5b57 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",
    "Emoji \U0001F600\U0001F680 and symbols \u2192 \u2264 \u00a9 \u20ac \u2122 \u00bd \u2460 \u0663\u0664",
    "Code: def f(x):\n    return x**2  # square\nprint(f(3))\n",
    "URLs https://example.com/a?b=c&d=e and emails someone@example.org",
    "Mixed\u00a0no-break\u2003em-space\u3000ideographic space",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "a" * 300,
    "\n\n\n   \n",
    "ends with spaces   ",
]
CHAT_CASES = [10]  # indices of TOKENIZER_CASES also checked with special=True

LOGIT_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
]

CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
          "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n")
GREEDY_PROMPTS = [
    ("The capital of France is", False),
    ("Once upon a time, there was a little robot named", False),
    ("def quicksort(arr):\n", False),
    (CHATML % "What is the capital of France?", True),
    (CHATML % "Write a short poem about the sea.", True),
]

TOL_REL_RMS, TOL_KL, TOL_TOP1 = 0.05, 0.01, 0.90


def die(msg, code=2):
    print("llm_llamacpp: " + msg, file=sys.stderr)
    sys.exit(code)


def tessera(bin_, args, json_out=True):
    cmd = [bin_, "llm"] + args + (["--json"] if json_out else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_WAIT_POLICY="passive"))
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        die("tessera failed: " + " ".join(cmd), 1)
    return json.loads(r.stdout) if json_out else r.stdout


def load_llama(model, threads, ctx, logits_all):
    from llama_cpp import Llama
    return Llama(model_path=model, n_ctx=ctx, n_batch=512, n_ubatch=512, n_threads=threads,
                 n_threads_batch=threads, logits_all=logits_all, verbose=False)


# ---- check ---------------------------------------------------------------------------------

def check_tokenizer(a, llm, tmp):
    rows, ok = [], True
    cases = [(i, s, False) for i, s in enumerate(TOKENIZER_CASES)] + [(i, TOKENIZER_CASES[i], True) for i in CHAT_CASES]
    for i, s, special in cases:
        f = os.path.join(tmp, "tok%d.txt" % i)
        with open(f, "wb") as fh:
            fh.write(s.encode("utf-8"))
        ts = tessera(a.tessera, ["tokenize", "--model", a.model, "--file", f, "--threads", "1"] + (["--special"] if special else []))["ids"]
        ll = llm.tokenize(s.encode("utf-8"), add_bos=True, special=special)
        same = ts == ll
        ok &= same
        rows.append({"case": i, "special": special, "n": len(ll), "equal": same,
                     "tessera": None if same else ts, "llama": None if same else ll})
    return ok, rows


def softmax64(z):
    import numpy as np
    z = z.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def check_logits(a, llm, tmp):
    import numpy as np
    rows, ok = [], True
    for i, p in enumerate(LOGIT_PROMPTS):
        out = os.path.join(tmp, "logits%d.npy" % i)
        ids = tessera(a.tessera, ["logits", "--model", a.model, "--prompt", p, "--out", out, "--threads", str(a.threads)])["ids"]
        zt = np.load(out).astype(np.float64)
        toks = llm.tokenize(p.encode("utf-8"), add_bos=True)
        if toks != ids:
            ok = False
            rows.append({"prompt": i, "error": "token ids differ", "tessera": ids, "llama": toks})
            continue
        llm.reset()
        llm.eval(toks)
        zl = np.array(llm.scores[:len(toks)], dtype=np.float64)
        d = zt - zl
        cen = zl - zl.mean(axis=1, keepdims=True)
        rel = float(np.sqrt((d * d).mean() / (cen * cen).mean()))
        pl, pt = softmax64(zl), softmax64(zt)
        kl = (pl * (np.log(pl + 1e-300) - np.log(pt + 1e-300))).sum(axis=1)
        top1 = float((zl.argmax(1) == zt.argmax(1)).mean())
        # positions whose whole logit row is bitwise equal (fp32 values compared as stored)
        zt32, zl32 = np.load(out), np.array(llm.scores[:len(toks)], dtype=np.float32)
        exact = int((zt32.view(np.uint32) == zl32.view(np.uint32)).all(axis=1).sum())
        good = rel <= TOL_REL_RMS and float(kl.mean()) <= TOL_KL and top1 >= TOL_TOP1
        ok &= good
        rows.append({"prompt": i, "tokens": len(toks), "max_abs": float(np.abs(d).max()), "rel_rms": rel,
                     "kl_mean": float(kl.mean()), "kl_max": float(kl.max()), "top1": top1, "exact_rows": exact, "pass": good})
    return ok, rows


def last_logits(llm):
    """The logits of the last evaluated token (Llama.scores holds only logits_all rows)."""
    import llama_cpp
    import numpy as np
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))


def llama_greedy(llm, toks, n):
    import numpy as np
    llm.reset()
    llm.eval(toks)
    out = []
    for _ in range(n):
        t = int(np.argmax(last_logits(llm)))
        out.append(t)
        if len(out) < n:
            llm.eval([t])
    return out


def check_greedy(a, llm, n=64):
    rows, ok = [], True
    for i, (p, special) in enumerate(GREEDY_PROMPTS):
        r = tessera(a.tessera, ["generate", "--model", a.model, "--prompt", p, "-n", str(n), "--temp", "0",
                                "--threads", str(a.threads)] + (["--special"] if special else []))
        toks = llm.tokenize(p.encode("utf-8"), add_bos=True, special=special)
        if toks != r["prompt_tokens"]:
            ok = False
            rows.append({"prompt": i, "error": "prompt ids differ"})
            continue
        ll = llama_greedy(llm, toks, n)
        ts = r["tokens"]
        same = ts == ll[:len(ts)] and (len(ts) == n or r.get("stopped", False))
        first = next((k for k in range(min(len(ts), len(ll))) if ts[k] != ll[k]), None)
        ok &= same
        rows.append({"prompt": i, "tessera_tokens": len(ts), "equal": same, "first_difference": first,
                     "text": r["text"][:80]})
    return ok, rows


# ---- perplexity ----------------------------------------------------------------------------

def llama_ppl(a, text):
    import numpy as np
    llm = load_llama(a.model, a.threads, a.ctx, True)
    data = open(text, "rb").read()
    toks = llm.tokenize(data, add_bos=True, special=False)
    C = a.ctx
    chunks = len(toks) // C
    if a.chunks:
        chunks = min(chunks, a.chunks)
    bos = llm.token_bos()
    add_bos = llm._model.add_bos_token() if hasattr(llm._model, "add_bos_token") else False
    first = C // 2
    nll, t0 = [], time.time()
    for c in range(chunks):
        w = list(toks[c * C:(c + 1) * C])
        if add_bos:
            w[0] = bos
        llm.reset()
        llm.eval(w)
        z = np.array(llm.scores[first:C - 1], dtype=np.float64)
        m = z.max(axis=1, keepdims=True)
        lse = np.log(np.exp(z - m).sum(axis=1)) + m[:, 0]
        tgt = np.array(w[first + 1:C])
        nll.extend((lse - z[np.arange(len(tgt)), tgt]).tolist())
        print("\rllama.cpp perplexity: window %d/%d" % (c + 1, chunks), end="", file=sys.stderr)
    print(file=sys.stderr)
    nll = np.array(nll)
    return {"text_tokens": len(toks), "chunks": chunks, "scored": len(nll), "ppl": float(np.exp(nll.mean())),
            "nll": float(nll.mean()), "seconds": time.time() - t0}


def run_ppl(a):
    args = ["perplexity", "--model", a.model, "--text", a.ppl, "--ctx", str(a.ctx), "--threads", str(a.threads)]
    if a.chunks:
        args += ["--chunks", str(a.chunks)]
    ts = tessera(a.tessera, args)
    ll = llama_ppl(a, a.ppl)
    diff = (ts["ppl"] - ll["ppl"]) / ll["ppl"]
    res = {"tessera": ts, "llama": ll, "rel_diff": diff, "pass": abs(diff) <= 0.005 and ts["text_tokens"] == ll["text_tokens"]}
    return res["pass"], res


# ---- bench ---------------------------------------------------------------------------------

def llama_rep(llm, toks, G):
    """One llama.cpp prefill of toks and G greedy decode steps: (prefill s, decode s) by its own
    counters (llama_perf_context, no Python), and by the wall clock."""
    import llama_cpp
    import numpy as np
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    t0 = time.perf_counter()
    llm.eval(toks)
    t1 = time.perf_counter()
    for _ in range(G):
        llm.eval([int(np.argmax(last_logits(llm)))])
    t2 = time.perf_counter()
    pd = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return pd.t_p_eval_ms / 1e3, pd.t_eval_ms / 1e3, t1 - t0, t2 - t1


def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


def run_bench(a):
    """Per prompt length: a.repeats pairs, tessera and llama.cpp alternated (ABBA...: the order flips
    every pair, so drift and going first fall on both), each pair one prefill of P tokens and G
    decode steps per engine; every figure is the median over the pairs with its quartiles, the
    ratios medians of the per-pair ratios (tessera / llama.cpp)."""
    import numpy as np
    rows = []
    for P in a.prompt_lens:
        llm = load_llama(a.model, a.threads, P + a.gen + 8, False)
        toks = [int(x) for x in np.random.default_rng(7).integers(100, llm.n_vocab(), size=P)]
        llama_rep(llm, toks, a.gen)  # warm-up (tessera's bench warms up inside each run)
        tsr, llr = [], []
        for i in range(a.repeats):
            for who in (("ts", "ll") if i % 2 == 0 else ("ll", "ts")):
                if who == "ts":
                    tsr.append(tessera(a.tessera, ["bench", "--model", a.model, "--prompt-len", str(P), "--gen", str(a.gen),
                                                   "--repeats", "1", "--threads", str(a.threads)]))
                else:  # a short untimed eval first: tessera warms up inside each of its runs too, and
                    # after the other engine's run llama.cpp's first prefill read 27-225 tok/s (2026-12-07)
                    llama_rep(llm, toks[:16], 1)
                    llr.append(llama_rep(llm, toks, a.gen))
        del llm
        ts_pre = [t["prefill_tps"] for t in tsr]
        ts_dec = [t["decode_tps"] for t in tsr]
        ll_pre = [P / x[0] for x in llr]
        ll_dec = [a.gen / x[1] for x in llr]
        med = statistics.median
        ts = dict(tsr[len(tsr) // 2])  # a representative run's details (bandwidth, split), medians below
        ts["prefill_tps"], ts["decode_tps"] = med(ts_pre), med(ts_dec)
        ts["gbs"] = med([t["gbs"] for t in tsr])
        ll = {"prefill_tps": med(ll_pre), "decode_tps": med(ll_dec), "prefill_tps_wall": P / med([x[2] for x in llr]),
              "decode_tps_wall": a.gen / med([x[3] for x in llr])}
        rp = quartiles([t / l for t, l in zip(ts_pre, ll_pre)])
        rd = quartiles([t / l for t, l in zip(ts_dec, ll_dec)])
        rows.append({"prompt_len": P, "gen": a.gen, "pairs": a.repeats, "tessera": ts, "llama": ll,
                     "tessera_prefill_tps_q": quartiles(ts_pre), "tessera_decode_tps_q": quartiles(ts_dec),
                     "llama_prefill_tps_q": quartiles(ll_pre), "llama_decode_tps_q": quartiles(ll_dec),
                     "prefill_ratio": rp[1], "prefill_ratio_q25": rp[0], "prefill_ratio_q75": rp[2],
                     "decode_ratio": rd[1], "decode_ratio_q25": rd[0], "decode_ratio_q75": rd[2],
                     "load_avg": os.getloadavg()[0]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera", nargs="?", default=os.environ.get("TESSERA_BIN", os.path.join(ROOT, "build", "tessera")))
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--json-out")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--ppl", metavar="TEXT")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--prompt-lens", default="16,128,512")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--isa", choices=["native", "avx2"], default="native",
                    help="avx2: both engines capped at AVX2 on any x86 machine (tessera TESSERA_ISA=avx2; "
                         "llama.cpp built GGML_NATIVE=OFF with AVX2/FMA/F16C and AVX-512 off, in its own venv)")
    ap.add_argument("--llama-omp-wait", choices=["default", "passive", "active"], default="default",
                    help="OMP_WAIT_POLICY for llama.cpp (default: unset, libgomp's own)")
    a = ap.parse_args()
    try:
        a.prompt_lens = [int(x) for x in a.prompt_lens.split(",")]
    except ValueError:
        die("--prompt-lens takes comma-separated integers")
    if not os.path.exists(a.tessera):
        die("tessera binary %s not found (pass it as the first argument)" % a.tessera)
    if not os.path.exists(a.model):
        die("model %s not found (scripts/get-smollm2.sh prints its path)" % a.model)
    if a.ppl and not os.path.exists(a.ppl):
        die("text %s not found (scripts/get-llm-text.sh prepares one)" % a.ppl)
    if not (a.check or a.ppl or a.bench):
        a.check = a.bench = True
    # llama.cpp's CPU backend (OpenMP build) synchronizes every op with an OpenMP barrier, so the
    # wait policy decides its speed: unset (libgomp's default: spin a while, then sleep) unless
    # --llama-omp-wait says otherwise. "passive" (what tessera runs with: one parallel region per
    # eval, its own spin barrier) makes each of llama.cpp's ~600 barriers per token a futex sleep
    # (3-4x slower decode); "active" keeps its idle threads spinning while tessera runs. Set before
    # llama_cpp (libgomp) is loaded; tessera's runs get OMP_WAIT_POLICY=passive explicitly.
    if a.llama_omp_wait == "default":
        os.environ.pop("OMP_WAIT_POLICY", None)
    else:
        os.environ["OMP_WAIT_POLICY"] = a.llama_omp_wait
    venv, build_env = VENV, dict(LLAMA_BUILD_ENV)
    if a.isa == "avx2":  # the AVX2 class on any machine: an AVX2-only llama.cpp, tessera capped
        venv = VENV + "-avx2"
        build_env["CMAKE_ARGS"] = LLAMA_AVX2_CMAKE
        os.environ["TESSERA_ISA"] = "avx2"
    peerenv.ensure("llm_llamacpp", ["llama_cpp", "numpy"], venv, REQS, " (compiles llama.cpp: several minutes)",
                   pip_env=build_env, pip_args=["--no-cache-dir"])
    import llama_cpp
    report = {"model": a.model, "threads": a.threads, "llama_cpp_python": llama_cpp.__version__, "isa": a.isa,
              "llama_omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
              "load_avg_start": os.getloadavg()[0]}
    ok = True
    if a.check:
        llm = load_llama(a.model, a.threads, 512, True)
        with tempfile.TemporaryDirectory() as tmp:
            for name, fn in (("tokenizer", check_tokenizer), ("logits", check_logits)):
                good, rows = fn(a, llm, tmp)
                report[name] = {"pass": good, "rows": rows}
                ok &= good
        llm = load_llama(a.model, a.threads, 512, False)
        good, rows = check_greedy(a, llm)
        report["greedy"] = {"pass": good, "rows": rows}
        ok &= good
        del llm
    if a.ppl:
        good, res = run_ppl(a)
        report["perplexity"] = res
        ok &= good
    if a.bench:
        report["bench"] = run_bench(a)
    report["load_avg_end"] = os.getloadavg()[0]
    report["pass"] = ok
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(report, f, indent=1)
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0 if ok else 1


def print_report(r):
    print("model %s, %d threads, llama-cpp-python %s%s (OMP_WAIT_POLICY %s), load average %.2f -> %.2f" % (
        r["model"], r["threads"], r["llama_cpp_python"], " capped at AVX2" if r.get("isa") == "avx2" else "",
        r["llama_omp_wait_policy"], r["load_avg_start"], r["load_avg_end"]))
    if "tokenizer" in r:
        t = r["tokenizer"]
        bad = [x for x in t["rows"] if not x["equal"]]
        print("tokenizer   %s: %d/%d strings give identical ids" % ("PASS" if t["pass"] else "FAIL", len(t["rows"]) - len(bad), len(t["rows"])))
        for x in bad:
            print("  case %d (special=%s): tessera %s\n                       llama   %s" % (x["case"], x["special"], x["tessera"], x["llama"]))
    if "logits" in r:
        print("logits      %s (tolerance: rel RMS <= %.2f, mean KL <= %.3f, top-1 >= %.0f%%)" % (
            "PASS" if r["logits"]["pass"] else "FAIL", TOL_REL_RMS, TOL_KL, 100 * TOL_TOP1))
        for x in r["logits"]["rows"]:
            if "error" in x:
                print("  prompt %d: %s" % (x["prompt"], x["error"]))
            else:
                print("  prompt %d: %3d positions  max|dz| %.3g  rel RMS %.4f  KL mean %.5f max %.5f  top-1 %.0f%%  bitwise equal rows %d/%d" % (
                    x["prompt"], x["tokens"], x["max_abs"], x["rel_rms"], x["kl_mean"], x["kl_max"], 100 * x["top1"],
                    x["exact_rows"], x["tokens"]))
    if "greedy" in r:
        print("greedy      %s: 64 tokens at temperature 0" % ("PASS" if r["greedy"]["pass"] else "FAIL"))
        for x in r["greedy"]["rows"]:
            if "error" in x:
                print("  prompt %d: %s" % (x["prompt"], x["error"]))
            else:
                print("  prompt %d: %2d tokens %s%s  %r" % (x["prompt"], x["tessera_tokens"], "identical" if x["equal"] else "DIFFER",
                                                      "" if x["first_difference"] is None else " at %d" % x["first_difference"], x["text"]))
    if "perplexity" in r:
        p = r["perplexity"]
        print("perplexity  %s: tessera %.4f, llama.cpp %.4f (%+.3f%%), %d windows x %d, %d tokens of text (tessera %d)" % (
            "PASS" if p["pass"] else "FAIL", p["tessera"]["ppl"], p["llama"]["ppl"], 100 * p["rel_diff"], p["llama"]["chunks"],
            p["tessera"]["ctx"], p["llama"]["text_tokens"], p["tessera"]["text_tokens"]))
        print("            time: tessera %.1f s, llama.cpp %.1f s (llama-cpp-python's eval of each window with all logits, "
              "the scoring in numpy): %.2fx" % (p["tessera"]["seconds"], p["llama"]["seconds"],
                                                 p["llama"]["seconds"] / p["tessera"]["seconds"]))
    if "bench" in r:
        print("bench       tok/s, medians of %d interleaved pairs; ratios: medians of the per-pair ratios [quartiles]"
              % r["bench"][0]["pairs"] if r["bench"] else "bench")
        print("            (llama.cpp: its own counters; wall clock in brackets)")
        print("  %6s %5s | %9s %9s %19s | %9s %9s %19s | %7s %6s" % ("prompt", "gen", "ts pre", "ll pre", "ratio", "ts dec", "ll dec",
                                                                   "ratio", "GB/s", "%bw"))
        for x in r["bench"]:
            t, l = x["tessera"], x["llama"]
            print("  %6d %5d | %9.1f %9.1f %5.2f [%5.2f, %5.2f] | %9.1f %9.1f %5.2f [%5.2f, %5.2f] | %7.2f %5.1f%%"
                  "   [llama wall %.1f / %.1f]" % (
                      x["prompt_len"], x["gen"], t["prefill_tps"], l["prefill_tps"], x["prefill_ratio"], x["prefill_ratio_q25"],
                      x["prefill_ratio_q75"], t["decode_tps"], l["decode_tps"], x["decode_ratio"], x["decode_ratio_q25"],
                      x["decode_ratio_q75"], t["gbs"], t.get("pct_bandwidth") or 0, l["prefill_tps_wall"], l["decode_tps_wall"]))


if __name__ == "__main__":
    sys.exit(main())
