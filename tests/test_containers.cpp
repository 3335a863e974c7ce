// ModuleList and ModuleDict (parameter names, order, misuse), Embedding (lookup, shapes, its
// gradient by finite differences in f64, repeated indices, errors; CUDA against the CPU bit for
// bit), and init::normal.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/init.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/reduce.h"
#include "gat/layers/containers.h"
#include "gat/layers/embedding.h"
#include "gat/layers/layer_norm.h"
#include "gat/layers/linear.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using gat::testing::CudaVsCpuTest;
using gat::testing::expect_error;

namespace {

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> names;
  for (auto& [name, t] : m.named_parameters()) names.push_back(name);
  return names;
}

struct Tower : Module {
  std::shared_ptr<ModuleList> layers = register_module("layers", std::make_shared<ModuleList>());
  std::shared_ptr<ModuleDict> heads = register_module("heads", std::make_shared<ModuleDict>());
};

}  // namespace

TEST(ModuleList, NamesChildrenByPositionInOrder) {
  Generator init(0);
  Tower t;
  t.layers->append(std::make_shared<Linear>(3, 4, true, init)).append(std::make_shared<LayerNorm>(4));
  t.layers->append(std::make_shared<Linear>(4, 2, false, init));
  t.heads->insert("zeta", std::make_shared<Linear>(2, 1, false, init));
  t.heads->insert("alpha", std::make_shared<Linear>(2, 5, true, init));
  EXPECT_EQ(names_of(t), (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight",
                                                   "layers.1.bias", "layers.2.weight", "heads.zeta.weight",
                                                   "heads.alpha.weight", "heads.alpha.bias"}));
  EXPECT_EQ(t.layers->size(), 3u);
  EXPECT_EQ(t.layers->get<Linear>(2)->out_features(), 2);
  size_t n = 0;
  for (const auto& m : *t.layers) n += m != nullptr;
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(t.heads->keys(), (std::vector<std::string>{"zeta", "alpha"}));  // insertion order
  EXPECT_TRUE(t.heads->contains("alpha"));
  EXPECT_FALSE(t.heads->contains("beta"));
  EXPECT_EQ(t.heads->get<Linear>("alpha")->out_features(), 5);
  // Through the containers: train(), eval() and the state dict reach every child.
  t.eval();
  EXPECT_FALSE(t.layers->get<LayerNorm>(1)->is_training());
  const auto state = t.state_dict();
  EXPECT_EQ(state.size(), 8u);
  Tower other;
  Generator init2(9);
  other.layers->append(std::make_shared<Linear>(3, 4, true, init2)).append(std::make_shared<LayerNorm>(4));
  other.layers->append(std::make_shared<Linear>(4, 2, false, init2));
  other.heads->insert("zeta", std::make_shared<Linear>(2, 1, false, init2));
  other.heads->insert("alpha", std::make_shared<Linear>(2, 5, true, init2));
  other.load_state_dict(state);
  EXPECT_EQ(other.heads->get<Linear>("alpha")->weight.to_vector<float>(),
            t.heads->get<Linear>("alpha")->weight.to_vector<float>());
}

TEST(ModuleList, MisuseIsAClearError) {
  Generator init(0);
  ModuleList list;
  list.append(std::make_shared<Linear>(2, 2, true, init));
  expect_error([&] { list[1]; }, {"ModuleList", "index 1 out of range (1 modules)"});
  expect_error([&] { list.get<LayerNorm>(0); }, {"ModuleList: module 0", "not of the requested module type"});
  expect_error([&] { list.append(nullptr); }, {"ModuleList::append: null module"});
  ModuleDict dict;
  dict.insert("a", std::make_shared<LayerNorm>(2));
  expect_error([&] { dict.insert("a", std::make_shared<LayerNorm>(2)); }, {"'a' is already a submodule"});
  expect_error([&] { dict.insert("a.b", std::make_shared<LayerNorm>(2)); }, {"invalid name 'a.b'"});
  expect_error([&] { dict.insert("", std::make_shared<LayerNorm>(2)); }, {"invalid name ''"});
  expect_error([&] { dict.insert("b", nullptr); }, {"null module for key 'b'"});
  expect_error([&] { dict.at("c"); }, {"ModuleDict: no module 'c'"});
  expect_error([&] { dict.get<Linear>("a"); }, {"ModuleDict: module 'a'", "not of the requested"});
  EXPECT_EQ(dict.size(), 1u);  // the refused inserts left nothing behind
}

