#!/usr/bin/env python3
"""PyTorch Geometric parity cases: small runs of PyG's GATConv and GATv2Conv across their options,
computed in float64 and written as safetensors files that tests/test_pyg_parity.cpp checks this
project's GATConv and GATv2Conv against (CPU in CI, CUDA where a device is present). The files are committed under
tests/data/pyg_parity; regenerating them is one command from the repository root (PyTorch,
torch_geometric, safetensors and numpy; a CPU is enough, no GPU and no network are used):

    python3 bench/pyg_parity.py            # writes tests/data/pyg_parity/*.safetensors

Every case is one file NAME.safetensors:

  tensors   input.x                (N, in)        f64   node features (one node set), or
            input.x_src, input.x_dst (Ns, in), (Nd, dst_in)  the sources' and destinations'
                                                        features (bipartite: in_channels a pair)
            input.edge_index       (2, E)         i32   [source; destination], PyG's order
            input.edge_attr        (E, D)         f64   edge features, in input.edge_index's
                                                        order (edge_dim cases only)
            param.NAME             PyG's shape    f64   every parameter under PyG's name
            grad_out               (N, C)         f64   the upstream gradient (fixed random)
            out                    (N, C)         f64   the layer's output
            attention.edge_index   (2, E')        i32   the edges return_attention_weights gives
                                                        (with add_self_loops: existing loops
                                                        removed, one per node appended)
            attention.weights      (E', H)        f64   the attention weights in that order
            grad.x, grad.NAME      as input.x and param.NAME: d <out, grad_out> / d that tensor
                                   (bipartite: grad.x_src and grad.x_dst)
            grad.edge_attr         as input.edge_attr (edge_dim cases only)
  metadata  layer ("GATConv" or "GATv2Conv"), the layer's options as JSON values (in_channels,
            out_channels, heads, concat, negative_slope, dropout, add_self_loops, bias, residual;
            GATv2Conv also share_weights; edge_dim and fill_value in the edge_dim cases only;
            bipartite: in_channels the sources' width, dst_in_channels the destinations',
            num_src_nodes and num_dst_nodes), description, torch and torch_geometric (the
            versions that computed it)

Parameters keep PyG's layout; this project's differs (docs/parity.md has the mapping): a Linear
weight NAME.weight (lin, or lin_src and lin_dst for an in_channels pair) is (out, in) in PyG
and (in, out) here (transposed), att_src, att_dst and att
are (1, H, F) in PyG and (H, F) here (the same elements), bias and the rest are equal. With
share_weights, GATv2Conv's lin_r is lin_l: PyG's named_parameters() lists it once, as lin_l.

The edge_dim cases (GATCONV_EDGE_CASES) give GATConv edge features: every fill_value PyG's
add_self_loops takes for the self loops' features ('mean', 'add', 'min', 'max', 'mul', a number),
with self loops added (the graph's own loops and their features dropped first, so node N-3 keeps
no in-edge) and without (the loops keep their features), one head and three, and the hub graph.
GATV2CONV_EDGE_CASES give GATv2Conv edge features likewise (fill_value 'mean' and 'max').

The bipartite cases (GATCONV_BIPARTITE_CASES and GATV2CONV_BIPARTITE_CASES: PyG's
in_channels = (src, dst), x = (x_src, x_dst)) have fewer sources than destinations or more: a
destination hub, a source sending to many, (i, i) pairs for some i < min(Ns, Nd) (PyG's layers
remove them and add (i, i) for every i < min(Ns, Nd)), a destination with no in-edge and a source
with no out-edge. GATv2Conv's lin_l takes x_src, lin_r and res x_dst; with share_weights lin_r is
lin_l, so that case's pair has one width (5, 5). BIPARTITE_EDGE_CASES add edge features to both
layers on those graphs: fill_value 'mean' with more sources than destinations, a number with fewer
(PyG's reductions scatter into min(Ns, Nd) rows and fail on an edge into a destination i >= Ns),
and no self loops.

A case file whose tensors and metadata are already the case's is left as it is (the safetensors
library writes metadata keys in hash order, so rewriting it would change its bytes); files of
cases no longer listed are removed.

The cases run in training mode with dropout 0 (PyG's dropout stream cannot be reproduced). Their
graphs have a hub (node 0) of high in-degree, a node sending to many, self loops (one of them a
node's only in-edge), nodes with no in-edge and a node with no edge at all, and random
duplicate-free edges in a shuffled order. The hub80 cases have a hub of 73 in-edges and a
source of 72 or more out-edges: rows longer than 64 edges, which this project's Graph cuts into
chunks for the GPU kernels. Every case is checked here to have raw LeakyReLU inputs of both signs
(GATConv: the edge scores; GATv2Conv: the elements of xl[j] + xr[i]; bipartite too), so that
negative_slope matters in every one of them.
"""
import argparse
import json
import os
import sys
from dataclasses import dataclass

