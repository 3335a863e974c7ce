// Tests of the elementwise, shape and reduction ops: values, gradient checks for every
// differentiable input, dropout masks, and the error messages (the CPU); head_mean, empty
// tensors, and the pointwise functions of unary.h against PyTorch's values at their edges, with
// gradient checks near them, on each device; and beyond the backend table (test_backend_ops.cpp),
// the CUDA backend against the CPU: dropout masks bit for bit, batch_norm's running statistics,
// index_rows on integers and its bound check, device mismatches.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/batch_norm.h"
#include "gat/framework/ops/concat.h"
#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/head_mean.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/losses.h"
#include "gat/framework/ops/narrow.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/ops/scatter_add.h"
#include "gat/framework/ops/sparse_dropout.h"
#include "gat/framework/ops/transpose.h"
#include "gat/framework/ops/unary.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/sparse.h"
#include "gat_testing.h"

using namespace gat;
using namespace gat::testing;

namespace {

using Inputs = std::vector<Tensor>;

}  // namespace

// ---- values ---------------------------------------------------------------------------------

TEST(OpsValues, Arithmetic) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f64({0.5, -1, 2, 0, 10, -3}, {2, 3});
  EXPECT_EQ(ops::add(a, b).to_vector<double>(), (std::vector<double>{1.5, 1, 5, 4, 15, 3}));
  EXPECT_EQ(ops::mul(a, b).to_vector<double>(), (std::vector<double>{0.5, -2, 6, 0, 50, -18}));
  EXPECT_EQ(ops::scale(a, -2).to_vector<double>(), (std::vector<double>{-2, -4, -6, -8, -10, -12}));
  Tensor bias = f64({10, 20, 30}, {3});
  EXPECT_EQ(ops::add_bias(a, bias).to_vector<double>(), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(ops::add_bias(a, bias).shape(), (Shape{2, 3}));
}

TEST(OpsValues, ActivationsInF32AndF64) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor x = f64({-2, -0.5, 0, 1.5}, {2, 2}).to(dtype);
    EXPECT_EQ(ops::relu(x).to(DType::f64).to_vector<double>(), (std::vector<double>{0, 0, 0, 1.5}));
    EXPECT_EQ(ops::leaky_relu(x, 0.25).to(DType::f64).to_vector<double>(),
              (std::vector<double>{-0.5, -0.125, 0, 1.5}));
    std::vector<double> e = ops::elu(x, 2.0).to(DType::f64).to_vector<double>();
    const double tol = dtype == DType::f32 ? 1e-6 : 1e-15;
    EXPECT_NEAR(e[0], 2.0 * std::expm1(-2.0), tol);
    EXPECT_NEAR(e[1], 2.0 * std::expm1(-0.5), tol);
    EXPECT_EQ(e[2], 0.0);
    EXPECT_EQ(e[3], 1.5);
    EXPECT_EQ(ops::elu(x).dtype(), dtype);
  }
}

TEST(OpsValues, VectorisedExpAndExpm1AreWithinTwoUlp) {
  // Every 64th float of [-104, 89] against exp and expm1 in double, rounded to float.
  const auto ulps = [](float a, float b) {
    int32_t ia, ib;
    std::memcpy(&ia, &a, sizeof ia);
    std::memcpy(&ib, &b, sizeof ib);
    return (ia < 0) != (ib < 0) ? (a == b ? 0 : INT32_MAX) : std::abs(ia - ib);  // same sign
  };
  const auto from_magnitude = [](uint32_t magnitude, bool negative) {  // |x|'s bits and a sign
    const uint32_t bits = magnitude | (negative ? 0x80000000u : 0u);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    return x;
  };
  int worst_exp = 0, worst_expm1 = 0;
  int64_t checked = 0;
  for (const auto& [negative, limit] : {std::pair<bool, float>{true, 104.0f}, {false, 89.0f}}) {
    uint32_t limit_bits;
    std::memcpy(&limit_bits, &limit, sizeof limit_bits);
    for (uint32_t magnitude = 0; magnitude <= limit_bits; magnitude += 64, ++checked) {
      const float x = from_magnitude(magnitude, negative);
      const float exp_ref = static_cast<float>(std::exp(static_cast<double>(x)));
      const float expm1_ref = static_cast<float>(std::expm1(static_cast<double>(x)));
      // Below the smallest normal result: flushed to 0 (exp) and -1 (expm1).
      if (x >= ops::detail::kExpMin)
        worst_exp = std::max(worst_exp, ulps(ops::detail::vec_exp(x), exp_ref));
      else
        ASSERT_EQ(ops::detail::vec_exp(x), 0.0f) << x;
      worst_expm1 = std::max(worst_expm1, ulps(ops::detail::vec_expm1(x), expm1_ref));
      ASSERT_LE(worst_expm1, 2) << "expm1 at x = " << x;
      ASSERT_LE(worst_exp, 2) << "exp at x = " << x;
    }
  }
  EXPECT_GT(checked, 30000000);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ops::detail::vec_exp(-inf), 0.0f);
  EXPECT_EQ(ops::detail::vec_exp(inf), inf);
  EXPECT_EQ(ops::detail::vec_exp(0.0f), 1.0f);
  EXPECT_EQ(ops::detail::vec_expm1(-inf), -1.0f);
  EXPECT_EQ(ops::detail::vec_expm1(inf), inf);
  EXPECT_EQ(ops::detail::vec_expm1(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(ops::detail::vec_exp(std::nanf(""))));
  EXPECT_TRUE(std::isnan(ops::detail::vec_expm1(std::nanf(""))));
  EXPECT_LT(ops::detail::vec_exp(88.72283f), inf);  // the largest x with a finite exp
}

TEST(OpsValues, Reductions) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = ops::sum(x);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 21);
  EXPECT_EQ(ops::mean(x).item(), 3.5);
  EXPECT_EQ(ops::sum(x, 0).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(ops::sum(x, -1).to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(ops::sum(x, -1).shape(), (Shape{2}));
  EXPECT_EQ(ops::mean(x, 1).to_vector<double>(), (std::vector<double>{2, 5}));
  Tensor y = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  EXPECT_EQ(ops::sum(y, 1).to_vector<double>(), (std::vector<double>{4, 6, 12, 14}));
  EXPECT_EQ(ops::sum(y, 1).shape(), (Shape{2, 2}));
  // An empty axis sums to zero; f32 sums accumulate in double.
  EXPECT_EQ(ops::sum(Tensor::zeros({3, 0}), 1).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  // Long axes are added in chunks: integers keep every partial sum exact.
  std::vector<double> ramp(60000);
  for (size_t k = 0; k < ramp.size(); ++k) ramp[k] = static_cast<double>(k / 3) + static_cast<double>(k % 3);
  EXPECT_EQ(ops::sum(f64(ramp, {20000, 3}), 0).to_vector<double>(),
            (std::vector<double>{199990000, 200010000, 200030000}));
  EXPECT_EQ(ops::sum(f64(ramp, {60000})).item(), 600030000);
  Tensor big = Tensor::full({1 << 20}, 0.1, DType::f32);
  EXPECT_NEAR(ops::sum(big).item(), 0.1f * (1 << 20), 1e-6 * (1 << 20) * 0.1);
}

TEST(OpsValues, SumsDoNotDependOnTheThreadCount) {
  std::mt19937_64 rng(1);
  Tensor x = random_tensor({400000}, rng, -1.0, 1.0, DType::f32);
  auto sums = [&] {
    std::vector<float> all = ops::sum(x).to_vector<float>();
    std::vector<float> cols = ops::sum(x.view({40000, 10}), 0).to_vector<float>();
    all.insert(all.end(), cols.begin(), cols.end());
    return all;
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> serial = sums();
  omp_set_num_threads(5);
  const std::vector<float> parallel = sums();
  omp_set_num_threads(threads);
  EXPECT_EQ(serial, parallel);
}

// The CPU adds up to 16 neighbouring outputs side by side; each output must still be its own
// column added in row order within chunks of 8192 rows, then the chunks in order. 37 columns make
// blocks of 16, 16 and 5; 20000 rows make three chunks. Magnitudes from 2^-40 to 2^40 make the
// rounding depend on the order of the adds.
TEST(OpsValues, AxisSumsAddEachColumnInRowOrder) {
  constexpr int64_t outer = 2, rows = 20000, cols = 37, chunk = 8192;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<double> v(static_cast<size_t>(outer * rows * cols));
  for (double& e : v) e = std::ldexp(unit(rng), exponent(rng));
  std::vector<double> expected;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < cols; ++c) {
      double total = 0.0;
      for (int64_t begin = 0; begin < rows; begin += chunk) {
        double part = 0.0;
        for (int64_t r = begin; r < std::min(rows, begin + chunk); ++r)
          part += v[static_cast<size_t>((o * rows + r) * cols + c)];
        total += part;
      }
      expected.push_back(total);
    }
  EXPECT_EQ(ops::sum(f64(v, {outer, rows, cols}), 1).to_vector<double>(), expected);
}

TEST(OpsValues, ReshapeIsAView) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = ops::reshape(x, {3, -1});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.raw_data(), x.raw_data());
}

