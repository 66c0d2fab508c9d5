#!/usr/bin/env bash
# tessera llm convert: a small safetensors + metadata JSON (written here by python3's standard
# library) converts to a GGUF that `tessera gguf` reads back with the right types, shapes and keys;
# --json is valid JSON; bad usage exits 2 with one line, bad or missing files exit 1 naming the file.
# Usage: cli_llm_convert.sh path/to/tessera
set -u
T=${1:?usage: cli_llm_convert.sh path/to/tessera}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
command -v python3 >/dev/null || skip_all "python3 not found"

# a 64-wide F32 matrix (quantized), an F16 matrix of rows 40 (stays f32 under q8_0), a 1-D norm
python3 - "$tmp/m.safetensors" "$tmp/m.meta.json" <<'PY'
import json, struct, sys
def f32(xs): return struct.pack("<%df" % len(xs), *xs)
def f16(xs): return struct.pack("<%de" % len(xs), *xs)
ts = [("blk.0.ffn_up.weight", "F32", [4, 64], f32([((i * 37) % 101 - 50) / 25.0 for i in range(256)])),
      ("blk.0.odd.weight", "F16", [2, 40], f16([i / 8.0 for i in range(80)])),
      ("blk.0.ffn_norm.weight", "F32", [64], f32([1.0 + i / 64.0 for i in range(64)]))]
hdr, data = {"__metadata__": {"format": "pt"}}, b""
for name, dt, shape, raw in ts:
    hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + data)
kv = [["general.architecture", "str", "llama"], ["llama.block_count", "u32", 1],
      ["llama.rope.freq_base", "f32", 10000.0], ["tessera.ffn_activation", "str", "relu"],
      ["tokenizer.ggml.tokens", "str[]", ["a", "b", "\"q\""]], ["tokenizer.ggml.token_type", "i32[]", [1, 1, 3]],
      ["tokenizer.ggml.add_bos_token", "bool", True]]
json.dump({"kv": kv}, open(sys.argv[2], "w"))
PY
[ -s "$tmp/m.safetensors" ] || skip_all "could not write the input files"

if "$T" llm convert --safetensors "$tmp/m.safetensors" --meta "$tmp/m.meta.json" --type q8_0 --out "$tmp/m.gguf" \
  >"$tmp/out" 2>"$tmp/err"; then ok; else bad "convert exited $?: $(cat "$tmp/err")"; fi
if grep -qF "3 tensors (2 f32, 1 q8_0)" "$tmp/out" && [ "$(wc -l <"$tmp/out")" -eq 1 ]; then ok; else bad "summary: $(cat "$tmp/out")"; fi
if "$T" gguf "$tmp/m.gguf" --json >"$tmp/g.json" 2>"$tmp/err" && python3 - "$tmp/g.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in j["tensors"]}
assert t["blk.0.ffn_up.weight"]["type"] == "q8_0" and t["blk.0.ffn_up.weight"]["ne"] == [64, 4], t
assert t["blk.0.odd.weight"]["type"] == "f32" and t["blk.0.odd.weight"]["ne"] == [40, 2], t
assert t["blk.0.ffn_norm.weight"]["type"] == "f32" and t["blk.0.ffn_norm.weight"]["ne"] == [64], t
m = j["metadata"]
assert m["tessera.ffn_activation"] == "relu" and m["llama.block_count"] == 1 and m["general.file_type"] == 7, m
assert m["tokenizer.ggml.tokens"]["values"] == ["a", "b", "\"q\""], m
assert m["tokenizer.ggml.add_bos_token"] is True, m
PY
then ok; else bad "converted file: $(cat "$tmp/err")"; fi

# --json report
if "$T" llm convert --safetensors "$tmp/m.safetensors" --meta "$tmp/m.meta.json" --type f16 --out "$tmp/h.gguf" --json \
  >"$tmp/r.json" 2>"$tmp/err" && python3 - "$tmp/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["tensors"] == 3 and r["params"] == 256 + 80 + 64 and r["type"] == "f16", r
assert r["types"]["f16"]["tensors"] == 2 and r["types"]["f32"]["tensors"] == 1, r
assert r["bytes"] > 0 and r["kv"] == 8, r
PY
then ok; else bad "--json: $(cat "$tmp/err" "$tmp/r.json" 2>/dev/null | head -c 400)"; fi

# bad and missing files: exit 1, one line naming the file; no output left behind
head -c 100 "$tmp/m.safetensors" >"$tmp/cut.safetensors"
"$T" llm convert --safetensors "$tmp/cut.safetensors" --meta "$tmp/m.meta.json" --type q8_0 --out "$tmp/cut.gguf" \
  >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "cut.safetensors" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -e "$tmp/cut.gguf" ]; then ok
else bad "truncated input: rc=$rc $(cat "$tmp/err")"; fi
"$T" llm convert --safetensors "$tmp/none.safetensors" --meta "$tmp/m.meta.json" --type q8_0 --out "$tmp/x.gguf" \
  >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "none.safetensors" "$tmp/err"; then ok; else bad "missing input: rc=$rc $(cat "$tmp/err")"; fi
echo '{"kv": [["a", "u32", -1]]}' >"$tmp/bad.json"
"$T" llm convert --safetensors "$tmp/m.safetensors" --meta "$tmp/bad.json" --type q8_0 --out "$tmp/x.gguf" \
  >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "bad.json: kv\[0\] 'a'" "$tmp/err" && [ ! -e "$tmp/x.gguf" ]; then ok
else bad "bad meta: rc=$rc $(cat "$tmp/err")"; fi

# usage
S=(--safetensors "$tmp/m.safetensors" --meta "$tmp/m.meta.json")
expect_usage llm convert
expect_usage llm convert "${S[@]}" --type q8_0
expect_usage llm convert "${S[@]}" --type q5_0 --out "$tmp/x.gguf"
expect_usage llm convert "${S[@]}" --type q8_0 --out "$tmp/x.gguf" --bogus
expect_usage llm convert "${S[@]}" --meta "$tmp/m.meta.json" --type q8_0 --out "$tmp/x.gguf"
expect_usage llm convert "${S[@]}" --type
if "$T" llm convert --help | grep -q "usage: tessera llm convert"; then ok; else bad "--help"; fi

finish cli_llm_convert
