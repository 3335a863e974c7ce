"""Drop-in replacements for ``torch_geometric.nn.GATConv`` and ``GATv2Conv`` (PyG 2.8).

:class:`GATConv` and :class:`GATv2Conv` take the constructor arguments of PyG's layers, with
the same defaults, hold the same parameters and submodules under the same names and shapes
(``ours.load_state_dict(pyg.state_dict(), strict=True)`` works both ways), initialise them
with the same scheme (glorot weights, zero bias; a seeded construction gives the same values
as PyG's), and have PyG's ``forward`` signature.  The attention and the neighbourhood sum run
in one fused operator of :mod:`gat_torch.ops` over a CSR-by-destination graph, built once
and cached per layer; the projections, the edge-feature terms, the residual and the bias are
plain PyTorch.  Nothing here imports torch_geometric.

``edge_index`` may be

* a COO integer tensor ``(2, E)`` (``edge_index[0]`` the sources, ``edge_index[1]`` the
  destinations), or torch_geometric's ``EdgeIndex`` (read as its plain tensor). Self loops
  are handled as PyG does when ``add_self_loops=True``: the graph's own self loops are
  removed and one loop ``(i, i)`` is added for every ``i < min(num_src, num_dst)``; the
  loops' edge features come from ``fill_value``. Duplicate edges are kept, each one counting
  in the softmax, as in PyG.
* a :class:`gat_torch.ops.Graph` built by the caller (``Graph.build(src, dst, num_src,
  num_dst)``): it is used as it is, without any self-loop handling (add the loops yourself
  before building it); ``edge_attr``, if given, has one row per edge in the order the edges
  were given to ``Graph.build``, and the returned attention weights use that order too.

Sparse adjacency inputs (``torch_sparse.SparseTensor``, ``torch.sparse`` tensors) are
refused; pass ``edge_index`` in COO form.

The built graph is cached per layer (one entry) under a key made of the edge tensor's
``data_ptr``, its ``_version`` (an in-place change bumps it), its shape, strides, dtype and
device, the node counts and the self-loop setting; the layer keeps a reference to the tensor,
so its memory cannot be reused by another while the entry lives.  ``edge_attr`` is
recomputed on every call.

Differences from PyG:

* ``in_channels=-1`` (lazy initialisation) is refused.
* ``aggr`` other than ``'add'``/``'sum'`` and ``flow='target_to_source'`` are refused.
* With ``return_attention_weights=True`` in training mode with ``dropout > 0``, the returned
  weights are the softmax weights *before* dropout (PyG returns them after dropout; the
  output itself uses dropped weights in both).
* With ``fill_value`` a reduction string and a bipartite graph with more destination nodes
  than source nodes, PyG fails (the scatter's index is out of range); here the loop
  attributes are reduced over the in-edges of the nodes that get a loop.
* Only float32 and float64 are supported (the fused operators' dtypes).
"""
import functools
import inspect
import math
import types
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from . import ops as _ops

__all__ = ['GATConv', 'GATv2Conv']


# ---- initialisation, as torch_geometric.nn.inits / dense.Linear ----

def _glorot(value: Optional[Tensor]) -> None:
    if value is not None:
        stdv = math.sqrt(6.0 / (value.size(-2) + value.size(-1)))
        value.data.uniform_(-stdv, stdv)


def _zeros(value: Optional[Tensor]) -> None:
    if value is not None:
        value.data.fill_(0.0)


def _check_channels(in_channels: int, what: str) -> int:
    if not isinstance(in_channels, int) or isinstance(in_channels, bool):
        raise TypeError(f"{what} must be an int (got {in_channels!r})")
    if in_channels <= 0:
        raise ValueError(
            f"{what}={in_channels}: lazy initialisation (in_channels=-1) is not supported by "
            f"gat_torch; give the input feature size")
    return in_channels


def _linear(in_channels: int, out_channels: int, bias: bool, what: str) -> torch.nn.Linear:
    """A torch.nn.Linear with PyG's Linear's parameter names and shapes (weight (out, in),
    bias (out,)).  Its construction draws from the random generator as PyG's Linear does
    (one uniform_ over the weight, one over the bias), so seeded constructions agree."""
    return torch.nn.Linear(_check_channels(in_channels, what), out_channels, bias=bias)


def _reset_linear(lin: torch.nn.Linear) -> None:
    """PyG's Linear(..., weight_initializer='glorot', bias_initializer=None).reset_parameters:
    glorot weight, bias uniform in +-1/sqrt(in_channels)."""
    _glorot(lin.weight)
    if lin.bias is not None:
        bound = 1.0 / math.sqrt(lin.in_features)
        lin.bias.data.uniform_(-bound, bound)


