// Sparse node features: CsrMatrix (from/to dense, transpose plan), sparse_dropout (the dense
// dropout mask, bit for bit), sparse_matmul (the dense product and its gradient, bit for bit;
// gradient checks for b and the values), sparse_dropout_matmul (the two in one op, bit for bit
// their composition; gradient checks), and the layers, the GAT model and the trainer taking
// dense or sparse features to the same numbers. The gradient checks run on each device; the CUDA
// backend against the CPU: CsrMatrix across devices, sparse_dropout masks bit for bit,
// sparse_matmul forward and both gradients (f32, rel. error <= 1e-5 of the largest element; f64)
// for widths that use 1 to 32 lanes per row and several per lane, bitwise reproducibility,
// sparse_dropout_matmul against its composition, and the GAT model on sparse features.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gat/datasets/generator.h"
#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/sparse_dropout.h"
#include "gat/framework/ops/sparse_matmul.h"
#include "gat/framework/ops/transpose.h"
#include "gat/framework/sparse.h"
#include "gat/layers/linear.h"
#include "gat/models/gat.h"
#include "gat/train/trainer.h"
#include "gat_testing.h"
#include "gradcheck.h"

using namespace gat;
using namespace gat::testing;

TEST(CsrMatrix, FromDenseListsTheNonZerosAndTheirTranspose) {
  // 0 2 0 3
  // 0 0 0 0
  // 4 0 0 5
  const Tensor dense = Tensor::from_vector<float>({0, 2, 0, 3, 0, 0, 0, 0, 4, 0, 0, 5}, {3, 4});
  const CsrMatrix m = CsrMatrix::from_dense(dense);
  EXPECT_EQ(m.rows(), 3);
  EXPECT_EQ(m.cols(), 4);
  EXPECT_EQ(m.nnz(), 4);
  EXPECT_EQ(m.row_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 2, 4}));
  EXPECT_EQ(m.col_idx().to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 3}));
  EXPECT_EQ(m.row_idx().to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 2, 2}));
  EXPECT_EQ(m.values().to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(m.t_row_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 2, 4}));
  EXPECT_EQ(m.t_entry().to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 1, 3}));
  EXPECT_EQ(m.to_dense().to_vector<float>(), dense.to_vector<float>());
  EXPECT_EQ(m.describe(), "csr f32 cpu (3, 4) nnz 4");
}

TEST(CsrMatrix, TheTransposeIsCutIntoPiecesOfAtMostKPieceEntries) {
  static_assert(CsrMatrix::kPieceEntries == 64, "the lengths below straddle 64-entry pieces");
  std::mt19937_64 rng(5);
  const CsrMatrix m =
      CsrMatrix::from_dense(columns_of_lengths({0, 1, 63, 64, 65, 128, 129, 1100}, 1200, rng, DType::f32));
  EXPECT_EQ(m.t_piece_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 6, 8, 11, 29}));
  EXPECT_EQ(m.t_piece_col().to_vector<int32_t>(),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 7,
                                  7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}));
  EXPECT_EQ(m.t_split_cols().to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 6, 7}));
  const CsrMatrix moved = m.to(Device::cpu);
  EXPECT_EQ(moved.t_piece_ptr().to_vector<int32_t>(), m.t_piece_ptr().to_vector<int32_t>());
}

TEST(CsrMatrix, RoundTripsAndHandlesAllZeros) {
  std::mt19937_64 rng(1);
  const Tensor dense = sparse_random(40, 70, rng, 0.05, DType::f64);
  EXPECT_EQ(CsrMatrix::from_dense(dense).to_dense().to_vector<double>(), dense.to_vector<double>());
  const CsrMatrix zeros = CsrMatrix::from_dense(Tensor::zeros({3, 5}));
  EXPECT_EQ(zeros.nnz(), 0);
  EXPECT_EQ(zeros.to_dense().to_vector<float>(), std::vector<float>(15, 0.0f));
  EXPECT_EQ(ops::sparse_matmul(zeros, Tensor::full({5, 2}, 1.0)).to_vector<float>(),
            std::vector<float>(6, 0.0f));
}

