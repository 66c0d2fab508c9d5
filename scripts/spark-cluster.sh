#!/usr/bin/env bash
# A real Apache Spark in standalone mode on this machine, for the hybrid MapReduce runs (issue 38):
# a master and N workers (default 2, one core each: two task slots, the fixed container pool), the
# master on 127.0.0.1, worker I on 127.0.0.(I+1) (a loopback address each: one "host" per worker).
# Spark comes from PyPI's pyspark (its source distribution holds Spark's jars, about 460 MB) in
# bench/peers/.venv-spark; Java is Debian's openjdk-17. The pip package has bin/spark-class but
# none of the sbin/start-*.sh scripts, so the daemons are started here with spark-class, each in
# detached from the terminal (setsid), their PIDs and logs under a state folder.
#
#   scripts/spark-cluster.sh install                 venv + pyspark==4.3.0, java (apt) if missing
#   scripts/spark-cluster.sh start [--workers N] [--cores C] [--memory M]
#                                                    (defaults 2, 1, 1g) waits until the master lists
#                                                    the N workers ALIVE, prints the master URL
#   scripts/spark-cluster.sh status                  which daemons are alive (exit 1 if no master)
#   scripts/spark-cluster.sh kill-worker I           SIGKILL worker I (1-based) and everything under
#                                                    it: its executor JVM, the executor's Python
#                                                    workers and their task subprocesses (a lost
#                                                    machine, for the fault test)
#   scripts/spark-cluster.sh stop                    SIGTERM then SIGKILL every daemon and its
#                                                    children, removes the state folder; safe twice
#
# Environment: SPARK_STATE (state folder, default ${TMPDIR:-/tmp}/tessera-spark: pids, logs,
# master-url, webui-port, the workers' work folders), SPARK_VENV (default
# bench/peers/.venv-spark), SPARK_MASTER_PORT (7077), SPARK_START_TIMEOUT (seconds, 120),
# SPARK_DAEMON_MEMORY (heap of the master and worker JVMs, 256m here), SPARK_KEEP_STATE=1 (stop
# leaves the logs). The master's web UI (a free port, recorded in webui-port) serves /json/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${SPARK_VENV:-$ROOT/bench/peers/.venv-spark}
STATE=${SPARK_STATE:-${TMPDIR:-/tmp}/tessera-spark}
MASTER_PORT=${SPARK_MASTER_PORT:-7077}
START_TIMEOUT=${SPARK_START_TIMEOUT:-120}
PYSPARK_VERSION=4.3.0
PY=$VENV/bin/python

say() { echo "spark-cluster: $*" >&2; }
die() { echo "spark-cluster: $*" >&2; exit 1; }

spark_home() {
  [ -x "$PY" ] || die "no venv at $VENV (run: scripts/spark-cluster.sh install)"
  "$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null ||
    die "pyspark does not import in $VENV (run: scripts/spark-cluster.sh install)"
}

# The PID in FILE if that process is alive and is still the Spark daemon started here (not a reused PID).
live_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'org\.apache\.spark\.deploy\.' || return 1
  echo "$pid"
}

# PID and all its descendants, parents first.
tree() {
  local p c
  for p in "$@"; do
    echo "$p"
    for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do tree "$c"; done
  done
}

kill_tree() {  # SIG PID...
  local sig=$1; shift
  local pids
  pids=$(tree "$@" | tr '\n' ' ')
  [ -n "${pids// /}" ] || return 0
  # shellcheck disable=SC2086
  kill -s "$sig" $pids 2>/dev/null || true
}

