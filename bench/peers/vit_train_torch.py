#!/usr/bin/env python3
"""One ViT training step in PyTorch autograd against tessera's (`tessera vit train-bench --dump DIR`).

tessera writes the step's inputs and results as .npy files (tools/tessera/cmd_vit_dump.c): the
weights before and after one SGD step, its gradients, the images, labels, the attention mask over
the patch grid (grid order, token = y * w + x), the backend's token order and meta.json. This
script builds the same model in PyTorch from the weights before the step -- patch embedding as one
matmul over the unfolded patches (columns ordered channel, ky, kx) + bias + position embedding; per
block x += proj(MHSA(LN1(x))) with the mask, x += fc2(GELU_erf(fc1(LN2(x)))); final LN, mean over
tokens, head; mean cross-entropy -- runs it in the GRID token order (every layer but attention is
token-wise and the mean pool is order-free, so tessera's permuted backends compute the same
function), takes the gradients with autograd, applies p -= lr * grad, and compares every updated
parameter, every gradient and the loss with tessera's. Rows of the mask with no allowed key give a
zero attention output, as in tessera.

Tolerance (per tensor, derived from fp32 rounding, u = 2^-24): both sides compute in fp32 with
different summation orders and attention algorithms (flash-style tiles against an explicit masked
softmax). A GEMM over K terms is off by up to ~K u relative, K <= max(mlp, pdim, batch * tokens)
(deit-s at 224, batch 2: 1536, i.e. 9e-5); through 12 blocks, adding up in the worst case, ~1.1e-3
of the tensor's largest gradient. We allow GTOL = 2e-3 of max|grad| for the gradients, and for the
updated parameters lr * GTOL * max|grad| + 4 u max|p| (the update's error plus the rounding of
p - lr g on each side). The loss: 1e-4 relative. The same step in float64 autograd is reported
beside (the error of each fp32 side against it) for context.

Usage: vit_train_torch.py DUMP_DIR [--threads N] [--json] [--gtol 2e-3]
torch/NumPy come from the current interpreter when it has them, else from bench/peers/.venv-torch,
created on first use (python3 -m venv; pip install -r bench/peers/requirements-torch.txt).
Exit status: 0 every tensor within tolerance, 1 a tensor or the loss is not, 2 bad usage."""
import argparse
import json
import math
import os
import sys

import peerenv

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, ".venv-torch")
REQS = os.path.join(HERE, "requirements-torch.txt")
U = 2.0 ** -24


def load_dump(d, np):
    meta = json.load(open(os.path.join(d, "meta.json")))
    if meta.get("format") != "tessera-vit-train-dump":
        sys.exit("vit_train_torch: %s/meta.json is not a tessera-vit-train-dump" % d)
    rd = lambda sub, name: np.load(os.path.join(d, sub, name + ".npy"))
    dump = {
        "meta": meta,
        "images": np.load(os.path.join(d, "images.npy")),
        "labels": np.load(os.path.join(d, "labels.npy")).astype(np.int64),
        "mask": np.load(os.path.join(d, "mask.npy")).astype(bool),
        "before": {p: rd("before", p) for p in meta["params"]},
        "after": {p: rd("after", p) for p in meta["params"]},
        "grad": {p: rd("grad", p) for p in meta["params"]},
    }
    return dump


