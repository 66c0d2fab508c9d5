"""Shared set-up of the peer scripts: import the peer libraries from the running interpreter, or
create a venv beside the scripts, pip-install a requirements file into it once, and re-run the
calling script inside it."""
import importlib
import os
import subprocess
import sys


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
