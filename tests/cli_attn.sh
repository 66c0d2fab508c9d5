#!/usr/bin/env bash
# tessera attn: `attn plan` writes a valid plan JSON (schedule with a thread per panel, the
# permutation) and caches it in the artifact store ($TESSERA_CACHE/attn-plan/<key>.json, the request's
# index in attn-plan-src/<source key>.json), a second run loads the cached
# plan; `attn bench --json` on a small pattern reports every field; bad usage exits 2 with one line,
# a missing mask file exits 1. Compact passes and calibration on by default, --compact none and
# --calibrate off change the plan and its key.
# Usage: cli_attn.sh path/to/tessera   (TESSERA_CACHE points at a scratch directory)
set -u
T=${1:?usage: cli_attn.sh path/to/tessera}
export TESSERA_QUIET=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/cli_common.sh"
export TESSERA_CACHE="$tmp/cache"
SPEC="permute:window2d:h=16,w=16,k=5,seed=7"

# plan: JSON report + plan file + cache entry
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --out "$tmp/plan.json" --json >"$tmp/p1.json" 2>"$tmp/err"; then ok; else
  bad "attn plan exited $?: $(cat "$tmp/err")"; fi
if python3 - "$tmp/p1.json" "$tmp/plan.json" "$tmp/cache" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
assert r["cached"] is False and r["n"] == 256 and r["reorder"] == "hilbert", r
assert r["solver_used"] in ("ilp", "greedy") and r["ilp_status"] in ("optimal", "feasible"), r
assert r["guarded"] is True and r["guard_schedule_ms"] > 0 and r["guard_fixed_ms"] > 0, r
assert r["predicted_ilp"] <= r["predicted_greedy"] * (1 + 1e-12), r
c = r["cover"]  # the ILP's exact compact-pass stage; the greedy's schedule priced by the same model
assert r["predicted_ilp"] <= r["predicted_greedy_exact"] * (1 + 1e-12), r
assert c["ms"] >= 0 and c["components_enumerated"] >= 0 and c["components_cbc"] >= 0 and c["timeouts"] >= 0, c
entry = os.path.join(sys.argv[3], "attn-plan", r["key"] + ".json")
assert os.path.exists(entry) and r["cache_path"] == entry, "no cache entry"
env = json.load(open(entry))
assert env["artifact"] == "attn-plan" and env["key"] == r["key"] and env["data"]["key"] == r["key"], env.keys()
assert env["provenance"]["threads"] == 2 and "profile" in env["provenance"], env["provenance"]
assert p["format"] == "tessera-attn-plan" and p["key"] == r["key"], p.keys()
d = p["desc"]
assert d["n"] == 256 and d["heads"] == 2 and d["d"] == 32 and d["threads"] == 2 and d["reorder"] == "hilbert", d
assert sorted(p["perm"]) == list(range(256)), "perm is not a permutation"
s = p["schedule"]
assert s["n"] == 256 and len(s["panels"]) >= 1
rows = 0
kept = r["guarded"] and r["fallback"] is None  # the guard may replace the schedule by a faster unassigned one
for q in s["panels"]:
    assert q["r0"] == rows and q["nr"] >= 1 and (q["thread"] in (0, 1) if kept else "thread" not in q), q
    rows += q["nr"]
    for g in q["segs"]:
        assert len(g) == 7 and g[6] in ("mixed", "full", "dense", "compact"), g
assert rows == 256
PY
then ok; else bad "plan JSON checks failed"; fi
# the second run is served from the cache
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --json >"$tmp/p2.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert b["cached"] is True and a["key"]==b["key"], b' \
    "$tmp/p1.json" "$tmp/p2.json"; then ok; else bad "second attn plan was not cached: $(cat "$tmp/p2.json" "$tmp/err")"; fi
# other block options are another plan (not the cached one)
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --density 0.9 --json >"$tmp/p4.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert b["cached"] is False and a["key"]!=b["key"], b' \
    "$tmp/p1.json" "$tmp/p4.json"; then ok; else bad "block options not in the key: $(cat "$tmp/p4.json" "$tmp/err")"; fi
# a tampered index entry pointing at another plan is detected and ignored
for f in "$tmp/cache/attn-plan-src/"*.json; do
  python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); e["data"]["key"]=json.load(open(sys.argv[2]))["key"]; json.dump(e, open(sys.argv[1], "w"))' \
    "$f" "$tmp/p4.json"
done
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --json >"$tmp/p5.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["cached"] is False, b' "$tmp/p5.json" &&
  grep -q "does not match this request" "$tmp/err"; then ok; else bad "tampered cache index accepted: $(cat "$tmp/p5.json" "$tmp/err")"; fi
