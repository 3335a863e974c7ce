// CUDA tests of the elementwise, shape and reduction ops: every op (forward and backward) against
// the CPU reference, dropout masks bit for bit, f64 gradient checks on the device, and bitwise
// reproducibility across runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/batch_norm.h"
#include "gat/framework/ops/concat.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/layer_norm.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/losses.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/ops/transpose.h"
#include "gat/framework/ops/unary.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Inputs = std::vector<Tensor>;

struct OpCase {
  std::string name;
  TensorFn f;
  std::vector<Shape> large;  // parity and reproducibility: several blocks' worth of elements
  std::vector<Shape> small;  // f64 gradient checks (2 evaluations per element)
  // Compare max |cpu - cuda| against the largest |cpu| instead of element by element: for ops
  // whose backward subtracts a sum (softmax), where the two devices' summation orders leave tiny
  // elements with no correct digits in f32.
  bool normwise = false;
};

// Indices with repeats (every 3rd row, some rows three times) for `rows` source rows.
Tensor repeating_index(int64_t count, int64_t rows) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) v[static_cast<size_t>(k)] = static_cast<int32_t>((k * 7 + k / 3) % rows);
  return Tensor::from_vector(v, {count});
}

std::vector<OpCase> op_cases() {
  const DropoutKey key{0.35f, 123, 4};
  const Tensor index_large = repeating_index(3000, 1000), index_small = repeating_index(9, 4);
  return {
      {"add", [](const Inputs& in) { return ops::add(in[0], in[1]); }, {{513, 67}, {513, 67}}, {{3, 4}, {3, 4}}},
      {"add(x, x)", [](const Inputs& in) { return ops::add(in[0], in[0]); }, {{513, 67}}, {{3, 4}}},
      {"mul", [](const Inputs& in) { return ops::mul(in[0], in[1]); }, {{513, 67}, {513, 67}}, {{3, 4}, {3, 4}}},
      {"mul(x, x)", [](const Inputs& in) { return ops::mul(in[0], in[0]); }, {{513, 67}}, {{3, 4}}},
      {"scale", [](const Inputs& in) { return ops::scale(in[0], -0.3); }, {{100003}}, {{5}}},
      {"add_bias", [](const Inputs& in) { return ops::add_bias(in[0], in[1]); }, {{300, 8, 67}, {67}},
       {{2, 3, 4}, {4}}},
      {"relu", [](const Inputs& in) { return ops::relu(in[0]); }, {{100003}}, {{4, 5}}},
      {"leaky_relu", [](const Inputs& in) { return ops::leaky_relu(in[0], 0.2); }, {{100003}}, {{4, 5}}},
      {"elu", [](const Inputs& in) { return ops::elu(in[0], 1.3); }, {{100003}}, {{4, 5}}},
      {"dropout", [key](const Inputs& in) { return ops::dropout(in[0], key); }, {{1000, 99}}, {{6, 7}}},
      {"reshape", [](const Inputs& in) { return ops::reshape(in[0], {-1, 2}); }, {{50, 7, 6}}, {{2, 3, 2}}},
      {"sum", [](const Inputs& in) { return ops::sum(in[0]); }, {{1000003}}, {{3, 4}}},
      {"mean", [](const Inputs& in) { return ops::mean(in[0]); }, {{700, 301}}, {{3, 4}}},
      {"sum axis 0", [](const Inputs& in) { return ops::sum(in[0], 0); }, {{300, 70, 5}}, {{2, 3, 4}}},
      {"sum axis 1", [](const Inputs& in) { return ops::sum(in[0], 1); }, {{300, 70, 5}}, {{2, 3, 4}}},
      {"sum axis 0, long", [](const Inputs& in) { return ops::sum(in[0], 0); }, {{40000, 3}}, {}},
      {"sum axis -1, long", [](const Inputs& in) { return ops::sum(in[0], -1); }, {{3, 40000}}, {}},
      {"sum axis -1", [](const Inputs& in) { return ops::sum(in[0], -1); }, {{300, 70, 5}}, {{2, 3, 4}}},
      {"mean axis 1", [](const Inputs& in) { return ops::mean(in[0], 1); }, {{300, 70, 5}}, {{2, 3, 4}}},
      {"layer_norm", [](const Inputs& in) { return ops::layer_norm(in[0], in[1], in[2], 1e-5); },
       {{300, 7, 129}, {129}, {129}}, {{3, 2, 5}, {5}, {5}}},
      {"layer_norm plain", [](const Inputs& in) { return ops::layer_norm(in[0], Tensor(), Tensor(), 1e-3); },
       {{1000, 64}}, {{4, 6}}},
      {"batch_norm training",
       [](const Inputs& in) { return ops::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5); },
       {{3000, 70}, {70}, {70}}, {{5, 3}, {3}, {3}}},
      {"batch_norm training, long", [](const Inputs& in) {
         return ops::batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
       {{40000, 3}}, {}},
      {"batch_norm eval",
       [](const Inputs& in) {
         const int64_t C = in[0].size(1);
         Tensor running_mean = Tensor::full({C}, 0.25, in[0].dtype(), in[0].device());
         Tensor running_var = Tensor::full({C}, 1.5, in[0].dtype(), in[0].device());
         return ops::batch_norm(in[0], running_mean, running_var, in[1], in[2], false, 0.1, 1e-5);
       },
       {{500, 33}, {33}, {33}}, {{4, 3}, {3}, {3}}},
      {"concat axis 1", [](const Inputs& in) { return ops::concat({in[0], in[1], in[2]}, 1); },
       {{200, 3, 9}, {200, 17, 9}, {200, 1, 9}}, {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}}},
      {"concat axis 0", [](const Inputs& in) { return ops::concat({in[0], in[1]}, 0); },
       {{300, 64}, {17, 64}}, {{2, 3}, {1, 3}}},
      {"concat(x, x) axis -1", [](const Inputs& in) { return ops::concat({in[0], in[0]}, -1); },
       {{300, 33}}, {{3, 2}}},
      {"index_rows", [index_large](const Inputs& in) { return ops::index_rows(in[0], index_large); },
       {{1000, 4, 16}}, {}},
      {"index_rows small", [index_small](const Inputs& in) { return ops::index_rows(in[0], index_small); },
       {}, {{4, 2, 3}}},
      // Broadcasting arithmetic: rows, columns, single elements, constants on either side. Divisors
      // and logarithms see 0.5 + x^2 (the inputs are uniform in [-1, 1]).
      {"sub", [](const Inputs& in) { return in[0] - in[1]; }, {{513, 67}, {513, 67}}, {{3, 4}, {3, 4}}},
      {"div", [](const Inputs& in) { return in[0] / (in[1] * in[1] + 0.5); }, {{513, 67}, {513, 67}}, {{3, 4}, {3, 4}}},
      {"add row", [](const Inputs& in) { return in[0] + in[1]; }, {{300, 8, 67}, {67}}, {{2, 3, 4}, {4}}},
      {"sub row (1, C) first", [](const Inputs& in) { return in[1] - in[0]; }, {{513, 67}, {1, 67}}, {{3, 4}, {1, 4}}},
      {"mul column", [](const Inputs& in) { return in[0] * in[1]; }, {{513, 67}, {513, 1}}, {{3, 4}, {3, 1}}},
      {"div column", [](const Inputs& in) { return in[0] / (in[1] * in[1] + 0.5); }, {{513, 67}, {513, 1}},
       {{3, 4}, {3, 1}}},
      {"div by a row", [](const Inputs& in) { return in[1] / (in[0] * in[0] + 0.5); }, {{513, 67}, {67}},
       {{3, 4}, {4}}},
      {"mul single", [](const Inputs& in) { return in[1] * in[0]; }, {{513, 67}, {1, 1}}, {{3, 4}, {1, 1}}},
      {"outer sum", [](const Inputs& in) { return in[0] + in[1]; }, {{513, 1}, {1, 67}}, {{3, 1}, {1, 4}}},
      {"constants", [](const Inputs& in) { return 2.0 - in[0] * 3.0 + -in[0] / 4.0 + 1.0 / (in[0] * in[0] + 0.5); },
       {{100003}}, {{5}}},
      // Pointwise functions, softmax along both axes of 2-D tensors and a middle axis, transpose.
      {"exp", [](const Inputs& in) { return ops::exp(in[0]); }, {{100003}}, {{4, 5}}},
      {"log", [](const Inputs& in) { return ops::log(in[0] * in[0] + 0.5); }, {{100003}}, {{4, 5}}},
      {"sigmoid", [](const Inputs& in) { return ops::sigmoid(in[0] * 1.5); }, {{100003}}, {{4, 5}}},
      {"tanh", [](const Inputs& in) { return ops::tanh(in[0] * 1.5); }, {{100003}}, {{4, 5}}},
      {"softmax axis 1", [](const Inputs& in) { return ops::softmax(in[0] * 5.0, 1); }, {{1000, 99}}, {{3, 5}}, true},
      {"softmax axis 0", [](const Inputs& in) { return ops::softmax(in[0] * 5.0, 0); }, {{1000, 99}}, {{3, 5}}, true},
      {"log_softmax axis 1", [](const Inputs& in) { return ops::log_softmax(in[0] * 5.0, 1); }, {{1000, 99}},
       {{3, 5}}, true},
      {"log_softmax axis 0", [](const Inputs& in) { return ops::log_softmax(in[0] * 5.0, 0); }, {{1000, 99}},
       {{3, 5}}, true},
      {"softmax 3-D axis 1", [](const Inputs& in) { return ops::softmax(in[0] * 5.0, 1); }, {{40, 300, 33}},
       {{2, 3, 4}}, true},
      {"transpose", [](const Inputs& in) { return ops::transpose(in[0]); }, {{1000, 67}}, {{3, 5}}},
      // Losses, whole and over the rows of an index with repeats.
      {"mse_loss", [](const Inputs& in) { return ops::mse_loss(in[0], in[1]); }, {{1000, 33}, {1000, 33}},
       {{4, 3}, {4, 3}}},
      {"bce_with_logits", [](const Inputs& in) { return ops::binary_cross_entropy_with_logits(in[0] * 5.0, in[1]); },
       {{1000, 33}, {1000, 33}}, {{4, 3}, {4, 3}}},
      {"masked mse_loss", [index_large](const Inputs& in) { return ops::mse_loss(in[0], in[1], index_large); },
       {{1000, 7}, {1000, 7}}, {}},
      {"masked bce_with_logits small",
       [index_small](const Inputs& in) { return ops::binary_cross_entropy_with_logits(in[0], in[1], index_small); },
       {}, {{4, 3}, {4, 3}}},
      {"chain",
       [key, index_small](const Inputs& in) {
         Tensor h = ops::concat({ops::leaky_relu(in[0], 0.2), ops::scale(in[1], 0.5)}, -1);
         h = ops::dropout(ops::elu(ops::add_bias(h, in[2])), key);
         return ops::mean(ops::sum(ops::index_rows(h, index_small), 1));
       },
       {{4, 100}, {4, 28}, {128}}, {{4, 1}, {4, 3}, {4}}},
  };
}

