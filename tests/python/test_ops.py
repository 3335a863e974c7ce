"""gat_torch's operators (python/gat_torch/ops.py, python/csrc/ops.cpp) on every device present:
the graph build against a brute-force reference, the attention against a plain PyTorch
formula, f64 gradcheck, torch.library.opcheck, torch.compile(fullgraph=True), bitwise
repeatability, and clear errors for bad input."""
import pytest
import torch
import torch.nn.functional as F

import gat_torch
from gat_torch import ops

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def edges(num_src, num_dst, num_edges, seed, device="cpu"):
    """Random edges with duplicates and, where the node sets overlap, self loops."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=g)
    dst = torch.randint(0, num_dst, (num_edges,), generator=g)
    src = torch.cat([src, src[:3]])  # duplicates of the first three edges
    dst = torch.cat([dst, dst[:3]])
    return src.to(device), dst.to(device)


def reference_attention(src, dst, num_dst, scores, value):
    """sum over each destination's in-edges of softmax(scores) * value[src]: (Nd, H, F)."""
    h = scores.shape[1]
    idx = dst.unsqueeze(1).expand(-1, h)
    row_max = torch.full((num_dst, h), float("-inf"), dtype=scores.dtype, device=scores.device)
    row_max = row_max.scatter_reduce(0, idx, scores, "amax", include_self=True)
    ex = torch.exp(scores - row_max[dst])
    z = torch.zeros(num_dst, h, dtype=scores.dtype, device=scores.device).index_add(0, dst, ex)
    a = ex / z[dst]
    out = torch.zeros(num_dst, h, value.shape[2], dtype=value.dtype, device=value.device)
    return out.index_add(0, dst, a.unsqueeze(-1) * value[src])


def gat_inputs(ns, nd, e, h, f, dtype, device, seed=1, term=True):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype).to(device).requires_grad_()
    return rand(ns, h), rand(nd, h), (rand(e, h) if term else None), rand(ns, h, f)


# ---- the graph ----

@pytest.mark.parametrize("device", DEVICES)
def test_build_graph_orders_edges_by_destination_then_source_and_keeps_duplicates(device):
    src, dst = edges(7, 5, 30, seed=0, device=device)
    graph = ops.Graph.build(src, dst, 7, 5)
    assert (graph.num_src_nodes, graph.num_dst_nodes, graph.num_edges) == (7, 5, 33)
    assert torch.equal(graph.src, src[graph.perm]) and torch.equal(graph.dst, dst[graph.perm])
    key = graph.dst * 7 + graph.src
    assert torch.all(key[1:] >= key[:-1])
    assert sorted(graph.perm.tolist()) == list(range(33))  # every input edge once
    row_ptr, edge_src, edge_dst, t_row_ptr, t_edge_dst, t_edge_id = (a.long() for a in graph.arrays[:6])
    assert torch.equal(row_ptr, torch.tensor([0] + torch.bincount(dst.cpu(), minlength=5).cumsum(0).tolist(), device=device))
    # The transpose lists each source's out-edges by destination, then edge id.
    assert torch.equal(t_row_ptr, torch.tensor([0] + torch.bincount(src.cpu(), minlength=7).cumsum(0).tolist(), device=device))
    assert torch.equal(t_edge_dst, edge_dst[t_edge_id])
    t_key = edge_src[t_edge_id] * 5 * 64 + t_edge_dst * 64 + t_edge_id
    assert torch.all(t_key[1:] > t_key[:-1])


def test_build_graph_counts_self_loops():
    src = torch.tensor([0, 1, 2, 1, 2])
    dst = torch.tensor([0, 1, 2, 0, 1])
    assert ops.Graph.build(src, dst, 3, 3).counts[3:] == [3, 1]      # one loop on every node
    assert ops.Graph.build(src[1:], dst[1:], 3, 3).counts[3:] == [2, 0]
    twice = ops.Graph.build(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 0, 1, 2]), 3, 3)
    assert twice.counts[3:] == [4, 0]


