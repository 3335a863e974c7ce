// Multi-graph datasets for inductive node tasks: whole graphs for training, others for
// validation and test (PPI: 20, 2 and 2 protein graphs, 121 labels per node), and a generator of
// such datasets for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gat/framework/graph_batch.h"

namespace gat {

struct MultiGraphDataset {
  std::string name;
  // Every graph on the host, one node set without self loops (the layers add theirs), both
  // directions of an undirected edge; x (N, num_features) f32, y (N, num_labels) f32 of 0 and 1.
  std::vector<GraphData> train, val, test;
  int64_t num_features = 0;
  int64_t num_labels = 0;
};

// The generator: `graphs` graphs of about `nodes` nodes each (uniform in [nodes/2, 3 nodes/2]).
// Every node belongs to one of `communities` groups, shared by all graphs:
//   - edges: every node starts avg_degree / 2 edges, to a node of its own group with probability
//     intra_fraction, else to any node of its graph; symmetrised, deduplicated, no self loops;
//   - labels: the group's random label set (each label with probability label_density), each
//     bit flipped with probability label_noise;
//   - features: the group's random +-1 prototype times `signal`, plus uniform noise in [-1, 1).
// The features alone say a node's group only roughly; its neighbours' say it better, so a GNN
// learns more than a per-node classifier. The last graphs are the test split, the ones before
// them validation: max(1, graphs / 12) each (2 and 2 of 24, as PPI); graphs >= 3. Reproducible for
// a seed (one std::mt19937_64 stream drawn in a fixed order).
struct MultiGraphOptions {
  int64_t graphs = 24;
  int64_t nodes = 100;
  uint64_t seed = 0;
  int64_t num_features = 50;
  int64_t num_labels = 121;
  int64_t communities = 8;
  double avg_degree = 10.0;
  double intra_fraction = 0.9;
  double label_density = 0.3;
  double label_noise = 0.02;
  double signal = 0.3;
};

MultiGraphDataset generate_multigraph(const MultiGraphOptions& options);

}  // namespace gat
