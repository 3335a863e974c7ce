"""gat_torch's layers (python/gat_torch/conv.py) against torch_geometric's GATConv / GATv2Conv
(PyG 2.8) on every device present: PyG's state_dict loaded into ours (strict), then the
outputs, the attention weights (edge_index and alpha) and the gradients of every parameter and
input under a non-uniform upstream gradient, over the layers' options (heads, concat, residual,
bias, edge features with every fill_value, bipartite inputs, share_weights, self loops on and
off); f64 gradcheck; bitwise repeatability; the graph cache (an in-place change of edge_index is
seen); state_dict both ways; dropout in eval and training; edge_index as EdgeIndex, int32 and a
prebuilt Graph; PyG's constructor signatures; the errors for what is refused.

Run: PYTHONPATH=<build>/python python -m pytest tests/python/test_layers.py
"""
import copy
import inspect

import pytest
import torch

from gat_torch import GATConv, GATv2Conv, ops

pyg_nn = pytest.importorskip("torch_geometric.nn")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]
DTYPES = [torch.float32, torch.float64]

OURS = {"v1": GATConv, "v2": GATv2Conv}
PYG = {"v1": pyg_nn.GATConv, "v2": pyg_nn.GATv2Conv}


def tolerances(dtype):
    return (1e-5, 1e-6) if dtype == torch.float32 else (1e-10, 1e-12)


def assert_close(actual, expected, dtype, what, scale=True):
    """rtol/atol of the dtype, atol relative to the tensor's magnitude (a gradient summed over
    many edges can be large)."""
    rtol, atol = tolerances(dtype)
    expected = expected.detach()
    if scale and expected.numel() > 0:
        atol = atol * max(1.0, float(expected.abs().max()))
    torch.testing.assert_close(actual.detach(), expected, rtol=rtol, atol=atol,
                               msg=lambda m: f"{what}: {m}")


# ---- graphs and inputs ----

def random_edges(num_src, num_dst, num_edges, gen, *, loops=True, isolated=None):
    """Random edges with duplicates, with self loops where the node sets overlap, and, if
    isolated is a node, no in-edge into it; in random order."""
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, num_dst, (num_edges,), generator=gen)
    src = torch.cat([src, src[:4]])           # duplicates
    dst = torch.cat([dst, dst[:4]])
    if loops:
        n = min(num_src, num_dst)
        ids = torch.tensor([0, 1, 1, n - 1])  # self loops, one of them twice
        src = torch.cat([src, ids])
        dst = torch.cat([dst, ids])
    if isolated is not None:
        dst = torch.where(dst == isolated, (dst + 1) % num_dst, dst)
    order = torch.randperm(src.numel(), generator=gen)
    return torch.stack([src[order], dst[order]])


