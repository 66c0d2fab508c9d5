#!/usr/bin/env bash
# GPU check for the CUDA attention kernels, for a machine with an NVIDIA GPU, nvcc and tessera's
# build dependencies (scripts/deps.sh). Builds with TS_CUDA=ON, runs the CUDA test (GPU vs
# ts_attn_reference), then benchmarks three masks (heads 12, d 64) and prints one JSON object per
# run (fields as `tessera attn bench --json`, see bench/cuda/bench_attn_cuda.c).
#
#   scripts/gpu-check.sh [BUILD_DIR]       (default build-gpu; env JOBS, BATCH (4), REPS (20),
#                                           DTYPES ("f32 bf16"), PLAN=0 to skip the scheduler plans,
#                                           PREBUILT=1 to run the binaries already in BUILD_DIR
#                                           (tessera, tests/test_attn_cuda, bench/bench_attn_cuda)
#                                           without configuring or building: for a GPU machine that
#                                           has nvcc but not tessera's build dependencies, with
#                                           binaries built elsewhere by cmake -DTS_CUDA=ON, e.g.
#                                           packed by scripts/gpu-bundle.sh),
#                                           MEMCHECK=1 to run test_attn_cuda again under
#                                           compute-sanitizer memcheck (MEMCHECK_S seconds at most,
#                                           default 300), PEERS=1 to run bench/peers/attn_torch_cuda.py
#                                           (PyTorch SDPA and FlexAttention on the same GPU) after),
#                                           HYBRID=0 to skip the hybrid room's device probe
#                                           (bench/hybrid_probe: copy, GEMM and scan curves, stored as
#                                           the "hybrid-device" artifact that `tessera hybrid run` then
#                                           uses instead of its datasheet model))
# One command for a lent GPU; the runs so far: docs/notes/BENCHMARKS.md, "On an NVIDIA H200".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
JOBS=${JOBS:-$(nproc)}
BATCH=${BATCH:-4}
REPS=${REPS:-20}
DTYPES=${DTYPES:-"f32 bf16"}
PLAN=${PLAN:-1}
PREBUILT=${PREBUILT:-0}
MEMCHECK=${MEMCHECK:-0}
MEMCHECK_S=${MEMCHECK_S:-300}
PEERS=${PEERS:-0}
HYBRID=${HYBRID:-1}
export TESSERA_CACHE=${TESSERA_CACHE:-$(mktemp -d /tmp/tessera-gpu-check.XXXXXX)}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

if [ "$PREBUILT" = 1 ]; then
  for b in tessera tests/test_attn_cuda bench/bench_attn_cuda; do
    [ -x "$BUILD/$b" ] || { echo "gpu-check: PREBUILT=1 but $BUILD/$b is missing" >&2; exit 1; }
  done
else
  command -v nvcc >/dev/null || { echo "gpu-check: nvcc not found" >&2; exit 1; }
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON >/dev/null
  cmake --build "$BUILD" -j "$JOBS" --target test_attn_cuda bench_attn_cuda tessera_cli hybrid_probe >/dev/null
  [ -x "$BUILD/tests/test_attn_cuda" ] || { echo "gpu-check: CUDA targets were not configured (nvcc unusable?)" >&2; exit 1; }
fi

echo "== test_attn_cuda"
"$BUILD/tests/test_attn_cuda"

echo "== bench_attn_cuda"
MASKS=("window2d:h=64,w=64,k=13" "swin:h=56,w=56,win=7,shift=1" "vitdet:h=64,w=64,win=14,global=4")
for mask in "${MASKS[@]}"; do
  plan_args=()
  if [ "$PLAN" = 1 ]; then
    # the CPU scheduler's block structure (reordering + blocks + greedy schedule) for the same mask:
    # no compact passes (runs of 4 keys suit CPU lanes, not 64 x 64 GPU chunks), no CPU timing
    plan="$TESSERA_CACHE/$(echo "$mask" | tr ':=,' '___').json"
    if "$BUILD/tessera" attn plan --pattern "$mask" --heads 12 --head-dim 64 --solver greedy --no-cache \
         --cost analytic --calibrate off --compact none --out "$plan" >/dev/null 2>&1; then
      plan_args=(--plan "$plan")
    else
      echo "gpu-check: tessera attn plan failed for $mask; using the extractor schedule" >&2
    fi
  fi
  for dt in $DTYPES; do
    "$BUILD/bench/bench_attn_cuda" --mask "$mask" --heads 12 --d 64 --batch "$BATCH" --reps "$REPS" --dtype "$dt" \
      ${plan_args[@]+"${plan_args[@]}"}
    if [ ${#plan_args[@]} -gt 0 ]; then  # also the extractor schedule on the original order
      "$BUILD/bench/bench_attn_cuda" --mask "$mask" --heads 12 --d 64 --batch "$BATCH" --reps "$REPS" --dtype "$dt"
    fi
  done
done

if [ "$MEMCHECK" = 1 ]; then
  echo "== compute-sanitizer memcheck test_attn_cuda (at most ${MEMCHECK_S} s)"
  if command -v compute-sanitizer >/dev/null; then
    timeout "$MEMCHECK_S" compute-sanitizer --tool memcheck --leak-check no "$BUILD/tests/test_attn_cuda" | tail -3 ||
      echo "gpu-check: memcheck exited $? (124: out of time)" >&2
  else
    echo "gpu-check: compute-sanitizer not found" >&2
  fi
fi
if [ "$PEERS" = 1 ]; then
  echo "== bench/peers/attn_torch_cuda.py"
  python3 bench/peers/attn_torch_cuda.py --tessera "$BUILD/tessera" --bench "$BUILD/bench/bench_attn_cuda" --batch "$BATCH" \
    --reps "$REPS" --dtypes "$(echo "$DTYPES" | tr ' ' ',')" || echo "gpu-check: the peer run exited $?" >&2
fi
if [ "$HYBRID" = 1 ]; then
  echo "== hybrid device probe (bench/hybrid_probe)"
  if [ -x "$BUILD/bench/hybrid_probe" ]; then
    "$BUILD/bench/hybrid_probe" > "$TESSERA_CACHE/hybrid-device.json" &&
      cat "$TESSERA_CACHE/hybrid-device.json" &&
      "$BUILD/tessera" hybrid device --store "$TESSERA_CACHE/hybrid-device.json" ||
      echo "gpu-check: the hybrid probe exited $?" >&2
  else
    echo "gpu-check: $BUILD/bench/hybrid_probe missing (HYBRID=0 skips it)" >&2
  fi
fi