@pytest.mark.parametrize("bad, message", [
    ((torch.tensor([0, 5]), torch.tensor([0, 1]), 5, 3), "outside"),
    ((torch.tensor([0, 1]), torch.tensor([-1, 1]), 5, 3), "outside"),
    ((torch.tensor([0.0, 1.0]), torch.tensor([0, 1]), 5, 3), "integers"),
    ((torch.tensor([0, 1]), torch.tensor([0]), 5, 3), "one length"),
    ((torch.tensor([0]), torch.tensor([0]), -1, 3), "node counts"),
])
def test_build_graph_refuses_bad_edges(bad, message):
    with pytest.raises(RuntimeError, match=message):
        ops.Graph.build(*bad)


def test_an_empty_graph_gives_zero_rows():
    graph = ops.Graph.build(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 3, 4)
    el, er, _, value = gat_inputs(3, 4, 0, 2, 5, torch.float64, "cpu", term=False)
    out = ops.gat_attention(graph, el, er, value)
    assert out.shape == (4, 2, 5) and torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    assert torch.equal(value.grad, torch.zeros_like(value))


# ---- GAT ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bipartite", [False, True])
def test_gat_attention_is_the_softmax_aggregate_of_leaky_relu_scores(device, bipartite):
    ns, nd = (9, 6) if bipartite else (8, 8)
    src, dst = edges(ns, nd, 40, seed=2, device=device)
    graph = ops.Graph.build(src, dst, ns, nd)
    el, er, term, value = gat_inputs(ns, nd, graph.num_edges, 3, 5, torch.float64, device)
    out = ops.gat_attention(graph, el, er, value, 0.2, term)
    s, d = graph.src, graph.dst
    want = reference_attention(s, d, nd, F.leaky_relu(el[s] + er[d] + term, 0.2), value)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    weights = ops.gat_attention_weights(graph, el, er, 0.2, term)
    assert weights.shape == (graph.num_edges, 3)
    sums = torch.zeros(nd, 3, dtype=weights.dtype, device=device).index_add(0, d, weights)
    has_edges = torch.bincount(d, minlength=nd) > 0
    torch.testing.assert_close(sums[has_edges], torch.ones_like(sums[has_edges]))


@pytest.mark.parametrize("device", DEVICES)
def test_gat_attention_gradients_match_finite_differences(device):
    src, dst = edges(6, 5, 20, seed=3, device=device)
    graph = ops.Graph.build(src, dst, 6, 5)
    inputs = gat_inputs(6, 5, graph.num_edges, 2, 3, torch.float64, device, seed=4)
    assert torch.autograd.gradcheck(lambda el, er, term, v: ops.gat_attention(graph, el, er, v, 0.2, term),
                                    inputs, eps=1e-6, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_gat_attention_gradients_of_one_input_alone(device):
    src, dst = edges(6, 6, 25, seed=5, device=device)
    graph = ops.Graph.build(src, dst, 6, 6)
    el, er, term, value = gat_inputs(6, 6, graph.num_edges, 2, 4, torch.float64, device, seed=6)
    upstream = torch.randn(6, 2, 4, dtype=torch.float64, device=device)  # not uniform
    (ops.gat_attention(graph, el, er, value, 0.2, term) * upstream).sum().backward()
    want = [t.grad.clone() for t in (el, er, term, value)]
    for k, t in enumerate((el, er, term, value)):
        alone = [x.detach().requires_grad_(i == k) for i, x in enumerate((el, er, term, value))]
        (ops.gat_attention(graph, alone[0], alone[1], alone[3], 0.2, alone[2]) * upstream).sum().backward()
        torch.testing.assert_close(alone[k].grad, want[k], rtol=1e-12, atol=1e-12)


# ---- GATv2 ----

def gatv2_inputs(ns, nd, e, h, f, dtype, device, seed=7, term=True):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype).to(device).requires_grad_()
    return rand(ns, h, f), rand(nd, h, f), rand(h, f), (rand(e, h, f) if term else None)


