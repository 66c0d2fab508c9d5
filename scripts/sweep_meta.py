#!/usr/bin/env python3
"""Writes a sweep's meta.json: UTC date, commit (+ when the tracked tree has changes), machine,
the command line and the model file's name. Shared by scripts/llm_sparsity_sweep.sh and
scripts/relu_pred_sweep.sh.

  scripts/sweep_meta.py OUT.json ROOT MODEL "COMMAND LINE"
"""
import datetime, json, os, subprocess, sys


def main():
    out, root, model, command = sys.argv[1:5]
    git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    json.dump({"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit + ("+" if dirty else ""),
               "machine": f"{cpu}, {os.cpu_count()} CPUs", "command": command, "model": os.path.basename(model)},
              open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
