#!/usr/bin/env python3
"""Counts the lines of src/ that implement timing, provenance, key hashing, caching and ISA dispatch
(issue 30's measure), at a git revision: whole files, or named functions within a file (from the
line that defines them to their closing brace in column 0). The two manifests name the mechanism
code before the shared core (49fe18e) and after it; a function named but absent is reported.

  scripts/mechanism_lines.py before [REV]     (default REV 49fe18e)
  scripts/mechanism_lines.py after [REV]      (default REV HEAD)

REV `worktree` reads the files as they are in the working tree (uncommitted changes included).
"""
import re
import subprocess
import sys

BEFORE = {
    "src/attn/profile_time.c": ["cmp_double", "clock_now", "ts__attn_time_plan", "ts__attn_time_plans"],
    "src/attn/profile.c": ["cmp_double", "median_of_passes", "ts_attn_profile_default_path", "ts_attn_profile_matches",
                           "ts_attn_profile_get"],
    "src/attn/sched_cache.c": ["fnv", "fnv_i64", "fnv_str", "ts_attn_plan_key", "ts_attn_plan_source_key",
                               "ts_attn_plan_cache_path", "index_path", "ts_attn_plan_cache_find", "ts_attn_plan_cache_store"],
    "src/conv/conv_time.c": ["cmp_double", "median_of", "ts_conv_time_rounds"],
    "src/conv/conv_profile.c": ["utc_now", "load_file", "ts_conv_profile_open", "ts_conv_profile_path", "ts_conv_profile_save"],
    "src/gconv/gconv_profile.c": ["thread_cpu", "time_entry", "dcmp", "ts__gconv_profile_provenance",
                                  "ts_gconv_profile_default_path", "matches", "ts_gconv_profile_get"],
    "src/gconv/gconv_plan_json.c": ["hex", "ts_gconv_plan_cache_path", "ts_gconv_plan_get"],
    "src/gconv/gconv_layer.c": ["ts__gconv_fnv", "ts_gconv_conn_hash"],
    "src/core/hwinfo.c": ["provenance", "ts_hwinfo_matches", "ts_hwinfo_get"],
    "src/core/hwinfo_json.c": ["ts_hwinfo_default_path", "ts_hwinfo_path_threads", "ts_hwinfo_save", "ts_hwinfo_load"],
    "src/llm/llm_stream.c": ["cmp_dbl", "stream_at"],
    "src/cuda/attn_cuda_costs.c": ["ts_attn_cuda_costs_path", "ts_attn_cuda_costs_save", "ts_attn_cuda_costs_load"],
    "src/kernels/dispatch.c": "*",
    "src/llm/quant_dispatch.c": ["g_tables", "table_for", "resolve", "ts__quant", "ts__quant_for", "ts__quant_pgemm_variants"],
    "src/gconv/gconv_kern_ref.c": ["resolve", "ts__gconv_kern", "ts_gconv_kernel_isa"],
    "src/llm/llm_ops.c": ["ts__llm_ops_active"],
}

