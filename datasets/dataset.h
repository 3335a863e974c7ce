// Dataset: what every loader (Planetoid, custom directory, synthetic generator) returns.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"

namespace gat {

namespace ops {
struct SelfLoopFill;  // framework/ops/attention/self_loop_attr.h
}

struct Dataset {
  std::string name;
  Tensor x;            // (N, F) f32 node features
  Tensor y;            // (N,) i32 class of every node, in [0, num_classes)
  Tensor train_index;  // (K_train,) i32 node ids, ascending
  Tensor val_index;    // (K_val,) i32 node ids, ascending
  Tensor test_index;   // (K_test,) i32 node ids, ascending
  int64_t num_classes = 0;
  // Undirected (both directions of every edge), deduplicated, without self loops: GATConv adds
  // its own.
  Graph graph;
  // (E, D) f32 edge features in graph's edge order (GATConvOptions::edge_dim = D), or undefined
  // when the dataset has none. How a loader fills the reverse edges and duplicates is its own
  // (load_custom: datasets/custom.h).
  Tensor edge_attr;
  // What training does to x first, as the dataset's reference recipe does (set by the loader):
  // the Planetoid graphs row-normalise their bag-of-words features (PyG's NormalizeFeatures,
  // normalize_features in datasets/planetoid.h); other sources are used as they are.
  enum class Preprocessing { none, row_normalize };
  Preprocessing preprocessing = Preprocessing::none;

  int64_t num_nodes() const { return x.size(0); }
  int64_t num_features() const { return x.size(1); }
  int64_t num_edge_features() const { return edge_attr.defined() ? edge_attr.size(1) : 0; }
};

// Throws a gat::Error unless each of train_index, val_index and test_index is non-empty, within
// [0, num_nodes) and shares no node with another. `sources` names where each split came from (a
// file) for the message, in that order.
void check_splits(const Dataset& data, const std::array<std::string, 3>& sources);

// Throws a gat::Error naming the dataset unless every edge feature that GAT's layers see is
// finite: `data.graph` has one self loop per node (Graph::with_self_loops, as the trainer passes
// it) and the loops' features are made by `fill` (ops::self_loop_attr), whose sum ("add"), product
// ("mul") or mean of finite features can pass the largest float. The loader checked the others.
// A dataset without edge features passes.
void check_self_loop_features(const Dataset& data, const ops::SelfLoopFill& fill);

}  // namespace gat
