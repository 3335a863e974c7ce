// matmul, log_softmax, masked_cross_entropy, argmax, accuracy, classification_metrics: values
// against references written out here and the error messages (the CPU), gradient checks on each
// device, and the CUDA backends against the CPU (f32, relative error <= 1e-5) with bitwise
// reproducibility on the device.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/classification_metrics.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/matmul.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

TEST(Matmul, MatchesNaiveProduct) {
  std::mt19937_64 rng(1);
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor a = random_tensor({5, 3}, rng, -1, 1, dtype), b = random_tensor({3, 4}, rng, -1, 1, dtype);
    std::vector<double> av = a.to(DType::f64).to_vector<double>(), bv = b.to(DType::f64).to_vector<double>();
    std::vector<double> out = ops::matmul(a, b).to(DType::f64).to_vector<double>();
    ASSERT_EQ(out.size(), 20u);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j) {
        double ref = 0;
        for (int k = 0; k < 3; ++k) ref += av[i * 3 + k] * bv[k * 4 + j];
        EXPECT_NEAR(out[i * 4 + j], ref, dtype == DType::f32 ? 1e-6 : 1e-14);
      }
  }
}

TEST(Matmul, BitwiseIndependentOfThreadCount) {
  std::mt19937_64 rng(9);
  // Several output tiles, a ragged last tile, and a K large enough for Eigen to block over it.
  Tensor a = random_tensor({300, 700}, rng, -1, 1, DType::f32),
         b = random_tensor({700, 150}, rng, -1, 1, DType::f32);
  const int threads = omp_get_max_threads();
  std::vector<std::vector<float>> results;
  for (int n : {1, 2, 5}) {
    omp_set_num_threads(n);
    results.push_back(ops::matmul(a, b).to_vector<float>());
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// A K of at most 7 with whole groups of 4 output columns (Cora's output layer: d x = G (2708, 7) W^T):
// each element's products added one after another from zero in k order, as Eigen's kernels add them
// there (matmul.cpp, sums_in_k_order), forward and d a = G b^T, at one and three threads.
TEST(Matmul, ShortInnerDimensionSumsInKOrder) {
  std::mt19937_64 rng(12);
  auto in_k_order = [](const std::vector<float>& x, const std::vector<float>& y, bool y_transposed, int64_t M,
                       int64_t K, int64_t N) {
    std::vector<float> out(static_cast<size_t>(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k)
          sum += x[static_cast<size_t>(i * K + k)] *
                 y[static_cast<size_t>(y_transposed ? j * K + k : k * N + j)];
        out[static_cast<size_t>(i * N + j)] = sum;
      }
    return out;
  };
  const int threads = omp_get_max_threads();
  for (int n : {1, 3})
    for (auto [M, K, N] : {std::array<int64_t, 3>{2708, 7, 64}, {300, 3, 20}, {130, 5, 128}}) {
      omp_set_num_threads(n);
      Tensor a = random_tensor({M, K}, rng, -1, 1, DType::f32),
             b = random_tensor({K, N}, rng, -1, 1, DType::f32);
      EXPECT_EQ(ops::matmul(a, b).to_vector<float>(),
                in_k_order(a.to_vector<float>(), b.to_vector<float>(), false, M, K, N))
          << M << " x " << K << " x " << N;
      // d x of x (M, N) w (N, K): G (M, K) w^T, K products an element
      Tensor x = random_tensor({M, N}, rng, -1, 1, DType::f32).set_requires_grad(),
             w = random_tensor({N, K}, rng, -1, 1, DType::f32),
             g = random_tensor({M, K}, rng, -1, 1, DType::f32);
      ops::matmul(x, w).backward(g);
      EXPECT_EQ(x.grad().to_vector<float>(),
                in_k_order(g.to_vector<float>(), w.to_vector<float>(), true, M, K, N))
          << "d x, " << M << " x " << K << " x " << N;
    }
  omp_set_num_threads(threads);
}

TEST(Matmul, EmptyInnerDimensionGivesZeros) {
  Tensor out = ops::matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  for (float v : out.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

class OpsCoreOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(OpsCoreOnDevice);

TEST_P(OpsCoreOnDevice, MatmulGradients) {
  std::mt19937_64 rng(2);
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  expect_gradients_match("matmul (4,3)x(3,5)", mm, {random_f64({4, 3}, rng), random_f64({3, 5}, rng)});
  expect_gradients_match("matmul K=1", mm, {random_f64({4, 1}, rng), random_f64({1, 5}, rng)});
  expect_gradients_match("matmul N=1", mm, {random_f64({4, 3}, rng), random_f64({3, 1}, rng)});
}

TEST_P(OpsCoreOnDevice, MatmulOfATensorUsedTwiceGivesBothGradients) {
  std::mt19937_64 rng(3);
  expect_gradients_match("matmul(x, x)",
                         [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[0]); },
                         {random_f64({4, 4}, rng)});
  // d x of x x for x = [[1, 2], [3, 4]] and G = [[1, 10], [100, 1000]] (a value of its own for
  // each element): G x^T + x^T G.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).set_requires_grad();
  ops::matmul(x, x).backward(Tensor::from_vector<double>({1, 10, 100, 1000}, {2, 2}));
  // G x^T = [[21, 43], [2100, 4300]];  x^T G = [[301, 3010], [402, 4020]]
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{322, 3053, 2502, 8320}));
}

TEST(Matmul, OnlyInputsThatNeedGradientsGetThem) {
  Tensor a = Tensor::full({2, 3}, 1.0, DType::f64).set_requires_grad();
  Tensor b = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  ops::matmul(a, b).backward(Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{5, 11, 17, 11, 25, 39}));  // G b^T
  EXPECT_FALSE(b.grad().defined());
}

