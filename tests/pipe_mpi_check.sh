#!/usr/bin/env bash
# tessera-pipe-mpi under mpirun: every app at small odd sizes with --check (the gathered frames
# bit-identical to the app's reference; for heat and life this covers the halo exchange between
# frames), with the runtime's own granularity and with a small fixed tile, at 2 ranks; once at 3
# ranks with shares thinner than the halo (a rank then reads rows beyond its neighbour's share);
# the --json figures (halo bytes per frame = 2 x 4 rows x W x 4 bytes for heat at 2 ranks, none for
# a streaming app); bad usage exits 2 on every rank with one message.
# Skips (77) when mpirun is missing or cannot start two ranks here (a container without the
# network or shared memory Open MPI needs).
# Usage: pipe_mpi_check.sh path/to/tessera-pipe-mpi [path/to/mpirun]
set -u
B=${1:?usage: pipe_mpi_check.sh path/to/tessera-pipe-mpi [mpirun]}
MPIRUN=${2:-mpirun}
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"

command -v "$MPIRUN" >/dev/null 2>&1 || skip_all "no $MPIRUN on PATH (Debian: openmpi-bin)"

# Open MPI 4.1 (Debian 12) on one host inside a container: start ranks by fork, never ssh (plm
# isolated); shared memory and self only, without the single-copy (CMA) path that needs ptrace
# rights containers often lack; more ranks than cores allowed, no binding (2 shared cores); PMIx
# keeps its data in a hash, not in a shared-memory segment with pthread locks; root allowed (CI
# containers). A value already in the environment wins.
export OMPI_MCA_plm=${OMPI_MCA_plm:-isolated}
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
export OMPI_MCA_btl_base_warn_component_unused=0
export PMIX_MCA_gds=${PMIX_MCA_gds:-hash}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under the sanitizer build (make sanitize: detect_leaks=1) the ranks keep AddressSanitizer's memory
# checks but not its leak report: Open MPI, hwloc and the MCA plugins (dlclosed at MPI_Finalize, so
# their stacks read "<unknown module>" and cannot be suppressed by name) leave ~120 KB in ~3400
# blocks per rank by design, and no leaked block's stack passes through tessera's code (checked on
# 2026-12-07 with Open MPI 4.1). A leak of tessera's own shows in every other sanitizer test.
if [ -n "${ASAN_OPTIONS:-}" ]; then export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; fi
mpi() { # mpi NP ARGS...: the program on NP ranks, at most 60 s
  local np=$1
  shift
  timeout 60 "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$B" "$@"
}

if ! timeout 30 "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -np 2 true >"$tmp/probe" 2>&1; then
  skip_all "$MPIRUN cannot start 2 ranks here: $(tail -n 3 "$tmp/probe" | tr '\n' ' ')"
fi

# check NP ARGS...: a run with --check that must pass
check() {
  local np=$1
  shift
  if mpi "$np" "$@" --check >"$tmp/out" 2>"$tmp/err" && grep -q ", 0 differ from the reference" "$tmp/out"; then ok
  else bad "-np $np $* --check: $(cat "$tmp/err") $(tail -n 2 "$tmp/out")"; fi
}

for app in heat life edge isp flow cnn; do
  check 2 --app "$app" --size 37x29 --frames 3
  check 2 --app "$app" --size 45x23 --frames 2 --granularity 8x4 --threads 2
done
# 3 ranks over 5 rows: shares of 1, 2, 2 rows, each frame reading 4 rows beyond its share
check 3 --app heat --size 17x5 --frames 4 --granularity 3x1

# --json: the halo and redundancy figures
if command -v python3 >/dev/null 2>&1; then
  if mpi 2 --app heat --size 40x32 --frames 2 --json --check >"$tmp/heat.json" 2>"$tmp/err" &&
     mpi 2 --app edge --size 40x32 --frames 2 --json >"$tmp/edge.json" 2>>"$tmp/err" &&
     python3 - "$tmp/heat.json" "$tmp/edge.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
e = json.load(open(sys.argv[2]))
assert h["feedback"] and h["ranks"] == 2 and h["check"]["mismatched"] == 0, h
assert h["bytes_exchanged_per_frame"] == 2 * 4 * 40 * 4, h["bytes_exchanged_per_frame"]
assert [r["rows"] for r in h["per_rank"]] == [[0, 16], [16, 32]], h["per_rank"]
assert [r["feedback_rows"] for r in h["per_rank"]] == [[0, 20], [12, 32]], h["per_rank"]
s0 = h["stages"][0]  # sweep0: 3 ghost rows per side for the three sweeps after it
assert s0["computed_rows"] == [[0, 19], [13, 32]] and s0["owned_rows"] == [16, 16], s0
assert h["stages"][-1]["redundant_fraction"] == 0, h["stages"][-1]
assert not e["feedback"] and e["bytes_exchanged_per_frame"] == 0 and e["check"] is None, e
assert e["redundant_pixel_fraction"] > 0 and e["wall_s"] > 0 and e["mpix_per_s"] > 0, e
PY
  then ok; else bad "--json figures: $(cat "$tmp/err")"; fi
else
  skip_part "no python3: --json not parsed"
fi

# bad usage: exit 2 from every rank, the message once (rank 0)
usage_case() {
  mpi 2 "$@" >"$tmp/u.out" 2>"$tmp/u.err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c '^tessera-pipe-mpi: ' "$tmp/u.err")" -eq 1 ] && [ ! -s "$tmp/u.out" ]; then ok
  else bad "$* exited $rc (want 2, one message): $(cat "$tmp/u.err")"; fi
}
usage_case --app nope --size 16x16
usage_case --app heat --size 16
usage_case --app heat --bogus
usage_case --size 16x16
usage_case --app cnn --size 9x3 # the last stage has 1 row at level 2: fewer rows than ranks

finish pipe_mpi_check