TEST(OpsValues, ConcatAlongEveryAxis) {
  Tensor a = f64({1, 2, 3, 4}, {2, 2});
  Tensor b = f64({5, 6}, {2, 1});
  Tensor c = f64({7, 8}, {1, 2});
  Tensor ab = ops::concat({a, b}, 1);
  EXPECT_EQ(ab.shape(), (Shape{2, 3}));
  EXPECT_EQ(ab.to_vector<double>(), (std::vector<double>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(ops::concat({a, b}, -1).to_vector<double>(), ab.to_vector<double>());
  Tensor ac = ops::concat({a, c}, 0);
  EXPECT_EQ(ac.shape(), (Shape{3, 2}));
  EXPECT_EQ(ac.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 7, 8}));
  Tensor ints =
      ops::concat({Tensor::from_vector<int32_t>({1, 2}, {2}), Tensor::from_vector<int32_t>({3}, {1})}, 0);
  EXPECT_EQ(ints.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));
}

TEST(OpsValues, IndexRowsGathersAndScattersRepeatsInOrder) {
  Tensor x = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Tensor index = Tensor::from_vector<int32_t>({2, 0, 2, 3}, {4});
  Tensor out = ops::index_rows(x.detach().set_requires_grad(), index);
  EXPECT_EQ(out.shape(), (Shape{4, 2}));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{20, 21, 0, 1, 20, 21, 30, 31}));

  Tensor leaf = x.detach().set_requires_grad();
  ops::index_rows(leaf, index).backward(f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  // Row 2 is picked twice: its gradient is the sum of rows 0 and 2 of g; row 1 gets zeros.
  EXPECT_EQ(leaf.grad().to_vector<double>(), (std::vector<double>{3, 4, 0, 0, 6, 8, 7, 8}));

  ops::RowIndex plan(index);
  EXPECT_EQ(plan.order().to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 2, 3}));
  EXPECT_EQ(plan.rows().to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(plan.run_ptr().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 3, 4}));

  // Labels are i32: the gather works for any dtype.
  Tensor labels = Tensor::from_vector<int32_t>({5, 6, 7, 8}, {4});
  EXPECT_EQ(ops::index_rows(labels, plan).to_vector<int32_t>(), (std::vector<int32_t>{7, 5, 7, 8}));
  // No indices: an empty result of the right shape.
  Tensor none = ops::index_rows(x, Tensor::zeros({0}, DType::i32));
  EXPECT_EQ(none.shape(), (Shape{0, 2}));
}

// A gather-only plan (RowIndex::gather_only: no sort for the backward) gathers as the full one
// and checks the same, but serves no backward: index_rows refuses it for an x that needs a
// gradient, scatter_add always. index_rows(x, Tensor) builds one only without a gradient to record.
TEST(OpsValues, AGatherOnlyRowIndexGathersButServesNoBackward) {
  Tensor x = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Tensor index = Tensor::from_vector<int32_t>({2, 0, 2, 3}, {4});
  const ops::RowIndex plan = ops::RowIndex::gather_only(index, Device::cpu);
  EXPECT_FALSE(plan.has_backward_plan());
  EXPECT_TRUE(ops::RowIndex(index).has_backward_plan());
  EXPECT_EQ(plan.max_index(), 3);
  EXPECT_EQ(plan.max_position(), 3);
  EXPECT_EQ(ops::index_rows(x, plan).to_vector<double>(),
            (std::vector<double>{20, 21, 0, 1, 20, 21, 30, 31}));
  expect_error([&] { ops::index_rows(x.rows(0, 3), plan); }, {"index 3", "length 3"});
  expect_error([&] { ops::index_rows(x.detach().set_requires_grad(), plan); },
               {"index_rows", "needs a gradient", "gather_only"});
  expect_error([&] { ops::scatter_add(x, plan, 4); }, {"scatter_add", "gather_only"});
  expect_error(
      [&] {
        ops::RowIndex::gather_only(Tensor::from_vector<int32_t>({1, -2}, {2}), Device::cpu);
      },
      {"index -2", "position 1", "negative"});
  expect_error([&] { ops::RowIndex::gather_only(f64({1}, {1}), Device::cpu); }, {"index_rows", "index"});
  // An unchecked plan (the loader's sampled ids) serves the kernel alone: the op cannot check it.
  expect_error([&] { ops::index_rows(x, ops::RowIndex::unchecked(index)); }, {"index_rows", "unchecked"});
  expect_error([&] { ops::RowIndex::unchecked(f64({1}, {1})); }, {"RowIndex::unchecked", "index"});
  // Under NoGradGuard an x that requires grad records nothing, so the Tensor overload gathers.
  autograd::NoGradGuard no_grad;
  EXPECT_EQ(ops::index_rows(x.detach().set_requires_grad(), index).to_vector<double>(),
            (std::vector<double>{20, 21, 0, 1, 20, 21, 30, 31}));
}

TEST(OpsValues, MaskToIndex) {
  EXPECT_EQ(ops::mask_to_index(std::vector<bool>{true, false, false, true, true}).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 3, 4}));
  Tensor t = ops::mask_to_index(std::vector<uint8_t>{0, 2, 0, 1});
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(ops::mask_to_index(std::vector<bool>{false, false}).shape(), (Shape{0}));
}

// ---- dropout ---------------------------------------------------------------------------------

