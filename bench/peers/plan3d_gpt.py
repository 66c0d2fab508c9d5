"""GPT-2-style decoder, split into pipeline stages, for bench/peers/plan3d_gloo.py; plus the
device-type knobs, the in-process profiler and the peer's own (Python) 1F1B cost model that the
planner's estimates are cross-checked against.

Model: token + position embedding; L pre-LN blocks x += proj(causal MHSA(LN1(x))),
x += fc2(GELU(fc1(LN2(x)))) (torch.nn.functional.scaled_dot_product_attention, is_causal=True);
final LN; logits = x @ wte^T (head tied to the token embedding); mean cross-entropy. No dropout,
no biases in the head. Weights: N(0, 0.02), the residual output projections N(0, 0.02/sqrt(2L))
(GPT-2), LayerNorm 1/0, biases 0, drawn from one torch.Generator with a fixed seed in the order
wte, wpe, blocks, so every process builds the same weights and keeps only its stage's part.

A pipeline stage owns [embedding] + layers [first, first+count) + [final LN + head]. When the
stages are more than one, the last stage holds a copy of wte (`head_wte`) for the head, and the
two copies' gradients are summed between the first and the last stage before the optimizer step
(Megatron's tied embedding), so both copies stay equal.

Device types: each "GPU" is one process with one thread. `fast` is torch as installed. `slow` is
chosen by a knob (DEVICE_KNOBS): `isa` (default) runs the same fp32 model in a process whose
math libraries are held to their baseline x86 code paths -- MKL's BLAS with MKL_CBWR=COMPATIBLE
(its SSE2-compatible branch, i.e. no AVX/FMA GEMM kernels), ATen's vectorized kernels with
ATEN_CPU_CAPABILITY=default and oneDNN with ONEDNN_MAX_CPU_ISA=SSE41: an older CPU generation
doing the same arithmetic, like an older GPU next to a newer one; `fp64` does every stage's
arithmetic in float64 (weights cast on use, fp32 at the stage boundaries and in the optimizer);
`bf16` runs the stage under torch.autocast(bfloat16). The knob of a run is recorded with its
measured speed ratio."""
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 20261207

# Device types: extra environment of the process (read by MKL / ATen / oneDNN when they load,
# so it is set before the worker starts) and the compute mode of its stage.
ISA_SLOW_ENV = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"}
DEVICE_KNOBS = {
    "isa": {"fast": ({}, "fp32"), "slow": (ISA_SLOW_ENV, "fp32")},
    "fp64": {"fast": ({}, "fp32"), "slow": ({}, "fp64")},
    "bf16": {"fast": ({}, "fp32"), "slow": ({}, "bf16")},
}
# Environment every worker gets: one thread for every threading layer torch may use.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def device_env(knob, dtype_name):
    return dict(THREAD_ENV, **DEVICE_KNOBS[knob][dtype_name][0])


def device_mode(knob, dtype_name):
    return DEVICE_KNOBS[knob][dtype_name][1]


class Config:
    def __init__(self, layers=8, hidden=256, heads=4, seq=128, vocab=4096, ffn=1024, global_batch=16):
        self.layers, self.hidden, self.heads, self.seq = layers, hidden, heads, seq
        self.vocab, self.ffn, self.global_batch = vocab, ffn, global_batch

    def as_model_json(self, name="gpt2-tiny"):
        # bytes_per_param: fp32 weight + fp32 gradient + Adam's two fp32 moments.
        return {"model": name, "layers": self.layers, "hidden": self.hidden, "heads": self.heads, "seq": self.seq,
                "vocab": self.vocab, "ffn": self.ffn, "global_batch": self.global_batch, "bytes_per_param": 16,
                "activation_bytes": 4, "recompute": False, "tied_embedding": True}

    @staticmethod
    def from_model_json(m):
        return Config(m["layers"], m["hidden"], m["heads"], m["seq"], m["vocab"], m["ffn"], m["global_batch"])


