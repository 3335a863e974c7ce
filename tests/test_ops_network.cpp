// CPU tests of the ops a custom network needs: broadcasting arithmetic and its operators, exp, log,
// sigmoid, tanh, softmax and log_softmax along an axis, transpose, MSE and BCE-with-logits losses,
// and the multi-label micro-F1 score.
// Values against PyTorch's definitions written out here, f64 gradient checks of every
// differentiable input, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/losses.h"
#include "gat/framework/ops/micro_f1.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/transpose.h"
#include "gat/framework/ops/unary.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Inputs = std::vector<Tensor>;

class NetworkOps : public ::testing::Test {
 protected:
  std::mt19937_64 rng{77};
  Tensor rand(const Shape& shape, double lo = -1.0, double hi = 1.0) {
    return random_tensor(shape, rng, lo, hi);
  }
};

}  // namespace

// ---- arithmetic -------------------------------------------------------------------------------

TEST(NetworkOpsValues, BroadcastingReadsRowsColumnsAndSingles) {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = f64({10, 20, 30}, {3}), col = f64({100, 200}, {2, 1}), one = f64({0.5}, {1, 1});
  EXPECT_EQ(host_f64(a + row), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(host_f64(a + row.view({1, 3})), host_f64(a + row));
  EXPECT_EQ(host_f64(row - a), (std::vector<double>{9, 18, 27, 6, 15, 24}));
  EXPECT_EQ(host_f64(a * col), (std::vector<double>{100, 200, 300, 800, 1000, 1200}));
  EXPECT_EQ(host_f64(col / a), (std::vector<double>{100, 50, 100.0 / 3, 50, 40, 200.0 / 6}));
  EXPECT_EQ(host_f64(a - one), (std::vector<double>{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}));
  // (N, 1) op (1, C): the outer sum, in both orders.
  Tensor outer = col + row.view({1, 3});
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(host_f64(outer), (std::vector<double>{110, 120, 130, 210, 220, 230}));
  EXPECT_EQ(host_f64(row.view({1, 3}) + col), host_f64(outer));
  // A bias over the last axis of a 3-D tensor, and a 0-dimensional operand.
  Tensor x3 = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  EXPECT_EQ(host_f64(x3 * f64({1, -1}, {2})), (std::vector<double>{1, -2, 3, -4, 5, -6, 7, -8}));
  EXPECT_EQ(host_f64(x3 + Tensor::scalar(1.0, DType::f64)), (std::vector<double>{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ((a + Tensor::scalar(1.0, DType::f64)).shape(), (Shape{2, 3}));
}

TEST(NetworkOpsValues, ScalarsOnEitherSideAndNegation) {
  const Tensor a = f64({1, -2, 4}, {3});
  EXPECT_EQ(host_f64(a + 1.0), (std::vector<double>{2, -1, 5}));
  EXPECT_EQ(host_f64(1.0 + a), (std::vector<double>{2, -1, 5}));
  EXPECT_EQ(host_f64(a - 1.0), (std::vector<double>{0, -3, 3}));
  EXPECT_EQ(host_f64(1.0 - a), (std::vector<double>{0, 3, -3}));
  EXPECT_EQ(host_f64(2.0 * a), (std::vector<double>{2, -4, 8}));
  EXPECT_EQ(host_f64(a * 2), (std::vector<double>{2, -4, 8}));
  EXPECT_EQ(host_f64(a / 4.0), (std::vector<double>{0.25, -0.5, 1}));
  EXPECT_EQ(host_f64(4.0 / a), (std::vector<double>{4, -2, 1}));
  EXPECT_EQ(host_f64(-a), (std::vector<double>{-1, 2, -4}));
  // f32: the constant is rounded to f32 first, as torch does for a Python float.
  const Tensor a32 = a.to(DType::f32);
  EXPECT_EQ((a32 / 3.0).to_vector<float>(), (std::vector<float>{1.0f / 3.0f, -2.0f / 3.0f, 4.0f / 3.0f}));
}

TEST(NetworkOpsValues, LongFlatAndLongRowOperandsSplitAcrossTasks) {
  // 10000 elements: several 4096-column spans, flat and by row.
  std::mt19937_64 rng(3);
  Tensor a = random_tensor({10000}, rng), b = random_tensor({10000}, rng);
  std::vector<double> va = host_f64(a), vb = host_f64(b), sum(10000), prod(10000);
  for (size_t i = 0; i < va.size(); ++i) sum[i] = va[i] + vb[i];
  EXPECT_EQ(host_f64(a + b), sum);
  Tensor rows = random_tensor({2, 5000}, rng), col = random_tensor({2, 1}, rng);
  std::vector<double> vr = host_f64(rows), vc = host_f64(col);
  for (size_t i = 0; i < vr.size(); ++i) prod[i] = vr[i] * vc[i / 5000];
  EXPECT_EQ(host_f64(rows * col), prod);
}

TEST_F(NetworkOps, ArithmeticGradientsForEveryBroadcast) {
  struct Pair {
    std::string name;
    Shape a, b;
  };
  const std::vector<Pair> pairs = {
      {"same", {3, 4}, {3, 4}},   {"row (C,)", {3, 4}, {4}},    {"row (1, C)", {3, 4}, {1, 4}},
      {"column", {3, 4}, {3, 1}}, {"single", {3, 4}, {1, 1}},   {"0-d", {3, 4}, {}},
      {"outer", {3, 1}, {1, 4}},  {"3-D bias", {2, 3, 4}, {4}}, {"3-D column", {2, 3, 4}, {2, 3, 1}}};
  for (const Pair& p : pairs) {
    for (bool swap : {false, true}) {
      const Shape sa = swap ? p.b : p.a, sb = swap ? p.a : p.b;
      const std::string what = p.name + (swap ? " swapped" : "");
      expect_gradients_match("add " + what, [](const Inputs& in) { return in[0] + in[1]; },
                             {rand(sa), rand(sb)});
      expect_gradients_match("sub " + what, [](const Inputs& in) { return in[0] - in[1]; },
                             {rand(sa), rand(sb)});
      expect_gradients_match("mul " + what, [](const Inputs& in) { return in[0] * in[1]; },
                             {rand(sa), rand(sb)});
      expect_gradients_match("div " + what, [](const Inputs& in) { return in[0] / in[1]; },
                             {rand(sa), rand(sb, 0.5, 1.5)});
    }
  }
  expect_gradients_match(
      "constants", [](const Inputs& in) { return 2.0 / in[0] - in[0] / 3.0 + (1.0 - in[0]) * 0.5 + -in[0]; },
      {rand({3, 4}, 0.5, 1.5)});
  expect_gradients_match("x / x", [](const Inputs& in) { return in[0] / in[0]; }, {rand({5}, 0.5, 1.5)});
  expect_gradients_match("x - x * row", [](const Inputs& in) { return in[0] - in[0] * in[1]; },
                         {rand({3, 4}), rand({4})});
}

TEST(NetworkOpsValues, OnlyOperandsThatRequireGradGetOne) {
  Tensor a = f64({1, 2, 3, 4}, {2, 2}).set_requires_grad();
  Tensor b = f64({2, 4}, {2});  // no grad
  ops::sum(a / b).backward();
  EXPECT_EQ(host_f64(a.grad()), (std::vector<double>{0.5, 0.25, 0.5, 0.25}));
  EXPECT_FALSE(b.grad().defined());
  Tensor c = f64({2, 4}, {2}).set_requires_grad();
  ops::sum(f64({1, 2, 3, 4}, {2, 2}) / c).backward();  // d c = -sum_r a[r, c] / c^2
  EXPECT_EQ(host_f64(c.grad()), (std::vector<double>{-4.0 / 4, -6.0 / 16}));
}

TEST(NetworkOpsErrors, ArithmeticNamesTheShapesAndTheBroadcast) {
  const Tensor a = Tensor::zeros({2, 3});
  expect_error([&] { a + Tensor::zeros({2}); }, {"add", "(2, 3)", "(2,)", "do not broadcast", "axis -1"});
  expect_error([&] { a* Tensor::zeros({4, 3}); }, {"mul", "(4, 3)", "axis -2"});
  // Any NumPy broadcast is fine, over any axes (before issue 46, only rows, columns and single
  // elements were).
  EXPECT_EQ((Tensor::zeros({2, 3, 4}) - Tensor::zeros({3, 1})).shape(), (Shape{2, 3, 4}));
  expect_error([&] { Tensor::zeros({3, 2}) / Tensor::zeros({2, 3, 4}); }, {"div", "'a'", "'b'", "axis -1"});
  expect_error([&] { a + Tensor::zeros({2, 3}, DType::f64); }, {"add", "different dtypes"});
  expect_error([&] { Tensor::zeros({2}, DType::i32) + 1.0; }, {"add", "i32", "f32 or f64"});
  expect_error([&] { 1.0 / Tensor::zeros({2}, DType::i32); }, {"div", "'b'", "i32"});
  expect_error([&] { -Tensor(); }, {"neg"});
}

// ---- exp, log, sigmoid, tanh --------------------------------------------------------------------

TEST(NetworkOpsValues, UnaryFunctionsInF32AndF64) {
  const std::vector<double> x = {-30, -2.5, -0.5, 0, 0.25, 1, 3, 20};
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-15 : 3e-7;
    const Tensor t = f64(x, {2, 4}).to(dtype);
    std::vector<double> e, s, th, lg;
    for (double v : x) {
      e.push_back(std::exp(v));
      s.push_back(1 / (1 + std::exp(-v)));
      th.push_back(std::tanh(v));
    }
    for (double v : e) lg.push_back(std::log(v));
    expect_near_all(host_f64(ops::exp(t)), e, tol, "exp");
    expect_near_all(host_f64(ops::sigmoid(t)), s, tol, "sigmoid");
    expect_near_all(host_f64(ops::tanh(t)), th, tol, "tanh");
    expect_near_all(host_f64(ops::log(ops::exp(t))), x, dtype == DType::f64 ? 1e-14 : 1e-6, "log(exp(x))");
  }
  // The limits: no NaN.
  EXPECT_EQ(host_f64(ops::sigmoid(f64({-1000, 1000}, {2}))), (std::vector<double>{0, 1}));
  EXPECT_EQ(host_f64(ops::sigmoid(f64({-1000, 1000}, {2}).to(DType::f32))), (std::vector<double>{0, 1}));
  EXPECT_EQ(host_f64(ops::log(f64({0}, {1})))[0], -INFINITY);
}

TEST_F(NetworkOps, UnaryGradients) {
  expect_gradients_match("exp", [](const Inputs& in) { return ops::exp(in[0]); }, {rand({3, 4}, -2, 2)});
  expect_gradients_match("log", [](const Inputs& in) { return ops::log(in[0]); }, {rand({3, 4}, 0.2, 3)});
  expect_gradients_match("sigmoid", [](const Inputs& in) { return ops::sigmoid(in[0]); },
                         {rand({3, 4}, -4, 4)});
  expect_gradients_match("tanh", [](const Inputs& in) { return ops::tanh(in[0]); }, {rand({3, 4}, -3, 3)});
}

// ---- softmax and log_softmax along an axis ---------------------------------------------------

// softmax along axis 1 of (R, C) by the formula, in double, with the max subtracted.
std::vector<double> softmax_rows(const std::vector<double>& x, int64_t R, int64_t C, bool log) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x[r * C + c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c)
      out[r * C + c] = log ? x[r * C + c] - m - std::log(s) : std::exp(x[r * C + c] - m) / s;
  }
  return out;
}

TEST(NetworkOpsValues, SoftmaxAlongEitherAxisMatchesTheFormula) {
  // Large values: a naive exp overflows.
  const std::vector<double> x = {1000, 1001, 1002, -3, 0, 3, 0.5, -0.5, 2, 7, 7, 7};  // (3, 4) and (4, 3)
  const Tensor t = f64(x, {3, 4});
  for (bool log : {false, true}) {
    auto op = [log](const Tensor& in, int64_t axis) {
      return log ? ops::log_softmax(in, axis) : ops::softmax(in, axis);
    };
    const std::string name = log ? "log_softmax" : "softmax";
    expect_near_all(host_f64(op(t, 1)), softmax_rows(x, 3, 4, log), 1e-13, name + " axis 1");
    expect_near_all(host_f64(op(t, -1)), softmax_rows(x, 3, 4, log), 1e-13, name + " axis -1");
    // Axis 0 of t is axis 1 of its transpose.
    const std::vector<double> xt = host_f64(ops::transpose(t));
    expect_near_all(host_f64(ops::transpose(op(t, 0))), softmax_rows(xt, 4, 3, log), 1e-13, name + " axis 0");
    // A middle axis of a 3-D tensor: (2, 3, 2), softmax over the 3.
    const Tensor t3 = f64(x, {2, 3, 2});
    const std::vector<double> got = host_f64(op(t3, 1));
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 2; ++i) {
        std::vector<double> slice, want;
        for (int l = 0; l < 3; ++l) slice.push_back(x[o * 6 + l * 2 + i]);
        want = softmax_rows(slice, 1, 3, log);
        for (int l = 0; l < 3; ++l) EXPECT_NEAR(got[o * 6 + l * 2 + i], want[l], 1e-13) << name << " 3-D";
      }
  }
  // Softmax rows sum to one in f32 too.
  const std::vector<double> s = host_f64(ops::softmax(t.to(DType::f32), 0));
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(s[c] + s[4 + c] + s[8 + c], 1.0, 1e-6);
}