# another head dim is another key
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 16 --reorder hilbert --threads 2 --solver greedy --json >"$tmp/p3.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert b["cached"] is False and a["key"]!=b["key"], b' \
    "$tmp/p1.json" "$tmp/p3.json"; then ok; else bad "head dim not in the key: $(cat "$tmp/p3.json" "$tmp/err")"; fi
# measured cost model (quick profile level, < 1 s): recorded in the report, the profile cached,
# and another plan key than the analytic plan with the same options (p1)
if "$T" attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --cost profile --profile-level quick --json >"$tmp/p6.json" 2>"$tmp/err" &&
  python3 - "$tmp/p1.json" "$tmp/p6.json" "$tmp/cache" <<'PY'
import json, os, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["cost"] == "analytic", a
assert b["cost"] == "profile" and b["profile_level"] == "quick" and b["cached"] is False, b
assert b["profile_path"].startswith(os.path.join(sys.argv[3], "attn-profile", "quick-d32-f32-")), b["profile_path"]
assert json.load(open(b["profile_path"]))["artifact"] == "attn-profile", b["profile_path"]
assert os.path.exists(b["profile_path"]) and b["key"] != a["key"], b
assert b["predicted_ilp"] > 0 and b["predicted_ilp"] <= b["predicted_greedy"] * (1 + 1e-12), b
PY
then ok; else bad "attn plan --cost profile: $(cat "$tmp/p6.json" "$tmp/err")"; fi
# --compact none: no compact segment; --calibrate off: not calibrated; both change the key
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --compact none --calibrate off --out "$tmp/plan_nc.json" --json >"$tmp/p7.json" 2>"$tmp/err" &&
  python3 - "$tmp/p1.json" "$tmp/p7.json" "$tmp/plan_nc.json" <<'PY'
import json, sys
a, b, p = (json.load(open(f)) for f in sys.argv[1:4])
assert a["calibrated"] is True and b["calibrated"] is False and b["key"] != a["key"], b
assert b["merged_pieces"] == 0 and b["compact_panels"] == 0, b
assert all(g[6] != "compact" for q in p["schedule"]["panels"] for g in q["segs"]), "compact segment with --compact none"
PY
then ok; else bad "attn plan --compact none --calibrate off: $(cat "$tmp/p7.json" "$tmp/err")"; fi
# human output
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --no-cache --solver greedy >"$tmp/h.txt" 2>&1 &&
  grep -q "^schedule   greedy" "$tmp/h.txt"; then ok; else bad "plan text: $(cat "$tmp/h.txt")"; fi
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --no-cache --threads 2 --time-limit 1 >"$tmp/h2.txt" 2>&1 &&
  grep -q "^cover      exact compact-pass model" "$tmp/h2.txt"; then ok; else bad "plan text (ilp): $(cat "$tmp/h2.txt")"; fi
# --guard off: the solved schedule as it is, another plan key
if "$T" attn plan --cost analytic --pattern "$SPEC" --heads 2 --head-dim 32 --reorder hilbert --solver ilp --time-limit 1 --threads 2 \
    --guard off --json >"$tmp/g.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert b["guarded"] is False and b["calibrated"] is True and a["key"]!=b["key"], b' \
    "$tmp/p1.json" "$tmp/g.json"; then ok; else bad "attn plan --guard off: $(cat "$tmp/g.json" "$tmp/err")"; fi

# bench --json: every field
if "$T" attn bench --cost analytic --pattern "window2d:h=16,w=16,k=5" --heads 2 --head-dim 32 --repeats 2 --rounds 2 --threads 2 --time-limit 1 \
    --json >"$tmp/b.json" 2>"$tmp/err"; then ok; else bad "attn bench exited $?: $(cat "$tmp/err")"; fi
if python3 - "$tmp/b.json" <<'PY'
import json, math, sys
j = json.load(open(sys.argv[1]))
need = ["n", "density", "tiles_empty", "tiles_mixed", "tiles_full", "tiles_empty_before", "tiles_mixed_before",
        "tiles_full_before", "dense_flash", "fixed_best", "fixed_best_tile", "fixed_64", "fixed_best_reordered", "greedy",
        "ilp", "speedup_vs_fixed_best", "speedup_vs_fixed_64", "speedup_vs_fixed_best_reordered", "work_ratio", "plan_ms",
        "plan_parts", "reorder", "cost", "max_abs_err", "err_subset", "gflops_effective", "pct_peak", "ilp_status",
        "rounds", "calibrated", "calib_scale", "merged_pieces", "compact_panels", "greedy_compact_heights",
        "ilp_compact_heights", "guarded", "fallback", "pv_work_ratio_ilp", "tiles_keyed_ilp", "warm"]
missing = [k for k in need if k not in j]
assert not missing, missing
assert j["n"] == 256 and 0 < j["density"] < 1 and j["rounds"] == 2 and len(j["calib_scale"]) == 5
assert j["tiles_empty"] + j["tiles_mixed"] + j["tiles_full"] == 16
for k in ["dense_flash", "fixed_best", "fixed_64", "fixed_best_reordered", "greedy", "ilp"]:
    assert j[k] > 0 and math.isfinite(j[k]), (k, j[k])
    assert j["work_ratio"][k] >= 1.0, (k, j["work_ratio"])
