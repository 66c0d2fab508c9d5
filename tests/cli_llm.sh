#!/usr/bin/env bash
# tessera llm: usage errors exit 2, a GGUF that is not a LLaMA model or a missing file exit 1 with
# one line naming the problem; with the real SmolLM2 model present ($TESSERA_SMOLLM2, else
# bench/peers/.venv-llm/smollm2.gguf; .ci/run installs it; without it that part says SKIPPED): info, tokenize, greedy
# generate (llama.cpp's first 8 tokens), logits to .npy, perplexity and bench JSON fields.
# Usage: cli_llm.sh path/to/tessera   (TESSERA_SRC points at the repository root)
set -u
T=${1:?usage: cli_llm.sh path/to/tessera}
SRC=${TESSERA_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE=${TESSERA_CACHE:-$tmp/cache} TESSERA_QUIET=1

# usage: exit 2
for args in "" "bogus" "generate" "generate --model x --bogus 1" "info --model x --prompt y" "bench --model x --gen 0" \
  "bench --model x --adaptive-threads maybe" "perplexity --model x --text y --adaptive-threads on"; do
  # shellcheck disable=SC2086
  "$T" llm $args >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] || { [ -z "$args" ] && [ $rc -eq 0 ]; }; then ok; else bad "llm $args: rc=$rc $(cat "$tmp/err")"; fi
done
if "$T" llm --help | grep -q "tessera llm perplexity"; then ok; else bad "--help"; fi

# a valid GGUF that is no LLaMA model, a missing file: exit 1, one line
"$T" llm info --model "$SRC/fuzz/seeds/gguf/good_all_types.gguf" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "llama.embedding_length is missing" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then ok
else bad "non-model GGUF: rc=$rc $(cat "$tmp/err")"; fi
"$T" llm info --model "$tmp/none.gguf" >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && grep -q "none.gguf" "$tmp/err"; then ok; else bad "missing model: $(cat "$tmp/err")"; fi

# bench on the tiny model the fuzzer seeds with (every run, CI too): the JSON figures, including the
# kernels' own streaming rate over the weights (stream_gbs) beside the read test
TINY="$SRC/fuzz/seeds/llm/good_tiny_q40.gguf"
if "$T" llm bench --model "$TINY" --prompt-len 4 --gen 2 --repeats 1 --bw-seconds 0.05 --threads 2 --json >"$tmp/tb.json" 2>"$tmp/err" &&
  python3 - "$tmp/tb.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("prefill_tps", "decode_tps", "gbs", "bandwidth_gbs_run", "pct_bandwidth_run", "stream_gbs", "pct_stream"):
    assert k in j and j[k] > 0, (k, j.get(k))
assert abs(j["pct_stream"] - 100 * j["gbs"] / j["stream_gbs"]) < 1e-6 * j["pct_stream"], j
PY
then ok; else bad "bench on the tiny model: $(cat "$tmp/tb.json" "$tmp/err")"; fi
"$T" llm bench --model "$TINY" --prompt-len 4 --gen 2 --repeats 1 --bw-seconds 0 --json >"$tmp/tb0.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert "stream_gbs" not in j and "bandwidth_gbs_run" not in j, j' "$tmp/tb0.json" &&
  ok || bad "bench --bw-seconds 0 still measured: $(cat "$tmp/tb0.json" "$tmp/err")"

# generate without --ctx stops at the model's training context (the tiny model's is 256 tokens) and
# says so; --ctx past it runs, with a note
if "$T" llm generate --model "$TINY" --prompt "ab" -n 5000 --json >"$tmp/cap.json" 2>"$tmp/err" &&
  grep -q "up to the model's 256-token training context" "$tmp/err" &&
  python3 - "$tmp/cap.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
n = len(j["prompt_tokens"]) + len(j["tokens"])
assert n <= 256 and (j["stopped"] or n == 256), (n, j["stopped"])
PY
then ok; else bad "generate -n 5000 on a 256-token model: $(cat "$tmp/err")"; fi
if "$T" llm generate --model "$TINY" --prompt "ab" -n 3 --ctx 300 >/dev/null 2>"$tmp/err" &&
  grep -q "300-token context exceeds the model's 256-token training context" "$tmp/err"; then ok
else bad "generate --ctx 300 on a 256-token model: $(cat "$tmp/err")"; fi

M=${TESSERA_SMOLLM2:-$SRC/bench/peers/.venv-llm/smollm2.gguf}
if [ ! -r "$M" ] && [ -n "${TESSERA_SMOLLM2:-}" ]; then
  bad "TESSERA_SMOLLM2=$TESSERA_SMOLLM2 is not a readable file"
elif [ ! -r "$M" ]; then
  skip_part "cli_llm: SmolLM2 GGUF not found (scripts/get-smollm2.sh): the real-model checks"
else
  if "$T" llm info --model "$M" --json >"$tmp/info.json" && python3 - "$tmp/info.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["n_layer"] == 30 and j["d_model"] == 576 and j["n_vocab"] == 49152 and j["tied_output"], j
PY
  then ok; else bad "info --json"; fi
  # llama.cpp's ids and greedy continuation (bench/peers/llm_llamacpp.py --check)
  if "$T" llm generate --model "$M" --prompt "The capital of France is" -n 8 --threads 2 --json >"$tmp/gen.json" &&
    python3 - "$tmp/gen.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["prompt_tokens"] == [504, 3575, 282, 4649, 314], j["prompt_tokens"]