# Each case: which layers (v1, v2), constructor arguments, and the input:
#   nodes: N (one node set), or (Ns, Nd) features of a bipartite pair
#   fin: input size(s); edge_dim; edge_1d (edge_attr of shape (E,)); isolated (a node with no
#   in-edge, needs add_self_loops=False); x_dst_none / size (GATConv's (x_src, None) form);
#   tensor_x_bipartite (a tuple in_channels module fed one tensor)
CASES = {
    "heads1": dict(kw=dict(heads=1)),
    "heads4": dict(kw=dict(heads=4)),
    "heads4_mean": dict(kw=dict(heads=4, concat=False)),
    "residual": dict(kw=dict(heads=4, residual=True)),
    "residual_mean_nobias": dict(kw=dict(heads=2, concat=False, residual=True, bias=False)),
    "slope": dict(kw=dict(heads=2, negative_slope=0.05)),
    "edge_mean": dict(kw=dict(heads=2, edge_dim=3), edge_dim=3),
    "edge_add": dict(kw=dict(heads=2, edge_dim=3, fill_value="add"), edge_dim=3),
    "edge_min": dict(kw=dict(heads=2, edge_dim=3, fill_value="min"), edge_dim=3),
    "edge_max": dict(kw=dict(heads=2, edge_dim=3, fill_value="max"), edge_dim=3),
    "edge_mul": dict(kw=dict(heads=2, edge_dim=3, fill_value="mul"), edge_dim=3),
    "edge_float": dict(kw=dict(heads=2, edge_dim=3, fill_value=0.5), edge_dim=3),
    "edge_tensor": dict(kw=dict(heads=2, edge_dim=3, fill_value=torch.tensor([0.1, -0.2, 0.3])),
                        edge_dim=3),
    "edge_1d": dict(kw=dict(heads=4, edge_dim=1, concat=False, residual=True), edge_dim=1,
                    edge_1d=True),
    "no_loops_isolated": dict(kw=dict(heads=4, add_self_loops=False), isolated=3),
    "no_loops_edge": dict(kw=dict(heads=2, add_self_loops=False, edge_dim=2), edge_dim=2,
                          isolated=0),
    "bipartite": dict(kw=dict(in_channels=(5, 7), heads=2, residual=True), nodes=(20, 12),
                      fin=(5, 7)),
    "bipartite_more_dst": dict(kw=dict(in_channels=(5, 7), heads=2), nodes=(12, 20),
                               fin=(5, 7)),
    "bipartite_edge": dict(kw=dict(in_channels=(5, 7), heads=4, edge_dim=3, concat=False),
                           nodes=(20, 12), fin=(5, 7), edge_dim=3),
    "bipartite_no_loops": dict(kw=dict(in_channels=(5, 7), heads=2, add_self_loops=False),
                               nodes=(20, 12), fin=(5, 7), isolated=2),
    "pair_shared_lin": dict(kw=dict(heads=2, residual=True), nodes=(20, 12), fin=(6, 6)),
    "tuple_module_one_tensor": dict(kw=dict(in_channels=(6, 6), heads=2), tensor_x=True),
    "share_weights": dict(layers=("v2",), kw=dict(heads=4, share_weights=True)),
    "share_weights_bipartite": dict(layers=("v2",), kw=dict(in_channels=(6, 6), heads=2,
                                    share_weights=True, edge_dim=2), nodes=(20, 12),
                                    fin=(6, 6), edge_dim=2),
    "v2_nobias": dict(layers=("v2",), kw=dict(heads=2, bias=False, residual=True)),
    "x_dst_none": dict(layers=("v1",), kw=dict(heads=2), nodes=(20, 20), fin=(6, 6),
                       x_dst_none=True),
    "x_dst_none_size": dict(layers=("v1",), kw=dict(heads=2), nodes=(20, 12), fin=(6, 6),
                            x_dst_none=True, size=(20, 12)),
    "size_given": dict(layers=("v1",), kw=dict(in_channels=(5, 7), heads=2, edge_dim=2),
                       nodes=(20, 12), fin=(5, 7), edge_dim=2, size=(20, 12)),
}

PAIRS = [(layer, name) for name, case in CASES.items()
         for layer in case.get("layers", ("v1", "v2"))]


def build_pair(layer, case, dtype, device, seed=0):
    kw = dict(case["kw"])
    in_channels = kw.pop("in_channels", 6)
    torch.manual_seed(seed)
    pyg = PYG[layer](in_channels, 5, **kw).to(device, dtype)
    ours = OURS[layer](in_channels, 5, **kw).to(device, dtype)
    ours.load_state_dict(pyg.state_dict(), strict=True)
    return pyg, ours


def make_inputs(case, dtype, device, seed=1):
    """x (a tensor or a pair), edge_index, edge_attr, size: leaves with requires_grad."""
    gen = torch.Generator().manual_seed(seed)
    nodes = case.get("nodes", 20)
    fin = case.get("fin", 6)
    no_loops = case["kw"].get("add_self_loops", True) is False

    def leaf(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device).requires_grad_()

    if isinstance(nodes, tuple):
        ns, nd = nodes
        x = (leaf(ns, fin[0]), None if case.get("x_dst_none") else leaf(nd, fin[1]))
    else:
        ns = nd = nodes
        x = leaf(nodes, fin)
    ei = random_edges(ns, nd, 3 * max(ns, nd), gen, isolated=case.get("isolated"))
    assert no_loops or case.get("isolated") is None
    ei = ei.to(device)
    edge_attr = None
    if case.get("edge_dim"):
        e = ei.size(1)
        # positive attributes keep 'mul' well conditioned; distinct values avoid min/max ties
        edge_attr = (torch.rand(e, case["edge_dim"], generator=gen, dtype=dtype) + 0.5)
        if case.get("edge_1d"):
            edge_attr = edge_attr.view(-1)
        edge_attr = edge_attr.to(device).requires_grad_()
    return x, ei, edge_attr, case.get("size")


