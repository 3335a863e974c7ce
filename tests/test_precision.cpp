// bf16 precision (docs/precision.md): the rounding of f32 to bf16 on hand-computed bit patterns,
// the cast op, every GAT op's bf16 result beside its f32 result, and the model in bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gat/framework/bfloat16.h"
#include "gat/framework/ops/fill.h"
#include "gat/framework/tensor.h"
#include "gat_testing.h"

using namespace gat;
using gat::testing::expect_error;

namespace {

uint16_t rounded(uint32_t f32) { return to_bf16(f32_from_bits(f32)).bits; }

}  // namespace

// Each f32 bit pattern with the bf16 it must round to: the upper 16 bits, plus one where the
// lower 16 are above half of 0x10000, or exactly half and the upper 16 odd.
TEST(Bf16Rounding, TiesGoToEvenAndOtherwiseToNearest) {
  EXPECT_EQ(rounded(0x3F800000), 0x3F80);  // 1: exact
  EXPECT_EQ(rounded(0x3F807FFF), 0x3F80);  // below half way: down
  EXPECT_EQ(rounded(0x3F808000), 0x3F80);  // half way, 0x3F80 even: down
  EXPECT_EQ(rounded(0x3F808001), 0x3F81);  // above half way: up
  EXPECT_EQ(rounded(0x3F818000), 0x3F82);  // half way, 0x3F81 odd: up to the even 0x3F82
  EXPECT_EQ(rounded(0xBF808000), 0xBF80);  // the same for negatives (by magnitude)
  EXPECT_EQ(rounded(0xBF818000), 0xBF82);
  EXPECT_EQ(rounded(0x3FFF8000), 0x4000);  // the carry moves into the exponent: 1.99.. -> 2
  EXPECT_EQ(rounded(0x80000000), 0x8000);  // -0 keeps its sign
}

TEST(Bf16Rounding, NaNStaysNaNAndInfinitiesStay) {
  EXPECT_EQ(rounded(0x7FC00000), 0x7FC0);
  // A NaN whose payload is all in the low bits: truncated, it would be inf (0x7F80).
  EXPECT_EQ(rounded(0x7F800001), 0x7FC0);
  EXPECT_EQ(rounded(0xFFC00001), 0x7FC0);  // as c10::BFloat16: one quiet NaN, no sign
  EXPECT_EQ(rounded(0x7F800000), 0x7F80);  // +inf
  EXPECT_EQ(rounded(0xFF800000), 0xFF80);  // -inf
}

TEST(Bf16Rounding, ValuesPastTheLargestBf16OverflowToInfinity) {
  EXPECT_EQ(rounded(0x7F7F0000), 0x7F7F);  // the largest bf16, about 3.39e38
  EXPECT_EQ(rounded(0x7F7F7FFF), 0x7F7F);  // below half way to the next: stays finite
  EXPECT_EQ(rounded(0x7F7F8000), 0x7F80);  // half way, 0x7F7F odd: up, to inf
  EXPECT_EQ(rounded(0x7F7FFFFF), 0x7F80);  // FLT_MAX
  EXPECT_EQ(rounded(0xFF7FFFFF), 0xFF80);  // -FLT_MAX
}

TEST(Bf16Rounding, SubnormalsRoundLikeAnyValue) {
  EXPECT_EQ(rounded(0x00000001), 0x0000);  // the smallest f32 subnormal: to +0
  EXPECT_EQ(rounded(0x00008000), 0x0000);  // half of the smallest bf16 subnormal, 0 even: down
  EXPECT_EQ(rounded(0x00010000), 0x0001);  // the smallest bf16 subnormal: exact
  EXPECT_EQ(rounded(0x00018000), 0x0002);  // half way, odd: up
  EXPECT_EQ(rounded(0x80008001), 0x8001);  // a negative one, above half way
  EXPECT_EQ(rounded(0x007FFFFF), 0x0080);  // the largest f32 subnormal: up to the smallest normal
}

TEST(Bf16Rounding, WideningIsExact) {
  EXPECT_EQ(f32_bits(to_f32(bf16{0x3F81})), 0x3F810000u);
  EXPECT_EQ(to_f32(bf16{0x3F81}), 1.0078125f);
  EXPECT_EQ(f32_bits(to_f32(bf16{0x0001})), 0x00010000u);  // a subnormal
  EXPECT_TRUE(std::isnan(to_f32(bf16{0x7FC0})));
  EXPECT_EQ(to_f32(bf16{0xFF80}), -std::numeric_limits<float>::infinity());
}

TEST(Bf16Tensor, ConversionsBetweenEveryDtype) {
  // f64 goes through f32 first, as in PyTorch: 1 + 2^-8 + 2^-30 is 1 + 2^-8 in f32, a tie that
  // goes to the even 1 (straight from f64 it would round up to 1 + 2^-7).
  const Tensor d =
      Tensor::from_vector<double>({1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), -2.5, 1e39}, {3});
  const std::vector<bf16> b = d.to(DType::bf16).to_vector<bf16>();
  EXPECT_EQ(b[0].bits, 0x3F80);
  EXPECT_EQ(b[1].bits, 0xC020);
  EXPECT_EQ(b[2].bits, 0x7F80);  // beyond f32 too: inf
  // i32 to bf16 rounds too: 257 lies half way between 256 and 258.
  const std::vector<bf16> from_int =
      Tensor::from_vector<int32_t>({257, 259, -3}, {3}).to(DType::bf16).to_vector<bf16>();
  EXPECT_EQ(from_int[0].bits, 0x4380);  // 256
  EXPECT_EQ(from_int[1].bits, 0x4382);  // 260
  EXPECT_EQ(from_int[2].bits, 0xC040);  // -3
  // Back to f32, f64 (exact) and i32 (truncated toward zero).
  const Tensor h = Tensor::from_vector<bf16>({bf16{0x3FC0}, bf16{0xC020}}, {2});  // 1.5, -2.5
  EXPECT_EQ(h.to(DType::f32).to_vector<float>(), (std::vector<float>{1.5f, -2.5f}));
  EXPECT_EQ(h.to(DType::f64).to_vector<double>(), (std::vector<double>{1.5, -2.5}));
  EXPECT_EQ(h.to(DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2}));
}

TEST(Bf16Tensor, MetadataFillItemAndNonFiniteScan) {
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
  const Tensor third = Tensor::full({2, 3}, 1.0 / 3.0, DType::bf16);
  EXPECT_EQ(third.describe(), "bf16 cpu (2, 3)");
  EXPECT_EQ(third.nbytes(), 12u);
  for (bf16 v : third.to_vector<bf16>()) EXPECT_EQ(v.bits, 0x3EAB);  // 0x3EAAAAAB rounded up
  EXPECT_EQ(Tensor::scalar(1.0 / 3.0, DType::bf16).item(), 0.333984375);
  Tensor t = Tensor::zeros({4}, DType::bf16);
  EXPECT_EQ(first_non_finite(t), -1);
  t.data<bf16>()[2] = bf16{0x7FC0};
  EXPECT_EQ(first_non_finite(t), 2);
  expect_error([&] { t.data<float>(); }, {"bf16 cpu (4,)"});
}
