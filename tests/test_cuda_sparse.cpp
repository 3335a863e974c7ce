// CUDA tests of the sparse features: CsrMatrix across devices, sparse_dropout masks bit for bit
// against the CPU, sparse_matmul forward and both gradients against the CPU (f32, rel. error
// <= 1e-5 of the largest element; f64) for widths that use 1 to 32 lanes per row and several per lane, bitwise
// reproducibility, sparse_dropout_matmul against its composition, f64 gradient checks on the
// device, and the GAT model on sparse features.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/sparse_dropout.h"
#include "gat/framework/ops/sparse_matmul.h"
#include "gat/framework/sparse.h"
#include "gat_testing.h"
#include "gradcheck.h"
#include "gat/models/gat.h"

using namespace gat;
using gat::testing::expect_gradients_match;
using gat::testing::random_tensor;
using gat::testing::rel_error;
using gat::testing::columns_of_lengths;
using gat::testing::sparse_random;

namespace {

class CudaSparse : public ::testing::Test {
 protected:
  void SetUp() override {
    GAT_SKIP_WITHOUT_CUDA();
  }
};

template <class T>
std::vector<T> host(const Tensor& t) { return t.to(Device::cpu).to_vector<T>(); }

}  // namespace

TEST_F(CudaSparse, CsrMatrixMovesBetweenDevices) {
  std::mt19937_64 rng(1);
  const Tensor dense = sparse_random(50, 70, rng, 0.1, DType::f32);
  const CsrMatrix cpu = CsrMatrix::from_dense(dense);
  const CsrMatrix gpu = cpu.to(Device::cuda);
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_TRUE(gpu.t_entry().is_cuda());
  EXPECT_EQ(host<float>(gpu.to_dense()), dense.to_vector<float>());
  const CsrMatrix built_on_gpu = CsrMatrix::from_dense(dense.to(Device::cuda));
  EXPECT_TRUE(built_on_gpu.is_cuda());
  EXPECT_EQ(host<int32_t>(built_on_gpu.t_entry()), cpu.t_entry().to_vector<int32_t>());
  EXPECT_EQ(host<float>(built_on_gpu.to(Device::cpu).values()), cpu.values().to_vector<float>());
}

TEST_F(CudaSparse, DropoutMasksAreTheCpuMasksBitForBit) {
  std::mt19937_64 rng(2);
  for (DType dtype : {DType::f32, DType::f64}) {
    const CsrMatrix cpu = CsrMatrix::from_dense(sparse_random(400, 300, rng, 0.05, dtype));
    const CsrMatrix gpu = cpu.to(Device::cuda);
    for (const DropoutKey& key : {DropoutKey{0.6f, 3, 0}, DropoutKey{0.1f, 99, 12345}}) {
      const Tensor want = ops::sparse_dropout(cpu, key).values(), got = ops::sparse_dropout(gpu, key).values();
      if (dtype == DType::f32) EXPECT_EQ(host<float>(got), want.to_vector<float>());
      else EXPECT_EQ(host<double>(got), want.to_vector<double>());
    }
  }
}

TEST_F(CudaSparse, MatmulAndItsGradientsMatchTheCpu) {
  std::mt19937_64 rng(3);
  // Rows of ~14 entries, and of ~105 (the warp-per-row kernel's rows span several of its
  // 32-entry batches).
  for (DType dtype : {DType::f32, DType::f64})
  for (double density : {0.04, 0.3}) {
    for (int64_t N : {1, 5, 32, 64, 100}) {
      const std::string what = std::string(dtype_name(dtype)) + " N=" + std::to_string(N) +
                               " density " + std::to_string(density);
      const CsrMatrix cpu = ops::sparse_dropout(CsrMatrix::from_dense(sparse_random(600, 350, rng, density, dtype)),
                                                DropoutKey{0.5f, 1, 2});  // dropped zeros too
      const CsrMatrix gpu = cpu.to(Device::cuda);
      const Tensor b = random_tensor({350, N}, rng, -1, 1, dtype), g = random_tensor({600, N}, rng, -1, 1, dtype);
      Tensor values_cpu = cpu.values().clone().set_requires_grad(), b_cpu = b.clone().set_requires_grad();
      Tensor values_gpu = gpu.values().clone().set_requires_grad(), b_gpu = b.to(Device::cuda).set_requires_grad();
      Tensor out_cpu = ops::sparse_matmul(cpu.with_values(values_cpu), b_cpu);
      Tensor out_gpu = ops::sparse_matmul(gpu.with_values(values_gpu), b_gpu);
      out_cpu.backward(g);
      out_gpu.backward(g.to(Device::cuda));
      EXPECT_TRUE(out_gpu.is_cuda());
      EXPECT_LE(rel_error(out_gpu, out_cpu), 1e-5) << what;
      EXPECT_LE(rel_error(b_gpu.grad(), b_cpu.grad()), 1e-5) << what;
      EXPECT_LE(rel_error(values_gpu.grad(), values_cpu.grad()), 1e-5) << what;
    }
  }
}

