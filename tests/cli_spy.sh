#!/usr/bin/env bash
# tessera spy: PNG and SVG outputs exist and start with the right magic, --json describes the
# panels, --in reads a Matrix Market file, --perm a .npy permutation; a bad extension, bad
# options and a missing file fail with one clear line and write nothing.
# Usage: cli_spy.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_spy.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
SPEC="permute:window2d:h=16,w=16,k=5,seed=7"

# PNG: before and after rcm
if "$T" spy --pattern "$SPEC" --method rcm --size 128 --out "$tmp/a.png" >"$tmp/out" 2>"$tmp/err"; then ok; else
  bad "spy --out a.png exited $?: $(cat "$tmp/err")"; fi
if [ "$(head -c 8 "$tmp/a.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; then ok; else
  bad "a.png does not start with the PNG signature"; fi
if grep -q "wrote $tmp/a.png: 2 panels of 256x256" "$tmp/out" && grep -q "^  rcm .*bandwidth" "$tmp/out"; then ok; else
  bad "spy summary: $(cat "$tmp/out")"; fi

# SVG with two methods, --json
if "$T" spy --pattern "$SPEC" --method rcm,hilbert --out "$tmp/b.svg" --json >"$tmp/b.json" 2>"$tmp/err"; then ok; else
  bad "spy --out b.svg exited $?: $(cat "$tmp/err")"; fi
if head -c 5 "$tmp/b.svg" | grep -q '^<?xml' && grep -q '<svg ' "$tmp/b.svg" && tail -n 1 "$tmp/b.svg" | grep -q '^</svg>$'; then
  ok; else bad "b.svg is not an SVG document: $(head -c 200 "$tmp/b.svg")"; fi
if python3 - "$tmp/b.json" "$tmp/b.svg" <<'PY'
import json, sys
import xml.etree.ElementTree as ET
j = json.load(open(sys.argv[1]))
assert j["format"] == "svg" and j["rows"] == 256 and j["cols"] == 256 and j["nnz"] > 0, j
p = j["panels"]
assert [x["method"] for x in p] == ["none", "rcm", "hilbert"], p
for x in p:
    assert x["bandwidth"] >= 0 and 0 < x["tiles_nonempty"] <= x["tiles_total"] == 256, x
assert p[1]["bandwidth"] < p[0]["bandwidth"], "rcm should shrink the bandwidth of a shuffled window pattern"
ET.parse(sys.argv[2])  # well-formed XML
PY
then ok; else bad "spy --json / svg content: $(head -c 1500 "$tmp/b.json")"; fi

# --in a Matrix Market file, --perm a .npy permutation (reversal), --method none
printf '%%%%MatrixMarket matrix coordinate pattern general\n4 4 5\n1 1\n2 2\n3 3\n4 4\n1 4\n' >"$tmp/m.mtx"
python3 - "$tmp/rev.npy" <<'PY'
import struct, sys
hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<4i", 3, 2, 1, 0))
PY
if "$T" spy --in "$tmp/m.mtx" --perm "$tmp/rev.npy" --out "$tmp/c.png" --json >"$tmp/c.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["panels"]; assert [x["method"] for x in p]==["none","perm"] and p[0]["bandwidth"]==3 and p[1]["bandwidth"]==3, p' "$tmp/c.json"
then ok; else bad "spy --in --perm: $(cat "$tmp/err" "$tmp/c.json")"; fi
if "$T" spy --in "$tmp/m.mtx" --out "$tmp/d.svg" --json >"$tmp/d.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["panels"]; assert len(p)==1, p' "$tmp/d.json"
then ok; else bad "spy --in without a method should draw one panel: $(cat "$tmp/err")"; fi

# a bad extension: exit 2, one line naming it, nothing written
"$T" spy --pattern "$SPEC" --out "$tmp/x.jpg" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "'.jpg'" "$tmp/err" && [ ! -e "$tmp/x.jpg" ] && [ ! -s "$tmp/out" ]
then ok; else bad "--out x.jpg: exit $rc, stderr: $(cat "$tmp/err")"; fi

# usage errors: exit 2 with one line
for args in "--bogus" "--out $tmp/y.png" "--pattern $SPEC" "--pattern $SPEC --in $tmp/m.mtx --out $tmp/y.png" \
  "--pattern $SPEC --method nope --out $tmp/y.png" "--pattern $SPEC --size 8 --out $tmp/y.png" \
  "--pattern $SPEC --grid 3by4 --out $tmp/y.png" "--pattern $SPEC --out $tmp/noext"; do
  # shellcheck disable=SC2086
  "$T" spy $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then ok; else
    bad "spy $args: exit $rc, stderr: $(cat "$tmp/err")"; fi
done
# failures: exit 1 with one line
for args in "--in $tmp/missing.mtx --out $tmp/y.png" "--in $tmp/m.mtx --method hilbert --out $tmp/y.png" \
  "--pattern nosuchkind:n=4 --out $tmp/y.png" "--in $tmp/m.mtx --perm $tmp/m.mtx --out $tmp/y.png"; do
  # shellcheck disable=SC2086
  "$T" spy $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -e "$tmp/y.png" ]; then ok; else
    bad "spy $args: exit $rc, stderr: $(cat "$tmp/err")"; fi
done

if "$T" spy --help >"$tmp/help" 2>&1 && grep -q "usage: tessera spy" "$tmp/help"; then ok; else bad "--help"; fi
if "$T" --help | grep -q " spy "; then ok; else bad "tessera --help does not list spy"; fi

finish cli_spy