TEST(Matmul, ShapeErrorsNameBothShapes) {
  expect_error(
      [] {
        ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
      },
      {"matmul", "(2, 3)", "(4, 5)"});
  expect_error(
      [] {
        ops::matmul(Tensor::zeros({2, 3, 1}), Tensor::zeros({3, 5}));
      },
      {"matmul", "(2, 3, 1)", "(3, 5)"});
  expect_error(
      [] {
        ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 5}, DType::f64));
      },
      {"matmul", "f32", "f64"});
  expect_error(
      [] {
        ops::matmul(Tensor::zeros({2, 3}, DType::i32), Tensor::zeros({3, 5}, DType::i32));
      },
      {"matmul", "i32"});
}

TEST(LogSoftmax, ValuesAreStableAndNormalised) {
  // Large logits: a naive exp would overflow.
  Tensor x = Tensor::from_vector<double>({1000, 1001, 1002, -3, 0, 3}, {2, 3});
  std::vector<double> y = ops::log_softmax(x).to_vector<double>();
  const double lse0 = 1002 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  EXPECT_NEAR(y[0], 1000 - lse0, 1e-12);
  EXPECT_NEAR(y[2], 1002 - lse0, 1e-12);
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(y[r * 3 + c]);
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
}

TEST_P(OpsCoreOnDevice, LogSoftmaxGradients) {
  std::mt19937_64 rng(4);
  auto f = [](const std::vector<Tensor>& in) { return ops::log_softmax(in[0]); };
  for (const Shape& shape : {Shape{5, 4}, Shape{3, 40}, Shape{5, 40}})
    expect_gradients_match("log_softmax " + shape_str(shape), f, {random_f64(shape, rng, -3, 3)});
}

TEST(LogSoftmax, RejectsAScalarAndAnAxisOutOfRange) {
  expect_error([] { ops::log_softmax(Tensor::zeros({})); }, {"log_softmax", "at least one dimension"});
  expect_error([] { ops::log_softmax(Tensor::zeros({2, 3, 4}), 3); }, {"log_softmax", "axis 3", "(2, 3, 4)"});
  expect_error([] { ops::softmax(Tensor::zeros({2, 3}), -3); }, {"softmax", "axis -3", "(2, 3)"});
}