TEST_F(NetworkOps, SoftmaxGradientsAlongEveryAxis) {
  for (int64_t axis : {0, 1, -1}) {
    const std::string a = std::to_string(axis);
    expect_gradients_match("softmax axis " + a,
                           [axis](const Inputs& in) { return ops::softmax(in[0], axis); },
                           {rand({4, 5}, -3, 3)});
    expect_gradients_match("log_softmax axis " + a,
                           [axis](const Inputs& in) { return ops::log_softmax(in[0], axis); },
                           {rand({4, 5}, -3, 3)});
  }
  expect_gradients_match("softmax 3-D axis 1", [](const Inputs& in) { return ops::softmax(in[0], 1); },
                         {rand({2, 3, 4}, -3, 3)});
  expect_gradients_match("log_softmax 1-D", [](const Inputs& in) { return ops::log_softmax(in[0]); },
                         {rand({6}, -3, 3)});
}

TEST(NetworkOpsValues, SoftmaxWideStridedAxisUsesSeveralColumnBlocks) {
  // inner = 600 > one block of 256 columns; every column sums to one.
  std::mt19937_64 rng(8);
  const Tensor x = random_tensor({3, 600}, rng, -5, 5);
  const std::vector<double> want = softmax_rows(host_f64(ops::transpose(x)), 600, 3, false);
  expect_near_all(host_f64(ops::transpose(ops::softmax(x, 0))), want, 1e-13, "softmax axis 0, wide");
}

