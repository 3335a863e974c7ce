#include "gat/framework/neighbor_sampler.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "gat/framework/detail/host_parallel.h"
#include "gat/framework/rng.h"

namespace gat {

namespace {

__extension__ using Uint128 = unsigned __int128;

// Draw k of node v's in-edges under (seed, stream): uniform in [0, n), from two Philox words (64
// bits, so the bias of the product's top bits is below n / 2^64). Two draws per Philox block.
uint32_t uniform_below(uint64_t seed, uint64_t stream, int32_t v, uint64_t k, uint32_t n) {
  const uint64_t counter = (static_cast<uint64_t>(static_cast<uint32_t>(v)) << 32) | (k / 2);
  const PhiloxBlock block = philox4x32(seed, stream, counter);
  const unsigned first = static_cast<unsigned>(k % 2) * 2;
  const uint64_t bits = (static_cast<uint64_t>(block.word(first)) << 32) | block.word(first + 1);
  return static_cast<uint32_t>((static_cast<Uint128>(bits) * n) >> 64);
}

// The in-edges node v keeps: `count` of its `degree` edges as offsets in [0, degree) into
// `picks`. All of them in order; with replacement `count` independent draws; without, Floyd's
// sample of distinct offsets, in increasing order.
void pick_edges(uint64_t seed, uint64_t stream, int32_t v, int64_t degree, int64_t count, bool replace,
                int32_t* picks) {
  const auto n = static_cast<uint32_t>(degree);
  if (count == degree && !replace) {
    std::iota(picks, picks + count, 0);
    return;
  }
  if (replace) {
    for (int64_t k = 0; k < count; ++k)
      picks[k] = static_cast<int32_t>(uniform_below(seed, stream, v, static_cast<uint64_t>(k), n));
    return;
  }
  // Floyd: for j = n - count .. n - 1, draw t in [0, j]; take t, or j when t is taken already.
  // Kept sorted, so a membership test is a binary search.
  int32_t* end = picks;
  for (int64_t j = degree - count, k = 0; j < degree; ++j, ++k) {
    const auto t = static_cast<int32_t>(
        uniform_below(seed, stream, v, static_cast<uint64_t>(k), static_cast<uint32_t>(j + 1)));
    int32_t* at = std::lower_bound(picks, end, t);
    const int32_t taken = at != end && *at == t ? static_cast<int32_t>(j) : t;
    at = std::lower_bound(picks, end, taken);  // j is above every offset so far: at == end then
    std::copy_backward(at, end, end + 1);
    *at = taken;
    ++end;
  }
}

// The shuffles' streams start here; the sampler's (batch key * kMaxLayers + hop) stay below.
constexpr uint64_t kShuffleStreams = uint64_t{1} << 63;

}  // namespace

std::vector<int32_t> shuffle_nodes(std::vector<int32_t> nodes, uint64_t seed, uint64_t round) {
  GAT_CHECK(round < kShuffleStreams, "shuffle_nodes: round ", round, " is 2^63 or more");
  for (size_t i = nodes.size(); i > 1; --i) {  // swap position i - 1 with one in [0, i)
    const uint32_t j = uniform_below(seed, kShuffleStreams + round, static_cast<int32_t>(i - 1), 0,
                                     static_cast<uint32_t>(i));
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

NeighborSampler::NeighborSampler(Graph graph, NeighborSamplerOptions options)
    : graph_(std::move(graph)), options_(std::move(options)) {
  options_.validate();
  GAT_CHECK(graph_.row_ptr().defined(), "NeighborSampler: the graph is empty (no row pointers)");
  GAT_CHECK(!graph_.is_bipartite(), "NeighborSampler: the graph is bipartite (", graph_.num_src_nodes(),
            " sources, ", graph_.num_dst_nodes(),
            " destinations): a node's neighbours must be nodes of the same set");
  GAT_CHECK(graph_.device() == Device::cpu, "NeighborSampler: the graph must be on the CPU");
  row_ptr_ = graph_.row_ptr().to_vector<int32_t>();
  edge_src_ = graph_.sources();
}

SampledBatch NeighborSampler::sample(const std::vector<int32_t>& seeds, uint64_t batch_key) const {
  const int64_t n = graph_.num_dst_nodes();
  GAT_CHECK(batch_key < kShuffleStreams / NeighborSamplerOptions::kMaxLayers, "NeighborSampler: batch key ",
            batch_key, " is 2^57 or more");
  std::vector<uint8_t> seen(static_cast<size_t>(n), 0);
  for (size_t k = 0; k < seeds.size(); ++k) {
    const int32_t v = seeds[k];
    GAT_CHECK(v >= 0 && v < n, "NeighborSampler: seed ", k, " is node ", v, ", outside [0, ", n, ")");
    GAT_CHECK(!seen[static_cast<size_t>(v)], "NeighborSampler: seed ", k, " is node ", v,
              " again (seeds must be distinct)");
    seen[static_cast<size_t>(v)] = 1;
  }
  const int64_t layers = static_cast<int64_t>(options_.fanouts.size());
  std::vector<SampledBlock> blocks(static_cast<size_t>(layers));
  const std::vector<int32_t>* dst = &seeds;
  for (int64_t hop = 0; hop < layers; ++hop) {  // from the seeds outwards: the output layer first
    SampledBlock& block = blocks[static_cast<size_t>(layers - 1 - hop)];
    block = sample_layer(*dst, options_.fanouts[static_cast<size_t>(hop)],
                         batch_key * NeighborSamplerOptions::kMaxLayers + static_cast<uint64_t>(hop));
    dst = &block.src_nodes;
  }
  return {std::move(blocks)};
}

SampledBlock NeighborSampler::sample_layer(const std::vector<int32_t>& dst_nodes, int64_t fanout,
                                           uint64_t stream) const {
  const auto nd = static_cast<int64_t>(dst_nodes.size());
  auto degree_of = [&](int32_t v) { return int64_t{row_ptr_[v + 1]} - row_ptr_[v]; };
  // Edges kept per destination, then their running sum: the block's row pointers.
  std::vector<int64_t> ends(static_cast<size_t>(nd) + 1, 0);  // (Nd+1,)
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t degree = degree_of(dst_nodes[static_cast<size_t>(i)]);
    const int64_t count = fanout < 0         ? degree
                          : options_.replace ? (degree > 0 ? fanout : 0)
                                             : std::min(fanout, degree);
    ends[static_cast<size_t>(i) + 1] = ends[static_cast<size_t>(i)] + count;
  }
  const int64_t edges = ends.back();
  GAT_CHECK(edges <= std::numeric_limits<int32_t>::max(), "NeighborSampler: a block of ", edges,
            " edges does not fit 32-bit edge ids (at most 2^31 - 1): lower the batch size or the fanouts");
  // The kept edges' ids in the sampled graph, each row in the order drawn.
  std::vector<int32_t> edge_ids(static_cast<size_t>(edges));  // (E,)
  detail::FirstException failure;
#pragma omp parallel for schedule(dynamic, 256) if (edges > detail::kParallelItems)
  for (int64_t i = 0; i < nd; ++i) {
    failure.capture([&] {
      const int32_t v = dst_nodes[static_cast<size_t>(i)];
      const size_t at = static_cast<size_t>(ends[static_cast<size_t>(i)]);
      const int64_t count = ends[static_cast<size_t>(i) + 1] - ends[static_cast<size_t>(i)];
      int32_t* row = edge_ids.data() + at;
      pick_edges(options_.seed, stream, v, degree_of(v), count, options_.replace, row);
      for (int64_t k = 0; k < count; ++k) row[k] += row_ptr_[v];
    });
  }
  failure.rethrow();
  // Local ids: the destinations first, then each new source where an edge first names it.
  SampledBlock block;
  block.src_nodes = dst_nodes;
  std::unordered_map<int32_t, int32_t> local;
  local.reserve(static_cast<size_t>(nd + edges));
  for (int64_t i = 0; i < nd; ++i) local.emplace(dst_nodes[static_cast<size_t>(i)], static_cast<int32_t>(i));
  std::vector<int32_t> col(static_cast<size_t>(edges));  // (E,) local source of each edge
  for (int64_t e = 0; e < edges; ++e) {
    const int32_t src = edge_src_[static_cast<size_t>(edge_ids[static_cast<size_t>(e)])];
    const auto [it, added] = local.emplace(src, static_cast<int32_t>(block.src_nodes.size()));
    if (added) block.src_nodes.push_back(src);
    col[static_cast<size_t>(e)] = it->second;
  }
  // Each row sorted by local source (the Graph's edge order), then by edge id.
#pragma omp parallel for schedule(dynamic, 256) if (edges > detail::kParallelItems)
  for (int64_t i = 0; i < nd; ++i) {
    failure.capture([&] {
      const size_t first = static_cast<size_t>(ends[static_cast<size_t>(i)]),
                   last = static_cast<size_t>(ends[static_cast<size_t>(i) + 1]);
      std::vector<std::pair<int32_t, int32_t>> row;  // (local source, edge id)
      row.reserve(last - first);
      for (size_t e = first; e < last; ++e) row.emplace_back(col[e], edge_ids[e]);
      std::sort(row.begin(), row.end());
      for (size_t e = first; e < last; ++e) std::tie(col[e], edge_ids[e]) = row[e - first];
    });
  }
  failure.rethrow();
  std::vector<int32_t> row_ptr(static_cast<size_t>(nd) + 1);  // (Nd+1,) fits: checked above
  for (size_t i = 0; i < row_ptr.size(); ++i) row_ptr[i] = static_cast<int32_t>(ends[i]);
  block.graph =
      Graph::from_csr(static_cast<int64_t>(block.src_nodes.size()), std::move(row_ptr), std::move(col));
  block.edge_ids = std::move(edge_ids);
  return block;
}

}  // namespace gat
