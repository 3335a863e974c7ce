// Parity with PyTorch Geometric: this project's GATConv and GATv2Conv against PyG's (the layer a
// case's metadata names) on the cases committed in
// tests/data/pyg_parity, which bench/pyg_parity.py computes with PyG in float64 (its header
// describes the files; docs/parity.md how to regenerate them and the parameter mapping).
//
// Every case runs on the CPU in f64 and f32 and on CUDA in f64 and f32 (skipped without a
// device): the layer is built with the case's options and PyG's weights (converted to this
// project's layout), runs forward with its attention weights requested and backward from the
// case's upstream gradient, and is compared with PyG's output, attention weights (PyG's edge
// order mapped to the Graph's edge ids by (source, destination)) and gradients of x, of the edge
// features where the case has them (PyG's edge order mapped the same way) and of every
// parameter. The error of a tensor is max_k |got_k - want_k| / max_k |want_k| over all its
// elements (gat::testing::difference): at most 1e-5 in f32 and 1e-10 in f64 (the references are
// f64; in f64 only the order of summation differs). Every tensor and option in a case file must be
// used, so a case with something the test does not know fails rather than passing unchecked. Training mode,
// dropout 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/io.h"
#include "gat/framework/rng.h"
#include "gat/layers/gat_conv.h"
#include "gat/layers/gatv2_conv.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

namespace fs = std::filesystem;

constexpr double kF32Tolerance = 1e-5;
constexpr double kF64Tolerance = 1e-10;

const fs::path& case_dir() {
  static const fs::path dir = fs::path(GAT_SOURCE_DIR) / "tests" / "data" / "pyg_parity";
  return dir;
}

// The cases' names (file names without .safetensors), sorted; none when the folder is missing.
std::vector<std::string> case_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(case_dir(), ec))
    if (entry.path().extension() == ".safetensors") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One case file, remembering which tensors and metadata keys were read.
class Case {
 public:
  explicit Case(const std::string& name)
      : name_(name), file_(io::load_safetensors((case_dir() / (name + ".safetensors")).string())) {}

  const std::string& name() const { return name_; }
  const Tensor& tensor(const std::string& key) const {
    used_tensors_.insert(key);
    const auto it = file_.tensors.find(key);
    GAT_CHECK(it != file_.tensors.end(), "case ", name_, ": no tensor '", key, "'");
    return it->second;
  }
  bool has_tensor(const std::string& key) const { return file_.tensors.count(key) > 0; }
  bool has_metadata(const std::string& key) const { return file_.metadata.count(key) > 0; }
  const std::string& text(const std::string& key) const { return reader().text(use(key)); }
  int64_t integer(const std::string& key) const { return reader().integer(use(key)); }
  double number(const std::string& key) const { return reader().number(use(key)); }
  bool flag(const std::string& key) const {  // a JSON boolean
    const std::string& value = text(key);
    GAT_CHECK(value == "true" || value == "false", "case ", name_, ": metadata '", key, "' = '", value,
              "' is not true or false");
    return value == "true";
  }
  // Tensors and metadata keys never read (the metadata's provenance notes aside).
  std::vector<std::string> unused() const {
    std::vector<std::string> keys;
    for (const auto& entry : file_.tensors)
      if (!used_tensors_.count(entry.first)) keys.push_back("tensor " + entry.first);
    for (const auto& entry : file_.metadata)
      if (!used_metadata_.count(entry.first) && !kProvenance.count(entry.first))
        keys.push_back("metadata " + entry.first);
    return keys;
  }

 private:
  inline static const std::set<std::string> kProvenance{"description", "torch", "torch_geometric"};
  io::MetadataReader reader() const { return io::MetadataReader(file_.metadata, "case " + name_); }
  const std::string& use(const std::string& key) const { return *used_metadata_.insert(key).first; }

  std::string name_;
  io::Safetensors file_;
  mutable std::set<std::string> used_tensors_, used_metadata_;
};

