#!/usr/bin/env python3
"""The Spark driver of `tessera hybrid run --engine spark` (issue 38).

    spark_job.py --master URL --tessera BIN --connect HOST:PORT --work DIR
                 --job wordcount|grep|kmeans|gemm --blocks N [--rounds R] [--slots S]
                 [--dynamic-allocation] [--out FILE] [--no-warmup] [--verbose]

One round is one Spark job over N partitions, partition I being input block I:
`sc.parallelize(range(N), N).mapPartitionsWithIndex(task)`. Each task runs one subprocess,

    BIN hybrid task --connect HOST:PORT --work DIR --block I --round R --slot EXECUTOR/I/ATTEMPT

which asks tessera's controller service where the block runs (a CPU container or the accelerator,
real or modelled), does the work and prints the block's map output on stdout (wordcount: lines
`word<TAB>count`; grep: `matches<TAB>N`; kmeans: `k d` then k lines `count s_0 .. s_{d-1}`; gemm:
`gemm<TAB>records<TAB>sum`). A nonzero exit raises in the task, so Spark retries it (at most
spark.task.maxFailures = 4 attempts) and re-runs it elsewhere when its executor is lost. Spark
tasks never talk to the controller themselves: the controller decides inside each subprocess,
which is how it splits the partitions between CPU and accelerator work while Spark's own
scheduler keeps assigning partitions to free slots. The slot pool is fixed once the job starts
(spark.cores.max = S executors of one core: the container pool), except with
--dynamic-allocation, Spark's own elastic baseline (0..S executors, released after 2 s idle).

The reduce side is exact and deterministic whatever order the tasks finish in or how often they
are retried: wordcount reduceByKey (integer sums), output sorted by the word's bytes; grep sums
integers; gemm and kmeans collect one record per block and sum the doubles in block order on the
driver. KMeans writes DIR/centroids-<R+1>.txt after round R (`k d`, then k lines of %.17g
coordinates; a cluster with no point keeps its centroid), read by round R+1's tasks; tessera
writes DIR/centroids-0.txt before the first round. --out receives the job's result (the final
centroids for kmeans).

stdout: one JSON line at the end, short (tessera reads it with an 8 KiB line buffer): job,
blocks, rounds [{round, wall_s, task_runs}], wall_s (the rounds, start of the first to end of the
last), startup_s (SparkContext and the executors registered), warmup_s (one tiny job that starts
the executors' Python workers), dynamic_allocation, slots, spark_version, master, executors (most
executors registered at once), executors_used (executor ids that ran a task), task_runs_file:
DIR/spark-task-runs.json, every task subprocess that returned, retries and re-executions included
(round, block, slot, executor, start_s from its round's start, wall_s of the subprocess). Progress
goes to stderr. Exit 0 on success, 1 with one line on stderr on failure, 2 on bad usage.

Imports pyspark and the standard library only. When pyspark does not import, the script re-runs
itself with bench/peers/.venv-spark/bin/python (or $TESSERA_SPARK_PYTHON), the venv that
scripts/spark-cluster.sh install makes; executors run the same interpreter (PYSPARK_PYTHON).
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOBS = ("wordcount", "grep", "kmeans", "gemm")

# Spark's log on the driver's stderr, unless --verbose: warnings and errors, one line each, cut at
# 300 characters; a lost task's message holds the Python worker's traceback, of which only the
# last exception is kept (the task's RuntimeError). A properties file: backslashes are doubled.
LOG4J2 = r"""rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.alwaysWriteExceptions = false
appender.console.layout.pattern = spark: %d{HH:mm:ss} %p %c{1}: %replace{%maxLen{%replace{%m}{(?s)\\[PYTHON_EXCEPTION\\].*\\n(\\w*(Error|Exception): )}{$1}}{300}}{[\\r\\n\\t ]+}{ }%n
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


def fail(msg, code=1):
    print("spark_job: " + " ".join(str(msg).split()), file=sys.stderr)
    sys.exit(code)


def ensure_pyspark():
    try:
        import pyspark  # noqa: F401
        return
    except ImportError:
        pass
    py = os.environ.get("TESSERA_SPARK_PYTHON") or os.path.join(ROOT, "bench", "peers", ".venv-spark", "bin", "python")
    if os.path.realpath(sys.executable) == os.path.realpath(py) or not os.access(py, os.X_OK):
        fail("pyspark does not import in %s (run: scripts/spark-cluster.sh install)" % sys.executable)
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


# ---- executor side (pickled into the tasks by cloudpickle: no reference to the SparkContext) ----