TEST(MaskedCrossEntropy, MatchesMeanNegativeLogLikelihood) {
  std::mt19937_64 rng(5);
  Tensor logits = random_tensor({6, 4}, rng, -2, 2);
  Tensor labels = Tensor::from_vector<int32_t>({0, 3, 1, 2, 2, 0}, {6});
  Tensor index = Tensor::from_vector<int32_t>({4, 1, 5}, {3});
  std::vector<double> lp = ops::log_softmax(logits).to_vector<double>();
  const double ref = -(lp[4 * 4 + 2] + lp[1 * 4 + 3] + lp[5 * 4 + 0]) / 3;
  EXPECT_NEAR(ops::masked_cross_entropy(logits, labels, index).item(), ref, 1e-14);
}

TEST_P(OpsCoreOnDevice, MaskedCrossEntropyGradients) {
  std::mt19937_64 rng(6);
  Tensor labels = Tensor::from_vector<int32_t>({0, 3, 1, 2, 2, 0}, {6}).to(device());
  // Row 4 twice: it counts twice in the mean and in the gradient. Rows 0, 3 unused: zero gradient.
  Tensor index = Tensor::from_vector<int32_t>({4, 1, 5, 4, 2}, {5}).to(device());
  expect_gradients_match(
      "masked_cross_entropy",
      [&](const std::vector<Tensor>& in) { return ops::masked_cross_entropy(in[0], labels, index); },
      {random_f64({6, 4}, rng, -3, 3)});
}

TEST(MaskedCrossEntropy, UnusedRowsGetZeroGradient) {
  Tensor logits = Tensor::full({3, 2}, 0.5, DType::f64).set_requires_grad();
  Tensor labels = Tensor::from_vector<int32_t>({0, 1, 0}, {3});
  ops::masked_cross_entropy(logits, labels, Tensor::from_vector<int32_t>({1}, {1})).backward();
  // Row 1: softmax = (1/2, 1/2), onehot = (0, 1) -> (1/2, -1/2); rows 0 and 2: zero.
  const std::vector<double> expected{0, 0, 0.5, -0.5, 0, 0}, grad = logits.grad().to_vector<double>();
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(grad[i], expected[i], 1e-15) << i;
}

TEST(MaskedCrossEntropy, BadLabelsIndexAndShapesThrow) {
  Tensor logits = Tensor::zeros({3, 2});
  Tensor index = Tensor::from_vector<int32_t>({0, 2}, {2});
  expect_error(
      [&] {
        ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1, 2}, {3}), index);
      },
      {"masked_cross_entropy", "labels[2] = 2", "[0, 2)"});
  expect_error(
      [&] {
        ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1, -1}, {3}), index);
      },
      {"masked_cross_entropy", "labels[2] = -1"});
  Tensor labels = Tensor::from_vector<int32_t>({0, 1, 1}, {3});
  expect_error([&] { ops::masked_cross_entropy(logits, labels, Tensor::from_vector<int32_t>({3}, {1})); },
               {"masked_cross_entropy", "index[0] = 3", "[0, 3)"});
  expect_error(
      [&] {
        ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1}, {2}), index);
      },
      {"masked_cross_entropy", "labels", "(3,)", "(2,)"});
  expect_error([&] { ops::masked_cross_entropy(logits, labels, Tensor::zeros({0}, DType::i32)); },
               {"masked_cross_entropy", "empty"});
  // A label outside [0, C) in a row that is not used does not matter.
  EXPECT_NO_THROW(ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 7, 1}, {3}), index));
}

TEST(MaskedCrossEntropy, RowCountsCountEveryUseInRange) {
  // Row 4 twice; -1 and 6 are outside [0, 6) and not counted.
  Tensor index = Tensor::from_vector<int32_t>({4, 1, -1, 4, 6, 2}, {6});
  EXPECT_EQ(ops::masked_row_counts(index, 6).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 0, 2, 0}));
  EXPECT_EQ(ops::masked_row_counts(index, 0).numel(), 0);
  expect_error([&] { ops::masked_row_counts(index, -1); }, {"masked_row_counts", "rows = -1"});
  expect_error([] { ops::masked_row_counts(Tensor::zeros({2}), 3); }, {"masked_row_counts", "index"});
}

