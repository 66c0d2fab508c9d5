#!/usr/bin/env bash
# `make integration`: the hybrid MapReduce controller (issue 38) on a real engine. Installs what is
# missing (scripts/spark-cluster.sh install: pyspark 4.3.0 in bench/peers/.venv-spark, Debian's
# openjdk-17), starts Spark standalone on this machine (a master and two one-core workers: two
# task slots, the fixed container pool), runs `tessera hybrid run --engine spark` for WordCount
# and Grep over Hamlet repeated to 350 MB (scripts/get-llm-text.sh) and KMeans and the GEMM job over
# generated data, 24 blocks each, in the modes auto, cpu, gpu and static:1 (the issue's baselines:
# CPU-only, accelerator-only, a static hybrid split) and cpu under Spark's own dynamic allocation
# (executors added on backlog, released when idle), one JSON per run under OUT, then the fault test
# (tests/hybrid_spark_fault.sh: a worker killed mid-job). The cluster is stopped on exit, failed
# or not. A run that fails is reported and the others still run; the exit status is 1 if any
# failed.
#
#   scripts/hybrid-integration.sh [path/to/tessera]      (default build/tessera)
#
# Environment: HYBRID_OUT (default results/<UTC date>-hybrid-spark), HYBRID_MODES ("auto cpu gpu
# static:1 cpu+dyn"; +dyn: with --dynamic-allocation),
# HYBRID_JOBS ("wordcount grep kmeans gemm"), HYBRID_KMEANS_INPUT and HYBRID_GEMM_INPUT (the
# generated data, `gen:` = tessera's default sizes), HYBRID_FAULT=0 to skip the fault test,
# SPARK_STATE (scripts/spark-cluster.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
T=${1:-build/tessera}
OUT=${HYBRID_OUT:-results/$(date -u +%F)-hybrid-spark}
MODES=${HYBRID_MODES:-auto cpu gpu static:1 cpu+dyn}
JOBS=${HYBRID_JOBS:-wordcount grep kmeans gemm}
KMEANS_INPUT=${HYBRID_KMEANS_INPUT:-gen:points=600000,d=16,k=8,seed=1}
GEMM_INPUT=${HYBRID_GEMM_INPUT:-gen:records=32768,in=1024,out=1024,seed=1}
CLUSTER=scripts/spark-cluster.sh

[ -x "$T" ] || { echo "hybrid-integration: $T: not an executable (make build)" >&2; exit 1; }
bash "$CLUSTER" install || exit 1
trap 'bash "$CLUSTER" stop' EXIT
MASTER=$(bash "$CLUSTER" start --workers 2 --cores 1 --memory 1g | tail -1) || exit 1
TEXT=$(scripts/get-llm-text.sh) || exit 1
mkdir -p "$OUT/logs"

# The setting of the runs beside them: what ran where.
SPARK_VER=$(bench/peers/.venv-spark/bin/python -c 'import pyspark; print(pyspark.__version__)')
python3 - "$OUT/meta.json" "$MASTER" "$SPARK_VER" "$(java -version 2>&1 | head -1)" "$T" <<'PY'
import json, os, platform, subprocess, sys, time
out, master, spark, java, tessera = sys.argv[1:]
def sh(*c):
    try:
        return subprocess.run(c, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
json.dump({"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
           "cpu_model": cpu, "cpus": os.cpu_count(), "commit": sh("git", "rev-parse", "HEAD"),
           "tessera_version": (sh(tessera, "version").splitlines() or [""])[0], "engine": "spark standalone", "spark_version": spark,
           "java": java, "master": master, "workers": 2, "cores_per_worker": 1, "memory_per_worker": "1g"},
          open(out, "w"), indent=1)
PY

failed=()
for job in $JOBS; do
  case $job in
    wordcount | grep) input=$TEXT; extra=(--repeat 2000) ;;
    kmeans) input=$KMEANS_INPUT; extra=(--rounds 3) ;;
    gemm) input=$GEMM_INPUT; extra=() ;;
    *) echo "hybrid-integration: unknown job $job" >&2; exit 2 ;;
  esac
  for spec in $MODES; do
    mode=${spec%+dyn}
    dyn=()
    [ "$mode" != "$spec" ] && dyn=(--dynamic-allocation)
    name=$job-${spec//[:+]/-}
    echo "hybrid-integration: $name" >&2
    t0=$(date +%s)
    if "$T" hybrid run --engine spark --spark-master "$MASTER" --slots 2 --job "$job" --input "$input" --blocks 24 "${extra[@]}" --mode "$mode" "${dyn[@]}" --json \
         --out "$OUT/$name.json" >"$OUT/logs/$name.out" 2>"$OUT/logs/$name.err"; then
      echo "hybrid-integration: $name done in $(($(date +%s) - t0)) s -> $OUT/$name.json" >&2
    else
      echo "hybrid-integration: $name FAILED (exit $?); the end of $OUT/logs/$name.err:" >&2
      tail -n 5 "$OUT/logs/$name.err" >&2
      failed+=("$name")
    fi
  done
done

if [ "${HYBRID_FAULT:-1}" != 0 ]; then
  echo "hybrid-integration: fault test" >&2
  bash tests/hybrid_spark_fault.sh "$T" 2>&1 | tee "$OUT/logs/fault.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || failed+=("fault(exit $rc)")
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "hybrid-integration: failed: ${failed[*]}" >&2
  exit 1
fi
echo "hybrid-integration: all runs done; JSON under $OUT" >&2
