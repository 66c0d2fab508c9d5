#!/usr/bin/env bash
# Builds llama.cpp's own benchmark program, llama-bench, from the llama.cpp source vendored in the
# llama-cpp-python sdist that bench/peers/requirements-llama.txt pins (vendor/llama.cpp), so that
# llm_llamacpp.py --bench --llama-bench measures the same llama.cpp without the Python binding.
#
# Usage: bench/peers/build-llama-bench.sh [--isa native|avx2] [OUT_DIR]
#   --isa native  (default) GGML_NATIVE=ON (-march=native), as pip builds the binding, AMX off
#                 (llm_llamacpp.py's LLAMA_BUILD_ENV: -mno-amx-*)
#   --isa avx2    GGML_NATIVE=OFF with AVX2/FMA/F16C/BMI2 on and AVX-512/AMX off
#                 (llm_llamacpp.py's LLAMA_AVX2_CMAKE)
#   OUT_DIR       the CMake build folder (default bench/peers/.llama-bench-ISA, gitignored)
# Prints the path of the binary on stdout; progress goes to stderr. The sdist is fetched once with
# `pip download` into bench/peers/.llama-src/ (never by the benchmark run itself). Idempotent: it
# does nothing when the binary exists, is newer than the sdist, and was built with the same flags.
# Only the llama-bench target is built, with -j2 (about 5-10 minutes on 2 cores).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ISA=native
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --isa) ISA=${2:-}; shift 2 ;;
    --isa=*) ISA=${1#--isa=}; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-llama-bench.sh: unknown option $1" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done
case "$ISA" in native|avx2) ;; *) echo "build-llama-bench.sh: --isa takes native or avx2" >&2; exit 2 ;; esac
OUT=${OUT:-$HERE/.llama-bench-$ISA}
JOBS=${JOBS:-2}
log() { echo "build-llama-bench: $*" >&2; }

# the version the Python peer pins, and the peer's build flags (one source of truth: llm_llamacpp.py)
VER=$(sed -n 's/^llama-cpp-python==\([^ ]*\).*/\1/p' "$HERE/requirements-llama.txt")
[ -n "$VER" ] || { log "no llama-cpp-python==VERSION line in $HERE/requirements-llama.txt"; exit 1; }
read -r AMX_OFF AVX2_CMAKE < <(python3 -c '
import ast, sys
src = open(sys.argv[1]).read()
vals = {}
for node in ast.parse(src).body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
        try: vals[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError: pass
print(vals["LLAMA_BUILD_ENV"]["CFLAGS"].replace(" ", ","), vals["LLAMA_AVX2_CMAKE"])
' "$HERE/llm_llamacpp.py")
AMX_OFF=${AMX_OFF//,/ }

# ---- the source: llama-cpp-python's sdist, vendor/llama.cpp --------------------------------------
CACHE=$HERE/.llama-src
TGZ=$CACHE/llama_cpp_python-$VER.tar.gz
SRC=$CACHE/llama_cpp_python-$VER
mkdir -p "$CACHE"
if [ ! -f "$TGZ" ]; then
  log "fetching the llama-cpp-python $VER sdist into $CACHE (pip download, once)"
  python3 -m pip download "llama-cpp-python==$VER" --no-deps --no-binary :all: -d "$CACHE" >&2
  [ -f "$TGZ" ] || { log "pip download did not leave $TGZ"; exit 1; }
fi
if [ ! -f "$SRC/.extracted" ] || [ "$TGZ" -nt "$SRC/.extracted" ]; then
  log "extracting $TGZ"
  rm -rf "$SRC"
  tar -xzf "$TGZ" -C "$CACHE"
  touch "$SRC/.extracted"
fi
LSRC=$SRC/vendor/llama.cpp
[ -f "$LSRC/tools/llama-bench/llama-bench.cpp" ] || { log "$LSRC has no tools/llama-bench"; exit 1; }

# ---- configure flags -------------------------------------------------------------------------------
# As pip builds the binding (llama-cpp-python's CMakeLists: shared libraries, common library on,
# curl off, scikit-build-core's Release), plus the tools (LLAMA_BUILD_TOOLS builds tools/, which
# holds llama-bench in this version); tests, examples, server, app and OpenSSL off.
FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_COMMON=ON -DLLAMA_CURL=OFF
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF
       -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF)
if [ "$ISA" = native ]; then
  FLAGS+=(-DGGML_NATIVE=ON)
else
  read -r -a AV <<< "$AVX2_CMAKE"
  FLAGS+=("${AV[@]}")
fi
FLAGS+=("-DCMAKE_C_FLAGS=$AMX_OFF" "-DCMAKE_CXX_FLAGS=$AMX_OFF")
BIN=$OUT/bin/llama-bench
STAMP=$OUT/cmake-flags.txt
WANT=$(printf '%s\n' "llama-cpp-python $VER vendor/llama.cpp" "${FLAGS[@]}")

if [ -x "$BIN" ] && [ "$BIN" -nt "$TGZ" ] && [ "$BIN" -nt "$SRC/.extracted" ] && [ -f "$STAMP" ] \
   && [ "$(cat "$STAMP")" = "$WANT" ]; then
  log "up to date ($STAMP)"
  echo "$BIN"
  exit 0
fi

command -v cmake > /dev/null || { log "cmake not found"; exit 1; }
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" != "$WANT" ]; then
  log "flags changed: reconfiguring from scratch"
  rm -rf "$OUT"
fi
mkdir -p "$OUT"
T0=$(date +%s)
log "configuring $LSRC -> $OUT ($ISA): ${FLAGS[*]}"
# GIT_CEILING_DIRECTORIES: the build info (commit, build number) comes from the sdist's own .git
# of vendor/llama.cpp, never from a repository around the cache folder (this one).
GIT_CEILING_DIRECTORIES=$CACHE cmake -S "$LSRC" -B "$OUT" "${FLAGS[@]}" > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log" >&2; log "configure failed (log: $OUT/configure.log)"; exit 1; }
grep -E "GGML_SYSTEM_ARCH|CMAKE_BUILD_TYPE|x86 detected|Adding CPU backend|Including CPU backend|ggml version|ggml commit" \
  "$OUT/configure.log" | sed 's/^/  /' >&2 || true
log "building the llama-bench target with -j$JOBS (several minutes on 2 cores)"
# make prints "[ NN%] Building ..." lines: those are the progress shown
set +e
cmake --build "$OUT" --target llama-bench -j "$JOBS" 2>&1 | tee "$OUT/build.log" | grep --line-buffered -E '^\[ *[0-9]+%\]|error:' >&2
ST=${PIPESTATUS[0]}
set -e
[ "$ST" = 0 ] && [ -x "$BIN" ] || { tail -30 "$OUT/build.log" >&2; log "build failed (log: $OUT/build.log)"; exit 1; }
printf '%s\n' "$WANT" > "$STAMP"
touch "$BIN"
log "built in $(( $(date +%s) - T0 )) s"
echo "$BIN"
