#!/usr/bin/env bash
# The activation-sparsity sweep of issue 33 on one model: calibrate CATS, SATS and TEAL at 30..70%
# (and a router for some CATS/SATS levels) on King Lear + The Tempest, evaluate every configuration
# against the dense model on Hamlet (held out: no calibration token comes from it), time decode of
# the dense model and every configuration in interleaved rounds, and draw the charts
# (scripts/render_sparsity.py).
#
#   scripts/llm_sparsity_sweep.sh [options] OUT_DIR [MODEL.gguf]
#
#   --model FILE       the model (or the second argument, or $MODEL); default SmolLM2-135M
#                      (scripts/get-smollm2.sh installs it); Gemma 3 270M: bench/peers/.venv-llm/gemma3.gguf
#   --quick            8192 calibration tokens, 1 evaluation window, 3 rounds (a smoke run)
#   --no-bench         no timing
#   --tokens N         calibration tokens (default 51,200: 100 windows of 512)
#   --chunks N         evaluation windows of 512 Hamlet tokens (default 8: 2,040 scored predictions)
#   --repeats N        interleaved timing rounds of 64 decode steps (default 10)
#   --levels L         target sparsities in percent (default 30,40,50,60,70)
#   --router-levels L  the CATS/SATS levels that get a router (default 50,60,70; none: no router)
#   --taus F           router taus as multiples of the median per-layer proxy of its thresholds (the
#                      probe predicts the per-token proxy; default 1,2,4)
#   --skip-levels L    weight-byte fractions the page matches the methods at (render_sparsity.py's
#                      --skip-levels; default its own)
#
# Writes OUT_DIR/{thresholds/, calibrate.json, eval.json, bench.json, meta.json, sparsity.md, *.svg};
# progress on stderr. $TESSERA: the CLI (default build/tessera).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0 BENCH=1 MODEL=${MODEL:-} TOK= CHUNKS= REP= LEVELS=30,40,50,60,70 RLEVELS=50,60,70 TAUS=1,2,4 SKIP=
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --no-bench) BENCH=0; shift ;;
    --model|--tokens|--chunks|--repeats|--levels|--router-levels|--taus|--skip-levels)
      [ $# -ge 2 ] || { echo "llm_sparsity_sweep: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --model) MODEL=$2 ;; --tokens) TOK=$2 ;; --chunks) CHUNKS=$2 ;; --repeats) REP=$2 ;;
        --levels) LEVELS=$2 ;; --router-levels) RLEVELS=$2 ;; --taus) TAUS=$2 ;; --skip-levels) SKIP=$2 ;;
      esac
      shift 2 ;;
    -*) echo "llm_sparsity_sweep: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,25p' "$0" >&2; exit 2; }
OUT=$1
[ $# -ge 2 ] && MODEL=$2
[ -n "$MODEL" ] || MODEL=$("$ROOT/scripts/get-smollm2.sh")
[ -r "$MODEL" ] || { echo "llm_sparsity_sweep: model $MODEL is not a readable file" >&2; exit 2; }
TESSERA=${TESSERA:-$ROOT/build/tessera}
[ -x "$TESSERA" ] || { echo "llm_sparsity_sweep: $TESSERA not built (make, or set TESSERA)" >&2; exit 2; }
for v in "$LEVELS" "$TAUS" "${RLEVELS/#none/0}" "${SKIP:-0}"; do
  [[ $v =~ ^[0-9.]+(,[0-9.]+)*$ ]] || { echo "llm_sparsity_sweep: '$v' is not a comma-separated list of numbers" >&2; exit 2; }
done
for v in "${TOK:-1}" "${CHUNKS:-1}" "${REP:-1}"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "llm_sparsity_sweep: '$v' is not a positive integer" >&2; exit 2; }
done
DATA=$(dirname "$("$ROOT/scripts/get-llm-text.sh")")
HAMLET=$DATA/hamlet.txt
CALIB=$("$ROOT/scripts/get-llm-text.sh" --calib)
if [ $QUICK = 1 ]; then : "${TOK:=8192}" "${CHUNKS:=1}" "${REP:=3}"; else : "${TOK:=51200}" "${CHUNKS:=8}" "${REP:=10}"; fi
SPARS=$(python3 -c "import sys; print(','.join('%g' % (float(v) / 100) for v in sys.argv[1].split(',')))" "$LEVELS")
PCT=$(python3 -c "import sys; print(' '.join('%02d' % round(float(v)) for v in sys.argv[1].split(',')))" "$LEVELS")
mkdir -p "$OUT/thresholds"
echo "llm_sparsity_sweep: $(basename "$MODEL"), calibrating on $(basename "$CALIB") ($TOK tokens)" >&2
ROUTER=(--router)
[ "$RLEVELS" = none ] && ROUTER=()
"$TESSERA" llm calibrate --model "$MODEL" --text "$CALIB" --tokens "$TOK" --method cats,sats,teal \
  --sparsity "$SPARS" "${ROUTER[@]}" --svg "$OUT/sats-curves.svg" --out "$OUT/thresholds" --json > "$OUT/calibrate.json"
# one picture of the SATS proxy curves is enough: they are the same for every target but the marks
KEEP=50
[[ " $PCT " == *" 50 "* ]] || KEEP=${PCT%% *}
for s in $PCT; do [ "$s" = "$KEEP" ] || rm -f "$OUT/sats-curves-sats-$s.svg"; done
CFG=()
for m in cats sats teal; do
  for s in $PCT; do CFG+=(--config "$OUT/thresholds/$m-$s.json"); done
done
if [ "$RLEVELS" != none ]; then
  for m in cats sats; do
    for s in ${RLEVELS//,/ }; do
      s=$(printf '%02d' "$s")
      med=$(python3 -c "import json,sys; p=sorted(l['proxy'] for l in json.load(open(sys.argv[1]))['layers']); print(p[len(p)//2])" "$OUT/thresholds/$m-$s.json")
      for f in ${TAUS//,/ }; do
        tau=$(python3 -c "print($med * $f)")
        CFG+=(--config "$OUT/thresholds/$m-$s.json,$OUT/thresholds/$m-$s.router.json,$tau")
      done
    done
  done
fi
echo "llm_sparsity_sweep: evaluating $(( ${#CFG[@]} / 2 )) configurations on Hamlet ($CHUNKS windows)" >&2
"$TESSERA" llm eval --model "$MODEL" --text "$HAMLET" --chunks $CHUNKS "${CFG[@]}" --json > "$OUT/eval.json"
if [ $BENCH = 1 ]; then
  echo "llm_sparsity_sweep: timing decode, $REP interleaved rounds" >&2
  "$TESSERA" llm bench --model "$MODEL" --repeats $REP --gen 64 "${CFG[@]}" --json > "$OUT/bench.json"
fi
python3 "$ROOT/scripts/sweep_meta.py" "$OUT/meta.json" "$ROOT" "$MODEL" "scripts/llm_sparsity_sweep.sh $ARGS"
if [ -n "$SKIP" ]; then python3 "$ROOT/scripts/render_sparsity.py" "$OUT" --skip-levels "$SKIP"
else python3 "$ROOT/scripts/render_sparsity.py" "$OUT"; fi
echo "$OUT/sparsity.md"
