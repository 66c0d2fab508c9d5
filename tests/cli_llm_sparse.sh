#!/usr/bin/env bash
# tessera llm calibrate | eval | bench --config (activation sparsity, issue 33): usage errors exit 2;
# with SmolLM2 present ($TESSERA_SMOLLM2, else bench/peers/.venv-llm/smollm2.gguf; .ci/run installs
# it; without it that part says SKIPPED): calibration of CATS, SATS and TEAL on a short text (this
# repository's docs), their files and JSON fields, eval and bench JSON fields, and the bad inputs
# the issue names (thresholds of another model, a missing layer, a NaN threshold, a text shorter
# than one window), each a one-line error with nothing written.
# Usage: cli_llm_sparse.sh path/to/tessera   (TESSERA_SRC points at the repository root)
set -u
T=${1:?usage: cli_llm_sparse.sh path/to/tessera}
SRC=${TESSERA_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE=${TESSERA_CACHE:-$tmp/cache} TESSERA_QUIET=1

expect_usage llm calibrate --model x --text y --method cats --sparsity 0.5
expect_usage llm calibrate --model x --text y --method magic --sparsity 0.5 --out z
expect_usage llm calibrate --model x --text y --method cats --sparsity 1.5 --out z
expect_usage llm eval --model x
expect_usage llm bench --model x --config
expect_usage llm eval --model x --text y --router r

M=${TESSERA_SMOLLM2:-$SRC/bench/peers/.venv-llm/smollm2.gguf}
if [ ! -r "$M" ] && [ -n "${TESSERA_SMOLLM2:-}" ]; then
  bad "TESSERA_SMOLLM2=$TESSERA_SMOLLM2 is not a readable file"
elif [ ! -r "$M" ]; then
  skip_part "cli_llm_sparse: SmolLM2 GGUF not found (scripts/get-smollm2.sh): the real-model checks"
else
  TXT="$SRC/docs/ARCHITECTURE.md"
  if "$T" llm calibrate --model "$M" --text "$TXT" --tokens 1024 --window 128 --proxy-tokens 128 --method cats,sats,teal \
    --sparsity 0.5 --router --svg "$tmp/curves.svg" --out "$tmp/th" --threads 2 --json >"$tmp/cal.json" 2>"$tmp/err" &&
    python3 - "$tmp/cal.json" "$tmp/th" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
assert [e["method"] for e in j] == ["cats", "sats", "teal"], j
for e in j:
    assert abs(e["calibrated"] - 0.5) < 0.01 and e["tokens"] == 1024, e
    t = json.load(open(e["out"]))
    assert t["kind"] == "llm-thresholds" and t["n_layer"] == 30 and len(t["layers"]) == 30, t["kind"]
    assert t["provenance"]["cpu_model"], t["provenance"]
    if e["method"] != "teal":
        r = json.load(open(e["router"]))
        assert r["kind"] == "llm-router" and len(r["weights"]) == 30
assert os.path.exists(os.path.join(sys.argv[2], "sats-50.json"))
PY
  then ok; else bad "calibrate: $(cat "$tmp/err")"; fi
  if grep -q "<svg" "$tmp/curves-sats-50.svg" 2>/dev/null; then ok; else bad "calibrate --svg: no SATS curves"; fi
  # eval and bench fields
  if "$T" llm eval --model "$M" --text "$SRC/docs/FORMATS.md" --ctx 64 --chunks 1 --config "$tmp/th/cats-50.json" \
    --config "$tmp/th/sats-50.json,$tmp/th/sats-50.router.json,0.01" --threads 2 --json >"$tmp/ev.json" 2>"$tmp/err" &&
    python3 - "$tmp/ev.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["dense"]["ppl"] > 1 and j["scored"] == 31, j  # positions 32..62 of a 64-token window
for c in j["configs"]:
    for k in ("ppl", "kl", "top1", "decode_tps", "act_sparsity", "weight_skip", "bytes_per_token", "byte_bound"):
        assert k in c and c[k] == c[k], (k, c)
    assert 0.2 < c["act_sparsity"] < 0.8 and c["kl"] >= 0 and 0 <= c["top1"] <= 1, c
    assert len(c["layer_act_sparsity"]) == 30
assert j["configs"][1]["tau"] == 0.01 and 0 <= j["configs"][1]["routed_dense"] <= 1
PY
  then ok; else bad "eval --json: $(cat "$tmp/err")"; fi
  if "$T" llm bench --model "$M" --thresholds "$tmp/th/teal-50.json" --gen 4 --prompt-len 8 --repeats 2 --threads 2 --json \
    >"$tmp/be.json" 2>"$tmp/err" && python3 - "$tmp/be.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["configs"][0]
assert j["dense"]["decode_tps"] > 0 and c["decode_tps"] > 0 and c["speedup_lo"] <= c["speedup"] <= c["speedup_hi"], c
assert 0.3 < c["in_sparsity"] < 0.7 and c["byte_bound"] > 1 and c["of_bound"] > 0, c
PY
  then ok; else bad "bench --thresholds --json: $(cat "$tmp/err")"; fi
  # bad inputs: one line naming the problem, exit 1, nothing written
  python3 - "$tmp/th/cats-50.json" "$tmp" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
d = sys.argv[2]
miss = dict(t); miss["layers"] = t["layers"][:29]; json.dump(miss, open(d + "/missing.json", "w"))
nan = json.loads(json.dumps(t)); nan["layers"][3]["act"] = "nan"; json.dump(nan, open(d + "/nan.json", "w"))
PY
  expect_error "layer 29 is missing" llm eval --model "$M" --text "$TXT" --ctx 64 --chunks 1 --thresholds "$tmp/missing.json"
  expect_error "layer 3" llm eval --model "$M" --text "$TXT" --ctx 64 --chunks 1 --thresholds "$tmp/nan.json"
  expect_error "made for another model" llm bench --model "$SRC/fuzz/seeds/llm/good_tiny_q40.gguf" --thresholds "$tmp/th/cats-50.json"
  printf 'Too short.' >"$tmp/short.txt"
  expect_error "shorter than one window" llm calibrate --model "$M" --text "$tmp/short.txt" --method cats --sparsity 0.5 --out "$tmp/short.json"
  if [ ! -e "$tmp/short.json" ]; then ok; else bad "a failed calibrate left $tmp/short.json"; fi
  expect_error "shorter than one window" llm eval --model "$M" --text "$tmp/short.txt" --thresholds "$tmp/th/cats-50.json"
fi
finish cli_llm_sparse
