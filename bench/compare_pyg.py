#!/usr/bin/env python3
"""Side-by-side benchmark: PyTorch Geometric and this project, same GPU, same graphs, one run.

Run on a machine with a CUDA GPU, PyTorch and torch_geometric, after building this project
(the gat_bench program, built from bench/gat_bench.cpp, must exist in the build folder):

    python3 bench/compare_pyg.py --build build --data-dir DIR --out out

It measures the GPU's copy bandwidth, then for each workload PyG's time and ours, and prints one
table with the ratios and, for the kernels, the bound: the bytes the kernel must move divided by
the measured copy bandwidth. Everything it measured goes to OUT/compare.json, the scaling plot to
OUT/scaling.png. Nothing is built here and nothing is downloaded. `--only cpu` (two physical CPU cores,
Cora and CiteSeer, to OUT/compare_cpu.json) needs no GPU.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch

DEV = torch.device("cuda")


def median_ms(fn, warmup=3, reps=20):
    """Median time of fn() in ms, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth():
    """Device-to-device copy, bytes read + written per second."""
    n = 1 << 29  # 2 GiB of float32
    src = torch.empty(n, dtype=torch.float32, device=DEV).uniform_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), warmup=3, reps=20)
    return 2 * src.numel() * 4 / (ms * 1e-3)


def random_graph(num_nodes, num_edges, seed, path):
    """Uniform random graph in CSR by destination, written for gat_bench: int64 N, int64 E,
    int32 row_ptr[N+1], int32 col_idx[E]. Returns (src, dst) index tensors on the GPU."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    dst = torch.randint(0, num_nodes, (num_edges,), device=DEV, generator=g)
    dst, _ = torch.sort(dst)
    src = torch.randint(0, num_nodes, (num_edges,), device=DEV, generator=g)
    counts = torch.bincount(dst, minlength=num_nodes)
    row_ptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=DEV)
    row_ptr[1:] = torch.cumsum(counts, 0)
    with open(path, "wb") as f:
        f.write(int(num_nodes).to_bytes(8, "little"))
        f.write(int(num_edges).to_bytes(8, "little"))
        f.write(row_ptr.to(torch.int32).cpu().numpy().tobytes())
        f.write(src.to(torch.int32).cpu().numpy().tobytes())
    return src, dst


def aggregate_bytes(n, e, h, f, elem=4):
    """The fewest bytes the forward kernel moves: row pointers, indices, scores, one gathered
    value row per edge, the output and the saved log-sum-exp (the bound of docs/gpu.md)."""
    return (n + 1) * 4 + e * 4 + e * h * elem + e * h * f * elem + n * h * f * elem + n * h * 4


def aggregate_backward_bytes(n, e, h, f, elem=4):
    """Backward: pass 1 reads indices, scores, lse, grad_out rows and one value row per edge and
    writes d scores; pass 2 reads the transpose, scores, lse and one grad_out row per edge, and
    writes d value."""
    pass1 = (n + 1) * 4 + e * 4 + e * h * elem + n * h * 4 + n * h * f * elem + e * h * f * elem + e * h * elem
    pass2 = (n + 1) * 4 + 2 * e * 4 + 2 * e * h * elem + e * h * 4 + e * h * f * elem + n * h * f * elem
    return pass1 + pass2


def pyg_softmax_aggregate(src, dst, n, h, f):
    from torch_geometric.utils import softmax
    scores = torch.randn(src.numel(), h, device=DEV)
    value = torch.randn(n, h, f, device=DEV)

    def run():
        a = softmax(scores, dst, num_nodes=n)
        out = torch.zeros(n, h, f, device=DEV)
        out.index_add_(0, dst, a.unsqueeze(-1) * value[src])
        return out
    return median_ms(run, warmup=2, reps=10)


def pyg_gatconv(src, dst, n, in_ch, heads, out_ch, layer="GATConv", edge_dim=None, self_loops=False):
    """One forward + backward of PyG's `layer` (GATConv or GATv2Conv): the median time (ms) and the
    peak memory above what x, the graph and the parameters hold; with edge_dim, random edge
    features (no gradient, as data) and, with self_loops, the loops' features by fill 'mean'."""
    import torch_geometric.nn
    conv = getattr(torch_geometric.nn, layer)(in_ch, out_ch, heads=heads, add_self_loops=self_loops,
                                              edge_dim=edge_dim).to(DEV)
    x = torch.randn(n, in_ch, device=DEV, requires_grad=True)
    edge_index = torch.stack([src, dst])
    edge_attr = torch.randn(src.numel(), edge_dim, device=DEV) if edge_dim else None

    def run():
        out = conv(x, edge_index, edge_attr)
        out.sum().backward()
    run()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    ms = median_ms(run, warmup=1, reps=5)
    peak = torch.cuda.max_memory_allocated() - base
    del conv, x, edge_attr
    return ms, peak