TEST(OpsDropout, PhiloxMatchesTheRandom123KnownAnswers) {
  // Random123's kat_vectors for philox4x32-10: counter words (c0..c3), key words (k0, k1).
  struct Kat {
    uint64_t counter, stream, seed;
    PhiloxBlock expected;
  };
  const Kat kats[] = {
      {0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {~0ull, ~0ull, ~0ull, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {0x85a308d3243f6a88ull,
       0x0370734413198a2eull,
       0x299f31d0a4093822ull,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const PhiloxBlock b = philox4x32(k.seed, k.stream, k.counter);
    EXPECT_EQ(b.w0, k.expected.w0);
    EXPECT_EQ(b.w1, k.expected.w1);
    EXPECT_EQ(b.w2, k.expected.w2);
    EXPECT_EQ(b.w3, k.expected.w3);
  }
}

TEST(OpsDropout, OneBlockServesFourElementsIndependently) {
  const DropoutKey key{0.5f, 3, 11};
  int64_t same_as_next = 0;
  const int64_t blocks = 50000;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const unsigned kept = key.keep4(static_cast<uint64_t>(blk));
    for (unsigned w = 0; w < 4; ++w)
      ASSERT_EQ(((kept >> w) & 1u) != 0, key.keep(4 * static_cast<uint64_t>(blk) + w)) << blk;
    same_as_next += ((kept ^ (kept >> 1)) & 1u) == 0;  // words 0 and 1 agree
  }
  // Independent words agree half the time at p = 0.5 (5 sigma ~ 0.011).
  EXPECT_NEAR(static_cast<double>(same_as_next) / blocks, 0.5, 0.011);
}

namespace {
// (2u + 1) / 2^25 for the first word of b whose top 24 bits u are below 2^23 (exact in float):
// half a threshold step above uniform24 of that word.
float half_step_above_a_draw(const PhiloxBlock& b) {
  for (unsigned k = 0; k < 4; ++k) {
    const uint32_t u = b.word(k) >> 8;
    if (u < (1u << 23)) return (2.0f * static_cast<float>(u) + 1.0f) / 33554432.0f;
  }
  ADD_FAILURE() << "no word of the block is below 1/2: pick another block";
  return 0.5f;
}
}  // namespace

TEST(OpsDropout, BatchedDrawsMatchKeep4OnEverySimdPath) {
  // Counters past 2^32, streams and seeds with high words, rates at the edges of a threshold
  // step (p 2^24 an integer and not), batch lengths that leave partial SIMD steps.
  std::mt19937_64 rng(5);
  std::vector<uint64_t> blocks(1000);
  for (size_t k = 0; k < blocks.size(); ++k) blocks[k] = k % 3 == 0 ? k : rng();
  const float rates[] = {0.0f, 0.5f, 0.6f, 0.1f, 1.0f - 1.0f / 16777216.0f, 3.0f / 16777216.0f};
  const DropoutKey keys[] = {{0.6f, 0, 0}, {0.6f, ~0ull, ~0ull}, {0.6f, 0x123456789abcdefull, 1ull << 40}};
  using detail::Keep4Path;
  int paths = 0;
  for (Keep4Path path : {Keep4Path::scalar, Keep4Path::avx2, Keep4Path::avx512}) {
    if (!detail::keep4_path_supported(path)) continue;
    ++paths;
    for (DropoutKey key : keys)
      for (int r = 0; r < 9; ++r) {
        // Rates 6 and 7 sit exactly on a drawn word (uniform24 == p keeps): word 0 of block 5
        // and word 3 of block 16 (the second SIMD vector). Rate 8 sits half a step above a
        // drawn word of block 5 (uniform24 < p drops: the SIMD threshold must round p 2^24 up).
        const PhiloxBlock b5 = philox4x32(key.seed, key.stream, blocks[5]);
        const PhiloxBlock b16 = philox4x32(key.seed, key.stream, blocks[16]);
        const float p = r < 6   ? rates[r]
                        : r < 8 ? uniform24(r == 6 ? b5.w0 : b16.w3)
                                : half_step_above_a_draw(b5);
        if (!(p < 1.0f)) continue;
        key.p = p;
        for (int64_t n : {1, 7, 8, 15, 16, 17, 1000}) {
          std::vector<uint8_t> keep(static_cast<size_t>(n), 0xff);
          detail::keep4_blocks_on(path, key, blocks.data(), n, keep.data());
          for (int64_t k = 0; k < n; ++k)
            ASSERT_EQ(keep[k], key.keep4(blocks[k]))
                << "path " << static_cast<int>(path) << " p " << p << " n " << n << " block " << k;
        }
      }
  }
  EXPECT_GE(paths, 1);
  // The consecutive-block form and the parallel whole mask read the same bits.
  const DropoutKey key{0.6f, 17, 3};
  std::vector<uint8_t> range(300);
  keep4_range(key, (1ull << 32) - 100, 300, range.data());
  for (int64_t k = 0; k < 300; ++k) ASSERT_EQ(range[k], key.keep4((1ull << 32) - 100 + k)) << k;
  const int64_t n = 1 << 20;
  const KeepMask mask(key, n + 3);
  for (int64_t i = 0; i < n + 3; i += 997) ASSERT_EQ(mask[i], key.keep(static_cast<uint64_t>(i))) << i;
  for (int64_t i = n - 5; i < n + 3; ++i) ASSERT_EQ(mask[i], key.keep(static_cast<uint64_t>(i))) << i;
}

TEST(OpsDropout, MaskRateScalingAndRegeneratedBackward) {
  const int64_t n = 200000;
  const DropoutKey key{0.3f, 42, 7};
  Tensor x = Tensor::full({n}, 2.0, DType::f64).set_requires_grad();
  Tensor out = ops::dropout(x, key);
  std::vector<double> v = out.to_vector<double>();
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(v[i] != 0.0, key.keep(static_cast<uint64_t>(i))) << "element " << i;
    if (v[i] != 0.0) {
      ++kept;
      ASSERT_NEAR(v[i], 2.0 / 0.7, 1e-7) << "element " << i;  // p is a float: 1 - 0.3f ~ 0.7
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.005);
  // The backward pass applies the same mask and scale to the gradient (a value of its own for
  // each element).
  std::vector<double> upstream(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) upstream[i] = 1.0 + static_cast<double>(i % 7);
  out.backward(Tensor::from_vector(upstream, {n}));
  std::vector<double> g = x.grad().to_vector<double>();
  for (int64_t i = 0; i < n; ++i) ASSERT_DOUBLE_EQ(g[i], upstream[i] * (v[i] / 2.0)) << "element " << i;
  // Deterministic: the same key gives the same output again.
  EXPECT_EQ(ops::dropout(x, key).to_vector<double>(), v);
}

TEST(OpsDropout, StreamsAndSeedsGiveDifferentMasks) {
  Tensor x = Tensor::full({4096}, 1.0, DType::f32);
  std::vector<float> base = ops::dropout(x, DropoutKey{0.5f, 1, 0}).to_vector<float>();
  EXPECT_NE(ops::dropout(x, DropoutKey{0.5f, 1, 1}).to_vector<float>(), base);
  EXPECT_NE(ops::dropout(x, DropoutKey{0.5f, 2, 0}).to_vector<float>(), base);
  Generator gen(9);
  DropoutKey k1 = gen.dropout_key(0.5f), k2 = gen.dropout_key(0.5f);
  EXPECT_NE(ops::dropout(x, k1).to_vector<float>(), ops::dropout(x, k2).to_vector<float>());
}

TEST(OpsDropout, InactiveKeyIsIdentityAndBadRateThrows) {
  Tensor x = Tensor::full({3}, 1.0, DType::f32);
  EXPECT_TRUE(ops::dropout(x, DropoutKey{}).same(x));
  expect_error([&] { ops::dropout(x, DropoutKey{1.0f, 0, 0}); }, {"dropout", "p = 1"});
  expect_error([&] { ops::dropout(x, DropoutKey{-0.5f, 0, 0}); }, {"dropout", "outside [0, 1)"});
  // A key made while a CUDA graph records carries a device pointer the CPU cannot read.
  const uint64_t device_base = 0;
  const DropoutKey recorded{0.5f, 0, 0, &device_base};
  expect_error([&] { ops::dropout(x, recorded); }, {"dropout", "recorded for a CUDA graph"});
  const CsrMatrix sparse = CsrMatrix::from_dense(Tensor::full({2, 3}, 1.0, DType::f32));
  expect_error([&] { ops::sparse_dropout(sparse, recorded); },
               {"sparse_dropout", "recorded for a CUDA graph"});
}

// ---- elu_dropout ------------------------------------------------------------------------------

TEST(OpsEluDropout, ForwardIsEluThenDropoutBitForBit) {
  std::mt19937_64 rng(31);
  for (DType dtype : {DType::f32, DType::f64})
    for (const DropoutKey& key : {DropoutKey{0.35f, 7, 2}, DropoutKey{}})
      for (int64_t n : {int64_t{13}, int64_t{100003}}) {  // one thread; several, n not a multiple of 4
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (key.active() ? " p 0.35 " : " inactive ") +
                     std::to_string(n));
        const Tensor x = random_tensor({n}, rng, -20.0, 5.0, dtype);
        EXPECT_TRUE(bitwise_equal(ops::elu_dropout(x, 1.3, key), ops::dropout(ops::elu(x, 1.3), key)));
      }
}

// The gradient from the output agrees with the chain's (from the input) to a few ulp of
// alpha * keep_scale * g, and exactly where x > 0 or the element is dropped.
TEST(OpsEluDropout, BackwardIsTheChainsToRounding) {
  std::mt19937_64 rng(32);
  const double alpha = 1.3;
  const int64_t n = 100003;
  for (DType dtype : {DType::f32, DType::f64})
    for (const DropoutKey& key : {DropoutKey{0.35f, 7, 2}, DropoutKey{}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (key.active() ? " p 0.35" : " inactive"));
      const double keep_scale = key.active() ? ops::dropout_keep_scale(key) : 1.0;
      const double ulp = dtype == DType::f32 ? 0x1p-23 : 0x1p-52;
      const Tensor x = random_tensor({n}, rng, -20.0, 5.0, dtype),
                   g = random_tensor({n}, rng, -1.0, 1.0, dtype);
      Tensor fused_x = x.detach().set_requires_grad(), chain_x = x.detach().set_requires_grad();
      ops::elu_dropout(fused_x, alpha, key).backward(g);
      ops::dropout(ops::elu(chain_x, alpha), key).backward(g);
      const std::vector<double> xs = host_f64(x), gs = host_f64(g);
      const std::vector<double> fused = host_f64(fused_x.grad()), chain = host_f64(chain_x.grad());
      int64_t negative_kept = 0;
      for (int64_t i = 0; i < n; ++i) {
        const bool kept = !key.active() || key.keep(static_cast<uint64_t>(i));
        if (!kept || xs[i] > 0) {
          ASSERT_EQ(fused[i], chain[i]) << "element " << i << " x " << xs[i];
          continue;
        }
        ++negative_kept;
        ASSERT_LE(std::abs(fused[i] - chain[i]), 4 * ulp * alpha * keep_scale * std::abs(gs[i]))
            << "element " << i << " x " << xs[i] << ": " << fused[i] << " against " << chain[i];
      }
      EXPECT_GT(negative_kept, n / 3);
    }
}

TEST(OpsDropout, GeneratorRecordsStreamsRelativeToADeviceCounter) {
  Generator gen(7);
  gen.dropout_key(0.5f);
  gen.dropout_key(0.5f);           // next stream: 2
  const uint64_t device_base = 0;  // stands for the device counter; never read on the host
  gen.begin_device_streams(&device_base);
  const DropoutKey a = gen.dropout_key(0.5f), b = gen.dropout_key(0.3f);
  EXPECT_EQ(a.stream, 0u);
  EXPECT_EQ(b.stream, 1u);
  EXPECT_EQ(a.stream_base, &device_base);
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(gen.end_device_streams(), 2u);  // the streams one replay draws
  EXPECT_EQ(gen.next_stream(), 2u);         // recording itself draws nothing
  gen.skip_streams(2);                      // a replay happened
  const DropoutKey c = gen.dropout_key(0.5f);
  EXPECT_EQ(c.stream, 4u);
  EXPECT_EQ(c.stream_base, nullptr);
}

// ---- gradient checks (f64, central differences) ------------------------------------------------

class OpsGradcheck : public ::testing::Test {
 protected:
  std::mt19937_64 rng{2024};
  Tensor rand(const Shape& shape, double lo = -1.0, double hi = 1.0) {
    return random_tensor(shape, rng, lo, hi);
  }
};

TEST_F(OpsGradcheck, Arithmetic) {
  expect_gradients_match("add", [](const Inputs& in) { return ops::add(in[0], in[1]); },
                         {rand({3, 4}), rand({3, 4})});
  expect_gradients_match("mul", [](const Inputs& in) { return ops::mul(in[0], in[1]); },
                         {rand({3, 4}), rand({3, 4})});
  expect_gradients_match("scale", [](const Inputs& in) { return ops::scale(in[0], -1.75); }, {rand({5})});
  expect_gradients_match("add_bias", [](const Inputs& in) { return ops::add_bias(in[0], in[1]); },
                         {rand({2, 3, 4}), rand({4})});
  expect_gradients_match("add_bias 1-d", [](const Inputs& in) { return ops::add_bias(in[0], in[1]); },
                         {rand({4}), rand({4})});
}

TEST_F(OpsGradcheck, TensorUsedTwice) {
  expect_gradients_match("mul(x, x)", [](const Inputs& in) { return ops::mul(in[0], in[0]); },
                         {rand({3, 4})});
  expect_gradients_match("add(x, x)", [](const Inputs& in) { return ops::add(in[0], in[0]); },
                         {rand({3, 4})});
  expect_gradients_match("concat(x, x)",
                         [](const Inputs& in) {
                           return ops::concat({in[0], in[0]}, 1);
                         },
                         {rand({3, 2})});
  expect_gradients_match("x * relu(x) + x",
                         [](const Inputs& in) { return ops::add(ops::mul(in[0], ops::relu(in[0])), in[0]); },
                         {rand({6})});
  // The analytic value too: d x of x * x for the upstream gradient u is 2 x u.
  Tensor x = rand({4}).set_requires_grad();
  const Tensor u = rand({4});
  ops::mul(x, x).backward(u);
  std::vector<double> xv = x.to_vector<double>(), uv = u.to_vector<double>(),
                      g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(g[i], 2 * xv[i] * uv[i]);
}

TEST_F(OpsGradcheck, Activations) {
  expect_gradients_match("relu", [](const Inputs& in) { return ops::relu(in[0]); }, {rand({4, 5})});
  expect_gradients_match("leaky_relu", [](const Inputs& in) { return ops::leaky_relu(in[0], 0.2); },
                         {rand({4, 5})});
  expect_gradients_match("elu", [](const Inputs& in) { return ops::elu(in[0], 1.3); }, {rand({4, 5}, -3, 2)});
}

TEST_F(OpsGradcheck, Dropout) {
  const DropoutKey key{0.4f, 11, 3};
  expect_gradients_match("dropout", [key](const Inputs& in) { return ops::dropout(in[0], key); },
                         {rand({6, 7})});
}

TEST_F(OpsGradcheck, EluDropout) {
  // Both sides, values near 0 (further from it than the step) and very negative ones, where exp(x)
  // is tiny and the gradient from the output, out + alpha * keep_scale, nearly cancels.
  const Tensor edges = f64({-40, -20, -8, -1.5, -0.4, -1e-3, -2e-5, 2e-5, 1e-3, 0.7, 1.1, 3}, {3, 4});
  const DropoutKey active{0.4f, 11, 5};
  for (double alpha : {1.0, 1.3})
    for (const DropoutKey& key : {active, DropoutKey{}}) {
      const std::string what =
          "elu_dropout alpha " + std::to_string(alpha) + (key.active() ? ", p 0.4" : ", inactive");
      auto f = [alpha, key](const Inputs& in) { return ops::elu_dropout(in[0], alpha, key); };
      expect_gradients_match(what + ", edge values", f, {edges});
      expect_gradients_match(what, f, {rand({6, 7}, -3, 2)});
    }
}

// The checker itself: it catches a wrong gradient in every element, and GAT_GRADCHECK_SAMPLE (set
// for compute-sanitizer runs) narrows it to the elements asked for without blinding it.
TEST(Gradcheck, CatchesAWrongGradientWhetherItChecksEveryElementOrASample) {
  auto slope_claimed_twice = [](const Inputs& in) {  // y = x, whose backward claims dy/dx = 2
    return autograd::record("wrong slope", in[0].detach().clone(), {in[0]},
                            [](const Tensor& g) { return std::vector<Tensor>{ops::scale(g, 2.0)}; });
  };
  std::mt19937_64 rng(7);
  const Tensor x = random_tensor({5, 7}, rng);
  {
    const ScopedEnv every_element("GAT_GRADCHECK_SAMPLE", std::nullopt);
    const gat::testing::GradcheckReport every = gat::testing::gradcheck(slope_claimed_twice, {x});
    EXPECT_EQ(every.elements, 35);
    EXPECT_NEAR(every.worst_error, 0.5, 1e-6);  // |2R - R| / |2R|
  }
  const ScopedEnv three("GAT_GRADCHECK_SAMPLE", "3");
  const gat::testing::GradcheckReport sampled = gat::testing::gradcheck(slope_claimed_twice, {x});
  EXPECT_EQ(sampled.elements, 3);
  EXPECT_NEAR(sampled.worst_error, 0.5, 1e-6);
}

TEST(Gradcheck, ASampleSpreadsFromTheFirstElementToTheLast) {
  using gat::testing::elements_to_check;
  EXPECT_EQ(elements_to_check(10, 3), (std::vector<size_t>{0, 4, 9}));
  EXPECT_EQ(elements_to_check(10, 1), (std::vector<size_t>{0}));
  EXPECT_EQ(elements_to_check(4, 0), (std::vector<size_t>{0, 1, 2, 3}));  // unset: every element
  EXPECT_EQ(elements_to_check(4, 9), (std::vector<size_t>{0, 1, 2, 3}));  // more than there are
  EXPECT_TRUE(elements_to_check(0, 2).empty());
  for (const char* bad : {"0", "-2", "3x", "many"}) {
    const ScopedEnv sample("GAT_GRADCHECK_SAMPLE", bad);
    EXPECT_NONFATAL_FAILURE(EXPECT_EQ(gat::testing::gradcheck_sample_from_env(), 0), "positive count");
  }
  const ScopedEnv unset("GAT_GRADCHECK_SAMPLE", std::nullopt);
  EXPECT_EQ(gat::testing::gradcheck_sample_from_env(), 0);
}

TEST(ScopedEnv, RestoresTheOldValueOrItsAbsence) {
  const char* name = "GAT_TEST_SCOPED_ENV";
  ::unsetenv(name);
  {
    const ScopedEnv set(name, "inner");
    EXPECT_STREQ(std::getenv(name), "inner");
  }
  EXPECT_EQ(std::getenv(name), nullptr);
  ::setenv(name, "outer", 1);
  {
    const ScopedEnv unset(name, std::nullopt);
    EXPECT_EQ(std::getenv(name), nullptr);
  }
  EXPECT_STREQ(std::getenv(name), "outer");
  ::unsetenv(name);
}

TEST_F(OpsGradcheck, ShapeOps) {
  expect_gradients_match("reshape",
                         [](const Inputs& in) {
                           return ops::reshape(in[0], {-1, 2});
                         },
                         {rand({2, 3, 2})});
  expect_gradients_match("concat axis 1",
                         [](const Inputs& in) {
                           return ops::concat({in[0], in[1], in[2]}, 1);
                         },
                         {rand({2, 1, 3}), rand({2, 4, 3}), rand({2, 2, 3})});
  expect_gradients_match("concat axis 0",
                         [](const Inputs& in) {
                           return ops::concat({in[0], in[1]}, 0);
                         },
                         {rand({2, 3}), rand({1, 3})});
  expect_gradients_match("concat axis -1",
                         [](const Inputs& in) {
                           return ops::concat({in[0], in[1]}, -1);
                         },
                         {rand({3, 2}), rand({3, 1})});
  Tensor index = Tensor::from_vector<int32_t>({4, 1, 4, 0, 4, 2}, {6});
  expect_gradients_match("index_rows", [index](const Inputs& in) { return ops::index_rows(in[0], index); },
                         {rand({5, 2, 3})});
}

TEST_F(OpsGradcheck, Reductions) {
  expect_gradients_match("sum", [](const Inputs& in) { return ops::sum(in[0]); }, {rand({3, 4})});
  expect_gradients_match("mean", [](const Inputs& in) { return ops::mean(in[0]); }, {rand({3, 4})});
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    expect_gradients_match("sum axis " + std::to_string(axis),
                           [axis](const Inputs& in) { return ops::sum(in[0], axis); }, {rand({2, 3, 4})});
    expect_gradients_match("mean axis " + std::to_string(axis),
                           [axis](const Inputs& in) { return ops::mean(in[0], axis); }, {rand({2, 3, 4})});
  }
}

