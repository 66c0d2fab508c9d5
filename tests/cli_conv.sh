#!/usr/bin/env bash
# tessera conv: `layers` lists VGG16's 13 convolutions with shape keys; `plan` measures the missing
# layer shapes into the "conv-profile" artifact <cache>/conv-profile/<isa>-t<threads>.json (an
# envelope with provenance), chooses per layer and says why, and keeps the choice as a "conv-plan"
# artifact (the library's ts_cnn_conv_plan): a second `plan` is answered from it ("cached") without
# touching the profile, --replan chooses again from the profile (same choice, nothing measured), a
# corrupt stored plan is moved aside and made again, --reprofile measures every shape again; --algo and
# --override set the choice; `bench --json` (small input, one repeat) reports layers, every
# total, the oneDNN/torch speedups, the Winograd-vs-direct check (effective GFLOP/s) and the
# end-to-end forward, reading torch figures from a peer file; bad usage exits 2 with one line, a
# failing operation (missing --torch file, an override that does not apply) exits 1.
# Usage: cli_conv.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_conv.sh path/to/tessera}
export TESSERA_QUIET=1 OMP_WAIT_POLICY=passive
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
scratch_cache # with the suite's machine profile: bench reports % of its peak
SMALL=(--model vgg16 --res 32 --threads 2 --repeats 1 --min-time 0)

expect_usage conv
expect_usage conv frobnicate --model vgg16
expect_usage conv bench
expect_usage conv bench --model alexnet
expect_usage conv bench --model vgg16 --batch 0
expect_usage conv plan --model vgg16 --algo magic
expect_usage conv bench --model vgg16 --bogus
if "$T" conv --help | grep -q 'per-layer'; then ok; else bad "conv --help"; fi

# layers
if "$T" conv layers --model vgg16 --json >"$tmp/l.json" 2>"$tmp/err" &&
  python3 - "$tmp/l.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
L = j["layers"]
assert len(L) == 13 and abs(j["conv_gflop"] - 30.69) < 0.01, (len(L), j["conv_gflop"])
assert L[0]["name"] == "features.conv1_1" and L[0]["key"] == "n1-c3-h224-w224-k64-r3-s3-st1x1-p1.1.1.1-d1x1-g1", L[0]
assert all(l["relu"] and not l["bn_folded"] for l in L)
PY
then ok; else bad "conv layers: $(cat "$tmp/err")"; fi

# plan: measures, writes the profile, says why
if "$T" conv plan "${SMALL[@]}" --json >"$tmp/p1.json" 2>"$tmp/err" &&
  python3 - "$tmp/p1.json" "$tmp/cache" <<'PY'
import glob, json, sys
p = json.load(open(sys.argv[1]))
files = glob.glob(sys.argv[2] + "/conv-profile/*-t2.json")
assert len(files) == 1 and p["profile"] == files[0], (files, p["profile"])
env = json.load(open(files[0]))
assert env["artifact"] == "conv-profile" and env["provenance"]["threads"] == 2, env["provenance"]
for k in ("cpu_model", "kernels", "date"):
    assert env["provenance"][k], k
prof = env["data"]
assert prof["format"] == "tessera-conv-profile" and prof["onednn"], prof.get("onednn")
assert len(prof["entries"]) == 9, len(prof["entries"])  # 9 distinct shapes in VGG16
assert p["cached"] is False and "/conv-plan/" in p["plan"], (p["cached"], p["plan"])
plan = json.load(open(p["plan"]))
assert plan["artifact"] == "conv-plan" and plan["version"] == 2 and plan["provenance"]["threads"] == 2
d = plan["data"]  # the library's ts_cnn_conv_plan payload (docs/FORMATS.md)
assert d["format"] == "tessera-conv-plan" and d["model"] == "vgg16" and d["key"] == plan["key"] and len(d["layers"]) == 13
assert [(l["name"], l["algo"]) for l in d["layers"]] == [(l["name"], l["algo"]) for l in p["layers"]]
for e in prof["entries"].values():
    assert e["date"] and "reference" not in e["ms"] and e["ms"], e
