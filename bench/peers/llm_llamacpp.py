#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python) side by side with `tessera llm` on the same GGUF file:
correctness (tokenizer ids, logits, greedy generation, perplexity) and speed (prefill and
decode tok/s with the same thread count and prompt lengths).

Usage:
  llm_llamacpp.py [TESSERA_BIN] --model FILE [--threads 2] [--json] [--json-out FILE]
                  [--check] [--ppl TEXT [--ctx 512] [--chunks N]] [--bench [--prompt-lens 16,128,512]
                  [--gen 128] [--repeats 5] [--llama-bench [--llama-bench-args ARGS]]]
                  [--llama-omp-wait default|passive|active]
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
--llama-bench (with --bench)
  The same comparison against llama.cpp's own benchmark program, so that the figure does not
  depend on the Python binding: llama-bench built from the llama.cpp source vendored in the same
  llama-cpp-python sdist (build-llama-bench.sh: a one-time setup step, 5-10 minutes on 2 cores,
  run on demand before the timed runs; the same -march=native / AVX2 flags as the binding, into
  bench/peers/.llama-bench-ISA). Each pair gains one llama-bench turn (the three engines in the
  order tessera, binding, llama-bench, reversed every pair), two invocations with -t T -r 1
  -o json: `-p P -n G` (pp P: a P-token prefill of random ids from an empty context; tg G: G
  decode steps from an empty context) and `-p 0 -n G -d P` (tg G at depth P: the G decode steps
  follow a P-token context filled untimed - what tessera's decode measures, so the decode ratio
  uses this one; the empty-context tg is reported beside it). llama-bench times each test itself
  (wall clock around its decode calls, after its own warm-up run) with its defaults otherwise
  (flash attention auto, n_batch 2048, n_ubatch 512, poll 50), which --llama-bench-args can
  change (e.g. "-fa 0", as the binding runs). Its build commit, backends and the CMake flags are
  recorded.

