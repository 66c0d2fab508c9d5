#!/usr/bin/env bash
# tessera reorder / tessera blocks: --json carries the report's fields with sane values, the
# permutation file round-trips into `blocks --perm`, block files hold dense blocks that cover the
# pattern, rectangular patterns get two permutations, --help exits 0, and bad usage exits 2 with
# one line on stderr (failures of the operation itself exit 1).
# Usage: cli_reorder.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_reorder.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
P=permute:window2d:h=16,w=16,k=5,seed=3

# reorder --json: fields, values, the permutation file
if "$T" reorder --pattern "$P" --method rcm --tile 8 --json --out "$tmp/p.npy" >"$tmp/r.json" 2>"$tmp/err"; then ok; else
  bad "reorder rcm exited $?: $(cat "$tmp/err")"; fi
if python3 - "$tmp/r.json" "$tmp/p.npy" <<'PY'
import json, sys, struct
j = json.load(open(sys.argv[1]))
need = ["n", "nnz", "bandwidth_before", "bandwidth_after", "blocks", "fill_ratio", "tiles_empty", "tiles_mixed",
        "tiles_full", "tiles_empty_before", "tiles_mixed_before", "tiles_full_before", "method", "reorder_ms", "tile",
        "profile_before", "profile_after", "density_hist", "coverage", "residue_nnz"]
missing = [k for k in need if k not in j]
assert not missing, f"missing {missing}"
assert j["n"] == 256 and j["nnz"] > 0 and j["method"] == "rcm" and j["tile"] == 8, j
assert j["bandwidth_after"] < j["bandwidth_before"] / 3, (j["bandwidth_before"], j["bandwidth_after"])
assert j["tiles_empty"] + j["tiles_mixed"] + j["tiles_full"] == 32 * 32
assert j["tiles_empty_before"] + j["tiles_mixed_before"] + j["tiles_full_before"] == 32 * 32
assert j["tiles_mixed"] + j["tiles_full"] < j["tiles_mixed_before"] + j["tiles_full_before"]
assert j["fill_ratio"] >= 1 and j["blocks"] == sum(j["density_hist"]) and j["reorder_ms"] >= 0
b = open(sys.argv[2], "rb").read()
assert b[:6] == b"\x93NUMPY", "not a .npy file"
hl = struct.unpack("<H", b[8:10])[0]
hdr = b[10:10 + hl].decode()
assert "'<i4'" in hdr and "(256,)" in hdr, hdr
perm = struct.unpack("<256i", b[10 + hl:])
assert sorted(perm) == list(range(256)), "not a permutation"
PY
then ok; else bad "reorder --json / perm file: $(head -c 1500 "$tmp/r.json")"; fi

# blocks --perm: the same relabelling gives the same bandwidth; dp blocks written to a file
if "$T" blocks --pattern "$P" --perm "$tmp/p.npy" --tile 8 --json >"$tmp/b.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert b["method"]=="perm" and b["bandwidth_after"]==a["bandwidth_after"] and b["tiles_full"]==a["tiles_full"], (a, b)' "$tmp/r.json" "$tmp/b.json"
then ok; else bad "blocks --perm: $(cat "$tmp/err" "$tmp/b.json" | head -c 1500)"; fi
if "$T" blocks --pattern "$P" --method ic --extract dp --density 0.7 --json --out "$tmp/blocks.json" >"$tmp/b2.json" 2>"$tmp/err" &&
  python3 - "$tmp/b2.json" "$tmp/blocks.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); f = json.load(open(sys.argv[2]))
assert j["method"] == "ic" and j["extract"] == "dp" and j["density"] == 0.7 and j["tile"] == 64, j
assert len(f["blocks"]) == j["blocks"] and f["residue_nnz"] == j["residue_nnz"]
assert sum(b[4] for b in f["blocks"]) + f["residue_nnz"] == j["nnz"]
for r0, c0, h, w, nz in f["blocks"]:
    assert nz >= 0.7 * h * w and 0 <= r0 and r0 + h <= 256 and 0 <= c0 and c0 + w <= 256, (r0, c0, h, w, nz)
PY
then ok; else bad "blocks --extract dp --out: $(cat "$tmp/err" "$tmp/b2.json" | head -c 1500)"; fi

