#!/usr/bin/env bash
# tessera gguf: prints metadata and the tensor table of a small GGUF seed, --json is valid JSON with
# the same content, a malformed file fails with exit 1 and one clear line, bad usage exits 2.
# Usage: cli_gguf.sh path/to/tessera   (TESSERA_SRC points at the repository root)
set -u
T=${1:?usage: cli_gguf.sh path/to/tessera}
SRC=${TESSERA_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
SEEDS=$SRC/fuzz/seeds/gguf
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"

if "$T" gguf "$SEEDS/good_all_types.gguf" >"$tmp/out" 2>"$tmp/err"; then ok; else bad "gguf exited $?: $(cat "$tmp/err")"; fi
for want in "general.architecture" '"llama"' "string[3]" "blk.0.w5" "q4_1" "totals per type" "bf16"; do
  if grep -qF -- "$want" "$tmp/out"; then ok; else bad "text output lacks '$want'"; fi
done

# metadata strings are bytes, not always UTF-8: --json stays valid JSON (each invalid byte U+FFFD),
# keys and values alike
python3 - "$tmp/bad_utf8.gguf" <<'PY'
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
kv = s(b"general.name") + struct.pack("<I", 8) + s(b"caf\xc3\xa9 \xff\xfe end\xe2\x82")
kv += s(b"bad.\x80key") + struct.pack("<I", 4) + struct.pack("<I", 7)
open(sys.argv[1], "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv)
PY
if "$T" gguf "$tmp/bad_utf8.gguf" --json >"$tmp/bad.json" 2>"$tmp/err" &&
  python3 - "$tmp/bad.json" <<'PY'
import json, sys
m = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))["metadata"]
assert m["general.name"] == "caf\u00e9 \ufffd\ufffd end\ufffd\ufffd", m["general.name"]
assert m["bad.\ufffdkey"] == 7, m
PY
then ok; else bad "invalid UTF-8 metadata: $(cat "$tmp/err" "$tmp/bad.json" 2>/dev/null | head -c 400)"; fi

if "$T" gguf "$SEEDS/good_align64.gguf" --json >"$tmp/out.json" 2>"$tmp/err"; then ok; else bad "--json exited $?"; fi
if python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["version"] == 3 and j["alignment"] == 64, (j["version"], j["alignment"])
m = j["metadata"]
assert m["general.architecture"] == "llama"
assert m["llama.block_count"] == 30
assert m["general.alignment"] == 64
assert m["tokenizer.ggml.tokens"]["count"] == 3 and m["tokenizer.ggml.tokens"]["values"][0] == "<s>"
names = [t["name"] for t in j["tensors"]]
assert names == [f"blk.0.w{i}" for i in range(6)], names
q41 = [t for t in j["tensors"] if t["type"] == "q4_1"][0]
assert q41["ne"] == [32, 2] and q41["bytes"] == 40, q41
assert j["totals"]["q8_0"]["tensors"] == 1
PY
then ok; else bad "--json content"; fi

# abbreviation of long arrays
if "$T" gguf "$SEEDS/good_all_types.gguf" --max-array 1 | grep -qF '["<s>", ...]'; then ok; else bad "--max-array 1"; fi

# malformed and missing files: exit 1, one line naming the problem
"$T" gguf "$SEEDS/bad_magic.gguf" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "bad magic" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then ok; else bad "bad magic: rc=$rc $(cat "$tmp/err")"; fi
head -c 200 "$SEEDS/good_all_types.gguf" >"$tmp/cut.gguf"
"$T" gguf "$tmp/cut.gguf" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "truncated" "$tmp/err"; then ok; else bad "truncated: rc=$rc $(cat "$tmp/err")"; fi
"$T" gguf "$tmp/none.gguf" >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ]; then ok; else bad "missing file should exit 1"; fi

# usage
"$T" gguf >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ]; then ok; else bad "no FILE should exit 2"; fi
"$T" gguf a b >/dev/null 2>&1
if [ $? -eq 2 ]; then ok; else bad "two FILEs should exit 2"; fi
"$T" gguf --bogus x >/dev/null 2>&1
if [ $? -eq 2 ]; then ok; else bad "unknown option should exit 2"; fi
if "$T" gguf --help | grep -q "usage: tessera gguf"; then ok; else bad "--help"; fi

finish cli_gguf