def _check_kwargs(kwargs: dict, cls: str) -> None:
    """The MessagePassing keyword arguments that change nothing here are accepted; the ones
    that would change the layer's meaning are refused, unknown ones raise as in PyG."""
    for key, value in kwargs.items():
        if key == 'aggr':
            if value not in ('add', 'sum'):
                raise NotImplementedError(
                    f"{cls}: aggr={value!r} is not supported by gat_torch (only 'add')")
        elif key == 'aggr_kwargs':
            if value:
                raise NotImplementedError(f"{cls}: aggr_kwargs are not supported by gat_torch")
        elif key == 'flow':
            if value != 'source_to_target':
                raise NotImplementedError(
                    f"{cls}: flow={value!r} is not supported by gat_torch (only "
                    f"'source_to_target'; transpose edge_index instead)")
        elif key == 'decomposed_layers':
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{cls}: decomposed_layers must be a positive int")
        else:
            raise TypeError(f"{cls}.__init__() got an unexpected keyword argument '{key}'")


# ---- the constructor arguments, as PyG's ----

def _argument(name: str, annotation, default=inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                             annotation=annotation)


def _pyg_arguments(*own: inspect.Parameter):
    """Decorates a layer's __init__(self, args) to take PyG's constructor arguments: those both
    layers take, in PyG's order, with the layer's `own` ones before residual (GATv2Conv's
    share_weights), then **kwargs. help() and inspect show that signature; a call binds to it
    as to a written one, and the __init__ gets the arguments, defaults filled in, as attributes
    of args (args.kwargs: the other keyword arguments)."""
    signature = inspect.Signature([
        inspect.Parameter('self', inspect.Parameter.POSITIONAL_OR_KEYWORD),
        _argument('in_channels', Union[int, Tuple[int, int]]),
        _argument('out_channels', int),
        _argument('heads', int, 1),
        _argument('concat', bool, True),
        _argument('negative_slope', float, 0.2),
        _argument('dropout', float, 0.0),
        _argument('add_self_loops', bool, True),
        _argument('edge_dim', Optional[int], None),
        _argument('fill_value', Union[float, Tensor, str], 'mean'),
        _argument('bias', bool, True),
        *own,
        _argument('residual', bool, False),
        inspect.Parameter('kwargs', inspect.Parameter.VAR_KEYWORD),
    ])

    def decorate(init):
        @functools.wraps(init)
        def __init__(self, *positional, **keywords):
            bound = signature.bind(self, *positional, **keywords)
            bound.apply_defaults()
            del bound.arguments['self']
            init(self, types.SimpleNamespace(**bound.arguments))

        __init__.__signature__ = signature
        return __init__

    return decorate


# ---- edges: PyG's remove_self_loops / add_self_loops, the cached graph ----

def _is_sparse_adjacency(edge_index) -> bool:
    if type(edge_index).__name__ == 'SparseTensor':
        return True
    return isinstance(edge_index, Tensor) and edge_index.layout != torch.strided


def _loop_attr(edges: '_Edges', edge_attr: Tensor, fill_value) -> Tensor:
    """torch_geometric.utils.loop.compute_loop_attr for COO inputs: the edge features of the
    self loops of nodes 0..edges.num_loops-1, from the in-edges edges.loop_dst of the loop-free
    graph. Sums and products run over each node's in-edges in edge order (segment_reduce, no
    atomics), so that they are bitwise reproducible on CUDA, where scatter_add's are not."""
    num_nodes = edges.num_loops
    size = (num_nodes, ) + tuple(edge_attr.shape[1:])
    if fill_value is None:
        return edge_attr.new_ones(size)
    if isinstance(fill_value, (int, float)):
        return edge_attr.new_full(size, fill_value)
    if isinstance(fill_value, Tensor):
        loop_attr = fill_value.to(edge_attr.device, edge_attr.dtype)
        if edge_attr.dim() != loop_attr.dim():
            loop_attr = loop_attr.unsqueeze(0)
        return loop_attr.expand(size).contiguous()
    if isinstance(fill_value, str):
        dst = edges.loop_dst
        if fill_value in ('sum', 'add', 'mean', 'mul'):
            order, counts = edges.loop_segments()
            reduce = 'prod' if fill_value == 'mul' else 'sum'
            out = torch.segment_reduce(edge_attr.index_select(0, order), reduce, lengths=counts, axis=0,
                                       unsafe=True)
            if fill_value == 'mean':
                count = counts.clamp(min=1).to(edge_attr.dtype)
                out = out / count.view((-1, ) + (1, ) * (edge_attr.dim() - 1))
            return out
        index = dst.view((-1, ) + (1, ) * (edge_attr.dim() - 1)).expand_as(edge_attr)
        if fill_value in ('min', 'max', 'amin', 'amax'):  # exact in any order: deterministic
            return edge_attr.new_zeros(size).scatter_reduce_(
                0, index, edge_attr, reduce='a' + fill_value[-3:], include_self=False)
        if fill_value == 'any':
            return edge_attr.new_zeros(size).scatter_(0, index, edge_attr)
        raise ValueError(f"Encountered invalid fill_value reduction '{fill_value}'")
    raise AttributeError("No valid 'fill_value' provided")


