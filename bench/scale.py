#!/usr/bin/env python3
"""GAT training at scale, this project beside PyTorch Geometric in one run on one GPU.

    python3 bench/scale.py --build build --nodes 5000000 --degree 20 [--epochs 12] [--no-pyg]
                           [--model gatv2] [--precision f32,bf16]

Ours: `gat_train --dataset synthetic:NODES:DEGREE:0 --device cuda --model MODEL --precision P` (the
paper's model: 8 heads x 8 features, 32 input features, 8 classes; with gatv2 its GATv2Conv
layers) for each precision P of --precision (default f32; `f32,bf16` runs both, one after the
other, docs/precision.md), timed from process start: the time to the end of epoch 1 (generation
and preprocessing included, read from the moment the log's first line appears), the first epoch
and the steady training step (median over epochs 3..), peak device memory (the allocator's peak,
from gat_train --json, and nvidia-smi's used memory, sampled every 50 ms) and peak host memory
(the child's maximum resident set).

PyG: the same two-layer GAT (torch_geometric.nn.GATConv, or GATv2Conv with gatv2; dropout 0.6,
Adam) on a uniform random graph with the same numbers of nodes and edges (self loops added by
GATConv), 32 features: the median training step and torch's peak allocation. Where PyG runs out
of memory that is reported.

The bound: the bytes one training step must move at least (below, `step_bytes`) divided by the
GPU's measured copy bandwidth, for each precision: bf16 stores every float tensor in half the
bytes. Everything goes to OUT/scale_NODES_DEGREE.json (with gatv2: OUT/scale_gatv2_NODES_DEGREE.json),
ours under "ours" by precision.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

import bench_args


def run_ours(args, out_dir, precision):
    spec = f"synthetic:{args.nodes}:{args.degree}:0"
    log = os.path.join(out_dir, f"ours_{args.model}_{args.nodes}_{args.degree}_{precision}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    cmd = [os.path.join(args.build, "gat_train"), "--dataset", spec, "--device", "cuda", "--model", args.model,
           "--precision", precision, "--epochs", str(args.epochs), "--patience", str(args.epochs), "--log", log,
           "--json"]
    smi_peak = [0]
    stop = threading.Event()

    def sample_smi():  # nvidia-smi's used memory of GPU 0, MiB
        while not stop.is_set():
            try:
                used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                       "-i", "0"], capture_output=True, text=True, timeout=5).stdout
                smi_peak[0] = max(smi_peak[0], int(used.split()[0]))
            except Exception:
                pass
            stop.wait(0.05)

    sampler = threading.Thread(target=sample_smi, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    first_epoch_end = None
    while proc.poll() is None:
        if first_epoch_end is None and os.path.exists(log) and os.path.getsize(log) > 0:
            first_epoch_end = time.perf_counter() - t0
        time.sleep(0.01)
    total = time.perf_counter() - t0
    stop.set()
    sampler.join()
    stdout = proc.stdout.read()
    if proc.returncode != 0:
        return {"error": f"gat_train exited with {proc.returncode}", "stdout": stdout[-2000:]}
    summary = json.loads(stdout.strip().splitlines()[-1])
    epochs = [json.loads(line) for line in open(log)]
    steps = [e["step_ms"] for e in epochs[2:]] or [epochs[-1]["step_ms"]]
    return {"spec": spec, "process_to_epoch1_end_s": first_epoch_end, "total_s": total,
            "first_epoch_ms": epochs[0]["ms"], "steady_epoch_ms": statistics.median(e["ms"] for e in epochs[2:]),
            "step_ms": statistics.median(steps), "epochs": len(epochs),
            "test_acc_last": epochs[-1]["test_acc"],
            "peak_device_bytes": summary.get("peak_device_bytes"),
            "peak_device_blocks": summary.get("peak_device_blocks", [])[:12],  # [name, bytes, count]
            "nvidia_smi_peak_bytes": smi_peak[0] * 2**20,
            "peak_host_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
            "nodes": summary.get("nodes"), "edges": summary.get("edges"), "summary": summary}


# The bytes of a stored float element in each precision of gat_train (bf16: docs/precision.md).
ELEMENT_BYTES = {"f32": 4, "bf16": 2}


def step_bytes(n, e, f_in=32, heads=8, hidden=8, classes=8, elem=4, model="gat"):
    """The fewest bytes one training step of the paper's model moves, counting each gathered row
    once per edge (rows do not stay in cache at this size) and every (N, .) tensor once per pass
    that must read or write it. e counts the self loops; elem is the bytes of a stored float
    (ELEMENT_BYTES; the indices stay 4 bytes).

    With model gatv2, the bytes of its kernels' passes instead (docs/kernels.md, "Bytes per edge"):
    the forward reads per edge a source index and the source row and writes the score (H values)
    and the packed sign words (ceil(H P / 32), P the power of two covering F); the backward walk
    reads the transposed entry, the destination's gradient row, lse, D, the score and the signs,
    and writes ds over the score, each a random 32-byte sector at least; the pass over the rows
    reads ds and the signs. Per node, beside the 12 passes: xr read and out written by the
    forward; G and out read and D written for D; d xl and d xr written, xr read again (d att's
    sums are a row per group of lanes, not counted).

    Per layer (H heads of F features, D = H*F): the forward aggregate reads per edge a source
    index, el[j] and the source row (D values) and per node er, writes out and lse; the backward
    walk reads per edge the transposed entry (destination, edge id), er, lse, D[i] and the
    destination's gradient row (D values) and writes g (H values); d er reads g again. Node-level
    work (projection, el/er, dropout, ELU, bias, their gradients, loss) is counted as 12 passes
    over (N, D) plus reading the input features twice."""
    def layer(h, f):
        d = h * f
        if model == "gatv2":
            sector = lambda nbytes: max(32, nbytes)  # a random access
            p = 1 << max(0, f - 1).bit_length()  # a head's sign bits: the power of two covering f
            words = 4 * ((h * p + 31) // 32)  # an edge's sign words, in bytes
            fwd = e * (4 + d * elem + h * elem + words) + n * (2 * d * elem + h * elem)
            walk = e * (8 + d * elem + 4 * sector(h * elem) + sector(words))  # lse, D, s, ds; signs
            rows = e * (h * elem + words)
            return fwd + walk + rows + n * (7 * d * elem + h * elem), n * 12 * d * elem
        fwd = e * (4 + h * elem + d * elem) + n * (2 * h * elem + d * elem)
        bwd = e * (8 + 3 * h * elem + d * elem + 2 * h * elem) + n * (3 * d * elem + 2 * h * elem)
        return fwd + bwd, n * 12 * d * elem
    edge1, node1 = layer(heads, hidden)
    edge2, node2 = layer(1, classes)
    return edge1 + edge2 + node1 + node2 + 2 * n * f_in * elem


def run_pyg(n, e, f_in=32, classes=8, reps=5, model="gat"):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GATConv, GATv2Conv
    from compare_pyg import median_ms, two_layer_gat
    dev = torch.device("cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        g = torch.Generator(device=dev).manual_seed(0)
        edge_index = torch.randint(0, n, (2, e), device=dev, generator=g)
        x = torch.randn(n, f_in, device=dev, generator=g)
        y = torch.randint(0, classes, (n,), device=dev, generator=g)
        train = torch.arange(0, n, max(1, n // (20 * classes)), device=dev)
        net = two_layer_gat(GATv2Conv if model == "gatv2" else GATConv, f_in, classes).to(dev)
        opt = torch.optim.Adam(net.parameters(), lr=0.005, weight_decay=5e-4)

        def step():
            net.train()
            opt.zero_grad()
            F.cross_entropy(net(x, edge_index)[train], y[train]).backward()
            opt.step()

        step()
        step_ms = median_ms(step, warmup=0, reps=reps)
        return {"step_ms": step_ms, "peak_bytes": torch.cuda.max_memory_allocated()}
    except torch.OutOfMemoryError as exc:
        return {"error": "out of memory", "message": str(exc).splitlines()[0],
                "peak_bytes": torch.cuda.max_memory_allocated()}


def precisions(text):
    """--precision's value: precisions of ELEMENT_BYTES, comma-separated, each once."""
    names = text.split(",")
    for name in names:
        if name not in ELEMENT_BYTES:
            raise argparse.ArgumentTypeError(f"precision '{name}' is not one of {', '.join(ELEMENT_BYTES)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"'{text}' names a precision twice")
    return names


def main():
    args = bench_args.parse_args(__doc__, build="build", nodes=5_000_000, degree=dict(type=float, default=20),
                                 epochs=12, no_pyg=dict(action="store_true", help="ours only"), out="out",
                                 model=dict(default="gat", choices=["gat", "gatv2"],
                                            help="the attention layer"),
                                 precision=dict(type=precisions, default=["f32"],
                                                help="ours in these precisions: f32, bf16 or f32,bf16"))
    os.makedirs(args.out, exist_ok=True)
    result = {"date": time.strftime("%Y-%m-%d"), "commit": os.environ.get("GAT_COMMIT", "unknown"), "ours": {}}
    for precision in args.precision:
        ours = run_ours(args, args.out, precision)
        result["ours"][precision] = ours
        print(json.dumps({"precision": precision, **{k: v for k, v in ours.items() if k != "summary"}}, indent=1),
              flush=True)
    ran = {p: ours for p, ours in result["ours"].items() if "error" not in ours}
    if ran:
        from compare_pyg import copy_bandwidth  # (imports torch)
        n, e = next(iter(ran.values()))["nodes"], next(iter(ran.values()))["edges"]
        bw = copy_bandwidth()
        result["copy_bandwidth_TBps"] = bw / 1e12
        for precision, ours in ran.items():
            bound_ms = step_bytes(n, e + n, elem=ELEMENT_BYTES[precision], model=args.model) / bw * 1e3
            ours.update({"bound_step_ms": bound_ms, "step_over_bound": ours["step_ms"] / bound_ms,
                         "device_bytes_per_edge": (ours["peak_device_bytes"] or 0) / e})
        if not args.no_pyg:
            pyg = run_pyg(n, e, model=args.model)
            import torch
            torch.cuda.empty_cache()  # run_pyg's tensors died with it
            result["pyg"] = pyg
            if "step_ms" in pyg:
                result["pyg_over_ours"] = {p: pyg["step_ms"] / ours["step_ms"] for p, ours in ran.items()}
        summary_keys = ("step_ms", "bound_step_ms", "step_over_bound", "peak_device_bytes", "device_bytes_per_edge")
        print(json.dumps({**{k: v for k, v in result.items() if k != "ours"},
                          "ours": {p: {k: ours[k] for k in summary_keys} for p, ours in ran.items()}}, indent=1))
    name = f"scale_{args.nodes}_{int(args.degree)}.json" if args.model == "gat" else \
        f"scale_gatv2_{args.nodes}_{int(args.degree)}.json"
    with open(os.path.join(args.out, name), "w") as fh:
        json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
