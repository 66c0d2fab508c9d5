#!/usr/bin/env bash
# tessera pattern: summary and --json fields, .npy/.mtx output checked by an independent reader,
# --index for permute/keep, the dense .npy size limit, --help, and bad specs / bad usage exiting 2
# with one clear line on stderr and nothing on stdout.
# Usage: cli_pattern.sh path/to/tessera
set -u
T=${1:?usage: cli_pattern.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"

# --json fields of a 2-D window pattern (8x8 grid, k=3: 9 keys per query)
if "$T" pattern window2d:h=8,w=8,k=3 --json >"$tmp/j" 2>"$tmp/err" && python3 - "$tmp/j" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["kind"] == "window2d" and j["spec"] == "window2d:h=8,w=8,k=3", j
assert (j["rows"], j["cols"], j["n"], j["nnz"]) == (64, 64, 64, 576), j
assert abs(j["density"] - 576 / 4096) < 1e-12, j["density"]
assert j["grid"] == {"h": 8, "w": 8} and j["symmetric"] is False and j["base_n"] == 64, j
assert j["row_nnz"] == {"min": 9, "max": 9, "mean": 9}, j["row_nnz"]
assert j["out"] is None and isinstance(j["generate_s"], (int, float))
PY
then ok; else bad "window2d --json: $(cat "$tmp/j" "$tmp/err")"; fi

# connectivity: no grid, n = 0
if "$T" pattern condense:cin=16,cout=8,groups=4 --json >"$tmp/j" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert (j["rows"],j["cols"],j["n"],j["nnz"])==(8,16,0,32) and j["grid"] is None, j' "$tmp/j"
then ok; else bad "condense --json: $(cat "$tmp/j" "$tmp/err")"; fi

# text summary
if "$T" pattern swin:h=8,w=8,win=4,shift=1 >"$tmp/t" 2>"$tmp/err"; then ok; else bad "swin summary exited $?"; fi
for w in "kind       swin" "shape      64 x 64" "grid       8 x 8" "nnz        " "density" "row nnz" "symmetric  yes"; do
  if grep -q -- "$w" "$tmp/t"; then ok; else bad "summary lacks '$w': $(cat "$tmp/t")"; fi
done

# .npy output: a 2-D bool array with the right cells (read without numpy)
if "$T" pattern window1d:n=50,w=4,global=2 --out "$tmp/m.npy" >/dev/null 2>"$tmp/err" && python3 - "$tmp/m.npy" <<'PY'
import ast, struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:6] == b"\x93NUMPY", "magic"
hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
off = 10 if b[6] == 1 else 12
h = ast.literal_eval(b[off:off + hl].decode("latin1"))
assert h["descr"] == "|b1" and h["shape"] == (50, 50) and not h["fortran_order"], h
d = b[off + hl:]
assert len(d) == 2500
for i in range(50):
    for j in range(50):
        want = abs(i - j) <= 2 or i < 2 or j < 2
        assert d[i * 50 + j] == want, (i, j)
PY
then ok; else bad "npy output: $(cat "$tmp/err")"; fi

# .mtx output
if "$T" pattern window2d:h=5,w=5,k=3 --out "$tmp/m.mtx" >/dev/null 2>"$tmp/err" &&
  head -1 "$tmp/m.mtx" | grep -q "%%MatrixMarket matrix coordinate pattern general" &&
  grep -v '^%' "$tmp/m.mtx" | head -1 | grep -q "^25 25 225$" && [ "$(grep -vc '^%' "$tmp/m.mtx")" -eq 226 ]
then ok; else bad "mtx output: $(head -3 "$tmp/m.mtx" 2>/dev/null) $(cat "$tmp/err")"; fi

