#!/usr/bin/env bash
# tessera gconv on a reduced layer set (the full models take minutes: they belong to the bench):
# `plan --gen` writes a valid plan JSON with every reorder candidate and caches it, a second plan
# loads it; `export` writes a model's layer table and .npy connectivities; `bench --conn FILE`
# (with and without --weights) and `bench --model` (CondenseNet layers 0-3, ShuffleNet g3/g8 two
# layers each, every --connectivity) report per layer each baseline's ms, ours, the reorder method,
# plan time, max error within tolerance, and the totals/speedups (with a torch file in the peer's
# format). Bad usage exits 2 with one line; bad files (missing, 1-D, garbage, values other than
# 0/1, 0 channels, wrong weight shape) exit 1 naming the file. --cost analytic keeps the machine's
# kernel profile (5-15 s) out of the test; no timing is asserted.
# Usage: cli_gconv.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_gconv.sh path/to/tessera}
export TESSERA_QUIET=1 OMP_WAIT_POLICY=passive
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
scratch_cache # with the suite's machine profile: bench reports % of its peak
FAST=(--cost analytic --time-limit 0.05 --threads 2)
BFAST=("${FAST[@]}" --repeats 1 --min-time 0)

expect_usage gconv
expect_usage gconv frobnicate
expect_usage gconv bench
expect_usage gconv bench --model condensenet --gen 'randconn:cin=8,cout=8,density=0.5,seed=1'
expect_usage gconv bench --model alexnet
expect_usage gconv bench --model condensenet --condense 3
expect_usage gconv bench --model condensenet --connectivity magic
expect_usage gconv bench --model condensenet --layers 3-1
expect_usage gconv plan --model condensenet
expect_usage gconv plan --gen 'randconn:cin=8,cout=8,density=0.5,seed=1' --hw 8
expect_usage gconv plan --gen 'randconn:cin=8,cout=8,density=0.5,seed=1' --hw 8 --ksize 2
expect_usage gconv plan --gen 'randconn:cin=8,cout=8,density=0.5,seed=1' --hw 8 --ksize 1 --reorder none,morton,bogus
expect_usage gconv bench --model condensenet --weights w.npy
expect_usage gconv bench --model condensenet --bogus
if "$T" gconv --help | grep -q 'knapsack'; then ok; else bad "gconv --help"; fi

# plan: every candidate, a plan file, a cache entry; the second plan is the cached one
GEN='permconn:unstructconv:cin=64,cout=48,keep=0.25,groups=4,corr=0.9,seed=3,seed=4'
if "$T" gconv plan --gen "$GEN" --hw 14 --ksize 1 "${FAST[@]}" --out "$tmp/plan.json" --json >"$tmp/p1.json" 2>"$tmp/err" &&
  "$T" gconv plan --gen "$GEN" --hw 14 --ksize 1 "${FAST[@]}" --json >"$tmp/p2.json" 2>>"$tmp/err" &&
  python3 - "$tmp/p1.json" "$tmp/p2.json" "$tmp/plan.json" "$tmp/cache" <<'PY'
import json, os, sys
a, b, f = (json.load(open(p)) for p in sys.argv[1:4])
assert a["cached"] is False and b["cached"] is True and a["key"] == b["key"] == f["key"], (a["cached"], b["cached"])
env = json.load(open(os.path.join(sys.argv[4], "gconv-plan", a["key"] + ".json")))  # an artifact envelope
assert env["artifact"] == "gconv-plan" and env["key"] == a["key"] and env["data"]["key"] == a["key"], env["key"]
assert env["provenance"]["cpu_model"] and env["provenance"]["kernels"], env["provenance"]
assert f["format"] == "tessera-gconv-plan" and f["layer"]["cin"] == 64 and f["layer"]["cout"] == 48, f["layer"]
assert sorted(c["method"] for c in a["candidates"]) == ["hc", "ic", "none", "rcm"], a["candidates"]
assert a["method"] in ("none", "rcm", "hc", "ic") and a["cost"] == "analytic"
rows = sorted(r for p in f["parts"] for r in p["rows"])
assert rows == list(range(48)), "every output channel in exactly one partition"
win = [c for c in a["candidates"] if c["method"] == a["method"]][0]
assert abs(win["pred_ms"] - a["pred_ms"]) < 1e-12 and all(a["pred_ms"] <= c["pred_ms"] + 1e-12 for c in a["candidates"])
PY
then ok; else bad "gconv plan: $(cat "$tmp/err")"; fi

# export: layer table + connectivities; bench --conn on an exported file (and with --weights)
if "$T" gconv export --model condensenet --layers 0-1 --out "$tmp/ex" >"$tmp/out" 2>"$tmp/err" &&
  [ -f "$tmp/ex/layers.json" ] && [ -f "$tmp/ex/000.npy" ] && [ -f "$tmp/ex/001.npy" ]; then ok; else
  bad "gconv export: $(cat "$tmp/err")"; fi
