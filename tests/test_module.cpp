// Module (named parameters, children, train and eval modes, zero_grad, to the CPU and to CUDA)
// and the initialisers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "gat/framework/init.h"
#include "gat/framework/module.h"
#include "gat_testing.h"

using namespace gat;
using gat::testing::CudaVsCpuTest;

namespace {

struct Leaf : Module {
  Tensor weight, bias;
  Leaf() {
    weight = register_parameter("weight", Tensor::zeros({2, 3}));
    bias = register_parameter("bias", Tensor::zeros({3}));
  }
};

struct Net : Module {
  Tensor scale;
  std::shared_ptr<Leaf> first, second;
  Net() {
    scale = register_parameter("scale", Tensor::zeros({1}));
    first = register_module("first", std::make_shared<Leaf>());
    second = register_module("second", std::make_shared<Leaf>());
  }
  void add_twice(const std::string& name) {
    register_parameter(name, Tensor::zeros({1}));
    register_parameter(name, Tensor::zeros({1}));
  }
};

}  // namespace

TEST(Module, NamedParametersAreDottedPathsInRegistrationOrder) {
  Net net;
  std::vector<std::string> names;
  for (auto& [name, tensor] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"scale", "first.weight", "first.bias", "second.weight",
                                             "second.bias"}));
  EXPECT_EQ(net.num_parameters(), 1 + 2 * (6 + 3));
  // The handles are the module's own tensors, and they require grad.
  std::vector<Tensor> params = net.parameters();
  ASSERT_EQ(params.size(), 5u);
  EXPECT_TRUE(params[1].same(net.first->weight));
  for (const Tensor& p : params) EXPECT_TRUE(p.requires_grad());
}

TEST(Module, TrainAndEvalReachEveryChild) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.first->is_training());
  EXPECT_FALSE(net.second->is_training());
  net.train();
  EXPECT_TRUE(net.second->is_training());
}

TEST(Module, ZeroGradDropsEveryGradient) {
  Net net;
  for (Tensor& p : net.parameters()) p.impl().grad = Tensor::full(p.shape(), 1.0).impl_ptr();
  net.zero_grad();
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, DuplicateOrDottedNamesThrow) {
  Net net;
  EXPECT_THROW(net.add_twice("extra"), Error);
  EXPECT_THROW(net.add_twice("a.b"), Error);
}

TEST(Module, ToCpuKeepsHandles) {
  Net net;
  Tensor w = net.first->weight;
  net.to(Device::cpu);
  EXPECT_TRUE(w.same(net.first->weight));
  EXPECT_EQ(w.device(), Device::cpu);
}

TEST(Init, GlorotUniformBoundAndSeed) {
  Generator gen(7);
  Tensor w = init::glorot_uniform({40, 60}, 40, 60, gen, DType::f64);
  const double bound = std::sqrt(6.0 / 100.0);
  std::vector<double> v = w.to_vector<double>();
  double mean = 0;
  for (double x : v) {
    EXPECT_GE(x, -bound);
    EXPECT_LT(x, bound);
    mean += x / v.size();
  }
  // The values fill the range: the extremes are near ±bound, the mean near 0
  // (the standard deviation of the mean of 2400 draws is bound / sqrt(3 * 2400) ~ 0.003).
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 0.99 * bound);
  EXPECT_LT(*std::min_element(v.begin(), v.end()), -0.99 * bound);
  EXPECT_LT(std::abs(mean), 0.015);
  // Same seed, same values; f32 is the rounded f64 draw.
  Generator again(7);
  EXPECT_EQ(init::glorot_uniform({40, 60}, 40, 60, again, DType::f32).to_vector<float>(),
            w.to(DType::f32).to_vector<float>());
  Generator other(8);
  EXPECT_NE(init::glorot_uniform({40, 60}, 40, 60, other, DType::f64).to_vector<double>(), v);
  EXPECT_THROW(init::glorot_uniform({2}, 0, 0, gen), Error);
}

TEST(Init, Zeros) {
  Tensor z = init::zeros({3, 2}, DType::f64);
  EXPECT_EQ(z.dtype(), DType::f64);
  EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0));
}

using CudaModule = CudaVsCpuTest;

TEST_F(CudaModule, ToCudaMovesParametersInPlace) {
  struct Holder : Module {
    Tensor w;
    Holder() { w = register_parameter("w", Tensor::from_vector<float>({1, 2, 3}, {3})); }
  } m;
  Tensor handle = m.w;
  m.to(Device::cuda);
  EXPECT_EQ(handle.device(), Device::cuda);
  EXPECT_EQ(handle.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  m.to(Device::cpu);
  EXPECT_EQ(m.parameters()[0].device(), Device::cpu);
}
