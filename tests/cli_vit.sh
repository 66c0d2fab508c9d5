#!/usr/bin/env bash
# tessera vit bench: a quick run (deit-s, res 128 = 8x8 tokens, depth 1) prints JSON with every
# report field and sane values (the three backends agree on the logits), text mode works, --help
# exits 0, and bad usage (unknown model, resolution not a multiple of 16, bad pattern, missing
# options) exits 2 with one line on stderr.
# Usage: cli_vit.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_vit.sh path/to/tessera}
export TESSERA_QUIET=1 OMP_WAIT_POLICY=passive
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE="$tmp/cache" # the scheduled plan is cached: start empty

if "$T" vit bench --cost analytic --model deit-s --res 128 --pattern window2d:k=3 --depth 1 --repeats 1 --threads 2 --json \
  >"$tmp/r.json" 2>"$tmp/err"; then ok; else bad "vit bench exited $?: $(cat "$tmp/err")"; fi
if python3 - "$tmp/r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
need = ["model", "res", "tokens", "pattern", "density", "batch", "depth", "ms_dense_flash", "ms_fixed", "ms_scheduled",
        "attn_ms_dense_flash", "attn_ms_fixed", "attn_ms_scheduled", "attn_share_dense_flash", "attn_share_fixed",
        "attn_share_scheduled", "speedup_vs_dense_flash", "speedup_vs_fixed", "amdahl_bound", "plan_ms", "max_abs_err"]
missing = [k for k in need if k not in j]
assert not missing, f"missing {missing}"
assert j["model"] == "deit-s" and j["res"] == 128 and j["tokens"] == 64 and j["batch"] == 1 and j["depth"] == 1, j
assert j["pattern"] == "window2d:k=3" and abs(j["density"] - 576 / 4096) < 1e-12, (j["pattern"], j["density"])
assert 0 < j["density"] < 1, j["density"]
for b in ("dense_flash", "fixed", "scheduled"):
    assert j["ms_" + b] > 0 and 0 <= j["attn_ms_" + b] <= j["ms_" + b], b
    assert 0 <= j["attn_share_" + b] <= 1, b
    assert abs(j["attn_share_" + b] - j["attn_ms_" + b] / j["ms_" + b]) < 1e-9, b
assert abs(j["speedup_vs_dense_flash"] - j["ms_dense_flash"] / j["ms_scheduled"]) < 1e-9
assert abs(j["speedup_vs_fixed"] - j["ms_fixed"] / j["ms_scheduled"]) < 1e-9
assert j["amdahl_bound"] > 0 and j["plan_ms"] >= 0
assert 0 <= j["max_abs_err"] < 1e-4 * max(1, j["logit_scale"]), (j["max_abs_err"], j["logit_scale"])
assert 0 <= j["max_abs_err_fixed"] < 1e-4 * max(1, j["logit_scale"])
assert j["solver"] in ("ilp", "greedy"), j["solver"]
assert j["plan_cached"] is False and j["cost"] == "analytic", (j["plan_cached"], j["cost"])
PY
then ok; else bad "vit bench --json fields/values"; fi
# the same request again: the scheduled plan comes from the plan cache; --no-cache plans anew
if "$T" vit bench --cost analytic --model deit-s --res 128 --pattern window2d:k=3 --depth 1 --repeats 1 --threads 2 --json \
  >"$tmp/r2.json" 2>"$tmp/err" &&
  "$T" vit bench --cost analytic --model deit-s --res 128 --pattern window2d:k=3 --depth 1 --repeats 1 --threads 2 --no-cache \
  --json >"$tmp/r3.json" 2>>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["plan_cached"] is True and b["plan_cached"] is False and a["reorder"] is None and a["blocks"] is None and isinstance(b["reorder"], str) and b["blocks"] >= 0 and a["max_abs_err"] < 1e-4 * max(1, a["logit_scale"]), (a, b)' \
    "$tmp/r2.json" "$tmp/r3.json"; then ok; else bad "vit bench plan cache: $(cat "$tmp/err")"; fi

# text mode, a given fixed tile, another pattern and reordering
if "$T" vit bench --cost analytic --model deit-s --res 64 --pattern swin:win=2,shift=1 --depth 1 --repeats 1 --fixed-tile 16x16 \
  --reorder rcm --solver none >"$tmp/t.txt" 2>"$tmp/err" && grep -q "Amdahl bound" "$tmp/t.txt" && grep -q "fixed tile 16x16 (given)" "$tmp/t.txt" \
  && grep -q "solver none" "$tmp/t.txt"; then
  ok; else bad "vit bench text: $(cat "$tmp/t.txt" "$tmp/err")"; fi

# help
for args in "vit --help" "vit bench --help"; do
  # shellcheck disable=SC2086
  if "$T" $args >"$tmp/h.txt" 2>&1 && grep -q "usage: tessera vit bench" "$tmp/h.txt"; then ok; else bad "$args"; fi
done

expect_usage vit bench --model resnet50 --res 224 --pattern window2d:k=13
expect_usage vit bench --model deit-s --res 200 --pattern window2d:k=13
expect_usage vit bench --model deit-s --res 0 --pattern window2d:k=13
expect_usage vit bench --model deit-s --res 224 --pattern window2d:k=4
expect_usage vit bench --model deit-s --res 224 --pattern nosuch:k=4
expect_usage vit bench --model deit-s --res 224
expect_usage vit bench --res 224 --pattern dense
expect_usage vit bench --model deit-s --res 224 --pattern dense --fixed-tile 64
expect_usage vit bench --model deit-s --res 224 --pattern dense --reorder sideways
expect_usage vit bench --model deit-s --res 224 --pattern dense --depth 0
expect_usage vit bench --model deit-s --res 224 --pattern dense --solver simplex
expect_usage vit bench --model deit-s --res 224 --pattern dense --solve-time -1
expect_usage vit bench --model deit-s --res 224 --pattern dense --bogus
expect_usage vit frobnicate
expect_usage vit

finish cli_vit
