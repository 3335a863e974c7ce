"""The fused GAT kernels as PyTorch operators, and the graph they run on.

torch.ops.gat_torch.* (python/csrc/ops.cpp) are the raw operators, CPU and CUDA; this module
registers their autograd formulas (each backward is an operator of its own) and their fake
implementations (shapes only, for torch.compile), and wraps them in plain functions:

    graph = Graph.build(src, dst, num_src, num_dst)            # CSR by destination, on src's device
    out = gat_attention(graph, el, er, value, 0.2)             # (Nd, H, F), differentiable
    out = gatv2_attention(graph, xl, xr, att, 0.2)             # (Nd, H, F), differentiable
    alpha = gat_attention_weights(graph, el, er, 0.2)          # (E, H) in the graph's edge order

Per-edge tensors (edge_term, the weights) are in the graph's edge order: edge k of the graph is
input edge graph.perm[k].
"""
import functools
import numbers
from typing import List, Optional

import torch

_ops = torch.ops.gat_torch


def _once_differentiable(op: str):
    """A backward formula whose own gradient is not implemented (each backward is an operator
    without an autograd formula), marked as torch.autograd.function.once_differentiable marks
    one: under create_graph=True its gradients come back attached to a node that raises when a
    second backward reaches it. Without this, that second backward took them as constants and
    returned wrong second derivatives (a gradient penalty through the layer, gradgradcheck)
    without a word. torch's decorator cannot be used as is: the graph's gradients are a list."""
    message = (f"gat_torch.{op} has no second derivative (its backward is not differentiable): "
               f"double backward, e.g. autograd.grad(create_graph=True) then backward through "
               f"those gradients, is not supported").encode()

    def decorate(backward):
        @functools.wraps(backward)
        def once(ctx, *grads):
            with torch.no_grad():
                outputs = backward(ctx, *grads)
            if not torch.is_grad_enabled():
                return outputs
            outputs = list(outputs)
            at = [k for k, o in enumerate(outputs) if isinstance(o, torch.Tensor)]
            if not at:
                return tuple(outputs)
            fakes = []
            for k in at:
                fake = outputs[k].detach()
                fake.requires_grad = True
                fakes.append(fake)
            # The node's inputs also include what the gradients depend on (the incoming
            # gradients and the saved tensors that require grad), so that it lies on the path
            # from them to the inputs: torch.autograd.grad(g, x) only runs nodes on such paths,
            # and found second derivatives of zero through the detached copies alone.
            sources = [t for t in (*grads, *ctx.saved_tensors)
                       if isinstance(t, torch.Tensor) and t.requires_grad]
            wrapped = torch._C._functions.DelayedError(message, len(fakes) + len(sources))(
                *fakes, *sources)
            if isinstance(wrapped, torch.Tensor):
                wrapped = (wrapped,)
            for k, w in zip(at, wrapped):
                outputs[k] = w
            return tuple(outputs)
        return once
    return decorate