// The gradient alone (the trainer's path) is the op's backward gradient, bit for bit.
TEST(MaskedCrossEntropy, GradAloneIsTheBackwardsGradient) {
  std::mt19937_64 rng(7);
  Tensor labels = Tensor::from_vector<int32_t>({0, 3, 1, 2, 2, 0}, {6});
  Tensor index = Tensor::from_vector<int32_t>({4, 1, 5, 4, 2}, {5});
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor logits = random_tensor({6, 4}, rng, -3, 3, dtype).set_requires_grad();
    Tensor grad_loss = Tensor::full({}, 0.75, dtype);
    ops::masked_cross_entropy(logits, labels, index).backward(grad_loss);
    Tensor alone =
        ops::masked_cross_entropy_grad(logits, labels, index, ops::masked_row_counts(index, 6), grad_loss);
    EXPECT_FALSE(alone.requires_grad());
    EXPECT_EQ(alone.to(DType::f64).to_vector<double>(), logits.grad().to(DType::f64).to_vector<double>())
        << dtype_name(dtype);
  }
}

TEST(MaskedCrossEntropy, GradAloneChecksItsInputs) {
  Tensor logits = Tensor::zeros({3, 2});
  Tensor labels = Tensor::from_vector<int32_t>({0, 1, 1}, {3});
  Tensor index = Tensor::from_vector<int32_t>({0, 2}, {2});
  Tensor count = ops::masked_row_counts(index, 3), one = Tensor::full({}, 1.0);
  auto grad = [&](const Tensor& y, const Tensor& idx, const Tensor& c, const Tensor& g) {
    return ops::masked_cross_entropy_grad(logits, y, idx, c, g);
  };
  // No forward ran: the gradient checks labels and index itself.
  expect_error(
      [&] {
        grad(Tensor::from_vector<int32_t>({0, 1, 2}, {3}), index, count, one);
      },
      {"masked_cross_entropy", "labels[2] = 2", "[0, 2)"});
  expect_error([&] { grad(labels, Tensor::from_vector<int32_t>({3}, {1}), count, one); },
               {"masked_cross_entropy", "index[0] = 3", "[0, 3)"});
  expect_error([&] { grad(labels, Tensor::zeros({0}, DType::i32), count, one); },
               {"masked_cross_entropy_grad", "empty"});
  expect_error([&] { grad(labels, index, ops::masked_row_counts(index, 2), one); },
               {"masked_cross_entropy", "count", "(3,)", "(2,)"});
  expect_error([&] { grad(labels, index, count, Tensor::full({1}, 1.0)); },
               {"masked_cross_entropy_grad", "grad_loss", "()"});
  expect_error([&] { grad(labels, index, count, Tensor::full({}, 1.0, DType::f64)); },
               {"masked_cross_entropy_grad", "grad_loss", "f64"});
}

TEST(Accuracy, ArgmaxTakesTheFirstMaximum) {
  Tensor x = Tensor::from_vector<float>({1, 3, 3, 0, -1, -2, -2, -1, 5, 5, 5, 5}, {3, 4});
  EXPECT_EQ(ops::argmax(x).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 0}));
  EXPECT_EQ(ops::argmax(x.to(DType::f64)).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 0}));
}