// Both CUDA kernels: the forward's 20,000 rows take one group of lanes per row, the gradient's
// 40 rows (every column holds ~5,000 entries) a warp per piece of 64 entries.
TEST_F(CudaSparse, TallAndWideMatmulsMatchTheCpu) {
  std::mt19937_64 rng(6);
  const CsrMatrix cpu = CsrMatrix::from_dense(sparse_random(20000, 40, rng, 0.25, DType::f32));
  const Tensor b = random_tensor({40, 64}, rng, -1, 1, DType::f32), g = random_tensor({20000, 64}, rng, -1, 1, DType::f32);
  Tensor b_cpu = b.clone().set_requires_grad(), b_gpu = b.to(Device::cuda).set_requires_grad();
  Tensor out_cpu = ops::sparse_matmul(cpu, b_cpu), out_gpu = ops::sparse_matmul(cpu.to(Device::cuda), b_gpu);
  out_cpu.backward(g);
  out_gpu.backward(g.to(Device::cuda));
  EXPECT_LE(rel_error(out_gpu, out_cpu), 1e-5);
  EXPECT_LE(rel_error(b_gpu.grad(), b_cpu.grad()), 1e-5);
}

// d b through the transpose's pieces: columns of one piece, of two and of many, with and without
// a short last piece, and an empty one (sparse.h). One CUDA matrix for every width: each product
// must find the pieces' arrival counts set back by the one before.
TEST_F(CudaSparse, GradientsThroughTheTransposesPiecesMatchTheCpu) {
  std::mt19937_64 rng(7);
  for (DType dtype : {DType::f32, DType::f64}) {
    const CsrMatrix cpu =
        CsrMatrix::from_dense(columns_of_lengths({0, 1, 63, 64, 65, 128, 129, 1100}, 1200, rng, dtype));
    const CsrMatrix gpu = cpu.to(Device::cuda);
    for (int64_t N : {1, 5, 64, 100}) {
      const std::string what = std::string(dtype_name(dtype)) + " N=" + std::to_string(N);
      const Tensor b = random_tensor({8, N}, rng, -1, 1, dtype), g = random_tensor({1200, N}, rng, -1, 1, dtype);
      Tensor b_cpu = b.clone().set_requires_grad(), b_gpu = b.to(Device::cuda).set_requires_grad();
      ops::sparse_matmul(cpu, b_cpu).backward(g);
      ops::sparse_matmul(gpu, b_gpu).backward(g.to(Device::cuda));
      EXPECT_LE(rel_error(b_gpu.grad(), b_cpu.grad()), 1e-5) << what;
      const std::vector<double> grad = host<double>(b_gpu.grad().to(DType::f64));
      EXPECT_EQ(std::vector<double>(grad.begin(), grad.begin() + N), std::vector<double>(N, 0.0))
          << what << ": the empty column's row";
    }
  }
}

// sparse_dropout_matmul on the device: bit for bit the composition there (the dropout inside the
// warp-per-row kernel on 600 rows; two kernels on 20,000), its gradients too, and the CPU's
// numbers within rounding.
TEST_F(CudaSparse, DropoutMatmulIsTheComposition) {
  std::mt19937_64 rng(8);
  for (const auto& [rows, cols, density] : {std::tuple<int64_t, int64_t, double>{600, 350, 0.04}, {20000, 40, 0.25}}) {
    const CsrMatrix cpu = CsrMatrix::from_dense(sparse_random(rows, cols, rng, density, DType::f32));
    const CsrMatrix gpu = cpu.to(Device::cuda);
    const Tensor b = random_tensor({cols, 64}, rng, -1, 1, DType::f32), g = random_tensor({rows, 64}, rng, -1, 1, DType::f32);
    const DropoutKey key{0.6f, 7, 11};
    auto run = [&](const CsrMatrix& a, Device device, bool fused) {
      Tensor values = a.values().clone().set_requires_grad(), w = b.to(device).set_requires_grad();
      const CsrMatrix x = a.with_values(values);
      Tensor out = fused ? ops::sparse_dropout_matmul(x, key, w) : ops::sparse_matmul(ops::sparse_dropout(x, key), w);
      out.backward(g.to(device));
      return std::vector<Tensor>{out.to(Device::cpu), w.grad().to(Device::cpu), values.grad().to(Device::cpu)};
    };
    const std::vector<Tensor> fused = run(gpu, Device::cuda, true), composed = run(gpu, Device::cuda, false),
                              want = run(cpu, Device::cpu, true);
    const std::string what = std::to_string(rows) + " rows";
    for (size_t k = 0; k < fused.size(); ++k) {
      EXPECT_EQ(fused[k].to_vector<float>(), composed[k].to_vector<float>()) << what << ", result " << k;
      EXPECT_LE(rel_error(fused[k], want[k]), 1e-5) << what << ", result " << k;
    }
  }
}

