#include "gat/framework/neighbor_sampler.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "gat/framework/ops/detail/neighbor_draws.h"
#include "gat/framework/ops/sample_neighbors.h"

namespace gat {

namespace {

// The shuffles' streams start here; the sampler's (batch key * kMaxLayers + hop) stay below.
constexpr uint64_t kShuffleStreams = uint64_t{1} << 63;

}  // namespace

std::vector<int32_t> shuffle_nodes(std::vector<int32_t> nodes, uint64_t seed, uint64_t round) {
  GAT_CHECK(round < kShuffleStreams, "shuffle_nodes: round ", round, " is 2^63 or more");
  for (size_t i = nodes.size(); i > 1; --i) {  // swap position i - 1 with one in [0, i)
    const uint32_t j = ops::detail::uniform_below(seed, kShuffleStreams + round, static_cast<int32_t>(i - 1),
                                                  0, static_cast<uint32_t>(i));
    std::swap(nodes[i - 1], nodes[j]);
  }
  return nodes;
}

void NeighborSamplerOptions::validate() const {
  GAT_CHECK(!fanouts.empty(), "NeighborSampler: no fanouts (one per layer: in-edges kept per node, -1 all)");
  GAT_CHECK(static_cast<int64_t>(fanouts.size()) <= kMaxLayers, "NeighborSampler: ", fanouts.size(),
            " fanouts, more than ", kMaxLayers, " layers");
  for (size_t h = 0; h < fanouts.size(); ++h)
    check_in_range(detail::concat("NeighborSampler: fanout ", h + 1), fanouts[h], kFanoutRange);
}

NeighborSampler::NeighborSampler(Graph graph, NeighborSamplerOptions options, Device device)
    : graph_(std::move(graph)), options_(std::move(options)) {
  options_.validate();
  GAT_CHECK(graph_.row_ptr().defined(), "NeighborSampler: the graph is empty (no row pointers)");
  GAT_CHECK(!graph_.is_bipartite(), "NeighborSampler: the graph is bipartite (", graph_.num_src_nodes(),
            " sources, ", graph_.num_dst_nodes(),
            " destinations): a node's neighbours must be nodes of the same set");
  GAT_CHECK(graph_.device() == Device::cpu, "NeighborSampler: the graph must be on the CPU");
  // Sampled edge ids are 32-bit: a graph of wide offsets is sampled through them narrowed.
  row_ptr_ = narrow_offsets("NeighborSampler", graph_.row_ptr()).to(device);
  edge_src_ = graph_.edge_src().to(device);
}

std::vector<ops::SampledLayer> NeighborSampler::sample_layers(const std::vector<int32_t>& seeds,
                                                              uint64_t batch_key) const {
  const int64_t n = graph_.num_dst_nodes();
  GAT_CHECK(batch_key < kShuffleStreams / NeighborSamplerOptions::kMaxLayers, "NeighborSampler: batch key ",
            batch_key, " is 2^57 or more");
  // The first seed outside [0, n) or equal to an earlier one. Repeats are found by sorting
  // (node, position) pairs, not with a table of every node: that was 100 MB a batch at 100M nodes.
  const size_t outside = static_cast<size_t>(
      std::find_if(seeds.begin(), seeds.end(), [&](int32_t v) { return v < 0 || v >= n; }) - seeds.begin());
  std::vector<std::pair<int32_t, size_t>> by_node(outside);  // (node, position) of the seeds before it
  for (size_t k = 0; k < outside; ++k) by_node[k] = {seeds[k], k};
  std::sort(by_node.begin(), by_node.end());
  size_t repeat = outside;  // the first position whose node came before it
  for (size_t i = 1; i < by_node.size(); ++i)
    if (by_node[i].first == by_node[i - 1].first) repeat = std::min(repeat, by_node[i].second);
  GAT_CHECK(repeat == outside, "NeighborSampler: seed ", repeat, " is node ", seeds[repeat],
            " again (seeds must be distinct)");
  GAT_CHECK(outside == seeds.size(), "NeighborSampler: seed ", outside, " is node ", seeds[outside],
            ", outside [0, ", n, ")");
  const size_t layers = options_.fanouts.size();
  std::vector<ops::SampledLayer> out(layers);
  Tensor dst = Tensor::from_vector(seeds, {static_cast<int64_t>(seeds.size())}, device());
  for (size_t hop = 0; hop < layers; ++hop) {  // from the seeds outwards: the output layer first
    const ops::NeighborDraw draw{options_.fanouts[hop], options_.replace, options_.seed,
                                 batch_key * NeighborSamplerOptions::kMaxLayers + hop};
    ops::SampledLayer& layer = out[layers - 1 - hop];
    layer = ops::sample_neighbors(row_ptr_, edge_src_, dst, draw);
    dst = layer.src_nodes;
  }
  return out;
}

SampledBatch NeighborSampler::sample(const std::vector<int32_t>& seeds, uint64_t batch_key) const {
  SampledBatch batch;
  for (const ops::SampledLayer& layer : sample_layers(seeds, batch_key)) {
    SampledBlock block;
    block.src_nodes = layer.src_nodes.to_vector<int32_t>();
    block.edge_ids = layer.edge_ids.to_vector<int32_t>();
    block.graph = Graph::from_csr(static_cast<int64_t>(block.src_nodes.size()),
                                  layer.row_ptr.to_vector<int32_t>(), layer.col.to_vector<int32_t>());
    batch.blocks.push_back(std::move(block));
  }
  return batch;
}

}  // namespace gat
