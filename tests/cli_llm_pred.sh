#!/usr/bin/env bash
# tessera llm calibrate --method signbit|grasp|learned and eval | bench --predictor (activation
# predictors, issue 39) on the committed ReLU model (models/relu/shakespeare-relu.gguf): usage
# errors exit 2 (alpha out of range, learned without its file, a budget out of range); a SiLU
# model with --predictor signbit is a one-line error naming ReLU; calibration on a short text
# writes one predictor file per method with its knobs, eval reports each predictor's measured
# confusion, bench its speed and cost, and a predictor made for another model is refused.
# Usage: cli_llm_pred.sh path/to/tessera   (TESSERA_SRC points at the repository root)
set -u
T=${1:?usage: cli_llm_pred.sh path/to/tessera}
SRC=${TESSERA_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE=${TESSERA_CACHE:-$tmp/cache} TESSERA_QUIET=1
M=$SRC/models/relu/shakespeare-relu.gguf
SILU=$SRC/fuzz/seeds/llm/good_tiny_q40.gguf
TXT=$SRC/docs/ARCHITECTURE.md

expect_usage llm bench --model "$M" --predictor signbit --alpha 50
expect_usage llm bench --model "$M" --predictor signbit --alpha 0
expect_usage llm bench --model "$M" --predictor learned
expect_usage llm bench --model "$M" --predictor magic
expect_usage llm bench --model "$M" --predictor grasp --alpha 1.5
expect_usage llm calibrate --model "$M" --text "$TXT" --method signbit --out x
expect_usage llm calibrate --model "$M" --text "$TXT" --method signbit --false-skip 0.9 --out x
expect_usage llm calibrate --model "$M" --text "$TXT" --method signbit,cats --false-skip 0.01 --sparsity 0.5 --out x

expect_error "ReLU" llm bench --model "$SILU" --predictor signbit
expect_error "ReLU" llm calibrate --model "$SILU" --text "$TXT" --method grasp --false-skip 0.01 --out "$tmp/x.gguf"

if [ ! -r "$M" ]; then
  bad "$M is missing (models/relu/make.sh rebuilds it)"
else
  if "$T" llm calibrate --model "$M" --text "$TXT" --tokens 1024 --window 256 --method signbit,grasp,learned --false-skip 0.02 \
    --hidden 16 --svg "$tmp/curves.svg" --out "$tmp/p" --threads 2 --json >"$tmp/cal.json" 2>"$tmp/err" &&
    python3 - "$tmp/cal.json" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
ks = [p["predictor"] for p in j["predictors"]]
assert ks == ["signbit", "grasp", "learned"], ks
for p in j["predictors"]:
    assert os.path.getsize(p["out"]) > 0 and len(p["knob"]) == 6, p
    assert all(f <= 0.02 + 1e-12 for f in p["layer_false_skip"]), p["layer_false_skip"]
    assert all(0 <= e <= 1 for e in p["layer_efficiency"]), p
assert len(j["curves"]) == 3 and len(j["curves"][0]["layer_efficiency"]) == 6
PY
  then ok; else bad "calibrate: $(cat "$tmp/err")"; fi
  [ -s "$tmp/curves.svg" ] && grep -q "<svg" "$tmp/curves.svg" && ok || bad "no curves SVG"
  if "$T" llm eval --model "$M" --text "$TXT" --ctx 64 --chunks 1 --predictor oracle --predictor "grasp:$tmp/p/grasp-fs0200.gguf" \
    --predictor signbit --alpha 1.03 --threads 2 --json >"$tmp/ev.json" 2>"$tmp/err" &&
    python3 - "$tmp/ev.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["configs"]
assert [x["predictor"] for x in c] == ["oracle", "grasp", "signbit"], c
assert abs(c[0]["ppl"] / j["dense"]["ppl"] - 1) < 0.01, (c[0]["ppl"], j["dense"]["ppl"])
for x in c[1:]:
    assert 0 <= x["false_skip"] <= 1 and 0 <= x["efficiency"] <= 1 and 0 < x["pred_active"] <= 1, x
    assert x["actual_zero"] > 0.5, x
assert abs(c[2]["knob"][0] - 1.03) < 1e-6
PY
  then ok; else bad "eval: $(cat "$tmp/err")"; fi
  if "$T" llm bench --model "$M" --predictor "signbit:$tmp/p/signbit-fs0200.gguf" --repeats 1 --gen 4 --prompt-len 8 --threads 2 --json \
    >"$tmp/b.json" 2>"$tmp/err" &&
    python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['configs'][0]; assert c['decode_tps'] > 0 and c['pred_of_dense_mlp'] > 0, c" "$tmp/b.json"
  then ok; else bad "bench: $(cat "$tmp/err")"; fi
  expect_error "made for model" llm bench --model "$SRC/models/relu/shakespeare-silu.gguf" --predictor "learned:$tmp/p/learned-fs0200.gguf"
  expect_error "holds a grasp predictor" llm bench --model "$M" --predictor "signbit:$tmp/p/grasp-fs0200.gguf"
  expect_error "predictor.format" llm bench --model "$M" --predictor "signbit:$M"
fi
finish cli_llm_pred
