#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/concat.h"

namespace gat::ops::cuda_impl {

void copy_rows(Device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
               size_t rows) {
  if (rows == 1) {  // one contiguous block: no pitch limits apply
    CUDA_CHECK(cudaMemcpyAsync(dst, src, row_bytes, cudaMemcpyDeviceToDevice, cuda::stream()));
    return;
  }
  CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice,
                               cuda::stream()));
}

}  // namespace gat::ops::cuda_impl
