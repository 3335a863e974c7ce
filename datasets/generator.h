// Synthetic node-classification graphs for scale tests and benchmarks: a degree-corrected
// stochastic block model (Karrer & Newman 2011) with one block per class.
//
//   - every node draws a class uniformly and a Pareto weight theta (tail exponent `pareto_alpha`),
//     so expected degrees follow a power law;
//   - node u starts about m_u = (num_nodes * avg_degree / 2) * theta_u / sum(theta) edges (floor
//     of m_u, plus one with probability equal to its fraction); the other end of each is drawn
//     proportional to theta inside u's class with probability `intra_fraction`, else
//     proportional to theta over all nodes; the graph is then symmetrised, deduplicated and self
//     loops removed (so it has about, and at most, num_nodes * avg_degree directed edges, which
//     may pass 2^31 (the graph then has i64 offsets, Graph::offset_dtype) up to 2^32 - 1, the most
//     the graph build sorts: e.g. 40M nodes of degree 60);
//   - features: the class's random +-1 prototype scaled by `signal`, plus uniform noise in [-1, 1);
//   - with num_edge_features = D > 0, edge features (Dataset::edge_attr (E, D)): +signal on an
//     edge inside a class, -signal across classes, plus uniform noise in [-1, 1) drawn by the
//     unordered pair of nodes (both directions of an edge get the same row);
//   - split: in node-id order, the first `train_per_class` nodes of every class train, the next
//     `val_size` nodes validation, the next `test_size` test (fewer when the graph is small).
//     num_nodes must be at least num_classes * train_per_class + val_size + 1 (661 with the
//     defaults), which leaves the test a node whatever classes the seed draws.
//
// Every random draw is Philox(seed, stream, index) (framework/rng.h), a pure function of its
// index, so the result is the same for any number of OpenMP threads. The stages over the nodes and
// the edges run in parallel, the split included (the alias tables one class per thread); only
// check_splits' pass over the split's ids is serial.
//
// Memory, for graphs of 100M nodes: the result holds 4 N F bytes of features and a Graph of about
// 16 bytes an edge (the CSR both ways; 20 with i64 offsets, past 2^31 edges) and 24 bytes a node. The graph
// is built first, and what only its build needs is freed before the features are allocated: the weights, the
// alias tables (16 bytes a node), the drawn pairs (8 bytes a pair: 4 an edge) and the sorts' staging (4 bytes
// an edge). So the peak is the finished dataset.
#pragma once

#include <cstdint>

#include "gat/datasets/dataset.h"

namespace gat {

struct GeneratorOptions {
  int64_t num_nodes = 10000;
  double avg_degree = 16.0;  // directed edges per node before deduplication
  uint64_t seed = 0;
  int64_t num_classes = 8;
  int64_t num_features = 32;
  int64_t num_edge_features = 0;  // D of Dataset::edge_attr; 0: none
  double intra_fraction = 0.8;    // share of edges drawn inside a block
  double pareto_alpha = 2.5;      // degree tail exponent (> 1); smaller is more skewed
  double signal = 0.5;            // prototype strength relative to the noise
  int64_t train_per_class = 20;
  int64_t val_size = 500;
  int64_t test_size = 1000;
};

Dataset generate_sbm(const GeneratorOptions& options);

}  // namespace gat