import torch
import torch_geometric
from safetensors import safe_open
from safetensors.numpy import save_file
from torch_geometric.nn import GATConv, GATv2Conv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "tests", "data", "pyg_parity")


@dataclass(frozen=True)
class Graph:
    """A test graph: `nodes` nodes, `hub` sources into node 0, node 1 sending to `fan_out`
    nodes, `random` random edges."""
    name: str
    nodes: int
    hub: int
    fan_out: int
    random: int


SMALL = Graph("small", nodes=16, hub=10, fan_out=8, random=24)
HUB = Graph("hub80", nodes=80, hub=72, fan_out=70, random=60)


@dataclass(frozen=True)
class Bipartite:
    """A bipartite test graph: `sources` sources, `destinations` destinations, sources 1..hub
    into destination 0, source 1 sending to `fan_out` destinations, `random` random edges."""
    name: str
    sources: int
    destinations: int
    hub: int
    fan_out: int
    random: int


FEW_SOURCES = Bipartite("s9d16", sources=9, destinations=16, hub=7, fan_out=10, random=24)
MANY_SOURCES = Bipartite("s16d9", sources=16, destinations=9, hub=12, fan_out=6, random=24)


@dataclass(frozen=True, kw_only=True)
class LayerCase:
    """What GATConvCase and GATv2ConvCase share: a case on a Bipartite graph is PyG's in_channels
    pair (in_channels the sources' width, dst_in_channels the destinations') and x_src, x_dst.
    Its fields are keyword-only, so that each layer's own fields stand first, by position."""
    graph: Graph = SMALL  # or a Bipartite: then in_channels is (in_channels, dst_in_channels)
    in_channels: int = 5
    out_channels: int = 4
    edge_dim: int = 0           # 0: PyG's edge_dim=None
    fill_value: object = "mean"  # PyG's default
    dst_in_channels: int = 3    # of x_dst, bipartite cases only

    @property
    def bipartite(self):
        return isinstance(self.graph, Bipartite)

    def name(self):
        edge = "-e{}-fill{}".format(self.edge_dim, self.fill_value) if self.edge_dim else ""
        flags = ["loops" if self.add_self_loops else "noloops", "bias" if self.bias else "nobias",
                 *self.layer_flags(), "res" if self.residual else "nores"]
        return "{}-h{}-{}-ns{}-{}{}-{}".format(
            self.layer.lower(), self.heads, "concat" if self.concat else "mean", self.negative_slope,
            "-".join(flags), edge, self.graph.name)

    def layer_flags(self):
        """The name's parts for the options one layer alone has (before residual's)."""
        return []

    def layer_options(self):
        """The options one layer alone has (GATv2Conv's share_weights)."""
        return {}

    def options(self):
        """The layer's options (the case file's metadata, PyG's keyword arguments; bipartite:
        in_channels the sources' width, and the destinations' width and both node counts)."""
        options = {
            "in_channels": self.in_channels, "out_channels": self.out_channels,
            "heads": self.heads, "concat": self.concat, "negative_slope": self.negative_slope,
            "dropout": 0.0, "add_self_loops": self.add_self_loops, "bias": self.bias,
            **self.layer_options(), "residual": self.residual,
        }
        if self.edge_dim:
            options.update(edge_dim=self.edge_dim, fill_value=self.fill_value)
        options.update(self.side_options())
        return options

    def side_options(self):
        """The bipartite case's metadata beyond PyG's keyword arguments: the destinations' width
        and both node counts (none for one node set)."""
        if not self.bipartite:
            return {}
        return {"dst_in_channels": self.dst_in_channels, "num_src_nodes": self.graph.sources,
                "num_dst_nodes": self.graph.destinations}

    def build(self):
        """PyG's layer with the case's options (bipartite: in_channels the pair)."""
        options = self.options()
        if self.bipartite:
            del options["num_src_nodes"], options["num_dst_nodes"]
            options["in_channels"] = (self.in_channels, options.pop("dst_in_channels"))
        return self.pyg_layer(**options)


