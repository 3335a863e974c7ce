// GCNConv, SAGEConv and GINConv (layers/): equal to PyTorch Geometric 2.8's layers, gradients
// against finite differences, and their errors.
//
// The PyG cases are tests/data/pyg_conv_fixtures.h, made by tests/data/pyg_conv_reference.py in
// float64 on the CPU: the options, inputs, parameters (set by name, so PyG's names are checked
// too) and upstream gradient of each case, and PyG's output and gradients of x, x_dst, the edge
// weights and every parameter. Each runs on each device in f64 (to 1e-10: only the order of the
// sums differs) and f32 (to 1e-5). The error of a tensor is max |got - want| / max |want|
// (gat::testing::difference).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "data/pyg_conv_fixtures.h"
#include "gat/framework/autograd.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/rng.h"
#include "gat/layers/activation.h"
#include "gat/layers/dropout.h"
#include "gat/layers/gcn_conv.h"
#include "gat/layers/gin_conv.h"
#include "gat/layers/linear.h"
#include "gat/layers/sage_conv.h"
#include "gat/layers/sequential.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

namespace fix = gat::testing::pyg_conv;

constexpr double kF32Tolerance = 1e-5;
constexpr double kF64Tolerance = 1e-10;

// A graph that keeps repeated edges, as PyG's edge_index does.
Graph graph_of(const fix::Edges& edges, Device device) {
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  return Graph::from_edges(edges.num_src, edges.num_dst, edges.src, edges.dst, keep).to(device);
}

