#!/usr/bin/env python3
"""Feeds the launch files of `tessera plan3d emit` to the engines' own code (CPU only):

  Megatron-Core  megatron_config.json -> TransformerConfig(**kw) accepts it; its
                 PipelineParallelLayerLayout gives each pipeline rank the plan's decoder layers
                 (count and offset), the embedding first and the loss last; the arguments that
                 bash gets by sourcing megatron_args.sh build the same config; its RankGenerator
                 (order tp-cp-ep-dp-pp) puts each global rank on the stage torchrun.sh says, and
                 keeps every tensor-parallel group on one node; a layout one layer off is rejected.
  DeepSpeed      DeepSpeedConfig accepts deepspeed_config.json with dp data-parallel ranks (its
                 batch assertion train = micro x accumulation x dp) and rejects a wrong batch;
                 PipelineModule, with _partition_layers overridden to take deepspeed_partition.json's
                 `parts` (the snippet of docs/notes/plan3d-engines.md), builds on each of pp gloo
                 processes exactly the stage's layers; PipeModelDataParallelTopology agrees on the
                 rank -> stage map.
  torchrun       torchrun.sh, run for every node at once on this machine with a probe as the
                 training script, gets from torch's own launcher the global ranks, world size and
                 node (group) rank its table promises, and MEGATRON_ARGS on the command line.

Expected numbers come from the plan: plan_expect.json (tests/test_plan3d_emit writes it from the plan
struct under TESSERA_EMIT_KEEP) or, with --plan, the plan file itself; a bare DIR without either is
checked against its own files (their consistency only, said so in the output).

Usage:
  python3 tests/plan3d_engines.py [--test-bin build/tests/test_plan3d_emit]
                                  [--tessera build/tessera --plan PLAN.json ...] [DIR ...]
With no source it runs the test program of build/ (or $TESSERA_BUILD). The engines live in
bench/peers/.venv-engines (or $TESSERA_ENGINES_VENV), made on first use: torch from
bench/peers/.venv-torch when that exists (a .pth file, no download), else the CPU wheel; then
megatron-core==0.16.1 and deepspeed==0.19.8 (DS_BUILD_OPS=0, no compiled ops). When it cannot be
made (no network) the script prints SKIPPED and exits 77; it never passes without checking.
Exit status: 0 all checks passed, 1 some failed, 2 bad usage, 77 skipped.
"""
import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MEGATRON_CORE = "0.16.1"
DEEPSPEED = "0.19.8"
SKIP = 77


def skip(why):
    print("SKIPPED: %s" % why)
    sys.stdout.flush()
    sys.exit(SKIP)


# ---- the engines' environment -----------------------------------------------------------------

def venv_path():
    return os.environ.get("TESSERA_ENGINES_VENV") or os.path.join(ROOT, "bench", "peers", ".venv-engines")


def have_engines():
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "megatron.core", "deepspeed"))


def run_pip(py, args, env=None):
    r = subprocess.run([py, "-m", "pip", "install", "-q"] + args, capture_output=True, text=True, env=env)
    return r.returncode == 0, (r.stdout + r.stderr)[-1500:]