// |a - b| <= rel * max(|a|, |b|, 1e-6) for every element, or with `normwise`
// |a - b| <= rel * max over all elements of |a|.
void expect_close(const std::string& what, const Tensor& cpu, const Tensor& cuda, double rel, bool normwise = false) {
  ASSERT_EQ(cpu.shape(), cuda.shape()) << what;
  ASSERT_EQ(cuda.device(), Device::cuda) << what;
  std::vector<double> a = host_f64(cpu), b = host_f64(cuda);
  double largest = 1e-6;
  for (double v : a) largest = std::max(largest, std::abs(v));
  double worst = 0.0;
  size_t where = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = normwise ? largest : std::max({std::abs(a[i]), std::abs(b[i]), 1e-6});
    const double err = std::abs(a[i] - b[i]) / scale;
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      where = i;
    }
  }
  EXPECT_LE(worst, rel) << what << ": element " << where << " cpu " << a[where] << " cuda " << b[where];
}

// Forward output and the gradients of every input for the upstream gradient `g`.
struct OpRun {
  Tensor out;
  std::vector<Tensor> grads;
};

OpRun run_op(const OpCase& c, const std::vector<Tensor>& inputs, Device device, const Tensor& g_host) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.to(device).detach().set_requires_grad());
  OpRun r;
  r.out = c.f(leaves);
  r.out.backward(g_host.to(device));
  for (const Tensor& t : leaves) r.grads.push_back(t.grad());
  return r;
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    GAT_SKIP_WITHOUT_CUDA();
  }
};

}  // namespace

