"""PyG's GCNConv, SAGEConv (aggr='mean') and GINConv on small graphs: tests/data/pyg_conv_fixtures.h
(the cases; their struct is tests/pyg_conv_case.h).

For each case: the layer's options, the input features (and edge weights), its parameters set to
fixed values, a fixed non-uniform upstream gradient, and PyG's output and gradients of every input
and parameter, all in float64. tests/test_conv_layers.cpp loads the same parameters into
this project's layers and compares.

    ~/.cache/gat/torch-venv/bin/python tests/data/pyg_conv_reference.py > tests/data/pyg_conv_fixtures.h
    clang-format -i tests/data/pyg_conv_fixtures.h

(torch 2.11 on the CPU, torch_geometric 2.8.) The graphs' edges are listed sorted by (destination,
source), the edge-id order of this project's Graph, so edge weights and their gradients need no
mapping. Weights are written in this project's layout, (in, out): the transpose of PyG's.
"""

import torch
import torch_geometric
from torch_geometric.nn import GCNConv, GINConv, SAGEConv

torch.set_default_dtype(torch.float64)

# One node set of 7 nodes. Node 6 has no in-edge (but two out-edges), 2 -> 3 is listed twice,
# 4 -> 4 is a self loop.
GRAPH = (
    7,
    7,
    [(1, 0), (3, 0), (0, 1), (2, 1), (5, 1), (1, 2), (6, 2), (2, 3), (2, 3), (4, 3), (0, 4), (4, 4), (5, 4), (3, 5),
     (6, 5)],
)
# 6 sources into 4 destinations: destination 2 has no in-edge, 1 -> 1 is listed twice.
BIPARTITE = (6, 4, [(0, 0), (3, 0), (5, 0), (1, 1), (1, 1), (4, 1), (0, 3), (2, 3), (5, 3)])

IN, OUT, DST_IN, GIN_HIDDEN = 3, 4, 2, 5

GCN_CASES = [
    ("default", {}, False),
    ("edge weights", {}, True),
    ("improved, edge weights", {"improved": True}, True),
    ("improved without edge weights (PyG 2.8 fills 1)", {"improved": True}, False),
    ("no self loops, edge weights", {"add_self_loops": False}, True),
    ("no self loops (node 6 has degree 0)", {"add_self_loops": False}, False),
    ("no normalisation, edge weights, no bias", {"normalize": False, "bias": False}, True),
    ("no normalisation", {"normalize": False}, False),
]
SAGE_CASES = [
    ("default", {}, False),
    ("no root weight", {"root_weight": False}, False),
    ("normalize", {"normalize": True}, False),
    ("project", {"project": True}, False),
    ("no bias", {"bias": False}, False),
    ("bipartite", {}, True),
    ("bipartite, project, normalize", {"project": True, "normalize": True}, True),
]
GIN_CASES = [
    ("eps 0", {"eps": 0.0}, False),
    ("eps 0.3", {"eps": 0.3}, False),
    ("train eps -0.2", {"eps": -0.2, "train_eps": True}, False),
    ("bipartite, train eps 0.5", {"eps": 0.5, "train_eps": True}, True),
]

generator = torch.Generator().manual_seed(46)


def values(*shape, lo=-1.0, hi=1.0):
    """Uniform numbers rounded to 4 decimals: the same doubles in Python and C++."""
    t = torch.rand(*shape, generator=generator) * (hi - lo) + lo
    return torch.round(t * 1e4) / 1e4


def ours(name, t):
    """A tensor in this project's layout: 2-D weights (in, out)."""
    return t.t() if name.endswith("weight") and t.dim() == 2 else t


def literal(v):
    return repr(float(v))


def row(t):
    return "{" + ", ".join(literal(v) for v in t.reshape(-1).tolist()) + "}"