TEST(CsrMatrix, RejectsBadInputs) {
  EXPECT_THROW(CsrMatrix::from_dense(Tensor::zeros({4})), Error);
  EXPECT_THROW(CsrMatrix::from_dense(Tensor::zeros({2, 2}, DType::i32)), Error);
  const CsrMatrix m = CsrMatrix::from_dense(Tensor::full({2, 2}, 1.0));
  EXPECT_THROW(m.with_values(Tensor::zeros({3})), Error);
  EXPECT_THROW(Features(Tensor::zeros({2, 2})).sparse(), Error);
  EXPECT_THROW(Features(m).dense(), Error);
}

TEST(Features, ChooseGoesSparseBelowTheDensity) {
  std::mt19937_64 rng(2);
  const Tensor x = sparse_random(50, 80, rng, 0.05, DType::f64);
  const Features sparse = Features::choose(x);
  ASSERT_TRUE(sparse.is_sparse());
  EXPECT_EQ(sparse.rows(), 50);
  EXPECT_EQ(sparse.cols(), 80);
  EXPECT_EQ(sparse.sparse().to_dense().to_vector<double>(), x.to_vector<double>());
  EXPECT_FALSE(Features::choose(x, 0.0).is_sparse());   // 0 keeps them dense
  EXPECT_FALSE(Features::choose(x, 0.01).is_sparse());  // denser than 1%
  EXPECT_FALSE(Features::choose(random_tensor({10, 10}, rng)).is_sparse());
}

TEST(SparseDropout, DrawsTheDenseMaskBitForBit) {
  std::mt19937_64 rng(3);
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = sparse_random(60, 90, rng, 0.1, dtype);
    const CsrMatrix a = CsrMatrix::from_dense(x);
    for (const DropoutKey& key : {DropoutKey{0.6f, 7, 0}, DropoutKey{0.2f, 123, 45}}) {
      const CsrMatrix dropped = ops::sparse_dropout(a, key);
      EXPECT_EQ(dropped.nnz(), a.nnz());  // the pattern stays, dropped entries hold zeros
      const Tensor want = ops::dropout(x, key), got = dropped.to_dense();
      if (dtype == DType::f32)
        EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
      else
        EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
    }
  }
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(5, 5, rng, 0.05, DType::f64));
  EXPECT_TRUE(ops::sparse_dropout(a, DropoutKey{}).values().same(a.values()));  // p = 0: a itself
  EXPECT_THROW(ops::sparse_dropout(a, DropoutKey{1.0f, 0, 0}), Error);
}

TEST(SparseDropout, DropsAboutP) {
  const CsrMatrix a = CsrMatrix::from_dense(Tensor::full({200, 100}, 1.0));
  const std::vector<float> v = ops::sparse_dropout(a, DropoutKey{0.3f, 5, 1}).values().to_vector<float>();
  int64_t dropped = 0;
  for (float x : v) dropped += x == 0.0f;
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(v.size()), 0.3, 0.02);
}

class SparseOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(SparseOnDevice);

TEST_P(SparseOnDevice, DropoutGradientOfTheValues) {
  std::mt19937_64 rng(4);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(12, 15, rng, 0.3, DType::f64)).to(device());
  expect_gradients_match("sparse_dropout values",
                         [&](const std::vector<Tensor>& in) {
                           return ops::sparse_dropout(a.with_values(in[0]), DropoutKey{0.4f, 9, 2}).values();
                         },
                         {a.values()});
}

TEST(SparseMatmul, MatchesTheDenseProductAndItsWeightGradientBitForBit) {
  std::mt19937_64 rng(5);
  const Tensor x = sparse_random(300, 500, rng, 0.03, DType::f32);  // below matmul's sparse cut
  const Tensor g = random_tensor({300, 64}, rng, -1, 1, DType::f32);
  for (const DropoutKey& key : {DropoutKey{}, DropoutKey{0.6f, 1, 3}}) {  // with dropped zeros too
    Tensor w = random_tensor({500, 64}, rng, -1, 1, DType::f32).set_requires_grad();
    Tensor dense_out = ops::matmul(ops::dropout(x, key), w);
    dense_out.backward(g);
    const std::vector<float> dense_grad = w.grad().to_vector<float>();
    w.zero_grad();
    Tensor sparse_out = ops::sparse_matmul(ops::sparse_dropout(CsrMatrix::from_dense(x), key), w);
    sparse_out.backward(g);
    EXPECT_EQ(sparse_out.to_vector<float>(), dense_out.to_vector<float>());
    EXPECT_EQ(w.grad().to_vector<float>(), dense_grad);
  }
}