# auto says which candidate won, and it is the one with the fewest non-empty tiles
if "$T" reorder --pattern "$P" --json >"$tmp/a.json" 2>"$tmp/err" &&
  python3 -c '
import json,sys
j=json.load(open(sys.argv[1])); c=j["auto_candidates"]
assert j["method_requested"]=="auto" and j["method"] in c and "morton" in c and "metis" not in c, j
assert c[j["method"]]["tiles_nonempty"]==min(v["tiles_nonempty"] for v in c.values())==j["tiles_mixed"]+j["tiles_full"]' "$tmp/a.json"
then ok; else bad "reorder auto: $(cat "$tmp/err" "$tmp/a.json" | head -c 1500)"; fi

# morton: generated patterns carry grid positions; a file needs --grid
if "$T" reorder --pattern "$P" --method morton >"$tmp/out" 2>"$tmp/err" && grep -q "bandwidth" "$tmp/out" &&
  grep -q "tiles" "$tmp/out" && grep -q "blocks" "$tmp/out"; then ok; else bad "reorder morton text: $(cat "$tmp/err" "$tmp/out")"; fi
"$T" pattern window2d:h=16,w=16,k=5 --out "$tmp/w.mtx" >/dev/null 2>&1
"$T" reorder --in "$tmp/w.mtx" --method hilbert >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "grid" "$tmp/err"; then ok; else
  bad "hilbert without grid: exit $rc: $(cat "$tmp/err")"; fi
if "$T" reorder --in "$tmp/w.mtx" --method hilbert --grid 16x16 --json >"$tmp/h.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["method"]=="hilbert" and j["nnz"]>0' "$tmp/h.json"
then ok; else bad "hilbert --grid: $(cat "$tmp/err")"; fi

# rectangular: two permutations
C=condense:cin=32,cout=64,groups=4,seed=2
"$T" reorder --pattern "$C" --method hc --out "$tmp/r.npy" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "col-out" "$tmp/err"; then ok; else bad "rectangular --out without --col-out: exit $rc $(cat "$tmp/err")"; fi
if "$T" reorder --pattern "$C" --method hc --distance hamming --out "$tmp/r.npy" --col-out "$tmp/c.npy" --json >"$tmp/rc.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["symmetric"] is False and j["rows"]==64 and j["cols"]==32 and j["n"]==0' "$tmp/rc.json" &&
  "$T" blocks --pattern "$C" --perm "$tmp/r.npy" --col-perm "$tmp/c.npy" >/dev/null 2>"$tmp/err"
then ok; else bad "rectangular reorder: $(cat "$tmp/err")"; fi

# --help, bad usage (exit 2, one line), failures (exit 1)
for c in reorder blocks; do
  if "$T" $c --help >"$tmp/help" 2>&1 && grep -q "usage: tessera $c" "$tmp/help" && grep -q -- "--method" "$tmp/help"; then ok; else bad "$c --help"; fi
  if "$T" --help | grep -q "$c"; then ok; else bad "tessera --help does not list $c"; fi
done
while IFS= read -r args; do
  # shellcheck disable=SC2086
  "$T" $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then ok; else
    bad "$args: exit $rc, stderr: $(cat "$tmp/err")"; fi
done <<EOF
reorder --pattern $P --method bogus
reorder --pattern $P --method
reorder --method rcm
reorder --in $tmp/w.mtx --pattern $P
reorder --pattern $P --tile 0
reorder --pattern $P --tau 2
reorder --pattern $P --mode diagonal
reorder --pattern $P --method hc --distance cosine
reorder --pattern $P --grid 16by16
reorder --pattern $P --extra
reorder --pattern window2d:h=16,w=16,k=4
reorder --pattern $C --mode symmetric --method rcm
blocks --pattern $P --method bogus
blocks --pattern $P --density 0
blocks --pattern $P --extract fancy
blocks --pattern $P --max-group 5000
blocks --pattern $P --perm $tmp/p.npy --method rcm
blocks --pattern $C --perm $tmp/p.npy
blocks --in $tmp/w.txt
EOF
"$T" reorder --in "$tmp/missing.mtx" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "missing.mtx" "$tmp/err"; then ok; else
  bad "missing file: exit $rc $(cat "$tmp/err")"; fi

finish cli_reorder
