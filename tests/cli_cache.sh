#!/usr/bin/env bash
# tessera cache: list shows stored artifacts (kind, key, version, provenance), a corrupt one as bad,
# clear --kind removes only that kind, clear removes the rest; bad usage exits 2.
# Usage: cli_cache.sh path/to/tessera
set -u
T=${1:?usage: cli_cache.sh path/to/tessera}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE="$tmp/c" TESSERA_QUIET=1
mkdir -p "$TESSERA_CACHE/kind-a" "$TESSERA_CACHE/kind-b"
env_a='{"artifact":"kind-a","version":2,"key":"k1","provenance":{"cpu_model":"Test CPU","kernels":"avx2","threads":2,"date":"2026-12-07T00:00:00Z"},"data":{"x":1}}'
echo "$env_a" >"$TESSERA_CACHE/kind-a/k1.json"
echo '{"artifact":"kind-b","version":1,"key":"k2","data":[1]}' >"$TESSERA_CACHE/kind-b/k2.json"
echo '{"artifact":' >"$TESSERA_CACHE/kind-b/k3.json"

if "$T" cache list >"$tmp/list" 2>"$tmp/err"; then ok; else bad "cache list exited $?: $(cat "$tmp/err")"; fi
grep -q '3 artifacts' "$tmp/list" && ok || bad "list does not count 3 artifacts: $(cat "$tmp/list")"
grep -E '^kind-a +k1 +2 .*avx2 +2 +Test CPU' "$tmp/list" >/dev/null && ok || bad "list row of kind-a/k1: $(cat "$tmp/list")"
grep -E '^kind-b +k3 .*bad' "$tmp/list" >/dev/null && ok || bad "the corrupt k3 is not listed as bad: $(cat "$tmp/list")"

if "$T" cache list --json --kind kind-a >"$tmp/list.json" 2>"$tmp/err"; then ok; else bad "cache list --json exited $?"; fi
if python3 - "$tmp/list.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert len(a) == 1 and a[0]["kind"] == "kind-a" and a[0]["key"] == "k1" and a[0]["version"] == 2, a
assert a[0]["threads"] == 2 and a[0]["cpu_model"] == "Test CPU" and not a[0]["bad"], a
PY
then ok; else bad "list --json: $(cat "$tmp/list.json")"; fi

"$T" cache clear --kind kind-b >"$tmp/out" 2>"$tmp/err" && grep -q 'removed 2 artifacts of kind kind-b' "$tmp/out" && ok ||
  bad "clear --kind kind-b: $(cat "$tmp/out" "$tmp/err")"
[ -f "$TESSERA_CACHE/kind-a/k1.json" ] && [ ! -e "$TESSERA_CACHE/kind-b" ] && ok || bad "clear --kind touched another kind"
echo keep >"$TESSERA_CACHE/unrelated.txt"
"$T" cache clear >"$tmp/out" 2>"$tmp/err" && grep -q 'removed 1 artifact' "$tmp/out" && ok || bad "clear: $(cat "$tmp/out" "$tmp/err")"
[ -f "$TESSERA_CACHE/unrelated.txt" ] && ok || bad "clear removed a file that is not an artifact"
"$T" cache list | grep -q '0 artifacts' && ok || bad "list after clear"

expect_usage cache
expect_usage cache frobnicate
expect_usage cache list --bogus
"$T" cache list --kind '../x' >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] && grep -q 'not a name' "$tmp/err" && ok || bad "a kind with a path in it: $(cat "$tmp/err")"
"$T" cache --help | grep -q 'usage: tessera cache list' && ok || bad "cache --help"
finish cli_cache