assert j["tokens"] == [7042, 30, 198, 198, 504, 1797, 1918, 553], j["tokens"]
assert j["text"].startswith(" Paris."), j["text"]
PY
  then ok; else bad "generate: $(cat "$tmp/gen.json")"; fi
  printf 'caf\xc3\xa9 \xe2\x82\xac 42\n  spaces' >"$tmp/t.txt"
  if "$T" llm tokenize --model "$M" --file "$tmp/t.txt" --json | grep -q '"ids"'; then ok; else bad "tokenize"; fi
  if "$T" llm logits --model "$M" --prompt "Hello world" --out "$tmp/z.npy" --json >/dev/null &&
    [ "$(stat -c %s "$tmp/z.npy")" -eq $((128 + 2 * 49152 * 4)) ]; then ok; else bad "logits .npy"; fi
  for i in $(seq 40); do printf 'The quick brown fox jumps over the lazy dog. ' >>"$tmp/text.txt"; done
  # the sanitizer build (TESSERA_SANITIZE=1) scores one 32-token window: its prefill runs ~2 tokens/s there
  if [ "${TESSERA_SANITIZE:-0}" = 1 ]; then ppl=(--ctx 32 --chunks 1) want="1 15"; else ppl=(--ctx 64 --chunks 2) want="2 62"; fi
  if "$T" llm perplexity --model "$M" --text "$tmp/text.txt" "${ppl[@]}" --json >"$tmp/ppl.json" &&
    python3 - "$tmp/ppl.json" $want <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["chunks"] == int(sys.argv[2]) and j["scored"] == int(sys.argv[3]) and 1.0 < j["ppl"] < 3.0, j
PY
  then ok; else bad "perplexity: $(cat "$tmp/ppl.json")"; fi
  if "$T" llm bench --model "$M" --prompt-len 8 --gen 4 --repeats 1 --bw-seconds 0 --adaptive-threads off --json >"$tmp/bench.json" &&
    python3 - "$tmp/bench.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("prefill_tps", "decode_tps", "bytes_per_token", "gbs", "pct_bandwidth"):
    assert k in j, k
w = j["weight_bytes_per_token"]
assert 96.5e6 < w < 96.7e6, w
assert j["kv_bytes_per_token"] == 23040 * (8 + 2.5), j["kv_bytes_per_token"]
assert j["adaptive_threads"] is False and j["decode_solo_share"] == 0, (j["adaptive_threads"], j["decode_solo_share"])
PY
  then ok; else bad "bench --json: $(cat "$tmp/bench.json")"; fi
fi

# Gemma 3 270M when present (scripts/get-gemma3.sh; $TESSERA_GEMMA3 makes it required): info and
# llama.cpp's greedy continuation (bench/peers/llm_llamacpp.py --check: 64 tokens identical), and
# outside the sanitizer build perplexity and bench JSON (262144-token vocabulary: slow under ASan)
G=${TESSERA_GEMMA3:-$SRC/bench/peers/.venv-llm/gemma3.gguf}
if [ ! -r "$G" ] && [ -n "${TESSERA_GEMMA3:-}" ]; then
  bad "TESSERA_GEMMA3=$TESSERA_GEMMA3 is not a readable file"
elif [ ! -r "$G" ]; then
  skip_part "cli_llm: Gemma 3 GGUF not found (scripts/get-gemma3.sh): the gemma3 checks"
else
  if "$T" llm info --model "$G" --json >"$tmp/ginfo.json" && python3 - "$tmp/ginfo.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["arch"] == "gemma3" and j["n_layer"] == 18 and j["head_dim"] == 256 and j["n_vocab"] == 262144, j
assert j["sliding_window"] == 512 and j["sliding_window_layers"] == 15 and j["rope_base_swa"] == 10000, j
PY
  then ok; else bad "gemma3 info --json: $(cat "$tmp/ginfo.json")"; fi
  if "$T" llm generate --model "$G" --prompt "The capital of France is" -n 8 --threads 2 --json >"$tmp/ggen.json" &&
    python3 - "$tmp/ggen.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["prompt_tokens"] == [2, 818, 5279, 529, 7001, 563], j["prompt_tokens"]
assert j["tokens"] == [506, 5279, 529, 506, 2891, 529, 7001, 236761], j["tokens"]
assert j["text"] == " the capital of the country of France.", j["text"]
PY
  then ok; else bad "gemma3 generate: $(cat "$tmp/ggen.json")"; fi
  if [ "${TESSERA_SANITIZE:-0}" != 1 ]; then
    for i in $(seq 20); do printf 'The quick brown fox jumps over the lazy dog. ' >>"$tmp/gtext.txt"; done
    if "$T" llm perplexity --model "$G" --text "$tmp/gtext.txt" --ctx 64 --chunks 1 --json >"$tmp/gppl.json" &&
      python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["chunks"] == 1 and j["scored"] == 31 and 1.0 < j["ppl"] < 3.0, j' "$tmp/gppl.json"
    then ok; else bad "gemma3 perplexity: $(cat "$tmp/gppl.json")"; fi
    if "$T" llm bench --model "$G" --prompt-len 8 --gen 2 --repeats 1 --bw-seconds 0 --json >"$tmp/gbench.json" &&
      python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["prefill_tps"] > 0 and j["decode_tps"] > 0 and 246e6 < j["weight_bytes_per_token"] < 247e6, j' "$tmp/gbench.json"
    then ok; else bad "gemma3 bench --json: $(cat "$tmp/gbench.json")"; fi
  fi
fi

finish cli_llm