TEST_F(CudaOps, EveryOpMatchesTheCpuForwardAndBackward) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double rel = dtype == DType::f32 ? 1e-5 : 1e-10;
    for (const OpCase& c : op_cases()) {
      if (c.large.empty()) continue;
      SCOPED_TRACE(c.name + " " + dtype_name(dtype));
      std::mt19937_64 rng(17);
      std::vector<Tensor> inputs;
      for (const Shape& s : c.large) inputs.push_back(random_tensor(s, rng, -1.0, 1.0, dtype));
      Tensor probe = c.f(inputs);  // the output shape, for the upstream gradient
      Tensor g = random_tensor(probe.shape(), rng, -1.0, 1.0, dtype);
      OpRun cpu = run_op(c, inputs, Device::cpu, g);
      OpRun gpu = run_op(c, inputs, Device::cuda, g);
      expect_close(c.name + " forward", cpu.out, gpu.out, rel, c.normwise);
      for (size_t i = 0; i < inputs.size(); ++i)
        expect_close(c.name + " grad of input " + std::to_string(i), cpu.grads[i], gpu.grads[i], rel, c.normwise);
    }
  }
}

TEST_F(CudaOps, ResultsAreBitwiseIdenticalAcrossRuns) {
  for (const OpCase& c : op_cases()) {
    if (c.large.empty()) continue;
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(5);
    std::vector<Tensor> inputs;
    for (const Shape& s : c.large) inputs.push_back(random_tensor(s, rng, -1.0, 1.0, DType::f32));
    Tensor g = random_tensor(c.f(inputs).shape(), rng, -1.0, 1.0, DType::f32);
    OpRun first = run_op(c, inputs, Device::cuda, g);
    OpRun second = run_op(c, inputs, Device::cuda, g);
    EXPECT_TRUE(bitwise_equal(first.out, second.out));
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(bitwise_equal(first.grads[i], second.grads[i])) << i;
  }
}

