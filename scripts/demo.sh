#!/usr/bin/env bash
# The main job on its built-in default workload: measure the machine, then take a sparse attention
# mask whose tokens were shuffled (locality destroyed), recover its locality by reordering, extract
# dense blocks, draw the mask before and after, schedule variable tiles over the blocks and run
# the attention against the fixed-tile baselines, and finally a short ViT forward end to end.
set -euo pipefail
T=${1:-build/tessera}
OUT=${TS_DEMO_OUT:-demo-out}
mkdir -p "$OUT"
SPEC='permute:vitdet:h=64,w=64,win=14,global=4,seed=7'

echo "== 1. machine profile (tessera hwinfo)"
"$T" hwinfo

echo
echo "== 2. a ViTDet-style mask (14x14 windows + 4 global tokens) on a 64x64 token grid, tokens shuffled: $SPEC"
"$T" pattern "$SPEC" --out "$OUT/mask.npy"

echo
echo "== 3. reorder it (RCM and hierarchical clustering), measure tiles"
"$T" reorder --pattern "$SPEC" --method rcm --out "$OUT/perm_rcm.npy"
"$T" reorder --pattern "$SPEC" --method hc --out "$OUT/perm_hc.npy"

echo
echo "== 4. dense blocks of the reordered mask"
"$T" blocks --pattern "$SPEC" --perm "$OUT/perm_hc.npy" --density 0.6 --tile 16

echo
echo "== 5. spy plot before/after: $OUT/spy.png"
"$T" spy --pattern "$SPEC" --method rcm,hc --out "$OUT/spy.png"
echo
echo "== 6. tile-scheduled sparse attention vs fixed tiles (8 heads, d=64; the quick tile profile, < 1 s:"
echo "      'tessera attn bench' measures the standard one, 20-60 s, the first time it runs on a machine)"
"$T" attn bench --pattern "$SPEC" --heads 8 --head-dim 64 --repeats 3 --profile-level quick

echo
echo "== 7. ViT end to end (DeiT-S, 1024x1024 -> 64x64 tokens, ViTDet windows + global tokens, 2 of 12 blocks)"
"$T" vit bench --model deit-s --res 1024 --pattern vitdet:win=14,global=4 --depth 2 --repeats 2 --profile-level quick

echo
echo "demo outputs are in $OUT/"