TEST(Accuracy, CountsMatchingRowsOfTheIndex) {
  Tensor logits = Tensor::from_vector<float>({0, 1, 1, 0, 0, 1, 1, 0}, {4, 2});  // argmax 1, 0, 1, 0
  Tensor labels = Tensor::from_vector<int32_t>({1, 1, 1, 1}, {4});
  EXPECT_DOUBLE_EQ(ops::accuracy(logits, labels, Tensor::from_vector<int32_t>({0, 1, 2}, {3})), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(ops::accuracy(logits, labels, Tensor::from_vector<int32_t>({1, 3}, {2})), 0.0);
  expect_error([&] { ops::accuracy(logits, labels, Tensor::from_vector<int32_t>({4}, {1})); },
               {"accuracy", "index[0] = 4"});
}

// The labels and index checks it shares with masked_cross_entropy.
TEST(Accuracy, ChecksLabelsAndIndex) {
  Tensor logits = Tensor::zeros({4, 2});
  Tensor labels = Tensor::from_vector<int32_t>({1, 1, 1, 1}, {4});
  Tensor index = Tensor::from_vector<int32_t>({0, 2}, {2});
  expect_error(
      [&] {
        ops::accuracy(logits, Tensor::from_vector<int32_t>({1, 1, 1}, {3}), index);
      },
      {"accuracy", "labels", "(4,)", "(3,)"});
  expect_error([&] { ops::accuracy(logits, labels.to(DType::f32), index); }, {"accuracy", "labels", "i32"});
  expect_error([&] { ops::accuracy(logits, labels, index.to(DType::f32)); }, {"accuracy", "index", "i32"});
  expect_error(
      [&] {
        ops::accuracy(logits, labels, Tensor::zeros({1, 2}, DType::i32));
      },
      {"accuracy", "index"});
  expect_error([&] { ops::accuracy(logits, labels, Tensor::zeros({0}, DType::i32)); }, {"accuracy", "empty"});
}

TEST(ClassificationMetrics, AreTheLossAndCountsOfTheOpsBitForBit) {
  std::mt19937_64 rng(23);
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor logits = random_tensor({50, 4}, rng, -3, 3, dtype);
    std::vector<int32_t> y(50);
    for (int32_t& v : y) v = static_cast<int32_t>(rng() % 4);
    const Tensor labels = Tensor::from_vector(y, {50});
    const std::vector<Tensor> splits{Tensor::from_vector<int32_t>({3, 1, 4, 1, 5}, {5}),
                                     Tensor::from_vector<int32_t>({49}, {1}),
                                     Tensor::from_vector<int32_t>({0, 9, 2, 6, 5, 3, 5, 8, 9, 7}, {10})};
    const std::vector<double> m = ops::classification_metrics(logits, labels, splits).to_vector<double>();
    ASSERT_EQ(m.size(), 9u);
    for (size_t s = 0; s < splits.size(); ++s) {
      EXPECT_EQ(m[3 * s], ops::masked_cross_entropy(logits, labels, splits[s]).item()) << s;
      const std::vector<int32_t> counts = ops::correct_counts(logits, labels, splits[s]).to_vector<int32_t>();
      EXPECT_EQ(m[3 * s + 1], counts[0]) << s;
      EXPECT_EQ(m[3 * s + 2], 0.0) << s;
    }
  }
  // Into rows of a larger buffer, leaving the others alone.
  Tensor logits = Tensor::from_vector<float>({0, 1, 1, 0, 0, 1, 1, 0}, {4, 2});  // argmax 1, 0, 1, 0
  Tensor labels = Tensor::from_vector<int32_t>({1, 1, 1, 1}, {4});
  Tensor buffer = Tensor::full({3, 3}, -1.0, DType::f64);
  Tensor middle = buffer.rows(1, 2);
  ops::classification_metrics(logits, labels, {Tensor::from_vector<int32_t>({0, 1, 2}, {3})}, middle);
  const std::vector<double> b = buffer.to_vector<double>();
  EXPECT_EQ(std::vector<double>(b.begin(), b.begin() + 3), std::vector<double>(3, -1.0));
  EXPECT_NEAR(b[3], (std::log1p(std::exp(-1.0)) * 2 + std::log1p(std::exp(1.0))) / 3, 1e-6);
  EXPECT_EQ(b[4], 2.0);
  EXPECT_EQ(b[5], 0.0);
  EXPECT_EQ(std::vector<double>(b.begin() + 6, b.end()), std::vector<double>(3, -1.0));
}