TEST_F(CudaOps, GradientChecksInF64OnTheDevice) {
  for (const OpCase& c : op_cases()) {
    if (c.small.empty()) continue;
    std::mt19937_64 rng(99);
    std::vector<Tensor> inputs;
    for (const Shape& s : c.small) inputs.push_back(random_tensor(s, rng, -1.0, 1.0, DType::f64, Device::cuda));
    expect_gradients_match(c.name + " (cuda)", c.f, inputs);
  }
}

TEST_F(CudaOps, BatchNormRunningStatisticsMatchTheCpu) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const double rel = dtype == DType::f32 ? 1e-5 : 1e-10;
    std::mt19937_64 rng(8);
    const int64_t C = 37;
    Tensor cpu_mean = Tensor::zeros({C}, dtype), cpu_var = Tensor::full({C}, 1.0, dtype);
    Tensor gpu_mean = cpu_mean.to(Device::cuda), gpu_var = cpu_var.to(Device::cuda);
    for (int step = 0; step < 3; ++step) {
      Tensor x = random_tensor({2000, C}, rng, -1.0 + step, 2.0, dtype);
      ops::batch_norm(x, cpu_mean, cpu_var, Tensor(), Tensor(), true, 0.3, 1e-5);
      ops::batch_norm(x.to(Device::cuda), gpu_mean, gpu_var, Tensor(), Tensor(), true, 0.3, 1e-5);
    }
    expect_close("running_mean", cpu_mean, gpu_mean, rel);
    expect_close("running_var", cpu_var, gpu_var, rel);
  }
}