TEST_F(CudaSparse, MatmulIsBitwiseReproducible) {
  std::mt19937_64 rng(4);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(3000, 1400, rng, 0.02, DType::f32)).to(Device::cuda);
  const Tensor g = random_tensor({3000, 64}, rng, -1, 1, DType::f32, Device::cuda);
  Tensor w = random_tensor({1400, 64}, rng, -1, 1, DType::f32, Device::cuda).set_requires_grad();
  std::vector<std::vector<float>> outs, grads;
  for (int run = 0; run < 2; ++run) {
    w.zero_grad();
    Tensor out = ops::sparse_matmul(a, w);
    out.backward(g);
    outs.push_back(host<float>(out));
    grads.push_back(host<float>(w.grad()));
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

TEST_F(CudaSparse, GradientChecksOnTheDevice) {
  std::mt19937_64 rng(5);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(9, 14, rng, 0.3, DType::f64)).to(Device::cuda);
  expect_gradients_match("cuda sparse_matmul b and values", [&](const std::vector<Tensor>& in) {
    return ops::sparse_matmul(a.with_values(in[0]), in[1]);
  }, {a.values(), random_tensor({14, 5}, rng, -1, 1, DType::f64, Device::cuda)});
  expect_gradients_match("cuda sparse_matmul after sparse_dropout", [&](const std::vector<Tensor>& in) {
    return ops::sparse_matmul(ops::sparse_dropout(a.with_values(in[0]), DropoutKey{0.5f, 4, 4}), in[1]);
  }, {a.values(), random_tensor({14, 40}, rng, -1, 1, DType::f64, Device::cuda)});
  expect_gradients_match("cuda sparse_dropout_matmul", [&](const std::vector<Tensor>& in) {
    return ops::sparse_dropout_matmul(a.with_values(in[0]), DropoutKey{0.5f, 4, 4}, in[1]);
  }, {a.values(), random_tensor({14, 40}, rng, -1, 1, DType::f64, Device::cuda)});
}

TEST_F(CudaSparse, GATOnSparseFeaturesFollowsTheCpu) {
  std::mt19937_64 rng(6);
  const int64_t n = 120;
  std::vector<int32_t> src, dst;
  std::uniform_int_distribution<int32_t> node(0, n - 1);
  for (int k = 0; k < 5 * n; ++k) src.push_back(node(rng)), dst.push_back(node(rng));
  const Graph graph = Graph::from_edges(n, src, dst, GraphBuildOptions{true});
  const CsrMatrix x = CsrMatrix::from_dense(sparse_random(n, 300, rng, 0.03, DType::f32));
  Generator init_cpu(7), init_gpu(7);
  GAT cpu(GATConfig{300, 4}, init_cpu), gpu(GATConfig{300, 4}, init_gpu);
  gpu.to(Device::cuda);
  Generator gen_cpu(8), gen_gpu(8);  // training mode: input and attention dropout
  const Tensor out_cpu = cpu.forward(x, graph, gen_cpu);
  const Tensor out_gpu = gpu.forward(x.to(Device::cuda), graph.to(Device::cuda), gen_gpu);
  EXPECT_LE(rel_error(out_gpu, out_cpu), 1e-5);
  const Tensor g = random_tensor({n, 4}, rng, -1, 1, DType::f32);
  out_cpu.backward(g);
  out_gpu.backward(g.to(Device::cuda));
  EXPECT_LE(rel_error(gpu.conv1->lin->weight.grad(), cpu.conv1->lin->weight.grad()), 1e-5);
}
