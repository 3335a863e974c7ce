// The CUDA backends of matmul, log_softmax, masked_cross_entropy, argmax/accuracy and the
// optimisers against their CPU references (f32, relative error <= 1e-5), f64 gradient checks on
// the device, bitwise reproducibility, and Module::to(cuda).
#include <gtest/gtest.h>
#if GAT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/module.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/classification_metrics.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/fill.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/optim.h"
#include "gat/framework/side_work.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

constexpr double kTol = 1e-5;  // relative to the largest element: summation orders differ

Tensor labels_for(int64_t N, int64_t C, std::mt19937_64& rng) {
  std::vector<int32_t> y(static_cast<size_t>(N));
  for (int32_t& v : y) v = static_cast<int32_t>(rng() % C);
  return Tensor::from_vector(y, {N});
}

// Forward and the gradients of every input that requires grad, for g = fixed random weights.
std::vector<Tensor> forward_and_grads(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                      std::vector<Tensor> inputs) {
  for (Tensor& t : inputs) t = t.detach().set_requires_grad();
  Tensor out = f(inputs);
  std::mt19937_64 rng(99);
  out.backward(random_tensor(out.shape(), rng, -1, 1, out.dtype(), out.device()));
  std::vector<Tensor> result{out.detach()};
  for (Tensor& t : inputs) result.push_back(t.grad());
  return result;
}

// Runs f on CPU f32 inputs and on the same inputs moved to CUDA; compares outputs and gradients.
void expect_cuda_matches_cpu(const std::string& what,
                             const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             const std::vector<Tensor>& cpu_inputs) {
  std::vector<Tensor> cuda_inputs;
  for (const Tensor& t : cpu_inputs) cuda_inputs.push_back(t.to(Device::cuda));
  std::vector<Tensor> want = forward_and_grads(f, cpu_inputs);
  std::vector<Tensor> got = forward_and_grads(f, cuda_inputs);
  EXPECT_EQ(got[0].device(), Device::cuda) << what;
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(got[i], want[i], what + (i == 0 ? " output" : " grad of input " + std::to_string(i - 1)), kTol);
}

}  // namespace

TEST(CudaCore, MatmulMatchesCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(1);
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
           {4, 4, 4}, {7, 3, 5}, {300, 200, 100}, {33, 1, 17}, {17, 40, 1}, {1, 64, 9}, {5, 1, 1},
           // Small products in the op's own kernels: Cora's output layer (its backward has the
           // long sum 64 x 2,708 x 7), a long sum into few outputs, and long sums over three
           // column tiles (8, 8 and 4 columns).
           {2708, 64, 7}, {5, 3000, 3}, {3, 1000, 20},
           // Long thin weight gradients x^T dy (K >= 65,536) in the op's tall kernel: 8 phases of
           // 32 tiles, 42 phases of 6 tiles (4 threads idle), rows not a multiple of a block's;
           // and a wider one left to cuBLAS. Their products with M >= 65,536, K <= 64 and N <= 16
           // are the tall narrow kernel's: forwards with 4-vector batches of a row and 1-vector
           // tails (K = 12, 20), op(b) transposed in the data gradients of the K = 12 and K = 16
           // ones (N = 12 and 16); K = 30 goes to cuBLAS. Those with K <= 16 and N from 20 to 128
           // are the short-sum kernel's: 16 threads a row (the 100M-edge output layer's data
           // gradient, 8 x 64), 6 (4 of a block's threads idle), 32, and op(b) transposed in the
           // data gradient of the K = 24 one (8 x 24); N = 132 goes to cuBLAS.
           {70001, 32, 16}, {65536 + 2048 * 3 + 5, 12, 8}, {70001, 32, 64}, {70001, 64, 8},
           {70001, 20, 12}, {70001, 16, 8}, {70001, 30, 8}, {70001, 8, 64}, {70001, 4, 24},
           {65536 + 5, 12, 128}, {70001, 24, 8}, {70001, 16, 132}}) {
    expect_cuda_matches_cpu("matmul (" + std::to_string(M) + "," + std::to_string(K) + ")x(" +
                                std::to_string(K) + "," + std::to_string(N) + ")",
                            mm, {random_tensor({M, K}, rng, -1, 1, DType::f32),
                                 random_tensor({K, N}, rng, -1, 1, DType::f32)});
  }
  expect_cuda_matches_cpu("matmul f64 (70001,8)x(8,16)", mm,
                          {random_tensor({70001, 8}, rng, -1, 1, DType::f64),
                           random_tensor({8, 16}, rng, -1, 1, DType::f64)});
  expect_cuda_matches_cpu("matmul f64 (70001,64)x(64,16)", mm,  // the tall kernel's largest op(b)
                          {random_tensor({70001, 64}, rng, -1, 1, DType::f64),
                           random_tensor({64, 16}, rng, -1, 1, DType::f64)});
  expect_cuda_matches_cpu("matmul f64 (70001,16)x(16,64)", mm,  // the short-sum kernel's most registers
                          {random_tensor({70001, 16}, rng, -1, 1, DType::f64),
                           random_tensor({16, 64}, rng, -1, 1, DType::f64)});
  expect_cuda_matches_cpu("matmul(x, x)", [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[0]); },
                          {random_tensor({6, 6}, rng, -1, 1, DType::f32)});
  Tensor empty = ops::matmul(Tensor::zeros({3, 0}, DType::f32, Device::cuda), Tensor::zeros({0, 2}, DType::f32, Device::cuda));
  EXPECT_EQ(empty.to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(CudaCore, MatmulGradcheckF64) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(2);
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  const Device d = Device::cuda;
  expect_gradients_match("cuda matmul", mm, {random_tensor({4, 3}, rng, -1, 1, DType::f64, d),
                                             random_tensor({3, 5}, rng, -1, 1, DType::f64, d)});
  expect_gradients_match("cuda matmul K=1", mm, {random_tensor({4, 1}, rng, -1, 1, DType::f64, d),
                                                 random_tensor({1, 5}, rng, -1, 1, DType::f64, d)});
  expect_gradients_match("cuda matmul(x, x)", [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[0]); },
                         {random_tensor({4, 4}, rng, -1, 1, DType::f64, d)});
}