// A PyG parameter (or its gradient) in this project's layout `shape`, on the host in f64. A Linear
// weight, NAME.weight, is (out, in) in PyG and (in, out) here: transposed. Every other tensor keeps
// its elements in order: att_src, att_dst and att (1, H, F) -> (H, F), bias (C,) -> (C,).
Tensor to_project_layout(const std::string& pyg_name, const Tensor& pyg, const Shape& shape) {
  const std::vector<double> v = host_f64(pyg);
  const std::string weight = ".weight";
  const bool linear_weight = pyg_name.size() > weight.size() &&
                             pyg_name.compare(pyg_name.size() - weight.size(), weight.size(), weight) == 0;
  if (!linear_weight) {
    GAT_CHECK(pyg.numel() == shape_numel(shape), "PyG's '", pyg_name, "' ", pyg.describe(),
              " cannot be this project's ", shape_str(shape));
    return Tensor::from_vector(v, shape);
  }
  GAT_CHECK(pyg.dim() == 2 && shape == Shape({pyg.size(1), pyg.size(0)}), "PyG's Linear weight '", pyg_name,
            "' ", pyg.describe(), " is not the transpose of this project's ", shape_str(shape));
  const int64_t rows = pyg.size(0), cols = pyg.size(1);  // (out, in)
  std::vector<double> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  return Tensor::from_vector(t, shape);
}

// What one pass of a layer gives to compare.
struct Pass {
  Tensor out;                           // (N, C)
  Graph attention_graph;                // the graph the attention weights belong to
  Tensor attention;                     // (E', H) in attention_graph's edge-id order
  std::map<std::string, Tensor> grads;  // "x" (or "x_src", "x_dst"), "edge_attr" and every
                                        // parameter by name, this project's layout (edge_attr in
                                        // the graph's edge order)
};

// The case's edge list: input.edge_index (2, E) [source; destination] as (sources, destinations).
std::pair<std::vector<int32_t>, std::vector<int32_t>> case_edges(const Case& c) {
  const Tensor& edge_index = c.tensor("input.edge_index");
  GAT_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2, "case ", c.name(), ": input.edge_index ",
            edge_index.describe(), " is not (2, E)");
  const std::vector<int32_t> e = edge_index.to_vector<int32_t>();
  const auto E = static_cast<ptrdiff_t>(edge_index.size(1));
  return {{e.begin(), e.begin() + E}, {e.begin() + E, e.end()}};
}

// The case's graph: input.edge_index (2, E) [source; destination] of num_src sources and num_dst
// destinations.
Graph case_graph(const Case& c, int64_t num_src, int64_t num_dst) {
  const auto [src, dst] = case_edges(c);
  const Graph graph = Graph::from_edges(num_src, num_dst, src, dst);
  GAT_CHECK(graph.num_edges() == static_cast<int64_t>(src.size()), "case ", c.name(),
            ": input.edge_index has duplicate edges");
  return graph;
}

// Whether the case is bipartite (PyG's in_channels a pair, x = (x_src, x_dst)).
bool is_bipartite(const Case& c) { return c.has_metadata("dst_in_channels"); }

// The case's sources and destinations: num_src_nodes and num_dst_nodes of a bipartite case, else
// input.x's rows both.
std::pair<int64_t, int64_t> case_nodes(const Case& c) {
  if (is_bipartite(c)) return {c.integer("num_src_nodes"), c.integer("num_dst_nodes")};
  const int64_t n = c.tensor("input.x").size(0);
  return {n, n};
}

// A tensor of one row per edge of input.edge_index (PyG's order) in the edge-id order of the
// case's graph (the graph has no duplicates: a permutation).
Tensor in_graph_order(const Case& c, const Tensor& per_input_edge) {
  const auto [src, dst] = case_edges(c);
  const auto [ns, nd] = case_nodes(c);
  return edge_attr_in_graph_order(case_graph(c, ns, nd), src, dst, GraphBuildOptions{}, per_input_edge);
}

// Copies param.NAME of the case (PyG's layout) into the parameter NAME of `module`, for every
// parameter; the case must hold exactly the module's parameters.
void load_pyg_parameters(const Module& module, const Case& c) {
  for (const auto& [name, p] : module.named_parameters()) {
    GAT_CHECK(c.has_tensor("param." + name), "case ", c.name(), ": no PyG parameter for '", name, "'");
    Tensor value = to_project_layout(name, c.tensor("param." + name), p.shape()).to(p.dtype());
    Tensor(p).copy_(value);  // a handle to the parameter itself
  }
}

// Backward of sum(out * grad_out) from the case's grad_out; the gradients of the inputs and of
// every parameter of `module`, by name.
std::map<std::string, Tensor> backward(const Module& module, const std::map<std::string, Tensor>& inputs,
                                       const Tensor& out, const Case& c) {
  out.backward(c.tensor("grad_out").to(out.dtype()).to(out.device()));
  std::map<std::string, Tensor> grads;
  for (const auto& [name, x] : inputs) grads[name] = x.grad();
  for (const auto& [name, p] : module.named_parameters()) grads[name] = p.grad();
  return grads;
}

