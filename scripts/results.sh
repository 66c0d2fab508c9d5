#!/usr/bin/env bash
# Runs the benchmark set behind docs/RESULTS.md: one JSON per benchmark and a meta.json (date,
# commit, `tessera version`, the machine profile of `tessera hwinfo --json`, peer versions, load
# average before and after each run) under the output folder, then renders the page and its charts
# with scripts/render_results.py.
#
#   scripts/results.sh [--short|--full] [--out DIR] [--tessera BIN] [--md FILE] [--svg-dir DIR]
#                      [--only LIST] [--no-render]
#
#   --short        (default) the headline workloads: 5-15 minutes on 2 cores once plans and profiles are
#                  cached (the first run on a machine measures them: add a few minutes)
#   --full         more workloads (batch 4, more masks and connectivities, longer LLM runs): about an hour
#   --out DIR      output folder (default results/<UTC date>-<host>)
#   --tessera BIN  the tessera binary (default $TESSERA_BIN, else build/tessera)
#   --md FILE      page to write (default docs/RESULTS.md); --svg-dir DIR charts (default docs/img)
#   --only LIST    comma-separated subsystems to run: llm,conv,gconv,attn,vit (default all)
#   --no-render    write the JSON only
#
# ISA classes: on a machine with AVX-512 every benchmark runs a second time capped at AVX2
# (TESSERA_ISA=avx2, which caps the oneDNN baselines too; the LLM peer with --isa avx2, an AVX2-only
# llama.cpp build), written as NAME.avx2.json beside NAME.json. Without AVX-512 the native run is
# the AVX2 class and runs once.
#
# A benchmark that fails or times out is recorded in meta.json with its exit status and the tail
# of its stderr (logs/NAME.err); the page then says so in its row. The other benchmarks still run.
# Environment: OMP_WAIT_POLICY (passive unless set: the machine is shared; recorded),
# TESSERA_CACHE (profiles and plans, as tessera's default when unset; recorded),
# RESULTS_TIMEOUT (seconds per benchmark; 900 short, 3600 full).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