def executor_id():
    """The Spark executor running this Python worker: the `--executor-id` argument of the
    CoarseGrainedExecutorBackend JVM above it (worker -> pyspark daemon -> JVM), else pid-N."""
    pid = os.getpid()
    for _ in range(8):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
            if b"--executor-id" in args:
                return args[args.index(b"--executor-id") + 1].decode()
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return "pid-%d" % os.getpid()


def _die_with_parent():
    """preexec_fn of the task subprocess: SIGKILL it when the Python worker dies (a killed
    executor or a cancelled task then leaves no orphan behind)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:
        pass


def parse_block(job, text, block):
    """The map output of one block, as the records the driver combines."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if job == "wordcount":
        out = []
        for ln in lines:
            word, sep, n = ln.rpartition("\t")
            if not sep or not n.isdigit() or int(n) <= 0:
                raise ValueError("bad wordcount line %r" % ln[:80])
            out.append((word, int(n)))
        return out
    if job == "grep":
        if len(lines) != 1 or not lines[0].startswith("matches\t") or not lines[0][8:].isdigit():
            raise ValueError("bad grep output %r" % text[:80])
        return [(block, int(lines[0][8:]))]
    if job == "gemm":
        f = lines[0].split("\t") if len(lines) == 1 else []
        if len(f) != 3 or f[0] != "gemm" or not f[1].isdigit():
            raise ValueError("bad gemm output %r" % text[:80])
        return [(block, int(f[1]), float(f[2]))]
    # kmeans
    if not lines:
        raise ValueError("empty kmeans output")
    k, d = (int(x) for x in lines[0].split())
    if k <= 0 or d <= 0 or len(lines) != k + 1:
        raise ValueError("kmeans output: header %r and %d cluster lines" % (lines[0], len(lines) - 1))
    counts, sums = [], []
    for ln in lines[1:]:
        f = ln.split()
        if len(f) != d + 1:
            raise ValueError("kmeans line with %d fields, want %d" % (len(f), d + 1))
        counts.append(int(f[0]))
        sums.append([float(x) for x in f[1:]])
    return [(block, k, d, counts, sums)]


def make_task(tessera, connect, work, job, rnd, runs_acc):
    def task(block, _it):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        attempt = ctx.attemptNumber() if ctx is not None else 0
        ex = executor_id()
        slot = "%s/%d/%d" % (ex, block, attempt)
        cmd = [tessera, "hybrid", "task", "--connect", connect, "--work", work, "--block", str(block),
               "--round", str(rnd), "--slot", slot]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=_die_with_parent)
        except OSError as e:
            raise RuntimeError("block %d round %d slot %s: cannot run %s: %s" % (block, rnd, slot, tessera, e))
        wall = time.time() - t0
        err = p.stderr.decode("utf-8", "replace").strip()
        if p.returncode != 0:
            raise RuntimeError("block %d round %d slot %s: tessera hybrid task exited %d: %s"
                               % (block, rnd, slot, p.returncode, err[-2000:] or "(no stderr)"))
        try:
            recs = parse_block(job, p.stdout.decode("utf-8", "surrogateescape"), block)
        except ValueError as e:
            raise RuntimeError("block %d round %d slot %s: %s" % (block, rnd, slot, e))
        runs_acc.add([{"round": rnd, "block": block, "slot": slot, "executor": ex, "t0": t0, "wall_s": wall}])
        return iter(recs)
    return task


# ---- driver side ----

def read_centroids(path):
    with open(path) as f:
        lines = [ln for ln in f.read().split("\n") if ln.strip()]
    k, d = (int(x) for x in lines[0].split())
    c = [[float(x) for x in ln.split()] for ln in lines[1:]]
    if len(c) != k or any(len(r) != d for r in c):
        raise ValueError("%s: header says %d x %d" % (path, k, d))
    return c


def write_atomic(path, data):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".spark_job.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def centroids_text(c):
    return ("%d %d\n" % (len(c), len(c[0])) + "".join(" ".join("%.17g" % x for x in r) + "\n" for r in c)).encode()


def by_block(recs, n, what):
    """One record per block, in block order (a block seen twice or missing is an error)."""
    recs = sorted(recs, key=lambda r: r[0])
    if [r[0] for r in recs] != list(range(n)):
        raise RuntimeError("%s: got blocks %s, want 0..%d once each" % (what, [r[0] for r in recs][:40], n - 1))
    return recs


