#!/usr/bin/env bash
# tessera plan3d on the paper-scale inputs of bench/plan3d (GPT-2 1.5B on 1 p4d + 6 g5.12xlarge):
# `search --json` lists plans fastest first with Megatron-LM's default and writes the best plan and
# its Gantt chart; `estimate` prices a given configuration (split, node order, TP per type) and
# agrees with itself through `explain`; `--budget` gives a monotone Pareto front; `emit` writes the
# engines' launch files. Bad usage exits 2 with one line; bad inputs (malformed JSON, negative
# bandwidth, a missing TP degree, a model that fits nowhere) exit 1 naming the file and field, and
# write nothing. No timing is asserted.
# Usage: cli_plan3d.sh path/to/tessera
set -u
T=${1:?usage: cli_plan3d.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
D="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench/plan3d" && pwd)"
M="$D/gpt2-xl.model.json" C="$D/aws-1xp4d-6xg5.cluster.json" P="$D/gpt2-xl-a100-a10g.profile.json"
IN=(--model "$M" --cluster "$C" --profile "$P")

expect_usage plan3d
expect_usage plan3d frobnicate
expect_usage plan3d search --model "$M"
expect_usage plan3d search "${IN[@]}" --partitioner magic
expect_usage plan3d search "${IN[@]}" --top 0
expect_usage plan3d search "${IN[@]}" --pareto-svg "$tmp/x.svg"
expect_usage plan3d estimate "${IN[@]}" --dp 2
expect_usage plan3d estimate "${IN[@]}" --dp 2 --mbs 1 --order p4d.24xlarge,bogus
expect_usage plan3d estimate "${IN[@]}" --dp 2 --mbs 1 --tp A100=2,H100=1
expect_usage plan3d estimate "${IN[@]}" --dp 2 --mbs 1 --split 4,x
expect_usage plan3d explain
if "$T" plan3d --help | grep -q '1F1B'; then ok; else bad "plan3d --help"; fi

# search: sorted plans, the baseline, the best plan file and its schedule
if "$T" plan3d search "${IN[@]}" --top 5 --json --out "$tmp/best.json" --gantt "$tmp/best.svg" >"$tmp/s.json" 2>"$tmp/err" &&
  python3 - "$tmp/s.json" "$tmp/best.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); best = json.load(open(sys.argv[2]))
plans = r["plans"]
assert len(plans) == 5, len(plans)
steps = [p["estimate"]["step_ms"] for p in plans]
assert steps == sorted(steps), steps
assert best["estimate"]["step_ms"] == steps[0]
b = r["baseline"]
assert b["uniform_tp"] and b["uniform_split"], b
assert r["speedup_vs_baseline"] >= 1.0, r["speedup_vs_baseline"]
for p in plans:
    assert sum(s["layers"][1] for s in p["stages"]) == 48
    assert p["dp"] * p["mbs"] * p["micro_batches"] == 256
    gpus = sum(s["gpus"][1] for s in p["stages"])
    assert gpus == 32, gpus
    for s in p["stages"]:
        assert s["mem_gib"] <= s["mem_limit_gib"], s
assert r["search"]["evaluated"] > r["search"]["rejected_memory"] > 0
PY
then ok; else bad "search --json: $(cat "$tmp/err")"; fi
if grep -q '</svg>' "$tmp/best.svg" 2>/dev/null; then ok; else bad "search --gantt wrote no SVG"; fi

# explain: the plan file re-simulates to its own pipeline time; its Gantt chart
if "$T" plan3d explain "$tmp/best.json" --svg "$tmp/e.svg" >"$tmp/e.txt" 2>"$tmp/err" && grep -q 'equals the plan' "$tmp/e.txt" &&
  grep -q '</svg>' "$tmp/e.svg"; then ok; else bad "explain: $(cat "$tmp/e.txt" "$tmp/err")"; fi

# estimate: a given uneven split, node order and TP per type
ORDER=g5.12xlarge,g5.12xlarge,g5.12xlarge,g5.12xlarge,g5.12xlarge,g5.12xlarge,p4d.24xlarge
if "$T" plan3d estimate "${IN[@]}" --dp 2 --mbs 2 --tp A10G=2,A100=1 --order "$ORDER" --split 3,3,3,3,3,3,8,8,8,6 \
  --json --out "$tmp/est.json" >"$tmp/est.out" 2>"$tmp/err" && python3 - "$tmp/est.out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["pp"] == 10 and [s["layers"][1] for s in p["stages"]] == [3, 3, 3, 3, 3, 3, 8, 8, 8, 6]