class Mode:
    """Compute mode of a stage: fp32 (as is), fp64 (cast in, weights cast on use) or bf16 autocast."""

    def __init__(self, name):
        self.name = name
        self.dtype = torch.float64 if name == "fp64" else torch.float32

    def w(self, t):
        return t if t is None or t.dtype == self.dtype else t.to(self.dtype)

    def ctx(self):
        if self.name == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return torch.autocast("cpu", enabled=False)


def _ln(x, m, mode):
    return F.layer_norm(x, (x.shape[-1],), mode.w(m.weight), mode.w(m.bias), m.eps)


def _lin(x, m, mode):
    return F.linear(x, mode.w(m.weight), mode.w(m.bias))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg.hidden
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(h)
        self.c_attn = nn.Linear(h, 3 * h)
        self.c_proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.c_fc = nn.Linear(h, cfg.ffn)
        self.c_proj2 = nn.Linear(cfg.ffn, h)

    def forward(self, x, mode):
        b, t, c = x.shape
        nh = self.heads
        q, k, v = _lin(_ln(x, self.ln1, mode), self.c_attn, mode).split(c, dim=2)
        q, k, v = (z.view(b, t, nh, c // nh).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + _lin(y, self.c_proj, mode)
        return x + _lin(F.gelu(_lin(_ln(x, self.ln2, mode), self.c_fc, mode)), self.c_proj2, mode)


def init_full_state(cfg, seed=SEED):
    """The whole model's initial weights as {name: tensor}, the same in every process."""
    g = torch.Generator().manual_seed(seed)
    h, std = cfg.hidden, 0.02
    st = {"wte.weight": torch.randn(cfg.vocab, h, generator=g) * std,
          "wpe.weight": torch.randn(cfg.seq, h, generator=g) * std}
    for i in range(cfg.layers):
        blk = Block(cfg)
        for n, p in blk.named_parameters():
            if n.endswith("bias"):
                t = torch.zeros_like(p)
            elif n.startswith("ln"):
                t = torch.ones_like(p)
            else:
                s = std / math.sqrt(2 * cfg.layers) if n.startswith("c_proj") else std
                t = torch.randn(p.shape, generator=g) * s
            st["h.%d.%s" % (i, n)] = t
    st["ln_f.weight"] = torch.ones(h)
    st["ln_f.bias"] = torch.zeros(h)
    return st


class Stage(nn.Module):
    """Pipeline stage: [embedding] + blocks [first, first+count) + [final LN, tied head, loss].
    `own_head_copy`: the head uses its own copy `head_wte` of the token embedding (pp > 1)."""

    def __init__(self, cfg, first, count, embedding, head, mode, state=None, own_head_copy=None):
        super().__init__()
        self.cfg, self.first, self.count, self.embedding, self.head = cfg, first, count, embedding, head
        self.mode = Mode(mode) if isinstance(mode, str) else mode
        h = cfg.hidden
        if own_head_copy is None:
            own_head_copy = head and not embedding
        if embedding:
            self.wte = nn.Embedding(cfg.vocab, h)
            self.wpe = nn.Embedding(cfg.seq, h)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(count)])
        if head:
            self.ln_f = nn.LayerNorm(h)
            if own_head_copy:
                self.head_wte = nn.Parameter(torch.empty(cfg.vocab, h))
        if state is not None:
            self.load_global(state)

    def global_names(self):
        """[(local name, global name)] of this stage's parameters (head_wte -> wte.weight)."""
        out = []
        for n, _ in self.named_parameters():
            if n.startswith("blocks."):
                i, rest = n[len("blocks."):].split(".", 1)
                out.append((n, "h.%d.%s" % (self.first + int(i), rest)))
            elif n == "head_wte":
                out.append((n, "wte.weight"))
            else:
                out.append((n, n))
        return out

    def load_global(self, state):
        params = dict(self.named_parameters())
        with torch.no_grad():
            for local, glob in self.global_names():
                params[local].copy_(state[glob])

    def head_weight(self):
        return self.head_wte if hasattr(self, "head_wte") else self.wte.weight

    def tied_param(self):
        """This stage's copy of the token embedding (first stage: wte; last stage: head_wte), or None."""
        if self.embedding:
            return self.wte.weight
        if hasattr(self, "head_wte"):
            return self.head_wte
        return None

    # The parts, separately callable so the profiler times exactly what the stage runs.
    def embed(self, tokens):
        pos = torch.arange(tokens.shape[1])
        with self.mode.ctx():
            x = F.embedding(tokens, self.mode.w(self.wte.weight)) + F.embedding(pos, self.mode.w(self.wpe.weight))
        return x

    def block(self, i, x):
        with self.mode.ctx():
            return self.blocks[i](x, self.mode)

    def head_loss(self, x, targets):
        m = self.mode
        with m.ctx():
            x = _ln(x, self.ln_f, m)
            logits = F.linear(x, m.w(self.head_weight()))
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float() if m.name == "bf16" else
                                   logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return loss.float()

    def forward(self, inp, targets=None):
        """inp: tokens [b][T] (first stage) or the fp32 activation [b][T][h]; returns the fp32
        activation, or the loss (last stage)."""
        x = self.embed(inp) if self.embedding else inp.to(self.mode.dtype)
        for i in range(self.count):
            x = self.block(i, x)
        if self.head:
            return self.head_loss(x, targets)
        return x.float()


