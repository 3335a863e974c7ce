#!/usr/bin/env python3
"""gat_torch's layers beside PyTorch Geometric's, in one process on one GPU.

For each layer (GATConv, GATv2Conv, GATConv with edge features) on a random graph: the
forward+backward time (median of --repeats, CUDA events), the peak memory of one
forward+backward (torch.cuda.max_memory_allocated above what the inputs hold), the ratios, and
the largest relative difference of the output and of every gradient. gat_torch's layer is given
PyG's parameters (load_state_dict), and the cost of building its graph (once per edge_index) is
printed apart. Both float32 results are also compared with the same layer in float64 (gat_torch's
kernels): on sums over millions of edges, two float32 results can differ by more than either
differs from the exact one. Needs torch, torch_geometric and gat_torch (PYTHONPATH=<build>/python).

    python3 bench/torch_vs_pyg.py --nodes 1000000 --edges 16000000
"""
import copy
import json
import statistics
import time

import torch
import torch_geometric.nn as pyg

import gat_torch

import bench_args


def timed(fn, repeats):
    """Median milliseconds of fn() over `repeats` runs after two warm-ups, on the GPU's clock."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times), max(times)


def peak_bytes(fn):
    """Peak bytes allocated by fn() above what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def relative_difference(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def compare(name, ours, theirs, x, edge_index, edge_attr, repeats):
    ours.load_state_dict(theirs.state_dict(), strict=True)
    upstream = None

    def step(layer):
        nonlocal upstream
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out = layer(x, edge_index, edge_attr) if edge_attr is not None else layer(x, edge_index)
        if upstream is None:
            upstream = torch.randn_like(out)
        (out * upstream).sum().backward()
        return out

    torch.cuda.synchronize()
    begin = time.perf_counter()
    step(ours)  # builds and caches the graph of edge_index
    torch.cuda.synchronize()
    first_ms = (time.perf_counter() - begin) * 1e3
    results = {}
    for label, layer in (("pyg", theirs), ("gat_torch", ours)):
        out = step(layer).detach()
        grads = {n: p.grad.detach().clone() for n, p in layer.named_parameters()}
        grads["x"] = x.grad.detach().clone()
        median, low, high = timed(lambda: step(layer), repeats)
        results[label] = dict(ms=median, ms_min=low, ms_max=high, peak=peak_bytes(lambda: step(layer)),
                              out=out, grads=grads)
        del out
    def worst_difference(label, reference):
        return max([relative_difference(results[label]["out"], reference["out"])] +
                   [relative_difference(results[label]["grads"][n], g.to(results[label]["grads"][n].dtype))
                    for n, g in reference["grads"].items()])

    worst = worst_difference("gat_torch", results["pyg"])
    # The same layer in float64 (gat_torch's kernels): how far each float32 result is from it.
    f64 = copy.deepcopy(ours).double()
    x64 = x.detach().double().requires_grad_()
    out64 = f64(x64, edge_index, edge_attr.double()) if edge_attr is not None else f64(x64, edge_index)
    (out64 * upstream.double()).sum().backward()
    reference = dict(out=out64.detach(), grads={n: p.grad for n, p in f64.named_parameters()})
    reference["grads"]["x"] = x64.grad
    error_f64 = {label: worst_difference(label, reference) for label in ("pyg", "gat_torch")}
    del f64, x64, out64, reference
    row = dict(layer=name, pyg_ms=results["pyg"]["ms"], ours_ms=results["gat_torch"]["ms"],
               ours_ms_range=[results["gat_torch"]["ms_min"], results["gat_torch"]["ms_max"]],
               speedup=results["pyg"]["ms"] / results["gat_torch"]["ms"],
               pyg_peak_gb=results["pyg"]["peak"] / 1e9, ours_peak_gb=results["gat_torch"]["peak"] / 1e9,
               memory_ratio=results["pyg"]["peak"] / max(results["gat_torch"]["peak"], 1),
               first_call_ms=first_ms, max_relative_difference=worst,
               pyg_error_vs_f64=error_f64["pyg"], ours_error_vs_f64=error_f64["gat_torch"])
    print(f"{name:28s} PyG {row['pyg_ms']:8.2f} ms {row['pyg_peak_gb']:7.2f} GB | gat_torch "
          f"{row['ours_ms']:7.2f} ms {row['ours_peak_gb']:6.2f} GB | {row['speedup']:5.1f}x faster, "
          f"1/{row['memory_ratio']:.1f} memory | first call (graph build) {first_ms:.0f} ms | "
          f"max rel diff {worst:.1e} (from f64: PyG {error_f64['pyg']:.1e}, gat_torch "
          f"{error_f64['gat_torch']:.1e})", flush=True)
    return row


def main():
    args = bench_args.parse_args(__doc__, nodes=1_000_000, edges=16_000_000, in_channels=64, heads=8, out_channels=8,
                                 edge_dim=16, repeats=10,
                                 layers=dict(default="gat,gatv2,gat_edge", help="comma-separated subset"),
                                 json=dict(help="write the rows to this file"))
    assert torch.cuda.is_available(), "this benchmark needs a CUDA device"
    torch.manual_seed(0)
    device = torch.device("cuda")
    n, e = args.nodes, args.edges
    edge_index = torch.randint(0, n, (2, e), device=device)
    x = torch.randn(n, args.in_channels, device=device, requires_grad=True)
    edge_attr = torch.randn(e, args.edge_dim, device=device)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, PyG "
          f"{__import__('torch_geometric').__version__}: {n:,} nodes, {e:,} edges, "
          f"{args.in_channels} -> {args.heads} x {args.out_channels}", flush=True)
    shape = dict(in_channels=args.in_channels, out_channels=args.out_channels, heads=args.heads)
    rows = []
    for layer in args.layers.split(","):
        torch.manual_seed(1)
        if layer == "gat":
            rows.append(compare("GATConv", gat_torch.GATConv(**shape).to(device),
                                pyg.GATConv(**shape).to(device), x, edge_index, None, args.repeats))
        elif layer == "gatv2":
            rows.append(compare("GATv2Conv", gat_torch.GATv2Conv(**shape).to(device),
                                pyg.GATv2Conv(**shape).to(device), x, edge_index, None, args.repeats))
        elif layer == "gat_edge":
            rows.append(compare(f"GATConv edge_dim {args.edge_dim}",
                                gat_torch.GATConv(**shape, edge_dim=args.edge_dim).to(device),
                                pyg.GATConv(**shape, edge_dim=args.edge_dim).to(device), x, edge_index,
                                edge_attr, args.repeats))
        else:
            parser.error(f"unknown layer {layer!r}")
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