// A case's PyG options, each read once; unknown() lists those never read.
class CaseOptions {
 public:
  explicit CaseOptions(const fix::Case& c) {
    for (const auto& [name, value] : c.options) values_[name] = value;
  }
  double number(const std::string& name, double fallback) {
    read_.insert(name);
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  bool flag(const std::string& name, bool fallback) { return number(name, fallback ? 1.0 : 0.0) != 0.0; }
  std::vector<std::string> unknown() const {
    std::vector<std::string> names;
    for (const auto& entry : values_)
      if (read_.count(entry.first) == 0) names.push_back(entry.first);
    return names;
  }

 private:
  std::map<std::string, double> values_;
  std::set<std::string> read_;
};

// A layer built from a case, and its forward (x_dst and edge_weight undefined when unused).
struct BuiltLayer {
  std::shared_ptr<Module> module;
  std::function<Tensor(const Tensor& x, const Tensor& x_dst, const Tensor& edge_weight, const Graph& graph)>
      forward;
};

BuiltLayer build(const fix::Case& c, CaseOptions& o, DType dtype, Generator& init) {
  if (c.layer == "GCNConv") {
    GCNConvOptions options;
    options.in_channels = fix::kIn;
    options.out_channels = fix::kOut;
    options.improved = o.flag("improved", false);
    options.normalize = o.flag("normalize", true);
    options.add_self_loops = o.flag("add_self_loops", options.normalize);  // PyG's default
    options.bias = o.flag("bias", true);
    options.dtype = dtype;
    auto conv = std::make_shared<GCNConv>(options, init);
    return {conv, [conv](const Tensor& x, const Tensor&, const Tensor& w, const Graph& g) {
              return conv->forward(x, g, w);
            }};
  }
  if (c.layer == "SAGEConv") {
    SAGEConvOptions options;
    options.in_channels = fix::kIn;
    options.dst_in_channels = c.bipartite ? fix::kDstIn : 0;
    options.out_channels = fix::kOut;
    options.normalize = o.flag("normalize", false);
    options.root_weight = o.flag("root_weight", true);
    options.project = o.flag("project", false);
    options.bias = o.flag("bias", true);
    options.dtype = dtype;
    auto conv = std::make_shared<SAGEConv>(options, init);
    return {conv, [conv](const Tensor& x, const Tensor& x_dst, const Tensor&, const Graph& g) {
              return x_dst.defined() ? conv->forward(x, x_dst, g) : conv->forward(x, g);
            }};
  }
  EXPECT_EQ(c.layer, "GINConv");
  auto mlp = std::make_shared<Sequential>();
  mlp->add(std::make_shared<Linear>(fix::kIn, fix::kGinHidden, true, init, dtype))
      .add(std::make_shared<ReLU>())
      .add(std::make_shared<Linear>(fix::kGinHidden, fix::kOut, true, init, dtype));
  GINConvOptions options;
  options.eps = o.number("eps", 0.0);
  options.train_eps = o.flag("train_eps", false);
  options.dtype = dtype;
  auto conv = std::make_shared<GINConv>(mlp, options);
  return {conv, [conv](const Tensor& x, const Tensor& x_dst, const Tensor&, const Graph& g) {
            return x_dst.defined() ? conv->forward(x, x_dst, g) : conv->forward(x, g);
          }};
}

// values as a tensor of `shape`, `dtype` on `device`, requiring a gradient (undefined when empty).
Tensor input(const fix::Values& values, const Shape& shape, DType dtype, Device device) {
  if (values.empty()) return Tensor();
  Tensor t = Tensor::from_vector(values, shape).to(dtype).to(device);
  t.set_requires_grad(true);
  return t;
}

void expect_matches(const Tensor& got, const fix::Values& want, const Shape& shape, const std::string& what,
                    double tolerance) {
  ASSERT_TRUE(got.defined()) << what << ": no gradient";
  expect_close(got, Tensor::from_vector(want, shape), what, tolerance);
}

class PygConvCases : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(PygConvCases);

TEST_P(PygConvCases, EqualPyGsOutputsAndGradients) {
  ASSERT_GE(fix::kCases.size(), 19u);
  for (const DType dtype : {DType::f64, DType::f32}) {
    const double tolerance = dtype == DType::f64 ? kF64Tolerance : kF32Tolerance;
    for (const fix::Case& c : fix::kCases) {
      const std::string what = c.name + " (" + dtype_name(dtype) + ")";
      SCOPED_TRACE(what);
      const fix::Edges& edges = c.bipartite ? fix::kBipartite : fix::kGraph;
      const Graph graph = graph_of(edges, device());
      ASSERT_EQ(graph.sources(), edges.src);  // the fixture's edge order is the graph's
      ASSERT_EQ(graph.destinations(), edges.dst);

      CaseOptions options(c);
      Generator init(1);
      BuiltLayer layer = build(c, options, dtype, init);
      EXPECT_TRUE(options.unknown().empty()) << "unknown option " << options.unknown().front();
      // PyG's parameter names, every one set.
      std::map<std::string, Tensor> parameters;
      for (const auto& [name, tensor] : layer.module->named_parameters()) parameters[name] = tensor;
      ASSERT_EQ(parameters.size(), c.parameters.size());
      for (const auto& [name, values] : c.parameters) {
        ASSERT_EQ(parameters.count(name), 1u) << "no parameter " << name;
        autograd::NoGradGuard no_grad;
        parameters[name].copy_(Tensor::from_vector(values, parameters[name].shape()).to(dtype));
      }
      layer.module->to(device());

      const int64_t Ns = edges.num_src, Nd = edges.num_dst;
      const int64_t dst_width = c.layer == "SAGEConv" ? fix::kDstIn : fix::kIn;
      const Tensor x = input(c.x, {Ns, fix::kIn}, dtype, device());
      const Tensor x_dst = input(c.x_dst, {Nd, dst_width}, dtype, device());
      const Tensor edge_weight = input(c.edge_weight, {graph.num_edges()}, dtype, device());
      const Tensor out = layer.forward(x, x_dst, edge_weight, graph);
      expect_matches(out, c.out, {Nd, fix::kOut}, "out", tolerance);
      out.backward(Tensor::from_vector(c.grad_out, {Nd, fix::kOut}).to(dtype).to(device()));

      expect_matches(x.grad(), c.grad_x, {Ns, fix::kIn}, "d x", tolerance);
      if (x_dst.defined()) expect_matches(x_dst.grad(), c.grad_x_dst, {Nd, dst_width}, "d x_dst", tolerance);
      if (edge_weight.defined())
        expect_matches(edge_weight.grad(), c.grad_edge_weight, {graph.num_edges()}, "d edge_weight",
                       tolerance);
      for (const auto& [name, values] : c.parameter_grads)
        expect_matches(parameters[name].grad(), values, parameters[name].shape(), "d " + name, tolerance);
    }
  }
}

// ---- gradients against finite differences (f64) ----

// The random graph of the gradient checks: 9 nodes with a repeated edge, a self loop and nodes
// without in-edges (one with out-edges).
Graph gradcheck_graph(Device device) {
  GraphBuildOptions keep;
  keep.remove_duplicates = false;
  return Graph::from_edges(9, {1, 2, 2, 3, 0, 4, 5, 8, 6, 7, 1, 3, 8, 0},
                           {0, 0, 0, 1, 2, 2, 2, 2, 4, 4, 4, 6, 6, 7}, keep)
      .to(device);
}

class ConvGradients : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(ConvGradients);

TEST_P(ConvGradients, GCNConvOfXParametersAndEdgeWeights) {
  std::mt19937_64 rng(3);
  const Graph graph = gradcheck_graph(device());
  struct Variant {
    const char* what;
    bool improved, add_self_loops, normalize;
  };
  for (const Variant& v :
       {Variant{"loops, improved", true, true, true}, Variant{"no loops", false, false, true},
        Variant{"no normalisation", false, false, false}}) {
    SCOPED_TRACE(v.what);
    GCNConvOptions options;
    options.in_channels = 3;
    options.out_channels = 2;
    options.improved = v.improved;
    options.add_self_loops = v.add_self_loops;
    options.normalize = v.normalize;
    options.dtype = DType::f64;
    Generator init(5);
    GCNConv conv(options, init);
    conv.to(device());
    Tensor edge_weight;
    const std::vector<Tensor*> slots = {&conv.lin->weight, &conv.bias, &edge_weight};
    std::vector<Tensor> inputs = gradcheck_inputs(random_f64({9, 3}, rng), {&conv.lin->weight, &conv.bias});
    inputs.push_back(random_f64({graph.num_edges()}, rng, 0.5, 2.0));
    expect_gradients_match(
        v.what, with_slots(slots, [&](const Tensor& x) { return conv.forward(x, graph, edge_weight); }),
        inputs);
  }
}

TEST_P(ConvGradients, SAGEConvOfXAndParameters) {
  std::mt19937_64 rng(4);
  const Graph graph = gradcheck_graph(device());
  for (const bool normalize : {false, true}) {
    SCOPED_TRACE(normalize ? "project, normalize" : "project");
    SAGEConvOptions options;
    options.in_channels = 3;
    options.out_channels = 2;
    options.project = true;
    options.normalize = normalize;
    options.dtype = DType::f64;
    Generator init(6);
    SAGEConv conv(options, init);
    conv.to(device());
    const std::vector<Tensor*> slots = {&conv.lin->weight, &conv.lin->bias, &conv.lin_l->weight,
                                        &conv.lin_l->bias, &conv.lin_r->weight};
    expect_gradients_match("SAGEConv",
                           with_slots(slots, [&](const Tensor& x) { return conv.forward(x, graph); }),
                           gradcheck_inputs(random_f64({9, 3}, rng), slots));
  }
}

TEST_P(ConvGradients, SAGEConvBipartiteOfXSrcAndXDst) {
  std::mt19937_64 rng(7);
  const Graph graph = graph_of(fix::kBipartite, device());
  SAGEConvOptions options;
  options.in_channels = 3;
  options.dst_in_channels = 2;
  options.out_channels = 2;
  options.dtype = DType::f64;
  Generator init(8);
  SAGEConv conv(options, init);
  conv.to(device());
  Tensor x_dst;
  const std::vector<Tensor*> slots = {&x_dst, &conv.lin_l->weight, &conv.lin_r->weight};
  std::vector<Tensor> inputs = {random_f64({6, 3}, rng), random_f64({4, 2}, rng), conv.lin_l->weight.clone(),
                                conv.lin_r->weight.clone()};
  expect_gradients_match("SAGEConv bipartite",
                         with_slots(slots, [&](const Tensor& x) { return conv.forward(x, x_dst, graph); }),
                         inputs);
}

TEST_P(ConvGradients, GINConvOfXEpsAndTheMLP) {
  std::mt19937_64 rng(9);
  const Graph graph = gradcheck_graph(device());
  Generator init(10);
  auto first = std::make_shared<Linear>(3, 4, true, init, DType::f64);
  auto second = std::make_shared<Linear>(4, 2, true, init, DType::f64);
  auto mlp = std::make_shared<Sequential>();
  mlp->add(first).add(std::make_shared<ELU>()).add(second);  // smooth: no kinks for the differences
  GINConvOptions options;
  options.eps = 0.25;
  options.train_eps = true;
  options.dtype = DType::f64;
  GINConv conv(mlp, options);
  conv.to(device());
  const std::vector<Tensor*> slots = {&conv.eps, &first->weight, &first->bias, &second->weight,
                                      &second->bias};
  expect_gradients_match("GINConv",
                         with_slots(slots, [&](const Tensor& x) { return conv.forward(x, graph); }),
                         gradcheck_inputs(random_f64({9, 3}, rng), slots));
}

// ---- behaviour ----

TEST(GCNConv, CachedKeepsTheFirstNormalisationAndRefusesAnotherGraph) {
  const Graph graph = graph_of(fix::kGraph, Device::cpu);
  GCNConvOptions options;
  options.in_channels = 2;
  options.out_channels = 3;
  options.cached = true;
  options.dtype = DType::f64;
  Generator init(1);
  GCNConv conv(options, init);
  std::mt19937_64 rng(2);
  const Tensor x = random_tensor({7, 2}, rng);
  const Tensor w = random_tensor({graph.num_edges()}, rng, 0.5, 2.0);
  const Tensor first = conv.forward(x, graph, w);
  // As PyG's: later edge weights are not read.
  EXPECT_TRUE(
      bitwise_equal(conv.forward(x, graph, random_tensor({graph.num_edges()}, rng, 0.5, 2.0)), first));
  GCNConv uncached({2, 3, false, false, true, true, true, DType::f64}, init);
  {
    autograd::NoGradGuard no_grad;
    uncached.lin->weight.copy_(conv.lin->weight);
    uncached.bias.copy_(conv.bias);
  }
  EXPECT_TRUE(bitwise_equal(uncached.forward(x, graph, w), first));
  const Graph other = graph_of(fix::kGraph, Device::cpu);
  expect_error([&] { conv.forward(x, other, w); }, {"GCNConv", "cached", "another graph"});
}

TEST(GCNConv, RefusesBadOptionsAndInputs) {
  Generator init(1);
  GCNConvOptions options;
  options.in_channels = 2;
  options.out_channels = 3;
  options.normalize = false;  // add_self_loops stays on
  expect_error([&] { GCNConv(options, init); }, {"GCNConv", "add_self_loops needs normalize"});
  options.in_channels = 0;
  expect_error([&] { GCNConv(options, init); }, {"GCNConv", "in_channels 0"});
  options.in_channels = 2;
  options.normalize = true;
  GCNConv conv(options, init);
  const Graph graph = graph_of(fix::kGraph, Device::cpu);
  expect_error([&] { conv.forward(Tensor::zeros({7, 3}), graph); }, {"GCNConv", "'x'", "(7, 2)"});
  expect_error(
      [&] {
        conv.forward(Tensor::zeros({7, 2}), graph, Tensor::zeros({3}));
      },
      {"GCNConv", "'edge_weight'", "(15,)"});
  expect_error(
      [&] {
        conv.forward(Tensor::zeros({7, 2}), graph, Tensor::zeros({15}, DType::f64));
      },
      {"GCNConv", "'edge_weight'", "dtype"});
  const Graph bipartite = graph_of(fix::kBipartite, Device::cpu);
  expect_error([&] { conv.forward(Tensor::zeros({6, 2}), bipartite); }, {"GCNConv", "bipartite"});
  if (cuda::available())
    expect_error(
        [&] {
          conv.forward(Tensor::zeros({7, 2}, DType::f32, Device::cuda), graph);
        },
        {"GCNConv", "on cuda but the graph on cpu"});
}

TEST(SAGEConv, NormalizeGivesZeroForAZeroRow) {
  // Node 6 has no in-edge: without root weight and bias its row is 0 before the normalisation.
  SAGEConvOptions options;
  options.in_channels = 3;
  options.out_channels = 2;
  options.root_weight = false;
  options.bias = false;
  options.normalize = true;
  options.dtype = DType::f64;
  Generator init(2);
  SAGEConv conv(options, init);
  std::mt19937_64 rng(3);
  Tensor x = random_tensor({7, 3}, rng);
  x.set_requires_grad(true);
  const Tensor out = conv.forward(x, graph_of(fix::kGraph, Device::cpu));
  const std::vector<double> values = host_f64(out);
  EXPECT_EQ(values[12], 0.0);
  EXPECT_EQ(values[13], 0.0);
  for (int64_t row = 0; row < 6; ++row)  // every other row has norm 1
    EXPECT_NEAR(std::hypot(values[2 * row], values[2 * row + 1]), 1.0, 1e-12) << row;
  out.backward(Tensor::full({7, 2}, 1.0, DType::f64));
  for (const double g : host_f64(x.grad())) EXPECT_TRUE(std::isfinite(g));
}

TEST(SAGEConv, RefusesBadInputsAndDrawsPyGsInitialisation) {
  SAGEConvOptions options;
  options.in_channels = 3;
  options.dst_in_channels = 2;
  options.out_channels = 4;
  options.project = true;
  Generator init(1);
  SAGEConv conv(options, init);
  std::vector<std::string> names;
  for (const auto& [name, p] : conv.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"lin.weight", "lin.bias", "lin_l.weight", "lin_l.bias",
                                             "lin_r.weight"}));
  for (const auto& [name, p] : conv.named_parameters()) {  // uniform in +-1/sqrt(in)
    const double bound = 1.0 / std::sqrt(name.rfind("lin_r", 0) == 0 ? 2.0 : 3.0);
    for (const double v : host_f64(p)) EXPECT_LE(std::abs(v), bound) << name;
  }
  const Graph bipartite = graph_of(fix::kBipartite, Device::cpu);
  expect_error(
      [&] {
        conv.forward(Tensor::zeros({6, 3}), Tensor::zeros({4, 3}), bipartite);
      },
      {"SAGEConv", "'x_dst'", "(4, 2)"});
  expect_error([&] { conv.forward(Tensor::zeros({6, 3}), bipartite); }, {"SAGEConv", "bipartite"});
  options.out_channels = 0;
  expect_error([&] { SAGEConv(options, init); }, {"SAGEConv", "out_channels 0"});
}

