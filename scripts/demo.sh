#!/usr/bin/env bash
# The main job on its built-in default workload: measure the machine, then take a sparse attention
# mask whose tokens were shuffled (locality destroyed), recover its locality by reordering, extract
# dense blocks, and draw the mask before and after.
set -euo pipefail
T=${1:-build/tessera}
OUT=${TS_DEMO_OUT:-demo-out}
mkdir -p "$OUT"
SPEC='permute:window2d:h=64,w=64,k=13,seed=7'

echo "== 1. machine profile (tessera hwinfo)"
"$T" hwinfo

echo
echo "== 2. a shuffled 64x64-token neighbourhood-attention mask: $SPEC"
"$T" pattern "$SPEC" --out "$OUT/mask.npy"

echo
echo "== 3. reorder it (RCM and iterative clustering), measure tiles"
"$T" reorder --pattern "$SPEC" --method rcm --out "$OUT/perm_rcm.npy"
"$T" reorder --pattern "$SPEC" --method ic --out "$OUT/perm_ic.npy"

echo
echo "== 4. dense blocks of the reordered mask"
"$T" blocks --pattern "$SPEC" --perm "$OUT/perm_ic.npy" --density 0.6 --tile 16

echo
echo "== 5. spy plot before/after: $OUT/spy.png"
"$T" spy --pattern "$SPEC" --method ic --out "$OUT/spy.png"
echo
echo "demo outputs are in $OUT/"