MODE=short OUT="" BIN=${TESSERA_BIN:-build/tessera} MD=docs/RESULTS.md SVG=docs/img ONLY=all RENDER=1
ARGS_LINE="scripts/results.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --short) MODE=short ;;
    --full) MODE=full ;;
    --out) OUT=${2:?--out needs a folder}; shift ;;
    --tessera) BIN=${2:?--tessera needs a path}; shift ;;
    --md) MD=${2:?--md needs a file}; shift ;;
    --svg-dir) SVG=${2:?--svg-dir needs a folder}; shift ;;
    --only) ONLY=${2:?--only needs a list}; shift ;;
    --no-render) RENDER=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "results.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$BIN" ] || { echo "results.sh: tessera binary '$BIN' not found or not executable (build it, or pass --tessera BIN)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "results.sh: python3 is required" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
TIMEOUT=${RESULTS_TIMEOUT:-$([ "$MODE" = short ] && echo 900 || echo 3600)}
HOST=$(hostname -s 2>/dev/null || hostname)
START_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
[ -n "$OUT" ] || OUT="results/$(date -u +%Y-%m-%d)-$HOST"
mkdir -p "$OUT/logs" || { echo "results.sh: cannot create $OUT" >&2; exit 2; }
RUNS="$OUT/.runs.jsonl"
: > "$RUNS"
# --only into a folder that already has results: keep the other subsystems' runs (their JSON stays)
if [ "$ONLY" != all ] && [ -f "$OUT/meta.json" ]; then
  python3 - "$OUT/meta.json" "$ONLY" >> "$RUNS" <<'PY' || true
import json, sys
try:
    runs = json.load(open(sys.argv[1])).get("runs", [])
except (OSError, ValueError, AttributeError):
    runs = []
keep = set(sys.argv[2].split(","))
for r in runs:
    if isinstance(r, dict) and r.get("subsystem") not in keep:
        print(json.dumps(r))
PY
fi
T0=$(date +%s.%N)

want() { [ "$ONLY" = all ] || [[ ",$ONLY," == *",$1,"* ]]; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "0 0 0"; }
elapsed_since() { python3 -c "import sys,time; print('%.1f' % (time.time() - float(sys.argv[1])))" "$1"; }

# ---- the machine and the build ------------------------------------------------------------------
echo "results.sh: $MODE run, tessera $BIN, output $OUT"
LOAD_BEFORE=$(loadavg)
"$BIN" hwinfo --json > "$OUT/hwinfo.json" 2> "$OUT/logs/hwinfo.err" || echo "results.sh: tessera hwinfo failed (logs/hwinfo.err)" >&2
"$BIN" version > "$OUT/logs/version.txt" 2>&1 || true
ISA_LIST=$(python3 -c "import json,sys
try: print(' '.join(json.load(open(sys.argv[1])).get('isa', [])))
except Exception: print('')" "$OUT/hwinfo.json")
CLASSES="native"
case " $ISA_LIST " in *" avx512f "*) CLASSES="native avx2" ;; esac
echo "results.sh: ISA [$ISA_LIST]; classes: $CLASSES; load average $LOAD_BEFORE; OMP_WAIT_POLICY=$OMP_WAIT_POLICY"

# ---- the peers' inputs ---------------------------------------------------------------------------
MODEL="" TEXT=""
if want llm; then
  MODEL=$(bash scripts/get-smollm2.sh 2> "$OUT/logs/get-smollm2.err") || MODEL=""
  TEXT=$(bash scripts/get-llm-text.sh 2> "$OUT/logs/get-llm-text.err") || TEXT=""
  # llama.cpp's own llama-bench from the binding's vendored source: built once (~10 min on 2 cores)
  # here, outside the timed runs
  for cls in $CLASSES; do
    echo "results.sh: llama-bench ($cls) from the vendored source (a one-time build when absent)"
    bash bench/peers/build-llama-bench.sh --isa "$cls" > "$OUT/logs/llama-bench-build.$cls.txt" 2>&1 ||
      echo "results.sh: the llama-bench build failed ($OUT/logs/llama-bench-build.$cls.txt): the llm rows go without it"
  done
  # the peer's build as llama.cpp reports it (llama_print_system_info), per ISA class
  for cls in $CLASSES; do
    v=bench/peers/.venv-llama$([ "$cls" = avx2 ] && [ "$CLASSES" != native ] && echo "-avx2")
    [ -x "$v/bin/python" ] && "$v/bin/python" -c "import llama_cpp; print(llama_cpp.__version__); print(llama_cpp.llama_print_system_info().decode().strip())" \
      > "$OUT/logs/llama-system-info.$cls.txt" 2>/dev/null || rm -f "$OUT/logs/llama-system-info.$cls.txt"
  done
fi

# ---- the benchmark set ---------------------------------------------------------------------------
# Each entry: NAME|SUBSYSTEM|HOW|command...   HOW: stdout (the command prints the JSON) or
# file (the command writes @OUT@, replaced by the output path). Words are split on spaces.
BENCHES=()
LLM_PY="python3 bench/peers/llm_llamacpp.py $BIN"
if want llm; then
  if [ "$MODE" = short ]; then
    BENCHES+=("llm-speed|llm|file|$LLM_PY --model @MODEL@ --threads 2 --bench --llama-bench --prompt-lens 128,512 --gen 64 --repeats 6 --json-out @OUT@")
    BENCHES+=("llm-ppl|llm|file|$LLM_PY --model @MODEL@ --threads 2 --ppl @TEXT@ --ctx 512 --chunks 4 --json-out @OUT@")
  else
    BENCHES+=("llm-speed|llm|file|$LLM_PY --model @MODEL@ --threads 2 --bench --llama-bench --prompt-lens 16,128,512 --gen 128 --repeats 5 --json-out @OUT@")
    BENCHES+=("llm-ppl|llm|file|$LLM_PY --model @MODEL@ --threads 2 --ppl @TEXT@ --ctx 512 --chunks 16 --json-out @OUT@")
  fi
fi
if want conv; then
  # the whole-network convolution time at batch 1 (the notebook's headline), and batch 4 in --full
  for m in resnet101 vgg16 inception-v4; do
    BENCHES+=("conv-$m|conv|stdout|$BIN conv bench --model $m --threads 2 --json")
  done
  if [ "$MODE" = full ]; then
    for m in resnet101 vgg16 inception-v4; do
      BENCHES+=("conv-$m-b4|conv|stdout|$BIN conv bench --model $m --batch 4 --threads 2 --json")
    done
  fi
fi
if want gconv; then
  # CondenseNet's 72 group convolutions, per-filter unstructured connectivity, condense 4 (cn-u4 in
  # the notebook), and ShuffleNet g=8; plans are cached after the first run (30-100 s each)
  BENCHES+=("gconv-condensenet-u4|gconv|stdout|$BIN gconv bench --model condensenet --connectivity unstructured --condense 4 --threads 2 --json")
  BENCHES+=("gconv-shufflenet-g8-u|gconv|stdout|$BIN gconv bench --model shufflenet-g8 --connectivity unstructured --threads 2 --json")
  if [ "$MODE" = full ]; then
    BENCHES+=("gconv-condensenet-shared|gconv|stdout|$BIN gconv bench --model condensenet --connectivity shared --condense 4 --threads 2 --json")
    BENCHES+=("gconv-condensenet-perm|gconv|stdout|$BIN gconv bench --model condensenet --connectivity permuted --condense 4 --threads 2 --json")
    BENCHES+=("gconv-shufflenet-g3-u|gconv|stdout|$BIN gconv bench --model shufflenet-g3 --connectivity unstructured --threads 2 --json")
  fi
fi
if want attn; then
  ATTN_MASKS="vitdet:h=64,w=64,win=14,global=4 window2d:h=64,w=64,k=7 swin:h=56,w=56,win=7,shift=1"
  [ "$MODE" = full ] && ATTN_MASKS="$ATTN_MASKS window2d:h=64,w=64,k=13 permute:vitdet:h=64,w=64,win=14,global=4,seed=7"
  for p in $ATTN_MASKS; do
    n=${p%%:h=*}; n=${n//:/-}
    [ "$p" != "${p#window2d}" ] && n="$n-k${p##*k=}"
    BENCHES+=("attn-$n|attn|stdout|$BIN attn bench --pattern $p --heads 8 --head-dim 64 --threads 2 --json")
  done
fi
if want vit; then
  # the demo's workload (scripts/demo.sh) with more rounds and the standard tile profile
  BENCHES+=("vit-deit-s-1024|vit|stdout|$BIN vit bench --model deit-s --res 1024 --pattern vitdet:win=14,global=4 --depth 2 --repeats $([ "$MODE" = short ] && echo 7 || echo 15) --threads 2 --json")
  if [ "$MODE" = full ]; then
    BENCHES+=("vit-b16-1024|vit|stdout|$BIN vit bench --model vit-b16 --res 1024 --pattern window2d:k=13 --depth 4 --repeats 7 --threads 2 --json")
  fi
fi
[ ${#BENCHES[@]} -gt 0 ] || { echo "results.sh: --only '$ONLY' selects no benchmark (llm,conv,gconv,attn,vit)" >&2; exit 2; }

# The record of one run, appended to .runs.jsonl (meta.json is rewritten from it after every run).
record() { # name subsystem class file rc elapsed load_before load_after start end env command
  python3 - "$@" >> "$RUNS" <<'PY'
import json, os, sys
name, sub, cls, path, rc, el, lb, la, t0, t1, env, cmd = sys.argv[1:13]
rec = {"name": name, "subsystem": sub, "isa_class": cls, "file": os.path.basename(path) if path else "",
       "rc": int(rc), "elapsed_s": float(el), "load_avg_before": [float(x) for x in lb.split()],
       "load_avg_after": [float(x) for x in la.split()], "start_utc": t0, "end_utc": t1,
       "env": env, "command": cmd}
errf = os.path.join(os.path.dirname(path) or ".", "logs", name + (".avx2" if cls == "avx2" else "") + ".err") if path else ""
if int(rc) != 0:
    rec["error"] = "timed out" if int(rc) == 124 else "exit status %s" % rc
    try:
        lines = [l.rstrip() for l in open(errf, errors="replace") if l.strip()]
        rec["stderr_tail"] = [l[-300:] for l in lines[-8:]]
    except OSError:
        pass
print(json.dumps(rec))
PY
}

write_meta() { # final?
  python3 - "$OUT" "$MODE" "$START_DATE" "$HOST" "$LOAD_BEFORE" "$(loadavg)" "$BIN" "$CLASSES" "$ARGS_LINE" "$1" <<'PY'
import json, os, subprocess, sys, time
out, mode, start, host, lb, la, binp, classes, argline, final = sys.argv[1:11]
def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""
def rd(p):
    try:
        with open(p) as f:
            return f.read()
    except OSError:
        return ""
meta = {"format": "tessera results", "version": 1, "mode": mode, "date_utc": start,
        "end_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if final == "1" else None,
        "complete": final == "1", "host": host, "command": argline}
commit = sh(["git", "rev-parse", "--short", "HEAD"])
dirty = sh(["git", "status", "--porcelain", "--untracked-files=no"]) != ""
meta["git"] = {"commit": commit or "unknown", "dirty": dirty, "branch": sh(["git", "rev-parse", "--abbrev-ref", "HEAD"])}
meta["tessera"] = {"binary": binp, "version": rd(os.path.join(out, "logs", "version.txt")).strip()}
try:
    meta["machine"] = json.loads(rd(os.path.join(out, "hwinfo.json")))
except ValueError:
    meta["machine"] = None
cpu = ""
for line in rd("/proc/cpuinfo").splitlines():
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
meta["cpu_model_name"] = cpu
meta["cpus_online"] = os.cpu_count()
meta["kernel"] = sh(["uname", "-sr"])
meta["load_avg_before"] = [float(x) for x in lb.split()]
meta["load_avg_after"] = [float(x) for x in la.split()]
meta["isa_classes"] = classes.split()
meta["env"] = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "TESSERA_CACHE", "TESSERA_ISA", "TESSERA_THREADS")}
peers = {}
for pkg in ("libdnnl2", "libopenblas0-pthread", "libopenblas0", "coinor-libcbc3"):
    v = sh(["dpkg-query", "-W", "-f=${Version}", pkg])
    if v:
        peers[pkg] = v
for venv in ("bench/peers/.venv-llama", "bench/peers/.venv-llama-avx2", "bench/peers/.venv-torch"):
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py):
        peers[os.path.basename(venv)] = sh([py, "-c", "import importlib.metadata as m\nfor p in ('llama_cpp_python','torch'):\n try: print(p, m.version(p))\n except Exception: pass"])
for cls in classes.split():
    info = rd(os.path.join(out, "logs", "llama-system-info.%s.txt" % cls)).strip().split("\n", 1)
    if len(info) == 2:
        peers["llama_cpp_%s" % cls] = {"llama_cpp_python": info[0], "system_info": info[1]}
meta["peers"] = peers
runs = []
try:
    with open(os.path.join(out, ".runs.jsonl")) as f:
        runs = [json.loads(l) for l in f if l.strip()]
except (OSError, ValueError):
    pass
meta["runs"] = runs
meta["duration_s"] = sum(r.get("elapsed_s", 0) for r in runs)
tmp = os.path.join(out, "meta.json.tmp")
with open(tmp, "w") as f:
    json.dump(meta, f, indent=1)
os.replace(tmp, os.path.join(out, "meta.json"))
PY
}

N=0
TOTAL=$(( ${#BENCHES[@]} * $(echo $CLASSES | wc -w) ))
for cls in $CLASSES; do
  for entry in "${BENCHES[@]}"; do
    IFS='|' read -r name sub how cmd <<< "$entry"
    N=$((N + 1))
    suffix=$([ "$cls" = avx2 ] && echo ".avx2" || echo "")
    file="$OUT/$name$suffix.json"
    errf="$OUT/logs/$name$suffix.err"
    env_add=""
    cmd=${cmd//@OUT@/$file}
    if [ "$sub" = llm ]; then
      cmd=${cmd//@MODEL@/$MODEL}
      cmd=${cmd//@TEXT@/$TEXT}
      [ "$cls" = avx2 ] && cmd="$cmd --isa avx2"
    elif [ "$cls" = avx2 ]; then
      env_add="TESSERA_ISA=avx2"
    fi
    printf '[%2d/%d] %-24s %-6s ' "$N" "$TOTAL" "$name" "$cls"
    lb=$(loadavg); t0=$(date -u +%Y-%m-%dT%H:%M:%SZ); s0=$(date +%s.%N)
    rm -f "$file"
    if [ "$sub" = llm ] && { [ -z "$MODEL" ] || { [ "$name" = llm-ppl ] && [ -z "$TEXT" ]; }; }; then
      echo "the model or the text could not be fetched (logs/get-smollm2.err, logs/get-llm-text.err)" > "$errf"
      rc=3
    elif [ "$how" = stdout ]; then
      # shellcheck disable=SC2086
      env $env_add timeout "$TIMEOUT" $cmd > "$file.tmp" 2> "$errf"; rc=$?
      if [ $rc -eq 0 ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$file.tmp" 2>/dev/null; then
        mv "$file.tmp" "$file"
      else
        [ $rc -eq 0 ] && { echo "results.sh: the output is not JSON (kept as $(basename "$file").tmp)" >> "$errf"; rc=4; }
      fi
    else
      # shellcheck disable=SC2086
      env $env_add timeout "$TIMEOUT" $cmd > "$OUT/logs/$name$suffix.out" 2> "$errf"; rc=$?
      # the LLM peer exits 1 when a correctness check fails but still writes its report
      [ $rc -eq 1 ] && [ -s "$file" ] && rc=0
    fi
    el=$(elapsed_since "$s0"); la=$(loadavg); t1=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    record "$name" "$sub" "$cls" "$file" "$rc" "$el" "$lb" "$la" "$t0" "$t1" "$env_add" "${env_add:+$env_add }$cmd"
    write_meta 0
    if [ $rc -eq 0 ]; then status=ok; elif [ $rc -eq 124 ]; then status="TIMED OUT"; else status="FAILED (rc $rc, $errf)"; fi
    printf '%-30s %7.1f s   (total %6.1f s, load %s)\n' "$status" "$el" "$(elapsed_since "$T0")" "${la%% *}"
  done
done
write_meta 1
NFAIL=$(grep -c '"rc": [1-9]' "$OUT/.runs.jsonl" 2>/dev/null || true)
echo "results.sh: $N benchmarks in $(elapsed_since "$T0") s (${NFAIL:-0} failed); JSON in $OUT"
rm -f "$RUNS"
if [ "$RENDER" = 1 ]; then
  python3 scripts/render_results.py "$OUT" --md "$MD" --svg-dir "$SVG" || { echo "results.sh: rendering failed" >&2; exit 1; }
fi