@dataclass(frozen=True)
class GATConvCase(LayerCase):
    heads: int
    concat: bool
    negative_slope: float
    add_self_loops: bool
    bias: bool
    residual: bool

    layer = "GATConv"
    pyg_layer = GATConv

    @staticmethod
    def leaky_relu_inputs(conv, x, edge_index, edge_attr=None):
        """a_src . W_s x_j + a_dst . W_d x_i (+ a_edge . W_e e_ji) for every edge (before the
        LeakyReLU), (E, H). x is one node set's features or (x_src, x_dst); W_s = W_d = W (lin)
        for one node set, lin_src and lin_dst for an in_channels pair."""
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        lin_src = conv.lin if conv.lin is not None else conv.lin_src
        lin_dst = conv.lin if conv.lin is not None else conv.lin_dst
        el = (lin_src(x_src).view(-1, conv.heads, conv.out_channels) * conv.att_src).sum(-1)
        er = (lin_dst(x_dst).view(-1, conv.heads, conv.out_channels) * conv.att_dst).sum(-1)
        scores = el[edge_index[0]] + er[edge_index[1]]
        if edge_attr is not None:
            we = conv.lin_edge(edge_attr).view(-1, conv.heads, conv.out_channels)
            scores = scores + (we * conv.att_edge).sum(-1)
        return scores


@dataclass(frozen=True)
class GATv2ConvCase(LayerCase):
    heads: int
    concat: bool
    negative_slope: float
    add_self_loops: bool
    bias: bool
    share_weights: bool
    residual: bool

    layer = "GATv2Conv"
    pyg_layer = GATv2Conv

    def layer_flags(self):
        return ["shared" if self.share_weights else "lr"]

    def layer_options(self):
        return {"share_weights": self.share_weights}

    @staticmethod
    def leaky_relu_inputs(conv, x, edge_index, edge_attr=None):
        """lin_l(x_src)[j] + lin_r(x_dst)[i] (+ lin_edge(e_ji)) for every edge (before the
        LeakyReLU), (E, H, F). x is one node set's features (x_src = x_dst = x) or (x_src, x_dst)."""
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        x_l = conv.lin_l(x_src).view(-1, conv.heads, conv.out_channels)
        x_r = conv.lin_r(x_dst).view(-1, conv.heads, conv.out_channels)
        raw = x_l[edge_index[0]] + x_r[edge_index[1]]
        if edge_attr is not None:
            raw = raw + conv.lin_edge(edge_attr).view(-1, conv.heads, conv.out_channels)
        return raw