// ---- transpose -----------------------------------------------------------------------------------

TEST(NetworkOpsValues, TransposeAnyDtypeAndTileEdges) {
  EXPECT_EQ(host_f64(ops::transpose(f64({1, 2, 3, 4, 5, 6}, {2, 3}))),
            (std::vector<double>{1, 4, 2, 5, 3, 6}));
  const Tensor ints = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(ops::transpose(ints).to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 5, 2, 4, 6}));
  // 70 x 33: partial tiles on both edges.
  std::vector<double> v(70 * 33), want(70 * 33);
  for (int r = 0; r < 70; ++r)
    for (int c = 0; c < 33; ++c) {
      v[r * 33 + c] = r * 100 + c;
      want[c * 70 + r] = r * 100 + c;
    }
  const Tensor t = ops::transpose(f64(v, {70, 33}));
  EXPECT_EQ(t.shape(), (Shape{33, 70}));
  EXPECT_EQ(host_f64(t), want);
  EXPECT_EQ(host_f64(ops::transpose(f64(v, {70, 33}).to(DType::f32))), want);
  EXPECT_EQ(ops::transpose(Tensor::zeros({0, 4})).shape(), (Shape{4, 0}));
}

TEST(NetworkOpsValues, EmptyTensors) {
  const Tensor empty = Tensor::zeros({0, 3});
  EXPECT_EQ((empty + Tensor::zeros({3})).shape(), (Shape{0, 3}));
  EXPECT_EQ((Tensor::zeros({0, 1}) * Tensor::zeros({1, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ((empty / 2.0).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::softmax(empty, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::log_softmax(empty, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::exp(empty).shape(), (Shape{0, 3}));
}

TEST_F(NetworkOps, TransposeGradient) {
  expect_gradients_match("transpose", [](const Inputs& in) { return ops::transpose(in[0]); }, {rand({3, 5})});
  expect_gradients_match("x^T x",
                         [](const Inputs& in) { return ops::transpose(in[0]) * ops::transpose(in[0]); },
                         {rand({4, 2})});
}

TEST(NetworkOpsErrors, TransposeAndSoftmaxNameTheTensor) {
  expect_error([] { ops::transpose(Tensor::zeros({2, 3, 4})); }, {"transpose", "(2, 3, 4)"});
  expect_error([] { ops::transpose(Tensor::zeros({3})); }, {"transpose", "(3,)"});
  expect_error([] { ops::softmax(Tensor::zeros({2, 3}, DType::i32)); }, {"softmax", "i32", "f32 or f64"});
  expect_error([] { ops::sigmoid(Tensor::zeros({2}, DType::i32)); }, {"sigmoid", "i32 cpu (2,)"});
}

// ---- losses ----------------------------------------------------------------------------------------

TEST(NetworkOpsValues, MseAndBceMatchTorchsDefinitions) {
  const std::vector<double> x = {-100, -3, -0.5, 0, 0.7, 2, 40, 100}, y = {0, 1, 0.25, 1, 0, 0.5, 1, 0};
  double mse = 0, bce = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mse += (x[i] - y[i]) * (x[i] - y[i]);
    // -(y log p + (1 - y) log(1 - p)) with log p = -log1p(exp(-x)), log(1 - p) = -x - log1p(exp(-x)):
    // the log-sigmoid form, exact in double for these x.
    const double log_p = x[i] >= 0 ? -std::log1p(std::exp(-x[i])) : x[i] - std::log1p(std::exp(x[i]));
    const double log_1mp = log_p - x[i];
    bce += -(y[i] * log_p + (1 - y[i]) * log_1mp);
  }
  mse /= 8;
  bce /= 8;
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-14 : 1e-6;
    const Tensor tx = f64(x, {4, 2}).to(dtype), ty = f64(y, {4, 2}).to(dtype);
    EXPECT_NEAR(ops::mse_loss(tx, ty).item(), mse, tol * mse);
    EXPECT_NEAR(ops::binary_cross_entropy_with_logits(tx, ty).item(), bce, tol * bce);
  }
  // Known values: x = 0 gives log 2 whatever y; x = 100, y = 0 gives 100.
  EXPECT_NEAR(ops::binary_cross_entropy_with_logits(f64({0, 0}, {2}), f64({0, 1}, {2})).item(), std::log(2.0),
              1e-15);
  EXPECT_NEAR(ops::binary_cross_entropy_with_logits(f64({100}, {1}), f64({0}, {1})).item(), 100.0, 1e-12);
}

TEST(NetworkOpsValues, MaskedLossesAverageTheListedRowsOnly) {
  const Tensor x = f64({1, 2, 3, 4, 5, 6}, {3, 2}), y = f64({0, 0, 1, 1, 9, 9}, {3, 2});
  const Tensor index = Tensor::from_vector<int32_t>({2, 0, 2}, {3});  // row 2 twice, row 1 unused
  // rows 2, 0, 2: squared errors (16, 9), (1, 4), (16, 9) -> 55 / 6
  EXPECT_DOUBLE_EQ(ops::mse_loss(x, y, index).item(), 55.0 / 6);
  EXPECT_DOUBLE_EQ(ops::mse_loss(x, y, ops::RowIndex(index)).item(), 55.0 / 6);
  const double want =
      ops::binary_cross_entropy_with_logits(f64({5, 6, 1, 2, 5, 6}, {3, 2}), f64({9, 9, 0, 0, 9, 9}, {3, 2}))
          .item();
  EXPECT_DOUBLE_EQ(ops::binary_cross_entropy_with_logits(x, y, index).item(), want);
  // Rows not listed get no gradient.
  Tensor leaf = x.clone().set_requires_grad();
  ops::mse_loss(leaf, y, index).backward();  // d x = 2 (x - y) count / 6
  EXPECT_EQ(host_f64(leaf.grad()), (std::vector<double>{2.0 / 6, 4.0 / 6, 0, 0, 4 * -4.0 / 6, 4 * -3.0 / 6}));
}

TEST_F(NetworkOps, LossGradientsForInputAndTarget) {
  const Tensor index = Tensor::from_vector<int32_t>({3, 0, 3, 1}, {4});
  expect_gradients_match("mse", [](const Inputs& in) { return ops::mse_loss(in[0], in[1]); },
                         {rand({4, 3}), rand({4, 3})});
  expect_gradients_match("bce",
                         [](const Inputs& in) { return ops::binary_cross_entropy_with_logits(in[0], in[1]); },
                         {rand({4, 3}, -3, 3), rand({4, 3}, 0, 1)});
  expect_gradients_match("masked mse",
                         [index](const Inputs& in) { return ops::mse_loss(in[0], in[1], index); },
                         {rand({5, 2}), rand({5, 2})});
  expect_gradients_match(
      "masked bce",
      [index](const Inputs& in) { return ops::binary_cross_entropy_with_logits(in[0], in[1], index); },
      {rand({5, 2}, -3, 3), rand({5, 2}, 0, 1)});
}

TEST(NetworkOpsErrors, LossesNameTheirArguments) {
  const Tensor x = Tensor::zeros({3, 2}), index = Tensor::from_vector<int32_t>({0, 5}, {2});
  expect_error([&] { ops::mse_loss(x, Tensor::zeros({2, 3})); }, {"mse_loss", "target", "(2, 3)", "(3, 2)"});
  expect_error(
      [&] {
        ops::mse_loss(x, Tensor::zeros({3, 2}, DType::f64));
      },
      {"mse_loss", "different dtypes"});
  expect_error([&] { ops::binary_cross_entropy_with_logits(Tensor::zeros({0}), Tensor::zeros({0})); },
               {"binary_cross_entropy_with_logits", "no elements"});
  expect_error([&] { ops::mse_loss(x, x, Tensor::zeros({0}, DType::i32)); }, {"mse_loss", "index is empty"});
  expect_error([&] { ops::binary_cross_entropy_with_logits(x, x, index); }, {"index 5", "length 3"});
  expect_error([&] { ops::mse_loss(x, x, Tensor::zeros({2}, DType::f32)); }, {"index", "i32"});
}

// ---- micro-F1 ----------------------------------------------------------------------------------

TEST(NetworkOpsValues, MicroF1CountsThePairsOfAllRows) {
  // Predicted 1 where the logit is > 0: row 0 (1, 0, 0), row 1 (0, 0, 1), row 2 (1, 1, 0); a logit
  // of exactly 0 (row 0, label 1) and NaN (row 1, label 0) are negative.
  const double nan = std::nan("");
  const std::vector<double> logits = {2, 0, -1, -3, nan, 0.5, 1e-30, 4, -0.1};
  const std::vector<double> labels = {1, 1, 0, 0, 0, 1, 0, 1, 1};
  // tp: (0,0) (1,2) (2,1) = 3; fp: (2,0) = 1; fn: (0,1) (2,2) = 2  ->  6 / (6 + 1 + 2)
  for (DType dtype : {DType::f64, DType::f32}) {
    const Tensor x = f64(logits, {3, 3}).to(dtype), y = f64(labels, {3, 3}).to(dtype);
    EXPECT_EQ(ops::micro_f1_counts(x, y).to_vector<double>(), (std::vector<double>{3, 1, 2, 0}));
    EXPECT_DOUBLE_EQ(ops::micro_f1(x, y), 6.0 / 9);
  }
}

TEST(NetworkOpsValues, MicroF1OfTheEdgeCases) {
  const Tensor zeros = Tensor::zeros({2, 3}), ones = Tensor::full({2, 3}, 1.0);
  // Nothing predicted and nothing labelled: 0/0, which sklearn scores 0.
  EXPECT_EQ(ops::micro_f1(Tensor::full({2, 3}, -1.0), zeros), 0.0);
  // All right: 1; all wrong both ways: 0.
  EXPECT_EQ(ops::micro_f1(Tensor::full({2, 3}, 5.0), ones), 1.0);
  EXPECT_EQ(ops::micro_f1(Tensor::full({2, 3}, 5.0), zeros), 0.0);
  EXPECT_EQ(ops::micro_f1(Tensor::full({2, 3}, -5.0), ones), 0.0);
  // The all-zeros predictor (every logit 0, a tie) scores 0 whatever the labels.
  EXPECT_EQ(ops::micro_f1(zeros, ones), 0.0);
  // Predicting every label 1 scores 2p / (1 + p) for a share p of positive labels: here p = 1/3.
  EXPECT_DOUBLE_EQ(ops::micro_f1(Tensor::full({2, 3}, 1.0), f64({1, 0, 0, 0, 1, 0}, {2, 3}).to(DType::f32)),
                   0.5);
  // Counts of batches add up to the counts of their rows together.
  const Tensor x = f64({1, -1, 1, 1, -1, -1}, {2, 3}), y = f64({1, 1, 0, 0, 0, 1}, {2, 3});
  std::vector<double> sum(4, 0.0);
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<double> c =
        ops::micro_f1_counts(x.rows(r, r + 1), y.rows(r, r + 1)).to_vector<double>();
    for (size_t k = 0; k < 4; ++k) sum[k] += c[k];
  }
  EXPECT_EQ(sum, ops::micro_f1_counts(x, y).to_vector<double>());
  EXPECT_DOUBLE_EQ(ops::micro_f1_from_counts(sum), 2.0 / 6);  // tp 1, fp 2, fn 2
  expect_error([] { ops::micro_f1_from_counts({1, 0, 0, 2}); }, {"micro_f1", "2 labels", "neither 0 nor 1"});
  expect_error([] { ops::micro_f1_from_counts({1, 0}); }, {"micro_f1", "2 counts"});
  expect_error([] { ops::micro_f1(Tensor::zeros({2}), Tensor::zeros({2})); }, {"micro_f1", "logits"});
  expect_error(
      [] {
        ops::micro_f1(Tensor::zeros({2, 0}), Tensor::zeros({2, 0}));
      },
      {"micro_f1", "no columns"});
}
