#!/usr/bin/env bash
# tessera hwinfo: --json is valid JSON with the profile's fields, the profile file is written and
# re-read by --cached, --help exits 0, bad usage exits 2 with one line on stderr.
# Usage: cli_hwinfo.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_hwinfo.sh path/to/tessera}
CACHE=${TESSERA_CACHE:-$(mktemp -d)}/cli_hwinfo
mkdir -p "$CACHE"
# the default thread count is 2 here, whatever the machine: the profiles are artifacts of kind
# "machine", machine/t2.json the 2-thread one and machine/t1.json the 1-thread one
export TESSERA_CACHE=$CACHE TESSERA_QUIET=1 TESSERA_THREADS=2
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"

# a full measurement, saved to the cache
if "$T" hwinfo --json --threads 2 >"$tmp/out.json" 2>"$tmp/err"; then ok; else bad "hwinfo --json exited $?: $(cat "$tmp/err")"; fi
if python3 - "$tmp/out.json" "$CACHE/machine/t2.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
need = ["peak_gflops_fp32", "peak_gflops_fp32_1t", "bandwidth_gbs", "bandwidth_gbs_1t", "threads", "isa",
        "cpu_model", "l1d_bytes", "l2_bytes", "l3_bytes", "date", "kernels", "profile_path"]
missing = [k for k in need if k not in j]
assert not missing, f"missing fields {missing}"
assert isinstance(j["isa"], list) and all(isinstance(x, str) for x in j["isa"]) and j["isa"], "isa must be a list of names"
for k in ["peak_gflops_fp32", "peak_gflops_fp32_1t", "bandwidth_gbs", "bandwidth_gbs_1t"]:
    assert isinstance(j[k], (int, float)) and j[k] > 0, f"{k} = {j[k]!r}"
assert j["threads"] == 2, f"threads {j['threads']}"
assert j["l1d_bytes"] > 0, "l1d_bytes"
assert j["profile_path"] == sys.argv[2], f"profile_path {j['profile_path']} != {sys.argv[2]}"
assert j["saved"] is True and j["source"] == "measured"
env = json.load(open(sys.argv[2]))
assert env["artifact"] == "machine" and env["key"] == "t2" and env["provenance"]["threads"] == 2, "artifact envelope"
assert len(env["provenance"]["profile"]) == 16, "the envelope names the profile's key"
saved = env["data"]
for k in need[:-1]:
    assert saved[k] == j[k], f"saved {k} differs"
assert saved["format"] == "tessera machine profile" and "tessera_version" in saved and "host" in saved
PY
then ok; else bad "hwinfo --json output or saved profile: $(head -c 2000 "$tmp/out.json")"; fi

# --cached serves the saved profile (same date), without measuring
if "$T" hwinfo --json --threads 2 --cached >"$tmp/cached.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["source"]=="cached" and a["date"]==b["date"] and a["peak_gflops_fp32"]==b["peak_gflops_fp32"]' "$tmp/cached.json" "$tmp/out.json"
then ok; else bad "hwinfo --cached did not reuse the profile: $(cat "$tmp/cached.json" "$tmp/err")"; fi

# a corrupt cache file: --cached says so on stderr, measures, and replaces it; the 1-thread profile
# has its own file, and the 2-thread one stays as it was
two=$(cat "$CACHE/machine/t2.json")
echo '{ "version": 1, ' >"$CACHE/machine/t1.json"
if "$T" hwinfo --cached --quick --threads 1 >"$tmp/table" 2>"$tmp/err" && grep -q "ignoring the cached profile" "$tmp/err" &&
  python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["data"]["threads"] == 1' "$CACHE/machine/t1.json" &&
  [ "$two" = "$(cat "$CACHE/machine/t2.json")" ]
then ok; else bad "corrupt cache: $(cat "$tmp/err")"; fi

# the human table names every figure and the file
for w in "cpu" "isa" "threads" "caches" "peak fp32" "bandwidth" "profile" "GFLOP/s" "GB/s" "$CACHE/machine/t1.json"; do
  if grep -q -- "$w" "$tmp/table"; then ok; else bad "table lacks '$w': $(cat "$tmp/table")"; fi
done

# --no-save leaves the file alone
before=$(cat "$CACHE/machine/t1.json")
if "$T" hwinfo --no-save --quick --threads 1 >"$tmp/table" 2>/dev/null && [ "$before" = "$(cat "$CACHE/machine/t1.json")" ] &&
  grep -q "not saved" "$tmp/table"; then ok; else bad "--no-save wrote the profile or did not say so"; fi

# --help, bad usage
if "$T" hwinfo --help >"$tmp/help" 2>&1 && grep -q "usage: tessera hwinfo" "$tmp/help"; then ok; else bad "--help"; fi
for args in "--bogus" "--threads" "--threads 0" "--threads x" "extra"; do
  # shellcheck disable=SC2086
  "$T" hwinfo $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then ok; else
    bad "hwinfo $args: exit $rc, stderr: $(cat "$tmp/err")"; fi
done
if "$T" --help | grep -q "hwinfo"; then ok; else bad "tessera --help does not list hwinfo"; fi

finish cli_hwinfo
