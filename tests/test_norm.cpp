// LayerNorm and BatchNorm1d (ops and layers) on the CPU: values against PyTorch's definitions
// computed here in long double, f64 gradient checks, running statistics, checkpoints, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gat/framework/io.h"
#include "gat/framework/ops/batch_norm.h"
#include "gat/framework/ops/layer_norm.h"
#include "gat/layers/batch_norm.h"
#include "gat/layers/layer_norm.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Inputs = std::vector<Tensor>;

// torch.nn.functional.layer_norm by its definition: per row of D, biased variance.
std::vector<double> layer_norm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                         const std::vector<double>& b, size_t D, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / D; ++r) {
    long double mean = 0, var = 0;
    for (size_t d = 0; d < D; ++d) mean += x[r * D + d];
    mean /= D;
    for (size_t d = 0; d < D; ++d) var += (x[r * D + d] - mean) * (x[r * D + d] - mean);
    var /= D;
    for (size_t d = 0; d < D; ++d)
      out[r * D + d] = static_cast<double>((x[r * D + d] - mean) / std::sqrt(var + eps) * w[d] + b[d]);
  }
  return out;
}

}  // namespace

TEST(LayerNorm, MatchesTorchDefinition) {
  std::mt19937_64 rng(1);
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-13 : 2e-6;
    Tensor x = random_tensor({3, 4, 37}, rng, -3.0, 5.0, dtype);  // offset mean, varied spread
    Tensor w = random_tensor({37}, rng, 0.5, 1.5, dtype), b = random_tensor({37}, rng, -1.0, 1.0, dtype);
    const double eps = 1e-3;  // large enough that dropping it would show
    expect_near_all(host_f64(ops::layer_norm(x, w, b, eps)),
                    layer_norm_reference(host_f64(x), host_f64(w), host_f64(b), 37, eps), tol,
                    std::string("layer_norm ") + dtype_name(dtype));
    // Without affine parameters: weight 1, bias 0.
    expect_near_all(host_f64(ops::layer_norm(x, Tensor(), Tensor(), eps)),
                    layer_norm_reference(host_f64(x), std::vector<double>(37, 1.0),
                                         std::vector<double>(37, 0.0), 37, eps),
                    tol, "layer_norm without affine");
  }
  // A hand example: row (1, 2, 3, 4): mean 2.5, biased variance 1.25.
  Tensor y = ops::layer_norm(Tensor::from_vector<double>({1, 2, 3, 4}, {1, 4}), Tensor(), Tensor(), 0.0);
  const double s = 1 / std::sqrt(1.25);
  expect_near_all(host_f64(y), {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s}, 1e-15, "hand example");
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(2);
  expect_gradients_match(
      "layer_norm affine", [](const Inputs& in) { return ops::layer_norm(in[0], in[1], in[2], 1e-5); },
      {random_tensor({5, 7}, rng, -2.0, 2.0), random_tensor({7}, rng), random_tensor({7}, rng)});
  expect_gradients_match("layer_norm plain, 3-d",
                         [](const Inputs& in) { return ops::layer_norm(in[0], Tensor(), Tensor(), 1e-5); },
                         {random_tensor({2, 3, 6}, rng, -2.0, 2.0)});
  expect_gradients_match("layer_norm weight only",
                         [](const Inputs& in) { return ops::layer_norm(in[0], in[1], Tensor(), 0.1); },
                         {random_tensor({4, 5}, rng), random_tensor({5}, rng)});
}

TEST(LayerNorm, LayerHoldsAffineParametersAndChecksInput) {
  LayerNorm norm(6, 1e-5, true, DType::f64);
  ASSERT_EQ(norm.named_parameters().size(), 2u);
  EXPECT_EQ(host_f64(norm.weight), std::vector<double>(6, 1.0));
  EXPECT_EQ(host_f64(norm.bias), std::vector<double>(6, 0.0));
  EXPECT_TRUE(LayerNorm(6, 1e-5, false).named_parameters().empty());
  expect_error([&] { norm.forward(Tensor::zeros({2, 5}, DType::f64)); }, {"layer_norm", "weight", "(6,)"});
  expect_error(
      [] {
        ops::layer_norm(Tensor::zeros({2, 0}), Tensor(), Tensor());
      },
      {"layer_norm", "last axis"});
  expect_error(
      [] {
        ops::layer_norm(Tensor::zeros({2, 3}, DType::i32), Tensor(), Tensor());
      },
      {"layer_norm", "'x'"});
  expect_error(
      [] {
        ops::layer_norm(Tensor::zeros({2, 3}), Tensor::zeros({3}, DType::f64), Tensor());
      },
      {"layer_norm", "weight"});
  expect_error([] { LayerNorm(4, -1.0); }, {"LayerNorm", "eps"});
}

