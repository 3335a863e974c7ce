#!/usr/bin/env python3
"""Mini-batch training on sampled neighbourhoods, this project beside PyG's NeighborLoader, in one
run on one GPU (issue 47).

    python3 bench/neighbor_sampling.py --build build [--out out] [--mode products|large]

Ours is `gat_bench sampled` (bench/gat_bench.cpp): it generates the graph with the project's
generator (datasets/generator.h, a degree-corrected block model: power-law degrees,
class-correlated features), keeps the features in host memory and measures, in this order:

- the sampler alone over one epoch's batches (on the GPU, each block's graph built there with its
  self loops, as the loader takes them);
- the loader alone: made (registering the features for the GPU, loader_make_ms), then sampling
  and the rows' gather, by the GPU reading them in place from host memory (--gather-on cpu: by
  the host, into page-locked memory, then copied);
- one training epoch: a step per batch (the paper's two-layer GAT, 8 heads x 8, dropout 0.6,
  Adam lr 0.005, weight decay 5e-4, no value dropout: PyG's GATConv has none);
- the test accuracy after it, by the exact layer-wise inference (every in-edge; by default each
  layer on the whole graph at once, --inference-batch-size N for chunks of N destinations, as
  PyG's side always runs in chunks of 65,536).

--mode products (the default): ogbn-products' shape. 2,449,029 nodes, degree 24 before
deduplication (about 60M directed edges after it), 100 features, 47 classes, 196,615 training
and 39,323 validation nodes (the rest test), fanouts 10,10 (PyG's GAT example; the model has two
layers), batches of 1024, and a graph hard enough to compare accuracy on: feature signal 0.08
and intra-class fraction 0.5 (the generator's options; --signal and --intra-fraction override
them). With the generator's defaults (0.5 and 0.8) one epoch reached test accuracy 0.9999, so
equal accuracy said nothing. Calibration: `gat_bench sampled --device cpu` (seed 0) at 400,000
nodes, but with the mode's 196,615 training nodes, so that the epoch has its 192 steps (with the
split's fractions, 100,000 nodes train 8 steps and reached 0.47 on the easy graph):

    signal  intra  test accuracy after one epoch
    0.5     0.8    0.9999
    0.1     0.8    0.9992
    0.1     0.5    0.9205
    0.1     0.3    0.4626
    0.09    0.5    0.8948
    0.08    0.5    0.8600   (the mode's defaults)
    0.05    0.5    0.5562
At the mode's full size (2,449,029 nodes, 58,049,026 edges) its defaults reached 0.8130 after one
epoch (same command, all nodes). Chance is 1/47 = 0.021.

gat_bench writes the dataset to a temporary folder, and PyG trains on
that same graph, features, labels and split: torch_geometric.loader.NeighborLoader (shuffled,
--pyg-workers worker processes) with the same model built from torch_geometric.nn.GATConv
(compare_pyg.two_layer_gat), the same optimiser, one epoch, then PyG's layer-wise inference
(NeighborLoader with num_neighbors [-1], as its examples' `inference`). Its sampler alone is
torch_geometric.sampler.NeighborSampler.sample_from_nodes over the same number of batches (pyg-lib
where installed, else torch_sparse: PyG picks). The table gives both and PyG / ours.

--mode large: a graph whose features do not fit on the device: 100,000,000 nodes x 128 f32
features (51 GB in host memory), degree 10 (about 1B directed edges), 47 classes, 102,400
training nodes (100 batches of 1024), fanouts 10,10, the generator's default signal and
intra-class fraction (it measures throughput, not accuracy). Ours only, without the inference,
printing the throughput: seeds/s and sampled edges/s of the sampler, bytes/s of the loader,
seeds/s of training, with gat_bench's peak resident set (peak_host_bytes) and the generator's
wall and CPU time (generate_ms, generate_cpu_ms); its stages print on stderr as they end.

Host memory: the peak is the finished dataset (datasets/generator.h): the features and the graph
with its transpose. gat_bench's peak resident set at degree 10 and 128 features (the CPU,
/usr/bin/time -v, MALLOC_MMAP_THRESHOLD_=65536 so that freed arrays leave as they do at 100M) was
0.866 GB at 1M nodes (9.8M edges) and 2.941 GB at 4M (39.4M edges): 0.69 GB per million nodes,
so about 70 GB at 100M of the GPU host's 128. The earlier estimate, 81 GB, scaled 1M's whole
resident set. --nodes and --features shrink it. Generating took 2.8 CPU-seconds at 1M nodes and
13.5 at 4M (a shared two-core machine, so its thread scaling could not be measured): at 100M
about 350-450 CPU-seconds, 25-50 s on 16 cores.

Everything measured goes to OUT/neighbor_sampling_MODE.json. Nothing is built or downloaded here.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_pyg import DEV, two_layer_gat  # noqa: E402  (the same model as the other comparisons)

MODES = {  # signal and intra_fraction: the generator's options (the products mode's calibrated above)
    "products": dict(nodes=2_449_029, degree=24, features=100, classes=47, train=196_615, val=39_323,
                     signal=0.08, intra_fraction=0.5),
    "large": dict(nodes=100_000_000, degree=10, features=128, classes=47, train=102_400, val=10_000,
                  signal=0.5, intra_fraction=0.8),
}


def run_ours(args, spec, write_dir):
    cmd = [os.path.join(args.build, "bench", "gat_bench"), "sampled", "--device", "cuda",
           "--fanouts", args.fanouts, "--batch-size", str(args.batch_size), "--seed", str(args.seed),
           "--sample-on", args.sample_on, "--gather-on", args.gather_on]
    for key in ["nodes", "degree", "features", "classes", "train", "val", "signal", "intra_fraction"]:
        cmd += [f"--{key.replace('_', '-')}", str(spec[key])]
    if write_dir:
        cmd += ["--write", write_dir]
    if args.mode == "large":
        cmd.append("--no-eval")
    if args.inference_batch_size:
        cmd += ["--inference-batch-size", str(args.inference_batch_size)]
    print("ours:", " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)  # its stages on stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["peak_host_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # gat_bench's
    return res


def read_dataset(d):
    """The dataset gat_bench --write wrote: a torch_geometric Data on the CPU and the splits."""
    from torch_geometric.data import Data
    with open(os.path.join(d, "graph.bin"), "rb") as fh:
        n, e = np.frombuffer(fh.read(16), dtype=np.int64)
        row_ptr = torch.from_numpy(np.frombuffer(fh.read(4 * (n + 1)), dtype=np.int32).astype(np.int64))
        src = torch.from_numpy(np.frombuffer(fh.read(4 * e), dtype=np.int32).astype(np.int64))
    dst = torch.repeat_interleave(torch.arange(int(n)), row_ptr.diff())  # CSR by destination
    x = torch.from_numpy(np.fromfile(os.path.join(d, "x.bin"), dtype=np.float32)).view(int(n), -1)
    y = torch.from_numpy(np.fromfile(os.path.join(d, "y.bin"), dtype=np.int32).astype(np.int64))
    split = {s: torch.from_numpy(np.fromfile(os.path.join(d, f"{s}.bin"), dtype=np.int32).astype(np.int64))
             for s in ["train", "val", "test"]}
    return Data(x=x, y=y, edge_index=torch.stack([src, dst])), split


def stage(res, key, value):
    """Records one of PyG's figures and prints it on stderr at once, as gat_bench prints its stages,
    so that a run cut short still shows what it measured."""
    res[key] = value
    print(f"PyG {key}: {value:.1f}", file=sys.stderr, flush=True)


def pyg_side(args, d, classes):
    """PyG's NeighborLoader + GATConv on the dataset in d: the sampler alone, one epoch, the test
    accuracy after it by layer-wise inference."""
    import copy
    import torch.nn.functional as F
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import GATConv
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    torch.manual_seed(args.seed)
    data, split = read_dataset(d)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    train = split["train"]
    batches = (train.numel() + args.batch_size - 1) // args.batch_size
    res = {"edges": int(data.edge_index.size(1))}

    # The sampler alone: one epoch's batches of shuffled seeds (the CPU sampler PyG's loader uses).
    sampler = NeighborSampler(data, num_neighbors=fanouts)
    perm = train[torch.randperm(train.numel())]
    sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=perm[:args.batch_size]))  # warm-up
    edges = 0
    t0 = time.perf_counter()
    for k in range(batches):
        out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=perm[k * args.batch_size:
                                                                                  (k + 1) * args.batch_size]))
        edges += out.row.numel()
    stage(res, "sample_epoch_ms", (time.perf_counter() - t0) * 1e3)
    res["sample_edges_per_s"] = edges / res["sample_epoch_ms"] * 1e3
    res["sample_seeds_per_s"] = train.numel() / res["sample_epoch_ms"] * 1e3

    workers = dict(num_workers=args.pyg_workers, persistent_workers=args.pyg_workers > 0)
    loader = NeighborLoader(data, num_neighbors=fanouts, batch_size=args.batch_size, input_nodes=train,
                            shuffle=True, **workers)
    # The loader alone: sampling, the gather of the rows and their copy to the GPU.
    t0 = time.perf_counter()
    for batch in loader:
        batch.x.to(DEV, non_blocking=True)
    torch.cuda.synchronize()
    stage(res, "loader_epoch_ms", (time.perf_counter() - t0) * 1e3)

    model = two_layer_gat(GATConv, data.num_features, classes).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    model.train()
    losses = []
    t0 = time.perf_counter()
    for batch in loader:
        batch = batch.to(DEV, non_blocking=True)
        opt.zero_grad()
        loss = F.cross_entropy(model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size])
        loss.backward()
        opt.step()
        losses.append(float(loss))  # waits for the step, as ours does for its metrics
    torch.cuda.synchronize()
    stage(res, "train_epoch_ms", (time.perf_counter() - t0) * 1e3)
    res["train_seeds_per_s"] = train.numel() / res["train_epoch_ms"] * 1e3
    res["train_loss"] = statistics.mean(losses)

    # Layer-wise inference over every node with all its in-edges (PyG's examples' `inference`).
    model.eval()
    sub = NeighborLoader(copy.copy(data), input_nodes=None, num_neighbors=[-1], batch_size=65536,
                         shuffle=False, **workers)
    del sub.data.x, sub.data.y
    sub.data.node_id = torch.arange(data.num_nodes)
    t0 = time.perf_counter()
    x_all = data.x
    with torch.no_grad():
        for i, conv in enumerate([model.conv1, model.conv2]):
            outs = []
            for batch in sub:
                h = conv(x_all[batch.node_id].to(DEV), batch.edge_index.to(DEV))[:batch.batch_size]
                outs.append((F.elu(h) if i == 0 else h).cpu())
            x_all = torch.cat(outs)
    stage(res, "inference_ms", (time.perf_counter() - t0) * 1e3)
    test = split["test"]
    res["test_acc"] = float((x_all[test].argmax(-1) == data.y[test]).float().mean())
    res["peak_device_bytes"] = torch.cuda.max_memory_allocated()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="out")
    ap.add_argument("--mode", choices=sorted(MODES), default="products")
    ap.add_argument("--nodes", type=int, help="override the mode's node count")
    ap.add_argument("--features", type=int, help="override the mode's feature count")
    ap.add_argument("--signal", type=float, help="override the mode's feature signal (the generator's option)")
    ap.add_argument("--intra-fraction", type=float,
                    help="override the mode's share of edges inside a class (the generator's option)")
    ap.add_argument("--fanouts", default="10,10")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-on", choices=["device", "cpu"], default="device", help="where ours samples")
    ap.add_argument("--gather-on", choices=["device", "cpu"], default="device",
                    help="where ours gathers the feature rows (device: from mapped host memory)")
    ap.add_argument("--inference-batch-size", type=int,
                    help="ours: destinations per chunk of the inference (default: the whole graph at once)")
    ap.add_argument("--pyg-workers", type=int, default=8, help="NeighborLoader's num_workers")
    ap.add_argument("--no-pyg", action="store_true", help="ours only")
    args = ap.parse_args()
    spec = dict(MODES[args.mode])
    for key in ["nodes", "features", "signal", "intra_fraction"]:
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    if args.nodes:  # the split keeps the mode's fractions of the nodes
        for key in ["train", "val"]:
            spec[key] = max(1, MODES[args.mode][key] * args.nodes // MODES[args.mode]["nodes"])
    os.makedirs(args.out, exist_ok=True)
    with_pyg = args.mode == "products" and not args.no_pyg
    tmp = tempfile.mkdtemp(prefix="gat_sampling_") if with_pyg else None
    results = {"mode": args.mode, "spec": spec, "fanouts": args.fanouts, "batch_size": args.batch_size,
               "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d"), "commit": os.environ.get("GAT_COMMIT", "unknown")}
    try:
        results["ours"] = ours = run_ours(args, spec, tmp)
        if with_pyg:
            import torch_geometric
            results["torch_geometric"] = torch_geometric.__version__
            try:
                results["pyg"] = pyg_side(args, tmp, spec["classes"])
            except ImportError as e:  # PyG samples with pyg-lib or torch-sparse only
                results["pyg_missing"] = str(e)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    path = os.path.join(args.out, f"neighbor_sampling_{args.mode}.json")
    with open(path, "w") as fh:
        json.dump(results, fh, indent=2)

    print(f"{args.mode}: {ours['nodes']:,} nodes, {ours['edges']:,} edges, {spec['features']} features, "
          f"{spec['classes']} classes (signal {spec['signal']}, intra-class fraction {spec['intra_fraction']}), "
          f"{ours['train_nodes']:,} training nodes, fanouts {args.fanouts}, "
          f"batches of {args.batch_size}; ours samples on the {ours['sample_on']} and gathers on the "
          f"{ours['gather_on']} ({results['gpu']})")
    rows = [("sampler alone, one epoch (ms)", "sample_epoch_ms"),
            ("loader alone: sample, gather, copy (ms)", "loader_epoch_ms"),
            ("one training epoch (ms)", "train_epoch_ms"),
            ("layer-wise inference (ms)", "inference_ms"),
            ("test accuracy after the epoch", "test_acc")]
    pyg = results.get("pyg", {})
    print(f"{'':42} {'PyG':>12} {'ours':>12} {'PyG / ours':>11}")
    for label, key in rows:
        a, b = pyg.get(key), ours.get(key)
        ratio = f"{a / b:11.2f}" if a is not None and b and key != "test_acc" else ""
        fmt = (lambda v: f"{v:12.4f}") if key == "test_acc" else (lambda v: f"{v:12.1f}")
        print(f"{label:42} {fmt(a) if a is not None else '':>12} {fmt(b) if b is not None else '':>12} {ratio}")
    print(f"ours: sampler {ours['sample_seeds_per_s']:,.0f} seeds/s, {ours['sample_edges_per_s']:,.0f} edges/s; "
          f"loader {ours['loader_bytes_per_s'] / 1e9:.2f} GB/s of feature rows (made in "
          f"{ours['loader_make_ms'] / 1e3:.1f} s); "
          f"training {ours['train_seeds_per_s']:,.0f} seeds/s; peak device memory "
          f"{ours['peak_device_bytes'] / 1e9:.2f} GB, peak host memory {ours['peak_host_bytes'] / 1e9:.1f} GB; "
          f"generating the graph {ours['generate_ms'] / 1e3:.1f} s")
    if pyg:
        print(f"PyG:  sampler {pyg['sample_seeds_per_s']:,.0f} seeds/s, {pyg['sample_edges_per_s']:,.0f} edges/s; "
              f"training {pyg['train_seeds_per_s']:,.0f} seeds/s; peak device memory "
              f"{pyg['peak_device_bytes'] / 1e9:.2f} GB")
    if "pyg_missing" in results:
        print("PyG could not run:", results["pyg_missing"])
    print("written:", path)


if __name__ == "__main__":
    main()