class _Edges:
    """The graph of one edge_index as a layer uses it: the CSR graph, the COO edges in PyG's
    order (loop-free input edges, then the loops), and what edge_attr needs to follow."""
    __slots__ = ('graph', 'edge_index', 'num_input_edges', 'keep', 'loop_sel', 'loop_dst',
                 'num_loops', 'from_graph', 'source', '_segments', 'attr_key', 'attr_source',
                 'attr_csr')

    # Index tensors (int64), not masks: their gathers' backward adds one row to each place, so
    # it is exact and bitwise reproducible, and no host synchronisation happens per call.
    def __init__(self, graph, edge_index, num_input_edges, keep, loop_sel, loop_dst, num_loops,
                 from_graph, source):
        self.graph = graph              # gat_torch.ops.Graph
        self.edge_index = edge_index    # (2, E) in PyG's order (or Graph.build's input order)
        self.num_input_edges = num_input_edges  # edges of the input; None: no self-loop handling
        self.keep = keep                # the input edges kept (not loops), or None: all of them
        self.loop_sel = loop_sel        # the kept edges feeding the fill reductions, or None: all
        self.loop_dst = loop_dst        # their destinations (int64)
        self.num_loops = num_loops      # loops added (0 when add_self_loops is off)
        self.from_graph = from_graph    # the caller passed a Graph
        self.source = source            # the input tensor, kept alive for the cache key
        self._segments = None
        # a constant edge_attr (attr_source, alive for attr_key) with its loops, in CSR order
        self.attr_key = self.attr_source = self.attr_csr = None

    def loop_segments(self):
        """(order, counts): loop_dst's edges sorted by destination, stably, and the number of
        each loop node's in-edges (num_loops,); made on first use and cached."""
        if self._segments is None:
            order = torch.argsort(self.loop_dst, stable=True)
            counts = torch.bincount(self.loop_dst, minlength=self.num_loops)
            self._segments = (order, counts)
        return self._segments


def _edge_key(edge_index: Tensor, extra) -> Optional[tuple]:
    try:
        version = edge_index._version
    except (RuntimeError, AttributeError):  # inference tensors have no version counter
        return None
    return (edge_index.data_ptr(), version, tuple(edge_index.shape), tuple(edge_index.stride()),
            edge_index.dtype, str(edge_index.device)) + tuple(extra)


