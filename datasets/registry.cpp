#include "gat/datasets/registry.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gat/datasets/custom.h"
#include "gat/datasets/download.h"
#include "gat/datasets/generator.h"
#include "gat/datasets/planetoid.h"
#include "gat/datasets/ppi.h"
#include "gat/framework/io.h"
#include "gat/framework/quote.h"

namespace gat {

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

constexpr const char* kSyntheticSpec = "synthetic:<nodes>:<avg_degree>:<seed>[:<edge_dim>]";

// One field of kSyntheticSpec, the whole field or an error naming `spec`.
constexpr const char* kSyntheticPpiSpec = "synthetic-ppi:<graphs>:<nodes>:<seed>[:<features>:<labels>]";

// The fields of a spec "kind:a:b:...", split at ':'.
std::vector<std::string_view> spec_fields(const std::string& spec) {
  std::vector<std::string_view> fields;
  std::string_view rest(spec);
  for (size_t colon; (colon = rest.find(':')) != std::string_view::npos; rest.remove_prefix(colon + 1))
    fields.push_back(rest.substr(0, colon));
  fields.push_back(rest);
  return fields;
}

// One field of a spec (`form`, as kSyntheticSpec), the whole field or an error naming `spec`.
template <class T>
T parse_field(std::string_view field, const std::string& spec, const char* what,
              const char* form = kSyntheticSpec) {
  T value{};
  const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  GAT_CHECK(!field.empty() && ec == std::errc() && ptr == field.data() + field.size(),
            "load_dataset: ", quote(spec), ": ", what, " ", quote(field), " is not a valid number (expected ",
            form, ")");
  return value;
}

Dataset load_synthetic(const std::string& spec) {
  const std::vector<std::string_view> fields = spec_fields(spec);
  GAT_CHECK(fields.size() == 4 || fields.size() == 5, "load_dataset: ", quote(spec), " has ", fields.size(),
            " fields (expected ", kSyntheticSpec, ")");
  GeneratorOptions options;
  options.num_nodes = parse_field<int64_t>(fields[1], spec, "nodes");
  options.avg_degree = parse_field<double>(fields[2], spec, "avg_degree");
  options.seed = parse_field<uint64_t>(fields[3], spec, "seed");
  if (fields.size() == 5) options.num_edge_features = parse_field<int64_t>(fields[4], spec, "edge_dim");
  try {
    return generate_sbm(options);
  } catch (const Error& e) {  // it names GeneratorOptions' fields (num_nodes): say which spec set them
    throw Error(detail::concat("load_dataset: ", quote(spec), " (", kSyntheticSpec, "): ", e.what()));
  }
}

MultiGraphDataset load_synthetic_ppi(const std::string& spec) {
  const std::vector<std::string_view> fields = spec_fields(spec);
  GAT_CHECK(fields.size() == 4 || fields.size() == 6, "load_dataset: ", quote(spec), " has ", fields.size(),
            " fields (expected ", kSyntheticPpiSpec, ")");
  MultiGraphOptions options;
  options.graphs = parse_field<int64_t>(fields[1], spec, "graphs", kSyntheticPpiSpec);
  options.nodes = parse_field<int64_t>(fields[2], spec, "nodes", kSyntheticPpiSpec);
  options.seed = parse_field<uint64_t>(fields[3], spec, "seed", kSyntheticPpiSpec);
  if (fields.size() == 6) {
    options.num_features = parse_field<int64_t>(fields[4], spec, "features", kSyntheticPpiSpec);
    options.num_labels = parse_field<int64_t>(fields[5], spec, "labels", kSyntheticPpiSpec);
  }
  try {
    return generate_multigraph(options);
  } catch (const Error& e) {  // it names MultiGraphOptions' fields: say which spec set them
    throw Error(detail::concat("load_dataset: ", quote(spec), " (", kSyntheticPpiSpec, "): ", e.what()));
  }
}

bool is_ppi_directory(const std::string& name) {
  return io::is_directory(name) &&
         io::path_exists((std::filesystem::path(name) / "train_graph.json").string());
}

// $GAT_DATA_DIR, when set and not empty.
std::optional<std::string> data_dir_from_env() {
  const char* env = std::getenv("GAT_DATA_DIR");
  return env && *env ? std::optional<std::string>(env) : std::nullopt;
}

bool is_planetoid_name(const std::string& key) {
  return key == "cora" || key == "citeseer" || key == "pubmed";
}

// A name without a '/' that a built-in dataset owns (any case).
bool bare_built_in_name(const std::string& name) {
  const std::string key = lower(name);
  return name.find('/') == std::string::npos && (is_planetoid_name(key) || key.rfind("synthetic:", 0) == 0);
}

// Refuses a bare built-in name (`built_in`: a Planetoid name, ppi, a synthetic spec) that is also
// the folder ./name here (`folder`): which one is meant cannot be guessed, unless the built-in
// dataset reads a data folder (`has_data_folder`) and one is given, by --data-dir or by
// GAT_DATA_DIR (its default) alike.
void check_not_shadowed(const std::string& name, bool folder, bool has_data_folder,
                        const std::string& data_dir) {
  const bool data_dir_given = !data_dir.empty() || data_dir_from_env().has_value();
  GAT_CHECK(
      !folder || (has_data_folder && data_dir_given), "load_dataset: '", name,
      "' names both a built-in dataset and the folder ./", name, " here: write ./", name, " for the folder",
      has_data_folder ? ", or give the built-in dataset's data folder (--data-dir or GAT_DATA_DIR)" : "");
}

}  // namespace

