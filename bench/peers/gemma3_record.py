#!/usr/bin/env python3
"""Records llama.cpp's Gemma 3 270M logits and perplexity for tests/test_gemma3.c: writes the C header
tests/test_gemma3.h (regenerate with this script; the model comes from scripts/get-gemma3.sh).

Usage:
  gemma3_record.py [--model FILE] [--out tests/test_gemma3.h] [--threads 2]

What is recorded (llama-cpp-python 0.3.36, whatever its build is on this machine: the header says
which ggml CPU features it ran with, and tessera checks the bits where its kernels follow that
build's orders; src/llm/cpu_order.h):
  case 0  "The capital of France is": every position's logits of the prefill (Llama(logits_all=True),
          so llama.cpp's last layer runs its MLP for all 6 tokens: a group of 4 through the repacked
          Q4_K gemm, 2 through its gemv), then 3 single-token decode steps fed llama.cpp's argmax;
  case 1  a 23-token sentence: the prefill's last logits only (logits_all=False: one output row),
          then 2 decode steps;
  case 2  520 tokens of text (past the 512-position sliding window of the local layers, in two
          batches of 512 and 8 as n_ubatch cuts them): the last logits, then 2 decode steps;
  ppl     perplexity of PPL_TEXT in llama.cpp's protocol (bench/peers/llm_llamacpp.py --ppl: the text
          tokenized with BOS, windows of 48 tokens from an empty cache, the first token of each
          replaced by BOS, the second half scored), NLL in float64 (math.fsum). Recorded with every
          position's logits (logits_all=True, as llm_llamacpp.py --ppl), while tessera (as llama.cpp's
          own perplexity program) asks for the scored half only: llama.cpp's last layer then runs its
          MLP for fewer tokens, in other groups of 4 for its repacked Q4_K gemm, unless the window
          is a multiple of 8 (48 is), where the scored tokens fall in the same groups either way.
Per recorded row: the FNV-1a 64-bit hash of its n_vocab fp32 bit patterns (as 32-bit words), its
argmax, and the bits of 5 probe logits (ids 0, 1000, 100000, 262143 and the argmax).
Exit status 0 on success, 2 on bad usage."""
import argparse
import math
import os
import platform
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROMPTS = [
    "The capital of France is",
    "In the middle of the night, the old lighthouse keeper climbed the stairs to check on the lamp once more.",
]
# the long case: a fixed text of numbered lines, cut to LONG_TOKENS tokens (ids stored in the header)
LONG_TEXT = "".join("Line %d: the river runs %s past the mill and the orchard.\n" % (i, ["north", "south", "east", "west"][i % 4])
                    for i in range(1, 80))
LONG_TOKENS = 520
DECODE = [3, 2, 2]
PPL_TEXT = ("It was a bright cold day in April, and the clocks were striking the hour as the travellers came down "
            "the hill into the town. The market square was full of carts, and the smell of bread and smoke hung "
            "over the stalls. A boy ran between the horses with a basket of apples, calling out prices that nobody "
            "believed, while two old women argued about the weather and the price of salt. Beyond the church the "
            "road turned toward the river, where the ferryman was waiting with his long pole and his patient dog. "
            "They paid him in copper coins and crossed in silence, watching the water slide past the boat.")
PPL_CTX = 48
PROBES = [0, 1000, 100000, 262143]


