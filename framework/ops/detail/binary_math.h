// The element formulas of the arithmetic kernels (framework/ops/arithmetic.h), for the CPU and
// the CUDA kernels alike (included by framework/ops/arithmetic.cpp and arithmetic.cu only).
#pragma once

#include <cmath>
#include <type_traits>

#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::ops::detail {

template <class T>
GAT_HOST_DEVICE T power(T x, T y) {
#if defined(__CUDA_ARCH__)
  return ::pow(x, y);
#else
  return std::pow(x, y);
#endif
}

template <class T>
GAT_HOST_DEVICE T logarithm(T x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}

// x op y for one element.
template <BinaryOp kOp, class T>
GAT_HOST_DEVICE T binary_element(T x, T y) {
  if constexpr (kOp == BinaryOp::add) return x + y;
  if constexpr (kOp == BinaryOp::sub) return x - y;
  if constexpr (kOp == BinaryOp::mul) return x * y;
  if constexpr (kOp == BinaryOp::div) return x / y;
  if constexpr (kOp == BinaryOp::maximum) return x > y || x != x ? x : y;  // a NaN wins
  if constexpr (kOp == BinaryOp::minimum) return x < y || x != x ? x : y;
  if constexpr (kOp == BinaryOp::pow) return power(x, y);
  if constexpr (kOp == BinaryOp::max_share) return x == y ? T(0.5) : x < y ? T(0) : T(1);
  if constexpr (kOp == BinaryOp::pow_grad_base) return y == T(0) ? T(0) : y * power(x, y - T(1));
  if constexpr (kOp == BinaryOp::pow_grad_exponent)
    return x == T(0) && y >= T(0) ? T(0) : power(x, y) * logarithm(x);
}

// f(std::integral_constant<BinaryOp, op>{}): a kernel template instantiated per op.
template <class F>
void visit_binary_op(BinaryOp op, F&& f) {
  switch (op) {
#define GAT_BINARY_CASE(NAME) \
  case BinaryOp::NAME:        \
    return f(std::integral_constant<BinaryOp, BinaryOp::NAME>{});
    GAT_BINARY_CASE(add)
    GAT_BINARY_CASE(sub)
    GAT_BINARY_CASE(mul)
    GAT_BINARY_CASE(div)
    GAT_BINARY_CASE(maximum)
    GAT_BINARY_CASE(minimum)
    GAT_BINARY_CASE(pow)
    GAT_BINARY_CASE(max_share)
    GAT_BINARY_CASE(pow_grad_base)
    GAT_BINARY_CASE(pow_grad_exponent)
#undef GAT_BINARY_CASE
  }
}

}  // namespace gat::ops::detail