bool is_multigraph_dataset(const std::string& name) {
  const std::string key = lower(name);
  return key == "ppi" || key.rfind("synthetic-ppi:", 0) == 0 || is_ppi_directory(name);
}

MultiGraphDataset load_multigraph_dataset(const std::string& name, const std::string& data_dir) {
  const std::string key = lower(name);
  const bool synthetic = key.rfind("synthetic-ppi:", 0) == 0;
  if ((synthetic || key == "ppi") && name.find('/') == std::string::npos)  // (./ppi was never read)
    check_not_shadowed(name, io::is_directory(name), !synthetic, data_dir);
  if (synthetic) return load_synthetic_ppi(name);
  if (key == "ppi") {
    const std::string dir = data_dir.empty() ? default_data_dir("ppi") : data_dir;
    fetch_ppi(dir);
    return load_ppi(dir);
  }
  GAT_CHECK(is_ppi_directory(name), "load_dataset: '", name, "' is not a multi-graph dataset (expected ppi, ",
            kSyntheticPpiSpec, " or a directory holding train_graph.json)");
  MultiGraphDataset data = load_ppi(name);
  data.name = name;
  return data;
}

bool dataset_is_folder(const std::string& name) {
  return !bare_built_in_name(name) && io::is_directory(name);
}

Dataset load_dataset(const std::string& name, const std::string& data_dir) {
  const std::string key = lower(name);
  GAT_CHECK(!is_multigraph_dataset(name), "load_dataset: '", name,
            "' is a multi-graph dataset (PPI's format): load it with load_multigraph_dataset");
  const bool planetoid = is_planetoid_name(key);
  const bool exists = io::path_exists(name);  // a permission error says so here
  const bool folder = exists && io::is_directory(name);
  if (bare_built_in_name(name)) {
    check_not_shadowed(name, folder, planetoid, data_dir);
    if (!planetoid) return load_synthetic(name);
    const std::string dir = data_dir.empty() ? default_data_dir() : data_dir;
    fetch_planetoid(key, dir);
    return load_planetoid(key, dir);
  }
  if (folder) return load_custom(name);
  GAT_FAIL("load_dataset: unknown dataset '", name, "' (expected cora, citeseer, pubmed, ", kSyntheticSpec,
           " or a directory", exists ? "; it is not a directory" : "", ")");
}

std::optional<std::string> find_default_data_dir(const char* account_home, const std::string& dataset) {
  if (std::optional<std::string> env = data_dir_from_env()) return env;
  const std::filesystem::path tail = std::filesystem::path("gat") / dataset;
  if (const char* cache = std::getenv("XDG_CACHE_HOME");
      cache && *cache && std::filesystem::path(cache).is_absolute())
    return (cache / tail).string();
  const char* home = std::getenv("HOME");
  if (!home || !*home) home = account_home;
  if (!home || !*home) return std::nullopt;
  return (std::filesystem::path(home) / ".cache" / tail).string();
}

std::string default_data_dir(const std::string& dataset) {
  const passwd* account = ::getpwuid(::getuid());
  const std::optional<std::string> dir = find_default_data_dir(account ? account->pw_dir : nullptr, dataset);
  GAT_CHECK(dir.has_value(), "no folder for the ", dataset == "planetoid" ? "Planetoid" : dataset,
            " files: HOME is not set and the account has no home ",
            "directory; pass --data-dir DIR or set GAT_DATA_DIR (or XDG_CACHE_HOME)");
  return *dir;
}

std::string dataset_summary(const Dataset& data) {
  const std::vector<int32_t> y = data.y.to_vector<int32_t>();
  std::vector<int64_t> counts(static_cast<size_t>(data.num_classes), 0);
  for (const int32_t label : y) {
    GAT_CHECK(label >= 0 && label < data.num_classes, "dataset_summary: label ", label, " outside [0, ",
              data.num_classes, ")");
    ++counts[static_cast<size_t>(label)];
  }
  const std::vector<float> x = data.x.to_vector<float>();
  double checksum = 0.0;
  for (const float v : x) checksum += v;
  const nlohmann::json summary = {
      {"name", data.name},
      {"nodes", data.num_nodes()},
      {"edges", data.graph.num_edges() - data.graph.count_self_loops()},
      {"features", data.num_features()},
      {"edge_features", data.num_edge_features()},
      {"classes", data.num_classes},
      {"train", data.train_index.numel()},
      {"val", data.val_index.numel()},
      {"test", data.test_index.numel()},
      {"label_counts", counts},
      {"feature_checksum", checksum},
  };
  return summary.dump(-1, ' ', false,
                      nlohmann::json::error_handler_t::replace);  // a path's bytes may not be UTF-8
}

std::string dataset_summary(const MultiGraphDataset& data) {
  int64_t nodes = 0, edges = 0;
  double ones = 0;
  for (const auto* split : {&data.train, &data.val, &data.test})
    for (const GraphData& g : *split) {
      nodes += g.num_nodes();
      edges += g.graph.num_edges();
      for (const float v : g.y.to_vector<float>()) ones += v;
    }
  const nlohmann::json summary = {
      {"name", data.name},
      {"graphs", {data.train.size(), data.val.size(), data.test.size()}},
      {"nodes", nodes},
      {"edges", edges},
      {"features", data.num_features},
      {"labels", data.num_labels},
      {"label_density", nodes > 0 ? ones / static_cast<double>(nodes * data.num_labels) : 0.0},
  };
  return summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gat