TEST(CudaCore, LogSoftmaxMatchesCpuAndGradcheck) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(3);
  auto f = [](const std::vector<Tensor>& in) { return ops::log_softmax(in[0]); };
  expect_cuda_matches_cpu("log_softmax (3000, 7)", f, {random_tensor({3000, 7}, rng, -5, 5, DType::f32)});
  expect_cuda_matches_cpu("log_softmax (50, 100)", f, {random_tensor({50, 100}, rng, -5, 5, DType::f32)});
  expect_gradients_match("cuda log_softmax", f, {random_tensor({5, 40}, rng, -3, 3, DType::f64, Device::cuda)});
}

TEST(CudaCore, CrossEntropyMatchesCpuAndGradcheck) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(4);
  const int64_t N = 3000, C = 7;
  Tensor labels = labels_for(N, C, rng);
  std::vector<int32_t> rows;
  for (int32_t r = 0; r < N; r += 3) rows.push_back(r);
  rows.push_back(5);  // a duplicate: counted twice in the loss and the gradient
  Tensor index = Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())});
  auto f = [&](const std::vector<Tensor>& in) {
    const Device d = in[0].device();
    return ops::masked_cross_entropy(in[0], labels.to(d), index.to(d));
  };
  expect_cuda_matches_cpu("masked_cross_entropy", f, {random_tensor({N, C}, rng, -4, 4, DType::f32)});
  Tensor y_small = Tensor::from_vector<int32_t>({0, 3, 1, 2, 2, 0}, {6}).to(Device::cuda);
  Tensor idx_small = Tensor::from_vector<int32_t>({4, 1, 5, 4, 2}, {5}).to(Device::cuda);
  expect_gradients_match(
      "cuda masked_cross_entropy",
      [&](const std::vector<Tensor>& in) { return ops::masked_cross_entropy(in[0], y_small, idx_small); },
      {random_tensor({6, 4}, rng, -3, 3, DType::f64, Device::cuda)});
}