def run_round(sc, a, rnd, runs_acc):
    """One Spark job over the blocks; returns the round's result bytes (the --out content)."""
    from operator import add
    rdd = sc.parallelize(range(a.blocks), a.blocks).mapPartitionsWithIndex(
        make_task(a.tessera, a.connect, a.work, a.job, rnd, runs_acc))
    if a.job == "wordcount":
        pairs = rdd.reduceByKey(add, numPartitions=a.slots).collect()
        pairs.sort(key=lambda kv: kv[0].encode("utf-8", "surrogateescape"))
        return b"".join(w.encode("utf-8", "surrogateescape") + b"\t%d\n" % n for w, n in pairs)
    recs = by_block(rdd.collect(), a.blocks, a.job)
    if a.job == "grep":
        return b"matches\t%d\n" % sum(r[1] for r in recs)
    if a.job == "gemm":
        n, s = 0, 0.0
        for _, nb, sb in recs:
            n += nb
            s += sb
        return ("gemm\t%d\t%.17g\n" % (n, s)).encode()
    # kmeans: sums per cluster in block order, then the new centroids
    old = read_centroids(os.path.join(a.work, "centroids-%d.txt" % rnd))
    k, d = len(old), len(old[0])
    counts = [0] * k
    sums = [[0.0] * d for _ in range(k)]
    for blk, kb, db, cb, sb in recs:
        if (kb, db) != (k, d):
            raise RuntimeError("kmeans block %d: %d x %d, the centroids are %d x %d" % (blk, kb, db, k, d))
        for c in range(k):
            counts[c] += cb[c]
            for j in range(d):
                sums[c][j] += sb[c][j]
    new = [[sums[c][j] / counts[c] for j in range(d)] if counts[c] > 0 else list(old[c]) for c in range(k)]
    text = centroids_text(new)
    write_atomic(os.path.join(a.work, "centroids-%d.txt" % (rnd + 1)), text)
    return text


def spark_error(e):
    """The one line that matters in a failed job: the task's RuntimeError if there is one."""
    s = str(e)
    for ln in reversed(s.split("\n")):
        ln = ln.strip()
        if ln.startswith("RuntimeError:"):
            return ln[len("RuntimeError:"):].strip()
    lines = [ln.strip() for ln in s.split("\n") if ln.strip()]
    for ln in lines:
        if "Exception" in ln or "Error" in ln:
            return ln[:500]
    return (lines[0] if lines else repr(e))[:500]


