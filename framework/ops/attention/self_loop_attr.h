// self_loop_attr: the edge attributes of graph.with_self_loops(), the self loops' ones made from
// the other edges' as PyG's add_self_loops(edge_index, edge_attr, fill_value) makes them (after
// remove_self_loops, as GATConv and GATv2Conv call them).
//
// For every destination i, with the graph's existing loops (i, i) dropped (their attributes are
// discarded, as PyG's remove_self_loops does):
//   out[e']   = edge_attr[e]                        for every edge e = (j, i), j != i, at its
//                                                   place e' in looped's edge order
//   out[loop] = reduce over e = (j, i), j != i of edge_attr[e]       (the new loop of node i)
// with reduce by SelfLoopFill (PyG's scatter(..., reduce) over the edges' destinations):
//   mean, add: mean / sum (0 for a node without in-edges); min, max: element-wise (0 without
//   in-edges: torch's scatter_reduce with include_self=False on zeros); mul: the product (1 without
//   in-edges); constant: `value` for every loop.
// Backward: d edge_attr[e] = d out[e'] + d out[loop of dst(e)] * d loop / d edge_attr[e]: 1/count
// (mean), 1 (add), split evenly between the edges that reach the min/max (torch's scatter_reduce
// rule), the product of the others (mul), 0 (constant); existing loops get 0.
//
// graph: the graph edge_attr belongs to; looped: graph.with_self_loops() (checked by its sizes).
// Both on edge_attr's device. Runs one thread per (destination, feature): no atomics,
// deterministic. On a bipartite graph (Ns sources, Nd destinations) only the destinations
// i < min(Ns, Nd) get a loop (with_self_loops' rule, PyG's); the others' edges are copied. For
// Ns > Nd that is PyG's result; for Ns < Nd PyG computes the same with a number as fill_value,
// while its reductions over the destinations (mean, add, min, max, mul) fail with an index error
// as soon as an edge enters a destination i >= Ns (scatter into min(Ns, Nd) rows); here they
// reduce each looped destination's in-edges as on any other graph.
#pragma once

#include <optional>
#include <string>

#include "gat/framework/graph.h"
#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// PyG's fill_value: "mean" (GATConv's default), "add" (or "sum"), "min", "max", "mul", or a
// number.
struct SelfLoopFill {
  enum class Kind { mean, add, min, max, mul, constant };
  Kind kind = Kind::mean;
  double value = 0.0;  // the loops' attribute when kind is constant

  static SelfLoopFill constant_value(double value) { return {Kind::constant, value}; }
  static constexpr const char* kAccepted = "mean, add, sum, min, max, mul or a finite number";
  // "mean", "add", "sum", "min", "max", "mul" or a finite number; nothing for another text.
  static std::optional<SelfLoopFill> try_parse(const std::string& text);
  // The same, throwing a gat::Error naming the text and what is accepted.
  static SelfLoopFill parse(const std::string& text);
  std::string name() const;  // the text parse() reads back ("add" for add)
  bool operator==(const SelfLoopFill& o) const { return kind == o.kind && value == o.value; }
};

// edge_attr: (E, D) f32|f64 in graph's edge order  ->  (E', D) in looped's edge order
// (E' = E - graph.count_self_loops() + min(Ns, Nd)). Gradient for edge_attr.
Tensor self_loop_attr(const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                      const SelfLoopFill& fill);

// The kernels (the op pattern): forward writes out (E', D); backward, given grad_out (E', D),
// writes grad_attr (E, D) (every row, existing loops' rows 0). kernels:: runs cpu_impl:: or
// cuda_impl:: by the tensors' device.
GAT_DECLARE_KERNEL_FN(self_loop_attr_forward,
                      (const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                       const SelfLoopFill& fill, Tensor& out))
GAT_DECLARE_KERNEL_FN(self_loop_attr_backward,
                      (const Graph& graph, const Graph& looped, const Tensor& edge_attr,
                       const SelfLoopFill& fill, const Tensor& grad_out, Tensor& grad_attr))

}  // namespace gat::ops