Exit status 0 when every check passes, 1 when one fails or tessera fails, 2 on bad usage.
llama-cpp-python compiles llama.cpp from source on first use (several minutes on 2 cores): it is
imported from the running interpreter when present, else installed into bench/peers/.venv-llama
from requirements-llama.txt (see peerenv.py)."""
import argparse
import json
import os
import shlex
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


LLAMA_BENCH_BUILD = os.path.join(HERE, "build-llama-bench.sh")


def ensure_llama_bench(isa):
    """The llama-bench binary for the ISA class, built by build-llama-bench.sh if needed (a one-time
    setup step that does nothing when the binary is up to date), and the CMake flags it used."""
    out = os.path.join(HERE, ".llama-bench-" + isa)
    binary = os.path.join(out, "bin", "llama-bench")
    if not os.path.exists(binary):
        print("llm_llamacpp: building llama.cpp's llama-bench (%s) from the llama-cpp-python sdist's vendor/llama.cpp: "
              "a one-time setup step, 5-10 minutes on 2 cores, not part of any timing" % isa, file=sys.stderr)
    r = subprocess.run(["bash", LLAMA_BENCH_BUILD, "--isa", isa, out], stdout=subprocess.PIPE, text=True)
    if r.returncode != 0 or not os.path.exists(binary):
        die("building llama-bench failed (%s)" % LLAMA_BENCH_BUILD, 1)
    flags = []
    try:
        with open(os.path.join(out, "cmake-flags.txt")) as f:
            flags = [x for x in f.read().splitlines()[1:] if x]
    except OSError:
        pass
    ver = subprocess.run([binary, "--version"], capture_output=True, text=True)
    return binary, flags, (ver.stdout + ver.stderr).strip()


def llama_bench_json(binary, args):
    cmd = [binary] + args + ["-o", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        die("llama-bench failed: " + " ".join(cmd), 1)
    return json.loads(r.stdout)


def llama_bench_rep(a, binary, P, G):
    """One llama-bench turn: `-p P -n G` (pp P and tg G, both from an empty context) and
    `-p 0 -n G -d P` (tg G after a P-token context, untimed): {pp, tg0, tgP} tok/s (llama-bench's
    samples_ts; one sample each with -r 1) and the JSON rows."""
    base = ["-m", a.model, "-t", str(a.threads), "-r", "1"] + shlex.split(a.llama_bench_args or "")
    rows = llama_bench_json(binary, base + ["-p", str(P), "-n", str(G)])
    rows += llama_bench_json(binary, base + ["-p", "0", "-n", str(G), "-d", str(P)])
    out = {}
    for x in rows:
        # tokens / the test's time (samples_ns; samples_ts is printed rounded to 0.01)
        ns = x["samples_ns"][0] if x.get("samples_ns") else x["avg_ns"]
        ts = (x["n_prompt"] + x["n_gen"]) * 1e9 / ns
        if x["n_prompt"] == P and x["n_gen"] == 0 and x.get("n_depth", 0) == 0:
            out["pp"] = ts
        elif x["n_prompt"] == 0 and x["n_gen"] == G:
            out["tgP" if x.get("n_depth", 0) == P and P > 0 else "tg0"] = ts
    if P == 0:
        out["tgP"] = out.get("tg0")
    if not all(k in out for k in ("pp", "tg0", "tgP")):
        die("llama-bench's JSON lacks a test (pp %d, tg %d, tg %d @ d%d): %s" % (P, G, G, P, json.dumps(rows)[:2000]), 1)
    return out, rows


LLAMA_BENCH_INFO = ("build_commit", "build_number", "cpu_info", "backends", "model_type", "model_size", "n_threads",
                    "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "poll", "cpu_mask", "cpu_strict",
                    "load_mode", "lazy_mode", "repack")


def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


def run_bench(a):
    """Per prompt length: a.repeats pairs, tessera and llama.cpp alternated (ABBA...: the order flips
    every pair, so drift and going first fall on both), each pair one prefill of P tokens and G
    decode steps per engine; every figure is the median over the pairs with its quartiles, the
    ratios medians of the per-pair ratios (tessera / llama.cpp). With --llama-bench each pair is a
    triple: tessera, the binding, llama-bench (reversed every pair)."""
    import numpy as np
    rows = []
    lbin = a.llama_bench_bin if a.llama_bench else None
    for P in a.prompt_lens:
        llm = load_llama(a.model, a.threads, P + a.gen + 8, False)
        toks = [int(x) for x in np.random.default_rng(7).integers(100, llm.n_vocab(), size=P)]
        llama_rep(llm, toks, a.gen)  # warm-up (tessera's bench warms up inside each run)
        tsr, llr, lbr = [], [], []
        order = ("ts", "ll", "lb") if lbin else ("ts", "ll")
        for i in range(a.repeats):
            for who in (order if i % 2 == 0 else order[::-1]):
                if who == "lb":
                    res, raw = llama_bench_rep(a, lbin, P, a.gen)
                    lbr.append(res)
                    if "llama_bench_info" not in a.__dict__:
                        a.llama_bench_info = {k: raw[0].get(k) for k in LLAMA_BENCH_INFO}
                    continue
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
        row = {"prompt_len": P, "gen": a.gen, "pairs": a.repeats, "tessera": ts, "llama": ll,
               "tessera_prefill_tps_q": quartiles(ts_pre), "tessera_decode_tps_q": quartiles(ts_dec),
               "llama_prefill_tps_q": quartiles(ll_pre), "llama_decode_tps_q": quartiles(ll_dec),
               "prefill_ratio": rp[1], "prefill_ratio_q25": rp[0], "prefill_ratio_q75": rp[2],
               "decode_ratio": rd[1], "decode_ratio_q25": rd[0], "decode_ratio_q75": rd[2]}
        if lbr:
            lb_pre, lb_dec, lb_dec0 = [x["pp"] for x in lbr], [x["tgP"] for x in lbr], [x["tg0"] for x in lbr]
            qp, qd, q0 = quartiles(lb_pre), quartiles(lb_dec), quartiles(lb_dec0)
            # decode_tps: tg G at depth P (after a P-token context, as tessera's decode); the
            # empty-context tg (llama-bench's plain `-n G`) beside it
            row["llama_bench"] = {"prefill_tps": qp[1], "decode_tps": qd[1], "decode_tps_empty_ctx": q0[1],
                                  "prefill_tps_q": qp, "decode_tps_q": qd, "decode_tps_empty_ctx_q": q0,
                                  "prefill_test": "pp%d (-p %d, empty context)" % (P, P),
                                  "decode_test": "tg%d @ d%d (-n %d -d %d)" % (a.gen, P, a.gen, P),
                                  "decode_empty_ctx_test": "tg%d (-n %d, empty context)" % (a.gen, a.gen),
                                  "runs": lbr}
            for name, xs, ys in (("prefill", ts_pre, lb_pre), ("decode", ts_dec, lb_dec), ("decode_empty_ctx", ts_dec, lb_dec0)):
                q = quartiles([t / l for t, l in zip(xs, ys)])
                key = name + "_ratio_llama_bench"
                row[key], row[key + "_q25"], row[key + "_q75"] = q[1], q[0], q[2]
        row["load_avg"] = os.getloadavg()[0]
        rows.append(row)
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
    ap.add_argument("--llama-bench", action="store_true",
                    help="with --bench: also run llama.cpp's own llama-bench (built from the binding's vendored "
                         "llama.cpp by build-llama-bench.sh on first use) in every pair")
    ap.add_argument("--llama-bench-args", default="",
                    help="extra llama-bench options, e.g. \"-fa 0\" or \"--poll 100\" (default: none, its defaults)")
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
    if a.llama_bench and not a.bench:
        die("--llama-bench goes with --bench")
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
        if a.llama_bench:  # built (once) before any timing
            a.llama_bench_bin, flags, version = ensure_llama_bench(a.isa)
            print("llm_llamacpp: llama-bench %s: pp = prefill from an empty context; decode = tg at depth P "
                  "(-d P, after a P-token context, as tessera's), tg from an empty context reported beside it"
                  % a.llama_bench_bin, file=sys.stderr)
        report["bench"] = run_bench(a)
        if a.llama_bench:
            report["llama_bench"] = dict(getattr(a, "llama_bench_info", {}), binary=os.path.relpath(a.llama_bench_bin, ROOT),
                                         cmake_flags=flags, version=version, extra_args=a.llama_bench_args,
                                         omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", "(unset)"),
                                         source="llama-cpp-python %s sdist, vendor/llama.cpp" % llama_cpp.__version__)
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
        lbi = r.get("llama_bench")
        if lbi and any("llama_bench" in x for x in r["bench"]):
            flags = " ".join(f for f in lbi.get("cmake_flags", []) if f.startswith(("-DGGML_NATIVE", "-DGGML_AVX2", "-DCMAKE_C_FLAGS")))
            print("llama-bench (same source, built with %s; commit %s, backends %s, flash_attn %s, %s%s)" % (
                flags or "?", lbi.get("build_commit"), lbi.get("backends"), lbi.get("flash_attn"),
                "n_ubatch %s, poll %s" % (lbi.get("n_ubatch"), lbi.get("poll")),
                ", extra args %r" % lbi["extra_args"] if lbi.get("extra_args") else ""))
            print("            pp P: prefill from an empty context; tg@dP: G decode steps after a P-token context (the")
            print("            decode ratio's peer, as tessera's); tg@d0: from an empty context. ratio = tessera / llama-bench")
            print("  %6s %5s | %9s %9s %19s | %9s %9s %19s | %9s %19s" % ("prompt", "gen", "ts pre", "lb pp", "ratio", "ts dec",
                                                                        "lb tg@dP", "ratio", "lb tg@d0", "ratio"))
            for x in r["bench"]:
                if "llama_bench" not in x:
                    continue
                t, b = x["tessera"], x["llama_bench"]
                print("  %6d %5d | %9.1f %9.1f %5.2f [%5.2f, %5.2f] | %9.1f %9.1f %5.2f [%5.2f, %5.2f] | %9.1f %5.2f [%5.2f, %5.2f]" % (
                    x["prompt_len"], x["gen"], t["prefill_tps"], b["prefill_tps"], x["prefill_ratio_llama_bench"],
                    x["prefill_ratio_llama_bench_q25"], x["prefill_ratio_llama_bench_q75"], t["decode_tps"], b["decode_tps"],
                    x["decode_ratio_llama_bench"], x["decode_ratio_llama_bench_q25"], x["decode_ratio_llama_bench_q75"],
                    b["decode_tps_empty_ctx"], x["decode_empty_ctx_ratio_llama_bench"],
                    x["decode_empty_ctx_ratio_llama_bench_q25"], x["decode_empty_ctx_ratio_llama_bench_q75"]))


if __name__ == "__main__":
    sys.exit(main())