def pyg_planetoid(name, data_dir, device=DEV):
    """PyG's Planetoid from the raw files already here (copied where PyG looks; no download)."""
    from torch_geometric.datasets import Planetoid
    import torch_geometric.transforms as T
    root = tempfile.mkdtemp(prefix="pyg_planetoid_")
    raw = os.path.join(root, {"cora": "Cora", "citeseer": "CiteSeer"}[name], "raw")
    os.makedirs(raw)
    for part in ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]:
        shutil.copy(os.path.join(data_dir, f"ind.{name}.{part}"), raw)
    return Planetoid(root, {"cora": "Cora", "citeseer": "CiteSeer"}[name],
                     transform=T.NormalizeFeatures())[0].to(device)


def two_layer_gat(conv, in_features, num_classes):
    """The paper's two-layer GAT built from the layer class `conv` (PyG's GATConv or GATv2Conv):
    input dropout 0.6, 8 heads x 8 features concatenated, ELU, dropout 0.6, 1 head averaged;
    attention dropout 0.6 in both layers. Parameters on the CPU, initialised from torch's global
    RNG."""
    import torch.nn.functional as F

    class GAT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = conv(in_features, 8, heads=8, dropout=0.6)
            self.conv2 = conv(64, num_classes, heads=1, concat=False, dropout=0.6)

        def forward(self, x, ei):
            x = F.dropout(x, 0.6, self.training)
            x = F.elu(self.conv1(x, ei))
            x = F.dropout(x, 0.6, self.training)
            return self.conv2(x, ei)

    return GAT()


def pyg_gat(data, model="gat"):
    """two_layer_gat of PyG's GATConv (model "gat") or GATv2Conv ("gatv2") for `data` (a
    Planetoid graph)."""
    import torch_geometric.nn
    conv = getattr(torch_geometric.nn, {"gat": "GATConv", "gatv2": "GATv2Conv"}[model])
    return two_layer_gat(conv, data.num_features, int(data.y.max()) + 1)


def pyg_training(name, data_dir, device=DEV):
    """One PyG GAT training step (forward, backward, Adam) and 200 epochs with evaluation; on the
    CPU the step is timed with a wall clock (the caller pins the process and the threads)."""
    import torch.nn.functional as F
    data = pyg_planetoid(name, data_dir, device)
    model = pyg_gat(data).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)

    def step():
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask])
        loss.backward()
        opt.step()

    def evaluate():
        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
            loss = F.cross_entropy(out[data.val_mask], data.y[data.val_mask])
            pred = out.argmax(-1)
            return float(loss), float((pred[data.val_mask] == data.y[data.val_mask]).float().mean())

    if device.type == "cpu":
        for _ in range(5):
            step()
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        evaluate()
        return statistics.median(times), (time.perf_counter() - t0) * 1e3
    step_ms = median_ms(step, warmup=10, reps=100)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        step()
        evaluate()
    torch.cuda.synchronize()
    return step_ms, (time.perf_counter() - t0) * 1e3


def two_physical_cores():
    """The first two CPUs of this process's affinity that sit on different physical cores: two
    hyperthreads of one core would share its arithmetic units and caches (thread_siblings_list)."""
    picked, cores_seen = [], set()
    for cpu in sorted(os.sched_getaffinity(0)):
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as fh:
                core = fh.read().strip()
        except OSError:
            core = str(cpu)
        if core not in cores_seen:
            cores_seen.add(core)
            picked.append(cpu)
        if len(picked) == 2:
            return picked
    sys.exit("compare_pyg: --only cpu needs two physical cores; this process may run on " + str(picked))