def pair_and_inputs(layer, case, dtype, device):
    """build_pair's two layers, then make_inputs' x, edge_index, edge_attr, size."""
    pyg, ours = build_pair(layer, case, dtype, device)
    return pyg, ours, make_inputs(case, dtype, device)


def clone_leaves(x):
    if isinstance(x, tuple):
        return tuple(clone_leaves(t) for t in x)
    if x is None:
        return None
    return x.detach().clone().requires_grad_()


def leaves(x):
    if isinstance(x, tuple):
        return [t for item in x for t in leaves(item)]
    return [] if x is None else [x]


def call(layer_name, module, x, ei, ea, size, **kw):
    if layer_name == "v1":
        return module(x, ei, ea, size=size, **kw)
    assert size is None
    return module(x, ei, ea, **kw)


def run_both(layer, case, dtype, device):
    pyg, ours, (x, ei, ea, size) = pair_and_inputs(layer, case, dtype, device)
    x_o, ea_o = clone_leaves(x), clone_leaves(ea)
    out_p, (ei_p, a_p) = call(layer, pyg, x, ei, ea, size, return_attention_weights=True)
    out_o, (ei_o, a_o) = call(layer, ours, x_o, ei, ea_o, size, return_attention_weights=True)
    return pyg, ours, (x, ea, out_p, ei_p, a_p), (x_o, ea_o, out_o, ei_o, a_o)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("layer, name", PAIRS, ids=[f"{l}-{n}" for l, n in PAIRS])
def test_matches_pyg_outputs_attention_and_gradients(layer, name, dtype, device):
    case = CASES[name]
    pyg, ours, (x, ea, out_p, ei_p, a_p), (x_o, ea_o, out_o, ei_o, a_o) = run_both(
        layer, case, dtype, device)

    assert out_o.shape == out_p.shape and out_o.dtype == dtype
    assert_close(out_o, out_p, dtype, "output")
    assert torch.equal(ei_o.cpu(), ei_p.cpu()), "returned edge_index differs from PyG's"
    assert a_o.shape == a_p.shape
    rtol = 1e-5 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(a_o.detach(), a_p.detach(), rtol=rtol, atol=rtol * 0.1)

    # A non-uniform upstream gradient on the output, and one on alpha (PyG's alpha carries
    # autograd; so does ours while gradients are on).
    gen = torch.Generator().manual_seed(5)
    g_out = torch.randn(out_p.shape, generator=gen, dtype=dtype).to(device)
    g_alpha = torch.randn(a_p.shape, generator=gen, dtype=dtype).to(device)
    ((out_p * g_out).sum() + (a_p * g_alpha).sum()).backward()
    ((out_o * g_out).sum() + (a_o * g_alpha).sum()).backward()

    params_p = dict(pyg.named_parameters())
    params_o = dict(ours.named_parameters())
    assert params_p.keys() == params_o.keys()
    for key, p in params_p.items():
        q = params_o[key]
        if p.grad is None:  # unused by PyG too (att_dst without destination features)
            assert q.grad is None or torch.count_nonzero(q.grad) == 0, key
            continue
        assert q.grad is not None, key
        assert_close(q.grad, p.grad, dtype, f"grad of {key}")
    for i, (t_p, t_o) in enumerate(zip(leaves(x) + leaves(ea), leaves(x_o) + leaves(ea_o))):
        assert t_p.grad is not None and t_o.grad is not None, f"input {i}"
        assert_close(t_o.grad, t_p.grad, dtype, f"grad of input {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer, name", [("v1", "edge_mean"), ("v2", "bipartite_edge"),
                                         ("v1", "no_loops_isolated")])
