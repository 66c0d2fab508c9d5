#!/usr/bin/env bash
# Runs the issue-2..7 benchmark commands with two builds of the CLI, alternating A, B, A, B per
# command (each build with its own cache directory: their formats may differ), and keeps every
# JSON report for comparison of the in-process ratios. Used for issue 30's "no ratio worse" check.
#
#   scripts/ab-builds.sh A/tessera B/tessera OUTDIR [ROUNDS]     (ROUNDS default 2)
#
# The GGUF model for the LLM command: $TESSERA_SMOLLM2, else bench/peers/.venv-llm/smollm2.gguf
# (scripts/get-smollm2.sh); the LLM command is skipped without it. AB_ONLY="vit llm" runs only
# the commands named.
set -euo pipefail
A=$1 B=$2 OUT=$3 ROUNDS=${4:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
M=${TESSERA_SMOLLM2:-$ROOT/bench/peers/.venv-llm/smollm2.gguf}
mkdir -p "$OUT/cache-a" "$OUT/cache-b"
export OMP_WAIT_POLICY=passive TESSERA_QUIET=1
cmds=(
  "attn:attn bench --pattern window2d:h=32,w=32,k=7 --heads 8 --head-dim 64 --threads 2 --repeats 5 --json"
  "attn-swin:attn bench --pattern swin:h=32,w=32,win=8,shift=1 --heads 8 --head-dim 64 --threads 2 --repeats 5 --json"
  "vit:vit bench --model deit-s --res 512 --pattern window2d:k=7 --depth 2 --repeats 3 --threads 2 --json"
  "gconv:gconv bench --model condensenet --connectivity unstructured --layers 1-6 --solver greedy --threads 2 --json"
  "conv:conv bench --model resnet50 --batch 1 --threads 2 --no-e2e --repeats 3 --min-time 20 --json"
)
[ -f "$M" ] && cmds+=("llm:llm bench --model $M --threads 2 --prompt-len 64 --gen 64 --repeats 3 --json")
for side in a b; do # each build's machine profile first, so no timed run pays for it
  bin=$A; [ $side = b ] && bin=$B
  TESSERA_CACHE=$OUT/cache-$side "$bin" hwinfo --threads 2 >/dev/null
done
for c in "${cmds[@]}"; do
  name=${c%%:*} args=${c#*:}
  if [ -n "${AB_ONLY:-}" ] && [[ " $AB_ONLY " != *" $name "* ]]; then continue; fi
  for r in $(seq 1 "$ROUNDS"); do
    for side in a b; do
      bin=$A; [ $side = b ] && bin=$B
      echo "ab: $name round $r build $side" >&2
      # shellcheck disable=SC2086
      TESSERA_CACHE=$OUT/cache-$side "$bin" $args >"$OUT/$name.$side.$r.json" 2>"$OUT/$name.$side.$r.err" ||
        echo "ab: $name $side $r exited $?" >&2
    done
  done
done
