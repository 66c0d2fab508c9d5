#!/usr/bin/env bash
# tessera vit train-bench: a quick run (tiny model, res 64 = 4x4 tokens, batch 2) prints JSON with
# every report field and sane values (the losses of the three backends agree; the measured peak
# activation memory is within its bound); --mem-budget keeps every backend's measured peak within
# the budget and an impossible budget fails with the bytes it needs; --strategy forces every layer;
# --dump writes the files the PyTorch peer reads; text mode and --help work; bad usage exits 2 with
# one line on stderr. No check reads a time's value.
# Usage: cli_vit_train.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_vit_train.sh path/to/tessera}
export TESSERA_QUIET=1 OMP_WAIT_POLICY=passive
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE="$tmp/cache"
run=("$T" vit train-bench --cost analytic --model tiny --res 64 --pattern window2d:k=3 --batch 2 --threads 2)

if "${run[@]}" --repeats 2 --json >"$tmp/r.json" 2>"$tmp/err"; then ok; else bad "train-bench exited $?: $(cat "$tmp/err")"; fi
if python3 - "$tmp/r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "tiny" and j["tokens"] == 16 and j["batch"] == 2 and j["depth"] == 2 and j["rounds"] == 2, j
assert j["mem_budget"] is None and j["fixed_tile"] == "64x64", (j["mem_budget"], j["fixed_tile"])
losses = [j["loss_" + b] for b in ("dense_flash", "fixed", "scheduled")]
for b in ("dense_flash", "fixed", "scheduled"):
    assert 0 < j["step_ms_" + b + "_q25"] <= j["step_ms_" + b] <= j["step_ms_" + b + "_q75"], b
    assert 0 <= j["attn_ms_" + b] <= j["step_ms_" + b] * 1.001 and 0 <= j["attn_share_" + b] <= 1, b
    assert 0 < j["forward_ms_" + b] and 0 < j["backward_ms_" + b], b
    assert 0 < j["peak_activation_bytes_" + b] <= j["bound_bytes_" + b], b
    assert j["strategies_" + b] == ["recompute", "recompute"], j["strategies_" + b]
    assert j["remat_ms_" + b] == 0, b
for b in ("fixed", "scheduled"):
    r = "speedup_vs_dense_flash_" + b
    assert 0 < j[r + "_q25"] <= j[r] <= j[r + "_q75"], r
    assert j["amdahl_fraction_" + b] > 0, b
assert j["amdahl_bound"] >= 1 and j["peak_rss_bytes"] > 0, (j["amdahl_bound"], j["peak_rss_bytes"])
# the weights move between steps (lr 1e-3), the backends agree within that
assert max(losses) - min(losses) < 1e-2 * max(1, max(losses)), losses
PY
then ok; else bad "train-bench --json fields/values"; fi

# a budget one byte below what every layer RECOMPUTE needs (the first run's bound): some layer is
# checkpointed, and every backend's choice and measured peak stay within it
budget=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(min(j["bound_bytes_" + b] for b in ("dense_flash", "fixed", "scheduled")) - 1)' "$tmp/r.json")
if "${run[@]}" --repeats 1 --warmup 0 --mem-budget $budget --json >"$tmp/b.json" 2>"$tmp/err" &&
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); B = int(sys.argv[2])
assert j["mem_budget"] == B, j["mem_budget"]
for b in ("dense_flash", "fixed", "scheduled"):
    p = j["plan_" + b]
    assert p["bound_bytes"] <= B and j["bound_bytes_" + b] <= B and j["peak_activation_bytes_" + b] <= B, b
    assert len(p["block_time_s"]) == 3 and all(t > 0 for t in p["block_time_s"]), p
    assert "checkpoint" in j["strategies_" + b], j["strategies_" + b]
' "$tmp/b.json" $budget; then ok; else bad "train-bench --mem-budget: $(cat "$tmp/err")"; fi
# an impossible budget fails (exit 1) naming what every layer CHECKPOINT needs
"${run[@]}" --repeats 1 --warmup 0 --mem-budget 10K >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "CHECKPOINT needs" "$tmp/err"; then ok; else bad "budget 10K: exit $rc: $(cat "$tmp/err")"; fi

# --strategy, text mode
if "${run[@]}" --repeats 1 --warmup 0 --strategy checkpoint >"$tmp/t.txt" 2>"$tmp/err" &&
  grep -q "Amdahl bound of the step" "$tmp/t.txt" && grep -q "2 checkpoint" "$tmp/t.txt"; then
  ok; else bad "train-bench text: $(cat "$tmp/t.txt" "$tmp/err")"; fi

# --dump: the files the PyTorch peer reads
if "${run[@]}" --repeats 1 --warmup 0 --lr 0.5 --dump "$tmp/dump" >/dev/null 2>"$tmp/err" &&
  [ -f "$tmp/dump/meta.json" ] && [ -f "$tmp/dump/mask.npy" ] && [ -f "$tmp/dump/perm.npy" ] &&
  [ -f "$tmp/dump/before/pos_embed.npy" ] && [ -f "$tmp/dump/after/blocks.1.mlp.fc2.weight.npy" ] &&
  [ -f "$tmp/dump/grad/head.bias.npy" ] &&
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["backend"]=="scheduled" and m["lr"]==0.5 and len(m["params"])==31 and m["strategies"]==["recompute"]*2, m' \
    "$tmp/dump/meta.json"; then ok; else bad "train-bench --dump: $(cat "$tmp/err")"; fi

if "$T" vit train-bench --help >"$tmp/h.txt" 2>&1 && grep -q "usage: tessera vit train-bench" "$tmp/h.txt"; then ok; else bad "help"; fi

expect_usage vit train-bench --model resnet50 --res 64 --pattern dense
expect_usage vit train-bench --model tiny --res 64
expect_usage vit train-bench --model tiny --res 64 --pattern dense --mem-budget 0
expect_usage vit train-bench --model tiny --res 64 --pattern dense --mem-budget 12X
expect_usage vit train-bench --model tiny --res 64 --pattern dense --strategy flash
expect_usage vit train-bench --model tiny --res 64 --pattern dense --strategy checkpoint --mem-budget 1G
expect_usage vit train-bench --model tiny --res 64 --pattern dense --lr -1
expect_usage vit train-bench --model tiny --res 64 --pattern dense --dump-backend reference
expect_usage vit train-bench --model tiny --res 64 --pattern dense --bogus

finish cli_vit_train