TEST_F(OpsGradcheck, AChainOfOpsAsInAGatLayer) {
  // heads concatenated, bias, ELU, dropout, rows of the training set, mean loss.
  const DropoutKey key{0.2f, 5, 1};
  Tensor train = ops::mask_to_index(std::vector<bool>{true, false, true, true, false});
  expect_gradients_match(
      "chain",
      [key, train](const Inputs& in) {
        Tensor h = ops::concat({ops::leaky_relu(in[0], 0.2), ops::scale(in[1], 0.5)}, -1);  // (5, 4)
        h = ops::dropout(ops::elu(ops::add_bias(h, in[2])), key);
        return ops::mean(ops::sum(ops::mul(ops::index_rows(h, train), ops::reshape(in[3], {3, 4})), 1));
      },
      {rand({5, 1}), rand({5, 3}), rand({4}), rand({12})});
}

TEST_F(OpsGradcheck, GradientsOnlyForInputsThatRequireThem) {
  Tensor a = rand({3}).set_requires_grad();
  Tensor b = rand({3});
  const Tensor u = rand({3});
  ops::mul(a, b).backward(u);
  EXPECT_EQ(a.grad().to_vector<double>(), ops::mul(u, b).to_vector<double>());
  EXPECT_FALSE(b.grad().defined());
  Tensor c = rand({2, 2});
  Tensor d = rand({2, 2}).set_requires_grad();
  ops::concat({c, d}, 0).backward(f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  EXPECT_EQ(d.grad().to_vector<double>(), (std::vector<double>{5, 6, 7, 8}));  // the rows of d
  EXPECT_FALSE(c.grad().defined());
}

// ---- errors ----------------------------------------------------------------------------------

TEST(OpsErrors, ShapeMismatchNamesTheShapes) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({3, 2});
  expect_error([&] { ops::add(a, b); }, {"add", "(2, 3)", "(3, 2)"});
  expect_error([&] { ops::mul(a, b); }, {"mul", "(2, 3)", "(3, 2)"});
  expect_error([&] { ops::add_bias(a, Tensor::zeros({2})); }, {"add_bias", "bias", "(3,)", "(2,)"});
  expect_error([&] { ops::add_bias(Tensor::zeros({}), Tensor::zeros({1})); }, {"add_bias", "at least one"});
  expect_error(
      [&] {
        ops::concat({a, b}, 0);
      },
      {"concat", "inputs[1]", "(3, 2)", "(2, 3)", "outside axis 0"});
  expect_error([&] { ops::concat({a, Tensor::zeros({2, 3, 1})}, 0); }, {"concat", "(2, 3, 1)"});
  expect_error([&] { ops::concat({}, 0); }, {"concat", "no inputs"});
  expect_error([&] { ops::reshape(a, {4, -1}); }, {"reshape", "(2, 3)", "(4, -1)"});
  expect_error([&] { ops::sum(a, 2); }, {"sum", "axis 2", "(2, 3)"});
  expect_error([&] { ops::mean(a, -3); }, {"mean", "axis -3", "(2, 3)"});
  expect_error([&] { ops::concat({a, a}, 2); }, {"concat", "axis 2", "(2, 3)"});
  expect_error([&] { ops::mean(Tensor::zeros({0, 2})); }, {"mean", "(0, 2)", "no elements"});
  expect_error([&] { ops::mean(Tensor::zeros({2, 0}), 1); }, {"mean", "(2, 0)", "length 0"});
}