TEST(Matmul, SparseInputMatchesTheDenseProductAndItsGradients) {
  std::mt19937_64 rng(17);
  Tensor a = sparse_random(300, 700, rng, 0.02, DType::f64), b = random_tensor({700, 40}, rng, -1, 1);
  // Dense reference in f64: the sparse walk skips only exact zeros.
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  const std::vector<double> got = ops::matmul(a, b).to_vector<double>();
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 40; ++j) {
      double want = 0;
      for (int64_t k = 0; k < 700; ++k) want += av[i * 700 + k] * bv[k * 40 + j];
      ASSERT_NEAR(got[i * 40 + j], want, 1e-12) << i << "," << j;
    }
  // d b = A^T G also walks A's non-zeros; d a is a dense product.
  Tensor small_a = sparse_random(20, 60, rng, 0.02, DType::f64);
  expect_gradients_match("matmul, sparse a",
                         [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                         {small_a, random_tensor({60, 7}, rng)});
}

TEST(Matmul, SparseInputIsBitwiseIndependentOfThreadCount) {
  std::mt19937_64 rng(5);
  Tensor a = sparse_random(500, 900, rng, 0.02, DType::f32),
         g = random_tensor({500, 64}, rng, -1, 1, DType::f32);
  a.set_requires_grad();
  Tensor w = random_tensor({900, 64}, rng, -1, 1, DType::f32).set_requires_grad();
  const int threads = omp_get_max_threads();
  std::vector<std::vector<float>> outs, grads;
  for (int n : {1, 2, 3}) {
    omp_set_num_threads(n);
    w.zero_grad();
    Tensor out = ops::matmul(a.detach(), w);
    out.backward(g);
    outs.push_back(out.to_vector<float>());
    grads.push_back(w.grad().to_vector<float>());
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[0], grads[2]);
}

// ---- CUDA against the CPU ----------------------------------------------------------------

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
    expect_close(got[i], want[i], what + (i == 0 ? " output" : " grad of input " + std::to_string(i - 1)),
                 kTol);
}

}  // namespace

using CudaOpsCore = CudaVsCpuTest;

