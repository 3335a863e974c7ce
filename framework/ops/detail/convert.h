// One element converted between the dtypes' C++ types (float, double, int32_t, bf16), on the host
// and on the device: ops::to_dtype's kernels and Tensor::to(DType).
#pragma once

#include <type_traits>

#include "gat/framework/bfloat16.h"
#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::ops::detail {

// s as a D: from bf16 exactly through f32; to bf16 through f32, rounded to nearest even (as
// PyTorch converts f64 and i32); otherwise static_cast (to i32: truncated toward zero).
template <class D, class S>
GAT_HOST_DEVICE D convert_value(S s) {
  if constexpr (std::is_same_v<S, bf16>)
    return convert_value<D>(to_f32(s));
  else if constexpr (std::is_same_v<D, bf16>)
    return to_bf16(static_cast<float>(s));
  else
    return static_cast<D>(s);
}

}  // namespace gat::ops::detail