def test_output_gradients_alone_match_pyg(layer, name, device):
    """Gradients through the output only (the fused backward alone, alpha not returned)."""
    dtype = torch.float32
    case = CASES[name]
    pyg, ours, (x, ei, ea, size) = pair_and_inputs(layer, case, dtype, device)
    x_o, ea_o = clone_leaves(x), clone_leaves(ea)
    out_p = call(layer, pyg, x, ei, ea, size)
    out_o = call(layer, ours, x_o, ei, ea_o, size)
    assert isinstance(out_o, torch.Tensor)
    g = torch.randn(out_p.shape, generator=torch.Generator().manual_seed(2)).to(device)
    (out_p * g).sum().backward()
    (out_o * g).sum().backward()
    assert_close(out_o, out_p, dtype, "output")
    for (key, p), q in zip(pyg.named_parameters(), ours.parameters()):
        assert_close(q.grad, p.grad, dtype, f"grad of {key}")
    for t_p, t_o in zip(leaves(x) + leaves(ea), leaves(x_o) + leaves(ea_o)):
        assert_close(t_o.grad, t_p.grad, dtype, "input grad")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer, name", [("v1", "edge_mean"), ("v2", "edge_mean"),
                                         ("v1", "bipartite"), ("v2", "share_weights")])
def test_attention_weights_without_autograd_come_from_the_operator(layer, name, device):
    """Under no_grad, alpha comes from ops.*_attention_weights; it equals PyG's."""
    dtype = torch.float32
    case = CASES[name]
    pyg, ours, (x, ei, ea, size) = pair_and_inputs(layer, case, dtype, device)
    with torch.no_grad():
        out_p, (ei_p, a_p) = call(layer, pyg, x, ei, ea, size, return_attention_weights=True)
        out_o, (ei_o, a_o) = call(layer, ours, x, ei, ea, size, return_attention_weights=True)
    assert torch.equal(ei_o, ei_p)
    torch.testing.assert_close(a_o, a_p, rtol=1e-5, atol=1e-6)
    assert_close(out_o, out_p, dtype, "output")
    # every destination's weights sum to one, per head
    sums = torch.zeros(out_o.size(0), a_o.size(1), device=device).index_add(0, ei_o[1], a_o)
    has_in = torch.zeros(out_o.size(0), dtype=torch.bool, device=device)
    has_in[ei_o[1]] = True
    torch.testing.assert_close(sums[has_in], torch.ones_like(sums[has_in]))


def test_return_attention_weights_false_returns_the_output_only():
    case = CASES["heads4"]
    for layer in ("v1", "v2"):
        _, ours, (x, ei, ea, size) = pair_and_inputs(layer, case, torch.float32, "cpu")
        assert isinstance(ours(x, ei, return_attention_weights=False), torch.Tensor)
        assert isinstance(ours(x, ei), torch.Tensor)