// The trainer's path on the device: the gradient alone, from counts made once, is the op's
// backward gradient bit for bit, and the CPU's within f32 rounding.
TEST(CudaCore, CrossEntropyGradAloneIsTheBackwardsGradient) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const int64_t N = 3000, C = 7;
  Tensor labels = labels_for(N, C, rng).to(Device::cuda);
  std::vector<int32_t> rows;
  for (int32_t r = 0; r < N; r += 3) rows.push_back(r);
  rows.push_back(5);
  Tensor index = Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}).to(Device::cuda);
  Tensor logits = random_tensor({N, C}, rng, -4, 4, DType::f32, Device::cuda).set_requires_grad();
  Tensor one = Tensor::full({}, 1.0, DType::f32, Device::cuda);
  ops::masked_cross_entropy(logits, labels, index).backward(one);
  Tensor alone = ops::masked_cross_entropy_grad(logits, labels, index, ops::masked_row_counts(index, N), one);
  const std::vector<float> expected = logits.grad().to_vector<float>(), got = alone.to_vector<float>();
  EXPECT_EQ(got, expected);
  Tensor cpu = ops::masked_cross_entropy_grad(logits.to(Device::cpu), labels.to(Device::cpu), index.to(Device::cpu),
                                              ops::masked_row_counts(index.to(Device::cpu), N), one.to(Device::cpu));
  const std::vector<float> on_cpu = cpu.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], on_cpu[i], 1e-7) << i;
}

TEST(CudaCore, CrossEntropyBadLabelGivesNaNWithoutSync) {
  GAT_SKIP_WITHOUT_CUDA();
  Tensor logits = Tensor::zeros({3, 2}, DType::f32, Device::cuda);
  Tensor labels = Tensor::from_vector<int32_t>({0, 5, 1}, {3}).to(Device::cuda);
  Tensor index = Tensor::from_vector<int32_t>({0, 1}, {2}).to(Device::cuda);
  EXPECT_TRUE(std::isnan(ops::masked_cross_entropy(logits, labels, index).item()));
  Tensor bad_index = Tensor::from_vector<int32_t>({0, 3}, {2}).to(Device::cuda);
  EXPECT_TRUE(std::isnan(ops::masked_cross_entropy(logits, labels, bad_index).item()));
  Tensor good = Tensor::from_vector<int32_t>({0, 2}, {2}).to(Device::cuda);
  EXPECT_NEAR(ops::masked_cross_entropy(logits, labels, good).item(), std::log(2.0), 1e-6);
}

TEST(CudaCore, ArgmaxAndAccuracyMatchCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(5);
  const int64_t N = 5000, C = 6;
  Tensor logits = random_tensor({N, C}, rng, -1, 1, DType::f32);
  logits.data<float>()[7 * C + 2] = logits.data<float>()[7 * C + 4] = 10.0f;  // a tie: first wins
  Tensor labels = labels_for(N, C, rng);
  std::vector<int32_t> rows;
  for (int32_t r = 0; r < N; r += 2) rows.push_back(r);
  Tensor index = Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())});
  Tensor pred = ops::argmax(logits.to(Device::cuda));
  EXPECT_EQ(pred.device(), Device::cuda);
  EXPECT_EQ(pred.to_vector<int32_t>(), ops::argmax(logits).to_vector<int32_t>());
  EXPECT_EQ(pred.to_vector<int32_t>()[7], 2);
  EXPECT_DOUBLE_EQ(ops::accuracy(logits.to(Device::cuda), labels.to(Device::cuda), index.to(Device::cuda)),
                   ops::accuracy(logits, labels, index));
  Tensor bad = Tensor::from_vector<int32_t>({0, static_cast<int32_t>(N)}, {2}).to(Device::cuda);
  EXPECT_THROW(ops::accuracy(logits.to(Device::cuda), labels.to(Device::cuda), bad), Error);
}

