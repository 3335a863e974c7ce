#!/usr/bin/env python3
"""A replayed CUDA graph's kernels on the GPU's clock, from bench/kernel_timeline.cpp's trace.

    python3 bench/step_timeline.py TRACE [--graph-with optimizer_step_kernel] [--replay N]

Finds the recorded graph one of whose kernels' names contains --graph-with (the training step's
optimiser by default), cuts its launches into replays, prints each replay's span (first start to
last end) and, for one replay (the median span by default), every kernel in start order: start and
end relative to the replay's start (us), duration, the gap since the latest end before it (negative:
it overlaps earlier work, on another stream), stream, grid size and name.
"""
import argparse
import collections
import re
import shutil
import statistics
import subprocess
import sys


def read_trace(path):
    kernels = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:  # a process killed while tracing leaves a cut last line
                start, end, stream, graph, node, grid, block, name = line.rstrip("\n").split(" ", 7)
                kernels.append(dict(start=int(start), end=int(end), stream=int(stream), graph=int(graph),
                                    node=int(node), grid=int(grid), block=int(block), name=name))
            except ValueError:
                sys.exit(f"{path}:{number}: not a kernel_timeline line (start end stream graph node grid block name)")
    return kernels


def short_names(names):
    """Demangled names (c++filt where it exists) without namespaces and arguments."""
    names = sorted(names)
    readable = names
    if shutil.which("c++filt"):
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
        readable = out.split("\n")[:len(names)]
    short = {}
    for mangled, name in zip(names, readable):
        name = re.sub(r"(gat::|ops::|cuda_impl::|detail::|\(anonymous namespace\)::)", "", name)
        if name.endswith(")"):  # drop the parameter list: from its matching "(" on
            depth = 0
            for i in range(len(name) - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(name[i], 0)
                if depth == 0:
                    name = name[:i]
                    break
        short[mangled] = name[:100]
    return short


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--graph-with", default="optimizer_step_kernel",
                    help="a kernel name (part) that picks the graph (default: the training step's)")
    ap.add_argument("--replay", type=int, help="which replay to print (0-based; default the median span)")
    args = ap.parse_args()

    kernels = read_trace(args.trace)
    if not kernels:
        sys.exit(f"{args.trace}: no kernels")
    names = short_names({k["name"] for k in kernels})
    by_graph = collections.defaultdict(list)
    for k in sorted(kernels, key=lambda k: k["start"]):
        if k["graph"]:
            by_graph[k["graph"]].append(k)
    chosen = [g for g, ks in by_graph.items() if any(args.graph_with in k["name"] for k in ks)]
    if not chosen:
        sys.exit(f"{args.trace}: no replayed graph has a kernel named like '{args.graph_with}'")
    launches = by_graph[chosen[-1]]
    nodes = len({k["node"] for k in launches})
    replays = [launches[i:i + nodes] for i in range(0, len(launches) - nodes + 1, nodes)]
    spans = [(max(k["end"] for k in r) - min(k["start"] for k in r)) / 1000 for r in replays]
    print(f"graph {chosen[-1]}: {nodes} kernels, {len(replays)} replays; span median {statistics.median(spans):.2f} us, "
          f"min {min(spans):.2f}, max {max(spans):.2f}")
    if args.replay is not None and not 0 <= args.replay < len(replays):
        sys.exit(f"--replay {args.replay}: the graph has replays 0 to {len(replays) - 1}")
    which = args.replay if args.replay is not None else sorted(range(len(spans)), key=lambda i: spans[i])[len(spans) // 2]
    replay = sorted(replays[which], key=lambda k: k["start"])
    t0 = replay[0]["start"]
    latest_end = t0
    print(f"replay {which} ({spans[which]:.2f} us):")
    print(f"{'start':>8} {'end':>8} {'us':>6} {'gap':>6} {'stream':>6} {'grid':>6}  kernel")
    for k in replay:
        print(f"{(k['start'] - t0) / 1000:8.2f} {(k['end'] - t0) / 1000:8.2f} {(k['end'] - k['start']) / 1000:6.2f} "
              f"{(k['start'] - latest_end) / 1000:6.2f} {k['stream']:6d} {k['grid']:6d}  {names[k['name']]}")
        latest_end = max(latest_end, k["end"])


if __name__ == "__main__":
    main()