TEST(OpsErrors, DtypeMismatchNamesBothTensors) {
  Tensor a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({2, 3}, DType::f64);
  expect_error([&] { ops::add(a, b); }, {"add", "f32 cpu (2, 3)", "f64 cpu (2, 3)", "different dtypes"});
  expect_error([&] { ops::mul(b, a); }, {"mul", "different dtypes"});
  expect_error([&] { ops::add_bias(a, Tensor::zeros({3}, DType::f64)); }, {"add_bias", "f64 cpu (3,)"});
  expect_error([&] { ops::concat({a, b}, 0); }, {"concat", "inputs[1]", "different dtypes"});
  Tensor ints = Tensor::zeros({2, 3}, DType::i32);
  expect_error([&] { ops::relu(ints); }, {"relu", "i32 cpu (2, 3)", "f32 or f64"});
  expect_error([&] { ops::sum(ints); }, {"sum", "i32 cpu (2, 3)"});
  expect_error([&] { ops::index_rows(a, Tensor::zeros({2}, DType::f32)); }, {"index_rows", "index", "i32"});
  expect_error([&] { ops::index_rows(a, Tensor::zeros({2, 1}, DType::i32)); }, {"index_rows", "(2, 1)"});
}

TEST(OpsErrors, IndexOutOfRangeNamesTheIndexAndTheBound) {
  Tensor x = Tensor::zeros({5, 2});
  expect_error(
      [&] {
        ops::index_rows(x, Tensor::from_vector<int32_t>({0, 7, 3, 7}, {4}));
      },
      {"index_rows", "index 7", "position 1", "axis 0", "(5, 2)", "length 5"});
  expect_error(
      [&] {
        ops::index_rows(x, Tensor::from_vector<int32_t>({0, 5}, {2}));
      },
      {"index 5", "length 5"});
  expect_error(
      [&] {
        ops::index_rows(x, Tensor::from_vector<int32_t>({1, -2}, {2}));
      },
      {"index_rows", "index -2", "position 1", "negative"});
  expect_error([&] { ops::index_rows(Tensor::zeros({}), Tensor::zeros({0}, DType::i32)); },
               {"index_rows", "at least one dimension"});
}

class HeadMeanOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(HeadMeanOnDevice);

// head_mean gives add_bias(mean(x, 1), bias)'s bits, forward and backward, for GAT's output
// layers (the shapes where the CUDA sum takes the whole axis in one block: head_mean.h).
TEST_P(HeadMeanOnDevice, IsTheMeanOverHeadsPlusTheBiasBitForBit) {
  std::mt19937_64 rng(31);
  for (DType dtype : {DType::f32, DType::f64})
    for (const Shape& shape : {Shape{2708, 1, 7}, Shape{2708, 8, 7}, Shape{300, 20, 33}})
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(shape_str(shape) + dtype_name(dtype) + (with_bias ? " bias" : ""));
        const Tensor x0 = random_tensor(shape, rng, -3, 3, dtype, device());
        const Tensor b0 = random_tensor({shape[2]}, rng, -1, 1, dtype, device());
        const Tensor g = random_tensor({shape[0], shape[2]}, rng, -1, 1, dtype, device());
        Tensor x1 = x0.clone().set_requires_grad(), b1 = b0.clone().set_requires_grad();
        Tensor x2 = x0.clone().set_requires_grad(), b2 = b0.clone().set_requires_grad();
        const Tensor fused = ops::head_mean(x1, with_bias ? b1 : Tensor());
        const Tensor mean = ops::mean(x2, 1);
        const Tensor reference = with_bias ? ops::add_bias(mean, b2) : mean;
        EXPECT_TRUE(bitwise_equal(fused, reference));
        fused.backward(g);
        reference.backward(g);
        EXPECT_TRUE(bitwise_equal(x1.grad(), x2.grad()));
        if (with_bias) {
          EXPECT_TRUE(bitwise_equal(b1.grad(), b2.grad()));
        }
      }
}

class ElementwiseOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(ElementwiseOnDevice);