class Graph:
    """A graph in CSR form by destination with its transpose and the kernels' plans.

    Built once by Graph.build on the device of its edge list (a stable sort: duplicate edges and
    self loops are kept as listed), then passed to every call. Its arrays are int32 tensors on
    that device (gat::Graph's, python/csrc/ops.cpp), `counts` five integers. The operators trust
    them, so Graph(arrays, counts, perm) checks what it is given first (gat::Graph::validate on
    host copies: sizes, dtypes, devices, row pointers, indices, the transpose, the plans and
    counts, perm a permutation; RuntimeError naming the first fault), and an in-place change of
    an array after that is refused at the next call.
    """

    __slots__ = ("_arrays", "_counts", "_perm", "_versions")

    def __init__(self, arrays: List[torch.Tensor], counts: List[int], perm: torch.Tensor):
        arrays, counts = list(arrays), list(counts)
        # What the dispatcher needs before validate_graph runs: tensors (a list of lists failed
        # in pybind11 naming type '?'), integer counts, and one CPU or CUDA device (an array on
        # 'meta' sent the check to its fake implementation, which passed it).
        if not all(isinstance(t, torch.Tensor) for t in arrays + [perm]):
            raise TypeError("gat_torch.Graph: arrays must be 12 tensors and perm a tensor, got "
                            f"{[type(t).__name__ for t in arrays]} and {type(perm).__name__}")
        if not all(isinstance(c, numbers.Integral) and not isinstance(c, bool) and -2**63 <= c < 2**63
                   for c in counts):
            raise TypeError(f"gat_torch.Graph: counts must be five int64 integers, got {counts}")
        devices = {t.device for t in arrays + [perm]}
        if len(devices) != 1 or next(iter(devices)).type not in ("cpu", "cuda"):
            raise RuntimeError("gat_torch.Graph: the arrays and perm must be on one device, cpu or "
                               f"cuda, got {sorted(str(d) for d in devices)}")
        counts = [int(c) for c in counts]
        _ops.validate_graph(arrays, counts, perm)
        self._take(arrays, counts, perm)

    def _take(self, arrays: List[torch.Tensor], counts: List[int], perm: torch.Tensor) -> None:
        # Kept as tuples behind read-only properties that hand out new lists: graph.counts[0] = 99
        # or graph.arrays = [...] changed what was checked without moving any tensor's _version.
        self._arrays = tuple(arrays)
        self._counts = tuple(counts)
        self._perm = perm
        self._versions = tuple(a._version for a in arrays)

    @property
    def arrays(self) -> List[torch.Tensor]:
        """The twelve int32 arrays (gat::Graph's, in GraphArrays' order): a new list each time."""
        return list(self._arrays)

    @property
    def counts(self) -> List[int]:
        """max in-degree, max out-degree, chunk edges, self loops, one self loop per node (0/1):
        a new list each time."""
        return list(self._counts)

    @property
    def perm(self) -> torch.Tensor:
        """(E,) int64: graph edge k is input edge perm[k]."""
        return self._perm

    def _checked_arrays(self) -> List[torch.Tensor]:
        """The arrays for the operators, which trust them (as gat::Graph::from_arrays does):
        an in-place change since the graph was made (graph.arrays[0][1] = 100) read memory
        out of bounds and crashed the process. A tensor's _version counts in-place changes, so
        checking costs no device work; torch.compile's traced graphs skip it."""
        if not torch.compiler.is_compiling():
            for k, (a, v) in enumerate(zip(self._arrays, self._versions)):
                if a._version != v:
                    raise RuntimeError(
                        f"gat_torch.Graph: its array {k} was changed in place after the graph "
                        f"was made; the kernels trust its arrays, so build it again "
                        f"(Graph.build)")
        return self.arrays

    @staticmethod
    def build(src: torch.Tensor, dst: torch.Tensor, num_src: int, num_dst: int) -> "Graph":
        """The graph of the edges src[k] -> dst[k], sources in [0, num_src), destinations in
        [0, num_dst); out-of-range indices raise RuntimeError naming them."""
        out = _ops.build_graph(src, dst, int(num_src), int(num_dst))
        graph = Graph.__new__(Graph)  # build_graph's arrays need no check
        graph._take(list(out[:12]), out[13].tolist(), out[12])
        return graph

    @property
    def num_dst_nodes(self) -> int:
        return self.arrays[0].shape[0] - 1

    @property
    def num_src_nodes(self) -> int:
        return self.arrays[3].shape[0] - 1

    @property
    def num_edges(self) -> int:
        return self.arrays[1].shape[0]

    @property
    def device(self) -> torch.device:
        return self.arrays[0].device

    @property
    def src(self) -> torch.Tensor:
        """(E,) int64: the source of each edge, in the graph's edge order."""
        return self.arrays[1].long()

    @property
    def dst(self) -> torch.Tensor:
        """(E,) int64: the destination of each edge, in the graph's edge order."""
        return self.arrays[2].long()


def _seed(dropout: float) -> Optional[torch.Tensor]:
    """A dropout seed drawn from PyTorch's default CPU generator (torch.manual_seed fixes it), as
    a one-element CPU tensor: torch.compile traces the draw, and the operator reads it without a
    device synchronisation. None without dropout."""
    if dropout <= 0.0:
        return None
    return torch.randint(0, 2**62, (), dtype=torch.int64)


# A backward's gradient of the graph argument: one None per array (PyTorch wants the inputs'
# structure back).
_NO_GRAPH_GRADS = [None] * 12


# ---- GAT ----

def gat_attention(graph: Graph, el: torch.Tensor, er: torch.Tensor, value: torch.Tensor,
                  negative_slope: float = 0.2, edge_term: Optional[torch.Tensor] = None,
                  dropout: float = 0.0) -> torch.Tensor:
    """GAT's attention over the graph, fused: for every destination i and head h,
    out[i,h] = sum_e a[e,h] value[src(e),h], a = softmax over i's in-edges of
    LeakyReLU(el[src(e),h] + er[i,h] (+ edge_term[e,h])), with attention dropout `dropout`.

    el (Ns, H), er (Nd, H), value (Ns, H, F), edge_term (E, H) or None; float32 or float64, one
    device -> (Nd, H, F); zero rows for destinations without in-edges. Differentiable in el, er,
    edge_term and value.
    """
    with_positive = er.requires_grad and er.is_cuda
    out, _, _, _ = _ops.gat_attention(graph._checked_arrays(), graph.counts, el, er, edge_term, value,
                                      float(negative_slope), float(dropout), _seed(dropout),
                                      with_positive)
    return out