TEST(GINConv, EpsIsAParameterOnlyWithTrainEps) {
  Generator init(1);
  auto mlp = std::make_shared<Linear>(3, 2, true, init);
  GINConv fixed(mlp, {0.5, false, DType::f32});
  std::vector<std::string> names;
  for (const auto& [name, p] : fixed.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"nn.weight", "nn.bias"}));
  ASSERT_EQ(fixed.named_buffers().size(), 1u);
  EXPECT_EQ(fixed.named_buffers()[0].first, "eps");
  EXPECT_EQ(host_f64(fixed.eps), std::vector<double>{0.5});
  GINConv trained(std::make_shared<Linear>(3, 2, true, init), {0.5, true, DType::f32});
  EXPECT_EQ(trained.named_parameters()[0].first, "eps");
  EXPECT_TRUE(trained.named_buffers().empty());
}

TEST(GINConv, RefusesBadInputs) {
  Generator init(1), gen(2);
  auto mlp = std::make_shared<Sequential>();
  mlp->add(std::make_shared<Linear>(3, 2, true, init)).add(std::make_shared<Dropout>(0.5));
  GINConv conv(mlp);
  const Graph graph = graph_of(fix::kGraph, Device::cpu);
  const Graph bipartite = graph_of(fix::kBipartite, Device::cpu);
  EXPECT_EQ(conv.forward(Tensor::zeros({7, 3}), graph, gen).shape(), (Shape{7, 2}));
  expect_error(
      [&] {
        conv.forward(Tensor::zeros({7, 3}), graph);
      },
      {"Sequential step '1'", "pass a Generator"});
  GINConv dropout_alone(std::make_shared<Dropout>(0.5));
  expect_error([&] { dropout_alone.forward(Tensor::zeros({7, 3}), graph); }, {"Dropout", "pass a Generator"});
  conv.eval();  // nothing is drawn in eval mode: no generator needed
  dropout_alone.eval();
  EXPECT_EQ(conv.forward(Tensor::zeros({7, 3}), graph).shape(), (Shape{7, 2}));
  EXPECT_EQ(dropout_alone.forward(Tensor::zeros({7, 3}), graph).shape(), (Shape{7, 3}));
  conv.train();
  expect_error(
      [&] {
        conv.forward(Tensor::zeros({6, 3}), Tensor::zeros({4, 1}), bipartite, gen);
      },
      {"GINConv", "'x_dst'", "(4, 3)"});
  expect_error([&] { conv.forward(Tensor::zeros({7}), graph, gen); }, {"GINConv", "'x'"});
  expect_error([&] { GINConv(mlp, {NAN, false, DType::f32}); }, {"GINConv", "eps"});
}

