// What the message-passing layers (GCNConv, SAGEConv, GINConv) share: the index plans of a
// graph's edges, built once per graph and kept, and the neighbourhood sum or mean made of them
// (docs/message-passing.md: index_rows gathers a row per edge, a segment op reduces each
// destination's run of in-edges; no atomics, so every run gives the same bits).
#pragma once

#include <cstdint>

#include "gat/framework/graph.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/segment_reduce.h"
#include "gat/framework/tensor.h"

namespace gat {

// The plans of one graph's edges, on the graph's device.
struct EdgePlans {
  Graph graph;             // the graph they are of
  ops::RowIndex sources;   // edge_src (E,): gathers each edge's source row
  ops::Segments in_edges;  // row_ptr (Nd+1,): destination i's in-edges are a run of edge ids
};

// The plans of the last graph seen. Building them reads the indices on the host (a copy from the
// device for a CUDA graph), so a layer keeps them until another graph comes. A graph is the same
// when its arrays are (a graph's arrays are never changed in place) and so are its node counts.
class EdgePlanCache {
 public:
  const EdgePlans& of(const Graph& graph);

 private:
  EdgePlans plans_;
};

// Whether two graphs are one: the same arrays and node counts (SelfLoopedGraph's test too).
bool same_graph(const Graph& a, const Graph& b);

// check_attention_inputs (graph_attention.h) for dense features, and the features on the graph's
// device: x_dst null when one x is both sides. Errors start with `layer`.
void check_message_inputs(const char* layer, const Tensor& x_src, const Tensor* x_dst, const Graph& graph,
                          int64_t in_channels, int64_t dst_in_channels);

// The sum (PyG's aggr='add') or the mean (aggr='mean') over each destination's in-edges j -> i
// of x_src[j]: (Nd, F) from x_src (Ns, F) on a graph of Ns sources and Nd destinations; 0 for a
// destination without in-edges, as in PyG. An edge listed twice counts twice.
Tensor sum_neighbours(const Tensor& x_src, const EdgePlans& plans);
Tensor mean_neighbours(const Tensor& x_src, const EdgePlans& plans);

}  // namespace gat