assert j["max_abs_err"] < 1e-4, j["max_abs_err"]
pr = j["speedup_vs_fixed_best_reordered_paired"]
assert pr["rounds"] == 21 and 0 < pr["q25"] <= pr["median"] <= pr["q75"] and math.isfinite(pr["q75"]), pr
assert j["warm"] is True
assert j["gflops_effective"] > 0
assert 1.0 <= j["pv_work_ratio_ilp"] <= j["work_ratio"]["ilp"] + 1e-12, (j["pv_work_ratio_ilp"], j["work_ratio"])
for k in ["reorder_ms", "blocks_ms", "solve_ms"]:
    assert j["plan_parts"][k] >= 0, k
PY
then ok; else bad "bench JSON checks failed: $(head -c 2000 "$tmp/b.json")"; fi
# one thread timed by its CPU clock
if "$T" attn bench --cost analytic --pattern "$SPEC" --heads 1 --head-dim 16 --repeats 1 --rounds 1 --threads 1 --cpu-clock \
    --json >"$tmp/c.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["clock"] == "thread_cpu" and j["threads"] == 1 and j["ilp"] > 0, j' \
    "$tmp/c.json"; then ok; else bad "bench --cpu-clock: $(cat "$tmp/err")"; fi
# --warm off: the same figures, reported
if "$T" attn bench --cost analytic --pattern "$SPEC" --heads 1 --head-dim 16 --repeats 1 --rounds 1 --warm off \
    --json >"$tmp/w.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["warm"] is False and j["ilp"] > 0 and j["max_abs_err"] < 1e-4, j' \
    "$tmp/w.json"; then ok; else bad "bench --warm off: $(cat "$tmp/err")"; fi
# --pass backward: the backward timed for every method, the forward-solved schedule beside the
# re-solved one, the gradients checked against the double-precision reference
if "$T" attn bench --cost analytic --pattern "$SPEC" --heads 2 --head-dim 16 --repeats 1 --rounds 1 --pass backward \
    --json >"$tmp/b.json" 2>"$tmp/err" &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["pass"] == "backward" and j["ilp"] > 0 and j["ilp_forward_schedule"] > 0 and j["forward_ms_ilp"] > 0 and j["max_rel_err"] < 1e-4, j' \
    "$tmp/b.json"; then ok; else bad "bench --pass backward: $(cat "$tmp/err")"; fi
if "$T" attn bench --cost analytic --pattern "$SPEC" --heads 1 --head-dim 16 --repeats 1 --rounds 1 --pass train \
    >"$tmp/tr.txt" 2>"$tmp/err" && grep -q "^ilp_forward_schedule" "$tmp/tr.txt" && grep -q "^train " "$tmp/tr.txt"; then ok; else
  bad "bench --pass train table: $(cat "$tmp/tr.txt" "$tmp/err")"; fi
# bf16, human table
if "$T" attn bench --cost analytic --pattern "$SPEC" --heads 1 --head-dim 16 --repeats 1 --dtype bf16 --solver greedy >"$tmp/t.txt" 2>"$tmp/err" &&
  grep -q "^ilp " "$tmp/t.txt" && grep -q "^fixed_best_reordered" "$tmp/t.txt"; then ok; else
  bad "bench bf16 table: $(cat "$tmp/t.txt" "$tmp/err")"; fi

expect_usage attn
expect_usage attn frobnicate --pattern "$SPEC"
expect_usage attn plan --pattern "$SPEC" --head-dim 32
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 0
expect_usage attn plan --pattern "$SPEC" --mask x.npy --heads 2 --head-dim 32
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --solver cplex
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --reorder magic
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --dtype f16
expect_usage attn bench --pattern "window2d:h=4" --heads 2 --head-dim 32
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --bogus
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --cost measured
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --compact 8,0
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --compact 8,16,32,64,128
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --calibrate maybe
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --guard sometimes
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --warm maybe
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --pass sideways
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --warm off
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --rounds 0
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --cost profile --profile-level huge
expect_usage attn bench --pattern "$SPEC" --heads 2 --head-dim 32 --threads 2 --cpu-clock
expect_usage attn plan --pattern "$SPEC" --heads 2 --head-dim 32 --threads 1 --cpu-clock
# failure: exit 1
"$T" attn plan --cost analytic --mask "$tmp/missing.npy" --heads 2 --head-dim 32 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then ok; else bad "missing mask exited $rc: $(cat "$tmp/err")"; fi
# help
if "$T" attn --help | grep -q "usage: tessera attn plan"; then ok; else bad "attn --help"; fi

finish cli_attn
