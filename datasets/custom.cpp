#include "gat/datasets/custom.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "gat/datasets/text.h"
#include "gat/framework/io.h"

namespace gat {

namespace {

// <dir>/<name> or <dir>/<name>.gz, whichever exists, or "" when neither does; both is an error
// (which one holds the data would be a guess). Anything at the path counts, even a dangling link
// or a file that cannot be read: reading it then says why, so an optional file that is there but
// broken is an error, never skipped.
std::string find_optional_file(const std::string& dir, const std::string& name) {
  const std::string plain = (std::filesystem::path(dir) / name).string(), gzipped = plain + ".gz";
  const bool has_plain = io::path_exists(plain), has_gzipped = io::path_exists(gzipped);
  GAT_CHECK(!has_plain || !has_gzipped, "load_custom: both ", plain, " and ", name,
            ".gz are there: keep the one that holds the data, remove or rename the other");
  return has_plain ? plain : has_gzipped ? gzipped : "";
}

std::string find_file(const std::string& dir, const std::string& name) {
  std::string path = find_optional_file(dir, name);
  GAT_CHECK(!path.empty(), "load_custom: ", (std::filesystem::path(dir) / name).string(),
            " (or .gz) not found");
  return path;
}

// Calls f(fields, where) for every non-blank line, parsed by `parse`.
template <class Parse, class F>
void for_each_record(const std::string& path, Parse parse, F f) {
  const std::string content = text::read_file(path);
  text::Lines lines(content);
  std::string_view line;
  while (lines.next(line)) {
    if (text::blank(line)) continue;
    const std::string where = detail::concat(path, ":", lines.number());
    f(parse(line, where), where);
  }
}

// One integer id per line in [0, n), distinct; returned ascending.
std::vector<int32_t> read_ids(const std::string& path, int64_t n) {
  std::vector<int32_t> ids;
  for_each_record(path, text::parse_ints, [&](const std::vector<int64_t>& v, const std::string& where) {
    GAT_CHECK(v.size() == 1, where, ": expected one node id, got ", v.size(), " fields");
    GAT_CHECK(v[0] >= 0 && v[0] < n, where, ": node id ", v[0], " is outside [0, ", n, ")");
    ids.push_back(static_cast<int32_t>(v[0]));
  });
  std::sort(ids.begin(), ids.end());
  const auto dup = std::adjacent_find(ids.begin(), ids.end());
  GAT_CHECK(dup == ids.end(), path, ": node id ", dup == ids.end() ? 0 : *dup, " appears twice");
  return ids;
}

// Throws unless the absolute values of a row of features (a line of node-feat.csv or
// edge-feat.csv) sum to at most the largest float: a layer sums a row's values times its weights,
// and with weights near 1 such a sum overflows (-3e38 and 3e38 on one line made every loss NaN
// from the first step on). The message names the field where the sum passes the largest float.
void check_row_sum(const std::vector<float>& row, const std::string& where) {
  double sum = 0;
  for (size_t k = 0; k < row.size(); ++k) {
    sum += std::fabs(static_cast<double>(row[k]));
    GAT_CHECK(sum <= std::numeric_limits<float>::max(), where, ": the absolute values of fields 1..", k + 1,
              " sum to ", sum, ", beyond the largest float (3.4e38): a layer's sums over this row overflow; ",
              "scale the features down");
  }
}

Tensor index_tensor(const std::vector<int32_t>& ids) {
  return Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())});
}

// The rows of `path`: one line of equally many numbers per edge of `edge_path` (m edges) ->
// (m, D) f32.
Tensor read_edge_features(const std::string& path, int64_t m, const std::string& edge_path) {
  std::vector<float> values;  // (m * D,)
  int64_t rows = 0, width = -1;
  for_each_record(path, text::parse_floats, [&](const std::vector<float>& row, const std::string& where) {
    if (width < 0) width = static_cast<int64_t>(row.size());
    GAT_CHECK(static_cast<int64_t>(row.size()) == width, where, ": ", row.size(),
              " edge features, the first row has ", width);
    GAT_CHECK(rows < m, where, ": more lines than the ", m, " edges of ", edge_path);
    check_row_sum(row, where);
    values.insert(values.end(), row.begin(), row.end());
    ++rows;
  });
  GAT_CHECK(rows == m, "load_custom: ", path, " has ", rows, " lines for the ", m, " edges of ", edge_path);
  // No line, no width: a (0, 0) tensor would be edge features of no dimension, which no layer takes.
  GAT_CHECK(width > 0, "load_custom: ", path, " has no lines (", edge_path,
            " lists no edges), so the number of edge features cannot be told: remove it");
  return Tensor::from_vector(values, {m, width});
}