class _GATBase(torch.nn.Module):
    """What GATConv and GATv2Conv share: the constructor arguments (args, from _pyg_arguments)
    kept as attributes, the output's residual and bias, the edge handling and the graph cache."""

    def __init__(self, args: types.SimpleNamespace):
        super().__init__()
        _check_kwargs(args.kwargs, type(self).__name__)
        in_channels = args.in_channels
        if isinstance(in_channels, (tuple, list)):
            if len(in_channels) != 2:
                raise ValueError(f"in_channels must be an int or a pair (got {in_channels!r})")
            _check_channels(in_channels[0], 'in_channels[0]')
            _check_channels(in_channels[1], 'in_channels[1]')
        else:
            _check_channels(in_channels, 'in_channels')
        self.in_channels = in_channels
        self.out_channels = args.out_channels
        self.heads = args.heads
        self.concat = args.concat
        self.negative_slope = args.negative_slope
        self.dropout = args.dropout
        self.add_self_loops = args.add_self_loops
        self.edge_dim = args.edge_dim
        self.fill_value = args.fill_value
        self.residual = args.residual
        # MessagePassing's attributes that code may read.
        self.aggr = 'add'
        self.flow = 'source_to_target'
        self.node_dim = 0
        self.decomposed_layers = args.kwargs.get('decomposed_layers', 1)
        self._edges: Optional[_Edges] = None
        self._edges_key = None

    def _init_output(self, bias: bool):
        """The residual projection `res` and the `bias`, registered (or None) in PyG's order,
        after the layer's own submodules."""
        in_channels = self.in_channels
        total_out_channels = self.out_channels * (self.heads if self.concat else 1)
        if self.residual:
            self.res = _linear(in_channels if isinstance(in_channels, int) else in_channels[1],
                               total_out_channels, False, 'in_channels')
        else:
            self.register_parameter('res', None)
        if bias:
            self.bias = Parameter(torch.empty(total_out_channels))
        else:
            self.register_parameter('bias', None)

    def __getstate__(self):  # pickling, deepcopy: leave the cached graph behind
        state = self.__dict__.copy()
        state['_edges'] = None
        state['_edges_key'] = None
        return state

    def _attn_dropout(self) -> float:
        # Checked as PyG's F.dropout checks it, in training and eval: a negative or NaN rate was
        # taken as no dropout.
        rate = float(self.dropout)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {rate}")
        return rate if self.training and rate > 0 else 0.0

    def _get_edges(self, edge_index, num_src: int, num_dst: int, num_loops: Optional[int],
                   device) -> _Edges:
        """The cached graph of edge_index for these node counts; num_loops is None without
        self-loop handling, else the number of loops (i, i) to add."""
        if isinstance(edge_index, _ops.Graph):
            graph = edge_index
            if graph.num_src_nodes != num_src or graph.num_dst_nodes != num_dst:
                raise ValueError(
                    f"the Graph has {graph.num_src_nodes} source and {graph.num_dst_nodes} "
                    f"destination nodes, the features {num_src} and {num_dst}")
            if torch.device(graph.device) != torch.device(device):
                raise ValueError(f"the Graph is on {graph.device}, the features on {device}")
            key = ('graph', id(graph))
            if self._edges is not None and self._edges_key == key \
                    and self._edges.source is graph:
                return self._edges
            perm = graph.perm
            coo = torch.stack([graph.src, graph.dst])
            ei = torch.empty_like(coo).index_copy_(1, perm, coo)
            edges = _Edges(graph, ei, None, None, None, None, 0, True, graph)
            self._edges, self._edges_key = edges, key
            return edges

        if _is_sparse_adjacency(edge_index):
            raise NotImplementedError(
                f"{type(self).__name__} in gat_torch takes edge_index as a COO tensor (2, E) or "
                f"a gat_torch.ops.Graph, not a sparse adjacency ({type(edge_index).__name__}, "
                f"layout {getattr(edge_index, 'layout', None)}); convert it, e.g. "
                f"torch.stack(adj_t.t().coo()[:2]) for a SparseTensor adj_t")
        if not isinstance(edge_index, Tensor):
            raise ValueError(f"edge_index must be a tensor (2, E) or a gat_torch.ops.Graph "
                             f"(got {type(edge_index).__name__})")
        if hasattr(edge_index, 'as_tensor') and type(edge_index) is not Tensor:
            edge_index = edge_index.as_tensor()  # torch_geometric's EdgeIndex: its data
        if edge_index.dtype not in (torch.uint8, torch.int8, torch.int16, torch.int32,
                                    torch.int64):
            raise ValueError(f"Expected 'edge_index' to be of integer type (got "
                             f"'{edge_index.dtype}')")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(f"Expected 'edge_index' to have shape (2, E) (got "
                             f"{tuple(edge_index.shape)})")

        key = _edge_key(edge_index, (num_src, num_dst, num_loops, str(device)))
        if key is not None and self._edges is not None and self._edges_key == key \
                and self._edges.source is edge_index:
            return self._edges

        source = edge_index
        ei = edge_index
        if ei.device != torch.device(device):
            ei = ei.to(device)
        num_input_edges = keep = loop_sel = loop_dst = None
        full = ei
        if num_loops is not None:
            num_input_edges = ei.size(1)
            keep = (ei[0] != ei[1]).nonzero().view(-1)
            if keep.numel() == num_input_edges:
                keep = None
            kept = ei if keep is None else ei.index_select(1, keep)
            loops = torch.arange(num_loops, device=ei.device).view(1, -1).repeat(2, 1)
            full = torch.cat([kept, loops], dim=1)
            loop_dst = kept[1].long()
            if num_loops < num_dst:
                # only in-edges of nodes that get a loop feed the fill reductions
                loop_sel = (loop_dst < num_loops).nonzero().view(-1)
                loop_dst = loop_dst.index_select(0, loop_sel)
        build = full if full.dtype in (torch.int32, torch.int64) else full.long()
        graph = _ops.Graph.build(build[0], build[1], num_src, num_dst)
        edges = _Edges(graph, full, num_input_edges, keep, loop_sel, loop_dst, num_loops or 0,
                       False, source)
        if key is not None:
            self._edges, self._edges_key = edges, key
        return edges

    def _edge_attr(self, edges: _Edges, edge_attr: Tensor) -> Tensor:
        """edge_attr in PyG's edge order: self loops removed, the loops' features appended."""
        if edges.from_graph or edges.num_input_edges is None:
            if edge_attr.size(0) != edges.edge_index.size(1):
                raise ValueError(f"edge_attr has {edge_attr.size(0)} rows for "
                                 f"{edges.edge_index.size(1)} edges")
            return edge_attr
        if edge_attr.size(0) != edges.num_input_edges:
            raise ValueError(f"edge_attr has {edge_attr.size(0)} rows for "
                             f"{edges.num_input_edges} edges")
        if edges.keep is not None:
            edge_attr = edge_attr.index_select(0, edges.keep)
        fill_src = edge_attr
        if edges.loop_sel is not None and isinstance(self.fill_value, str):
            fill_src = edge_attr.index_select(0, edges.loop_sel)
        loop_attr = _loop_attr(edges, fill_src, self.fill_value)
        return torch.cat([edge_attr, loop_attr], dim=0)

    def _constant_edge_attr(self, edges: _Edges, edge_attr: Tensor) -> Optional[Tensor]:
        """For an edge_attr without gradient (edge features are mostly constants): it with the
        loops' rows, in the graph's edge order (E', edge_dim), made once per edge_attr and graph
        and kept with the graph (a change in place is seen, as for edge_index); else None."""
        if edge_attr.requires_grad or isinstance(self.fill_value, Tensor):
            return None
        key = _edge_key(edge_attr, (repr(self.fill_value), ))
        if key is None:
            return None
        if edges.attr_key != key or edges.attr_source is not edge_attr:
            csr = self._edge_attr(edges, edge_attr).index_select(0, edges.graph.perm)
            edges.attr_key, edges.attr_source, edges.attr_csr = key, edge_attr, csr
        return edges.attr_csr

    @staticmethod
    def _to_input_order(edges: _Edges, alpha_csr: Tensor) -> Tensor:
        """Rows in CSR order -> rows in edge_index's order (alpha[perm[k]] = alpha_csr[k])."""
        perm = edges.graph.perm
        return alpha_csr.new_zeros(alpha_csr.shape).index_copy(0, perm, alpha_csr)

    def _finish(self, out: Tensor, res: Optional[Tensor]) -> Tensor:
        if self.concat:
            out = out.reshape(-1, self.heads * self.out_channels)
        else:
            out = out.mean(dim=1)
        if res is not None:
            out = out + res
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, heads={self.heads})')


