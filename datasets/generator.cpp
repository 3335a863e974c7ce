#include "gat/datasets/generator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/detail/host_parallel.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/progress.h"
#include "gat/framework/rng.h"

namespace gat {

namespace {

// One Philox stream per kind of draw; the index names the element.
// Edge feature d draws from stream kEdgeFeature + d (the last kind, so no stream is shared).
enum Stream : uint64_t { kClass = 1, kWeight, kStubs, kEdge, kPrototype, kFeature, kEdgeFeature };
constexpr uint64_t kDrawsPerEdge = 5;  // intra coin (1), class (2) and node (2) of the other end

// Uniform integer in [0, n) from one 32-bit draw (Lemire's multiply-shift).
inline int64_t draw_below(uint64_t seed, uint64_t stream, uint64_t index, int64_t n) {
  return static_cast<int64_t>(
      (static_cast<uint64_t>(philox_u32(seed, stream, index)) * static_cast<uint64_t>(n)) >> 32);
}

// Uniform in [0, 1) with 32 random bits.
inline double draw_unit(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox_u32(seed, stream, index) * (1.0 / 4294967296.0);
}

// Walker/Vose alias table over ids[0, n) with weights w[id]: O(1) sampling proportional to
// weight. One slot is 16 bytes, so a draw touches one cache line.
struct AliasTable {
  struct Slot {
    double keep;    // probability of taking `id` rather than `alias`
    int32_t id;     // the slot's own outcome
    int32_t alias;  // the outcome taken otherwise
  };
  std::vector<Slot> slots;  // (n,)