TEST(MessagePassingLayers, OnAGraphWithoutEdges) {
  // No neighbours: GCNConv sees each node's own loop alone (norm 1), SAGEConv's mean and GINConv's
  // sum are 0.
  const Graph graph = Graph::from_edges(3, std::vector<int32_t>{}, std::vector<int32_t>{});
  std::mt19937_64 rng(5);
  const Tensor x = random_tensor({3, 2}, rng);
  Generator init(4);
  GCNConv gcn({2, 3, false, false, true, true, true, DType::f64}, init);
  {
    autograd::NoGradGuard no_grad;
    gcn.bias.copy_(random_tensor({3}, rng));
  }
  expect_close(gcn.forward(x, graph), gcn.lin->forward(x) + gcn.bias, "GCNConv", 1e-15);
  SAGEConvOptions options;
  options.in_channels = 2;
  options.out_channels = 3;
  options.dtype = DType::f64;
  SAGEConv sage(options, init);
  expect_close(sage.forward(x, graph), sage.lin_r->forward(x) + sage.lin_l->bias, "SAGEConv", 1e-15);
  auto nn = std::make_shared<Linear>(2, 3, true, init, DType::f64);
  GINConv gin(nn, {0.5, false, DType::f64});
  expect_close(gin.forward(x, graph), nn->forward(x * 1.5), "GINConv", 1e-15);
}