# --index: permute writes the permutation, keep the sorted kept tokens
idx_check() { # file count mode(perm|sorted)
  python3 - "$@" <<'PY'
import ast, struct, sys
b = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", b[8:10])[0]
h = ast.literal_eval(b[10:10 + hl].decode("latin1"))
n = int(sys.argv[2])
assert h["descr"] == "<i4" and h["shape"] == (n,), h
v = list(struct.unpack("<%di" % n, b[10 + hl:10 + hl + 4 * n]))
if sys.argv[3] == "perm":
    assert sorted(v) == list(range(n)) and v != list(range(n)), v
else:
    assert v == sorted(set(v)) and all(0 <= x < 64 for x in v), v
PY
}
if "$T" pattern permute:window2d:h=8,w=8,k=3,seed=7 --index "$tmp/p.npy" >/dev/null 2>"$tmp/err" &&
  idx_check "$tmp/p.npy" 64 perm; then ok; else bad "permute --index: $(cat "$tmp/err")"; fi
if "$T" pattern keep:window2d:h=8,w=8,k=3,ratio=0.5 --index "$tmp/k.npy" --json >"$tmp/j" 2>"$tmp/err" &&
  idx_check "$tmp/k.npy" 32 sorted &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["n"]==32 and j["base_n"]==64 and j["kind"]=="keep:window2d", j' "$tmp/j"
then ok; else bad "keep --index: $(cat "$tmp/err")"; fi

# the same spec gives the same pattern
"$T" pattern random:n=300,density=0.1,seed=4 --out "$tmp/r1.mtx" >/dev/null 2>&1
"$T" pattern random:n=300,density=0.1,seed=4 --out "$tmp/r2.mtx" --threads 1 >/dev/null 2>&1
if cmp -s "$tmp/r1.mtx" "$tmp/r2.mtx" && [ "$(grep -v '^%' "$tmp/r1.mtx" | head -1)" = "300 300 9000" ]; then ok; else
  bad "random is not reproducible or has the wrong nnz"; fi

# dense .npy is refused above 16384^2 cells (and nothing is written); .mtx is fine
"$T" pattern random:n=20000,density=0.00001 --out "$tmp/big.npy" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "too large for a dense .npy" "$tmp/err" && grep -q ".mtx" "$tmp/err" &&
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -e "$tmp/big.npy" ]; then ok; else bad "big .npy: exit $rc, $(cat "$tmp/err")"; fi
if "$T" pattern random:n=20000,density=0.00001 --out "$tmp/big.mtx" >/dev/null 2>&1 && [ -s "$tmp/big.mtx" ]; then ok; else
  bad "big .mtx"; fi

# bad specs and bad usage: exit 2, one line naming the problem, nothing on stdout
check_usage() { # expected-substring args...
  local want=$1
  shift
  "$T" pattern "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ] && grep -qF -- "$want" "$tmp/err"; then ok; else
    bad "pattern $*: exit $rc, stderr: $(cat "$tmp/err"), expected '$want'"; fi
}
check_usage "window2d: k must be odd, got 4" window2d:h=8,w=8,k=4
check_usage "window2d: unknown key 'q'" window2d:h=8,w=8,k=3,q=1
check_usage "window2d: missing key h" window2d:w=8,k=3
check_usage "unknown pattern kind 'nope'" nope:n=3
check_usage "random: n*n overflows" random:n=5000000000,density=0.5
check_usage "permute: unknown key 'w'" permute:window2d:h=4,seed=7,w=4,k=3
check_usage "missing SPEC" --json
check_usage "unknown option '--bogus'" window1d:n=4,w=1 --bogus
check_usage "one SPEC expected" window1d:n=4,w=1 window1d:n=5,w=1
check_usage "expected a .npy or .mtx file name" window1d:n=4,w=1 --out x.txt
check_usage "option --out needs a value" window1d:n=4,w=1 --out
check_usage "connectivity pattern" condense:cin=8,cout=4,groups=2 --index "$tmp/i.npy"

# --help lists the kinds; tessera --help lists the command
if "$T" pattern --help >"$tmp/h" 2>&1 && grep -q "usage: tessera pattern" "$tmp/h" && grep -q "unstructconv:cin,cout,keep" "$tmp/h" &&
  grep -q "permute:SPEC" "$tmp/h"; then ok; else bad "pattern --help: $(head -5 "$tmp/h")"; fi
if "$T" --help | grep -q "pattern"; then ok; else bad "tessera --help does not list pattern"; fi

finish cli_pattern