// input.NAME of the case as a leaf of its own in `dtype` on `device`.
Tensor case_input(const Case& c, const std::string& name, DType dtype, Device device) {
  Tensor x = c.tensor("input." + name).to(dtype).to(device).clone();
  x.set_requires_grad();
  return x;
}

// The options both layers share, from the case's metadata.
template <class Options>
Options shared_options(const Case& c, DType dtype) {
  Options o;
  o.in_channels = c.integer("in_channels");
  o.out_channels = c.integer("out_channels");
  o.heads = c.integer("heads");
  o.concat = c.flag("concat");
  o.negative_slope = c.number("negative_slope");
  o.dropout = c.number("dropout");
  o.add_self_loops = c.flag("add_self_loops");
  o.bias = c.flag("bias");
  o.residual = c.flag("residual");
  if (is_bipartite(c)) o.dst_in_channels = c.integer("dst_in_channels");
  if (c.has_metadata("edge_dim")) {  // fill_value: a JSON string ("mean") or number
    o.edge_dim = c.integer("edge_dim");
    std::string fill = c.text("fill_value");
    if (fill.size() >= 2 && fill.front() == '"' && fill.back() == '"') fill = fill.substr(1, fill.size() - 2);
    o.fill_value = ops::SelfLoopFill::parse(fill);
  }
  o.dtype = dtype;
  return o;
}

GATConvOptions gat_conv_options(const Case& c, DType dtype) {
  return shared_options<GATConvOptions>(c, dtype);
}

GATv2ConvOptions gatv2_conv_options(const Case& c, DType dtype) {
  GATv2ConvOptions o = shared_options<GATv2ConvOptions>(c, dtype);
  o.share_weights = c.flag("share_weights");
  return o;
}

// Layer (GATConv or GATv2Conv) built with `options` and the case's PyG weights, run on the case.
template <class Layer, class Options>
Pass run_layer(const Case& c, const Options& options, Device device) {
  Generator init(0), gen(1);  // init's draws are overwritten; gen is unused with dropout 0
  Layer conv(options, init);
  conv.to(device);
  load_pyg_parameters(conv, c);
  typename Layer::Attention attention;
  Pass pass;
  const bool bipartite = is_bipartite(c);
  std::map<std::string, Tensor> inputs;  // x, or (bipartite) x_src and x_dst
  for (const char* name :
       bipartite ? std::vector<const char*>{"x_src", "x_dst"} : std::vector<const char*>{"x"})
    inputs[name] = case_input(c, name, options.dtype, device);
  const auto [ns, nd] = case_nodes(c);
  const Graph graph = case_graph(c, ns, nd).to(device);
  Tensor edge_attr;  // (E, D) in the graph's edge order: the layer's edge features
  if (options.edge_dim > 0) {
    edge_attr = in_graph_order(c, c.tensor("input.edge_attr")).to(options.dtype).to(device);
    edge_attr.set_requires_grad();
    inputs["edge_attr"] = edge_attr;
  }
  pass.out = bipartite ? conv.forward(inputs["x_src"], inputs["x_dst"], graph, edge_attr, gen, &attention)
                       : conv.forward(inputs["x"], graph, edge_attr, gen, &attention);
  pass.attention_graph = attention.graph;
  pass.attention = attention.weights;
  pass.grads = backward(conv, inputs, pass.out, c);
  return pass;
}

// The layer the case names, on `device` in `dtype`; `slope_offset` is added to its negative slope.
Pass run_case(const Case& c, Device device, DType dtype, double slope_offset = 0.0) {
  const std::string& layer = c.text("layer");
  if (layer == "GATConv") {
    GATConvOptions options = gat_conv_options(c, dtype);
    options.negative_slope += slope_offset;
    return run_layer<GATConv>(c, options, device);
  }
  if (layer == "GATv2Conv") {
    GATv2ConvOptions options = gatv2_conv_options(c, dtype);
    options.negative_slope += slope_offset;
    return run_layer<GATv2Conv>(c, options, device);
  }
  GAT_FAIL("case ", c.name(), ": no parity runner for layer '", layer, "'");
}

