#include "gat/datasets/planetoid.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "gat/datasets/pickle.h"
#include "gat/datasets/text.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/quote.h"

namespace gat {

namespace {

// Validation-set size of the public split.
constexpr int64_t kValSize = 500;

struct Parts {
  std::string dir, name;
  std::string path(const char* part) const { return dir + "/ind." + name + "." + part; }
};

Tensor read_dense(const std::string& path) { return pickle::to_dense(pickle::Document::load(path)); }

// test.index: one node id per line (blank lines ignored), all distinct and non-negative.
std::vector<int64_t> read_test_index(const std::string& path) {
  const std::string content = text::read_file(path);
  text::Lines lines(content);
  std::string_view line;
  std::vector<int64_t> ids;
  while (lines.next(line)) {
    if (text::blank(line)) continue;
    const std::string where = detail::concat(path, ":", lines.number());
    const std::vector<int64_t> fields = text::parse_ints(line, where);
    GAT_CHECK(fields.size() == 1, where, ": expected one node id, got ", fields.size(), " fields");
    GAT_CHECK(fields[0] >= 0 && fields[0] <= std::numeric_limits<int32_t>::max(), where, ": node id ",
              fields[0], " is out of range");
    ids.push_back(fields[0]);
  }
  GAT_CHECK(!ids.empty(), path, ": no test ids");
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  GAT_CHECK(dup == sorted.end(), path, ": test id ", dup == sorted.end() ? 0 : *dup, " appears twice");
  return ids;
}

}  // namespace

Dataset load_planetoid(const std::string& name, const std::string& data_dir) {
  Parts parts{data_dir, name};
  std::transform(parts.name.begin(), parts.name.end(), parts.name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  GAT_CHECK(parts.name == "cora" || parts.name == "citeseer" || parts.name == "pubmed",
            "load_planetoid: unknown dataset ", quote(name), " (expected cora, citeseer or pubmed)");

  const Tensor x = read_dense(parts.path("x")), tx = read_dense(parts.path("tx")),
               allx = read_dense(parts.path("allx"));  // (rows, F) f32 each
  const Tensor y = read_dense(parts.path("y")), ty = read_dense(parts.path("ty")),
               ally = read_dense(parts.path("ally"));  // (rows, C) one-hot each
  const std::vector<int64_t> test = read_test_index(parts.path("test.index"));

  // Consistency of the parts with one another.
  const int64_t features = allx.size(1), classes = ally.size(1);
  auto same_cols = [&](const Tensor& t, const char* part, int64_t cols, const char* ref) {
    GAT_CHECK(t.size(1) == cols, "load_planetoid: ", parts.path(part), " has ", t.size(1), " columns, ",
              parts.path(ref), " has ", cols);
  };
  auto same_rows = [&](const Tensor& a, const char* pa, int64_t rows, const char* pb) {
    GAT_CHECK(a.size(0) == rows, "load_planetoid: ", parts.path(pa), " has ", a.size(0), " rows, ",
              parts.path(pb), " has ", rows);
  };
  same_cols(x, "x", features, "allx");
  same_cols(tx, "tx", features, "allx");
  same_cols(y, "y", classes, "ally");
  same_cols(ty, "ty", classes, "ally");
  GAT_CHECK(classes > 0, "load_planetoid: ", parts.path("ally"), " has no label columns");
  same_rows(y, "y", x.size(0), "x");
  same_rows(ally, "ally", allx.size(0), "allx");
  same_rows(ty, "ty", tx.size(0), "tx");
  same_rows(tx, "tx", static_cast<int64_t>(test.size()), "test.index");

  // Node count: allx rows, then the test rows. CiteSeer's test.index skips ids (isolated
  // nodes); as in PyG, its tx/ty are widened to the whole id range with all-zero rows.
  const int64_t base = allx.size(0), test_rows = tx.size(0);
  std::vector<int64_t> sorted = test;
  std::sort(sorted.begin(), sorted.end());
  const bool widened = parts.name == "citeseer";
  const int64_t span = widened ? sorted.back() - sorted.front() + 1 : test_rows;
  GAT_CHECK(span <= 2 * test_rows, "load_planetoid: ", parts.path("test.index"), ": the ids span ", span,
            " nodes for ", test_rows, " test rows (at most twice as many allowed)");
  const int64_t n = base + span;
  GAT_CHECK(n <= std::numeric_limits<int32_t>::max(), "load_planetoid: too many nodes (", n, ")");
  GAT_CHECK(sorted.back() < n, "load_planetoid: ", parts.path("test.index"), ": test id ", sorted.back(),
            " is outside the ", n, " nodes (", base, " allx rows + ", span, " test rows)");
  GAT_CHECK(classes <= n, "load_planetoid: ", parts.path("ally"), " has ", classes, " label columns for ", n,
            " nodes (a class id must be below the number of nodes)");
  GAT_CHECK(x.size(0) + kValSize <= n, "load_planetoid: ", x.size(0), " training rows + ", kValSize,
            " validation nodes exceed the ", n, " nodes");

  // Row r of cat(allx, tx) is allx row r or tx row tx_row[r - base]; widened (CiteSeer), tx row k
  // sits at base + sorted[k] - min and the other rows are all zero (tx_row -1). Then PyG's
  // x[test[k]] = x[sorted[k]]: final row i reads row from[i].
  std::vector<int64_t> tx_row(static_cast<size_t>(span), -1);  // (span,)
  for (int64_t k = 0; k < test_rows; ++k)
    tx_row[static_cast<size_t>(widened ? sorted[k] - sorted.front() : k)] = k;
  std::vector<int64_t> from(static_cast<size_t>(n));  // (N,)
  for (int64_t i = 0; i < n; ++i) from[i] = i;
  for (int64_t k = 0; k < test_rows; ++k) from[static_cast<size_t>(test[k])] = sorted[k];

  Dataset data;
  data.name = parts.name;
  data.preprocessing = Dataset::Preprocessing::row_normalize;
  data.num_classes = classes;
  data.x = Tensor::zeros({n, features}, DType::f32);
  data.y = Tensor::empty({n}, DType::i32);
  const float *allx_p = allx.data<float>(), *tx_p = tx.data<float>();  // (base, F), (test_rows, F)
  const float *ally_p = ally.data<float>(), *ty_p = ty.data<float>();  // (base, C), (test_rows, C)
  float* x_p = data.x.data<float>();                                   // (N, F)
  int32_t* y_p = data.y.data<int32_t>();                               // (N,)
#pragma omp parallel for if (n * features > ops::detail::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = from[i];
    const float *feat = nullptr, *onehot = nullptr;
    if (r < base) {
      feat = allx_p + r * features;
      onehot = ally_p + r * classes;
    } else if (const int64_t k = tx_row[static_cast<size_t>(r - base)]; k >= 0) {
      feat = tx_p + k * features;
      onehot = ty_p + k * classes;
    }
    if (feat) std::copy_n(feat, features, x_p + i * features);
    // argmax, first maximum wins; an all-zero (or missing) row gives class 0
    y_p[i] = onehot ? static_cast<int32_t>(std::max_element(onehot, onehot + classes) - onehot) : 0;
  }

  const int64_t train = x.size(0);
  std::vector<int32_t> index(static_cast<size_t>(train + kValSize));
  for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int32_t>(i);
  data.train_index = Tensor::from_vector(std::vector<int32_t>(index.begin(), index.begin() + train), {train});
  data.val_index = Tensor::from_vector(std::vector<int32_t>(index.begin() + train, index.end()), {kValSize});
  data.test_index = Tensor::from_vector(std::vector<int32_t>(sorted.begin(), sorted.end()), {test_rows});
  check_splits(
      data, {detail::concat(parts.path("x"), " (its ", train, " rows are the training nodes)"),
             detail::concat("the ", kValSize, " nodes after the rows of ", parts.path("x"), " (validation)"),
             parts.path("test.index")});

  // Graph: node -> neighbours, every id within the N nodes.
  const std::string graph_path = parts.path("graph");
  const auto adjacency = pickle::to_adjacency(pickle::Document::load(graph_path));
  std::vector<int32_t> src, dst;
  for (const auto& [node, neighbours] : adjacency) {
    GAT_CHECK(node >= 0 && node < n, "load_planetoid: ", graph_path, ": node ", node, " is outside [0, ", n,
              ")");
    for (const int64_t v : neighbours) {
      GAT_CHECK(v >= 0 && v < n, "load_planetoid: ", graph_path, ": node ", v, " (a neighbour of ", node,
                ") is outside [0, ", n, ")");
      src.push_back(static_cast<int32_t>(node));
      dst.push_back(static_cast<int32_t>(v));
    }
  }
  GraphBuildOptions options;
  options.symmetrize = true;
  options.remove_self_loops = true;
  data.graph = Graph::from_edges(n, src, dst, options);
  return data;
}

Tensor normalize_features(const Tensor& x) {
  check_dtype("normalize_features", "x", x, DType::f32);
  check_dim("normalize_features", "x", x, 2);
  Tensor out = x.to(Device::cpu).clone();
  const int64_t rows = out.size(0), cols = out.size(1);
  float* p = out.data<float>();  // (rows, cols)
  if (out.numel() == 0) return out.to(x.device());
  const float lowest = *std::min_element(p, p + out.numel());
#pragma omp parallel for if (out.numel() > ops::detail::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] -= lowest;
      sum += row[c];
    }
    const float scale = static_cast<float>(std::max(sum, 1.0));
    for (int64_t c = 0; c < cols; ++c) row[c] /= scale;
  }
  // x - min(x) passes the largest float when the features span more than it (-3e38 and 3e38).
  const auto bad = std::find_if(p, p + out.numel(), [](float v) { return !std::isfinite(v); });
  GAT_CHECK(bad == p + out.numel(), "normalize_features: row ", (bad - p) / cols,
            ": x - min(x) is not finite: the features span more than the largest float (min(x) is ", lowest,
            ")");
  return out.to(x.device());
}

}  // namespace gat
