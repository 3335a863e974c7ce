// Sequential: order of application, parameter names, training and eval mode reaching the
// children, modules that draw random numbers, graph layers beside the others, forward without
// a generator in eval mode, use inside a training loop (gradients reach every layer), and the
// activation modules with their arguments and PyTorch's defaults.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/unary.h"
#include "gat/layers/activation.h"
#include "gat/layers/batch_norm.h"
#include "gat/layers/dropout.h"
#include "gat/layers/gat_conv.h"
#include "gat/layers/gatv2_conv.h"
#include "gat/layers/layer_norm.h"
#include "gat/layers/linear.h"
#include "gat/layers/sequential.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using gat::testing::random_tensor;

TEST(Sequential, AppliesItsStepsInOrderAndNamesTheirParameters) {
  Generator init(0);
  auto first = std::make_shared<Linear>(4, 3, true, init, DType::f64);
  auto norm = std::make_shared<LayerNorm>(3, 1e-5, true, DType::f64);
  auto last = std::make_shared<Linear>(3, 2, false, init, DType::f64);
  Sequential net;
  net.add(first)
      .add(std::make_shared<ELU>(0.5))
      .add(norm, "norm")
      .add([](const Tensor& h) { return ops::scale(h, 2.0); })
      .add(last);
  std::vector<std::string> names;
  for (auto& [name, t] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "norm.weight", "norm.bias", "4.weight"}));
  EXPECT_EQ(net.size(), 5u);
  std::mt19937_64 rng(1);
  Tensor x = random_tensor({5, 4}, rng);
  Tensor want = last->forward(ops::scale(norm->forward(ops::elu(first->forward(x), 0.5)), 2.0));
  EXPECT_EQ(net.forward(x).to_vector<double>(), want.to_vector<double>());
}

TEST(Sequential, TrainEvalAndRandomStepsReachTheChildren) {
  Generator init(0);
  auto dropout = std::make_shared<Dropout>(0.5);
  auto bn = std::make_shared<BatchNorm1d>(3, 1e-5, 0.1, true, DType::f64);
  Sequential net;
  net.add(std::make_shared<Linear>(4, 3, true, init, DType::f64))
      .add(bn)
      .add(std::make_shared<ReLU>())
      .add(dropout);
  EXPECT_EQ(net.named_buffers().size(), 2u);
  std::mt19937_64 rng(2);
  Tensor x = random_tensor({6, 4}, rng);
  gat::testing::expect_error([&] { net.forward(x); }, {"Sequential step '3'", "pass a Generator"});
  Generator gen(7);
  Tensor y = net.forward(x, gen);
  EXPECT_EQ(gen.next_stream(), 1u) << "dropout drew one stream";
  net.eval();
  EXPECT_FALSE(dropout->is_training());
  EXPECT_FALSE(bn->is_training());
  Tensor a = net.forward(x, gen), b = net.forward(x, gen);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << "eval: no dropout, running statistics";
}