def _gat_setup(ctx, inputs, output):
    arrays, counts, el, er, edge_term, value, slope, dropout, seed, _ = inputs
    out, lse, pos_out, pos_weight = output
    ctx.graph = (arrays, counts)
    ctx.scalars = (slope, dropout, seed)
    ctx.save_for_backward(el, er, edge_term, value, out, lse, pos_out, pos_weight)


@_once_differentiable("gat_attention")
def _gat_backward(ctx, grad_out, *_unused):
    el, er, edge_term, value, out, lse, pos_out, pos_weight = ctx.saved_tensors
    needs = ctx.needs_input_grad
    wanted = [needs[2], needs[3], needs[4], needs[5]]
    if grad_out is None or not any(wanted):
        return (_NO_GRAPH_GRADS,) + (None,) * 9
    grads = _ops.gat_attention_backward(*ctx.graph, el, er, edge_term, value, *ctx.scalars, out,
                                        lse, pos_out, pos_weight, grad_out.contiguous(), wanted)
    d_el, d_er, d_term, d_value = (g if w else None for g, w in zip(grads, wanted))
    return _NO_GRAPH_GRADS, None, d_el, d_er, d_term, d_value, None, None, None, None


torch.library.register_autograd("gat_torch::gat_attention", _gat_backward, setup_context=_gat_setup)


@torch.library.register_fake("gat_torch::gat_attention")
def _(arrays, counts, el, er, edge_term, value, negative_slope, dropout, seed, with_positive):
    nd, h, f = arrays[0].shape[0] - 1, el.shape[1], value.shape[2]
    positive = with_positive and value.device.type == "cuda"
    return (value.new_empty((nd, h, f)), value.new_empty((nd, h)),
            value.new_empty((nd, h, f) if positive else (0,)),
            value.new_empty((nd, h) if positive else (0,)))


@torch.library.register_fake("gat_torch::gat_attention_backward")
def _(arrays, counts, el, er, edge_term, value, negative_slope, dropout, seed, out, lse, pos_out,
      pos_weight, grad_out, needs):
    def grad(need, like):
        return like.new_empty(like.shape if need else (0,))
    return (grad(needs[0], el), grad(needs[1], er),
            grad(needs[2] and edge_term is not None, edge_term if edge_term is not None else el),
            grad(needs[3], value))