// torch.nn.BatchNorm1d(C, momentum=0.2) in training for 3 batches, then eval: the running
// statistics and outputs by torch's definitions.
TEST(BatchNorm1d, RunningStatisticsFollowTorchAndEvalUsesThem) {
  const int64_t N = 6, C = 5;
  const double momentum = 0.2, eps = 1e-4;
  BatchNorm1d bn(C, eps, momentum, true, DType::f64);
  std::mt19937_64 rng(3);
  bn.weight.copy_(random_tensor({C}, rng, 0.5, 1.5));
  bn.bias.copy_(random_tensor({C}, rng));
  std::vector<long double> running_mean(C, 0.0L), running_var(C, 1.0L);
  const std::vector<double> w = host_f64(bn.weight), b = host_f64(bn.bias);
  for (int step = 0; step < 3; ++step) {
    Tensor x = random_tensor({N, C}, rng, -2.0 + step, 3.0 + step);
    const std::vector<double> xv = host_f64(x);
    Tensor y = bn.forward(x);
    std::vector<double> want(xv.size());
    for (int64_t c = 0; c < C; ++c) {
      long double mean = 0, var = 0;
      for (int64_t n = 0; n < N; ++n) mean += xv[n * C + c];
      mean /= N;
      for (int64_t n = 0; n < N; ++n) var += (xv[n * C + c] - mean) * (xv[n * C + c] - mean);
      var /= N;  // biased: normalising
      for (int64_t n = 0; n < N; ++n)
        want[n * C + c] = static_cast<double>((xv[n * C + c] - mean) / std::sqrt(var + eps) * w[c] + b[c]);
      running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean;
      running_var[c] = (1 - momentum) * running_var[c] + momentum * var * N / (N - 1);  // unbiased
    }
    expect_near_all(host_f64(y), want, 1e-13, "training output, step " + std::to_string(step));
  }
  const std::vector<double> rm = host_f64(bn.running_mean), rv = host_f64(bn.running_var);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(rm[c], static_cast<double>(running_mean[c]), 1e-14) << "running_mean " << c;
    EXPECT_NEAR(rv[c], static_cast<double>(running_var[c]), 1e-14) << "running_var " << c;
  }
  bn.eval();
  Tensor x = random_tensor({3, C}, rng);
  const std::vector<double> xv = host_f64(x);
  Tensor y = bn.forward(x);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = i % C;
    want[i] = static_cast<double>((xv[i] - running_mean[c]) / std::sqrt(running_var[c] + eps) * w[c] + b[c]);
  }
  expect_near_all(host_f64(y), want, 1e-13, "eval output");
  EXPECT_EQ(host_f64(bn.running_mean), rm) << "eval must not update the running statistics";
}

TEST(BatchNorm1d, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(4);
  expect_gradients_match(
      "batch_norm training, affine",
      [](const Inputs& in) {
        return ops::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {random_tensor({6, 4}, rng, -2.0, 2.0), random_tensor({4}, rng), random_tensor({4}, rng)});
  expect_gradients_match("batch_norm training, plain",
                         [](const Inputs& in) {
                           return ops::batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1,
                                                  1e-5);
                         },
                         {random_tensor({3, 5}, rng, -2.0, 2.0)});
  const Tensor rm = random_tensor({4}, rng), rv = random_tensor({4}, rng, 0.5, 2.0);
  expect_gradients_match("batch_norm eval, affine",
                         [rm, rv](const Inputs& in) {
                           Tensor m = rm.clone(), v = rv.clone();
                           return ops::batch_norm(in[0], m, v, in[1], in[2], false, 0.1, 1e-5);
                         },
                         {random_tensor({5, 4}, rng), random_tensor({4}, rng), random_tensor({4}, rng)});
}

TEST(BatchNorm1d, RunningStatisticsAreCheckpointBuffers) {
  BatchNorm1d bn(3, 1e-5, 0.1, true, DType::f64);
  std::vector<std::string> names;
  for (auto& [name, t] : bn.named_buffers()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"running_mean", "running_var"}));
  EXPECT_EQ(bn.named_parameters().size(), 2u) << "buffers are not parameters";
  std::mt19937_64 rng(5);
  bn.forward(random_tensor({4, 3}, rng, 1.0, 3.0));
  const std::string path = ::testing::TempDir() + "gat_batch_norm.safetensors";
  io::save(bn, path);
  io::Safetensors file = io::load_safetensors(path);
  ASSERT_EQ(file.tensors.count("running_mean"), 1u);
  EXPECT_EQ(host_f64(file.tensors.at("running_var")), host_f64(bn.running_var));
  BatchNorm1d fresh(3, 1e-5, 0.1, true, DType::f64);
  io::load_into(fresh, path);
  EXPECT_EQ(host_f64(fresh.running_mean), host_f64(bn.running_mean));
  EXPECT_EQ(host_f64(fresh.running_var), host_f64(bn.running_var));
  std::remove(path.c_str());
}

TEST(BatchNorm1d, BadInputIsReported) {
  BatchNorm1d bn(3);
  expect_error([&] { bn.forward(Tensor::zeros({1, 3})); }, {"batch_norm", "at least 2 rows"});
  expect_error([&] { bn.forward(Tensor::zeros({4, 2})); }, {"batch_norm", "running_mean", "(3,)"});
  expect_error([&] { bn.forward(Tensor::zeros({4, 3, 2})); }, {"batch_norm", "'x'"});
  expect_error(
      [] {
        ops::batch_norm(Tensor::zeros({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false);
      },
      {"batch_norm", "evaluation needs running_mean"});
  expect_error([] { BatchNorm1d(3, 1e-5, 1.5); }, {"BatchNorm1d", "momentum"});
  bn.eval();
  EXPECT_NO_THROW(bn.forward(Tensor::zeros({1, 3}))) << "eval works on one row";
}