AFTER = {
    "src/core/measure.c": "*",
    "src/core/provenance.c": "*",
    "src/core/artifact.c": "*",
    "src/core/dispatch.c": "*",
    "src/attn/profile_time.c": ["ts__attn_time_plan", "ts__attn_time_plans", "time_one", "time_many", "plan_call"],
    "src/attn/profile.c": ["ts_attn_profile_default_path", "ts_attn_profile_matches", "ts_attn_profile_get", "store_key",
                           "get_accept", "get_compute", "get_check"],
    "src/attn/sched_cache.c": ["hash_desc", "ts_attn_plan_key", "ts_attn_plan_source_key", "ts_attn_plan_cache_path",
                               "plan_provenance", "ts_attn_plan_cache_find", "ts_attn_plan_cache_store"],
    "src/conv/conv_time.c": ["ts_conv_time_rounds"],
    "src/conv/conv_profile.c": ["load", "ts_conv_profile_open", "ts_conv_profile_path", "ts_conv_profile_save"],
    "src/gconv/gconv_profile.c": ["time_entry", "ts__gconv_profile_provenance", "ts_gconv_profile_default_path",
                                  "matches", "ts_gconv_profile_get", "prof_accept", "prof_compute"],
    "src/gconv/gconv_profile_json.c": ["store_key", "in_store"],
    "src/gconv/gconv_plan_json.c": ["ts_gconv_plan_cache_path", "ts_gconv_plan_get", "plan_accept", "plan_compute",
                                    "plan_check"],
    "src/gconv/gconv_layer.c": ["ts_gconv_conn_hash"],
    "src/core/hwinfo.c": ["provenance", "ts_hwinfo_matches", "ts_hwinfo_get"],
    "src/core/hwinfo_json.c": ["ts_hwinfo_default_path", "ts_hwinfo_path_threads", "ts_hwinfo_save", "ts_hwinfo_load",
                               "ts_hwinfo_profile_key", "ts_hwinfo_profile_key_here", "get_accept", "get_compute",
                               "get_check"],
    "src/llm/llm_stream.c": ["one_pass", "stream_at", "wpf_key", "wpf_accept", "wpf_compute", "wpf_check"],
    "src/cuda/attn_cuda_costs.c": ["ts_attn_cuda_costs_path", "ts_attn_cuda_costs_save", "ts_attn_cuda_costs_load"],
    "src/cuda/attn_cuda.c": ["costs_accept", "costs_compute", "costs_check"],
    "src/llm/quant_dispatch.c": ["g_variants", "ts__quant", "ts__quant_for"],
    "src/gconv/gconv_kern_ref.c": ["g_variants", "ts__gconv_kern", "ts_gconv_kernel_isa"],
    "src/llm/llm_ops.c": ["g_variants", "ts__llm_ops_active"],
    "src/kernels/kernels_api.c": ["g_variants", "ts__kernels", "ts__kernels_for", "ts_kernels_isa"],
    "src/nn/cnn_plan.c": ["hash_desc", "plan_key", "profile_stamp", "plan_accept", "plan_compute", "plan_check",
                          "ts_cnn_conv_plan_create"],
    # The CLI's own conv plan cache until it became the library's (cnn_plan.c above): named so that
    # a revision that still has it counts it, and the move shows as a move.
    "tools/tessera/cmd_conv.c": ["plan_key", "profile_stamp", "plan_load", "plan_store"],
}


def show(rev, path):
    if rev == "worktree":
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return None
    r = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def func_lines(text, name):
    """Lines of the definition of `name` (a function, or a static table) in text; 0 if absent."""
    lines = text.split("\n")
    pat = re.compile(r"^[A-Za-z_][^;()]*\b" + re.escape(name) + r"\s*(\(|\[)")
    for i, ln in enumerate(lines):
        if pat.match(ln):
            j = i
            while j < len(lines) and not lines[j].startswith("}"):
                if lines[j].rstrip().endswith(";") and j == i and "{" not in ln:
                    break  # a declaration
                j += 1
            if j < len(lines) and lines[j].startswith("}"):
                return j - i + 1
    return 0


def count(manifest, rev):
    total = 0
    for path, names in manifest.items():
        text = show(rev, path)
        if text is None:
            print(f"  {path}: absent at {rev}")
            continue
        if names == "*":
            n = text.count("\n")
            print(f"  {path}: {n} (whole file)")
            total += n
            continue
        sub = 0
        for name in names:
            n = func_lines(text, name)
            sub += n
        found = [nm for nm in names if func_lines(text, nm)]
        print(f"  {path}: {sub} ({', '.join(found)})")
        total += sub
    return total


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "before"
    rev = sys.argv[2] if len(sys.argv) > 2 else ("49fe18e" if which == "before" else "HEAD")
    total = count(BEFORE if which == "before" else AFTER, rev)
    print(f"{which} at {rev}: {total} lines")