class _GatherRows(torch.autograd.Function):
    """values.index_select(0, index) whose backward sums each row's gradients in edge order
    (segment_reduce, no atomics: bitwise reproducible on CUDA, where index_add's are not).
    order: the edges sorted by index (None: index is sorted already); lengths: each row's count."""

    @staticmethod
    def forward(ctx, values, index, order, lengths):
        ctx.save_for_backward(order, lengths)
        ctx.has_order = order is not None
        return values.index_select(0, index)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        order, lengths = ctx.saved_tensors
        if ctx.has_order:
            grad = grad.index_select(0, order)
        return torch.segment_reduce(grad, 'sum', lengths=lengths, axis=0, unsafe=True), \
            None, None, None


def _by_dst(graph, values: Tensor) -> Tensor:
    """values (Nd, ...) -> (E, ...): each edge's destination row, CSR order."""
    return _GatherRows.apply(values, graph.dst, None, graph.arrays[0].long().diff())


def _by_src(graph, values: Tensor) -> Tensor:
    """values (Ns, ...) -> (E, ...): each edge's source row, CSR order."""
    t_perm = graph.arrays[5].long()  # CSR edge ids sorted by source
    return _GatherRows.apply(values, graph.src, t_perm, graph.arrays[3].long().diff())


def _csr_softmax_torch(graph, scores: Tensor) -> Tensor:
    """Softmax over each destination's in-edges of scores (E, H) in CSR order, in plain torch
    (differentiable, bitwise reproducible); used only for returned attention weights that need
    autograd."""
    dst = graph.dst
    num_dst = graph.num_dst_nodes
    index = dst.view(-1, 1).expand_as(scores)
    smax = scores.new_full((num_dst, scores.size(1)), float('-inf')).scatter_reduce(
        0, index, scores.detach(), reduce='amax', include_self=True)
    e = (scores - smax.index_select(0, dst)).exp()
    in_degree = graph.arrays[0].long().diff()  # CSR order: each destination's edges in a run
    denom = torch.segment_reduce(e, 'sum', lengths=in_degree, axis=0, unsafe=True)  # no atomics
    return e / (_by_dst(graph, denom) + 1e-16)