def ensure_venv():
    """Re-executes this script inside the engines' venv, making it first when needed."""
    venv = venv_path()
    py = os.path.join(venv, "bin", "python")
    if os.environ.get("TESSERA_ENGINES_REEXEC") == "1":
        skip("megatron.core / deepspeed still missing inside %s; remove it and retry" % venv)
    ok_file = os.path.join(venv, ".tessera-engines-ok")
    probe = "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in ('torch', 'megatron.core', 'deepspeed')) else 1)"
    if os.path.exists(ok_file) and subprocess.run([py, "-c", probe], capture_output=True).returncode != 0:
        os.remove(ok_file)  # made once, broken since (the shared torch venv removed, say): make it again
    if not os.path.exists(ok_file):
        print("plan3d_engines: making %s (megatron-core %s, deepspeed %s, CPU only)" % (venv, MEGATRON_CORE, DEEPSPEED),
              file=sys.stderr)
        if not os.path.exists(py):
            r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
            if r.returncode != 0:
                skip("cannot create the venv %s: %s" % (venv, r.stderr.strip()[-300:]))
        with open(os.path.join(venv, ".gitignore"), "w") as f:
            f.write("*\n")  # not part of the repository
        site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True).stdout.strip()
        has_torch = subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0
        if not has_torch:
            # PyTorch is large: share the benchmarks' copy when its Python matches (a .pth line
            # appends its site-packages after this venv's own), else the CPU-only wheel.
            ver = "python%d.%d" % sys.version_info[:2]
            peer = os.path.join(ROOT, "bench", "peers", ".venv-torch", "lib", ver, "site-packages")
            if os.path.isdir(os.path.join(peer, "torch")):
                with open(os.path.join(site, "zz_tessera_venv_torch.pth"), "w") as f:
                    f.write(peer + "\n")
                has_torch = subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0
            if not has_torch:
                ok, out = run_pip(py, ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"])
                if not ok:
                    skip("cannot install torch (CPU) into %s (no network?): %s" % (venv, out))
        ok, out = run_pip(py, ["wheel", "setuptools"])
        if not ok:
            skip("cannot install wheel/setuptools into %s (no network?): %s" % (venv, out))
        env = dict(os.environ, DS_BUILD_OPS="0", DS_ACCELERATOR="cpu")
        # --no-build-isolation: DeepSpeed's setup.py imports torch, which must be this one, not a
        # fresh multi-GB download into an isolated build environment.
        ok, out = run_pip(py, ["--no-build-isolation", "megatron-core==" + MEGATRON_CORE, "deepspeed==" + DEEPSPEED], env)
        if not ok:
            skip("cannot install megatron-core %s / deepspeed %s into %s (no network?): %s"
                 % (MEGATRON_CORE, DEEPSPEED, venv, out))
        with open(ok_file, "w") as f:
            f.write("megatron-core==%s deepspeed==%s\n" % (MEGATRON_CORE, DEEPSPEED))
    env = dict(os.environ, TESSERA_ENGINES_REEXEC="1", DS_ACCELERATOR="cpu")
    sys.stdout.flush()
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


# ---- checks -------------------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, case, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s: %s%s" % (case, what, (": " + str(detail)) if detail != "" else ""))
        return cond


R = Report()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sourced_args(d):
    """MEGATRON_ARGS as bash sees it after sourcing megatron_args.sh."""
    r = subprocess.run(["bash", "-c", 'set -eu; source "$1"; printf "%s\\0" "${MEGATRON_ARGS[@]}"', "_",
                        os.path.join(d, "megatron_args.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("sourcing megatron_args.sh failed: " + r.stderr.strip())
    return r.stdout.split("\0")[:-1]


def arg_map(args):
    m, i = {}, 0
    while i < len(args):
        a = args[i]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            m[a] = args[i + 1]
            i += 2
        else:
            m[a] = True
            i += 1
    return m


def node_table(d):
    """The '#@ node=...' lines of torchrun.sh: [{node, type, gpu, nproc, r0, r1, stages}]."""
    rows = []
    for line in open(os.path.join(d, "torchrun.sh")):
        if not line.startswith("#@ "):
            continue
        kv = dict(w.split("=", 1) for w in line[3:].split())
        r0, r1 = (int(x) for x in kv["ranks"].split("-"))
        rows.append({"node": int(kv["node"]), "type": kv["type"], "gpu": kv["gpu"], "nproc": int(kv["nproc"]),
                     "r0": r0, "r1": r1})
    return rows


def plan_file_expectations(path):
    """The numbers of a tessera plan file (docs/FORMATS.md, "plan3d plan": stages[].layers is
    [first, count], node_order names node_types, each with gpus_per_node)."""
    p = json.load(open(path))
    gpn = {t["name"]: t["gpus_per_node"] for t in p["node_types"]}
    tps = sorted({s["tp"] for s in p["stages"]})
    return {"layers": p["model"]["layers"], "stage_layers": [s["layers"][1] for s in p["stages"]], "dp": p["dp"],
            "pp": p["pp"], "tp": tps[0], "mbs": p["mbs"], "micro_batches": p["micro_batches"],
            "global_batch": p["global_batch"], "node_nproc": [gpn[n] for n in p["node_order"]]}


def expectations(d):
    p = os.path.join(d, "plan_expect.json")
    if os.path.exists(p):
        return json.load(open(p)), "plan"
    p = os.path.join(d, ".tessera-plan.json")
    if os.path.exists(p):
        return plan_file_expectations(p), "plan file"
    part = json.load(open(os.path.join(d, "deepspeed_partition.json")))
    ds = json.load(open(os.path.join(d, "deepspeed_config.json")))
    topo = part["topology"]
    e = {"layers": part["num_layers"], "stage_layers": part["stage_layers"], "dp": topo["num_dp"],
         "pp": topo["num_pp"], "tp": topo["num_mp"], "mbs": ds["train_micro_batch_size_per_gpu"],
         "micro_batches": ds["gradient_accumulation_steps"], "global_batch": ds["train_batch_size"]}
    if os.path.exists(os.path.join(d, "torchrun.sh")):
        e["node_nproc"] = [r["nproc"] for r in node_table(d)]
    return e, "emitted files (consistency only: no plan_expect.json)"


def megatron_checks(case, d, e):
    import torch
    from megatron.core.parallel_state import RankGenerator
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = json.load(open(os.path.join(d, "megatron_config.json")))
    kw = {k: (getattr(torch, v) if k.endswith("_dtype") else v) for k, v in cfg.items()}
    pp, counts = e["pp"], e["stage_layers"]
    try:
        tc = TransformerConfig(**kw)
    except Exception as ex:  # the engine rejected it
        R.check(case, False, "Megatron-Core TransformerConfig(**megatron_config.json) accepts it", repr(ex))
        return
    R.check(case, True, "TransformerConfig accepts megatron_config.json")
    R.check(case, tc.num_layers == e["layers"], "num_layers", tc.num_layers)
    R.check(case, tc.tensor_model_parallel_size == e["tp"] and tc.pipeline_model_parallel_size == pp, "tp / pp")
    lay = tc.pipeline_model_parallel_layout
    if pp > 1:
        ok = R.check(case, isinstance(lay, PipelineParallelLayerLayout), "layout parsed by Megatron-Core", type(lay))
        if ok:
            got = [lay.get_num_layers_to_build(LayerType.decoder, pp_rank=r) for r in range(pp)]
            R.check(case, got == counts, "Megatron-Core's decoder layers per pipeline rank = the plan's", (got, counts))
            offs = [lay.get_layer_offset(LayerType.decoder, pp_rank=r) for r in range(pp)]
            want = [sum(counts[:r]) for r in range(pp)]
            R.check(case, offs == want, "Megatron-Core's layer offsets", (offs, want))
            R.check(case, lay.virtual_pipeline_model_parallel_size == 1, "no virtual pipeline stages")
            R.check(case, lay.layout[0][0][0] == LayerType.embedding and lay.layout[pp - 1][0][-1] == LayerType.loss,
                    "embedding on the first stage, loss on the last")
            emb = [lay.get_num_layers_to_build(LayerType.embedding, pp_rank=r) for r in range(pp)]
            R.check(case, emb == [1] + [0] * (pp - 1), "one embedding, on stage 0", emb)
            # Megatron-LM's validate_args: layout stages divisible by pp, vpp = stages / pp = 1
            n = PipelineParallelLayerLayout.get_num_stages_from_str(cfg["pipeline_model_parallel_layout"])
            R.check(case, n == pp, "Megatron-LM's stage count of the layout string", n)
        # the check is live: the same layout against one more layer is refused
        try:
            TransformerConfig(**dict(kw, num_layers=kw["num_layers"] + 1))
            R.check(case, False, "a layout one layer short is rejected by Megatron-Core")
        except (AssertionError, ValueError):
            R.check(case, True, "a layout one layer short is rejected")
    else:
        R.check(case, lay is None, "one stage: no layout", lay)

    # megatron_args.sh, as Megatron-LM's core_transformer_config_from_args would map it
    try:
        args = sourced_args(d)
    except RuntimeError as ex:
        R.check(case, False, "bash sources megatron_args.sh", ex)
        return
    a = arg_map(args)
    names = {"--num-layers": "num_layers", "--hidden-size": "hidden_size", "--ffn-hidden-size": "ffn_hidden_size",
             "--num-attention-heads": "num_attention_heads", "--tensor-model-parallel-size": "tensor_model_parallel_size",
             "--pipeline-model-parallel-size": "pipeline_model_parallel_size"}
    kw2 = {v: int(a[k]) for k, v in names.items() if k in a}
    R.check(case, len(kw2) == len(names), "megatron_args.sh has every size argument", sorted(a))
    if "--pipeline-model-parallel-layout" in a:
        kw2["pipeline_model_parallel_layout"] = a["--pipeline-model-parallel-layout"]
    dtype = torch.bfloat16 if "--bf16" in a else torch.float16 if "--fp16" in a else torch.float32
    kw2.update(bf16="--bf16" in a, fp16="--fp16" in a, params_dtype=dtype, pipeline_dtype=dtype)
    if "--recompute-granularity" in a:
        kw2.update(recompute_granularity=a["--recompute-granularity"], recompute_method=a["--recompute-method"],
                   recompute_num_layers=int(a["--recompute-num-layers"]))
    for k in names.values():
        R.check(case, kw2.get(k) == cfg.get(k), "megatron_args.sh %s = megatron_config.json" % k, (kw2.get(k), cfg.get(k)))
    R.check(case, kw2.get("pipeline_model_parallel_layout") == cfg.get("pipeline_model_parallel_layout"),
            "the same layout in both files")
    try:
        tc2 = TransformerConfig(**kw2)
        if pp > 1:
            got = [tc2.pipeline_model_parallel_layout.get_num_layers_to_build(LayerType.decoder, pp_rank=r)
                   for r in range(pp)]
            R.check(case, got == counts, "the arguments' layout gives the plan's split", got)
        else:
            R.check(case, True, "TransformerConfig accepts the arguments")
    except Exception as ex:
        R.check(case, False, "TransformerConfig accepts the arguments of megatron_args.sh", repr(ex))
    R.check(case, int(a.get("--micro-batch-size", -1)) == e["mbs"], "--micro-batch-size")
    gb = int(a.get("--global-batch-size", -1))
    R.check(case, gb == e["global_batch"] and gb == e["mbs"] * e["micro_batches"] * e["dp"],
            "--global-batch-size = mbs x micro-batches x dp (Megatron derives dp = world / (tp pp))", gb)

    # rank order: Megatron's own generator against torchrun.sh's table
    if os.path.exists(os.path.join(d, "torchrun.sh")):
        tp, dp = e["tp"], e["dp"]
        rg = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=1, order="tp-cp-ep-dp-pp")
        stage_of = {}
        for group in rg.get_ranks("pp"):
            for s, r in enumerate(group):
                stage_of[r] = s
        R.check(case, all(stage_of[r] == r // (dp * tp) for r in stage_of), "Megatron: stage s = ranks [s dp tp, (s+1) dp tp)")
        rows = node_table(d)
        node_of = {r: row["node"] for row in rows for r in range(row["r0"], row["r1"] + 1)}
        R.check(case, sorted(node_of) == list(range(tp * dp * pp)), "torchrun.sh's nodes hold every rank once")
        split = [g for g in rg.get_ranks("tp") if len({node_of.get(r) for r in g}) != 1]
        R.check(case, not split, "Megatron's tensor-parallel groups each on one node", split[:3])
        if "node_nproc" in e:
            R.check(case, [r["nproc"] for r in rows] == e["node_nproc"], "processes per node = the plan's GPUs per node")


def deepspeed_checks(case, d, e):
    """The partition file and DeepSpeed's topology (in this process; the PipelineModule is built by
    the gloo workers of run_deepspeed_group)."""
    from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
    part = json.load(open(os.path.join(d, "deepspeed_partition.json")))
    pp, tp, dp = e["pp"], e["tp"], e["dp"]
    topo = PipeModelDataParallelTopology(num_pp=pp, num_mp=tp, num_dp=dp)
    R.check(case, all(topo.get_coord(r).pipe == r // (dp * tp) for r in range(pp * tp * dp)),
            "DeepSpeed's topology: stage s = ranks [s dp tp, (s+1) dp tp)")
    R.check(case, part["topology"] == {"class": "PipeModelDataParallelTopology", "num_pp": pp, "num_dp": dp, "num_mp": tp},
            "partition topology", part["topology"])
    parts = part["parts"]
    R.check(case, len(parts) == pp + 1 and parts[0] == 0 and parts[-1] == e["layers"] + 2, "parts spans the layer list",
            parts)
    return parts


WORKER = r'''
import json, os, sys
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch
import deepspeed
from deepspeed.pipe import PipelineModule, LayerSpec
from deepspeed.runtime.config import DeepSpeedConfig
from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology

# --- the snippet of docs/notes/plan3d-engines.md ---
class PlannedPipelineModule(PipelineModule):
    """A PipelineModule whose stage boundaries are tessera's `parts` (deepspeed_partition.json)."""

    def __init__(self, layers, parts, **kwargs):
        self._tessera_parts = [int(x) for x in parts]
        super().__init__(layers=layers, **kwargs)

    def _partition_layers(self, method="uniform"):
        parts = self._tessera_parts
        if (len(parts) != self.num_stages + 1 or parts[0] != 0 or parts[-1] != len(self._layer_specs)
                or any(b < a for a, b in zip(parts, parts[1:]))):
            raise ValueError("parts %s do not split %d layers into %d stages" % (parts, len(self._layer_specs), self.num_stages))
        self.parts = list(parts)
        stage_id = self._topo.get_coord(self.global_rank).pipe
        self._set_bounds(start=self.parts[stage_id], stop=self.parts[stage_id + 1])
# ---

class Embedding(torch.nn.Linear):
    pass
class TransformerLayer(torch.nn.Linear):
    pass
class Head(torch.nn.Linear):
    pass

class MPU:  # the data-parallel size DeepSpeedConfig divides the batch by
    def __init__(self, dp):
        self.dp = dp
    def get_data_parallel_world_size(self):
        return self.dp

deepspeed.init_distributed(dist_backend="gloo", verbose=False)
rank = int(os.environ["RANK"])
out = {}
for d in json.loads(sys.argv[1]):
    part = json.load(open(os.path.join(d, "deepspeed_partition.json")))
    L, S = part["num_layers"], part["num_stages"]
    specs = [LayerSpec(Embedding, 2, 2)] + [LayerSpec(TransformerLayer, 2, 2) for _ in range(L)] + [LayerSpec(Head, 2, 2)]
    topo = PipeModelDataParallelTopology(num_pp=S, num_mp=1, num_dp=1)
    m = PlannedPipelineModule(specs, part["parts"], topology=topo, partition_method="uniform")
    r = {"stage": m.stage_id, "start": m._local_start, "stop": m._local_stop,
         "built": [type(f).__name__ for f in m.forward_funcs]}
    if rank == 0:
        dp = part["topology"]["num_dp"]
        cfg_path = os.path.join(d, "deepspeed_config.json")
        try:
            c = DeepSpeedConfig(cfg_path, mpu=MPU(dp))
        except Exception as ex:
            r["config_error"] = repr(ex)[-600:]
            c = None
        r["config"] = None if c is None else {"train_batch_size": c.train_batch_size, "micro": c.train_micro_batch_size_per_gpu,
                       "gas": c.gradient_accumulation_steps, "world": c.world_size, "stages": c.pipeline["stages"],
                       "ckpt": c.pipeline["activation_checkpoint_interval"], "bf16": c.bfloat16_config.enabled,
                       "fp16": c.float16_config.enabled, "zero": c.zero_optimization_stage}
        bad = json.load(open(cfg_path))
        bad["train_batch_size"] += 1
        try:
            DeepSpeedConfig(bad, mpu=MPU(dp))
            r["rejects_bad_batch"] = False
        except AssertionError:
            r["rejects_bad_batch"] = True
        # the stock partitioner, for contrast (what the override replaces)
        from deepspeed.runtime import utils as ds_utils
        r["uniform_parts"] = ds_utils.partition_uniform(num_items=len(specs), num_parts=S)
    out[d] = r
print("TESSERA-RESULT " + json.dumps(out))
'''


def run_deepspeed_group(pp, dirs, tmp):
    """pp gloo processes building the PipelineModule of every dir with that pp; {dir: [per-rank result]}."""
    script = os.path.join(tmp, "ds_worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    port = free_port()
    procs, logs = [], []
    for rank in range(pp):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(pp), LOCAL_RANK=str(rank), LOCAL_SIZE=str(pp),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
        # output to files: a pipe nobody reads while polling could fill and stall the worker
        logs.append((open(os.path.join(tmp, "ds-%d-%d.out" % (pp, rank)), "w+"),
                     open(os.path.join(tmp, "ds-%d-%d.err" % (pp, rank)), "w+")))
        procs.append(subprocess.Popen([sys.executable, script, json.dumps(dirs)], env=env, stdout=logs[-1][0],
                                      stderr=logs[-1][1], text=True))
    results = {d: [None] * pp for d in dirs}
    errors = []
    deadline = time.time() + 600
    # a rank that fails leaves the others waiting in a collective: stop them all then
    while any(p.poll() is None for p in procs):
        if time.time() > deadline or any(p.returncode not in (None, 0) for p in procs):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            if time.time() > deadline:
                errors.append("timed out")
            break
        time.sleep(0.2)
    for rank, p in enumerate(procs):
        p.wait()
        out, err = (f.seek(0) or f.read() for f in logs[rank])
        for f in logs[rank]:
            f.close()
        line = [l for l in out.splitlines() if l.startswith("TESSERA-RESULT ")]
        if p.returncode != 0 or not line:
            errors.append("rank %d exit %s: %s" % (rank, p.returncode, err.strip()[-800:]))
            continue
        for d, r in json.loads(line[-1][len("TESSERA-RESULT "):]).items():
            results[d][rank] = r
    return results, errors


PROBE = r'''
import json, os, sys
out = sys.argv[sys.argv.index("--tessera-probe-out") + 1]
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
with open(os.path.join(out, "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv[1:]}, f)
'''


def torchrun_checks(case, d, e, tmp):
    rows = node_table(d)
    world = sum(r["nproc"] for r in rows)
    if world > 64:
        print("SKIPPED (part) %s: torchrun.sh launch of %d processes (more than 64 on this machine)" % (case, world))
        return
    probe = os.path.join(tmp, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    out = tempfile.mkdtemp(dir=tmp, prefix="probe-")
    port = free_port()
    launcher = "%s -m torch.distributed.run" % sys.executable
    procs = []
    for row in rows:
        env = dict(os.environ, NODE_RANK=str(row["node"]), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHRUN=launcher, TRAIN_SCRIPT=probe, OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(["bash", os.path.join(d, "torchrun.sh"), "--tessera-probe-out", out], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            logs.append(p.communicate()[0] + "\n(timed out)")
    if not R.check(case, all(p.returncode == 0 for p in procs), "torchrun.sh launches on every node",
                   [l.strip()[-600:] for l, p in zip(logs, procs) if p.returncode]):
        return
    seen = {}
    for f in glob.glob(os.path.join(out, "rank*.json")):
        j = json.load(open(f))
        seen[int(j["env"]["RANK"])] = j
    R.check(case, sorted(seen) == list(range(world)), "torch's launcher started ranks 0..%d" % (world - 1), sorted(seen))
    want_args = sourced_args(d) + ["--tessera-probe-out", out]
    for row in rows:
        on_node = sorted(r for r, j in seen.items() if int(j["env"]["GROUP_RANK"]) == row["node"])
        R.check(case, on_node == list(range(row["r0"], row["r1"] + 1)),
                "torchrun gave node %d (%s) ranks %d-%d" % (row["node"], row["type"], row["r0"], row["r1"]), on_node)
        bad = [r for r in on_node if int(seen[r]["env"]["LOCAL_RANK"]) != r - row["r0"]
               or int(seen[r]["env"]["LOCAL_WORLD_SIZE"]) != row["nproc"]]
        R.check(case, not bad, "node %d: local ranks 0-%d" % (row["node"], row["nproc"] - 1), bad)
    R.check(case, all(int(j["env"]["WORLD_SIZE"]) == world for j in seen.values()), "world size %d everywhere" % world,
            sorted({j["env"]["WORLD_SIZE"] for j in seen.values()}))
    bad = [r for r, j in seen.items() if j["argv"] != want_args]
    R.check(case, not bad, "MEGATRON_ARGS reach every rank's command line", bad[:4])
    print("torchrun %s: %d nodes, %d ranks launched" % (case, len(rows), len(seen)))


def check_dirs(cases, tmp):
    import megatron.core
    import deepspeed
    import torch
    print("engines: megatron-core %s, deepspeed %s, torch %s" % (megatron.core.__version__, deepspeed.__version__,
                                                                   torch.__version__))
    if megatron.core.__version__ != MEGATRON_CORE or deepspeed.__version__ != DEEPSPEED:
        print("note: the files target megatron-core %s and deepspeed %s" % (MEGATRON_CORE, DEEPSPEED))
    exp = {}
    for case, d in cases:
        e, src = expectations(d)
        exp[d] = e
        print("case %s (%s): pp %d, dp %d, tp %d, split %s; expected from the %s" % (case, d, e["pp"], e["dp"], e["tp"],
                                                                                  e["stage_layers"], src))
        megatron_checks(case, d, e)
        deepspeed_checks(case, d, e)
    by_pp = {}
    for case, d in cases:
        by_pp.setdefault(exp[d]["pp"], []).append((case, d))
    for pp, group in sorted(by_pp.items()):
        t0 = time.time()
        results, errors = run_deepspeed_group(pp, [d for _, d in group], tmp)
        R.check("deepspeed pp=%d" % pp, not errors, "PipelineModule built on %d gloo processes" % pp, errors)
        for case, d in group:
            e, part = exp[d], json.load(open(os.path.join(d, "deepspeed_partition.json")))
            parts, counts = part["parts"], e["stage_layers"]
            for rank, r in enumerate(results[d]):
                if r is None:
                    continue
                s = r["stage"]
                R.check(case, s == rank, "DeepSpeed rank %d is stage %d" % (rank, s))
                R.check(case, (r["start"], r["stop"]) == (parts[s], parts[s + 1]), "DeepSpeed stage %d bounds" % s,
                        (r["start"], r["stop"]))
                want = (["Embedding"] if s == 0 else []) + ["TransformerLayer"] * counts[s] + (["Head"] if s == pp - 1 else [])
                R.check(case, r["built"] == want, "DeepSpeed stage %d builds the embedding / %d layers / head" % (s, counts[s]),
                        r["built"])
            c = results[d][0] and results[d][0].get("config")
            if results[d][0] and "config_error" in results[d][0]:
                R.check(case, False, "DeepSpeedConfig accepts deepspeed_config.json", results[d][0]["config_error"])
            if c:
                R.check(case, c["train_batch_size"] == e["global_batch"] and c["micro"] == e["mbs"]
                        and c["gas"] == e["micro_batches"] and c["world"] == e["dp"],
                        "DeepSpeedConfig: batch %d = micro %d x gas %d x dp %d" % (e["global_batch"], e["mbs"],
                                                                                e["micro_batches"], e["dp"]), c)
                R.check(case, c["stages"] == pp and c["zero"] == 0, "DeepSpeedConfig pipeline stages / zero stage", c)
                R.check(case, c["bf16"] != c["fp16"] or not (c["bf16"] or c["fp16"]), "one half-precision mode", c)
                R.check(case, results[d][0]["rejects_bad_batch"], "DeepSpeedConfig rejects a batch one off")
                up = results[d][0]["uniform_parts"]
                if up != parts:
                    print("  %s: DeepSpeed's own 'uniform' would split at %s, the plan at %s" % (case, up, parts))
        print("deepspeed pp=%d: %d case(s) in %.0f s" % (pp, len(group), time.time() - t0))
    for case, d in cases:
        if os.path.exists(os.path.join(d, "torchrun.sh")):
            torchrun_checks(case, d, exp[d], tmp)


def collect(args, tmp):
    cases = []
    if args.test_bin:
        keep = os.path.join(tmp, "emitted")
        r = subprocess.run([args.test_bin], env=dict(os.environ, TESSERA_EMIT_KEEP=keep), capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-2000:] + r.stderr[-2000:])
            R.check("test-bin", False, "%s passes" % args.test_bin, r.returncode)
        for sub in sorted(os.listdir(keep)) if os.path.isdir(keep) else []:
            if os.path.exists(os.path.join(keep, sub, "megatron_config.json")):
                cases.append((sub, os.path.join(keep, sub)))
    for i, plan in enumerate(args.plan or []):
        out = os.path.join(tmp, "cli-%d" % i)
        r = subprocess.run([args.tessera, "plan3d", "emit", plan, "--out", out] + (args.emit_arg or []),
                           capture_output=True, text=True)
        if R.check(os.path.basename(plan), r.returncode == 0, "tessera plan3d emit %s" % plan, r.stdout + r.stderr):
            shutil.copy(plan, os.path.join(out, ".tessera-plan.json"))  # the expectations: the plan's own numbers
            cases.append((os.path.basename(plan), out))
    for d in args.dirs:
        if os.path.exists(os.path.join(d, "megatron_config.json")):
            cases.append((os.path.basename(os.path.normpath(d)), d))
        else:
            for sub in sorted(glob.glob(os.path.join(d, "*", "megatron_config.json"))):
                cases.append((os.path.basename(os.path.dirname(sub)), os.path.dirname(sub)))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="emitted directories (or folders of them)")
    ap.add_argument("--test-bin", help="tests/test_plan3d_emit, run with TESSERA_EMIT_KEEP")
    ap.add_argument("--tessera", help="the tessera binary, for --plan")
    ap.add_argument("--plan", action="append", help="a plan file to emit with `tessera plan3d emit` (repeatable)")
    ap.add_argument("--emit-arg", action="append", help="an extra argument of `tessera plan3d emit` (repeatable)")
    args = ap.parse_args()
    if args.plan and not args.tessera:
        ap.error("--plan needs --tessera BIN")
    if not args.dirs and not args.plan and not args.test_bin:
        build = os.environ.get("TESSERA_BUILD") or os.path.join(ROOT, "build")
        cand = os.path.join(build, "tests", "test_plan3d_emit")
        if not os.path.exists(cand):
            ap.error("nothing to check: build %s, or give --test-bin, --plan or DIR" % cand)
        args.test_bin = cand
    for path in [args.test_bin, args.tessera] + args.dirs:
        if path and not os.path.exists(path):
            ap.error("%s does not exist" % path)
    if shutil.which("bash") is None:
        skip("bash not found")
    if not have_engines():
        ensure_venv()
    tmp = tempfile.mkdtemp(prefix="ts_p3_engines.")
    try:
        cases = collect(args, tmp)
        if not cases:
            R.check("inputs", False, "some emitted directory to check")
        else:
            check_dirs(cases, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (R.passed, R.failed))
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()
