// Dataset: what every loader (Planetoid, custom directory, synthetic generator) returns.
#pragma once

#include <cstdint>
#include <string>

#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"

namespace gat {

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

  int64_t num_nodes() const { return x.size(0); }
  int64_t num_features() const { return x.size(1); }
};

}  // namespace gat