// PyG's attention weights (E', H), listed in the order of attention.edge_index, put in the
// edge-id order of `graph`: row e holds the weights of the edge (source(e), destination(e)).
// PyG's edges must be exactly the graph's.
Tensor pyg_attention_in_graph_order(const Case& c, const Graph& graph) {
  const Tensor& pyg = c.tensor("attention.weights");
  const Tensor& edge_index = c.tensor("attention.edge_index");
  const int64_t E = graph.num_edges(), H = pyg.size(1);
  GAT_CHECK(pyg.dim() == 2 && pyg.size(0) == E && edge_index.size(0) == 2 && edge_index.size(1) == E, "case ",
            c.name(), ": attention.weights ", pyg.describe(), " and attention.edge_index ",
            edge_index.describe(), " do not match a graph of ", E, " edges");
  const std::vector<int32_t> src = graph.sources(), dst = graph.destinations();
  std::map<std::pair<int32_t, int32_t>, int64_t> edge_id;
  for (int64_t e = 0; e < E; ++e) edge_id[{src[e], dst[e]}] = e;
  const std::vector<int32_t> pairs = edge_index.to_vector<int32_t>();
  const std::vector<double> w = host_f64(pyg);
  std::vector<double> ordered(static_cast<size_t>(E * H));
  for (int64_t k = 0; k < E; ++k) {
    const auto it = edge_id.find({pairs[k], pairs[E + k]});
    GAT_CHECK(it != edge_id.end(), "case ", c.name(), ": PyG's attention edge ", k, " (", pairs[k], " -> ",
              pairs[E + k], ") is not an edge of the layer's graph (or appears twice)");
    std::copy_n(w.begin() + k * H, H, ordered.begin() + it->second * H);
    edge_id.erase(it);
  }
  return Tensor::from_vector(ordered, {E, H});
}

// One quantity compared: this project's value and PyG's, in this project's layout.
struct Comparison {
  std::string what;
  Tensor got, want;
};

std::vector<Comparison> comparisons(const Case& c, const Pass& pass) {
  std::vector<Comparison> list{
      {"out", pass.out, c.tensor("out")},
      {"attention weights", pass.attention, pyg_attention_in_graph_order(c, pass.attention_graph)}};
  for (const auto& [name, grad] : pass.grads) {
    GAT_CHECK(grad.defined(), "case ", c.name(), ": backward left no gradient for '", name, "'");
    const Tensor& pyg = c.tensor("grad." + name);
    list.push_back(
        {"grad of " + name, grad,
         name == "edge_attr" ? in_graph_order(c, pyg) : to_project_layout(name, pyg, grad.shape())});
  }
  return list;
}

// Runs case `name` on `device` in `dtype` and checks every quantity against the tolerance.
void expect_parity(const std::string& name, Device device, DType dtype) {
  const Case c(name);
  const double tolerance = dtype == DType::f64 ? kF64Tolerance : kF32Tolerance;
  const std::string where = name + " on " + device_name(device) + " in " + dtype_name(dtype) + ": ";
  for (const Comparison& k : comparisons(c, run_case(c, device, dtype))) {
    ASSERT_EQ(k.got.shape(), k.want.shape()) << where << k.what;
    const std::vector<double> got = host_f64(k.got), want = host_f64(k.want);
    const Difference d = difference(got, want);
    EXPECT_LE(d.error, tolerance) << where << k.what << ": element " << d.at << " got "
                                  << (got.empty() ? 0 : got[d.at]) << " want "
                                  << (want.empty() ? 0 : want[d.at]);
  }
  for (const std::string& key : c.unused()) ADD_FAILURE() << where << key << " is never checked";
}

class PygParity : public ::testing::TestWithParam<std::string> {};

TEST_P(PygParity, CpuF64) { expect_parity(GetParam(), Device::cpu, DType::f64); }
TEST_P(PygParity, CpuF32) { expect_parity(GetParam(), Device::cpu, DType::f32); }
TEST_P(PygParity, CudaF64) {
  GAT_SKIP_WITHOUT_CUDA();
  expect_parity(GetParam(), Device::cuda, DType::f64);
}
TEST_P(PygParity, CudaF32) {
  GAT_SKIP_WITHOUT_CUDA();
  expect_parity(GetParam(), Device::cuda, DType::f32);
}