# Every option value with every other option's values at least once (pairwise), and the hub graph
# with and without self loops. Add a case by adding a line.
GATCONV_CASES = [
    # heads concat  slope  loops  bias   residual
    GATConvCase(1, True, 0.2, True, True, False),
    GATConvCase(1, False, 0.2, True, False, True),
    GATConvCase(1, True, 0.05, False, False, True),
    GATConvCase(1, False, 0.05, False, True, False),
    GATConvCase(3, True, 0.2, True, True, False),
    GATConvCase(3, False, 0.2, True, True, False),
    GATConvCase(3, True, 0.2, False, True, True),
    GATConvCase(3, False, 0.2, False, False, True),
    GATConvCase(3, True, 0.05, True, False, True),
    GATConvCase(3, False, 0.05, True, True, True),
    GATConvCase(3, True, 0.05, False, False, False),
    GATConvCase(3, False, 0.05, False, True, False),
    GATConvCase(3, True, 0.2, True, True, True, graph=HUB),
    GATConvCase(3, False, 0.05, False, True, False, graph=HUB),
]

# GATConv with edge features: every fill_value, with and without self loops, heads 1 and 3.
GATCONV_EDGE_CASES = [
    # heads concat  slope  loops  bias   residual
    GATConvCase(3, True, 0.2, True, True, False, edge_dim=3, fill_value="mean"),
    GATConvCase(1, False, 0.2, True, False, True, edge_dim=2, fill_value="add"),
    GATConvCase(3, True, 0.05, True, True, True, edge_dim=3, fill_value="max"),
    GATConvCase(3, False, 0.2, True, True, False, edge_dim=3, fill_value="min"),
    GATConvCase(1, True, 0.2, True, True, False, edge_dim=3, fill_value="mul"),
    GATConvCase(3, True, 0.2, True, False, False, edge_dim=3, fill_value=0.5),
    GATConvCase(3, True, 0.2, False, True, False, edge_dim=3),
    GATConvCase(1, False, 0.05, False, True, True, edge_dim=1),
    GATConvCase(3, True, 0.2, True, True, False, graph=HUB, edge_dim=4, fill_value="mean"),
]
EDGE_SEED_BASE = 1000  # their seeds: the edge cases' own, whatever the other lists hold

# GATConv on bipartite graphs: fewer sources than destinations and more, loops on and off, heads 1
# and 3, concat and mean.
GATCONV_BIPARTITE_CASES = [
    # heads concat  slope  loops  bias   residual
    GATConvCase(1, True, 0.2, True, True, False, graph=FEW_SOURCES),
    GATConvCase(3, False, 0.2, False, True, True, graph=FEW_SOURCES),
    GATConvCase(3, True, 0.05, False, False, True, graph=FEW_SOURCES),
    GATConvCase(3, True, 0.05, True, False, True, graph=MANY_SOURCES),
    GATConvCase(1, False, 0.05, False, True, False, graph=MANY_SOURCES),
    GATConvCase(3, False, 0.2, True, True, True, graph=MANY_SOURCES),
]
# Their seeds: 14, 15, ... as when they were made (after the 14 GATCONV_CASES, before the
# GATv2Conv cases took those numbers on other graphs); kept so that the committed files stay.
BIPARTITE_SEED_BASE = 14

# Seven two-valued options, every pair of values together in two cases (the orthogonal array L8),
# and the hub graph with and without self loops.
GATV2CONV_CASES = [
    # heads concat  slope  loops  bias   shared residual
    GATv2ConvCase(1, True, 0.2, True, True, False, False),
    GATv2ConvCase(1, True, 0.2, False, False, True, True),
    GATv2ConvCase(1, False, 0.05, True, True, True, True),
    GATv2ConvCase(1, False, 0.05, False, False, False, False),
    GATv2ConvCase(3, True, 0.05, True, False, False, True),
    GATv2ConvCase(3, True, 0.05, False, True, True, False),
    GATv2ConvCase(3, False, 0.2, True, False, True, False),
    GATv2ConvCase(3, False, 0.2, False, True, False, True),
    GATv2ConvCase(3, True, 0.2, True, True, False, True, graph=HUB),
    GATv2ConvCase(3, False, 0.05, False, True, True, False, graph=HUB),
]

