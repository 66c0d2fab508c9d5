#!/usr/bin/env bash
# The hybrid MapReduce fault target (issue 38): a Spark worker killed mid-job, the job still
# completes with the correct output. Starts the standalone cluster (scripts/spark-cluster.sh: a
# master and two one-core workers), runs WordCount over Hamlet in 24 blocks through
# `tessera hybrid run --engine spark` in the background, waits until a few of the job's tasks have
# finished (the executors' own logs under the cluster's state folder, counted from the driver's
# "round 1 of 1 started"), SIGKILLs worker 1 with its executor and the executor's Python workers
# and task subprocesses (a lost machine), and checks that the run exits 0 with "output_ok": true in
# its JSON (Spark re-runs the lost tasks on the surviving executor; tessera compares the result
# with its own reference pass). The cluster is stopped on exit.
# Skipped (exit 77) without java, the Spark venv or the text. Part of `make integration`, not of
# `make test` or CI.
#
# Usage: tests/hybrid_spark_fault.sh [path/to/tessera]      (default build/tessera)
# Environment: SPARK_STATE (as scripts/spark-cluster.sh), FAULT_AFTER_TASKS (tasks of the job
# finished before the kill; 3), FAULT_TIMEOUT (seconds for the job; 600).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=${1:-$ROOT/build/tessera}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
CLUSTER=$ROOT/scripts/spark-cluster.sh
STATE=${SPARK_STATE:-${TMPDIR:-/tmp}/tessera-spark}
export SPARK_STATE=$STATE
AFTER=${FAULT_AFTER_TASKS:-3}
TIMEOUT=${FAULT_TIMEOUT:-600}

command -v java >/dev/null || skip_all "no java (scripts/spark-cluster.sh install)"
VENV_PY=${SPARK_VENV:-$ROOT/bench/peers/.venv-spark}/bin/python
{ [ -x "$VENV_PY" ] && "$VENV_PY" -c 'import pyspark' 2>/dev/null; } ||
  skip_all "no pyspark venv at ${SPARK_VENV:-bench/peers/.venv-spark} (scripts/spark-cluster.sh install)"
command -v curl >/dev/null || skip_all "no curl (the cluster script polls the master with it)"
[ -x "$T" ] || { echo "FAIL: $T: not an executable (build tessera first)" >&2; exit 1; }
TEXT=$("$ROOT/scripts/get-llm-text.sh" 2>"$tmp/text.err") || skip_all "no text: $(tail -1 "$tmp/text.err")"

job=""
cleanup() {
  if [ -n "$job" ] && kill -0 "$job" 2>/dev/null; then kill "$job" 2>/dev/null; wait "$job" 2>/dev/null; fi
  "$CLUSTER" stop >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

# Finished tasks so far, every executor of every application on the cluster.
finished() { cat "$STATE"/work-*/app-*/*/stderr 2>/dev/null | grep -c 'Executor: Finished task'; }

"$CLUSTER" start --workers 2 --cores 1 >"$tmp/master" 2>"$tmp/start.err" ||
  { echo "FAIL: the cluster did not start: $(tail -3 "$tmp/start.err")" >&2; exit 1; }
MASTER=$(tail -1 "$tmp/master")

t0=$(date +%s)
"$T" hybrid run --engine spark --spark-master "$MASTER" --slots 2 --job wordcount --input "$TEXT" --blocks 24 --json >"$tmp/run.json" 2>"$tmp/run.err" &
job=$!
killed=0
# The driver says when its first round starts (after the executors' warm-up job); count from there.
while kill -0 "$job" 2>/dev/null && ! grep -q 'round 1 of [0-9]* started' "$tmp/run.err"; do
  [ $(($(date +%s) - t0)) -lt "$TIMEOUT" ] || break
  sleep 0.1
done
base=$(finished)
while kill -0 "$job" 2>/dev/null; do
  if [ $(($(finished) - base)) -ge "$AFTER" ]; then
    "$CLUSTER" kill-worker 1 2>"$tmp/kill.err" && killed=1
    break
  fi
  [ $(($(date +%s) - t0)) -lt "$TIMEOUT" ] || break
  sleep 0.1
done
if [ $killed = 1 ] && kill -0 "$job" 2>/dev/null; then ok
else bad "worker 1 was not killed while the job ran (killed=$killed, $(($(finished) - base)) tasks finished; $(cat "$tmp/kill.err" 2>/dev/null))"; fi
echo "hybrid_spark_fault: $(cat "$tmp/kill.err" 2>/dev/null) after $(($(finished) - base)) finished tasks, $(($(date +%s) - t0)) s into the run"

while kill -0 "$job" 2>/dev/null && [ $(($(date +%s) - t0)) -lt "$TIMEOUT" ]; do sleep 0.5; done
if kill -0 "$job" 2>/dev/null; then
  bad "the job is still running after ${TIMEOUT}s"
  kill "$job" 2>/dev/null
fi
wait "$job"
rc=$?
job=""
if [ $rc -eq 0 ]; then ok; else bad "tessera hybrid run exited $rc: $(tail -5 "$tmp/run.err")"; fi
if python3 - "$tmp/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r.get("output_ok") is True, "output_ok is %r" % r.get("output_ok")
print("hybrid_spark_fault: output: %s" % r.get("output_note", ""))
PY
then ok; else bad "the run's JSON: $(head -c 600 "$tmp/run.json")"; fi
"$CLUSTER" status >"$tmp/status" 2>&1
if grep -q '^worker-1 dead' "$tmp/status"; then ok; else bad "worker 1 is not dead after the kill: $(cat "$tmp/status")"; fi
echo "hybrid_spark_fault: the job took $(($(date +%s) - t0)) s; $(($(finished) - base)) tasks finished on the executors from the start of its round (24 map blocks, reduce tasks and re-runs included)"
finish hybrid_spark_fault