// ---- CUDA against the CPU on a larger graph ----

using CudaConvLayers = CudaVsCpuTest;

// GCNConv, SAGEConv and GINConv from 6 to 5 features in f64, each as a run of (x, graph, edge
// weights).
struct ThreeLayers {
  using Run = std::function<Tensor(const Tensor&, const Graph&, const Tensor&)>;
  Generator init{3};
  GCNConv gcn{{6, 5, true, false, true, true, true, DType::f64}, init};
  SAGEConv sage{{6, 0, 5, true, true, true, true, DType::f64}, init};
  GINConv gin{std::make_shared<Linear>(6, 5, true, init, DType::f64), {0.1, true, DType::f64}};
  std::vector<std::pair<std::string, Run>> runs() {
    return {
        {"GCNConv",
         [this](const Tensor& in, const Graph& g, const Tensor& ew) { return gcn.forward(in, g, ew); }},
        {"SAGEConv", [this](const Tensor& in, const Graph& g, const Tensor&) { return sage.forward(in, g); }},
        {"GINConv", [this](const Tensor& in, const Graph& g, const Tensor&) { return gin.forward(in, g); }}};
  }
  void to(Device device) {
    for (Module* m : std::vector<Module*>{&gcn, &sage, &gin}) m->to(device);
  }
};