// The trainer reads its losses from classification_metrics: they must be masked_cross_entropy's
// bits on the device too (the same per-row logsumexp and block sum), and the counts accuracy's.
TEST(CudaCore, ClassificationMetricsAreTheLossAndCountsOfTheOpsBitForBit) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const int64_t N = 5000, C = 7;
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor logits = random_tensor({N, C}, rng, -3, 3, dtype).to(Device::cuda);
    const Tensor labels = labels_for(N, C, rng).to(Device::cuda);
    std::vector<Tensor> splits;
    for (int64_t count : {140, 500, 3000, 1}) {  // the last split's row: the largest, N - 1
      std::vector<int32_t> rows;
      for (int64_t k = 0; k < count; ++k) rows.push_back(static_cast<int32_t>((k * 7919 + count) % N));
      if (count == 1) rows = {static_cast<int32_t>(N - 1)};
      splits.push_back(Tensor::from_vector(rows, {count}).to(Device::cuda));
    }
    const std::vector<double> m = ops::classification_metrics(logits, labels, splits).to_vector<double>();
    for (size_t s = 0; s < splits.size(); ++s) {
      EXPECT_EQ(m[3 * s], ops::masked_cross_entropy(logits, labels, splits[s]).item()) << s;
      const std::vector<int32_t> counts = ops::correct_counts(logits, labels, splits[s]).to_vector<int32_t>();
      EXPECT_EQ(m[3 * s + 1], counts[0]) << s;
      EXPECT_EQ(m[3 * s + 2], 0.0) << s;
    }
  }
  // Out of range: a NaN loss and the entry counted, as masked_cross_entropy and correct_counts.
  const Tensor logits = Tensor::from_vector<float>({0, 1, 1, 0, 0, 1}, {3, 2}).to(Device::cuda);
  const Tensor labels = Tensor::from_vector<int32_t>({1, 1, 1}, {3}).to(Device::cuda);
  const std::vector<double> m = ops::classification_metrics(
      logits, labels, {Tensor::from_vector<int32_t>({0, 3, -1, 2}, {4}).to(Device::cuda)}).to_vector<double>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 2.0);
  EXPECT_EQ(m[2], 2.0);
}

TEST(CudaCore, OptimiserStepsMatchCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(6);
  // 40 parameters (more than one launch's kMaxSlots), f32 and f64 mixed, one without a gradient.
  std::vector<Tensor> start, grads;
  for (int i = 0; i < 40; ++i) {
    const Shape shape{1 + i % 5, 3 + 7 * i};
    const DType dtype = i % 9 == 4 ? DType::f64 : DType::f32;
    start.push_back(random_tensor(shape, rng, -1, 1, dtype));
    grads.push_back(random_tensor(shape, rng, -1, 1, dtype));
  }
  auto run = [&](Device device, const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>& make) {
    std::vector<Tensor> params;
    for (const Tensor& s : start) params.push_back(s.to(device).clone().set_requires_grad());
    std::unique_ptr<Optimizer> opt = make(params);
    for (int step = 0; step < 2; ++step) {
      for (size_t i = 0; i < params.size(); ++i)
        if (i != 17) params[i].impl().grad = grads[i].to(device).clone().impl_ptr();
      opt->step();
      opt->zero_grad();
    }
    return params;
  };
  AdamOptions adam;
  adam.lr = 0.05;
  adam.weight_decay = 0.1;
  AdamWOptions adamw;
  adamw.lr = 0.05;
  SGDOptions sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.weight_decay = 0.01;
  const std::vector<std::pair<std::string, std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>>> kinds{
      {"Adam", [&](std::vector<Tensor> p) { return std::make_unique<Adam>(p, adam); }},
      {"AdamW", [&](std::vector<Tensor> p) { return std::make_unique<AdamW>(p, adamw); }},
      {"SGD", [&](std::vector<Tensor> p) { return std::make_unique<SGD>(p, sgd); }}};
  for (const auto& [name, make] : kinds) {
    std::vector<Tensor> want = run(Device::cpu, make), got = run(Device::cuda, make);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].device(), Device::cuda);
      expect_close(got[i], want[i], name + " parameter " + std::to_string(i), kTol);
    }
    expect_close(got[17], start[17], name + " parameter without gradient", 0.0);
  }
}

TEST(CudaCore, ClipGradNormMatchesCpu) {
  GAT_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::f32, DType::f64}) {
    std::mt19937_64 rng(12);
    std::vector<Tensor> grads;
    for (const Shape& shape : {Shape{300, 70}, Shape{64}, Shape{100003}}) grads.push_back(random_tensor(shape, rng, -1, 1, dtype));
    auto clipped = [&](Device device, double& total) {
      std::vector<Tensor> params;
      for (const Tensor& g : grads) {
        params.push_back(Tensor::zeros(g.shape(), dtype, device).set_requires_grad());
        params.back().impl().grad = g.to(device).clone().impl_ptr();
      }
      total = clip_grad_norm(params, 1.5);
      return params;
    };
    double cpu_total = 0, cuda_total = 0;
    std::vector<Tensor> want = clipped(Device::cpu, cpu_total), got = clipped(Device::cuda, cuda_total);
    EXPECT_NEAR(cuda_total, cpu_total, (dtype == DType::f32 ? 1e-5 : 1e-12) * cpu_total);
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i].grad(), want[i].grad(), std::string("clipped gradient ") + dtype_name(dtype), kTol);
  }
}

