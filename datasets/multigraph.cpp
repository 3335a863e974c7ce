#include "gat/datasets/multigraph.h"

#include <random>

#include "gat/framework/check.h"

namespace gat {

namespace {

GraphData generate_graph(const MultiGraphOptions& o, const std::vector<double>& features_of,
                         const std::vector<int>& labels_of, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> size(std::max<int64_t>(1, o.nodes / 2), o.nodes + o.nodes / 2);
  const int64_t n = size(rng);
  std::uniform_int_distribution<int64_t> group(0, o.communities - 1);
  std::vector<int64_t> group_of(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(o.communities));
  for (int64_t i = 0; i < n; ++i) {
    group_of[static_cast<size_t>(i)] = group(rng);
    members[static_cast<size_t>(group_of[static_cast<size_t>(i)])].push_back(static_cast<int32_t>(i));
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<int32_t> src, dst;
  const auto starts = static_cast<int64_t>(o.avg_degree / 2);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < starts; ++k) {
      const std::vector<int32_t>& own = members[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
      const bool inside = unit(rng) < o.intra_fraction;
      const int64_t pool = inside ? static_cast<int64_t>(own.size()) : n;
      const int64_t pick = std::uniform_int_distribution<int64_t>(0, pool - 1)(rng);
      src.push_back(static_cast<int32_t>(i));
      dst.push_back(inside ? own[static_cast<size_t>(pick)] : static_cast<int32_t>(pick));
    }
  GraphBuildOptions build;
  build.symmetrize = true;
  build.remove_self_loops = true;
  GraphData g;
  g.graph = Graph::from_edges(n, std::move(src), std::move(dst), build);
  const int64_t F = o.num_features, C = o.num_labels;
  std::vector<float> x(static_cast<size_t>(n * F)), y(static_cast<size_t>(n * C));
  std::uniform_real_distribution<double> noise(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    const auto c = static_cast<size_t>(group_of[static_cast<size_t>(i)]);
    for (int64_t f = 0; f < F; ++f)
      x[static_cast<size_t>(i * F + f)] = static_cast<float>(
          o.signal * features_of[c * static_cast<size_t>(F) + static_cast<size_t>(f)] + noise(rng));
    for (int64_t l = 0; l < C; ++l) {
      const bool flip = unit(rng) < o.label_noise;
      y[static_cast<size_t>(i * C + l)] =
          static_cast<float>(labels_of[c * static_cast<size_t>(C) + static_cast<size_t>(l)] != flip);
    }
  }
  g.x = Tensor::from_vector(x, {n, F});
  g.y = Tensor::from_vector(y, {n, C});
  return g;
}

}  // namespace

MultiGraphDataset generate_multigraph(const MultiGraphOptions& o) {
  constexpr int64_t kMaxSize = int64_t{1} << 24;
  check_in_range("generate_multigraph: graphs", o.graphs, Range<int64_t>{3, 1 << 20});
  check_in_range("generate_multigraph: nodes", o.nodes, Range<int64_t>{2, kMaxSize});
  check_in_range("generate_multigraph: num_features", o.num_features, Range<int64_t>{1, 1 << 16});
  check_in_range("generate_multigraph: num_labels", o.num_labels, Range<int64_t>{1, 1 << 16});
  check_in_range("generate_multigraph: communities", o.communities, Range<int64_t>{1, 1 << 16});
  check_in_range("generate_multigraph: avg_degree", o.avg_degree, Range<double>{0.0, 1000.0});
  for (const auto& [what, p] : {std::pair{"intra_fraction", o.intra_fraction},
                                {"label_density", o.label_density},
                                {"label_noise", o.label_noise}})
    check_in_range(std::string("generate_multigraph: ") + what, p, Range<double>{0.0, 1.0});
  check_in_range("generate_multigraph: signal", o.signal, Range<double>{0.0, 1000.0});
  GAT_CHECK(o.graphs * (o.nodes + o.nodes / 2) <= kMaxSize * 4, "generate_multigraph: ", o.graphs,
            " graphs of up to ", o.nodes + o.nodes / 2, " nodes are too many nodes");
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> features_of(static_cast<size_t>(o.communities * o.num_features));  // (K, F) of +-1
  for (double& v : features_of) v = unit(rng) < 0.5 ? -1.0 : 1.0;
  std::vector<int> labels_of(static_cast<size_t>(o.communities * o.num_labels));  // (K, C) of 0 and 1
  for (int& v : labels_of) v = unit(rng) < o.label_density;
  MultiGraphDataset data;
  data.name = "synthetic-ppi";
  data.num_features = o.num_features;
  data.num_labels = o.num_labels;
  const int64_t held_out = std::max<int64_t>(1, o.graphs / 12);
  for (int64_t k = 0; k < o.graphs; ++k) {
    GraphData g = generate_graph(o, features_of, labels_of, rng);
    (k < o.graphs - 2 * held_out ? data.train
     : k < o.graphs - held_out   ? data.val
                                 : data.test)
        .push_back(std::move(g));
  }
  return data;
}

}  // namespace gat