TEST_F(CudaOps, DropoutMasksAreTheCpuMasksBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    std::mt19937_64 rng(3);
    Tensor x = random_tensor({777, 129}, rng, -1.0, 1.0, dtype);
    for (const DropoutKey& key : {DropoutKey{0.5f, 1, 0}, DropoutKey{0.1f, 99, 12345}, DropoutKey{0.9f, 7, 1}}) {
      Tensor cpu = ops::dropout(x, key), gpu = ops::dropout(x.to(Device::cuda), key);
      EXPECT_TRUE(bitwise_equal(cpu, gpu)) << "p " << key.p << " stream " << key.stream << " "
                                              << dtype_name(dtype);
    }
  }
}

TEST_F(CudaOps, IndexRowsGathersAnyDtypeAndChecksTheBoundOnTheHost) {
  Tensor labels = Tensor::from_vector<int32_t>({5, 6, 7, 8}, {4});
  ops::RowIndex plan(Tensor::from_vector<int32_t>({3, 0, 3}, {3}), Device::cuda);
  EXPECT_EQ(ops::index_rows(labels.to(Device::cuda), plan).to_vector<int32_t>(), (std::vector<int32_t>{8, 5, 8}));
  Tensor x = Tensor::zeros({3, 2}, DType::f32, Device::cuda);
  expect_error([&] { ops::index_rows(x, plan); }, {"index 3", "3 rows"});
  // A plan on the CPU does not serve a CUDA tensor.
  EXPECT_THROW(ops::index_rows(x, ops::RowIndex(Tensor::from_vector<int32_t>({0}, {1}))), Error);
}

TEST_F(CudaOps, EmptyTensors) {
  Tensor empty = Tensor::zeros({0, 3}, DType::f32, Device::cuda);
  EXPECT_EQ(ops::sum(empty).item(), 0.0);
  EXPECT_EQ(host_f64(ops::sum(empty, 0)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ops::relu(empty).shape(), (Shape{0, 3}));
  Tensor one = Tensor::full({1, 3}, 2.0, DType::f32, Device::cuda);
  EXPECT_EQ(host_f64(ops::concat({empty, one}, 0)), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(ops::index_rows(one, Tensor::zeros({0}, DType::i32)).shape(), (Shape{0, 3}));
  EXPECT_EQ((empty + one).shape(), (Shape{0, 3}));
  EXPECT_EQ((empty * Tensor::zeros({1}, DType::f32, Device::cuda)).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::softmax(empty, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::log_softmax(empty, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::sigmoid(empty).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::transpose(empty).shape(), (Shape{3, 0}));
}

TEST_F(CudaOps, DeviceMismatchNamesBothTensors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2, 3}, DType::f32, Device::cuda);
  for (const auto& f : std::vector<std::function<void()>>{[&] { ops::add(a, b); }, [&] { ops::mul(b, a); },
                                                         [&] { ops::concat({a, b}, 0); }})
    expect_error(f, {"f32 cpu (2, 3)", "f32 cuda (2, 3)", "different devices"});
  for (const auto& f : std::vector<std::function<void()>>{[&] { b / a; }, [&] { b - Tensor::zeros({1, 3}); },
                                                         [&] { ops::mse_loss(b, a); }})
    expect_error(f, {"different devices"});
  expect_error([&] { ops::add_bias(b, Tensor::zeros({3})); }, {"f32 cpu (3,)"});
}
