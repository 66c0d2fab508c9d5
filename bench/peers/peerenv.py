"""Shared set-up of the peer scripts: import the peer libraries from the running interpreter, or
create a venv beside the scripts, pip-install a requirements file into it once, and re-run the
calling script inside it."""
import importlib
import os
import subprocess
import sys

# TESSERA_ISA=avx2 (or scalar) caps tessera's kernels; the peers run in this process are capped the
# same way, set before they are imported: PyTorch's ATen kernels (ATEN_CPU_CAPABILITY) and the
# oneDNN inside it (ONEDNN_MAX_CPU_ISA). tessera's in-process oneDNN baselines follow TESSERA_ISA
# themselves (ts__dnnl_cap); llama.cpp is built for the class (llm_llamacpp.py --isa avx2).
_CAPS = {"avx2": ("avx2", "AVX2"), "scalar": ("default", "SSE41")}
if os.environ.get("TESSERA_ISA") in _CAPS:
    _aten, _dnnl = _CAPS[os.environ["TESSERA_ISA"]]
    os.environ.setdefault("ATEN_CPU_CAPABILITY", _aten)
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", _dnnl)


def isa_caps():
    """The peers' ISA caps in effect (for the reports)."""
    return {k: os.environ[k] for k in ("TESSERA_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if k in os.environ}


def ensure(tag, modules, venv, reqs, note="", pip_env=None, pip_args=()):
    """Returns when every module in `modules` imports; otherwise re-executes sys.argv[0] in `venv`
    (created and filled from `reqs` if needed). `tag` prefixes messages; `note` is shown before pip;
    `pip_env` is added to pip's environment (build flags of packages compiled from source) and
    `pip_args` to its command line."""
    try:
        for m in modules:
            importlib.import_module(m)
        return
    except ImportError:
        pass
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        sys.exit("%s: %s missing inside %s even after installing; remove it and retry" % (tag, "/".join(modules), venv))
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print("%s: creating %s" % (tag, venv), file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    check = subprocess.run([py, "-c", "import " + ", ".join(modules)], capture_output=True)
    if check.returncode != 0:
        print("%s: pip install -r %s%s" % (tag, reqs, note), file=sys.stderr)
        env = dict(os.environ, **(pip_env or {}))
        subprocess.check_call([py, "-m", "pip", "install", "-q"] + list(pip_args) + ["-r", reqs], env=env)
    script = os.path.abspath(sys.argv[0])
    os.execv(py, [py, script] + sys.argv[1:])