class GATConv(_GATBase):
    r"""The graph attentional operator of "Graph Attention Networks"
    (https://arxiv.org/abs/1710.10903), a drop-in for ``torch_geometric.nn.GATConv`` (PyG 2.8)
    on the fused kernels of :mod:`gat_torch.ops`.  Arguments, parameters and ``forward`` as
    PyG's; see the module's docstring for the edge inputs and the few differences.

    Args:
        in_channels (int or tuple): size of each input sample, or (source, target) sizes for
            a bipartite graph (separate ``lin_src``/``lin_dst``). ``-1`` is refused.
        out_channels (int): size of each output sample per head.
        heads (int): number of attention heads. (default: 1)
        concat (bool): concatenate the heads, else average them. (default: True)
        negative_slope (float): LeakyReLU slope. (default: 0.2)
        dropout (float): dropout of the attention weights in training. (default: 0)
        add_self_loops (bool): remove the graph's self loops and add one per node.
            (default: True)
        edge_dim (int, optional): edge feature size. (default: None)
        fill_value (float, Tensor or str): the loops' edge features: a value, or a reduction
            of each node's in-edge features ('add', 'mean', 'min', 'max', 'mul').
            (default: 'mean')
        bias (bool): learn an additive bias. (default: True)
        residual (bool): learn a skip connection. (default: False)
    """

    @_pyg_arguments()
    def __init__(self, args):
        super().__init__(args)
        in_channels, heads, out_channels = args.in_channels, args.heads, args.out_channels

        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = _linear(in_channels, heads * out_channels, False, 'in_channels')
        else:
            self.lin_src = _linear(in_channels[0], heads * out_channels, False,
                                   'in_channels[0]')
            self.lin_dst = _linear(in_channels[1], heads * out_channels, False,
                                   'in_channels[1]')

        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))

        if args.edge_dim is not None:
            self.lin_edge = _linear(args.edge_dim, heads * out_channels, False, 'edge_dim')
            self.att_edge = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter('att_edge', None)

        self._init_output(args.bias)
        self.reset_parameters()

    def reset_parameters(self):
        """PyG's scheme: glorot projections and attention vectors, zero bias."""
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                _reset_linear(lin)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        _glorot(self.att_edge)
        _zeros(self.bias)

    def forward(self, x, edge_index, edge_attr: Optional[Tensor] = None,
                size: Optional[Tuple[Optional[int], Optional[int]]] = None,
                return_attention_weights: Optional[bool] = None):
        r"""Args:
            x (Tensor or (Tensor, Tensor or None)): node features (N, F_in), or the source
                and destination features of a bipartite graph (the destination's may be
                None: then the destination part of the score is zero).
            edge_index (Tensor (2, E), EdgeIndex or gat_torch.ops.Graph): the edges.
            edge_attr (Tensor, optional): edge features (E, edge_dim) or (E,).
            size ((int, int), optional): (num_src, num_dst) nodes.
            return_attention_weights (bool, optional): if true, return
                ``(out, (edge_index, alpha))`` with the edges the layer used (PyG's order:
                the loop-free input edges, then the loops) and alpha (E, heads).
        """
        H, C = self.heads, self.out_channels
        res: Optional[Tensor] = None

        if isinstance(x, Tensor):
            if x.dim() != 2:
                raise ValueError("Static graphs not supported in 'GATConv' (x must be 2-D)")
            if self.res is not None:
                res = self.res(x)
            if self.lin is not None:
                x_src = x_dst = self.lin(x).view(-1, H, C)
            else:
                x_src = self.lin_src(x).view(-1, H, C)
                x_dst = self.lin_dst(x).view(-1, H, C)
        else:
            x_src, x_dst = x
            if x_src.dim() != 2:
                raise ValueError("Static graphs not supported in 'GATConv' (x must be 2-D)")
            if x_dst is not None and self.res is not None:
                res = self.res(x_dst)
            if self.lin is not None:
                x_src = self.lin(x_src).view(-1, H, C)
                if x_dst is not None:
                    x_dst = self.lin(x_dst).view(-1, H, C)
            else:
                x_src = self.lin_src(x_src).view(-1, H, C)
                if x_dst is not None:
                    x_dst = self.lin_dst(x_dst).view(-1, H, C)

        if x_dst is x_src:  # one projection: el and er in one pass (the common case)
            el, er = _ops.head_dot_pair(x_src, self.att_src.view(H, C), self.att_dst.view(H, C))
        else:
            el = (x_src * self.att_src).sum(dim=-1)
            er = None if x_dst is None else (x_dst * self.att_dst).sum(dim=-1)

        # Node counts as MessagePassing infers them.
        sizes = [None, None] if size is None else list(size)
        if size is None and hasattr(edge_index, 'num_rows') and hasattr(edge_index, 'as_tensor'):
            sizes = [edge_index.num_rows, edge_index.num_cols]
        for dim, t in ((1, x_dst), (0, x_src)):
            if t is None:
                continue
            if sizes[dim] is None:
                sizes[dim] = t.size(0)
            elif sizes[dim] != t.size(0):
                raise ValueError(f'Encountered tensor with size {t.size(0)} in dimension 0, '
                                 f'but expected size {sizes[dim]}.')
        num_src = sizes[0]
        num_dst = sizes[1] if sizes[1] is not None else sizes[0]

        num_loops = None
        if self.add_self_loops and not isinstance(edge_index, _ops.Graph):
            num_loops = x_src.size(0)
            if x_dst is not None:
                num_loops = min(num_loops, x_dst.size(0))
            if size is not None:
                num_loops = min(s for s in size if s is not None)
        edges = self._get_edges(edge_index, num_src, num_dst, num_loops, x_src.device)
        graph = edges.graph

        if er is None:
            er = el.new_zeros(num_dst, H)

        edge_term = None
        if edge_attr is not None and self.lin_edge is not None:
            # sum_c (ea W_e^T)[e,h,c] att_edge[h,c] = ea @ fold: the (E, H, C) edge features
            # are never made. fold (edge_dim, H) = sum_c W_e[h*C+c, :] att_edge[h,c].
            weight = self.lin_edge.weight.view(H, C, -1)
            fold = (weight * self.att_edge.view(H, C, 1)).sum(dim=1).t()
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)
            constant = self._constant_edge_attr(edges, edge_attr)
            if constant is not None:  # already with its loops, in the graph's order
                edge_term = constant @ fold
            else:
                if isinstance(self.fill_value, str) and self.fill_value in ('mean', 'add', 'sum'):
                    # a linear fill commutes with the fold: the loops reduce (E, H), not
                    # (E, edge_dim)
                    edge_term = self._edge_attr(edges, edge_attr @ fold)
                else:
                    edge_term = self._edge_attr(edges, edge_attr) @ fold
                edge_term = edge_term.index_select(0, graph.perm)

        out = _ops.gat_attention(graph, el, er, x_src, negative_slope=self.negative_slope,
                                 edge_term=edge_term, dropout=self._attn_dropout())
        out = self._finish(out, res)

        if return_attention_weights:
            alpha = self._weights(graph, el, er, edge_term)
            return out, (edges.edge_index, self._to_input_order(edges, alpha))
        return out

    def _weights(self, graph, el, er, edge_term):
        needs_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (el, er, edge_term))
        if needs_grad:
            scores = _by_src(graph, el) + _by_dst(graph, er)
            if edge_term is not None:
                scores = scores + edge_term
            scores = F.leaky_relu(scores, self.negative_slope)
            return _csr_softmax_torch(graph, scores)
        with torch.no_grad():
            return _ops.gat_attention_weights(graph, el, er, self.negative_slope,
                                              edge_term=edge_term)