def run(layer, options, conv, graph, bipartite_input, with_edge_weight):
    num_src, num_dst, edges = graph
    edge_index = torch.tensor(edges, dtype=torch.long).t()
    x = values(num_src, IN).requires_grad_()
    x_dst = values(num_dst, DST_IN if layer == "SAGEConv" else IN).requires_grad_() if bipartite_input else None
    edge_weight = values(len(edges), lo=0.5, hi=2.0).requires_grad_() if with_edge_weight else None
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(values(*p.shape))
    inputs = (x, x_dst) if bipartite_input else x
    out = conv(inputs, edge_index, edge_weight) if with_edge_weight else conv(inputs, edge_index)
    grad_out = values(*out.shape)
    out.backward(grad_out)
    named = list(conv.named_parameters())
    return {
        "parameters": [(n, ours(n, p.detach())) for n, p in named],
        "x": x.detach(),
        "x_dst": x_dst.detach() if bipartite_input else torch.zeros(0),
        "edge_weight": edge_weight.detach() if with_edge_weight else torch.zeros(0),
        "grad_out": grad_out,
        "out": out.detach(),
        "grad_x": x.grad,
        "grad_x_dst": x_dst.grad if bipartite_input else torch.zeros(0),
        "grad_edge_weight": edge_weight.grad if with_edge_weight else torch.zeros(0),
        "parameter_grads": [(n, ours(n, p.grad)) for n, p in named],
    }


def named_rows(pairs):
    return "{" + ", ".join(f'{{"{n}", {row(t)}}}' for n, t in pairs) + "}"


def emit(name, layer, options, bipartite, result):
    opts = "{" + ", ".join(f'{{"{k}", {literal(v)}}}' for k, v in options.items()) + "}"
    print(f'{{"{layer}: {name}", "{layer}", {opts}, {"true" if bipartite else "false"},')
    for key in ("x", "x_dst", "edge_weight"):
        print(f"  {row(result[key])},")
    print(f"  {named_rows(result['parameters'])},")
    for key in ("grad_out", "out", "grad_x", "grad_x_dst", "grad_edge_weight"):
        print(f"  {row(result[key])},")
    print(f"  {named_rows(result['parameter_grads'])}}},")


def edges_literal(graph):
    num_src, num_dst, edges = graph
    src = ", ".join(str(s) for s, _ in edges)
    dst = ", ".join(str(d) for _, d in edges)
    return f"{{{num_src}, {num_dst}, {{{src}}}, {{{dst}}}}}"


def main():
    print(f"""// PyG's GCNConv, SAGEConv and GINConv: inputs, parameters, outputs and gradients in float64.
// Generated by tests/data/pyg_conv_reference.py (torch {torch.__version__}, torch_geometric
// {torch_geometric.__version__}); do not edit by hand. Weights are (in, out), the transpose of PyG's.
#pragma once

#include "pyg_conv_case.h"

namespace gat::testing::pyg_conv {{

inline const Edges kGraph = {edges_literal(GRAPH)};
inline const Edges kBipartite = {edges_literal(BIPARTITE)};

// The widths: x (and x_src) IN, SAGEConv's x_dst DST_IN, outputs OUT, GINConv's hidden layer.
constexpr int64_t kIn = {IN}, kDstIn = {DST_IN}, kOut = {OUT}, kGinHidden = {GIN_HIDDEN};

inline const std::vector<Case> kCases = {{""")
    for name, options, with_weight in GCN_CASES:
        conv = GCNConv(IN, OUT, **options)
        emit(name, "GCNConv", options, False, run("GCNConv", options, conv, GRAPH, False, with_weight))
    for name, options, bipartite in SAGE_CASES:
        conv = SAGEConv((IN, DST_IN) if bipartite else IN, OUT, aggr="mean", **options)
        graph = BIPARTITE if bipartite else GRAPH
        emit(name, "SAGEConv", options, bipartite, run("SAGEConv", options, conv, graph, bipartite, False))
    for name, options, bipartite in GIN_CASES:
        mlp = torch.nn.Sequential(torch.nn.Linear(IN, GIN_HIDDEN), torch.nn.ReLU(), torch.nn.Linear(GIN_HIDDEN, OUT))
        conv = GINConv(mlp, **options)
        graph = BIPARTITE if bipartite else GRAPH
        emit(name, "GINConv", options, bipartite, run("GINConv", options, conv, graph, bipartite, False))
    print("};\n\n}  // namespace gat::testing::pyg_conv")


if __name__ == "__main__":
    main()