def cpu_comparison(args):
    """PyG and this project on two CPU cores (--cores, by default two physical ones; two threads),
    Cora and CiteSeer: the median training step (forward, backward, Adam) and 200 epochs with
    evaluation."""
    cores = [int(c) for c in args.cores.split(",")] if args.cores else two_physical_cores()
    print(f"CPU comparison on CPUs {cores}", flush=True)
    torch.set_num_threads(2)
    os.sched_setaffinity(0, set(cores))
    rows, out = [], {}
    for name in ["cora", "citeseer"]:
        pyg_step, pyg_eval = pyg_training(name, args.data_dir, torch.device("cpu"))
        exe = os.path.join(args.build, "bench", "gat_bench")
        run = subprocess.run(["taskset", "-c", ",".join(map(str, cores)), exe, "train", "--dataset", name, "--data-dir",
                              args.data_dir, "--device", "cpu"], check=True, capture_output=True,
                             text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
        mine = json.loads(run.stdout.strip().splitlines()[-1])
        rows.append((f"{name} CPU 2 cores: one training step (ms)", pyg_step, mine["step_ms"], None))
        out[name] = {"pyg_step_ms": pyg_step, "pyg_eval_ms": pyg_eval, **mine}
    return rows, out


def ours(build, *args):
    exe = os.path.join(build, "bench", "gat_bench")
    out = subprocess.run([exe, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--data-dir", default=os.environ.get("GAT_DATA_DIR"), required="GAT_DATA_DIR" not in os.environ,
                    help="the Planetoid raw files (default: $GAT_DATA_DIR)")
    ap.add_argument("--out", default="out")
    ap.add_argument("--quick", action="store_true", help="skip the 10^7-node scaling point")
    ap.add_argument("--only", choices=["gpu", "cpu"], help="only the GPU workloads or only the CPU comparison")
    ap.add_argument("--cores", help="with --only cpu: the two CPUs to run on, e.g. 0,1 (default: the first two on "
                    "different physical cores)")
    ap.add_argument("--sections", default="kernel,gatconv,gatv2conv,gatconv_edge,train,scaling",
                    help="the GPU workloads to run, comma-separated (default: all six)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gat_bench_")
    results = {"torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
               "commit": os.environ.get("GAT_COMMIT", "unknown")}
    if args.only == "cpu":  # needs no GPU
        rows, results["cpu"] = cpu_comparison(args)
        with open(os.path.join(args.out, "compare_cpu.json"), "w") as fh:
            json.dump(results, fh, indent=2)
        print_table(results, None, rows)
        return
    results["gpu"] = torch.cuda.get_device_name()
    bw = copy_bandwidth()
    results["copy_bandwidth_TBps"] = bw / 1e12
    rows = []

    def bound_ms(nbytes):
        return nbytes / bw * 1e3

    sections = set(args.sections.split(","))
    scaling = []
    # ---- the kernel, 1M nodes / 16M edges, H*F = 64, and the original small shape ----
    if "kernel" in sections:
        for (n, e, h, f, label) in [(1_000_000, 16_000_000, 1, 64, "1M/16M H=1 F=64"),
                                    (1_000_000, 16_000_000, 8, 8, "1M/16M H=8 F=8"),
                                    (384, 384 * 18, 1, 64, "384 nodes deg 18 F=64")]:
            path = os.path.join(tmp, f"g_{n}_{e}.bin")
            src, dst = random_graph(n, e, 1, path)
            mine = ours(args.build, "kernel", "--graph", path, "--heads", h, "--features", f)
            pyg_ms = pyg_softmax_aggregate(src, dst, n, h, f)
            fb = aggregate_bytes(n, e, h, f)
            bb = aggregate_backward_bytes(n, e, h, f)
            rows.append((f"softmax-aggregate fwd, {label}", pyg_ms, mine["forward_ms"], bound_ms(fb)))
            rows.append((f"softmax-aggregate bwd, {label}", None, mine["backward_ms"], bound_ms(bb)))
            results[f"kernel {label}"] = {"pyg_forward_ms": pyg_ms, **mine,
                                          "bound_forward_ms": bound_ms(fb), "bound_backward_ms": bound_ms(bb)}

    # ---- GATConv and GATv2Conv forward + backward, 1M / 16M, 64 -> 8 heads x 8 ----
    for section, layer in [("gatconv", "GATConv"), ("gatv2conv", "GATv2Conv")]:
        if section not in sections:
            continue
        path = os.path.join(tmp, "g_1000000_16000000.bin")
        src, dst = random_graph(1_000_000, 16_000_000, 1, path)
        pyg_ms, pyg_peak = pyg_gatconv(src, dst, 1_000_000, 64, 8, 8, layer)
        mine = ours(args.build, section, "--graph", path, "--in", 64, "--heads", 8, "--out", 8)
        rows.append((f"{layer} fwd+bwd 1M/16M 64->8x8 (ms)", pyg_ms, mine["forward_backward_ms"], None))
        rows.append((f"{layer} fwd+bwd peak memory (GB)", pyg_peak / 1e9, mine["peak_bytes"] / 1e9, None))
        results[section] = {"pyg_ms": pyg_ms, "pyg_peak_bytes": pyg_peak, **mine}
        del src, dst
        torch.cuda.empty_cache()

    # ---- GATConv with edge_dim 16, self loops by fill 'mean' (PyG's defaults), 1M / 16M ----
    if "gatconv_edge" in sections:
        path = os.path.join(tmp, "g_1000000_16000000.bin")
        src, dst = random_graph(1_000_000, 16_000_000, 1, path)
        pyg_ms, pyg_peak = pyg_gatconv(src, dst, 1_000_000, 64, 8, 8, "GATConv", edge_dim=16, self_loops=True)
        mine = ours(args.build, "gatconv", "--graph", path, "--in", 64, "--heads", 8, "--out", 8,
                    "--edge-dim", 16, "--self-loops")
        rows.append(("GATConv edge_dim 16 fwd+bwd 1M/16M (ms)", pyg_ms, mine["forward_backward_ms"], None))
        rows.append(("GATConv edge_dim 16 peak memory (GB)", pyg_peak / 1e9, mine["peak_bytes"] / 1e9, None))
        results["gatconv_edge"] = {"pyg_ms": pyg_ms, "pyg_peak_bytes": pyg_peak, **mine}
        del src, dst
        torch.cuda.empty_cache()

    # ---- training on the citation graphs ----
    if "train" in sections:
        for name in ["cora", "citeseer"]:
            pyg_step, pyg_200 = pyg_training(name, args.data_dir)
            mine = ours(args.build, "train", "--dataset", name, "--data-dir", args.data_dir)
            rows.append((f"{name}: one training step (ms)", pyg_step, mine["step_ms"], None))
            rows.append((f"{name}: one training step, eager (ms)", pyg_step, mine["eager_step_ms"], None))
            rows.append((f"{name}: 200 epochs + eval (ms)", pyg_200, mine["epochs200_ms"], None))
            rows.append((f"{name}: 200 epochs + eval, eager (ms)", pyg_200, mine["eager_epochs200_ms"], None))
            results[f"train {name}"] = {"pyg_step_ms": pyg_step, "pyg_200_epochs_ms": pyg_200, **mine}

    # ---- scaling: forward and backward at 10^5..10^7 nodes (degree 16), degree 4..64 ----
    if "scaling" in sections:
        points = [(100_000, 16), (1_000_000, 16), (1_000_000, 4), (1_000_000, 64)]
        if not args.quick:
            points.append((10_000_000, 16))
        for n, deg in points:
            path = os.path.join(tmp, f"s_{n}_{deg}.bin")
            src, dst = random_graph(n, n * deg, 2, path)
            del src, dst
            mine = ours(args.build, "kernel", "--graph", path, "--heads", 1, "--features", 64)
            os.remove(path)
            scaling.append({"nodes": n, "degree": deg, **mine,
                            "bound_forward_ms": bound_ms(aggregate_bytes(n, n * deg, 1, 64))})
        results["scaling"] = scaling

    with open(os.path.join(args.out, "compare.json"), "w") as fh:
        json.dump(results, fh, indent=2)
    try:
        if scaling:
            plot_scaling(scaling, os.path.join(args.out, "scaling.png"))
    except Exception as exc:  # the table still stands without the picture
        print("plot failed:", exc, file=sys.stderr)

    print_table(results, bw, rows)
    print("\nscaling (H=1, F=64):")
    print(f"{'nodes':>10} {'degree':>6} {'fwd ms':>8} {'bwd ms':>8} {'bound ms':>8}")
    for s in scaling:
        print(f"{s['nodes']:>10} {s['degree']:>6} {s['forward_ms']:8.3f} {s['backward_ms']:8.3f} {s['bound_forward_ms']:8.3f}")


def print_table(results, bw, rows):
    if bw is None:
        print(f"\nCPU, torch {torch.__version__}")
    else:
        print(f"\nGPU {results['gpu']}, copy bandwidth {bw / 1e12:.2f} TB/s, torch {torch.__version__}")
    print(f"{'workload':<52} {'PyG':>10} {'ours':>10} {'PyG/ours':>9} {'bound':>9} {'bound/ours':>10}")
    for name, ref, mine, bound in rows:
        fmt = lambda v: f"{v:10.3f}" if v is not None else f"{'-':>10}"
        ratio = f"{ref / mine:9.1f}" if ref and mine else f"{'-':>9}"
        eff = f"{bound / mine:10.0%}" if bound and mine else f"{'-':>10}"
        print(f"{name:<52} {fmt(ref)} {fmt(mine)} {ratio} {fmt(bound)[1:]} {eff}")


def plot_scaling(scaling, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    by_nodes = sorted([s for s in scaling if s["degree"] == 16], key=lambda s: s["nodes"])
    by_degree = sorted([s for s in scaling if s["nodes"] == 1_000_000], key=lambda s: s["degree"])
    for ax, pts, key, label in [(axes[0], by_nodes, "nodes", "nodes (average degree 16)"),
                                (axes[1], by_degree, "degree", "average degree (10^6 nodes)")]:
        xs = [p[key] for p in pts]
        ax.plot(xs, [p["forward_ms"] for p in pts], "o-", label="forward")
        ax.plot(xs, [p["backward_ms"] for p in pts], "s-", label="backward")
        ax.plot(xs, [p["bound_forward_ms"] for p in pts], "k--", label="forward bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("ms (H200)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("csr_softmax_aggregate, H=1, F=64, fp32")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