# GATv2Conv with edge features: fill_value 'mean' and 'max', with and without self loops, heads 1
# and 3, and the hub graph.
GATV2CONV_EDGE_CASES = [
    # heads concat  slope  loops  bias   shared residual
    GATv2ConvCase(3, True, 0.2, True, True, False, False, edge_dim=3, fill_value="mean"),
    GATv2ConvCase(1, False, 0.05, True, False, True, True, edge_dim=2, fill_value="max"),
    GATv2ConvCase(3, False, 0.2, False, True, False, True, edge_dim=3),
    GATv2ConvCase(1, True, 0.05, False, True, True, False, edge_dim=1),
    GATv2ConvCase(3, True, 0.2, True, True, False, True, graph=HUB, edge_dim=4, fill_value="max"),
]
GATV2_EDGE_SEED_BASE = 2000  # their seeds: their own, whatever the other lists hold

# GATv2Conv on bipartite graphs: fewer sources than destinations and more, loops on and off, heads
# 1 and 3, concat and mean, the residual (of x_dst) once, and share_weights on a pair of equal
# widths (PyG's lin_r is then lin_l, which a pair of different widths cannot use).
GATV2CONV_BIPARTITE_CASES = [
    # heads concat  slope  loops  bias   shared residual
    GATv2ConvCase(1, True, 0.2, True, True, False, False, graph=FEW_SOURCES),
    GATv2ConvCase(3, False, 0.05, False, True, False, True, graph=FEW_SOURCES),
    GATv2ConvCase(3, True, 0.2, True, False, False, False, graph=MANY_SOURCES),
    GATv2ConvCase(1, False, 0.05, False, True, False, False, graph=MANY_SOURCES),
    GATv2ConvCase(3, True, 0.2, True, True, True, False, graph=FEW_SOURCES, dst_in_channels=5),
]
GATV2_BIPARTITE_SEED_BASE = 3000  # their seeds: their own, whatever the other lists hold

# Both layers on bipartite graphs with edge features: fill_value 'mean' with more sources than
# destinations and a number with fewer (PyG's reductions scatter the in-edges' features into
# min(Ns, Nd) rows, so with fewer sources an edge into a destination i >= Ns makes them fail),
# and no self loops.
BIPARTITE_EDGE_CASES = [
    GATConvCase(3, True, 0.2, True, True, False, graph=MANY_SOURCES, edge_dim=3, fill_value="mean"),
    GATConvCase(1, False, 0.05, True, False, True, graph=FEW_SOURCES, edge_dim=2, fill_value=0.5),
    GATConvCase(3, False, 0.2, False, True, False, graph=FEW_SOURCES, edge_dim=3),
    # heads concat  slope  loops  bias   shared residual
    GATv2ConvCase(3, True, 0.2, True, True, False, False, graph=MANY_SOURCES, edge_dim=3,
                  fill_value="mean"),
    GATv2ConvCase(1, False, 0.05, True, False, False, True, graph=FEW_SOURCES, edge_dim=2,
                  fill_value=0.5),
    GATv2ConvCase(3, True, 0.2, False, True, False, False, graph=MANY_SOURCES, edge_dim=3),
]
BIPARTITE_EDGE_SEED_BASE = 4000  # their seeds: their own, whatever the other lists hold


def make_edges(graph, gen):
    """(2, E) int64 edge_index of `graph` in a random order, duplicate-free. Node 0 receives from
    1..hub and has a self loop; node 1 sends to `fan_out` nodes and has a self loop; node N-3's
    only in-edge is its self loop; N-2 only sends; N-1 has no edge at all."""
    n = graph.nodes
    edges = {(j, 0) for j in range(1, graph.hub + 1)}
    edges |= {(1, d) for d in range(2, 2 + graph.fan_out)}
    edges |= {(0, 0), (1, 1), (n - 3, n - 3)}
    receivers = [d for d in range(1, n - 3)]  # not the hub, N-3, N-2, N-1
    senders = list(range(n - 1))              # everyone but N-1
    while len(edges) < graph.hub + graph.fan_out + 3 + graph.random:
        s = senders[int(torch.randint(len(senders), (1,), generator=gen))]
        d = receivers[int(torch.randint(len(receivers), (1,), generator=gen))]
        if s != d:
            edges.add((s, d))
    edges = sorted(edges)
    order = torch.randperm(len(edges), generator=gen)
    edge_index = torch.tensor(edges, dtype=torch.int64).t()[:, order].contiguous()
    assert int(edge_index[1].eq(n - 2).sum()) == 0 and int(edge_index.eq(n - 1).sum()) == 0
    return edge_index