def batch(cfg, step, seed=SEED):
    """Synthetic data of one step: tokens [global_batch][T+1] uniform over the vocabulary."""
    g = torch.Generator().manual_seed(seed * 1000 + step)
    t = torch.randint(0, cfg.vocab, (cfg.global_batch, cfg.seq + 1), generator=g)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def param_counts(cfg):
    h, v, f = cfg.hidden, cfg.vocab, cfg.ffn
    layer = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)
    return {"embed": v * h + cfg.seq * h, "layer": layer, "head": 2 * h, "tied": v * h,
            "total": v * h + cfg.seq * h + cfg.layers * layer + 2 * h}


# ----------------------------------------------------------------------------------------------
# Profiler (in one process; the caller sets the thread count and the device environment).

def _timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return r, (time.perf_counter() - t0) * 1e3


def profile_device(cfg, mode, mbs_list, warmup, repeats, lr=1e-4):
    """Per micro-batch size: fwd/bwd ms of the embedding part, of one block (median over the L
    blocks and the repeats, each block timed inside the full stack on its real input), of the
    head (final LN + LM head + loss), as the stages run them: every part's input is a leaf that
    requires grad, the gradient of the part's output is fed to its backward, and parameter
    gradients accumulate into existing .grad tensors (as over the micro-batches of a step).
    Then Adam's step time over all parameters -> ms per million parameters."""
    st = Stage(cfg, 0, cfg.layers, True, True, mode, init_full_state(cfg))
    res = {"entries": [], "per_layer": {}}
    for mbs in mbs_list:
        g = torch.Generator().manual_seed(SEED + mbs)
        tok = torch.randint(0, cfg.vocab, (mbs, cfg.seq), generator=g)
        tgt = torch.randint(0, cfg.vocab, (mbs, cfg.seq), generator=g)
        rec = {"embed_f": [], "embed_b": [], "head_f": [], "head_b": [],
               "layer_f": [[] for _ in range(cfg.layers)], "layer_b": [[] for _ in range(cfg.layers)]}
        for rep in range(warmup + repeats):
            keep = rep >= warmup
            x, tf = _timed(lambda: st.embed(tok).float())
            ins, outs = [], []
            cur = x.detach()
            for i in range(cfg.layers):
                inp = cur.requires_grad_()
                out, t = _timed(lambda: st.block(i, inp.to(st.mode.dtype)).float())
                if keep:
                    rec["layer_f"][i].append(t)
                ins.append(inp)
                outs.append(out)
                cur = out.detach()
            hin = cur.requires_grad_()
            loss, th = _timed(lambda: st.head_loss(hin.to(st.mode.dtype), tgt))
            _, thb = _timed(lambda: loss.backward())
            gout = hin.grad
            for i in reversed(range(cfg.layers)):
                _, t = _timed(lambda: outs[i].backward(gout))
                if keep:
                    rec["layer_b"][i].append(t)
                gout = ins[i].grad
            _, teb = _timed(lambda: x.backward(gout))
            if keep:
                rec["embed_f"].append(tf)
                rec["embed_b"].append(teb)
                rec["head_f"].append(th)
                rec["head_b"].append(thb)
        med = statistics.median
        allf = [t for ts in rec["layer_f"] for t in ts]
        allb = [t for ts in rec["layer_b"] for t in ts]
        res["entries"].append({"mbs": mbs,
                               "embed": {"fwd_ms": med(rec["embed_f"]), "bwd_ms": med(rec["embed_b"])},
                               "layer": {"fwd_ms": med(allf), "bwd_ms": med(allb)},
                               "head": {"fwd_ms": med(rec["head_f"]), "bwd_ms": med(rec["head_b"])}})
        res["per_layer"][str(mbs)] = [{"fwd_ms": med(a), "bwd_ms": med(b)}
                                      for a, b in zip(rec["layer_f"], rec["layer_b"])]
    # Optimizer: Adam (as the runs) on the whole model with gradients present.
    for p in st.parameters():
        p.grad = torch.randn_like(p) * 1e-3

    def adam_step(params):
        """Median ms of Adam's step over `params`, with their count and ms per million."""
        opt = torch.optim.Adam(params, lr=lr)
        ts = []
        for rep in range(warmup + repeats):
            _, t = _timed(opt.step)
            if rep >= warmup:
                ts.append(t)
        n = sum(p.numel() for p in params)
        ms = statistics.median(ts)
        return {"ms": ms, "params": n, "ms_per_mparam": ms / (n / 1e6)}

    res["update"] = adam_step(list(st.parameters()))
    # The same on one block's parameters alone (the per-tensor overhead shows here).
    res["update_one_layer"] = adam_step(list(st.blocks[0].parameters()))
    return res


