# Sourced by tests/cli_*.sh after `T=path/to/tessera`: the pass/fail counters and their reporters,
# a scratch directory $tmp removed on exit, and the checks every CLI test repeats.
#   ok / bad MESSAGE           count a passed / failed check (bad prints MESSAGE to stderr)
#   scratch_cache              TESSERA_CACHE=$tmp/cache, seeded with the suite's machine profiles
#                              when there is one (measuring it takes seconds)
#   expect_usage CMD ARGS...   `tessera CMD ARGS...` must exit 2 with exactly one line on stderr
#                              and nothing on stdout
#   skip_part MESSAGE          say that a part of the script did not run ("SKIPPED (part): ...")
#   skip_all MESSAGE           the whole script cannot run: "SKIPPED: ...", exit 77 (CTest: skipped)
#   finish NAME                print the counts; the script's status is 0 iff nothing failed and
#                              at least one check ran (77 when nothing ran but parts were skipped)
fail=0 pass=0 skipped=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
skip_part() { echo "SKIPPED (part): $*"; skipped=$((skipped + 1)); }
skip_all() { echo "SKIPPED: $*"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

scratch_cache() {
  mkdir -p "$tmp/cache"
  local f
  [ -d "${TESSERA_CACHE:-/nonexistent}/machine" ] && cp -r "$TESSERA_CACHE/machine" "$tmp/cache/"
  export TESSERA_CACHE="$tmp/cache"
}

expect_usage() {
  "$T" "$@" >"$tmp/usage.out" 2>"$tmp/usage.err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/usage.err")" -eq 1 ] && [ ! -s "$tmp/usage.out" ]; then ok; else
    bad "'$*' exited $rc (want 2, one line on stderr, nothing on stdout): $(cat "$tmp/usage.err")"; fi
}

# The command (rest) fails with exit 1 and one line on stderr containing $1.
expect_error() {
  local want=$1
  shift
  "$T" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 1 ] && grep -q "$want" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then ok; else bad "$*: rc=$rc $(cat "$tmp/err")"; fi
}

finish() {
  if [ "$skipped" -gt 0 ]; then echo "$1: $pass passed, $fail failed, $skipped skipped parts"
  else echo "$1: $pass passed, $fail failed"; fi
  [ "$fail" -eq 0 ] || return 1
  if [ "$pass" -eq 0 ]; then
    [ "$skipped" -gt 0 ] && { echo "SKIPPED: every part of $1 was skipped"; exit 77; }
    echo "$1: no check ran: a test with zero checks fails" >&2
    return 1
  fi
}