TEST(SparseMatmul, LongRowsAndColumnsWithDroppedEntriesMatchTheDenseProduct) {
  // Rows and columns of over a hundred kept entries among dropped ones: the CPU kernel collects a
  // row's non-zero entries 64 at a time, so this crosses its batches in both products.
  std::mt19937_64 rng(9);
  const Tensor x = sparse_random(200, 300, rng, 0.9, DType::f64);  // f64
  const Tensor g = random_tensor({200, 16}, rng, -1, 1);
  const DropoutKey key{0.3f, 2, 5};
  Tensor w = random_tensor({300, 16}, rng, -1, 1).set_requires_grad();
  Tensor dense_out = ops::matmul(ops::dropout(x, key), w);
  dense_out.backward(g);
  const Tensor dense_grad = w.grad().clone();
  w.zero_grad();
  Tensor sparse_out = ops::sparse_matmul(ops::sparse_dropout(CsrMatrix::from_dense(x), key), w);
  sparse_out.backward(g);
  EXPECT_LE(rel_error(sparse_out, dense_out), 1e-13);
  EXPECT_LE(rel_error(w.grad(), dense_grad), 1e-13);
}

TEST_P(SparseOnDevice, MatmulGradientsOfBAndTheValues) {
  std::mt19937_64 rng(6);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(9, 14, rng, 0.3, DType::f64)).to(device());
  expect_gradients_match(
      "sparse_matmul b and values",
      [&](const std::vector<Tensor>& in) { return ops::sparse_matmul(a.with_values(in[0]), in[1]); },
      {a.values(), random_f64({14, 5}, rng)});
  expect_gradients_match("sparse_matmul b",
                         [&](const std::vector<Tensor>& in) { return ops::sparse_matmul(a, in[0]); },
                         {random_f64({14, 3}, rng)});
  // Through dropout, as the first layer sees it; 40 columns: several per lane on the device; 70:
  // the CPU's block of 64 columns in registers and 6 past it.
  for (int64_t N : {4, 40, 70})
    expect_gradients_match(
        "sparse_matmul after sparse_dropout N=" + std::to_string(N),
        [&](const std::vector<Tensor>& in) {
          return ops::sparse_matmul(ops::sparse_dropout(a.with_values(in[0]), DropoutKey{0.5f, 4, 4}), in[1]);
        },
        {a.values(), random_f64({14, N}, rng)});
}

TEST(SparseMatmul, OnlyInputsThatNeedGradientsGetThem) {
  std::mt19937_64 rng(7);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(6, 8, rng, 0.4, DType::f64));
  Tensor b = random_tensor({8, 3}, rng).set_requires_grad();
  ops::sparse_matmul(a, b).backward(random_tensor({6, 3}, rng));
  EXPECT_TRUE(b.grad().defined());
  EXPECT_FALSE(a.values().grad().defined());
  const autograd::NoGradGuard no_grad;
  EXPECT_FALSE(ops::sparse_matmul(a, b).requires_grad());
}

TEST(SparseMatmul, BitwiseIndependentOfThreadCount) {
  std::mt19937_64 rng(8);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(700, 900, rng, 0.05, DType::f32));
  Tensor values = a.values().clone().set_requires_grad();
  Tensor w = random_tensor({900, 64}, rng, -1, 1, DType::f32).set_requires_grad();
  const Tensor g = random_tensor({700, 64}, rng, -1, 1, DType::f32);
  const int threads = omp_get_max_threads();
  std::vector<std::vector<float>> outs, grads, value_grads;
  for (int n : {1, 2, 3}) {
    omp_set_num_threads(n);
    w.zero_grad();
    values.zero_grad();
    Tensor out = ops::sparse_matmul(a.with_values(values), w);
    out.backward(g);
    outs.push_back(out.to_vector<float>());
    grads.push_back(w.grad().to_vector<float>());
    value_grads.push_back(values.grad().to_vector<float>());
  }
  omp_set_num_threads(threads);
  for (int k : {1, 2}) {
    EXPECT_EQ(outs[0], outs[k]);
    EXPECT_EQ(grads[0], grads[k]);
    EXPECT_EQ(value_grads[0], value_grads[k]);
  }
}