@pytest.mark.parametrize("device", DEVICES)
def test_gatv2_attention_scores_by_the_features_then_aggregates(device):
    src, dst = edges(7, 7, 30, seed=8, device=device)
    graph = ops.Graph.build(src, dst, 7, 7)
    xl, xr, att, term = gatv2_inputs(7, 7, graph.num_edges, 2, 3, torch.float64, device)
    out = ops.gatv2_attention(graph, xl, xr, att, 0.2, term)
    s, d = graph.src, graph.dst
    scores = (F.leaky_relu(xl[s] + xr[d] + term, 0.2) * att).sum(-1)
    torch.testing.assert_close(out, reference_attention(s, d, 7, scores, xl), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ops.gatv2_attention_weights(graph, xl, xr, att, 0.2, term).sum(),
                               torch.tensor(float((torch.bincount(d, minlength=7) > 0).sum() * 2),
                                            dtype=torch.float64, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_gatv2_attention_gradients_match_finite_differences(device):
    src, dst = edges(5, 5, 15, seed=9, device=device)
    graph = ops.Graph.build(src, dst, 5, 5)
    inputs = gatv2_inputs(5, 5, graph.num_edges, 2, 3, torch.float64, device, seed=10)
    assert torch.autograd.gradcheck(
        lambda xl, xr, att, term: ops.gatv2_attention(graph, xl, xr, att, 0.2, term), inputs,
        eps=1e-6, atol=1e-7, rtol=1e-6)


# ---- dropout, determinism, devices ----

@pytest.mark.parametrize("device", DEVICES)
def test_dropout_follows_torch_manual_seed_and_changes_the_output(device):
    src, dst = edges(8, 8, 40, seed=11, device=device)
    graph = ops.Graph.build(src, dst, 8, 8)
    el, er, _, value = gat_inputs(8, 8, graph.num_edges, 2, 4, torch.float32, device, term=False)
    torch.manual_seed(0)
    a = ops.gat_attention(graph, el, er, value, dropout=0.5)
    torch.manual_seed(0)
    b = ops.gat_attention(graph, el, er, value, dropout=0.5)
    c = ops.gat_attention(graph, el, er, value, dropout=0.5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(a, ops.gat_attention(graph, el, er, value))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_draws_the_cpu_dropout_masks_and_matches_the_cpu():
    src, dst = edges(30, 30, 200, seed=12)
    graph_cpu = ops.Graph.build(src, dst, 30, 30)
    graph_cuda = ops.Graph.build(src.cuda(), dst.cuda(), 30, 30)
    inputs = gat_inputs(30, 30, graph_cpu.num_edges, 4, 8, torch.float64, "cpu", seed=13)
    upstream = torch.randn(30, 4, 8, dtype=torch.float64)
    results = []
    for graph, device in ((graph_cpu, "cpu"), (graph_cuda, "cuda")):
        el, er, term, value = (t.detach().to(device).requires_grad_() for t in inputs)
        torch.manual_seed(5)
        out = ops.gat_attention(graph, el, er, value, 0.2, term, dropout=0.3)
        (out * upstream.to(device)).sum().backward()
        results.append([t.detach().cpu() for t in (out, el.grad, er.grad, term.grad, value.grad)])
    for cpu, cuda in zip(*results):
        torch.testing.assert_close(cuda, cpu, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_two_runs_give_bitwise_equal_gradients(device):
    src, dst = edges(50, 50, 600, seed=14, device=device)
    graph = ops.Graph.build(src, dst, 50, 50)
    upstream = torch.randn(50, 4, 8, device=device)

    def grads():
        xl, xr, att, term = gatv2_inputs(50, 50, graph.num_edges, 4, 8, torch.float32, device, seed=15)
        el, er, term1, value = gat_inputs(50, 50, graph.num_edges, 4, 8, torch.float32, device, seed=16)
        loss = (ops.gatv2_attention(graph, xl, xr, att, 0.2, term) * upstream).sum()
        loss = loss + (ops.gat_attention(graph, el, er, value, 0.2, term1) * upstream).sum()
        loss.backward()
        return [t.grad for t in (xl, xr, att, term, el, er, term1, value)]
    for a, b in zip(grads(), grads()):
        assert torch.equal(a, b)


def test_mismatched_inputs_raise_clear_errors():
    src, dst = edges(6, 6, 20, seed=17)
    graph = ops.Graph.build(src, dst, 6, 6)
    el, er, term, value = gat_inputs(6, 6, graph.num_edges, 2, 3, torch.float32, "cpu")
    with pytest.raises(RuntimeError, match="er"):
        ops.gat_attention(graph, el, er[:5], value)
    with pytest.raises(RuntimeError, match="Double"):
        ops.gat_attention(graph, el, er.double(), value)
    with pytest.raises(RuntimeError, match="edge_term"):
        ops.gat_attention(graph, el, er, value, 0.2, term[:-1])
    with pytest.raises(RuntimeError, match="value"):
        ops.gat_attention(graph, el, er, value[:, :1])
    with pytest.raises(RuntimeError, match="dropout"):
        ops.gat_attention(graph, el, er, value, dropout=1.0)
    raw = torch.ops.gat_torch.gat_attention
    with pytest.raises(RuntimeError, match="needs a seed"):
        raw(graph.arrays, graph.counts, el, er, None, value, 0.2, 0.5, None, False)
    for seed in (torch.tensor(3.0), torch.tensor([1, 2]), torch.tensor(3, dtype=torch.int32)):
        with pytest.raises(RuntimeError, match="'seed' must be one int64 on the CPU"):
            raw(graph.arrays, graph.counts, el, er, None, value, 0.2, 0.5, seed, False)
    xl, xr, att, _ = gatv2_inputs(6, 6, graph.num_edges, 2, 3, torch.float32, "cpu", term=False)
    with pytest.raises(RuntimeError, match="att"):
        ops.gatv2_attention(graph, xl, xr, att[:1])
    with pytest.raises(RuntimeError, match="int32|float"):
        ops.gat_attention(graph, el.half(), er.half(), value.half())


# ---- el and er ----

@pytest.mark.parametrize("device", DEVICES)
def test_head_dot_pair_is_two_head_dots_and_has_their_gradients(device):
    g = torch.Generator().manual_seed(24)
    x = torch.randn(37, 3, 5, generator=g, dtype=torch.float64).to(device).requires_grad_()
    a_src, a_dst = (torch.randn(3, 5, generator=g, dtype=torch.float64).to(device).requires_grad_()
                    for _ in range(2))
    el, er = ops.head_dot_pair(x, a_src, a_dst)
    torch.testing.assert_close(el, (x * a_src).sum(-1), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(er, (x * a_dst).sum(-1), rtol=1e-14, atol=1e-14)
    assert torch.autograd.gradcheck(ops.head_dot_pair, (x, a_src, a_dst))
    # one output used alone: the other's gradient is zero, not missing
    d_x, d_src, d_dst = torch.autograd.grad(ops.head_dot_pair(x, a_src, a_dst)[1].square().sum(),
                                            (x, a_src, a_dst))
    assert torch.count_nonzero(d_src) == 0
    torch.testing.assert_close(d_x, 2 * er.detach().unsqueeze(-1) * a_dst.detach())
    with pytest.raises(RuntimeError, match="a_src and a_dst"):
        ops.head_dot_pair(x, a_src[:2], a_dst)
    with pytest.raises(RuntimeError, match="unlike the others"):
        ops.head_dot_pair(x.detach().float(), a_src.detach(), a_dst.detach())


# ---- PyTorch's checks of custom operators ----

@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_on_every_operator(device):
    src, dst = edges(6, 5, 20, seed=18, device=device)
    graph = ops.Graph.build(src, dst, 6, 5)
    g, c = graph.arrays, graph.counts
    el, er, term, value = gat_inputs(6, 5, graph.num_edges, 2, 3, torch.float64, device, seed=19)
    positive = device == "cuda"
    seed = torch.tensor(3)  # a dropout seed: one int64 on the CPU, whatever the device
    fwd = torch.ops.gat_torch.gat_attention(g, c, el, er, term, value, 0.2, 0.4, seed, positive)
    grad_out = torch.randn_like(fwd[0])
    xl, xr, att, term2 = gatv2_inputs(6, 5, graph.num_edges, 2, 3, torch.float64, device, seed=20)
    v2 = torch.ops.gat_torch.gatv2_attention(g, c, xl, xr, att, term2, 0.2, 0.0, None)
    cases = [
        (torch.ops.gat_torch.gat_attention.default, (g, c, el, er, term, value, 0.2, 0.0, None, positive)),
        (torch.ops.gat_torch.gat_attention.default, (g, c, el, er, None, value, 0.2, 0.4, seed, positive)),
        (torch.ops.gat_torch.gat_attention_backward.default,
         (g, c, el.detach(), er.detach(), term.detach(), value.detach(), 0.2, 0.4, seed,
          *[t.detach() for t in fwd], grad_out, [True, True, True, True])),
        (torch.ops.gat_torch.gatv2_attention.default, (g, c, xl, xr, att, term2, 0.2, 0.0, None)),
        (torch.ops.gat_torch.gatv2_attention.default, (g, c, xl, xr, att, None, 0.2, 0.3, seed)),
        (torch.ops.gat_torch.gatv2_attention_backward.default,
         (g, c, xl.detach(), xr.detach(), att.detach(), term2.detach(), 0.2, 0.0, None,
          v2[0].detach(), v2[1].detach(), torch.randn_like(v2[0]), [True, False, True, True])),
        # Scores and weights are for inspection: no autograd (the layers detach them).
        (torch.ops.gat_torch.gat_edge_scores.default, (g, c, el.detach(), er.detach(), term.detach(), 0.2)),
        (torch.ops.gat_torch.gatv2_edge_scores.default, (g, c, xl.detach(), xr.detach(), att.detach(), None, 0.2)),
        (torch.ops.gat_torch.csr_softmax.default, (g, c, torch.randn(graph.num_edges, 2, device=device))),
        (torch.ops.gat_torch.validate_graph.default, (g, c, graph.perm)),
        (torch.ops.gat_torch.head_dot_pair.default, (value, att.detach().clone().requires_grad_(), att.detach().flip(0))),
        (torch.ops.gat_torch.head_dot_pair_backward.default,
         (value.detach(), att.detach(), att.detach().flip(0), torch.randn(6, 2, dtype=torch.float64, device=device),
          torch.randn(6, 2, dtype=torch.float64, device=device))),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)
    # build_graph's outputs have data-dependent sizes: its fake implementation is checked by
    # the tests that make no dynamic-shape claims.
    torch.library.opcheck(torch.ops.gat_torch.build_graph.default, (src, dst, 6, 5),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph_gives_the_eager_results(device):
    src, dst = edges(12, 12, 60, seed=21, device=device)
    graph = ops.Graph.build(src, dst, 12, 12)
    el, er, term, value = gat_inputs(12, 12, graph.num_edges, 2, 4, torch.float32, device, seed=22)
    xl, xr, att, _ = gatv2_inputs(12, 12, graph.num_edges, 2, 4, torch.float32, device, seed=23, term=False)

    def model(el, er, term, value, xl, xr, att):
        h = ops.gat_attention(graph, el, er, value, 0.2, term).relu()
        return (h * ops.gatv2_attention(graph, xl, xr, att, 0.2)).sum()

    inputs = (el, er, term, value, xl, xr, att)
    eager = model(*inputs)
    eager_grads = torch.autograd.grad(eager, inputs)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(*inputs)
    grads = torch.autograd.grad(out, inputs)
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
    for a, b in zip(grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph_traces_the_dropout_draw(device):
    """With attention dropout, the seed is drawn inside the compiled graph: no graph break, the
    masks follow torch.manual_seed as in eager mode, and each call draws new ones."""
    src, dst = edges(12, 12, 60, seed=25, device=device)
    graph = ops.Graph.build(src, dst, 12, 12)
    el, er, _, value = gat_inputs(12, 12, graph.num_edges, 2, 4, torch.float32, device, seed=26,
                                  term=False)
    xl, xr, att, _ = gatv2_inputs(12, 12, graph.num_edges, 2, 4, torch.float32, device, seed=27,
                                  term=False)

    def model(el, er, value, xl, xr, att):
        h = ops.gat_attention(graph, el, er, value, 0.2, dropout=0.5)
        return (h * ops.gatv2_attention(graph, xl, xr, att, 0.2, dropout=0.3)).sum()

    inputs = (el, er, value, xl, xr, att)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    results = []
    for run in (model, compiled, compiled):
        torch.manual_seed(7)
        out = run(*inputs)
        results.append((out, *torch.autograd.grad(out, inputs)))
    for again in (results[1], results[2]):  # the second call reuses the compiled graph
        for eager, traced in zip(results[0], again):
            torch.testing.assert_close(traced, eager, rtol=0, atol=0)
    assert not torch.equal(compiled(*inputs), results[1][0])  # the generator moved on


def test_the_package_exports_its_layers():
    assert gat_torch.Graph is ops.Graph
    assert issubclass(gat_torch.GATConv, torch.nn.Module) and issubclass(gat_torch.GATv2Conv, torch.nn.Module)


def test_a_graph_changed_in_place_is_refused_not_read_out_of_bounds():
    """The kernels trust a Graph's arrays: a row pointer or an edge's source set out of range in
    place after Graph.build read memory out of bounds (SIGSEGV). Each in-place change is now
    refused at the next call, naming the array."""
    el, er, value = torch.randn(3, 2), torch.randn(2, 2), torch.randn(3, 2, 4)
    for k, bad in ((0, 100), (1, 1000), (2, -7)):
        graph = ops.Graph.build(torch.tensor([0, 1, 2, 2]), torch.tensor([1, 0, 0, 1]), 3, 2)
        ops.gat_attention(graph, el, er, value, 0.2)
        graph.arrays[k][1] = bad
        with pytest.raises(RuntimeError, match=f"array {k} was changed in place"):
            ops.gat_attention(graph, el, er, value, 0.2)
        with pytest.raises(RuntimeError, match=f"array {k} was changed in place"):
            ops.gatv2_attention(graph, value, value[:2], torch.randn(2, 4), 0.2)


def _good_graph_parts():
    graph = ops.Graph.build(torch.tensor([0, 1, 2, 2, 0]), torch.tensor([1, 0, 0, 1, 0]), 3, 2)
    return [a.clone() for a in graph.arrays], list(graph.counts), graph.perm.clone()


def _with(parts, k, value):
    arrays, counts, perm = parts
    arrays = list(arrays)
    arrays[k] = value
    return arrays, counts, perm


def _bad_graphs():
    """(name, arrays, counts, perm) each wrong in one way, and the message expected."""
    arrays, counts, perm = _good_graph_parts()
    rp, src = arrays[0], arrays[1]
    yield "src out of range", _with((arrays, counts, perm), 1, src.clone().fill_(7)), "outside"
    yield "negative src", _with((arrays, counts, perm), 1, src.clone().fill_(-1)), "outside"
    yield "row_ptr decreasing", _with((arrays, counts, perm), 0, torch.tensor([0, 4, 2], dtype=torch.int32)), \
        "decreases"
    yield "row_ptr past E", _with((arrays, counts, perm), 0, torch.tensor([0, 2, 99], dtype=torch.int32)), \
        "row_ptr"
    yield "row_ptr empty", _with((arrays, counts, perm), 0, torch.zeros(0, dtype=torch.int32)), \
        "at least one element"
    yield "short edge_dst", _with((arrays, counts, perm), 2, arrays[2][:-1].clone()), "edge_dst"
    yield "int64 array", _with((arrays, counts, perm), 1, src.long()), "int32"
    yield "2-D array", _with((arrays, counts, perm), 1, src.unsqueeze(0)), "1-D"
    yield "transposed edge ids", _with((arrays, counts, perm), 5, arrays[5].flip(0).contiguous()), "t_edge_id|transpose"
    yield "unsorted row", _with((arrays, counts, perm), 1, torch.tensor([2, 0, 1, 0, 2], dtype=torch.int32)), \
        "sorted|edge_dst|transpose"
    yield "float array", _with((arrays, counts, perm), 4, arrays[4].float()), "int32"
    yield "eleven arrays", (arrays[:11], counts, perm), "12 arrays"
    yield "four counts", (arrays, counts[:4], perm), "counts"
    yield "max in-degree wrong", (arrays, [counts[0] + 1] + counts[1:], perm), "max_in_degree"
    yield "chunk edges 2^32 + chunk", (arrays, counts[:2] + [counts[2] + 2**32] + counts[3:], perm), "counts"
    yield "self loops wrong", (arrays, counts[:3] + [counts[3] + 5] + counts[4:], perm), "self loops"
    yield "one per node 7", (arrays, counts[:4] + [7], perm), "counts"
    yield "perm short", (arrays, counts, perm[:-1]), "perm"
    yield "perm int32", (arrays, counts, perm.int()), "perm"
    yield "perm repeated", (arrays, counts, torch.zeros_like(perm)), "named twice"
    yield "perm out of range", (arrays, counts, perm + 100), "outside"
    yield "an array on meta", _with((arrays, counts, perm), 1, src.to("meta")), "one device"
    yield "perm on meta", (arrays, counts, perm.to("meta")), "one device"


@pytest.mark.parametrize("name,parts,message", list(_bad_graphs()), ids=[b[0] for b in _bad_graphs()])
def test_a_graph_made_from_bad_arrays_is_refused_not_read_out_of_bounds(name, parts, message):
    """Graph(arrays, counts, perm) took its arrays unchecked, and the kernels trust them: an
    out-of-range source or a row pointer past the edges read memory out of bounds (SIGSEGV). It
    now checks them (gat::Graph::validate) and raises, naming the fault."""
    with pytest.raises(RuntimeError, match=message):
        ops.Graph(*parts)


def test_a_graph_made_from_other_types_is_a_type_error():
    """Lists for arrays, or float or 2^70 counts, failed in pybind11's cast naming type '?'."""
    arrays, counts, perm = _good_graph_parts()
    for bad_arrays, bad_counts in (([a.tolist() for a in arrays], counts), (arrays, [1.5] * 5),
                                   (arrays, [2**70] * 5), (arrays, [True] * 5)):
        with pytest.raises(TypeError, match="gat_torch.Graph: (arrays must be 12 tensors|counts must be)"):
            ops.Graph(bad_arrays, bad_counts, perm)


def test_a_graph_made_from_good_arrays_equals_the_built_one():
    arrays, counts, perm = _good_graph_parts()
    el, er, value = torch.randn(3, 2), torch.randn(2, 2), torch.randn(3, 2, 4)
    built = ops.Graph.build(torch.tensor([0, 1, 2, 2, 0]), torch.tensor([1, 0, 0, 1, 0]), 3, 2)
    made = ops.Graph(arrays, counts, perm)
    assert torch.equal(ops.gat_attention(made, el, er, value), ops.gat_attention(built, el, er, value))
    # Non-contiguous but valid arrays are fine (the operators copy them contiguous).
    strided = [torch.stack([a, a], 1)[:, 0] for a in arrays]
    assert not strided[1].is_contiguous()
    ops.Graph(strided, counts, perm)


def test_a_graph_cannot_be_changed_through_its_attributes():
    """What Graph checked must stay what the kernels read: graph.counts[0] = 99 changed a checked
    count silently, graph.arrays[0] = t swapped an array. They now change a copy; the attributes
    cannot be assigned."""
    graph = ops.Graph.build(torch.tensor([0, 1]), torch.tensor([1, 0]), 2, 2)
    counts, row_ptr = graph.counts, graph.arrays[0]
    graph.counts[0] = 99
    graph.arrays[0] = torch.zeros(3, dtype=torch.int32)
    assert graph.counts == counts and graph.arrays[0] is row_ptr
    with pytest.raises(AttributeError):
        graph.counts = [0, 0, 0, 0, 0]
    with pytest.raises(AttributeError):
        graph.arrays = []
    with pytest.raises(AttributeError):
        graph.perm = torch.zeros(2, dtype=torch.int64)