TEST_F(CudaOpsCore, MatmulMatchesCpu) {
  std::mt19937_64 rng(1);
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
           {4, 4, 4},
           {7, 3, 5},
           {300, 200, 100},
           {33, 1, 17},
           {17, 40, 1},
           {1, 64, 9},
           {5, 1, 1},
           // Small products in the op's own kernels: Cora's output layer (its backward has the
           // long sum 64 x 2,708 x 7), a long sum into few outputs, and long sums over three
           // column tiles (8, 8 and 4 columns).
           {2708, 64, 7},
           {5, 3000, 3},
           {3, 1000, 20},
           // Long thin weight gradients x^T dy (K >= 65,536) in the op's tall kernel: 8 phases of
           // 32 tiles, 42 phases of 6 tiles (4 threads idle), rows not a multiple of a block's;
           // and a wider one left to cuBLAS. Their products with M >= 65,536, K <= 64 and N <= 16
           // are the tall narrow kernel's: forwards with 4-vector batches of a row and 1-vector
           // tails (K = 12, 20), op(b) transposed in the data gradients of the K = 12 and K = 16
           // ones (N = 12 and 16); K = 30 goes to cuBLAS. Those with K <= 16 and N from 20 to 128
           // are the short-sum kernel's: 16 threads a row (the 100M-edge output layer's data
           // gradient, 8 x 64), 6 (4 of a block's threads idle), 32, and op(b) transposed in the
           // data gradient of the K = 24 one (8 x 24); N = 132 goes to cuBLAS.
           {70001, 32, 16},
           {65536 + 2048 * 3 + 5, 12, 8},
           {70001, 32, 64},
           {70001, 64, 8},
           {70001, 20, 12},
           {70001, 16, 8},
           {70001, 30, 8},
           {70001, 8, 64},
           {70001, 4, 24},
           {65536 + 5, 12, 128},
           {70001, 24, 8},
           {70001, 16, 132}}) {
    expect_cuda_matches_cpu(
        "matmul (" + std::to_string(M) + "," + std::to_string(K) + ")x(" + std::to_string(K) + "," +
            std::to_string(N) + ")",
        mm, {random_tensor({M, K}, rng, -1, 1, DType::f32), random_tensor({K, N}, rng, -1, 1, DType::f32)});
  }
  expect_cuda_matches_cpu(
      "matmul f64 (70001,8)x(8,16)", mm,
      {random_tensor({70001, 8}, rng, -1, 1, DType::f64), random_tensor({8, 16}, rng, -1, 1, DType::f64)});
  expect_cuda_matches_cpu(
      "matmul f64 (70001,64)x(64,16)", mm,  // the tall kernel's largest op(b)
      {random_tensor({70001, 64}, rng, -1, 1, DType::f64), random_tensor({64, 16}, rng, -1, 1, DType::f64)});
  expect_cuda_matches_cpu(
      "matmul f64 (70001,16)x(16,64)", mm,  // the short-sum kernel's most registers
      {random_tensor({70001, 16}, rng, -1, 1, DType::f64), random_tensor({16, 64}, rng, -1, 1, DType::f64)});
  expect_cuda_matches_cpu("matmul(x, x)",
                          [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[0]); },
                          {random_tensor({6, 6}, rng, -1, 1, DType::f32)});
  Tensor empty = ops::matmul(Tensor::zeros({3, 0}, DType::f32, Device::cuda),
                             Tensor::zeros({0, 2}, DType::f32, Device::cuda));
  EXPECT_EQ(empty.to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST_F(CudaOpsCore, LogSoftmaxMatchesCpu) {
  std::mt19937_64 rng(3);
  auto f = [](const std::vector<Tensor>& in) { return ops::log_softmax(in[0]); };
  expect_cuda_matches_cpu("log_softmax (3000, 7)", f, {random_tensor({3000, 7}, rng, -5, 5, DType::f32)});
  expect_cuda_matches_cpu("log_softmax (50, 100)", f, {random_tensor({50, 100}, rng, -5, 5, DType::f32)});
}

TEST_F(CudaOpsCore, CrossEntropyMatchesCpu) {
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
}

// The trainer's path on the device: the gradient alone, from counts made once, is the op's
// backward gradient bit for bit, and the CPU's within f32 rounding.
TEST_F(CudaOpsCore, CrossEntropyGradAloneIsTheBackwardsGradient) {
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
  Tensor cpu =
      ops::masked_cross_entropy_grad(logits.to(Device::cpu), labels.to(Device::cpu), index.to(Device::cpu),
                                     ops::masked_row_counts(index.to(Device::cpu), N), one.to(Device::cpu));
  const std::vector<float> on_cpu = cpu.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], on_cpu[i], 1e-7) << i;
}

TEST_F(CudaOpsCore, CrossEntropyBadLabelGivesNaNWithoutSync) {
  Tensor logits = Tensor::zeros({3, 2}, DType::f32, Device::cuda);
  Tensor labels = Tensor::from_vector<int32_t>({0, 5, 1}, {3}).to(Device::cuda);
  Tensor index = Tensor::from_vector<int32_t>({0, 1}, {2}).to(Device::cuda);
  EXPECT_TRUE(std::isnan(ops::masked_cross_entropy(logits, labels, index).item()));
  Tensor bad_index = Tensor::from_vector<int32_t>({0, 3}, {2}).to(Device::cuda);
  EXPECT_TRUE(std::isnan(ops::masked_cross_entropy(logits, labels, bad_index).item()));
  Tensor good = Tensor::from_vector<int32_t>({0, 2}, {2}).to(Device::cuda);
  EXPECT_NEAR(ops::masked_cross_entropy(logits, labels, good).item(), std::log(2.0), 1e-6);
}

TEST_F(CudaOpsCore, ArgmaxAndAccuracyMatchCpu) {
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
TEST_F(CudaOpsCore, ClassificationMetricsAreTheLossAndCountsOfTheOpsBitForBit) {
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
  const std::vector<double> m =
      ops::classification_metrics(logits, labels,
                                  {Tensor::from_vector<int32_t>({0, 3, -1, 2}, {4}).to(Device::cuda)})
          .to_vector<double>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 2.0);
  EXPECT_EQ(m[2], 2.0);
}

TEST_F(CudaOpsCore, ResultsAreBitwiseReproducible) {
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