// parallel_for_rows, sparse_rows' split: every row once, each thread's rows one ascending range,
// and no thread with more than its share of the cost plus one row, whatever the row lengths (long
// rows first, a hub row, empty rows at both ends) and the thread count. Few rows of small cost run on one
// thread.
TEST(ParallelForRows, EachRowOnceInRangesOfEqualCost) {
  std::mt19937_64 rng(12);
  std::vector<int32_t> row_ptr{0, 0, 0};  // two empty rows first
  for (int r = 0; r < 2000; ++r)
    row_ptr.push_back(row_ptr.back() + (r < 500 ? 40 : r == 700 ? 2000 : int32_t(rng() % 4)));
  row_ptr.push_back(row_ptr.back());  // an empty last row
  const int64_t R = static_cast<int64_t>(row_ptr.size()) - 1, row_cost = 3, entry_cost = 2;
  auto cost = [&](int64_t r) { return row_cost + entry_cost * (row_ptr[r + 1] - row_ptr[r]); };
  int64_t total = 0, largest = 0;
  for (int64_t r = 0; r < R; ++r) total += cost(r), largest = std::max(largest, cost(r));
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3, 7}) {
    SCOPED_TRACE(threads);
    omp_set_num_threads(threads);
    std::vector<std::atomic<int>> visits(static_cast<size_t>(R));
    std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(threads));  // by thread, in visit order
    ops::detail::parallel_for_rows(row_ptr.data(), R, row_cost, entry_cost, [&](int64_t r) {
      ++visits[static_cast<size_t>(r)];
      rows_of[static_cast<size_t>(omp_get_thread_num())].push_back(r);
    });
    for (int64_t r = 0; r < R; ++r) EXPECT_EQ(visits[static_cast<size_t>(r)], 1) << "row " << r;
    int64_t next = 0;  // thread t's rows follow thread t - 1's
    for (const std::vector<int64_t>& rows : rows_of) {
      int64_t thread_cost = 0;
      for (const int64_t r : rows) {
        EXPECT_EQ(r, next++);
        thread_cost += cost(r);
      }
      EXPECT_LE(thread_cost, total / threads + largest);
    }
  }
  omp_set_num_threads(2);
  std::vector<int> thread_of(3, -1);
  const std::vector<int32_t> small{0, 1, 2, 3};  // cost 3 (1 + 1) * 3: below kParallelThreshold
  ops::detail::parallel_for_rows(
      small.data(), 3, 1, 1, [&](int64_t r) { thread_of[static_cast<size_t>(r)] = omp_get_thread_num(); });
  EXPECT_EQ(thread_of, std::vector<int>({0, 0, 0}));
  ops::detail::parallel_for_rows(small.data(), 0, 1, 1, [&](int64_t) { ADD_FAILURE() << "no rows"; });
  omp_set_num_threads(saved);
}

// A transposed product whose rows differ in length by thousands (bag-of-words features: one
// common word in most rows) gives the same bits on any number of threads, and the product.
TEST(SparseMatmul, SkewedTransposedRowsBitwiseIndependentOfThreadCount) {
  std::mt19937_64 rng(13);
  Tensor dense = sparse_random(3000, 40, rng, 0.02, DType::f32);
  float* x = dense.data<float>();
  for (int64_t i = 0; i < 3000; i += 2) x[i * 40 + 5] = 0.25f;  // the common word, column 5
  const CsrMatrix a = CsrMatrix::from_dense(dense);
  Tensor w = random_tensor({40, 64}, rng, -1, 1, DType::f32).set_requires_grad();
  const Tensor g = random_tensor({3000, 64}, rng, -1, 1, DType::f32);
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> grads;
  for (const int n : {1, 2, 3}) {
    omp_set_num_threads(n);
    w.zero_grad();
    ops::sparse_matmul(a, w).backward(g);
    grads.push_back(w.grad().to_vector<float>());
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[0], grads[2]);
  const std::vector<float> want = ops::matmul(ops::transpose(dense), g).to_vector<float>();  // A^T G
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(grads[0][k], want[k], 1e-4f) << k;
}

