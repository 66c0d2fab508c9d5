#!/usr/bin/env bash
# tessera vit bench: a quick run (deit-s, res 128 = 8x8 tokens, depth 1) prints JSON with every
# report field and sane values (the three backends agree on the logits; every ratio comes with its
# quartiles and interval; the end-to-end speedup is not above its Amdahl bound (issue 32): the
# backends share the non-attention time), text mode works, --help exits 0, and bad usage (unknown
# model, resolution not a multiple of 16, bad pattern, missing options) exits 2 with one line on
# stderr. No check reads a speedup's value.
# Usage: cli_vit.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_vit.sh path/to/tessera}
export TESSERA_QUIET=1 OMP_WAIT_POLICY=passive
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE="$tmp/cache" # the scheduled plan is cached: start empty

if "$T" vit bench --cost analytic --model deit-s --res 128 --pattern window2d:k=3 --depth 1 --repeats 5 --threads 2 --json \
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
    assert j["min_ms_" + b] <= j["ms_" + b] and j["min_attn_ms_" + b] <= j["attn_ms_" + b], b
    for t in ("ms_", "attn_ms_", "forward_ms_", "nonattn_ms_"):  # medians over the rounds, with quartiles
        assert 0 <= j[t + b + "_q25"] <= j[t + b] <= j[t + b + "_q75"], (t + b, j[t + b + "_q25"], j[t + b + "_q75"])
assert j["rounds"] == 5 and j["warmup_rounds"] == 1, (j["rounds"], j["warmup_rounds"])
assert j["other_cpus"] is None or j["other_cpus"] >= 0, j["other_cpus"]
assert 0 < j["nonattn_ms_q25"] <= j["nonattn_ms"] <= j["nonattn_ms_q75"]
# every ratio: the median of the per-round ratios within its quartiles and its 95% interval
for r in ("speedup_vs_dense_flash", "speedup_vs_fixed", "attn_speedup_vs_dense_flash", "attn_speedup_vs_fixed",
          "amdahl_bound"):
    q25, q75, (lo, hi) = j[r + "_q25"], j[r + "_q75"], j[r + "_ci95"]
    assert 0 < q25 <= j[r] <= q75 and 0 < lo <= j[r] <= hi, (r, lo, q25, j[r], q75, hi)
# the end-to-end speedup never above its Amdahl bound (attention at zero cost), at the median and
# both quartiles: the non-attention time is shared, so it holds round by round
for q in ("", "_q25", "_q75"):
    assert j["speedup_vs_dense_flash" + q] <= j["amdahl_bound" + q], q
assert j["plan_ms"] >= 0
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
# text mode prints the same relation: the end-to-end speedup over dense flash not above the bound
if python3 - "$tmp/t.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
e2e = float(re.search(r"scheduled vs dense_flash: end-to-end ([0-9.]+)x \[", t).group(1))
bound = float(re.search(r"Amdahl bound ([0-9.]+)x: attention at zero cost", t).group(1))
assert e2e <= bound, (e2e, bound)
assert re.search(r"end-to-end [0-9.]+x \[[0-9.]+, [0-9.]+\], attention [0-9.]+x \[[0-9.]+, [0-9.]+\]", t), t
PY
then ok; else bad "vit bench text: speedup, bound and quartiles: $(cat "$tmp/t.txt")"; fi

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
