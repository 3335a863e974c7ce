// concat(inputs, axis) (torch.cat) and stack(inputs, axis): join tensors along one axis, with
// autograd (any dtype, CPU and CUDA).
//
//   concat: inputs[k]: (d0, ..., L_k, ..., dn), equal outside `axis`, same dtype and device
//           -> (d0, ..., sum_k L_k, ..., dn)                       (axis < 0 counts from the end)
//   stack:  inputs[k]: all of one shape (d0, ..., dn) -> (d0, ..., K, ..., dn) with the new axis
//           of K = inputs.size() at `axis` in [-(n + 2), n + 1] (< 0 counts from the end of the
//           output): concat of the inputs reshaped with a 1 at `axis`.
// No inputs, inputs of different shapes (beyond `axis` for concat), dtypes or devices, or an axis
// out of range throw gat::Error naming the op, the input and the shapes.
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
Tensor stack(const std::vector<Tensor>& inputs, int64_t axis);

// The kernel (docs/design.md, the op pattern), of the forward and the backward pass: a copy of
// `rows` rows of `row_bytes` each, row r from src + r * src_pitch to dst + r * dst_pitch (bytes),
// both on one device (on CUDA, on gat::cuda::stream()). kernels:: runs cpu_impl:: or cuda_impl::
// by `device`, which the implementations, each of one device, do not read.
GAT_DECLARE_KERNEL_FN(copy_rows, (Device device, void* dst, size_t dst_pitch, const void* src,
                                  size_t src_pitch, size_t row_bytes, size_t rows))

}  // namespace gat::ops