TEST(Embedding, LooksUpRowsForAnyIndexShape) {
  Generator init(4);
  Embedding table(6, 3, init, DType::f64);
  EXPECT_EQ(names_of(table), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(table.weight.shape(), (Shape{6, 3}));
  const Tensor ids = Tensor::from_vector<int32_t>({5, 0, 5, 2, 1, 0}, {2, 3});
  const Tensor out = table.forward(ids);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 3}));
  const std::vector<double> w = table.weight.to_vector<double>(), o = out.to_vector<double>();
  const std::vector<int32_t> flat{5, 0, 5, 2, 1, 0};
  for (size_t k = 0; k < flat.size(); ++k)
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(o[3 * k + j], w[3 * flat[k] + j]) << k << "," << j;
  EXPECT_EQ(table.forward(ops::RowIndex(Tensor::from_vector<int32_t>({3}, {1}))).shape(), (Shape{1, 3}));
  expect_error([&] { table.forward(Tensor::from_vector<int32_t>({0, 6}, {2})); }, {"6"});
  expect_error([&] { table.forward(Tensor::from_vector<int32_t>({-1}, {1})); }, {"-1"});
  expect_error([&] { table.forward(Tensor::from_vector<double>({0}, {1})); }, {"Embedding", "index", "i32"});
  expect_error([&] { Embedding(0, 3, init); }, {"Embedding", "num_embeddings 0"});
}

// d weight by central finite differences in f64, with repeated indices (rows 1 and 4 three and two
// times) and rows never looked up (gradient 0).
TEST(Embedding, GradientMatchesFiniteDifferences) {
  Generator init(1);
  Embedding table(7, 4, init, DType::f64);
  const Tensor ids = Tensor::from_vector<int32_t>({1, 4, 1, 0, 4, 1, 6}, {7});
  std::mt19937_64 rng(2);
  const Tensor coefficients = gat::testing::random_tensor({7, 4}, rng);
  gat::testing::expect_gradients_match("Embedding",
                                       [&](const std::vector<Tensor>& in) {
                                         table.weight = in[0];
                                         return ops::sum(ops::mul(table.forward(ids), coefficients));
                                       },
                                       {gat::testing::random_tensor({7, 4}, rng)});
  // Rows 2, 3 and 5 are never looked up: their gradient is exactly zero.
  Tensor w = gat::testing::random_tensor({7, 4}, rng).set_requires_grad();
  table.weight = w;
  ops::sum(ops::mul(table.forward(ids), coefficients)).backward();
  const std::vector<double> g = w.grad().to_vector<double>();
  for (int row : {2, 3, 5})
    for (int j = 0; j < 4; ++j) EXPECT_EQ(g[4 * row + j], 0.0);
}

TEST(Init, NormalHasTheRequestedSpread) {
  Generator gen(3);
  const std::vector<double> v = init::normal({20001}, 2.0, gen, DType::f64).to_vector<double>();
  double mean = 0, square = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) square += (x - mean) * (x - mean) / v.size();
  EXPECT_NEAR(mean, 0.0, 0.05);               // 4 standard errors (2 / sqrt(20001) = 0.014)
  EXPECT_NEAR(std::sqrt(square), 2.0, 0.05);  // the standard deviation's standard error is 0.01
  Generator again(3);
  EXPECT_EQ(init::normal({20001}, 2.0, again, DType::f64).to_vector<double>(), v);  // a seed fixes it
  expect_error([&] { init::normal({2}, -1.0, gen); }, {"init::normal", "standard deviation"});
}

using CudaEmbedding = CudaVsCpuTest;

// Forward and the table's gradient on CUDA: the same bits as the CPU (index_rows' deterministic
// scatter), many repeats of a few rows.
TEST_F(CudaEmbedding, MatchesCpuBitForBit) {
  Generator init(7);
  Embedding cpu(50, 16, init, DType::f32);
  std::mt19937_64 rng(8);
  std::vector<int32_t> ids(3000);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 7) * 7;
  const Tensor index = Tensor::from_vector<int32_t>(ids, {30, 100});
  const Tensor coefficients = gat::testing::random_tensor({30, 100, 16}, rng, -1, 1, DType::f32);
  ops::sum(ops::mul(cpu.forward(index), coefficients)).backward();
  Generator init2(7);
  Embedding gpu(50, 16, init2, DType::f32);
  gpu.to(Device::cuda);
  const Tensor out = gpu.forward(index.to(Device::cuda));
  ops::sum(ops::mul(out, coefficients.to(Device::cuda))).backward();
  EXPECT_EQ(out.to(Device::cpu).to_vector<float>(), cpu.forward(index).to_vector<float>());
  EXPECT_EQ(gpu.weight.grad().to(Device::cpu).to_vector<float>(), cpu.weight.grad().to_vector<float>());
}