  AliasTable() = default;
  AliasTable(const int32_t* ids, size_t n, const std::vector<double>& w) {
    slots.resize(n);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += w[static_cast<size_t>(ids[i])];
    std::vector<double> scaled(n);  // (n,) weight * n / total
    std::vector<size_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      slots[i] = Slot{1.0, ids[i], ids[i]};
      scaled[i] = w[static_cast<size_t>(ids[i])] * static_cast<double>(n) / total;
      (scaled[i] < 1.0 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      const size_t s = small.back(), l = large.back();
      small.pop_back();
      slots[s].keep = scaled[s];
      slots[s].alias = ids[l];
      scaled[l] -= 1.0 - scaled[s];
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    // Slots left in either list hold 1 up to rounding: they keep their own outcome.
  }

  int32_t sample(uint64_t seed, uint64_t index) const {
    const Slot& slot =
        slots[static_cast<size_t>(draw_below(seed, kEdge, index, static_cast<int64_t>(slots.size())))];
    return draw_unit(seed, kEdge, index + 1) < slot.keep ? slot.id : slot.alias;
  }
};

// The nodes of each class, ids ascending (a stable counting sort by class).
struct ClassMembers {
  std::vector<int32_t> members;  // (N,) class k's nodes at [start[k], start[k+1])
  std::vector<int64_t> start;    // (C+1,)
  int64_t size(int64_t k) const { return start[static_cast<size_t>(k) + 1] - start[static_cast<size_t>(k)]; }
  const int32_t* of(int64_t k) const { return members.data() + start[static_cast<size_t>(k)]; }
};

ClassMembers group_by_class(int64_t n, int64_t c, const int32_t* y) {
  ClassMembers classes;
  classes.start = detail::counting_sort(
      "generate_sbm", n, c,
      [&](int64_t begin, int64_t end, auto&& emit) {
        for (int64_t i = begin; i < end; ++i) emit(y[i], static_cast<int32_t>(i));
      },
      [&](int64_t total) { classes.members.resize(static_cast<size_t>(total)); },
      [&](int64_t pos, int32_t i) { classes.members[static_cast<size_t>(pos)] = i; });
  return classes;
}

// The split in node-id order: the first train_per_class nodes of each class train; of the other
// nodes, the first val_size validate and the next test_size test. In parallel: a node's rank among
// the others is its id less the training nodes before it.
void split_nodes(const GeneratorOptions& o, const ClassMembers& classes, Dataset& data) {
  const int64_t n = o.num_nodes;
  std::vector<uint8_t> trains(static_cast<size_t>(n), 0);  // (N,) 1 for a training node
  int64_t train_count = 0;
  for (int64_t k = 0; k < o.num_classes; ++k) {
    const int64_t take = std::min(o.train_per_class, classes.size(k));
    for (int64_t j = 0; j < take; ++j) trains[static_cast<size_t>(classes.of(k)[j])] = 1;
    train_count += take;
  }
  const int64_t val_count = std::min(o.val_size, n - train_count);
  const int64_t test_count = std::min(o.test_size, n - train_count - val_count);
  data.train_index = Tensor::empty({train_count}, DType::i32);
  data.val_index = Tensor::empty({val_count}, DType::i32);
  data.test_index = Tensor::empty({test_count}, DType::i32);
  int32_t *train = data.train_index.data<int32_t>(), *val = data.val_index.data<int32_t>(),
          *test = data.test_index.data<int32_t>();
  const int blocks = detail::parallel_blocks(n);
  std::vector<int64_t> trains_before(static_cast<size_t>(blocks) + 1, 0);  // (blocks+1,) after the scan
#pragma omp parallel for schedule(static, 1) if (blocks > 1)
  for (int b = 0; b < blocks; ++b)
    for (int64_t i = detail::block_begin(n, b, blocks); i < detail::block_begin(n, b + 1, blocks); ++i)
      trains_before[static_cast<size_t>(b) + 1] += trains[static_cast<size_t>(i)];
  detail::inclusive_scan(trains_before.data() + 1, blocks);
#pragma omp parallel for schedule(static, 1) if (blocks > 1)
  for (int b = 0; b < blocks; ++b) {
    int64_t t = trains_before[static_cast<size_t>(b)];
    for (int64_t i = detail::block_begin(n, b, blocks); i < detail::block_begin(n, b + 1, blocks); ++i) {
      const int64_t other = i - t;  // the node's rank among the non-training nodes
      if (trains[static_cast<size_t>(i)])
        train[t++] = static_cast<int32_t>(i);
      else if (other < val_count)
        val[other] = static_cast<int32_t>(i);
      else if (other - val_count < test_count)
        test[other - val_count] = static_cast<int32_t>(i);
    }
  }
}

// The undirected edges, Chung-Lu style, as the header says, then symmetrised, deduplicated and
// without self loops. The alias tables, the stub counts and theta are freed before the graph is
// built, so that they never sit beside its sort.
Graph draw_graph(const GeneratorOptions& o, const int32_t* y, ClassMembers classes,
                 std::vector<double> theta) {
  const int64_t n = o.num_nodes, c = o.num_classes;
  const uint64_t seed = o.seed;
  std::vector<int32_t> src, dst;  // (pairs,) the first end and the other end
  {
    // Alias tables: the nodes of each class, and the classes by total weight.
    std::vector<AliasTable> block(static_cast<size_t>(c));
    std::vector<double> class_weight(static_cast<size_t>(c), 0.0);  // (C,) sum of theta
    detail::FirstException error;                                   // a table may not fit in memory
#pragma omp parallel for schedule(dynamic, 1) if (n > ops::detail::kParallelThreshold)
    for (int64_t k = 0; k < c; ++k)
      error.capture([&] {
        const int32_t* ids = classes.of(k);
        const size_t size = static_cast<size_t>(classes.size(k));
        block[static_cast<size_t>(k)] = AliasTable(ids, size, theta);
        for (size_t i = 0; i < size; ++i)
          class_weight[static_cast<size_t>(k)] += theta[static_cast<size_t>(ids[i])];
      });
    error.rethrow();
    std::vector<int32_t> nonempty;  // the classes with a node
    for (int64_t k = 0; k < c; ++k)
      if (classes.size(k) > 0) nonempty.push_back(static_cast<int32_t>(k));
    const AliasTable class_table(nonempty.data(), nonempty.size(), class_weight);
    std::vector<int32_t>().swap(classes.members);

    // Node u starts floor(m_u) or floor(m_u) + 1 edges (the fraction as a coin) with
    // m_u = pairs * theta_u / sum(theta); the other end is ~ theta within u's class with
    // probability intra_fraction, else ~ theta overall (class first, then node). Edges are laid
    // out by first end, so only the other end costs a random memory access. The pairs may pass
    // 2^31 (the graph then has i64 offsets), so the counts and their sums are 64-bit.
    const double total_weight = std::accumulate(class_weight.begin(), class_weight.end(), 0.0);
    const double per_weight = o.avg_degree * static_cast<double>(n) / 2.0 / total_weight;
    std::vector<int64_t> first(static_cast<size_t>(n) + 1, 0);  // (N+1,) edge offsets by first end
    int64_t pairs = 0;
#pragma omp parallel for reduction(+ : pairs) if (n > ops::detail::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      const double m = per_weight * theta[static_cast<size_t>(i)];
      const double whole = std::floor(m);
      first[i + 1] =
          static_cast<int64_t>(whole) + (draw_unit(seed, kStubs, static_cast<uint64_t>(i)) < m - whole);
      pairs += first[i + 1];
    }
    GAT_CHECK(pairs <= kMaxSortedEdges / 2, "generate_sbm: ", pairs,
              " edge pairs are too many: the graph build sorts both directions, at most 2^32 - 1 edges");
    detail::inclusive_scan(first.data() + 1, n);
    std::vector<double>().swap(theta);
    progress::Stage drawing("synthetic: edge pairs drawn", pairs);
    src.resize(static_cast<size_t>(pairs));
    dst.resize(static_cast<size_t>(pairs));
#pragma omp parallel for schedule(dynamic, 4096) if (pairs > ops::detail::kParallelThreshold)
    for (int64_t u = 0; u < n; ++u) {
      const int32_t cu = y[u];
      for (int64_t k = first[u]; k < first[u + 1]; ++k) {
        const uint64_t base = static_cast<uint64_t>(k) * kDrawsPerEdge;
        const bool intra = draw_unit(seed, kEdge, base) < o.intra_fraction;
        const int32_t cv = intra ? cu : class_table.sample(seed, base + 1);
        src[k] = static_cast<int32_t>(u);
        dst[k] = block[static_cast<size_t>(cv)].sample(seed, base + 3);
      }
    }
    drawing.done(std::to_string(pairs));
  }
  GraphBuildOptions options;
  options.symmetrize = true;
  options.remove_self_loops = true;
  return Graph::from_edges(n, std::move(src), std::move(dst), options);  // frees src and dst
}

}  // namespace

Dataset generate_sbm(const GeneratorOptions& o) {
  GAT_CHECK(o.num_nodes > 0 && o.num_nodes <= std::numeric_limits<int32_t>::max(), "generate_sbm: num_nodes ",
            o.num_nodes, " outside [1, ", std::numeric_limits<int32_t>::max(), "]");
  GAT_CHECK(std::isfinite(o.avg_degree) && o.avg_degree >= 0.0, "generate_sbm: avg_degree ", o.avg_degree,
            " must be a finite number >= 0");
  GAT_CHECK(o.avg_degree * static_cast<double>(o.num_nodes) <= static_cast<double>(kMaxSortedEdges),
            "generate_sbm: avg_degree ", o.avg_degree, " for ", o.num_nodes,
            " nodes gives too many edges (about ", o.avg_degree * static_cast<double>(o.num_nodes),
            "; the graph build sorts at most 2^32 - 1)");
  GAT_CHECK(o.num_classes > 0 && o.num_classes <= o.num_nodes, "generate_sbm: num_classes ", o.num_classes,
            " outside [1, num_nodes]");
  GAT_CHECK(o.num_features > 0, "generate_sbm: num_features ", o.num_features, " must be positive");
  GAT_CHECK(o.num_edge_features >= 0 && o.num_edge_features <= 4096, "generate_sbm: num_edge_features ",
            o.num_edge_features, " is outside [0, 4096]");
  GAT_CHECK(o.intra_fraction >= 0.0 && o.intra_fraction <= 1.0, "generate_sbm: intra_fraction ",
            o.intra_fraction, " outside [0, 1]");
  GAT_CHECK(std::isfinite(o.signal), "generate_sbm: signal ", o.signal, " must be a finite number");
  GAT_CHECK(o.pareto_alpha > 1.0, "generate_sbm: pareto_alpha ", o.pareto_alpha, " must exceed 1");
  GAT_CHECK(o.train_per_class >= 0 && o.val_size >= 0 && o.test_size >= 0,
            "generate_sbm: negative split size");
  // Edges are deduplicated: no node can have more than N - 1 neighbours, and asking for more only
  // draws pairs to throw away (1,000 nodes at degree 100,000 drew 50M pairs for 1M edges).
  GAT_CHECK(o.avg_degree <= static_cast<double>(o.num_nodes - 1), "generate_sbm: avg_degree ", o.avg_degree,
            " exceeds what ", o.num_nodes, " nodes allow without repeated edges (", o.num_nodes - 1, ")");
  // The splits take nodes in id order: up to train_per_class of each class for training, then
  // val_size for validation, then the test. Whatever classes the seed draws, the test gets a node
  // only from min_nodes on (661 with the defaults); refused before any work, not after it.
  int64_t min_nodes = 0;
  const bool min_fits = !__builtin_mul_overflow(o.num_classes, o.train_per_class, &min_nodes) &&
                        !__builtin_add_overflow(min_nodes, o.val_size, &min_nodes) &&
                        !__builtin_add_overflow(min_nodes, int64_t{1}, &min_nodes);
  GAT_CHECK(min_fits && o.num_nodes >= min_nodes, "generate_sbm: ", o.num_nodes,
            " nodes are too few for the splits: ", "at least ",
            min_fits ? detail::concat(min_nodes) : std::string("2^63"), " are needed (", o.num_classes,
            " classes x ", o.train_per_class, " training nodes + ", o.val_size,
            " validation nodes + a test node)");
  const int64_t n = o.num_nodes, c = o.num_classes, f = o.num_features;
  const uint64_t seed = o.seed;

  Dataset data;
  data.name = detail::concat("synthetic:", n, ":", o.avg_degree, ":", seed);
  data.num_classes = c;

  // Classes and Pareto weights theta = (1 - u)^(-1 / (alpha - 1)), u in [0, 1).
  data.y = Tensor::empty({n}, DType::i32);
  int32_t* y = data.y.data<int32_t>();                // (N,)
  std::vector<double> theta(static_cast<size_t>(n));  // (N,)
  const double exponent = -1.0 / (o.pareto_alpha - 1.0);
#pragma omp parallel for if (n > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<int32_t>(draw_below(seed, kClass, static_cast<uint64_t>(i), c));
    theta[i] = std::pow(1.0 - draw_unit(seed, kWeight, static_cast<uint64_t>(i)), exponent);
  }
  ClassMembers classes = group_by_class(n, c, y);
  split_nodes(o, classes, data);
  data.graph = draw_graph(o, y, std::move(classes), std::move(theta));

