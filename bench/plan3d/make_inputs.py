#!/usr/bin/env python3
"""Writes the paper-scale plan3d inputs (FASOP's setting: GPT-2 1.5B on AWS p4d.24xlarge (8x A100 40GB)
plus g5.12xlarge (4x A10G 24GB) nodes) into this folder. The per-layer times are derived, not measured:

  time = FLOPs / (peak x fraction of peak)  +  tensor-parallel all-reduces over the node's GPU links

Sources and assumptions (every number below is one of these):
  * Layer FLOPs per micro-batch of b sequences (Narayanan et al., SC'21, "Efficient large-scale language
    model training on GPU clusters using Megatron-LM", eq. 2): forward 24 b s h^2 + 4 b s^2 h, backward
    twice the forward; the LM head 2 b s h V forward.
  * Peak dense FP16/BF16 tensor throughput from NVIDIA's datasheets: A100 SXM 312 TFLOP/s; A10 125 TFLOP/s
    (the A10G of g5 instances is the A10's AWS variant; NVIDIA publishes no separate A10G sheet).
    Memory bandwidth: A100 40GB 1555 GB/s, A10 600 GB/s.
  * Fraction of peak reached: 0.45 on A100 (Narayanan et al. report 44-52% for GPT models with Megatron-LM),
    0.35 on A10 (assumption: its lower memory bandwidth per FLOP), times b / (b + 0.2) for small micro-batches.
  * Tensor parallelism: 2 all-reduces of b s h fp16 values per layer forward and 2 backward (Megatron-LM's
    f/g operators), ring time 2 (t-1)/t bytes / bandwidth + 2 (t-1) latency, over NVSwitch (A100: 230 GB/s
    per GPU, the bus bandwidth NCCL's all_reduce_perf reaches on A100 SXM) or PCIe (A10G: 15 GB/s).
  * Network: p4d 400 Gb/s EFA (50 GB/s, taken as 40 GB/s achieved), g5.12xlarge 40 Gb/s (5 GB/s, 4 GB/s
    achieved); latencies 10 us in a node, 30 us between nodes.
  * Memory per GPU: 40 and 24 GB less ~2 GiB for the CUDA context and allocator slack (38 / 22 GiB).
  * Prices: AWS on-demand us-east-1, p4d.24xlarge $32.7726/hour, g5.12xlarge $5.672/hour.
  * Adam update: ~40 bytes of memory traffic per parameter at the GPU's memory bandwidth.
  * Model: FASOP's gpt2XL configuration (model_config.py in its repository): 48 layers, hidden 1600,
    16 heads, sequence 1024, vocabulary 50257, global batch 256.

Run: python3 bench/plan3d/make_inputs.py   (rewrites the JSON files next to it; deterministic)
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

MODEL = {"model": "gpt2-xl-1.5b", "layers": 48, "hidden": 1600, "heads": 16, "seq": 1024, "vocab": 50257,
         "ffn": 6400, "global_batch": 256, "bytes_per_param": 16, "activation_bytes": 2, "recompute": False,
         "tied_embedding": True}

GPUS = {
    # peak FLOP/s, fraction of peak, memory B/s, TP link (B/s, s), TP degrees profiled
    "A100": dict(peak=312e12, frac=0.45, mem_bw=1555e9, link=(230e9, 10e-6), tps=[1, 2, 4, 8]),
    "A10G": dict(peak=125e12, frac=0.35, mem_bw=600e9, link=(15e9, 10e-6), tps=[1, 2, 4]),
}


def node_type(name, gpu, gpn, count, mem_gib, intra_gbs, inter_gbs, price):
    return {"name": name, "gpu": gpu, "gpus_per_node": gpn, "count": count, "memory_gib": mem_gib,
            "intra_node": {"bandwidth_gbs": intra_gbs, "latency_us": 10},
            "inter_node": {"bandwidth_gbs": inter_gbs, "latency_us": 30}, "price_per_hour": price}


def cluster(name, n_p4d, n_g5):
    return {"cluster": name, "node_types": [
        node_type("p4d.24xlarge", "A100", 8, n_p4d, 38, 230, 40, 32.7726),
        node_type("g5.12xlarge", "A10G", 4, n_g5, 22, 15, 4, 5.672)]}


def ring(bytes_, t, bw, lat):
    return 0.0 if t == 1 else 2 * (t - 1) / t * bytes_ / bw + 2 * (t - 1) * lat


def entry(gpu, tp, b):
    g = GPUS[gpu]
    h, s, V = MODEL["hidden"], MODEL["seq"], MODEL["vocab"]
    rate = g["peak"] * g["frac"] * b / (b + 0.2)
    layer_f = (24 * b * s * h * h + 4 * b * s * s * h) / tp / rate
    tp_ar = 2 * ring(b * s * h * 2, tp, *g["link"])  # two all-reduces per pass
    head_f = (2 * b * s * h * V) / tp / rate
    emb_f = (b * s * h * 2 * 2) / g["mem_bw"]  # gather rows, add positions
    emb_b = (V * h * 2 / tp + b * s * h * 2 * 2) / g["mem_bw"]  # scatter-add into the table
    ms = 1e3
    return {"gpu": gpu, "tp": tp, "mbs": b,
            "embed": {"fwd_ms": emb_f * ms, "bwd_ms": emb_b * ms},
            "layer": {"fwd_ms": (layer_f + tp_ar) * ms, "bwd_ms": (2 * layer_f + tp_ar) * ms},
            "head": {"fwd_ms": (head_f + ring(b * s * h * 2, tp, *g["link"])) * ms,
                     "bwd_ms": (2 * head_f + ring(b * s * h * 2, tp, *g["link"])) * ms},
            "update_ms_per_mparam": 40 * 1e6 / g["mem_bw"] * ms}


def main():
    prof = {"profile": "gpt2-xl derived from datasheets (bench/plan3d/make_inputs.py)",
            "entries": [entry(gpu, tp, b) for gpu in GPUS for tp in GPUS[gpu]["tps"] for b in (1, 2, 4, 8)]}
    files = {"gpt2-xl.model.json": MODEL,
             "aws-1xp4d-6xg5.cluster.json": cluster("aws-1xp4d-6xg5 (8 A100 + 24 A10G)", 1, 6),
             "aws-pool.cluster.json": cluster("aws-pool (up to 2 p4d + 8 g5.12xlarge)", 2, 8),
             "gpt2-xl-a100-a10g.profile.json": prof}
    for name, doc in files.items():
        with open(os.path.join(HERE, name), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print("wrote", os.path.join(HERE, name))


if __name__ == "__main__":
    main()