cmd_install() {
  if [ -x "$PY" ] && [ "$("$PY" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)" = "$PYSPARK_VERSION" ]; then
    say "pyspark $PYSPARK_VERSION already in $VENV"
  else
    if [ ! -x "$PY" ]; then
      say "creating $VENV"
      python3 -m venv "$VENV"
    fi
    say "pip install pyspark==$PYSPARK_VERSION into $VENV (source distribution, about 460 MB: a few minutes)"
    "$PY" -m pip install -q "pyspark==$PYSPARK_VERSION"
    "$PY" -c 'import pyspark; print(pyspark.__version__)' >/dev/null || die "pyspark does not import after pip install"
  fi
  if command -v java >/dev/null; then
    say "java: $(java -version 2>&1 | head -1)"
  else
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || die "java missing and no root/sudo to apt-get install openjdk-17-jre-headless"
      sudo=sudo
    fi
    say "apt-get update; apt-get install -y openjdk-17-jre-headless"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >&2
    command -v java >/dev/null || die "java still missing after apt-get install"
    say "java: $(java -version 2>&1 | head -1)"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The master's /json/ (empty when its UI does not answer yet).
master_json() {
  local port
  port=$(cat "$STATE/webui-port" 2>/dev/null) || return 0
  curl -s --max-time 2 "http://127.0.0.1:$port/json/" 2>/dev/null || true
}

# Number of workers the master lists ALIVE (0 when it does not answer yet).
alive_workers() {
  master_json | python3 -c 'import json, sys
try: print(sum(w.get("state") == "ALIVE" for w in json.load(sys.stdin).get("workers", [])))
except Exception: print(0)'
}

# Whether the master answers and is the elected leader (status ALIVE).
master_alive() {
  master_json | python3 -c 'import json, sys
try: sys.exit(json.load(sys.stdin).get("status") != "ALIVE")
except Exception: sys.exit(1)'
}

launch() {  # NAME CLASS ARGS...: one daemon detached by setsid, stdout+stderr to NAME.log
  local name=$1; shift
  setsid "$SPARK_HOME/bin/spark-class" "$@" >"$STATE/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/$name.pid"
}

cmd_start() {
  local workers=2 cores=1 memory=1g
  while [ $# -gt 0 ]; do
    case $1 in
      --workers) workers=${2:?}; shift 2 ;;
      --cores) cores=${2:?}; shift 2 ;;
      --memory) memory=${2:?}; shift 2 ;;
      *) die "start: unknown option $1 (--workers N --cores C --memory M)" ;;
    esac
  done
  [[ $workers =~ ^[1-9][0-9]*$ && $cores =~ ^[1-9][0-9]*$ ]] || die "start: --workers and --cores take positive integers"
  [ "$workers" -le 250 ] || die "start: at most 250 workers (one loopback address each)"
  command -v java >/dev/null || die "java not found (run: scripts/spark-cluster.sh install)"
  command -v curl >/dev/null || die "curl not found (the master's /json/ is polled with it)"
  if live_pid "$STATE/master.pid" >/dev/null; then
    local n i all=1
    for ((i = 1; i <= workers; i++)); do live_pid "$STATE/worker-$i.pid" >/dev/null || all=0; done
    n=$(alive_workers)
    if [ $all = 1 ] && [ "$n" -ge "$workers" ]; then
      say "already running ($n workers ALIVE)"
      cat "$STATE/master-url"
      return 0
    fi
    die "a cluster is already running in $STATE with $n workers ALIVE (not the $workers asked for): stop it first"
  fi
  rm -rf "$STATE"
  mkdir -p "$STATE"
  SPARK_HOME=$(spark_home)
  export SPARK_HOME
  export SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=127.0.0.1 SPARK_PUBLIC_DNS=127.0.0.1
  export PYSPARK_PYTHON=$PY PYSPARK_DRIVER_PYTHON=$PY
  export SPARK_DAEMON_MEMORY=${SPARK_DAEMON_MEMORY:-256m}
  # No REST submission server (port 6066).
  export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=false"
  export SPARK_LOG_DIR=$STATE SPARK_PID_DIR=$STATE
  # An empty conf folder: no spark-defaults.conf or spark-env.sh of the machine leaks in.
  mkdir -p "$STATE/conf"
  export SPARK_CONF_DIR=$STATE/conf
  local t0 ui url
  t0=$(date +%s%N)
  ui=$(free_port)
  echo "$ui" >"$STATE/webui-port"
  url="spark://127.0.0.1:$MASTER_PORT"
  echo "$url" >"$STATE/master-url"
  # The master first: workers started before it listens back off for about 10 s before retrying.
  launch master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "$ui"
  local deadline
  deadline=$(($(date +%s) + START_TIMEOUT))
  until master_alive; do
    if ! live_pid "$STATE/master.pid" >/dev/null; then
      say "the master exited during start-up; the end of $STATE/master.log:"
      tail -n 20 "$STATE/master.log" >&2 || true
      SPARK_KEEP_STATE=1 cmd_stop >/dev/null 2>&1 || true
      die "start failed (is port $MASTER_PORT taken? SPARK_MASTER_PORT picks another; logs kept in $STATE)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || { SPARK_KEEP_STATE=1 cmd_stop >/dev/null 2>&1 || true; die "the master did not come up in ${START_TIMEOUT}s (logs kept in $STATE)"; }
    sleep 0.25
  done
  # Worker I (and its executors) on its own loopback address 127.0.0.(I+1), as on its own machine:
  # Spark drops the map outputs of every executor on a lost worker's host, so with one shared
  # address a killed worker would cost the surviving executors' shuffle files too.
  local i
  for ((i = 1; i <= workers; i++)); do
    mkdir -p "$STATE/work-$i"
    SPARK_LOCAL_IP=127.0.0.$((i + 1)) SPARK_LOCAL_HOSTNAME=127.0.0.$((i + 1)) SPARK_PUBLIC_DNS=127.0.0.$((i + 1)) \
      launch "worker-$i" org.apache.spark.deploy.worker.Worker --host 127.0.0.$((i + 1)) --webui-port 0 \
      --cores "$cores" --memory "$memory" --work-dir "$STATE/work-$i" "$url"
  done
  echo "$workers" >"$STATE/workers"
  local n=0
  while :; do
    n=$(alive_workers)
    [ "$n" -ge "$workers" ] && break
    for f in master $(seq -f 'worker-%g' 1 "$workers"); do
      if ! live_pid "$STATE/$f.pid" >/dev/null; then
        say "$f exited during start-up; the end of $STATE/$f.log:"
        tail -n 20 "$STATE/$f.log" >&2 || true
        SPARK_KEEP_STATE=1 cmd_stop >/dev/null 2>&1 || true
        die "start failed ($f did not come up; logs kept in $STATE)"
      fi
    done
    if [ "$(date +%s)" -ge "$deadline" ]; then
      say "after ${START_TIMEOUT}s the master lists $n of $workers workers ALIVE; the ends of the logs:"
      for f in master $(seq -f 'worker-%g' 1 "$workers"); do echo "== $f" >&2; tail -n 8 "$STATE/$f.log" >&2 || true; done
      SPARK_KEEP_STATE=1 cmd_stop >/dev/null 2>&1 || true
      die "start timed out (SPARK_START_TIMEOUT=$START_TIMEOUT; logs kept in $STATE)"
    fi
    sleep 0.5
  done
  local ms=$((($(date +%s%N) - t0) / 1000000))
  say "$(printf 'master and %d workers (%s cores, %s each) ALIVE after %d.%03d s; UI http://127.0.0.1:%s; state %s' \
    "$workers" "$cores" "$memory" $((ms / 1000)) $((ms % 1000)) "$ui" "$STATE")"
  echo "$url"
}

