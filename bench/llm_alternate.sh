#!/usr/bin/env bash
# Two or more builds (or environment settings) of the LLM decode compared on a shared, noisy VM:
# `bench_llm_placement --rounds 4` of each variant in turn for SECONDS seconds, every round tagged
# with where the two vCPUs sat (one CCD / two CCDs, from the cache-line transfer time the round
# measured), then per placement and variant the median read-test GB/s, kernels' stream GB/s,
# decode tok/s (p25-p75) and % of the round's read test. The placement of the vCPUs moves within
# minutes on this host, so only rounds of the same placement are compared.
#
#   bench/llm_alternate.sh SECONDS MODEL name:path/to/bench_llm_placement[:VAR=v,VAR2=w] ...
#
# e.g. a base build in a git worktree against this tree:
#   git worktree add /tmp/wbase HEAD~1 && cmake -S /tmp/wbase -B /tmp/bbase -DCMAKE_BUILD_TYPE=Release \
#     && cmake --build /tmp/bbase --target bench_llm_placement
#   bench/llm_alternate.sh 420 $M base:/tmp/bbase/bench/bench_llm_placement new:build/bench/bench_llm_placement
set -u
[ $# -ge 3 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
SECS=$1
M=$2
shift 2
[ -f "$M" ] || { echo "no model at $M (scripts/get-smollm2.sh installs it)" >&2; exit 1; }
log=$(mktemp)
end=$((SECONDS + SECS))
while [ $SECONDS -lt "$end" ]; do
  for v in "$@"; do
    IFS=: read -r name bin envs <<<"$v"
    [ -x "$bin" ] || { echo "no binary $bin" >&2; exit 1; }
    env ${envs//,/ } "$bin" --model "$M" --rounds 4 2>/dev/null | grep -E '^ +[0-9]+ ' | sed "s/^/$name /" >>"$log"
  done
done
python3 - "$log" <<'EOF'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 8:
        continue
    x0, x1 = map(float, f[2].split('/'))
    pl = 'one CCD' if x0 < 60 and x1 < 60 else 'two CCDs' if x0 > 100 and x1 > 100 else 'mixed'
    read, stream, tps = map(float, f[3:6])
    rows.setdefault((pl, f[0]), []).append((read, stream, tps, float(f[7].rstrip('%'))))
print(f"{'placement':9} {'variant':10} {'rounds':>6} {'read':>6} {'stream':>6} {'tok/s':>7} {'(p25-p75)':>15} {'% read':>7}")
for (pl, v), r in sorted(rows.items()):
    q = sorted(x[2] for x in r)
    med = lambda i: st.median(x[i] for x in r)
    print(f"{pl:9} {v:10} {len(r):6d} {med(0):6.1f} {med(1):6.1f} {med(2):7.1f} ({q[len(q) // 4]:6.1f}-{q[3 * len(q) // 4]:6.1f}) {med(3):6.1f}%")
EOF
rm -f "$log"
