// Batches of disjoint graphs for inductive tasks (PyG's Batch.from_data_list and to_data_list):
// the graphs of a batch become one graph whose node ids are offset by the nodes of the graphs
// before it, with a batch vector saying which graph every node came from. A GNN layer run on the
// batch never mixes two graphs (no edge joins them), and global_*_pool (ops/global_pool.h) reads
// the batch vector as it is.
//
// Everything is on the host; the caller copies the batch to its device (GraphBatch::to).
#pragma once

#include <cstdint>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"

namespace gat {

// One graph of a multi-graph dataset (PyG's Data).
struct GraphData {
  Graph graph;       // one node set of N nodes
  Tensor x;          // (N, F) node features
  Tensor y;          // (N, ...) node targets (PPI: (N, C) f32 of 0 and 1)
  Tensor edge_attr;  // (E, D) in graph's edge order, or undefined: none

  int64_t num_nodes() const { return graph.num_nodes(); }
  GraphData to(Device device) const;
};

struct GraphBatch {
  // The disjoint union: graph b's node i is node node_ptr[b] + i, its edge e is edge
  // edge_ptr[b] + e (the edge order of each graph is kept, so edge_attr rows follow it).
  GraphData data;
  Tensor batch;                   // (N,) i32: the graph of every node, non-decreasing
  std::vector<int64_t> node_ptr;  // (B+1,) the first node of every graph, then N (PyG's ptr)
  std::vector<int64_t> edge_ptr;  // (B+1,) the first edge of every graph, then E

  int64_t num_graphs() const { return static_cast<int64_t>(node_ptr.size()) - 1; }
  GraphBatch to(Device device) const;  // data and batch on `device`; the offsets stay
};

// The graphs, in order, as one. Every graph on the host, one node set, with at least one node;
// all with the same feature width, the same target shape beyond the first axis and dtype, and
// edge features on all of them (of one width) or none. Errors (gat::Error naming the graph and
// what differs): none given, a null member, a graph that breaks these rules, more than 2^31 - 1
// nodes or edges.
GraphBatch batch_graphs(const std::vector<const GraphData*>& graphs);
GraphBatch batch_graphs(const std::vector<GraphData>& graphs);

// The graphs of a batch back (batch_graphs' inverse, up to the graphs' chunk plans, which the
// graphs get anew): graph b's nodes renumbered from 0, its rows of x, y and edge_attr copied.
// Errors (gat::Error): a batch batch_graphs did not make (no graph, x or y; node_ptr or edge_ptr
// not from 0 to the batch's counts, decreasing, or of different lengths).
std::vector<GraphData> unbatch(const GraphBatch& batch);

}  // namespace gat