// The comparison can fail: the layer with a negative slope 0.01 off PyG's gives another output
// (every case has LeakyReLU inputs of both signs, which bench/pyg_parity.py checks).
TEST_P(PygParity, AnotherNegativeSlopeDisagrees) {
  const Case c(GetParam());
  const Pass pass = run_case(c, Device::cpu, DType::f64, 0.01);
  EXPECT_GT(rel_error(pass.out, c.tensor("out")), 10 * kF32Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Cases, PygParity, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The options a case has, as the coverage tests name them: the options both layers share, the
// graph (a hub row longer than 64 edges, cut into chunks on the GPU; bipartite with fewer sources
// than destinations or more) and the edge features.
template <class Options>
std::set<std::string> option_values(const Case& c, const Options& o) {
  std::set<std::string> seen{o.heads == 1 ? "one head" : "several heads",
                             o.concat ? "concat" : "mean",
                             o.add_self_loops ? "self loops" : "no self loops",
                             o.bias ? "bias" : "no bias",
                             o.residual ? "residual" : "no residual",
                             "negative slope " + std::to_string(o.negative_slope)};
  const auto [ns, nd] = case_nodes(c);
  if (is_bipartite(c)) {
    seen.insert(std::string(ns < nd   ? "fewer"
                            : ns > nd ? "more"
                                      : "as many") +
                " sources than destinations " + (o.add_self_loops ? "with" : "without") + " self loops");
  } else if (case_graph(c, ns, nd).max_in_degree() > 64) {
    seen.insert("hub");
  }
  if (o.edge_dim == 0) return seen;
  seen.insert(o.add_self_loops ? "edge features with self loops" : "edge features without self loops");
  seen.insert(std::string("edge features, ") + (o.heads == 1 ? "one head" : "several heads"));
  if (!o.add_self_loops) return seen;
  seen.insert("fill_value " + o.fill_value.name());
  if (is_bipartite(c))
    seen.insert(std::string("bipartite edge features, fill_value ") +
                (o.fill_value.kind == ops::SelfLoopFill::Kind::constant ? "a number" : o.fill_value.name()));
  return seen;
}

// Every value in `values` is in `seen`, and at least two negative slopes.
void expect_covered(const std::string& layer, const std::set<std::string>& seen,
                    const std::vector<std::string>& values) {
  for (const std::string& value : values)
    EXPECT_TRUE(seen.count(value)) << "no " << layer << " case has " << value;
  EXPECT_GE(std::count_if(seen.begin(), seen.end(),
                          [](const std::string& s) { return s.rfind("negative slope", 0) == 0; }),
            2)
      << "the " << layer << " cases have one negative slope only";
}

// What the cases of both layers cover.
const std::vector<std::string> kSharedOptionValues{"one head",
                                                   "several heads",
                                                   "concat",
                                                   "mean",
                                                   "self loops",
                                                   "no self loops",
                                                   "bias",
                                                   "no bias",
                                                   "residual",
                                                   "no residual",
                                                   "hub",
                                                   "edge features with self loops",
                                                   "edge features without self loops",
                                                   "edge features, one head",
                                                   "edge features, several heads",
                                                   "fill_value mean",
                                                   "fill_value max",
                                                   "fewer sources than destinations with self loops",
                                                   "fewer sources than destinations without self loops",
                                                   "more sources than destinations with self loops",
                                                   "more sources than destinations without self loops",
                                                   "bipartite edge features, fill_value mean",
                                                   "bipartite edge features, fill_value a number"};

// The values the cases of `layer` cover, Options read by `options`, and anything `more` adds.
template <class Options, class More>
std::set<std::string> covered(const std::string& layer, Options (*options)(const Case&, DType), More more) {
  std::set<std::string> seen;
  for (const std::string& name : case_names()) {
    const Case c(name);
    if (c.text("layer") != layer) continue;
    const Options o = options(c, DType::f64);
    const std::set<std::string> values = option_values(c, o);
    seen.insert(values.begin(), values.end());
    more(o, seen);
  }
  return seen;
}

// The cases cover every GATConv option value this project's GATConv shares with PyG's (dropout
// aside), with every fill_value PyG takes.
TEST(PygParityCases, CoverEveryGATConvOption) {
  std::vector<std::string> values = kSharedOptionValues;
  values.insert(values.end(), {"fill_value add", "fill_value min", "fill_value mul", "fill_value 0.5"});
  expect_covered("GATConv",
                 covered("GATConv", gat_conv_options, [](const GATConvOptions&, std::set<std::string>&) {}),
                 values);
}

// Likewise for GATv2Conv, with share_weights on and off (and on with a pair of widths).
TEST(PygParityCases, CoverEveryGATv2ConvOption) {
  std::vector<std::string> values = kSharedOptionValues;
  values.insert(values.end(), {"shared weights", "separate weights", "shared weights on a pair of widths"});
  expect_covered("GATv2Conv",
                 covered("GATv2Conv", gatv2_conv_options,
                         [](const GATv2ConvOptions& o, std::set<std::string>& seen) {
                           seen.insert(o.share_weights ? "shared weights" : "separate weights");
                           if (o.share_weights && o.dst_in_channels > 0)
                             seen.insert("shared weights on a pair of widths");
                         }),
                 values);
}

}  // namespace