def forward(torch, meta, w, images, mask):
    """Mean cross-entropy of the ViT with weights w (dict of tensors, tessera's [in][out] layout)."""
    F = torch.nn.functional
    B, C, H, W = images.shape
    P, D, heads = meta["patch"], meta["dim"], meta["heads"]
    gh, gw = H // P, W // P
    n, hd, eps = gh * gw, D // heads, meta["ln_eps"]
    x = images.reshape(B, C, gh, P, gw, P).permute(0, 2, 4, 1, 3, 5).reshape(B, n, C * P * P)
    x = x @ w["patch_embed.weight"] + w["patch_embed.bias"] + w["pos_embed"]
    any_row = mask.any(dim=1)[:, None]
    for l in range(meta["depth"]):
        p = lambda s: w["blocks.%d.%s" % (l, s)]
        y = F.layer_norm(x, (D,), p("norm1.weight"), p("norm1.bias"), eps)
        qkv = (y @ p("attn.qkv.weight") + p("attn.qkv.bias")).reshape(B, n, 3, heads, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(~mask, float("-inf"))
        a = torch.where(any_row, torch.softmax(s, dim=-1), torch.zeros((), dtype=s.dtype))
        o = (a @ v).transpose(1, 2).reshape(B, n, D)
        x = x + o @ p("attn.proj.weight") + p("attn.proj.bias")
        y = F.layer_norm(x, (D,), p("norm2.weight"), p("norm2.bias"), eps)
        u = y @ p("mlp.fc1.weight") + p("mlp.fc1.bias")
        x = x + F.gelu(u) @ p("mlp.fc2.weight") + p("mlp.fc2.bias")
    x = F.layer_norm(x, (D,), w["norm.weight"], w["norm.bias"], eps)
    logits = x.mean(dim=1) @ w["head.weight"] + w["head.bias"]
    return logits


def step(torch, np, dump, dtype):
    """Loss, gradients and updated weights of one SGD step in `dtype`."""
    meta = dump["meta"]
    w = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in dump["before"].items()}
    images = torch.tensor(dump["images"], dtype=dtype)
    mask = torch.tensor(dump["mask"])
    logits = forward(torch, meta, w, images, mask)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(dump["labels"]))
    loss.backward()
    lr = meta["lr"]
    with torch.no_grad():
        after = {k: (t - lr * t.grad).numpy().astype(np.float64) for k, t in w.items()}
        grads = {k: t.grad.numpy().astype(np.float64) for k, t in w.items()}
    return float(loss.detach()), grads, after


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--gtol", type=float, default=2e-3)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.dump, "meta.json")):
        ap.error("%s has no meta.json (tessera vit train-bench --dump DIR)" % a.dump)
    peerenv.ensure("vit_train_torch", ["numpy", "torch"], VENV, REQS, " (torch is large: this takes a while once)")
    import numpy as np
    import torch

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dump = load_dump(a.dump, np)
    meta = dump["meta"]
    lr = meta["lr"]
    loss32, g32, after32 = step(torch, np, dump, torch.float32)
    loss64, g64, after64 = step(torch, np, dump, torch.float64)
    rows, ok = [], True
    for name in meta["params"]:
        before = dump["before"][name].astype(np.float64)
        at, gt = dump["after"][name].astype(np.float64), dump["grad"][name].astype(np.float64)
        gmax = float(np.abs(g32[name]).max())
        pmax = float(np.abs(before).max())
        tol_g = a.gtol * gmax
        tol_p = lr * a.gtol * gmax + 4 * U * pmax
        err_p = float(np.abs(at - after32[name]).max())
        err_g = float(np.abs(gt - g32[name]).max())
        upd = lr * gmax
        r = {
            "name": name,
            "max_abs_err": err_p,
            "max_rel_err": err_p / upd if upd > 0 else (0.0 if err_p == 0 else math.inf),  # of the largest update
            "tol": tol_p,
            "grad_max_abs_err": err_g,
            "grad_max_rel_err": err_g / gmax if gmax > 0 else (0.0 if err_g == 0 else math.inf),
            "grad_tol": tol_g,
            "tessera_vs_fp64": float(np.abs(gt - g64[name]).max()) / max(gmax, 1e-300),
            "torch32_vs_fp64": float(np.abs(g32[name] - g64[name]).max()) / max(gmax, 1e-300),
        }
        r["ok"] = err_p <= tol_p and err_g <= tol_g
        ok &= r["ok"]
        rows.append(r)
    loss_t = meta["loss"]
    loss_ok = abs(loss_t - loss32) <= 1e-4 * max(1.0, abs(loss32))
    ok &= loss_ok
    if a.json:
        print(json.dumps({"dump": a.dump, "backend": meta["backend"], "lr": lr, "loss_tessera": loss_t,
                          "loss_torch": loss32, "loss_torch_fp64": loss64, "loss_ok": loss_ok, "gtol": a.gtol,
                          "torch": torch.__version__, "tensors": rows, "ok": ok}, indent=1))
    else:
        print("tessera (%s backend) vs PyTorch %s autograd, one SGD step at lr %g; loss %.7f vs %.7f (fp64 %.7f)%s"
              % (meta["backend"], torch.__version__, lr, loss_t, loss32, loss64, "" if loss_ok else "  MISMATCH"))
        print("%-34s %11s %10s %10s %11s %10s %10s %10s" % ("tensor", "param err", "rel(upd)", "tol", "grad err",
                                                           "rel(max)", "t-vs-64", "pt-vs-64"))
        for r in rows:
            print("%-34s %11.3g %10.3g %10.3g %11.3g %10.3g %10.3g %10.3g%s"
                  % (r["name"], r["max_abs_err"], r["max_rel_err"], r["tol"], r["grad_max_abs_err"],
                     r["grad_max_rel_err"], r["tessera_vs_fp64"], r["torch32_vs_fp64"], "" if r["ok"] else "  FAIL"))
        worst = max(rows, key=lambda r: r["grad_max_rel_err"])
        print("%d tensors, %s; worst gradient error %.3g of max|grad| (%s), tolerance %.3g"
              % (len(rows), "all within tolerance" if ok else "FAILED", worst["grad_max_rel_err"], worst["name"], a.gtol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