TEST(CudaCore, OptimiserStateLoadsOntoTheDevice) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(13);
  Tensor start = random_tensor({40, 3}, rng, -1, 1, DType::f32), grad = random_tensor({40, 3}, rng, -1, 1, DType::f32);
  auto steps = [&](Tensor& p, Optimizer& opt, int n) {
    for (int k = 0; k < n; ++k) {
      p.impl().grad = grad.to(p.device()).clone().impl_ptr();
      opt.step();
      opt.zero_grad();
    }
  };
  Tensor straight = start.to(Device::cuda).clone().set_requires_grad();
  Adam straight_opt({straight}, AdamOptions{});
  steps(straight, straight_opt, 4);
  Tensor first = start.to(Device::cuda).clone().set_requires_grad();
  Adam first_opt({first}, AdamOptions{});
  steps(first, first_opt, 2);
  const std::map<std::string, Tensor> state = first_opt.state_dict();
  Tensor resumed = first.clone().set_requires_grad();
  Adam resumed_opt({resumed}, AdamOptions{});
  std::map<std::string, Tensor> host_state;
  for (const auto& [name, t] : state) host_state.emplace(name, t.to(Device::cpu));  // as from a file
  resumed_opt.load_state_dict(host_state);
  steps(resumed, resumed_opt, 2);
  expect_close(resumed, straight, "resumed Adam on the device", 0.0);
}

TEST(CudaCore, ResultsAreBitwiseReproducible) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(7);
  const int64_t N = 20000, C = 40;
  Tensor logits = random_tensor({N, C}, rng, -3, 3, DType::f32, Device::cuda);
  Tensor labels = labels_for(N, C, rng).to(Device::cuda);
  std::vector<int32_t> rows(static_cast<size_t>(N));
  for (int32_t r = 0; r < N; ++r) rows[r] = (r * 7919) % N;
  Tensor index = Tensor::from_vector(rows, {N}).to(Device::cuda);
  auto once = [&] {
    Tensor x = logits.detach().set_requires_grad();
    Tensor loss = ops::masked_cross_entropy(ops::log_softmax(x), labels, index);
    loss.backward();
    std::vector<float> out = x.grad().to_vector<float>();
    out.push_back(static_cast<float>(loss.item()));
    return out;
  };
  EXPECT_EQ(once(), once());
}

TEST(CudaCore, ModuleToCudaMovesParametersInPlace) {
  GAT_SKIP_WITHOUT_CUDA();
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

TEST(CudaCore, ARecordedGraphWritesIntoEarlierMemoryAndKeepsNoneOfItsOwn) {
  GAT_SKIP_WITHOUT_CUDA();
  std::mt19937_64 rng(8);
  const Tensor a = random_tensor({5, 3}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor b = random_tensor({3, 4}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor c = random_tensor({4, 2}, rng, -1, 1, DType::f32, Device::cuda);
  const Tensor want = ops::matmul(ops::matmul(a, b), c);  // (5, 2)
  Tensor out = Tensor::zeros(want.shape(), DType::f32, Device::cuda);
  std::string why;
  // Temporaries made and freed while recording, the result copied into `out`.
  const cuda::CapturedGraph graph = cuda::capture(
      [&] { out.copy_(ops::matmul(ops::matmul(a, b), c)); }, &why);
  ASSERT_TRUE(graph.valid()) << why;
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(want.numel(), 0.0f));  // nothing ran yet
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_TRUE(graph.replay()) << "replay " << replay;
    EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>()) << "replay " << replay;
    out.zero_();
  }
  // A recording that would keep memory of its own is refused, and the stream works afterwards.
  Tensor kept;
  const cuda::CapturedGraph refused = cuda::capture([&] { kept = ops::matmul(a, b); }, &why);
  EXPECT_FALSE(refused.valid());
  EXPECT_NE(why.find("outlive"), std::string::npos) << why;
  kept = Tensor();
  expect_close(ops::matmul(a, b), ops::matmul(a.to(Device::cpu), b.to(Device::cpu)), "after refusal", kTol);
}

