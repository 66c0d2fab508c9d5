#!/usr/bin/env bash
# tessera pipe: `apps` lists the six apps; `bench --check` runs each at small odd sizes under every
# queue, a fixed, fine, coarse and auto granularity, and two arenas, with every frame equal to the
# reference bit for bit; `--json` carries the granularity over the frames, per-worker counters and
# provenance; `--timeline` writes an SVG; `tune` finds and keeps the offline best, then reads it
# back; `stress` loses nothing. Bad usage exits 2 with one line. No timing is asserted.
# Usage: cli_pipe.sh path/to/tessera
set -u
T=${1:?usage: cli_pipe.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
scratch_cache

expect_usage pipe
expect_usage pipe frobnicate
expect_usage pipe bench
expect_usage pipe bench --app edge --size 0x5
expect_usage pipe bench --app edge --size 12
expect_usage pipe bench --app edge --granularity medium
expect_usage pipe bench --app edge --queue fifo
expect_usage pipe bench --app edge --copy later
expect_usage pipe bench --app edge --frames 0
expect_usage pipe bench --app edge --bogus 1
expect_usage pipe tune
expect_usage pipe stress --runs 0
if "$T" pipe --help | grep -q 'GOPipe'; then ok; else bad "pipe --help"; fi
"$T" pipe bench --app nosuch >/dev/null 2>"$tmp/err"
if [ $? -eq 1 ] && grep -q "edge" "$tmp/err"; then ok; else bad "an unknown app names the valid ones: $(cat "$tmp/err")"; fi

# apps
n=$("$T" pipe apps | grep -c ' stages$')
if [ "$n" -eq 6 ]; then ok; else bad "pipe apps lists $n apps"; fi
if "$T" pipe apps --json | python3 -c 'import json,sys; a=json.load(sys.stdin); assert [x["name"] for x in a]==["edge","heat","isp","flow","life","cnn"], a' ; then ok; else bad "apps --json"; fi

# bench --check over apps x modes
for app in edge heat isp flow life cnn; do
  for args in "--size 37x23 --granularity 8x4 --queue locked" "--size 64x40 --granularity fine --queue mpmc" \
              "--size 50x30 --granularity coarse --inflight 1" "--size 71x33 --granularity auto --copy lazy --threads 2" \
              "--size 40x40 --granularity 16x2 --copy eager --threads 3 --inflight 3"; do
    if "$T" pipe bench --app $app $args --frames 5 --check >"$tmp/out" 2>&1 && grep -q "check: 0 of 5 frames differ" "$tmp/out"; then ok
    else bad "bench --app $app $args --check: $(cat "$tmp/out")"; fi
  done
done

# JSON and timeline
if "$T" pipe bench --app flow --size 96x64 --frames 6 --json --timeline "$tmp/t.svg" --repeats 3 --check >"$tmp/b.json" &&
  python3 - "$tmp/b.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["app"] == "flow" and r["frames"] == 6 and r["tasks"] == r["tasks_expected"] > 0, r
assert r["frames_mismatched"] == 0 and len(r["repeats_wall_s"]) == 3
assert sum(g["last"] - g["first"] + 1 for g in r["granularity_over_frames"]) == 6
assert len(r["workers"]) == r["threads"] and all("idle_s" in w and "contended" in w for w in r["workers"])
assert r["provenance"]["cpu_model"] and r["mpix_per_s"] > 0
PY
then ok; else bad "bench --json: $(head -c 400 "$tmp/b.json")"; fi
if grep -q "<svg" "$tmp/t.svg" 2>/dev/null && grep -q "worker 0" "$tmp/t.svg"; then ok; else bad "timeline SVG"; fi

# tune: measured, then kept
if "$T" pipe tune --app heat --size 64x48 --frames 2 --json >"$tmp/t1.json" 2>/dev/null &&
   "$T" pipe tune --app heat --size 64x48 --frames 2 --json >"$tmp/t2.json" 2>/dev/null &&
   python3 - "$tmp/t1.json" "$tmp/t2.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert not a["cached"] and b["cached"], (a["cached"], b["cached"])
assert (a["best_tile_w"], a["best_tile_h"]) == (b["best_tile_w"], b["best_tile_h"])
assert len(a["candidates"]) >= 4
PY
then ok; else bad "tune then tune again from the store"; fi
if "$T" pipe bench --app heat --size 64x48 --frames 2 --granularity offline --check >"$tmp/o" 2>&1 && grep -q "(tuned)" "$tmp/o"; then ok
else bad "bench --granularity offline: $(cat "$tmp/o")"; fi

# stress
if "$T" pipe stress --runs 200 --seed 5 --json >"$tmp/s.json" 2>/dev/null &&
   python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["ok"] and r["runs"]==200 and r["lost"]==0 and r["duplicated"]==0, r' "$tmp/s.json"; then ok
else bad "stress: $(cat "$tmp/s.json")"; fi

finish cli_pipe