TEST_P(ElementwiseOnDevice, EmptyTensors) {
  Tensor empty = Tensor::zeros({0, 3}, DType::f32, device());
  EXPECT_EQ(ops::sum(empty).item(), 0.0);
  EXPECT_EQ(host_f64(ops::sum(empty, 0)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ops::relu(empty).shape(), (Shape{0, 3}));
  Tensor one = Tensor::full({1, 3}, 2.0, DType::f32, device());
  EXPECT_EQ(host_f64(ops::concat({empty, one}, 0)), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(ops::index_rows(one, Tensor::zeros({0}, DType::i32)).shape(), (Shape{0, 3}));
  EXPECT_EQ((empty + one).shape(), (Shape{0, 3}));
  EXPECT_EQ((empty * Tensor::zeros({1}, DType::f32, device())).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::softmax(empty, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::log_softmax(empty, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::sigmoid(empty).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::gelu(empty).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::clamp(empty, 0.0, std::nullopt).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::transpose(empty).shape(), (Shape{3, 0}));
}

// Broadcasting over any axes, and the comparison, power and selection ops: values and gradients
// on each device (non-uniform upstream gradients; the f64 gradient checks and the CUDA-against-CPU
// comparisons are rows of test_backend_ops.cpp).
namespace {
Tensor leaf(const std::vector<double>& values, const Shape& shape, Device device) {
  return Tensor::from_vector(values, shape).to(device).set_requires_grad();
}
}  // namespace

TEST_P(ElementwiseOnDevice, BroadcastsOverAnyAxesBothWays) {
  // (2, 1, 3) + (2, 1): out[i, j, k] = a[i, 0, k] + b[j, 0] -> (2, 2, 3)
  Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 1, 3}, device());
  Tensor b = leaf({10, 20}, {2, 1}, device());
  Tensor out = a + b;
  EXPECT_EQ(out.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(host_f64(out), (std::vector<double>{11, 12, 13, 21, 22, 23, 14, 15, 16, 24, 25, 26}));
  const std::vector<double> g = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  out.backward(Tensor::from_vector(g, {2, 2, 3}).to(device()));
  EXPECT_EQ(host_f64(a.grad()), (std::vector<double>{5, 7, 9, 17, 19, 21}));  // summed over j
  EXPECT_EQ(host_f64(b.grad()),
            (std::vector<double>{(1 + 2 + 3) + (7 + 8 + 9), (4 + 5 + 6) + (10 + 11 + 12)}));
}

TEST_P(ElementwiseOnDevice, BroadcastBoundaries) {
  // Size-1 axes on both sides, a 0-dimensional operand, and empty outputs.
  Tensor a = leaf({1, 2}, {1, 1, 2}, device()), b = leaf({3, 4}, {2, 1, 1}, device());
  Tensor out = ops::mul(a, b);
  EXPECT_EQ(out.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(host_f64(out), (std::vector<double>{3, 6, 4, 8}));
  out.backward(Tensor::from_vector<double>({1, -1, 2, 5}, {2, 1, 2}).to(device()));
  EXPECT_EQ(host_f64(a.grad()), (std::vector<double>{3 + 8, -3 + 20}));
  EXPECT_EQ(host_f64(b.grad()), (std::vector<double>{1 - 2, 2 + 10}));

  Tensor s = leaf({2}, {}, device());
  Tensor x = leaf({1, 2, 3}, {3}, device());
  Tensor y = ops::div(x, s);
  y.backward(Tensor::from_vector<double>({1, 2, 4}, {3}).to(device()));
  EXPECT_EQ(s.grad().shape(), (Shape{}));
  EXPECT_DOUBLE_EQ(s.grad().item(), -(1 * 1 + 2 * 2 + 4 * 3) / 4.0);

  Tensor empty = leaf({}, {0, 1}, device()), row = leaf({1, 2, 3}, {1, 3}, device());
  Tensor e = empty + row;
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  e.backward(Tensor::zeros({0, 3}, DType::f64, device()));
  EXPECT_EQ(host_f64(row.grad()), (std::vector<double>{0, 0, 0}));  // a sum over no rows
  EXPECT_EQ(empty.grad().shape(), (Shape{0, 1}));
}

TEST_P(ElementwiseOnDevice, MaximumAndMinimumSplitTiesAndPropagateNaN) {
  const std::vector<double> g = {2, 4, 8};
  for (bool is_max : {true, false}) {
    Tensor a = leaf({1, 2, 3}, {3}, device()), b = leaf({1, 3, 2}, {3}, device());
    Tensor out = is_max ? ops::maximum(a, b) : ops::minimum(a, b);
    EXPECT_EQ(host_f64(out), is_max ? (std::vector<double>{1, 3, 3}) : (std::vector<double>{1, 2, 2}));
    out.backward(Tensor::from_vector(g, {3}).to(device()));
    // the tie (element 0) gives each side half, as torch.maximum / torch.minimum do
    EXPECT_EQ(host_f64(a.grad()), is_max ? (std::vector<double>{1, 0, 8}) : (std::vector<double>{1, 4, 0}));
    EXPECT_EQ(host_f64(b.grad()), is_max ? (std::vector<double>{1, 4, 0}) : (std::vector<double>{1, 0, 8}));
  }
  const double nan = std::nan("");
  Tensor x = Tensor::from_vector<double>({nan, 1}, {2}).to(device());
  Tensor y = Tensor::from_vector<double>({1, nan}, {2}).to(device());
  for (const Tensor& r : {ops::maximum(x, y), ops::minimum(x, y), ops::maximum(y, x)})
    for (double v : host_f64(r)) EXPECT_TRUE(std::isnan(v));
}

TEST_P(ElementwiseOnDevice, PowFollowsPyTorchsConventionsAtZero) {
  // a^b at (2, 3), (0, 0), (0, 2), (4, 0.5); g = (1, 2, 3, 4)
  Tensor a = leaf({2, 0, 0, 4}, {4}, device()), b = leaf({3, 0, 2, 0.5}, {4}, device());
  Tensor out = ops::pow(a, b);
  EXPECT_EQ(host_f64(out), (std::vector<double>{8, 1, 0, 2}));
  out.backward(Tensor::from_vector<double>({1, 2, 3, 4}, {4}).to(device()));
  const std::vector<double> da = host_f64(a.grad()), db = host_f64(b.grad());
  EXPECT_EQ(da, (std::vector<double>{12, 0, 0, 4 * 0.5 / 2}));  // b a^(b-1); 0 where b == 0
  EXPECT_DOUBLE_EQ(db[0], 8 * std::log(2.0));                   // a^b log a
  EXPECT_EQ(db[1], 0.0);                                        // a == 0 and b >= 0: 0, not 0 * -inf
  EXPECT_EQ(db[2], 0.0);
  EXPECT_DOUBLE_EQ(db[3], 4 * 2 * std::log(4.0));
}

TEST_P(ElementwiseOnDevice, WhereSelectsAndRoutesTheGradient) {
  Tensor cond = Tensor::from_vector<int32_t>({1, 0, -3}, {3, 1}).to(device());  // any non-zero is true
  Tensor a = leaf({1, 2}, {1, 2}, device()), b = leaf({10, 20, 30, 40, 50, 60}, {3, 2}, device());
  Tensor out = ops::where(cond, a, b);
  EXPECT_EQ(host_f64(out), (std::vector<double>{1, 2, 30, 40, 1, 2}));
  out.backward(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}).to(device()));
  EXPECT_EQ(host_f64(a.grad()), (std::vector<double>{1 + 5, 2 + 6}));
  EXPECT_EQ(host_f64(b.grad()), (std::vector<double>{0, 0, 3, 4, 0, 0}));
  EXPECT_EQ(host_f64(ops::where(cond, -1.0, b.detach())), (std::vector<double>{-1, -1, 30, 40, -1, -1}));
}

TEST_P(ElementwiseOnDevice, SlicesAlongAnyAxis) {
  // x (2, 3, 2) = 0..11; g non-uniform.
  std::vector<double> values(12);
  for (size_t i = 0; i < 12; ++i) values[i] = static_cast<double>(i);
  Tensor x = leaf(values, {2, 3, 2}, device());
  Tensor n = ops::narrow(x, -2, 1, 2);  // [:, 1:3, :]
  EXPECT_EQ(n.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(host_f64(n), (std::vector<double>{2, 3, 4, 5, 8, 9, 10, 11}));
  n.backward(Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}).to(device()));
  EXPECT_EQ(host_f64(x.grad()), (std::vector<double>{0, 0, 1, 2, 3, 4, 0, 0, 5, 6, 7, 8}));

  Tensor empty = ops::narrow(x, 1, 3, 0);  // 0-length at the end
  EXPECT_EQ(empty.shape(), (Shape{2, 0, 2}));
  Tensor s = ops::select(x, 2, -1);  // [:, :, 1]
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(host_f64(s), (std::vector<double>{1, 3, 5, 7, 9, 11}));

  Tensor idx = Tensor::from_vector<int32_t>({2, 0, 2}, {3}).to(device());
  Tensor y = leaf(values, {2, 3, 2}, device());
  Tensor picked = ops::index_select(y, 1, idx);  // [:, [2, 0, 2], :]
  EXPECT_EQ(host_f64(picked), (std::vector<double>{4, 5, 0, 1, 4, 5, 10, 11, 6, 7, 10, 11}));
  picked.backward(
      Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}).to(device()));
  // the repeated index 2 receives both its rows' gradients
  EXPECT_EQ(host_f64(y.grad()), (std::vector<double>{3, 4, 0, 0, 1 + 5, 2 + 6, 9, 10, 0, 0, 7 + 11, 8 + 12}));
  EXPECT_EQ(ops::index_select(y, 0, Tensor::zeros({0}, DType::i32, device())).shape(), (Shape{0, 3, 2}));

  Tensor a = leaf({1, 2}, {2}, device()), b = leaf({3, 4}, {2}, device());
  Tensor st = ops::stack({a, b}, -1);  // (2, 2): [[1, 3], [2, 4]]
  EXPECT_EQ(host_f64(st), (std::vector<double>{1, 3, 2, 4}));
  st.backward(Tensor::from_vector<double>({5, 6, 7, 8}, {2, 2}).to(device()));
  EXPECT_EQ(host_f64(a.grad()), (std::vector<double>{5, 7}));
  EXPECT_EQ(host_f64(b.grad()), (std::vector<double>{6, 8}));
  EXPECT_EQ(ops::stack({a.detach()}, 0).shape(), (Shape{1, 2}));
}

