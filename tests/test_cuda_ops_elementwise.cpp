// CUDA tests of the elementwise, shape and reduction ops beyond the backend table
// (test_backend_ops.cpp): dropout masks bit for bit, batch_norm's running statistics, index_rows
// on integers and its bound check, empty tensors, device mismatches.
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
#include "gat/framework/ops/elu_dropout.h"
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

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    GAT_SKIP_WITHOUT_CUDA();
  }
};

}  // namespace

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
    expect_close(gpu_mean, cpu_mean, "running_mean", rel);
    expect_close(gpu_var, cpu_var, "running_var", rel);
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

// The dropping elementwise kernels take 4 elements a thread with vector accesses when every
// pointer is aligned to 4 elements, one at a time otherwise and for a last partial block: rows
// [first, 777) of a (777, 129) tensor cover a tail of 1 (first 0 and 4) and unaligned pointers
// (first 1; f32 and f64). Forward and backward against the CPU: dropout bit for bit, ELU + dropout
// within rounding (its exp is the device's own), which a wrong keep decision far exceeds.
TEST_F(CudaOps, DroppingElementwiseKernelsMatchTheCpuOnEveryAlignmentAndTail) {
  for (DType dtype : {DType::f32, DType::f64}) {
    std::mt19937_64 rng(5);
    const Tensor x = random_tensor({777, 129}, rng, -2.0, 2.0, dtype);
    const Tensor g = random_tensor({777, 129}, rng, -1.0, 1.0, dtype);
    const Tensor x_gpu = x.to(Device::cuda), g_gpu = g.to(Device::cuda);
    const DropoutKey key{0.4f, 3, 77};
    const double keep_scale = ops::dropout_keep_scale(key), alpha = 1.3;
    const double tol = dtype == DType::f32 ? 1e-6 : 1e-14;
    for (int64_t first : {0, 1, 4}) {
      const std::string where = std::string(dtype_name(dtype)) + ", rows from " + std::to_string(first);
      auto on_gpu = [&](const Tensor& t) { return t.to(Device::cuda).rows(first, 777); };
      const Tensor xs = x.rows(first, 777), gs = g.rows(first, 777);
      // Outputs as views at the same offset, so that they share the inputs' alignment.
      Tensor out_cpu = Tensor::zeros({777, 129}, dtype).rows(first, 777), grad_cpu = out_cpu.clone();
      Tensor out_gpu = on_gpu(Tensor::zeros({777, 129}, dtype)), grad_gpu = on_gpu(Tensor::zeros({777, 129}, dtype));
      KeepMask kept, unused;
      ops::kernels::elu_dropout_forward(xs, alpha, key, keep_scale, out_cpu, kept);
      ops::kernels::elu_dropout_forward(x_gpu.rows(first, 777), alpha, key, keep_scale, out_gpu, unused);
      expect_close(out_gpu.to(Device::cpu), out_cpu, "elu_dropout forward, " + where, tol);
      ops::kernels::elu_dropout_backward(out_cpu, gs, alpha, key, keep_scale, kept, grad_cpu);
      ops::kernels::elu_dropout_backward(out_gpu, g_gpu.rows(first, 777), alpha, key, keep_scale, unused, grad_gpu);
      expect_close(grad_gpu.to(Device::cpu), grad_cpu, "elu_dropout backward, " + where, tol);
      ops::kernels::dropout_forward(xs, key, keep_scale, out_cpu, kept);
      ops::kernels::dropout_forward(x_gpu.rows(first, 777), key, keep_scale, out_gpu, unused);
      EXPECT_TRUE(bitwise_equal(out_cpu, out_gpu.to(Device::cpu))) << "dropout, " << where;
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