def gat_attention_weights(graph: Graph, el: torch.Tensor, er: torch.Tensor,
                          negative_slope: float = 0.2,
                          edge_term: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The softmax weights (E, H) of gat_attention, in the graph's edge order, without dropout
    and without autograd (for inspection)."""
    with torch.no_grad():
        scores = _ops.gat_edge_scores(graph._checked_arrays(), graph.counts, el, er, edge_term,
                                      float(negative_slope))
        return _ops.csr_softmax(graph._checked_arrays(), graph.counts, scores)


@torch.library.register_fake("gat_torch::gat_edge_scores")
def _(arrays, counts, el, er, edge_term, negative_slope):
    return el.new_empty((arrays[1].shape[0], el.shape[1]))


@torch.library.register_fake("gat_torch::csr_softmax")
def _(arrays, counts, scores):
    return torch.empty_like(scores)


# ---- GAT's attention terms ----

def head_dot_pair(x: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor):
    """GAT's el and er from one projection, x read once: x (N, H, F), a_src and a_dst (H, F) ->
    el, er (N, H), el[n,h] = sum_f x[n,h,f] a_src[h,f] (er likewise). Differentiable in all
    three; the gradients of a_src and a_dst sum over the nodes in a fixed order (bitwise
    reproducible)."""
    return _ops.head_dot_pair(x, a_src, a_dst)


def _head_dot_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


@_once_differentiable("head_dot_pair")
def _head_dot_backward(ctx, grad_el, grad_er):
    x, a_src, a_dst = ctx.saved_tensors
    grad_el = x.new_zeros(x.shape[:2]) if grad_el is None else grad_el.contiguous()
    grad_er = x.new_zeros(x.shape[:2]) if grad_er is None else grad_er.contiguous()
    return _ops.head_dot_pair_backward(x, a_src, a_dst, grad_el, grad_er)


torch.library.register_autograd("gat_torch::head_dot_pair", _head_dot_backward,
                                setup_context=_head_dot_setup)


@torch.library.register_fake("gat_torch::head_dot_pair")
def _(x, a_src, a_dst):
    return x.new_empty(x.shape[:2]), x.new_empty(x.shape[:2])


@torch.library.register_fake("gat_torch::head_dot_pair_backward")
def _(x, a_src, a_dst, grad_el, grad_er):
    return torch.empty_like(x), torch.empty_like(a_src), torch.empty_like(a_dst)


# ---- GATv2 ----

def gatv2_attention(graph: Graph, xl: torch.Tensor, xr: torch.Tensor, att: torch.Tensor,
                    negative_slope: float = 0.2, edge_term: Optional[torch.Tensor] = None,
                    dropout: float = 0.0) -> torch.Tensor:
    """GATv2's attention over the graph, fused (Brody et al. 2022; PyG's GATv2Conv message):
    s[e,h] = sum_f att[h,f] LeakyReLU(xl[src(e),h,f] + xr[i,h,f] (+ edge_term[e,h,f])),
    out[i,h] = sum_e softmax(s)[e,h] xl[src(e),h], with attention dropout `dropout`.

    xl (Ns, H, F), xr (Nd, H, F), att (H, F), edge_term (E, H, F) or None -> (Nd, H, F).
    Differentiable in xl, xr, att and edge_term.
    """
    out, _ = _ops.gatv2_attention(graph._checked_arrays(), graph.counts, xl, xr, att, edge_term,
                                  float(negative_slope), float(dropout), _seed(dropout))
    return out


def _gatv2_setup(ctx, inputs, output):
    arrays, counts, xl, xr, att, edge_term, slope, dropout, seed = inputs
    out, lse = output
    ctx.graph = (arrays, counts)
    ctx.scalars = (slope, dropout, seed)
    ctx.save_for_backward(xl, xr, att, edge_term, out, lse)


@_once_differentiable("gatv2_attention")
def _gatv2_backward(ctx, grad_out, *_unused):
    xl, xr, att, edge_term, out, lse = ctx.saved_tensors
    needs = ctx.needs_input_grad
    wanted = [needs[2], needs[3], needs[4], needs[5]]
    if grad_out is None or not any(wanted):
        return (_NO_GRAPH_GRADS,) + (None,) * 8
    grads = _ops.gatv2_attention_backward(*ctx.graph, xl, xr, att, edge_term, *ctx.scalars, out,
                                          lse, grad_out.contiguous(), wanted)
    d_xl, d_xr, d_att, d_term = (g if w else None for g, w in zip(grads, wanted))
    return _NO_GRAPH_GRADS, None, d_xl, d_xr, d_att, d_term, None, None, None


torch.library.register_autograd("gat_torch::gatv2_attention", _gatv2_backward,
                                setup_context=_gatv2_setup)


@torch.library.register_fake("gat_torch::gatv2_attention")
def _(arrays, counts, xl, xr, att, edge_term, negative_slope, dropout, seed):
    nd, h, f = arrays[0].shape[0] - 1, xl.shape[1], xl.shape[2]
    return xl.new_empty((nd, h, f)), xl.new_empty((nd, h))


@torch.library.register_fake("gat_torch::gatv2_attention_backward")
def _(arrays, counts, xl, xr, att, edge_term, negative_slope, dropout, seed, out, lse, grad_out,
      needs):
    def grad(need, like):
        return like.new_empty(like.shape if need else (0,))
    return (grad(needs[0], xl), grad(needs[1], xr), grad(needs[2], att),
            grad(needs[3] and edge_term is not None, edge_term if edge_term is not None else xl))


def gatv2_attention_weights(graph: Graph, xl: torch.Tensor, xr: torch.Tensor, att: torch.Tensor,
                            negative_slope: float = 0.2,
                            edge_term: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The softmax weights (E, H) of gatv2_attention, in the graph's edge order, without dropout
    and without autograd (for inspection)."""
    with torch.no_grad():
        scores = _ops.gatv2_edge_scores(graph._checked_arrays(), graph.counts, xl, xr, att, edge_term,
                                        float(negative_slope))
        return _ops.csr_softmax(graph._checked_arrays(), graph.counts, scores)


@torch.library.register_fake("gat_torch::gatv2_edge_scores")
def _(arrays, counts, xl, xr, att, edge_term, negative_slope):
    return xl.new_empty((arrays[1].shape[0], xl.shape[1]))


@torch.library.register_fake("gat_torch::validate_graph")
def _(arrays, counts, perm):
    return None


@torch.library.register_fake("gat_torch::build_graph")
def _(src, dst, num_src, num_dst):
    ctx = torch.library.get_ctx()
    e = src.shape[0]

    def ints(n):
        return src.new_empty((n,), dtype=torch.int32)
    return [ints(num_dst + 1), ints(e), ints(e), ints(num_src + 1), ints(e), ints(e),
            ints(num_dst + 1), ints(num_src + 1), ints(ctx.new_dynamic_size()),
            ints(ctx.new_dynamic_size()), ints(ctx.new_dynamic_size()),
            ints(ctx.new_dynamic_size()), src.new_empty((e,), dtype=torch.int64),
            torch.empty((5,), dtype=torch.int64)]