# ---- gradcheck, repeatability ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_gradcheck_f64_through_the_layer(layer, device):
    """torch.autograd.gradcheck in f64 of the output in the inputs and every parameter."""
    dtype = torch.float64
    torch.manual_seed(3)
    module = OURS[layer](4, 3, heads=2, edge_dim=2, residual=True).to(device, dtype)
    gen = torch.Generator().manual_seed(4)
    ei = random_edges(6, 6, 10, gen).to(device)
    x = torch.randn(6, 4, generator=gen, dtype=dtype).to(device).requires_grad_()
    ea = torch.randn(ei.size(1), 2, generator=gen, dtype=dtype).to(device).requires_grad_()
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in module.named_parameters()]

    def f(x, ea, *ps):
        return torch.func.functional_call(module, dict(zip(names, ps)), (x, ei, ea))

    assert torch.autograd.gradcheck(f, (x, ea, *params), eps=1e-6, atol=1e-7, rtol=1e-5)

    def weights(x, ea, *ps):  # the returned attention weights (torch formula while grad on)
        return torch.func.functional_call(module, dict(zip(names, ps)), (x, ei, ea),
                                          {"return_attention_weights": True})[1][1]

    assert torch.autograd.gradcheck(weights, (x, ea, *params), eps=1e-6, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_double_backward_is_refused_not_wrong(layer, device):
    """The fused operators have no second derivative. A second backward through gradients taken
    with create_graph=True raises, as torch's once_differentiable functions do; it returned
    wrong second derivatives before (PyG's differ by 76 % of their norm), silently. A first
    backward with create_graph=True, or without it, is unchanged."""
    torch.manual_seed(3)
    module = OURS[layer](4, 3, heads=2).to(device, torch.float64)
    ei = random_edges(6, 6, 10, torch.Generator().manual_seed(4)).to(device)
    x = torch.randn(6, 4, dtype=torch.float64, device=device, requires_grad=True)
    (grad,) = torch.autograd.grad(module(x, ei).pow(2).sum(), x, create_graph=True)
    plain = torch.autograd.grad(module(x, ei).pow(2).sum(), x)[0]
    assert torch.equal(grad.detach(), plain)
    with pytest.raises(RuntimeError, match="no second derivative"):
        grad.pow(2).sum().backward()
    (grad,) = torch.autograd.grad(module(x, ei).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.grad(grad.pow(2).sum(), x)  # runs only the nodes on paths to x
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.gradgradcheck(lambda x: module(x, ei), (x,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_two_runs_give_bitwise_equal_gradients(layer, device):
    case = CASES["edge_mean"]

    def once():
        _, ours, (x, ei, ea, size) = pair_and_inputs(layer, case, torch.float32, device)
        out, (_, alpha) = ours(x, ei, ea, return_attention_weights=True)
        gen = torch.Generator().manual_seed(9)
        g = torch.randn(out.shape, generator=gen).to(device)
        g_alpha = torch.randn(alpha.shape, generator=gen).to(device)  # alpha's autograd path
        ((out * g).sum() + (alpha * g_alpha).sum()).backward()
        return [out.detach(), alpha.detach(), x.grad, ea.grad] + \
            [p.grad for p in ours.parameters()]

    for a, b in zip(once(), once()):
        assert torch.equal(a, b)


# ---- the graph cache ----

def cached_layer(layer, name, device):
    """Our layer for CASES[name] and its inputs, x and edge_attr without gradient."""
    case = CASES[name]
    _, ours, (x, ei, ea, _) = pair_and_inputs(layer, case, torch.float32, device)
    return ours, x.detach(), ei, ea.detach()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_graph_cache_sees_in_place_changes_of_edge_index(layer, device):
    ours, x, ei, ea = cached_layer(layer, "edge_add", device)
    first = ours(x, ei, ea)
    graph = ours._edges.graph
    again = ours(x, ei, ea)
    assert ours._edges.graph is graph, "an unchanged edge_index rebuilt the graph"
    assert torch.equal(first, again)

    ei[1, :7] = torch.tensor([5, 5, 5, 6, 6, 0, 1], device=device)  # in place, same tensor
    changed = ours(x, ei, ea)
    assert ours._edges.graph is not graph
    fresh = copy.deepcopy(ours)
    assert fresh._edges is None  # deepcopy leaves the cache behind
    expected = fresh(x, ei.clone(), ea)
    assert torch.equal(changed, expected)
    assert not torch.allclose(changed, first)

    # a new edge_attr tensor is never served from the cache
    assert not torch.allclose(ours(x, ei, ea * 2), changed)
    # other node counts rebuild: one edge tensor, used with 20 then 18 destinations
    mask = ei[1] < 18
    ei18, ea18 = ei[:, mask].clone(), ea[mask]
    ours((x, x), ei18, ea18)
    before = ours._edges.graph
    assert before.num_dst_nodes == 20
    out18 = ours((x, x[:18]), ei18, ea18)
    assert ours._edges.graph is not before and ours._edges.graph.num_dst_nodes == 18
    assert out18.shape[0] == 18


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_a_constant_edge_attr_cached_with_the_graph_sees_in_place_changes(layer, device):
    ours, x, ei, ea = cached_layer(layer, "edge_mean", device)
    first = ours(x, ei, ea)
    assert ours._edges.attr_source is ea
    ea[:5] += 1.0  # in place, same tensor
    changed = ours(x, ei, ea)
    fresh = copy.deepcopy(ours)
    assert torch.equal(changed, fresh(x, ei, ea.clone()))
    assert not torch.allclose(changed, first)
    # the fill is part of the key: the loops' rows follow a new fill_value
    ours.fill_value = fresh.fill_value = 'max'
    assert torch.equal(ours(x, ei, ea), copy.deepcopy(fresh)(x, ei, ea))
    ours.fill_value = 'mean'
    # an edge_attr that needs a gradient is not cached, and gets its gradient
    ea_grad = ea.clone().requires_grad_()
    out = ours(x, ei, ea_grad)
    torch.testing.assert_close(out, changed, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    assert ea_grad.grad is not None and ea_grad.grad.abs().sum() > 0


# ---- state_dict, initialisation ----

@pytest.mark.parametrize("layer, name", PAIRS, ids=[f"{l}-{n}" for l, n in PAIRS])
def test_state_dict_round_trips_both_ways(layer, name):
    case = CASES[name]
    kw = dict(case["kw"])
    in_channels = kw.pop("in_channels", 6)
    pyg = PYG[layer](in_channels, 5, **kw)
    ours = OURS[layer](in_channels, 5, **kw)
    sd_p, sd_o = pyg.state_dict(), ours.state_dict()
    assert list(sd_p.keys()) == list(sd_o.keys())
    assert all(sd_p[k].shape == sd_o[k].shape for k in sd_p)
    ours.load_state_dict(sd_p, strict=True)
    assert all(torch.equal(ours.state_dict()[k], sd_p[k]) for k in sd_p)
    torch.manual_seed(11)
    ours.reset_parameters()
    pyg.load_state_dict(ours.state_dict(), strict=True)
    assert all(torch.equal(pyg.state_dict()[k], ours.state_dict()[k]) for k in sd_p)
    if layer == "v2" and kw.get("share_weights"):
        assert ours.lin_r is ours.lin_l


@pytest.mark.parametrize("layer, name", PAIRS, ids=[f"{l}-{n}" for l, n in PAIRS])
def test_seeded_construction_and_reset_give_pygs_parameters(layer, name):
    """The same initialisation scheme drawing the same random numbers: glorot weights and
    attention vectors, uniform Linear biases, zero bias."""
    case = CASES[name]
    kw = dict(case["kw"])
    in_channels = kw.pop("in_channels", 6)
    torch.manual_seed(21)
    pyg = PYG[layer](in_channels, 5, **kw)
    torch.manual_seed(21)
    ours = OURS[layer](in_channels, 5, **kw)
    for k, v in pyg.state_dict().items():
        assert torch.equal(ours.state_dict()[k], v), k
    torch.manual_seed(22)
    pyg.reset_parameters()
    torch.manual_seed(22)
    ours.reset_parameters()
    for k, v in pyg.state_dict().items():
        assert torch.equal(ours.state_dict()[k], v), k
    if ours.bias is not None:
        assert torch.count_nonzero(ours.bias) == 0


def test_attributes_and_repr_follow_pyg():
    for layer in ("v1", "v2"):
        pyg = PYG[layer]((5, 7), 4, heads=3, concat=False, edge_dim=2, dropout=0.1)
        ours = OURS[layer]((5, 7), 4, heads=3, concat=False, edge_dim=2, dropout=0.1)
        assert repr(ours) == repr(pyg)
        for attr in ("in_channels", "out_channels", "heads", "concat", "negative_slope",
                     "dropout", "add_self_loops", "edge_dim", "fill_value", "residual"):
            assert getattr(ours, attr) == getattr(pyg, attr), attr


def test_constructor_signatures_and_positional_arguments_are_pygs():
    """help() and inspect show PyG's constructor signatures (names, order, annotations,
    defaults); arguments given by position land where PyG's do; a bad call raises TypeError."""
    for layer in ("v1", "v2"):
        assert inspect.signature(OURS[layer]) == inspect.signature(PYG[layer])
    common = ((5, 7), 4, 3, False, 0.1, 0.25, False, 2, "max", False)
    for layer, own in (("v1", (True,)), ("v2", (True, True))):  # v2: share_weights, residual
        pyg, ours = PYG[layer](*common, *own), OURS[layer](*common, *own)
        for attr in ("in_channels", "out_channels", "heads", "concat", "negative_slope",
                     "dropout", "add_self_loops", "edge_dim", "fill_value", "residual",
                     "share_weights"):
            assert getattr(ours, attr, None) == getattr(pyg, attr, None), attr
        assert list(ours.state_dict()) == list(pyg.state_dict())  # no bias, a residual
    for cls in (GATConv, GATv2Conv):
        with pytest.raises(TypeError, match="out_channels"):
            cls(6)
        with pytest.raises(TypeError, match="multiple values for argument 'heads'"):
            cls(6, 4, 2, heads=2)


# ---- dropout ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_dropout_in_eval_mode_is_no_dropout(layer, device):
    case = dict(kw=dict(heads=4, dropout=0.6, edge_dim=3), edge_dim=3)
    pyg, ours, (x, ei, ea, _) = pair_and_inputs(layer, case, torch.float32, device)
    nodrop = copy.deepcopy(ours)
    nodrop.dropout = 0.0
    ours.eval()
    pyg.eval()
    with torch.no_grad():
        out = ours(x, ei, ea)
        assert torch.equal(out, nodrop(x, ei, ea))
        assert_close(out, pyg(x, ei, ea), torch.float32, "eval output")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_dropout_in_training_follows_torch_manual_seed(layer, device):
    case = dict(kw=dict(heads=4, dropout=0.5), nodes=30)
    _, ours = build_pair(layer, case, torch.float32, device)
    ours.train()
    x, ei, _, _ = make_inputs(case, torch.float32, device)

    def once(seed):
        torch.manual_seed(seed)
        xx = x.detach().clone().requires_grad_()
        out = ours(xx, ei)
        out.square().sum().backward()
        grads = [xx.grad.clone()] + [p.grad.clone() for p in ours.parameters()]
        ours.zero_grad()
        return out.detach(), grads

    out_a, grads_a = once(1)
    out_b, grads_b = once(1)
    assert torch.equal(out_a, out_b)
    assert all(torch.equal(a, b) for a, b in zip(grads_a, grads_b))
    out_c, _ = once(2)
    assert not torch.equal(out_a, out_c)
    ours.eval()
    with torch.no_grad():
        out_eval = ours(x, ei)
    assert not torch.equal(out_a, out_eval)
    assert torch.isfinite(out_a).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_torch_compile_fullgraph_of_a_training_step_on_a_graph(layer, device):
    """With a gat_torch.Graph (a COO edge_index is looked up in the layer's cache, which Dynamo
    cannot trace), a training forward with attention dropout compiles as one graph and gives
    the eager output and gradients, masks included."""
    case = dict(kw=dict(heads=2, dropout=0.5), nodes=25)
    _, ours = build_pair(layer, case, torch.float32, device)
    ours.train()
    x, ei, _, _ = make_inputs(case, torch.float32, device)
    graph = ops.Graph.build(ei[0], ei[1], 25, 25)

    def step(x):
        return ours(x, graph).square().sum()

    results = []
    for run in (step, torch.compile(step, fullgraph=True, backend="aot_eager")):
        torch.manual_seed(4)
        xx = x.detach().clone().requires_grad_()
        loss = run(xx)
        results.append([loss] + list(torch.autograd.grad(loss, [xx] + list(ours.parameters()))))
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


# ---- edge_index forms ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_edge_index_as_int32_and_as_edge_index(layer, device):
    from torch_geometric import EdgeIndex
    case = CASES["edge_mean"]
    pyg, ours, (x, ei, ea, _) = pair_and_inputs(layer, case, torch.float32, device)
    with torch.no_grad():
        expected, (ei_p, a_p) = pyg(x, ei, ea, return_attention_weights=True)
        out32, (ei32, a32) = ours(x, ei.int(), ea, return_attention_weights=True)
        assert_close(out32, expected, torch.float32, "int32 edge_index")
        assert torch.equal(ei32.long(), ei_p)
        typed = EdgeIndex(ei, sparse_size=(20, 20))
        assert_close(ours(x, typed, ea), expected, torch.float32, "EdgeIndex")
        assert_close(ours(x, EdgeIndex(ei), ea), expected, torch.float32, "EdgeIndex")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", ["v1", "v2"])
def test_a_prebuilt_graph_is_used_as_given(layer, device):
    """A Graph: no self-loop handling; edge_attr and the weights in Graph.build's order."""
    case = CASES["no_loops_edge"]
    pyg, ours, (x, ei, ea, _) = pair_and_inputs(layer, case, torch.float32, device)
    x_o, ea_o = clone_leaves(x), clone_leaves(ea)
    graph = ops.Graph.build(ei[0], ei[1], 20, 20)
    out_p, (_, a_p) = pyg(x, ei, ea, return_attention_weights=True)
    ours.add_self_loops = True  # ignored for a Graph
    out_o, (ei_o, a_o) = ours(x_o, graph, ea_o, return_attention_weights=True)
    assert torch.equal(ei_o, ei)
    assert_close(out_o, out_p, torch.float32, "output")
    torch.testing.assert_close(a_o.detach(), a_p.detach(), rtol=1e-5, atol=1e-6)
    g = torch.randn(out_p.shape, generator=torch.Generator().manual_seed(1)).to(device)
    (out_p * g).sum().backward()
    (out_o * g).sum().backward()
    assert_close(x_o.grad, x.grad, torch.float32, "x grad")
    assert_close(ea_o.grad, ea.grad, torch.float32, "edge_attr grad")
    with pytest.raises(ValueError, match="source"):
        ours(x_o[:10], graph, ea_o)


def test_refused_inputs_raise_clear_errors():
    x = torch.randn(5, 6)
    ei = torch.tensor([[0, 1, 2], [1, 2, 3]])
    for cls in (GATConv, GATv2Conv):
        with pytest.raises(ValueError, match="lazy"):
            cls(-1, 4)
        with pytest.raises(ValueError, match="lazy"):
            cls((-1, 6), 4)
        with pytest.raises(NotImplementedError, match="aggr"):
            cls(6, 4, aggr="mean")
        with pytest.raises(NotImplementedError, match="flow"):
            cls(6, 4, flow="target_to_source")
        with pytest.raises(TypeError, match="unexpected keyword"):
            cls(6, 4, no_such_argument=1)
        cls(6, 4, aggr="add", decomposed_layers=2)  # harmless ones are accepted
        layer = cls(6, 4)
        adj = torch.sparse_coo_tensor(ei, torch.ones(3), (5, 5))
        with pytest.raises(NotImplementedError, match="sparse adjacency"):
            layer(x, adj)
        with pytest.raises(ValueError, match="integer"):
            layer(x, ei.float())
        with pytest.raises(ValueError, match=r"\(2, E\)"):
            layer(x, ei[0])
        with pytest.raises(ValueError, match="rows"):
            cls(6, 4, edge_dim=2)(x, ei, torch.randn(4, 2))
    with pytest.raises(ValueError, match="edge_dim"):
        GATv2Conv(6, 4)(x, ei, torch.randn(3, 2))
    with pytest.raises(ValueError, match="x\\[1\\] is None"):
        GATv2Conv(6, 4)((x, None), ei)
    with pytest.raises(ValueError, match="expected size"):
        GATConv(6, 4)(x, ei, size=(4, 5))
    # An attention dropout rate outside [0, 1], or NaN, is refused as PyG's F.dropout refuses it,
    # in training and eval; it was taken as no dropout.
    for cls in (GATConv, GATv2Conv):
        for rate in (-0.5, float("nan"), 1.5):
            for training in (True, False):
                with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
                    cls(6, 4, dropout=rate).train(training)(x, ei)


def test_layers_train_in_a_small_model():
    """Two layers, Adam, a few steps: the loss goes down (the layers compose and learn)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    ei = random_edges(40, 40, 160, gen)
    x = torch.randn(40, 8, generator=gen)
    y = torch.randint(0, 3, (40,), generator=gen)
    for cls in (GATConv, GATv2Conv):
        l1, l2 = cls(8, 8, heads=4, dropout=0.2), cls(32, 3, heads=1, concat=False)
        opt = torch.optim.Adam(list(l1.parameters()) + list(l2.parameters()), lr=0.01)
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(l2(torch.relu(l1(x, ei)), ei), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < 0.8 * losses[0]