// Work that keeps the device busy for milliseconds in one launch (a product of two (4096, 4096)
// f64 matrices: the host queues what follows long before it ends) and then fills `out`, an (n,)
// f64 tensor, with `value`. Read on another stream before the product has finished, out holds
// zeros. The caller keeps all three tensors until it has read out: a free of the matrices would
// let another stream's allocation wait for the product.
struct SlowFill {
  Tensor out, matrix, product;
};
SlowFill slow_fill(int64_t n, double value) {
  SlowFill s;
  s.out = Tensor::zeros({n}, DType::f64, Device::cuda);
  s.matrix = Tensor::full({4096, 4096}, 1.0 / 4096, DType::f64, Device::cuda);
  s.product = ops::matmul(s.matrix, s.matrix);
  ops::fill_(s.out, value);
  return s;
}

// slow_fill as side work's outputs (out first): the caller's SideWork keeps all three to its join.
std::vector<Tensor> slow_fill_beside(int64_t n, double value) {
  SlowFill s = slow_fill(n, value);
  return {s.out, s.matrix, s.product};
}

TEST(CudaCore, SideWorkIsReadOnlyAfterItsJoin) {
  GAT_SKIP_WITHOUT_CUDA();
  const int64_t n = 1000;
  const Tensor small = Tensor::zeros({1}, DType::f64, Device::cuda);
  SideWork side;
  // A small CUDA input sends the work to the side stream.
  const Tensor out = side.run({small}, [&](const std::vector<Tensor>&) { return slow_fill_beside(n, 3.0); })[0];
  EXPECT_TRUE(side.pending(out));
  side.join();
  EXPECT_FALSE(side.pending(out));
  EXPECT_EQ(out.to_vector<double>(), std::vector<double>(n, 3.0));  // copied on the main stream

  // Side work reads what the main stream queued before it, finished or not.
  const SlowFill made_on_main = slow_fill(n, 5.0);
  const Tensor doubled = side.run({made_on_main.out}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::scale(in[0], 2.0)};
  })[0];
  side.join();
  EXPECT_EQ(doubled.to_vector<double>(), std::vector<double>(n, 10.0));

  // Inputs on the CPU, or more than kMaxSideBytes of them, run where they are called.
  const Tensor on_cpu = Tensor::full({4}, 1.0, DType::f64, Device::cpu);
  const Tensor big = Tensor::zeros({int64_t(SideWork::kMaxSideBytes / 8 + 1)}, DType::f64, Device::cuda);
  for (const Tensor& input : {on_cpu, big}) {
    const Tensor twice = side.run({input}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{ops::scale(in[0], 2.0)};
    })[0];
    EXPECT_FALSE(side.pending(twice)) << input.describe();
  }
  // An output may not be one of the inputs (it would be freed on the main stream too early).
  expect_error([&] { side.run({small}, [](const std::vector<Tensor>& in) { return in; }); }, {"shares the storage"});
}

// y = x, whose backward hands x a gradient of `value`s made by slow side work of the pass.
Tensor with_side_gradient(const Tensor& x, double value) {
  return autograd::record("side gradient", x.detach().clone(), {x}, [value, n = x.numel()](const Tensor& g) {
    return std::vector<Tensor>{
        autograd::side_gradients({g}, [&](const std::vector<Tensor>&) { return slow_fill_beside(n, value); })[0]};
  });
}

TEST(CudaCore, ABackwardPassJoinsItsSideGradientsBeforeTheMainStreamReadsThem) {
  GAT_SKIP_WITHOUT_CUDA();
  const int64_t n = 1000;
  auto weight = [&] { return Tensor::full({n}, 1.0, DType::f64, Device::cuda).set_requires_grad(true); };
  {  // straight into the parameter's .grad, read after the pass
    Tensor w = weight();
    ops::sum(with_side_gradient(w, 3.0)).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(n, 3.0));
  }
  {  // into an intermediate tensor, whose backward reads it on the main stream: d w = 2 * 3
    Tensor w = weight();
    ops::sum(with_side_gradient(ops::scale(w, 2.0), 3.0)).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(n, 6.0));
  }
  for (bool side_first : {true, false}) {  // added to, or added to a main-stream gradient: 3 + 5
    Tensor w = weight();
    const Tensor on_side = ops::sum(with_side_gradient(w, 3.0));
    const Tensor on_main = ops::sum(ops::scale(w, 5.0));
    ops::add(side_first ? on_side : on_main, side_first ? on_main : on_side).backward();
    EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(n, 8.0)) << "side first " << side_first;
  }
}