def main():
    ap = argparse.ArgumentParser(prog="spark_job.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", required=True)
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--connect", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--job", required=True, choices=JOBS)
    ap.add_argument("--blocks", required=True, type=int)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--slots", type=int, default=2, help="the container pool: executors of one core (2)")
    ap.add_argument("--dynamic-allocation", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="Spark's INFO log on stderr")
    ap.add_argument("--executor-wait", type=float, default=60.0, help="seconds to wait for the executors")
    a = ap.parse_args()
    if a.blocks < 1 or a.rounds < 1 or a.slots < 1:
        ap.error("--blocks, --rounds and --slots take positive integers")
    a.tessera = os.path.abspath(a.tessera) if os.sep in a.tessera else a.tessera
    a.work = os.path.abspath(a.work)
    if not os.path.isdir(a.work):
        fail("--work %s: not a directory" % a.work)
    if a.job == "kmeans" and not os.path.exists(os.path.join(a.work, "centroids-0.txt")):
        fail("kmeans: %s/centroids-0.txt missing (tessera writes it before the first round)" % a.work)

    ensure_pyspark()
    from pyspark import SparkConf, SparkContext
    from pyspark.accumulators import AccumulatorParam

    class ListParam(AccumulatorParam):
        def zero(self, v):
            return []

        def addInPlace(self, x, y):
            x.extend(y)
            return x

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    logconf = None
    if not a.verbose and "SPARK_CONF_DIR" not in os.environ:
        logconf = tempfile.mkdtemp(prefix="tessera-spark-conf.")
        with open(os.path.join(logconf, "log4j2.properties"), "w") as f:
            f.write(LOG4J2)
        atexit.register(shutil.rmtree, logconf, True)
        os.environ["SPARK_CONF_DIR"] = logconf

    conf = (SparkConf().setMaster(a.master).setAppName("tessera-hybrid-" + a.job)
            .set("spark.executor.cores", "1").set("spark.task.cpus", "1")
            .set("spark.cores.max", str(a.slots)).set("spark.executor.memory", "512m")
            .set("spark.locality.wait", "0s").set("spark.speculation", "false")
            .set("spark.task.maxFailures", "4")
            .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false"))
    if a.dynamic_allocation:
        conf = (conf.set("spark.dynamicAllocation.enabled", "true")
                .set("spark.dynamicAllocation.shuffleTracking.enabled", "true")
                .set("spark.dynamicAllocation.minExecutors", "0")
                .set("spark.dynamicAllocation.initialExecutors", "1")
                .set("spark.dynamicAllocation.maxExecutors", str(a.slots))
                .set("spark.dynamicAllocation.executorIdleTimeout", "2s")
                .set("spark.dynamicAllocation.schedulerBacklogTimeout", "1s"))  # whole seconds only
    else:
        conf = conf.set("spark.dynamicAllocation.enabled", "false")

    t_start = time.time()
    try:
        sc = SparkContext(conf=conf)
    except Exception as e:
        fail("cannot start a SparkContext on %s: %s" % (a.master, spark_error(e).lstrip(": ")))
    seen = {"max": 0}
    stop_poll = threading.Event()

    def registered():
        return sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager is one

    def poll():
        while not stop_poll.is_set():
            try:
                seen["max"] = max(seen["max"], registered())
            except Exception:
                return
            stop_poll.wait(0.5)

    rc = 0
    report = None
    try:
        # The pool is fixed before the clock starts: wait until its executors are registered (with
        # dynamic allocation, the initial one).
        want = 1 if a.dynamic_allocation else a.slots
        deadline = time.time() + a.executor_wait
        while registered() < want:
            if time.time() > deadline:
                raise RuntimeError("%d of %d one-core executors registered after %.0f s (--slots %d): does the "
                                   "cluster at %s have %d free cores? (scripts/spark-cluster.sh status; the "
                                   "default cluster has 2)" % (registered(), want, a.executor_wait, a.slots,
                                                               a.master, want))
            time.sleep(0.1)
        startup = time.time() - t_start
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        print("spark_job: %s, %d executor(s) registered after %.1f s" % (a.master, registered(), startup), file=sys.stderr)
        warm = 0.0
        if not a.no_warmup:
            t = time.time()
            # a shuffle too: each executor's first one loads and compiles the shuffle path (about
            # a second on 2 cores), which would otherwise land in wordcount's first round
            sc.parallelize(range(2 * want), want).map(lambda x: (x % want, 1)).reduceByKey(
                lambda x, y: x + y, want).collect()
            warm = time.time() - t
        runs_acc = sc.accumulator([], ListParam())
        rounds = []
        result = b""
        t_jobs = time.time()
        for r in range(a.rounds):
            print("spark_job: %s round %d of %d started" % (a.job, r + 1, a.rounds), file=sys.stderr, flush=True)
            t = time.time()
            before = len(runs_acc.value)
            try:
                result = run_round(sc, a, r, runs_acc)
            except Exception as e:
                raise RuntimeError("round %d of %d: %s" % (r + 1, a.rounds, spark_error(e)))
            wall = time.time() - t
            for run in runs_acc.value[before:]:
                run["start_s"] = round(run.pop("t0") - t, 6)
            n_runs = len(runs_acc.value) - before
            rounds.append({"round": r, "wall_s": round(wall, 6), "task_runs": n_runs})
            print("spark_job: %s round %d of %d: %.3f s, %d task runs for %d blocks"
                  % (a.job, r + 1, a.rounds, wall, n_runs, a.blocks), file=sys.stderr)
        total = time.time() - t_jobs
        runs_file = os.path.join(a.work, "spark-task-runs.json")
        if a.out:
            write_atomic(a.out, result)
        stop_poll.set()
        seen["max"] = max(seen["max"], registered())
        runs = runs_acc.value
        report = {"job": a.job, "blocks": a.blocks, "rounds": rounds, "wall_s": round(total, 6),
                  "startup_s": round(startup, 6), "warmup_s": round(warm, 6),
                  "dynamic_allocation": a.dynamic_allocation, "slots": a.slots,
                  "spark_version": sc.version, "master": a.master, "executors": seen["max"],
                  "executors_used": sorted({x["executor"] for x in runs}),
                  "task_runs_file": runs_file}
        write_atomic(runs_file, json.dumps(sorted(runs, key=lambda x: (x["round"], x["start_s"])), indent=0).encode())
    except Exception as e:
        rc = 1
        msg = str(e) if isinstance(e, RuntimeError) else spark_error(e)
        print("spark_job: " + " ".join(msg.split())[:2000], file=sys.stderr)
    finally:
        stop_poll.set()
        try:
            sc.stop()
        except Exception:
            pass
    if report is not None:
        print(json.dumps(report), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