class GATv2Conv(_GATBase):
    r"""The GATv2 operator of "How Attentive are Graph Attention Networks?"
    (https://arxiv.org/abs/2105.14491), a drop-in for ``torch_geometric.nn.GATv2Conv``
    (PyG 2.8) on the fused kernels of :mod:`gat_torch.ops`.  Arguments, parameters and
    ``forward`` as PyG's (``share_weights`` makes ``lin_r`` the same module as ``lin_l``);
    see the module's docstring for the edge inputs and the few differences.
    """

    @_pyg_arguments(_argument('share_weights', bool, False))
    def __init__(self, args):
        super().__init__(args)
        in_channels, heads, out_channels = args.in_channels, args.heads, args.out_channels
        bias, share_weights = args.bias, args.share_weights
        self.share_weights = share_weights

        if isinstance(in_channels, int):
            self.lin_l = _linear(in_channels, heads * out_channels, bias, 'in_channels')
            if share_weights:
                self.lin_r = self.lin_l
            else:
                self.lin_r = _linear(in_channels, heads * out_channels, bias, 'in_channels')
        else:
            self.lin_l = _linear(in_channels[0], heads * out_channels, bias, 'in_channels[0]')
            if share_weights:
                self.lin_r = self.lin_l
            else:
                self.lin_r = _linear(in_channels[1], heads * out_channels, bias,
                                     'in_channels[1]')

        self.att = Parameter(torch.empty(1, heads, out_channels))

        if args.edge_dim is not None:
            self.lin_edge = _linear(args.edge_dim, heads * out_channels, False, 'edge_dim')
        else:
            self.lin_edge = None

        self._init_output(bias)
        self.reset_parameters()

    def reset_parameters(self):
        """PyG's scheme: glorot projections (their biases uniform) and attention vector,
        zero bias."""
        _reset_linear(self.lin_l)
        _reset_linear(self.lin_r)
        if self.lin_edge is not None:
            _reset_linear(self.lin_edge)
        if self.res is not None:
            _reset_linear(self.res)
        _glorot(self.att)
        _zeros(self.bias)

    def forward(self, x, edge_index, edge_attr: Optional[Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        r"""Args:
            x (Tensor or (Tensor, Tensor)): node features (N, F_in), or the source and
                destination features of a bipartite graph.
            edge_index (Tensor (2, E), EdgeIndex or gat_torch.ops.Graph): the edges.
            edge_attr (Tensor, optional): edge features (E, edge_dim) or (E,).
            return_attention_weights (bool, optional): if true, return
                ``(out, (edge_index, alpha))`` as PyG does.
        """
        H, C = self.heads, self.out_channels
        res: Optional[Tensor] = None

        if isinstance(x, Tensor):
            if x.dim() != 2:
                raise ValueError("x must be 2-D")
            if self.res is not None:
                res = self.res(x)
            x_l = self.lin_l(x).view(-1, H, C)
            x_r = x_l if self.share_weights else self.lin_r(x).view(-1, H, C)
        else:
            x_l, x_r = x[0], x[1]
            if x_l.dim() != 2:
                raise ValueError("x must be 2-D")
            if x_r is None:
                raise ValueError("GATv2Conv needs destination node features (x[1] is None)")
            if self.res is not None:
                res = self.res(x_r)
            x_l = self.lin_l(x_l).view(-1, H, C)
            x_r = self.lin_r(x_r).view(-1, H, C)

        num_src, num_dst = x_l.size(0), x_r.size(0)
        num_loops = None
        if self.add_self_loops and not isinstance(edge_index, _ops.Graph):
            num_loops = min(num_src, num_dst)
        edges = self._get_edges(edge_index, num_src, num_dst, num_loops, x_l.device)
        graph = edges.graph

        edge_term = None
        if edge_attr is not None:
            if self.lin_edge is None:
                raise ValueError("edge_attr given to a GATv2Conv built without edge_dim")
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)
            ea = self._constant_edge_attr(edges, edge_attr)  # with its loops, graph's order
            if ea is None:
                ea = self._edge_attr(edges, edge_attr).index_select(0, graph.perm)
            edge_term = self.lin_edge(ea).view(-1, H, C)

        att = self.att.view(H, C)
        out = _ops.gatv2_attention(graph, x_l, x_r, att, negative_slope=self.negative_slope,
                                   edge_term=edge_term, dropout=self._attn_dropout())
        out = self._finish(out, res)

        if return_attention_weights:
            alpha = self._weights(graph, x_l, x_r, att, edge_term)
            return out, (edges.edge_index, self._to_input_order(edges, alpha))
        return out

    def _weights(self, graph, x_l, x_r, att, edge_term):
        needs_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (x_l, x_r, att, edge_term))
        if needs_grad:
            z = _by_src(graph, x_l) + _by_dst(graph, x_r)
            if edge_term is not None:
                z = z + edge_term
            scores = (F.leaky_relu(z, self.negative_slope) * att).sum(dim=-1)
            return _csr_softmax_torch(graph, scores)
        with torch.no_grad():
            return _ops.gatv2_attention_weights(graph, x_l, x_r, att, self.negative_slope,
                                                edge_term=edge_term)