// Throws unless every feature of edge_attr (E, D) f32, the graph's, is finite: an edge listed
// more than once gets the sum of its lines' features, which can pass the largest float.
void check_summed_edge_features(const Graph& graph, const Tensor& edge_attr, const std::string& path) {
  const int64_t D = edge_attr.size(1);
  const float* a = edge_attr.data<float>();  // (E, D)
  const auto bad = std::find_if(a, a + edge_attr.numel(), [](float v) { return !std::isfinite(v); });
  if (bad == a + edge_attr.numel()) return;
  const int64_t e = (bad - a) / D;
  const int32_t dst = graph.destinations()[static_cast<size_t>(e)];
  GAT_FAIL("load_custom: ", path, ": the edge ",
           graph.edge_src().to_vector<int32_t>()[static_cast<size_t>(e)], " -> ", dst,
           " is listed more than once (or in both directions) and the sum of its lines' feature ",
           (bad - a) % D + 1, " is ", *bad, ": beyond the largest float (3.4e38)");
}

}  // namespace

Dataset load_custom(const std::string& dir) {
  struct stat st {};
  GAT_CHECK(::stat(dir.c_str(), &st) == 0, "load_custom: ", dir, ": ", std::strerror(errno));
  GAT_CHECK(S_ISDIR(st.st_mode), "load_custom: ", dir, " is not a directory");
  Dataset data;
  data.name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (data.name.empty())
    data.name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();

  // Features define N and F.
  const std::string feat_path = find_file(dir, "node-feat.csv");
  std::vector<float> features;  // (N * F,)
  int64_t n = 0, f = -1;
  for_each_record(feat_path, text::parse_floats,
                  [&](const std::vector<float>& row, const std::string& where) {
                    if (f < 0) f = static_cast<int64_t>(row.size());
                    GAT_CHECK(static_cast<int64_t>(row.size()) == f, where, ": ", row.size(),
                              " features, the first row has ", f);
                    GAT_CHECK(n < std::numeric_limits<int32_t>::max(), where, ": too many nodes");
                    check_row_sum(row, where);
                    features.insert(features.end(), row.begin(), row.end());
                    ++n;
                  });
  GAT_CHECK(n > 0, "load_custom: ", feat_path, ": no nodes");
  data.x = Tensor::from_vector(features, {n, f});

  const std::string label_path = find_file(dir, "node-label.csv");
  std::vector<int32_t> labels;  // (N,)
  for_each_record(label_path, text::parse_ints, [&](const std::vector<int64_t>& v, const std::string& where) {
    GAT_CHECK(v.size() == 1, where, ": expected one label, got ", v.size(), " fields");
    GAT_CHECK(static_cast<int64_t>(labels.size()) < n, where, ": more labels than the ", n, " nodes of ",
              feat_path);
    // num_classes is the largest label + 1: a class id beyond the node count cannot be genuine and
    // would size the output layer.
    GAT_CHECK(v[0] >= 0 && v[0] < n, where, ": label ", v[0], " is outside [0, ", n, "): a class id must be",
              " below the number of nodes (", n, " in ", feat_path, ")");
    labels.push_back(static_cast<int32_t>(v[0]));
  });
  GAT_CHECK(static_cast<int64_t>(labels.size()) == n, "load_custom: ", label_path, " has ", labels.size(),
            " labels for the ", n, " nodes of ", feat_path);
  data.num_classes = *std::max_element(labels.begin(), labels.end()) + int64_t{1};
  data.y = Tensor::from_vector(labels, {n});

  const std::string edge_path = find_file(dir, "edge.csv");
  std::vector<int32_t> src, dst;
  for_each_record(edge_path, text::parse_ints, [&](const std::vector<int64_t>& v, const std::string& where) {
    GAT_CHECK(v.size() == 2, where, ": expected 'src,dst', got ", v.size(), " fields");
    for (int64_t id : v) GAT_CHECK(id >= 0 && id < n, where, ": node id ", id, " is outside [0, ", n, ")");
    src.push_back(static_cast<int32_t>(v[0]));
    dst.push_back(static_cast<int32_t>(v[1]));
  });
  GraphBuildOptions options;
  options.symmetrize = true;
  options.remove_self_loops = true;
  data.graph = Graph::from_edges(n, src, dst, options);
  const std::string edge_feat_path = find_optional_file(dir, "edge-feat.csv");
  if (!edge_feat_path.empty()) {
    const Tensor per_line = read_edge_features(edge_feat_path, static_cast<int64_t>(src.size()), edge_path);
    data.edge_attr = edge_attr_in_graph_order(data.graph, src, dst, options, per_line);
    check_summed_edge_features(data.graph, data.edge_attr, edge_feat_path);
  }

  const std::string split_dir = (std::filesystem::path(dir) / "split").string();
  std::array<std::string, 3> split_paths;
  Tensor* splits[3] = {&data.train_index, &data.val_index, &data.test_index};
  const char* split_names[3] = {"train.csv", "valid.csv", "test.csv"};
  for (int k = 0; k < 3; ++k) {
    split_paths[k] = find_file(split_dir, split_names[k]);
    *splits[k] = index_tensor(read_ids(split_paths[k], n));
  }
  check_splits(data, split_paths);
  return data;
}

}  // namespace gat