cmd_status() {
  local pid f name up=0
  if pid=$(live_pid "$STATE/master.pid"); then
    echo "master $(cat "$STATE/master-url") pid $pid alive; UI http://127.0.0.1:$(cat "$STATE/webui-port"); $(alive_workers) workers ALIVE"
    up=1
  else
    echo "master: not running (state $STATE)"
  fi
  for f in "$STATE"/worker-*.pid; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .pid)
    if pid=$(live_pid "$f"); then
      echo "$name pid $pid alive ($(($(tree "$pid" | wc -l) - 1)) processes under it)"
    else
      echo "$name dead"
    fi
  done
  [ $up = 1 ]
}

cmd_kill_worker() {
  local i=${1:?kill-worker I (1-based)} pid
  pid=$(live_pid "$STATE/worker-$i.pid") || die "worker $i is not running (state $STATE)"
  local pids
  pids=$(tree "$pid" | tr '\n' ' ')
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
  say "SIGKILL worker $i and its descendants: $pids"
}

cmd_stop() {
  local f pids=() pid
  for f in "$STATE"/worker-*.pid "$STATE"/master.pid; do
    [ -f "$f" ] || continue
    pid=$(live_pid "$f") && pids+=("$pid")
  done
  if [ ${#pids[@]} -gt 0 ]; then
    local all
    all=$(tree "${pids[@]}" | tr '\n' ' ')
    # shellcheck disable=SC2086
    kill -TERM $all 2>/dev/null || true
    local left=""
    for _ in $(seq 1 40); do
      left=""
      for pid in $all; do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
      [ -z "$left" ] && break
      sleep 0.25
    done
    # shellcheck disable=SC2086
    [ -z "$left" ] || kill -9 $left 2>/dev/null || true
    say "stopped ${#pids[@]} daemons ($(echo "$all" | wc -w) processes)"
  else
    say "nothing running"
  fi
  if [ "${SPARK_KEEP_STATE:-0}" != 1 ]; then rm -rf "$STATE"; fi
}

case ${1:-} in
  install) cmd_install ;;
  start) shift; cmd_start "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  kill-worker) shift; cmd_kill_worker "$@" ;;
  *) echo "usage: scripts/spark-cluster.sh install|start [--workers N] [--cores C] [--memory M]|status|kill-worker I|stop" >&2; exit 2 ;;
esac
