#!/usr/bin/env bash
# The activation-predictor sweep of issue 39 on a ReLU-gated model: perplexity of the ReLU model and
# its SiLU twin on Hamlet (held out of training and calibration), calibration of the sign-bit, Grasp
# and learned predictors at false-skip budgets on King Lear + The Tempest, evaluation of every
# predictor and the oracle against the dense model on Hamlet (perplexity, KL, measured confusion),
# interleaved decode timing, and the page (scripts/render_relu_pred.py).
#
#   scripts/relu_pred_sweep.sh [options] OUT_DIR
#
#   --model FILE    the ReLU model (default models/relu/shakespeare-relu.gguf)
#   --silu FILE     its SiLU twin (default models/relu/shakespeare-silu.gguf; "none": skip)
#   --fs LIST       false-skip budgets (default 0.005,0.01,0.02,0.05)
#   --tokens N      calibration tokens (default 16384: 32 windows of 512)
#   --chunks N      evaluation windows of 512 Hamlet tokens (default 8)
#   --repeats N     interleaved timing rounds of 64 decode steps (default 10)
#   --quick         2048 tokens, 1 window, 3 rounds
#   --no-bench      no timing
#
# Writes OUT_DIR/{pred/, calibrate.json, eval.json, bench.json, ppl-*.json, meta.json, curves.svg,
# relu-pred.md, *.svg}; progress on stderr. $TESSERA: the CLI (default build/tessera).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=$ROOT/models/relu/shakespeare-relu.gguf SILU=$ROOT/models/relu/shakespeare-silu.gguf
FS=0.005,0.01,0.02,0.05 TOK= CHUNKS= REP= QUICK=0 BENCH=1
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --no-bench) BENCH=0; shift ;;
    --model|--silu|--fs|--tokens|--chunks|--repeats)
      [ $# -ge 2 ] || { echo "relu_pred_sweep: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --model) MODEL=$2 ;; --silu) SILU=$2 ;; --fs) FS=$2 ;; --tokens) TOK=$2 ;; --chunks) CHUNKS=$2 ;; --repeats) REP=$2 ;;
      esac
      shift 2 ;;
    -*) echo "relu_pred_sweep: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
OUT=$1
[ -r "$MODEL" ] || { echo "relu_pred_sweep: model $MODEL is not a readable file (make relu-model)" >&2; exit 2; }
TESSERA=${TESSERA:-$ROOT/build/tessera}
[ -x "$TESSERA" ] || { echo "relu_pred_sweep: $TESSERA not built (make, or set TESSERA)" >&2; exit 2; }
[[ $FS =~ ^[0-9.]+(,[0-9.]+)*$ ]] || { echo "relu_pred_sweep: '$FS' is not a comma-separated list of numbers" >&2; exit 2; }
for v in "${TOK:-1}" "${CHUNKS:-1}" "${REP:-1}"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "relu_pred_sweep: '$v' is not a positive integer" >&2; exit 2; }
done
DATA=$(dirname "$("$ROOT/scripts/get-llm-text.sh")")
HAMLET=$DATA/hamlet.txt
CALIB=$("$ROOT/scripts/get-llm-text.sh" --calib)
if [ $QUICK = 1 ]; then : "${TOK:=2048}" "${CHUNKS:=1}" "${REP:=3}"; else : "${TOK:=16384}" "${CHUNKS:=8}" "${REP:=10}"; fi
mkdir -p "$OUT/pred"
echo "relu_pred_sweep: perplexity on Hamlet ($CHUNKS windows)" >&2
"$TESSERA" llm perplexity --model "$MODEL" --text "$HAMLET" --chunks "$CHUNKS" --json > "$OUT/ppl-relu.json"
[ "$SILU" != none ] && [ -r "$SILU" ] && "$TESSERA" llm perplexity --model "$SILU" --text "$HAMLET" --chunks "$CHUNKS" --json > "$OUT/ppl-silu.json"
echo "relu_pred_sweep: calibrating signbit, grasp, learned at false-skip $FS on $(basename "$CALIB") ($TOK tokens)" >&2
"$TESSERA" llm calibrate --model "$MODEL" --text "$CALIB" --tokens "$TOK" --method signbit,grasp,learned --false-skip "$FS" \
  --svg "$OUT/curves.svg" --out "$OUT/pred" --json > "$OUT/calibrate.json"
CFG=(--predictor oracle)
for m in signbit grasp learned; do
  for f in ${FS//,/ }; do CFG+=(--predictor "$m:$OUT/pred/$m-fs$(python3 -c "print('%04d' % round($f * 10000))").gguf"); done
done
echo "relu_pred_sweep: evaluating $(( ${#CFG[@]} / 2 )) predictors on Hamlet ($CHUNKS windows)" >&2
"$TESSERA" llm eval --model "$MODEL" --text "$HAMLET" --chunks "$CHUNKS" "${CFG[@]}" --json > "$OUT/eval.json"
if [ $BENCH = 1 ]; then
  echo "relu_pred_sweep: timing decode, $REP interleaved rounds" >&2
  "$TESSERA" llm bench --model "$MODEL" --repeats "$REP" --gen 64 "${CFG[@]}" --json > "$OUT/bench.json"
fi
python3 "$ROOT/scripts/sweep_meta.py" "$OUT/meta.json" "$ROOT" "$MODEL" "scripts/relu_pred_sweep.sh $ARGS"
python3 "$ROOT/scripts/render_relu_pred.py" "$OUT"
echo "$OUT/relu-pred.md"
