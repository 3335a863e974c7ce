#include "gat/datasets/ppi.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "gat/datasets/npy.h"
#include "gat/datasets/text.h"
#include "gat/framework/check.h"
#include "gat/framework/detail/json.h"
#include "gat/framework/io.h"
#include "gat/framework/quote.h"

namespace gat {

namespace {

struct Links {
  std::vector<int64_t> source, target;
  bool directed = false;
};

// An integer field of a JSON object, or an error naming the file and where.
int64_t integer_field(const nlohmann::json& object, const char* key, const std::string& where,
                      const std::string& path) {
  GAT_CHECK(object.is_object(), path, ": ", where, " is not an object");
  const auto it = object.find(key);
  GAT_CHECK(it != object.end(), path, ": ", where, " has no \"", key, "\"");
  GAT_CHECK(it->is_number_integer(), path, ": ", where, "'s \"", key, "\" is ", quote(it->dump()),
            ", not an integer");
  // get<int64_t> wraps an unsigned value past INT64_MAX: 2^64 - 1 was reported as the id -1.
  GAT_CHECK(!it->is_number_unsigned() || it->get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()},
            path, ": ", where, "'s \"", key, "\" is ", it->get<uint64_t>(), ", beyond a 64-bit integer");
  return it->get<int64_t>();
}

// The node-link JSON's links, after checking that its nodes are the ids 0..num_nodes-1.
Links read_links(const std::string& path, int64_t num_nodes) {
  nlohmann::json graph;
  std::string duplicate;
  try {
    const std::string bytes = io::read_regular_file(path);
    text::check_not_utf16(bytes, path);
    graph = detail::parse_json_unique_keys(bytes, duplicate);
  } catch (const nlohmann::json::exception& e) {
    GAT_FAIL(path, ": not valid JSON (", e.what(), ")");
  } catch (const detail::JsonTooDeep& e) {
    GAT_FAIL(path, ": not node-link data (", e.what(), ")");
  }
  GAT_CHECK(duplicate.empty(), path, ": the key ", quote(duplicate),
            " is given twice in one object (which value is meant cannot be told)");
  GAT_CHECK(graph.is_object(), path, ": the graph is not a JSON object (node-link data)");
  Links links;
  if (const auto directed = graph.find("directed"); directed != graph.end()) {
    GAT_CHECK(directed->is_boolean(), path, ": \"directed\" is ", quote(directed->dump()),
              ", not true or false");
    links.directed = directed->get<bool>();
  }
  const auto nodes = graph.find("nodes"), edges = graph.find("links");
  GAT_CHECK(nodes != graph.end() && nodes->is_array(), path, ": no \"nodes\" array");
  GAT_CHECK(edges != graph.end() && edges->is_array(), path, ": no \"links\" array");
  GAT_CHECK(static_cast<int64_t>(nodes->size()) == num_nodes, path, ": ", nodes->size(),
            " nodes, the .npy files have ", num_nodes, " rows");
  std::vector<char> seen(static_cast<size_t>(num_nodes), 0);
  for (size_t k = 0; k < nodes->size(); ++k) {
    const int64_t id = integer_field((*nodes)[k], "id", "node " + std::to_string(k), path);
    GAT_CHECK(id >= 0 && id < num_nodes && !seen[static_cast<size_t>(id)], path, ": node ", k, " has id ", id,
              id >= 0 && id < num_nodes ? ", given twice" : "", " (the ids must be 0 to ", num_nodes - 1,
              ", the rows of the .npy files)");
    seen[static_cast<size_t>(id)] = 1;
  }
  for (size_t k = 0; k < edges->size(); ++k) {
    const std::string where = "link " + std::to_string(k);
    const int64_t s = integer_field((*edges)[k], "source", where, path);
    const int64_t t = integer_field((*edges)[k], "target", where, path);
    GAT_CHECK(s >= 0 && s < num_nodes && t >= 0 && t < num_nodes, path, ": ", where, " (", s, " -> ", t,
              ") names a node outside [0, ", num_nodes, ")");
    links.source.push_back(s);
    links.target.push_back(t);
  }
  return links;
}

// The (rows, cols) of a 2-D array, or an error naming the file.
void check_matrix(const NpyArray& a, const std::string& path, int64_t cols_wanted) {
  GAT_CHECK(a.shape.size() == 2 && a.shape[0] >= 1 && a.shape[1] >= 1, path, ": shape ", shape_str(a.shape),
            " is not (N, ", cols_wanted > 0 ? std::to_string(cols_wanted) : std::string("F"),
            ") with N >= 1");
  GAT_CHECK(cols_wanted <= 0 || a.shape[1] == cols_wanted, path, ": shape ", shape_str(a.shape), " has ",
            a.shape[1], " columns, the training split's have ", cols_wanted);
}

// The tails of a split's file names, after "train" and the like.
constexpr const char* kGraphJson = "_graph.json";
constexpr const char* kFeatsNpy = "_feats.npy";
constexpr const char* kLabelsNpy = "_labels.npy";
constexpr const char* kGraphIdNpy = "_graph_id.npy";

// One split's graphs.
std::vector<GraphData> load_split(const std::string& dir, const std::string& split, MultiGraphDataset& data) {
  const auto file = [&](const char* tail) { return (std::filesystem::path(dir) / (split + tail)).string(); };
  const std::string feats_path = file(kFeatsNpy), labels_path = file(kLabelsNpy),
                    ids_path = file(kGraphIdNpy);
  const NpyArray feats = read_npy(feats_path), labels = read_npy(labels_path), ids = read_npy(ids_path);
  check_matrix(feats, feats_path, data.num_features);
  check_matrix(labels, labels_path, data.num_labels);
  const int64_t n = feats.shape[0];
  GAT_CHECK(labels.shape[0] == n, labels_path, ": ", labels.shape[0], " rows, ", feats_path, " has ", n);
  GAT_CHECK(ids.is_integer() && ids.shape == Shape{n}, ids_path, ": ", ids.descr, " ", shape_str(ids.shape),
            " is not (", n, ",) of integers (one graph id per row of ", feats_path, ")");
  data.num_features = feats.shape[1];
  data.num_labels = labels.shape[1];
  const std::vector<double> x = feats.values(), y = labels.values(), graph_of = ids.values();
  // values() is exact below 2^53 only: ids 2^53 and 2^53 + 1 both read as 2^53, and two graphs
  // became one.
  constexpr double kExactIds = 9007199254740992.0;  // 2^53
  for (size_t i = 0; i < graph_of.size(); ++i)
    GAT_CHECK(std::abs(graph_of[i]) < kExactIds, ids_path, ": row ", i, " has graph id ",
              std::to_string(graph_of[i]).substr(0, std::to_string(graph_of[i]).find('.')),
              ", beyond the ids (below 2^53 in magnitude) that can be told apart");
  for (size_t k = 0; k < x.size(); ++k)
    GAT_CHECK(std::isfinite(static_cast<float>(x[k])), feats_path, ": feature [",
              k / static_cast<size_t>(feats.shape[1]), ", ", k % static_cast<size_t>(feats.shape[1]),
              "] = ", x[k], " is not a finite f32");
  for (size_t k = 0; k < y.size(); ++k)
    GAT_CHECK(y[k] == 0 || y[k] == 1, labels_path, ": label [", k / static_cast<size_t>(labels.shape[1]),
              ", ", k % static_cast<size_t>(labels.shape[1]), "] = ", y[k], " is neither 0 nor 1");
  // first[b]: the first row of graph b (runs of consecutive ids), then n.
  std::vector<int64_t> first = {0};
  for (int64_t i = 1; i < n; ++i) {
    const double step = graph_of[static_cast<size_t>(i)] - graph_of[static_cast<size_t>(i) - 1];
    GAT_CHECK(step == 0 || step == 1, ids_path, ": row ", i, " has graph id ",
              graph_of[static_cast<size_t>(i)], " after ", graph_of[static_cast<size_t>(i) - 1],
              " (each graph's rows must be one run, the ids in order, none skipped)");
    if (step == 1) first.push_back(i);
  }
  first.push_back(n);
  const Links links = read_links(file(kGraphJson), n);
  const auto graphs = static_cast<int64_t>(first.size()) - 1;
  std::vector<std::vector<int32_t>> src(static_cast<size_t>(graphs)), dst(static_cast<size_t>(graphs));
  std::vector<int64_t> graph_of_row(static_cast<size_t>(n));
  for (int64_t b = 0; b < graphs; ++b)
    std::fill(graph_of_row.begin() + first[static_cast<size_t>(b)],
              graph_of_row.begin() + first[static_cast<size_t>(b) + 1], b);
  for (size_t k = 0; k < links.source.size(); ++k) {
    const int64_t s = links.source[k], t = links.target[k];
    const int64_t b = graph_of_row[static_cast<size_t>(s)];
    GAT_CHECK(graph_of_row[static_cast<size_t>(t)] == b, file(kGraphJson), ": link ", k, " (", s, " -> ", t,
              ") joins graph ids ", graph_of[static_cast<size_t>(s)], " and ",
              graph_of[static_cast<size_t>(t)]);
    const auto base = first[static_cast<size_t>(b)];
    src[static_cast<size_t>(b)].push_back(static_cast<int32_t>(s - base));
    dst[static_cast<size_t>(b)].push_back(static_cast<int32_t>(t - base));
  }
  GraphBuildOptions build;
  build.symmetrize = !links.directed;
  build.remove_self_loops = true;
  std::vector<GraphData> out;
  for (int64_t b = 0; b < graphs; ++b) {
    const int64_t lo = first[static_cast<size_t>(b)], hi = first[static_cast<size_t>(b) + 1];
    GraphData g;
    g.graph = Graph::from_edges(hi - lo, std::move(src[static_cast<size_t>(b)]),
                                std::move(dst[static_cast<size_t>(b)]), build);
    const auto rows = [&](const std::vector<double>& v, int64_t cols) {
      return Tensor::from_vector(std::vector<double>(v.begin() + lo * cols, v.begin() + hi * cols),
                                 {hi - lo, cols})
          .to(DType::f32);
    };
    g.x = rows(x, data.num_features);
    g.y = rows(y, data.num_labels);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

std::vector<std::string> ppi_raw_files() {
  std::vector<std::string> files;
  for (const char* split : kPpiSplits)
    for (const char* tail : {kGraphJson, kFeatsNpy, kLabelsNpy, kGraphIdNpy})
      files.push_back(split + std::string(tail));
  return files;
}

MultiGraphDataset load_ppi(const std::string& dir) {
  GAT_CHECK(io::is_directory(dir), "load_ppi: ", dir,
            " is not a directory (extract PyG's ppi.zip, https://data.dgl.ai/dataset/ppi.zip, and pass its "
            "folder, or load the dataset ppi, which downloads it)");
  MultiGraphDataset data;
  data.name = "ppi";
  data.train = load_split(dir, kPpiSplits[0], data);
  data.val = load_split(dir, kPpiSplits[1], data);
  data.test = load_split(dir, kPpiSplits[2], data);
  return data;
}

}  // namespace gat
