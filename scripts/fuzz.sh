#!/usr/bin/env bash
# Runs every libFuzzer harness built in DIR (fuzz_<name> executables) for SECONDS each.
#   usage: scripts/fuzz.sh DIR SECONDS
# Seeds come from fuzz/seeds/<name>/ and are copied into a scratch corpus under the build dir
# (DIR/../fuzz-work/<name>/corpus), so the committed seeds never change. Crash reproducers land in
# DIR/../fuzz-work/<name>/artifacts. Prints one line per fuzzer; exits 1 if any fuzzer found a
# crash (or failed to run), 2 on bad usage.
set -uo pipefail

if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ]; then
  echo "usage: $0 DIR SECONDS   (DIR holds the built fuzz_* programs)" >&2
  exit 2
fi
dir=$1
secs=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -d "$dir" ] || { echo "fuzz: no such directory '$dir' (build with -DTS_FUZZ=ON first)" >&2; exit 2; }
dir=$(cd "$dir" && pwd)
work=$(dirname "$dir")/fuzz-work

shopt -s nullglob
fuzzers=()
for f in "$dir"/fuzz_*; do
  [ -f "$f" ] && [ -x "$f" ] && fuzzers+=("$f")
done
[ ${#fuzzers[@]} -gt 0 ] || { echo "fuzz: no fuzz_* programs in '$dir'" >&2; exit 2; }

failed=0
for f in "${fuzzers[@]}"; do
  prog=$(basename "$f")
  name=${prog#fuzz_}
  corpus=$work/$name/corpus
  artifacts=$work/$name/artifacts
  log=$work/$name/log.txt
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"/*
  nseeds=0
  if [ -d "$src/fuzz/seeds/$name" ]; then
    for s in "$src/fuzz/seeds/$name"/*; do
      [ -f "$s" ] && cp -f "$s" "$corpus/" && nseeds=$((nseeds + 1))
    done
  fi
  # UBSan reports abort the run (undefined behaviour is a finding, not a warning to scroll past)
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$f" "$corpus" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=("$artifacts"/*)
  ncorpus=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ] && [ ${#found[@]} -eq 0 ]; then
    printf '%-12s ok     %s runs in %ss, %s seeds, corpus %s files\n' "$prog" "${runs:-?}" "$secs" "$nseeds" "$ncorpus"
  else
    reason=$(grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error|deadly signal' "$log" | sed 's/^[= 0-9]*//')
    printf '%-12s FAILED rc=%s after %s runs: %s; artifact: %s; log: %s\n' "$prog" "$rc" "${runs:-?}" \
      "${reason:-see log}" "${found[0]:-none}" "$log"
    failed=1
  fi
done
exit $failed