TEST(OpsErrors, BroadcastErrorsNameTheOpTheTensorsAndTheAxis) {
  expect_error(
      [] {
        Tensor::zeros({2, 3, 4}) * Tensor::zeros({5, 1, 1, 1}) * Tensor::zeros({3, 3});
      },
      {"mul", "'a' f32 cpu (5, 2, 3, 4)", "'b' f32 cpu (3, 3)", "axis -1: 4 against 3"});
  expect_error(
      [] { ops::where(Tensor::zeros({2}, DType::i32), Tensor::zeros({2}, DType::f64), Tensor::zeros({2})); },
      {"where", "'a'", "'b'", "f64", "f32"});
  // Axes that alternate between the operands cannot be merged: 9 axes are one too many.
  Shape odd(9, 1), even(9, 1);
  for (size_t k = 0; k < 9; ++k) (k % 2 == 0 ? odd : even)[k] = 2;
  expect_error([&] { Tensor::zeros(odd) + Tensor::zeros(even); }, {"add", "9 axes", "at most 8"});
  EXPECT_EQ((Tensor::zeros(odd) + Tensor::zeros(Shape(9, 1))).shape(), odd);  // one operand full: 1 axis
}

// ---- the pointwise functions of unary.h against PyTorch ------------------------------------

// PyTorch's output and d x of a pointwise op, for the input x and the upstream gradient g.
struct TorchUnaryReference {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::vector<double> x, g, out, grad_x;
};

// Made by tests/data/torch_unary_reference.py with torch 2.11.0 (CPU build), float64: the kinks of
// relu6, softplus on both sides of its threshold (and at it), sqrt and pow at 0, pow of negative
// bases, clamp at and beyond its bounds, saturated gelu and silu, NaN inputs.
const std::vector<TorchUnaryReference>& torch_unary_reference() {
  static const std::vector<TorchUnaryReference> cases = {
      {"relu6 at 0 and 6",
       [](const Tensor& x) { return ops::relu6(x); },
       {-1.0, -0.0, 0.0, 0.5, 6.0, 7.0, NAN},
       {0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.25},
       {0.0, -0.0, 0.0, 0.5, 6.0, 6.0, NAN},
       {0.0, 0.0, 0.0, 0.25, 0.0, 0.0, 1.25}},
      {"gelu",
       [](const Tensor& x) { return ops::gelu(x); },
       {-40.0, -5.0, -1.0, -0.001, 0.0, 0.001, 0.5, 1.0, 3.0, 40.0, NAN},
       {0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.25, -2.0, 0.125, 1.75, -0.5},
       {-0.0, -1.4332578593401202e-06, -0.15865525393145702, -0.000499601057786089, 0.0, 0.000500398942213911,
        0.34573123063700656, 0.841344746068543, 2.99595030590511, 40.0, NAN},
       {0.0, 1.0720419002705196e-05, -0.1666309411753727, 0.12480052892628965, 1.5, -0.3755984132211311,
        1.0843689058202035, -2.166630941175373, 0.126493205900523, 1.75, NAN}},
      {"gelu tanh",
       [](const Tensor& x) { return ops::gelu(x, ops::GeluApproximate::tanh); },
       {-40.0, -5.0, -1.0, -0.001, 0.0, 0.001, 0.5, 1.0, 3.0, 40.0, NAN},
       {0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.25, -2.0, 0.125, 1.75, -0.5},
       {-0.0, -2.2917961972623857e-07, -0.15880800939172324, -0.000499601057786418, 0.0, 0.000500398942213582,
        0.34571400982514394, 0.8411919906082768, 2.996362607918227, 40.0, NAN},
       {0.0, 2.319542981939434e-06, -0.16592816769156504, 0.12480052892661875, 1.5, -0.37559841322014376,
        1.084212379418303, -2.165928167691565, 0.1264480208288712, 1.75, NAN}},
      {"silu",
       [](const Tensor& x) { return ops::silu(x); },
       {-800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0, NAN},
       {0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.25, -2.0},
       {-0.0, -1.6993417021166355e-16, -0.2689414213699951, 0.0, 0.7310585786300049, 40.0, 800.0, NAN},
       {-0.0, 2.4852872393455795e-16, 0.1446589762570265, 0.125, 2.7830115356144605, -0.75, 1.25, NAN}},
      {"softplus around threshold 20",
       [](const Tensor& x) { return ops::softplus(x); },
       {-40.0, 0.0, 19.9, 20.0, 20.1, 40.0, NAN},
       {0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.25},
       {4.248354255291589e-18, 0.6931471805599453, 19.900000002277924, 20.000000002061153, 20.1, 40.0, NAN},
       {2.1241771276457944e-18, -0.75, 1.9999999954441459, 0.2499999994847116, 3.0, -0.75, NAN}},
      {"softplus beta 2 threshold 3",
       [](const Tensor& x) { return ops::softplus(x, 2.0, 3.0); },
       {-40.0, 1.4999, 1.5, 1.5001, 40.0},
       {0.5, -1.5, 2.0, 0.25, 3.0},
       {9.024256939227076e-36, 1.5241984188259827, 1.524293675786871, 1.5001, 40.0},
       {9.024256939227076e-36, -1.4288476360089175, 1.9051482536448665, 0.25, 3.0}},
      {"softplus beta -0.5 threshold 5",
       [](const Tensor& x) { return ops::softplus(x, -0.5, 5.0); },
       {-10.1, -10.0, -9.9, 3.0},
       {0.5, -1.5, 2.0, 0.25},
       {-10.1, -10.013430696978237, -9.914116878862917, -0.4028265559655048},
       {0.5, -1.4899607236135726, 1.9859328256900097, 0.04560638095158908}},
      {"sqrt at 0",
       [](const Tensor& x) { return ops::sqrt(x); },
       {0.0, 0.0, 0.0, 0.25, 4.0, -1.0},
       {1.0, -1.0, 0.0, 2.0, 1.0, 1.0},
       {0.0, 0.0, 0.0, 0.5, 2.0, NAN},
       {INFINITY, -INFINITY, NAN, 2.0, 0.25, NAN}},
      {"pow 0.5",
       [](const Tensor& x) { return ops::pow(x, 0.5); },
       {0.0, 0.25, 4.0, -1.0},
       {0.5, -1.5, 2.0, 0.25},
       {0.0, 0.5, 2.0, NAN},
       {INFINITY, -1.5, 0.5, NAN}},
      {"pow 2.5",
       [](const Tensor& x) { return ops::pow(x, 2.5); },
       {0.0, 2.0, -1.0},
       {0.5, -1.5, 2.0},
       {0.0, 5.656854249492381, NAN},
       {0.0, -10.606601717798213, NAN}},
      {"pow 3",
       [](const Tensor& x) { return ops::pow(x, 3.0); },
       {-2.0, 0.0, 1.5},
       {0.5, -1.5, 2.0},
       {-8.0, 0.0, 3.375},
       {6.0, -0.0, 13.5}},
      {"pow -1",
       [](const Tensor& x) { return ops::pow(x, -1.0); },
       {0.0, -2.0, 0.5},
       {0.5, -1.5, 2.0},
       {INFINITY, -0.5, 2.0},
       {-INFINITY, 0.375, -8.0}},
      {"pow 0",
       [](const Tensor& x) { return ops::pow(x, 0.0); },
       {0.0, -1.0, NAN},
       {0.5, -1.5, 2.0},
       {1.0, 1.0, 1.0},
       {0.0, 0.0, 0.0}},
      {"clamp at the bounds",
       [](const Tensor& x) { return ops::clamp(x, -1.0, 2.0); },
       {-2.0, -1.0, 0.0, 2.0, 3.0, NAN},
       {0.5, -1.5, 2.0, 0.25, 3.0, -0.75},
       {-1.0, -1.0, 0.0, 2.0, 2.0, NAN},
       {0.0, -1.5, 2.0, 0.25, 0.0, 0.0}},
      {"clamp min only",
       [](const Tensor& x) { return ops::clamp(x, -1.0, std::nullopt); },
       {-INFINITY, -2.0, -1.0, 0.0, INFINITY},
       {0.5, -1.5, 2.0, 0.25, 3.0},
       {-1.0, -1.0, -1.0, 0.0, INFINITY},
       {0.0, 0.0, 2.0, 0.25, 3.0}},
      {"clamp max only",
       [](const Tensor& x) { return ops::clamp(x, std::nullopt, 2.0); },
       {-INFINITY, 1.0, 2.0, 3.0, INFINITY},
       {0.5, -1.5, 2.0, 0.25, 3.0},
       {-INFINITY, 1.0, 2.0, 2.0, 2.0},
       {0.5, -1.5, 2.0, 0.0, 0.0}},
      {"clamp min > max",
       [](const Tensor& x) { return ops::clamp(x, 2.0, 1.0); },
       {0.0, 1.5, 3.0},
       {0.5, -1.5, 2.0},
       {1.0, 1.0, 1.0},
       {0.0, 0.0, 0.0}},
  };
  return cases;
}

// got[i] is want[i]: both NaN, the same infinity, or |got - want| <= tol max(|want|, floor).
void expect_matches_torch(const std::vector<double>& got, const std::vector<double>& want, double tol,
                          double floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const double a = got[i], b = want[i];
    const bool same = std::isnan(b)   ? std::isnan(a)
                      : std::isinf(b) ? a == b
                                      : std::abs(a - b) <= tol * std::max(std::abs(b), floor);
    EXPECT_TRUE(same) << what << ", element " << i << ": got " << a << ", torch " << b;
  }
}

