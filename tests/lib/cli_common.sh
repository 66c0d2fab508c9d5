# Sourced by tests/cli_*.sh after `T=path/to/tessera`: the pass/fail counters and their reporters,
# a scratch directory $tmp removed on exit, and the checks every CLI test repeats.
#   ok / bad MESSAGE           count a passed / failed check (bad prints MESSAGE to stderr)
#   scratch_cache              TESSERA_CACHE=$tmp/cache, seeded with the suite's machine profiles
#                              when there is one (measuring it takes seconds)
#   expect_usage CMD ARGS...   `tessera CMD ARGS...` must exit 2 with exactly one line on stderr
#                              and nothing on stdout
#   finish NAME                print the counts; the script's status is 0 iff nothing failed
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

scratch_cache() {
  mkdir -p "$tmp/cache"
  local f
  for f in "${TESSERA_CACHE:-/nonexistent}"/machine.json "${TESSERA_CACHE:-/nonexistent}"/machine_t*.json; do
    [ -f "$f" ] && cp "$f" "$tmp/cache/"
  done
  export TESSERA_CACHE="$tmp/cache"
}

expect_usage() {
  "$T" "$@" >"$tmp/usage.out" 2>"$tmp/usage.err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/usage.err")" -eq 1 ] && [ ! -s "$tmp/usage.out" ]; then ok; else
    bad "'$*' exited $rc (want 2, one line on stderr, nothing on stdout): $(cat "$tmp/usage.err")"; fi
}

finish() {
  echo "$1: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
