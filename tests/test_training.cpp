// End to end: a two-layer MLP (matmul, add_bias, relu), trained with Adam on masked cross-entropy
// over two interleaved spirals, must reach >= 95% training accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/init.h"
#include "gat/framework/module.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/optim.h"
#include "gat_testing.h"

using namespace gat;

namespace {

struct Linear : Module {
  Tensor weight, bias;  // (in, out), (out,)
  Linear(int64_t in, int64_t out, Generator& gen) {
    weight = register_parameter("weight", init::glorot_uniform({in, out}, in, out, gen));
    bias = register_parameter("bias", init::zeros({out}));
  }
  Tensor forward(const Tensor& x) { return ops::add_bias(ops::matmul(x, weight), bias); }
};

struct Mlp : Module {
  std::shared_ptr<Linear> hidden, output;
  Mlp(int64_t in, int64_t width, int64_t classes, Generator& gen) {
    hidden = register_module("hidden", std::make_shared<Linear>(in, width, gen));
    output = register_module("output", std::make_shared<Linear>(width, classes, gen));
  }
  Tensor forward(const Tensor& x) { return output->forward(ops::relu(hidden->forward(x))); }
};

struct Points {
  Tensor x;       // (N, 2) f32
  Tensor labels;  // (N,) i32
  Tensor index;   // (N,) i32: every row
};

// Two spirals of n points each, 1.75 turns, interleaved by a half turn, with a little noise.
Points spirals(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> x;
  std::vector<int32_t> labels, index;
  const float pi = 3.14159265f;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < n; ++i) {
      const float t = static_cast<float>(i) / n;
      const float r = 0.15f + 0.85f * t, theta = 3.5f * pi * t + c * pi;
      x.push_back(r * std::cos(theta) + noise(rng));
      x.push_back(r * std::sin(theta) + noise(rng));
      index.push_back(static_cast<int32_t>(labels.size()));
      labels.push_back(c);
    }
  const int64_t N = static_cast<int64_t>(labels.size());
  return {Tensor::from_vector(x, {N, 2}), Tensor::from_vector(labels, {N}), Tensor::from_vector(index, {N})};
}

// Trains on `device`; returns the training accuracy after the first step and every 100 steps.
std::vector<double> train_spirals(Device device) {
  Points data = spirals(200, 3);
  data.x = data.x.to(device);
  data.labels = data.labels.to(device);
  data.index = data.index.to(device);
  Generator gen(11);
  Mlp net(2, 64, 2, gen);
  net.to(device);
  AdamOptions options;
  options.lr = 0.02;
  Adam opt(net.parameters(), options);
  std::vector<double> history;
  for (int step = 1; step <= 800; ++step) {
    net.train();
    ops::masked_cross_entropy(net.forward(data.x), data.labels, data.index).backward();
    opt.step();
    opt.zero_grad();
    if (step % 100 == 0 || step == 1) {
      net.eval();
      autograd::NoGradGuard no_grad;
      history.push_back(ops::accuracy(net.forward(data.x), data.labels, data.index));
    }
  }
  return history;
}

}  // namespace

TEST(Training, MlpLearnsTwoSpiralsOnCpu) {
  std::vector<double> history = train_spirals(Device::cpu);
  EXPECT_LT(history.front(), 0.8) << "the problem is too easy to show learning";
  EXPECT_GE(history.back(), 0.95) << "accuracy after the first step: " << history.front();
}

TEST(Training, MlpLearnsTwoSpiralsOnCuda) {
  GAT_SKIP_WITHOUT_CUDA();
  std::vector<double> history = train_spirals(Device::cuda);
  EXPECT_GE(history.back(), 0.95);
}

TEST(Training, ModuleParametersAndGradients) {
  Generator gen(1);
  Mlp net(2, 8, 3, gen);
  EXPECT_EQ(net.num_parameters(), 2 * 8 + 8 + 8 * 3 + 3);
  EXPECT_EQ(net.named_parameters()[2].first, "output.weight");
  Points data = spirals(5, 1);
  ops::masked_cross_entropy(net.forward(data.x), data.labels, data.index).backward();
  for (auto& [name, p] : net.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  net.zero_grad();
  for (auto& [name, p] : net.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
}