TEST(Sequential, GradientsReachEveryLayer) {
  Generator init(3);
  Sequential net;
  net.add(std::make_shared<Linear>(4, 8, true, init, DType::f64))
      .add(std::make_shared<LeakyReLU>(0.2))
      .add(std::make_shared<LayerNorm>(8, 1e-5, true, DType::f64))
      .add(std::make_shared<Linear>(8, 1, true, init, DType::f64));
  std::mt19937_64 rng(4);
  ops::sum(net.forward(random_tensor({7, 4}, rng))).backward();
  for (auto& [name, p] : net.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(Sequential, ActivationModulesRunTheirOpsWithTheirArguments) {
  std::mt19937_64 rng(5);
  const Tensor x = random_tensor({6, 4}, rng, -8.0, 8.0);
  Sequential net;
  net.add(std::make_shared<ReLU6>())
      .add(std::make_shared<GELU>(ops::GeluApproximate::tanh))
      .add(std::make_shared<SiLU>())
      .add(std::make_shared<Softplus>(2.0, 3.0))
      .add(std::make_shared<GELU>());
  const Tensor want =
      ops::gelu(ops::softplus(ops::silu(ops::gelu(ops::relu6(x), ops::GeluApproximate::tanh)), 2.0, 3.0));
  EXPECT_TRUE(gat::testing::bitwise_equal(net.forward(x), want));
  // The defaults are PyTorch's: Softplus(beta 1, threshold 20) (x reaches past 2), GELU exact.
  EXPECT_TRUE(gat::testing::bitwise_equal(Softplus().forward(x), ops::softplus(x, 1.0, 20.0)));
  EXPECT_FALSE(gat::testing::bitwise_equal(Softplus().forward(x), ops::softplus(x, 1.0, 2.0)));
  EXPECT_TRUE(gat::testing::bitwise_equal(GELU().forward(x), ops::gelu(x)));
  EXPECT_FALSE(gat::testing::bitwise_equal(GELU().forward(x), ops::gelu(x, ops::GeluApproximate::tanh)));
}

// ---- graph layers, and forward without a generator ----------------------------------------

namespace {

GATConvOptions small_conv(int64_t in, int64_t out, int64_t heads, double dropout) {
  GATConvOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.heads = heads;
  o.dropout = dropout;
  o.dtype = DType::f64;
  return o;
}

// 5 nodes, a ring and two chords.
Graph ring_graph() { return Graph::from_edges(5, {0, 1, 2, 3, 4, 0, 2}, {1, 2, 3, 4, 0, 3, 4}); }

struct NeedsGraph : Module {
  Tensor forward(const Tensor& x, const Graph& graph) const {
    return ops::scale(x, double(graph.num_edges()));
  }
};
struct NoForward : Module {};

}  // namespace

// Which forms a step may have: a module with none of them does not compile in add (a
// static_assert); this is the trait it reads.
static_assert(detail::has_forward_v<Dropout, const Tensor&, Generator&>);
static_assert(detail::has_forward_v<Dropout, const Tensor&>);
static_assert(detail::has_forward_v<GATConv, const Tensor&, const Graph&, Generator&>);
static_assert(detail::has_forward_v<GATConv, const Tensor&, const Graph&>);
static_assert(!detail::has_forward_v<GATConv, const Tensor&>);
static_assert(!detail::has_forward_v<NoForward, const Tensor&>);

TEST(Sequential, HoldsGraphLayersBesideOthers) {
  Generator init(5);
  auto conv1 = std::make_shared<GATConv>(small_conv(4, 3, 2, 0.5), init);
  GATv2ConvOptions v2;
  static_cast<GraphAttentionOptions&>(v2) = small_conv(6, 2, 1, 0.0);
  auto conv2 = std::make_shared<GATv2Conv>(v2, init);
  auto head = std::make_shared<Linear>(2, 3, true, init, DType::f64);
  Sequential net;
  net.add(std::make_shared<Dropout>(0.5)).add(conv1).add(std::make_shared<ELU>()).add(conv2).add(head);
  std::vector<std::string> names;
  for (auto& [name, t] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names.front(), "1.att_src");  // GATConv registers its attention vectors first
  EXPECT_EQ(names.back(), "4.bias");
  std::mt19937_64 rng(3);
  const Tensor x = random_tensor({5, 4}, rng);
  const Graph graph = ring_graph();

  // Training: the generator reaches the dropout and both graph layers, in order.
  Generator a(11), b(11);
  const Tensor y = net.forward(x, graph, a);
  Dropout same_dropout(0.5);
  Tensor want = same_dropout.forward(x, b);
  want = head->forward(conv2->forward(ops::elu(conv1->forward(want, graph, b), 1.0), graph, b));
  EXPECT_EQ(y.to_vector<double>(), want.to_vector<double>());
  EXPECT_EQ(a.next_stream(), b.next_stream());
  gat::testing::expect_error([&] { net.forward(x, graph); },
                             {"Sequential step '0'", "draws random numbers", "pass a Generator"});
  Generator c(11);
  gat::testing::expect_error([&] { net.forward(x, c); }, {"Sequential step '1'", "needs a graph"});

  // Eval: no generator needed, the same output as with one.
  net.eval();
  Generator unused(1);
  const Tensor with_gen = net.forward(x, graph, unused);
  EXPECT_EQ(unused.next_stream(), 0u);
  EXPECT_EQ(net.forward(x, graph).to_vector<double>(), with_gen.to_vector<double>());

  Sequential graph_only;
  graph_only.add(std::make_shared<NeedsGraph>());
  EXPECT_EQ(graph_only.forward(x, graph).to_vector<double>(), ops::scale(x, 7.0).to_vector<double>());
  gat::testing::expect_error([&] { graph_only.forward(x); }, {"Sequential step '0' needs a graph"});
}

TEST(Sequential, EvalForwardNeedsNoGenerator) {
  std::mt19937_64 rng(4);
  const Tensor x = random_tensor({3, 4}, rng);
  Dropout dropout(0.3);
  gat::testing::expect_error([&] { dropout.forward(x); },
                             {"Dropout draws random numbers", "pass a Generator"});
  dropout.eval();
  EXPECT_EQ(dropout.forward(x).to_vector<double>(), x.to_vector<double>());
  Dropout none(0.0);  // training, but nothing to draw
  EXPECT_EQ(none.forward(x).to_vector<double>(), x.to_vector<double>());

  Generator init(2);
  GATConv conv(small_conv(4, 3, 2, 0.4), init);
  const Tensor h = random_tensor({5, 4}, rng);
  gat::testing::expect_error([&] { conv.forward(h, ring_graph()); },
                             {"graph attention layer", "pass a Generator"});
  conv.eval();
  Generator gen(3);
  EXPECT_EQ(conv.forward(h, ring_graph()).to_vector<double>(),
            conv.forward(h, ring_graph(), gen).to_vector<double>());
  GATConv plain(small_conv(4, 3, 2, 0.0), init);  // training without dropout draws nothing
  EXPECT_NO_THROW(plain.forward(h, ring_graph()));
}