TEST(CudaCore, PeakBreakdownListsTheBlocksAliveAtTheHighWaterMark) {
  GAT_SKIP_WITHOUT_CUDA();
  cuda::synchronize();
  cuda::reset_peak_memory();
  const size_t before = cuda::peak_memory_allocated();
  {
    const Tensor big = Tensor::empty({1000, 64}, DType::f32, Device::cuda, "test big block");
    const Tensor small1 = Tensor::empty({10}, DType::f64, Device::cuda, "test small block");
    const Tensor small2 = Tensor::empty({10}, DType::f64, Device::cuda, "test small block");
  }
  // Freed, then a smaller block: the peak and its breakdown stay those of the three blocks.
  const Tensor later = Tensor::empty({4}, DType::f32, Device::cuda, "test later block");
  EXPECT_EQ(cuda::peak_memory_allocated(), before + 1000 * 64 * 4 + 2 * 10 * 8);
  std::map<std::string, std::pair<size_t, size_t>> seen;  // name -> (bytes, count)
  for (const cuda::PeakBlocks& b : cuda::peak_memory_breakdown()) seen[b.what] = {b.bytes, b.count};
  EXPECT_EQ(seen["test big block"], std::make_pair(size_t{1000 * 64 * 4}, size_t{1}));
  EXPECT_EQ(seen["test small block"], std::make_pair(size_t{80}, size_t{2}));
  EXPECT_EQ(seen.count("test later block"), 0u);
  const std::vector<cuda::PeakBlocks> blocks = cuda::peak_memory_breakdown();
  ASSERT_FALSE(blocks.empty());
  EXPECT_EQ(blocks.front().what, "test big block");  // the most bytes first
}

#if GAT_WITH_CUDA
namespace {
// Device memory from gat's pool with a count of what is live: an allocator that is not gat's.
class CountingAllocator final : public cuda::ExternalAllocator {
 public:
  void* allocate(size_t bytes) override {
    ++live;
    return cuda::malloc(bytes, "CountingAllocator");
  }
  void deallocate(void* ptr) noexcept override {
    --live;
    cuda::free(ptr);
  }
  int live = 0;
};
}  // namespace

// cuda::UseExternal: every tensor made inside the scope comes from the external allocator and
// goes back to it, even when freed after the scope; results are those of gat's own stream.
TEST(CudaCore, AnExternalAllocatorAndStreamServeEveryTensorMadeInTheirScope) {
  GAT_SKIP_WITHOUT_CUDA();
  CountingAllocator allocator;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, Device::cuda);
  const Tensor b = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2}, Device::cuda);
  const std::vector<float> want = ops::matmul(a, b).to_vector<float>();  // cuBLAS on gat's stream
  Tensor kept;
  {
    cuda::UseExternal use(stream, &allocator);
    EXPECT_EQ(cuda::external_allocator(), &allocator);
    expect_error([&] { cuda::UseExternal again(stream, &allocator); }, {"do not nest"});
    kept = ops::matmul(a, b);  // cuBLAS and the output on the external stream and memory
    EXPECT_GE(allocator.live, 1);
    EXPECT_EQ(kept.to_vector<float>(), want);
  }
  EXPECT_EQ(cuda::external_allocator(), nullptr);
  EXPECT_EQ(allocator.live, 1);  // `kept` outlives the scope and still belongs to the allocator
  kept = Tensor();
  EXPECT_EQ(allocator.live, 0);
  EXPECT_EQ(ops::matmul(a, b).to_vector<float>(), want);  // gat's own stream and pool again
  EXPECT_EQ(allocator.live, 0);
  {
    cuda::UseExternal use(nullptr, &allocator);  // the legacy default stream, PyTorch's default
    EXPECT_EQ(ops::matmul(a, b).to_vector<float>(), want);
  }
  EXPECT_EQ(allocator.live, 0);
  cudaStreamDestroy(stream);
}
#endif  // GAT_WITH_CUDA
