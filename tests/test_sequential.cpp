// Sequential: order of application, parameter names, training and eval mode reaching the
// children, modules that draw random numbers, and use inside a training loop (gradients reach
// every layer), the activation modules with their arguments and PyTorch's defaults.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/unary.h"
#include "gat/layers/activation.h"
#include "gat/layers/batch_norm.h"
#include "gat/layers/dropout.h"
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
  gat::testing::expect_error([&] { net.forward(x); }, {"Sequential", "'3'", "generator"});
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