  // Features: signal * prototype[class] + noise in [-1, 1).
  std::vector<float> prototype(static_cast<size_t>(c * f));  // (C, F) +-1
  for (int64_t i = 0; i < c * f; ++i)
    prototype[i] = (philox_u32(seed, kPrototype, static_cast<uint64_t>(i)) & 1u) ? 1.0f : -1.0f;
  progress::Stage features("synthetic: features", n * f);
  data.x = Tensor::empty({n, f}, DType::f32, Device::cpu, "generate_sbm features");
  float* x = data.x.data<float>();  // (N, F)
  const float signal = static_cast<float>(o.signal);
#pragma omp parallel for if (n * f > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float* proto = prototype.data() + static_cast<int64_t>(y[i]) * f;
    for (int64_t j = 0; j < f; ++j) {
      const uint64_t index = static_cast<uint64_t>(i * f + j);
      x[i * f + j] = signal * proto[j] + 2.0f * philox_uniform(seed, kFeature, index) - 1.0f;
    }
  }

  features.done(detail::concat(n, " x ", f));

  // Edge features: signal * (+1 between nodes of one class, else -1) + noise in [-1, 1) drawn by
  // the unordered pair, so that both directions of an edge get the same row.
  if (o.num_edge_features > 0) {
    const int64_t d_count = o.num_edge_features, edges = data.graph.num_edges();
    progress::Stage edge_features("synthetic: edge features", edges * d_count);
    data.edge_attr = Tensor::empty({edges, d_count}, DType::f32, Device::cpu, "generate_sbm edge features");
    float* a = data.edge_attr.data<float>();                          // (E, D)
    const int32_t* edge_src = data.graph.edge_src().data<int32_t>();  // (E,)
    dispatch_offsets(data.graph, [&](auto offset) {
      const auto* row_ptr = data.graph.row_ptr().data<decltype(offset)>();  // (N+1,)
#pragma omp parallel for schedule(dynamic, 4096) if (edges * d_count > ops::detail::kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e) {
          const int64_t j = edge_src[e];
          const uint64_t pair = static_cast<uint64_t>(std::min(i, j)) * static_cast<uint64_t>(n) +
                                static_cast<uint64_t>(std::max(i, j));
          const float sign = y[i] == y[j] ? signal : -signal;
          for (int64_t d = 0; d < d_count; ++d)
            a[e * d_count + d] =
                sign + 2.0f * philox_uniform(seed, kEdgeFeature + static_cast<uint64_t>(d), pair) - 1.0f;
        }
      }
    });
    edge_features.done(detail::concat(edges, " x ", d_count));
  }

  check_splits(
      data, {detail::concat(data.name, " (training: the first ", o.train_per_class, " nodes of each class)"),
             detail::concat(data.name, " (validation: the ", o.val_size,
                            " nodes after the training ones, of ", n, ")"),
             detail::concat(data.name, " (test: the ", o.test_size, " nodes after the validation ones, of ",
                            n, ")")});
  return data;
}

}  // namespace gat
