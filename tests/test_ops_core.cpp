// matmul, log_softmax, masked_cross_entropy, argmax, accuracy on CPU: gradient checks, values
// against references written out here, and the error messages.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

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
  Tensor a = random_tensor({300, 700}, rng, -1, 1, DType::f32), b = random_tensor({700, 150}, rng, -1, 1, DType::f32);
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

TEST(Matmul, EmptyInnerDimensionGivesZeros) {
  Tensor out = ops::matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  for (float v : out.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Matmul, Gradients) {
  std::mt19937_64 rng(2);
  auto mm = [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); };
  expect_gradients_match("matmul (4,3)x(3,5)", mm, {random_tensor({4, 3}, rng), random_tensor({3, 5}, rng)});
  expect_gradients_match("matmul K=1", mm, {random_tensor({4, 1}, rng), random_tensor({1, 5}, rng)});
  expect_gradients_match("matmul N=1", mm, {random_tensor({4, 3}, rng), random_tensor({3, 1}, rng)});
}

TEST(Matmul, TensorUsedTwiceGetsBothGradients) {
  std::mt19937_64 rng(3);
  expect_gradients_match("matmul(x, x)", [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[0]); },
                         {random_tensor({4, 4}, rng)});
  // d/dx sum(x·x) for x = [[1,2],[3,4]]: G B^T + A^T G with G = ones gives row sums + column sums.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).set_requires_grad();
  ops::matmul(x, x).backward(Tensor::full({2, 2}, 1.0, DType::f64));
  // G x^T: rows of x summed -> [[3, 7], [3, 7]];  x^T G: columns of x summed -> [[4, 4], [6, 6]]
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{7, 11, 9, 13}));
}

TEST(Matmul, OnlyInputsThatNeedGradientsGetThem) {
  Tensor a = Tensor::full({2, 3}, 1.0, DType::f64).set_requires_grad();
  Tensor b = Tensor::full({3, 2}, 1.0, DType::f64);
  ops::matmul(a, b).backward(Tensor::full({2, 2}, 1.0, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), std::vector<double>(6, 2.0));
  EXPECT_FALSE(b.grad().defined());
}

TEST(Matmul, ShapeErrorsNameBothShapes) {
  expect_error([] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); },
                      {"matmul", "(2, 3)", "(4, 5)"});
  expect_error([] { ops::matmul(Tensor::zeros({2, 3, 1}), Tensor::zeros({3, 5})); },
                      {"matmul", "(2, 3, 1)", "(3, 5)"});
  expect_error([] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 5}, DType::f64)); },
                      {"matmul", "f32", "f64"});
  expect_error([] { ops::matmul(Tensor::zeros({2, 3}, DType::i32), Tensor::zeros({3, 5}, DType::i32)); },
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

TEST(LogSoftmax, Gradients) {
  std::mt19937_64 rng(4);
  auto f = [](const std::vector<Tensor>& in) { return ops::log_softmax(in[0]); };
  expect_gradients_match("log_softmax (5,4)", f, {random_tensor({5, 4}, rng, -3, 3)});
  expect_gradients_match("log_softmax (3,40)", f, {random_tensor({3, 40}, rng, -3, 3)});
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

TEST(MaskedCrossEntropy, Gradients) {
  std::mt19937_64 rng(6);
  Tensor labels = Tensor::from_vector<int32_t>({0, 3, 1, 2, 2, 0}, {6});
  // Row 4 twice: it counts twice in the mean and in the gradient. Rows 0, 3 unused: zero gradient.
  Tensor index = Tensor::from_vector<int32_t>({4, 1, 5, 4, 2}, {5});
  expect_gradients_match(
      "masked_cross_entropy",
      [&](const std::vector<Tensor>& in) { return ops::masked_cross_entropy(in[0], labels, index); },
      {random_tensor({6, 4}, rng, -3, 3)});
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
  expect_error([&] { ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1, 2}, {3}), index); },
                      {"masked_cross_entropy", "labels[2] = 2", "[0, 2)"});
  expect_error([&] { ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1, -1}, {3}), index); },
                      {"masked_cross_entropy", "labels[2] = -1"});
  Tensor labels = Tensor::from_vector<int32_t>({0, 1, 1}, {3});
  expect_error([&] { ops::masked_cross_entropy(logits, labels, Tensor::from_vector<int32_t>({3}, {1})); },
                      {"masked_cross_entropy", "index[0] = 3", "[0, 3)"});
  expect_error([&] { ops::masked_cross_entropy(logits, Tensor::from_vector<int32_t>({0, 1}, {2}), index); },
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
    Tensor alone = ops::masked_cross_entropy_grad(logits, labels, index, ops::masked_row_counts(index, 6), grad_loss);
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
  expect_error([&] { grad(Tensor::from_vector<int32_t>({0, 1, 2}, {3}), index, count, one); },
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
  expect_gradients_match("matmul, sparse a", [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                         {small_a, random_tensor({60, 7}, rng)});
}

TEST(Matmul, SparseInputIsBitwiseIndependentOfThreadCount) {
  std::mt19937_64 rng(5);
  Tensor a = sparse_random(500, 900, rng, 0.02, DType::f32), g = random_tensor({500, 64}, rng, -1, 1, DType::f32);
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
