// Neighbour sampling for mini-batch training (GraphSAGE's, as PyG's NeighborLoader and DGL's
// MultiLayerNeighborSampler do it): from a batch of seed nodes, each layer keeps at most
// `fanout` in-edges of every node it must compute, and the sources of those edges are the nodes
// the layer below must compute.
//
// A sampled layer is a block: a bipartite Graph of Ns sources into Nd destinations in local ids.
// The destinations are the FIRST Nd sources (local id i < Nd is the same node on both sides), so
// the self loops GATConv and GATv2Conv add (i -> i for i < min(Ns, Nd)) join each destination to
// itself, and the layer's x_dst is the first Nd rows of its x_src. The sources after them are the
// new nodes, in the order in which the destinations' sampled edges first name them
// (ops::sample_neighbors, framework/ops/sample_neighbors.h, makes one layer).
//
// The draws are Philox (rng.h) keyed by (seed, batch key, layer, node): the same seed and batch
// key give the same blocks, bit for bit, for any number of threads and in any order of batches.
// The graph is read, never changed: one sampler may sample on several threads at once.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "gat/framework/check.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/sample_neighbors.h"

namespace gat {

// One sampled layer.
struct SampledBlock {
  Graph graph;                     // Ns sources -> Nd destinations, local ids, on the CPU
  std::vector<int32_t> src_nodes;  // (Ns,) the global id of each local source; the first Nd
                                   // are the destinations
  std::vector<int32_t> edge_ids;   // (E,) the sampled graph's id of each edge, in graph's edge
                                   // order (to gather edge features: rows edge_ids of edge_attr)
  int64_t num_dst() const { return graph.num_dst_nodes(); }
};

// The blocks of one batch, input layer first: blocks[0]'s sources are the nodes whose features
// the model reads, blocks.back()'s destinations are the seeds in the order given. Layer l's
// outputs are layer l + 1's inputs: blocks[l + 1].src_nodes is the first blocks[l].num_dst()
// entries of blocks[l].src_nodes.
struct SampledBatch {
  std::vector<SampledBlock> blocks;
  const std::vector<int32_t>& input_nodes() const { return blocks.front().src_nodes; }
};

struct NeighborSamplerOptions {
  // In-edges kept per node, per hop from the seeds, as PyG's num_neighbors: [25, 10] keeps 25
  // in-edges of each seed (the output layer's block) and 10 of each node those name (the input
  // layer's). -1: all of them. One entry per layer of the model.
  std::vector<int64_t> fanouts;
  // Draw with replacement: exactly `fanout` edges per node that has any (an edge may repeat, the
  // block then holds it more than once). Without: min(fanout, degree) distinct edges.
  bool replace = false;
  uint64_t seed = 0;

  static constexpr int64_t kMaxLayers = 64;  // the batch key and layer share a Philox stream
  static constexpr Range<int64_t> kFanoutRange{-1, std::numeric_limits<int32_t>::max()};  // 0: none
  // Throws a gat::Error naming the first bad value: no fanouts, more than kMaxLayers, a fanout
  // outside kFanoutRange.
  void validate() const;
};

// `nodes` in the order of a Fisher-Yates shuffle drawn by Philox from (seed, round), on streams
// apart from the sampler's: the same pair gives the same order (the loader's seeds in epoch
// `round`).
std::vector<int32_t> shuffle_nodes(std::vector<int32_t> nodes, uint64_t seed, uint64_t round);

class NeighborSampler {
 public:
  // graph: the CPU graph to sample, by destination (its in-edges), WITHOUT the self loops the
  // layers add (a loop that is sampled takes a fanout slot, then the layer replaces it).
  // device: where its CSR is copied and the draws run (ops::sample_neighbors); the blocks are the
  // same, bit for bit, on either.
  NeighborSampler(Graph graph, NeighborSamplerOptions options, Device device = Device::cpu);

  // The blocks of `seeds` (distinct node ids of the graph; throws a gat::Error naming a repeated
  // or out-of-range one). batch_key tells batches apart (e.g. epoch * batches + batch): below
  // 2^57. On the CPU parallel over each layer's destinations (OpenMP); on CUDA one thread per
  // destination. The blocks come back to the host either way.
  SampledBatch sample(const std::vector<int32_t>& seeds, uint64_t batch_key) const;
  // The same blocks where the sampler samples, as the hops made them: input layer first, layer
  // l's src_nodes (Ns_l,), edge_ids and its CSR (row_ptr, col) in local ids. Nothing comes back
  // to the host but each hop's counts (one wait per hop on CUDA; ops::block_graph makes a
  // layer's Graph there).
  std::vector<ops::SampledLayer> sample_layers(const std::vector<int32_t>& seeds, uint64_t batch_key) const;

  const Graph& graph() const { return graph_; }
  const NeighborSamplerOptions& options() const { return options_; }
  Device device() const { return row_ptr_.device(); }

 private:
  Graph graph_;
  NeighborSamplerOptions options_;
  Tensor row_ptr_, edge_src_;  // graph_'s (N+1,) and (E,) i32, on the sampler's device
};

}  // namespace gat