python3 - "$tmp" <<'PY'
import struct, sys
d = sys.argv[1]
def npy(name, descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * (63 - (len(h) + 10) % 64) + "\n"
    open(d + "/" + name, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
npy("w.npy", "<f4", "(32, 16, 1, 1)", struct.pack("<512f", *[((i * 37) % 19 - 9) / 9.0 for i in range(512)]))
npy("w_bad.npy", "<f4", "(32, 15)", b"\0" * (32 * 15 * 4))
npy("one_d.npy", "|b1", "(8,)", bytes([1] * 8))
npy("half.npy", "<f4", "(2, 2)", struct.pack("<4f", 1, 0, 0.5, 1))
npy("empty.npy", "|b1", "(0, 8)", b"")
open(d + "/garbage.npy", "wb").write(b"hello world")
PY
if "$T" gconv bench --conn "$tmp/ex/000.npy" --hw 12 --ksize 1 --weights "$tmp/w.npy" "${BFAST[@]}" --json >"$tmp/b1.json" 2>"$tmp/err" &&
  python3 - "$tmp/b1.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
l = b["layers"][0]
assert len(b["layers"]) == 1 and l["cin"] == 16 and l["cout"] == 32 and l["h"] == 12 and b["connectivity"] == "file", l
assert l["within_tolerance"] and l["ms"]["ours"] > 0 and l["max_err"]["ours"] < 1e-4, l
PY
then ok; else bad "gconv bench --conn --weights: $(cat "$tmp/err")"; fi

fails() { # expected exit 1 and the named file in the message
  local want=$1
  shift
  "$T" gconv "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 1 ] && grep -q "$want" "$tmp/err"; then ok; else bad "gconv $* exited $rc: $(cat "$tmp/err")"; fi
}
fails missing.npy plan --conn "$tmp/missing.npy" --hw 8 --ksize 1 "${FAST[@]}"
fails one_d.npy plan --conn "$tmp/one_d.npy" --hw 8 --ksize 1 "${FAST[@]}"
fails garbage.npy plan --conn "$tmp/garbage.npy" --hw 8 --ksize 1 "${FAST[@]}"
fails 'half.npy.*0.5' plan --conn "$tmp/half.npy" --hw 8 --ksize 1 "${FAST[@]}"
fails 'empty.npy.*0 x 8' plan --conn "$tmp/empty.npy" --hw 8 --ksize 1 "${FAST[@]}"
fails 'w_bad.npy.*(32, 16, 1, 1)' bench --conn "$tmp/ex/000.npy" --hw 8 --ksize 1 --weights "$tmp/w_bad.npy" "${BFAST[@]}"
fails 'w.npy.*(32, 16, 3, 3)' bench --conn "$tmp/ex/000.npy" --hw 8 --ksize 3 --weights "$tmp/w.npy" "${BFAST[@]}"

# bench --model on a reduced layer set, with a torch file in the peer's format
python3 - "$tmp/ex/layers.json" "$tmp/torch.json" <<'PY'
import json, sys
L = json.load(open(sys.argv[1]))["layers"]
t = [{"name": l["name"], "cin": l["cin"], "cout": l["cout"], "h": l["h"], "dense_ms": 1.0, "grouped_ms": 2.0,
      "dense_ok": True, "grouped_ok": True} for l in L]
json.dump({"torch": "0.0-test", "threads": 2, "batch": 1, "layers": t}, open(sys.argv[2], "w"))
PY
if "$T" gconv bench --model condensenet --layers 0-1 "${BFAST[@]}" --torch "$tmp/torch.json" --json \
    --json-out "$tmp/b2file.json" >"$tmp/b2.json" 2>"$tmp/err" &&
  python3 - "$tmp/b2.json" "$tmp/b2file.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
assert json.load(open(sys.argv[2])) == b, "--json-out writes the report --json prints"
assert [l["name"] for l in b["layers"]] == ["s1.l1.lgc1x1", "s1.l1.gconv3x3"] and b["torch_version"] == "0.0-test"
t = b["total_ms"]
for k in ("ours", "ours_noreorder", "dense", "deploy", "onednn_grouped", "onednn_dense", "spmm", "torch_dense",
          "torch_grouped", "torch", "best_baseline"):
    assert isinstance(t.get(k), (int, float)) and t[k] > 0, (k, t.get(k))
assert t["torch"] == 2.0 and t["best_baseline"] <= min(t[k] for k in ("dense", "deploy", "spmm")) + 1e-9, t
assert abs(b["speedup_vs_torch"] - 2.0 / t["ours"]) < 1e-9 and abs(b["speedup_reorder"] - t["ours_noreorder"] / t["ours"]) < 1e-9
assert abs(b["speedup_vs_best_baseline"] - t["best_baseline"] / t["ours"]) < 1e-9 and b["best_single_baseline"]
assert sum(b["reorder_wins"].values()) == 2 and "learned_only" in b, b["reorder_wins"]
for l in b["layers"]:
    assert l["within_tolerance"] and l["reorder"] in ("none", "rcm", "hc", "ic") and l["plan_ms"] >= 0, l
    assert l["ms"]["ours"] > 0 and l["max_err"]["ours"] >= 0 and l["nparts"] >= 1, l
PY
then ok; else bad "gconv bench --model --json: $(cat "$tmp/err")"; fi
"$T" gconv bench --model condensenet --layers 0-1 "${BFAST[@]}" --batch 2 --torch "$tmp/torch.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "batch" "$tmp/err"; then ok; else bad "torch file of another batch exited $rc: $(cat "$tmp/err")"; fi

# every model and connectivity (two or four layers each): text report, errors within the bound
for run in "condensenet --layers 2-3 --connectivity shared" "condensenet --layers 2-3 --connectivity permuted" \
  "condensenet --layers 2-2 --connectivity random --density 0.125" "condensenet --layers 2-2 --connectivity block" \
  "condensenet --layers 2-2 --condense 8" "shufflenet-g3 --layers 0-1" "shufflenet-g8 --layers 4-5 --connectivity shared"; do
  # shellcheck disable=SC2086
  if "$T" gconv bench --model $run "${BFAST[@]}" >"$tmp/b.txt" 2>"$tmp/err" && grep -q 'reorder method chosen per layer' "$tmp/b.txt" &&
    grep -q 'vs best other baseline per layer' "$tmp/b.txt" && ! grep -q 'exceeds the error bound' "$tmp/b.txt"; then ok; else
    bad "gconv bench --model $run: $(cat "$tmp/err") $(cat "$tmp/b.txt")"; fi
done

finish cli_gconv