// The message-passing layers on a graph of i64 offsets give the bits of i32 ones: outputs and the
// gradients of x and the edge weights (the layers' segments take the offsets narrowed).
TEST(MessagePassingLayers, WideOffsetsGiveTheBitsOfNarrowOnesOnTheCpu) {
  std::mt19937_64 rng(12);
  const Graph narrow = random_graph(300, 2400, 7, rng), wide = with_wide_offsets(narrow);
  ASSERT_EQ(wide.offset_dtype(), DType::i64);
  const Tensor x = random_tensor({300, 6}, rng), w = random_tensor({narrow.num_edges()}, rng, 0.5, 2.0);
  ThreeLayers layers;
  for (const auto& [name, run] : layers.runs()) {
    std::vector<Tensor> results;  // out, d x, d w for the narrow graph, then for the wide one
    for (const Graph* g : {&narrow, &wide}) {
      const Tensor xl = x.detach().set_requires_grad(true), wl = w.detach().set_requires_grad(true);
      const Tensor out = run(xl, *g, wl);
      ops::sum(out).backward();
      results.push_back(out);
      results.push_back(xl.grad());
      results.push_back(wl.grad().defined() ? wl.grad() : Tensor::zeros({1}));
    }
    for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(bitwise_equal(results[k], results[k + 3])) << name << " " << k;
  }
}

TEST_F(CudaConvLayers, MatchTheCpu) {
  std::mt19937_64 rng(11);
  const Graph graph = random_graph(300, 2400, 7, rng);
  const Tensor x = random_tensor({300, 6}, rng);
  ThreeLayers layers;
  const Tensor w = random_tensor({graph.num_edges()}, rng, 0.5, 2.0);
  for (const auto& [name, run] : layers.runs()) {
    const Tensor cpu = run(x, graph, w);
    layers.to(Device::cuda);
    const Tensor cuda = run(x.to(Device::cuda), graph.to(Device::cuda), w.to(Device::cuda));
    layers.to(Device::cpu);
    expect_close(cuda, cpu, name, 1e-12);
  }
}

}  // namespace