# ----------------------------------------------------------------------------------------------
# The peer's own cost model (independent of tessera's C code, same class of model): 1F1B event
# simulation per data-parallel replica, ring all-reduce, Adam update. Used to sanity-check the
# executor before the planner exists and printed beside the planner's estimate afterwards.

def ring_allreduce_ms(nbytes, d, alpha_us, beta_gbs):
    if d <= 1:
        return 0.0
    return (2.0 * (d - 1) / d * nbytes / (beta_gbs * 1e9) + 2 * (d - 1) * alpha_us * 1e-6) * 1e3


def p2p_ms(nbytes, alpha_us, beta_gbs):
    return (alpha_us * 1e-6 + nbytes / (beta_gbs * 1e9)) * 1e3


def peer_estimate(plan, cfg, profile, link, measured=None):
    """plan: PLAN dict with `rank_types` added (device type per global rank); profile: the
    profile.json dict; link: {"latency_us", "bandwidth_gbs"}. Returns the estimate dict.
    measured: {global rank: {"fwd_mb", "bwd_mb", "update"}} (ms) replaces the profile's compute
    and update times of those ranks (the replay of a run: what the model says given the compute
    times the run really had)."""
    prof = {(e["gpu"], e["mbs"]): e for e in profile["entries"] if e.get("tp", 1) == 1}
    pc = param_counts(cfg)
    stages = plan["stages"]
    p, dp, mbs = len(stages), plan["dp"], plan["mbs"]
    m = plan["global_batch"] // (dp * mbs)
    act = mbs * cfg.seq * cfg.hidden * 4
    comm = p2p_ms(act, link["latency_us"], link["bandwidth_gbs"]) if p > 1 else 0.0

    def cost(s, typ):
        e = prof[(typ, mbs)]
        st = stages[s]
        n = st["layers"][1]
        f = n * e["layer"]["fwd_ms"] + (e["embed"]["fwd_ms"] if st["embedding"] else 0) + \
            (e["head"]["fwd_ms"] if st["head"] else 0)
        b = n * e["layer"]["bwd_ms"] + (e["embed"]["bwd_ms"] if st["embedding"] else 0) + \
            (e["head"]["bwd_ms"] if st["head"] else 0)
        return f, b

    finish = [0.0] * p
    for d in range(dp):
        types = [plan["rank_types"][st["gpus"][0] + d] for st in stages]
        fb = [cost(s, types[s]) for s in range(p)]
        if measured:
            fb = [(measured[stages[s]["gpus"][0] + d]["fwd_mb"], measured[stages[s]["gpus"][0] + d]["bwd_mb"])
                  if stages[s]["gpus"][0] + d in measured else fb[s] for s in range(p)]
        fend = [[None] * m for _ in range(p)]
        bend = [[None] * m for _ in range(p)]
        orders = []
        for s in range(p):
            w = min(p - s - 1, m)
            ops = [("F", i) for i in range(w)]
            for i in range(m - w):
                ops += [("F", w + i), ("B", i)]
            ops += [("B", m - w + i) for i in range(w)]
            orders.append(ops)
        pos = [0] * p
        clock = [0.0] * p
        progressed = True
        while progressed:
            progressed = False
            for s in range(p):
                while pos[s] < len(orders[s]):
                    kind, i = orders[s][pos[s]]
                    if kind == "F":
                        dep = 0.0 if s == 0 else (None if fend[s - 1][i] is None else fend[s - 1][i] + comm)
                    else:
                        dep = fend[s][i] if s == p - 1 else (None if bend[s + 1][i] is None else bend[s + 1][i] + comm)
                    if dep is None:
                        break
                    start = max(clock[s], dep)
                    clock[s] = start + (fb[s][0] if kind == "F" else fb[s][1])
                    (fend if kind == "F" else bend)[s][i] = clock[s]
                    pos[s] += 1
                    progressed = True
        for s in range(p):
            finish[s] = max(finish[s], clock[s])
    ends, ars, emb, upd = [], [], 0.0, []
    arl = link.get("allreduce") or link  # the all_reduce fit where the cluster file has one
    for s, st in enumerate(stages):
        n = st["layers"][1] * pc["layer"] + (pc["embed"] if st["embedding"] else 0) + \
            (pc["head"] + (pc["tied"] if not st["embedding"] else 0) if st["head"] else 0)
        ar = ring_allreduce_ms(4 * n, dp, arl["latency_us"], arl["bandwidth_gbs"])
        ars.append(ar)
        types = [plan["rank_types"][st["gpus"][0] + d] for d in range(dp)]
        u = max(prof[(t, mbs)]["update_ms_per_mparam"] for t in types) * n / 1e6
        if measured:
            u = max(measured[st["gpus"][0] + d]["update"] if st["gpus"][0] + d in measured else u for d in range(dp))
        upd.append(u)
        ends.append(finish[s] + ar)
    if p > 1:
        emb = ring_allreduce_ms(4 * pc["tied"], 2, arl["latency_us"], arl["bandwidth_gbs"])
        t_emb = max(ends[0], ends[-1]) + emb
        ends[0] = ends[-1] = t_emb
    step = max(e + u for e, u in zip(ends, upd))
    return {"step_ms": step, "pipeline_ms": max(finish), "dp_allreduce_ms": max(ars), "embed_allreduce_ms": emb,
            "update_ms": max(upd), "p2p_ms": comm, "micro_batches": m}