assert len(p["layers"]) == 13
for l in p["layers"]:
    assert l["algo"] in prof["entries"][l["key"]]["ms"] and l["why"].startswith(("fastest of", "the only")), l
PY
then ok; else bad "conv plan: $(cat "$tmp/err")"; fi
prof=$(ls "$tmp/cache"/conv-profile/*-t2.json)
before=$(stat -c %Y.%s "$prof"; md5sum <"$prof")
SAME='import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert b["cached"] is (sys.argv[3] == "1"), b["cached"]; assert [(l["name"], l["algo"], l["why"]) for l in a["layers"]]==[(l["name"], l["algo"], l["why"]) for l in b["layers"]]'
if "$T" conv plan "${SMALL[@]}" --json >"$tmp/p2.json" 2>"$tmp/err" &&
  [ "$before" = "$(stat -c %Y.%s "$prof"; md5sum <"$prof")" ] &&
  python3 -c "$SAME" "$tmp/p1.json" "$tmp/p2.json" 1; then ok; else bad "second conv plan not cached, re-measured or chose differently: $(cat "$tmp/err")"; fi
if "$T" conv plan "${SMALL[@]}" >"$tmp/p2.txt" 2>"$tmp/err" && grep -q '^plan .*conv-plan/.* (cached)$' "$tmp/p2.txt"; then ok; else
  bad "conv plan text does not say cached: $(cat "$tmp/p2.txt" "$tmp/err")"; fi
if "$T" conv plan "${SMALL[@]}" --replan --json >"$tmp/p2r.json" 2>"$tmp/err" &&
  [ "$before" = "$(stat -c %Y.%s "$prof"; md5sum <"$prof")" ] &&
  python3 -c "$SAME" "$tmp/p1.json" "$tmp/p2r.json" 0; then ok; else bad "conv plan --replan: $(cat "$tmp/err")"; fi

# a corrupt stored plan is moved aside and the plan made again (exit 0, same choice, nothing measured)
plan=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"])' "$tmp/p1.json")
echo '{"artifact": "conv-plan", "version": 2, "key": "x"' >"$plan"
if "$T" conv plan "${SMALL[@]}" --json >"$tmp/p2c.json" 2>"$tmp/err" && [ -f "$plan.bad" ] && grep -q 'moved aside' "$tmp/err" &&
  [ "$before" = "$(stat -c %Y.%s "$prof"; md5sum <"$prof")" ] &&
  python3 -c "$SAME" "$tmp/p1.json" "$tmp/p2c.json" 0 &&
  "$T" conv plan "${SMALL[@]}" --json >"$tmp/p2d.json" 2>"$tmp/err" && python3 -c "$SAME" "$tmp/p1.json" "$tmp/p2d.json" 1
then ok; else bad "conv plan over a corrupt stored plan: $(cat "$tmp/err")"; fi
# --reprofile: every shape measured again (the profile rewritten), the plan made now
if "$T" conv plan "${SMALL[@]}" --reprofile --json >"$tmp/p2p.json" 2>"$tmp/err" &&
  [ "$before" != "$(stat -c %Y.%s "$prof"; md5sum <"$prof")" ] &&
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["cached"] is False and len(p["layers"]) == 13' "$tmp/p2p.json"
then ok; else bad "conv plan --reprofile: $(cat "$tmp/err")"; fi

# --algo and --override
if "$T" conv plan "${SMALL[@]}" --algo direct --override 'features.conv1_*=im2col,features.conv5_3=winograd_f2' \
    --json >"$tmp/p3.json" 2>"$tmp/err" &&
  python3 - "$tmp/p3.json" <<'PY'
import json, sys
L = {l["name"]: l for l in json.load(open(sys.argv[1]))["layers"]}
assert L["features.conv1_1"]["algo"] == "im2col" and L["features.conv1_2"]["why"] == "override features.conv1_*=im2col", L["features.conv1_2"]
assert L["features.conv5_3"]["algo"] == "winograd_f2", L["features.conv5_3"]
assert L["features.conv3_1"]["algo"] == "direct" and L["features.conv3_1"]["why"] == "--algo direct", L["features.conv3_1"]
PY
then ok; else bad "conv plan --algo/--override: $(cat "$tmp/err")"; fi
"$T" conv plan "${SMALL[@]}" --override 'features.conv1_1=depthwise' >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "features.conv1_1" "$tmp/err"; then ok; else bad "override that does not apply exited $rc: $(cat "$tmp/err")"; fi

# bench with a torch file from the peer's format
python3 - "$tmp/l.json" "$tmp/torch.json" <<'PY'
import json, sys
keys = sorted({l["key"].replace("-h224-w224-", "-h32-w32-").replace("-h112-w112-", "-h16-w16-")
               .replace("-h56-w56-", "-h8-w8-").replace("-h28-w28-", "-h4-w4-").replace("-h14-w14-", "-h2-w2-")
               for l in json.load(open(sys.argv[1]))["layers"]})
json.dump({"torch": "0.0-test", "threads": 2, "layers": [{"key": k, "ms": 1.0} for k in keys]}, open(sys.argv[2], "w"))
PY
if "$T" conv bench "${SMALL[@]}" --e2e-repeats 2 --torch "$tmp/torch.json" --json >"$tmp/b.json" 2>"$tmp/err" &&
  python3 - "$tmp/b.json" <<'PY'
import json, math, sys
b = json.load(open(sys.argv[1]))
assert len(b["layers"]) == 13 and b["threads"] == 2 and b["torch_version"] == "0.0-test"
t = b["total_ms"]
for k in ("auto", "direct", "im2col", "kn2row", "implicit", "winograd_f2", "winograd_f4", "fft", "onednn_direct",
          "onednn_winograd", "onednn_auto", "onednn", "openblas", "torch"):
    assert isinstance(t.get(k), (int, float)) and t[k] > 0, (k, t.get(k))
assert abs(t["torch"] - 13.0) < 1e-9, t["torch"]
assert t["onednn"] == min(t["onednn_direct"], t["onednn_winograd"], t["onednn_auto"])
assert abs(b["speedup_vs_onednn"] - t["onednn"] / t["auto"]) < 1e-9
assert abs(b["speedup_vs_torch"] - t["torch"] / t["auto"]) < 1e-9
assert b["e2e"]["forward_ms"] > 0 and b["e2e"]["conv_ms"] > 0
w = b["winograd_vs_direct"]  # the layers the selection gave Winograd vs direct's best rate
assert w["shapes"] == len({l["key"] for l in b["layers"] if l["chosen"].startswith("winograd")}), w
assert w["shapes"] == 0 or (w["winograd_min_gflops"] > 0 and isinstance(w["min_above_direct_best"], bool)), w
assert w["direct_best_gflops"] > 0 and b["gflops_are"].startswith("effective"), (w, b.get("gflops_are"))
for l in b["layers"]:
    assert l["chosen"] in l["ms"] and l["why"] and l["gflops"] > 0 and "pct_peak" in l, l
    assert "onednn_direct" in l["ms"] and "torch" in l["ms"], l["ms"].keys()
    assert all(v < 1e-3 for v in l.get("rel_diff", {}).values()), l["rel_diff"]
PY
then ok; else bad "conv bench --json: $(cat "$tmp/err")"; fi
"$T" conv bench "${SMALL[@]}" --torch "$tmp/missing.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "missing.json" "$tmp/err"; then ok; else bad "missing --torch file exited $rc: $(cat "$tmp/err")"; fi
if "$T" conv bench "${SMALL[@]}" --no-baselines --no-e2e >"$tmp/b.txt" 2>"$tmp/err" && grep -q 'selection (why)' "$tmp/b.txt" &&
  grep -q 'auto (per-layer selection)' "$tmp/b.txt"; then ok; else bad "conv bench text: $(cat "$tmp/err")"; fi

finish cli_conv