// The fused op is the composition: the same output, the same gradients of b and of the values.
TEST(SparseDropoutMatmul, IsTheProductOfTheDroppedMatrixBitForBit) {
  std::mt19937_64 rng(10);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(90, 70, rng, 0.1, DType::f32));
  const Tensor b = random_tensor({70, 12}, rng, -1, 1, DType::f32),
               g = random_tensor({90, 12}, rng, -1, 1, DType::f32);
  const DropoutKey key{0.6f, 5, 3};
  auto run = [&](bool fused) {
    Tensor values = a.values().clone().set_requires_grad(), w = b.clone().set_requires_grad();
    const CsrMatrix x = a.with_values(values);
    Tensor out =
        fused ? ops::sparse_dropout_matmul(x, key, w) : ops::sparse_matmul(ops::sparse_dropout(x, key), w);
    out.backward(g);
    return std::vector<std::vector<float>>{out.to_vector<float>(), w.grad().to_vector<float>(),
                                           values.grad().to_vector<float>()};
  };
  EXPECT_EQ(run(true), run(false));
  // An inactive key: the plain product.
  EXPECT_EQ(ops::sparse_dropout_matmul(a, DropoutKey{}, b).to_vector<float>(),
            ops::sparse_matmul(a, b).to_vector<float>());
  expect_error(
      [&] {
        ops::sparse_dropout_matmul(a, DropoutKey{1.0f, 0, 0}, b);
      },
      {"sparse_dropout_matmul", "outside [0, 1)"});
  expect_error(
      [&] {
        ops::sparse_dropout_matmul(a, key, Tensor::zeros({4, 2}));
      },
      {"sparse_dropout_matmul", "(4, 2)"});
}

TEST_P(SparseOnDevice, DropoutMatmulGradientsOfBAndTheValues) {
  std::mt19937_64 rng(11);
  const CsrMatrix a = CsrMatrix::from_dense(sparse_random(9, 14, rng, 0.3, DType::f64)).to(device());
  for (int64_t N : {4, 40})
    expect_gradients_match(
        "sparse_dropout_matmul b and values N=" + std::to_string(N),
        [&](const std::vector<Tensor>& in) {
          return ops::sparse_dropout_matmul(a.with_values(in[0]), DropoutKey{0.5f, 4, 4}, in[1]);
        },
        {a.values(), random_f64({14, N}, rng)});
}

TEST(SparseMatmul, ShapeAndTypeErrorsNameTheOperands) {
  const CsrMatrix a = CsrMatrix::from_dense(Tensor::full({2, 3}, 1.0));
  expect_error([&] { ops::sparse_matmul(a, Tensor::zeros({4, 2})); }, {"csr f32 cpu (2, 3) nnz 6", "(4, 2)"});
  EXPECT_THROW(ops::sparse_matmul(a, Tensor::zeros({3, 2}, DType::f64)), Error);
  EXPECT_THROW(ops::sparse_matmul(CsrMatrix(), Tensor::zeros({3, 2})), Error);
}

TEST(SparseFeatures, LinearAndDropoutLayersGiveTheDenseNumbers) {
  std::mt19937_64 rng(9);
  Generator init(0);
  const Linear lin(120, 16, true, init);
  const Tensor x = sparse_random(50, 120, rng, 0.05, DType::f32);
  const CsrMatrix xs = CsrMatrix::from_dense(x);
  EXPECT_EQ(lin.forward(xs).to_vector<float>(), lin.forward(x).to_vector<float>());
  EXPECT_THROW(lin.forward(CsrMatrix::from_dense(Tensor::full({2, 7}, 1.0))), Error);
  Dropout drop(0.5);
  Generator dense_gen(3), sparse_gen(3);
  EXPECT_EQ(drop.forward(Features(xs), sparse_gen).sparse().to_dense().to_vector<float>(),
            drop.forward(x, dense_gen).to_vector<float>());
  drop.eval();
  EXPECT_TRUE(drop.forward(xs, sparse_gen).values().same(xs.values()));
}