def fnv64(row):
    """FNV-1a (64-bit) over the row's fp32 bit patterns taken as 32-bit words (tests/test_gemma3.c:
    g3_hash)."""
    h = 0xcbf29ce484222325
    for w in np.ascontiguousarray(row, dtype="<f4").view("<u4").tolist():
        h = ((h ^ w) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def bits(x):
    return int(np.array([x], dtype="<f4").view("<u4")[0])


def row_record(z):
    z = np.asarray(z, dtype=np.float32)
    am = int(np.argmax(z))
    return {"hash": fnv64(z), "argmax": am, "probes": [bits(z[i]) for i in PROBES] + [bits(z[am])]}


def last_logits(llm):
    import llama_cpp
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)).copy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(HERE, ".venv-llm", "gemma3.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "test_gemma3.h"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not os.path.exists(a.model):
        print("gemma3_record: %s not found (scripts/get-gemma3.sh installs it)" % a.model, file=sys.stderr)
        return 2
    import llama_cpp
    from llama_cpp import Llama

    def load(logits_all, ctx=1024):
        return Llama(model_path=a.model, n_ctx=ctx, n_batch=512, n_ubatch=512, n_threads=a.threads,
                     n_threads_batch=a.threads, logits_all=logits_all, verbose=False)

    cases = []
    all_llm, last_llm = load(True), load(False)
    long_ids = last_llm.tokenize(LONG_TEXT.encode(), add_bos=True)[:LONG_TOKENS]
    assert len(long_ids) == LONG_TOKENS, len(long_ids)
    for ci in range(3):
        allrows = ci == 0
        llm = all_llm if allrows else last_llm
        ids = llm.tokenize(PROMPTS[ci].encode(), add_bos=True) if ci < 2 else long_ids
        llm.reset()
        llm.eval(ids)
        rows = [row_record(llm.scores[i]) for i in range(len(ids))] if allrows else [row_record(last_logits(llm))]
        steps = []
        for _ in range(DECODE[ci]):
            t = rows[-1]["argmax"]
            steps.append(t)
            llm.eval([t])
            rows.append(row_record(last_logits(llm)))
        cases.append({"ids": ids, "all": allrows, "steps": steps, "rows": rows})
        print("case %d: %d tokens, %d rows" % (ci, len(ids), len(rows)), file=sys.stderr)

    ppl_llm = load(True, PPL_CTX)
    toks = ppl_llm.tokenize(PPL_TEXT.encode(), add_bos=True)
    chunks = len(toks) // PPL_CTX
    first = PPL_CTX // 2
    nll = []
    for c in range(chunks):
        w = list(toks[c * PPL_CTX:(c + 1) * PPL_CTX])
        w[0] = ppl_llm.token_bos()
        ppl_llm.reset()
        ppl_llm.eval(w)
        for j in range(first, PPL_CTX - 1):
            z = np.array(ppl_llm.scores[j], dtype=np.float64)
            mx = z.max()
            lse = math.log(math.fsum(np.exp(z - mx))) + mx
            nll.append(lse - z[w[j + 1]])
    mean = math.fsum(nll) / len(nll)
    ppl = math.exp(mean)
    print("ppl %.9f over %d predictions (%d tokens, %d windows)" % (ppl, len(nll), len(toks), chunks), file=sys.stderr)

    feats = llama_cpp.llama_print_system_info().decode().strip()
    L = []
    L.append("/* Generated by bench/peers/gemma3_record.py (do not edit): llama.cpp's logits and perplexity for")
    L.append(" * Gemma 3 270M Q4_K_M (scripts/get-gemma3.sh), recorded with llama-cpp-python %s on %s," % (llama_cpp.__version__, platform.machine()))
    L.append(" * ggml built for: %s" % feats.replace("*/", "* /"))
    L.append(" * (no AVX512 = its AVX2 build: tessera's AVX2 level must give these bits). */")
    L.append("#ifndef TEST_GEMMA3_H")
    L.append("#define TEST_GEMMA3_H")
    L.append("#include <stdint.h>")
    L.append("")
    L.append("#define G3_NPROBE %d" % (len(PROBES) + 1))
    L.append("static const int32_t g3_probe_ids[%d] = {%s}; /* then the row's argmax */" % (len(PROBES), ", ".join(map(str, PROBES))))
    L.append("typedef struct g3_row { uint64_t hash; int32_t argmax; uint32_t probes[G3_NPROBE]; } g3_row;")
    for ci, c in enumerate(cases):
        ids = ", ".join(map(str, c["ids"]))
        L.append("static const int32_t g3_ids%d[%d] = {%s};" % (ci, len(c["ids"]), ids))
        L.append("static const int32_t g3_steps%d[%d] = {%s};" % (ci, len(c["steps"]), ", ".join(map(str, c["steps"]))))
        L.append("static const g3_row g3_rows%d[%d] = {" % (ci, len(c["rows"])))
        for r in c["rows"]:
            L.append("    {0x%016xull, %d, {%s}}," % (r["hash"], r["argmax"], ", ".join("0x%08x" % p for p in r["probes"])))
        L.append("};")
    L.append("typedef struct g3_case { const char *prompt; const int32_t *ids; int n; int all; const int32_t *steps; int nsteps; const g3_row *rows; } g3_case;")
    L.append("static const g3_case g3_cases[3] = {")
    for ci, c in enumerate(cases):
        prompt = '"%s"' % PROMPTS[ci].replace("\\", "\\\\").replace('"', '\\"') if ci < 2 else "NULL"
        L.append("    {%s, g3_ids%d, %d, %d, g3_steps%d, %d, g3_rows%d}," % (prompt, ci, len(c["ids"]), int(c["all"]), ci, len(c["steps"]), ci))
    L.append("};")
    L.append("static const char g3_ppl_text[] =")
    txt = PPL_TEXT
    for k in range(0, len(txt), 90):
        L.append('    "%s"' % txt[k:k + 90].replace("\\", "\\\\").replace('"', '\\"'))
    L.append("    ;")
    L.append("#define G3_PPL_CTX %d" % PPL_CTX)
    L.append("#define G3_PPL_TOKENS %d" % len(toks))
    L.append("#define G3_PPL_SCORED %d" % len(nll))
    L.append("static const double g3_ppl = %.17g; /* exp(mean NLL), float64 */" % ppl)
    L.append("")
    L.append("#endif")
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")
    print("wrote %s" % a.out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