def make_bipartite_edges(graph, gen):
    """(2, E) int64 edge_index of the Bipartite `graph` in a random order, duplicate-free.
    Destination 0 receives from sources 1..hub; source 1 sends to destinations 2..fan_out+1;
    (0, 0), (1, 1) and (2, 2) are edges (self loops by PyG's rule); the last destination receives
    nothing and the last source sends nothing."""
    ns, nd = graph.sources, graph.destinations
    edges = {(j, 0) for j in range(1, graph.hub + 1)}
    edges |= {(1, d) for d in range(2, 2 + graph.fan_out)}
    edges |= {(0, 0), (1, 1), (2, 2)}
    while len(edges) < graph.hub + graph.fan_out + 3 + graph.random:
        s = int(torch.randint(ns - 1, (1,), generator=gen))
        d = int(torch.randint(nd - 1, (1,), generator=gen))
        edges.add((s, d))
    edges = sorted(edges)
    order = torch.randperm(len(edges), generator=gen)
    edge_index = torch.tensor(edges, dtype=torch.int64).t()[:, order].contiguous()
    assert int(edge_index[1].eq(nd - 1).sum()) == 0 and int(edge_index[0].eq(ns - 1).sum()) == 0
    return edge_index


def run_case(case, seed):
    """The case's tensors (numpy) and metadata, its PyG layer in float64."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    if case.bipartite:
        edge_index = make_bipartite_edges(case.graph, gen)
    else:
        edge_index = make_edges(case.graph, gen)
    conv = case.build().double()
    conv.train()
    if case.bias:  # PyG starts it at zero, which would hide a bias applied in the wrong place
        with torch.no_grad():
            conv.bias.copy_(0.5 * torch.randn(conv.bias.shape, generator=gen, dtype=torch.float64))

    def features(rows, cols):
        return torch.randn(rows, cols, generator=gen, dtype=torch.float64, requires_grad=True)

    if case.bipartite:  # "x_src" (Ns, in), "x_dst" (Nd, dst_in)
        inputs = {"x_src": features(case.graph.sources, case.in_channels),
                  "x_dst": features(case.graph.destinations, case.dst_in_channels)}
        x = inputs["x_src"], inputs["x_dst"]
    else:  # "x" (N, in)
        inputs = {"x": features(case.graph.nodes, case.in_channels)}
        x = inputs["x"]
    edge_attr = None
    if case.edge_dim:
        edge_attr = inputs["edge_attr"] = features(edge_index.size(1), case.edge_dim)

    raw = case.leaky_relu_inputs(conv, x, edge_index, edge_attr).detach()
    negative = float(raw.lt(0).double().mean())
    assert 0.1 < negative < 0.9, f"{case.name()}: {negative:.0%} of the LeakyReLU inputs are negative"

    out, (att_edge_index, att_weights) = conv(x, edge_index, edge_attr,
                                              return_attention_weights=True)
    grad_out = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    params = dict(conv.named_parameters())
    grads = torch.autograd.grad(out, list(inputs.values()) + list(params.values()), grad_out)

    tensors = {"input." + name: value.detach() for name, value in inputs.items()}
    tensors.update({
        "input.edge_index": edge_index.to(torch.int32),
        "grad_out": grad_out,
        "out": out.detach(),
        "attention.edge_index": att_edge_index.to(torch.int32),
        "attention.weights": att_weights.detach(),
    })
    for name, g in zip(inputs, grads):
        tensors["grad." + name] = g
    for (name, p), g in zip(params.items(), grads[len(inputs):]):
        tensors["param." + name] = p.detach()
        tensors["grad." + name] = g
    metadata = {key: json.dumps(value) for key, value in case.options().items()}
    metadata["layer"] = case.layer
    if case.bipartite:
        metadata["description"] = (
            f"PyG {case.layer}, in_channels ({case.in_channels}, {case.dst_in_channels}), on a "
            f"bipartite graph of {case.graph.sources} sources, {case.graph.destinations} "
            f"destinations and {edge_index.size(1)} edges (destination 0 receives from "
            f"{case.graph.hub} sources and 0), float64, training mode")
    else:
        metadata["description"] = (
            f"PyG {case.layer} on a {case.graph.nodes}-node graph of {edge_index.size(1)} edges "
            f"(hub in-degree {case.graph.hub + 1}, with its self loop), float64, training mode")
    if case.edge_dim:
        metadata["description"] += (f", {case.edge_dim} edge features, self loops' by "
                                    f"fill_value {case.fill_value!r}")
    return {k: v.contiguous().numpy() for k, v in tensors.items()}, metadata


def same_case(path, tensors, metadata):
    """Whether the case file `path` exists and holds exactly these tensors (dtype, shape, bytes)
    and metadata. The safetensors library writes the metadata's keys in hash order, so a file
    written again would differ in bytes from an equal one; an equal file is left as it is."""
    if not os.path.exists(path):
        return False
    with safe_open(path, framework="numpy") as f:
        if f.metadata() != metadata or set(f.keys()) != set(tensors):
            return False
        for name, value in tensors.items():
            stored = f.get_tensor(name)
            if (stored.dtype != value.dtype or stored.shape != value.shape
                    or stored.tobytes() != value.tobytes()):
                return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help="folder of the cases (default: tests/data/pyg_parity); its "
                             "*.safetensors files are made those of the listed cases")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)

    os.makedirs(args.out, exist_ok=True)
    total, unchanged, names = 0, 0, set()
    # A case's seed: its place in GATCONV_CASES + GATV2CONV_CASES; the edge and bipartite cases'
    # their own.
    seeded = list(enumerate(GATCONV_CASES + GATV2CONV_CASES))
    seeded += [(EDGE_SEED_BASE + k, case) for k, case in enumerate(GATCONV_EDGE_CASES)]
    seeded += [(BIPARTITE_SEED_BASE + k, case) for k, case in enumerate(GATCONV_BIPARTITE_CASES)]
    seeded += [(GATV2_EDGE_SEED_BASE + k, case) for k, case in enumerate(GATV2CONV_EDGE_CASES)]
    seeded += [(GATV2_BIPARTITE_SEED_BASE + k, case)
               for k, case in enumerate(GATV2CONV_BIPARTITE_CASES)]
    seeded += [(BIPARTITE_EDGE_SEED_BASE + k, case) for k, case in enumerate(BIPARTITE_EDGE_CASES)]
    for seed, case in seeded:
        tensors, metadata = run_case(case, seed)
        metadata["torch"] = torch.__version__
        metadata["torch_geometric"] = torch_geometric.__version__
        names.add(case.name() + ".safetensors")
        path = os.path.join(args.out, case.name() + ".safetensors")
        if same_case(path, tensors, metadata):
            unchanged += 1
        else:
            save_file(tensors, path, metadata=metadata)
        total += os.path.getsize(path)
    assert len(names) == len(seeded), "two cases have one name"
    for stale in sorted(set(os.listdir(args.out)) - names):
        if stale.endswith(".safetensors"):
            os.remove(os.path.join(args.out, stale))
    print(f"{len(seeded)} cases ({unchanged} unchanged), {total} bytes in {args.out} "
          f"(torch {torch.__version__}, torch_geometric {torch_geometric.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