TEST(SparseFeatures, GATGradientsMatchTheDenseInput) {
  GeneratorOptions go;
  go.num_nodes = 40;
  go.avg_degree = 4;
  go.num_features = 30;
  go.num_classes = 3;
  go.val_size = 5;
  go.test_size = 5;
  go.train_per_class = 3;
  const Dataset data = generate_sbm(go);
  std::mt19937_64 rng(10);
  const Tensor x = sparse_random(40, 30, rng, 0.1, DType::f64);
  const Tensor upstream = random_tensor({40, 3}, rng);  // the logits' gradient
  GATConfig config{30, 3};
  config.dtype = DType::f64;
  Generator init(1);
  GAT model(config, init);
  std::vector<std::vector<double>> grads;
  for (const Features& features : {Features(x), Features(CsrMatrix::from_dense(x))}) {
    model.zero_grad();
    Generator gen(4);
    model.forward(features, data.graph, gen).backward(upstream);  // a value of its own for each element
    grads.push_back(model.conv1->lin->weight.grad().to_vector<double>());
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_NEAR(grads[0][i], grads[1][i], 1e-12) << i;
}

TEST(SparseFeatures, TrainingLossesMatchTheDenseRun) {
  GeneratorOptions go;
  go.num_nodes = 300;
  go.avg_degree = 6;
  go.num_features = 200;
  go.num_classes = 4;
  go.val_size = 60;
  go.test_size = 100;
  go.seed = 2;
  Dataset data = generate_sbm(go);
  std::mt19937_64 rng(11);
  data.x = sparse_random(300, 200, rng, 0.04, DType::f32);  // bag-of-words-like features
  std::vector<std::vector<double>> losses(2);
  double initial_loss = 0, trained_loss = 0;
  for (int sparse = 0; sparse < 2; ++sparse) {
    Generator gen(5);
    GAT model(GATConfig{200, 4}, gen);
    bool saw_sparse = false;
    ForwardFn forward = [&](const Features& x, const Graph& g, Generator& gn) {
      saw_sparse = saw_sparse || x.is_sparse();
      return model.forward(x, g, gn);
    };
    TrainOptions options;
    options.max_epochs = 8;
    options.sparse_max_density = sparse ? 0.1 : 0.0;
    if (sparse == 0) initial_loss = evaluate(model, forward, data, Features(data.x)).train.loss;
    train_node_classifier(model, forward, data, options, gen,
                          [&](const EpochStats& s) { losses[sparse].push_back(s.loss); });
    if (sparse == 0) trained_loss = evaluate(model, forward, data, Features(data.x)).train.loss;
    EXPECT_EQ(saw_sparse, sparse == 1);
  }
  ASSERT_EQ(losses[0].size(), 8u);
  ASSERT_EQ(losses[1].size(), 8u);
  for (size_t e = 0; e < 8; ++e) EXPECT_NEAR(losses[1][e], losses[0][e], 1e-5) << "epoch " << e + 1;
  // It trains: the eval-mode training loss has fallen (training losses carry dropout noise).
  EXPECT_LT(trained_loss, initial_loss);
}

// ---- CUDA against the CPU ----------------------------------------------------------------

using CudaSparse = CudaVsCpuTest;

namespace {
template <class T>
std::vector<T> host_vector(const Tensor& t) {
  return t.to(Device::cpu).to_vector<T>();
}
}  // namespace

TEST_F(CudaSparse, CsrMatrixMovesBetweenDevices) {
  std::mt19937_64 rng(1);
  const Tensor dense = sparse_random(50, 70, rng, 0.1, DType::f32);
  const CsrMatrix cpu = CsrMatrix::from_dense(dense);
  const CsrMatrix gpu = cpu.to(Device::cuda);
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_TRUE(gpu.t_entry().is_cuda());
  EXPECT_EQ(host_vector<float>(gpu.to_dense()), dense.to_vector<float>());
  const CsrMatrix built_on_gpu = CsrMatrix::from_dense(dense.to(Device::cuda));
  EXPECT_TRUE(built_on_gpu.is_cuda());
  EXPECT_EQ(host_vector<int32_t>(built_on_gpu.t_entry()), cpu.t_entry().to_vector<int32_t>());
  EXPECT_EQ(host_vector<float>(built_on_gpu.to(Device::cpu).values()), cpu.values().to_vector<float>());
}

TEST_F(CudaSparse, DropoutMasksAreTheCpuMasksBitForBit) {
  std::mt19937_64 rng(2);
  for (DType dtype : {DType::f32, DType::f64}) {
    const CsrMatrix cpu = CsrMatrix::from_dense(sparse_random(400, 300, rng, 0.05, dtype));
    const CsrMatrix gpu = cpu.to(Device::cuda);
    for (const DropoutKey& key : {DropoutKey{0.6f, 3, 0}, DropoutKey{0.1f, 99, 12345}}) {
      const Tensor want = ops::sparse_dropout(cpu, key).values(),
                   got = ops::sparse_dropout(gpu, key).values();
      if (dtype == DType::f32)
        EXPECT_EQ(host_vector<float>(got), want.to_vector<float>());
      else
        EXPECT_EQ(host_vector<double>(got), want.to_vector<double>());
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
        const std::string what = std::string(dtype_name(dtype)) + " N=" + std::to_string(N) + " density " +
                                 std::to_string(density);
        const CsrMatrix cpu =
            ops::sparse_dropout(CsrMatrix::from_dense(sparse_random(600, 350, rng, density, dtype)),
                                DropoutKey{0.5f, 1, 2});  // dropped zeros too
        const CsrMatrix gpu = cpu.to(Device::cuda);
        const Tensor b = random_tensor({350, N}, rng, -1, 1, dtype),
                     g = random_tensor({600, N}, rng, -1, 1, dtype);
        Tensor values_cpu = cpu.values().clone().set_requires_grad(), b_cpu = b.clone().set_requires_grad();
        Tensor values_gpu = gpu.values().clone().set_requires_grad(),
               b_gpu = b.to(Device::cuda).set_requires_grad();
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
  const Tensor b = random_tensor({40, 64}, rng, -1, 1, DType::f32),
               g = random_tensor({20000, 64}, rng, -1, 1, DType::f32);
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
      const Tensor b = random_tensor({8, N}, rng, -1, 1, dtype),
                   g = random_tensor({1200, N}, rng, -1, 1, dtype);
      Tensor b_cpu = b.clone().set_requires_grad(), b_gpu = b.to(Device::cuda).set_requires_grad();
      ops::sparse_matmul(cpu, b_cpu).backward(g);
      ops::sparse_matmul(gpu, b_gpu).backward(g.to(Device::cuda));
      EXPECT_LE(rel_error(b_gpu.grad(), b_cpu.grad()), 1e-5) << what;
      const std::vector<double> grad = host_vector<double>(b_gpu.grad().to(DType::f64));
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
  for (const auto& [rows, cols, density] :
       {std::tuple<int64_t, int64_t, double>{600, 350, 0.04}, {20000, 40, 0.25}}) {
    const CsrMatrix cpu = CsrMatrix::from_dense(sparse_random(rows, cols, rng, density, DType::f32));
    const CsrMatrix gpu = cpu.to(Device::cuda);
    const Tensor b = random_tensor({cols, 64}, rng, -1, 1, DType::f32),
                 g = random_tensor({rows, 64}, rng, -1, 1, DType::f32);
    const DropoutKey key{0.6f, 7, 11};
    auto run = [&](const CsrMatrix& a, Device device, bool fused) {
      Tensor values = a.values().clone().set_requires_grad(), w = b.to(device).set_requires_grad();
      const CsrMatrix x = a.with_values(values);
      Tensor out =
          fused ? ops::sparse_dropout_matmul(x, key, w) : ops::sparse_matmul(ops::sparse_dropout(x, key), w);
      out.backward(g.to(device));
      return std::vector<Tensor>{out.to(Device::cpu), w.grad().to(Device::cpu),
                                 values.grad().to(Device::cpu)};
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
  const CsrMatrix a =
      CsrMatrix::from_dense(sparse_random(3000, 1400, rng, 0.02, DType::f32)).to(Device::cuda);
  const Tensor g = random_tensor({3000, 64}, rng, -1, 1, DType::f32, Device::cuda);
  Tensor w = random_tensor({1400, 64}, rng, -1, 1, DType::f32, Device::cuda).set_requires_grad();
  std::vector<std::vector<float>> outs, grads;
  for (int run = 0; run < 2; ++run) {
    w.zero_grad();
    Tensor out = ops::sparse_matmul(a, w);
    out.backward(g);
    outs.push_back(host_vector<float>(out));
    grads.push_back(host_vector<float>(w.grad()));
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(grads[0], grads[1]);
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