assert [s["tp"] for s in p["stages"]] == [2] * 6 + [1] * 4 and not p["uniform_tp"]
assert [s["gpu"] for s in p["stages"]] == ["A10G"] * 6 + ["A100"] * 4
assert p["node_order"][-1] == "p4d.24xlarge"
PY
then ok; else bad "estimate --split --order --tp: $(cat "$tmp/err")"; fi
if "$T" plan3d explain "$tmp/est.json" >/dev/null 2>&1; then ok; else bad "explain of an estimate"; fi

# under a price limit: sub-clusters and a front with falling cost as time rises
if "$T" plan3d search --model "$M" --cluster "$D/aws-pool.cluster.json" --profile "$P" --budget 45 --top 2 --json \
  --pareto-svg "$tmp/pareto.svg" >"$tmp/b.json" 2>"$tmp/err" && python3 - "$tmp/b.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["pareto"]
assert len(f) >= 1 and r["search"]["compositions"] > 1
for a, b in zip(f, f[1:]):
    assert b["estimate"]["step_ms"] >= a["estimate"]["step_ms"] and b["estimate"]["usd_per_step"] <= a["estimate"]["usd_per_step"]
for p in f:
    assert p["estimate"]["usd_per_hour"] <= 45 + 1e-9
PY
then ok; else bad "search --budget: $(cat "$tmp/err")"; fi
if grep -q '</svg>' "$tmp/pareto.svg" 2>/dev/null; then ok; else bad "--pareto-svg wrote no SVG"; fi

# emit: the engines' launch files from a plan with one TP degree
if "$T" plan3d estimate "${IN[@]}" --dp 2 --mbs 1 --tp 1 --out "$tmp/u.json" >/dev/null 2>&1 &&
  "$T" plan3d emit "$tmp/u.json" --out "$tmp/emit" >"$tmp/emit.out" 2>"$tmp/err" &&
  [ -s "$tmp/emit/megatron_args.sh" ] && [ -s "$tmp/emit/deepspeed_config.json" ] && [ -s "$tmp/emit/torchrun.sh" ]; then ok
else bad "emit: $(cat "$tmp/emit.out" "$tmp/err")"; fi

# bad inputs: exit 1, the file and field named, no output written
expect_fail() { # NEEDLE ARGS...: exit 1, NEEDLE on stderr, $tmp/none.json not written
  local needle=$1
  shift
  "$T" "$@" >"$tmp/f.out" 2>"$tmp/f.err"
  local rc=$?
  if [ $rc -eq 1 ] && grep -qF -- "$needle" "$tmp/f.err" && [ ! -e "$tmp/none.json" ]; then ok; else
    bad "'$*' exited $rc, want 1 mentioning '$needle': $(cat "$tmp/f.err")"; fi
}
printf '{"cluster": "x", "node_types": [' >"$tmp/trunc.json"
expect_fail "trunc.json" plan3d search --model "$M" --cluster "$tmp/trunc.json" --profile "$P" --out "$tmp/none.json"
sed 's/"bandwidth_gbs": 40/"bandwidth_gbs": -40/' "$C" >"$tmp/negbw.json"
expect_fail "node_types[0].inter_node.bandwidth_gbs" plan3d search --model "$M" --cluster "$tmp/negbw.json" --profile "$P" --out "$tmp/none.json"
expect_fail "no entry for gpu 'A10G' (node type 'g5.12xlarge') at tp 8" plan3d estimate "${IN[@]}" --dp 1 --mbs 1 --tp A100=8,A10G=8 --out "$tmp/none.json"
sed 's/"hidden": 1600/"hidden": 16000/; s/"heads": 16/"heads": 160/' "$M" >"$tmp/huge.json"
expect_fail "no plan fits: out of memory" plan3d search --model "$tmp/huge.json" --cluster "$C" --profile "$P" --out "$tmp/none.json"
expect_fail "missing.json" plan3d explain "$tmp/missing.json"
sed 's/"micro_batches":[[:space:]]*[0-9]*/"micro_batches": 7/' "$tmp/best.json" >"$tmp/badplan.json"
expect_fail "micro_batches 7" plan3d explain "$tmp/badplan.json"

finish cli_plan3d
