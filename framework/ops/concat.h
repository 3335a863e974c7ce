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

#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor concat(const std::vector<Tensor>& inputs, int64_t axis);

namespace cuda_impl {  // concat.cu
// Device-to-device copy of `rows` rows of `row_bytes` each: row r goes from src + r * src_pitch to
// dst + r * dst_pitch (bytes), on gat::cuda::stream().
void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
               size_t rows);
}  // namespace cuda_impl

}  // namespace gat::ops
