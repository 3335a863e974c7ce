// concat(inputs, axis): joins tensors along one axis, with autograd (any dtype, CPU and CUDA).
//
//   inputs[k]: (d0, ..., L_k, ..., dn), equal outside `axis`, same dtype and device
//   -> (d0, ..., sum_k L_k, ..., dn)                       (axis < 0 counts from the end)
//
// Each input, viewed (outer, L_k, inner), is one strided block copy into the output viewed
// (outer, sum L, inner). Backward: d inputs[k] = the k-th slice of g, copied back the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor concat(const std::vector<Tensor>& inputs, int64_t axis);

// The kernel (docs/design.md, the op pattern), of the forward and the backward pass: a copy of
// `rows` rows of `row_bytes` each, row r from src + r * src_pitch to dst + r * dst_pitch (bytes),
// both on one device (on CUDA, on gat::cuda::stream()). kernels:: runs cpu_impl:: or cuda_impl::
// by `device`, which the implementations, each of one device, do not read.
GAT_DECLARE_KERNEL_FN(copy_rows, (Device device, void* dst, size_t dst_pitch, const void* src,
                                  size_t src_pitch, size_t row_bytes, size_t rows))

}  // namespace gat::ops
