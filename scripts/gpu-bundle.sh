#!/usr/bin/env bash
# Packs the CUDA check's binaries for a GPU machine that has a driver but not tessera's build
# dependencies (cJSON, CBC, OpenBLAS, ...): the three programs scripts/gpu-check.sh runs, and the
# shared libraries they load beyond the C/C++ runtime, as OUT/build/... and OUT/lib.tar.xz.
#
#   scripts/gpu-bundle.sh [BUILD_DIR] [OUT]     (defaults: build, gpu-bundle)
#
# BUILD_DIR must be a Release build configured with nvcc present (TS_CUDA, on by default). On the
# GPU machine, from a checkout of the same commit (glibc there as new as here or newer):
#
#   mkdir -p /tmp/tslib && tar -C /tmp/tslib -xJf OUT/lib.tar.xz
#   LD_LIBRARY_PATH=/tmp/tslib/lib PREBUILT=1 MEMCHECK=1 PEERS=1 scripts/gpu-check.sh OUT/build
#
# (test, benchmarks, memcheck and the PyTorch peers in one command: on the H200 the test took
# ~20 s, the benchmarks ~45 s, the peers ~70 s, and memcheck more than the 90 s it was given)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-gpu-bundle}
bins=(tessera tests/test_attn_cuda bench/bench_attn_cuda bench/hybrid_probe)
for b in "${bins[@]}"; do
  [ -x "$BUILD/$b" ] || { echo "gpu-bundle: $BUILD/$b missing (configure with nvcc present and build first)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT/build/tests" "$OUT/build/bench" "$OUT/lib"
for b in "${bins[@]}"; do cp "$BUILD/$b" "$OUT/build/$b"; done
# every resolved library except the C runtime, libm, libpthread, libdl, librt, the loader, libgcc_s
# and libstdc++ (present on any machine that runs CUDA programs)
skip='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libgcc_s|libstdc\+\+|linux-vdso)\.so'
for b in "${bins[@]}"; do ldd "$BUILD/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L "$path" "$OUT/lib/$name"
  done
tar -C "$OUT" -cJf "$OUT/lib.tar.xz" lib
rm -rf "$OUT/lib"
echo "gpu-bundle: $OUT ($(du -sh "$OUT" | cut -f1)): $(tar -tJf "$OUT/lib.tar.xz" | grep -c '\.so') libraries"
