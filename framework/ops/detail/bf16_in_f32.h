// bf16 storage with f32 arithmetic for an op whose kernels do not read bf16 themselves
// (docs/precision.md). An op that meets a bf16 input runs on f32 copies of its bf16 inputs (its
// f32 inputs, such as master weights, as they are) and rounds its floating-point result to bf16:
//
//   Tensor elu(const Tensor& x, double alpha) {
//     if (detail::bf16_in_f32("elu", x)) return detail::rounded_to_bf16(elu(detail::widened(x), alpha));
//     ...
//
// Both casts are ops::to_dtype, so the tape carries the gradients across them: the op's backward
// runs in f32 and the gradient of a bf16 input is rounded to bf16, that of an f32 input stays f32.
// Every sum is the f32 kernel's, so it accumulates in f32. This is the CPU's bf16 (its reference)
// and, on CUDA, the route of an op whose CUDA kernels do not read and write bf16 rows themselves:
// correct, but it stores f32 copies of its bf16 inputs and result.
#pragma once

#include "gat/framework/ops/to_dtype.h"
#include "gat/framework/tensor.h"

namespace gat::ops::detail {

inline bool is_bf16(const Tensor& t) { return t.defined() && t.dtype() == DType::bf16; }

// True when any of `tensors` (undefined ones allowed) is bf16: the op then runs through f32.
// `op` names the op: nothing reads it since CUDA takes this route too, but the callers pass it.
template <class... T>
bool bf16_in_f32(const char* /*op*/, const T&... tensors) {
  return (is_bf16(tensors) || ...);
}

// bf16_in_f32 for an op whose CUDA kernels read and write bf16 themselves (bf16 storage, f32
// arithmetic, one rounding at the store: detail/convert.h's opmath_t): true for a bf16 input on
// the CPU, which stays the reference. On CUDA the bf16 inputs go to the op's kernels.
template <class... T>
bool bf16_in_f32_on_cpu(const T&... tensors) {
  return ((is_bf16(tensors) && !tensors.is_cuda()) || ...);
}

// check_float (tensor.h) for such an op's inputs: f32, f64, or bf16 (on CUDA, after
// bf16_in_f32_on_cpu sent the CPU's through f32).
inline void check_float_or_bf16(const char* op, const char* arg, const Tensor& t) {
  if (!is_bf16(t)) check_float(op, arg, t);
}

// t as f32 when it is bf16, else t itself (undefined stays undefined).
inline Tensor widened(const Tensor& t) { return is_bf16(t) ? to_dtype(t, DType::f32) : t; }

// The op's f32 result stored as bf16.
inline Tensor rounded_to_bf16(const Tensor& t) { return to_dtype(t, DType::bf16); }

}  // namespace gat::ops::detail
