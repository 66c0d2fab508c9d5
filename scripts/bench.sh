#!/usr/bin/env bash
# Runs the benchmark programs side by side with their baselines and prints their tables.
# Figures recorded in docs/notes/BENCHMARKS.md come from these commands.
set -euo pipefail
B=${1:-build}
"$B/tessera" hwinfo
for b in "$B"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo
  echo "== $(basename "$b")"
  "$b"
done