class UnaryOnDevice : public DeviceTest {};
GAT_INSTANTIATE_DEVICE_TESTS(UnaryOnDevice);

// f64 to 1e-9 relative: torch's own f64 gelu(-5) is 4e-11 off (unary.h) and the devices' erfc,
// exp and pow a few ulp apart. f32 to 1e-5 relative, or absolute below 1: torch's f32 values are
// not the reference there, the f64 ones are, and the inputs round to f32 first.
TEST_P(UnaryOnDevice, ValuesAndGradientsAreTorchsAtTheEdges) {
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-9 : 1e-5, floor = dtype == DType::f64 ? 1e-300 : 1.0;
    for (const TorchUnaryReference& c : torch_unary_reference()) {
      const std::string what = std::string(c.name) + " " + dtype_name(dtype);
      const Shape shape{static_cast<int64_t>(c.x.size())};
      Tensor x = f64(c.x, shape).to(dtype).to(device()).set_requires_grad();
      const Tensor out = c.f(x);
      out.backward(f64(c.g, shape).to(dtype).to(device()));
      expect_matches_torch(host_f64(out), c.out, tol, floor, what + " forward");
      expect_matches_torch(host_f64(x.grad()), c.grad_x, tol, floor, what + " d x");
    }
  }
}

// Central differences in f64 over each function's range, at points near relu6's and clamp's kinks
// and softplus's threshold, further from them than the step (1e-6).
TEST_P(UnaryOnDevice, GradientsMatchFiniteDifferencesNearTheEdges) {
  auto at = [&](const std::vector<double>& v) {
    return f64(v, {static_cast<int64_t>(v.size())}).to(device());
  };
  const Tensor wide = at({-40, -7, -3.1, -1, -0.3, -1e-3, 2e-3, 0.4, 1.3, 2.9, 5.999, 6.001, 8, 40});
  const Tensor positive = at({1e-3, 0.05, 0.3, 1, 2.5, 7, 40});
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    Tensor x;
  };
  const std::vector<Case> cases = {
      {"relu6", [](const Tensor& x) { return ops::relu6(x); }, wide},
      {"gelu", [](const Tensor& x) { return ops::gelu(x); }, wide},
      {"gelu tanh", [](const Tensor& x) { return ops::gelu(x, ops::GeluApproximate::tanh); }, wide},
      {"silu", [](const Tensor& x) { return ops::silu(x); }, wide},
      {"softplus", [](const Tensor& x) { return ops::softplus(x); }, at({-30, -2, 0, 3, 19.99, 20.01, 25})},
      {"softplus beta 2 threshold 3", [](const Tensor& x) { return ops::softplus(x, 2.0, 3.0); },
       at({-3, 0.4, 1.499, 1.501, 4})},
      {"softplus beta -0.5", [](const Tensor& x) { return ops::softplus(x, -0.5, 5.0); },
       at({-10.01, -9.99, 0, 4})},
      {"sqrt", [](const Tensor& x) { return ops::sqrt(x); }, positive},
      {"pow 2.5", [](const Tensor& x) { return ops::pow(x, 2.5); }, positive},
      {"pow -1.5", [](const Tensor& x) { return ops::pow(x, -1.5); }, at({0.05, 0.3, 1, 2.5, 7, 40})},
      {"pow 3", [](const Tensor& x) { return ops::pow(x, 3.0); }, wide},
      {"pow 0", [](const Tensor& x) { return ops::pow(x, 0.0); }, wide},
      {"clamp", [](const Tensor& x) { return ops::clamp(x, -1.0, 2.0); },
       at({-1.5, -1.001, -0.999, 0, 1.999, 2.001, 3})},
      {"clamp min", [](const Tensor& x) { return ops::clamp(x, -1.0, std::nullopt); },
       at({-1.001, -0.999, 5})},
      {"clamp max", [](const Tensor& x) { return ops::clamp(x, std::nullopt, 2.0); }, at({-5, 1.999, 2.001})},
  };
  for (const Case& c : cases)
    expect_gradients_match(c.name, [&c](const Inputs& in) { return c.f(in[0]); }, {c.x});
}

// ---- CUDA against the CPU ----------------------------------------------------------------

using CudaOps = CudaVsCpuTest;

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
    for (const DropoutKey& key :
         {DropoutKey{0.5f, 1, 0}, DropoutKey{0.1f, 99, 12345}, DropoutKey{0.9f, 7, 1}}) {
      Tensor cpu = ops::dropout(x, key), gpu = ops::dropout(x.to(Device::cuda), key);
      EXPECT_TRUE(bitwise_equal(cpu, gpu))
          << "p " << key.p << " stream " << key.stream << " " << dtype_name(dtype);
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
      Tensor out_gpu = on_gpu(Tensor::zeros({777, 129}, dtype)),
             grad_gpu = on_gpu(Tensor::zeros({777, 129}, dtype));
      KeepMask kept, unused;
      ops::kernels::elu_dropout_forward(xs, alpha, key, keep_scale, out_cpu, kept);
      ops::kernels::elu_dropout_forward(x_gpu.rows(first, 777), alpha, key, keep_scale, out_gpu, unused);
      expect_close(out_gpu.to(Device::cpu), out_cpu, "elu_dropout forward, " + where, tol);
      ops::kernels::elu_dropout_backward(out_cpu, gs, alpha, key, keep_scale, kept, grad_cpu);
      ops::kernels::elu_dropout_backward(out_gpu, g_gpu.rows(first, 777), alpha, key, keep_scale, unused,
                                         grad_gpu);
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
  EXPECT_EQ(ops::index_rows(labels.to(Device::cuda), plan).to_vector<int32_t>(),
            (std::vector<int32_t>{8, 5, 8}));
  Tensor x = Tensor::zeros({3, 2}, DType::f32, Device::cuda);
  expect_error([&] { ops::index_rows(x, plan); }, {"index 3", "length 3"});
  // A plan on the CPU does not serve a CUDA tensor.
  EXPECT_THROW(ops::index_rows(x, ops::RowIndex(Tensor::from_vector<int32_t>({0}, {1}))), Error);
}

// The gather reads rows in 16-byte loads where each row starts 16-byte aligned (rows of a multiple
// of 4 words at an aligned pointer), in 4-byte ones otherwise: rows of 8 and 5 f32 and of 6 f64,
// at an aligned pointer and one element after it, bit for bit the CPU's, through the op and
// through the kernel with an unchecked index (the loader's).
TEST_F(CudaOps, IndexRowsGathersEveryRowWidthAndAlignmentAsTheCpu) {
  std::mt19937_64 rng(9);
  const Tensor index = Tensor::from_vector<int32_t>({40, 0, 7, 7, 1, 41}, {6});
  const Tensor index_gpu = index.to(Device::cuda);
  for (const auto& [cols, dtype] :
       std::vector<std::pair<int64_t, DType>>{{8, DType::f32}, {5, DType::f32}, {6, DType::f64}})
    for (int64_t shift : {0, 1}) {  // elements before the rows
      SCOPED_TRACE(::testing::Message() << cols << " " << dtype_name(dtype) << " shifted by " << shift);
      const Tensor x = random_tensor({42, cols}, rng, -1, 1, dtype);
      const Tensor want = ops::index_rows(x, index);
      Tensor x_gpu = Tensor::zeros({42 * cols + shift}, dtype, Device::cuda)
                         .rows(shift, 42 * cols + shift)
                         .view({42, cols});
      x_gpu.copy_(x);
      EXPECT_TRUE(bitwise_equal(ops::index_rows(x_gpu, index_gpu).to(Device::cpu), want));
      Tensor out = Tensor::zeros({6, cols}, dtype, Device::cuda);
      ops::kernels::gather_rows(x_gpu, ops::RowIndex::unchecked(index_gpu),
                                cols * static_cast<int64_t>(dtype_size(dtype)) / 4, out);
      EXPECT_TRUE(bitwise_equal(out.to(Device::cpu), want));
    }
}

TEST_F(CudaOps, DeviceMismatchNamesBothTensors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2, 3}, DType::f32, Device::cuda);
  for (const auto& f : std::vector<std::function<void()>>{[&] { ops::add(a, b); }, [&] { ops::mul(b, a); },
                                                          [&] {
                                                            ops::concat({a, b}, 0);
                                                          }})
    expect_error(f, {"f32 cpu (2, 3)", "f32 cuda (2, 3)", "different devices"});
  for (const auto& f : std::vector<std::function<void()>>{[&] { b / a; },
                                                          [&] {
                                                            b - Tensor::zeros({1, 3});
                                                          },
                                                          [&] { ops::mse_loss(b, a); }})
    expect_error(f, {"different devices"});
  expect_error([&] { ops::add_bias(b, Tensor::zeros({3})); }, {"f32 cpu (3,)"});
}
