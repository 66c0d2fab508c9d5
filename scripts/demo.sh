#!/usr/bin/env bash
# The main job on its built-in default workload: measure the machine, then take a sparse attention
# mask whose tokens were shuffled (locality destroyed), recover its locality by reordering, extract
# dense blocks, draw the mask before and after, schedule variable tiles over the blocks and run
# the attention against the fixed-tile baselines, and finally a short ViT forward end to end.
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
echo "== 6. tile-scheduled sparse attention vs fixed tiles (8 heads, d=64)"
"$T" attn bench --pattern "$SPEC" --heads 8 --head-dim 64 --repeats 3

echo
echo "== 7. ViT end to end (DeiT-S, 512x512 -> 32x32 tokens, window2d k=13, 4 of 12 blocks)"
"$T" vit bench --model deit-s --res 512 --pattern window2d:k=13 --depth 4 --repeats 2

echo
echo "demo outputs are in $OUT/"
