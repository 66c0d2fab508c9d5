#!/usr/bin/env bash
# The activation-sparsity sweep of issue 33 on one model: calibrate CATS, SATS and TEAL at 30..70%
# (and a router for each CATS/SATS level) on King Lear + The Tempest, evaluate every configuration
# against the dense model on Hamlet (held out: no calibration token comes from it), time decode of
# the dense model and every configuration in interleaved rounds, and draw the charts
# (scripts/render_sparsity.py).
#
#   scripts/llm_sparsity_sweep.sh [--quick] [--no-bench] OUT_DIR [MODEL.gguf]
#
# MODEL defaults to SmolLM2-135M (scripts/get-smollm2.sh installs it). --quick: 8192 calibration
# tokens, 1 evaluation window, 3 rounds (a smoke run); otherwise 51,200 calibration tokens (100
# windows of 512), 8 evaluation windows of 512 (2,044 scored predictions), 10 rounds of 64 decode
# steps. Routers: each CATS/SATS router at tau = 1, 2 and 4 x the median per-layer proxy of its
# thresholds (the probe predicts the per-token proxy). Writes OUT_DIR/{thresholds/, eval.json,
# bench.json, meta.json, sparsity.md, *.svg}; progress on stderr.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0 BENCH=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --no-bench) BENCH=0; shift ;;
    -*) echo "llm_sparsity_sweep: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
OUT=$1
MODEL=${2:-$("$ROOT/scripts/get-smollm2.sh")}
TESSERA=${TESSERA:-$ROOT/build/tessera}
[ -x "$TESSERA" ] || { echo "llm_sparsity_sweep: $TESSERA not built (make, or set TESSERA)" >&2; exit 2; }
DATA=$(dirname "$("$ROOT/scripts/get-llm-text.sh")")
HAMLET=$DATA/hamlet.txt
CALIB=$("$ROOT/scripts/get-llm-text.sh" --calib)
if [ $QUICK = 1 ]; then TOK=8192 CHUNKS=1 REP=3; else TOK=51200 CHUNKS=8 REP=10; fi
mkdir -p "$OUT/thresholds"
echo "llm_sparsity_sweep: calibrating on $(basename "$CALIB") ($TOK tokens)" >&2
"$TESSERA" llm calibrate --model "$MODEL" --text "$CALIB" --tokens $TOK --method cats,sats,teal \
  --sparsity 0.3,0.4,0.5,0.6,0.7 --router --svg "$OUT/sats-curves.svg" --out "$OUT/thresholds" --json > "$OUT/calibrate.json"
# one picture of the SATS proxy curves is enough: they are the same for every target but the marks
for s in 30 40 60 70; do rm -f "$OUT/sats-curves-sats-$s.svg"; done
CFG=()
for m in cats sats teal; do
  for s in 30 40 50 60 70; do CFG+=(--config "$OUT/thresholds/$m-$s.json"); done
done
for m in cats sats; do
  for s in 50 60 70; do
    med=$(python3 -c "import json,sys; p=sorted(l['proxy'] for l in json.load(open(sys.argv[1]))['layers']); print(p[len(p)//2])" "$OUT/thresholds/$m-$s.json")
    for f in 1 2 4; do
      tau=$(python3 -c "print($med * $f)")
      CFG+=(--config "$OUT/thresholds/$m-$s.json,$OUT/thresholds/$m-$s.router.json,$tau")
    done
  done
done
echo "llm_sparsity_sweep: evaluating $(( ${#CFG[@]} / 2 )) configurations on Hamlet ($CHUNKS windows)" >&2
"$TESSERA" llm eval --model "$MODEL" --text "$HAMLET" --chunks $CHUNKS "${CFG[@]}" --json > "$OUT/eval.json"
if [ $BENCH = 1 ]; then
  echo "llm_sparsity_sweep: timing decode, $REP interleaved rounds" >&2
  "$TESSERA" llm bench --model "$MODEL" --repeats $REP --gen 64 "${CFG[@]}" --json > "$OUT/bench.json"
fi
python3 - "$OUT/meta.json" "$ROOT" "$MODEL" <<'EOF'
import json, os, subprocess, sys, datetime
root = sys.argv[2]
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump({"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "commit": commit + ("+" if dirty else ""),
           "machine": f"{cpu}, {os.cpu_count()} CPUs", "command": "scripts/llm_sparsity_sweep.sh " + " ".join(sys.argv[1:2]),
           "model": os.path.basename(sys.argv[3])}, open(sys.argv[1], "w"), indent=1)
EOF
python3 "$ROOT/scripts/render_sparsity.py" "$OUT"
echo "$OUT/sparsity.md"
