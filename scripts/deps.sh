#!/usr/bin/env bash
# Installs the Debian packages tessera builds against, only those missing. Idempotent: a second
# run does nothing. Set TS_DEPS_SKIP=1 to skip (e.g. a machine you manage yourself).
set -euo pipefail
[ "${TS_DEPS_SKIP:-0}" = 1 ] && exit 0

pkgs=(
  build-essential cmake pkg-config clang libclang-rt-14-dev libomp-dev   # compilers, CMake, libFuzzer/sanitizer runtimes
  libopenblas-dev            # OpenBLAS: a baseline for GEMM
  libdnnl-dev                # oneDNN: sgemm and convolution baselines
  coinor-libcbc-dev          # COIN-OR CBC: the ILP solver
  libmetis-dev               # METIS: graph partitioning orders
  libcjson-dev               # cJSON: plans, profiles, --json output
  libfftw3-dev               # FFTW: FFT convolution
  zlib1g-dev                 # zlib: PNG output of plots
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd   # OpenCL through the ICD loader, PoCL on the CPU
  python3-venv               # the SmolLM2 test model's venv (scripts/get-smollm2.sh; .ci/run installs it)
  libopenmpi-dev openmpi-bin # Open MPI: the pipeline runtime's multi-process variant (tessera-pipe-mpi)
  libtbb-dev                 # oneTBB: the flow-graph peer of the pipeline runtime (make peer-pipe)
)

missing=()
for p in "${pkgs[@]}"; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$st" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are missing or a first install attempt fails.
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ]; then
  $SUDO apt-get update -qq
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/tessera-deps.log 2>&1; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || { cat /tmp/tessera-deps.log >&2; exit 1; }
fi
