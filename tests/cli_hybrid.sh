#!/usr/bin/env bash
# tessera hybrid: `run` on the local engine for the four jobs in every mode, the output equal to the
# reference pass, the report saying "modelled device", the timeline drawn; a co-tenant option; the
# device model printed, a datasheet model refused by --store, a measured one stored and then used;
# `task` without its controller fails with one line. Bad usage exits 2 with one line. No timing is
# asserted.
# Usage: cli_hybrid.sh path/to/tessera
set -u
T=${1:?usage: cli_hybrid.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
scratch_cache
export TMPDIR=$tmp

expect_usage hybrid
expect_usage hybrid frobnicate
expect_usage hybrid run --input x
expect_usage hybrid run --job sort --input x
expect_usage hybrid run --job grep
expect_usage hybrid run --job grep --input x --mode fast
expect_usage hybrid run --job grep --input x --mode static:x
expect_usage hybrid run --job grep --input x --engine hadoop
expect_usage hybrid run --job grep --input x --tenant 1:2
expect_usage hybrid run --job grep --input x --blocks 0
expect_usage hybrid task --work d
expect_usage hybrid device --bogus 1
if "$T" hybrid --help | grep -q 'Hybrid Hadoop'; then ok; else bad "hybrid --help"; fi
"$T" hybrid run --job kmeans --input points=5 >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && grep -q "gen:" "$tmp/err"; then ok; else bad "a bad generated spec says gen:: $(cat "$tmp/err")"; fi
"$T" hybrid run --job wordcount --input "$tmp/nonexistent.txt" >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && grep -q "nonexistent" "$tmp/err"; then ok; else bad "a missing input is named: $(cat "$tmp/err")"; fi

printf 'It is a tale\nTold by an idiot, full of sound and fury,\nSignifying nothing.\n' >"$tmp/t.txt"
for spec in "wordcount $tmp/t.txt --repeat 200 --blocks 5" "grep $tmp/t.txt --repeat 200 --blocks 4 --pattern idiot" \
            "kmeans gen:points=5000,d=3,k=4,seed=3 --blocks 6 --rounds 2" "gemm gen:records=256,in=16,out=8,seed=1,batches=4/32 --blocks 6"; do
  set -- $spec
  job=$1 input=$2
  shift 2
  for mode in cpu gpu static:1 auto; do
    if "$T" hybrid run --job $job --input $input "$@" --mode $mode --slots 2 --cores 2 --json --svg "$tmp/$job.svg" >"$tmp/r.json" 2>"$tmp/err" &&
       python3 - "$tmp/r.json" "$mode" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); mode = sys.argv[2]
assert r["output_ok"] is True, r["output_note"]
assert r["device"]["kind"] == "modelled device"
assert r["mode"] == mode
t = r["tasks"]
assert t["cpu"] + t["dev"] + t["split"] == r["blocks"] * r["rounds"], t
if mode == "cpu": assert t["dev"] == 0 and t["split"] == 0
if mode == "gpu": assert t["cpu"] == 0 and t["split"] == 0
assert len(r["timeline"]) == r["blocks"] * r["rounds"]
assert r["oracle"]["makespan_s"] > 0 and r["makespan_s"] > 0
PY
    then ok; else bad "hybrid run $job $mode: $(tail -2 "$tmp/err")"; fi
  done
  if grep -q "<svg" "$tmp/$job.svg" && grep -q "modelled device" "$tmp/$job.svg"; then ok; else bad "$job timeline"; fi
done
# the plain report
if "$T" hybrid run --job grep --input "$tmp/t.txt" --repeat 50 --tenant 0.001:10:0.5 >"$tmp/out" 2>&1 &&
   grep -q "output             ok" "$tmp/out" && grep -q "oracle split" "$tmp/out"; then ok; else bad "plain report: $(cat "$tmp/out")"; fi

# the device model: the datasheet one printed; --store refuses it; a measured one is stored and used
if "$T" hybrid device >"$tmp/dev.json" && grep -q '"measured":false' "$tmp/dev.json"; then ok; else bad "device print"; fi
"$T" hybrid device --store "$tmp/dev.json" >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -q "measured: false" "$tmp/err"; then ok; else bad "store refuses a datasheet model: $(cat "$tmp/err")"; fi
sed -e 's/"measured":false/"measured":true/' -e 's/"name":"[^"]*"/"name":"Test GPU"/' "$tmp/dev.json" >"$tmp/meas.json"
if "$T" hybrid device --store "$tmp/meas.json" | grep -q "Test GPU" && "$T" hybrid device | grep -q '"name":"Test GPU"'; then ok
else bad "a stored measured model is the one used"; fi
printf '{"name": "x"}' >"$tmp/bad.json"
"$T" hybrid run --job grep --input "$tmp/t.txt" --device "$tmp/bad.json" >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && grep -q "bad.json" "$tmp/err"; then ok; else bad "a bad device file is named: $(cat "$tmp/err")"; fi

# a task without its controller
"$T" hybrid task --connect 127.0.0.1:1 --work "$tmp/nowork" --block 0 >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then ok; else bad "task without a work dir: $(cat "$tmp/err")"; fi
finish cli_hybrid
