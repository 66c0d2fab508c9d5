#!/usr/bin/env bash
# `tessera llm bench` under several option sets, alternated round by round on a shared, noisy
# machine (compare within one run), then per set the median decode tok/s (p25-p75), its % of the
# read test on a buffer of a decode step's size, the kernels' stream GB/s, the weight-prefetch
# distance in use, prefill tok/s, the read test of the profile's size, and the most CPUs other
# processes took during a round's timed runs (-1: unknown, e.g. an older binary).
#
#   bench/llm_bench_alternate.sh ROUNDS MODEL [BIN] -- 'NAME:[VAR=v ...] [llm bench options]' ...
#
# e.g. decode's weight prefetch (docs/notes/BENCHMARKS.md, issue 7):
#   bench/llm_bench_alternate.sh 6 $M -- none:--weight-prefetch=0 4k:--weight-prefetch=4096 auto:
# (options with a value as --opt=value; each run: --threads 2 --prompt-len 128 --gen 128 --repeats 3
# unless the set overrides them). BIN=path in a set runs that binary instead (two builds side by side:
#   bench/llm_bench_alternate.sh 8 $M -- before:BIN=/tmp/tessera_before after:)
set -u
[ $# -ge 4 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
ROUNDS=$1
M=$2
shift 2
BIN=build/tessera
if [ "$1" != "--" ]; then BIN=$1; shift; fi
[ "$1" = "--" ] || { echo "expected -- before the option sets" >&2; exit 2; }
shift
[ -x "$BIN" ] || { echo "no binary $BIN" >&2; exit 1; }
[ -f "$M" ] || { echo "no model at $M (scripts/get-smollm2.sh installs it)" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq "$ROUNDS"); do
  for v in "$@"; do
    name=${v%%:*}
    envs=()
    opts=()
    bin=$BIN
    for w in ${v#*:}; do
      if [[ $w == --* ]]; then opts+=("${w%%=*}"); [[ $w == *=* ]] && opts+=("${w#*=}");
      elif [[ $w == BIN=* ]]; then bin=${w#BIN=}; else envs+=("$w"); fi
    done
    [ -x "$bin" ] || { echo "no binary $bin" >&2; exit 1; }
    env "${envs[@]}" "$bin" llm bench --model "$M" --threads 2 --prompt-len 128 --gen 128 --repeats 3 "${opts[@]}" --json 2>/dev/null |
      python3 -c "
import json, sys
j = json.load(sys.stdin)
print('$name', j['decode_tps'], j.get('pct_bandwidth_ws', 0), j.get('stream_gbs', 0), j['weight_prefetch']['bytes'],
      j['prefill_tps'], j.get('bandwidth_gbs_run', 0), j.get('other_cpus', -1))" >>"$log" || echo "run failed: $v" >&2
  done
done
python3 - "$log" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append(list(map(float, f[1:])))
print(f"{'set':10} {'n':>3}  {'decode tok/s':>12} {'(p25-p75)':>15}  {'% ws-read':>9}  {'stream':>6}  {'prefetch':>8}  {'prefill':>7}  {'read':>5}  {'others':>6}")
for k, r in rows.items():
    q = sorted(x[0] for x in r)
    m = lambda i: st.median(x[i] for x in r)
    print(f"{k:10} {len(r):3d}  {m(0):12.1f} ({q[len(q) // 4]:6.1f}-{q[3 * len(q) // 4]:6.1f})  {m(1):8.1f}%  {m(2):6.1f}  {m(3):8.0f}  {m(4):7.1f}  {m(5):5.1f}  {max(x[6] for x in r):6.2f}")
PY
